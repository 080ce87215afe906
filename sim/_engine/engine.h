/*
 * engine.h -- public C API of the kvsim cache-hierarchy engine.
 *
 * The engine consumes kvtRecord arrays (traces/trace_format.h) in batches and
 * keeps every counter in one plain struct (kvsimStats) that the Python binding
 * (sim/_binding.py, ctypes) mirrors field by field.  No Python.h here or in any
 * engine file.  The model itself (what is counted, in which order state is
 * updated, how time advances) is specified in sim/MODEL.md; sim/reference.py
 * implements the same model in plain Python and the tests require both to
 * agree on every field of kvsimStats.
 *
 * Conventions: public functions and types take the prefix `kvsim`, macros
 * `KVSIM_`; internal names are static and unprefixed.  Times inside the
 * timing model are in *ticks*: one cycle = `width` ticks, so dispatching one
 * instruction costs exactly one tick and everything stays integer.
 *
 * Call protocol:
 *     kvsimSim *s = kvsimCreate(&cfg, err, sizeof err);   // NULL + message on error
 *     kvsimRun(s, recs, n);  ... repeated for every chunk ...
 *     kvsimFinish(s);                                      // end-of-run flush
 *     const kvsimStats *st = kvsimGetStats(s);
 *     kvsimFree(s);
 * No kvsimRun after kvsimFinish.  Memory use is fixed at kvsimCreate.
 */
#ifndef KVSIM_ENGINE_H
#define KVSIM_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "../../traces/trace_format.h"

#define KVSIM_MAX_LEVELS 8
#define KVSIM_MAX_PREFETCHERS 8
#define KVSIM_NTAGS 256
#define KVSIM_MAX_PHASES 64
#define KVSIM_NMARKERS 8
#define KVSIM_DEP_WINDOW 1024 /* dep distances beyond this are treated as satisfied */
#define KVSIM_NAME_LEN 16
/* Kinds of non-memory work (the trace's enum kvtWork, named by its header's
 * "work_kinds") and the sites whose kind the config carries (kvsimConfig). */
#define KVSIM_MAX_WORK_KINDS 16
#define KVSIM_MAX_SITES 1024
/* Ways limit of a policy that needs a power-of-two way count (tree-PLRU: its
 * ways - 1 tree bits live in one uint64_t set word). */
#define KVSIM_POW2_POLICY_MAX_WAYS 64

/* Page-table reads of a walk (kvsimConfig.walk_reads): read j of the walk for
 * page p reads the line of KVSIM_WALK_BASE + j * KVSIM_WALK_STRIDE + 8 p (the
 * upper half of the address space, which no user-space trace touches). */
#define KVSIM_MAX_WALK_READS 4
#define KVSIM_WALK_BASE 0xFFFF800000000000ULL
#define KVSIM_WALK_STRIDE (1ULL << 44)
/* The walk's retention table (kvsimConfig.walk_retention): slots of the
 * page-table lines' last read, direct-mapped by a multiplicative hash. */
#define KVSIM_WALK_SLOT_BITS 20

/* Page walks in flight at once (kvsimConfig.walkers): at most this many. */
#define KVSIM_MAX_WALKERS 64
/* Scheduler entries (kvsimConfig.scheduler): at most this many. */
#define KVSIM_MAX_SCHEDULER 4096
/* Store-buffer entries (kvsimConfig.store_buffer): at most this many. */
#define KVSIM_MAX_STORE_BUFFER 1024

/* Access kinds as counted per level (the "kind" axis of the tag x kind stats):
 * X(id, name) gives KVSIM_K_<id> = its position and the name the statistics use
 * (kvsimAccessKindName, read by sim/_binding.py). */
#define KVSIM_KINDS(X)                                                              \
    X(LOAD, "load")           /* demand load piece (or its fetch from an upper level) */ \
    X(STORE, "store")         /* demand store piece (or its fetch) */                 \
    X(SWPF, "swpf")           /* software prefetch from the trace */                  \
    X(HWPF, "hwpf")           /* hardware prefetch */                                 \
    X(WRITEBACK, "writeback") /* dirty line written back from the level above */      \
    X(VICTIM, "victim")       /* clean victim inserted into an exclusive level */

enum kvsimKind {
#define KVSIM_KIND_ENUM(id, name) KVSIM_K_##id,
    KVSIM_KINDS(KVSIM_KIND_ENUM)
#undef KVSIM_KIND_ENUM
    KVSIM_NKINDS
};

/* Inclusion of a level, with its configuration name (kvsimInclusionName). */
#define KVSIM_INCLUSIONS(X)                                                      \
    X(NON_INCLUSIVE, "non-inclusive")                                            \
    X(INCLUSIVE, "inclusive") /* evictions back-invalidate every level above */  \
    X(EXCLUSIVE, "exclusive") /* victim cache of the level above (last level only) */

enum kvsimInclusion {
#define KVSIM_INCLUSION_ENUM(id, name) KVSIM_##id,
    KVSIM_INCLUSIONS(KVSIM_INCLUSION_ENUM)
#undef KVSIM_INCLUSION_ENUM
    KVSIM_NINCLUSIONS
};

typedef struct kvsimLevelConfig {
    uint32_t sets;      /* power of two */
    uint32_t ways;      /* >= 1 */
    uint32_t latency;   /* load-to-use cycles when served here */
    uint32_t inclusion; /* enum kvsimInclusion */
    uint32_t mshrs;     /* miss buffers at this level; 0 = unlimited and untracked */
    uint32_t pad;
    uint64_t seed;      /* for the random policy */
    char policy[KVSIM_NAME_LEN];
} kvsimLevelConfig;

typedef struct kvsimPrefetcherConfig {
    uint32_t level;  /* level index the prefetcher watches and fills */
    uint32_t degree; /* lines issued per trigger */
    uint32_t table;  /* table entries (ip_stride, stream, up_down, region) */
    uint32_t flags;  /* KVSIM_PF_ARRIVAL | _STORES | _HITS, below L1 only (engine.c) */
    char kind[KVSIM_NAME_LEN]; /* a prefetch_factory.c name: "next_line", ... */
} kvsimPrefetcherConfig;
/* kvsimPrefetcherConfig.flags: its candidates issue at the tick the request that trained
 * it reached its level (the request's miss start below L1), not at the request's issue */
#define KVSIM_PF_ARRIVAL 1u
/* a store piece (its read-for-ownership) that reaches its level trains it as a load's */
#define KVSIM_PF_STORES 2u
/* a request that hits its level trains it as a miss would (a kind that trains on misses
 * only then trains on every request reaching its level) */
#define KVSIM_PF_HITS 4u

typedef struct kvsimConfig {
    uint32_t nlevels;
    uint32_t line_bits; /* log2 line size, same for every level */
    kvsimLevelConfig level[KVSIM_MAX_LEVELS];
    uint32_t nprefetchers;
    uint32_t swpf_trains; /* 1: a software prefetch that misses its fill level trains the
                             hardware prefetchers of the levels below it (engine.c) */
    kvsimPrefetcherConfig prefetcher[KVSIM_MAX_PREFETCHERS];
    /* timing (ignored unless timing != 0) */
    uint32_t timing;
    uint32_t width;           /* ticks per cycle: the dispatch = retire width in
                                 instructions per cycle when instr_ticks <= 1 */
    uint32_t rob;             /* ROB entries (instructions) */
    uint32_t dram_latency;    /* cycles, load-to-use from DRAM */
    uint32_t dram_xfer_ticks; /* ticks the DRAM channel is busy per line fill; 0 = no limit */
    /* TLB (tlb != 0 enables it) */
    uint32_t tlb;
    uint32_t page_bits;       /* 12 or 21 */
    uint32_t dtlb_sets, dtlb_ways;
    uint32_t stlb_sets, stlb_ways; /* stlb_sets == 0: no STLB */
    uint32_t stlb_latency;    /* cycles added on a DTLB miss that hits the STLB */
    uint32_t walk_latency;    /* cycles added on an STLB miss (the walk's fixed part) */
    /* software prefetch */
    uint32_t swpf_level;           /* level a software prefetch fills (0 = L1) */
    uint32_t swpf_drop_on_tlb_miss; /* 1: dropped on a DTLB miss; 0: walks */
    uint32_t flush_at_end;         /* write every dirty line back at kvsimFinish */
    uint32_t queue_cap;            /* test hook: the common configuration's request queues
                                      (engine.c, QCAP), the records per block of the
                                      TLB thread (tlb.c; 4 blocks per slice) and the
                                      requests per buffer of the last level's thread
                                      (lower.c); 0 = the default, else 2..QCAP */
    uint32_t threads;              /* threads of the common configuration (levels.c): 0 or 1
                                      = the calling thread only, up to 8.  Off the common
                                      configuration, > 1: without timing, a last of three
                                      levels that is not inclusive on a thread of its own
                                      (lower.c); with a TLB, a TLB thread beside the
                                      calling one for the slices whose translations are
                                      costly (tlb.c).  Any number gives the same
                                      results */
    uint32_t walk_reads;           /* page-table lines a walk reads through the caches (0:
                                      the walk is walk_latency alone), at most
                                      KVSIM_MAX_WALK_READS; see walkCost() in engine.c */
    uint32_t instr_ticks;          /* ticks one instruction takes to dispatch and to retire
                                      (0 = 1): `width` ticks make a cycle, so the core
                                      sustains width / instr_ticks instructions per cycle */
    uint32_t walkers;              /* page walks in flight at once (timing): a walk holds
                                      a walker from its start to its end, and one that
                                      finds none free waits for the earliest to free;
                                      0 = unlimited, at most KVSIM_MAX_WALKERS; see
                                      walkTime() in timing.h */
    /* System calls (timing): a SYSCALL marker (trace_format.h) whose site is
     * syscall_site[c] (c: enum kvtSyscall; KVSIM_NO_SITE: the trace names no such
     * call) starts once every earlier record has retired and takes
     * syscall_call_ticks[c] + round(bytes * syscall_byte_q16[c] / 2^16) ticks;
     * a SYSCALL marker at any other site costs nothing.  See engDoMarker. */
    uint32_t syscall_site[KVT_NUM_SYSCALLS];
    uint32_t syscall_call_ticks[KVT_NUM_SYSCALLS];
    uint32_t syscall_byte_q16[KVT_NUM_SYSCALLS]; /* ticks per byte, in 1/65536 */
    uint32_t guest_page_bits;      /* nested paging with a host page smaller than the
                                      guest's (0 = none, today's model): the guest maps
                                      pages of 2^guest_page_bits, its host backs them with
                                      pages of 2^page_bits.  The TLBs then hold the
                                      combined translation, of the smaller page
                                      (page_bits), and a walk's read 0, the guest's leaf
                                      entry, indexes by the guest's page while its other
                                      reads, the host's, index by page_bits; see walkCost()
                                      in engine.c */
    /* Kinds of work (timing): an instruction of kind k takes kind_ticks[k] ticks (0 =
     * instr_ticks).  A record's gap is of its site's kind (site_kind[site]; sites past
     * KVSIM_MAX_SITES: kind 0) except the instructions that WORK markers before it
     * name as another kind (engDoMarker, recordTicks in timing.h).  per_kind = 0: every
     * instruction takes instr_ticks and WORK markers are counted only. */
    uint32_t per_kind;
    uint32_t kind_ticks[KVSIM_MAX_WORK_KINDS];
    uint8_t site_kind[KVSIM_MAX_SITES];
    /* The scheduler (timing): a record whose issue waits for its producer (dep) holds
     * min(gap + 1, scheduler) entries from its dispatch until it issues (the address
     * computation that waits with it); a record is dispatched only when its own entries
     * fit beside those held, else it waits for the earliest holder to issue.  0 = no
     * limit, at most KVSIM_MAX_SCHEDULER; see schedAdmit() in timing.h. */
    uint32_t scheduler;
    /* The store buffer (timing): a store holds an entry from its dispatch until it
     * commits; stores commit in program order, each at the latest of its retirement,
     * the previous store's commit and the arrival of its lines (a store's pieces are
     * timed as a load's from its issue, the read-for-ownership, holding miss buffers);
     * a store dispatches only when an entry is free.  0 = not modelled (a store
     * completes a cycle after dispatch and its lines take no time), at most
     * KVSIM_MAX_STORE_BUFFER; see storeAdmit() and storeCommit() in timing.h. */
    uint32_t store_buffer;
    /* Page-table lines by time (timing; sim/MODEL.md §3): with walk_retention > 0
     * (cycles), a walk's page-table read of a line that a walk read at most that long
     * before is served by the level that holds it, or by the last level when the
     * modelled caches do not (a guest's share of a shared last level is what it keeps
     * in time); one read longer ago is a read from memory whatever the caches hold
     * (lost meanwhile to other cores and processes); a line no walk has read yet costs
     * the level that served it.  host_read_latency: cycles of a read from memory of the
     * host's entries (reads 1.. under nested paging; 0 = the DRAM latency).  See
     * walkCost() in engine.c. */
    uint32_t host_read_latency;
    uint64_t walk_retention;
    /* Physical page placement (placement.h): place_bits = 0, the trace's address
     * indexes the caches; else every line the caches see sits in the frame that
     * kvsimPlaceFrame(seed = place_seed) gives its page of 2^place_bits bytes
     * (12..30), while the TLBs translate the virtual page. */
    uint32_t place_bits;
    uint64_t place_seed;
    /* A walk of a 4 KiB page (the guest's page: 2^guest_page_bits, else 2^page_bits,
     * is 4 KiB) adds walk_extra_4k cycles to walk_latency: the level its table has
     * beyond a 2 MiB page's (under nested paging also the host's translation of that
     * table's page), whose steps the walker's caches do not skip.  0 = none (every
     * walk's fixed part is walk_latency).  See walkCost() in engine.c. */
    uint32_t walk_extra_4k;
    /* Whole-line stores (sim/MODEL.md §2): 0 (the default) = a store piece covering its
     * whole line allocates it without a fetch (OP_WFULL, as DineroIV); 1 = it fetches
     * the line as a partial store does (OP_WRITE: an x86 core's read for ownership).
     * See pieceOp() and opOf() in engine_impl.h. */
    uint32_t full_line_store_fetch;
    /* The work's stores (timing, with store_buffer; sim/MODEL.md §6): the untraced
     * instructions of a record's gap of kind k make kind_store_q16[k] / 65536 stores
     * each (a trace header's "work_stores"); with a store buffer they take entries,
     * commit in order behind the traced stores, and hold dispatch when none is free.
     * All 0 = none (every trace without the key).  See recordTicks(), storeAdmit() and
     * workCommit() in timing.h. */
    uint32_t kind_store_q16[KVSIM_MAX_WORK_KINDS];
    /* Page-table lines the last level does not keep (timing; sim/MODEL.md §3): 1 = a
     * walk's page-table read timed at the last level (served by it, or kept there by
     * walk_retention) is timed as a read from memory instead (the host's for reads 1..);
     * the private levels above keep the lines by their capacity.  With walk_retention
     * too, the last level keeps a line in time alone (a walk read it at most
     * walk_retention before: timed at the last level, else memory) and the private
     * levels serve what they hold whatever its age.  0 (the default) = the last level
     * serves them as it holds them.  KVSIM_WALK_LL_GUEST: only the host's reads (1..,
     * nested paging) are lost so; the guest's read 0 is timed as with 0.  See walkCost()
     * in engine.c. */
    uint32_t walk_last_level_lost;
} kvsimConfig;

/* walk_last_level_lost's values: the last level keeps every page-table line (0),
 * none (1), or the guest's (read 0) but not the host's (2). */
enum { KVSIM_WALK_LL_ALL = 0, KVSIM_WALK_LL_NONE = 1, KVSIM_WALK_LL_GUEST = 2 };

#define KVSIM_NO_SITE 0xFFFFFFFFu

/* Counters of one cache level.  Index [tag][kind] is tag * KVSIM_NKINDS + kind. */
typedef struct kvsimLevelStats {
    uint64_t access[KVSIM_NTAGS * KVSIM_NKINDS];
    uint64_t hit[KVSIM_NTAGS * KVSIM_NKINDS];
    uint64_t miss[KVSIM_NTAGS * KVSIM_NKINDS];
    uint64_t fetches;            /* lines requested from the level below */
    uint64_t writebacks;         /* dirty lines sent below (evictions + final flush) */
    uint64_t writebacks_flush;   /* of which by the final flush */
    uint64_t evictions;          /* valid lines replaced */
    uint64_t back_invalidations; /* lines removed from upper levels by inclusion */
    uint64_t pf_issued[2];       /* [0] software, [1] hardware: fills at this level */
    uint64_t pf_redundant[2];    /* prefetch found the line already here */
    uint64_t pf_useful[2];       /* first demand hit after the fill had completed */
    uint64_t pf_late[2];         /* first demand hit while the fill was in flight */
    uint64_t pf_useless[2];      /* evicted before any demand hit */
    uint64_t pf_unused_end[2];   /* still unused at the end of the run */
    uint64_t pf_dropped[2];      /* no free miss buffer */
} kvsimLevelStats;

typedef struct kvsimPhaseStats {
    uint64_t records;
    uint64_t instructions;
    uint64_t ticks;
    uint64_t access[KVSIM_MAX_LEVELS];
    uint64_t miss[KVSIM_MAX_LEVELS];
} kvsimPhaseStats;

typedef struct kvsimStats {
    uint64_t records;        /* counted (non-warm-up) records, markers included */
    uint64_t warmup_records; /* records inside warm-up */
    uint64_t instructions;   /* sum of gaps + memory records */
    uint64_t kind[KVT_NUM_KINDS]; /* records by trace kind (enum kvtKind) */
    uint64_t pieces;         /* line-sized pieces of loads and stores */
    uint64_t multiline;      /* loads/stores spanning more than one line */
    uint64_t markers[KVSIM_NMARKERS];
    uint64_t dram_reads, dram_writes;
    uint64_t dtlb_access, dtlb_miss, stlb_access, stlb_miss;
    uint64_t swpf_dropped_tlb;
    /* timing */
    uint64_t ticks;          /* counted time; cycles = ceil(ticks / width) */
    uint64_t stall_rob[KVSIM_MAX_LEVELS + 2]; /* dispatch stalls (ticks) by the cause of the
                                                  blocking op's retire time: the service level
                                                  of the load whose completion set it ([nlevels]
                                                  = DRAM); [nlevels+1] = core (not a load) */
    uint64_t wait_dep;       /* ticks loads waited for their producer */
    uint64_t wait_mshr;      /* ticks misses waited for a free miss buffer */
    uint64_t wait_tlb;       /* ticks added by STLB hits and walks */
    uint64_t wait_walker;    /* ticks walks waited for a free walker (cfg.walkers) */
    uint64_t wait_dram_bw;   /* ticks fills waited for the DRAM channel */
    uint64_t wait_inflight;  /* ticks demand accesses waited for a line in flight */
    uint64_t wait_scheduler; /* dispatch ticks lost to a full scheduler (cfg.scheduler) */
    uint64_t wait_store_buffer; /* dispatch ticks stores lost to a full store buffer
                                   (cfg.store_buffer) */
    uint64_t store_commit_lag;  /* sum over stores of commit - retire (cfg.store_buffer) */
    uint64_t work_stores;       /* the work's stores that took store-buffer entries
                                   (cfg.kind_store_q16, cfg.store_buffer) */
    uint64_t miss_ticks;     /* sum over L1 misses (loads, prefetches) of their duration */
    uint64_t l1_misses_timed;
    uint64_t load_latency;   /* sum over loads of completion - issue (ticks) */
    uint64_t loads_timed;
    uint64_t nphases_seen;
    /* walks' page-table reads (timing): by the level that served them (caches, [nlevels] =
     * DRAM) and by the latency they were timed at ([nlevels] = the DRAM latency,
     * [nlevels + 1] = cfg.host_read_latency); the two differ only with
     * cfg.walk_retention or cfg.host_read_latency */
    uint64_t walk_served[KVSIM_MAX_LEVELS + 1];
    uint64_t walk_timed[KVSIM_MAX_LEVELS + 2];
    /* commands: from one COMMAND marker to the next (or the end of the trace),
     * counted when the command starts outside warm-up.  Histograms are log2
     * buckets: bucket b holds values v with floor(log2(v + 1)) == b. */
    uint64_t commands;
    uint64_t command_ticks;        /* sum of retire-time spans (timing only) */
    uint64_t command_ticks_max;
    uint64_t command_l1_misses;    /* sum of L1 misses (all kinds) inside commands */
    uint64_t command_ticks_hist[64];
    uint64_t command_l1_miss_hist[64];
    /* system calls (SYSCALL markers) counted, by call (enum kvtSyscall; the last
     * slot: a SYSCALL marker at a site naming no call), their bytes and their ticks */
    uint64_t syscalls[KVT_NUM_SYSCALLS + 1];
    uint64_t syscall_bytes[KVT_NUM_SYSCALLS + 1];
    uint64_t syscall_ticks;
    kvsimLevelStats level[KVSIM_MAX_LEVELS];
    kvsimPhaseStats phase[KVSIM_MAX_PHASES];
} kvsimStats;

typedef struct kvsimSim kvsimSim;

/* Create a simulator.  Returns NULL and writes a one-line reason to err on an
 * invalid configuration (the Python side validates first; this is a backstop). */
kvsimSim *kvsimCreate(const kvsimConfig *cfg, char *err, size_t errlen);

/* Simulate n records in program order.  May be called any number of times. */
void kvsimRun(kvsimSim *s, const kvtRecord *recs, size_t n);

/* End of run: final flush (if configured) and end-of-run prefetch accounting. */
void kvsimFinish(kvsimSim *s);

const kvsimStats *kvsimGetStats(const kvsimSim *s);

/* Test hook: write the line numbers held by (level, set), one per way (line + 1;
 * 0 = invalid way), to out[0 .. ways-1].  Returns ways, or 0 for a bad level/set. */
uint32_t kvsimPeekSet(const kvsimSim *s, uint32_t level, uint64_t set, uint64_t *out);
/* Threads the engine runs on: cfg.threads where the common configuration can
 * share its work (at most one per set of the smallest level); else 1, plus 1 once
 * the TLB thread has taken a slice of records (tlb.c engTlbRun) and 1 once the
 * last level's thread has taken requests (lower.c). */
uint32_t kvsimThreads(const kvsimSim *s);
/* The physical line of a virtual one under placement (placement.h), for tests. */
uint64_t kvsimPlacedLine(uint64_t line, uint32_t line_bits, uint32_t place_bits,
                         uint64_t place_seed);
size_t kvsimStatsSize(void);
size_t kvsimConfigSize(void);
void kvsimFree(kvsimSim *s);

/* --- Registries --------------------------------------------------------------
 * The names the engine accepts, read by sim/_binding.py so that nothing in
 * Python repeats them (policy_factory.c, prefetch_factory.c hold the tables).
 * Index i runs over 0 .. count-1; past the end a name is NULL and a property 0.
 *
 *   kvsimPolicyName(i)      replacement policy name ("lru", ...); index 0 is the
 *                           default, used for an empty kvsimLevelConfig.policy
 *   kvsimPolicyPow2Ways(i)  1 if the policy needs a power-of-two way count
 *   kvsimPolicyMaxWays(i)   largest way count it supports; 0 = no limit
 *   kvsimPrefetcherName(i)  hardware prefetcher kind ("next_line", ...)
 *   kvsimAccessKindName(i)  name of access kind i (enum kvsimKind: "load", ...)
 *   kvsimInclusionName(i)   name of inclusion value i (enum kvsimInclusion)
 */
uint32_t kvsimPolicyCount(void);
const char *kvsimPolicyName(uint32_t i);
int kvsimPolicyPow2Ways(uint32_t i);
uint32_t kvsimPolicyMaxWays(uint32_t i);
uint32_t kvsimPrefetcherCount(void);
const char *kvsimPrefetcherName(uint32_t i);
uint32_t kvsimAccessKindCount(void);
const char *kvsimAccessKindName(uint32_t i);
uint32_t kvsimInclusionCount(void);
const char *kvsimInclusionName(uint32_t i);

/* --- Timeline -------------------------------------------------------------------
 * The times of each record of a window, for plots of one batch:
 *
 *     kvsimTimelineRow rows[count];           // zeroed by the caller
 *     kvsimSetTimeline(s, first, count, rows);  // before the first kvsimRun
 *
 * Records first .. first+count-1 (indices in the whole trace, markers and warm-up
 * included) that are loads, stores or software prefetches get their row; the
 * others keep theirs.  Times are ticks (cycles = ticks / width):
 *   dispatch  D, when the record enters the window (after any ROB stall)
 *   issue     X, D or later when its dep producer completes (before TLB costs)
 *   complete  a load: its data's arrival (all pieces); a prefetch: its fill's
 *             (when it found the line or was dropped: its issue, and at least
 *             dispatch + 1 cycle); a store: dispatch + 1 cycle
 *   retire    in-order retirement
 * level is the serving level (0 = L1 ... nlevels-1, nlevels = DRAM; the deepest
 * of the pieces), or KVSIM_TIMELINE_DROPPED for a dropped prefetch.
 * A timeline needs a timing configuration and makes every record take the
 * record-by-record path (the same results, one thread).  Returns 0, or -1 when
 * the configuration is not timing or records have already run. */
#define KVSIM_TIMELINE_DROPPED 0xFFFFu
#define KVSIM_TIMELINE_CAPTURED 1u /* kvsimTimelineRow.flags: the row was written */
typedef struct kvsimTimelineRow {
    uint64_t dispatch, issue, complete, retire;
    uint32_t level;
    uint32_t flags;
} kvsimTimelineRow;
int kvsimSetTimeline(kvsimSim *s, uint64_t first, uint64_t count, kvsimTimelineRow *rows);

/* --- Reuse distances (reuse.c) -------------------------------------------------
 * LRU stack distances of a stream of line accesses, fed in chunks:
 *
 *     kvsimReuse *r = kvsimReuseCreate();                 // NULL: out of memory
 *     kvsimReuseAdd(r, lines, cls, n, dist, hist, cold);  ... for every chunk ...
 *     kvsimReuseFree(r);
 *
 * kvsimReuseAdd: lines[0 .. n-1] are line ids in access order; cls (optional,
 * NULL = class 0 for all) a class per access (a structure tag).  Optional
 * outputs, each added to (never cleared): dist[i] the distance of access i (-1
 * for a first touch), hist[cls * KVSIM_REUSE_BUCKETS + b] the count of bucket b
 * (b = 0: distance 0; b >= 1: 2^(b-1) <= d < 2^b), cold[cls] the first touches.
 * hist and cold need 256 classes' room when cls is given, one class's when not.
 * Returns 0, or -1 when out of memory (the state then holds a prefix of the
 * chunk).  Memory: O(distinct lines), whatever the number of accesses. */
#define KVSIM_REUSE_BUCKETS 65
typedef struct kvsimReuse kvsimReuse;
kvsimReuse *kvsimReuseCreate(void);
int kvsimReuseAdd(kvsimReuse *r, const uint64_t *lines, const uint8_t *cls, size_t n,
                  int64_t *dist, uint64_t *hist, uint64_t *cold);
uint64_t kvsimReuseDistinct(const kvsimReuse *r); /* distinct lines seen */
void kvsimReuseFree(kvsimReuse *r);

#endif /* KVSIM_ENGINE_H */
