/*
 * prefetch_ip_stride.c -- per-"PC" stride prefetcher (the trace's tag and site
 * stand in for the PC: key = tag << 16 | site).
 *
 * Direct-mapped table of `table` entries, 4 words each:
 *     [0] key + 1 (0 = empty)   [1] last line   [2] stride (two's complement)
 *     [3] confidence 0..3
 * On every load reaching the level:
 *     entry = table[key % table]
 *     other key   -> entry = {key + 1, line, 0, 0}, no prefetch
 *     same line   -> nothing
 *     d == stride -> confidence + 1 (saturating at 3), else stride = d, conf = 0
 *     last = line; if confidence >= 1: prefetch line + stride * 1..degree
 */
#include "prefetch_ip_stride.h"

static size_t ipsWords(const kvsimPrefetcherConfig *cfg) {
    return 4 * (size_t)cfg->table;
}

static uint32_t ipsOperate(uint64_t *state, const kvsimPrefetcherConfig *cfg, uint64_t line,
                           int hit, uint32_t key, uint64_t *out) {
    (void)hit;
    return kvsimIpStrideOperate(state, cfg, line, key, out);
}

const kvsimPrefetcherOps kvsimPrefetchIpStride = {"ip_stride", ipsWords, ipsOperate, 0, 1, 0};
