/*
 * emit.c -- trace writer: header, raw chunks with CRC32, end chunk.
 *
 * Stream written (traces/FORMAT.md):
 *
 *   "KVTRACE\0" u16 ver u16 recsize u32 json_len  JSON  u32 crc
 *   { kvtChunkHeader(codec RAW, crc of payload)  n * kvtRecord }*
 *   kvtEndChunk
 *
 * Records are buffered in a chunk-sized array.  A full chunk is handed to a
 * writer thread, which computes its CRC (slice-by-8) and writes it with one
 * fwrite while the traced code fills the second buffer (double buffering), so
 * the keyspace pays only for appending 24-byte records.  Chunks are written in
 * order; the output is identical to a single-threaded writer's.  Only little-endian hosts are supported
 * (static_assert below), so records are written as they lie in memory.
 *
 * Conventions: public ksEmit..., ksEmitter..., ksCrc32; internals static.
 */
#if !defined(_GNU_SOURCE) && !defined(_POSIX_C_SOURCE)
#define _POSIX_C_SOURCE 200809L /* pthread_sigmask under plain -std=c11 */
#endif
#include "emit.h"

#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "trace writer assumes little-endian");

ksEmitter *ksEmitterCurrent = NULL;

const uint16_t ksSiteCost[KS_NUM_SITES] = {
#define KS_SITE_COST(id, name, cost) cost,
    KS_SITES(KS_SITE_COST)
#undef KS_SITE_COST
};

const char *const ksSiteName[KS_NUM_SITES] = {
#define KS_SITE_NAME(id, name, cost) name,
    KS_SITES(KS_SITE_NAME)
#undef KS_SITE_NAME
};

const char *const ksTagName[KVT_NUM_TAGS] = {
    "other", "bucket", "child_bucket", "dict_table", "dict_entry", "table_meta",
    "key", "object", "value", "expire", "slot_table", "query_buf", "reply_buf",
    "snapshot_buf", "argv", "stack",
};

const char *const ksMarkerName[KVT_NUM_MARKERS] = {
    "none", "command", "op", "phase", "warmup_begin", "warmup_end", "batch", "syscall", "work",
};

/*
 * Kinds of work: the kind of non-memory work (enum kvtWork, trace_format.h) of each
 * site's cost (sites.h).
 *
 * The engine retires a record's gap at the rate of its kind of work (sim/MODEL.md): a
 * CPU file gives instructions per cycle per kind (`[work]`, measured by `kvsim calibrate`
 * on c_ref's own kernels).  A site's cost is the common path's instructions between two
 * recorded accesses; most of it is control flow and address arithmetic (generic).  The
 * sites listed here do one kind of work: the query buffer's parse and the reply's
 * formatting (resp.c), the key re-hash (SipHash), fread's refill of its buffer (a copy),
 * the allocator's accesses (libc_alloc.h: the server's, whose instructions are its own).
 * Variable work names its kind at the call (KS_WORK_OF, emit.h); plain KS_WORK is generic.
 *
 * A site not listed is generic (0).  The list is in the trace header ("site_kinds",
 * beside "sites" and "work_kinds"); tests/test_emit.c checks it against the names.
 */
static_assert(KVT_WORK_GENERIC == 0, "an unlisted site is generic");

const uint8_t ksSiteKind[KS_NUM_SITES] = {
    [KS_SITE_RESP_PARSE] = KVT_WORK_PARSE,
    [KS_SITE_RESP_ARGV] = KVT_WORK_PARSE,
    [KS_SITE_RESP_REPLY] = KVT_WORK_PARSE,
    [KS_SITE_KEY_REHASH] = KVT_WORK_HASH,
    [KS_SITE_SNAP_REFILL] = KVT_WORK_COPY,
    [KS_SITE_ALLOC_MALLOC] = KVT_WORK_SERVER,
    [KS_SITE_ALLOC_FREE] = KVT_WORK_SERVER,
    [KS_SITE_ALLOC_USABLE_SIZE] = KVT_WORK_SERVER,
    [KS_SITE_ARGV_OBJ_READ] = KVT_WORK_SERVER,
    [KS_SITE_ARGV_FREE] = KVT_WORK_SERVER,
    [KS_SITE_ARGV_BYTES] = KVT_WORK_PARSE,
};

void ksEmitWorkMarkers(ksEmitter *e, uint16_t site) {
    const uint32_t own = ksSiteKind[site];
    for (uint32_t k = 0; k < KVT_NUM_WORK; k++) {
        const uint64_t n = e->pending_kind[k];
        if (n && k != own)
            ksEmitterMarker(e, KVT_MARK_WORK,
                            KVT_WORK_VALUE(k, n < UINT32_MAX ? n : UINT32_MAX));
        e->pending_kind[k] = 0;
    }
    e->pending_kinds = 0;
}

const char *const ksWorkKindName[KVT_NUM_WORK] = {
    "generic", "hash", "crc", "copy", "compare", "parse", "server", "crc_streams", "crc_combine",
};

/*
 * The stores per instruction of each kind of work of this code (header "work_stores"):
 * the work between two recorded accesses stores too (a copy's stores, spills, the stack,
 * the allocator's bookkeeping), and with a store buffer the engine lets those stores take
 * its entries (sim/MODEL.md section 6, "The work's stores").  Counted natively by
 * callgrind (Dw over Ir of the code of each kind) by `python -m
 * kvsim.experiments.work_stores`, results/work-stores.json; the Python tests check this
 * table against that file.  Decimal text, so that the header's bytes are fixed.
 */
const char *const ksWorkStores[KVT_NUM_WORK] = {
    "0.1449", "0.0099", "0.0083", "0.2226", "0.0000", "0.1383", "0.1501",
    "0.0083", "0.0083", /* crc_streams, crc_combine: crc64.c's code, counted as crc */
};

/* --- CRC32 (zlib polynomial 0xEDB88320), slice-by-8 ------------------------ */

static uint32_t crc_table[8][256];
static int crc_ready;

static void crcInit(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        crc_table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++) {
        for (int t = 1; t < 8; t++) crc_table[t][i] = (crc_table[t - 1][i] >> 8) ^ crc_table[0][crc_table[t - 1][i] & 0xff];
    }
    crc_ready = 1;
}

uint32_t ksCrc32(uint32_t crc, const void *buf, size_t len) {
    if (!crc_ready) crcInit();
    const uint8_t *p = buf;
    uint32_t c = ~crc;
    while (len >= 8) {
        uint32_t lo, hi;
        memcpy(&lo, p, 4);
        memcpy(&hi, p + 4, 4);
        lo ^= c;
        c = crc_table[7][lo & 0xff] ^ crc_table[6][(lo >> 8) & 0xff] ^ crc_table[5][(lo >> 16) & 0xff] ^
            crc_table[4][lo >> 24] ^ crc_table[3][hi & 0xff] ^ crc_table[2][(hi >> 8) & 0xff] ^
            crc_table[1][(hi >> 16) & 0xff] ^ crc_table[0][hi >> 24];
        p += 8;
        len -= 8;
    }
    while (len--) c = crc_table[0][(c ^ *p++) & 0xff] ^ (c >> 8);
    return ~c;
}

/* --- Writer ---------------------------------------------------------------- */

typedef struct writerState {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    kvtRecord *job;   /* chunk being written; NULL = idle */
    uint32_t job_n;
    int quit;
    FILE *out;
    int io_error;
} writerState;

static void putTo(FILE *out, int *err, const void *p, size_t n) {
    if (n && fwrite(p, 1, n, out) != n) *err = 1;
}

static void writeChunk(FILE *out, int *err, const kvtRecord *recs, uint32_t n) {
    kvtChunkHeader h;
    memset(&h, 0, sizeof(h));
    h.magic = KVT_CHUNK_MAGIC;
    h.n_records = n;
    h.stored_bytes = n * (uint32_t)sizeof(kvtRecord);
    h.codec = KVT_CODEC_RAW;
    h.crc32 = ksCrc32(0, recs, h.stored_bytes);
    putTo(out, err, &h, sizeof(h));
    putTo(out, err, recs, h.stored_bytes);
}

static void *writerMain(void *arg) {
    writerState *w = arg;
    pthread_mutex_lock(&w->mu);
    while (1) {
        while (!w->job && !w->quit) pthread_cond_wait(&w->cv, &w->mu);
        if (!w->job) break; /* quit with nothing pending */
        kvtRecord *job = w->job;
        uint32_t n = w->job_n;
        pthread_mutex_unlock(&w->mu);
        int err = 0;
        writeChunk(w->out, &err, job, n);
        pthread_mutex_lock(&w->mu);
        if (err) w->io_error = 1;
        w->job = NULL;
        pthread_cond_broadcast(&w->cv);
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

/* Wait until the writer is idle (its buffer may be reused). */
static void writerWait(writerState *w) {
    pthread_mutex_lock(&w->mu);
    while (w->job) pthread_cond_wait(&w->cv, &w->mu);
    pthread_mutex_unlock(&w->mu);
}

static void put(ksEmitter *e, const void *p, size_t n) { putTo(e->out, &e->io_error, p, n); }

/* Write a trace's header (FORMAT.md: the fixed part, the JSON, their CRC-32) to `out` and start
 * the writer thread `w` on it; -1 (the thread not started, `w`'s lock and condition destroyed)
 * on a write error or when the thread cannot start. */
static int startTrace(ksEmitter *e, writerState *w, FILE *out, const char *json) {
    size_t jl = strlen(json);
    uint8_t fixed[KVT_FIXED_HEADER_LEN];
    memcpy(fixed, KVT_MAGIC, KVT_MAGIC_LEN);
    uint16_t ver = KVT_VERSION, rs = sizeof(kvtRecord);
    uint32_t jlen = (uint32_t)jl;
    memcpy(fixed + 8, &ver, 2);
    memcpy(fixed + 10, &rs, 2);
    memcpy(fixed + 12, &jlen, 4);
    uint32_t crc = ksCrc32(0, fixed, sizeof(fixed));
    crc = ksCrc32(crc, json, jl);
    put(e, fixed, sizeof(fixed));
    put(e, json, jl);
    put(e, &crc, 4);
    w->out = out;
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
    /* the writer blocks every signal (inherited at creation): a traced server's SIGTERM
     * must reach the main thread's epoll_pwait (server_bio.c's workers do the same) */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    int failed = e->io_error || pthread_create(&w->thread, NULL, writerMain, w) != 0;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (failed) {
        pthread_mutex_destroy(&w->mu);
        pthread_cond_destroy(&w->cv);
        return -1;
    }
    return 0;
}

ksEmitter *ksEmitterOpen(FILE *out, const char *json, uint32_t chunk_records) {
    if (chunk_records == 0 || chunk_records > KVT_MAX_CHUNK_RECORDS) chunk_records = KVT_DEFAULT_CHUNK_RECORDS;
    if (!crc_ready) crcInit(); /* before the writer thread can race on the tables */
    ksEmitter *e = calloc(1, sizeof(*e));
    writerState *w = calloc(1, sizeof(*w));
    if (!e || !w) {
        free(e);
        free(w);
        return NULL;
    }
    e->buf = malloc((size_t)chunk_records * sizeof(kvtRecord));
    e->spare = malloc((size_t)chunk_records * sizeof(kvtRecord));
    if (!e->buf || !e->spare) {
        free(e->buf);
        free(e->spare);
        free(e);
        free(w);
        return NULL;
    }
    e->cap = chunk_records;
    e->next_id = 1;
    e->out = out;
    if (startTrace(e, w, out, json) != 0) {
        free(e->buf);
        free(e->spare);
        free(e);
        free(w);
        return NULL;
    }
    e->writer = w;
    ksEmitterCurrent = e;
    return e;
}

/* A forked child's trace (trace --then, workload.c): the emitter's writer thread stayed in
 * the parent, so the child writes through a new one to `out`, after its own header.  Only
 * before any record was written (a setup's compact prefix is emitted after the fork). */
int ksEmitterRetarget(ksEmitter *e, FILE *out, const char *json) {
    if (e->n || e->total_records || e->n_chunks) return -1;
    writerState *w = calloc(1, sizeof(*w));
    if (!w) return -1;
    e->out = out; /* the parent's stream and writer state are left to the parent */
    if (startTrace(e, w, out, json) != 0) {
        free(w);
        return -1;
    }
    e->writer = w;
    return 0;
}

void ksEmitterFlush(ksEmitter *e) {
    if (e->n == 0) return;
    writerState *w = e->writer;
    pthread_mutex_lock(&w->mu);
    while (w->job) pthread_cond_wait(&w->cv, &w->mu);
    w->job = e->buf;
    w->job_n = e->n;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
    kvtRecord *t = e->buf; /* the writer owns the full buffer; fill the spare */
    e->buf = e->spare;
    e->spare = t;
    e->total_records += e->n;
    e->n_chunks++;
    e->n = 0;
}

int ksEmitterClose(ksEmitter *e) {
    if (!e) return -1;
    ksEmitterFlush(e);
    writerState *w = e->writer;
    writerWait(w);
    pthread_mutex_lock(&w->mu);
    w->quit = 1;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
    pthread_join(w->thread, NULL);
    if (w->io_error) e->io_error = 1;
    kvtEndChunk end = {KVT_END_MAGIC, e->n_chunks, e->total_records};
    put(e, &end, sizeof(end));
    if (fflush(e->out) != 0) e->io_error = 1;
    int rc = e->io_error ? -1 : 0;
    if (ksEmitterCurrent == e) ksEmitterCurrent = NULL;
    if (e->release_fn) e->release_fn(e->warmset);
    pthread_mutex_destroy(&w->mu);
    pthread_cond_destroy(&w->cv);
    free(w);
    free(e->buf);
    free(e->spare);
    free(e);
    return rc;
}

void ksEmitPause(void) {
    if (ksEmitterCurrent) ksEmitterCurrent->paused++;
}

void ksEmitResume(void) {
    if (ksEmitterCurrent && ksEmitterCurrent->paused > 0) {
        ksEmitterCurrent->paused--;
        ksEmitClearPending(ksEmitterCurrent); /* work done while paused is not measured */
    }
}

void ksEmitMarker(uint16_t marker, uint64_t value) {
    ksEmitter *e = ksEmitterCurrent;
    if (e == NULL || e->paused) return;
    ksEmitterMarker(e, marker, value);
}

static void emitMarker(ksEmitter *e, uint16_t marker, uint64_t value, uint16_t site) {
    if (marker == KVT_MARK_WARMUP_BEGIN) e->in_warmup = 1;
    if (marker == KVT_MARK_WARMUP_END) e->in_warmup = 0;
    e->next_id++;
    kvtRecord *r = &e->buf[e->n];
    memset(r, 0, sizeof(*r));
    r->addr = value;
    r->kind = KVT_MARKER;
    r->flags = marker;
    r->site = site;
    if (++e->n == e->cap) ksEmitterFlush(e);
}

void ksEmitterMarker(ksEmitter *e, uint16_t marker, uint64_t value) { emitMarker(e, marker, value, 0); }

void ksEmitSyscall(uint16_t site, uint64_t bytes) {
    ksEmitter *e = ksEmitterCurrent;
    if (e == NULL || e->paused) return;
    emitMarker(e, KVT_MARK_SYSCALL, bytes, site); /* the site names the call (FORMAT.md) */
}

