/*
 * listpack.c -- the listpack encoding shared by the small hash and the small
 * sorted set (Valkey and Redis listpack.c, reduced to what those two use).
 *
 *   lp -> +-----------+---------+----------------------------+------+
 *         | total u32 | num u16 | e1 e2 e3 ...               | 0xFF |
 *         +-----------+---------+----------------------------+------+
 *   element: [enc: 1 B len < 64 | 2 B len < 4096 | 5 B] [bytes] [backlen 1..5 B]
 *
 * Both types keep pairs (hash: field value; sorted set: member score) and look
 * a pair up by its first element (ksLpFindPair: lpFind with skip 1): a linear
 * scan of one contiguous block.  Writes splice (lpInsert / lpReplace /
 * lpDeleteRange), reallocating; every read and write is recorded under the
 * listpack sites (hash.lp, hash.store: the sites predate the sorted set).
 *
 * Deviation (both types): elements are always strings (a listpack stores
 * integer-looking strings as integers: fewer bytes, the same scan).
 *
 * Conventions: public ksLp...; the keyspace whose callbacks run is ksCur.
 */
#include "listpack.h"

#include <string.h>

#include "keyspace.h"


uint32_t ksLpTotal(const uint8_t *lp) {
    uint32_t t;
    memcpy(&t, lp, 4);
    return t;
}

uint16_t ksLpCount(const uint8_t *lp) {
    uint16_t n;
    memcpy(&n, lp + 4, 2);
    return n;
}

void ksLpSetHeader(uint8_t *lp, uint32_t total, uint16_t count) {
    memcpy(lp, &total, 4);
    memcpy(lp + 4, &count, 2);
}

size_t ksLpHdrBytes(size_t len) { return len < 64 ? 1 : len < 4096 ? 2 : 5; }

/* lpEncodeBacklenBytes: bytes of the back-length field for an element of l bytes. */
size_t ksLpBacklenBytes(size_t l) {
    return l <= 127 ? 1 : l < 16383 ? 2 : l < 2097151 ? 3 : l < 268435455 ? 4 : 5;
}

size_t ksLpElementBytes(size_t len) {
    size_t l = ksLpHdrBytes(len) + len;
    return l + ksLpBacklenBytes(l);
}

void ksLpWriteElement(uint8_t *p, const void *s, size_t len) {
    size_t h = ksLpHdrBytes(len);
    if (h == 1) {
        p[0] = (uint8_t)(0x80 | len);
    } else if (h == 2) {
        p[0] = (uint8_t)(0xE0 | (len >> 8));
        p[1] = (uint8_t)(len & 0xff);
    } else {
        uint32_t l = (uint32_t)len;
        p[0] = 0xF0;
        memcpy(p + 1, &l, 4);
    }
    memcpy(p + h, s, len);
    size_t l = h + len, b = ksLpBacklenBytes(l);
    for (size_t i = 0; i < b; i++) /* lpEncodeBacklen: 7 bits a byte, the high bit on all but the first */
        p[h + len + i] = (uint8_t)(((l >> (7 * (b - 1 - i))) & 127) | (i ? 128 : 0));
}

/* Length and data of the element at p (reading its header: one record). */
const uint8_t *ksLpGet(const uint8_t *p, size_t *len, ksLoadId dep) {
    size_t h;
    if ((p[0] & 0xC0) == 0x80) {
        h = 1;
        *len = p[0] & 0x3f;
    } else if ((p[0] & 0xF0) == 0xE0) {
        h = 2;
        *len = ((size_t)(p[0] & 0x0f) << 8) | p[1];
    } else {
        uint32_t l;
        memcpy(&l, p + 1, 4);
        h = 5;
        *len = l;
    }
    (void)KS_LOAD(p, h, KVT_TAG_VALUE, KS_SITE_HASH_LP, dep);
    return p + h;
}

uint8_t *ksLpNew(ksKeyspace *ks) {
    uint8_t *lp = ksArenaAlloc(ks->arena, KS_LISTPACK_HDR + 1);
    ksLpSetHeader(lp, KS_LISTPACK_HDR + 1, 0);
    lp[KS_LISTPACK_HDR] = 0xFF;
    KS_STORE(lp, KS_LISTPACK_HDR + 1, KVT_TAG_VALUE, KS_SITE_HASH_STORE, 0);
    return lp;
}

/* The listpack's header read (lpBytes, lpFirst): the load the scan depends on. */
ksLoadId ksLpLoadHeader(const uint8_t *lp, ksLoadId dep) {
    return KS_LOAD(lp, KS_LISTPACK_HDR, KVT_TAG_VALUE, KS_SITE_HASH_LP, dep);
}

/* lpFind(lp, lpFirst(lp), s, 1): the first element of the pair whose first element is s
 * (skipping the second elements), or NULL.
 *
 * Counted work beyond the header loads' site cost (hash.lp): per element the scan's step
 * (decode the length, ksLpElementBytes' header and back-length sizes, the skip flag):
 * KS_LP_SCAN_WORK; per candidate of the field's length the memcmp call (its entry, length
 * dispatch and tail): KS_LP_CMP_WORK + a word per 8 bytes.  Set against callgrind of the
 * native build for listpack hashes of 8-512 fields and sorted sets of 16-128 members
 * (tests/calibrate.sh's listpack lines: trace/callgrind 0.9-1.1). */
#define KS_LP_SCAN_WORK 12
#define KS_LP_CMP_WORK 10
uint8_t *ksLpFindPair(uint8_t *lp, const char *field, size_t flen, ksLoadId dep) {
    KS_ID_VAR(lh) = ksLpLoadHeader(lp, dep);
    uint8_t *p = lp + KS_LISTPACK_HDR;
    int skip = 0;
    while (*p != 0xFF) {
        size_t len;
        KS_WORK(KS_LP_SCAN_WORK);
        const uint8_t *s = ksLpGet(p, &len, lh);
        if (!skip) {
            if (len == flen) {
                KS_WORK_OF(KVT_WORK_COMPARE, KS_LP_CMP_WORK + len / 8);
                (void)KS_LOAD(s, len, KVT_TAG_VALUE, KS_SITE_HASH_LP, lh);
                if (memcmp(s, field, flen) == 0) return p;
            }
            skip = 1;
        } else {
            skip = 0;
        }
        p += ksLpElementBytes(len);
    }
    return NULL;
}

/* lp_realloc: to `size` bytes; a move copies the old bytes (recorded). */
uint8_t *ksLpResize(ksKeyspace *ks, uint8_t *lp, size_t size, size_t keep) {
    uint8_t *n = ksArenaRealloc(ks->arena, lp, size);
    (void)keep;
    if (n != lp) {
        (void)KS_LOAD(lp, keep, KVT_TAG_VALUE, KS_SITE_HASH_LP, 0);
        KS_STORE(n, keep, KVT_TAG_VALUE, KS_SITE_HASH_STORE, 0);
    }
    return n;
}

/* lpInsert's shape for one change: replace `old_bytes` at offset `off` by the
 * elements in `src` (`new_bytes`), moving the tail. */
uint8_t *ksLpSplice(ksKeyspace *ks, uint8_t *lp, size_t off, size_t old_bytes, const uint8_t *src,
                         size_t new_bytes, int count_delta) {
    uint32_t total = ksLpTotal(lp);
    size_t tail = total - off - old_bytes, ntotal = total - old_bytes + new_bytes;
    if (new_bytes > old_bytes) lp = ksLpResize(ks, lp, ntotal, total);
    if (tail && new_bytes != old_bytes) {
        (void)KS_LOAD(lp + off + old_bytes, tail, KVT_TAG_VALUE, KS_SITE_HASH_LP, 0);
        memmove(lp + off + new_bytes, lp + off + old_bytes, tail);
        KS_STORE(lp + off + new_bytes, tail, KVT_TAG_VALUE, KS_SITE_HASH_STORE, 0);
    }
    if (new_bytes) {
        memcpy(lp + off, src, new_bytes);
        KS_STORE(lp + off, new_bytes, KVT_TAG_VALUE, KS_SITE_HASH_STORE, 0);
    }
    if (new_bytes < old_bytes) lp = ksLpResize(ks, lp, ntotal, ntotal);
    ksLpSetHeader(lp, (uint32_t)ntotal, (uint16_t)(ksLpCount(lp) + count_delta));
    KS_STORE(lp, KS_LISTPACK_HDR, KVT_TAG_VALUE, KS_SITE_HASH_STORE, 0);
    return lp;
}
