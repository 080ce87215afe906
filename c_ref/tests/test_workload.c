/*
 * test_workload.c -- the workload table (workload.c, workload_ctx.h): a toy
 * workload registered at run time is one function pair and one row, and is
 * then a workload like the built-in ones: named by ksWorkloadNames and the
 * options JSON, its options applied and the others refused, run by
 * ksWorkloadRun under every variant of its family with the same replies.
 */
#include <stdint.h>
#include <string.h>

#include "../keyspace.h"
#include "../workload.h"
#include "../workload_ctx.h"
#include "testhelp.h"

/* The toy: EXISTS of --keys-per-command random keys (half of them absent:
 * indexes up to 2 * --keys), --ops commands in groups of 4. */
static int toySetup(wl *w) {
    const ksWorkloadSpec *s = w->spec;
    char key[64];
    ksWlPopulate(w);
    ksWlGroupsBegin(w);
    for (uint64_t op = 0; op < s->ops; op++) {
        if (op % 4 == 0) ksWlGroupMark(w, (size_t)(s->ops / 4 + 1));
        ksWlCmd(w, 1 + s->keys_per_command);
        ksWlArg(w, "EXISTS", 6);
        for (int k = 0; k < s->keys_per_command; k++) {
            ksWlKeyName(w, ksWlRand(&w->rng) % (2 * s->keys), key);
            ksWlArg(w, key, s->key_size);
        }
    }
    ksWlGroupsEnd(w);
    return 0;
}

static const ksWorkloadDef TOY = {"toy-exists", "multikey", "ops|keys-per-command", toySetup, ksWlRunGroups};

static int test_register(void) {
    TEST_ASSERT(ksWorkloadRegister(&TOY) == 0);
    TEST_ASSERT(ksWorkloadRegister(&TOY) == -1); /* the name is taken */
    ksWorkloadDef bad = TOY;
    bad.name = "toy-bad-family";
    bad.family = "no-such-family";
    TEST_ASSERT(ksWorkloadRegister(&bad) == -1);
    bad = TOY;
    bad.name = "load"; /* a built-in name */
    TEST_ASSERT(ksWorkloadRegister(&bad) == -1);
    TEST_ASSERT(ksWorkloadFind("toy-exists") != NULL && ksWorkloadFind("toy-bad-family") == NULL);
    TEST_ASSERT(!strcmp(ksWorkloadFamily("toy-exists"), "multikey"));
    TEST_ASSERT(strstr(ksWorkloadNames(), "load|iterate|pipeline|mset|mget") == ksWorkloadNames());
    TEST_ASSERT(strstr(ksWorkloadNames(), "|toy-exists") != NULL);
    /* its options: the listed ones and every workload's; not the others */
    TEST_ASSERT(ksWorkloadOptionApplies(ksWorkloadOptionFind("keys-per-command"), "toy-exists"));
    TEST_ASSERT(ksWorkloadOptionApplies(ksWorkloadOptionFind("keys"), "toy-exists"));
    TEST_ASSERT(!ksWorkloadOptionApplies(ksWorkloadOptionFind("op"), "toy-exists"));
    TEST_ASSERT(!ksWorkloadOptionApplies(ksWorkloadOptionFind("warmup-ops"), "toy-exists"));
    TEST_ASSERT(!strcmp(ksWorkloadOptionUsers(ksWorkloadOptionFind("op")), "iterate"));
    TEST_ASSERT(strstr(ksWorkloadOptionUsers(ksWorkloadOptionFind("ops")), "toy-exists") != NULL);
    /* the options JSON names it, with its family's variants */
    size_t n = ksWorkloadOptionsWriteJson(NULL, 0);
    char *json = malloc(n + 1);
    TEST_ASSERT(json && ksWorkloadOptionsWriteJson(json, n + 1) == n);
    TEST_ASSERT(strstr(json, "\"toy-exists\":[\"none\",\"batch\"") != NULL);
    TEST_ASSERT(strstr(json, ",\"toy-exists\"]}") != NULL);
    free(json);
    /* the default variant is its family's */
    ksWorkloadSpec s;
    ksWorkloadSpecInit(&s, "toy-exists");
    TEST_ASSERT(!strcmp(s.variant, "none"));
    return 0;
}

static int test_run_toy(void) {
    const char *variants[] = {"none", "batch", "chunk-15133", "batch-hash-once"};
    uint32_t crc0 = 0;
    for (int table = 0; table < 2; table++) {
        for (size_t v = 0; v < sizeof(variants) / sizeof(variants[0]); v++) {
            ksWorkloadSpec s;
            ksWorkloadSpecInit(&s, "toy-exists");
            s.keys = 500;
            s.ops = 41;
            s.keys_per_command = 9;
            s.repeat = 2;
            s.table = table ? "dict" : "hashtable";
            s.variant = variants[v];
            ksWorkloadResult r;
            char err[256] = "";
            TEST_ASSERT_MSG(ksWorkloadRun(&s, &r, err, sizeof(err)) == 0, "%s", err);
            TEST_ASSERT(r.nruns == 2 && r.ops == 41 && r.keys == 500 && r.reply_checked);
            /* 41 replies ":n\r\n", n in 0..9 */
            TEST_ASSERT(r.reply_bytes == 41 * 4);
            if (table == 0 && v == 0) crc0 = r.reply_crc32;
            TEST_ASSERT_MSG(r.reply_crc32 == crc0, "%s %s", s.table, variants[v]);
        }
    }
    /* --versus works for it as for the built-in workloads */
    ksWorkloadSpec s;
    ksWorkloadSpecInit(&s, "toy-exists");
    s.keys = 500;
    s.ops = 41;
    s.keys_per_command = 9;
    s.repeat = 2;
    s.versus = 1;
    s.versus_variant = "batch";
    ksWorkloadResult r;
    char err[256] = "";
    TEST_ASSERT_MSG(ksWorkloadRun(&s, &r, err, sizeof(err)) == 0, "%s", err);
    TEST_ASSERT(r.reply_crc32 == crc0 && r.versus_reply_crc32 == crc0);
    /* an option it does not take, given through the library, is refused */
    s.versus = 0;
    s.warmup_ops = 5;
    TEST_ASSERT(ksWorkloadRun(&s, &r, err, sizeof(err)) == -1 && strstr(err, "--warmup-ops") != NULL);
    return 0;
}

int main(int argc, char **argv) {
    TEST_INIT(argc, argv);
    RUN(test_register);
    RUN(test_run_toy);
    return TEST_DONE();
}
