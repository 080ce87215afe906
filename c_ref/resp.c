/*
 * resp.c -- RESP2 request parsing (multibulk and inline) and reply writing.
 *
 *   query buffer (arena, tag query_buf)
 *   +---------------------------------------------------------------+
 *   |*2\r\n$3\r\nGET\r\n$5\r\nkey:1\r\n*3\r\n$3\r\nSET ...           |
 *   +---------------------------------------------------------------+
 *    ^qpos                          ^qpos after one ksParseCommand
 *
 * Each argument becomes an sds in the arena (tag argv), as Valkey creates one
 * argv string per argument.  Protocol errors carry Valkey's messages
 * (processMultibulkBuffer / processInlineBuffer) and close the client: the
 * rest of the query is discarded.  Replies are appended to the reply buffer
 * (arena, tag reply_buf), which grows by doubling; a server's go to its fixed buffer and
 * reply blocks instead (callpath.c ksCallAppend, reply.c).
 *
 * Conventions: public ks...; static internals without prefix.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "callpath.h"
#include "keyspace.h"

#define PROTO_INLINE_MAX_SIZE (1024 * 64)
#define PROTO_MAX_BULK_LEN (512LL * 1024 * 1024)
#define PROTO_MAX_ARGS (1024 * 1024)

/* --- Client buffers -------------------------------------------------------- */

void ksClientInit(ksKeyspace *ks, ksClient *c) {
    memset(c, 0, sizeof(*c));
    c->qcap = 16 * 1024;
    c->slot = -1; /* c->slot: no key slot yet */
    c->qbuf = ksArenaAlloc(ks->arena, c->qcap);
    c->rcap = 16 * 1024;
    c->rbuf = ksArenaAlloc(ks->arena, c->rcap);
}

void ksClientFree(ksKeyspace *ks, ksClient *c) {
    ksArenaFree(ks->arena, c->qbuf);
    ksArenaFree(ks->arena, c->rbuf);
    memset(c, 0, sizeof(*c));
}

void ksClientSetQuery(ksKeyspace *ks, ksClient *c, const uint8_t *q, size_t len) {
    if (len > c->qcap) {
        size_t cap = c->qcap;
        while (cap < len) cap *= 2;
        ksArenaFree(ks->arena, c->qbuf);
        c->qbuf = ksArenaAlloc(ks->arena, cap);
        c->qcap = cap;
    }
    if (len) memcpy(c->qbuf, q, len);
    KS_STORE(c->qbuf, len, KVT_TAG_QUERY_BUF, KS_SITE_RESP_PARSE, 0);
    c->qlen = len;
    c->qpos = 0;
    c->closed = 0;
}

/* ull2string-style formatting: digits of v into buf (no NUL); returns length. */
static size_t u64ToStr(char *buf, uint64_t v) {
    char tmp[24];
    size_t n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    for (size_t i = 0; i < n; i++) buf[i] = tmp[n - 1 - i];
    return n;
}

/* "<prefix><v>\r\n" into buf; returns length. */
static size_t fmtLine(char *buf, char prefix, long long v) {
    size_t n = 0;
    buf[n++] = prefix;
    if (v < 0) {
        buf[n++] = '-';
        n += u64ToStr(buf + n, (uint64_t)(-(v + 1)) + 1);
    } else {
        n += u64ToStr(buf + n, (uint64_t)v);
    }
    buf[n++] = '\r';
    buf[n++] = '\n';
    return n;
}

size_t ksFmtLine(char *buf, char prefix, long long v) { return fmtLine(buf, prefix, v); }

static void replyReserve(ksKeyspace *ks, ksClient *c, size_t n) {
    if (c->rlen + n <= c->rcap) return;
    size_t cap = c->rcap;
    while (cap < c->rlen + n) cap *= 2;
    uint8_t *nb = ksArenaAlloc(ks->arena, cap);
    memcpy(nb, c->rbuf, c->rlen);
    ksArenaFree(ks->arena, c->rbuf);
    c->rbuf = nb;
    c->rcap = cap;
}

void ksReplyRaw(ksKeyspace *ks, ksClient *c, const void *p, size_t len) {
    replyReserve(ks, c, len);
    memcpy(c->rbuf + c->rlen, p, len);
    KS_STORE(c->rbuf + c->rlen, len, KVT_TAG_REPLY_BUF, KS_SITE_RESP_REPLY, 0);
    c->rlen += len;
}

/* A server's replies (callpath.c) go piece by piece through prepareClientToWrite and
 * _addReplyToBufferOrList, as Valkey's addReply* functions do; the in-memory workloads
 * append each reply whole. */
void ksReplyError(ksKeyspace *ks, ksClient *c, const char *msg) {
    if (ksCallPathOn) { /* addReplyErrorLength: three addReplyProto */
        for (int i = 0; i < 3; i++)
            if (ksCallPrepareWrite(c))
                ksCallAppend(ks, c, i == 0 ? "-" : i == 1 ? msg : "\r\n", i == 0 ? 1 : i == 1 ? strlen(msg) : 2);
        return;
    }
    ksReplyRaw(ks, c, "-", 1);
    ksReplyRaw(ks, c, msg, strlen(msg));
    ksReplyRaw(ks, c, "\r\n", 2);
}

void ksReplyStatus(ksKeyspace *ks, ksClient *c, const char *msg) {
    if (ksCallPathOn) {
        if (!strcmp(msg, "OK") || !strcmp(msg, "PONG")) { /* addReply(c, shared.ok / shared.pong) */
            if (ksCallPrepareWrite(c)) ksCallAppend(ks, c, msg[0] == 'O' ? "+OK\r\n" : "+PONG\r\n", msg[0] == 'O' ? 5 : 7);
            return;
        }
        for (int i = 0; i < 3; i++) /* addReplyStatusLength */
            if (ksCallPrepareWrite(c))
                ksCallAppend(ks, c, i == 0 ? "+" : i == 1 ? msg : "\r\n", i == 0 ? 1 : i == 1 ? strlen(msg) : 2);
        return;
    }
    char buf[128];
    int n = snprintf(buf, sizeof(buf), "+%s\r\n", msg);
    ksReplyRaw(ks, c, buf, (size_t)n);
}

void ksReplyInt(ksKeyspace *ks, ksClient *c, long long v) {
    if (ksCallPathOn) { /* addReplyLongLong: shared czero / cone, else formatted */
        if (!ksCallPrepareWrite(c)) return;
        if (v == 0 || v == 1) ksCallAppend(ks, c, v ? ":1\r\n" : ":0\r\n", 4);
        else ksCallAppendLen(ks, c, ':', v);
        return;
    }
    char buf[32];
    ksReplyRaw(ks, c, buf, fmtLine(buf, ':', v));
}

void ksReplyArrayLen(ksKeyspace *ks, ksClient *c, long long v) {
    if (ksCallPathOn) { /* addReplyAggregateLen */
        if (ksCallPrepareWrite(c)) ksCallAppendLen(ks, c, '*', v);
        return;
    }
    char buf[32];
    ksReplyRaw(ks, c, buf, fmtLine(buf, '*', v));
}

void ksReplyNull(ksKeyspace *ks, ksClient *c) {
    if (ksCallPathOn) { /* addReplyProto */
        if (ksCallPrepareWrite(c)) ksCallAppend(ks, c, "$-1\r\n", 5);
        return;
    }
    ksReplyRaw(ks, c, "$-1\r\n", 5);
}

/* Bulk string; the bytes are read (dep = load that produced p, tag = what they are). */
/* A server's addReplyBulk: isCopyAvoidPreferred (a copy here: io-threads 1), then
 * addReplyBulkLen, addReply, addReplyProto CRLF. */
static __attribute__((noinline)) void serverReplyBulk(ksKeyspace *ks, ksClient *c, const uint8_t *p, size_t len,
                                                      ksLoadId dep, uint8_t tag) {
    (void)ksCallCopyAvoidPreferred(c, 1, NULL, len);
    if (len) (void)KS_LOAD(p, len, tag, tag == KVT_TAG_KEY ? KS_SITE_OBJ_KEY : KS_SITE_OBJ_VALUE, dep);
    (void)dep;
    (void)tag;
    if (ksCallPrepareWrite(c)) ksCallAppendLen(ks, c, '$', (long long)len);
    if (ksCallPrepareWrite(c)) ksCallAppend(ks, c, p, len);
    if (ksCallPrepareWrite(c)) ksCallAppend(ks, c, "\r\n", 2);
}

void ksReplyBulkTagged(ksKeyspace *ks, ksClient *c, const uint8_t *p, size_t len, ksLoadId dep, uint8_t tag) {
    if (ksCallPathOn) {
        serverReplyBulk(ks, c, p, len, dep, tag);
        return;
    }
    char hdr[32];
    size_t n = fmtLine(hdr, '$', (long long)len);
    replyReserve(ks, c, n + len + 2);
    uint8_t *w = c->rbuf + c->rlen;
    memcpy(w, hdr, n);
    if (len) (void)KS_LOAD(p, len, tag, tag == KVT_TAG_KEY ? KS_SITE_OBJ_KEY : KS_SITE_OBJ_VALUE, dep);
    (void)tag;
    memcpy(w + n, p, len);
    w[n + len] = '\r';
    w[n + len + 1] = '\n';
    KS_STORE(w, n + len + 2, KVT_TAG_REPLY_BUF, KS_SITE_RESP_REPLY, 0);
    c->rlen += n + len + 2;
}

void ksReplyBulk(ksKeyspace *ks, ksClient *c, const uint8_t *p, size_t len, ksLoadId dep) {
    ksReplyBulkTagged(ks, c, p, len, dep, KVT_TAG_VALUE);
}

/* A server's addReplyBulk of a string object (Valkey 9.1): its length by stringObjectLen,
 * isCopyAvoidPreferred of the object, then the header, addReply of the object (its value
 * found again by objectGetVal) and CRLF.  Each read of the value goes through the object's
 * header (object.c objectGetVal); the bytes are those ksEntryGetValue found. */
static __attribute__((noinline)) void serverReplyBulkObject(ksKeyspace *ks, ksClient *c, const void *o,
                                                            ksLoadId dep) {
    size_t len = ksCallStringObjectLen(o);
    (void)ksCallCopyAvoidPreferred(c, 1, o, len);
    if (ksCallPrepareWrite(c)) ksCallAppendLen(ks, c, '$', (long long)len);
    if (ksCallPrepareWrite(c)) { /* addReply: objectGetVal, then the bytes */
        const uint8_t *p = (const uint8_t *)ksObjectGetValOfValue(o);
        if (len) (void)KS_LOAD(p, len, KVT_TAG_VALUE, KS_SITE_OBJ_VALUE, dep);
        ksCallAppend(ks, c, p, len);
    }
    (void)dep;
    if (ksCallPrepareWrite(c)) ksCallAppend(ks, c, "\r\n", 2);
}

void ksReplyBulkObject(ksKeyspace *ks, ksClient *c, const void *o, const uint8_t *p, size_t len, ksLoadId dep) {
    if (ksCallPathOn) {
        serverReplyBulkObject(ks, c, o, dep);
        return;
    }
    ksReplyBulkTagged(ks, c, p, len, dep, KVT_TAG_VALUE);
}

void ksReplyDouble(ksKeyspace *ks, ksClient *c, const char *text, size_t len) {
    /* addReplyDouble: "$<len>\r\n<text>\r\n" built in a stack buffer, then one
     * addReplyProto; the buffer is not recorded (its address is the stack's, which
     * changes from run to run; its lines are the stack's, in L1) */
    char buf[64];
    if (len > sizeof(buf) - 16) abort(); /* a score's text is at most KS_ZSET_SCORE_MAX */
    size_t n = fmtLine(buf, '$', (long long)len);
    memcpy(buf + n, text, len);
    memcpy(buf + n + len, "\r\n", 2);
    n += len + 2;
    if (ksCallPathOn) {
        if (ksCallPrepareWrite(c)) ksCallAppend(ks, c, buf, n);
        return;
    }
    ksReplyRaw(ks, c, buf, n);
}

/* --- Parsing --------------------------------------------------------------- */

static void argvReserve(ksKeyspace *ks, ksCommand *cmd, int n) {
    if (n <= cmd->argv_cap) return;
    int cap = cmd->argv_cap ? cmd->argv_cap : 4;
    while (cap < n) cap *= 2;
    sds *nv = ksArenaAlloc(ks->arena, sizeof(sds) * (size_t)cap);
    if (cmd->argc) memcpy(nv, cmd->argv, sizeof(sds) * (size_t)cmd->argc);
    if (cmd->argv) ksArenaFree(ks->arena, cmd->argv);
    cmd->argv = nv;
    cmd->argv_cap = cap;
}

static sds newArg(ksKeyspace *ks, const uint8_t *p, size_t len) {
    int t = sdsReqTypeNo5(len);
    void *m = ksArenaAlloc(ks->arena, sdsSize(t, len));
    sds s = sdsWriteAt(m, t, p, len, len);
    KS_STORE(m, sdsSize(t, len), KVT_TAG_ARGV, KS_SITE_RESP_ARGV, 0);
    return s;
}

void ksCommandFree(ksKeyspace *ks, ksCommand *cmd) {
    if (cmd->argv_obj) {
        ksCallArgvFree(cmd);
        return;
    }
    for (int i = 0; i < cmd->argc; i++) ksArenaFree(ks->arena, sdsAllocPtr(cmd->argv[i]));
    if (cmd->argv) ksArenaFree(ks->arena, cmd->argv);
    cmd->argv = NULL;
    cmd->argv_cap = 0;
    cmd->argc = 0;
}

/* Parse "<prefix><integer>\r\n" at p (limit end).  Returns bytes consumed, 0
 * if incomplete, -1 on a malformed number or missing \n. */
static long parseLine(const uint8_t *p, const uint8_t *end, long long *out, int *ok) {
    const uint8_t *cr = memchr(p, '\r', (size_t)(end - p));
    if (!cr) return 0;
    if (cr + 1 >= end) return 0; /* need the \n */
    /* Parse an integer between p+1 and cr (string2ll rules: no spaces, no '+'). */
    const uint8_t *s = p + 1;
    long long v = 0;
    int neg = 0;
    *ok = 1;
    if (s == cr) *ok = 0;
    if (s < cr && *s == '-') {
        neg = 1;
        s++;
        if (s == cr) *ok = 0;
    }
    if (s < cr && *s == '0' && cr - s > 1) *ok = 0;
    for (; s < cr && *ok; s++) {
        if (*s < '0' || *s > '9') {
            *ok = 0;
            break;
        }
        if (v > (LLONG_MAX - (*s - '0')) / 10) {
            *ok = 0;
            break;
        }
        v = v * 10 + (*s - '0');
    }
    *out = neg ? -v : v;
    return (long)(cr - p) + 2;
}

static int protoError(ksCommand *cmd, const char *msg) {
    cmd->proto_err = msg;
    return -1;
}

static int parseMultibulk(ksKeyspace *ks, ksClient *c, ksCommand *cmd) {
    const uint8_t *start = c->qbuf + c->qpos, *end = c->qbuf + c->qlen, *p = start;
    long long ll;
    int ok;
    long n = parseLine(p, end, &ll, &ok);
    if (n == 0) {
        if (end - p > PROTO_INLINE_MAX_SIZE) return protoError(cmd, "ERR Protocol error: too big mbulk count string");
        return 0;
    }
    if (!ok || ll > INT_MAX) return protoError(cmd, "ERR Protocol error: invalid multibulk length");
    p += n;
    if (ll <= 0) { /* empty command: skip */
        c->qpos = (size_t)(p - c->qbuf);
        cmd->argc = 0;
        return 1;
    }
    if (ll > PROTO_MAX_ARGS) return protoError(cmd, "ERR Protocol error: invalid multibulk length");
    int argc = (int)ll;
    /* One pass: locate every argument, then (complete) build argv. */
    enum { STACK_ARGS = 64 };
    const uint8_t *sp[STACK_ARGS];
    size_t sl[STACK_ARGS];
    const uint8_t **ap = sp;
    size_t *al = sl;
    if (argc > STACK_ARGS) {
        ap = malloc(sizeof(*ap) * (size_t)argc);
        al = malloc(sizeof(*al) * (size_t)argc);
        if (!ap || !al) abort();
    }
    int rc = 1;
    const uint8_t *q = p;
    for (int i = 0; i < argc; i++) {
        if (q >= end) {
            rc = 0;
            break;
        }
        if (*q != '$') {
            static char msg[64];
            /* addReplyErrorFormat: CR and LF in an error become spaces */
            snprintf(msg, sizeof(msg), "ERR Protocol error: expected '$', got '%c'",
                     *q == '\r' || *q == '\n' ? ' ' : *q);
            rc = protoError(cmd, msg);
            break;
        }
        long m = parseLine(q, end, &ll, &ok);
        if (m == 0) {
            rc = end - q > PROTO_INLINE_MAX_SIZE ? protoError(cmd, "ERR Protocol error: too big bulk count string") : 0;
            break;
        }
        if (!ok || ll < 0 || ll > PROTO_MAX_BULK_LEN) {
            rc = protoError(cmd, "ERR Protocol error: invalid bulk length");
            break;
        }
        (void)KS_LOAD(q, (size_t)m, KVT_TAG_QUERY_BUF, KS_SITE_RESP_PARSE, 0);
        q += m;
        if ((long long)(end - q) < ll + 2) {
            rc = 0;
            break;
        }
        ap[i] = q;
        al[i] = (size_t)ll;
        q += ll + 2; /* Valkey does not check the trailing CRLF */
    }
    if (rc == 1 && ksCallPathOn) { /* a server's argv: objects from the libc allocator */
        KS_WORK_OF(KVT_WORK_PARSE, 20 * argc);
        ksCallArgvNew(cmd, argc);
        for (int i = 0; i < argc; i++) {
            (void)KS_LOAD(ap[i], al[i], KVT_TAG_QUERY_BUF, KS_SITE_ARGV_BYTES, 0);
            ksCallArgAdd(cmd, ap[i], al[i]);
        }
        p = q;
    } else if (rc == 1) {
        KS_WORK_OF(KVT_WORK_PARSE, 20 * argc);
        argvReserve(ks, cmd, argc);
        for (int i = 0; i < argc; i++) {
            (void)KS_LOAD(ap[i], al[i], KVT_TAG_QUERY_BUF, KS_SITE_RESP_PARSE, 0);
            cmd->argv[cmd->argc++] = newArg(ks, ap[i], al[i]);
        }
        p = q;
    }
    if (ap != sp) {
        free(ap);
        free(al);
    }
    if (rc != 1) return rc;
    KS_STORE(cmd->argv, sizeof(sds) * (size_t)argc, KVT_TAG_ARGV, KS_SITE_RESP_ARGV, 0);
    c->qpos = (size_t)(p - c->qbuf);
    return 1;
}

/* sdssplitargs-like splitting of an inline command; -1 on unbalanced quotes. */
static int hexval(int ch) {
    if (ch >= '0' && ch <= '9') return ch - '0';
    if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
    return -1;
}

static int splitInline(ksKeyspace *ks, ksCommand *cmd, const uint8_t *p, const uint8_t *end) {
    uint8_t *tmp = ksArenaAlloc(ks->arena, (size_t)(end - p) + 1);
    int rc = 0;
    while (1) {
        while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')) p++;
        if (p >= end) break;
        size_t len = 0;
        int inq = 0, insq = 0, done = 0;
        while (!done) {
            if (inq) {
                if (p >= end) { rc = -1; goto out; }
                if (*p == '\\' && p + 3 < end && p[1] == 'x' && hexval(p[2]) >= 0 && hexval(p[3]) >= 0) {
                    tmp[len++] = (uint8_t)(hexval(p[2]) * 16 + hexval(p[3]));
                    p += 3;
                } else if (*p == '\\' && p + 1 < end) {
                    p++;
                    uint8_t ch = *p;
                    tmp[len++] = ch == 'n' ? '\n' : ch == 'r' ? '\r' : ch == 't' ? '\t' : ch == 'b' ? '\b' : ch == 'a' ? '\a' : ch;
                } else if (*p == '"') {
                    if (p + 1 < end && !(p[1] == ' ' || p[1] == '\t' || p[1] == '\n' || p[1] == '\r')) { rc = -1; goto out; }
                    done = 1;
                } else {
                    tmp[len++] = *p;
                }
            } else if (insq) {
                if (p >= end) { rc = -1; goto out; }
                if (*p == '\\' && p + 1 < end && p[1] == '\'') {
                    p++;
                    tmp[len++] = '\'';
                } else if (*p == '\'') {
                    if (p + 1 < end && !(p[1] == ' ' || p[1] == '\t' || p[1] == '\n' || p[1] == '\r')) { rc = -1; goto out; }
                    done = 1;
                } else {
                    tmp[len++] = *p;
                }
            } else {
                if (p >= end) { done = 1; break; }
                switch (*p) {
                case ' ': case '\n': case '\r': case '\t': done = 1; break;
                case '"': inq = 1; break;
                case '\'': insq = 1; break;
                default: tmp[len++] = *p; break;
                }
                if (done) break;
            }
            if (p < end) p++;
        }
        argvReserve(ks, cmd, cmd->argc + 1);
        cmd->argv[cmd->argc++] = newArg(ks, tmp, len);
    }
out:
    ksArenaFree(ks->arena, tmp);
    return rc;
}

static int parseInline(ksKeyspace *ks, ksClient *c, ksCommand *cmd) {
    const uint8_t *start = c->qbuf + c->qpos, *end = c->qbuf + c->qlen;
    const uint8_t *nl = memchr(start, '\n', (size_t)(end - start));
    if (!nl) {
        if (end - start > PROTO_INLINE_MAX_SIZE) return protoError(cmd, "ERR Protocol error: too big inline request");
        return 0;
    }
    const uint8_t *lend = nl;
    if (lend > start && lend[-1] == '\r') lend--;
    (void)KS_LOAD(start, (size_t)(nl - start) + 1, KVT_TAG_QUERY_BUF, KS_SITE_RESP_PARSE, 0);
    if (splitInline(ks, cmd, start, lend) < 0) {
        ksCommandFree(ks, cmd);
        return protoError(cmd, "ERR Protocol error: unbalanced quotes in request");
    }
    c->qpos = (size_t)(nl + 1 - c->qbuf);
    return 1;
}

int ksParseCommand(ksKeyspace *ks, ksClient *c, ksCommand *cmd) {
    cmd->argc = 0;
    cmd->argv_obj = NULL;
    cmd->proto_err = NULL;
    cmd->def = NULL;
    cmd->prefetched = 0;
    cmd->pipelined = 0;
    if (c->closed || c->qpos >= c->qlen) return 0;
    (void)KS_LOAD(c->qbuf + c->qpos, 1, KVT_TAG_QUERY_BUF, KS_SITE_RESP_PARSE, 0);
    if (__builtin_expect(ksCallPathOn, 0)) { /* a server: the read flags, handleParseResults */
        int multibulk = c->qbuf[c->qpos] == '*';
        int rc = multibulk ? parseMultibulk(ks, c, cmd) : parseInline(ks, c, cmd);
        return ksCallParseResults(c, rc, cmd->argc, multibulk);
    }
    if (c->qbuf[c->qpos] == '*') return parseMultibulk(ks, c, cmd);
    return parseInline(ks, c, cmd);
}
