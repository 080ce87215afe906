/*
 * table_dict.c -- ksTableOps for the Redis dict (table=dict).
 *
 * A thin adapter, like table_hashtable.c: the keyspace's callbacks (db.c, in
 * ks->ht_type) have the same shapes as dictType's, so the dict type copies
 * them.  The keyspace stores unified kvobj-style objects or legacy entries,
 * both 8-aligned.  layout=unified: the dict is no_value with even (010)
 * tagging: an object alone in its bucket sits in the cell itself, otherwise
 * behind a 16-byte NoValue node (Redis 8 dbDictType).  layout=legacy: Redis
 * 7's dictEntry{key, v, next}: the 24-byte legacy entry is its own chain node
 * (dictType embeds_next; ksDictTableOps.legacy_entry_is_node), one hop from
 * the bucket cell to the entry, none allocated by the dict.
 *
 * Mapping notes:
 *   find/findLink/pop/findPositionForInsert use the keyspace's precomputed
 *     hash; the keyspace looks keys up with findLink and writes through
 *     setAtLink (Redis setKey: dbFindByLink, then dictSetKeyAtLink: an insert
 *     walks the chain once with one rehash step; an overwrite keeps a direct
 *     item direct);
 *   findInit/Step/Result is the dictPrefetcher's per-key machine; the type's
 *     prefetchEntryValue is Redis's dbDictPrefetchEntryValue (PR #15133,
 *     server.c): on a (presumed) hit, kv->ptr of a RAW string, so the machine
 *     prefetches the value itself (ksDictTableOps.find_prefetches_value) and
 *     MGET/MSET batches and the lookahead pipeline warm 100-byte values;
 *   iterators ignore the prefetch mode (Redis's dict iterator has none);
 *   hashtable_min_exp=N starts each table at 2^N buckets.
 */
#include <string.h>

#include "dict.h"
#include "keyspace.h"

static_assert(sizeof(dictIncrementalFindState) <= sizeof(ksFindState), "find state fits");
static_assert(sizeof(void *) <= sizeof(ksInsertPos), "position fits");
static_assert(sizeof(dictIterator) <= sizeof(ksTableIter), "iterator fits");

/* Callbacks are the keyspace's (they use ksCur); one type per layout. */
static dictType dict_type_unified, dict_type_legacy;

/* dbDictPrefetchEntryValue: reads the object header (type, encoding, ptr) and
 * returns kv->ptr for a RAW string, NULL for an embedded one. */
static const void *dtPrefetchEntryValue(const dict *d, const void *stored, ksLoadId dep,
                                        ksLoadId *addr_dep, uint8_t *tag) {
    (void)d;
    return ksEntryValuePrefetchAddr(ksCur, stored, dep, addr_dep, tag);
}

static void *dtCreate(ksKeyspace *ks) {
    int legacy = ks->layout == KS_LAYOUT_LEGACY;
    dictType *type = legacy ? &dict_type_legacy : &dict_type_unified;
    type->entryGetKey = ks->ht_type.entryGetKey;
    type->hashFunction = ks->ht_type.hashFunction;
    type->entryHash = ks->ht_type.entryHash;
    type->keyCompare = ks->ht_type.keyCompare;
    type->entryDestructor = ks->ht_type.entryDestructor;
    type->prefetchEntryValue = dtPrefetchEntryValue;
    type->no_value = 1;
    type->keys_are_odd = 0;
    type->embeds_next = legacy;
    type->embedded_next_offset = legacy ? offsetof(legacyEntry, next) : 0;
    dict *d = dictCreate(type, ks->arena);
    if (ks->hashtable_min_exp > 0) dictExpand(d, (size_t)1 << ks->hashtable_min_exp);
    return d;
}

static void dtRelease(ksKeyspace *ks, void *t, int free_entries) {
    (void)ks;
    dictType *type = dictGetType(t);
    void (*destructor)(void *) = type->entryDestructor;
    if (!free_entries) type->entryDestructor = NULL;
    dictRelease(t);
    type->entryDestructor = destructor;
}

static size_t dtSize(const void *t) { return dictSize(t); }

static bool dtFind(void *t, const void *key, uint64_t hash, void **found) {
    ksLoadId dep = 0;
    void *e = dictFetchStoredWithHash(t, key, hash, &dep);
    if (e) KS_SET_ENTRY_DEP(dep);
    if (found) *found = e;
    return e != NULL;
}

static bool dtFindLink(void *t, const void *key, uint64_t hash, void **found, ksInsertPos *pos) {
    dictEntryLink bucket = NULL;
    ksLoadId dep = 0;
    dictEntryLink link = dictFindLinkWithHash(t, key, hash, &bucket, &dep);
    dictEntryLink keep = link ? link : bucket;
    memcpy(pos->opaque, &keep, sizeof(keep));
    if (found) *found = link ? dictEntryStored(*link) : NULL; /* read by the walk */
    if (link == NULL) return false;
    KS_SET_ENTRY_DEP(dep);
    return true;
}

static void dtSetAtLink(void *t, void *entry, ksInsertPos *pos, bool new_item) {
    dictEntryLink link;
    memcpy(&link, pos->opaque, sizeof(link));
    dictSetKeyAtLink(t, entry, &link, new_item);
    memcpy(pos->opaque, &link, sizeof(link));
}

static bool dtFindPos(void *t, const void *key, uint64_t hash, ksInsertPos *pos, void **existing) {
    dictEntry *de = NULL;
    void *p = dictFindPositionForInsertWithHash(t, key, hash, &de);
    if (p == NULL) {
        if (existing) *existing = dictEntryStored(de); /* read by the lookup */
        return false;
    }
    memcpy(pos->opaque, &p, sizeof(p));
    return true;
}

static void dtInsertAt(void *t, void *entry, ksInsertPos *pos) {
    void *p;
    memcpy(&p, pos->opaque, sizeof(p));
    dictInsertAtPosition(t, entry, p);
}

static bool dtPop(void *t, const void *key, uint64_t hash, void **popped) {
    return dictPop(t, key, hash, popped) == DICT_OK;
}

static void dtFindInit(ksFindState *s, void *t, const void *key, uint64_t hash) {
    dictIncrementalFindInitWithHash((dictIncrementalFindState *)s, t, key, hash);
}

static bool dtFindStep(ksFindState *s) {
    return dictIncrementalFindStep((dictIncrementalFindState *)s);
}

static bool dtFindResult(ksFindState *s, void **found) {
    dictEntry *de = NULL;
    if (!dictIncrementalFindGetResult((dictIncrementalFindState *)s, &de)) return false;
    if (found) *found = dictEntryStored(de); /* read by the machine */
    return true;
}

static void dtPrefetchBucket(void *t, uint64_t hash) { dictPrefetchBucket(t, hash); }

static void dtIterInit(ksTableIter *it, void *t, int flags, int prefetch) {
    (void)prefetch;
    if (flags & KS_ITER_SAFE)
        dictInitSafeIterator((dictIterator *)it, t);
    else
        dictInitIterator((dictIterator *)it, t);
}

static bool dtIterNext(ksTableIter *it, void **entry) {
    ksLoadId dep = 0;
    if (!dictNextStored((dictIterator *)it, entry, &dep)) return false;
    KS_SET_ENTRY_DEP(dep);
    return true;
}

static void dtIterReset(ksTableIter *it) { dictResetIterator((dictIterator *)it); }

typedef struct {
    ksScanFn fn;
    void *privdata;
} scanWrap;

static void dtScanCb(void *privdata, const dictEntry *de) {
    scanWrap *w = privdata;
    w->fn(w->privdata, dictEntryStored(de)); /* read by scanBucket */
}

static size_t dtScan(void *t, size_t cursor, ksScanFn fn, void *privdata) {
    scanWrap w = {fn, privdata};
    return dictScan(t, cursor, dtScanCb, &w);
}

static void dtExpand(void *t, size_t n) { dictExpand(t, n); }
/* dictRehashMicroseconds' loop: dictRehash(d, 100) per round. */
static bool dtRehashSteps(void *t, size_t n) {
    while (n > 0 && dictIsRehashing(t) && !dictIsRehashingPaused(t)) {
        int k = n < 100 ? (int)n : 100;
        if (!dictRehash(t, k)) break;
        n -= (size_t)k;
    }
    return dictIsRehashing(t);
}
static size_t dtMemUsage(const void *t) { return dictMemUsage(t); }
static bool dtPaused(const void *t) { return dictIsRehashingPaused(t); }
static int dtCheck(void *t, char *err, size_t errlen) { return dictCheckValid(t, err, errlen); }

const ksTableOps ksDictTableOps = {
    .name = "dict",
    .create = dtCreate,
    .release = dtRelease,
    .size = dtSize,
    .find = dtFind,
    .findLink = dtFindLink,
    .setAtLink = dtSetAtLink,
    .legacy_entry_is_node = true,
    .findPositionForInsert = dtFindPos,
    .insertAtPosition = dtInsertAt,
    .pop = dtPop,
    .findInit = dtFindInit,
    .findStep = dtFindStep,
    .findResult = dtFindResult,
    .prefetchBucket = dtPrefetchBucket,
    .find_prefetches_value = true,
    .iterInit = dtIterInit,
    .iterNext = dtIterNext,
    .iterReset = dtIterReset,
    .scan = dtScan,
    .expand = dtExpand,
    .rehashSteps = dtRehashSteps,
    .memUsage = dtMemUsage,
    .isRehashingPaused = dtPaused,
    .checkValid = dtCheck,
};
