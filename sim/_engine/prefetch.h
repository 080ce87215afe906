/*
 * prefetch.h -- the hardware-prefetcher interface (one prefetch_<name>.c each).
 *
 * The engine calls operate() once for every demand *load* piece that reaches
 * the prefetcher's level (hit or miss there), after that access has updated
 * the caches; a kind that sees fills, also for every software prefetch that
 * missed its level; below L1, with cfg->flags' KVSIM_PF_STORES also for every
 * store piece, and with KVSIM_PF_HITS it passes a hit as a miss (engine.h).  operate() writes up to cfg->degree candidate line numbers to
 * out[] and returns how many.  The engine then issues each candidate as a
 * prefetch that starts at the prefetcher's level: skipped if the line is
 * already there, dropped if a miss buffer is needed and none is free.
 *
 * `key` stands in for the PC: (structure tag << 16) | code site.
 * State: state_words(cfg) uint64_t words, zeroed at creation.
 * sim/reference.py mirrors every prefetcher word for word.
 */
#ifndef KVSIM_PREFETCH_H
#define KVSIM_PREFETCH_H

#include <stddef.h>
#include <stdint.h>

#include "engine.h"

typedef struct kvsimPrefetcherOps {
    const char *name;
    size_t (*state_words)(const kvsimPrefetcherConfig *cfg);
    uint32_t (*operate)(uint64_t *state, const kvsimPrefetcherConfig *cfg, uint64_t line,
                        int hit, uint32_t key, uint64_t *out);
    /* 1: operate() on a hit changes no state and returns 0 (the kind trains on
     * misses only), so the engine need not call it for hits */
    int hits_idle;
    /* 1: operate() ignores `hit`, so its candidates depend on nothing but the
     * lines and keys it is given.  Such a prefetcher at L1, which every demand
     * load reaches, trains on the loads alone, whatever the caches hold: the
     * TLB thread (tlb.c) runs it ahead of the simulation. */
    int blind;
    /* 1: the kind completes every line fetched into its level, a software prefetch's
     * as a demand load's (Intel's L2 spatial prefetcher), so a software prefetch that
     * missed its level trains it even without cfg.swpf_trains (engine.c) */
    int sees_fills;
} kvsimPrefetcherOps;

/* Entry `key % table` of a direct-mapped table, masked where `table` is a
 * power of two (every preset's): a division is some twenty cycles on the path
 * of each load a prefetcher trains on. */
static inline size_t kvsimTableSlot(uint64_t key, uint32_t table) {
    return (table & (table - 1)) == 0 ? (size_t)(key & (table - 1)) : (size_t)(key % table);
}

/* The factory: "next_line", "ip_stride", "stream", "adjacent_line", "up_down",
 * "region", "region_miss", "ascending"; NULL if unknown. */
const kvsimPrefetcherOps *kvsimPrefetcherByName(const char *name);

extern const kvsimPrefetcherOps kvsimPrefetchNextLine;
extern const kvsimPrefetcherOps kvsimPrefetchIpStride;
extern const kvsimPrefetcherOps kvsimPrefetchStream;
extern const kvsimPrefetcherOps kvsimPrefetchAdjacentLine;
extern const kvsimPrefetcherOps kvsimPrefetchUpDown;
extern const kvsimPrefetcherOps kvsimPrefetchRegion;
extern const kvsimPrefetcherOps kvsimPrefetchRegionMiss;
extern const kvsimPrefetcherOps kvsimPrefetchAscending;

#endif /* KVSIM_PREFETCH_H */
