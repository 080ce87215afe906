/*
 * snapshot.c -- SAVE and LOAD of an RDB-like snapshot (format: SNAPSHOT.md).
 *
 *   "KVSNAP" ver:u8x2 | RESIZEDB 0xFB len(n) | { [0xFC i64 ms] 0x00 key value }* | 0xFF crc64:u64
 *   key/value = RDB length encoding + bytes
 *
 * SAVE walks every slot table with a safe iterator that prefetches values,
 * using the `iterate=` variant (Valkey #1568/#1501), and writes records into a
 * snapshot buffer (arena, tag snapshot_buf).  As Valkey's rio, every write
 * folds the bytes it writes into the running checksum first
 * (rioWrite -> rioGenericUpdateChecksum, CRC-64/Jones: crc64.c); with
 * rdbchecksum=no there is no checksum work and the stored checksum is 0.
 *
 * LOAD parses into fresh tables and swaps them in only on success (no partial
 * keyspace).  It reads as Valkey's rdbLoad: rio over a stdio FILE on the file
 * (rio.c: fread, glibc's 4 KiB buffer, read(2) of a memory file), every rioRead
 * passed to rdbLoadProgressCallback, which sums the bytes (rioGenericUpdateChecksum:
 * one update per rioRead call, so the value bytes are checksummed between the key
 * read and the insert) and every 2 MiB records the loading progress.  The sum is
 * compared with the stored one after the EOF opcode, and a mismatch discards the
 * fresh tables.  With rdbchecksum=no nothing is summed or checked; a stored
 * checksum of 0 (a file saved with rdbchecksum=no) is not checked either
 * (rdbLoadRioWithLoadingCtx).  Per key, as rdbLoadRioWithLoadingCtx: read the type
 * (and a pending expire), read the key into a new sds, read the value into a new
 * value object (rdbLoadObject), add the key with the two-phase insert
 * (dbAddRDBLoad: find the position, objectSetKeyAndExpire's new object embedding
 * the key, insert), free the key sds.  Load variants (#2311):
 *
 *   none                 key -> value -> hash+slot -> find position -> insert
 *   prefetch-after-key   key -> hash+slot, prefetch bucket -> value -> insert
 *                        (hash and slot computed once and reused)
 *   prefetch-rehash      key -> hash, prefetch bucket -> value -> hash again
 *                        -> insert (the PR's double hashing)
 *
 * Keys whose expire time is before the logical clock are dropped (a primary
 * loading an RDB).  Conventions: public ks...; static internals.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "keyspace.h"
#include "t_hash.h"
#include "siphash.h"
#include "rio.h"

#define SNAP_MAGIC "KVSNAP"
#define SNAP_VERSION 2
#define OP_STRING 0x00
#define OP_RESIZEDB 0xFB
#define OP_EXPIRETIME_MS 0xFC
#define OP_EOF 0xFF
/* --- Writer ---------------------------------------------------------------- */

typedef struct {
    ksKeyspace *ks;
    uint8_t *buf;
    size_t len, cap;
    uint64_t crc; /* running checksum of every byte written (rdbchecksum=yes) */
} writer;

static void wReserve(writer *w, size_t n) {
    if (w->len + n <= w->cap) return;
    size_t cap = w->cap ? w->cap : 4096;
    while (cap < w->len + n) cap *= 2;
    uint8_t *nb = ksArenaAlloc(w->ks->arena, cap);
    if (w->len) memcpy(nb, w->buf, w->len);
    if (w->buf) ksArenaFree(w->ks->arena, w->buf);
    w->buf = nb;
    w->cap = cap;
}

static void wBytes(writer *w, const void *p, size_t n, uint8_t src_tag, ksLoadId dep) {
    wReserve(w, n);
    if (src_tag && n) (void)KS_LOAD(p, n, src_tag, KS_SITE_SNAP_WRITE, dep);
    if (w->ks->rdbchecksum) { /* rioGenericUpdateChecksum over the source bytes */
        KS_CRC64_WORK(p, n);
        w->crc = ksCrc64(w->crc, p, n);
    }
    memcpy(w->buf + w->len, p, n);
    KS_STORE(w->buf + w->len, n, KVT_TAG_SNAPSHOT_BUF, KS_SITE_SNAP_WRITE, 0);
    (void)src_tag;
    w->len += n;
}

/* RDB length encoding: 00|6 bits, 01|14 bits, 0x80 + u32 BE, 0x81 + u64 BE. */
static void wLen(writer *w, uint64_t len) {
    uint8_t b[9];
    size_t n;
    if (len < (1 << 6)) {
        b[0] = (uint8_t)len;
        n = 1;
    } else if (len < (1 << 14)) {
        b[0] = (uint8_t)(0x40 | (len >> 8));
        b[1] = (uint8_t)len;
        n = 2;
    } else if (len <= UINT32_MAX) {
        b[0] = 0x80;
        for (int i = 0; i < 4; i++) b[1 + i] = (uint8_t)(len >> (24 - 8 * i));
        n = 5;
    } else {
        b[0] = 0x81;
        for (int i = 0; i < 8; i++) b[1 + i] = (uint8_t)(len >> (56 - 8 * i));
        n = 9;
    }
    wBytes(w, b, n, 0, 0);
}

int ksSnapshotSave(ksKeyspace *ks, uint8_t **out, size_t *outlen) {
    writer w = {ks, ks->snap, 0, 0, 0};
    if (ks->snap) w.cap = ksArenaUsableSize(ks->arena, ks->snap);
    uint8_t hdr[8] = {'K', 'V', 'S', 'N', 'A', 'P', 0, SNAP_VERSION};
    wBytes(&w, hdr, sizeof(hdr), 0, 0);
    uint8_t op = OP_RESIZEDB;
    wBytes(&w, &op, 1, 0, 0);
    wLen(&w, ks->nkeys);
    for (int slot = 0; slot < ks->nslots; slot++) {
        void *t = ks->slots[slot];
        if (!t) continue;
        ksTableIter it;
        void *entry;
        ks->ops->iterInit(&it, t, KS_ITER_SAFE | KS_ITER_PREFETCH_VALUES, ks->var.iterate);
        while (ks->ops->iterNext(&it, &entry)) {
            ksLoadId kd = 0, vd = 0;
            /* The object pointer came from the bucket (cell, node) just read. */
            KS_ID_VAR(ed) = KS_TAKE_ENTRY_DEP();
            sds k = ksEntryGetKey(ks, entry, ed, &kd);
            if (ksEntryType(ks, entry) != OBJ_STRING) { /* RDB_TYPE_HASH: not modelled */
                ks->ops->iterReset(&it);
                snprintf(ks->err, sizeof(ks->err), "SAVE: key '%.64s' holds a hash; snapshots model strings only", k);
                return -1;
            }
            int64_t when;
            if (ks->layout == KS_LAYOUT_UNIFIED) {
                when = ksEntryGetExpireField(entry);
            } else {
                ksKeyInfo ki = {.key = k, .slot = slot};
                int has = ks->expires && ks->expires[slot] && hashtableSize(ks->expires[slot]);
                ki.hash = has ? ksSiphash(k, sdslen(k), ks->sipkey) : 0;
                when = has ? ksDbGetExpire(ks, &ki, entry) : -1;
            }
            if (when >= 0) {
                uint8_t e[9];
                e[0] = OP_EXPIRETIME_MS;
                memcpy(e + 1, &when, 8);
                wBytes(&w, e, 9, 0, 0);
            }
            op = OP_STRING;
            wBytes(&w, &op, 1, 0, 0);
            size_t klen = sdslen(k), vlen;
            wLen(&w, klen);
            wBytes(&w, k, klen, KVT_TAG_KEY, kd);
            const uint8_t *v = ksEntryGetValue(ks, entry, ed, &vlen, &vd);
            wLen(&w, vlen);
            wBytes(&w, v, vlen, KVT_TAG_VALUE, vd);
        }
        ks->ops->iterReset(&it);
    }
    op = OP_EOF;
    wBytes(&w, &op, 1, 0, 0);
    /* The checksum itself, little-endian (memrev64ifbe), is not summed:
     * rdbSaveRio writes it with the update function still set, but the sum
     * was taken before. */
    uint64_t crc = w.crc;
    int sum = ks->rdbchecksum;
    ks->rdbchecksum = 0;
    wBytes(&w, &crc, 8, 0, 0);
    ks->rdbchecksum = sum;
    ks->snap = w.buf;
    ks->snap_len = w.len;
    *out = w.buf;
    *outlen = w.len;
    return 0;
}

/* --- Reader ---------------------------------------------------------------- */

/* The load reads through rio (rio.c): every read is a rioRead -> fread on a FILE over
 * the snapshot image, with rdbLoadProgressCallback as the checksum function, as
 * rdbLoadRioWithLoadingCtx sets it (update_cksum, max_processing_chunk).  Small fields
 * (type byte, length, expire, checksum) are read into r->scratch (the callers'
 * locals), keys and values straight into the sds and object that will hold them. */

/* loadingAbsProgress (Valkey server.c): the loaded bytes and the peak of used memory
 * (zmalloc_used_memory: the arena's allocated bytes). */
static void loadingAbsProgress(ksRio *r, size_t pos) {
    r->srv.loading_loaded_bytes = pos;
    uint64_t used = ksArenaAllocatedBytes(r->ks->arena);
    (void)KS_LOAD(&r->srv.stat_peak_memory, 8, KVT_TAG_OTHER, KS_SITE_RIO_LOADING, 0);
    if (r->srv.stat_peak_memory < used) r->srv.stat_peak_memory = used;
    KS_STORE(&r->srv.loading_loaded_bytes, 24, KVT_TAG_OTHER, KS_SITE_RIO_LOADING, 0);
}

/* rdbLoadProgressCallback (Valkey rdb.c), rio's update_cksum during a load: the
 * checksum (rdbchecksum=yes), then, when this read crosses a multiple of
 * loading_process_events_interval_bytes, the loading progress.  Valkey then also serves
 * events (processEventsWhileBlocked, module progress events): no event loop here. */
static void rdbLoadProgressCallback(ksRio *r, const void *buf, size_t len) {
    (void)KS_LOAD(&r->srv, 16, KVT_TAG_OTHER, KS_SITE_RIO_PROGRESS, 0);
    if (r->srv.rdb_checksum) ksRioGenericUpdateChecksum(r, buf, len);
    size_t iv = r->srv.loading_process_events_interval_bytes;
    if (iv && (r->processed_bytes + len) / iv > r->processed_bytes / iv) loadingAbsProgress(r, r->processed_bytes);
}

/* rioRead of len bytes into buf (tag: its trace tag); a read past the end of the file
 * is "snapshot truncated" (checked first: a corrupt length allocates nothing). */
static int rRead(ksRio *r, void *buf, size_t len, uint8_t tag) {
    if (len > r->size - r->processed_bytes || !ksRioRead(r, buf, len, tag)) {
        r->err = "snapshot truncated";
        return -1;
    }
    return 0;
}

/* rdbLoadType: one byte. */
static int rByte(ksRio *r, uint8_t *b) {
    if (rRead(r, r->scratch, 1, KVT_TAG_STACK)) return -1;
    *b = r->scratch[0];
    return 0;
}

/* rdbLoadLenByRef: the first byte, then the rest of a 14-, 32- or 64-bit length. */
static int rLen(ksRio *r, uint64_t *len) {
    uint8_t b;
    if (rByte(r, &b)) return -1;
    int type = b >> 6;
    if (type == 0) {
        *len = b & 0x3f;
        return 0;
    }
    if (type == 1) {
        if (rRead(r, r->scratch + 1, 1, KVT_TAG_STACK)) return -1;
        *len = ((uint64_t)(b & 0x3f) << 8) | r->scratch[1];
        return 0;
    }
    int n = b == 0x80 ? 4 : b == 0x81 ? 8 : 0;
    if (n == 0) {
        r->err = "snapshot corrupt: bad length encoding";
        return -1;
    }
    if (rRead(r, r->scratch + 8, (size_t)n, KVT_TAG_STACK)) return -1;
    uint64_t v = 0;
    for (int i = 0; i < n; i++) v = (v << 8) | r->scratch[8 + i];
    *len = v;
    return 0;
}

/* A string's length, checked against what the file holds before anything is
 * allocated for it. */
static int rStringLen(ksRio *r, uint64_t *len) {
    if (rLen(r, len)) return -1;
    if (*len > r->size - r->processed_bytes) {
        r->err = "snapshot truncated";
        return -1;
    }
    return 0;
}

/* Parse and insert every key into ks's (fresh) tables; -1 with r->err.
 * Valkey's order per key (keyspace-facts §5):
 *
 *   read the type | rdbGenericLoadStringObject(RDB_LOAD_SDS): a new sds, the key read
 *   into it | [prefetch] | rdbLoadObject: tryCreateStringObject(SDS_NOINIT), the value
 *   read into it | expired? drop | dbAddRDBLoad: slot, FindPositionForInsert (hash,
 *   bucket), objectSetKeyAndExpire (a new object embedding the key; EMBSTR: the value
 *   copied, RAW: its sds taken over; the old object freed), InsertAtPosition | sdsfree
 *   of the key
 *
 * Each read's bytes are summed by the progress callback as rioRead passes them. */
static int loadRecords(ksKeyspace *ks, ksRio *r) {
    uint8_t op;
    int64_t expire = -1;
    sds keybuf = NULL;
    robj *vobj = NULL;
    uint64_t nread = 0;
    int rc = -1;
    if (rByte(r, &op)) goto done;
    if (op == OP_RESIZEDB) {
        uint64_t n;
        if (rLen(r, &n)) goto done;
        /* A size hint, bounded by the keys the rest of the snapshot can hold (each takes
         * at least 3 bytes: opcode, key length, value length), so that a corrupt hint
         * cannot make the load allocate a table of any size. */
        if (n > (uint64_t)(r->size - r->processed_bytes) / 3) n = (uint64_t)(r->size - r->processed_bytes) / 3;
        if (!ks->cluster && n > 0 && n < (1ULL << 40)) ks->ops->expand(ksDbTableForWrite(ks, 0), (size_t)n);
        if (rByte(r, &op)) goto done;
    }
    for (;; ) {
        if (op == OP_EOF) break;
        if (op == OP_EXPIRETIME_MS) { /* rdbLoadMillisecondTime */
            if (rRead(r, r->scratch + 8, 8, KVT_TAG_STACK)) goto done;
            memcpy(&expire, r->scratch + 8, 8);
            if (rByte(r, &op)) goto done;
            if (op != OP_STRING) {
                r->err = "snapshot corrupt: expire not followed by a key";
                goto done;
            }
            continue;
        }
        if (op != OP_STRING) {
            r->err = "snapshot corrupt: unknown record type";
            goto done;
        }
        KS_MARK(KVT_MARK_OP, nread++);
        /* (4) the key: a new sds (sdstrynewlen(SDS_NOINIT)), read into. */
        uint64_t klen, vlen;
        if (rStringLen(r, &klen)) goto done;
        if (klen > 512u * 1024 * 1024) {
            r->err = "snapshot corrupt: key too long";
            goto done;
        }
        int ktype = sdsReqType(klen);
        void *kmem = ksArenaAlloc(ks->arena, sdsSize(ktype, klen));
        keybuf = sdsNoInitAt(kmem, ktype, klen, klen);
        KS_STORE(kmem, sdsHdrSize(ktype), KVT_TAG_ARGV, KS_SITE_SNAP_READ, 0);
        if (klen && rRead(r, keybuf, klen, KVT_TAG_ARGV)) goto done;
        ksKeyInfo ki;
        memset(&ki, 0, sizeof(ki));
        if (ks->var.load.prefetch_after_key) {
            /* #2311: hash and slot now, prefetch the bucket the insert will use. */
            ksKeyResolve(ks, keybuf, &ki);
            /* A missing slot table has no bucket to prefetch; it is created by
             * the insert (never for a key dropped as expired). */
            if (ki.table) ks->ops->prefetchBucket(ki.table, ki.hash);
        }
        /* (5) rdbLoadObject: the value object, read into.  This (and the checksum
         * of the key) is the work a prefetch issued after the key overlaps with. */
        if (rStringLen(r, &vlen)) goto done;
        vobj = ksStringObjectCreateNoInit(ks, (size_t)vlen);
        if (vlen && rRead(r, vobj->ptr, vlen, KVT_TAG_VALUE)) goto done;

        if (expire >= 0 && ksEntryIsExpired(ks, expire)) {
            ksStringObjectFree(ks, vobj);
            vobj = NULL;
            ksArenaFree(ks->arena, sdsAllocPtr(keybuf));
            keybuf = NULL;
            expire = -1;
            if (rByte(r, &op)) goto done;
            continue;
        }
        /* (6) dbAddRDBLoad: hash and slot (again, for prefetch-rehash), find
         * the position, embed the key, insert. */
        if (!ks->var.load.prefetch_after_key || ks->var.load.rehash_on_insert) ksKeyResolve(ks, keybuf, &ki);
        void *t = ksDbTableForWrite(ks, ki.slot);
        ksInsertPos pos;
        void *existing;
        if (!ks->ops->findPositionForInsert(t, keybuf, ki.hash, &pos, &existing)) {
            r->err = "snapshot corrupt: duplicate key";
            goto done;
        }
        void *entry = ksEntrySetKeyAndExpire(ks, vobj, keybuf, klen, ks->layout == KS_LAYOUT_UNIFIED ? expire : -1);
        vobj = NULL;
        ks->ops->insertAtPosition(t, entry, &pos);
        ks->nkeys++;
        ksDbKeyCountAdd(ks, ki.slot, 1);
        if (expire >= 0 && ks->layout == KS_LAYOUT_LEGACY) ksDbSetExpire(ks, &ki, entry, expire);
        expire = -1;
        /* (7) free the key sds (the entry holds its own copy). */
        ksArenaFree(ks->arena, sdsAllocPtr(keybuf));
        keybuf = NULL;
        if (rByte(r, &op)) goto done;
    }
    if (r->size - r->processed_bytes != 8) {
        r->err = r->size - r->processed_bytes < 8 ? "snapshot truncated" : "snapshot corrupt: bytes after the checksum";
        goto done;
    }
    /* The sum of every byte read (header to EOF opcode) against the stored
     * one; a stored 0 means "saved without a checksum" and is not checked. */
    uint64_t crc, expected = r->cksum;
    size_t crc_at = r->processed_bytes; /* a mismatch names the checksum's offset */
    if (rRead(r, r->scratch + 8, 8, KVT_TAG_STACK)) goto done;
    memcpy(&crc, r->scratch + 8, 8);
    if (r->srv.rdb_checksum && crc != 0 && crc != expected) {
        r->processed_bytes = crc_at;
        r->err = "snapshot corrupt or truncated: checksum mismatch";
        goto done;
    }
    rc = 0;
done:
    (void)nread;
    if (vobj) ksStringObjectFree(ks, vobj);
    if (keybuf) ksArenaFree(ks->arena, sdsAllocPtr(keybuf));
    return rc;
}

int ksSnapshotLoad(ksKeyspace *ks, const uint8_t *buf, size_t len) {
    if (len < 8 + 1 + 8 || memcmp(buf, SNAP_MAGIC, 6) != 0) {
        snprintf(ks->err, sizeof(ks->err), len < 17 ? "snapshot truncated" : "snapshot corrupt: bad magic");
        if (len >= 6 && memcmp(buf, SNAP_MAGIC, 6) != 0) snprintf(ks->err, sizeof(ks->err), "snapshot corrupt: bad magic");
        return -1;
    }
    if (buf[6] != 0 || buf[7] != SNAP_VERSION) {
        snprintf(ks->err, sizeof(ks->err), "snapshot: unsupported version %u", buf[7]);
        return -1;
    }
    /* rdbLoad: the file opened for rio (rio.c). */
    ksRio *r = ksRioOpen(ks, buf, len);
    if (!r) {
        snprintf(ks->err, sizeof(ks->err), "snapshot: cannot open a file to read it from: %s", strerror(errno));
        return -1;
    }
    /* Parse into fresh tables, summing as we read; swap in on success only
     * (a checksum mismatch at the end discards them like any other error). */
    void **old_slots = ks->slots;
    hashtable **old_expires = ks->expires;
    uint64_t old_nkeys = ks->nkeys;
    uint64_t *old_bit = ks->slot_bit; /* cluster: the key-count tree is swapped too */
    if (old_bit) ks->slot_bit = ksArenaCalloc(ks->arena, sizeof(uint64_t) * ((size_t)ks->nslots + 1));
    ks->slots = ksArenaCalloc(ks->arena, sizeof(void *) * (size_t)ks->nslots);
    ks->expires = NULL;
    ks->nkeys = 0;
    /* rdbLoadRioWithLoadingCtx sets the progress callback as the checksum function
     * and its interval as the largest read; startLoading's state.  The CRC is the
     * last 8 bytes; loadRecords checks they are all that is left. */
    r->srv.rdb_checksum = ks->rdbchecksum;
    r->srv.loading_process_events_interval_bytes = KS_RIO_LOADING_INTERVAL;
    r->srv.loading_total_bytes = len;
    r->update_cksum = rdbLoadProgressCallback;
    r->max_processing_chunk = r->srv.loading_process_events_interval_bytes;
    /* magic and version, checked above; read (and summed) as Valkey reads them */
    int rc = rRead(r, r->scratch, 8, KVT_TAG_STACK);
    if (rc == 0) rc = loadRecords(ks, r);
    const char *rerr = r->err;
    size_t at = r->processed_bytes;
    ksRioClose(r);
    void **new_slots = ks->slots;
    hashtable **new_expires = ks->expires;
    uint64_t *new_bit = ks->slot_bit;
    if (rc) {
        ksDbFlush(ks);
        ksArenaFree(ks->arena, new_slots);
        if (new_bit) ksArenaFree(ks->arena, new_bit);
        ks->slot_bit = old_bit;
        ks->slots = old_slots;
        ks->expires = old_expires;
        ks->nkeys = old_nkeys;
        snprintf(ks->err, sizeof(ks->err), "%s (at byte %zu)", rerr ? rerr : "snapshot corrupt", at);
        return -1;
    }
    (void)new_expires;
    ks->slots = old_slots;
    ks->expires = old_expires;
    ks->slot_bit = old_bit;
    ksDbFlush(ks);
    ksArenaFree(ks->arena, old_slots);
    if (old_bit) ksArenaFree(ks->arena, old_bit);
    ks->slot_bit = new_bit;
    ks->slots = new_slots;
    ks->expires = new_expires;
    uint64_t n = 0;
    for (int s = 0; s < ks->nslots; s++)
        if (ks->slots[s]) n += ks->ops->size(ks->slots[s]);
    ks->nkeys = n;
    return 0;
}
