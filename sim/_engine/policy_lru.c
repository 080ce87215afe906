/*
 * policy_lru.c -- true LRU by per-line timestamps.
 *
 * Every access (hit or fill) stamps the line with ++clock; the victim is the
 * way with the smallest stamp.  Stamps are unique, so the order is total and
 * equals DineroIV's LRU stack (where a hit, read or write, moves the block to
 * the top).  O(1) per access, O(ways) per victim; with SSE4.2 the minimum is
 * found two ways per compare (stamps stay below 2^63, so the signed 64-bit
 * compare is exact).  Invalidation zeroes the stamp; the engine refills
 * invalid ways before it asks for a victim.
 */
#include "policy.h"

#if defined(__SSE4_2__)
#include <nmmintrin.h>
#endif

static void lruTouch(kvsimPolicyCtx *p, uint32_t set, uint32_t way) {
    KVSIM_PLINE(p, set)[way] = ++p->clock;
}

static uint32_t lruVictim(kvsimPolicyCtx *p, uint32_t set) {
    const uint64_t *st = KVSIM_PLINE(p, set);
    const uint32_t n = p->ways;
    uint64_t m = UINT64_MAX;
    uint32_t w = 0;
#if defined(__SSE4_2__)
    if (n >= 2) {
        __m128i mv = _mm_loadu_si128((const __m128i *)st);
        for (w = 2; w + 2 <= n; w += 2) {
            __m128i x = _mm_loadu_si128((const __m128i *)(st + w));
            mv = _mm_blendv_epi8(mv, x, _mm_cmpgt_epi64(mv, x)); /* lane-wise min */
        }
        uint64_t a = (uint64_t)_mm_cvtsi128_si64(mv);
        uint64_t b = (uint64_t)_mm_extract_epi64(mv, 1);
        m = a < b ? a : b;
    }
#endif
    for (; w < n; w++) m = st[w] < m ? st[w] : m;
    uint32_t v = 0;
    while (st[v] != m) v++; /* the (unique) way holding the minimum */
    return v;
}

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
