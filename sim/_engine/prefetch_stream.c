/*
 * prefetch_stream.c -- stream prefetcher over 4 KiB regions (64 lines).
 *
 * `table` stream entries, each: region + 1 (0 = empty), last line, direction
 * (0 none, 1 up, 2 down), confidence 0..3, and its place in the table's LRU
 * order.  Only misses at the level train it:
 *     no entry for the region -> replace the least recently trained entry (of
 *                                the never-trained ones, the lowest index):
 *                                {region+1, line, 0, 0}
 *     else d = line - last: same direction as stored -> confidence + 1
 *          (max 3), otherwise direction = new one, confidence 0;  last = line
 *     confidence >= 1 -> prefetch line +- 1..degree, stopping at the region edge
 * Every training access makes its entry the most recent.  (sim/reference.py
 * keeps the order as stamps of a clock, the smallest stamp being the least
 * recent; here a doubly linked list, so a replacement takes no scan.)
 *
 * State words, for T = table: [0, T) region + 1, [T, 2T) last line, [2T, 3T)
 * direction, [3T, 4T) confidence, [4T, 5T) previous and [5T, 6T) next entry in
 * the LRU order (NIL at the ends), then the least and the most recent entry,
 * a word that says the order was set up (the state starts zeroed), and an 8-bit
 * fingerprint of each entry's region (0 = empty), padded to 16 bytes, so that a
 * lookup compares 16 entries per SSE instruction before reading a region.
 */
#include "fpmatch.h"
#include "prefetch.h"

#define REGION_SHIFT 6 /* 64 lines of 64 B = 4 KiB */
#define NIL UINT64_MAX

static size_t stWords(const kvsimPrefetcherConfig *cfg) {
    return 6 * (size_t)cfg->table + 3 + ((size_t)cfg->table + 15) / 16 * 2;
}

static inline uint8_t regionFp(uint64_t region) {
    uint8_t f = (uint8_t)((region * 0x9E3779B97F4A7C15ULL) >> 56);
    return (uint8_t)(f + (f == 0));
}

/* Make entry i the most recent of the order (prev, next, ends at *lru, *mru). */
static void stTouch(uint64_t *prev, uint64_t *next, uint64_t *lru, uint64_t *mru, uint64_t i) {
    if (*mru == i) return;
    if (prev[i] == NIL)
        *lru = next[i];
    else
        next[prev[i]] = next[i];
    prev[next[i]] = prev[i]; /* i is not the most recent, so it has a next */
    prev[i] = *mru;
    next[i] = NIL;
    next[*mru] = i;
    *mru = i;
}

static uint32_t stOperate(uint64_t *state, const kvsimPrefetcherConfig *cfg, uint64_t line,
                          int hit, uint32_t key, uint64_t *out) {
    (void)key;
    if (hit) return 0;
    const size_t t = cfg->table;
    uint64_t *reg = state, *last = state + t, *dirs = state + 2 * t, *conf = state + 3 * t;
    uint64_t *prev = state + 4 * t, *next = state + 5 * t;
    uint64_t *lru = state + 6 * t, *mru = lru + 1, *ready = lru + 2;
    if (!*ready) { /* never trained: index order, entry 0 the least recent */
        for (size_t i = 0; i < t; i++) {
            prev[i] = i ? i - 1 : NIL;
            next[i] = i + 1 < t ? i + 1 : NIL;
        }
        *lru = 0;
        *mru = t - 1;
        *ready = 1;
    }
    uint8_t *fp = (uint8_t *)(lru + 3);
    const uint64_t region = line >> REGION_SHIFT;
    const uint8_t f = regionFp(region);
    size_t e = t;
    for (size_t g = 0; g < t && e == t; g += 16) { /* regions are distinct: one match */
        uint32_t m = kvsimFpMatch16(fp + g, f);
        for (; m; m &= m - 1) {
            const size_t i = g + (size_t)__builtin_ctz(m);
            if (i < t && reg[i] == region + 1) {
                e = i;
                break;
            }
        }
    }
    if (e == t) {
        const uint64_t v = *lru;
        fp[v] = f;
        reg[v] = region + 1;
        last[v] = line;
        dirs[v] = 0;
        conf[v] = 0;
        stTouch(prev, next, lru, mru, v);
        return 0;
    }
    stTouch(prev, next, lru, mru, e);
    uint64_t dir = line > last[e] ? 1 : (line < last[e] ? 2 : 0);
    if (dir == 0) return 0;
    if (dir == dirs[e]) {
        if (conf[e] < 3) conf[e]++;
    } else {
        dirs[e] = dir;
        conf[e] = 0;
    }
    last[e] = line;
    if (conf[e] < 1) return 0;
    uint32_t n = 0;
    for (uint32_t i = 1; i <= cfg->degree; i++) {
        uint64_t c = dir == 1 ? line + i : line - i;
        if ((c >> REGION_SHIFT) != region) break;
        out[n++] = c;
    }
    return n;
}

const kvsimPrefetcherOps kvsimPrefetchStream = {"stream", stWords, stOperate, 1, 0};
