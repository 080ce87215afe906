/*
 * policy_lru.c -- true LRU by per-line timestamps.
 *
 * Each access stamps the line with ++clock; the victim is the valid way with
 * the smallest stamp (lowest way on a tie, which cannot happen: stamps are
 * unique).  Equivalent to DineroIV's LRU stack, where a hit (read or write)
 * moves the block to the top.  O(1) per hit, O(ways) per victim.
 */
#include "policy.h"

static void lruTouch(kvsimPolicyCtx *p, uint32_t set, uint32_t way) {
    p->line[(uint64_t)set * p->ways + way] = ++p->clock;
}

/* The smallest stamp, lowest way on a tie (stamps are unique, so no ties occur
 * among valid lines).  Two interleaved min chains halve the dependency chain. */
static uint32_t lruVictim(kvsimPolicyCtx *p, uint32_t set) {
    const uint64_t *st = p->line + (uint64_t)set * p->ways;
    const uint32_t n = p->ways;
    uint64_t m0 = st[0], m1 = UINT64_MAX;
    uint32_t b0 = 0, b1 = 0;
    uint32_t w = 1;
    for (; w + 1 < n; w += 2) {
        uint64_t a = st[w], b = st[w + 1];
        b0 = a < m0 ? w : b0;
        m0 = a < m0 ? a : m0;
        b1 = b < m1 ? w + 1 : b1;
        m1 = b < m1 ? b : m1;
    }
    if (w < n) {
        b1 = st[w] < m1 ? w : b1;
        m1 = st[w] < m1 ? st[w] : m1;
    }
    return (m1 < m0 || (m1 == m0 && b1 < b0)) ? b1 : b0;
}

static void lruInvalidate(kvsimPolicyCtx *p, uint32_t set, uint32_t way) {
    p->line[(uint64_t)set * p->ways + way] = 0;
}

static uint64_t lruAge(const kvsimPolicyCtx *p, uint32_t set, uint32_t way) {
    return p->clock - p->line[(uint64_t)set * p->ways + way];
}

const kvsimPolicyOps kvsimPolicyLru = {
    .name = "lru",
    .on_hit = lruTouch,
    .on_fill = lruTouch,
    .victim = lruVictim,
    .on_invalidate = lruInvalidate,
    .age = lruAge,
    .needs_pow2_ways = 0,
};
