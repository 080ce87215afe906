/*
 * test_hashtable.c -- unit tests of the Valkey hashtable (hashtable.c).
 *
 * Entries are heap structs holding a uint64 key.  A global "low mask" can
 * clear low hash bits to force every key into a few buckets (long child
 * chains).  hashtableCheckValid runs after mutating steps.
 * Flags: --seed N, --accurate (10x larger).
 */
#include <stdint.h>

#include "../hashtable.h"
#include "testhelp.h"

typedef struct {
    uint64_t key;
} tentry;

static uint64_t low_mask = ~0ULL;

static const void *tGetKey(const void *e, ksLoadId dep, ksLoadId *kd) {
    (void)dep;
    if (kd) *kd = 0;
    return &((const tentry *)e)->key;
}

static uint64_t mix(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return x;
}

static uint64_t tHash(const void *k) { return mix(*(const uint64_t *)k) & low_mask; }
static int tCompare(const void *a, const void *b, ksLoadId d) {
    (void)d;
    return *(const uint64_t *)a != *(const uint64_t *)b;
}
static void tFree(void *e) { free(e); }

static hashtableType ttype = {.entryGetKey = tGetKey, .hashFunction = tHash, .keyCompare = tCompare,
                              .entryDestructor = tFree};

static tentry *mk(uint64_t k) {
    tentry *e = malloc(sizeof(*e));
    e->key = k;
    return e;
}

static char err[256];
#define VALID(ht) TEST_ASSERT_MSG(hashtableCheckValid(ht, err, sizeof(err)) == 0, "%s", err)

static int findKey(hashtable *ht, uint64_t k) {
    void *f;
    if (!hashtableFind(ht, &k, &f)) return 0;
    return ((tentry *)f)->key == k;
}

/* --- Tests ----------------------------------------------------------------- */

static int test_add_find_delete(void) {
    ksArena *a = ksArenaCreate(0);
    hashtable *ht = hashtableCreate(&ttype, a);
    size_t n = test_accurate ? 200000 : 20000;
    for (size_t i = 0; i < n; i++) {
        TEST_ASSERT(hashtableAdd(ht, mk(i)));
        if (i % 997 == 0) VALID(ht);
    }
    tentry dup = {5};
    void *existing = NULL;
    TEST_ASSERT(!hashtableAddOrFind(ht, &dup, &existing) && ((tentry *)existing)->key == 5);
    TEST_ASSERT(hashtableSize(ht) == n);
    for (size_t i = 0; i < n; i++) TEST_ASSERT(findKey(ht, i));
    TEST_ASSERT(!findKey(ht, n + 1));
    for (size_t i = 0; i < n; i += 2) TEST_ASSERT(hashtableDelete(ht, &(uint64_t){i}));
    TEST_ASSERT(!hashtableDelete(ht, &(uint64_t){0}));
    VALID(ht);
    for (size_t i = 0; i < n; i++) TEST_ASSERT(findKey(ht, i) == (int)(i % 2));
    /* Delete everything: the table shrinks (incrementally) down to one bucket. */
    for (size_t i = 1; i < n; i += 2) TEST_ASSERT(hashtableDelete(ht, &(uint64_t){i}));
    hashtableRehashSteps(ht, SIZE_MAX);
    hashtableShrinkIfNeeded(ht); /* the cron's job in Valkey */
    hashtableRehashSteps(ht, SIZE_MAX);
    VALID(ht);
    TEST_ASSERT_MSG(hashtableSize(ht) == 0 && hashtableBuckets(ht) <= 1, "buckets %zu", hashtableBuckets(ht));
    hashtableRelease(ht);
    TEST_ASSERT(ksArenaAllocatedBytes(a) == 0);
    ksArenaDestroy(a);
    return 0;
}

static int test_fill_factor_and_growth(void) {
    ksArena *a = ksArenaCreate(0);
    hashtable *ht = hashtableCreate(&ttype, a);
    /* First insert: one bucket; 7 entries fit one bucket (100% fill). */
    for (uint64_t i = 0; i < 7; i++) hashtableAdd(ht, mk(i));
    TEST_ASSERT(hashtableBuckets(ht) == 1);
    hashtableAdd(ht, mk(7)); /* 8 > 7: grow to ceil(8*5/32)=2 buckets */
    hashtableRehashSteps(ht, SIZE_MAX);
    TEST_ASSERT_MSG(hashtableBuckets(ht) == 2, "buckets %zu", hashtableBuckets(ht));
    for (uint64_t i = 8; i < 1000; i++) hashtableAdd(ht, mk(i));
    hashtableRehashSteps(ht, SIZE_MAX);
    /* Fill never exceeds 100% of slots under ALLOW. */
    TEST_ASSERT(hashtableSize(ht) <= hashtableBuckets(ht) * 7);
    VALID(ht);
    hashtableRelease(ht);
    ksArenaDestroy(a);
    return 0;
}

/* Every rehashing state: mid-expand, mid-shrink, paused, policies. */
static int test_rehash_states(void) {
    ksArena *a = ksArenaCreate(0);
    for (int policy = 0; policy < 3; policy++) {
        hashtableSetResizePolicy(HASHTABLE_RESIZE_ALLOW);
        hashtable *ht = hashtableCreate(&ttype, a);
        for (uint64_t i = 0; i < 5000; i++) hashtableAdd(ht, mk(i));
        hashtableRehashSteps(ht, SIZE_MAX);
        /* Force an expand and stop in the middle of it. */
        TEST_ASSERT(hashtableExpand(ht, 40000));
        TEST_ASSERT(hashtableIsRehashing(ht));
        hashtableRehashSteps(ht, 100);
        long idx;
        int e0, e1;
        hashtableRehashingInfo(ht, &idx, &e0, &e1);
        TEST_ASSERT(idx == 100 && e1 > e0);
        VALID(ht);
        hashtableSetResizePolicy((hashtableResizePolicy)policy);
        /* Reads, inserts and deletes during rehashing. */
        for (uint64_t i = 0; i < 5000; i++) TEST_ASSERT(findKey(ht, i));
        for (uint64_t i = 5000; i < 6000; i++) TEST_ASSERT(hashtableAdd(ht, mk(i)));
        for (uint64_t i = 0; i < 6000; i += 3) TEST_ASSERT(hashtableDelete(ht, &i));
        VALID(ht);
        for (uint64_t i = 0; i < 6000; i++) TEST_ASSERT(findKey(ht, i) == (i % 3 != 0));
        /* Paused: no steps on reads. */
        hashtablePauseRehashing(ht);
        hashtableRehashingInfo(ht, &idx, NULL, NULL);
        long before = idx;
        for (uint64_t i = 0; i < 100; i++) findKey(ht, i);
        hashtableRehashingInfo(ht, &idx, NULL, NULL);
        TEST_ASSERT(!hashtableIsRehashing(ht) || idx == before);
        hashtableResumeRehashing(ht);
        hashtableSetResizePolicy(HASHTABLE_RESIZE_ALLOW);
        hashtableRehashSteps(ht, SIZE_MAX);
        TEST_ASSERT(!hashtableIsRehashing(ht));
        /* Shrink rehashing: delete most keys, stop mid-shrink. */
        for (uint64_t i = 0; i < 6000; i++)
            if (i % 3 != 0 && i % 50 != 1) hashtableDelete(ht, &i);
        hashtableRehashingInfo(ht, &idx, &e0, &e1);
        if (idx >= 0) TEST_ASSERT(e1 < e0);
        VALID(ht);
        for (uint64_t i = 0; i < 6000; i++) TEST_ASSERT(findKey(ht, i) == (i % 3 != 0 && i % 50 == 1));
        hashtableRelease(ht);
    }
    hashtableSetResizePolicy(HASHTABLE_RESIZE_ALLOW);
    TEST_ASSERT(ksArenaAllocatedBytes(a) == 0);
    ksArenaDestroy(a);
    return 0;
}

/* Long chains: every key in bucket 0 of small tables. */
static int test_chaining(void) {
    ksArena *a = ksArenaCreate(0);
    low_mask = ~0xFFFFFULL;
    hashtable *ht = hashtableCreate(&ttype, a);
    for (uint64_t i = 0; i < 300; i++) {
        TEST_ASSERT(hashtableAdd(ht, mk(i)));
        VALID(ht);
    }
    TEST_ASSERT(hashtableChainedBuckets(ht, 0) + hashtableChainedBuckets(ht, 1) > 10);
    unsigned long long s = test_seed;
    for (int k = 0; k < 300; k++) {
        uint64_t i = test_rand(&s) % 300;
        int had = findKey(ht, i);
        TEST_ASSERT(hashtableDelete(ht, &i) == had);
        VALID(ht);
    }
    hashtableRelease(ht);
    low_mask = ~0ULL;
    TEST_ASSERT(ksArenaAllocatedBytes(a) == 0);
    ksArenaDestroy(a);
    return 0;
}

static int test_two_phase_insert(void) {
    ksArena *a = ksArenaCreate(0);
    hashtable *ht = hashtableCreate(&ttype, a);
    for (uint64_t i = 0; i < 3000; i++) {
        hashtablePosition pos;
        void *existing;
        TEST_ASSERT(hashtableFindPositionForInsert(ht, &i, &pos, &existing));
        hashtableInsertAtPosition(ht, mk(i), &pos);
    }
    uint64_t k = 17;
    hashtablePosition pos;
    void *existing = NULL;
    TEST_ASSERT(!hashtableFindPositionForInsert(ht, &k, &pos, &existing) && ((tentry *)existing)->key == 17);
    VALID(ht);
    for (uint64_t i = 0; i < 3000; i++) TEST_ASSERT(findKey(ht, i));
    hashtableRelease(ht);
    ksArenaDestroy(a);
    return 0;
}

static int test_iterators(void) {
    ksArena *a = ksArenaCreate(0);
    hashtable *ht = hashtableCreate(&ttype, a);
    size_t n = 10000;
    low_mask = ~0x3ULL; /* some chaining */
    for (uint64_t i = 0; i < n; i++) hashtableAdd(ht, mk(i));
    TEST_ASSERT(hashtableExpand(ht, 4 * n)); /* iterate while rehashing */
    hashtableRehashSteps(ht, 50);
    uint8_t *seen = calloc(n, 1);
    for (int mode = 0; mode < 3; mode++) {
        memset(seen, 0, n);
        hashtableIterator it;
        hashtableInitIterator(&it, ht, 0);
        hashtableSetIteratorPrefetch(&it, (hashtableIterPrefetch)mode);
        void *e;
        size_t count = 0;
        while (hashtableNext(&it, &e)) {
            uint64_t k = ((tentry *)e)->key;
            TEST_ASSERT(k < n && !seen[k]);
            seen[k] = 1;
            count++;
        }
        hashtableResetIterator(&it);
        TEST_ASSERT(count == n);
    }
    /* Safe iterator deleting every other entry: each entry returned once. */
    memset(seen, 0, n);
    hashtableIterator it;
    hashtableInitIterator(&it, ht, HASHTABLE_ITER_SAFE | HASHTABLE_ITER_PREFETCH_VALUES);
    hashtableSetIteratorPrefetch(&it, HASHTABLE_ITER_PREFETCH_VALKEY);
    void *e;
    size_t count = 0;
    while (hashtableNext(&it, &e)) {
        uint64_t k = ((tentry *)e)->key;
        TEST_ASSERT(!seen[k]);
        seen[k] = 1;
        count++;
        if (k % 2 == 0) TEST_ASSERT(hashtableDelete(ht, &k));
    }
    hashtableResetIterator(&it);
    TEST_ASSERT(count == n && hashtableSize(ht) == n / 2);
    VALID(ht);
    free(seen);
    low_mask = ~0ULL;
    hashtableRelease(ht);
    ksArenaDestroy(a);
    return 0;
}

typedef struct {
    uint8_t *seen;
    size_t n;
} scanSeen;

static void scanCb(void *pd, void *e) {
    scanSeen *s = pd;
    uint64_t k = ((tentry *)e)->key;
    if (k < s->n) s->seen[k] = 1;
}

/* SCAN returns every key present for the whole scan at least once, across
 * growth and shrinking between calls. */
static int test_scan_guarantee(void) {
    ksArena *a = ksArenaCreate(0);
    for (int round = 0; round < 4; round++) {
        hashtable *ht = hashtableCreate(&ttype, a);
        size_t stable = 2000;
        for (uint64_t i = 0; i < stable; i++) hashtableAdd(ht, mk(i));
        scanSeen s = {calloc(stable, 1), stable};
        size_t cursor = 0;
        uint64_t next_key = 1000000;
        unsigned long long r = test_seed + (unsigned long long)round;
        int calls = 0;
        do {
            cursor = hashtableScan(ht, cursor, scanCb, &s);
            calls++;
            /* churn: grow (round 0,1) or shrink (round 2,3) the table */
            for (int k = 0; k < 3; k++) {
                if (round < 2) {
                    hashtableAdd(ht, mk(next_key++));
                } else if (next_key > 1000000) {
                    uint64_t d = 1000000 + test_rand(&r) % (next_key - 1000000);
                    hashtableDelete(ht, &d);
                }
            }
            if (round >= 2 && calls == 1) {
                for (int k = 0; k < 20000; k++) hashtableAdd(ht, mk(next_key++));
            }
            if (round % 2) hashtableRehashSteps(ht, 3);
        } while (cursor != 0 && calls < 1000000);
        for (size_t i = 0; i < stable; i++) TEST_ASSERT_MSG(s.seen[i], "round %d key %zu missed", round, i);
        VALID(ht);
        free(s.seen);
        hashtableRelease(ht);
    }
    ksArenaDestroy(a);
    return 0;
}

static int test_incremental_find(void) {
    ksArena *a = ksArenaCreate(0);
    hashtable *ht = hashtableCreate(&ttype, a);
    low_mask = ~0x7ULL;
    for (uint64_t i = 0; i < 20000; i += 2) hashtableAdd(ht, mk(i));
    for (int phase = 0; phase < 2; phase++) {
        if (phase == 1) { /* during rehashing */
            TEST_ASSERT(hashtableExpand(ht, 100000));
            hashtableRehashSteps(ht, 500);
            TEST_ASSERT(hashtableIsRehashing(ht));
        }
        enum { B = 32 };
        hashtableIncrementalFindState st[B];
        uint64_t keys[B];
        unsigned long long r = test_seed;
        for (int round = 0; round < 200; round++) {
            for (int i = 0; i < B; i++) {
                keys[i] = test_rand(&r) % 20000;
                hashtableIncrementalFindInit(&st[i], ht, &keys[i]);
            }
            int more = 1;
            while (more) {
                more = 0;
                for (int i = 0; i < B; i++) more |= hashtableIncrementalFindStep(&st[i]);
            }
            for (int i = 0; i < B; i++) {
                void *f = NULL;
                int got = hashtableIncrementalFindGetResult(&st[i], &f);
                TEST_ASSERT(got == (keys[i] % 2 == 0));
                if (got) TEST_ASSERT(((tentry *)f)->key == keys[i]);
            }
        }
    }
    low_mask = ~0ULL;
    hashtableRelease(ht);
    ksArenaDestroy(a);
    return 0;
}

/* Random operations against a reference bitmap, every policy and pause state. */
static int test_random_differential(void) {
    ksArena *a = ksArenaCreate(0);
    size_t steps = test_accurate ? 400000 : 40000;
    size_t range = 3000;
    for (int collide = 0; collide < 2; collide++) {
        low_mask = collide ? ~0xFFULL : ~0ULL;
        hashtable *ht = hashtableCreate(&ttype, a);
        uint8_t *ref = calloc(range, 1);
        unsigned long long r = test_seed * 31 + (unsigned long long)collide;
        int paused = 0;
        for (size_t s = 0; s < steps; s++) {
            uint64_t k = test_rand(&r) % range;
            unsigned op = (unsigned)(test_rand(&r) % 100);
            if (op < 40) {
                tentry *e = mk(k);
                bool added = hashtableAdd(ht, e);
                if (!added) free(e);
                TEST_ASSERT(added == !ref[k]);
                ref[k] = 1;
            } else if (op < 70) {
                TEST_ASSERT(hashtableDelete(ht, &k) == ref[k]);
                ref[k] = 0;
            } else if (op < 95) {
                TEST_ASSERT(findKey(ht, k) == ref[k]);
            } else if (op < 97) {
                hashtableSetResizePolicy((hashtableResizePolicy)(test_rand(&r) % 3));
            } else if (op < 99) {
                if (paused) {
                    hashtableResumeRehashing(ht);
                    paused = 0;
                } else {
                    hashtablePauseRehashing(ht);
                    paused = 1;
                }
            } else {
                hashtableRehashSteps(ht, 10);
            }
            if (s % 4096 == 0) VALID(ht);
        }
        if (paused) hashtableResumeRehashing(ht);
        hashtableSetResizePolicy(HASHTABLE_RESIZE_ALLOW);
        VALID(ht);
        size_t cnt = 0;
        for (size_t i = 0; i < range; i++) cnt += ref[i];
        TEST_ASSERT(cnt == hashtableSize(ht));
        free(ref);
        hashtableRelease(ht);
    }
    low_mask = ~0ULL;
    TEST_ASSERT(ksArenaAllocatedBytes(a) == 0);
    ksArenaDestroy(a);
    return 0;
}

static int test_arena(void) {
    ksArena *a = ksArenaCreate(0);
    TEST_ASSERT(ksArenaBase(a) == KS_ARENA_DEFAULT_BASE);
    ksArena *b = ksArenaCreate(0); /* second arena: next slot */
    TEST_ASSERT(ksArenaBase(b) == KS_ARENA_DEFAULT_BASE + KS_ARENA_SPAN);
    ksArenaDestroy(b);
    TEST_ASSERT(ksArenaSizeClass(1) == 8 && ksArenaSizeClass(17) == 32 && ksArenaSizeClass(129) == 160);
    TEST_ASSERT(ksArenaSizeClass(4097) == 5120);
    void *p64 = ksArenaAlloc(a, 64);
    TEST_ASSERT(((uintptr_t)p64 % 64) == 0);
    /* Every class boundary region: blocks never overlap, usable sizes hold. */
    enum { NB = 4000 };
    static uint8_t *blk[NB];
    static size_t bsz[NB];
    unsigned long long r = test_seed;
    for (int i = 0; i < NB; i++) {
        bsz[i] = 1 + test_rand(&r) % (i % 10 == 0 ? 70000 : 9000);
        blk[i] = ksArenaAlloc(a, bsz[i]);
        TEST_ASSERT(ksArenaUsableSize(a, blk[i]) >= bsz[i]);
        memset(blk[i], i & 0xff, bsz[i]);
        if (i % 3 == 0) {
            int j = (int)(test_rand(&r) % (unsigned long long)(i + 1));
            if (blk[j]) {
                ksArenaFree(a, blk[j]);
                blk[j] = NULL;
            }
        }
    }
    for (int i = 0; i < NB; i++) {
        if (!blk[i]) continue;
        for (size_t k = 0; k < bsz[i]; k += 97) TEST_ASSERT(blk[i][k] == (i & 0xff));
        TEST_ASSERT(ksArenaUsableSize(a, blk[i]) == ksArenaSizeClass(bsz[i]));
        ksArenaFree(a, blk[i]);
    }
    void *big = ksArenaAlloc(a, 100000);
    TEST_ASSERT(((uintptr_t)big % 4096) == 0 && ksArenaUsableSize(a, big) >= 100000);
    void *p = ksArenaAlloc(a, 40);
    ksArenaFree(a, p);
    TEST_ASSERT(ksArenaAlloc(a, 33) == p); /* LIFO reuse within the class */
    uint64_t before = ksArenaAllocatedBytes(a);
    void *q = ksArenaRealloc(a, p64, 200);
    TEST_ASSERT(ksArenaAllocatedBytes(a) == before - 64 + 224);
    ksArenaFree(a, q);
    ksArenaFree(a, big);
    ksArenaFree(a, p);
    TEST_ASSERT(ksArenaAllocatedBytes(a) == 0 && ksArenaLiveAllocations(a) == 0);
    TEST_ASSERT(ksArenaCheck(a, err, sizeof(err)) == 0);
    ksArenaDestroy(a);
    /* Determinism: the same sequence gives the same addresses in a new arena. */
    ksArena *c = ksArenaCreate(0);
    void *x1 = ksArenaAlloc(c, 48);
    ksArenaDestroy(c);
    c = ksArenaCreate(0);
    TEST_ASSERT(ksArenaAlloc(c, 48) == x1);
    ksArenaDestroy(c);
    /* Page retention: the next arena reuses the span (same base, same
     * addresses, fresh accounting), its pages still mapped and writable. */
    ksArenaSetRetain(1);
    c = ksArenaCreate(0);
    uint8_t *y1 = ksArenaAlloc(c, 48), *y2 = ksArenaAlloc(c, 200000);
    memset(y2, 7, 200000);
    ksArenaDestroy(c);
    c = ksArenaCreate(0);
    TEST_ASSERT(ksArenaBase(c) == KS_ARENA_DEFAULT_BASE && ksArenaAllocatedBytes(c) == 0);
    TEST_ASSERT(ksArenaAlloc(c, 48) == y1);
    uint8_t *z2 = ksArenaAlloc(c, 200000);
    TEST_ASSERT(z2 == y2 && z2[199999] == 7); /* same pages: contents are stale */
    TEST_ASSERT(ksArenaCheck(c, err, sizeof(err)) == 0);
    ksArena *d = ksArenaCreate(0); /* nothing retained now: the next slot */
    TEST_ASSERT(ksArenaBase(d) == KS_ARENA_DEFAULT_BASE + KS_ARENA_SPAN);
    ksArenaDestroy(d); /* retained ... */
    ksArenaDestroy(c); /* ... so this one is unmapped */
    ksArenaSetRetain(0); /* unmaps d's span */
    c = ksArenaCreate(0);
    TEST_ASSERT(ksArenaBase(c) == KS_ARENA_DEFAULT_BASE);
    d = ksArenaCreate(0);
    TEST_ASSERT(ksArenaBase(d) == KS_ARENA_DEFAULT_BASE + KS_ARENA_SPAN);
    ksArenaDestroy(d);
    ksArenaDestroy(c);
    return 0;
}

int main(int argc, char **argv) {
    TEST_INIT(argc, argv);
    RUN(test_arena);
    RUN(test_add_find_delete);
    RUN(test_fill_factor_and_growth);
    RUN(test_rehash_states);
    RUN(test_chaining);
    RUN(test_two_phase_insert);
    RUN(test_iterators);
    RUN(test_scan_guarantee);
    RUN(test_incremental_find);
    RUN(test_random_differential);
    return TEST_DONE();
}
