/*
 * sds.h -- the subset of Valkey/Redis "simple dynamic strings" the keyspace
 * needs: the header types and their sizes, reading the length, and writing an
 * sds into caller-provided memory (an arena block or the inside of an object).
 *
 *   sdshdr5:  [flags: 3 type bits | 5 len bits] buf...\0        (len < 32)
 *   sdshdr8:  [len u8][alloc u8][flags] buf...\0                 (len <= 251)
 *   sdshdr16: [len u16][alloc u16][flags] buf...\0
 *   sdshdr32: [len u32][alloc u32][flags] buf...\0
 *
 * An `sds` points at buf; the flags byte is s[-1].  Every header size is odd.
 * Only what the keyspace uses is here: no growth, no sdshdr64.
 */
#ifndef KS_SDS_H
#define KS_SDS_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef char *sds;

#define SDS_TYPE_5 0
#define SDS_TYPE_8 1
#define SDS_TYPE_16 2
#define SDS_TYPE_32 3
#define SDS_TYPE_MASK 7
#define SDS_TYPE_BITS 3

static inline int sdsReqType(size_t len) {
    if (len < 32) return SDS_TYPE_5;
    if (len <= 0xff - 4) return SDS_TYPE_8;
    if (len <= 0xffff - 6) return SDS_TYPE_16;
    return SDS_TYPE_32;
}

/* Type for a string that must carry an alloc field (values: sdshdr8 minimum). */
static inline int sdsReqTypeNo5(size_t len) {
    int t = sdsReqType(len);
    return t == SDS_TYPE_5 ? SDS_TYPE_8 : t;
}

static inline size_t sdsHdrSize(int type) {
    switch (type) {
    case SDS_TYPE_5: return 1;
    case SDS_TYPE_8: return 3;
    case SDS_TYPE_16: return 5;
    default: return 9;
    }
}

static inline size_t sdslen(const char *s) {
    uint8_t flags = (uint8_t)s[-1];
    switch (flags & SDS_TYPE_MASK) {
    case SDS_TYPE_5: return flags >> SDS_TYPE_BITS;
    case SDS_TYPE_8: return (uint8_t)s[-3];
    case SDS_TYPE_16: {
        uint16_t l;
        memcpy(&l, s - 5, 2);
        return l;
    }
    default: {
        uint32_t l;
        memcpy(&l, s - 9, 4);
        return l;
    }
    }
}

/* sds.c sdsalloc: the bytes the string may hold (its header's alloc; a type-5 string: its length). */
static inline size_t sdsalloc(const char *s) {
    uint8_t flags = (uint8_t)s[-1];
    switch (flags & SDS_TYPE_MASK) {
    case SDS_TYPE_5: return flags >> SDS_TYPE_BITS;
    case SDS_TYPE_8: return (uint8_t)s[-2];
    case SDS_TYPE_16: {
        uint16_t a;
        memcpy(&a, s - 3, 2);
        return a;
    }
    default: {
        uint32_t a;
        memcpy(&a, s - 5, 4);
        return a;
    }
    }
}

/* Total bytes of an sds of `type` holding len bytes (header + len + NUL). */
static inline size_t sdsSize(int type, size_t len) { return sdsHdrSize(type) + len + 1; }

/* The header of an sds of `type` and length len at mem (alloc: alloc_room, at least
 * len); returns the sds (mem + header size), its bytes and NUL not written. */
static inline sds sdsHeaderAt(void *mem, int type, size_t len, size_t alloc_room) {
    uint8_t *m = mem;
    size_t hs = sdsHdrSize(type);
    sds s = (sds)(m + hs);
    if (alloc_room < len) alloc_room = len;
    switch (type) {
    case SDS_TYPE_5: m[0] = (uint8_t)(SDS_TYPE_5 | (len << SDS_TYPE_BITS)); break;
    case SDS_TYPE_8:
        m[0] = (uint8_t)len;
        m[1] = (uint8_t)(alloc_room > 0xff ? 0xff : alloc_room);
        m[2] = SDS_TYPE_8;
        break;
    case SDS_TYPE_16: {
        uint16_t l = (uint16_t)len, a = (uint16_t)(alloc_room > 0xffff ? 0xffff : alloc_room);
        memcpy(m, &l, 2);
        memcpy(m + 2, &a, 2);
        m[4] = SDS_TYPE_16;
        break;
    }
    default: {
        uint32_t l = (uint32_t)len, a = (uint32_t)alloc_room;
        memcpy(m, &l, 4);
        memcpy(m + 4, &a, 4);
        m[8] = SDS_TYPE_32;
        break;
    }
    }
    return s;
}

/* Write an sds of `type` at mem (which has room for sdsSize(type,len), or
 * `alloc_room` bytes of buf if larger), copying len bytes of init.  Returns the
 * sds (mem + header size). */
static inline sds sdsWriteAt(void *mem, int type, const void *init, size_t len, size_t alloc_room) {
    sds s = sdsHeaderAt(mem, type, len, alloc_room);
    if (len) memcpy(s, init, len);
    s[len] = '\0';
    return s;
}

/* sdsnewlen(SDS_NOINIT, len) at mem: the header and the NUL; the len bytes are the
 * caller's to write (a snapshot load reads them in). */
static inline sds sdsNoInitAt(void *mem, int type, size_t len, size_t alloc_room) {
    sds s = sdsHeaderAt(mem, type, len, alloc_room);
    s[len] = '\0';
    return s;
}

/* Start of the allocation holding s. */
static inline void *sdsAllocPtr(const char *s) {
    return (void *)(s - sdsHdrSize(((uint8_t)s[-1]) & SDS_TYPE_MASK));
}

#endif /* KS_SDS_H */
