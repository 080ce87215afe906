/*
 * variants_hash.c -- the `hash` variant family: prefetching inside hash values
 * (rows in variants.c's registry; rules pinned by tests/test_hash.c).
 *
 *   variant         upstream             where                what it prefetches
 *   none            -                    -                    nothing (every field looked up cold)
 *   nested-3940     Valkey PR #3940      the lookahead batch  per command one field or member (the
 *                   (merged)             (pipeline.c)         first), counted against --batch: its
 *                                                             bucket and entry in the hash's table
 *                                                             or the sorted set's member table
 *   value-2180      Valkey PR #2180      the lookahead batch  HGET and HSET's field, not counted:
 *                   (open)                                    bucket, entry, then the value if it
 *                                                             is kept by pointer
 *   find-batch-4017 Valkey PR #4017      HMGET, ZMSCORE       hashtableFindBatch: the fields or members
 *                   (merged)             (>= 2 fields)        looked up together (interleaved step
 *                                                             machines, 16 at a time), the entries
 *                                                             (hash entries, skiplist nodes) used directly
 *   getall-14988    Redis PR #14988      HGETALL              batches of 16 entries: collect them
 *                   (merged)                                  (iterating), prefetch each entry, then
 *                                                             each value kept by pointer, then reply
 *
 * The nested variants act in Valkey's cross-command batch (memory_prefetch.c),
 * so they need --pipeline lookahead; with the naive pipeline they do nothing.
 * Valkey's (3940, 2180, 4017) act on table=hashtable only; getall-14988 is
 * Redis's dict code, and on table=hashtable a study (the same three phases
 * over Valkey's iterator).
 *
 * Conventions: static variant functions; the apply functions at the bottom.
 */
#include <string.h>

#include "dict.h"
#include "keyspace.h"
#include "siphash.h"
#include "t_hash.h"
#include "t_zset.h"

/* --- find-batch-4017 ----------------------------------------------------------- */

/* hashtableFindBatch over fields[0..n) (n <= KS_HASH_BATCH_MAX) of a hash's
 * table (HMGET) or a sorted set's member table (ZMSCORE: its items are the
 * skiplist nodes): every field hashed, then one incremental find step per
 * field per turn, round robin, until all are done; the results are the
 * lookups.  0 (the command looks them up one by one) for fewer than two, a
 * compact encoding or table=dict, as the PR keeps the single lookup there. */
static int findBatch4017(ksKeyspace *ks, robj *o, ksLoadId dep, sds *fields, int n, void **found,
                         ksLoadId *found_dep) {
    if (n < 2 || ks->ops != &ksHashtableTableOps) return 0;
    hashtable *ht;
    if (o->type == OBJ_HASH && o->encoding == OBJ_ENCODING_HT) {
        ht = ksHashTable(o);
    } else if (o->type == OBJ_ZSET && o->encoding == OBJ_ENCODING_SKIPLIST) {
        ht = ksZsetTable(o, dep, &dep); /* through the zset struct (t_zset.c) */
    } else {
        return 0;
    }
    hashtableIncrementalFindState st[KS_HASH_BATCH_MAX];
    int done[KS_HASH_BATCH_MAX] = {0}, remaining = n;
    KS_MARK(KVT_MARK_BATCH, n);
    for (int i = 0; i < n; i++) {
        size_t len = sdslen(fields[i]);
        (void)len;
        (void)KS_LOAD(fields[i] - 1, len + 1, KVT_TAG_ARGV, KS_SITE_RESP_ARGV, 0);
        KS_WORK_EXACT_OF(KVT_WORK_HASH, ksSiphashCost(len));
        KS_SET_TABLE_DEP(dep);
        hashtableIncrementalFindInitWithHash(&st[i], ht, fields[i], hashtableHashKey(ht, fields[i]));
    }
    for (int cur = 0; remaining > 0; cur = cur + 1 == n ? 0 : cur + 1) {
        if (done[cur]) continue;
        KS_WORK(6);
        if (hashtableIncrementalFindStep(&st[cur])) continue;
        done[cur] = 1;
        remaining--;
    }
    for (int i = 0; i < n; i++) {
        found[i] = NULL;
        found_dep[i] = 0;
        if (hashtableIncrementalFindGetResult(&st[i], &found[i])) found_dep[i] = KS_TAKE_ENTRY_DEP();
    }
    return 1;
}

/* --- getall-14988 --------------------------------------------------------------- */

/* HGETALL in batches of KS_HASH_BATCH_MAX (HGETALL_BATCH): phase 1 collects the
 * next entries from the iterator and prefetches each; phase 2 prefetches each
 * value kept by pointer (reading the entry phase 1 brought in); phase 3 emits
 * field and value of each.  A listpack is replied as without the variant. */
static void getall14988(ksKeyspace *ks, ksClient *c, robj *o, ksLoadId dep) {
    const uint8_t *f, *v;
    size_t fl, vl;
    ksLoadId fd, vd;
    if (o->encoding != OBJ_ENCODING_HT) {
        ksHashIter it;
        ksHashIterInit(ks, &it, o, dep);
        while (ksHashIterNext(&it, &f, &fl, &fd, &v, &vl, &vd)) {
            KS_WORK(300);
            ksReplyBulk(ks, c, f, fl, fd);
            ksReplyBulk(ks, c, v, vl, vd);
        }
        ksHashIterReset(&it);
        return;
    }
    int isdict = ks->ops == &ksDictTableOps;
    dictIterator di;
    hashtableIterator hi;
    KS_SET_TABLE_DEP(dep);
    if (isdict) dictInitIterator(&di, ksHashTable(o));
    else hashtableInitIterator(&hi, ksHashTable(o), 0);
    while (1) {
        void *e[KS_HASH_BATCH_MAX];
        ksLoadId ed[KS_HASH_BATCH_MAX];
        int n = 0;
        for (; n < KS_HASH_BATCH_MAX; n++) { /* phase 1 */
            ed[n] = 0;
            if (isdict ? !dictNextStored(&di, &e[n], &ed[n]) : !hashtableNext(&hi, &e[n])) break;
            if (!isdict) ed[n] = KS_TAKE_ENTRY_DEP();
            KS_PREFETCH(e[n], KVT_TAG_KEY, KS_SITE_PF_HASH, ed[n]);
        }
        if (n == 0) break;
        KS_MARK(KVT_MARK_BATCH, n);
        for (int i = 0; i < n; i++) { /* phase 2 */
            ksLoadId ad = 0;
            const void *va = ksHashEntryValuePrefetchAddr(e[i], ed[i], &ad);
            if (va) KS_PREFETCH(va, KVT_TAG_VALUE, KS_SITE_PF_HASH, ad);
        }
        for (int i = 0; i < n; i++) { /* phase 3 */
            const char *field = e[i];
            KS_WORK(300); /* as HGETALL's loop (commands_hash.c KS_HGETALL_PAIR_WORK) */
            ksReplyBulkTagged(ks, c, (const uint8_t *)field, sdslen(field), ed[i], KVT_TAG_KEY);
            v = ksHashEntryValue(e[i], ed[i], &vl, &vd);
            ksReplyBulk(ks, c, v, vl, vd);
        }
        if (n < KS_HASH_BATCH_MAX) break;
    }
    if (isdict) dictResetIterator(&di);
    else hashtableResetIterator(&hi);
}

/* --- Apply functions (variants.c's registry) -------------------------------------- */

static void hashReset(ksVariants *v) {
    v->hash_fields = NULL;
    v->hash_getall = NULL;
    v->hash_nested = KS_HASH_NESTED_NONE;
}

void ksSetHashNone(ksVariants *v, const void *fn) {
    (void)fn;
    hashReset(v);
}

void ksSetHashNested3940(ksVariants *v, const void *fn) {
    (void)fn;
    hashReset(v);
    v->hash_nested = KS_HASH_NESTED_3940;
}

void ksSetHashValue2180(ksVariants *v, const void *fn) {
    (void)fn;
    hashReset(v);
    v->hash_nested = KS_HASH_NESTED_2180;
}

void ksSetHashFindBatch4017(ksVariants *v, const void *fn) {
    (void)fn;
    hashReset(v);
    v->hash_fields = findBatch4017;
}

void ksSetHashGetall14988(ksVariants *v, const void *fn) {
    (void)fn;
    hashReset(v);
    v->hash_getall = getall14988;
}
