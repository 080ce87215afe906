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
    KS_WORK_OF(KVT_WORK_HASH, KS_SIPHASH_COST(sdslen(f)));
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
    KS_WORK_OF(KVT_WORK_HASH, KS_SIPHASH_COST(flen));
    return ksSiphash(field, flen, ksCur->sipkey);
}

/* --- Listpack -------------------------------------------------------------------- */

static uint32_t lpTotal(const uint8_t *lp) {
    uint32_t t;
    memcpy(&t, lp, 4);
    return t;
}

static uint16_t lpCount(const uint8_t *lp) {
    uint16_t n;
    memcpy(&n, lp + 4, 2);
    return n;
}

static void lpSetHeader(uint8_t *lp, uint32_t total, uint16_t count) {
    memcpy(lp, &total, 4);
    memcpy(lp + 4, &count, 2);
}

static size_t lpHdrBytes(size_t len) { return len < 64 ? 1 : len < 4096 ? 2 : 5; }

/* lpEncodeBacklenBytes: bytes of the back-length field for an element of l bytes. */
static size_t lpBacklenBytes(size_t l) {
    return l <= 127 ? 1 : l < 16383 ? 2 : l < 2097151 ? 3 : l < 268435455 ? 4 : 5;
}

static size_t lpElementBytes(size_t len) {
    size_t l = lpHdrBytes(len) + len;
    return l + lpBacklenBytes(l);
}

static void lpWriteElement(uint8_t *p, const void *s, size_t len) {
    size_t h = lpHdrBytes(len);
    if (h == 1) {
        p[0] = (uint8_t)(0x80 | len);
    } else if (h == 2) {
        p[0] = (uint8_t)(0xE0 | (len >> 8));
        p[1] = (uint8_t)(len & 0xff);
    } else {
        uint32_t l = (uint32_t)len;
        p[0] = 0xF0;
        memcpy(p + 1, &l, 4);
    }
    memcpy(p + h, s, len);
    size_t l = h + len, b = lpBacklenBytes(l);
    for (size_t i = 0; i < b; i++) /* lpEncodeBacklen: 7 bits a byte, the high bit on all but the first */
        p[h + len + i] = (uint8_t)(((l >> (7 * (b - 1 - i))) & 127) | (i ? 128 : 0));
}

/* Length and data of the element at p (reading its header: one record). */
static const uint8_t *lpGet(const uint8_t *p, size_t *len, ksLoadId dep) {
    size_t h;
    if ((p[0] & 0xC0) == 0x80) {
        h = 1;
        *len = p[0] & 0x3f;
    } else if ((p[0] & 0xF0) == 0xE0) {
        h = 2;
        *len = ((size_t)(p[0] & 0x0f) << 8) | p[1];
    } else {
        uint32_t l;
        memcpy(&l, p + 1, 4);
        h = 5;
        *len = l;
    }
    (void)KS_LOAD(p, h, KVT_TAG_VALUE, KS_SITE_HASH_LP, dep);
    return p + h;
}

static uint8_t *lpNew(ksKeyspace *ks) {
    uint8_t *lp = ksArenaAlloc(ks->arena, KS_LISTPACK_HDR + 1);
    lpSetHeader(lp, KS_LISTPACK_HDR + 1, 0);
    lp[KS_LISTPACK_HDR] = 0xFF;
    KS_STORE(lp, KS_LISTPACK_HDR + 1, KVT_TAG_VALUE, KS_SITE_HASH_STORE, 0);
    return lp;
}

/* The listpack's header read (lpBytes, lpFirst): the load the scan depends on. */
static ksLoadId lpLoadHeader(const uint8_t *lp, ksLoadId dep) {
    return KS_LOAD(lp, KS_LISTPACK_HDR, KVT_TAG_VALUE, KS_SITE_HASH_LP, dep);
}

/* lpFind(lp, lpFirst(lp), field, 1): the field element (skipping values), or NULL. */
static uint8_t *lpFindField(uint8_t *lp, const char *field, size_t flen, ksLoadId dep) {
    KS_ID_VAR(lh) = lpLoadHeader(lp, dep);
    uint8_t *p = lp + KS_LISTPACK_HDR;
    int skip = 0;
    while (*p != 0xFF) {
        size_t len;
        const uint8_t *s = lpGet(p, &len, lh);
        if (!skip) {
            if (len == flen) {
                (void)KS_LOAD(s, len, KVT_TAG_VALUE, KS_SITE_HASH_LP, lh);
                KS_WORK_OF(KVT_WORK_COMPARE, len / 8);
                if (memcmp(s, field, flen) == 0) return p;
            }
            skip = 1;
        } else {
            skip = 0;
        }
        p += lpElementBytes(len);
    }
    return NULL;
}

/* lp_realloc: to `size` bytes; a move copies the old bytes (recorded). */
static uint8_t *lpResize(ksKeyspace *ks, uint8_t *lp, size_t size, size_t keep) {
    uint8_t *n = ksArenaRealloc(ks->arena, lp, size);
    (void)keep;
    if (n != lp) {
        (void)KS_LOAD(lp, keep, KVT_TAG_VALUE, KS_SITE_HASH_LP, 0);
        KS_STORE(n, keep, KVT_TAG_VALUE, KS_SITE_HASH_STORE, 0);
    }
    return n;
}

/* lpInsert's shape for one change: replace `old_bytes` at offset `off` by the
 * elements in `src` (`new_bytes`), moving the tail. */
static uint8_t *lpSplice(ksKeyspace *ks, uint8_t *lp, size_t off, size_t old_bytes, const uint8_t *src,
                         size_t new_bytes, int count_delta) {
    uint32_t total = lpTotal(lp);
    size_t tail = total - off - old_bytes, ntotal = total - old_bytes + new_bytes;
    if (new_bytes > old_bytes) lp = lpResize(ks, lp, ntotal, total);
    if (tail && new_bytes != old_bytes) {
        (void)KS_LOAD(lp + off + old_bytes, tail, KVT_TAG_VALUE, KS_SITE_HASH_LP, 0);
        memmove(lp + off + new_bytes, lp + off + old_bytes, tail);
        KS_STORE(lp + off + new_bytes, tail, KVT_TAG_VALUE, KS_SITE_HASH_STORE, 0);
    }
    if (new_bytes) {
        memcpy(lp + off, src, new_bytes);
        KS_STORE(lp + off, new_bytes, KVT_TAG_VALUE, KS_SITE_HASH_STORE, 0);
    }
    if (new_bytes < old_bytes) lp = lpResize(ks, lp, ntotal, ntotal);
    lpSetHeader(lp, (uint32_t)ntotal, (uint16_t)(lpCount(lp) + count_delta));
    KS_STORE(lp, KS_LISTPACK_HDR, KVT_TAG_VALUE, KS_SITE_HASH_STORE, 0);
    return lp;
}

static uint8_t *lpAppendPair(ksKeyspace *ks, uint8_t *lp, const char *f, size_t flen, const uint8_t *v,
                             size_t vlen) {
    size_t fb = lpElementBytes(flen), vb = lpElementBytes(vlen);
    uint8_t buf[2 * (KS_HASH_MAX_LISTPACK_VALUE + 8)];
    lpWriteElement(buf, f, flen);
    lpWriteElement(buf + fb, v, vlen);
    return lpSplice(ks, lp, lpTotal(lp) - 1, 0, buf, fb + vb, 2);
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
    return ksEntryCreateObject(ks, key, klen, OBJ_HASH, OBJ_ENCODING_LISTPACK, lpNew(ks), expire_ms);
}

size_t ksHashLength(const ksKeyspace *ks, const robj *o) {
    if (o->encoding == OBJ_ENCODING_LISTPACK) return lpCount(o->ptr) / 2;
    return isDict(ks) ? dictSize(o->ptr) : hashtableSize(o->ptr);
}

/* hashTypeConvertListpack: a table pre-sized for the fields, every pair moved
 * into a new entry in listpack order, then the listpack freed. */
static void convertToTable(ksKeyspace *ks, robj *o, ksLoadId dep) {
    uint8_t *lp = o->ptr;
    size_t n = lpCount(lp) / 2;
    void *t;
    if (isDict(ks)) {
        t = dictCreate(&fieldDictType, ks->arena);
        dictExpand(t, n);
    } else {
        t = hashtableCreate(&fieldHashtableType, ks->arena);
        hashtableExpand(t, n);
    }
    KS_ID_VAR(lh) = lpLoadHeader(lp, dep);
    const uint8_t *p = lp + KS_LISTPACK_HDR;
    while (*p != 0xFF) {
        size_t flen, vlen;
        const uint8_t *f = lpGet(p, &flen, lh);
        p += lpElementBytes(flen);
        const uint8_t *v = lpGet(p, &vlen, lh);
        p += lpElementBytes(vlen);
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
        uint8_t *fp = lpFindField(lp, field, flen, dep);
        int update = fp != NULL;
        if (update) { /* lpReplace the value element after the field */
            size_t fl, ol;
            lpGet(fp, &fl, 0);
            uint8_t *vp = fp + lpElementBytes(fl);
            lpGet(vp, &ol, 0);
            uint8_t buf[KS_HASH_MAX_LISTPACK_VALUE + 8];
            lpWriteElement(buf, val, vlen);
            lp = lpSplice(ks, lp, (size_t)(vp - lp), lpElementBytes(ol), buf, lpElementBytes(vlen), 0);
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
        uint8_t *fp = lpFindField(o->ptr, field, flen, dep);
        if (!fp) return -1;
        size_t fl;
        lpGet(fp, &fl, dep);
        *val = lpGet(fp + lpElementBytes(fl), vlen, dep);
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
        uint8_t *fp = lpFindField(lp, field, flen, dep);
        if (!fp) return 0;
        size_t fl, vl;
        lpGet(fp, &fl, 0);
        lpGet(fp + lpElementBytes(fl), &vl, 0);
        o->ptr = lpSplice(ks, lp, (size_t)(fp - lp), lpElementBytes(fl) + lpElementBytes(vl), NULL, 0, -2);
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
        i->lpdep = lpLoadHeader(o->ptr, dep);
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
        *field = lpGet(i->p, flen, i->lpdep);
        i->p += lpElementBytes(*flen);
        *val = lpGet(i->p, vlen, i->lpdep);
        i->p += lpElementBytes(*vlen);
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
        size_t n = 0, total = lpTotal(lp);
        while (p < lp + total && *p != 0xFF) {
            size_t len;
            lpGet(p, &len, 0);
            if (len > KS_HASH_MAX_LISTPACK_VALUE) {
                snprintf(err, errlen, "hash: listpack element of %zu bytes", len);
                return -1;
            }
            p += lpElementBytes(len);
            n++;
        }
        if (p != lp + total - 1 || n != lpCount(lp) || n % 2 || n == 0 || n / 2 > KS_HASH_MAX_LISTPACK_ENTRIES ||
            total > ksArenaUsableSize(ks->arena, lp)) {
            snprintf(err, errlen, "hash: listpack of %zu elements malformed (count %u, %zu bytes)", n, lpCount(lp),
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
