/*
 * setupwarm.c -- a workload's setup carried into its trace as a warm-up prefix.
 *
 * Natively, a measured phase (KEYS, a snapshot load, a pipeline of GETs)
 * starts right after its setup, with the caches and TLBs holding what the
 * setup touched last: at 10^5 keys the whole keyspace sits in a large last
 * level.  A trace that skips the setup starts its measured phase cold, and its
 * prediction with it.  The workload runs its setup between ksEmitSetupBegin
 * and ksEmitSetupEnd (workload.c); recording is paused there as before, and
 * the setup's accesses at that pause depth (not those of a check nested in a
 * further pause) are carried into the trace between WARMUP_BEGIN and
 * WARMUP_END (traces/FORMAT.md: simulated, not counted), in one of two forms:
 *
 *   accesses  every access as it happens, with its gap and dependency: the
 *             literal setup, as long as the setup (10^8 records at 10^7 keys);
 *   compact   every line the setup left behind, once, in the order it last
 *             touched them, at most the last --warm-setup-lines of them
 *             (warmset.c): the same LRU contents in a bounded prefix.  A line
 *             the setup wrote is carried as a store (it is dirty natively), the
 *             others as loads; each keeps its last tag and site.
 *
 * Only accesses to c_ref's arenas are carried: the setup builds each key on
 * the stack (workload.c populate), whose address changes from run to run
 * (ASLR), so carrying it would break the traces' determinism; natively those
 * few stack lines are hot anyway.
 *
 * The traced server's setup (server.c, DEBUG SETUP-BEGIN .. DEBUG SETUP-END:
 * the keys a driver loads before its benchmark) is carried by
 * ksEmitSetupBeginServer: every address (the server's blocks come from the C
 * library's malloc, outside the arenas), in compact form, and without WARMUP
 * markers, since the driver cuts the trace's warm-up at the benchmark's first
 * command (traces/commands.py, measured_trace): the lines, then the literal
 * records up to that command, all warm-up.  It is what compacting the loaded
 * records afterwards gives (experiments/server_study.py, compact_warmup),
 * without writing and reading some 30 records per key.
 *
 * results/warm-setup-bound.json (experiments/warm_setup.py) measures what the
 * compact form changes against the accesses on every preset.  The hooks are
 * reached through the emitter's capture_fn/release_fn, so emit.c still builds
 * alone (traces/tests/test_c_emitter.py).
 *
 * Conventions: public ksEmitSetup...; static internals without prefix.
 */
#include <stdio.h>
#include <stdlib.h>

#include "arena.h"
#include "emit.h"
#include "warmset.h"

/* The address window of c_ref's arenas (arena.h: arena i at base + i * span). */
#define ARENA_WINDOW (64 * KS_ARENA_SPAN)

static int inArenas(uint64_t addr) { return addr - KS_ARENA_DEFAULT_BASE < ARENA_WINDOW; }

/* The setup being captured is the server's (ksEmitSetupBeginServer): any address, no
 * markers.  One emitter per process, one setup at a time. */
static int server_setup;

static uint64_t captureCompact(uint8_t kind, uint64_t addr, uint16_t size, uint8_t tag, uint16_t site,
                               uint64_t dep, uint32_t cost) {
    (void)dep;
    (void)cost;
    if (!server_setup && !inArenas(addr)) return 0;
    /* a software prefetch moves a line in natively too; it is kept as a load */
    ksWarmSetTouch(ksEmitterCurrent->warmset, addr, size, kind == KVT_STORE, tag, site);
    return 0;
}

static uint64_t captureAccesses(uint8_t kind, uint64_t addr, uint16_t size, uint8_t tag, uint16_t site,
                                uint64_t dep, uint32_t cost) {
    ksEmitter *e = ksEmitterCurrent;
    if (!inArenas(addr)) return 0;
    int paused = e->paused;
    e->paused = 0;
    ksLoadId id = ksEmitCost(kind, addr, size, tag, site, dep, cost);
    e->paused = paused;
    return id;
}

static void releaseWarmSet(void *s) { ksWarmSetFree(s); }

void ksEmitSetupBegin(int mode, uint64_t max_lines) {
    ksEmitter *e = ksEmitterCurrent;
    if (e == NULL) return;
    e->paused++;
    server_setup = 0;
    if (mode == KS_SETUP_NONE || e->capture) return;
    if (mode == KS_SETUP_COMPACT) {
        e->warmset = ksWarmSetNew(max_lines ? max_lines : 1);
        if (!e->warmset) {
            fprintf(stderr, "kvsim-cref: out of memory for the setup's warm-up lines\n");
            abort();
        }
        e->release_fn = releaseWarmSet;
        e->capture_fn = captureCompact;
    } else {
        ksEmitterMarker(e, KVT_MARK_WARMUP_BEGIN, 0);
        e->capture_fn = captureAccesses;
    }
    e->capture = mode;
    e->capture_depth = e->paused;
}

int ksEmitSetupBeginServer(uint64_t max_lines) {
    ksEmitter *e = ksEmitterCurrent;
    if (e == NULL || e->capture) return -1;
    ksEmitSetupBegin(KS_SETUP_COMPACT, max_lines);
    server_setup = 1;
    return 0;
}

static void emitWarmLine(void *ctx, const ksWarmLine *l) {
    (void)ctx;
    ksEmitCost(l->dirty ? KVT_STORE : KVT_LOAD, l->line, KS_LINE, l->tag, l->site, 0, 0);
}

void ksEmitSetupEnd(void) {
    ksEmitter *e = ksEmitterCurrent;
    if (e == NULL) return;
    int mode = e->capture, markers = !server_setup;
    server_setup = 0;
    e->capture = 0;
    e->capture_fn = NULL;
    if (mode != KS_SETUP_NONE) {
        int paused = e->paused;
        e->paused = 0;
        ksEmitClearPending(e); /* the setup's work is not the measured phase's */
        if (mode == KS_SETUP_COMPACT) {
            if (markers) ksEmitterMarker(e, KVT_MARK_WARMUP_BEGIN, 0);
            ksWarmSetVisit(e->warmset, emitWarmLine, NULL);
            ksWarmSetFree(e->warmset);
            e->warmset = NULL;
            e->release_fn = NULL;
        }
        if (markers) ksEmitterMarker(e, KVT_MARK_WARMUP_END, 0);
        e->paused = paused;
    }
    ksEmitResume();
}
