/*
 * commands_zset.c -- the sorted-set commands ZADD ZSCORE ZMSCORE ZREM, with
 * Valkey's replies and errors (t_zset.c zaddGenericCommand, zsetAdd,
 * zscoreCommand, zmscoreCommand, zremCommand); their rows are in commands.c's
 * command table.
 *
 *   ZADD key [NX|XX] [GT|LT] [CH] [INCR] score member [score member ...]
 *                       flags (any order, before the first score), then every
 *                       score parsed ("ERR value is not a valid float", nothing
 *                       written); a missing key gets a zset sized for the command
 *                       (zsetTypeCreate; not with XX), an existing one may convert
 *                       (zsetTypeMaybeConvert); replies the members added (CH: and
 *                       updated), or with INCR the new score or null (nothing done)
 *   ZSCORE key member   the score (addReplyDouble's text) or null
 *   ZMSCORE key member ...  an array of scores or nulls (hash=find-batch-4017:
 *                       Valkey PR #4017's batched find over the member table)
 *   ZREM key member ... the members removed; the key goes with its last member
 *
 * A key holding another type is "WRONGTYPE ..." (checkType) after its lookup.
 * ZSCORE's and ZMSCORE's (first) member lookup is the one Valkey PR #3940 prefetches (field_arg in the
 * command table: the lookahead batch's nested step, pipeline.c).
 *
 * Conventions: command procs are ksXxxCommand (commands.c's table names them).
 */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "keyspace.h"
#include "t_hash.h" /* ksEntryObject */
#include "t_zset.h"

/* zscoreCommand's work besides the recorded accesses (zsetScore's dispatch,
 * formatting the double), as HGET's per-field work (commands_hash.c). */
#define KS_ZSCORE_WORK 150

/* zaddGenericCommand: the flags before the first score, then pairs; the errors in
 * Valkey's order (syntax, NX with XX, GT/LT with NX or each other, INCR with more
 * than one pair, a score that is not a float), all before the key's lookup. */
void ksZaddCommand(ksKeyspace *ks, ksClient *c, ksCommand *cmd) {
    int in = 0, ch = 0, scoreidx = 2;
    for (; scoreidx < cmd->argc; scoreidx++) {
        const char *opt = cmd->argv[scoreidx];
        if (!strcasecmp(opt, "nx")) in |= KS_ZADD_IN_NX;
        else if (!strcasecmp(opt, "xx")) in |= KS_ZADD_IN_XX;
        else if (!strcasecmp(opt, "ch")) ch = 1;
        else if (!strcasecmp(opt, "incr")) in |= KS_ZADD_IN_INCR;
        else if (!strcasecmp(opt, "gt")) in |= KS_ZADD_IN_GT;
        else if (!strcasecmp(opt, "lt")) in |= KS_ZADD_IN_LT;
        else break;
    }
    int elements = cmd->argc - scoreidx;
    if (elements % 2 || !elements) {
        ksReplyError(ks, c, "ERR syntax error");
        return;
    }
    elements /= 2;
    int nx = in & KS_ZADD_IN_NX, xx = in & KS_ZADD_IN_XX, gt = in & KS_ZADD_IN_GT, lt = in & KS_ZADD_IN_LT;
    int incr = in & KS_ZADD_IN_INCR;
    if (nx && xx) {
        ksReplyError(ks, c, "ERR XX and NX options at the same time are not compatible");
        return;
    }
    if ((gt && nx) || (lt && nx) || (gt && lt)) {
        ksReplyError(ks, c, "ERR GT, LT, and/or NX options at the same time are not compatible");
        return;
    }
    if (incr && elements > 1) {
        ksReplyError(ks, c, "ERR INCR option supports a single increment-element pair");
        return;
    }
    size_t maxelelen = 0;
    for (int j = 0; j < elements; j++) { /* every score parsed before anything is written */
        sds s = cmd->argv[scoreidx + 2 * j];
        double d;
        if (ksZsetParseScore(s, sdslen(s), &d)) {
            ksReplyError(ks, c, "ERR value is not a valid float");
            return;
        }
        size_t ml = sdslen(cmd->argv[scoreidx + 1 + 2 * j]);
        if (ml > maxelelen) maxelelen = ml;
    }
    ksKeyInfo ki;
    ksLoadId od = 0;
    robj *o;
    if (ksLookupTyped(ks, c, cmd, OBJ_ZSET | KS_LOOKUP_WRITE, &ki, &od, &o)) return;
    long long added = 0, updated = 0, processed = 0;
    double score = 0;
    if (!o && !xx) {
        sds k = cmd->argv[1];
        void *e = ksZsetEntryCreate(ks, k, sdslen(k), (size_t)elements, maxelelen);
        ksDbAddNew(ks, &ki, e);
        o = ksEntryObject(ks, e, 0, &od);
    } else if (o) {
        ksZsetMaybeConvert(ks, o, od, (size_t)elements, maxelelen);
    }
    for (int j = 0; o && j < elements; j++) { /* no key and XX: nothing to do */
        sds sc = cmd->argv[scoreidx + 2 * j];
        (void)ksZsetParseScore(sc, sdslen(sc), &score); /* parsed again (valid: checked above) */
        KS_WORK(20);
        int out;
        double newscore = score;
        if (!ksZsetAddFlags(ks, o, od, cmd->argv[scoreidx + 1 + 2 * j], score, in, &out, &newscore)) {
            ksReplyError(ks, c, "ERR resulting score is not a number (NaN)");
            return;
        }
        added += (out & KS_ZADD_OUT_ADDED) != 0;
        updated += (out & KS_ZADD_OUT_UPDATED) != 0;
        processed += !(out & KS_ZADD_OUT_NOP);
        score = newscore;
    }
    if (!incr) {
        ksReplyInt(ks, c, ch ? added + updated : added);
    } else if (processed) { /* ZADD INCR (ZINCRBY's reply): the new score, or null */
        char buf[KS_ZSET_SCORE_MAX];
        int n = ksZsetFormatScore(score, buf);
        ksReplyDouble(ks, c, buf, (size_t)n);
    } else {
        ksReplyNull(ks, c);
    }
}

void ksZscoreCommand(ksKeyspace *ks, ksClient *c, ksCommand *cmd) {
    ksKeyInfo ki;
    ksLoadId od = 0;
    robj *o;
    if (ksLookupTyped(ks, c, cmd, OBJ_ZSET, &ki, &od, &o)) return;
    double score;
    KS_WORK(KS_ZSCORE_WORK);
    if (!o || ksZsetScore(ks, o, od, cmd->argv[2], &score)) {
        ksReplyNull(ks, c);
        return;
    }
    char buf[KS_ZSET_SCORE_MAX];
    int n = ksZsetFormatScore(score, buf);
    ksReplyDouble(ks, c, buf, (size_t)n);
}

void ksZremCommand(ksKeyspace *ks, ksClient *c, ksCommand *cmd) {
    ksKeyInfo ki;
    ksLoadId od = 0;
    robj *o;
    if (ksLookupTyped(ks, c, cmd, OBJ_ZSET | KS_LOOKUP_WRITE, &ki, &od, &o)) return;
    long long deleted = 0;
    for (int j = 2; o && j < cmd->argc; j++) {
        if (!ksZsetDelete(ks, o, od, cmd->argv[j])) continue;
        deleted++;
        if (ksZsetLength(ks, o) == 0) { /* the last member: the key goes */
            ksDbDelete(ks, &ki);
            break;
        }
    }
    ksReplyInt(ks, c, deleted);
}

/* zmscoreCommand: an array of each member's score or null (a missing key as an empty
 * set).  With two or more members on a skiplist's member table, hash=find-batch-4017
 * looks them up together, 16 at a time (Valkey PR #4017: hashtableFindBatch, as
 * HMGET; the found nodes give the scores), else one zsetScore per member. */
void ksZmscoreCommand(ksKeyspace *ks, ksClient *c, ksCommand *cmd) {
    ksKeyInfo ki;
    ksLoadId od = 0;
    robj *o;
    if (ksLookupTyped(ks, c, cmd, OBJ_ZSET, &ki, &od, &o)) return;
    int n = cmd->argc - 2;
    void *found[KS_HASH_BATCH_MAX];
    ksLoadId fd[KS_HASH_BATCH_MAX];
    char buf[KS_ZSET_SCORE_MAX];
    ksReplyArrayLen(ks, c, n);
    for (int j = 0; j < n; j += KS_HASH_BATCH_MAX) { /* the variant sees the members in chunks */
        int m = n - j < KS_HASH_BATCH_MAX ? n - j : KS_HASH_BATCH_MAX;
        int batched = o && ks->var.hash_fields && ks->var.hash_fields(ks, o, od, cmd->argv + 2 + j, m, found, fd);
        for (int i = 0; i < m; i++) {
            double score;
            KS_WORK(KS_ZSCORE_WORK);
            int ok = batched ? found[i] != NULL : o && ksZsetScore(ks, o, od, cmd->argv[2 + j + i], &score) == 0;
            if (!ok) {
                ksReplyNull(ks, c);
                continue;
            }
            if (batched) score = ksZsetNodeScore(found[i], fd[i]);
            int len = ksZsetFormatScore(score, buf);
            ksReplyDouble(ks, c, buf, (size_t)len);
        }
    }
}
