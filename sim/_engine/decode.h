/*
 * decode.h -- the engine's trace intake: a .kvt chunk's payload checked and
 * decoded in compiled code (traces/FORMAT.md), for sim/_intake.py.
 *
 * The Python reader (traces/reader.py, traces/validate.py) is the reference:
 * it reads the stream's framing (headers, lengths, the end chunk) and these
 * functions do the per-byte work of each data chunk: the CRC32 of the stored
 * payload, zstd decompression (of the records, or of their byte planes), and
 * the record rules (FORMAT.md "Record
 * rules").  sim/tests/test_intake.py requires the same records and the same
 * one-line errors as the Python reader on valid and corrupted traces.
 *
 * zstd comes from the system's libzstd.so.1, opened at the first use
 * (dlopen: no build-time dependency); without it kvsimDecodePayload returns
 * KVSIM_DEC_NO_ZSTD and the caller decompresses in Python.  Every function
 * here is thread-safe; a validator is used by one thread at a time.
 */
#ifndef KVSIM_DECODE_H
#define KVSIM_DECODE_H

#include <stddef.h>
#include <stdint.h>

#include "../../traces/trace_format.h"

/* CRC-32 (IEEE 802.3, zlib's crc32): crc of the bytes so far (0 to start).
 * Computed by the system's zlib (libz.so.1, opened at first use) when it has
 * crc32, else by kvsimCrc32Tables. */
uint32_t kvsimCrc32(uint32_t crc, const void *buf, size_t len);
/* The same CRC by eight 256-entry tables, eight bytes per step: the fallback. */
uint32_t kvsimCrc32Tables(uint32_t crc, const void *buf, size_t len);

enum {
    KVSIM_DEC_OK = 0,
    KVSIM_DEC_CRC = 1,     /* the payload's CRC32 differs; *crc_out = the computed one */
    KVSIM_DEC_ZSTD = 2,    /* zstd refused the payload, or it is not one frame of raw_len
                              bytes: the caller words the error (the reference's message) */
    KVSIM_DEC_NO_ZSTD = 3, /* libzstd.so.1 could not be opened (CRC checked) */
    KVSIM_DEC_CODEC = 4,   /* unknown codec, or a raw payload of the wrong size */
    KVSIM_DEC_MEMORY = 5   /* no memory for a chunk's byte planes */
};

/* Check and decode one data chunk's payload (`stored` bytes as stored, with
 * the header's codec and crc) into out (raw_len = n_records * 24 bytes).
 * Returns KVSIM_DEC_*; *crc_out gets the computed CRC32. */
int kvsimDecodePayload(const void *payload, size_t stored, uint32_t codec, uint32_t crc,
                       void *out, size_t raw_len, uint32_t *crc_out);

/* Records <-> byte planes (KVT_CODEC_ZSTD_PLANES): planes[j * n + i] is byte
 * j of recs[i]; planes holds n * 24 bytes. */
void kvsimPlanesSplit(const kvtRecord *recs, size_t n, uint8_t *planes);
void kvsimPlanesJoin(const uint8_t *planes, size_t n, kvtRecord *recs);

/* 1 if libzstd.so.1 is usable. */
int kvsimDecodeHasZstd(void);

/* The record rules, in the order traces/validate.py checks them (the first
 * broken one of the first bad record is reported); ids shared with
 * validate.py's RULE_* constants. */
enum {
    KVSIM_RULE_KIND = 0,       /* kind >= KVT_NUM_KINDS */
    KVSIM_RULE_SIZE_ACCESS,    /* a load or store of size 0 */
    KVSIM_RULE_SIZE_PREFETCH,  /* a prefetch of size != 1 */
    KVSIM_RULE_SIZE_MARKER,    /* a marker of size != 0 */
    KVSIM_RULE_FLAGS_ACCESS,   /* an access with flags != 0 */
    KVSIM_RULE_FLAGS_MARKER,   /* a marker type >= the known ones */
    KVSIM_RULE_DEP_MARKER,     /* a marker with dep != 0 */
    KVSIM_RULE_ADDR_WRAP,      /* addr + size - 1 passes 2^64 - 1 */
    KVSIM_RULE_TAG,            /* tag >= the header's tags */
    KVSIM_RULE_SITE,           /* site >= the header's sites */
    KVSIM_RULE_DEP_BEFORE,     /* dep reaches before the first record */
    KVSIM_RULE_DEP_NOT_LOAD,   /* dep <= KVT_DEP_CHECK_WINDOW names a record that is not a load */
    KVSIM_RULE_WARMUP,         /* warm-up markers out of turn */
    KVSIM_NRULES
};

typedef struct kvsimRecordError {
    uint64_t index; /* the record's index in the array checked */
    uint32_t rule;  /* KVSIM_RULE_* */
    uint32_t pad;
    uint64_t dep;   /* DEP_*: the record's dep */
    uint64_t named; /* DEP_NOT_LOAD: the trace index of the record it names */
} kvsimRecordError;

typedef struct kvsimValidator kvsimValidator;

/* n_tags / n_sites: the header's list lengths, or -1 where it has none;
 * n_markers: the known marker types (min(header markers, KVT_NUM_MARKERS)).
 * NULL when out of memory. */
kvsimValidator *kvsimValidatorCreate(int64_t n_tags, int64_t n_sites, uint32_t n_markers);

/* Check the next n records of the trace.  0: all keep the rules (the
 * validator moves past them); 1: *err names the first bad record (the
 * validator does not move).  Nothing is allocated here: the validator's
 * memory is fixed when it is created. */
int kvsimValidate(kvsimValidator *v, const kvtRecord *recs, size_t n, kvsimRecordError *err);

/* The same check in two parts, so that the per-record work runs beside the
 * decoding, on any thread, and only a few records wait for the arrays before:
 *
 *   kvsimValidateLocal (any thread, v read-only): the rules an array settles
 *     alone, for records with trace indices base .. base + n - 1; notes the
 *     first record breaking one, how far the ordered part must look (warm-up
 *     markers, deps naming a record before the array), and one bit per record
 *     (a load) in loads[(n + 63) / 64];
 *   kvsimValidateJoin (in trace order, one thread): the rest, against the
 *     warm-up turn and the last KVT_DEP_CHECK_WINDOW kinds; 0: accepted (the
 *     validator moves past the array), 1: *err names the first bad record, the
 *     same one kvsimValidate would name, -1: c is not the next array's.
 */
typedef struct kvsimChunkCheck {
    uint64_t base;     /* trace index of the array's first record */
    uint64_t n;        /* records */
    uint64_t bad;      /* the first record breaking a rule the array settles alone; n: none */
    uint32_t rule;     /* its KVSIM_RULE_* */
    uint32_t pad;
    uint64_t join_end; /* the ordered part looks at records [0, join_end) */
} kvsimChunkCheck;

void kvsimValidateLocal(const kvsimValidator *v, const kvtRecord *recs, size_t n, uint64_t base,
                        uint64_t *loads, kvsimChunkCheck *c);
int kvsimValidateJoin(kvsimValidator *v, const kvtRecord *recs, const uint64_t *loads,
                      const kvsimChunkCheck *c, kvsimRecordError *err);

/* kvsimDecodePayload and kvsimValidateLocal in one call, on any thread: the
 * decoded records checked while they are at hand (with v, base, loads and c
 * as kvsimValidateLocal takes them); c is set only when KVSIM_DEC_OK is
 * returned. */
int kvsimDecodeChecked(const void *payload, size_t stored, uint32_t codec, uint32_t crc,
                       void *out, size_t raw_len, uint32_t *crc_out, const kvsimValidator *v,
                       uint64_t base, uint64_t *loads, kvsimChunkCheck *c);

/* kvsimPlanesJoin of n records into recs, and kvsimValidateLocal of them
 * (the same loads and c, to the bit), screened on the planes 16 records at a
 * time (decode.c); bits: scratch of 2 * ((n + 63) / 64) words. */
void kvsimValidatePlanes(const kvsimValidator *v, const uint8_t *planes, size_t n, uint64_t base,
                         kvtRecord *recs, uint64_t *loads, kvsimChunkCheck *c, uint64_t *bits);

/* Records accepted so far. */
uint64_t kvsimValidatorRecords(const kvsimValidator *v);
/* Bytes the validator holds: fixed (the kinds of the last KVT_DEP_CHECK_WINDOW
 * records, one bit each), whatever the number of records checked. */
size_t kvsimValidatorBytes(const kvsimValidator *v);
void kvsimValidatorFree(kvsimValidator *v);

#endif /* KVSIM_DECODE_H */
