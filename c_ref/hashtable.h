/*
 * hashtable.h -- Valkey's cache-line bucketed hashtable, as a reference model.
 *
 * Terminology
 *   hashtable  a set of entries (opaque pointers) with a key each.
 *   entry      what is stored: here a keyspace object (unified layout) or a
 *              legacy {key, value-object} entry.
 *   key        what an entry is looked up by; entryGetKey() derives it.
 *   type       a struct of callbacks giving the behaviour (hashtableType).
 *
 * Names and semantics follow valkey-io/valkey src/hashtable.h so diffs against
 * upstream stay readable.  Additions for tracing: callbacks receive and return
 * the id of the producing load (ksLoadId) so pointer chases are recorded.
 */
#ifndef KS_HASHTABLE_H
#define KS_HASHTABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "arena.h"
#include "emit.h"

typedef struct hashtable hashtable;

typedef struct hashtableType {
    /* The key of an entry.  `dep` is the id of the load that produced the entry
     * pointer; *key_dep receives the id of the load that produced the key's
     * address (may be NULL).  NULL callback: the entry is the key. */
    const void *(*entryGetKey)(const void *entry, ksLoadId dep, ksLoadId *key_dep);
    /* Hash of a lookup key; records nothing (callers record reading the key). */
    uint64_t (*hashFunction)(const void *key);
    /* Hash of a stored entry, recording the reads (rehashing).  NULL: hash the
     * key from entryGetKey with hashFunction. */
    uint64_t (*entryHash)(const void *entry, ksLoadId dep);
    /* 0 if equal.  key2 is a stored key whose address came from load key2_dep. */
    int (*keyCompare)(const void *key1, const void *key2, ksLoadId key2_dep);
    void (*entryDestructor)(void *entry);
    /* Prefetch the value of an entry (HASHTABLE_ITER_PREFETCH_VALUES). */
    void (*entryPrefetchValue)(const void *entry, ksLoadId dep);
    /* Called when rehashing completes or the table swaps (kvstore bookkeeping). */
    void (*rehashingCompleted)(hashtable *ht);
    /* Rehash everything at once when resizing. */
    unsigned instant_rehashing : 1;
    /* A table outside the keyspace (the server's command table): a find's loads carry
     * `trace_tag`, take no slot-table dependency and hand no entry dependency on. */
    unsigned outside_keyspace : 1;
    uint8_t trace_tag;
} hashtableType;

typedef enum {
    HASHTABLE_RESIZE_ALLOW = 0,
    HASHTABLE_RESIZE_AVOID,
    HASHTABLE_RESIZE_FORBID,
} hashtableResizePolicy;

/* Iterator prefetch modes (the `iterate=` variant). */
typedef enum {
    HASHTABLE_ITER_PREFETCH_NONE = 0,
    HASHTABLE_ITER_PREFETCH_NEXT_BUCKET, /* prefetch the next bucket's line */
    HASHTABLE_ITER_PREFETCH_VALKEY,      /* #1501: next bucket's entries + bucket after next */
} hashtableIterPrefetch;

#define HASHTABLE_ITER_SAFE (1 << 0)
#define HASHTABLE_ITER_PREFETCH_VALUES (1 << 1)

/* Opaque, stack-allocatable state (sizes asserted in hashtable.c). */
typedef struct { uint64_t opaque[10]; } hashtableIterator;
typedef struct { uint64_t opaque[5]; } hashtablePosition;
typedef struct { uint64_t opaque[9]; } hashtableIncrementalFindState;

typedef void (*hashtableScanFunction)(void *privdata, void *entry);

/* --- Global policy --- */
void hashtableSetResizePolicy(hashtableResizePolicy policy);
hashtableResizePolicy hashtableGetResizePolicy(void);

/* --- Lifecycle and introspection --- */
hashtable *hashtableCreate(hashtableType *type, ksArena *arena);
void hashtableRelease(hashtable *ht);
hashtableType *hashtableGetType(const hashtable *ht);
size_t hashtableSize(const hashtable *ht);
size_t hashtableBuckets(const hashtable *ht);
size_t hashtableChainedBuckets(const hashtable *ht, int table);
size_t hashtableMemUsage(const hashtable *ht);
bool hashtableIsRehashing(const hashtable *ht);
bool hashtableIsRehashingPaused(const hashtable *ht);
void hashtablePauseRehashing(hashtable *ht);
void hashtableResumeRehashing(hashtable *ht);
void hashtablePauseAutoShrink(hashtable *ht);
void hashtableResumeAutoShrink(hashtable *ht);
/* Run up to n rehash steps (tests; the cron's hashtableRehashMicroseconds). */
void hashtableRehashSteps(hashtable *ht, size_t n);
/* Rehash index (-1 when not rehashing) and bucket exponents, for tests. */
void hashtableRehashingInfo(const hashtable *ht, long *rehash_idx, int *exp0, int *exp1);
/* The hash a lookup of `key` uses (calls the type's hashFunction). */
uint64_t hashtableHashKey(const hashtable *ht, const void *key);

/* --- Resize --- */
bool hashtableExpand(hashtable *ht, size_t size);
bool hashtableTryExpand(hashtable *ht, size_t size);
bool hashtableExpandIfNeeded(hashtable *ht);
bool hashtableShrinkIfNeeded(hashtable *ht);

/* --- Lookup and modification --- */
/* true and *found (optional) if present. */
bool hashtableFind(hashtable *ht, const void *key, void **found);
/* Same with a precomputed hash (hash once, reuse: the lookahead and load variants). */
bool hashtableFindWithHash(hashtable *ht, const void *key, uint64_t hash, void **found);
/* Pointer to the slot holding the entry, to replace it in place; NULL if absent. */
void **hashtableFindRef(hashtable *ht, const void *key);
void **hashtableFindRefWithHash(hashtable *ht, const void *key, uint64_t hash);
/* false if an entry with the same key exists. */
bool hashtableAdd(hashtable *ht, void *entry);
/* Add, or return the existing entry in *existing (optional) and false. */
bool hashtableAddOrFind(hashtable *ht, void *entry, void **existing);
/* Two-phase insert.  Phase 1: false (and *existing) if the key exists; else
 * fills *position.  No other call on ht may come between the phases. */
bool hashtableFindPositionForInsert(hashtable *ht, const void *key, hashtablePosition *position,
                                    void **existing);
bool hashtableFindPositionForInsertWithHash(hashtable *ht, const void *key, uint64_t hash,
                                            hashtablePosition *position, void **existing);
void hashtableInsertAtPosition(hashtable *ht, void *entry, hashtablePosition *position);
/* Remove without destructor; *popped (optional) gets the entry. */
bool hashtablePop(hashtable *ht, const void *key, void **popped);
/* Remove and call the entry destructor. */
bool hashtableDelete(hashtable *ht, const void *key);
/* Replace an entry that was reallocated (matched by tag + pointer identity). */
bool hashtableReplaceReallocatedEntry(hashtable *ht, const void *old_entry, void *new_entry);
/* The #2311 helper (load variants): prefetch the bucket an insert of a key with
 * this hash would probe first. */
void hashtablePrefetchBucket(hashtable *ht, uint64_t hash);

/* --- Scan (reverse-binary cursor; every entry present for the whole scan is
 * returned at least once, even across resizes) --- */
size_t hashtableScan(hashtable *ht, size_t cursor, hashtableScanFunction fn, void *privdata);

/* --- Iterator --- */
void hashtableInitIterator(hashtableIterator *iter, hashtable *ht, uint8_t flags);
void hashtableSetIteratorPrefetch(hashtableIterator *iter, hashtableIterPrefetch mode);
bool hashtableNext(hashtableIterator *iter, void **elemptr);
void hashtableResetIterator(hashtableIterator *iter);

/* --- Incremental find: Init / Step / GetResult --- */
void hashtableIncrementalFindInit(hashtableIncrementalFindState *state, hashtable *ht, const void *key);
void hashtableIncrementalFindInitWithHash(hashtableIncrementalFindState *state, hashtable *ht,
                                          const void *key, uint64_t hash);
/* One step: at most one prefetch.  true = more work, false = done. */
bool hashtableIncrementalFindStep(hashtableIncrementalFindState *state);
/* true and *found if the key was found. */
bool hashtableIncrementalFindGetResult(hashtableIncrementalFindState *state, void **found);

/* --- Validation --- */
int hashtableCheckValid(hashtable *ht, char *err, size_t errlen);

#endif /* KS_HASHTABLE_H */
