/*
 * testhelp.h -- minimal test harness for c_ref's C unit tests (Valkey's
 * src/unit style: test_<name>() functions, TEST_ASSERT, flags from argv).
 *
 *   static int test_foo(void) { TEST_ASSERT(1 + 1 == 2); return 0; }
 *   int main(int argc, char **argv) { TEST_INIT(argc, argv); RUN(test_foo); return TEST_DONE(); }
 *
 * Flags: --seed N (default 1), --accurate (larger workloads).
 */
#ifndef KS_TESTHELP_H
#define KS_TESTHELP_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static unsigned long long test_seed = 1;
static int test_accurate = 0;
static int test_failed = 0, test_run = 0;

#define TEST_ASSERT_MSG(cond, ...)                                                                 \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: assertion failed: %s: ", __FILE__, __LINE__, #cond);          \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fprintf(stderr, "\n");                                                                 \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)
#define TEST_ASSERT(cond) TEST_ASSERT_MSG(cond, "%s", "")

#define TEST_INIT(argc, argv)                                                                      \
    do {                                                                                           \
        for (int _i = 1; _i < (argc); _i++) {                                                      \
            if (!strcmp((argv)[_i], "--seed") && _i + 1 < (argc)) test_seed = strtoull((argv)[++_i], NULL, 10); \
            else if (!strcmp((argv)[_i], "--accurate")) test_accurate = 1;                         \
        }                                                                                          \
    } while (0)

#define RUN(fn)                                                                                    \
    do {                                                                                           \
        clock_t _t0 = clock();                                                                     \
        int _rc = fn();                                                                            \
        test_run++;                                                                                \
        if (_rc) test_failed++;                                                                    \
        printf("[%s] %s (%.2fs)\n", _rc ? "FAIL" : " ok ", #fn, (double)(clock() - _t0) / CLOCKS_PER_SEC); \
    } while (0)

#define TEST_DONE() (printf("%d tests, %d failed\n", test_run, test_failed), test_failed ? 1 : 0)

static inline unsigned long long test_rand(unsigned long long *s) {
    unsigned long long z = (*s += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

#endif
