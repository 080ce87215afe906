/*
 * main.c -- kvsim-cref, the c_ref command line.
 *
 *   kvsim-cref trace  WORKLOAD -o OUT|- [options]          write a .kvt trace (raw chunks)
 *        [--then OUT2 [--variant V] [--batch N] [--chunk N] [--pipeline P]]...
 *                                     more traces from the one setup (a child each)
 *   kvsim-cref native WORKLOAD [options] --repeat R --json  time the native build
 *        [--versus-variant V] [--versus-pipeline P] [--versus-batch N] [--versus-first a|b]
 *                                     time configuration B against A in one process
 *   kvsim-cref options [--json]                            the workloads and options as JSON
 *   kvsim-cref serve [--port P] [--bind ADDR] [keyspace and variant options]
 *                                     the keyspace behind a RESP2 server (server.c)
 *
 * The workloads and their options (--keys, --ops, --variant, ...) are the
 * tables of workload.c; this file parses them generically and `options`
 * prints them (the kvsim CLI builds its own options from that output).
 *
 * One binary, two builds: `native` calls ksWorkloadRun from the native object
 * set (tracing compiled out), `trace` calls tr_ksWorkloadRun from the traced
 * set (see workload.h and the Makefile).  Errors print one line
 * "kvsim-cref: ..." to stderr and exit 2; a trace goes to a temporary file in
 * the output's directory and is renamed into place only when complete.
 */

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/personality.h>
#include <sys/stat.h>
#include <unistd.h>

#include "arena.h"
#include "emit.h"
#include "server.h"
#include "serverloop.h"
#include "workload.h"

#define KVSIM_CREF_VERSION "0.1.0"

/* The traced object set, renamed with a tr_ prefix by the Makefile. */
int tr_ksWorkloadRun(const ksWorkloadSpec *spec, ksWorkloadResult *res, char *err, size_t errlen);
ksEmitter *tr_ksEmitterOpen(FILE *out, const char *json, uint32_t chunk_records);
int tr_ksEmitterClose(ksEmitter *e);
int tr_ksEmitterRetarget(ksEmitter *e, FILE *out, const char *json);
int tr_ksServe(const ksServerConfig *cfg, char *err, size_t errlen);
int tr_ksServerLoopRun(const ksServerLoopConfig *cfg, ksServerLoopResult *res, char *err, size_t errlen);
extern ksEmitter *tr_ksEmitterCurrent;

static char *tmp_path = NULL;

static void die(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "kvsim-cref: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    if (tmp_path) unlink(tmp_path);
    exit(2);
}

static void usage(void) {
    fprintf(stderr,
            "usage: kvsim-cref trace WORKLOAD -o OUT|- [options]\n"
            "              [--then OUT2 [--variant V] [--batch N] [--chunk N] [--pipeline P]]...\n"
            "              (each --then: one more trace, to OUT2, of these options with its\n"
            "               variants, from the same setup: the bytes it would have alone)\n"
            "       kvsim-cref native WORKLOAD [options] [--repeat R] [--json]\n"
            "              [--versus-variant V] [--versus-pipeline P] [--versus-batch N] [--versus-first a|b]\n"
            "              (pipeline, mget, mset: R rounds of A and B in one process,\n"
            "               B the options with these replaced; A B then B A alternately)\n"
            "       kvsim-cref options [--json]\n"
            "       kvsim-cref serve [--port P] [--bind ADDR] [--maxclients N] [--table T] [--layout L]\n"
            "              [--cluster] [--seed N] [--activerehashing yes|no] [--rdbchecksum yes|no]\n"
            "              [--pipeline P] [--variant MULTIKEY] [--batch 0..128] [--allocator libc|arena]\n"
            "              [--trace OUT]\n"
            "              (an empty keyspace served on ADDR:P [127.0.0.1:6379]; P 0: any free port;\n"
            "               --allocator: the keyspace's blocks from the C library's malloc [libc],\n"
            "               as the reference Valkey, or from c_ref's deterministic arena;\n"
            "               prints 'ready HOST PORT' when listening; stops on SIGTERM;\n"
            "               --trace: the traced build serves, its trace written to OUT at the end)\n"
            "       kvsim-cref serverloop [--command ping|get|mset] [--mset-keys M] [--depth D]\n"
            "              [--iters N] [--rounds R] [--keys K] [--value-size V] [--batch 0..128]\n"
            "              [--trace OUT]\n"
            "              (the server's request code as a kernel, c_ref/serverloop.c: segments of D\n"
            "               requests fed to the server between read and write, timed natively with\n"
            "               and without a loopback write+read between them (JSON), or traced)\n"
            "WORKLOAD: %s\noptions:\n", ksWorkloadNames());
    for (int i = 0; i < KS_NUM_WORKLOAD_OPTIONS; i++) {
        const ksWorkloadOption *o = &ksWorkloadOptions[i];
        char arg[64] = "";
        if (o->type == KS_OPT_CHOICE) snprintf(arg, sizeof(arg), " %s", o->choices);
        else if (o->type != KS_OPT_FLAG)
            snprintf(arg, sizeof(arg), " %s", o->type == KS_OPT_STRING ? "NAME" : o->type == KS_OPT_FLOAT ? "F" : "N");
        fprintf(stderr, "  --%s%s  %s%s%s%s\n", o->name, arg, o->help, o->dflt ? " [default: " : "",
                o->dflt ? o->dflt : "", o->dflt ? "]" : "");
    }
}

static unsigned long long parseUint(const char *opt, const char *v, unsigned long long lo, unsigned long long hi) {
    char *end;
    errno = 0;
    if (!v || !*v || *v == '-' || *v == '+') die("%s: expected an integer in %llu..%llu, got '%s'", opt, lo, hi, v ? v : "");
    unsigned long long x = strtoull(v, &end, 10);
    if (errno || *end || x < lo || x > hi) die("%s: expected an integer in %llu..%llu, got '%s'", opt, lo, hi, v);
    return x;
}

/* --- JSON helpers ---------------------------------------------------------- */

typedef struct {
    char *buf;
    size_t len, cap;
} jbuf;

static void jput(jbuf *j, const char *fmt, ...) {
    va_list ap;
    while (1) {
        va_start(ap, fmt);
        int n = vsnprintf(j->buf + j->len, j->cap - j->len, fmt, ap);
        va_end(ap);
        if (n >= 0 && (size_t)n < j->cap - j->len) {
            j->len += (size_t)n;
            return;
        }
        j->cap = j->cap ? j->cap * 2 + (size_t)n : 4096;
        j->buf = realloc(j->buf, j->cap);
        if (!j->buf) abort();
    }
}

static void jstr(jbuf *j, const char *s) {
    jput(j, "\"");
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') jput(j, "\\%c", *s);
        else if ((unsigned char)*s < 0x20) jput(j, "\\u%04x", *s);
        else jput(j, "%c", *s);
    }
    jput(j, "\"");
}

static void jstrlist(jbuf *j, const char *const *names, int n) {
    jput(j, "[");
    for (int i = 0; i < n; i++) {
        if (i) jput(j, ",");
        jstr(j, names[i]);
    }
    jput(j, "]");
}

static void jcounts(jbuf *j, const double *runs, int n) {
    jput(j, "[");
    for (int i = 0; i < n; i++) jput(j, "%s%.0f", i ? "," : "", runs[i]);
    jput(j, "]");
}

static void jworkload(jbuf *j, const ksWorkloadSpec *s) {
    /* keys sorted */
    jput(j, "{\"activerehashing\":");
    jstr(j, s->activerehashing ? s->activerehashing : "yes");
    if (ksWorkloadOptionGiven(s, "allocator")) { /* headers without it as before */
        jput(j, ",\"allocator\":");
        jstr(j, s->allocator);
    }
    jput(j, ",\"batch\":%d,", s->batch);
    if (ksWorkloadOptionGiven(s, "chunk")) jput(j, "\"chunk\":%d,", s->chunk); /* headers without it as before */
    jput(j, "\"cluster\":%s,\"depth\":%d,\"expire\":%s,", s->cluster ? "true" : "false", s->depth,
         s->expire ? "true" : "false");
    jput(j, "\"fields_per_command\":%d,\"hash_fields\":%llu,\"hash_op\":", s->fields_per_command,
         (unsigned long long)s->hash_fields);
    jstr(j, s->hash_op ? s->hash_op : "hget");
    jput(j, ",\"key_size\":%u,\"keys\":%llu,", s->key_size, (unsigned long long)s->keys);
    jput(j, "\"keys_per_command\":%d,", s->keys_per_command);
    jput(j, "\"layout\":");
    jstr(j, s->layout);
    jput(j, ",\"mset_keys\":");
    jstr(j, s->mset_keys ? s->mset_keys : "new");
    jput(j, ",\"name\":");
    jstr(j, s->workload);
    jput(j, ",\"op\":");
    jstr(j, s->op);
    jput(j, ",\"ops\":%llu,\"pipeline\":", (unsigned long long)s->ops);
    jstr(j, s->pipeline ? s->pipeline : "naive");
    jput(j, ",\"pipeline_depth\":%d,\"prefill\":%.17g,\"rdbchecksum\":",
         s->pipeline_depth > 1 ? s->pipeline_depth : 1, s->prefill);
    jstr(j, s->rdbchecksum ? s->rdbchecksum : "yes");
    if (ksWorkloadOptionGiven(s, "restart-pages")) { /* headers without it as before */
        jput(j, ",\"restart_pages\":");
        jstr(j, s->restart_pages);
    }
    jput(j, ",\"seed\":%llu,\"set_ratio\":%.17g,\"snapshot_from\":", (unsigned long long)s->seed,
         s->set_ratio);
    jstr(j, s->snapshot_from ? s->snapshot_from : "standalone");
    jput(j, ",\"table\":");
    jstr(j, s->table);
    jput(j, ",\"value_size\":%u,\"variant\":", s->value_size);
    jstr(j, s->variant);
    jput(j, ",\"warm_setup\":");
    jstr(j, s->warm_setup ? s->warm_setup : "compact");
    jput(j, ",\"warm_setup_lines\":%llu", (unsigned long long)(s->warm_setup_lines ? s->warm_setup_lines
                                                                                  : KS_WARM_SETUP_LINES));
    jput(j, ",\"warmup_ops\":%llu", (unsigned long long)s->warmup_ops);
    if (s->workload && (!strcmp(s->workload, "zscore") || !strcmp(s->workload, "zmscore"))) /* others as before */
        jput(j, ",\"zset_members\":%llu", (unsigned long long)s->zset_members);
    jput(j, "}");
}

static void jproducer(jbuf *j) {
    const char *gc = getenv("KVSIM_GIT_COMMIT");
    jput(j, "{\"git_commit\":");
    if (gc && *gc) jstr(j, gc);
    else jput(j, "null");
    jput(j, ",\"name\":\"kvsim-cref\",\"version\":\"%s\"}", KVSIM_CREF_VERSION);
}

static int cmpDouble(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double medianOf(const double *runs, int n) {
    double sorted[KS_MAX_REPEAT];
    memcpy(sorted, runs, sizeof(double) * (size_t)n);
    qsort(sorted, (size_t)n, sizeof(double), cmpDouble);
    return n % 2 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
}

static void jruns(jbuf *j, const double *runs, int n) {
    jput(j, "[");
    for (int i = 0; i < n; i++) jput(j, "%s%.9f", i ? "," : "", runs[i]);
    jput(j, "]");
}


/* --- trace --then: more variants traced from one setup ------------------------ */

/* The options a --then configuration may set: its variants' (workload.h, ksWorkloadSpec.then). */
static const char *const THEN_OPTIONS[] = {"variant", "batch", "chunk", "pipeline"};
#define MAX_THEN 64
static ksWorkloadSpec then_spec[MAX_THEN];
static const char *then_out[MAX_THEN];
static FILE *then_f;   /* in a --then child: its trace's stream */
static int then_child; /* and its index */

static FILE *traceOpen(const char *out);
static char *traceHeader(const ksWorkloadSpec *s);
static int thenBegin(int i, const ksWorkloadSpec *b);

/* `--then OUT [--variant V] [--batch N] [--chunk N] [--pipeline P]`, repeated after the
 * first trace's options: each a trace to OUT of the same options with these variants
 * (the others' defaults where not given), from the first one's setup. */
static void parseThen(ksWorkloadSpec *a, int argc, char **argv, int at) {
    ksWorkloadSpec defaults;
    ksWorkloadSpecInit(&defaults, a->workload);
    int n = 0;
    char err[512] = "";
    for (int i = at; i < argc;) {
        if (strcmp(argv[i], "--then")) die("--then: expected --then OUT, got '%s'", argv[i]);
        if (i + 1 >= argc || !*argv[i + 1] || argv[i + 1][0] == '-') die("--then: missing OUT (a file name)");
        if (n == MAX_THEN) die("--then: at most %d", MAX_THEN);
        ksWorkloadSpec *b = &then_spec[n];
        *b = *a;
        b->variant = defaults.variant;
        b->batch = defaults.batch;
        b->chunk = defaults.chunk;
        b->pipeline = defaults.pipeline;
        for (size_t k = 0; k < sizeof(THEN_OPTIONS) / sizeof(THEN_OPTIONS[0]); k++) {
            const ksWorkloadOption *wo = ksWorkloadOptionFind(THEN_OPTIONS[k]);
            if (wo) b->given &= ~(1ULL << (wo - ksWorkloadOptions));
        }
        then_out[n] = argv[i + 1];
        for (i += 2; i < argc && strcmp(argv[i], "--then"); i += 2) {
            const char *o = argv[i];
            size_t k = 0;
            while (k < sizeof(THEN_OPTIONS) / sizeof(THEN_OPTIONS[0]) &&
                   (strncmp(o, "--", 2) || strcmp(o + 2, THEN_OPTIONS[k])))
                k++;
            if (k == sizeof(THEN_OPTIONS) / sizeof(THEN_OPTIONS[0]))
                die("--then %d: only --variant, --batch, --chunk and --pipeline may differ, not '%s'", n + 1, o);
            const ksWorkloadOption *wo = ksWorkloadOptionFind(o + 2);
            if (!wo || !ksWorkloadOptionApplies(wo, a->workload))
                die("%s does not apply to workload '%s'", o, a->workload);
            if (i + 1 >= argc) die("%s: missing value", o);
            if (ksWorkloadOptionSet(b, wo, argv[i + 1], err, sizeof(err))) die("%s", err);
            b->given |= 1ULL << (wo - ksWorkloadOptions);
        }
        b->nthen = 0;
        n++;
    }
    a->nthen = n;
    a->then = then_spec;
    a->then_begin = thenBegin;
}

/* In the --then child i: its trace, to then_out[i], through the inherited emitter. */
static int thenBegin(int i, const ksWorkloadSpec *b) {
    tmp_path = NULL; /* the parent's temporary file is the parent's */
    char *header = traceHeader(b);
    then_f = traceOpen(then_out[i]);
    then_child = i;
    int rc = tr_ksEmitterRetarget(tr_ksEmitterCurrent, then_f, header);
    free(header);
    if (rc) die("--then %s: cannot write the trace header: %s", then_out[i], strerror(errno));
    return 0;
}

/* --- Trace output (trace, serve --trace) ------------------------------------ */

/* The trace header of a run described by s (keys sorted, no whitespace). */
static char *traceHeader(const ksWorkloadSpec *s) {
    jbuf j = {0};
    jput(&j, "{\"arena_base\":%llu,\"chunk_records\":%u,\"format_version\":%d,\"gap_model\":",
         (unsigned long long)KS_ARENA_DEFAULT_BASE, KVT_DEFAULT_CHUNK_RECORDS, KVT_VERSION);
    jstr(&j, KS_GAP_MODEL);
    jput(&j, ",\"markers\":");
    jstrlist(&j, ksMarkerName, KVT_NUM_MARKERS);
    static const char *const phases[] = {"setup", "measure"};
    jput(&j, ",\"phases\":");
    jstrlist(&j, phases, 2);
    jput(&j, ",\"producer\":");
    jproducer(&j);
    /* "setup": how the workload's setup is carried (compact | accesses: as the
     * warm-up prefix; none: not at all, the measured phase starts cold) */
    jput(&j, ",\"setup\":");
    jstr(&j, s->warm_setup ? s->warm_setup : "compact");
    /* "site_kinds": the kind of work of each site's cost ("work_kinds" names them) */
    jput(&j, ",\"site_kinds\":[");
    for (int i = 0; i < KS_NUM_SITES; i++) jput(&j, "%s%u", i ? "," : "", (unsigned)ksSiteKind[i]);
    jput(&j, "],\"sites\":");
    jstrlist(&j, ksSiteName, KS_NUM_SITES);
    jput(&j, ",\"tags\":");
    jstrlist(&j, ksTagName, KVT_NUM_TAGS);
    /* "prefix": the trace has a warm-up prefix (the setup, see "setup", and
     * --warmup-ops operations); "skipped": it has none */
    int carried = !s->warm_setup || strcmp(s->warm_setup, "none");
    jput(&j, ",\"warmup\":\"%s\",\"work_kinds\":", s->warmup_ops || carried ? "prefix" : "skipped");
    jstrlist(&j, ksWorkKindName, KVT_NUM_WORK);
    /* "work_stores": each kind's stores per instruction (emit.c ksWorkStores) */
    jput(&j, ",\"work_stores\":{");
    for (int k = 0; k < KVT_NUM_WORK; k++)
        jput(&j, "%s\"%s\":%s", k ? "," : "", ksWorkKindName[k], ksWorkStores[k]);
    jput(&j, "}");
    jput(&j, ",\"workload\":");
    jworkload(&j, s);
    jput(&j, "}");
    return j.buf;
}

/* The trace's stream: stdout for "-", else a temporary file beside out (tmp_path),
 * renamed by traceClose only when complete. An existing out that is not a regular file
 * (/dev/null, a pipe) is written in place: a rename would replace the device node. */
static FILE *traceOpen(const char *out) {
    if (!strcmp(out, "-")) return stdout;
    struct stat st;
    if (stat(out, &st) == 0 && !S_ISREG(st.st_mode)) {
        FILE *f = fopen(out, "wb");
        if (!f) die("cannot open '%s': %s", out, strerror(errno));
        return f;
    }
    size_t n = strlen(out) + 32;
    tmp_path = malloc(n);
    const char *slash = strrchr(out, '/');
    if (slash) snprintf(tmp_path, n, "%.*s/.%s.XXXXXX", (int)(slash - out), out, slash + 1);
    else snprintf(tmp_path, n, ".%s.XXXXXX", out);
    int fd = mkstemp(tmp_path);
    if (fd < 0) {
        char *p = tmp_path;
        tmp_path = NULL;
        free(p);
        die("cannot create '%s': %s", out, strerror(errno));
    }
    FILE *f = fdopen(fd, "wb");
    if (!f) die("cannot open '%s': %s", out, strerror(errno));
    static char iobuf[1 << 20];
    setvbuf(f, iobuf, _IOFBF, sizeof(iobuf));
    return f;
}

static void traceClose(FILE *f, const char *out) {
    if (f != stdout) {
        if (fclose(f) != 0) die("write error on '%s': %s", out, strerror(errno));
        if (!tmp_path) return; /* written in place */
        if (rename(tmp_path, out) != 0) die("cannot rename to '%s': %s", out, strerror(errno));
        free(tmp_path);
        tmp_path = NULL;
    } else if (fflush(stdout) != 0) {
        die("write error on stdout");
    }
}

/* --- serve ------------------------------------------------------------------ */

/* The keyspace options of `trace` that a server takes, read through the workload
 * option table (one definition); --batch, --port, --bind, --allocator and --maxclients are the
 * server's own (batch 0: no prefetch, as Valkey's prefetch-batch-max-size). */
static const char *const serveOptions[] = {"table", "layout", "cluster", "seed", "activerehashing",
                                           "rdbchecksum", "pipeline", "variant"};

static int serveMain(int argc, char **argv) {
    ksWorkloadSpec s;
    ksWorkloadSpecInit(&s, "mget");
    s.pipeline = "lookahead"; /* Valkey's: the lookahead of PR #2092 and its key batches */
    s.variant = "batch";
    s.seed = 0;
    ksServerConfig cfg = {.bind = "127.0.0.1", .port = 6379, .batch = 16 /* Valkey prefetch-batch-max-size */, .maxclients = 10000,
                          .ready = stdout};
    char err[512] = "";
    const char *trace_out = NULL;
    for (int i = 2; i < argc; i++) {
        const char *o = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(o, "-h") || !strcmp(o, "--help")) {
            usage();
            return 0;
        }
        const ksWorkloadOption *wo = NULL;
        for (size_t k = 0; k < sizeof(serveOptions) / sizeof(serveOptions[0]); k++)
            if (!strncmp(o, "--", 2) && !strcmp(o + 2, serveOptions[k])) wo = ksWorkloadOptionFind(o + 2);
        if (wo && wo->type == KS_OPT_FLAG) {
            ksWorkloadOptionSet(&s, wo, NULL, err, sizeof(err));
            continue;
        }
        if (!v) die("%s: missing value", o);
        i++;
        if (wo) {
            if (ksWorkloadOptionSet(&s, wo, v, err, sizeof(err))) die("%s", err);
        } else if (!strcmp(o, "--port")) {
            cfg.port = (int)parseUint(o, v, 0, 65535);
        } else if (!strcmp(o, "--bind")) {
            cfg.bind = v;
        } else if (!strcmp(o, "--batch")) {
            cfg.batch = (int)parseUint(o, v, 0, KS_SERVER_MAX_BATCH);
        } else if (!strcmp(o, "--allocator")) {
            if (strcmp(v, "libc") && strcmp(v, "arena")) die("--allocator: expected libc or arena, got '%s'", v);
            cfg.arena_allocator = !strcmp(v, "arena");
        } else if (!strcmp(o, "--maxclients")) {
            cfg.maxclients = (int)parseUint(o, v, 1, 1000000);
        } else if (!strcmp(o, "--trace")) {
            if (!*v || !strcmp(v, "-")) die("--trace: expected a file name (stdout carries the ready line)");
            trace_out = v;
        } else {
            die("serve: unknown option '%s'", o);
        }
    }
    char opts[256];
    snprintf(opts, sizeof(opts), "table=%s layout=%s cluster=%d seed=%llu rdbchecksum=%s activerehashing=%s",
             s.table, s.layout, s.cluster, (unsigned long long)s.seed, s.rdbchecksum ? s.rdbchecksum : "yes",
             s.activerehashing ? s.activerehashing : "yes");
    cfg.options = opts;
    cfg.pipeline = s.pipeline;
    cfg.multikey = s.variant;
    if (!trace_out) {
        if (ksServe(&cfg, err, sizeof(err))) die("serve: %s", err);
        return 0;
    }
    /* --trace: the traced build serves, every access of every request recorded (the
     * header's workload is the server's options, named "serve") */
    s.workload = "serve";
    s.warm_setup = "none"; /* the server starts empty: no setup to carry */
    char *header = traceHeader(&s);
    FILE *f = traceOpen(trace_out);
    ksEmitter *e = tr_ksEmitterOpen(f, header, KVT_DEFAULT_CHUNK_RECORDS);
    free(header);
    if (!e) die("cannot write the trace header: %s", strerror(errno));
    if (tr_ksServe(&cfg, err, sizeof(err))) die("serve: %s", err);
    if (tr_ksEmitterClose(e)) die("write error on '%s': %s", trace_out, strerror(errno));
    traceClose(f, trace_out);
    return 0;
}

/* --- serverloop ---------------------------------------------------------------- */

/* `kvsim-cref serverloop`: the server's request code timed (JSON on stdout) or traced
 * (--trace OUT), c_ref/serverloop.c; the server's defaults (as `serve`) for the rest. */
/* serverloop --trace: the server's blocks come from the C library's allocator (as in
 * `serve`), whose addresses follow the address-space layout; without its randomisation
 * (personality ADDR_NO_RANDOMIZE, then the program again) the trace is the same on every
 * run.  Where the kernel refuses, the run carries on randomised. */
static void noRandomize(char **argv) {
    int p = personality(0xffffffff);
    if (p == -1 || (p & ADDR_NO_RANDOMIZE)) return;
    if (personality((unsigned long)p | ADDR_NO_RANDOMIZE) == -1) return;
    execv("/proc/self/exe", argv); /* returns only when it fails */
}

static int serverLoopMain(int argc, char **argv) {
    for (int i = 2; i < argc; i++)
        if (!strcmp(argv[i], "--trace")) noRandomize(argv);
    ksServerLoopConfig cfg = {.pipeline = "lookahead", .multikey = "batch", .batch = 0,
                              .command = KS_SERVERLOOP_PING, .mset_keys = 10, .depth = 1, .keys = 1000, .value_size = 3, .iters = 20000, .rounds = 5};
    const char *trace_out = NULL;
    for (int i = 2; i < argc; i++) {
        const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) die("%s: missing value", o);
        i++;
        if (!strcmp(o, "--command")) {
            cfg.command = KS_SERVERLOOP_COMMANDS;
            for (int c = 0; c < KS_SERVERLOOP_COMMANDS; c++)
                if (!strcmp(v, ksServerLoopCommandNames[c])) cfg.command = c;
            if (cfg.command == KS_SERVERLOOP_COMMANDS) die("--command: expected ping, get or mset, got '%s'", v);
        } else if (!strcmp(o, "--mset-keys")) {
            cfg.mset_keys = (int)parseUint(o, v, 1, 1000);
        } else if (!strcmp(o, "--depth")) {
            cfg.depth = (int)parseUint(o, v, 1, 1000);
        } else if (!strcmp(o, "--iters")) {
            cfg.iters = (long)parseUint(o, v, 1, 10000000);
        } else if (!strcmp(o, "--rounds")) {
            cfg.rounds = (int)parseUint(o, v, 1, KS_SERVERLOOP_MAX_ROUNDS);
        } else if (!strcmp(o, "--keys")) {
            cfg.keys = (int)parseUint(o, v, 1, 10000000);
        } else if (!strcmp(o, "--value-size")) {
            cfg.value_size = (uint32_t)parseUint(o, v, 1, 1 << 20);
        } else if (!strcmp(o, "--batch")) {
            cfg.batch = (int)parseUint(o, v, 0, KS_SERVER_MAX_BATCH);
        } else if (!strcmp(o, "--trace")) {
            if (!*v || !strcmp(v, "-")) die("--trace: expected a file name");
            trace_out = v;
        } else {
            die("serverloop: unknown option '%s'", o);
        }
    }
    ksWorkloadSpec s; /* the keyspace's defaults, as `serve` takes them */
    ksWorkloadSpecInit(&s, "mget");
    char opts[256];
    snprintf(opts, sizeof(opts), "table=%s layout=%s cluster=%d seed=0", s.table, s.layout, s.cluster);
    cfg.options = opts;
    char err[512] = "";
    ksServerLoopResult res;
    if (trace_out) {
        s.workload = "serverloop";
        s.warm_setup = "accesses"; /* the fill and the warm segments, recorded as they run */
        s.pipeline = cfg.pipeline;
        s.variant = cfg.multikey;
        s.batch = cfg.batch;
        s.keys = cfg.command != KS_SERVERLOOP_PING ? (uint64_t)cfg.keys : 0;
        s.value_size = cfg.value_size;
        s.ops = (uint64_t)cfg.iters * (uint64_t)cfg.depth;
        s.pipeline_depth = cfg.depth;
        s.seed = 0;
        char *header = traceHeader(&s);
        FILE *f = traceOpen(trace_out);
        ksEmitter *e = tr_ksEmitterOpen(f, header, KVT_DEFAULT_CHUNK_RECORDS);
        free(header);
        if (!e) die("cannot write the trace header: %s", strerror(errno));
        if (tr_ksServerLoopRun(&cfg, &res, err, sizeof(err))) die("%s", err);
        if (tr_ksEmitterClose(e)) die("write error on '%s': %s", trace_out, strerror(errno));
        traceClose(f, trace_out);
        return 0;
    }
    if (ksServerLoopRun(&cfg, &res, err, sizeof(err))) die("%s", err);
    static const char *const arms[KS_SERVERLOOP_ARMS] = {"none", "loopback"};
    jbuf j = {0};
    jput(&j, "{\"command\":\"%s\",\"depth\":%d,\"iters\":%ld,\"keys\":%d,", ksServerLoopCommandNames[cfg.command],
         cfg.depth, cfg.iters, cfg.keys);
    if (cfg.command == KS_SERVERLOOP_MSET) jput(&j, "\"mset_keys\":%d,", cfg.mset_keys);
    for (int a = 0; a < KS_SERVERLOOP_ARMS; a++) {
        jput(&j, "\"%s_clock_ns\":[", arms[a]);
        for (int r = 0; r < res.rounds; r++) jput(&j, "%s%.1f", r ? "," : "", res.clock_ns[a][r]);
        jput(&j, "],\"%s_usec_per_call\":[", arms[a]);
        for (int r = 0; r < res.rounds; r++) jput(&j, "%s%.3f", r ? "," : "", res.usec_per_call[a][r]);
        jput(&j, "],\"%s_segment_ns\":[", arms[a]);
        for (int r = 0; r < res.rounds; r++) jput(&j, "%s%.1f", r ? "," : "", res.segment_ns[a][r]);
        jput(&j, "],");
    }
    jput(&j, "\"producer\":");
    jproducer(&j);
    jput(&j, ",\"rounds\":%d,\"value_size\":%u}", res.rounds, cfg.value_size);
    printf("%s\n", j.buf);
    free(j.buf);
    return fflush(stdout) == 0 ? 0 : 1;
}

/* --- Main ------------------------------------------------------------------ */

int main(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        usage();
        return argc < 2 ? 2 : 0;
    }
    const char *mode = argv[1];
    if (!strcmp(mode, "options")) {
        if (argc > 3 || (argc == 3 && strcmp(argv[2], "--json"))) die("options: takes only --json");
        size_t n = ksWorkloadOptionsWriteJson(NULL, 0);
        char *buf = malloc(n + 1);
        if (!buf) die("out of memory");
        ksWorkloadOptionsWriteJson(buf, n + 1);
        printf("%s\n", buf);
        free(buf);
        return fflush(stdout) == 0 ? 0 : 1;
    }
    if (!strcmp(mode, "serve")) return serveMain(argc, argv);
    if (!strcmp(mode, "serverloop")) return serverLoopMain(argc, argv);
    if (strcmp(mode, "trace") && strcmp(mode, "native")) die("unknown command '%s' (trace|native|options|serve|serverloop)", mode);
    int trace = !strcmp(mode, "trace");
    if (argc < 3 || argv[2][0] == '-') die("missing WORKLOAD (%s)", ksWorkloadNames());
    if (!ksWorkloadFamily(argv[2])) die("unknown workload '%s' (%s)", argv[2], ksWorkloadNames());
    ksWorkloadSpec s;
    ksWorkloadSpecInit(&s, argv[2]);
    const char *out = NULL;
    const char *versus_first = NULL;
    int json = 0;
    char err[512] = "";
    int then_at = argc; /* trace --then: where the first one starts */
    for (int i = 3; i < argc; i++) {
        const char *o = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (trace && !strcmp(o, "--then")) {
            then_at = i;
            break;
        }
        const ksWorkloadOption *wo = !strncmp(o, "--", 2) ? ksWorkloadOptionFind(o + 2) : NULL;
        if (wo && !ksWorkloadOptionApplies(wo, argv[2]))
            die("%s does not apply to workload '%s' (used by %s)", o, argv[2], ksWorkloadOptionUsers(wo));
        if (wo && wo->type == KS_OPT_FLAG) {
            ksWorkloadOptionSet(&s, wo, NULL, err, sizeof(err));
        } else if (wo) {
            if (!v) die("%s: missing value", o);
            i++;
            if (ksWorkloadOptionSet(&s, wo, v, err, sizeof(err))) die("%s", err);
            s.given |= 1ULL << (wo - ksWorkloadOptions);
        } else if (!strcmp(o, "-o") || !strcmp(o, "--output")) {
            if (!v) die("%s: missing value", o);
            i++;
            out = v;
        } else if (!strcmp(o, "--repeat") && !trace) {
            if (!v) die("%s: missing value", o);
            i++;
            s.repeat = (int)parseUint(o, v, 1, KS_MAX_REPEAT);
        } else if (!strcmp(o, "--json") && !trace) {
            json = 1;
        } else if (!trace && (!strcmp(o, "--versus-variant") || !strcmp(o, "--versus-pipeline"))) {
            if (!v || !*v) die("%s: missing value", o);
            i++;
            if (!strcmp(o, "--versus-variant")) s.versus_variant = v;
            else s.versus_pipeline = v;
            s.versus = 1;
        } else if (!strcmp(o, "--versus-batch") && !trace) {
            if (!v) die("%s: missing value", o);
            i++;
            s.versus_batch = (int)parseUint(o, v, 1, 128);
            s.versus = 1;
        } else if (!strcmp(o, "--versus-first") && !trace) {
            if (!v || (strcmp(v, "a") && strcmp(v, "b"))) die("%s: expected a or b, got '%s'", o, v ? v : "");
            i++;
            versus_first = v;
        } else {
            die("unknown option '%s'", o);
        }
    }
    if (s.key_size < 20 && s.keys > 1) {
        unsigned long long max = 1;
        for (uint32_t d = 0; d < s.key_size; d++) max *= 10;
        if (s.keys > max) die("--key-size %u is too small for --keys %llu", s.key_size, (unsigned long long)s.keys);
    }
    if (trace && !out) die("trace: missing -o OUT|-");
    if (then_at < argc) parseThen(&s, argc, argv, then_at);
    if (versus_first && !s.versus) die("--versus-first: needs --versus-variant, --versus-pipeline or --versus-batch");
    s.versus_first_b = versus_first && !strcmp(versus_first, "b");

    if (!trace) {
        ksWorkloadResult res;
        if (ksWorkloadRun(&s, &res, err, sizeof(err))) die("%s", err);
        double median = medianOf(res.runs_s, res.nruns), cpu_median = medianOf(res.cpu_runs_s, res.nruns);
        jbuf j = {0};
        jput(&j, "{\"arena_allocated_bytes\":%llu,\"cpu_median_s\":%.9f,\"cpu_runs_s\":",
             (unsigned long long)res.arena_allocated, cpu_median);
        jruns(&j, res.cpu_runs_s, res.nruns);
        jput(&j, ",\"keys\":%llu,\"median_s\":%.9f,\"memory_bytes\":%llu,\"minflt_runs\":", (unsigned long long)res.keys,
             median, (unsigned long long)res.memory_bytes);
        jcounts(&j, res.minflt_runs, res.nruns);
        jput(&j, ",\"ops\":%llu,\"ops_per_s\":%.1f,\"producer\":", (unsigned long long)res.ops,
             median > 0 ? (double)res.ops / median : 0.0);
        jproducer(&j);
        jput(&j, ",\"reply_bytes\":%llu,\"reply_crc32\":", (unsigned long long)res.reply_bytes);
        if (res.reply_checked) jput(&j, "%u", res.reply_crc32);
        else jput(&j, "null");
        jput(&j, ",\"runs_s\":");
        jruns(&j, res.runs_s, res.nruns);
        jput(&j, ",\"sys_runs_s\":");
        jruns(&j, res.sys_runs_s, res.nruns);
        if (s.versus) { /* configuration B: its options and runs (keys sorted) */
            jput(&j, ",\"versus\":{\"batch\":%d,\"cpu_median_s\":%.9f,\"cpu_runs_s\":",
                 s.versus_batch ? s.versus_batch : s.batch, medianOf(res.versus_cpu_runs_s, res.nruns));
            jruns(&j, res.versus_cpu_runs_s, res.nruns);
            jput(&j, ",\"first\":\"%s\",\"median_s\":%.9f,\"minflt_runs\":", s.versus_first_b ? "b" : "a",
                 medianOf(res.versus_runs_s, res.nruns));
            jcounts(&j, res.versus_minflt_runs, res.nruns);
            jput(&j, ",\"pipeline\":");
            jstr(&j, s.versus_pipeline ? s.versus_pipeline : s.pipeline ? s.pipeline : "naive");
            jput(&j, ",\"reply_crc32\":");
            if (res.reply_checked) jput(&j, "%u", res.versus_reply_crc32);
            else jput(&j, "null");
            jput(&j, ",\"runs_s\":");
            jruns(&j, res.versus_runs_s, res.nruns);
            jput(&j, ",\"sys_runs_s\":");
            jruns(&j, res.versus_sys_runs_s, res.nruns);
            jput(&j, ",\"variant\":");
            jstr(&j, s.versus_variant ? s.versus_variant : s.variant);
            jput(&j, "}");
        }
        jput(&j, ",\"workload\":");
        jworkload(&j, &s);
        jput(&j, "}");
        if (json) {
            printf("%s\n", j.buf);
        } else {
            printf("%s %s variant=%s keys=%llu: median %.6f s, %.0f ops/s, memory %llu bytes\n", mode, s.workload,
                   s.variant, (unsigned long long)res.keys, median, median > 0 ? (double)res.ops / median : 0.0,
                   (unsigned long long)res.memory_bytes);
        }
        free(j.buf);
        return 0;
    }

    /* --- trace --- */
    char *header = traceHeader(&s);
    FILE *f = traceOpen(out);
    ksEmitter *e = tr_ksEmitterOpen(f, header, KVT_DEFAULT_CHUNK_RECORDS);
    free(header);
    if (!e) die("cannot write the trace header: %s", strerror(errno));
    ksWorkloadResult res;
    s.repeat = 1;
    if (tr_ksWorkloadRun(&s, &res, err, sizeof(err))) die("%s", err);
    if (then_f) { /* a --then child: its own trace from here on */
        f = then_f;
        out = then_out[then_child];
    }
    if (res.arena_base != KS_ARENA_DEFAULT_BASE) die("arena not at its fixed base (address space taken?)");
    uint64_t nrec = e->total_records + e->n;
    if (tr_ksEmitterClose(e)) die("write error on '%s': %s", out, strerror(errno));
    if (getenv("KVSIM_CREF_STATS")) /* benchmarks: tracing throughput of the measured phase */
        fprintf(stderr,
                "{\"records\":%llu,\"measured_s\":%.6f,\"records_per_s\":%.0f,\"measured_cpu_s\":%.6f,"
                "\"records_per_cpu_s\":%.0f}\n",
                (unsigned long long)nrec, res.runs_s[0], res.runs_s[0] > 0 ? (double)nrec / res.runs_s[0] : 0.0,
                res.cpu_runs_s[0], res.cpu_runs_s[0] > 0 ? (double)nrec / res.cpu_runs_s[0] : 0.0);
    traceClose(f, out);
    return 0;
}
