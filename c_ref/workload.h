/*
 * workload.h -- the CLI workloads, compiled into both builds.
 *
 * The native object set exports ksWorkloadRun; the traced set exports the
 * same function as tr_ksWorkloadRun (the Makefile renames every global symbol
 * of the traced objects with a tr_ prefix), so one binary holds both builds
 * and the native path pays nothing for tracing.
 */
#ifndef KS_WORKLOAD_H
#define KS_WORKLOAD_H

#include <stddef.h>
#include <stdint.h>

#define KS_MAX_REPEAT 100

typedef struct ksWorkloadSpec {
    const char *workload; /* a name of the workload table (ksWorkloadNames) */
    uint64_t keys;
    uint64_t ops;
    uint32_t value_size;
    uint32_t key_size;
    const char *variant; /* name within the workload's family */
    int batch;
    int chunk;           /* mget/mset: Redis #15133's in-command chunk (16) */
    int depth;
    double set_ratio;
    int keys_per_command;
    const char *op;      /* iterate: keys | save */
    const char *layout;  /* unified | legacy */
    const char *table;   /* hashtable | dict */
    int cluster;
    uint64_t seed;
    int repeat;
    const char *rdbchecksum; /* yes | no (Valkey's rdbchecksum: SAVE and LOAD) */
    const char *mset_keys;   /* mset: new (fill an empty keyspace) | random (over a range) */
    double prefill;          /* mset random: fraction of the key range existing at the start */
    const char *snapshot_from; /* load: standalone | cluster (the server that wrote the snapshot) */
    const char *allocator;     /* load: arena | libc (the loading server's blocks) */
    const char *restart_pages; /* load: fresh | reused (the restarted server's pages; NULL:
                                  fresh, natively KVSIM_CREF_ARENA_WARM decides) */
    int expire;              /* pipeline/mget: every populated key gets an expire time */
    uint64_t warmup_ops;     /* pipeline/mget: operations run before the measured ones */
    const char *activerehashing; /* yes | no: the rehash cron (keyspace option) */
    int pipeline_depth;          /* mget/mset/hash: commands per query buffer (0 reads as 1) */
    const char *pipeline;        /* mget/mset/hash: the pipeline variant running a query buffer
                                    (naive | lookahead | ...; NULL reads as naive) */
    uint64_t hash_fields;        /* hash: fields per hash key */
    const char *hash_op;         /* hash: hget | hmget | hgetall | hset */
    int fields_per_command;      /* hash: fields per HMGET */
    uint64_t zset_members;       /* zscore: members per sorted-set key */
    /* Native only (kvsim-cref native --versus-*): a second configuration B of the
     * same workload, differing in the variant, the pipeline variant or the batch
     * (NULL / 0: A's), timed against this one (A) in the same process on the
     * same setup: `repeat` rounds of one run each, A B then B A alternately
     * (versus_first_b: B A first).  pipeline, mget and mset only: their runs
     * follow one another on one server (mset into an empty keyspace: a fresh
     * server per run). */
    int versus;
    const char *versus_variant;
    const char *versus_pipeline;
    int versus_batch;
    int versus_first_b;
    /* Bit i: ksWorkloadOptions[i] was given on the command line (main.c); an
     * option given to variants that ignore it is then an error (ksWorkloadRun). */
    uint64_t given;
    /* Traced runs: how the setup is carried into the trace as a warm-up prefix
     * (compact | accesses | none; NULL reads as compact; emit.h) and compact's
     * bound on the lines kept (0 reads as KS_WARM_SETUP_LINES). */
    const char *warm_setup;
    uint64_t warm_setup_lines;
    /* Traced runs (kvsim-cref trace --then): nthen more configurations that differ from
     * this one only in their variants (variant, batch, chunk, pipeline), each traced from
     * this run's setup: after it, a child process per configuration (fork, one at a
     * time) calls then_begin(i, &then[i]) to open its own trace, then continues as
     * that configuration (its measured phase, its compact prefix); this process waits
     * for each and continues as itself. */
    int nthen;
    const struct ksWorkloadSpec *then;
    int (*then_begin)(int i, const struct ksWorkloadSpec *b);
} ksWorkloadSpec;

/* Default bound of the compact setup prefix: 2^23 lines (512 MiB of lines), above
 * every preset's last level and TLB reach (warmset.c). */
#define KS_WARM_SETUP_LINES (1ULL << 23)

typedef struct ksWorkloadResult {
    double runs_s[KS_MAX_REPEAT];     /* wall seconds per measured run */
    double cpu_runs_s[KS_MAX_REPEAT]; /* process CPU seconds per measured run */
    double sys_runs_s[KS_MAX_REPEAT]; /* of which in the kernel (getrusage ru_stime) */
    double minflt_runs[KS_MAX_REPEAT]; /* minor page faults per measured run (ru_minflt) */
    int nruns;
    double versus_runs_s[KS_MAX_REPEAT];     /* --versus: B's runs (the arrays above: A's) */
    double versus_cpu_runs_s[KS_MAX_REPEAT];
    double versus_sys_runs_s[KS_MAX_REPEAT];
    double versus_minflt_runs[KS_MAX_REPEAT];
    uint32_t versus_reply_crc32;             /* --versus: reply_crc32 with B's variants */
    uint64_t memory_bytes; /* arena allocated bytes after the measured phase */
    uint64_t keys;         /* DBSIZE after the measured phase */
    uint64_t ops;          /* operations per run (commands, keys loaded, keys iterated) */
    uint32_t reply_crc32;  /* pipeline/mget: CRC32 of the replies of a replay of the queries;
                            * mset: of GET of every key; iterate: of the KEYS reply /
                            * snapshot; load: snapshot bytes (workload.c replyCheck) */
    int reply_checked;     /* 0: reply_crc32 not computed (KVSIM_CREF_REPLY_CHECK=0) */
    uint64_t reply_bytes;  /* pipeline/mget/mset: reply bytes of the last run */
    uint64_t arena_base;
    uint64_t arena_allocated; /* every live arena byte incl. client/snapshot buffers */
} ksWorkloadResult;

/* --- Workloads and their options ---------------------------------------------
 * The one definition of the CLI workloads and of the options they take.
 * kvsim-cref's argument parser (main.c) reads these tables; `kvsim-cref
 * options --json` and ksWorkloadOptionsJson() (kvsim_cref.h) export them, and
 * the kvsim CLI (experiments/cli.py) builds its `trace` and `native` options
 * from that export.  Adding an option here adds it everywhere. */

/* The workloads' names, '|'-separated, in the table's order
 * ("load|iterate|pipeline|mset|mget|..."; workload.c, workload_ctx.h). */
const char *ksWorkloadNames(void);

typedef enum ksOptType {
    KS_OPT_UINT,   /* unsigned integer in min..max, into a 4- or 8-byte field */
    KS_OPT_FLOAT,  /* real number in fmin..fmax, into a double */
    KS_OPT_CHOICE, /* one of `choices` ("a|b"), into a const char * */
    KS_OPT_STRING, /* free text checked by the workload itself, into a const char * */
    KS_OPT_FLAG,   /* takes no value: sets an int to 1 */
} ksOptType;

typedef struct ksWorkloadOption {
    const char *name;              /* flag without the leading "--" */
    ksOptType type;
    size_t offset, size;           /* the ksWorkloadSpec field it sets */
    unsigned long long min, max;   /* KS_OPT_UINT */
    double fmin, fmax;             /* KS_OPT_FLOAT */
    const char *choices;           /* KS_OPT_CHOICE: "a|b|c" */
    const char *dflt;              /* default, as its command-line text; NULL: none (flag off,
                                      or chosen by the workload: --variant) */
    int every;                     /* 1: every workload takes it; 0: the workloads whose
                                      table row lists it (the others refuse it:
                                      ksWorkloadOptionApplies) */
    const char *help;              /* one line */
} ksWorkloadOption;

#define KS_NUM_WORKLOAD_OPTIONS 32
extern const ksWorkloadOption ksWorkloadOptions[KS_NUM_WORKLOAD_OPTIONS];

/* The variant family a workload selects with --variant; NULL for an unknown workload. */
const char *ksWorkloadFamily(const char *workload);

/* 1 if the option `name` was given on the command line (s->given). */
int ksWorkloadOptionGiven(const ksWorkloadSpec *s, const char *name);

/* The option named `name` (without "--"), or NULL. */
const ksWorkloadOption *ksWorkloadOptionFind(const char *name);

/* 1 if option o is used by `workload` (o->every, or the workload's row lists it), else 0. */
int ksWorkloadOptionApplies(const ksWorkloadOption *o, const char *workload);
/* The workloads that use option o, '|'-separated (a static buffer). */
const char *ksWorkloadOptionUsers(const ksWorkloadOption *o);

/* Parse `value` (NULL for a flag) as option o into spec.  0, or -1 with the
 * one-line message "--NAME: expected ..., got 'VALUE'" in err.  A string value
 * is kept by pointer: it must outlive spec. */
int ksWorkloadOptionSet(ksWorkloadSpec *spec, const ksWorkloadOption *o, const char *value, char *err,
                        size_t errlen);

/* A spec for `workload` with every option at its default (variant NULL: the
 * workload picks it), repeat 1. */
void ksWorkloadSpecInit(ksWorkloadSpec *spec, const char *workload);

/* The workloads and option table as one JSON object (keys sorted):
 *   {"options": [{"choices", "default", "help", "max", "min", "name", "type",
 *                 "workloads"}, ...], "workloads": [...]}
 * "type" is "int", "float", "choice", "string" or "flag"; "min"/"max" only for
 * numbers, "choices" only for a choice; "default" is typed (null: none, false
 * for a flag); "workloads" lists the workloads that use the option.  Writes at
 * most cap bytes including the NUL (snprintf semantics) and returns the full
 * length without the NUL. */
size_t ksWorkloadOptionsWriteJson(char *buf, size_t cap);

/* Run the workload: setup (not measured; paused when tracing), then the
 * measured phase `repeat` times.  0, or -1 with a one-line message in err. */
int ksWorkloadRun(const ksWorkloadSpec *spec, ksWorkloadResult *res, char *err, size_t errlen);

#endif
