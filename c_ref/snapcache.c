/*
 * snapcache.c -- a file that keeps a load workload's snapshot between runs.
 *
 * The native load workload spends most of a run on setup: it populates a
 * keyspace, SAVEs it, and only then times the loads.  With 16M keys the setup
 * takes several times as long as a timed load, and an experiment that times
 * two variants in many interleaved processes (one process per run, so every
 * round meets a fresh address space) pays it every time.  The snapshot does
 * not depend on the loading variant, so the runs of one configuration can
 * share it:
 *
 *   KVSIM_CREF_SNAPSHOT_CACHE=PATH kvsim-cref native load ...
 *
 * reads the snapshot from PATH if PATH exists, else builds it as usual and
 * writes PATH (a temporary file renamed into place, so a killed run leaves
 * no partial cache).  The file is a one-line header then the snapshot bytes:
 *
 *   kvsim-cref snapshot cache 1 <writer options>\n<snapshot>
 *
 * The header names every option the snapshot's bytes depend on (the writer's
 * keys, sizes, seed, table, layout, cluster mode, rdbchecksum and rehash
 * cron); a file written for other options is refused rather than loaded.  A
 * cached snapshot is byte-identical to the one setup would build (tests/
 * test_cli.sh compares the two runs' results), and the timed loads do not
 * change: they read the same bytes from the same arena buffer.
 *
 * Native runs only: a traced run always builds its snapshot (the trace
 * records no setup, but the hash seeds and arena layout of setup must not
 * depend on a cache's presence).
 */

#include "snapcache.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAGIC "kvsim-cref snapshot cache 1 "

void ksSnapCacheKey(const ksWorkloadSpec *s, char *buf, size_t cap) {
    snprintf(buf, cap,
             "keys=%llu value_size=%u key_size=%u seed=%llu table=%s layout=%s cluster=%d "
             "snapshot_from=%s rdbchecksum=%s activerehashing=%s expire=%d",
             (unsigned long long)s->keys, s->value_size, s->key_size, (unsigned long long)s->seed,
             s->table, s->layout, s->cluster, s->snapshot_from ? s->snapshot_from : "standalone",
             s->rdbchecksum ? s->rdbchecksum : "yes", s->activerehashing ? s->activerehashing : "yes",
             s->expire);
}

/* The one way a read gives up: err names the variable and what is wrong with
 * the file; whatever was opened or allocated is released. */
static int refuse(FILE *f, uint8_t *b, char *err, size_t errlen, const char *fmt, ...) {
    int n = snprintf(err, errlen, "KVSIM_CREF_SNAPSHOT_CACHE: ");
    va_list ap;
    va_start(ap, fmt);
    if (n >= 0 && (size_t)n < errlen) vsnprintf(err + n, errlen - (size_t)n, fmt, ap);
    va_end(ap);
    free(b);
    fclose(f);
    return -1;
}

int ksSnapCacheRead(const char *path, const char *key, uint8_t **out, size_t *outlen, char *err,
                    size_t errlen) {
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    char line[512];
    const size_t magic = strlen(MAGIC), want = magic + strlen(key);
    if (!fgets(line, sizeof(line), f) || strncmp(line, MAGIC, magic) || strlen(line) != want + 1 ||
        line[want] != '\n')
        return refuse(f, NULL, err, errlen, "%s is not a snapshot cache", path);
    if (strncmp(line + magic, key, want - magic))
        return refuse(f, NULL, err, errlen, "%s was written for other options (%.*s)", path,
                      (int)(want - magic), line + magic);
    long start = ftell(f), end = start < 0 || fseek(f, 0, SEEK_END) ? -1 : ftell(f);
    if (end <= start) return refuse(f, NULL, err, errlen, "%s has no snapshot after its header", path);
    size_t len = (size_t)(end - start);
    uint8_t *b = malloc(len);
    if (!b || fseek(f, start, SEEK_SET) || fread(b, 1, len, f) != len)
        return refuse(f, b, err, errlen, "cannot read %s", path);
    fclose(f);
    *out = b;
    *outlen = len;
    return 1;
}

int ksSnapCacheWrite(const char *path, const char *key, const uint8_t *snap, size_t len, char *err,
                     size_t errlen) {
    size_t cap = strlen(path) + 32;
    char *tmp = malloc(cap);
    if (!tmp) abort();
    snprintf(tmp, cap, "%s.tmp.%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "wb");
    int ok = f && fprintf(f, "%s%s\n", MAGIC, key) > 0 && fwrite(snap, 1, len, f) == len;
    if (f && fclose(f)) ok = 0;
    if (!ok || rename(tmp, path)) {
        snprintf(err, errlen, "KVSIM_CREF_SNAPSHOT_CACHE: cannot write %s", path);
        unlink(tmp);
        free(tmp);
        return -1;
    }
    free(tmp);
    return 0;
}
