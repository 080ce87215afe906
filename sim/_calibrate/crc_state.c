/*
 * crc_state.c -- `kvsim-calibrate crcstate POOL BATCH REPEATS LEN@OFFSET...`: c_ref's CRC-64
 * (c_ref/crc64.c ksCrc64) timed in the states the snapshot load runs it in, each beside the
 * same steps without it, in process CPU time (ns per call).  The snapshot load checksums a
 * value right after fread copied it in (c_ref/snapshot.c loadRecords, c_ref/rio.h
 * ksRioRead); `kvsim-calibrate work crc64` times the CRC over a buffer already in the L1.
 * kvsim.experiments.crc_state runs and analyses it (sim/VALIDATION.md, the finding on the
 * load's checksum).
 *
 * Every sample makes BATCH / LEN calls of LEN bytes starting OFFSET bytes past a 64-byte
 * boundary (below 64: the loader checksums a value at its sds header's end, 5 bytes past
 * an 8-byte boundary for sdshdr16, which moves the streams' split and so the combine's
 * matrix products, c_ref/crc64.c) in one state, each call continuing the
 * sum of the one before (as rioGenericUpdateChecksum does), with the CRC (crc = 1) or the
 * same steps without it (crc = 0):
 *
 *   hot      the CRC over the same LEN bytes every call: its buffer stays in the L1/L2
 *            (`work crc64`'s state at the load's sizes); crc = 0 is an empty loop
 *   copyhot  memcpy of LEN bytes from a source in the cache into the same LEN-byte
 *            destination every call, then the CRC over the destination: bytes just written
 *            by a copy, their lines in the L1
 *   copy     the same copy into the next LEN bytes of a POOL-byte region taken in turn
 *            (POOL well above the last level: its lines evicted, dirty, since their last
 *            use, as a loaded value's new memory is), then the CRC over them: the value's
 *            copy out of stdio's buffer into its fresh allocation, then its checksum
 *   read     pread(2) of LEN bytes of a memory file (in the page cache) into the next LEN
 *            bytes of the pool, then the CRC over them: the kernel's copy (fread's direct
 *            read of whole buffers)
 *   fread    fread of a HDR-byte record header into a local, then fread of LEN bytes into
 *            the next LEN bytes of the pool, from a FILE over a memory file of POOL bytes
 *            whose buffer is CS_FREAD_BUF bytes (setvbuf), then the CRC over the LEN
 *            bytes: the load's own steps per key (glibc's refills by read(2) and its
 *            copies out of the buffer, or read(2) straight into the value for whole
 *            buffers), the file read in turn and rewound at its end
 *
 * The CRC's cost in a state is, per repeat, the crc = 1 sample less the crc = 0 one.  Each
 * repeat takes one sample of every (LEN, state, crc) in turn, so all are interleaved (A B A
 * B); repeat 0 warms up and is not printed.  The pool is 4 KiB pages, touched before the
 * first sample (no fault in a sample).  Every figure printed is a raw sample; "cost" is
 * c_ref's count of a call's instructions (ksCrc64Cost) at the point's offset, the count
 * the traces carry.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

uint64_t ksCrc64(uint64_t crc, const void *buf, size_t len); /* c_ref/crc64.c */
uint64_t ksCrc64Cost(const void *p, size_t n);

#define CS_LINE 64
#define CS_MAX_LENS 16
#define CS_MAX_REPEATS 512
#define CS_HDR 24          /* a 4 KiB key's record header and key: type, lengths, ~20-byte key */
#define CS_FREAD_BUF 4096 /* c_ref/rio.h KS_RIO_STDIO_BUF: glibc's buffer on a memory file */

int benchCrcState(int argc, char **argv);

_Static_assert(CS_FREAD_BUF % CS_LINE == 0, "the stdio buffer is whole lines");

enum { ST_HOT, ST_COPYHOT, ST_COPY, ST_READ, ST_FREAD, ST_COUNT };
static const char *const state_names[ST_COUNT] = {"hot", "copyhot", "copy", "read", "fread"};

static void *(*volatile cs_memcpy)(void *, const void *, size_t) = memcpy;

typedef struct {
    uint8_t *src, *hot, *pool;
    size_t pool_len, pool_at, batch;
    int fd;          /* the memory file (POOL bytes) */
    FILE *fp;        /* fread's FILE over its own descriptor on it */
    uint8_t *sbuf;   /* its stdio buffer */
    uint64_t sum;
} csBufs;

static double csNowNs(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static unsigned long long csNum(const char *s, const char *what) {
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (*s == '\0' || *end != '\0' || v == 0) {
        fprintf(stderr, "kvsim-calibrate: crcstate: %s: expected a positive integer, got '%s'\n",
                what, s);
        exit(2);
    }
    return v;
}

static void *csAlloc(size_t n) {
    void *p = aligned_alloc(CS_LINE, (n + CS_LINE - 1) / CS_LINE * CS_LINE);
    if (!p) {
        fprintf(stderr, "kvsim-calibrate: crcstate: out of memory\n");
        exit(1);
    }
    return p;
}

/* The next len bytes of the pool (back to its start when they do not fit). */
static uint8_t *nextDst(csBufs *b, size_t len, size_t off) {
    if (b->pool_at + off + len > b->pool_len) b->pool_at = 0;
    uint8_t *d = b->pool + b->pool_at + off;
    b->pool_at += (off + len + CS_LINE - 1) / CS_LINE * CS_LINE;
    return d;
}

static void csFail(const char *what) {
    fprintf(stderr, "kvsim-calibrate: crcstate: %s failed\n", what);
    exit(1);
}

/* fread's steps for one call: the header into a local, then len bytes into dst, the file
 * rewound at its end. */
static void freadOne(csBufs *b, uint8_t *hdr, uint8_t *dst, size_t len) {
    if (fread(hdr, CS_HDR, 1, b->fp) != 1 || fread(dst, len, 1, b->fp) != 1) {
        rewind(b->fp);
        if (fread(hdr, CS_HDR, 1, b->fp) != 1 || fread(dst, len, 1, b->fp) != 1) csFail("fread");
    }
}

/* One sample: ns per call of len bytes in state st, with the CRC or without. */
static double sample(csBufs *b, int st, int crc, size_t len, size_t off) {
    const size_t calls = b->batch / len ? b->batch / len : 1;
    uint8_t hdr[CS_HDR];
    uint64_t sum = b->sum;
    double t0 = csNowNs();
    for (size_t i = 0; i < calls; i++) {
        uint8_t *d = b->hot + off;
        switch (st) {
        case ST_HOT: break;
        case ST_COPYHOT: cs_memcpy(d, b->src, len); break;
        case ST_COPY:
            d = nextDst(b, len, off);
            cs_memcpy(d, b->src, len);
            break;
        case ST_READ: {
            d = nextDst(b, len, off);
            off_t at = (off_t)(d - b->pool);
            if (pread(b->fd, d, len, at) != (ssize_t)len) csFail("pread");
            break;
        }
        default:
            d = nextDst(b, len, off);
            freadOne(b, hdr, d, len);
            break;
        }
        if (crc) sum = ksCrc64(sum, d, len);
        else __asm__ volatile("" : : "r"(d) : "memory");
    }
    double t = csNowNs() - t0;
    b->sum = sum;
    return t / (double)calls;
}

int benchCrcState(int argc, char **argv) {
    if (argc < 4) return 2;
    const size_t pool = (size_t)csNum(argv[0], "POOL"), batch = (size_t)csNum(argv[1], "BATCH");
    const unsigned long long reps = csNum(argv[2], "REPEATS");
    const int nlens = argc - 3;
    if (nlens > CS_MAX_LENS || reps > CS_MAX_REPEATS) {
        fprintf(stderr, "kvsim-calibrate: crcstate: at most %d lengths and %d repeats\n",
                CS_MAX_LENS, CS_MAX_REPEATS);
        exit(2);
    }
    size_t lens[CS_MAX_LENS], offs[CS_MAX_LENS], most = 0;
    for (int i = 0; i < nlens; i++) {
        char *at = strchr(argv[3 + i], '@');
        if (!at) {
            fprintf(stderr, "kvsim-calibrate: crcstate: expected LEN@OFFSET, got '%s'\n", argv[3 + i]);
            exit(2);
        }
        *at = '\0';
        lens[i] = (size_t)csNum(argv[3 + i], "LEN");
        char *end;
        offs[i] = (size_t)strtoull(at + 1, &end, 10);
        if (end == at + 1 || *end || offs[i] >= CS_LINE) {
            fprintf(stderr, "kvsim-calibrate: crcstate: OFFSET below %d, got '%s'\n", CS_LINE, at + 1);
            exit(2);
        }
        if (lens[i] + CS_LINE > most) most = lens[i] + CS_LINE;
    }
    if (pool < 4 * (most + CS_HDR) || batch > pool / 4) {
        fprintf(stderr, "kvsim-calibrate: crcstate: POOL must hold 4 x (BATCH and LEN + %d)\n",
                CS_HDR);
        exit(2);
    }
    csBufs b = {0};
    b.batch = batch;
    b.pool_len = pool;
    b.src = csAlloc(most);
    b.hot = csAlloc(most);
    uint64_t x = 0x9e3779b97f4a7c15ull;
    for (size_t i = 0; i < most; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        b.src[i] = b.hot[i] = (uint8_t)x;
    }
    b.pool = mmap(NULL, pool, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (b.pool == MAP_FAILED) {
        fprintf(stderr, "kvsim-calibrate: crcstate: cannot map %zu bytes\n", pool);
        exit(1);
    }
    (void)madvise(b.pool, pool, MADV_NOHUGEPAGE);
    memset(b.pool, 1, pool);
    /* the memory file: POOL bytes of the source's pattern, in the page cache */
    b.fd = memfd_create("kvsim-crcstate", MFD_CLOEXEC);
    if (b.fd < 0) csFail("memfd_create");
    for (size_t off = 0; off < pool; off += most) {
        size_t n = pool - off < most ? pool - off : most;
        if (write(b.fd, b.src, n) != (ssize_t)n) csFail("write");
    }
    char path[64];
    snprintf(path, sizeof(path), "/proc/self/fd/%d", b.fd);
    int own = open(path, O_RDONLY | O_CLOEXEC); /* fopen's own descriptor, as c_ref/rio.c */
    if (own < 0 || !(b.fp = fdopen(own, "r"))) csFail("open");
    b.sbuf = csAlloc(CS_FREAD_BUF);
    if (setvbuf(b.fp, (char *)b.sbuf, _IOFBF, CS_FREAD_BUF) != 0) csFail("setvbuf");

    static double ns[CS_MAX_LENS][ST_COUNT][2][CS_MAX_REPEATS];
    for (unsigned long long r = 0; r <= reps; r++)
        for (int i = 0; i < nlens; i++)
            for (int st = 0; st < ST_COUNT; st++)
                for (int crc = 1; crc >= 0; crc--) {
                    double v = sample(&b, st, crc, lens[i], offs[i]);
                    if (r) ns[i][st][crc][r - 1] = v;
                }
    printf("{\"bench\": \"crcstate\", \"pool\": %zu, \"batch\": %zu, \"header\": %d, "
           "\"stdio_buffer\": %d, \"points\": [", pool, batch, CS_HDR, CS_FREAD_BUF);
    for (int i = 0; i < nlens; i++)
        for (int st = 0; st < ST_COUNT; st++)
            for (int crc = 1; crc >= 0; crc--) {
                printf("%s{\"len\": %zu, \"offset\": %zu, \"state\": \"%s\", \"crc\": %d, "
                       "\"cost\": %llu, \"ns\": [", i || st || crc != 1 ? ", " : "", lens[i],
                       offs[i], state_names[st], crc,
                       (unsigned long long)ksCrc64Cost(b.hot + offs[i], lens[i]));
                for (unsigned long long r = 0; r < reps; r++)
                    printf("%s%.2f", r ? ", " : "", ns[i][st][crc][r]);
                printf("]}");
            }
    printf("], \"checksum\": %llu}\n", (unsigned long long)b.sum);
    fclose(b.fp);
    close(b.fd);
    munmap(b.pool, pool);
    free(b.src);
    free(b.hot);
    free(b.sbuf);
    return 0;
}
