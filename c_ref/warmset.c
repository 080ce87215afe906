/*
 * warmset.c -- an exact LRU set of cache lines with a bounded size.
 *
 * Why: a traced workload's setup (populating the keyspace, building the
 * snapshot buffer) is not part of the measured phase, but it leaves the
 * caches and TLBs in the state the measured phase starts in natively.  The
 * trace can carry that state as a warm-up prefix in two forms (emit.c):
 * every access of the setup, or this compact one, every line the setup left
 * behind, once, in the order it last touched them.  For an LRU cache the two
 * leave the same contents: an LRU stack is ordered by last touch, per set as
 * well as overall, and replaying the lines in last-touch order rebuilds every
 * set's stack; a page's last touch is that of its latest line, so TLBs and the
 * page-table lines a walk reads come out in the same order too.  What the
 * compact form does not keep: the hit and miss history of the setup (it is not
 * counted anyway), hardware prefetchers' training, and non-LRU policies' age
 * bits.  results/warm-setup-bound.json measures what that changes.
 *
 * Bound: only the last max_lines distinct lines are kept.  A line older than
 * that has at least max_lines more recent lines above it in every LRU stack
 * that holds all lines, so with max_lines above every simulated cache's line
 * count (and its TLB reach), it is gone from all of them; the prefix, and the
 * memory used here, stop growing with the keyspace.
 *
 * Layout: nodes in one array (index 0 is the list's sentinel), a doubly
 * linked list in touch order through prev/next, and hash chains through
 * hnext from a power-of-two bucket array.  Node and bucket arrays double as
 * the set grows, up to max_lines nodes.
 *
 * Conventions: public ksWarmSet...; static internals without prefix.
 */
#include "warmset.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LINE 64u

typedef struct node {
    uint64_t line;
    uint32_t prev, next, hnext;
    uint16_t site;
    uint8_t tag;
    uint8_t dirty;
} node;

static_assert(sizeof(node) == 24, "a warm-set node is 24 bytes");

struct ksWarmSet {
    node *nodes;      /* nodes[0]: sentinel; nodes[1..count] live */
    uint64_t cap;     /* nodes allocated, sentinel included */
    uint64_t count;   /* live lines */
    uint64_t max;     /* bound on live lines */
    uint64_t dropped; /* lines dropped as least recent when full */
    uint32_t *bucket; /* hash chain heads (node index, 0 = empty) */
    unsigned bits;    /* log2 of the bucket count */
};

static uint64_t hashLine(uint64_t line, unsigned bits) {
    return ((line / LINE) * 0x9E3779B97F4A7C15ULL) >> (64 - bits);
}

static int resizeBuckets(ksWarmSet *s, unsigned bits) {
    uint32_t *b = calloc((size_t)1 << bits, sizeof(uint32_t));
    if (!b) return -1;
    free(s->bucket);
    s->bucket = b;
    s->bits = bits;
    for (uint64_t i = 1; i <= s->count; i++) {
        uint64_t h = hashLine(s->nodes[i].line, bits);
        s->nodes[i].hnext = b[h];
        b[h] = (uint32_t)i;
    }
    return 0;
}

ksWarmSet *ksWarmSetNew(uint64_t max_lines) {
    if (max_lines < 1 || max_lines >= UINT32_MAX) return NULL;
    ksWarmSet *s = calloc(1, sizeof(*s));
    if (!s) return NULL;
    s->max = max_lines;
    s->cap = 1024 < max_lines + 1 ? 1024 : max_lines + 1;
    s->nodes = calloc(s->cap, sizeof(node));
    if (!s->nodes || resizeBuckets(s, 10)) {
        ksWarmSetFree(s);
        return NULL;
    }
    return s;
}

void ksWarmSetFree(ksWarmSet *s) {
    if (!s) return;
    free(s->nodes);
    free(s->bucket);
    free(s);
}

uint64_t ksWarmSetCount(const ksWarmSet *s) { return s->count; }
uint64_t ksWarmSetDropped(const ksWarmSet *s) { return s->dropped; }

static void unlinkList(node *n, uint32_t i) {
    n[n[i].prev].next = n[i].next;
    n[n[i].next].prev = n[i].prev;
}

static void pushRecent(node *n, uint32_t i) {
    n[i].prev = n[0].prev;
    n[i].next = 0;
    n[n[0].prev].next = i;
    n[0].prev = i;
}

static void unlinkHash(ksWarmSet *s, uint32_t i) {
    uint32_t *p = &s->bucket[hashLine(s->nodes[i].line, s->bits)];
    while (*p != i) p = &s->nodes[*p].hnext;
    *p = s->nodes[i].hnext;
}

/* The node for a line not in the set: a new one, or the least recent one's. */
static uint32_t freeNode(ksWarmSet *s) {
    if (s->count == s->max) {
        uint32_t i = s->nodes[0].next;
        unlinkList(s->nodes, i);
        unlinkHash(s, i);
        s->dropped++;
        return i;
    }
    if (s->count + 1 == s->cap) {
        uint64_t cap = s->cap * 2 < s->max + 1 ? s->cap * 2 : s->max + 1;
        node *n = realloc(s->nodes, cap * sizeof(node));
        if (!n) abort(); /* the tracer has no way to go on without its warm-up */
        s->nodes = n;
        s->cap = cap;
    }
    if (((uint64_t)1 << s->bits) < s->cap && resizeBuckets(s, s->bits + 1)) abort();
    return (uint32_t)++s->count;
}

static void touchLine(ksWarmSet *s, uint64_t line, int store, uint8_t tag, uint16_t site) {
    node *n = s->nodes;
    uint64_t h = hashLine(line, s->bits);
    uint32_t i = s->bucket[h];
    while (i && n[i].line != line) i = n[i].hnext;
    if (i) {
        unlinkList(n, i);
        n[i].dirty |= (uint8_t)(store != 0);
    } else {
        i = freeNode(s);
        n = s->nodes;
        h = hashLine(line, s->bits); /* the buckets may have grown */
        n[i].line = line;
        n[i].dirty = (uint8_t)(store != 0);
        n[i].hnext = s->bucket[h];
        s->bucket[h] = i;
    }
    n[i].tag = tag;
    n[i].site = site;
    pushRecent(n, i);
}

void ksWarmSetTouch(ksWarmSet *s, uint64_t addr, uint64_t size, int store, uint8_t tag, uint16_t site) {
    if (size == 0) size = 1;
    uint64_t first = addr & ~(uint64_t)(LINE - 1), last = (addr + size - 1) & ~(uint64_t)(LINE - 1);
    for (uint64_t l = first;; l += LINE) {
        touchLine(s, l, store, tag, site);
        if (l == last) break;
    }
}

void ksWarmSetVisit(const ksWarmSet *s, void (*fn)(void *ctx, const ksWarmLine *l), void *ctx) {
    for (uint32_t i = s->nodes[0].next; i; i = s->nodes[i].next) {
        ksWarmLine l = {s->nodes[i].line, s->nodes[i].dirty, s->nodes[i].tag, s->nodes[i].site};
        fn(ctx, &l);
    }
}

int ksWarmSetCheckValid(const ksWarmSet *s, char *err, size_t errlen) {
    const node *n = s->nodes;
    if (s->count > s->max) return snprintf(err, errlen, "warmset: %llu lines over the bound %llu",
                                           (unsigned long long)s->count, (unsigned long long)s->max), -1;
    uint64_t seen = 0;
    for (uint32_t i = n[0].next, prev = 0; i; prev = i, i = n[i].next) {
        if (n[i].prev != prev || i > s->count || ++seen > s->count)
            return snprintf(err, errlen, "warmset: list broken at node %u", i), -1;
        if (n[i].line % LINE) return snprintf(err, errlen, "warmset: node %u not line aligned", i), -1;
        uint32_t j = s->bucket[hashLine(n[i].line, s->bits)];
        while (j && j != i) {
            if (n[j].line == n[i].line) return snprintf(err, errlen, "warmset: line %#llx twice",
                                                        (unsigned long long)n[i].line), -1;
            j = n[j].hnext;
        }
        if (!j) return snprintf(err, errlen, "warmset: node %u missing from its hash chain", i), -1;
    }
    if (seen != s->count) return snprintf(err, errlen, "warmset: list holds %llu of %llu lines",
                                          (unsigned long long)seen, (unsigned long long)s->count), -1;
    return 0;
}
