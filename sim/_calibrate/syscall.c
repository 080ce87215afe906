/*
 * syscall.c -- `kvsim-calibrate syscall`: the cost of the system calls a server makes per
 * request, on TCP loopback, for the [syscall] section of the calibrated CPU file
 * (sim/PRESETS.md; the SYSCALL markers of traces/FORMAT.md).
 *
 *   kvsim-calibrate syscall ITERS SIZE...
 *
 * One connected pair of TCP sockets on 127.0.0.1 (TCP_NODELAY, non-blocking), the receiving
 * end in an epoll set, as c_ref's server and Valkey hold a client.  For each message size,
 * ITERS times (after ITERS / 8 untimed):
 *
 *   write(a, SIZE bytes)        the sender's call; on loopback it also runs the receiver's
 *                               TCP input (the softirq runs in the sender's context), as a
 *                               server's reply write runs its client's
 *   epoll_wait(ep, 1 event)     the receiving end is ready: the wait returns at once
 *   read(b, SIZE bytes)         the receiver's copy out of its socket buffer
 *
 * each call timed alone by the monotonic clock (the clock's own cost, timed the same way
 * back to back, subtracted).  Then the wait a server makes when it is idle: a child process
 * on another CPU echoes one byte; the parent writes a byte and waits in epoll_wait until
 * the echo wakes it, ITERS times, and the parent's CPU time inside that epoll_wait (its
 * thread CPU clock, whose own cost is subtracted: the call, going to sleep and being woken,
 * not the time asleep) is `epoll_wait_sleep`; the CPU time of its one-byte write, which
 * wakes the child blocked in read (as a server's reply wakes its client), `write_wake`.  Output, one JSON object: the sizes and, per call, the median
 * and the minimum ns per call at each size (sim/calibrate_syscall.py fits the per-call and
 * per-byte costs: intercept and slope over the sizes).  Exit 1 with a one-line message when
 * a socket call fails.
 */
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "syscall_bench.h"

#define MAX_SIZE (1 << 16)

uint64_t benchNow(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int cmpU64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static int fail(const char *what) {
    fprintf(stderr, "kvsim-calibrate syscall: %s: %s\n", what, strerror(errno));
    return 1;
}

static int failIn(const char *prog, const char *what) {
    fprintf(stderr, "kvsim-calibrate %s: %s: %s\n", prog, what, strerror(errno));
    return 1;
}

int loopbackPair(int *a, int *b, int acceptFlags, int bufBytes, const char *prog) {
    int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (l < 0) return failIn(prog, "socket");
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof(sa);
    if (bind(l, (struct sockaddr *)&sa, sl) || listen(l, 1) ||
        getsockname(l, (struct sockaddr *)&sa, &sl)) {
        close(l);
        return failIn(prog, "listen on 127.0.0.1");
    }
    *a = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (*a < 0 || connect(*a, (struct sockaddr *)&sa, sl)) {
        close(l);
        return failIn(prog, "connect");
    }
    *b = accept4(l, NULL, NULL, acceptFlags | SOCK_CLOEXEC);
    close(l);
    if (*b < 0) return failIn(prog, "accept");
    int one = 1;
    for (int i = 0; i < 2; i++) {
        int fd = i ? *b : *a;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        if (bufBytes > 0) {
            setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bufBytes, sizeof(bufBytes));
            setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bufBytes, sizeof(bufBytes));
        }
    }
    return 0;
}

uint64_t benchClockCost(void) {
    uint64_t d[1001];
    for (int i = 0; i < 1001; i++) {
        uint64_t t0 = benchNow();
        d[i] = benchNow() - t0;
    }
    qsort(d, 1001, sizeof(d[0]), cmpU64);
    return d[500];
}

int benchParseSizes(int argc, char **argv, long maxSize, long *iters, long *sizes) {
    if (argc < 2) return -1;
    *iters = atol(argv[0]);
    int nsizes = argc - 1;
    if (*iters < 8 || *iters > 10000000 || nsizes > BENCH_MAX_SIZES) return -1;
    for (int s = 0; s < nsizes; s++) {
        sizes[s] = atol(argv[1 + s]);
        if (sizes[s] < 1 || sizes[s] > maxSize) return -1;
    }
    return nsizes;
}

static void pinTo(int cpu) {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    sched_setaffinity(0, sizeof(one), &one);
}

int benchForkPeer(int pinSelf) {
    cpu_set_t all;
    int other = -1, here = sched_getcpu();
    if (sched_getaffinity(0, sizeof(all), &all) == 0)
        for (int c = 0; c < CPU_SETSIZE && other < 0; c++)
            if (c != here && CPU_ISSET(c, &all)) other = c;
    if (pinSelf && here >= 0) pinTo(here);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0 && other >= 0) pinTo(other);
    return (int)pid;
}

void benchPrintHead(long iters, uint64_t clock, const long *sizes, int nsizes) {
    printf("{\"iters\":%ld,\"clock_ns\":%llu,\"sizes\":[", iters, (unsigned long long)clock);
    for (int s = 0; s < nsizes; s++) printf("%s%ld", s ? "," : "", sizes[s]);
    printf("],");
}

void benchPrintRow(const char *name, uint64_t *const *v, long iters, int nsizes,
                   uint64_t clock, int last) {
    for (int pass = 0; pass < 2; pass++) {
        printf("\"%s_%s\":[", name, pass ? "min_ns" : "median_ns");
        for (int s = 0; s < nsizes; s++) {
            qsort(v[s], (size_t)iters, sizeof(uint64_t), cmpU64);
            uint64_t x = pass ? v[s][0] : v[s][iters / 2];
            printf("%s%.1f", s ? "," : "", x > clock ? (double)(x - clock) : 0.0);
        }
        printf("]%s", last && pass ? "" : ",");
    }
}

static uint64_t cpuClk(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The parent's CPU ns in an epoll_wait that sleeps until a child's echo wakes it:
 * the median of iters waits (after iters / 8 untimed), the CPU clock's cost subtracted. */
static int sleepingWait(long iters, double *median, double *wake) {
    int a, b;
    if (loopbackPair(&a, &b, SOCK_NONBLOCK, 4 * MAX_SIZE, "syscall")) return 1;
    pid_t pid = benchForkPeer(0);
    if (pid < 0) return fail("fork");
    if (pid == 0) { /* the echo: blocking reads on the connecting end */
        close(b);
        char ch;
        while (read(a, &ch, 1) == 1)
            if (write(a, &ch, 1) != 1) break;
        _exit(0);
    }
    int ep = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = b};
    if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, b, &ev)) return fail("epoll");
    uint64_t d[1001], *t = malloc(sizeof(uint64_t) * (size_t)iters);
    uint64_t *tw = malloc(sizeof(uint64_t) * (size_t)iters);
    if (!t || !tw) return fail("malloc");
    for (int i = 0; i < 1001; i++) {
        uint64_t t0 = cpuClk();
        d[i] = cpuClk() - t0;
    }
    qsort(d, 1001, sizeof(d[0]), cmpU64);
    const uint64_t clock = d[500];
    int rc = 0;
    for (long i = -(iters / 8); i < iters && !rc; i++) {
        char ch = 'x';
        uint64_t w0 = cpuClk();
        if (write(b, &ch, 1) != 1) rc = fail("write");
        uint64_t w1 = cpuClk();
        if (i >= 0) tw[i] = w1 - w0 > clock ? w1 - w0 - clock : 0;
        struct epoll_event out;
        uint64_t t0 = cpuClk();
        int k = epoll_wait(ep, &out, 1, 1000);
        uint64_t t1 = cpuClk();
        if (k != 1) rc = fail("epoll_wait (no echo)");
        else if (read(b, &ch, 1) != 1) rc = fail("read");
        if (i >= 0) t[i] = t1 - t0 > clock ? t1 - t0 - clock : 0;
    }
    qsort(t, (size_t)iters, sizeof(uint64_t), cmpU64);
    *median = (double)t[iters / 2];
    qsort(tw, (size_t)iters, sizeof(uint64_t), cmpU64);
    *wake = (double)tw[iters / 2];
    free(t);
    free(tw);
    close(ep);
    close(b);
    close(a);
    kill(pid, SIGTERM);
    waitpid(pid, NULL, 0);
    return rc;
}

int benchSyscall(int argc, char **argv) {
    long iters, sizes[BENCH_MAX_SIZES];
    int nsizes = benchParseSizes(argc, argv, MAX_SIZE, &iters, sizes);
    if (nsizes < 0) return 2;
    int a, b;
    if (loopbackPair(&a, &b, SOCK_NONBLOCK, 4 * MAX_SIZE, "syscall")) return 1;
    int ep = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = b};
    if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, b, &ev)) return fail("epoll");
    char *wbuf = malloc(MAX_SIZE), *rbuf = malloc(MAX_SIZE);
    uint64_t *t[3][BENCH_MAX_SIZES];
    if (!wbuf || !rbuf) return fail("malloc");
    memset(wbuf, 'x', MAX_SIZE);
    memset(rbuf, 0, MAX_SIZE);
    for (int c = 0; c < 3; c++)
        for (int s = 0; s < nsizes; s++)
            if (!(t[c][s] = malloc(sizeof(uint64_t) * (size_t)iters))) return fail("malloc");
    const uint64_t clock = benchClockCost();
    for (int s = 0; s < nsizes; s++) {
        const size_t n = (size_t)sizes[s];
        for (long i = -(iters / 8); i < iters; i++) {
            uint64_t t0 = benchNow();
            ssize_t w = write(a, wbuf, n);
            uint64_t t1 = benchNow();
            if (w != (ssize_t)n) return fail("write");
            struct epoll_event out;
            int k = epoll_wait(ep, &out, 1, 1000);
            uint64_t t2 = benchNow();
            if (k != 1) return fail("epoll_wait");
            size_t got = 0;
            uint64_t tr = 0;
            while (got < n) { /* one read takes all, unless TCP split the message */
                uint64_t r0 = benchNow();
                ssize_t r = read(b, rbuf + got, n - got);
                tr += benchNow() - r0;
                if (r > 0) got += (size_t)r;
                else if (r < 0 && errno != EAGAIN) return fail("read");
            }
            if (i >= 0) {
                t[0][s][i] = tr;
                t[1][s][i] = t1 - t0;
                t[2][s][i] = t2 - t1;
            }
        }
    }
    benchPrintHead(iters, clock, sizes, nsizes);
    benchPrintRow("read", t[0], iters, nsizes, clock, 0);
    benchPrintRow("write", t[1], iters, nsizes, clock, 0);
    benchPrintRow("epoll_wait", t[2], iters, nsizes, clock, 0);
    double sleep_ns = 0, wake_ns = 0;
    if (sleepingWait(iters, &sleep_ns, &wake_ns)) return 1;
    printf("\"epoll_wait_sleep_median_ns\":%.1f,\"write_wake_median_ns\":%.1f}\n", sleep_ns,
           wake_ns);
    for (int c = 0; c < 3; c++)
        for (int s = 0; s < nsizes; s++) free(t[c][s]);
    free(wbuf);
    free(rbuf);
    close(ep);
    close(a);
    close(b);
    return 0;
}
