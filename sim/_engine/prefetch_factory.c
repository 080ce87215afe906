/* prefetch_factory.c -- the one registry of hardware prefetchers: name -> vtable.
 *
 * PREFETCHERS is the only list of prefetcher names in kvsim; the exports below
 * (declared in engine.h) let sim/_binding.py read it. */
#include <string.h>

#include "prefetch.h"

static const kvsimPrefetcherOps *const PREFETCHERS[] = {
    &kvsimPrefetchNextLine, &kvsimPrefetchIpStride, &kvsimPrefetchStream,
    &kvsimPrefetchAdjacentLine, &kvsimPrefetchUpDown, &kvsimPrefetchRegion,
    &kvsimPrefetchRegionMiss, &kvsimPrefetchAscending,
};
#define NPREFETCHERS (sizeof PREFETCHERS / sizeof PREFETCHERS[0])

const kvsimPrefetcherOps *kvsimPrefetcherByName(const char *name) {
    for (size_t i = 0; i < NPREFETCHERS; i++)
        if (strcmp(PREFETCHERS[i]->name, name) == 0) return PREFETCHERS[i];
    return NULL;
}

/* --- Exports (engine.h) ----------------------------------------------------- */

uint32_t kvsimPrefetcherCount(void) { return (uint32_t)NPREFETCHERS; }

const char *kvsimPrefetcherName(uint32_t i) {
    return i < NPREFETCHERS ? PREFETCHERS[i]->name : NULL;
}
