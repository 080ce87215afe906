/*
 * test_multikey_pending.c -- the trace-level rules of DEL, EXISTS and TOUCH
 * under every multi-key variant that applies to them (commands.c countKeysGeneric:
 * multikey=batch's first `batch` keys, #15133's chunks, #3389's window), of
 * the all-pending pipeline batch (pipeline=all-pending-14754: Redis #14440's
 * lookahead parsing, #14754's batch over every pending command, #14017's
 * 2 x batch sizing; pipeline.c ksPipelineAllPending), and batched == naive
 * replies for both (c_ref/FIDELITY.md); TOUCH's access clock and counts.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../emit.h"
#include "../keyspace.h"
#include "../kvsim_cref.h"
#include "../t_hash.h"
#include "../workload.h"
#include "testhelp.h"
#include "traced.h"

static ksWorkloadSpec spec(const char *workload, const char *variant, const char *table, int kpc, int batch,
                           uint64_t ops, int depth, const char *pipeline) {
    ksWorkloadSpec s;
    ksWorkloadSpecInit(&s, workload);
    s.keys = 20000;
    s.ops = ops;
    s.keys_per_command = kpc;
    s.batch = batch;
    s.variant = variant;
    s.table = table;
    s.pipeline_depth = depth;
    s.pipeline = pipeline;
    return s;
}

/* Mark option `name` given, as the CLI does (main.c). */
static void given(ksWorkloadSpec *s, const char *name) {
    s->given |= 1ULL << (ksWorkloadOptionFind(name) - ksWorkloadOptions);
}

static kvtRecord *measured(const ksWorkloadSpec *s, uint64_t *n) {
    size_t len;
    uint8_t *b = traceTo(s, &len, 4096);
    if (!b) return NULL;
    kvtRecord *r = records(b, len, n);
    free(b);
    uint64_t i = 0;
    while (i < *n && !(r[i].kind == KVT_MARKER && r[i].flags == KVT_MARK_PHASE)) i++;
    memmove(r, r + i, sizeof(*r) * (size_t)(*n - i));
    *n -= i;
    return r;
}

static int isMark(const kvtRecord *r, int m) { return r->kind == KVT_MARKER && r->flags == m; }

/* The BATCH markers' key counts of a traced run, in order (at most cap). */
static int batchSizes(const ksWorkloadSpec *s, int *sizes, int cap, int *nsizes) {
    uint64_t n;
    kvtRecord *r = measured(s, &n);
    TEST_ASSERT(r != NULL);
    *nsizes = 0;
    for (uint64_t i = 0; i < n; i++)
        if (isMark(&r[i], KVT_MARK_BATCH)) {
            TEST_ASSERT(*nsizes < cap);
            sizes[(*nsizes)++] = (int)r[i].addr;
        }
    free(r);
    return 0;
}

/* multikey=batch on a hashtable (Valkey's cross-command batch holding the
 * command alone): per EXISTS of 40 keys one batch of its first `batch` keys,
 * all prefetched before its first lookup, in argument order (the round
 * robin's first turn: the bucket prefetched k-th is the bucket the k-th
 * lookup reads; later turns may prefetch a rehashing table's bucket too);
 * the keys after them get no prefetch.  DEL: the same batches. */
static int test_first_batch(void) {
    const int batches[] = {4, 16, 64};
    for (int b = 0; b < 3; b++) {
        int kpc = 40, cmds = 5, want = batches[b] < kpc ? batches[b] : kpc;
        ksWorkloadSpec s = spec("exists", "batch", "hashtable", kpc, batches[b], (uint64_t)cmds, 1, "naive");
        uint64_t n;
        kvtRecord *r = measured(&s, &n);
        TEST_ASSERT(r != NULL);
        int cmd = -1, nb = 0, nf = 0, np = 0;
        uint64_t F[64], P[64];
        int Fpos[64], Ppos[64];
        for (uint64_t i = 0; i <= n; i++) {
            int end = i == n || isMark(&r[i], KVT_MARK_COMMAND);
            if (end && cmd >= 0) {
                TEST_ASSERT_MSG(nb == 1 && nf == kpc && np >= want, "batch %d: %d batches %d finds %d prefetches",
                                batches[b], nb, nf, np);
                for (int k = 0; k < want; k++) {
                    TEST_ASSERT_MSG(P[k] == F[k], "batch %d: prefetch %d is not key %d's bucket", batches[b], k, k);
                }
                for (int k = 0; k < np; k++) TEST_ASSERT(Ppos[k] < Fpos[0]);
            }
            if (i == n) break;
            if (end) {
                cmd++;
                nb = nf = np = 0;
                continue;
            }
            if (isMark(&r[i], KVT_MARK_BATCH)) {
                TEST_ASSERT((int)r[i].addr == want);
                nb++;
            }
            if (r[i].kind == KVT_LOAD && r[i].site == KS_SITE_HT_FIND_BUCKET && nf < 64) {
                Fpos[nf] = (int)i;
                F[nf++] = r[i].addr & ~63ULL;
            }
            if (r[i].kind == KVT_PREFETCH && r[i].site == KS_SITE_HT_INCR_PREFETCH_BUCKET && np < 64) {
                Ppos[np] = (int)i;
                P[np++] = r[i].addr & ~63ULL;
            }
        }
        TEST_ASSERT(cmd == cmds - 1);
        free(r);
        int sizes[64], ns;
        for (int w = 0; w < 2; w++) {
            s = spec(w ? "touch" : "del", "batch", "hashtable", kpc, batches[b], (uint64_t)cmds, 1, "naive");
            TEST_ASSERT(batchSizes(&s, sizes, 64, &ns) == 0);
            TEST_ASSERT(ns == cmds);
            for (int i = 0; i < ns; i++) TEST_ASSERT(sizes[i] == want);
        }
    }
    return 0;
}

/* Chunks (multikey=chunk-15133 on both tables, multikey=batch on a dict):
 * `chunk` keys while >= 2 x chunk remain, else the rest; DEL, EXISTS, TOUCH. */
static int test_chunks(void) {
    const char *workloads[] = {"del", "exists", "touch"};
    const char *tables[] = {"hashtable", "dict"};
    for (int w = 0; w < 3; w++)
        for (int t = 0; t < 2; t++)
            for (int v = 0; v < 2; v++) {
                if (v == 1 && t == 0) continue; /* batch on a hashtable: test_first_batch */
                int kpc = 45, cmds = 3, chunk = 7;
                ksWorkloadSpec s = spec(workloads[w], v ? "batch" : "chunk-15133", tables[t], kpc, 16, (uint64_t)cmds,
                                        1, "naive");
                s.chunk = chunk;
                given(&s, "chunk");
                int want[64], nw = 0;
                for (int left = kpc; left > 0;) {
                    int b = left >= 2 * chunk ? chunk : left;
                    if (b > 1) want[nw++] = b;
                    left -= b;
                }
                int sizes[64], ns;
                TEST_ASSERT(batchSizes(&s, sizes, 64, &ns) == 0);
                TEST_ASSERT_MSG(ns == nw * cmds, "%s %s: %d batches, want %d", workloads[w], tables[t], ns, nw * cmds);
                for (int i = 0; i < ns; i++) TEST_ASSERT(sizes[i] == want[i % nw]);
            }
    return 0;
}

/* #3389's window on DEL, EXISTS and TOUCH: one batch of the first `offset`
 * keys, then one bucket prefetch per later key (n - offset per command). */
static int test_window(void) {
    const char *workloads[] = {"del", "exists", "touch"};
    for (int w = 0; w < 3; w++) {
        int kpc = 50, cmds = 4, off = 8;
        ksWorkloadSpec s = spec(workloads[w], "window-3389", "hashtable", kpc, off, (uint64_t)cmds, 1, "naive");
        uint64_t n;
        kvtRecord *r = measured(&s, &n);
        TEST_ASSERT(r != NULL);
        int nb = 0, np = 0;
        for (uint64_t i = 0; i < n; i++) {
            if (isMark(&r[i], KVT_MARK_BATCH)) {
                TEST_ASSERT((int)r[i].addr == off);
                nb++;
            }
            if (r[i].kind == KVT_PREFETCH && r[i].site == KS_SITE_HT_PREFETCH_BUCKET) np++;
        }
        free(r);
        TEST_ASSERT_MSG(nb == cmds && np == cmds * (kpc - off), "%s: %d batches %d window prefetches", workloads[w],
                        nb, np);
    }
    return 0;
}

/* pipeline=all-pending-14754: per query buffer, parse rounds of up to 16
 * commands; a round of more than one command has one batch of min(2 x batch,
 * its keys) keys (a round of one: none), in argument order across commands. */
static int test_all_pending_batches(void) {
    const struct {
        int depth, kpc, batch, ops;
    } cases[] = {{10, 100, 16, 20}, {10, 3, 16, 20}, {20, 2, 4, 40}, {1, 100, 16, 5}, {5, 1, 16, 10}};
    const char *tables[] = {"hashtable", "dict"};
    for (int t = 0; t < 2; t++)
        for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
            int depth = cases[c].depth, kpc = cases[c].kpc, batch = cases[c].batch, ops = cases[c].ops;
            ksWorkloadSpec s = spec("mget", "none", tables[t], kpc, batch, (uint64_t)ops, depth, "all-pending-14754");
            int want[64], nw = 0;
            for (int done = 0; done < ops; done += depth) /* one query buffer */
                for (int round = 0; round < depth; round += 16) {
                    int cmds = depth - round < 16 ? depth - round : 16;
                    int keys = cmds * kpc < 2 * batch ? cmds * kpc : 2 * batch;
                    if (cmds > 1 && keys > 1) want[nw++] = keys;
                }
            int sizes[64], ns;
            TEST_ASSERT(batchSizes(&s, sizes, 64, &ns) == 0);
            TEST_ASSERT_MSG(ns == nw, "%s depth %d kpc %d: %d batches, want %d", tables[t], depth, kpc, ns, nw);
            for (int i = 0; i < ns; i++)
                TEST_ASSERT_MSG(sizes[i] == want[i], "%s depth %d: batch %d has %d keys, want %d", tables[t], depth,
                                i, sizes[i], want[i]);
        }
    return 0;
}

/* all-pending on a hashtable, 10 GETs of distinct existing keys per buffer:
 * all ten buckets prefetched before the first lookup, the k-th prefetch the
 * k-th command's bucket. */
static int test_all_pending_order(void) {
    ksWorkloadSpec s;
    ksWorkloadSpecInit(&s, "pipeline");
    s.keys = 20000;
    s.ops = 10;
    s.depth = 10;
    s.variant = "all-pending-14754";
    s.table = "hashtable";
    uint64_t n;
    kvtRecord *r = measured(&s, &n);
    TEST_ASSERT(r != NULL);
    uint64_t F[16], P[16];
    int Fpos[16], Ppos[16], nf = 0, np = 0;
    for (uint64_t i = 0; i < n; i++) {
        if (r[i].kind == KVT_LOAD && r[i].site == KS_SITE_HT_FIND_BUCKET && nf < 16) {
            Fpos[nf] = (int)i;
            F[nf++] = r[i].addr & ~63ULL;
        }
        if (r[i].kind == KVT_PREFETCH && r[i].site == KS_SITE_HT_INCR_PREFETCH_BUCKET && np < 16) {
            Ppos[np] = (int)i;
            P[np++] = r[i].addr & ~63ULL;
        }
    }
    free(r);
    TEST_ASSERT_MSG(np == 10 && nf == 10, "%d prefetches %d finds", np, nf);
    for (int k = 0; k < 10; k++) TEST_ASSERT(P[k] == F[k] && Ppos[k] < Fpos[0]);
    return 0;
}

/* #14899 under all-pending, 10 pipelined MGETs of 100 keys on a dict: one
 * cross-command batch of 32 keys per buffer; without the guard every MGET
 * also prefetches its keys in chunks of 64 and 36; with it only the last
 * MGET of the buffer does (pending_cmds.ready_len is 1 there). */
static int test_all_pending_14899(void) {
    int sizes[64], ns;
    ksWorkloadSpec s = spec("mget", "redis-14899", "dict", 100, 16, 20, 10, "all-pending-14754");
    TEST_ASSERT(batchSizes(&s, sizes, 64, &ns) == 0);
    int c32 = 0, c64 = 0, c36 = 0;
    for (int i = 0; i < ns; i++) c32 += sizes[i] == 32, c64 += sizes[i] == 64, c36 += sizes[i] == 36;
    TEST_ASSERT_MSG(c32 == 2 && c64 == 20 && c36 == 20 && ns == 42, "%d %d %d %d", c32, c64, c36, ns);
    s.variant = "redis-14899-guard";
    TEST_ASSERT(batchSizes(&s, sizes, 64, &ns) == 0);
    c32 = c64 = c36 = 0;
    for (int i = 0; i < ns; i++) c32 += sizes[i] == 32, c64 += sizes[i] == 64, c36 += sizes[i] == 36;
    TEST_ASSERT_MSG(c32 == 2 && c64 == 2 && c36 == 2 && ns == 6, "%d %d %d %d", c32, c64, c36, ns);
    return 0;
}

/* batched == naive: DEL, EXISTS and TOUCH under every variant that applies,
 * both tables, pipelined (naive, lookahead, all-pending) or not, over repeated
 * runs (DEL's keys restored between them); MGET under all-pending. */
static int test_same_replies(void) {
    const char *variants[] = {"none", "batch", "chunk-15133", "window-3389", "batch-hash-once", "redis-14899-guard"};
    const char *pipes[] = {"naive", "lookahead", "all-pending-14754"};
    const char *workloads[] = {"del", "exists", "mget", "touch"};
    for (int t = 0; t < 2; t++)
        for (int w = 0; w < 4; w++) {
            uint32_t crc = 0;
            int first = 1;
            for (int v = 0; v < 6; v++)
                for (int p = 0; p < 3; p++) {
                    ksWorkloadSpec s = spec(workloads[w], variants[v], t ? "dict" : "hashtable", 70, 5, 60, 4, pipes[p]);
                    s.keys = 3000;
                    s.repeat = 2;
                    ksWorkloadResult r;
                    char err[256];
                    TEST_ASSERT_MSG(ksWorkloadRun(&s, &r, err, sizeof(err)) == 0, "%s", err);
                    if (first) crc = r.reply_crc32;
                    first = 0;
                    TEST_ASSERT_MSG(r.reply_crc32 == crc, "%s %s %s %s", workloads[w], s.table, variants[v], pipes[p]);
                }
        }
    return 0;
}

/* UNLINK is DEL (c_ref reclaims synchronously), batched like it. */
static int test_unlink(void) {
    ksKeyspace *a = ksCreate("");
    const char *q = "*5\r\n$4\r\nMSET\r\n$1\r\na\r\n$1\r\n1\r\n$1\r\nb\r\n$1\r\n2\r\n"
                    "*4\r\n$6\r\nUNLINK\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n";
    const uint8_t *rep;
    size_t rl, used;
    TEST_ASSERT(ksExecute(a, "multikey=batch batch=2", (const uint8_t *)q, strlen(q), &rep, &rl, &used) == 0);
    TEST_ASSERT(rl == 9 && !memcmp(rep, "+OK\r\n:2\r\n", 9));
    TEST_ASSERT(ksDbSize(a) == 0 && ksCheckValid(a) == 0);
    ksDestroy(a);
    return 0;
}

/* The LRU clock (seconds, 24 bits) of the object at `key`, or -1 if absent. */
static long keyLru(ksKeyspace *ks, const char *key) {
    ksCur = ks;
    ksKeyInfo ki;
    uint8_t kb[64];
    ksKeyResolve(ks, sdsWriteAt(kb, SDS_TYPE_8, key, strlen(key), strlen(key)), &ki);
    void *e = ksDbFind(ks, &ki);
    return e ? (long)ksEntryObject(ks, e, 0, NULL)->lru : -1;
}

/* TOUCH (expire.c touchCommand: lookupKeyRead per key) counts the keys that
 * exist and stores the clock in each found key's object, a repeated key once
 * per mention; EXISTS (LOOKUP_NOTOUCH) leaves it; an expired key is deleted
 * and not counted; TOUCH counts the keyspace hits and misses.  The same under
 * every variant that batches it, both tables. */
static int test_touch(void) {
    const char *variants[] = {"", "multikey=batch batch=2", "multikey=chunk-15133 chunk=1",
                              "multikey=window-3389 batch=1", "multikey=batch-hash-once"};
    for (int t = 0; t < 2; t++)
        for (int v = 0; v < 5; v++) {
            ksKeyspace *ks = ksCreate(t ? "table=dict" : "");
            const char *q = "*5\r\n$4\r\nMSET\r\n$1\r\na\r\n$1\r\n1\r\n$1\r\nb\r\n$1\r\n2\r\n"
                            "*5\r\n$3\r\nSET\r\n$1\r\ne\r\n$1\r\n3\r\n$2\r\nPX\r\n$4\r\n1000\r\n";
            const uint8_t *rep;
            size_t rl, used;
            TEST_ASSERT(ksExecute(ks, variants[v], (const uint8_t *)q, strlen(q), &rep, &rl, &used) == 0);
            TEST_ASSERT(keyLru(ks, "a") == 0 && keyLru(ks, "b") == 0);
            ksSetTimeMs(ks, 7500);
            q = "*3\r\n$6\r\nEXISTS\r\n$1\r\na\r\n$1\r\nb\r\n";
            TEST_ASSERT(ksExecute(ks, variants[v], (const uint8_t *)q, strlen(q), &rep, &rl, &used) == 0);
            TEST_ASSERT(rl == 4 && !memcmp(rep, ":2\r\n", 4));
            TEST_ASSERT(keyLru(ks, "a") == 0 && keyLru(ks, "b") == 0);
            uint64_t hits = ks->stats.keyspace_hits, misses = ks->stats.keyspace_misses;
            q = "*6\r\n$5\r\nTOUCH\r\n$1\r\na\r\n$1\r\nx\r\n$1\r\ne\r\n$1\r\na\r\n$1\r\ny\r\n";
            TEST_ASSERT(ksExecute(ks, variants[v], (const uint8_t *)q, strlen(q), &rep, &rl, &used) == 0);
            TEST_ASSERT_MSG(rl == 4 && !memcmp(rep, ":2\r\n", 4), "%s: %.*s", variants[v], (int)rl, rep);
            TEST_ASSERT(keyLru(ks, "a") == 7 && keyLru(ks, "b") == 0 && keyLru(ks, "e") == -1);
            TEST_ASSERT(ks->stats.keyspace_hits == hits + 2 && ks->stats.keyspace_misses == misses + 3);
            TEST_ASSERT(ksDbSize(ks) == 2 && ksCheckValid(ks) == 0);
            ksDestroy(ks);
        }
    return 0;
}

int main(int argc, char **argv) {
    TEST_INIT(argc, argv);
    RUN(test_first_batch);
    RUN(test_chunks);
    RUN(test_window);
    RUN(test_all_pending_batches);
    RUN(test_all_pending_order);
    RUN(test_all_pending_14899);
    RUN(test_same_replies);
    RUN(test_unlink);
    RUN(test_touch);
    return TEST_DONE();
}
