/*
 * timing.h -- the out-of-order timing model's inline building blocks (the model
 * is in engine.c's essay and sim/MODEL.md): per-level latencies, the miss
 * buffers (kept sorted by ready tick), the time of one piece, and a record's
 * dispatch and retirement.  Inline in both record paths (engine.c, levels.c).
 *
 * The per-record functions copy the fields they use into locals and load them
 * before they store: stores through the engine's pointers (uint64_t counters,
 * uint8_t arrays) could alias any field of kvsimSim, so the compiler would
 * otherwise reload the fields after each store.  The miss path (timeMiss) and
 * the rare parts of the miss buffers' upkeep are out of line, so that the
 * record loops keep their own values in registers.
 */
#ifndef KVSIM_TIMING_H
#define KVSIM_TIMING_H

#include "engine_impl.h"
#include "fpmatch.h"

/* --- Timing ------------------------------------------------------------------- */

/* Load-to-use ticks when served at level sv (s->n: DRAM), computed at creation. */
static inline uint64_t levelLatency(const kvsimSim *s, uint32_t sv) { return s->lat[sv]; }

/* Earliest-free miss buffer of level j (lowest index on a tie). */
static inline uint32_t poolEarliest(const Level *L) { return L->mq[L->mqhead & L->mqmask]; }

/* A buffer's mhash byte: 8 bits of its line's hash (0 for line 0, as the
 * buffers start).  A lookup compares 16 of them per SSE instruction. */
static inline uint32_t mhash(uint64_t line) {
    return (uint32_t)((line * 0x9E3779B97F4A7C15ULL) >> 56);
}

/* Buffer e (ready tick `ready`) goes into the sorted ring whose slot j is free
 * and whose entry before it, q, is later: the later entries move up one slot.
 * h: the front.  Out of line: the new entry usually goes in at the back. */
static __attribute__((noinline)) void poolInsert(uint32_t *mq, const uint64_t *mr, uint32_t mask,
                                                 uint32_t h, uint32_t j, uint32_t q, uint32_t e,
                                                 uint64_t ready) {
    uint64_t rq;
    do {
        mq[j & mask] = q;
        if (--j == h) break;
        q = mq[(j - 1) & mask];
        rq = mr[q];
    } while (rq > ready || (rq == ready && q > e));
    mq[j & mask] = e;
}

/* Pop the earliest-free buffer of level L (poolEarliest): it now holds `line`
 * (hb: its mhash); poolPut then gives it its ready tick.  Returns it. */
static inline uint32_t poolPop(Level *L, uint64_t line, uint8_t hb) {
    const uint32_t h = L->mqhead, e = L->mq[h & L->mqmask];
    uint64_t *const ml = L->mline;
    uint8_t *const mh = L->mhash;
    L->mqhead = h + 1;
    ml[e] = line;
    mh[e] = hb;
    return e;
}

/* The popped buffer e of level L is ready at tick `ready`: it goes back into
 * the sorted ring from the back (usually right there: a new fill tends to be
 * the latest; else poolInsert). */
static inline void poolPut(Level *L, uint32_t e, uint64_t ready) {
    uint32_t *const mq = L->mq;
    uint64_t *const mr = L->mready;
    const uint32_t mask = L->mqmask, h = L->mqhead;
    const uint32_t j = h + L->mshrs - 1; /* the ring's new back */
    mr[e] = ready;
    /* (with one buffer, slot j - 1 still holds e itself: q == e) */
    const uint32_t q = mq[(j - 1) & mask];
    const uint64_t rq = mr[q];
    if (rq < ready || (rq == ready && q <= e))
        mq[j & mask] = e;
    else
        poolInsert(mq, mr, mask, h, j, q, e, ready);
}

/* The first tracked level at or below `from` with no free miss buffer at tick
 * x, or s->n if every one has a free buffer. */
static inline uint32_t firstBusy(const kvsimSim *s, uint32_t from, uint64_t x) {
    for (uint32_t j = from; j < s->n; j++) {
        const Level *L = &s->lv[j];
        if (L->mshrs && L->mready[poolEarliest(L)] > x) return j;
    }
    return s->n;
}

/* The latest fill-ready tick after x of the buffers of L holding `line`, or 0:
 * only the buffers whose mhash byte matches are looked at.  Out of line:
 * rarely needed. */
static __attribute__((noinline)) uint64_t inflightScan(const Level *L, uint64_t line,
                                                       uint64_t x) {
    const uint64_t *const mr = L->mready, *const ml = L->mline;
    const uint8_t *const mh = L->mhash;
    const uint32_t m = L->mshrs, hb = mhash(line);
    uint64_t r = 0;
    uint32_t j = 0;
#if defined(__SSE4_2__)
    const __m128i hv = kvsimSplat8((uint8_t)hb);
    for (; j < m; j += 16) { /* mhash is padded to whole groups of 16 */
        uint32_t cand = (uint32_t)_mm_movemask_epi8(
            _mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)(mh + j)), hv));
        if (m - j < 16) cand &= (1u << (m - j)) - 1;
        for (; cand; cand &= cand - 1) {
            const uint32_t i = j + (uint32_t)__builtin_ctz(cand);
            if (ml[i] == line && mr[i] > x && mr[i] > r) r = mr[i];
        }
    }
#endif
    for (; j < m; j++)
        if (mh[j] == hb && ml[j] == line && mr[j] > x && mr[j] > r) r = mr[j];
    return r;
}

/* Latest fill-ready tick of `line` in flight at level sv after tick x, or 0.
 * Usually no buffer's mhash byte matches. */
static inline uint64_t inflight(const kvsimSim *s, uint32_t sv, uint64_t line, uint64_t x) {
    if (sv >= s->n) return 0;
    const Level *L = &s->lv[sv];
    const uint32_t m = L->mshrs;
    if (!m) return 0;
    const uint8_t *const mh = L->mhash;
    const uint32_t hb = mhash(line);
    uint32_t any = 0;
#if defined(__SSE4_2__)
    /* mhash is padded to whole groups of 16 (kvsimCreate): the last group's
     * bytes past m are masked off, not compared one by one */
    const __m128i hv = kvsimSplat8((uint8_t)hb);
    for (uint32_t j = 0; j < m; j += 16) {
        uint32_t eq = (uint32_t)_mm_movemask_epi8(
            _mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)(mh + j)), hv));
        if (m - j < 16) eq &= (1u << (m - j)) - 1;
        any |= eq;
    }
#else
    for (uint32_t j = 0; j < m; j++) any |= mh[j] == hb;
#endif
    return any ? inflightScan(L, line, x) : 0;
}

/* The DRAM channel moves one line per slot of xfer ticks (slot k: ticks k xfer ..
 * (k + 1) xfer - 1).  A fill ready to start at `start` takes the earliest free
 * slot at or after start's own and begins at the later of start and that
 * slot's first tick.  Records are timed in program order but their fills start
 * out of time order (a later record's independent miss often starts before an
 * earlier record's dependent one), so a calendar rather than a "next free
 * tick": a fill waits only for fills that really use the channel at its time.
 * The calendar covers KVSIM_DRAM_SLOTS slots from dram_base and moves forward
 * with the latest fill; a fill before it does not wait.  Returns the start. */
static __attribute__((noinline)) uint64_t dramSlot(kvsimSim *s, uint64_t start,
                                                   uint64_t xfer) {
    /* k = start / xfer by the reciprocal r = floor((2^64 - 1) / xfer): start r / 2^64
     * falls short of the quotient by at most one, which the remainder shows */
    uint64_t k = (uint64_t)(((unsigned __int128)start * s->dram_recip) >> 64);
    if (start - k * xfer >= xfer) k++;
    if (k < s->dram_base) return start;
    /* the first free slot at or after k, a calendar word (64 slots) at a time;
     * a word's bits past the calendar's end stand for the slots at its start,
     * so a free bit counts only below the end */
    for (;;) {
        const uint64_t end = s->dram_base + KVSIM_DRAM_SLOTS;
        if (k < end) {
            uint64_t *w = &s->dram_cal[(k / 64) % (KVSIM_DRAM_SLOTS / 64)];
            const uint64_t freeb = ~*w & (~0ULL << (k % 64));
            const uint64_t f = (k & ~63ULL) + (uint64_t)__builtin_ctzll(freeb | (1ULL << 63));
            if (freeb && f < end) {
                *w |= 1ULL << (f % 64);
                return f * xfer > start ? f * xfer : start;
            }
            k = (k | 63) + 1; /* slots k .. the word's end, or the calendar's, are taken */
            if (k < end) continue;
            k = end;
        }
        /* k is past the calendar (its slot is free): move the calendar forward */
        const uint64_t nb = k - KVSIM_DRAM_SLOTS + 1;
        if (nb - s->dram_base >= KVSIM_DRAM_SLOTS)
            memset(s->dram_cal, 0, sizeof s->dram_cal);
        else /* clear slots dram_base .. nb - 1, a word's run of them at a time */
            for (uint64_t j = s->dram_base; j < nb;) {
                const uint64_t lo = j % 64, run = nb - j < 64 - lo ? nb - j : 64 - lo;
                const uint64_t m = (run == 64 ? ~0ULL : (1ULL << run) - 1) << lo;
                s->dram_cal[(j / 64) % (KVSIM_DRAM_SLOTS / 64)] &= ~m;
                j += run;
            }
        s->dram_base = nb;
        s->dram_cal[(k / 64) % (KVSIM_DRAM_SLOTS / 64)] |= 1ULL << (k % 64);
        return k * xfer > start ? k * xfer : start;
    }
}

/* A page walk of `dur` ticks wanted at tick x: returns the tick it ends (when
 * the piece that needed it accesses the caches).  With cfg.walkers = w > 0 the
 * walk takes the earliest-free of w walkers (lowest index on a tie), starts
 * when both x and that walker are ready, and holds it until it ends: the miss
 * buffers' discipline (timeMiss), so walks of records timed in program order
 * but started out of time order wait only for walks timed before them.  The
 * wait is counted in wait_walker.  w = 0: any number of walks at once. */
static inline uint64_t walkTime(kvsimSim *s, uint64_t x, uint64_t dur) {
    const uint32_t w = s->cfg.walkers;
    if (!w) return x + dur;
    uint64_t *const wf = s->walker_free;
    uint32_t e = 0;
    for (uint32_t j = 1; j < w; j++)
        if (wf[j] < wf[e]) e = j;
    const uint64_t start = wf[e] > x ? wf[e] : x;
    s->st->wait_walker += start - x;
    wf[e] = start + dur;
    return start + dur;
}

/* The miss part of timeAccessBody (sv > f): out of line, so that the record
 * loops around it keep their own values in registers. */
static __attribute__((noinline)) uint64_t timeMiss(kvsimSim *s, uint64_t line, uint32_t f,
                                                   uint32_t sv, uint64_t x, int *waited) {
    kvsimStats *const st = s->st;
    const uint64_t lat = levelLatency(s, sv);
    /* pop the earliest-free buffer of each tracked level f..sv-1: the miss
     * starts when the last of them is free */
    uint32_t te[KVSIM_MAX_LEVELS], end = f; /* end: past the last tracked one */
    uint64_t start = x;
    const uint8_t hb = (uint8_t)mhash(line);
    for (uint32_t j = f; j < sv; j++) {
        Level *L = &s->lv[j];
        if (!L->mshrs) continue;
        const uint32_t e = te[j] = poolPop(L, line, hb);
        const uint64_t rd = L->mready[e];
        start = rd > start ? rd : start;
        end = j + 1;
    }
    uint64_t c;
    if (sv == s->n) { /* DRAM: the channel */
        const uint64_t xfer = s->cfg.dram_xfer_ticks;
        uint64_t ds = start;
        if (xfer) {
            ds = dramSlot(s, start, xfer);
            st->wait_dram_bw += ds - start;
        }
        *waited = 0;
        c = ds + lat;
    } else {
        const uint64_t rif = inflight(s, sv, line, x);
        *waited = rif > x;
        c = start + lat;
        if (rif > c) {
            st->wait_inflight += rif - c;
            c = rif;
        }
    }
    st->wait_mshr += start - x;
    s->miss_start = start;
    if (f == 0) {
        st->miss_ticks += c - start;
        st->l1_misses_timed++;
    }
    for (uint32_t j = f; j < end; j++) /* ... and hold them until c */
        if (s->lv[j].mshrs) poolPut(&s->lv[j], te[j], c);
    return c;
}

/*
 * Time one piece that started at level f, was served at level sv and issues at
 * tick x.  Returns its completion tick; *waited is set when it found its line
 * still in flight (for prefetch timeliness).
 */
static inline __attribute__((always_inline)) uint64_t
timeAccessBody(kvsimSim *s, uint64_t line, uint32_t f, uint32_t sv, uint64_t x, int *waited) {
    if (sv != f) return timeMiss(s, line, f, sv, x, waited);
    /* a hit where it started: no miss buffer */
    const uint64_t rif = inflight(s, sv, line, x);
    uint64_t c = x + levelLatency(s, sv);
    *waited = rif > x;
    if (rif > c) {
        s->st->wait_inflight += rif - c;
        c = rif;
    }
    return c;
}

/* Ticks of a record of ninstr instructions: ninstr * ipt, or with kinds of work
 * (cfg.per_kind) the instructions the WORK markers before it named (wpend) at their
 * kinds' rates and the rest at its site's kind's.  Takes the markers' counts.  With the
 * work's stores (s->wst) it also counts the gap's stores, each kind's instructions at
 * cfg.kind_store_q16 / 65536 a piece, into wst_acc, and leaves the whole ones for this
 * record in wst_new (the fraction carries to the next record). */
static inline uint64_t recordTicks(kvsimSim *s, const kvtRecord *r, uint64_t ninstr) {
    if (!s->split) return ninstr * s->ipt;
    uint64_t t = 0, rest = ninstr, q = 0;
    for (uint32_t m = s->wpend_mask; m; m &= m - 1) {
        const uint32_t k = (uint32_t)__builtin_ctz(m);
        const uint64_t n = s->wpend[k] < rest ? s->wpend[k] : rest;
        t += n * s->kticks[k];
        q += n * s->cfg.kind_store_q16[k];
        rest -= n;
        s->wpend[k] = 0;
    }
    s->wpend_mask = 0;
    uint32_t own = r->site < KVSIM_MAX_SITES ? s->cfg.site_kind[r->site] : 0;
    if (own >= KVSIM_MAX_WORK_KINDS) own = 0;
    if (s->wst) { /* the gap's stores: the record's own instruction is not work */
        q += (rest ? rest - 1 : 0) * s->cfg.kind_store_q16[own];
        s->wst_acc += q;
        s->wst_new = s->wst_acc >> 16;
        s->wst_acc &= 0xFFFF;
    }
    return t + rest * s->kticks[own];
}

/* The scheduler's heap (cfg.scheduler > 0): remove the earliest-issuing holder. */
static inline void schedPop(kvsimSim *s) {
    uint64_t *const hx = s->sched_x;
    uint32_t *const hn = s->sched_n;
    const uint32_t cnt = --s->sched_cnt;
    s->sched_used -= hn[0];
    const uint64_t x = hx[cnt];
    const uint32_t n = hn[cnt];
    uint32_t i = 0;
    for (;;) {
        uint32_t c = 2 * i + 1;
        if (c >= cnt) break;
        if (c + 1 < cnt && hx[c + 1] < hx[c]) c++;
        if (hx[c] >= x) break;
        hx[i] = hx[c];
        hn[i] = hn[c];
        i = c;
    }
    hx[i] = x;
    hn[i] = n;
}

/* The scheduler: a record of n instructions that is to dispatch at D.  The holders that
 * issued by D free their entries; while its min(n, scheduler) entries do not fit beside
 * the rest, dispatch waits for the earliest holder to issue.  Returns the dispatch tick.
 * (Which of two holders issuing at the same tick leaves first changes nothing.) */
static __attribute__((noinline)) uint64_t schedAdmit(kvsimSim *s, uint64_t n, uint64_t D) {
    const uint64_t S = s->cfg.scheduler, need = n < S ? n : S;
    while (s->sched_cnt && s->sched_x[0] <= D) schedPop(s);
    while (s->sched_used + need > S) { /* sched_used > 0, so a holder exists */
        const uint64_t x = s->sched_x[0];
        s->st->wait_scheduler += x - D;
        D = x;
        while (s->sched_cnt && s->sched_x[0] <= D) schedPop(s);
    }
    return D;
}

/* The scheduler: a record dispatched at D that issues at X > D (it waited for its
 * producer) holds min(n, scheduler) entries until X. */
static __attribute__((noinline)) void schedHold(kvsimSim *s, uint64_t n, uint64_t X) {
    const uint64_t S = s->cfg.scheduler;
    const uint32_t need = (uint32_t)(n < S ? n : S);
    uint64_t *const hx = s->sched_x;
    uint32_t *const hn = s->sched_n;
    uint32_t i = s->sched_cnt++;
    s->sched_used += need;
    while (i) {
        const uint32_t p = (i - 1) / 2;
        if (hx[p] <= X) break;
        hx[i] = hx[p];
        hn[i] = hn[p];
        i = p;
    }
    hx[i] = X;
    hn[i] = need;
}

/* The store buffer (cfg.store_buffer = N > 0): store j's commit tick is at
 * sb_commit[j % N] until store j + N overwrites it.  A record dispatching at D with w
 * stores to place (its gap's work stores, wst_new, then its own if it is a store;
 * stores j .. j + w - 1) needs the entry of its last one: that of store j + w - 1 - N,
 * the first to free (commits are in program order); with w > N, one of its own stores
 * would have to commit first, so it waits for every earlier store (store j - 1).
 * Returns the dispatch tick. */
static inline uint64_t storeAdmit(kvsimSim *s, uint64_t D, uint64_t w) {
    const uint64_t N = s->cfg.store_buffer, j = s->sb_stores;
    if (w > N) w = N;
    if (j + w <= N) return D; /* fewer than N stores before the last one */
    const uint64_t b = s->sb_commit[(j + w - 1 - N) % N];
    if (b <= D) return D;
    s->st->wait_store_buffer += b - D;
    return b;
}

/* The record's work stores (wst_new), before its own store in program order, retire
 * with its gap, at P (the previous record's retirement plus the record's ticks), and
 * commit in order at the latest of P and the previous store's commit: their lines are
 * taken as in L1 (the work's data is the stack's and the current line's). */
static inline void workCommit(kvsimSim *s, uint64_t P) {
    const uint64_t m = s->wst_new, N = s->cfg.store_buffer;
    if (!m) return;
    const uint64_t c = P > s->sb_last ? P : s->sb_last;
    const uint64_t first = m > N ? s->sb_stores + m - N : s->sb_stores;
    for (uint64_t j = first; j < s->sb_stores + m; j++) s->sb_commit[j % N] = c;
    s->sb_stores += m;
    s->sb_last = c;
    s->st->work_stores += m;
    s->wst_new = 0;
}

/* The store just retired (at s->r_last), whose lines arrive by `arrive` (the latest
 * completion of its pieces, timed as a load's from its issue: the read-for-ownership)
 * commits at the latest of its retirement, the previous store's commit and that
 * arrival, and frees its entry then. */
static inline void storeCommit(kvsimSim *s, uint64_t arrive) {
    const uint64_t R = s->r_last;
    uint64_t c = R > s->sb_last ? R : s->sb_last;
    if (arrive > c) c = arrive;
    s->st->store_commit_lag += c - R;
    s->sb_commit[s->sb_stores++ % s->cfg.store_buffer] = c;
    s->sb_last = c;
}

/* Timing: dispatch of a record of ninstr instructions taking rt ticks (s->instr
 * already counts them): D after the ROB limit, X when its producer (dep) has
 * completed.  (The ROB's retire bound for an entry's later instructions takes them
 * at ipt each.) */
static inline __attribute__((always_inline)) void dispatchT(kvsimSim *s, const kvtRecord *r,
                                                            uint64_t rt, uint64_t *Dp,
                                                            uint64_t *Xp) {
    const uint64_t instr = s->instr, rob = s->cfg.rob, recno = s->recno, ipt = s->ipt;
    uint64_t D = s->t_disp + rt;
    if (instr > rob) {
        /* retire every entry at or before instruction lim; the last one retired
         * (the entry before the head) bounds this dispatch.  It stays in the ring
         * until the next dispatch: the ring holds more than rob entries, and at
         * most rob are live after a record's push. */
        const uint64_t lim = instr - rob;
        const uint64_t *const idx = s->rob_idx;
        const uint64_t tail = s->rob_tail, mask = s->rob_mask;
        uint64_t head = s->rob_head;
        while (head != tail && idx[head & mask] <= lim) head++;
        if (head) {
            const uint64_t h = (head - 1) & mask;
            const uint64_t b = s->rob_ret[h] + (lim - idx[h]) * ipt;
            const uint64_t stall = b > D ? b - D : 0; /* no branch to mispredict */
            const uint8_t cls = s->rob_cls[h];
            s->rob_head = head;
            s->st->stall_rob[cls] += stall;
            D += stall;
        }
    }
    /* a store needs a store-buffer entry; with a store buffer, its address (and so
     * its read-for-ownership) waits for its producer as a load's does */
    const int sb = s->cfg.store_buffer != 0;
    const uint64_t w = s->wst_new + (r->kind == KVT_STORE);
    if (sb && w) D = storeAdmit(s, D, w);
    const uint64_t nsched = s->cfg.scheduler ? (uint64_t)r->gap + 1 : 0;
    if (nsched) D = schedAdmit(s, nsched, D);
    s->t_disp = D;
    uint64_t X = D;
    const uint32_t dep = r->dep;
    if ((r->kind != KVT_STORE || sb) && dep && dep < KVSIM_DEP_WINDOW && dep <= recno) {
        const uint64_t c = s->dep_ring[(recno - dep) % KVSIM_DEP_WINDOW];
        if (c > X) {
            s->st->wait_dep += c - X;
            X = c;
            if (nsched) schedHold(s, nsched, X);
        }
    }
    *Dp = D;
    *Xp = X;
}

/* Timing: in-order retirement of a record of rt ticks that completes at C (cls:
 * what set it), its ROB entry and its completion for the records that depend on it. */
static inline __attribute__((always_inline)) void retireT(kvsimSim *s, uint64_t rt,
                                                          uint64_t C, uint32_t cls,
                                                          const int fast, Batch *bt) {
    const uint64_t r0 = s->r_last, instr = s->instr, recno = s->recno;
    if (s->wst) workCommit(s, r0 + rt); /* the gap's stores, before the record's own */
    const uint64_t tail = s->rob_tail, t = tail & s->rob_mask;
    uint64_t *const ridx = s->rob_idx, *const rret = s->rob_ret;
    uint8_t *const rcls = s->rob_cls;
    kvsimStats *const st = s->st;
    const uint32_t phase = s->phase;
    uint64_t R = r0 + rt;
    /* the cause of a retire time: this op's own service level if its completion
     * set it, else whatever held up the op before it (in-order retirement) */
    const uint8_t cause = C > R ? (uint8_t)cls : s->last_cause;
    if (C > R) R = C;
    s->last_cause = cause;
    s->r_last = R;
    s->rob_tail = tail + 1;
    s->dep_ring[recno % KVSIM_DEP_WINDOW] = C;
    ridx[t] = instr;
    rret[t] = R;
    rcls[t] = cause;
    if (fast) {
        bt->ticks += R - r0;
    } else {
        st->ticks += R - r0;
        st->phase[phase].ticks += R - r0;
    }
}

#endif /* KVSIM_TIMING_H */
