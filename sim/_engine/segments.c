/*
 * segments.c -- the record loops of the common configuration (s->fast; the
 * level passes are in levels.c): segments, threads, and the timing pass.
 *
 * The records go in segments: runs of records the level passes take, at most
 * segcap records and segcap pieces.  A segment also holds the markers that do
 * not switch the phase or the counting: the timing pass, or the replay after a
 * functional segment's parts (finishShares), takes them in order, each with
 * the L1 misses before it counted from per-piece notes.  A record they do not
 * take (a phase or warm-up marker, a software prefetch with timing, a record of
 * qcap pieces or more) is handled by the record-by-record path once every level
 * pass has drained and every worker is idle.
 *
 * Terms (segment, piece, part, share, cut, carry, settle...): the glossary at
 * the top of engine.c.
 *
 * Threads (cfg.threads = T).  A segment's pieces are shared out by set (Part,
 * engine_impl.h), so no two threads ever touch one set of any level, and the
 * states and counts are the same for any T:
 *
 *   functional: the calling thread cuts segment i+1's pieces into one share
 *   per part (one part when T = 1) while worker t runs its share of segment i,
 *   then runs its own (smaller: it also does the cutting) share of segment i+1:
 *
 *       caller    | cut i+1 | part 0 of i+1 | cut i+2 | part 0 of i+2 |
 *       worker t  | part t of i     | part t of i+1         | part t ...
 *
 *   The sets are shared out again at every segment by the pieces per set seen
 *   (rebalance), so a trace that crowds a few sets stays balanced.
 *
 *   timing: T - 1 workers run the levels of segment i (each scans the segment
 *   for its parts' pieces, noting each piece's serving level by its index)
 *   while the calling thread times segment i - 1 (timePieces):
 *
 *       caller    | time i-1 | time i  |
 *       workers   | levels i | levels i+1 |
 *
 * Both pipelines run across kvsimRun calls: the workers keep running their
 * last shares, and a timing call's last segment is timed at the start of the
 * next call (its records copied to s->carry); engSettle finishes both before
 * anything reads the statistics.  Short segments (a trace cut up by software
 * prefetches or phase markers) run on the calling thread alone: below
 * PAR_MIN_* records a hand-over costs more than it saves, and with timing the
 * calling thread overlaps a segment's levels only with the timing of the one
 * before.
 */
#include <stdlib.h>

#include "engine_impl.h"
#include "timing.h"

/* Segments of fewer than qcap / PAR_MIN_DIV records (functional) or segcap /
 * PAR_MIN_DIV_T records (timing) run on the calling thread alone: handing a short
 * segment over costs more than its work (a worker woken from sleep takes tens of
 * microseconds), so a trace cut into short segments would run slower with two
 * threads than with one. */
#define PAR_MIN_DIV 4
#define PAR_MIN_DIV_T 8
/* Functional: the calling thread's portion of the sets against a worker's, as
 * weights (it also cuts the segments into shares, so it takes fewer pieces) */
#define SHARE_CALLER 2
#define SHARE_WORKER 3

/* Does the level-by-level path take record r?  Loads and stores of fewer than
 * qcap pieces (so that a segment holds them), software prefetches that fill
 * L1 when there is no timing, and the markers a segment may hold: the timing pass, or the replay
 * after a functional segment's parts (finishShares), takes them in order, with
 * the L1 misses before them counted from the per-piece notes. */
static inline int queued(const kvsimSim *s, const kvtRecord *r) {
    if (markerInSegment(r)) return 1;
    if (r->kind <= KVT_STORE) {
        const uint32_t lb = s->cfg.line_bits;
        const uint64_t size = r->size ? r->size : 1;
        return ((r->addr + size - 1) >> lb) - (r->addr >> lb) < s->qcap;
    }
    return r->kind == KVT_PREFETCH && !s->cfg.timing && s->cfg.swpf_level == 0;
}

/* Is the segment that starts at record a shorter than `min` records?  (A
 * guess for the timing pipeline: a record queued() refuses comes first.) */
static int segmentShort(const kvsimSim *s, const kvtRecord *recs, size_t a, size_t n,
                        size_t min) {
    const size_t lim = n - a > min ? a + min : n;
    for (size_t i = a; i < lim; i++)
        if (!queued(s, &recs[i])) return 1;
    return lim - a < min;
}

/* Part P's totals since the last call join the levels' (the workers are idle). */
static void collect(kvsimSim *s, Part *P) {
    for (uint32_t k = 0; k < s->n; k++) {
        Level *L = &s->lv[k];
        L->tot_acc += P->acc[k];
        L->tot_miss += P->miss[k];
        P->acc[k] = P->miss[k] = 0;
        if ((P->evicted >> k) & 1) L->memo_key = 0; /* the general path's memo may name a
                                                       replaced way */
    }
    s->st->dram_reads += P->dram_r;
    s->st->dram_writes += P->dram_w;
    P->dram_r = P->dram_w = 0;
    P->evicted = 0;
}

void engMergeParts(kvsimSim *s) {
    for (uint32_t t = 1; t < s->threads; t++) {
        Part *P = &s->part[t];
        if (!P->own_dirty) continue;
        for (uint32_t k = 0; k < s->n; k++) levelStatsMove(s->lv[k].ls, &P->own[k]);
        P->own_dirty = 0;
    }
}

/* Timing: set part t's job, records [a, b) noted in `notes`. */
static void setJob(kvsimSim *s, uint32_t t, const kvtRecord *recs, size_t a, size_t b, int all,
                   uint8_t *notes) {
    Part *P = &s->part[t];
    P->recs = recs;
    P->a = a;
    P->b = b;
    P->all = all;
    P->sbuf = -1;
    P->psv = notes;
    P->ppfk = notes + SEGCAP;
    P->ppfl = notes + 2 * SEGCAP;
    if (t == 0)
        for (uint32_t k = 0; k < s->n; k++) P->ls[k] = s->lv[k].ls; /* follows warm-up */
    else
        P->own_dirty = 1;
}

/* Timing: start the levels of the segment that starts at record a (it ends
 * before record n at the latest), noting into `notes`: on the workers, or (no
 * workers, or a short segment) on this thread, which then returns when they
 * are done.  Returns the part whose b will be the segment's end. */
static uint32_t startLevels(kvsimSim *s, const kvtRecord *recs, size_t a, size_t n,
                            uint8_t *notes) {
    const size_t lim = n - a > s->segcap ? a + s->segcap : n;
    if (s->threads == 1 || segmentShort(s, recs, a, n, s->segcap / PAR_MIN_DIV_T)) {
        setJob(s, 0, recs, a, lim, 1, notes);
        engRunPart(s, &s->part[0]);
        return 0;
    }
    for (uint32_t t = 1; t < s->threads; t++) {
        setJob(s, t, recs, a, lim, s->nlp == 1, notes); /* a lone worker takes all */
        engWorkersPost(s, t);
    }
    return 1;
}

/* Wait for the workers (if any were started) and add up every part's totals. */
static void finishLevels(kvsimSim *s) {
    for (uint32_t t = 1; t < s->threads; t++) engWorkersWait(s, t);
    for (uint32_t t = 0; t < s->threads; t++) collect(s, &s->part[t]);
}

/* A record the queues do not take, with every level idle: a memory record goes
 * the record-by-record way (the same set layout), a marker may switch the phase
 * or the counting, an unknown kind is counted and otherwise ignored. */
static void unqueued(kvsimSim *s, const kvtRecord *r, Batch *bt) {
    if (r->kind < KVT_MARKER) {
        engGeneralRecord(s, r, bt);
    } else if (r->kind == KVT_MARKER) {
        engFlushBatch(s, bt);
        engDoMarker(s, r);
    } else {
        s->st->records++;
        s->recno++;
    }
}

/* Functional: divide the sets between the parts again for the next segment, by
 * the pieces per set seen so far (halved at every segment: recent ones count
 * most), so that the caller gets SHARE_CALLER weights of the pieces and each
 * worker SHARE_WORKER (a trace's accesses can crowd a few sets: with fixed
 * ranges, one part of a c_ref mget trace can get twice another's pieces).
 * Safe between segments: every part of a segment is done before any part of the
 * next starts, and any sharing by set gives the same results. */
static void rebalance(kvsimSim *s) {
    const uint64_t sets = s->pmask + 1;
    uint64_t total = 0;
    for (uint64_t x = 0; x < sets; x++) {
        s->pavg[x] = (s->pavg[x] + s->phist[x]) / 2;
        s->phist[x] = 0;
        total += s->pavg[x];
    }
    if (!total) return;
    const uint64_t units = SHARE_CALLER + SHARE_WORKER * (uint64_t)(s->threads - 1);
    uint64_t bound = total * SHARE_CALLER / units, cum = 0; /* part p's end */
    uint32_t p = 0;
    for (uint64_t x = 0; x < sets; x++) {
        while (p + 1 < s->threads && cum >= bound) {
            p++;
            bound = total * (SHARE_CALLER + SHARE_WORKER * (uint64_t)p) / units;
        }
        s->ptab[x] = (uint8_t)p;
        cum += s->pavg[x];
    }
}

/* Functional: the segment that starts at record a (at most segcap records and
 * pieces, ending before a record queued() refuses) goes, piece by piece, into
 * share `buf` of the part its set belongs to, as L1 requests; its records are
 * counted in bt.
 * Returns the segment's end. */
static size_t cutSegment(kvsimSim *s, const kvtRecord *recs, size_t a, size_t n, uint32_t buf,
                            Batch *bt) {
    /* locals, not fields: the stores through the write pointers may alias s */
    const uint32_t lb = s->cfg.line_bits;
    const uint64_t lsz = 1ULL << lb;
    const uint8_t *const ptab = s->ptab;
    const uint64_t pmask = s->pmask, qcap = s->qcap, segcap = s->segcap;
    const int swpf_l1 = s->cfg.swpf_level == 0;
    const size_t lim = n - a > segcap ? a + segcap : n;
    QEnt *wp[KVSIM_MAX_THREADS]; /* each part's next entry */
    for (uint32_t t = 0; t < s->threads; t++) wp[t] = s->part[t].sh[buf];
    SegMarker *const mk = s->fmk[buf];
    uint32_t nmk = 0, pid = 0;
    /* a piece's request: op, kind and structure tag go in as one word (QEnt's
     * layout, engine_impl.h); L1 fills in the fingerprint */
    uint32_t *const hist = s->phist;
#define PUT(ln, o, kd)                                                                   \
    do {                                                                                 \
        const uint64_t x_ = (ln) & pmask;                                                \
        hist[x_]++;                                                                      \
        QEnt *e_ = wp[ptab[x_]]++;                                                       \
        const uint32_t w_ = (uint32_t)(o) | (uint32_t)(kd) << 8 | (uint32_t)r->tag << 16; \
        e_->line = (ln);                                                                 \
        e_->pid = pid++;                                                                 \
        memcpy(&e_->op, &w_, sizeof w_);                                                 \
    } while (0)
    uint64_t ninstr = 0, nstore = 0, npf = 0, nmulti = 0;
    size_t i = a;
    for (; i < lim; i++) {
        const kvtRecord *r = &recs[i];
        if (__builtin_expect(r->kind <= KVT_STORE, 1)) {
            const uint32_t is_store = r->kind == KVT_STORE; /* = its KVSIM_K_ kind */
            const uint64_t size = r->size ? r->size : 1;
            const uint64_t first = r->addr >> lb, last = (r->addr + size - 1) >> lb;
            if (__builtin_expect(first == last, 1)) { /* a whole-line store is aligned */
                if (pid >= segcap) break;
                ninstr += r->gap;
                nstore += is_store;
                PUT(first, opOf(is_store, size, lsz, s->cfg.full_line_store_fetch), is_store);
                continue;
            }
            if (last - first >= qcap || pid + (last - first + 1) > segcap) break;
            ninstr += r->gap;
            nstore += is_store;
            nmulti++;
            for (uint64_t line = first; line <= last; line++)
                PUT(line, pieceOp(r, line, lb, size, s->cfg.full_line_store_fetch), is_store);
            continue;
        }
        if (markerInSegment(r)) { /* replayed at its place (finishShares) */
            mk[nmk].r = *r;
            mk[nmk++].pos = pid;
            continue;
        }
        if (r->kind != KVT_PREFETCH || !swpf_l1 || pid >= segcap) break;
        /* a software prefetch filling L1: an L1 access that marks its line */
        ninstr += r->gap;
        npf++;
        PUT(r->addr >> lb, OP_READ, KVSIM_K_SWPF);
    }
#undef PUT
    for (uint32_t t = 0; t < s->threads; t++)
        s->part[t].shn[buf] = (uint32_t)(wp[t] - s->part[t].sh[buf]);
    s->nfmk[buf] = nmk;
    const uint64_t nrec = i - a - nmk; /* the markers count themselves (engDoMarker) */
    bt->records += nrec;
    bt->instructions += ninstr + nrec;
    bt->kind[KVT_STORE] += nstore;
    bt->kind[KVT_PREFETCH] += npf;
    bt->kind[KVT_LOAD] += nrec - nstore - npf;
    bt->pieces += pid - npf;
    bt->multiline += nmulti;
    rebalance(s);
    return i;
}

/* Functional: every part takes its share `buf`: on the workers, and this
 * thread's (part 0), or (`alone`: one thread, or a short segment) all on this
 * thread, which returns when its share is done. */
static void runShares(kvsimSim *s, uint32_t buf, int alone) {
    uint8_t *const notes = s->nfmk[buf] ? s->fnotes[buf] : NULL; /* only markers need them */
    if (notes) memset(notes, 0, SEGCAP);
    for (uint32_t t = 0; t < s->threads; t++) {
        Part *P = &s->part[t];
        P->sbuf = (int)buf;
        P->psv = notes;
        if (t == 0)
            for (uint32_t k = 0; k < s->n; k++) P->ls[k] = s->lv[k].ls; /* follows warm-up */
        else
            P->own_dirty = 1;
    }
    for (uint32_t t = 1; t < s->threads; t++) {
        if (alone)
            engRunPart(s, &s->part[t]);
        else
            engWorkersPost(s, t);
    }
    engRunPart(s, &s->part[0]);
}

/* Run marker r as if in its place, where lv[0].tot_miss, which commands read,
 * was `l1`. */
static void markerAt(kvsimSim *s, const kvtRecord *r, uint64_t l1) {
    Level *const L0 = &s->lv[0];
    const uint64_t now = L0->tot_miss;
    L0->tot_miss = l1;
    engDoMarker(s, r);
    L0->tot_miss = now;
}

/* Functional: wait for the shares in flight (1 - fbuf), then
 * replay their segment's markers in order, each with the L1 misses before it. */
static void finishShares(kvsimSim *s) {
    const uint64_t base = s->lv[0].tot_miss;
    finishLevels(s);
    const uint32_t fb = s->fbuf ^ 1, nm = s->nfmk[fb];
    const uint8_t *const notes = s->fnotes[fb];
    uint64_t l1m = 0;
    uint32_t p = 0;
    for (uint32_t j = 0; j < nm; j++) {
        const SegMarker *m = &s->fmk[fb][j];
        for (; p < m->pos; p++) l1m += notes[p];
        markerAt(s, &m->r, base + l1m);
    }
    s->nfmk[fb] = 0;
}

void engRunFastFunctional(kvsimSim *s, const kvtRecord *recs, size_t n) {
    Batch bt;
    memset(&bt, 0, sizeof bt);
    size_t a = 0;
    while (a < n) {
        /* the workers may still run shares 1 - fbuf, from the call before too */
        const size_t b = cutSegment(s, recs, a, n, s->fbuf, &bt);
        if (b > a) {
            finishShares(s);
            runShares(s, s->fbuf, s->threads == 1 || b - a < s->qcap / PAR_MIN_DIV);
            s->fbuf ^= 1;
        }
        if (b < n && !queued(s, &recs[b])) {
            finishShares(s);
            unqueued(s, &recs[b], &bt);
            a = b + 1;
        } else {
            a = b;
        }
    }
    engFlushBatch(s, &bt); /* the workers' last shares may still run: engSettle */
}

/* Timing: the records [a, b) of a segment whose levels have run, through the
 * out-of-order model in order: the same steps as doMemoryT with the serving
 * levels looked up in the notes (psv, ppfk, ppfl: by piece). */
static void timePieces(kvsimSim *s, const kvtRecord *recs, size_t a, size_t b,
                       uint8_t *notes, uint64_t base, Batch *bt) {
    const uint32_t lb = s->cfg.line_bits;
    uint8_t *const psv = notes, *const ppfk = notes + SEGCAP, *const ppfl = notes + 2 * SEGCAP;
    uint32_t pid = 0;
    uint64_t l1m = 0; /* L1 misses so far in the segment (base: before it) */
    for (size_t i = a; i < b; i++) {
        const kvtRecord *r = &recs[i];
        if (r->kind == KVT_MARKER) { /* one a segment holds */
            markerAt(s, r, base + l1m);
            continue;
        }
        const uint64_t ninstr = (uint64_t)r->gap + 1;
        bt->records++;
        bt->kind[r->kind]++;
        bt->instructions += ninstr;
        s->instr += ninstr;
        uint64_t D, X;
        const uint64_t rt = recordTicks(s, r, ninstr);
        dispatchT(s, r, rt, &D, &X);
        uint64_t C = D + s->W;
        uint32_t cls = s->n + 1;
        const int is_store = r->kind == KVT_STORE;
        const int sb_store = is_store && s->cfg.store_buffer; /* timed: its RFO */
        uint64_t arrive = 0;
        const uint64_t size = r->size ? r->size : 1;
        const uint64_t first = r->addr >> lb, last = (r->addr + size - 1) >> lb;
        bt->multiline += last != first;
        bt->pieces += last - first + 1;
        uint32_t svmax = 0;
        for (uint64_t line = first; line <= last; line++, pid++) {
            const uint32_t sv = psv[pid] & PSV_LEVEL;
            l1m += psv[pid] != 0;
            if (sv > svmax) svmax = sv;
            s->pfh_kind = ppfk[pid];
            s->pfh_level = ppfl[pid];
            ppfk[pid] = 0;
            int waited = 0;
            if (!is_store) {
                const uint64_t c = timeAccessBody(s, line, 0, sv, X, &waited);
                if (c > C) C = c;
            } else if (sb_store) {
                const uint64_t c = timeAccessBody(s, line, 0, sv, X, &waited);
                if (c > arrive) arrive = c;
            }
            classifyPf(s, waited);
        }
        if (!is_store) {
            cls = svmax;
            s->st->load_latency += C - X;
            s->st->loads_timed++;
        }
        retireT(s, rt, C, cls, 1, bt);
        if (sb_store) storeCommit(s, arrive);
        s->recno++;
    }
}

/* Timing: segment i's levels run (on the workers, if any) while this thread
 * times segment i - 1; a record the queues do not take waits for both.  The
 * last segment's timing waits for the next call (its records copied to
 * s->carry), so that it overlaps that call's first levels (engSettle times it
 * if no call comes). */
void engRunFastTiming(kvsimSim *s, const kvtRecord *recs, size_t n) {
    Batch bt;
    memset(&bt, 0, sizeof bt);
    size_t a = 0, pa = 0, pb = 0; /* the pending segment: precs[pa, pb), notes[pbuf] */
    uint64_t pbase = 0;           /* and the L1 misses before it */
    const kvtRecord *precs = recs;
    int pend = 0, leveled = 0; /* leveled: the pending segment's levels are done */
    uint32_t buf = 0, pbuf = 0, jp = 0; /* jp: the part whose b ends the pending segment */
    if (s->ncarry) {
        pend = leveled = 1;
        precs = s->carry;
        pb = s->ncarry;
        pbuf = s->cbuf;
        pbase = s->cbase;
        buf = pbuf ^ 1;
        s->ncarry = 0;
    }
    for (;;) {
        if (pend && !leveled) {
            pbase = s->lv[0].tot_miss;
            finishLevels(s);
            a = pb = s->part[jp].b;
        }
        leveled = 0;
        const int more = a < n && queued(s, &recs[a]);
        if (!more && a >= n) { /* the end of the call: carry the pending segment over */
            if (pend) {
                if (precs != s->carry) memcpy(s->carry, precs + pa, (pb - pa) * sizeof *precs);
                s->ncarry = pb - pa;
                s->cbuf = pbuf;
                s->cbase = pbase;
            }
            break;
        }
        if (more) jp = startLevels(s, recs, a, n, s->notes[buf]);
        if (pend) timePieces(s, precs, pa, pb, s->notes[pbuf], pbase, &bt);
        pend = more;
        precs = recs;
        pa = a;
        pbuf = buf;
        buf ^= (uint32_t)more;
        if (!more) { /* a marker, a prefetch, a huge access */
            unqueued(s, &recs[a], &bt);
            a++;
        }
    }
    engFlushBatch(s, &bt);
}

/* Whatever is still in flight after a kvsimRun call: the workers' shares, a
 * carried segment's timing, the workers' per-tag counters. */
void engSettle(kvsimSim *s) {
    engLowerDrain(s); /* the last level's thread (lower.c), off the fast path */
    if (!s->fast) return;
    if (s->cfg.timing)
        finishLevels(s);
    else
        finishShares(s);
    if (s->ncarry) {
        Batch bt;
        memset(&bt, 0, sizeof bt);
        timePieces(s, s->carry, 0, s->ncarry, s->notes[s->cbuf], s->cbase, &bt);
        s->ncarry = 0;
        engFlushBatch(s, &bt);
    }
    engMergeParts(s);
}

/* --- Parts ------------------------------------------------------------------------ */

/* Parts and threads for s->fast (cfg.threads; 0 = 1).  The partition table maps
 * the index bits common to every level (the smallest level's, at most 16 bits)
 * to a part: each part takes a contiguous range of those sets, in proportion to
 * its share.  (Ranges, not alternate sets: two threads writing neighbouring set
 * blocks would lose more to the host's cache-line traffic than they gain.)
 * Functional: T parts, the calling thread's share smaller,
 * rebalanced by the pieces per set at every segment; timing: T - 1 equal parts,
 * one per worker. */
int engPartsInit(kvsimSim *s) {
    const uint32_t T = s->cfg.threads ? s->cfg.threads : 1;
    uint64_t sets = s->lv[0].sets;
    for (uint32_t k = 1; k < s->n; k++)
        if (s->lv[k].sets < sets) sets = s->lv[k].sets;
    if (sets > 4096) sets = 4096; /* rebalance walks them at every segment */
    s->pmask = sets - 1;
    const int timing = s->cfg.timing != 0;
    uint32_t np = timing ? (T > 1 ? T - 1 : 1) : T; /* parts of the level work */
    if (np > sets) np = (uint32_t)sets;
    s->nlp = np;
    s->threads = T == 1 ? 1 : timing ? np + 1 : np;
    s->ptab = calloc(sets, 1);
    s->phist = calloc(sets, sizeof *s->phist);
    s->pavg = calloc(sets, sizeof *s->pavg);
    if (!s->ptab || !s->phist || !s->pavg) return 0;
    const uint64_t w0 = timing ? 1 : SHARE_CALLER, w = timing ? 1 : SHARE_WORKER;
    const uint64_t total = w0 + w * (np - 1);
    for (uint64_t x = 0; x < sets; x++) {
        const uint64_t pos = x * total / sets;
        s->ptab[x] = (uint8_t)(pos < w0 ? 0 : 1 + (pos - w0) / w);
    }
    for (uint32_t t = 0; t < s->threads; t++) {
        Part *P = &s->part[t];
        P->id = timing ? (t ? t - 1 : 0) : t;
        P->sbuf = -1;
        for (uint32_t k = 0; k < s->n; k++)
            if (!(P->q[k] = calloc(QCAP, sizeof(QEnt)))) return 0;
        if (t && !(P->own = calloc(s->n, sizeof(kvsimLevelStats)))) return 0;
        if (t)
            for (uint32_t k = 0; k < s->n; k++) P->ls[k] = &P->own[k];
        if (!timing)
            for (int i = 0; i < 2; i++)
                if (!(P->sh[i] = calloc(SEGCAP, sizeof(QEnt)))) return 0;
    }
    if (!timing)
        for (int i = 0; i < 2; i++)
            if (!(s->fmk[i] = calloc(SEGCAP, sizeof(SegMarker))) ||
                !(s->fnotes[i] = calloc(SEGCAP, 1)))
                return 0;
    if (timing) {
        for (int i = 0; i < 2; i++)
            if (!(s->notes[i] = calloc(3, SEGCAP))) return 0;
        if (!(s->carry = calloc(SEGCAP, sizeof(kvtRecord)))) return 0;
    }
    return s->threads == 1 || engWorkersStart(s);
}

void engPartsFree(kvsimSim *s) {
    engWorkersStop(s);
    for (uint32_t t = 0; t < KVSIM_MAX_THREADS; t++) {
        for (uint32_t k = 0; k < KVSIM_MAX_LEVELS; k++) free(s->part[t].q[k]);
        free(s->part[t].sh[0]);
        free(s->part[t].sh[1]);
        free(s->part[t].own);
    }
    free(s->ptab);
    free(s->phist);
    free(s->pavg);
    free(s->notes[0]);
    free(s->notes[1]);
    free(s->carry);
    for (int i = 0; i < 2; i++) {
        free(s->fmk[i]);
        free(s->fnotes[i]);
    }
}
