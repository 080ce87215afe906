/*
 * test_fidelity.c -- trace-level checks that c_ref does what the upstream code
 * it models does (c_ref/FIDELITY.md): which lines a batch prefetches, which
 * passes prefetch, and that every load whose address came from a loaded
 * pointer records that dependency.  Each test counts records of a traced run
 * (the tr_* copy of the keyspace), so it fails on a build without the rule:
 *
 *   test_dict_batch_prefetches_raw_values    Redis PR #15133 dbDictPrefetchEntryValue
 *   test_msetnx_write_pass_not_prefetched    Redis PR #15133 `do_prefetch &&= !nx`
 *   test_valkey_batch_fills_key_by_key       Valkey memory_prefetch.c batch rule (#2092)
 *   test_prefetched_keys_hashed_twice        Valkey findInit + lookupKey hash twice
 *   test_get_dirties_the_object              Valkey lookupKey's LRU store
 *   test_cluster_key_count_tree              Valkey kvstore cumulativeKeyCountAdd
 *   test_redis_15043_prefetches_bucket_cells_only Redis PR #15043 msetPrefetchBatch
 *   test_iterator_object_loads_depend_on_bucket   object header <- bucket (KEYS, SAVE)
 *   test_every_pointer_load_has_its_dep      the same rule over every workload
 *   test_snapshot_crc64_and_rdbchecksum_no   Valkey crc64.c per rio write/read, rdbchecksum no
 *   test_crc64_streams_equal_one_stream      crcspeed's 2-3 streams + crc64_combine, bit-exact
 *   test_reply_crc_compares_variants         `kvsim native`'s reply_crc32 check
 *   test_dict_overwrite_keeps_direct_item    Redis dictSetKeyAtLink(newItem=0)
 *   test_dict_set_walks_once                 Redis setKey: dbFindByLink -> dictSetKeyAtLink
 *   test_dict_legacy_entry_is_the_node       Redis 7 dictEntry{key, v, next}
 *   test_dict_find_does_not_prefetch         Redis PR #14700 (no find-time prefetch)
 *   test_mset_touches_replaced_objects       setKey's lookupKeyWrite LRU store (MSET)
 *   test_load_reads_through_stdio_buffer     Valkey rioFileRead: fread's 4 KiB buffer
 *   test_rehash_cron_between_commands        Valkey databasesCron's incremental rehash
 */
#include <stdint.h>
#include <string.h>

#include "../emit.h"
#include "../keyspace.h"
#include "../kvsim_cref.h"
#include "../workload.h"
#include "testhelp.h"
#include "traced.h"

/* the format version c_ref writes, for the JSON headers of the test traces */
#define VERSION_STR_(v) #v
#define VERSION_STR VERSION_STR_(KVT_VERSION)


#define MAXREC (1u << 20)

/* --- Helpers ----------------------------------------------------------------- */

/* Append one RESP command (argv of n strings) to buf. */
static size_t resp(char *buf, size_t off, int n, const char *const *argv) {
    off += (size_t)sprintf(buf + off, "*%d\r\n", n);
    for (int i = 0; i < n; i++) off += (size_t)sprintf(buf + off, "$%zu\r\n%s\r\n", strlen(argv[i]), argv[i]);
    return off;
}

/* "MGET k0 .. k<n-1>" / "MSET k0 v .. " / "MSETNX ..." with keys named prefix<i>. */
/* n pipelined `GET <prefix>i` commands (i = 0..n-1) into buf; returns the length. */
static size_t getCmds(char *buf, const char *prefix, int n) {
    size_t off = 0;
    for (int i = 0; i < n; i++) {
        char k[32];
        snprintf(k, sizeof(k), "%s%d", prefix, i);
        const char *argv[2] = {"GET", k};
        off = resp(buf, off, 2, argv);
    }
    return off;
}

static size_t multiCmd(char *buf, size_t off, const char *cmd, const char *prefix, int n, const char *val) {
    static char names[64][32];
    const char *argv[1 + 2 * 64];
    int a = 0;
    argv[a++] = cmd;
    for (int i = 0; i < n; i++) {
        snprintf(names[i], sizeof(names[i]), "%s%d", prefix, i);
        argv[a++] = names[i];
        if (val) argv[a++] = val;
    }
    return resp(buf, off, a, argv);
}

/* Run `setup` untraced, then `query` traced; copies the records into *out. */
static int traceQuery(const char *options, const char *variant, const char *setup, size_t slen, const char *query,
                      size_t qlen, kvtRecord **out, uint32_t *n) {
    ksKeyspace *ks = tr_ksCreate(options);
    TEST_ASSERT(ks != NULL);
    const uint8_t *r;
    size_t rl, used;
    if (slen) TEST_ASSERT(tr_ksExecute(ks, variant, (const uint8_t *)setup, slen, &r, &rl, &used) == 0 && used == slen);
    FILE *f = tmpfile();
    ksEmitter *e = tr_ksEmitterOpen(f, "{\"format_version\":" VERSION_STR "}", MAXREC);
    TEST_ASSERT(e != NULL);
    TEST_ASSERT(tr_ksExecute(ks, variant, (const uint8_t *)query, qlen, &r, &rl, &used) == 0 && used == qlen);
    TEST_ASSERT(e->total_records == 0); /* everything is still in the buffer */
    *n = e->n;
    *out = malloc(sizeof(kvtRecord) * (e->n ? e->n : 1));
    memcpy(*out, e->buf, sizeof(kvtRecord) * e->n);
    tr_ksEmitterClose(e);
    fclose(f);
    tr_ksDestroy(ks);
    return 0;
}

static uint32_t countKindTag(const kvtRecord *r, uint32_t n, int kind, int tag) {
    uint32_t c = 0;
    for (uint32_t i = 0; i < n; i++) c += r[i].kind == kind && (tag < 0 || r[i].tag == tag);
    return c;
}

static uint32_t countMarkers(const kvtRecord *r, uint32_t n, int marker) {
    uint32_t c = 0;
    for (uint32_t i = 0; i < n; i++) c += r[i].kind == KVT_MARKER && r[i].flags == marker;
    return c;
}

static const char *const LAYOUTS[2] = {"table=dict layout=unified", "table=dict layout=legacy"};

/* --- Deviation 1: dict batches prefetch the RAW value ---------------------------- */

/* Redis PR #15133: dbDictPrefetchEntryValue returns kv->ptr for a RAW string,
 * so `mget --table dict --variant batch` prefetches one value line per RAW
 * value (none for embedded ones), each useful: the reply then reads that line,
 * and the prefetch depends on the object-header load that produced its address. */
static int test_dict_batch_prefetches_raw_values(void) {
    static char setup[1 << 16], query[1 << 14];
    char big[101], small[9];
    memset(big, 'v', 100);
    big[100] = '\0';
    memset(small, 's', 8);
    small[8] = '\0';
    for (int l = 0; l < 2; l++) {
        for (int raw = 0; raw <= 1; raw++) {
            size_t sl = multiCmd(setup, 0, "MSET", "key", 20, raw ? big : small);
            sl = multiCmd(setup, sl, "MSET", "other", 40, small); /* more keys in the dict */
            size_t ql = multiCmd(query, 0, "MGET", "key", 20, NULL);
            kvtRecord *r;
            uint32_t n;
            TEST_ASSERT(traceQuery(LAYOUTS[l], "multikey=batch", setup, sl, query, ql, &r, &n) == 0);
            uint32_t vp = 0, useful = 0, after_header = 0;
            for (uint32_t i = 0; i < n; i++) {
                if (r[i].kind != KVT_PREFETCH || r[i].tag != KVT_TAG_VALUE) continue;
                vp++;
                if (r[i].dep && r[i].dep <= i && r[i - r[i].dep].kind == KVT_LOAD && r[i - r[i].dep].tag == KVT_TAG_OBJECT)
                    after_header++;
                for (uint32_t j = i + 1; j < n; j++) {
                    if (r[j].kind == KVT_LOAD && r[j].tag == KVT_TAG_VALUE && (r[j].addr >> 6) == (r[i].addr >> 6)) {
                        useful++;
                        break;
                    }
                }
            }
            printf("    %s, %s values: %u value prefetches (%u read later, %u after the header load)\n",
                   LAYOUTS[l], raw ? "100 B" : "8 B", vp, useful, after_header);
            free(r);
            TEST_ASSERT_MSG(vp == (raw ? 20u : 0u), "%u value prefetches for 20 %s values", vp, raw ? "RAW" : "embedded");
            TEST_ASSERT(useful == vp && after_header == vp);
        }
    }
    /* The lookahead pipeline runs the same machine: one value prefetch per key,
     * not a second one from the driver. */
    {
        char q[4096];
        size_t ql = 0;
        for (int i = 0; i < 16; i++) {
            char k[16];
            snprintf(k, sizeof(k), "key%d", i);
            const char *argv[2] = {"GET", k};
            ql = resp(q, ql, 2, argv);
        }
        size_t sl = multiCmd(setup, 0, "MSET", "key", 20, big);
        kvtRecord *r;
        uint32_t n;
        TEST_ASSERT(traceQuery("table=dict", "pipeline=lookahead batch=16", setup, sl, q, ql, &r, &n) == 0);
        uint32_t vp = countKindTag(r, n, KVT_PREFETCH, KVT_TAG_VALUE);
        free(r);
        TEST_ASSERT_MSG(vp == 16, "lookahead on a dict: %u value prefetches for 16 GETs", vp);
    }
    return 0;
}

/* --- MSETNX: the write pass does not prefetch again --------------------------------- */

/* Sites of the batch prefetch machines (a dict lookup's own bucket/next
 * prefetch, dictFindLinkInternal's, is not one). */
static int batchSite(uint16_t site) {
    return site == KS_SITE_DICT_PREFETCH || site == KS_SITE_DICT_PREFETCH_VALUE || site == KS_SITE_HT_INCR_PREFETCH_BUCKET ||
           site == KS_SITE_HT_INCR_PREFETCH_ENTRY || site == KS_SITE_OBJ_PREFETCH_VALUE;
}

/* Redis PR #15133 msetGenericCommand: the NX check pass prefetches (batches of
 * 16 while >= 32 remain), then `do_prefetch &&= !nx`: the SET pass does not.
 * 40 new keys: batches 16 + 24 in the check pass, none in the write pass; MSET
 * (one pass) has the same two.  The chunking is #15133's (table=dict, and
 * multikey=chunk-15133 on a hashtable); Valkey's rule on a hashtable
 * (multikey=batch) prefetches one batch of the first 16 keys, once. */
static int test_msetnx_write_pass_not_prefetched(void) {
    static char setup[1 << 14], query[1 << 14];
    struct {
        const char *table, *variant;
        uint32_t batches;
    } runs[3] = {{"table=dict", "multikey=batch", 2},
                 {"table=hashtable", "multikey=chunk-15133", 2},
                 {"table=hashtable", "multikey=batch", 1}};
    for (int t = 0; t < 3; t++) {
        size_t sl = multiCmd(setup, 0, "MSET", "old", 30, "x");
        for (int nx = 0; nx <= 1; nx++) {
            size_t ql = multiCmd(query, 0, nx ? "MSETNX" : "MSET", "new", 40, "y");
            kvtRecord *r;
            uint32_t n;
            TEST_ASSERT(traceQuery(runs[t].table, runs[t].variant, setup, sl, query, ql, &r, &n) == 0);
            uint32_t batches = countMarkers(r, n, KVT_MARK_BATCH);
            /* no prefetch after the first store of the write pass */
            uint32_t first_store = n, late = 0;
            for (uint32_t i = 0; i < n; i++) {
                if (r[i].kind == KVT_STORE && (r[i].tag == KVT_TAG_OBJECT || r[i].tag == KVT_TAG_VALUE) && first_store == n)
                    first_store = i;
                if (i > first_store && r[i].kind == KVT_PREFETCH && batchSite(r[i].site)) late++;
            }
            printf("    %-15s %-20s %-6s 40 new keys: %u prefetch batches, %u batch prefetches after the first "
                   "write\n",
                   runs[t].table, runs[t].variant, nx ? "MSETNX" : "MSET", batches, late);
            free(r);
            TEST_ASSERT_MSG(batches == runs[t].batches, "%u batches", batches);
            if (nx) TEST_ASSERT_MSG(late == 0, "the write pass prefetched %u lines", late);
        }
    }
    return 0;
}

/* --- Deviation 2: Valkey's batch rule on a hashtable ------------------------------ */

typedef struct {
    uint32_t batches, first_batch;   /* BATCH markers; keys of the first */
    uint32_t buckets, before_exec;   /* bucket prefetches; those before the command runs */
    uint32_t argv_reads;             /* reads of lookup-key bytes (each hash reads them) */
} batchCounts;

/* Counts of one traced query; `exec_cmd` is the 0-based COMMAND marker of the
 * command whose execution "before_exec" stops at. */
static batchCounts countBatch(const kvtRecord *r, uint32_t n, int exec_cmd) {
    batchCounts c = {0};
    int cmds = 0, executing = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (r[i].kind == KVT_MARKER && r[i].flags == KVT_MARK_BATCH) {
            if (c.batches++ == 0) c.first_batch = (uint32_t)r[i].addr;
        }
        if (r[i].kind == KVT_MARKER && r[i].flags == KVT_MARK_COMMAND && cmds++ == exec_cmd) executing = 1;
        if (r[i].kind == KVT_PREFETCH && r[i].site == KS_SITE_HT_INCR_PREFETCH_BUCKET) {
            c.buckets++;
            c.before_exec += !executing;
        }
        c.argv_reads += r[i].kind == KVT_LOAD && r[i].tag == KVT_TAG_ARGV &&
                        (r[i].site == KS_SITE_RESP_ARGV || r[i].site == KS_SITE_KEY_REHASH);
    }
    return c;
}

/* Valkey memory_prefetch.c (as of #2092) fills the batch key by key up to
 * prefetch-batch-max-size (`for (i < num_keys && key_count <
 * max_prefetch_size)`) and has no in-command chunking:
 *   - a 50-key MGET under `pipeline=lookahead batch=16` issues exactly 16
 *     bucket prefetches, all before it runs (c_ref without the rule: none, the
 *     command ran alone, unprefetched);
 *   - GET + 50-key MGET: one batch of 16 keys, the GET's and the MGET's first
 *     15 (without the rule: the batch closed before the MGET: no prefetch);
 *   - `multikey=batch` on a hashtable prefetches the first 16 keys of a
 *     50-key MGET in one batch (without the rule: all 50, in 16 + 34), and
 *     nothing more when the lookahead has already batched them;
 *     `multikey=chunk-15133` keeps Redis #15133's chunks (16 + 16 + 18; a key
 *     whose table is rehashing has a bucket prefetched in each table). */
static int test_valkey_batch_fills_key_by_key(void) {
    static char setup[1 << 16], query[1 << 14];
    char big[101];
    memset(big, 'v', 100);
    big[100] = '\0';
    size_t sl = multiCmd(setup, 0, "MSET", "key", 50, big);
    size_t ml = multiCmd(query, 0, "MGET", "key", 50, NULL);
    static char getmget[1 << 14];
    const char *get[2] = {"GET", "key7"};
    size_t gl = resp(getmget, 0, 2, get);
    memcpy(getmget + gl, query, ml);
    gl += ml;
    struct {
        const char *variant;
        const char *q;
        size_t ql;
        int exec_cmd;
        uint32_t batches, first_batch, buckets;
    } runs[] = {
        {"pipeline=lookahead batch=16", query, ml, 0, 1, 16, 16},
        {"pipeline=lookahead batch=16", getmget, gl, 1, 1, 16, 16},
        {"pipeline=lookahead batch=4", query, ml, 0, 1, 4, 4},
        {"multikey=batch", query, ml, -1, 1, 16, 16},
        {"pipeline=lookahead multikey=batch batch=16", query, ml, 0, 1, 16, 16},
        {"multikey=chunk-15133", query, ml, -1, 3, 16, 50},
    };
    for (size_t k = 0; k < sizeof(runs) / sizeof(runs[0]); k++) {
        kvtRecord *r;
        uint32_t n;
        TEST_ASSERT(traceQuery("table=hashtable", runs[k].variant, setup, sl, runs[k].q, runs[k].ql, &r, &n) == 0);
        batchCounts c = countBatch(r, n, runs[k].exec_cmd);
        /* multikey: "before it runs" = before the MGET's first reply element */
        if (runs[k].exec_cmd < 0) {
            uint32_t first_reply = n;
            for (uint32_t i = 0; i < n && first_reply == n; i++)
                if (r[i].kind == KVT_LOAD && r[i].tag == KVT_TAG_VALUE) first_reply = i;
            c.before_exec = 0;
            for (uint32_t i = 0; i < first_reply; i++)
                c.before_exec += r[i].kind == KVT_PREFETCH && r[i].site == KS_SITE_HT_INCR_PREFETCH_BUCKET;
        }
        printf("    %-44s %s: %u batches (first: %u keys), %u bucket prefetches, %u before execution\n",
               runs[k].variant, runs[k].q == getmget ? "GET + MGET 50" : "MGET 50      ", c.batches, c.first_batch,
               c.buckets, c.before_exec);
        free(r);
        TEST_ASSERT_MSG(c.batches == runs[k].batches && c.first_batch == runs[k].first_batch, "%s: %u batches of %u",
                        runs[k].variant, c.batches, c.first_batch);
        TEST_ASSERT_MSG(runs[k].batches == 1 ? c.buckets == runs[k].buckets : c.buckets >= runs[k].buckets,
                        "%s: %u bucket prefetches", runs[k].variant, c.buckets);
        if (runs[k].batches == 1) TEST_ASSERT_MSG(c.before_exec == c.buckets, "%s: late prefetches", runs[k].variant);
    }
    return 0;
}

/* --- Deviation 3: the lookup hashes a prefetched key again ----------------------- */

/* Valkey hashes a key in hashtableIncrementalFindInit (the prefetch) and again
 * in lookupKey -> hashtableFind: each prefetched key's bytes are read (and
 * SipHash run) once more than in the unprefetched path.  16 GETs under
 * `lookahead batch=16`: 16 more key reads than naive (c_ref without the rule:
 * 0); a 50-key MGET under `multikey=batch` (16 prefetched): 16 more than
 * `none`.  The study variants lookahead-hash-once and batch-hash-once: 0.
 * The batch fill hashes a lone command's key too (Valkey 9.1.2 hashes every command's
 * keys as it fills the batch, prefetching only two or more): one GET alone, 1 more; 17
 * GETs (a batch of 16, then one alone), 17 more (c_ref without the rule: 0 and 16).  At
 * batch 1 there is no batch fill (Valkey 9.1.2 fills a batch only at a
 * prefetch-batch-max-size above 1): 16 GETs, no more key reads than naive (16 with a fill). */
static int test_prefetched_keys_hashed_twice(void) {
    static char setup[1 << 16], gets[1 << 12], mget[1 << 12], one[64], gets17[1 << 12];
    size_t sl = multiCmd(setup, 0, "MSET", "key", 50, "value");
    size_t gl = getCmds(gets, "key", 16);
    size_t ml = multiCmd(mget, 0, "MGET", "key", 50, NULL);
    size_t ol = getCmds(one, "key", 1);
    size_t g17 = getCmds(gets17, "key", 17);
    struct {
        const char *base, *variant, *q;
        size_t ql;
        uint32_t extra;
        uint64_t base_gap, gap;
    } runs[] = {
        {"", "pipeline=lookahead batch=16", gets, gl, 16, 0, 0},
        {"", "pipeline=lookahead-hash-once batch=16", gets, gl, 0, 0, 0},
        {"", "pipeline=lookahead batch=16", one, ol, 1, 0, 0},
        {"", "pipeline=lookahead batch=16", gets17, g17, 17, 0, 0},
        {"", "pipeline=lookahead batch=1", gets, gl, 0, 0, 0},
        {"", "pipeline=lookahead-hash-once batch=16", one, ol, 0, 0, 0},
        {"multikey=none", "multikey=batch", mget, ml, 16, 0, 0},
        {"multikey=none", "multikey=batch-hash-once", mget, ml, 0, 0, 0},
    };
    for (size_t k = 0; k < sizeof(runs) / sizeof(runs[0]); k++) {
        uint32_t reads[2];
        for (int v = 0; v < 2; v++) {
            kvtRecord *r;
            uint32_t n;
            TEST_ASSERT(traceQuery("table=hashtable", v ? runs[k].variant : runs[k].base, setup, sl, runs[k].q,
                                   runs[k].ql, &r, &n) == 0);
            reads[v] = countBatch(r, n, -1).argv_reads;
            free(r);
        }
        printf("    %-40s key reads %u (%s: %u): +%d\n", runs[k].variant, reads[1],
               runs[k].base[0] ? runs[k].base : "naive", reads[0], (int)(reads[1] - reads[0]));
        TEST_ASSERT_MSG(reads[1] - reads[0] == runs[k].extra, "%s: %u extra key reads", runs[k].variant,
                        reads[1] - reads[0]);
    }
    return 0;
}

/* --- Deviation 8: lookupKey's LRU store, cluster key counts -------------------- */

/* Valkey lookupKey (without LOOKUP_NOTOUCH) stores LRU_CLOCK() into the found
 * object: 16 GETs of present keys write 16 object headers (site obj.lru), each
 * depending on the load that produced the object's address; EXISTS
 * (LOOKUP_NOTOUCH) writes none.  c_ref without the rule: no store in a GET. */
static int test_get_dirties_the_object(void) {
    static char setup[1 << 14], gets[1 << 12], exists[1 << 12];
    size_t sl = multiCmd(setup, 0, "MSET", "key", 16, "value");
    size_t gl = getCmds(gets, "key", 16);
    size_t el = multiCmd(exists, 0, "EXISTS", "key", 16, NULL);
    const char *opts[4] = {"table=hashtable", "table=hashtable layout=legacy", "table=dict",
                           "table=dict layout=legacy"};
    for (int o = 0; o < 4; o++)
        for (int q = 0; q < 2; q++) {
            kvtRecord *r;
            uint32_t n;
            TEST_ASSERT(traceQuery(opts[o], "", setup, sl, q ? exists : gets, q ? el : gl, &r, &n) == 0);
            uint32_t lru = 0, with_dep = 0;
            for (uint32_t i = 0; i < n; i++) {
                if (r[i].kind != KVT_STORE || r[i].site != KS_SITE_OBJ_LRU) continue;
                lru++;
                with_dep += r[i].dep && r[i].dep <= i && r[i - r[i].dep].kind == KVT_LOAD;
            }
            printf("    %-30s %-6s x16: %u LRU stores (%u depend on a load)\n", opts[o], q ? "EXISTS" : "GET",
                   lru, with_dep);
            free(r);
            TEST_ASSERT_MSG(lru == (q ? 0u : 16u) && with_dep == lru, "%s: %u LRU stores", opts[o], lru);
        }
    return 0;
}

unsigned ksKeyHashSlot(const char *key, size_t len);

/* kvstore cumulativeKeyCountAdd: in cluster mode every add and delete walks
 * the per-slot key-count Fenwick tree from slot + 1 (idx += idx & -idx up to
 * 16384): SET of 20 new keys, then DEL of them, touch exactly the counters
 * that walk names (one load and one store each); without cluster mode, none.
 * c_ref without the rule: none. */
static int test_cluster_key_count_tree(void) {
    static char sets[1 << 14], dels[1 << 12];
    size_t sl = 0;
    uint32_t steps = 0;
    for (int i = 0; i < 20; i++) {
        char k[16];
        snprintf(k, sizeof(k), "key%d", i);
        const char *argv[3] = {"SET", k, "v"};
        sl = resp(sets, sl, 3, argv);
        for (unsigned idx = ksKeyHashSlot(k, strlen(k)) + 1; idx <= 16384; idx += idx & -idx) steps++;
    }
    size_t dl = multiCmd(dels, 0, "DEL", "key", 20, NULL);
    for (int cluster = 0; cluster <= 1; cluster++)
        for (int q = 0; q < 2; q++) {
            kvtRecord *r;
            uint32_t n;
            const char *opt = cluster ? "cluster=1" : "cluster=0";
            TEST_ASSERT(traceQuery(opt, "", q ? sets : NULL, q ? sl : 0, q ? dels : sets, q ? dl : sl, &r, &n) == 0);
            uint32_t loads = 0, stores = 0;
            for (uint32_t i = 0; i < n; i++) {
                if (r[i].site != KS_SITE_KVS_KEY_COUNT) continue;
                loads += r[i].kind == KVT_LOAD;
                stores += r[i].kind == KVT_STORE;
            }
            printf("    %s %s of 20 keys: %u key-count loads, %u stores (tree walk: %u steps)\n", opt,
                   q ? "DEL" : "SET", loads, stores, cluster ? steps : 0);
            free(r);
            TEST_ASSERT_MSG(loads == (cluster ? steps : 0) && stores == loads, "%s: %u counter updates", opt, stores);
        }
    return 0;
}

/* --- Deviation 4: dependencies of pointer loads ---------------------------------- */



static ksWorkloadSpec spec(const char *workload, const char *variant, const char *table, const char *layout) {
    ksWorkloadSpec s = {.workload = workload, .keys = 3000, .ops = 400, .value_size = 100, .key_size = 16,
                        .variant = variant, .batch = 16, .depth = 16, .set_ratio = 0.2, .keys_per_command = 20,
                        .op = "keys", .layout = layout, .table = table, .cluster = 0, .seed = test_seed, .repeat = 1};
    return s;
}

static int isStructure(uint8_t tag) {
    return tag == KVT_TAG_BUCKET || tag == KVT_TAG_CHILD_BUCKET || tag == KVT_TAG_DICT_TABLE ||
           tag == KVT_TAG_DICT_ENTRY;
}

/* Every object-header load of KEYS and SAVE depends on the load that produced
 * the object's address: a bucket (hashtable) or a cell / node (dict), or, for
 * the legacy robj, the legacy entry. */
static int test_iterator_object_loads_depend_on_bucket(void) {
    const char *tables[2] = {"hashtable", "dict"}, *layouts[2] = {"unified", "legacy"}, *ops[2] = {"keys", "save"};
    const char *variants[3] = {"none", "next-bucket", "valkey"};
    for (int t = 0; t < 2; t++)
        for (int l = 0; l < 2; l++)
            for (int o = 0; o < 2; o++)
                for (int v = 0; v < 3; v += 2) {
                    ksWorkloadSpec s = spec("iterate", variants[v], tables[t], layouts[l]);
                    s.op = ops[o];
                    size_t len;
                    uint8_t *b = traceTo(&s, &len, 1u << 16);
                    TEST_ASSERT(b != NULL);
                    uint64_t n;
                    kvtRecord *r = records(b, len, &n);
                    uint64_t obj = 0, no_dep = 0, on_structure = 0;
                    for (uint64_t i = 0; i < n; i++) {
                        if (r[i].kind != KVT_LOAD || r[i].tag != KVT_TAG_OBJECT) continue;
                        obj++;
                        if (r[i].dep == 0) {
                            no_dep++;
                            continue;
                        }
                        const kvtRecord *p = &r[i - r[i].dep];
                        on_structure += p->kind == KVT_LOAD && isStructure(p->tag);
                    }
                    printf("    %-9s %-7s %-4s %-6s object loads %6llu, without dep %llu, on a bucket/cell/node "
                           "%6llu\n",
                           tables[t], layouts[l], ops[o], variants[v], (unsigned long long)obj,
                           (unsigned long long)no_dep, (unsigned long long)on_structure);
                    free(r);
                    free(b);
                    TEST_ASSERT(obj >= s.keys && no_dep == 0);
                    TEST_ASSERT(on_structure >= s.keys); /* one first read per key at least */
                }
    return 0;
}

/* The rule over every workload: a load or prefetch of an object, key, value or
 * expire line, or of a chained bucket or dict node, carries the id of an
 * earlier load (its address came from memory).  The exceptions are reads of
 * memory the code has just allocated (site obj.create: the address came from
 * the allocator) and the lookup key itself (tag argv). */
static int test_every_pointer_load_has_its_dep(void) {
    const char *runs[][2] = {{"pipeline", "naive"}, {"pipeline", "lookahead"}, {"mget", "none"},
                             {"mget", "batch"},     {"mset", "none"},         {"mset", "batch"},
                             {"load", "none"},      {"load", "prefetch-after-key"}};
    const char *tables[2] = {"hashtable", "dict"}, *layouts[2] = {"unified", "legacy"};
    for (size_t w = 0; w < sizeof(runs) / sizeof(runs[0]); w++)
        for (int t = 0; t < 2; t++)
            for (int l = 0; l < 3; l++) { /* unified, legacy, unified + cluster */
                ksWorkloadSpec s = spec(runs[w][0], runs[w][1], tables[t], layouts[l % 2]);
                s.cluster = l == 2;
                size_t len;
                uint8_t *b = traceTo(&s, &len, 1u << 16);
                TEST_ASSERT(b != NULL);
                uint64_t n, checked = 0, bad = 0, first_bad = 0;
                kvtRecord *r = records(b, len, &n);
                /* objects just written at obj.create: a read of one (Redis
                 * dictSetKeyAtLink finding the bucket again with the new
                 * item's own key) has its address from the allocator */
                uint64_t created[64] = {0};
                unsigned ncreated = 0;
                for (uint64_t i = 0; i < n; i++) {
                    const kvtRecord *x = &r[i];
                    if (x->kind == KVT_STORE && x->site == KS_SITE_OBJ_CREATE_STORE)
                        created[ncreated++ % 64] = x->addr;
                    if (x->kind != KVT_LOAD && x->kind != KVT_PREFETCH) continue;
                    int fresh = 0;
                    for (unsigned c = 0; c < 64 && c < ncreated; c++) fresh |= created[c] == x->addr;
                    if (fresh && x->dep == 0) continue;
                    int pointer = x->tag == KVT_TAG_OBJECT || x->tag == KVT_TAG_KEY || x->tag == KVT_TAG_VALUE ||
                                  x->tag == KVT_TAG_EXPIRE || x->tag == KVT_TAG_CHILD_BUCKET ||
                                  x->tag == KVT_TAG_DICT_ENTRY;
                    if (!pointer || x->site == KS_SITE_OBJ_CREATE_STORE) continue;
                    checked++;
                    if (x->dep == 0) {
                        if (!bad) first_bad = i;
                        bad++;
                    }
                }
                if (bad)
                    printf("    %s %s %s %s cluster=%d: %llu of %llu pointer loads without dep (first: record "
                           "%llu, tag %u, site %u)\n",
                           runs[w][0], runs[w][1], tables[t], layouts[l % 2], s.cluster, (unsigned long long)bad,
                           (unsigned long long)checked, (unsigned long long)first_bad, r[first_bad].tag,
                           r[first_bad].site);
                free(r);
                free(b);
                /* (cluster: ~1 of the 3000 keys per slot, so inserts may read no chain) */
                TEST_ASSERT_MSG(checked > 0 || s.cluster, "%s %s %s", runs[w][0], runs[w][1], tables[t]);
                TEST_ASSERT_MSG(bad == 0, "%s %s %s %s", runs[w][0], runs[w][1], tables[t], layouts[l % 2]);
            }
    return 0;
}

/* --- Deviation 5: Redis PR #15043, the bucket-only MSET prefetch -------------------- */

/* multikey=redis-15043 (msetPrefetchBatch): MSET/MSETNX in batches of 16 (the
 * last shorter), each key's bucket cell prefetched in ht_table[0] and, while
 * rehashing, in ht_table[1]; nothing else (no node, object or value line,
 * unlike #15133's machine); MGET is not batched; both MSETNX passes prefetch.
 * 40 keys: batches 16 + 16 + 8 (#15133: 16 + 24). */
static int test_redis_15043_prefetches_bucket_cells_only(void) {
    static char setup[1 << 14], query[1 << 14];
    const char *layouts[2] = {"table=dict layout=unified", "table=dict layout=legacy cluster=1"};
    for (int l = 0; l < 2; l++) {
        size_t sl = multiCmd(setup, 0, "MSET", "old", 30, "x");
        const char *cmds[3] = {"MSET", "MSETNX", "MGET"};
        for (int c = 0; c < 3; c++) {
            size_t ql = multiCmd(query, 0, cmds[c], "new", 40, c == 2 ? NULL : "y");
            kvtRecord *r;
            uint32_t n;
            TEST_ASSERT(traceQuery(layouts[l], "multikey=redis-15043", setup, sl, query, ql, &r, &n) == 0);
            uint32_t batches = countMarkers(r, n, KVT_MARK_BATCH), cells = 0, other = 0, sizes[8] = {0}, nb = 0;
            for (uint32_t i = 0; i < n; i++) {
                if (r[i].kind == KVT_PREFETCH && batchSite(r[i].site)) other++;
                if (r[i].kind != KVT_MARKER || r[i].flags != KVT_MARK_BATCH) continue;
                if (nb < 8) sizes[nb++] = (uint32_t)r[i].addr;
                /* the batch's prefetch loop: key reads (hashing), dict meta
                 * loads and cell prefetches, up to the first command step */
                for (uint32_t j = i + 1; j < n; j++) {
                    if (r[j].kind == KVT_PREFETCH && r[j].tag == KVT_TAG_DICT_TABLE && r[j].site == KS_SITE_DICT_BUCKET)
                        cells++;
                    else if (r[j].kind == KVT_PREFETCH) other++;
                    else if (!(r[j].kind == KVT_LOAD && (r[j].tag == KVT_TAG_TABLE_META || r[j].tag == KVT_TAG_ARGV)))
                        break;
                }
            }
            printf("    %-35s %-6s 40 keys: %u batches (%u %u %u ...), %u bucket-cell prefetches, %u other batch "
                   "prefetches\n",
                   layouts[l], cmds[c], batches, sizes[0], sizes[1], sizes[2], cells, other);
            free(r);
            TEST_ASSERT(other == 0);
            uint32_t want = c == 2 ? 0 : c == 1 ? 6 : 3;
            TEST_ASSERT_MSG(batches == want, "%s: %u batches", cmds[c], batches);
            if (c == 0) TEST_ASSERT(sizes[0] == 16 && sizes[1] == 16 && sizes[2] == 8);
            /* one cell per key and pass, two while rehashing (cluster: new slot dicts have none) */
            uint32_t keys = c == 2 ? 0 : c == 1 ? 80 : 40;
            TEST_ASSERT_MSG(cells <= 2 * keys && (l == 1 || cells >= keys), "%u cells for %u keys", cells, keys);
        }
    }
    /* The workload: MSETs of random keys over a half-filled range, new keys
     * and overwrites mixed; every variant leaves the same keyspace. */
    uint32_t ref = 0;
    const char *variants[3] = {"none", "batch", "redis-15043"};
    for (int v = 0; v < 3; v++) {
        ksWorkloadSpec s = spec("mset", variants[v], "dict", "unified");
        s.mset_keys = "random";
        s.prefill = 0.5;
        s.ops = 100;
        ksWorkloadResult res;
        char err[256];
        TEST_ASSERT_MSG(ksWorkloadRun(&s, &res, err, sizeof(err)) == 0, "%s", err);
        printf("    mset --mset-keys random --prefill 0.5, %-11s: %llu of %llu keys exist after, reply_crc32 %u\n",
               variants[v], (unsigned long long)res.keys, (unsigned long long)s.keys, res.reply_crc32);
        TEST_ASSERT(res.keys > s.keys / 2 && res.keys < s.keys);
        if (!ref) ref = res.reply_crc32;
        TEST_ASSERT(res.reply_crc32 == ref);
    }
    return 0;
}

/* --- Deviation 6: the snapshot checksum ------------------------------------------- */

static uint64_t sumGaps(const kvtRecord *r, uint64_t n) {
    uint64_t g = 0;
    for (uint64_t i = 0; i < n; i++) g += r[i].gap;
    return g;
}

/* Valkey checksums snapshots with CRC-64/Jones (crc64.c), folded in per rio
 * write and per rio read (rioGenericUpdateChecksum), and `rdbchecksum no`
 * turns it off (Valkey PR #1501's SAVE benchmark).  The check value of
 * "123456789" is 0xe9c6d914c4b8d9ca.  SAVE sums each write's source bytes as
 * it writes them: nothing reads the snapshot buffer back after the EOF opcode
 * (a whole-buffer checksum at the end did).  With rdbchecksum=no, SAVE and
 * LOAD touch the same lines (same memory records) and run fewer instructions;
 * the difference is the CRC-64's work, about 4 instructions per byte (31 per
 * 8-byte word) plus the per-call part. */
/* Valkey's crcspeed64little splits an input past 1 KiB into two streams and one past
 * 16 KiB into three, joined by crc64_combine (crc64.c).  Differential: random lengths
 * (around both cutoffs and up to 70 KB), random alignments and random starting sums give
 * the one-stream sum; any split A|B of random bytes combines to the sum of A then B; the
 * check value holds for every split of "123456789". */
static int test_crc64_streams_equal_one_stream(void) {
    enum { MAX = 70000 };
    unsigned char *buf = malloc(MAX + 16);
    TEST_ASSERT(buf != NULL);
    unsigned long long seed = 42;
    for (size_t i = 0; i < MAX + 16; i++) buf[i] = (unsigned char)test_rand(&seed);
    static const size_t edge[] = {0, 1, 7, 8, 9, 1023, 1024, 1025, 1031, 1032, 1040, 2048, 4096,
                                  16383, 16384, 16385, 16391, 16392, 16400, 49152, 65536, MAX};
    for (int t = 0; t < 600; t++) {
        size_t len = t < 22 * 8 ? edge[t / 8] : (size_t)(test_rand(&seed) % (MAX + 1));
        size_t off = t < 22 * 8 ? (size_t)(t % 8) : (size_t)(test_rand(&seed) % 16);
        uint64_t crc = t % 3 ? test_rand(&seed) : 0;
        TEST_ASSERT(ksCrc64(crc, buf + off, len) == ksCrc64Single(crc, buf + off, len));
    }
    for (int t = 0; t < 300; t++) {
        size_t len = (size_t)(test_rand(&seed) % (MAX + 1)), a = len ? (size_t)(test_rand(&seed) % (len + 1)) : 0;
        uint64_t crc = test_rand(&seed);
        uint64_t whole = ksCrc64Single(crc, buf, len);
        TEST_ASSERT(ksCrc64Combine(ksCrc64Single(crc, buf, a), ksCrc64Single(0, buf + a, len - a), len - a) == whole);
    }
    for (size_t a = 0; a <= 9; a++)
        TEST_ASSERT(ksCrc64Combine(ksCrc64(0, "123456789", a), ksCrc64(0, "123456789" + a, 9 - a), 9 - a) ==
                    0xe9c6d914c4b8d9caULL);
    free(buf);
    return 0;
}

static int test_snapshot_crc64_and_rdbchecksum_no(void) {
    TEST_ASSERT(ksCrc64(0, "123456789", 9) == 0xe9c6d914c4b8d9caULL);
    TEST_ASSERT(ksCrc64(ksCrc64(0, "1234", 4), "56789", 5) == 0xe9c6d914c4b8d9caULL);
    const char *ops[2] = {"save", "load"};
    for (int o = 0; o < 2; o++) {
        uint64_t n[2], gaps[2], mem[2], readback = 0;
        for (int on = 0; on < 2; on++) {
            ksWorkloadSpec s = spec(o ? "load" : "iterate", "none", "hashtable", "unified");
            s.op = "save";
            s.rdbchecksum = on ? "yes" : "no";
            size_t len;
            uint8_t *b = traceTo(&s, &len, 1u << 16);
            TEST_ASSERT(b != NULL);
            kvtRecord *r = records(b, len, &n[on]);
            gaps[on] = sumGaps(r, n[on]);
            mem[on] = 0;
            for (uint64_t i = 0; i < n[on]; i++) {
                if (r[i].kind == KVT_LOAD || r[i].kind == KVT_STORE) mem[on]++;
                /* save: nothing reads the snapshot buffer back */
                readback += o == 0 && r[i].kind == KVT_LOAD && r[i].tag == KVT_TAG_SNAPSHOT_BUF;
            }
            free(r);
            free(b);
        }
        /* 3000 records: type, key length, 16 B key, value length, 100 B value */
        uint64_t snap_bytes = 3000u * (1 + 1 + 16 + 1 + 100);
        double per_byte = (double)(gaps[1] - gaps[0]) / (double)snap_bytes;
        printf("    %s: records %llu (rdbchecksum=no) / %llu (yes), instructions +%llu with the checksum "
               "(%.2f per snapshot byte), snapshot-buffer read-backs %llu\n",
               ops[o], (unsigned long long)n[0], (unsigned long long)n[1], (unsigned long long)(gaps[1] - gaps[0]),
               per_byte, (unsigned long long)readback);
        TEST_ASSERT(mem[0] == mem[1]);
        TEST_ASSERT(gaps[1] > gaps[0]);
        TEST_ASSERT_MSG(per_byte > 3.5 && per_byte < 9.0, "%.2f instructions per byte", per_byte);
        TEST_ASSERT(readback == 0);
    }
    return 0;
}

/* --- reply_crc32 ----------------------------------------------------------------- */

/* `kvsim native` reports reply_crc32 for every workload; for pipeline, mget
 * and mset it must be a real check: non-zero, equal across the variants and
 * both tables, traced == native, and different for different replies (another
 * seed asks for other keys; a larger value changes every GET reply). */
static int test_reply_crc_compares_variants(void) {
    const char *runs[][3] = {{"pipeline", "naive", "lookahead"}, {"mget", "none", "batch"}, {"mset", "none", "batch"}};
    const char *tables[2] = {"hashtable", "dict"};
    for (size_t w = 0; w < 3; w++) {
        uint32_t ref = 0;
        for (int t = 0; t < 2; t++)
            for (int v = 1; v <= 2; v++) {
                ksWorkloadSpec s = spec(runs[w][0], runs[w][v], tables[t], "unified");
                ksWorkloadResult a, b;
                char err[256];
                TEST_ASSERT(ksWorkloadRun(&s, &a, err, sizeof(err)) == 0);
                TEST_ASSERT(tr_ksWorkloadRun(&s, &b, err, sizeof(err)) == 0); /* no emitter */
                printf("    %-8s %-9s %-9s reply_crc32 %10u (traced %10u)\n", runs[w][0], runs[w][v], tables[t],
                       a.reply_crc32, b.reply_crc32);
                TEST_ASSERT(a.reply_crc32 != 0 && a.reply_crc32 == b.reply_crc32);
                if (ref == 0) ref = a.reply_crc32;
                TEST_ASSERT_MSG(a.reply_crc32 == ref, "%s %s %s differs", runs[w][0], runs[w][v], tables[t]);
            }
        ksWorkloadSpec s = spec(runs[w][0], runs[w][1], "hashtable", "unified");
        if (strcmp(runs[w][0], "mset")) s.seed = test_seed + 1;
        else s.value_size = 101;
        ksWorkloadResult a;
        char err[256];
        TEST_ASSERT(ksWorkloadRun(&s, &a, err, sizeof(err)) == 0);
        TEST_ASSERT_MSG(a.reply_crc32 != ref, "%s: other replies, same crc", runs[w][0]);
    }
    return 0;
}

/* --- Deviation 7: Redis dict details ---------------------------------------------- */

static uint32_t countSite(const kvtRecord *r, uint32_t n, int kind, int tag, int site) {
    uint32_t c = 0;
    for (uint32_t i = 0; i < n; i++) c += r[i].kind == kind && r[i].tag == tag && r[i].site == site;
    return c;
}

/* Redis dictSetKeyAtLink(newItem=0): an overwrite replaces the stored pointer
 * and keeps a direct (tagged) item direct.  One key alone in its bucket,
 * overwritten by SET and by MSET, then read: no dict node is written or read
 * (c_ref giving the item a 16-byte NoValue node writes one, and every later
 * lookup reads it). */
static int test_dict_overwrite_keeps_direct_item(void) {
    static char setup[256], query[512];
    const char *set1[3] = {"SET", "k0", "v1"};
    size_t sl = resp(setup, 0, 3, set1);
    const char *set2[3] = {"SET", "k0", "v2"}, *mset[3] = {"MSET", "k0", "v3"}, *get[2] = {"GET", "k0"};
    size_t ql = resp(query, 0, 3, set2);
    ql = resp(query, ql, 2, get);
    ql = resp(query, ql, 3, mset);
    ql = resp(query, ql, 2, get);
    kvtRecord *r;
    uint32_t n;
    TEST_ASSERT(traceQuery("table=dict", "", setup, sl, query, ql, &r, &n) == 0);
    uint32_t nodes = countKindTag(r, n, KVT_STORE, KVT_TAG_DICT_ENTRY) +
                     countKindTag(r, n, KVT_LOAD, KVT_TAG_DICT_ENTRY);
    uint32_t cell_stores = countKindTag(r, n, KVT_STORE, KVT_TAG_DICT_TABLE);
    printf("    SET, GET, MSET, GET of a direct item: %u node records, %u cell stores\n", nodes,
           cell_stores);
    free(r);
    TEST_ASSERT_MSG(nodes == 0, "%u dict-node records", nodes);
    TEST_ASSERT_MSG(cell_stores == 2, "%u cell stores (one per overwrite)", cell_stores);
    return 0;
}

/* Redis setKey: dbFindByLink, then dictSetKeyAtLink through the lookup's link:
 * a SET or MSET of a new key, and an overwrite, walk the chain once, so one
 * dict-struct read (each walk starts with one, then its rehash step) and one
 * bucket-cell read per key.  c_ref walking again for the insert (position
 * flavour) or the overwrite (findRef) reads both twice. */
static int test_dict_set_walks_once(void) {
    static char setup[256], query[1024];
    const char *set1[3] = {"SET", "old", "v"};
    size_t sl = resp(setup, 0, 3, set1);
    const char *q[4][5] = {{"SET", "new1", "v"}, {"MSET", "new2", "v", "new3", "v"},
                           {"SET", "old", "w"}, {"MSET", "old", "x"}};
    int argc[4] = {3, 5, 3, 3}, keys[4] = {1, 2, 1, 1};
    for (int l = 0; l < 2; l++)
        for (int c = 0; c < 4; c++) {
            size_t ql = resp(query, 0, argc[c], q[c]);
            kvtRecord *r;
            uint32_t n;
            TEST_ASSERT(traceQuery(LAYOUTS[l], "", setup, sl, query, ql, &r, &n) == 0);
            uint32_t meta = countSite(r, n, KVT_LOAD, KVT_TAG_TABLE_META, KS_SITE_DICT_META);
            uint32_t cells = countSite(r, n, KVT_LOAD, KVT_TAG_DICT_TABLE, KS_SITE_DICT_BUCKET);
            printf("    %-25s %-4s %s: %u dict reads, %u cell reads\n", LAYOUTS[l], q[c][0], q[c][1],
                   meta, cells);
            free(r);
            TEST_ASSERT_MSG(meta == (uint32_t)keys[c] && cells == (uint32_t)keys[c],
                            "%s %s: %u dict reads, %u cell reads", q[c][0], q[c][1], meta, cells);
        }
    return 0;
}

/* Redis 7's dictEntry{key, v, next}: with layout=legacy the 24-byte entry is
 * its own chain node.  GETs of 64 keys: no dict-node record at all; each
 * entry read (key field) depends on the cell or on the previous entry's
 * `next` field, one hop; chains exist (some `next` reads).  c_ref's NoValue
 * node -> {key, val} entry reads a node first on every chained key. */
static int test_dict_legacy_entry_is_the_node(void) {
    static char setup[1 << 14], gets[1 << 13];
    size_t sl = multiCmd(setup, 0, "MSET", "key", 64, "value");
    size_t gl = getCmds(gets, "key", 64);
    kvtRecord *r;
    uint32_t n;
    TEST_ASSERT(traceQuery("table=dict layout=legacy", "", setup, sl, gets, gl, &r, &n) == 0);
    uint32_t nodes = countKindTag(r, n, KVT_LOAD, KVT_TAG_DICT_ENTRY);
    uint32_t next_reads = countSite(r, n, KVT_LOAD, KVT_TAG_OBJECT, KS_SITE_DICT_ENTRY);
    uint32_t entry_reads = 0, one_hop = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (r[i].kind != KVT_LOAD || r[i].site != KS_SITE_OBJ_ENTRY || r[i].tag != KVT_TAG_OBJECT)
            continue;
        if (r[i].dep == 0 || r[i].dep > i) continue;
        const kvtRecord *p = &r[i - r[i].dep];
        entry_reads++;
        one_hop += p->kind == KVT_LOAD && (p->tag == KVT_TAG_DICT_TABLE ||
                                           (p->tag == KVT_TAG_OBJECT && p->site == KS_SITE_DICT_ENTRY));
    }
    printf("    64 GETs, legacy dict: %u node loads, %u next-field reads, %u of %u entry reads "
           "one hop from a cell or a next field\n",
           nodes, next_reads, one_hop, entry_reads);
    free(r);
    TEST_ASSERT(nodes == 0);
    TEST_ASSERT(next_reads > 0);
    TEST_ASSERT(entry_reads >= 64 && one_hop == entry_reads);
    return 0;
}

/* Redis PR #14700 removed the bucket and `next` prefetches that PR #13646 had
 * put into dictFindLinkInternal: a plain lookup (no batch variant) issues no
 * software prefetch, both layouts. */
static int test_dict_find_does_not_prefetch(void) {
    static char setup[1 << 14], gets[1 << 13];
    size_t sl = multiCmd(setup, 0, "MSET", "key", 64, "value");
    size_t gl = getCmds(gets, "key", 64);
    for (int l = 0; l < 2; l++) {
        kvtRecord *r;
        uint32_t n;
        TEST_ASSERT(traceQuery(LAYOUTS[l], "", setup, sl, gets, gl, &r, &n) == 0);
        uint32_t pf = countKindTag(r, n, KVT_PREFETCH, -1);
        printf("    64 GETs, %s: %u prefetches\n", LAYOUTS[l], pf);
        free(r);
        TEST_ASSERT_MSG(pf == 0, "%s: %u prefetches", LAYOUTS[l], pf);
    }
    return 0;
}

/* Redis/Valkey setKey: MSET's lookupKeyWrite touches the object it is about to
 * replace (val->lru = LRU_CLOCK(), rule 7's store), once per existing key;
 * new keys have nothing to touch.  SET looks up once (its own lookupKeyWrite,
 * then setKey with SETKEY_ALREADY_EXIST): one store. */
static int test_mset_touches_replaced_objects(void) {
    static char setup[1 << 14], over[1 << 14], fresh[1 << 14], set[256];
    size_t sl = multiCmd(setup, 0, "MSET", "key", 16, "value");
    size_t ol = multiCmd(over, 0, "MSET", "key", 16, "other");
    size_t fl = multiCmd(fresh, 0, "MSET", "new", 16, "other");
    const char *set1[3] = {"SET", "key3", "v"};
    size_t tl = resp(set, 0, 3, set1);
    const char *opts[4] = {"table=hashtable", "table=hashtable layout=legacy", "table=dict",
                           "table=dict layout=legacy"};
    for (int o = 0; o < 4; o++)
        for (int q = 0; q < 3; q++) {
            kvtRecord *r;
            uint32_t n;
            const char *query = q == 0 ? over : q == 1 ? fresh : set;
            size_t ql = q == 0 ? ol : q == 1 ? fl : tl;
            TEST_ASSERT(traceQuery(opts[o], "", setup, sl, query, ql, &r, &n) == 0);
            uint32_t lru = countSite(r, n, KVT_STORE, KVT_TAG_OBJECT, KS_SITE_OBJ_LRU);
            printf("    %-30s %-16s: %u LRU stores\n", opts[o],
                   q == 0 ? "MSET 16 existing" : q == 1 ? "MSET 16 new" : "SET existing", lru);
            free(r);
            uint32_t want = q == 0 ? 16 : q == 1 ? 0 : 1;
            TEST_ASSERT_MSG(lru == want, "%s: %u LRU stores, want %u", opts[o], lru, want);
        }
    return 0;
}

/* --- Deviation 6: the load reads through rio's stdio buffer ------------------------- */

/* Valkey's rdbLoad reads the file with fread (rioFileRead) through a 4 KiB
 * stdio buffer: the file is read only by the buffer's refills and by reads of
 * whole blocks straight into their destination, each a read() (a SYSCALL
 * marker sys.file_read, then the kernel's store of its bytes at that site:
 * every snapshot byte exactly once); every other read (type bytes, lengths,
 * keys, values) comes from the small buffer.  100 B values (every read from
 * the buffer) and 10000 B values (whole blocks read directly); both load
 * variants.  c_ref reading the snapshot image itself for every read has no
 * refill and reads the image's every line at snap.read. */
static int test_load_reads_through_stdio_buffer(void) {
    const char *variants[2] = {"none", "prefetch-after-key"};
    uint32_t sizes[2] = {100, 10000};
    for (int z = 0; z < 2; z++)
        for (int v = 0; v < 2; v++) {
            ksWorkloadSpec s = spec("load", variants[v], "hashtable", "unified");
            s.value_size = sizes[z];
            s.keys = sizes[z] > 1000 ? 300 : 3000;
            ksWorkloadResult res;
            char err[256];
            TEST_ASSERT(ksWorkloadRun(&s, &res, err, sizeof(err)) == 0);
            uint64_t snap_len = res.reply_crc32; /* load: the snapshot's length */
            size_t len;
            uint8_t *b = traceTo(&s, &len, 1u << 16);
            TEST_ASSERT(b != NULL);
            uint64_t n, refill_read = 0, refill_stored = 0, loading = 0, progress = 0;
            kvtRecord *r = records(b, len, &n);
            /* distinct lines read at snap.read (a small open-addressed set) */
            static uint64_t lines[1 << 16];
            memset(lines, 0, sizeof(lines));
            uint64_t distinct = 0;
            for (uint64_t i = 0; i < n; i++) {
                const kvtRecord *x = &r[i];
                if (x->site == KS_SITE_SYS_FILE_READ) {
                    if (x->kind == KVT_MARKER && x->flags == KVT_MARK_SYSCALL) refill_read += x->addr;
                    if (x->kind == KVT_STORE) refill_stored += x->size;
                }
                loading += x->site == KS_SITE_RIO_LOADING;
                progress += x->site == KS_SITE_RIO_PROGRESS;
                if (x->kind != KVT_LOAD || x->site != KS_SITE_SNAP_READ) continue;
                uint64_t line = (x->addr >> 6) + 1, h = (line * 0x9E3779B97F4A7C15ULL) >> 48;
                while (lines[h] && lines[h] != line) h = (h + 1) & 0xffff;
                if (!lines[h]) {
                    lines[h] = line;
                    distinct++;
                }
            }
            printf("    load %-18s %5u B values: snapshot %llu B, refilled or read direct %llu B "
                   "(stored %llu), %llu distinct lines read at snap.read\n",
                   variants[v], sizes[z], (unsigned long long)snap_len,
                   (unsigned long long)refill_read, (unsigned long long)refill_stored,
                   (unsigned long long)distinct);
            free(r);
            free(b);
            TEST_ASSERT_MSG(refill_read == snap_len && refill_stored == snap_len,
                            "%llu of %llu snapshot bytes read from the file",
                            (unsigned long long)refill_read, (unsigned long long)snap_len);
            /* rdbLoadProgressCallback on every read (at least the type byte, both lengths,
             * key and value per key); loadingAbsProgress (a load and a store) at every
             * 2 MiB of the file */
            TEST_ASSERT(progress >= 5 * (uint64_t)s.keys);
            TEST_ASSERT_MSG(loading == 2 * (snap_len >> 21), "%llu loading records",
                            (unsigned long long)loading);
            /* the 64-line buffer plus the lines of the scratch block for spanning reads */
            TEST_ASSERT_MSG(distinct <= 64 + 2 * (sizes[z] / 64 + 2), "%llu lines",
                            (unsigned long long)distinct);
        }
    return 0;
}

/* --- Deviation 8: the rehash cron --------------------------------------------------- */

/* Valkey serverCron -> databasesCron -> kvstoreIncrementallyRehash (Redis
 * activeRehashing): with activerehashing (the default), once the cron clock
 * (command_ns per command) crosses a 1/hz boundary, the event loop gives the
 * rehashing tables 1 ms of rehash steps between two query buffers.  A setup
 * buffer of SETs leaves a rehash in progress (the table has just doubled); one traced GET that takes
 * the cron clock across a tick then shows the cron's rehash records after the
 * GET's reply, and none with activerehashing=no (c_ref without the cron:
 * none). */
static int test_rehash_cron_between_commands(void) {
    static char setup[1 << 17], get[64];
    const char *g[2] = {"GET", "key7"};
    size_t gl = resp(get, 0, 2, g);
    const char *tables[2] = {"table=hashtable", "table=dict"};
    /* Keys just past a doubling (the hashtable's at 3585 keys, the dict's at
     * 2048), and a cron clock (hz 1, ns per command) that the setup buffer
     * leaves just below the first tick (1 s) and the GET takes across it. */
    int nkeys[2] = {3700, 2200};
    long command_ns[2] = {270200, 454400};
    for (int t = 0; t < 2; t++) {
        size_t sl = 0;
        for (int i = 0; i < nkeys[t]; i++) {
            char k[16];
            snprintf(k, sizeof(k), "key%d", i);
            const char *argv[3] = {"SET", k, "v"};
            sl = resp(setup, sl, 3, argv);
        }
        uint32_t after[2];
        for (int on = 0; on < 2; on++) {
            char opts[160];
            snprintf(opts, sizeof(opts), "%s hz=1 command_ns=%ld activerehashing=%s", tables[t],
                     command_ns[t], on ? "yes" : "no");
            kvtRecord *r;
            uint32_t n;
            TEST_ASSERT(traceQuery(opts, "", setup, sl, get, gl, &r, &n) == 0);
            uint32_t last_reply = 0;
            for (uint32_t i = 0; i < n; i++)
                if (r[i].tag == KVT_TAG_REPLY_BUF) last_reply = i;
            after[on] = 0;
            for (uint32_t i = last_reply + 1; i < n; i++)
                after[on] += r[i].site == KS_SITE_HT_REHASH_BUCKET || r[i].site == KS_SITE_HT_REHASH_STORE ||
                             r[i].site == KS_SITE_DICT_REHASH;
            free(r);
        }
        printf("    %-16s GET after a %d-SET buffer: %u rehash records after the reply with "
               "activerehashing, %u without\n",
               tables[t], nkeys[t], after[1], after[0]);
        TEST_ASSERT_MSG(after[1] > 100 && after[0] == 0, "%s: %u / %u", tables[t], after[1], after[0]);
    }
    return 0;
}

/* --- Redis 8 kvobj: a RAW value is allocated before its object ---------------- */

/* Redis 8 `kvobjSet` builds a kvobj whose value does not fit the 64-byte
 * embedding as `kvobjCreate(..., sdsnewlen(value))`: the value sds first, then
 * the object (Valkey's `objectSetKeyAndExpire` likewise finds the value already
 * allocated).  16-byte keys and 32-byte values share one size class, so SETs
 * into a fresh keyspace lay them out value, object, value, object: a GET reads
 * its value just below its object, and half the values start in the line below
 * the object's.  SET 32 keys, GET them: every value's sds header lies below
 * its object header and within 64 bytes of it (c_ref allocating the object
 * first puts every value above). */
static int test_unified_raw_value_below_object(void) {
    static char setup[1 << 13], gets[1 << 12];
    const char *val = "vvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvv"; /* 32 B: RAW beside a 16 B key */
    const char *tables[2] = {"table=dict", "table=hashtable"};
    for (int t = 0; t < 2; t++) {
        size_t sl = 0, gl = 0;
        for (int i = 0; i < 32; i++) {
            char k[32];
            snprintf(k, sizeof(k), "key-%012d", i);
            const char *set[3] = {"SET", k, val}, *get[2] = {"GET", k};
            sl = resp(setup, sl, 3, set);
            gl = resp(gets, gl, 2, get);
        }
        kvtRecord *r;
        uint32_t n;
        TEST_ASSERT(traceQuery(tables[t], "", setup, sl, gets, gl, &r, &n) == 0);
        uint32_t pairs = 0, below = 0;
        uint64_t obj = 0;
        for (uint32_t i = 0; i < n; i++) {
            if (r[i].kind != KVT_LOAD) continue;
            if (r[i].tag == KVT_TAG_OBJECT && r[i].site == KS_SITE_OBJ_VALUE_PTR) obj = r[i].addr;
            if (r[i].tag == KVT_TAG_VALUE && r[i].site == KS_SITE_OBJ_VALUE && obj) {
                pairs++;
                below += r[i].addr < obj && obj - r[i].addr <= 64;
                obj = 0;
            }
        }
        printf("    %-16s 32 GETs of RAW values: %u of %u values just below their object\n",
               tables[t], below, pairs);
        free(r);
        TEST_ASSERT_MSG(pairs == 32 && below == 32, "%s: %u of %u", tables[t], below, pairs);
    }
    return 0;
}

int main(int argc, char **argv) {
    TEST_INIT(argc, argv);
    RUN(test_dict_batch_prefetches_raw_values);
    RUN(test_msetnx_write_pass_not_prefetched);
    RUN(test_valkey_batch_fills_key_by_key);
    RUN(test_prefetched_keys_hashed_twice);
    RUN(test_get_dirties_the_object);
    RUN(test_cluster_key_count_tree);
    RUN(test_redis_15043_prefetches_bucket_cells_only);
    RUN(test_iterator_object_loads_depend_on_bucket);
    RUN(test_every_pointer_load_has_its_dep);
    RUN(test_snapshot_crc64_and_rdbchecksum_no);
    RUN(test_crc64_streams_equal_one_stream);
    RUN(test_reply_crc_compares_variants);
    RUN(test_dict_overwrite_keeps_direct_item);
    RUN(test_dict_set_walks_once);
    RUN(test_dict_legacy_entry_is_the_node);
    RUN(test_dict_find_does_not_prefetch);
    RUN(test_mset_touches_replaced_objects);
    RUN(test_load_reads_through_stdio_buffer);
    RUN(test_rehash_cron_between_commands);
    RUN(test_unified_raw_value_below_object);
    return TEST_DONE();
}
