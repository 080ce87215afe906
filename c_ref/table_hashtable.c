/*
 * table_hashtable.c -- ksTableOps for the Valkey hashtable (table=hashtable).
 *
 * A thin adapter: the keyspace's hashtableType (db.c) supplies entryGetKey,
 * keyCompare and entryHash over keyspace objects; everything else maps 1:1.
 */
#include <string.h>

#include "keyspace.h"

static_assert(sizeof(hashtableIncrementalFindState) <= sizeof(ksFindState), "find state fits");
static_assert(sizeof(hashtablePosition) <= sizeof(ksInsertPos), "position fits");
static_assert(sizeof(hashtableIterator) <= sizeof(ksTableIter), "iterator fits");

static void *htCreate(ksKeyspace *ks) {
    hashtable *ht = hashtableCreate(&ks->ht_type, ks->arena);
    if (ks->hashtable_min_exp > 0) hashtableExpand(ht, ((size_t)1 << ks->hashtable_min_exp) * 7 * 32 / 5 / 7);
    return ht;
}

static void htRelease(ksKeyspace *ks, void *t, int free_entries) {
    (void)ks;
    hashtable *ht = t;
    hashtableType *type = hashtableGetType(ht);
    void (*d)(void *) = type->entryDestructor;
    if (!free_entries) type->entryDestructor = NULL;
    hashtableRelease(ht);
    type->entryDestructor = d;
}

static size_t htSize(const void *t) { return hashtableSize(t); }

static bool htFind(void *t, const void *key, uint64_t hash, void **found) {
    return hashtableFindWithHash(t, key, hash, found);
}

static void **htFindRef(void *t, const void *key, uint64_t hash) { return hashtableFindRefWithHash(t, key, hash); }

static bool htFindPos(void *t, const void *key, uint64_t hash, ksInsertPos *pos, void **existing) {
    return hashtableFindPositionForInsertWithHash(t, key, hash, (hashtablePosition *)pos, existing);
}

static void htInsertAt(void *t, void *entry, ksInsertPos *pos) {
    hashtableInsertAtPosition(t, entry, (hashtablePosition *)pos);
}

static bool htPop(void *t, const void *key, uint64_t hash, void **popped) {
    (void)hash;
    return hashtablePop(t, key, popped);
}

static void htFindInit(ksFindState *s, void *t, const void *key, uint64_t hash) {
    hashtableIncrementalFindInitWithHash((hashtableIncrementalFindState *)s, t, key, hash);
}

static bool htFindStep(ksFindState *s) { return hashtableIncrementalFindStep((hashtableIncrementalFindState *)s); }

static bool htFindResult(ksFindState *s, void **found) {
    return hashtableIncrementalFindGetResult((hashtableIncrementalFindState *)s, found);
}

static void htPrefetchBucket(void *t, uint64_t hash) { hashtablePrefetchBucket(t, hash); }

static void htIterInit(ksTableIter *it, void *t, int flags, int prefetch) {
    uint8_t f = 0;
    if (flags & KS_ITER_SAFE) f |= HASHTABLE_ITER_SAFE;
    if (flags & KS_ITER_PREFETCH_VALUES) f |= HASHTABLE_ITER_PREFETCH_VALUES;
    hashtableInitIterator((hashtableIterator *)it, t, f);
    hashtableSetIteratorPrefetch((hashtableIterator *)it, (hashtableIterPrefetch)prefetch);
}

static bool htIterNext(ksTableIter *it, void **entry) { return hashtableNext((hashtableIterator *)it, entry); }
static void htIterReset(ksTableIter *it) { hashtableResetIterator((hashtableIterator *)it); }

static size_t htScan(void *t, size_t cursor, ksScanFn fn, void *privdata) {
    return hashtableScan(t, cursor, fn, privdata);
}

static void htExpand(void *t, size_t n) { hashtableExpand(t, n); }
/* hashtableRehashMicroseconds' loop: one rehashStep per bucket. */
static bool htRehashSteps(void *t, size_t n) {
    hashtableRehashSteps(t, n);
    return hashtableIsRehashing(t);
}
static size_t htMemUsage(const void *t) { return hashtableMemUsage(t); }
static bool htPaused(const void *t) { return hashtableIsRehashingPaused(t); }
static int htCheck(void *t, char *err, size_t errlen) { return hashtableCheckValid(t, err, errlen); }

const ksTableOps ksHashtableTableOps = {
    .name = "hashtable",
    .create = htCreate,
    .release = htRelease,
    .size = htSize,
    .find = htFind,
    .findRef = htFindRef,
    .findPositionForInsert = htFindPos,
    .insertAtPosition = htInsertAt,
    .pop = htPop,
    .findInit = htFindInit,
    .findStep = htFindStep,
    .findResult = htFindResult,
    .prefetchBucket = htPrefetchBucket,
    .iterInit = htIterInit,
    .iterNext = htIterNext,
    .iterReset = htIterReset,
    .scan = htScan,
    .expand = htExpand,
    .rehashSteps = htRehashSteps,
    .memUsage = htMemUsage,
    .isRehashingPaused = htPaused,
    .checkValid = htCheck,
};
