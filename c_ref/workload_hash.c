/*
 * workload_hash.c -- the `hash` workload: hash keys and their field commands.
 *
 *   setup (not measured)                       measured phase
 *   --keys hashes of --hash-fields fields      --ops commands of --hash-op on random
 *   ("field:<i>" -> --value-size bytes),         keys: HGET of a random existing field,
 *   each hash filled by HSETs in field order     HMGET of --fields-per-command of them,
 *   (so a hash past 512 fields, or with values   HGETALL, or HSET overwriting one;
 *   over 64 bytes, is a table, else a listpack)  --pipeline-depth per query buffer, run
 *                                                by --pipeline (lookahead: Valkey #2092's
 *                                                batches, where the nested field
 *                                                prefetch variants act)
 *
 * One large hash (--keys 1 --hash-fields 1000000) is the shape of Valkey #2180's
 * and #3940's HGET benchmark; many small ones (--hash-fields 10) the listpack
 * case.  --variant names the `hash` family (variants.c).
 */
#include <stdio.h>
#include <string.h>

#include "t_hash.h"
#include "workload_ctx.h"

/* Field i: "field:" and i in decimal (never an integer string, which a listpack
 * would store as an integer: t_hash.c deviations). */
static size_t fieldName(uint64_t i, char *buf, size_t cap) {
    return (size_t)snprintf(buf, cap, "field:%llu", (unsigned long long)i);
}

int ksHashWorkloadSetup(wl *w) {
    const ksWorkloadSpec *s = w->spec;
    ksKeyspace *ks = w->ks;
    char key[4096], field[32];
    uint8_t kb[4096 + 16], fb[48];
    for (uint64_t i = 0; i < s->keys; i++) {
        ksWlKeyName(w, i, key);
        sds k = sdsWriteAt(kb, SDS_TYPE_8, key, s->key_size, s->key_size);
        ksKeyInfo ki;
        ksKeyResolve(ks, k, &ki);
        if (ksDbFind(ks, &ki)) continue;
        void *e = ksHashEntryCreate(ks, key, s->key_size, -1);
        ksDbAddNew(ks, &ki, e);
        robj *o = ksEntryObject(ks, e, 0, NULL);
        for (uint64_t f = 0; f < s->hash_fields; f++) {
            size_t fl = fieldName(f, field, sizeof(field));
            ksHashSet(ks, o, 0, sdsWriteAt(fb, SDS_TYPE_8, field, fl, fl), fl, ksWlValue(w, i + f), s->value_size);
        }
    }
    ksWlSetupIdle(w);
    int depth = s->pipeline_depth > 1 ? s->pipeline_depth : 1;
    int hmget = !strcmp(s->hash_op, "hmget"), hgetall = !strcmp(s->hash_op, "hgetall");
    int hset = !strcmp(s->hash_op, "hset");
    ksWlGroupsBegin(w);
    for (uint64_t op = 0; op < s->ops; op++) {
        if (op % (uint64_t)depth == 0) ksWlGroupMark(w, (size_t)(s->ops / (uint64_t)depth + 1));
        uint64_t i = ksWlRand(&w->rng) % s->keys;
        ksWlKeyName(w, i, key);
        int nf = hmget ? s->fields_per_command : hgetall ? 0 : 1;
        ksWlCmd(w, 2 + nf + (hset ? 1 : 0));
        ksWlArg(w, hmget ? "HMGET" : hgetall ? "HGETALL" : hset ? "HSET" : "HGET", hmget ? 5 : hgetall ? 7 : 4);
        ksWlArg(w, key, s->key_size);
        for (int f = 0; f < nf; f++) {
            uint64_t fi = ksWlRand(&w->rng) % s->hash_fields;
            size_t fl = fieldName(fi, field, sizeof(field));
            ksWlArg(w, field, fl);
            if (hset) ksWlArg(w, ksWlValue(w, i + fi + 1), s->value_size);
        }
    }
    ksWlGroupsEnd(w);
    return 0;
}
