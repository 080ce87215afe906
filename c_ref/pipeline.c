/*
 * pipeline.c -- executing a pipelined query buffer: naive, and the lookahead
 * of Valkey PR #2092 with memory_prefetch.c's interleaved key prefetching.
 *
 *   naive:      parse 1 -> execute 1 -> parse 1 -> execute 1 ...
 *
 *   lookahead:  parse up to `batch` commands -> resolve their keys (hash and
 *               slot once) -> interleave the step machines -> execute in order
 *
 *   Interleaving (one prefetch per key per turn, round robin):
 *
 *     turn 1:  k0.bucket  k1.bucket  k2.bucket ...
 *     turn 2:  k0.entry   k1.entry   k2.entry  ...   (tag-matching entry)
 *     turn 3:  k0.value   k1.value   ...             (RAW values only)
 *
 *   Per key: ENTRY (one hashtableIncrementalFindStep per turn) -> when the
 *   find is done, VALUE without yielding (prefetch the value if it is in a
 *   separate allocation) -> DONE.  A key whose table is missing or empty is
 *   DONE at once; only batches of more than one key are prefetched.
 *
 * Prefetching is advisory: commands execute exactly as in the naive path,
 * re-reading slot tables (an earlier command may have created, rehashed or
 * freed them); only the hash and slot computed during lookahead are reused.
 *
 * Conventions: public ks...; static internals without prefix.
 */
#include <string.h>

#include "keyspace.h"

enum { PREFETCH_ENTRY = 0, PREFETCH_VALUE, PREFETCH_DONE };

/* --- Interleaved prefetch (memory_prefetch.c hashtablePrefetch) ------------ */

void ksPrefetchKeys(ksKeyspace *ks, ksKeyInfo *keys, int n) {
    if (n <= 1) return;
    const ksTableOps *ops = ks->ops;
    int remaining = 0;
    for (int i = 0; i < n; i++) {
        ksKeyInfo *k = &keys[i];
        k->found = NULL;
        if (k->table == NULL || ops->size(k->table) == 0) {
            k->state = PREFETCH_DONE;
            continue;
        }
        k->state = PREFETCH_ENTRY;
        ops->findInit(&k->fs, k->table, k->key, k->hash);
        remaining++;
    }
    KS_WORK(4 * n);
    int cur = 0;
    while (remaining > 0) {
        ksKeyInfo *k = &keys[cur];
        cur = cur + 1 == n ? 0 : cur + 1;
        if (k->state == PREFETCH_DONE) continue;
        KS_WORK(6);
        if (k->state == PREFETCH_ENTRY) {
            if (ops->findStep(&k->fs)) continue; /* more work: next key */
            k->state = PREFETCH_VALUE;           /* done: value without yielding */
        }
        void *found;
        if (ops->findResult(&k->fs, &found)) {
            k->found = found;
            ksEntryPrefetchValue(ks, found, 0);
        }
        k->state = PREFETCH_DONE;
        remaining--;
    }
}

/* --- Naive ----------------------------------------------------------------- */

static int parseNext(ksKeyspace *ks, ksClient *c, ksCommand *cmd) {
    int rc = ksParseCommand(ks, c, cmd);
    if (rc < 0) {
        ksReplyError(ks, c, cmd->proto_err);
        c->closed = 1;
        c->qpos = c->qlen;
    }
    return rc;
}

void ksPipelineNaive(ksKeyspace *ks, ksClient *c) {
    ksCommand cmd;
    cmd.argv = NULL;
    cmd.argv_cap = 0;
    while (parseNext(ks, c, &cmd) > 0) {
        ksExecuteCommand(ks, c, &cmd);
        ksCommandFree(ks, &cmd);
    }
    ksCommandFree(ks, &cmd);
}

/* --- Lookahead ------------------------------------------------------------- */

void ksPipelineLookahead(ksKeyspace *ks, ksClient *c) {
    int batch = ks->var.batch;
    ksCommand cmds[KS_MAX_BATCH];
    ksKeyInfo keys[KS_MAX_BATCH];
    int keycmd[KS_MAX_BATCH];
    while (1) {
        int n = 0, rc = 0;
        while (n < batch) {
            cmds[n].argv = NULL; /* only what the parser needs is initialised */
            cmds[n].argv_cap = 0;
            if ((rc = ksParseCommand(ks, c, &cmds[n])) <= 0) break;
            n++;
        }
        if (n == 0 && rc <= 0) {
            if (rc < 0) parseNext(ks, c, &cmds[0]); /* re-parse to reply the error */
            break;
        }
        /* Resolve the first key of each parsed command. */
        int nk = 0;
        for (int i = 0; i < n; i++) {
            ksCommand *cmd = &cmds[i];
            if (cmd->argc == 0) continue;
            cmd->def = ksLookupCommand(cmd->argv[0], sdslen(cmd->argv[0]));
            const ksCommandDef *d = cmd->def;
            if (!d || !d->first_key || d->first_key >= cmd->argc) continue;
            if ((d->arity > 0 && cmd->argc != d->arity) || cmd->argc < -d->arity) continue;
            ksKeyResolve(ks, cmd->argv[d->first_key], &keys[nk]);
            cmd->key = keys[nk];
            cmd->prefetched = 1;
            keycmd[nk++] = i;
        }
        (void)keycmd;
        if (nk > 1) {
            KS_MARK(KVT_MARK_BATCH, nk);
            ksPrefetchKeys(ks, keys, nk);
        }
        for (int i = 0; i < n; i++) {
            ksExecuteCommand(ks, c, &cmds[i]);
            ksCommandFree(ks, &cmds[i]);
        }
        if (rc < 0) {
            ksReplyError(ks, c, cmds[n].proto_err);
            c->closed = 1;
            c->qpos = c->qlen;
            break;
        }
        if (rc == 0 && n < batch) break;
    }
}
