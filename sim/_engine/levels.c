/*
 * levels.c -- the level passes of the common configuration (s->fast: every
 * level LRU with ranks and non-inclusive, no TLB, no hardware prefetchers),
 * level by level.
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
 *
 * The level passes and the jobs of a part (Part, engine_impl.h: one thread's
 * portion of the sets) are here; segments.c cuts the records into segments,
 * divides them between threads and runs the timing pass.  Terms: the glossary
 * at the top of engine.c.
 */
#include <stdlib.h>

#include "engine_impl.h"
#include "timing.h"

#ifndef LOOKAHEAD
#define LOOKAHEAD 8
#endif
static void levelPass(kvsimSim *s, Part *P, uint32_t k);

/* Level k takes part P's whole queue (requests from above, in order).  `pf`:
 * prefetch the set blocks ahead (not for L1, whose blocks stay in the host
 * caches); `last`: the level below is memory; `track`: note each piece's
 * serving level and prefetch hit (timing).  All three are constants in each
 * copy. */
static inline __attribute__((always_inline)) void levelPassT(kvsimSim *s, Part *P, uint32_t k,
                                                             const int pf, const int last,
                                                             const int track) {
    const int l1 = !pf; /* only L1 skips the look-ahead */
    Level *const L = &s->lv[k];
    const QEnt *const in = P->q[k];
    const uint32_t nin = P->qn[k];
    QEnt *const out = last ? NULL : P->q[k + 1];
    uint32_t nout = last ? 0 : P->qn[k + 1];
    uint8_t *const blk = L->blk;
    const uint64_t mask = L->set_mask, stride = L->stride;
    const uint32_t ways = L->ways, wmask = L->wmask;
    const uint32_t nlines = L->nlines;
    const uint32_t room = s->qcap - 2; /* below this, the next queue has room for two */
    kvsimLevelStats *const ls = P->ls[k];
    uint8_t *const psv = P->psv, *const ppfk = P->ppfk, *const ppfl = P->ppfl;
    uint64_t nmiss = 0, dram_r = 0, dram_w = 0;
    uint32_t evicted = 0;
    for (uint32_t j = 0; j < nin; j++) {
        if (pf && j + LOOKAHEAD < nin) {
            const uint8_t *pb = blk + (in[j + LOOKAHEAD].line & mask) * stride;
            __builtin_prefetch(pb, 1, 3);
            __builtin_prefetch(pb + 64, 1, 3);
            if (nlines == 3) /* 9..16 ways */
                __builtin_prefetch(pb + 128, 1, 3);
            else
                for (uint32_t h = 2; h < nlines; h++) __builtin_prefetch(pb + 64 * h, 1, 3);
        }
        const QEnt e = in[j];
        const uint64_t line = e.line;
        const uint32_t idx = (uint32_t)e.stag * KVSIM_NKINDS + e.kind;
        ls->access[idx]++;
        uint8_t *const b = blk + (line & mask) * stride;
        const uint8_t f = l1 ? fingerprint(line) : e.fp; /* L1 computes it for the others */
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
            kvsimLruRankTouch(b + RK_RANK, ways, hw);
            uint8_t m = b[RK_META + hw];
            if (l1 && e.kind == KVSIM_K_SWPF) ls->pf_redundant[0]++;
            if (track && e.pid != NOPID) psv[e.pid] = (uint8_t)k;
            if (__builtin_expect((m & META_PF_MASK) != 0, 0) && e.kind <= KVSIM_K_STORE) {
                const uint32_t pfk = (m & META_PF_MASK) >> META_PF_SHIFT;
                if (track) { /* useful or late: the timing pass decides */
                    ppfk[e.pid] = (uint8_t)pfk;
                    ppfl[e.pid] = (uint8_t)k;
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
        if (l1 && !track && psv) psv[e.pid] = 1; /* functional notes: L1 misses (markers) */
        uint8_t *const meta = b + RK_META;
        uint8_t *const stg = b + RK_STAG;
        uint32_t way;
        uint64_t vline = 0;
        uint8_t vstag = 0;
        int vdirty = 0;
        if (empty) {
            way = (uint32_t)__builtin_ctz(empty);
        } else {
            way = kvsimLruRankVictimMask(b + RK_RANK, wmask);
            const uint8_t vm = meta[way];
            ls->evictions++;
            evicted = 1;
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
        if (l1 && e.kind == KVSIM_K_SWPF) { /* unused until a demand hits it */
            meta[way] = 1u << META_PF_SHIFT;
            ls->pf_issued[0]++;
        }
        stg[way] = e.stag;
        kvsimLruRankTouch(b + RK_RANK, ways, way);
        if (e.op != OP_WFULL) {
            ls->fetches++;
            if (last) {
                dram_r++;
                if (track && e.pid != NOPID) psv[e.pid] = (uint8_t)s->n;
            } else {
                QEnt *o = &out[nout++];
                memcpy(o, &in[j], sizeof *o);
                o->op = OP_READ;
                if (l1) o->fp = f;
            }
        } else if (track && e.pid != NOPID) {
            psv[e.pid] = (uint8_t)(l1 ? PSV_L1_MISS : k); /* allocated without a fetch */
        }
        if (vdirty) {
            ls->writebacks++;
            if (last) {
                dram_w++;
            } else {
                QEnt *o = &out[nout++];
                o->line = vline;
                o->pid = NOPID;
                o->fp = fingerprint(vline);
                o->op = OP_WFULL;
                o->kind = KVSIM_K_WRITEBACK;
                o->stag = vstag;
            }
        }
        if (!last && nout > room) { /* room for two more: the level below goes first */
            P->qn[k + 1] = nout;
            levelPass(s, P, k + 1);
            nout = 0;
        }
    }
    if (!last) P->qn[k + 1] = nout;
    P->acc[k] += nin;
    P->miss[k] += nmiss;
    P->dram_r += dram_r;
    P->dram_w += dram_w;
    P->evicted |= evicted << k;
    P->qn[k] = 0;
}

#define LEVEL_PASS_COPY(name, pf, last, track)                                               \
    static __attribute__((noinline)) void name(kvsimSim *s, Part *P, uint32_t k) {           \
        levelPassT(s, P, k, pf, last, track);                                                \
    }
LEVEL_PASS_COPY(passL1, 0, 0, 0)
LEVEL_PASS_COPY(passL1Only, 0, 1, 0)
LEVEL_PASS_COPY(passMid, 1, 0, 0)
LEVEL_PASS_COPY(passLast, 1, 1, 0)
LEVEL_PASS_COPY(passL1Track, 0, 0, 1)
LEVEL_PASS_COPY(passL1OnlyTrack, 0, 1, 1)
LEVEL_PASS_COPY(passMidTrack, 1, 0, 1)
LEVEL_PASS_COPY(passLastTrack, 1, 1, 1)

static void levelPass(kvsimSim *s, Part *P, uint32_t k) {
    const int last = k + 1 == s->n;
    if (s->cfg.timing) {
        if (k == 0)
            last ? passL1OnlyTrack(s, P, 0) : passL1Track(s, P, 0);
        else
            last ? passLastTrack(s, P, k) : passMidTrack(s, P, k);
    } else {
        if (k == 0)
            last ? passL1Only(s, P, 0) : passL1(s, P, 0);
        else
            last ? passLast(s, P, k) : passMid(s, P, k);
    }
}

/* Queue one line piece at L1 (pid: its index in the segment). */
static inline __attribute__((always_inline)) void queuePiece(kvsimSim *s, Part *P, uint64_t line,
                                                             int op, uint8_t kind, uint8_t stag,
                                                             uint32_t pid) {
    const uint32_t n0 = P->qn[0];
    QEnt *e = &P->q[0][n0];
    e->line = line;
    e->pid = pid;
    e->op = (uint8_t)op;
    e->kind = kind;
    e->stag = stag;
    P->qn[0] = n0 + 1;
    if (n0 + 1 == s->qcap) levelPass(s, P, 0);
}

/* A timing part's job: the pieces of the segment that starts at record a that
 * it takes go through every level; each piece's index in the segment (pid)
 * names its notes.  The segment ends before b, or before the first record the
 * level passes do not take (queued() in segments.c: not a load or store, or
 * one of qcap pieces or more, or one past segcap pieces; markers that a segment
 * holds are left to the timing pass); P->b becomes its end.  Every thread that
 * runs a part of a segment finds the same end. */
static inline __attribute__((always_inline)) void runPartT(kvsimSim *s, Part *P, const int all) {
    const uint32_t lb = s->cfg.line_bits;
    const uint64_t lsz = 1ULL << lb;
    const uint8_t *const ptab = s->ptab;
    const uint64_t pmask = s->pmask, qcap = s->qcap, segcap = s->segcap;
    const uint32_t id = P->id;
    const kvtRecord *const recs = P->recs;
    uint32_t pid = 0;
    size_t i = P->a;
    for (; i < P->b; i++) {
        const kvtRecord *r = &recs[i];
        if (__builtin_expect(r->kind > KVT_STORE, 0)) {
            if (markerInSegment(r)) continue; /* the timing pass takes it */
            break;
        }
        const uint64_t size = r->size ? r->size : 1;
        const uint64_t first = r->addr >> lb, last = (r->addr + size - 1) >> lb;
        if (last - first >= qcap || pid + (last - first + 1) > segcap) break;
        const uint32_t is_store = r->kind == KVT_STORE;
        const uint8_t kind = (uint8_t)is_store; /* KVSIM_K_LOAD or KVSIM_K_STORE */
        if (__builtin_expect(first == last, 1)) { /* one line: a whole-line store is aligned */
            if (all || ptab[first & pmask] == id)
                queuePiece(s, P, first, opOf(is_store, size, lsz, s->cfg.full_line_store_fetch),
                           kind, r->tag, pid);
            pid++;
            continue;
        }
        for (uint64_t line = first; line <= last; line++, pid++)
            if (all || ptab[line & pmask] == id)
                queuePiece(s, P, line, pieceOp(r, line, lb, size, s->cfg.full_line_store_fetch),
                           kind, r->tag, pid);
    }
    P->b = i;
    for (uint32_t k = 0; k < s->n; k++) /* every queued request goes all the way down */
        if (P->qn[k]) levelPass(s, P, k);
}

static __attribute__((noinline)) void runPartAll(kvsimSim *s, Part *P) { runPartT(s, P, 1); }
static __attribute__((noinline)) void runPartOwn(kvsimSim *s, Part *P) { runPartT(s, P, 0); }

/* A functional part's job, its share: its pieces of a segment, queued at L1
 * by the calling thread (segments.c), go through every level. */
static void runShare(kvsimSim *s, Part *P) {
    QEnt *const q0 = P->q[0];
    P->q[0] = P->sh[P->sbuf];
    P->qn[0] = P->shn[P->sbuf];
    if (P->qn[0]) levelPass(s, P, 0);
    P->q[0] = q0;
    for (uint32_t k = 1; k < s->n; k++)
        if (P->qn[k]) levelPass(s, P, k);
}

void engRunPart(kvsimSim *s, Part *P) {
    if (P->sbuf >= 0)
        runShare(s, P);
    else if (P->all) /* one thread's timing, a short segment, a lone worker */
        runPartAll(s, P);
    else /* timing with two or more workers */
        runPartOwn(s, P);
}
