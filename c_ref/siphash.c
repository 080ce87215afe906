/*
 * siphash.c -- SipHash-1-2 (1 compression round, 2 finalization rounds),
 * 64-bit output, 128-bit key: the keyspace hash of Valkey and Redis.
 *
 * Credits: Jean-Philippe Aumasson and Daniel J. Bernstein, "SipHash: a fast
 * short-input PRF" (2012).  Valkey/Redis use the 1-2 round variant ("We use
 * SipHash 1-2", siphash.c).  Written from the paper, not copied.
 *
 * ksSiphashNocase is the case-insensitive variant (siphash.c siphash_nocase): every byte
 * lowered as it is loaded, for the server's command table (dictSdsCaseHash).
 */
#include "siphash.h"

#include <string.h>

#define ROTL(x, b) (uint64_t)(((x) << (b)) | ((x) >> (64 - (b))))

#define SIPROUND                                                                                   \
    do {                                                                                           \
        v0 += v1;                                                                                  \
        v1 = ROTL(v1, 13);                                                                         \
        v1 ^= v0;                                                                                  \
        v0 = ROTL(v0, 32);                                                                         \
        v2 += v3;                                                                                  \
        v3 = ROTL(v3, 16);                                                                         \
        v3 ^= v2;                                                                                  \
        v0 += v3;                                                                                  \
        v3 = ROTL(v3, 21);                                                                         \
        v3 ^= v0;                                                                                  \
        v2 += v1;                                                                                  \
        v1 = ROTL(v1, 17);                                                                         \
        v1 ^= v2;                                                                                  \
        v2 = ROTL(v2, 32);                                                                         \
    } while (0)

static inline uint64_t load64le(const uint8_t *p) {
    uint64_t v;
    memcpy(&v, p, 8); /* little-endian host (asserted in emit.c) */
    return v;
}

/* siphash.c siptlw: an ASCII letter lowered (the case-insensitive variant's loads). */
static inline uint8_t siptlw(uint8_t c) { return (c >= 'A' && c <= 'Z') ? (uint8_t)(c + ('a' - 'A')) : c; }

/* SipHash-1-2; `nocase` (a constant) lowers every byte as it is loaded (siphash_nocase). */
static inline __attribute__((always_inline)) uint64_t sip12(const uint8_t *p, size_t inlen, const uint8_t k[16],
                                                            const int nocase) {
    uint64_t k0 = load64le(k), k1 = load64le(k + 8);
    uint64_t v0 = 0x736f6d6570736575ULL ^ k0;
    uint64_t v1 = 0x646f72616e646f6dULL ^ k1;
    uint64_t v2 = 0x6c7967656e657261ULL ^ k0;
    uint64_t v3 = 0x7465646279746573ULL ^ k1;
    uint64_t b = ((uint64_t)inlen) << 56;
    const uint8_t *end = p + (inlen - (inlen % 8));
    for (; p != end; p += 8) {
        uint64_t m;
        if (nocase) { /* U8TO64_LE_NOCASE */
            m = 0;
            for (int i = 0; i < 8; i++) m |= (uint64_t)siptlw(p[i]) << (8 * i);
        } else {
            m = load64le(p);
        }
        v3 ^= m;
        SIPROUND; /* c = 1 */
        v0 ^= m;
    }
#define SIPB(i) ((uint64_t)(nocase ? siptlw(p[i]) : p[i]))
    switch (inlen & 7) {
    case 7: b |= SIPB(6) << 48; /* fall through */
    case 6: b |= SIPB(5) << 40; /* fall through */
    case 5: b |= SIPB(4) << 32; /* fall through */
    case 4: b |= SIPB(3) << 24; /* fall through */
    case 3: b |= SIPB(2) << 16; /* fall through */
    case 2: b |= SIPB(1) << 8;  /* fall through */
    case 1: b |= SIPB(0); break;
    case 0: break;
    }
#undef SIPB
    v3 ^= b;
    SIPROUND;
    v0 ^= b;
    v2 ^= 0xff;
    SIPROUND; /* d = 2 */
    SIPROUND;
    return v0 ^ v1 ^ v2 ^ v3;
}

uint64_t ksSiphash(const void *in, size_t inlen, const uint8_t k[16]) { return sip12(in, inlen, k, 0); }

uint64_t ksSiphashNocase(const void *in, size_t inlen, const uint8_t k[16]) { return sip12(in, inlen, k, 1); }

/* The cost model: the instructions of one call, following the compiled code's structure
 * (gcc -O2, x86-64; both variants alike):
 *
 *   SIPHASH_CALL         entry (the key and state set-up), the tail switch's dispatch, the
 *                        last block's round, the two finalisation rounds, return: every call
 *   SIPHASH_WORDS_ENTRY  once if there is a whole 8-byte word (the block loop's entry)
 *   SIPHASH_WORD         per 8-byte word: its load and one compression round
 *   SIPHASH_BYTE_FIRST   the tail's first byte (case 1, no shift), SIPHASH_BYTE per later one
 *
 * SIPHASH_NOCASE_* are the same for ksSiphashNocase, whose every byte is lowered as loaded
 * (a byte at a time, in the block loop too).  Fitted by least squares on the relative error to
 * callgrind's count of each function itself (inclusive, the caller's loop not counted) at every
 * length 0-64 and at longer lengths to 4 KiB (results/crc64-cost-callgrind.json,
 * `python -m kvsim.experiments.crc64_cost`; per length the model's ratio to callgrind, and the
 * fit).  No branch depends on the bytes (the lowering is a conditional move), so the count is a
 * function of the length alone.  sim/calibrate.py siphash_cost mirrors these functions
 * (checked by the tests against `kvsim-calibrate sipcost`). */
#define SIPHASH_CALL 68
#define SIPHASH_WORDS_ENTRY 1
#define SIPHASH_WORD 20
#define SIPHASH_BYTE_FIRST 2
#define SIPHASH_BYTE 3
#define SIPHASH_NOCASE_CALL 82
#define SIPHASH_NOCASE_WORDS_ENTRY 1
#define SIPHASH_NOCASE_WORD 118
#define SIPHASH_NOCASE_BYTE_FIRST 7
#define SIPHASH_NOCASE_BYTE 8

#define SIPHASH_COST(len, V)                                                                       \
    ((uint64_t)V##CALL + ((len) >= 8 ? V##WORDS_ENTRY + (uint64_t)((len) / 8) * V##WORD : 0) +    \
     ((len) % 8 ? V##BYTE_FIRST + (uint64_t)((len) % 8 - 1) * V##BYTE : 0))

uint64_t ksSiphashCost(size_t len) { return SIPHASH_COST(len, SIPHASH_); }

uint64_t ksSiphashNocaseCost(size_t len) { return SIPHASH_COST(len, SIPHASH_NOCASE_); }

void ksSiphashSeed(uint64_t seed, uint8_t k[16]) {
    /* splitmix64 twice: the 16-byte key is a pure function of the seed. */
    for (int i = 0; i < 2; i++) {
        uint64_t z = (seed += 0x9E3779B97F4A7C15ULL);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
        z ^= z >> 31;
        memcpy(k + 8 * i, &z, 8);
    }
}
