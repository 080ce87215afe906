/*
 * fuzz_cref_options.c -- libFuzzer target: c_ref's option parsers on
 * arbitrary text: the ksCreate option string, the variant string of
 * ksExecute (ksParseVariants) and the CLI's workload options
 * (ksWorkloadOptionFind / ksWorkloadOptionApplies / ksWorkloadOptionSet, the
 * table-driven parser that kvsim-cref's main.c runs on argv).
 *
 * Input: NUL-separated strings.  The first is the keyspace options, the
 * second the variant string; each later one is "NAME=VALUE" (or "NAME" for a
 * flag) applied to a workload spec of the workload named by the input's first
 * byte.  Checked beyond ASan/UBSan: every refusal gives a one-line message.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../c_ref/kvsim_cref.h"
#include "../../c_ref/workload.h"

static const char *const kWorkloads[] = {"load", "iterate", "pipeline", "mset", "mget"};

static void checkMessage(const char *what, const char *msg) {
    if (!msg || !*msg || strchr(msg, '\n')) {
        fprintf(stderr, "fuzz_cref_options: %s: not a one-line message: '%s'\n", what, msg ? msg : "(null)");
        abort();
    }
}

/* The string after p's (end: at the terminating NUL, an empty string). */
static char *next(char *p, char *end) {
    p += strlen(p);
    return p < end ? p + 1 : end;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    /* a NUL-terminated copy: strings point into it (string options keep the pointer) */
    char *text = malloc(size + 1);
    memcpy(text, data, size);
    text[size] = '\0';
    const char *workload = kWorkloads[(uint8_t)data[0] % 5];
    char *p = text + 1, *end = text + size;
    const char *opts = p;
    p = next(p, end);
    const char *variant = p;
    p = next(p, end);

    ksKeyspace *ks = ksCreate(opts);
    if (!ks) {
        checkMessage("ksCreate", ksLastError(NULL));
        ks = ksCreate("");
    }
    const uint8_t *reply;
    size_t rlen, consumed;
    if (ksExecute(ks, variant, (const uint8_t *)"", 0, &reply, &rlen, &consumed))
        checkMessage("ksExecute variant", ksLastError(ks));
    ksDestroy(ks);

    ksWorkloadSpec spec;
    ksWorkloadSpecInit(&spec, workload);
    char err[256];
    for (; p < end; p = next(p, end)) {
        char *eq = strchr(p, '=');
        if (eq) *eq = '\0';
        const ksWorkloadOption *o = ksWorkloadOptionFind(p);
        if (!o) continue;
        (void)ksWorkloadOptionApplies(o, workload);
        const char *value = eq ? eq + 1 : NULL;
        if (ksWorkloadOptionSet(&spec, o, value, err, sizeof err)) checkMessage("ksWorkloadOptionSet", err);
        if (eq) p = eq + 1; /* continue after the value */
    }
    free(text);
    return 0;
}
