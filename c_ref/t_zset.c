/*
 * t_zset.c -- the sorted set, as Valkey and Redis store it.
 *
 * A sorted-set key's value robj (object.h) has type OBJ_ZSET and one of two
 * encodings:
 *
 *   OBJ_ENCODING_LISTPACK (small: <= 128 members of <= 64 bytes; listpack.c)
 *
 *     o->ptr -> [total][count] m1 s1 m2 s2 ... [0xFF]   in (score, member) order
 *
 *     ZSCORE (zzlFind) walks the members from the first, skipping scores, and
 *     parses the score after the match; ZADD inserts a pair in order (zzlInsert).
 *
 *   OBJ_ENCODING_SKIPLIST (large)
 *
 *     o->ptr -> zset { ht, zsl }
 *                      |    |
 *                      |    +-> zskiplist: the header node (length and tail in
 *                      |        the places of score and backward, 32 levels)
 *                      |        -> nodes in (score, member) order, level 0 doubly linked
 *                      +------> member table whose items ARE the skiplist nodes:
 *                               table=hashtable: a Valkey hashtable (hashtable.c),
 *                               table=dict: a Redis no_value dict (dict.c)
 *
 *     skiplist node (Valkey t_zset.c zslCreateNode: levels and member in one allocation):
 *
 *       +-------+----------+-------------------+-----+-------------------+------+--------------+
 *       | score | backward | level 0: fwd,span | ... | level h-1         | hsz  | member sds   |
 *       +-------+----------+-------------------+-----+-------------------+------+--------------+
 *        0       8          16                        16 + 16 h            +1: sds header, bytes, \0
 *       level 0's span holds the node's height (zslGetNodeHeight); hsz is the
 *       member's sds header size, so the member is found from the height alone.
 *
 *   ZSCORE on a large zset reads: the key's object header (o->ptr), the zset
 *   struct (zs->ht), the member table (struct, bucket line or cell, the
 *   candidate nodes' height and member bytes) and the score in the found node's
 *   first line -- the chain Valkey PR #3940's nested prefetch enters at the
 *   member table (pipeline.c, variants_hash.c).
 *
 * Deviations: only ZADD (with its flags NX XX GT LT CH INCR), ZSCORE, ZMSCORE
 * and ZREM (commands_zset.c); a node's level comes from the member's SipHash mixed (a
 * deterministic stand-in for genrand64, with the same 1/4 per level law);
 * listpack scores are kept as their reply text (always strings, listpack.c);
 * Redis's node is taken to be Valkey's (its source was not recovered: the dict
 * holds the node as its key, as Redis's zsetScore reads it).
 *
 * Conventions: public ksZset...; static internals without prefix; the
 * keyspace whose callbacks run is ksCur.
 */
#include "t_zset.h"

#include <assert.h>
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "d2string.h"
#include "dict.h"
#include "keyspace.h"
#include "siphash.h"

/* --- Layouts ------------------------------------------------------------------------- */

typedef struct zskiplistNode {
    double score;
    struct zskiplistNode *backward;
    struct zskiplistLevel {
        struct zskiplistNode *forward;
        unsigned long span; /* level 0: the node's height */
    } level[1];
} zskiplistNode;

typedef struct zskiplist { /* the header node: length and tail in score's and backward's places */
    unsigned long length;
    zskiplistNode *tail;
    struct zskiplistLevel level[KS_ZSKIPLIST_MAXLEVEL]; /* level 0's span: the list's height */
} zskiplist;

typedef struct zset {
    void *ht; /* hashtable * or dict *: member -> node */
    zskiplist *zsl;
} zset;

static_assert(offsetof(zskiplistNode, score) == 0 && offsetof(zskiplistNode, backward) == 8,
              "score, then backward (Valkey server.h zskiplistNode)");
static_assert(offsetof(zskiplistNode, level) == 16 && sizeof(struct zskiplistLevel) == 16,
              "levels of forward pointer and span from byte 16");
static_assert(sizeof(zskiplistNode) == 32, "a node of height 1 is 32 bytes before its member");
static_assert(offsetof(zskiplist, level) == offsetof(zskiplistNode, level), "the header is a node");
static_assert(sizeof(zset) == 16, "zset: the table and the skiplist pointers");
static_assert(2 * KS_ZSET_MAX_LISTPACK_ENTRIES < 65535, "a listpack zset's element count fits its u16");
static_assert(KS_ZSET_MAX_LISTPACK_VALUE < 4096, "listpack members use a 1- or 2-byte header");
static_assert(OBJ_ENCODING_SKIPLIST < 16 && OBJ_ZSET < 16, "type and encoding fit robj's 4 bits");

static size_t nodeSize(int height) { return sizeof(zskiplistNode) + (size_t)(height - 1) * sizeof(struct zskiplistLevel); }
static int nodeHeight(const zskiplistNode *x) { return (int)x->level[0].span; }
static zskiplistNode *header(zskiplist *zsl) { return (zskiplistNode *)zsl; }
static int listHeight(const zskiplist *zsl) { return (int)zsl->level[0].span; }
static void setListHeight(zskiplist *zsl, int h) { zsl->level[0].span = (unsigned long)h; }

/* zslGetNodeElement: the member sds after the levels and the header-size byte. */
static sds nodeElement(const zskiplistNode *x) {
    const char *data = (const char *)x + nodeSize(nodeHeight(x));
    return (sds)(data + 1 + data[0]);
}

/* zslGetNodeSpanAtLevel and its setters: level 0 holds the height instead. */
static unsigned long spanAt(const zskiplistNode *x, int i) {
    return i > 0 ? x->level[i].span : x->level[i].forward ? 1 : 0;
}
static void setSpan(zskiplistNode *x, int i, unsigned long s) {
    if (i > 0) x->level[i].span = s;
}

static int isDict(const ksKeyspace *ks) { return ks->ops == &ksDictTableOps; }

/* --- Scores ---------------------------------------------------------------------------- */

/* The instructions of a score's text and a listpack score's parse under callgrind
 * (callgrind_annotate --inclusive of ksD2String and strtod in the zscore and zmscore
 * workloads, checked by tests/calibrate.sh's zscore and zmscore lines): d2string's
 * integer path (double2ll, ll2string), its Grisu2 path (fpconv_dtoa) and one strtod of a
 * listpack score (lpScoreAfter).  Work of kind parse (the reply's formatting, a number's
 * parsing), as the RESP sites. */
#define KS_ZSET_D2S_INT_WORK 40
#define KS_ZSET_D2S_GRISU_WORK 250
#define KS_ZSET_STRTOD_WORK 600
static_assert(KS_ZSET_SCORE_MAX >= KS_D2STRING_MAX, "a score's text fits its buffers");

/* addReplyDouble's and zzlInsertAt's text of a score: Valkey's d2string (d2string.c). */
int ksZsetFormatScore(double score, char *buf) {
    int path, n = ksD2String(buf, score, &path);
    KS_WORK_OF(KVT_WORK_PARSE, path == KS_D2S_GRISU ? KS_ZSET_D2S_GRISU_WORK : KS_ZSET_D2S_INT_WORK);
    return n;
}

int ksZsetParseScore(const char *s, size_t len, double *score) {
    char buf[128];
    if (len == 0 || len >= sizeof(buf) || s[0] == ' ' || (s[0] >= '\t' && s[0] <= '\r')) return -1;
    memcpy(buf, s, len);
    buf[len] = 0;
    char *end;
    errno = 0;
    double d = strtod(buf, &end);
    if ((size_t)(end - buf) != len || isnan(d) || (errno == ERANGE && (d == HUGE_VAL || d == -HUGE_VAL || d == 0)))
        return -1;
    *score = d;
    return 0;
}

/* --- Skiplist (Valkey t_zset.c zsl*) ------------------------------------------------- */

/* zslRandomLevel: clz/2 + 1 of a 64-bit random word, here the member's SipHash
 * mixed (deterministic; P(level > n) = 4^-n as upstream). */
static int randomLevel(const char *ele, size_t len) {
    uint64_t r = ksSiphash(ele, len, ksCur->sipkey) * 0x9E3779B97F4A7C15ull;
    r ^= r >> 31;
    r *= 0xBF58476D1CE4E5B9ull;
    r ^= r >> 29;
    int level = r == 0 ? KS_ZSKIPLIST_MAXLEVEL : __builtin_clzll(r) / 2 + 1;
    return level < KS_ZSKIPLIST_MAXLEVEL ? level : KS_ZSKIPLIST_MAXLEVEL;
}

static zskiplistNode *nodeCreate(ksKeyspace *ks, int height, double score, const char *ele, size_t len) {
    int t = sdsReqType(len);
    size_t ns = nodeSize(height), es = sdsSize(t, len);
    zskiplistNode *x = ksArenaAlloc(ks->arena, ns + 1 + es);
    memset(x, 0, ns);
    x->score = score;
    x->level[0].span = (unsigned long)height;
    char *data = (char *)x + ns;
    data[0] = (char)sdsHdrSize(t);
    sdsWriteAt(data + 1, t, ele, len, len);
    KS_STORE(x, ns + 1 + es, KVT_TAG_VALUE, KS_SITE_ZSET_STORE, 0);
    return x;
}

/* The node's first line as a compare reads it (score, levels). */
static void nodeLoad(const zskiplistNode *x) {
    (void)KS_LOAD(x, sizeof(zskiplistNode), KVT_TAG_VALUE, KS_SITE_ZSET_NODE, 0);
}

/* zslCompareNodes against (score, ele): > 0 if node a comes after. NULL: the end. */
static int compareNode(const zskiplistNode *a, double score, const char *ele, size_t len) {
    if (a == NULL) return 1;
    nodeLoad(a);
    if (a->score > score) return 1;
    if (a->score < score) return -1;
    sds ae = nodeElement(a);
    size_t al = sdslen(ae), m = al < len ? al : len;
    (void)KS_LOAD(ae, al, KVT_TAG_VALUE, KS_SITE_ZSET_NODE, 0);
    int c = memcmp(ae, ele, m);
    return c ? c : (al > len) - (al < len);
}

static zskiplist *zslCreate(ksKeyspace *ks) {
    zskiplist *zsl = ksArenaAlloc(ks->arena, sizeof(zskiplist));
    memset(zsl, 0, sizeof(*zsl));
    setListHeight(zsl, 1);
    KS_STORE(zsl, sizeof(*zsl), KVT_TAG_VALUE, KS_SITE_ZSET_STORE, 0);
    return zsl;
}

/* zslInsertNode: link node x (its score and member set) in order. */
static void zslInsertNode(zskiplist *zsl, zskiplistNode *x) {
    zskiplistNode *update[KS_ZSKIPLIST_MAXLEVEL], *h = header(zsl);
    unsigned long rank[KS_ZSKIPLIST_MAXLEVEL];
    sds ele = nodeElement(x);
    size_t len = sdslen(ele);
    int level = nodeHeight(x), height = listHeight(zsl);
    zskiplistNode *p = h;
    for (int i = height - 1; i >= 0; i--) {
        rank[i] = i == height - 1 ? 0 : rank[i + 1];
        while (compareNode(p->level[i].forward, x->score, ele, len) < 0) {
            rank[i] += spanAt(p, i);
            p = p->level[i].forward;
        }
        update[i] = p;
    }
    if (level > height) {
        for (int i = height; i < level; i++) {
            rank[i] = 0;
            update[i] = h;
            setSpan(h, i, zsl->length);
        }
        setListHeight(zsl, level);
    }
    for (int i = 0; i < level; i++) {
        x->level[i].forward = update[i]->level[i].forward;
        update[i]->level[i].forward = x;
        setSpan(x, i, spanAt(update[i], i) - (rank[0] - rank[i]));
        setSpan(update[i], i, (rank[0] - rank[i]) + 1);
        KS_STORE(&update[i]->level[i], sizeof(struct zskiplistLevel), KVT_TAG_VALUE, KS_SITE_ZSET_STORE, 0);
    }
    for (int i = level; i < listHeight(zsl); i++) setSpan(update[i], i, update[i]->level[i].span + 1);
    x->backward = update[0] == h ? NULL : update[0];
    if (x->level[0].forward) x->level[0].forward->backward = x;
    else zsl->tail = x;
    zsl->length++;
    KS_STORE(x, nodeSize(level), KVT_TAG_VALUE, KS_SITE_ZSET_STORE, 0);
}

/* zslDelete without the free: unlink node x. */
static void zslUnlink(zskiplist *zsl, zskiplistNode *x) {
    zskiplistNode *update[KS_ZSKIPLIST_MAXLEVEL], *p = header(zsl);
    sds ele = nodeElement(x);
    size_t len = sdslen(ele);
    for (int i = listHeight(zsl) - 1; i >= 0; i--) {
        while (compareNode(p->level[i].forward, x->score, ele, len) < 0) p = p->level[i].forward;
        update[i] = p;
    }
    for (int i = 0; i < listHeight(zsl); i++) {
        if (update[i]->level[i].forward == x) {
            setSpan(update[i], i, spanAt(update[i], i) + spanAt(x, i) - 1);
            update[i]->level[i].forward = x->level[i].forward;
        } else {
            setSpan(update[i], i, update[i]->level[i].span - 1);
        }
    }
    if (x->level[0].forward) x->level[0].forward->backward = x->backward;
    else zsl->tail = x->backward;
    int h;
    while ((h = listHeight(zsl)) > 1 && zsl->level[h - 1].forward == NULL) setListHeight(zsl, h - 1);
    zsl->length--;
    KS_STORE(zsl, 16, KVT_TAG_VALUE, KS_SITE_ZSET_STORE, 0);
}

/* zslUpdateScore: in place if the order stays, else unlinked and linked again. */
static void zslUpdateScore(zskiplist *zsl, zskiplistNode *x, double score) {
    if ((x->backward == NULL || x->backward->score < score) &&
        (x->level[0].forward == NULL || x->level[0].forward->score > score)) {
        x->score = score;
        KS_STORE(x, 8, KVT_TAG_VALUE, KS_SITE_ZSET_STORE, 0);
        return;
    }
    zslUnlink(zsl, x);
    x->score = score;
    zslInsertNode(zsl, x);
}

/* --- The member table's types ------------------------------------------------------- */

/* zsetHashtableGetKey: the node's member (reading its height and header size). */
static const void *nodeGetKey(const void *stored, ksLoadId dep, ksLoadId *key_dep) {
    const zskiplistNode *x = stored;
    KS_ID_VAR(l) = KS_LOAD(&x->level[0].span, sizeof(unsigned long), KVT_TAG_KEY, KS_SITE_ZSET_NODE, dep);
    const char *data = (const char *)x + nodeSize(nodeHeight(x));
    (void)KS_LOAD(data, 1, KVT_TAG_KEY, KS_SITE_ZSET_NODE, dep);
    if (key_dep) *key_dep = l;
    return nodeElement(x);
}

static uint64_t memberHash(const void *key) {
    const char *k = key;
    return ksSiphash(k, sdslen(k), ksCur->sipkey);
}

static uint64_t nodeEntryHash(const void *stored, ksLoadId dep) {
    ksLoadId kd = 0;
    const char *k = nodeGetKey(stored, dep, &kd);
    (void)KS_LOAD(k - 1, sdslen(k) + 1, KVT_TAG_KEY, KS_SITE_ZSET_NODE, kd);
    KS_WORK_EXACT_OF(KVT_WORK_HASH, ksSiphashCost(sdslen(k)));
    return memberHash(k);
}

static int memberCompare(const void *a, const void *b, ksLoadId bdep) { return ksKeyCompare(a, b, bdep); }

/* zsetHashtableType: no destructor (the skiplist owns the nodes). */
static hashtableType memberHashtableType = {
    .entryGetKey = nodeGetKey,
    .hashFunction = memberHash,
    .entryHash = nodeEntryHash,
    .keyCompare = memberCompare,
};

static dictType memberDictType = {
    .entryGetKey = nodeGetKey,
    .hashFunction = memberHash,
    .entryHash = nodeEntryHash,
    .keyCompare = memberCompare,
    .no_value = 1,
};

/* The hash of a lookup member: reading its argv bytes and SipHash. */
static uint64_t lookupHash(const char *m, size_t len) {
    (void)KS_LOAD(m - 1, len + 1, KVT_TAG_ARGV, KS_SITE_RESP_ARGV, 0);
    KS_WORK_EXACT_OF(KVT_WORK_HASH, ksSiphashCost(len));
    return ksSiphash(m, len, ksCur->sipkey);
}

/* The node of `member` in the member table, or NULL (*ndep: the load that produced it). */
static zskiplistNode *tableFind(ksKeyspace *ks, zset *zs, ksLoadId tdep, sds member, ksLoadId *ndep) {
    uint64_t h = lookupHash(member, sdslen(member));
    void *e = NULL;
    KS_SET_TABLE_DEP(tdep);
    *ndep = 0;
    if (isDict(ks)) return dictFetchStoredWithHash(zs->ht, member, h, ndep);
    if (!hashtableFindWithHash(zs->ht, member, h, &e)) return NULL;
    *ndep = KS_TAKE_ENTRY_DEP();
    return e;
}

static void tableAdd(ksKeyspace *ks, zset *zs, zskiplistNode *x) {
    if (isDict(ks)) dictAdd(zs->ht, x, NULL);
    else hashtableAdd(zs->ht, x);
}

/* --- Listpack (Valkey t_zset.c zzl*) ------------------------------------------------- */

/* The score element after member element p (zzlGetScore), parsed. */
static double lpScoreAfter(const uint8_t *p, ksLoadId dep) {
    size_t ml, sl;
    ksLpGet(p, &ml, dep);
    const uint8_t *s = ksLpGet(p + ksLpElementBytes(ml), &sl, dep);
    (void)KS_LOAD(s, sl, KVT_TAG_VALUE, KS_SITE_HASH_LP, dep);
    char buf[KS_ZSET_SCORE_MAX];
    memcpy(buf, s, sl);
    buf[sl] = 0;
    KS_WORK_OF(KVT_WORK_PARSE, KS_ZSET_STRTOD_WORK); /* zzlStrtod */
    return strtod(buf, NULL);
}

/* Bytes of the pair at p. */
static size_t lpPairBytes(const uint8_t *p) {
    size_t ml, sl;
    ksLpGet(p, &ml, 0);
    ksLpGet(p + ksLpElementBytes(ml), &sl, 0);
    return ksLpElementBytes(ml) + ksLpElementBytes(sl);
}

/* zzlInsert: the pair (member, score) before the first pair ordered after it. */
static uint8_t *zzlInsert(ksKeyspace *ks, uint8_t *lp, const char *ele, size_t len, double score) {
    KS_ID_VAR(lh) = ksLpLoadHeader(lp, 0);
    uint8_t *p = lp + KS_LISTPACK_HDR;
    while (*p != 0xFF) {
        size_t ml;
        const uint8_t *m = ksLpGet(p, &ml, lh);
        double s = lpScoreAfter(p, lh);
        if (s > score) break;
        if (s == score) {
            (void)KS_LOAD(m, ml, KVT_TAG_VALUE, KS_SITE_HASH_LP, lh);
            size_t n = ml < len ? ml : len;
            int c = memcmp(m, ele, n);
            if (c > 0 || (c == 0 && ml > len)) break;
        }
        p += lpPairBytes(p);
    }
    char sbuf[KS_ZSET_SCORE_MAX];
    size_t sl = (size_t)ksZsetFormatScore(score, sbuf);
    uint8_t buf[KS_ZSET_MAX_LISTPACK_VALUE + KS_ZSET_SCORE_MAX + 16];
    size_t mb = ksLpElementBytes(len);
    ksLpWriteElement(buf, ele, len);
    ksLpWriteElement(buf + mb, sbuf, sl);
    return ksLpSplice(ks, lp, (size_t)(p - lp), 0, buf, mb + ksLpElementBytes(sl), 2);
}

/* --- Objects -------------------------------------------------------------------------- */

size_t ksZsetLength(const ksKeyspace *ks, const robj *o) {
    (void)ks;
    if (o->encoding == OBJ_ENCODING_LISTPACK) return ksLpCount(o->ptr) / 2;
    return ((const zset *)o->ptr)->zsl->length;
}

void *ksZsetTable(const robj *o, ksLoadId dep, ksLoadId *tdep) {
    if (o->encoding != OBJ_ENCODING_SKIPLIST) return NULL;
    const zset *zs = o->ptr;
    KS_ID_VAR(l) = KS_LOAD(&zs->ht, sizeof(void *), KVT_TAG_VALUE, KS_SITE_ZSET_NODE, dep);
    if (tdep) *tdep = l;
    return zs->ht;
}

double ksZsetNodeScore(const void *node, ksLoadId dep) {
    const zskiplistNode *x = node;
    (void)KS_LOAD(&x->score, sizeof(double), KVT_TAG_VALUE, KS_SITE_ZSET_NODE, dep);
    return x->score;
}

/* zsetConvertAndExpand to SKIPLIST: every pair of the listpack a node in the
 * skiplist and the member table (pre-sized for cap), then the listpack freed. */
static void convertToSkiplist(ksKeyspace *ks, robj *o, ksLoadId dep, size_t cap) {
    uint8_t *lp = o->ptr;
    zset *zs = ksArenaAlloc(ks->arena, sizeof(zset));
    if (isDict(ks)) {
        zs->ht = dictCreate(&memberDictType, ks->arena);
        dictExpand(zs->ht, cap);
    } else {
        zs->ht = hashtableCreate(&memberHashtableType, ks->arena);
        hashtableExpand(zs->ht, cap);
    }
    zs->zsl = zslCreate(ks);
    KS_STORE(zs, sizeof(zset), KVT_TAG_VALUE, KS_SITE_ZSET_STORE, 0);
    KS_ID_VAR(lh) = ksLpLoadHeader(lp, dep);
    const uint8_t *p = lp + KS_LISTPACK_HDR;
    while (*p != 0xFF) {
        size_t ml;
        const uint8_t *m = ksLpGet(p, &ml, lh);
        (void)KS_LOAD(m, ml, KVT_TAG_VALUE, KS_SITE_HASH_LP, lh);
        double s = lpScoreAfter(p, lh);
        zskiplistNode *x = nodeCreate(ks, randomLevel((const char *)m, ml), s, (const char *)m, ml);
        zslInsertNode(zs->zsl, x);
        tableAdd(ks, zs, x);
        p += lpPairBytes(p);
    }
    ksArenaFree(ks->arena, lp);
    o->encoding = OBJ_ENCODING_SKIPLIST;
    o->ptr = zs;
    KS_STORE(o, sizeof(robj), KVT_TAG_OBJECT, KS_SITE_ZSET_STORE, 0);
}

void *ksZsetEntryCreate(ksKeyspace *ks, const char *key, size_t klen, size_t elements, size_t maxelelen) {
    void *e = ksEntryCreateObject(ks, key, klen, OBJ_ZSET, OBJ_ENCODING_LISTPACK, ksLpNew(ks), -1);
    if (elements > KS_ZSET_MAX_LISTPACK_ENTRIES || maxelelen > KS_ZSET_MAX_LISTPACK_VALUE) {
        robj *o = ks->layout == KS_LAYOUT_LEGACY ? ((legacyEntry *)e)->val : e;
        convertToSkiplist(ks, o, 0, elements);
    }
    return e;
}

void ksZsetMaybeConvert(ksKeyspace *ks, robj *o, ksLoadId dep, size_t elements, size_t maxelelen) {
    if (o->encoding == OBJ_ENCODING_LISTPACK &&
        (elements > KS_ZSET_MAX_LISTPACK_ENTRIES || maxelelen > KS_ZSET_MAX_LISTPACK_VALUE))
        convertToSkiplist(ks, o, dep, elements);
}

/* zsetAdd's decision for a member found with score cur: NX leaves it, INCR adds cur
 * (a NaN sum is an error), GT / LT leave it unless the new score is above / below.
 * 1: set *score (if it changed); 0: leave it (ZADD_OUT_NOP); -1: NaN. */
static int flagsDecide(int in, double cur, double *score, int *out) {
    if (in & KS_ZADD_IN_NX) {
        *out |= KS_ZADD_OUT_NOP;
        return 0;
    }
    if (in & KS_ZADD_IN_INCR) {
        *score += cur;
        if (isnan(*score)) {
            *out |= KS_ZADD_OUT_NAN;
            return -1;
        }
    }
    if (((in & KS_ZADD_IN_LT) && *score >= cur) || ((in & KS_ZADD_IN_GT) && *score <= cur)) {
        *out |= KS_ZADD_OUT_NOP;
        return 0;
    }
    return 1;
}

int ksZsetAddFlags(ksKeyspace *ks, robj *o, ksLoadId dep, sds member, double score, int in, int *out,
                   double *newscore) {
    size_t len = sdslen(member);
    *out = 0;
    if (isnan(score)) { /* NaN as input is an error whatever the flags */
        *out = KS_ZADD_OUT_NAN;
        return 0;
    }
    if (o->encoding == OBJ_ENCODING_LISTPACK) {
        uint8_t *lp = o->ptr;
        uint8_t *p = ksLpFindPair(lp, member, len, dep);
        if (p) {
            double cur = lpScoreAfter(p, dep);
            int d = flagsDecide(in, cur, &score, out);
            if (d <= 0) return d == 0;
            *newscore = score;
            if (score != cur) { /* zzlDelete + zzlInsert */
                lp = ksLpSplice(ks, lp, (size_t)(p - lp), lpPairBytes(p), NULL, 0, -2);
                o->ptr = zzlInsert(ks, lp, member, len, score);
                KS_STORE(&o->ptr, 8, KVT_TAG_OBJECT, KS_SITE_ZSET_STORE, 0);
                *out |= KS_ZADD_OUT_UPDATED;
            }
            return 1;
        }
        if (in & KS_ZADD_IN_XX) {
            *out |= KS_ZADD_OUT_NOP;
            return 1;
        }
        if (ksLpCount(lp) / 2 + 1 > KS_ZSET_MAX_LISTPACK_ENTRIES || len > KS_ZSET_MAX_LISTPACK_VALUE) {
            convertToSkiplist(ks, o, dep, ksLpCount(lp) / 2 + 1);
        } else {
            o->ptr = zzlInsert(ks, lp, member, len, score);
            KS_STORE(&o->ptr, 8, KVT_TAG_OBJECT, KS_SITE_ZSET_STORE, 0);
            *newscore = score;
            *out |= KS_ZADD_OUT_ADDED;
            return 1;
        }
    }
    ksLoadId td = 0, nd = 0;
    zset *zs = o->ptr;
    ksZsetTable(o, dep, &td);
    zskiplistNode *x = tableFind(ks, zs, td, member, &nd);
    if (x) {
        double cur = ksZsetNodeScore(x, nd);
        int d = flagsDecide(in, cur, &score, out);
        if (d <= 0) return d == 0;
        *newscore = score;
        if (score != cur) {
            zslUpdateScore(zs->zsl, x, score);
            *out |= KS_ZADD_OUT_UPDATED;
        }
        return 1;
    }
    if (in & KS_ZADD_IN_XX) {
        *out |= KS_ZADD_OUT_NOP;
        return 1;
    }
    x = nodeCreate(ks, randomLevel(member, len), score, member, len);
    zslInsertNode(zs->zsl, x);
    tableAdd(ks, zs, x);
    *newscore = score;
    *out |= KS_ZADD_OUT_ADDED;
    return 1;
}

int ksZsetAdd(ksKeyspace *ks, robj *o, ksLoadId dep, sds member, double score) {
    int out;
    double ns;
    ksZsetAddFlags(ks, o, dep, member, score, 0, &out, &ns);
    return (out & KS_ZADD_OUT_ADDED) != 0;
}

int ksZsetScore(ksKeyspace *ks, robj *o, ksLoadId dep, sds member, double *score) {
    if (o->encoding == OBJ_ENCODING_LISTPACK) {
        uint8_t *p = ksLpFindPair(o->ptr, member, sdslen(member), dep);
        if (!p) return -1;
        *score = lpScoreAfter(p, dep);
        return 0;
    }
    ksLoadId td = 0, nd = 0;
    ksZsetTable(o, dep, &td);
    zskiplistNode *x = tableFind(ks, o->ptr, td, member, &nd);
    if (!x) return -1;
    *score = ksZsetNodeScore(x, nd);
    return 0;
}

int ksZsetDelete(ksKeyspace *ks, robj *o, ksLoadId dep, sds member) {
    size_t len = sdslen(member);
    if (o->encoding == OBJ_ENCODING_LISTPACK) {
        uint8_t *lp = o->ptr;
        uint8_t *p = ksLpFindPair(lp, member, len, dep);
        if (!p) return 0;
        o->ptr = ksLpSplice(ks, lp, (size_t)(p - lp), lpPairBytes(p), NULL, 0, -2);
        KS_STORE(&o->ptr, 8, KVT_TAG_OBJECT, KS_SITE_ZSET_STORE, 0);
        return 1;
    }
    zset *zs = o->ptr;
    ksLoadId td = 0, nd = 0;
    ksZsetTable(o, dep, &td);
    zskiplistNode *x = tableFind(ks, zs, td, member, &nd);
    if (!x) return 0;
    /* zsetRemoveFromSkiplist: out of the table (no destructor), then the skiplist frees it */
    if (isDict(ks)) dictDelete(zs->ht, member);
    else hashtableDelete(zs->ht, member);
    zslUnlink(zs->zsl, x);
    ksArenaFree(ks->arena, x);
    return 1;
}

/* --- Lifecycle and checks ------------------------------------------------------------ */

void ksZsetFree(ksKeyspace *ks, robj *o) {
    if (!o->ptr) return; /* moved to a copy of the object (ksEntrySetExpireField) */
    if (o->encoding == OBJ_ENCODING_LISTPACK) {
        ksArenaFree(ks->arena, o->ptr);
    } else {
        zset *zs = o->ptr;
        if (isDict(ks)) dictRelease(zs->ht);
        else hashtableRelease(zs->ht);
        for (zskiplistNode *x = zs->zsl->level[0].forward, *next; x; x = next) {
            next = x->level[0].forward;
            ksArenaFree(ks->arena, x);
        }
        ksArenaFree(ks->arena, zs->zsl);
        ksArenaFree(ks->arena, zs);
    }
    o->ptr = NULL;
}

size_t ksZsetAllocBytes(const ksKeyspace *ks, const robj *o) {
    if (o->encoding == OBJ_ENCODING_LISTPACK) return ksArenaUsableSize(ks->arena, o->ptr);
    const zset *zs = o->ptr;
    size_t n = ksArenaUsableSize(ks->arena, zs) + ksArenaUsableSize(ks->arena, zs->zsl);
    n += isDict(ks) ? dictMemUsage(zs->ht) : hashtableMemUsage(zs->ht);
    for (const zskiplistNode *x = zs->zsl->level[0].forward; x; x = x->level[0].forward)
        n += ksArenaUsableSize(ks->arena, x);
    return n;
}

static int checkListpack(ksKeyspace *ks, const robj *o, char *err, size_t errlen) {
    const uint8_t *lp = o->ptr, *p = lp + KS_LISTPACK_HDR;
    size_t n = 0, total = ksLpTotal(lp), plen = 0;
    const uint8_t *prev = NULL;
    double pscore = 0;
    while (p < lp + total && *p != 0xFF) {
        size_t ml, sl;
        const uint8_t *m = ksLpGet(p, &ml, 0);
        const uint8_t *s = ksLpGet(p + ksLpElementBytes(ml), &sl, 0);
        double score;
        if (ml > KS_ZSET_MAX_LISTPACK_VALUE || ksZsetParseScore((const char *)s, sl, &score)) {
            snprintf(err, errlen, "zset: listpack pair %zu malformed (member of %zu bytes)", n, ml);
            return -1;
        }
        if (prev) {
            size_t k = plen < ml ? plen : ml;
            int c = memcmp(prev, m, k);
            if (pscore > score || (pscore == score && (c > 0 || (c == 0 && plen >= ml)))) {
                snprintf(err, errlen, "zset: listpack pair %zu out of (score, member) order", n);
                return -1;
            }
        }
        prev = m, plen = ml, pscore = score;
        p += ksLpElementBytes(ml) + ksLpElementBytes(sl);
        n++;
    }
    if (p != lp + total - 1 || 2 * n != ksLpCount(lp) || n == 0 || n > KS_ZSET_MAX_LISTPACK_ENTRIES ||
        total > ksArenaUsableSize(ks->arena, lp)) {
        snprintf(err, errlen, "zset: listpack of %zu pairs malformed (count %u, %zu bytes)", n, ksLpCount(lp), total);
        return -1;
    }
    return 0;
}

int ksZsetCheckValid(ksKeyspace *ks, const robj *o, char *err, size_t errlen) {
    if (o->type != OBJ_ZSET) {
        snprintf(err, errlen, "zset: object type %d", o->type);
        return -1;
    }
    if (o->encoding == OBJ_ENCODING_LISTPACK) return checkListpack(ks, o, err, errlen);
    if (o->encoding != OBJ_ENCODING_SKIPLIST) {
        snprintf(err, errlen, "zset: encoding %d", o->encoding);
        return -1;
    }
    zset *zs = o->ptr;
    zskiplist *zsl = zs->zsl;
    size_t tsize = isDict(ks) ? dictSize(zs->ht) : hashtableSize(zs->ht);
    if (zsl->length == 0 || tsize != zsl->length) {
        snprintf(err, errlen, "zset: %lu nodes, %zu in the member table", zsl->length, tsize);
        return -1;
    }
    if (isDict(ks) ? dictCheckValid(zs->ht, err, errlen) : hashtableCheckValid(zs->ht, err, errlen)) return -1;
    /* level 0: order, backward links, tail, length; every node the table's item for its member */
    unsigned long n = 0;
    int maxh = 1;
    const zskiplistNode *prev = NULL;
    for (zskiplistNode *x = zsl->level[0].forward; x; x = x->level[0].forward) {
        sds e = nodeElement(x);
        if (x->backward != prev || nodeHeight(x) < 1 || nodeHeight(x) > KS_ZSKIPLIST_MAXLEVEL ||
            (prev && compareNode(prev, x->score, e, sdslen(e)) >= 0)) {
            snprintf(err, errlen, "zset: skiplist node %lu out of order or mislinked", n);
            return -1;
        }
        void *found = NULL;
        if (isDict(ks)) found = dictFetchStored(zs->ht, e, NULL);
        else if (!hashtableFind(zs->ht, e, &found)) found = NULL;
        if (found != x) {
            snprintf(err, errlen, "zset: node %lu is not its member's table item", n);
            return -1;
        }
        if (nodeHeight(x) > maxh) maxh = nodeHeight(x);
        prev = x;
        n++;
    }
    if (n != zsl->length || zsl->tail != prev || maxh != listHeight(zsl)) {
        snprintf(err, errlen, "zset: skiplist length %lu / %lu, tail or height %d / %d wrong", n, zsl->length, maxh,
                 listHeight(zsl));
        return -1;
    }
    /* upper levels: each a sublist in order whose spans sum to the ranks it skips */
    for (int i = 1; i < listHeight(zsl); i++) {
        unsigned long rank = 0;
        zskiplistNode *p = header(zsl);
        for (zskiplistNode *x = p->level[i].forward; x; p = x, x = x->level[i].forward) {
            rank += spanAt(p, i);
            if (nodeHeight(x) <= i || rank > zsl->length) {
                snprintf(err, errlen, "zset: level %d reaches a node of height %d (rank %lu)", i, nodeHeight(x), rank);
                return -1;
            }
        }
        if (rank + spanAt(p, i) != zsl->length) {
            snprintf(err, errlen, "zset: level %d spans sum to %lu, not %lu", i, rank + spanAt(p, i), zsl->length);
            return -1;
        }
    }
    return 0;
}
