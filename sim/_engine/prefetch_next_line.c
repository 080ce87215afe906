/*
 * prefetch_next_line.c -- on a miss at its level, prefetch the next `degree`
 * lines (line+1 .. line+degree).  Hits do not trigger.  No state.
 */
#include "prefetch.h"

static size_t nlWords(const kvsimPrefetcherConfig *cfg) {
    (void)cfg;
    return 1;
}

static uint32_t nlOperate(uint64_t *state, const kvsimPrefetcherConfig *cfg, uint64_t line,
                          int hit, uint32_t key, uint64_t *out) {
    (void)state, (void)key;
    if (hit) return 0;
    for (uint32_t i = 0; i < cfg->degree; i++) out[i] = line + 1 + i;
    return cfg->degree;
}

const kvsimPrefetcherOps kvsimPrefetchNextLine = {"next_line", nlWords, nlOperate, 1, 0, 0};
