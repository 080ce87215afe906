/*
 * emit.h -- the trace emitter: one source, two builds.
 *
 * Core files are compiled twice from the same source:
 *
 *   build/native/  -DKS_TRACE=0   KS_LOAD/KS_STORE/KS_WORK compile to nothing,
 *                                 KS_PREFETCH is a real __builtin_prefetch.
 *   build/traced/  -DKS_TRACE=1   every macro appends a 24-byte kvtRecord to the
 *                                 current emitter (if one is active).
 *
 * Instrumenting code
 * ------------------
 *     ksLoadId t = KS_LOAD(&ht->tables[0], 8, KVT_TAG_TABLE_META, KS_SITE_HT_META, 0);
 *     bucket *b = ht->tables[0] + idx;
 *     ksLoadId lb = KS_LOAD(b, 64, KVT_TAG_BUCKET, KS_SITE_HT_FIND_BUCKET, t);
 *
 *   A load returns its id (0 in the native build or when no emitter is active).
 *   Pass the id of the load whose *value* produced an address as `dep`; the
 *   emitter converts it into the record distance of trace_format.h.  Use
 *   KS_ID_VAR(t) to declare such ids so the native build has no unused
 *   variables, and 0 when an address comes from no traced load.
 *
 *   Accesses wider than one cache line are split into one record per 64-byte
 *   line touched (all with the same dep); KS_LOAD returns the id of the first.
 *   KS_WORK(n) adds n work units (scaled by KS_WORK_SCALE_PCT) and
 *   KS_WORK_EXACT(n) n instructions to the next record's gap (KS_WORK_OF(kind, n),
 *   KS_WORK_EXACT_OF(kind, n): of that kind of work, enum kvtWork; the plain ones
 *   are generic, see ksEmitWorkMarkers); each
 *   record also adds the cost of its site (sites.h), except the second and later
 *   line pieces of a wide access, which add KS_LINE_CONTINUATION_COST.
 *   Gap model: KS_GAP_MODEL (the header's "gap_model").
 *
 * Conventions
 *   Public functions ksEmit... and ksEmitter...; macros KS_....  The emitter is a
 *   process-global singleton (ksEmitterCurrent): traced runs are single-threaded.
 *
 * This header is a stable contract (c_ref/dict.c uses it); add, never change.
 */
#ifndef KS_EMIT_H
#define KS_EMIT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "../traces/trace_format.h"
#include "sites.h"

#ifndef KS_TRACE
#define KS_TRACE 0
#endif

typedef uint64_t ksLoadId; /* 1-based record index; 0 = none */

#define KS_LINE 64u

/* --- Emitter state (traced build) ----------------------------------------- */
typedef struct ksEmitter {
    kvtRecord *buf;         /* chunk buffer, `cap` records */
    uint32_t n;             /* records buffered */
    uint32_t cap;           /* records per chunk */
    uint64_t next_id;       /* id of the next record (1-based) */
    uint64_t pending_gap;   /* KS_WORK instructions not yet attached */
    uint64_t total_records; /* records handed to the writer so far */
    uint64_t total_gap;     /* (unused; kept for layout) */
    uint64_t warm_gap;      /* (unused; kept for layout) */
    uint64_t warm_records;  /* (unused; kept for layout) */
    uint64_t mem_records;   /* (unused; kept for layout) */
    uint32_t n_chunks;
    int in_warmup;
    int paused; /* >0: records are dropped (setup that is skipped) */
    FILE *out;
    int io_error;
    kvtRecord *spare;       /* second chunk buffer (double buffering) */
    void *writer;           /* writer thread: CRC + fwrite of full chunks (emit.c) */
    uint64_t table_dep;     /* slot_table load the next table_meta load depends on (0 none) */
    uint64_t entry_dep;     /* load that produced the entry a table last handed out (0 none) */
    int capture;            /* KS_SETUP_*: how the setup being run is carried (0 none) */
    int capture_depth;      /* pause depth of the setup's own accesses (nested pauses: not) */
    void *warmset;          /* KS_SETUP_COMPACT: the setup's lines (warmset.h) */
    /* the setup's access while it is captured (setupwarm.c; NULL: not capturing) */
    uint64_t (*capture_fn)(uint8_t kind, uint64_t addr, uint16_t size, uint8_t tag, uint16_t site,
                           uint64_t dep, uint32_t cost);
    void (*release_fn)(void *warmset); /* frees warmset when the emitter closes */
    /* the pending work (pending_gap) by kind (enum kvtWork), and which kinds have some:
     * the next record's WORK markers (ksEmitWorkMarkers) */
    uint64_t pending_kind[KVT_NUM_WORK];
    uint32_t pending_kinds;
} ksEmitter;

extern ksEmitter *ksEmitterCurrent;
extern const uint16_t ksSiteCost[KS_NUM_SITES];
extern const char *const ksSiteName[KS_NUM_SITES];
/* The kind of work (enum kvtWork) of each site's cost (site_kinds.c; header "site_kinds"). */
extern const uint8_t ksSiteKind[KS_NUM_SITES];
extern const char *const ksWorkKindName[KVT_NUM_WORK];
/* Stores per instruction of each kind of work (emit.c; header "work_stores"). */
extern const char *const ksWorkStores[KVT_NUM_WORK];

/* Start writing a trace to `out`: writes the file header with the given JSON
 * object (must be the complete, sorted, whitespace-free header; see
 * ksEmitHeaderJson in emit.c for the helper that builds it) and makes the new
 * emitter current.  Returns NULL on I/O error. */
ksEmitter *ksEmitterOpen(FILE *out, const char *json, uint32_t chunk_records);
/* Flush the last chunk, write the end chunk, deactivate and free.  Returns 0,
 * or -1 if any write failed.  Does not close `out`. */
int ksEmitterClose(ksEmitter *e);
/* A forked child's emitter writes to `out` after header `json` from here on: 0, or -1
 * when records were written already (emit.c). */
int ksEmitterRetarget(ksEmitter *e, FILE *out, const char *json);
/* Write the buffered records as one chunk (no-op when empty). */
void ksEmitterFlush(ksEmitter *e);
/* Pause / resume recording (nestable).  Paused records are not emitted at all. */
void ksEmitPause(void);
void ksEmitResume(void);

/* --- The setup as a warm-up prefix ---------------------------------------------
 * A workload's setup runs between ksEmitSetupBegin and ksEmitSetupEnd (which
 * pause and resume recording one level).  Its accesses are carried into the
 * trace as a warm-up (WARMUP_BEGIN ... WARMUP_END: simulated, not counted):
 *   KS_SETUP_ACCESSES  every access, as it happens
 *   KS_SETUP_COMPACT   at ksEmitSetupEnd, every line the setup left behind,
 *                      once, least recently touched first (the last max_lines
 *                      distinct lines; warmset.c): a load, or a store for a
 *                      line the setup wrote, with its last tag and site
 *   KS_SETUP_NONE      nothing (the measured phase starts cold)
 * Accesses under a further pause inside the setup (checks) are not carried. */
enum { KS_SETUP_NONE = 0, KS_SETUP_COMPACT = 1, KS_SETUP_ACCESSES = 2 };
void ksEmitSetupBegin(int mode, uint64_t max_lines); /* setupwarm.c */
void ksEmitSetupEnd(void);
/* The traced server's setup (DEBUG SETUP-BEGIN): compact, every address (not only the
 * arenas'), no WARMUP markers (the driver's cut makes it warm-up); ended by
 * ksEmitSetupEnd.  0, or -1 when nothing is traced or a setup is being captured. */
int ksEmitSetupBeginServer(uint64_t max_lines);
/* Memory the setup writes outside instrumented code (calloc's zeroing, a buffer's
 * fill): carried into the setup's warm-up, never recorded anywhere else. */
static inline void ksEmitSetupStore(const void *p, size_t size, uint8_t tag);
/* A marker written even while recording is paused (setupwarm.c's WARMUP markers). */
void ksEmitterMarker(ksEmitter *e, uint16_t marker, uint64_t value);

/* CRC32 (zlib polynomial), slice-by-8.  crc = 0 to start. */
uint32_t ksCrc32(uint32_t crc, const void *buf, size_t len);

/* The gap model's name, the trace header's "gap_model": it names the counts above
 * (every site's cost in sites.h, KS_WORK_SCALE_PCT, KS_LINE_CONTINUATION_COST and
 * the counts charged with KS_WORK_EXACT: ksCrc64Cost, ksSiphashCost,
 * ksSiphashNocaseCost), and a change to any of them takes the next name, so a CPU
 * file whose [work] rates were fitted to these counts says which (sim/gap_model.py
 * mirrors it as KS_GAP_MODEL, with the history of the names).
 *   site-cost-v1  every count before the names were kept: SipHash charged 40 + 12 per
 *                 word, scaled (0.5-0.6 of its instructions); the CRC-64's count was
 *                 refitted to callgrind within it
 *   site-cost-v2  SipHash's exact count (ksSiphashCost, ksSiphashNocaseCost) */
#define KS_GAP_MODEL "site-cost-v2"

/* KS_WORK units are scaled by KS_WORK_SCALE_PCT / 100 (calibrated with the
 * site costs against callgrind, tests/calibrate.sh). */
#define KS_WORK_SCALE_PCT 106u

/* Gap of the second and later line pieces of one wide access: the copy or
 * scan loop's instructions per 64-byte line (not scaled). */
#define KS_LINE_CONTINUATION_COST 4u

/* Kinds of work.  A record's gap (pending work + its site's cost) is of its
 * site's kind (ksSiteKind) unless WORK markers before it say otherwise: for each
 * kind of pending work other than the site's, one marker (KVT_WORK_VALUE(kind, n))
 * names n of the gap's instructions as that kind (emit.c; FORMAT.md).  Markers
 * only annotate: the gap itself is unchanged. */
void ksEmitWorkMarkers(ksEmitter *e, uint16_t site);

/* Forget the pending work (work done while paused, a setup's). */
static inline void ksEmitClearPending(ksEmitter *e) {
    e->pending_gap = 0;
    if (e->pending_kinds) {
        memset(e->pending_kind, 0, sizeof e->pending_kind);
        e->pending_kinds = 0;
    }
}

/* --- Recording fast path --------------------------------------------------- */
static inline ksLoadId ksEmitCost(uint8_t kind, uint64_t addr, uint16_t size, uint8_t tag,
                                  uint16_t site, ksLoadId dep, uint32_t cost) {
    ksEmitter *e = ksEmitterCurrent;
    if (e == NULL) return 0;
    if (e->paused) return e->capture_fn && e->paused == e->capture_depth
                              ? e->capture_fn(kind, addr, size, tag, site, dep, cost) : 0;
    if (e->pending_kinds) ksEmitWorkMarkers(e, site);
    ksLoadId id = e->next_id++;
    kvtRecord *r = &e->buf[e->n];
    uint64_t gap = e->pending_gap + cost;
    e->pending_gap = 0;
    if (gap > UINT32_MAX) gap = UINT32_MAX;
    r->addr = addr;
    r->gap = (uint32_t)gap;
    r->dep = (dep != 0 && id - dep <= UINT32_MAX) ? (uint32_t)(id - dep) : 0;
    r->size = size;
    r->kind = kind;
    r->tag = tag;
    r->site = site;
    r->flags = 0;
    if (++e->n == e->cap) ksEmitterFlush(e);
    return id;
}

/* One record of at most one line; its gap is the pending work plus the
 * site's cost. */
static inline ksLoadId ksEmitOne(uint8_t kind, uint64_t addr, uint16_t size, uint8_t tag,
                                 uint16_t site, ksLoadId dep) {
    return ksEmitCost(kind, addr, size, tag, site, dep, ksSiteCost[site]);
}

/* An access of `size` bytes, split at cache-line boundaries.  Returns the id of
 * the first piece. */
static inline ksLoadId ksEmitAccess(uint8_t kind, const void *p, size_t size, uint8_t tag,
                                    uint16_t site, ksLoadId dep) {
    uint64_t a = (uint64_t)(uintptr_t)p;
    if (size == 0) size = 1;
    uint64_t end = a + size;
    uint64_t lend = (a | (KS_LINE - 1)) + 1;
    if (end <= lend) return ksEmitOne(kind, a, (uint16_t)size, tag, site, dep);
    ksLoadId first = ksEmitOne(kind, a, (uint16_t)(lend - a), tag, site, dep);
    while (lend < end) {
        uint64_t n = end - lend < KS_LINE ? end - lend : KS_LINE;
        ksEmitCost(kind, lend, (uint16_t)n, tag, site, dep, KS_LINE_CONTINUATION_COST);
        lend += KS_LINE;
    }
    return first;
}

/* A marker record (kind KVT_MARKER, flags = marker type, addr = value). */
void ksEmitMarker(uint16_t marker, uint64_t value);
/* A SYSCALL marker: addr = the bytes the call moved, site = the call's "sys.<call>" site. */
void ksEmitSyscall(uint16_t site, uint64_t bytes);


/* Work of kind `wk` (enum kvtWork) measured directly in instructions (not
 * scaled), e.g. the CRC loop. */
static inline void ksEmitWorkExactOf(uint8_t wk, uint64_t n) {
    ksEmitter *e = ksEmitterCurrent;
    if (e == NULL || n == 0) return;
    e->pending_gap += n;
    e->pending_kind[wk] += n;
    e->pending_kinds |= 1u << wk;
}

static inline void ksEmitWorkOf(uint8_t wk, uint64_t n) {
    ksEmitWorkExactOf(wk, n * KS_WORK_SCALE_PCT / 100u);
}

static inline void ksEmitWorkExact(uint64_t n) { ksEmitWorkExactOf(KVT_WORK_GENERIC, n); }
static inline void ksEmitWork(uint64_t n) { ksEmitWorkOf(KVT_WORK_GENERIC, n); }

/* The pointer chase slot_table -> table_meta (cluster per-slot tables): the
 * slot-table load that produced a table pointer is handed to the table's next
 * metadata load (taken once). */
static inline void ksEmitSetTableDep(uint64_t id) {
    if (ksEmitterCurrent) ksEmitterCurrent->table_dep = id;
}
/* A handed-over load id is taken once: read it and clear it. */
static inline uint64_t ksEmitTakeOnce(uint64_t *slot) {
    uint64_t id = *slot;
    *slot = 0;
    return id;
}
static inline uint64_t ksEmitTakeTableDep(void) {
    return ksEmitterCurrent ? ksEmitTakeOnce(&ksEmitterCurrent->table_dep) : 0;
}

/* The pointer chase table -> entry across the table-dispatch layer: a backend
 * that hands out an entry (find hit, iterator next, scan callback, incremental
 * find result) records the load whose value was the entry pointer (a bucket or
 * a dict cell/node load); the keyspace takes it (once) for its first read of
 * the entry, so object, key and value loads depend on it. */
static inline void ksEmitSetEntryDep(uint64_t id) {
    if (ksEmitterCurrent) ksEmitterCurrent->entry_dep = id;
}
static inline uint64_t ksEmitTakeEntryDep(void) {
    return ksEmitterCurrent ? ksEmitTakeOnce(&ksEmitterCurrent->entry_dep) : 0;
}

static inline void ksEmitSetupStore(const void *p, size_t size, uint8_t tag) {
    ksEmitter *e = ksEmitterCurrent;
    if (e && e->capture_fn && e->paused == e->capture_depth)
        (void)ksEmitAccess(KVT_STORE, p, size, tag, KS_SITE_NONE, 0);
}

/* --- The macros used by instrumented code ---------------------------------- */
#if KS_TRACE
#define KS_SET_TABLE_DEP(id) ksEmitSetTableDep(id)
#define KS_TAKE_TABLE_DEP() ((ksLoadId)ksEmitTakeTableDep())
#define KS_SET_ENTRY_DEP(id) ksEmitSetEntryDep(id)
#define KS_TAKE_ENTRY_DEP() ((ksLoadId)ksEmitTakeEntryDep())
#define KS_LOAD(p, size, tag, site, dep) ksEmitAccess(KVT_LOAD, (p), (size), (tag), (site), (dep))
#define KS_STORE(p, size, tag, site, dep)                                                   \
    ((void)ksEmitAccess(KVT_STORE, (p), (size), (tag), (site), (dep)))
#define KS_PREFETCH(p, tag, site, dep)                                                      \
    ((void)ksEmitOne(KVT_PREFETCH, (uint64_t)(uintptr_t)(p), 1, (tag), (site), (dep)))
#define KS_WORK(n) ksEmitWork((uint64_t)(n))
#define KS_WORK_EXACT(n) ksEmitWorkExact((uint64_t)(n))
#define KS_WORK_OF(kind, n) ksEmitWorkOf((kind), (uint64_t)(n))
#define KS_WORK_EXACT_OF(kind, n) ksEmitWorkExactOf((kind), (uint64_t)(n))
#define KS_MARK(marker, value) ksEmitMarker((marker), (uint64_t)(value))
#define KS_SYSCALL(site, bytes) ksEmitSyscall((site), (uint64_t)(bytes))
#define KS_SETUP_STORE(p, size, tag) ksEmitSetupStore((p), (size), (tag))
#define KS_ID_VAR(name) ksLoadId name
#define KS_ID(expr) (expr)
#else
#define KS_LOAD(p, size, tag, site, dep) ((void)(p), (void)(site), (void)(dep), (ksLoadId)0)
#define KS_SET_TABLE_DEP(id) ((void)(id))
#define KS_TAKE_TABLE_DEP() ((ksLoadId)0)
#define KS_SET_ENTRY_DEP(id) ((void)(id))
#define KS_TAKE_ENTRY_DEP() ((ksLoadId)0)
#define KS_STORE(p, size, tag, site, dep) ((void)(p), (void)(site), (void)(dep))
#define KS_PREFETCH(p, tag, site, dep) __builtin_prefetch((const void *)(p))
#define KS_WORK(n) ((void)0)
#define KS_WORK_EXACT(n) ((void)0)
#define KS_WORK_OF(kind, n) ((void)0)
#define KS_WORK_EXACT_OF(kind, n) ((void)0)
#define KS_MARK(marker, value) ((void)0)
#define KS_SYSCALL(site, bytes) ((void)0)
#define KS_SETUP_STORE(p, size, tag) ((void)(p), (void)(size))
#define KS_ID_VAR(name) ksLoadId name __attribute__((unused))
#define KS_ID(expr) ((ksLoadId)0)
#endif

/* Names for the header's "tags" and "markers" lists (index = enum value). */
extern const char *const ksTagName[KVT_NUM_TAGS];
extern const char *const ksMarkerName[KVT_NUM_MARKERS];

#endif /* KS_EMIT_H */
