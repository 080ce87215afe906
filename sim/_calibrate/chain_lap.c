/*
 * chain_lap.c -- `kvsim-calibrate chainlap PAGE SIZE STEPS REPEATS KINDS KS NS`: how much of an
 * independent lookup a core overlaps with a dependent chain of loads before it, against the
 * non-memory work between them, in thread CPU time (ns per step).  The check of the
 * simulator's out-of-order window (sim/MODEL.md §6; experiments/chainlap.py writes the same
 * loops as traces and sets them side by side; sim/VALIDATION.md, "The overlap of a
 * dependent chain with the next lookup").
 *
 * Why.  MSET reaches a key's old value through a chain (object, value pointer, sds type
 * byte, malloc_usable_size's size field, the next chunk: c_ref/libc_alloc.h,
 * ksCallSetValueSwap), and the next key's lookup does not depend on it: how far the core
 * runs that lookup while the chain is in memory is the window's reach.  The ROB bounds it,
 * and so may what a ROB entry needs beside itself: a physical register for an instruction
 * that writes one, a scheduler entry for one that waits for an operand.
 *
 * Each line of the SIZE-byte buffer holds two pointers: word 0 the next line of the chain
 * cycle, word 1 the next line of the lookup cycle (two random cycles through every line,
 * Sattolo's algorithm over a fixed-seed xorshift).  Three loops, each STEPS steps:
 *
 *     chain    K x `mov (p), p`;  gap
 *     lookup   LAP_LOOKUP x `mov 8(q), q`;  gap
 *     both     K x `mov (p), p`;  gap;  LAP_LOOKUP x `mov 8(q), q`;  gap
 *
 * then the loop's `sub $1, s; jne` (two instructions, written in the assembly).  p and q
 * carry on from step to step: each stream is one serial chase, and the two never depend
 * on each other.  A window that holds a step runs them side by side and `both` takes what
 * the longer one takes; one that does not runs them in turn and `both` takes their sum.  The
 * overlap the core achieves is chain + lookup - both (ns per step).  LAP_LOOKUP = 2 loads
 * is a hashtable's bucket and entry.
 *
 * The gap is N instructions of one KIND, in the assembly (no compiler choice in it):
 *
 *     nop   N `nop`s: a ROB entry each, no register, no scheduler entry;
 *     add   N/4 rounds of `add g, w0..w3`: four independent chains on registers the loads
 *           do not touch (each writes a register and its flags);
 *     dep   N/4 rounds of `add x, w0..w3`, x the stream's register just loaded (p after the
 *           chain, q after the lookup): each waits for that load in the scheduler.
 *
 * The traces cannot say which kind a gap is (a gap is a count): the three kinds show which
 * of the core's structures sets the reach.  Each repeat runs every point's three loops in
 * turn (lookup, then chain and both for each K: interleaved), after a first repeat, not
 * printed, that warms caches and TLBs.  PAGE is calibrate.c's (4k or 2m); the buffer's share
 * on huge pages is printed as there.  K and N are compiled in (LAP_KS, LAP_NS).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#define LAP_LINE 64
#define LAP_LOOKUP 2 /* loads of the lookup: bucket, entry */
#define LAP_MAX_REPEATS 256

int benchChainLap(int argc, char **argv);

_Static_assert(3 * sizeof(void *) <= LAP_LINE, "a line holds both cycles' pointers");

static double lapNowNs(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static unsigned long long lapNum(const char *s, const char *what) {
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (*s == '\0' || *end != '\0') {
        fprintf(stderr, "kvsim-calibrate: chainlap: %s: expected an integer, got '%s'\n", what, s);
        exit(2);
    }
    return v;
}

#if defined(__x86_64__)

/* --- The loops --- */

#define LAP_STEP_END "sub $1, %[s]\n\tjne 1b\n\t"
#define LAP_CHAIN ".rept %c[k]\n\tmov (%[p]), %[p]\n\t.endr\n\t"
#define LAP_LOOK ".rept %c[l]\n\tmov 8(%[q]), %[q]\n\t.endr\n\t"
#define LAP_GAP_nop(x) ".rept %c[n]\n\tnop\n\t.endr\n\t"
#define LAP_GAP_add(x)                                                                         \
    ".rept %c[n4]\n\tadd %[g], %[w0]\n\tadd %[g], %[w1]\n\tadd %[g], %[w2]\n\tadd %[g], %[w3]\n\t" \
    ".endr\n\t"
#define LAP_GAP_dep(x)                                                                         \
    ".rept %c[n4]\n\tadd %[" #x "], %[w0]\n\tadd %[" #x "], %[w1]\n\tadd %[" #x "], %[w2]\n\t"   \
    "add %[" #x "], %[w3]\n\t.endr\n\t"

#define LAP_BODY_chain(G) LAP_CHAIN G(p)
#define LAP_BODY_lookup(G) LAP_LOOK G(q)
#define LAP_BODY_both(G) LAP_CHAIN G(p) LAP_LOOK G(q)

typedef struct {
    void **p, **q; /* the streams' positions, carried on between calls */
    uint64_t sink;
} lapState;

typedef void (*lapLoop)(lapState *, uint64_t steps);

/* One loop: MODE (chain, lookup, both), gap KIND (nop, add, dep), K chain loads, gap N. */
#define LAP_LOOP(MODE, KIND, K, N)                                                             \
    static void lap_##MODE##_##KIND##_##K##_##N(lapState *st, uint64_t steps) {                \
        _Static_assert((N) % 4 == 0, "a gap is whole rounds of four");                         \
        void **p = st->p, **q = st->q;                                                         \
        uint64_t s = steps, w0 = 0, w1 = 0, w2 = 0, w3 = 0;                                    \
        const uint64_t g = 0x9E3779B97F4A7C15ull;                                              \
        __asm__ volatile("1:\n\t" LAP_BODY_##MODE(LAP_GAP_##KIND) LAP_STEP_END                 \
                         : [p] "+r"(p), [q] "+r"(q), [s] "+r"(s), [w0] "+r"(w0),               \
                           [w1] "+r"(w1), [w2] "+r"(w2), [w3] "+r"(w3)                         \
                         : [g] "r"(g), [k] "i"(K), [l] "i"(LAP_LOOKUP), [n] "i"(N),            \
                           [n4] "i"((N) / 4)                                                   \
                         : "memory", "cc");                                                    \
        st->p = p;                                                                             \
        st->q = q;                                                                             \
        st->sink += w0 ^ w1 ^ w2 ^ w3;                                                         \
    }

/* The compiled points: K (chain loads) and N (gap instructions). */
#define LAP_KS(X, ...) X(__VA_ARGS__, 2) X(__VA_ARGS__, 3) X(__VA_ARGS__, 4) X(__VA_ARGS__, 5)
#define LAP_NS(X, ...)                                                                         \
    X(__VA_ARGS__, 0) X(__VA_ARGS__, 52) X(__VA_ARGS__, 100) X(__VA_ARGS__, 120)                \
    X(__VA_ARGS__, 140) X(__VA_ARGS__, 160) X(__VA_ARGS__, 200) X(__VA_ARGS__, 240)             \
    X(__VA_ARGS__, 260) X(__VA_ARGS__, 280) X(__VA_ARGS__, 300) X(__VA_ARGS__, 400)             \
    X(__VA_ARGS__, 440) X(__VA_ARGS__, 460) X(__VA_ARGS__, 480) X(__VA_ARGS__, 500)             \
    X(__VA_ARGS__, 600)
#define LAP_KINDS(X, ...) X(__VA_ARGS__, nop) X(__VA_ARGS__, add) X(__VA_ARGS__, dep)

/* chain and both for every K, lookup once (its K is 0 in the table) */
#define LAP_DEF_N(KIND, K, N) LAP_LOOP(chain, KIND, K, N) LAP_LOOP(both, KIND, K, N)
#define LAP_DEF_K(KIND, K) LAP_NS(LAP_DEF_N, KIND, K)
#define LAP_DEF_LOOKUP(KIND, N) LAP_LOOP(lookup, KIND, 0, N)
#define LAP_DEF_KIND(_, KIND) LAP_KS(LAP_DEF_K, KIND) LAP_NS(LAP_DEF_LOOKUP, KIND)
LAP_KINDS(LAP_DEF_KIND, _)

typedef struct {
    const char *kind;
    int k, n;
    lapLoop chain, both; /* lookup: chain is the lookup loop, both NULL */
} lapEntry;

#define LAP_ROW_N(KIND, K, N) {#KIND, K, N, lap_chain_##KIND##_##K##_##N, lap_both_##KIND##_##K##_##N},
#define LAP_ROW_K(KIND, K) LAP_NS(LAP_ROW_N, KIND, K)
#define LAP_ROW_LOOKUP(KIND, N) {#KIND, 0, N, lap_lookup_##KIND##_0_##N, NULL},
#define LAP_ROW_KIND(_, KIND) LAP_KS(LAP_ROW_K, KIND) LAP_NS(LAP_ROW_LOOKUP, KIND)
static const lapEntry lapTable[] = {LAP_KINDS(LAP_ROW_KIND, _)};
#define LAP_ENTRIES (sizeof lapTable / sizeof lapTable[0])

static const lapEntry *lapFind(const char *kind, int k, int n) {
    for (size_t i = 0; i < LAP_ENTRIES; i++)
        if (!strcmp(lapTable[i].kind, kind) && lapTable[i].k == k && lapTable[i].n == n)
            return &lapTable[i];
    return NULL;
}

/* --- Setup --- */

static uint64_t lap_rng = 0x2545f4914f6cdd1dull;

static uint64_t lapXorshift(void) {
    uint64_t x = lap_rng;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return lap_rng = x;
}

static long lapHugeKb(void) {
    FILE *f = fopen("/proc/self/smaps_rollup", "r");
    if (!f) return -1;
    char line[256];
    long kb = -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "AnonHugePages: %ld kB", &kb) == 1) break;
    fclose(f);
    return kb;
}

/* Links word `word` of every line of buf into one random cycle (each holds the next line's
 * address, the line's, not the word's); returns its first line. */
static void **lapLink(char *buf, size_t lines, uint32_t *perm, int word) {
    for (size_t i = 0; i < lines; i++) perm[i] = (uint32_t)i;
    for (size_t i = lines - 1; i > 0; i--) {
        size_t j = lapXorshift() % i; /* j < i: one cycle through every line */
        uint32_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    for (size_t i = 0; i < lines; i++)
        ((void **)(buf + (size_t)perm[i] * LAP_LINE))[word] =
            buf + (size_t)perm[(i + 1) % lines] * LAP_LINE;
    return (void **)(buf + (size_t)perm[0] * LAP_LINE);
}

/* Comma-separated list of integers into out (at most max); returns the count. */
static int lapList(const char *s, const char *what, int *out, int max) {
    int n = 0;
    char *copy = strdup(s), *save = NULL;
    for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (n == max) break;
        out[n++] = (int)lapNum(t, what);
    }
    free(copy);
    return n;
}

int benchChainLap(int argc, char **argv) {
    if (argc < 7) return 2;
    int huge;
    if (!strcmp(argv[0], "4k")) huge = 0;
    else if (!strcmp(argv[0], "2m")) huge = 1;
    else {
        fprintf(stderr, "kvsim-calibrate: chainlap: page: expected 4k or 2m, got '%s'\n", argv[0]);
        exit(2);
    }
    const size_t size = (size_t)lapNum(argv[1], "SIZE");
    const uint64_t steps = lapNum(argv[2], "STEPS");
    unsigned long long reps = lapNum(argv[3], "REPEATS");
    if (reps > LAP_MAX_REPEATS) reps = LAP_MAX_REPEATS;
    if (size < 4 * LAP_LINE || size / LAP_LINE > UINT32_MAX || steps == 0 || reps == 0) {
        fprintf(stderr, "kvsim-calibrate: chainlap: SIZE from 256 B to 2^32 lines, STEPS and "
                        "REPEATS at least 1\n");
        exit(2);
    }
    const char *kinds[3];
    int nk = 0;
    {
        char *copy = strdup(argv[4]), *save = NULL;
        for (char *t = strtok_r(copy, ",", &save); t && nk < 3; t = strtok_r(NULL, ",", &save)) {
            if (strcmp(t, "nop") && strcmp(t, "add") && strcmp(t, "dep")) {
                fprintf(stderr, "kvsim-calibrate: chainlap: KINDS: nop, add or dep, got '%s'\n", t);
                exit(2);
            }
            kinds[nk++] = !strcmp(t, "nop") ? "nop" : !strcmp(t, "add") ? "add" : "dep";
        }
        free(copy);
    }
    int ks[8], ns[16];
    const int nks = lapList(argv[5], "KS", ks, 8), nns = lapList(argv[6], "NS", ns, 16);
    if (!nk || !nks || !nns) return 2;
    for (int a = 0; a < nk; a++)
        for (int b = 0; b < nns; b++) {
            int ok = lapFind(kinds[a], 0, ns[b]) != NULL;
            /* (k 0 is the lookup alone, not a chain: it has no "both" loop) */
            for (int c = 0; c < nks; c++)
                ok &= ks[c] > 0 && lapFind(kinds[a], ks[c], ns[b]) != NULL;
            if (!ok) {
                fprintf(stderr, "kvsim-calibrate: chainlap: K in {2, 3, 4, 5} and N in {0, 52, 100, "
                                "120, 140, 160, 200, 240, 260, 280, 300, 400, 440, 460, 480, 500, "
                                "600} are compiled (chain_lap.c)\n");
                exit(2);
            }
        }
    const size_t hp = (size_t)2 << 20, map_len = size + (huge ? hp : 0);
    void *map = mmap(NULL, map_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    const size_t lines = size / LAP_LINE;
    uint32_t *perm = malloc(lines * sizeof *perm);
    if (map == MAP_FAILED || !perm) {
        fprintf(stderr, "kvsim-calibrate: chainlap: cannot map %zu bytes\n", size);
        exit(1);
    }
    char *buf = (char *)(huge ? ((uintptr_t)map + hp - 1) & ~(uintptr_t)(hp - 1) : (uintptr_t)map);
    (void)madvise(buf, size, huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
    const long before = lapHugeKb();
    memset(buf, 0, size);
    const long after = lapHugeKb();
    double hf = before < 0 || after < 0 ? -1.0 : (double)(after - before) * 1024.0 / (double)size;
    if (hf > 1.0) hf = 1.0;
    lapState st = {0};
    st.p = lapLink(buf, lines, perm, 0);
    st.q = lapLink(buf, lines, perm, 1);
    free(perm);
    /* samples: per kind, per N: the lookup, then chain and both per K */
    const int per = 1 + 2 * nks, points = nk * nns * per;
    double *ns_at = malloc((size_t)points * reps * sizeof *ns_at);
    if (!ns_at) {
        fprintf(stderr, "kvsim-calibrate: chainlap: out of memory\n");
        exit(1);
    }
    for (unsigned long long r = 0; r <= reps; r++) /* repeat 0 warms up */
        for (int a = 0; a < nk; a++)
            for (int b = 0; b < nns; b++)
                for (int j = 0; j < per; j++) {
                    const lapEntry *e = lapFind(kinds[a], j ? ks[(j - 1) / 2] : 0, ns[b]);
                    lapLoop f = j == 0 || j % 2 ? e->chain : e->both;
                    double t0 = lapNowNs();
                    f(&st, r ? steps : steps / 8 + 1);
                    double t = lapNowNs() - t0;
                    if (r) ns_at[((size_t)(a * nns + b) * per + j) * reps + r - 1] = t / (double)steps;
                }
    printf("{\"bench\": \"chainlap\", \"page\": \"%s\", \"size\": %zu, \"huge_fraction\": %.3f, "
           "\"steps\": %llu, \"lookup_loads\": %d, \"step_end\": 2, \"points\": [",
           argv[0], size, hf, (unsigned long long)steps, LAP_LOOKUP);
    for (int a = 0; a < nk; a++)
        for (int b = 0; b < nns; b++)
            for (int j = 0; j < per; j++) {
                static const char *const mode[] = {"lookup", "chain", "both"};
                const int m = j == 0 ? 0 : j % 2 ? 1 : 2;
                printf("%s{\"kind\": \"%s\", \"n\": %d, \"mode\": \"%s\", \"k\": %d, \"ns\": [",
                       a || b || j ? ", " : "", kinds[a], ns[b], mode[m], j ? ks[(j - 1) / 2] : 0);
                for (unsigned long long r = 0; r < reps; r++)
                    printf("%s%.3f", r ? ", " : "",
                           ns_at[((size_t)(a * nns + b) * per + j) * reps + r]);
                printf("]}");
            }
    printf("], \"checksum\": %llu}\n",
           (unsigned long long)(st.sink ^ (uint64_t)(uintptr_t)st.p ^ (uint64_t)(uintptr_t)st.q));
    free(ns_at);
    munmap(map, map_len);
    return 0;
}
#else
int benchChainLap(int argc, char **argv) {
    (void)argc;
    (void)argv;
    printf("{\"bench\": \"chainlap\", \"arch\": \"other\", \"points\": []}\n");
    return 0;
}
#endif
