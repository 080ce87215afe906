/*
 * trace_format.h -- the one definition of the kvsim trace (.kvt) layout.
 *
 * Every producer (c_ref's emitter) and consumer (sim's engine) includes this
 * header; kvsim.traces (traces/format.py) parses it at import for every
 * #define KVT_* and enum member, so Python repeats none of them (its numpy
 * dtype is checked against the struct layout by traces/tests/test_format.py).
 * Keep the #defines and enums in the plain forms that parser reads: integer
 * literals, ( ), <<, |, +, -, and enum values 0..n-1 in order.
 * traces/FORMAT.md is the prose specification; this file is the byte layout.
 * Change either only together, and bump KVT_VERSION.
 *
 *  Stream
 *  ------
 *    +----------------------+  file header (fixed 16 bytes + JSON + crc32)
 *    | "KVTRACE\0" magic    |
 *    | u16 version          |
 *    | u16 record_size      |
 *    | u32 json_len         |
 *    | json_len bytes JSON  |  producer, workload spec, tag/site/marker tables,
 *    | u32 crc32(all above) |  arena base, gap model
 *    +----------------------+
 *    | chunk 0              |  kvtChunkHeader + payload (raw, zstd, zstd of byte planes)
 *    | chunk 1 ...          |
 *    +----------------------+
 *    | end chunk "KVEN"     |  kvtEndChunk: chunk count, total records
 *    +----------------------+
 *
 *  Record (24 bytes, little-endian, naturally aligned)
 *  ------
 *     0        8        12       16     18   19   20     22     24
 *    +--------+--------+--------+------+----+----+------+------+
 *    |  addr  |  gap   |  dep   | size |kind|tag | site |flags |
 *    +--------+--------+--------+------+----+----+------+------+
 *
 * Conventions: all integers little-endian; crc32 is the IEEE/zlib polynomial
 * (reflected 0xEDB88320, init and final xor 0xFFFFFFFF), i.e. zlib.crc32().
 */
#ifndef KVSIM_TRACE_FORMAT_H
#define KVSIM_TRACE_FORMAT_H

#include <assert.h>
#include <stddef.h>
#include <stdint.h>

#define KVT_MAGIC "KVTRACE\0" /* 8 bytes, NUL included */
#define KVT_MAGIC_LEN 8
#define KVT_VERSION 6      /* the version writers write */
#define KVT_MIN_VERSION 1  /* the oldest version readers read */
#define KVT_PLANES_VERSION 2 /* the first version with KVT_CODEC_ZSTD_PLANES */
#define KVT_SETUP_VERSION 3 /* the first version with the header key "setup" (FORMAT.md) */
#define KVT_SYSCALL_VERSION 4 /* the first version with the SYSCALL marker (FORMAT.md) */
#define KVT_WORK_VERSION 4 /* the first version with WORK markers and "work_kinds" (FORMAT.md) */
#define KVT_SERVER_WORK_VERSION 5 /* the first version with the work kind KVT_WORK_SERVER */
#define KVT_CRC_WORK_VERSION 6 /* the first version with KVT_WORK_CRC_STREAMS and _COMBINE */
#define KVT_FIXED_HEADER_LEN 16 /* magic + version + record_size + json_len */

#define KVT_CHUNK_MAGIC 0x4B43564Bu /* "KVCK" read as little-endian u32 */
#define KVT_END_MAGIC 0x4E45564Bu   /* "KVEN" read as little-endian u32 */
#define KVT_DEFAULT_CHUNK_RECORDS 65536u
#define KVT_MAX_CHUNK_RECORDS (1u << 22) /* readers reject larger chunks */
/* A dep of at most this many records names a load (checked by readers); one
 * reaching further back is not checked (FORMAT.md, "Record rules"), so a
 * reader keeps the kinds of this many records, whatever the trace's length. */
#define KVT_DEP_CHECK_WINDOW (1u << 20)

/* --- Record kinds --------------------------------------------------------- */
enum kvtKind {
    KVT_LOAD = 0,     /* demand load of `size` bytes at `addr` */
    KVT_STORE = 1,    /* demand store */
    KVT_PREFETCH = 2, /* software prefetch (read, locality 3) of the line at addr */
    KVT_MARKER = 3,   /* not a memory access: `flags` holds a kvtMarker, addr a value */
    KVT_NUM_KINDS
};

/* --- Marker types (flags field of a KVT_MARKER record) -------------------- */
enum kvtMarker {
    KVT_MARK_NONE = 0,
    KVT_MARK_COMMAND = 1,      /* a command starts; addr = command index */
    KVT_MARK_OP = 2,           /* an operation (key) starts; addr = op index */
    KVT_MARK_PHASE = 3,        /* a phase starts; addr = phase id (header "phases") */
    KVT_MARK_WARMUP_BEGIN = 4, /* records up to WARMUP_END are warm-up, not measured */
    KVT_MARK_WARMUP_END = 5,
    KVT_MARK_BATCH = 6,        /* a prefetch batch starts; addr = batch size */
    KVT_MARK_SYSCALL = 7,      /* a system call (version 4 on); addr = bytes it moved, the
                                * record's site names the call (enum kvtSyscall) */
    KVT_MARK_WORK = 8,         /* (version 4 on) of the next access record's gap, addr's low
                                * KVT_WORK_COUNT_BITS bits are instructions of the work kind
                                * in its high bits (enum kvtWork; KVT_WORK_VALUE) */
    KVT_NUM_MARKERS
};

/* --- System calls (a SYSCALL marker's site is named "sys.<call>") -------- */
enum kvtSyscall {
    KVT_SYSCALL_READ = 0,       /* read(2) from a socket: site "sys.read" */
    KVT_SYSCALL_WRITE = 1,      /* write(2) to a socket: site "sys.write" */
    KVT_SYSCALL_EPOLL_WAIT = 2, /* epoll_wait(2) / epoll_pwait(2): site "sys.epoll_wait" */
    KVT_SYSCALL_FILE_READ = 3,  /* read(2) of a file from the page cache: "sys.file_read" */
    KVT_SYSCALL_PAGE_FAULT = 4, /* a minor fault: first touch of a page fresh from the
                                 * kernel, addr = the page's bytes: "sys.page_fault" */
    KVT_NUM_SYSCALLS
};

/* --- Kinds of non-memory work (WORK markers, header "site_kinds") ---------- *
 * A record's gap is retired at the rate of its kind of work: the part a WORK
 * marker before it names at that kind's rate, the rest at its site's kind
 * (header "site_kinds"; a trace without it: every site generic). */
enum kvtWork {
    KVT_WORK_GENERIC = 0, /* control flow, loads' address arithmetic: the default */
    KVT_WORK_HASH = 1,    /* SipHash of keys and fields */
    KVT_WORK_CRC = 2,     /* CRC-64 of snapshot bytes */
    KVT_WORK_COPY = 3,    /* memcpy of keys and values */
    KVT_WORK_COMPARE = 4, /* key comparisons (memcmp) */
    KVT_WORK_PARSE = 5,   /* RESP protocol parsing and reply formatting */
    KVT_WORK_SERVER = 6,  /* (version 5 on) a server's request path around the keyspace:
                           * argv objects and their allocation, call()'s bookkeeping and
                           * clock reads, reply appends (c_ref/callpath.c) */
    KVT_WORK_CRC_STREAMS = 7, /* (version 6 on) the CRC-64's two- and three-stream loop:
                               * independent sums interleaved (c_ref/crc64.c) */
    KVT_WORK_CRC_COMBINE = 8, /* (version 6 on) the CRC-64's join of its streams: matrix
                               * products over GF(2) that branch on the sum's bits */
    KVT_NUM_WORK
};
#define KVT_WORK_COUNT_BITS 48
#define KVT_WORK_VALUE(kind, n) (((uint64_t)(kind) << KVT_WORK_COUNT_BITS) | (uint64_t)(n))

/* --- Structure tags (the header's "tags" list names them) ----------------- */
enum kvtTag {
    KVT_TAG_OTHER = 0,
    KVT_TAG_BUCKET = 1,        /* Valkey hashtable top-level bucket (64 B) */
    KVT_TAG_CHILD_BUCKET = 2,  /* Valkey chained child bucket */
    KVT_TAG_DICT_TABLE = 3,    /* Redis dict bucket-pointer array cell */
    KVT_TAG_DICT_ENTRY = 4,    /* Redis dictEntry / NoValue node */
    KVT_TAG_TABLE_META = 5,    /* the hashtable / dict struct itself */
    KVT_TAG_KEY = 6,           /* key bytes (sds) */
    KVT_TAG_OBJECT = 7,        /* object header (robj / kvobj) */
    KVT_TAG_VALUE = 8,         /* value bytes */
    KVT_TAG_EXPIRE = 9,        /* expire field or expire table */
    KVT_TAG_SLOT_TABLE = 10,   /* cluster per-slot table array */
    KVT_TAG_QUERY_BUF = 11,    /* client query buffer (RESP in) */
    KVT_TAG_REPLY_BUF = 12,    /* client reply buffer (RESP out) */
    KVT_TAG_SNAPSHOT_BUF = 13, /* snapshot read/write buffer */
    KVT_TAG_ARGV = 14,         /* parsed argument vector */
    KVT_TAG_STACK = 15,        /* batch state / locals that spill */
    KVT_NUM_TAGS
};

/* --- Layout ---------------------------------------------------------------- */
typedef struct kvtRecord {
    uint64_t addr;  /* virtual byte address (KVT_MARKER: marker value) */
    uint32_t gap;   /* non-memory instructions since the previous record */
    uint32_t dep;   /* records back to the load whose value produced addr; 0 = none */
    uint16_t size;  /* bytes accessed (KVT_PREFETCH: 1; KVT_MARKER: 0) */
    uint8_t kind;   /* enum kvtKind */
    uint8_t tag;    /* enum kvtTag (or producer-defined, named in the header) */
    uint16_t site;  /* code site id, stands in for the PC; named in the header */
    uint16_t flags; /* KVT_MARKER: enum kvtMarker; otherwise 0 */
} kvtRecord;

static_assert(sizeof(kvtRecord) == 24, "kvtRecord is 24 bytes on every ABI");
static_assert(offsetof(kvtRecord, addr) == 0, "layout");
static_assert(offsetof(kvtRecord, gap) == 8, "layout");
static_assert(offsetof(kvtRecord, dep) == 12, "layout");
static_assert(offsetof(kvtRecord, size) == 16, "layout");
static_assert(offsetof(kvtRecord, kind) == 18, "layout");
static_assert(offsetof(kvtRecord, tag) == 19, "layout");
static_assert(offsetof(kvtRecord, site) == 20, "layout");
static_assert(offsetof(kvtRecord, flags) == 22, "layout");

enum kvtCodec {
    KVT_CODEC_RAW = 0,  /* payload = n_records * 24 bytes */
    KVT_CODEC_ZSTD = 1, /* payload = one zstd frame of n_records * 24 bytes */
    /* payload = one zstd frame of the same bytes in byte planes: byte 0 of
     * every record, then byte 1 of every record, ... byte 23 (version 2 on) */
    KVT_CODEC_ZSTD_PLANES = 2,
};

typedef struct kvtChunkHeader {
    uint32_t magic;        /* KVT_CHUNK_MAGIC */
    uint32_t n_records;    /* 1 .. KVT_MAX_CHUNK_RECORDS */
    uint32_t stored_bytes; /* payload bytes that follow this header */
    uint8_t codec;         /* enum kvtCodec */
    uint8_t reserved[3];   /* zero */
    uint32_t crc32;        /* crc32 of the stored payload bytes */
} kvtChunkHeader;

static_assert(sizeof(kvtChunkHeader) == 20, "chunk header is 20 bytes");

typedef struct kvtEndChunk {
    uint32_t magic;         /* KVT_END_MAGIC */
    uint32_t n_chunks;      /* data chunks before this one */
    uint64_t total_records; /* sum of their n_records */
} kvtEndChunk;

static_assert(sizeof(kvtEndChunk) == 16, "end chunk is 16 bytes");

#endif /* KVSIM_TRACE_FORMAT_H */
