/*
 * reply.h -- a server client's pending reply: the fixed buffer and the reply blocks
 * (reply.c explains the design).
 */
#ifndef KS_REPLY_H
#define KS_REPLY_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "keyspace.h"

#define KS_PROTO_REPLY_CHUNK_BYTES (16 * 1024)   /* server.h PROTO_REPLY_CHUNK_BYTES */
#define KS_NET_MAX_WRITES_PER_EVENT (1024 * 64)  /* server.h NET_MAX_WRITES_PER_EVENT */

/* networking.c clientReplyBlock: a block of the reply list (its size taken from the
 * allocator's usable size), `used` bytes of it filled. */
typedef struct ksReplyBlock {
    size_t size, used;
    uint8_t buf[];
} ksReplyBlock;

/* _addReplyToBufferOrList's copy: the buffer (c->rbuf, c->rcap bytes, never grown) while the
 * reply list is empty, the rest into the list's tail block and new blocks of at least
 * KS_PROTO_REPLY_CHUNK_BYTES (zmalloc_usable). */
void ksReplyAddProto(ksClient *c, const void *s, size_t len);
/* The bytes of the pending reply, sent ones included: the buffer's and every block's. */
size_t ksReplyLen(const ksClient *c);
/* writevToClient's gather: the unsent bytes as at most `max` pieces, up to about
 * KS_NET_MAX_WRITES_PER_EVENT bytes; their count, *bytes their total. */
int ksReplyIov(const ksClient *c, struct iovec *iov, int max, size_t *bytes);
/* _postWriteToClient: `n` bytes were written; a sent buffer is reset (bufpos 0), every
 * block written in full leaves the list and is freed (listDelNode, zfree). */
void ksReplyWritten(ksClient *c, size_t n);
/* The reply as if written and then everything from byte `at` on taken out: a deferred
 * length (KEYS) put in front of the replies after `at` (see reply.c). */
void ksReplyInsert(ksClient *c, size_t at, const void *s, size_t len);
/* Every block freed, the buffer emptied (freeClient; ksExecute after copying it out). */
void ksReplyRelease(ksClient *c);
/* The pending reply's bytes copied to out (ksReplyLen(c) bytes). */
void ksReplyCopyOut(const ksClient *c, uint8_t *out);
/* Test hook: reply blocks allocated and freed since the process started. */
void ksReplyBlockCounts(uint64_t *allocated, uint64_t *freed);

#endif
