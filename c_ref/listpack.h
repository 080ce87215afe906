/*
 * listpack.h -- the listpack encoding of small hashes and small sorted sets
 * (layout and conventions in listpack.c).
 */
#ifndef KS_LISTPACK_H
#define KS_LISTPACK_H

#include <stddef.h>
#include <stdint.h>

#include "emit.h"
#include "object.h"

#define KS_LISTPACK_HDR 6 /* total bytes u32 + element count u16 */
#define OBJ_ENCODING_LISTPACK 11 /* both servers: a hash or sorted set kept as a listpack */

uint32_t ksLpTotal(const uint8_t *lp);
uint16_t ksLpCount(const uint8_t *lp);
void ksLpSetHeader(uint8_t *lp, uint32_t total, uint16_t count);
/* Bytes of an element of len bytes: its header, the bytes, its back length. */
size_t ksLpHdrBytes(size_t len);
size_t ksLpBacklenBytes(size_t l);
size_t ksLpElementBytes(size_t len);
/* Encode an element of len bytes at p (ksLpElementBytes(len) bytes). */
void ksLpWriteElement(uint8_t *p, const void *s, size_t len);
/* Length and data of the element at p, recording the read of its header. */
const uint8_t *ksLpGet(const uint8_t *p, size_t *len, ksLoadId dep);
/* A new empty listpack (recorded as a store). */
uint8_t *ksLpNew(ksKeyspace *ks);
/* The header read (lpBytes, lpFirst): the load a scan depends on. */
ksLoadId ksLpLoadHeader(const uint8_t *lp, ksLoadId dep);
/* lpFind(lp, lpFirst(lp), s, 1): the pair whose first element is s, or NULL. */
uint8_t *ksLpFindPair(uint8_t *lp, const char *s, size_t len, ksLoadId dep);
/* lp_realloc to size bytes; a move copies (and records) the first `keep`. */
uint8_t *ksLpResize(ksKeyspace *ks, uint8_t *lp, size_t size, size_t keep);
/* Replace old_bytes at offset off by new_bytes from src (encoded elements),
 * moving the tail and adjusting the count by count_delta; the listpack may move. */
uint8_t *ksLpSplice(ksKeyspace *ks, uint8_t *lp, size_t off, size_t old_bytes, const uint8_t *src,
                    size_t new_bytes, int count_delta);

#endif /* KS_LISTPACK_H */
