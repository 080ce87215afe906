/*
 * policy_srrip.c -- static re-reference interval prediction (Jaleel et al.,
 * ISCA 2010) with 2-bit RRPVs (0 = near re-reference, 3 = distant).
 *
 *   fill: RRPV = 2 ("long")      hit: RRPV = 0
 *   victim: the lowest way with RRPV 3; if none, age every way by one and
 *           look again.
 * The per-line word holds the RRPV.  policy_brrip.c reuses the victim search.
 */
#include "policy.h"

#define RRPV_MAX 3

void kvsimRripInit(kvsimPolicyCtx *p, uint32_t set) {
    for (uint32_t w = 0; w < p->ways; w++) KVSIM_PLINE(p, set)[w] = RRPV_MAX;
}

static void srripHit(kvsimPolicyCtx *p, uint32_t set, uint32_t way) {
    KVSIM_PLINE(p, set)[way] = 0;
}

static void srripFill(kvsimPolicyCtx *p, uint32_t set, uint32_t way) {
    KVSIM_PLINE(p, set)[way] = RRPV_MAX - 1;
}

uint32_t kvsimRripVictim(kvsimPolicyCtx *p, uint32_t set) {
    uint64_t *rr = KVSIM_PLINE(p, set);
    for (;;) {
        for (uint32_t w = 0; w < p->ways; w++)
            if (rr[w] >= RRPV_MAX) return w;
        for (uint32_t w = 0; w < p->ways; w++) rr[w]++;
    }
}

void kvsimRripInvalidate(kvsimPolicyCtx *p, uint32_t set, uint32_t way) {
    KVSIM_PLINE(p, set)[way] = RRPV_MAX;
}

uint64_t kvsimRripAge(const kvsimPolicyCtx *p, uint32_t set, uint32_t way) {
    return KVSIM_PLINE(p, set)[way];
}

const kvsimPolicyOps kvsimPolicySrrip = {
    .name = "srrip",
    .on_init = kvsimRripInit,
    .on_hit = srripHit,
    .on_fill = srripFill,
    .victim = kvsimRripVictim,
    .on_invalidate = kvsimRripInvalidate,
    .age = kvsimRripAge,
    .needs_pow2_ways = 0,
};
