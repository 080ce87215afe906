/*
 * levels.c -- the record loops of the common configuration (s->fast: every
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
 */
#include "engine_impl.h"
#include "timing.h"

#ifndef LOOKAHEAD
#define LOOKAHEAD 8
#endif

static void levelPass(kvsimSim *s, uint32_t k);

/* Level k takes its whole queue (requests from above, in order).  `pf`: prefetch
 * the set blocks ahead (not for L1, whose blocks stay in the host caches);
 * `last`: the level below is memory; `track`: note each piece's serving level
 * and prefetch hit (timing).  All three are constants in each copy. */
static inline __attribute__((always_inline)) void levelPassT(kvsimSim *s, uint32_t k,
                                                             const int pf, const int last,
                                                             const int track) {
    const int l1 = !pf; /* only L1 skips the look-ahead */
    Level *const L = &s->lv[k];
    const QEnt *const in = s->q[k];
    const uint32_t nin = s->qn[k];
    QEnt *const out = last ? NULL : s->q[k + 1];
    uint32_t nout = last ? 0 : s->qn[k + 1];
    uint8_t *const blk = L->blk;
    const uint64_t mask = L->set_mask, stride = L->stride;
    const uint32_t ways = L->ways, wmask = L->wmask;
    const uint32_t nlines = L->nlines;
    const uint32_t room = s->qcap - 2; /* below this, the next queue has room for two */
    kvsimLevelStats *const ls = L->ls;
    uint64_t nmiss = 0, dram_r = 0, dram_w = 0;
    int clear_memo = 0;
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
        const uint8_t f = e.fp;
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
            way = kvsimLruRankVictimMask(b + RK_RANK, wmask);
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
                if (track && e.pid != NOPID) s->psv[e.pid] = (uint8_t)s->n;
            } else {
                QEnt *o = &out[nout++];
                memcpy(o, &in[j], sizeof *o);
                o->op = OP_READ;
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
                o->fp = fingerprint(vline);
                o->op = OP_WFULL;
                o->kind = KVSIM_K_WRITEBACK;
                o->stag = vstag;
            }
        }
        if (!last && nout > room) { /* room for two more: the level below goes first */
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
        levelPassT(s, k, pf, last, track);                                                   \
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
    e->fp = fingerprint(line);
    s->qn[0] = n0 + 1;
}

/* A record the queues do not take, once they have drained: a memory record goes
 * the record-by-record way (the same set layout), a marker may switch the phase
 * or the counting, an unknown kind is counted and otherwise ignored. */
static void unqueued(kvsimSim *s, const kvtRecord *r, Batch *bt) {
    if (r->kind < KVT_MARKER) {
        engGeneralRecord(s, r);
    } else if (r->kind == KVT_MARKER) {
        engFlushBatch(s, bt);
        engDoMarker(s, r);
    } else {
        s->st->records++;
        s->recno++;
    }
}

/* Functional: one load or store record's pieces join L1's queue. */
static inline __attribute__((always_inline)) void queueRecord(kvsimSim *s, const kvtRecord *r,
                                                              Batch *bt) {
    const uint32_t lb = s->cfg.line_bits;
    const uint64_t ninstr = (uint64_t)r->gap + 1;
    bt->records++;
    bt->kind[r->kind]++;
    bt->instructions += ninstr; /* (s->instr and s->recno only matter with timing) */
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

void engRunFastFunctional(kvsimSim *s, const kvtRecord *recs, size_t n) {
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
            queuePiece(s, r->addr >> s->cfg.line_bits, OP_READ, KVSIM_K_SWPF, r->tag);
            if (s->qn[0] == s->qcap) levelPass(s, 0);
            continue;
        }
        drainQueues(s); /* every level catches up first */
        unqueued(s, r, &bt);
    }
    drainQueues(s);
    engFlushBatch(s, &bt);
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

void engRunFastTiming(kvsimSim *s, const kvtRecord *recs, size_t n) {
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
        unqueued(s, r, &bt); /* a software prefetch, a huge access, a marker */
    }
    drainQueues(s);
    timePieces(s, recs, a, n, &bt);
    engFlushBatch(s, &bt);
}
