/*
 * commands_zset.c -- the sorted-set commands ZADD ZSCORE ZREM, with Valkey's
 * replies and errors (t_zset.c zaddGenericCommand, zscoreCommand,
 * zremCommand); their rows are in commands.c's command table.
 *
 *   ZADD key score member [score member ...]   no flags: every score parsed first
 *                       ("ERR value is not a valid float", nothing written), an odd
 *                       count is "ERR syntax error"; a missing key gets a zset
 *                       sized for the command (zsetTypeCreate), an existing one may
 *                       convert (zsetTypeMaybeConvert); replies the members added
 *   ZSCORE key member   the score (addReplyDouble's text) or null
 *   ZREM key member ... the members removed; the key goes with its last member
 *
 * A key holding another type is "WRONGTYPE ..." (checkType) after its lookup.
 * ZSCORE's member lookup is the one Valkey PR #3940 prefetches (field_arg in the
 * command table: the lookahead batch's nested step, pipeline.c).
 *
 * Conventions: command procs are ksXxxCommand (commands.c's table names them).
 */
#include <stdio.h>
#include <string.h>

#include "keyspace.h"
#include "t_hash.h" /* ksEntryObject */
#include "t_zset.h"

/* zscoreCommand's work besides the recorded accesses (zsetScore's dispatch,
 * formatting the double), as HGET's per-field work (commands_hash.c). */
#define KS_ZSCORE_WORK 150

void ksZaddCommand(ksKeyspace *ks, ksClient *c, ksCommand *cmd) {
    int elements = cmd->argc - 2;
    if (elements % 2) {
        ksReplyError(ks, c, "ERR syntax error");
        return;
    }
    elements /= 2;
    size_t maxelelen = 0;
    for (int j = 0; j < elements; j++) { /* every score parsed before anything is written */
        sds s = cmd->argv[2 + 2 * j];
        double d;
        if (ksZsetParseScore(s, sdslen(s), &d)) {
            ksReplyError(ks, c, "ERR value is not a valid float");
            return;
        }
        size_t ml = sdslen(cmd->argv[3 + 2 * j]);
        if (ml > maxelelen) maxelelen = ml;
    }
    ksKeyInfo ki;
    ksLoadId od = 0;
    robj *o;
    if (ksLookupTyped(ks, c, cmd, OBJ_ZSET, &ki, &od, &o)) return;
    if (!o) {
        sds k = cmd->argv[1];
        void *e = ksZsetEntryCreate(ks, k, sdslen(k), (size_t)elements, maxelelen);
        ksDbAddNew(ks, &ki, e);
        o = ksEntryObject(ks, e, 0, &od);
    } else {
        ksZsetMaybeConvert(ks, o, od, (size_t)elements, maxelelen);
    }
    long long added = 0;
    for (int j = 0; j < elements; j++) {
        double d = 0; /* parsed again (valid: the first pass checked it) */
        (void)ksZsetParseScore(cmd->argv[2 + 2 * j], sdslen(cmd->argv[2 + 2 * j]), &d);
        KS_WORK(20);
        added += ksZsetAdd(ks, o, od, cmd->argv[3 + 2 * j], d);
    }
    ksReplyInt(ks, c, added);
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
    ksReplyBulk(ks, c, (const uint8_t *)buf, (size_t)n, 0);
}

void ksZremCommand(ksKeyspace *ks, ksClient *c, ksCommand *cmd) {
    ksKeyInfo ki;
    ksLoadId od = 0;
    robj *o;
    if (ksLookupTyped(ks, c, cmd, OBJ_ZSET, &ki, &od, &o)) return;
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
