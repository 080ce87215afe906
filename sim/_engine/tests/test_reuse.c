/*
 * test_reuse.c -- reuse.c against a brute-force LRU stack, built with ASan and
 * UBSan by `make test-sanitize`: random line streams over small and large
 * footprints (hash-map growth), long enough to compact the position space many
 * times, fed in chunks of random sizes, with and without classes.
 *
 *   test_reuse_san [--seed N]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../engine.h"

static uint64_t rng_state = 0x9E3779B97F4A7C15ULL;
static uint64_t next(void) { /* xorshift64* */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545F4914F6CDD1DULL;
}

/* Distances by an explicit LRU stack (most recent last): O(n d). */
static void brute(const uint64_t *lines, size_t n, int64_t *out) {
    uint64_t *stack = malloc((n + 1) * sizeof *stack);
    size_t depth = 0;
    for (size_t i = 0; i < n; i++) {
        size_t j = depth;
        while (j > 0 && stack[j - 1] != lines[i]) j--;
        if (j == 0) {
            out[i] = -1;
        } else {
            out[i] = (int64_t)(depth - j);
            memmove(stack + j - 1, stack + j, (depth - j) * sizeof *stack);
            depth--;
        }
        stack[depth++] = lines[i];
    }
    free(stack);
}

static int check(size_t n, uint64_t distinct, int with_cls) {
    uint64_t *lines = malloc(n * sizeof *lines);
    uint8_t *cls = malloc(n);
    int64_t *got = malloc(n * sizeof *got), *want = malloc(n * sizeof *want);
    uint64_t *hist = calloc(256 * KVSIM_REUSE_BUCKETS, sizeof *hist);
    uint64_t *cold = calloc(256, sizeof *cold);
    for (size_t i = 0; i < n; i++) {
        lines[i] = (next() % distinct) * 0x10001ULL; /* spread: not consecutive ids */
        cls[i] = (uint8_t)(next() % 7);
    }
    kvsimReuse *r = kvsimReuseCreate();
    if (!r) return 1;
    for (size_t lo = 0; lo < n;) {
        size_t k = 1 + next() % 3000;
        if (k > n - lo) k = n - lo;
        if (kvsimReuseAdd(r, lines + lo, with_cls ? cls + lo : NULL, k, got + lo, hist, cold)) {
            fprintf(stderr, "out of memory\n");
            return 1;
        }
        lo += k;
    }
    brute(lines, n, want);
    int bad = 0;
    uint64_t sum = 0, nd = 0;
    for (size_t i = 0; i < n && !bad; i++)
        if (got[i] != want[i]) {
            fprintf(stderr, "n=%zu distinct=%llu: access %zu: %lld, want %lld\n", n,
                    (unsigned long long)distinct, i, (long long)got[i], (long long)want[i]);
            bad = 1;
        }
    for (size_t i = 0; i < 256 * KVSIM_REUSE_BUCKETS; i++) sum += hist[i];
    for (size_t i = 0; i < 256; i++) sum += cold[i], nd += cold[i];
    if (sum != n || nd != kvsimReuseDistinct(r)) {
        fprintf(stderr, "n=%zu: histogram holds %llu accesses, cold %llu, distinct %llu\n", n,
                (unsigned long long)sum, (unsigned long long)nd,
                (unsigned long long)kvsimReuseDistinct(r));
        bad = 1;
    }
    kvsimReuseFree(r);
    free(lines);
    free(cls);
    free(got);
    free(want);
    free(hist);
    free(cold);
    return bad;
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "--seed") == 0) rng_state = strtoull(argv[2], NULL, 10) | 1;
    const size_t sizes[] = {0, 1, 2, 1000, 1024, 1025, 20000};
    const uint64_t footprints[] = {1, 3, 500, 1500, 5000};
    int bad = 0, cases = 0;
    for (size_t a = 0; a < sizeof sizes / sizeof *sizes; a++)
        for (size_t b = 0; b < sizeof footprints / sizeof *footprints; b++)
            for (int c = 0; c < 2; c++, cases++) bad |= check(sizes[a], footprints[b], c);
    kvsimReuseFree(NULL);
    printf("test_reuse: %d cases %s\n", cases, bad ? "FAILED" : "passed");
    return bad;
}
