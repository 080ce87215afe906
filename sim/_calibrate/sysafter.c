/*
 * sysafter.c -- `kvsim-calibrate sysafter`: does a system call slow down the user code that
 * runs after it?  A kernel entry and exit may disturb what the user's code relies on: its
 * L1D/L2 lines (the kernel's own data evicts them), its TLB entries (flushed where page-table
 * isolation runs without PCID), its branch predictors (IBPB, retpoline RSB filling, VERW
 * buffer clearing).  The trace model charges a call's kernel time only (the [syscall] costs
 * of sim/PRESETS.md) and times the user code around it as if no call had been made; this
 * benchmark measures whether that holds on the machine at hand.
 *
 *   kvsim-calibrate sysafter ITERS ROUNDS LINES...
 *
 * For each LINES (a working set of that many 64-byte lines) and two layouts -- `dense`
 * (consecutive lines, LINES * 64 bytes: the caches) and `pages` (one line per 4 KiB page,
 * LINES pages, each line at its own offset in its page so they spread over the cache sets:
 * the TLB) -- the user segment is a dependent chase through the working set in a random
 * order with a fixed instruction mix per line (a multiply-xorshift and a data-dependent
 * branch).  Three arms run the same segment ITERS times each:
 *
 *   none       the segment alone, back to back
 *   getppid    one getppid() between segments (the cheapest kernel entry and exit)
 *   loopback   write(a, 64 B) then read(b, 64 B) on a connected TCP loopback pair between
 *              segments (a server's calls: the TCP stack, socket buffers, the copies)
 *
 * Only the user segment is timed (the monotonic clock read through the vDSO, no kernel
 * entry; its own cost is the same in every arm and cancels in the differences); the median
 * per arm is taken over the ITERS segments.  ROUNDS rounds interleave the arms (the arm
 * order rotates per round), so a disturbance by other processes falls on all arms alike.
 * Each arm block also records its user CPU time per iteration from getrusage (ru_utime,
 * which includes the clock reads and the loop; a cross-check at the kernel's accounting
 * resolution).  Output, one JSON object: per LINES and layout, per arm, the ROUNDS medians
 * of the segment (ns) and the ROUNDS getrusage user ns per iteration
 * (sim/calibrate_sysafter.py derives the after-effect: arm minus none, paired per round).
 * Exit 1 with a one-line message when a call fails, 2 on bad arguments.
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "syscall_bench.h"

#define LINE 64
#define PAGE 4096
#define MAX_LINES (1 << 16)
#define MAX_SETS 16
#define MAX_ROUNDS 64
#define ARMS 3

_Static_assert(PAGE % LINE == 0, "a page holds whole lines");

static const char *const ARM_NAMES[ARMS] = {"none", "getppid", "loopback"};

static uint64_t userNs(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (uint64_t)ru.ru_utime.tv_sec * 1000000000ull + (uint64_t)ru.ru_utime.tv_usec * 1000ull;
}


static int fail(const char *what) {
    fprintf(stderr, "kvsim-calibrate sysafter: %s: %s\n", what, strerror(errno));
    return 1;
}


/* The chase: each visited line holds the index of the next; a random cyclic order. */
static void chainBuild(uint32_t *mem, size_t lines, int pages, uint64_t seed) {
    uint32_t *order = malloc(sizeof(uint32_t) * lines);
    for (size_t i = 0; i < lines; i++) order[i] = (uint32_t)i;
    for (size_t i = lines - 1; i > 0; i--) { /* Fisher-Yates, xorshift64 */
        seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
        size_t j = seed % (i + 1);
        uint32_t t = order[i];
        order[i] = order[j], order[j] = t;
    }
    for (size_t i = 0; i < lines; i++) {
        size_t at = pages ? order[i] * (PAGE / 4) + ((order[i] * 7u) % (PAGE / LINE)) * (LINE / 4)
                          : order[i] * (LINE / 4);
        size_t nx = order[(i + 1) % lines];
        mem[at] = (uint32_t)(pages ? nx * (PAGE / 4) + ((nx * 7u) % (PAGE / LINE)) * (LINE / 4)
                                   : nx * (LINE / 4));
        mem[at + 1] = (uint32_t)(order[i] * 2654435761u);
    }
    free(order);
}

/* The user segment: LINES dependent loads with a fixed mix per line. */
static uint32_t segment(const uint32_t *mem, size_t lines, uint32_t start, uint64_t *acc) {
    uint32_t p = start;
    uint64_t h = *acc;
    for (size_t i = 0; i < lines; i++) {
        uint32_t v = mem[p + 1];
        h = (h ^ v) * 0x9E3779B97F4A7C15ull;
        h ^= h >> 29;
        if (h & 1) h += v; /* data-dependent: the predictor's share */
        else h -= p;
        p = mem[p];
    }
    *acc = h;
    return p;
}

int benchSysAfter(int argc, char **argv) {
    if (argc < 3) return 2;
    long iters = atol(argv[0]), rounds = atol(argv[1]);
    int nsets = argc - 2;
    if (iters < 8 || iters > 10000000 || rounds < 1 || rounds > MAX_ROUNDS || nsets > MAX_SETS)
        return 2;
    long lines[MAX_SETS];
    for (int s = 0; s < nsets; s++) {
        lines[s] = atol(argv[2 + s]);
        if (lines[s] < 1 || lines[s] > MAX_LINES) return 2;
    }
    int a, b;
    if (loopbackPair(&a, &b, 0, 0, "sysafter")) return 1;
    char msg[64];
    memset(msg, 'x', sizeof(msg));
    uint64_t *t = malloc(sizeof(uint64_t) * (size_t)iters);
    static double seg[MAX_SETS][2][ARMS][MAX_ROUNDS], usr[MAX_SETS][2][ARMS][MAX_ROUNDS];
    if (!t) return fail("malloc");
    uint64_t acc = 1;
    for (int s = 0; s < nsets; s++)
        for (int pages = 0; pages < 2; pages++) {
            size_t n = (size_t)lines[s], bytes = pages ? n * PAGE : n * LINE;
            bytes = (bytes + PAGE - 1) / PAGE * PAGE; /* aligned_alloc: a multiple of PAGE */
            uint32_t *mem = aligned_alloc(PAGE, bytes);
            if (!mem) return fail("aligned_alloc");
            memset(mem, 0, bytes);
            chainBuild(mem, n, pages, 0x9E3779B97F4A7C15ull ^ n);
            uint32_t p = 0;
            for (long r = 0; r < rounds; r++)
                for (int k = 0; k < ARMS; k++) {
                    int arm = (int)((k + r) % ARMS);
                    uint64_t u0 = 0;
                    for (long i = -(iters / 8); i < iters; i++) {
                        if (i == 0) u0 = userNs();
                        if (arm == 1) {
                            if (getppid() < 0) return fail("getppid");
                        } else if (arm == 2) {
                            if (write(a, msg, sizeof(msg)) != (ssize_t)sizeof(msg))
                                return fail("write");
                            size_t got = 0;
                            while (got < sizeof(msg)) {
                                ssize_t g = read(b, msg + got, sizeof(msg) - got);
                                if (g <= 0) return fail("read");
                                got += (size_t)g;
                            }
                        }
                        uint64_t t0 = benchNow();
                        p = segment(mem, n, p, &acc);
                        uint64_t t1 = benchNow();
                        if (i >= 0) t[i] = t1 - t0;
                    }
                    usr[s][pages][arm][r] = (double)(userNs() - u0) / (double)iters;
                    qsort(t, (size_t)iters, sizeof(uint64_t), cmpU64);
                    seg[s][pages][arm][r] = (double)t[iters / 2];
                }
            free(mem);
        }
    printf("{\"iters\":%ld,\"rounds\":%ld,\"check\":%llu,\"sets\":[", iters, rounds,
           (unsigned long long)(acc & 0xff));
    for (int s = 0; s < nsets; s++)
        for (int pages = 0; pages < 2; pages++) {
            printf("%s{\"lines\":%ld,\"layout\":\"%s\"", s || pages ? "," : "", lines[s],
                   pages ? "pages" : "dense");
            for (int arm = 0; arm < ARMS; arm++) {
                for (int kind = 0; kind < 2; kind++) {
                    printf(",\"%s_%s\":[", ARM_NAMES[arm], kind ? "user_ns" : "segment_ns");
                    for (long r = 0; r < rounds; r++)
                        printf("%s%.1f", r ? "," : "",
                               kind ? usr[s][pages][arm][r] : seg[s][pages][arm][r]);
                    printf("]");
                }
            }
            printf("}");
        }
    printf("]}\n");
    free(t);
    close(a);
    close(b);
    return 0;
}
