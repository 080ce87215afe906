/*
 * syspeer.c -- `kvsim-calibrate syspeer`: what a server's `read` and `write` cost per byte
 * when the bytes really travel to and from a peer on another CPU, for the per-byte costs of
 * the [syscall] section (sim/calibrate_syscall.py, sim/MODEL.md §6).
 *
 *   kvsim-calibrate syspeer ITERS SIZE...
 *
 * `kvsim-calibrate syscall` (syscall.c) writes and reads on one thread: the socket buffer's
 * bytes the read copies out were written a moment before by the same CPU, hot in its own
 * caches, so its per-byte cost is that of a copy within the L1 and L2.  A server's bytes come
 * from and go to a client on another CPU: the request's bytes were written into the socket
 * buffer by the client's CPU, and the reply's are copied into fresh socket buffers that the
 * client's CPU reads out.  Here a connected TCP loopback pair (TCP_NODELAY, the server's end
 * non-blocking in an epoll set, as syscall.c's) joins this process, pinned to its CPU, with a
 * child pinned to another CPU.  For each size, ITERS times (after ITERS / 8 untimed), in
 * alternation:
 *
 *   request: the child writes SIZE bytes (a buffer it has just written, as a client builds
 *            its request) and waits for a 1-byte ack; this process waits in epoll_wait, then
 *            reads the SIZE bytes (each read call timed; their sum is one sample) and acks;
 *   reply:   this process writes SIZE bytes from a buffer it has just written (as a server
 *            its reply; the call timed), and waits for the child's 1-byte ack, sent when the
 *            child has read all of them.
 *
 * Calls are timed by the monotonic clock (none of them blocks), its own cost subtracted.
 * Output, one JSON object: the sizes and, per call, the median and the minimum ns per sample
 * at each size; sim/calibrate_syscall.py takes the slopes over the sizes as the per-byte
 * costs.  Exit 1 with a one-line message when a socket call fails.
 */
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "syscall_bench.h"

#define PEER_MAX_SIZE (1 << 16)

static int fail(const char *what) {
    fprintf(stderr, "kvsim-calibrate syspeer: %s: %s\n", what, strerror(errno));
    return 1;
}

/* Read exactly n bytes from blocking fd; 0 or -1. */
static int readAll(int fd, char *buf, size_t n) {
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, buf + got, n - got);
        if (r <= 0) return -1;
        got += (size_t)r;
    }
    return 0;
}

/* The child: per size, iters + iters / 8 times a request (write SIZE, wait for the ack)
 * and a reply (read SIZE, ack). */
static void peer(int fd, const long *sizes, int nsizes, long iters, char *buf) {
    char ack;
    for (int s = 0; s < nsizes; s++) {
        size_t n = (size_t)sizes[s];
        for (long i = -(iters / 8); i < iters; i++) {
            memset(buf, 'a' + (int)(i & 7), n); /* the client's freshly built request */
            if (write(fd, buf, n) != (ssize_t)n || read(fd, &ack, 1) != 1) _exit(1);
            if (readAll(fd, buf, n) || write(fd, &ack, 1) != 1) _exit(1);
        }
    }
    _exit(0);
}

/* Wait until fd (non-blocking, in ep) has data. */
static int waitReadable(int ep) {
    struct epoll_event out;
    for (;;) {
        int k = epoll_wait(ep, &out, 1, 5000);
        if (k == 1) return 0;
        if (k == 0 || errno != EINTR) return -1;
    }
}

int benchSysPeer(int argc, char **argv) {
    long iters, sizes[BENCH_MAX_SIZES];
    int nsizes = benchParseSizes(argc, argv, PEER_MAX_SIZE, &iters, sizes);
    if (nsizes < 0) return 2;
    int a, b;
    if (loopbackPair(&a, &b, SOCK_NONBLOCK, 4 * PEER_MAX_SIZE, "syspeer")) return 1;
    char *buf = malloc(PEER_MAX_SIZE), *cbuf = malloc(PEER_MAX_SIZE);
    uint64_t *t[2][BENCH_MAX_SIZES];
    if (!buf || !cbuf) return fail("malloc");
    for (int c = 0; c < 2; c++)
        for (int s = 0; s < nsizes; s++)
            if (!(t[c][s] = malloc(sizeof(uint64_t) * (size_t)iters))) return fail("malloc");
    pid_t pid = benchForkPeer(1); /* we stay where we are: the child takes the other CPU */
    if (pid < 0) return fail("fork");
    if (pid == 0) {
        close(b);
        peer(a, sizes, nsizes, iters, cbuf);
    }
    close(a);
    int ep = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = b};
    if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, b, &ev)) return fail("epoll");
    const uint64_t clock = benchClockCost();
    int rc = 0;
    char ack = 'k';
    for (int s = 0; s < nsizes && !rc; s++) {
        const size_t n = (size_t)sizes[s];
        for (long i = -(iters / 8); i < iters && !rc; i++) {
            size_t got = 0; /* a request in */
            uint64_t tr = 0;
            while (got < n && !rc) {
                if (waitReadable(ep)) {
                    rc = fail("epoll_wait (no request)");
                    break;
                }
                uint64_t r0 = benchNow();
                ssize_t r = read(b, buf + got, n - got);
                tr += benchNow() - r0;
                if (r > 0) got += (size_t)r;
                else if (r == 0 || errno != EAGAIN) rc = fail("read");
            }
            if (!rc && write(b, &ack, 1) != 1) rc = fail("write (ack)");
            if (rc) break;
            memset(buf, 'r', n); /* a reply out, from the server's freshly built reply */
            uint64_t w0 = benchNow();
            ssize_t w = write(b, buf, n);
            uint64_t w1 = benchNow();
            if (w != (ssize_t)n) {
                rc = fail("write");
                break;
            }
            if (i >= 0) {
                t[0][s][i] = tr;
                t[1][s][i] = w1 - w0;
            }
            char got1;
            ssize_t r = -1;
            while (r != 1 && !rc) {
                if (waitReadable(ep)) rc = fail("epoll_wait (no ack)");
                else if ((r = read(b, &got1, 1)) == 0 || (r < 0 && errno != EAGAIN))
                    rc = fail("read (ack)");
            }
        }
    }
    if (!rc) {
        benchPrintHead(iters, clock, sizes, nsizes);
        benchPrintRow("read", t[0], iters, nsizes, clock, 0);
        benchPrintRow("write", t[1], iters, nsizes, clock, 1);
        printf("}\n");
    }
    close(ep);
    close(b);
    int status = 0;
    if (rc) kill(pid, SIGTERM);
    waitpid(pid, &status, 0);
    for (int c = 0; c < 2; c++)
        for (int s = 0; s < nsizes; s++) free(t[c][s]);
    free(buf);
    free(cbuf);
    if (!rc && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
        fprintf(stderr, "kvsim-calibrate syspeer: the peer process failed\n");
        return 1;
    }
    return rc;
}

/*
 * `kvsim-calibrate sysbias ITERS SPIN_NS`: how /proc/PID/stat's tick-sampled split of a
 * process's CPU time into user and system time treats a server's pattern, against a user
 * time known by construction.  ITERS times: a 1-byte write to a peer on another CPU (which
 * echoes it), a user-mode spin of SPIN_NS by the vDSO clock (no kernel entry; by its end the
 * echo is there), epoll_wait (ready at once) and the read of the echo.  Output, one JSON
 * object: the spins' total ns (user time by construction), the process's CPU ns
 * (/proc/self/schedstat) and its utime and stime ticks over the loop.
 */
static int readStat(long *utime, long *stime, unsigned long long *cpu_ns) {
    char buf[4096];
    FILE *f = fopen("/proc/self/stat", "r");
    if (!f) return -1;
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = 0;
    char *p = strrchr(buf, ')');
    if (!p) return -1;
    /* after ") ": state is field 3, utime field 14, stime 15 */
    char *q = p + 1;
    for (int i = 0; i < 11; i++) q = strchr(q + 1, ' ');
    if (!q || sscanf(q, " %ld %ld", utime, stime) != 2) return -1;
    f = fopen("/proc/self/schedstat", "r");
    if (!f) return -1;
    int ok = fscanf(f, "%llu", cpu_ns) == 1;
    fclose(f);
    return ok ? 0 : -1;
}

int benchSysBias(int argc, char **argv) {
    if (argc != 2) return 2;
    long iters = atol(argv[0]);
    long spin = atol(argv[1]);
    if (iters < 8 || iters > 100000000 || spin < 0 || spin > 1000000) return 2;
    int a, b;
    if (loopbackPair(&a, &b, SOCK_NONBLOCK, 0, "sysbias")) return 1;
    pid_t pid = benchForkPeer(1);
    if (pid < 0) return fail("fork");
    if (pid == 0) { /* the echo */
        close(b);
        char ch;
        while (read(a, &ch, 1) == 1)
            if (write(a, &ch, 1) != 1) break;
        _exit(0);
    }
    close(a);
    int ep = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = b};
    if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, b, &ev)) return fail("epoll");
    long u0, s0, u1, s1;
    unsigned long long c0, c1;
    uint64_t spun = 0;
    int rc = 0;
    if (readStat(&u0, &s0, &c0)) rc = fail("/proc/self/stat");
    for (long i = 0; i < iters && !rc; i++) {
        char ch = 'x';
        if (write(b, &ch, 1) != 1) {
            rc = fail("write");
            break;
        }
        uint64_t t0 = benchNow(), t1 = t0;
        while (t1 - t0 < (uint64_t)spin) t1 = benchNow();
        spun += t1 - t0;
        ssize_t r = -1;
        while (r != 1 && !rc) {
            if (waitReadable(ep)) rc = fail("epoll_wait (no echo)");
            else if ((r = read(b, &ch, 1)) == 0 || (r < 0 && errno != EAGAIN)) rc = fail("read");
        }
    }
    if (!rc && readStat(&u1, &s1, &c1)) rc = fail("/proc/self/stat");
    if (!rc)
        printf("{\"iters\":%ld,\"spin_ns\":%ld,\"spun_ns\":%llu,\"cpu_ns\":%llu,\"utime\":%ld,"
               "\"stime\":%ld}\n", iters, spin, (unsigned long long)spun, c1 - c0, u1 - u0,
               s1 - s0);
    close(ep);
    close(b);
    kill(pid, SIGTERM);
    waitpid(pid, NULL, 0);
    return rc;
}
