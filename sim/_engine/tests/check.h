/* check.h -- the engine's C tests' one assertion: CHECK(cond) reports a failed
 * condition with its file and line and counts it in `failures`; a test's main
 * returns failures != 0. */
#ifndef KVSIM_TESTS_CHECK_H
#define KVSIM_TESTS_CHECK_H

#include <stdio.h>

static int failures = 0;
#define CHECK(cond)                                                                       \
    do {                                                                                  \
        if (!(cond)) {                                                                    \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);      \
            failures++;                                                                   \
        }                                                                                 \
    } while (0)

#endif /* KVSIM_TESTS_CHECK_H */
