/*
 * table.h -- the table-dispatch layer: one vtable per keyspace table backend.
 *
 * The keyspace (db.c) never calls hashtable.c or dict.c directly; it goes
 * through a ksTableOps chosen at ksCreate by `table=hashtable|dict`.  The
 * Valkey hashtable backend lives in table_hashtable.c; the Redis dict backend
 * (dict.c) provides `const ksTableOps ksDictTableOps` in table_dict.c.
 *
 * Entries are opaque pointers (keyspace objects: object.h).  Keys are sds.
 * The keyspace computes each lookup key's hash once (SipHash-1-2) and passes
 * it in; backends never hash a lookup key themselves.  Stored keys are hashed
 * through ksEntryHash() (object.h) when rehashing needs it.
 *
 * Every callback is required unless marked optional.
 */
#ifndef KS_TABLE_H
#define KS_TABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "arena.h"
#include "emit.h"

typedef struct ksKeyspace ksKeyspace;

/* Opaque per-key state of a backend's batched-prefetch step machine. */
typedef struct { uint64_t opaque[16]; } ksFindState;
/* Opaque two-phase insert position. */
typedef struct { uint64_t opaque[8]; } ksInsertPos;
/* Opaque iterator. */
typedef struct { uint64_t opaque[24]; } ksTableIter;

typedef void (*ksScanFn)(void *privdata, void *entry);

/* Iteration prefetch modes (`iterate=` variant), interpreted per backend. */
enum { KS_ITER_PREFETCH_NONE = 0, KS_ITER_PREFETCH_NEXT_BUCKET = 1, KS_ITER_PREFETCH_VALKEY = 2 };
#define KS_ITER_SAFE 1
#define KS_ITER_PREFETCH_VALUES 2

typedef struct ksTableOps {
    const char *name;
    /* A new empty table whose entries are keyspace objects of ks. */
    void *(*create)(ksKeyspace *ks);
    /* Free the table and (if free_entries) every entry via ksEntryFree. */
    void (*release)(ksKeyspace *ks, void *t, int free_entries);
    size_t (*size)(const void *t);
    /* Lookup with a precomputed hash; runs rehash steps as the backend does. */
    bool (*find)(void *t, const void *key, uint64_t hash, void **found);
    /* Address of the slot holding the entry (to replace it); NULL if absent.
     * Optional when findLink and setAtLink are given (the keyspace then
     * replaces through them). */
    void **(*findRef)(void *t, const void *key, uint64_t hash);
    /* Optional pair, Redis's link API (dict.c dictFindLink / dictSetKeyAtLink):
     * findLink is `find` that also keeps in *link the link of the match or, on
     * a miss, of the bucket an insert goes to (unset if the table is empty);
     * setAtLink writes through it, with no other call on t in between:
     * new_item inserts (finding the bucket again if the table resized or the
     * link is unset), else replaces the matched entry in place.  The keyspace
     * uses them for every lookup and write when present: one walk per SET. */
    bool (*findLink)(void *t, const void *key, uint64_t hash, void **found, ksInsertPos *link);
    void (*setAtLink)(void *t, void *entry, ksInsertPos *link, bool new_item);
    /* Optional: legacy entries carry a `next` field the table chains through
     * (Redis 7's dictEntry{key, v, next}); the keyspace allocates it. */
    bool legacy_entry_is_node;
    /* Two-phase insert (no other call on t in between). */
    bool (*findPositionForInsert)(void *t, const void *key, uint64_t hash, ksInsertPos *pos, void **existing);
    void (*insertAtPosition)(void *t, void *entry, ksInsertPos *pos);
    /* Remove without freeing; *popped gets the entry. */
    bool (*pop)(void *t, const void *key, uint64_t hash, void **popped);
    /* Batched lookup step machine: Init / Step (one prefetch, true = more) / Result. */
    void (*findInit)(ksFindState *s, void *t, const void *key, uint64_t hash);
    bool (*findStep)(ksFindState *s);
    bool (*findResult)(ksFindState *s, void **found);
    /* true if findStep itself prefetches a found entry's value (the Redis
     * dictPrefetcher's ENTRY_VALUE state); false: the driver does it after
     * findResult (Valkey memory_prefetch.c PREFETCH_VALUE). */
    bool find_prefetches_value;
    /* Prefetch the bucket an insert with this hash goes to (load variants). */
    void (*prefetchBucket)(void *t, uint64_t hash);
    /* Iterator; prefetch is a KS_ITER_PREFETCH_* mode, flags KS_ITER_*. */
    void (*iterInit)(ksTableIter *it, void *t, int flags, int prefetch);
    bool (*iterNext)(ksTableIter *it, void **entry);
    void (*iterReset)(ksTableIter *it);
    size_t (*scan)(void *t, size_t cursor, ksScanFn fn, void *privdata);
    /* Up to n rehash steps (one bucket each; Valkey rehashStep, Redis
     * dictRehash(d, 1)); returns true while rehashing remains.  The cron's. */
    bool (*rehashSteps)(void *t, size_t n);
    /* Grow to hold n entries (snapshot RESIZEDB hint); optional. */
    void (*expand)(void *t, size_t n);
    /* Bytes of table structure (not entries). */
    size_t (*memUsage)(const void *t);
    /* true while rehashing paused (iterator/scan); then the kvstore keeps empty tables. */
    bool (*isRehashingPaused)(const void *t);
    /* 0 if valid, else -1 and a message. */
    int (*checkValid)(void *t, char *err, size_t errlen);
} ksTableOps;

extern const ksTableOps ksHashtableTableOps;
extern const ksTableOps ksDictTableOps;

#endif /* KS_TABLE_H */
