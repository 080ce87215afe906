/* syscall_bench.h -- `kvsim-calibrate syscall` (syscall.c): the loopback system-call costs. */
#ifndef KVSIM_SYSCALL_BENCH_H
#define KVSIM_SYSCALL_BENCH_H

#include <stdint.h>

/* argv: ITERS SIZE...; 0 done, 1 a socket call failed, 2 bad arguments (usage). */
int benchSyscall(int argc, char **argv);

/* sysafter.c: argv ITERS ROUNDS LINES...; the user code's time after a call (same codes). */
int benchSysAfter(int argc, char **argv);

/* syspeer.c: argv ITERS SIZE...; read and write with a peer on another CPU (same codes). */
int benchSysPeer(int argc, char **argv);

/* syspeer.c: argv ITERS SPIN_NS; the tick-sampled user/system split against a known spin. */
int benchSysBias(int argc, char **argv);

/* syscall.c, shared by all three: a connected loopback TCP pair, *a the connecting end, *b the
 * accepted one (accept4 flags `acceptFlags`, e.g. SOCK_NONBLOCK), TCP_NODELAY on both, send and
 * receive buffers of `bufBytes` when > 0; 0, or 1 after one line on stderr naming `prog`. */
int loopbackPair(int *a, int *b, int acceptFlags, int bufBytes, const char *prog);

/* qsort's comparison of two uint64_t. */
int cmpU64(const void *a, const void *b);

/* syscall.c, shared by syscall and syspeer: at most BENCH_MAX_SIZES sizes a run. */
#define BENCH_MAX_SIZES 32

/* CLOCK_MONOTONIC in ns, and the clock's own cost (the median of back-to-back readings). */
uint64_t benchNow(void);
uint64_t benchClockCost(void);

/* argv ITERS SIZE...: *iters and sizes[] (each 1..maxSize, ITERS 8..10^7); the number of
 * sizes, or -1 for bad arguments. */
int benchParseSizes(int argc, char **argv, long maxSize, long *iters, long *sizes);

/* The JSON object's head `{"iters":..,"clock_ns":..,"sizes":[..],` and one call's row pair
 * `"NAME_median_ns":[..],"NAME_min_ns":[..]` (less the clock's cost; sorts v[s]), followed
 * by a comma unless `last`. */
/* fork() a peer onto another CPU of this process's affinity (when there is one); with
 * `pinSelf` the caller stays on the CPU it runs on. fork()'s result: 0 in the peer. */
int benchForkPeer(int pinSelf);

void benchPrintHead(long iters, uint64_t clock, const long *sizes, int nsizes);
void benchPrintRow(const char *name, uint64_t *const *v, long iters, int nsizes,
                   uint64_t clock, int last);

#endif
