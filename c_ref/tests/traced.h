/*
 * traced.h -- the traced build of c_ref as the C tests call it: the renamed tr_*
 * entry points of build/traced/core.o (prefix_symbols.sh), a helper that
 * traces one workload into memory, and one that decodes its records.  Test-only; include after emit.h,
 * kvsim_cref.h and workload.h.
 */
#ifndef KS_TESTS_TRACED_H
#define KS_TESTS_TRACED_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int tr_ksWorkloadRun(const ksWorkloadSpec *spec, ksWorkloadResult *res, char *err, size_t errlen);
ksEmitter *tr_ksEmitterOpen(FILE *out, const char *json, uint32_t chunk_records);
int tr_ksEmitterClose(ksEmitter *e);
extern ksEmitter *tr_ksEmitterCurrent;
ksKeyspace *tr_ksCreate(const char *options);
void tr_ksDestroy(ksKeyspace *ks);
int tr_ksExecute(ksKeyspace *ks, const char *variant, const uint8_t *query, size_t len, const uint8_t **reply,
                 size_t *reply_len, size_t *consumed);

/* Run workload `s` in the traced build with an emitter writing `chunk`-record
 * chunks to a temporary file; return the whole .kvt stream (malloc'd, *len
 * bytes), or NULL after saying why on stderr. */
static inline uint8_t *traceTo(const ksWorkloadSpec *s, size_t *len, uint32_t chunk) {
    *len = 0;
    FILE *f = tmpfile();
    ksEmitter *e = f ? tr_ksEmitterOpen(f, "{\"format_version\":1}", chunk) : NULL;
    ksWorkloadResult res;
    char err[256] = "no emitter";
    if (e == NULL || tr_ksWorkloadRun(s, &res, err, sizeof(err))) {
        fprintf(stderr, "workload failed: %s\n", err);
        return NULL;
    }
    tr_ksEmitterClose(e);
    long n = ftell(f);
    rewind(f);
    uint8_t *buf = malloc((size_t)n);
    if (fread(buf, 1, (size_t)n, f) != (size_t)n) return NULL;
    fclose(f);
    *len = (size_t)n;
    return buf;
}

/* The records of a raw trace (formats checked by test_emit.c). */
static inline kvtRecord *records(const uint8_t *b, size_t len, uint64_t *n) {
    uint32_t jl;
    memcpy(&jl, b + 12, 4);
    size_t off = 16 + jl + 4;
    kvtRecord *out = NULL;
    uint64_t total = 0;
    while (off + 4 <= len) {
        uint32_t magic;
        memcpy(&magic, b + off, 4);
        if (magic == KVT_END_MAGIC) break;
        kvtChunkHeader h;
        memcpy(&h, b + off, sizeof(h));
        off += sizeof(h);
        out = realloc(out, sizeof(kvtRecord) * (total + h.n_records));
        memcpy(out + total, b + off, h.stored_bytes);
        total += h.n_records;
        off += h.stored_bytes;
    }
    *n = total;
    return out;
}

#endif /* KS_TESTS_TRACED_H */
