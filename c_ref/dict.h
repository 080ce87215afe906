/*
 * dict.h -- Redis-style chained hash table (the `table=dict` keyspace backend).
 *
 * A model of Redis 8.4 `src/dict.c` and of the dictPrefetcher of Redis PR
 * #15133 (`src/memory_prefetch.c`; see FIDELITY.md), allocating from a ksArena and
 * recording every touch of its own memory through the emitter (emit.h).  The
 * design essay, with diagrams, is at the top of dict.c.
 *
 * Terminology
 *   stored item  what the dict stores for one key, opaque to the dict: in the
 *                keyspace a kvobj (layout=unified) or a legacy {key, val} entry
 *                (layout=legacy), both in no_value dicts (table_dict.c); in a
 *                value dict (Redis <= 7 style 24-byte dictEntry) an sds key.
 *   key          what lookups are made with (e.g. an sds).  The type's
 *                entryGetKey() maps a stored item to its key; NULL = identity.
 *   entry        a dictEntry *: a pointer to a 16-byte NoValue node or a 24-byte
 *                node with a value, or (no_value dicts) a *tagged* stored item
 *                sitting directly in a bucket cell or at the end of a chain, or
 *                (embeds_next dicts) a tagged stored item that carries its own
 *                `next` field, Redis 7's dictEntry{key, v, next}.
 *                Read it only through dictGetKey / dictGetVal / dictGetNext.
 *   link         a dictEntry ** : a bucket cell or the `next` field of a node.
 *
 * Dependencies in the trace: every callback that may touch memory receives the
 * id of the load whose value produced the pointer it is given (ksLoadId, 0 =
 * none), and returns the id of its own producing load where a pointer flows
 * back, so that the emitted trace links bucket cell -> node -> object -> key.
 *
 * Conventions: public names dictXxx (camelCase), macros DICT_XXX; return codes
 * DICT_OK / DICT_ERR where Redis has them.  No dict function may be called
 * between the two phases of a two-phase operation unless stated.
 */
#ifndef KS_DICT_H
#define KS_DICT_H

#include <stddef.h>
#include <stdint.h>

#include "arena.h"
#include "emit.h"

#define DICT_OK 0
#define DICT_ERR 1

#define DICT_HT_INITIAL_EXP 2 /* 4 buckets, the smallest table */
#define DICT_HT_INITIAL_SIZE (1UL << DICT_HT_INITIAL_EXP)

typedef struct dict dict;
typedef struct dictEntry dictEntry; /* opaque; may be a tagged stored item */
typedef dictEntry **dictEntryLink;

/* --- Type (callbacks) ------------------------------------------------------ */
typedef struct dictType {
    /* Same callback shapes as hashtableType (hashtable.h), so the keyspace fills
     * both from the same functions.
     * Key of a stored item (kvobj -> its embedded sds).  `dep` produced the
     * stored pointer; *key_dep (may be NULL) receives the id of the load that
     * produced the key's address.  NULL callback: the stored item is the key. */
    const void *(*entryGetKey)(const void *stored, ksLoadId dep, ksLoadId *key_dep);
    /* Hash of a lookup key (SipHash in the keyspace); records nothing (callers
     * record reading the key).  NULL: the pointer value is hashed. */
    uint64_t (*hashFunction)(const void *key);
    /* Hash of a stored item, recording the reads (rehash on expand, Redis's
     * storedHashFunction).  NULL: hashFunction(entryGetKey(stored)). */
    uint64_t (*entryHash)(const void *stored, ksLoadId dep);
    /* 0 if equal (Valkey convention; Redis's dictCompareKeys is the negation).
     * key2 is a stored key whose address came from load key2_dep.  NULL:
     * pointer identity only. */
    int (*keyCompare)(const void *key1, const void *key2, ksLoadId key2_dep);
    /* Called on the stored item / the value when an entry is freed (optional). */
    void (*entryDestructor)(void *stored);
    void (*valDestructor)(void *val);
    /* dictPrefetcher hints (PR #15133).  prefetchEntryKey: an address to
     * prefetch in state ENTRY_KEY (NULL = nothing, no yield).  NULL callback:
     * prefetch the stored item when the entry is a node, nothing for a direct
     * (tagged) item, whose line the ENTRY state already prefetched.
     * prefetchEntryValue: the address to prefetch on a (presumed) hit, e.g.
     * kv->ptr of a RAW string (Redis dbDictPrefetchEntryValue); NULL callback or
     * NULL result: none.  `stored` is the entry's item, produced by load `dep`;
     * the callback records the reads it makes to find the address and returns
     * in *addr_dep the load that produced it, in *tag its structure tag. */
    const void *(*prefetchEntryKey)(const dict *d, const dictEntry *de);
    const void *(*prefetchEntryValue)(const dict *d, const void *stored, ksLoadId dep,
                                      ksLoadId *addr_dep, uint8_t *tag);
    /* Veto for a resize to `buckets` buckets (cf. dictTypeResizeAllowed). */
    int (*resizeAllowed)(size_t more_mem, double used_ratio);
    unsigned int no_value : 1;     /* keys only: 16-byte nodes + direct items */
    unsigned int keys_are_odd : 1; /* stored items have odd addresses (sds) */
    unsigned int force_full_rehash : 1; /* rehash at once on resize */
    /* Redis 7's dictEntry{key, v, next}: each stored item is its own chain
     * node, with its `next` pointer at byte embedded_next_offset (no_value,
     * 8-aligned items; no node is ever allocated). */
    unsigned int embeds_next : 1;
    uint8_t embedded_next_offset;
} dictType;

/* --- Resize policy (global, as in Redis) ------------------------------------ */
typedef enum {
    DICT_RESIZE_ENABLE, /* expand at used >= buckets, shrink at used*8 <= buckets */
    DICT_RESIZE_AVOID,  /* a fork child exists: only at ratio 4 / 32, rehash likewise */
    DICT_RESIZE_FORBID, /* inside the child: never resize, never rehash */
} dictResizeEnable;
void dictSetResizeEnabled(dictResizeEnable enable);
dictResizeEnable dictGetResizeEnabled(void);
#define DICT_FORCE_RESIZE_RATIO 4 /* dict_force_resize_ratio in 8.4 */
#define DICT_HT_MIN_FILL 8        /* HASHTABLE_MIN_FILL */

/* --- Lifecycle and sizing ----------------------------------------------------- */
/* A new empty dict (no table until the first insert or expand). */
dict *dictCreate(dictType *type, ksArena *arena);
/* Free every node, both tables and the dict; calls the destructors. */
void dictRelease(dict *d);
/* Start a resize to the next power of two >= size (>= 4 buckets).  DICT_ERR if
 * rehashing, if size < used, or if the size would not change.  A new table on an
 * empty dict becomes table 0 at once; otherwise incremental rehashing starts. */
int dictExpand(dict *d, size_t size);
int dictShrink(dict *d, size_t size);
/* The automatic policy checks run on insert / delete (exposed for tests). */
int dictExpandIfNeeded(dict *d);
int dictShrinkIfNeeded(dict *d);
/* Move up to n non-empty buckets, visiting at most n*10 empty ones.  Returns 1
 * if rehashing is still in progress afterwards, 0 if done (or not possible). */
int dictRehash(dict *d, int n);
/* dictRehash(d,100) until done or `us` microseconds passed (wall clock, so
 * not deterministic: native runs only).  Returns 100 x the rounds that left
 * rehashing in progress, as Redis does.  Nothing while rehashing is paused. */
int dictRehashMicroseconds(dict *d, uint64_t us);
/* Deterministic stand-in: dictRehash(d,100) at most `rounds` times.  Returns 1
 * if still rehashing. */
int dictRehashRounds(dict *d, int rounds);
void dictPauseRehashing(dict *d);
void dictResumeRehashing(dict *d);
void dictPauseAutoResize(dict *d);
void dictResumeAutoResize(dict *d);

size_t dictSize(const dict *d);    /* ht_used[0] + ht_used[1] */
size_t dictBuckets(const dict *d); /* buckets in both tables */
int dictIsRehashing(const dict *d);
int dictIsRehashingPaused(const dict *d);
long dictRehashIndex(const dict *d);
/* Bytes of the dict's own memory: struct + tables + nodes, by size class. */
size_t dictMemUsage(const dict *d);

/* --- Entries ------------------------------------------------------------------- */
/* The stored item of an entry (decodes a direct item; loads node->key). */
void *dictGetKey(const dictEntry *de);
/* The same without recording a load: for callers whose traced path has just
 * read the entry (dictReadEntry, a lookup, an iterator step). */
void *dictEntryStored(const dictEntry *de);
void *dictGetVal(const dictEntry *de); /* value dicts only */
void dictSetVal(dict *d, dictEntry *de, void *val);
dictEntry *dictGetNext(const dictEntry *de); /* nodes only; NULL for an item */
int dictEntryIsKey(const dictEntry *de);     /* 1 if a tagged direct item */
int dictEntryIsNode(const dictEntry *de);    /* 1 if a (NoValue) node */

/* --- Lookup and insert ----------------------------------------------------------- */
/* The entry holding `key`, or NULL.  Runs one rehash step first (bucket-targeted
 * when possible, see _dictRehashStepIfNeeded in dict.c). */
dictEntry *dictFind(dict *d, const void *key);
/* Same with a precomputed hash (dictGetHash): hash once, reuse. */
dictEntry *dictFindWithHash(dict *d, const void *key, uint64_t hash);
/* dictFind returning the stored item, and in *dep (optional) the id of the load
 * that produced it, so the caller's object reads chain onto the dict's. */
void *dictFetchStored(dict *d, const void *key, ksLoadId *dep);

void *dictFetchStoredWithHash(dict *d, const void *key, uint64_t hash, ksLoadId *dep);
/* Prefetch the bucket cell an insert with this hash goes to (table 1 while
 * rehashing): the snapshot-load variants' helper. */
void dictPrefetchBucket(dict *d, uint64_t hash);
/* Redis PR #15043 msetPrefetchBatch, for one key: hash it (dictGetHash) and
 * prefetch its bucket cell in ht_table[0], and in ht_table[1] too while
 * rehashing.  Nothing beyond the cells (no chain, no object). */
void dictPrefetchBucketCells(dict *d, const void *key);

/* Two-phase insert, link flavour (Redis dictFindLink / dictSetKeyAtLink).
 * dictFindLink returns the link of the matching entry or NULL; if `bucket` is
 * given it receives the bucket cell where the key would be inserted (NULL only
 * if the dict has no table).  dictSetKeyAtLink(d, stored, &link, newItem):
 *   newItem=1: link must come from a missed dictFindLink (or be NULL); expands
 *     if needed and re-finds the bucket if the tables changed; inserts at the
 *     chain head; on return *link is the new entry's link.
 *   newItem=0: link is a hit; replaces the stored item in place (tag kept), e.g.
 *     after the object was reallocated.
 * Nothing may touch the dict between the two calls. */
dictEntryLink dictFindLink(dict *d, const void *key, dictEntryLink *bucket);
/* dictFindLink with a precomputed hash; *item_dep (optional) = the load that
 * produced the matching stored item. */
dictEntryLink dictFindLinkWithHash(dict *d, const void *key, uint64_t hash,
                                   dictEntryLink *bucket, ksLoadId *item_dep);
void dictSetKeyAtLink(dict *d, void *stored, dictEntryLink *link, int newItem);

/* Two-phase insert, position flavour (Redis dictFindPositionForInsert /
 * dictInsertAtPosition, Valkey-like shape).  Returns NULL if the key exists
 * (*existing, optional, gets the entry), else an opaque position. */
void *dictFindPositionForInsert(dict *d, const void *key, dictEntry **existing);
void *dictFindPositionForInsertWithHash(dict *d, const void *key, uint64_t hash,
                                        dictEntry **existing);
dictEntry *dictInsertAtPosition(dict *d, void *stored, void *position);

/* Add `stored` (its key from entryGetKey) with `val` (value dicts; ignored in
 * no_value dicts).  DICT_ERR if the key exists. */
int dictAdd(dict *d, void *stored, void *val);
/* Add or find: returns the new entry, or NULL with *existing set. */
dictEntry *dictAddRaw(dict *d, void *stored, dictEntry **existing);

/* --- Delete ------------------------------------------------------------------------ */
/* Remove and free (destructors run).  DICT_ERR if not found.  May shrink. */
int dictDelete(dict *d, const void *key);
/* Unlink without the entry destructor (Redis dictUnlink, then free the node);
 * *stored (optional) gets the item, now the caller's.  Value dicts: the value
 * lives in the node, so valDestructor still runs.  May shrink.  DICT_ERR if
 * not found. */
int dictPop(dict *d, const void *key, uint64_t hash, void **stored);
/* Two-phase unlink: find pauses rehashing and returns the link (or NULL);
 * free unlinks, frees, may shrink and resumes rehashing.  The caller may read
 * the entry between the phases but not call any other dict function. */
dictEntryLink dictTwoPhaseUnlinkFind(dict *d, const void *key, int *table_index);
void dictTwoPhaseUnlinkFree(dict *d, dictEntryLink link, int table_index);

/* --- Iterators ------------------------------------------------------------------ */
/* Caller-stack opaque state.  Unsafe: only dictNext may be called on the dict
 * until dictResetIterator, which asserts the fingerprint is unchanged.  Safe:
 * rehashing and auto-resize are paused; the caller may delete the returned
 * entry or add entries (added ones may or may not be returned). */
typedef struct { uint64_t opaque[8]; } dictIterator;
void dictInitIterator(dictIterator *iter, dict *d);
void dictInitSafeIterator(dictIterator *iter, dict *d);
dictEntry *dictNext(dictIterator *iter);
/* hashtableNext-shaped: 1 and *stored (+ *dep, optional) or 0 at the end. */
int dictNextStored(dictIterator *iter, void **stored, ksLoadId *dep);
void dictResetIterator(dictIterator *iter);
uint64_t dictFingerprint(const dict *d);

/* --- Scan --------------------------------------------------------------------- */
/* Visit the entries of one cursor position (and, while rehashing, its
 * expansions in the larger table); returns the next cursor, 0 when complete.
 * Guarantee: an entry present from the start to the end of a full scan is
 * returned at least once, across any resizes between calls (it may be returned
 * more than once).  The callback may delete the entry it is given (rehashing
 * and auto-resize are paused during the call). */
typedef void dictScanFunction(void *privdata, const dictEntry *de);
unsigned long dictScan(dict *d, unsigned long cursor, dictScanFunction *fn, void *privdata);

/* --- Incremental find and the dictPrefetcher (PR #15133) ------------------------ */
/* States, named exactly as in Redis (and the Python model). */
typedef enum {
    DICT_PREFETCH_BUCKET = 0,  /* prefetch &ht_table[t][idx] (t = 0, then 1 if rehashing) */
    DICT_PREFETCH_ENTRY,       /* read the cell / next; prefetch the (tagged) entry */
    DICT_PREFETCH_ENTRY_KEY,   /* prefetchEntryKey hint: yields only if it prefetched */
    DICT_PREFETCH_ENTRY_VALUE, /* compare (or assume a hit); prefetchEntryValue */
    DICT_PREFETCH_DONE,
    DICT_PREFETCH_NUM_STATES
} dictPrefetchState;
const char *dictPrefetchStateName(dictPrefetchState s); /* "BUCKET", ... "DONE" */

/* One key's lookup state (caller stack). */
typedef struct { uint64_t opaque[10]; } dictIncrementalFindState;
/* Hashes the key now.  A NULL or empty dict gives DONE at once.  No dict
 * mutation is allowed between Init and the last GetResult. */
void dictIncrementalFindInit(dictIncrementalFindState *s, dict *d, const void *key);
void dictIncrementalFindInitWithHash(dictIncrementalFindState *s, dict *d, const void *key,
                                     uint64_t hash);
/* One turn: at most one prefetch.  Returns 1 if more work remains. */
int dictIncrementalFindStep(dictIncrementalFindState *s);
/* 1 and *found if the key is in the dict.  A hit presumed by the "last node and
 * not rehashing" shortcut is verified here with a key compare (the compare the
 * real lookup would do), so the result always equals dictFind's. */
int dictIncrementalFindGetResult(dictIncrementalFindState *s, dictEntry **found);
dictPrefetchState dictIncrementalFindGetState(const dictIncrementalFindState *s);

#define DICT_PREFETCH_MAX_SIZE 64 /* keys per dictPrefetcher (stack array in Redis) */
#define DICT_PREFETCH_BATCH_SIZE 16 /* PREFETCH_BATCH_SIZE for MGET/MSET/ZMSCORE */
typedef struct dictPrefetcher {
    dictIncrementalFindState lookups[DICT_PREFETCH_MAX_SIZE];
    size_t n;         /* keys in this batch */
    size_t remaining; /* keys not DONE */
    size_t cursor;    /* round-robin position (wraps) */
} dictPrefetcher;
/* Start a batch of n <= 64 keys; dicts[i] may be NULL (slot without a table). */
void dictPrefetcherReset(dictPrefetcher *p, dict **dicts, const void *const *keys, size_t n);
void dictPrefetcherSetTableDep(dictPrefetcher *p, size_t i, ksLoadId dep);
/* One step (at most one prefetch) of the key at the cursor (skipping DONE ones);
 * the cursor moves on only if the step prefetched or finished the key (Redis
 * #15133).  1 while keys remain. */
int dictPrefetcherStep(dictPrefetcher *p);
/* Step until every key is DONE. */
void dictPrefetcherRun(dictPrefetcher *p);
int dictPrefetcherGetResult(dictPrefetcher *p, size_t i, dictEntry **found);
/* Redis dictPrefetchKeys: no-op for n <= 1, else Reset + Run. */
void dictPrefetchKeys(dict **dicts, const void *const *keys, size_t n);
/* prefetchNextBatchSize: `batch` if remaining >= 2*batch, else all remaining. */
size_t dictPrefetchNextBatchSize(size_t remaining, size_t batch);

/* --- Validation and statistics ------------------------------------------------- */
/* Check every invariant (see dict.c "Validation").  0 if valid, else -1 with a
 * message in err.  Records nothing in the trace. */
int dictCheckValid(dict *d, char *err, size_t errlen);

typedef struct dictStats {
    size_t buckets[2], used[2];
    size_t nonempty_buckets[2];
    size_t max_chain[2];
    size_t direct_items; /* tagged items stored in a cell or chain end */
    size_t embedded_items; /* embeds_next items (their own nodes) */
    size_t nodes;        /* allocated dictEntry / NoValue nodes */
    long rehashidx;
} dictStats;
void dictGetStats(const dict *d, dictStats *out);

/* --- Accessors (used by dict_prefetch.c; fine for drivers too) ------------------ */
dictType *dictGetType(const dict *d);
uint64_t dictGetHash(const dict *d, const void *key); /* hashFunction(key) */
/* One traced load of the dict struct fields Redis reads; returns its id. */
ksLoadId dictMetaLoad(const dict *d, uint16_t site);
/* &ht_table[table][hash & mask], or NULL if that table does not exist. */
dictEntry **dictTableCell(const dict *d, int table, uint64_t hash);
/* Pointer identity, then keyCompare(key, entryGetKey(stored)) == 0.  Non-zero =
 * equal (Redis's dictCompareKeys convention). */
int dictCompareKeys(const dict *d, const void *key, const void *stored, ksLoadId dep);
/* Traced read of one chain element (`dep` produced `de`): returns the stored
 * item, its successor (NULL after a direct item), the id of the load that
 * produced the item pointer and the one that produced `next`. */
void *dictReadEntry(const dict *d, const dictEntry *de, ksLoadId dep, uint16_t site,
                    dictEntry **next, ksLoadId *item_dep, ksLoadId *next_dep);
/* Structure tag of a direct item's line: KEY (keys_are_odd) or OBJECT. */
uint8_t dictItemTag(const dict *d);

#endif /* KS_DICT_H */
