/*
 * prefetch_ascending.c -- on a load to a line loaded very recently, or to
 * the line after one, prefetch the next `degree` lines (line+1 .. line+degree).
 *
 * Models Intel's L1 data cache unit (DCU) prefetcher, which the Intel 64 and
 * IA-32 Architectures Optimization Reference Manual describes as "triggered by
 * an ascending access to very recently loaded data" that then "fetches the next
 * line" (its sections on the Intel Core and Sandy Bridge microarchitectures; the
 * same prefetcher on every later Intel core).  The engine's prefetchers see
 * lines, not byte offsets, so "ascending access to very recently loaded data"
 * is read at line granularity: a load to one of the last `table` distinct lines
 * loaded at the level, or to the line after one of them.  A loop streaming
 * through memory triggers it on its second load of each line; a random pointer
 * chase, which loads every line once and never the line after one it just
 * loaded, does so only when a line happens to follow one of the last `table`
 * (next_line, which fires on every miss, gives such a chase hits past the
 * level's capacity that the core does not have: sim/VALIDATION.md, finding 13).
 *
 * State: word 0 the ring's next slot, words 1..table the recent lines + 1 (0 =
 * empty), oldest overwritten first; a line already in the ring is not added
 * again.  Hits and misses train it alike (it ignores `hit`).
 */
#include "prefetch.h"

static size_t ascWords(const kvsimPrefetcherConfig *cfg) {
    return 1 + (size_t)(cfg->table ? cfg->table : 1);
}

static uint32_t ascOperate(uint64_t *state, const kvsimPrefetcherConfig *cfg, uint64_t line,
                           int hit, uint32_t key, uint64_t *out) {
    (void)hit, (void)key;
    const uint32_t n = cfg->table ? cfg->table : 1;
    uint64_t *ring = state + 1;
    int recent = 0, seen = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (ring[i] == line + 1) recent = seen = 1;
        else if (ring[i] && ring[i] == line) recent = 1; /* line - 1 was loaded */
    }
    if (!seen) {
        ring[state[0]] = line + 1;
        state[0] = (state[0] + 1) % n;
    }
    if (!recent) return 0;
    for (uint32_t i = 0; i < cfg->degree; i++) out[i] = line + 1 + i;
    return cfg->degree;
}

const kvsimPrefetcherOps kvsimPrefetchAscending = {"ascending", ascWords, ascOperate, 0, 1, 0};
