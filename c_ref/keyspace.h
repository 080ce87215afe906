/*
 * keyspace.h -- internal definition of ksKeyspace and the modules around it.
 *
 *   kvsim_cref.h (public API: lib.c)
 *        |
 *   commands.c  (GET SET DEL ... on argv)   resp.c (RESP2 parse, replies)
 *        |                                   variants.c (name -> function registry)
 *   db.c        (kvstore: per-slot tables, lazy expiry, hash/slot once per key)
 *        |
 *   table.h --> table_hashtable.c -> hashtable.c      (table_dict.c -> dict.c)
 *   object.c    (unified / legacy entries)     arena.c  emit.c  siphash.c
 *
 * Conventions: public (cross-file) functions ks* camelCase; static internals
 * without prefix; the keyspace whose callbacks run is ksCur (single-threaded).
 */
#ifndef KS_KEYSPACE_H
#define KS_KEYSPACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "arena.h"
#include "callpath.h"
#include "emit.h"
#include "hashtable.h"
#include "object.h"
#include "sds.h"
#include "table.h"

#define KS_CLUSTER_SLOTS 16384
#define KS_MAX_BATCH 128
#define KS_DEFAULT_BATCH 16
/* Redis #15133's in-command chunk (prefetchNextBatchSize: `chunk` keys while
 * >= 2 * chunk remain, else the remainder); the variant option chunk=N.
 * A remainder of 2 * KS_MAX_CHUNK - 1 keys fits a dictPrefetcher. */
#define KS_DEFAULT_CHUNK 16
#define KS_MAX_CHUNK 32
/* What separates the key=value words of an option or variant string: any white
 * space, so that no word (echoed in an error message) holds a line break. */
#define KS_OPTION_SPACE " \t\r\n\v\f"

/* --- Variants (variants.c) ------------------------------------------------- */

typedef struct ksClient ksClient;

/* Pipeline: process every complete command in the client's query buffer. */
typedef void (*ksPipelineFn)(ksKeyspace *ks, ksClient *c);
/* Multi-key: prefetch the keys of one MGET/MSET batch (keys[i], hashes[i],
 * tables[i] already resolved); may be NULL (no prefetch). */
typedef struct ksKeyInfo ksKeyInfo;
typedef void (*ksMultikeyPrefetchFn)(ksKeyspace *ks, ksKeyInfo *keys, int n);
/* Load: hooks around one key of a snapshot load (see snapshot.c). */
typedef struct ksLoadVariant {
    int prefetch_after_key; /* prefetch the target bucket between key and value */
    int rehash_on_insert;   /* hash the key again at insert (#2311 regression) */
} ksLoadVariant;

/* Multi-key table hooks: optional callbacks around one MGET/MSET/MSETNX, for a
 * variant that changes which slot table its batches use.  No variant of the
 * product sets them (ksVariants.multikey_tables is NULL); the deliberately
 * broken test variant of tests/broken_variants.c does, to show the tests catch
 * a stale table.  When set, all four are required:
 *   begin     per-command state, or NULL for no hook on this command;
 *   resolved  after each key of a batch is resolved; may replace ki->table;
 *   lost      1 if the key's table is dead: a lookup misses, a write is dropped;
 *   end       frees the state. */
typedef struct ksMultikeyTableHooks {
    void *(*begin)(ksKeyspace *ks);
    void (*resolved)(ksKeyspace *ks, void *state, ksKeyInfo *ki);
    int (*lost)(ksKeyspace *ks, void *state, const ksKeyInfo *ki);
    void (*end)(void *state);
} ksMultikeyTableHooks;

/* How a multi-key command is cut into prefetch batches (commands.c):
 *   KS_MULTIKEY_RULE_15133  Redis PR #15133: MGET, MSET and MSETNX; 16 keys while
 *                           >= 32 remain, then the rest; MSETNX's write pass is
 *                           not prefetched (do_prefetch &&= !nx)
 *   KS_MULTIKEY_RULE_15043  Redis PR #15043: MSET and MSETNX only; batches of 16
 *                           (MSET_BATCH_SIZE), the last one shorter; both MSETNX
 *                           passes prefetch */
enum { KS_MULTIKEY_RULE_15133 = 0, KS_MULTIKEY_RULE_15043 = 1, KS_MULTIKEY_RULE_3389 = 2, KS_MULTIKEY_RULE_14899 = 3 };
/*   KS_MULTIKEY_RULE_3389   Valkey PR #3389's sliding window (commands.c windowStart/
 *                           windowAhead): MGET, MSET, MSETNX (both passes), DEL and
 *                           EXISTS prefetch their first `batch` keys together, then,
 *                           before running key j, key j + `batch`'s bucket: a fixed
 *                           offset (`batch`, prefetch-batch-max-size) ahead
 *   KS_MULTIKEY_RULE_14899  Redis PR #14899: MGET only, its keys in chunks of
 *                           DICT_PREFETCH_MAX_SIZE (64) through the variant's
 *                           prefetcher; with multikey_guard not when the command's keys
 *                           are in a lookahead batch or a pipeline is active */

/* Hash or sorted set: the fields a command looks up in hash o (HGET one, HMGET
 * all) or the members in sorted set o (ZMSCORE all; dep = o's header load),
 * before the lookups; may be NULL.  Returns 1 if it looked them up itself
 * (found[i]: the hash entry or skiplist node, or NULL; found_dep[i] its load;
 * the command uses them directly), 0 if the command looks them up. */
typedef int (*ksHashFieldsFn)(ksKeyspace *ks, robj *o, ksLoadId dep, sds *fields, int n, void **found,
                              ksLoadId *found_dep);
/* Hash: HGETALL's reply of every field and value of o (after the array
 * header), replacing the plain iteration; may be NULL. */
typedef void (*ksHashGetallFn)(ksKeyspace *ks, ksClient *c, robj *o, ksLoadId dep);

/* The lookahead pipeline's nested field prefetch (pipeline.c), table=hashtable:
 *   KS_HASH_NESTED_3940   Valkey PR #3940: a command with a field argument (HGET,
 *                         HMGET, HSET, HDEL: the first field) adds that field to
 *                         the batch, counted against `batch`; after its key's
 *                         lookup finds a hash table, the field's bucket and entry
 *   KS_HASH_NESTED_2180   Valkey PR #2180: HGET and HSET only, not counted; the
 *                         field's bucket and entry, then its value if by pointer */
enum { KS_HASH_NESTED_NONE = 0, KS_HASH_NESTED_3940 = 1, KS_HASH_NESTED_2180 = 2 };

typedef struct ksVariants {
    ksPipelineFn pipeline;
    const char *pipeline_name;
    int batch;
    ksMultikeyPrefetchFn multikey;
    int multikey_rule; /* KS_MULTIKEY_RULE_* */
    const char *multikey_name;
    int multikey_chunked;    /* Redis #15133 chunking on every table (multikey=chunk-15133) */
    int chunk;               /* the #15133 chunk (chunk=N; KS_DEFAULT_CHUNK, Redis's 16) */
    int multikey_hash_once;  /* study: the lookup reuses the prefetch's hash (batch-hash-once) */
    int multikey_guard;      /* redis-14899-guard: no in-command prefetch while pipelined */
    int pipeline_hash_once;  /* study: the same for the lookahead (lookahead-hash-once) */
    const ksMultikeyTableHooks *multikey_tables; /* NULL but in tests (above) */
    ksLoadVariant load;
    const char *load_name;
    int iterate; /* KS_ITER_PREFETCH_* */
    const char *iterate_name;
    ksHashFieldsFn hash_fields;   /* the `hash` family (variants_hash.c) */
    ksHashGetallFn hash_getall;
    int hash_nested;              /* KS_HASH_NESTED_*: the lookahead's field prefetch (pipeline.c) */
    const char *hash_name;
} ksVariants;

/* Parse "pipeline=lookahead batch=16 ..." over defaults; -1 and ks->err on error. */
int ksParseVariants(ksKeyspace *ks, const char *spec, ksVariants *out);
/* 1 if a variant of v, on ks's table, reads the option `option` ("batch" or
 * "chunk"); registered extra variants count as reading both.  The CLI refuses
 * an option given for variants that would ignore it (workload.c). */
int ksVariantsUseOption(const ksKeyspace *ks, const ksVariants *v, const char *option);
/* Which variants read `option`, for an error message (one line). */
const char *ksVariantsOptionUsers(const char *option);
/* Names known for a family ("pipeline", "multikey", "load", "iterate"), comma separated. */
const char *ksVariantNames(const char *family);
/* The default variant of a family ("naive" for pipeline, "none" for the others);
 * NULL for an unknown family. */
const char *ksVariantFamilyDefault(const char *family);
/* Resolve one name of a family into v; -1 if unknown. */
int ksSetVariant(ksVariants *v, const char *family, const char *name);
/* Sets one variant's fields in v (fn: the registry entry's function, may be NULL). */
typedef void (*ksVariantApplyFn)(ksVariants *v, const void *fn);
/* Add a variant to the registry at run time, for variants kept outside the core
 * sources (tests/broken_variants.c registers its own from a constructor).
 * `apply` may call ksSetVariant for a base variant first.  Strings are not
 * copied.  0, or -1 if the family is unknown, the name is taken or the
 * KS_MAX_EXTRA_VARIANTS slots are full. */
#define KS_MAX_EXTRA_VARIANTS 8
int ksRegisterVariant(const char *family, const char *name, ksVariantApplyFn apply, const void *fn);

/* The `hash` family's apply functions (variants_hash.c). */
void ksSetHashNone(ksVariants *v, const void *fn);
void ksSetHashNested3940(ksVariants *v, const void *fn);
void ksSetHashValue2180(ksVariants *v, const void *fn);
void ksSetHashFindBatch4017(ksVariants *v, const void *fn);
void ksSetHashGetall14988(ksVariants *v, const void *fn);

/* --- Keys ------------------------------------------------------------------ */

/* A lookup key with its hash and slot computed once. */
struct ksKeyInfo {
    sds key;
    uint64_t hash;
    int slot;
    void *table;     /* slot table at resolve time (may be NULL) */
    ksLoadId slot_load; /* the slot_table load that read `table` (0 untraced) */
    void *found;     /* prefetch or ksDbFind result, if any */
    ksLoadId found_dep; /* load that produced the entry ksDbFind returned (0 untraced) */
    ksFindState fs;  /* step machine state */
    int state;       /* driver state */
    int rehash;      /* a prefetch used `hash`: the lookup hashes the key again (ksKeyRehash) */
    int link_set;    /* `link` holds ksDbFind's link (ksTableOps findLink), valid until
                      * the table changes */
    ksInsertPos link;
};

/* --- Client ---------------------------------------------------------------- */

typedef struct ksCommand {
    int argc;
    uint32_t input_bytes; /* a server's command: its bytes in the query buffer (Valkey's
                             c->net_input_bytes_curr_cmd; below the 1 GiB query buffer limit) */
    sds *argv;        /* arena; argv strings are arena sds (tag argv) */
    int argv_cap;
    void **argv_obj;  /* a server's argv (callpath.c): the argument objects, zmalloc'd;
                         NULL: argv is the arena's */
    const struct ksCommandDef *def;
    ksKeyInfo key;    /* first key, resolved during lookahead */
    int prefetched;
    int pipelined;    /* more commands of the query buffer are parsed or pending (Redis's
                         pending_cmds.ready_len > 1): set by the pipeline variant */
    const char *proto_err; /* protocol error message (complete command = error) */
} ksCommand;

struct ksClient {
    uint8_t *qbuf;    /* query buffer (arena, tag query_buf) */
    size_t qlen, qpos, qcap;
    uint8_t *rbuf;    /* reply buffer (arena, tag reply_buf; a server's: fixed, c->buf) */
    size_t rlen, rcap;
    int closed;       /* protocol error: rest of the query is discarded */
    uint64_t ncommands;
    uint64_t flags;   /* a server's client flags (callpath.c: Valkey's ClientFlags) */
    uint64_t commands_processed, net_output_bytes_curr_cmd, net_input_bytes, net_output_bytes;
    long long last_interaction, read_reploff;
    size_t querybuf_peak, sentlen;
    long long duration, woff; /* call(): c->duration, c->woff */
    long long reploff, bulklen, multibulklen, net_input_bytes_curr_cmd; /* resetClient's */
    int reqtype;
    int slot;                 /* c->slot: -1 (no cluster slot stats in a standalone server) */
    void *deferred_reply_errors, *original_argv; /* NULL: none (call()'s tests) */
    uint32_t reply_flags;     /* buf_encoded (reply offload's header mode, bit 0) */
    void *user;               /* c->user (callpath.c: the default user), c->id, c->resp, c->capa */
    uint64_t id;
    int resp, capa;
    uint32_t read_flags;      /* c->read_flags of the last parse (callpath.h KS_READ_FLAGS_*) */
    ksList reply;             /* c->reply: a server's reply blocks past rbuf (reply.c) */
    ksList deferred_reply;    /* Valkey 9.1's deferred reply buffer, committed by resetClient */
    long long deferred_reply_bytes; /* its bytes; -1: none deferred */
    long long reply_bytes;    /* c->reply_bytes: the reply list's */
};

/* --- Keyspace -------------------------------------------------------------- */

/* Valkey's INFO counters (untraced bookkeeping; the server reports them):
 * keyspace_hits/misses of read lookups (GET, MGET), calls per command
 * (ksCommandAt order) that passed the arity check.  With `timed` set (the
 * server, as Valkey's call()), each command is also timed on the monotonic
 * clock: total nanoseconds and a log2 latency histogram per command. */
#define KS_MAX_COMMANDS 64
#define KS_LATENCY_BUCKETS 65
typedef struct ksStats {
    uint64_t keyspace_hits, keyspace_misses;
    uint64_t calls[KS_MAX_COMMANDS];
    int timed;
    uint64_t ns[KS_MAX_COMMANDS];
    uint64_t latency[KS_MAX_COMMANDS][KS_LATENCY_BUCKETS]; /* [i][b]: 2^(b-1) <= ns < 2^b */
} ksStats;

struct ksKeyspace {
    ksArena *arena;
    const ksTableOps *ops;
    int layout;           /* KS_LAYOUT_* */
    int cluster;
    int nslots;           /* 1 or 16384 */
    void **slots;         /* per-slot tables (arena, tag slot_table); NULL = none yet */
    uint64_t *slot_gen;   /* per slot: tables created so far (bookkeeping, not traced) */
    uint64_t *slot_bit;   /* cluster: kvstore hashtable_size_index, the per-slot key
                             counts as a Fenwick tree (1-based, nslots + 1; arena) */
    hashtable **expires;  /* legacy layout: per-slot expires tables (lazy) */
    uint64_t seed;
    uint8_t sipkey[16];
    int64_t now_ms;
    int hashtable_min_exp;
    int rdbchecksum;      /* Valkey's rdbchecksum: CRC-64 of snapshots on save and load */
    /* The rehash cron (db.c ksDbCron): Valkey's activerehashing and hz, and
     * the logical clock it runs on (command_ns per executed command). */
    int activerehashing;
    int hz;
    uint64_t command_ns;
    uint64_t cron_clock_ns, cron_next_ns;
    uint64_t nkeys;
    ksVariants var;
    ksClient client;
    uint8_t *snap;        /* last snapshot saved (arena, tag snapshot_buf) */
    size_t snap_len;
    int snap_memfd;       /* a memory file holding snap's bytes, + 1 (0: none; rio.c) */
    hashtableType ht_type;
    hashtableType exp_type;
    ksStats stats;
    char err[256];
};

extern ksKeyspace *ksCur;

/* The type of an entry's value (object.h OBJ_STRING, t_hash.h OBJ_HASH, t_zset.h OBJ_ZSET), read from
 * the object header that the lookup which returned the entry has already loaded
 * (no record). */
static inline int ksEntryType(const ksKeyspace *ks, const void *entry) {
    const robj *o = ks->layout == KS_LAYOUT_LEGACY ? ((const legacyEntry *)entry)->val : entry;
    return o->type;
}

/* --- db.c ------------------------------------------------------------------ */

ksKeyspace *ksKeyspaceNew(const char *options, char *err, size_t errlen);
void ksKeyspaceFree(ksKeyspace *ks);
/* Hash (SipHash-1-2) and slot (CRC16 with {hashtag}) of key, recording the read
 * of the key bytes (tag argv).  Resolves the slot table pointer into ki->table. */
void ksKeyResolve(ksKeyspace *ks, sds key, ksKeyInfo *ki);
unsigned ksKeyHashSlot(const char *key, size_t len);
/* The lookup's own hash of a key a prefetch has hashed (Valkey lookupKey ->
 * hashtableFind after hashtableIncrementalFindInit): reads the key bytes and
 * runs SipHash again; the slot and table stay resolved.  Clears ki->rehash. */
void ksKeyRehash(ksKeyspace *ks, ksKeyInfo *ki);
/* Lookup with lazy expiry: NULL if absent or expired (expired keys are deleted). */
void *ksDbFind(ksKeyspace *ks, ksKeyInfo *ki);
/* lookupKey without LOOKUP_NOTOUCH, after a hit: val->lru = LRU_CLOCK(), a store
 * into the object's header (the object line is dirtied by a read). */
void ksDbTouch(ksKeyspace *ks, ksKeyInfo *ki, void *entry);
/* kvstore cumulativeKeyCountAdd: a key added to (+1) or deleted from (-1) a
 * slot's table updates the per-slot key-count Fenwick tree (cluster mode). */
void ksDbKeyCountAdd(ksKeyspace *ks, int slot, int64_t delta);
/* Like ksDbFind but without expiring (for EXISTS-style raw checks in tests). */
void *ksDbFindRaw(ksKeyspace *ks, ksKeyInfo *ki);
/* setKey: set key to value (expire_ms < 0 = no expire) after its own
 * lookupKeyWrite (ksDbFind, and ksDbTouch on a hit: MSET, and SET's callers
 * that have not looked up).  Returns 1 if the key was new. */
int ksDbSet(ksKeyspace *ks, ksKeyInfo *ki, const uint8_t *val, size_t vlen, int64_t expire_ms);
/* setKey with SETKEY_ALREADY_EXIST / SETKEY_DOESNT_EXIST: `old` is what the
 * caller's ksDbFind on the same ki returned, with no table change since (SET);
 * on table=dict the write goes through that lookup's link. */
int ksDbSetFound(ksKeyspace *ks, ksKeyInfo *ki, void *old, const uint8_t *val, size_t vlen,
                 int64_t expire_ms);
/* Add a key known to be absent (snapshot load / tests), two-phase insert. */
void ksDbAddNew(ksKeyspace *ks, ksKeyInfo *ki, void *entry);
int ksDbDelete(ksKeyspace *ks, ksKeyInfo *ki);
/* Expire of an existing entry (-1 none). */
int64_t ksDbGetExpire(ksKeyspace *ks, ksKeyInfo *ki, void *entry);
/* Set the expire of an existing key; returns the (possibly moved) entry. */
void *ksDbSetExpire(ksKeyspace *ks, ksKeyInfo *ki, void *entry, int64_t when);
void ksDbFlush(ksKeyspace *ks);
/* Between two query buffers (the event loop): if the cron clock (command_ns per
 * command executed) has crossed a 1/hz boundary, serverCron -> databasesCron ->
 * kvstoreIncrementallyRehash: the rehashing tables, in slot order, get rehash
 * steps for 1 ms (KS_CRON_REHASH_STEPS buckets).  Nothing with
 * activerehashing=no or hz=0. */
void ksDbCron(ksKeyspace *ks);
/* The cron's modelled time: each executed command advances its clock by
 * command_ns (option; default 1 us), and 1 ms of rehashing is
 * KS_CRON_REHASH_STEPS bucket steps (100 ns each).  At hz 10: a tick per
 * 100,000 commands, 10,000 buckets per tick. */
#define KS_CRON_COMMAND_NS 1000
#define KS_CRON_REHASH_STEPS 10000
/* Finish every rehash in progress (a server idle long enough for its cron:
 * the workloads' setup ends with it when activerehashing is on). */
void ksDbRehashAll(ksKeyspace *ks);
/* The slot table, creating it if needed. */
void *ksDbTableForWrite(ksKeyspace *ks, int slot);
int ksDbCheckValid(ksKeyspace *ks, char *err, size_t errlen);
bool ksEntryIsExpired(ksKeyspace *ks, int64_t when);

/* --- resp.c ---------------------------------------------------------------- */

/* Parse one command at c->qpos.  1 = complete (cmd filled, qpos advanced),
 * 0 = incomplete, -1 = protocol error (cmd->proto_err set; the client closes). */
int ksParseCommand(ksKeyspace *ks, ksClient *c, ksCommand *cmd);
void ksCommandFree(ksKeyspace *ks, ksCommand *cmd);
void ksReplyRaw(ksKeyspace *ks, ksClient *c, const void *p, size_t len);
/* A double's reply text as a bulk string (addReplyDouble), no source load recorded. */
void ksReplyDouble(ksKeyspace *ks, ksClient *c, const char *text, size_t len);
/* "<prefix><v>\r\n" into buf (at least 24 bytes); returns its length. */
size_t ksFmtLine(char *buf, char prefix, long long v);
void ksReplyError(ksKeyspace *ks, ksClient *c, const char *msg); /* msg without '-' and CRLF */
/* lookupKey + checkType (commands_hash.c): the robj of argv[1] if it holds `type` (OBJ_HASH,
 * OBJ_ZSET), *o = NULL if absent, WRONGTYPE replied and non-zero if another type.  A read
 * counts the keyspace hit or miss (lookupKeyRead); `type | KS_LOOKUP_WRITE` does not
 * (lookupKeyWrite: Valkey's LOOKUP_WRITE). */
#define KS_LOOKUP_WRITE 0x100
int ksLookupTyped(ksKeyspace *ks, ksClient *c, ksCommand *cmd, int type, ksKeyInfo *ki,
                  ksLoadId *odep, robj **o);
void ksReplyStatus(ksKeyspace *ks, ksClient *c, const char *msg);
void ksReplyInt(ksKeyspace *ks, ksClient *c, long long v);
void ksReplyBulk(ksKeyspace *ks, ksClient *c, const uint8_t *p, size_t len, ksLoadId dep);
void ksReplyBulkTagged(ksKeyspace *ks, ksClient *c, const uint8_t *p, size_t len, ksLoadId dep, uint8_t tag);
/* The bulk reply of a string value object o whose bytes p, len were read (ksEntryGetValue):
 * a server replies from the object as addReplyBulk does, else as ksReplyBulk. */
void ksReplyBulkObject(ksKeyspace *ks, ksClient *c, const void *o, const uint8_t *p, size_t len, ksLoadId dep);
void ksReplyNull(ksKeyspace *ks, ksClient *c);
void ksReplyArrayLen(ksKeyspace *ks, ksClient *c, long long n);
void ksClientInit(ksKeyspace *ks, ksClient *c);
void ksClientFree(ksKeyspace *ks, ksClient *c);
/* Replace the query buffer contents (copied into the arena buffer). */
void ksClientSetQuery(ksKeyspace *ks, ksClient *c, const uint8_t *q, size_t len);

/* --- commands.c ------------------------------------------------------------ */

typedef struct ksCommandDef {
    const char *name;
    int arity;        /* Valkey convention: negative = at least -arity */
    int first_key;    /* 0 = no keys */
    void (*proc)(ksKeyspace *ks, ksClient *c, ksCommand *cmd);
    int last_key;     /* legacy key spec: 0 = first_key only, -1 = last argument */
    int key_step;     /* 0 = 1 */
    int field_arg;    /* hash and zset commands: the argument of the (first) field or member, 0 = none */
} ksCommandDef;

/* CLOCK_MONOTONIC in nanoseconds (the server's command timer). */
uint64_t ksMonotonicNs(void);
/* Look up the command, check arity, run it, write its reply. */
void ksExecuteCommand(ksKeyspace *ks, ksClient *c, ksCommand *cmd);
const ksCommandDef *ksLookupCommand(const char *name, size_t len);
/* Commands beyond the keyspace's own (the server's PING, CONFIG, INFO, ...):
 * looked up after the table, once per process; -1 if already set or too many. */
int ksRegisterCommands(const ksCommandDef *table, int n);
/* Every known command, in table order then the registered ones. */
int ksCommandCount(void);
const ksCommandDef *ksCommandAt(int i);
/* getKeysFromCommand: the number of keys of a command of argc arguments (0 if
 * it has none or fails an arity check, incl. MSET's pair count); keys are
 * argv[*first + i * *step]. */
int ksCommandKeys(const ksCommandDef *d, int argc, int *first, int *step);

/* commands_hash.c (rows in commands.c's table) */
void ksHsetCommand(ksKeyspace *ks, ksClient *c, ksCommand *cmd);
void ksHgetCommand(ksKeyspace *ks, ksClient *c, ksCommand *cmd);
void ksHmgetCommand(ksKeyspace *ks, ksClient *c, ksCommand *cmd);
void ksHgetallCommand(ksKeyspace *ks, ksClient *c, ksCommand *cmd);
void ksHdelCommand(ksKeyspace *ks, ksClient *c, ksCommand *cmd);
void ksZaddCommand(ksKeyspace *ks, ksClient *c, ksCommand *cmd);
void ksZscoreCommand(ksKeyspace *ks, ksClient *c, ksCommand *cmd);
void ksZmscoreCommand(ksKeyspace *ks, ksClient *c, ksCommand *cmd);
void ksZremCommand(ksKeyspace *ks, ksClient *c, ksCommand *cmd);

/* --- pipeline.c ------------------------------------------------------------ */

void ksPipelineNaive(ksKeyspace *ks, ksClient *c);
void ksPipelineLookahead(ksKeyspace *ks, ksClient *c);
/* pipeline=all-pending-14754: Redis's lookahead parsing (#14440) with the
 * cross-command batch over all pending commands (#14754), batch sized 2 x
 * batch keys (#14017); pipeline.c. */
void ksPipelineAllPending(ksKeyspace *ks, ksClient *c);
/* Interleave the backend step machines over keys[0..n): one prefetch per key
 * per turn, then the value (memory_prefetch.c's hashtablePrefetch). */
void ksPrefetchKeys(ksKeyspace *ks, ksKeyInfo *keys, int n);
/* The same with the nested field prefetch (variants_hash.c): fields[i] (or NULL)
 * is looked up in key i's hash once the key's lookup found one. */
void ksPrefetchKeysNested(ksKeyspace *ks, ksKeyInfo *keys, sds *fields, int n);

/* --- snapshot.c / iterate ------------------------------------------------- */

/* CRC-64/Jones as Valkey's crc64.c (crc64.c): continues the sum crc over buf;
 * long inputs in two or three streams joined by ksCrc64Combine. */
uint64_t ksCrc64(uint64_t crc, const void *buf, size_t len);
/* The same sum by one stream (the reference ksCrc64 must equal). */
uint64_t ksCrc64Single(uint64_t crc, const void *buf, size_t len);
/* The CRC of A followed by B from crc1 = CRC(A), crc2 = CRC of B from 0, len2 = |B|. */
uint64_t ksCrc64Combine(uint64_t crc1, uint64_t crc2, uint64_t len2);
/* Instructions of ksCrc64(crc, p, n) (the traced build's work, callgrind-measured). */
uint64_t ksCrc64Cost(const void *p, size_t n);
/* ksCrc64Cost by kind of work: one stream's and the call's own (crc), the two- and
 * three-stream loop's (crc_streams), the joins' (crc_combine); they add up to it. */
void ksCrc64CostKinds(const void *p, size_t n, uint64_t *crc, uint64_t *streams,
                      uint64_t *combine);
/* The traced build's work of one ksCrc64 call over p[0..n), by kind (ksCrc64CostKinds). */
#define KS_CRC64_WORK(p, n)                                                        \
    do {                                                                           \
        uint64_t crc_w_, streams_w_, combine_w_;                                   \
        ksCrc64CostKinds((p), (n), &crc_w_, &streams_w_, &combine_w_);             \
        KS_WORK_EXACT_OF(KVT_WORK_CRC, crc_w_);                                    \
        if (streams_w_) KS_WORK_EXACT_OF(KVT_WORK_CRC_STREAMS, streams_w_);        \
        if (combine_w_) KS_WORK_EXACT_OF(KVT_WORK_CRC_COMBINE, combine_w_);        \
    } while (0)

int ksSnapshotSave(ksKeyspace *ks, uint8_t **buf, size_t *len);
int ksSnapshotLoad(ksKeyspace *ks, const uint8_t *buf, size_t len);
/* KEYS pattern: write the reply to c. */
void ksKeysCommand(ksKeyspace *ks, ksClient *c, const char *pattern, size_t plen);
int ksStringMatch(const char *pattern, size_t plen, const char *s, size_t slen);

#endif /* KS_KEYSPACE_H */
