/*
 * prefetch_stream.c -- stream prefetcher over 4 KiB regions (64 lines).
 *
 * `table` stream entries, each: region + 1 (0 = empty), last line, direction
 * (0 none, 1 up, 2 down), confidence 0..3, and its place in the table's LRU
 * order.  Only misses at the level train it:
 *     no entry for the region -> replace the least recently trained entry (of
 *                                the never-trained ones, the lowest index):
 *                                {region+1, line, 0, 0}
 *     else d = line - last: same direction as stored -> confidence + 1
 *          (max 3), otherwise direction = new one, confidence 0;  last = line
 *     confidence >= 1 -> prefetch line +- 1..degree, stopping at the region edge
 * Every training access makes its entry the most recent.  (sim/reference.py
 * keeps the order as stamps of a clock, the smallest stamp being the least
 * recent; here a doubly linked list, so a replacement takes no scan.)
 *
 * State words, for T = table: [0, T) region + 1, [T, 2T) last line, [2T, 3T)
 * direction, [3T, 4T) confidence, [4T, 5T) previous and [5T, 6T) next entry in
 * the LRU order (NIL at the ends), then the least and the most recent entry,
 * a word that says the order was set up (the state starts zeroed), and an 8-bit
 * fingerprint of each entry's region (0 = empty), padded to 16 bytes, so that a
 * lookup compares 16 entries per SSE instruction before reading a region.
 */
#include "prefetch_stream.h"

static size_t stWords(const kvsimPrefetcherConfig *cfg) { return kvsimStreamWords(cfg); }

static uint32_t stOperate(uint64_t *state, const kvsimPrefetcherConfig *cfg, uint64_t line,
                          int hit, uint32_t key, uint64_t *out) {
    return kvsimStreamOperate(state, cfg, line, hit, key, out);
}

const kvsimPrefetcherOps kvsimPrefetchStream = {"stream", stWords, stOperate, 1, 0, 0};
