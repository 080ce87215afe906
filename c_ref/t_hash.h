/*
 * t_hash.h -- the hash type: a key whose value is a set of field-value pairs,
 * as Valkey and Redis store it (design essay and diagrams in t_hash.c).
 *
 *   small hash (both tables)     listpack: [total u32][count u16] f v f v ... [0xFF]
 *   large hash, table=hashtable  Valkey hashtable (hashtable.c) of field-value entries
 *   large hash, table=dict       Redis no_value dict (dict.c) of the same entries
 *
 * A hash becomes large (OBJ_ENCODING_HT) when it would hold more than
 * KS_HASH_MAX_LISTPACK_ENTRIES fields or a field or value longer than
 * KS_HASH_MAX_LISTPACK_VALUE bytes (hash-max-listpack-entries/-value), and
 * never becomes small again (neither server converts back).
 *
 * Conventions: public ksHash...; every read of hash memory is recorded
 * (emit.h) with the id of the load that produced its address; functions that
 * take `dep` are given the load that produced the object header's address.
 */
#ifndef KS_T_HASH_H
#define KS_T_HASH_H

#include <stddef.h>
#include <stdint.h>

#include "emit.h"
#include "listpack.h"
#include "object.h"

#define OBJ_HASH 4
#define OBJ_ENCODING_HT 2        /* Valkey OBJ_ENCODING_HASHTABLE, Redis OBJ_ENCODING_HT */

#define KS_HASH_MAX_LISTPACK_ENTRIES 512 /* hash-max-listpack-entries (both servers' default) */
#define KS_HASH_MAX_LISTPACK_VALUE 64    /* hash-max-listpack-value */
/* Valkey and Redis entry.h EMBED_VALUE_MAX_ALLOC_SIZE: a field and its value
 * share one allocation when their two sds fit in this many bytes. */
#define KS_HASH_EMBED_VALUE_MAX 128
/* The most fields a hash variant handles at once (HMGET hands them over in
 * chunks of this many; Redis #14988's HGETALL_BATCH is 16). */
#define KS_HASH_BATCH_MAX 16

/* A new empty hash (createHashObject: a listpack holding nothing), as the value
 * robj of a new key: the keyspace entry for `key` (object.h's layouts). */
void *ksHashEntryCreate(ksKeyspace *ks, const char *key, size_t klen, int64_t expire_ms);
/* The value robj of a keyspace entry, recording the reads that reach its header
 * (unified: the entry itself; legacy: entry -> val); *odep = the header load. */
robj *ksEntryObject(const ksKeyspace *ks, void *entry, ksLoadId dep, ksLoadId *odep);
/* ksEntryType (keyspace.h): the type of an entry's value, OBJ_STRING or OBJ_HASH. */

/* hashTypeTryConversion: before writing fields argv[start..end] (field, value
 * pairs): convert to HT if a string is longer than the listpack value limit or
 * the pairs outnumber the entry limit (then pre-sized for them). */
void ksHashTryConversion(ksKeyspace *ks, robj *o, ksLoadId dep, sds *argv, int start, int end);
/* hashTypeSet: 1 if the field (an sds of flen bytes) was new, 0 if its value
 * was replaced.  A listpack that grows past the entry limit converts. */
int ksHashSet(ksKeyspace *ks, robj *o, ksLoadId dep, sds field, size_t flen, const uint8_t *val,
              size_t vlen);
/* hashTypeGetValue: 0 and the value bytes (*vdep: the load of their address),
 * or -1 if the field is absent. */
int ksHashGet(ksKeyspace *ks, robj *o, ksLoadId dep, sds field, const uint8_t **val, size_t *vlen,
              ksLoadId *vdep);
/* hashTypeDelete: 1 if the field was there. */
int ksHashDelete(ksKeyspace *ks, robj *o, ksLoadId dep, sds field);
size_t ksHashLength(const ksKeyspace *ks, const robj *o);

/* hashTypeIterator over the fields in the encoding's order (listpack: insertion
 * order; HT: the table's iteration order).  Nothing may change the hash while
 * an iterator is live. */
typedef struct {
    uint64_t opaque[32];
} ksHashIter;
void ksHashIterInit(ksKeyspace *ks, ksHashIter *it, robj *o, ksLoadId dep);
/* 1 and the field and value (each with the load that produced its address), or 0 at the end. */
int ksHashIterNext(ksHashIter *it, const uint8_t **field, size_t *flen, ksLoadId *fdep, const uint8_t **val,
                   size_t *vlen, ksLoadId *vdep);
void ksHashIterReset(ksHashIter *it);

/* The HT encoding's inner table (hashtable * or dict *), NULL for a listpack. */
void *ksHashTable(const robj *o);
/* Field-value entries (the HT encoding's items): the field sds (the entry
 * pointer itself) and the value, recording the reads from load `dep` (the
 * bucket or node that held the entry). */
const uint8_t *ksHashEntryValue(const void *entry, ksLoadId dep, size_t *vlen, ksLoadId *vdep);
/* The address a value prefetch of an entry reads next: the value sds of an
 * entry that keeps it by pointer (recording the pointer's load), NULL when the
 * value is embedded (Valkey PR #2180's "value pointer" case). */
const void *ksHashEntryValuePrefetchAddr(const void *entry, ksLoadId dep, ksLoadId *addr_dep);

/* Free the hash value (listpack or table and every entry) of robj o. */
void ksHashFree(ksKeyspace *ks, robj *o);
/* Arena bytes of the hash value (not the robj). */
size_t ksHashAllocBytes(const ksKeyspace *ks, const robj *o);
/* 0, or -1 and a message: listpack well formed within the limits, or the
 * inner table valid with entries that decode. */
int ksHashCheckValid(ksKeyspace *ks, const robj *o, char *err, size_t errlen);

#endif /* KS_T_HASH_H */
