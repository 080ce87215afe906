/*
 * engine.c -- the kvsim cache-hierarchy engine: functional caches in program
 * order, with an out-of-order timing overlay.
 *
 * Glossary (the one place the engine's terms are defined; the other files
 * point here):
 *
 *   record    one kvtRecord of the trace: a load, store or software prefetch
 *             of `size` bytes, or a marker.
 *   piece     the part of a memory record that falls in one cache line: a
 *             record spanning n lines is n pieces, and the caches see pieces.
 *             pid: a piece's index in its segment.
 *   marker    a record that is not an access: a command, phase or warm-up
 *             boundary (kvtMarker).  Those that switch neither the phase nor
 *             the counting stay inside a segment and are replayed at their
 *             place (SegMarker, markerInSegment).
 *   request   a line request to one level (QEnt): a piece at L1, or a fetch or
 *             a dirty victim that the level above sends down.
 *   queue     a level's requests in order (Part.q[k], at most qcap; a
 *             functional part's L1 queue is its share): a level pass takes its
 *             whole queue and appends its misses and victims to the next
 *             level's.
 *   level pass  one level taking its queue (levels.c, levelPass).
 *   fast      the common configuration (every level LRU with ranks and
 *             non-inclusive, no TLB, no hardware prefetchers; s->fast), which
 *             runs level by level; every other one runs record by record.
 *   segment   a run of records the level-by-level path takes at once: at most
 *             segcap records and segcap pieces, ending before a record it does
 *             not take (segments.c).  The unit of work the threads divide.
 *   part      one thread's portion of the sets, and of the level work on them
 *             (Part): the partition table ptab maps set-index bits to a part,
 *             so no two parts share a set of any level.  Part 0 is the calling
 *             thread's; parts 1.. run on workers.
 *   worker    a thread that runs a part's jobs (workers.c).
 *   job       what a part runs next (engRunPart): a share (functional), or a
 *             range of records it scans for its own pieces (timing).
 *   cut       the calling thread's walk over a functional segment that writes
 *             each piece, as an L1 request, into the share of its set's part
 *             (cutSegment).
 *   share     the pieces of one functional segment that fall to one part, cut
 *             by the calling thread (Part.sh).  Each part has two, so that the
 *             caller cuts one while the part runs the other.  (SHARE_CALLER and
 *             SHARE_WORKER weigh the parts' portions of the sets.)
 *   rebalance dividing the sets between the parts again, by the pieces per set
 *             seen, after each functional segment is cut (for the next one).
 *   notes     per-piece bytes a level pass leaves for later, by pid: the
 *             serving level and a first hit on a prefetched line (timing), or
 *             an L1 miss (functional, for the markers' replay).
 *   carry     a timing call's last segment, its levels run and its timing not:
 *             its records are copied to s->carry and timed at the start of the
 *             next kvsimRun call, overlapping that call's first levels.
 *   settle    finishing what a kvsimRun call left in flight (the workers'
 *             shares, the carry) and merging the workers' counters, before
 *             anything reads the statistics (engSettle).
 *   collect   adding a part's access, miss and DRAM totals to the levels'
 *             (segments.c); merge: the workers' per-tag counters to the
 *             statistics (engMergeParts).
 *   batch     the counters a record loop adds up locally (Batch), flushed into
 *             the statistics at a marker and at the end of a call.
 *   serving level  the level that held a piece's line (s->n: DRAM); it sets
 *             the piece's latency (levelLatency).
 *   miss buffer  an MSHR: a level's line fetch in flight, with its fill-ready
 *             tick (Level.mline, mready); a miss waits for a free one.
 *   tick      the timing unit: one cycle is `width` ticks, one instruction one
 *             tick of dispatch or retirement.
 *   fingerprint  an 8-bit hash of a line kept per way, so that a lookup
 *             compares 16 ways per SSE instruction (fingerprint()).
 *   memo      the last line a level found or installed, so that repeated
 *             accesses to one line skip the set scan.
 *   shape     what the record-by-record path's level access is compiled for
 *             (Level.shape): LRU with recency ranks in the fixed RK_* layout
 *             (<= 16 ways) or after the tags (17 to 32 ways, "wide"), and
 *             one inclusion mode, or any level; cacheAccess
 *             calls its copy (Level.access).  The L2 of three levels of the
 *             presets' shapes has a copy with the last level's access compiled
 *             in (ACCESS_PAIR).
 *
 * Design (the full model, with every ordering rule, is in sim/MODEL.md):
 *
 *   record --> split into line pieces --> TLB --> L1 --> L2 --> ... --> DRAM
 *                                                  |      |
 *                                     hardware prefetchers (per level)
 *
 *   Functional state is updated in trace order, one piece at a time, exactly
 *   as DineroIV does for the non-inclusive write-back/write-allocate case:
 *   on a miss the victim is chosen and removed, the new line is installed,
 *   the fetch goes below, then the dirty victim is written below.  A store
 *   piece covering a whole line allocates without a fetch.
 *
 *   Timing overlays it, in integer ticks (1 cycle = width ticks; an
 *   instruction takes cfg.instr_ticks ticks, 1 unless the core sustains fewer
 *   instructions per cycle than its width, see sim/MODEL.md):
 *     dispatch D_i = max(D_{i-1} + instructions_i, ROB limit)
 *     issue    X_i = max(D_i, completion of the dep producer) + TLB cost
 *     a walk waits for a free page walker (cfg.walkers > 0) and holds it
 *     a miss takes a free miss buffer (MSHR) at every level it misses,
 *     waiting for the earliest one; a DRAM fill also waits for the channel;
 *     a hit on a line still in flight waits for its fill (a late prefetch
 *     or an MSHR merge)
 *     a hardware prefetch issues at X_i of the piece that trained it, or, for
 *     a prefetcher below L1 with KVSIM_PF_ARRIVAL, at the piece's miss start
 *     (when the request left L1), and is dropped if it finds no miss buffer
 *     retire   R_i = max(R_{i-1} + instructions_i, completion_i)
 *   Stores and prefetches complete one cycle after dispatch.  With a store
 *   buffer of N entries (cfg.store_buffer; timing.h storeAdmit, storeCommit), a
 *   store also takes an entry at dispatch, waiting for the commit of the store
 *   N before it; its address waits for its producer as a load's does, and its
 *   pieces are timed as a load's from there (the read-for-ownership, at
 *   execute: miss buffers, the DRAM channel, its translation); it commits at
 *   max(its retirement, the previous store's commit, its lines' arrival), in
 *   program order, and frees its entry then.  Nothing else waits for a commit:
 *   a full buffer stalls dispatch, and an RFO in flight holds its miss
 *   buffers and delays a load of its line like any fill.  Without one, a
 *   store's pieces take no time and no miss buffer.  The gap's own stores
 *   (cfg.kind_store_q16, a trace header's "work_stores"; timing.h
 *   recordTicks, workCommit) take entries too, before the record's store:
 *   they retire with the gap and commit in order behind the traced stores.
 *
 * Per-level layout: one block per set (see SET_BASE below) holding 8-bit way
 * fingerprints, meta bytes (bit 0 dirty, bits 1-2 the prefetch kind of an
 * unused prefetched line), structure tags, the tags (line number + 1; 0 =
 * invalid) and the policy's per-line words (LRU with <= 16 ways: 16 rank bytes
 * instead, so a 16-way set is three host lines); plus per-set policy words and
 * the miss buffers.  All sized at creation; nothing grows with the trace.
 *
 * Files: this one holds the API, the record-by-record path (any configuration)
 * and the markers; levels.c the level passes of the common configuration;
 * segments.c its record loops (segments, threads, the timing pass); workers.c
 * the worker threads; lower.c the last level's thread of counting-only runs
 * on the record-by-record path; tlb.c the TLBs and the TLB thread that translates a block
 * of records ahead of the record-by-record path (cfg.threads > 1), and trains
 * the L1 prefetcher whose training ignores the caches; timing.h the
 * timing model's inline pieces; access_body.h the body of one level's access
 * on the record-by-record path (included twice: a last level's copy and any
 * level's); engine_impl.h the types and the set-block layout they share;
 * fpmatch.h the 16-way fingerprint compare of the TLB's sets and the stream
 * prefetcher's table; prefetch_stream.h that prefetcher's training, inline.
 * Beside the engine, in the same library: decode.c (the
 * trace intake: CRC32, decompression and record checks off the GIL) and
 * reuse.c (reuse distances for the traces package).
 *
 * Speed.  The common configuration (every level LRU with ranks and
 * non-inclusive, no TLB, no hardware prefetchers: s->fast) runs level by level
 * (levels.c): the records become a queue of line requests to L1, each level
 * takes its whole queue and feeds the next, so a level's parameters stay in
 * registers, and each level prefetches into the host caches the set blocks of
 * the requests a few entries ahead in its queue: look-ahead software
 * prefetching, the technique the simulator itself studies, with exact
 * addresses.  With timing, a second pass runs the same records through the
 * out-of-order model.  With cfg.threads > 1 the level work of each segment of
 * records is shared out by set between threads, and with timing the levels of
 * one segment overlap the timing of the one before (segments.c); the results
 * do not depend on the thread count.  Other configurations take the record-by-record path
 * (runLoop), which prefetches the lower levels' set blocks of the record
 * PREFETCH_DISTANCE ahead, with a next-line or adjacent-line prefetcher
 * those of the neighbour line it will fetch (lookNeighbours), and above an
 * exclusive wide level those its victims will go to (lookVictims); counting
 * only, with cfg.threads > 1, its last level runs on a worker fed by the L2's
 * requests (lower.c).  Lookups compare
 * 16 fingerprints per SSE instruction; hits are not counted (hit = access - miss) and the phases'
 * access and miss counts come from per-level totals (phaseSync).  Miss buffers
 * are kept sorted by ready tick, so the earliest free one is at hand.
 *
 * Conventions: see engine.h.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "engine_impl.h"
#include "fpmatch.h"
#include "prefetch_ip_stride.h"
#include "prefetch_stream.h"
#include "timing.h"

#ifndef PREFETCH_DISTANCE
#define PREFETCH_DISTANCE 8
#endif
#ifndef VICTIM_DISTANCE
#define VICTIM_DISTANCE 4
#endif
#ifndef PF_FIRST_LEVEL
#define PF_FIRST_LEVEL 1
#endif

/* --- Helpers ---------------------------------------------------------------- */

static int isPow2(uint64_t x) { return x != 0 && (x & (x - 1)) == 0; }

static void *xcalloc(size_t n, size_t sz) { return calloc(n ? n : 1, sz ? sz : 1); }

/* Zeroed memory for the set blocks.  Arrays of 1 MiB or more are mapped from the
 * system (bigFree unmaps them), 2 MiB aligned and advised as transparent huge
 * pages: a simulated L3 spread over 4 KiB host pages costs a host TLB miss (a
 * nested walk in a VM) on nearly every access.  The mapping's pages are zero
 * until written, and a set's zero bytes are its start state (policy_lru.h), so
 * nothing is written here: a page costs its fault only when the run first
 * reaches one of its sets, and a short trace on a large last level creates
 * the engine in a fraction of a millisecond instead of populating every page. */
#define HUGE_THRESHOLD (1u << 20)
#define HUGE_ALIGN ((size_t)2 << 20)
static size_t bigBytes(size_t n, size_t sz) {
    const size_t bytes = (n ? n : 1) * (sz ? sz : 1);
    return bytes < HUGE_THRESHOLD ? bytes : (bytes + HUGE_ALIGN - 1) & ~(HUGE_ALIGN - 1);
}

static void *bigAlloc(size_t n, size_t sz) {
    const size_t bytes = bigBytes(n, sz);
    if (bytes < HUGE_THRESHOLD) return calloc(1, bytes);
    uint8_t *m = mmap(NULL, bytes + HUGE_ALIGN, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return NULL;
    const size_t head = (HUGE_ALIGN - ((uintptr_t)m & (HUGE_ALIGN - 1))) & (HUGE_ALIGN - 1);
    if (head) munmap(m, head); /* keep the aligned `bytes` */
    if (HUGE_ALIGN - head) munmap(m + head + bytes, HUGE_ALIGN - head);
#ifdef MADV_HUGEPAGE
    madvise(m + head, bytes, MADV_HUGEPAGE);
#endif
    return m + head;
}

static void bigFree(void *p, size_t n, size_t sz) {
    if (p == NULL) return;
    const size_t bytes = bigBytes(n, sz);
    if (bytes < HUGE_THRESHOLD)
        free(p);
    else
        munmap(p, bytes);
}

/* --- TLB ------------------------------------------------------------------- */

static uint32_t cacheAccess(kvsimSim *s, uint32_t k, uint64_t line, int op, uint8_t stag,
                            int kind, uint32_t pfk, int *dirty_up);

/* A page walk: its fixed part plus, for each of the cfg.walk_reads page-table
 * lines (KVSIM_WALK_BASE), one load of tag 0 through the caches from L1, in
 * turn (the line of the leaf entry of addr's page; under nested paging with a
 * smaller host page, cfg.guest_page_bits, read 0 takes the guest's page), each
 * costing the load-to-use latency of the level that served it (the fixed part
 * is walk_latency, plus walk_extra_4k when the guest's page is 4 KiB); a read from
 * memory costs the DRAM latency, the host's (reads 1..) cfg.host_read_latency
 * when set.  With cfg.walk_retention (timing) the line's age decides instead
 * (sim/MODEL.md §3): read by a walk at most that many cycles before the
 * translation is wanted (s->walk_now), it costs the level that holds it or the
 * last level's latency if none does; longer ago, a read from memory.  The last
 * reads are kept per slot (KVSIM_WALK_SLOT_BITS, a multiplicative hash of the
 * line): a line whose slot holds another, or that no walk has read, costs the
 * level that served it.  With cfg.walk_last_level_lost a read timed at the last
 * level is timed as a read from memory (KVSIM_WALK_LL_GUEST: only the host's
 * reads 1..; the guest's read 0 is timed as the caches serve it); with a
 * retention too, the private levels
 * serve the lines they hold whatever their age, and a line none of them holds costs
 * the last level if a walk read it at most the retention before, else memory (the
 * last level keeps page-table lines in time, not by its capacity).  The reads change the caches (and are counted) like
 * loads; they hold no miss buffer and use no DRAM bandwidth.  They run on the
 * simulating thread, in program order, also when the TLB thread found the walk
 * (tlb.c). */
static int64_t walkCost(kvsimSim *s, uint64_t addr) {
    /* a 4 KiB (guest) page's walk has one level more than a 2 MiB page's */
    const uint32_t gb = s->cfg.guest_page_bits ? s->cfg.guest_page_bits : s->cfg.page_bits;
    int64_t cost = (int64_t)s->cfg.walk_latency + (gb == 12 ? s->cfg.walk_extra_4k : 0);
    const uint32_t n = s->n;
    const uint64_t keep = s->walk_slot_line ? s->cfg.walk_retention * s->W : 0;
    for (uint32_t j = 0; j < s->cfg.walk_reads; j++) {
        /* nested paging (cfg.guest_page_bits): read 0 is the guest's leaf entry */
        const uint32_t pb = j == 0 && s->cfg.guest_page_bits ? s->cfg.guest_page_bits
                                                              : s->cfg.page_bits;
        const uint64_t a = KVSIM_WALK_BASE + j * KVSIM_WALK_STRIDE + (addr >> pb) * 8;
        const uint64_t line = engPhys(s, a >> s->cfg.line_bits); /* placement.h */
        const uint32_t sv = cacheAccess(s, 0, line, OP_READ, 0, KVSIM_K_LOAD, 0, NULL);
        /* the latency class it is timed at: a level, n = DRAM, n + 1 = the host's read */
        const uint32_t mem = j > 0 && s->cfg.host_read_latency ? n + 1 : n;
        uint32_t at = sv < n ? sv : mem;
        /* with walk_last_level_lost the private levels keep the line by their capacity
         * and a retention is the last level's alone: in time, not by its capacity */
        const int lost = n > 1 && (s->cfg.walk_last_level_lost == KVSIM_WALK_LL_NONE
                                   || (s->cfg.walk_last_level_lost == KVSIM_WALK_LL_GUEST
                                       && j > 0));
        int timed_kept = 0;
        if (keep) {
            const uint64_t h = (line * 0x9E3779B97F4A7C15ULL) >> (64 - KVSIM_WALK_SLOT_BITS);
            const uint64_t now = s->walk_now, then = s->walk_slot_tick[h];
            if (s->walk_slot_line[h] == line + 1) {
                const int old = now > then && now - then > keep;
                if (lost && sv < n - 1) {
                    /* a private level holds it */
                } else if (old) {
                    at = mem; /* lost meanwhile */
                } else if (sv >= n - 1) {
                    at = n - 1; /* kept by the last level */
                    timed_kept = 1;
                }
                if (now > then) s->walk_slot_tick[h] = now;
            } else {
                s->walk_slot_line[h] = line + 1;
                s->walk_slot_tick[h] = now;
            }
        }
        if (lost && at == n - 1 && !timed_kept) at = mem; /* not kept */
        if (s->cfg.timing) { /* (a functional run's last level may be on its own thread,
                              * lower.c: the level above does not learn which served) */
            s->st->walk_served[sv]++;
            s->st->walk_timed[at]++;
        }
        cost += at < n ? (int64_t)s->lv[at].latency
                       : (int64_t)(at == n ? s->cfg.dram_latency : s->cfg.host_read_latency);
    }
    return cost;
}

/* Count a translation of `addr` by its outcome (engTlbCode; tlb.c) and return
 * the added cycles, or -1 for a software prefetch dropped on a DTLB miss;
 * *walk is set when the translation walks (timing.h walkTime times it). */
static inline int64_t tlbApply(kvsimSim *s, uint32_t code, uint64_t addr, int *walk) {
    kvsimStats *st = s->st;
    st->dtlb_access++;
    if (code == TLB_HIT) return 0;
    st->dtlb_miss++;
    if (code == TLB_DROP) return -1;
    if (s->cfg.stlb_sets) {
        st->stlb_access++;
        if (code == TLB_STLB_HIT) return s->cfg.stlb_latency;
        st->stlb_miss++;
    }
    *walk = 1;
    return walkCost(s, addr);
}

/* Translate the page of `addr` (a piece's first byte, or a software prefetch's
 * address).  Returns the added cycles, or -1 if the access is a software
 * prefetch that the configuration drops on a DTLB miss; *walk (cleared here)
 * is set when it walks.  With the TLB thread (tlb.c) the outcome is the next
 * of the codes it left; else the DTLB's memo (the page touched last, where
 * most pieces are) is checked inline. */
static inline __attribute__((always_inline)) int64_t translate(kvsimSim *s, uint64_t addr,
                                                               int is_swpf, int *walk) {
    *walk = 0;
    if (s->tcode) return tlbApply(s, *s->tcode++, addr, walk);
    if ((addr >> s->cfg.page_bits) + 1 == s->dtlb.memo_key) {
        s->st->dtlb_access++;
        return 0;
    }
    return tlbApply(s, engTlbCode(s, addr, is_swpf), addr, walk);
}

/* --- Caches ----------------------------------------------------------------- */

/* A level's set layout, as the access copies see it (Level.shape, below) */
enum { LAY_ANY, LAY_RANK, LAY_WIDE };

/* The first candidate way (a fingerprint match, bit c of `cand`) whose full tag
 * is `key`, or -1. */
static inline __attribute__((always_inline)) int64_t matchWay(uint32_t cand,
                                                              const uint64_t *tg,
                                                              uint64_t key) {
    for (; cand; cand &= cand - 1) {
        const uint32_t c = (uint32_t)__builtin_ctz(cand);
        if (tg[c] == key) return c;
    }
    return -1;
}

/* Scan a set: the way holding `line` (-1 if none) and the lowest invalid way (-1
 * if the set is full), from the fingerprints (16 ways per SSE compare; scalar
 * fallback), checking full tags only where a fingerprint matches. */
static inline __attribute__((always_inline)) void scanSet(const Level *L, uint64_t set,
                                                          uint64_t line, int64_t *hit,
                                                          int64_t *inv, const int lay) {
    const uint8_t *fp = SET_FP(L, set);
    const uint64_t *tg = SET_TAGS(L, set);
    const uint64_t key = line + 1;
    const uint8_t f = fingerprint(line);
    const uint32_t ways = L->ways;
    int64_t h = -1, v = -1;
#if defined(__SSE4_2__)
    if (lay == LAY_RANK || (lay == LAY_ANY && L->fpw == 16)) {
        /* <= 16 ways (most levels of the presets): one compare */
        const __m128i x = _mm_loadu_si128((const __m128i *)fp);
        /* padding fingerprints are 0 and f never is: no mask for the candidates */
        uint32_t cand = (uint32_t)_mm_movemask_epi8(_mm_cmpeq_epi8(x, kvsimSplat8(f)));
        const uint32_t empty =
            (uint32_t)_mm_movemask_epi8(_mm_cmpeq_epi8(x, _mm_setzero_si128())) & L->wmask;
        *hit = matchWay(cand, tg, key);
        *inv = empty ? (int64_t)__builtin_ctz(empty) : -1;
        return;
    }
    if (lay == LAY_WIDE || L->fpw == 32) {
        /* 17..32 ways (the 18- and 26-way last levels): two compares */
        const __m128i fv = kvsimSplat8(f), z = _mm_setzero_si128();
        const __m128i x0 = _mm_loadu_si128((const __m128i *)fp);
        const __m128i x1 = _mm_loadu_si128((const __m128i *)(fp + 16));
        uint32_t cand = (uint32_t)_mm_movemask_epi8(_mm_cmpeq_epi8(x0, fv)) |
                        (uint32_t)_mm_movemask_epi8(_mm_cmpeq_epi8(x1, fv)) << 16;
        const uint32_t empty = ((uint32_t)_mm_movemask_epi8(_mm_cmpeq_epi8(x0, z)) |
                                (uint32_t)_mm_movemask_epi8(_mm_cmpeq_epi8(x1, z)) << 16) &
                               L->wmask;
        *hit = matchWay(cand, tg, key);
        *inv = empty ? (int64_t)__builtin_ctz(empty) : -1;
        return;
    }
#endif
    for (uint32_t base = 0; base < ways; base += 64) {
        uint64_t cand = 0, empty = 0;
        uint32_t n = ways - base < 64 ? ways - base : 64;
        uint32_t w = 0;
#if defined(__SSE4_2__)
        const __m128i fv = kvsimSplat8(f), z = _mm_setzero_si128();
        for (; w + 16 <= ((n + 15) & ~15u); w += 16) { /* fp is padded to 16 */
            __m128i x = _mm_loadu_si128((const __m128i *)(fp + base + w));
            cand |= (uint64_t)(uint32_t)_mm_movemask_epi8(_mm_cmpeq_epi8(x, fv)) << w;
            empty |= (uint64_t)(uint32_t)_mm_movemask_epi8(_mm_cmpeq_epi8(x, z)) << w;
        }
        if (n < 64) {
            cand &= (1ULL << n) - 1;
            empty &= (1ULL << n) - 1;
        }
#else
        for (; w < n; w++) {
            cand |= (uint64_t)(fp[base + w] == f) << w;
            empty |= (uint64_t)(fp[base + w] == 0) << w;
        }
#endif
        while (h < 0 && cand) {
            uint32_t c = (uint32_t)__builtin_ctzll(cand);
            if (tg[base + c] == key) h = base + c;
            cand &= cand - 1;
        }
        if (v < 0 && empty) v = base + __builtin_ctzll(empty);
    }
    *hit = h;
    *inv = v;
}

static inline int64_t findWay(const Level *L, uint64_t set, uint64_t line) {
    int64_t h, v;
    scanSet(L, set, line, &h, &v, 0);
    return h;
}

/* 1 if some level of [from, to] holds `line`.  No side effects. */
static inline int heldIn(const kvsimSim *s, uint32_t from, uint32_t to, uint64_t line) {
    for (uint32_t k = from; k <= to; k++)
        if (findWay(&s->lv[k], line & s->lv[k].set_mask, line) >= 0) return 1;
    return 0;
}

/* 1 if level k holds `line`.  Out of line: the prefetchers' loop
 * (runPrefetchers, where issueHwPrefetch is inlined) keeps its registers. */
static __attribute__((noinline)) int heldAt(const kvsimSim *s, uint32_t k, uint64_t line) {
    return findWay(&s->lv[k], line & s->lv[k].set_mask, line) >= 0;
}

/*
 * Whether a prefetch of `line` into level f at tick x is dropped: some level
 * between f and the one that serves it (exclusive) has no free miss buffer
 * at x (timing only; sim/MODEL.md).  With b the first level at or below f
 * whose buffers are all busy (timing.h firstBusy), that is: b exists and no
 * level of [f, b] holds the line (the serving level is below b).  So the
 * levels are searched only when a busy one is found, and only down to it;
 * `f_missed`: the caller knows f does not hold the line.  Out of line: the
 * record loop keeps its registers.
 */
static __attribute__((noinline)) int prefetchDropped(const kvsimSim *s, uint32_t f,
                                                     uint64_t line, uint64_t x, int f_missed) {
    const uint32_t b = firstBusy(s, f, x);
    if (b == s->n) return 0;
    return !heldIn(s, f + (uint32_t)f_missed, b, line);
}

static void invalidateWay(Level *L, uint64_t set, uint32_t way) {
    if (L->memo_key && L->memo_set == set && L->memo_way == way) L->memo_key = 0;
    SET_TAGS(L, set)[way] = 0;
    SET_FP(L, set)[way] = 0;
    SET_META(L, set)[way] = 0;
    L->pol->on_invalidate(&L->pc, (uint32_t)set, way);
}

typedef struct Victim {
    int valid;
    uint64_t line;
    int dirty;
    uint8_t stag;
    uint8_t pending; /* META_PENDING: its dirty bit from below is lower.c's */
} Victim;

/*
 * The access path is compiled once per level shape (Level.shape): `lay` says
 * the level is LRU with recency ranks (LAY_RANK: at most 16 ways, the fixed
 * RK_* block layout) or wide LRU (LAY_WIDE: 17 to 32 ways, two rows of 16
 * fingerprints, 32 ranks after the tags), `incl` its inclusion mode; both
 * are constants in each copy, so a copy carries neither the layout's offsets it
 * can compute nor the policy and inclusion branches it does not need.
 * SHAPE_ANY (LAY_ANY, incl -1) reads them all from the level, for any
 * configuration.
 */
#define INCL(L, incl) ((incl) >= 0 ? (uint32_t)(incl) : (L)->inclusion)
#define B_META(L, b, lay) \
    ((b) + ((lay) == LAY_RANK ? RK_META : (lay) == LAY_WIDE ? 32 : (L)->fpw))
#define B_STAG(L, b, lay) ((b) + ((lay) == LAY_RANK ? RK_STAG : (L)->soff))
#define B_TAGS(L, b, lay) ((uint64_t *)((b) + ((lay) == LAY_RANK ? RK_TAGS : (L)->hdr)))
/* LAY_WIDE: the 32 LRU ranks follow the tags (Level.roff) */
#define B_RANKS32(L, b) ((uint8_t *)(B_TAGS(L, b, LAY_WIDE) + (L)->ways))

/* Make way w of (L, set), block b, the most recent (a hit or a fill). */
static inline __attribute__((always_inline)) void touchWay(Level *L, uint8_t *b, uint64_t set,
                                                           uint32_t w, int fill, const int lay) {
    if (lay == LAY_RANK)
        kvsimLruRankTouch(b + RK_RANK, L->ways, w);
    else if (lay == LAY_WIDE)
        kvsimLruRank32Touch(B_RANKS32(L, b), L->ways, w);
    else if (L->is_lru)
        kvsimLruTouch(&L->pc, (uint32_t)set, w);
    else if (fill)
        L->pol->on_fill(&L->pc, (uint32_t)set, w);
    else
        L->pol->on_hit(&L->pc, (uint32_t)set, w);
}

/* invalidateWay in the level's own copy (block b): the policy's on_invalidate
 * inline for LRU (ranks: nothing, policy_lru.c). */
static inline __attribute__((always_inline)) void invalidateWayT(Level *L, uint8_t *b,
                                                                 uint64_t set, uint32_t way,
                                                                 const int lay) {
    if (L->memo_key && L->memo_set == set && L->memo_way == way) L->memo_key = 0;
    B_TAGS(L, b, lay)[way] = 0;
    b[way] = 0; /* SET_FP */
    B_META(L, b, lay)[way] = 0;
    if (lay == LAY_ANY)
        L->pol->on_invalidate(&L->pc, (uint32_t)set, way);
}

/* Remove the line in (k, set, way), block b, by replacement; apply inclusion. */
static inline __attribute__((always_inline)) Victim evictT(kvsimSim *s, uint32_t k, uint64_t set,
                                                           uint8_t *b, uint32_t way, const int lay,
                                                           const int incl, kvsimLevelStats *ls) {
    Level *L = &s->lv[k];
    uint8_t vm = B_META(L, b, lay)[way];
    Victim v = {1, B_TAGS(L, b, lay)[way] - 1, (vm & META_DIRTY) != 0, B_STAG(L, b, lay)[way],
                (uint8_t)(vm & META_PENDING)};
    uint32_t pfk = (vm & META_PF_MASK) >> META_PF_SHIFT;
    ls->evictions++;
    if (pfk) ls->pf_useless[pfk - 1]++;
    if (INCL(L, incl) == KVSIM_INCLUSIVE) {
        for (uint32_t j = 0; j < k; j++) {
            Level *U = &s->lv[j];
            uint64_t us = v.line & U->set_mask;
            int64_t uw = findWay(U, us, v.line);
            if (uw < 0) continue;
            uint8_t um = SET_META(U, us)[uw];
            if (um & META_DIRTY) v.dirty = 1;
            uint32_t upk = (um & META_PF_MASK) >> META_PF_SHIFT;
            if (upk) s->st->level[j].pf_useless[upk - 1]++;
            invalidateWay(U, us, (uint32_t)uw);
            ls->back_invalidations++;
        }
    }
    /* no invalidation: the caller installs the new line in this way at once (the
     * policy sees on_fill, not on_invalidate: the line was replaced) */
    if (L->memo_key && L->memo_set == set && L->memo_way == way) L->memo_key = 0;
    return v;
}

static uint32_t cacheAccess(kvsimSim *s, uint32_t k, uint64_t line, int op, uint8_t stag,
                            int kind, uint32_t pfk, int *dirty_up);

/*
 * What lies below a copy's level (`nx`, a constant in each copy): NX_ANY, the
 * level below is reached through its own copy (cacheAccess: one indirect
 * call), or memory if the level is the last; NX_DRAM, the level is the last;
 * or a shape (SHAPE_*): the level below is the last and of that shape, and
 * its access is compiled into this copy (no call).  The pairs of shapes so
 * compiled are those of the presets (ACCESS_PAIR, below).
 */
#define NX_ANY (-1)
#define NX_DRAM (-2)
#define NX_QUEUE (-3) /* the last level runs on its own thread: a buffer (lower.c) */
#define NX_OWN (-4)   /* the last level, on its own thread: memory below, counts in L->wst */
/* a shape's layout and inclusion (the constants of its copy) */
#define LAY_OF(sh) \
    ((sh) >= SHAPE_WIDE_NONINCL ? LAY_WIDE : (sh) >= SHAPE_RANK_NONINCL ? LAY_RANK : LAY_ANY)
#define INCL_OF(sh)                                                                       \
    ((sh) == SHAPE_RANK_INCL || (sh) == SHAPE_WIDE_INCL   ? KVSIM_INCLUSIVE               \
     : (sh) == SHAPE_RANK_EXCL || (sh) == SHAPE_WIDE_EXCL ? KVSIM_EXCLUSIVE               \
     : (sh) == SHAPE_ANY                                  ? -1                            \
                                                          : KVSIM_NON_INCLUSIVE)

#define ACC_LAST 1
#include "access_body.h" /* lastAccessBody: the copy of a last level */
#undef ACC_LAST
#define ACC_LAST 0
#include "access_body.h" /* cacheAccessBody: any level */
#undef ACC_LAST

/* One out-of-line copy of an access body (cacheAccessBody or lastAccessBody)
 * with the constants of its shape (lay, incl), level (kc, -1: any) and what
 * lies below (nx); every copy below is one of these. */
#define ACCESS_FN(name, body, lay, incl, kc, nx)                                            \
    static __attribute__((noinline)) uint32_t name(kvsimSim *s, uint32_t k, uint64_t line,  \
                                                   int op, uint8_t stag, int kind,           \
                                                   uint32_t pfk, int *dirty_up) {            \
        return body(s, k, line, op, stag, kind, pfk, dirty_up, lay, incl, kc, nx);           \
    }

/* The copies by shape (Level.shape), out of line: the levels below L1 and the
 * prefetches; doMemory inlines the body for the L1 access of every piece. */
#define ACCESS_COPY(name, lay, incl) ACCESS_FN(name, cacheAccessBody, lay, incl, -1, NX_ANY)
ACCESS_COPY(accessAny, LAY_ANY, -1)
ACCESS_COPY(accessRankNonIncl, LAY_RANK, KVSIM_NON_INCLUSIVE)
ACCESS_COPY(accessRankIncl, LAY_RANK, KVSIM_INCLUSIVE)
ACCESS_COPY(accessRankExcl, LAY_RANK, KVSIM_EXCLUSIVE)
ACCESS_COPY(accessWideNonIncl, LAY_WIDE, KVSIM_NON_INCLUSIVE)
ACCESS_COPY(accessWideIncl, LAY_WIDE, KVSIM_INCLUSIVE)
ACCESS_COPY(accessWideExcl, LAY_WIDE, KVSIM_EXCLUSIVE)

/* The L2 of a three-level hierarchy, with its last level compiled in (nx):
 * the pairs of shapes of the presets (an inclusive L2 above an exclusive last
 * level of either layout or a non-inclusive one of 17 to 32 ways, a
 * non-inclusive L2 above the latter), and of the common configuration.  The
 * level indices are constants too.  kvsimCreate picks one when the shapes
 * match (accessPair), else the levels keep their own copies. */
#define ACCESS_PAIR(name, sh2, sh3) \
    ACCESS_FN(name, cacheAccessBody, LAY_OF(sh2), INCL_OF(sh2), 1, sh3)
ACCESS_PAIR(accessRankInclRankExcl, SHAPE_RANK_INCL, SHAPE_RANK_EXCL)
ACCESS_PAIR(accessRankInclWideNonIncl, SHAPE_RANK_INCL, SHAPE_WIDE_NONINCL)
ACCESS_PAIR(accessRankInclWideExcl, SHAPE_RANK_INCL, SHAPE_WIDE_EXCL)
ACCESS_PAIR(accessRankNonInclWideNonIncl, SHAPE_RANK_NONINCL, SHAPE_WIDE_NONINCL)
ACCESS_PAIR(accessRankNonInclRankNonIncl, SHAPE_RANK_NONINCL, SHAPE_RANK_NONINCL)

/* The L2 of three levels whose last level runs on its own thread (lower.c):
 * its requests below go into a buffer. */
#define ACCESS_QUEUE(name, sh2) \
    ACCESS_FN(name, cacheAccessBody, LAY_OF(sh2), INCL_OF(sh2), 1, NX_QUEUE)
ACCESS_QUEUE(accessRankNonInclQueue, SHAPE_RANK_NONINCL)
ACCESS_QUEUE(accessRankInclQueue, SHAPE_RANK_INCL)

/* The last level's copies for its own thread (lower.c), by shape: the
 * counts go to the level's wst, not to s->st, whose neighbours the calling
 * thread writes. */
#define ACCESS_OWN(name, sh3) ACCESS_FN(name, lastAccessBody, LAY_OF(sh3), INCL_OF(sh3), 2, NX_OWN)
ACCESS_OWN(accessOwnAny, SHAPE_ANY)
ACCESS_OWN(accessOwnRankNonIncl, SHAPE_RANK_NONINCL)
ACCESS_OWN(accessOwnRankExcl, SHAPE_RANK_EXCL)
ACCESS_OWN(accessOwnWideNonIncl, SHAPE_WIDE_NONINCL)
ACCESS_OWN(accessOwnWideExcl, SHAPE_WIDE_EXCL)

static AccessFn accessOwn(int sh3) {
    switch (sh3) {
    case SHAPE_RANK_NONINCL: return accessOwnRankNonIncl;
    case SHAPE_RANK_EXCL: return accessOwnRankExcl;
    case SHAPE_WIDE_NONINCL: return accessOwnWideNonIncl;
    case SHAPE_WIDE_EXCL: return accessOwnWideExcl;
    default: return accessOwnAny;
    }
}

/* Whether the last level can run on its own thread (lower.c): counting only,
 * off the fast path, three levels, an L2 of LRU ranks that is not exclusive
 * (its copy ACCESS_QUEUE), a last level that is not inclusive (it never
 * removes lines from above), and nothing that reaches the last level but the
 * L2's requests (no prefetcher there, software prefetches fill above it). */
static int lowerFits(const kvsimSim *s) {
    if (s->cfg.timing || s->fast || s->n != 3 || s->cfg.swpf_level >= 2) return 0;
    if (s->lv[1].shape != SHAPE_RANK_NONINCL && s->lv[1].shape != SHAPE_RANK_INCL) return 0;
    if (s->lv[2].inclusion == KVSIM_INCLUSIVE) return 0;
    for (uint32_t p = 0; p < s->cfg.nprefetchers; p++)
        if (s->pf[p].level >= 2) return 0;
    return 1;
}

/* The copy of level 1 with level 2, the last, compiled in, for these shapes
 * (ACCESS_PAIR), or NULL. */
static uint32_t (*accessPair(int sh2, int sh3))(kvsimSim *, uint32_t, uint64_t, int, uint8_t,
                                                 int, uint32_t, int *) {
    if (sh2 == SHAPE_RANK_INCL && sh3 == SHAPE_RANK_EXCL) return accessRankInclRankExcl;
    if (sh2 == SHAPE_RANK_INCL && sh3 == SHAPE_WIDE_NONINCL) return accessRankInclWideNonIncl;
    if (sh2 == SHAPE_RANK_INCL && sh3 == SHAPE_WIDE_EXCL) return accessRankInclWideExcl;
    if (sh2 == SHAPE_RANK_NONINCL && sh3 == SHAPE_WIDE_NONINCL)
        return accessRankNonInclWideNonIncl;
    if (sh2 == SHAPE_RANK_NONINCL && sh3 == SHAPE_RANK_NONINCL)
        return accessRankNonInclRankNonIncl;
    return NULL;
}

/* One access of one line at level k (k == s->n is memory: counted). */
static uint32_t cacheAccess(kvsimSim *s, uint32_t k, uint64_t line, int op, uint8_t stag,
                            int kind, uint32_t pfk, int *dirty_up) {
    if (k == s->n) {
        if (op == OP_READ)
            s->st->dram_reads++;
        else
            s->st->dram_writes++;
        return k;
    }
    return s->lv[k].access(s, k, line, op, stag, kind, pfk, dirty_up);
}

/* The out-of-line copy (prefetches); demand pieces inline the body with f = 0. */
static uint64_t timeAccess(kvsimSim *s, uint64_t line, uint32_t f, uint32_t sv, uint64_t x,
                           int *waited) {
    return timeAccessBody(s, line, f, sv, x, waited);
}

/* --- Prefetch issue ------------------------------------------------------------ */

static void issueHwPrefetch(kvsimSim *s, uint32_t k, uint64_t line, uint8_t stag, uint64_t x) {
    kvsimLevelStats *ls = &s->st->level[k];
    if (heldAt(s, k, line)) {
        ls->pf_redundant[1]++;
        return;
    }
    s->look.tried++;
    if (s->cfg.timing && prefetchDropped(s, k, line, x, 1)) {
        ls->pf_dropped[1]++;
        s->look.dropped++;
        return;
    }
    uint32_t sv = cacheAccess(s, k, line, OP_READ, stag, KVSIM_K_HWPF, 2, NULL);
    if (s->cfg.timing) {
        int waited;
        timeAccess(s, line, k, sv, x, &waited);
    }
}

/* Train, in configuration order, every prefetcher at level lo or below that a
 * request served by level sv reaches (sv >= P->from: its level, hit or miss
 * there, or for a kind that trains on misses only, a miss there), and issue
 * each one's candidates before the next prefetcher trains.  A demand load
 * piece starts at L1 (lo 0); the caller has checked sv >= s->pf_from, so a hit
 * above every prefetcher's level costs no call.  With cfg.swpf_trains a
 * software prefetch that started at level f and missed it reached the levels
 * below f as a request (lo f + 1): the prefetchers at or above f never see it,
 * the TLB thread's ahead-trained L1 prefetcher among them; without it
 * (fills_only) such a prefetch trains only the kinds that see fills
 * (kvsimPrefetcherOps.sees_fills: every line fetched into their level).  A store
 * piece (stores) trains only the prefetchers with KVSIM_PF_STORES, all below L1
 * (lo 1).  Candidates issue at x, the request's issue tick, or for a prefetcher with
 * KVSIM_PF_ARRIVAL at xa, the tick the request left its first level (its miss's
 * start, when it held its miss buffers there): when it reached the levels below. */
static void runPrefetchers(kvsimSim *s, uint64_t line, uint32_t sv, const kvtRecord *r,
                           uint64_t x, uint64_t xa, uint32_t lo, int fills_only,
                           int stores) {
    uint64_t cand[MAX_DEGREE];
    const uint32_t key = ((uint32_t)r->tag << 16) | r->site;
    const uint32_t np = s->cfg.nprefetchers;
    for (uint32_t p = 0; p < np; p++) {
        Prefetcher *P = &s->pf[p];
        if (sv < P->from || P->level < lo || (fills_only && !P->ops->sees_fills)) continue;
        if (stores && !(P->cfg.flags & KVSIM_PF_STORES)) continue;
        const uint32_t k = P->level;
        const uint64_t xi = P->cfg.flags & KVSIM_PF_ARRIVAL ? xa : x;
        const uint64_t *cs = cand;
        uint32_t nc;
        if ((int)p == s->ahead_pf && s->tpn) { /* trained by the TLB thread (tlb.c) */
            nc = *s->tpn++;
            cs = s->tpc;
            s->tpc += nc;
        } else if (P->ops == &kvsimPrefetchStream) { /* inline: prefetch_stream.h */
            nc = kvsimStreamOperate(P->state, &P->cfg, line, sv == k && !P->hits, key, cand);
        } else {
            nc = P->operate(P->state, &P->cfg, line, sv == k && !P->hits, key, cand);
        }
        for (uint32_t c = 0; c < nc; c++) issueHwPrefetch(s, k, cs[c], r->tag, xi);
    }
}

/* runPrefetchers where the L1 IP-stride prefetcher is the only one that trains on
 * the piece (served above every other's `from`): its training inline, its
 * candidates issued as runPrefetchers issues them. */
static inline __attribute__((always_inline)) void trainL1IpStride(kvsimSim *s, uint64_t line,
                                                                  const kvtRecord *r,
                                                                  uint64_t x) {
    Prefetcher *P = &s->pf[s->l1_ips];
    uint64_t cand[MAX_DEGREE];
    const uint32_t nc = kvsimIpStrideOperate(P->state, &P->cfg, line,
                                             ((uint32_t)r->tag << 16) | r->site, cand);
    for (uint32_t c = 0; c < nc; c++) issueHwPrefetch(s, 0, cand[c], r->tag, x);
}

/* --- Records -------------------------------------------------------------------- */

/* Attribute the accesses and misses since the last call to the current phase of
 * the current statistics: called before either changes, and before reading. */
static void phaseSync(kvsimSim *s) {
    engLowerDrain(s); /* the last level's totals, if it has a thread (lower.c) */
    kvsimPhaseStats *ph = &s->st->phase[s->phase];
    for (uint32_t k = 0; k < s->n; k++) {
        Level *L = &s->lv[k];
        ph->access[k] += L->tot_acc - L->ph_acc;
        ph->miss[k] += L->tot_miss - L->ph_miss;
        L->ph_acc = L->tot_acc;
        L->ph_miss = L->tot_miss;
    }
}

static void setCounting(kvsimSim *s, int on) {
    phaseSync(s);
    engMergeParts(s); /* the workers' counters so far belong to the current statistics */
    s->st = on ? &s->stats : &s->scratch;
    for (uint32_t k = 0; k < s->n; k++) s->lv[k].ls = &s->st->level[k];
}


static uint32_t log2Bucket(uint64_t v) { return 63u - (uint32_t)__builtin_clzll(v + 1); }

/* Close the open command (if any) at the current retire time. */
static void closeCommand(kvsimSim *s) {
    if (!s->cmd_open) return;
    s->cmd_open = 0;
    if (!s->cmd_counted) return;
    kvsimStats *st = &s->stats;
    uint64_t t = s->r_last - s->cmd_t0, m = s->lv[0].tot_miss - s->cmd_miss0;
    st->commands++;
    st->command_ticks += t;
    if (t > st->command_ticks_max) st->command_ticks_max = t;
    st->command_l1_misses += m;
    if (s->cfg.timing) st->command_ticks_hist[log2Bucket(t)]++;
    st->command_l1_miss_hist[log2Bucket(m)]++;
}

/* A SYSCALL marker: the call starts once every earlier record has retired (the
 * kernel entry drains the core) and holds dispatch and retirement for its cost;
 * fills in flight go on meanwhile.  The kernel's copies to and from the process's
 * buffers are the trace's own records around the marker (sim/MODEL.md).  A call
 * that costs nothing (a CPU file without [syscall]) does not drain either, so such
 * a file predicts what it did before the marker existed. */
static void doSyscall(kvsimSim *s, kvsimStats *st, const kvtRecord *r) {
    uint32_t c = 0;
    while (c < KVT_NUM_SYSCALLS && s->cfg.syscall_site[c] != r->site) c++;
    st->syscalls[c]++;
    st->syscall_bytes[c] += r->addr;
    /* no call named, or a CPU file without costs for it: not even the drain */
    if (!s->cfg.timing || c == KVT_NUM_SYSCALLS ||
        (!s->cfg.syscall_call_ticks[c] && !s->cfg.syscall_byte_q16[c]))
        return;
    const uint64_t cost = s->cfg.syscall_call_ticks[c] +
                          ((r->addr * (uint64_t)s->cfg.syscall_byte_q16[c] + 32768u) >> 16);
    const uint64_t t0 = s->t_disp > s->r_last ? s->t_disp : s->r_last, r0 = s->r_last;
    s->t_disp = s->r_last = t0 + cost;
    s->dep_ring[s->recno % KVSIM_DEP_WINDOW] = s->t_disp;
    st->syscall_ticks += cost;
    st->ticks += s->r_last - r0;
    st->phase[s->phase].ticks += s->r_last - r0;
}

void engDoMarker(kvsimSim *s, const kvtRecord *r) {
    uint16_t m = r->flags;
    if (m == KVT_MARK_WARMUP_BEGIN) setCounting(s, 0);
    kvsimStats *st = s->st;
    if (st != &s->stats) s->stats.warmup_records++;
    st->records++;
    st->kind[KVT_MARKER]++;
    if (m < KVSIM_NMARKERS) st->markers[m]++;
    if (m == KVT_MARK_WORK && s->split) { /* instructions of the next record's gap */
        const uint64_t k = r->addr >> KVT_WORK_COUNT_BITS;
        if (k < KVSIM_MAX_WORK_KINDS) {
            s->wpend[k] += r->addr & ((1ULL << KVT_WORK_COUNT_BITS) - 1);
            s->wpend_mask |= 1u << k;
        }
    }
    if (m == KVT_MARK_PHASE) {
        phaseSync(s);
        s->phase = r->addr < KVSIM_MAX_PHASES ? (uint32_t)r->addr : KVSIM_MAX_PHASES - 1;
        if (s->phase + 1 > s->stats.nphases_seen) s->stats.nphases_seen = s->phase + 1;
    }
    st->instructions += r->gap;
    st->phase[s->phase].records++;
    st->phase[s->phase].instructions += r->gap;
    s->instr += r->gap;
    if (s->cfg.timing) {
        uint64_t r0 = s->r_last;
        s->t_disp += r->gap * s->ipt;
        s->r_last += r->gap * s->ipt;
        s->dep_ring[s->recno % KVSIM_DEP_WINDOW] = s->t_disp;
        st->ticks += s->r_last - r0;
        st->phase[s->phase].ticks += s->r_last - r0;
    }
    if (m == KVT_MARK_SYSCALL) doSyscall(s, st, r);
    s->recno++;
    if (m == KVT_MARK_COMMAND) {
        closeCommand(s);
        s->cmd_open = 1;
        s->cmd_counted = s->st == &s->stats;
        s->cmd_t0 = s->r_last;
        s->cmd_miss0 = s->lv[0].tot_miss;
    }
    if (m == KVT_MARK_WARMUP_END) setCounting(s, 1);
}


void engFlushBatch(kvsimSim *s, Batch *bt) {
    kvsimStats *st = s->st;
    if (st != &s->stats) s->stats.warmup_records += bt->records;
    st->records += bt->records;
    for (int k = 0; k < KVT_MARKER; k++) st->kind[k] += bt->kind[k];
    st->instructions += bt->instructions;
    st->pieces += bt->pieces;
    st->multiline += bt->multiline;
    st->ticks += bt->ticks;
    st->phase[s->phase].records += bt->records;
    st->phase[s->phase].instructions += bt->instructions;
    st->phase[s->phase].ticks += bt->ticks;
    memset(bt, 0, sizeof *bt);
}


/* One memory record.  `timing` and `extras` (TLB or hardware prefetchers
 * configured) are compile-time constants in each of the four copies that
 * kvsimRun calls, so the common configurations carry no dead branches. */
static inline __attribute__((always_inline)) void doMemoryT(kvsimSim *s, const kvtRecord *r,
                                                            Batch *bt, const int timing,
                                                            const int extras) {
    kvsimStats *st = s->st;
    const uint64_t W = s->W;
    const uint32_t lb = s->cfg.line_bits;
    const uint64_t ninstr = (uint64_t)r->gap + 1;
    /* the record, instruction, kind, piece and tick counts go to the caller's
     * batch (engFlushBatch adds them before a marker and at the end) */
    bt->records++;
    bt->kind[r->kind]++;
    bt->instructions += ninstr;
    s->instr += ninstr;

    /* dispatch */
    uint64_t D = 0, X = 0, rt = 0;
    if (timing) {
        rt = recordTicks(s, r, ninstr);
        dispatchT(s, r, rt, &D, &X);
    }
    uint64_t C = D + W;
    uint32_t cls = s->n + 1;
    /* a store with a store buffer: its lines' arrival (its pieces timed as a load's) */
    const int sb_store = timing && r->kind == KVT_STORE && s->cfg.store_buffer;
    uint64_t arrive = 0;
    uint64_t done = X > C ? X : C;          /* timeline: completion */
    uint32_t served = KVSIM_TIMELINE_DROPPED; /* timeline: serving level */

    if (r->kind == KVT_PREFETCH) {
        uint64_t line = engPhys(s, r->addr >> lb); /* the caches' line (placement.h) */
        uint64_t xp = X;
        int ok = 1;
        if (extras && s->cfg.tlb) {
            int walk;
            s->walk_now = X;
            int64_t t = translate(s, r->addr, 1, &walk);
            if (t < 0) {
                st->swpf_dropped_tlb++;
                ok = 0;
            } else if (timing) {
                st->wait_tlb += (uint64_t)t * W;
                xp = walk ? walkTime(s, xp, (uint64_t)t * W) : xp + (uint64_t)t * W;
            }
        }
        if (ok) {
            /* a prefetch of a line that f holds is never dropped, and takes no
             * time of its own (the access counts it redundant) */
            const uint32_t f = s->cfg.swpf_level;
            if (timing && prefetchDropped(s, f, line, xp, 0)) {
                st->level[f].pf_dropped[0]++;
            } else {
                const uint32_t sv = cacheAccess(s, f, line, OP_READ, r->tag, KVSIM_K_SWPF, 1, NULL);
                served = sv;
                uint64_t xa = xp; /* KVSIM_PF_ARRIVAL: the miss's start */
                if (timing && sv != f) {
                    int waited;
                    done = timeAccess(s, line, f, sv, xp, &waited);
                    xa = s->miss_start;
                }
                if (extras && sv > f && (s->cfg.swpf_trains || s->pf_fills))
                    runPrefetchers(s, line, sv, r, xp, xa, f + 1, !s->cfg.swpf_trains, 0);
            }
        }
    } else {
        const int is_store = r->kind == KVT_STORE;
        const uint64_t size = r->size ? r->size : 1;
        const uint64_t first = r->addr >> lb, last = (r->addr + size - 1) >> lb;
        if (last != first) bt->multiline++;
        uint32_t svmax = 0;
        for (uint64_t vline = first; vline <= last; vline++) {
            bt->pieces++;
            const uint64_t a0 = vline << lb;
            const uint64_t line = engPhys(s, vline); /* the caches' line (placement.h) */
            uint64_t xp = X;
            if (extras && s->cfg.tlb) {
                int walk;
                s->walk_now = X;
                int64_t t = translate(s, r->addr > a0 ? r->addr : a0, 0, &walk);
                if (timing && (!is_store || sb_store)) {
                    st->wait_tlb += (uint64_t)t * W;
                    xp = walk ? walkTime(s, xp, (uint64_t)t * W) : xp + (uint64_t)t * W;
                }
            }
            s->pfh_kind = 0;
            const int op = pieceOp(r, vline, lb, size, s->cfg.full_line_store_fetch);
            const int dk = is_store ? KVSIM_K_STORE : KVSIM_K_LOAD;
            const uint32_t sv =
                s->lv[0].shape == SHAPE_RANK_NONINCL
                    ? cacheAccessBody(s, 0, line, op, r->tag, dk, 0, NULL, LAY_RANK,
                                      KVSIM_NON_INCLUSIVE, 0, NX_ANY)
                    : cacheAccess(s, 0, line, op, r->tag, dk, 0, NULL);
            if (sv > svmax) svmax = sv;
            uint64_t xa = xp; /* KVSIM_PF_ARRIVAL: the miss's start (a timed miss) */
            if (timing && !is_store) {
                int waited = 0;
                uint64_t c = timeAccessBody(s, line, 0, sv, xp, &waited);
                if (sv) xa = s->miss_start;
                if (c > C) C = c;
                classifyPf(s, waited);
            } else if (sb_store) { /* the read-for-ownership */
                int waited = 0;
                const uint64_t c = timeAccessBody(s, line, 0, sv, xp, &waited);
                if (sv) xa = s->miss_start;
                if (c > arrive) arrive = c;
                classifyPf(s, waited);
            } else {
                classifyPf(s, 0);
            }
            if (extras && !is_store && sv >= s->pf_from) {
                if (sv < s->pf_from_rest && s->tpn && !*s->tpn)
                    s->tpn++; /* only ahead_pf trains here, and it has no candidates */
                else if (sv < s->l1_ips_alone_below && !s->tpn)
                    trainL1IpStride(s, line, r, xp); /* runPrefetchers for it alone */
                else
                    runPrefetchers(s, line, sv, r, xp, xa, 0, 0, 0);
            } else if (extras && is_store && s->pf_stores && sv >= s->pf_from) {
                runPrefetchers(s, line, sv, r, xp, xa, 1, 0, 1); /* KVSIM_PF_STORES */
            }
        }
        served = svmax;
        done = sb_store && arrive > C ? arrive : C; /* a store's: its lines' arrival */
        if (!is_store) {
            cls = svmax;
            if (timing) {
                st->load_latency += C - X;
                st->loads_timed++;
            }
        }
    }

    if (timing) retireT(s, rt, C, cls, 1, bt);
    if (sb_store) storeCommit(s, arrive);
    if (timing && s->tl && s->recno - s->tl_first < s->tl_count) {
        /* the timeline's capture hook (kvsimSetTimeline) */
        kvsimTimelineRow *row = &s->tl[s->recno - s->tl_first];
        row->dispatch = D;
        row->issue = X;
        row->complete = done;
        row->retire = s->r_last;
        row->level = served;
        row->flags = KVSIM_TIMELINE_CAPTURED;
    }
    s->recno++;
}

/* One non-marker record by the record-by-record path (segments.c sends it the
 * records its queues do not take); its counts go into the caller's batch, which
 * the caller flushes before a marker and at the end. */
void engGeneralRecord(kvsimSim *s, const kvtRecord *r, Batch *bt) {
    if (s->cfg.timing) /* s->fast: no TLB, no hardware prefetchers */
        doMemoryT(s, r, bt, 1, 0);
    else
        doMemoryT(s, r, bt, 0, 0);
}

/* A cheap guess for the look-ahead: does L1 hold a line with this line's
 * fingerprint?  (Only decides whether to prefetch the lower levels' sets.) */
static inline int likelyInL1(const kvsimSim *s, uint64_t line) {
    const Level *L = &s->lv[0];
    if (L->ways > 16) return 0;
    const uint8_t *fp = SET_FP(L, line & L->set_mask);
    const uint8_t f = fingerprint(line);
#if defined(__SSE4_2__)
    __m128i x = _mm_loadu_si128((const __m128i *)fp);
    uint32_t m = (uint32_t)_mm_movemask_epi8(_mm_cmpeq_epi8(x, kvsimSplat8(f)));
    return (m & ((1u << L->ways) - 1)) != 0;
#else
    for (uint32_t w = 0; w < L->ways; w++)
        if (fp[w] == f) return 1;
    return 0;
#endif
}

/* Prefetch into the host's caches the set blocks that line `ln` maps to in every
 * level from PF_FIRST_LEVEL down (L1's sets stay in the host caches anyway),
 * every line of each block: fetching the header line first and, a few records
 * later, only the tag line its fingerprints or ranks point to ran slower on
 * the presets, interleaved A B A B, with timing and without.
 * A macro, not a function: GCC's pure/const analysis deletes calls to a helper
 * whose only effect is a prefetch. */
#define LOOK_AHEAD(ln)                                                                  \
    do {                                                                                \
        const uint64_t ln_ = (ln);                                                      \
        for (uint32_t k_ = PF_FIRST_LEVEL; k_ < nl; k_++) {                             \
            const Level *L_ = &s->lv[k_];                                               \
            const uint8_t *b_ = L_->blk + (ln_ & L_->set_mask) * L_->stride;            \
            __builtin_prefetch(b_, 1, 3);                                               \
            if (L_->nlines > 1) __builtin_prefetch(b_ + 64, 1, 3);                      \
            if (L_->nlines > 2) __builtin_prefetch(b_ + 128, 1, 3);                     \
            for (uint32_t j_ = 3; j_ < L_->nlines; j_++) __builtin_prefetch(b_ + 64 * j_, 1, 3); \
        }                                                                               \
    } while (0)

/* The look-ahead's second part (engine_impl.h, kvsimSim.look): the set blocks
 * of the lines that an L1 miss of line `la` makes a next-line or adjacent-line
 * prefetcher fetch, which without it miss in the host's caches as often as the
 * line's own sets (the functional mode issues every candidate).  Out of line:
 * only the configurations with such a prefetcher pay for it.  The empty asm
 * statement tells the compiler the call has an effect, so it is not deleted. */
static __attribute__((noinline)) void lookNeighbours(const kvsimSim *s, uint64_t la) {
    const uint32_t nl = lookLevels(s);
    if (s->look.next) LOOK_AHEAD(la + 1);
    if (s->look.adjacent && !(s->look.next && !(la & 1))) LOOK_AHEAD(la ^ 1);
    __asm__ volatile("" ::: "memory");
}

/* The look-ahead's third part: the set blocks, one level down, of the victims a
 * miss of line `la` would evict, which no look-ahead of a record's own line
 * reaches (an exclusive level takes every victim of the level above; any level
 * the dirty ones).  From L1 down, while the line is not (by its fingerprint) in
 * level k and k's set is full: k's least recent way is the victim; where it goes
 * below, its set block there is prefetched.  Only for levels of LRU ranks, and
 * only above an exclusive wide level (s->look.victims), which takes every
 * victim: measured A B A B on the presets, the look gains 8-25 % there
 * (graviton4's 18-way SLC) and costs up to 8 % above an exclusive level of at
 * most 16 ways (graviton3, epyc-7713) or a level that takes dirty victims
 * alone; a guess (the set may change before the record's turn), never a change of state.
 * Called VICTIM_DISTANCE records ahead, after the record's own set blocks were
 * prefetched PREFETCH_DISTANCE ahead, so that level k's block is at hand. */
static __attribute__((noinline)) void lookVictims(const kvsimSim *s, uint64_t la) {
#if defined(__SSE4_2__)
    const __m128i fv = kvsimSplat8(fingerprint(la)), z = _mm_setzero_si128();
    for (uint32_t k = 0; k + 1 < s->n; k++) {
        const Level *L = &s->lv[k];
        if (L->roff != RK_RANK) break;
        const uint8_t *b = SET_BASE(L, la & L->set_mask);
        const __m128i x = _mm_loadu_si128((const __m128i *)b);
        if ((uint32_t)_mm_movemask_epi8(_mm_cmpeq_epi8(x, fv)) & L->wmask) break; /* a hit */
        if ((uint32_t)_mm_movemask_epi8(_mm_cmpeq_epi8(x, z)) & L->wmask) continue; /* free way */
        const uint32_t w = kvsimLruRankVictimMask(b + RK_RANK, L->wmask);
        const Level *D = &s->lv[k + 1];
        if (!(b[RK_META + w] & META_DIRTY) && D->inclusion != KVSIM_EXCLUSIVE) continue;
        const uint64_t v = ((const uint64_t *)(b + RK_TAGS))[w] - 1;
        const uint8_t *vb = D->blk + (v & D->set_mask) * D->stride;
        for (uint32_t j = 0; j < D->nlines; j++) __builtin_prefetch(vb + 64 * j, 1, 3);
    }
#endif
    __asm__ volatile("" ::: "memory");
}

/* --- Public API ------------------------------------------------------------------ */

/* The record-by-record loop, one copy per (timing, extras) combination (both are
 * compile-time constants in each copy, so the common cases carry no dead
 * branches and keep the engine's fields in registers). */
static inline __attribute__((always_inline)) void runLoop(kvsimSim *s, const kvtRecord *recs,
                                                          size_t n, const int timing,
                                                          const int extras) {
    const uint32_t lb = s->cfg.line_bits;
    const uint32_t nl = lookLevels(s);
    Batch bt;
    memset(&bt, 0, sizeof bt);
    /* look at the neighbours' sets unless most hardware prefetches since the
     * last call were dropped (timing: miss buffers full), so that the lines
     * looked at were never accessed */
    const int look = extras && (s->look.next || s->look.adjacent) &&
                     s->look.dropped * 2 <= s->look.tried;
    s->look.tried = s->look.dropped = 0;
    for (size_t i = 0; i < n; i++) {
        /* Look ahead: prefetch the simulated sets (one block per level below L1,
         * which stays in the host caches anyway) that the record
         * PREFETCH_DISTANCE ahead will touch.  Written inline on purpose: in a
         * helper function GCC's pure/const analysis deletes calls whose only
         * effect is a prefetch. */
        if (i + PREFETCH_DISTANCE < n) {
            const kvtRecord *q = &recs[i + PREFETCH_DISTANCE];
            const uint64_t la = engPhys(s, q->addr >> lb);
            if (q->kind != KVT_MARKER && nl > 1 && !likelyInL1(s, la)) {
                LOOK_AHEAD(la);
                if (extras && look) lookNeighbours(s, la);
            }
        }
        if (s->look.victims && i + VICTIM_DISTANCE < n) {
            const kvtRecord *q = &recs[i + VICTIM_DISTANCE];
            const uint64_t la = engPhys(s, q->addr >> lb);
            if (q->kind != KVT_MARKER && nl > 1 && !likelyInL1(s, la)) lookVictims(s, la);
        }
        const kvtRecord *r = &recs[i];
        if (r->kind < KVT_MARKER) {
            doMemoryT(s, r, &bt, timing, extras);
        } else if (r->kind == KVT_MARKER) {
            engFlushBatch(s, &bt); /* a marker may change where the counts go */
            engDoMarker(s, r);
        } else { /* unknown kind: counted as a record, otherwise ignored */
            s->st->records++;
            s->recno++;
        }
    }
    engFlushBatch(s, &bt);
}

/* The record-by-record path for records the TLB thread has coded (tlb.c). */
void engRunRecords(kvsimSim *s, const kvtRecord *recs, size_t n) {
    if (s->cfg.timing)
        runLoop(s, recs, n, 1, 1);
    else
        runLoop(s, recs, n, 0, 1);
}

void kvsimRun(kvsimSim *s, const kvtRecord *recs, size_t n) {
    if (s->finished) return;
    if (s->tp) {
        engTlbRun(s, recs, n);
        return;
    }
    const int extras = s->cfg.tlb || s->cfg.nprefetchers;
    if (s->cfg.timing) {
        if (extras)
            runLoop(s, recs, n, 1, 1);
        else if (s->fast && !s->tl)
            engRunFastTiming(s, recs, n);
        else
            runLoop(s, recs, n, 1, 0);
    } else {
        if (extras)
            runLoop(s, recs, n, 0, 1);
        else if (s->fast)
            engRunFastFunctional(s, recs, n);
        else
            runLoop(s, recs, n, 0, 0);
    }
}

void kvsimFinish(kvsimSim *s) {
    if (s->finished) return;
    engSettle(s);
    engLowerEnd(s);
    s->finished = 1;
    closeCommand(s);
    setCounting(s, 1);
    kvsimStats *st = s->st;
    if (s->cfg.flush_at_end) {
        /* DineroIV order: every level from L1 outward; within a level, sets from
         * the last to the first and, within a set, oldest line first (ties:
         * highest way first). */
        for (uint32_t k = 0; k < s->n; k++) {
            Level *L = &s->lv[k];
            for (uint64_t set = L->sets; set-- > 0;) {
                uint32_t order[64 * 4];
                uint32_t nw = L->ways;
                /* a set without a dirty line writes nothing back (write-backs go
                 * down, so none of its lines becomes dirty meanwhile): skip it */
                int dirty = 0;
                for (uint32_t w = 0; w < nw; w++)
                    dirty |= SET_TAGS(L, set)[w] != 0 && (SET_META(L, set)[w] & META_DIRTY);
                if (!dirty) continue;
                uint32_t *ord = nw <= 256 ? order : malloc(nw * sizeof(uint32_t));
                if (L->roff) {
                    /* LRU ranks, oldest = rank 0: distinct among the ways touched,
                     * and every valid way has been; the others share rank 0 (an
                     * empty way, or one emptied by an invalidation, is skipped below) */
                    const uint8_t *rk = SET_BASE(L, set) + L->roff;
                    for (uint32_t q = 0; q < nw; q++) ord[q] = UINT32_MAX;
                    for (uint32_t w = 0; w < nw; w++)
                        if (SET_TAGS(L, set)[w] != 0) ord[rk[w]] = w;
                } else {
                    for (uint32_t w = 0; w < nw; w++) ord[w] = nw - 1 - w;
                    /* stable insertion sort by age, descending */
                    for (uint32_t a = 1; a < nw; a++) {
                        uint32_t x = ord[a];
                        uint64_t ax = L->pol->age(&L->pc, (uint32_t)set, x);
                        uint32_t b = a;
                        while (b > 0 && L->pol->age(&L->pc, (uint32_t)set, ord[b - 1]) < ax) {
                            ord[b] = ord[b - 1];
                            b--;
                        }
                        ord[b] = x;
                    }
                }
                for (uint32_t q = 0; q < nw; q++) {
                    if (ord[q] == UINT32_MAX) continue;
                    uint64_t *tp = SET_TAGS(L, set) + ord[q];
                    uint8_t *mp = SET_META(L, set) + ord[q];
                    if (*tp == 0 || !(*mp & META_DIRTY)) continue;
                    *mp &= (uint8_t)~META_DIRTY;
                    st->level[k].writebacks++;
                    st->level[k].writebacks_flush++;
                    cacheAccess(s, k + 1, *tp - 1, OP_WFULL, SET_STAG(L, set)[ord[q]],
                                KVSIM_K_WRITEBACK, 0, NULL);
                }
                if (ord != order) free(ord);
            }
        }
    }
    for (uint32_t k = 0; k < s->n; k++) {
        Level *L = &s->lv[k];
        for (uint64_t set = 0; set < L->sets; set++)
            for (uint32_t w = 0; w < L->ways; w++) {
                uint32_t pfk = (SET_META(L, set)[w] & META_PF_MASK) >> META_PF_SHIFT;
                if (SET_TAGS(L, set)[w] && pfk) st->level[k].pf_unused_end[pfk - 1]++;
            }
    }
}

/* The counters that are derived rather than counted per access: hits (every
 * access is a hit or a miss) and the phases' pending accesses and misses. */
const kvsimStats *kvsimGetStats(const kvsimSim *cs) {
    kvsimSim *s = (kvsimSim *)cs; /* settling and derived fields: logically const */
    engSettle(s);
    phaseSync(s);
    for (uint32_t k = 0; k < s->n; k++) {
        kvsimLevelStats *ls = &s->stats.level[k];
        for (size_t i = 0; i < KVSIM_NTAGS * KVSIM_NKINDS; i++)
            ls->hit[i] = ls->access[i] - ls->miss[i];
    }
    return &s->stats;
}

uint32_t kvsimPeekSet(const kvsimSim *cs, uint32_t level, uint64_t set, uint64_t *out) {
    kvsimSim *s = (kvsimSim *)cs; /* settling: logically const */
    engSettle(s);
    if (level >= s->n || set >= s->lv[level].sets) return 0;
    const Level *L = &s->lv[level];
    memcpy(out, SET_TAGS(L, set), L->ways * sizeof(uint64_t));
    return L->ways;
}
uint32_t kvsimThreads(const kvsimSim *s) {
    const uint32_t t = s->tp ? 1 + (uint32_t)s->tp_ran : s->fast && !s->tl ? s->threads : 1;
    return t + (uint32_t)(s->lower && s->lower->ran);
}

int kvsimSetTimeline(kvsimSim *s, uint64_t first, uint64_t count, kvsimTimelineRow *rows) {
    if (!s->cfg.timing || s->recno || s->finished || s->ncarry) return -1;
    s->tl = rows;
    s->tl_first = first;
    s->tl_count = rows ? count : 0;
    return 0;
}
size_t kvsimStatsSize(void) { return sizeof(kvsimStats); }
size_t kvsimConfigSize(void) { return sizeof(kvsimConfig); }

void kvsimFree(kvsimSim *s) {
    if (s == NULL) return;
    engPartsFree(s); /* first: it stops the workers, which may still be running a job */
    engLowerFree(s);
    engTlbPipeStop(s);
    for (uint32_t k = 0; k < KVSIM_MAX_LEVELS; k++) {
        Level *L = &s->lv[k];
        bigFree(L->blk, L->sets, L->stride);
        free(L->pc.set);
        free(L->mline);
        free(L->mready);
        free(L->mhash);
        free(L->mq);
    }
    for (uint32_t p = 0; p < KVSIM_MAX_PREFETCHERS; p++) free(s->pf[p].state);
    free(s->dtlb.fp);
    free(s->dtlb.tags);
    free(s->dtlb.rk);
    free(s->dtlb.stamp);
    free(s->stlb.fp);
    free(s->stlb.tags);
    free(s->stlb.rk);
    free(s->stlb.stamp);
    free(s->walk_slot_line);
    free(s->walk_slot_tick);
    free(s->rob_idx);
    free(s->rob_ret);
    free(s->rob_cls);
    free(s);
}

#define FAIL(...)                                                                          \
    do {                                                                                   \
        if (err && errlen) snprintf(err, errlen, __VA_ARGS__);                             \
        kvsimFree(s);                                                                      \
        return NULL;                                                                       \
    } while (0)

kvsimSim *kvsimCreate(const kvsimConfig *cfg, char *err, size_t errlen) {
    kvsimSim *s = calloc(1, sizeof *s);
    if (s == NULL) {
        if (err && errlen) snprintf(err, errlen, "out of memory");
        return NULL;
    }
    s->cfg = *cfg;
    s->n = cfg->nlevels;
    s->st = &s->stats;
    s->pf_from = UINT32_MAX; /* no prefetcher (yet) */
    s->ahead_pf = -1;
    s->W = cfg->width ? cfg->width : 1;
    s->ipt = cfg->instr_ticks ? cfg->instr_ticks : 1;
    for (uint32_t k = 0; k < KVSIM_MAX_WORK_KINDS; k++) {
        s->kticks[k] = cfg->kind_ticks[k] ? cfg->kind_ticks[k] : s->ipt;
        if (cfg->kind_store_q16[k] > 65536) FAIL("work stores: at most 1 per instruction");
        s->wst |= cfg->kind_store_q16[k] != 0;
    }
    s->wst = s->wst && cfg->timing && cfg->store_buffer; /* the work's stores: with a buffer */
    s->split = cfg->per_kind || s->wst;
    if (s->n < 1 || s->n > KVSIM_MAX_LEVELS) FAIL("nlevels: must be 1..%d", KVSIM_MAX_LEVELS);
    if (cfg->line_bits < 2 || cfg->line_bits > 12) FAIL("line: must be 4..4096 bytes");
    for (uint32_t k = 0; k < s->n; k++) {
        const kvsimLevelConfig *c = &cfg->level[k];
        Level *L = &s->lv[k];
        char name[KVSIM_NAME_LEN + 1];
        memcpy(name, c->policy, KVSIM_NAME_LEN);
        name[KVSIM_NAME_LEN] = 0;
        L->pol = kvsimPolicyByName(name);
        L->is_lru = L->pol == &kvsimPolicyLru;
        if (L->pol == NULL) FAIL("cache[%u].replacement: unknown policy '%s'", k, name);
        if (!isPow2(c->sets)) FAIL("cache[%u]: set count %u is not a power of two", k, c->sets);
        if (c->ways < 1) FAIL("cache[%u].ways: must be >= 1", k);
        if (L->pol->needs_pow2_ways && (!isPow2(c->ways) || c->ways > 64))
            FAIL("cache[%u].ways: %s needs a power of two <= 64", k, L->pol->name);
        if (c->inclusion == KVSIM_EXCLUSIVE && (k == 0 || k != s->n - 1))
            FAIL("cache[%u].inclusion: exclusive is supported for the last level only", k);
        if (c->inclusion > KVSIM_EXCLUSIVE) FAIL("cache[%u].inclusion: unknown value", k);
        L->sets = c->sets;
        L->ways = c->ways;
        L->latency = c->latency;
        L->inclusion = c->inclusion;
        L->mshrs = cfg->timing ? c->mshrs : 0;
        L->set_mask = c->sets - 1;
        L->wmask = kvsimWaysMask(c->ways);
        L->ls = &s->stats.level[k];
        L->fpw = (c->ways + 15) & ~15u;
        L->shape = SHAPE_ANY;
        if (L->is_lru && c->ways <= KVSIM_LRU_RANK_MAX_WAYS)
            L->shape = c->inclusion == KVSIM_INCLUSIVE   ? SHAPE_RANK_INCL
                       : c->inclusion == KVSIM_EXCLUSIVE ? SHAPE_RANK_EXCL
                                                         : SHAPE_RANK_NONINCL;
        else if (L->is_lru && c->ways <= KVSIM_LRU_RANK32_MAX_WAYS) /* two rows of each */
            L->shape = c->inclusion == KVSIM_INCLUSIVE   ? SHAPE_WIDE_INCL
                       : c->inclusion == KVSIM_EXCLUSIVE ? SHAPE_WIDE_EXCL
                                                         : SHAPE_WIDE_NONINCL;
        {
            static uint32_t (*const copy[])(kvsimSim *, uint32_t, uint64_t, int, uint8_t, int,
                                            uint32_t, int *) = {
                [SHAPE_ANY] = accessAny,
                [SHAPE_RANK_NONINCL] = accessRankNonIncl,
                [SHAPE_RANK_INCL] = accessRankIncl,
                [SHAPE_RANK_EXCL] = accessRankExcl,
                [SHAPE_WIDE_NONINCL] = accessWideNonIncl,
                [SHAPE_WIDE_INCL] = accessWideIncl,
                [SHAPE_WIDE_EXCL] = accessWideExcl,
            };
            L->access = copy[L->shape];
        }
        if (LAY_OF(L->shape) == LAY_RANK) {
            /* the fixed layout of RK_*: no per-line policy words */
            L->roff = RK_RANK;
            L->soff = RK_STAG;
            L->hdr = RK_TAGS;
            L->stride = (L->hdr + (uint64_t)c->ways * 8 + 63) & ~(uint64_t)63;
        } else {
            L->soff = L->fpw + c->ways;
            L->hdr = (L->fpw + 2 * c->ways + 7) & ~7u;
            /* the policy words after the tags: a wide level's 32 ranks, or a word per way */
            if (LAY_OF(L->shape) == LAY_WIDE) L->roff = L->hdr + c->ways * 8;
            const uint64_t pol = L->roff ? 32 : (uint64_t)c->ways * 8;
            L->stride = (L->hdr + (uint64_t)c->ways * 8 + pol + 63) & ~(uint64_t)63;
        }
        L->blk = bigAlloc(c->sets, L->stride);
        L->nlines = (uint32_t)(L->stride / 64);
        L->pc.ways = c->ways;
        L->pc.stride = L->stride / sizeof(uint64_t);
        L->pc.line = L->blk && !L->roff ? (uint64_t *)(L->blk + L->hdr) + c->ways : NULL;
        L->pc.rank = L->blk && L->roff ? L->blk + L->roff : NULL;
        L->pc.rstride = L->stride;
        L->pc.set = xcalloc(c->sets, sizeof(uint64_t));
        L->pc.rng = c->seed ? c->seed : 0x9E3779B97F4A7C15ULL;
        uint32_t ring = 1;
        while (ring < c->mshrs) ring <<= 1;
        L->mqmask = ring - 1;
        L->mline = xcalloc(c->mshrs, sizeof(uint64_t));
        L->mready = xcalloc(c->mshrs, sizeof(uint64_t));
        L->mhash = xcalloc((c->mshrs + 15) & ~15u, 1); /* whole SSE groups (timing.h) */
        L->mq = xcalloc(ring, sizeof(uint32_t));
        if (!L->blk || !L->pc.set || !L->mline || !L->mready || !L->mhash || !L->mq)
            FAIL("out of memory for cache[%u]", k);
        for (uint32_t i = 0; i < c->mshrs; i++) L->mq[i] = i; /* all free at 0 */
        for (uint32_t i = 0; i < c->mshrs; i++) L->mhash[i] = (uint8_t)mhash(0);
        if (L->pol->on_init)
            for (uint64_t set = 0; set < c->sets; set++) L->pol->on_init(&L->pc, (uint32_t)set);
    }
    if (s->n == 3) { /* the L2 with the last level compiled in, if there is a copy */
        uint32_t (*pair)(kvsimSim *, uint32_t, uint64_t, int, uint8_t, int, uint32_t, int *) =
            accessPair(s->lv[1].shape, s->lv[2].shape);
        if (pair) s->lv[1].access = pair;
    }
    for (uint32_t k = 0; k < s->n; k++) s->lat[k] = (uint64_t)s->lv[k].latency * s->W;
    s->lat[s->n] = (uint64_t)cfg->dram_latency * s->W;
    s->dram_recip = cfg->dram_xfer_ticks ? UINT64_MAX / cfg->dram_xfer_ticks : 0;
    s->fast = !cfg->tlb && cfg->nprefetchers == 0 && !cfg->place_bits;
    for (uint32_t k = 0; k < s->n; k++)
        if (s->lv[k].roff != RK_RANK || s->lv[k].inclusion != KVSIM_NON_INCLUSIVE) s->fast = 0;
    if (cfg->queue_cap && (cfg->queue_cap < 2 || cfg->queue_cap > QCAP))
        FAIL("queue_cap: must be 2..%d (0 = default)", QCAP);
    s->qcap = cfg->queue_cap ? cfg->queue_cap : QCAP;
    s->segcap = SEGQ * s->qcap;
    if (cfg->threads > KVSIM_MAX_THREADS)
        FAIL("threads: must be 1..%d (0 = 1)", KVSIM_MAX_THREADS);
    if (cfg->walk_reads > KVSIM_MAX_WALK_READS)
        FAIL("walk_reads: at most %d", KVSIM_MAX_WALK_READS);
    if (cfg->walkers > KVSIM_MAX_WALKERS)
        FAIL("walkers: at most %d (0 = unlimited)", KVSIM_MAX_WALKERS);
    if (cfg->scheduler > KVSIM_MAX_SCHEDULER)
        FAIL("core.scheduler: at most %d (0 = unlimited)", KVSIM_MAX_SCHEDULER);
    if (cfg->store_buffer > KVSIM_MAX_STORE_BUFFER)
        FAIL("core.store_buffer: at most %d (0 = not modelled)", KVSIM_MAX_STORE_BUFFER);
    if (cfg->guest_page_bits && (cfg->guest_page_bits <= cfg->page_bits ||
                                 cfg->guest_page_bits > 40))
        FAIL("guest_page_bits: 0 or a page larger than page_bits' (at most 2^40)");
    if (cfg->place_bits && (cfg->place_bits < KVSIM_PLACE_MIN_BITS ||
                            cfg->place_bits > KVSIM_PLACE_MAX_BITS ||
                            cfg->place_bits <= cfg->line_bits))
        FAIL("place_bits: 0 or a page of 2^%d..2^%d bytes, larger than a line",
             KVSIM_PLACE_MIN_BITS, KVSIM_PLACE_MAX_BITS);
    if (s->fast && !engPartsInit(s)) FAIL("out of memory or threads");
    if (cfg->nprefetchers > KVSIM_MAX_PREFETCHERS) FAIL("prefetcher: at most %d", KVSIM_MAX_PREFETCHERS);
    for (uint32_t p = 0; p < cfg->nprefetchers; p++) {
        const kvsimPrefetcherConfig *c = &cfg->prefetcher[p];
        char name[KVSIM_NAME_LEN + 1];
        memcpy(name, c->kind, KVSIM_NAME_LEN);
        name[KVSIM_NAME_LEN] = 0;
        s->pf[p].ops = kvsimPrefetcherByName(name);
        if (s->pf[p].ops == NULL) FAIL("prefetcher[%u].kind: unknown prefetcher '%s'", p, name);
        if (c->level >= s->n) FAIL("prefetcher[%u].level: no such cache level", p);
        if (s->lv[c->level].inclusion == KVSIM_EXCLUSIVE)
            FAIL("prefetcher[%u].level: cannot prefetch into an exclusive level", p);
        if (c->degree < 1 || c->degree > MAX_DEGREE) FAIL("prefetcher[%u].degree: 1..%d", p, MAX_DEGREE);
        if (c->table < 1) FAIL("prefetcher[%u].table: must be >= 1", p);
        if (c->flags & ~(KVSIM_PF_ARRIVAL | KVSIM_PF_STORES | KVSIM_PF_HITS))
            FAIL("prefetcher[%u].flags: unknown bits", p);
        if (c->flags && c->level == 0)
            FAIL("prefetcher[%u].flags: arrival, stores and hits are for levels below L1", p);
        if (c->flags & KVSIM_PF_STORES) s->pf_stores = 1;
        s->pf[p].cfg = *c;
        s->pf[p].state = xcalloc(s->pf[p].ops->state_words(c), sizeof(uint64_t));
        if (!s->pf[p].state) FAIL("out of memory");
        s->pf[p].operate = s->pf[p].ops->operate;
        s->pf[p].level = c->level;
        s->pf[p].hits = (c->flags & KVSIM_PF_HITS) != 0;
        s->pf[p].from = c->level + (s->pf[p].ops->hits_idle && !s->pf[p].hits ? 1u : 0u);
        if (s->pf[p].ops->sees_fills) s->pf_fills = 1;
        if (s->pf[p].from < s->pf_from) s->pf_from = s->pf[p].from;
        if (s->pf[p].ops == &kvsimPrefetchNextLine) s->look.next = 1;
        if (s->pf[p].ops == &kvsimPrefetchAdjacentLine) s->look.adjacent = 1;
    }
    for (uint32_t k = 1; k < s->n; k++) {
        if (s->lv[k].shape == SHAPE_WIDE_EXCL && s->lv[k - 1].roff == RK_RANK)
            s->look.victims = 1;
    }
    s->pf_from_rest = s->pf_from;
    s->l1_ips = -1;
    for (uint32_t p = 0; p < cfg->nprefetchers && s->l1_ips < 0; p++)
        if (s->pf[p].ops == &kvsimPrefetchIpStride && s->pf[p].level == 0) s->l1_ips = (int)p;
    s->l1_ips_alone_below = s->l1_ips >= 0 ? leastFromBut(s, s->l1_ips) : 0;
    if (cfg->swpf_level >= s->n) FAIL("swprefetch.fill: no such cache level");
    if (s->lv[cfg->swpf_level].inclusion == KVSIM_EXCLUSIVE)
        FAIL("swprefetch.fill: cannot prefetch into an exclusive level");
    if (cfg->tlb) {
        if (!isPow2(cfg->dtlb_sets) || cfg->dtlb_ways < 1) FAIL("tlb: bad L1 DTLB geometry");
        if (cfg->stlb_sets && (!isPow2(cfg->stlb_sets) || cfg->stlb_ways < 1))
            FAIL("tlb: bad STLB geometry");
        if (!engTlbInit(&s->dtlb, cfg->dtlb_sets, cfg->dtlb_ways)) FAIL("out of memory");
        if (cfg->stlb_sets && !engTlbInit(&s->stlb, cfg->stlb_sets, cfg->stlb_ways))
            FAIL("out of memory");
        if (cfg->threads > 1 && !s->fast && !engTlbPipeStart(s))
            FAIL("out of memory or threads");
    }
    if (cfg->threads > 1 && lowerFits(s)) {
        if (!engLowerStart(s)) FAIL("out of memory or threads");
        s->lower->access = accessOwn(s->lv[2].shape);
        s->look.victims = 0; /* the only wide exclusive level is the last: lower.c looks */
        s->lv[1].access = s->lv[1].shape == SHAPE_RANK_INCL ? accessRankInclQueue
                                                             : accessRankNonInclQueue;
    }
    if (cfg->timing) {
        if (cfg->width < 1) FAIL("core.width: must be >= 1");
        if (cfg->rob < 1) FAIL("core.rob: must be >= 1");
        uint64_t cap = 1;
        while (cap <= cfg->rob) cap <<= 1;
        s->rob_mask = cap - 1;
        s->last_cause = (uint8_t)(s->n + 1);
        s->rob_idx = xcalloc(cap, sizeof(uint64_t));
        s->rob_ret = xcalloc(cap, sizeof(uint64_t));
        s->rob_cls = xcalloc(cap, 1);
        if (!s->rob_idx || !s->rob_ret || !s->rob_cls) FAIL("out of memory");
        if (cfg->tlb && cfg->walk_reads && cfg->walk_retention) {
            if (cfg->walk_retention > (UINT64_MAX >> 16) / s->W)
                FAIL("walk_retention: too long");
            s->walk_slot_line = xcalloc((size_t)1 << KVSIM_WALK_SLOT_BITS, sizeof(uint64_t));
            s->walk_slot_tick = xcalloc((size_t)1 << KVSIM_WALK_SLOT_BITS, sizeof(uint64_t));
            if (!s->walk_slot_line || !s->walk_slot_tick) FAIL("out of memory");
        }
    }
    return s;
}
