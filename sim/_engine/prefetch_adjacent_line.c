/*
 * prefetch_adjacent_line.c -- on a miss at its level, prefetch the other line
 * of the aligned pair of lines the missing line belongs to (line ^ 1: the
 * 128-byte pair with 64-byte lines).  Hits do not trigger; `degree` and
 * `table` are unused.  No state.
 *
 * Models Intel's L2 adjacent cache line prefetcher ("fetches the cache line
 * that comprises a cache line pair (128 bytes)", Intel, "Disclosure of
 * Hardware Prefetcher Control on Some Intel Processors", MSR 0x1A4 bit 1).
 * Unlike next_line it can fetch the line below: a miss on an odd line
 * fetches the even one before it.  It sees fills (sees_fills): Intel's spatial
 * prefetcher "strives to complete every cache line fetched to the L2 cache with
 * the pair line that completes it to a 128-byte aligned chunk" (Intel 64 and
 * IA-32 Architectures Optimization Reference Manual, "Data Prefetch to the L2
 * and Last Level Cache"), a line a software prefetch fetched as well, where the
 * engine lets the other kinds see software prefetches only with swpf_trains.
 */
#include "prefetch.h"

static size_t alWords(const kvsimPrefetcherConfig *cfg) {
    (void)cfg;
    return 1;
}

static uint32_t alOperate(uint64_t *state, const kvsimPrefetcherConfig *cfg, uint64_t line,
                          int hit, uint32_t key, uint64_t *out) {
    (void)state, (void)cfg, (void)key;
    if (hit) return 0;
    out[0] = line ^ 1u;
    return 1;
}

const kvsimPrefetcherOps kvsimPrefetchAdjacentLine = {"adjacent_line", alWords, alOperate, 1, 0, 1};
