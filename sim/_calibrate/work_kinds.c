/*
 * work_kinds.c -- `kvsim-calibrate workkind KIND CHUNK CALLS REPEATS`: the kinds of
 * non-memory work that c_ref's traces name (enum kvtWork, traces/trace_format.h) and
 * that calibrate.c's `work` (CRC-64, SipHash) does not time.
 *
 *   copy     memcpy of CHUNK bytes, as fread's refill of its buffer (c_ref's copy
 *            site snap.refill: the trace counts its site cost per 4 KiB refill)
 *   compare  memcmp of two equal CHUNK-byte strings, as a key comparison that finds
 *            the key (c_ref/object.c ksKeyCompare: KS_WORK_OF(compare, len / 8))
 *
 * Each call takes the next CHUNK bytes of a WORK_KIND_BUF-byte buffer (back to its start
 * when the next piece does not fit), so the buffers stay in the L1/L2 caches and the
 * time is the kernel's own.  Prints ns per call, one figure per repeat (thread CPU time,
 * as calibrate.c); the instructions per call are the traces' (sim/calibrate_work.py),
 * the cycles the clock's.  libc's memcpy and memcmp are what c_ref calls natively.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define WORK_KIND_BUF (16u * 1024)
#define WORK_KIND_LINE 64u

_Static_assert(WORK_KIND_BUF % WORK_KIND_LINE == 0, "whole lines");

int benchWorkKind(int argc, char **argv);

static double kindNowNs(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static unsigned long long kindNum(const char *s, const char *what) {
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (*s == '\0' || *end != '\0' || v == 0) {
        fprintf(stderr, "kvsim-calibrate: workkind: %s: expected a positive integer, got '%s'\n",
                what, s);
        exit(2);
    }
    return v;
}

/* The library's calls through volatile pointers: the compiler neither inlines them nor
 * drops a call whose result it can foresee. */
static void *(*volatile copyFn)(void *, const void *, size_t) = memcpy;
static int (*volatile compareFn)(const void *, const void *, size_t) = memcmp;

int benchWorkKind(int argc, char **argv) {
    if (argc < 4) return 2;
    const int copy = !strcmp(argv[0], "copy");
    if (!copy && strcmp(argv[0], "compare")) {
        fprintf(stderr, "kvsim-calibrate: workkind: expected copy or compare, got '%s'\n", argv[0]);
        exit(2);
    }
    const size_t chunk = (size_t)kindNum(argv[1], "CHUNK");
    const unsigned long long calls = kindNum(argv[2], "CALLS"), reps = kindNum(argv[3], "REPEATS");
    if (chunk > WORK_KIND_BUF) {
        fprintf(stderr, "kvsim-calibrate: workkind: CHUNK above %u bytes\n", WORK_KIND_BUF);
        exit(2);
    }
    uint8_t *a = aligned_alloc(WORK_KIND_LINE, WORK_KIND_BUF);
    uint8_t *b = aligned_alloc(WORK_KIND_LINE, WORK_KIND_BUF);
    if (!a || !b) {
        fprintf(stderr, "kvsim-calibrate: out of memory\n");
        exit(1);
    }
    for (size_t i = 0; i < WORK_KIND_BUF; i++) a[i] = b[i] = (uint8_t)(i * 131u + 7u);
    uint64_t sum = 0;
    printf("{\"bench\": \"workkind\", \"kind\": \"%s\", \"chunk\": %zu, \"buffer\": %u, "
           "\"calls\": %llu, \"ns_per_call\": [", argv[0], chunk, WORK_KIND_BUF, calls);
    for (unsigned long long r = 0; r <= reps; r++) { /* repeat 0 warms the caches */
        size_t pos = 0;
        const double t0 = kindNowNs();
        for (unsigned long long i = 0; i < calls; i++) {
            if (pos + chunk > WORK_KIND_BUF) pos = 0;
            if (copy) {
                copyFn(b + pos, a + pos, chunk);
                sum += b[pos];
            } else {
                sum += (uint64_t)(compareFn(a + pos, b + pos, chunk) == 0);
            }
            pos += chunk;
        }
        const double t = kindNowNs() - t0;
        if (r) printf("%s%.4f", r > 1 ? ", " : "", t / (double)calls);
    }
    printf("], \"checksum\": %llu}\n", (unsigned long long)sum);
    free(a);
    free(b);
    return 0;
}
