/*
 * pipeline.c -- executing a pipelined query buffer: naive, and the lookahead
 * of Valkey PR #2092 with memory_prefetch.c's interleaved key prefetching.
 *
 *   naive:      parse 1 -> execute 1 -> parse 1 -> execute 1 ...
 *
 *   lookahead:  parse commands into a batch of up to `batch` KEYS -> resolve
 *               their keys -> interleave the step machines -> execute in order
 *
 *   Batch rule (Valkey #2092, memory_prefetch.c addCommandToBatch; `batch` is
 *   prefetch-batch-max-size, counted in keys, not commands):
 *     - every parsed command joins the batch, in order; its keys
 *       (getKeysFromCommand, ksCommandKeys: GET/SET/EXPIRE/PEXPIRE/TTL/PTTL 1
 *       key, MGET/DEL/EXISTS all arguments, MSET/MSETNX every other argument)
 *       are added one by one while the batch holds fewer than `batch` keys
 *       (`for (i < num_keys && key_count < max_prefetch_size)`): a 50-key
 *       MGET in a 16-key batch has its first 16 keys prefetched, the rest
 *       are looked up cold; a command that fails its arity check (incl.
 *       MSET's pair count) or is unknown adds no key but still runs;
 *     - the batch closes when it holds `batch` keys (after the command that
 *       filled it), when the query buffer has no further complete command, at
 *       a protocol error, or at KS_MAX_BATCH commands (zero-key commands);
 *     - only a batch of more than one key is prefetched (`key_count > 1`).
 *
 *   Batch 0 (a server at prefetch-batch-max-size 0): no batch fill and no
 *   prefetch, but every complete command of the buffer (up to KS_MAX_BATCH) is
 *   parsed before the first runs, each freed after it runs: Valkey 9.1.2's
 *   processInputBuffer parses a read's commands into the client's command queue
 *   (parseInputBuffer, prepareCommandQueue) whatever the batch size (callgrind of
 *   the reference binary at 0: one parseInputBuffer per read of ten GETs).
 *
 *   Hashing (Valkey hashtableIncrementalFindInit, then lookupKey ->
 *   hashtableFind): the prefetch hashes each key, and the command hashes it
 *   again when it runs (ksKeyRehash); the slot and its table pointer are
 *   resolved once (c->slot).  pipeline=lookahead-hash-once is the study
 *   variant that reuses the prefetch's hash.  At batch 1 there is no batch
 *   fill (Valkey 9.1.2 skips it at prefetch-batch-max-size <= 1): each key is
 *   counted for the batch rule but hashed once, by its lookup, as naive.
 *
 *   Interleaving (one prefetch per key per turn, round robin):
 *
 *     turn 1:  k0.bucket  k1.bucket  k2.bucket ...
 *     turn 2:  k0.entry   k1.entry   k2.entry  ...   (tag-matching entry)
 *     turn 3:  k0.value   k1.value   ...             (RAW values only)
 *
 *   Per key: ENTRY (one hashtableIncrementalFindStep per turn) -> when the
 *   find is done, VALUE without yielding (prefetch the value if it is in a
 *   separate allocation) -> DONE.  With table=dict the dictPrefetcher's own
 *   ENTRY_VALUE state prefetches the value (dbDictPrefetchEntryValue, Redis
 *   #15133), so the driver's VALUE step issues nothing.  A key whose table is missing or empty is
 *   DONE at once; only batches of more than one key are prefetched.
 *
 *   all-pending (pipeline=all-pending-14754, Redis's main thread after #14440,
 *               #14754 and #14017; ksPipelineAllPending, below):
 *               parse up to REDIS_LOOKAHEAD commands -> if more than one is
 *               ready, one batch of the keys of all of them -> execute them all
 *               -> parse again
 *
 *   Batch rule (Redis networking.c processInputBuffer: parse up to
 *   server.lookahead commands only when none is ready, then, if
 *   pending_cmds.ready_len > 1, resetCommandsBatch + addCommandToBatch(c) +
 *   prefetchCommands; memory_prefetch.c addCommandToBatch, determinePrefetchCount):
 *     - the batch holds max_prefetch_size = 2 x `batch` keys
 *       (prefetchCommandsBatchInit: twice prefetch-batch-max-size, so fewer
 *       than twice the configured size is prefetched all at once);
 *     - the client's ready commands are walked in order; each adds its keys
 *       while the batch holds fewer than 2 x `batch`; the walk stops at an
 *       unknown command or one failing its arity check (pcmd->read_error);
 *     - one command alone is not prefetched (ready_len > 1), nor a batch of
 *       one key (key_count > 1);
 *     - every parsed command runs before the next parse: a 10-deep pipeline
 *       of 100-key MGETs gets one batch, the first 32 keys of its first MGET.
 *   The interleaving is the lookahead's (ksPrefetchKeys: on table=dict the
 *   dictPrefetcher, BUCKET -> ENTRY -> KVOBJ -> VALDATA).
 *
 * Prefetching is advisory: commands execute exactly as in the naive path,
 * re-reading slot tables (an earlier command may have created, rehashed or
 * freed them); only the slot of each command's first key, computed during
 * lookahead, is reused, and its hash is computed again (multi-key commands
 * resolve their keys again when they run).
 *
 * Conventions: public ks...; static internals without prefix.
 */
#include <string.h>

#include "callpath.h"
#include "keyspace.h"
#include "siphash.h"
#include "t_hash.h"
#include "t_zset.h"

enum { PREFETCH_ENTRY = 0, PREFETCH_VALUE, PREFETCH_FIELD, PREFETCH_DONE };

/* The nested field prefetch (variants_hash.c, hash=nested-3940 / value-2180):
 * after a key's lookup found a hash kept as a Valkey hashtable, or a sorted set
 * kept as a skiplist (its member table), the command's field or member gets a
 * step machine of its own in that table (hashing it, the table struct's read);
 * 1 if it did, else 0 (the key is done).  #2180's value step is for hashes
 * only (its commands are HGET and HSET). */
static int fieldFindInit(ksKeyspace *ks, sds field, hashtableIncrementalFindState *ffs, void *found,
                         ksLoadId fd) {
    if (!field || ks->ops != &ksHashtableTableOps) return 0;
    int type = ksEntryType(ks, found);
    if (type != OBJ_HASH && type != OBJ_ZSET) return 0;
    KS_ID_VAR(od) = 0;
    robj *o = ksEntryObject(ks, found, fd, &od);
    hashtable *ht;
    if (type == OBJ_HASH) {
        if (o->encoding != OBJ_ENCODING_HT) return 0;
        ht = ksHashTable(o);
    } else { /* the sorted set's member table, through the zset struct (t_zset.c) */
        if (o->encoding != OBJ_ENCODING_SKIPLIST) return 0;
        ht = ksZsetTable(o, od, &od);
    }
    size_t len = sdslen(field);
    (void)len;
    (void)KS_LOAD(field - 1, len + 1, KVT_TAG_ARGV, KS_SITE_PF_HASH, 0);
    KS_WORK_EXACT_OF(KVT_WORK_HASH, ksSiphashCost(len));
    KS_SET_TABLE_DEP(od);
    hashtableIncrementalFindInitWithHash(ffs, ht, field, hashtableHashKey(ht, field));
    return 1;
}

/* The field's find is done: #2180 prefetches its value when kept by pointer. */
static void fieldFindDone(ksKeyspace *ks, hashtableIncrementalFindState *ffs) {
    void *e;
    if (ks->var.hash_nested != KS_HASH_NESTED_2180 || !hashtableIncrementalFindGetResult(ffs, &e))
        return;
    KS_ID_VAR(ed) = KS_TAKE_ENTRY_DEP();
    ksLoadId ad = 0;
    const void *va = ksHashEntryValuePrefetchAddr(e, ed, &ad);
    if (va) KS_PREFETCH(va, KVT_TAG_VALUE, KS_SITE_PF_HASH, ad);
}

/* --- Interleaved prefetch (memory_prefetch.c hashtablePrefetch) ------------ */

/* The round robin, compiled twice: `nested` (a constant) adds the nested
 * field states, so the loop without them stays as lean as before them. */
static inline __attribute__((always_inline)) void prefetchKeys(ksKeyspace *ks, ksKeyInfo *keys, sds *fields,
                                                               int n, const int nested) {
    const ksTableOps *ops = ks->ops;
    int remaining = 0;
    for (int i = 0; i < n; i++) {
        ksKeyInfo *k = &keys[i];
        k->found = NULL;
        if (k->table == NULL || ops->size(k->table) == 0) {
            k->state = PREFETCH_DONE;
            continue;
        }
        k->state = PREFETCH_ENTRY;
        KS_SET_TABLE_DEP(k->slot_load); /* findInit's meta load: the slot chase */
        ops->findInit(&k->fs, k->table, k->key, k->hash);
        remaining++;
    }
    KS_WORK(4 * n);
    int cur = 0;
    while (remaining > 0) {
        ksKeyInfo *k = &keys[cur];
        cur = cur + 1 == n ? 0 : cur + 1;
        if (k->state == PREFETCH_DONE) continue;
        KS_WORK(6);
        if (k->state == PREFETCH_ENTRY) {
            if (ops->findStep(&k->fs)) continue; /* more work: next key */
            k->state = PREFETCH_VALUE;           /* done: value without yielding */
        } else if (nested && k->state == PREFETCH_FIELD) { /* the nested field: one step per turn */
            hashtableIncrementalFindState *ffs = (hashtableIncrementalFindState *)&k->fs;
            if (hashtableIncrementalFindStep(ffs)) continue;
            fieldFindDone(ks, ffs);
            k->state = PREFETCH_DONE;
            remaining--;
            continue;
        }
        void *found;
        if (ops->findResult(&k->fs, &found)) {
            k->found = found;
            /* The table's entry load produced `found` (the bucket line). */
            KS_ID_VAR(fd) = KS_TAKE_ENTRY_DEP();
            if (!ops->find_prefetches_value) ksEntryPrefetchValue(ks, found, fd);
            /* the key's find is over: its state now holds the field's (nested variants) */
            if (nested && fieldFindInit(ks, fields[k - keys], (hashtableIncrementalFindState *)&k->fs, found, fd)) {
                k->state = PREFETCH_FIELD;
                continue;
            }
        }
        k->state = PREFETCH_DONE;
        remaining--;
    }
}

void ksPrefetchKeys(ksKeyspace *ks, ksKeyInfo *keys, int n) {
    if (n > 1) prefetchKeys(ks, keys, NULL, n, 0);
}

void ksPrefetchKeysNested(ksKeyspace *ks, ksKeyInfo *keys, sds *fields, int n) {
    if (n > 1 || (n == 1 && fields[0])) prefetchKeys(ks, keys, fields, n, 1);
}

/* --- Naive ----------------------------------------------------------------- */

static int parseNext(ksKeyspace *ks, ksClient *c, ksCommand *cmd) {
    int rc = ksParseCommand(ks, c, cmd);
    if (rc < 0) {
        ksReplyError(ks, c, cmd->proto_err);
        c->closed = 1;
        c->qpos = c->qlen;
    }
    return rc;
}

void ksPipelineNaive(ksKeyspace *ks, ksClient *c) {
    ksCommand cmd;
    cmd.argv = NULL;
    cmd.argv_cap = 0;
    while (parseNext(ks, c, &cmd) > 0) {
        if (ks->var.multikey_guard) cmd.pipelined = c->qpos < c->qlen; /* more of the buffer pending */
        ksExecuteCommand(ks, c, &cmd);
        ksCommandFree(ks, &cmd);
    }
    ksCommandFree(ks, &cmd);
}

/* --- Lookahead ------------------------------------------------------------- */

/* A server's command (its argv objects): getKeysFromCommand's result, each key read
 * through its object (objectGetVal), added to keys[*nk..] while fewer than `room`. */
static __attribute__((noinline)) void serverCommandKeys(ksKeyspace *ks, ksCommand *cmd, ksKeyInfo *keys, int *nk,
                                                        int room) {
    ksGetKeysResult r;
    int n = ksCallGetKeys(cmd, &r);
    for (int j = 0; j < n && *nk < room; j++) ksKeyResolve(ks, ksObjectGetVal(cmd->argv_obj[r.keys[j].pos]), &keys[(*nk)++]);
    ksCallGetKeysFree(&r);
}

/* Add cmd's keys (getKeysFromCommand) to keys[*nk..] while fewer than
 * `batch` are in the batch (memory_prefetch.c addCommandToBatch).  The first
 * key's resolution is kept in cmd->key for execution.  At batch 1 the key is only
 * counted: Valkey 9.1.2's processInputBuffer runs its batch fill only when
 * prefetch-batch-max-size is above 1, so no key is extracted or hashed ahead of its
 * command (a batch of one key is never prefetched). */
static inline __attribute__((always_inline)) void commandKeys(ksKeyspace *ks, ksCommand *cmd, ksKeyInfo *keys,
                                                              sds *fields, int *nk, int *nf, int batch,
                                                              const int nested) {
    if (cmd->argc == 0) return;
    if (!cmd->def) cmd->def = ksLookupCommand(cmd->argv[0], sdslen(cmd->argv[0]));
    int first, step;
    int kc = ksCommandKeys(cmd->def, cmd->argc, &first, &step);
    if (kc == 0 || *nk + *nf >= batch) return;
    if (batch <= 1) { /* no batch fill: the key counts (the batch closes), unresolved */
        (*nk)++;
        return;
    }
    int start = *nk;
    if (__builtin_expect(cmd->argv_obj != NULL, 0)) serverCommandKeys(ks, cmd, keys, nk, batch - *nf);
    else
        for (int j = 0; j < kc && *nk + *nf < batch; j++) ksKeyResolve(ks, cmd->argv[first + j * step], &keys[(*nk)++]);
    /* The nested field (variants_hash.c): #3940 the first field of any field
     * command, in the batch while there is room; #2180 HGET's and HSET's,
     * outside the count. */
    if (nested) {
        for (int j = start; j < *nk; j++) fields[j] = NULL;
        int fa = cmd->def->field_arg;
        if (fa && ks->var.hash_nested == KS_HASH_NESTED_3940 && *nk + *nf < batch) {
            fields[start] = cmd->argv[fa];
            (*nf)++;
        } else if (fa && ks->var.hash_nested == KS_HASH_NESTED_2180 &&
                   (cmd->def->proc == ksHgetCommand || cmd->def->proc == ksHsetCommand)) {
            fields[start] = cmd->argv[fa];
        }
    }
    cmd->key = keys[start];
    cmd->prefetched = 1;
}

/* The lookahead, compiled twice: `nested` (a constant) adds the nested fields. */
static inline __attribute__((always_inline)) void lookahead(ksKeyspace *ks, ksClient *c, const int nested) {
    int batch = ks->var.batch;
    ksCommand cmds[KS_MAX_BATCH];
    ksKeyInfo keys[KS_MAX_BATCH];
    sds fields[KS_MAX_BATCH]; /* the nested variants' fields (set when one is on) */
    while (1) {
        int n = 0, nk = 0, nf = 0, rc = 1;
        while (n < KS_MAX_BATCH) {
            cmds[n].argv = NULL; /* only what the parser needs is initialised */
            cmds[n].argv_cap = 0;
            if ((rc = ksParseCommand(ks, c, &cmds[n])) <= 0) break;
            commandKeys(ks, &cmds[n], keys, fields, &nk, &nf, batch, nested);
            n++;
            if (batch && nk + nf == batch) break;
        }
        if (n == 0 && rc <= 0) {
            if (rc < 0) parseNext(ks, c, &cmds[0]); /* re-parse to reply the error */
            break;
        }
        if (nk + nf > 1) {
            KS_MARK(KVT_MARK_BATCH, nk + nf);
            if (nested) ksPrefetchKeysNested(ks, keys, fields, nk);
            else ksPrefetchKeys(ks, keys, nk);
        }
        /* The batch fill hashed every key it took, a lone command's too (Valkey 9.1 hashes a
         * command's keys as it adds them, prefetches only a batch of two or more, and
         * lookupKey's hashtableFind hashes each key again): the lookup hashes again. */
        for (int i = 0; i < n; i++)
            if (cmds[i].prefetched) cmds[i].key.rehash = !ks->var.pipeline_hash_once;
        for (int i = 0; i < n; i++) {
            /* Redis's pending_cmds.ready_len > 1: more commands parsed or pending */
            if (ks->var.multikey_guard) cmds[i].pipelined = i + 1 < n || c->qpos < c->qlen;
            ksExecuteCommand(ks, c, &cmds[i]);
            ksCommandFree(ks, &cmds[i]);
        }
        if (rc < 0) {
            ksReplyError(ks, c, cmds[n].proto_err);
            c->closed = 1;
            c->qpos = c->qlen;
            break;
        }
        if (rc == 0) break;
    }
}

void ksPipelineLookahead(ksKeyspace *ks, ksClient *c) {
    if (ks->var.hash_nested != KS_HASH_NESTED_NONE) lookahead(ks, c, 1);
    else lookahead(ks, c, 0);
}

/* --- All pending commands (Redis #14440, #14754, #14017) --------------------- */

/* server.lookahead: how many commands processInputBuffer parses ahead (Redis's
 * default, REDIS_DEFAULT_LOOKAHEAD). */
#define REDIS_LOOKAHEAD 16

/* addCommandToBatch's walk over one ready command: 1 to go on, 0 at a
 * command Redis's parser marks with a read error (unknown, wrong arity). */
static int allPendingKeys(ksKeyspace *ks, ksCommand *cmd, ksKeyInfo *keys, int *nk, int cap) {
    if (cmd->argc == 0) return 1;
    if (!cmd->def) cmd->def = ksLookupCommand(cmd->argv[0], sdslen(cmd->argv[0]));
    const ksCommandDef *d = cmd->def;
    if (!d || (d->arity > 0 && cmd->argc != d->arity) || cmd->argc < -d->arity) return 0;
    int first, step;
    int kc = ksCommandKeys(d, cmd->argc, &first, &step);
    if (kc == 0 || *nk >= cap) return 1;
    int start = *nk;
    if (__builtin_expect(cmd->argv_obj != NULL, 0)) serverCommandKeys(ks, cmd, keys, nk, cap);
    else
        for (int j = 0; j < kc && *nk < cap; j++) ksKeyResolve(ks, cmd->argv[first + j * step], &keys[(*nk)++]);
    cmd->key = keys[start];
    cmd->prefetched = 1;
    return 1;
}

void ksPipelineAllPending(ksKeyspace *ks, ksClient *c) {
    int cap = 2 * ks->var.batch; /* max_prefetch_size */
    ksCommand cmds[REDIS_LOOKAHEAD];
    ksKeyInfo keys[2 * KS_MAX_BATCH];
    while (1) {
        int n = 0, nk = 0, rc = 1;
        while (n < REDIS_LOOKAHEAD) { /* parse_more: nothing is ready */
            cmds[n].argv = NULL;
            cmds[n].argv_cap = 0;
            if ((rc = ksParseCommand(ks, c, &cmds[n])) <= 0) break;
            n++;
        }
        if (n == 0 && rc <= 0) {
            if (rc < 0) parseNext(ks, c, &cmds[0]); /* re-parse to reply the error */
            break;
        }
        if (n > 1) { /* pending_cmds.ready_len > 1 */
            for (int i = 0; i < n && allPendingKeys(ks, &cmds[i], keys, &nk, cap); i++) {
            }
            if (nk > 1) {
                KS_MARK(KVT_MARK_BATCH, nk);
                ksPrefetchKeys(ks, keys, nk);
                for (int i = 0; i < n; i++) /* the lookup hashes the key again (dictFind) */
                    if (cmds[i].prefetched) cmds[i].key.rehash = 1;
            }
        }
        for (int i = 0; i < n; i++) {
            /* #14899's guard: pending_cmds.ready_len > 1 (this command and more) */
            if (ks->var.multikey_guard) cmds[i].pipelined = n - i > 1;
            ksExecuteCommand(ks, c, &cmds[i]);
            ksCommandFree(ks, &cmds[i]);
        }
        if (rc < 0) {
            ksReplyError(ks, c, cmds[n].proto_err);
            c->closed = 1;
            c->qpos = c->qlen;
            break;
        }
        if (rc == 0) break;
    }
}
