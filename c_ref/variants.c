/*
 * variants.c -- the variant registry: a name per family -> one function (or
 * setting).  Adding a variant = write its function + add one line to `registry`.
 *
 *   family     names                                      what it selects
 *   pipeline   naive, lookahead, lookahead-hash-once,     ksPipelineFn
 *              all-pending-14754
 *   multikey   none, batch, chunk-15133, batch-hash-once,  ksMultikeyPrefetchFn + batch rule
 *              redis-15043, window-3389, redis-14899,
 *              redis-14899-guard
 *   load       none, prefetch-after-key, prefetch-rehash  ksLoadVariant flags
 *   iterate    none, next-bucket, valkey                  iterator prefetch mode
 *   hash       none, nested-3940, value-2180,             variants_hash.c: nested field
 *              find-batch-4017, getall-14988              prefetch, HMGET batch, HGETALL
 *
 * Variant strings ("pipeline=lookahead batch=16 multikey=batch") are parsed by
 * ksParseVariants over the defaults (naive, 16, none, none, none).
 *
 * Two options size the batches, each read by the variants its entry's `uses`
 * says (ksVariantsUseOption; the CLI refuses one given to variants that ignore
 * it):
 *   batch=N   Valkey's prefetch-batch-max-size: the lookahead pipeline's batch
 *             (Redis's: all-pending-14754's batch holds 2 x N keys),
 *             multikey=batch's first keys on a hashtable, window-3389's offset;
 *   chunk=N   Redis #15133's in-command chunk (prefetchNextBatchSize, 16
 *             upstream, 1..KS_MAX_CHUNK): multikey=chunk-15133 on every table,
 *             multikey=batch (and batch-hash-once) on table=dict.
 * Redis #15043's MSET_BATCH_SIZE and #14899's DICT_PREFETCH_MAX_SIZE are fixed
 * upstream and read neither.
 *
 * Variants outside the core sources join the registry through
 * ksRegisterVariant: the C tests and the test libraries
 * (libkvsim_cref_testvariants.so, libkvsim_cref_asan.so) link
 * tests/broken_variants.c, whose deliberately broken variants register
 * themselves when the library loads.  The product never contains them.
 */
#include <assert.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "keyspace.h"
#include "dict.h"

/* The longest #15133 batch, 2 * chunk - 1 keys, fits one dictPrefetcher. */
static_assert(2 * KS_MAX_CHUNK - 1 <= DICT_PREFETCH_MAX_SIZE, "a #15133 batch must fit a dictPrefetcher");
static_assert(2 * KS_MAX_CHUNK - 1 <= KS_MAX_BATCH, "a #15133 batch must fit commands.c's key arrays");

/* --- Variant functions ----------------------------------------------------- */

/* multikey=batch: the interleaved prefetch of one batch of an MGET/MSET/MSETNX
 * (which keys form a batch: commands.c).  table=hashtable: Valkey's
 * hashtable step machine (ksPrefetchKeys), whose keys the lookup then hashes
 * again (ksKeyInfo.rehash) unless the variant is batch-hash-once.
 * table=dict: Redis #15133's path, dictPrefetchKeys over the batch's dicts and
 * keys (the prefetcher hashes each key itself, as Redis). */
static void multikeyBatch(ksKeyspace *ks, ksKeyInfo *keys, int n) {
    if (ks->ops == &ksDictTableOps) {
        dict *dicts[DICT_PREFETCH_MAX_SIZE] = {0};
        const void *dkeys[DICT_PREFETCH_MAX_SIZE] = {0};
        if (n > DICT_PREFETCH_MAX_SIZE) n = DICT_PREFETCH_MAX_SIZE; /* #15133 batches are < 2 * chunk */
        for (int i = 0; i < n; i++) {
            dicts[i] = keys[i].table;
            dkeys[i] = keys[i].key;
        }
        dictPrefetcher p;
        dictPrefetcherReset(&p, dicts, dkeys, (size_t)n);
        for (int i = 0; i < n; i++) dictPrefetcherSetTableDep(&p, (size_t)i, keys[i].slot_load);
        dictPrefetcherRun(&p);
        return;
    }
    ksPrefetchKeys(ks, keys, n);
    for (int i = 0; i < n; i++) keys[i].rehash = !ks->var.multikey_hash_once;
}

/* multikey=redis-15043: Redis PR #15043 (msetPrefetchBatch), the bucket-only
 * prefetch of MSET/MSETNX: per key of the batch, hash it and prefetch its
 * bucket cell in ht_table[0] (and ht_table[1] while rehashing); nothing
 * else.  commands.c applies the PR's batch rule (KS_MULTIKEY_RULE_15043).  On
 * table=hashtable (a study, no upstream code) it prefetches the key's bucket
 * through the backend's prefetchBucket. */
static void multikeyBucketCells15043(ksKeyspace *ks, ksKeyInfo *keys, int n) {
    for (int i = 0; i < n; i++) {
        if (!keys[i].table) continue; /* no slot table yet: nothing to prefetch */
        KS_SET_TABLE_DEP(keys[i].slot_load);
        if (ks->ops == &ksDictTableOps) dictPrefetchBucketCells(keys[i].table, keys[i].key);
        else ks->ops->prefetchBucket(keys[i].table, keys[i].hash);
    }
}

static void setPipeline(ksVariants *v, const void *fn) {
    v->pipeline = (ksPipelineFn)fn;
    v->pipeline_hash_once = 0;
}
static void setPipelineHashOnce(ksVariants *v, const void *fn) {
    v->pipeline = (ksPipelineFn)fn;
    v->pipeline_hash_once = 1;
}
static void setMultikey(ksVariants *v, const void *fn) {
    v->multikey = (ksMultikeyPrefetchFn)fn;
    v->multikey_rule = KS_MULTIKEY_RULE_15133;
    v->multikey_tables = NULL;
    v->multikey_chunked = 0;
    v->multikey_hash_once = 0;
    v->multikey_guard = 0;
}
static void setMultikeyChunked(ksVariants *v, const void *fn) {
    setMultikey(v, fn);
    v->multikey_chunked = 1;
}
static void setMultikeyHashOnce(ksVariants *v, const void *fn) {
    setMultikey(v, fn);
    v->multikey_hash_once = 1;
}
static void setMultikey15043(ksVariants *v, const void *fn) {
    setMultikey(v, fn);
    v->multikey_rule = KS_MULTIKEY_RULE_15043;
}
static void setMultikey3389(ksVariants *v, const void *fn) {
    setMultikey(v, fn);
    v->multikey_rule = KS_MULTIKEY_RULE_3389;
}
static void setMultikey14899(ksVariants *v, const void *fn) {
    setMultikey(v, fn);
    v->multikey_rule = KS_MULTIKEY_RULE_14899;
}
static void setMultikey14899Guard(ksVariants *v, const void *fn) {
    setMultikey14899(v, fn);
    v->multikey_guard = 1;
}
static void setLoadNone(ksVariants *v, const void *fn) {
    (void)fn;
    v->load = (ksLoadVariant){0, 0};
}
static void setLoadAfterKey(ksVariants *v, const void *fn) {
    (void)fn;
    v->load = (ksLoadVariant){1, 0};
}
static void setLoadRehash(ksVariants *v, const void *fn) {
    (void)fn;
    v->load = (ksLoadVariant){1, 1};
}
static void setIterNone(ksVariants *v, const void *fn) {
    (void)fn;
    v->iterate = KS_ITER_PREFETCH_NONE;
}
static void setIterNext(ksVariants *v, const void *fn) {
    (void)fn;
    v->iterate = KS_ITER_PREFETCH_NEXT_BUCKET;
}
static void setIterValkey(ksVariants *v, const void *fn) {
    (void)fn;
    v->iterate = KS_ITER_PREFETCH_VALKEY;
}


/* --- Registry -------------------------------------------------------------- */

/* Which options an entry reads (ksVariantsUseOption). */
enum {
    USES_BATCH = 1,           /* batch=N on every table */
    USES_BATCH_HASHTABLE = 2, /* batch=N on table=hashtable */
    USES_CHUNK = 4,           /* chunk=N on every table */
    USES_CHUNK_DICT = 8,      /* chunk=N on table=dict */
    USES_ALL = 15             /* a registered extra variant: unknown, so all */
};

typedef struct {
    const char *family;
    const char *name;
    ksVariantApplyFn apply;
    const void *fn;
    unsigned uses; /* USES_* */
} variantEntry;

static const variantEntry registry[] = {
    {"pipeline", "naive", setPipeline, (const void *)ksPipelineNaive, 0},
    {"pipeline", "lookahead", setPipeline, (const void *)ksPipelineLookahead, USES_BATCH},
    /* study: the lookup reuses the lookahead's hash (Valkey hashes twice) */
    {"pipeline", "lookahead-hash-once", setPipelineHashOnce, (const void *)ksPipelineLookahead, USES_BATCH},
    /* Redis #14754: every pending command's keys, a batch of 2 x batch keys (#14017) */
    {"pipeline", "all-pending-14754", setPipeline, (const void *)ksPipelineAllPending, USES_BATCH},
    {"multikey", "none", setMultikey, NULL, 0},
    /* hashtable: Valkey's first prefetch-batch-max-size keys; dict: Redis #15133 */
    {"multikey", "batch", setMultikey, (const void *)multikeyBatch, USES_BATCH_HASHTABLE | USES_CHUNK_DICT},
    /* study: Redis #15133's in-command chunking on every table */
    {"multikey", "chunk-15133", setMultikeyChunked, (const void *)multikeyBatch, USES_CHUNK},
    /* study: batch, the lookup reusing the prefetch's hash (hashtable) */
    {"multikey", "batch-hash-once", setMultikeyHashOnce, (const void *)multikeyBatch, USES_BATCH_HASHTABLE | USES_CHUNK_DICT},
    /* Redis PR #15043's bucket-cell MSET prefetch and its batch rule */
    {"multikey", "redis-15043", setMultikey15043, (const void *)multikeyBucketCells15043, 0},
    /* Valkey PR #3389's sliding window, offset = batch (commands.c) */
    {"multikey", "window-3389", setMultikey3389, (const void *)multikeyBatch, USES_BATCH},
    /* Redis PR #14899's in-command MGET prefetch, without and with its pipeline guard */
    {"multikey", "redis-14899", setMultikey14899, (const void *)multikeyBatch, 0},
    {"multikey", "redis-14899-guard", setMultikey14899Guard, (const void *)multikeyBatch, 0},
    {"load", "none", setLoadNone, NULL, 0},
    {"load", "prefetch-after-key", setLoadAfterKey, NULL, 0},
    {"load", "prefetch-rehash", setLoadRehash, NULL, 0},
    {"iterate", "none", setIterNone, NULL, 0},
    {"iterate", "next-bucket", setIterNext, NULL, 0},
    {"iterate", "valkey", setIterValkey, NULL, 0},
    {"hash", "none", ksSetHashNone, NULL, 0},
    /* variants_hash.c: Valkey #3940, #2180, #4017; Redis #14988 */
    {"hash", "nested-3940", ksSetHashNested3940, NULL, 0},
    {"hash", "value-2180", ksSetHashValue2180, NULL, 0},
    {"hash", "find-batch-4017", ksSetHashFindBatch4017, NULL, 0},
    {"hash", "getall-14988", ksSetHashGetall14988, NULL, 0},
};

#define NREG (sizeof(registry) / sizeof(registry[0]))

/* Variants added by ksRegisterVariant (zero-initialised: usable from a
 * constructor that runs before any other code of the library). */
static variantEntry extra[KS_MAX_EXTRA_VARIANTS];
static size_t nextra;

static const variantEntry *entryAt(size_t i) { return i < NREG ? &registry[i] : &extra[i - NREG]; }

/* The families: name, the default variant, where ksVariants keeps the chosen name. */
typedef struct {
    const char *name;
    const char *dflt;
    size_t name_field; /* offsetof(ksVariants, <family>_name) */
} familyEntry;

static const familyEntry families[] = {
    {"pipeline", "naive", offsetof(ksVariants, pipeline_name)},
    {"multikey", "none", offsetof(ksVariants, multikey_name)},
    {"load", "none", offsetof(ksVariants, load_name)},
    {"iterate", "none", offsetof(ksVariants, iterate_name)},
    {"hash", "none", offsetof(ksVariants, hash_name)},
};

static const familyEntry *findFamily(const char *family) {
    for (size_t i = 0; family && i < sizeof(families) / sizeof(families[0]); i++)
        if (!strcmp(families[i].name, family)) return &families[i];
    return NULL;
}

static int knownFamily(const char *family) { return findFamily(family) != NULL; }

const char *ksVariantFamilyDefault(const char *family) {
    const familyEntry *f = findFamily(family);
    return f ? f->dflt : NULL;
}

static const variantEntry *findEntry(const char *family, const char *name) {
    for (size_t i = 0; i < NREG + nextra; i++) {
        const variantEntry *e = entryAt(i);
        if (strcmp(e->family, family) == 0 && strcmp(e->name, name) == 0) return e;
    }
    return NULL;
}

int ksRegisterVariant(const char *family, const char *name, ksVariantApplyFn apply, const void *fn) {
    if (!knownFamily(family) || !apply || findEntry(family, name) || nextra == KS_MAX_EXTRA_VARIANTS) return -1;
    extra[nextra++] = (variantEntry){family, name, apply, fn, USES_ALL};
    return 0;
}

int ksSetVariant(ksVariants *v, const char *family, const char *name) {
    const variantEntry *e = findEntry(family, name);
    if (!e) return -1;
    e->apply(v, e->fn);
    memcpy((char *)v + findFamily(family)->name_field, &e->name, sizeof(e->name));
    return 0;
}

int ksVariantsUseOption(const ksKeyspace *ks, const ksVariants *v, const char *option) {
    int dict = ks->ops == &ksDictTableOps;
    unsigned want = !strcmp(option, "batch")   ? USES_BATCH | (dict ? 0u : USES_BATCH_HASHTABLE)
                    : !strcmp(option, "chunk") ? USES_CHUNK | (dict ? USES_CHUNK_DICT : 0u)
                                               : 0u;
    for (size_t i = 0; i < sizeof(families) / sizeof(families[0]); i++) {
        const char *name;
        memcpy(&name, (const char *)v + families[i].name_field, sizeof(name));
        const variantEntry *e = name ? findEntry(families[i].name, name) : NULL;
        if (e && (e->uses & want)) return 1;
    }
    return 0;
}

const char *ksVariantsOptionUsers(const char *option) {
    static char buf[512];
    unsigned every = !strcmp(option, "batch") ? USES_BATCH : USES_CHUNK;
    unsigned some = !strcmp(option, "batch") ? USES_BATCH_HASHTABLE : USES_CHUNK_DICT;
    buf[0] = '\0';
    for (size_t i = 0; i < NREG; i++) { /* the shipped variants */
        const variantEntry *e = &registry[i];
        if (!(e->uses & (every | some))) continue;
        size_t len = strlen(buf);
        snprintf(buf + len, sizeof(buf) - len, "%s%s=%s%s", len ? ", " : "", e->family, e->name,
                 e->uses & every ? "" : some == USES_BATCH_HASHTABLE ? " on table=hashtable" : " on table=dict");
    }
    return buf;
}

const char *ksVariantNames(const char *family) {
    static char buf[512];
    buf[0] = '\0';
    for (size_t i = 0; i < NREG + nextra; i++) {
        const variantEntry *e = entryAt(i);
        if (strcmp(e->family, family)) continue;
        if (buf[0]) strncat(buf, "|", sizeof(buf) - strlen(buf) - 1);
        strncat(buf, e->name, sizeof(buf) - strlen(buf) - 1);
    }
    return buf;
}

int ksParseVariants(ksKeyspace *ks, const char *spec, ksVariants *out) {
    ksVariants v;
    memset(&v, 0, sizeof(v));
    for (size_t i = 0; i < sizeof(families) / sizeof(families[0]); i++)
        ksSetVariant(&v, families[i].name, families[i].dflt);
    v.batch = KS_DEFAULT_BATCH;
    v.chunk = KS_DEFAULT_CHUNK;
    char buf[512];
    snprintf(buf, sizeof(buf), "%s", spec ? spec : "");
    for (char *save = NULL, *tok = strtok_r(buf, KS_OPTION_SPACE, &save); tok; tok = strtok_r(NULL, KS_OPTION_SPACE, &save)) {
        char *eq = strchr(tok, '=');
        if (!eq) {
            snprintf(ks->err, sizeof(ks->err), "variant '%s' is not family=name", tok);
            return -1;
        }
        *eq = '\0';
        const char *k = tok, *val = eq + 1;
        if (!strcmp(k, "batch")) {
            char *end;
            long b = strtol(val, &end, 10);
            if (*val == '\0' || *end || b < 1 || b > KS_MAX_BATCH) {
                snprintf(ks->err, sizeof(ks->err), "bad batch '%s' (1..%d)", val, KS_MAX_BATCH);
                return -1;
            }
            v.batch = (int)b;
            continue;
        }
        if (!strcmp(k, "chunk")) {
            char *end;
            long c = strtol(val, &end, 10);
            if (*val == '\0' || *end || c < 1 || c > KS_MAX_CHUNK) {
                snprintf(ks->err, sizeof(ks->err), "bad chunk '%s' (1..%d)", val, KS_MAX_CHUNK);
                return -1;
            }
            v.chunk = (int)c;
            continue;
        }
        if (!knownFamily(k)) {
            snprintf(ks->err, sizeof(ks->err), "unknown variant family '%s'", k);
            return -1;
        }
        if (ksSetVariant(&v, k, val)) {
            snprintf(ks->err, sizeof(ks->err), "unknown %s variant '%s' (%s)", k, val, ksVariantNames(k));
            return -1;
        }
    }
    *out = v;
    return 0;
}
