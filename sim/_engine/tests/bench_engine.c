/*
 * bench_engine.c -- the engine without Python: random 8-byte loads over a
 * footprint, through the 48 KiB / 2 MiB / 32 MiB LRU hierarchy of sim/bench.py.
 * Prints records per second of wall time and of process CPU time (the sum over
 * the threads: with threads > 1 it measures the work, wall time the speed).
 *
 *   make bench-c                                  (builds build/bench_engine)
 *   build/bench_engine [footprint_bytes] [timing 0|1] [records]
 *   build/bench_engine FILE.raw [timing 0|1]      (records as a raw kvtRecord array,
 *                                                  e.g. numpy's recs.tofile(path))
 *   KVSIM_THREADS=N build/bench_engine ...        (the engine's threads, default 1)
 *   KVSIM_CHUNK=R build/bench_engine ...          (records per kvsimRun call, default 65536)
 *   KVSIM_CONFIG=F build/bench_engine FILE.raw     (the hierarchy from F, a kvsimConfig's
 *                                                  bytes, e.g. a preset's from sim/bench.py's
 *                                                  engine_config_bytes; its timing flag holds
 *                                                  and the timing argument is ignored)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../engine.h"

static double now(clockid_t id) {
    struct timespec t;
    clock_gettime(id, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    const char *path = argc > 1 && (argv[1][0] < '0' || argv[1][0] > '9') ? argv[1] : NULL;
    uint64_t foot = argc > 1 && !path ? strtoull(argv[1], NULL, 10) : (1ULL << 30);
    int timing = argc > 2 ? atoi(argv[2]) : 0;
    size_t n = argc > 3 ? strtoull(argv[3], NULL, 10) : 4000000;
    kvsimConfig c;
    memset(&c, 0, sizeof c);
    c.nlevels = 3;
    c.line_bits = 6;
    const uint32_t sets[3] = {64, 2048, 32768}, ways[3] = {12, 16, 16};
    const uint32_t lat[3] = {5, 16, 60}, mshrs[3] = {16, 48, 0};
    for (int k = 0; k < 3; k++) {
        c.level[k].sets = sets[k];
        c.level[k].ways = ways[k];
        c.level[k].latency = lat[k];
        c.level[k].mshrs = mshrs[k];
        strcpy(c.level[k].policy, "lru");
    }
    c.timing = (uint32_t)timing;
    c.threads = getenv("KVSIM_THREADS") ? (uint32_t)atoi(getenv("KVSIM_THREADS")) : 1;
    c.width = 6;
    c.rob = 512;
    c.dram_latency = 300;
    const char *cfg_path = getenv("KVSIM_CONFIG");
    if (cfg_path) {
        FILE *cf = fopen(cfg_path, "rb");
        if (!cf || fread(&c, 1, sizeof c, cf) != sizeof c || fgetc(cf) != EOF) {
            fprintf(stderr, "%s: not a kvsimConfig of %zu bytes\n", cfg_path, sizeof c);
            return 1;
        }
        fclose(cf);
        timing = (int)c.timing;
    }
    char err[200];
    kvsimSim *s = kvsimCreate(&c, err, sizeof err);
    if (!s) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    kvtRecord *r;
    if (path) {
        FILE *fp = fopen(path, "rb");
        if (!fp || fseek(fp, 0, SEEK_END) != 0) {
            perror(path);
            return 1;
        }
        n = (size_t)ftell(fp) / sizeof *r;
        rewind(fp);
        r = calloc(n ? n : 1, sizeof *r);
        if (fread(r, sizeof *r, n, fp) != n) {
            perror(path);
            return 1;
        }
        fclose(fp);
    } else {
        r = calloc(n, sizeof *r);
    }
    uint64_t x = 88172645463325252ULL;
    for (size_t i = 0; i < n && !path; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        r[i].addr = (x % foot) & ~7ULL;
        r[i].size = 8;
    }
    const size_t chunk = getenv("KVSIM_CHUNK") ? strtoull(getenv("KVSIM_CHUNK"), NULL, 10) : 65536;
    const double w0 = now(CLOCK_MONOTONIC), c0 = now(CLOCK_PROCESS_CPUTIME_ID);
    for (size_t i = 0; i < n; i += chunk) kvsimRun(s, r + i, n - i < chunk ? n - i : chunk);
    const double wall = now(CLOCK_MONOTONIC) - w0, cpu = now(CLOCK_PROCESS_CPUTIME_ID) - c0;
    char what[300];
    if (path)
        snprintf(what, sizeof what, "%s", path);
    else
        snprintf(what, sizeof what, "footprint %llu B", (unsigned long long)foot);
    printf("%s, %s, %u thread(s): %.2f M records/s (wall), %.2f (CPU time)\n", what,
           timing ? "timing" : "functional", c.threads ? c.threads : 1, (double)n / wall / 1e6,
           (double)n / cpu / 1e6);
    kvsimFree(s);
    free(r);
    return 0;
}
