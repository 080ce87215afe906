/*
 * engine.c -- the kvsim cache-hierarchy engine: functional caches in program
 * order, with an out-of-order timing overlay.
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
 *   Timing overlays it, in integer ticks (1 cycle = width ticks):
 *     dispatch D_i = max(D_{i-1} + instructions_i, ROB limit)
 *     issue    X_i = max(D_i, completion of the dep producer) + TLB cost
 *     a miss takes a free miss buffer (MSHR) at every level it misses,
 *     waiting for the earliest one; a DRAM fill also waits for the channel;
 *     a hit on a line still in flight waits for its fill (a late prefetch
 *     or an MSHR merge)
 *     retire   R_i = max(R_{i-1} + instructions_i, completion_i)
 *   Stores and prefetches complete one cycle after dispatch.
 *
 * Per-level layout: one block per set (see SET_BASE below) holding 8-bit way
 * fingerprints, meta bytes (bit 0 dirty, bits 1-2 the prefetch kind of an
 * unused prefetched line), structure tags, the tags (line number + 1; 0 =
 * invalid) and the policy's per-line words (LRU with <= 16 ways: 16 rank bytes
 * instead, so a 16-way set is three host lines); plus per-set policy words and
 * the miss buffers.  All sized at creation; nothing grows with the trace.
 *
 * Speed.  The common configuration (every level LRU with ranks and
 * non-inclusive, no TLB, no hardware prefetchers: s->fast) runs level by level
 * (runFastFunctional / runFastTiming, essay above levelPassT): the records
 * become a queue of line requests to L1, each level takes its whole queue and
 * feeds the next, so a level's parameters stay in registers, and each level
 * prefetches into the host caches the set blocks of the requests a few entries
 * ahead in its queue: look-ahead software prefetching, the technique the
 * simulator itself studies, with exact addresses.  With timing, a second pass
 * runs the same records through the out-of-order model.  Other configurations
 * take the record-by-record path (runLoop), which prefetches the lower levels'
 * set blocks of the record PREFETCH_DISTANCE ahead.  Lookups compare 16
 * fingerprints per SSE instruction; hits are not counted (hit = access - miss)
 * and the phases' access and miss counts come from per-level totals
 * (phaseSync).  Miss buffers are kept sorted by ready tick, so the earliest
 * free one is at hand.
 *
 * Conventions: see engine.h.
 */
#include "engine.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#if defined(__SSE4_2__)
#include <nmmintrin.h>
#endif

#include "policy.h"
#include "policy_lru.h"
#include "prefetch.h"

#define META_DIRTY 1u
#define META_PF_SHIFT 1
#define META_PF_MASK 6u
#ifndef PREFETCH_DISTANCE
#define PREFETCH_DISTANCE 8
#endif
#define MAX_DEGREE 16
#ifndef PF_FIRST_LEVEL
#define PF_FIRST_LEVEL 1
#endif

enum { OP_READ = 0, OP_WRITE = 1, OP_WFULL = 2, OP_VICTIM = 3 };

/* --- Types ---------------------------------------------------------------- */

typedef struct Level {
    /* hot: what every access reads, first */
    uint8_t *blk;    /* sets blocks of `stride` bytes, see SET_TAGS */
    uint64_t set_mask;
    uint64_t stride; /* bytes per set block, a multiple of 64 */
    uint32_t ways, wmask; /* wmask: one bit per way (ways <= 32) */
    uint32_t hdr;    /* bytes before the tags: fingerprints, meta, stag, padding */
    uint32_t roff;   /* LRU ranks (<= 16 ways): their offset (RK_RANK), else 0 */
    uint32_t soff;   /* offset of the structure tags in the set block */
    kvsimLevelStats *ls; /* this level's counters in s->st (follows warm-up switches) */
    /* every access and miss here, warm-up included; the phase statistics get the
     * difference since ph_acc / ph_miss whenever the phase or the counting changes
     * (phaseSync), so the per-access path increments one local word each */
    uint64_t tot_acc, tot_miss, ph_acc, ph_miss;
    uint32_t nlines; /* host cache lines per set block */
    uint32_t sets, latency, inclusion, mshrs;
    uint32_t fpw;    /* fingerprint bytes per block: ways rounded up to 16 */
    const kvsimPolicyOps *pol;
    kvsimPolicyCtx pc;
    uint64_t *mline;  /* miss buffers: line, fill-ready tick, prefetch kind, mhash(line) */
    uint64_t *mready;
    uint8_t *mpf, *mhash;
    /* the buffers sorted by (ready tick, index), a ring of mshrs entries starting at
     * mq[mqhead & mqmask]: the front is the earliest-free buffer (the lowest index
     * on a tie).  Only the front is ever taken; its new ready tick is usually the
     * latest, so it goes back in at the end after one comparison. */
    uint32_t *mq;
    uint32_t mqhead, mqmask;
    /* how many buffers hold a line of each hash (mhash): a lookup whose count
     * is zero skips the search of the buffers */
    uint32_t mcount[64];
    uint64_t mmax_ready;
    /* memo of the last line found or installed here (key = line + 1, 0 = none):
     * repeated accesses to one line skip the set scan */
    uint64_t memo_key, memo_set;
    uint32_t memo_way;
    int is_lru; /* devirtualised LRU updates (policy_lru.h) */
} Level;

typedef struct Tlb {
    uint32_t sets, ways;
    uint64_t *tags; /* page + 1 */
    uint64_t *stamp;
    uint64_t clock;
} Tlb;

typedef struct Prefetcher {
    const kvsimPrefetcherOps *ops;
    kvsimPrefetcherConfig cfg;
    uint64_t *state;
} Prefetcher;

/* A line request to one level, for the level-by-level functional path. */
typedef struct QEnt {
    uint64_t line;
    uint32_t pid; /* the piece's index in q[0] (NOPID: a write-back) */
    uint8_t op, kind, stag;
    uint8_t swpf; /* a software prefetch filling L1 (functional): the first level marks */
} QEnt;

struct kvsimSim {
    kvsimConfig cfg;
    uint32_t n;
    Level lv[KVSIM_MAX_LEVELS];
    Prefetcher pf[KVSIM_MAX_PREFETCHERS];
    Tlb dtlb, stlb;
    kvsimStats stats;   /* what is reported */
    kvsimStats scratch; /* where warm-up counts go */
    kvsimStats *st;
    uint32_t phase;
    int finished;
    /* demand hit on an unused prefetched line, reported by cacheAccess */
    uint32_t pfh_kind, pfh_level;
    /* timing */
    uint64_t W;
    uint64_t lat[KVSIM_MAX_LEVELS + 1]; /* levelLatency: ticks per serving level, DRAM last */
    uint64_t t_disp, r_last, instr, recno;
    uint64_t *rob_idx, *rob_ret;
    uint8_t *rob_cls;
    uint64_t rob_mask, rob_head, rob_tail;
    int blk_valid;
    uint64_t blk_idx, blk_ret;
    uint8_t blk_cls;
    uint64_t dep_ring[KVSIM_DEP_WINDOW];
    uint64_t dram_free;
    uint8_t last_cause; /* stall class that set the last retire time */
    int fast; /* every level LRU with ranks and non-inclusive, no TLB or prefetchers */
    QEnt *q[KVSIM_MAX_LEVELS]; /* s->fast: the request queue of each level (QCAP) */
    uint32_t qn[KVSIM_MAX_LEVELS];
    uint32_t qcap; /* their capacity: QCAP, or the test hook cfg.queue_cap */
    /* timing: per queued L1 piece, the serving level and a first demand hit on an
     * unused prefetched line (its kind, 0 = none, and level) */
    uint8_t psv[256], ppfk[256], ppfl[256];
    /* the open command (COMMAND marker to COMMAND marker) */
    int cmd_open, cmd_counted;
    uint64_t cmd_t0, cmd_miss0; /* cmd_miss0: lv[0].tot_miss (every L1 miss) at its start */
};

/* --- Helpers ---------------------------------------------------------------- */

static int isPow2(uint64_t x) { return x != 0 && (x & (x - 1)) == 0; }

/* One set's block, padded to whole host cache lines so that a lookup touches one
 * contiguous region (one host TLB entry, adjacent lines):
 *
 *   [fp: fpw x u8][meta: ways x u8][stag: ways x u8][pad to 8][tags: ways x u64]
 *   [policy words: ways x u64][pad to 64]
 *
 * fp[w] is an 8-bit fingerprint of the line in way w (never 0) and 0 for
 * an invalid way: a lookup compares 16 fingerprints per SSE instruction and reads
 * a full tag only for the (usually zero or one) matching ways. */
#define SET_BASE(L, set) ((L)->blk + (uint64_t)(set) * (L)->stride)
#define SET_FP(L, set) SET_BASE(L, set)
#define SET_META(L, set) (SET_BASE(L, set) + (L)->fpw)
#define SET_STAG(L, set) (SET_BASE(L, set) + (L)->soff)
#define SET_TAGS(L, set) ((uint64_t *)(SET_BASE(L, set) + (L)->hdr))

/* The block of a level with LRU ranks (<= 16 ways) has a fixed layout, one host
 * line of header and the tags after it (a 16-way set is three host lines):
 *
 *   [fp 16][meta 16][stag 16][ranks 16][tags: ways x u64][pad to 64]
 *
 * so the specialised paths address every part with constants. */
#define RK_META 16
#define RK_STAG 32
#define RK_RANK 48
#define RK_TAGS 64
_Static_assert(RK_META == KVSIM_LRU_RANK_MAX_WAYS, "the fingerprint row holds every way");
_Static_assert(RK_TAGS % 64 == 0 && RK_TAGS - RK_RANK == 16, "one host line of header");

static inline uint8_t fingerprint(uint64_t line) {
    uint8_t f = (uint8_t)((line * 0x9E3779B97F4A7C15ULL) >> 56);
    return (uint8_t)(f + (f == 0)); /* 1..255; 0 marks an invalid way */
}

static void *xcalloc(size_t n, size_t sz) { return calloc(n ? n : 1, sz ? sz : 1); }

/* Zeroed memory for the big per-line arrays.  Arrays of 1 MiB or more are 2 MiB
 * aligned and advised as transparent huge pages: a simulated L3 spread over 4 KiB
 * host pages costs a host TLB miss (a nested walk in a VM) on nearly every access. */
#define HUGE_THRESHOLD (1u << 20)
#define HUGE_ALIGN (2u << 20)
static void *bigAlloc(size_t n, size_t sz) {
    size_t bytes = (n ? n : 1) * (sz ? sz : 1);
    if (bytes < HUGE_THRESHOLD) return calloc(1, bytes);
    size_t rounded = (bytes + HUGE_ALIGN - 1) & ~(size_t)(HUGE_ALIGN - 1);
    void *p = NULL;
    if (posix_memalign(&p, HUGE_ALIGN, rounded) != 0) return NULL;
#ifdef MADV_HUGEPAGE
    madvise(p, rounded, MADV_HUGEPAGE);
#endif
    memset(p, 0, rounded);
    return p;
}

/* --- TLB -------------------------------------------------------------------- */

static int tlbInit(Tlb *t, uint32_t sets, uint32_t ways) {
    t->sets = sets;
    t->ways = ways;
    t->clock = 0;
    t->tags = xcalloc((size_t)sets * ways, sizeof(uint64_t));
    t->stamp = xcalloc((size_t)sets * ways, sizeof(uint64_t));
    return t->tags != NULL && t->stamp != NULL;
}

/* Look up `page`; on a hit refresh its stamp.  Returns 1 on a hit. */
static int tlbLookup(Tlb *t, uint64_t page) {
    uint64_t base = (page & (t->sets - 1)) * t->ways;
    for (uint32_t w = 0; w < t->ways; w++)
        if (t->tags[base + w] == page + 1) {
            t->stamp[base + w] = ++t->clock;
            return 1;
        }
    return 0;
}

/* Install `page`: the lowest invalid way, else the least recently used. */
static void tlbFill(Tlb *t, uint64_t page) {
    uint64_t base = (page & (t->sets - 1)) * t->ways;
    uint32_t v = 0;
    int found = 0;
    for (uint32_t w = 0; w < t->ways; w++)
        if (t->tags[base + w] == 0) {
            v = w;
            found = 1;
            break;
        }
    if (!found)
        for (uint32_t w = 1; w < t->ways; w++)
            if (t->stamp[base + w] < t->stamp[base + v]) v = w;
    t->tags[base + v] = page + 1;
    t->stamp[base + v] = ++t->clock;
}

/* Translate the page of `addr`.  Returns the added cycles, or -1 if the
 * access is a software prefetch that the configuration drops on a DTLB miss. */
static int64_t translate(kvsimSim *s, uint64_t addr, int is_swpf) {
    kvsimStats *st = s->st;
    uint64_t page = addr >> s->cfg.page_bits;
    st->dtlb_access++;
    if (tlbLookup(&s->dtlb, page)) return 0;
    st->dtlb_miss++;
    if (is_swpf && s->cfg.swpf_drop_on_tlb_miss) return -1;
    int64_t cost;
    if (s->cfg.stlb_sets) {
        st->stlb_access++;
        if (tlbLookup(&s->stlb, page)) {
            cost = s->cfg.stlb_latency;
        } else {
            st->stlb_miss++;
            tlbFill(&s->stlb, page);
            cost = s->cfg.walk_latency;
        }
    } else {
        cost = s->cfg.walk_latency;
    }
    tlbFill(&s->dtlb, page);
    return cost;
}

/* --- Caches ----------------------------------------------------------------- */

/* Scan a set: the way holding `line` (-1 if none) and the lowest invalid way (-1
 * if the set is full), from the fingerprints (16 ways per SSE compare; scalar
 * fallback), checking full tags only where a fingerprint matches. */
static inline void scanSet(const Level *L, uint64_t set, uint64_t line, int64_t *hit,
                           int64_t *inv) {
    const uint8_t *fp = SET_FP(L, set);
    const uint64_t *tg = SET_TAGS(L, set);
    const uint64_t key = line + 1;
    const uint8_t f = fingerprint(line);
    const uint32_t ways = L->ways;
    int64_t h = -1, v = -1;
    for (uint32_t base = 0; base < ways; base += 64) {
        uint64_t cand = 0, empty = 0;
        uint32_t n = ways - base < 64 ? ways - base : 64;
        uint32_t w = 0;
#if defined(__SSE4_2__)
        const __m128i fv = _mm_set1_epi8((char)f), z = _mm_setzero_si128();
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
    scanSet(L, set, line, &h, &v);
    return h;
}

/* First level at or below `from` holding `line` (s->n = memory).  No side effects. */
static uint32_t probe(const kvsimSim *s, uint32_t from, uint64_t line) {
    for (uint32_t k = from; k < s->n; k++)
        if (findWay(&s->lv[k], line & s->lv[k].set_mask, line) >= 0) return k;
    return s->n;
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
} Victim;

/* Remove the line in (k, set, way) by replacement; apply inclusion. */
static inline Victim evict(kvsimSim *s, uint32_t k, uint64_t set, uint32_t way) {
    Level *L = &s->lv[k];
    uint8_t vm = SET_META(L, set)[way];
    Victim v = {1, SET_TAGS(L, set)[way] - 1, (vm & META_DIRTY) != 0, SET_STAG(L, set)[way]};
    uint32_t pfk = (vm & META_PF_MASK) >> META_PF_SHIFT;
    kvsimLevelStats *ls = &s->st->level[k];
    ls->evictions++;
    if (pfk) ls->pf_useless[pfk - 1]++;
    if (L->inclusion == KVSIM_INCLUSIVE) {
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

/* An access one level below k: memory is counted inline (no call). */
static inline uint32_t accessBelow(kvsimSim *s, uint32_t k, uint64_t line, int op, uint8_t stag,
                                   int kind, int *dirty_up) {
    if (k + 1 == s->n) {
        if (op == OP_READ)
            s->st->dram_reads++;
        else
            s->st->dram_writes++;
        return s->n;
    }
    return cacheAccess(s, k + 1, line, op, stag, kind, 0, dirty_up);
}

/* Send a removed victim of level k below it. */
static inline void sendVictim(kvsimSim *s, uint32_t k, const Victim *v) {
    if (!v->valid) return;
    if (v->dirty) {
        s->st->level[k].writebacks++;
        accessBelow(s, k, v->line, OP_WFULL, v->stag, KVSIM_K_WRITEBACK, NULL);
    } else if (k + 1 < s->n && s->lv[k + 1].inclusion == KVSIM_EXCLUSIVE) {
        cacheAccess(s, k + 1, v->line, OP_VICTIM, v->stag, KVSIM_K_VICTIM, 0, NULL);
    }
}

/* Choose a way for a new line in (k, set): the lowest invalid way, else the
 * policy's victim, which is evicted into *v. */
static inline uint32_t allocWay(kvsimSim *s, uint32_t k, uint64_t set, int64_t inv, Victim *v) {
    Level *L = &s->lv[k];
    v->valid = 0;
    if (inv >= 0) return (uint32_t)inv;
    uint32_t w = L->is_lru ? kvsimLruVictim(&L->pc, (uint32_t)set)
                           : L->pol->victim(&L->pc, (uint32_t)set);
    *v = evict(s, k, set, w);
    return w;
}

/*
 * One access of one line at level k (k == s->n is memory).  Returns the level
 * that served it (k on a hit; for writes that allocate without a fetch, k).
 * pfk != 0 marks a prefetch's first level: the line is installed as an unused
 * prefetch of that kind (1 software, 2 hardware).  For a READ that hits an
 * exclusive level the line moves up: *dirty_up receives its dirty bit.
 */
static inline __attribute__((always_inline)) uint32_t
cacheAccessBody(kvsimSim *s, uint32_t k, uint64_t line, int op, uint8_t stag, int kind,
                uint32_t pfk, int *dirty_up) {
    kvsimStats *st = s->st;
    if (k == s->n) {
        if (op == OP_READ)
            st->dram_reads++;
        else
            st->dram_writes++;
        return k;
    }
    Level *L = &s->lv[k];
    kvsimLevelStats *ls = &st->level[k];
    uint64_t set = line & L->set_mask;
    size_t idx = (size_t)stag * KVSIM_NKINDS + (size_t)kind;
    ls->access[idx]++;
    L->tot_acc++;
    int64_t w, inv = -1;
    if (line + 1 == L->memo_key)
        w = L->memo_way;
    else
        scanSet(L, set, line, &w, &inv);
    if (w >= 0) {
        uint8_t *mp = SET_META(L, set) + w;
        L->memo_key = line + 1;
        L->memo_set = set;
        L->memo_way = (uint32_t)w;
        if (L->is_lru)
            kvsimLruTouch(&L->pc, (uint32_t)set, (uint32_t)w);
        else
            L->pol->on_hit(&L->pc, (uint32_t)set, (uint32_t)w);
        uint8_t m = *mp;
        if ((kind == KVSIM_K_LOAD || kind == KVSIM_K_STORE) && (m & META_PF_MASK)) {
            s->pfh_kind = (m & META_PF_MASK) >> META_PF_SHIFT;
            s->pfh_level = k;
            m &= (uint8_t)~META_PF_MASK;
        }
        if (pfk) ls->pf_redundant[pfk - 1]++;
        if (op != OP_READ && op != OP_VICTIM) m |= META_DIRTY;
        *mp = m;
        if (L->inclusion == KVSIM_EXCLUSIVE && op == OP_READ) {
            if (dirty_up) *dirty_up = (m & META_DIRTY) != 0;
            invalidateWay(L, set, (uint32_t)w);
        }
        return k;
    }
    ls->miss[idx]++;
    L->tot_miss++;
    if (L->inclusion == KVSIM_EXCLUSIVE && op == OP_READ) {
        ls->fetches++;
        return accessBelow(s, k, line, OP_READ, stag, kind, NULL);
    }
    Victim v;
    uint32_t way = allocWay(s, k, set, inv, &v);
    uint64_t *tp = SET_TAGS(L, set) + way;
    uint8_t *mp = SET_META(L, set) + way;
    *tp = line + 1;
    SET_FP(L, set)[way] = fingerprint(line);
    *mp = (uint8_t)(((op == OP_WRITE || op == OP_WFULL) ? META_DIRTY : 0) |
                    (pfk << META_PF_SHIFT));
    SET_STAG(L, set)[way] = stag;
    L->memo_key = line + 1;
    L->memo_set = set;
    L->memo_way = way;
    if (L->is_lru)
        kvsimLruTouch(&L->pc, (uint32_t)set, way);
    else
        L->pol->on_fill(&L->pc, (uint32_t)set, way);
    if (pfk) ls->pf_issued[pfk - 1]++;
    uint32_t served = k;
    if (op == OP_READ || op == OP_WRITE) {
        int du = 0;
        ls->fetches++;
        served = accessBelow(s, k, line, OP_READ, stag, kind, &du);
        if (du) {
            /* the installed way may have been back-invalidated meanwhile */
            if (*tp == line + 1) *mp |= META_DIRTY;
        }
    }
    sendVictim(s, k, &v);
    return served;
}

/* LRU ranks of a set (<= 16 ways, see policy_lru.h), with the broadcasts done by
 * one byte shuffle: touch way w (ranks above w's drop by one, w gets `top`), and
 * the victim (the way of rank 0 among `wmask`). */
#if defined(__SSE4_2__)
static inline __attribute__((always_inline)) void rankTouch(uint8_t *rk, uint32_t w,
                                                            uint32_t top) {
    const __m128i z = _mm_setzero_si128();
    const __m128i wv = _mm_shuffle_epi8(_mm_cvtsi32_si128((int)w), z);
    __m128i x = _mm_loadu_si128((const __m128i *)rk);
    const __m128i old = _mm_shuffle_epi8(x, wv);
    x = _mm_add_epi8(x, _mm_cmpgt_epi8(x, old));
    const __m128i iota = _mm_setr_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    const __m128i tv = _mm_shuffle_epi8(_mm_cvtsi32_si128((int)top), z);
    x = _mm_blendv_epi8(x, tv, _mm_cmpeq_epi8(iota, wv));
    _mm_storeu_si128((__m128i *)rk, x);
}
static inline __attribute__((always_inline)) uint32_t rankVictim(const uint8_t *rk,
                                                                 uint32_t wmask) {
    const __m128i x = _mm_loadu_si128((const __m128i *)rk);
    return (uint32_t)__builtin_ctz(
        (uint32_t)_mm_movemask_epi8(_mm_cmpeq_epi8(x, _mm_setzero_si128())) & wmask);
}
#else
static inline void rankTouch(uint8_t *rk, uint32_t w, uint32_t top) {
    kvsimLruRankTouch(rk, top + 1, w);
}
static inline uint32_t rankVictim(const uint8_t *rk, uint32_t wmask) {
    for (uint32_t w = 0; wmask >> w; w++)
        if (((wmask >> w) & 1) && rk[w] == 0) return w;
    return 0;
}
#endif

/* The out-of-line entry used for the levels below L1 (the body recurses through
 * it); doMemory inlines the body for the L1 access of every piece. */
static uint32_t cacheAccess(kvsimSim *s, uint32_t k, uint64_t line, int op, uint8_t stag,
                            int kind, uint32_t pfk, int *dirty_up) {
    return cacheAccessBody(s, k, line, op, stag, kind, pfk, dirty_up);
}

/* --- Timing ------------------------------------------------------------------- */

/* Load-to-use ticks when served at level sv (s->n: DRAM), computed at creation. */
static inline uint64_t levelLatency(const kvsimSim *s, uint32_t sv) { return s->lat[sv]; }

/* Earliest-free miss buffer of level j (lowest index on a tie). */
static inline uint32_t poolEarliest(const Level *L) { return L->mq[L->mqhead & L->mqmask]; }

static inline uint32_t mhash(uint64_t line) {
    return (uint32_t)((line * 0x9E3779B97F4A7C15ULL) >> 58);
}

/* The earliest-free buffer of level L now holds `line` until tick `ready`. */
static inline void poolTakeEarliest(Level *L, uint64_t line, uint64_t ready) {
    const uint32_t e = poolEarliest(L), m = L->mshrs, mask = L->mqmask;
    const uint32_t hn = mhash(line);
    L->mcount[L->mhash[e]]--;
    L->mcount[hn]++;
    L->mhash[e] = (uint8_t)hn;
    L->mline[e] = line;
    L->mready[e] = ready;
    /* pop the front, then insert (ready, e) from the back */
    const uint32_t h = ++L->mqhead;
    uint32_t j = m - 1;
    while (j > 0) {
        const uint32_t q = L->mq[(h + j - 1) & mask];
        const uint64_t rq = L->mready[q];
        if (rq < ready || (rq == ready && q < e)) break;
        L->mq[(h + j) & mask] = q;
        j--;
    }
    L->mq[(h + j) & mask] = e;
}

/* 1 if every tracked level in [from, to) has a free miss buffer at tick x. */
static int poolsFree(const kvsimSim *s, uint32_t from, uint32_t to, uint64_t x) {
    for (uint32_t j = from; j < to; j++) {
        const Level *L = &s->lv[j];
        if (L->mshrs && L->mready[poolEarliest(L)] > x) return 0;
    }
    return 1;
}

/* Latest fill-ready tick of `line` in flight at level sv after tick x, or 0. */
static uint64_t inflight(const kvsimSim *s, uint32_t sv, uint64_t line, uint64_t x) {
    if (sv >= s->n) return 0;
    const Level *L = &s->lv[sv];
    if (!L->mshrs || x >= L->mmax_ready || !L->mcount[mhash(line)]) return 0;
    uint64_t r = 0;
    uint32_t i = 0;
#if defined(__SSE4_2__)
    /* usually no buffer holds the line: find that out two entries per compare */
    const __m128i lv = _mm_set1_epi64x((long long)line);
    const uint32_t pairs = L->mshrs & ~1u;
    int any = 0;
    for (uint32_t j = 0; j < pairs; j += 2)
        any |= _mm_movemask_pd(_mm_castsi128_pd(
            _mm_cmpeq_epi64(_mm_loadu_si128((const __m128i *)(L->mline + j)), lv)));
    if (!any) i = pairs; /* only the odd tail is left to check */
#endif
    for (; i < L->mshrs; i++) {
        uint64_t rd = L->mready[i];
        uint64_t c = (L->mline[i] == line && rd > x) ? rd : 0;
        r = c > r ? c : r;
    }
    return r;
}

/*
 * Time one piece that started at level f, was served at level sv and issues at
 * tick x.  Returns its completion tick; *waited is set when it found its line
 * still in flight (for prefetch timeliness).
 */
static inline __attribute__((always_inline)) uint64_t
timeAccessBody(kvsimSim *s, uint64_t line, uint32_t f, uint32_t sv, uint64_t x, uint32_t pfk,
               int *waited) {
    kvsimStats *st = s->st;
    uint64_t lat = levelLatency(s, sv);
    uint64_t rif = inflight(s, sv, line, x);
    *waited = rif > x;
    if (sv == f) {
        uint64_t c = x + lat;
        if (rif > c) {
            st->wait_inflight += rif - c;
            c = rif;
        }
        return c;
    }
    uint64_t start = x;
    uint32_t ent[KVSIM_MAX_LEVELS];
    for (uint32_t j = f; j < sv; j++) {
        Level *L = &s->lv[j];
        if (!L->mshrs) continue;
        ent[j] = poolEarliest(L);
        if (L->mready[ent[j]] > start) start = L->mready[ent[j]];
    }
    st->wait_mshr += start - x;
    uint64_t c;
    if (sv == s->n) {
        uint64_t ds = start > s->dram_free ? start : s->dram_free;
        if (s->cfg.dram_xfer_ticks) {
            st->wait_dram_bw += ds - start;
            s->dram_free = ds + s->cfg.dram_xfer_ticks;
        } else {
            ds = start;
        }
        c = ds + lat;
    } else {
        c = start + lat;
        if (rif > c) {
            st->wait_inflight += rif - c;
            c = rif;
        }
    }
    for (uint32_t j = f; j < sv; j++) {
        Level *L = &s->lv[j];
        if (!L->mshrs) continue;
        poolTakeEarliest(L, line, c);
        L->mpf[ent[j]] = (uint8_t)pfk;
        if (c > L->mmax_ready) L->mmax_ready = c;
    }
    if (f == 0) {
        st->miss_ticks += c - start;
        st->l1_misses_timed++;
    }
    return c;
}

/* The out-of-line copy (prefetches); demand pieces inline the body with f = 0. */
static uint64_t timeAccess(kvsimSim *s, uint64_t line, uint32_t f, uint32_t sv, uint64_t x,
                           uint32_t pfk, int *waited) {
    return timeAccessBody(s, line, f, sv, x, pfk, waited);
}

/* --- Prefetch issue ------------------------------------------------------------ */

static void issueHwPrefetch(kvsimSim *s, uint32_t k, uint64_t line, uint8_t stag, uint64_t x) {
    uint32_t sp = probe(s, k, line);
    kvsimLevelStats *ls = &s->st->level[k];
    if (sp == k) {
        ls->pf_redundant[1]++;
        return;
    }
    if (s->cfg.timing && !poolsFree(s, k, sp, x)) {
        ls->pf_dropped[1]++;
        return;
    }
    uint32_t sv = cacheAccess(s, k, line, OP_READ, stag, KVSIM_K_HWPF, 2, NULL);
    if (s->cfg.timing) {
        int waited;
        timeAccess(s, line, k, sv, x, 2, &waited);
    }
}

static void runPrefetchers(kvsimSim *s, uint64_t line, uint32_t sv, const kvtRecord *r,
                           uint64_t x) {
    uint64_t cand[MAX_DEGREE];
    for (uint32_t p = 0; p < s->cfg.nprefetchers; p++) {
        Prefetcher *P = &s->pf[p];
        uint32_t k = P->cfg.level;
        if (sv < k) continue;
        uint32_t key = ((uint32_t)r->tag << 16) | r->site;
        uint32_t nc = P->ops->operate(P->state, &P->cfg, line, sv == k, key, cand);
        for (uint32_t c = 0; c < nc; c++) issueHwPrefetch(s, k, cand[c], r->tag, x);
    }
}

/* --- Records -------------------------------------------------------------------- */

/* Attribute the accesses and misses since the last call to the current phase of
 * the current statistics: called before either changes, and before reading. */
static void phaseSync(kvsimSim *s) {
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
    s->st = on ? &s->stats : &s->scratch;
    for (uint32_t k = 0; k < s->n; k++) s->lv[k].ls = &s->st->level[k];
}

static void classifyPf(kvsimSim *s, int waited) {
    if (!s->pfh_kind) return;
    kvsimLevelStats *ls = &s->st->level[s->pfh_level];
    if (waited)
        ls->pf_late[s->pfh_kind - 1]++;
    else
        ls->pf_useful[s->pfh_kind - 1]++;
    s->pfh_kind = 0;
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

static void doMarker(kvsimSim *s, const kvtRecord *r) {
    uint16_t m = r->flags;
    if (m == KVT_MARK_WARMUP_BEGIN) setCounting(s, 0);
    kvsimStats *st = s->st;
    if (st != &s->stats) s->stats.warmup_records++;
    st->records++;
    st->kind[KVT_MARKER]++;
    if (m < KVSIM_NMARKERS) st->markers[m]++;
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
        s->t_disp += r->gap;
        s->r_last += r->gap;
        s->dep_ring[s->recno % KVSIM_DEP_WINDOW] = s->t_disp;
        st->ticks += s->r_last - r0;
        st->phase[s->phase].ticks += s->r_last - r0;
    }
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

/* Counters of the current phase that the specialised record loop (s->fast) adds
 * up locally and adds to the statistics before anything can change where they
 * go (a marker) and at the end of each kvsimRun call. */
typedef struct Batch {
    uint64_t records, instructions, kind[KVT_MARKER], pieces, multiline, ticks;
} Batch;

static void flushBatch(kvsimSim *s, Batch *bt) {
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

/* Timing: dispatch of a record of ninstr instructions (s->instr already counts
 * them): D after the ROB limit, X when its producer (dep) has completed. */
static inline __attribute__((always_inline)) void dispatchT(kvsimSim *s, const kvtRecord *r,
                                                            uint64_t ninstr, uint64_t *Dp,
                                                            uint64_t *Xp) {
    kvsimStats *st = s->st;
    uint64_t D, X;
    D = s->t_disp + ninstr;
    if (s->instr > s->cfg.rob) {
        uint64_t lim = s->instr - s->cfg.rob;
        /* retire every entry at or before instruction lim; the last one
         * retired bounds this dispatch */
        uint64_t head = s->rob_head;
        const uint64_t tail = s->rob_tail, mask = s->rob_mask;
        if (head != tail && s->rob_idx[head & mask] <= lim) {
            do
                head++;
            while (head != tail && s->rob_idx[head & mask] <= lim);
            const uint64_t h = (head - 1) & mask;
            s->blk_valid = 1;
            s->blk_idx = s->rob_idx[h];
            s->blk_ret = s->rob_ret[h];
            s->blk_cls = s->rob_cls[h];
            s->rob_head = head;
        }
        if (s->blk_valid) {
            const uint64_t b = s->blk_ret + (lim - s->blk_idx);
            const uint64_t stall = b > D ? b - D : 0; /* no branch to mispredict */
            st->stall_rob[s->blk_cls] += stall;
            D += stall;
        }
    }
    s->t_disp = D;
    X = D;
    if (r->kind != KVT_STORE && r->dep && r->dep < KVSIM_DEP_WINDOW && r->dep <= s->recno) {
        uint64_t c = s->dep_ring[(s->recno - r->dep) % KVSIM_DEP_WINDOW];
        if (c > X) {
            st->wait_dep += c - X;
            X = c;
        }
    }
    *Dp = D;
    *Xp = X;
}

/* Timing: in-order retirement of a record that completes at C (cls: what set
 * it), its ROB entry and its completion for the records that depend on it. */
static inline __attribute__((always_inline)) void retireT(kvsimSim *s, uint64_t ninstr,
                                                          uint64_t C, uint32_t cls,
                                                          const int fast, Batch *bt) {
    kvsimStats *st = s->st;
    uint64_t r0 = s->r_last;
    uint64_t R = s->r_last + ninstr;
    /* the cause of a retire time: this op's own service level if its completion
     * set it, else whatever held up the op before it (in-order retirement) */
    uint8_t cause = C > R ? (uint8_t)cls : s->last_cause;
    s->last_cause = cause;
    if (C > R) R = C;
    uint64_t t = s->rob_tail & s->rob_mask;
    s->rob_idx[t] = s->instr;
    s->rob_ret[t] = R;
    s->rob_cls[t] = cause;
    s->rob_tail++;
    s->r_last = R;
    s->dep_ring[s->recno % KVSIM_DEP_WINDOW] = C;
    if (fast) {
        bt->ticks += R - r0;
    } else {
        st->ticks += R - r0;
        st->phase[s->phase].ticks += R - r0;
    }
}

/* One memory record.  `timing` and `extras` (TLB or hardware prefetchers
 * configured) are compile-time constants in each of the four copies that
 * kvsimRun calls, so the common configurations carry no dead branches. */
static inline __attribute__((always_inline)) void doMemoryT(kvsimSim *s, const kvtRecord *r,
                                                            const int timing, const int extras) {
    kvsimStats *st = s->st;
    const uint64_t W = s->W;
    const uint32_t lb = s->cfg.line_bits;
    const uint64_t ninstr = (uint64_t)r->gap + 1;
    if (st != &s->stats) s->stats.warmup_records++;
    st->records++;
    st->kind[r->kind]++;
    st->instructions += ninstr;
    st->phase[s->phase].records++;
    st->phase[s->phase].instructions += ninstr;
    s->instr += ninstr;

    /* dispatch */
    uint64_t D = 0, X = 0;
    if (timing) dispatchT(s, r, ninstr, &D, &X);
    uint64_t C = D + W;
    uint32_t cls = s->n + 1;

    if (r->kind == KVT_PREFETCH) {
        uint64_t line = r->addr >> lb;
        uint64_t xp = X;
        int ok = 1;
        if (extras && s->cfg.tlb) {
            int64_t t = translate(s, r->addr, 1);
            if (t < 0) {
                st->swpf_dropped_tlb++;
                ok = 0;
            } else if (timing) {
                st->wait_tlb += (uint64_t)t * W;
                xp += (uint64_t)t * W;
            }
        }
        if (ok) {
            uint32_t f = s->cfg.swpf_level;
            uint32_t sp = probe(s, f, line);
            if (sp == f) {
                cacheAccess(s, f, line, OP_READ, r->tag, KVSIM_K_SWPF, 1, NULL);
            } else if (timing && !poolsFree(s, f, sp, xp)) {
                st->level[f].pf_dropped[0]++;
            } else {
                uint32_t sv = cacheAccess(s, f, line, OP_READ, r->tag, KVSIM_K_SWPF, 1, NULL);
                if (timing) {
                    int waited;
                    timeAccess(s, line, f, sv, xp, 1, &waited);
                }
            }
        }
    } else {
        const int is_store = r->kind == KVT_STORE;
        const uint64_t size = r->size ? r->size : 1;
        const uint64_t first = r->addr >> lb, last = (r->addr + size - 1) >> lb;
        const uint64_t lsize = 1ULL << lb;
        if (last != first) {
            st->multiline++;
        }
        uint32_t svmax = 0;
        for (uint64_t line = first; line <= last; line++) {
            st->pieces++;
            const uint64_t a0 = line << lb;
            uint64_t xp = X;
            if (extras && s->cfg.tlb) {
                int64_t t = translate(s, r->addr > a0 ? r->addr : a0, 0);
                if (timing && !is_store) {
                    st->wait_tlb += (uint64_t)t * W;
                    xp += (uint64_t)t * W;
                }
            }
            s->pfh_kind = 0;
            int op = OP_READ;
            if (is_store) { /* a piece covering its whole line allocates without a fetch */
                const uint64_t a1 = a0 + lsize;
                const uint64_t p0 = r->addr > a0 ? r->addr : a0;
                const uint64_t p1 = r->addr + size < a1 ? r->addr + size : a1;
                op = p1 - p0 == lsize ? OP_WFULL : OP_WRITE;
            }
            const uint32_t sv = cacheAccessBody(s, 0, line, op, r->tag,
                                                is_store ? KVSIM_K_STORE : KVSIM_K_LOAD, 0, NULL);
            if (sv > svmax) svmax = sv;
            if (timing && !is_store) {
                int waited = 0;
                uint64_t c = timeAccessBody(s, line, 0, sv, xp, 0, &waited);
                if (c > C) C = c;
                classifyPf(s, waited);
            } else {
                classifyPf(s, 0);
            }
            if (extras && !is_store && s->cfg.nprefetchers) runPrefetchers(s, line, sv, r, xp);
        }
        if (!is_store) {
            cls = svmax;
            if (timing) {
                st->load_latency += C - X;
                st->loads_timed++;
            }
        }
    }

    if (timing) retireT(s, ninstr, C, cls, 0, NULL);
    s->recno++;
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
    uint32_t m = (uint32_t)_mm_movemask_epi8(_mm_cmpeq_epi8(x, _mm_set1_epi8((char)f)));
    return (m & ((1u << L->ways) - 1)) != 0;
#else
    for (uint32_t w = 0; w < L->ways; w++)
        if (fp[w] == f) return 1;
    return 0;
#endif
}

/* --- Public API ------------------------------------------------------------------ */

/*
 * The record loops of the common configuration (s->fast), level by level.
 *
 * In a non-inclusive hierarchy no level's state depends on the levels below it,
 * and level k+1 sees exactly the stream of requests that level k sends down, in
 * order: for each miss at k, the fetch (unless a whole-line store), then k's
 * dirty victim.  (The record-by-record path produces the same stream: its dirty
 * victims go down after the fetch and everything the fetch did, deepest level
 * first.)  So the records become a queue of line requests to L1, and each level
 * takes its whole queue in order and appends its misses and victims to the next
 * level's queue:
 *
 *     records --> q[0] --L1--> q[1] --L2--> q[2] --L3--> DRAM counters
 *                  |  (timing: each piece's serving level and prefetch hit)
 *                  +--> timing pass over the same records, in order
 *
 * The same states and counts as the record-by-record path, with each level's
 * parameters in registers for a whole queue, and a look-ahead that knows
 * exactly which sets a level will touch: it prefetches (into the host caches)
 * the set block of the request LOOKAHEAD entries ahead.  With timing, the
 * queued pieces carry their index (pid) so that the level that serves each one,
 * and a first demand hit on a prefetched line, are noted for the timing pass,
 * which then runs the records through the out-of-order model in order (timing
 * never changes the caches in this configuration: only software prefetches,
 * which take the general path, can be dropped for want of a miss buffer).  The
 * queues are drained before anything else touches the caches or changes where
 * counts go: a marker, a software prefetch, a full queue, the end of the call.
 */
#define QCAP 256
#ifndef LOOKAHEAD
#define LOOKAHEAD 8
#endif
#define NOPID 0xFFFFFFFFu
_Static_assert(QCAP <= sizeof(((kvsimSim *)0)->psv), "a piece index per queued piece");
_Static_assert(QCAP < NOPID, "piece ids fit");

static void levelPass(kvsimSim *s, uint32_t k);

/* Level k takes its whole queue (requests from above, in order).  `pf`: prefetch
 * the set blocks ahead (not for L1, whose blocks stay in the host caches);
 * `last`: the level below is memory; `track`: note each piece's serving level
 * and prefetch hit (timing).  All three are constants in each copy. */
static inline __attribute__((always_inline)) void levelPassT(kvsimSim *s, uint32_t k,
                                                             const int pf, const int last,
                                                             const int track, const int l1) {
    Level *const L = &s->lv[k];
    const QEnt *const in = s->q[k];
    const uint32_t nin = s->qn[k];
    QEnt *const out = last ? NULL : s->q[k + 1];
    uint32_t nout = last ? 0 : s->qn[k + 1];
    uint8_t *const blk = L->blk;
    const uint64_t mask = L->set_mask, stride = L->stride;
    const uint32_t ways = L->ways, wmask = L->wmask;
    const uint32_t nlines = L->nlines;
    kvsimLevelStats *const ls = L->ls;
    uint64_t nmiss = 0, dram_r = 0, dram_w = 0;
    int clear_memo = 0;
    for (uint32_t j = 0; j < nin; j++) {
        if (pf && j + LOOKAHEAD < nin) {
            const uint8_t *pb = blk + (in[j + LOOKAHEAD].line & mask) * stride;
            __builtin_prefetch(pb, 1, 3);
            __builtin_prefetch(pb + 64, 1, 3);
            for (uint32_t h = 2; h < nlines; h++) __builtin_prefetch(pb + 64 * h, 1, 3);
        }
        const QEnt e = in[j];
        const uint64_t line = e.line;
        const uint32_t idx = (uint32_t)e.stag * KVSIM_NKINDS + e.kind;
        ls->access[idx]++;
        uint8_t *const b = blk + (line & mask) * stride;
        const uint8_t f = fingerprint(line);
        uint64_t *const tg = (uint64_t *)(b + RK_TAGS);
        uint32_t cand, empty;
#if defined(__SSE4_2__)
        const __m128i x = _mm_loadu_si128((const __m128i *)b);
        const __m128i fv = _mm_shuffle_epi8(_mm_cvtsi32_si128(f), _mm_setzero_si128());
        cand = (uint32_t)_mm_movemask_epi8(_mm_cmpeq_epi8(x, fv)) & wmask;
        empty = (uint32_t)_mm_movemask_epi8(_mm_cmpeq_epi8(x, _mm_setzero_si128())) & wmask;
#else
        cand = empty = 0;
        for (uint32_t w = 0; w < ways; w++) {
            cand |= (uint32_t)(b[w] == f) << w;
            empty |= (uint32_t)(b[w] == 0) << w;
        }
#endif
        while (cand) {
            const uint32_t w = (uint32_t)__builtin_ctz(cand);
            if (tg[w] == line + 1) break;
            cand &= cand - 1;
        }
        if (cand) { /* hit: LRU, the first demand use of a prefetched line, dirty */
            const uint32_t hw = (uint32_t)__builtin_ctz(cand);
            rankTouch(b + RK_RANK, hw, ways - 1);
            uint8_t m = b[RK_META + hw];
            if (l1 && e.swpf) ls->pf_redundant[0]++;
            if (track && e.pid != NOPID) s->psv[e.pid] = (uint8_t)k;
            if (__builtin_expect((m & META_PF_MASK) != 0, 0) && e.kind <= KVSIM_K_STORE) {
                const uint32_t pfk = (m & META_PF_MASK) >> META_PF_SHIFT;
                if (track) { /* useful or late: the timing pass decides */
                    s->ppfk[e.pid] = (uint8_t)pfk;
                    s->ppfl[e.pid] = (uint8_t)k;
                } else {
                    ls->pf_useful[pfk - 1]++;
                }
                m &= (uint8_t)~META_PF_MASK;
            }
            b[RK_META + hw] = (uint8_t)(m | (e.op != OP_READ));
            continue;
        }
        /* miss: the lowest free way, else the LRU victim; install; send below */
        ls->miss[idx]++;
        nmiss++;
        uint8_t *const meta = b + RK_META;
        uint8_t *const stg = b + RK_STAG;
        uint32_t way;
        uint64_t vline = 0;
        uint8_t vstag = 0;
        int vdirty = 0;
        if (empty) {
            way = (uint32_t)__builtin_ctz(empty);
        } else {
            way = rankVictim(b + RK_RANK, wmask);
            const uint8_t vm = meta[way];
            ls->evictions++;
            clear_memo = 1;
            if (__builtin_expect(vm != 0, 0)) {
                const uint32_t pfk = (vm & META_PF_MASK) >> META_PF_SHIFT;
                if (pfk) ls->pf_useless[pfk - 1]++;
                if (vm & META_DIRTY) {
                    vdirty = 1;
                    vline = tg[way] - 1;
                    vstag = stg[way];
                }
            }
        }
        tg[way] = line + 1;
        b[way] = f;
        meta[way] = (uint8_t)(e.op != OP_READ);
        if (l1 && e.swpf) { /* an unused software prefetch until a demand hits it */
            meta[way] = 1u << META_PF_SHIFT;
            ls->pf_issued[0]++;
        }
        stg[way] = e.stag;
        rankTouch(b + RK_RANK, way, ways - 1);
        if (e.op != OP_WFULL) {
            ls->fetches++;
            if (last) {
                dram_r++;
                if (track && e.pid != NOPID) s->psv[e.pid] = (uint8_t)s->n;
            } else {
                QEnt *o = &out[nout++];
                *o = e;
                o->op = OP_READ;
                o->swpf = 0;
            }
        } else if (track && e.pid != NOPID) {
            s->psv[e.pid] = (uint8_t)k; /* allocated without a fetch */
        }
        if (vdirty) {
            ls->writebacks++;
            if (last) {
                dram_w++;
            } else {
                QEnt *o = &out[nout++];
                o->line = vline;
                o->pid = NOPID;
                o->swpf = 0;
                o->op = OP_WFULL;
                o->kind = KVSIM_K_WRITEBACK;
                o->stag = vstag;
            }
        }
        if (!last && nout > s->qcap - 2) { /* room for two more: the level below goes first */
            s->qn[k + 1] = nout;
            levelPass(s, k + 1);
            nout = 0;
        }
    }
    if (!last) s->qn[k + 1] = nout;
    L->tot_acc += nin;
    L->tot_miss += nmiss;
    s->st->dram_reads += dram_r;
    s->st->dram_writes += dram_w;
    if (clear_memo) L->memo_key = 0; /* the general path's memo may name a replaced way */
    s->qn[k] = 0;
}

#define LEVEL_PASS_COPY(name, pf, last, track)                                               \
    static __attribute__((noinline)) void name(kvsimSim *s, uint32_t k) {                    \
        levelPassT(s, k, pf, last, track, !(pf));                                            \
    }
LEVEL_PASS_COPY(passL1, 0, 0, 0)
LEVEL_PASS_COPY(passL1Only, 0, 1, 0)
LEVEL_PASS_COPY(passMid, 1, 0, 0)
LEVEL_PASS_COPY(passLast, 1, 1, 0)
LEVEL_PASS_COPY(passL1Track, 0, 0, 1)
LEVEL_PASS_COPY(passL1OnlyTrack, 0, 1, 1)
LEVEL_PASS_COPY(passMidTrack, 1, 0, 1)
LEVEL_PASS_COPY(passLastTrack, 1, 1, 1)

static void levelPass(kvsimSim *s, uint32_t k) {
    const int last = k + 1 == s->n;
    if (s->cfg.timing) {
        if (k == 0)
            last ? passL1OnlyTrack(s, 0) : passL1Track(s, 0);
        else
            last ? passLastTrack(s, k) : passMidTrack(s, k);
    } else {
        if (k == 0)
            last ? passL1Only(s, 0) : passL1(s, 0);
        else
            last ? passLast(s, k) : passMid(s, k);
    }
}

/* Every queued request goes all the way down. */
static void drainQueues(kvsimSim *s) {
    for (uint32_t k = 0; k < s->n; k++)
        if (s->qn[k]) levelPass(s, k);
}

/* Queue one line piece at L1 (pid: its index in q[0], for the timing pass). */
static inline __attribute__((always_inline)) void queuePiece(kvsimSim *s, uint64_t line, int op,
                                                             uint8_t kind, uint8_t stag) {
    const uint32_t n0 = s->qn[0];
    QEnt *e = &s->q[0][n0];
    e->line = line;
    e->pid = n0;
    e->op = (uint8_t)op;
    e->kind = kind;
    e->stag = stag;
    e->swpf = 0;
    s->qn[0] = n0 + 1;
}

/* The operation of the piece of record r in `line` (loads read; a store piece
 * covering its whole line allocates without a fetch). */
static inline int pieceOp(const kvtRecord *r, uint64_t line, uint32_t lb, uint64_t size) {
    if (r->kind != KVT_STORE) return OP_READ;
    const uint64_t a0 = line << lb, a1 = a0 + (1ULL << lb);
    const uint64_t p0 = r->addr > a0 ? r->addr : a0;
    const uint64_t p1 = r->addr + size < a1 ? r->addr + size : a1;
    return p1 - p0 == (1ULL << lb) ? OP_WFULL : OP_WRITE;
}

/* Functional: one load or store record's pieces join L1's queue. */
static inline __attribute__((always_inline)) void queueRecord(kvsimSim *s, const kvtRecord *r,
                                                              Batch *bt) {
    const uint32_t lb = s->cfg.line_bits;
    const uint64_t ninstr = (uint64_t)r->gap + 1;
    bt->records++;
    bt->kind[r->kind]++;
    bt->instructions += ninstr;
    s->instr += ninstr;
    s->recno++;
    const int is_store = r->kind == KVT_STORE;
    const uint8_t kind = is_store ? KVSIM_K_STORE : KVSIM_K_LOAD;
    const uint64_t size = r->size ? r->size : 1;
    const uint64_t first = r->addr >> lb, last = (r->addr + size - 1) >> lb;
    bt->pieces++;
    if (__builtin_expect(first == last, 1)) { /* one line: a whole-line store is aligned */
        queuePiece(s, first, !is_store ? OP_READ : size == (1ULL << lb) ? OP_WFULL : OP_WRITE,
                   kind, r->tag);
        if (s->qn[0] == s->qcap) levelPass(s, 0);
        return;
    }
    bt->multiline++;
    bt->pieces += last - first;
    for (uint64_t line = first; line <= last; line++) {
        queuePiece(s, line, pieceOp(r, line, lb, size), kind, r->tag);
        if (s->qn[0] == s->qcap) levelPass(s, 0);
    }
}

static void runFastFunctional(kvsimSim *s, const kvtRecord *recs, size_t n) {
    Batch bt;
    memset(&bt, 0, sizeof bt);
    for (size_t i = 0; i < n; i++) {
        const kvtRecord *r = &recs[i];
        if (r->kind <= KVT_STORE) {
            queueRecord(s, r, &bt);
            continue;
        }
        if (r->kind == KVT_PREFETCH && s->cfg.swpf_level == 0) {
            /* functionally an L1 access that marks what it installs (doMemoryT) */
            const uint64_t ninstr = (uint64_t)r->gap + 1;
            bt.records++;
            bt.kind[KVT_PREFETCH]++;
            bt.instructions += ninstr;
            s->instr += ninstr;
            s->recno++;
            queuePiece(s, r->addr >> s->cfg.line_bits, OP_READ, KVSIM_K_SWPF, r->tag);
            s->q[0][s->qn[0] - 1].swpf = 1;
            if (s->qn[0] == s->qcap) levelPass(s, 0);
            continue;
        }
        drainQueues(s); /* every level catches up first */
        if (r->kind == KVT_PREFETCH) {
            doMemoryT(s, r, 0, 0); /* the general path: same set layout */
        } else if (r->kind == KVT_MARKER) {
            flushBatch(s, &bt); /* a marker may switch the phase or the counting */
            doMarker(s, r);
        } else { /* unknown kind: counted as a record, otherwise ignored */
            s->st->records++;
            s->recno++;
        }
    }
    drainQueues(s);
    flushBatch(s, &bt);
}

/* Timing: the records [a, b) whose pieces are q[0]'s pids 0.. in order, after the
 * caches have served them (drainQueues), through the out-of-order model: the
 * same steps as doMemoryT with the serving levels looked up. */
static void timePieces(kvsimSim *s, const kvtRecord *recs, size_t a, size_t b, Batch *bt) {
    const uint32_t lb = s->cfg.line_bits;
    uint32_t pid = 0;
    for (size_t i = a; i < b; i++) {
        const kvtRecord *r = &recs[i];
        const uint64_t ninstr = (uint64_t)r->gap + 1;
        bt->records++;
        bt->kind[r->kind]++;
        bt->instructions += ninstr;
        s->instr += ninstr;
        uint64_t D, X;
        dispatchT(s, r, ninstr, &D, &X);
        uint64_t C = D + s->W;
        uint32_t cls = s->n + 1;
        const int is_store = r->kind == KVT_STORE;
        const uint64_t size = r->size ? r->size : 1;
        const uint64_t first = r->addr >> lb, last = (r->addr + size - 1) >> lb;
        bt->multiline += last != first;
        bt->pieces += last - first + 1;
        uint32_t svmax = 0;
        for (uint64_t line = first; line <= last; line++, pid++) {
            const uint32_t sv = s->psv[pid];
            if (sv > svmax) svmax = sv;
            s->pfh_kind = s->ppfk[pid];
            s->pfh_level = s->ppfl[pid];
            s->ppfk[pid] = 0;
            int waited = 0;
            if (!is_store) {
                const uint64_t c = timeAccessBody(s, line, 0, sv, X, 0, &waited);
                if (c > C) C = c;
            }
            classifyPf(s, waited);
        }
        if (!is_store) {
            cls = svmax;
            s->st->load_latency += C - X;
            s->st->loads_timed++;
        }
        retireT(s, ninstr, C, cls, 1, bt);
        s->recno++;
    }
}

static void runFastTiming(kvsimSim *s, const kvtRecord *recs, size_t n) {
    const uint32_t lb = s->cfg.line_bits;
    Batch bt;
    memset(&bt, 0, sizeof bt);
    size_t a = 0; /* the first record whose pieces are queued */
    for (size_t i = 0; i < n; i++) {
        const kvtRecord *r = &recs[i];
        if (r->kind <= KVT_STORE) {
            const uint64_t size = r->size ? r->size : 1;
            const uint64_t first = r->addr >> lb, last = (r->addr + size - 1) >> lb;
            if (last - first < s->qcap) {
                if (s->qn[0] + (last - first + 1) > s->qcap) { /* full: serve and time */
                    drainQueues(s);
                    timePieces(s, recs, a, i, &bt);
                    a = i;
                }
                const uint8_t kind = r->kind == KVT_STORE ? KVSIM_K_STORE : KVSIM_K_LOAD;
                for (uint64_t line = first; line <= last; line++)
                    queuePiece(s, line, pieceOp(r, line, lb, size), kind, r->tag);
                continue;
            }
        }
        drainQueues(s); /* every level catches up, and the time, first */
        timePieces(s, recs, a, i, &bt);
        a = i + 1;
        if (r->kind <= KVT_PREFETCH) { /* a software prefetch or a huge access */
            doMemoryT(s, r, 1, 0); /* the general path: same set layout */
        } else if (r->kind == KVT_MARKER) {
            flushBatch(s, &bt); /* a marker may switch the phase or the counting */
            doMarker(s, r);
        } else { /* unknown kind: counted as a record, otherwise ignored */
            s->st->records++;
            s->recno++;
        }
    }
    drainQueues(s);
    timePieces(s, recs, a, n, &bt);
    flushBatch(s, &bt);
}

/* The record-by-record loop, one copy per (timing, extras) combination (both are
 * compile-time constants in each copy, so the common cases carry no dead
 * branches and keep the engine's fields in registers). */
static inline __attribute__((always_inline)) void runLoop(kvsimSim *s, const kvtRecord *recs,
                                                          size_t n, const int timing,
                                                          const int extras) {
    const uint32_t lb = s->cfg.line_bits;
    const uint32_t nl = s->n;
    for (size_t i = 0; i < n; i++) {
        /* Look ahead: prefetch the simulated sets (one block per level below L1,
         * which stays in the host caches anyway) that the record
         * PREFETCH_DISTANCE ahead will touch.  Written inline on purpose: in a
         * helper function GCC's pure/const analysis deletes calls whose only
         * effect is a prefetch. */
        if (i + PREFETCH_DISTANCE < n) {
            const kvtRecord *q = &recs[i + PREFETCH_DISTANCE];
            const uint64_t la = q->addr >> lb;
            if (q->kind != KVT_MARKER && nl > 1 && !likelyInL1(s, la)) {
                for (uint32_t k = PF_FIRST_LEVEL; k < nl; k++) {
                    const Level *L = &s->lv[k];
                    const uint8_t *b = L->blk + (la & L->set_mask) * L->stride;
                    __builtin_prefetch(b, 1, 3);
                    if (L->nlines > 1) __builtin_prefetch(b + 64, 1, 3);
                    if (L->nlines > 2) __builtin_prefetch(b + 128, 1, 3);
                    for (uint32_t j = 3; j < L->nlines; j++) __builtin_prefetch(b + 64 * j, 1, 3);
                }
            }
        }
        const kvtRecord *r = &recs[i];
        if (r->kind < KVT_MARKER) {
            doMemoryT(s, r, timing, extras);
        } else if (r->kind == KVT_MARKER) {
            doMarker(s, r);
        } else { /* unknown kind: counted as a record, otherwise ignored */
            s->st->records++;
            s->recno++;
        }
    }
}

void kvsimRun(kvsimSim *s, const kvtRecord *recs, size_t n) {
    if (s->finished) return;
    const int extras = s->cfg.tlb || s->cfg.nprefetchers;
    if (s->cfg.timing) {
        if (extras)
            runLoop(s, recs, n, 1, 1);
        else if (s->fast)
            runFastTiming(s, recs, n);
        else
            runLoop(s, recs, n, 1, 0);
    } else {
        if (extras)
            runLoop(s, recs, n, 0, 1);
        else if (s->fast)
            runFastFunctional(s, recs, n);
        else
            runLoop(s, recs, n, 0, 0);
    }
}

void kvsimFinish(kvsimSim *s) {
    if (s->finished) return;
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
                if (L->roff) {
                    /* LRU ranks: the ages are distinct, oldest = rank 0 */
                    const uint8_t *rk = SET_BASE(L, set) + L->roff;
                    for (uint32_t w = 0; w < nw; w++) order[rk[w]] = w;
                    for (uint32_t q = 0; q < nw; q++) {
                        uint64_t *tp = SET_TAGS(L, set) + order[q];
                        uint8_t *mp = SET_META(L, set) + order[q];
                        if (*tp == 0 || !(*mp & META_DIRTY)) continue;
                        *mp &= (uint8_t)~META_DIRTY;
                        st->level[k].writebacks++;
                        st->level[k].writebacks_flush++;
                        cacheAccess(s, k + 1, *tp - 1, OP_WFULL, SET_STAG(L, set)[order[q]],
                                    KVSIM_K_WRITEBACK, 0, NULL);
                    }
                    continue;
                }
                uint32_t *ord = nw <= 256 ? order : malloc(nw * sizeof(uint32_t));
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
                for (uint32_t q = 0; q < nw; q++) {
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
    kvsimSim *s = (kvsimSim *)cs; /* derived fields only: logically const */
    phaseSync(s);
    for (uint32_t k = 0; k < s->n; k++) {
        kvsimLevelStats *ls = &s->stats.level[k];
        for (size_t i = 0; i < KVSIM_NTAGS * KVSIM_NKINDS; i++)
            ls->hit[i] = ls->access[i] - ls->miss[i];
    }
    return &s->stats;
}

uint32_t kvsimPeekSet(const kvsimSim *s, uint32_t level, uint64_t set, uint64_t *out) {
    if (level >= s->n || set >= s->lv[level].sets) return 0;
    const Level *L = &s->lv[level];
    memcpy(out, SET_TAGS(L, set), L->ways * sizeof(uint64_t));
    return L->ways;
}
size_t kvsimStatsSize(void) { return sizeof(kvsimStats); }
size_t kvsimConfigSize(void) { return sizeof(kvsimConfig); }

void kvsimFree(kvsimSim *s) {
    if (s == NULL) return;
    for (uint32_t k = 0; k < KVSIM_MAX_LEVELS; k++) {
        Level *L = &s->lv[k];
        free(L->blk);
        free(L->pc.set);
        free(L->mline);
        free(L->mready);
        free(L->mpf);
        free(L->mhash);
        free(L->mq);
    }
    for (uint32_t p = 0; p < KVSIM_MAX_PREFETCHERS; p++) free(s->pf[p].state);
    for (uint32_t k = 0; k < KVSIM_MAX_LEVELS; k++) free(s->q[k]);
    free(s->dtlb.tags);
    free(s->dtlb.stamp);
    free(s->stlb.tags);
    free(s->stlb.stamp);
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
    s->W = cfg->width ? cfg->width : 1;
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
        L->wmask = c->ways >= 32 ? ~0u : (1u << c->ways) - 1;
        L->ls = &s->stats.level[k];
        L->fpw = (c->ways + 15) & ~15u;
        if (L->is_lru && c->ways <= KVSIM_LRU_RANK_MAX_WAYS) {
            /* the fixed layout of RK_*: no per-line policy words */
            L->roff = RK_RANK;
            L->soff = RK_STAG;
            L->hdr = RK_TAGS;
            L->stride = (L->hdr + (uint64_t)c->ways * 8 + 63) & ~(uint64_t)63;
        } else {
            L->soff = L->fpw + c->ways;
            L->hdr = (L->fpw + 2 * c->ways + 7) & ~7u;
            L->stride = (L->hdr + (uint64_t)c->ways * 16 + 63) & ~(uint64_t)63;
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
        L->mpf = xcalloc(c->mshrs, 1);
        L->mhash = xcalloc(c->mshrs, 1);
        L->mq = xcalloc(ring, sizeof(uint32_t));
        if (!L->blk || !L->pc.set || !L->mline || !L->mready || !L->mpf || !L->mhash || !L->mq)
            FAIL("out of memory for cache[%u]", k);
        for (uint32_t i = 0; i < c->mshrs; i++) L->mq[i] = i; /* all free at 0 */
        L->mcount[mhash(0)] = c->mshrs;
        for (uint32_t i = 0; i < c->mshrs; i++) L->mhash[i] = (uint8_t)mhash(0);
        if (L->pol->on_init)
            for (uint64_t set = 0; set < c->sets; set++) L->pol->on_init(&L->pc, (uint32_t)set);
    }
    for (uint32_t k = 0; k < s->n; k++) s->lat[k] = (uint64_t)s->lv[k].latency * s->W;
    s->lat[s->n] = (uint64_t)cfg->dram_latency * s->W;
    s->fast = !cfg->tlb && cfg->nprefetchers == 0;
    for (uint32_t k = 0; k < s->n; k++)
        if (!s->lv[k].roff || s->lv[k].inclusion != KVSIM_NON_INCLUSIVE) s->fast = 0;
    if (cfg->queue_cap && (cfg->queue_cap < 2 || cfg->queue_cap > QCAP))
        FAIL("queue_cap: must be 2..%d (0 = default)", QCAP);
    s->qcap = cfg->queue_cap ? cfg->queue_cap : QCAP;
    for (uint32_t k = 0; s->fast && k < s->n; k++)
        if (!(s->q[k] = calloc(QCAP, sizeof(QEnt)))) FAIL("out of memory");
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
        s->pf[p].cfg = *c;
        s->pf[p].state = xcalloc(s->pf[p].ops->state_words(c), sizeof(uint64_t));
        if (!s->pf[p].state) FAIL("out of memory");
    }
    if (cfg->swpf_level >= s->n) FAIL("swprefetch.fill: no such cache level");
    if (s->lv[cfg->swpf_level].inclusion == KVSIM_EXCLUSIVE)
        FAIL("swprefetch.fill: cannot prefetch into an exclusive level");
    if (cfg->tlb) {
        if (!isPow2(cfg->dtlb_sets) || cfg->dtlb_ways < 1) FAIL("tlb: bad L1 DTLB geometry");
        if (cfg->stlb_sets && (!isPow2(cfg->stlb_sets) || cfg->stlb_ways < 1))
            FAIL("tlb: bad STLB geometry");
        if (!tlbInit(&s->dtlb, cfg->dtlb_sets, cfg->dtlb_ways)) FAIL("out of memory");
        if (cfg->stlb_sets && !tlbInit(&s->stlb, cfg->stlb_sets, cfg->stlb_ways))
            FAIL("out of memory");
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
    }
    return s;
}
