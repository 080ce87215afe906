/*
 * test_callpath.c -- the server's command flags (callpath.c) against what the commands
 * do: every command of the command table runs once on a keyspace holding a string, a
 * hash and a sorted set, and it is flagged a write (CMD_WRITE, Valkey's command table)
 * exactly when what reads of those keys answer changed.  A command added to the table without an
 * invocation here fails the test, so a new write command cannot stay flagged read-only.
 * The command table (a case-insensitive hashtable, siphash_nocase) finds every command.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../callpath.h"
#include "../keyspace.h"
#include "../kvsim_cref.h"
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

int main(int argc, char **argv) {
    TEST_INIT(argc, argv);
    RUN(test_write_flags_match_what_commands_change);
    RUN(test_siphash_nocase_is_siphash_of_lowered);
    RUN(test_command_table_finds_every_command);
    return TEST_DONE();
}
