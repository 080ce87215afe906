/*
 * test_decode.c -- C test of the trace intake's compiled part (decode.c), run
 * under ASan+UBSan by `make test-sanitize`: the CRC32 check value, the raw
 * codec and its failures, and the record rules on hand-made records, across
 * calls (a dep into an earlier call, warm-up alternation) and past the first
 * growth of the load bitmap.  sim/tests/test_intake.py compares the whole
 * intake with the Python reader; this checks the C under the sanitizers.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../decode.h"
#include "check.h"

static kvtRecord rec(uint8_t kind, uint64_t addr, uint16_t size, uint32_t dep, uint16_t flags) {
    kvtRecord r;
    memset(&r, 0, sizeof r);
    r.kind = kind;
    r.addr = addr;
    r.size = size;
    r.dep = dep;
    r.flags = flags;
    return r;
}

/* The rule the validator reports for one bad record after `good` loads, or -1. */
static int ruleOf(kvtRecord bad, uint32_t good, int64_t n_tags) {
    kvsimValidator *v = kvsimValidatorCreate(n_tags, -1, KVT_NUM_MARKERS);
    kvtRecord *r = calloc(good + 1, sizeof *r);
    for (uint32_t i = 0; i < good; i++) r[i] = rec(KVT_LOAD, 64 * i, 8, 0, 0);
    r[good] = bad;
    kvsimRecordError e;
    int rc = kvsimValidate(v, r, good + 1, &e);
    int out = rc == 1 && e.index == good ? (int)e.rule : -1;
    CHECK(rc == 0 || kvsimValidatorRecords(v) == 0); /* a refused call does not move */
    free(r);
    kvsimValidatorFree(v);
    return out;
}

int main(void) {
    CHECK(kvsimCrc32(0, "123456789", 9) == 0xCBF43926u); /* the CRC-32 check value */
    CHECK(kvsimCrc32(kvsimCrc32(0, "1234", 4), "56789", 5) == 0xCBF43926u);
    CHECK(kvsimCrc32Tables(0, "123456789", 9) == 0xCBF43926u);
    { /* zlib's CRC (where the system has it) and the tables agree at any length and offset */
        static unsigned char buf[4099];
        for (size_t i = 0; i < sizeof buf; i++) buf[i] = (unsigned char)(i * 2654435761u >> 13);
        for (size_t off = 0; off < 9; off++)
            for (size_t n = 0; off + n <= sizeof buf; n += n < 64 ? 1 : 509)
                CHECK(kvsimCrc32(7, buf + off, n) == kvsimCrc32Tables(7, buf + off, n));
    }

    kvtRecord src[3] = {rec(KVT_LOAD, 0, 8, 0, 0), rec(KVT_STORE, 64, 8, 0, 0),
                        rec(KVT_LOAD, 128, 8, 1, 0)};
    kvtRecord dst[3];
    uint32_t crc = kvsimCrc32(0, src, sizeof src), got = 0;
    CHECK(kvsimDecodePayload(src, sizeof src, KVT_CODEC_RAW, crc, dst, sizeof dst, &got) ==
          KVSIM_DEC_OK);
    CHECK(got == crc && memcmp(src, dst, sizeof src) == 0);
    CHECK(kvsimDecodePayload(src, sizeof src, KVT_CODEC_RAW, crc ^ 1, dst, sizeof dst, &got) ==
          KVSIM_DEC_CRC);
    CHECK(kvsimDecodePayload(src, sizeof src - 24, KVT_CODEC_RAW, kvsimCrc32(0, src, 48), dst,
                             sizeof dst, &got) == KVSIM_DEC_CODEC);
    CHECK(kvsimDecodePayload(src, sizeof src, 9, crc, dst, sizeof dst, &got) == KVSIM_DEC_CODEC);
    if (kvsimDecodeHasZstd()) /* not a zstd frame */
        CHECK(kvsimDecodePayload(src, sizeof src, KVT_CODEC_ZSTD, crc, dst, sizeof dst, &got) ==
              KVSIM_DEC_ZSTD);

    CHECK(ruleOf(rec(7, 0, 8, 0, 0), 3, -1) == KVSIM_RULE_KIND);
    CHECK(ruleOf(rec(KVT_LOAD, 0, 0, 0, 0), 3, -1) == KVSIM_RULE_SIZE_ACCESS);
    CHECK(ruleOf(rec(KVT_PREFETCH, 0, 2, 0, 0), 3, -1) == KVSIM_RULE_SIZE_PREFETCH);
    CHECK(ruleOf(rec(KVT_MARKER, 0, 1, 0, 0), 3, -1) == KVSIM_RULE_SIZE_MARKER);
    CHECK(ruleOf(rec(KVT_STORE, 0, 8, 0, 1), 3, -1) == KVSIM_RULE_FLAGS_ACCESS);
    CHECK(ruleOf(rec(KVT_MARKER, 0, 0, 0, KVT_NUM_MARKERS), 3, -1) == KVSIM_RULE_FLAGS_MARKER);
    CHECK(ruleOf(rec(KVT_MARKER, 0, 0, 1, 0), 3, -1) == KVSIM_RULE_DEP_MARKER);
    CHECK(ruleOf(rec(KVT_LOAD, UINT64_MAX - 6, 8, 0, 0), 3, -1) == KVSIM_RULE_ADDR_WRAP);
    CHECK(ruleOf(rec(KVT_LOAD, UINT64_MAX - 7, 8, 0, 0), 3, -1) == -1);
    kvtRecord tagged = rec(KVT_LOAD, 0, 8, 0, 0);
    tagged.tag = 3;
    CHECK(ruleOf(tagged, 3, 3) == KVSIM_RULE_TAG);
    CHECK(ruleOf(tagged, 3, 4) == -1);
    CHECK(ruleOf(rec(KVT_LOAD, 0, 8, 4, 0), 3, -1) == KVSIM_RULE_DEP_BEFORE);
    CHECK(ruleOf(rec(KVT_LOAD, 0, 8, 3, 0), 3, -1) == -1);
    CHECK(ruleOf(rec(KVT_MARKER, 0, 0, 0, KVT_MARK_WARMUP_END), 3, -1) == KVSIM_RULE_WARMUP);

    /* across calls, and past the bitmap's first growth: loads and stores alternate,
     * a dep of 1 from a store names a load, one of 2 names a store */
    kvsimValidator *v = kvsimValidatorCreate(-1, -1, KVT_NUM_MARKERS);
    enum { N = 100000 };
    kvtRecord *r = calloc(N, sizeof *r);
    for (uint32_t i = 0; i < N; i++)
        r[i] = rec(i % 2 ? KVT_STORE : KVT_LOAD, 64 * (uint64_t)i, 8, i % 2, 0);
    kvsimRecordError e;
    CHECK(kvsimValidate(v, r, N, &e) == 0);
    CHECK(kvsimValidate(v, r, N, &e) == 0);
    CHECK(kvsimValidatorRecords(v) == 2 * N);
    kvtRecord bad[2] = {rec(KVT_MARKER, 0, 0, 0, KVT_MARK_WARMUP_BEGIN), rec(KVT_STORE, 0, 8, 2, 0)};
    CHECK(kvsimValidate(v, bad, 2, &e) == 1 && e.index == 1 && e.rule == KVSIM_RULE_DEP_NOT_LOAD &&
          e.named == 2 * N - 1);
    kvtRecord warm[2] = {rec(KVT_MARKER, 0, 0, 0, KVT_MARK_WARMUP_BEGIN),
                         rec(KVT_MARKER, 0, 0, 0, KVT_MARK_WARMUP_END)};
    CHECK(kvsimValidate(v, warm, 1, &e) == 0);
    CHECK(kvsimValidate(v, warm, 1, &e) == 1 && e.rule == KVSIM_RULE_WARMUP);
    CHECK(kvsimValidate(v, warm + 1, 1, &e) == 0);
    free(r);
    kvsimValidatorFree(v);

    /* the dep window: a dep of exactly KVT_DEP_CHECK_WINDOW is checked, a longer
     * one is not; the memory stays as created; a refused array leaves no trace */
    enum { W = KVT_DEP_CHECK_WINDOW };
    v = kvsimValidatorCreate(-1, -1, KVT_NUM_MARKERS);
    const size_t bytes = kvsimValidatorBytes(v);
    r = calloc(W + 2, sizeof *r);
    r[0] = rec(KVT_STORE, 0, 8, 0, 0); /* trace record 0: a store */
    for (uint32_t i = 1; i < W + 2; i++) r[i] = rec(KVT_LOAD, 64 * (uint64_t)i, 8, 0, 0);
    CHECK(kvsimValidate(v, r, W, &e) == 0); /* records 0 .. W-1 */
    kvtRecord far[1] = {rec(KVT_LOAD, 0, 8, W, 0)}; /* record W names record 0 */
    CHECK(kvsimValidate(v, far, 1, &e) == 1 && e.rule == KVSIM_RULE_DEP_NOT_LOAD && e.named == 0);
    /* a refused array whose first records would overwrite record 0's bit */
    kvtRecord refused[2] = {rec(KVT_LOAD, 0, 8, 0, 0), rec(7, 0, 8, 0, 0)};
    CHECK(kvsimValidate(v, refused, 2, &e) == 1 && e.rule == KVSIM_RULE_KIND);
    CHECK(kvsimValidate(v, far, 1, &e) == 1 && e.rule == KVSIM_RULE_DEP_NOT_LOAD);
    kvtRecord past[2] = {rec(KVT_LOAD, 0, 8, 0, 0), rec(KVT_LOAD, 0, 8, W + 1, 0)};
    CHECK(kvsimValidate(v, past, 2, &e) == 0); /* record W+1 names record 0: not checked */
    for (int k = 0; k < 8; k++) CHECK(kvsimValidate(v, r + 1, W + 1, &e) == 0);
    CHECK(kvsimValidatorRecords(v) == (uint64_t)W + 2 + 8ull * (W + 1));
    CHECK(kvsimValidatorBytes(v) == bytes && bytes < W / 8 + 256);
    free(r);
    kvsimValidatorFree(v);

    if (failures) fprintf(stderr, "test_decode: %d failures\n", failures);
    else printf("test_decode: ok\n");
    return failures != 0;
}
