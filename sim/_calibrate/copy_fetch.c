/*
 * copy_fetch.c -- `kvsim-calibrate copyfetch PAGE BATCH POOL REPEATS SIZE...`: whether a
 * copy reads the destination's lines before it writes them (a read for ownership), by copy
 * method and size, in process CPU time (ns per copy): the test of whether a copy's
 * whole-line stores skip the fetch `[core] full_line_store_fetch` gives every x86 store
 * (sim/MODEL.md §2; sim/calibrate_copy.py analyses it; sim/VALIDATION.md finding 27).
 *
 * Every sample copies BATCH bytes as BATCH / SIZE copies of SIZE bytes from one source (the
 * same SIZE bytes each time, in the cache) by one method into destinations in one state:
 *
 *   hot      the same SIZE-byte destination every copy (CF_HOT_MULT times as many copies,
 *            so that the clock's own cost stays small): its lines stay in the L1/L2
 *   flushed  BATCH / SIZE consecutive destinations whose every line was flushed from every
 *            cache (clflush, x86) just before the sample: not in any cache, memory holds
 *            them, nothing dirty to write back during the sample
 *   pool     the next BATCH / SIZE destinations of a POOL-byte region taken in turn (POOL
 *            well above the last level: a destination was evicted, dirty, since its last
 *            copy, so the sample also pays for write-backs, as a program writing new
 *            memory does)
 *
 * and the methods (x86; elsewhere only memcpy, loop, read and touch):
 *
 *   movsb    `rep movsb` (fast strings; ERMS/FSRM)
 *   memcpy   glibc's memcpy (its own choice of instructions by size; through a volatile
 *            pointer, never inlined)
 *   loop     16-byte loads and ordinary 16-byte stores (SSE2 movdqu/movdqa), 64 bytes per
 *            iteration: the stores every x86 core reads its line for (a plain 8-byte loop
 *            elsewhere)
 *   nt       16-byte loads and non-temporal stores (movntdq) then sfence: stores that write
 *            a whole line around the caches without reading it
 *   read     pread(2) of SIZE bytes of a memory file (in the page cache) into the
 *            destination: the kernel's copy_to_user
 *   touch    one 8-byte load per destination line, no store: the cost of fetching the lines
 *            alone
 *
 * A store that fetches its line pays, flushed against hot, about what `touch` pays for the
 * same lines; a copy that writes whole lines without reading them pays little more than hot
 * (`nt`'s cost is the same in every state: it always writes memory).  Each repeat takes one
 * sample of every (size, method, state) in turn, so all are interleaved (A B A B); repeat 0
 * warms up and is not printed.  PAGE is "4k" or "2m" as calibrate.c's.  Every figure
 * printed is a raw sample (ns per copy); the program does no analysis.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#if defined(__x86_64__)
#include <emmintrin.h>
#endif

#define CF_LINE 64
#define CF_MAX_SIZES 16
#define CF_MAX_REPEATS 512
#define CF_HOT_MULT 4

int benchCopyFetch(int argc, char **argv);

_Static_assert(CF_LINE % 16 == 0, "a line is whole 16-byte vectors");

/* --- Helpers --- */

static double cfNowNs(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static unsigned long long cfNum(const char *s, const char *what) {
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (*s == '\0' || *end != '\0' || v == 0) {
        fprintf(stderr, "kvsim-calibrate: copyfetch: %s: expected a positive integer, got '%s'\n",
                what, s);
        exit(2);
    }
    return v;
}

/* `len` bytes (a multiple of 2 MiB with huge pages), touched; exits with one line if absent. */
static char *cfMap(size_t len, int huge, void **map, size_t *map_len) {
    const size_t hp = (size_t)2 << 20;
    *map_len = len + (huge ? hp : 0);
    *map = mmap(NULL, *map_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (*map == MAP_FAILED) {
        fprintf(stderr, "kvsim-calibrate: copyfetch: cannot map %zu bytes\n", len);
        exit(1);
    }
    char *p = (char *)(huge ? ((uintptr_t)*map + hp - 1) & ~(uintptr_t)(hp - 1) : (uintptr_t)*map);
    (void)madvise(p, len, huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
    memset(p, 1, len);
    return p;
}

/* --- The methods --- */

enum { M_MOVSB, M_MEMCPY, M_LOOP, M_NT, M_READ, M_TOUCH, M_COUNT };
static const char *const method_names[M_COUNT] = {"movsb", "memcpy", "loop", "nt", "read",
                                                  "touch"};
enum { S_HOT, S_FLUSHED, S_POOL, S_COUNT };
static const char *const state_names[S_COUNT] = {"hot", "flushed", "pool"};

static void *(*volatile cf_memcpy)(void *, const void *, size_t) = memcpy;
static int cf_fd = -1;
static uint64_t cf_sink;

#if defined(__x86_64__)
#define CF_X86 1
static void copyMovsb(char *d, const char *s, size_t n) {
    __asm__ volatile("rep movsb" : "+D"(d), "+S"(s), "+c"(n) : : "memory");
}

static void copyLoop(char *d, const char *s, size_t n) {
    for (size_t i = 0; i < n; i += CF_LINE) {
        __m128i a = _mm_loadu_si128((const __m128i *)(s + i));
        __m128i b = _mm_loadu_si128((const __m128i *)(s + i + 16));
        __m128i c = _mm_loadu_si128((const __m128i *)(s + i + 32));
        __m128i e = _mm_loadu_si128((const __m128i *)(s + i + 48));
        _mm_store_si128((__m128i *)(d + i), a);
        _mm_store_si128((__m128i *)(d + i + 16), b);
        _mm_store_si128((__m128i *)(d + i + 32), c);
        _mm_store_si128((__m128i *)(d + i + 48), e);
    }
}

static void copyNt(char *d, const char *s, size_t n) {
    for (size_t i = 0; i < n; i += CF_LINE) {
        __m128i a = _mm_loadu_si128((const __m128i *)(s + i));
        __m128i b = _mm_loadu_si128((const __m128i *)(s + i + 16));
        __m128i c = _mm_loadu_si128((const __m128i *)(s + i + 32));
        __m128i e = _mm_loadu_si128((const __m128i *)(s + i + 48));
        _mm_stream_si128((__m128i *)(d + i), a);
        _mm_stream_si128((__m128i *)(d + i + 16), b);
        _mm_stream_si128((__m128i *)(d + i + 32), c);
        _mm_stream_si128((__m128i *)(d + i + 48), e);
    }
    _mm_sfence();
}

static void flush(char *p, size_t n) {
    for (size_t i = 0; i < n; i += CF_LINE) _mm_clflush(p + i);
    _mm_mfence();
}
#else
#define CF_X86 0
static void copyLoop(char *d, const char *s, size_t n) {
    for (size_t i = 0; i < n; i += 8) {
        uint64_t v;
        memcpy(&v, s + i, 8);
        __asm__ volatile("" : "+r"(v));
        memcpy(d + i, &v, 8);
    }
}
#endif

/* One copy of n bytes into d by method m (m is not M_TOUCH). */
static void copyOne(int m, char *d, const char *s, size_t n) {
    switch (m) {
#if CF_X86
    case M_MOVSB: copyMovsb(d, s, n); break;
    case M_NT: copyNt(d, s, n); break;
#endif
    case M_MEMCPY: cf_memcpy(d, s, n); break;
    case M_LOOP: copyLoop(d, s, n); break;
    case M_READ:
        if (pread(cf_fd, d, n, 0) != (ssize_t)n) {
            fprintf(stderr, "kvsim-calibrate: copyfetch: pread of %zu bytes failed\n", n);
            exit(1);
        }
        break;
    default: break;
    }
}

static uint64_t touch(const char *d, size_t n) {
    uint64_t acc = 0;
    for (size_t i = 0; i < n; i += CF_LINE) acc += *(const volatile uint64_t *)(d + i);
    return acc;
}

static int available(int m, int st) {
    if (CF_X86) return 1;
    return m != M_MOVSB && m != M_NT && st != S_FLUSHED;
}

/* --- The benchmark --- */

typedef struct {
    char *src, *hot, *flushed, *pool;
    size_t batch, pool_len, pool_at;
} cfBufs;

/* One sample: ns per copy of `size` bytes by method m into destinations in state st. */
static double sample(cfBufs *b, int m, int st, size_t size) {
    const size_t copies = b->batch / size * (st == S_HOT ? CF_HOT_MULT : 1);
    char *base = b->hot;
    if (st == S_FLUSHED) {
#if CF_X86
        flush(b->flushed, copies * size);
#endif
        base = b->flushed;
    } else if (st == S_POOL) {
        if (b->pool_at + copies * size > b->pool_len) b->pool_at = 0;
        base = b->pool + b->pool_at;
        b->pool_at += copies * size;
    }
    const size_t step = st == S_HOT ? 0 : size;
    double t0 = cfNowNs();
    if (m == M_TOUCH)
        for (size_t c = 0; c < copies; c++) cf_sink += touch(base + c * step, size);
    else
        for (size_t c = 0; c < copies; c++) copyOne(m, base + c * step, b->src, size);
    double t1 = cfNowNs();
    cf_sink += (unsigned char)base[0];
    return (t1 - t0) / (double)copies;
}

int benchCopyFetch(int argc, char **argv) {
    if (argc < 5) return 2;
    int huge;
    if (!strcmp(argv[0], "4k")) huge = 0;
    else if (!strcmp(argv[0], "2m")) huge = 1;
    else {
        fprintf(stderr, "kvsim-calibrate: copyfetch: page: expected 4k or 2m, got '%s'\n",
                argv[0]);
        exit(2);
    }
    cfBufs b = {0};
    b.batch = (size_t)cfNum(argv[1], "BATCH");
    b.pool_len = (size_t)cfNum(argv[2], "POOL");
    const unsigned long long reps = cfNum(argv[3], "REPEATS");
    const int nsizes = argc - 4;
    size_t sizes[CF_MAX_SIZES], max_size = 0;
    if (nsizes > CF_MAX_SIZES || reps > CF_MAX_REPEATS) {
        fprintf(stderr, "kvsim-calibrate: copyfetch: at most %d sizes and %d repeats\n",
                CF_MAX_SIZES, CF_MAX_REPEATS);
        exit(2);
    }
    for (int i = 0; i < nsizes; i++) {
        sizes[i] = (size_t)cfNum(argv[4 + i], "SIZE");
        if (sizes[i] % CF_LINE || sizes[i] > b.batch) {
            fprintf(stderr, "kvsim-calibrate: copyfetch: SIZE: whole lines, at most BATCH, "
                            "got %zu\n", sizes[i]);
            exit(2);
        }
        if (sizes[i] > max_size) max_size = sizes[i];
    }
    if (b.pool_len < 2 * b.batch) {
        fprintf(stderr, "kvsim-calibrate: copyfetch: POOL: at least twice BATCH\n");
        exit(2);
    }
    void *maps[4];
    size_t lens[4];
    b.src = cfMap(max_size, huge, &maps[0], &lens[0]);
    b.hot = cfMap(max_size, huge, &maps[1], &lens[1]);
    b.flushed = cfMap(b.batch, huge, &maps[2], &lens[2]);
    b.pool = cfMap(b.pool_len, huge, &maps[3], &lens[3]);
    for (size_t i = 0; i < max_size; i++) b.src[i] = (char)(i * 131u);
    cf_fd = memfd_create("kvsim-copyfetch", 0);
    if (cf_fd < 0 || write(cf_fd, b.src, max_size) != (ssize_t)max_size) {
        fprintf(stderr, "kvsim-calibrate: copyfetch: cannot write a memory file\n");
        exit(1);
    }
    const unsigned long long n = reps;
    double *ns = malloc(sizeof *ns * (size_t)nsizes * M_COUNT * S_COUNT * n);
    if (!ns) {
        fprintf(stderr, "kvsim-calibrate: copyfetch: out of memory\n");
        exit(1);
    }
#define AT(i, m, st, r) ns[(((size_t)(i) * M_COUNT + (m)) * S_COUNT + (st)) * n + (r)]
    for (unsigned long long r = 0; r <= n; r++) /* repeat 0 warms up */
        for (int i = 0; i < nsizes; i++)
            for (int m = 0; m < M_COUNT; m++)
                for (int st = 0; st < S_COUNT; st++) {
                    if (!available(m, st)) continue;
                    double t = sample(&b, m, st, sizes[i]);
                    if (r) AT(i, m, st, r - 1) = t;
                }
    printf("{\"bench\": \"copyfetch\", \"page\": \"%s\", \"batch\": %zu, \"pool\": %zu, "
           "\"x86\": %d, \"points\": [", argv[0], b.batch, b.pool_len, CF_X86);
    int first = 1;
    for (int i = 0; i < nsizes; i++)
        for (int m = 0; m < M_COUNT; m++)
            for (int st = 0; st < S_COUNT; st++) {
                if (!available(m, st)) continue;
                printf("%s{\"size\": %zu, \"method\": \"%s\", \"state\": \"%s\", \"ns\": [",
                       first ? "" : ", ", sizes[i], method_names[m], state_names[st]);
                first = 0;
                for (unsigned long long r = 0; r < n; r++)
                    printf("%s%.2f", r ? ", " : "", AT(i, m, st, r));
                printf("]}");
            }
#undef AT
    printf("], \"checksum\": %llu}\n", (unsigned long long)cf_sink);
    free(ns);
    close(cf_fd);
    for (int k = 0; k < 4; k++) munmap(maps[k], lens[k]);
    return 0;
}
