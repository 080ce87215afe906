/* fpmatch.h: which of 16 one-byte fingerprints equal a key's.
 *
 * The TLB's sets (tlb.c) and the stream prefetcher's table
 * (prefetch_stream.c) keep an 8-bit fingerprint per entry beside the full
 * tags, padded to a multiple of 16 bytes, so that a lookup compares 16 entries
 * in one SSE instruction and reads a full tag only where the fingerprint
 * matched.  Bit j of the result is set when fp[j] == f.
 */
#ifndef KVSIM_FPMATCH_H
#define KVSIM_FPMATCH_H

#include <stdint.h>

#if defined(__SSE4_2__)
#include <nmmintrin.h>
#endif

#if defined(__SSE4_2__)
/* Sixteen copies of byte b, built in registers.  _mm_set1_epi8 without AVX2
 * makes GCC store the byte and reload it as four (a store-forwarding stall of
 * some ten cycles on every lookup); a 32-bit broadcast of four copies does
 * not touch memory. */
static inline __m128i kvsimSplat8(uint8_t b) {
    return _mm_set1_epi32((int)(0x01010101u * b));
}
#endif

static inline uint32_t kvsimFpMatch16(const uint8_t *fp, uint8_t f) {
#if defined(__SSE4_2__)
    return (uint32_t)_mm_movemask_epi8(
        _mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)fp), kvsimSplat8(f)));
#else
    uint32_t m = 0;
    for (uint32_t j = 0; j < 16; j++) m |= (uint32_t)(fp[j] == f) << j;
    return m;
#endif
}

#endif /* KVSIM_FPMATCH_H */
