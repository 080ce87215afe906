/*
 * server.c -- the c_ref keyspace behind a RESP2 server: an epoll event loop
 * over TCP sockets with the shape of Valkey's main thread (io-threads 1).
 *
 *   aeProcessEvents (server_ae.c: ae.c over epoll_pwait, the socket connection type)
 *        │   beforeSleep -> handleClientsWithPendingWrites: each client on the pending-write
 *        │     list writes its reply (writeToClient -> _writeToClient -> connWrite, or
 *        │     writevToClient with reply blocks; postWriteToClient); what the socket does not take waits for the write handler
 *        ├──> listener readable: acceptTcpHandler (accept4, TCP_NODELAY, createClient)
 *        └──> client readable: connSocketEventHandler -> readQueryFromClient
 *               readToQueryBuf: a client with nothing left over reads into the server's
 *                 shared query buffer (thread_shared_qb), else into its own (tag query_buf);
 *                 a query buffer is an sds (sdsMakeRoomFor before the read, sdsIncrLen after)
 *               handleReadResult (the read's counters, EOF and errors free the client)
 *               processInputBuffer: ks->var.pipeline(ks, c) parses every complete command
 *                 and runs it with the pipeline and multi-key variants (pipeline.c,
 *                 commands.c -- the very functions the in-memory workloads call), replies
 *                 appended to the client's reply buffer and blocks (tag reply_buf); ksDbCron between
 *                 two reads (databasesCron's incremental rehash)
 *               beforeNextClient: trimClientQueryBuffer (a client with bytes left in the
 *                 shared buffer takes it over and the server makes a new one, else gives it
 *                 back; a private buffer's consumed prefix is cut), the client's memory
 *
 * A client's reply is Valkey's (reply.c): a fixed 16 KiB buffer, then reply blocks, written
 * by one writev and freed once written (writevToClient, _postWriteToClient).  A read asks for PROTO_IOBUF_LEN (16 KiB); a query buffer past
 * client-query-buffer-limit (1 GiB) closes the client without a reply, as Valkey does.
 * Protocol errors (resp.c: Valkey's messages, incl. an oversized bulk length or inline
 * request) are replied to and the client is closed once the reply is written
 * (CLIENT_CLOSE_AFTER_REPLY).  A client that disconnects, even in the middle of a
 * command, is freed; a broken pipe is an EPIPE, not a signal.  Clients past maxclients
 * get "-ERR max number of clients reached".
 *
 * Commands: the keyspace's own (commands.c: GET SET MGET MSET KEYS DBSIZE FLUSHALL ...)
 * plus the server's, registered with ksRegisterCommands so pipelines and lookahead
 * batches see one dispatch: PING, ECHO, SELECT 0, SAVE (a snapshot into the keyspace's
 * snapshot buffer, c_ref/SNAPSHOT.md), DEBUG RELOAD (SAVE, then load that snapshot into
 * the emptied keyspace: the load path of the `load` workload), DEBUG SETUP-BEGIN and
 * SETUP-END (a traced server's load carried as a compact warm-up, setupwarm.c), CONFIG GET/SET/RESETSTAT,
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
 * Prefetching at run time: CONFIG SET prefetch-batch-max-size N.  N = 0 runs the
 * configured pipeline with batch 0 and no multi-key prefetch (Valkey 9.1: every complete
 * command of a read parsed into the client's command queue, none prefetched); N in
 * 1..128 runs the configured pipeline and multi-key variants with batch N (Valkey
 * fills a batch only for N above 1 and prefetches only batches of more than one key, so
 * N = 1 neither hashes a key ahead of its command nor prefetches: pipeline.c).
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
#include <limits.h>
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

#include "adlist.h"
#include "callpath.h"
#include "keyspace.h"
#include "reply.h"
#include "server.h"
#include "server_ae.h"
#include "server_bio.h"
#include "workload.h"

#define PROTO_IOBUF_LEN (16 * 1024)
/* Instructions of the native code (KS_WORK units, counted under callgrind of the native
 * server): sdsMakeRoomFor's early return, sdsIncrLen (the reference binary's); measured in
 * results/server-steps-callgrind.json (experiments/server_steps.py, callpath.c's note). */
#define KS_QB_ROOM_WORK 34
#define KS_QB_INCR_WORK 23
#define QUERYBUF_LIMIT (1024ULL * 1024 * 1024) /* client-query-buffer-limit */
#define SERVER_VERSION "0.1.0"
#define COMPAT_VERSION "7.2.4" /* redis_version, as Valkey reports it to old clients */

static_assert(PROTO_IOBUF_LEN >= 4096, "a read asks for at least a page");

/* adlist.c's list (adlist.h): the clients and the clients with pending writes, through
 * nodes inside the clients. */
typedef ksListNode listNode;
typedef ksList list;

enum { CLIENT_IDLE = 0 }; /* io_read_state / io_write_state: no IO thread holds the client */
#define READ_FLAGS_QB_LIMIT_REACHED (1 << 0)
#define WRITE_FLAGS_WRITE_ERROR (1 << 0)

typedef struct conn { /* Valkey's client: the keyspace's ksClient and the socket's state */
    ksClient c;
    connection *conn;     /* NULL: the session client of the fuzz target (no socket) */
    int close_after;      /* CLIENT_CLOSE_AFTER_REPLY: protocol error, close once replied */
    int close_asap, protected_, pending_write; /* CLIENT_CLOSE_ASAP, _PROTECTED, _PENDING_WRITE */
    int io_read_state, io_write_state;
    ssize_t nread, nwritten;
    int read_flags, write_flags;
    listNode pending_node; /* clients_pending_write_node */
    listNode client_node;  /* its node in server.clients */
    size_t last_memory_usage;
} conn;

typedef struct server {
    ksKeyspace *ks;
    aeEventLoop *el;
    int lfd;
    int nclients, maxclients;
    list clients, clients_pending_write;
    uint8_t *shared_qb;   /* thread_shared_qb: a read of a client without a query buffer lands here */
    size_t shared_qcap;
    char pipeline[32], multikey[32];
    int batch; /* prefetch-batch-max-size: 0 off */
    int port;
    size_t querybuf_limit;
    int io_threads_num, client_mem_usage_buckets, aof_fsync_always;
    uint64_t connections_received, rejected_connections;
} server;

static server srv;
static void serverClose(void);
static volatile sig_atomic_t stop_requested;

static void onStop(int sig) {
    (void)sig;
    stop_requested = 1;
}

/* --- Variants at run time -------------------------------------------------- */

/* The keyspace's variants for prefetch-batch-max-size n (0: no prefetch). */
static int applyBatch(int n, char *err, size_t errlen) {
    char spec[160];
    if (n == 0) snprintf(spec, sizeof(spec), "pipeline=%s multikey=none", srv.pipeline);
    else snprintf(spec, sizeof(spec), "pipeline=%s multikey=%s batch=%d", srv.pipeline, srv.multikey, n);
    ksVariants v;
    if (ksParseVariants(srv.ks, spec, &v)) {
        snprintf(err, errlen, "%s", srv.ks->err);
        return -1;
    }
    if (n == 0) v.batch = 0; /* the command queue without a batch (pipeline.c) */
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

/* DEBUG SETUP-BEGIN / SETUP-END (c_ref's own): a traced server carries what it serves
 * between them (a driver's load of the keyspace) into its trace as the compact warm-up of
 * a workload's setup (setupwarm.c, ksEmitSetupBeginServer: every line once, least recently
 * touched first) instead of recording it; untraced, both only reply OK.  Errors: a
 * SETUP-BEGIN inside a setup, a SETUP-END outside one. */
static void debugSetup(ksKeyspace *ks, ksClient *c, int begin) {
    ksEmitter *e = ksEmitterCurrent;
    if (e != NULL && begin && ksEmitSetupBeginServer(KS_WARM_SETUP_LINES)) {
        ksReplyError(ks, c, "ERR a setup is being captured already");
        return;
    }
    if (e != NULL && !begin) {
        if (!e->capture) {
            ksReplyError(ks, c, "ERR no setup is being captured");
            return;
        }
        ksEmitSetupEnd();
    }
    ksReplyStatus(ks, c, "OK");
}

/* DEBUG RELOAD: save, empty, load (Valkey: rdbSave, emptyData, rdbLoad). */
static void debugCommand(ksKeyspace *ks, ksClient *c, ksCommand *cmd) {
    if (cmd->argc == 2 && (argIs(cmd->argv[1], "setup-begin") || argIs(cmd->argv[1], "setup-end"))) {
        debugSetup(ks, c, argIs(cmd->argv[1], "setup-begin"));
        return;
    }
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

/* --- The query buffer: an sds (Valkey's c->querybuf) ------------------------------ */
/* Its header before the bytes holds the length and the allocation, as Valkey's sds.c keeps
 * them: a read makes room (sdsMakeRoomFor: the header's avail, a realloc past it) and adds
 * the bytes read (sdsIncrLen); a trim cuts the consumed prefix (sdsrange), the shared
 * buffer is emptied (sdsclear).  The parser reads c->qlen and c->qcap, kept equal to the
 * header's length and allocation.  Traced: the header's loads and stores, tagged `other`
 * (the server's bookkeeping, as the command table's loads; the query_buf stores are the
 * kernel's copies of the bytes read). */
#define SDS_MAX_PREALLOC (1024 * 1024) /* sds.h: greedy growth doubles below this */

static void sdsSetLenOf(uint8_t *q, size_t len) {
    switch (q[-1] & SDS_TYPE_MASK) {
    case SDS_TYPE_8: q[-3] = (uint8_t)len; break;
    case SDS_TYPE_16: {
        uint16_t l = (uint16_t)len;
        memcpy(q - 5, &l, 2);
        break;
    }
    default: {
        uint32_t l = (uint32_t)len;
        memcpy(q - 9, &l, 4);
        break;
    }
    }
    q[len] = '\0';
    KS_STORE(sdsAllocPtr((char *)q), sdsHdrSize(q[-1] & SDS_TYPE_MASK), KVT_TAG_OTHER, KS_SITE_RESP_PARSE, 0);
}

/* sdsnewlen(NULL, cap) then sdsclear: an empty sds with room for cap bytes. */
static uint8_t *qbNew(size_t cap) {
    int t = sdsReqTypeNo5(cap);
    void *m = ksArenaAlloc(srv.ks->arena, sdsSize(t, cap));
    return (uint8_t *)sdsWriteAt(m, t, NULL, 0, cap);
}

static void qbFree(uint8_t *q) {
    if (q) ksArenaFree(srv.ks->arena, sdsAllocPtr((char *)q));
}

/* sds.c _sdsMakeRoomFor: nothing if the header's free room takes addlen; else the length
 * plus addlen (doubled below SDS_MAX_PREALLOC when greedy), reallocated in place when the
 * header type stays, else moved to a new block of the larger type. */
static __attribute__((noinline)) uint8_t *sdsMakeRoomForQb(uint8_t *q, size_t addlen, int greedy) {
    (void)KS_LOAD(sdsAllocPtr((char *)q), sdsHdrSize(q[-1] & SDS_TYPE_MASK), KVT_TAG_OTHER, KS_SITE_RESP_PARSE,
                  0);
    KS_WORK_OF(KVT_WORK_SERVER, KS_QB_ROOM_WORK);
    size_t len = sdslen((char *)q), avail = sdsalloc((char *)q) - len;
    if (avail >= addlen) return q;
    size_t newlen = len + addlen;
    if (newlen <= len) abort(); /* size_t overflow */
    if (greedy) newlen = newlen < SDS_MAX_PREALLOC ? newlen * 2 : newlen + SDS_MAX_PREALLOC;
    int oldtype = q[-1] & SDS_TYPE_MASK, type = sdsReqTypeNo5(newlen);
    uint8_t *n;
    if (type == oldtype) { /* the header moves with the block; its allocation set */
        void *m = ksArenaRealloc(srv.ks->arena, sdsAllocPtr((char *)q), sdsSize(type, newlen));
        n = (uint8_t *)m + sdsHdrSize(type);
        if (type == SDS_TYPE_8) {
            n[-2] = (uint8_t)newlen;
        } else if (type == SDS_TYPE_16) {
            uint16_t a = (uint16_t)newlen;
            memcpy(n - 3, &a, 2);
        } else {
            uint32_t a = (uint32_t)newlen;
            memcpy(n - 5, &a, 4);
        }
    } else { /* the header grows: a new block, the bytes copied */
        void *m = ksArenaAlloc(srv.ks->arena, sdsSize(type, newlen));
        n = (uint8_t *)sdsWriteAt(m, type, NULL, 0, newlen);
        memcpy(n, q, len);
        qbFree(q);
    }
    sdsSetLenOf(n, len);
    return n;
}

/* sds.c sdsIncrLen after a read of incr bytes (the room was made). */
static __attribute__((noinline)) void sdsIncrLenQb(uint8_t *q, size_t incr) {
    KS_WORK_OF(KVT_WORK_SERVER, KS_QB_INCR_WORK);
    size_t len = sdslen((char *)q);
    assert(sdsalloc((char *)q) - len >= incr);
    sdsSetLenOf(q, len + incr);
}

/* thread_shared_qb: PROTO_IOBUF_LEN bytes, empty (initSharedQueryBuf). */
static void initSharedQueryBuf(void) {
    srv.shared_qcap = PROTO_IOBUF_LEN;
    srv.shared_qb = qbNew(srv.shared_qcap);
}

/* freeClient: unlinked from the pending-write list, its connection closed (after the
 * running handler returns when inside one), its buffers freed; the shared query buffer
 * stays the server's. */
static void freeClient(conn *k) {
    if (k->pending_write) {
        listUnlinkNode(&srv.clients_pending_write, &k->pending_node);
        k->pending_write = 0;
    }
    if (k->conn) {
        listUnlinkNode(&srv.clients, &k->client_node); /* unlinkClient */
        connClose(k->conn);
        k->conn = NULL;
    }
    if (k->c.qbuf == srv.shared_qb) { /* freed between a read and its trim: the buffer stays */
        sdsSetLenOf(k->c.qbuf, 0);
        k->c.qbuf = NULL;
        k->c.qlen = k->c.qpos = 0;
    }
    qbFree(k->c.qbuf); /* an sds; ksClientFree frees the reply buffer */
    ksReplyRelease(&k->c); /* the reply blocks left unsent */
    k->c.qbuf = NULL;
    ksClientFree(srv.ks, &k->c);
    srv.nclients--;
    free(k);
}

/* prepareClientToWrite's putClientInPendingWriteQueue (callpath.c calls it on a client's
 * first reply byte); the session client of the fuzz target has no socket and no list. */
static void pendingWrite(ksClient *c) {
    conn *k = (conn *)((char *)c - offsetof(conn, c));
    if (!k->conn || k->pending_write) return;
    k->pending_write = 1;
    listLinkNodeHead(&srv.clients_pending_write, &k->pending_node);
}

/* readToQueryBuf's room for a read of readlen bytes: sdsMakeRoomForNonGreedy while the
 * buffer is smaller than PROTO_IOBUF_LEN, else sdsMakeRoomFor (greedy) and the read takes
 * all the room there is; the read's length. */
static size_t queryRoom(ksClient *c, size_t readlen) {
    int greedy = sdsalloc((char *)c->qbuf) >= PROTO_IOBUF_LEN;
    c->qbuf = sdsMakeRoomForQb(c->qbuf, readlen, greedy);
    c->qcap = sdsalloc((char *)c->qbuf);
    return greedy ? c->qcap - c->qlen : readlen;
}

/* networking.c readToQueryBuf: a client without a query buffer of its own (nothing left
 * over from its previous read) reads into the shared one; else its own grows to take
 * PROTO_IOBUF_LEN more.  The bytes read are k->nread (connRead's result). */
static void readToQueryBuf(conn *k) {
    ksClient *c = &k->c;
    if (k->close_asap) return;
    size_t readlen = PROTO_IOBUF_LEN;
    if (c->qbuf == NULL) { /* c->querybuf = thread_shared_qb */
        c->qbuf = srv.shared_qb;
        c->qcap = srv.shared_qcap;
        c->qlen = c->qpos = 0;
    }
    size_t qblen = c->qlen;
    readlen = queryRoom(c, readlen); /* the shared buffer, empty, has the room */
    if (qblen + readlen > c->querybuf_peak) c->querybuf_peak = qblen + readlen;
    k->nread = connRead(k->conn, c->qbuf + qblen, readlen);
    KS_SYSCALL(KS_SITE_SYS_READ, k->nread > 0 ? (size_t)k->nread : 0); /* traced: the call */
    if (k->nread <= 0) return;
    /* traced: the kernel's copy stores the bytes read into the query buffer */
    KS_STORE(c->qbuf + qblen, (size_t)k->nread, KVT_TAG_QUERY_BUF, KS_SITE_RESP_PARSE, 0);
    sdsIncrLenQb(c->qbuf, (size_t)k->nread);
    c->qlen += (size_t)k->nread;
    if (c->qlen > c->querybuf_peak) c->querybuf_peak = c->qlen;
    if (c->qlen > srv.querybuf_limit) k->read_flags |= READ_FLAGS_QB_LIMIT_REACHED;
}

/* networking.c handleReadResult: C_OK (0) to process the buffer; -1 after EOF, an error
 * (a partial command is dropped) or the query buffer limit, the client freed. */
static int handleReadResult(conn *k) {
    if (k->nread <= 0) {
        if (k->nread == -1 && connGetState(k->conn) == CONN_STATE_CONNECTED) return -1; /* EAGAIN */
        freeClient(k); /* freeClientAsync: closed (EOF) or failed */
        return -2;
    }
    ksCallReadDone(&k->c, (size_t)k->nread);
    if (k->read_flags & READ_FLAGS_QB_LIMIT_REACHED) { /* handleQbLimitReached: closed, no reply */
        freeClient(k);
        return -2;
    }
    return 0;
}

/* networking.c resetSharedQueryBuf: a client with bytes left in the shared buffer takes it
 * over (a new shared buffer is made), one with none gives it back, emptied. */
static void resetSharedQueryBuf(ksClient *c) {
    size_t remaining = c->qlen - c->qpos;
    if (remaining > 0) {
        initSharedQueryBuf(); /* the client owns the old one now */
        return;
    }
    sdsSetLenOf(c->qbuf, 0); /* sdsclear(thread_shared_qb) */
    c->qbuf = NULL;
    c->qcap = c->qlen = c->qpos = 0;
}

/* networking.c trimClientQueryBuffer: the consumed prefix cut (sdsrange: the bytes moved,
 * the length set). */
static void trimClientQueryBuffer(ksClient *c) {
    if (c->qbuf == srv.shared_qb) resetSharedQueryBuf(c);
    if (c->qbuf == NULL) return;
    if (c->qpos > 0) {
        memmove(c->qbuf, c->qbuf + c->qpos, c->qlen - c->qpos);
        c->qlen -= c->qpos;
        c->qpos = 0;
        sdsSetLenOf(c->qbuf, c->qlen);
    }
}

/* server.c updateClientMemUsageAndBucket: with client eviction off (maxmemory-clients 0)
 * only normal clients' memory is tracked, and nothing is to bucket. */
static __attribute__((noinline)) int updateClientMemUsageAndBucket(conn *k) {
    if (!k->conn) return 0;
    int allow_eviction = srv.client_mem_usage_buckets && !ksCallClientIsReplica(&k->c) && !k->close_asap;
    if (!allow_eviction) return 0;
    k->last_memory_usage = k->c.qcap + k->c.rcap + (size_t)k->c.reply_bytes; /* updateClientMemoryUsage */
    return 1;
}

/* processInputBuffer after a read: the configured pipeline runs every complete command
 * (parse, lookup, call, reset), the rest stays; a protocol error sets close_after (closed
 * once the reply is out). */
static void processInputBuffer(conn *k) {
    ksKeyspace *ks = srv.ks;
    ksClient *c = &k->c;
    ksCur = ks;
    ks->var.pipeline(ks, c);
    if (c->closed) {
        k->close_after = 1;
        c->qlen = c->qpos = 0;
        if (c->qbuf) sdsSetLenOf(c->qbuf, 0);
    }
    ksDbCron(ks);
}

/* networking.c beforeNextClient: the query buffer trimmed, the client's memory updated. */
static void beforeNextClient(conn *k) {
    trimClientQueryBuffer(&k->c);
    if (k->close_after && !ksCallClientHasPendingReplies(&k->c)) k->close_asap = 1; /* nothing to send */
    if (k->close_asap) {
        freeClient(k);
        return;
    }
    updateClientMemUsageAndBucket(k);
}

/* networking.c readQueryFromClient: the read handler of a client's connection. */
static void readQueryFromClient(connection *cn) {
    conn *k = connGetPrivateData(cn);
    if (srv.io_threads_num > 1) return; /* postponeClientRead: an IO thread reads it */
    if (k->io_write_state != CLIENT_IDLE || k->io_read_state != CLIENT_IDLE) return;
    if (k->close_after) return; /* the rest of a client being closed is ignored */
    readToQueryBuf(k);
    int rc = handleReadResult(k);
    if (rc == -2) return; /* freed */
    if (rc == 0) processInputBuffer(k);
    beforeNextClient(k);
}

#ifndef IOV_MAX
#define IOV_MAX 1024
#endif
#define KS_IOV_MAX IOV_MAX /* writevToClient: min(IOV_MAX, the connection's iovcnt, IOV_MAX) */

/* networking.c writevToClient: the buffer's unsent bytes and the reply blocks' (up to
 * NET_MAX_WRITES_PER_EVENT, reply.c) in one writev, repeated for what it did not take;
 * past NET_MAX_WRITES_PER_EVENT the rest waits for the next write. */
static void writevToClient(conn *k) {
    ksClient *c = &k->c;
    struct iovec iov_arr[KS_IOV_MAX], *iov = iov_arr;
    size_t iov_bytes_len;
    int iovcnt = ksReplyIov(c, iov, KS_IOV_MAX, &iov_bytes_len);
    ssize_t totwritten = 0;
    while (iovcnt > 0) {
        ssize_t n = connWritev(k->conn, iov, iovcnt);
        KS_SYSCALL(KS_SITE_SYS_WRITE, n > 0 ? (size_t)n : 0); /* traced: the call, then its copy */
        if (n <= 0) {
            if (n < 0 && errno == EINTR) continue;
            k->write_flags |= WRITE_FLAGS_WRITE_ERROR;
            totwritten = totwritten > 0 ? totwritten : n;
            break;
        }
        totwritten += n;
        /* traced: the kernel's copy reads the bytes it took; proceed to the unwritten pieces */
        for (size_t left = (size_t)n; left > 0;) {
            size_t part = left < iov[0].iov_len ? left : iov[0].iov_len;
            (void)KS_LOAD(iov[0].iov_base, part, KVT_TAG_REPLY_BUF, KS_SITE_RESP_REPLY, 0);
            iov[0].iov_base = (char *)iov[0].iov_base + part;
            iov[0].iov_len -= part;
            left -= part;
            if (iov[0].iov_len == 0) {
                iov++;
                iovcnt--;
            }
        }
        if ((size_t)totwritten == iov_bytes_len || totwritten > KS_NET_MAX_WRITES_PER_EVENT) break;
    }
    k->nwritten = totwritten;
}

/* networking.c _writeToClient: with reply blocks, writevToClient; else as much of the
 * buffer as the socket takes. */
static void _writeToClient(conn *k) {
    ksClient *c = &k->c;
    if (c->reply.len) {
        writevToClient(k);
        return;
    }
    ssize_t bytes_to_write = (ssize_t)(c->rlen - c->sentlen), tot_written = 0;
    while (tot_written < bytes_to_write) {
        ssize_t n = connWrite(k->conn, c->rbuf + c->sentlen + tot_written, (size_t)(bytes_to_write - tot_written));
        KS_SYSCALL(KS_SITE_SYS_WRITE, n > 0 ? (size_t)n : 0); /* traced: the call, then its copy */
        if (n <= 0) {
            if (n < 0 && errno == EINTR) continue;
            k->write_flags |= WRITE_FLAGS_WRITE_ERROR;
            tot_written = tot_written > 0 ? tot_written : n;
            break;
        }
        /* traced: the kernel's copy reads the bytes it took */
        (void)KS_LOAD(c->rbuf + c->sentlen + tot_written, (size_t)n, KVT_TAG_REPLY_BUF, KS_SITE_RESP_REPLY, 0);
        tot_written += n;
    }
    k->nwritten = tot_written;
}

/* networking.c postWriteToClient: the bytes written leave the buffer; a reply sent in
 * full resets it and removes the write handler; a write error (but EAGAIN) or a sent
 * close-after-reply frees the client.  0, or -1: the client was freed. */
static int postWriteToClient(conn *k) {
    ksClient *c = &k->c;
    if (!ksCallClientIsReplica(c) && k->nwritten > 0) /* _postWriteToClient: blocks sent are freed */
        ksReplyWritten(c, (size_t)k->nwritten);
    ksCallWriteDone(c, k->nwritten > 0 ? (size_t)k->nwritten : 0);
    if ((k->write_flags & WRITE_FLAGS_WRITE_ERROR) && connGetState(k->conn) != CONN_STATE_CONNECTED) {
        freeClient(k); /* freeClientAsync: EPIPE, ECONNRESET */
        return -1;
    }
    if (!ksCallClientHasPendingReplies(c)) {
        c->sentlen = 0;
        if (connHasWriteHandler(k->conn)) connSetWriteHandler(k->conn, NULL);
        if (k->close_after) {
            freeClient(k);
            return -1;
        }
    }
    updateClientMemUsageAndBucket(k);
    return 0;
}

static int writeToClient(conn *k) {
    if (k->io_write_state != CLIENT_IDLE || k->io_read_state != CLIENT_IDLE) return 0;
    k->nwritten = 0;
    k->write_flags = 0;
    _writeToClient(k); /* writeToReplica for replicas: none here */
    return postWriteToClient(k);
}

/* networking.c sendReplyToClient: the write handler, once a reply did not fit the socket. */
static void sendReplyToClient(connection *cn) { writeToClient(connGetPrivateData(cn)); }

/* networking.c installClientWriteHandler (the barrier only with appendfsync always). */
static void installClientWriteHandler(conn *k) {
    if (k->conn->type->set_write_handler(k->conn, sendReplyToClient, srv.aof_fsync_always) == -1)
        freeClient(k);
}

/* networking.c handleClientsWithPendingWrites, from beforeSleep: every client with a reply
 * writes it; what the socket does not take waits for the write handler. */
static int handleClientsWithPendingWrites(void) {
    int processed = 0;
    if (srv.clients_pending_write.len == 0) return 0;
    listNode *ln = srv.clients_pending_write.head;
    while (ln) {
        listNode *next = ln->next;
        conn *k = ln->value;
        k->pending_write = 0;
        listUnlinkNode(&srv.clients_pending_write, ln);
        ln = next;
        if (k->protected_ || k->close_asap) continue;
        if (!ksCallClientHasPendingReplies(&k->c)) continue;
        if (srv.io_threads_num > 1) continue; /* trySendWriteToIOThreads */
        if (k->io_write_state != CLIENT_IDLE || k->io_read_state != CLIENT_IDLE) continue;
        processed++;
        if (writeToClient(k)) continue;
        if (ksCallClientHasPendingReplies(&k->c)) installClientWriteHandler(k);
    }
    return processed;
}

static void beforeSleep(aeEventLoop *el) {
    (void)el;
    handleClientsWithPendingWrites();
    ksCallBeforeSleepDone(); /* beforeSleep's last step: moduleReleaseGIL */
}

/* networking.c acceptTcpHandler -> acceptCommonHandler -> createClient. */
static void acceptTcpHandler(aeEventLoop *el, int fd, void *clientData, int mask) {
    (void)clientData, (void)mask;
    while (1) {
        int cfd = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (cfd < 0) return; /* EAGAIN, or a connection reset before accept */
        srv.connections_received++;
        int one = 1;
        setsockopt(cfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        if (srv.nclients >= srv.maxclients) {
            static const char msg[] = "-ERR max number of clients reached\r\n";
            ssize_t w = write(cfd, msg, sizeof(msg) - 1);
            (void)w;
            close(cfd);
            srv.rejected_connections++;
            continue;
        }
        conn *k = calloc(1, sizeof(*k));
        if (!k) abort();
        ksClientInit(srv.ks, &k->c);
        ksCallClientInit(&k->c);
        k->c.rcap = ksArenaUsableSize(srv.ks->arena, k->c.rbuf); /* c->buf_usable_size */
        ksArenaFree(srv.ks->arena, k->c.qbuf); /* createClient: c->querybuf = NULL */
        k->c.qbuf = NULL;
        k->c.qcap = 0;
        k->pending_node.value = k;
        k->client_node.value = k;
        listLinkNodeHead(&srv.clients, &k->client_node); /* linkClient */
        k->conn = connCreateAcceptedSocket(el, cfd);
        connSetPrivateData(k->conn, k);
        srv.nclients++;
        if (connSetReadHandler(k->conn, readQueryFromClient)) {
            freeClient(k);
            continue;
        }
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
    srv.lfd = -1;
    srv.io_threads_num = 1; /* io-threads 1: the main thread reads and writes */
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
    initSharedQueryBuf();
    ksCur = srv.ks;
    /* every configured variant is checked at start, also when starting with batch 0 */
    if (applyBatch(KS_DEFAULT_BATCH, err, errlen) || applyBatch(cfg->batch, err, errlen)) {
        serverClose();
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
    ksClientInit(srv.ks, &session->c);
    ksCallClientInit(&session->c);
    session->c.rcap = ksArenaUsableSize(srv.ks->arena, session->c.rbuf); /* c->buf_usable_size */
    ksArenaFree(srv.ks->arena, session->c.qbuf); /* no query buffer until a read */
    session->c.qbuf = NULL;
    session->c.qcap = 0;
    session->pending_node.value = session;
    srv.nclients = 1;
    return 0;
}

/* The socket path's readToQueryBuf, handleReadResult, processInputBuffer and
 * beforeNextClient, with memcpy for read(2): reads of at most the room there is.  A reply
 * in the buffer alone is returned in place (written by the next feed); one with reply
 * blocks is written at once: copied out (writev's gather) and its blocks freed. */
static uint8_t *session_out;
static size_t session_out_cap;

int ksServerSessionFeed(const uint8_t *p, size_t n, const uint8_t **reply, size_t *reply_len) {
    ksClient *c = &session->c;
    c->rlen = c->sentlen = 0; /* the previous reply was written */
    int rc = 0;
    while (n && !session->close_after && !rc) {
        if (c->qbuf == NULL) {
            c->qbuf = srv.shared_qb;
            c->qcap = srv.shared_qcap;
            c->qlen = c->qpos = 0;
        }
        size_t room = queryRoom(c, PROTO_IOBUF_LEN);
        size_t m = room < n ? room : n;
        memcpy(c->qbuf + c->qlen, p, m);
        sdsIncrLenQb(c->qbuf, m);
        c->qlen += m;
        if (c->qlen > c->querybuf_peak) c->querybuf_peak = c->qlen;
        p += m;
        n -= m;
        ksCallReadDone(c, m);
        if (c->qlen > srv.querybuf_limit) { /* closed without a reply */
            rc = 1;
            trimClientQueryBuffer(c);
            break;
        }
        processInputBuffer(session);
        trimClientQueryBuffer(c);
    }
    *reply = c->rbuf;
    *reply_len = c->rlen;
    if (c->reply.len) {
        size_t total = ksReplyLen(c);
        if (total > session_out_cap) {
            free(session_out);
            session_out = malloc(total);
            if (!session_out) abort();
            session_out_cap = total;
        }
        ksReplyCopyOut(c, session_out);
        ksReplyWritten(c, total);
        *reply = session_out;
        *reply_len = total;
    }
    return rc || session->close_after;
}

int ksServerSessionCheckValid(char *err, size_t errlen) {
    ksCur = srv.ks;
    if (session && session->c.qbuf == srv.shared_qb) {
        snprintf(err, errlen, "the session client holds the shared query buffer between reads");
        return -1;
    }
    if (session && ksCallClientCheckValid(&session->c, err, errlen)) return -1;
    return ksDbCheckValid(srv.ks, err, errlen);
}

static void serverClose(void) {
    qbFree(srv.shared_qb);
    ksCallPathDisable();
    ksKeyspaceFree(srv.ks);
    memset(&srv, 0, sizeof(srv));
}

void ksServerSessionClose(void) {
    if (session->c.qbuf == srv.shared_qb) session->c.qbuf = NULL;
    qbFree(session->c.qbuf);
    session->c.qbuf = NULL;
    ksReplyRelease(&session->c);
    ksClientFree(srv.ks, &session->c);
    free(session_out);
    session_out = NULL;
    session_out_cap = 0;
    free(session);
    session = NULL;
    serverClose();
}

/* --- The loop ------------------------------------------------------------------ */

/* After the wait (traced: the call, with the bytes of the events it returned). */
static void afterSleep(aeEventLoop *el) {
    (void)el;
    KS_SYSCALL(KS_SITE_SYS_EPOLL_WAIT, (size_t)el->numevents * sizeof(struct epoll_event));
    ksCallAfterSleep(el->numevents); /* server.c afterSleep: the GIL, the cached time */
}

int ksServe(const ksServerConfig *cfg, char *err, size_t errlen) {
    if (serverOpen(cfg, err, errlen)) return -1;
    char host[128] = "";
    int port = 0;
    srv.lfd = listenOn(cfg->bind ? cfg->bind : "127.0.0.1", cfg->port, err, errlen, host, sizeof(host), &port);
    if (srv.lfd < 0) {
        serverClose();
        return -1;
    }
    srv.port = port;
    int cancel_type = ksMakeThreadKillable(); /* initServer */
    if (ksBioInit()) { /* InitServerLast: the idle bio workers (server_bio.c) */
        snprintf(err, errlen, "cannot start the background threads");
        ksRestoreCancelType(cancel_type);
        close(srv.lfd);
        serverClose();
        return -1;
    }
    srv.el = aeCreateEventLoop(srv.maxclients + 128); /* CONFIG_FDSET_INCR */
    if (!srv.el || aeCreateFileEvent(srv.el, srv.lfd, AE_READABLE, acceptTcpHandler, NULL)) {
        snprintf(err, errlen, "epoll: %s", strerror(errno));
        aeDeleteEventLoop(srv.el);
        close(srv.lfd);
        ksBioKillThreads();
        ksRestoreCancelType(cancel_type);
        serverClose();
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
    srv.el->waitmask = &waitmask;
    srv.el->beforesleep = beforeSleep;
    srv.el->aftersleep = afterSleep;
    KS_MARK(KVT_MARK_PHASE, 1); /* traced: everything served is the measured phase */
    if (cfg->ready) {
        fprintf(cfg->ready, "ready %s %d\n", host, port);
        fflush(cfg->ready);
    }

    int rc = 0;
    while (!stop_requested) { /* aeMain */
        if (aeProcessEvents(srv.el) < 0) {
            snprintf(err, errlen, "epoll_pwait: %s", strerror(errno));
            rc = -1;
            break;
        }
    }

    while (srv.clients.head) freeClient(srv.clients.head->value);
    aeDeleteEventLoop(srv.el);
    close(srv.lfd);
    ksBioKillThreads();
    ksRestoreCancelType(cancel_type);
    serverClose();
    sigaction(SIGTERM, &old_term, NULL);
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGPIPE, &old_pipe, NULL);
    sigprocmask(SIG_UNBLOCK, &block, NULL);
    return rc;
}
