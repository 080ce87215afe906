/* syscall_bench.h -- `kvsim-calibrate syscall` (syscall.c): the loopback system-call costs. */
#ifndef KVSIM_SYSCALL_BENCH_H
#define KVSIM_SYSCALL_BENCH_H

/* argv: ITERS SIZE...; 0 done, 1 a socket call failed, 2 bad arguments (usage). */
int benchSyscall(int argc, char **argv);

/* sysafter.c: argv ITERS ROUNDS LINES...; the user code's time after a call (same codes). */
int benchSysAfter(int argc, char **argv);

#endif
