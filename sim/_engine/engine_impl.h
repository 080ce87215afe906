/*
 * engine_impl.h -- the engine's internals, shared by its two record paths:
 *
 *   engine.c   the API, the record-by-record path (any configuration: every
 *              policy, inclusion mode, TLB, hardware prefetchers), markers,
 *              the end-of-run flush
 *   levels.c   the level-by-level path of the common configuration (s->fast)
 *   timing.h   the out-of-order timing model's inline building blocks
 *
 * Here: the types, the set-block layout, and the small inline helpers both
 * paths use.  Internal functions called across files take the prefix `eng`;
 * everything else internal stays static.  Not part of the public API
 * (engine.h), and not seen by the Python binding.  The engine's terms (piece,
 * segment, part, share, queue, carry, settle, marker...) are defined once, in
 * the glossary at the top of engine.c.
 */
#ifndef KVSIM_ENGINE_IMPL_H
#define KVSIM_ENGINE_IMPL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#if defined(__SSE4_2__)
#include <nmmintrin.h>
#endif

#include "engine.h"
#include "placement.h"
#include "policy.h"
#include "policy_lru.h"
#include "prefetch.h"

#define META_DIRTY 1u    /* meta byte: the line is dirty */
#define META_PF_SHIFT 1  /* meta byte, bits 1-2: an unused prefetched line's */
#define META_PF_MASK 6u  /* prefetch, 1 software, 2 hardware (0: none, or used) */
#define META_PENDING 8u  /* meta byte: an L2 line fetched from an exclusive last level
                            on its own thread, whose dirty bit is the thread's (lower.c) */
#define MAX_DEGREE 16    /* lines one hardware prefetcher may issue per access */

/* Slots of the DRAM channel's calendar (timing.h dramSlot): 4096 slots of one
 * line's transfer each, some tens of thousands of cycles at the presets' rates. */
#define KVSIM_DRAM_SLOTS 4096
_Static_assert(KVSIM_DRAM_SLOTS % 64 == 0, "whole words of slots");

enum { OP_READ = 0, OP_WRITE = 1, OP_WFULL = 2, OP_VICTIM = 3 };

/* --- Types ---------------------------------------------------------------- */

typedef struct Level {
    /* hot: what every access reads, first */
    uint8_t *blk;    /* sets blocks of `stride` bytes, see SET_TAGS */
    uint64_t set_mask; /* sets - 1: the set of a line is line & set_mask */
    uint64_t stride; /* bytes per set block, a multiple of 64 */
    uint32_t ways, wmask; /* wmask: one bit per way (ways <= 32) */
    uint32_t hdr;    /* bytes before the tags: fingerprints, meta, stag, padding */
    uint32_t roff;   /* LRU ranks: their offset (RK_RANK up to 16 ways; after the tags up
                      * to 32), else 0 */
    uint32_t soff;   /* offset of the structure tags in the set block */
    kvsimLevelStats *ls; /* this level's counters in s->st (follows warm-up switches) */
    /* every access and miss here, warm-up included; the phase statistics get the
     * difference since ph_acc / ph_miss whenever the phase or the counting changes
     * (phaseSync), so the per-access path increments one local word each */
    uint64_t tot_acc, tot_miss, ph_acc, ph_miss;
    uint32_t nlines; /* host cache lines per set block */
    uint32_t sets, latency, inclusion, mshrs; /* latency in cycles; mshrs: miss buffers */
    uint32_t fpw;    /* fingerprint bytes per block: ways rounded up to 16 */
    const kvsimPolicyOps *pol; /* the replacement policy */
    kvsimPolicyCtx pc;         /* and its state (policy.h) */
    uint64_t *mline;  /* miss buffers: line, fill-ready tick, and an 8-bit hash of the */
    uint64_t *mready; /* line (timing.h's mhash), compared 16 per SSE instruction */
    uint8_t *mhash;
    /* the buffers sorted by (ready tick, index), a ring of mshrs entries starting at
     * mq[mqhead & mqmask]: the front is the earliest-free buffer (the lowest index
     * on a tie).  Only the front is ever taken; its new ready tick is usually the
     * latest, so it goes back in at the end after one comparison. */
    uint32_t *mq;
    uint32_t mqhead, mqmask; /* mqhead counts up, wrapped by mqmask (ring size - 1) */
    /* memo of the last line found or installed here (key = line + 1, 0 = none):
     * repeated accesses to one line skip the set scan */
    uint64_t memo_key, memo_set; /* memo_set: the line's set */
    uint32_t memo_way;           /* and way */
    int is_lru; /* devirtualised LRU updates (policy_lru.h) */
    int shape;  /* SHAPE_*: which copy of the record-by-record access path (engine.c) */
    /* that copy (engine.c cacheAccess calls it: one indirect call, no dispatch);
     * for the L2 of three levels, possibly one with the last level compiled in */
    uint32_t (*access)(kvsimSim *s, uint32_t k, uint64_t line, int op, uint8_t stag, int kind,
                       uint32_t pfk, int *dirty_up);
    /* the last level on its own thread (lower.c): where that thread's counts go */
    kvsimStats *wst;
} __attribute__((aligned(64))) Level; /* own host lines: lower.c's thread has lv[last] */

/* Level shapes: LRU with recency ranks (<= 16 ways, the RK_* layout) or with
 * ranks after the tags (17 to 32 ways, "wide"), each with each inclusion mode, or any
 * other level. */
enum {
    SHAPE_ANY,
    SHAPE_RANK_NONINCL,
    SHAPE_RANK_INCL,
    SHAPE_RANK_EXCL,
    SHAPE_WIDE_NONINCL,
    SHAPE_WIDE_INCL,
    SHAPE_WIDE_EXCL
};

typedef struct Tlb {
    uint32_t sets, ways;
    uint32_t fpw;    /* fingerprint bytes per set: ways rounded up to 16 */
    uint8_t *fp;     /* sets x fpw: fingerprint(page) of each valid entry, 0 = invalid:
                        a lookup compares 16 entries per SSE instruction, as the caches do */
    uint64_t *tags;  /* sets x ways: page + 1, 0 = invalid */
    /* LRU order.  Sets of 2..TLB_RANK_MAX_WAYS ways keep recency ranks (rk, sets x
     * fpw signed bytes: 0 = least recent, -1 = invalid or padding), updated and
     * searched 16 entries per SSE instruction; other sets keep stamps
     * (stamp, sets x ways: clock at the last use, rk NULL).  Both give the same
     * order: the least recent entry has rank 0, or the smallest stamp. */
    int8_t *rk;
    uint64_t *stamp;
    uint64_t clock;  /* counts lookups that hit and fills (stamps) */
    /* memo of the entry last hit or filled (key = page + 1, 0 = none; its set and
     * way): repeated lookups of one page skip the set scan, and the LRU update, as
     * the entry touched last is the most recent of its set already.  Entries change
     * only by a fill, which resets the memo, so it never names a stale entry. */
    uint64_t memo_key, memo_set;
    uint32_t memo_way;
    uint64_t misses; /* lookups that missed (engTlbCode; the TLB thread's choice, tlb.c) */
} Tlb;
#define TLB_RANK_MAX_WAYS 127 /* ranks fit a signed byte */

typedef struct Prefetcher {
    /* hot: what runPrefetchers reads for every demand load piece, first */
    uint32_t (*operate)(uint64_t *state, const kvsimPrefetcherConfig *cfg, uint64_t line,
                        int hit, uint32_t key, uint64_t *out); /* ops->operate */
    uint64_t *state; /* the kind's table, state_words(cfg) words */
    uint32_t level;  /* cfg.level */
    /* the least serving level of a piece that trains it: its level, or the one
     * below for a kind that trains on misses only (ops->hits_idle, without hits) */
    uint32_t from;
    /* cfg.flags & KVSIM_PF_HITS: a request that hits its level trains it as a miss */
    uint32_t hits;
    const kvsimPrefetcherOps *ops; /* the kind's functions (prefetch.h) */
    kvsimPrefetcherConfig cfg;
} Prefetcher;

/* A line request to one level, for the level-by-level functional path. */
typedef struct QEnt {
    uint64_t line; /* line number (address >> line bits) */
    uint32_t pid;  /* the piece's index in its segment (NOPID: a write-back) */
    uint8_t op;    /* OP_READ, OP_WRITE, OP_WFULL or OP_VICTIM */
    uint8_t kind;  /* KVSIM_K_*: load, store, software prefetch */
    uint8_t stag;  /* the record's structure tag (kvtRecord.tag) */
    uint8_t fp;    /* fingerprint(line): L1 computes it for the levels below */
} QEnt;

/*
 * A part: one thread's portion of the level-by-level work (levels.c,
 * segments.c, workers.c; the glossary in engine.c).  A segment of records is
 * divided between the parts by the sets its pieces map to: part `id` takes the
 * pieces whose line has ptab[line & pmask] == id (or every piece: `all`),
 * scanning the records itself (timing) or from the share the calling thread
 * cut for it (functional; ptab may change between segments).  The
 * index bits under pmask are part of every level's set index, so each set of
 * every level is fed by one part only, and in trace order: the parts never share
 * a set, and the states and counts are those of one thread (the order between
 * sets does not matter).  A part has its own request queues and totals; a
 * worker's per-tag counters go to `own`, added to the statistics when the
 * workers are idle (engMergeParts).
 */
/* A marker inside a functional segment: replayed once its parts are done */
typedef struct SegMarker {
    kvtRecord r;  /* the marker */
    uint32_t pos; /* pieces of the segment before it */
} SegMarker;

typedef struct __attribute__((aligned(64))) Part { /* one thread's: no shared host line */
    uint32_t id;                   /* the value of ptab[] that selects this part's sets */
    QEnt *q[KVSIM_MAX_LEVELS];     /* the request queue of each level, QCAP entries */
    uint32_t qn[KVSIM_MAX_LEVELS]; /* and its length */
    kvsimLevelStats *ls[KVSIM_MAX_LEVELS]; /* where the per-tag counters go */
    kvsimLevelStats *own;                  /* a worker's counters (nlevels), or NULL */
    int own_dirty;                         /* own holds counts not yet merged */
    /* since the last collect (segments.c): accesses and misses per level, DRAM
     * reads and writes, and the levels that replaced a line (bit k) */
    uint64_t acc[KVSIM_MAX_LEVELS], miss[KVSIM_MAX_LEVELS], dram_r, dram_w;
    uint32_t evicted;
    /* the job: records [a, b) of recs, every piece or this part's; the notes
     * of each piece (by its index in the segment) for the timing pass */
    const kvtRecord *recs;
    size_t a, b; /* timing: b is set by the pass (the segment's end) */
    int all;     /* take every piece, whatever its set */
    uint8_t *psv;  /* per piece: the serving level (PSV_*); functional: L1 missed */
    uint8_t *ppfk; /* per piece: the kind of a first demand hit on an unused */
    uint8_t *ppfl; /* prefetched line (0 = none), and the level it was at */
    /* functional: the job is share sh[sbuf] (sbuf >= 0): shn[sbuf] pieces queued
     * at L1 by the calling thread (segments.c); two shares, so that the caller
     * cuts one while the part runs the other */
    QEnt *sh[2];     /* the shares' L1 requests, SEGCAP entries each */
    uint32_t shn[2]; /* the shares' lengths */
    int sbuf;        /* the share to run, or -1: a timing job */
} Part;

/* A segment (the unit of work the parts share) holds at most SEGQ queues'
 * worth of records and pieces: s->segcap = SEGQ * s->qcap, at most SEGCAP (the
 * size of each per-piece note array); so the queue-capacity test hook also
 * shrinks the segments, and small test traces cross segment boundaries. */
#define SEGQ 32
#define SEGCAP (SEGQ * 256)
#define KVSIM_MAX_THREADS 8

struct Workers; /* workers.c */
struct TlbPipe; /* tlb.c */

/* The outcome of a translation (tlb.c, engTlbCode): the DTLB held the page; the
 * STLB did; neither (or there is no STLB): a walk; a software prefetch dropped
 * on a DTLB miss. */
enum { TLB_HIT, TLB_STLB_HIT, TLB_WALK, TLB_DROP };

struct kvsimSim {
    kvsimConfig cfg;
    uint32_t n; /* levels (cfg.nlevels) */
    Level lv[KVSIM_MAX_LEVELS];
    Prefetcher pf[KVSIM_MAX_PREFETCHERS];
    /* the least Prefetcher.from of all (UINT32_MAX: none): a piece served
     * above it trains no prefetcher, and runPrefetchers is not called */
    uint32_t pf_from;
    /* 1: a prefetcher sees fills (kvsimPrefetcherOps.sees_fills): a software prefetch
     * that missed its fill level trains it even without cfg.swpf_trains */
    int pf_fills;
    /* 1: a prefetcher has KVSIM_PF_STORES: store pieces train it (engine.c doMemoryT) */
    int pf_stores;
    /* with the TLB thread training ahead_pf: the least from of the others (UINT32_MAX:
     * none), so a piece served above it whose ahead_pf count is 0 trains and issues
     * nothing (doMemoryT skips the call); else pf_from */
    uint32_t pf_from_rest;
    /* one thread: the first IP-stride prefetcher at L1 (-1: none), and the least from
     * of the others, below which it is the only one a piece trains (doMemoryT trains
     * it inline there) */
    int l1_ips;
    uint32_t l1_ips_alone_below;
    /* What the record-by-record loop's look-ahead (runLoop) prefetches into the
     * host's caches beyond the sets of the record's own line: the next line's
     * (a next_line prefetcher fetches it on every L1 miss) and the adjacent
     * line's (adjacent_line).  `tried` and `dropped` count the
     * hardware prefetches since the loop last started and those of them dropped
     * (it does not look when most were: their lines are not accessed); and
     * above an exclusive wide level, the sets victims go to (victims,
     * engine.c lookVictims). */
    struct {
        uint32_t next, adjacent, victims;
        uint64_t tried, dropped;
    } look;
    Tlb dtlb, stlb;
    kvsimStats stats;   /* what is reported */
    kvsimStats scratch; /* where warm-up counts go */
    kvsimStats *st;     /* &stats, or &scratch during warm-up */
    uint32_t phase;     /* the current phase's index */
    int finished;       /* kvsimFinish ran */
    /* demand hit on an unused prefetched line, reported by cacheAccess */
    uint32_t pfh_kind, pfh_level;
    /* timing */
    uint64_t W; /* ticks per cycle: the core width (an instruction is one tick) */
    uint64_t ipt; /* ticks per instruction (cfg.instr_ticks, at least 1) */
    uint64_t kticks[KVSIM_MAX_WORK_KINDS]; /* ticks per instruction by kind (cfg.per_kind) */
    uint64_t wpend[KVSIM_MAX_WORK_KINDS];  /* WORK markers' instructions for the next record */
    uint32_t wpend_mask;                   /* kinds with wpend > 0 */
    int split;      /* the records' instructions are split by kind: cfg.per_kind or wst */
    int wst;        /* the work's stores take store-buffer entries (cfg.kind_store_q16) */
    uint64_t wst_acc; /* the work's stores so far, in 1/65536, less those counted */
    uint64_t wst_new; /* the current record's work stores (recordTicks) */
    uint64_t lat[KVSIM_MAX_LEVELS + 1]; /* levelLatency: ticks per serving level, DRAM last */
    uint64_t t_disp; /* the last record's dispatch tick */
    uint64_t r_last; /* the last record's retire tick */
    uint64_t instr;  /* instructions dispatched so far (the ROB's index) */
    uint64_t recno;  /* records so far (dep_ring's index) */
    /* the reorder buffer, a ring of the records in flight (rob_head and rob_tail
     * count up, wrapped by rob_mask = ring size - 1): each one's last
     * instruction's index (instr), retire tick and retire cause (a stall class) */
    uint64_t *rob_idx, *rob_ret;
    uint8_t *rob_cls;
    uint64_t rob_mask, rob_head, rob_tail;
    uint64_t dep_ring[KVSIM_DEP_WINDOW]; /* completion ticks of the last records */
    /* the DRAM channel's calendar (timing.h dramSlot): bit k % KVSIM_DRAM_SLOTS of
     * dram_cal is set when slot k (of cfg.dram_xfer_ticks ticks) carries a fill,
     * for the slots dram_base .. dram_base + KVSIM_DRAM_SLOTS - 1 */
    uint64_t dram_base;
    uint64_t dram_cal[KVSIM_DRAM_SLOTS / 64];
    uint64_t dram_recip; /* UINT64_MAX / cfg.dram_xfer_ticks (dramSlot's division) */
    /* the page walkers (cfg.walkers > 0; timing.h walkTime): the tick at which
     * each one is free */
    uint64_t walker_free[KVSIM_MAX_WALKERS];
    /* the walk's retention (cfg.walk_retention > 0; engine.c walkCost): per slot, the
     * page-table line last read there (+1; 0 = none) and the tick of that read; walk_now
     * is the tick the current translation is wanted at */
    uint64_t *walk_slot_line, *walk_slot_tick;
    uint64_t walk_now;
    /* the start tick of the latest timed miss (timing.h timeMiss): when the request
     * left its first level, holding its miss buffers (KVSIM_PF_ARRIVAL's tick) */
    uint64_t miss_start;
    /* the scheduler (cfg.scheduler > 0; timing.h schedAdmit): the records holding
     * entries, a binary min-heap by the tick they issue (sched_x) with their entries
     * (sched_n); sched_cnt of them, sched_used entries in all */
    uint64_t sched_x[KVSIM_MAX_SCHEDULER];
    uint32_t sched_n[KVSIM_MAX_SCHEDULER];
    uint32_t sched_cnt, sched_used;
    /* the store buffer (cfg.store_buffer > 0; timing.h storeAdmit, storeCommit): the
     * commit tick of store j at sb_commit[j % store_buffer] (sb_stores: stores so far),
     * the last store's commit tick, and the latest arrival of the record's store lines */
    uint64_t sb_commit[KVSIM_MAX_STORE_BUFFER];
    uint64_t sb_stores, sb_last;
    uint8_t last_cause; /* stall class that set the last retire time */
    int fast; /* every level LRU with ranks and non-inclusive, no TLB or prefetchers */
    uint32_t qcap; /* request queue capacity: QCAP, or the test hook cfg.queue_cap */
    uint32_t segcap; /* records and pieces per segment: SEGQ * qcap */
    /* s->fast: threads, parts (part 0 is the calling thread's), the partition
     * table, the workers (threads > 1), and two segments' per-piece notes: the
     * serving level, and a first demand hit on an unused prefetched line (its
     * kind, 0 = none, and level) */
    uint32_t threads, nlp; /* nlp: parts the level work is shared by */
    Part part[KVSIM_MAX_THREADS];
    uint8_t *ptab;  /* the partition table: set index bits -> part id */
    uint64_t pmask; /* the index bits it maps: line & pmask (pmask + 1 entries) */
    /* functional: pieces per set, this segment's (phist) and a decaying average
     * (pavg), for rebalance */
    uint32_t *phist, *pavg;
    struct Workers *wk; /* the worker threads (threads > 1), or NULL */
    uint8_t *notes[2]; /* each: psv, ppfk, ppfl, SEGCAP bytes apiece */
    /* between kvsimRun calls (segments.c; engSettle ends both): functional, the
     * workers may still run shares 1 - fbuf (fbuf: the shares cut next);
     * timing, a segment whose levels ran waits for its timing, the carry: its
     * ncarry records copied to carry, its notes in notes[cbuf] */
    uint32_t fbuf, cbuf;
    kvtRecord *carry;
    size_t ncarry;
    uint64_t cbase; /* the carried segment's L1 misses before it */
    /* functional: the markers of the segments in shares 0 and 1 (fmk[i], nfmk[i]
     * of them), each with its piece position, and a note per piece: missed L1 */
    struct SegMarker *fmk[2];
    uint32_t nfmk[2];
    uint8_t *fnotes[2];
    /* the open command (COMMAND marker to COMMAND marker) */
    int cmd_open, cmd_counted; /* a command is open; and it counts (not in warm-up) */
    uint64_t cmd_t0, cmd_miss0; /* cmd_miss0: lv[0].tot_miss (every L1 miss) at its start */
    /* kvsimSetTimeline: rows of records tl_first .. tl_first + tl_count - 1, or NULL */
    kvsimTimelineRow *tl;
    uint64_t tl_first, tl_count;
    /* the TLB thread (tlb.c; cfg.threads > 1 with a TLB, off the fast path), or
     * NULL; while a block runs, tcode points at its next translation's code */
    struct TlbPipe *tp;
    const uint8_t *tcode;
    /* with the TLB thread (tlb.c engTlbRun): whether it takes the records of
     * this slice, whether it has taken any (kvsimThreads), and the slice's
     * records so far and their DTLB misses */
    int tp_next, tp_ran;
    uint64_t tp_seen, tp_missed;
    /* with the TLB thread: the prefetcher it trains ahead (the first blind one at
     * L1, prefetch.h), or -1; while a block runs, tpn points at its next load
     * piece's count of candidates and tpc at their lines (runPrefetchers) */
    int ahead_pf;
    const uint8_t *tpn;
    const uint64_t *tpc;
    /* the last level on a thread of its own (lower.c; functional, three levels,
     * cfg.threads > 1, off the fast path), or NULL */
    struct Lower *lower;
};

/* The last level on a thread of its own (lower.c): the requests the L2 sends
 * it, in order, in one of two buffers (the calling thread fills buf[cur] while
 * the worker runs the last level over buf[job]). */
typedef struct LowEnt {
    uint64_t line;
    uint8_t op, kind, stag; /* as the L2 would pass them to the last level's access */
    uint8_t flags;          /* LOW_PENDING: a victim or write-back of a pending line */
} LowEnt;
#define LOW_PENDING 1u
#define LOW_CAP 65536 /* entries per buffer (1 MiB): a hand-over every millisecond or so */

typedef uint32_t (*AccessFn)(kvsimSim *s, uint32_t k, uint64_t line, int op, uint8_t stag,
                            int kind, uint32_t pfk, int *dirty_up);
typedef struct Lower {
    /* the calling thread's: its buffer, the entries in it, the capacity */
    LowEnt *buf[2];
    uint32_t cur, n, cap;
    int busy, ran; /* a job posted and not waited for; any job posted */
    int excl;      /* the last level is exclusive: lines come up pending */
    AccessFn l2_access; /* the L2's own copy (no buffer), for the final flush */
    /* the worker's job, set before it is posted: buf[job], njob entries; its
     * copy of the last level's access (counts in lv[last].wst: `st`, merged
     * into the statistics when drained); and the lines that came up dirty and
     * are pending in the L2 (line + 1, open addressing, pmask + 1 slots) */
    _Alignas(64) uint32_t job, njob;
    AccessFn access;
    kvsimStats *st;
    uint64_t *pend, pmask;
} Lower;

void engLowerHandOver(kvsimSim *s); /* lower.c: buf[cur] to the worker */

/* Append a request to the last level (the L2's access copy with NX_QUEUE). */
static inline void lowerPush(kvsimSim *s, uint64_t line, int op, uint8_t stag, int kind,
                             uint32_t flags) {
    Lower *lw = s->lower;
    LowEnt *e = &lw->buf[lw->cur][lw->n];
    e->line = line;
    e->op = (uint8_t)op;
    e->kind = (uint8_t)kind;
    e->stag = stag;
    e->flags = (uint8_t)flags;
    if (++lw->n == lw->cap) engLowerHandOver(s);
}

/* The level-by-level path's request queues: QCAP entries per level (levels.c). */
#define QCAP 256
_Static_assert(SEGCAP == SEGQ * QCAP, "notes for a full segment");
#define NOPID 0xFFFFFFFFu
_Static_assert(offsetof(QEnt, kind) == offsetof(QEnt, op) + 1 &&
                   offsetof(QEnt, stag) == offsetof(QEnt, op) + 2 &&
                   offsetof(QEnt, fp) == offsetof(QEnt, op) + 3 && sizeof(QEnt) == 16,
               "op, kind, stag and fp are one 32-bit word (segments.c writes it at once)");
_Static_assert(QCAP <= SEGCAP && SEGCAP < NOPID, "a record the queues take fits a segment");

/* --- Set blocks ---------------------------------------------------------------- */

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

/* The least `from` of the hardware prefetchers but prefetcher p (UINT32_MAX:
 * none): below it, p is the only one a piece trains (pf_from_rest,
 * l1_ips_alone_below). */
static inline uint32_t leastFromBut(const kvsimSim *s, int p) {
    uint32_t least = UINT32_MAX;
    for (uint32_t q = 0; q < s->cfg.nprefetchers; q++)
        if ((int)q != p && s->pf[q].from < least) least = s->pf[q].from;
    return least;
}

static inline uint8_t fingerprint(uint64_t line) {
    uint8_t f = (uint8_t)((line * 0x9E3779B97F4A7C15ULL) >> 56);
    return (uint8_t)(f + (f == 0)); /* 1..255; 0 marks an invalid way */
}


/* A marker that a segment may hold (segments.c): any but those that switch the
 * phase or the counting, which need every level's totals at their place. */
static inline int markerInSegment(const kvtRecord *r) {
    return r->kind == KVT_MARKER && r->flags != KVT_MARK_PHASE &&
           r->flags != KVT_MARK_WARMUP_BEGIN && r->flags != KVT_MARK_WARMUP_END;
}

/* Timing notes: psv[pid] is the serving level, or PSV_L1_MISS for a whole-line
 * store allocated in L1 without a fetch; nonzero exactly when L1 missed. */
#define PSV_L1_MISS 0x80u
#define PSV_LEVEL 0x7Fu

/* The operation of a one-line piece of a load (is_store 0) or store (1) of
 * `size` bytes (lines of line_size): OP_READ, OP_WRITE, or OP_WFULL for a whole line; arithmetic,
 * not branches (loads and stores interleave unpredictably). */
_Static_assert(OP_READ == 0 && OP_WRITE == 1 && OP_WFULL == 2, "opOf's arithmetic");
_Static_assert(KVSIM_K_LOAD == 0 && KVSIM_K_STORE == 1, "a store flag is its kind");
static inline uint32_t opOf(uint32_t is_store, uint64_t size, uint64_t line_size,
                            uint32_t fetch_full) {
    return is_store << ((size == line_size) & !fetch_full);
}

/* The operation of the piece of record r (size bytes) in `line`: loads read; a
 * store piece covering its whole line allocates without a fetch, unless fetch_full
 * (cfg.full_line_store_fetch: then it is a WRITE, fetched as any store's). */
static inline int pieceOp(const kvtRecord *r, uint64_t line, uint32_t lb, uint64_t size,
                          uint32_t fetch_full) {
    if (r->kind != KVT_STORE) return OP_READ;
    if (fetch_full) return OP_WRITE;
    /* Inclusive last bytes: the line's and the access's. Neither overflows for the
     * last line below 2^64 (an access never wraps: traces/FORMAT.md "Record rules"),
     * where an exclusive end (a0 + line size) would be 0. */
    const uint64_t a0 = line << lb, a_last = a0 + ((1ULL << lb) - 1);
    const uint64_t r_last = r->addr + (size - 1);
    const uint64_t p0 = r->addr > a0 ? r->addr : a0;
    const uint64_t p_last = r_last < a_last ? r_last : a_last;
    return p_last - p0 == (1ULL << lb) - 1 ? OP_WFULL : OP_WRITE;
}

/* --- Records ---------------------------------------------------------------- */

/* Add a worker's own counters of one level to `dst` and clear them (segments.c
 * engMergeParts, lower.c engLowerDrain). */
static inline void levelStatsMove(kvsimLevelStats *dst, kvsimLevelStats *src) {
    uint64_t *d = (uint64_t *)dst;
    const uint64_t *x = (const uint64_t *)src;
    for (size_t i = 0; i < sizeof(kvsimLevelStats) / sizeof(uint64_t); i++) d[i] += x[i];
    memset(src, 0, sizeof *src);
}

/* The levels whose set blocks the calling thread's look-ahead prefetches (engine.c
 * runLoop, lookNeighbours): all but a last level with a thread of its own (lower.c),
 * which looks ahead at its own requests. */
static inline uint32_t lookLevels(const kvsimSim *s) { return s->n - (s->lower != NULL); }

/* A demand piece found an unused prefetched line (s->pfh_*): useful, or late if
 * it waited for the fill. */
static inline void classifyPf(kvsimSim *s, int waited) {
    if (!s->pfh_kind) return;
    kvsimLevelStats *ls = &s->st->level[s->pfh_level];
    if (waited)
        ls->pf_late[s->pfh_kind - 1]++;
    else
        ls->pf_useful[s->pfh_kind - 1]++;
    s->pfh_kind = 0;
}

/* Counters of the current phase that the specialised record loop (s->fast) adds
 * up locally and adds to the statistics before anything can change where they
 * go (a marker) and at the end of each kvsimRun call. */
typedef struct Batch {
    /* kind: records per kind; multiline: records of more than one piece; ticks:
     * retire time (timing) */
    uint64_t records, instructions, kind[KVT_MARKER], pieces, multiline, ticks;
} Batch;

/* engine.c, for levels.c */
void engFlushBatch(kvsimSim *s, Batch *bt);
void engDoMarker(kvsimSim *s, const kvtRecord *r);
void engGeneralRecord(kvsimSim *s, const kvtRecord *r, Batch *bt); /* record by record */
/* levels.c, for segments.c and workers.c */
void engRunPart(kvsimSim *s, Part *P); /* a part's job */
/* segments.c, for engine.c */
int engPartsInit(kvsimSim *s); /* 0: out of memory */
void engPartsFree(kvsimSim *s);
void engMergeParts(kvsimSim *s); /* workers idle: their per-tag counters join s->st */
void engSettle(kvsimSim *s); /* finish what a kvsimRun call left in flight */
void engRunFastFunctional(kvsimSim *s, const kvtRecord *recs, size_t n);
void engRunFastTiming(kvsimSim *s, const kvtRecord *recs, size_t n);
void engRunRecords(kvsimSim *s, const kvtRecord *recs, size_t n); /* record by record */
/* tlb.c */
int engTlbInit(Tlb *t, uint32_t sets, uint32_t ways); /* 0: out of memory */
uint32_t engTlbCode(kvsimSim *s, uint64_t addr, int is_swpf); /* TLB_* */
int engTlbPipeStart(kvsimSim *s); /* 0: out of memory or no thread */
void engTlbRun(kvsimSim *s, const kvtRecord *recs, size_t n); /* kvsimRun's, with a TLB thread */
void engTlbPipeStop(kvsimSim *s);
/* lower.c */
int engLowerStart(kvsimSim *s); /* 0: out of memory or no thread */
void engLowerJob(kvsimSim *s);   /* the worker's: the last level over buf[job] */
void engLowerDrain(kvsimSim *s); /* every request done; the worker idle */
void engLowerEnd(kvsimSim *s);   /* drained, pending bits settled, the buffer bypassed */
void engLowerFree(kvsimSim *s);
/* workers.c: threads that run parts 1..threads-1 (or the last level, lower.c) */
int engWorkersStart(kvsimSim *s); /* 0: could not start them */
void engWorkersPost(kvsimSim *s, uint32_t w); /* part[w]'s job is set: run it */
void engWorkersWait(kvsimSim *s, uint32_t w); /* until part[w]'s job is done */
void engWorkersStop(kvsimSim *s);

/* The line the caches see for virtual `line`: its physical line under
 * placement (cfg.place_bits, placement.h), else the line itself. */
static inline uint64_t engPhys(const kvsimSim *s, uint64_t line) {
    return s->cfg.place_bits ? kvsimPlaceLine(line, s->cfg.line_bits, s->cfg.place_bits,
                                              s->cfg.place_seed)
                             : line;
}

#endif /* KVSIM_ENGINE_IMPL_H */
