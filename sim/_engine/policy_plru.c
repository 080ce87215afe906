/*
 * policy_plru.c -- tree pseudo-LRU (ways must be a power of two, <= 64).
 *
 * The set word holds ways-1 tree bits, node i at bit i, children of node i
 * are 2i+1 and 2i+2, leaves are the ways in order:
 *
 *                 node0
 *               /       \
 *           node1        node2          bit = 0: the victim is on the left
 *          /    \       /    \          bit = 1: the victim is on the right
 *        w0     w1    w2     w3
 *
 * An access (hit or fill) sets every node on the way's path to point away from
 * it.  The victim follows the bits from the root.  With 1 way there are no
 * bits and the victim is way 0.
 */
#include "policy.h"

static void plruTouch(kvsimPolicyCtx *p, uint32_t set, uint32_t way) {
    uint64_t bits = p->set[set];
    uint32_t node = 0, lo = 0, span = p->ways;
    while (span > 1) {
        span >>= 1;
        if (way < lo + span) { /* way is on the left: point right */
            bits |= 1ULL << node;
            node = 2 * node + 1;
        } else {
            bits &= ~(1ULL << node);
            node = 2 * node + 2;
            lo += span;
        }
    }
    p->set[set] = bits;
}

static uint32_t plruVictim(kvsimPolicyCtx *p, uint32_t set) {
    uint64_t bits = p->set[set];
    uint32_t node = 0, lo = 0, span = p->ways;
    while (span > 1) {
        span >>= 1;
        if (bits & (1ULL << node)) {
            node = 2 * node + 2;
            lo += span;
        } else {
            node = 2 * node + 1;
        }
    }
    return lo;
}

static void plruInvalidate(kvsimPolicyCtx *p, uint32_t set, uint32_t way) {
    (void)p, (void)set, (void)way;
}

static uint64_t plruAge(const kvsimPolicyCtx *p, uint32_t set, uint32_t way) {
    (void)p, (void)set, (void)way;
    return 0;
}

const kvsimPolicyOps kvsimPolicyPlru = {
    .name = "plru",
    .on_hit = plruTouch,
    .on_fill = plruTouch,
    .victim = plruVictim,
    .on_invalidate = plruInvalidate,
    .age = plruAge,
    .needs_pow2_ways = 1,
};
