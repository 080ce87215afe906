/*
 * server.c -- the c_ref keyspace behind a RESP2 server: an epoll event loop
 * over TCP sockets with the shape of Valkey's main thread (io-threads 1).
 *
 *   epoll_pwait ──> listener readable: accept4, TCP_NODELAY, EPOLLIN   (acceptTcpHandler)
 *        │     └──> client readable:   readQuery                      (readQueryFromClient)
 *        │              read(fd) appends to the client's query buffer (tag query_buf)
 *        │              ks->var.pipeline(ks, c): parse every complete command, run it with
 *        │                the pipeline and multi-key variants (pipeline.c, commands.c --
 *        │                the very functions the in-memory workloads and ksExecute call),
 *        │                replies appended to the client's reply buffer (tag reply_buf)
 *        │              the consumed prefix is cut from the query buffer (sdsrange)
 *        │              ksDbCron between two reads (databasesCron's incremental rehash)
 *        │              the client joins the pending-write list     (clients_pending_write)
 *        └── before the next epoll_pwait: write each pending reply buffer   (beforeSleep ->
 *              handleClientsWithPendingWrites); what the socket does not take stays, and the
 *              client gets EPOLLOUT until it is written            (connSetWriteHandler)
 *
 * One query buffer and one reply buffer per client, as Valkey's c->querybuf and c->buf /
 * reply list (one growable buffer here).  A read asks for PROTO_IOBUF_LEN (16 KiB) or more
 * when the buffer has more room; a query buffer past client-query-buffer-limit (1 GiB)
 * closes the client without a reply, as Valkey does.  Protocol errors (resp.c: Valkey's
 * messages, incl. an oversized bulk length or inline request) are replied to and the
 * client is closed once the reply is written (CLIENT_CLOSE_AFTER_REPLY).  A client that
 * disconnects, even in the middle of a command, is freed; a broken pipe is an EPIPE, not
 * a signal.  Clients past maxclients get "-ERR max number of clients reached".
 *
 * Commands: the keyspace's own (commands.c: GET SET MGET MSET KEYS DBSIZE FLUSHALL ...)
 * plus the server's, registered with ksRegisterCommands so pipelines and lookahead
 * batches see one dispatch: PING, ECHO, SELECT 0, SAVE (a snapshot into the keyspace's
 * snapshot buffer, c_ref/SNAPSHOT.md), DEBUG RELOAD (SAVE, then load that snapshot into
 * the emptied keyspace: the load path of the `load` workload), CONFIG GET/SET/RESETSTAT,
 * INFO (server, clients, memory, stats, commandstats, keyspace) and COMMAND (an empty
 * array: the server publishes no command docs).  redis-benchmark and valkey-benchmark ask
 * for CONFIG GET save and appendonly at start; the answers say no persistence.
 *
 * Every command pays the server's work around the keyspace as Valkey's main thread does
 * (callpath.c, turned on here): argv objects from the libc allocator, the command dict,
 * processCommand's checks, call()'s timing (the monotonic clock before and after, INFO's
 * commandstats usec, an HDR latency histogram) and bookkeeping, replies appended piece by
 * piece; the in-memory workloads run the same dispatch without it.  The keyspace's
 * blocks (objects, values, tables, client buffers) come from the C library's malloc as
 * well (arena.c's libc mode, `--allocator libc`, the default): the reference Valkey is
 * built with MALLOC=libc (INFO mem_allocator:libc), so every SET allocates and every
 * overwrite frees through glibc, and a 64-byte bucket array lies where glibc's mmap'd
 * chunk puts it (a page plus 16 bytes).  `--allocator arena` serves from c_ref's
 * deterministic arena instead (jemalloc's classes: an ablation).
 *
 * Prefetching at run time: CONFIG SET prefetch-batch-max-size N.  N = 0 runs the naive
 * pipeline without multi-key prefetch (Valkey: no batch, commands one at a time); N in
 * 1..128 runs the configured pipeline and multi-key variants with batch N (Valkey
 * prefetches only batches of more than one key, so N = 1 prefetches nothing either).
 * One server process can so alternate baseline and variant, as a Valkey server does.
 *
 * Shutdown: SIGTERM and SIGINT are blocked except inside epoll_pwait, so a signal ends
 * the loop at its top; every client is closed and the keyspace freed.  Tracing: built
 * with KS_TRACE=1 (the traced object set, tr_ksServe) the read into the query buffer is
 * a store of its bytes and the write a load of the bytes it took (the cache lines the
 * kernel's copies touch); everything between is the traced keyspace code.  Each read,
 * write and epoll_pwait is a SYSCALL marker before its copy (traces/FORMAT.md: the bytes
 * it moved, the call named by its site "sys.read", "sys.write", "sys.epoll_wait"), which
 * the engine charges a per-call and per-byte cost measured by `kvsim calibrate`.
 *
 * Conventions: public ks...; static internals without prefix; one server per process.
 */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "callpath.h"
#include "keyspace.h"
#include "server.h"

#define PROTO_IOBUF_LEN (16 * 1024)
#define QUERYBUF_LIMIT (1024ULL * 1024 * 1024) /* client-query-buffer-limit */
#define MAX_EVENTS 128
#define SERVER_VERSION "0.1.0"
#define COMPAT_VERSION "7.2.4" /* redis_version, as Valkey reports it to old clients */

static_assert(PROTO_IOBUF_LEN >= 4096, "a read asks for at least a page");

typedef struct conn {
    int fd;
    ksClient c;
    size_t wpos;          /* reply bytes already written */
    int close_after;      /* protocol error: close once the reply is out */
    int pending;          /* on the pending-write list */
    int want_write;       /* EPOLLOUT installed */
    struct conn *next_pending;
} conn;

typedef struct server {
    ksKeyspace *ks;
    int lfd, ep;
    conn **byfd;
    int nfd;
    int nclients, maxclients;
    conn *pending;
    char pipeline[32], multikey[32];
    int batch; /* prefetch-batch-max-size: 0 off */
    int port;
    size_t querybuf_limit;
    uint64_t connections_received, rejected_connections;
} server;

static server srv;
static volatile sig_atomic_t stop_requested;

static void onStop(int sig) {
    (void)sig;
    stop_requested = 1;
}

/* --- Variants at run time -------------------------------------------------- */

/* The keyspace's variants for prefetch-batch-max-size n (0: no prefetch). */
static int applyBatch(int n, char *err, size_t errlen) {
    char spec[160];
    if (n == 0) snprintf(spec, sizeof(spec), "pipeline=naive multikey=none");
    else snprintf(spec, sizeof(spec), "pipeline=%s multikey=%s batch=%d", srv.pipeline, srv.multikey, n);
    ksVariants v;
    if (ksParseVariants(srv.ks, spec, &v)) {
        snprintf(err, errlen, "%s", srv.ks->err);
        return -1;
    }
    srv.ks->var = v;
    srv.batch = n;
    return 0;
}

/* --- Server commands (registered after the keyspace's own) ---------------- */

static int argIs(const char *a, const char *lit) { return strcasecmp(a, lit) == 0; }

static void pingCommand(ksKeyspace *ks, ksClient *c, ksCommand *cmd) {
    if (cmd->argc > 2) {
        ksReplyError(ks, c, "ERR wrong number of arguments for 'ping' command");
        return;
    }
    if (cmd->argc == 2) ksReplyBulk(ks, c, (const uint8_t *)cmd->argv[1], sdslen(cmd->argv[1]), 0);
    else ksReplyStatus(ks, c, "PONG");
}

static void echoCommand(ksKeyspace *ks, ksClient *c, ksCommand *cmd) {
    ksReplyBulk(ks, c, (const uint8_t *)cmd->argv[1], sdslen(cmd->argv[1]), 0);
}

static void selectCommand(ksKeyspace *ks, ksClient *c, ksCommand *cmd) {
    if (!strcmp(cmd->argv[1], "0")) ksReplyStatus(ks, c, "OK");
    else ksReplyError(ks, c, "ERR DB index is out of range");
}

static void commandCommand(ksKeyspace *ks, ksClient *c, ksCommand *cmd) {
    (void)cmd;
    ksReplyArrayLen(ks, c, 0);
}

static void saveCommand(ksKeyspace *ks, ksClient *c, ksCommand *cmd) {
    (void)cmd;
    uint8_t *buf;
    size_t len;
    if (ksSnapshotSave(ks, &buf, &len)) ksReplyError(ks, c, "ERR snapshot failed");
    else ksReplyStatus(ks, c, "OK");
}

/* DEBUG RELOAD: save, empty, load (Valkey: rdbSave, emptyData, rdbLoad). */
static void debugCommand(ksKeyspace *ks, ksClient *c, ksCommand *cmd) {
    if (!argIs(cmd->argv[1], "reload") || cmd->argc != 2) {
        char msg[200];
        snprintf(msg, sizeof(msg), "ERR unknown subcommand or wrong number of arguments for '%.64s'. Try DEBUG HELP.",
                 cmd->argv[1]);
        for (char *p = msg; *p; p++)
            if (*p == '\r' || *p == '\n') *p = ' ';
        ksReplyError(ks, c, msg);
        return;
    }
    uint8_t *buf;
    size_t len;
    if (ksSnapshotSave(ks, &buf, &len)) {
        ksReplyError(ks, c, "ERR Error trying to save the DB");
        return;
    }
    uint8_t *copy = malloc(len ? len : 1); /* the snapshot buffer is the keyspace's own */
    if (!copy) abort();
    memcpy(copy, buf, len);
    int rc = ksSnapshotLoad(ks, copy, len);
    free(copy);
    if (rc) ksReplyError(ks, c, "ERR Error trying to load the RDB dump");
    else ksReplyStatus(ks, c, "OK");
}

static void replyConfigPair(ksKeyspace *ks, ksClient *c, const char *name, const char *value) {
    ksReplyBulk(ks, c, (const uint8_t *)name, strlen(name), 0);
    ksReplyBulk(ks, c, (const uint8_t *)value, strlen(value), 0);
}

/* CONFIG GET answers the parameters the benchmarks and kvsim ask for. */
static void configGet(ksKeyspace *ks, ksClient *c, ksCommand *cmd) {
    char batch[16], maxc[16];
    snprintf(batch, sizeof(batch), "%d", srv.batch);
    snprintf(maxc, sizeof(maxc), "%d", srv.maxclients);
    const char *params[][2] = {{"save", ""}, {"appendonly", "no"}, {"prefetch-batch-max-size", batch},
                               {"io-threads", "1"}, {"maxclients", maxc}, {"databases", "1"}};
    enum { NPARAMS = sizeof(params) / sizeof(params[0]) };
    int hit[NPARAMS] = {0}, n = 0;
    for (int j = 2; j < cmd->argc; j++)
        for (int i = 0; i < NPARAMS; i++)
            if (!hit[i] && ksStringMatch(cmd->argv[j], sdslen(cmd->argv[j]), params[i][0], strlen(params[i][0]))) {
                hit[i] = 1;
                n++;
            }
    ksReplyArrayLen(ks, c, 2 * n);
    for (int i = 0; i < NPARAMS; i++)
        if (hit[i]) replyConfigPair(ks, c, params[i][0], params[i][1]);
}

static void configSet(ksKeyspace *ks, ksClient *c, ksCommand *cmd) {
    if (cmd->argc != 4 || !argIs(cmd->argv[2], "prefetch-batch-max-size")) {
        char msg[200];
        snprintf(msg, sizeof(msg), "ERR Unknown option or number of arguments for CONFIG SET - '%.64s'",
                 cmd->argc > 2 ? cmd->argv[2] : "");
        for (char *p = msg; *p; p++)
            if (*p == '\r' || *p == '\n') *p = ' ';
        ksReplyError(ks, c, msg);
        return;
    }
    const char *v = cmd->argv[3];
    char *end;
    errno = 0;
    long n = strtol(v, &end, 10);
    if (!*v || *end || errno || n < 0 || n > KS_SERVER_MAX_BATCH) {
        ksReplyError(ks, c, "ERR CONFIG SET failed (possibly related to argument 'prefetch-batch-max-size') - "
                            "argument must be between 0 and 128 inclusive");
        return;
    }
    char err[256];
    if (applyBatch((int)n, err, sizeof(err))) ksReplyError(ks, c, "ERR CONFIG SET failed");
    else ksReplyStatus(ks, c, "OK");
}

static void configCommand(ksKeyspace *ks, ksClient *c, ksCommand *cmd) {
    const char *sub = cmd->argv[1];
    if (argIs(sub, "get") && cmd->argc >= 3) configGet(ks, c, cmd);
    else if (argIs(sub, "set") && cmd->argc >= 4) configSet(ks, c, cmd);
    else if (argIs(sub, "resetstat") && cmd->argc == 2) {
        memset(&ks->stats, 0, sizeof(ks->stats));
        ks->stats.timed = 1;
        ksReplyStatus(ks, c, "OK");
    } else {
        char msg[200];
        snprintf(msg, sizeof(msg), "ERR unknown subcommand or wrong number of arguments for '%.64s'. Try CONFIG HELP.",
                 sub);
        for (char *p = msg; *p; p++)
            if (*p == '\r' || *p == '\n') *p = ' ';
        ksReplyError(ks, c, msg);
    }
}

/* --- INFO ------------------------------------------------------------------ */

typedef struct {
    char *buf;
    size_t len, cap;
} text;

static void tput(text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void tput(text *t, const char *fmt, ...) {
    va_list ap;
    if (!t->buf) {
        t->cap = 1024;
        t->buf = malloc(t->cap);
        if (!t->buf) abort();
    }
    while (1) {
        va_start(ap, fmt);
        int n = vsnprintf(t->buf + t->len, t->cap - t->len, fmt, ap);
        va_end(ap);
        if (n < 0) abort();
        if ((size_t)n < t->cap - t->len) {
            t->len += (size_t)n;
            return;
        }
        t->cap = t->cap * 2 + (size_t)n + 256;
        t->buf = realloc(t->buf, t->cap);
        if (!t->buf) abort();
    }
}

static int sectionWanted(ksCommand *cmd, const char *name, int in_default) {
    if (cmd->argc == 1) return in_default;
    for (int j = 1; j < cmd->argc; j++)
        if (argIs(cmd->argv[j], name) || argIs(cmd->argv[j], "all") || argIs(cmd->argv[j], "everything") ||
            (in_default && argIs(cmd->argv[j], "default")))
            return 1;
    return 0;
}

/* A section's title line, after a blank line between sections. */
static void sectionTitle(text *t, const char *title) { tput(t, "%s# %s\r\n", t->len ? "\r\n" : "", title); }

static void infoCommand(ksKeyspace *ks, ksClient *c, ksCommand *cmd) {
    text t = {0};
    if (sectionWanted(cmd, "server", 1)) {
        sectionTitle(&t, "Server");
        tput(&t, "redis_version:%s\r\nkvsim_cref_version:%s\r\nserver_name:kvsim-cref\r\nprocess_id:%d\r\n"
                 "tcp_port:%d\r\n", COMPAT_VERSION, SERVER_VERSION, (int)getpid(), srv.port);
    }
    if (sectionWanted(cmd, "clients", 1)) {
        sectionTitle(&t, "Clients");
        tput(&t, "connected_clients:%d\r\nmaxclients:%d\r\n", srv.nclients, srv.maxclients);
    }
    if (sectionWanted(cmd, "memory", 1)) {
        sectionTitle(&t, "Memory");
        tput(&t, "used_memory:%llu\r\nmem_allocator:%s\r\n",
             (unsigned long long)(ksArenaAllocatedBytes(ks->arena) + ksZmallocUsed()),
             ksArenaBase(ks->arena) ? "kvsim-arena" : "libc");
    }
    if (sectionWanted(cmd, "stats", 1)) {
        uint64_t total = 0;
        for (int i = 0; i < ksCommandCount(); i++) total += ks->stats.calls[i];
        sectionTitle(&t, "Stats");
        tput(&t,
             "total_connections_received:%llu\r\ntotal_commands_processed:%llu\r\n"
             "rejected_connections:%llu\r\nkeyspace_hits:%llu\r\nkeyspace_misses:%llu\r\n",
             (unsigned long long)srv.connections_received, (unsigned long long)total,
             (unsigned long long)srv.rejected_connections, (unsigned long long)ks->stats.keyspace_hits,
             (unsigned long long)ks->stats.keyspace_misses);
    }
    if (sectionWanted(cmd, "commandstats", 0)) {
        sectionTitle(&t, "Commandstats");
        for (int i = 0; i < ksCommandCount(); i++)
            if (ks->stats.calls[i])
                tput(&t, "cmdstat_%s:calls=%llu,usec=%llu,usec_per_call=%.2f,rejected_calls=0,failed_calls=0\r\n",
                     ksCommandAt(i)->name, (unsigned long long)ks->stats.calls[i],
                     (unsigned long long)(ks->stats.ns[i] / 1000),
                     (double)ks->stats.ns[i] / 1000.0 / (double)ks->stats.calls[i]);
    }
    if (sectionWanted(cmd, "keyspace", 1)) {
        sectionTitle(&t, "Keyspace");
        if (ks->nkeys) tput(&t, "db0:keys=%llu,expires=0,avg_ttl=0\r\n", (unsigned long long)ks->nkeys);
    }
    ksReplyBulk(ks, c, (const uint8_t *)(t.buf ? t.buf : ""), t.len, 0); /* INFO foo: "" */
    free(t.buf);
}

static const ksCommandDef serverCommands[] = {
    {"ping", -1, 0, pingCommand},       {"echo", 2, 0, echoCommand},     {"select", 2, 0, selectCommand},
    {"command", -1, 0, commandCommand}, {"save", 1, 0, saveCommand},     {"debug", -2, 0, debugCommand},
    {"config", -2, 0, configCommand},   {"info", -1, 0, infoCommand},
};

/* --- Clients ----------------------------------------------------------------- */

static void closeConn(conn *k) {
    epoll_ctl(srv.ep, EPOLL_CTL_DEL, k->fd, NULL);
    close(k->fd);
    srv.byfd[k->fd] = NULL;
    ksClientFree(srv.ks, &k->c);
    k->fd = -1; /* freed after the pending list is walked (pending entries are skipped) */
    srv.nclients--;
    if (!k->pending) free(k);
}

static int setWrite(conn *k, int on) {
    if (k->want_write == on) return 0;
    struct epoll_event ev = {.events = on ? EPOLLIN | EPOLLOUT : EPOLLIN, .data.fd = k->fd};
    if (epoll_ctl(srv.ep, EPOLL_CTL_MOD, k->fd, &ev)) return -1;
    k->want_write = on;
    return 0;
}

/* writeToClient: as much of the reply buffer as the socket takes.  -1: closed. */
static int writeReply(conn *k) {
    ksClient *c = &k->c;
    while (k->wpos < c->rlen) {
        ssize_t n = write(k->fd, c->rbuf + k->wpos, c->rlen - k->wpos);
        KS_SYSCALL(KS_SITE_SYS_WRITE, n > 0 ? n : 0); /* traced: the call, then its copy */
        if (n > 0) { /* traced: the kernel's copy reads the bytes it took */
            (void)KS_LOAD(c->rbuf + k->wpos, (size_t)n, KVT_TAG_REPLY_BUF, KS_SITE_RESP_REPLY, 0);
            k->wpos += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            if (setWrite(k, 1)) break;
            return 0;
        }
        closeConn(k); /* EPIPE, ECONNRESET: the client is gone */
        return -1;
    }
    c->rlen = 0;
    k->wpos = 0;
    if (k->close_after) {
        closeConn(k);
        return -1;
    }
    setWrite(k, 0);
    return 0;
}

static void markPending(conn *k) {
    if (k->pending) return;
    k->pending = 1;
    k->next_pending = srv.pending;
    srv.pending = k;
}

/* prepareClientToWrite's putClientInPendingWriteQueue (callpath.c), on a client's first
 * reply byte; the session client of the fuzz target has no socket and no list. */
static void pendingWrite(ksClient *c) {
    conn *k = (conn *)((char *)c - offsetof(conn, c));
    if (k->fd >= 0) markPending(k);
}

/* Room for a read of PROTO_IOBUF_LEN bytes at the end of the query buffer. */
static void queryRoom(ksClient *c) {
    if (c->qcap - c->qlen >= PROTO_IOBUF_LEN) return;
    size_t cap = c->qcap;
    while (cap - c->qlen < PROTO_IOBUF_LEN) cap *= 2;
    c->qbuf = ksArenaRealloc(srv.ks->arena, c->qbuf, cap);
    c->qcap = cap;
}

/* processInputBuffer after n bytes were read into the query buffer: run every complete
 * command, keep the incomplete rest.  0, or -1 when the client must be closed now (query
 * buffer limit); a protocol error sets close_after (closed once the reply is out). */
static int processQuery(conn *k, size_t n) {
    ksKeyspace *ks = srv.ks;
    ksClient *c = &k->c;
    KS_STORE(c->qbuf + c->qlen, n, KVT_TAG_QUERY_BUF, KS_SITE_RESP_PARSE, 0);
    c->qlen += n;
    ksCallReadDone(c, n);
    ksCur = ks;
    ks->var.pipeline(ks, c);
    if (c->closed) {
        k->close_after = 1;
        c->qlen = c->qpos = 0;
    } else if (c->qpos) { /* sdsrange: keep the incomplete command */
        memmove(c->qbuf, c->qbuf + c->qpos, c->qlen - c->qpos);
        c->qlen -= c->qpos;
        c->qpos = 0;
    }
    ksDbCron(ks);
    /* Valkey: closing client that reached max query buffer length */
    return c->qlen > srv.querybuf_limit ? -1 : 0;
}

/* readQueryFromClient. */
static void readQuery(conn *k) {
    ksClient *c = &k->c;
    if (k->close_after) return;
    queryRoom(c);
    ssize_t n = read(k->fd, c->qbuf + c->qlen, c->qcap - c->qlen);
    KS_SYSCALL(KS_SITE_SYS_READ, n > 0 ? n : 0); /* traced: the call; its copy in processQuery */
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
    if (n <= 0 || processQuery(k, (size_t)n)) { /* EOF, error (a partial command is dropped) */
        closeConn(k);
        return;
    }
    if (c->rlen > k->wpos || k->close_after) markPending(k);
}

static void acceptClients(void) {
    while (1) {
        int fd = accept4(srv.lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) return; /* EAGAIN, or a connection reset before accept */
        srv.connections_received++;
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        if (srv.nclients >= srv.maxclients) {
            static const char msg[] = "-ERR max number of clients reached\r\n";
            ssize_t w = write(fd, msg, sizeof(msg) - 1);
            (void)w;
            close(fd);
            srv.rejected_connections++;
            continue;
        }
        if (fd >= srv.nfd) {
            int nfd = srv.nfd ? srv.nfd : 64;
            while (nfd <= fd) nfd *= 2;
            conn **nb = realloc(srv.byfd, sizeof(*nb) * (size_t)nfd);
            if (!nb) abort();
            memset(nb + srv.nfd, 0, sizeof(*nb) * (size_t)(nfd - srv.nfd));
            srv.byfd = nb;
            srv.nfd = nfd;
        }
        conn *k = calloc(1, sizeof(*k));
        if (!k) abort();
        k->fd = fd;
        ksClientInit(srv.ks, &k->c);
        ksCallClientInit(&k->c);
        struct epoll_event ev = {.events = EPOLLIN, .data.fd = fd};
        if (epoll_ctl(srv.ep, EPOLL_CTL_ADD, fd, &ev)) {
            ksClientFree(srv.ks, &k->c);
            free(k);
            close(fd);
            continue;
        }
        srv.byfd[fd] = k;
        srv.nclients++;
    }
}

/* beforeSleep -> handleClientsWithPendingWrites. */
static void writePending(void) {
    conn *k = srv.pending;
    srv.pending = NULL;
    while (k) {
        conn *next = k->next_pending;
        k->pending = 0;
        if (k->fd < 0) {
            free(k); /* closed while pending */
        } else {
            size_t before = k->c.rlen - k->wpos;
            if (writeReply(k) == 0) /* postWriteToClient (writeReply keeps what is left) */
                ksCallWriteDone(&k->c, before - (k->c.rlen - k->wpos), k->c.rlen - k->wpos);
        }
        k = next;
    }
}

/* --- Listening and the loop ------------------------------------------------ */

static int listenOn(const char *addr, int port, char *err, size_t errlen, char *host, size_t hostlen, int *bound) {
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE};
    struct addrinfo *res;
    char ps[16];
    snprintf(ps, sizeof(ps), "%d", port);
    int rc = getaddrinfo(addr, ps, &hints, &res);
    if (rc) {
        snprintf(err, errlen, "--bind %s: %s", addr, gai_strerror(rc));
        return -1;
    }
    int fd = -1, saved = 0;
    for (struct addrinfo *a = res; a; a = a->ai_next) {
        fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0) {
            saved = errno;
            continue;
        }
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        if (bind(fd, a->ai_addr, a->ai_addrlen) == 0 && listen(fd, 511) == 0) break;
        saved = errno;
        close(fd);
        fd = -1;
    }
    freeaddrinfo(res);
    if (fd < 0) {
        snprintf(err, errlen, "cannot listen on %s:%d: %s", addr, port, strerror(saved));
        return -1;
    }
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    getsockname(fd, (struct sockaddr *)&ss, &sl);
    char ports[16];
    getnameinfo((struct sockaddr *)&ss, sl, host, (socklen_t)hostlen, ports, sizeof(ports),
                NI_NUMERICHOST | NI_NUMERICSERV);
    *bound = atoi(ports);
    return fd;
}

/* The server's state without sockets: keyspace, commands, variants. */
static int serverOpen(const ksServerConfig *cfg, char *err, size_t errlen) {
    memset(&srv, 0, sizeof(srv));
    srv.lfd = srv.ep = -1;
    srv.maxclients = cfg->maxclients > 0 ? cfg->maxclients : 10000;
    srv.querybuf_limit = cfg->querybuf_limit ? cfg->querybuf_limit : QUERYBUF_LIMIT;
    snprintf(srv.pipeline, sizeof(srv.pipeline), "%s", cfg->pipeline ? cfg->pipeline : "lookahead");
    snprintf(srv.multikey, sizeof(srv.multikey), "%s", cfg->multikey ? cfg->multikey : "batch");
    if (cfg->batch < 0 || cfg->batch > KS_SERVER_MAX_BATCH) {
        snprintf(err, errlen, "--batch: expected 0..%d, got %d", KS_SERVER_MAX_BATCH, cfg->batch);
        return -1;
    }
    if (!ksLookupCommand("ping", 4) &&
        ksRegisterCommands(serverCommands, (int)(sizeof(serverCommands) / sizeof(serverCommands[0])))) {
        snprintf(err, errlen, "cannot register the server commands");
        return -1;
    }
    ksArenaSetLibc(!cfg->arena_allocator); /* objects, tables, buffers: zmalloc with libc */
    srv.ks = ksKeyspaceNew(cfg->options, err, errlen);
    ksArenaSetLibc(0);
    if (!srv.ks) return -1;
    srv.ks->stats.timed = 1; /* call(): every command timed, as Valkey's server does */
    ksCallPathEnable(0, pendingWrite); /* argv objects, command dict, call(), reply pieces */
    ksCur = srv.ks;
    /* every configured variant is checked at start, also when starting with batch 0 */
    if (applyBatch(KS_DEFAULT_BATCH, err, errlen) || applyBatch(cfg->batch, err, errlen)) {
        ksCallPathDisable();
    ksKeyspaceFree(srv.ks);
        srv.ks = NULL;
        return -1;
    }
    return 0;
}

/* --- One client without sockets (fuzz/fuzz_cref_server.c, tests) ----------- */

static conn *session;

int ksServerSessionOpen(const ksServerConfig *cfg, char *err, size_t errlen) {
    if (serverOpen(cfg, err, errlen)) return -1;
    session = calloc(1, sizeof(*session));
    if (!session) abort();
    session->fd = -1;
    ksClientInit(srv.ks, &session->c);
    ksCallClientInit(&session->c);
    srv.nclients = 1;
    return 0;
}

int ksServerSessionFeed(const uint8_t *p, size_t n, const uint8_t **reply, size_t *reply_len) {
    ksClient *c = &session->c;
    c->rlen = 0; /* the previous reply was written */
    int rc = 0;
    while (n && !session->close_after && !rc) { /* reads of at most the room there is */
        queryRoom(c);
        size_t m = c->qcap - c->qlen < n ? c->qcap - c->qlen : n;
        memcpy(c->qbuf + c->qlen, p, m);
        rc = processQuery(session, m);
        p += m;
        n -= m;
    }
    *reply = c->rbuf;
    *reply_len = c->rlen;
    return rc || session->close_after;
}

int ksServerSessionCheckValid(char *err, size_t errlen) {
    ksCur = srv.ks;
    return ksDbCheckValid(srv.ks, err, errlen);
}

void ksServerSessionClose(void) {
    ksClientFree(srv.ks, &session->c);
    free(session);
    session = NULL;
    ksCallPathDisable();
    ksKeyspaceFree(srv.ks);
    memset(&srv, 0, sizeof(srv));
}

/* --- The loop ------------------------------------------------------------------ */

int ksServe(const ksServerConfig *cfg, char *err, size_t errlen) {
    if (serverOpen(cfg, err, errlen)) return -1;
    char host[128] = "";
    int port = 0;
    srv.lfd = listenOn(cfg->bind ? cfg->bind : "127.0.0.1", cfg->port, err, errlen, host, sizeof(host), &port);
    if (srv.lfd < 0) {
        ksCallPathDisable();
    ksKeyspaceFree(srv.ks);
        return -1;
    }
    srv.port = port;
    srv.ep = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event lev = {.events = EPOLLIN, .data.fd = -1};
    if (srv.ep < 0 || epoll_ctl(srv.ep, EPOLL_CTL_ADD, srv.lfd, &lev)) {
        snprintf(err, errlen, "epoll: %s", strerror(errno));
        if (srv.ep >= 0) close(srv.ep);
        close(srv.lfd);
        ksCallPathDisable();
    ksKeyspaceFree(srv.ks);
        return -1;
    }
    /* SIGTERM/SIGINT only inside epoll_pwait; a closed socket is EPIPE, not SIGPIPE */
    sigset_t block, waitmask;
    sigemptyset(&block);
    sigaddset(&block, SIGTERM);
    sigaddset(&block, SIGINT);
    sigprocmask(SIG_BLOCK, &block, &waitmask);
    sigdelset(&waitmask, SIGTERM);
    sigdelset(&waitmask, SIGINT);
    struct sigaction sa = {.sa_handler = onStop}, old_term, old_int, old_pipe;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, &old_term);
    sigaction(SIGINT, &sa, &old_int);
    struct sigaction ign = {.sa_handler = SIG_IGN};
    sigaction(SIGPIPE, &ign, &old_pipe);
    stop_requested = 0;
    KS_MARK(KVT_MARK_PHASE, 1); /* traced: everything served is the measured phase */
    if (cfg->ready) {
        fprintf(cfg->ready, "ready %s %d\n", host, port);
        fflush(cfg->ready);
    }

    struct epoll_event evs[MAX_EVENTS];
    int rc = 0;
    while (!stop_requested) {
        writePending();
        int n = epoll_pwait(srv.ep, evs, MAX_EVENTS, -1, &waitmask);
        /* traced: the call, with the bytes of the events it returned */
        KS_SYSCALL(KS_SITE_SYS_EPOLL_WAIT, n > 0 ? (size_t)n * sizeof(evs[0]) : 0);
        if (n < 0) {
            if (errno == EINTR) continue;
            snprintf(err, errlen, "epoll_pwait: %s", strerror(errno));
            rc = -1;
            break;
        }
        for (int i = 0; i < n; i++) {
            int fd = evs[i].data.fd;
            if (fd < 0) {
                acceptClients();
                continue;
            }
            conn *k = fd < srv.nfd ? srv.byfd[fd] : NULL;
            if (!k) continue;
            if (evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
                readQuery(k);
                if (srv.byfd[fd] != k) continue; /* closed */
            }
            if (evs[i].events & EPOLLOUT) writeReply(k);
        }
    }

    for (int fd = 0; fd < srv.nfd; fd++)
        if (srv.byfd[fd]) closeConn(srv.byfd[fd]);
    for (conn *k = srv.pending, *next; k; k = next) { /* closed above while pending */
        next = k->next_pending;
        free(k);
    }
    free(srv.byfd);
    close(srv.ep);
    close(srv.lfd);
    ksCallPathDisable();
    ksKeyspaceFree(srv.ks);
    sigaction(SIGTERM, &old_term, NULL);
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGPIPE, &old_pipe, NULL);
    sigprocmask(SIG_UNBLOCK, &block, NULL);
    memset(&srv, 0, sizeof(srv));
    return rc;
}
