/*
 * prefetch_stream.h -- the stream prefetcher's training (prefetch_stream.c
 * has the design: its table, LRU order and state words), inline so that the
 * engine's record-by-record path calls it without an indirect call
 * (engine.c runPrefetchers); prefetch_stream.c's operate() is the same code.
 */
#ifndef KVSIM_PREFETCH_STREAM_H
#define KVSIM_PREFETCH_STREAM_H

#include "fpmatch.h"
#include "prefetch.h"

#define KVSIM_STREAM_REGION_SHIFT 6 /* 64 lines of 64 B = 4 KiB */
#define KVSIM_STREAM_NIL UINT64_MAX

static inline size_t kvsimStreamWords(const kvsimPrefetcherConfig *cfg) {
    return 6 * (size_t)cfg->table + 3 + ((size_t)cfg->table + 15) / 16 * 2;
}

static inline uint8_t kvsimStreamRegionFp(uint64_t region) {
    uint8_t f = (uint8_t)((region * 0x9E3779B97F4A7C15ULL) >> 56);
    return (uint8_t)(f + (f == 0));
}

/* Make entry i the most recent of the order (prev, next, ends at *lru, *mru). */
static inline void kvsimStreamTouch(uint64_t *prev, uint64_t *next, uint64_t *lru, uint64_t *mru,
                                    uint64_t i) {
    if (*mru == i) return;
    if (prev[i] == KVSIM_STREAM_NIL)
        *lru = next[i];
    else
        next[prev[i]] = next[i];
    prev[next[i]] = prev[i]; /* i is not the most recent, so it has a next */
    prev[i] = *mru;
    next[i] = KVSIM_STREAM_NIL;
    next[*mru] = i;
    *mru = i;
}

static inline uint32_t kvsimStreamOperate(uint64_t *state, const kvsimPrefetcherConfig *cfg,
                                          uint64_t line, int hit, uint32_t key, uint64_t *out) {
    (void)key;
    if (hit) return 0;
    const size_t t = cfg->table;
    uint64_t *reg = state, *last = state + t, *dirs = state + 2 * t, *conf = state + 3 * t;
    uint64_t *prev = state + 4 * t, *next = state + 5 * t;
    uint64_t *lru = state + 6 * t, *mru = lru + 1, *ready = lru + 2;
    if (!*ready) { /* never trained: index order, entry 0 the least recent */
        for (size_t i = 0; i < t; i++) {
            prev[i] = i ? i - 1 : KVSIM_STREAM_NIL;
            next[i] = i + 1 < t ? i + 1 : KVSIM_STREAM_NIL;
        }
        *lru = 0;
        *mru = t - 1;
        *ready = 1;
    }
    uint8_t *fp = (uint8_t *)(lru + 3);
    const uint64_t region = line >> KVSIM_STREAM_REGION_SHIFT;
    const uint8_t f = kvsimStreamRegionFp(region);
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
        kvsimStreamTouch(prev, next, lru, mru, v);
        return 0;
    }
    kvsimStreamTouch(prev, next, lru, mru, e);
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
        if ((c >> KVSIM_STREAM_REGION_SHIFT) != region) break;
        out[n++] = c;
    }
    return n;
}

#endif /* KVSIM_PREFETCH_STREAM_H */
