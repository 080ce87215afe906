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
    const char *workload; /* load | iterate | pipeline | mset | mget */
    uint64_t keys;
    uint64_t ops;
    uint32_t value_size;
    uint32_t key_size;
    const char *variant; /* name within the workload's family */
    int batch;
    int depth;
    double set_ratio;
    int keys_per_command;
    const char *op;      /* iterate: keys | save */
    const char *layout;  /* unified | legacy */
    const char *table;   /* hashtable | dict */
    int cluster;
    uint64_t seed;
    int repeat;
} ksWorkloadSpec;

typedef struct ksWorkloadResult {
    double runs_s[KS_MAX_REPEAT];     /* wall seconds per measured run */
    double cpu_runs_s[KS_MAX_REPEAT]; /* process CPU seconds per measured run */
    int nruns;
    uint64_t memory_bytes; /* arena allocated bytes after the measured phase */
    uint64_t keys;         /* DBSIZE after the measured phase */
    uint64_t ops;          /* operations per run (commands, keys loaded, keys iterated) */
    uint32_t reply_crc32;  /* pipeline/mget: CRC32 of the replies of a replay of the queries;
                            * mset: of GET of every key; iterate: of the KEYS reply /
                            * snapshot; load: snapshot bytes (workload.c replyCheck) */
    uint64_t reply_bytes;  /* pipeline/mget/mset: reply bytes of the last run */
    uint64_t arena_base;
    uint64_t arena_allocated; /* every live arena byte incl. client/snapshot buffers */
} ksWorkloadResult;

/* The variant family a workload selects with --variant. */
const char *ksWorkloadFamily(const char *workload);

/* Run the workload: setup (not measured; paused when tracing), then the
 * measured phase `repeat` times.  0, or -1 with a one-line message in err. */
int ksWorkloadRun(const ksWorkloadSpec *spec, ksWorkloadResult *res, char *err, size_t errlen);

#endif
