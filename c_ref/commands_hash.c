/*
 * commands_hash.c -- the hash commands HSET HGET HMGET HGETALL HDEL, with
 * Valkey's replies and errors (t_hash.c hsetCommand, hgetCommand,
 * hmgetCommand, hgetallCommand, hdelCommand); their rows are in commands.c's
 * command table.
 *
 *   HSET key f v [f v ...]  lookupKeyWrite; a missing key gets an empty
 *                           listpack hash (createHashObject, dbAdd); the
 *                           conversion check over every argument
 *                           (hashTypeTryConversion), then one hashTypeSet
 *                           per pair; replies the number of new fields
 *   HGET key f              lookupKeyRead; the value or null
 *   HMGET key f [f ...]     an array: each field's value or null
 *   HGETALL key             an array of 2n: field, value, in iteration order
 *   HDEL key f [f ...]      the fields deleted; the key goes with its last field
 *
 * A key holding another type is "WRONGTYPE ..." (checkType) after its lookup.
 * The field lookups of HGET and HMGET go through ksHashFieldPrefetch first
 * when the hash variant asks for it (variants.c, family `hash`).
 *
 * Conventions: command procs are ksXxxCommand (commands.c's table names them).
 */
#include <stdio.h>
#include <string.h>

#include "keyspace.h"
#include "t_hash.h"

/* HGETALL's work per field-value pair besides the recorded accesses (the
 * iterator's and two bulk replies' bookkeeping), calibrated against callgrind
 * (tests/calibrate.sh): about 300 instructions a pair on both tables. */
#define KS_HGETALL_PAIR_WORK 300
/* HGET's and HMGET's work per field looked up besides the recorded accesses
 * (hashTypeGetValue's dispatch, the reply's bookkeeping), calibrated likewise. */
#define KS_HASH_FIELD_WORK 150

static const char WRONGTYPE[] = "WRONGTYPE Operation against a key holding the wrong kind of value";

/* lookupKey + checkType for a command of one type (t_hash.h): *o is the key's robj of
 * that type (*odep: its header load), NULL if the key is absent; a key of another type
 * gets WRONGTYPE, as checkType replies, and a non-zero return (the command is done). */
int ksLookupTyped(ksKeyspace *ks, ksClient *c, ksCommand *cmd, int type, ksKeyInfo *ki,
                  ksLoadId *odep, robj **o) {
    if (cmd->prefetched) *ki = cmd->key;
    else ksKeyResolve(ks, cmd->argv[1], ki);
    if (ki->rehash) ksKeyRehash(ks, ki);
    *o = NULL;
    const int write = type & KS_LOOKUP_WRITE;
    type &= ~KS_LOOKUP_WRITE;
    void *e = ksDbFind(ks, ki);
    if (!write) { /* lookupKey: stat_keyspace_hits / misses unless LOOKUP_WRITE */
        if (e) ks->stats.keyspace_hits++;
        else ks->stats.keyspace_misses++;
    }
    if (!e) return 0;
    ksDbTouch(ks, ki, e);
    if (ksEntryType(ks, e) != type) {
        ksReplyError(ks, c, WRONGTYPE);
        return -1;
    }
    *o = ksEntryObject(ks, e, ki->found_dep, odep);
    return 0;
}

void ksHsetCommand(ksKeyspace *ks, ksClient *c, ksCommand *cmd) {
    if (cmd->argc % 2 == 1) {
        ksReplyError(ks, c, "ERR wrong number of arguments for 'hset' command");
        return;
    }
    ksKeyInfo ki;
    ksLoadId od = 0;
    robj *o;
    if (ksLookupTyped(ks, c, cmd, OBJ_HASH | KS_LOOKUP_WRITE, &ki, &od, &o)) return;
    if (!o) { /* hashTypeLookupWriteOrCreate */
        sds k = cmd->argv[1];
        void *e = ksHashEntryCreate(ks, k, sdslen(k), -1);
        ksDbAddNew(ks, &ki, e);
        o = ksEntryObject(ks, e, 0, &od);
    }
    ksHashTryConversion(ks, o, od, cmd->argv, 2, cmd->argc - 1);
    long long created = 0;
    for (int j = 2; j < cmd->argc; j += 2) {
        sds f = cmd->argv[j], v = cmd->argv[j + 1];
        KS_WORK(20);
        created += ksHashSet(ks, o, od, f, sdslen(f), (const uint8_t *)v, sdslen(v));
    }
    ksReplyInt(ks, c, created);
}

/* The value of field f of o, or a null. */
static void replyField(ksKeyspace *ks, ksClient *c, robj *o, ksLoadId od, sds f) {
    const uint8_t *v;
    size_t vlen;
    ksLoadId vd = 0;
    KS_WORK(KS_HASH_FIELD_WORK);
    if (o && ksHashGet(ks, o, od, f, &v, &vlen, &vd) == 0) ksReplyBulk(ks, c, v, vlen, vd);
    else ksReplyNull(ks, c);
}

/* A field-value entry's value, or a null for none (a variant's own lookup). */
static void replyEntry(ksKeyspace *ks, ksClient *c, void *entry, ksLoadId dep) {
    if (!entry) {
        ksReplyNull(ks, c);
        return;
    }
    size_t vlen;
    ksLoadId vd = 0;
    const uint8_t *v = ksHashEntryValue(entry, dep, &vlen, &vd);
    ksReplyBulk(ks, c, v, vlen, vd);
}

void ksHgetCommand(ksKeyspace *ks, ksClient *c, ksCommand *cmd) {
    ksKeyInfo ki;
    ksLoadId od = 0;
    robj *o;
    if (ksLookupTyped(ks, c, cmd, OBJ_HASH, &ki, &od, &o)) return;
    void *found;
    ksLoadId fd;
    if (o && ks->var.hash_fields && ks->var.hash_fields(ks, o, od, cmd->argv + 2, 1, &found, &fd)) {
        replyEntry(ks, c, found, fd);
        return;
    }
    replyField(ks, c, o, od, cmd->argv[2]);
}

void ksHmgetCommand(ksKeyspace *ks, ksClient *c, ksCommand *cmd) {
    ksKeyInfo ki;
    ksLoadId od = 0;
    robj *o;
    if (ksLookupTyped(ks, c, cmd, OBJ_HASH, &ki, &od, &o)) return;
    int n = cmd->argc - 2;
    void *found[KS_HASH_BATCH_MAX];
    ksLoadId fd[KS_HASH_BATCH_MAX];
    ksReplyArrayLen(ks, c, n);
    for (int j = 0; j < n; j += KS_HASH_BATCH_MAX) { /* the variant sees the fields in chunks */
        int m = n - j < KS_HASH_BATCH_MAX ? n - j : KS_HASH_BATCH_MAX;
        if (o && ks->var.hash_fields && ks->var.hash_fields(ks, o, od, cmd->argv + 2 + j, m, found, fd)) {
            for (int i = 0; i < m; i++) replyEntry(ks, c, found[i], fd[i]);
            continue;
        }
        for (int i = 0; i < m; i++) replyField(ks, c, o, od, cmd->argv[2 + j + i]);
    }
}

void ksHgetallCommand(ksKeyspace *ks, ksClient *c, ksCommand *cmd) {
    ksKeyInfo ki;
    ksLoadId od = 0;
    robj *o;
    if (ksLookupTyped(ks, c, cmd, OBJ_HASH, &ki, &od, &o)) return;
    if (!o) {
        ksReplyArrayLen(ks, c, 0);
        return;
    }
    ksReplyArrayLen(ks, c, 2 * (long long)ksHashLength(ks, o));
    if (ks->var.hash_getall) {
        ks->var.hash_getall(ks, c, o, od);
        return;
    }
    ksHashIter it;
    ksHashIterInit(ks, &it, o, od);
    const uint8_t *f, *v;
    size_t fl, vl;
    ksLoadId fd, vd;
    while (ksHashIterNext(&it, &f, &fl, &fd, &v, &vl, &vd)) {
        KS_WORK(KS_HGETALL_PAIR_WORK);
        ksReplyBulkTagged(ks, c, f, fl, fd, o->encoding == OBJ_ENCODING_HT ? KVT_TAG_KEY : KVT_TAG_VALUE);
        ksReplyBulk(ks, c, v, vl, vd);
    }
    ksHashIterReset(&it);
}

void ksHdelCommand(ksKeyspace *ks, ksClient *c, ksCommand *cmd) {
    ksKeyInfo ki;
    ksLoadId od = 0;
    robj *o;
    if (ksLookupTyped(ks, c, cmd, OBJ_HASH | KS_LOOKUP_WRITE, &ki, &od, &o)) return;
    long long deleted = 0;
    for (int j = 2; o && j < cmd->argc; j++) {
        if (!ksHashDelete(ks, o, od, cmd->argv[j])) continue;
        deleted++;
        if (ksHashLength(ks, o) == 0) { /* the last field: the key goes */
            ksDbDelete(ks, &ki);
            break;
        }
    }
    ksReplyInt(ks, c, deleted);
}
