/*
 * object.h -- keyspace entries in two layouts, selected per keyspace.
 *
 *  unified (Valkey 8.1 / Redis 8 "kvobj"): one allocation, the entry IS the object
 *
 *    +------------------+----------+---+-----------+---------------------+
 *    | robj 16 B        | expire 8 |hs | key sds   | value sdshdr8 (EMB) |
 *    | type enc lru     | (if      |   | hdr+k+\0  | 3 + v + \0          |
 *    | flags ptr ------------------------------------^  (or ptr -> RAW sds)
 *    +------------------+----------+---+-----------+---------------------+
 *      embed the value iff 16 + (1 + keysds) + 8*expire + (3 + v + 1) <= 64
 *
 *  legacy (Redis <= 7): entry -> key sds, entry -> robj -> value
 *
 *    entry 16 B [key *][val *]   key: sds (own allocation)
 *                       |
 *                       v
 *               robj 16 B [.. ptr] -> EMBSTR (same allocation, v <= 44) or RAW sds
 *
 *    Expiry in the legacy layout lives in a separate expires table of 16-byte
 *    {key sds (shared), when} records, as Redis 7's expires dict; in the
 *    unified layout it is the object's expire field.
 *
 * Conventions: public ksEntry... and ksObj...; everything records its reads with
 * KS_LOAD/KS_STORE (emit.h) and returns the id of the load that produced a
 * pointer it hands back.
 */
#ifndef KS_OBJECT_H
#define KS_OBJECT_H

#include <stddef.h>
#include <stdint.h>

#include "emit.h"
#include "sds.h"

typedef struct ksKeyspace ksKeyspace;

enum { KS_LAYOUT_UNIFIED = 0, KS_LAYOUT_LEGACY = 1 };

#define OBJ_STRING 0
#define OBJ_ENCODING_RAW 0
#define OBJ_ENCODING_EMBSTR 8

typedef struct robj {
    unsigned type : 4;
    unsigned encoding : 4;
    unsigned lru : 24;
    unsigned hasexpire : 1;
    unsigned hasembkey : 1;
    unsigned refcount : 30;
    void *ptr;
} robj;

/* The legacy layout's entry: {key, val}; on a table that chains through its
 * entries (ksTableOps legacy_entry_is_node: table=dict) also `next`, which
 * makes it Redis 7's 24-byte dictEntry{key, v, next}. */
typedef struct legacyEntry {
    sds key;
    robj *val;
    struct legacyEntry *next;
} legacyEntry;
#define KS_LEGACY_ENTRY_KV_BYTES offsetof(legacyEntry, next) /* {key, val}: 16 */

typedef struct legacyExpire {
    sds key; /* shared with the main entry */
    int64_t when;
} legacyExpire;

#define KS_EMBED_LIMIT 64           /* unified: whole object incl. key (cache line) */
#define KS_EMBSTR_LIMIT 44          /* legacy: EMBSTR value bytes */
#define KS_KEY_SIZE_TO_INCLUDE_EXPIRE 128

/* Create an entry holding key/value (expire_ms < 0: none). */
void *ksEntryCreate(ksKeyspace *ks, const char *key, size_t klen, const uint8_t *val, size_t vlen,
                    int64_t expire_ms);
/* An entry for `key` whose value robj has another type (t_hash.h: OBJ_HASH)
 * and `encoding`, its structure at ptr (owned by the entry from now on). */
void *ksEntryCreateObject(ksKeyspace *ks, const char *key, size_t klen, int type, int encoding, void *ptr,
                          int64_t expire_ms);
/* createStringObject: a value robj, EMBSTR (robj + sdshdr8 in one allocation) up
 * to KS_EMBSTR_LIMIT bytes, else RAW (robj -> sds).  The legacy layout's values,
 * and the unified snapshot loader's value object before the key is embedded. */
robj *ksStringObjectCreate(ksKeyspace *ks, const uint8_t *val, size_t vlen);
/* tryCreateStringObject(SDS_NOINIT, vlen): the value object a snapshot load reads
 * into (EMBSTR up to KS_EMBSTR_LIMIT, else RAW with its sds allocated first); its
 * vlen bytes at o->ptr are the caller's to write. */
robj *ksStringObjectCreateNoInit(ksKeyspace *ks, size_t vlen);
/* decrRefCount of a string object that is no entry (RAW: its sds too). */
void ksStringObjectFree(ksKeyspace *ks, robj *o);
/* objectSetKeyAndExpire (Valkey object.c) for a loaded string object `val`: unified, a
 * new object embedding the key (EMBSTR: the value copied into it; RAW: taking over
 * val's sds) and val freed; legacy, an entry holding a copy of the key and val. */
void *ksEntrySetKeyAndExpire(ksKeyspace *ks, robj *val, const char *key, size_t klen, int64_t expire_ms);
/* Free an entry and everything it owns (legacy: key, robj, value). */
void ksEntryFree(ksKeyspace *ks, void *entry);
/* The entry's key (sds); dep = load that produced `entry`; *key_dep (optional)
 * = load that produced the key's address.  Records the object/entry header read. */
sds ksEntryGetKey(const ksKeyspace *ks, const void *entry, ksLoadId dep, ksLoadId *key_dep);
/* The value bytes; records the header/ptr loads (not the value bytes). */
const uint8_t *ksEntryGetValue(const ksKeyspace *ks, const void *entry, ksLoadId dep, size_t *len, ksLoadId *val_dep);
/* Expire of a unified entry (-1 none).  Legacy entries answer -1 (see db.c). */
int64_t ksEntryGetExpireField(const void *entry);
/* Unified only: set the expire in place and return entry, or return a new
 * copy that has an expire field (the caller swaps it in and frees entry). */
void *ksEntrySetExpireField(ksKeyspace *ks, void *entry, int64_t expire_ms);
/* Prefetch the value if it is in a separate allocation (RAW). */
void ksEntryPrefetchValue(const ksKeyspace *ks, const void *entry, ksLoadId dep);
/* What ksEntryPrefetchValue prefetches: records the object header read (dep =
 * the load that produced `entry`) and returns the value's separate allocation
 * (RAW: the sds, tag value; legacy EMBSTR: the robj, tag object) or NULL when
 * the value is embedded.  *addr_dep (optional) = the header load, *tag
 * (optional) = the line's structure tag. */
const void *ksEntryValuePrefetchAddr(const ksKeyspace *ks, const void *entry, ksLoadId dep,
                                     ksLoadId *addr_dep, uint8_t *tag);
/* Hash of a stored entry's key (rehashing); records the reads. */
uint64_t ksEntryHash(const ksKeyspace *ks, const void *entry, ksLoadId dep);
/* Compare lookup key a (sds) with stored key b (sds, address from load bdep): 0 if equal. */
int ksKeyCompare(const char *a, const char *b, ksLoadId bdep);
/* Bytes of the arena blocks the entry uses (for tests of accounting). */
size_t ksEntryAllocBytes(const ksKeyspace *ks, const void *entry);

#endif /* KS_OBJECT_H */
