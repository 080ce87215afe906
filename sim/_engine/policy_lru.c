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

static uint32_t lruVictim(kvsimPolicyCtx *p, uint32_t set) {
    const uint64_t *st = p->line + (uint64_t)set * p->ways;
    uint32_t best = 0;
    for (uint32_t w = 1; w < p->ways; w++)
        if (st[w] < st[best]) best = w;
    return best;
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
