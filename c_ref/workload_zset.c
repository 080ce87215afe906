/*
 * workload_zset.c -- the `zscore` and `zmscore` workloads: sorted-set keys and
 * ZSCORE or ZMSCORE.
 *
 *   setup (not measured)                         measured phase
 *   --keys sorted sets of --zset-members         --ops ZSCOREs of a random existing
 *   members ("member:<i>", score i / 4),           member of a random key (zmscore:
 *   each filled by ZADDs in member order           ZMSCOREs of --fields-per-command
 *                                                  random existing members, where
 *                                                  hash=find-batch-4017 looks them up
 *                                                  together: Valkey #4017),
 *                                                  --pipeline-depth per query buffer, run
 *   (so a set past 128 members is a skiplist       by --pipeline (lookahead: Valkey #2092's
 *   and its member table, else a listpack)         batches, where hash=nested-3940 adds
 *                                                  the member's step: Valkey #3940)
 *
 * Many sets of a few hundred members are the shape where the member table
 * misses; --variant names the `hash` family (variants.c), whose nested-3940
 * acts on hashes and sorted sets alike.
 */
#include <stdio.h>
#include <string.h>

#include "t_hash.h"
#include "t_zset.h"
#include "workload_ctx.h"

/* Member i: "member:" and i in decimal. */
static size_t memberName(uint64_t i, char *buf, size_t cap) {
    return (size_t)snprintf(buf, cap, "member:%llu", (unsigned long long)i);
}

int ksZsetWorkloadSetup(wl *w) {
    const ksWorkloadSpec *s = w->spec;
    ksKeyspace *ks = w->ks;
    char key[4096], member[32];
    uint8_t kb[4096 + 16], mb[48];
    for (uint64_t i = 0; i < s->keys; i++) {
        ksWlKeyName(w, i, key);
        sds k = sdsWriteAt(kb, SDS_TYPE_8, key, s->key_size, s->key_size);
        ksKeyInfo ki;
        ksKeyResolve(ks, k, &ki);
        if (ksDbFind(ks, &ki)) continue;
        void *e = ksZsetEntryCreate(ks, key, s->key_size, 1, 0);
        ksDbAddNew(ks, &ki, e);
        robj *o = ksEntryObject(ks, e, 0, NULL);
        for (uint64_t m = 0; m < s->zset_members; m++) {
            size_t ml = memberName(m, member, sizeof(member));
            ksZsetAdd(ks, o, 0, sdsWriteAt(mb, SDS_TYPE_8, member, ml, ml), (double)m / 4);
        }
    }
    ksWlSetupIdle(w);
    int depth = s->pipeline_depth > 1 ? s->pipeline_depth : 1;
    int multi = !strcmp(s->workload, "zmscore");
    int nmembers = multi ? s->fields_per_command : 1;
    ksWlGroupsBegin(w);
    for (uint64_t op = 0; op < s->ops; op++) {
        if (op % (uint64_t)depth == 0) ksWlGroupMark(w, (size_t)(s->ops / (uint64_t)depth + 1));
        uint64_t i = ksWlRand(&w->rng) % s->keys;
        ksWlKeyName(w, i, key);
        ksWlCmd(w, 2 + nmembers);
        if (multi) ksWlArg(w, "ZMSCORE", 7);
        else ksWlArg(w, "ZSCORE", 6);
        ksWlArg(w, key, s->key_size);
        for (int j = 0; j < nmembers; j++) {
            uint64_t m = ksWlRand(&w->rng) % s->zset_members;
            ksWlArg(w, member, memberName(m, member, sizeof(member)));
        }
    }
    ksWlGroupsEnd(w);
    return 0;
}
