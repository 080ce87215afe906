/*
 * test_dict.c -- unit tests of the Redis-style dict (dict.c, dict_prefetch.c).
 *
 * Three dict types are exercised, matching the keyspace's uses:
 *   KV   no_value, 8-aligned stored items: a test "kvobj" (16-byte header, a
 *        header-size byte, then the key sds) -- direct items tagged 010;
 *   SDS  no_value, keys_are_odd: the stored item is the sds key itself;
 *   VAL  value dict (legacy layout): 24-byte dictEntry {next, key sds, val}.
 * A "collision mask" narrows the hash to force long chains and exercise the
 * tagging transitions.  dictCheckValid runs after every mutating step.
 *
 * Build: `make -C c_ref test` / `test-sanitize` (picked up as tests/test_*.c;
 * there it also runs the keyspace-level differential test table=dict vs
 * table=hashtable, and, with KS_TEST_TRACED_CORE, the traced-build checks
 * through the renamed tr_* core).  Standalone, dict only:
 *   cc -std=gnu11 -D_GNU_SOURCE -Wall -Wextra -fsanitize=address,undefined \
 *      c_ref/tests/test_dict.c c_ref/dict.c c_ref/dict_prefetch.c \
 *      c_ref/arena.c c_ref/emit.c c_ref/siphash.c -o test_dict
 * (add -DKS_TRACE=1 to trace everything and check the prefetcher's turn rule
 * and dependencies in the same process).
 * Flags: --seed N (default 1), --accurate (longer random runs).
 */
#include <assert.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../dict.h"
#include "../kvsim_cref.h"
#include "../sds.h"
#include "../siphash.h"

/* --- Harness ------------------------------------------------------------------ */

#define CHECK(c)                                                                            \
    do {                                                                                    \
        if (!(c)) {                                                                         \
            fprintf(stderr, "%s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #c);           \
            abort();                                                                        \
        }                                                                                   \
    } while (0)

#define VALID(d)                                                                            \
    do {                                                                                    \
        char err_[256];                                                                     \
        if (dictCheckValid((d), err_, sizeof(err_)) != 0) {                                 \
            fprintf(stderr, "%s:%d: dictCheckValid: %s\n", __FILE__, __LINE__, err_);       \
            abort();                                                                        \
        }                                                                                   \
    } while (0)

static uint64_t rng_state = 1;
static uint64_t rnd(void) { /* splitmix64 */
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}
static size_t rndn(size_t n) { return (size_t)(rnd() % n); }

static int accurate = 0;
static ksArena *A; /* the arena of the running test */
static uint8_t sipkey[16];
static uint64_t hash_mask = ~0ULL; /* narrow it to force collisions */
static size_t destroyed;           /* stored items freed by the destructor */

/* --- Items: sds keys, test kvobjs, values ---------------------------------------- */

static sds mkSds(const char *s) {
    size_t len = strlen(s);
    int type = sdsReqType(len);
    void *mem = ksArenaAlloc(A, sdsSize(type, len));
    return sdsWriteAt(mem, type, s, len, len);
}
static void freeSds(sds s) { ksArenaFree(A, sdsAllocPtr(s)); }

/* kvobj: [16 B header][1 B sds header size][sds header][key bytes]\0 */
static void *mkObj(const char *key) {
    size_t len = strlen(key);
    int type = sdsReqType(len);
    uint8_t *o = ksArenaAlloc(A, 16 + 1 + sdsSize(type, len));
    CHECK(((uintptr_t)o & 7) == 0);
    memset(o, 0xab, 16);
    o[16] = (uint8_t)sdsHdrSize(type);
    sdsWriteAt(o + 17, type, key, len, len);
    return o;
}
static const void *objKey(const void *o, ksLoadId dep, ksLoadId *key_dep) {
    const uint8_t *p = o;
    ksLoadId id = KS_LOAD(p, 17, KVT_TAG_OBJECT, KS_SITE_OBJ_HEADER, dep);
    if (key_dep) *key_dep = id;
    return p + 17 + p[16];
}
static void freeObj(void *o) {
    destroyed++;
    ksArenaFree(A, o);
}
static void freeSdsItem(void *s) {
    destroyed++;
    freeSds(s);
}
static void freeVal(void *v) { ksArenaFree(A, v); }

static uint64_t hashSds(const void *key) {
    return ksSiphash(key, sdslen(key), sipkey) & hash_mask;
}
static int cmpSds(const void *a, const void *b, ksLoadId dep) {
    size_t la = sdslen(a), lb = sdslen(b);
    (void)KS_LOAD(b, lb ? lb : 1, KVT_TAG_KEY, KS_SITE_OBJ_KEY, dep);
    return !(la == lb && memcmp(a, b, la) == 0);
}
static const void *pfValue(const dict *d, const void *stored, ksLoadId dep, ksLoadId *addr_dep,
                           uint8_t *tag) {
    (void)d;
    (void)stored;
    (void)dep;
    (void)addr_dep;
    (void)tag;
    return NULL;
}

static dictType T_KV = {
    .entryGetKey = objKey, .hashFunction = hashSds, .keyCompare = cmpSds,
    .entryDestructor = freeObj, .prefetchEntryValue = pfValue, .no_value = 1, .keys_are_odd = 0,
};
static dictType T_SDS = {
    .hashFunction = hashSds, .keyCompare = cmpSds, .entryDestructor = freeSdsItem,
    .no_value = 1, .keys_are_odd = 1,
};
static dictType T_VAL = {
    .hashFunction = hashSds, .keyCompare = cmpSds, .entryDestructor = freeSdsItem,
    .valDestructor = freeVal, .no_value = 0,
};
static dictType *const TYPES[3] = {&T_KV, &T_SDS, &T_VAL};
static const char *const TYPE_NAMES[3] = {"kv", "sds", "val"};

/* A stored item for `key` in a dict of type t. */
static void *mkItem(const dictType *t, const char *key) {
    return t == &T_KV ? mkObj(key) : (void *)mkSds(key);
}
/* The lookup key of a stored item (untraced). */
static const char *itemKey(const dictType *t, const void *item) {
    return t == &T_KV ? (const char *)objKey(item, 0, NULL) : (const char *)item;
}
static int add(dict *d, void *item) {
    void *val = NULL;
    if (!dictGetType(d)->no_value) {
        val = ksArenaAlloc(A, 16);
        memset(val, 0, 16);
    }
    int r = dictAdd(d, item, val);
    if (r != DICT_OK && val) ksArenaFree(A, val);
    return r;
}

static clock_t test_start;
static void beginTest(const char *name) {
    test_start = clock();
    printf("  %-40s", name);
    fflush(stdout);
    A = ksArenaCreate(0);
    CHECK(A != NULL);
    hash_mask = ~0ULL;
    destroyed = 0;
    dictSetResizeEnabled(DICT_RESIZE_ENABLE);
}
static void endTest(void) {
    char err[256];
    CHECK(ksArenaCheck(A, err, sizeof(err)) == 0);
    CHECK(ksArenaLiveAllocations(A) == 0); /* no leaks */
    ksArenaDestroy(A);
    A = NULL;
    dictSetResizeEnabled(DICT_RESIZE_ENABLE);
    printf("ok (%.2fs)\n", (double)(clock() - test_start) / CLOCKS_PER_SEC);
}

/* A model: key i is "k<i>", present[i], item[i] its stored item. */
typedef struct {
    size_t n;
    char (*names)[24];
    void **item;
} model;
static void modelInit(model *m, size_t n) {
    m->n = n;
    m->names = calloc(n, sizeof(*m->names));
    m->item = calloc(n, sizeof(void *));
    for (size_t i = 0; i < n; i++) snprintf(m->names[i], sizeof(m->names[i]), "k%zu", i);
}
static void modelFree(model *m) {
    free(m->names);
    free(m->item);
}
/* Lookup key for name i (a transient sds). */
static sds lk(model *m, size_t i) { return mkSds(m->names[i]); }

static void checkAll(dict *d, model *m) {
    size_t present = 0;
    dictPauseRehashing(d); /* do not let the checking lookups rehash */
    for (size_t i = 0; i < m->n; i++) {
        sds k = lk(m, i);
        dictEntry *de = dictFind(d, k);
        if (m->item[i]) {
            present++;
            CHECK(de != NULL && dictGetKey(de) == m->item[i]);
        } else {
            CHECK(de == NULL);
        }
        freeSds(k);
    }
    dictResumeRehashing(d);
    CHECK(dictSize(d) == present);
}

/* --- Basic operations ------------------------------------------------------------- */

static void test_basic(int ti) {
    char name[64];
    snprintf(name, sizeof(name), "basic ops (%s)", TYPE_NAMES[ti]);
    beginTest(name);
    dictType *t = TYPES[ti];
    dict *d = dictCreate(t, A);
    VALID(d);
    CHECK(dictSize(d) == 0 && dictBuckets(d) == 0);
    sds k = mkSds("nope");
    CHECK(dictFind(d, k) == NULL);
    CHECK(dictDelete(d, k) == DICT_ERR);
    void *a = mkItem(t, "alpha");
    CHECK(add(d, a) == DICT_OK);
    VALID(d);
    CHECK(dictSize(d) == 1 && dictBuckets(d) == DICT_HT_INITIAL_SIZE);
    void *a2 = mkItem(t, "alpha");
    CHECK(add(d, a2) == DICT_ERR); /* duplicate */
    (t->entryDestructor)(a2);
    sds ka = mkSds("alpha");
    dictEntry *de = dictFind(d, ka);
    CHECK(de && dictGetKey(de) == a);
    ksLoadId dep;
    CHECK(dictFetchStored(d, ka, &dep) == a);
    CHECK(dictFetchStored(d, k, &dep) == NULL);
    if (!t->no_value) {
        void *v = dictGetVal(de);
        CHECK(v != NULL);
    }
    CHECK(dictDelete(d, ka) == DICT_OK);
    CHECK(dictSize(d) == 0 && dictFind(d, ka) == NULL);
    VALID(d);
    freeSds(ka);
    freeSds(k);
    dictRelease(d);
    endTest();
}

/* --- Resize policy --------------------------------------------------------------- */

static void test_resize_policy(void) {
    beginTest("resize thresholds ENABLE/AVOID/FORBID");
    model m;
    modelInit(&m, 4096);
    dict *d = dictCreate(&T_KV, A);
    /* ENABLE: expand when used >= buckets, on the insert that finds it so. */
    for (size_t i = 0; i < 4; i++) CHECK(add(d, m.item[i] = mkObj(m.names[i])) == DICT_OK);
    CHECK(dictBuckets(d) == 4 && !dictIsRehashing(d));
    CHECK(add(d, m.item[4] = mkObj(m.names[4])) == DICT_OK); /* used 4 >= 4: 4 -> 8 */
    CHECK(dictIsRehashing(d) || dictBuckets(d) == 8);
    while (dictRehash(d, 100)) {
    }
    CHECK(dictBuckets(d) == 8);
    VALID(d);
    /* AVOID: no expand until used >= 4 * buckets. */
    dictSetResizeEnabled(DICT_RESIZE_AVOID);
    size_t i = 5;
    for (; i < 32; i++) CHECK(add(d, m.item[i] = mkObj(m.names[i])) == DICT_OK);
    CHECK(dictBuckets(d) == 8 && !dictIsRehashing(d));
    CHECK(add(d, m.item[i] = mkObj(m.names[i])) == DICT_OK); /* 32 >= 4*8 */
    i++;
    CHECK(dictIsRehashing(d)); /* 8 -> 64: ratio 8 >= 4, rehash allowed */
    CHECK(dictRehash(d, 1000) == 0 && dictBuckets(d) == 64);
    /* FORBID: never. */
    dictSetResizeEnabled(DICT_RESIZE_FORBID);
    for (; i < 600; i++) CHECK(add(d, m.item[i] = mkObj(m.names[i])) == DICT_OK);
    CHECK(dictBuckets(d) == 64 && !dictIsRehashing(d));
    VALID(d);
    checkAll(d, &m);
    /* Back to ENABLE: the next insert expands to next pow2 >= used+1. */
    dictSetResizeEnabled(DICT_RESIZE_ENABLE);
    CHECK(add(d, m.item[i] = mkObj(m.names[i])) == DICT_OK);
    i++;
    CHECK(dictIsRehashing(d));
    while (dictRehash(d, 100)) {
    }
    CHECK(dictBuckets(d) == 1024); /* used was 600: next pow2 >= 601 */
    /* Shrink (ENABLE): at used*8 <= buckets, to next pow2 >= used. */
    size_t live = i;
    for (size_t j = 0; live * 8 > 1024; j++, live--) {
        sds k = lk(&m, j);
        CHECK(dictDelete(d, k) == DICT_OK);
        m.item[j] = NULL;
        freeSds(k);
        CHECK(!dictIsRehashing(d) || live - 1 == 128);
    }
    CHECK(dictIsRehashing(d));
    while (dictRehash(d, 100)) {
    }
    CHECK(dictBuckets(d) == 128 && dictSize(d) == 128);
    VALID(d);
    /* AVOID shrink needs used*32 <= buckets, and rehash needs ratio >= 32. */
    dictSetResizeEnabled(DICT_RESIZE_AVOID);
    size_t j = 0;
    while (dictSize(d) > 4) {
        while (m.item[j] == NULL) j++;
        sds k = lk(&m, j);
        CHECK(dictDelete(d, k) == DICT_OK);
        m.item[j] = NULL;
        freeSds(k);
        if (dictSize(d) > 4) CHECK(!dictIsRehashing(d));
    }
    CHECK(dictIsRehashing(d)); /* 4*32 <= 128: shrink 128 -> 4 (ratio 32) */
    while (dictRehash(d, 100)) {
    }
    CHECK(dictBuckets(d) == 4);
    VALID(d);
    checkAll(d, &m);
    /* Never below 4; an emptied dict resets to 4 at once. */
    dictSetResizeEnabled(DICT_RESIZE_ENABLE);
    for (j = 0; j < m.n; j++) {
        if (!m.item[j]) continue;
        sds k = lk(&m, j);
        CHECK(dictDelete(d, k) == DICT_OK);
        m.item[j] = NULL;
        freeSds(k);
    }
    CHECK(dictSize(d) == 0 && dictBuckets(d) == 4);
    /* AVOID refuses to rehash an expand of ratio 2. */
    for (j = 0; j < 4; j++) CHECK(add(d, m.item[j] = mkObj(m.names[j])) == DICT_OK);
    CHECK(dictExpand(d, 8) == DICT_OK && dictIsRehashing(d));
    dictSetResizeEnabled(DICT_RESIZE_AVOID);
    CHECK(dictRehash(d, 100) == 0 && dictIsRehashing(d) && dictRehashIndex(d) == 0);
    dictSetResizeEnabled(DICT_RESIZE_FORBID);
    CHECK(dictRehash(d, 100) == 0 && dictIsRehashing(d));
    dictSetResizeEnabled(DICT_RESIZE_ENABLE);
    CHECK(dictRehashRounds(d, 10) == 0);
    /* Explicit expand/shrink errors. */
    CHECK(dictExpand(d, 2) == DICT_ERR);        /* < used */
    CHECK(dictExpand(d, 8) == DICT_ERR);        /* same size */
    CHECK(dictShrink(d, 100) == DICT_ERR);      /* not smaller */
    /* pauseAutoResize blocks the automatic expand. */
    dictPauseAutoResize(d);
    for (j = 4; j < 40; j++) CHECK(add(d, m.item[j] = mkObj(m.names[j])) == DICT_OK);
    CHECK(dictBuckets(d) == 8 && !dictIsRehashing(d));
    dictResumeAutoResize(d);
    CHECK(add(d, m.item[j] = mkObj(m.names[j])) == DICT_OK);
    CHECK(dictIsRehashing(d) || dictBuckets(d) == 64);
    VALID(d);
    checkAll(d, &m);
    dictRelease(d);
    modelFree(&m);
    endTest();
}

/* --- Rehashing ----------------------------------------------------------------------- */

static void test_rehash_empty_visits(void) {
    beginTest("dictRehash n*10 empty visits");
    model m;
    modelInit(&m, 1024);
    dict *d = dictCreate(&T_SDS, A);
    dictPauseAutoResize(d);
    CHECK(dictExpand(d, 1024) == DICT_OK && dictBuckets(d) == 1024);
    /* Five keys, all in buckets >= 40 of the 1024. */
    size_t n = 0;
    for (size_t i = 0; i < m.n && n < 5; i++) {
        sds k = lk(&m, i);
        uint64_t h = dictGetHash(d, k);
        freeSds(k);
        if ((h & 1023) < 40) continue;
        CHECK(add(d, m.item[i] = mkSds(m.names[i])) == DICT_OK);
        n++;
    }
    dictResumeAutoResize(d);
    CHECK(dictShrinkIfNeeded(d) == DICT_OK && dictIsRehashing(d));
    CHECK(dictRehash(d, 1) == 1);
    CHECK(dictRehashIndex(d) == 10); /* gave up after 10 empty buckets */
    CHECK(dictRehash(d, 2) == 1 && dictRehashIndex(d) == 30);
    VALID(d);
    while (dictRehash(d, 1)) VALID(d);
    CHECK(dictBuckets(d) == 8);
    checkAll(d, &m);
    dictRelease(d);
    modelFree(&m);
    endTest();
}

/* The lookup of a key whose table-0 bucket is non-empty and at or above
 * rehashidx rehashes that very bucket, leaving rehashidx alone. */
static void test_bucket_rehash_on_lookup(void) {
    beginTest("bucket-targeted rehash step on lookup");
    model m;
    modelInit(&m, 64);
    dict *d = dictCreate(&T_KV, A);
    dictPauseAutoResize(d);
    for (size_t i = 0; i < 32; i++) CHECK(add(d, m.item[i] = mkObj(m.names[i])) == DICT_OK);
    CHECK(dictExpand(d, 64) == DICT_OK && dictIsRehashing(d));
    dictResumeAutoResize(d);
    int checked = 0;
    for (size_t i = 0; i < 32 && dictIsRehashing(d); i++) {
        sds k = lk(&m, i);
        uint64_t h = dictGetHash(d, k);
        dictEntry **cell = dictTableCell(d, 0, h);
        long before = dictRehashIndex(d);
        unsigned long idx = (unsigned long)(cell - dictTableCell(d, 0, 0));
        int targeted = (long)idx >= before && *cell != NULL;
        dictEntry *de = dictFind(d, k);
        CHECK(de && dictGetKey(de) == m.item[i]);
        if (targeted && dictIsRehashing(d)) {
            CHECK(*dictTableCell(d, 0, h) == NULL);
            CHECK(dictRehashIndex(d) == before);
            checked++;
        } else if (dictIsRehashing(d)) {
            CHECK(dictRehashIndex(d) > before);
        }
        VALID(d);
        freeSds(k);
    }
    CHECK(checked > 0);
    checkAll(d, &m);
    dictRelease(d);
    modelFree(&m);
    endTest();
}

/* Insert, delete, find and replace while rehashing, for expand and shrink. */
static void test_ops_during_rehash(int ti) {
    char name[64];
    snprintf(name, sizeof(name), "ops during rehash (%s)", TYPE_NAMES[ti]);
    beginTest(name);
    dictType *t = TYPES[ti];
    model m;
    modelInit(&m, 2000);
    for (int round = 0; round < 4; round++) {
        hash_mask = round & 1 ? 0xff : ~0ULL; /* round 1, 3: long chains */
        dict *d = dictCreate(t, A);
        size_t target = 1000;
        int steps_in_rehash = 0;
        /* Grow: every operation while rehashing is checked. */
        for (size_t i = 0; i < target; i++) {
            int was = dictIsRehashing(d);
            CHECK(add(d, m.item[i] = mkItem(t, m.names[i])) == DICT_OK);
            steps_in_rehash += was;
            if (rndn(4) == 0) { /* a find or a miss mid-growth */
                size_t j = rndn(i + 2);
                sds k = lk(&m, j);
                dictEntry *de = dictFind(d, k);
                CHECK(j <= i ? de && dictGetKey(de) == m.item[j] : de == NULL);
                freeSds(k);
            }
            VALID(d);
        }
        CHECK(steps_in_rehash > 0);
        checkAll(d, &m);
        /* Shrink: delete in random order, finds and re-inserts mixed in. */
        steps_in_rehash = 0;
        for (size_t left = target; left > 3;) {
            size_t j = rndn(target);
            if (!m.item[j]) continue;
            int was = dictIsRehashing(d);
            sds k = lk(&m, j);
            CHECK(dictDelete(d, k) == DICT_OK);
            m.item[j] = NULL;
            left--;
            if (rndn(8) == 0) { /* re-insert another absent key */
                size_t r = rndn(target);
                if (!m.item[r] && r != j) {
                    CHECK(add(d, m.item[r] = mkItem(t, m.names[r])) == DICT_OK);
                    left++;
                }
            }
            steps_in_rehash += was;
            CHECK(dictFind(d, k) == NULL);
            freeSds(k);
            VALID(d);
        }
        CHECK(steps_in_rehash > 0);
        checkAll(d, &m);
        dictRelease(d);
        memset(m.item, 0, m.n * sizeof(void *));
    }
    modelFree(&m);
    endTest();
}

/* --- Tagging ------------------------------------------------------------------------- */

static void tagCounts(dict *d, size_t *direct, size_t *nodes) {
    dictStats st;
    dictGetStats(d, &st);
    *direct = st.direct_items;
    *nodes = st.nodes;
}

static void test_tagging(int ti) {
    char name[64];
    snprintf(name, sizeof(name), "tagging alone->chained->alone (%s)", TYPE_NAMES[ti]);
    beginTest(name);
    dictType *t = TYPES[ti];
    hash_mask = 0; /* every key in bucket 0 */
    dict *d = dictCreate(t, A);
    size_t direct, nodes;
    void *a = mkItem(t, "a"), *b = mkItem(t, "b"), *c = mkItem(t, "c");
    sds ka = mkSds("a"), kb = mkSds("b"), kc = mkSds("c");
    CHECK(add(d, a) == DICT_OK);
    dictEntry *cell = *dictTableCell(d, 0, 0);
    tagCounts(d, &direct, &nodes);
    if (t->no_value) {
        CHECK(dictEntryIsKey(cell) && dictGetKey(cell) == a && dictGetNext(cell) == NULL);
        CHECK(direct == 1 && nodes == 0);
        if (t->keys_are_odd)
            CHECK(cell == (dictEntry *)a); /* odd: stored as is */
        else
            CHECK((uintptr_t)cell == ((uintptr_t)a | 2)); /* even: tagged 010 */
    } else {
        CHECK(!dictEntryIsKey(cell) && direct == 0 && nodes == 1);
    }
    CHECK(add(d, b) == DICT_OK); /* b in front: a NoValue node -> a */
    VALID(d);
    cell = *dictTableCell(d, 0, 0);
    CHECK(!dictEntryIsKey(cell) && dictGetKey(cell) == b);
    CHECK(dictGetKey(dictGetNext(cell)) == a);
    tagCounts(d, &direct, &nodes);
    CHECK(t->no_value ? direct == 1 && nodes == 1 : direct == 0 && nodes == 2);
    CHECK(add(d, c) == DICT_OK); /* c -> b -> a */
    VALID(d);
    CHECK(dictDelete(d, kb) == DICT_OK); /* middle node: c -> a */
    VALID(d);
    CHECK(dictDelete(d, kc) == DICT_OK); /* head node: a alone again, direct */
    VALID(d);
    cell = *dictTableCell(d, 0, 0);
    tagCounts(d, &direct, &nodes);
    if (t->no_value) CHECK(dictEntryIsKey(cell) && direct == 1 && nodes == 0);
    CHECK(dictGetKey(cell) == a);
    b = mkItem(t, "b");
    CHECK(add(d, b) == DICT_OK); /* b -> a */
    CHECK(dictDelete(d, ka) == DICT_OK); /* chain end: the node b stays a node */
    VALID(d);
    cell = *dictTableCell(d, 0, 0);
    CHECK(!dictEntryIsKey(cell) && dictGetKey(cell) == b && dictGetNext(cell) == NULL);
    tagCounts(d, &direct, &nodes);
    CHECK(direct == 0 && nodes == 1);
    /* Rehash relinks: an expand with the full hash spreads the chain; a
     * node moved into an empty bucket becomes a direct item (node freed). */
    hash_mask = ~0ULL;
    dictRelease(d);
    d = dictCreate(t, A);
    hash_mask = 0;
    for (int i = 0; i < 4; i++) {
        char k[16];
        snprintf(k, sizeof(k), "x%d", i);
        CHECK(add(d, mkItem(t, k)) == DICT_OK);
    }
    tagCounts(d, &direct, &nodes);
    CHECK(t->no_value ? direct == 1 && nodes == 3 : nodes == 4);
    hash_mask = ~0ULL; /* the stored hash now differs: items spread out */
    CHECK(dictExpand(d, 64) == DICT_OK);
    while (dictRehash(d, 1)) {
    }
    VALID(d);
    dictStats st;
    dictGetStats(d, &st);
    if (t->no_value) CHECK(st.nodes == st.used[0] - st.nonempty_buckets[0]);
    CHECK(st.direct_items + st.nodes == 4 && (t->no_value || st.direct_items == 0));
    freeSds(ka);
    freeSds(kb);
    freeSds(kc);
    dictRelease(d);
    CHECK(destroyed == 8); /* a, b, c, b again, x0..x3 */
    endTest();
}

/* --- Two-phase APIs ------------------------------------------------------------------- */

static void test_links(int ti) {
    char name[64];
    snprintf(name, sizeof(name), "findLink/setKeyAtLink, 2-phase (%s)", TYPE_NAMES[ti]);
    beginTest(name);
    dictType *t = TYPES[ti];
    model m;
    modelInit(&m, 600);
    dict *d = dictCreate(t, A);
    /* Empty dict: no bucket, insert through a NULL link. */
    sds k0 = lk(&m, 0);
    dictEntryLink bucket = (dictEntryLink)1;
    CHECK(dictFindLink(d, k0, &bucket) == NULL && bucket == NULL);
    dictEntryLink link = NULL;
    dictSetKeyAtLink(d, m.item[0] = mkItem(t, m.names[0]), &link, 1);
    CHECK(link && dictGetKey(*link) == m.item[0]);
    freeSds(k0);
    VALID(d);
    for (size_t i = 1; i < m.n; i++) {
        sds k = lk(&m, i);
        link = dictFindLink(d, k, &bucket);
        CHECK(link == NULL && bucket != NULL);
        /* This insert may expand (tables change): dictSetKeyAtLink re-finds. */
        dictSetKeyAtLink(d, m.item[i] = mkItem(t, m.names[i]), &bucket, 1);
        CHECK(dictGetKey(*bucket) == m.item[i]);
        freeSds(k);
        VALID(d);
    }
    checkAll(d, &m);
    /* Replace existing items in place (object reallocated), tag kept. */
    for (size_t i = 0; i < m.n; i += 3) {
        sds k = lk(&m, i);
        link = dictFindLink(d, k, NULL);
        CHECK(link && dictGetKey(*link) == m.item[i]);
        int was_key = dictEntryIsKey(*link);
        void *fresh = mkItem(t, m.names[i]);
        dictSetKeyAtLink(d, fresh, &link, 0);
        CHECK(dictEntryIsKey(*link) == was_key && dictGetKey(*link) == fresh);
        (t->entryDestructor)(m.item[i]);
        m.item[i] = fresh;
        freeSds(k);
        VALID(d);
    }
    checkAll(d, &m);
    /* Position flavour. */
    for (size_t i = 0; i < m.n; i += 7) {
        sds k = lk(&m, i);
        dictEntry *existing = NULL;
        CHECK(dictFindPositionForInsert(d, k, &existing) == NULL && existing);
        CHECK(dictGetKey(existing) == m.item[i]);
        freeSds(k);
    }
    /* Two-phase unlink: rehashing paused between the phases. */
    size_t deleted = 0;
    for (size_t i = 0; i < m.n; i += 2) {
        sds k = lk(&m, i);
        int table = -1;
        dictEntryLink l = dictTwoPhaseUnlinkFind(d, k, &table);
        CHECK(l && dictGetKey(*l) == m.item[i] && (table == 0 || table == 1));
        dictTwoPhaseUnlinkFree(d, l, table);
        m.item[i] = NULL;
        deleted++;
        int tbl;
        CHECK(dictTwoPhaseUnlinkFind(d, k, &tbl) == NULL);
        freeSds(k);
        VALID(d);
    }
    checkAll(d, &m);
    dictRelease(d);
    modelFree(&m);
    endTest();
}

/* --- Iterators --------------------------------------------------------------------------- */

static void test_iterators(int ti) {
    char name[64];
    snprintf(name, sizeof(name), "iterators safe/unsafe (%s)", TYPE_NAMES[ti]);
    beginTest(name);
    dictType *t = TYPES[ti];
    model m;
    modelInit(&m, 3000);
    uint8_t *seen = calloc(m.n, 1);
    dict *d = dictCreate(t, A);
    for (int phase = 0; phase < 3; phase++) {
        size_t lo = phase * 1000, hi = lo + 1000;
        for (size_t i = lo; i < hi; i++) CHECK(add(d, m.item[i] = mkItem(t, m.names[i])) == DICT_OK);
        /* Unsafe: each entry exactly once, also mid-rehash. */
        memset(seen, 0, m.n);
        dictIterator it;
        dictInitIterator(&it, d);
        dictEntry *de;
        size_t count = 0;
        while ((de = dictNext(&it)) != NULL) {
            const char *key = itemKey(t, dictGetKey(de));
            size_t idx = (size_t)atol(key + 1);
            CHECK(m.item[idx] == dictGetKey(de) && !seen[idx]);
            seen[idx] = 1;
            count++;
        }
        dictResetIterator(&it);
        CHECK(count == dictSize(d));
        /* The stored flavour agrees. */
        dictInitIterator(&it, d);
        void *stored;
        ksLoadId dep;
        size_t count2 = 0;
        while (dictNextStored(&it, &stored, &dep)) count2++;
        dictResetIterator(&it);
        CHECK(count2 == count);
    }
    /* Safe: delete every returned entry, insert new ones; rehashing paused. */
    int rehashing = dictIsRehashing(d);
    if (!rehashing) CHECK(dictExpand(d, dictBuckets(d) * 2) == DICT_OK);
    long ri = dictRehashIndex(d);
    dictIterator it;
    dictInitSafeIterator(&it, d);
    dictEntry *de;
    size_t deleted = 0, added = 0;
    while ((de = dictNext(&it)) != NULL) {
        const char *key = itemKey(t, dictGetKey(de));
        size_t idx = (size_t)atol(key + 1);
        sds k = mkSds(key);
        CHECK(dictDelete(d, k) == DICT_OK);
        m.item[idx] = NULL;
        freeSds(k);
        deleted++;
        CHECK(dictRehashIndex(d) == ri); /* no steps while a safe iterator runs */
        if (deleted % 100 == 0 && added < 10) {
            char nk[24];
            snprintf(nk, sizeof(nk), "n%zu", added++);
            CHECK(add(d, mkItem(t, nk)) == DICT_OK);
        }
    }
    dictResetIterator(&it);
    VALID(d);
    CHECK(deleted >= 3000 && dictSize(d) <= added);
    dictRelease(d);
    free(seen);
    modelFree(&m);
    endTest();
}

/* Modifying the dict during an unsafe iteration trips the fingerprint assert. */
static void test_fingerprint_assert(void) {
    beginTest("unsafe iterator fingerprint assert");
    dict *d = dictCreate(&T_SDS, A);
    for (int i = 0; i < 10; i++) {
        char k[16];
        snprintf(k, sizeof(k), "f%d", i);
        CHECK(add(d, mkSds(k)) == DICT_OK);
    }
    uint64_t fp = dictFingerprint(d);
    fflush(NULL);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        if (!freopen("/dev/null", "w", stderr)) _exit(2);
        dictIterator it;
        dictInitIterator(&it, d);
        CHECK(dictNext(&it) != NULL);
        add(d, mkSds("intruder"));
        dictResetIterator(&it); /* must abort */
        _exit(0);
    }
    int status;
    CHECK(waitpid(pid, &status, 0) == pid);
    CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT);
    CHECK(dictFingerprint(d) == fp);
    sds k = mkSds("f3");
    CHECK(dictDelete(d, k) == DICT_OK);
    CHECK(dictFingerprint(d) != fp);
    freeSds(k);
    dictRelease(d);
    endTest();
}

/* --- Scan -------------------------------------------------------------------------- */

typedef struct {
    model *m;
    const dictType *t;
    uint32_t *hits;
    dict *d;
    int delete_some;
} scanCtx;

static void scanCb(void *priv, const dictEntry *de) {
    scanCtx *c = priv;
    void *item = dictGetKey(de);
    const char *key = itemKey(c->t, item);
    if (key[0] != 'k') return; /* volatile key */
    size_t idx = (size_t)atol(key + 1);
    CHECK(c->m->item[idx] == item);
    c->hits[idx]++;
    if (c->delete_some && idx % 5 == 4) { /* delete the entry being visited */
        sds k = mkSds(key);
        CHECK(dictDelete(c->d, k) == DICT_OK);
        c->m->item[idx] = NULL;
        freeSds(k);
    }
}

static void test_scan(int ti) {
    char name[64];
    snprintf(name, sizeof(name), "scan guarantee across resizes (%s)", TYPE_NAMES[ti]);
    beginTest(name);
    dictType *t = TYPES[ti];
    size_t nstable = 300, nvol = 1500;
    for (int round = 0; round < (accurate ? 40 : 8); round++) {
        model m, v;
        modelInit(&m, nstable);
        modelInit(&v, nvol);
        for (size_t i = 0; i < nvol; i++) snprintf(v.names[i], sizeof(v.names[i]), "v%zu", i);
        hash_mask = round % 3 == 2 ? 0x3f : ~0ULL;
        dict *d = dictCreate(t, A);
        for (size_t i = 0; i < nstable; i++) CHECK(add(d, m.item[i] = mkItem(t, m.names[i])) == DICT_OK);
        size_t nv = round % 2 ? nvol : 0; /* odd rounds start big and shrink */
        for (size_t i = 0; i < nv; i++) CHECK(add(d, v.item[i] = mkItem(t, v.names[i])) == DICT_OK);
        scanCtx c = {.m = &m, .t = t, .hits = calloc(nstable, sizeof(uint32_t)), .d = d,
                     .delete_some = round % 4 == 3};
        unsigned long cursor = 0;
        int calls = 0;
        do {
            cursor = dictScan(d, cursor, scanCb, &c);
            if (calls++ % 4 == 0) VALID(d);
            /* Between calls: grow or shrink the dict through volatile keys,
             * which also runs rehash steps. */
            size_t ops = rndn(40);
            for (size_t o = 0; o < ops; o++) {
                size_t j = rndn(nvol);
                int grow = round % 2 == 0 ? rndn(10) < 8 : rndn(10) < 2;
                if (grow && !v.item[j]) {
                    CHECK(add(d, v.item[j] = mkItem(t, v.names[j])) == DICT_OK);
                } else if (!grow && v.item[j]) {
                    sds k = mkSds(v.names[j]);
                    CHECK(dictDelete(d, k) == DICT_OK);
                    v.item[j] = NULL;
                    freeSds(k);
                }
            }
            if (rndn(3) == 0) dictRehash(d, 1 + (int)rndn(5));
        } while (cursor != 0);
        VALID(d);
        CHECK(calls > 1);
        /* Every stable key was present from the start until the end (or until
         * the callback deleted it, which needs a visit): seen at least once. */
        for (size_t i = 0; i < nstable; i++) CHECK(c.hits[i] >= 1);
        free(c.hits);
        dictRelease(d);
        modelFree(&m);
        modelFree(&v);
    }
    /* Empty dict: cursor 0 at once. */
    dict *d = dictCreate(t, A);
    CHECK(dictScan(d, 0, scanCb, NULL) == 0);
    dictRelease(d);
    endTest();
}

/* --- Prefetcher ------------------------------------------------------------------------ */

#if KS_TRACE
/* Capture records in memory and check the turn rule and dependencies. */
static FILE *trace_out;
static uint64_t prefetches_in(uint64_t from) {
    ksEmitter *e = ksEmitterCurrent;
    uint64_t n = 0;
    if (e->n < from) return 0; /* a chunk was flushed in between */
    for (uint64_t i = from; i < e->n; i++)
        if (e->buf[i].kind == KVT_PREFETCH) n++;
    return n;
}
static void checkDeps(void) {
    ksEmitter *e = ksEmitterCurrent;
    for (uint32_t i = 0; i < e->n; i++) {
        uint32_t dep = e->buf[i].dep;
        if (dep == 0 || dep > i) continue; /* none, or in an earlier chunk */
        CHECK(e->buf[i - dep].kind == KVT_LOAD);
    }
}
#endif

/* Redis #15133 cursor rule: a step that issues no prefetch keeps the cursor on
 * the same key.  k0 is absent with an empty bucket: BUCKET (prefetch, cursor
 * moves), ..., ENTRY finds the cell empty (no prefetch: cursor stays on k0),
 * BUCKET with no table left (DONE: cursor moves). */
static void test_prefetcher_cursor(void) {
    beginTest("dictPrefetcher: no prefetch, same key");
    dict *d = dictCreate(&T_SDS, A);
    CHECK(add(d, mkItem(&T_SDS, "present")) == DICT_OK);
    char name[32];
    sds k0 = NULL;
    for (int i = 0; i < 10000 && !k0; i++) {
        snprintf(name, sizeof(name), "absent%d", i);
        sds k = mkSds(name);
        if (*dictTableCell(d, 0, dictGetHash(d, k)) == NULL) k0 = k;
        else freeSds(k);
    }
    CHECK(k0 != NULL && !dictIsRehashing(d));
    sds k1 = mkSds("present");
    dict *dicts[2] = {d, d};
    const void *keys[2] = {k0, k1};
    dictPrefetcher p;
    dictPrefetcherReset(&p, dicts, keys, 2);
    CHECK(p.cursor == 0 && p.remaining == 2);
    CHECK(dictPrefetcherStep(&p) && p.cursor == 1); /* k0 BUCKET: prefetch */
    CHECK(dictPrefetcherStep(&p) && p.cursor == 0); /* k1 BUCKET: prefetch */
    CHECK(dictPrefetcherStep(&p) && p.cursor == 0); /* k0 ENTRY: empty cell, stays */
    CHECK(dictIncrementalFindGetState(&p.lookups[0]) == DICT_PREFETCH_BUCKET);
    CHECK(dictPrefetcherStep(&p) && p.cursor == 1 && p.remaining == 1); /* k0 DONE */
    CHECK(dictIncrementalFindGetState(&p.lookups[0]) == DICT_PREFETCH_DONE);
    dictPrefetcherRun(&p);
    dictEntry *de;
    CHECK(!dictPrefetcherGetResult(&p, 0, &de) && dictPrefetcherGetResult(&p, 1, &de));
    freeSds(k0);
    freeSds(k1);
    dictRelease(d);
    endTest();
}

static void test_prefetcher(int ti) {
    char name[64];
    snprintf(name, sizeof(name), "dictPrefetcher == dictFind (%s)", TYPE_NAMES[ti]);
    beginTest(name);
    dictType *t = TYPES[ti];
    CHECK(strcmp(dictPrefetchStateName(DICT_PREFETCH_BUCKET), "BUCKET") == 0);
    CHECK(strcmp(dictPrefetchStateName(DICT_PREFETCH_ENTRY), "ENTRY") == 0);
    CHECK(strcmp(dictPrefetchStateName(DICT_PREFETCH_ENTRY_KEY), "ENTRY_KEY") == 0);
    CHECK(strcmp(dictPrefetchStateName(DICT_PREFETCH_ENTRY_VALUE), "ENTRY_VALUE") == 0);
    CHECK(strcmp(dictPrefetchStateName(DICT_PREFETCH_DONE), "DONE") == 0);
#if KS_TRACE
    trace_out = tmpfile();
    CHECK(ksEmitterOpen(trace_out, "{}", 1u << 20) != NULL);
#endif
    enum { NDICTS = 4 };
    model m;
    modelInit(&m, 3000);
    dict *dicts[NDICTS];
    for (int i = 0; i < NDICTS; i++) dicts[i] = dictCreate(t, A);
    size_t total_hits = 0, total = 0;
    int rounds = accurate ? 2000 : 300;
    for (int r = 0; r < rounds; r++) {
        hash_mask = (r / 50) % 2 ? 0x1f : ~0ULL; /* phases with long chains */
        if (r % 50 == 0) { /* rebuild under the new hash */
            for (int i = 0; i < NDICTS; i++) dictRelease(dicts[i]);
            for (int i = 0; i < NDICTS; i++) dicts[i] = dictCreate(t, A);
            memset(m.item, 0, m.n * sizeof(void *));
        }
        /* Mutate: key i lives in dicts[i % NDICTS]; dicts[3] stays empty. */
        for (int o = 0; o < 30; o++) {
            size_t j = rndn(m.n);
            dict *d = dicts[j % NDICTS];
            if (d == dicts[3]) continue;
            if (!m.item[j]) {
                CHECK(add(d, m.item[j] = mkItem(t, m.names[j])) == DICT_OK);
            } else if (rndn(3) == 0) {
                sds k = lk(&m, j);
                CHECK(dictDelete(d, k) == DICT_OK);
                m.item[j] = NULL;
                freeSds(k);
            }
        }
        /* A batch: present, absent and duplicate keys; NULL dicts too. */
        size_t n = 1 + rndn(DICT_PREFETCH_MAX_SIZE);
        dict *bd[DICT_PREFETCH_MAX_SIZE];
        const void *bk[DICT_PREFETCH_MAX_SIZE];
        size_t bi[DICT_PREFETCH_MAX_SIZE];
        for (size_t i = 0; i < n; i++) {
            size_t j = (i > 0 && rndn(6) == 0) ? bi[rndn(i)] : rndn(m.n);
            bi[i] = j;
            bk[i] = lk(&m, j);
            bd[i] = rndn(40) == 0 ? NULL : dicts[j % NDICTS];
        }
        dictPrefetcher p;
        dictPrefetcherReset(&p, bd, bk, n);
        int turns = 0;
#if KS_TRACE
        for (;;) {
            uint64_t before = ksEmitterCurrent->n;
            int more = dictPrefetcherStep(&p);
            CHECK(prefetches_in(before) <= 1); /* one prefetch per key per turn */
            turns++;
            if (!more) break;
        }
#else
        while (dictPrefetcherStep(&p)) turns++;
#endif
        CHECK(p.remaining == 0);
        /* Expected: a plain dictFind that does not rehash. */
        for (int i = 0; i < NDICTS; i++) dictPauseRehashing(dicts[i]);
        for (size_t i = 0; i < n; i++) {
            dictEntry *exp = bd[i] ? dictFind(bd[i], bk[i]) : NULL;
            dictEntry *got = NULL;
            int hit = dictPrefetcherGetResult(&p, i, &got);
            CHECK(hit == (exp != NULL));
            if (exp) CHECK(dictGetKey(got) == dictGetKey(exp) && got == exp);
            if (bd[i]) CHECK((exp != NULL) == (m.item[bi[i]] != NULL));
            total_hits += hit;
            total++;
        }
        for (int i = 0; i < NDICTS; i++) dictResumeRehashing(dicts[i]);
        /* Rehash a little so batches also see mid-rehash tables. */
        if (rndn(2)) dictRehash(dicts[rndn(NDICTS)], 1);
        for (size_t i = 0; i < n; i++) freeSds((sds)bk[i]);
        for (int i = 0; i < NDICTS; i++) VALID(dicts[i]);
    }
    CHECK(total_hits > 0 && total_hits < total);
    /* The incremental find on its own, including presumed hits on absent keys
     * (a one-entry bucket, not rehashing: the shortcut guesses "hit"). */
    hash_mask = 0;
    dict *d = dictCreate(t, A);
    void *only = mkItem(t, "only");
    CHECK(add(d, only) == DICT_OK);
    sds absent = mkSds("absent"), ko = mkSds("only");
    dictIncrementalFindState s;
    dictIncrementalFindInit(&s, d, absent);
    int steps = 0;
    dictPrefetchState seq[8];
    seq[0] = dictIncrementalFindGetState(&s);
    while (dictIncrementalFindStep(&s)) seq[++steps] = dictIncrementalFindGetState(&s);
    /* BUCKET -> ENTRY -> (ENTRY_KEY) -> DONE */
    CHECK(seq[0] == DICT_PREFETCH_BUCKET && seq[1] == DICT_PREFETCH_ENTRY);
    CHECK(dictIncrementalFindGetResult(&s, NULL) == 0); /* verified: not a hit */
    dictIncrementalFindInit(&s, d, ko);
    dictEntry *found;
    CHECK(dictIncrementalFindGetResult(&s, &found) == 1 && dictGetKey(found) == only);
    dictIncrementalFindInit(&s, NULL, ko);
    CHECK(dictIncrementalFindGetState(&s) == DICT_PREFETCH_DONE);
    freeSds(absent);
    freeSds(ko);
    dictRelease(d);
    /* dictPrefetchKeys is a no-op for n <= 1 and runs otherwise. */
    dictPrefetchKeys(NULL, NULL, 0);
    /* Batch split: 16 while >= 32 remain, then everything. */
    size_t total_keys[] = {100, 33, 31, 18, 32, 64};
    size_t want[][8] = {{16, 16, 16, 16, 16, 20}, {16, 17}, {31}, {18}, {16, 16}, {16, 16, 16, 16}};
    for (size_t c = 0; c < sizeof(total_keys) / sizeof(total_keys[0]); c++) {
        size_t rem = total_keys[c], k = 0;
        while (rem) {
            size_t b = dictPrefetchNextBatchSize(rem, DICT_PREFETCH_BATCH_SIZE);
            CHECK(b == want[c][k]);
            k++;
            rem -= b;
        }
    }
#if KS_TRACE
    checkDeps();
    ksEmitterClose(ksEmitterCurrent);
    fclose(trace_out);
#endif
    for (int i = 0; i < NDICTS; i++) dictRelease(dicts[i]);
    modelFree(&m);
    endTest();
}

/* --- Random operations against a model ---------------------------------------------------- */

static void test_random_ops(int ti) {
    char name[64];
    snprintf(name, sizeof(name), "random ops vs model (%s)", TYPE_NAMES[ti]);
    beginTest(name);
    dictType *t = TYPES[ti];
    model m;
    modelInit(&m, 1500);
    dict *d = dictCreate(t, A);
    size_t steps = accurate ? 200000 : 20000;
    for (size_t s = 0; s < steps; s++) {
        if (s % 5000 == 0) {
            dictResizeEnable pol[] = {DICT_RESIZE_ENABLE, DICT_RESIZE_ENABLE, DICT_RESIZE_AVOID,
                                      DICT_RESIZE_FORBID};
            dictSetResizeEnabled(pol[rndn(4)]);
        }
        if (s % 4000 == 2000) { /* phase with a narrow hash: rebuild */
            dictRelease(d);
            memset(m.item, 0, m.n * sizeof(void *));
            hash_mask = rndn(2) ? 0x7 : ~0ULL;
            d = dictCreate(t, A);
        }
        /* Bias toward growth or shrink in long phases. */
        int grow = (s / 1500) % 2 == 0;
        size_t j = rndn(m.n);
        sds k = lk(&m, j);
        switch (rndn(10)) {
        case 0: case 1: case 2: { /* add (three flavours) */
            if (m.item[j] || !grow) break;
            void *it = mkItem(t, m.names[j]);
            int how = (int)rndn(3);
            if (how == 0) {
                CHECK(add(d, it) == DICT_OK);
            } else if (how == 1) {
                dictEntryLink bucket;
                CHECK(dictFindLink(d, k, &bucket) == NULL);
                if (t->no_value) {
                    dictSetKeyAtLink(d, it, &bucket, 1);
                } else {
                    CHECK(add(d, it) == DICT_OK);
                }
            } else {
                dictEntry *ex;
                void *pos = dictFindPositionForInsert(d, k, &ex);
                CHECK(pos != NULL);
                dictEntry *de = dictInsertAtPosition(d, it, pos);
                if (!t->no_value) dictSetVal(d, de, ksArenaCalloc(A, 16));
            }
            m.item[j] = it;
            break;
        }
        case 3: case 4: { /* delete (two flavours) */
            if (grow && rndn(3)) break;
            if (rndn(2)) {
                CHECK(dictDelete(d, k) == (m.item[j] ? DICT_OK : DICT_ERR));
            } else {
                int tbl;
                dictEntryLink l = dictTwoPhaseUnlinkFind(d, k, &tbl);
                CHECK((l != NULL) == (m.item[j] != NULL));
                if (l) dictTwoPhaseUnlinkFree(d, l, tbl);
            }
            m.item[j] = NULL;
            break;
        }
        case 5: case 6: { /* find */
            dictEntry *de = dictFind(d, k);
            CHECK(m.item[j] ? de && dictGetKey(de) == m.item[j] : de == NULL);
            break;
        }
        case 7: { /* replace in place (reallocated object) */
            if (!m.item[j]) break;
            dictEntryLink l = dictFindLink(d, k, NULL);
            CHECK(l);
            void *fresh = mkItem(t, m.names[j]);
            dictSetKeyAtLink(d, fresh, &l, 0);
            t->entryDestructor(m.item[j]);
            m.item[j] = fresh;
            break;
        }
        case 8: dictRehash(d, (int)rndn(4)); break;
        case 9: { /* a short safe iteration deleting some */
            if (rndn(20)) break;
            dictIterator it;
            dictInitSafeIterator(&it, d);
            dictEntry *de;
            int left = 30;
            while (left-- > 0 && (de = dictNext(&it)) != NULL) {
                if (rndn(4)) continue;
                const char *key = itemKey(t, dictGetKey(de));
                size_t idx = (size_t)atol(key + 1);
                sds kk = mkSds(key);
                CHECK(dictDelete(d, kk) == DICT_OK);
                m.item[idx] = NULL;
                freeSds(kk);
            }
            dictResetIterator(&it);
            break;
        }
        }
        freeSds(k);
        VALID(d);
        if (s % 1000 == 0) checkAll(d, &m);
    }
    checkAll(d, &m);
    dictRelease(d);
    modelFree(&m);
    endTest();
}

/* --- Memory accounting -------------------------------------------------------------------- */

static void test_mem_usage(void) {
    beginTest("dictMemUsage == arena bytes");
    dict *d = dictCreate(&T_KV, A);
    model m;
    modelInit(&m, 5000);
    /* Items come from a second arena so the first holds only dict memory. */
    ksArena *dict_arena = A;
    ksArena *item_arena = ksArenaCreate(0);
    for (size_t i = 0; i < m.n; i++) {
        A = item_arena;
        void *it = mkObj(m.names[i]);
        A = dict_arena;
        CHECK(add(d, m.item[i] = it) == DICT_OK);
        if (i % 500 == 0) CHECK(dictMemUsage(d) == ksArenaAllocatedBytes(dict_arena));
    }
    CHECK(dictMemUsage(d) == ksArenaAllocatedBytes(dict_arena));
    A = item_arena; /* the destructor frees into the item arena */
    dictRelease(d);
    CHECK(ksArenaLiveAllocations(item_arena) == 0);
    ksArenaDestroy(item_arena);
    A = dict_arena;
    modelFree(&m);
    endTest();
}

/* --- The keyspace with table=dict agrees with table=hashtable ------------------------------ */

static size_t respCmd(char *q, size_t cap, int argc, const char **argv) {
    size_t n = (size_t)snprintf(q, cap, "*%d\r\n", argc);
    for (int i = 0; i < argc; i++)
        n += (size_t)snprintf(q + n, cap - n, "$%zu\r\n%s\r\n", strlen(argv[i]), argv[i]);
    return n;
}

/* Random commands over `nkeys` keys (some with a {t} hashtag), with expiry.
 * KEYS and SCAN are left out: their order depends on the table. */
static size_t genCommands(char *q, size_t cap, int ncmds, int nkeys) {
    size_t n = 0;
    char k[6][32], v[80];
    for (int i = 0; i < ncmds && n + 1024 < cap; i++) {
        const char *argv[16];
        int argc = 0, nk = 1 + (int)rndn(6);
        for (int j = 0; j < nk; j++)
            snprintf(k[j], sizeof(k[j]), "key%s%zu", rndn(4) ? "" : "{t}", rndn((size_t)nkeys));
        size_t vl = rndn(70);
        memset(v, 'a' + (int)rndn(26), vl);
        v[vl] = 0;
        size_t op = rndn(100);
        if (op < 30) { argv[argc++] = "GET"; argv[argc++] = k[0]; }
        else if (op < 52) { argv[argc++] = "SET"; argv[argc++] = k[0]; argv[argc++] = v;
                            if (op % 5 == 0) { argv[argc++] = "PX"; argv[argc++] = "30"; } }
        else if (op < 62) { argv[argc++] = "DEL"; for (int j = 0; j < nk; j++) argv[argc++] = k[j]; }
        else if (op < 74) { argv[argc++] = "MGET"; for (int j = 0; j < nk; j++) argv[argc++] = k[j]; }
        else if (op < 84) { argv[argc++] = "MSET";
                            for (int j = 0; j < nk; j++) { argv[argc++] = k[j]; argv[argc++] = v; } }
        else if (op < 88) { argv[argc++] = "PEXPIRE"; argv[argc++] = k[0]; argv[argc++] = "15"; }
        else if (op < 92) { argv[argc++] = "PTTL"; argv[argc++] = k[0]; }
        else if (op < 97) { argv[argc++] = "EXISTS"; argv[argc++] = k[0]; argv[argc++] = k[1]; }
        else { argv[argc++] = "DBSIZE"; }
        n += respCmd(q + n, cap - n, argc, argv);
    }
    return n;
}

static int cmpStr(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* KEYS * as a sorted list of names (the reply is *N then $len/name pairs). */
static char **keysSorted(ksKeyspace *ks, size_t *count) {
    const char *argv[] = {"KEYS", "*"};
    char q[64];
    size_t ql = respCmd(q, sizeof(q), 2, argv), rl, used;
    const uint8_t *r;
    CHECK(ksExecute(ks, "", (const uint8_t *)q, ql, &r, &rl, &used) == 0);
    char *copy = malloc(rl + 1);
    memcpy(copy, r, rl);
    copy[rl] = 0;
    CHECK(copy[0] == '*');
    size_t n = strtoul(copy + 1, NULL, 10);
    char **names = calloc(n + 1, sizeof(char *));
    char *p = strstr(copy, "\r\n") + 2;
    for (size_t i = 0; i < n; i++) {
        size_t len = strtoul(p + 1, &p, 10);
        p += 2;
        names[i] = strndup(p, len);
        p += len + 2;
    }
    free(copy);
    qsort(names, n, sizeof(char *), cmpStr);
    *count = n;
    return names;
}

static void keyspaceAgrees(const char *opts, const char *variant) {
    char ho[128], dopt[128];
    snprintf(ho, sizeof(ho), "table=hashtable %s", opts);
    snprintf(dopt, sizeof(dopt), "table=dict %s", opts);
    ksKeyspace *h = ksCreate(ho), *d = ksCreate(dopt);
    CHECK(h && d);
    size_t cap = 1 << 18;
    char *q = malloc(cap);
    int rounds = accurate ? 200 : 40;
    for (int round = 0; round < rounds; round++) {
        /* Small key ranges first (overwrites, deletes), then growth. */
        size_t n = genCommands(q, cap, 200, round < rounds / 2 ? 150 : 2500);
        ksSetTimeMs(h, round * 10);
        ksSetTimeMs(d, round * 10);
        const uint8_t *rh, *rd;
        size_t lh, ld, ch, cd;
        CHECK(ksExecute(h, "", (const uint8_t *)q, n, &rh, &lh, &ch) == 0);
        char *copy = malloc(lh);
        memcpy(copy, rh, lh);
        CHECK(ksExecute(d, variant, (const uint8_t *)q, n, &rd, &ld, &cd) == 0);
        if (!(lh == ld && memcmp(copy, rd, lh) == 0 && ch == cd)) {
            fprintf(stderr, "replies differ: %s / %s, round %d\n", opts, variant, round);
            abort();
        }
        free(copy);
        if (ksCheckValid(d) != 0) {
            fprintf(stderr, "ksCheckValid(dict): %s\n", ksLastError(d));
            abort();
        }
    }
    CHECK(ksDbSize(h) == ksDbSize(d));
    size_t nh, nd;
    char **kh = keysSorted(h, &nh), **kd = keysSorted(d, &nd);
    CHECK(nh == nd && nh > 100);
    for (size_t i = 0; i < nh; i++) CHECK(strcmp(kh[i], kd[i]) == 0);
    for (size_t i = 0; i < nh; i++) free(kh[i]), free(kd[i]);
    free(kh);
    free(kd);
    /* A dict snapshot loads into a hashtable keyspace with the same keys. */
    const uint8_t *snap;
    size_t slen;
    CHECK(ksSaveSnapshot(d, "", &snap, &slen) == 0);
    ksKeyspace *h2 = ksCreate(ho);
    CHECK(ksLoadSnapshot(h2, "", snap, slen) == 0 && ksDbSize(h2) == ksDbSize(h));
    CHECK(ksCheckValid(h2) == 0);
    ksDestroy(h2);
    free(q);
    ksDestroy(h);
    ksDestroy(d);
}

static void test_keyspace_table_dict(void) {
    printf("  %-40s", "keyspace table=dict == table=hashtable");
    fflush(stdout);
    clock_t t0 = clock();
    const char *opts[] = {"layout=unified", "layout=legacy", "layout=unified cluster=1",
                          "layout=legacy cluster=1", "layout=unified hashtable_min_exp=3"};
    const char *variants[] = {"", "pipeline=lookahead", "multikey=batch",
                              "pipeline=lookahead multikey=batch batch=4"};
    for (size_t o = 0; o < sizeof(opts) / sizeof(opts[0]); o++)
        for (size_t v = 0; v < sizeof(variants) / sizeof(variants[0]); v++)
            keyspaceAgrees(opts[o], variants[v]);
    printf("ok (%.2fs)\n", (double)(clock() - t0) / CLOCKS_PER_SEC);
}

/* --- The traced build, from the native test (Makefile: renamed tr_* core) ------------------- */

#if defined(KS_TEST_TRACED_CORE) && !KS_TRACE
ksArena *tr_ksArenaCreate(uint64_t base);
void tr_ksArenaDestroy(ksArena *a);
dict *tr_dictCreate(dictType *type, ksArena *arena);
int tr_dictAdd(dict *d, void *stored, void *val);
dictEntry *tr_dictFind(dict *d, const void *key);
int tr_dictExpand(dict *d, size_t size);
int tr_dictRehash(dict *d, int n);
void tr_dictRelease(dict *d);
void tr_dictPrefetcherReset(dictPrefetcher *p, dict **dicts, const void *const *keys, size_t n);
int tr_dictPrefetcherStep(dictPrefetcher *p);
int tr_dictPrefetcherGetResult(dictPrefetcher *p, size_t i, dictEntry **found);
ksEmitter *tr_ksEmitterOpen(FILE *out, const char *json, uint32_t chunk_records);
int tr_ksEmitterClose(ksEmitter *e);
extern ksEmitter *tr_ksEmitterCurrent;

/* One scenario: a dict (mid-rehash when `rehashing`), 40 finds, then one
 * prefetcher batch of 40 keys (half absent).  Checks every record's dependency
 * and the turn rule; returns a copy of the records for the determinism check. */
static kvtRecord *tracedScenario(int rehashing, uint32_t *nrec) {
    ksArena *ta = tr_ksArenaCreate(0), *outer = A;
    A = ksArenaCreate(0); /* the items' arena, fresh for each run */
    FILE *f = tmpfile();
    CHECK(tr_ksEmitterOpen(f, "{}", 1u << 20) != NULL);
    ksEmitter *e = tr_ksEmitterCurrent;
    dict *d = tr_dictCreate(&T_KV, ta);
    char name[24];
    for (int i = 0; i < 300; i++) {
        snprintf(name, sizeof(name), "t%d", i);
        CHECK(tr_dictAdd(d, mkObj(name), NULL) == DICT_OK);
    }
    while (tr_dictRehash(d, 100)) {
    }
    if (rehashing) CHECK(tr_dictExpand(d, 4096) == DICT_OK);
    tr_dictRehash(d, 3);
    sds keys[40];
    for (int i = 0; i < 40; i++) {
        snprintf(name, sizeof(name), "t%d", i * 15); /* i >= 20: absent */
        keys[i] = mkSds(name);
        dictEntry *de = tr_dictFind(d, keys[i]);
        CHECK((de != NULL) == (i * 15 < 300));
    }
    uint32_t before_batch = e->n;
    dictPrefetcher p;
    dict *dicts[40];
    for (int i = 0; i < 40; i++) dicts[i] = d;
    tr_dictPrefetcherReset(&p, dicts, (const void *const *)keys, 40);
    int more;
    do {
        uint32_t before = e->n, pf = 0;
        more = tr_dictPrefetcherStep(&p);
        for (uint32_t i = before; i < e->n; i++) pf += e->buf[i].kind == KVT_PREFETCH;
        CHECK(pf <= 1); /* one prefetch per key per turn */
    } while (more);
    for (int i = 0; i < 40; i++) {
        dictEntry *de;
        CHECK(tr_dictPrefetcherGetResult(&p, (size_t)i, &de) == (i * 15 < 300));
    }
    /* Dependencies: every dep names an earlier load; bucket cells hang off the
     * dict struct, nodes and entry prefetches off a cell or a node. */
    uint32_t cells = 0, nodes = 0;
    for (uint32_t i = 0; i < e->n; i++) {
        kvtRecord *r = &e->buf[i];
        if (r->dep) {
            CHECK(r->dep <= i && e->buf[i - r->dep].kind == KVT_LOAD);
        }
        uint8_t src = r->dep ? e->buf[i - r->dep].tag : KVT_TAG_OTHER;
        int lookup_site = r->site == KS_SITE_DICT_BUCKET || r->site == KS_SITE_DICT_ENTRY ||
                          (r->site == KS_SITE_DICT_PREFETCH && i >= before_batch);
        if (!lookup_site || r->kind == KVT_STORE) continue;
        if (r->tag == KVT_TAG_DICT_TABLE) {
            CHECK(src == KVT_TAG_TABLE_META);
            cells++;
        } else if (r->tag == KVT_TAG_DICT_ENTRY || r->tag == KVT_TAG_OBJECT) {
            CHECK(src == KVT_TAG_DICT_TABLE || src == KVT_TAG_DICT_ENTRY);
            nodes++;
        }
    }
    CHECK(cells > 80 && nodes > 40);
    *nrec = e->n;
    kvtRecord *copy = malloc(sizeof(kvtRecord) * e->n);
    memcpy(copy, e->buf, sizeof(kvtRecord) * e->n);
    for (int i = 0; i < 40; i++) freeSds(keys[i]);
    tr_dictRelease(d);
    tr_ksEmitterClose(e);
    fclose(f);
    tr_ksArenaDestroy(ta);
    CHECK(ksArenaLiveAllocations(A) == 0);
    ksArenaDestroy(A);
    A = outer;
    return copy;
}

static void test_traced(void) {
    beginTest("traced: deps, turn rule, determinism");
    for (int rehashing = 0; rehashing <= 1; rehashing++) {
        uint32_t n1, n2;
        kvtRecord *a = tracedScenario(rehashing, &n1);
        kvtRecord *b = tracedScenario(rehashing, &n2);
        CHECK(n1 == n2 && memcmp(a, b, sizeof(kvtRecord) * n1) == 0);
        free(a);
        free(b);
    }
    endTest();
}
#endif

/* --- Main ---------------------------------------------------------------------------------- */

int main(int argc, char **argv) {
    uint64_t seed = 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--seed") && i + 1 < argc)
            seed = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--accurate"))
            accurate = 1;
    }
    rng_state = seed;
    ksSiphashSeed(seed, sipkey);
    printf("test_dict (seed %llu%s, %s build)\n", (unsigned long long)seed,
           accurate ? ", accurate" : "", KS_TRACE ? "traced" : "native");
    for (int t = 0; t < 3; t++) test_basic(t);
    test_resize_policy();
    test_rehash_empty_visits();
    test_bucket_rehash_on_lookup();
    for (int t = 0; t < 3; t++) test_ops_during_rehash(t);
    for (int t = 0; t < 3; t++) test_tagging(t);
    for (int t = 0; t < 3; t++) test_links(t);
    for (int t = 0; t < 3; t++) test_iterators(t);
    test_fingerprint_assert();
    for (int t = 0; t < 3; t++) test_scan(t);
    for (int t = 0; t < 3; t++) test_prefetcher(t);
    test_prefetcher_cursor();
    for (int t = 0; t < 3; t++) test_random_ops(t);
    test_mem_usage();
#if defined(KS_TEST_TRACED_CORE) && !KS_TRACE
    test_traced();
#endif
    test_keyspace_table_dict();
    printf("test_dict: all passed\n");
    return 0;
}
