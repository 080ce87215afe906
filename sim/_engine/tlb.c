/*
 * tlb.c -- the L1 DTLB and the STLB (the Tlb type in engine_impl.h), and the
 * TLB thread that translates a block of records ahead of the simulation.
 *
 * A translation depends on nothing but the pages of the pieces before it: not
 * on the caches, the timing or the counting (a software prefetch that the
 * configuration drops on a DTLB miss is dropped before the STLB and fills
 * nothing, whatever else happens).  So engTlbCode reduces a translation to its
 * outcome, a code (TLB_*), and the engine counts the outcome where the record
 * is simulated (engine.c, tlbApply), where a walk is also costed and timed on
 * the walkers (timing.h walkTime): the limit on walks in flight is applied in
 * record order whichever thread found the walk.  With cfg.threads > 1 and a
 * TLB, on the record-by-record path, the TLB belongs to a thread of its own,
 * which runs one block of records ahead of the calling thread:
 *
 *     TLB thread                           calling thread (kvsimRun)
 *     codes of block j -> code[j % 2]      wait for block j's codes
 *     wait until code[(j+1) % 2] is free   simulate block j, taking its codes
 *     codes of block j + 1 ...             mark code[j % 2] free; next block
 *
 * Each piece of a load or store and each software prefetch takes one code, in
 * record order, as engine.c's doMemoryT asks for them; so the counts and times
 * are those of one thread.  The thread codes only the slices of records it
 * pays for (engTlbRun, at the end of this file); the calling thread translates
 * the others itself, in the same TLBs.
 *
 * The TLB thread also trains, ahead, the first L1 prefetcher whose training
 * ignores the caches (a `blind` kind, prefetch.h: the IP-stride prefetcher).
 * Every demand load piece reaches L1, so that prefetcher sees the load pieces
 * in record order, hit or miss, and its candidates depend on them alone: the
 * thread leaves, per load piece, their count and lines, and engine.c's
 * runPrefetchers issues them at the prefetcher's place among the others, as
 * if it had called it.  Only the TLB thread touches that prefetcher's state
 * while it codes a slice.  A block is at most TLB_BLOCK records (or the test
 * hook cfg.queue_cap's count, so that small test traces cross blocks) and ends
 * before a record whose codes would overflow its buffer (TLB_CODES).  The two
 * threads hand blocks over under one mutex: a block is thousands of records, so
 * the hand-over is paid rarely.
 *
 * Conventions: see engine.h; the terms in engine.c's glossary.
 */
#include <pthread.h>
#include <stdlib.h>

#include "engine_impl.h"
#include "fpmatch.h"

static void *xcalloc(size_t n, size_t sz) { return calloc(n ? n : 1, sz ? sz : 1); }

/* --- The TLBs --------------------------------------------------------------- */

int engTlbInit(Tlb *t, uint32_t sets, uint32_t ways) {
    t->sets = sets;
    t->ways = ways;
    t->clock = 0;
    t->fpw = (ways + 15) & ~15u;
    t->fp = xcalloc((size_t)sets * t->fpw, 1);
    t->tags = xcalloc((size_t)sets * ways, sizeof(uint64_t));
    if (ways > 1 && ways <= TLB_RANK_MAX_WAYS) {
        t->rk = malloc((size_t)sets * t->fpw);
        if (t->rk) memset(t->rk, -1, (size_t)sets * t->fpw);
        return t->fp != NULL && t->tags != NULL && t->rk != NULL;
    }
    t->stamp = xcalloc((size_t)sets * ways, sizeof(uint64_t));
    return t->fp != NULL && t->tags != NULL && t->stamp != NULL;
}

/* The way of `page` in its set (tags tg, fingerprints fp), or -1: 16
 * fingerprints per compare, whatever the ways.  An invalid way's fingerprint
 * and the padding's are 0, which no page's is, so no mask is needed for them. */
static inline int64_t tlbFind(const Tlb *t, const uint64_t *tg, const uint8_t *fp,
                              uint64_t page) {
    const uint64_t key = page + 1;
    const uint8_t f = fingerprint(page);
    for (uint32_t g = 0; g < t->fpw; g += 16)
        for (uint32_t m = kvsimFpMatch16(fp + g, f); m; m &= m - 1) {
            const uint32_t w = g + (uint32_t)__builtin_ctz(m);
            if (tg[w] == key) return w;
        }
    return -1;
}

/* Make (set, w) the most recently used entry of its set.  Ranks: an invalid
 * way being filled ranks after every valid one; a valid way of rank r takes the
 * top rank and the ways above r move down one. */
static inline void tlbTouch(Tlb *t, uint64_t set, uint32_t w) {
    if (t->rk == NULL) {
        t->stamp[set * t->ways + w] = ++t->clock;
        return;
    }
    int8_t *rk = t->rk + set * t->fpw;
    const int8_t r = rk[w];
    uint32_t above = 0;
#if defined(__SSE4_2__)
    const __m128i rv = kvsimSplat8((uint8_t)r);
    for (uint32_t g = 0; g < t->fpw; g += 16) {
        __m128i v = _mm_loadu_si128((const __m128i *)(rk + g));
        __m128i gt = _mm_cmpgt_epi8(v, rv); /* padding and invalid ways are -1 */
        above += (uint32_t)__builtin_popcount((uint32_t)_mm_movemask_epi8(gt));
        if (r >= 0) _mm_storeu_si128((__m128i *)(rk + g), _mm_add_epi8(v, gt));
    }
#else
    for (uint32_t j = 0; j < t->fpw; j++)
        if (rk[j] > r) {
            above++;
            if (r >= 0) rk[j]--;
        }
#endif
    rk[w] = (int8_t)(r >= 0 ? r + (int)above : (int)above);
}

/* The least recently used way of a full set of stamps (a set of ranks finds
 * it as it fills: tlbFillLru). */
static inline uint32_t tlbLruStamp(const Tlb *t, uint64_t set) {
    const uint64_t *sp = t->stamp + set * t->ways;
    uint32_t v = 0;
    uint64_t best = sp[0];
    for (uint32_t w = 1; w < t->ways; w++)
        if (sp[w] < best) {
            best = sp[w];
            v = w;
        }
    return v;
}

/* tlbLookup's *victim for a full set of ranks: the least recent way, which
 * tlbFill finds as it ranks the ways (tlbFillLru). */
#define TLB_LRU_WAY UINT32_MAX

/* Look up `page`; on a hit make it the most recent and return 1.  On a miss
 * return 0 and set *victim to the way a fill of `page` takes (tlbFill), in set
 * page & (sets - 1): the lowest invalid way, else the least recently used
 * (TLB_LRU_WAY for a set of ranks).  Entries are never invalidated, so a
 * set's valid ways are a prefix and it is full when its last way is valid. */
static inline int tlbLookup(Tlb *t, uint64_t page, uint32_t *victim) {
    const uint64_t key = page + 1;
    if (t->memo_key == key) /* the last entry touched: the most recent already */
        return 1;
    const uint64_t set = page & (t->sets - 1);
    const uint64_t *tg = t->tags + set * t->ways;
    const uint32_t ways = t->ways;
    const int64_t hit = tlbFind(t, tg, t->fp + set * t->fpw, page);
    if (hit >= 0) {
        tlbTouch(t, set, (uint32_t)hit);
        t->memo_key = key;
        t->memo_set = set;
        t->memo_way = (uint32_t)hit;
        return 1;
    }
    uint32_t v = 0;
    if (tg[ways - 1] == 0) {
        while (tg[v] != 0) v++;
    } else {
        v = t->rk ? TLB_LRU_WAY : tlbLruStamp(t, set);
    }
    *victim = v;
    return 0;
}

/* Fill the least recent way (rank 0) of a full set of ranks, in one pass over
 * them: the victim's search and tlbTouch at once (every other rank moves down one, the way
 * filled takes the top rank, ways - 1).  Returns the way. */
static inline uint32_t tlbFillLru(Tlb *t, uint64_t set) {
    int8_t *rk = t->rk + set * t->fpw;
    uint32_t w = 0;
#if defined(__SSE4_2__)
    uint32_t found = 0;
    const __m128i z = _mm_setzero_si128();
    for (uint32_t g = 0; g < t->fpw; g += 16) {
        const __m128i v = _mm_loadu_si128((const __m128i *)(rk + g));
        const uint32_t m = (uint32_t)_mm_movemask_epi8(_mm_cmpeq_epi8(v, z));
        if (m && !found) {
            w = g + (uint32_t)__builtin_ctz(m);
            found = 1;
        }
        /* ranks above 0 move down one; 0 and the padding's -1 stay */
        _mm_storeu_si128((__m128i *)(rk + g), _mm_add_epi8(v, _mm_cmpgt_epi8(v, z)));
    }
#else
    while (rk[w] != 0) w++;
    for (uint32_t j = 0; j < t->fpw; j++)
        if (rk[j] > 0) rk[j]--;
#endif
    rk[w] = (int8_t)(t->ways - 1);
    return w;
}

/* Install `page` in the way tlbLookup chose. */
static inline void tlbFill(Tlb *t, uint64_t page, uint32_t victim) {
    const uint64_t set = page & (t->sets - 1);
    if (victim == TLB_LRU_WAY)
        victim = tlbFillLru(t, set);
    else
        tlbTouch(t, set, victim);
    t->fp[set * t->fpw + victim] = fingerprint(page);
    t->tags[set * t->ways + victim] = page + 1;
    t->memo_key = page + 1;
    t->memo_set = set;
    t->memo_way = victim;
}

/* The outcome of translating the page of `addr` (TLB_*), with the lookups and
 * fills it makes; no counts.  A software prefetch (is_swpf) that the
 * configuration drops on a DTLB miss leaves both TLBs as they were (but for
 * the DTLB's LRU order, which a lookup that hits changes). */
uint32_t engTlbCode(kvsimSim *s, uint64_t addr, int is_swpf) {
    const uint64_t page = addr >> s->cfg.page_bits;
    uint32_t dv, sv;
    if (tlbLookup(&s->dtlb, page, &dv)) return TLB_HIT;
    s->dtlb.misses++;
    if (is_swpf && s->cfg.swpf_drop_on_tlb_miss) return TLB_DROP;
    uint32_t code = TLB_WALK;
    if (s->cfg.stlb_sets) {
        if (tlbLookup(&s->stlb, page, &sv))
            code = TLB_STLB_HIT;
        else
            tlbFill(&s->stlb, page, sv);
    }
    tlbFill(&s->dtlb, page, dv); /* the STLB's fill left the DTLB as its lookup saw it */
    return code;
}

/* --- The TLB thread ---------------------------------------------------------- */

#define TLB_BLOCK 8192    /* records per block (cfg.queue_cap, the test hook, if set) */
#define TLB_CODES 65536   /* codes per block buffer */
/* a record's pieces: at most 65535 bytes over lines of at least 4 bytes, plus one */
_Static_assert(TLB_CODES > 65535 / 4 + 2, "one record's codes fit a buffer");

struct TlbPipe {
    pthread_t th;
    int started;
    pthread_mutex_t mu;
    pthread_cond_t cv; /* any change below */
    int quit;
    /* the job: the records of one kvsimRun call */
    const kvtRecord *recs;
    size_t n;
    uint64_t job; /* jobs posted (the thread runs job `job` while seen < job) */
    uint64_t produced, consumed; /* blocks of the job coded and simulated */
    size_t end[2];        /* block j ends before record end[j % 2] */
    uint8_t *code[2];     /* its codes */
    /* s->ahead_pf >= 0: per load piece of the block, the count of that
     * prefetcher's candidates (pn) and their lines, in order (pc) */
    uint8_t *pn[2];
    uint64_t *pc[2];
};

/* The codes of records [a, ...) into buf: up to TLB_BLOCK records, stopping
 * before one whose codes would not fit.  With s->ahead_pf >= 0, also that
 * prefetcher's training on each load piece (engine.c runPrefetchers would
 * call it for every one: it is at L1), its candidate counts into pn and lines
 * into pc (at most TLB_CODES counts, as many as the codes, of at most the
 * prefetcher's degree each).  Returns the block's end. */
static size_t codeBlock(kvsimSim *s, const kvtRecord *recs, size_t a, size_t n, uint8_t *buf,
                        uint8_t *pn, uint64_t *pc) {
    const uint32_t lb = s->cfg.line_bits, pb = s->cfg.page_bits;
    const size_t blk = s->cfg.queue_cap ? s->cfg.queue_cap : TLB_BLOCK; /* the test hook */
    const size_t b = n - a > blk ? a + blk : n;
    Prefetcher *const A = s->ahead_pf >= 0 ? &s->pf[s->ahead_pf] : NULL;
    size_t nc = 0, i = a;
    for (; i < b; i++) {
        const kvtRecord *r = &recs[i];
        if (r->kind == KVT_PREFETCH) {
            if (nc + 1 > TLB_CODES) break;
            buf[nc++] = (uint8_t)engTlbCode(s, r->addr, 1);
        } else if (r->kind < KVT_MARKER) {
            const uint64_t size = r->size ? r->size : 1;
            const uint64_t first = r->addr >> lb, last = (r->addr + size - 1) >> lb;
            /* an access wrapping past 2^64 (the reader refuses it; kvsimRun's caller
             * may not) has no pieces in engine.c's loop, so no codes here */
            const uint64_t pieces = last >= first ? last - first + 1 : 0;
            if (nc + pieces > TLB_CODES) break;
            const int train = A != NULL && r->kind == KVT_LOAD;
            const uint32_t key = ((uint32_t)r->tag << 16) | r->site;
            for (uint64_t line = first; line <= last; line++) {
                const uint64_t a0 = line << lb, x = r->addr > a0 ? r->addr : a0;
                if (train) { /* pn has a count for each code, pc room for each's degree */
                    const uint32_t np = A->operate(A->state, &A->cfg, engPhys(s, line), 0,
                                                   key, pc);
                    *pn++ = (uint8_t)np;
                    pc += np;
                }
                buf[nc++] = (x >> pb) + 1 == s->dtlb.memo_key ? TLB_HIT
                                                                : (uint8_t)engTlbCode(s, x, 0);
            }
        }
    }
    return i;
}

static void *tlbMain(void *arg) {
    kvsimSim *s = arg;
    struct TlbPipe *P = s->tp;
    uint64_t seen = 0;
    pthread_mutex_lock(&P->mu);
    for (;;) {
        while (!P->quit && P->job == seen) pthread_cond_wait(&P->cv, &P->mu);
        if (P->quit) break;
        seen = P->job;
        const kvtRecord *recs = P->recs;
        const size_t n = P->n;
        size_t a = 0;
        for (uint64_t j = 0; a < n; j++) {
            while (!P->quit && j - P->consumed >= 2) pthread_cond_wait(&P->cv, &P->mu);
            if (P->quit) break;
            uint8_t *buf = P->code[j % 2], *pn = P->pn[j % 2];
            uint64_t *pc = P->pc[j % 2];
            pthread_mutex_unlock(&P->mu);
            a = codeBlock(s, recs, a, n, buf, pn, pc);
            pthread_mutex_lock(&P->mu);
            P->end[j % 2] = a;
            P->produced = j + 1;
            pthread_cond_broadcast(&P->cv);
        }
    }
    pthread_mutex_unlock(&P->mu);
    return NULL;
}

int engTlbPipeStart(kvsimSim *s) {
    struct TlbPipe *P = calloc(1, sizeof *P);
    if (!P) return 0;
    s->tp = P;
    pthread_mutex_init(&P->mu, NULL);
    pthread_cond_init(&P->cv, NULL);
    P->code[0] = xcalloc(TLB_CODES, 1);
    P->code[1] = xcalloc(TLB_CODES, 1);
    if (!P->code[0] || !P->code[1]) return 0;
    for (uint32_t p = 0; p < s->cfg.nprefetchers && s->ahead_pf < 0; p++)
        if (s->pf[p].level == 0 && s->pf[p].ops->blind) s->ahead_pf = (int)p;
    if (s->ahead_pf >= 0) {
        const size_t deg = s->pf[s->ahead_pf].cfg.degree;
        s->pf_from_rest = leastFromBut(s, s->ahead_pf);
        for (int h = 0; h < 2; h++) {
            P->pn[h] = xcalloc(TLB_CODES, 1);
            P->pc[h] = xcalloc(TLB_CODES * deg, sizeof(uint64_t));
            if (!P->pn[h] || !P->pc[h]) return 0;
        }
    }
    if (pthread_create(&P->th, NULL, tlbMain, s) != 0) return 0;
    P->started = 1;
    return 1;
}

static void engTlbPipeRun(kvsimSim *s, const kvtRecord *recs, size_t n) {
    struct TlbPipe *P = s->tp;
    if (n == 0) return;
    pthread_mutex_lock(&P->mu);
    P->recs = recs;
    P->n = n;
    P->produced = P->consumed = 0;
    P->job++;
    pthread_cond_broadcast(&P->cv);
    size_t a = 0;
    for (uint64_t j = 0; a < n; j++) {
        while (P->produced <= j) pthread_cond_wait(&P->cv, &P->mu);
        const size_t b = P->end[j % 2];
        pthread_mutex_unlock(&P->mu);
        s->tcode = P->code[j % 2];
        s->tpn = P->pn[j % 2]; /* NULL without s->ahead_pf */
        s->tpc = P->pc[j % 2];
        engRunRecords(s, recs + a, b - a);
        s->tcode = NULL;
        s->tpn = NULL;
        s->tpc = NULL;
        a = b;
        pthread_mutex_lock(&P->mu);
        P->consumed = j + 1;
        pthread_cond_broadcast(&P->cv);
    }
    pthread_mutex_unlock(&P->mu);
}

void engTlbPipeStop(kvsimSim *s) {
    struct TlbPipe *P = s->tp;
    if (!P) return;
    if (P->started) {
        pthread_mutex_lock(&P->mu);
        P->quit = 1;
        pthread_cond_broadcast(&P->cv);
        pthread_mutex_unlock(&P->mu);
        pthread_join(P->th, NULL);
    }
    pthread_mutex_destroy(&P->mu);
    pthread_cond_destroy(&P->cv);
    for (int h = 0; h < 2; h++) {
        free(P->code[h]);
        free(P->pn[h]);
        free(P->pc[h]);
    }
    free(P);
    s->tp = NULL;
}

/* kvsimRun with a TLB thread: slice by slice, the thread codes the slice ahead
 * (engTlbPipeRun) or the calling thread translates as it simulates (the
 * record-by-record loop without codes), as the last TLB_SLICE records chose:
 * the thread, when they missed the DTLB at least once in every
 * TLB_THREAD_RECORDS_PER_MISS.  A DTLB miss is most of a translation's work
 * (the STLB lookup, the fills); below that rate the work the thread takes
 * off is smaller than what it costs: the hand-overs, and the core it takes
 * from the trace's decoding (sim/_intake.py), which `kvsim simulate` runs
 * beside the engine.  Measured whole-process (`kvsim simulate --threads 1`
 * against 2, sim/README.md "Speed"): the c_ref traces (0.1-0.3 DTLB misses
 * per record) ran faster without the thread, random addresses (one miss per
 * record) with it or alike.  The first TLB_SLICE records run without it.
 * Either way the translations, so every count and time, are the same: only
 * the wall time differs. */
#define TLB_SLICE 65536 /* records per choice (4 blocks of the test hook cfg.queue_cap) */
#define TLB_THREAD_RECORDS_PER_MISS 2

void engTlbRun(kvsimSim *s, const kvtRecord *recs, size_t n) {
    const uint64_t slice = s->cfg.queue_cap ? 4 * (uint64_t)s->cfg.queue_cap : TLB_SLICE;
    for (size_t a = 0; a < n;) {
        /* to the end of the slice the choice holds for */
        const uint64_t left = slice - s->tp_seen;
        const size_t b = n - a > left ? a + left : n;
        const uint64_t m0 = s->dtlb.misses;
        if (s->tp_next) {
            engTlbPipeRun(s, recs + a, b - a);
            s->tp_ran = 1;
        } else {
            engRunRecords(s, recs + a, b - a);
        }
        s->tp_seen += b - a;
        s->tp_missed += s->dtlb.misses - m0;
        if (s->tp_seen == slice) {
            s->tp_next = s->tp_missed * TLB_THREAD_RECORDS_PER_MISS >= slice;
            s->tp_seen = s->tp_missed = 0;
        }
        a = b;
    }
}
