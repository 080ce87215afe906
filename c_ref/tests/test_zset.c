/*
 * test_zset.c -- the sorted set (t_zset.c, commands_zset.c): the layouts
 * pinned (listpack pairs in (score, member) order, skiplist nodes embedding
 * their member, the member table's items the nodes), the conversions at
 * upstream's thresholds, ZADD's flags (NX XX GT LT CH INCR) case by case, a
 * differential test of ZADD ZSCORE ZMSCORE ZREM (and their meeting with GET,
 * HGET, DEL) against a plain reference on every table,
 * layout and hash variant with ksCheckValid after each step, and Valkey
 * #3940's rule on sorted sets in the trace (one member per command, counted
 * against the batch) and #4017's on ZMSCORE (the members looked up together).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../d2string.h"
#include "../dict.h"
#include "../emit.h"
#include "../keyspace.h"
#include "../kvsim_cref.h"
#include "../t_hash.h"
#include "../t_zset.h"
#include "../workload.h"
#include "testhelp.h"
#include "traced.h"

/* Run one command and return its reply (a static copy, NUL-terminated). */
static const char *run(ksKeyspace *ks, const char *variant, int argc, const char **argv) {
    static char q[1 << 16], r[1 << 16];
    size_t n = (size_t)snprintf(q, sizeof(q), "*%d\r\n", argc);
    for (int i = 0; i < argc; i++) n += (size_t)snprintf(q + n, sizeof(q) - n, "$%zu\r\n%s\r\n", strlen(argv[i]), argv[i]);
    const uint8_t *reply;
    size_t len, consumed;
    if (ksExecute(ks, variant, (const uint8_t *)q, n, &reply, &len, &consumed)) return NULL;
    if (len >= sizeof(r)) len = sizeof(r) - 1;
    memcpy(r, reply, len);
    r[len] = 0;
    return r;
}

static robj *keyObject(ksKeyspace *ks, const char *key) {
    ksCur = ks;
    ksKeyInfo ki;
    uint8_t kb[64];
    sds k = sdsWriteAt(kb, SDS_TYPE_8, key, strlen(key), strlen(key));
    ksKeyResolve(ks, k, &ki);
    void *e = ksDbFind(ks, &ki);
    return e ? ksEntryObject(ks, e, 0, NULL) : NULL;
}

static const char *WRONG = "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n";

/* --- Layouts and thresholds ---------------------------------------------------------- */

/* --- A score's text: Valkey's d2string ------------------------------------------------ */

/* Texts the real Valkey (9.1) answered to ZSCORE for these scores, in a skiplist: the
 * specials, the integer path up to LLONG_MAX / 2, Grisu2's digits in each of fpconv's
 * layouts (integer, decimal, d.ddde+X without exponent zeros). */
static int test_d2string(void) {
    static const struct {
        double d;
        const char *text;
        int path;
    } cases[] = {
        {0.1, "0.1", KS_D2S_GRISU},
        {0.3, "0.3", KS_D2S_GRISU},
        {3, "3", KS_D2S_INTEGER},
        {-2.5, "-2.5", KS_D2S_GRISU},
        {1e300, "1e+300", KS_D2S_GRISU},
        {1e-7, "1e-7", KS_D2S_GRISU},
        {1.5e-7, "1.5e-7", KS_D2S_GRISU},
        {1e-5, "0.00001", KS_D2S_GRISU},
        {123456789.123456789, "1.2345678912345679e+8", KS_D2S_GRISU},
        {1234567.125, "1234567.125", KS_D2S_GRISU},
        {1e21, "1e+21", KS_D2S_GRISU},
        {4.6e18, "4600000000000000000", KS_D2S_INTEGER},
        {9.3e18, "9.3e+18", KS_D2S_GRISU},
        {5e-324, "5e-324", KS_D2S_GRISU},
        {1.7976931348623157e308, "1.7976931348623157e+308", KS_D2S_GRISU},
        {2.2250738585072014e-308, "2.2250738585072014e-308", KS_D2S_GRISU},
        {-1e-300, "-1e-300", KS_D2S_GRISU},
        {-0.0, "-0", KS_D2S_SPECIAL},
        {1.0 / 0.0, "inf", KS_D2S_SPECIAL},
        {-1.0 / 0.0, "-inf", KS_D2S_SPECIAL},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char buf[KS_D2STRING_MAX];
        int path, n = ksD2String(buf, cases[i].d, &path);
        TEST_ASSERT_MSG(!strcmp(buf, cases[i].text) && n == (int)strlen(buf) && path == cases[i].path,
                        "%.17g: '%s' path %d, want '%s'", cases[i].d, buf, path, cases[i].text);
    }
    /* every text reads back as its double (Grisu2 is exact, if not always shortest) */
    uint64_t x = 0x9E3779B97F4A7C15ull;
    for (int i = 0; i < 200000; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        double d;
        memcpy(&d, &x, sizeof(d));
        if (isnan(d)) continue;
        char buf[KS_D2STRING_MAX];
        int path;
        ksD2String(buf, d, &path);
        TEST_ASSERT_MSG(strtod(buf, NULL) == d, "%.17g -> '%s'", d, buf);
    }
    return 0;
}

static int test_layouts(void) {
    for (int t = 0; t < 2; t++) {
        ksKeyspace *ks = ksCreate(t ? "table=dict" : "table=hashtable");
        /* listpack: pairs sorted by score, then member; scores as their reply text */
        TEST_ASSERT(!strcmp(run(ks, "", 6, (const char *[]){"ZADD", "z", "2", "b", "1.5", "a"}), ":2\r\n"));
        robj *o = keyObject(ks, "z");
        TEST_ASSERT(o && o->type == OBJ_ZSET && o->encoding == OBJ_ENCODING_LISTPACK);
        const uint8_t *lp = o->ptr;
        static const uint8_t want[] = {0x80 | 1, 'a', 2, 0x80 | 3, '1', '.', '5', 4, 0x80 | 1, 'b', 2,
                                       0x80 | 1, '2', 2, 0xFF};
        TEST_ASSERT(ksLpTotal(lp) == KS_LISTPACK_HDR + sizeof(want) && ksLpCount(lp) == 4);
        TEST_ASSERT(!memcmp(lp + KS_LISTPACK_HDR, want, sizeof(want)));
        /* equal scores: member order */
        run(ks, "", 4, (const char *[]){"ZADD", "z", "1.5", "A"});
        TEST_ASSERT(!memcmp(((const uint8_t *)keyObject(ks, "z")->ptr) + KS_LISTPACK_HDR, (const uint8_t[]){0x81, 'A'}, 2));
        TEST_ASSERT(ksCheckValid(ks) == 0);
        /* 128 members stay a listpack, the 129th converts; a 65-byte member converts */
        char m[80], s[16];
        for (int i = 0; i < 128; i++) {
            snprintf(m, sizeof(m), "m%d", i);
            snprintf(s, sizeof(s), "%d", 128 - i);
            run(ks, "", 4, (const char *[]){"ZADD", "big", s, m});
        }
        TEST_ASSERT(keyObject(ks, "big")->encoding == OBJ_ENCODING_LISTPACK);
        run(ks, "", 4, (const char *[]){"ZADD", "big", "0", "one-more"});
        o = keyObject(ks, "big");
        TEST_ASSERT(o->encoding == OBJ_ENCODING_SKIPLIST && ksZsetLength(ks, o) == 129);
        TEST_ASSERT(ksCheckValid(ks) == 0);
        memset(m, 'x', 64);
        m[64] = 0;
        run(ks, "", 4, (const char *[]){"ZADD", "long", "1", m});
        TEST_ASSERT(keyObject(ks, "long")->encoding == OBJ_ENCODING_LISTPACK);
        char m64[80];
        memcpy(m64, m, sizeof(m64));
        m[64] = 'y', m[65] = 0;
        run(ks, "", 4, (const char *[]){"ZADD", "long", "1", m});
        TEST_ASSERT(keyObject(ks, "long")->encoding == OBJ_ENCODING_SKIPLIST);
        /* the member table's item is the node: score at byte 0, the member after the levels */
        o = keyObject(ks, "big");
        ksLoadId td;
        void *table = ksZsetTable(o, 0, &td);
        TEST_ASSERT(table != NULL);
        uint8_t mb[32];
        sds mem = sdsWriteAt(mb, SDS_TYPE_8, "m5", 2, 2);
        void *node = NULL;
        if (t) node = dictFetchStored(table, mem, NULL);
        else TEST_ASSERT(hashtableFind(table, mem, &node));
        TEST_ASSERT(node != NULL && ksZsetNodeScore(node, 0) == 123.0);
        unsigned long height;
        memcpy(&height, (const uint8_t *)node + 24, sizeof(height)); /* level 0's span: the height */
        const uint8_t *data = (const uint8_t *)node + 16 + 16 * height;
        TEST_ASSERT_MSG(height >= 1 && height <= 32 && data[0] == 1 && !memcmp(data + 2, "m5", 3), "h %lu", height);
        /* a sorted set does not convert back when it shrinks; ZREM of the last member drops the key */
        TEST_ASSERT(!strcmp(run(ks, "", 5, (const char *[]){"ZREM", "long", m, "nope", m64}), ":2\r\n"));
        TEST_ASSERT(!strcmp(run(ks, "", 2, (const char *[]){"EXISTS", "long"}), ":0\r\n"));
        ksDestroy(ks);
    }
    return 0;
}

static int test_replies_and_errors(void) {
    ksKeyspace *ks = ksCreate("table=hashtable");
    TEST_ASSERT(!strcmp(run(ks, "", 5, (const char *[]){"ZADD", "z", "1", "a", "2"}), "-ERR syntax error\r\n"));
    TEST_ASSERT(!strcmp(run(ks, "", 4, (const char *[]){"ZADD", "z", "x", "a"}), "-ERR value is not a valid float\r\n"));
    TEST_ASSERT(!strcmp(run(ks, "", 4, (const char *[]){"ZADD", "z", "nan", "a"}), "-ERR value is not a valid float\r\n"));
    TEST_ASSERT(!strcmp(run(ks, "", 6, (const char *[]){"ZADD", "z", "1", "a", " 2", "b"}),
                        "-ERR value is not a valid float\r\n"));
    TEST_ASSERT(!strcmp(run(ks, "", 2, (const char *[]){"EXISTS", "z"}), ":0\r\n")); /* nothing written */
    TEST_ASSERT(!strcmp(run(ks, "", 3, (const char *[]){"ZADD", "z", "1"}),
                        "-ERR wrong number of arguments for 'zadd' command\r\n"));
    TEST_ASSERT(!strcmp(run(ks, "", 6, (const char *[]){"ZADD", "z", "0.1", "a", "-inf", "b"}), ":2\r\n"));
    TEST_ASSERT(!strcmp(run(ks, "", 3, (const char *[]){"ZSCORE", "z", "a"}), "$3\r\n0.1\r\n"));
    TEST_ASSERT(!strcmp(run(ks, "", 3, (const char *[]){"ZSCORE", "z", "b"}), "$4\r\n-inf\r\n"));
    TEST_ASSERT(!strcmp(run(ks, "", 3, (const char *[]){"ZSCORE", "z", "c"}), "$-1\r\n"));
    TEST_ASSERT(!strcmp(run(ks, "", 3, (const char *[]){"ZSCORE", "nokey", "c"}), "$-1\r\n"));
    TEST_ASSERT(!strcmp(run(ks, "", 4, (const char *[]){"ZADD", "z", "1e300", "a"}), ":0\r\n"));
    TEST_ASSERT(!strcmp(run(ks, "", 3, (const char *[]){"ZSCORE", "z", "a"}), "$6\r\n1e+300\r\n"));
    TEST_ASSERT(!strcmp(run(ks, "", 2, (const char *[]){"GET", "z"}), WRONG));
    TEST_ASSERT(!strcmp(run(ks, "", 3, (const char *[]){"HGET", "z", "a"}), WRONG));
    run(ks, "", 3, (const char *[]){"SET", "s", "v"});
    TEST_ASSERT(!strcmp(run(ks, "", 3, (const char *[]){"ZSCORE", "s", "a"}), WRONG));
    TEST_ASSERT(!strcmp(run(ks, "", 4, (const char *[]){"ZADD", "s", "1", "a"}), WRONG));
    TEST_ASSERT(!strcmp(run(ks, "", 3, (const char *[]){"ZREM", "s", "a"}), WRONG));
    TEST_ASSERT(!strcmp(run(ks, "", 3, (const char *[]){"SET", "z", "v"}), "+OK\r\n")); /* SET replaces a zset */
    TEST_ASSERT(!strcmp(run(ks, "", 2, (const char *[]){"GET", "z"}), "$1\r\nv\r\n"));
    TEST_ASSERT(ksCheckValid(ks) == 0);
    ksDestroy(ks);
    return 0;
}

/* ZADD's flags (zaddGenericCommand, zsetAdd) on both encodings and tables: each
 * case's reply as Valkey gives it, the set valid after each. */
static int test_zadd_flags(void) {
    static const struct {
        int argc;
        const char *argv[8];
        const char *want;
    } cases[] = {
        {4, {"ZADD", "z", "1", "a"}, ":1\r\n"},
        {7, {"ZADD", "z", "NX", "2", "a", "3", "b"}, ":1\r\n"},               /* a kept, b added */
        {8, {"ZADD", "z", "xx", "ch", "5", "a", "6", "c"}, ":1\r\n"},         /* a updated, c not added */
        {8, {"ZADD", "z", "GT", "CH", "4", "a", "9", "b"}, ":1\r\n"},         /* a: 4 <= 5 kept; b: 3 -> 9 */
        {6, {"ZADD", "z", "LT", "INCR", "-1", "a"}, "$1\r\n4\r\n"},         /* 5 - 1 < 5 */
        {6, {"ZADD", "z", "LT", "INCR", "1", "a"}, "$-1\r\n"},               /* 4 + 1 >= 4: nothing */
        {5, {"ZADD", "z", "INCR", "inf", "a"}, "$3\r\ninf\r\n"},
        {5, {"ZADD", "z", "INCR", "-inf", "a"}, "-ERR resulting score is not a number (NaN)\r\n"},
        {3, {"ZSCORE", "z", "a"}, "$3\r\ninf\r\n"},                         /* left as it was */
        {6, {"ZADD", "z", "NX", "XX", "1", "a"}, "-ERR XX and NX options at the same time are not compatible\r\n"},
        {6, {"ZADD", "z", "GT", "LT", "1", "a"},
         "-ERR GT, LT, and/or NX options at the same time are not compatible\r\n"},
        {6, {"ZADD", "z", "nx", "gt", "1", "a"},
         "-ERR GT, LT, and/or NX options at the same time are not compatible\r\n"},
        {7, {"ZADD", "z", "INCR", "1", "a", "2", "b"}, "-ERR INCR option supports a single increment-element pair\r\n"},
        {4, {"ZADD", "z", "NX", "1"}, "-ERR syntax error\r\n"},               /* the flag eats the score */
        {5, {"ZADD", "z", "XX", "GT", "CH"}, "-ERR syntax error\r\n"},        /* no pair at all */
        {5, {"ZADD", "z", "CH", "nan", "x"}, "-ERR value is not a valid float\r\n"},
        {4, {"ZADD", "z", "1", "incr"}, ":1\r\n"},                            /* a member named incr */
        {5, {"ZADD", "new", "XX", "1", "a"}, ":0\r\n"},                       /* no key + XX: none made */
        {6, {"ZADD", "new", "XX", "INCR", "1", "a"}, "$-1\r\n"},
        {2, {"EXISTS", "new"}, ":0\r\n"},
        {6, {"ZADD", "new", "NX", "INCR", "2.5", "a"}, "$3\r\n2.5\r\n"},
        {6, {"ZADD", "new", "NX", "INCR", "1", "a"}, "$-1\r\n"},
        {8, {"ZADD", "new", "GT", "CH", "-1", "b", "2", "a"}, ":1\r\n"},      /* GT adds new members */
        {5, {"ZADD", "new", "CH", "2.5", "a"}, ":0\r\n"},                     /* the same score: no change */
        {6, {"ZMSCORE", "new", "a", "b", "c", "zz"}, "*4\r\n$3\r\n2.5\r\n$2\r\n-1\r\n$-1\r\n$-1\r\n"},
        {4, {"ZMSCORE", "nokey", "a", "b"}, "*2\r\n$-1\r\n$-1\r\n"},
        {2, {"ZMSCORE", "new"}, "-ERR wrong number of arguments for 'zmscore' command\r\n"},
    };
    const char *tables[] = {"table=hashtable", "table=dict"};
    for (int t = 0; t < 2; t++)
        for (int big = 0; big < 2; big++) { /* big: members past the listpack's limit first */
            ksKeyspace *ks = ksCreate(tables[t]);
            if (big) {
                for (int k = 0; k < 2; k++) {
                    const char *argv[2 + 2 * 130] = {"ZADD", k ? "new" : "z"};
                    static char mb[130][16];
                    for (int j = 0; j < 130; j++) {
                        snprintf(mb[j], 16, "pad:%d", j);
                        argv[2 + 2 * j] = "100", argv[3 + 2 * j] = mb[j];
                    }
                    TEST_ASSERT(!strcmp(run(ks, "", 262, argv), ":130\r\n"));
                    TEST_ASSERT(keyObject(ks, argv[1])->encoding == OBJ_ENCODING_SKIPLIST);
                }
            }
            for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                if (big && !strcmp(cases[i].argv[1], "new") && i < 20) continue; /* the cases of no key */
                const char *got = run(ks, big ? "hash=find-batch-4017" : "", cases[i].argc, (const char **)cases[i].argv);
                TEST_ASSERT_MSG(got && !strcmp(got, cases[i].want), "%s big %d case %zu: got %s", tables[t], big, i,
                                got ? got : "(null)");
                TEST_ASSERT(ksCheckValid(ks) == 0);
            }
            ksDestroy(ks);
        }
    return 0;
}

/* --- Differential against a plain reference -------------------------------------------- */

#define NKEYS 3
#define NMEMBERS 400
typedef struct {
    int type;                /* 0 absent, 1 zset, 2 string */
    int n;                   /* members present */
    int has[NMEMBERS];
    int score[NMEMBERS];     /* quarter units */
} refZset;

static int differential(const char *options, const char *variant, unsigned long long seed, int steps) {
    ksKeyspace *ks = ksCreate(options);
    TEST_ASSERT(ks != NULL);
    refZset ref[NKEYS] = {0};
    static const char *keys[NKEYS] = {"z0", "z1", "{z}2"};
    unsigned long long rng = seed;
    static char want[2048];
    for (int step = 0; step < steps; step++) {
        int k = (int)(test_rand(&rng) % NKEYS), op = (int)(test_rand(&rng) % 10);
        refZset *r = &ref[k];
        const char *got;
        if (op < 4) { /* ZADD of 1..4 pairs, or a burst past the listpack's entry limit */
            int burst = op == 3 && test_rand(&rng) % 4 == 0, np = burst ? 140 : 1 + (int)(test_rand(&rng) % 4);
            static char mbuf[160][16], sbuf[160][16];
            const char *argv[2 + 2 * 160] = {"ZADD", keys[k]};
            int base = (int)(test_rand(&rng) % NMEMBERS), mi[160], added = 0;
            for (int j = 0; j < np; j++) {
                mi[j] = burst ? (base + j) % NMEMBERS : (int)(test_rand(&rng) % (j % 2 ? NMEMBERS : 12));
                int sc = (int)(test_rand(&rng) % 41) - 20;
                snprintf(mbuf[j], 16, "m:%d", mi[j]);
                snprintf(sbuf[j], 16, "%g", sc / 4.0);
                argv[2 + 2 * j] = sbuf[j];
                argv[3 + 2 * j] = mbuf[j];
            }
            got = run(ks, variant, 2 + 2 * np, argv);
            if (r->type == 2) {
                snprintf(want, sizeof(want), "%s", WRONG);
            } else {
                if (r->type == 0) memset(r, 0, sizeof(*r)), r->type = 1;
                for (int j = 0; j < np; j++) {
                    double d = strtod(sbuf[j], NULL);
                    if (!r->has[mi[j]]) added++, r->n++;
                    r->has[mi[j]] = 1;
                    r->score[mi[j]] = (int)(d * 4);
                }
                snprintf(want, sizeof(want), ":%d\r\n", added);
            }
        } else if (op == 5 && test_rand(&rng) % 2) { /* ZMSCORE of 1..40 (batched past 1: #4017) */
            int np = 1 + (int)(test_rand(&rng) % 40), wl = 0;
            static char mb[40][16];
            const char *argv[42] = {"ZMSCORE", keys[k]};
            if (r->type == 2) snprintf(want, sizeof(want), "%s", WRONG);
            else wl = snprintf(want, sizeof(want), "*%d\r\n", np);
            for (int j = 0; j < np; j++) {
                int m = (int)(test_rand(&rng) % (j % 3 ? NMEMBERS : 12));
                snprintf(mb[j], 16, "m:%d", m);
                argv[2 + j] = mb[j];
                if (r->type == 2) continue;
                if (r->type == 0 || !r->has[m]) {
                    wl += snprintf(want + wl, sizeof(want) - (size_t)wl, "$-1\r\n");
                } else {
                    char sb[32];
                    int n = ksZsetFormatScore(r->score[m] / 4.0, sb);
                    wl += snprintf(want + wl, sizeof(want) - (size_t)wl, "$%d\r\n%s\r\n", n, sb);
                }
            }
            got = run(ks, variant, 2 + np, argv);
        } else if (op < 7) { /* ZSCORE */
            int m = (int)(test_rand(&rng) % (op == 6 ? NMEMBERS : 12));
            char mb[16];
            snprintf(mb, sizeof(mb), "m:%d", m);
            got = run(ks, variant, 3, (const char *[]){"ZSCORE", keys[k], mb});
            if (r->type == 2) {
                snprintf(want, sizeof(want), "%s", WRONG);
            } else if (r->type == 0 || !r->has[m]) {
                snprintf(want, sizeof(want), "$-1\r\n");
            } else {
                char sb[32];
                int n = ksZsetFormatScore(r->score[m] / 4.0, sb);
                snprintf(want, sizeof(want), "$%d\r\n%s\r\n", n, sb);
            }
        } else if (op == 7) { /* ZREM of 1..3 */
            int np = 1 + (int)(test_rand(&rng) % 3), mi[3], del = 0;
            char mb[3][16];
            const char *argv[5] = {"ZREM", keys[k]};
            for (int j = 0; j < np; j++) {
                mi[j] = (int)(test_rand(&rng) % 12);
                snprintf(mb[j], 16, "m:%d", mi[j]);
                argv[2 + j] = mb[j];
            }
            got = run(ks, variant, 2 + np, argv);
            if (r->type == 2) {
                snprintf(want, sizeof(want), "%s", WRONG);
            } else {
                for (int j = 0; j < np && r->type == 1; j++) {
                    if (!r->has[mi[j]]) continue;
                    r->has[mi[j]] = 0, r->n--, del++;
                    if (r->n == 0) r->type = 0; /* the key goes with its last member */
                }
                snprintf(want, sizeof(want), ":%d\r\n", del);
            }
        } else if (op == 8) { /* SET over anything */
            got = run(ks, variant, 3, (const char *[]){"SET", keys[k], "v"});
            memset(r, 0, sizeof(*r));
            r->type = 2;
            snprintf(want, sizeof(want), "+OK\r\n");
        } else { /* DEL */
            got = run(ks, variant, 2, (const char *[]){"DEL", keys[k]});
            snprintf(want, sizeof(want), ":%d\r\n", r->type ? 1 : 0);
            memset(r, 0, sizeof(*r));
        }
        TEST_ASSERT_MSG(got && !strcmp(got, want), "%s %s step %d op %d: got %s want %s", options, variant, step, op,
                        got ? got : "(null)", want);
        TEST_ASSERT_MSG(ksCheckValid(ks) == 0, "%s %s step %d: %s", options, variant, step, ksLastError(ks));
    }
    ksDestroy(ks);
    return 0;
}

static const char *const OPTIONS[] = {
    "table=hashtable layout=unified", "table=hashtable layout=legacy", "table=dict layout=unified",
    "table=dict layout=legacy", "table=hashtable layout=unified cluster=1",
};

static int test_differential(void) {
    const char *variants[] = {"", "pipeline=lookahead hash=nested-3940 batch=4", "pipeline=lookahead hash=value-2180",
                              "hash=find-batch-4017", "hash=getall-14988"};
    for (size_t o = 0; o < sizeof(OPTIONS) / sizeof(OPTIONS[0]); o++)
        for (size_t v = 0; v < sizeof(variants) / sizeof(variants[0]); v++)
            if (differential(OPTIONS[o], variants[v], test_seed + o * 7 + v, test_accurate ? 3000 : 600)) return 1;
    return 0;
}

/* --- #3940's rule on sorted sets, in the trace ------------------------------------------- */

static ksWorkloadSpec zsetSpec(const char *variant, uint64_t keys, uint64_t members, uint64_t ops, int depth) {
    ksWorkloadSpec s;
    ksWorkloadSpecInit(&s, "zscore");
    s.keys = keys;
    s.zset_members = members;
    s.ops = ops;
    s.variant = variant;
    s.table = "hashtable";
    s.pipeline_depth = depth;
    s.pipeline = depth > 1 ? "lookahead" : "naive";
    return s;
}

typedef struct {
    int batches, batch_sizes[256], cmds_in_batch[256];
    int bucket_prefetches, entry_prefetches, prefetch_after_command;
} zsetTraceStats;

static int traceStats(const ksWorkloadSpec *s, zsetTraceStats *st) {
    memset(st, 0, sizeof(*st));
    size_t len;
    uint8_t *b = traceTo(s, &len, 4096);
    TEST_ASSERT(b != NULL);
    uint64_t n;
    kvtRecord *r = records(b, len, &n);
    int measured = 0, cmd_seen = 0;
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
        if (!measured || r[i].kind != KVT_PREFETCH) continue;
        if (r[i].site == KS_SITE_HT_INCR_PREFETCH_BUCKET) st->bucket_prefetches++;
        if (r[i].site == KS_SITE_HT_INCR_PREFETCH_ENTRY) st->entry_prefetches++;
        if (cmd_seen) st->prefetch_after_command++;
    }
    free(r);
    free(b);
    return 0;
}

/* Valkey #3940 on ZSCORE: one member per command, counted against the batch: 16
 * slots hold 8 ZSCOREs (key + member); every member's bucket and entry in the
 * set's member table are prefetched in the batch, before its commands run.
 * Without it (none) and with value-2180 (HGET and HSET only) 16 ZSCOREs a batch
 * and only the keys' steps; on listpack sets nothing nested happens. */
static int test_nested_prefetch_rule(void) {
    zsetTraceStats none, n3940, n2180;
    ksWorkloadSpec s = zsetSpec("none", 50, 300, 64, 16);
    TEST_ASSERT(traceStats(&s, &none) == 0);
    s.variant = "nested-3940";
    TEST_ASSERT(traceStats(&s, &n3940) == 0);
    s.variant = "value-2180";
    TEST_ASSERT(traceStats(&s, &n2180) == 0);
    TEST_ASSERT_MSG(none.batches == 4 && n2180.batches == 4 && n3940.batches == 8, "%d %d %d", none.batches,
                    n2180.batches, n3940.batches);
    for (int i = 0; i < 8; i++) {
        TEST_ASSERT(n3940.batch_sizes[i] == 16 && n3940.cmds_in_batch[i] == 8);
        if (i < 4) TEST_ASSERT(none.batch_sizes[i] == 16 && none.cmds_in_batch[i] == 16 && n2180.cmds_in_batch[i] == 16);
    }
    /* keys: one entry step each and a bucket step each (more for a key in a chained
     * bucket); members: as many again, in the sets' member tables */
    TEST_ASSERT_MSG(none.bucket_prefetches >= 64 && none.entry_prefetches == 64, "%d %d", none.bucket_prefetches,
                    none.entry_prefetches);
    TEST_ASSERT(n2180.bucket_prefetches == none.bucket_prefetches && n2180.entry_prefetches == 64);
    TEST_ASSERT_MSG(n3940.bucket_prefetches >= none.bucket_prefetches + 64 && n3940.entry_prefetches >= 128 &&
                        n3940.entry_prefetches <= 136,
                    "%d %d", n3940.bucket_prefetches, n3940.entry_prefetches);
    TEST_ASSERT(n3940.prefetch_after_command == 0 && none.prefetch_after_command == 0);
    /* listpack sets (100 members): the member is counted, nothing nested is prefetched */
    s = zsetSpec("nested-3940", 50, 100, 64, 16);
    TEST_ASSERT(traceStats(&s, &n3940) == 0);
    TEST_ASSERT_MSG(n3940.bucket_prefetches == none.bucket_prefetches && n3940.entry_prefetches == 64 &&
                        n3940.batches == 8,
                    "%d %d", n3940.bucket_prefetches, n3940.batches);
    /* table=dict (Redis): #3940 is Valkey's, no member step: the dict's own key prefetches only */
    s = zsetSpec("none", 50, 300, 64, 16);
    s.table = "dict";
    TEST_ASSERT(traceStats(&s, &none) == 0);
    s.variant = "nested-3940";
    TEST_ASSERT(traceStats(&s, &n3940) == 0);
    TEST_ASSERT(n3940.bucket_prefetches == none.bucket_prefetches && n3940.entry_prefetches == none.entry_prefetches);
    return 0;
}

/* Valkey #4017 on ZMSCORE: with two or more members on a skiplist's member table
 * (table=hashtable) the members are looked up together, 16 at a time (40: 16 + 16
 * + 8, one BATCH marker each, every member's bucket prefetched), and the member
 * table's own find (ht.find.bucket) is left to the key's lookup; a listpack set,
 * table=dict or one member: one zsetScore per member, no batch. */
static int test_zmscore_find_batch_rule(void) {
    for (int shape = 0; shape < 4; shape++) {
        ksWorkloadSpec s = zsetSpec("find-batch-4017", 40, shape == 1 ? 100 : 300, 10, 1);
        s.workload = "zmscore";
        s.table = shape == 2 ? "dict" : "hashtable";
        s.fields_per_command = shape == 3 ? 1 : 40;
        zsetTraceStats fb;
        TEST_ASSERT(traceStats(&s, &fb) == 0);
        if (shape == 0) {
            TEST_ASSERT_MSG(fb.batches == 30, "%d", fb.batches);
            for (int i = 0; i < 30; i++) TEST_ASSERT(fb.batch_sizes[i] == (i % 3 == 2 ? 8 : 16));
            TEST_ASSERT_MSG(fb.bucket_prefetches >= 400, "%d", fb.bucket_prefetches);
        } else {
            TEST_ASSERT_MSG(fb.batches == 0 && fb.bucket_prefetches == 0, "shape %d: %d batches", shape, fb.batches);
        }
    }
    return 0;
}

/* The workload's replies are the variant's business only in speed: the same
 * reply bytes with and without the nested prefetch. */
static int test_workload_same_replies(void) {
    const char *variants[] = {"none", "nested-3940", "value-2180", "find-batch-4017"};
    for (int w = 0; w < 2; w++)
        for (int t = 0; t < 2; t++) {
            uint64_t crc0 = 0;
            for (int v = 0; v < 4; v++) {
                ksWorkloadSpec s = zsetSpec(variants[v], 200, 300, w ? 200 : 500, 16);
                if (w) {
                    s.workload = "zmscore";
                    s.fields_per_command = 20;
                }
                s.table = t ? "dict" : "hashtable";
                ksWorkloadResult res;
                char err[256] = "";
                TEST_ASSERT_MSG(ksWorkloadRun(&s, &res, err, sizeof(err)) == 0, "%s", err);
                if (v == 0) crc0 = res.reply_crc32;
                TEST_ASSERT_MSG(res.reply_crc32 == crc0 && res.reply_bytes > 0, "%s %s", s.workload, variants[v]);
            }
        }
    return 0;
}

int main(int argc, char **argv) {
    TEST_INIT(argc, argv);
    RUN(test_d2string);
    RUN(test_layouts);
    RUN(test_replies_and_errors);
    RUN(test_zadd_flags);
    RUN(test_nested_prefetch_rule);
    RUN(test_zmscore_find_batch_rule);
    RUN(test_workload_same_replies);
    RUN(test_differential);
    return TEST_DONE();
}
