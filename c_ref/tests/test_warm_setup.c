/*
 * test_warm_setup.c -- a workload's setup carried into its trace as a warm-up
 * prefix (--warm-setup; setupwarm.c, warmset.c).
 *
 *   test_warmset_matches_model      property: the bounded LRU set against a brute-force
 *                                   model (last touch per line, the most recent max kept)
 *   test_warmset_large              the same at sizes that grow the table and compact the
 *                                   queue many times (a model counting newer touches
 *                                   with a Fenwick tree over time)
 *   test_compact_is_accesses_dedup  differential, every workload and both tables: the
 *                                   compact prefix is the accesses prefix reduced to its
 *                                   distinct lines in last-touch order (dirty if any
 *                                   store, last tag and site)
 *   test_measured_unchanged         the measured records (from PHASE on) are the same
 *                                   with the setup compact, as accesses, or not carried
 *   test_compact_bounded            --warm-setup-lines N keeps the N most recent lines
 *   test_markers_and_determinism    one WARMUP_BEGIN/END pair before PHASE (none: no
 *                                   markers); the same spec traces to the same bytes
 */
#include <stdint.h>
#include <string.h>

#include "../emit.h"
#include "../keyspace.h"
#include "../kvsim_cref.h"
#include "../warmset.h"
#include "../workload.h"
#include "testhelp.h"
#include "traced.h"

/* --- the warm set against a model --------------------------------------------- */

typedef struct {
    uint64_t last; /* touch time + 1; 0 = never */
    int dirty;
    uint8_t tag;
} modelLine;

typedef struct {
    ksWarmLine l[4096];
    int n;
} visited;

static void collect(void *ctx, const ksWarmLine *l) {
    visited *v = ctx;
    if (v->n < 4096) v->l[v->n] = *l;
    v->n++;
}

static int test_warmset_matches_model(void) {
    unsigned long long rng = test_seed;
    for (int round = 0; round < 40; round++) {
        uint64_t max = 1 + test_rand(&rng) % 300, span = 1 + test_rand(&rng) % 600;
        ksWarmSet *s = ksWarmSetNew(max);
        TEST_ASSERT(s != NULL);
        static modelLine m[600];
        memset(m, 0, sizeof(m));
        uint64_t t = 0;
        int touches = 1 + (int)(test_rand(&rng) % 3000);
        for (int i = 0; i < touches; i++) {
            uint64_t line = test_rand(&rng) % span, size = 1 + test_rand(&rng) % 130;
            uint64_t addr = 0x1000 + line * 64 + test_rand(&rng) % 64;
            int store = (int)(test_rand(&rng) % 3 == 0);
            uint8_t tag = (uint8_t)(test_rand(&rng) % 16);
            ksWarmSetTouch(s, addr, size, store, tag, 7);
            for (uint64_t a = addr & ~63ULL; a <= (addr + size - 1); a += 64) {
                modelLine *x = &m[(a - 0x1000) / 64 % 600];
                /* a line that left the model's window is new again: the set dropped it */
                uint64_t newer = 0;
                if (x->last)
                    for (int k = 0; k < 600; k++) newer += m[k].last > x->last;
                if (!x->last || newer >= max) x->dirty = 0;
                x->last = ++t;
                x->dirty |= store;
                x->tag = tag;
                if ((a - 0x1000) / 64 >= 599) break;
            }
        }
        char err[128];
        TEST_ASSERT_MSG(ksWarmSetCheckValid(s, err, sizeof(err)) == 0, "%s", err);
        /* the model's lines by last touch, the most recent max of them */
        visited v = {.n = 0};
        ksWarmSetVisit(s, collect, &v);
        uint64_t live = 0;
        for (int k = 0; k < 600; k++) live += m[k].last != 0;
        uint64_t want = live < max ? live : max;
        TEST_ASSERT_MSG((uint64_t)v.n == want && ksWarmSetCount(s) == want, "%d lines, want %llu", v.n,
                        (unsigned long long)want);
        for (int i = 1; i < v.n; i++) {
            modelLine *a = &m[(v.l[i - 1].line - 0x1000) / 64], *b = &m[(v.l[i].line - 0x1000) / 64];
            TEST_ASSERT_MSG(a->last < b->last, "round %d: visit order broken at %d", round, i);
        }
        for (int i = 0; i < v.n; i++) {
            modelLine *a = &m[(v.l[i].line - 0x1000) / 64];
            TEST_ASSERT(a->dirty == v.l[i].dirty && a->tag == v.l[i].tag && v.l[i].site == 7);
        }
        ksWarmSetFree(s);
    }
    return 0;
}

/* --- the warm set at sizes that resize and compact (warmset.c's layout) ------------ */

#define BIG_SPAN 40000
#define BIG_TOUCH 400000

typedef struct {
    uint32_t last; /* touch time (1-based); 0 = never */
    uint8_t dirty, tag;
    uint16_t site;
} bigLine;

/* A Fenwick tree over touch times 1..BIG_TOUCH * 5: which times are some line's last. */
static int32_t fen[BIG_TOUCH * 5 + 1];

static void fenAdd(uint32_t t, int32_t d) {
    for (; t <= BIG_TOUCH * 5; t += t & -t) fen[t] += d;
}

static int32_t fenSum(uint32_t t) { /* last-touch times <= t */
    int32_t r = 0;
    for (; t; t -= t & -t) r += fen[t];
    return r;
}

typedef struct {
    ksWarmLine *l;
    int n;
} bigVisited;

static void bigCollect(void *ctx, const ksWarmLine *l) {
    bigVisited *v = ctx;
    v->l[v->n++] = *l;
}

static int test_warmset_large(void) {
    unsigned long long rng = test_seed ^ 0x5eedULL;
    static bigLine m[BIG_SPAN];
    static ksWarmLine got[BIG_SPAN];
    for (int round = 0; round < 6; round++) {
        uint64_t span = 100 + test_rand(&rng) % (BIG_SPAN - 100);
        uint64_t max = 1 + test_rand(&rng) % (round % 2 ? span / 4 + 1 : span + 1000);
        ksWarmSet *s = ksWarmSetNew(max);
        TEST_ASSERT(s != NULL);
        memset(m, 0, sizeof(m));
        memset(fen, 0, sizeof(fen));
        uint32_t t = 0;
        int32_t live_times = 0;
        uint64_t hot = 0; /* a neighbourhood touched again and again, as a setup does */
        for (int i = 0; i < BIG_TOUCH; i++) {
            uint64_t r = test_rand(&rng);
            uint64_t line = r % 4 ? (hot + r % 7) % span : r % span;
            if (r % 97 == 0) hot = r % span;
            uint64_t off = line * 64 + test_rand(&rng) % 64, size = 1 + test_rand(&rng) % 200;
            if (off + size > span * 64) size = span * 64 - off; /* inside the model's lines */
            uint64_t addr = 0x7f0000000000ULL + off;
            int store = (int)(r % 5 == 0);
            uint8_t tag = (uint8_t)(r >> 20);
            uint16_t site = (uint16_t)(r >> 40);
            ksWarmSetTouch(s, addr, size, store, tag, site);
            for (uint64_t a = addr & ~63ULL; a <= addr + size - 1; a += 64) {
                bigLine *x = &m[(a - 0x7f0000000000ULL) / 64];
                if (x->last) {
                    int32_t newer = live_times - fenSum(x->last);
                    if ((uint64_t)newer >= max) x->dirty = 0; /* dropped: new again */
                    fenAdd(x->last, -1);
                    live_times--;
                } else {
                    x->dirty = 0;
                }
                x->last = ++t;
                fenAdd(t, 1);
                live_times++;
                x->dirty |= (uint8_t)store;
                x->tag = tag;
                x->site = site;
            }
            if (i % 100000 == 99999) {
                char err[160];
                TEST_ASSERT_MSG(ksWarmSetCheckValid(s, err, sizeof(err)) == 0, "round %d: %s", round, err);
            }
        }
        bigVisited v = {got, 0};
        ksWarmSetVisit(s, bigCollect, &v);
        uint64_t want = (uint64_t)live_times < max ? (uint64_t)live_times : max;
        TEST_ASSERT_MSG((uint64_t)v.n == want && ksWarmSetCount(s) == want, "round %d: %d lines, want %llu",
                        round, v.n, (unsigned long long)want);
        TEST_ASSERT(ksWarmSetDropped(s) + want >= want);
        uint32_t prev = 0;
        for (int i = 0; i < v.n; i++) {
            bigLine *x = &m[(got[i].line - 0x7f0000000000ULL) / 64];
            TEST_ASSERT_MSG(x->last > prev, "round %d: visit order broken at %d", round, i);
            prev = x->last;
            /* the most recent `want` lines: none newer than it is left out */
            TEST_ASSERT((uint64_t)(live_times - fenSum(x->last)) < max);
            TEST_ASSERT_MSG(x->dirty == got[i].dirty && x->tag == got[i].tag && x->site == got[i].site,
                            "round %d: line %d's flags", round, i);
        }
        printf("    round %d: %llu lines, bound %llu: %d kept, %llu dropped\n", round,
               (unsigned long long)span, (unsigned long long)max, v.n,
               (unsigned long long)ksWarmSetDropped(s));
        ksWarmSetFree(s);
    }
    return 0;
}

/* --- traces ----------------------------------------------------------------------- */

static ksWorkloadSpec spec(const char *workload, const char *table, const char *mode) {
    ksWorkloadSpec s;
    ksWorkloadSpecInit(&s, workload);
    s.keys = 3000;
    s.ops = 200;
    s.keys_per_command = 8;
    s.table = table;
    s.seed = test_seed;
    s.warm_setup = mode;
    return s;
}

#define NWORK 7
static const char *WORK[NWORK] = {"iterate", "iterate", "pipeline", "mget", "mset", "mset", "load"};

static void shape(ksWorkloadSpec *s, int w) {
    if (w == 1) s->op = "save";
    if (w == 2) s->set_ratio = 0.2;
    if (w == 5) s->mset_keys = "random";
}

typedef struct {
    kvtRecord *r;
    uint64_t n, begin, end, phase; /* [begin, end): the warm-up's records; phase: PHASE marker */
    int nbegin, nend;
} traced;

static int traceOf(const ksWorkloadSpec *s, traced *t) {
    size_t len;
    uint8_t *b = traceTo(s, &len, 1u << 12);
    if (!b) return -1;
    memset(t, 0, sizeof(*t));
    t->r = records(b, len, &t->n);
    free(b);
    t->phase = UINT64_MAX;
    for (uint64_t i = 0; i < t->n; i++) {
        if (t->r[i].kind != KVT_MARKER) continue;
        if (t->r[i].flags == KVT_MARK_WARMUP_BEGIN && !t->nbegin++) t->begin = i + 1;
        if (t->r[i].flags == KVT_MARK_WARMUP_END && !t->nend++) t->end = i;
        if (t->r[i].flags == KVT_MARK_PHASE && t->phase == UINT64_MAX) t->phase = i;
    }
    return 0;
}

typedef struct {
    uint64_t line, last;
    int dirty;
    uint8_t tag;
    uint16_t site;
} lastTouch;

static int byLineThenTime(const void *a, const void *b) {
    const lastTouch *x = a, *y = b;
    if (x->line != y->line) return x->line < y->line ? -1 : 1;
    return x->last < y->last ? -1 : x->last > y->last;
}

static int byTime(const void *a, const void *b) {
    const lastTouch *x = a, *y = b;
    return x->last < y->last ? -1 : x->last > y->last;
}

/* The distinct lines of r[begin, end) in last-touch order; returns their count. */
static uint64_t dedup(const kvtRecord *r, uint64_t begin, uint64_t end, lastTouch **out) {
    lastTouch *v = malloc(sizeof(lastTouch) * (end - begin + 1));
    uint64_t n = 0;
    for (uint64_t i = begin; i < end; i++) {
        if (r[i].kind == KVT_MARKER) continue;
        v[n++] = (lastTouch){r[i].addr & ~63ULL, i, r[i].kind == KVT_STORE, r[i].tag, r[i].site};
    }
    qsort(v, n, sizeof(*v), byLineThenTime);
    uint64_t k = 0;
    for (uint64_t i = 0; i < n; i++) {
        int dirty = v[i].dirty;
        while (i + 1 < n && v[i + 1].line == v[i].line) dirty |= v[++i].dirty;
        v[k] = v[i];
        v[k++].dirty = dirty;
    }
    qsort(v, k, sizeof(*v), byTime);
    *out = v;
    return k;
}

static int test_compact_is_accesses_dedup(void) {
    const char *tables[2] = {"hashtable", "dict"};
    for (int w = 0; w < NWORK; w++)
        for (int tb = 0; tb < 2; tb++) {
            ksWorkloadSpec a = spec(WORK[w], tables[tb], "accesses"), c = spec(WORK[w], tables[tb], "compact");
            shape(&a, w);
            shape(&c, w);
            traced ta, tc;
            TEST_ASSERT(traceOf(&a, &ta) == 0 && traceOf(&c, &tc) == 0);
            TEST_ASSERT(ta.nbegin == 1 && ta.nend == 1 && tc.nbegin == 1 && tc.nend == 1);
            lastTouch *d;
            uint64_t nd = dedup(ta.r, ta.begin, ta.end, &d), nc = tc.end - tc.begin;
            int same = nd == nc;
            for (uint64_t i = 0; same && i < nc; i++) {
                const kvtRecord *x = &tc.r[tc.begin + i];
                same = x->addr == d[i].line && x->size == 64 && x->kind == (d[i].dirty ? KVT_STORE : KVT_LOAD) &&
                       x->tag == d[i].tag && x->site == d[i].site && x->dep == 0;
                if (!same)
                    printf("    first difference at %llu: %llx/%llx kind %u dirty %d\n", (unsigned long long)i,
                           (unsigned long long)x->addr, (unsigned long long)d[i].line, x->kind, d[i].dirty);
            }
            printf("    %-8s %-5s %-9s: setup %llu accesses, %llu distinct lines, compact %llu records: %s\n",
                   WORK[w], w == 1 ? "save" : "", tables[tb], (unsigned long long)(ta.end - ta.begin),
                   (unsigned long long)nd, (unsigned long long)nc, same ? "the same lines" : "DIFFERENT");
            free(d);
            free(ta.r);
            free(tc.r);
            TEST_ASSERT(same && (nc > 0 || (w == 4))); /* mset new: an empty keyspace */
        }
    return 0;
}

static int test_measured_unchanged(void) {
    for (int w = 0; w < NWORK; w++) {
        traced t[3];
        const char *modes[3] = {"none", "compact", "accesses"};
        for (int m = 0; m < 3; m++) {
            ksWorkloadSpec s = spec(WORK[w], "hashtable", modes[m]);
            shape(&s, w);
            TEST_ASSERT(traceOf(&s, &t[m]) == 0);
            TEST_ASSERT(t[m].phase != UINT64_MAX);
        }
        for (int m = 1; m < 3; m++) {
            uint64_t n0 = t[0].n - t[0].phase, n = t[m].n - t[m].phase;
            TEST_ASSERT_MSG(n0 == n && !memcmp(t[0].r + t[0].phase, t[m].r + t[m].phase, n * sizeof(kvtRecord)),
                            "%s %s: measured records differ (%llu / %llu)", WORK[w], modes[m],
                            (unsigned long long)n0, (unsigned long long)n);
        }
        for (int m = 0; m < 3; m++) free(t[m].r);
    }
    return 0;
}

static int test_compact_bounded(void) {
    ksWorkloadSpec a = spec("iterate", "hashtable", "compact"), b = a;
    b.warm_setup_lines = 1000;
    traced ta, tb;
    TEST_ASSERT(traceOf(&a, &ta) == 0 && traceOf(&b, &tb) == 0);
    uint64_t na = ta.end - ta.begin, nb = tb.end - tb.begin;
    TEST_ASSERT_MSG(na > 1000 && nb == 1000, "%llu and %llu lines", (unsigned long long)na, (unsigned long long)nb);
    /* the same lines, tags and sites; a line dropped and touched again is dirty only
     * from its return (an LRU cache of the bound's size wrote it back meanwhile) */
    for (uint64_t i = 0; i < 1000; i++) {
        const kvtRecord *x = &ta.r[ta.end - 1000 + i], *y = &tb.r[tb.begin + i];
        TEST_ASSERT(x->addr == y->addr && x->tag == y->tag && x->site == y->site);
        TEST_ASSERT(x->kind == y->kind || x->kind == KVT_STORE);
    }
    printf("    iterate: %llu lines unbounded, the last 1000 with --warm-setup-lines 1000\n", (unsigned long long)na);
    free(ta.r);
    free(tb.r);
    return 0;
}

static int test_markers_and_determinism(void) {
    for (int w = 0; w < NWORK; w++) {
        ksWorkloadSpec c = spec(WORK[w], "dict", "compact"), n = spec(WORK[w], "dict", "none");
        shape(&c, w);
        shape(&n, w);
        traced tc, tn;
        TEST_ASSERT(traceOf(&c, &tc) == 0 && traceOf(&n, &tn) == 0);
        TEST_ASSERT(tc.nbegin == 1 && tc.nend == 1 && tc.begin <= tc.end && tc.end < tc.phase);
        TEST_ASSERT(tn.nbegin == 0 && tn.nend == 0);
        size_t l1, l2;
        uint8_t *b1 = traceTo(&c, &l1, 1u << 12), *b2 = traceTo(&c, &l2, 1u << 12);
        TEST_ASSERT(b1 && b2 && l1 == l2 && !memcmp(b1, b2, l1));
        free(b1);
        free(b2);
        free(tc.r);
        free(tn.r);
    }
    return 0;
}

int main(int argc, char **argv) {
    TEST_INIT(argc, argv);
    RUN(test_warmset_matches_model);
    RUN(test_warmset_large);
    RUN(test_compact_is_accesses_dedup);
    RUN(test_measured_unchanged);
    RUN(test_compact_bounded);
    RUN(test_markers_and_determinism);
    return TEST_DONE();
}
