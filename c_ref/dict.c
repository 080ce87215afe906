/*
 * dict.c -- Redis 8.4 chained dict, traced (the `table=dict` keyspace backend).
 *
 * A reference model of Redis `src/dict.c` as of 8.4 (with `dictFindLink` /
 * `dictSetKeyAtLink`, Redis PR #14264's entry order and the no_value
 * entry-is-key tagging; upstream functions and the remaining differences:
 * FIDELITY.md): same layout, same resize policy, same
 * incremental rehashing, same pointer tagging, so that the memory accesses it
 * records (emit.h) are the ones Redis makes.  The dictPrefetcher of Redis
 * PR #15133 lives in dict_prefetch.c.
 *
 * Design
 * ------
 * Two tables of 8-byte bucket cells; each cell heads a singly linked chain.
 * New entries go to the chain head.  While rehashing, table 0 buckets below
 * rehashidx are empty and everything new goes to table 1.
 *
 *     struct dict (one line)            ht_table[0] (2^exp0 cells)
 *    +--------------------+            +------+------+------+------+
 *    | type               |      +---->| NULL |  o   | kv|2 | NULL |
 *    | ht_table[0] -------+------+     +------+--|---+------+------+
 *    | ht_table[1]        |                      |      direct item: a kvobj
 *    | ht_used[0..1]      |                      v      pointer tagged 010
 *    | rehashidx (-1 idle)|             NoValue node (16 B)
 *    | pauserehash:15 ... |             +------+------+    +------+------+
 *    | ht_size_exp[0..1]  |             | next-+------+--->| next | key  |
 *    | pauseAutoResize    |             | key  |      |    +------+------+
 *    | arena (kvsim)      |             +--|---+------+     ... chain may end
 *    +--------------------+                v                  in a direct item
 *                                        kvobj
 *
 * Entries (PR #14264 order: `next` first, `key` second, so both node kinds
 * share code):
 *
 *     dictEntry        0 next | 8 key | 16 v (val/u64/s64/double)   24 B
 *     dictEntryNoValue 0 next | 8 key                                16 B
 *
 * Pointer tagging (no_value dicts only), low 3 bits of a cell or `next`:
 *     000  a node                    xx1  odd stored item (keys_are_odd: sds)
 *     010  8-aligned stored item|2   100  embeds_next item (its own node)
 * The 100 tag is c_ref's: Redis 7's dictEntry{key, v, next} needs no tag, as
 * every chain element is a node; here it lets dictEntryStored tell the item
 * kinds apart without the dict (it costs no memory access).
 * A direct item has no `next`.  It is stored only into an *empty* bucket (on
 * insert or when rehashing moves it); inserting in front of it allocates a
 * NoValue node, so a chain may end in a direct item.  Unlinking the head node
 * of "node -> item" leaves the item alone in its cell again; a node left alone
 * stays a node (Redis does not repack).
 *
 * Rehashing: dictRehash(n) moves n non-empty buckets and gives up after n*10
 * empty ones.  Lookups, inserts and deletes first call _dictRehashStepIfNeeded
 * with the key's table-0 index: if that bucket is at or above rehashidx and
 * non-empty, it is rehashed itself (its cells are about to be read anyway);
 * otherwise one dictRehash(d,1) step.  Expanding re-hashes each moved item
 * (the stored-key hash: reads the object and key); shrinking uses idx & mask.
 *
 * Resize policy (global, dictSetResizeEnabled): ENABLE expands at used >= buckets
 * and shrinks at used*8 <= buckets; AVOID (a fork child exists) only at used >=
 * 4*buckets / used*32 <= buckets, and rehashes only if the size ratio is >= 4
 * (expand) or >= 32 (shrink); FORBID never resizes an existing table nor
 * rehashes.  New size: next power of two >= used+1 (expand) / used (shrink),
 * never below 4 buckets.  pauseAutoResize blocks the automatic checks.
 *
 * What is traced (sites in sites.h, tags in trace_format.h):
 *   - the dict struct: one 56-byte TABLE_META load per operation (the fields
 *     Redis reads: type, tables, used, rehashidx, exps), stores of the fields
 *     written;
 *   - bucket cells (DICT_TABLE), dependent on the meta load (table pointer);
 *     a lookup issues no software prefetch (Redis PR #14700 removed the
 *     bucket and `next` prefetches of PR #13646 from dictFindLinkInternal);
 *   - nodes (DICT_ENTRY): one 16-byte load per node visited (next + key),
 *     node writes; dependent on the load that produced the node pointer (a
 *     cell or the previous node); an embeds_next item's `next` field is one
 *     8-byte load in the item's own line (tag of the item);
 *   - the stored item and its key are read by the type's callbacks, which
 *     receive the producing load id (kvobj -> embedded key chains onto it).
 *   Zeroing of a new table is recorded as stores only below 4 KiB (a memset
 *   inside the allocator); larger tables come from fresh zero pages.
 *
 * Deviations from Redis 8.4 (deliberate, all small)
 *   - Safe iterators and dictScan pause auto-resize as well as rehashing (as
 *     Valkey's hashtable does), so deletes inside them never swap tables.
 *   - The first table is made even when auto-resize is paused.
 *   - Callbacks carry load ids for the trace; keyCompare returns 0 on equal
 *     (Valkey's convention, shared with hashtable.c's callbacks).
 *   - The dict struct load has no dependency on whatever produced `d`.
 *   - dictRehashRounds: a deterministic dictRehashMicroseconds for traces.
 *
 * Conventions
 *   Public functions dictXxx, as in Redis; internal helpers static, no prefix;
 *   Redis's own internal names kept where they exist (_dictRehashStepIfNeeded,
 *   rehashEntriesInBucketAtIndex, ...) so diffs against upstream stay readable.
 *   Every allocation comes from the dict's ksArena.
 *
 * Credits: Redis dict.c (Salvatore Sanfilippo and contributors), the
 * incremental rehash design, the reverse-binary scan cursor (Pieter Noordhuis)
 * and the kvobj unification (Redis PR #13806).  This is a from-description
 * model, no code copied.
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include "dict.h"
#include "fingerprint.h"

#include <assert.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* --- Layout --------------------------------------------------------------- */

struct dictEntry {
    struct dictEntry *next;
    void *key;
    union {
        void *val;
        uint64_t u64;
        int64_t s64;
        double d;
    } v;
};

typedef struct {
    struct dictEntry *next;
    void *key;
} dictEntryNoValue;

static_assert(sizeof(struct dictEntry) == 24, "dictEntry is 24 bytes");
static_assert(sizeof(dictEntryNoValue) == 16, "dictEntryNoValue is 16 bytes");
static_assert(offsetof(struct dictEntry, next) == offsetof(dictEntryNoValue, next) &&
                  offsetof(struct dictEntry, key) == offsetof(dictEntryNoValue, key),
              "both node kinds share next/key offsets (PR #14264)");

struct dict {
    dictType *type;
    dictEntry **ht_table[2];
    unsigned long ht_used[2];
    long rehashidx;             /* -1: not rehashing; else next table-0 index to move */
    unsigned pauserehash : 15;  /* >0: no rehash steps (safe iterators, scan, 2-phase) */
    unsigned useStoredKeyApi : 1; /* kept for layout fidelity; unused (see entryGetKey) */
    signed char ht_size_exp[2]; /* -1: no table; else 2^exp cells */
    int16_t pauseAutoResize;    /* >0: no automatic expand / shrink */
    ksArena *arena;             /* kvsim: where everything is allocated */
};

/* The bytes Redis's code reads from the struct: everything before `arena`. */
#define DICT_META_BYTES 56
static_assert(offsetof(struct dict, ht_used) == 24, "Redis 8.4 layout");
static_assert(offsetof(struct dict, rehashidx) == 40, "Redis 8.4 layout");
static_assert(offsetof(struct dict, ht_size_exp) == 50, "Redis 8.4 layout (after the bitfield)");
static_assert(offsetof(struct dict, pauseAutoResize) == 52, "Redis 8.4 layout");
static_assert(offsetof(struct dict, arena) == DICT_META_BYTES, "meta = Redis fields");
static_assert(sizeof(struct dict) == 64, "the dict struct is one cache line");

#define ENTRY_PTR_MASK 7
#define ENTRY_PTR_NORMAL 0
#define ENTRY_PTR_IS_ODD_KEY 1
#define ENTRY_PTR_IS_EVEN_KEY 2
#define ENTRY_PTR_EMBEDDED 4 /* an item that carries its own `next` (embeds_next) */

#define DICTHT_SIZE(exp) ((exp) == -1 ? 0UL : 1UL << (exp))
#define DICTHT_SIZE_MASK(exp) ((exp) == -1 ? 0UL : DICTHT_SIZE(exp) - 1)

/* Bytes of a node as one traced load: next + key (the value is read apart). */
#define NODE_LOAD_BYTES 16

static dictResizeEnable dict_can_resize = DICT_RESIZE_ENABLE;

void dictSetResizeEnabled(dictResizeEnable enable) { dict_can_resize = enable; }
dictResizeEnable dictGetResizeEnabled(void) { return dict_can_resize; }

/* --- Tracing helpers ------------------------------------------------------ */

static inline ksLoadId metaLoad(const dict *d, uint16_t site) {
    return KS_LOAD(d, DICT_META_BYTES, KVT_TAG_TABLE_META, site, KS_TAKE_TABLE_DEP());
}
#define META_STORE(d, field)                                                                      \
    KS_STORE(&(d)->field, sizeof((d)->field), KVT_TAG_TABLE_META, KS_SITE_DICT_STORE, 0)

/* --- Entry pointers and tagging ------------------------------------------- */

int dictEntryIsKey(const dictEntry *de) {
    uintptr_t p = (uintptr_t)de;
    return (p & ENTRY_PTR_IS_ODD_KEY) || (p & ENTRY_PTR_MASK) == ENTRY_PTR_IS_EVEN_KEY;
}
static inline int entryIsNode(const dictEntry *de) {
    return de != NULL && ((uintptr_t)de & ENTRY_PTR_MASK) == ENTRY_PTR_NORMAL;
}
static inline int entryIsEmbedded(const dictEntry *de) {
    return ((uintptr_t)de & ENTRY_PTR_MASK) == ENTRY_PTR_EMBEDDED;
}
int dictEntryIsNode(const dictEntry *de) { return entryIsNode(de); }
static inline void *decodeItem(const dictEntry *de) {
    uintptr_t p = (uintptr_t)de;
    if (p & ENTRY_PTR_IS_ODD_KEY) return (void *)p;
    return (void *)(p & ~(uintptr_t)ENTRY_PTR_MASK);
}
static inline dictEntry *encodeItem(const dict *d, void *stored) {
    uintptr_t p = (uintptr_t)stored;
    if (d->type->embeds_next) {
        assert((p & ENTRY_PTR_MASK) == 0 && "stored items must be 8-aligned");
        return (dictEntry *)(p | ENTRY_PTR_EMBEDDED);
    }
    if (d->type->keys_are_odd) {
        assert((p & 1) && "keys_are_odd dict given an even stored item");
        return (dictEntry *)p;
    }
    assert((p & ENTRY_PTR_MASK) == 0 && "stored items must be 8-aligned");
    return (dictEntry *)(p | ENTRY_PTR_IS_EVEN_KEY);
}
/* Tag of a direct item's line, as the cache sees it. */
static inline uint8_t itemTag(const dict *d) {
    return d->type->keys_are_odd ? KVT_TAG_KEY : KVT_TAG_OBJECT;
}
/* The link after `de`: a node's `next`, an embedded item's own `next` field,
 * NULL after a direct item (it has none). */
static inline dictEntryLink nextLink(const dict *d, dictEntry *de) {
    if (entryIsNode(de)) return &de->next;
    if (entryIsEmbedded(de))
        return (dictEntryLink)((char *)decodeItem(de) + d->type->embedded_next_offset);
    return NULL;
}
static inline dictEntry *nextOf(const dict *d, dictEntry *de) {
    dictEntryLink l = nextLink(d, de);
    return l ? *l : NULL;
}
/* Structure tag of the memory holding a link: a bucket cell, a node's `next`
 * or an embedded item's `next`. */
static inline uint8_t linkTag(const dict *d, const dictEntryLink link) {
    for (int t = 0; t <= 1; t++)
        if (d->ht_table[t] && link >= d->ht_table[t] &&
            link < d->ht_table[t] + DICTHT_SIZE(d->ht_size_exp[t]))
            return KVT_TAG_DICT_TABLE;
    return d->type->embeds_next ? itemTag(d) : KVT_TAG_DICT_ENTRY;
}

void *dictGetKey(const dictEntry *de) {
    if (!entryIsNode(de)) return decodeItem(de);
    (void)KS_LOAD(&de->key, 8, KVT_TAG_DICT_ENTRY, KS_SITE_DICT_KEY, 0);
    return de->key;
}
void *dictEntryStored(const dictEntry *de) {
    return entryIsNode(de) ? de->key : decodeItem(de);
}
void *dictGetVal(const dictEntry *de) {
    assert(entryIsNode(de));
    (void)KS_LOAD(&de->v, 8, KVT_TAG_DICT_ENTRY, KS_SITE_DICT_ENTRY, 0);
    return de->v.val;
}
void dictSetVal(dict *d, dictEntry *de, void *val) {
    assert(!d->type->no_value && entryIsNode(de));
    KS_STORE(&de->v, 8, KVT_TAG_DICT_ENTRY, KS_SITE_DICT_STORE, 0);
    de->v.val = val;
}
dictEntry *dictGetNext(const dictEntry *de) {
    if (!entryIsNode(de)) return NULL;
    (void)KS_LOAD(&de->next, 8, KVT_TAG_DICT_ENTRY, KS_SITE_DICT_ENTRY, 0);
    return de->next;
}

/* Read one chain element: its stored item, its successor, and the id of the
 * load that produced the stored item pointer.  `dep` produced `de`. */
static inline void *readEntry(const dict *d, const dictEntry *de, ksLoadId dep, uint16_t site,
                              dictEntry **next, ksLoadId *item_dep, ksLoadId *next_dep) {
    if (dictEntryIsKey(de)) {
        *next = NULL;
        *item_dep = dep;
        *next_dep = 0;
        return decodeItem(de);
    }
    if (entryIsEmbedded(de)) {
        /* Redis 7's dictEntry{key, v, next}: the item is its own node; the
         * walk reads its `next` field, the type's callbacks read its key. */
        dictEntryLink l = nextLink(d, (dictEntry *)de);
        *next = *l;
        *item_dep = dep;
        *next_dep = KS_LOAD(l, 8, itemTag(d), site, dep);
        return decodeItem(de);
    }
    ksLoadId id = KS_LOAD(de, NODE_LOAD_BYTES, KVT_TAG_DICT_ENTRY, site, dep);
    *next = de->next;
    *item_dep = id;
    *next_dep = id;
    return de->key;
}

static dictEntry *newNode(dict *d, void *stored, dictEntry *next) {
    size_t sz = d->type->no_value ? sizeof(dictEntryNoValue) : sizeof(struct dictEntry);
    struct dictEntry *n = ksArenaAlloc(d->arena, sz);
    assert(((uintptr_t)n & ENTRY_PTR_MASK) == 0);
    n->next = next;
    n->key = stored;
    if (!d->type->no_value) n->v.val = NULL;
    KS_STORE(n, sz, KVT_TAG_DICT_ENTRY, KS_SITE_DICT_STORE, 0);
    return n;
}

static void freeNode(dict *d, dictEntry *de) {
    if (entryIsNode(de)) ksArenaFree(d->arena, de);
}

/* --- Keys and hashes -------------------------------------------------------- */

static inline const void *keyOfStored(const dict *d, const void *stored, ksLoadId dep,
                                      ksLoadId *key_dep) {
    *key_dep = dep;
    if (d->type->entryGetKey == NULL) return stored;
    return d->type->entryGetKey(stored, dep, key_dep);
}

static inline uint64_t hashPtr(const void *p) {
    uint64_t x = (uint64_t)(uintptr_t)p;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return x;
}

static inline uint64_t hashKey(const dict *d, const void *key) {
    if (d->type->hashFunction == NULL) return hashPtr(key);
    return d->type->hashFunction(key);
}

/* Redis's storedHashFunction: the hash of an item already in the dict. */
static inline uint64_t hashStored(const dict *d, const void *stored, ksLoadId dep) {
    if (d->type->entryHash) return d->type->entryHash(stored, dep);
    ksLoadId kdep;
    return hashKey(d, keyOfStored(d, stored, dep, &kdep));
}

/* Redis checks pointer identity first, then keyCompare. */
static inline int compareKeys(const dict *d, const void *key, const void *stored, ksLoadId dep) {
    if (key == stored) return 1;
    ksLoadId kdep;
    const void *skey = keyOfStored(d, stored, dep, &kdep);
    if (key == skey) return 1;
    if (d->type->keyCompare == NULL) return 0;
    return d->type->keyCompare(key, skey, kdep) == 0;
}

/* --- Sizing ------------------------------------------------------------------- */

/* Smallest exp with 2^exp >= size, at least DICT_HT_INITIAL_EXP. */
static signed char _dictNextExp(unsigned long size) {
    if (size <= DICT_HT_INITIAL_SIZE) return DICT_HT_INITIAL_EXP;
    if (size >= (unsigned long)LONG_MAX) return (signed char)(8 * sizeof(long) - 1);
    return (signed char)(8 * sizeof(long) - __builtin_clzl(size - 1));
}

dict *dictCreate(dictType *type, ksArena *arena) {
    dict *d = ksArenaAlloc(arena, sizeof(*d));
    memset(d, 0, sizeof(*d));
    d->type = type;
    d->ht_size_exp[0] = d->ht_size_exp[1] = -1;
    d->rehashidx = -1;
    d->arena = arena;
    KS_STORE(d, sizeof(*d), KVT_TAG_TABLE_META, KS_SITE_DICT_STORE, 0);
    return d;
}

size_t dictSize(const dict *d) { return d->ht_used[0] + d->ht_used[1]; }
size_t dictBuckets(const dict *d) {
    return DICTHT_SIZE(d->ht_size_exp[0]) + DICTHT_SIZE(d->ht_size_exp[1]);
}
int dictIsRehashing(const dict *d) { return d->rehashidx != -1; }
long dictRehashIndex(const dict *d) { return d->rehashidx; }
void dictPauseRehashing(dict *d) { d->pauserehash++; }
void dictResumeRehashing(dict *d) {
    assert(d->pauserehash > 0);
    d->pauserehash--;
}
void dictPauseAutoResize(dict *d) { d->pauseAutoResize++; }
void dictResumeAutoResize(dict *d) {
    assert(d->pauseAutoResize > 0);
    d->pauseAutoResize--;
}

static void resetTable(dict *d, int t) {
    d->ht_table[t] = NULL;
    d->ht_size_exp[t] = -1;
    d->ht_used[t] = 0;
}

static int typeResizeAllowed(const dict *d, size_t size) {
    if (d->type->resizeAllowed == NULL) return 1;
    double ratio = DICTHT_SIZE(d->ht_size_exp[0])
                       ? (double)d->ht_used[0] / (double)DICTHT_SIZE(d->ht_size_exp[0])
                       : 0.0;
    return d->type->resizeAllowed(DICTHT_SIZE(_dictNextExp(size)) * sizeof(dictEntry *), ratio);
}

/* Table 0 is empty: free it and make table 1 table 0.  Returns 1 if done. */
static int dictCheckRehashingCompleted(dict *d) {
    if (d->ht_used[0] != 0) return 0;
    if (d->ht_table[0]) ksArenaFree(d->arena, d->ht_table[0]);
    d->ht_table[0] = d->ht_table[1];
    d->ht_size_exp[0] = d->ht_size_exp[1];
    d->ht_used[0] = d->ht_used[1];
    resetTable(d, 1);
    d->rehashidx = -1;
    KS_STORE(&d->ht_table[0], 48, KVT_TAG_TABLE_META, KS_SITE_DICT_STORE, 0);
    return 1;
}

static int _dictResize(dict *d, unsigned long size) {
    assert(!dictIsRehashing(d));
    signed char exp = _dictNextExp(size);
    unsigned long newsize = DICTHT_SIZE(exp);
    if (newsize < size) return DICT_ERR; /* overflow */
    if (exp == d->ht_size_exp[0]) return DICT_ERR;
    size_t bytes = newsize * sizeof(dictEntry *);
    dictEntry **table = ksArenaCalloc(d->arena, bytes);
    if (bytes < 4096) KS_STORE(table, bytes, KVT_TAG_DICT_TABLE, KS_SITE_DICT_STORE, 0);

    d->ht_size_exp[1] = exp;
    d->ht_used[1] = 0;
    d->ht_table[1] = table;
    d->rehashidx = 0;
    /* A first table, or an empty old one: no rehashing, just swap. */
    if (d->ht_table[0] == NULL || d->ht_used[0] == 0) {
        if (d->ht_table[0]) ksArenaFree(d->arena, d->ht_table[0]);
        d->ht_table[0] = table;
        d->ht_size_exp[0] = exp;
        d->ht_used[0] = 0;
        resetTable(d, 1);
        d->rehashidx = -1;
        KS_STORE(&d->ht_table[0], 48, KVT_TAG_TABLE_META, KS_SITE_DICT_STORE, 0);
        return DICT_OK;
    }
    KS_STORE(&d->ht_table[0], 48, KVT_TAG_TABLE_META, KS_SITE_DICT_STORE, 0);
    if (d->type->force_full_rehash) {
        while (dictRehash(d, 1000)) {
        }
    }
    return DICT_OK;
}

int dictExpand(dict *d, size_t size) {
    if (dictIsRehashing(d) || d->ht_used[0] > size) return DICT_ERR;
    return _dictResize(d, size);
}

int dictShrink(dict *d, size_t size) {
    if (dictIsRehashing(d) || d->ht_used[0] > size || DICTHT_SIZE(d->ht_size_exp[0]) <= size)
        return DICT_ERR;
    return _dictResize(d, size);
}

/* DICT_OK if nothing needed doing or a resize was attempted; DICT_ERR if the
 * thresholds were not reached (Redis's convention). */
int dictExpandIfNeeded(dict *d) {
    if (dictIsRehashing(d)) return DICT_OK;
    unsigned long size0 = DICTHT_SIZE(d->ht_size_exp[0]);
    if (size0 == 0) {
        dictExpand(d, DICT_HT_INITIAL_SIZE);
        return DICT_OK;
    }
    if ((dict_can_resize == DICT_RESIZE_ENABLE && d->ht_used[0] >= size0) ||
        (dict_can_resize != DICT_RESIZE_FORBID &&
         d->ht_used[0] >= DICT_FORCE_RESIZE_RATIO * size0)) {
        if (typeResizeAllowed(d, d->ht_used[0] + 1)) dictExpand(d, d->ht_used[0] + 1);
        return DICT_OK;
    }
    return DICT_ERR;
}

int dictShrinkIfNeeded(dict *d) {
    if (dictIsRehashing(d)) return DICT_OK;
    unsigned long size0 = DICTHT_SIZE(d->ht_size_exp[0]);
    if (size0 <= DICT_HT_INITIAL_SIZE) return DICT_OK;
    if ((dict_can_resize == DICT_RESIZE_ENABLE && d->ht_used[0] * DICT_HT_MIN_FILL <= size0) ||
        (dict_can_resize != DICT_RESIZE_FORBID &&
         d->ht_used[0] * DICT_HT_MIN_FILL * DICT_FORCE_RESIZE_RATIO <= size0)) {
        if (typeResizeAllowed(d, d->ht_used[0])) dictShrink(d, d->ht_used[0]);
        return DICT_OK;
    }
    return DICT_ERR;
}

static void _dictExpandIfNeeded(dict *d) {
    if (d->pauseAutoResize > 0) return;
    dictExpandIfNeeded(d);
}
static void _dictShrinkIfNeeded(dict *d) {
    if (d->pauseAutoResize > 0) return;
    dictShrinkIfNeeded(d);
}

/* --- Incremental rehashing ------------------------------------------------------ */

/* Under AVOID, rehash only when the tables differ by the forced ratios. */
static int rehashAllowed(const dict *d) {
    if (dict_can_resize == DICT_RESIZE_FORBID || !dictIsRehashing(d)) return 0;
    unsigned long s0 = DICTHT_SIZE(d->ht_size_exp[0]);
    unsigned long s1 = DICTHT_SIZE(d->ht_size_exp[1]);
    if (dict_can_resize == DICT_RESIZE_AVOID &&
        ((s1 > s0 && s1 < DICT_FORCE_RESIZE_RATIO * s0) ||
         (s1 < s0 && s0 < DICT_HT_MIN_FILL * DICT_FORCE_RESIZE_RATIO * s1)))
        return 0;
    return 1;
}

/* Move every entry of table-0 bucket idx to table 1.  `cell_dep` is the id of
 * the load of the cell (0: not loaded yet). */
static void rehashEntriesInBucketAtIndex(dict *d, unsigned long idx, ksLoadId cell_dep) {
    dictEntry **cell0 = &d->ht_table[0][idx];
    if (cell_dep == 0) cell_dep = KS_LOAD(cell0, 8, KVT_TAG_DICT_TABLE, KS_SITE_DICT_REHASH, 0);
    dictEntry *de = *cell0;
    ksLoadId dep = cell_dep;
    int expanding = d->ht_size_exp[1] > d->ht_size_exp[0];
    unsigned long mask1 = DICTHT_SIZE_MASK(d->ht_size_exp[1]);
    while (de) {
        dictEntry *next;
        ksLoadId item_dep, next_dep;
        void *stored = readEntry(d, de, dep, KS_SITE_DICT_REHASH, &next, &item_dep, &next_dep);
        unsigned long h = expanding ? hashStored(d, stored, item_dep) & mask1 : idx & mask1;
        dictEntry **cell1 = &d->ht_table[1][h];
        (void)KS_LOAD(cell1, 8, KVT_TAG_DICT_TABLE, KS_SITE_DICT_REHASH, 0);
        if (entryIsEmbedded(de)) {
            *nextLink(d, de) = *cell1;
            KS_STORE(nextLink(d, de), 8, itemTag(d), KS_SITE_DICT_REHASH, 0);
        } else if (d->type->no_value) {
            if (*cell1 == NULL) {
                /* Empty destination: the item goes in directly, the node (if
                 * any) is freed. */
                freeNode(d, de);
                de = encodeItem(d, stored);
            } else if (dictEntryIsKey(de)) {
                de = newNode(d, stored, *cell1);
            } else {
                de->next = *cell1;
                KS_STORE(&de->next, 8, KVT_TAG_DICT_ENTRY, KS_SITE_DICT_REHASH, 0);
            }
        } else {
            de->next = *cell1;
            KS_STORE(&de->next, 8, KVT_TAG_DICT_ENTRY, KS_SITE_DICT_REHASH, 0);
        }
        *cell1 = de;
        KS_STORE(cell1, 8, KVT_TAG_DICT_TABLE, KS_SITE_DICT_REHASH, 0);
        d->ht_used[0]--;
        d->ht_used[1]++;
        META_STORE(d, ht_used);
        de = next;
        dep = next_dep;
    }
    *cell0 = NULL;
    KS_STORE(cell0, 8, KVT_TAG_DICT_TABLE, KS_SITE_DICT_REHASH, 0);
}

int dictRehash(dict *d, int n) {
    if (!rehashAllowed(d)) return 0;
    int empty_visits = n * 10;
    metaLoad(d, KS_SITE_DICT_REHASH);
    while (n-- && d->ht_used[0] != 0) {
        assert(DICTHT_SIZE(d->ht_size_exp[0]) > (unsigned long)d->rehashidx);
        ksLoadId lid;
        for (;;) {
            lid = KS_LOAD(&d->ht_table[0][d->rehashidx], 8, KVT_TAG_DICT_TABLE,
                          KS_SITE_DICT_REHASH, 0);
            if (d->ht_table[0][d->rehashidx] != NULL) break;
            d->rehashidx++;
            if (--empty_visits == 0) {
                META_STORE(d, rehashidx);
                return 1;
            }
        }
        rehashEntriesInBucketAtIndex(d, (unsigned long)d->rehashidx, lid);
        d->rehashidx++;
        META_STORE(d, rehashidx);
    }
    return !dictCheckRehashingCompleted(d);
}

/* Rehash one specific bucket (at or above rehashidx): Redis 8's cache-friendly
 * step on the bucket a lookup is about to read. */
static int _dictBucketRehash(dict *d, unsigned long idx, ksLoadId cell_dep) {
    if (d->pauserehash != 0) return 0;
    if (!rehashAllowed(d)) return 0;
    rehashEntriesInBucketAtIndex(d, idx, cell_dep);
    dictCheckRehashingCompleted(d);
    return 1;
}

static void _dictRehashStepIfNeeded(dict *d, unsigned long visited_idx) {
    if (!dictIsRehashing(d) || d->pauserehash != 0) return;
    if ((long)visited_idx >= d->rehashidx) {
        dictEntry **cell = &d->ht_table[0][visited_idx];
        ksLoadId lid = KS_LOAD(cell, 8, KVT_TAG_DICT_TABLE, KS_SITE_DICT_REHASH, 0);
        if (*cell) {
            _dictBucketRehash(d, visited_idx, lid);
            return;
        }
    }
    dictRehash(d, 1);
}

static uint64_t monotonicUs(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

int dictRehashMicroseconds(dict *d, uint64_t us) {
    if (d->pauserehash > 0) return 0;
    uint64_t start = monotonicUs();
    int rehashes = 0;
    while (dictRehash(d, 100)) {
        rehashes += 100;
        if (monotonicUs() - start > us) break;
    }
    return rehashes;
}

int dictRehashRounds(dict *d, int rounds) {
    if (d->pauserehash > 0) return dictIsRehashing(d);
    while (rounds-- > 0 && dictRehash(d, 100)) {
    }
    return dictIsRehashing(d);
}

/* --- Lookup ------------------------------------------------------------------------ */

/* The core walk (Redis dictFindLinkInternal).  Returns the link of the entry
 * matching `key` or NULL.  Optional outs: *bucket = the cell of the last table
 * searched (table 1 while rehashing: where an insert goes), *table = the table
 * of the match, *item_dep = the load that produced the matching stored item.
 * Works on an empty dict with a table (dictSetKeyAtLink needs the bucket).
 * No software prefetch: Redis PR #14700 removed the bucket and `next`
 * prefetches that PR #13646 had put into dictFindLinkInternal. */
static dictEntryLink findLinkInternal(dict *d, const void *key, uint64_t hash,
                                      dictEntryLink *bucket, int *table, ksLoadId *item_dep) {
    if (bucket) *bucket = NULL;
    if (d->ht_table[0] == NULL) return NULL;
    ksLoadId meta = metaLoad(d, KS_SITE_DICT_META);
    unsigned long idx = hash & DICTHT_SIZE_MASK(d->ht_size_exp[0]);
    _dictRehashStepIfNeeded(d, idx);

    for (int t = 0; t <= 1; t++) {
        if (t == 0 && (long)idx < d->rehashidx) continue;
        idx = hash & DICTHT_SIZE_MASK(d->ht_size_exp[t]);
        dictEntryLink link = &d->ht_table[t][idx];
        if (bucket) *bucket = link;
        ksLoadId dep = KS_LOAD(link, 8, KVT_TAG_DICT_TABLE, KS_SITE_DICT_BUCKET, meta);
        while (*link) {
            dictEntry *de = *link, *next;
            ksLoadId idep, ndep;
            void *stored = readEntry(d, de, dep, KS_SITE_DICT_ENTRY, &next, &idep, &ndep);
            if (compareKeys(d, key, stored, idep)) {
                if (table) *table = t;
                if (item_dep) *item_dep = idep;
                return link;
            }
            link = nextLink(d, de);
            if (link == NULL) break;
            dep = ndep;
        }
        if (!dictIsRehashing(d)) break;
    }
    return NULL;
}

dictEntryLink dictFindLink(dict *d, const void *key, dictEntryLink *bucket) {
    if (bucket) *bucket = NULL;
    if (dictSize(d) == 0) return NULL;
    return findLinkInternal(d, key, hashKey(d, key), bucket, NULL, NULL);
}

dictEntryLink dictFindLinkWithHash(dict *d, const void *key, uint64_t hash,
                                   dictEntryLink *bucket, ksLoadId *item_dep) {
    if (bucket) *bucket = NULL;
    if (item_dep) *item_dep = 0;
    if (dictSize(d) == 0) return NULL;
    return findLinkInternal(d, key, hash, bucket, NULL, item_dep);
}

dictEntry *dictFindWithHash(dict *d, const void *key, uint64_t hash) {
    if (dictSize(d) == 0) return NULL;
    dictEntryLink link = findLinkInternal(d, key, hash, NULL, NULL, NULL);
    return link ? *link : NULL;
}

dictEntry *dictFind(dict *d, const void *key) {
    if (dictSize(d) == 0) return NULL;
    return dictFindWithHash(d, key, hashKey(d, key));
}

void *dictFetchStored(dict *d, const void *key, ksLoadId *dep) {
    if (dep) *dep = 0;
    if (dictSize(d) == 0) return NULL;
    ksLoadId idep = 0;
    dictEntryLink link = findLinkInternal(d, key, hashKey(d, key), NULL, NULL, &idep);
    if (link == NULL) return NULL;
    if (dep) *dep = idep;
    return dictEntryStored(*link); /* read by the walk */
}

void *dictFetchStoredWithHash(dict *d, const void *key, uint64_t hash, ksLoadId *dep) {
    if (dep) *dep = 0;
    if (dictSize(d) == 0) return NULL;
    ksLoadId idep = 0;
    dictEntryLink link = findLinkInternal(d, key, hash, NULL, NULL, &idep);
    if (link == NULL) return NULL;
    if (dep) *dep = idep;
    return dictEntryStored(*link); /* read by the walk */
}

int dictIsRehashingPaused(const dict *d) { return d->pauserehash > 0; }

void dictPrefetchBucket(dict *d, uint64_t hash) {
    if (d->ht_table[0] == NULL) return;
    KS_ID_VAR(meta) = metaLoad(d, KS_SITE_DICT_BUCKET);
    int t = dictIsRehashing(d) ? 1 : 0;
    KS_PREFETCH(&d->ht_table[t][hash & DICTHT_SIZE_MASK(d->ht_size_exp[t])], KVT_TAG_DICT_TABLE,
                KS_SITE_DICT_BUCKET, meta);
}

void dictPrefetchBucketCells(dict *d, const void *key) {
    uint64_t hash = hashKey(d, key);
    KS_ID_VAR(meta) = metaLoad(d, KS_SITE_DICT_BUCKET);
    if (d->ht_table[0] == NULL) return;
    for (int t = 0; t <= (dictIsRehashing(d) ? 1 : 0); t++)
        KS_PREFETCH(&d->ht_table[t][hash & DICTHT_SIZE_MASK(d->ht_size_exp[t])], KVT_TAG_DICT_TABLE,
                    KS_SITE_DICT_BUCKET, meta);
}

/* --- Insert ------------------------------------------------------------------------ */

/* Insert `stored` at the head of the chain in cell `bucket` (of the insert
 * table: 1 while rehashing). */
static dictEntry *insertAtBucket(dict *d, void *stored, dictEntryLink bucket) {
    dictEntry *head = *bucket, *de;
    if (d->type->embeds_next) {
        de = encodeItem(d, stored);
        *nextLink(d, de) = head;
        KS_STORE(nextLink(d, de), 8, itemTag(d), KS_SITE_DICT_STORE, 0);
    } else if (d->type->no_value && head == NULL) {
        de = encodeItem(d, stored);
    } else {
        de = newNode(d, stored, head);
    }
    *bucket = de;
    KS_STORE(bucket, 8, KVT_TAG_DICT_TABLE, KS_SITE_DICT_STORE, 0);
    d->ht_used[dictIsRehashing(d) ? 1 : 0]++;
    META_STORE(d, ht_used);
    return de;
}

void *dictFindPositionForInsert(dict *d, const void *key, dictEntry **existing) {
    return dictFindPositionForInsertWithHash(d, key, hashKey(d, key), existing);
}

void *dictFindPositionForInsertWithHash(dict *d, const void *key, uint64_t hash,
                                        dictEntry **existing) {
    if (existing) *existing = NULL;
    ksLoadId meta = metaLoad(d, KS_SITE_DICT_META);
    unsigned long idx = hash & DICTHT_SIZE_MASK(d->ht_size_exp[0]);
    if (d->ht_table[0]) _dictRehashStepIfNeeded(d, idx);
    _dictExpandIfNeeded(d);
    /* A first table is made even with auto-resize paused (Redis would crash). */
    if (d->ht_table[0] == NULL) dictExpand(d, DICT_HT_INITIAL_SIZE);

    for (int t = 0; t <= 1; t++) {
        if (t == 0 && (long)idx < d->rehashidx) continue;
        idx = hash & DICTHT_SIZE_MASK(d->ht_size_exp[t]);
        dictEntry **cell = &d->ht_table[t][idx];
        ksLoadId dep = KS_LOAD(cell, 8, KVT_TAG_DICT_TABLE, KS_SITE_DICT_BUCKET, meta);
        dictEntry *de = *cell;
        while (de) {
            dictEntry *next;
            ksLoadId idep, ndep;
            void *stored = readEntry(d, de, dep, KS_SITE_DICT_ENTRY, &next, &idep, &ndep);
            if (compareKeys(d, key, stored, idep)) {
                if (existing) *existing = de;
                return NULL;
            }
            de = next;
            dep = ndep;
        }
        if (!dictIsRehashing(d)) break;
    }
    return &d->ht_table[dictIsRehashing(d) ? 1 : 0][idx];
}

dictEntry *dictInsertAtPosition(dict *d, void *stored, void *position) {
    return insertAtBucket(d, stored, (dictEntryLink)position);
}

dictEntry *dictAddRaw(dict *d, void *stored, dictEntry **existing) {
    ksLoadId kdep;
    const void *key = keyOfStored(d, stored, 0, &kdep);
    void *pos = dictFindPositionForInsert(d, key, existing);
    if (pos == NULL) return NULL;
    return dictInsertAtPosition(d, stored, pos);
}

int dictAdd(dict *d, void *stored, void *val) {
    dictEntry *de = dictAddRaw(d, stored, NULL);
    if (de == NULL) return DICT_ERR;
    if (!d->type->no_value) dictSetVal(d, de, val);
    return DICT_OK;
}

void dictSetKeyAtLink(dict *d, void *stored, dictEntryLink *link, int newItem) {
    dictEntryLink dummy = NULL;
    if (link == NULL) link = &dummy;
    if (newItem) {
        signed char snap0 = d->ht_size_exp[0], snap1 = d->ht_size_exp[1];
        dictExpandIfNeeded(d);
        if (snap0 != d->ht_size_exp[0] || snap1 != d->ht_size_exp[1] || *link == NULL) {
            /* Tables changed (or no link): find the bucket again, even if the
             * dict is empty, with the stored item's own key. */
            dictEntryLink bucket;
            ksLoadId kdep;
            const void *key = keyOfStored(d, stored, 0, &kdep);
            dictEntryLink found =
                findLinkInternal(d, key, hashKey(d, key), &bucket, NULL, NULL);
            assert(bucket != NULL);
            assert(found == NULL && "dictSetKeyAtLink(newItem) on an existing key");
            (void)found;
            *link = bucket;
        }
        insertAtBucket(d, stored, *link);
        return;
    }
    /* Existing item: swap the stored pointer, keeping the tag kind. */
    dictEntry *de = **link;
    assert(de != NULL);
    if (entryIsEmbedded(de)) {
        /* The new item takes the old one's place in the chain. */
        dictEntry *ne = encodeItem(d, stored);
        *nextLink(d, ne) = *nextLink(d, de); /* read by the walk */
        KS_STORE(nextLink(d, ne), 8, itemTag(d), KS_SITE_DICT_STORE, 0);
        **link = ne;
        KS_STORE(*link, 8, linkTag(d, *link), KS_SITE_DICT_STORE, 0);
    } else if (dictEntryIsKey(de)) {
        **link = encodeItem(d, stored);
        KS_STORE(*link, 8, linkTag(d, *link), KS_SITE_DICT_STORE, 0);
    } else {
        de->key = stored;
        KS_STORE(&de->key, 8, KVT_TAG_DICT_ENTRY, KS_SITE_DICT_STORE, 0);
    }
}

/* --- Delete ------------------------------------------------------------------------ */

static void freeUnlinkedEntry(dict *d, dictEntry *de) {
    void *stored = dictEntryStored(de);
    if (d->type->entryDestructor) d->type->entryDestructor(stored);
    if (!d->type->no_value && d->type->valDestructor) d->type->valDestructor(de->v.val);
    freeNode(d, de);
}

/* Unlink the entry at `link` (already read by the walk) from table t. */
static dictEntry *unlinkAt(dict *d, dictEntryLink link, int t) {
    dictEntry *de = *link;
    dictEntry *next = nextOf(d, de); /* read by the walk */
    (void)t;
    *link = next;
    KS_STORE(link, 8, linkTag(d, link), KS_SITE_DICT_STORE, 0);
    d->ht_used[t]--;
    META_STORE(d, ht_used);
    return de;
}

int dictDelete(dict *d, const void *key) {
    if (dictSize(d) == 0) return DICT_ERR;
    int t = 0;
    dictEntryLink link = findLinkInternal(d, key, hashKey(d, key), NULL, &t, NULL);
    if (link == NULL) return DICT_ERR;
    dictEntry *de = unlinkAt(d, link, t);
    freeUnlinkedEntry(d, de);
    _dictShrinkIfNeeded(d);
    return DICT_OK;
}

int dictPop(dict *d, const void *key, uint64_t hash, void **stored) {
    if (dictSize(d) == 0) return DICT_ERR;
    int t = 0;
    dictEntryLink link = findLinkInternal(d, key, hash, NULL, &t, NULL);
    if (link == NULL) return DICT_ERR;
    dictEntry *de = unlinkAt(d, link, t);
    if (stored) *stored = dictEntryStored(de);
    if (!d->type->no_value && d->type->valDestructor) d->type->valDestructor(de->v.val);
    freeNode(d, de);
    _dictShrinkIfNeeded(d);
    return DICT_OK;
}

dictEntryLink dictTwoPhaseUnlinkFind(dict *d, const void *key, int *table_index) {
    if (dictSize(d) == 0) return NULL;
    int t = 0;
    dictEntryLink link = findLinkInternal(d, key, hashKey(d, key), NULL, &t, NULL);
    if (link == NULL) return NULL;
    *table_index = t;
    dictPauseRehashing(d);
    return link;
}

void dictTwoPhaseUnlinkFree(dict *d, dictEntryLink link, int table_index) {
    if (link == NULL || *link == NULL) return;
    dictEntry *de = unlinkAt(d, link, table_index);
    freeUnlinkedEntry(d, de);
    _dictShrinkIfNeeded(d);
    dictResumeRehashing(d);
}

/* Redis _dictClear: walk every cell until the table's entries are all freed. */
void dictRelease(dict *d) {
    if (d == NULL) return;
    metaLoad(d, KS_SITE_DICT_META);
    for (int t = 0; t <= 1; t++) {
        unsigned long size = DICTHT_SIZE(d->ht_size_exp[t]);
        for (unsigned long i = 0; i < size && d->ht_used[t] > 0; i++) {
            dictEntry *de = d->ht_table[t][i];
            ksLoadId dep = KS_LOAD(&d->ht_table[t][i], 8, KVT_TAG_DICT_TABLE, KS_SITE_DICT_ITER, 0);
            while (de) {
                dictEntry *next;
                ksLoadId idep, ndep;
                readEntry(d, de, dep, KS_SITE_DICT_ITER, &next, &idep, &ndep);
                freeUnlinkedEntry(d, de);
                d->ht_used[t]--;
                de = next;
                dep = ndep;
            }
        }
        if (d->ht_table[t]) ksArenaFree(d->arena, d->ht_table[t]);
    }
    ksArenaFree(d->arena, d);
}

size_t dictMemUsage(const dict *d) {
    size_t bytes = ksArenaUsableSize(d->arena, d);
    for (int t = 0; t <= 1; t++) {
        if (d->ht_table[t] == NULL) continue;
        bytes += ksArenaUsableSize(d->arena, d->ht_table[t]);
        unsigned long size = DICTHT_SIZE(d->ht_size_exp[t]);
        for (unsigned long i = 0; i < size; i++)
            for (dictEntry *de = d->ht_table[t][i]; entryIsNode(de); de = de->next)
                bytes += ksArenaUsableSize(d->arena, de);
    }
    return bytes;
}

/* --- Iterators ------------------------------------------------------------------- */

typedef struct {
    dict *d;
    long index;
    int table;
    int safe;
    dictEntry *entry;
    dictEntry *next_entry;
    uint64_t fingerprint;
    ksLoadId next_dep; /* load that produced next_entry (or the cell of entry) */
} iter;
static_assert(sizeof(iter) <= sizeof(dictIterator), "dictIterator covers the state");

/* Thomas Wang's 64-bit mix folded over the six fields that an unsafe
 * iteration must not change. */
uint64_t dictFingerprint(const dict *d) {
    uint64_t integers[6];
    integers[0] = (uint64_t)(uintptr_t)d->ht_table[0];
    integers[1] = (uint64_t)(int64_t)d->ht_size_exp[0];
    integers[2] = d->ht_used[0];
    integers[3] = (uint64_t)(uintptr_t)d->ht_table[1];
    integers[4] = (uint64_t)(int64_t)d->ht_size_exp[1];
    integers[5] = d->ht_used[1];
    return ksFingerprintFold(integers);
}

static void initIter(dictIterator *it, dict *d, int safe) {
    iter *i = (iter *)it;
    memset(i, 0, sizeof(*i));
    i->d = d;
    i->index = -1;
    i->safe = safe;
}
void dictInitIterator(dictIterator *it, dict *d) { initIter(it, d, 0); }
void dictInitSafeIterator(dictIterator *it, dict *d) { initIter(it, d, 1); }

static dictEntry *iterNext(iter *i, ksLoadId *dep_out) {
    for (;;) {
        ksLoadId dep;
        if (i->entry == NULL) {
            if (i->index == -1 && i->table == 0) {
                metaLoad(i->d, KS_SITE_DICT_ITER);
                if (i->safe) {
                    dictPauseRehashing(i->d);
                    dictPauseAutoResize(i->d);
                } else {
                    i->fingerprint = dictFingerprint(i->d);
                }
                if (dictIsRehashing(i->d)) i->index = i->d->rehashidx - 1;
            }
            i->index++;
            if (i->index >= (long)DICTHT_SIZE(i->d->ht_size_exp[i->table])) {
                if (dictIsRehashing(i->d) && i->table == 0) {
                    i->table++;
                    i->index = 0;
                } else {
                    break;
                }
            }
            dictEntry **cell = &i->d->ht_table[i->table][i->index];
            dep = KS_LOAD(cell, 8, KVT_TAG_DICT_TABLE, KS_SITE_DICT_ITER, 0);
            i->entry = *cell;
        } else {
            i->entry = i->next_entry;
            dep = i->next_dep;
        }
        if (i->entry) {
            /* Save next now: the caller may delete the entry we return. */
            dictEntry *next;
            ksLoadId idep, ndep;
            readEntry(i->d, i->entry, dep, KS_SITE_DICT_ITER, &next, &idep, &ndep);
            i->next_entry = next;
            i->next_dep = ndep;
            if (dep_out) *dep_out = idep;
            return i->entry;
        }
    }
    return NULL;
}

dictEntry *dictNext(dictIterator *it) { return iterNext((iter *)it, NULL); }

int dictNextStored(dictIterator *it, void **stored, ksLoadId *dep) {
    ksLoadId idep = 0;
    dictEntry *de = iterNext((iter *)it, &idep);
    if (de == NULL) return 0;
    *stored = dictEntryStored(de); /* read by readEntry */
    if (dep) *dep = idep;
    return 1;
}

void dictResetIterator(dictIterator *it) {
    iter *i = (iter *)it;
    if (!(i->index == -1 && i->table == 0)) {
        if (i->safe) {
            dictResumeRehashing(i->d);
            dictResumeAutoResize(i->d);
        } else {
            metaLoad(i->d, KS_SITE_DICT_ITER);
            assert(i->fingerprint == dictFingerprint(i->d) &&
                   "dict modified during unsafe iteration");
        }
    }
    i->index = -1;
    i->table = 0;
    i->entry = NULL;
}

/* --- Scan -------------------------------------------------------------------------- */

/* Reverse the bits of a 64-bit word (cursor arithmetic on reversed bits). */
static unsigned long rev(unsigned long v) {
    unsigned long s = 8 * sizeof(v), mask = ~0UL;
    while ((s >>= 1) > 0) {
        mask ^= (mask << s);
        v = ((v >> s) & mask) | ((v << s) & ~mask);
    }
    return v;
}

static void scanBucket(dict *d, int t, unsigned long idx, dictScanFunction *fn, void *privdata) {
    dictEntry **cell = &d->ht_table[t][idx];
    ksLoadId dep = KS_LOAD(cell, 8, KVT_TAG_DICT_TABLE, KS_SITE_DICT_SCAN, 0);
    dictEntry *de = *cell;
    while (de) {
        dictEntry *next;
        ksLoadId idep, ndep;
        readEntry(d, de, dep, KS_SITE_DICT_SCAN, &next, &idep, &ndep);
        KS_SET_ENTRY_DEP(idep); /* the callback's first read of the item */
        fn(privdata, de);
        de = next;
        dep = ndep;
    }
}

/* How the cursor works: the low bits index the smaller table; incrementing the
 * *reversed* cursor walks buckets in an order where every index of a table of
 * size 2^k is followed by its expansions in any table of size 2^(k+j) before
 * the next one.  So a resize between calls never skips a bucket that the
 * cursor has not covered: shrinking may revisit (duplicates), growing never
 * misses.  While rehashing, one call visits the small-table bucket and all the
 * large-table buckets that expand it. */
unsigned long dictScan(dict *d, unsigned long v, dictScanFunction *fn, void *privdata) {
    if (dictSize(d) == 0) return 0;
    dictPauseRehashing(d);
    dictPauseAutoResize(d);
    metaLoad(d, KS_SITE_DICT_SCAN);
    if (!dictIsRehashing(d)) {
        unsigned long m0 = DICTHT_SIZE_MASK(d->ht_size_exp[0]);
        scanBucket(d, 0, v & m0, fn, privdata);
        v |= ~m0;
        v = rev(v);
        v++;
        v = rev(v);
    } else {
        int t0 = 0, t1 = 1;
        if (DICTHT_SIZE(d->ht_size_exp[0]) > DICTHT_SIZE(d->ht_size_exp[1])) {
            t0 = 1;
            t1 = 0;
        }
        unsigned long m0 = DICTHT_SIZE_MASK(d->ht_size_exp[t0]);
        unsigned long m1 = DICTHT_SIZE_MASK(d->ht_size_exp[t1]);
        scanBucket(d, t0, v & m0, fn, privdata);
        do {
            scanBucket(d, t1, v & m1, fn, privdata);
            v |= ~m1;
            v = rev(v);
            v++;
            v = rev(v);
        } while (v & (m0 ^ m1));
    }
    dictResumeAutoResize(d);
    dictResumeRehashing(d);
    return v;
}

/* --- Validation and statistics ----------------------------------------------------- */

static int fail(char *err, size_t errlen, const char *fmt, ...) {
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    ksEmitResume();
    return -1;
}

/* Invariants checked:
 *   struct: exp -1 <=> no table, tables have >= 4 cells, table 1 exists iff
 *     rehashing, 0 <= rehashidx < size0 while rehashing, pause counters sane;
 *   table 0 cells below rehashidx are empty;
 *   every table and node is a live arena allocation of the right size class;
 *   tagging: value dicts hold only nodes; no_value dicts hold nodes and direct
 *     items with the tag of keys_are_odd (odd as is / 8-aligned|010), never
 *     100; a direct item is the last element of its chain;
 *   every stored item is in the bucket its hash selects, in each table;
 *   used[t] equals the number of entries in table t;
 *   no key is stored twice (within a chain, and across the two tables). */
int dictCheckValid(dict *d, char *err, size_t errlen) {
    ksEmitPause();
    for (int t = 0; t <= 1; t++) {
        signed char exp = d->ht_size_exp[t];
        if ((exp == -1) != (d->ht_table[t] == NULL))
            return fail(err, errlen, "table %d: exp %d but table %p", t, exp, (void *)d->ht_table[t]);
        if (exp != -1 && (exp < DICT_HT_INITIAL_EXP || exp > 62))
            return fail(err, errlen, "table %d: bad exp %d", t, exp);
        if (exp == -1 && d->ht_used[t] != 0)
            return fail(err, errlen, "table %d: used %lu without a table", t, d->ht_used[t]);
        if (d->ht_table[t]) {
            if (!ksArenaOwns(d->arena, d->ht_table[t]) ||
                ksArenaUsableSize(d->arena, d->ht_table[t]) < DICTHT_SIZE(exp) * sizeof(dictEntry *))
                return fail(err, errlen, "table %d: not a live arena block of the right size", t);
        }
    }
    if (d->rehashidx == -1) {
        if (d->ht_table[1] != NULL) return fail(err, errlen, "table 1 present while not rehashing");
    } else {
        if (d->ht_table[1] == NULL || d->ht_table[0] == NULL)
            return fail(err, errlen, "rehashing without two tables");
        if (d->rehashidx < 0 || (unsigned long)d->rehashidx >= DICTHT_SIZE(d->ht_size_exp[0]))
            return fail(err, errlen, "rehashidx %ld out of [0,%lu)", d->rehashidx,
                        DICTHT_SIZE(d->ht_size_exp[0]));
        if (d->ht_size_exp[0] == d->ht_size_exp[1])
            return fail(err, errlen, "rehashing between tables of equal size");
    }
    if (d->pauseAutoResize < 0) return fail(err, errlen, "pauseAutoResize < 0");

    for (int t = 0; t <= 1; t++) {
        unsigned long size = DICTHT_SIZE(d->ht_size_exp[t]), mask = size - 1, count = 0;
        for (unsigned long i = 0; i < size; i++) {
            dictEntry *de = d->ht_table[t][i];
            if (t == 0 && (long)i < d->rehashidx && de != NULL)
                return fail(err, errlen, "table 0 bucket %lu below rehashidx %ld not empty", i,
                            d->rehashidx);
            while (de) {
                uintptr_t p = (uintptr_t)de;
                void *stored;
                dictEntry *next;
                if (entryIsNode(de)) {
                    size_t need = d->type->no_value ? 16 : 24;
                    if (!ksArenaOwns(d->arena, de) || ksArenaUsableSize(d->arena, de) < need)
                        return fail(err, errlen, "t%d b%lu: node %p not a live arena block", t, i,
                                    (void *)de);
                    stored = de->key;
                    next = de->next;
                } else if (entryIsEmbedded(de)) {
                    if (!d->type->embeds_next)
                        return fail(err, errlen, "t%d b%lu: embedded item %p in a dict of nodes",
                                    t, i, (void *)de);
                    stored = decodeItem(de);
                    next = nextOf(d, de);
                } else {
                    if (!d->type->no_value || d->type->embeds_next)
                        return fail(err, errlen, "t%d b%lu: tagged pointer %p in a value dict", t,
                                    i, (void *)de);
                    if (d->type->keys_are_odd ? !(p & 1) : (p & ENTRY_PTR_MASK) != ENTRY_PTR_IS_EVEN_KEY)
                        return fail(err, errlen, "t%d b%lu: bad tag bits in %p", t, i, (void *)de);
                    stored = decodeItem(de);
                    next = NULL;
                }
                ksLoadId kd;
                uint64_t h = hashStored(d, stored, 0);
                if ((h & mask) != i)
                    return fail(err, errlen, "t%d: item in bucket %lu, its hash says %lu", t, i,
                                (unsigned long)(h & mask));
                /* Duplicates: the rest of this chain, and table 1 when in table 0. */
                const void *key = keyOfStored(d, stored, 0, &kd);
                for (dictEntry *o = next; o; o = nextOf(d, o)) {
                    void *os = dictEntryStored(o);
                    if (compareKeys(d, key, os, 0))
                        return fail(err, errlen, "t%d b%lu: key stored twice", t, i);
                }
                if (t == 0 && d->ht_table[1]) {
                    unsigned long j = h & DICTHT_SIZE_MASK(d->ht_size_exp[1]);
                    for (dictEntry *o = d->ht_table[1][j]; o; o = nextOf(d, o)) {
                        void *os = dictEntryStored(o);
                        if (compareKeys(d, key, os, 0))
                            return fail(err, errlen, "key in both tables");
                    }
                }
                count++;
                de = next;
            }
        }
        if (count != d->ht_used[t])
            return fail(err, errlen, "table %d: used %lu but %lu entries", t, d->ht_used[t], count);
    }
    ksEmitResume();
    return 0;
}

void dictGetStats(const dict *d, dictStats *out) {
    memset(out, 0, sizeof(*out));
    out->rehashidx = d->rehashidx;
    for (int t = 0; t <= 1; t++) {
        unsigned long size = DICTHT_SIZE(d->ht_size_exp[t]);
        out->buckets[t] = size;
        out->used[t] = d->ht_used[t];
        for (unsigned long i = 0; i < size; i++) {
            size_t len = 0;
            for (dictEntry *de = d->ht_table[t][i]; de; de = nextOf(d, de)) {
                len++;
                if (entryIsNode(de))
                    out->nodes++;
                else if (entryIsEmbedded(de))
                    out->embedded_items++;
                else
                    out->direct_items++;
            }
            if (len) out->nonempty_buckets[t]++;
            if (len > out->max_chain[t]) out->max_chain[t] = len;
        }
    }
}

/* --- Accessors for dict_prefetch.c ------------------------------------------------------ */

dictType *dictGetType(const dict *d) { return d->type; }
uint64_t dictGetHash(const dict *d, const void *key) { return hashKey(d, key); }
ksLoadId dictMetaLoad(const dict *d, uint16_t site) { return metaLoad(d, site); }
dictEntry **dictTableCell(const dict *d, int table, uint64_t hash) {
    if (d->ht_table[table] == NULL) return NULL;
    return &d->ht_table[table][hash & DICTHT_SIZE_MASK(d->ht_size_exp[table])];
}
int dictCompareKeys(const dict *d, const void *key, const void *stored, ksLoadId dep) {
    return compareKeys(d, key, stored, dep);
}
void *dictReadEntry(const dict *d, const dictEntry *de, ksLoadId dep, uint16_t site,
                    dictEntry **next, ksLoadId *item_dep, ksLoadId *next_dep) {
    return readEntry(d, de, dep, site, next, item_dep, next_dep);
}
uint8_t dictItemTag(const dict *d) { return itemTag(d); }
