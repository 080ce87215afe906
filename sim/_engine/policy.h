/*
 * policy.h -- the replacement-policy interface (one policy per policy_<name>.c).
 *
 * Shaped like DynamoRIO drcachesim's cache_replacement_policy_t: a narrow
 * vtable the engine calls at fixed moments, with the set index and way.
 *
 *   on_init(set)         once per set at creation (optional; state starts zeroed)
 *   on_hit(set, way)     a valid line was accessed (any kind of access)
 *   on_fill(set, way)    a line was just installed in `way`
 *   victim(set)          the set is full; return the way to replace.  Called
 *                        only when every way is valid (the engine fills the
 *                        lowest-numbered invalid way first, without asking)
 *   on_invalidate(set, way)  a line left the cache without replacement
 *   age(set, way)        larger = older; orders the final flush (optional)
 *
 * State: one uint64_t per line (`KVSIM_PLINE(p, set)[way]`; the engine keeps them
 * inside each set's block, next to the tags) and one per set
 * (`set[set]`), zeroed at creation, plus a per-cache clock, fill counter and
 * xorshift64* random state in kvsimPolicyCtx.  sim/reference.py mirrors every
 * policy with the same state, so victims are bit-identical.
 */
#ifndef KVSIM_POLICY_H
#define KVSIM_POLICY_H

#include <stddef.h>
#include <stdint.h>

typedef struct kvsimPolicyCtx {
    uint32_t ways;
    uint64_t stride; /* words from one set's line words to the next set's */
    uint64_t *line;  /* line words of set s: KVSIM_PLINE(p, s)[0 .. ways-1] */
    uint64_t *set;   /* sets words */
    uint64_t clock;  /* monotonically increasing access counter */
    uint64_t fills;  /* fills so far (BRRIP's bimodal throttle) */
    uint64_t rng;    /* xorshift64* state (random policy) */
    /* LRU with at most 32 ways keeps a recency rank per way instead of stamps: 16
     * bytes (up to 16 ways) or 32 inside each set's block (`rank + set * rstride`),
     * NULL otherwise */
    uint8_t *rank;
    uint64_t rstride; /* bytes from one set's ranks to the next set's */
} kvsimPolicyCtx;

#define KVSIM_PLINE(p, set) ((p)->line + (uint64_t)(set) * (p)->stride)

typedef struct kvsimPolicyOps {
    const char *name;
    void (*on_init)(kvsimPolicyCtx *p, uint32_t set);
    void (*on_hit)(kvsimPolicyCtx *p, uint32_t set, uint32_t way);
    void (*on_fill)(kvsimPolicyCtx *p, uint32_t set, uint32_t way);
    uint32_t (*victim)(kvsimPolicyCtx *p, uint32_t set);
    void (*on_invalidate)(kvsimPolicyCtx *p, uint32_t set, uint32_t way);
    uint64_t (*age)(const kvsimPolicyCtx *p, uint32_t set, uint32_t way);
    int needs_pow2_ways; /* tree-PLRU */
} kvsimPolicyOps;

/* The factory: a policy by name ("lru", "plru", "srrip", "brrip", "random", "qlru"),
 * or NULL for an unknown name. */
const kvsimPolicyOps *kvsimPolicyByName(const char *name);

/* xorshift64* step shared by the random policy and its Python mirror. */
static inline uint64_t kvsimXorshift64s(uint64_t *state) {
    uint64_t x = *state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *state = x;
    return x * 0x2545F4914F6CDD1DULL;
}

extern const kvsimPolicyOps kvsimPolicyLru;
extern const kvsimPolicyOps kvsimPolicyPlru;
extern const kvsimPolicyOps kvsimPolicySrrip;
extern const kvsimPolicyOps kvsimPolicyBrrip;
extern const kvsimPolicyOps kvsimPolicyRandom;
extern const kvsimPolicyOps kvsimPolicyQlru;

#endif /* KVSIM_POLICY_H */
