/*
 * db.c -- the keyspace database: a kvstore of per-slot tables, the key
 * resolution done once per key (hash and slot), lazy expiry, and the
 * keyspace's hashtable type.
 *
 *   ks->slots  (arena array, tag slot_table; 1 entry standalone, 16384 cluster)
 *   +------+------+------+-----+
 *   | NULL | tbl  | NULL | ... |   tables created on first insert, freed when
 *   +------+--|---+------+-----+   emptied (cluster: KVSTORE_FREE_EMPTY_HASHTABLES)
 *             v
 *        ksTableOps backend (hashtable.c or dict.c) -> entries (object.c)
 *
 * Key slot (cluster): CRC16-XMODEM of the key, or of the part between the
 * first '{' and the next '}' when that part is non-empty, mod 16384.
 *
 * Lazy expiry: a lookup that finds a key whose expire time is before the
 * logical clock (ksSetTimeMs) deletes it and reports a miss (expireIfNeeded).
 *
 * Conventions: public ksDb... / ksKey...; static internals without prefix.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "callpath.h"
#include "keyspace.h"
#include "lruclock.h"
#include "siphash.h"
#include "t_hash.h"
#include "t_zset.h"

ksKeyspace *ksCur = NULL;

/* --- Hashtable type over keyspace entries ---------------------------------- */

static const void *typeEntryGetKey(const void *entry, ksLoadId dep, ksLoadId *key_dep) {
    return ksEntryGetKey(ksCur, entry, dep, key_dep);
}

static uint64_t typeHash(const void *key) {
    const char *k = key;
    return ksSiphash(k, sdslen(k), ksCur->sipkey);
}

static uint64_t typeEntryHash(const void *entry, ksLoadId dep) { return ksEntryHash(ksCur, entry, dep); }

static int typeKeyCompare(const void *a, const void *b, ksLoadId bdep) { return ksKeyCompare(a, b, bdep); }

static void typeEntryDestructor(void *entry) { ksEntryFree(ksCur, entry); }

static void typePrefetchValue(const void *entry, ksLoadId dep) { ksEntryPrefetchValue(ksCur, entry, dep); }

/* Legacy expires table: entries are legacyExpire records. */
static const void *expGetKey(const void *entry, ksLoadId dep, ksLoadId *key_dep) {
    const legacyExpire *e = entry;
    KS_ID_VAR(l) = KS_LOAD(e, sizeof(*e), KVT_TAG_EXPIRE, KS_SITE_OBJ_EXPIRE, dep);
    if (key_dep) *key_dep = l;
    return e->key;
}

static uint64_t expEntryHash(const void *entry, ksLoadId dep) {
    KS_ID_VAR(kd) = 0;
    const char *k = expGetKey(entry, dep, &kd);
    (void)KS_LOAD(k - 1, sdslen(k) + 1, KVT_TAG_KEY, KS_SITE_OBJ_KEY, kd);
    KS_WORK_EXACT_OF(KVT_WORK_HASH, ksSiphashCost(sdslen(k)));
    return ksSiphash(k, sdslen(k), ksCur->sipkey);
}

static void expDestructor(void *entry) { ksArenaFree(ksCur->arena, entry); }

/* --- Creation -------------------------------------------------------------- */

static int parseLong(const char *v, long long lo, long long hi, long long *out) {
    char *end;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (errno || *v == '\0' || *end != '\0' || x < lo || x > hi) return -1;
    *out = x;
    return 0;
}

ksKeyspace *ksKeyspaceNew(const char *options, char *err, size_t errlen) {
    const ksTableOps *ops = &ksHashtableTableOps;
    int layout = KS_LAYOUT_UNIFIED, cluster = 0, min_exp = 0, rdbchecksum = 1;
    int activerehashing = 1, hz = 10; /* Valkey's defaults */
    long long command_ns = KS_CRON_COMMAND_NS;
    long long seed = 0;
    char buf[1024];
    snprintf(buf, sizeof(buf), "%s", options ? options : "");
    for (char *save = NULL, *tok = strtok_r(buf, KS_OPTION_SPACE, &save); tok; tok = strtok_r(NULL, KS_OPTION_SPACE, &save)) {
        char *eq = strchr(tok, '=');
        if (!eq) {
            snprintf(err, errlen, "option '%s' is not key=value", tok);
            return NULL;
        }
        *eq = '\0';
        const char *k = tok, *v = eq + 1;
        long long x;
        if (!strcmp(k, "table")) {
            if (!strcmp(v, "hashtable")) ops = &ksHashtableTableOps;
            else if (!strcmp(v, "dict")) ops = &ksDictTableOps;
            else {
                snprintf(err, errlen, "bad table '%s' (hashtable|dict)", v);
                return NULL;
            }
        } else if (!strcmp(k, "layout")) {
            if (!strcmp(v, "unified")) layout = KS_LAYOUT_UNIFIED;
            else if (!strcmp(v, "legacy")) layout = KS_LAYOUT_LEGACY;
            else {
                snprintf(err, errlen, "bad layout '%s' (unified|legacy)", v);
                return NULL;
            }
        } else if (!strcmp(k, "cluster")) {
            if (parseLong(v, 0, 1, &x)) {
                snprintf(err, errlen, "bad cluster '%s' (0|1)", v);
                return NULL;
            }
            cluster = (int)x;
        } else if (!strcmp(k, "seed")) {
            if (parseLong(v, 0, INT64_MAX, &seed)) {
                snprintf(err, errlen, "bad seed '%s'", v);
                return NULL;
            }
        } else if (!strcmp(k, "rdbchecksum")) {
            if (!strcmp(v, "yes")) rdbchecksum = 1;
            else if (!strcmp(v, "no")) rdbchecksum = 0;
            else {
                snprintf(err, errlen, "bad rdbchecksum '%s' (yes|no)", v);
                return NULL;
            }
        } else if (!strcmp(k, "activerehashing")) {
            if (!strcmp(v, "yes")) activerehashing = 1;
            else if (!strcmp(v, "no")) activerehashing = 0;
            else {
                snprintf(err, errlen, "bad activerehashing '%s' (yes|no)", v);
                return NULL;
            }
        } else if (!strcmp(k, "hz")) {
            if (parseLong(v, 0, 500, &x)) {
                snprintf(err, errlen, "bad hz '%s' (0..500)", v);
                return NULL;
            }
            hz = (int)x;
        } else if (!strcmp(k, "command_ns")) {
            if (parseLong(v, 1, 1000000000, &command_ns)) {
                snprintf(err, errlen, "bad command_ns '%s' (1..1000000000)", v);
                return NULL;
            }
        } else if (!strcmp(k, "hashtable_min_exp")) {
            if (parseLong(v, 0, 30, &x)) {
                snprintf(err, errlen, "bad hashtable_min_exp '%s' (0..30)", v);
                return NULL;
            }
            min_exp = (int)x;
        } else {
            snprintf(err, errlen, "unknown option '%s'", k);
            return NULL;
        }
    }
    ksArena *arena = ksArenaCreate(0);
    if (!arena) {
        snprintf(err, errlen, "cannot map the arena");
        return NULL;
    }
    ksKeyspace *ks = calloc(1, sizeof(*ks)); /* control block: not traced data */
    if (!ks) {
        ksArenaDestroy(arena);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    ks->arena = arena;
    ks->ops = ops;
    ks->layout = layout;
    ks->cluster = cluster;
    ks->nslots = cluster ? KS_CLUSTER_SLOTS : 1;
    ks->seed = (uint64_t)seed;
    ksSiphashSeed(ks->seed, ks->sipkey);
    ks->hashtable_min_exp = min_exp;
    ks->rdbchecksum = rdbchecksum;
    ks->activerehashing = activerehashing;
    ks->hz = hz;
    ks->command_ns = (uint64_t)command_ns;
    ks->cron_next_ns = hz ? 1000000000ull / (uint64_t)hz : 0;
    ks->slots = ksArenaCalloc(arena, sizeof(void *) * (size_t)ks->nslots);
    ks->slot_gen = calloc((size_t)ks->nslots, sizeof(uint64_t));
    if (cluster) ks->slot_bit = ksArenaCalloc(arena, sizeof(uint64_t) * ((size_t)ks->nslots + 1));
    ks->ht_type = (hashtableType){
        .entryGetKey = typeEntryGetKey,
        .hashFunction = typeHash,
        .entryHash = typeEntryHash,
        .keyCompare = typeKeyCompare,
        .entryDestructor = typeEntryDestructor,
        .entryPrefetchValue = typePrefetchValue,
    };
    ks->exp_type = (hashtableType){
        .entryGetKey = expGetKey,
        .hashFunction = typeHash,
        .entryHash = expEntryHash,
        .keyCompare = typeKeyCompare,
        .entryDestructor = expDestructor,
    };
    ksParseVariants(ks, "", &ks->var);
    ksCur = ks;
    ksClientInit(ks, &ks->client);
    return ks;
}

static void releaseTables(ksKeyspace *ks) {
    for (int s = 0; s < ks->nslots; s++) {
        if (ks->expires && ks->expires[s]) {
            hashtableRelease(ks->expires[s]);
            ks->expires[s] = NULL;
        }
        if (ks->slots[s]) {
            ks->ops->release(ks, ks->slots[s], 1);
            ks->slots[s] = NULL;
        }
    }
    ks->nkeys = 0;
    if (ks->slot_bit) memset(ks->slot_bit, 0, sizeof(uint64_t) * ((size_t)ks->nslots + 1)); /* kvstoreEmpty */
}

void ksKeyspaceFree(ksKeyspace *ks) {
    if (!ks) return;
    ksCur = ks;
    if (ksArenaBase(ks->arena) == 0) { /* libc mode (ksArenaSetLibc): free every block */
        ksDbFlush(ks);
        ksArenaFree(ks->arena, ks->slots);
        ksArenaFree(ks->arena, ks->slot_bit);
        ksArenaFree(ks->arena, ks->snap);
        ksClientFree(ks, &ks->client);
    }
    /* Everything lives in the arena: unmapping it frees it all. */
    ksArenaDestroy(ks->arena);
    if (ksCur == ks) ksCur = NULL;
    free(ks->slot_gen);
    free(ks);
}

void ksDbFlush(ksKeyspace *ks) {
    releaseTables(ks);
    if (ks->expires) {
        ksArenaFree(ks->arena, ks->expires);
        ks->expires = NULL;
    }
}

/* --- The rehash cron ------------------------------------------------------- */

void ksDbCron(ksKeyspace *ks) {
    if (!ks->activerehashing || ks->hz == 0) return;
    if (ks->cron_clock_ns < ks->cron_next_ns) return;
    uint64_t period = 1000000000ull / (uint64_t)ks->hz;
    while (ks->cron_next_ns <= ks->cron_clock_ns) ks->cron_next_ns += period; /* one tick */
    /* kvstoreIncrementallyRehash(db->keys, 1000): the tables on the rehashing
     * list, in order, until the budget is spent. */
    size_t budget = KS_CRON_REHASH_STEPS;
    for (int s = 0; s < ks->nslots && budget > 0; s++) {
        void *t = ks->slots[s];
        if (!t) continue;
        while (budget > 0) {
            size_t n = budget < 100 ? budget : 100;
            budget -= n;
            if (!ks->ops->rehashSteps(t, n)) break;
        }
    }
}

void ksDbRehashAll(ksKeyspace *ks) {
    for (int s = 0; s < ks->nslots; s++)
        if (ks->slots[s])
            while (ks->ops->rehashSteps(ks->slots[s], 1000)) {
            }
}

/* --- Key resolution -------------------------------------------------------- */

static uint16_t crc16tab[256];
static int crc16ready;

static uint16_t crc16(const char *buf, size_t len) {
    if (!crc16ready) {
        for (int i = 0; i < 256; i++) {
            uint16_t c = (uint16_t)(i << 8);
            for (int k = 0; k < 8; k++) c = (c & 0x8000) ? (uint16_t)((c << 1) ^ 0x1021) : (uint16_t)(c << 1);
            crc16tab[i] = c;
        }
        crc16ready = 1;
    }
    uint16_t crc = 0;
    for (size_t i = 0; i < len; i++) crc = (uint16_t)((crc << 8) ^ crc16tab[((crc >> 8) ^ (uint8_t)buf[i]) & 0xff]);
    return crc;
}

unsigned ksKeyHashSlot(const char *key, size_t len) {
    size_t s, e;
    for (s = 0; s < len; s++)
        if (key[s] == '{') break;
    if (s == len) return crc16(key, len) & 0x3FFF;
    for (e = s + 1; e < len; e++)
        if (key[e] == '}') break;
    if (e == len || e == s + 1) return crc16(key, len) & 0x3FFF;
    return crc16(key + s + 1, e - s - 1) & 0x3FFF;
}

/* ksKeyHashSlot's instructions (the same loops as Valkey src/cluster.c keyHashSlot and
 * src/crc16.c crc16), counted by callgrind on the -O2 code: the brace scans 5 per byte
 * read (load-compare, branch, increment, bound test) and 9 per call, crc16 9 per byte
 * (its table step) and 14 per call; a 16-byte key without braces takes 248. */
#define KEY_HASH_SLOT_CALL_WORK 23u
#define KEY_HASH_SLOT_SCAN_WORK 5u
#define CRC16_BYTE_WORK 9u

/* The work of ksKeyHashSlot(key, len) along its own path (traced builds only). */
static __attribute__((unused)) uint64_t keyHashSlotWork(const char *key, size_t len) {
    size_t s, e, scanned, crc = len;
    for (s = 0; s < len; s++)
        if (key[s] == '{') break;
    scanned = s;
    if (s < len) {
        for (e = s + 1; e < len; e++)
            if (key[e] == '}') break;
        scanned = e;
        if (e < len && e > s + 1) crc = e - s - 1;
    }
    return KEY_HASH_SLOT_CALL_WORK + KEY_HASH_SLOT_SCAN_WORK * scanned + CRC16_BYTE_WORK * crc;
}

void ksKeyResolve(ksKeyspace *ks, sds key, ksKeyInfo *ki) {
    size_t len = sdslen(key);
    ki->key = key;
    (void)KS_LOAD(key - 1, len + 1, KVT_TAG_ARGV, KS_SITE_RESP_ARGV, 0);
    KS_WORK_EXACT_OF(KVT_WORK_HASH, ksSiphashCost(len));
    ki->hash = ksSiphash(key, len, ks->sipkey);
    if (ks->cluster) {
        KS_WORK_OF(KVT_WORK_HASH, keyHashSlotWork(key, len)); /* CRC16 key slot */
        ki->slot = (int)ksKeyHashSlot(key, len);
    } else {
        ki->slot = 0;
    }
    ki->slot_load = KS_LOAD(&ks->slots[ki->slot], 8, KVT_TAG_SLOT_TABLE, KS_SITE_KVS_SLOT, 0);
    ki->table = ks->slots[ki->slot];
    KS_SET_TABLE_DEP(ki->table ? ki->slot_load : 0); /* the table's next meta load */
    ki->found = NULL;
    ki->found_dep = 0;
    ki->rehash = 0;
    ki->link_set = 0;
}

void ksKeyRehash(ksKeyspace *ks, ksKeyInfo *ki) {
    size_t len = sdslen(ki->key);
    (void)KS_LOAD(ki->key - 1, len + 1, KVT_TAG_ARGV, KS_SITE_KEY_REHASH, 0);
    KS_WORK_EXACT_OF(KVT_WORK_HASH, ksSiphashCost(len));
    ki->hash = ksSiphash(ki->key, len, ks->sipkey);
    ki->rehash = 0;
}

void *ksDbTableForWrite(ksKeyspace *ks, int slot) {
    if (!ks->slots[slot]) {
        ks->slots[slot] = ks->ops->create(ks);
        ks->slot_gen[slot]++;
        KS_STORE(&ks->slots[slot], 8, KVT_TAG_SLOT_TABLE, KS_SITE_KVS_SLOT, 0);
    }
    return ks->slots[slot];
}

/* kvstore freeHashtableIfNeeded: cluster mode frees emptied tables. */
static void freeTableIfEmpty(ksKeyspace *ks, int slot) {
    void *t = ks->slots[slot];
    if (!ks->cluster || !t || ks->ops->size(t) != 0 || ks->ops->isRehashingPaused(t)) return;
    ks->ops->release(ks, t, 0);
    ks->slots[slot] = NULL;
    KS_STORE(&ks->slots[slot], 8, KVT_TAG_SLOT_TABLE, KS_SITE_KVS_SLOT, 0);
}

/* Put `n` where the table holds ki's entry: Valkey hashtableFindRef and a
 * store; Redis kvstoreDictSetAtLink(newItem=0) through the lookup's link
 * (found again if a table change made it stale), which keeps a direct item
 * direct. */
static void replaceEntry(ksKeyspace *ks, ksKeyInfo *ki, void *t, void *n) {
    if (ks->ops->setAtLink) {
        if (!ki->link_set) ks->ops->findLink(t, ki->key, ki->hash, NULL, &ki->link);
        ks->ops->setAtLink(t, n, &ki->link, false);
        ki->link_set = 1;
        return;
    }
    void **ref = ks->ops->findRef(t, ki->key, ki->hash);
    KS_STORE(ref, 8, KVT_TAG_BUCKET, KS_SITE_HT_INSERT_STORE, 0);
    *ref = n;
}

/* --- Expiry ---------------------------------------------------------------- */

bool ksEntryIsExpired(ksKeyspace *ks, int64_t when) { return when >= 0 && ks->now_ms > when; }

static hashtable *expiresTable(ksKeyspace *ks, int slot, int create) {
    if (!ks->expires) {
        if (!create) return NULL;
        ks->expires = ksArenaCalloc(ks->arena, sizeof(hashtable *) * (size_t)ks->nslots);
    }
    if (!ks->expires[slot] && create) ks->expires[slot] = hashtableCreate(&ks->exp_type, ks->arena);
    return ks->expires[slot];
}

int64_t ksDbGetExpire(ksKeyspace *ks, ksKeyInfo *ki, void *entry) {
    if (ks->layout == KS_LAYOUT_UNIFIED) {
        const robj *o = entry;
        if (!o->hasexpire) return -1;
        /* The entry pointer came from the table (ksDbFind's found_dep). */
        (void)KS_LOAD((const uint8_t *)o + sizeof(robj), 8, KVT_TAG_EXPIRE, KS_SITE_OBJ_EXPIRE,
                      entry == ki->found ? ki->found_dep : 0);
        return ksEntryGetExpireField(entry);
    }
    hashtable *et = expiresTable(ks, ki->slot, 0);
    if (!et || hashtableSize(et) == 0) return -1;
    void *found;
    if (!hashtableFindWithHash(et, ki->key, ki->hash, &found)) return -1;
    return ((legacyExpire *)found)->when;
}

static void legacyRemoveExpire(ksKeyspace *ks, ksKeyInfo *ki) {
    hashtable *et = expiresTable(ks, ki->slot, 0);
    if (et && hashtableSize(et)) hashtableDelete(et, ki->key);
}

void *ksDbSetExpire(ksKeyspace *ks, ksKeyInfo *ki, void *entry, int64_t when) {
    void *t = ks->slots[ki->slot];
    if (ks->layout == KS_LAYOUT_UNIFIED) {
        void *n = ksEntrySetExpireField(ks, entry, when);
        if (n != entry) {
            replaceEntry(ks, ki, t, n);
            ksEntryFree(ks, entry);
        }
        return n;
    }
    legacyEntry *e = entry;
    hashtable *et = expiresTable(ks, ki->slot, when >= 0);
    if (!et) return entry;
    void *found;
    if (hashtableFindWithHash(et, ki->key, ki->hash, &found)) {
        if (when < 0) hashtableDelete(et, ki->key);
        else ((legacyExpire *)found)->when = when;
        return entry;
    }
    if (when < 0) return entry;
    legacyExpire *x = ksArenaAlloc(ks->arena, sizeof(*x));
    x->key = e->key;
    x->when = when;
    KS_STORE(x, sizeof(*x), KVT_TAG_EXPIRE, KS_SITE_OBJ_EXPIRE, 0);
    hashtableAdd(et, x);
    return entry;
}

/* --- Lookup / modify ------------------------------------------------------- */

void *ksDbFindRaw(ksKeyspace *ks, ksKeyInfo *ki) {
    void *t = ks->slots[ki->slot];
    void *found = NULL;
    KS_SET_TABLE_DEP(t == ki->table ? ki->slot_load : 0);
    ki->found = NULL;
    ki->found_dep = 0;
    ki->link_set = 0;
    if (!t) return NULL;
    if (ks->ops->findLink) {
        ki->link_set = 1;
        if (!ks->ops->findLink(t, ki->key, ki->hash, &found, &ki->link)) return NULL;
    } else if (!ks->ops->find(t, ki->key, ki->hash, &found)) {
        return NULL;
    }
    ki->found = found;
    ki->found_dep = KS_TAKE_ENTRY_DEP(); /* the bucket / cell / node that held it */
    return found;
}

void *ksDbFind(ksKeyspace *ks, ksKeyInfo *ki) {
    void *e = ksDbFindRaw(ks, ki);
    if (!e) return NULL;
    if (ksEntryIsExpired(ks, ksDbGetExpire(ks, ki, e))) {
        ksDbDelete(ks, ki);
        ki->link_set = 0; /* Redis lookupKey: *link = NULL */
        return NULL;
    }
    return e;
}

/* kvstore.c cumulativeKeyCountAdd: with more than one table (cluster mode),
 * every add and delete walks the Fenwick tree of per-slot key counts from
 * slot + 1 upwards (idx += idx & -idx), a read-modify-write of one 8-byte
 * counter per step (up to 14 for 16384 slots; the upper ones are shared by
 * many slots and stay cached). */
void ksDbKeyCountAdd(ksKeyspace *ks, int slot, int64_t delta) {
    if (!ks->slot_bit) return;
    for (int idx = slot + 1; idx <= ks->nslots; idx += idx & -idx) {
        uint64_t *c = &ks->slot_bit[idx];
        (void)KS_LOAD(c, 8, KVT_TAG_SLOT_TABLE, KS_SITE_KVS_KEY_COUNT, 0);
        *c += (uint64_t)delta;
        KS_STORE(c, 8, KVT_TAG_SLOT_TABLE, KS_SITE_KVS_KEY_COUNT, 0);
    }
}

/* A server's touch of a found key (db.c lookupKey): the access time LRU_CLOCK() unless
 * lookupKey's gate says not to (callpath.c). */
static __attribute__((noinline)) void serverTouch(robj *o, ksLoadId d) {
    unsigned lru;
    if (!ksCallLookupKeyTouch(&lru)) return;
    o->lru = lru;
    KS_STORE(o, 8, KVT_TAG_OBJECT, KS_SITE_OBJ_LRU, d);
    (void)d;
}

void ksDbTouch(ksKeyspace *ks, ksKeyInfo *ki, void *entry) {
    KS_ID_VAR(d) = entry == ki->found ? ki->found_dep : 0;
    robj *o = entry;
    if (ks->layout == KS_LAYOUT_LEGACY) {
        legacyEntry *le = entry;
        d = KS_LOAD(&le->val, 8, KVT_TAG_OBJECT, KS_SITE_OBJ_ENTRY, d);
        o = le->val;
    }
    if (__builtin_expect(ksCallPathOn, 0)) { /* a server: lookupKey's gate, LRU_CLOCK() */
        serverTouch(o, d);
        return;
    }
    o->lru = ksGetLRUClock((uint64_t)ks->now_ms); /* LRU_CLOCK() of the workload's clock */
    KS_STORE(o, 8, KVT_TAG_OBJECT, KS_SITE_OBJ_LRU, d);
}

void ksDbAddNew(ksKeyspace *ks, ksKeyInfo *ki, void *entry) {
    int have_link = ki->link_set && ks->slots[ki->slot] != NULL;
    void *t = ksDbTableForWrite(ks, ki->slot);
    if (ks->ops->setAtLink) {
        /* Redis dbAddByLink: the missed lookup's bucket, or none (re-found) */
        if (!have_link) memset(&ki->link, 0, sizeof(ki->link));
        ks->ops->setAtLink(t, entry, &ki->link, true);
    } else {
        ksInsertPos pos;
        void *existing;
        if (!ks->ops->findPositionForInsert(t, ki->key, ki->hash, &pos, &existing)) abort(); /* caller's contract */
        ks->ops->insertAtPosition(t, entry, &pos);
    }
    ki->link_set = 0;
    ks->nkeys++;
    ksDbKeyCountAdd(ks, ki->slot, 1);
}

int ksDbSet(ksKeyspace *ks, ksKeyInfo *ki, const uint8_t *val, size_t vlen, int64_t expire_ms) {
    void *old = ksDbFind(ks, ki); /* setKey's lookupKeyWrite */
    if (old) ksDbTouch(ks, ki, old);
    return ksDbSetFound(ks, ki, old, val, vlen, expire_ms);
}

int ksDbSetFound(ksKeyspace *ks, ksKeyInfo *ki, void *old, const uint8_t *val, size_t vlen,
                 int64_t expire_ms) {
    size_t klen = sdslen(ki->key);
    if (!old) {
        void *e = ksEntryCreate(ks, ki->key, klen, val, vlen, expire_ms);
        ksDbAddNew(ks, ki, e);
        if (expire_ms >= 0 && ks->layout == KS_LAYOUT_LEGACY) ksDbSetExpire(ks, ki, e, expire_ms);
        return 1;
    }
    void *t = ks->slots[ki->slot];
    if (ks->layout == KS_LAYOUT_UNIFIED) {
        void *e = ksEntryCreate(ks, ki->key, klen, val, vlen, expire_ms);
        replaceEntry(ks, ki, t, e);
        ksEntryFree(ks, old);
    } else {
        /* dbOverwrite: keep the entry and key, replace the value object. */
        legacyEntry *le = old;
        legacyEntry *tmp = ksEntryCreate(ks, le->key, klen, val, vlen, -1);
        robj *oldval = le->val;
        le->val = tmp->val;
        KS_STORE(&le->val, 8, KVT_TAG_OBJECT, KS_SITE_OBJ_ENTRY, 0);
        ksArenaFree(ks->arena, sdsAllocPtr(tmp->key));
        ksArenaFree(ks->arena, tmp);
        if (oldval->type == OBJ_HASH) ksHashFree(ks, oldval);
        else if (oldval->type == OBJ_ZSET) ksZsetFree(ks, oldval);
        else if (oldval->encoding == OBJ_ENCODING_RAW) ksArenaFree(ks->arena, sdsAllocPtr(oldval->ptr));
        ksArenaFree(ks->arena, oldval);
        ksDbSetExpire(ks, ki, le, expire_ms);
    }
    return 0;
}

int ksDbDelete(ksKeyspace *ks, ksKeyInfo *ki) {
    void *t = ks->slots[ki->slot];
    void *entry;
    if (!t) return 0;
    if (ks->layout == KS_LAYOUT_LEGACY) legacyRemoveExpire(ks, ki);
    ki->link_set = 0;
    if (!ks->ops->pop(t, ki->key, ki->hash, &entry)) return 0;
    ksEntryFree(ks, entry);
    ks->nkeys--;
    ksDbKeyCountAdd(ks, ki->slot, -1);
    freeTableIfEmpty(ks, ki->slot);
    return 1;
}

/* --- Validation ------------------------------------------------------------ */

int ksDbCheckValid(ksKeyspace *ks, char *err, size_t errlen) {
    uint64_t total = 0;
    for (int s = 0; s < ks->nslots; s++) {
        void *t = ks->slots[s];
        if (!t) continue;
        if (ks->ops->checkValid(t, err, errlen)) return -1;
        size_t n = ks->ops->size(t);
        if (n == 0 && ks->cluster && !ks->ops->isRehashingPaused(t)) {
            snprintf(err, errlen, "kvstore: empty table kept in slot %d", s);
            return -1;
        }
        total += n;
        if (ks->cluster) {
            ksTableIter it;
            void *e;
            ks->ops->iterInit(&it, t, KS_ITER_SAFE, 0);
            while (ks->ops->iterNext(&it, &e)) {
                sds k = ksEntryGetKey(ks, e, 0, NULL);
                if ((int)ksKeyHashSlot(k, sdslen(k)) != s) {
                    ks->ops->iterReset(&it);
                    snprintf(err, errlen, "kvstore: key in wrong slot %d", s);
                    return -1;
                }
            }
            ks->ops->iterReset(&it);
        }
        if (ks->expires && ks->expires[s] && hashtableCheckValid(ks->expires[s], err, errlen)) return -1;
        ksTableIter it; /* every hash and zset value (t_hash.c, t_zset.c) */
        void *e;
        ks->ops->iterInit(&it, t, KS_ITER_SAFE, 0);
        while (ks->ops->iterNext(&it, &e)) {
            int type = ksEntryType(ks, e);
            if (type != OBJ_HASH && type != OBJ_ZSET) continue;
            const robj *o = ks->layout == KS_LAYOUT_LEGACY ? ((legacyEntry *)e)->val : e;
            if (type == OBJ_HASH ? ksHashCheckValid(ks, o, err, errlen) : ksZsetCheckValid(ks, o, err, errlen)) {
                ks->ops->iterReset(&it);
                return -1;
            }
        }
        ks->ops->iterReset(&it);
    }
    if (ks->slot_bit) { /* kvstore's Fenwick tree: prefix sums == table sizes */
        uint64_t prefix = 0;
        for (int s = 0; s < ks->nslots; s++) {
            prefix += ks->slots[s] ? ks->ops->size(ks->slots[s]) : 0;
            uint64_t sum = 0;
            for (int idx = s + 1; idx > 0; idx -= idx & -idx) sum += ks->slot_bit[idx];
            if (sum != prefix) {
                snprintf(err, errlen, "kvstore: key-count tree says %llu keys up to slot %d, tables hold %llu",
                         (unsigned long long)sum, s, (unsigned long long)prefix);
                return -1;
            }
        }
    }
    if (total != ks->nkeys) {
        snprintf(err, errlen, "kvstore: %llu keys counted, %llu recorded", (unsigned long long)total,
                 (unsigned long long)ks->nkeys);
        return -1;
    }
    return ksArenaCheck(ks->arena, err, errlen);
}
