/*
 * policy_lru.h -- the LRU policy's operations as inline functions, so the
 * engine can call the default policy without an indirect call.  policy_lru.c
 * builds the kvsimPolicyOps vtable from these same functions: one definition.
 *
 * True LRU by per-line timestamps: every access (hit or fill) stamps the line
 * with ++clock; the victim is the way with the smallest stamp.  Stamps are
 * unique, so the order is total and equals DineroIV's LRU stack (where a hit,
 * read or write, moves the block to the top).  O(1) per access, O(ways) per
 * victim; with SSE4.2 the minimum is found two ways per compare (stamps stay
 * below 2^63, so the signed 64-bit compare is exact).
 */
#ifndef KVSIM_POLICY_LRU_H
#define KVSIM_POLICY_LRU_H

#include "policy.h"

#if defined(__SSE4_2__)
#include <nmmintrin.h>
#endif

static inline void kvsimLruTouch(kvsimPolicyCtx *p, uint32_t set, uint32_t way) {
    KVSIM_PLINE(p, set)[way] = ++p->clock;
}

static inline uint32_t kvsimLruVictim(kvsimPolicyCtx *p, uint32_t set) {
    const uint64_t *st = KVSIM_PLINE(p, set);
    const uint32_t n = p->ways;
    uint64_t m = UINT64_MAX;
    uint32_t v = 0, w = 0;
#if defined(__SSE4_2__)
    if (n >= 2) {
        /* lane-wise minimum and its way index, without branches */
        __m128i mv = _mm_loadu_si128((const __m128i *)st);
        __m128i mi = _mm_set_epi64x(1, 0), idx = mi;
        const __m128i two = _mm_set1_epi64x(2);
        for (w = 2; w + 2 <= n; w += 2) {
            idx = _mm_add_epi64(idx, two);
            __m128i x = _mm_loadu_si128((const __m128i *)(st + w));
            __m128i lt = _mm_cmpgt_epi64(mv, x);
            mv = _mm_blendv_epi8(mv, x, lt);
            mi = _mm_blendv_epi8(mi, idx, lt);
        }
        uint64_t a = (uint64_t)_mm_cvtsi128_si64(mv), b = (uint64_t)_mm_extract_epi64(mv, 1);
        uint32_t ia = (uint32_t)_mm_cvtsi128_si64(mi), ib = (uint32_t)_mm_extract_epi64(mi, 1);
        m = a < b ? a : b; /* stamps are unique: no ties */
        v = a < b ? ia : ib;
    }
#endif
    for (; w < n; w++) {
        v = st[w] < m ? w : v;
        m = st[w] < m ? st[w] : m;
    }
    return v;
}

#endif /* KVSIM_POLICY_LRU_H */
