/*
 * policy_lru.h -- the LRU policy's operations as inline functions, so the
 * engine can call the default policy without an indirect call.  policy_lru.c
 * builds the kvsimPolicyOps vtable from these same functions: one definition.
 *
 * True LRU, in one of two representations chosen at creation:
 *
 *  * ways <= 32 (p->rank != NULL): a recency rank per way, one byte each, 16
 *    bytes per set inside the set's block for up to 16 ways, 32 for 17 to 32
 *    (touched and searched in two halves of 16).  Every rank starts at 0, so a
 *    set block needs no initialisation (its zeroed memory is the start state,
 *    and a block the run never reaches is never written); touching way w lowers
 *    by one every rank above w's and gives w the top rank ways-1 (one SSE
 *    compare, add and blend); the victim is the way of rank 0 (one compare).
 *    The ways touched so far hold the top ranks, distinct, in the order of
 *    their last access, and the others rank 0; once every way has been touched
 *    the ranks are a permutation of 0..ways-1.  A victim is asked for only when
 *    no way is empty, so after every way was touched; and a valid line has
 *    been touched since it became valid, so among the valid ways the ranks
 *    order the lines by their last access: the same order as the stamps
 *    below, which is what the victim choice and the final flush's age order
 *    depend on.
 *  * more ways (p->rank == NULL): per-line timestamps: every access (hit or fill) stamps the line
 *    with ++clock; the victim is the way with the smallest stamp.  Stamps are
 *    unique, so the order is total and equals DineroIV's LRU stack (where a hit,
 *    read or write, moves the block to the top).  O(1) per access, O(ways) per
 *    victim; with SSE4.2 the minimum is found two ways per compare (stamps stay
 *    below 2^63, so the signed 64-bit compare is exact).
 */
#ifndef KVSIM_POLICY_LRU_H
#define KVSIM_POLICY_LRU_H

#include "policy.h"

#if defined(__SSE4_2__)
#include <nmmintrin.h>
#endif

#define KVSIM_LRU_RANK_MAX_WAYS 16   /* one row of 16 ranks */
#define KVSIM_LRU_RANK32_MAX_WAYS 32 /* two rows */
#define KVSIM_RANK(p, set) ((p)->rank + (uint64_t)(set) * (p)->rstride)

/* One bit per way, for ways <= 32. */
static inline uint32_t kvsimWaysMask(uint32_t ways) {
    return ways >= 32 ? ~0u : (1u << ways) - 1;
}

/* Rank representation (p->rank != NULL, ways <= 32): the rows' padding is 0.
 * The portable touch and victim search, for any row width (the SSE paths below
 * take one row or two). */
static inline void kvsimLruRankTouchScalar(uint8_t *rk, uint32_t ways, uint32_t way) {
    const uint8_t old = rk[way];
    for (uint32_t w = 0; w < ways; w++) rk[w] = (uint8_t)(rk[w] - (rk[w] > old));
    rk[way] = (uint8_t)(ways - 1);
}

static inline uint32_t kvsimLruRankVictimScalar(const uint8_t *rk, uint32_t wmask) {
    for (uint32_t w = 0; wmask >> w; w++)
        if (((wmask >> w) & 1) && rk[w] == 0) return w;
    return 0;
}

#if defined(__SSE4_2__)
/* One row of 16 ranks: every rank above `old` down by one, `top` in the lanes of
 * `at` (the touched way's; all-zero lanes in a row without it). */
static inline __attribute__((always_inline)) void kvsimLruRankRowTouch(uint8_t *row, __m128i old,
                                                                       __m128i top, __m128i at) {
    __m128i x = _mm_loadu_si128((const __m128i *)row);
    x = _mm_add_epi8(x, _mm_cmpgt_epi8(x, old)); /* ranks above old: -1 */
    _mm_storeu_si128((__m128i *)row, _mm_blendv_epi8(x, top, at));
}
#endif

static inline __attribute__((always_inline)) void kvsimLruRankTouch(uint8_t *rk, uint32_t ways,
                                                                    uint32_t way) {
#if defined(__SSE4_2__)
    /* padding bytes (ways..15) hold 0: never above the old rank, never changed;
     * the broadcasts are one byte shuffle each */
    const __m128i z = _mm_setzero_si128();
    const __m128i wv = _mm_shuffle_epi8(_mm_cvtsi32_si128((int)way), z);
    const __m128i old = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)rk), wv);
    const __m128i iota = _mm_setr_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    const __m128i top = _mm_shuffle_epi8(_mm_cvtsi32_si128((int)(ways - 1)), z);
    kvsimLruRankRowTouch(rk, old, top, _mm_cmpeq_epi8(iota, wv));
#else
    kvsimLruRankTouchScalar(rk, ways, way);
#endif
}

/* The way of rank 0; `wmask` has one bit per way ((1 << ways) - 1). */
static inline __attribute__((always_inline)) uint32_t kvsimLruRankVictimMask(const uint8_t *rk,
                                                                           uint32_t wmask) {
#if defined(__SSE4_2__)
    __m128i x = _mm_loadu_si128((const __m128i *)rk);
    uint32_t m = (uint32_t)_mm_movemask_epi8(_mm_cmpeq_epi8(x, _mm_setzero_si128()));
    return (uint32_t)__builtin_ctz(m & wmask);
#else
    return kvsimLruRankVictimScalar(rk, wmask);
#endif
}

static inline uint32_t kvsimLruRankVictim(const uint8_t *rk, uint32_t ways) {
    return kvsimLruRankVictimMask(rk, (1u << ways) - 1);
}

/* 17 to 32 ways: the same two operations on two rows of 16 ranks (ranks stay
 * below 32, so the signed byte compare is exact). */
static inline __attribute__((always_inline)) void kvsimLruRank32Touch(uint8_t *rk, uint32_t ways,
                                                                      uint32_t way) {
#if defined(__SSE4_2__)
    const __m128i z = _mm_setzero_si128();
    const __m128i old = _mm_shuffle_epi8(_mm_cvtsi32_si128(rk[way]), z);
    const __m128i top = _mm_shuffle_epi8(_mm_cvtsi32_si128((int)(ways - 1)), z);
    const __m128i iota = _mm_setr_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    const __m128i wv = _mm_shuffle_epi8(_mm_cvtsi32_si128((int)way), z);
    for (uint32_t h = 0; h < 32; h += 16)
        kvsimLruRankRowTouch(rk + h, old, top,
                             _mm_cmpeq_epi8(_mm_add_epi8(iota, _mm_set1_epi8((char)h)), wv));
#else
    kvsimLruRankTouchScalar(rk, ways, way);
#endif
}

static inline __attribute__((always_inline)) uint32_t kvsimLruRank32Victim(const uint8_t *rk,
                                                                           uint32_t wmask) {
#if defined(__SSE4_2__)
    const __m128i z = _mm_setzero_si128();
    const uint32_t m =
        (uint32_t)_mm_movemask_epi8(_mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)rk), z)) |
        (uint32_t)_mm_movemask_epi8(
            _mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)(rk + 16)), z)) << 16;
    return (uint32_t)__builtin_ctz(m & wmask);
#else
    return kvsimLruRankVictimScalar(rk, wmask);
#endif
}

static inline void kvsimLruTouch(kvsimPolicyCtx *p, uint32_t set, uint32_t way) {
    if (p->rank) {
        if (p->ways <= KVSIM_LRU_RANK_MAX_WAYS)
            kvsimLruRankTouch(KVSIM_RANK(p, set), p->ways, way);
        else
            kvsimLruRank32Touch(KVSIM_RANK(p, set), p->ways, way);
        return;
    }
    KVSIM_PLINE(p, set)[way] = ++p->clock;
}

/* Stamp representation (p->rank == NULL): the way with the smallest stamp. */
static inline __attribute__((always_inline)) uint32_t kvsimLruStampVictim(const uint64_t *st,
                                                                        uint32_t n) {
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

static inline uint32_t kvsimLruVictim(kvsimPolicyCtx *p, uint32_t set) {
    if (p->rank)
        return p->ways <= KVSIM_LRU_RANK_MAX_WAYS
                   ? kvsimLruRankVictim(KVSIM_RANK(p, set), p->ways)
                   : kvsimLruRank32Victim(KVSIM_RANK(p, set), kvsimWaysMask(p->ways));
    return kvsimLruStampVictim(KVSIM_PLINE(p, set), p->ways);
}

#endif /* KVSIM_POLICY_LRU_H */
