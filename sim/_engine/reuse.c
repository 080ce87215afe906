/*
 * reuse.c -- LRU stack (reuse) distances of a stream of cache-line accesses, in
 * O(n log d) time and O(d) memory for n accesses to d distinct lines, fed in
 * chunks of any size.  Called by kvsim.traces (reuse_distance, reuse_histogram)
 * through sim/_binding.py; it shares the engine's library but none of its state.
 *
 * The distance of an access is the number of distinct *other* lines touched since
 * the previous access to the same line (0 = immediate re-use); a first touch has
 * none ("cold").  It is the LRU stack depth of the line, so an access hits a
 * fully associative LRU cache of C lines exactly when its distance is < C.
 *
 * Method (Bennett and Kruskal's counting of distinct references, with a binary
 * indexed tree as in Almasi, Cascaval and Padua, "Calculating stack distances
 * efficiently", MSP 2002):
 *
 *   time positions   0   1   2   3   4   5   6   (t = 6 accesses line a)
 *   lines            a   b   c   b   d   c   a
 *   mark (1 = the     0   0   0   1   1   1   -
 *   latest access
 *   to its line)
 *
 *   Position p holds 1 while it is the latest access to its line.  An access at t
 *   to a line last seen at p has distance = ones in (p, t) = ones - prefix(p + 1)
 *   (here 3: b, d, c); then p's mark moves to t.  A Fenwick tree over positions
 *   gives prefix sums and updates in O(log cap).  A hash map (open addressing,
 *   linear probing, load <= 1/2) gives each line its latest position.
 *
 *   Compaction keeps memory at O(d) for any n: when the positions run out (t ==
 *   cap), the marked positions are renumbered 0 .. d-1 in order (ranks), which
 *   keeps every distance, and the tree is rebuilt in O(cap).  The capacity doubles
 *   whenever more than half of it is marked after a compaction, so each position
 *   is renumbered O(1) times amortized.
 *
 * Histogram buckets (KVSIM_REUSE_BUCKETS = 65): bucket 0 holds distance 0, bucket
 * b >= 1 holds 2^(b-1) <= d < 2^b.  Cold accesses are counted apart.
 *
 * Conventions: see engine.h (public names kvsimReuse*, internal names static).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"

#define INITIAL_CAP 1024u /* positions of a new state; grows by doubling */
#define INITIAL_SLOTS 2048u /* hash slots (a power of two, >= 2 x marked positions) */

struct kvsimReuse {
    uint64_t *tree;   /* Fenwick tree, 1-based: tree[1 .. cap] */
    uint64_t cap;     /* positions before the next compaction */
    uint64_t t;       /* next position */
    uint64_t ones;    /* marked positions = distinct lines seen */
    uint64_t *key;    /* hash slots: line + 1 (0 = empty) */
    uint64_t *pos;    /* ... and that line's latest position */
    uint64_t slots;   /* a power of two */
};

/* --- Fenwick tree ----------------------------------------------------------- */

static void treeAdd(uint64_t *tree, uint64_t cap, uint64_t i, int64_t v) {
    for (i++; i <= cap; i += i & (~i + 1)) tree[i] += (uint64_t)v;
}

/* Marked positions among 0 .. i-1. */
static uint64_t treePrefix(const uint64_t *tree, uint64_t i) {
    uint64_t s = 0;
    for (; i > 0; i -= i & (~i + 1)) s += tree[i];
    return s;
}

/* --- Hash map ------------------------------------------------------------------ */

static uint64_t mix(uint64_t x) { /* the splitmix64 finaliser */
    x ^= x >> 30;
    x *= 0xBF58476D1CE4E5B9ULL;
    x ^= x >> 27;
    x *= 0x94D049BB133111EBULL;
    return x ^ (x >> 31);
}

/* The slot of `line`: where it is, or the empty slot where it goes. */
static uint64_t slotOf(const kvsimReuse *r, uint64_t line) {
    const uint64_t k = line + 1, mask = r->slots - 1;
    uint64_t i = mix(line) & mask;
    while (r->key[i] != 0 && r->key[i] != k) i = (i + 1) & mask;
    return i;
}

/* Double the slots.  Returns 0, or -1 when out of memory (nothing changed). */
static int grow(kvsimReuse *r) {
    uint64_t n = r->slots * 2;
    uint64_t *key = calloc(n, sizeof *key), *pos = malloc(n * sizeof *pos);
    if (!key || !pos) {
        free(key);
        free(pos);
        return -1;
    }
    uint64_t *ok = r->key, *op = r->pos, on = r->slots;
    r->key = key;
    r->pos = pos;
    r->slots = n;
    for (uint64_t i = 0; i < on; i++)
        if (ok[i]) {
            uint64_t j = slotOf(r, ok[i] - 1);
            key[j] = ok[i];
            pos[j] = op[i];
        }
    free(ok);
    free(op);
    return 0;
}

/* --- Compaction ------------------------------------------------------------------ */

/* Renumber the marked positions 0 .. ones-1 in order, growing the capacity when
 * more than half of it is marked; rebuild the tree.  Returns 0 or -1 (out of
 * memory; the state is unchanged). */
static int compact(kvsimReuse *r) {
    uint64_t ncap = r->cap;
    while (r->ones * 2 > ncap) ncap *= 2;
    /* rank of each old position among the marked ones (u64: a rank < ones) */
    uint64_t *rank = calloc(r->cap, sizeof *rank);
    uint64_t *tree = calloc(ncap + 1, sizeof *tree);
    if (!rank || !tree) {
        free(rank);
        free(tree);
        return -1;
    }
    for (uint64_t i = 0; i < r->slots; i++)
        if (r->key[i]) rank[r->pos[i]] = 1;
    uint64_t k = 0;
    for (uint64_t p = 0; p < r->t; p++)
        if (rank[p]) rank[p] = k++;
    for (uint64_t i = 0; i < r->slots; i++)
        if (r->key[i]) r->pos[i] = rank[r->pos[i]];
    free(rank);
    /* positions 0 .. ones-1 marked: linear-time construction */
    for (uint64_t i = 1; i <= ncap; i++) {
        tree[i] += i <= r->ones ? 1 : 0;
        uint64_t j = i + (i & (~i + 1));
        if (j <= ncap) tree[j] += tree[i];
    }
    free(r->tree);
    r->tree = tree;
    r->cap = ncap;
    r->t = r->ones;
    return 0;
}

/* --- API ------------------------------------------------------------------------- */

kvsimReuse *kvsimReuseCreate(void) {
    kvsimReuse *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    r->cap = INITIAL_CAP;
    r->slots = INITIAL_SLOTS;
    r->tree = calloc(r->cap + 1, sizeof *r->tree);
    r->key = calloc(r->slots, sizeof *r->key);
    r->pos = malloc(r->slots * sizeof *r->pos);
    if (!r->tree || !r->key || !r->pos) {
        kvsimReuseFree(r);
        return NULL;
    }
    return r;
}

static uint32_t bucketOf(uint64_t d) { return d ? 64u - (uint32_t)__builtin_clzll(d) : 0u; }

int kvsimReuseAdd(kvsimReuse *r, const uint64_t *lines, const uint8_t *cls, size_t n,
                  int64_t *dist, uint64_t *hist, uint64_t *cold) {
    for (size_t i = 0; i < n; i++) {
        if (r->t == r->cap && compact(r) != 0) return -1;
        if ((r->ones + 1) * 2 > r->slots && grow(r) != 0) return -1;
        const uint64_t line = lines[i];
        const uint64_t s = slotOf(r, line);
        const uint32_t c = cls ? cls[i] : 0;
        int64_t d = -1;
        if (r->key[s]) {
            const uint64_t p = r->pos[s];
            d = (int64_t)(r->ones - treePrefix(r->tree, p + 1));
            treeAdd(r->tree, r->cap, p, -1);
            r->ones--;
            if (hist) hist[(size_t)c * KVSIM_REUSE_BUCKETS + bucketOf((uint64_t)d)]++;
        } else {
            r->key[s] = line + 1;
            if (cold) cold[c]++;
        }
        r->pos[s] = r->t;
        treeAdd(r->tree, r->cap, r->t, 1);
        r->t++;
        r->ones++;
        if (dist) dist[i] = d;
    }
    return 0;
}

uint64_t kvsimReuseDistinct(const kvsimReuse *r) { return r->ones; }

void kvsimReuseFree(kvsimReuse *r) {
    if (!r) return;
    free(r->tree);
    free(r->key);
    free(r->pos);
    free(r);
}
