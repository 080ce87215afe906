/*
 * fuzz_cref_snapshot.c -- libFuzzer target: c_ref's snapshot loader
 * (ksLoadSnapshot, format c_ref/SNAPSHOT.md) on arbitrary bytes.
 *
 * Input: byte 0 picks the keyspace options (checksum checked or not, so that
 * bytes past the CRC-64 are reached without the fuzzer forging checksums) and
 * the load variant; the rest is the snapshot.  Checked beyond ASan/UBSan: a
 * refused snapshot leaves the keyspace unchanged (its pre-load contents, one
 * key, still there), an accepted one leaves a valid keyspace (ksCheckValid)
 * that saves and loads again to the same key count.
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

static const char *const kOptions[] = {"rdbchecksum=no", "rdbchecksum=no table=dict",
                                       "rdbchecksum=no cluster=1", ""};
static const char *const kVariants[] = {"", "load=prefetch-after-key", "load=prefetch-rehash", ""};

static void fail(const char *what, const char *msg) {
    fprintf(stderr, "fuzz_cref_snapshot: %s: %s\n", what, msg);
    abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    uint8_t sel = data[0];
    ksKeyspace *ks = ksCreate(kOptions[sel & 3]);
    if (!ks) fail("ksCreate", ksLastError(NULL));
    static const char set[] = "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n";
    const uint8_t *reply;
    size_t rlen, consumed;
    if (ksExecute(ks, "", (const uint8_t *)set, sizeof set - 1, &reply, &rlen, &consumed))
        fail("ksExecute", ksLastError(ks));
    const char *variant = kVariants[(sel >> 2) & 3];
    if (ksLoadSnapshot(ks, variant, data + 1, size - 1) == 0) {
        if (ksCheckValid(ks)) fail("ksCheckValid after a load", ksLastError(ks));
        uint64_t n = ksDbSize(ks);
        const uint8_t *buf;
        size_t len;
        if (ksSaveSnapshot(ks, "", &buf, &len)) fail("ksSaveSnapshot", ksLastError(ks));
        uint8_t *copy = malloc(len ? len : 1);
        memcpy(copy, buf, len);
        if (ksLoadSnapshot(ks, "", copy, len)) fail("reloading a saved snapshot", ksLastError(ks));
        if (ksDbSize(ks) != n) fail("reload", "the key count changed");
        free(copy);
    } else {
        if (ksDbSize(ks) != 1) fail("refused load", "the keyspace changed");
        if (ksCheckValid(ks)) fail("ksCheckValid after a refused load", ksLastError(ks));
    }
    ksDestroy(ks);
    return 0;
}
