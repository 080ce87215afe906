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
#include "prefetch.h"

static size_t ipsWords(const kvsimPrefetcherConfig *cfg) {
    return 4 * (size_t)cfg->table;
}

static uint32_t ipsOperate(uint64_t *state, const kvsimPrefetcherConfig *cfg, uint64_t line,
                           int hit, uint32_t key, uint64_t *out) {
    (void)hit;
    uint64_t *e = state + 4 * (size_t)(key % cfg->table);
    if (e[0] != (uint64_t)key + 1) {
        e[0] = (uint64_t)key + 1;
        e[1] = line;
        e[2] = 0;
        e[3] = 0;
        return 0;
    }
    uint64_t d = line - e[1];
    if (d == 0) return 0;
    if (d == e[2]) {
        if (e[3] < 3) e[3]++;
    } else {
        e[2] = d;
        e[3] = 0;
    }
    e[1] = line;
    if (e[3] < 1) return 0;
    for (uint32_t i = 0; i < cfg->degree; i++) out[i] = line + d * (uint64_t)(i + 1);
    return cfg->degree;
}

const kvsimPrefetcherOps kvsimPrefetchIpStride = {"ip_stride", ipsWords, ipsOperate, 0, 1};
