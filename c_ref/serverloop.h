/*
 * serverloop.h -- the server's request code as a kernel (serverloop.c):
 * `kvsim-cref serverloop`, the native timing and the trace behind the rate of the
 * server's kind of work (`kvsim calibrate`, sim/calibrate_work.py).
 */
#ifndef KS_SERVERLOOP_H
#define KS_SERVERLOOP_H

#include <stddef.h>
#include <stdint.h>

#define KS_SERVERLOOP_MAX_ROUNDS 64
#define KS_SERVERLOOP_ARMS 2 /* 0 none: segments back to back; 1 loopback: a write and read between */

/* The request a segment repeats DEPTH times (serverloop.c). */
enum { KS_SERVERLOOP_PING, KS_SERVERLOOP_GET, KS_SERVERLOOP_MSET, KS_SERVERLOOP_COMMANDS };
extern const char *const ksServerLoopCommandNames[KS_SERVERLOOP_COMMANDS];

typedef struct ksServerLoopConfig {
    const char *options;  /* ksKeyspaceNew options */
    const char *pipeline; /* pipeline variant (as `serve --pipeline`) */
    const char *multikey; /* multi-key variant (as `serve --variant`) */
    int batch;            /* prefetch-batch-max-size: 0 off */
    int command;          /* KS_SERVERLOOP_PING (redis-benchmark's PING_MBULK), _GET, _MSET */
    int mset_keys;        /* MSET: keys per command (1..) */
    int depth;            /* requests per segment (one read's worth) */
    int keys;             /* GET, MSET: keys filled (1..) */
    uint32_t value_size;  /* GET, MSET: bytes per value (MSET: of the old and the new) */
    long iters;           /* timed segments per arm and round (the traced build: measured ones) */
    int rounds;           /* rounds of both arms (the traced build: 1, the `none` arm) */
} ksServerLoopConfig;

typedef struct ksServerLoopResult {
    int rounds;
    uint64_t requests;                                                /* per arm and round */
    double segment_ns[KS_SERVERLOOP_ARMS][KS_SERVERLOOP_MAX_ROUNDS]; /* median segment */
    double clock_ns[KS_SERVERLOOP_ARMS][KS_SERVERLOOP_MAX_ROUNDS];   /* median empty segment */
    /* the command's own time as call() measures it (INFO commandstats usec / calls over the
     * timed segments, CONFIG RESETSTAT before them; native only) */
    double usec_per_call[KS_SERVERLOOP_ARMS][KS_SERVERLOOP_MAX_ROUNDS];
} ksServerLoopResult;

/* Run the kernel: 0, or -1 with a one-line message in err. */
int ksServerLoopRun(const ksServerLoopConfig *cfg, ksServerLoopResult *res, char *err, size_t errlen);

#endif
