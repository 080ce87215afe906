/*
 * kvt_stat.c -- summary of a raw-chunk .kvt trace (c_ref's output), used by
 * tests/calibrate.sh and the benchmarks.  Verifies the header and chunk CRCs
 * and prints one JSON line:
 *   {"records":N,"mem_records":N,"loads":N,"stores":N,"prefetches":N,"markers":N,
 *    "gap_sum":N,"instructions":N}      instructions = gap_sum + mem_records
 * Records between WARMUP_BEGIN and WARMUP_END are not counted.
 * Usage: kvt_stat FILE|-
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../emit.h"

static void die(const char *m) {
    fprintf(stderr, "kvt_stat: %s\n", m);
    exit(1);
}

static void readAll(FILE *f, void *p, size_t n) {
    if (fread(p, 1, n, f) != n) die("truncated trace");
}

int main(int argc, char **argv) {
    FILE *f = argc > 1 && strcmp(argv[1], "-") ? fopen(argv[1], "rb") : stdin;
    if (!f) die("cannot open");
    uint8_t fixed[16];
    readAll(f, fixed, 16);
    if (memcmp(fixed, KVT_MAGIC, 8)) die("bad magic");
    uint32_t jl;
    memcpy(&jl, fixed + 12, 4);
    char *json = malloc(jl + 4);
    readAll(f, json, jl + 4);
    uint32_t crc = ksCrc32(ksCrc32(0, fixed, 16), json, jl), hc;
    memcpy(&hc, json + jl, 4);
    if (crc != hc) die("header crc mismatch");
    static uint64_t site_n[65536];
    uint64_t records = 0, mem = 0, loads = 0, stores = 0, pf = 0, markers = 0, gap = 0;
    int warm = 0;
    kvtRecord *buf = malloc((size_t)KVT_MAX_CHUNK_RECORDS * sizeof(kvtRecord));
    while (1) {
        uint32_t magic;
        readAll(f, &magic, 4);
        if (magic == KVT_END_MAGIC) {
            kvtEndChunk end;
            end.magic = magic;
            readAll(f, (uint8_t *)&end + 4, sizeof(end) - 4);
            if (end.total_records != records) die("end chunk count mismatch");
            break;
        }
        kvtChunkHeader h;
        h.magic = magic;
        readAll(f, (uint8_t *)&h + 4, sizeof(h) - 4);
        if (h.magic != KVT_CHUNK_MAGIC || h.codec != KVT_CODEC_RAW || h.n_records > KVT_MAX_CHUNK_RECORDS) die("bad chunk");
        readAll(f, buf, h.stored_bytes);
        if (ksCrc32(0, buf, h.stored_bytes) != h.crc32) die("chunk crc mismatch");
        for (uint32_t i = 0; i < h.n_records; i++) {
            const kvtRecord *r = &buf[i];
            records++;
            if (r->kind == KVT_MARKER) {
                markers++;
                if (r->flags == KVT_MARK_WARMUP_BEGIN) warm = 1;
                if (r->flags == KVT_MARK_WARMUP_END) warm = 0;
                continue;
            }
            if (warm) continue;
            mem++;
            gap += r->gap;
            site_n[r->site]++;
            if (r->kind == KVT_LOAD) loads++;
            else if (r->kind == KVT_STORE) stores++;
            else pf++;
        }
    }
    printf("{\"records\":%llu,\"mem_records\":%llu,\"loads\":%llu,\"stores\":%llu,\"prefetches\":%llu,\"markers\":%llu,"
           "\"gap_sum\":%llu,\"instructions\":%llu}\n",
           (unsigned long long)records, (unsigned long long)mem, (unsigned long long)loads, (unsigned long long)stores,
           (unsigned long long)pf, (unsigned long long)markers, (unsigned long long)gap, (unsigned long long)(gap + mem));
    if (argc > 2 && !strcmp(argv[2], "--sites")) {
        for (int s = 0; s < KS_NUM_SITES; s++)
            if (site_n[s]) printf("site %d %s %llu\n", s, ksSiteName[s], (unsigned long long)site_n[s]);
    }
    return 0;
}
