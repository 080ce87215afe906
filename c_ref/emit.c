/*
 * emit.c -- trace writer: header, raw chunks with CRC32, end chunk.
 *
 * Stream written (traces/FORMAT.md):
 *
 *   "KVTRACE\0" u16 ver u16 recsize u32 json_len  JSON  u32 crc
 *   { kvtChunkHeader(codec RAW, crc of payload)  n * kvtRecord }*
 *   kvtEndChunk
 *
 * Records are buffered in one chunk-sized array and written with a single
 * fwrite per chunk; the CRC is slice-by-8 (about 1 byte/cycle), so tracing
 * costs a few nanoseconds per record.  Only little-endian hosts are supported
 * (static_assert below), so records are written as they lie in memory.
 *
 * Conventions: public ksEmit..., ksEmitter..., ksCrc32; internals static.
 */
#include "emit.h"

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
    "none", "command", "op", "phase", "warmup_begin", "warmup_end", "batch",
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

static void put(ksEmitter *e, const void *p, size_t n) {
    if (n && fwrite(p, 1, n, e->out) != n) e->io_error = 1;
}

ksEmitter *ksEmitterOpen(FILE *out, const char *json, uint32_t chunk_records) {
    if (chunk_records == 0 || chunk_records > KVT_MAX_CHUNK_RECORDS) chunk_records = KVT_DEFAULT_CHUNK_RECORDS;
    ksEmitter *e = calloc(1, sizeof(*e));
    if (!e) return NULL;
    e->buf = malloc((size_t)chunk_records * sizeof(kvtRecord));
    if (!e->buf) {
        free(e);
        return NULL;
    }
    e->cap = chunk_records;
    e->next_id = 1;
    e->out = out;
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
    if (e->io_error) {
        free(e->buf);
        free(e);
        return NULL;
    }
    ksEmitterCurrent = e;
    return e;
}

void ksEmitterFlush(ksEmitter *e) {
    if (e->n == 0) return;
    kvtChunkHeader h;
    memset(&h, 0, sizeof(h));
    h.magic = KVT_CHUNK_MAGIC;
    h.n_records = e->n;
    h.stored_bytes = e->n * (uint32_t)sizeof(kvtRecord);
    h.codec = KVT_CODEC_RAW;
    h.crc32 = ksCrc32(0, e->buf, h.stored_bytes);
    put(e, &h, sizeof(h));
    put(e, e->buf, h.stored_bytes);
    e->total_records += e->n;
    e->n_chunks++;
    e->n = 0;
}

int ksEmitterClose(ksEmitter *e) {
    if (!e) return -1;
    ksEmitterFlush(e);
    kvtEndChunk end = {KVT_END_MAGIC, e->n_chunks, e->total_records};
    put(e, &end, sizeof(end));
    if (fflush(e->out) != 0) e->io_error = 1;
    int rc = e->io_error ? -1 : 0;
    if (ksEmitterCurrent == e) ksEmitterCurrent = NULL;
    free(e->buf);
    free(e);
    return rc;
}

void ksEmitPause(void) {
    if (ksEmitterCurrent) ksEmitterCurrent->paused++;
}

void ksEmitResume(void) {
    if (ksEmitterCurrent && ksEmitterCurrent->paused > 0) {
        ksEmitterCurrent->paused--;
        ksEmitterCurrent->pending_gap = 0; /* work done while paused is not measured */
    }
}

void ksEmitMarker(uint16_t marker, uint64_t value) {
    ksEmitter *e = ksEmitterCurrent;
    if (e == NULL || e->paused) return;
    if (marker == KVT_MARK_WARMUP_BEGIN) e->in_warmup = 1;
    if (marker == KVT_MARK_WARMUP_END) e->in_warmup = 0;
    e->next_id++;
    kvtRecord *r = &e->buf[e->n];
    memset(r, 0, sizeof(*r));
    r->addr = value;
    r->kind = KVT_MARKER;
    r->flags = marker;
    if (++e->n == e->cap) ksEmitterFlush(e);
}
