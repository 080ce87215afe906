/*
 * libc_alloc.h -- the C library's malloc, free and malloc_usable_size, with the memory
 * accesses they make recorded in the traced build.
 *
 * Why: c_ref's server allocates from glibc (arena.c's libc mode and callpath.c's zmalloc,
 * as Valkey built with MALLOC=libc), and glibc keeps its bookkeeping inside the blocks.
 * A block that the keyspace never reads again is still read and written by the allocator
 * when it is freed and reused: MSET over existing keys frees each old value (its chunk
 * header, its first line, the next chunk's header) and allocates the new one.  Without
 * these records the trace of a server misses lines the native server touches.
 *
 * glibc 2.36 malloc/malloc.c, a chunk in use and the block the caller gets:
 *
 *     chunk                 p = block (16-byte aligned)            p + usable
 *     |                     |                                      |
 *     +----------+----------+----------+----------+--- ... ---+----------+----------+
 *     | prev_size| size|A|M|P| e->next | e->key   |  user data | next chunk's       |
 *     | (8)      | (8)      | (8, free)| (8, free)|           | prev_size | size|P  |
 *     +----------+----------+----------+----------+--- ... ---+----------+----------+
 *                  p - 8      p          p + 8                  p+usable-8  p+usable
 *
 *   usable = chunksize - 8 (memsize): the next chunk's prev_size field is the block's
 *   last 8 bytes while the block is in use; its size field lies at p + usable.
 *
 * What each call reads and writes (malloc.c functions):
 *   malloc (tcache path: __libc_malloc -> tcache_get, blocks of at most 1032 bytes):
 *       reads e->next (p), clears e->key (p + 8).
 *   malloc of a larger block (_int_malloc from a bin: the victim's fd/bk read,
 *       set_inuse_bit_at_offset): reads p .. p + 16, writes the next chunk's size.
 *   malloc_usable_size (musable): reads the chunk's size (p - 8) and, to test inuse(p),
 *       the next chunk's size (p + usable), at an address the first read gives: recorded
 *       as depending on it (so are free's two reads past the tcache).
 *   free (__libc_free reads the size; _int_free -> tcache_put, at most 1032 bytes):
 *       reads the size (p - 8), writes e->next and e->key (p .. p + 16).
 *   free of a larger block (_int_free_merge_chunk into the unsorted bin): reads the size,
 *       writes fd and bk (p .. p + 16), reads and clears the next chunk's PREV_INUSE and
 *       writes its prev_size (set_foot): p + usable - 8 .. p + usable + 8.
 *   Blocks of MMAP_THRESHOLD (128 KiB) and more are mmapped chunks: only the header.
 *
 * What is left out: which path glibc takes is its state (a tcache bin holds 7 blocks;
 * past that a small block takes the bin path), and the arena's own structures (the
 * tcache_perthread_struct, main_arena's bins) and the neighbours a consolidation reads;
 * a block is taken on the tcache path when it is small enough for one.  The lines that
 * matter to the caches are the block's first line and its next chunk's header line, which
 * every path reads or writes.  calloc and realloc are not recorded (a table's bucket array
 * and the server's buffers: not on a request's path).  No record reads glibc's memory:
 * the addresses follow from the block and its usable size (ASan's allocator, which the
 * sanitizer builds run, lays its blocks out otherwise; the records do not read them).
 *
 * Instructions: the sites carry none (sites.h, cost 0).  The allocator's instructions are
 * charged where the caller counts them: callpath.c's KS_ZMALLOC_WORK and KS_ZFREE_WORK,
 * measured per call under callgrind (results/server-steps-callgrind.json).
 *
 * Conventions: static inline ksLibc*; the tracing compiles out of the native build.
 */
#ifndef KS_LIBC_ALLOC_H
#define KS_LIBC_ALLOC_H

#include <assert.h>
#include <malloc.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "emit.h"

#define KS_LIBC_TCACHE_MAX 1032u          /* malloc.c: tcache_max_bytes (64 bins of 16 B) */
#define KS_LIBC_MMAP_MIN (128u * 1024u)   /* malloc.c: DEFAULT_MMAP_THRESHOLD_MIN */
#define KS_LIBC_SIZE_SZ 8u                /* malloc.c: SIZE_SZ, the size field's bytes */

/* tidx2usize(TCACHE_MAX_BINS - 1): 63 steps of MALLOC_ALIGNMENT past MINSIZE, less SIZE_SZ */
static_assert(KS_LIBC_TCACHE_MAX == 63 * 16 + 32 - KS_LIBC_SIZE_SZ, "tcache_max_bytes");

#if KS_TRACE
static inline const uint8_t *ksLibcAt(const void *p, ptrdiff_t off) {
    return (const uint8_t *)p + off;
}

/* malloc_usable_size's reads: the chunk's size field and the next chunk's, whose address is
 * the block plus the size just read (musable: inuse(p) reads p + chunksize(p)), so its record
 * depends on the first. */
static inline void ksLibcTraceUsable(const void *p, size_t usable) {
    ksLoadId size = KS_LOAD(ksLibcAt(p, -(ptrdiff_t)KS_LIBC_SIZE_SZ), KS_LIBC_SIZE_SZ,
                            KVT_TAG_OTHER, KS_SITE_ALLOC_USABLE_SIZE, 0);
    if (usable < KS_LIBC_MMAP_MIN)
        (void)KS_LOAD(ksLibcAt(p, (ptrdiff_t)usable), KS_LIBC_SIZE_SZ, KVT_TAG_OTHER,
                      KS_SITE_ALLOC_USABLE_SIZE, size);
}

static inline void ksLibcTraceMalloc(const void *p) {
    size_t usable = malloc_usable_size((void *)p);
    if (usable <= KS_LIBC_TCACHE_MAX) { /* tcache_get */
        (void)KS_LOAD(p, 8, KVT_TAG_OTHER, KS_SITE_ALLOC_MALLOC, 0);
        KS_STORE(ksLibcAt(p, 8), 8, KVT_TAG_OTHER, KS_SITE_ALLOC_MALLOC, 0);
    } else if (usable < KS_LIBC_MMAP_MIN) { /* _int_malloc: a bin's victim */
        (void)KS_LOAD(p, 16, KVT_TAG_OTHER, KS_SITE_ALLOC_MALLOC, 0);
        KS_STORE(ksLibcAt(p, (ptrdiff_t)usable), KS_LIBC_SIZE_SZ, KVT_TAG_OTHER,
                 KS_SITE_ALLOC_MALLOC, 0);
    } else { /* mmap: the header written */
        KS_STORE(ksLibcAt(p, -2 * (ptrdiff_t)KS_LIBC_SIZE_SZ), 2 * KS_LIBC_SIZE_SZ,
                 KVT_TAG_OTHER, KS_SITE_ALLOC_MALLOC, 0);
    }
}

static inline void ksLibcTraceFree(const void *p) {
    size_t usable = malloc_usable_size((void *)p);
    ksLoadId size = KS_LOAD(ksLibcAt(p, -(ptrdiff_t)KS_LIBC_SIZE_SZ), KS_LIBC_SIZE_SZ,
                            KVT_TAG_OTHER, KS_SITE_ALLOC_FREE, 0);
    if (usable >= KS_LIBC_MMAP_MIN) return; /* munmap_chunk */
    KS_STORE(p, 16, KVT_TAG_OTHER, KS_SITE_ALLOC_FREE, 0); /* tcache_put, or fd and bk */
    if (usable > KS_LIBC_TCACHE_MAX) { /* the next chunk's PREV_INUSE (at p + the size), set_foot */
        (void)KS_LOAD(ksLibcAt(p, (ptrdiff_t)usable), KS_LIBC_SIZE_SZ, KVT_TAG_OTHER,
                      KS_SITE_ALLOC_FREE, size);
        KS_STORE(ksLibcAt(p, (ptrdiff_t)usable - (ptrdiff_t)KS_LIBC_SIZE_SZ),
                 2 * KS_LIBC_SIZE_SZ, KVT_TAG_OTHER, KS_SITE_ALLOC_FREE, 0);
    }
}
#else
#define ksLibcTraceUsable(p, usable) ((void)(p), (void)(usable))
#define ksLibcTraceMalloc(p) ((void)(p))
#define ksLibcTraceFree(p) ((void)(p))
#endif

/* malloc(n): the block (NULL when out of memory), its tcache or bin accesses recorded. */
static inline void *ksLibcMalloc(size_t n) {
    void *p = malloc(n);
    if (p) ksLibcTraceMalloc(p);
    return p;
}

/* malloc_usable_size(p) of a block of the C library, its reads recorded. */
static inline size_t ksLibcUsableSize(const void *p) {
    size_t u = malloc_usable_size((void *)p);
    ksLibcTraceUsable(p, u);
    return u;
}

/* free(p) (p may be NULL), its accesses recorded before the block is released. */
static inline void ksLibcFree(void *p) {
    if (p) ksLibcTraceFree(p);
    free(p);
}

#endif /* KS_LIBC_ALLOC_H */
