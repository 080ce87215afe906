/*
 * rio.c -- the snapshot load's file reads, as Valkey's rio over stdio.
 *
 * Valkey (`src/rdb.c` rdbLoad, `src/rio.c` rioInitWithFile, rioFileRead):
 *
 *   fp = fopen(file)  ->  rioRead(len)  ->  rioFileRead: fread(buf, len, 1, fp)
 *                                            |  glibc _IO_file_xsgetn:
 *                                            |  1. copy what the FILE's buffer holds
 *                                            |  2. rest >= one buffer: read(2) whole
 *                                            |     buffers straight into buf
 *                                            |  3. rest < one buffer: refill the buffer
 *                                            |     with one read(2), copy the rest
 *
 * c_ref makes the same calls on a real file: the snapshot's bytes in a memory file
 * (memfd_create, as the memory file system Valkey #2311 loads from), opened for reading
 * with a descriptor of its own (fopen's open of /proc/self/fd/N) and fdopen, its
 * buffer set with setvbuf to KS_RIO_STDIO_BUF bytes from the keyspace's arena (the
 * st_blksize glibc would use).  So the native load runs glibc's fread and the kernel's
 * read(2) as Valkey's does; the kernel's reads happen inside glibc.  A workload puts
 * the snapshot into a memory file before the measured load (ksRioMemFile,
 * ks->snap_memfd); a load of any other buffer writes one first.
 *
 * Traced build: glibc's steps are not observable, so rioTraceFread replays
 * _IO_file_xsgetn's (the window of file bytes the buffer holds: win, wlen; the file
 * position: fpos) and records the bytes where they move:
 *   rioTraceKernelRead  read(2): a sys.file_read marker with its bytes, then the
 *                       kernel's stores into the stdio buffer (a refill) or into the
 *                       destination (a direct read of whole buffers), at that site.
 *                       The one place the load's bytes leave the file.
 *   rioTraceCopy        fread's copies out of the stdio buffer: loads of the buffer,
 *                       stores into the destination (its tag from ksRioRead): snap.read
 * glibc's own state (the FILE, its lock) is not recorded.
 *
 * Conventions: public ksRio*; static internals.
 */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "rio.h"

#if KS_TRACE
/* The kernel's read(2) as the traced build records it: n bytes of the file at the
 * kernel's offset into dst (the stdio buffer for a refill, the caller's destination for
 * a direct read of whole buffers), traces/FORMAT.md "System calls": a SYSCALL marker
 * sys.file_read with its bytes, then the kernel's store of them into dst at the call's
 * site.  The page-cache pages it copies from (the image's lines) and the copy's
 * instructions are the call's cost per byte, not records. */
static void rioTraceKernelRead(ksRio *r, const void *dst, size_t n, uint8_t tag) {
    KS_SYSCALL(KS_SITE_SYS_FILE_READ, n);
    KS_STORE(dst, n, tag, KS_SITE_SYS_FILE_READ, 0);
    r->kpos += n;
}

/* fread's copy of k bytes out of the stdio buffer (file offset f) into dst. */
static void rioTraceCopy(ksRio *r, size_t f, const uint8_t *dst, size_t k) {
    (void)KS_LOAD(r->sb + (f - r->win), k, KVT_TAG_SNAPSHOT_BUF, KS_SITE_SNAP_READ, 0);
    KS_STORE(dst, k, r->tag, KS_SITE_SNAP_READ, 0);
}

/* The traced build's records of one fread(buf, len, 1) as glibc's _IO_file_xsgetn
 * makes it, the buffer holding file bytes [win, win + wlen): copy what it holds; while
 * bytes are wanted, fewer than a buffer: refill it with one read and copy, else read
 * whole buffers straight into buf (the buffer left empty). */
static void rioTraceFread(ksRio *r, uint8_t *buf, size_t len) {
    size_t f = r->fpos, want = len;
    while (want) {
        size_t have = r->wlen && f >= r->win && f < r->win + r->wlen ? r->win + r->wlen - f : 0;
        if (have) {
            size_t k = have < want ? have : want;
            rioTraceCopy(r, f, buf + (len - want), k);
            f += k;
            want -= k;
            continue;
        }
        size_t left = r->size - r->kpos;
        if (!left) break; /* end of file: fread fails */
        if (want < KS_RIO_STDIO_BUF) { /* __underflow: one read of a buffer */
            size_t n = left < KS_RIO_STDIO_BUF ? left : KS_RIO_STDIO_BUF;
            r->win = r->kpos;
            r->wlen = n;
            rioTraceKernelRead(r, r->sb, n, KVT_TAG_SNAPSHOT_BUF);
        } else { /* whole buffers, direct */
            size_t n = want - want % KS_RIO_STDIO_BUF;
            if (n > left) n = left;
            r->wlen = 0;
            rioTraceKernelRead(r, buf + (len - want), n, r->tag);
            f += n;
            want -= n;
        }
    }
    r->fpos = f;
}

#endif

/* rioFileRead: one fread of len bytes (1, or 0 if the file has fewer). */
static size_t rioFileRead(ksRio *r, void *buf, size_t len) {
#if KS_TRACE
    rioTraceFread(r, buf, len);
#endif
    return fread(buf, len, 1, r->fp);
}

void ksRioGenericUpdateChecksum(ksRio *r, const void *buf, size_t len) {
    KS_CRC64_WORK(buf, len);
    r->cksum = ksCrc64(r->cksum, buf, len);
}

/* A file descriptor of its own (its own offset, at 0) on the file holding buf: the
 * keyspace's memory file when it holds buf, else a new one written with buf. */
static int rioOpenFile(ksKeyspace *ks, const uint8_t *buf, size_t len) {
    int mine = -1, fd;
    if (ks->snap_memfd && buf == ks->snap && len == ks->snap_len) {
        fd = ks->snap_memfd - 1;
    } else {
        fd = mine = ksRioMemFile(buf, len);
        if (fd < 0) return -1;
    }
    char path[64];
    snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
    int own = open(path, O_RDONLY | O_CLOEXEC); /* fopen's open(2) */
    if (own < 0 && (own = dup(fd)) >= 0 && lseek(own, 0, SEEK_SET) != 0) { /* no /proc */
        close(own);
        own = -1;
    }
    if (mine >= 0) close(mine);
    return own;
}

int ksRioMemFile(const uint8_t *buf, size_t len) {
    int fd = memfd_create("kvsim-snapshot", MFD_CLOEXEC);
    if (fd < 0) { /* no memfd_create: an unlinked temporary file */
        FILE *t = tmpfile();
        fd = t ? dup(fileno(t)) : -1;
        if (t) fclose(t);
        if (fd < 0) return -1;
    }
    for (size_t off = 0; off < len;) {
        ssize_t w = write(fd, buf + off, len - off);
        if (w <= 0) {
            close(fd);
            return -1;
        }
        off += (size_t)w;
    }
    return fd;
}

ksRio *ksRioOpen(ksKeyspace *ks, const uint8_t *buf, size_t len) {
    int fd = rioOpenFile(ks, buf, len);
    FILE *fp = fd < 0 ? NULL : fdopen(fd, "r");
    if (!fp) {
        if (fd >= 0) close(fd);
        return NULL;
    }
    ksRio *r = ksArenaAlloc(ks->arena, sizeof(*r));
    memset(r, 0, sizeof(*r));
    r->ks = ks;
    r->size = len;
    r->read = rioFileRead;
    r->fp = fp;
    r->sb = ksArenaAlloc(ks->arena, KS_RIO_STDIO_BUF);
    if (setvbuf(fp, (char *)r->sb, _IOFBF, KS_RIO_STDIO_BUF) != 0) {
        ksRioClose(r);
        return NULL;
    }
    return r;
}

void ksRioClose(ksRio *r) {
    if (!r) return;
    fclose(r->fp);
    ksArenaFree(r->ks->arena, r->sb);
    ksArenaFree(r->ks->arena, r);
}
