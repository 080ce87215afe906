/*
 * fuzz_cref_server.c -- libFuzzer target: c_ref's server (c_ref/server.c) handling one
 * client's byte stream: the query buffer, the pipeline run on every read, the cut of the
 * consumed prefix, the server's own commands (PING, CONFIG, INFO, SAVE, DEBUG RELOAD...),
 * the protocol errors that close the client and the query buffer limit -- the code of
 * `kvsim-cref serve` between read() and write(), without sockets (ksServerSession*).
 *
 * Input: byte 0 picks the keyspace options, the variants and the starting batch; byte 1
 * the read sizes (a stream is fed as reads of 1..256 bytes or whole); the rest is the
 * stream.  The query buffer limit is 64 KiB, so the limit is reachable.
 * Checked beyond ASan/UBSan: after every read the reply buffer holds whole RESP2 replies
 * (what the server writes is well formed), and the keyspace's invariants hold at the end.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../c_ref/arena.h"
#include "../../c_ref/server.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    ksArenaSetRetain(1); /* as fuzz_cref_resp.c: a fresh keyspace per input, pages reused */
    return 0;
}

static const char *const kOptions[] = {"", "table=dict", "layout=legacy", "cluster=1"};
static const char *const kPipelines[] = {"lookahead", "naive", "lookahead-hash-once", "lookahead"};
static const char *const kMultikeys[] = {"batch", "none", "chunk-15133", "redis-15043"};

static void fail(const char *what, const char *msg) {
    fprintf(stderr, "fuzz_cref_server: %s: %s\n", what, msg);
    abort();
}

/* One RESP2 reply at p (limit end): its length, or 0 if malformed or incomplete. */
static size_t replyLen(const uint8_t *p, const uint8_t *end, int depth) {
    if (p >= end || depth > 8) return 0;
    const uint8_t *cr = memchr(p, '\r', (size_t)(end - p));
    if (!cr || cr + 1 >= end || cr[1] != '\n') return 0;
    size_t head = (size_t)(cr - p) + 2;
    long long n = 0;
    int neg = 0;
    switch (*p) {
    case '+': case '-':
        return head;
    case ':': case '$': case '*':
        for (const uint8_t *s = p + 1; s < cr; s++) {
            if (s == p + 1 && *s == '-') neg = 1;
            else if (*s >= '0' && *s <= '9' && n < (1LL << 40)) n = n * 10 + (*s - '0');
            else return 0;
        }
        if (*p == ':' || (neg && n == 1)) return head;
        if (neg) return 0;
        if (*p == '$') {
            if ((size_t)(end - cr - 2) < (size_t)n + 2) return 0;
            return head + (size_t)n + 2;
        }
        {
            size_t len = head;
            for (long long i = 0; i < n; i++) {
                size_t m = replyLen(p + len, end, depth + 1);
                if (!m) return 0;
                len += m;
            }
            return len;
        }
    default:
        return 0;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 2) return 0;
    uint8_t sel = data[0], chunk = data[1];
    ksServerConfig cfg = {.options = kOptions[sel & 3], .pipeline = kPipelines[(sel >> 2) & 3],
                          .multikey = kMultikeys[(sel >> 4) & 3], .batch = (sel >> 6) * 5,
                          .querybuf_limit = 64 * 1024};
    char err[256];
    if (ksServerSessionOpen(&cfg, err, sizeof(err))) fail("open", err);
    const uint8_t *p = data + 2;
    size_t n = size - 2, step = chunk ? chunk : n;
    while (n) {
        size_t m = step < n ? step : n;
        const uint8_t *reply;
        size_t rlen;
        int closed = ksServerSessionFeed(p, m, &reply, &rlen);
        for (size_t pos = 0; pos < rlen;) {
            size_t r = replyLen(reply + pos, reply + rlen, 0);
            if (!r) fail("reply", "the reply buffer holds a malformed or partial reply");
            pos += r;
        }
        p += m;
        n -= m;
        if (closed) break;
    }
    if (ksServerSessionCheckValid(err, sizeof(err))) fail("ksCheckValid", err);
    ksServerSessionClose();
    return 0;
}
