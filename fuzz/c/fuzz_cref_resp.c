/*
 * fuzz_cref_resp.c -- libFuzzer target: c_ref's RESP parser and command
 * execution (ksExecute) on arbitrary query bytes.
 *
 * Input: byte 0 picks the keyspace options and the pipeline variant (so the
 * naive and the lookahead parsers both see the bytes; the hash variants that
 * look fields and members up their own way ride along), the rest is the query.
 * The query is fed in two pieces split at a point taken from byte 0 as well,
 * so a command cut across two reads (the unconsumed tail) is exercised too.
 * Checked beyond ASan/UBSan: `consumed` never exceeds the query, and the
 * keyspace's structural invariants hold afterwards (ksCheckValid).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../c_ref/arena.h"
#include "../../c_ref/kvsim_cref.h"

/* Each input gets a fresh keyspace, as it would in its own process, but the arena
 * under it reuses the previous one's pages (ksArenaSetRetain, as c_ref's warm
 * workload runs do): creating a keyspace then costs no mmap, page faults or
 * munmap, which were most of an execution.  ksArenaCalloc still zeroes what it
 * hands out, and ASan's poisoning of freed arena blocks is unchanged. */
int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    ksArenaSetRetain(1);
    return 0;
}

static const char *const kOptions[] = {"", "table=dict", "layout=legacy", "cluster=1 table=dict"};
static const char *const kVariants[] = {"", "pipeline=lookahead batch=4 hash=nested-3940",
                                        "pipeline=lookahead-hash-once multikey=batch hash=find-batch-4017",
                                        "multikey=chunk-15133 chunk=2 hash=find-batch-4017"};

static void fail(const char *what, const char *msg) {
    fprintf(stderr, "fuzz_cref_resp: %s: %s\n", what, msg);
    abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    uint8_t sel = data[0];
    const uint8_t *q = data + 1;
    size_t len = size - 1;
    ksKeyspace *ks = ksCreate(kOptions[sel & 3]);
    if (!ks) fail("ksCreate", ksLastError(NULL));
    const char *variant = kVariants[(sel >> 2) & 3];
    size_t split = (sel >> 4) ? len * (sel >> 4) / 16 : len;
    /* first piece, then what it left unconsumed plus the rest */
    const uint8_t *reply;
    size_t rlen, consumed;
    if (ksExecute(ks, variant, q, split, &reply, &rlen, &consumed)) fail("ksExecute", ksLastError(ks));
    if (consumed > split) fail("ksExecute", "consumed more than the query");
    if (consumed < len) {
        size_t rest = len - consumed;
        uint8_t *buf = malloc(rest ? rest : 1);
        memcpy(buf, q + consumed, rest);
        size_t c2;
        if (ksExecute(ks, variant, buf, rest, &reply, &rlen, &c2)) fail("ksExecute", ksLastError(ks));
        if (c2 > rest) fail("ksExecute", "consumed more than the query");
        free(buf);
    }
    if (ksCheckValid(ks)) fail("ksCheckValid", ksLastError(ks));
    ksDestroy(ks);
    return 0;
}
