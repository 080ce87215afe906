/*
 * arena.h -- deterministic size-class allocator at a fixed virtual base.
 *
 * Every byte of keyspace data (tables, buckets, objects, keys, values, query
 * and reply buffers, snapshot buffers) comes from a ksArena, never from the
 * system malloc, so that the same workload and seed give the same addresses on
 * every run and machine.  See arena.c for the design essay.
 *
 * Terminology
 *   size class   one of the jemalloc-like rounded sizes (8, 16, 32, 48, ...,
 *                4 classes per doubling); a request is served from the
 *                smallest class that holds it.
 *   allocated    the sum of the size classes of live allocations: what
 *                jemalloc reports as "allocated" and Valkey as used_memory.
 *
 * This header is a stable contract (c_ref/dict.c uses it); add, never change.
 */
#ifndef KS_ARENA_H
#define KS_ARENA_H

#include <stddef.h>
#include <stdint.h>

/* Default base of the first arena in a process and the virtual span reserved
 * per arena.  A process may hold several arenas (the library's tests create
 * many keyspaces); arena i of a process lives at base + i * span, the first
 * free slot being taken.  Traced runs create exactly one arena, so their
 * addresses start at KS_ARENA_DEFAULT_BASE. */
#define KS_ARENA_DEFAULT_BASE 0x200000000000ULL /* 32 TiB, above ASan's shadow */
#define KS_ARENA_SPAN (64ULL << 30)             /* 64 GiB of address space */

typedef struct ksArena ksArena;

/* Create an arena at `base` (0 = KS_ARENA_DEFAULT_BASE), or at the next free
 * span-aligned slot above it.  Returns NULL if no slot could be mapped. */
ksArena *ksArenaCreate(uint64_t base);
/* Unmap everything.  NULL is a no-op.  With page retention on (below) the
 * span stays mapped for the next ksArenaCreate at the same base. */
void ksArenaDestroy(ksArena *a);
/* Page retention (off by default): ksArenaDestroy keeps one destroyed arena's
 * span mapped, its pages still faulted in, and the next ksArenaCreate at that
 * base reuses it (fresh allocator state, same addresses, stale contents), as
 * jemalloc keeps a freed heap's dirty pages for reuse.  Used to time a
 * snapshot reload without the kernel's page faults.  Turning it off unmaps a
 * retained span. */
void ksArenaSetRetain(int on);
/* Transparent huge pages (off by default, as Valkey's `disable-thp yes`):
 * arenas created from now on madvise(MADV_HUGEPAGE) their writable span, so
 * with THP in "madvise" mode the kernel backs them with 2 MiB pages.  An
 * experiment knob (KVSIM_CREF_THP=1) to see what 4 KiB page walks cost. */
void ksArenaSetHugePages(int on);
/* The libc mode (off by default): arenas created while it is on hand out the C
 * library's malloc blocks (a Valkey built with MALLOC=libc), keep counts only, and
 * leave freeing every block to their owner before ksArenaDestroy.  Base 0. */
void ksArenaSetLibc(int on);
/* 1 if the arena hands out the C library's blocks (created in libc mode). */
int ksArenaIsLibc(const ksArena *a);
/* Libc mode: the arena takes over `adopted` (a C library block allocated outside it, to be
 * freed by the arena's owner through ksArenaFree) and gives up `released` (one of its
 * blocks, now the caller's to free(3)); the counts follow the blocks.  Either may be NULL
 * (a block taken over with none given up). */
void ksArenaExchangeLibc(ksArena *a, const void *adopted, const void *released);

/* Allocate `size` bytes (size 0 is treated as 1).  Never returns NULL: aborts
 * with a message if the arena's span is exhausted.  Alignment: 8 for the 8-byte
 * class, 16 for classes below 64, the largest power of two dividing the class
 * size up to 4096 otherwise (so 64-byte buckets are cache-line aligned, as
 * with jemalloc).  Large classes (>= 16 KiB) are page aligned. */
void *ksArenaAlloc(ksArena *a, size_t size);
/* ksArenaAlloc plus zeroing. */
void *ksArenaCalloc(ksArena *a, size_t size);
/* Resize: same pointer if the size class does not change, else alloc+copy+free. */
void *ksArenaRealloc(ksArena *a, void *p, size_t size);
/* Free; NULL is a no-op.  Freed blocks are reused LIFO per size class, which
 * keeps addresses deterministic. */
void ksArenaFree(ksArena *a, void *p);

/* The size class (usable bytes) of a live allocation (cf. zmalloc_size). */
size_t ksArenaUsableSize(const ksArena *a, const void *p);
/* The size class a request of `size` bytes would get. */
size_t ksArenaSizeClass(size_t size);
/* Bytes in live allocations, counted by size class. */
uint64_t ksArenaAllocatedBytes(const ksArena *a);
/* Number of live allocations. */
uint64_t ksArenaLiveAllocations(const ksArena *a);
/* The virtual base of this arena. */
uint64_t ksArenaBase(const ksArena *a);
/* 1 if p points into this arena's span. */
int ksArenaOwns(const ksArena *a, const void *p);

/* Check internal accounting (free lists inside the span, counters consistent).
 * 0 if valid, else -1 with a message in err. */
int ksArenaCheck(const ksArena *a, char *err, size_t errlen);

#endif /* KS_ARENA_H */
