/*
 * test_hash.c -- the hash type (t_hash.c, commands_hash.c): the layouts
 * pinned (listpack bytes, field-value entries embedded up to 128 bytes), the
 * conversions at upstream's thresholds, a differential test of HSET HGET
 * HMGET HGETALL HDEL (and their meeting with GET, SET, DEL) against a plain
 * reference on every table, layout and hash variant, with ksCheckValid after
 * each step, and the traced reads of a lookup.
 */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../dict.h"
#include "../emit.h"
#include "../keyspace.h"
#include "../kvsim_cref.h"
#include "../t_hash.h"
#include "../workload.h"
#include "testhelp.h"
#include "traced.h"

/* --- Commands -------------------------------------------------------------------- */

typedef struct {
    char *buf;
    size_t len, cap;
} sbuf;

static void sput(sbuf *b, const void *p, size_t n) {
    if (b->len + n + 1 > b->cap) {
        b->cap = (b->len + n + 1) * 2;
        b->buf = realloc(b->buf, b->cap);
    }
    memcpy(b->buf + b->len, p, n);
    b->len += n;
    b->buf[b->len] = 0;
}

static void sfmt(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sfmt(sbuf *b, const char *fmt, ...) {
    char t[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(t, sizeof(t), fmt, ap);
    va_end(ap);
    sput(b, t, (size_t)n);
}

static void sbulk(sbuf *b, const char *s) {
    sfmt(b, "$%zu\r\n", strlen(s));
    sput(b, s, strlen(s));
    sput(b, "\r\n", 2);
}

/* Run one command (argv strings) and return its reply (static buffer copy). */
static const char *run(ksKeyspace *ks, const char *variant, int argc, const char **argv, size_t *rlen) {
    static sbuf q, r;
    q.len = 0;
    sfmt(&q, "*%d\r\n", argc);
    for (int i = 0; i < argc; i++) sbulk(&q, argv[i]);
    const uint8_t *reply;
    size_t len, consumed;
    if (ksExecute(ks, variant, (const uint8_t *)q.buf, q.len, &reply, &len, &consumed)) return NULL;
    r.len = 0;
    sput(&r, reply, len);
    if (rlen) *rlen = len;
    return r.buf;
}

/* --- Reference ----------------------------------------------------------------------- */

#define NKEYS 3
#define MAXF 1400
typedef struct {
    int exists, converted, n;
    char *f[MAXF], *v[MAXF]; /* insertion order */
} refHash;

static int refFind(const refHash *h, const char *f) {
    for (int i = 0; i < h->n; i++)
        if (!strcmp(h->f[i], f)) return i;
    return -1;
}

static void refClear(refHash *h) {
    for (int i = 0; i < h->n; i++) {
        free(h->f[i]);
        free(h->v[i]);
    }
    memset(h, 0, sizeof(*h));
}

static int cmpPair(const void *a, const void *b) {
    const char *const *x = a, *const *y = b;
    int c = strcmp(x[0], y[0]);
    return c ? c : strcmp(x[1], y[1]);
}

/* HGETALL reply -> pairs sorted (the table's order is not the reference's). */
static char *sortedPairs(const char *reply) {
    long n = strtol(reply + 1, NULL, 10);
    const char *p = strchr(reply, '\n') + 1;
    char **items = calloc((size_t)n + 1, sizeof(char *));
    for (long i = 0; i < n; i++) {
        long l = strtol(p + 1, NULL, 10);
        p = strchr(p, '\n') + 1;
        items[i] = strndup(p, (size_t)l);
        p += l + 2;
    }
    qsort(items, (size_t)n / 2, 2 * sizeof(char *), cmpPair);
    sbuf b = {0};
    for (long i = 0; i < n; i++) {
        sfmt(&b, "%s|", items[i]);
        free(items[i]);
    }
    free(items);
    if (!b.buf) sput(&b, "", 0);
    return b.buf;
}

static const char *WRONG = "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n";

static void randString(unsigned long long *rng, char *out, int minlen, int maxlen) {
    int len = minlen + (int)(test_rand(rng) % (unsigned long long)(maxlen - minlen + 1));
    for (int i = 0; i < len; i++) out[i] = (char)('a' + test_rand(rng) % 26);
    out[len] = 0;
}

/* One random session of hash commands against the reference. */
static int differential(const char *options, const char *variant, unsigned long long seed, int steps) {
    ksKeyspace *ks = ksCreate(options);
    TEST_ASSERT_MSG(ks, "%s", ksLastError(NULL));
    refHash ref[NKEYS];
    memset(ref, 0, sizeof(ref));
    int string_key = 0; /* "s" holds a string */
    unsigned long long rng = seed;
    char keys[NKEYS][8];
    for (unsigned i = 0; i < NKEYS; i++) snprintf(keys[i], sizeof(keys[i]), "h%u", i);
    const char *argv[2 * MAXF + 4];
    static char fbuf[2 * MAXF + 4][96];
    sbuf want = {0};
    for (int step = 0; step < steps; step++) {
        int k = (int)(test_rand(&rng) % NKEYS);
        refHash *h = &ref[k];
        /* fields: a pool of 1300, so big hashes cross 512 and small ones repeat */
        int pool = test_rand(&rng) % 4 == 0 ? 1300 : 40;
        int op = (int)(test_rand(&rng) % 100);
        want.len = 0;
        int argc = 0, unordered = 0;
        if (op < 40) { /* HSET */
            int pairs = test_rand(&rng) % 50 == 0 ? 520 + (int)(test_rand(&rng) % 200) : 1 + (int)(test_rand(&rng) % 4);
            argv[argc++] = "HSET";
            argv[argc++] = keys[k];
            int longval = test_rand(&rng) % 30 == 0;
            int created = 0, tooLong = 0;
            for (int p = 0; p < pairs; p++) {
                snprintf(fbuf[argc], sizeof(fbuf[argc]), "f:%llu", test_rand(&rng) % (unsigned long long)pool);
                argv[argc] = fbuf[argc];
                argc++;
                randString(&rng, fbuf[argc], 0, longval ? 90 : 20);
                argv[argc] = fbuf[argc];
                if (strlen(fbuf[argc]) > KS_HASH_MAX_LISTPACK_VALUE) tooLong = 1;
                argc++;
            }
            if (!h->exists) {
                refClear(h);
                h->exists = 1;
            }
            for (int a = 2; a < argc; a += 2) {
                int i = refFind(h, argv[a]);
                if (i < 0) {
                    h->f[h->n] = strdup(argv[a]);
                    h->v[h->n++] = strdup(argv[a + 1]);
                    created++;
                } else {
                    free(h->v[i]);
                    h->v[i] = strdup(argv[a + 1]);
                }
            }
            if (pairs > KS_HASH_MAX_LISTPACK_ENTRIES || tooLong || h->n > KS_HASH_MAX_LISTPACK_ENTRIES) h->converted = 1;
            sfmt(&want, ":%d\r\n", created);
        } else if (op < 60) { /* HGET */
            snprintf(fbuf[2], sizeof(fbuf[2]), "f:%llu", test_rand(&rng) % (unsigned long long)pool);
            argv[argc++] = "HGET";
            argv[argc++] = keys[k];
            argv[argc++] = fbuf[2];
            int i = h->exists ? refFind(h, fbuf[2]) : -1;
            if (i >= 0) sbulk(&want, h->v[i]);
            else sfmt(&want, "$-1\r\n");
        } else if (op < 72) { /* HMGET */
            int nf = 1 + (int)(test_rand(&rng) % 6);
            argv[argc++] = "HMGET";
            argv[argc++] = keys[k];
            sfmt(&want, "*%d\r\n", nf);
            for (int j = 0; j < nf; j++) {
                snprintf(fbuf[argc], sizeof(fbuf[argc]), "f:%llu", test_rand(&rng) % (unsigned long long)pool);
                argv[argc] = fbuf[argc];
                int i = h->exists ? refFind(h, fbuf[argc]) : -1;
                if (i >= 0) sbulk(&want, h->v[i]);
                else sfmt(&want, "$-1\r\n");
                argc++;
            }
        } else if (op < 80) { /* HGETALL */
            argv[argc++] = "HGETALL";
            argv[argc++] = keys[k];
            sfmt(&want, "*%d\r\n", h->exists ? 2 * h->n : 0);
            for (int i = 0; h->exists && i < h->n; i++) {
                sbulk(&want, h->f[i]);
                sbulk(&want, h->v[i]);
            }
            unordered = h->exists && h->converted;
        } else if (op < 92) { /* HDEL */
            int nf = 1 + (int)(test_rand(&rng) % 3);
            argv[argc++] = "HDEL";
            argv[argc++] = keys[k];
            int deleted = 0;
            for (int j = 0; j < nf; j++) {
                snprintf(fbuf[argc], sizeof(fbuf[argc]), "f:%llu", test_rand(&rng) % (unsigned long long)pool);
                argv[argc] = fbuf[argc];
                argc++;
                if (!h->exists) continue;
                int i = refFind(h, argv[argc - 1]);
                if (i < 0) continue;
                free(h->f[i]);
                free(h->v[i]);
                memmove(&h->f[i], &h->f[i + 1], sizeof(char *) * (size_t)(h->n - i - 1));
                memmove(&h->v[i], &h->v[i + 1], sizeof(char *) * (size_t)(h->n - i - 1));
                h->n--;
                deleted++;
                if (h->n == 0) {
                    refClear(h);
                    break;
                }
            }
            sfmt(&want, ":%d\r\n", deleted);
        } else if (op < 95) { /* DEL */
            argv[argc++] = "DEL";
            argv[argc++] = keys[k];
            sfmt(&want, ":%d\r\n", h->exists);
            refClear(h);
        } else if (op < 97) { /* the other type, both ways */
            argv[argc++] = "GET";
            argv[argc++] = h->exists ? keys[k] : "s";
            if (h->exists) sfmt(&want, "%s", WRONG);
            else if (string_key) sbulk(&want, "str");
            else sfmt(&want, "$-1\r\n");
        } else if (op < 99) {
            argv[argc++] = "HGET";
            argv[argc++] = "s";
            argv[argc++] = "f:1";
            sfmt(&want, "%s", string_key ? WRONG : "$-1\r\n");
        } else { /* SET over a hash */
            argv[argc++] = "SET";
            argv[argc++] = string_key ? "s" : keys[k];
            argv[argc++] = "str";
            sfmt(&want, "+OK\r\n");
            if (!string_key) {
                refClear(h);
                TEST_ASSERT(!strcmp(run(ks, variant, 3, (const char *[]){"SET", "s", "str"}, NULL), "+OK\r\n"));
                string_key = 1;
                /* keys[k] now holds a string: delete it again so the reference stays simple */
                argv[0] = "DEL";
                argc = 2;
                want.len = 0;
                sfmt(&want, ":1\r\n");
                TEST_ASSERT(!strcmp(run(ks, variant, 3, (const char *[]){"SET", keys[k], "str"}, NULL), "+OK\r\n"));
            }
        }
        size_t rlen;
        const char *got = run(ks, variant, argc, argv, &rlen);
        TEST_ASSERT(got != NULL);
        if (unordered) {
            char *a = sortedPairs(got), *b = sortedPairs(want.buf);
            TEST_ASSERT_MSG(!strcmp(a, b), "%s %s step %d: HGETALL differs", options, variant, step);
            free(a);
            free(b);
        } else {
            TEST_ASSERT_MSG(rlen == want.len && !memcmp(got, want.buf, rlen), "%s %s step %d %s %s: got %.80s want %.80s",
                            options, variant, step, argv[0], argv[1], got, want.buf);
        }
        TEST_ASSERT_MSG(ksCheckValid(ks) == 0, "%s %s step %d: %s", options, variant, step, ksLastError(ks));
    }
    for (int i = 0; i < NKEYS; i++) refClear(&ref[i]);
    free(want.buf);
    ksDestroy(ks);
    return 0;
}

static const char *const OPTIONS[] = {
    "table=hashtable layout=unified", "table=hashtable layout=legacy", "table=dict layout=unified",
    "table=dict layout=legacy", "table=hashtable layout=unified cluster=1", "table=dict layout=legacy cluster=1",
};

static int test_differential(void) {
    const char *names = ksVariantNames("hash");
    char vs[256];
    snprintf(vs, sizeof(vs), "%s", names);
    for (size_t o = 0; o < sizeof(OPTIONS) / sizeof(OPTIONS[0]); o++) {
        for (char *save = NULL, *v = strtok_r(vs, "|", &save); v; v = strtok_r(NULL, "|", &save)) {
            char variant[64];
            snprintf(variant, sizeof(variant), "hash=%s", v);
            if (differential(OPTIONS[o], variant, test_seed + o, test_accurate ? 3000 : 700)) return 1;
        }
        snprintf(vs, sizeof(vs), "%s", names);
    }
    return 0;
}

/* --- Layouts and thresholds --------------------------------------------------------- */

static robj *hashObject(ksKeyspace *ks, const char *key) {
    ksCur = ks;
    ksKeyInfo ki;
    uint8_t kb[64];
    sds k = sdsWriteAt(kb, SDS_TYPE_8, key, strlen(key), strlen(key));
    ksKeyResolve(ks, k, &ki);
    void *e = ksDbFind(ks, &ki);
    return e ? ksEntryObject(ks, e, 0, NULL) : NULL;
}

static int test_layouts(void) {
    for (int t = 0; t < 2; t++) {
        ksKeyspace *ks = ksCreate(t ? "table=dict" : "table=hashtable");
        /* listpack: 6-byte header, "f:1" = 1 + 3 + 1 bytes, "abc" = 1 + 3 + 1, 0xFF */
        TEST_ASSERT(!strcmp(run(ks, "", 4, (const char *[]){"HSET", "h", "f:1", "abc"}, NULL), ":1\r\n"));
        robj *o = hashObject(ks, "h");
        TEST_ASSERT(o && o->type == OBJ_HASH && o->encoding == OBJ_ENCODING_LISTPACK);
        const uint8_t *lp = o->ptr;
        uint32_t total;
        memcpy(&total, lp, 4);
        TEST_ASSERT(total == 6 + 5 + 5 + 1 && lp[4] == 2 && lp[5] == 0);
        TEST_ASSERT(lp[6] == (0x80 | 3) && !memcmp(lp + 7, "f:1", 3) && lp[10] == 4 && lp[16] == 0xFF);
        /* a 64-byte value stays in the listpack (2-byte header), a 65-byte one converts */
        char v64[66];
        memset(v64, 'x', 65);
        v64[64] = 0;
        run(ks, "", 4, (const char *[]){"HSET", "h", "f:2", v64}, NULL);
        TEST_ASSERT(hashObject(ks, "h")->encoding == OBJ_ENCODING_LISTPACK);
        v64[64] = 'x';
        v64[65] = 0;
        run(ks, "", 4, (const char *[]){"HSET", "h", "f:3", v64}, NULL);
        o = hashObject(ks, "h");
        TEST_ASSERT(o->encoding == OBJ_ENCODING_HT && ksHashLength(ks, o) == 3);
        /* field-value entries: the entry pointer is the field; embedded iff both sds fit 128 bytes */
        ksCur = ks;
        void *tab = ksHashTable(o);
        void *e = NULL;
        sds f1 = "f:1";
        uint8_t fb[16];
        f1 = sdsWriteAt(fb, SDS_TYPE_8, "f:1", 3, 3);
        if (t) e = dictFetchStored(tab, f1, NULL);
        else TEST_ASSERT(hashtableFind(tab, f1, &e));
        TEST_ASSERT(e && !strcmp(e, "f:1") && ((uintptr_t)e & 1)); /* an sds: odd */
        size_t vl;
        const uint8_t *v = ksHashEntryValue(e, 0, &vl, NULL);
        TEST_ASSERT(vl == 3 && !memcmp(v, "abc", 3) && v == (const uint8_t *)e + 3 + 1 + 3); /* sdshdr5 field + hdr8 */
        TEST_ASSERT(ksHashEntryValuePrefetchAddr(e, 0, NULL) == NULL);
        sds f3 = sdsWriteAt(fb, SDS_TYPE_8, "f:3", 3, 3);
        if (t) e = dictFetchStored(tab, f3, NULL);
        else TEST_ASSERT(hashtableFind(tab, f3, &e));
        v = ksHashEntryValue(e, 0, &vl, NULL);
        /* 1 + 3 + 1 (field) + 3 + 65 + 1 (value) = 74 <= 128: still embedded */
        TEST_ASSERT(vl == 65 && v == (const uint8_t *)e + 3 + 1 + 3);
        char v200[201];
        memset(v200, 'y', 200);
        v200[200] = 0;
        run(ks, "", 4, (const char *[]){"HSET", "h", "f:4", v200}, NULL);
        sds f4 = sdsWriteAt(fb, SDS_TYPE_8, "f:4", 3, 3);
        if (t) e = dictFetchStored(ksHashTable(hashObject(ks, "h")), f4, NULL);
        else TEST_ASSERT(hashtableFind(ksHashTable(hashObject(ks, "h")), f4, &e));
        v = ksHashEntryValue(e, 0, &vl, NULL);
        /* by pointer: the field is an sdshdr8 after the 8-byte value pointer */
        TEST_ASSERT(vl == 200 && ksHashEntryValuePrefetchAddr(e, 0, NULL) == v - 3 - 0 && ((const char *)e)[-1] & 16);
        TEST_ASSERT(*(const char *const *)((const char *)e - 3 - 8) == (const char *)v);
        /* 513 fields convert a listpack; 512 do not */
        for (int n = 512; n <= 513; n++) {
            const char **argv = malloc(sizeof(char *) * (size_t)(2 + 2 * n));
            char(*fs)[16] = malloc(16 * (size_t)n);
            argv[0] = "HSET";
            argv[1] = n == 512 ? "a" : "b";
            for (int i = 0; i < n; i++) {
                snprintf(fs[i], 16, "f:%d", i);
                argv[2 + 2 * i] = fs[i];
                argv[3 + 2 * i] = "v";
            }
            run(ks, "", 2 + 2 * n, argv, NULL);
            TEST_ASSERT(hashObject(ks, argv[1])->encoding == (n == 512 ? OBJ_ENCODING_LISTPACK : OBJ_ENCODING_HT));
            free(argv);
            free(fs);
        }
        /* one more field converts "a" (hashTypeSet's length check) */
        run(ks, "", 4, (const char *[]){"HSET", "a", "new", "v"}, NULL);
        TEST_ASSERT(hashObject(ks, "a")->encoding == OBJ_ENCODING_HT && ksHashLength(ks, hashObject(ks, "a")) == 513);
        /* never back: deleting down to one field keeps the table */
        for (int i = 0; i < 512; i++) {
            char f[16];
            snprintf(f, sizeof(f), "f:%d", i);
            run(ks, "", 3, (const char *[]){"HDEL", "a", f}, NULL);
        }
        TEST_ASSERT(hashObject(ks, "a")->encoding == OBJ_ENCODING_HT && ksHashLength(ks, hashObject(ks, "a")) == 1);
        TEST_ASSERT(!strcmp(run(ks, "", 3, (const char *[]){"HDEL", "a", "new"}, NULL), ":1\r\n"));
        TEST_ASSERT(hashObject(ks, "a") == NULL && ksCheckValid(ks) == 0);
        /* snapshots model strings only: a SAVE with a hash is refused */
        const uint8_t *buf;
        size_t len;
        TEST_ASSERT(ksSaveSnapshot(ks, "", &buf, &len) == -1 && strstr(ksLastError(ks), "hash"));
        /* EXPIRE moves a unified hash into an object with an expire field */
        TEST_ASSERT(!strcmp(run(ks, "", 3, (const char *[]){"PEXPIRE", "h", "100000"}, NULL), ":1\r\n"));
        TEST_ASSERT(!strcmp(run(ks, "", 3, (const char *[]){"HGET", "h", "f:1"}, NULL), "$3\r\nabc\r\n"));
        TEST_ASSERT(ksCheckValid(ks) == 0);
        /* SCAN TYPE sees the types */
        const char *r = run(ks, "", 6, (const char *[]){"SCAN", "0", "TYPE", "hash", "COUNT", "100"}, NULL);
        TEST_ASSERT(strstr(r, "$1\r\nh\r\n") && strstr(r, "$1\r\nb\r\n"));
        r = run(ks, "", 6, (const char *[]){"SCAN", "0", "TYPE", "string", "COUNT", "100"}, NULL);
        TEST_ASSERT(strstr(r, "*0\r\n") != NULL);
        ksDestroy(ks);
    }
    return 0;
}

static int test_arity_and_errors(void) {
    ksKeyspace *ks = ksCreate("");
    TEST_ASSERT(!strcmp(run(ks, "", 3, (const char *[]){"HSET", "h", "f"}, NULL),
                        "-ERR wrong number of arguments for 'hset' command\r\n"));
    TEST_ASSERT(!strcmp(run(ks, "", 5, (const char *[]){"HSET", "h", "f", "v", "g"}, NULL),
                        "-ERR wrong number of arguments for 'hset' command\r\n"));
    TEST_ASSERT(!strcmp(run(ks, "", 2, (const char *[]){"HGET", "h"}, NULL),
                        "-ERR wrong number of arguments for 'hget' command\r\n"));
    TEST_ASSERT(!strcmp(run(ks, "", 2, (const char *[]){"HGETALL", "nope"}, NULL), "*0\r\n"));
    TEST_ASSERT(!strcmp(run(ks, "", 4, (const char *[]){"HMGET", "nope", "a", "b"}, NULL), "*2\r\n$-1\r\n$-1\r\n"));
    TEST_ASSERT(!strcmp(run(ks, "", 3, (const char *[]){"HDEL", "nope", "a"}, NULL), ":0\r\n"));
    run(ks, "", 3, (const char *[]){"SET", "s", "v"}, NULL);
    TEST_ASSERT(!strcmp(run(ks, "", 4, (const char *[]){"HSET", "s", "f", "v"}, NULL), WRONG));
    TEST_ASSERT(!strcmp(run(ks, "", 2, (const char *[]){"HGETALL", "s"}, NULL), WRONG));
    run(ks, "", 4, (const char *[]){"HSET", "h", "f", "v"}, NULL);
    TEST_ASSERT(!strcmp(run(ks, "", 3, (const char *[]){"MGET", "h", "s"}, NULL), "*2\r\n$-1\r\n$1\r\nv\r\n"));
    TEST_ASSERT(!strcmp(run(ks, "", 4, (const char *[]){"SET", "h", "x", "GET"}, NULL), WRONG));
    TEST_ASSERT(!strcmp(run(ks, "", 2, (const char *[]){"EXISTS", "h"}, NULL), ":1\r\n"));
    ksDestroy(ks);
    return 0;
}

/* --- Trace-level rules of the hash variants ------------------------------------------- */

static ksWorkloadSpec hashSpec(const char *op, const char *variant, const char *table, uint64_t fields, uint32_t vsize,
                               uint64_t ops, int depth) {
    ksWorkloadSpec s;
    ksWorkloadSpecInit(&s, "hash");
    s.keys = 1;
    s.hash_fields = fields;
    s.value_size = vsize;
    s.ops = ops;
    s.hash_op = op;
    s.variant = variant;
    s.table = table;
    s.pipeline_depth = depth;
    s.pipeline = depth > 1 ? "lookahead" : "naive";
    s.fields_per_command = 40;
    return s;
}

/* What a measured phase did: batches (sizes), commands per batch, prefetches. */
typedef struct {
    int batches, batch_sizes[256], cmds_in_batch[256];
    int bucket_prefetches, entry_prefetches, pf_key, pf_value, find_bucket_loads;
    int prefetch_after_command; /* a prefetch after a batch's first command */
    int order_bad;              /* 14988: entries, values, replies out of order */
} hashTraceStats;

static int traceStats(const ksWorkloadSpec *s, hashTraceStats *st) {
    memset(st, 0, sizeof(*st));
    size_t len;
    uint8_t *b = traceTo(s, &len, 4096);
    TEST_ASSERT(b != NULL);
    uint64_t n;
    kvtRecord *r = records(b, len, &n);
    int measured = 0, cmd_seen = 0, phase = 0; /* 14988 phases: 1 entries, 2 values, 3 replies */
    for (uint64_t i = 0; i < n; i++) {
        if (r[i].kind == KVT_MARKER) {
            if (r[i].flags == KVT_MARK_PHASE) measured = 1;
            if (!measured) continue;
            if (r[i].flags == KVT_MARK_BATCH && st->batches < 256) {
                st->batch_sizes[st->batches++] = (int)r[i].addr;
                cmd_seen = 0;
            }
            if (r[i].flags == KVT_MARK_COMMAND) {
                cmd_seen = 1;
                if (st->batches) st->cmds_in_batch[st->batches - 1]++;
            }
            continue;
        }
        if (!measured) continue;
        if (r[i].kind == KVT_PREFETCH) {
            if (r[i].site == KS_SITE_HT_INCR_PREFETCH_BUCKET) st->bucket_prefetches++;
            if (r[i].site == KS_SITE_HT_INCR_PREFETCH_ENTRY) st->entry_prefetches++;
            if (r[i].site == KS_SITE_PF_HASH && r[i].tag == KVT_TAG_KEY) {
                st->pf_key++;
                if (phase == 2) st->order_bad++; /* a value prefetch and then no reply */
                phase = 1;
            }
            if (r[i].site == KS_SITE_PF_HASH && r[i].tag == KVT_TAG_VALUE) {
                st->pf_value++;
                if (phase != 1 && phase != 2) st->order_bad++; /* not after its batch's entries */
                phase = 2;
            }
            if (cmd_seen && s->pipeline_depth > 1) st->prefetch_after_command++;
        }
        if (r[i].kind == KVT_LOAD && r[i].site == KS_SITE_HT_FIND_BUCKET) st->find_bucket_loads++;
        if (r[i].kind == KVT_STORE && r[i].tag == KVT_TAG_REPLY_BUF && phase) phase = 3; /* replies */
    }
    free(r);
    free(b);
    return 0;
}

/* Valkey #3940: one field per command, counted against the batch: 16 slots hold
 * 8 HGETs (key + field); every field's bucket and entry are prefetched in the
 * batch, before its commands run; no value prefetch.  #2180: HGET's field
 * outside the count (16 commands a batch), and the value when kept by pointer. */
static int test_nested_prefetch_rules(void) {
    for (int big = 0; big < 2; big++) {
        uint32_t vsize = big ? 200 : 100; /* 100: embedded in the entry; 200: by pointer */
        hashTraceStats none, n3940, n2180;
        ksWorkloadSpec s = hashSpec("hget", "none", "hashtable", 5000, vsize, 64, 16);
        TEST_ASSERT(traceStats(&s, &none) == 0);
        s.variant = "nested-3940";
        TEST_ASSERT(traceStats(&s, &n3940) == 0);
        s.variant = "value-2180";
        TEST_ASSERT(traceStats(&s, &n2180) == 0);
        TEST_ASSERT_MSG(none.batches == 4 && n2180.batches == 4 && n3940.batches == 8, "%d %d %d", none.batches,
                        n2180.batches, n3940.batches);
        for (int i = 0; i < 8; i++) {
            TEST_ASSERT(n3940.batch_sizes[i] == 16 && n3940.cmds_in_batch[i] == 8);
            if (i < 4) TEST_ASSERT(none.batch_sizes[i] == 16 && n2180.batch_sizes[i] == 16 && n2180.cmds_in_batch[i] == 16);
        }
        /* the key's bucket and entry each command; the field's too with the nested variants
         * (a field in a chained bucket may take more than one bucket prefetch) */
        TEST_ASSERT(none.bucket_prefetches == 64 && none.entry_prefetches == 64);
        TEST_ASSERT_MSG(n3940.bucket_prefetches >= 128 && n3940.entry_prefetches >= 128 && n3940.entry_prefetches <= 132,
                        "%d %d", n3940.bucket_prefetches, n3940.entry_prefetches);
        TEST_ASSERT(n2180.bucket_prefetches == n3940.bucket_prefetches && n2180.entry_prefetches == n3940.entry_prefetches);
        TEST_ASSERT(n3940.pf_value == 0 && none.pf_value == 0);
        TEST_ASSERT_MSG(n2180.pf_value == (big ? 64 : 0), "%d", n2180.pf_value);
        TEST_ASSERT(n3940.prefetch_after_command == 0 && n2180.prefetch_after_command == 0);
        /* on a listpack hash nothing nested happens */
        s = hashSpec("hget", "nested-3940", "hashtable", 50, 10, 64, 16);
        TEST_ASSERT(traceStats(&s, &n3940) == 0);
        TEST_ASSERT(n3940.bucket_prefetches == 64 && n3940.batches == 8);
    }
    return 0;
}

/* Valkey #4017: HMGET's fields looked up together, 16 at a time (40 fields: 16,
 * 16, 8), one bucket prefetch each, and no second lookup of any field. */
static int test_find_batch_rule(void) {
    hashTraceStats none, fb;
    ksWorkloadSpec s = hashSpec("hmget", "none", "hashtable", 5000, 100, 10, 1);
    TEST_ASSERT(traceStats(&s, &none) == 0);
    s.variant = "find-batch-4017";
    TEST_ASSERT(traceStats(&s, &fb) == 0);
    TEST_ASSERT(none.batches == 0 && none.bucket_prefetches == 0);
    TEST_ASSERT_MSG(fb.batches == 30, "%d", fb.batches);
    for (int i = 0; i < 30; i++) TEST_ASSERT(fb.batch_sizes[i] == (i % 3 == 2 ? 8 : 16));
    TEST_ASSERT(fb.bucket_prefetches >= 400 && fb.entry_prefetches >= 400);
    /* none: the key's and 40 fields' find per command; 4017: the key's only */
    TEST_ASSERT_MSG(none.find_bucket_loads == 410 && fb.find_bucket_loads == 10, "%d %d", none.find_bucket_loads,
                    fb.find_bucket_loads);
    return 0;
}

/* Redis #14988: HGETALL in batches of 16 (100 fields: 6 x 16 + 4): each batch
 * prefetches its 16 entries, then the values kept by pointer, then replies. */
static int test_getall_rule(void) {
    for (int t = 0; t < 2; t++) {
        for (int big = 0; big < 2; big++) {
            hashTraceStats none, g;
            ksWorkloadSpec s = hashSpec("hgetall", "none", t ? "dict" : "hashtable", 100, big ? 200 : 100, 3, 1);
            TEST_ASSERT(traceStats(&s, &none) == 0);
            s.variant = "getall-14988";
            TEST_ASSERT(traceStats(&s, &g) == 0);
            TEST_ASSERT(none.batches == 0 && none.pf_key == 0);
            TEST_ASSERT_MSG(g.batches == 21, "%d", g.batches);
            for (int i = 0; i < 21; i++) TEST_ASSERT(g.batch_sizes[i] == (i % 7 == 6 ? 4 : 16));
            TEST_ASSERT_MSG(g.pf_key == 300 && g.pf_value == (big ? 300 : 0) && g.order_bad == 0, "t%d big%d %d %d %d", t, big, g.pf_key, g.pf_value, g.order_bad);
        }
    }
    return 0;
}

/* batched == naive on the workload: the same replies under every hash variant,
 * pipelined or not, on both tables, small and large hashes, every command. */
static int test_variants_same_replies(void) {
    const char *ops[] = {"hget", "hmget", "hgetall", "hset"};
    const char *variants[] = {"none", "nested-3940", "value-2180", "find-batch-4017", "getall-14988"};
    for (int t = 0; t < 2; t++) {
        for (int o = 0; o < 4; o++) {
            for (int shape = 0; shape < 3; shape++) {
                uint32_t crc = 0;
                for (int v = 0; v < 5; v++) {
                    ksWorkloadSpec s = hashSpec(ops[o], variants[v], t ? "dict" : "hashtable",
                                                shape == 0 ? 20 : 1500, shape == 2 ? 200 : 30, 200, 1 + 7 * (shape != 1));
                    s.keys = shape == 0 ? 300 : 3;
                    s.fields_per_command = 19;
                    ksWorkloadResult r;
                    char err[256];
                    TEST_ASSERT_MSG(ksWorkloadRun(&s, &r, err, sizeof(err)) == 0, "%s", err);
                    if (v == 0) crc = r.reply_crc32;
                    TEST_ASSERT_MSG(r.reply_crc32 == crc, "%s %s %s shape %d", s.table, ops[o], variants[v], shape);
                }
            }
        }
    }
    return 0;
}

/* A hash workload's trace is deterministic; every dependency points back at a load; the
 * nested chain is recorded: the inner table's struct read depends on the hash
 * object's header load (object -> table_meta), once per HGET at least, on every
 * table and layout, with and without the nested variants. */
static int test_trace_dependencies(void) {
    const char *tables[] = {"hashtable", "dict"}, *layouts[] = {"unified", "legacy"};
    const char *variants[] = {"none", "nested-3940", "value-2180"};
    for (int t = 0; t < 2; t++) {
        for (int l = 0; l < 2; l++) {
            for (int v = 0; v < 3; v++) {
                ksWorkloadSpec s = hashSpec("hget", variants[v], tables[t], 3000, 200, 200, 16);
                s.layout = layouts[l];
                size_t len;
                uint8_t *b = traceTo(&s, &len, 1000);
                TEST_ASSERT(b != NULL);
                size_t len2; /* the same options twice: the same bytes */
                uint8_t *b2 = traceTo(&s, &len2, 1000);
                TEST_ASSERT(b2 && len2 == len && !memcmp(b, b2, len));
                free(b2);
                uint64_t n;
                kvtRecord *r = records(b, len, &n);
                uint64_t chained = 0;
                for (uint64_t i = 0; i < n; i++) {
                    if (!r[i].dep) continue;
                    TEST_ASSERT_MSG(r[i].dep <= i && r[i - r[i].dep].kind == KVT_LOAD, "%s %s %s: record %llu",
                                    tables[t], layouts[l], variants[v], (unsigned long long)i);
                    if (r[i].kind == KVT_LOAD && r[i].tag == KVT_TAG_TABLE_META &&
                        r[i - r[i].dep].tag == KVT_TAG_OBJECT)
                        chained++;
                }
                TEST_ASSERT_MSG(chained >= 200, "%s %s %s: %llu inner table reads after the object's", tables[t],
                                layouts[l], variants[v], (unsigned long long)chained);
                free(r);
                free(b);
            }
        }
    }
    return 0;
}

int main(int argc, char **argv) {
    TEST_INIT(argc, argv);
    RUN(test_layouts);
    RUN(test_trace_dependencies);
    RUN(test_nested_prefetch_rules);
    RUN(test_find_batch_rule);
    RUN(test_getall_rule);
    RUN(test_variants_same_replies);
    RUN(test_arity_and_errors);
    RUN(test_differential);
    return TEST_DONE();
}
