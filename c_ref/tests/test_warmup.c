/*
 * test_warmup.c -- the warm-up prefix of c_ref traces (workload option
 * --warmup-ops N, pipeline and mget): N operations of the same workload after
 * setup and before the measured ones, between WARMUP_BEGIN and WARMUP_END
 * markers (traces/FORMAT.md), which simulators run without counting.
 *
 *   test_warmup_markers_balanced   one BEGIN, one END, in that order, before the PHASE
 *                                  marker; the warm-up holds N commands
 *   test_warmup_keeps_measured     differential: the measured records after a warm-up are
 *                                  the records of the same run without it (argv
 *                                  strings may sit elsewhere in the arena)
 *   test_warmup_refused            workloads without a warm-up refuse the option
 */
#include <stdint.h>
#include <string.h>

#include "../emit.h"
#include "../keyspace.h"
#include "../kvsim_cref.h"
#include "../workload.h"
#include "testhelp.h"
#include "traced.h"

static ksWorkloadSpec spec(const char *workload, const char *variant, const char *table, uint64_t warm) {
    ksWorkloadSpec s;
    ksWorkloadSpecInit(&s, workload);
    s.keys = 5000;
    s.ops = 300;
    s.keys_per_command = 20;
    s.variant = variant;
    s.table = table;
    s.seed = test_seed;
    s.warmup_ops = warm;
    s.warm_setup = "none"; /* the setup's own prefix: test_warm_setup.c */
    return s;
}

static const char *RUNS[4][2] = {{"pipeline", "naive"}, {"pipeline", "lookahead"}, {"mget", "none"}, {"mget", "batch"}};

static int test_warmup_markers_balanced(void) {
    for (int w = 0; w < 4; w++) {
        ksWorkloadSpec s = spec(RUNS[w][0], RUNS[w][1], "hashtable", 200);
        size_t len;
        uint8_t *b = traceTo(&s, &len, 1u << 16);
        TEST_ASSERT(b != NULL);
        uint64_t n, begin = 0, end = 0, phase = 0, cmds_in_warmup = 0, cmds = 0;
        int order_ok = 1, in = 0;
        kvtRecord *r = records(b, len, &n);
        for (uint64_t i = 0; i < n; i++) {
            if (r[i].kind != KVT_MARKER) continue;
            int m = r[i].flags;
            if (m == KVT_MARK_WARMUP_BEGIN) {
                order_ok &= !in && end == begin && phase == 0;
                in = 1;
                begin++;
            } else if (m == KVT_MARK_WARMUP_END) {
                order_ok &= in;
                in = 0;
                end++;
            } else if (m == KVT_MARK_PHASE) {
                order_ok &= !in && begin == 1;
                phase++;
            } else if (m == KVT_MARK_COMMAND) {
                cmds_in_warmup += in;
                cmds++;
            }
        }
        printf("    %-8s %-9s: %llu WARMUP_BEGIN, %llu WARMUP_END, %llu PHASE, %llu of %llu commands in the "
               "warm-up\n",
               RUNS[w][0], RUNS[w][1], (unsigned long long)begin, (unsigned long long)end,
               (unsigned long long)phase, (unsigned long long)cmds_in_warmup, (unsigned long long)cmds);
        free(r);
        free(b);
        TEST_ASSERT(begin == 1 && end == 1 && phase == 1 && order_ok);
        TEST_ASSERT_MSG(cmds_in_warmup == 200 && cmds == 500, "%llu warm-up commands",
                        (unsigned long long)cmds_in_warmup);
    }
    return 0;
}

/* Records from the PHASE marker on (the measured phase), without the page
 * faults (*faults counts them): a warm-up's operations first-touch pages, so
 * fewer of them are fresh when the measured phase begins, as natively. */
static kvtRecord *measured(const ksWorkloadSpec *s, uint64_t *n, uint64_t *faults) {
    size_t len;
    uint8_t *b = traceTo(s, &len, 1u << 16);
    if (!b) return NULL;
    uint64_t all;
    kvtRecord *r = records(b, len, &all);
    free(b);
    uint64_t at = 0;
    while (at < all && !(r[at].kind == KVT_MARKER && r[at].flags == KVT_MARK_PHASE)) at++;
    *n = *faults = 0;
    for (uint64_t i = at; i < all; i++) {
        if (r[i].kind == KVT_MARKER && r[i].flags == KVT_MARK_SYSCALL && r[i].site == KS_SITE_SYS_PAGE_FAULT)
            (*faults)++;
        else
            r[(*n)++] = r[i];
    }
    return r;
}

static int test_warmup_keeps_measured(void) {
    const char *tables[2] = {"hashtable", "dict"};
    for (int w = 0; w < 4; w++)
        for (int t = 0; t < 2; t++) {
            ksWorkloadSpec cold = spec(RUNS[w][0], RUNS[w][1], tables[t], 0);
            ksWorkloadSpec warm = spec(RUNS[w][0], RUNS[w][1], tables[t], 400);
            cold.set_ratio = warm.set_ratio = 0; /* a warm-up SET would change the values */
            uint64_t nc, nw, fc, fw;
            kvtRecord *c = measured(&cold, &nc, &fc), *x = measured(&warm, &nw, &fw);
            TEST_ASSERT(c != NULL && x != NULL);
            /* Equal field by field; the address too, but for argv strings: the
             * lookahead keeps a batch of commands' argv alive, so after a
             * warm-up the arena's free lists hand out other blocks of the same
             * size class for them. */
            uint64_t argv_moved = 0;
            int same = nc == nw;
            for (uint64_t i = 0; same && i < nc; i++) {
                kvtRecord a = c[i], b = x[i];
                if (a.tag == KVT_TAG_ARGV && b.tag == KVT_TAG_ARGV && a.addr != b.addr) {
                    argv_moved++;
                    a.addr = b.addr = 0;
                }
                if (memcmp(&a, &b, sizeof(a))) {
                    same = 0;
                    printf("    first difference at %llu: kind %u/%u addr %llx/%llx tag %u/%u site %u/%u dep %u/%u\n",
                           (unsigned long long)i, a.kind, b.kind, (unsigned long long)a.addr,
                           (unsigned long long)b.addr, a.tag, b.tag, a.site, b.site, a.dep, b.dep);
                }
            }
            printf("    %-8s %-9s %-9s: measured records %llu cold, %llu after a 400-op warm-up: %s "
                   "(%llu argv records at other addresses; page faults %llu cold, %llu warm)\n",
                   RUNS[w][0], RUNS[w][1], tables[t], (unsigned long long)nc, (unsigned long long)nw,
                   same ? "identical" : "DIFFERENT", (unsigned long long)argv_moved,
                   (unsigned long long)fc, (unsigned long long)fw);
            free(c);
            free(x);
            TEST_ASSERT(nc > 0 && same && fw <= fc); /* a warm-up leaves no page fresher */
            /* and the replies: reply_crc32 replays the measured queries only */
            ksWorkloadResult a, b;
            char err[256];
            TEST_ASSERT(ksWorkloadRun(&cold, &a, err, sizeof(err)) == 0);
            TEST_ASSERT(ksWorkloadRun(&warm, &b, err, sizeof(err)) == 0);
            TEST_ASSERT(a.reply_crc32 == b.reply_crc32 && a.ops == b.ops);
        }
    return 0;
}

static int test_warmup_refused(void) {
    const char *others[3] = {"load", "iterate", "mset"};
    for (int w = 0; w < 3; w++) {
        ksWorkloadSpec s = spec(others[w], "none", "hashtable", 10);
        ksWorkloadResult res;
        char err[256] = "";
        TEST_ASSERT(ksWorkloadRun(&s, &res, err, sizeof(err)) == -1);
        TEST_ASSERT_MSG(strstr(err, "--warmup-ops") != NULL, "%s", err);
        const ksWorkloadOption *o = ksWorkloadOptionFind("warmup-ops");
        TEST_ASSERT(o != NULL && !ksWorkloadOptionApplies(o, others[w]));
    }
    TEST_ASSERT(ksWorkloadOptionApplies(ksWorkloadOptionFind("warmup-ops"), "pipeline"));
    TEST_ASSERT(ksWorkloadOptionApplies(ksWorkloadOptionFind("warmup-ops"), "mget"));
    return 0;
}

int main(int argc, char **argv) {
    TEST_INIT(argc, argv);
    RUN(test_warmup_markers_balanced);
    RUN(test_warmup_keeps_measured);
    RUN(test_warmup_refused);
    return TEST_DONE();
}
