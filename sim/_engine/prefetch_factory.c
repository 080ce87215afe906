/* prefetch_factory.c -- maps a prefetcher name to its vtable. */
#include <string.h>

#include "prefetch.h"

static const kvsimPrefetcherOps *const PREFETCHERS[] = {
    &kvsimPrefetchNextLine, &kvsimPrefetchIpStride, &kvsimPrefetchStream,
};

const kvsimPrefetcherOps *kvsimPrefetcherByName(const char *name) {
    for (size_t i = 0; i < sizeof PREFETCHERS / sizeof PREFETCHERS[0]; i++)
        if (strcmp(PREFETCHERS[i]->name, name) == 0) return PREFETCHERS[i];
    return NULL;
}
