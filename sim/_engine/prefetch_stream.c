/*
 * prefetch_stream.c -- stream prefetcher over 4 KiB regions (64 lines).
 *
 * `table` stream entries of 5 words plus one clock word at the end:
 *     [0] region + 1 (0 = empty)  [1] last line  [2] direction (0 none, 1 up,
 *     2 down)  [3] confidence 0..3  [4] LRU stamp
 * Only misses at the level train it:
 *     no entry for the region -> replace the entry with the smallest stamp
 *                                (lowest index on a tie): {region+1, line, 0, 0}
 *     else d = line - last: same direction as stored -> confidence + 1
 *          (max 3), otherwise direction = new one, confidence 0;  last = line
 *     confidence >= 1 -> prefetch line +- 1..degree, stopping at the region edge
 * Every training access stamps its entry with ++clock.
 */
#include "prefetch.h"

#define REGION_SHIFT 6 /* 64 lines of 64 B = 4 KiB */

static size_t stWords(const kvsimPrefetcherConfig *cfg) {
    return 5 * (size_t)cfg->table + 1;
}

static uint32_t stOperate(uint64_t *state, const kvsimPrefetcherConfig *cfg, uint64_t line,
                          int hit, uint32_t key, uint64_t *out) {
    (void)key;
    if (hit) return 0;
    uint64_t *clock = state + 5 * (size_t)cfg->table;
    uint64_t region = line >> REGION_SHIFT;
    uint64_t *e = NULL, *lru = state;
    for (uint32_t i = 0; i < cfg->table; i++) {
        uint64_t *c = state + 5 * (size_t)i;
        if (c[0] == region + 1) {
            e = c;
            break;
        }
        if (c[4] < lru[4]) lru = c;
    }
    if (e == NULL) {
        lru[0] = region + 1;
        lru[1] = line;
        lru[2] = 0;
        lru[3] = 0;
        lru[4] = ++*clock;
        return 0;
    }
    e[4] = ++*clock;
    uint64_t dir = line > e[1] ? 1 : (line < e[1] ? 2 : 0);
    if (dir == 0) return 0;
    if (dir == e[2]) {
        if (e[3] < 3) e[3]++;
    } else {
        e[2] = dir;
        e[3] = 0;
    }
    e[1] = line;
    if (e[3] < 1) return 0;
    uint32_t n = 0;
    for (uint32_t i = 1; i <= cfg->degree; i++) {
        uint64_t c = dir == 1 ? line + i : line - i;
        if ((c >> REGION_SHIFT) != region) break;
        out[n++] = c;
    }
    return n;
}

const kvsimPrefetcherOps kvsimPrefetchStream = {"stream", stWords, stOperate};
