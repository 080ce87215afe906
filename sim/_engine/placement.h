/*
 * placement.h -- physical page placement: the frame a virtual page sits in,
 * for the caches that a physical address indexes.
 *
 * Why.  A trace records virtual addresses, and without placement the caches
 * are indexed by them: a working set of contiguous virtual pages fills every
 * set of a level evenly, so a random-replacement-free level keeps all of it up
 * to its full capacity.  The hardware indexes the levels past L1 by the
 * physical address, and the operating system (or, in a guest, the host, whose
 * 4 KiB pages back even the guest's huge pages) puts each page in whatever
 * frame is free: the set-index bits above the page offset are, in effect,
 * random per page.  Some sets then get more lines than ways before the working
 * set reaches the level's capacity, and a chase loses the level gradually
 * around its size rather than at it (sim/VALIDATION.md, finding 14).  An L1
 * whose set index lies within the page offset (virtually indexed, physically
 * tagged: 64 sets of 64 B under 4 KiB pages) is not changed by placement.
 *
 * What.  With kvsimConfig.place_bits = b (0: no placement, the trace's address
 * indexes the caches), the page number p = addr >> b of every line the caches
 * see (a piece, a software or hardware prefetch, a walk's page-table read) is
 * replaced by kvsimPlaceFrame(p): a bijection of the (64 - b)-bit page numbers,
 * seeded by kvsimConfig.place_seed, so two pages never share a frame, and the
 * same seed gives the same frames (deterministic).  The offset within the page
 * is kept.  The TLBs keep translating the virtual page; the hardware
 * prefetchers see the physical line, as the hardware's do.  The mix is two
 * rounds of multiply-by-odd and xor-shift modulo 2^(64 - b), each a bijection.
 *
 * sim/reference.py's `place_line` is the same function, bit for bit; the
 * tests compare them (sim/tests/test_placement.py).
 */
#ifndef KVSIM_PLACEMENT_H
#define KVSIM_PLACEMENT_H

#include <stdint.h>

/* The multipliers (odd: a bijection modulo any power of two) and the seed's
 * spreading constant. */
#define KVSIM_PLACE_MUL1 0xBF58476D1CE4E5B9ULL
#define KVSIM_PLACE_MUL2 0x94D049BB133111EBULL
#define KVSIM_PLACE_GOLDEN 0x9E3779B97F4A7C15ULL
_Static_assert(KVSIM_PLACE_MUL1 & KVSIM_PLACE_MUL2 & 1, "odd multipliers: bijections");

/* Page sizes placement accepts, as bits (kvsimCreate checks them). */
#define KVSIM_PLACE_MIN_BITS 12
#define KVSIM_PLACE_MAX_BITS 30

/* The frame of page p, a (64 - bits)-bit page number. */
static inline uint64_t kvsimPlaceFrame(uint64_t p, uint32_t bits, uint64_t seed) {
    const uint32_t w = 64 - bits;
    const uint64_t m = (w >= 64) ? ~0ULL : ((1ULL << w) - 1);
    uint64_t x = (p ^ (seed * KVSIM_PLACE_GOLDEN)) & m;
    x = (x * KVSIM_PLACE_MUL1) & m;
    x ^= x >> (w / 2);
    x = (x * KVSIM_PLACE_MUL2) & m;
    x ^= x >> (w / 2 - 1);
    return x;
}

/* The physical line of virtual `line` (lines of 2^line_bits bytes) with pages
 * of 2^bits bytes; bits = 0: the line itself. */
static inline uint64_t kvsimPlaceLine(uint64_t line, uint32_t line_bits, uint32_t bits,
                                      uint64_t seed) {
    if (!bits) return line;
    const uint32_t sh = bits - line_bits;
    return (kvsimPlaceFrame(line >> sh, bits, seed) << sh) | (line & ((1ULL << sh) - 1));
}

#endif /* KVSIM_PLACEMENT_H */
