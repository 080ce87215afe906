/*
 * policy_lru.c -- true LRU (timestamps); the operations are in policy_lru.h so
 * that the engine can inline them.  Invalidation zeroes the stamp; the engine
 * refills invalid ways before it asks for a victim.
 */
#include "policy_lru.h"

static void lruTouch(kvsimPolicyCtx *p, uint32_t set, uint32_t way) {
    kvsimLruTouch(p, set, way);
}

static uint32_t lruVictim(kvsimPolicyCtx *p, uint32_t set) { return kvsimLruVictim(p, set); }

static void lruInvalidate(kvsimPolicyCtx *p, uint32_t set, uint32_t way) {
    KVSIM_PLINE(p, set)[way] = 0;
}

static uint64_t lruAge(const kvsimPolicyCtx *p, uint32_t set, uint32_t way) {
    return p->clock - KVSIM_PLINE(p, set)[way];
}

const kvsimPolicyOps kvsimPolicyLru = {
    .name = "lru",
    .on_init = NULL,
    .on_hit = lruTouch,
    .on_fill = lruTouch,
    .victim = lruVictim,
    .on_invalidate = lruInvalidate,
    .age = lruAge,
    .needs_pow2_ways = 0,
};
