/*
 * fuzz_engine_records.c -- libFuzzer target: the engine's record intake
 * (kvsimRun) fed arbitrary record arrays directly, bypassing the trace
 * reader and its record checks (traces/validate.py), so records the format
 * forbids reach the engine too: kinds past KVT_MARKER, sizes 0 and 65535,
 * accesses wrapping past 2^64, dep pointing anywhere, any tag, site and
 * marker type.
 *
 * Input: the first 8 bytes choose a configuration (below; every choice is a
 * valid one, so the bytes reach kvsimRun rather than kvsimCreate's checks),
 * byte 8 where the records are cut into two kvsimRun calls; the rest, in
 * whole 24-byte kvtRecords, is the trace.  The engine must stay in bounds
 * (ASan/UBSan), and its counters must add up: records + warm-up records is
 * the number of records fed when every kind is one the format defines (a
 * record of an unknown kind inside a warm-up is counted in neither, by
 * sim/reference.py and the engine alike).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../sim/_engine/engine.h"

static void fail(const char *what) {
    fprintf(stderr, "fuzz_engine_records: %s\n", what);
    abort();
}

/* A small hierarchy (1..3 levels of 1..64 sets) so evictions, back-invalidations
 * and miss-buffer waits happen within a few records. */
static void configure(kvsimConfig *c, const uint8_t *b) {
    memset(c, 0, sizeof *c);
    c->nlevels = 1 + b[0] % 3;
    c->line_bits = 6;
    uint32_t npol = kvsimPolicyCount();
    for (uint32_t k = 0; k < c->nlevels; k++) {
        kvsimLevelConfig *L = &c->level[k];
        uint8_t x = b[1 + k];
        L->sets = 1u << (x & 3) << k;
        uint32_t pol = (x >> 2) % npol;
        L->ways = kvsimPolicyPow2Ways(pol) ? 1u << ((x >> 5) & 3) : 1 + ((x >> 5) & 7);
        L->latency = 3 + 5 * k;
        L->mshrs = (x & 0x80) ? 0 : 1 + (x & 3);
        L->seed = x;
        snprintf(L->policy, KVSIM_NAME_LEN, "%s", kvsimPolicyName(pol));
        L->inclusion = KVSIM_NON_INCLUSIVE;
    }
    uint8_t f = b[4];
    if (c->nlevels > 1) {
        uint32_t inc = f % 3;
        c->level[c->nlevels - 1].inclusion = inc;
        if (inc == KVSIM_INCLUSIVE && c->nlevels > 2) c->level[1].inclusion = KVSIM_INCLUSIVE;
    }
    c->timing = (f >> 2) & 1;
    c->width = 1 + ((f >> 3) & 3);
    c->rob = 4 + b[5] % 64;
    c->dram_latency = 50;
    c->dram_xfer_ticks = (f & 0x20) ? 7 : 0;
    c->tlb = (f >> 6) & 1;
    c->page_bits = (f & 0x80) ? 21 : 12;
    c->dtlb_sets = 2;
    c->dtlb_ways = 2;
    c->stlb_sets = (b[5] & 0x40) ? 4 : 0;
    c->stlb_ways = 2;
    c->stlb_latency = 7;
    c->walk_latency = 30;
    c->swpf_level = b[6] % c->nlevels;
    if (c->level[c->swpf_level].inclusion == KVSIM_EXCLUSIVE) c->swpf_level--;
    c->swpf_drop_on_tlb_miss = (b[6] >> 2) & 1;
    c->flush_at_end = (b[6] >> 3) & 1;
    c->threads = (b[6] & 0x10) && (b[5] & 0x80) ? 2 : 1; /* rare: a thread start is slow */
    c->queue_cap = (b[6] & 0x20) ? 2 + b[5] % 8 : 0;
    uint32_t npf = kvsimPrefetcherCount();
    c->nprefetchers = b[7] % 3;
    for (uint32_t p = 0; p < c->nprefetchers; p++) {
        kvsimPrefetcherConfig *P = &c->prefetcher[p];
        P->level = (b[7] >> (2 + p)) % c->nlevels; /* never into an exclusive level */
        if (c->level[P->level].inclusion == KVSIM_EXCLUSIVE) P->level--;
        P->degree = 1 + ((b[7] >> 4) & 3);
        P->table = 4;
        snprintf(P->kind, KVSIM_NAME_LEN, "%s", kvsimPrefetcherName((b[7] >> (5 + p)) % npf));
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 9) return 0;
    kvsimConfig cfg;
    configure(&cfg, data);
    char err[256];
    kvsimSim *s = kvsimCreate(&cfg, err, sizeof err);
    if (!s) {
        fprintf(stderr, "fuzz_engine_records: kvsimCreate refused a valid configuration: %s\n", err);
        abort();
    }
    size_t n = (size - 9) / sizeof(kvtRecord);
    /* a copy: kvsimRun may assume aligned records, as the numpy arrays are */
    kvtRecord *r = malloc((n ? n : 1) * sizeof *r);
    memcpy(r, data + 9, n * sizeof *r);
    size_t cut = n ? (size_t)data[8] % (n + 1) : 0;
    kvsimRun(s, r, cut);
    kvsimRun(s, r + cut, n - cut);
    kvsimFinish(s);
    const kvsimStats *st = kvsimGetStats(s);
    int unknown = 0;
    for (size_t i = 0; i < n; i++) unknown |= r[i].kind > KVT_MARKER;
    uint64_t counted = st->records + st->warmup_records;
    if (unknown ? counted > n : counted != n) fail("records + warmup_records != records fed");
    kvsimFree(s);
    free(r);
    return 0;
}
