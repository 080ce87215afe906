/* snapcache.h -- the load workload's snapshot kept in a file between runs
 * (KVSIM_CREF_SNAPSHOT_CACHE; snapcache.c says why and how). */
#ifndef KS_SNAPCACHE_H
#define KS_SNAPCACHE_H

#include <stddef.h>
#include <stdint.h>

#include "workload.h"

/* The options the snapshot's bytes depend on, as one line (the file's key). */
void ksSnapCacheKey(const ksWorkloadSpec *s, char *buf, size_t cap);

/* 1: *out (malloc'd, *outlen bytes) holds the cached snapshot; 0: no file at
 * path; -1: the file is not a cache for `key` (err says why). */
int ksSnapCacheRead(const char *path, const char *key, uint8_t **out, size_t *outlen, char *err,
                    size_t errlen);

/* Writes path atomically (temporary file, rename); -1 with err on failure. */
int ksSnapCacheWrite(const char *path, const char *key, const uint8_t *snap, size_t len, char *err,
                     size_t errlen);

#endif
