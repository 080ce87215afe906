/*
 * serverloop.c -- the server's request code as a kernel: `kvsim-cref serverloop`.
 *
 * What a request costs c_ref's server in user space (server.c: the query buffer, the
 * pipeline's parse, the dispatch and call() of callpath.c, the keyspace, the reply
 * pieces) is timed here on its own, through the server's own entry point between read()
 * and write() (ksServerSessionFeed: the code `kvsim-cref serve` runs on every read, not a
 * copy), and traced by the same loop in the traced build.  `kvsim calibrate` derives the
 * rate of the server's kind of work from the two (sim/calibrate_work.py).
 *
 *   fill    (untimed; traced as the warm-up) for GET and MSET: KEYS keys "key:%012d"
 *           with VALUE_SIZE-byte values, SET through the session as a client would
 *   segment one read's worth of requests: DEPTH commands (redis-benchmark's PING_MBULK,
 *           or GETs of keys in a fixed pseudo-random order, RING distinct segments) fed
 *           as one read; the reply is checked (its length) against what DEPTH replies take
 *           MSET: MSET_KEYS pseudo-random keys of the fill per command, each over an
 *           existing key with a new VALUE_SIZE-byte value (redis-benchmark's MSET over a
 *           loaded keyspace); the segment is written afresh before each feed (untimed,
 *           as the kernel's copy leaves a read's bytes), so that its keys range over all
 *           KEYS instead of the RING segments' few hundred
 *   arms    none:     segments back to back (the server's code hot in every predictor)
 *           loopback: before each segment a write of the previous reply to one end of a
 *                     connected TCP loopback pair and a read of it at the other (the
 *                     system calls a server makes between two reads), not timed
 *
 * Only the segment is timed (CLOCK_MONOTONIC through the vDSO, no kernel entry); the
 * clock's own cost is measured by an empty segment in each arm and reported beside it.
 * Beside it, natively, the command's own time as call() takes it (INFO commandstats: usec
 * over calls of the timed segments, CONFIG RESETSTAT fed before them, both untimed), the
 * figure a real server reports of the same code under a real client.
 * ROUNDS rounds interleave the arms (their order alternates per round); per arm and
 * round: the median segment ns over ITERS segments, the median empty segment ns.  The
 * traced build runs the connection's setup, the fill and ITERS / 8 segments as the warm-up
 * (WARMUP_BEGIN ... WARMUP_END) and ITERS segments of the `none` arm as the measured phase:
 * the same requests, in the same order, from the same state; the connection's check and close
 * after them are warm-up again (their allocator records, libc_alloc.h, are not requests').
 *
 * Output (native): one JSON object, keys sorted (see ksServerLoopRun's caller, main.c).
 * Conventions: public ks...; static internals without prefix.
 */
#include "serverloop.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "emit.h"
#include "server.h"

#define RING 64 /* distinct request buffers (GET: keys in a fixed order) */
#define KEY_FMT "key:%012d" /* redis-benchmark's key:__rand_int__ */

static_assert(RING > 0 && (RING & (RING - 1)) == 0, "a mask indexes the ring");

static const char PING_MBULK[] = "*1\r\n$4\r\nPING\r\n";
static const char PONG[] = "+PONG\r\n";
static const char MSET_OK[] = "+OK\r\n";

static uint64_t clk(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int cmpU64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static uint64_t medianU64(uint64_t *v, long n) {
    qsort(v, (size_t)n, sizeof(*v), cmpU64);
    return v[n / 2];
}

/* A growable byte string. */
typedef struct sbuf {
    char *p;
    size_t len, cap;
} sbuf;

static void sput(sbuf *b, const char *s, size_t n) {
    if (b->len + n > b->cap) {
        b->cap = (b->len + n) * 2;
        b->p = realloc(b->p, b->cap);
        if (!b->p) abort();
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
}

static void sputf(sbuf *b, const char *fmt, int a, int c) {
    char t[96];
    int n = snprintf(t, sizeof(t), fmt, a, c);
    sput(b, t, (size_t)n);
}

const char *const ksServerLoopCommandNames[KS_SERVERLOOP_COMMANDS] = {"ping", "get", "mset"};

static uint64_t xorshift(uint64_t *x) {
    *x ^= *x << 13, *x ^= *x >> 7, *x ^= *x << 17;
    return *x;
}

/* One MSET of cfg->mset_keys keys drawn from x into b (values of 'y'); the bytes its reply takes. */
static size_t msetRequest(sbuf *b, const ksServerLoopConfig *cfg, uint64_t *x, const char *val) {
    sputf(b, "*%d\r\n$4\r\nMSET\r\n", 1 + 2 * cfg->mset_keys, 0);
    for (int i = 0; i < cfg->mset_keys; i++) {
        char key[32];
        int kl = snprintf(key, sizeof(key), KEY_FMT, (int)(xorshift(x) % (uint64_t)cfg->keys));
        sputf(b, "$%d\r\n", kl, 0);
        sput(b, key, (size_t)kl);
        sputf(b, "\r\n$%d\r\n", (int)cfg->value_size, 0);
        sput(b, val, cfg->value_size);
        sput(b, "\r\n", 2);
    }
    return sizeof(MSET_OK) - 1;
}

/* One request of kind cmd for key k into b; the bytes its reply takes. */
static size_t request(sbuf *b, int get, int k, uint32_t value_size) {
    if (!get) {
        sput(b, PING_MBULK, sizeof(PING_MBULK) - 1);
        return sizeof(PONG) - 1;
    }
    char key[32];
    int kl = snprintf(key, sizeof(key), KEY_FMT, k);
    sputf(b, "*2\r\n$3\r\nGET\r\n$%d\r\n", kl, 0);
    sput(b, key, (size_t)kl);
    sput(b, "\r\n", 2);
    char hdr[32];
    return (size_t)snprintf(hdr, sizeof(hdr), "$%u\r\n", value_size) + value_size + 2;
}

/* The keyspace's commandstats usec per call of the loop's command (fed INFO, untimed); -1
 * where the reply has none. */
static double usecPerCall(const char *command) {
    static const char info[] = "*2\r\n$4\r\nINFO\r\n$12\r\ncommandstats\r\n";
    const uint8_t *reply;
    size_t rlen;
    ksServerSessionFeed((const uint8_t *)info, sizeof(info) - 1, &reply, &rlen);
    char want[48], *text = strndup((const char *)reply, rlen);
    if (!text) abort();
    snprintf(want, sizeof(want), "cmdstat_%s:calls=", command);
    const char *at = strstr(text, want);
    unsigned long long calls = 0, usec = 0;
    double out = -1;
    if (at && sscanf(at + strlen(want), "%llu,usec=%llu", &calls, &usec) == 2 && calls)
        out = (double)usec / (double)calls;
    free(text);
    return out;
}

/* A connected TCP loopback pair (the server's kind of socket), TCP_NODELAY. */
static int loopback(int *a, int *b, char *err, size_t errlen) {
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof(sa);
    int one = 1, l = socket(AF_INET, SOCK_STREAM, 0);
    if (l < 0 || bind(l, (struct sockaddr *)&sa, sl) || listen(l, 1) ||
        getsockname(l, (struct sockaddr *)&sa, &sl) || (*a = socket(AF_INET, SOCK_STREAM, 0)) < 0 ||
        connect(*a, (struct sockaddr *)&sa, sl) || (*b = accept(l, NULL, NULL)) < 0) {
        snprintf(err, errlen, "loopback socket: %s", strerror(errno));
        if (l >= 0) close(l);
        return -1;
    }
    close(l);
    setsockopt(*a, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    setsockopt(*b, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    return 0;
}

/* write(a) of n reply bytes, read(b) of them: a server's calls between two reads. */
static int passThrough(int a, int b, const uint8_t *p, size_t n, char *sink, size_t cap) {
    if (n > cap) n = cap;
    if (write(a, p, n) != (ssize_t)n) return -1;
    for (size_t got = 0; got < n;) {
        ssize_t g = read(b, sink + got, n - got);
        if (g <= 0) return -1;
        got += (size_t)g;
    }
    return 0;
}

int ksServerLoopRun(const ksServerLoopConfig *cfg, ksServerLoopResult *res, char *err, size_t errlen) {
    memset(res, 0, sizeof(*res));
    const int get = cfg->command == KS_SERVERLOOP_GET, mset = cfg->command == KS_SERVERLOOP_MSET;
    const long iters = cfg->iters, warm = iters / 8 > 0 ? iters / 8 : 1;
    const int traced = KS_TRACE, rounds = traced ? 1 : cfg->rounds;
    if (cfg->depth < 1 || iters < 1 || rounds < 1 || rounds > KS_SERVERLOOP_MAX_ROUNDS ||
        cfg->command < 0 || cfg->command >= KS_SERVERLOOP_COMMANDS || (mset && cfg->mset_keys < 1)) {
        snprintf(err, errlen, "serverloop: bad depth, iterations or rounds");
        return -1;
    }
    ksServerConfig sc = {.options = cfg->options, .pipeline = cfg->pipeline, .multikey = cfg->multikey,
                         .batch = cfg->batch};
    /* the connection's setup (its allocations' records) is warm-up too */
    KS_MARK(KVT_MARK_WARMUP_BEGIN, 0);
    if (ksServerSessionOpen(&sc, err, errlen)) return -1;
    const uint8_t *reply;
    size_t rlen;
    if (get || mset) { /* the fill: SET every key, as a client would */
        char *val = malloc(cfg->value_size + 1);
        if (!val) abort();
        memset(val, 'x', cfg->value_size);
        for (int k = 0; k < cfg->keys; k++) {
            sbuf b = {0};
            char key[32];
            int kl = snprintf(key, sizeof(key), KEY_FMT, k);
            sputf(&b, "*3\r\n$3\r\nSET\r\n$%d\r\n", kl, 0);
            sput(&b, key, (size_t)kl);
            sputf(&b, "\r\n$%d\r\n", (int)cfg->value_size, 0);
            sput(&b, val, cfg->value_size);
            sput(&b, "\r\n", 2);
            ksServerSessionFeed((const uint8_t *)b.p, b.len, &reply, &rlen);
            free(b.p);
        }
        free(val);
    }
    /* the ring of segments: DEPTH requests each, keys in a fixed pseudo-random order (MSET:
     * segment 0 alone, written afresh before each feed) */
    sbuf seg[RING] = {{0}};
    size_t want[RING] = {0};
    uint64_t x = 0x9E3779B97F4A7C15ull;
    for (int r = 0; r < RING && !mset; r++)
        for (int d = 0; d < cfg->depth; d++) {
            xorshift(&x);
            want[r] += request(&seg[r], get, get ? (int)(x % (uint64_t)cfg->keys) : 0, cfg->value_size);
        }
    char *mval = NULL;
    if (mset) { /* the new values: of the fill's size, another content */
        mval = malloc(cfg->value_size);
        if (!mval) abort();
        memset(mval, 'y', cfg->value_size);
    }
    int a = -1, b = -1, rc = 0;
    char *sink = NULL;
    size_t sink_cap = 1 << 16;
    if (!traced) {
        if (loopback(&a, &b, err, errlen)) {
            ksServerSessionClose();
            for (int r = 0; r < RING; r++) free(seg[r].p);
            return -1;
        }
        sink = malloc(sink_cap);
        if (!sink) abort();
    }
    uint64_t *t = malloc(sizeof(uint64_t) * (size_t)iters), *e = malloc(sizeof(uint64_t) * (size_t)iters);
    if (!t || !e) abort();
    long at = 0;
    for (int round = 0; round < rounds && !rc; round++)
        for (int k = 0; k < KS_SERVERLOOP_ARMS && !rc; k++) {
            const int arm = traced ? 0 : (k + round) % KS_SERVERLOOP_ARMS;
            if (traced && k) break;
            for (long i = -warm; i < iters; i++) {
                if (traced && i == 0) {
                    KS_MARK(KVT_MARK_WARMUP_END, 0);
                    KS_MARK(KVT_MARK_PHASE, 1);
                }
                if (!traced && i == 0) { /* the commandstats of the timed segments alone */
                    static const char reset[] = "*2\r\n$6\r\nCONFIG\r\n$9\r\nRESETSTAT\r\n";
                    const uint8_t *r;
                    size_t n;
                    ksServerSessionFeed((const uint8_t *)reset, sizeof(reset) - 1, &r, &n);
                }
                if (mset) { /* this feed's MSETs, over keys drawn afresh */
                    seg[0].len = want[0] = 0;
                    for (int d = 0; d < cfg->depth; d++) want[0] += msetRequest(&seg[0], cfg, &x, mval);
                }
                const int slot = mset ? 0 : (int)(at & (RING - 1));
                const sbuf *s = &seg[slot];
                if (arm == 1 && passThrough(a, b, reply, rlen, sink, sink_cap)) {
                    snprintf(err, errlen, "serverloop: loopback write/read: %s", strerror(errno));
                    rc = -1;
                    break;
                }
                uint64_t e0 = clk(), e1 = clk();
                uint64_t t0 = clk();
                int closed = ksServerSessionFeed((const uint8_t *)s->p, s->len, &reply, &rlen);
                uint64_t t1 = clk();
                if (closed || rlen != want[slot]) {
                    snprintf(err, errlen, "serverloop: unexpected reply (%zu bytes, want %zu)", rlen,
                             want[slot]);
                    rc = -1;
                    break;
                }
                at++;
                if (i >= 0) t[i] = t1 - t0, e[i] = e1 - e0;
            }
            if (rc || traced) break;
            res->segment_ns[arm][round] = (double)medianU64(t, iters);
            res->clock_ns[arm][round] = (double)medianU64(e, iters);
            res->usec_per_call[arm][round] = usecPerCall(ksServerLoopCommandNames[cfg->command]);
        }
    if (traced) KS_MARK(KVT_MARK_WARMUP_BEGIN, 0); /* the check and the close: not measured */
    res->rounds = rounds;
    res->requests = (uint64_t)iters * (uint64_t)cfg->depth;
    free(t);
    free(e);
    free(sink);
    free(mval);
    if (a >= 0) close(a);
    if (b >= 0) close(b);
    for (int r = 0; r < RING; r++) free(seg[r].p);
    if (!rc && ksServerSessionCheckValid(err, errlen)) rc = -1;
    ksServerSessionClose();
    return rc;
}
