/*
 * policy_brrip.c -- bimodal RRIP (Jaleel et al., ISCA 2010).
 *
 * Like SRRIP (policy_srrip.c) except for the insertion: a fill gets RRPV 3
 * ("distant"), except every 32nd fill of this cache, which gets RRPV 2.  The
 * paper throttles with a random 1/32 chance; a counter makes runs exactly
 * reproducible and keeps the same long-run ratio.
 */
#include "policy.h"

#define BRRIP_THROTTLE 32

void kvsimRripInit(kvsimPolicyCtx *p, uint32_t set);
uint32_t kvsimRripVictim(kvsimPolicyCtx *p, uint32_t set);
void kvsimRripInvalidate(kvsimPolicyCtx *p, uint32_t set, uint32_t way);
uint64_t kvsimRripAge(const kvsimPolicyCtx *p, uint32_t set, uint32_t way);

static void brripHit(kvsimPolicyCtx *p, uint32_t set, uint32_t way) {
    KVSIM_PLINE(p, set)[way] = 0;
}

static void brripFill(kvsimPolicyCtx *p, uint32_t set, uint32_t way) {
    uint64_t n = p->fills++;
    KVSIM_PLINE(p, set)[way] = (n % BRRIP_THROTTLE == 0) ? 2 : 3;
}

const kvsimPolicyOps kvsimPolicyBrrip = {
    .name = "brrip",
    .on_init = kvsimRripInit,
    .on_hit = brripHit,
    .on_fill = brripFill,
    .victim = kvsimRripVictim,
    .on_invalidate = kvsimRripInvalidate,
    .age = kvsimRripAge,
    .needs_pow2_ways = 0,
};
