/*
 * workload_ctx.h -- what a workload's functions see: the run's context, the
 * helpers that build and run its queries, and the workload table's row.
 *
 * A workload is one row of the table in workload.c (ksWorkloadDef) and two
 * functions: setup (not measured: populate, build the query groups) and run
 * (the measured runs, then the reply check).  ksWorkloadRun calls both with
 * the emitter paused; run resumes it around what it measures.  The helpers
 * below cover the usual shape -- populate the keyspace, write RESP commands
 * into query groups, run the groups `repeat` times on each --versus side,
 * check the replies -- so most workloads are a loop that writes commands.
 * c_ref/README.md, "Adding a workload", walks through one.
 *
 * Conventions: public (cross-file) helpers ksWl...; the context is `wl`.
 */
#ifndef KS_WORKLOAD_CTX_H
#define KS_WORKLOAD_CTX_H

#include <stddef.h>
#include <stdint.h>

#include "keyspace.h"
#include "workload.h"

typedef struct ksWorkloadCtx {
    const ksWorkloadSpec *spec;
    ksKeyspace *ks;
    ksVariants var[2]; /* configuration A (the spec's) and, with --versus, B */
    int sides;         /* 1, or 2 with --versus */
    int repeat;        /* measured runs per side (>= 1) */
    uint8_t *valpool;  /* value_size + 64 bytes of pattern */
    uint64_t rng;      /* the workload's seeded stream (splitmix64) */
    /* growing byte buffer for queries (system memory: it plays the socket) */
    uint8_t *q;
    size_t qlen, qcap;
    size_t *group_off; /* query offsets of groups */
    size_t ngroups;    /* measured groups: [0, ngroups); warm-up: [ngroups, ngroups + nwarm) */
    size_t nwarm;
    int warmed; /* the warm-up operations ran (before the first measured run) */
    uint32_t crc;
    uint64_t reply_bytes;
    void *state; /* what a workload's setup hands to its run (the run frees it) */
    char *err;   /* a failing setup or run writes one line here */
    size_t errlen;
} wl;

/* A row of the workload table: the name (kvsim-cref WORKLOAD), the variant
 * family its --variant names (variants.c), the '|'-separated workload
 * options it uses beyond those every workload takes (ksWorkloadOptions), and
 * its two functions (0, or -1 with w->err). */
typedef struct ksWorkloadDef {
    const char *name;
    const char *family;
    const char *options;
    int (*setup)(wl *w);
    int (*run)(wl *w, ksWorkloadResult *res);
} ksWorkloadDef;

/* Add a workload at run time (a test's toy workload).  Strings are not
 * copied.  0, or -1 if the name is taken, the family unknown or the
 * KS_MAX_EXTRA_WORKLOADS slots are full. */
#define KS_MAX_EXTRA_WORKLOADS 4
int ksWorkloadRegister(const ksWorkloadDef *def);
/* The row of `name`, or NULL. */
const ksWorkloadDef *ksWorkloadFind(const char *name);

/* Workloads kept in files of their own (rows in workload.c's table). */
int ksHashWorkloadSetup(wl *w); /* workload_hash.c: the `hash` workload */
int ksZsetWorkloadSetup(wl *w); /* workload_zset.c: the `zscore` workload */

/* --- Helpers ----------------------------------------------------------------- */

uint64_t ksWlRand(uint64_t *state);                 /* splitmix64 */
double ksWlRandUnit(uint64_t *state);               /* uniform in [0, 1) */
void ksWlKeyName(const wl *w, uint64_t i, char *buf); /* i in decimal, --key-size bytes */
const uint8_t *ksWlValue(const wl *w, uint64_t i);  /* --value-size bytes of the pattern */
/* Setup: --keys keys with their values (--expire: a day ahead), then the idle
 * server's rehash cron. */
void ksWlPopulate(wl *w);
/* An idle server's rehash cron: every rehash the setup started finishes. */
void ksWlSetupIdle(wl *w);
/* Queries: a RESP array header of argc, then argc bulk arguments. */
void ksWlCmd(wl *w, int argc);
void ksWlArg(wl *w, const void *p, size_t n);
/* Query groups (one query buffer each): begin, mark the start of a group
 * (cap: an upper bound of the groups, for the offsets array), end. */
void ksWlGroupsBegin(wl *w);
void ksWlGroupMark(wl *w, size_t cap);
void ksWlGroupsEnd(wl *w);
/* The measured phase of a command workload: `repeat` rounds, each running the
 * measured groups once per side (the first round traced), then the reply
 * check of each side (ksWlCheckReplies).  Resumes and pauses the emitter. */
int ksWlRunGroups(wl *w, ksWorkloadResult *res);
/* The reply check: CRC32 of the replies of the measured groups replayed once
 * more per side, neither timed nor traced (KVSIM_CREF_REPLY_CHECK=0: none). */
void ksWlCheckReplies(wl *w, ksWorkloadResult *res);

#endif /* KS_WORKLOAD_CTX_H */
