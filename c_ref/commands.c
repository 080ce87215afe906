/*
 * commands.c -- the command table and the string/keyspace commands:
 * GET SET DEL UNLINK EXISTS TOUCH MGET MSET MSETNX EXPIRE PEXPIRE TTL PTTL KEYS SCAN DBSIZE
 * FLUSHALL, with Valkey's replies and error messages.
 *
 * Multi-key commands (MGET, MSET, MSETNX; DEL, EXISTS, TOUCH) run in batches when the multikey
 * variant asks for it (batchLen):
 *   table=dict, or multikey=chunk-15133 (Redis #15133): 16 keys (the variant
 *     option chunk) while >= 32 (2 * chunk) remain, else the whole remainder;
 *     each batch re-resolves its keys' slot
 *     tables (the #15043 fix) and lets the variant prefetch them before
 *     executing in order;
 *   multikey=redis-15043 (Redis PR #15043), on every table: MSET and MSETNX
 *     only, batches of 16 with a shorter last one, both MSETNX passes
 *     prefetched (ksVariants.multikey_rule);
 *   table=hashtable, multikey=batch (Valkey memory_prefetch.c as of #2092,
 *     the command alone in a prefetch batch): the first `batch`
 *     (prefetch-batch-max-size) keys are prefetched together, the rest are
 *     looked up cold; nothing more if the lookahead pipeline has already put
 *     the command's keys into its batch (cmd->prefetched).
 *   multikey=window-3389 (Valkey PR #3389), on every table: MGET, MSET,
 *     MSETNX, DEL, EXISTS and TOUCH prefetch their first `batch` keys together, then
 *     before running key j the bucket of key j + `batch` (windowStart,
 *     windowAhead: the offset is `batch`, prefetch-batch-max-size);
 *   multikey=redis-14899[-guard] (Redis PR #14899): MGET's keys in chunks of
 *     64 (DICT_PREFETCH_MAX_SIZE); the guard skips it when the lookahead batch
 *     holds the command or a pipeline is active (cmd->pipelined).
 * A key a hashtable batch prefetched is hashed again by its lookup
 * (ksKeyRehash; Valkey hashes in hashtableIncrementalFindInit and again in
 * lookupKey), except under the study variant multikey=batch-hash-once.
 *
 * Conventions: public ks...; command procs are static xxxCommand().
 */
#include <assert.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>
#include <time.h>
#include <string.h>

#include "dict.h"
#include "callpath.h"
#include "keyspace.h"
#include "t_zset.h"
#include "siphash.h"
#include "t_hash.h"

/* A key argument.  In a server the argument's object holds it and is read through
 * object.c objectGetVal, as Valkey 9.1's lookupKey, setKey and the multi-key commands
 * read every key (callpath.c); else the arena's string. */
static inline sds argKey(const ksCommand *cmd, int j) {
    return cmd->argv_obj ? ksObjectGetVal(cmd->argv_obj[j]) : cmd->argv[j];
}

#define PREFETCH_BATCH_SIZE 16

/* --- Helpers --------------------------------------------------------------- */

static int argEq(const sds a, const char *lit) { return strcasecmp(a, lit) == 0; }

static int getLongLong(const sds s, long long *out) {
    size_t len = sdslen(s);
    if (len == 0 || len > 20) return -1;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end != s + len) return -1;
    if (s[0] == '+' || s[0] == ' ' || (s[0] == '0' && len > 1) || (s[0] == '-' && (len == 1 || s[1] == '0'))) return -1;
    *out = v;
    return 0;
}

static void replyValue(ksKeyspace *ks, ksClient *c, void *entry, ksLoadId dep) {
    size_t len;
    ksLoadId vd = 0;
    const uint8_t *v = ksEntryGetValue(ks, entry, dep, &len, &vd);
    if (__builtin_expect(ksCallPathOn, 0)) { /* a server: addReplyBulk(c, o) */
        const void *o = ks->layout == KS_LAYOUT_LEGACY ? ((const legacyEntry *)entry)->val : entry;
        ksReplyBulkObject(ks, c, o, v, len, vd);
        return;
    }
    ksReplyBulk(ks, c, v, len, vd);
}

/* --- GET / SET ------------------------------------------------------------- */

static void getCommand(ksKeyspace *ks, ksClient *c, ksCommand *cmd) {
    ksKeyInfo ki;
    if (cmd->prefetched) {
        ki = cmd->key;
        if (cmd->argv_obj) ki.key = argKey(cmd, 1); /* lookupKey: hashtableFind(objectGetVal(key)) */
    } else {
        ksKeyResolve(ks, argKey(cmd, 1), &ki);
    }
    if (ki.rehash) ksKeyRehash(ks, &ki);
    void *e = ksDbFind(ks, &ki);
    if (!e) {
        ks->stats.keyspace_misses++;
        if (cmd->argv_obj) ksCallLookupKeyMiss(); /* lookupKey: the "keymiss" event */
        ksReplyNull(ks, c);
        return;
    }
    ks->stats.keyspace_hits++;
    ksDbTouch(ks, &ki, e);
    if (ksEntryType(ks, e) != OBJ_STRING) { /* checkType */
        ksReplyError(ks, c, "WRONGTYPE Operation against a key holding the wrong kind of value");
        return;
    }
    replyValue(ks, c, e, ki.found_dep);
}

/* parseExtendedStringArgumentsOrReply: every option is parsed first (a
 * repeated EX/PX keeps the last value; conflicting ones are a syntax error),
 * then the expire value is validated. */
enum { SET_NX = 1, SET_XX = 2, SET_KEEPTTL = 4, SET_GET = 8, SET_EX = 16, SET_PX = 32, SET_EXAT = 64, SET_PXAT = 128 };
#define SET_ANY_EXPIRE (SET_EX | SET_PX | SET_EXAT | SET_PXAT)

static void setCommand(ksKeyspace *ks, ksClient *c, ksCommand *cmd) {
    int flags = 0;
    sds expire_arg = NULL;
    for (int j = 3; j < cmd->argc; j++) {
        sds a = cmd->argv[j];
        int has_next = j + 1 < cmd->argc;
        int unit = argEq(a, "EX") ? SET_EX : argEq(a, "PX") ? SET_PX : argEq(a, "EXAT") ? SET_EXAT
                 : argEq(a, "PXAT") ? SET_PXAT : 0;
        if (argEq(a, "NX") && !(flags & SET_XX)) flags |= SET_NX;
        else if (argEq(a, "XX") && !(flags & SET_NX)) flags |= SET_XX;
        else if (argEq(a, "KEEPTTL") && !(flags & SET_ANY_EXPIRE)) flags |= SET_KEEPTTL;
        else if (argEq(a, "GET")) flags |= SET_GET;
        else if (unit && has_next && !(flags & SET_KEEPTTL) && !(flags & (SET_ANY_EXPIRE & ~unit))) {
            flags |= unit;
            expire_arg = cmd->argv[++j];
        } else {
            ksReplyError(ks, c, "ERR syntax error");
            return;
        }
    }
    int nx = flags & SET_NX, xx = flags & SET_XX, keepttl = flags & SET_KEEPTTL, get = flags & SET_GET;
    long long expire = -1; /* absolute ms */
    if (expire_arg) { /* getExpireMillisecondsOrReply */
        long long v;
        if (getLongLong(expire_arg, &v)) {
            ksReplyError(ks, c, "ERR value is not an integer or out of range");
            return;
        }
        int secs = flags & (SET_EX | SET_EXAT), rel = flags & (SET_EX | SET_PX);
        if (v <= 0 || (secs && v > LLONG_MAX / 1000)) {
            ksReplyError(ks, c, "ERR invalid expire time in 'set' command");
            return;
        }
        long long ms = secs ? v * 1000 : v;
        if (rel && ms > LLONG_MAX - ks->now_ms) {
            ksReplyError(ks, c, "ERR invalid expire time in 'set' command");
            return;
        }
        expire = rel ? ks->now_ms + ms : ms;
    }
    ksKeyInfo ki;
    if (cmd->prefetched) {
        ki = cmd->key;
        if (cmd->argv_obj) ki.key = argKey(cmd, 1); /* lookupKey: objectGetVal(key) */
    } else {
        ksKeyResolve(ks, argKey(cmd, 1), &ki);
    }
    if (ki.rehash) ksKeyRehash(ks, &ki);
    void *old = ksDbFind(ks, &ki); /* lookupKeyWrite */
    if (old) ksDbTouch(ks, &ki, old);
    if (get) { /* getGenericCommand's lookupKeyReadOrReply counts the hit or miss */
        if (old) ks->stats.keyspace_hits++;
        else ks->stats.keyspace_misses++;
    }
    if (get && old && ksEntryType(ks, old) != OBJ_STRING) { /* getGenericCommand's checkType */
        ksReplyError(ks, c, "WRONGTYPE Operation against a key holding the wrong kind of value");
        return;
    }
    if (get) {
        if (old) replyValue(ks, c, old, ki.found_dep);
        else ksReplyNull(ks, c);
    }
    if ((nx && old) || (xx && !old)) {
        if (!get) ksReplyNull(ks, c);
        return;
    }
    if (keepttl && old) expire = ksDbGetExpire(ks, &ki, old);
    sds v = cmd->argv[2];
    /* setKey with SETKEY_ALREADY_EXIST / SETKEY_DOESNT_EXIST: no second lookup; a server's
     * new key takes the argument's value (dbAdd's objectSetKeyAndExpire, callpath.c) */
    if (!(cmd->argv_obj && !old && ksCallSetValueAdopt(ks, &ki, cmd, 2, expire)))
        ksDbSetFound(ks, &ki, old, (const uint8_t *)v, sdslen(v), expire);
    if (!get) ksReplyStatus(ks, c, "OK");
}

/* A server's write of value argument j after setKey's lookup (old: the entry found, or
 * NULL): tryObjectEncoding, dbSetValue's swap of RAW strings, dbAdd's adoption of a new key's
 * RAW value, or a new object; then setKey's and the command's notifications (callpath.c). */
static __attribute__((noinline)) void serverSetFound(ksKeyspace *ks, ksCommand *cmd, ksKeyInfo *ki, void *old,
                                                     int j, int64_t expire) {
    sds v = cmd->argv[j];
    int old_type = old ? ksEntryType(ks, old) : -1; /* read before the old entry may go */
    ksCallSetKeyValueArg(cmd, j);
    if (!(old ? ksCallSetValueSwap(ks, ki, old, cmd, j, expire) : ksCallSetValueAdopt(ks, ki, cmd, j, expire)))
        ksDbSetFound(ks, ki, old, (const uint8_t *)v, sdslen(v), expire);
    ksCallSetKeyDone(ks, ki, old_type);
}

/* MSET's setKey (no TTL): ksDbSet, or in a server, where dbSetValue swaps a RAW argument
 * into a RAW old value (callpath.c ksCallSetValueSwap), the lookup, then the swap or a new
 * object. */
static void setKeyValue(ksKeyspace *ks, ksCommand *cmd, ksKeyInfo *ki, int j) {
    sds v = cmd->argv[j];
    if (!cmd->argv_obj) {
        ksDbSet(ks, ki, (const uint8_t *)v, sdslen(v), -1);
        return;
    }
    void *old = ksDbFind(ks, ki); /* setKey's lookupKeyWrite */
    if (old) ksDbTouch(ks, ki, old);
    serverSetFound(ks, cmd, ki, old, j, -1);
}

/* --- DEL / EXISTS ---------------------------------------------------------- */

/* Valkey PR #3389's sliding window (multikey=window-3389): below. */
static void windowStart(ksKeyspace *ks, ksCommand *cmd, int first, int step, int n);
static void windowAhead(ksKeyspace *ks, ksCommand *cmd, int first, int step, int n, int j);
/* The multi-key batches (below). */
static int batchLen(ksKeyspace *ks, ksCommand *cmd, int done, int remaining, int prefetch);
static inline int batchFirstOnly(const ksKeyspace *ks);
static inline void resolveBatch(ksKeyspace *ks, ksCommand *cmd, ksKeyInfo *ki, int first, int step, int from,
                                int n,
                         void *tables);

/* DEL (UNLINK), EXISTS and TOUCH: the keys in argument order, in the batches
 * of the multikey variant (batchLen, below): multikey=batch on a hashtable,
 * Valkey's cross-command batch holding the command alone (getKeysFromCommand:
 * every argument a key), its first `batch` keys; multikey=batch on a dict and
 * chunk-15133, #15133's chunks (a study: Redis batches MGET and MSET only);
 * window-3389, the sliding window (Valkey #3389 delGenericCommand,
 * existsCommand and touchCommand).  A batched key is resolved again when it
 * runs: a DEL may free the slot table a later key of the batch resolved to,
 * and the lookup hashes the key again as Valkey's lookupKey and Redis's
 * dictFind do.  Each counts the keys that exist (expired ones do not):
 * DEL deletes them; EXISTS looks up without touching (LOOKUP_NOTOUCH);
 * TOUCH (expire.c touchCommand: lookupKeyRead) stores the access clock in
 * each found key's object (ksDbTouch: val->lru = LRU_CLOCK()); both count the
 * keyspace hits and misses (lookupKey's stat_keyspace_hits/misses). */
enum { MK_EXISTS = 0, MK_DEL = 1, MK_TOUCH = 2 };

static long long countOne(ksKeyspace *ks, ksKeyInfo *ki, int mode) {
    void *e = ksDbFind(ks, ki);
    if (mode == MK_DEL) return e ? ksDbDelete(ks, ki) : 0; /* delGenericCommand: no lookupKey, no stats */
    /* EXISTS (lookupKeyReadWithFlags(LOOKUP_NOTOUCH)) and TOUCH (lookupKeyRead): lookupKey
     * counts the keyspace hit or miss of both */
    if (!e) {
        ks->stats.keyspace_misses++;
        return 0;
    }
    ks->stats.keyspace_hits++;
    if (mode == MK_TOUCH) ksDbTouch(ks, ki, e);
    return 1;
}

static void countKeysGeneric(ksKeyspace *ks, ksClient *c, ksCommand *cmd, int mode) {
    long long n = 0;
    int nkeys = cmd->argc - 1;
    if (ks->var.multikey_rule == KS_MULTIKEY_RULE_3389) { /* Valkey #3389 (below) */
        windowStart(ks, cmd, 1, 1, nkeys);
        for (int j = 0; j < nkeys; j++) {
            windowAhead(ks, cmd, 1, 1, nkeys, j);
            ksKeyInfo ki;
            ksKeyResolve(ks, argKey(cmd, 1 + j), &ki);
            n += countOne(ks, &ki, mode);
        }
        ksReplyInt(ks, c, n);
        return;
    }
    /* #15043 batches MSET/MSETNX only, #14899 MGET only */
    int prefetch = ks->var.multikey_rule != KS_MULTIKEY_RULE_15043 && ks->var.multikey_rule != KS_MULTIKEY_RULE_14899;
    ksKeyInfo ki[KS_MAX_BATCH];
    int first_only = batchFirstOnly(ks);
    for (int done = 0; done < nkeys;) {
        int b = done > 0 && first_only ? 1 : batchLen(ks, cmd, done, nkeys - done, prefetch);
        if (b > 1) resolveBatch(ks, cmd, ki, 1, 1, done, b, NULL);
        for (int i = 0; i < b; i++) {
            ksKeyInfo k;
            ksKeyResolve(ks, argKey(cmd, 1 + done + i), &k);
            n += countOne(ks, &k, mode);
        }
        done += b;
    }
    ksReplyInt(ks, c, n);
}

static void delCommand(ksKeyspace *ks, ksClient *c, ksCommand *cmd) { countKeysGeneric(ks, c, cmd, MK_DEL); }

static void existsCommand(ksKeyspace *ks, ksClient *c, ksCommand *cmd) { countKeysGeneric(ks, c, cmd, MK_EXISTS); }

static void touchCommand(ksKeyspace *ks, ksClient *c, ksCommand *cmd) { countKeysGeneric(ks, c, cmd, MK_TOUCH); }

/* --- Multi-key batching ---------------------------------------------------- */

/* prefetchNextBatchSize of Redis #15133: 16 (the variant option chunk) while
 * >= 32 (2 * chunk) remain, else all.  Redis #15043 (KS_MULTIKEY_RULE_15043):
 * MSET_BATCH_SIZE = 16, the last batch shorter. */
static int nextBatchSize(const ksKeyspace *ks, int remaining) {
    if (ks->var.multikey_rule == KS_MULTIKEY_RULE_15043)
        return remaining < PREFETCH_BATCH_SIZE ? remaining : PREFETCH_BATCH_SIZE;
    int chunk = ks->var.chunk > 0 ? ks->var.chunk : KS_DEFAULT_CHUNK; /* 0: a ksVariants not parsed */
    return remaining >= 2 * chunk ? chunk : remaining;
}

/* 1 if no batch follows the first: no multi-key variant, or Valkey's rule (multikey=batch
 * on a hashtable: one batch of the command's first keys, prefetched before the command
 * runs, memory_prefetch.c).  Callers ask once per command and, past the first batch, take
 * the keys one at a time without asking again, as Valkey's mgetCommand runs its plain loop
 * with no per-key batch test. */
static inline int batchFirstOnly(const ksKeyspace *ks) {
    if (!ks->var.multikey) return 1;
    return ks->var.multikey_rule != KS_MULTIKEY_RULE_14899 && !ks->var.multikey_chunked &&
           ks->var.multikey_rule != KS_MULTIKEY_RULE_15043 && ks->ops != &ksDictTableOps;
}

/* How many keys, from key `done` on (`remaining` left), form the next batch;
 * 1 = no prefetch.  `prefetch`: this pass may prefetch (MSETNX's write pass
 * may not: Redis #15133 `do_prefetch &&= !nx`; Valkey prefetches a command's
 * keys once, before it runs; #15043 does not batch MGET). */
static int batchLen(ksKeyspace *ks, ksCommand *cmd, int done, int remaining, int prefetch) {
    if (!ks->var.multikey || !prefetch) return 1;
    if (ks->var.multikey_rule == KS_MULTIKEY_RULE_14899) /* chunks of DICT_PREFETCH_MAX_SIZE */
        return remaining < DICT_PREFETCH_MAX_SIZE ? remaining : DICT_PREFETCH_MAX_SIZE;
    if (!batchFirstOnly(ks)) return nextBatchSize(ks, remaining);
    if (done > 0 || cmd->prefetched) return 1; /* Valkey: one batch, the first keys */
    return remaining < ks->var.batch ? remaining : ks->var.batch;
}

/* Resolve keys argv[first + i*step] for i in [from, from+n) and prefetch them.
 * `tables` (a variant's ksMultikeyTableHooks, with its per-command state) sees
 * every resolved key and may change the table the batch uses. */
/* always inlined: the multi-key commands' loops keep their code (an argument is read
 * through its object in a server, argKey) */
static inline __attribute__((always_inline)) void resolveBatch(ksKeyspace *ks, ksCommand *cmd, ksKeyInfo *ki,
                                                               int first, int step, int from, int n,
                                                               void *tables) {
    for (int i = 0; i < n; i++) {
        ksKeyResolve(ks, argKey(cmd, first + (from + i) * step), &ki[i]);
        if (tables) ks->var.multikey_tables->resolved(ks, tables, &ki[i]);
    }
    if (ks->var.multikey && n > 1) {
        KS_MARK(KVT_MARK_BATCH, n);
        ks->var.multikey(ks, ki, n);
    }
}

/* Per-command state of the variant's table hooks, or NULL (every shipped variant). */
static void *tablesBegin(ksKeyspace *ks) {
    return ks->var.multikey_tables ? ks->var.multikey_tables->begin(ks) : NULL;
}

static void tablesEnd(ksKeyspace *ks, void *tables) {
    if (tables) ks->var.multikey_tables->end(tables);
}

/* 1 if the hooks say the key's table is dead: a lookup misses, a write is lost. */
static int tableLost(ksKeyspace *ks, void *tables, const ksKeyInfo *ki) {
    return tables && ks->var.multikey_tables->lost(ks, tables, ki);
}

static void *findForBatch(ksKeyspace *ks, ksKeyInfo *ki, void *tables) {
    if (tableLost(ks, tables, ki)) return NULL;
    if (ki->rehash) ksKeyRehash(ks, ki);
    void *e = ksDbFind(ks, ki); /* MGET lookupKeyRead, MSETNX lookupKeyWrite */
    if (e) ksDbTouch(ks, ki, e);
    return e;
}

/* --- Valkey PR #3389: the sliding window -------------------------------------
 * prefetchKeyRange: the first `batch` keys (argv[first + i*step]) prefetched
 * together (memory_prefetch.c's interleaved step machines); then, before key
 * j runs, prefetchStringKey of key j + `batch`: its hash, slot table and
 * bucket line.  Every key is looked up by its command as without the window
 * (hashed again). */
static int windowOn(const ksKeyspace *ks) { return ks->var.multikey_rule == KS_MULTIKEY_RULE_3389; }

static void windowStart(ksKeyspace *ks, ksCommand *cmd, int first, int step, int n) {
    int m = n < ks->var.batch ? n : ks->var.batch;
    if (m < 2) return;
    ksKeyInfo ki[KS_MAX_BATCH];
    for (int i = 0; i < m; i++) ksKeyResolve(ks, argKey(cmd, first + i * step), &ki[i]);
    KS_MARK(KVT_MARK_BATCH, m);
    ksPrefetchKeys(ks, ki, m);
}

static void windowAhead(ksKeyspace *ks, ksCommand *cmd, int first, int step, int n, int j) {
    int a = j + ks->var.batch;
    if (a >= n) return;
    ksKeyInfo ki;
    ksKeyResolve(ks, argKey(cmd, first + a * step), &ki);
    if (!ki.table || ks->ops->size(ki.table) == 0) return;
    KS_SET_TABLE_DEP(ki.slot_load);
    ks->ops->prefetchBucket(ki.table, ki.hash);
}

static void mgetWindow(ksKeyspace *ks, ksClient *c, ksCommand *cmd) {
    int n = cmd->argc - 1;
    windowStart(ks, cmd, 1, 1, n);
    for (int j = 0; j < n; j++) {
        windowAhead(ks, cmd, 1, 1, n, j);
        ksKeyInfo ki;
        ksKeyResolve(ks, argKey(cmd, 1 + j), &ki);
        void *e = ksDbFind(ks, &ki);
        if (e) ks->stats.keyspace_hits++;
        else ks->stats.keyspace_misses++;
        if (e) ksDbTouch(ks, &ki, e);
        if (e && ksEntryType(ks, e) == OBJ_STRING) replyValue(ks, c, e, ki.found_dep);
        else ksReplyNull(ks, c);
    }
}

static void mgetCommand(ksKeyspace *ks, ksClient *c, ksCommand *cmd) {
    int nkeys = cmd->argc - 1;
    ksReplyArrayLen(ks, c, nkeys);
    if (windowOn(ks)) {
        mgetWindow(ks, c, cmd);
        return;
    }
    ksKeyInfo ki[KS_MAX_BATCH];
    /* #15043 batches MSET/MSETNX only; #14899 MGET only, and with its guard not
     * when the cross-command batch holds the command or a pipeline is active */
    int prefetch = ks->var.multikey_rule != KS_MULTIKEY_RULE_15043;
    if (ks->var.multikey_guard && (cmd->prefetched || cmd->pipelined)) prefetch = 0;
    void *tables = tablesBegin(ks);
    int first_only = batchFirstOnly(ks);
    for (int done = 0; done < nkeys;) {
        int n = done > 0 && first_only ? 1 : batchLen(ks, cmd, done, nkeys - done, prefetch);
        resolveBatch(ks, cmd, ki, 1, 1, done, n, tables);
        for (int i = 0; i < n; i++) {
            void *e = findForBatch(ks, &ki[i], tables);
            if (e) ks->stats.keyspace_hits++;
            else ks->stats.keyspace_misses++;
            if (!e && cmd->argv_obj) ksCallLookupKeyMiss(); /* lookupKey: the "keymiss" event */
            if (e && ksEntryType(ks, e) == OBJ_STRING) replyValue(ks, c, e, ki[i].found_dep);
            else ksReplyNull(ks, c);
        }
        done += n;
    }
    tablesEnd(ks, tables);
}

static int msetArity(ksKeyspace *ks, ksClient *c, ksCommand *cmd, const char *name) {
    if ((cmd->argc % 2) == 0) {
        char msg[96];
        snprintf(msg, sizeof(msg), "ERR wrong number of arguments for '%s' command", name);
        ksReplyError(ks, c, msg);
        return -1;
    }
    return 0;
}

/* MSET/MSETNX under the #3389 window: both passes slide it over the keys. */
static void msetWindow(ksKeyspace *ks, ksClient *c, ksCommand *cmd, int nx) {
    int n = (cmd->argc - 1) / 2;
    if (nx) {
        windowStart(ks, cmd, 1, 2, n);
        for (int j = 0; j < n; j++) {
            windowAhead(ks, cmd, 1, 2, n, j);
            ksKeyInfo ki;
            ksKeyResolve(ks, argKey(cmd, 1 + 2 * j), &ki);
            void *e = ksDbFind(ks, &ki);
            if (e) {
                ksDbTouch(ks, &ki, e);
                ksReplyInt(ks, c, 0);
                return;
            }
        }
    }
    windowStart(ks, cmd, 1, 2, n);
    for (int j = 0; j < n; j++) {
        windowAhead(ks, cmd, 1, 2, n, j);
        ksKeyInfo ki;
        ksKeyResolve(ks, argKey(cmd, 1 + 2 * j), &ki);
        setKeyValue(ks, cmd, &ki, 2 + 2 * j);
    }
    if (nx) ksReplyInt(ks, c, 1);
    else ksReplyStatus(ks, c, "OK");
}

static void msetGeneric(ksKeyspace *ks, ksClient *c, ksCommand *cmd, int nx) {
    int npairs = (cmd->argc - 1) / 2;
    if (windowOn(ks)) {
        msetWindow(ks, c, cmd, nx);
        return;
    }
    ksKeyInfo ki[KS_MAX_BATCH];
    void *tables = tablesBegin(ks);
    int first_only = batchFirstOnly(ks);
    if (nx) {
        for (int done = 0; done < npairs;) {
            int n = done > 0 && first_only ? 1
                                           : batchLen(ks, cmd, done, npairs - done,
                                                      ks->var.multikey_rule != KS_MULTIKEY_RULE_14899);
            resolveBatch(ks, cmd, ki, 1, 2, done, n, tables);
            for (int i = 0; i < n; i++) {
                if (findForBatch(ks, &ki[i], tables)) {
                    tablesEnd(ks, tables);
                    ksReplyInt(ks, c, 0);
                    return;
                }
            }
            done += n;
        }
    }
    /* MSETNX's write pass does not prefetch again: its check pass warmed
     * every key (Redis #15133: do_prefetch &&= !nx); #15043 prefetches in
     * both passes. */
    int write_prefetch = !nx || ks->var.multikey_rule == KS_MULTIKEY_RULE_15043;
    if (ks->var.multikey_rule == KS_MULTIKEY_RULE_14899) write_prefetch = 0; /* #14899: MGET only */
    for (int done = 0; done < npairs;) {
        int n = done > 0 && first_only ? 1 : batchLen(ks, cmd, done, npairs - done, write_prefetch);
        resolveBatch(ks, cmd, ki, 1, 2, done, n, tables);
        for (int i = 0; i < n; i++) {
            if (tableLost(ks, tables, &ki[i])) continue; /* written into a dead table: lost */
            if (ki[i].rehash) ksKeyRehash(ks, &ki[i]);
            setKeyValue(ks, cmd, &ki[i], 2 + 2 * (done + i));
        }
        done += n;
    }
    tablesEnd(ks, tables);
    if (nx) ksReplyInt(ks, c, 1);
    else ksReplyStatus(ks, c, "OK");
}

static void msetCommand(ksKeyspace *ks, ksClient *c, ksCommand *cmd) {
    if (msetArity(ks, c, cmd, "mset") == 0) msetGeneric(ks, c, cmd, 0);
}

static void msetnxCommand(ksKeyspace *ks, ksClient *c, ksCommand *cmd) {
    if (msetArity(ks, c, cmd, "msetnx") == 0) msetGeneric(ks, c, cmd, 1);
}

/* --- Expiry commands ------------------------------------------------------- */

static void expireGeneric(ksKeyspace *ks, ksClient *c, ksCommand *cmd, int unit_ms, const char *name) {
    /* parseExtendedExpireArgumentsOrReply runs before the integer is read. */
    int nx = 0, xx = 0, gt = 0, lt = 0;
    for (int j = 3; j < cmd->argc; j++) {
        sds a = cmd->argv[j];
        if (argEq(a, "NX")) nx = 1;
        else if (argEq(a, "XX")) xx = 1;
        else if (argEq(a, "GT")) gt = 1;
        else if (argEq(a, "LT")) lt = 1;
        else {
            size_t n = sdslen(a) + 64;
            char *msg = malloc(n);
            if (!msg) abort();
            snprintf(msg, n, "ERR Unsupported option %s", a);
            ksReplyError(ks, c, msg);
            free(msg);
            return;
        }
    }
    if (nx && (xx || gt || lt)) {
        ksReplyError(ks, c, "ERR NX and XX, GT or LT options at the same time are not compatible");
        return;
    }
    if (gt && lt) {
        ksReplyError(ks, c, "ERR GT and LT options at the same time are not compatible");
        return;
    }
    long long v;
    if (getLongLong(cmd->argv[2], &v)) {
        ksReplyError(ks, c, "ERR value is not an integer or out of range");
        return;
    }
    long long ms = v;
    if (!unit_ms) {
        if (v > LLONG_MAX / 1000 || v < LLONG_MIN / 1000) goto invalid;
        ms = v * 1000;
    }
    if (ms > 0 && ms > LLONG_MAX - ks->now_ms) goto invalid;
    long long when = ms + ks->now_ms;
    ksKeyInfo ki;
    ksKeyResolve(ks, argKey(cmd, 1), &ki);
    void *e = ksDbFind(ks, &ki); /* lookupKeyWrite */
    if (!e) {
        ksReplyInt(ks, c, 0);
        return;
    }
    ksDbTouch(ks, &ki, e);
    long long cur = ksDbGetExpire(ks, &ki, e);
    if ((nx && cur >= 0) || (xx && cur < 0) || (gt && (cur < 0 || when <= cur)) || (lt && cur >= 0 && when >= cur)) {
        ksReplyInt(ks, c, 0);
        return;
    }
    if (when <= ks->now_ms) { /* already expired: delete (checkAlreadyExpired) */
        ksDbDelete(ks, &ki);
        ksReplyInt(ks, c, 1);
        return;
    }
    ksDbSetExpire(ks, &ki, e, when);
    ksReplyInt(ks, c, 1);
    return;
invalid : {
    char msg[96];
    snprintf(msg, sizeof(msg), "ERR invalid expire time in '%s' command", name);
    ksReplyError(ks, c, msg);
}
}

static void expireCommand(ksKeyspace *ks, ksClient *c, ksCommand *cmd) { expireGeneric(ks, c, cmd, 0, "expire"); }
static void pexpireCommand(ksKeyspace *ks, ksClient *c, ksCommand *cmd) { expireGeneric(ks, c, cmd, 1, "pexpire"); }

static void ttlGeneric(ksKeyspace *ks, ksClient *c, ksCommand *cmd, int ms) {
    ksKeyInfo ki;
    ksKeyResolve(ks, argKey(cmd, 1), &ki);
    void *e = ksDbFind(ks, &ki); /* lookupKeyReadWithFlags(LOOKUP_NOTOUCH): counted */
    if (!e) {
        ks->stats.keyspace_misses++;
        ksReplyInt(ks, c, -2);
        return;
    }
    ks->stats.keyspace_hits++;
    long long when = ksDbGetExpire(ks, &ki, e);
    if (when < 0) {
        ksReplyInt(ks, c, -1);
        return;
    }
    long long ttl = when - ks->now_ms;
    if (ttl < 0) ttl = 0;
    ksReplyInt(ks, c, ms ? ttl : (ttl + 500) / 1000);
}

static void ttlCommand(ksKeyspace *ks, ksClient *c, ksCommand *cmd) { ttlGeneric(ks, c, cmd, 0); }
static void pttlCommand(ksKeyspace *ks, ksClient *c, ksCommand *cmd) { ttlGeneric(ks, c, cmd, 1); }

/* --- KEYS / SCAN / DBSIZE / FLUSHALL --------------------------------------- */

static void keysCommand(ksKeyspace *ks, ksClient *c, ksCommand *cmd) {
    ksKeysCommand(ks, c, cmd->argv[1], sdslen(cmd->argv[1]));
}

typedef struct {
    ksKeyspace *ks;
    sds *keys;
    size_t n, cap;
} scanData;

static void scanCallback(void *privdata, void *entry) {
    scanData *d = privdata;
    if (d->n == d->cap) {
        d->cap = d->cap ? d->cap * 2 : 16;
        d->keys = realloc(d->keys, d->cap * sizeof(sds));
        if (!d->keys) abort();
    }
    d->keys[d->n++] = (sds)entry; /* resolved to keys after the scan call */
}

static void scanCommand(ksKeyspace *ks, ksClient *c, ksCommand *cmd) {
    sds cs = cmd->argv[1];
    char *end;
    errno = 0;
    unsigned long long cursor = strtoull(cs, &end, 10);
    if (sdslen(cs) == 0 || errno || end != cs + sdslen(cs) || cs[0] == '-') {
        ksReplyError(ks, c, "ERR invalid cursor");
        return;
    }
    long long count = 10;
    const char *typename = NULL;
    const char *pat = NULL;
    size_t plen = 0;
    for (int j = 2; j < cmd->argc; j++) {
        if (argEq(cmd->argv[j], "COUNT") && j + 1 < cmd->argc) {
            if (getLongLong(cmd->argv[j + 1], &count)) {
                ksReplyError(ks, c, "ERR value is not an integer or out of range");
                return;
            }
            if (count < 1) {
                ksReplyError(ks, c, "ERR syntax error");
                return;
            }
            j++;
        } else if (argEq(cmd->argv[j], "MATCH") && j + 1 < cmd->argc) {
            pat = cmd->argv[j + 1];
            plen = sdslen(pat);
            if (plen == 1 && pat[0] == '*') pat = NULL; /* use_pattern = 0 */
            j++;
        } else if (argEq(cmd->argv[j], "TYPE") && j + 1 < cmd->argc) {
            typename = cmd->argv[++j]; /* filtered below */
        } else {
            ksReplyError(ks, c, "ERR syntax error");
            return;
        }
    }
    /* kvstoreScan: the low bits of the cursor select the slot table. */
    int bits = ks->cluster ? 14 : 0;
    unsigned long long slot = cursor & ((1ULL << bits) - 1);
    unsigned long long tcur = cursor >> bits;
    scanData d = {ks, NULL, 0, 0};
    long long maxiter = count * 10;
    while (slot < (unsigned long long)ks->nslots) {
        void *t = ks->slots[slot];
        if (t) tcur = ks->ops->scan(t, tcur, scanCallback, &d);
        else tcur = 0;
        if (tcur == 0) slot++;
        if ((long long)d.n >= count || --maxiter <= 0) break;
    }
    unsigned long long next = slot >= (unsigned long long)ks->nslots ? 0 : ((tcur << bits) | slot);
    char buf[32];
    int n = snprintf(buf, sizeof(buf), "%llu", next);
    /* Filter: expired keys and pattern. */
    size_t kept = 0;
    for (size_t i = 0; i < d.n; i++) {
        void *entry = d.keys[i];
        sds k = ksEntryGetKey(ks, entry, 0, NULL);
        ksKeyInfo ki = {0};
        ki.key = k;
        ki.slot = ks->cluster ? (int)ksKeyHashSlot(k, sdslen(k)) : 0;
        /* Valkey's order: pattern, type, then expiry (only unfiltered keys
         * are checked, and deleted, when expired). */
        if (pat && !ksStringMatch(pat, plen, k, sdslen(k))) continue;
        if (typename && !argEq((sds)typename, ksEntryType(ks, entry) == OBJ_HASH   ? "hash"
                                              : ksEntryType(ks, entry) == OBJ_ZSET ? "zset"
                                                                                    : "string")) continue;
        ki.hash = ksSiphash(k, sdslen(k), ks->sipkey);
        if (ksEntryIsExpired(ks, ksDbGetExpire(ks, &ki, entry))) {
            ksDbDelete(ks, &ki); /* expireIfNeeded: the scan deletes it */
            continue;
        }
        d.keys[kept++] = k;
    }
    ksReplyArrayLen(ks, c, 2);
    ksReplyBulk(ks, c, (const uint8_t *)buf, (size_t)n, 0);
    ksReplyArrayLen(ks, c, (long long)kept);
    for (size_t i = 0; i < kept; i++) ksReplyBulk(ks, c, (const uint8_t *)d.keys[i], sdslen(d.keys[i]), 0);
    free(d.keys);
}

static void dbsizeCommand(ksKeyspace *ks, ksClient *c, ksCommand *cmd) {
    (void)cmd;
    ksReplyInt(ks, c, (long long)ks->nkeys);
}

static void flushallCommand(ksKeyspace *ks, ksClient *c, ksCommand *cmd) {
    if (cmd->argc > 2) { /* getFlushCommandFlags */
        ksReplyError(ks, c, "ERR syntax error");
        return;
    }
    for (int j = 1; j < cmd->argc; j++) {
        if (!argEq(cmd->argv[j], "SYNC") && !argEq(cmd->argv[j], "ASYNC")) {
            ksReplyError(ks, c, "ERR syntax error");
            return;
        }
    }
    ksDbFlush(ks);
    ksReplyStatus(ks, c, "OK");
}

/* --- Command table --------------------------------------------------------- */

static const ksCommandDef commandTable[] = {
    {"get", 2, 1, getCommand},          {"set", -3, 1, setCommand},
    {"del", -2, 1, delCommand, -1, 1},         {"exists", -2, 1, existsCommand, -1, 1},
    {"mget", -2, 1, mgetCommand, -1, 1},       {"mset", -3, 1, msetCommand, -1, 2},
    {"msetnx", -3, 1, msetnxCommand, -1, 2},   {"expire", -3, 1, expireCommand},
    {"pexpire", -3, 1, pexpireCommand}, {"ttl", 2, 1, ttlCommand},
    {"pttl", 2, 1, pttlCommand},        {"keys", 2, 0, keysCommand},
    {"scan", -2, 0, scanCommand},       {"dbsize", 1, 0, dbsizeCommand},
    {"flushall", -1, 0, flushallCommand},
    {"unlink", -2, 1, delCommand, -1, 1}, /* DEL's reclaim is synchronous here: UNLINK is DEL */
    {"touch", -2, 1, touchCommand, -1, 1},
    /* the hash type: commands_hash.c */
    {"hset", -4, 1, ksHsetCommand, 0, 0, 2},     {"hget", 3, 1, ksHgetCommand, 0, 0, 2},
    {"hmget", -3, 1, ksHmgetCommand, 0, 0, 2},   {"hgetall", 2, 1, ksHgetallCommand},
    {"hdel", -3, 1, ksHdelCommand, 0, 0, 2},
    /* the sorted set: commands_zset.c (ZADD's first member is argv[3]) */
    {"zadd", -4, 1, ksZaddCommand, 0, 0, 3},     {"zscore", 3, 1, ksZscoreCommand, 0, 0, 2},
    {"zrem", -3, 1, ksZremCommand, 0, 0, 2},     {"zmscore", -3, 1, ksZmscoreCommand, 0, 0, 2},
};

#define NUM_CORE_COMMANDS ((int)(sizeof(commandTable) / sizeof(commandTable[0])))
static_assert(NUM_CORE_COMMANDS <= KS_MAX_COMMANDS, "KS_MAX_COMMANDS holds the command table");

/* Commands registered by the server (server.c: PING, CONFIG, INFO, ...), after the table. */
static const ksCommandDef *extraTable;
static int extraCount;

int ksRegisterCommands(const ksCommandDef *table, int n) {
    if (extraTable || n < 0 || NUM_CORE_COMMANDS + n > KS_MAX_COMMANDS) return -1;
    extraTable = table;
    extraCount = n;
    return 0;
}

int ksCommandCount(void) { return NUM_CORE_COMMANDS + extraCount; }

const ksCommandDef *ksCommandAt(int i) {
    return i < NUM_CORE_COMMANDS ? &commandTable[i] : &extraTable[i - NUM_CORE_COMMANDS];
}

const ksCommandDef *ksLookupCommand(const char *name, size_t len) {
    if (ksCallPathOn) return ksCallLookup(name, len); /* a server: the dict of names */
    /* Valkey looks commands up in a dict (constant cost, the site cmd.dispatch); the
     * first letter skips most rows of this linear table cheaply. */
    int first = len ? (name[0] | 0x20) : 0;
    for (int t = 0; t < 2; t++) { /* the table, then the server's (ksRegisterCommands) */
        const ksCommandDef *tab = t ? extraTable : commandTable;
        const int n = t ? extraCount : NUM_CORE_COMMANDS;
        for (int i = 0; i < n; i++) {
            if (tab[i].name[0] != first) continue;
            if (strlen(tab[i].name) == len && strncasecmp(tab[i].name, name, len) == 0)
                return &tab[i];
        }
    }
    return NULL;
}

static int commandIndex(const ksCommandDef *d) {
    if (d >= commandTable && d < commandTable + NUM_CORE_COMMANDS) return (int)(d - commandTable);
    return NUM_CORE_COMMANDS + (int)(d - extraTable);
}

int ksCommandKeys(const ksCommandDef *d, int argc, int *first, int *step) {
    if (!d || !d->first_key || d->first_key >= argc) return 0;
    if ((d->arity > 0 && argc != d->arity) || argc < -d->arity) return 0;
    int last = d->last_key < 0 ? argc + d->last_key : d->last_key ? d->last_key : d->first_key;
    int st = d->key_step ? d->key_step : 1;
    if (d->last_key < 0 && (argc - d->first_key) % st) return 0; /* MSET k v k: the command's own arity error */
    *first = d->first_key;
    *step = st;
    return (last - d->first_key) / st + 1;
}

/* addReplyErrorFormat replaces newlines so the error stays one line. */
static void replyErrorSanitized(ksKeyspace *ks, ksClient *c, char *msg) {
    for (char *p = msg; *p; p++)
        if (*p == '\r' || *p == '\n') *p = ' ';
    ksReplyError(ks, c, msg);
}

void ksExecuteCommand(ksKeyspace *ks, ksClient *c, ksCommand *cmd) {
    KS_MARK(KVT_MARK_COMMAND, c->ncommands);
    c->ncommands++;
    ks->cron_clock_ns += ks->command_ns;
    if (cmd->argc == 0) return;
    const ksCommandDef *def = cmd->def ? cmd->def : ksLookupCommand(cmd->argv[0], sdslen(cmd->argv[0]));
    if (!def) {
        char args[160] = "";
        size_t al = 0;
        for (int i = 1; i < cmd->argc && al < 128; i++) {
            int n = snprintf(args + al, sizeof(args) - al, "'%.*s' ", (int)(128 - al), cmd->argv[i]);
            if (n < 0) break;
            al += (size_t)n;
            if (al >= sizeof(args)) al = sizeof(args) - 1;
        }
        char msg[400];
        snprintf(msg, sizeof(msg), "ERR unknown command '%.128s', with args beginning with: %s", cmd->argv[0], args);
        replyErrorSanitized(ks, c, msg);
        return;
    }
    if ((def->arity > 0 && cmd->argc != def->arity) || (cmd->argc < -def->arity)) {
        char msg[128];
        snprintf(msg, sizeof(msg), "ERR wrong number of arguments for '%s' command", def->name);
        ksReplyError(ks, c, msg);
        return;
    }
    int id = commandIndex(def);
    ks->stats.calls[id]++;
    /* the command's index, its commandstats count, the timed test, the GET hit or miss,
     * and the server-mode tests of the parse, lookup, key, touch, reply and free paths
     * (callpath.c): 44 instructions per command under callgrind (tests/calibrate.sh) */
    KS_WORK(44);
    if (ksCallPathOn) { /* a server: processCommand's checks and call() (callpath.c) */
        ksCallCommand(ks, c, cmd, def, id);
        return;
    }
    if (!ks->stats.timed) {
        def->proc(ks, c, cmd);
        return;
    }
    /* The server's call(): the command's duration on the monotonic clock, into its
     * commandstats and its latency histogram (Valkey latency-tracking, on by default). */
    uint64_t t0 = ksMonotonicNs();
    def->proc(ks, c, cmd);
    uint64_t ns = ksMonotonicNs() - t0;
    ks->stats.ns[id] += ns;
    ks->stats.latency[id][ns ? 64 - __builtin_clzll(ns) : 0]++;
}

uint64_t ksMonotonicNs(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}
