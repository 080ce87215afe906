/*
 * kvsim-calibrate -- microbenchmarks of the machine at hand, for `kvsim calibrate`.
 *
 * Each subcommand runs one measurement and prints one JSON object on stdout; the analysis
 * (medians over rounds, knees, the MLP ceiling, the CPU file) is Python's, in
 * sim/calibrate.py. The program does no analysis, so that what it prints is the raw data.
 *
 *   clock ITERS REPEATS              dependent chains of register multiplies and adds (known
 *                                    latencies), against the thread's CPU time: ns per op
 *   chase PAGE LOADS REPEATS SIZE..  load-to-use latency by pointer chasing over a random
 *                                    cyclic permutation of SIZE bytes' cache lines (ns/load)
 *   mlp PAGE SIZE LOADS REPEATS N..  N independent chases through the same cycle at once:
 *                                    ns per load over all N chains (overlap = lat(1) / this)
 *   l2probe PAGE SIZE DIST LOADS REPEATS  chases whose order gives the L2's prefetchers
 *                                    their triggers, against controls (ns/load; below)
 *   bw PAGE SIZE REPEATS             one-thread streaming read bandwidth (GB/s)
 *   work KIND CHUNK CALLS REPEATS    c_ref's CRC-64 or SipHash over CHUNK-byte pieces of a
 *                                    cache-resident buffer (ns per call): non-memory work
 *   crccost CALLS LEN@OFFSET..       ksCrc64 calls for callgrind to count (crc_cost.c)
 *   sipcost CALLS case|nocase LEN..  ksSiphash or ksSiphashNocase calls, the same (crc_cost.c)
 *   crcstate POOL BATCH REPEATS LEN..  ksCrc64 in the snapshot load's states: over a buffer
 *                                    in the L1, after a copy, a read(2), fread (crc_state.c)
 *   cpuid                            the raw TLB leaves (AMD 0x80000005/6) where x86
 *   storemiss PAGE SIZE N REPEATS K..  stores (and loads) to random lines, K per step
 *                                    (store_miss.c)
 *   copyfetch PAGE BATCH POOL REPEATS SIZE..  copies by method into hot, flushed and evicted
 *                                    destinations: whether a copy fetches them (copy_fetch.c)
 *   chainlap PAGE SIZE STEPS REPEATS KINDS KS NS  a dependent chain, an independent lookup and
 *                                    both, with N instructions between: the window's reach
 *                                    (chain_lap.c)
 *
 * PAGE is "4k" (madvise MADV_NOHUGEPAGE) or "2m" (a 2 MiB-aligned region with
 * MADV_HUGEPAGE). Whether the kernel gave huge pages is not assumed: every buffer's
 * fraction backed by them (AnonHugePages of /proc/self/smaps_rollup, before and after
 * touching it) is printed as "huge_fraction".
 *
 * Conventions: static helpers without prefix; every figure printed is a raw sample, never
 * a summary. The permutation's generator is a fixed-seed xorshift, so runs are repeatable
 * up to the machine's own noise.
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
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include "syscall_bench.h"
#include "siphash.h" /* c_ref's, built beside this file with c_ref/crc64.c and siphash.c */

uint64_t ksCrc64(uint64_t crc, const void *buf, size_t len); /* c_ref/crc64.c */
uint64_t ksCrc64Combine(uint64_t crc1, uint64_t crc2, uint64_t len2);

#define LINE 64
#define HUGE_PAGE (2u * 1024 * 1024)
#define MAX_CHAINS 64

_Static_assert(sizeof(void *) <= LINE, "a line holds one pointer");

/* --- Helpers --- */

/* The thread's CPU time, not wall time: on a machine shared with other work the scheduler
 * takes the CPU away now and then, and that time is not the benchmark's. (A hypervisor's
 * steal time still counts; the rounds' medians and the recorded load average cover it.) */
static double nowNs(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t xorshift(void) {
    uint64_t x = rng_state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return rng_state = x;
}

static long hugeKb(void) {
    FILE *f = fopen("/proc/self/smaps_rollup", "r");
    if (!f) return -1;
    char line[256];
    long kb = -1;
    while (fgets(line, sizeof line, f)) {
        if (sscanf(line, "AnonHugePages: %ld kB", &kb) == 1) break;
    }
    fclose(f);
    return kb;
}

typedef struct {
    void *map; /* what munmap gets */
    size_t map_len;
    char *buf; /* the aligned buffer */
    size_t len;
    double huge_fraction; /* of buf backed by 2 MiB pages; -1 = unknown */
} region;

/* Maps and touches `len` bytes with 4 KiB (huge = 0) or 2 MiB pages asked for (huge = 1).
 * Exits with a one-line message when the memory is not there. */
static region mapRegion(size_t len, int huge) {
    region r = {0};
    /* with huge pages, whole 2 MiB pages: a small set then sits in one page (no TLB misses) */
    if (huge) len = (len + HUGE_PAGE - 1) & ~(size_t)(HUGE_PAGE - 1);
    r.len = len;
    r.map_len = len + (huge ? HUGE_PAGE : 0);
    r.map = mmap(NULL, r.map_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (r.map == MAP_FAILED) {
        fprintf(stderr, "kvsim-calibrate: cannot map %zu bytes\n", len);
        exit(1);
    }
    uintptr_t p = (uintptr_t)r.map;
    if (huge) p = (p + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1);
    r.buf = (char *)p;
    (void)madvise(r.buf, len, huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
    long before = hugeKb();
    memset(r.buf, 1, len);
    long after = hugeKb();
    r.huge_fraction = before < 0 || after < 0 ? -1.0 : (double)(after - before) * 1024.0 / (double)len;
    if (r.huge_fraction > 1.0) r.huge_fraction = 1.0;
    if (r.huge_fraction < 0.0 && before >= 0) r.huge_fraction = 0.0;
    return r;
}

static void unmapRegion(region *r) { munmap(r->map, r->map_len); }

/* Links the first `size` bytes' lines of r into one random cycle (Sattolo's algorithm), each line holding the
 * address of the next; returns the first line.  With order != NULL, *order gets the cycle's
 * line indices in cycle order (the caller frees it): the i-th line along the cycle is
 * r->buf + (*order)[i] * LINE. */
static void **linkCycle(region *r, size_t size, uint32_t **order) {
    size_t n = size / LINE;
    uint32_t *perm = malloc(n * sizeof *perm);
    if (!perm) {
        fprintf(stderr, "kvsim-calibrate: out of memory\n");
        exit(1);
    }
    for (size_t i = 0; i < n; i++) perm[i] = (uint32_t)i;
    for (size_t i = n - 1; i > 0; i--) {
        size_t j = xorshift() % i; /* j < i: one cycle through every line */
        uint32_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    for (size_t i = 0; i < n; i++) {
        void **from = (void **)(r->buf + (size_t)perm[i] * LINE);
        *from = r->buf + (size_t)perm[(i + 1) % n] * LINE;
    }
    void **first = (void **)(r->buf + (size_t)perm[0] * LINE);
    if (order) *order = perm;
    else free(perm);
    return first;
}

static int pageArg(const char *s) {
    if (!strcmp(s, "4k")) return 0;
    if (!strcmp(s, "2m")) return 1;
    fprintf(stderr, "kvsim-calibrate: page: expected 4k or 2m, got '%s'\n", s);
    exit(2);
}

static unsigned long long numArg(const char *s, const char *what) {
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (*s == '\0' || *end != '\0' || v == 0) {
        fprintf(stderr, "kvsim-calibrate: %s: expected a positive integer, got '%s'\n", what, s);
        exit(2);
    }
    return v;
}

/* --- Benchmarks --- */

/* The clock: dependent chains of register operations whose latency no core shortens,
 * against the thread's CPU time.  Each chain is 16 operations per iteration, each taking
 * the previous one's result and a loop-invariant register the compiler cannot see into
 * (inline assembly, so neither the compiler nor a core's renamer can fold it):
 *
 *   x86-64:  "imul" (imul r64, r64: 3 cycles on every x86-64 core kvsim knows, Intel since
 *            Nehalem, AMD since Zen) and "add" (add r64, r64: 1 cycle);
 *   aarch64: "add" (add xd, xd, xm: 1 cycle) and "mul" (mul xd, xd, xm: its latency is
 *            the core's, 2-5 cycles; the analysis reads it off against the add chain);
 *   both:    "addi", an add of the immediate 1: the chain `kvsim calibrate` once took as
 *            one add per cycle, which some cores (Intel's since Golden Cove) run several
 *            per cycle by folding the immediates at rename.  Kept as a probe of that: it
 *            never sets the clock.
 *
 * Prints, per chain, ns per operation (one figure per repeat); the chains alternate within
 * each repeat so that a change of clock during the run reaches all of them.  The clock is
 * the analysis's (sim/calibrate.py clock_estimate): latency / (ns per operation). */
#define REP4(s) s s s s
#define REP16(s) REP4(s) REP4(s) REP4(s) REP4(s)
#define CLOCK_OPS 16
#if defined(__x86_64__)
#define CLOCK_ARCH "x86_64"
#define CHAIN_MUL REP16("imulq %1, %0\n\t")
#define CHAIN_ADD REP16("addq %1, %0\n\t")
#define CHAIN_ADDI REP16("addq $1, %0\n\t")
#define MUL_NAME "imul"
#elif defined(__aarch64__)
#define CLOCK_ARCH "aarch64"
#define CHAIN_MUL REP16("mul %0, %0, %1\n\t")
#define CHAIN_ADD REP16("add %0, %0, %1\n\t")
#define CHAIN_ADDI REP16("add %0, %0, #1\n\t")
#define MUL_NAME "mul"
#endif

#ifdef CLOCK_ARCH
typedef enum { CHAIN_KIND_MUL, CHAIN_KIND_ADD, CHAIN_KIND_ADDI, CHAIN_KINDS } chainKind;
static const char *const chainName[CHAIN_KINDS] = {MUL_NAME, "add", "addi"};

static double chainNs(chainKind kind, unsigned long long iters, uint64_t *sink) {
    uint64_t x = *sink | 1, k = 0x9e3779b97f4a7c15ull;
    __asm__ volatile("" : "+r"(k)); /* opaque to the compiler */
    double t0 = nowNs();
    switch (kind) {
    case CHAIN_KIND_MUL:
        for (unsigned long long i = 0; i < iters; i++) __asm__ volatile(CHAIN_MUL : "+r"(x) : "r"(k));
        break;
    case CHAIN_KIND_ADD:
        for (unsigned long long i = 0; i < iters; i++) __asm__ volatile(CHAIN_ADD : "+r"(x) : "r"(k));
        break;
    default:
        for (unsigned long long i = 0; i < iters; i++) __asm__ volatile(CHAIN_ADDI : "+r"(x) : "r"(k));
        break;
    }
    double t = nowNs() - t0;
    *sink ^= x;
    return t / ((double)iters * CLOCK_OPS);
}

static int benchClock(int argc, char **argv) {
    if (argc < 2) return 2;
    unsigned long long iters = numArg(argv[0], "ITERS"), reps = numArg(argv[1], "REPEATS");
    static double ns[CHAIN_KINDS][1024];
    if (reps > 1024) reps = 1024;
    uint64_t sink = 0;
    for (unsigned long long r = 0; r < reps; r++)
        for (int c = 0; c < CHAIN_KINDS; c++) ns[c][r] = chainNs((chainKind)c, iters, &sink);
    printf("{\"bench\": \"clock\", \"arch\": \"%s\", \"ops_per_iteration\": %d, "
           "\"iterations\": %llu, \"ns_per_op\": {", CLOCK_ARCH, CLOCK_OPS, iters);
    for (int c = 0; c < CHAIN_KINDS; c++) {
        printf("%s\"%s\": [", c ? ", " : "", chainName[c]);
        for (unsigned long long r = 0; r < reps; r++) printf("%s%.5f", r ? ", " : "", ns[c][r]);
        printf("]");
    }
    printf("}, \"checksum\": %llu}\n", (unsigned long long)sink);
    return 0;
}
#else
static int benchClock(int argc, char **argv) {
    (void)argc;
    (void)argv;
    printf("{\"bench\": \"clock\", \"arch\": \"other\", \"ns_per_op\": {}}\n");
    return 0;
}
#endif

/* Samples' worth of loads a chase over at most LOADS lines runs before it is timed. */
#define CHASE_WARM_SAMPLES 4

static double chaseOnce(void **start, unsigned long long loads, void ***end) {
    void **p = start;
    double t0 = nowNs();
    for (unsigned long long i = 0; i < loads; i++) p = (void **)*p;
    double t = nowNs() - t0;
    *end = p;
    return t / (double)loads;
}

static int benchChase(int argc, char **argv) {
    if (argc < 4) return 2;
    int huge = pageArg(argv[0]);
    unsigned long long loads = numArg(argv[1], "LOADS"), reps = numArg(argv[2], "REPEATS");
    printf("{\"bench\": \"chase\", \"page\": \"%s\", \"loads\": %llu, \"points\": [", argv[0], loads);
    for (int k = 3; k < argc; k++) {
        size_t size = (size_t)numArg(argv[k], "SIZE");
        if (size < 2 * LINE) size = 2 * LINE;
        region r = mapRegion(size, huge);
        void **p = linkCycle(&r, size, NULL), **q;
        /* warm caches and TLBs: a set of at most LOADS lines for CHASE_WARM_SAMPLES
         * samples' loads, a larger one for one sample's (at least one pass below LOADS
         * lines). After the chases within L1D, the first chase past it kept some L1D hits
         * for one to two million loads on an Intel guest (sim/VALIDATION.md, finding 19), a
         * state the chases before it left, not this chase's own; the replay simulates the
         * steady state */
        chaseOnce(p, size / LINE <= loads ? CHASE_WARM_SAMPLES * loads : loads, &q);
        printf("%s{\"size\": %zu, \"huge_fraction\": %.3f, \"ns\": [", k > 3 ? ", " : "", size,
               r.huge_fraction);
        for (unsigned long long i = 0; i < reps; i++) {
            double ns = chaseOnce(q, loads, &q);
            printf("%s%.4f", i ? ", " : "", ns);
        }
        printf("], \"end\": %d}", q != NULL);
        unmapRegion(&r);
    }
    printf("]}\n");
    return 0;
}

static int benchMlp(int argc, char **argv) {
    if (argc < 5) return 2;
    int huge = pageArg(argv[0]);
    size_t size = (size_t)numArg(argv[1], "SIZE");
    unsigned long long loads = numArg(argv[2], "LOADS"), reps = numArg(argv[3], "REPEATS");
    region r = mapRegion(size, huge);
    uint32_t *order = NULL;
    (void)linkCycle(&r, size, &order);
    size_t lines = size / LINE;
    printf("{\"bench\": \"mlp\", \"page\": \"%s\", \"size\": %zu, \"huge_fraction\": %.3f, "
           "\"loads\": %llu, \"points\": [", argv[0], size, r.huge_fraction, loads);
    for (int k = 4; k < argc; k++) {
        unsigned long long n = numArg(argv[k], "N");
        if (n > MAX_CHAINS) n = MAX_CHAINS;
        void **chain[MAX_CHAINS];
        /* starting points spread evenly along the one cycle: chains never meet */
        size_t gap = lines / n;
        for (unsigned long long c = 0; c < n; c++)
            chain[c] = (void **)(r.buf + (size_t)order[c * gap] * LINE);
        unsigned long long steps = loads / n;
        printf("%s{\"chains\": %llu, \"ns_per_load\": [", k > 4 ? ", " : "", n);
        for (unsigned long long i = 0; i < reps; i++) {
            double t0 = nowNs();
            for (unsigned long long s = 0; s < steps; s++)
                for (unsigned long long c = 0; c < n; c++) chain[c] = (void **)*chain[c];
            double t = nowNs() - t0;
            printf("%s%.4f", i ? ", " : "", t / (double)(steps * n));
        }
        int ok = 1;
        for (unsigned long long c = 0; c < n; c++) ok &= chain[c] != NULL;
        printf("], \"end\": %d}", ok);
    }
    printf("]}\n");
    free(order);
    unmapRegion(&r);
    return 0;
}

/* --- The L2 prefetch probe --- */

/* `l2probe PAGE SIZE DIST LOADS REPEATS`: whether the L2's prefetchers fire on the demand
 * misses of a random chase (sim/calibrate_prefetch.py reads the figures; the same orders
 * are its traces, so the self-check replays them).  The chase loop is chaseOnce's; only the
 * order of the cycle differs.  Four orders over one SIZE-byte buffer, so every order sees
 * the same frames:
 *
 *   pair            each line's 128-byte pair partner visited DIST loads after it (the
 *                   trigger of an adjacent-line prefetcher: a miss, then its pair line);
 *   stream          three lines ascending within a 4 KiB region, one load after another
 *                   (two misses in one direction: a stream prefetcher's trigger), then
 *                   the line after the last of them DIST to 3 DIST - 2 loads later;
 *   pair_control,   the same regions visited in the same order, each load's line
 *   stream_control  and each lead-to-follow distance the same, but the follow taken from
 *                   the unit half a cycle away: no relation between a lead and its follow.
 *
 * Units and slots.  A 4 KiB region (REGION_LINES lines) holds U units, each a lead (one
 * line, or three) and a follow (one line):
 *
 *   pair    U = 32: unit u leads with line 2u + s and follows with 2u + 1 - s (s a
 *           random bit per unit: half the pairs are visited downwards);
 *   stream  U = 8:  unit u leads with lines 8u, 8u + 3, 8u + 5 (ascending, in three pairs,
 *           strides 3 and 2, so no stride prefetcher confirms a stride) and follows with
 *           8u + 6, the line after the lead's last, in a fourth pair (an adjacent-line
 *           prefetcher fetches none of the lines the order visits: their partners are
 *           8u + 1, 2, 4, 7).
 *
 * The regions' U / 2 slots (r, h) are put in a random order (Fisher-Yates, the fixed-seed
 * xorshift, the same for a probe and its control).  The cycle is that order twice: in the
 * first half slot (r, h) leads with unit (r, h), in the second with unit (r, h + U / 2);
 * it follows with the same unit (the probe) or with the other one (the control).  The
 * slots go in blocks of DIST: the leads of a block's slots, then their follows in the same
 * order.  A pair's follow is then exactly DIST loads after its lead; in the control a
 * line's partner comes half a cycle away.  DIST is to be larger than the L1D's lines (the
 * lead has left the L1D) and well below the L2's (a line prefetched into the L2 is still
 * there), SIZE several times the L2 (a line's previous visit has left the L2): then every
 * follow the probe serves faster than its control is a line a prefetcher brought into the
 * L2 on its lead's miss.
 *
 * Prints, per order, ns per load (one figure per repeat; each repeat times the four orders
 * in turn, each after a sample's loads of warm-up on its own cycle) and its loads per
 * cycle.  SIZE is rounded down to whole regions; the slots of a half, R U / 2, must be a
 * multiple of DIST. */
#define REGION_LINES 64
#define PROBE_SEED 0x2545f4914f6cdd1dull
typedef enum { PROBE_PAIR, PROBE_PAIR_CONTROL, PROBE_STREAM, PROBE_STREAM_CONTROL, PROBE_KINDS } probeKind;
static const char *const probeName[PROBE_KINDS] = {"pair", "pair_control", "stream",
                                                   "stream_control"};
_Static_assert(REGION_LINES * LINE == 4096, "a region is the 4 KiB a stream prefetcher keeps to");
_Static_assert(32 * 2 == REGION_LINES && 8 * 8 == REGION_LINES, "units tile a region");

/* The cycle of `kind` over `regions` regions as line indices in visiting order (seq holds
 * regions * REGION_LINES); returns its length. */
static size_t probeOrder(probeKind kind, size_t regions, size_t dist, uint32_t *seq) {
    const int stream = kind >= PROBE_STREAM, control = kind == PROBE_PAIR_CONTROL ||
                                                       kind == PROBE_STREAM_CONTROL;
    const size_t units = stream ? 8 : 32, half = units / 2, slots = regions * half;
    uint32_t *slot = malloc(slots * sizeof *slot);
    uint8_t *bit = malloc(regions * units);
    if (!slot || !bit) {
        fprintf(stderr, "kvsim-calibrate: out of memory\n");
        exit(1);
    }
    rng_state = PROBE_SEED;
    for (size_t i = 0; i < slots; i++) slot[i] = (uint32_t)i;
    for (size_t i = slots - 1; i > 0; i--) {
        size_t j = xorshift() % (i + 1);
        uint32_t t = slot[i];
        slot[i] = slot[j];
        slot[j] = t;
    }
    for (size_t i = 0; i < regions * units; i++) bit[i] = (uint8_t)(xorshift() >> 63);
    size_t n = 0;
    for (size_t w = 0; w < 2; w++) /* the two halves of the cycle */
        for (size_t b = 0; b < slots; b += dist)
            for (int follow = 0; follow < 2; follow++)
                for (size_t j = b; j < b + dist; j++) {
                    size_t r = slot[j] / half, h = slot[j] % half;
                    size_t u = h + ((w ^ (size_t)(follow & control)) ? half : 0);
                    uint32_t base = (uint32_t)(r * REGION_LINES);
                    if (stream && follow) seq[n++] = base + (uint32_t)(8 * u + 6);
                    else if (stream) {
                        seq[n++] = base + (uint32_t)(8 * u);
                        seq[n++] = base + (uint32_t)(8 * u + 3);
                        seq[n++] = base + (uint32_t)(8 * u + 5);
                    } else {
                        uint32_t s = bit[r * units + u];
                        seq[n++] = base + (uint32_t)(2 * u) + (follow ? 1 - s : s);
                    }
                }
    free(slot);
    free(bit);
    return n;
}

static int benchL2Probe(int argc, char **argv) {
    if (argc < 5) return 2;
    int huge = pageArg(argv[0]);
    size_t size = (size_t)numArg(argv[1], "SIZE") / 4096 * 4096;
    size_t dist = (size_t)numArg(argv[2], "DIST");
    unsigned long long loads = numArg(argv[3], "LOADS"), reps = numArg(argv[4], "REPEATS");
    size_t regions = size / 4096;
    if (regions == 0 || (regions * 4) % dist) { /* the stream's slots: 4 per region */
        fprintf(stderr, "kvsim-calibrate: l2probe: DIST %zu must divide the %zu slots of a "
                        "half cycle (4 per 4 KiB of SIZE)\n", dist, regions * 4);
        exit(2);
    }
    if (reps > 1024) reps = 1024;
    region r = mapRegion(size, huge);
    uint32_t *seq[PROBE_KINDS];
    size_t len[PROBE_KINDS];
    for (int k = 0; k < PROBE_KINDS; k++) {
        seq[k] = malloc(regions * REGION_LINES * sizeof *seq[k]);
        if (!seq[k]) {
            fprintf(stderr, "kvsim-calibrate: out of memory\n");
            exit(1);
        }
        len[k] = probeOrder((probeKind)k, regions, dist, seq[k]);
    }
    static double ns[PROBE_KINDS][1024];
    int ok = 1;
    for (unsigned long long i = 0; i < reps; i++)
        for (int k = 0; k < PROBE_KINDS; k++) {
            for (size_t j = 0; j < len[k]; j++)
                *(void **)(r.buf + (size_t)seq[k][j] * LINE) =
                    r.buf + (size_t)seq[k][(j + 1) % len[k]] * LINE;
            void **q;
            chaseOnce((void **)(r.buf + (size_t)seq[k][0] * LINE), loads, &q);
            ns[k][i] = chaseOnce(q, loads, &q);
            ok &= q != NULL;
        }
    printf("{\"bench\": \"l2probe\", \"page\": \"%s\", \"size\": %zu, \"distance\": %zu, "
           "\"huge_fraction\": %.3f, \"loads\": %llu, \"cycle_loads\": {", argv[0], size, dist,
           r.huge_fraction, loads);
    for (int k = 0; k < PROBE_KINDS; k++)
        printf("%s\"%s\": %zu", k ? ", " : "", probeName[k], len[k]);
    printf("}, \"ns\": {");
    for (int k = 0; k < PROBE_KINDS; k++) {
        printf("%s\"%s\": [", k ? ", " : "", probeName[k]);
        for (unsigned long long i = 0; i < reps; i++) printf("%s%.4f", i ? ", " : "", ns[k][i]);
        printf("]");
    }
    printf("}, \"end\": %d}\n", ok);
    for (int k = 0; k < PROBE_KINDS; k++) free(seq[k]);
    unmapRegion(&r);
    return 0;
}

static int benchBw(int argc, char **argv) {
    if (argc < 3) return 2;
    int huge = pageArg(argv[0]);
    size_t size = (size_t)numArg(argv[1], "SIZE") & ~(size_t)63;
    unsigned long long reps = numArg(argv[2], "REPEATS");
    region r = mapRegion(size, huge);
    const uint64_t *w = (const uint64_t *)r.buf;
    size_t n = size / sizeof *w; /* r.len may be larger (whole huge pages) */
    printf("{\"bench\": \"bw\", \"page\": \"%s\", \"size\": %zu, \"huge_fraction\": %.3f, "
           "\"gbs\": [", argv[0], size, r.huge_fraction);
    uint64_t total = 0;
    for (unsigned long long i = 0; i < reps; i++) {
        uint64_t a = 0, b = 0, c = 0, d = 0;
        double t0 = nowNs();
        for (size_t j = 0; j < n; j += 4) {
            a += w[j];
            b += w[j + 1];
            c += w[j + 2];
            d += w[j + 3];
        }
        double t = nowNs() - t0;
        total += a + b + c + d;
        printf("%s%.4f", i ? ", " : "", (double)size / t);
    }
    printf("], \"checksum\": %llu}\n", (unsigned long long)total);
    unmapRegion(&r);
    return 0;
}

/* c_ref's own non-memory kernels, to time the work the traces count as instruction gaps:
 * "crc64" is the RDB checksum (c_ref/crc64.c, ksCrc64), each call continuing the sum of the
 * one before, as the snapshot loader and writer call it once per field; "crc64combine" is
 * its join of two streams (ksCrc64Combine, CHUNK the second stream's bytes: its matrix
 * products branch on the sum's bits), each call joining the sum so far with the next 8
 * bytes of the buffer as the second stream's sum, as a long call joins its streams;
 * "siphash" is the key
 * hash (c_ref/siphash.c, ksSiphash), calls independent of each other, as one per key.  Each
 * call takes the next CHUNK bytes of a WORK_BUF-byte buffer (back to its start when the
 * next piece does not fit), so buffer and tables stay in the L1/L2 caches and the time is
 * the kernels' own.  Prints ns per call, one figure per repeat; the instructions per call
 * are the traces' (sim/calibrate.py work_instructions), the cycles the clock's. */
#define WORK_BUF (16u * 1024)
static int benchWork(int argc, char **argv) {
    if (argc < 4) return 2;
    int crc = !strcmp(argv[0], "crc64"), combine = !strcmp(argv[0], "crc64combine");
    if (!crc && !combine && strcmp(argv[0], "siphash")) {
        fprintf(stderr, "kvsim-calibrate: work: expected crc64, crc64combine or siphash, got '%s'\n",
                argv[0]);
        exit(2);
    }
    size_t chunk = (size_t)numArg(argv[1], "CHUNK");
    unsigned long long calls = numArg(argv[2], "CALLS"), reps = numArg(argv[3], "REPEATS");
    if (chunk > WORK_BUF && !combine) {
        fprintf(stderr, "kvsim-calibrate: work: CHUNK above %u bytes\n", WORK_BUF);
        exit(2);
    }
    uint8_t *buf = aligned_alloc(LINE, WORK_BUF);
    if (!buf) {
        fprintf(stderr, "kvsim-calibrate: out of memory\n");
        exit(1);
    }
    for (size_t i = 0; i < WORK_BUF; i++) buf[i] = (uint8_t)xorshift();
    uint8_t key[16];
    ksSiphashSeed(1, key);
    uint64_t sum = 0;
    printf("{\"bench\": \"work\", \"kind\": \"%s\", \"chunk\": %zu, \"buffer\": %u, "
           "\"calls\": %llu, \"ns_per_call\": [", argv[0], chunk, WORK_BUF, calls);
    for (unsigned long long r = 0; r <= reps; r++) { /* repeat 0 warms the caches */
        size_t pos = 0;
        double t0 = nowNs();
        for (unsigned long long i = 0; i < calls; i++) {
            if (combine) {
                if (pos + 8 > WORK_BUF) pos = 0;
                uint64_t crc2;
                memcpy(&crc2, buf + pos, 8);
                sum = ksCrc64Combine(sum, crc2, chunk);
                pos += 8;
                continue;
            }
            if (pos + chunk > WORK_BUF) pos = 0;
            if (crc) sum = ksCrc64(sum, buf + pos, chunk);
            else sum += ksSiphash(buf + pos, chunk, key);
            pos += chunk;
        }
        double t = nowNs() - t0;
        if (r) printf("%s%.4f", r > 1 ? ", " : "", t / (double)calls);
    }
    printf("], \"checksum\": %llu}\n", (unsigned long long)sum);
    free(buf);
    return 0;
}

static int benchCpuid(void) {
#if defined(__x86_64__) || defined(__i386__)
    unsigned a5 = 0, b5 = 0, c5 = 0, d5 = 0, a6 = 0, b6 = 0, c6 = 0, d6 = 0, max = 0;
    max = __get_cpuid_max(0x80000000u, NULL);
    if (max >= 0x80000005u) __get_cpuid(0x80000005u, &a5, &b5, &c5, &d5);
    if (max >= 0x80000006u) __get_cpuid(0x80000006u, &a6, &b6, &c6, &d6);
    printf("{\"bench\": \"cpuid\", \"x86\": true, \"max_ext\": %u, "
           "\"l1_tlb_eax\": %u, \"l1_tlb_ebx\": %u, \"l2_tlb_eax\": %u, \"l2_tlb_ebx\": %u}\n",
           max, a5, b5, a6, b6);
#else
    printf("{\"bench\": \"cpuid\", \"x86\": false}\n");
#endif
    return 0;
}

int benchWorkKind(int argc, char **argv); /* work_kinds.c: copy, compare */
int benchStoreMiss(int argc, char **argv); /* store_miss.c */
int benchCopyFetch(int argc, char **argv); /* copy_fetch.c */
int benchChainLap(int argc, char **argv); /* chain_lap.c */
int benchCrcCost(int argc, char **argv); /* crc_cost.c */
int benchSipCost(int argc, char **argv); /* crc_cost.c */
int benchCrcState(int argc, char **argv); /* crc_state.c */

int main(int argc, char **argv) {
    const char *usage = "usage: kvsim-calibrate clock|chase|mlp|l2probe|bw|work|workkind|crccost|sipcost|crcstate|cpuid|syscall|"
                        "sysafter|syspeer|sysbias|storemiss|copyfetch|chainlap ARGS (see calibrate.c, work_kinds.c, "
                        "crc_cost.c, crc_state.c, syscall.c, sysafter.c, syspeer.c, store_miss.c, copy_fetch.c, "
                        "chain_lap.c)\n";
    if (argc < 2) {
        fputs(usage, stderr);
        return 2;
    }
    int rc = 2;
    const char *cmd = argv[1];
    if (!strcmp(cmd, "clock")) rc = benchClock(argc - 2, argv + 2);
    else if (!strcmp(cmd, "chase")) rc = benchChase(argc - 2, argv + 2);
    else if (!strcmp(cmd, "mlp")) rc = benchMlp(argc - 2, argv + 2);
    else if (!strcmp(cmd, "l2probe")) rc = benchL2Probe(argc - 2, argv + 2);
    else if (!strcmp(cmd, "bw")) rc = benchBw(argc - 2, argv + 2);
    else if (!strcmp(cmd, "work")) rc = benchWork(argc - 2, argv + 2);
    else if (!strcmp(cmd, "workkind")) rc = benchWorkKind(argc - 2, argv + 2);
    else if (!strcmp(cmd, "crccost")) rc = benchCrcCost(argc - 2, argv + 2);
    else if (!strcmp(cmd, "sipcost")) rc = benchSipCost(argc - 2, argv + 2);
    else if (!strcmp(cmd, "crcstate")) rc = benchCrcState(argc - 2, argv + 2);
    else if (!strcmp(cmd, "cpuid")) rc = benchCpuid();
    else if (!strcmp(cmd, "storemiss")) rc = benchStoreMiss(argc - 2, argv + 2);
    else if (!strcmp(cmd, "copyfetch")) rc = benchCopyFetch(argc - 2, argv + 2);
    else if (!strcmp(cmd, "chainlap")) rc = benchChainLap(argc - 2, argv + 2);
    else if (!strcmp(cmd, "syscall")) rc = benchSyscall(argc - 2, argv + 2); /* syscall.c */
    else if (!strcmp(cmd, "sysafter")) rc = benchSysAfter(argc - 2, argv + 2); /* sysafter.c */
    else if (!strcmp(cmd, "syspeer")) rc = benchSysPeer(argc - 2, argv + 2); /* syspeer.c */
    else if (!strcmp(cmd, "sysbias")) rc = benchSysBias(argc - 2, argv + 2); /* syspeer.c */
    if (rc == 2) fputs(usage, stderr);
    return rc;
}
