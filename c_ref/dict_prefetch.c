/*
 * dict_prefetch.c -- incremental find and the dictPrefetcher of Redis PR #15133.
 *
 * Batched commands (MGET, MSET, ZMSCORE, and the cross-command I/O-thread
 * path) warm the cache lines a batch of lookups will touch before running
 * them: each key advances through a small state machine that issues at most
 * one software prefetch per turn, and the driver visits the keys round-robin
 * so the prefetches of different keys overlap (memory-level parallelism).
 * Upstream: Redis `src/memory_prefetch.c` after PR #15133 (FIDELITY.md).
 *
 *            +-----------+  no (more) table               +------+
 *   init --->|  BUCKET   |------------------------------->| DONE |
 *   (hash)   +-----------+  prefetch &ht_table[t][idx]    +------+
 *                 |  ^                                       ^  ^
 *                 v  | cell / next is NULL                   |  |
 *            +-----------+                                   |  |
 *            |   ENTRY   |  read the cell (or node->next);   |  |
 *            +-----------+  prefetch the entry AS TAGGED     |  |
 *                 |   ^                                      |  |
 *                 v   | miss                                 |  |
 *            +-----------+  prefetchEntryKey(de): prefetch   |  |
 *            | ENTRY_KEY |  and yield, or NULL: fall through |  |
 *            +-----------+                                   |  |
 *                 v                                          |  |
 *            +-------------+  last node and not rehashing:   |  |
 *            | ENTRY_VALUE |  assume a hit, no compare;      |  |
 *            +-------------+  else compare.  hit ->          |  |
 *                            prefetchEntryValue(de) ---------+  |
 *   init with a NULL or empty dict -----------------------------+
 *
 * Turn rules (Redis #15133; what the Python model's dict_prefetch_keys mirrors):
 * a key keeps the turn until one of its steps issues a prefetch or it is DONE;
 * only then does the cursor move to the next key.  So BUCKET with no table
 * left goes to DONE (turn ends: key finished); ENTRY with the chain exhausted
 * goes back to BUCKET and the same key continues (table 1 when rehashing, else
 * DONE); ENTRY_KEY without a prefetch continues with ENTRY_VALUE; an
 * ENTRY_VALUE miss continues with ENTRY; a hit is DONE (with or without a
 * value prefetch).  dictIncrementalFindStep is one state step (ENTRY_KEY falls
 * through to ENTRY_VALUE when it issued nothing); dictPrefetcherStep is one
 * such step of the key at the cursor, and leaves the cursor on that key when
 * the step issued no prefetch.  BUCKET does not skip table-0 buckets below
 * rehashidx (Redis does not: the cell is simply empty).  The machine never
 * rehashes and never writes the dict.
 *
 * Driver: up to DICT_PREFETCH_MAX_SIZE (64) keys; a wrapping cursor visits the
 * keys that are not DONE; a `remaining` counter ends the run.  Callers split
 * large commands with dictPrefetchNextBatchSize (16, or the whole remainder
 * when fewer than 32 are left, so chunks are 16 or 16..31).
 *
 * kvsim addition: results.  Redis discards the outcome (the command then does
 * its own lookup).  GetResult reports it, verifying a presumed hit with the key
 * compare (recording nothing), so tests can check prefetch == dictFind.
 *
 * Conventions: as dict.c.  Only dict.h is used (no dict internals).
 */
#include <assert.h>
#include <string.h>

#include "dict.h"

typedef struct {
    dict *d;
    const void *key;
    uint64_t hash;
    dictEntry *current; /* entry under examination; NULL before the first */
    dictEntry *found;   /* (presumed) hit */
    uint64_t bucket_idx;
    ksLoadId cur_dep; /* load that produced `current` (cell or previous node) */
    ksLoadId meta_dep;
    ksLoadId found_dep; /* load that produced the (presumed) hit's item pointer */
    uint8_t state;  /* dictPrefetchState */
    int8_t ht_idx;  /* -1 before the first BUCKET, then 0 or 1 */
    uint8_t presumed; /* found by the last-node shortcut, not compared */
} lookup;
static_assert(sizeof(lookup) <= sizeof(dictIncrementalFindState),
              "dictIncrementalFindState covers the per-key state");

static const char *const state_names[DICT_PREFETCH_NUM_STATES] = {
    "BUCKET", "ENTRY", "ENTRY_KEY", "ENTRY_VALUE", "DONE",
};

const char *dictPrefetchStateName(dictPrefetchState s) {
    return (unsigned)s < DICT_PREFETCH_NUM_STATES ? state_names[s] : "?";
}

/* --- One key: Init / Step / GetResult ------------------------------------------- */

void dictIncrementalFindInitWithHash(dictIncrementalFindState *st, dict *d, const void *key,
                                     uint64_t hash) {
    lookup *l = (lookup *)st;
    memset(l, 0, sizeof(*l));
    l->d = d;
    l->key = key;
    l->hash = hash;
    l->ht_idx = -1;
    l->meta_dep = KS_TAKE_TABLE_DEP(); /* until the first bucket step: the slot chase */
    l->state = (d == NULL || dictSize(d) == 0) ? DICT_PREFETCH_DONE : DICT_PREFETCH_BUCKET;
    if (l->state != DICT_PREFETCH_DONE) assert(dictTableCell(d, 0, 0) != NULL);
}

void dictIncrementalFindInit(dictIncrementalFindState *st, dict *d, const void *key) {
    uint64_t hash = (d == NULL || dictSize(d) == 0) ? 0 : dictGetHash(d, key);
    dictIncrementalFindInitWithHash(st, d, key, hash);
}

dictPrefetchState dictIncrementalFindGetState(const dictIncrementalFindState *st) {
    return (dictPrefetchState)((const lookup *)st)->state;
}

/* Each step returns 1 if it issued a prefetch. */
static int stepBucket(lookup *l) {
    if (l->ht_idx == -1) {
        l->ht_idx = 0;
    } else if (l->ht_idx == 0 && dictIsRehashing(l->d)) {
        l->ht_idx = 1;
    } else {
        l->state = DICT_PREFETCH_DONE;
        return 0;
    }
    KS_SET_TABLE_DEP(l->ht_idx == 0 ? l->meta_dep : 0);
    l->meta_dep = dictMetaLoad(l->d, KS_SITE_DICT_PREFETCH);
    dictEntry **cell = dictTableCell(l->d, l->ht_idx, l->hash);
    KS_PREFETCH(cell, KVT_TAG_DICT_TABLE, KS_SITE_DICT_PREFETCH, l->meta_dep);
    l->current = NULL;
    l->state = DICT_PREFETCH_ENTRY;
    return 1;
}

static int stepEntry(lookup *l) {
    if (l->current) {
        dictEntry *next;
        ksLoadId idep, ndep;
        dictReadEntry(l->d, l->current, l->cur_dep, KS_SITE_DICT_PREFETCH, &next, &idep, &ndep);
        l->current = next;
        l->cur_dep = ndep;
    } else {
        dictEntry **cell = dictTableCell(l->d, l->ht_idx, l->hash);
        l->cur_dep = KS_LOAD(cell, 8, KVT_TAG_DICT_TABLE, KS_SITE_DICT_PREFETCH, l->meta_dep);
        l->current = *cell;
    }
    if (l->current) {
        /* The tagged value: for a direct item, the object's first line. */
        KS_PREFETCH(l->current,
                    dictEntryIsNode(l->current) ? KVT_TAG_DICT_ENTRY : dictItemTag(l->d),
                    KS_SITE_DICT_PREFETCH, l->cur_dep);
        l->state = DICT_PREFETCH_ENTRY_KEY;
        return 1;
    }
    l->state = DICT_PREFETCH_BUCKET;
    return 0;
}

/* Returns 1 if it prefetched (the turn ends). */
static int stepEntryKey(lookup *l) {
    const dictType *type = dictGetType(l->d);
    const void *addr = NULL;
    ksLoadId dep = l->cur_dep;
    if (type->prefetchEntryKey) {
        addr = type->prefetchEntryKey(l->d, l->current);
    } else if (dictEntryIsNode(l->current)) {
        dictEntry *next;
        ksLoadId ndep;
        addr = dictReadEntry(l->d, l->current, l->cur_dep, KS_SITE_DICT_PREFETCH, &next, &dep,
                             &ndep);
    }
    l->state = DICT_PREFETCH_ENTRY_VALUE;
    if (addr == NULL) return 0;
    KS_PREFETCH(addr, dictItemTag(l->d), KS_SITE_DICT_PREFETCH, dep);
    return 1;
}

static int stepEntryValue(lookup *l) {
    dictEntry *next;
    ksLoadId idep, ndep;
    void *stored =
        dictReadEntry(l->d, l->current, l->cur_dep, KS_SITE_DICT_PREFETCH, &next, &idep, &ndep);
    int is_last = next == NULL && !dictIsRehashing(l->d);
    if (is_last) {
        l->presumed = 1; /* Redis skips the compare: almost surely a hit */
    } else if (!dictCompareKeys(l->d, l->key, stored, idep)) {
        l->state = DICT_PREFETCH_ENTRY;
        return 0;
    }
    l->found = l->current;
    l->found_dep = idep;
    const dictType *type = dictGetType(l->d);
    int issued = 0;
    if (type->prefetchEntryValue) {
        ksLoadId adep = idep;
        uint8_t tag = KVT_TAG_VALUE;
        const void *addr = type->prefetchEntryValue(l->d, stored, idep, &adep, &tag);
        if (addr) {
            KS_PREFETCH(addr, tag, KS_SITE_DICT_PREFETCH_VALUE, adep);
            issued = 1;
        }
    }
    l->state = DICT_PREFETCH_DONE;
    return issued;
}

/* One state step; 1 if it issued a prefetch. */
static int stepOnce(lookup *l) {
    switch ((dictPrefetchState)l->state) {
    case DICT_PREFETCH_BUCKET: return stepBucket(l);
    case DICT_PREFETCH_ENTRY: return stepEntry(l);
    case DICT_PREFETCH_ENTRY_KEY:
        if (stepEntryKey(l)) return 1;
        return stepEntryValue(l); /* no prefetch issued: same key goes on */
    case DICT_PREFETCH_ENTRY_VALUE: return stepEntryValue(l);
    case DICT_PREFETCH_DONE:
    case DICT_PREFETCH_NUM_STATES: break;
    }
    return 0;
}

int dictIncrementalFindStep(dictIncrementalFindState *st) {
    lookup *l = (lookup *)st;
    stepOnce(l);
    return l->state != DICT_PREFETCH_DONE;
}

int dictIncrementalFindGetResult(dictIncrementalFindState *st, dictEntry **found) {
    lookup *l = (lookup *)st;
    while (dictIncrementalFindStep(st)) {
    }
    if (l->found && l->presumed) {
        /* Verify the shortcut's guess outside the trace (Redis never does). */
        ksEmitPause();
        dictEntry *next;
        ksLoadId idep, ndep;
        void *stored = dictReadEntry(l->d, l->found, 0, KS_SITE_DICT_PREFETCH, &next, &idep, &ndep);
        if (!dictCompareKeys(l->d, l->key, stored, 0)) l->found = NULL;
        l->presumed = 0;
        ksEmitResume();
    }
    if (found) *found = l->found;
    if (l->found) KS_SET_ENTRY_DEP(l->found_dep);
    return l->found != NULL;
}

/* --- The batch driver ------------------------------------------------------------- */

void dictPrefetcherReset(dictPrefetcher *p, dict **dicts, const void *const *keys, size_t n) {
    assert(n <= DICT_PREFETCH_MAX_SIZE);
    p->n = n;
    p->remaining = 0;
    p->cursor = 0;
    for (size_t i = 0; i < n; i++) {
        dictIncrementalFindInit(&p->lookups[i], dicts[i], keys[i]);
        if (dictIncrementalFindGetState(&p->lookups[i]) != DICT_PREFETCH_DONE) p->remaining++;
    }
}

/* kvsim: the slot_table load that produced key i's dict pointer (traced
 * cluster per-slot tables); its first meta load depends on it.  Call after
 * dictPrefetcherReset, before stepping. */
void dictPrefetcherSetTableDep(dictPrefetcher *p, size_t i, ksLoadId dep) {
    lookup *l = (lookup *)&p->lookups[i];
    if (l->ht_idx == -1) l->meta_dep = dep;
}

int dictPrefetcherStep(dictPrefetcher *p) {
    if (p->remaining == 0) return 0;
    while (dictIncrementalFindGetState(&p->lookups[p->cursor]) == DICT_PREFETCH_DONE)
        p->cursor = (p->cursor + 1) % p->n;
    lookup *l = (lookup *)&p->lookups[p->cursor];
    int issued = stepOnce(l);
    if (l->state == DICT_PREFETCH_DONE) p->remaining--;
    /* Redis #15133: move to the next key only after a prefetch (or when done). */
    if (issued || l->state == DICT_PREFETCH_DONE) p->cursor = (p->cursor + 1) % p->n;
    return p->remaining > 0;
}

void dictPrefetcherRun(dictPrefetcher *p) {
    while (dictPrefetcherStep(p)) {
    }
}

int dictPrefetcherGetResult(dictPrefetcher *p, size_t i, dictEntry **found) {
    assert(i < p->n);
    return dictIncrementalFindGetResult(&p->lookups[i], found);
}

void dictPrefetchKeys(dict **dicts, const void *const *keys, size_t n) {
    if (n <= 1) return;
    dictPrefetcher p;
    dictPrefetcherReset(&p, dicts, keys, n);
    dictPrefetcherRun(&p);
}

size_t dictPrefetchNextBatchSize(size_t remaining, size_t batch) {
    return remaining >= 2 * batch ? batch : remaining;
}
