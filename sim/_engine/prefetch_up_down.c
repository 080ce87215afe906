/*
 * prefetch_up_down.c -- for every demand load reaching its level (hit or
 * miss), prefetch the next or the previous `degree` lines, the direction
 * given by the recent accesses to the same 4 KiB region (64 lines).
 *
 * Models AMD's L2 up/down prefetcher, documented only as using "memory access
 * history to determine whether to fetch the next or previous line for all
 * memory accesses" (AMD EPYC BIOS prefetcher options; the openSIL CCX code's
 * MSR C001_10E7 / C001_102B controls).  The history is not documented; the
 * simplification chosen here:
 *
 *   `table` entries, direct-mapped by region (region % table), 3 words each:
 *       [0] region + 1 (0 = empty)   [1] last line   [2] direction (1 up, 2 down)
 *   entry of another region (or empty) -> {region + 1, line, up}: a region
 *                                          without history goes up
 *   line > last -> up;  line < last -> down;  line == last -> unchanged
 *   last = line; prefetch line +- 1..degree in that direction, stopping at the
 *   region edge (never across a 4 KiB page).
 *
 * Its candidates do not depend on `hit`, but it is not marked blind: it
 * trains at its own level, never run ahead by the TLB thread.
 */
#include "prefetch.h"

#define REGION_SHIFT 6 /* 64 lines of 64 B = 4 KiB */

static size_t udWords(const kvsimPrefetcherConfig *cfg) { return 3 * (size_t)cfg->table; }

static uint32_t udOperate(uint64_t *state, const kvsimPrefetcherConfig *cfg, uint64_t line,
                          int hit, uint32_t key, uint64_t *out) {
    (void)hit, (void)key;
    const uint64_t region = line >> REGION_SHIFT;
    uint64_t *e = state + 3 * kvsimTableSlot(region, cfg->table);
    if (e[0] != region + 1) {
        e[0] = region + 1;
        e[1] = line;
        e[2] = 1;
    } else {
        if (line > e[1]) e[2] = 1;
        else if (line < e[1]) e[2] = 2;
        e[1] = line;
    }
    uint32_t n = 0;
    for (uint32_t i = 1; i <= cfg->degree; i++) {
        const uint64_t c = e[2] == 1 ? line + i : line - i;
        if ((c >> REGION_SHIFT) != region) break;
        out[n++] = c;
    }
    return n;
}

const kvsimPrefetcherOps kvsimPrefetchUpDown = {"up_down", udWords, udOperate, 0, 0, 0};
