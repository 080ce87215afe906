/*
 * policy_random.c -- random replacement with a seeded xorshift64* generator.
 *
 * victim = xorshift64*(state) % ways.  The state starts at the level's seed
 * (never 0: a 0 seed is replaced by 0x9E3779B97F4A7C15), so a run is
 * reproducible and every way can be chosen (unlike `rand() & (ways-1)`).
 */
#include "policy.h"

static void rndNop(kvsimPolicyCtx *p, uint32_t set, uint32_t way) {
    (void)p, (void)set, (void)way;
}

static uint32_t rndVictim(kvsimPolicyCtx *p, uint32_t set) {
    (void)set;
    return (uint32_t)(kvsimXorshift64s(&p->rng) % p->ways);
}

static uint64_t rndAge(const kvsimPolicyCtx *p, uint32_t set, uint32_t way) {
    (void)p, (void)set, (void)way;
    return 0;
}

const kvsimPolicyOps kvsimPolicyRandom = {
    .name = "random",
    .on_hit = rndNop,
    .on_fill = rndNop,
    .victim = rndVictim,
    .on_invalidate = rndNop,
    .age = rndAge,
    .needs_pow2_ways = 0,
};
