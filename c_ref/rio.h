/*
 * rio.h -- the snapshot load's reader: Valkey's rio over a stdio FILE (rio.c).
 *
 * Valkey's rdbLoad opens the file with fopen and reads it through rio
 * (`src/rio.h` rioRead, `src/rio.c` rioFileRead: one fread per read).  ksRio
 * keeps the fields of `struct _rio` the load uses, in their order, and reads a
 * snapshot the same way: fread on a FILE of the C library over a memory file holding
 * the snapshot, its buffer 4 KiB (rio.c).
 *
 * Conventions: public ksRio*; the ksRio lives in an arena block (deterministic
 * addresses for its records), its `scratch` standing for the caller's locals
 * that Valkey reads small fields into (a type byte, a length, an expire).
 */
#ifndef KS_RIO_H
#define KS_RIO_H

#include <stdint.h>
#include <stdio.h>

#include "keyspace.h"

/* glibc's stdio buffer for a file: st_blksize bytes (_IO_file_doallocate), 4096 on
 * the memory file system Valkey #2311 loads from; set with setvbuf. */
#define KS_RIO_STDIO_BUF 4096
/* Valkey's loading-process-events-interval-bytes default (config.c: 2 MiB): the
 * progress callback's interval and rioRead's max_processing_chunk. */
#define KS_RIO_LOADING_INTERVAL (2u * 1024 * 1024)

#define KS_RIO_FLAG_READ_ERROR 1u

typedef struct ksRio ksRio;
struct ksRio {
    /* --- struct _rio (rio.h), the fields a file load uses --- */
    size_t (*read)(ksRio *r, void *buf, size_t len);
    void (*update_cksum)(ksRio *r, const void *buf, size_t len);
    uint64_t cksum, flags;
    size_t processed_bytes;
    size_t max_processing_chunk;
    FILE *fp;
    uint8_t tag; /* c_ref: the trace tag of the current read's destination */
    /* --- the server's loading state (server.*: rdbLoadProgressCallback,
     * loadingAbsProgress) --- */
    struct {
        int rdb_checksum;
        size_t loading_process_events_interval_bytes;
        size_t loading_loaded_bytes;
        size_t loading_total_bytes;
        uint64_t stat_peak_memory;
    } srv;
    /* --- c_ref: the file and the stdio buffer --- */
    uint8_t scratch[16]; /* the callers' locals */
    ksKeyspace *ks;
    size_t size, kpos; /* the file's length; the kernel's file offset */
    uint8_t *sb;        /* the stdio buffer (setvbuf): an arena block */
    /* traced build: what the stdio buffer holds (file bytes [win, win + wlen)), the
     * file position of fread's next byte (rioTraceFread) */
    size_t win, wlen, fpos;
    const char *err; /* the loader's error (snapshot.c) */
};

/* rdbLoad's fopen and rioInitWithFile on the snapshot buf[0..len) (a memory file
 * holding it, a FILE whose buffer is KS_RIO_STDIO_BUF bytes of the arena); NULL if the
 * system refuses. */
ksRio *ksRioOpen(ksKeyspace *ks, const uint8_t *buf, size_t len);
/* A memory file (memfd) holding buf[0..len): its descriptor, -1 on failure; a workload
 * keeps one as ks->snap_memfd (+ 1) so that the measured load only opens it. */
int ksRioMemFile(const uint8_t *buf, size_t len);
/* fclose and free. */
void ksRioClose(ksRio *r);
/* rioGenericUpdateChecksum: fold buf[0..len) into r->cksum (its work recorded). */
void ksRioGenericUpdateChecksum(ksRio *r, const void *buf, size_t len);

/* rioRead: len bytes into buf (tag: the destination's trace tag), in chunks of at most
 * max_processing_chunk, each read then passed to update_cksum; 1, or 0 on a short read
 * (the read-error flag set). */
static inline size_t ksRioRead(ksRio *r, void *buf, size_t len, uint8_t tag) {
    if (r->flags & KS_RIO_FLAG_READ_ERROR) return 0;
    r->tag = tag;
    while (len) {
        size_t n = (r->max_processing_chunk && r->max_processing_chunk < len) ? r->max_processing_chunk : len;
        if (r->read(r, buf, n) == 0) {
            r->flags |= KS_RIO_FLAG_READ_ERROR;
            return 0;
        }
        if (r->update_cksum) r->update_cksum(r, buf, n);
        buf = (char *)buf + n;
        len -= n;
        r->processed_bytes += n;
        (void)KS_LOAD(&r->cksum, 24, KVT_TAG_OTHER, KS_SITE_RIO_READ, 0);
        KS_STORE(&r->cksum, 24, KVT_TAG_OTHER, KS_SITE_RIO_READ, 0);
    }
    return 1;
}

#endif /* KS_RIO_H */
