/*
 * test_callpath.c -- the server's command flags (callpath.c) against what the commands
 * do: every command of the command table runs once on a keyspace holding a string, a
 * hash and a sorted set, and it is flagged a write (CMD_WRITE, Valkey's command table)
 * exactly when what reads of those keys answer changed.  A command added to the table without an
 * invocation here fails the test, so a new write command cannot stay flagged read-only.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../callpath.h"
#include "../keyspace.h"
#include "../kvsim_cref.h"
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

int main(int argc, char **argv) {
    TEST_INIT(argc, argv);
    RUN(test_write_flags_match_what_commands_change);
    return TEST_DONE();
}
