/*
 * lib.c -- the public C API of kvsim_cref.h (libkvsim_cref.so).
 *
 * Every entry point makes its keyspace current (ksCur: the hashtable type
 * callbacks read the SipHash key and layout from it) and translates between
 * the string-configured API and the internal modules.  Built from the native
 * object set (no tracing).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../c_ref/kvsim_cref.h"
#include "keyspace.h"
#include "reply.h"
#include "workload.h"

#define KS_API __attribute__((visibility("default")))

static char create_err[256];

KS_API ksKeyspace *ksCreate(const char *options) {
    ksKeyspace *ks = ksKeyspaceNew(options, create_err, sizeof(create_err));
    return ks;
}

KS_API void ksDestroy(ksKeyspace *ks) { ksKeyspaceFree(ks); }

KS_API const char *ksLastError(const ksKeyspace *ks) { return ks ? ks->err : create_err; }

KS_API int ksExecute(ksKeyspace *ks, const char *variant, const uint8_t *query, size_t len, const uint8_t **reply,
                     size_t *reply_len, size_t *consumed) {
    ksCur = ks;
    ksVariants v;
    if (ksParseVariants(ks, variant, &v)) return -1;
    ks->var = v;
    ksClient *c = &ks->client;
    ksClientSetQuery(ks, c, query, len);
    c->rlen = 0;
    v.pipeline(ks, c);
    if (c->reply.len) { /* a server's reply blocks (callpath on, reply.c): gathered here */
        size_t n = ksReplyLen(c);
        uint8_t *all = malloc(n);
        if (!all) abort();
        ksReplyCopyOut(c, all);
        ksReplyRelease(c);
        ksReplyRaw(ks, c, all, n);
        free(all);
    }
    ksDbCron(ks); /* the event loop: between two reads of the client */
    if (reply) *reply = c->rbuf;
    if (reply_len) *reply_len = c->rlen;
    if (consumed) *consumed = c->closed ? len : c->qpos;
    return 0;
}

KS_API void ksSetTimeMs(ksKeyspace *ks, int64_t now_ms) { ks->now_ms = now_ms; }

KS_API int ksSaveSnapshot(ksKeyspace *ks, const char *variant, const uint8_t **buf, size_t *len) {
    ksCur = ks;
    ksVariants v;
    if (ksParseVariants(ks, variant, &v)) return -1;
    ks->var = v;
    uint8_t *b;
    size_t l;
    if (ksSnapshotSave(ks, &b, &l)) return -1;
    *buf = b;
    *len = l;
    return 0;
}

KS_API int ksLoadSnapshot(ksKeyspace *ks, const char *variant, const uint8_t *buf, size_t len) {
    ksCur = ks;
    ksVariants v;
    if (ksParseVariants(ks, variant, &v)) return -1;
    ks->var = v;
    return ksSnapshotLoad(ks, buf, len);
}

KS_API uint64_t ksDbSize(ksKeyspace *ks) { return ks->nkeys; }

KS_API uint64_t ksMemoryBytes(const ksKeyspace *ks) { return ksArenaAllocatedBytes(ks->arena); }

KS_API int ksCheckValid(ksKeyspace *ks) {
    ksCur = ks;
    return ksDbCheckValid(ks, ks->err, sizeof(ks->err));
}

KS_API size_t ksWorkloadOptionsJson(char *buf, size_t cap) { return ksWorkloadOptionsWriteJson(buf, cap); }
