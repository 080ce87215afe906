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
 * keyspace).  As Valkey's rio, every read updates the running checksum over the
 * bytes it consumed (rioGenericUpdateChecksum: one update per rioRead call, so
 * the value bytes are checksummed between the key read and the insert); the
 * sum is compared with the stored one after the EOF opcode, and a mismatch
 * discards the fresh tables.  With rdbchecksum=no nothing is summed or
 * checked; a stored checksum of 0 (a file saved with rdbchecksum=no) is not
 * checked either (rdbLoadRioWithLoadingCtx).  Per key, as rdbLoadRioWithLoadingCtx: read the
 * type (and a pending expire), read the key, read the value (rdbLoadObject
 * builds the value object), add the key with the two-phase insert
 * (dbAddRDBLoad: find the position, embed the key, insert).  Load variants
 * (#2311):
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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "keyspace.h"
#include "t_hash.h"
#include "siphash.h"

#define SNAP_MAGIC "KVSNAP"
#define SNAP_VERSION 2
#define OP_STRING 0x00
#define OP_RESIZEDB 0xFB
#define OP_EXPIRETIME_MS 0xFC
#define OP_EOF 0xFF
/* Instructions of one ksCrc64 call (crcspeed's slice-by-8) over n bytes at p,
 * measured with callgrind (-O2, x86-64): CRC64_CALL per call, CRC64_WORD per
 * aligned 8-byte word, CRC64_BYTE per byte before the first aligned word and
 * after the last.  The loader and the writer sum every read or write
 * separately (1-byte type and length reads included), so the per-call part
 * matters. */
#define CRC64_CALL 26
#define CRC64_WORD 31
#define CRC64_BYTE 9
static inline uint64_t crc64Cost(const void *p, size_t n) {
    size_t head = (8 - ((uintptr_t)p & 7)) & 7;
    if (head > n) head = n;
    size_t words = (n - head) >> 3, tail = (n - head) & 7;
    return CRC64_CALL + (uint64_t)words * CRC64_WORD + (uint64_t)(head + tail) * CRC64_BYTE;
}

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
        KS_WORK_EXACT_OF(KVT_WORK_CRC, crc64Cost(p, n));
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

/* Valkey loads through rio's file backend (rioInitWithFile): every rioRead is
 * an fread on a stdio FILE, whose buffer of st_blksize bytes (RIO_STDIO_BUF)
 * glibc refills with one read() when a request finds it empty; a request of a
 * whole block or more beyond what is buffered is read straight into the
 * destination.  The reader follows that: the snapshot image (ks->snap, tag
 * snapshot_buf) stands for the file's page-cache pages, read only by refills
 * and by such direct reads, each one read() (rFileRead: the call's marker, the
 * kernel's store into the stdio buffer or the destination); every
 * other read is served from the stdio buffer
 * (an arena block, tag snapshot_buf), which stays cache-resident. */
#define RIO_STDIO_BUF 4096

typedef struct {
    const uint8_t *p, *end, *base; /* position in the file image, its end and start */
    const char *err;
    uint64_t crc; /* running checksum of every byte consumed so far */
    int sum;      /* rdbchecksum=yes */
    ksArena *arena;
    uint8_t *sb;        /* the stdio buffer: file bytes [win, win + wlen) */
    const uint8_t *win; /* file position of sb[0] */
    size_t wlen;
    uint8_t *tmp; /* a read spanning a refill, assembled (see rGet) */
    size_t tcap;
} reader;

/* rioGenericUpdateChecksum: fold the n bytes one read consumed into the sum. */
static inline void rSum(reader *r, const uint8_t *p, size_t n) {
    if (!r->sum) return;
    KS_WORK_EXACT_OF(KVT_WORK_CRC, crc64Cost(p, n));
    r->crc = ksCrc64(r->crc, p, n);
}

/* One read() of n bytes of the file at r->p into dst, traced as the kernel's
 * call (traces/FORMAT.md "System calls"): a SYSCALL marker sys.file_read with
 * its bytes, then the STORE of them into dst, at the call's site (no user
 * instructions: the copy is the kernel's, in the call's cost).  The page-cache
 * pages the kernel copies from (the image's lines) are not in the trace: their
 * reading is part of the call's cost per byte, as a socket's buffers are for
 * sys.read. */
static void rFileRead(reader *r, uint8_t *dst, size_t n) {
    KS_SYSCALL(KS_SITE_SYS_FILE_READ, n);
    memcpy(dst, r->p, n);
    KS_STORE(dst, n, KVT_TAG_SNAPSHOT_BUF, KS_SITE_SYS_FILE_READ, 0);
}

/* glibc's refill: read() the next block of the file into the stdio buffer. */
static void rRefill(reader *r) {
    size_t n = (size_t)(r->end - r->p) < RIO_STDIO_BUF ? (size_t)(r->end - r->p) : RIO_STDIO_BUF;
    rFileRead(r, r->sb, n);
    r->win = r->p;
    r->wlen = n;
}

/* fread(n bytes): a pointer to them, valid until the next call (-1 if the
 * file has fewer).  Inside the buffered window: into the stdio buffer, no
 * copy (the caller's read of it is fread's copy).  Otherwise the request is
 * assembled in `tmp`, as fread fills its destination: the buffered part, then
 * whole blocks straight from the file, then a refill for the tail (the
 * caller then reads `tmp`: one more copy than Valkey, which reads into the
 * object, for the requests that span a refill). */
static int rGet(reader *r, size_t n, const uint8_t **out) {
    if ((size_t)(r->end - r->p) < n) {
        r->err = "snapshot truncated";
        return -1;
    }
    if (r->wlen == 0 || r->p >= r->win + r->wlen) {
        if (n < RIO_STDIO_BUF) rRefill(r); /* empty buffer, small request: refill */
    }
    if (r->wlen && r->p >= r->win && r->p + n <= r->win + r->wlen) {
        *out = r->sb + (r->p - r->win);
        r->p += n;
        return 0;
    }
    if (r->tcap < n) {
        if (r->tmp) ksArenaFree(r->arena, r->tmp);
        r->tcap = n < 64 ? 64 : n;
        r->tmp = ksArenaAlloc(r->arena, r->tcap);
    }
    size_t got = 0;
    if (r->wlen && r->p >= r->win && r->p < r->win + r->wlen) { /* the buffered part */
        got = (size_t)(r->win + r->wlen - r->p);
        const uint8_t *src = r->sb + (r->p - r->win);
        (void)KS_LOAD(src, got, KVT_TAG_SNAPSHOT_BUF, KS_SITE_SNAP_READ, 0);
        memcpy(r->tmp, src, got);
        KS_STORE(r->tmp, got, KVT_TAG_SNAPSHOT_BUF, KS_SITE_SNAP_READ, 0);
        r->p += got;
    }
    size_t direct = (n - got) / RIO_STDIO_BUF * RIO_STDIO_BUF; /* whole blocks: no buffer */
    if (direct) {
        rFileRead(r, r->tmp + got, direct);
        r->p += direct;
        got += direct;
        r->wlen = 0;
    }
    if (got < n) { /* the tail: refill, copy */
        rRefill(r);
        size_t k = n - got;
        (void)KS_LOAD(r->sb, k, KVT_TAG_SNAPSHOT_BUF, KS_SITE_SNAP_READ, 0);
        memcpy(r->tmp + got, r->sb, k);
        KS_STORE(r->tmp + got, k, KVT_TAG_SNAPSHOT_BUF, KS_SITE_SNAP_READ, 0);
        r->p += k;
    }
    *out = r->tmp;
    return 0;
}

static int rByte(reader *r, uint8_t *b) {
    const uint8_t *p;
    if (rGet(r, 1, &p)) return -1;
    (void)KS_LOAD(p, 1, KVT_TAG_SNAPSHOT_BUF, KS_SITE_SNAP_READ, 0);
    rSum(r, p, 1);
    *b = *p;
    return 0;
}

static int rLen(reader *r, uint64_t *len) {
    uint8_t b;
    if (rByte(r, &b)) return -1;
    int type = b >> 6;
    if (type == 0) {
        *len = b & 0x3f;
        return 0;
    }
    if (type == 1) {
        uint8_t b2;
        if (rByte(r, &b2)) return -1;
        *len = ((uint64_t)(b & 0x3f) << 8) | b2;
        return 0;
    }
    int n = b == 0x80 ? 4 : b == 0x81 ? 8 : 0;
    if (n == 0) {
        r->err = "snapshot corrupt: bad length encoding";
        return -1;
    }
    const uint8_t *p;
    if (rGet(r, (size_t)n, &p)) return -1;
    (void)KS_LOAD(p, (size_t)n, KVT_TAG_SNAPSHOT_BUF, KS_SITE_SNAP_READ, 0);
    rSum(r, p, (size_t)n);
    uint64_t v = 0;
    for (int i = 0; i < n; i++) v = (v << 8) | p[i];
    *len = v;
    return 0;
}

/* A length-prefixed string: *s points at its bytes (rGet: valid until the
 * next read).  The caller records the read of the bytes (KS_LOAD) and then
 * sums them (rSum), as rioRead copies and then updates the checksum. */
static int rString(reader *r, const uint8_t **s, uint64_t *len) {
    if (rLen(r, len)) return -1;
    if ((uint64_t)(r->end - r->p) < *len) {
        r->err = "snapshot truncated";
        return -1;
    }
    return rGet(r, (size_t)*len, s);
}

/* Parse and insert every key into ks's (fresh) tables; -1 with r->err.
 * Valkey's order per key (keyspace-facts §5), for the unified layout:
 *
 *   read key sds | [prefetch] | rdbLoadObject: value object, bytes summed |
 *   expired? drop | dbAddRDBLoad: slot, FindPositionForInsert (hash, bucket) |
 *   objectSetKeyAndExpire (EMBSTR value: a new object embedding key and value;
 *   RAW: a new object taking over the value sds) | InsertAtPosition | free key sds
 *
 * For RAW values and the legacy layout the entry (key copy, value object) is
 * built before the find: the value bytes are copied once, as rioRead does, and
 * only the 16-byte robj that objectSetKeyAndExpire replaces is not modelled. */
static int loadRecords(ksKeyspace *ks, reader *r) {
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
        if (n > (uint64_t)(r->end - r->p) / 3) n = (uint64_t)(r->end - r->p) / 3;
        if (!ks->cluster && n > 0 && n < (1ULL << 40)) ks->ops->expand(ksDbTableForWrite(ks, 0), (size_t)n);
        if (rByte(r, &op)) goto done;
    }
    for (;; ) {
        if (op == OP_EOF) break;
        if (op == OP_EXPIRETIME_MS) {
            const uint8_t *p;
            if (rGet(r, 8, &p)) goto done;
            (void)KS_LOAD(p, 8, KVT_TAG_SNAPSHOT_BUF, KS_SITE_SNAP_READ, 0);
            memcpy(&expire, p, 8);
            rSum(r, p, 8);
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
        /* (4) read the key into a new sds (rdbGenericLoadStringObject,
         * RDB_LOAD_SDS), then sum it. */
        const uint8_t *k, *v;
        uint64_t klen, vlen;
        if (rString(r, &k, &klen)) goto done;
        if (klen > 512u * 1024 * 1024) {
            r->err = "snapshot corrupt: key too long";
            goto done;
        }
        int ktype = sdsReqType(klen);
        void *kmem = ksArenaAlloc(ks->arena, sdsSize(ktype, klen));
        (void)KS_LOAD(k, klen, KVT_TAG_SNAPSHOT_BUF, KS_SITE_SNAP_READ, 0);
        keybuf = sdsWriteAt(kmem, ktype, k, klen, klen);
        KS_STORE(keybuf, klen, KVT_TAG_ARGV, KS_SITE_SNAP_READ, 0);
        rSum(r, (const uint8_t *)keybuf, klen);
        ksKeyInfo ki;
        memset(&ki, 0, sizeof(ki));
        if (ks->var.load.prefetch_after_key) {
            /* #2311: hash and slot now, prefetch the bucket the insert will use. */
            ksKeyResolve(ks, keybuf, &ki);
            /* A missing slot table has no bucket to prefetch; it is created by
             * the insert (never for a key dropped as expired). */
            if (ki.table) ks->ops->prefetchBucket(ki.table, ki.hash);
        }
        /* (5) rdbLoadObject: read the value into a new value object, then sum
         * it.  This (and the checksum of the key) is the work a prefetch
         * issued after the key overlaps with. */
        if (rString(r, &v, &vlen)) goto done;
        (void)KS_LOAD(v, vlen, KVT_TAG_SNAPSHOT_BUF, KS_SITE_SNAP_READ, 0);
        int embstr = ks->layout == KS_LAYOUT_UNIFIED && vlen <= KS_EMBSTR_LIMIT;
        void *entry = NULL;
        if (embstr) {
            vobj = ksStringObjectCreate(ks, v, (size_t)vlen); /* EMBSTR */
            rSum(r, (const uint8_t *)vobj->ptr, vlen);
        } else {
            entry = ksEntryCreate(ks, keybuf, klen, v, vlen, ks->layout == KS_LAYOUT_UNIFIED ? expire : -1);
            rSum(r, v, vlen);
        }

        if (expire >= 0 && ksEntryIsExpired(ks, expire)) {
            if (entry) ksEntryFree(ks, entry);
            if (vobj) ksArenaFree(ks->arena, vobj);
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
            if (entry) ksEntryFree(ks, entry);
            r->err = "snapshot corrupt: duplicate key";
            goto done;
        }
        if (embstr) {
            /* objectSetKeyAndExpire on an EMBSTR value: a new object with key
             * (and expire) embedded, the value copied; the old one is freed. */
            (void)KS_LOAD(vobj, sizeof(robj) + 3 + vlen + 1, KVT_TAG_OBJECT, KS_SITE_OBJ_CREATE_STORE, 0);
            entry = ksEntryCreate(ks, keybuf, klen, (const uint8_t *)vobj->ptr, vlen, expire);
            ksArenaFree(ks->arena, vobj);
            vobj = NULL;
        }
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
    if (r->end - r->p != 8) {
        r->err = r->end - r->p < 8 ? "snapshot truncated" : "snapshot corrupt: bytes after the checksum";
        goto done;
    }
    /* The sum of every byte read (header to EOF opcode) against the stored
     * one; a stored 0 means "saved without a checksum" and is not checked. */
    uint64_t crc;
    const uint8_t *cp, *crc_at = r->p; /* a mismatch names the checksum's offset */
    if (rGet(r, 8, &cp)) goto done;
    (void)KS_LOAD(cp, 8, KVT_TAG_SNAPSHOT_BUF, KS_SITE_SNAP_READ, 0);
    memcpy(&crc, cp, 8);
    if (r->sum && crc != 0 && crc != r->crc) {
        r->p = crc_at;
        r->err = "snapshot corrupt or truncated: checksum mismatch";
        goto done;
    }
    rc = 0;
done:
    (void)nread;
    if (vobj) ksArenaFree(ks->arena, vobj);
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
    /* The CRC is the last 8 bytes; loadRecords checks they are all that is left. */
    reader r = {buf, buf + len, buf, NULL, 0, ks->rdbchecksum, ks->arena, NULL, NULL, 0, NULL, 0};
    r.sb = ksArenaAlloc(ks->arena, RIO_STDIO_BUF);
    const uint8_t *hp;
    rGet(&r, 8, &hp); /* len >= 17 */
    (void)KS_LOAD(hp, 8, KVT_TAG_SNAPSHOT_BUF, KS_SITE_SNAP_READ, 0);
    rSum(&r, hp, 8); /* magic and version, read by the header check */
    int rc = loadRecords(ks, &r);
    ksArenaFree(ks->arena, r.sb);
    if (r.tmp) ksArenaFree(ks->arena, r.tmp);
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
        snprintf(ks->err, sizeof(ks->err), "%s (at byte %zu)", r.err ? r.err : "snapshot corrupt",
                 (size_t)(r.p - buf));
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
