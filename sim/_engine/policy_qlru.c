/*
 * policy_qlru.c -- quad-age LRU as nanoBench names it QLRU_H00_M1_R0_U1: the
 * L2 replacement policy Abel and Reineke measured on Intel's Cannon Lake and
 * Ice Lake cores (nanoBench's cache analyzer, uops.info's cache page; the
 * policy's simulator is nanoBench's tools/CacheAnalyzer/cacheSim.py QLRUSim).
 *
 * Each line has a 2-bit age (0 = recently used, 3 = a victim candidate):
 *
 *   hit   (H00): the line's age becomes 0
 *   fill  (M1):  the new line's age is 1
 *   victim (R0): the lowest way of age 3 (the engine fills an invalid way
 *                first, as R0 does)
 *   update (U1): after every hit and fill, when no other line of the set has
 *                age 3, every other line ages by the same amount until the
 *                oldest of them has
 *
 * Against a working set slightly larger than a set (a cyclic access to n >
 * ways lines), LRU misses every access; this policy keeps some of the lines,
 * because the update ages many lines to 3 at once and the victim is the
 * lowest-numbered of them, not the oldest: it loses a set gradually as its
 * lines outnumber its ways (sim/VALIDATION.md, finding 14).
 *
 * The per-line word holds the age.  Ages start at 3 (the empty set of
 * nanoBench's simulator); an invalidation leaves the age as it was.
 */
#include "policy.h"

#define AGE_MAX 3

static void qlruInit(kvsimPolicyCtx *p, uint32_t set) {
    for (uint32_t w = 0; w < p->ways; w++) KVSIM_PLINE(p, set)[w] = AGE_MAX;
}

/* U1: the others aged until the oldest of them is AGE_MAX */
static void qlruUpdate(kvsimPolicyCtx *p, uint32_t set, uint32_t way) {
    uint64_t *a = KVSIM_PLINE(p, set);
    uint64_t m = 0;
    for (uint32_t w = 0; w < p->ways; w++)
        if (w != way && a[w] > m) m = a[w];
    if (m >= AGE_MAX || p->ways < 2) return;
    for (uint32_t w = 0; w < p->ways; w++)
        if (w != way) a[w] += AGE_MAX - m;
}

static void qlruHit(kvsimPolicyCtx *p, uint32_t set, uint32_t way) {
    KVSIM_PLINE(p, set)[way] = 0;
    qlruUpdate(p, set, way);
}

static void qlruFill(kvsimPolicyCtx *p, uint32_t set, uint32_t way) {
    KVSIM_PLINE(p, set)[way] = 1;
    qlruUpdate(p, set, way);
}

/* The lowest way of age 3; with one way (no other line to age) that way. */
static uint32_t qlruVictim(kvsimPolicyCtx *p, uint32_t set) {
    const uint64_t *a = KVSIM_PLINE(p, set);
    for (uint32_t w = 0; w < p->ways; w++)
        if (a[w] >= AGE_MAX) return w;
    uint32_t v = 0; /* not reached with two ways or more: U1 leaves an age-3 line */
    for (uint32_t w = 1; w < p->ways; w++)
        if (a[w] > a[v]) v = w;
    return v;
}

static void qlruInvalidate(kvsimPolicyCtx *p, uint32_t set, uint32_t way) {
    (void)p, (void)set, (void)way;
}

static uint64_t qlruAge(const kvsimPolicyCtx *p, uint32_t set, uint32_t way) {
    return KVSIM_PLINE(p, set)[way];
}

const kvsimPolicyOps kvsimPolicyQlru = {
    .name = "qlru",
    .on_init = qlruInit,
    .on_hit = qlruHit,
    .on_fill = qlruFill,
    .victim = qlruVictim,
    .on_invalidate = qlruInvalidate,
    .age = qlruAge,
    .needs_pow2_ways = 0,
};
