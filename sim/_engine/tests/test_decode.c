/*
 * test_decode.c -- C test of the trace intake's compiled part (decode.c), run
 * under ASan+UBSan by `make test-sanitize`: the CRC32 check value, the raw
 * codec and its failures, and the record rules on hand-made records, across
 * calls (a dep into an earlier call, warm-up alternation) and past the first
 * growth of the load bitmap, and the check in two parts (kvsimValidateLocal on
 * every array first, then kvsimValidateJoin in order) against the one-part
 * check on random streams cut into random arrays, the byte planes, and the
 * check screened on the planes against the local check.  sim/tests/test_intake.py
 * compares the whole intake with the Python reader; this checks the C under the
 * sanitizers.
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


/* xorshift64*: the streams of the two-part test */
static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint64_t rnd(uint64_t n) {
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return (rng_state * 2685821657736338717ull >> 11) % n;
}

/* A random stream of n records: loads, stores, prefetches and markers with
 * deps near and far, warm-up markers, and about `bad_per_mille` records that
 * break a rule. */
static void randomStream(kvtRecord *r, size_t n, unsigned bad_per_mille) {
    uint16_t wnext = KVT_MARK_WARMUP_BEGIN;
    for (size_t i = 0; i < n; i++) {
        const uint64_t k = rnd(100);
        if (k < 5) {
            uint16_t f = (uint16_t)rnd(KVT_NUM_MARKERS);
            if (rnd(2)) { /* a warm-up marker, in turn */
                f = wnext;
                wnext = wnext == KVT_MARK_WARMUP_BEGIN ? KVT_MARK_WARMUP_END
                                                       : KVT_MARK_WARMUP_BEGIN;
            } else if (f == KVT_MARK_WARMUP_BEGIN || f == KVT_MARK_WARMUP_END) {
                f = KVT_MARK_OP;
            }
            r[i] = rec(KVT_MARKER, rnd(1000), 0, 0, f);
        } else {
            const uint8_t kind = k < 60 ? KVT_LOAD : k < 90 ? KVT_STORE : KVT_PREFETCH;
            uint32_t dep = 0;
            if (rnd(3) == 0 && i > 0) /* some name a load, some do not */
                dep = (uint32_t)(1 + rnd(i < 300 ? i : 300));
            r[i] = rec(kind, 64 * rnd(1 << 20), kind == KVT_PREFETCH ? 1 : 8, dep, 0);
        }
        if (rnd(1000) < bad_per_mille) { /* one broken rule of several kinds */
            switch (rnd(4)) {
            case 0: r[i].kind = 9; break;
            case 1: r[i] = rec(KVT_LOAD, 0, 0, 0, 0); break;
            case 2: r[i] = rec(KVT_MARKER, 0, 0, 0, KVT_MARK_WARMUP_END); break;
            default: r[i] = rec(KVT_STORE, 0, 8, (uint32_t)(i + 1), 0); break;
            }
        }
    }
}

/* Both checks on the stream cut into arrays of random lengths (1..maxlen):
 * the same array refused, the same record, rule and named record, or both
 * accepting the whole stream. */
static void twoParts(const kvtRecord *r, size_t n, size_t maxlen) {
    kvsimValidator *a = kvsimValidatorCreate(-1, -1, KVT_NUM_MARKERS);
    kvsimValidator *b = kvsimValidatorCreate(-1, -1, KVT_NUM_MARKERS);
    size_t cuts[4096], ncut = 0;
    for (size_t at = 0; at < n && ncut < 4095; ncut++) {
        cuts[ncut] = at;
        at += 1 + rnd(maxlen);
        if (at > n) at = n;
    }
    cuts[ncut] = n;
    kvsimChunkCheck *cc = calloc(ncut, sizeof *cc);
    uint64_t **loads = calloc(ncut, sizeof *loads);
    for (size_t c = 0; c < ncut; c++) { /* every local part first: any order is allowed */
        const size_t len = cuts[c + 1] - cuts[c];
        loads[c] = calloc((len + 63) / 64 + 1, sizeof **loads);
        kvsimValidateLocal(b, r + cuts[c], len, cuts[c], loads[c], &cc[c]);
    }
    for (size_t c = 0; c < ncut; c++) {
        kvsimRecordError ea, eb;
        memset(&ea, 0, sizeof ea);
        memset(&eb, 0, sizeof eb);
        const int ra = kvsimValidate(a, r + cuts[c], cuts[c + 1] - cuts[c], &ea);
        const int rb = kvsimValidateJoin(b, r + cuts[c], loads[c], &cc[c], &eb);
        CHECK(ra == rb);
        if (ra != 0 || rb != 0) {
            CHECK(ea.index == eb.index && ea.rule == eb.rule && ea.dep == eb.dep &&
                  ea.named == eb.named);
            break;
        }
        CHECK(kvsimValidatorRecords(a) == kvsimValidatorRecords(b));
    }
    if (kvsimValidatorRecords(b) == n) { /* an array out of turn is refused */
        kvsimRecordError e;
        CHECK(kvsimValidateJoin(b, r, loads[0], &cc[0], &e) == -1);
    }
    for (size_t c = 0; c < ncut; c++) free(loads[c]);
    free(loads);
    free(cc);
    kvsimValidatorFree(a);
    kvsimValidatorFree(b);
}

/* kvsimValidatePlanes against kvsimValidateLocal on the same array: the same
 * records joined, the same load bits and the same check, to the bit. */
static void planesAgree(const kvsimValidator *v, const kvtRecord *r, size_t n, uint64_t base) {
    const size_t words = (n + 63) / 64 + 1;
    uint8_t *pl = calloc(n * 24 + 1, 1);
    kvtRecord *out = calloc(n + 1, sizeof *out);
    uint64_t *la = calloc(words, 8), *lb = calloc(words, 8), *bits = calloc(2 * words, 8);
    kvsimChunkCheck ca, cb;
    memset(&ca, 0xa5, sizeof ca);
    memset(&cb, 0x5a, sizeof cb);
    kvsimPlanesSplit(r, n, pl);
    kvsimValidateLocal(v, r, n, base, la, &ca);
    kvsimValidatePlanes(v, pl, n, base, out, lb, &cb, bits);
    CHECK(n == 0 || memcmp(r, out, n * sizeof *r) == 0);
    CHECK(memcmp(la, lb, (n + 63) / 64 * 8) == 0);
    CHECK(ca.base == cb.base && ca.n == cb.n && ca.bad == cb.bad && ca.join_end == cb.join_end);
    CHECK(ca.bad == n || ca.rule == cb.rule);
    free(pl);
    free(out);
    free(la);
    free(lb);
    free(bits);
}

/* A stream that keeps every rule: randomStream's records, each dep naming a
 * load of the array or, at times, reaching before it. */
static void cleanStream(kvtRecord *r, size_t n) {
    randomStream(r, n, 0);
    for (size_t i = 0; i < n; i++) {
        if (r[i].kind == KVT_MARKER || r[i].dep == 0) continue;
        r[i].dep = 0;
        for (size_t d = 1; d <= i && d < 300; d++)
            if (r[i - d].kind == KVT_LOAD && rnd(4) == 0) {
                r[i].dep = (uint32_t)d;
                break;
            }
        if (r[i].dep == 0 && rnd(64) == 0) r[i].dep = (uint32_t)(i + 1 + rnd(5)); /* before */
    }
}

/* Records that each screen of the planes must turn away or let through: every
 * field at the edge of its rule, at `count` random places. */
static void planesEdges(kvtRecord *r, size_t n, size_t count) {
    for (size_t e = 0; e < count; e++) {
        kvtRecord *x = &r[rnd(n)];
        switch (rnd(12)) {
        case 0: x->addr = UINT64_MAX - rnd(x->size + 2u); break; /* wraps, or just does not */
        case 1: x->addr = (UINT64_MAX << 16) - rnd(3); break;
        case 2: x->tag = (uint8_t)rnd(256); break;
        case 3: x->site = (uint16_t)rnd(65536); break;
        case 4: x->site = (uint16_t)(0x14e + rnd(3) + (rnd(2) ? 0x50 : 0)); break; /* by 0x150 */
        case 5: x->flags = (uint16_t)(rnd(2) << (8 * rnd(2))); break;
        case 6: x->size = (uint16_t)(rnd(3) << (8 * rnd(2))); break;
        case 7: x->kind = (uint8_t)rnd(6); break;
        case 8: x->dep = (uint32_t)rnd(2) << (8 * rnd(4)); break;
        case 9: x->addr = UINT64_MAX - 65535 - rnd(70000); break; /* near 2^64 */
        case 10: x->tag = (uint8_t)(rnd(2) ? 5 : 4); break;
        default: x->size = (uint16_t)(0xffff - rnd(2)); break;
        }
    }
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

    /* byte planes: plane j holds byte j of each record; join inverts split at
     * every length (the vector path takes 16 records at a time, the rest one by one) */
    for (size_t n = 0; n < 70; n += n < 20 ? 1 : 7) {
        kvtRecord *a = calloc(n + 1, sizeof *a), *b = calloc(n + 1, sizeof *b);
        uint8_t *pl = calloc(n * 24 + 1, 1);
        for (size_t i = 0; i < n * 24; i++) ((uint8_t *)a)[i] = (uint8_t)rnd(256);
        kvsimPlanesSplit(a, n, pl);
        for (size_t i = 0; i < n; i++)
            for (size_t j = 0; j < 24; j++) CHECK(pl[j * n + i] == ((uint8_t *)a)[i * 24 + j]);
        kvsimPlanesJoin(pl, n, b);
        CHECK(n == 0 || memcmp(a, b, n * sizeof *a) == 0);
        free(a);
        free(b);
        free(pl);
    }

    /* the planes' screened check is the local check: arrays of every length
     * around the vector steps, headers naming tags and sites or not, bases that
     * let deps reach before the array or not, streams clean and broken */
    {
        enum { PN = 3000 };
        kvtRecord *pr = calloc(PN, sizeof *pr);
        const int64_t bounds[][2] = {{-1, -1}, {5, 0x150}, {256, 65536}, {1, 1}, {0, -1}, {-1, 0},
                                     {255, 65535}};
        for (int t = 0; t < 3000; t++) {
            const size_t n = t < 80 ? (size_t)t : 1 + rnd(PN);
            if (t % 4 == 3) {
                randomStream(pr, n, (unsigned)(t % 9));
            } else { /* clean, then none, one or a few records at the edge of a rule */
                cleanStream(pr, n);
                if (n) planesEdges(pr, n, t % 4 == 0 ? 0 : t % 4 == 1 ? 1 : 1 + rnd(4));
            }
            const int64_t *bd = bounds[t % (sizeof bounds / sizeof *bounds)];
            kvsimValidator *pv = kvsimValidatorCreate(bd[0], bd[1], KVT_NUM_MARKERS);
            planesAgree(pv, pr, n, t % 4 ? 0 : rnd(1 << 21));
            kvsimValidatorFree(pv);
        }
        free(pr);
    }

    /* the check in two parts names the same first bad record as the one-part
     * check, on clean and broken streams, arrays short and long */
    {
        enum { SN = 20000 };
        kvtRecord *sr = calloc(SN, sizeof *sr);
        for (int t = 0; t < 300; t++) {
            randomStream(sr, SN, t % 3 == 0 ? 0 : (unsigned)(t % 7));
            twoParts(sr, SN, t % 2 ? 70 : 5000);
        }
        free(sr);
        /* deps at the window's edge, across arrays */
        sr = calloc(W + 300, sizeof *sr);
        for (size_t i = 0; i < W + 300; i++)
            sr[i] = rec(i % 3 ? KVT_LOAD : KVT_STORE, 64 * (uint64_t)i, 8, 0, 0);
        for (size_t i = W; i < W + 300; i++) sr[i].dep = (uint32_t)(W - 150 + i % 301);
        for (int t = 0; t < 4; t++) twoParts(sr, W + 300, (size_t)W / 3);
        sr[W + 200].dep = W; /* names record 200: a store */
        for (int t = 0; t < 4; t++) twoParts(sr, W + 300, (size_t)W / 3);
        free(sr);
    }

    if (failures) fprintf(stderr, "test_decode: %d failures\n", failures);
    else printf("test_decode: ok\n");
    return failures != 0;
}
