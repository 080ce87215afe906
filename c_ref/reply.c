/*
 * reply.c -- a server client's pending reply as Valkey keeps it: a fixed buffer, then a
 * list of reply blocks (networking.c _addReplyToBuffer, _addReplyProtoToList,
 * writevToClient, _postWriteToClient).
 *
 *   c->rbuf (c->buf): allocated with the client, PROTO_REPLY_CHUNK_BYTES asked, its usable
 *   size kept (c->rcap: 16392 bytes from glibc); never grown, reused after every write
 *   +----------------------------- rcap -----------------------------+
 *   | reply bytes ... (rlen = bufpos)                   |   free     |
 *   +----------------------------------------------------------------+
 *   c->reply (a list, once the buffer is full; nothing goes to the buffer while it has a node)
 *     [size|used| bytes ...... ] -> [size|used| bytes ..... ] -> ...
 *     each block zmalloc_usable(max(len, PROTO_REPLY_CHUNK_BYTES) + header), its size the
 *     usable size less the header; a piece fills the tail block first, the rest opens one
 *     new block that holds all of it
 *
 * Writing (server.c): the buffer alone goes by write(2); with blocks, writevToClient
 * gathers the buffer's unsent bytes and the blocks' (up to NET_MAX_WRITES_PER_EVENT, 64 KiB)
 * into one writev(2).  _postWriteToClient then walks the bytes written: a buffer sent in
 * full is reset (bufpos 0), every block sent in full leaves the list and is freed
 * (listDelNode: the block, then its list node), a partly sent one keeps c->sentlen.  So an
 * MGET reply of 100 256-byte values (26,406 bytes) allocates one 16 KiB block and frees it
 * after its write, on every request, as Valkey does.
 *
 * Why a file: the reply's layout is one policy (where a piece goes, what a write leaves);
 * server.c writes, callpath.c decides what a reply's pieces are, resp.c formats them.  The
 * in-memory workloads never come here: their reply buffer grows (resp.c ksReplyRaw) and
 * their traces do not change.
 *
 * Tracing: the pieces' stores into the buffer and the blocks are tagged reply_buf at the
 * site resp.reply (as ksReplyRaw's); the blocks and their list nodes are zmalloc'd and
 * zfree'd through callpath.c's zmalloc (libc_alloc.h records the allocator's accesses, the
 * sites alloc.*).  Left out: glibc's work beyond its tcache path for a 16 KiB request (a
 * large request first consolidates the fast bins, malloc_consolidate), which the
 * allocator's measured instruction counts (KS_ZMALLOC_WORK) do not carry.
 *
 * A deferred length (KEYS: setDeferredArrayLen) is put in front of its elements by
 * ksReplyInsert: the elements copied out, the reply cut back, the header and the elements
 * appended again.  Valkey leaves an empty placeholder node in the list and fills it (or the
 * next block's head room); the bytes sent are the same.
 *
 * Conventions: public ksReply...; static internals without prefix.
 */
#include "reply.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "adlist.h"
#include "callpath.h"
#include "emit.h"

static_assert(sizeof(ksReplyBlock) == 16, "clientReplyBlock's header: size and used");

static uint64_t blocks_allocated, blocks_freed;

/* networking.c _addReplyToBuffer: nothing while the list has a node, else what fits. */
static size_t addReplyToBuffer(ksClient *c, const uint8_t *s, size_t len) {
    if (c->reply.len > 0) return 0;
    size_t available = c->rcap - c->rlen;
    size_t n = len > available ? available : len;
    if (!n) return 0;
    memcpy(c->rbuf + c->rlen, s, n);
    KS_STORE(c->rbuf + c->rlen, n, KVT_TAG_REPLY_BUF, KS_SITE_RESP_REPLY, 0);
    c->rlen += n;
    return n;
}

/* networking.c _addReplyProtoToList: the tail block's room first, then one new block. */
static void addReplyProtoToList(ksClient *c, const uint8_t *s, size_t len) {
    ksReplyBlock *tail = c->reply.tail ? c->reply.tail->value : NULL;
    if (tail) {
        size_t avail = tail->size - tail->used;
        size_t copy = avail >= len ? len : avail;
        if (copy) {
            memcpy(tail->buf + tail->used, s, copy);
            KS_STORE(tail->buf + tail->used, copy, KVT_TAG_REPLY_BUF, KS_SITE_RESP_REPLY, 0);
        }
        tail->used += copy;
        s += copy;
        len -= copy;
    }
    if (!len) return;
    size_t usable, size = len < KS_PROTO_REPLY_CHUNK_BYTES ? KS_PROTO_REPLY_CHUNK_BYTES : len;
    tail = ksZmallocUsable(size + sizeof(ksReplyBlock), &usable);
    tail->size = usable - sizeof(ksReplyBlock); /* the allocation's internal fragmentation */
    tail->used = len;
    memcpy(tail->buf, s, len);
    KS_STORE(tail->buf, len, KVT_TAG_REPLY_BUF, KS_SITE_RESP_REPLY, 0);
    listAddNodeTail(&c->reply, tail);
    c->reply_bytes += (long long)tail->size;
    blocks_allocated++;
}

void ksReplyAddProto(ksClient *c, const void *s, size_t len) {
    size_t n = addReplyToBuffer(c, s, len);
    if (len > n) addReplyProtoToList(c, (const uint8_t *)s + n, len - n);
}

size_t ksReplyLen(const ksClient *c) {
    size_t n = c->rlen;
    for (const ksListNode *ln = c->reply.head; ln; ln = ln->next) n += ((const ksReplyBlock *)ln->value)->used;
    return n;
}

int ksReplyIov(const ksClient *c, struct iovec *iov, int max, size_t *bytes) {
    int cnt = 0;
    size_t total = 0;
    if (c->rlen > 0 && max > 0) {
        iov[cnt].iov_base = c->rbuf + c->sentlen;
        iov[cnt].iov_len = c->rlen - c->sentlen;
        total += iov[cnt++].iov_len;
    }
    /* the first block may be partly sent: its offset is c->sentlen when the buffer is empty */
    size_t sentlen = c->rlen > 0 ? 0 : c->sentlen;
    for (const ksListNode *ln = c->reply.head; ln && cnt < max && total < KS_NET_MAX_WRITES_PER_EVENT;
         ln = ln->next) {
        const ksReplyBlock *b = ln->value;
        if (b->used == 0) { /* empty node, skip over it */
            sentlen = 0;
            continue;
        }
        iov[cnt].iov_base = (void *)(b->buf + sentlen);
        iov[cnt].iov_len = b->used - sentlen;
        total += iov[cnt++].iov_len;
        sentlen = 0;
    }
    *bytes = total;
    return cnt;
}

/* listDelNode with freeClientReplyValue: the block zfree'd, then its node. */
static void delBlock(ksClient *c, ksListNode *ln) {
    ksReplyBlock *b = ln->value;
    c->reply_bytes -= (long long)b->size;
    ksZfree(b);
    listDelNode(&c->reply, ln);
    blocks_freed++;
}

void ksReplyWritten(ksClient *c, size_t n) {
    size_t remaining = n;
    if (c->rlen > 0) { /* the buffer first */
        size_t buf_len = c->rlen - c->sentlen;
        c->sentlen += n;
        if (n >= buf_len) c->rlen = c->sentlen = 0;
        remaining = n > buf_len ? n - buf_len : 0;
    }
    while (remaining > 0 && c->reply.head) {
        ksReplyBlock *b = c->reply.head->value;
        if (remaining < b->used - c->sentlen) {
            c->sentlen += remaining;
            break;
        }
        remaining -= b->used - c->sentlen;
        delBlock(c, c->reply.head);
        c->sentlen = 0;
    }
}

void ksReplyCopyOut(const ksClient *c, uint8_t *out) {
    if (c->rlen) memcpy(out, c->rbuf, c->rlen);
    out += c->rlen;
    for (const ksListNode *ln = c->reply.head; ln; ln = ln->next) {
        const ksReplyBlock *b = ln->value;
        if (b->used) memcpy(out, b->buf, b->used);
        out += b->used;
    }
}

/* The reply cut back to its first `at` bytes (at most its length). */
static void truncateTo(ksClient *c, size_t at) {
    if (at <= c->rlen) {
        c->rlen = at;
        while (c->reply.head) delBlock(c, c->reply.head);
        return;
    }
    size_t pos = c->rlen;
    for (ksListNode *ln = c->reply.head, *next; ln; ln = next) {
        next = ln->next;
        ksReplyBlock *b = ln->value;
        size_t used = b->used;
        if (pos >= at) delBlock(c, ln);
        else if (pos + used > at) b->used = at - pos;
        pos += used;
    }
}

void ksReplyInsert(ksClient *c, size_t at, const void *s, size_t len) {
    size_t total = ksReplyLen(c), tail = total - at;
    uint8_t *all = malloc(total ? total : 1); /* a scratch copy: not the server's memory */
    if (!all) abort();
    ksReplyCopyOut(c, all);
    truncateTo(c, at);
    ksReplyAddProto(c, s, len);
    ksReplyAddProto(c, all + at, tail);
    free(all);
}

void ksReplyRelease(ksClient *c) {
    while (c->reply.head) delBlock(c, c->reply.head);
    c->rlen = c->sentlen = 0;
}

void ksReplyBlockCounts(uint64_t *allocated, uint64_t *freed) {
    *allocated = blocks_allocated;
    *freed = blocks_freed;
}
