/*
 * crc64.c -- the RDB checksum: CRC-64 with the Jones polynomial, as Valkey's
 * `src/crc64.c` (crc64_init / crc64 over crcspeed's little-endian slice-by-8).
 *
 * Parameters (Valkey `src/crc64.c`): width 64, poly 0xad93d23594c935a9,
 * reflected in and out (the table uses the reflected polynomial
 * 0x95ac9329ac4bc9b5), init 0, no final xor; check value of "123456789":
 * 0xe9c6d914c4b8d9ca.  The running sum is the previous result (crc64(crc, p,
 * n) continues a sum, as rioGenericUpdateChecksum does).
 *
 * Conventions: public ksCrc64; internals static.
 */
#include <stdint.h>
#include <string.h>

#include "keyspace.h"

#define CRC64_REFLECTED_POLY 0x95ac9329ac4bc9b5ULL

static uint64_t crc64_table[8][256];
static int crc64_ready;

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

/* crcspeed64little: bytes one by one up to 8-byte alignment, then 8 at a
 * time, then the tail. */
uint64_t ksCrc64(uint64_t crc, const void *buf, size_t len) {
    if (!crc64_ready) crc64Init();
    const uint8_t *p = buf;
    while (len && ((uintptr_t)p & 7)) {
        crc = crc64_table[0][(crc ^ *p++) & 0xff] ^ (crc >> 8);
        len--;
    }
    while (len >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        crc ^= w;
        crc = crc64_table[7][crc & 0xff] ^ crc64_table[6][(crc >> 8) & 0xff] ^
              crc64_table[5][(crc >> 16) & 0xff] ^ crc64_table[4][(crc >> 24) & 0xff] ^
              crc64_table[3][(crc >> 32) & 0xff] ^ crc64_table[2][(crc >> 40) & 0xff] ^
              crc64_table[1][(crc >> 48) & 0xff] ^ crc64_table[0][crc >> 56];
        p += 8;
        len -= 8;
    }
    while (len--) crc = crc64_table[0][(crc ^ *p++) & 0xff] ^ (crc >> 8);
    return crc;
}
