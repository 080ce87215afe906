/*
 * object.c -- keyspace entries: the unified object and the legacy
 * entry -> key, entry -> robj -> value layout (diagrams in object.h).
 *
 * Sizes follow Valkey 8.1 (createObjectWithKeyAndExpire, #2087 key-size fix):
 * the key uses the minimal sds type (sdshdr5 below 32 bytes), the embedded
 * value an sdshdr8 whose alloc absorbs the size-class slack, and an expire
 * field is reserved when asked, when the key is >= 128 bytes, or when the
 * block leaves >= 8 spare bytes anyway (zmalloc_usable's usable size: the size
 * class in the arena, malloc_usable_size on libc blocks, where a 16-byte key's
 * object of 35 bytes gets 40 and no expire field, as in the reference server).
 *
 * Tracing: reading an entry records the object header (16 B, tag object),
 * the key bytes (tag key) and the value bytes (tag value) with the dependency
 * on the load that produced each address.
 *
 * Conventions: public ksEntry...; static internals without prefix.
 */
#include <assert.h>
#include <string.h>

#include "keyspace.h"
#include "siphash.h"
#include "t_hash.h"
#include "t_zset.h"

/* --- Unified layout -------------------------------------------------------- */

static inline size_t unifiedKeyOffset(const robj *o) { return sizeof(robj) + (o->hasexpire ? 8 : 0); }

static inline sds unifiedKey(const robj *o) {
    const uint8_t *p = (const uint8_t *)o + unifiedKeyOffset(o);
    return (sds)(p + 1 + p[0]); /* p[0] = key sds header size */
}

static void *unifiedCreate(ksKeyspace *ks, const char *key, size_t klen, const uint8_t *val, size_t vlen,
                           int64_t expire_ms) {
    int ktype = sdsReqType(klen);
    size_t ksize = 1 + sdsSize(ktype, klen);
    int hasexpire = expire_ms >= 0 || klen >= KS_KEY_SIZE_TO_INCLUDE_EXPIRE;
    size_t base = sizeof(robj) + ksize;
    size_t emb = base + (hasexpire ? 8 : 0) + 3 + vlen + 1;
    int embed = emb <= KS_EMBED_LIMIT;
    size_t need = embed ? emb : base + (hasexpire ? 8 : 0);
    /* A RAW value is allocated before the object, as Redis 8 `kvobjSet` does
     * (`kvobjCreate(..., sdsnewlen(...))`) and Valkey's `objectSetKeyAndExpire`
     * (the value exists before the object that embeds the key): consecutive
     * keys of one size class then lie value, object, value, object.  (A server
     * adopts its argument's value instead: callpath.c ksCallSetValueAdopt.) */
    void *v = NULL;
    int vtype = SDS_TYPE_8;
    if (!embed) {
        vtype = sdsReqType(vlen);
        v = ksArenaAlloc(ks->arena, sdsSize(vtype, vlen));
    }
    robj *o = ksArenaAlloc(ks->arena, need);
    size_t room = ksArenaUsableSize(ks->arena, o);
    if (!hasexpire && room - need >= 8) { /* room for the expire field anyway */
        hasexpire = 1;
        need += 8;
    }
    /* Every bit-field at once, as stringHeader: one store, a fresh page's first touch. */
    o->type = OBJ_STRING;
    o->encoding = embed ? OBJ_ENCODING_EMBSTR : OBJ_ENCODING_RAW;
    o->lru = 0;
    o->refcount = 1;
    o->hasembkey = 1;
    o->hasexpire = (unsigned)hasexpire;
    uint8_t *p = (uint8_t *)o + sizeof(robj);
    if (hasexpire) {
        int64_t e = expire_ms >= 0 ? expire_ms : -1;
        memcpy(p, &e, 8);
        p += 8;
    }
    p[0] = (uint8_t)sdsHdrSize(ktype);
    sdsWriteAt(p + 1, ktype, key, klen, klen);
    p += ksize;
    if (embed) {
        size_t vroom = room - (size_t)(p - (uint8_t *)o) - 3 - 1;
        o->ptr = sdsWriteAt(p, SDS_TYPE_8, val, vlen, vroom);
    } else {
        o->ptr = sdsWriteAt(v, vtype, val, vlen, vlen);
        KS_STORE(v, sdsSize(vtype, vlen), KVT_TAG_VALUE, KS_SITE_OBJ_CREATE_STORE, 0);
    }
    KS_STORE(o, need, KVT_TAG_OBJECT, KS_SITE_OBJ_CREATE_STORE, 0);

    return o;
}

/* A value robj other than a string (a hash) as a unified object: robj, the
 * optional expire field, the embedded key; o->ptr is the value's structure
 * (Valkey objectSetKeyAndExpire on a non-string: nothing else is embedded). */
static void *unifiedCreateObject(ksKeyspace *ks, const char *key, size_t klen, int type, int encoding, void *ptr,
                                 int64_t expire_ms) {
    int ktype = sdsReqType(klen);
    size_t ksize = 1 + sdsSize(ktype, klen);
    int hasexpire = expire_ms >= 0 || klen >= KS_KEY_SIZE_TO_INCLUDE_EXPIRE;
    size_t need = sizeof(robj) + (hasexpire ? 8 : 0) + ksize;
    robj *o = ksArenaAlloc(ks->arena, need);
    if (!hasexpire && ksArenaUsableSize(ks->arena, o) - need >= 8) { /* room for the expire field anyway */
        hasexpire = 1;
        need += 8;
    }
    o->type = (unsigned)type;
    o->encoding = (unsigned)encoding;
    o->lru = 0;
    o->refcount = 1;
    o->hasembkey = 1;
    o->hasexpire = (unsigned)hasexpire;
    o->ptr = ptr;
    uint8_t *p = (uint8_t *)o + sizeof(robj);
    if (hasexpire) {
        int64_t e = expire_ms >= 0 ? expire_ms : -1;
        memcpy(p, &e, 8);
        p += 8;
    }
    p[0] = (uint8_t)sdsHdrSize(ktype);
    sdsWriteAt(p + 1, ktype, key, klen, klen);
    KS_STORE(o, need, KVT_TAG_OBJECT, KS_SITE_OBJ_CREATE_STORE, 0);
    return o;
}

/* --- Legacy layout --------------------------------------------------------- */

static sds legacyNewSds(ksKeyspace *ks, const void *p, size_t len, uint8_t tag) {
    int t = sdsReqType(len);
    void *m = ksArenaAlloc(ks->arena, sdsSize(t, len));
    KS_STORE(m, sdsSize(t, len), tag, KS_SITE_OBJ_CREATE_STORE, 0);
    (void)tag;
    return sdsWriteAt(m, t, p, len, len);
}

/* createObject's header of a string object (Valkey object.c): no key, no expire.  Every
 * bit-field at once, before anything else is written: the compiler merges them into one
 * store, so a fresh page's first touch is a write, as the trace's store records it (a
 * read-modify-write of a field would read the page first: the zero page's fault, then the
 * write's). */
static inline robj *stringHeader(robj *o, unsigned encoding) {
    o->type = OBJ_STRING;
    o->encoding = encoding;
    o->lru = 0;
    o->refcount = 1;
    o->hasexpire = 0;
    o->hasembkey = 0;
    return o;
}

robj *ksStringObjectCreate(ksKeyspace *ks, const uint8_t *val, size_t vlen) {
    robj *o;
    if (vlen <= KS_EMBSTR_LIMIT) {
        size_t need = sizeof(robj) + 3 + vlen + 1;
        o = stringHeader(ksArenaAlloc(ks->arena, need), OBJ_ENCODING_EMBSTR);
        o->ptr = sdsWriteAt((uint8_t *)o + sizeof(robj), SDS_TYPE_8, val, vlen, vlen);
        KS_STORE(o, need, KVT_TAG_OBJECT, KS_SITE_OBJ_CREATE_STORE, 0);
    } else {
        o = stringHeader(ksArenaAlloc(ks->arena, sizeof(robj)), OBJ_ENCODING_RAW);
        o->ptr = legacyNewSds(ks, val, vlen, KVT_TAG_VALUE);
        KS_STORE(o, sizeof(robj), KVT_TAG_OBJECT, KS_SITE_OBJ_CREATE_STORE, 0);
    }
    return o;
}

/* tryCreateStringObject(SDS_NOINIT, len) (Valkey object.c), the value object a load
 * reads into (rdbGenericLoadStringObject): EMBSTR up to KS_EMBSTR_LIMIT bytes (robj and
 * sdshdr8 in one block), else RAW, the sds allocated before the robj as
 * createRawStringObject's createObject(OBJ_STRING, sdsnewlen(...)) does.  The bytes are
 * left to the caller (the headers' stores are recorded). */
robj *ksStringObjectCreateNoInit(ksKeyspace *ks, size_t vlen) {
    robj *o;
    if (vlen <= KS_EMBSTR_LIMIT) {
        o = stringHeader(ksArenaAlloc(ks->arena, sizeof(robj) + 3 + vlen + 1), OBJ_ENCODING_EMBSTR);
        o->ptr = sdsNoInitAt((uint8_t *)o + sizeof(robj), SDS_TYPE_8, vlen, vlen);
        KS_STORE(o, sizeof(robj) + 3, KVT_TAG_OBJECT, KS_SITE_OBJ_CREATE_STORE, 0);
    } else {
        int t = sdsReqType(vlen);
        void *m = ksArenaAlloc(ks->arena, sdsSize(t, vlen));
        sds v = sdsNoInitAt(m, t, vlen, vlen);
        KS_STORE(m, sdsHdrSize(t), KVT_TAG_VALUE, KS_SITE_OBJ_CREATE_STORE, 0);
        o = stringHeader(ksArenaAlloc(ks->arena, sizeof(robj)), OBJ_ENCODING_RAW);
        o->ptr = v;
        KS_STORE(o, sizeof(robj), KVT_TAG_OBJECT, KS_SITE_OBJ_CREATE_STORE, 0);
    }
    return o;
}

void ksStringObjectFree(ksKeyspace *ks, robj *o) {
    if (o->encoding == OBJ_ENCODING_RAW) ksArenaFree(ks->arena, sdsAllocPtr(o->ptr));
    ksArenaFree(ks->arena, o);
}

static void *legacyCreate(ksKeyspace *ks, const char *key, size_t klen, const uint8_t *val, size_t vlen) {
    size_t sz = ks->ops->legacy_entry_is_node ? sizeof(legacyEntry) : KS_LEGACY_ENTRY_KV_BYTES;
    legacyEntry *e = ksArenaAlloc(ks->arena, sz);
    e->key = legacyNewSds(ks, key, klen, KVT_TAG_KEY);
    e->val = ksStringObjectCreate(ks, val, vlen);
    if (ks->ops->legacy_entry_is_node) e->next = NULL; /* the table sets it */
    KS_STORE(e, KS_LEGACY_ENTRY_KV_BYTES, KVT_TAG_OBJECT, KS_SITE_OBJ_CREATE_STORE, 0);
    return e;
}

/* --- Public ---------------------------------------------------------------- */

void *ksEntryCreateObject(ksKeyspace *ks, const char *key, size_t klen, int type, int encoding, void *ptr,
                          int64_t expire_ms) {
    if (ks->layout == KS_LAYOUT_UNIFIED) return unifiedCreateObject(ks, key, klen, type, encoding, ptr, expire_ms);
    size_t sz = ks->ops->legacy_entry_is_node ? sizeof(legacyEntry) : KS_LEGACY_ENTRY_KV_BYTES;
    legacyEntry *e = ksArenaAlloc(ks->arena, sz);
    e->key = legacyNewSds(ks, key, klen, KVT_TAG_KEY);
    robj *o = ksArenaAlloc(ks->arena, sizeof(robj));
    *o = (robj){.type = (unsigned)type, .encoding = (unsigned)encoding, .refcount = 1, .ptr = ptr};
    KS_STORE(o, sizeof(robj), KVT_TAG_OBJECT, KS_SITE_OBJ_CREATE_STORE, 0);
    e->val = o;
    if (ks->ops->legacy_entry_is_node) e->next = NULL; /* the table sets it */
    KS_STORE(e, KS_LEGACY_ENTRY_KV_BYTES, KVT_TAG_OBJECT, KS_SITE_OBJ_CREATE_STORE, 0);
    return e;
}

void *ksEntryCreate(ksKeyspace *ks, const char *key, size_t klen, const uint8_t *val, size_t vlen,
                    int64_t expire_ms) {
    if (ks->layout == KS_LAYOUT_UNIFIED) return unifiedCreate(ks, key, klen, val, vlen, expire_ms);
    return legacyCreate(ks, key, klen, val, vlen);
}

void *ksEntrySetKeyAndExpire(ksKeyspace *ks, robj *val, const char *key, size_t klen, int64_t expire_ms) {
    if (ks->layout == KS_LAYOUT_UNIFIED) {
        void *e;
        if (val->encoding == OBJ_ENCODING_EMBSTR) { /* a new object, the value copied */
            size_t vlen = sdslen(val->ptr);
            (void)KS_LOAD(val, sizeof(robj) + 3 + vlen + 1, KVT_TAG_OBJECT, KS_SITE_OBJ_CREATE_STORE, 0);
            e = unifiedCreate(ks, key, klen, (const uint8_t *)val->ptr, vlen, expire_ms);
        } else { /* a new object taking over the value's sds */
            (void)KS_LOAD(val, sizeof(robj), KVT_TAG_OBJECT, KS_SITE_OBJ_CREATE_STORE, 0);
            e = unifiedCreateObject(ks, key, klen, OBJ_STRING, OBJ_ENCODING_RAW, val->ptr, expire_ms);
        }
        ksArenaFree(ks->arena, val); /* decrRefCount of the old object */
        return e;
    }
    size_t sz = ks->ops->legacy_entry_is_node ? sizeof(legacyEntry) : KS_LEGACY_ENTRY_KV_BYTES;
    legacyEntry *e = ksArenaAlloc(ks->arena, sz);
    e->key = legacyNewSds(ks, key, klen, KVT_TAG_KEY);
    e->val = val;
    if (ks->ops->legacy_entry_is_node) e->next = NULL; /* the table sets it */
    KS_STORE(e, KS_LEGACY_ENTRY_KV_BYTES, KVT_TAG_OBJECT, KS_SITE_OBJ_CREATE_STORE, 0);
    return e;
}

void ksEntryFree(ksKeyspace *ks, void *entry) {
    if (ks->layout == KS_LAYOUT_UNIFIED) {
        robj *o = entry;
        if (o->type == OBJ_HASH) ksHashFree(ks, o);
        else if (o->type == OBJ_ZSET) ksZsetFree(ks, o);
        else if (o->encoding == OBJ_ENCODING_RAW) ksArenaFree(ks->arena, sdsAllocPtr(o->ptr));
        ksArenaFree(ks->arena, o);
        return;
    }
    legacyEntry *e = entry;
    ksArenaFree(ks->arena, sdsAllocPtr(e->key));
    if (e->val->type == OBJ_HASH) ksHashFree(ks, e->val);
    else if (e->val->type == OBJ_ZSET) ksZsetFree(ks, e->val);
    else if (e->val->encoding == OBJ_ENCODING_RAW) ksArenaFree(ks->arena, sdsAllocPtr(e->val->ptr));
    ksArenaFree(ks->arena, e->val);
    ksArenaFree(ks->arena, e);
}

sds ksEntryGetKey(const ksKeyspace *ks, const void *entry, ksLoadId dep, ksLoadId *key_dep) {
    if (ks->layout == KS_LAYOUT_UNIFIED) {
        const robj *o = entry;
        KS_ID_VAR(lh) = KS_LOAD(o, sizeof(robj), KVT_TAG_OBJECT, KS_SITE_OBJ_HEADER, dep);
        if (key_dep) *key_dep = lh;
        return unifiedKey(o);
    }
    const legacyEntry *e = entry;
    KS_ID_VAR(le) = KS_LOAD(e, KS_LEGACY_ENTRY_KV_BYTES, KVT_TAG_OBJECT, KS_SITE_OBJ_ENTRY, dep);
    if (key_dep) *key_dep = le;
    return e->key;
}

const uint8_t *ksEntryGetValue(const ksKeyspace *ks, const void *entry, ksLoadId dep, size_t *len,
                               ksLoadId *val_dep) {
    const robj *o;
    KS_ID_VAR(lo) = dep;
    if (ks->layout == KS_LAYOUT_UNIFIED) {
        o = entry;
        lo = KS_LOAD(o, sizeof(robj), KVT_TAG_OBJECT, KS_SITE_OBJ_VALUE_PTR, dep);
    } else {
        const legacyEntry *e = entry;
        KS_ID_VAR(le) = KS_LOAD(&e->val, 8, KVT_TAG_OBJECT, KS_SITE_OBJ_ENTRY, dep);
        o = e->val;
        lo = KS_LOAD(o, sizeof(robj), KVT_TAG_OBJECT, KS_SITE_OBJ_VALUE_PTR, le);
    }
    const char *s = o->ptr;
    *len = sdslen(s);
    /* The sds header read that gives the length. */
    size_t hs = sdsHdrSize(((uint8_t)s[-1]) & SDS_TYPE_MASK);
    (void)KS_LOAD(s - hs, hs, KVT_TAG_VALUE, KS_SITE_OBJ_VALUE, lo);
    if (val_dep) *val_dep = lo;
    return (const uint8_t *)s;
}

int64_t ksEntryGetExpireField(const void *entry) {
    const robj *o = entry;
    if (!o->hasexpire) return -1;
    int64_t e;
    memcpy(&e, (const uint8_t *)o + sizeof(robj), 8);
    return e;
}

void *ksEntrySetExpireField(ksKeyspace *ks, void *entry, int64_t expire_ms) {
    robj *o = entry;
    if (o->hasexpire) {
        memcpy((uint8_t *)o + sizeof(robj), &expire_ms, 8);
        KS_STORE((uint8_t *)o + sizeof(robj), 8, KVT_TAG_EXPIRE, KS_SITE_OBJ_EXPIRE, 0);
        return o;
    }
    if (expire_ms < 0) return o;
    /* A copy with room for the expire (objectSetKeyAndExpire); the caller
     * replaces the table's pointer and then frees the old entry. */
    sds key = unifiedKey(o);
    if (o->type != OBJ_STRING) { /* the value's structure moves to the copy */
        void *n = unifiedCreateObject(ks, key, sdslen(key), o->type, o->encoding, o->ptr, expire_ms);
        o->ptr = NULL;
        return n;
    }
    const char *v = o->ptr;
    return unifiedCreate(ks, key, sdslen(key), (const uint8_t *)v, sdslen(v), expire_ms);
}

const void *ksEntryValuePrefetchAddr(const ksKeyspace *ks, const void *entry, ksLoadId dep,
                                     ksLoadId *addr_dep, uint8_t *tag) {
    const robj *o;
    KS_ID_VAR(lo) = dep;
    if (ks->layout == KS_LAYOUT_UNIFIED) {
        o = entry;
    } else {
        const legacyEntry *e = entry;
        lo = KS_LOAD(&e->val, 8, KVT_TAG_OBJECT, KS_SITE_OBJ_ENTRY, dep);
        o = e->val;
    }
    lo = KS_LOAD(o, sizeof(robj), KVT_TAG_OBJECT, KS_SITE_OBJ_PREFETCH_VALUE, lo);
    if (addr_dep) *addr_dep = lo;
    if (o->encoding == OBJ_ENCODING_RAW) {
        if (tag) *tag = KVT_TAG_VALUE;
        return o->ptr;
    }
    if (ks->layout == KS_LAYOUT_LEGACY) {
        if (tag) *tag = KVT_TAG_OBJECT;
        return o;
    }
    return NULL;
}

void ksEntryPrefetchValue(const ksKeyspace *ks, const void *entry, ksLoadId dep) {
    KS_ID_VAR(lo) = 0;
    uint8_t tag = KVT_TAG_VALUE;
    const void *addr = ksEntryValuePrefetchAddr(ks, entry, dep, &lo, &tag);
    if (addr) KS_PREFETCH(addr, tag, KS_SITE_OBJ_PREFETCH_VALUE, lo);
}

int ksKeyCompare(const char *a, const char *b, ksLoadId bdep) {
    size_t la = sdslen(a), lb = sdslen(b);
    KS_ID_VAR(lk) = KS_LOAD(b - 1, lb + 1, KVT_TAG_KEY, KS_SITE_OBJ_KEY, bdep);
    (void)lk;
    KS_WORK_OF(KVT_WORK_COMPARE, la / 8);
    if (la != lb) return 1;
    return memcmp(a, b, la) != 0;
}

uint64_t ksEntryHash(const ksKeyspace *ks, const void *entry, ksLoadId dep) {
    KS_ID_VAR(kd) = 0;
    sds k = ksEntryGetKey(ks, entry, dep, &kd);
    size_t len = sdslen(k);
    (void)KS_LOAD(k - 1, len + 1, KVT_TAG_KEY, KS_SITE_OBJ_KEY, kd);
    KS_WORK_EXACT_OF(KVT_WORK_HASH, ksSiphashCost(len));
    return ksSiphash(k, len, ks->sipkey);
}

size_t ksEntryAllocBytes(const ksKeyspace *ks, const void *entry) {
    ksArena *a = ks->arena;
    if (ks->layout == KS_LAYOUT_UNIFIED) {
        const robj *o = entry;
        size_t n = ksArenaUsableSize(a, o);
        if (o->type == OBJ_HASH) n += ksHashAllocBytes(ks, o);
        else if (o->type == OBJ_ZSET) n += ksZsetAllocBytes(ks, o);
        else if (o->encoding == OBJ_ENCODING_RAW) n += ksArenaUsableSize(a, sdsAllocPtr(o->ptr));
        return n;
    }
    const legacyEntry *e = entry;
    size_t n = ksArenaUsableSize(a, e) + ksArenaUsableSize(a, sdsAllocPtr(e->key)) + ksArenaUsableSize(a, e->val);
    if (e->val->type == OBJ_HASH) n += ksHashAllocBytes(ks, e->val);
    else if (e->val->type == OBJ_ZSET) n += ksZsetAllocBytes(ks, e->val);
    else if (e->val->encoding == OBJ_ENCODING_RAW) n += ksArenaUsableSize(a, sdsAllocPtr(e->val->ptr));
    return n;
}
