/*
 * t_hash.c -- the hash type, as Valkey and Redis store it.
 *
 * A hash key's value robj (object.h: the unified kvobj, or the legacy entry's
 * val) has type OBJ_HASH and one of two encodings:
 *
 *   OBJ_ENCODING_LISTPACK (small: <= 512 fields, fields and values <= 64 bytes)
 *
 *     o->ptr -> +-----------+---------+------------------------------+------+
 *               | total u32 | num u16 | f1 v1 f2 v2 ...              | 0xFF |
 *               +-----------+---------+------------------------------+------+
 *     each element: [enc: 1 B len < 64 | 2 B len < 4096 | 5 B] [bytes] [backlen 1..5 B]
 *
 *     Lookup (lpFind) walks the elements from the first, comparing fields and
 *     skipping values: a linear scan of one contiguous block.  Writes append
 *     (lpAppend) or rewrite in place (lpReplace, lpDeleteRange), reallocating.
 *
 *   OBJ_ENCODING_HT (large)
 *
 *     table=hashtable: o->ptr -> Valkey hashtable (hashtable.c, the keyspace's
 *       own table code) whose entries are field-value entries;
 *     table=dict:      o->ptr -> Redis no_value dict (dict.c, keys_are_odd)
 *       of the same entries: an entry alone in its bucket sits in the cell.
 *
 *     Field-value entry (Valkey and Redis entry.c; the entry pointer IS the
 *     field sds, so a stored item is its own lookup key):
 *
 *       embedded (field + value sds <= 128 B):
 *                   entry
 *                     v
 *         +---------+------------+-------------------------------+
 *         | fhdr5/8 | field \0   | vhdr8 | value \0 (padding)     |
 *         +---------+------------+-------------------------------+
 *       by pointer (field sdshdr8+, aux bit HAS_VALUE_PTR set):
 *                               entry
 *                                 v
 *         +---------------+--------+--------------+
 *         | value sds *   | fhdr8+ | field \0     |       value sds: own allocation
 *         +-------|-------+--------+--------------+
 *                 +---------------------------------> [vhdr][value \0]
 *
 *   A lookup reads: the key's object header (o->ptr, encoding), the inner
 *   table (its struct, one bucket line or cell, the candidate entries' field
 *   bytes) and the value (in the entry's line when embedded, one more
 *   dependent miss when by pointer) -- the chain the nested prefetch
 *   variants shorten (variants.c).
 *
 * Deviations: listpack elements are always strings (a listpack stores
 * integer-looking strings as integers: fewer bytes, the same scan); the hash
 * has no field expiry (no expire metadata in entries, no volatile set); the
 * unified layout never embeds a hash's value (as upstream: only strings).
 *
 * Conventions: public ksHash...; static internals without prefix; the
 * keyspace whose callbacks run is ksCur.
 */
#include "t_hash.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dict.h"
#include "keyspace.h"
#include "listpack.h"
#include "siphash.h"

static_assert(KS_HASH_MAX_LISTPACK_VALUE < 4096, "listpack hash elements use a 1- or 2-byte string header");
static_assert(2 * KS_HASH_MAX_LISTPACK_ENTRIES < 65535, "a listpack hash's element count fits its u16");
static_assert(OBJ_ENCODING_LISTPACK < 16 && OBJ_ENCODING_HT < 16, "encodings fit robj's 4 bits");

/* --- Field-value entries ---------------------------------------------------- */

/* entry.c FIELD_SDS_AUX_BIT_ENTRY_HAS_VALUE_PTR: the flag bit above the sds type bits. */
#define AUX_HAS_VALUE_PTR (1u << (SDS_TYPE_BITS + 1))
static_assert(sizeof(sds) == 8, "the value pointer precedes the field");

static int entryHasValuePtr(const char *f) {
    uint8_t fl = (uint8_t)f[-1];
    return (fl & SDS_TYPE_MASK) != SDS_TYPE_5 && (fl & AUX_HAS_VALUE_PTR);
}

static uint8_t *entryAllocPtr(const char *f) {
    return (uint8_t *)sdsAllocPtr(f) - (entryHasValuePtr(f) ? sizeof(sds) : 0);
}

static sds *entryValueRef(const char *f) { return (sds *)sdsAllocPtr(f) - 1; }

/* entryCreate: `v` is the value's own sds (the caller's sdsdup, allocated first,
 * as hashTypeSet does); embedded, it is copied in and freed. */
static char *entryCreate(ksKeyspace *ks, const char *field, size_t flen, sds v) {
    size_t vlen = sdslen(v);
    int ftype = sdsReqType(flen);
    size_t fsize = sdsSize(ftype, flen), vsize = sdsSize(SDS_TYPE_8, vlen);
    if (fsize + vsize <= KS_HASH_EMBED_VALUE_MAX) {
        uint8_t *buf = ksArenaAlloc(ks->arena, fsize + vsize);
        size_t room = ksArenaUsableSize(ks->arena, buf);
        char *f = sdsWriteAt(buf, ftype, field, flen, flen);
        sdsWriteAt(buf + fsize, SDS_TYPE_8, v, vlen, room - fsize - sdsHdrSize(SDS_TYPE_8) - 1);
        KS_STORE(buf, fsize + vsize, KVT_TAG_KEY, KS_SITE_HASH_STORE, 0);
        ksArenaFree(ks->arena, sdsAllocPtr(v));
        return f;
    }
    if (ftype == SDS_TYPE_5) ftype = SDS_TYPE_8;
    fsize = sdsSize(ftype, flen);
    uint8_t *buf = ksArenaAlloc(ks->arena, sizeof(sds) + fsize);
    memcpy(buf, &v, sizeof(sds));
    char *f = sdsWriteAt(buf + sizeof(sds), ftype, field, flen, flen);
    f[-1] = (char)((uint8_t)f[-1] | AUX_HAS_VALUE_PTR);
    KS_STORE(buf, sizeof(sds) + fsize, KVT_TAG_KEY, KS_SITE_HASH_STORE, 0);
    return f;
}

static void entryFree(ksKeyspace *ks, char *f) {
    if (entryHasValuePtr(f)) ksArenaFree(ks->arena, sdsAllocPtr(*entryValueRef(f)));
    ksArenaFree(ks->arena, entryAllocPtr(f));
}

static size_t entryAllocBytes(const ksKeyspace *ks, const char *f) {
    size_t n = ksArenaUsableSize(ks->arena, entryAllocPtr(f));
    if (entryHasValuePtr(f)) n += ksArenaUsableSize(ks->arena, sdsAllocPtr(*entryValueRef(f)));
    return n;
}

/* A new sds holding bytes p (sdsdup / sdsnewlen), recorded as a store. */
static sds newSds(ksKeyspace *ks, const void *p, size_t len) {
    int t = sdsReqType(len);
    void *m = ksArenaAlloc(ks->arena, sdsSize(t, len));
    KS_STORE(m, sdsSize(t, len), KVT_TAG_VALUE, KS_SITE_HASH_STORE, 0);
    return sdsWriteAt(m, t, p, len, len);
}

const uint8_t *ksHashEntryValue(const void *entry, ksLoadId dep, size_t *vlen, ksLoadId *vdep) {
    const char *f = entry;
    KS_ID_VAR(d) = dep;
    const char *v;
    if (entryHasValuePtr(f)) {
        const sds *ref = entryValueRef(f);
        d = KS_LOAD(ref, sizeof(sds), KVT_TAG_KEY, KS_SITE_HASH_ENTRY, dep);
        v = *ref;
    } else {
        v = f + sdslen(f) + 1 + sdsHdrSize(SDS_TYPE_8);
    }
    size_t hs = sdsHdrSize((uint8_t)v[-1] & SDS_TYPE_MASK);
    (void)KS_LOAD(v - hs, hs, KVT_TAG_VALUE, KS_SITE_HASH_ENTRY, d);
    *vlen = sdslen(v);
    if (vdep) *vdep = d;
    return (const uint8_t *)v;
}

const void *ksHashEntryValuePrefetchAddr(const void *entry, ksLoadId dep, ksLoadId *addr_dep) {
    const char *f = entry;
    (void)KS_LOAD(f - 1, 1, KVT_TAG_KEY, KS_SITE_HASH_ENTRY, dep); /* the aux bit */
    if (!entryHasValuePtr(f)) return NULL;
    const sds *ref = entryValueRef(f);
    KS_ID_VAR(l) = KS_LOAD(ref, sizeof(sds), KVT_TAG_KEY, KS_SITE_HASH_ENTRY, dep);
    if (addr_dep) *addr_dep = l;
    return sdsAllocPtr(*ref);
}

/* --- The inner tables' types -------------------------------------------------- */

/* hashHashtableType / entryHashDictType: the entry is its field (the key);
 * SipHash of the field; sds compare; entryFree. */
static const void *fieldGetKey(const void *entry, ksLoadId dep, ksLoadId *key_dep) {
    if (key_dep) *key_dep = dep;
    return entry;
}

static uint64_t fieldHash(const void *key) {
    const char *k = key;
    return ksSiphash(k, sdslen(k), ksCur->sipkey);
}

static uint64_t fieldEntryHash(const void *entry, ksLoadId dep) {
    const char *f = entry;
    (void)KS_LOAD(f - 1, sdslen(f) + 1, KVT_TAG_KEY, KS_SITE_HASH_ENTRY, dep);
    KS_WORK_EXACT_OF(KVT_WORK_HASH, ksSiphashCost(sdslen(f)));
    return fieldHash(f);
}

static int fieldCompare(const void *a, const void *b, ksLoadId bdep) { return ksKeyCompare(a, b, bdep); }

static void fieldDestructor(void *entry) { entryFree(ksCur, entry); }

static hashtableType fieldHashtableType = {
    .entryGetKey = fieldGetKey,
    .hashFunction = fieldHash,
    .entryHash = fieldEntryHash,
    .keyCompare = fieldCompare,
    .entryDestructor = fieldDestructor,
};

static dictType fieldDictType = {
    .hashFunction = fieldHash,
    .entryHash = fieldEntryHash,
    .keyCompare = fieldCompare,
    .entryDestructor = fieldDestructor,
    .no_value = 1,
    .keys_are_odd = 1,
};

static int isDict(const ksKeyspace *ks) { return ks->ops == &ksDictTableOps; }

/* The hash of a lookup field: reading its argv bytes and SipHash. */
static uint64_t lookupHash(const char *field, size_t flen) {
    (void)KS_LOAD(field - 1, flen + 1, KVT_TAG_ARGV, KS_SITE_RESP_ARGV, 0);
    KS_WORK_EXACT_OF(KVT_WORK_HASH, ksSiphashCost(flen));
    return ksSiphash(field, flen, ksCur->sipkey);
}

static uint8_t *lpAppendPair(ksKeyspace *ks, uint8_t *lp, const char *f, size_t flen, const uint8_t *v,
                             size_t vlen) {
    size_t fb = ksLpElementBytes(flen), vb = ksLpElementBytes(vlen);
    uint8_t buf[2 * (KS_HASH_MAX_LISTPACK_VALUE + 8)];
    ksLpWriteElement(buf, f, flen);
    ksLpWriteElement(buf + fb, v, vlen);
    return ksLpSplice(ks, lp, ksLpTotal(lp) - 1, 0, buf, fb + vb, 2);
}

/* --- Objects ------------------------------------------------------------------------ */

static void *hashTable(const robj *o) { return o->encoding == OBJ_ENCODING_HT ? o->ptr : NULL; }
void *ksHashTable(const robj *o) { return hashTable(o); }

robj *ksEntryObject(const ksKeyspace *ks, void *entry, ksLoadId dep, ksLoadId *odep) {
    KS_ID_VAR(d) = dep;
    robj *o = entry;
    if (ks->layout == KS_LAYOUT_LEGACY) {
        legacyEntry *e = entry;
        d = KS_LOAD(&e->val, 8, KVT_TAG_OBJECT, KS_SITE_OBJ_ENTRY, dep);
        o = e->val;
    }
    d = KS_LOAD(o, sizeof(robj), KVT_TAG_OBJECT, KS_SITE_OBJ_VALUE_PTR, d);
    if (odep) *odep = d;
    return o;
}


void *ksHashEntryCreate(ksKeyspace *ks, const char *key, size_t klen, int64_t expire_ms) {
    return ksEntryCreateObject(ks, key, klen, OBJ_HASH, OBJ_ENCODING_LISTPACK, ksLpNew(ks), expire_ms);
}

size_t ksHashLength(const ksKeyspace *ks, const robj *o) {
    if (o->encoding == OBJ_ENCODING_LISTPACK) return ksLpCount(o->ptr) / 2;
    return isDict(ks) ? dictSize(o->ptr) : hashtableSize(o->ptr);
}

/* hashTypeConvertListpack: a table pre-sized for the fields, every pair moved
 * into a new entry in listpack order, then the listpack freed. */
static void convertToTable(ksKeyspace *ks, robj *o, ksLoadId dep) {
    uint8_t *lp = o->ptr;
    size_t n = ksLpCount(lp) / 2;
    void *t;
    if (isDict(ks)) {
        t = dictCreate(&fieldDictType, ks->arena);
        dictExpand(t, n);
    } else {
        t = hashtableCreate(&fieldHashtableType, ks->arena);
        hashtableExpand(t, n);
    }
    KS_ID_VAR(lh) = ksLpLoadHeader(lp, dep);
    const uint8_t *p = lp + KS_LISTPACK_HDR;
    while (*p != 0xFF) {
        size_t flen, vlen;
        const uint8_t *f = ksLpGet(p, &flen, lh);
        p += ksLpElementBytes(flen);
        const uint8_t *v = ksLpGet(p, &vlen, lh);
        p += ksLpElementBytes(vlen);
        (void)KS_LOAD(f, flen, KVT_TAG_VALUE, KS_SITE_HASH_LP, lh);
        (void)KS_LOAD(v, vlen, KVT_TAG_VALUE, KS_SITE_HASH_LP, lh);
        char fbuf[KS_HASH_MAX_LISTPACK_VALUE + 1];
        memcpy(fbuf, f, flen);
        char *e = entryCreate(ks, fbuf, flen, newSds(ks, v, vlen));
        if (isDict(ks)) dictAdd(t, e, NULL);
        else hashtableAdd(t, e);
    }
    ksArenaFree(ks->arena, lp);
    o->encoding = OBJ_ENCODING_HT;
    o->ptr = t;
    KS_STORE(o, sizeof(robj), KVT_TAG_OBJECT, KS_SITE_HASH_STORE, 0);
}

void ksHashTryConversion(ksKeyspace *ks, robj *o, ksLoadId dep, sds *argv, int start, int end) {
    if (o->encoding != OBJ_ENCODING_LISTPACK) return;
    size_t new_fields = (size_t)(end - start + 1) / 2;
    if (new_fields > KS_HASH_MAX_LISTPACK_ENTRIES) {
        convertToTable(ks, o, dep);
        if (isDict(ks)) dictExpand(o->ptr, new_fields);
        else hashtableExpand(o->ptr, new_fields);
        return;
    }
    for (int i = start; i <= end; i++) {
        if (sdslen(argv[i]) > KS_HASH_MAX_LISTPACK_VALUE) {
            convertToTable(ks, o, dep);
            return;
        }
    }
}

int ksHashSet(ksKeyspace *ks, robj *o, ksLoadId dep, sds field, size_t flen, const uint8_t *val,
              size_t vlen) {
    if (o->encoding == OBJ_ENCODING_LISTPACK &&
        (flen > KS_HASH_MAX_LISTPACK_VALUE || vlen > KS_HASH_MAX_LISTPACK_VALUE))
        convertToTable(ks, o, dep);
    if (o->encoding == OBJ_ENCODING_LISTPACK) {
        uint8_t *lp = o->ptr;
        uint8_t *fp = ksLpFindPair(lp, field, flen, dep);
        int update = fp != NULL;
        if (update) { /* lpReplace the value element after the field */
            size_t fl, ol;
            ksLpGet(fp, &fl, 0);
            uint8_t *vp = fp + ksLpElementBytes(fl);
            ksLpGet(vp, &ol, 0);
            uint8_t buf[KS_HASH_MAX_LISTPACK_VALUE + 8];
            ksLpWriteElement(buf, val, vlen);
            lp = ksLpSplice(ks, lp, (size_t)(vp - lp), ksLpElementBytes(ol), buf, ksLpElementBytes(vlen), 0);
        } else {
            lp = lpAppendPair(ks, lp, field, flen, val, vlen);
        }
        o->ptr = lp;
        KS_STORE(&o->ptr, 8, KVT_TAG_OBJECT, KS_SITE_HASH_STORE, 0);
        if (ksHashLength(ks, o) > KS_HASH_MAX_LISTPACK_ENTRIES) convertToTable(ks, o, dep);
        return !update;
    }
    sds v = newSds(ks, val, vlen); /* sdsdup(value): HASH_SET_COPY */
    uint64_t h = lookupHash(field, flen);
    KS_SET_TABLE_DEP(dep);
    if (isDict(ks)) { /* Redis: dictFindLink, then dictSetKeyAtLink */
        dict *d = o->ptr;
        dictEntryLink bucket = NULL;
        ksLoadId idep = 0;
        dictEntryLink link = dictFindLinkWithHash(d, field, h, &bucket, &idep);
        if (link) {
            char *old = dictEntryStored(*link);
            char *e = entryCreate(ks, old, sdslen(old), v);
            dictSetKeyAtLink(d, e, &link, 0);
            entryFree(ks, old);
            return 0;
        }
        dictSetKeyAtLink(d, entryCreate(ks, field, flen, v), &bucket, 1);
        return 1;
    }
    hashtable *ht = o->ptr;
    hashtablePosition pos;
    void *existing;
    if (hashtableFindPositionForInsertWithHash(ht, field, h, &pos, &existing)) {
        hashtableInsertAtPosition(ht, entryCreate(ks, field, flen, v), &pos);
        return 1;
    }
    /* entryUpdate: a new entry for the new value, replacing the old one */
    char *e = entryCreate(ks, existing, sdslen(existing), v);
    hashtableReplaceReallocatedEntry(ht, existing, e);
    entryFree(ks, existing);
    return 0;
}

int ksHashGet(ksKeyspace *ks, robj *o, ksLoadId dep, sds field, const uint8_t **val, size_t *vlen,
              ksLoadId *vdep) {
    size_t flen = sdslen(field);
    if (o->encoding == OBJ_ENCODING_LISTPACK) {
        uint8_t *fp = ksLpFindPair(o->ptr, field, flen, dep);
        if (!fp) return -1;
        size_t fl;
        ksLpGet(fp, &fl, dep);
        *val = ksLpGet(fp + ksLpElementBytes(fl), vlen, dep);
        if (vdep) *vdep = dep;
        return 0;
    }
    uint64_t h = lookupHash(field, flen);
    void *e = NULL;
    KS_SET_TABLE_DEP(dep);
    ksLoadId edep = 0;
    if (isDict(ks)) {
        e = dictFetchStoredWithHash(o->ptr, field, h, &edep);
        if (!e) return -1;
    } else {
        if (!hashtableFindWithHash(o->ptr, field, h, &e)) return -1;
        edep = KS_TAKE_ENTRY_DEP();
    }
    *val = ksHashEntryValue(e, edep, vlen, vdep);
    return 0;
}

int ksHashDelete(ksKeyspace *ks, robj *o, ksLoadId dep, sds field) {
    size_t flen = sdslen(field);
    if (o->encoding == OBJ_ENCODING_LISTPACK) {
        uint8_t *lp = o->ptr;
        uint8_t *fp = ksLpFindPair(lp, field, flen, dep);
        if (!fp) return 0;
        size_t fl, vl;
        ksLpGet(fp, &fl, 0);
        ksLpGet(fp + ksLpElementBytes(fl), &vl, 0);
        o->ptr = ksLpSplice(ks, lp, (size_t)(fp - lp), ksLpElementBytes(fl) + ksLpElementBytes(vl), NULL, 0, -2);
        KS_STORE(&o->ptr, 8, KVT_TAG_OBJECT, KS_SITE_HASH_STORE, 0);
        return 1;
    }
    uint64_t h = lookupHash(field, flen);
    KS_SET_TABLE_DEP(dep);
    if (isDict(ks)) return dictDelete(o->ptr, field) == DICT_OK;
    (void)h;
    return hashtableDelete(o->ptr, field);
}

/* --- Iterator ------------------------------------------------------------------------ */

typedef struct {
    ksKeyspace *ks;
    robj *o;
    int encoding, dict;
    const uint8_t *p; /* listpack: the next element */
    ksLoadId lpdep;
    union {
        hashtableIterator hi;
        dictIterator di;
    } u;
} hashIter;
static_assert(sizeof(hashIter) <= sizeof(ksHashIter), "ksHashIter covers hashIter");

void ksHashIterInit(ksKeyspace *ks, ksHashIter *it, robj *o, ksLoadId dep) {
    hashIter *i = (hashIter *)it;
    memset(i, 0, sizeof(*i));
    i->ks = ks;
    i->o = o;
    i->encoding = o->encoding;
    i->dict = isDict(ks);
    if (o->encoding == OBJ_ENCODING_LISTPACK) {
        i->lpdep = ksLpLoadHeader(o->ptr, dep);
        i->p = (const uint8_t *)o->ptr + KS_LISTPACK_HDR;
    } else {
        KS_SET_TABLE_DEP(dep);
        if (i->dict) dictInitIterator(&i->u.di, o->ptr);
        else hashtableInitIterator(&i->u.hi, o->ptr, 0);
    }
}

int ksHashIterNext(ksHashIter *it, const uint8_t **field, size_t *flen, ksLoadId *fdep, const uint8_t **val,
                   size_t *vlen, ksLoadId *vdep) {
    hashIter *i = (hashIter *)it;
    if (i->encoding == OBJ_ENCODING_LISTPACK) {
        if (*i->p == 0xFF) return 0;
        *field = ksLpGet(i->p, flen, i->lpdep);
        i->p += ksLpElementBytes(*flen);
        *val = ksLpGet(i->p, vlen, i->lpdep);
        i->p += ksLpElementBytes(*vlen);
        *fdep = *vdep = i->lpdep;
        return 1;
    }
    void *e;
    ksLoadId edep = 0;
    if (i->dict) {
        if (!dictNextStored(&i->u.di, &e, &edep)) return 0;
    } else {
        if (!hashtableNext(&i->u.hi, &e)) return 0;
        edep = KS_TAKE_ENTRY_DEP();
    }
    *field = e;
    *flen = sdslen(e);
    *fdep = edep;
    *val = ksHashEntryValue(e, edep, vlen, vdep);
    return 1;
}

void ksHashIterReset(ksHashIter *it) {
    hashIter *i = (hashIter *)it;
    if (i->encoding == OBJ_ENCODING_HT) {
        if (i->dict) dictResetIterator(&i->u.di);
        else hashtableResetIterator(&i->u.hi);
    }
}

/* --- Lifecycle and checks ------------------------------------------------------------ */

void ksHashFree(ksKeyspace *ks, robj *o) {
    if (!o->ptr) return; /* moved to a copy of the object (ksEntrySetExpireField) */
    if (o->encoding == OBJ_ENCODING_LISTPACK) ksArenaFree(ks->arena, o->ptr);
    else if (isDict(ks)) dictRelease(o->ptr);
    else hashtableRelease(o->ptr);
    o->ptr = NULL;
}

size_t ksHashAllocBytes(const ksKeyspace *ks, const robj *o) {
    if (o->encoding == OBJ_ENCODING_LISTPACK) return ksArenaUsableSize(ks->arena, o->ptr);
    size_t n = 0;
    if (isDict(ks)) {
        n = dictMemUsage(o->ptr);
        dictIterator di;
        dictInitSafeIterator(&di, o->ptr);
        void *e;
        while (dictNextStored(&di, &e, NULL)) n += entryAllocBytes(ks, e);
        dictResetIterator(&di);
    } else {
        n = hashtableMemUsage(o->ptr);
        hashtableIterator hi;
        hashtableInitIterator(&hi, o->ptr, HASHTABLE_ITER_SAFE);
        void *e;
        while (hashtableNext(&hi, &e)) n += entryAllocBytes(ks, e);
        hashtableResetIterator(&hi);
    }
    return n;
}

int ksHashCheckValid(ksKeyspace *ks, const robj *o, char *err, size_t errlen) {
    if (o->type != OBJ_HASH) {
        snprintf(err, errlen, "hash: object type %d", o->type);
        return -1;
    }
    if (o->encoding == OBJ_ENCODING_LISTPACK) {
        const uint8_t *lp = o->ptr, *p = lp + KS_LISTPACK_HDR;
        size_t n = 0, total = ksLpTotal(lp);
        while (p < lp + total && *p != 0xFF) {
            size_t len;
            ksLpGet(p, &len, 0);
            if (len > KS_HASH_MAX_LISTPACK_VALUE) {
                snprintf(err, errlen, "hash: listpack element of %zu bytes", len);
                return -1;
            }
            p += ksLpElementBytes(len);
            n++;
        }
        if (p != lp + total - 1 || n != ksLpCount(lp) || n % 2 || n == 0 || n / 2 > KS_HASH_MAX_LISTPACK_ENTRIES ||
            total > ksArenaUsableSize(ks->arena, lp)) {
            snprintf(err, errlen, "hash: listpack of %zu elements malformed (count %u, %zu bytes)", n, ksLpCount(lp),
                     total);
            return -1;
        }
        return 0;
    }
    if (o->encoding != OBJ_ENCODING_HT) {
        snprintf(err, errlen, "hash: encoding %d", o->encoding);
        return -1;
    }
    size_t n = ksHashLength(ks, o);
    if (n == 0) {
        snprintf(err, errlen, "hash: empty hash kept");
        return -1;
    }
    if (isDict(ks)) return dictCheckValid(o->ptr, err, errlen);
    return hashtableCheckValid(o->ptr, err, errlen);
}
