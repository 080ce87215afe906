/*
 * prefetch_region.c -- a spatial-footprint prefetcher: per "PC" (key), which
 * lines near its last trigger access the following accesses touched; at the
 * key's next trigger, those lines again.
 *
 * Models AMD's L1 region prefetcher, documented only as using "memory access
 * history to fetch additional lines when the data access for a given
 * instruction tends to be followed by other data accesses" (AMD EPYC BIOS
 * prefetcher options; the openSIL CCX code's MSR C001_10E7 controls).  The
 * history is not documented; the simplification chosen here is spatial memory
 * streaming (Somogyi et al., ISCA 2006) in miniature: a footprint of the
 * WINDOW lines on either side of a trigger, learned per key.
 *
 *   generations  GENS slots of 3 words, the triggers still recording:
 *                [0] trigger line + 1 (0 = empty)  [1] trigger key
 *                [2] footprint: bit d + WINDOW for d in -WINDOW..-1,
 *                    bit d + WINDOW - 1 for d in 1..WINDOW (line trigger + d)
 *   ring         1 word: the slot the next trigger takes
 *   patterns     `table` entries of 2 words, direct-mapped by key:
 *                [0] key + 1 (0 = empty)  [1] footprint
 *
 * On every load reaching the level:
 *   within WINDOW lines of an open slot's trigger (the first such slot, in
 *   slot order): that bit is set (none for the trigger line); nothing issued
 *   otherwise the load is a trigger: the ring's slot, if open, stores its
 *   footprint as its key's pattern; the slot opens as {line + 1, key, 0} and
 *   the ring moves on; with a pattern for this key, prefetch its lines nearest
 *   first (-1, +1, -2, +2, ...), up to `degree`, never across the 4 KiB page.
 *
 * `region_miss`, the same but for the trigger: a load outside every open
 * slot's window that hits the level is not a trigger (it changes nothing and
 * issues nothing); only a miss opens a slot.  A hit inside a window still sets
 * its bit.  (Spatial memory streaming's trigger is the first access to a
 * region, which misses when the region is not cached; on a hit the region's
 * lines are likely cached already.)
 *
 * Their candidates depend on `hit` (region_miss) or not (region), but neither
 * is marked blind: the TLB thread runs ahead only the IP-stride kind's simple
 * state.  sim/reference.py RegionFootprint mirrors both.
 */
#include <assert.h>

#include "prefetch.h"

#define GENS 4
#define WINDOW 8
#define PAGE_SHIFT 6 /* 64 lines of 64 B = 4 KiB */
#define RING (GENS * 3) /* the ring word, after the slots */
#define PATTERNS (RING + 1) /* the first pattern word */

static_assert(2 * WINDOW <= 64, "a footprint is one 64-bit word");

static size_t rgWords(const kvsimPrefetcherConfig *cfg) {
    return PATTERNS + 2 * (size_t)cfg->table;
}

static int bitOf(int64_t d) { return d < 0 ? (int)(d + WINDOW) : (int)(d + WINDOW - 1); }

static inline uint32_t rgStep(uint64_t *state, const kvsimPrefetcherConfig *cfg, uint64_t line,
                              int hit, uint32_t key, uint64_t *out, const int miss_only) {
    for (int g = 0; g < GENS; g++) {
        uint64_t *s = state + 3 * g;
        if (s[0] == 0) continue;
        const int64_t d = (int64_t)(line - (s[0] - 1));
        if (d >= -WINDOW && d <= WINDOW) {
            if (d != 0) s[2] |= 1ull << bitOf(d);
            return 0;
        }
    }
    if (miss_only && hit) return 0;
    uint64_t *slot = state + 3 * state[RING];
    if (slot[0] != 0) {
        uint64_t *p = state + PATTERNS + 2 * kvsimTableSlot(slot[1], cfg->table);
        p[0] = slot[1] + 1;
        p[1] = slot[2];
    }
    slot[0] = line + 1;
    slot[1] = key;
    slot[2] = 0;
    state[RING] = (state[RING] + 1) % GENS;
    const uint64_t *p = state + PATTERNS + 2 * kvsimTableSlot(key, cfg->table);
    if (p[0] != (uint64_t)key + 1 || p[1] == 0) return 0;
    uint32_t n = 0;
    for (int64_t k = 1; k <= WINDOW && n < cfg->degree; k++) {
        for (int64_t d = -k; d <= k && n < cfg->degree; d += 2 * k) {
            const uint64_t c = line + (uint64_t)d;
            if ((p[1] >> bitOf(d) & 1) && (c >> PAGE_SHIFT) == (line >> PAGE_SHIFT))
                out[n++] = c;
        }
    }
    return n;
}

static uint32_t rgOperate(uint64_t *state, const kvsimPrefetcherConfig *cfg, uint64_t line,
                          int hit, uint32_t key, uint64_t *out) {
    return rgStep(state, cfg, line, hit, key, out, 0);
}

static uint32_t rgOperateMiss(uint64_t *state, const kvsimPrefetcherConfig *cfg, uint64_t line,
                              int hit, uint32_t key, uint64_t *out) {
    return rgStep(state, cfg, line, hit, key, out, 1);
}

const kvsimPrefetcherOps kvsimPrefetchRegion = {"region", rgWords, rgOperate, 0, 0, 0};
const kvsimPrefetcherOps kvsimPrefetchRegionMiss = {"region_miss", rgWords, rgOperateMiss, 0, 0, 0};
