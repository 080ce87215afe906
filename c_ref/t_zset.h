/*
 * t_zset.h -- the sorted set: a key whose value maps members to scores, kept
 * in score order, as Valkey and Redis store it (design essay in t_zset.c).
 *
 *   small zset (both tables)     listpack (listpack.h): member score member score ...
 *                                in (score, member) order
 *   large zset (SKIPLIST)        zset { table *ht; zskiplist *zsl; }: a skiplist of
 *                                nodes embedding their member, and a member table
 *                                (table=hashtable: Valkey hashtable; table=dict: Redis
 *                                no_value dict) whose items are those nodes
 *
 * A zset becomes large when a command brings more than KS_ZSET_MAX_LISTPACK_ENTRIES
 * members or a member longer than KS_ZSET_MAX_LISTPACK_VALUE bytes
 * (zset-max-listpack-entries / -value), and never becomes small again.
 *
 * Conventions: public ksZset...; every read of zset memory is recorded (emit.h);
 * functions taking `dep` are given the load that produced the object header's address.
 */
#ifndef KS_T_ZSET_H
#define KS_T_ZSET_H

#include <stddef.h>
#include <stdint.h>

#include "emit.h"
#include "listpack.h"
#include "object.h"

#define OBJ_ZSET 3                /* both servers' OBJ_ZSET */
#define OBJ_ENCODING_SKIPLIST 7   /* both servers' OBJ_ENCODING_SKIPLIST */
#define KS_ZSET_MAX_LISTPACK_ENTRIES 128 /* zset-max-listpack-entries (both servers' default) */
#define KS_ZSET_MAX_LISTPACK_VALUE 64    /* zset-max-listpack-value */
#define KS_ZSKIPLIST_MAXLEVEL 32         /* ZSKIPLIST_MAXLEVEL */
/* The longest reply of a score (ksZsetFormatScore), with its terminator. */
#define KS_ZSET_SCORE_MAX 32

/* A new empty sorted set for a ZADD of `elements` members, the longest of
 * `maxelelen` bytes (zsetTypeCreate: a listpack, or a skiplist pre-sized when
 * either limit is passed), as the value robj of a new key entry. */
void *ksZsetEntryCreate(ksKeyspace *ks, const char *key, size_t klen, size_t elements, size_t maxelelen);
/* zsetTypeMaybeConvert: a listpack becomes a skiplist when a command brings more
 * than the entry limit or a member over the value limit. */
void ksZsetMaybeConvert(ksKeyspace *ks, robj *o, ksLoadId dep, size_t elements, size_t maxelelen);
/* zsetAdd's flags (Valkey server.h ZADD_IN_* / ZADD_OUT_*): NX only new members, XX
 * only existing ones, GT / LT an existing member's score only upward / downward, INCR
 * the score added to the current one (0 for a new member). */
#define KS_ZADD_IN_INCR 1
#define KS_ZADD_IN_NX 2
#define KS_ZADD_IN_XX 4
#define KS_ZADD_IN_GT 8
#define KS_ZADD_IN_LT 16
#define KS_ZADD_OUT_NOP 1     /* nothing done: NX, XX, GT or LT said no */
#define KS_ZADD_OUT_NAN 2     /* the score (or INCR's sum) is NaN: nothing done */
#define KS_ZADD_OUT_ADDED 4   /* a new member */
#define KS_ZADD_OUT_UPDATED 8 /* an existing member's score changed */
/* zsetAdd: 0 with *out = KS_ZADD_OUT_NAN for a NaN score or sum (nothing written),
 * else 1 with *out's KS_ZADD_OUT_* bits and, unless NOP, *newscore the member's score. */
int ksZsetAddFlags(ksKeyspace *ks, robj *o, ksLoadId dep, sds member, double score, int in, int *out,
                   double *newscore);
/* zsetAdd without flags: 1 if the member was new, 0 if it was there (its
 * score set to `score`). */
int ksZsetAdd(ksKeyspace *ks, robj *o, ksLoadId dep, sds member, double score);
/* zsetScore: 0 and the score, or -1 if the member is absent. */
int ksZsetScore(ksKeyspace *ks, robj *o, ksLoadId dep, sds member, double *score);
/* zsetDel: 1 if the member was there. */
int ksZsetDelete(ksKeyspace *ks, robj *o, ksLoadId dep, sds member);
size_t ksZsetLength(const ksKeyspace *ks, const robj *o);

/* The SKIPLIST encoding's member table (hashtable * or dict *), recording the read
 * of the zset struct (from load `dep`, *tdep its id); NULL for a listpack. */
void *ksZsetTable(const robj *o, ksLoadId dep, ksLoadId *tdep);
/* A member-table item (a skiplist node): its score, recording the read from load
 * `dep` (the bucket or node that held the item). */
double ksZsetNodeScore(const void *node, ksLoadId dep);

/* The text of a score in a reply (addReplyDouble) and a listpack (zzlInsertAt): Valkey's
 * d2string (d2string.c), its work counted by path; returns its length. */
int ksZsetFormatScore(double score, char *buf);
/* string2d: 0 and the double of s (the whole string, no leading space, not NaN), else -1. */
int ksZsetParseScore(const char *s, size_t len, double *score);

void ksZsetFree(ksKeyspace *ks, robj *o);
size_t ksZsetAllocBytes(const ksKeyspace *ks, const robj *o);
/* 0, or -1 and a message: the listpack sorted and within the limits, or the
 * skiplist ordered with spans, tail and length right and the table holding
 * exactly its nodes. */
int ksZsetCheckValid(ksKeyspace *ks, const robj *o, char *err, size_t errlen);

#endif /* KS_T_ZSET_H */
