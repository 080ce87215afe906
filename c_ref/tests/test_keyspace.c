/*
 * test_keyspace.c -- the keyspace through its public API (kvsim_cref.h):
 * command semantics and replies, protocol errors and fuzzing, expiry, every
 * variant against its naive counterpart, snapshots, memory accounting,
 * cluster mode, and the test-only broken variant.
 * Flags: --seed N, --accurate.
 */
#include <stdarg.h>
#include <stdint.h>

#include "../keyspace.h"
#include "../kvsim_cref.h"
#include "testhelp.h"

/* --- Helpers --------------------------------------------------------------- */

static char reply[1 << 16];

/* Build a RESP command from argv strings. */
static size_t resp(char *buf, size_t cap, int argc, const char **argv) {
    size_t n = (size_t)snprintf(buf, cap, "*%d\r\n", argc);
    for (int i = 0; i < argc; i++) n += (size_t)snprintf(buf + n, cap - n, "$%zu\r\n%s\r\n", strlen(argv[i]), argv[i]);
    return n;
}

/* Execute one command given as space-separated words; returns the reply. */
static const char *cmd(ksKeyspace *ks, const char *variant, const char *line) {
    char copy[4096], q[8192];
    const char *argv[256];
    int argc = 0;
    snprintf(copy, sizeof(copy), "%s", line);
    for (char *s = NULL, *t = strtok_r(copy, " ", &s); t && argc < 256; t = strtok_r(NULL, " ", &s)) argv[argc++] = t;
    size_t n = resp(q, sizeof(q), argc, argv);
    const uint8_t *r;
    size_t rl, consumed;
    if (ksExecute(ks, variant, (const uint8_t *)q, n, &r, &rl, &consumed)) return ksLastError(ks);
    if (rl >= sizeof(reply)) rl = sizeof(reply) - 1;
    memcpy(reply, r, rl);
    reply[rl] = '\0';
    return reply;
}

static const char *raw(ksKeyspace *ks, const char *q, size_t *consumed) {
    const uint8_t *r;
    size_t rl;
    if (ksExecute(ks, "", (const uint8_t *)q, strlen(q), &r, &rl, consumed)) return ksLastError(ks);
    if (rl >= sizeof(reply)) rl = sizeof(reply) - 1;
    memcpy(reply, r, rl);
    reply[rl] = '\0';
    return reply;
}

#define EXPECT(ks, line, want)                                                                     \
    do {                                                                                           \
        const char *_got = cmd(ks, "", line);                                                      \
        TEST_ASSERT_MSG(strcmp(_got, want) == 0, "%s -> %s (want %s)", line, _got, want);          \
    } while (0)

#define VALID(ks) TEST_ASSERT_MSG(ksCheckValid(ks) == 0, "%s", ksLastError(ks))

/* --- Tests ----------------------------------------------------------------- */

static int test_create_options(void) {
    TEST_ASSERT(ksCreate("bogus=1") == NULL && strstr(ksLastError(NULL), "unknown option"));
    TEST_ASSERT(ksCreate("layout=weird") == NULL);
    ksKeyspace *ks = ksCreate("table=hashtable layout=legacy cluster=1 seed=7 hashtable_min_exp=2");
    TEST_ASSERT(ks != NULL);
    const uint8_t *r;
    size_t rl, c;
    TEST_ASSERT(ksExecute(ks, "pipeline=bogus", (const uint8_t *)"", 0, &r, &rl, &c) == -1);
    TEST_ASSERT(strstr(ksLastError(ks), "unknown pipeline variant 'bogus'") != NULL);
    TEST_ASSERT(ksExecute(ks, "batch=0", (const uint8_t *)"", 0, &r, &rl, &c) == -1);
    TEST_ASSERT(ksExecute(ks, "pipeline=lookahead batch=128 multikey=batch load=prefetch-rehash iterate=valkey",
                          (const uint8_t *)"", 0, &r, &rl, &c) == 0);
    ksDestroy(ks);
    return 0;
}

static int test_string_commands(void) {
    const char *layouts[] = {"layout=unified", "layout=legacy", "layout=unified cluster=1"};
    for (int l = 0; l < 3; l++) {
        ksKeyspace *ks = ksCreate(layouts[l]);
        EXPECT(ks, "GET a", "$-1\r\n");
        EXPECT(ks, "SET a hello", "+OK\r\n");
        EXPECT(ks, "GET a", "$5\r\nhello\r\n");
        EXPECT(ks, "SET a world NX", "$-1\r\n");
        EXPECT(ks, "SET b x XX", "$-1\r\n");
        EXPECT(ks, "SET a world XX", "+OK\r\n");
        EXPECT(ks, "SET a v2 GET", "$5\r\nworld\r\n");
        EXPECT(ks, "SET a v NX XX", "-ERR syntax error\r\n");
        EXPECT(ks, "SET a v EX 0", "-ERR invalid expire time in 'set' command\r\n");
        EXPECT(ks, "SET a v EX x", "-ERR value is not an integer or out of range\r\n");
        EXPECT(ks, "SET", "-ERR wrong number of arguments for 'set' command\r\n");
        EXPECT(ks, "GET a b", "-ERR wrong number of arguments for 'get' command\r\n");
        EXPECT(ks, "FOO bar baz", "-ERR unknown command 'FOO', with args beginning with: 'bar' 'baz' \r\n");
        EXPECT(ks, "EXISTS a b a", ":2\r\n");
        EXPECT(ks, "MSET k1 v1 k2 v2 {t}x 1 {t}y 2", "+OK\r\n");
        EXPECT(ks, "MSET k1", "-ERR wrong number of arguments for 'mset' command\r\n");
        EXPECT(ks, "MSET k1 v1 k2", "-ERR wrong number of arguments for 'mset' command\r\n");
        EXPECT(ks, "MGET k1 nope k2", "*3\r\n$2\r\nv1\r\n$-1\r\n$2\r\nv2\r\n");
        EXPECT(ks, "MSETNX k1 z new z", ":0\r\n");
        EXPECT(ks, "EXISTS new", ":0\r\n");
        EXPECT(ks, "MSETNX n1 a n2 b", ":1\r\n");
        EXPECT(ks, "DBSIZE", ":7\r\n");
        EXPECT(ks, "DEL k1 k1 nope n2", ":2\r\n");
        EXPECT(ks, "DBSIZE", ":5\r\n");
        EXPECT(ks, "KEYS {t}*", "*2\r\n$4\r\n{t}x\r\n$4\r\n{t}y\r\n");
        EXPECT(ks, "FLUSHALL", "+OK\r\n");
        EXPECT(ks, "DBSIZE", ":0\r\n");
        EXPECT(ks, "KEYS *", "*0\r\n");
        VALID(ks);
        ksDestroy(ks);
    }
    return 0;
}

static int test_keys_sorted_match(void) {
    ksKeyspace *ks = ksCreate("");
    EXPECT(ks, "MSET hello 1 hallo 2 hxllo 3 hllo 4 heeeello 5", "+OK\r\n");
    /* KEYS order depends on hashing; check counts via the array header. */
    TEST_ASSERT(strncmp(cmd(ks, "", "KEYS h?llo"), "*3\r\n", 4) == 0);
    TEST_ASSERT(strncmp(cmd(ks, "", "KEYS h*llo"), "*5\r\n", 4) == 0);
    TEST_ASSERT(strncmp(cmd(ks, "", "KEYS h[ae]llo"), "*2\r\n", 4) == 0);
    TEST_ASSERT(strncmp(cmd(ks, "", "KEYS h[^e]llo"), "*2\r\n", 4) == 0);
    TEST_ASSERT(strncmp(cmd(ks, "", "KEYS h[a-b]llo"), "*1\r\n", 4) == 0);
    TEST_ASSERT(ksStringMatch("a\\*b", 4, "a*b", 3) && !ksStringMatch("a\\*b", 4, "axb", 3));
    ksDestroy(ks);
    return 0;
}

static int test_expiry(void) {
    const char *layouts[] = {"layout=unified", "layout=legacy", "layout=legacy cluster=1"};
    for (int l = 0; l < 3; l++) {
        ksKeyspace *ks = ksCreate(layouts[l]);
        ksSetTimeMs(ks, 1000);
        EXPECT(ks, "SET a 1 PX 100", "+OK\r\n");
        EXPECT(ks, "SET b 2 EX 10", "+OK\r\n");
        EXPECT(ks, "SET c 3", "+OK\r\n");
        EXPECT(ks, "TTL a", ":0\r\n");
        EXPECT(ks, "PTTL a", ":100\r\n");
        EXPECT(ks, "TTL b", ":10\r\n");
        EXPECT(ks, "TTL c", ":-1\r\n");
        EXPECT(ks, "TTL nope", ":-2\r\n");
        EXPECT(ks, "EXPIRE c 5", ":1\r\n");
        EXPECT(ks, "EXPIRE c 9 NX", ":0\r\n");
        EXPECT(ks, "EXPIRE c 9 GT", ":1\r\n");
        EXPECT(ks, "PEXPIRE c 100 LT", ":1\r\n");
        EXPECT(ks, "EXPIRE nope 5", ":0\r\n");
        EXPECT(ks, "EXPIRE c x", "-ERR value is not an integer or out of range\r\n");
        EXPECT(ks, "EXPIRE c 5 BOGUS", "-ERR Unsupported option BOGUS\r\n");
        ksSetTimeMs(ks, 1100);
        EXPECT(ks, "GET a", "$1\r\n1\r\n"); /* expires strictly after its time */
        ksSetTimeMs(ks, 1101);
        EXPECT(ks, "DBSIZE", ":3\r\n");     /* lazily expired: still counted */
        EXPECT(ks, "KEYS *", "*1\r\n$1\r\nb\r\n");
        EXPECT(ks, "GET a", "$-1\r\n");
        EXPECT(ks, "DBSIZE", ":2\r\n");
        EXPECT(ks, "EXISTS c", ":0\r\n");
        EXPECT(ks, "SET b 3", "+OK\r\n"); /* SET clears the TTL */
        EXPECT(ks, "TTL b", ":-1\r\n");
        EXPECT(ks, "SET b 4 EX 1", "+OK\r\n");
        EXPECT(ks, "SET b 5 KEEPTTL", "+OK\r\n");
        EXPECT(ks, "PTTL b", ":1000\r\n");
        EXPECT(ks, "EXPIRE b -1", ":1\r\n"); /* past: deleted */
        EXPECT(ks, "EXISTS b", ":0\r\n");
        VALID(ks);
        ksDestroy(ks);
    }
    return 0;
}

static int test_protocol_errors(void) {
    ksKeyspace *ks = ksCreate("");
    size_t c;
    TEST_ASSERT(strcmp(raw(ks, "*1\r\n$4\r\nPING\r\n*x\r\n", &c),
                       "-ERR unknown command 'PING', with args beginning with: \r\n-ERR Protocol error: invalid multibulk length\r\n") == 0);
    TEST_ASSERT(c == strlen("*1\r\n$4\r\nPING\r\n*x\r\n"));
    TEST_ASSERT(strcmp(raw(ks, "*1\r\n+OK\r\n", &c), "-ERR Protocol error: expected '$', got '+'\r\n") == 0);
    TEST_ASSERT(strcmp(raw(ks, "*1\r\n$-5\r\n", &c), "-ERR Protocol error: invalid bulk length\r\n") == 0);
    TEST_ASSERT(strcmp(raw(ks, "*1\r\n$abc\r\n", &c), "-ERR Protocol error: invalid bulk length\r\n") == 0);
    TEST_ASSERT(strcmp(raw(ks, "*2\r\n$3\r\nGET\r\n$1\r\n", &c), "") == 0 && c == 0); /* incomplete */
    TEST_ASSERT(strcmp(raw(ks, "SET \"a b\" c\r\nGET \"a b\"\r\n", &c), "+OK\r\n$1\r\nc\r\n") == 0);
    TEST_ASSERT(strcmp(raw(ks, "GET \"abc\r\n", &c), "-ERR Protocol error: unbalanced quotes in request\r\n") == 0);
    TEST_ASSERT(strcmp(raw(ks, "*0\r\n*-1\r\n\r\n", &c), "") == 0);
    char big[70000];
    memset(big, 'a', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    TEST_ASSERT(strcmp(raw(ks, big, &c), "-ERR Protocol error: too big inline request\r\n") == 0);
    big[0] = '*';
    TEST_ASSERT(strcmp(raw(ks, big, &c), "-ERR Protocol error: too big mbulk count string\r\n") == 0);
    VALID(ks);
    ksDestroy(ks);
    return 0;
}

/* Random bytes and mutated commands never crash or hang. */
static int test_fuzz(void) {
    ksKeyspace *ks = ksCreate("cluster=1");
    unsigned long long r = test_seed;
    const char *pieces[] = {"*", "$", "\r\n", "3", "-1", "GET", "SET", "MSET", "k", "\"", "'", " ", "\\x4", "99999999999", "0", "\n"};
    int iters = test_accurate ? 200000 : 20000;
    for (int i = 0; i < iters; i++) {
        char q[512];
        size_t n = 0;
        int parts = (int)(test_rand(&r) % 24);
        for (int p = 0; p < parts; p++) {
            if (test_rand(&r) % 4 == 0) {
                q[n++] = (char)(test_rand(&r) & 0xff);
            } else {
                const char *s = pieces[test_rand(&r) % (sizeof(pieces) / sizeof(pieces[0]))];
                size_t l = strlen(s);
                if (n + l >= sizeof(q)) break;
                memcpy(q + n, s, l);
                n += l;
            }
        }
        const uint8_t *rep;
        size_t rl, c;
        const char *variant = (i & 1) ? "pipeline=lookahead batch=3 multikey=batch" : "";
        TEST_ASSERT(ksExecute(ks, variant, (const uint8_t *)q, n, &rep, &rl, &c) == 0);
        TEST_ASSERT(c <= n);
    }
    VALID(ks);
    ksDestroy(ks);
    return 0;
}

/* --- Variants equal naive ------------------------------------------------- */

/* A random command stream over a small key range, with expiry and multi-key
 * commands; the clock advances between chunks. */
static size_t genStream(unsigned long long *r, char *q, size_t cap, int ncmds, int nkeys) {
    size_t n = 0;
    char k[8][32], v[64];
    for (int i = 0; i < ncmds && n + 2048 < cap; i++) {
        const char *argv[20];
        int argc = 0;
        int op = (int)(test_rand(r) % 100);
        int nk = 1 + (int)(test_rand(r) % 7);
        for (int j = 0; j < nk; j++) snprintf(k[j], sizeof(k[j]), "k%s%llu", (test_rand(r) % 5 == 0) ? "{t}" : "", test_rand(r) % (unsigned long long)nkeys);
        int vl = (int)(test_rand(r) % 60);
        memset(v, 'a' + (int)(test_rand(r) % 26), (size_t)vl);
        v[vl] = '\0';
        if (op < 35) { argv[argc++] = "GET"; argv[argc++] = k[0]; }
        else if (op < 55) { argv[argc++] = "SET"; argv[argc++] = k[0]; argv[argc++] = v; if (op % 4 == 0) { argv[argc++] = "PX"; argv[argc++] = "50"; } }
        else if (op < 62) { argv[argc++] = "DEL"; argv[argc++] = k[0]; argv[argc++] = k[1]; }
        else if (op < 72) { argv[argc++] = "MGET"; for (int j = 0; j < nk; j++) argv[argc++] = k[j]; }
        else if (op < 80) { argv[argc++] = "MSET"; for (int j = 0; j < nk; j++) { argv[argc++] = k[j]; argv[argc++] = v; } }
        else if (op < 84) { argv[argc++] = "MSETNX"; for (int j = 0; j < nk; j++) { argv[argc++] = k[j]; argv[argc++] = v; } }
        else if (op < 88) { argv[argc++] = "PEXPIRE"; argv[argc++] = k[0]; argv[argc++] = "20"; }
        else if (op < 92) { argv[argc++] = "PTTL"; argv[argc++] = k[0]; }
        else if (op < 95) { argv[argc++] = "EXISTS"; argv[argc++] = k[0]; argv[argc++] = k[1]; }
        else if (op < 97) { argv[argc++] = "DBSIZE"; }
        else { argv[argc++] = "KEYS"; argv[argc++] = "k{t}1*"; }
        n += resp(q + n, cap - n, argc, argv);
    }
    return n;
}

static int compareRuns(const char *opts, const char *variant, int rounds) {
    ksKeyspace *a = ksCreate(opts), *b = ksCreate(opts);
    TEST_ASSERT(a && b);
    size_t cap = 1 << 20;
    char *q = malloc(cap);
    unsigned long long r = test_seed ^ 0x5eed;
    for (int round = 0; round < rounds; round++) {
        size_t n = genStream(&r, q, cap, 300, round < rounds / 2 ? 200 : 3000);
        int64_t now = round * 10;
        ksSetTimeMs(a, now);
        ksSetTimeMs(b, now);
        const uint8_t *ra, *rb;
        size_t la, lb, ca, cb;
        TEST_ASSERT(ksExecute(a, "", (const uint8_t *)q, n, &ra, &la, &ca) == 0);
        char *copy = malloc(la + 1);
        memcpy(copy, ra, la);
        TEST_ASSERT(ksExecute(b, variant, (const uint8_t *)q, n, &rb, &lb, &cb) == 0);
        TEST_ASSERT_MSG(la == lb && memcmp(copy, rb, la) == 0 && ca == cb, "replies differ: %s / %s round %d", opts, variant, round);
        free(copy);
        if (round % 10 == 0) {
            VALID(a);
            VALID(b);
        }
    }
    TEST_ASSERT(ksDbSize(a) == ksDbSize(b));
    /* Same final keyspace: snapshots (naive iteration) must be identical. */
    const uint8_t *sa, *sb;
    size_t sla, slb;
    TEST_ASSERT(ksSaveSnapshot(a, "", &sa, &sla) == 0);
    char *copy = malloc(sla);
    memcpy(copy, sa, sla);
    TEST_ASSERT(ksSaveSnapshot(b, "", &sb, &slb) == 0);
    TEST_ASSERT_MSG(sla == slb && memcmp(copy, sb, sla) == 0, "snapshots differ: %s / %s", opts, variant);
    free(copy);
    free(q);
    ksDestroy(a);
    ksDestroy(b);
    return 0;
}

static int test_variants_equal_naive(void) {
    const char *opts[] = {"", "layout=legacy", "cluster=1", "hashtable_min_exp=1 layout=legacy cluster=1", "hashtable_min_exp=3"};
    const char *variants[] = {"pipeline=lookahead", "pipeline=lookahead batch=1", "pipeline=lookahead batch=128",
                              "multikey=batch", "pipeline=lookahead batch=5 multikey=batch"};
    int rounds = test_accurate ? 200 : 40;
    for (size_t o = 0; o < sizeof(opts) / sizeof(opts[0]); o++)
        for (size_t v = 0; v < sizeof(variants) / sizeof(variants[0]); v++)
            if (compareRuns(opts[o], variants[v], rounds)) return 1;
    return 0;
}

/* --- Snapshots ------------------------------------------------------------- */

static int fillKeyspace(ksKeyspace *ks, int n, int vsize) {
    char q[1 << 16];
    for (int base = 0; base < n; base += 100) {
        size_t len = 0;
        for (int i = base; i < base + 100 && i < n; i++) {
            char k[32], v[8192];
            snprintf(k, sizeof(k), "key:%d", i);
            int vl = vsize ? vsize : 1 + i % 300;
            memset(v, 'a' + i % 26, (size_t)vl);
            v[vl] = '\0';
            const char *argv[] = {"SET", k, v, "PX", "100000"};
            len += resp(q + len, sizeof(q) - len, i % 3 ? 3 : 5, argv);
        }
        const uint8_t *r;
        size_t rl, c;
        TEST_ASSERT(ksExecute(ks, "", (const uint8_t *)q, len, &r, &rl, &c) == 0);
    }
    return 0;
}

static int test_snapshot_roundtrip(void) {
    const char *opts[] = {"", "layout=legacy", "cluster=1"};
    const char *loadv[] = {"load=none", "load=prefetch-after-key", "load=prefetch-rehash"};
    const char *iterv[] = {"iterate=none", "iterate=next-bucket", "iterate=valkey"};
    for (int o = 0; o < 3; o++) {
        ksKeyspace *src = ksCreate(opts[o]);
        if (fillKeyspace(src, 3000, 0)) return 1;
        const uint8_t *s0;
        size_t l0;
        TEST_ASSERT(ksSaveSnapshot(src, "", &s0, &l0) == 0);
        uint8_t *snap = malloc(l0);
        memcpy(snap, s0, l0);
        for (int i = 0; i < 3; i++) { /* every iterate variant saves the same bytes */
            const uint8_t *s;
            size_t l;
            TEST_ASSERT(ksSaveSnapshot(src, iterv[i], &s, &l) == 0);
            TEST_ASSERT(l == l0 && memcmp(s, snap, l) == 0);
        }
        for (int v = 0; v < 3; v++) {
            ksKeyspace *dst = ksCreate(opts[o]);
            EXPECT(dst, "SET old 1", "+OK\r\n");
            TEST_ASSERT_MSG(ksLoadSnapshot(dst, loadv[v], snap, l0) == 0, "%s", ksLastError(dst));
            TEST_ASSERT(ksDbSize(dst) == 3000);
            EXPECT(dst, "EXISTS old", ":0\r\n");
            EXPECT(dst, "TTL key:3", ":100\r\n");
            EXPECT(dst, "TTL key:4", ":-1\r\n");
            VALID(dst);
            const uint8_t *s;
            size_t l;
            TEST_ASSERT(ksSaveSnapshot(dst, "", &s, &l) == 0);
            TEST_ASSERT(l == l0); /* same content (order may differ only if tables differ) */
            ksDestroy(dst);
        }
        /* Corrupt and truncated snapshots are rejected and change nothing. */
        ksKeyspace *dst = ksCreate(opts[o]);
        EXPECT(dst, "SET keep me", "+OK\r\n");
        uint64_t mem = ksMemoryBytes(dst);
        for (size_t cut = 0; cut < l0; cut += 1 + l0 / 50) {
            TEST_ASSERT(ksLoadSnapshot(dst, "", snap, cut) == -1);
            TEST_ASSERT(strstr(ksLastError(dst), "snapshot") != NULL);
        }
        uint8_t *bad = malloc(l0);
        unsigned long long r = test_seed;
        for (int k = 0; k < 50; k++) {
            memcpy(bad, snap, l0);
            bad[test_rand(&r) % l0] ^= (uint8_t)(1 + test_rand(&r) % 255);
            TEST_ASSERT(ksLoadSnapshot(dst, "load=prefetch-after-key", bad, l0) == -1);
        }
        /* A structurally bad snapshot with a valid checksum: rolled back. */
        memcpy(bad, snap, l0);
        bad[l0 - 9] = 0x42; /* EOF opcode replaced */
        uint64_t crc = ksCrc64(0, bad, l0 - 8);
        memcpy(bad + l0 - 8, &crc, 8);
        TEST_ASSERT(ksLoadSnapshot(dst, "", bad, l0) == -1);
        TEST_ASSERT(ksDbSize(dst) == 1 && ksMemoryBytes(dst) == mem);
        EXPECT(dst, "GET keep", "$2\r\nme\r\n");
        VALID(dst);
        free(bad);
        ksDestroy(dst);
        free(snap);
        ksDestroy(src);
    }
    return 0;
}

/* The loader sums as it reads (as Valkey's rio) and compares at the end: a
 * value byte flipped in a structurally valid snapshot is found only by the
 * checksum, after every key was parsed into the fresh tables, which are then
 * discarded.  The error names the checksum's offset. */
static int test_snapshot_checksum_at_end(void) {
    const char *opts[] = {"", "layout=legacy", "cluster=1"};
    const char *loadv[] = {"load=none", "load=prefetch-after-key", "load=prefetch-rehash"};
    for (int o = 0; o < 3; o++) {
        for (int vs = 0; vs < 2; vs++) { /* EMBSTR-sized and RAW values */
            ksKeyspace *src = ksCreate(opts[o]);
            if (fillKeyspace(src, 500, vs ? 300 : 8)) return 1;
            const uint8_t *s0;
            size_t l0;
            TEST_ASSERT(ksSaveSnapshot(src, "", &s0, &l0) == 0);
            uint8_t *bad = malloc(l0);
            memcpy(bad, s0, l0);
            /* The last value byte before the EOF opcode: a letter a..z. */
            TEST_ASSERT(bad[l0 - 10] >= 'a' && bad[l0 - 10] <= 'z');
            bad[l0 - 10] = bad[l0 - 10] == 'a' ? 'b' : 'a';
            for (int v = 0; v < 3; v++) {
                ksKeyspace *dst = ksCreate(opts[o]);
                EXPECT(dst, "SET keep me", "+OK\r\n");
                uint64_t mem = ksMemoryBytes(dst);
                TEST_ASSERT(ksLoadSnapshot(dst, loadv[v], bad, l0) == -1);
                char want[128];
                snprintf(want, sizeof(want), "snapshot corrupt or truncated: checksum mismatch (at byte %zu)", l0 - 8);
                TEST_ASSERT_MSG(strcmp(ksLastError(dst), want) == 0, "%s", ksLastError(dst));
                TEST_ASSERT(ksDbSize(dst) == 1 && ksMemoryBytes(dst) == mem);
                EXPECT(dst, "GET keep", "$2\r\nme\r\n");
                VALID(dst);
                /* The intact snapshot still loads, with every key. */
                TEST_ASSERT_MSG(ksLoadSnapshot(dst, loadv[v], s0, l0) == 0, "%s", ksLastError(dst));
                TEST_ASSERT(ksDbSize(dst) == 500);
                VALID(dst);
                ksDestroy(dst);
            }
            /* A damaged stored checksum is a mismatch too. */
            memcpy(bad, s0, l0);
            bad[l0 - 1] ^= 0x10;
            ksKeyspace *dst = ksCreate(opts[o]);
            TEST_ASSERT(ksLoadSnapshot(dst, "", bad, l0) == -1);
            TEST_ASSERT(strstr(ksLastError(dst), "checksum mismatch") != NULL && ksDbSize(dst) == 0);
            ksDestroy(dst);
            free(bad);
            ksDestroy(src);
        }
    }
    return 0;
}

/* rdbchecksum=no (Valkey's config): the stored checksum is 0 and nothing is
 * summed; a loader with the checksum off does not notice a flipped value byte;
 * a loader with it on does not check a stored 0 (a file saved without it), as
 * rdbLoadRioWithLoadingCtx.  With it on, the stored sum is the CRC-64/Jones of
 * every byte before it. */
static int test_snapshot_rdbchecksum_no(void) {
    ksKeyspace *on = ksCreate(""), *off = ksCreate("rdbchecksum=no");
    TEST_ASSERT(ksCreate("rdbchecksum=maybe") == NULL);
    if (fillKeyspace(on, 300, 100) || fillKeyspace(off, 300, 100)) return 1;
    const uint8_t *s1, *s2;
    size_t l1, l2;
    TEST_ASSERT(ksSaveSnapshot(on, "", &s1, &l1) == 0);
    uint8_t *a = malloc(l1);
    memcpy(a, s1, l1);
    TEST_ASSERT(ksSaveSnapshot(off, "", &s2, &l2) == 0);
    TEST_ASSERT(l1 == l2 && memcmp(a, s2, l1 - 8) == 0);
    uint64_t stored, zero = 0;
    memcpy(&stored, a + l1 - 8, 8);
    TEST_ASSERT(stored == ksCrc64(0, a, l1 - 8) && stored != 0);
    TEST_ASSERT(memcmp(s2 + l2 - 8, &zero, 8) == 0);
    uint8_t *b = malloc(l1);
    memcpy(b, a, l1);
    b[l1 - 10] ^= 0x01; /* a value byte */
    ksKeyspace *dst = ksCreate("rdbchecksum=no");
    TEST_ASSERT_MSG(ksLoadSnapshot(dst, "", b, l1) == 0, "%s", ksLastError(dst));
    TEST_ASSERT(ksDbSize(dst) == 300);
    ksDestroy(dst);
    dst = ksCreate("");
    TEST_ASSERT(ksLoadSnapshot(dst, "", b, l1) == -1); /* checked: mismatch */
    memcpy(b + l1 - 8, &zero, 8);
    TEST_ASSERT_MSG(ksLoadSnapshot(dst, "", b, l1) == 0, "%s", ksLastError(dst)); /* 0: unchecked */
    TEST_ASSERT(ksDbSize(dst) == 300);
    VALID(dst);
    ksDestroy(dst);
    free(a);
    free(b);
    ksDestroy(on);
    ksDestroy(off);
    return 0;
}

/* --- Memory, determinism, cluster ----------------------------------------- */

static int test_memory_layouts(void) {
    ksKeyspace *u = ksCreate("layout=unified"), *g = ksCreate("layout=legacy");
    uint64_t u0 = ksMemoryBytes(u), g0 = ksMemoryBytes(g);
    char q[1 << 16];
    for (int base = 0; base < 20000; base += 200) {
        size_t len = 0;
        for (int i = base; i < base + 200; i++) {
            char k[32];
            snprintf(k, sizeof(k), "key:%012d", i); /* 16 bytes */
            const char *argv[] = {"SET", k, "vvvvvvvv"};
            len += resp(q + len, sizeof(q) - len, 3, argv);
        }
        const uint8_t *r;
        size_t rl, c;
        ksExecute(u, "", (const uint8_t *)q, len, &r, &rl, &c);
        ksExecute(g, "", (const uint8_t *)q, len, &r, &rl, &c);
    }
    double ratio = (double)(ksMemoryBytes(u) - u0) / (double)(ksMemoryBytes(g) - g0);
    printf("    unified/legacy memory, 16 B keys, 8 B values: %.3f\n", ratio);
    TEST_ASSERT(ratio <= 0.75);
    /* Accounting: flushing returns every entry byte. */
    EXPECT(u, "FLUSHALL", "+OK\r\n");
    EXPECT(g, "FLUSHALL", "+OK\r\n");
    TEST_ASSERT(ksMemoryBytes(u) == u0 && ksMemoryBytes(g) == g0);
    ksDestroy(u);
    ksDestroy(g);
    return 0;
}

/* The arena's libc mode (a server's keyspace on glibc malloc, as the reference Valkey):
 * the same replies as the arena for a random command stream with small and RAW values,
 * overwrites, deletes and expiry, on both tables and layouts, cluster on and off; every
 * block counted while live and freed by FLUSHALL and ksDestroy (ASan's leak check). */
static int test_libc_allocator(void) {
    const char *opts[] = {"", "table=dict", "layout=legacy", "cluster=1", "table=dict cluster=1 layout=legacy"};
    for (size_t o = 0; o < sizeof(opts) / sizeof(opts[0]); o++) {
        ksKeyspace *a = ksCreate(opts[o]);
        ksArenaSetLibc(1);
        ksKeyspace *l = ksCreate(opts[o]);
        ksArenaSetLibc(0);
        TEST_ASSERT(a && l);
        TEST_ASSERT(ksArenaBase(a->arena) != 0 && ksArenaBase(l->arena) == 0);
        uint64_t l0 = ksMemoryBytes(l);
        uint64_t seed = 0x9e3779b97f4a7c15ull + o;
        char line[2048], big[301];
        memset(big, 'v', 300);
        big[300] = '\0';
        for (int i = 0; i < 3000; i++) {
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            unsigned r = (unsigned)(seed >> 33), k = r % 500, op = (r >> 9) % 6;
            if (op == 0) snprintf(line, sizeof(line), "SET key:%u v%u", k, r);
            else if (op == 1) snprintf(line, sizeof(line), "SET key:%u %s%u", k, big, r % 10);
            else if (op == 2) snprintf(line, sizeof(line), "MSET key:%u a key:%u %s", k, (k + 7) % 500, big);
            else if (op == 3) snprintf(line, sizeof(line), "DEL key:%u key:%u", k, (k + 1) % 500);
            else if (op == 4) snprintf(line, sizeof(line), "MGET key:%u key:%u key:%u", k, (k + 3) % 500, (k + 9) % 500);
            else snprintf(line, sizeof(line), "EXPIRE key:%u 100", k);
            char want[1 << 12];
            snprintf(want, sizeof(want), "%s", cmd(a, "", line));
            const char *got = cmd(l, "", line);
            TEST_ASSERT_MSG(strcmp(got, want) == 0, "%s: libc %s, arena %s", line, got, want);
        }
        VALID(l);
        TEST_ASSERT(ksMemoryBytes(l) > l0);
        EXPECT(l, "FLUSHALL", "+OK\r\n");
        TEST_ASSERT_MSG(ksMemoryBytes(l) == l0, "%llu after FLUSHALL, %llu before", (unsigned long long)ksMemoryBytes(l),
                        (unsigned long long)l0);
        TEST_ASSERT(ksArenaCheck(l->arena, line, sizeof(line)) == 0);
        ksDestroy(a);
        ksDestroy(l); /* frees every block: a leak fails test-sanitize */
    }
    return 0;
}

static int test_cluster_tables(void) {
    ksKeyspace *ks = ksCreate("cluster=1");
    TEST_ASSERT(ksKeyHashSlot("{user1000}.following", 20) == ksKeyHashSlot("user1000", 8));
    TEST_ASSERT(ksKeyHashSlot("foo{}{bar}", 10) == ksKeyHashSlot("foo{}{bar}", 10));
    TEST_ASSERT(ksKeyHashSlot("123456789", 9) == 0x31C3 % 16384); /* CRC16-XMODEM check value */
    uint64_t m0 = ksMemoryBytes(ks);
    EXPECT(ks, "SET {a}1 x", "+OK\r\n");
    EXPECT(ks, "SET {a}2 x", "+OK\r\n");
    int slot = (int)ksKeyHashSlot("a", 1);
    TEST_ASSERT(ks->slots[slot] != NULL);
    EXPECT(ks, "DEL {a}1 {a}2", ":2\r\n");
    TEST_ASSERT(ks->slots[slot] == NULL); /* freed when emptied */
    TEST_ASSERT(ksMemoryBytes(ks) == m0);
    VALID(ks);
    ksDestroy(ks);
    return 0;
}

/* The stale-table test variant diverges when an expired key empties its slot
 * table in batch 1 and batch 2 uses the cached (dead) table (Redis #15043). */
static int test_stale_table_variant(void) {
    const char *variants[] = {"multikey=batch", "multikey=none", "multikey=batch-stale-table"};
    uint64_t sizes[3];
    for (int v = 0; v < 3; v++) {
        ksKeyspace *ks = ksCreate("cluster=1");
        ksSetTimeMs(ks, 0);
        EXPECT(ks, "SET {s}exp 1 PX 10", "+OK\r\n");
        ksSetTimeMs(ks, 100);
        char line[2048] = "MSET {s}exp x";
        for (int i = 0; i < 30; i++) {
            char kv[32];
            snprintf(kv, sizeof(kv), " {o}k%d v", i);
            strcat(line, kv);
        }
        strcat(line, " {s}late v"); /* 32 pairs: batches of 16 + 16 */
        const char *got = cmd(ks, variants[v], line);
        TEST_ASSERT_MSG(strcmp(got, "+OK\r\n") == 0, "%s: %s", variants[v], got);
        sizes[v] = ksDbSize(ks);
        VALID(ks);
        ksDestroy(ks);
    }
    TEST_ASSERT(sizes[0] == 32 && sizes[1] == 32);
    TEST_ASSERT_MSG(sizes[2] == 31, "stale variant kept %llu keys", (unsigned long long)sizes[2]);
    return 0;
}

int main(int argc, char **argv) {
    TEST_INIT(argc, argv);
    RUN(test_create_options);
    RUN(test_string_commands);
    RUN(test_keys_sorted_match);
    RUN(test_expiry);
    RUN(test_protocol_errors);
    RUN(test_fuzz);
    RUN(test_variants_equal_naive);
    RUN(test_snapshot_roundtrip);
    RUN(test_snapshot_checksum_at_end);
    RUN(test_snapshot_rdbchecksum_no);
    RUN(test_memory_layouts);
    RUN(test_libc_allocator);
    RUN(test_cluster_tables);
    RUN(test_stale_table_variant);
    return TEST_DONE();
}
