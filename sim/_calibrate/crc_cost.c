/*
 * crc_cost.c -- `kvsim-calibrate crccost CALLS LEN@OFFSET...` and `kvsim-calibrate sipcost
 * CALLS case|nocase LEN...`: the calls whose instructions callgrind counts to fit c_ref's
 * CRC-64 and SipHash cost models (c_ref/crc64.c ksCrc64Cost, c_ref/siphash.c ksSiphashCost
 * and ksSiphashNocaseCost; kvsim.experiments.crc64_cost runs them).  Not a timing: run
 * natively they only check their arguments and print the checksum.
 *
 * For each point, in order: one call of costMark (never inlined), then CALLS calls of
 * c_ref's ksCrc64 over LEN bytes at OFFSET bytes past a 64-byte aligned buffer of random
 * bytes, each call continuing the sum of the one before (as the snapshot writer and loader
 * call it), so that the combines' data-dependent products see varied sums.  Under callgrind
 * with --dump-before=costMark each dump after the first holds one point's calls, and
 * ksCrc64's inclusive cost over its calls is the point's instructions per call, the
 * caller's loop excluded.  The table and the combine cache are built before the first mark
 * (ksCrc64Cost does not charge their one-off construction), and a last mark closes the last
 * point.
 *
 * Prints {"bench": "crccost", "calls": N, "points": [[LEN, OFFSET, COST], ...], "kinds":
 * [[CRC, STREAMS, COMBINE], ...], "checksum": S}, COST being c_ref's model of the point's call
 * (ksCrc64Cost) and kinds its parts by kind of work (ksCrc64CostKinds), for comparing with
 * callgrind's count and with their mirrors in Python (sim/calibrate.py crc64_cost,
 * crc64_cost_by_kind).
 *
 * sipcost is the same for the key hash: per point CALLS calls of ksSiphash (case) or
 * ksSiphashNocase (nocase) over LEN bytes at the buffer's start, under a key derived from
 * seed 1; the bytes are random, so the nocase variant lowers some of them.  Prints
 * {"bench": "sipcost", "variant": V, "calls": N, "points": [[LEN, COST], ...], "checksum": S},
 * COST being c_ref's model (ksSiphashCost or ksSiphashNocaseCost; sim/calibrate.py
 * siphash_cost).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

uint64_t ksCrc64(uint64_t crc, const void *buf, size_t len); /* c_ref/crc64.c */
uint64_t ksCrc64Combine(uint64_t crc1, uint64_t crc2, uint64_t len2);
uint64_t ksCrc64Cost(const void *p, size_t n);
void ksCrc64CostKinds(const void *p, size_t n, uint64_t *crc, uint64_t *streams, uint64_t *combine);
#include "siphash.h" /* c_ref's */

#define CRC_COST_ALIGN 64u
#define CRC_COST_MAX_LEN (1u << 20)

int benchCrcCost(int argc, char **argv);
int benchSipCost(int argc, char **argv);
void costMark(unsigned point);

/* The dump point: callgrind's --dump-before names it. */
__attribute__((noinline)) void costMark(unsigned point) {
    __asm__ volatile("" : : "r"(point) : "memory");
}

static unsigned long long costNum(const char *s, const char *end_at, const char *what) {
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (end == s || end != end_at) {
        fprintf(stderr, "kvsim-calibrate: cost: %s: expected a number, got '%s'\n", what, s);
        exit(2);
    }
    return v;
}

/* A 64-byte aligned buffer of `size` random bytes (a fixed xorshift: repeatable). */
static uint8_t *costBuffer(size_t size) {
    size = (size + CRC_COST_ALIGN - 1) / CRC_COST_ALIGN * CRC_COST_ALIGN;
    uint8_t *buf = aligned_alloc(CRC_COST_ALIGN, size ? size : CRC_COST_ALIGN);
    if (!buf) {
        fprintf(stderr, "kvsim-calibrate: out of memory\n");
        exit(1);
    }
    uint64_t x = 0x9e3779b97f4a7c15ull;
    for (size_t i = 0; i < size; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        buf[i] = (uint8_t)x;
    }
    return buf;
}

int benchCrcCost(int argc, char **argv) {
    if (argc < 2) return 2;
    const unsigned long long calls = costNum(argv[0], argv[0] + strlen(argv[0]), "CALLS");
    const int npoints = argc - 1;
    size_t *len = malloc(sizeof *len * (size_t)npoints), *off = malloc(sizeof *off * (size_t)npoints);
    if (!len || !off) {
        fprintf(stderr, "kvsim-calibrate: out of memory\n");
        exit(1);
    }
    size_t most = 0;
    for (int i = 0; i < npoints; i++) {
        const char *s = argv[1 + i], *at = strchr(s, '@');
        if (!at) {
            fprintf(stderr, "kvsim-calibrate: crccost: expected LEN@OFFSET, got '%s'\n", s);
            exit(2);
        }
        len[i] = (size_t)costNum(s, at, "LEN");
        off[i] = (size_t)costNum(at + 1, at + 1 + strlen(at + 1), "OFFSET");
        if (len[i] > CRC_COST_MAX_LEN || off[i] >= CRC_COST_ALIGN) {
            fprintf(stderr, "kvsim-calibrate: crccost: '%s': LEN at most %u, OFFSET below %u\n",
                    s, CRC_COST_MAX_LEN, CRC_COST_ALIGN);
            exit(2);
        }
        if (len[i] + off[i] > most) most = len[i] + off[i];
    }
    uint8_t *buf = costBuffer(most);
    uint64_t sum = ksCrc64Combine(ksCrc64(0, buf, 1), 1, 1); /* the table and the cache */
    for (int i = 0; i < npoints; i++) {
        costMark((unsigned)i);
        for (unsigned long long c = 0; c < calls; c++) sum = ksCrc64(sum, buf + off[i], len[i]);
    }
    costMark((unsigned)npoints);
    printf("{\"bench\": \"crccost\", \"calls\": %llu, \"points\": [", calls);
    for (int i = 0; i < npoints; i++)
        printf("%s[%zu, %zu, %llu]", i ? ", " : "", len[i], off[i],
               (unsigned long long)ksCrc64Cost(buf + off[i], len[i]));
    printf("], \"kinds\": [");
    for (int i = 0; i < npoints; i++) {
        uint64_t c, s, j;
        ksCrc64CostKinds(buf + off[i], len[i], &c, &s, &j);
        printf("%s[%llu, %llu, %llu]", i ? ", " : "", (unsigned long long)c,
               (unsigned long long)s, (unsigned long long)j);
    }
    printf("], \"checksum\": %llu}\n", (unsigned long long)sum);
    free(buf);
    free(len);
    free(off);
    return 0;
}

int benchSipCost(int argc, char **argv) {
    if (argc < 3) return 2;
    const unsigned long long calls = costNum(argv[0], argv[0] + strlen(argv[0]), "CALLS");
    const int nocase = !strcmp(argv[1], "nocase");
    if (!nocase && strcmp(argv[1], "case")) {
        fprintf(stderr, "kvsim-calibrate: sipcost: expected case or nocase, got '%s'\n", argv[1]);
        exit(2);
    }
    const int npoints = argc - 2;
    size_t *len = malloc(sizeof *len * (size_t)npoints), most = 0;
    if (!len) {
        fprintf(stderr, "kvsim-calibrate: out of memory\n");
        exit(1);
    }
    for (int i = 0; i < npoints; i++) {
        const char *s = argv[2 + i];
        len[i] = (size_t)costNum(s, s + strlen(s), "LEN");
        if (len[i] > CRC_COST_MAX_LEN) {
            fprintf(stderr, "kvsim-calibrate: sipcost: '%s': LEN at most %u\n", s, CRC_COST_MAX_LEN);
            exit(2);
        }
        if (len[i] > most) most = len[i];
    }
    uint8_t *buf = costBuffer(most), key[16];
    ksSiphashSeed(1, key);
    uint64_t sum = 0;
    for (int i = 0; i < npoints; i++) {
        costMark((unsigned)i);
        for (unsigned long long c = 0; c < calls; c++)
            sum += nocase ? ksSiphashNocase(buf, len[i], key) : ksSiphash(buf, len[i], key);
    }
    costMark((unsigned)npoints);
    printf("{\"bench\": \"sipcost\", \"variant\": \"%s\", \"calls\": %llu, \"points\": [",
           argv[1], calls);
    for (int i = 0; i < npoints; i++)
        printf("%s[%zu, %llu]", i ? ", " : "", len[i],
               (unsigned long long)(nocase ? ksSiphashNocaseCost(len[i]) : ksSiphashCost(len[i])));
    printf("], \"checksum\": %llu}\n", (unsigned long long)sum);
    free(buf);
    free(len);
    return 0;
}
