/*
 * store_miss.c -- `kvsim-calibrate storemiss PAGE SIZE ACCESSES REPEATS K...`: stores to
 * random lines of a SIZE-byte buffer, k independent ones per step with a little work between
 * the steps, and the same loop with loads in place of the stores, in thread CPU time (ns per
 * access).  The check of the simulator's store buffer (sim/MODEL.md §6; sim/storemiss.py
 * writes the same loop as a trace, experiments/storebuf.py sets the two side by side).
 *
 * Access i (counting on from one loop to the next) goes to the line
 *
 *     ((i * 0x9E3779B97F4A7C15) mod 2^64) >> (64 - log2(SIZE / 64))
 *
 * of the buffer (SIZE a power of two): a multiplicative hash of a counter, so no access
 * depends on another one's value and none reads memory for its address.  Each access is six
 * instructions, written in assembly so that the count does not depend on the compiler:
 *
 *     mov i, t; imul G, t; shr %cl, t; shl $6, t; ACCESS; add $1, i
 *
 * ACCESS is `mov i, (buf, t)` (a store of 8 bytes) or `add (buf, t), acc` (a load).  A step is
 * K accesses then STOREMISS_WORK adds on four registers (chains of two), and the loop's own
 * `sub $1; jne` (two instructions, read from `objdump -d` at cc -O2; sim/storemiss.py
 * LOOP_GAP).  Every repeat of every K runs the store loop then the load loop; a first repeat,
 * not printed, warms the caches and TLBs after the buffer is touched.  PAGE is calibrate.c's
 * (4k or 2m) and the buffer's share on huge pages is printed as there.
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

#define STOREMISS_LINE 64
#define STOREMISS_WORK 8 /* adds per step (STEP_WORK) */
#define STOREMISS_HASH 0x9E3779B97F4A7C15ull

int benchStoreMiss(int argc, char **argv);

static double smNowNs(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static unsigned long long smNum(const char *s, const char *what) {
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (*s == '\0' || *end != '\0' || v == 0) {
        fprintf(stderr, "kvsim-calibrate: storemiss: %s: expected a positive integer, got '%s'\n",
                what, s);
        exit(2);
    }
    return v;
}

static long smHugeKb(void) {
    FILE *f = fopen("/proc/self/smaps_rollup", "r");
    if (!f) return -1;
    char line[256];
    long kb = -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "AnonHugePages: %ld kB", &kb) == 1) break;
    fclose(f);
    return kb;
}

#if defined(__x86_64__)
#define R4(s) s s s s
#define STORE_BODY                                                                             \
    "mov %[i], %[t]\n\t"                                                                       \
    "imul %[g], %[t]\n\t"                                                                      \
    "shr %%cl, %[t]\n\t"                                                                       \
    "shl $6, %[t]\n\t"                                                                         \
    "mov %[i], (%[b],%[t])\n\t"                                                                \
    "add $1, %[i]\n\t"
#define LOAD_BODY                                                                              \
    "mov %[i], %[t]\n\t"                                                                       \
    "imul %[g], %[t]\n\t"                                                                      \
    "shr %%cl, %[t]\n\t"                                                                       \
    "shl $6, %[t]\n\t"                                                                         \
    "add (%[b],%[t]), %[acc]\n\t"                                                              \
    "add $1, %[i]\n\t"
#define STEP_WORK                                                                              \
    "add %[g], %[w0]\n\tadd %[g], %[w1]\n\tadd %[g], %[w2]\n\tadd %[g], %[w3]\n\t"             \
    "add %[g], %[w0]\n\tadd %[g], %[w1]\n\tadd %[g], %[w2]\n\tadd %[g], %[w3]\n\t"
_Static_assert(STOREMISS_WORK == 8, "STEP_WORK is eight adds");

/* One loop of `steps` steps of K accesses (BODY repeated by REP); *ip is the counter. */
#define SM_LOOP(NAME, REP, BODY)                                                               \
    static uint64_t NAME(char *b, uint64_t steps, uint64_t *ip, uint64_t sh) {                 \
        uint64_t i = *ip, t, acc = 0, w0 = 0, w1 = 0, w2 = 0, w3 = 0;                          \
        const uint64_t g = STOREMISS_HASH;                                                     \
        for (uint64_t s = steps; s; s--)                                                       \
            __asm__ volatile(REP(BODY) STEP_WORK                                               \
                             : [i] "+r"(i), [t] "=&r"(t), [acc] "+r"(acc), [w0] "+r"(w0),      \
                               [w1] "+r"(w1), [w2] "+r"(w2), [w3] "+r"(w3)                     \
                             : [g] "r"(g), [b] "r"(b), "c"(sh)                                 \
                             : "memory", "cc");                                                \
        *ip = i;                                                                               \
        return acc ^ w0 ^ w1 ^ w2 ^ w3;                                                        \
    }
#define REP1(s) s
#define REP2(s) s s
#define REP4(s) R4(s)
#define REP8(s) R4(s) R4(s)
#define REP16(s) R4(s) R4(s) R4(s) R4(s)
SM_LOOP(store1, REP1, STORE_BODY)
SM_LOOP(store2, REP2, STORE_BODY)
SM_LOOP(store4, REP4, STORE_BODY)
SM_LOOP(store8, REP8, STORE_BODY)
SM_LOOP(store16, REP16, STORE_BODY)
SM_LOOP(load1, REP1, LOAD_BODY)
SM_LOOP(load2, REP2, LOAD_BODY)
SM_LOOP(load4, REP4, LOAD_BODY)
SM_LOOP(load8, REP8, LOAD_BODY)
SM_LOOP(load16, REP16, LOAD_BODY)

typedef uint64_t (*smLoop)(char *, uint64_t, uint64_t *, uint64_t);

/* The loops of K accesses per step (K one of 1, 2, 4, 8, 16), or NULL. */
static void smLoops(unsigned long long k, smLoop *st, smLoop *ld) {
    static const smLoop stores[] = {store1, store2, store4, store8, store16};
    static const smLoop loads[] = {load1, load2, load4, load8, load16};
    *st = *ld = NULL;
    for (int j = 0; j < 5; j++)
        if (k == 1ull << j) {
            *st = stores[j];
            *ld = loads[j];
        }
}

int benchStoreMiss(int argc, char **argv) {
    if (argc < 5) return 2;
    int huge;
    if (!strcmp(argv[0], "4k")) huge = 0;
    else if (!strcmp(argv[0], "2m")) huge = 1;
    else {
        fprintf(stderr, "kvsim-calibrate: storemiss: page: expected 4k or 2m, got '%s'\n",
                argv[0]);
        exit(2);
    }
    const size_t size = (size_t)smNum(argv[1], "SIZE");
    const unsigned long long accesses = smNum(argv[2], "ACCESSES");
    const unsigned long long reps = smNum(argv[3], "REPEATS");
    if (size < 2 * STOREMISS_LINE || (size & (size - 1))) {
        fprintf(stderr, "kvsim-calibrate: storemiss: SIZE: a power of two of at least 128 "
                        "bytes, got %zu\n", size);
        exit(2);
    }
    for (int a = 4; a < argc; a++) {
        smLoop st, ld;
        smLoops(smNum(argv[a], "K"), &st, &ld);
        if (!st) {
            fprintf(stderr, "kvsim-calibrate: storemiss: K: 1, 2, 4, 8 or 16, got '%s'\n",
                    argv[a]);
            exit(2);
        }
    }
    const size_t hp = (size_t)2 << 20, map_len = size + (huge ? hp : 0);
    void *map = mmap(NULL, map_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (map == MAP_FAILED) {
        fprintf(stderr, "kvsim-calibrate: storemiss: cannot map %zu bytes\n", size);
        exit(1);
    }
    char *buf = (char *)(huge ? ((uintptr_t)map + hp - 1) & ~(uintptr_t)(hp - 1) : (uintptr_t)map);
    (void)madvise(buf, size, huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
    const long before = smHugeKb();
    memset(buf, 1, size);
    const long after = smHugeKb();
    double hf = before < 0 || after < 0 ? -1.0 : (double)(after - before) * 1024.0 / (double)size;
    if (hf > 1.0) hf = 1.0;
    uint64_t sh = 64, lines = size / STOREMISS_LINE;
    while (lines > 1) {
        lines >>= 1;
        sh--;
    }
    uint64_t i = 0, sink = 0;
    printf("{\"bench\": \"storemiss\", \"page\": \"%s\", \"size\": %zu, \"huge_fraction\": %.3f, "
           "\"accesses\": %llu, \"work\": %d, \"points\": [",
           argv[0], size, hf, accesses, STOREMISS_WORK);
    for (int a = 4; a < argc; a++) {
        const unsigned long long k = smNum(argv[a], "K");
        smLoop st, ld;
        smLoops(k, &st, &ld);
        const uint64_t steps = accesses / k;
        double ns_st[256], ns_ld[256];
        const unsigned long long n = reps < 256 ? reps : 256;
        for (unsigned long long r = 0; r <= n; r++) { /* repeat 0 warms up */
            double t0 = smNowNs();
            sink += st(buf, steps, &i, sh);
            double t1 = smNowNs();
            sink += ld(buf, steps, &i, sh);
            double t2 = smNowNs();
            if (r) {
                ns_st[r - 1] = (t1 - t0) / (double)(steps * k);
                ns_ld[r - 1] = (t2 - t1) / (double)(steps * k);
            }
        }
        printf("%s{\"k\": %llu, \"store_ns\": [", a > 4 ? ", " : "", k);
        for (unsigned long long r = 0; r < n; r++) printf("%s%.4f", r ? ", " : "", ns_st[r]);
        printf("], \"load_ns\": [");
        for (unsigned long long r = 0; r < n; r++) printf("%s%.4f", r ? ", " : "", ns_ld[r]);
        printf("]}");
    }
    printf("], \"checksum\": %llu}\n", (unsigned long long)(sink ^ (uint64_t)buf[0]));
    munmap(map, map_len);
    return 0;
}
#else
int benchStoreMiss(int argc, char **argv) {
    (void)argc;
    (void)argv;
    printf("{\"bench\": \"storemiss\", \"arch\": \"other\", \"points\": []}\n");
    return 0;
}
#endif
