/*
 * lower.c -- the last of three levels on a thread of its own, for functional
 * runs of the record-by-record path (the presets, counting only).
 *
 * Without timing, what the levels above the last one do depends on it in two
 * ways only.  An inclusive last level removes from them the lines it replaces:
 * that configuration keeps one thread.  An exclusive last level hands a line
 * it holds up with its dirty bit, which the L2 installs: settled below.  Past
 * that, the levels above learn nothing from below but that an L2 miss was
 * served somewhere below it, and no prefetcher of theirs asks where (the path
 * is not taken with a prefetcher at the last level or software prefetches
 * filling it).  So the L2's access copy with NX_QUEUE (engine.c,
 * access_body.h) writes the requests it sends down -- each fetch, then its
 * victim's write-back or clean victim, in the order the record-by-record path
 * sends them -- into a buffer, and the worker thread (workers.c) runs the last
 * level's own access over each full buffer while the calling thread fills the
 * other:
 *
 *     calling thread: records, TLBs, L1, L2, hardware prefetchers
 *         |  buf[cur]: line, op, kind, tag, flags (LowEnt)
 *         v
 *     worker: the last level and the DRAM counts, over buf[job]
 *
 * The last level sees the same requests in the same order, so its states and
 * counts are the one-thread path's.  The worker prefetches the set blocks of
 * the request LOWER_LOOK entries ahead into the host caches (the calling
 * thread's look-ahead stops at the L2).
 *
 * Exclusive last level.  The L2 marks every line it fetches META_PENDING: its
 * dirty bit from below is the worker's to know.  The worker puts a fetched
 * line that came up dirty into `pend` (a set of lines, open addressing).  When
 * the L2 replaces a pending line it has not dirtied itself, it sends a victim
 * flagged LOW_PENDING, and the worker turns it into the write-back the
 * one-thread path sends if the line is in `pend` (counting the L2's write-back); a pending
 * line the L2 dirtied goes down as a write-back, flagged so that it leaves
 * `pend`.  Every line in `pend` is in the L2 at that point of the requests, or
 * is the victim of the fetch just before, so the set never holds more than the
 * L2's lines and one.  At the end (engLowerEnd,
 * before kvsimFinish's flush) the L2's pending lines take their dirty bits
 * from `pend` and the L2 goes back to its own copy.
 *
 * The buffers are drained (engLowerDrain: the last one handed over, the worker
 * idle) before anything reads the last level's totals or changes where counts
 * go: phaseSync (phase and warm-up markers), engSettle (kvsimGetStats,
 * kvsimPeekSet), the end.
 */
#include <stdlib.h>

#include "engine_impl.h"

#ifndef LOWER_LOOK
#define LOWER_LOOK 8 /* requests ahead whose set blocks the worker prefetches */
#endif

/* --- pend: a set of lines (line + 1; 0 = empty slot) ------------------------- */

static inline uint64_t pendSlot(const Lower *lw, uint64_t line) {
    return ((line * 0x9E3779B97F4A7C15ULL) >> 20) & lw->pmask;
}

static void pendAdd(Lower *lw, uint64_t line) {
    uint64_t i = pendSlot(lw, line);
    while (lw->pend[i] && lw->pend[i] != line + 1) i = (i + 1) & lw->pmask;
    lw->pend[i] = line + 1;
}

/* Whether `line` is in the set, removing it (backward-shift deletion: the
 * entries after it in its run move up, so that no probe stops early). */
static int pendTake(Lower *lw, uint64_t line) {
    uint64_t i = pendSlot(lw, line);
    while (lw->pend[i] != line + 1) {
        if (!lw->pend[i]) return 0;
        i = (i + 1) & lw->pmask;
    }
    for (uint64_t j = (i + 1) & lw->pmask; lw->pend[j]; j = (j + 1) & lw->pmask) {
        const uint64_t h = pendSlot(lw, lw->pend[j] - 1);
        /* the entry at j may fill the hole at i unless its home lies in (i, j] */
        if (((j - h) & lw->pmask) >= ((j - i) & lw->pmask)) {
            lw->pend[i] = lw->pend[j];
            i = j;
        }
    }
    lw->pend[i] = 0;
    return 1;
}

/* --- The two threads ------------------------------------------------------------ */

int engLowerStart(kvsimSim *s) {
    Lower *lw = calloc(1, sizeof *lw);
    if (!lw) return 0;
    s->lower = lw;
    lw->cap = s->cfg.queue_cap ? s->cfg.queue_cap : LOW_CAP; /* the test hook: small */
    lw->excl = s->lv[2].inclusion == KVSIM_EXCLUSIVE;
    lw->l2_access = s->lv[1].access;
    /* pend holds at most the L2's lines and one more (a fetch comes before the
     * victim it displaces); at least half the slots stay empty, so probes end */
    uint64_t slots = 4;
    while (slots < 2 * ((uint64_t)s->lv[1].sets * s->lv[1].ways + 1)) slots <<= 1;
    lw->pmask = slots - 1;
    lw->buf[0] = calloc(lw->cap, sizeof(LowEnt));
    lw->buf[1] = calloc(lw->cap, sizeof(LowEnt));
    lw->st = calloc(1, sizeof(kvsimStats));
    lw->pend = lw->excl ? calloc(slots, sizeof(uint64_t)) : NULL;
    if (!lw->buf[0] || !lw->buf[1] || !lw->st || (lw->excl && !lw->pend)) return 0;
    s->lv[2].wst = lw->st;
    s->threads = 2; /* the calling thread and one worker (workers.c) */
    return engWorkersStart(s);
}

/* The worker's job: the last level's access for each request of buf[job]
 * (lw->access: its copy counting in lw->st). */
void engLowerJob(kvsimSim *s) {
    Lower *lw = s->lower;
    const LowEnt *q = lw->buf[lw->job];
    const uint32_t n = lw->njob, k = s->n - 1;
    const Level *const L = &s->lv[k];
    const AccessFn access = lw->access;
    const int excl = lw->excl;
    for (uint32_t j = 0; j < n; j++) {
        if (j + LOWER_LOOK < n) {
            const uint8_t *b = SET_BASE(L, q[j + LOWER_LOOK].line & L->set_mask);
            for (uint32_t h = 0; h < L->nlines; h++) __builtin_prefetch(b + 64 * h, 1, 3);
        }
        const LowEnt e = q[j];
        if (e.op == OP_READ) {
            int du = 0;
            access(s, k, e.line, OP_READ, e.stag, e.kind, 0, excl ? &du : NULL);
            if (du) pendAdd(lw, e.line);
        } else {
            int op = e.op, kind = e.kind;
            /* a pending line leaves pend; a clean victim of one that came up dirty
             * is the L2's write-back after all */
            if ((e.flags & LOW_PENDING) && pendTake(lw, e.line) && op == OP_VICTIM) {
                lw->st->level[k - 1].writebacks++;
                op = OP_WFULL;
                kind = KVSIM_K_WRITEBACK;
            }
            access(s, k, e.line, op, e.stag, kind, 0, NULL);
        }
    }
}

void engLowerHandOver(kvsimSim *s) {
    Lower *lw = s->lower;
    if (lw->busy) engWorkersWait(s, 1);
    lw->job = lw->cur;
    lw->njob = lw->n;
    lw->busy = lw->ran = 1;
    engWorkersPost(s, 1);
    lw->cur ^= 1;
    lw->n = 0;
}

void engLowerDrain(kvsimSim *s) {
    Lower *lw = s->lower;
    if (!lw) return;
    if (lw->n) engLowerHandOver(s);
    if (lw->busy) engWorkersWait(s, 1);
    lw->busy = 0;
    /* the worker's counts: the last level's, the L2's write-backs it found, DRAM's */
    for (uint32_t k = s->n - 2; k < s->n; k++) levelStatsMove(&s->st->level[k], &lw->st->level[k]);
    s->st->dram_reads += lw->st->dram_reads;
    s->st->dram_writes += lw->st->dram_writes;
    lw->st->dram_reads = lw->st->dram_writes = 0;
}

void engLowerEnd(kvsimSim *s) {
    Lower *lw = s->lower;
    if (!lw) return;
    engLowerDrain(s);
    Level *L = &s->lv[1];
    if (lw->excl)
        for (uint64_t set = 0; set < L->sets; set++) {
            uint8_t *meta = SET_META(L, set);
            const uint64_t *tags = SET_TAGS(L, set);
            for (uint32_t w = 0; w < L->ways; w++) {
                if (!(meta[w] & META_PENDING)) continue;
                meta[w] &= (uint8_t)~META_PENDING;
                if (tags[w] && pendTake(lw, tags[w] - 1)) meta[w] |= META_DIRTY;
            }
        }
    L->access = lw->l2_access; /* the flush's write-backs reach the last level at once */
}

void engLowerFree(kvsimSim *s) {
    Lower *lw = s->lower;
    if (!lw) return;
    engWorkersStop(s); /* it finishes a job it is running first */
    free(lw->buf[0]);
    free(lw->buf[1]);
    free(lw->pend);
    free(lw->st);
    free(lw);
    s->lower = NULL;
}
