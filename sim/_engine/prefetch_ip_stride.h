/*
 * prefetch_ip_stride.h -- the IP-stride prefetcher's training (prefetch_ip_stride.c
 * has the design: its table and the rule per load), inline so that the engine's
 * record-by-record path trains the L1 one without an indirect call (engine.c
 * doMemoryT); prefetch_ip_stride.c's operate() is the same code.
 */
#ifndef KVSIM_PREFETCH_IP_STRIDE_H
#define KVSIM_PREFETCH_IP_STRIDE_H

#include "prefetch.h"

static inline uint32_t kvsimIpStrideOperate(uint64_t *state, const kvsimPrefetcherConfig *cfg,
                                            uint64_t line, uint32_t key, uint64_t *out) {
    uint64_t *e = state + 4 * kvsimTableSlot(key, cfg->table);
    if (e[0] != (uint64_t)key + 1) {
        e[0] = (uint64_t)key + 1;
        e[1] = line;
        e[2] = 0;
        e[3] = 0;
        return 0;
    }
    uint64_t d = line - e[1];
    if (d == 0) return 0;
    if (d == e[2]) {
        if (e[3] < 3) e[3]++;
    } else {
        e[2] = d;
        e[3] = 0;
    }
    e[1] = line;
    if (e[3] < 1) return 0;
    for (uint32_t i = 0; i < cfg->degree; i++) out[i] = line + d * (uint64_t)(i + 1);
    return cfg->degree;
}

#endif /* KVSIM_PREFETCH_IP_STRIDE_H */
