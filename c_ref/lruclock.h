/*
 * lruclock.h -- the LRU clock, once: Valkey's server.h LRU_CLOCK_MAX and
 * LRU_CLOCK_RESOLUTION and evict.c getLRUClock's arithmetic.
 *
 *   unix time (ms) ──/ LRU_CLOCK_RESOLUTION──> ticks ──& LRU_CLOCK_MAX──> 24-bit clock
 *
 * A key's object stores the clock in its 24-bit lru field when lookupKey touches it.
 * The in-memory workloads (db.c ksDbTouch) read it from the workload's clock
 * (ks->now_ms); a server (callpath.c) from the wall clock, as serverCron keeps
 * server.lruclock and LRU_CLOCK() returns it.  Both compute it here.
 */
#ifndef KS_LRUCLOCK_H
#define KS_LRUCLOCK_H

#include <assert.h>
#include <stdint.h>

#define LRU_CLOCK_RESOLUTION 1000     /* server.h: ms per LRU clock tick */
#define LRU_BITS 24                   /* server.h: the object's lru field */
#define LRU_CLOCK_MAX ((1u << LRU_BITS) - 1u) /* server.h: the clock's largest value */

static_assert(LRU_CLOCK_RESOLUTION == 1000, "Valkey's LRU clock ticks once a second");
static_assert(LRU_BITS == 24 && LRU_CLOCK_MAX == 0xffffffu, "the clock fits the robj's 24-bit lru field");

/* evict.c getLRUClock: (mstime() / LRU_CLOCK_RESOLUTION) & LRU_CLOCK_MAX, of a unix time
 * in milliseconds given by the caller. */
static inline unsigned ksGetLRUClock(uint64_t unix_ms) {
    return (unsigned)((unix_ms / LRU_CLOCK_RESOLUTION) & LRU_CLOCK_MAX);
}

#endif
