/*
 * test_callpath.c -- the server's command flags (callpath.c) against what the commands
 * do: every command of the command table runs once on a keyspace holding a string, a
 * hash and a sorted set, and it is flagged a write (CMD_WRITE, Valkey's command table)
 * exactly when what reads of those keys answer changed.  A command added to the table without an
 * invocation here fails the test, so a new write command cannot stay flagged read-only.
 * The command table (a case-insensitive hashtable, siphash_nocase) finds every command.
 * A server's argument objects are read through objectGetVal (the strings parsed, embedded
 * or RAW); getKeysFromCommand's legacy range spec gives the key positions of the command
 * table's key specs (past the 256-entry stack buffer too); lookupKey stores LRU_CLOCK() on
 * a hit in a server and counts the hits and misses and the calls as Valkey's INFO does.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../callpath.h"
#include "../keyspace.h"
#include "../kvsim_cref.h"
#include "../server.h"
#include "../siphash.h"
#include "testhelp.h"

static int exec(ksKeyspace *ks, const char *q) {
    const uint8_t *r;
    size_t rl, used;
    return ksExecute(ks, "", (const uint8_t *)q, strlen(q), &r, &rl, &used) != 0 || used != strlen(q) ? -1 : 0;
}

/* One invocation per command: it changes the keyspace if the command writes at all. */
static const struct {
    const char *name, *query;
} invocations[] = {
    {"get", "*2\r\n$3\r\nGET\r\n$1\r\ns\r\n"},
    {"set", "*3\r\n$3\r\nSET\r\n$1\r\nn\r\n$1\r\nv\r\n"},
    {"del", "*2\r\n$3\r\nDEL\r\n$1\r\ns\r\n"},
    {"exists", "*2\r\n$6\r\nEXISTS\r\n$1\r\ns\r\n"},
    {"mget", "*3\r\n$4\r\nMGET\r\n$1\r\ns\r\n$1\r\nx\r\n"},
    {"mset", "*3\r\n$4\r\nMSET\r\n$1\r\nn\r\n$1\r\nv\r\n"},
    {"msetnx", "*3\r\n$6\r\nMSETNX\r\n$1\r\nn\r\n$1\r\nv\r\n"},
    {"expire", "*3\r\n$6\r\nEXPIRE\r\n$1\r\ns\r\n$3\r\n100\r\n"},
    {"pexpire", "*3\r\n$7\r\nPEXPIRE\r\n$1\r\ns\r\n$3\r\n100\r\n"},
    {"ttl", "*2\r\n$3\r\nTTL\r\n$1\r\ns\r\n"},
    {"pttl", "*2\r\n$4\r\nPTTL\r\n$1\r\ns\r\n"},
    {"keys", "*2\r\n$4\r\nKEYS\r\n$1\r\n*\r\n"},
    {"scan", "*2\r\n$4\r\nSCAN\r\n$1\r\n0\r\n"},
    {"dbsize", "*1\r\n$6\r\nDBSIZE\r\n"},
    {"flushall", "*1\r\n$8\r\nFLUSHALL\r\n"},
    {"unlink", "*2\r\n$6\r\nUNLINK\r\n$1\r\ns\r\n"},
    {"touch", "*2\r\n$5\r\nTOUCH\r\n$1\r\ns\r\n"},
    {"hset", "*4\r\n$4\r\nHSET\r\n$1\r\nh\r\n$1\r\ng\r\n$1\r\nw\r\n"},
    {"hget", "*3\r\n$4\r\nHGET\r\n$1\r\nh\r\n$1\r\nf\r\n"},
    {"hmget", "*4\r\n$5\r\nHMGET\r\n$1\r\nh\r\n$1\r\nf\r\n$1\r\ng\r\n"},
    {"hgetall", "*2\r\n$7\r\nHGETALL\r\n$1\r\nh\r\n"},
    {"hdel", "*3\r\n$4\r\nHDEL\r\n$1\r\nh\r\n$1\r\nf\r\n"},
    {"zadd", "*4\r\n$4\r\nZADD\r\n$1\r\nz\r\n$1\r\n2\r\n$1\r\nn\r\n"},
    {"zscore", "*3\r\n$6\r\nZSCORE\r\n$1\r\nz\r\n$1\r\nm\r\n"},
    {"zrem", "*3\r\n$4\r\nZREM\r\n$1\r\nz\r\n$1\r\nm\r\n"},
    {"zmscore", "*4\r\n$7\r\nZMSCORE\r\n$1\r\nz\r\n$1\r\nm\r\n$1\r\nx\r\n"},
};

static const char SETUP[] = "*3\r\n$3\r\nSET\r\n$1\r\ns\r\n$1\r\nv\r\n"
                            "*4\r\n$4\r\nHSET\r\n$1\r\nh\r\n$1\r\nf\r\n$1\r\nv\r\n"
                            "*4\r\n$4\r\nZADD\r\n$1\r\nz\r\n$1\r\n1\r\n$1\r\nm\r\n";

/* The state every invocation above can change, as the replies of reads (snapshots model
 * strings only), copied: the reply buffer is the keyspace's. */
static const char PROBE[] = "*1\r\n$6\r\nDBSIZE\r\n*2\r\n$3\r\nGET\r\n$1\r\ns\r\n"
                            "*2\r\n$3\r\nGET\r\n$1\r\nn\r\n*2\r\n$4\r\nPTTL\r\n$1\r\ns\r\n"
                            "*2\r\n$7\r\nHGETALL\r\n$1\r\nh\r\n"
                            "*4\r\n$7\r\nZMSCORE\r\n$1\r\nz\r\n$1\r\nm\r\n$1\r\nn\r\n";

static char *snapshot(ksKeyspace *ks, size_t *len) {
    const uint8_t *r;
    size_t used;
    if (ksExecute(ks, "", (const uint8_t *)PROBE, strlen(PROBE), &r, len, &used) != 0) return NULL;
    char *c = malloc(*len ? *len : 1);
    if (c) memcpy(c, r, *len);
    return c;
}

static int test_write_flags_match_what_commands_change(void) {
    const int n = sizeof(invocations) / sizeof(invocations[0]);
    for (int i = 0; i < ksCommandCount(); i++) {
        const ksCommandDef *d = ksCommandAt(i);
        int k = 0;
        while (k < n && strcmp(invocations[k].name, d->name)) k++;
        TEST_ASSERT_MSG(k < n, "command '%s' has no invocation in this test", d->name);
        ksKeyspace *ks = ksCreate("");
        TEST_ASSERT(ks && exec(ks, SETUP) == 0);
        size_t la, lb;
        char *a = snapshot(ks, &la);
        TEST_ASSERT(a && exec(ks, invocations[k].query) == 0);
        char *b = snapshot(ks, &lb);
        TEST_ASSERT(b);
        int changed = la != lb || memcmp(a, b, la) != 0;
        free(a);
        free(b);
        TEST_ASSERT(ksCheckValid(ks) == 0);
        ksDestroy(ks);
        TEST_ASSERT_MSG(changed == ksCallIsWrite(d->name), "'%s' changed the keyspace: %d, flagged write: %d",
                        d->name, changed, ksCallIsWrite(d->name));
    }
    return 0;
}

/* siphash_nocase is SipHash of the bytes lowered: random names of every length up to 40,
 * letters of both cases, digits and punctuation; and a name differing in case only hashes
 * the same while one differing in a byte does not. */
static int test_siphash_nocase_is_siphash_of_lowered(void) {
    static const char alphabet[] = "abcXYZ019_-:|@[`{";
    uint8_t k[16];
    ksSiphashSeed(7, k);
    uint64_t x = 0x9e3779b97f4a7c15ULL;
    for (int len = 0; len <= 40; len++)
        for (int rep = 0; rep < 20; rep++) {
            char s[41], low[41];
            for (int i = 0; i < len; i++) {
                x ^= x << 13, x ^= x >> 7, x ^= x << 17;
                s[i] = alphabet[x % (sizeof(alphabet) - 1)];
                low[i] = (char)(s[i] >= 'A' && s[i] <= 'Z' ? s[i] + 32 : s[i]);
            }
            TEST_ASSERT_MSG(ksSiphashNocase(s, (size_t)len, k) == ksSiphash(low, (size_t)len, k),
                            "length %d: nocase differs from the lowered bytes' hash", len);
        }
    TEST_ASSERT(ksSiphashNocase("MGET", 4, k) == ksSiphashNocase("mGeT", 4, k));
    TEST_ASSERT(ksSiphashNocase("MGET", 4, k) != ksSiphashNocase("MSET", 4, k));
    TEST_ASSERT(ksSiphashNocase("[", 1, k) != ksSiphashNocase("{", 1, k)); /* not letters */
    return 0;
}

/* The server's command table (a hashtable keyed by name, case-insensitive): every
 * registered command is found under its name in lower, upper and mixed case, and nothing
 * else: no prefix, extension or unknown name; off again, lookups fall back to the
 * keyspace's own table. */
static int test_command_table_finds_every_command(void) {
    ksCallPathEnable(3, NULL);
    for (int i = 0; i < ksCommandCount(); i++) {
        const ksCommandDef *d = ksCommandAt(i);
        char up[64], mixed[64], longer[66];
        size_t n = strlen(d->name);
        TEST_ASSERT(n < sizeof(up));
        for (size_t j = 0; j <= n; j++) {
            char c = d->name[j];
            up[j] = (char)(c >= 'a' && c <= 'z' ? c - 32 : c);
            mixed[j] = j % 2 ? up[j] : c;
        }
        TEST_ASSERT_MSG(ksCallLookup(d->name, n) && !strcmp(ksCallLookup(d->name, n)->name, d->name), "'%s'", d->name);
        TEST_ASSERT_MSG(ksCallLookup(up, n) && !strcmp(ksCallLookup(up, n)->name, d->name), "'%s'", up);
        TEST_ASSERT_MSG(ksCallLookup(mixed, n) && !strcmp(ksCallLookup(mixed, n)->name, d->name), "'%s'", mixed);
        TEST_ASSERT_MSG(!ksCallLookup(d->name, n - 1) || ksCallLookup(d->name, n - 1) != ksCallLookup(d->name, n),
                        "'%s' found by its prefix", d->name);
        snprintf(longer, sizeof(longer), "%sx", d->name);
        TEST_ASSERT_MSG(!ksCallLookup(longer, n + 1), "'%s' found", longer);
    }
    TEST_ASSERT(!ksCallLookup("nosuchcommand", 13) && !ksCallLookup("", 0));
    ksCallPathDisable();
    TEST_ASSERT(!ksCallPathOn && ksLookupCommand("GET", 3));
    return 0;
}


/* objectGetVal of every argument is the string the parser wrote, for embedded (short) and
 * RAW (long) arguments, on the argument's own object. */
static int test_object_get_val_reads_each_argument(void) {
    ksCallPathEnable(5, NULL);
    static const size_t lens[] = {0, 1, 43, 44, 100, 115, 116, 117, 200, 255, 256, 1000, 70000};
    const int n = (int)(sizeof(lens) / sizeof(lens[0]));
    uint8_t *buf = malloc(70000 + n); /* argument j starts at byte j */
    TEST_ASSERT(buf);
    for (size_t i = 0; i < 70000 + (size_t)n; i++) buf[i] = (uint8_t)('a' + i % 26);
    ksCommand cmd;
    memset(&cmd, 0, sizeof(cmd));
    ksCallArgvNew(&cmd, n);
    for (int j = 0; j < n; j++) ksCallArgAdd(&cmd, buf + j, lens[j]);
    TEST_ASSERT(cmd.argc == n);
    for (int j = 0; j < n; j++) {
        sds v = ksCallArgVal(&cmd, j);
        TEST_ASSERT_MSG(v == cmd.argv[j], "argument %d (%zu bytes): objectGetVal is not its string", j, lens[j]);
        TEST_ASSERT(sdslen(v) == lens[j] && memcmp(v, buf + j, lens[j]) == 0 && v[lens[j]] == 0);
    }
    ksCallArgvFree(&cmd);
    TEST_ASSERT(cmd.argc == 0 && !cmd.argv_obj && !cmd.argv);
    free(buf);
    ksCallPathDisable();
    return 0;
}

/* getKeysUsingLegacyRangeSpec against the key specs (ksCommandKeys): the same positions for
 * every command with keys and every argument count its arity allows, up to 600 arguments
 * (past the 256 keys of getKeysResult's stack buffer: getKeysPrepareResult's heap array). */
static int test_get_keys_follow_the_key_specs(void) {
    ksCallPathEnable(6, NULL);
    int heap = 0;
    for (int i = 0; i < ksCommandCount(); i++) {
        const ksCommandDef *d = ksCommandAt(i);
        for (int argc = 1; argc <= 600; argc++) {
            if ((d->arity > 0 && argc != d->arity) || argc < -d->arity) continue;
            int first = 0, step = 0;
            int kc = ksCommandKeys(d, argc, &first, &step);
            if (kc == 0 && d->first_key && d->first_key < argc) continue; /* the arity error */
            ksCommand cmd;
            memset(&cmd, 0, sizeof(cmd));
            cmd.def = d;
            cmd.argc = argc;
            ksGetKeysResult r;
            int n = ksCallGetKeys(&cmd, &r);
            TEST_ASSERT_MSG(n == kc && r.numkeys == kc, "%s argc %d: %d keys, the spec %d", d->name, argc, n, kc);
            for (int k = 0; k < n; k++)
                TEST_ASSERT_MSG(r.keys[k].pos == first + k * step && r.keys[k].flags == 0, "%s argc %d key %d", d->name,
                                argc, k);
            /* the result is sized for the range, last - first + 1 (every step-th a key) */
            int span = n ? (n - 1) * step + 1 : 0;
            if (n) TEST_ASSERT_MSG((r.keys != r.keysbuf) == (span > KS_MAX_KEYS_BUFFER), "%s argc %d", d->name, argc);
            heap += n && r.keys != r.keysbuf;
            ksCallGetKeysFree(&r);
        }
    }
    TEST_ASSERT_MSG(heap > 0, "no command had more than %d keys", KS_MAX_KEYS_BUFFER);
    ksCallPathDisable();
    return 0;
}

static robj *lookupObject(ksKeyspace *ks, const char *key) {
    uint8_t mem[64];
    size_t len = strlen(key);
    sds k = sdsWriteAt(mem, SDS_TYPE_8, key, len, len);
    ksKeyInfo ki;
    ksKeyResolve(ks, k, &ki);
    return ksDbFindRaw(ks, &ki);
}

/* lookupKey in a server: a GET hit stores LRU_CLOCK() (the unix time in seconds, 24 bits,
 * as serverCron keeps it) in the value's object, where the keyspace alone stores its own
 * clock's; hits and misses are counted (INFO keyspace_hits / keyspace_misses), every call
 * in the command's row (INFO commandstats calls) and in stat_numcommands. */
static int test_lookup_key_touch_and_stats(void) {
    for (int server = 0; server <= 1; server++) {
        if (server) ksCallPathEnable(7, NULL);
        ksKeyspace *ks = ksCreate("");
        TEST_ASSERT(ks);
        uint64_t before = server ? ksCallStatNumcommands() : 0;
        TEST_ASSERT(exec(ks, "*3\r\n$3\r\nSET\r\n$1\r\na\r\n$1\r\nv\r\n") == 0);
        TEST_ASSERT(ks->layout == KS_LAYOUT_UNIFIED); /* the value's object is the entry */
        robj *o = lookupObject(ks, "a");
        TEST_ASSERT(o);
        o->lru = 12345;
        unsigned t0 = (unsigned)(time(NULL) & ((1 << 24) - 1));
        for (int i = 0; i < 3; i++) TEST_ASSERT(exec(ks, "*2\r\n$3\r\nGET\r\n$1\r\na\r\n") == 0);
        for (int i = 0; i < 2; i++) TEST_ASSERT(exec(ks, "*2\r\n$3\r\nGET\r\n$1\r\nb\r\n") == 0);
        TEST_ASSERT(exec(ks, "*3\r\n$4\r\nMGET\r\n$1\r\na\r\n$1\r\nc\r\n") == 0);
        unsigned t1 = (unsigned)(time(NULL) & ((1 << 24) - 1));
        /* a server: LRU_CLOCK(), server.lruclock (the unix time, set at start by initServer
         * and by serverCron); the keyspace alone: its own clock's (ksSetTimeMs) seconds */
        unsigned lru = o->lru, own = (unsigned)((ks->now_ms / 1000) & ((1 << 24) - 1));
        if (server) TEST_ASSERT_MSG(lru + 1 >= t0 && lru <= t1, "server: lru %u, unix time %u..%u", lru, t0, t1);
        else TEST_ASSERT_MSG(lru == own, "keyspace alone: lru %u, its clock %u", lru, own);
        TEST_ASSERT(ks->stats.keyspace_hits == 4 && ks->stats.keyspace_misses == 3);
        const ksCommandDef *get = ksLookupCommand("get", 3);
        int gid = -1;
        for (int i = 0; i < ksCommandCount(); i++)
            if (ksCommandAt(i) == get) gid = i;
        TEST_ASSERT(gid >= 0);
        TEST_ASSERT(ks->stats.calls[gid] == 5);
        if (server) TEST_ASSERT(ksCallStatNumcommands() - before == 7);
        ksDestroy(ks);
        if (server) ksCallPathDisable();
    }
    return 0;
}

/* handleParseResults: a parse's read flags and the verdict the buffer's processing takes
 * from them: a command runs, an empty command ("*0", "*-1", an empty inline line) is
 * dropped (the client reset), a protocol error is an error, a partial command waits. */
static int test_parse_results_follow_the_read_flags(void) {
    ksCallPathEnable(3, NULL);
    ksClient c;
    memset(&c, 0, sizeof(c));
    ksCallClientInit(&c);
    static const struct {
        int rc, argc, multibulk;
        uint32_t flags;
        int verdict;
    } cases[] = {
        {1, 2, 1, KS_READ_FLAGS_PARSING_COMPLETED, 1},
        {1, 1, 0, KS_READ_FLAGS_PARSING_COMPLETED, 1},
        {1, 0, 1, KS_READ_FLAGS_PARSING_NEGATIVE_MBULK_LEN, 1},
        {1, 0, 0, KS_READ_FLAGS_INLINE_ZERO_QUERY_LEN, 1},
        {0, 0, 1, 0, 0},
        {-1, 0, 1, KS_READ_FLAGS_ERROR_PROTOCOL, -1},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        c.net_input_bytes_curr_cmd = 77; /* the reset of an empty command clears it */
        int v = ksCallParseResults(&c, cases[i].rc, cases[i].argc, cases[i].multibulk);
        TEST_ASSERT_MSG(v == cases[i].verdict && c.read_flags == cases[i].flags, "case %zu: verdict %d flags %#x", i,
                        v, c.read_flags);
        TEST_ASSERT(!(c.read_flags & KS_READ_FLAGS_ERRORS) == (cases[i].rc >= 0));
        TEST_ASSERT_MSG((c.net_input_bytes_curr_cmd == 0) == (cases[i].rc > 0 && cases[i].argc == 0), "case %zu", i);
    }
    ksCallPathDisable();
    return 0;
}

/* A server's session client over commands, partial reads, empty commands and a protocol
 * error: replies as RESP says, and between reads resetClient has committed the deferred
 * reply buffer (none left, marked -1) and the reply lists' links hold (check_valid). */
static int test_session_client_state_between_commands(void) {
    /* a long value: a RAW object (past the embedded sizes of both layouts) */
    char longv[101], set_long[200], get_long[200];
    memset(longv, 'x', 100);
    longv[100] = 0;
    snprintf(set_long, sizeof(set_long), "*3\r\n$3\r\nSET\r\n$1\r\nL\r\n$100\r\n%s\r\n", longv);
    snprintf(get_long, sizeof(get_long), "$100\r\n%s\r\n", longv);
    const struct {
        const char *in, *out;
    } steps[] = {
        {"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$2\r\nv1\r\n", "+OK\r\n"},
        {"*2\r\n$3\r\nGET\r\n$1\r", ""}, /* partial: more bytes needed */
        {"\nk\r\n", "$2\r\nv1\r\n"},
        {"*0\r\n*-1\r\n\r\n*2\r\n$3\r\nGET\r\n$1\r\nx\r\n", "$-1\r\n"}, /* empties dropped */
        {"*2\r\n$3\r\nGET\r\n$1\r\nk\r\nGET k\r\n", "$2\r\nv1\r\n$2\r\nv1\r\n"},
        {set_long, "+OK\r\n"},
        {"*2\r\n$3\r\nGET\r\n$1\r\nL\r\n", get_long},
    };
    static const char *const layouts[] = {"", "layout=legacy", "table=dict"};
    for (size_t l = 0; l < sizeof(layouts) / sizeof(layouts[0]); l++) {
        ksServerConfig cfg;
        memset(&cfg, 0, sizeof(cfg));
        cfg.options = layouts[l];
        char err[256];
        TEST_ASSERT_MSG(ksServerSessionOpen(&cfg, err, sizeof(err)) == 0, "%s", err);
        for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
            const uint8_t *r;
            size_t rl;
            TEST_ASSERT(ksServerSessionFeed((const uint8_t *)steps[i].in, strlen(steps[i].in), &r, &rl) == 0);
            TEST_ASSERT_MSG(rl == strlen(steps[i].out) && memcmp(r, steps[i].out, rl) == 0, "%s step %zu: %.*s",
                            layouts[l], i, (int)rl, (const char *)r);
            TEST_ASSERT_MSG(ksServerSessionCheckValid(err, sizeof(err)) == 0, "%s step %zu: %s", layouts[l], i, err);
        }
        const uint8_t *r;
        size_t rl;
        const char *bad = "*1\r\n$x\r\n"; /* a protocol error: the reply, then the close */
        TEST_ASSERT(ksServerSessionFeed((const uint8_t *)bad, strlen(bad), &r, &rl) == 1);
        TEST_ASSERT_MSG(rl > 5 && memcmp(r, "-ERR ", 5) == 0, "%.*s", (int)rl, (const char *)r);
        TEST_ASSERT_MSG(ksServerSessionCheckValid(err, sizeof(err)) == 0, "%s", err);
        ksServerSessionClose();
    }
    return 0;
}

int main(int argc, char **argv) {
    TEST_INIT(argc, argv);
    RUN(test_write_flags_match_what_commands_change);
    RUN(test_siphash_nocase_is_siphash_of_lowered);
    RUN(test_command_table_finds_every_command);
    RUN(test_object_get_val_reads_each_argument);
    RUN(test_get_keys_follow_the_key_specs);
    RUN(test_lookup_key_touch_and_stats);
    RUN(test_parse_results_follow_the_read_flags);
    RUN(test_session_client_state_between_commands);
    return TEST_DONE();
}
