/*
 * hashtable.c -- Valkey's hashtable: cache-line buckets, chaining, incremental
 * rehashing, as a traced reference model.
 *
 * Features (as upstream valkey-io/valkey src/hashtable.c)
 *   - 64-byte buckets with 7 entry pointers, one presence bit and one
 *     one-byte hash tag per slot; full buckets grow a chain of child buckets.
 *   - Power-of-two tables; the bucket index is the low hash bits, the tag the
 *     top 8 bits.
 *   - Incremental rehashing between two tables: one bucket index per step, a
 *     step on every read (policy ALLOW) or write (policy AVOID).
 *   - Two-phase insert, pop/delete with hole filling, safe and unsafe
 *     (fingerprinted) iterators with the #1501 prefetching, reverse-binary scan,
 *     and the Init/Step/GetResult incremental find used for batched prefetching.
 *
 * Design
 *
 *   Bucket (64 bytes, one cache line):
 *
 *     byte 0       1 ..... 7    8                                    63
 *    +-+-------+-------------+-----------------------------------------+
 *    |c|presnc | hashes[7]   | entries[7]  (7 x 8-byte pointers)       |
 *    +-+-------+-------------+-----------------------------------------+
 *     c = chained (bit 0), presence bit i+1 = slot i filled
 *
 *   Chaining: a full bucket that needs another slot moves entry 6 to a new
 *   child bucket and stores the child pointer in entries[6] (chained = 1):
 *
 *     table[idx] -> [e0 e1 e2 e3 e4 e5 |child] -> [e6 .. .. .. .. .. ..]
 *
 *   Rehashing: tables[0] (old) and tables[1] (new).  rehash_idx is the next
 *   old bucket index to move; indexes below it are empty in the old table, so
 *   lookups skip them.  Inserts during rehashing go to the new table.
 *
 *     tables[0]: [moved][moved][ rehash_idx -> ... still here ... ]
 *     tables[1]: [ entries moved so far, and every new insert     ]
 *
 * Tracing: each operation records reading the table struct (table_meta), each
 * bucket line it reads (bucket / child_bucket, dependent on the pointer that
 * located it), entries through the type callbacks (object/key, dependent on
 * the bucket load), and the stores it makes.  Native builds record nothing.
 *
 * Conventions
 *   - Public functions and types: prefix `hashtable`, camelCase (Valkey names).
 *   - Internal functions and types: no prefix, static.
 *   - Macros: upper case.  Traced accesses: KS_LOAD/KS_STORE/KS_PREFETCH (emit.h).
 *
 * Credits: the Valkey hashtable design (Viktor Söderqvist, Rain Valentine and
 * the Valkey contributors), inspired by "Swiss tables" (Google).  Rewritten
 * from the published design, not copied.
 */
#include "hashtable.h"
#include "fingerprint.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* --- Constants ------------------------------------------------------------- */

#define ENTRIES_PER_BUCKET 7
#define BUCKET_SIZE 64
/* Fill factor.  After a resize a table has ceil(n * 5 / 32) buckets rounded
 * up to a power of two; the fullest case is 32 / 5 / 7 = 91.43% of slots. */
#define BUCKET_FACTOR 5
#define BUCKET_DIVISOR 32
#define MAX_FILL_PERCENT_SOFT 100 /* grow above this fill (policy ALLOW) */
#define MAX_FILL_PERCENT_HARD 500 /* grow above this fill (AVOID/FORBID) */
#define MIN_FILL_PERCENT_SOFT 13  /* shrink below this fill (ALLOW) */
#define MIN_FILL_PERCENT_HARD 3   /* shrink below this fill (AVOID/FORBID) */

static_assert(100 * BUCKET_DIVISOR / BUCKET_FACTOR / ENTRIES_PER_BUCKET <= MAX_FILL_PERCENT_SOFT,
              "fill after resize stays below the grow threshold");

/* --- Types ----------------------------------------------------------------- */

typedef struct bucket {
    uint8_t chained : 1;
    uint8_t presence : ENTRIES_PER_BUCKET;
    uint8_t hashes[ENTRIES_PER_BUCKET];
    void *entries[ENTRIES_PER_BUCKET];
} bucket;

static_assert(sizeof(bucket) == BUCKET_SIZE, "bucket is one cache line");
static_assert(offsetof(bucket, entries) == 8, "entries follow the 8 metadata bytes");

struct hashtable {
    hashtableType *type;
    ssize_t rehash_idx;     /* -1 = not rehashing */
    bucket *tables[2];      /* 0 = main, 1 = rehashing target */
    size_t used[2];         /* entries per table */
    int8_t bucket_exp[2];   /* buckets = 1 << exp; -1 = no table */
    int16_t pause_rehash;   /* > 0: rehashing paused */
    int16_t pause_auto_shrink;
    size_t child_buckets[2];
    ksArena *arena;
    int16_t safe_iterators; /* live safe iterators */
};

typedef struct {
    hashtable *ht;
    bucket *bucket;
    long index;
    uint16_t pos_in_bucket;
    uint8_t table;
    uint8_t flags;
    uint8_t prefetch;
    uint8_t started;
    uint64_t fingerprint;
    size_t safe_used; /* used count when the current index was entered */
    ksLoadId bucket_load;
    ksLoadId meta_load;
    uint64_t spare[2];
} iter;

static_assert(sizeof(iter) <= sizeof(hashtableIterator), "opaque iterator covers iter");

typedef struct {
    bucket *bucket;
    uint16_t pos_in_bucket;
    uint16_t table_index;
    uint64_t spare[3];
} position;

static_assert(sizeof(position) <= sizeof(hashtablePosition), "opaque position covers position");

typedef enum {
    HASHTABLE_NEXT_BUCKET,
    HASHTABLE_NEXT_ENTRY,
    HASHTABLE_CHECK_ENTRY,
    HASHTABLE_FOUND,
    HASHTABLE_NOT_FOUND,
} incrementalFindStateEnum;

typedef struct {
    hashtable *ht;
    const void *key;
    uint64_t hash;
    bucket *bucket;
    uint8_t state;
    uint8_t table;
    uint16_t pos;
    ksLoadId bucket_load; /* traced: load that read the current bucket */
    ksLoadId entry_load;  /* traced: prefetch/load that located the candidate */
    ksLoadId meta_load;
    ksLoadId bucket_dep;  /* traced: load that produced the bucket address */
} incrementalFind;

static_assert(sizeof(incrementalFind) <= sizeof(hashtableIncrementalFindState), "opaque find state");

/* --- Globals --------------------------------------------------------------- */

static hashtableResizePolicy resize_policy = HASHTABLE_RESIZE_ALLOW;

void hashtableSetResizePolicy(hashtableResizePolicy policy) { resize_policy = policy; }
hashtableResizePolicy hashtableGetResizePolicy(void) { return resize_policy; }

/* --- Small helpers --------------------------------------------------------- */

static inline size_t numBuckets(int exp) { return exp == -1 ? 0 : (size_t)1 << exp; }
static inline size_t expToMask(int exp) { return exp == -1 ? 0 : numBuckets(exp) - 1; }
static inline uint8_t highBits(uint64_t hash) { return (uint8_t)(hash >> 56); }
static inline int numBucketPositions(const bucket *b) { return ENTRIES_PER_BUCKET - (b->chained ? 1 : 0); }
static inline bool isPositionFilled(const bucket *b, int pos) { return (b->presence >> pos) & 1; }
static inline bool bucketIsFull(const bucket *b) {
    return b->presence == (1 << numBucketPositions(b)) - 1;
}
static inline bucket *bucketNext(const bucket *b) {
    return b->chained ? (bucket *)b->entries[ENTRIES_PER_BUCKET - 1] : NULL;
}
static inline bool isRehashing(const hashtable *ht) { return ht->rehash_idx != -1; }
static inline uint8_t bucketTag(int depth) { return depth == 0 ? KVT_TAG_BUCKET : KVT_TAG_CHILD_BUCKET; }

/* ceil(n * 5 / 32) buckets, rounded up to a power of two; -1 for 0 entries. */
static int nextBucketExp(size_t min_capacity) {
    if (min_capacity == 0) return -1;
    if (min_capacity > SIZE_MAX / BUCKET_FACTOR) return -1;
    size_t min_buckets = (min_capacity * BUCKET_FACTOR - 1) / BUCKET_DIVISOR + 1;
    if (min_buckets <= 1) return 0;
    return 64 - __builtin_clzll(min_buckets - 1);
}

static inline ksLoadId loadMeta(const hashtable *ht, uint16_t site) {
    if (ht->type->outside_keyspace) return KS_LOAD(ht, sizeof(*ht), ht->type->trace_tag, site, 0);
    return KS_LOAD(ht, sizeof(*ht), KVT_TAG_TABLE_META, site, KS_TAKE_TABLE_DEP());
}

/* The tag of a find's bucket load: the keyspace's, or the outside table's own. */
static inline uint8_t findTag(const hashtable *ht, uint8_t tag) {
    return ht->type->outside_keyspace ? ht->type->trace_tag : tag;
}

static uint64_t hashKey(const hashtable *ht, const void *key) {
    if (ht->type->hashFunction) return ht->type->hashFunction(key);
    uint64_t x = (uint64_t)(uintptr_t)key; /* no hash function: hash the pointer */
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return x;
}

static const void *entryGetKey(const hashtable *ht, const void *entry, ksLoadId dep, ksLoadId *key_dep) {
    if (ht->type->entryGetKey) return ht->type->entryGetKey(entry, dep, key_dep);
    if (key_dep) *key_dep = dep;
    return entry;
}

static uint64_t hashEntry(const hashtable *ht, const void *entry, ksLoadId dep) {
    if (ht->type->entryHash) return ht->type->entryHash(entry, dep);
    return hashKey(ht, entryGetKey(ht, entry, dep, NULL));
}

static int compareKeys(const hashtable *ht, const void *key1, const void *key2, ksLoadId dep) {
    if (ht->type->keyCompare) return ht->type->keyCompare(key1, key2, dep);
    return key1 != key2;
}

static bucket *allocBuckets(hashtable *ht, size_t n) {
    return ksArenaCalloc(ht->arena, n * sizeof(bucket));
}

/* --- Resize ---------------------------------------------------------------- */

static void rehashingCompleted(hashtable *ht) {
    if (ht->tables[0]) ksArenaFree(ht->arena, ht->tables[0]);
    ht->tables[0] = ht->tables[1];
    ht->used[0] = ht->used[1];
    ht->bucket_exp[0] = ht->bucket_exp[1];
    ht->child_buckets[0] = ht->child_buckets[1];
    ht->tables[1] = NULL;
    ht->used[1] = 0;
    ht->bucket_exp[1] = -1;
    ht->child_buckets[1] = 0;
    ht->rehash_idx = -1;
    KS_STORE(ht, sizeof(*ht), KVT_TAG_TABLE_META, KS_SITE_HT_META_STORE, 0);
    if (ht->type->rehashingCompleted) ht->type->rehashingCompleted(ht);
}

static void bucketConvertToChained(hashtable *ht, bucket *b, int table) {
    assert(!b->chained);
    int pos = ENTRIES_PER_BUCKET - 1;
    bucket *child = ksArenaCalloc(ht->arena, sizeof(bucket));
    child->entries[0] = b->entries[pos];
    child->hashes[0] = b->hashes[pos];
    child->presence = 1;
    b->presence &= (uint8_t)~(1u << pos);
    b->chained = 1;
    b->entries[pos] = child;
    ht->child_buckets[table]++;
    KS_STORE(child, 16, KVT_TAG_CHILD_BUCKET, KS_SITE_HT_INSERT_STORE, 0);
    KS_STORE(b, BUCKET_SIZE, KVT_TAG_BUCKET, KS_SITE_HT_INSERT_STORE, 0);
}

static void bucketConvertToUnchained(bucket *b) {
    assert(b->chained);
    b->chained = 0;
    b->entries[ENTRIES_PER_BUCKET - 1] = NULL;
}

/* Bucket and position for inserting an entry with `hash`: table 1 while
 * rehashing, else 0; walk the chain while full, chaining the last one. */
static bucket *findBucketForInsert(hashtable *ht, uint64_t hash, int *pos_out, int *table_out,
                                   ksLoadId meta) {
    int table = isRehashing(ht) ? 1 : 0;
    assert(ht->tables[table] != NULL);
    size_t idx = hash & expToMask(ht->bucket_exp[table]);
    bucket *b = &ht->tables[table][idx];
    int depth = 0;
    KS_ID_VAR(lb) = KS_LOAD(b, BUCKET_SIZE, KVT_TAG_BUCKET, KS_SITE_HT_INSERT_BUCKET, meta);
    while (bucketIsFull(b)) {
        if (!b->chained) bucketConvertToChained(ht, b, table);
        b = bucketNext(b);
        depth++;
        lb = KS_LOAD(b, BUCKET_SIZE, KVT_TAG_CHILD_BUCKET, KS_SITE_HT_INSERT_BUCKET, lb);
    }
    (void)depth;
    int pos = __builtin_ctz(~(unsigned)b->presence);
    assert(pos < numBucketPositions(b));
    *pos_out = pos;
    *table_out = table;
    return b;
}

/* Move every entry of old bucket index rehash_idx (and its chain) to table 1. */
static void rehashStep(hashtable *ht) {
    assert(isRehashing(ht));
    size_t idx = (size_t)ht->rehash_idx;
    bucket *b = &ht->tables[0][idx];
    KS_ID_VAR(lm) = loadMeta(ht, KS_SITE_HT_META);
    KS_ID_VAR(lb) = KS_LOAD(b, BUCKET_SIZE, KVT_TAG_BUCKET, KS_SITE_HT_REHASH_BUCKET, lm);
    bool expanding = ht->bucket_exp[1] > ht->bucket_exp[0];
    int depth = 0;
    while (b) {
        for (int pos = 0; pos < numBucketPositions(b); pos++) {
            if (!isPositionFilled(b, pos)) continue;
            void *entry = b->entries[pos];
            uint8_t h2 = b->hashes[pos];
            /* Shrinking: the new index is the low bits of the old one. */
            uint64_t hash = expanding ? hashEntry(ht, entry, lb) : idx;
            int dpos, dtable;
            bucket *dst = findBucketForInsert(ht, hash, &dpos, &dtable, lm);
            dst->entries[dpos] = entry;
            dst->hashes[dpos] = h2;
            dst->presence |= (uint8_t)(1u << dpos);
            KS_STORE(dst, BUCKET_SIZE, KVT_TAG_BUCKET, KS_SITE_HT_REHASH_STORE, 0);
            ht->used[0]--;
            ht->used[1]++;
        }
        bucket *next = bucketNext(b);
        if (depth > 0) {
            ksArenaFree(ht->arena, b);
            ht->child_buckets[0]--;
        } else {
            b->chained = 0;
            b->presence = 0;
            KS_STORE(b, 1, KVT_TAG_BUCKET, KS_SITE_HT_REHASH_STORE, 0);
        }
        b = next;
        depth++;
        if (b) lb = KS_LOAD(b, BUCKET_SIZE, KVT_TAG_CHILD_BUCKET, KS_SITE_HT_REHASH_BUCKET, lb);
    }
    ht->rehash_idx++;
    KS_STORE(&ht->rehash_idx, 8, KVT_TAG_TABLE_META, KS_SITE_HT_META_STORE, 0);
    if ((size_t)ht->rehash_idx >= numBuckets(ht->bucket_exp[0])) rehashingCompleted(ht);
}

static void rehashStepOnReadIfNeeded(hashtable *ht) {
    if (!isRehashing(ht) || ht->pause_rehash) return;
    if (resize_policy != HASHTABLE_RESIZE_ALLOW) return;
    rehashStep(ht);
}

static void rehashStepOnWriteIfNeeded(hashtable *ht) {
    if (!isRehashing(ht) || ht->pause_rehash) return;
    if (resize_policy != HASHTABLE_RESIZE_ALLOW) rehashStep(ht);
}

/* Allocate a new table for min_capacity entries and start rehashing into it.
 * Returns false if not resized (same size, policy, or allocation refused). */
static bool resize(hashtable *ht, size_t min_capacity) {
    int exp = nextBucketExp(min_capacity);
    size_t n = numBuckets(exp);
    if (exp != -1 && n * sizeof(bucket) / sizeof(bucket) != n) return false; /* overflow */
    int old_exp = ht->bucket_exp[isRehashing(ht) ? 1 : 0];
    if (exp == old_exp) return false;
    if (resize_policy == HASHTABLE_RESIZE_FORBID && ht->tables[0]) return false;
    if (isRehashing(ht)) {
        /* Finish the ongoing rehash first (Valkey does the same when forced). */
        while (isRehashing(ht)) rehashStep(ht);
    }
    ht->tables[1] = exp == -1 ? NULL : allocBuckets(ht, n);
    ht->bucket_exp[1] = (int8_t)exp;
    ht->used[1] = 0;
    ht->child_buckets[1] = 0;
    ht->rehash_idx = 0;
    KS_STORE(ht, sizeof(*ht), KVT_TAG_TABLE_META, KS_SITE_HT_META_STORE, 0);
    /* Nothing to move: swap at once. */
    if (ht->tables[0] == NULL || (ht->used[0] == 0 && ht->child_buckets[0] == 0)) {
        rehashingCompleted(ht);
    } else if (ht->type->instant_rehashing) {
        while (isRehashing(ht)) rehashStep(ht);
    }
    return true;
}

bool hashtableExpand(hashtable *ht, size_t size) {
    if (size < hashtableSize(ht)) return false;
    return resize(ht, size);
}

bool hashtableTryExpand(hashtable *ht, size_t size) { return hashtableExpand(ht, size); }

bool hashtableExpandIfNeeded(hashtable *ht) {
    size_t min_capacity = ht->used[0] + ht->used[1] + 1;
    size_t num_buckets = numBuckets(ht->bucket_exp[isRehashing(ht) ? 1 : 0]);
    if (num_buckets == 0) return resize(ht, min_capacity);
    size_t cur_capacity = num_buckets * ENTRIES_PER_BUCKET;
    int limit = resize_policy == HASHTABLE_RESIZE_ALLOW ? MAX_FILL_PERCENT_SOFT : MAX_FILL_PERCENT_HARD;
    if (min_capacity * 100 <= cur_capacity * (size_t)limit) return false;
    if (isRehashing(ht)) return false; /* no expand while rehashing */
    return resize(ht, min_capacity);
}

bool hashtableShrinkIfNeeded(hashtable *ht) {
    if (isRehashing(ht) || ht->pause_auto_shrink || resize_policy == HASHTABLE_RESIZE_FORBID) return false;
    size_t num_buckets = numBuckets(ht->bucket_exp[0]);
    if (num_buckets <= 1) return false;
    size_t cur_capacity = num_buckets * ENTRIES_PER_BUCKET;
    int limit = resize_policy == HASHTABLE_RESIZE_ALLOW ? MIN_FILL_PERCENT_SOFT : MIN_FILL_PERCENT_HARD;
    if (ht->used[0] * 100 > cur_capacity * (size_t)limit) return false;
    return resize(ht, ht->used[0] ? ht->used[0] : 1);
}

/* --- Lifecycle ------------------------------------------------------------- */

hashtable *hashtableCreate(hashtableType *type, ksArena *arena) {
    hashtable *ht = ksArenaCalloc(arena, sizeof(*ht));
    ht->type = type;
    ht->arena = arena;
    ht->rehash_idx = -1;
    ht->bucket_exp[0] = ht->bucket_exp[1] = -1;
    return ht;
}

static void freeTable(hashtable *ht, int table) {
    if (!ht->tables[table]) return;
    size_t n = numBuckets(ht->bucket_exp[table]);
    size_t start = (table == 0 && isRehashing(ht)) ? (size_t)ht->rehash_idx : 0;
    for (size_t i = 0; i < n; i++) {
        bucket *b = &ht->tables[table][i];
        int depth = 0;
        while (b) {
            if (i >= start || depth > 0) {
                for (int pos = 0; pos < numBucketPositions(b); pos++) {
                    if (isPositionFilled(b, pos) && ht->type->entryDestructor) ht->type->entryDestructor(b->entries[pos]);
                }
            }
            bucket *next = bucketNext(b);
            if (depth > 0) ksArenaFree(ht->arena, b);
            b = next;
            depth++;
        }
    }
    ksArenaFree(ht->arena, ht->tables[table]);
    ht->tables[table] = NULL;
}

void hashtableRelease(hashtable *ht) {
    if (!ht) return;
    freeTable(ht, 0);
    freeTable(ht, 1);
    ksArenaFree(ht->arena, ht);
}

hashtableType *hashtableGetType(const hashtable *ht) { return ht->type; }
size_t hashtableSize(const hashtable *ht) { return ht->used[0] + ht->used[1]; }
size_t hashtableBuckets(const hashtable *ht) {
    return numBuckets(ht->bucket_exp[0]) + numBuckets(ht->bucket_exp[1]);
}
size_t hashtableChainedBuckets(const hashtable *ht, int table) { return ht->child_buckets[table]; }
size_t hashtableMemUsage(const hashtable *ht) {
    return sizeof(*ht) + (hashtableBuckets(ht) + ht->child_buckets[0] + ht->child_buckets[1]) * sizeof(bucket);
}
bool hashtableIsRehashing(const hashtable *ht) { return isRehashing(ht); }
bool hashtableIsRehashingPaused(const hashtable *ht) { return ht->pause_rehash > 0; }
void hashtablePauseRehashing(hashtable *ht) { ht->pause_rehash++; }
void hashtableResumeRehashing(hashtable *ht) {
    assert(ht->pause_rehash > 0);
    ht->pause_rehash--;
}
void hashtablePauseAutoShrink(hashtable *ht) { ht->pause_auto_shrink++; }
void hashtableResumeAutoShrink(hashtable *ht) {
    assert(ht->pause_auto_shrink > 0);
    ht->pause_auto_shrink--;
    if (ht->pause_auto_shrink == 0) hashtableShrinkIfNeeded(ht);
}
void hashtableRehashSteps(hashtable *ht, size_t n) {
    while (n-- && isRehashing(ht) && !ht->pause_rehash) rehashStep(ht);
}
void hashtableRehashingInfo(const hashtable *ht, long *rehash_idx, int *exp0, int *exp1) {
    if (rehash_idx) *rehash_idx = (long)ht->rehash_idx;
    if (exp0) *exp0 = ht->bucket_exp[0];
    if (exp1) *exp1 = ht->bucket_exp[1];
}
uint64_t hashtableHashKey(const hashtable *ht, const void *key) { return hashKey(ht, key); }

/* --- Find ------------------------------------------------------------------ */

/* The bucket holding key (and its position and table), or NULL.  Runs at most
 * one rehash step first, as Valkey's findBucket. */
static bucket *findBucket(hashtable *ht, uint64_t hash, const void *key, int *pos_out, int *table_out) {
    if (hashtableSize(ht) == 0) return NULL;
    uint8_t h2 = highBits(hash);
    rehashStepOnReadIfNeeded(ht);
    KS_ID_VAR(lm) = loadMeta(ht, KS_SITE_HT_META);
    for (int table = 0; table <= 1; table++) {
        if (ht->used[table] == 0) continue;
        size_t idx = hash & expToMask(ht->bucket_exp[table]);
        if (table == 0 && isRehashing(ht) && idx < (size_t)ht->rehash_idx) continue;
        bucket *b = &ht->tables[table][idx];
        KS_ID_VAR(lb) = KS_LOAD(b, BUCKET_SIZE, findTag(ht, KVT_TAG_BUCKET), KS_SITE_HT_FIND_BUCKET, lm);
        do {
            for (int pos = 0; pos < numBucketPositions(b); pos++) {
                if (isPositionFilled(b, pos) && b->hashes[pos] == h2) {
                    KS_ID_VAR(kd) = 0;
                    const void *ekey = entryGetKey(ht, b->entries[pos], lb, &kd);
                    if (compareKeys(ht, key, ekey, kd) == 0) {
                        if (!ht->type->outside_keyspace) KS_SET_ENTRY_DEP(lb); /* the entry pointer came from this bucket */
                        *pos_out = pos;
                        *table_out = table;
                        return b;
                    }
                }
            }
            b = bucketNext(b);
            if (b) lb = KS_LOAD(b, BUCKET_SIZE, findTag(ht, KVT_TAG_CHILD_BUCKET), KS_SITE_HT_FIND_CHILD, lb);
        } while (b);
    }
    return NULL;
}

bool hashtableFindWithHash(hashtable *ht, const void *key, uint64_t hash, void **found) {
    int pos, table;
    bucket *b = findBucket(ht, hash, key, &pos, &table);
    if (!b) return false;
    if (found) *found = b->entries[pos];
    return true;
}

bool hashtableFind(hashtable *ht, const void *key, void **found) {
    return hashtableFindWithHash(ht, key, hashKey(ht, key), found);
}

void **hashtableFindRefWithHash(hashtable *ht, const void *key, uint64_t hash) {
    int pos, table;
    bucket *b = findBucket(ht, hash, key, &pos, &table);
    return b ? &b->entries[pos] : NULL;
}

void **hashtableFindRef(hashtable *ht, const void *key) {
    return hashtableFindRefWithHash(ht, key, hashKey(ht, key));
}

/* --- Insert ---------------------------------------------------------------- */

static void insert(hashtable *ht, uint64_t hash, void *entry) {
    hashtableExpandIfNeeded(ht);
    rehashStepOnWriteIfNeeded(ht);
    KS_ID_VAR(lm) = loadMeta(ht, KS_SITE_HT_META);
    int pos, table;
    bucket *b = findBucketForInsert(ht, hash, &pos, &table, lm);
    b->entries[pos] = entry;
    b->presence |= (uint8_t)(1u << pos);
    b->hashes[pos] = highBits(hash);
    ht->used[table]++;
    KS_STORE(b, BUCKET_SIZE, KVT_TAG_BUCKET, KS_SITE_HT_INSERT_STORE, 0);
    KS_STORE(&ht->used[table], 8, KVT_TAG_TABLE_META, KS_SITE_HT_META_STORE, 0);
}

bool hashtableAddOrFind(hashtable *ht, void *entry, void **existing) {
    const void *key = entryGetKey(ht, entry, 0, NULL);
    uint64_t hash = hashKey(ht, key);
    int pos, table;
    bucket *b = findBucket(ht, hash, key, &pos, &table);
    if (b) {
        if (existing) *existing = b->entries[pos];
        return false;
    }
    insert(ht, hash, entry);
    return true;
}

bool hashtableAdd(hashtable *ht, void *entry) { return hashtableAddOrFind(ht, entry, NULL); }

bool hashtableFindPositionForInsertWithHash(hashtable *ht, const void *key, uint64_t hash,
                                            hashtablePosition *p, void **existing) {
    position *pos = (position *)p;
    int ipos, table;
    bucket *b = findBucket(ht, hash, key, &ipos, &table);
    if (b) {
        if (existing) *existing = b->entries[ipos];
        return false;
    }
    hashtableExpandIfNeeded(ht);
    rehashStepOnWriteIfNeeded(ht);
    KS_ID_VAR(lm) = loadMeta(ht, KS_SITE_HT_META);
    b = findBucketForInsert(ht, hash, &ipos, &table, lm);
    assert(!isPositionFilled(b, ipos));
    /* The tag is written now; the presence bit in phase 2. */
    b->hashes[ipos] = highBits(hash);
    pos->bucket = b;
    pos->pos_in_bucket = (uint16_t)ipos;
    pos->table_index = (uint16_t)table;
    return true;
}

bool hashtableFindPositionForInsert(hashtable *ht, const void *key, hashtablePosition *p, void **existing) {
    return hashtableFindPositionForInsertWithHash(ht, key, hashKey(ht, key), p, existing);
}

void hashtableInsertAtPosition(hashtable *ht, void *entry, hashtablePosition *p) {
    position *pos = (position *)p;
    bucket *b = pos->bucket;
    assert(!isPositionFilled(b, pos->pos_in_bucket));
    b->presence |= (uint8_t)(1u << pos->pos_in_bucket);
    b->entries[pos->pos_in_bucket] = entry;
    ht->used[pos->table_index]++;
    KS_STORE(b, BUCKET_SIZE, KVT_TAG_BUCKET, KS_SITE_HT_INSERT_STORE, 0);
    KS_STORE(&ht->used[pos->table_index], 8, KVT_TAG_TABLE_META, KS_SITE_HT_META_STORE, 0);
}

/* --- Delete ---------------------------------------------------------------- */

/* Remove the last bucket of a chain (empty or with one entry left, which moves
 * into the freed slot 6 of before_last). */
static void pruneLastBucket(hashtable *ht, bucket *before_last, bucket *last, int table) {
    assert(before_last->chained && bucketNext(before_last) == last);
    assert(!last->chained);
    assert(last->presence == 0 || __builtin_popcount(last->presence) == 1);
    bucketConvertToUnchained(before_last);
    if (last->presence != 0) {
        int p = __builtin_ctz(last->presence);
        before_last->presence |= (uint8_t)(1u << (ENTRIES_PER_BUCKET - 1));
        before_last->hashes[ENTRIES_PER_BUCKET - 1] = last->hashes[p];
        before_last->entries[ENTRIES_PER_BUCKET - 1] = last->entries[p];
    }
    ht->child_buckets[table]--;
    ksArenaFree(ht->arena, last);
}

/* Fill a hole at `pos` of chained bucket b with an entry from the chain's last
 * bucket, pruning that bucket if it ends up with at most one entry. */
static void fillBucketHole(hashtable *ht, bucket *b, int pos, int table) {
    assert(b->chained && !isPositionFilled(b, pos));
    bucket *before_last = b;
    bucket *last = bucketNext(b);
    while (last->chained) {
        before_last = last;
        last = bucketNext(last);
    }
    if (last->presence != 0) {
        int p = __builtin_ctz(last->presence);
        b->entries[pos] = last->entries[p];
        b->hashes[pos] = last->hashes[p];
        b->presence |= (uint8_t)(1u << pos);
        last->presence &= (uint8_t)~(1u << p);
    }
    if (__builtin_popcount(last->presence) <= 1) pruneLastBucket(ht, before_last, last, table);
}

/* Remove empty children and fill holes (after deletions while paused). */
static void compactBucketChain(hashtable *ht, size_t idx, int table) {
    bucket *b = &ht->tables[table][idx];
    while (b->chained) {
        bucket *next = bucketNext(b);
        if (next->chained && next->presence == 0) {
            b->entries[ENTRIES_PER_BUCKET - 1] = bucketNext(next);
            ksArenaFree(ht->arena, next);
            ht->child_buckets[table]--;
            continue;
        }
        if (!next->chained && __builtin_popcount(next->presence) <= 1) {
            pruneLastBucket(ht, b, next, table);
            continue;
        }
        if (__builtin_popcount(b->presence) < ENTRIES_PER_BUCKET - 1) {
            fillBucketHole(ht, b, __builtin_ctz(~(unsigned)b->presence), table);
            continue;
        }
        b = next;
    }
}

bool hashtablePop(hashtable *ht, const void *key, void **popped) {
    int pos, table;
    bucket *b = findBucket(ht, hashKey(ht, key), key, &pos, &table);
    if (!b) return false;
    if (popped) *popped = b->entries[pos];
    b->presence &= (uint8_t)~(1u << pos);
    ht->used[table]--;
    KS_STORE(b, 1, KVT_TAG_BUCKET, KS_SITE_HT_DELETE_STORE, 0);
    if (b->chained && !hashtableIsRehashingPaused(ht)) fillBucketHole(ht, b, pos, table);
    hashtableShrinkIfNeeded(ht);
    return true;
}

bool hashtableDelete(hashtable *ht, const void *key) {
    void *entry;
    if (!hashtablePop(ht, key, &entry)) return false;
    if (ht->type->entryDestructor) ht->type->entryDestructor(entry);
    return true;
}

bool hashtableReplaceReallocatedEntry(hashtable *ht, const void *old_entry, void *new_entry) {
    const void *key = entryGetKey(ht, new_entry, 0, NULL);
    uint64_t hash = hashKey(ht, key);
    uint8_t h2 = highBits(hash);
    for (int table = 0; table <= 1; table++) {
        if (ht->used[table] == 0) continue;
        size_t idx = hash & expToMask(ht->bucket_exp[table]);
        if (table == 0 && isRehashing(ht) && idx < (size_t)ht->rehash_idx) continue;
        for (bucket *b = &ht->tables[table][idx]; b; b = bucketNext(b)) {
            (void)KS_LOAD(b, BUCKET_SIZE, KVT_TAG_BUCKET, KS_SITE_HT_FIND_BUCKET, 0);
            for (int pos = 0; pos < numBucketPositions(b); pos++) {
                if (isPositionFilled(b, pos) && b->hashes[pos] == h2 && b->entries[pos] == old_entry) {
                    b->entries[pos] = new_entry;
                    KS_STORE(&b->entries[pos], 8, KVT_TAG_BUCKET, KS_SITE_HT_INSERT_STORE, 0);
                    return true;
                }
            }
        }
    }
    return false;
}

void hashtablePrefetchBucket(hashtable *ht, uint64_t hash) {
    KS_ID_VAR(lm) = loadMeta(ht, KS_SITE_HT_META);
    int table = isRehashing(ht) ? 1 : 0;
    if (ht->tables[table] == NULL) return;
    bucket *b = &ht->tables[table][hash & expToMask(ht->bucket_exp[table])];
    KS_PREFETCH(b, KVT_TAG_BUCKET, KS_SITE_HT_PREFETCH_BUCKET, lm);
}

/* --- Scan ------------------------------------------------------------------ */

/* Reverse the bits of a 64-bit word. */
static inline size_t rev(size_t v) {
    uint64_t x = v;
    x = ((x >> 1) & 0x5555555555555555ULL) | ((x & 0x5555555555555555ULL) << 1);
    x = ((x >> 2) & 0x3333333333333333ULL) | ((x & 0x3333333333333333ULL) << 2);
    x = ((x >> 4) & 0x0F0F0F0F0F0F0F0FULL) | ((x & 0x0F0F0F0F0F0F0F0FULL) << 4);
    return (size_t)__builtin_bswap64(x);
}

/* Increment the reversed cursor: set the bits above the mask, reverse, +1, reverse. */
static inline size_t nextCursor(size_t v, size_t mask) {
    v |= ~mask;
    v = rev(v);
    v++;
    return rev(v);
}

/* Emit every filled slot of the chain at idx; compact if the callback deleted. */
static void scanChain(hashtable *ht, size_t idx, int table, hashtableScanFunction fn, void *privdata) {
    size_t used_before = ht->used[table];
    bucket *b = &ht->tables[table][idx];
    KS_ID_VAR(lb) = KS_LOAD(b, BUCKET_SIZE, KVT_TAG_BUCKET, KS_SITE_HT_SCAN_BUCKET, 0);
    while (b) {
        bucket *next = bucketNext(b);
        for (int pos = 0; pos < numBucketPositions(b); pos++) {
            if (isPositionFilled(b, pos)) {
                KS_SET_ENTRY_DEP(lb);
                fn(privdata, b->entries[pos]);
            }
        }
        b = next;
        if (b) lb = KS_LOAD(b, BUCKET_SIZE, KVT_TAG_CHILD_BUCKET, KS_SITE_HT_SCAN_BUCKET, lb);
    }
    if (ht->used[table] < used_before && ht->pause_rehash == 1) compactBucketChain(ht, idx, table);
}

size_t hashtableScan(hashtable *ht, size_t cursor, hashtableScanFunction fn, void *privdata) {
    if (hashtableSize(ht) == 0) return 0;
    hashtablePauseRehashing(ht);
    if (!isRehashing(ht)) {
        size_t mask = expToMask(ht->bucket_exp[0]);
        scanChain(ht, cursor & mask, 0, fn, privdata);
        cursor = nextCursor(cursor, mask);
    } else {
        int small = ht->bucket_exp[0] <= ht->bucket_exp[1] ? 0 : 1;
        int large = 1 - small;
        size_t mask_small = expToMask(ht->bucket_exp[small]);
        size_t mask_large = expToMask(ht->bucket_exp[large]);
        size_t idx = cursor & mask_small;
        if (ht->tables[small] && !(small == 0 && idx < (size_t)ht->rehash_idx)) {
            scanChain(ht, idx, small, fn, privdata);
        }
        /* Every index of the large table that expands the small one's index. */
        do {
            idx = cursor & mask_large;
            if (ht->tables[large] && !(large == 0 && idx < (size_t)ht->rehash_idx)) {
                scanChain(ht, idx, large, fn, privdata);
            }
            cursor = nextCursor(cursor, mask_large);
        } while (cursor & (mask_small ^ mask_large));
    }
    hashtableResumeRehashing(ht);
    return cursor;
}

/* --- Iterator -------------------------------------------------------------- */

/* Thomas Wang's 64-bit mix, folded over the six fields that change when the
 * table is modified. */
static uint64_t fingerprint(const hashtable *ht) {
    uint64_t integers[6];
    integers[0] = (uint64_t)(uintptr_t)ht->tables[0];
    integers[1] = (uint64_t)ht->bucket_exp[0];
    integers[2] = ht->used[0];
    integers[3] = (uint64_t)(uintptr_t)ht->tables[1];
    integers[4] = (uint64_t)ht->bucket_exp[1];
    integers[5] = ht->used[1];
    return ksFingerprintFold(integers);
}

void hashtableInitIterator(hashtableIterator *it, hashtable *ht, uint8_t flags) {
    iter *i = (iter *)it;
    memset(it, 0, sizeof(*it));
    i->ht = ht;
    i->flags = flags;
    i->index = -1;
}

void hashtableSetIteratorPrefetch(hashtableIterator *it, hashtableIterPrefetch mode) {
    ((iter *)it)->prefetch = (uint8_t)mode;
}

static bucket *topBucket(const hashtable *ht, int table, long index) {
    if (index < 0 || (size_t)index >= numBuckets(ht->bucket_exp[table])) return NULL;
    return &ht->tables[table][index];
}

/* Prefetching when the iterator enters bucket b (top-level index `index`). */
static void prefetchOnNewBucket(iter *i, bucket *b) {
    hashtable *ht = i->ht;
    if ((i->flags & HASHTABLE_ITER_PREFETCH_VALUES) && ht->type->entryPrefetchValue &&
        i->prefetch == HASHTABLE_ITER_PREFETCH_VALKEY) {
        for (int pos = 0; pos < numBucketPositions(b); pos++) {
            if (isPositionFilled(b, pos)) ht->type->entryPrefetchValue(b->entries[pos], i->bucket_load);
        }
    }
    if (i->prefetch == HASHTABLE_ITER_PREFETCH_NONE) return;
    bucket *next = b->chained ? bucketNext(b) : topBucket(ht, i->table, i->index + 1);
    if (i->prefetch == HASHTABLE_ITER_PREFETCH_NEXT_BUCKET) {
        if (next) KS_PREFETCH(next, KVT_TAG_BUCKET, KS_SITE_HT_ITER_PREFETCH, b->chained ? i->bucket_load : i->meta_load);
        return;
    }
    /* Valkey (#1501 with the #2394 fix): the entries of the next bucket (whose
     * line was prefetched on the previous call), then the bucket after next. */
    if (!next) return;
    KS_ID_VAR(ln) = KS_LOAD(next, 8, b->chained ? KVT_TAG_CHILD_BUCKET : KVT_TAG_BUCKET, KS_SITE_HT_ITER_PREFETCH,
                            b->chained ? i->bucket_load : i->meta_load);
    for (int pos = 0; pos < numBucketPositions(next); pos++) {
        if (isPositionFilled(next, pos)) {
            KS_ID_VAR(le) = KS_LOAD(&next->entries[pos], 8, b->chained ? KVT_TAG_CHILD_BUCKET : KVT_TAG_BUCKET,
                                    KS_SITE_HT_ITER_PREFETCH, ln);
            KS_PREFETCH(next->entries[pos], KVT_TAG_OBJECT, KS_SITE_HT_ITER_PREFETCH, le);
        }
    }
    bucket *next_next;
    if (next->chained) next_next = bucketNext(next);
    else next_next = topBucket(ht, i->table, b->chained ? i->index + 1 : i->index + 2);
    if (next_next) KS_PREFETCH(next_next, KVT_TAG_BUCKET, KS_SITE_HT_ITER_PREFETCH, next->chained ? ln : i->meta_load);
}

bool hashtableNext(hashtableIterator *it, void **elemptr) {
    iter *i = (iter *)it;
    hashtable *ht = i->ht;
    if (ht == NULL) return false;
    if (!i->started) {
        i->started = 1;
        if (i->flags & HASHTABLE_ITER_SAFE) {
            hashtablePauseRehashing(ht);
            hashtablePauseAutoShrink(ht);
            ht->safe_iterators++;
        } else {
            i->fingerprint = fingerprint(ht);
        }
        i->meta_load = loadMeta(ht, KS_SITE_HT_META);
        i->table = 0;
        i->index = isRehashing(ht) ? (long)ht->rehash_idx - 1 : -1;
        i->bucket = NULL;
        if (ht->tables[0] == NULL) return false;
    }
    while (1) {
        if (i->bucket == NULL) {
            i->index++;
            if ((size_t)i->index >= numBuckets(ht->bucket_exp[i->table])) {
                if (i->table == 0 && isRehashing(ht) && ht->tables[1]) {
                    i->table = 1;
                    i->index = 0;
                } else {
                    return false;
                }
            }
            i->bucket = &ht->tables[i->table][i->index];
            i->pos_in_bucket = 0;
            i->safe_used = ht->used[i->table];
            i->bucket_load = KS_LOAD(i->bucket, BUCKET_SIZE, KVT_TAG_BUCKET, KS_SITE_HT_ITER_BUCKET, i->meta_load);
            prefetchOnNewBucket(i, i->bucket);
        }
        bucket *b = i->bucket;
        while (i->pos_in_bucket < numBucketPositions(b)) {
            int pos = i->pos_in_bucket++;
            if (isPositionFilled(b, pos)) {
                *elemptr = b->entries[pos];
                KS_SET_ENTRY_DEP(i->bucket_load);
                KS_WORK(12); /* per-entry iterator work between bucket reads */
                return true;
            }
        }
        if (b->chained) {
            i->bucket = bucketNext(b);
            i->pos_in_bucket = 0;
            i->bucket_load = KS_LOAD(i->bucket, BUCKET_SIZE, KVT_TAG_CHILD_BUCKET, KS_SITE_HT_ITER_BUCKET, i->bucket_load);
            prefetchOnNewBucket(i, i->bucket);
            continue;
        }
        /* Leaving a top-level index: compact if we are the only pauser and
         * entries were deleted while iterating. */
        if ((i->flags & HASHTABLE_ITER_SAFE) && ht->pause_rehash == 1 && ht->used[i->table] < i->safe_used) {
            compactBucketChain(ht, (size_t)i->index, i->table);
        }
        i->bucket = NULL;
    }
}

void hashtableResetIterator(hashtableIterator *it) {
    iter *i = (iter *)it;
    if (i->ht && i->started) {
        if (i->flags & HASHTABLE_ITER_SAFE) {
            i->ht->safe_iterators--;
            hashtableResumeRehashing(i->ht);
            hashtableResumeAutoShrink(i->ht);
        } else {
            assert(i->fingerprint == fingerprint(i->ht) && "unsafe iterator: table modified");
        }
    }
    i->started = 0;
    i->index = -1;
    i->bucket = NULL;
}

/* --- Incremental find ------------------------------------------------------ */

void hashtableIncrementalFindInitWithHash(hashtableIncrementalFindState *s, hashtable *ht, const void *key,
                                          uint64_t hash) {
    incrementalFind *f = (incrementalFind *)s;
    memset(s, 0, sizeof(*s));
    f->ht = ht;
    f->key = key;
    f->hash = hash;
    f->state = hashtableSize(ht) == 0 ? HASHTABLE_NOT_FOUND : HASHTABLE_NEXT_BUCKET;
    f->bucket = NULL;
    f->meta_load = f->state == HASHTABLE_NEXT_BUCKET ? loadMeta(ht, KS_SITE_HT_META) : 0;
}

void hashtableIncrementalFindInit(hashtableIncrementalFindState *s, hashtable *ht, const void *key) {
    hashtableIncrementalFindInitWithHash(s, ht, key, hashtableSize(ht) ? hashKey(ht, key) : 0);
}

bool hashtableIncrementalFindStep(hashtableIncrementalFindState *s) {
    incrementalFind *f = (incrementalFind *)s;
    hashtable *ht = f->ht;
    while (1) {
        switch (f->state) {
        case HASHTABLE_NEXT_BUCKET: {
            KS_ID_VAR(dep) = f->meta_load;
            if (f->bucket == NULL) {
                f->table = 0;
                size_t idx = f->hash & expToMask(ht->bucket_exp[0]);
                if (isRehashing(ht) && idx < (size_t)ht->rehash_idx) {
                    f->table = 1;
                    idx = f->hash & expToMask(ht->bucket_exp[1]);
                }
                f->bucket = &ht->tables[f->table][idx];
            } else if (f->bucket->chained) {
                dep = f->bucket_load;
                f->bucket = bucketNext(f->bucket);
            } else if (f->table == 0 && isRehashing(ht)) {
                f->table = 1;
                f->bucket = &ht->tables[1][f->hash & expToMask(ht->bucket_exp[1])];
            } else {
                f->state = HASHTABLE_NOT_FOUND;
                return false;
            }
            KS_PREFETCH(f->bucket, KVT_TAG_BUCKET, KS_SITE_HT_INCR_PREFETCH_BUCKET, dep);
            f->pos = 0;
            f->bucket_load = 0;
            f->bucket_dep = dep;
            f->state = HASHTABLE_NEXT_ENTRY;
            return true;
        }
        case HASHTABLE_NEXT_ENTRY: {
            bucket *b = f->bucket;
            if (f->bucket_load == 0) f->bucket_load = KS_LOAD(b, BUCKET_SIZE, KVT_TAG_BUCKET, KS_SITE_HT_INCR_BUCKET, f->bucket_dep);
            uint8_t h2 = highBits(f->hash);
            for (int pos = f->pos; pos < numBucketPositions(b); pos++) {
                if (isPositionFilled(b, pos) && b->hashes[pos] == h2) {
                    f->pos = (uint16_t)pos;
                    KS_PREFETCH(b->entries[pos], KVT_TAG_OBJECT, KS_SITE_HT_INCR_PREFETCH_ENTRY, f->bucket_load);
                    f->state = HASHTABLE_CHECK_ENTRY;
                    return true;
                }
            }
            f->state = HASHTABLE_NEXT_BUCKET;
            break; /* fall through to the next bucket in the same step */
        }
        case HASHTABLE_CHECK_ENTRY: {
            KS_ID_VAR(kd) = 0;
            const void *ekey = entryGetKey(ht, f->bucket->entries[f->pos], f->bucket_load, &kd);
            if (compareKeys(ht, f->key, ekey, kd) == 0) {
                f->state = HASHTABLE_FOUND;
                return false;
            }
            f->pos++;
            f->state = HASHTABLE_NEXT_ENTRY;
            break;
        }
        case HASHTABLE_FOUND:
        case HASHTABLE_NOT_FOUND:
        default: return false;
        }
    }
}

bool hashtableIncrementalFindGetResult(hashtableIncrementalFindState *s, void **found) {
    incrementalFind *f = (incrementalFind *)s;
    if (f->state != HASHTABLE_FOUND) return false;
    if (found) *found = f->bucket->entries[f->pos];
    KS_SET_ENTRY_DEP(f->bucket_load);
    return true;
}

/* --- Validation ------------------------------------------------------------ */

int hashtableCheckValid(hashtable *ht, char *err, size_t errlen) {
#define FAIL(...)                                                                                  \
    do {                                                                                           \
        snprintf(err, errlen, __VA_ARGS__);                                                        \
        return -1;                                                                                 \
    } while (0)
    if (ht->rehash_idx < -1) FAIL("hashtable: rehash_idx %ld", (long)ht->rehash_idx);
    if (!isRehashing(ht) && (ht->tables[1] || ht->used[1] || ht->bucket_exp[1] != -1))
        FAIL("hashtable: table 1 present while not rehashing");
    if (isRehashing(ht) && (size_t)ht->rehash_idx >= numBuckets(ht->bucket_exp[0]))
        FAIL("hashtable: rehash_idx beyond table 0");
    for (int t = 0; t <= 1; t++) {
        if ((ht->tables[t] == NULL) != (ht->bucket_exp[t] == -1)) FAIL("hashtable: table %d exp mismatch", t);
        size_t n = numBuckets(ht->bucket_exp[t]), count = 0, children = 0;
        for (size_t idx = 0; idx < n; idx++) {
            bucket *b = &ht->tables[t][idx];
            bool moved = t == 0 && isRehashing(ht) && idx < (size_t)ht->rehash_idx;
            int depth = 0;
            while (b) {
                if (moved && (b->presence || b->chained)) FAIL("hashtable: rehashed bucket %zu not empty", idx);
                if (b->chained && (b->presence >> (ENTRIES_PER_BUCKET - 1)) & 1)
                    FAIL("hashtable: chained bucket %zu has slot 6 present", idx);
                for (int pos = 0; pos < numBucketPositions(b); pos++) {
                    if (!isPositionFilled(b, pos)) continue;
                    count++;
                    const void *key = entryGetKey(ht, b->entries[pos], 0, NULL);
                    uint64_t h = hashKey(ht, key);
                    if (b->hashes[pos] != highBits(h)) FAIL("hashtable: tag mismatch in bucket %zu", idx);
                    if ((h & expToMask(ht->bucket_exp[t])) != idx)
                        FAIL("hashtable: entry in wrong bucket %zu (table %d)", idx, t);
                }
                if (depth > 0) children++;
                b = bucketNext(b);
                depth++;
            }
        }
        if (count != ht->used[t]) FAIL("hashtable: used[%d]=%zu but %zu entries", t, ht->used[t], count);
        if (children != ht->child_buckets[t]) FAIL("hashtable: child_buckets[%d]=%zu but %zu", t, ht->child_buckets[t], children);
    }
    return 0;
#undef FAIL
}
