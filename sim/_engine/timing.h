/*
 * timing.h -- the out-of-order timing model's inline building blocks (the model
 * is in engine.c's essay and sim/MODEL.md): per-level latencies, the miss
 * buffers (kept sorted by ready tick), the time of one piece, and a record's
 * dispatch and retirement.  Inline in both record paths (engine.c, levels.c).
 */
#ifndef KVSIM_TIMING_H
#define KVSIM_TIMING_H

#include "engine_impl.h"

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
static inline int poolsFree(const kvsimSim *s, uint32_t from, uint32_t to, uint64_t x) {
    for (uint32_t j = from; j < to; j++) {
        const Level *L = &s->lv[j];
        if (L->mshrs && L->mready[poolEarliest(L)] > x) return 0;
    }
    return 1;
}

/* Latest fill-ready tick of `line` in flight at level sv after tick x, or 0. */
static inline uint64_t inflight(const kvsimSim *s, uint32_t sv, uint64_t line, uint64_t x) {
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

#endif /* KVSIM_TIMING_H */
