/*
 * test_reply.c -- a server client's reply in the fixed buffer and reply blocks (reply.c),
 * against the bytes RESP says the replies are, formatted here independently:
 *   - MGET replies that fill the buffer and run over into one, two and more blocks, alone
 *     and pipelined so that the buffer's end falls in a header, a value and a CRLF;
 *   - every block is freed once the reply is written (the blocks' counters), and nothing
 *     is left in the client (check_valid);
 *   - KEYS, whose deferred length is put in front of elements spread over blocks;
 *   - random pieces appended and written back in random partial writes (writev's gather,
 *     _postWriteToClient's walk): the bytes come out in order, blocks freed as they go.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../callpath.h"
#include "../keyspace.h"
#include "../reply.h"
#include "../server.h"
#include "testhelp.h"

typedef struct {
    char *p;
    size_t len, cap;
} buf;

static void put(buf *b, const void *s, size_t n) {
    if (!n) return;
    if (b->len + n > b->cap) {
        b->cap = (b->len + n) * 2 + 64;
        b->p = realloc(b->p, b->cap);
        if (!b->p) abort();
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
}

static void putf(buf *b, const char *fmt, long long v) {
    char t[64];
    int n = snprintf(t, sizeof(t), fmt, v);
    put(b, t, (size_t)n);
}

static void bulk(buf *b, const char *s, size_t n) {
    putf(b, "$%lld\r\n", (long long)n);
    put(b, s, n);
    put(b, "\r\n", 2);
}

/* key i's value: vlen bytes derived from i */
static void value(char *v, size_t vlen, int i) {
    for (size_t j = 0; j < vlen; j++) v[j] = (char)('a' + (i * 7 + (int)j) % 26);
}

static void keyname(char *k, int i) { snprintf(k, 16, "key:%06d", i); }

static int feed(const buf *q, buf *out) {
    const uint8_t *r;
    size_t rl;
    if (ksServerSessionFeed((const uint8_t *)q->p, q->len, &r, &rl)) return -1;
    out->len = 0;
    put(out, r, rl);
    return 0;
}

static int open_session(void) {
    ksServerConfig cfg;
    memset(&cfg, 0, sizeof(cfg));
    cfg.options = "";
    char err[256];
    if (ksServerSessionOpen(&cfg, err, sizeof(err))) {
        fprintf(stderr, "%s\n", err);
        return -1;
    }
    return 0;
}

/* SET key:0..n-1 to values of vlen bytes. */
static int fill(int n, size_t vlen) {
    buf q = {0}, out = {0}, want = {0};
    char *v = malloc(vlen), k[16];
    for (int i = 0; i < n; i++) {
        keyname(k, i);
        value(v, vlen, i);
        put(&q, "*3\r\n$3\r\nSET\r\n", 13);
        bulk(&q, k, strlen(k));
        bulk(&q, v, vlen);
        put(&want, "+OK\r\n", 5);
    }
    int rc = feed(&q, &out) || out.len != want.len || memcmp(out.p, want.p, want.len) ? -1 : 0;
    free(v);
    free(q.p);
    free(out.p);
    free(want.p);
    return rc;
}

/* MGET of keys first..first+n-1 (and one missing key when miss) into q, its reply into want. */
static void mget(buf *q, buf *want, int first, int n, size_t vlen, int miss) {
    char k[16], *v = malloc(vlen);
    putf(q, "*%lld\r\n$4\r\nMGET\r\n", (long long)n + 1 + miss);
    putf(want, "*%lld\r\n", (long long)n + miss);
    for (int i = first; i < first + n; i++) {
        keyname(k, i);
        bulk(q, k, strlen(k));
        value(v, vlen, i);
        bulk(want, v, vlen);
    }
    if (miss) {
        bulk(q, "nokey", 5);
        put(want, "$-1\r\n", 5);
    }
    free(v);
}

/* MGETs of 60..300 keys of 256 bytes (one block to four), each alone, then pipelined in
 * reads whose replies put the buffer's end at every offset of a value's RESP line. */
static int test_mget_replies_span_buffer_and_blocks(void) {
    TEST_ASSERT(open_session() == 0);
    const size_t vlen = 256;
    TEST_ASSERT(fill(400, vlen) == 0);
    char err[256];
    buf q = {0}, want = {0}, out = {0};
    static const int counts[] = {60, 63, 64, 65, 70, 100, 130, 200, 300};
    for (size_t t = 0; t < sizeof(counts) / sizeof(counts[0]); t++) {
        q.len = want.len = 0;
        mget(&q, &want, 0, counts[t], vlen, (int)(t & 1));
        uint64_t a0, f0, a1, f1;
        ksReplyBlockCounts(&a0, &f0);
        TEST_ASSERT(feed(&q, &out) == 0);
        ksReplyBlockCounts(&a1, &f1);
        TEST_ASSERT_MSG(out.len == want.len && memcmp(out.p, want.p, want.len) == 0, "MGET %d: %zu bytes, want %zu",
                        counts[t], out.len, want.len);
        /* a reply past the buffer takes blocks; every one is freed by the write */
        size_t blocks = want.len > KS_PROTO_REPLY_CHUNK_BYTES ? (want.len - KS_PROTO_REPLY_CHUNK_BYTES - 1) /
                                                                        KS_PROTO_REPLY_CHUNK_BYTES
                                                              : 0;
        TEST_ASSERT_MSG(want.len <= KS_PROTO_REPLY_CHUNK_BYTES || a1 - a0 >= 1, "MGET %d: no block", counts[t]);
        TEST_ASSERT_MSG(a1 - a0 >= blocks, "MGET %d: %llu blocks", counts[t], (unsigned long long)(a1 - a0));
        TEST_ASSERT_MSG(f1 - f0 == a1 - a0, "MGET %d: %llu allocated, %llu freed", counts[t],
                        (unsigned long long)(a1 - a0), (unsigned long long)(f1 - f0));
        TEST_ASSERT_MSG(ksServerSessionCheckValid(err, sizeof(err)) == 0, "%s", err);
    }
    /* pipelined: GETs of 1..40 bytes of padding shift where the buffer ends */
    for (int shift = 0; shift < 300; shift += 7) {
        q.len = want.len = 0;
        put(&q, "*2\r\n$4\r\nECHO\r\n", 14);
        char pad[400];
        memset(pad, 'p', sizeof(pad));
        bulk(&q, pad, (size_t)shift);
        bulk(&want, pad, (size_t)shift);
        mget(&q, &want, 0, 70, vlen, 0);
        mget(&q, &want, 100, 130, vlen, 1);
        mget(&q, &want, 5, 20, vlen, 0);
        uint64_t a0, f0, a1, f1;
        ksReplyBlockCounts(&a0, &f0);
        TEST_ASSERT(feed(&q, &out) == 0);
        ksReplyBlockCounts(&a1, &f1);
        TEST_ASSERT_MSG(out.len == want.len && memcmp(out.p, want.p, want.len) == 0, "shift %d: %zu bytes, want %zu",
                        shift, out.len, want.len);
        TEST_ASSERT_MSG(a1 - a0 >= 2 && f1 - f0 == a1 - a0, "shift %d: %llu blocks, %llu freed", shift,
                        (unsigned long long)(a1 - a0), (unsigned long long)(f1 - f0));
        TEST_ASSERT_MSG(ksServerSessionCheckValid(err, sizeof(err)) == 0, "%s", err);
    }
    free(q.p);
    free(want.p);
    free(out.p);
    ksServerSessionClose();
    return 0;
}

/* KEYS over 2000 keys: a reply of some 40 KB, its length in front of elements in blocks. */
static int test_keys_deferred_length_over_blocks(void) {
    TEST_ASSERT(open_session() == 0);
    const int n = 2000;
    TEST_ASSERT(fill(n, 8) == 0);
    buf q = {0}, out = {0};
    put(&q, "*2\r\n$4\r\nKEYS\r\n$1\r\n*\r\n", 21);
    TEST_ASSERT(feed(&q, &out) == 0);
    char hdr[32];
    int hl = snprintf(hdr, sizeof(hdr), "*%d\r\n", n);
    TEST_ASSERT_MSG(out.len > KS_PROTO_REPLY_CHUNK_BYTES * 2 && memcmp(out.p, hdr, (size_t)hl) == 0, "%zu: %.*s", out.len,
                    (int)(out.len < 40 ? out.len : 40), out.p);
    /* every key once: "$10\r\nkey:NNNNNN\r\n" (17 bytes each) */
    TEST_ASSERT(out.len == (size_t)hl + (size_t)n * 17);
    char *seen = calloc((size_t)n, 1);
    for (int i = 0; i < n; i++) {
        const char *e = out.p + hl + (size_t)i * 17;
        TEST_ASSERT(memcmp(e, "$10\r\nkey:", 9) == 0 && memcmp(e + 15, "\r\n", 2) == 0);
        int id = atoi(e + 9);
        TEST_ASSERT(id >= 0 && id < n && !seen[id]);
        seen[id] = 1;
    }
    free(seen);
    char err[256];
    TEST_ASSERT_MSG(ksServerSessionCheckValid(err, sizeof(err)) == 0, "%s", err);
    free(q.p);
    free(out.p);
    ksServerSessionClose();
    return 0;
}

/* Random pieces (1 byte to 40 KiB) into a client's buffer and blocks, written back in
 * random partial writes through the gather: the stream comes out in order, each block is
 * freed once written, none is left. */
static int test_partial_writes_free_blocks_in_order(void) {
    srand(42);
    for (int round = 0; round < 50; round++) {
        ksClient c;
        memset(&c, 0, sizeof(c));
        c.rcap = 16392;
        c.rbuf = malloc(c.rcap);
        buf in = {0}, got = {0};
        uint64_t a0, f0;
        ksReplyBlockCounts(&a0, &f0);
        int pieces = 1 + rand() % 200;
        for (int i = 0; i < pieces; i++) {
            size_t n = rand() % 8 == 0 ? (size_t)(rand() % 40000) : (size_t)(rand() % 300);
            char *p = malloc(n + 1);
            for (size_t j = 0; j < n; j++) p[j] = (char)rand();
            put(&in, p, n);
            ksReplyAddProto(&c, p, n);
            free(p);
            /* sometimes write some of it before more is added */
            if (rand() % 4 == 0 && ksReplyLen(&c)) {
                struct iovec iov[1024];
                size_t bytes;
                int cnt = ksReplyIov(&c, iov, 1024, &bytes);
                size_t w = bytes ? 1 + (size_t)rand() % bytes : 0, left = w;
                for (int k = 0; k < cnt && left; k++) {
                    size_t part = left < iov[k].iov_len ? left : iov[k].iov_len;
                    put(&got, iov[k].iov_base, part);
                    left -= part;
                }
                ksReplyWritten(&c, w);
            }
        }
        for (int guard = 0; c.rlen || c.reply.len; guard++) {
            TEST_ASSERT(guard < 100000);
            struct iovec iov[16];
            size_t bytes;
            int cnt = ksReplyIov(&c, iov, 16, &bytes);
            size_t w = rand() % 3 ? bytes : 1 + (size_t)rand() % (bytes ? bytes : 1), left = w;
            if (!bytes) w = 0;
            for (int k = 0; k < cnt && left; k++) {
                size_t part = left < iov[k].iov_len ? left : iov[k].iov_len;
                put(&got, iov[k].iov_base, part);
                left -= part;
            }
            ksReplyWritten(&c, w);
        }
        uint64_t a1, f1;
        ksReplyBlockCounts(&a1, &f1);
        TEST_ASSERT_MSG(got.len == in.len && (in.len == 0 || memcmp(got.p, in.p, in.len) == 0), "round %d", round);
        TEST_ASSERT_MSG(a1 - a0 == f1 - f0 && c.reply_bytes == 0 && c.sentlen == 0, "round %d: blocks left",
                        round);
        free(c.rbuf);
        free(in.p);
        free(got.p);
    }
    return 0;
}

int main(int argc, char **argv) {
    TEST_INIT(argc, argv);
    RUN(test_mget_replies_span_buffer_and_blocks);
    RUN(test_keys_deferred_length_over_blocks);
    RUN(test_partial_writes_free_blocks_in_order);
    return TEST_DONE();
}
