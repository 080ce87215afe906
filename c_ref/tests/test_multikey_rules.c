/*
 * test_multikey_rules.c -- the trace-level rules of the multi-key variants of
 * Valkey PR #3389 (multikey=window-3389: the sliding window) and Redis PR
 * #14899 (multikey=redis-14899 and its pipeline guard, redis-14899-guard),
 * and batched == naive replies for both (commands.c, c_ref/FIDELITY.md); the
 * chunk option of Redis #15133's rule, and which variants read batch and chunk.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../emit.h"
#include "../keyspace.h"
#include "../kvsim_cref.h"
#include "../workload.h"
#include "testhelp.h"
#include "traced.h"

static ksWorkloadSpec mgetSpec(const char *variant, const char *table, int kpc, int batch, uint64_t ops, int depth) {
    ksWorkloadSpec s;
    ksWorkloadSpecInit(&s, "mget");
    s.keys = 20000;
    s.ops = ops;
    s.keys_per_command = kpc;
    s.batch = batch;
    s.variant = variant;
    s.table = table;
    s.pipeline_depth = depth;
    s.pipeline = depth > 1 ? "lookahead" : "naive";
    return s;
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

/* #3389: per MGET of 100 keys, one batch of the first `offset` keys, then one
 * bucket prefetch per later key, issued while key j - offset runs: the window
 * prefetch of key j lands between the lookups of keys j - offset - 1 and
 * j - offset, on the bucket key j's lookup reads `offset` lookups later. */
static int test_window_3389(void) {
    const int offsets[] = {4, 16, 32};
    for (int o = 0; o < 3; o++) {
        int off = offsets[o], kpc = 100, cmds = 6;
        ksWorkloadSpec s = mgetSpec("window-3389", "hashtable", kpc, off, (uint64_t)cmds, 1);
        uint64_t n;
        kvtRecord *r = measured(&s, &n);
        TEST_ASSERT(r != NULL);
        int cmd = -1, nb = 0, nf = 0, np = 0;
        uint64_t F[128], P[128];
        int Fpos[128], Ppos[128];
        for (uint64_t i = 0; i <= n; i++) {
            int end = i == n || (r[i].kind == KVT_MARKER && r[i].flags == KVT_MARK_COMMAND);
            if (end && cmd >= 0) { /* check the command just finished */
                TEST_ASSERT_MSG(nb == 1 && nf == kpc && np == kpc - off, "offset %d: %d batches %d finds %d prefetches",
                                off, nb, nf, np);
                for (int k = 0; k < np; k++) {
                    TEST_ASSERT_MSG(P[k] == F[k + off], "offset %d: prefetch %d is not key %d's bucket", off, k,
                                    k + off);
                    TEST_ASSERT(Ppos[k] < Fpos[k] && (k == 0 || Ppos[k] > Fpos[k - 1]));
                }
            }
            if (i == n) break;
            if (end) {
                cmd++;
                nb = nf = np = 0;
                continue;
            }
            if (r[i].kind == KVT_MARKER && r[i].flags == KVT_MARK_BATCH) {
                TEST_ASSERT((int)r[i].addr == off);
                nb++;
            }
            if (r[i].kind == KVT_LOAD && r[i].site == KS_SITE_HT_FIND_BUCKET && nf < 128) {
                Fpos[nf] = (int)i;
                F[nf++] = r[i].addr & ~63ULL;
            }
            if (r[i].kind == KVT_PREFETCH && r[i].site == KS_SITE_HT_PREFETCH_BUCKET && np < 128) {
                Ppos[np] = (int)i;
                P[np++] = r[i].addr & ~63ULL;
            }
        }
        TEST_ASSERT(cmd == cmds - 1);
        free(r);
    }
    return 0;
}

/* #3389 covers DEL, EXISTS, MSET and MSETNX too: the same count of window
 * prefetches (n - offset per pass) and the same replies as without it. */
static int test_window_3389_other_commands(void) {
    ksKeyspace *a = ksCreate(""), *b = ksCreate("");
    char q[8192];
    size_t ql = 0;
    const char *cmds[] = {"MSET", "MSETNX", "EXISTS", "DEL", "EXISTS", "MSETNX"};
    for (int c = 0; c < 6; c++) {
        int pairs = c == 0 || c == 1 || c == 5;
        ql += (size_t)snprintf(q + ql, sizeof(q) - ql, "*%d\r\n$%zu\r\n%s\r\n", 1 + 40 * (pairs ? 2 : 1),
                               strlen(cmds[c]), cmds[c]);
        for (int k = 0; k < 40; k++) {
            int key = c == 5 ? 100 + k : k;
            ql += (size_t)snprintf(q + ql, sizeof(q) - ql, "$4\r\nk%03d\r\n", key);
            if (pairs) ql += (size_t)snprintf(q + ql, sizeof(q) - ql, "$1\r\nv\r\n");
        }
    }
    const uint8_t *ra, *rb;
    size_t la, lb, ca, cb;
    TEST_ASSERT(ksExecute(a, "", (const uint8_t *)q, ql, &ra, &la, &ca) == 0);
    char want[512];
    memcpy(want, ra, la);
    TEST_ASSERT(ksExecute(b, "multikey=window-3389 batch=8", (const uint8_t *)q, ql, &rb, &lb, &cb) == 0);
    TEST_ASSERT(la == lb && !memcmp(want, rb, la) && ca == cb);
    TEST_ASSERT(!memcmp(rb, "+OK\r\n:0\r\n:40\r\n:40\r\n:0\r\n:1\r\n", lb));
    TEST_ASSERT(ksCheckValid(b) == 0 && ksDbSize(b) == 40);
    ksDestroy(a);
    ksDestroy(b);
    return 0;
}

typedef struct {
    int cross16, intra64, intra36, other, prefetches;
} batchCounts;

static int countBatches(const ksWorkloadSpec *s, batchCounts *bc) {
    memset(bc, 0, sizeof(*bc));
    uint64_t n;
    kvtRecord *r = measured(s, &n);
    TEST_ASSERT(r != NULL);
    for (uint64_t i = 0; i < n; i++) {
        if (r[i].kind == KVT_PREFETCH) bc->prefetches++;
        if (r[i].kind != KVT_MARKER || r[i].flags != KVT_MARK_BATCH) continue;
        if (r[i].addr == 16) bc->cross16++;
        else if (r[i].addr == 64) bc->intra64++;
        else if (r[i].addr == 36) bc->intra36++;
        else bc->other++;
    }
    free(r);
    return 0;
}

/* #14899 on table=dict: pipelined MGETs of 100 keys (10 per query buffer, the
 * lookahead's 16-key batches): without the guard every MGET prefetches its
 * keys again in chunks of 64 and 36 after the cross-command batch took its
 * first 16 (the double prefetch of the regression); with the guard only the
 * cross-command batches remain.  Not pipelined, both prefetch in-command. */
static int test_redis_14899_guard(void) {
    batchCounts none, plain, guard;
    ksWorkloadSpec s = mgetSpec("none", "dict", 100, 16, 20, 10);
    TEST_ASSERT(countBatches(&s, &none) == 0);
    s.variant = "redis-14899";
    TEST_ASSERT(countBatches(&s, &plain) == 0);
    s.variant = "redis-14899-guard";
    TEST_ASSERT(countBatches(&s, &guard) == 0);
    TEST_ASSERT_MSG(none.cross16 == 20 && none.intra64 == 0 && none.other == 0, "%d %d", none.cross16, none.intra64);
    TEST_ASSERT_MSG(plain.cross16 == 20 && plain.intra64 == 20 && plain.intra36 == 20 && plain.other == 0, "%d %d %d",
                    plain.cross16, plain.intra64, plain.intra36);
    TEST_ASSERT(guard.cross16 == 20 && guard.intra64 == 0 && guard.intra36 == 0 && guard.other == 0);
    TEST_ASSERT(guard.prefetches == none.prefetches && plain.prefetches > 2 * none.prefetches);
    /* one MGET per query buffer, naive pipeline: nothing pipelined, both prefetch */
    s = mgetSpec("redis-14899-guard", "dict", 100, 16, 20, 1);
    TEST_ASSERT(countBatches(&s, &guard) == 0);
    s.variant = "redis-14899";
    TEST_ASSERT(countBatches(&s, &plain) == 0);
    TEST_ASSERT(guard.intra64 == 20 && guard.intra36 == 20 && guard.cross16 == 0);
    TEST_ASSERT(plain.intra64 == 20 && plain.intra36 == 20 && plain.prefetches == guard.prefetches);
    /* 14899 is MGET's only: an MSET runs as without it */
    ksKeyspace *a = ksCreate("table=dict");
    const char *q = "*5\r\n$4\r\nMSET\r\n$1\r\na\r\n$1\r\n1\r\n$1\r\nb\r\n$1\r\n2\r\n";
    const uint8_t *rep;
    size_t rl, used;
    TEST_ASSERT(ksExecute(a, "multikey=redis-14899", (const uint8_t *)q, strlen(q), &rep, &rl, &used) == 0);
    TEST_ASSERT(rl == 5 && !memcmp(rep, "+OK\r\n", 5));
    ksDestroy(a);
    return 0;
}

/* batched == naive: the workloads' reply CRCs under the new variants, both tables,
 * pipelined or not, and MSET into an empty keyspace and over random keys. */
static int test_same_replies(void) {
    const char *variants[] = {"none", "window-3389", "redis-14899", "redis-14899-guard"};
    for (int t = 0; t < 2; t++) {
        for (int w = 0; w < 3; w++) {
            uint32_t crc = 0;
            for (int v = 0; v < 4; v++) {
                ksWorkloadSpec s;
                ksWorkloadSpecInit(&s, w == 0 ? "mget" : "mset");
                s.keys = 3000;
                s.ops = 60;
                s.keys_per_command = 70;
                s.batch = 1 + 13 * w;
                s.table = t ? "dict" : "hashtable";
                s.variant = variants[v];
                s.pipeline_depth = w == 0 ? 5 : 1;
                s.pipeline = w == 0 ? "lookahead" : "naive";
                if (w == 2) s.mset_keys = "random";
                ksWorkloadResult r;
                char err[256];
                TEST_ASSERT_MSG(ksWorkloadRun(&s, &r, err, sizeof(err)) == 0, "%s", err);
                if (v == 0) crc = r.reply_crc32;
                TEST_ASSERT_MSG(r.reply_crc32 == crc, "%s %s %d", s.table, variants[v], w);
            }
        }
    }
    return 0;
}

/* Mark option `name` given, as the CLI does (main.c). */
static void given(ksWorkloadSpec *s, const char *name) {
    s->given |= 1ULL << (ksWorkloadOptionFind(name) - ksWorkloadOptions);
}

/* Redis #15133's rule with chunk=c: c keys while >= 2c remain, else the rest;
 * a batch of one key is no batch (no BATCH marker). */
static int test_chunk_15133(void) {
    const int chunks[] = {1, 5, 16, 32};
    const char *tables[] = {"hashtable", "dict"};
    for (int t = 0; t < 2; t++)
        for (int c = 0; c < 4; c++) {
            int kpc = 45, cmds = 3;
            ksWorkloadSpec s = mgetSpec("chunk-15133", tables[t], kpc, 16, (uint64_t)cmds, 1);
            s.chunk = chunks[c];
            given(&s, "chunk");
            int want[64], nw = 0;
            for (int left = kpc; left > 0;) {
                int b = left >= 2 * chunks[c] ? chunks[c] : left;
                if (b > 1) want[nw++] = b;
                left -= b;
            }
            uint64_t n;
            kvtRecord *r = measured(&s, &n);
            TEST_ASSERT(r != NULL);
            int got = 0;
            for (uint64_t i = 0; i < n; i++)
                if (r[i].kind == KVT_MARKER && r[i].flags == KVT_MARK_BATCH) {
                    TEST_ASSERT_MSG(got < nw * cmds && (int)r[i].addr == want[got % nw], "%s chunk %d: batch %d has %d keys",
                                    tables[t], chunks[c], got, (int)r[i].addr);
                    got++;
                }
            free(r);
            TEST_ASSERT_MSG(got == nw * cmds, "%s chunk %d: %d batches, want %d", tables[t], chunks[c], got, nw * cmds);
        }
    return 0;
}

/* ksVariantsUseOption: which variants read batch and chunk, per table. */
static int test_variants_use_option(void) {
    const struct {
        const char *spec;
        int batch_ht, batch_dict, chunk_ht, chunk_dict;
    } cases[] = {
        {"pipeline=naive", 0, 0, 0, 0},
        {"pipeline=lookahead", 1, 1, 0, 0},
        {"pipeline=lookahead-hash-once", 1, 1, 0, 0},
        {"multikey=batch", 1, 0, 0, 1},
        {"multikey=batch-hash-once", 1, 0, 0, 1},
        {"multikey=chunk-15133", 0, 0, 1, 1},
        {"multikey=window-3389", 1, 1, 0, 0},
        {"multikey=redis-15043", 0, 0, 0, 0},
        {"multikey=redis-14899", 0, 0, 0, 0},
        {"pipeline=lookahead multikey=chunk-15133", 1, 1, 1, 1},
        {"hash=find-batch-4017", 0, 0, 0, 0},
    };
    char err[256];
    for (int dict = 0; dict < 2; dict++) {
        ksKeyspace *ks = ksKeyspaceNew(dict ? "table=dict" : "table=hashtable", err, sizeof(err));
        TEST_ASSERT_MSG(ks != NULL, "%s", err);
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
            ksVariants v;
            TEST_ASSERT(ksParseVariants(ks, cases[i].spec, &v) == 0);
            int wb = dict ? cases[i].batch_dict : cases[i].batch_ht;
            int wc = dict ? cases[i].chunk_dict : cases[i].chunk_ht;
            TEST_ASSERT_MSG(ksVariantsUseOption(ks, &v, "batch") == wb, "%s dict=%d batch", cases[i].spec, dict);
            TEST_ASSERT_MSG(ksVariantsUseOption(ks, &v, "chunk") == wc, "%s dict=%d chunk", cases[i].spec, dict);
        }
        ksVariants v;
        TEST_ASSERT(ksParseVariants(ks, "multikey=chunk-15133", &v) == 0 && v.chunk == KS_DEFAULT_CHUNK);
        TEST_ASSERT(ksParseVariants(ks, "multikey=chunk-15133 chunk=7", &v) == 0 && v.chunk == 7);
        TEST_ASSERT(ksParseVariants(ks, "chunk=0", &v) != 0 && strstr(ks->err, "bad chunk '0'"));
        TEST_ASSERT(ksParseVariants(ks, "chunk=33", &v) != 0 && strstr(ks->err, "bad chunk '33'"));
        ksKeyspaceFree(ks);
    }
    /* the workload run refuses a given size no variant reads, and names both */
    ksWorkloadSpec s = mgetSpec("chunk-15133", "dict", 10, 8, 2, 1);
    given(&s, "batch");
    ksWorkloadResult res;
    TEST_ASSERT(ksWorkloadRun(&s, &res, err, sizeof(err)) != 0);
    TEST_ASSERT_MSG(strstr(err, "--batch 8: not used by multikey=chunk-15133 pipeline=naive on table=dict"), "%s", err);
    s.given = 0; /* not given: the default, ignored as before */
    TEST_ASSERT_MSG(ksWorkloadRun(&s, &res, err, sizeof(err)) == 0, "%s", err);
    return 0;
}

int main(int argc, char **argv) {
    TEST_INIT(argc, argv);
    RUN(test_window_3389);
    RUN(test_window_3389_other_commands);
    RUN(test_redis_14899_guard);
    RUN(test_same_replies);
    RUN(test_chunk_15133);
    RUN(test_variants_use_option);
    return TEST_DONE();
}
