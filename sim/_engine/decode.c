/*
 * decode.c -- a .kvt chunk's payload checked and decoded in compiled code:
 * CRC32, zstd (the system's libzstd.so.1, opened at first use), and the
 * record rules of traces/FORMAT.md.  The API and the division of work with
 * the Python reader are in decode.h.
 */
#include "decode.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

/* --- CRC32 ------------------------------------------------------------------------ */

/* Slicing by 8 (eight bytes per step through eight 256-entry tables), the
 * reflected IEEE polynomial of zlib's crc32. */
static uint32_t crc_tab[8][256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

static void crcInit(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        crc_tab[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++)
            crc_tab[t][i] = (crc_tab[t - 1][i] >> 8) ^ crc_tab[0][crc_tab[t - 1][i] & 0xff];
}

uint32_t kvsimCrc32Tables(uint32_t crc, const void *buf, size_t len) {
    pthread_once(&crc_once, crcInit);
    const uint8_t *p = buf;
    uint32_t c = ~crc;
    while (len && ((uintptr_t)p & 7)) {
        c = crc_tab[0][(c ^ *p++) & 0xff] ^ (c >> 8);
        len--;
    }
    while (len >= 8) {
        uint64_t w;
        memcpy(&w, p, 8); /* little-endian hosts (the format's byte order) */
        uint32_t lo = (uint32_t)w ^ c, hi = (uint32_t)(w >> 32);
        c = crc_tab[7][lo & 0xff] ^ crc_tab[6][(lo >> 8) & 0xff] ^ crc_tab[5][(lo >> 16) & 0xff] ^
            crc_tab[4][lo >> 24] ^ crc_tab[3][hi & 0xff] ^ crc_tab[2][(hi >> 8) & 0xff] ^
            crc_tab[1][(hi >> 16) & 0xff] ^ crc_tab[0][hi >> 24];
        p += 8;
        len -= 8;
    }
    while (len--) c = crc_tab[0][(c ^ *p++) & 0xff] ^ (c >> 8);
    return ~c;
}

/* zlib's crc32 computes several words at a time from zlib 1.2.12 on (its
 * "braided" CRC), faster than the table loop above; every chunk of a trace
 * is checked, so the intake takes it where the system has it. */
typedef unsigned long (*ZlibCrcFn)(unsigned long crc, const unsigned char *buf, unsigned len);
static ZlibCrcFn zlib_crc;
static pthread_once_t zlib_once = PTHREAD_ONCE_INIT;

static void zlibOpen(void) {
    void *h = dlopen("libz.so.1", RTLD_NOW | RTLD_LOCAL);
    if (h != NULL) zlib_crc = (ZlibCrcFn)dlsym(h, "crc32");
}

uint32_t kvsimCrc32(uint32_t crc, const void *buf, size_t len) {
    pthread_once(&zlib_once, zlibOpen);
    if (zlib_crc == NULL) return kvsimCrc32Tables(crc, buf, len);
    const unsigned char *p = buf;
    unsigned long c = crc;
    while (len) { /* zlib takes an unsigned length */
        const unsigned n = len > (1u << 30) ? 1u << 30 : (unsigned)len;
        c = zlib_crc(c, p, n);
        p += n;
        len -= n;
    }
    return (uint32_t)c;
}

/* --- Byte planes (KVT_CODEC_ZSTD_PLANES) ------------------------------------------ */

/* A chunk's records as 24 byte planes: planes[j * n + i] is byte j of record
 * i.  Most planes of a trace are nearly constant (a kind, a tag, the high
 * bytes of nearby addresses, zero flags), so zstd turns them into long
 * matches and stores only the varying planes as literals: a smaller payload
 * that decompresses several times faster than the records' own bytes. */
#define PLANE_BYTES ((size_t)sizeof(kvtRecord))
static_assert(sizeof(kvtRecord) == 24, "24 byte planes");

#if defined(__SSE2__)
/* Eight records' 8-byte columns at byte offset `col` (src: the first of them)
 * into four vectors, each two columns of the eight records (the 8x8 byte
 * transpose: interleaving bytes, pairs and quads). */
static inline void splitEightRecords(const uint8_t *src, size_t col, __m128i c[4]) {
    __m128i r[8], a[4], b[4];
    for (int k = 0; k < 8; k++) r[k] = _mm_loadl_epi64((const __m128i *)(src + k * PLANE_BYTES + col));
    for (int k = 0; k < 4; k++) a[k] = _mm_unpacklo_epi8(r[2 * k], r[2 * k + 1]);
    b[0] = _mm_unpacklo_epi16(a[0], a[1]); /* records 0..3, columns 0..3 */
    b[1] = _mm_unpackhi_epi16(a[0], a[1]); /* records 0..3, columns 4..7 */
    b[2] = _mm_unpacklo_epi16(a[2], a[3]); /* records 4..7, columns 0..3 */
    b[3] = _mm_unpackhi_epi16(a[2], a[3]);
    c[0] = _mm_unpacklo_epi32(b[0], b[2]); /* columns 0, 1 */
    c[1] = _mm_unpackhi_epi32(b[0], b[2]); /* columns 2, 3 */
    c[2] = _mm_unpacklo_epi32(b[1], b[3]); /* columns 4, 5 */
    c[3] = _mm_unpackhi_epi32(b[1], b[3]); /* columns 6, 7 */
}
#endif

/* Records per block of the vector split: a block's records stay in the host's
 * L1 while its eight planes of one column group are written, so at most eight
 * store streams are open at once (the planes lie n bytes apart, so with n a
 * multiple of 4 KiB every plane's line maps to the same L1 set, and 24 open
 * streams would evict one another). */
#define SPLIT_BLOCK 256

void kvsimPlanesSplit(const kvtRecord *recs, size_t n, uint8_t *planes) {
    const uint8_t *src = (const uint8_t *)recs;
    size_t i = 0;
#if defined(__SSE2__)
    for (; i + 16 <= n; i += SPLIT_BLOCK) {
        const size_t end = i + SPLIT_BLOCK <= n ? i + SPLIT_BLOCK : n & ~(size_t)15;
        for (size_t col = 0; col < PLANE_BYTES; col += 8)
            for (size_t k = i; k < end; k += 16) {
                const uint8_t *s0 = src + k * PLANE_BYTES;
                __m128i lo[4], hi[4]; /* records k..k+7 and k+8..k+15 */
                splitEightRecords(s0, col, lo);
                splitEightRecords(s0 + 8 * PLANE_BYTES, col, hi);
                for (int q = 0; q < 4; q++) {
                    _mm_storeu_si128((__m128i *)(planes + (col + 2 * q) * n + k),
                                     _mm_unpacklo_epi64(lo[q], hi[q]));
                    _mm_storeu_si128((__m128i *)(planes + (col + 2 * q + 1) * n + k),
                                     _mm_unpackhi_epi64(lo[q], hi[q]));
                }
            }
        if (end < i + SPLIT_BLOCK) {
            i = end;
            break;
        }
    }
#endif
    for (; i < n; i++)
        for (size_t j = 0; j < PLANE_BYTES; j++) planes[j * n + i] = src[i * PLANE_BYTES + j];
}

#if defined(__SSE2__)
/* Eight planes of 16 records (p[0..7], each 16 bytes: plane k's bytes of the
 * records) into the records' 8-byte columns at byte offset `col`: three rounds
 * of interleaving take bytes to pairs, quads and eights, each holding two
 * records' eight bytes. */
static inline void joinEight(const uint8_t *const *p, size_t i, uint8_t *dst, size_t col) {
    __m128i a[8], b[8], c[8];
    for (int k = 0; k < 8; k += 2) {
        const __m128i x = _mm_loadu_si128((const __m128i *)(p[k] + i));
        const __m128i y = _mm_loadu_si128((const __m128i *)(p[k + 1] + i));
        a[k] = _mm_unpacklo_epi8(x, y); /* records 0..7: bytes k, k+1 */
        a[k + 1] = _mm_unpackhi_epi8(x, y); /* records 8..15 */
    }
    for (int h = 0; h < 2; h++) { /* h: records 0..7 or 8..15 */
        b[4 * h + 0] = _mm_unpacklo_epi16(a[0 + h], a[2 + h]); /* 4 records, bytes 0..3 */
        b[4 * h + 1] = _mm_unpackhi_epi16(a[0 + h], a[2 + h]);
        b[4 * h + 2] = _mm_unpacklo_epi16(a[4 + h], a[6 + h]); /* bytes 4..7 */
        b[4 * h + 3] = _mm_unpackhi_epi16(a[4 + h], a[6 + h]);
    }
    for (int q = 0; q < 4; q++) { /* q: records 4q .. 4q+3 */
        const int h = q / 2, lohi = q % 2;
        c[2 * q] = _mm_unpacklo_epi32(b[4 * h + lohi], b[4 * h + 2 + lohi]);
        c[2 * q + 1] = _mm_unpackhi_epi32(b[4 * h + lohi], b[4 * h + 2 + lohi]);
    }
    for (int r = 0; r < 8; r++) { /* c[r]: records 2r and 2r+1 */
        _mm_storel_epi64((__m128i *)(dst + (2 * r) * PLANE_BYTES + col), c[r]);
        _mm_storel_epi64((__m128i *)(dst + (2 * r + 1) * PLANE_BYTES + col),
                         _mm_unpackhi_epi64(c[r], c[r]));
    }
}
#endif

void kvsimPlanesJoin(const uint8_t *planes, size_t n, kvtRecord *recs) {
    uint8_t *dst = (uint8_t *)recs;
    size_t i = 0;
#if defined(__SSE2__)
    const uint8_t *p[PLANE_BYTES];
    for (size_t j = 0; j < PLANE_BYTES; j++) p[j] = planes + j * n;
    for (; i + 16 <= n; i += 16) {
        uint8_t *d = dst + i * PLANE_BYTES;
        joinEight(p, i, d, 0);
        joinEight(p + 8, i, d, 8);
        joinEight(p + 16, i, d, 16);
    }
#endif
    for (; i < n; i++)
        for (size_t j = 0; j < PLANE_BYTES; j++) dst[i * PLANE_BYTES + j] = planes[j * n + i];
}

/* Each decoding thread's buffer for a chunk's planes, grown as needed and
 * freed when the thread ends. */
static pthread_key_t scratch_key;
static pthread_once_t scratch_once = PTHREAD_ONCE_INIT;
typedef struct Scratch {
    size_t cap;
    uint8_t *buf;
} Scratch;

static void scratchFree(void *p) {
    Scratch *sc = p;
    free(sc->buf);
    free(sc);
}

static void scratchInit(void) { (void)pthread_key_create(&scratch_key, scratchFree); }

static uint8_t *scratch(size_t len) {
    pthread_once(&scratch_once, scratchInit);
    Scratch *sc = pthread_getspecific(scratch_key);
    if (sc == NULL) {
        sc = calloc(1, sizeof *sc);
        if (sc == NULL || pthread_setspecific(scratch_key, sc) != 0) {
            free(sc);
            return NULL;
        }
    }
    if (sc->cap < len) {
        uint8_t *b = realloc(sc->buf, len);
        if (b == NULL) return NULL;
        sc->buf = b;
        sc->cap = len;
    }
    return sc->buf;
}

/* --- zstd, opened at first use --------------------------------------------------- */

/* The few functions of zstd's stable API (zstd.h) used here. */
typedef size_t (*ZstdDecompressFn)(void *dst, size_t cap, const void *src, size_t len);
typedef unsigned (*ZstdIsErrorFn)(size_t code);
typedef size_t (*ZstdFrameSizeFn)(const void *src, size_t len);
typedef unsigned long long (*ZstdContentSizeFn)(const void *src, size_t len);

static struct {
    ZstdDecompressFn decompress;      /* ZSTD_decompress */
    ZstdIsErrorFn is_error;           /* ZSTD_isError */
    ZstdFrameSizeFn frame_size;       /* ZSTD_findFrameCompressedSize */
    ZstdContentSizeFn content_size;   /* ZSTD_getFrameContentSize */
    int ok;
} zstd;
static pthread_once_t zstd_once = PTHREAD_ONCE_INIT;

static void zstdOpen(void) {
    void *h = dlopen("libzstd.so.1", RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) return;
    zstd.decompress = (ZstdDecompressFn)dlsym(h, "ZSTD_decompress");
    zstd.is_error = (ZstdIsErrorFn)dlsym(h, "ZSTD_isError");
    zstd.frame_size = (ZstdFrameSizeFn)dlsym(h, "ZSTD_findFrameCompressedSize");
    zstd.content_size = (ZstdContentSizeFn)dlsym(h, "ZSTD_getFrameContentSize");
    zstd.ok = zstd.decompress && zstd.is_error && zstd.frame_size && zstd.content_size;
}

int kvsimDecodeHasZstd(void) {
    pthread_once(&zstd_once, zstdOpen);
    return zstd.ok;
}

/* kvsimDecodePayload, and kvsimDecodeChecked's local check when v is set. */
static int decodeChunk(const void *payload, size_t stored, uint32_t codec, uint32_t crc, void *out,
                       size_t raw_len, uint32_t *crc_out, const kvsimValidator *v, uint64_t base,
                       uint64_t *loads, kvsimChunkCheck *chk) {
    const size_t n = raw_len / sizeof(kvtRecord);
    uint32_t c = kvsimCrc32(0, payload, stored);
    if (crc_out) *crc_out = c;
    if (c != crc) return KVSIM_DEC_CRC;
    uint8_t *dst = out;
    if (codec == KVT_CODEC_RAW) {
        if (stored != raw_len) return KVSIM_DEC_CODEC;
        memcpy(out, payload, raw_len);
    } else {
        if (codec != KVT_CODEC_ZSTD && codec != KVT_CODEC_ZSTD_PLANES) return KVSIM_DEC_CODEC;
        if (!kvsimDecodeHasZstd()) return KVSIM_DEC_NO_ZSTD;
        /* exactly one frame, covering the whole payload, that states its content size
         * as raw_len (the Python reader's decompressobj accepts nothing else either; any
         * doubt goes back to it for the wording) */
        size_t fs = zstd.frame_size(payload, stored);
        if (zstd.is_error(fs) || fs != stored) return KVSIM_DEC_ZSTD;
        if (zstd.content_size(payload, stored) != (unsigned long long)raw_len)
            return KVSIM_DEC_ZSTD;
        /* planes: the planes, then the screen's two bits per record */
        const size_t bits = v ? 2 * ((n + 63) / 64) * sizeof(uint64_t) : 0;
        if (codec == KVT_CODEC_ZSTD_PLANES && (dst = scratch(raw_len + bits)) == NULL)
            return KVSIM_DEC_MEMORY;
        size_t got = zstd.decompress(dst, raw_len, payload, stored);
        if (zstd.is_error(got) || got != raw_len) return KVSIM_DEC_ZSTD;
    }
    if (codec == KVT_CODEC_ZSTD_PLANES && v)
        kvsimValidatePlanes(v, dst, n, base, out, loads, chk, (uint64_t *)(dst + raw_len));
    else if (codec == KVT_CODEC_ZSTD_PLANES)
        kvsimPlanesJoin(dst, n, (kvtRecord *)out);
    else if (v)
        kvsimValidateLocal(v, out, n, base, loads, chk);
    return KVSIM_DEC_OK;
}

int kvsimDecodePayload(const void *payload, size_t stored, uint32_t codec, uint32_t crc,
                       void *out, size_t raw_len, uint32_t *crc_out) {
    return decodeChunk(payload, stored, codec, crc, out, raw_len, crc_out, NULL, 0, NULL, NULL);
}

int kvsimDecodeChecked(const void *payload, size_t stored, uint32_t codec, uint32_t crc,
                       void *out, size_t raw_len, uint32_t *crc_out, const kvsimValidator *v,
                       uint64_t base, uint64_t *loads, kvsimChunkCheck *c) {
    return decodeChunk(payload, stored, codec, crc, out, raw_len, crc_out, v, base, loads, c);
}

/* --- Record rules ------------------------------------------------------------------ */

/* The kinds of the last KVT_DEP_CHECK_WINDOW records accepted, one bit each
 * (1: a load), in a ring indexed by trace index mod the window, so the memory
 * is fixed whatever the trace's length.  A dep naming a record of the array
 * being checked reads that record's kind; one naming an earlier record reads
 * the ring, which still holds it (it is at most W back); the ring takes an
 * array's bits only once the whole array is accepted. */
#define DEP_WORDS (KVT_DEP_CHECK_WINDOW / 64)
static_assert(KVT_DEP_CHECK_WINDOW % 64 == 0 &&
                  (KVT_DEP_CHECK_WINDOW & (KVT_DEP_CHECK_WINDOW - 1)) == 0,
              "the dep window is a power of two of whole words");

struct kvsimValidator {
    int64_t n_tags, n_sites; /* -1: the header names none */
    uint32_t n_markers;
    uint16_t warmup_next;  /* the warm-up marker expected next */
    uint64_t records;      /* accepted so far */
    uint64_t loads[DEP_WORDS]; /* bit g mod W: trace record g is a load (for dep) */
};

kvsimValidator *kvsimValidatorCreate(int64_t n_tags, int64_t n_sites, uint32_t n_markers) {
    kvsimValidator *v = calloc(1, sizeof *v);
    if (v == NULL) return NULL;
    v->n_tags = n_tags;
    v->n_sites = n_sites;
    v->n_markers = n_markers < KVT_NUM_MARKERS ? n_markers : KVT_NUM_MARKERS;
    v->warmup_next = KVT_MARK_WARMUP_BEGIN;
    return v;
}

void kvsimValidatorFree(kvsimValidator *v) { free(v); }

uint64_t kvsimValidatorRecords(const kvsimValidator *v) { return v->records; }

size_t kvsimValidatorBytes(const kvsimValidator *v) { return v ? sizeof *v : 0; }

/* Was trace record p (one of the last KVT_DEP_CHECK_WINDOW accepted) a load? */
static inline int ringLoad(const kvsimValidator *v, uint64_t p) {
    return (int)((v->loads[(p & (KVT_DEP_CHECK_WINDOW - 1)) >> 6] >> (p & 63)) & 1);
}

/* The first rule record recs[i] (trace index base + i) breaks, or
 * KVSIM_NRULES; warm-up aside.  A dep naming a record before the array is
 * looked up in v's ring, or, when `defer` (a constant in each copy), left to
 * the ordered part: *cross is set and the record passes here. */
static inline __attribute__((always_inline)) uint32_t
brokenRule(const kvsimValidator *v, const kvtRecord *recs, size_t i, uint64_t base,
           const int defer, int *cross) {
    const kvtRecord *r = &recs[i];
    const uint64_t g = base + i;
    const uint32_t kind = r->kind;
    if (kind >= KVT_NUM_KINDS) return KVSIM_RULE_KIND;
    const int access = kind < KVT_MARKER, marker = kind == KVT_MARKER;
    if (kind < KVT_PREFETCH && r->size == 0) return KVSIM_RULE_SIZE_ACCESS;
    if (kind == KVT_PREFETCH && r->size != 1) return KVSIM_RULE_SIZE_PREFETCH;
    if (marker && r->size != 0) return KVSIM_RULE_SIZE_MARKER;
    if (access && r->flags != 0) return KVSIM_RULE_FLAGS_ACCESS;
    if (marker && r->flags >= v->n_markers) return KVSIM_RULE_FLAGS_MARKER;
    if (marker && r->dep != 0) return KVSIM_RULE_DEP_MARKER;
    if (access && r->addr > UINT64_MAX - ((uint64_t)(r->size ? r->size : 1) - 1))
        return KVSIM_RULE_ADDR_WRAP;
    if (v->n_tags >= 0 && (int64_t)r->tag >= v->n_tags) return KVSIM_RULE_TAG;
    if (v->n_sites >= 0 && (int64_t)r->site >= v->n_sites) return KVSIM_RULE_SITE;
    if (access && r->dep != 0) {
        if (r->dep > g) return KVSIM_RULE_DEP_BEFORE;
        if (r->dep <= KVT_DEP_CHECK_WINDOW) {
            const uint64_t p = g - r->dep;
            if (p < base && defer) {
                *cross = 1;
                return KVSIM_NRULES;
            }
            const int load = p >= base ? recs[p - base].kind == KVT_LOAD : ringLoad(v, p);
            if (!load) return KVSIM_RULE_DEP_NOT_LOAD;
        }
    }
    return KVSIM_NRULES;
}

static void setError(kvsimRecordError *err, const kvtRecord *r, size_t i, uint64_t g,
                     uint32_t rule) {
    err->index = i;
    err->rule = rule;
    err->pad = 0;
    err->dep = r->dep;
    err->named = rule == KVSIM_RULE_DEP_NOT_LOAD ? g - r->dep : 0;
}

/* The warm-up rule: *wnext is the warm-up marker expected next. */
static inline int warmupOutOfTurn(const kvtRecord *r, uint16_t *wnext) {
    if (r->kind != KVT_MARKER ||
        (r->flags != KVT_MARK_WARMUP_BEGIN && r->flags != KVT_MARK_WARMUP_END))
        return 0;
    if (r->flags != *wnext) return 1;
    *wnext = *wnext == KVT_MARK_WARMUP_BEGIN ? KVT_MARK_WARMUP_END : KVT_MARK_WARMUP_BEGIN;
    return 0;
}

/* The ring takes the kinds of an accepted array's last W records (trace
 * indices base .. base + n - 1), from `loads` (bit i: record i is a load). */
static void ringTake(kvsimValidator *v, uint64_t base, size_t n, const uint64_t *loads) {
    for (size_t i = n > KVT_DEP_CHECK_WINDOW ? n - KVT_DEP_CHECK_WINDOW : 0; i < n;) {
        const uint64_t slot = (base + i) & (KVT_DEP_CHECK_WINDOW - 1);
        const uint32_t off = (uint32_t)(slot & 63);
        size_t len = 64 - off; /* to the end of the ring's word */
        if (len > n - i) len = n - i;
        const uint32_t s = (uint32_t)(i & 63);
        uint64_t bits = loads[i >> 6] >> s;
        if (s && s + len > 64) bits |= loads[(i >> 6) + 1] << (64 - s);
        const uint64_t mask = len == 64 ? ~0ULL : ((1ULL << len) - 1) << off;
        v->loads[slot >> 6] = (v->loads[slot >> 6] & ~mask) | ((bits << off) & mask);
        i += len;
    }
}

/* Bit i of loads[]: recs[i] is a load. */
static void loadBits(const kvtRecord *recs, size_t n, uint64_t *loads) {
    for (size_t w = 0; w * 64 < n; w++) {
        const size_t lim = n - w * 64 < 64 ? n - w * 64 : 64;
        uint64_t bits = 0;
        for (size_t b = 0; b < lim; b++)
            bits |= (uint64_t)(recs[w * 64 + b].kind == KVT_LOAD) << b;
        loads[w] = bits;
    }
}

int kvsimValidate(kvsimValidator *v, const kvtRecord *recs, size_t n, kvsimRecordError *err) {
    const uint64_t base = v->records;
    uint16_t wnext = v->warmup_next;
    for (size_t i = 0; i < n; i++) {
        int cross = 0;
        uint32_t rule = brokenRule(v, recs, i, base, 0, &cross);
        if (rule == KVSIM_NRULES && warmupOutOfTurn(&recs[i], &wnext)) rule = KVSIM_RULE_WARMUP;
        if (rule != KVSIM_NRULES) {
            setError(err, &recs[i], i, base + i, rule);
            return 1;
        }
    }
    /* accepted: the ring takes the kinds of the array's last W records */
    uint64_t word[1];
    for (size_t i = n > KVT_DEP_CHECK_WINDOW ? n - KVT_DEP_CHECK_WINDOW : 0; i < n; i += 64) {
        const size_t len = n - i < 64 ? n - i : 64;
        loadBits(recs + i, len, word);
        ringTake(v, base + i, len, word);
    }
    v->warmup_next = wnext;
    v->records = base + n;
    return 0;
}

static void checkInit(kvsimChunkCheck *c, size_t n, uint64_t base) {
    c->base = base;
    c->n = n;
    c->bad = n;
    c->rule = KVSIM_NRULES;
    c->pad = 0;
    c->join_end = 0;
}

/* The local part of the check for recs[i], exactly: 1 if it breaks a rule
 * (noted in c), else 0, with c->join_end moved past it if the ordered part
 * must look at it. */
static inline int settleLocal(const kvsimValidator *v, const kvtRecord *recs, size_t i,
                              uint64_t base, kvsimChunkCheck *c) {
    int cross = 0;
    const uint32_t rule = brokenRule(v, recs, i, base, 1, &cross);
    if (rule != KVSIM_NRULES) {
        c->bad = i;
        c->rule = rule;
        return 1;
    }
    if (cross || (recs[i].kind == KVT_MARKER && (recs[i].flags == KVT_MARK_WARMUP_BEGIN ||
                                                 recs[i].flags == KVT_MARK_WARMUP_END)))
        c->join_end = i + 1;
    return 0;
}

void kvsimValidateLocal(const kvsimValidator *v, const kvtRecord *recs, size_t n, uint64_t base,
                        uint64_t *loads, kvsimChunkCheck *c) {
    checkInit(c, n, base);
    for (size_t i = 0; i < n; i++)
        if (settleLocal(v, recs, i, base, c)) break;
    loadBits(recs, n, loads);
}

/*
 * The local check of a chunk stored as byte planes, 16 records per step
 * before the join.  Record by record, with a branch per rule, the check costs
 * a quarter to a half of the chunk's decoding (traces/README.md); the planes
 * give one field of 16 records in one vector.  The screen marks a record `odd`
 * unless it is a load or store of a non-zero size or a prefetch of size 1, with
 * zero flags, a tag and a site the header names, and an address below
 * 2^64 - 2^16 (no access of at most 65535 bytes wraps from there): so every
 * marker and every record that could break a rule is odd, and the screen
 * never passes a bad one.  A record with a dep is marked `named`.  After the
 * join, the odd records go through brokenRule, in order; a named one passes at
 * once if its dep names a load of the array (the common case), else through
 * brokenRule too.  The outcome is kvsimValidateLocal's, to the bit
 * (tests/test_decode.c compares them).
 */
#if defined(__SSE2__)
/* bit i of odd/named/loads (words of 64 records) for records [0, n - n % 16);
 * the rest are left odd.  0 when no record can pass (a header naming no tag
 * or no site): then every record goes through brokenRule. */
static int planesScreen(const kvsimValidator *v, const uint8_t *pl, size_t n, uint64_t *odd,
                        uint64_t *named, uint64_t *loads) {
    if (v->n_tags == 0 || v->n_sites == 0) return 0;
    const int tags = v->n_tags > 0 && v->n_tags < 256, sites = v->n_sites > 0 && v->n_sites < 65536;
    const __m128i z = _mm_setzero_si128(), ff = _mm_set1_epi8(-1), one = _mm_set1_epi8(1);
    const __m128i two = _mm_set1_epi8(2), tmax = _mm_set1_epi8((char)(v->n_tags - 1));
    const __m128i shi = _mm_set1_epi8((char)((v->n_sites - 1) >> 8));
    const __m128i slo = _mm_set1_epi8((char)((v->n_sites - 1) & 0xff));
    memset(odd, 0xff, (n + 63) / 64 * 8); /* the last n % 16 stay odd */
    memset(named, 0, (n + 63) / 64 * 8);
    memset(loads, 0, (n + 63) / 64 * 8);
#define PL(j) _mm_loadu_si128((const __m128i *)(pl + (j) * n + i))
#define LEU8(a, b) _mm_cmpeq_epi8(_mm_max_epu8(a, b), b) /* a <= b, unsigned bytes */
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m128i k = PL(offsetof(kvtRecord, kind));
        const __m128i s0 = PL(offsetof(kvtRecord, size)), s1 = PL(offsetof(kvtRecord, size) + 1);
        const __m128i sz0 = _mm_cmpeq_epi8(_mm_or_si128(s0, s1), z);
        const __m128i sz1 = _mm_and_si128(_mm_cmpeq_epi8(s0, one), _mm_cmpeq_epi8(s1, z));
        __m128i ok = _mm_or_si128(_mm_andnot_si128(sz0, LEU8(k, one)), /* load, store */
                                  _mm_and_si128(_mm_cmpeq_epi8(k, two), sz1)); /* prefetch */
        const size_t fl = offsetof(kvtRecord, flags);
        ok = _mm_and_si128(ok, _mm_cmpeq_epi8(_mm_or_si128(PL(fl), PL(fl + 1)), z));
        __m128i top = PL(2); /* the address's six high bytes: all ones near 2^64 */
        for (size_t j = 3; j < 8; j++) top = _mm_min_epu8(top, PL(j));
        ok = _mm_andnot_si128(_mm_cmpeq_epi8(top, ff), ok);
        if (tags) ok = _mm_and_si128(ok, LEU8(PL(offsetof(kvtRecord, tag)), tmax));
        if (sites) { /* site <= n_sites - 1, as two unsigned bytes */
            const size_t st = offsetof(kvtRecord, site);
            const __m128i lo = PL(st), hi = PL(st + 1), heq = _mm_cmpeq_epi8(hi, shi);
            const __m128i below = _mm_andnot_si128(heq, LEU8(hi, shi));
            ok = _mm_and_si128(ok, _mm_or_si128(below, _mm_and_si128(heq, LEU8(lo, slo))));
        }
        const size_t dp = offsetof(kvtRecord, dep);
        const __m128i d = _mm_or_si128(_mm_or_si128(PL(dp), PL(dp + 1)),
                                       _mm_or_si128(PL(dp + 2), PL(dp + 3)));
        const uint32_t sh = (uint32_t)(i & 63);
        const uint64_t okb = (uint64_t)_mm_movemask_epi8(ok);
        odd[i / 64] &= ~(okb << sh);
        named[i / 64] |= (uint64_t)(~_mm_movemask_epi8(_mm_cmpeq_epi8(d, z)) & 0xffff) << sh;
        loads[i / 64] |= (uint64_t)_mm_movemask_epi8(_mm_cmpeq_epi8(k, z)) << sh;
    }
#undef PL
#undef LEU8
    for (; i < n; i++) loads[i / 64] |= (uint64_t)(pl[offsetof(kvtRecord, kind) * n + i] ==
                                                   KVT_LOAD) << (i & 63);
    return 1;
}
#endif

void kvsimValidatePlanes(const kvsimValidator *v, const uint8_t *planes, size_t n, uint64_t base,
                         kvtRecord *recs, uint64_t *loads, kvsimChunkCheck *c, uint64_t *bits) {
#if defined(__SSE2__)
    uint64_t *odd = bits, *named = bits + (n + 63) / 64;
    const int screened = planesScreen(v, planes, n, odd, named, loads);
#else
    const int screened = 0;
#endif
    kvsimPlanesJoin(planes, n, recs);
    if (!screened) {
        kvsimValidateLocal(v, recs, n, base, loads, c);
        return;
    }
#if defined(__SSE2__)
    checkInit(c, n, base);
    const uint8_t *kind = planes + offsetof(kvtRecord, kind) * n;
    for (size_t w = 0; w * 64 < n; w++) {
        /* a named record passes at once if its dep names a load of the array */
        uint64_t also = 0;
        for (uint64_t m = named[w] & ~odd[w]; m; m &= m - 1) {
            const size_t i = w * 64 + (size_t)__builtin_ctzll(m);
            const uint32_t dep = recs[i].dep;
            const int load = kind[dep <= i ? i - dep : i] == KVT_LOAD;
            also |= (uint64_t)!((dep <= i) & (dep <= KVT_DEP_CHECK_WINDOW) & load) << (i & 63);
        }
        for (uint64_t m = odd[w] | also; m; m &= m - 1) { /* in record order */
            const size_t i = w * 64 + (size_t)__builtin_ctzll(m);
            if (i >= n) break;
            if (settleLocal(v, recs, i, base, c)) return;
        }
    }
#endif
}

int kvsimValidateJoin(kvsimValidator *v, const kvtRecord *recs, const uint64_t *loads,
                      const kvsimChunkCheck *c, kvsimRecordError *err) {
    const uint64_t base = v->records;
    if (c->base != base || c->join_end > c->bad || c->bad > c->n) return -1;
    uint16_t wnext = v->warmup_next;
    for (size_t i = 0; i < c->join_end; i++) {
        /* every rule but these two held on the local pass (i < bad) */
        const kvtRecord *r = &recs[i];
        uint32_t rule = KVSIM_NRULES;
        if (r->kind < KVT_MARKER && r->dep != 0 && r->dep <= KVT_DEP_CHECK_WINDOW &&
            r->dep > i && !ringLoad(v, base + i - r->dep))
            rule = KVSIM_RULE_DEP_NOT_LOAD;
        else if (warmupOutOfTurn(r, &wnext))
            rule = KVSIM_RULE_WARMUP;
        if (rule != KVSIM_NRULES) {
            setError(err, r, i, base + i, rule);
            return 1;
        }
    }
    if (c->bad < c->n) {
        setError(err, &recs[c->bad], c->bad, base + c->bad, c->rule);
        return 1;
    }
    /* a warm-up marker after join_end: none (join_end covers the last one) */
    ringTake(v, base, c->n, loads);
    v->warmup_next = wnext;
    v->records = base + c->n;
    return 0;
}
