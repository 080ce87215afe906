/*
 * policy_lru.c -- true LRU (ranks for <= 32 ways, else timestamps); the
 * operations are in policy_lru.h so that the engine can inline them.
 * Invalidation zeroes a stamp (ranks stay: an invalid way is refilled, and so
 * touched, before the engine asks for a victim).
 */
#include "policy_lru.h"

static void lruTouch(kvsimPolicyCtx *p, uint32_t set, uint32_t way) {
    kvsimLruTouch(p, set, way);
}

static uint32_t lruVictim(kvsimPolicyCtx *p, uint32_t set) { return kvsimLruVictim(p, set); }

static void lruInvalidate(kvsimPolicyCtx *p, uint32_t set, uint32_t way) {
    if (!p->rank) KVSIM_PLINE(p, set)[way] = 0;
}

static uint64_t lruAge(const kvsimPolicyCtx *p, uint32_t set, uint32_t way) {
    if (p->rank) return (uint64_t)(p->ways - 1 - KVSIM_RANK(p, set)[way]);
    return p->clock - KVSIM_PLINE(p, set)[way];
}

const kvsimPolicyOps kvsimPolicyLru = {
    .name = "lru",
    .on_init = NULL, /* ranks and stamps start at 0 */
    .on_hit = lruTouch,
    .on_fill = lruTouch,
    .victim = lruVictim,
    .on_invalidate = lruInvalidate,
    .age = lruAge,
    .needs_pow2_ways = 0,
};
