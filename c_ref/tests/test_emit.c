/*
 * test_emit.c -- the traced build: run each workload through the traced
 * object set (tr_ksWorkloadRun) into a temporary file and verify the stream
 * against traces/FORMAT.md: magic, version, header CRC and JSON keys, chunk
 * CRCs, end-chunk counts, dependencies pointing back at loads, prefetch and
 * marker sizes; and that two runs are byte-identical.
 */
#include <stdint.h>

#include <string.h>

#include "../emit.h"
#include "../kvsim_cref.h"
#include "../workload.h"
#include "testhelp.h"
#include "traced.h"

/* the format version c_ref writes, for the JSON headers of the test traces */
#define VERSION_STR_(v) #v
#define VERSION_STR VERSION_STR_(KVT_VERSION)



typedef struct {
    uint64_t records, loads, stores, prefetches, markers, deps, gap;
} stats;

/* Check a whole trace buffer (header, chunks, CRCs, records, end chunk) and count
 * into st; with `out`, also hand back every record in order (caller frees). */
static int verifyRecords(const uint8_t *b, size_t len, stats *st, kvtRecord **out) {
    memset(st, 0, sizeof(*st));
    TEST_ASSERT(len >= 16 && memcmp(b, KVT_MAGIC, 8) == 0);
    uint16_t ver, rs;
    uint32_t jl;
    memcpy(&ver, b + 8, 2);
    memcpy(&rs, b + 10, 2);
    memcpy(&jl, b + 12, 4);
    TEST_ASSERT(ver == KVT_VERSION && rs == 24);
    uint32_t crc;
    memcpy(&crc, b + 16 + jl, 4);
    TEST_ASSERT(ksCrc32(0, b, 16 + jl) == crc);
    size_t off = 16 + jl + 4;
    uint32_t nchunks = 0;
    uint64_t total = 0;
    kvtRecord *recs = NULL;
    size_t cap = 0;
    while (1) {
        uint32_t magic;
        TEST_ASSERT(off + 4 <= len);
        memcpy(&magic, b + off, 4);
        if (magic == KVT_END_MAGIC) {
            kvtEndChunk end;
            TEST_ASSERT(off + sizeof(end) == len);
            memcpy(&end, b + off, sizeof(end));
            TEST_ASSERT(end.n_chunks == nchunks && end.total_records == total);
            break;
        }
        kvtChunkHeader h;
        memcpy(&h, b + off, sizeof(h));
        TEST_ASSERT(h.magic == KVT_CHUNK_MAGIC && h.codec == KVT_CODEC_RAW && h.n_records > 0);
        TEST_ASSERT(h.stored_bytes == h.n_records * 24u);
        off += sizeof(h);
        TEST_ASSERT(ksCrc32(0, b + off, h.stored_bytes) == h.crc32);
        if (total + h.n_records > cap) {
            cap = (total + h.n_records) * 2;
            recs = realloc(recs, cap * sizeof(*recs));
        }
        for (uint32_t i = 0; i < h.n_records; i++) {
            uint64_t idx = total + i;
            memcpy(&recs[idx], b + off + 24u * i, 24);
            const kvtRecord r = recs[idx];
            TEST_ASSERT(r.kind < KVT_NUM_KINDS && r.tag < KVT_NUM_TAGS && r.site < KS_NUM_SITES);
            if (r.kind == KVT_MARKER) {
                TEST_ASSERT(r.size == 0 && r.dep == 0 && r.flags < KVT_NUM_MARKERS);
                st->markers++;
            } else {
                TEST_ASSERT(r.flags == 0 && r.size > 0 && r.size <= 64);
                TEST_ASSERT(r.kind != KVT_PREFETCH || r.size == 1);
                /* within one cache line */
                TEST_ASSERT((r.addr & ~63ULL) == ((r.addr + r.size - 1) & ~63ULL));
                if (r.kind == KVT_LOAD) st->loads++;
                if (r.kind == KVT_STORE) st->stores++;
                if (r.kind == KVT_PREFETCH) st->prefetches++;
            }
            if (r.dep) {
                TEST_ASSERT(r.dep <= idx && recs[idx - r.dep].kind == KVT_LOAD);
                st->deps++;
            }
            st->gap += r.gap;
        }
        off += h.stored_bytes;
        total += h.n_records;
        nchunks++;
    }
    st->records = total;
    if (out)
        *out = recs;
    else
        free(recs);
    return 0;
}

static int verify(const uint8_t *b, size_t len, stats *st) { return verifyRecords(b, len, st, NULL); }

static ksWorkloadSpec spec(const char *w, const char *variant) {
    ksWorkloadSpec s = {.workload = w, .keys = 3000, .ops = 2000, .value_size = 100, .key_size = 16,
                        .variant = variant, .batch = 16, .depth = 10, .set_ratio = 0.2, .keys_per_command = 20,
                        .op = "keys", .layout = "unified", .table = "hashtable", .cluster = 0, .seed = 3, .repeat = 1};
    return s;
}

static int test_workload_traces(void) {
    struct {
        const char *w, *v, *op;
        int cluster;
        const char *layout;
    } cases[] = {
        {"pipeline", "naive", "keys", 0, "unified"},      {"pipeline", "lookahead", "keys", 1, "legacy"},
        {"mget", "batch", "keys", 1, "unified"},          {"mset", "batch", "keys", 0, "legacy"},
        {"iterate", "valkey", "keys", 0, "unified"},      {"iterate", "next-bucket", "save", 0, "legacy"},
        {"load", "prefetch-after-key", "keys", 0, "unified"}, {"load", "prefetch-rehash", "keys", 0, "legacy"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        ksWorkloadSpec s = spec(cases[i].w, cases[i].v);
        s.op = cases[i].op;
        s.cluster = cases[i].cluster;
        s.layout = cases[i].layout;
        size_t l1, l2;
        uint8_t *t1 = traceTo(&s, &l1, 1000); /* small chunks: many of them */
        uint8_t *t2 = traceTo(&s, &l2, 1000);
        TEST_ASSERT(t1 && t2);
        TEST_ASSERT_MSG(l1 == l2 && memcmp(t1, t2, l1) == 0, "%s/%s not deterministic", cases[i].w, cases[i].v);
        stats st;
        if (verify(t1, l1, &st)) return 1;
        printf("    %-8s %-18s records %7llu loads %7llu stores %6llu prefetch %6llu deps %7llu\n", cases[i].w,
               cases[i].v, (unsigned long long)st.records, (unsigned long long)st.loads, (unsigned long long)st.stores,
               (unsigned long long)st.prefetches, (unsigned long long)st.deps);
        TEST_ASSERT(st.loads > 0 && st.deps > 0);
        int expect_prefetch = strcmp(cases[i].v, "naive") && strcmp(cases[i].v, "none");
        TEST_ASSERT((st.prefetches > 0) == expect_prefetch);
        free(t1);
        free(t2);
    }
    return 0;
}

/* Kinds of work: every site's kind is a kind of the format (and named); in the
 * workloads' traces a WORK marker names a kind other than its record's site's,
 * a positive count, and is followed (after further WORK markers) by the access
 * record whose gap holds its instructions: the counts add up to at most the gap. */
static int test_work_kinds(void) {
    for (int i = 0; i < KS_NUM_SITES; i++) TEST_ASSERT(ksSiteKind[i] < KVT_NUM_WORK);
    for (int k = 0; k < KVT_NUM_WORK; k++) TEST_ASSERT(ksWorkKindName[k] && ksWorkKindName[k][0]);
    TEST_ASSERT(ksSiteKind[KS_SITE_RESP_PARSE] == KVT_WORK_PARSE);
    struct {
        const char *w, *v, *op;
        int want; /* a kind the workload's markers must name */
    } cases[] = {
        {"pipeline", "naive", "keys", KVT_WORK_HASH},
        {"mget", "batch", "keys", KVT_WORK_COMPARE},
        {"iterate", "none", "save", KVT_WORK_CRC},
        {"load", "none", "keys", KVT_WORK_CRC},
    };
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        ksWorkloadSpec s = spec(cases[c].w, cases[c].v);
        s.op = cases[c].op;
        size_t len;
        uint8_t *b = traceTo(&s, &len, 1u << 16);
        TEST_ASSERT(b != NULL);
        stats st;
        kvtRecord *recs = NULL;
        TEST_ASSERT(verifyRecords(b, len, &st, &recs) == 0);
        uint64_t named[KVT_NUM_WORK] = {0}, pend = 0, seen = 0, kinds = 0;
        for (uint64_t i = 0; i < st.records; i++) {
            const kvtRecord r = recs[i];
            if (r.kind == KVT_MARKER && r.flags == KVT_MARK_WORK) {
                const uint64_t k = r.addr >> KVT_WORK_COUNT_BITS;
                const uint64_t n = r.addr & ((1ULL << KVT_WORK_COUNT_BITS) - 1);
                TEST_ASSERT(k < KVT_NUM_WORK && n > 0);
                TEST_ASSERT_MSG(!(kinds & (1u << k)), "two WORK markers of kind %llu before one record",
                                (unsigned long long)k);
                kinds |= 1u << k;
                named[k] += n;
                pend += n;
                seen++;
                continue;
            }
            if (r.kind == KVT_MARKER) {
                TEST_ASSERT_MSG(pend == 0, "%s: a marker between WORK and its record", cases[c].w);
                continue;
            }
            TEST_ASSERT_MSG(pend <= r.gap, "%s: record %llu gap %u < its WORK markers' %llu", cases[c].w,
                            (unsigned long long)i, r.gap, (unsigned long long)pend);
            TEST_ASSERT(!(kinds & (1u << ksSiteKind[r.site])));
            pend = 0;
            kinds = 0;
        }
        printf("    %-8s %-5s WORK markers %6llu; instructions named hash %llu crc %llu compare %llu parse %llu "
               "generic %llu\n", cases[c].w, cases[c].op, (unsigned long long)seen,
               (unsigned long long)named[KVT_WORK_HASH], (unsigned long long)named[KVT_WORK_CRC],
               (unsigned long long)named[KVT_WORK_COMPARE], (unsigned long long)named[KVT_WORK_PARSE],
               (unsigned long long)named[KVT_WORK_GENERIC]);
        TEST_ASSERT_MSG(named[cases[c].want] > 0, "%s: no work of kind %s", cases[c].w,
                        ksWorkKindName[cases[c].want]);
        free(recs);
        free(b);
    }
    return 0;
}

/* Cluster mode: a per-slot table's metadata load depends on the slot_table load
 * that produced the table pointer (the kvstore pointer chase).  Every command
 * reads at least one key's table, so each run links at least `ops` table_meta
 * loads back to a slot_table load. */
static int test_cluster_meta_depends_on_slot(void) {
    const char *tables[] = {"hashtable", "dict"};
    const char *runs[][2] = {{"pipeline", "naive"}, {"pipeline", "lookahead"}, {"mget", "batch"}};
    for (size_t t = 0; t < 2; t++) {
        for (size_t w = 0; w < 3; w++) {
            ksWorkloadSpec s = spec(runs[w][0], runs[w][1]);
            s.cluster = 1;
            s.table = tables[t];
            size_t len;
            uint8_t *b = traceTo(&s, &len, 1u << 16);
            TEST_ASSERT(b != NULL);
            stats st;
            kvtRecord *recs = NULL;
            TEST_ASSERT(verifyRecords(b, len, &st, &recs) == 0);
            uint64_t meta = 0, linked = 0;
            for (uint64_t idx = 0; idx < st.records; idx++) {
                const kvtRecord r = recs[idx];
                if (r.kind != KVT_LOAD || r.tag != KVT_TAG_TABLE_META) continue;
                meta++;
                if (r.dep && r.dep <= idx && recs[idx - r.dep].kind == KVT_LOAD &&
                    recs[idx - r.dep].tag == KVT_TAG_SLOT_TABLE)
                    linked++;
            }
            printf("    %-9s %-8s %-10s table_meta loads %6llu linked to slot_table %6llu\n", tables[t],
                   runs[w][0], runs[w][1], (unsigned long long)meta, (unsigned long long)linked);
            TEST_ASSERT_MSG(linked >= s.ops, "%s %s/%s: %llu table_meta loads depend on a slot_table load",
                            tables[t], runs[w][0], runs[w][1], (unsigned long long)linked);
            free(recs);
            free(b);
        }
    }
    return 0;
}

/* Variants must not change what is computed: same replies (crc) as naive. */
static int test_traced_matches_native(void) {
    ksWorkloadSpec s = spec("pipeline", "lookahead");
    ksWorkloadResult a, b;
    char err[256];
    TEST_ASSERT(ksWorkloadRun(&s, &a, err, sizeof(err)) == 0);
    TEST_ASSERT(tr_ksWorkloadRun(&s, &b, err, sizeof(err)) == 0); /* no emitter: records dropped */
    TEST_ASSERT(a.reply_crc32 == b.reply_crc32 && a.memory_bytes == b.memory_bytes);
    s.variant = "naive";
    TEST_ASSERT(ksWorkloadRun(&s, &b, err, sizeof(err)) == 0);
    TEST_ASSERT(a.reply_crc32 == b.reply_crc32);
    return 0;
}

/* pipeline=lookahead batches by keys (pipeline.c, Valkey #2092): every command
 * joins the batch, its keys only while the batch holds fewer than `batch`; the
 * batch closes when full; a failed arity check adds no keys; a single key is
 * not prefetched.  Markers: "B<n>" = prefetch batch of n keys, "C" = a command. */
static int test_lookahead_key_batches(void) {
    const char *q = "SET a 1\r\nGET a\r\nMGET a b c\r\nDBSIZE\r\nMSET a 1 b\r\n"
                    "MGET a b c d e\r\nGET x\r\nGET y\r\nDEL a b c d\r\nGET z\r\n";
    const char *want = "B4 C C C B4 C C C B4 C C C C ";
    ksKeyspace *ks = tr_ksCreate("");
    TEST_ASSERT(ks != NULL);
    FILE *f = tmpfile();
    ksEmitter *e = tr_ksEmitterOpen(f, "{\"format_version\":" VERSION_STR "}", 1u << 16);
    TEST_ASSERT(e != NULL && tr_ksEmitterCurrent == e);
    const uint8_t *r;
    size_t rl, used;
    TEST_ASSERT(tr_ksExecute(ks, "pipeline=lookahead batch=4", (const uint8_t *)q, strlen(q), &r, &rl, &used) == 0);
    TEST_ASSERT(used == strlen(q));
    char got[256] = "";
    size_t gl = 0;
    for (uint32_t i = 0; i < e->n && gl < sizeof(got) - 8; i++) {
        const kvtRecord *rec = &e->buf[i];
        if (rec->kind != KVT_MARKER) continue;
        if (rec->flags == KVT_MARK_BATCH)
            gl += (size_t)snprintf(got + gl, sizeof(got) - gl, "B%llu ", (unsigned long long)rec->addr);
        else if (rec->flags == KVT_MARK_COMMAND)
            gl += (size_t)snprintf(got + gl, sizeof(got) - gl, "C ");
    }
    tr_ksEmitterClose(e);
    fclose(f);
    tr_ksDestroy(ks);
    if (strcmp(got, want)) fprintf(stderr, "markers: got '%s' want '%s'\n", got, want);
    TEST_ASSERT(strcmp(got, want) == 0);
    return 0;
}

/* BATCH ("B<n>") and COMMAND ("C") markers of a trace, space-separated, into got. */
static void markerString(const uint8_t *b, size_t len, char *got, size_t cap) {
    uint64_t n;
    kvtRecord *recs = records(b, len, &n);
    size_t gl = 0;
    got[0] = '\0';
    for (uint64_t i = 0; i < n && gl + 8 < cap; i++) {
        if (recs[i].kind != KVT_MARKER) continue;
        if (recs[i].flags == KVT_MARK_BATCH)
            gl += (size_t)snprintf(got + gl, cap - gl, "B%llu ", (unsigned long long)recs[i].addr);
        else if (recs[i].flags == KVT_MARK_COMMAND)
            gl += (size_t)snprintf(got + gl, cap - gl, "C ");
    }
    free(recs);
}

/* mget/mset with --pipeline-depth: several commands per query buffer, run by
 * the naive or the lookahead pipeline.  Neither the depth nor the pipeline
 * changes what is computed (replies, keyspace); the lookahead's batches span
 * the buffered commands (6-key MGETs, batch 16, 5 per buffer: the first three
 * fill a batch with 6 + 6 + 4 keys, the last two form one of 12), and an
 * MSET's first key joins the batch, not its values. */
static int test_multikey_pipelining(void) {
    const char *workloads[][2] = {{"mget", "new"}, {"mset", "new"}, {"mset", "random"}};
    const char *tables[] = {"hashtable", "dict"};
    const char *pipelines[] = {"naive", "lookahead"};
    const char *variants[] = {"none", "chunk-15133"};
    const int depths[] = {1, 7};
    char err[256];
    for (size_t w = 0; w < 3; w++) {
        for (size_t t = 0; t < 2; t++) {
            ksWorkloadResult first;
            int have = 0;
            for (size_t p = 0; p < 2; p++) {
                for (size_t v = 0; v < 2; v++) {
                    for (size_t d = 0; d < 2; d++) {
                        ksWorkloadSpec s = spec(workloads[w][0], variants[v]);
                        s.mset_keys = workloads[w][1];
                        s.prefill = 0.5;
                        s.ops = 300;
                        s.keys_per_command = 6;
                        s.table = tables[t];
                        s.pipeline = pipelines[p];
                        s.pipeline_depth = depths[d];
                        ksWorkloadResult r;
                        TEST_ASSERT_MSG(ksWorkloadRun(&s, &r, err, sizeof(err)) == 0, "%s", err);
                        if (!have) {
                            first = r;
                            have = 1;
                            continue;
                        }
                        TEST_ASSERT_MSG(r.reply_crc32 == first.reply_crc32 && r.keys == first.keys &&
                                            r.memory_bytes == first.memory_bytes && r.ops == first.ops,
                                        "%s %s %s %s depth %d differs", workloads[w][0], workloads[w][1],
                                        tables[t], pipelines[p], depths[d]);
                    }
                }
            }
        }
    }
    ksWorkloadSpec s = spec("mget", "none");
    s.ops = 10;
    s.keys_per_command = 6;
    s.pipeline = "lookahead";
    s.pipeline_depth = 5;
    size_t len;
    uint8_t *b = traceTo(&s, &len, 1u << 16);
    TEST_ASSERT(b != NULL);
    char got[256];
    markerString(b, len, got, sizeof(got));
    free(b);
    const char *want = "B16 C C C B12 C C B16 C C C B12 C C ";
    if (strcmp(got, want)) fprintf(stderr, "mget markers: got '%s' want '%s'\n", got, want);
    TEST_ASSERT(strcmp(got, want) == 0);
    s.pipeline = "naive";
    b = traceTo(&s, &len, 1u << 16);
    TEST_ASSERT(b != NULL);
    markerString(b, len, got, sizeof(got));
    free(b);
    TEST_ASSERT(strcmp(got, "C C C C C C C C C C ") == 0);
    /* MSET: keys are every other argument; 3 MSETs of 6 keys per buffer, batch 16 */
    s = spec("mset", "none");
    s.mset_keys = "random";
    s.prefill = 0.5;
    s.ops = 3;
    s.keys_per_command = 6;
    s.pipeline = "lookahead";
    s.pipeline_depth = 3;
    b = traceTo(&s, &len, 1u << 16);
    TEST_ASSERT(b != NULL);
    markerString(b, len, got, sizeof(got));
    free(b);
    if (strcmp(got, "B16 C C C ")) fprintf(stderr, "mset markers: got '%s'\n", got);
    TEST_ASSERT(strcmp(got, "B16 C C C ") == 0);
    /* an unknown pipeline variant is refused, naming the option */
    s.pipeline = "bogus";
    ksWorkloadResult r;
    TEST_ASSERT(ksWorkloadRun(&s, &r, err, sizeof(err)) == -1 && strstr(err, "--pipeline") != NULL);
    return 0;
}

int main(int argc, char **argv) {
    TEST_INIT(argc, argv);
    RUN(test_lookahead_key_batches);
    RUN(test_multikey_pipelining);
    RUN(test_workload_traces);
    RUN(test_work_kinds);
    RUN(test_traced_matches_native);
    RUN(test_cluster_meta_depends_on_slot);
    return TEST_DONE();
}
