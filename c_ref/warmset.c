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
 * Layout, for speed: a setup touches lines by the hundred million and the set
 * holds millions (far more than the host's caches), so what a touch costs is
 * the host cache misses it takes.  The set is two structures:
 *
 *   - a table of slots (line, position, tag, site, dirty: 16 bytes), open
 *     addressing with linear probing from a multiplicative hash, at most half
 *     full, deletion by backward shift (no tombstones): a touch finds its line
 *     in one host line, usually;
 *   - the touch order as a queue of lines (8 bytes each), appended to at every
 *     touch of a line that is not already the most recent, with a bitmap of the
 *     entries that are dead (touched again later, or dropped).  A slot keeps the
 *     position of its line's live entry; a touch marks the old entry dead (one
 *     bit in a bitmap small enough to stay in the host's cache) and appends.
 *     The least recent line is the first live entry: dropping it scans the
 *     queue's head forward.  When the queue is full it is compacted in place,
 *     sequentially: the live entries move to the front and every slot's
 *     position is renumbered from the dead entries' running count (no lookup).
 *
 * A touch of the most recent line (the common case: a record's neighbouring
 * fields) changes its flags only.  The order the set visits is the order of
 * the live queue entries: the lines by last touch, as a doubly linked list
 * moved to its end at every touch would hold them (the layout before this one;
 * tests/test_warm_setup.c checks the set against a brute-force model and the
 * traces' bytes are unchanged).
 *
 * Conventions: public ksWarmSet...; static internals without prefix.
 */
#include "warmset.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LINE 64u
#define NO_SLOT UINT64_MAX
#define MIN_TABLE_BITS 10
#define MIN_QUEUE 1024u

typedef struct slot {
    uint64_t key; /* line + 1 (lines are 64-byte aligned); 0 = empty */
    uint32_t pos; /* the queue position of the line's live entry */
    uint16_t site;
    uint8_t tag;
    uint8_t dirty;
} slot;

static_assert(sizeof(slot) == 16, "a warm-set slot is 16 bytes: four per host line");

struct ksWarmSet {
    slot *tab;        /* 1 << bits slots, at most half of them in use */
    unsigned bits;    /* log2 of the slot count */
    uint64_t count;   /* live lines */
    uint64_t max;     /* bound on live lines */
    uint64_t dropped; /* lines dropped as least recent when full */
    uint64_t *q;      /* the touch order: a line per entry, positions [0, qcap) */
    uint64_t *dead;   /* one bit per queue position: the entry is dead */
    uint64_t qhead;   /* entries before it are dead */
    uint64_t qlen;    /* entries appended */
    uint64_t qcap;    /* entries the queue holds (< 2^32: slot.pos) */
    uint64_t mru;     /* the slot of the most recent line (its entry is q[qlen - 1]), or NO_SLOT */
};

static uint64_t home(uint64_t line, unsigned bits) {
    return ((line / LINE) * 0x9E3779B97F4A7C15ULL) >> (64 - bits);
}

static int isDead(const ksWarmSet *s, uint64_t p) { return (int)(s->dead[p / 64] >> (p % 64)) & 1; }
static void markDead(ksWarmSet *s, uint64_t p) { s->dead[p / 64] |= (uint64_t)1 << (p % 64); }

/* The slot holding line, or NO_SLOT. */
static uint64_t findSlot(const ksWarmSet *s, uint64_t line) {
    uint64_t mask = ((uint64_t)1 << s->bits) - 1;
    for (uint64_t i = home(line, s->bits);; i = (i + 1) & mask) {
        if (s->tab[i].key == line + 1) return i;
        if (s->tab[i].key == 0) return NO_SLOT;
    }
}

/* The empty slot line goes to (line is not in the table). */
static uint64_t emptySlot(const ksWarmSet *s, uint64_t line) {
    uint64_t mask = ((uint64_t)1 << s->bits) - 1, i = home(line, s->bits);
    while (s->tab[i].key) i = (i + 1) & mask;
    return i;
}

static int resizeTable(ksWarmSet *s, unsigned bits) {
    slot *old = s->tab;
    uint64_t n = old ? (uint64_t)1 << s->bits : 0;
    slot *t = calloc((size_t)1 << bits, sizeof(slot));
    if (!t) return -1;
    s->tab = t;
    s->bits = bits;
    for (uint64_t i = 0; i < n; i++)
        if (old[i].key) t[emptySlot(s, old[i].key - 1)] = old[i];
    free(old);
    s->mru = NO_SLOT;
    return 0;
}

/* Remove slot i, shifting back the slots of its probe run that may move. */
static void deleteSlot(ksWarmSet *s, uint64_t i) {
    uint64_t mask = ((uint64_t)1 << s->bits) - 1;
    for (uint64_t j = (i + 1) & mask; s->tab[j].key; j = (j + 1) & mask) {
        uint64_t k = home(s->tab[j].key - 1, s->bits);
        /* j's slot may fill the hole at i when its home is not in (i, j] (cyclically) */
        if (((j - k) & mask) >= ((j - i) & mask)) {
            s->tab[i] = s->tab[j];
            i = j;
        }
    }
    s->tab[i].key = 0;
    s->mru = NO_SLOT;
}

static int allocQueue(ksWarmSet *s, uint64_t cap) {
    uint64_t *q = realloc(s->q, cap * sizeof(uint64_t));
    if (!q) return -1;
    s->q = q;
    uint64_t *d = calloc(cap / 64 + 1, sizeof(uint64_t));
    if (!d) return -1;
    free(s->dead);
    s->dead = d;
    s->qcap = cap;
    return 0;
}

/* The live entries to the front, in order; each slot's position renumbered. */
static void compact(ksWarmSet *s) {
    uint64_t words = s->qlen / 64 + 1;
    /* below[w]: dead entries before position 64 w */
    uint32_t *below = malloc(words * sizeof(uint32_t));
    if (!below) abort(); /* the tracer has no way to go on without its warm-up */
    uint64_t run = 0;
    for (uint64_t w = 0; w < words; w++) {
        below[w] = (uint32_t)run;
        uint64_t bits = s->dead[w];
        if (w == words - 1) bits &= ((uint64_t)1 << (s->qlen % 64)) - 1;
        run += (uint64_t)__builtin_popcountll(bits);
    }
    uint64_t n = (uint64_t)1 << s->bits;
    for (uint64_t i = 0; i < n; i++) {
        if (!s->tab[i].key) continue;
        uint64_t p = s->tab[i].pos;
        uint64_t before = s->dead[p / 64] & (((uint64_t)1 << (p % 64)) - 1);
        s->tab[i].pos = (uint32_t)(p - below[p / 64] - (uint64_t)__builtin_popcountll(before));
    }
    free(below);
    uint64_t live = 0;
    for (uint64_t p = s->qhead; p < s->qlen; p++)
        if (!isDead(s, p)) s->q[live++] = s->q[p];
    assert(live == s->count);
    s->qhead = 0;
    s->qlen = live;
    /* room for at least as many appends as there are live lines and slots: compaction
     * costs O(slots + entries), so each append pays O(1) for it */
    uint64_t want = 2 * live + ((uint64_t)1 << s->bits) + MIN_QUEUE;
    if (want > UINT32_MAX) want = UINT32_MAX;
    if (want > s->qcap) {
        if (allocQueue(s, want)) abort();
    } else {
        memset(s->dead, 0, (s->qcap / 64 + 1) * sizeof(uint64_t));
    }
}

ksWarmSet *ksWarmSetNew(uint64_t max_lines) {
    if (max_lines < 1 || max_lines >= UINT32_MAX / 4) return NULL;
    ksWarmSet *s = calloc(1, sizeof(*s));
    if (!s) return NULL;
    s->max = max_lines;
    s->mru = NO_SLOT;
    if (resizeTable(s, MIN_TABLE_BITS) || allocQueue(s, 2 * MIN_QUEUE)) {
        ksWarmSetFree(s);
        return NULL;
    }
    return s;
}

void ksWarmSetFree(ksWarmSet *s) {
    if (!s) return;
    free(s->tab);
    free(s->q);
    free(s->dead);
    free(s);
}

uint64_t ksWarmSetCount(const ksWarmSet *s) { return s->count; }
uint64_t ksWarmSetDropped(const ksWarmSet *s) { return s->dropped; }

/* Drop the least recent line. */
static void dropOldest(ksWarmSet *s) {
    while (isDead(s, s->qhead)) s->qhead++;
    uint64_t p = s->qhead++;
    markDead(s, p);
    uint64_t i = findSlot(s, s->q[p]);
    assert(i != NO_SLOT && s->tab[i].pos == p);
    deleteSlot(s, i);
    s->count--;
    s->dropped++;
}

static void touchLine(ksWarmSet *s, uint64_t line, int store, uint8_t tag, uint16_t site) {
    slot *x;
    if (s->mru != NO_SLOT && s->tab[s->mru].key == line + 1) {
        x = &s->tab[s->mru]; /* already the most recent: the order stays */
        x->dirty |= (uint8_t)(store != 0);
        x->tag = tag;
        x->site = site;
        return;
    }
    if (s->qlen == s->qcap) compact(s);
    uint64_t i = findSlot(s, line);
    if (i != NO_SLOT) {
        markDead(s, s->tab[i].pos);
        s->tab[i].dirty |= (uint8_t)(store != 0);
    } else {
        if (s->count == s->max) dropOldest(s);
        if (2 * (s->count + 1) > ((uint64_t)1 << s->bits) && resizeTable(s, s->bits + 1)) abort();
        i = emptySlot(s, line);
        s->tab[i].key = line + 1;
        s->tab[i].dirty = (uint8_t)(store != 0);
        s->count++;
    }
    x = &s->tab[i];
    x->tag = tag;
    x->site = site;
    x->pos = (uint32_t)s->qlen;
    s->q[s->qlen++] = line;
    s->mru = i;
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
    for (uint64_t p = s->qhead; p < s->qlen; p++) {
        if (isDead(s, p)) continue;
        const slot *x = &s->tab[findSlot(s, s->q[p])];
        ksWarmLine l = {s->q[p], x->dirty, x->tag, x->site};
        fn(ctx, &l);
    }
}

int ksWarmSetCheckValid(const ksWarmSet *s, char *err, size_t errlen) {
    if (s->count > s->max) return snprintf(err, errlen, "warmset: %llu lines over the bound %llu",
                                           (unsigned long long)s->count, (unsigned long long)s->max), -1;
    if (s->qhead > s->qlen || s->qlen > s->qcap || 2 * s->count > ((uint64_t)1 << s->bits))
        return snprintf(err, errlen, "warmset: queue or table bounds broken"), -1;
    uint64_t n = (uint64_t)1 << s->bits, used = 0;
    for (uint64_t i = 0; i < n; i++) {
        const slot *x = &s->tab[i];
        if (!x->key) continue;
        used++;
        uint64_t line = x->key - 1;
        if (line % LINE) return snprintf(err, errlen, "warmset: slot %llu not line aligned", (unsigned long long)i), -1;
        if (findSlot(s, line) != i)
            return snprintf(err, errlen, "warmset: line %#llx unreachable or twice", (unsigned long long)line), -1;
        if (x->pos < s->qhead || x->pos >= s->qlen || isDead(s, x->pos) || s->q[x->pos] != line)
            return snprintf(err, errlen, "warmset: line %#llx has no live entry", (unsigned long long)line), -1;
    }
    uint64_t live = 0;
    for (uint64_t p = s->qhead; p < s->qlen; p++) {
        if (isDead(s, p)) continue;
        live++;
        uint64_t i = findSlot(s, s->q[p]);
        if (i == NO_SLOT || s->tab[i].pos != p)
            return snprintf(err, errlen, "warmset: queue entry %llu is stale but live", (unsigned long long)p), -1;
    }
    if (used != s->count || live != s->count)
        return snprintf(err, errlen, "warmset: %llu slots and %llu live entries for %llu lines", (unsigned long long)used,
                        (unsigned long long)live, (unsigned long long)s->count), -1;
    if (s->mru != NO_SLOT && (s->qlen == 0 || s->tab[s->mru].key != s->q[s->qlen - 1] + 1))
        return snprintf(err, errlen, "warmset: the most recent slot is not the last entry"), -1;
    return 0;
}
