/*
 * test_engine.c -- C smoke test of the engine, run under ASan+UBSan by
 * `make test-sanitize`.  Exercises every policy, prefetcher, inclusion mode,
 * the TLB and the timing model on a pseudo-random trace, and checks a few
 * invariants that must hold for any trace; and the common configuration with 1
 * to 4 threads, and a preset-like one with and without the TLB thread, whose
 * statistics must be identical (`make test-sanitize` also
 * runs it under ThreadSanitizer).  Usage: test_engine_san [--seed N]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../engine.h"
#include "../policy_lru.h"
#include "check.h"

static uint64_t rng = 88172645463325252ULL;
static uint64_t next(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static int cmpU64(const void *a, const void *b) {
    const uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

static uint64_t sum(const uint64_t *a, size_t n) {
    uint64_t t = 0;
    for (size_t i = 0; i < n; i++) t += a[i];
    return t;
}

/* LRU ranks of 17 to 32 ways (policy_lru.h) against a recency list, from the
 * zeroed start: after every touch the ways touched so far hold the top ranks
 * in the order of their last touch and the others rank 0; once every way has
 * been touched the victim is the least recently touched way; the row's
 * padding stays 0. */
static void testRank32(void) {
    const uint32_t wayss[] = {17, 18, 26, 31, 32};
    for (size_t t = 0; t < sizeof wayss / sizeof wayss[0]; t++) {
        const uint32_t ways = wayss[t];
        uint8_t row[32];
        uint32_t order[32]; /* the ways touched so far; order[0]: the least recent */
        uint32_t n = 0;
        kvsimPolicyCtx p;
        memset(&p, 0, sizeof p);
        memset(row, 0, sizeof row);
        p.ways = ways;
        p.rank = row;
        p.rstride = sizeof row;
        for (int i = 0; i < 20000; i++) {
            /* slowly at first, so that many touches see untouched ways */
            const uint32_t way = (uint32_t)(next() % (i < 200 ? 1 + i * ways / 200 : ways));
            kvsimLruTouch(&p, 0, way);
            uint32_t j = 0;
            while (j < n && order[j] != way) j++;
            if (j == n) n++;
            memmove(order + j, order + j + 1, (n - 1 - j) * sizeof order[0]);
            order[n - 1] = way;
            uint32_t touched = 0;
            for (j = 0; j < n; j++) {
                CHECK(row[order[j]] == ways - n + j);
                touched |= 1u << order[j];
            }
            for (uint32_t w = 0; w < ways; w++) CHECK((touched >> w & 1) || row[w] == 0);
            if (n == ways) CHECK(kvsimLruVictim(&p, 0) == order[0]);
            for (uint32_t w = ways; w < 32; w++) CHECK(row[w] == 0);
        }
        CHECK(n == ways);
    }
}

static void run(const char *policy, uint32_t inclusion, int timing, int tlb, int pf) {
    kvsimConfig c;
    memset(&c, 0, sizeof c);
    c.nlevels = 3;
    c.line_bits = 6;
    uint32_t sets[3] = {16, 64, 256}, ways[3] = {4, 8, 8}, lat[3] = {4, 12, 40};
    for (int k = 0; k < 3; k++) {
        c.level[k].sets = sets[k];
        c.level[k].ways = ways[k];
        c.level[k].latency = lat[k];
        c.level[k].mshrs = k < 2 ? 8 : 0;
        c.level[k].seed = 7;
        snprintf(c.level[k].policy, KVSIM_NAME_LEN, "%s", policy);
    }
    c.level[2].inclusion = inclusion;
    if (pf) { /* every registered kind, alternately at L1 and L2 */
        c.nprefetchers = kvsimPrefetcherCount();
        CHECK(c.nprefetchers <= KVSIM_MAX_PREFETCHERS);
        for (uint32_t p = 0; p < c.nprefetchers; p++) {
            c.prefetcher[p].level = p % 2;
            c.prefetcher[p].degree = 2;
            c.prefetcher[p].table = 16;
            snprintf(c.prefetcher[p].kind, KVSIM_NAME_LEN, "%s", kvsimPrefetcherName(p));
            /* the L2's: issued on arrival, trained by stores and by hits, on every
             * other inclusion mode */
            if (p % 2 && inclusion % 2 == 0)
                c.prefetcher[p].flags = KVSIM_PF_ARRIVAL | KVSIM_PF_STORES | KVSIM_PF_HITS;
        }
    }
    c.timing = (uint32_t)timing;
    c.store_buffer = timing && inclusion % 2 == 0 ? 4 : 0; /* stores' RFOs timed (and training) */
    c.width = 4;
    c.rob = 64;
    c.dram_latency = 200;
    c.dram_xfer_ticks = 20;
    c.tlb = (uint32_t)tlb;
    c.page_bits = 12;
    c.dtlb_sets = 4;
    c.dtlb_ways = 4;
    c.stlb_sets = 16;
    c.stlb_ways = 4;
    c.stlb_latency = 7;
    c.walk_latency = 30;
    /* walks through the caches; timed: the page-table lines' retention and the host's
     * read latency (engine.c walkCost), on every other inclusion mode; a last level that
     * keeps no page-table line on the others */
    c.walk_reads = tlb ? 2 : 0;
    if (tlb && timing && inclusion % 2 == 0) {
        c.walk_retention = 400;
        c.host_read_latency = 300;
    }
    if (tlb && timing && inclusion % 2 == 1) c.walk_last_level_lost = 1;
    /* physical page placement (placement.h) on every other inclusion mode and without
     * the TLB (the record-by-record path either way) */
    if (inclusion % 2 == 1 || !tlb) {
        c.place_bits = 12;
        c.place_seed = 5;
    }
    c.flush_at_end = 1;
    char err[200];
    kvsimSim *s = kvsimCreate(&c, err, sizeof err);
    if (s == NULL) {
        fprintf(stderr, "create failed: %s\n", err);
        failures++;
        return;
    }
    enum { N = 20000 };
    kvtRecord *r = calloc(N, sizeof *r);
    for (int i = 0; i < N; i++) {
        uint64_t x = next();
        r[i].addr = 0x7f0000000000ULL + (x % (1u << 20));
        r[i].size = (uint16_t)(1 + (x >> 40) % 64);
        r[i].kind = (uint8_t)((x >> 50) % 10 < 6 ? 0 : ((x >> 50) % 10 < 9 ? 1 : 2));
        r[i].gap = (uint32_t)((x >> 20) % 8);
        r[i].dep = (uint32_t)((x >> 30) % 4);
        r[i].tag = (uint8_t)((x >> 33) % 16);
        r[i].site = (uint16_t)((x >> 37) % 8);
        if (i == 100 || i == 2000) {
            r[i].kind = KVT_MARKER;
            r[i].flags = i == 100 ? KVT_MARK_WARMUP_BEGIN : KVT_MARK_WARMUP_END;
            r[i].size = 0;
        }
    }
    for (int off = 0; off < N; off += 4096) kvsimRun(s, r + off, (size_t)(N - off < 4096 ? N - off : 4096));
    kvsimFinish(s);
    const kvsimStats *st = kvsimGetStats(s);
    CHECK(st->records + st->warmup_records == N);
    for (int k = 0; k < 3; k++) {
        const kvsimLevelStats *ls = &st->level[k];
        size_t n = KVSIM_NTAGS * KVSIM_NKINDS;
        CHECK(sum(ls->access, n) == sum(ls->hit, n) + sum(ls->miss, n));
        CHECK(ls->writebacks_flush <= ls->writebacks);
    }
    if (timing) CHECK(st->ticks > 0);
    /* every timed page-table read is served somewhere and timed at one latency */
    CHECK(sum(st->walk_served, KVSIM_MAX_LEVELS + 1) == sum(st->walk_timed, KVSIM_MAX_LEVELS + 2));
    if (tlb && timing) CHECK(sum(st->walk_timed, KVSIM_MAX_LEVELS + 2) > 0);
    kvsimFree(s);
    free(r);
}

/* The common configuration (LRU, non-inclusive, no TLB or prefetchers) with
 * `threads` threads and queue capacity `qcap` (0: the default); with `general`,
 * a preset's shape instead (an inclusive L2, a fully associative DTLB and an
 * STLB, ip_stride and stream prefetchers; general 2: an exclusive last level),
 * whose threads > 1 mean a TLB thread (qcap: its records per block) and,
 * functional, a thread for the last level (lower.c; qcap: its requests per
 * buffer). */
static kvsimConfig lruConfig(int timing, uint32_t threads, uint32_t qcap, int general) {
    kvsimConfig c;
    memset(&c, 0, sizeof c);
    c.nlevels = 3;
    c.line_bits = 6;
    const uint32_t sets[3] = {64, 256, 1024}, ways[3] = {8, 16, 12}, lat[3] = {4, 12, 40};
    for (int k = 0; k < 3; k++) {
        c.level[k].sets = sets[k];
        c.level[k].ways = ways[k];
        c.level[k].latency = lat[k];
        c.level[k].mshrs = k < 2 ? 8 : 0;
        snprintf(c.level[k].policy, KVSIM_NAME_LEN, "lru");
    }
    c.timing = (uint32_t)timing;
    c.width = 4;
    c.rob = 128;
    c.dram_latency = 200;
    c.dram_xfer_ticks = 20;
    c.flush_at_end = 1;
    c.threads = threads;
    c.queue_cap = qcap;
    if (general) {
        c.level[1].inclusion = KVSIM_INCLUSIVE;
        if (general == 2) c.level[2].inclusion = KVSIM_EXCLUSIVE;
        c.tlb = 1;
        c.page_bits = 12;
        c.dtlb_sets = 1;
        c.dtlb_ways = 48;
        c.stlb_sets = 32;
        c.stlb_ways = 8;
        c.stlb_latency = 7;
        c.walk_latency = 30;
        c.swpf_drop_on_tlb_miss = 1;
        c.nprefetchers = 2;
        c.prefetcher[0] = (kvsimPrefetcherConfig){.level = 0, .degree = 1, .table = 64};
        snprintf(c.prefetcher[0].kind, KVSIM_NAME_LEN, "ip_stride");
        c.prefetcher[1] = (kvsimPrefetcherConfig){.level = 1, .degree = 2, .table = 32};
        snprintf(c.prefetcher[1].kind, KVSIM_NAME_LEN, "stream");
    }
    return c;
}

/* That configuration on a trace with markers (warm-up, phases, commands),
 * software prefetches, stores and multi-line accesses, fed in uneven chunks. */
static kvsimStats runThreadsRan(const kvtRecord *r, size_t n, int timing, uint32_t threads,
                                uint32_t qcap, int general, uint32_t *ran) {
    const kvsimConfig c = lruConfig(timing, threads, qcap, general);
    char err[200];
    kvsimStats out;
    memset(&out, 0, sizeof out);
    kvsimSim *s = kvsimCreate(&c, err, sizeof err);
    if (s == NULL) {
        fprintf(stderr, "create failed: %s\n", err);
        failures++;
        return out;
    }
    CHECK(kvsimThreads(s) == 1u || !general); /* the TLB thread: none has run yet */
    for (size_t off = 0, step = 1; off < n; off += step, step = step * 7 % 30011 + 1)
        kvsimRun(s, r + off, n - off < step ? n - off : step);
    kvsimFinish(s);
    if (ran) *ran = kvsimThreads(s); /* the last level's thread has run by the end */
    memcpy(&out, kvsimGetStats(s), sizeof out);
    kvsimFree(s);
    return out;
}

static kvsimStats runThreads(const kvtRecord *r, size_t n, int timing, uint32_t threads,
                             uint32_t qcap, int general) {
    uint32_t ran = 0;
    const kvsimStats st = runThreadsRan(r, n, timing, threads, qcap, general, &ran);
    /* the trace below misses the DTLB on most records: the TLB thread takes them
     * after the first slice (4 blocks of qcap; 65536 records, more than the trace,
     * without it); functional, the last level's thread takes the L2's requests */
    const uint32_t lower = !timing && threads > 1, tlb = threads > 1 && qcap;
    if (general) CHECK(ran == 1 + lower + tlb);
    return st;
}

/* The TLB thread takes a slice of records only when the slice before missed
 * the DTLB on at least every other record (tlb.c engTlbRun): a trace that
 * stays on a few pages never starts it, and one that alternates between
 * scattered and sequential stretches hands the TLB back and forth between the
 * threads; every count is still that of one thread. */
static void testTlbThreadChoice(void) {
    enum { N = 20000 };
    kvtRecord *r = calloc(N, sizeof *r);
    for (int mixed = 0; mixed < 2; mixed++) {
        for (int i = 0; i < N; i++) {
            const uint64_t x = next();
            const int scattered = mixed && (i / 300) % 2; /* 300 records: 9 slices of 32 */
            r[i].addr = scattered ? 0x7f0000000000ULL + (x % (1u << 26))
                                  : 0x7f0000000000ULL + (uint64_t)i * 8 % 16384;
            r[i].size = 8;
            r[i].kind = (uint8_t)((x >> 50) % 4 ? KVT_LOAD : KVT_STORE);
            r[i].gap = (uint32_t)((x >> 20) % 8);
        }
        for (int timing = 0; timing < 2; timing++) {
            const kvsimStats one = runThreads(r, N, timing, 1, 0, 1);
            for (uint32_t q = 0; q <= 8; q += 8) {
                /* functional: beside the last level's thread */
                uint32_t ran = 0;
                const uint32_t lower = !timing;
                const kvsimStats two = runThreadsRan(r, N, timing, 2, q, 1, &ran);
                CHECK(memcmp(&one, &two, sizeof one) == 0);
                /* sequential only: never; mixed, in slices of 32: it takes some */
                if (!mixed) CHECK(ran == 1u + lower);
                if (mixed && q) CHECK(ran == 2u + lower);
            }
        }
    }
    free(r);
}

static void testThreads(void) {
    enum { N = 60000 };
    kvtRecord *r = calloc(N, sizeof *r);
    for (int i = 0; i < N; i++) {
        uint64_t x = next();
        r[i].addr = 0x7f0000000000ULL + (x % (1u << 22));
        r[i].size = (uint16_t)((x >> 40) % 4 ? 8 : 1 + (x >> 42) % 200);
        r[i].kind = (uint8_t)((x >> 50) % 10 < 6 ? KVT_LOAD : (x >> 50) % 10 < 9 ? KVT_STORE
                                                                               : KVT_PREFETCH);
        r[i].gap = (uint32_t)((x >> 20) % 8);
        r[i].dep = (uint32_t)((x >> 30) % 4);
        r[i].tag = (uint8_t)((x >> 33) % 16);
        if ((x >> 24) % 3000 == 0 || i == 50 || i == 9000) {
            r[i].kind = KVT_MARKER;
            r[i].flags = i == 50 ? KVT_MARK_WARMUP_BEGIN : i == 9000 ? KVT_MARK_WARMUP_END
                         : (x >> 4) % 2 ? KVT_MARK_COMMAND : KVT_MARK_PHASE;
            r[i].addr = (x >> 8) % 3;
            r[i].size = 0;
        }
    }
    /* segments of up to 8192 records, and (queue capacity 8) of 256 */
    const uint32_t qcaps[2] = {0, 8};
    for (int general = 0; general < 3; general++)
        for (int timing = 0; timing < 2; timing++) {
            const kvsimStats one = runThreads(r, N, timing, 1, 0, general);
            CHECK(one.records + one.warmup_records == N);
            CHECK(!general || (one.dtlb_miss > 0 && one.stlb_miss > 0));
            for (int q = 0; q < 2; q++)
                for (uint32_t t = 1; t <= 4; t++) {
                    const kvsimStats many = runThreads(r, N, timing, t, qcaps[q], general);
                    CHECK(memcmp(&one, &many, sizeof one) == 0);
                }
        }
    /* freed without kvsimFinish, right after a call whose last shares a worker
     * may still be running: nothing may touch freed memory (a kvsimFree that
     * freed the caches before it stopped the workers fails here) */
    for (int timing = 0; timing < 6; timing++) {
        const kvsimConfig c = lruConfig(timing % 2, 2, 0, timing / 2);
        char err[200];
        kvsimSim *s = kvsimCreate(&c, err, sizeof err);
        CHECK(s != NULL);
        if (s) {
            kvsimRun(s, r, N);
            kvsimFree(s);
        }
    }
    free(r);
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "--seed") == 0) rng = strtoull(argv[2], NULL, 10) | 1;
    testRank32();
    testThreads();
    testTlbThreadChoice();
    if (argc == 2 && strcmp(argv[1], "--threads-only") == 0) {
        printf("test_engine (threads): %s\n", failures ? "FAILED" : "ok");
        return failures != 0;
    }
    /* every registered policy (policy_factory.c's table, not a list of its own) */
    CHECK(kvsimPolicyCount() > 0 && kvsimPolicyName(kvsimPolicyCount()) == NULL);
    for (uint32_t p = 0; p < kvsimPolicyCount(); p++)
        for (uint32_t inc = 0; inc < kvsimInclusionCount(); inc++)
            for (int t = 0; t < 2; t++) run(kvsimPolicyName(p), inc, t, t, t);
    /* invalid configurations are refused with a message */
    kvsimConfig c;
    memset(&c, 0, sizeof c);
    c.nlevels = 1;
    c.line_bits = 6;
    c.level[0].sets = 3;
    c.level[0].ways = 2;
    char err[200] = "";
    CHECK(kvsimCreate(&c, err, sizeof err) == NULL && strstr(err, "power of two") != NULL);
    c.level[0].sets = 4;
    c.place_bits = 6; /* a page no larger than a line */
    CHECK(kvsimCreate(&c, err, sizeof err) == NULL && strstr(err, "place_bits") != NULL);
    c.place_bits = 0; /* the prefetcher flags are for levels below L1 */
    c.nprefetchers = 1;
    c.prefetcher[0] = (kvsimPrefetcherConfig){.level = 0, .degree = 1, .table = 1,
                                              .flags = KVSIM_PF_HITS};
    snprintf(c.prefetcher[0].kind, KVSIM_NAME_LEN, "stream");
    CHECK(kvsimCreate(&c, err, sizeof err) == NULL && strstr(err, "below L1") != NULL);
    c.nprefetchers = 0;
    /* placement is a bijection of the pages that keeps the offset in the page */
    enum { NP = 1 << 14 };
    uint64_t *fr = malloc(NP * sizeof *fr);
    for (uint64_t pg = 0; pg < NP; pg++) {
        const uint64_t ln = (pg << 6) | (pg & 63);
        const uint64_t ph = kvsimPlacedLine(ln, 6, 12, 9);
        CHECK((ph & 63) == (ln & 63));
        fr[pg] = ph >> 6;
    }
    qsort(fr, NP, sizeof *fr, cmpU64); /* distinct frames */
    for (uint64_t i = 1; i < NP; i++) CHECK(fr[i] != fr[i - 1]);
    free(fr);
    printf("test_engine: %s\n", failures ? "FAILED" : "ok");
    return failures != 0;
}
