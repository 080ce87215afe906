/*
 * iterate.c -- KEYS: a safe iteration over every slot table with the
 * iterator prefetch variant (`iterate=none|next-bucket|valkey`), glob matching
 * (Valkey's stringmatchlen rules) and skipping of logically expired keys.
 *
 *   for each slot table (kvstore iterator)
 *     for each bucket (prefetch per variant when entering it)
 *       for each entry: read the key (object header + key bytes, a likely
 *                       miss without prefetch), match, append to the reply
 *
 * The reply is an array whose length is known only at the end; as Valkey's
 * deferred length, the header is inserted in front of the elements.
 *
 * Conventions: public ks...; static internals without prefix.
 */
#include <stdio.h>
#include <string.h>

#include "keyspace.h"
#include "reply.h"
#include "siphash.h"

/* --- Glob matching (stringmatchlen semantics) ------------------------------ */

static int matchImpl(const char *p, size_t plen, const char *s, size_t slen, int depth) {
    if (depth > 1000) return 0; /* bounded recursion, as Valkey's nesting limit */
    while (plen && slen) {
        switch (p[0]) {
        case '*':
            while (plen > 1 && p[1] == '*') {
                p++;
                plen--;
            }
            if (plen == 1) return 1;
            while (slen) {
                if (matchImpl(p + 1, plen - 1, s, slen, depth + 1)) return 1;
                s++;
                slen--;
            }
            return 0;
        case '?':
            s++;
            slen--;
            break;
        case '[': {
            p++;
            plen--;
            int neg = plen && p[0] == '^';
            if (neg) {
                p++;
                plen--;
            }
            int match = 0;
            while (1) {
                if (plen == 0) break;
                if (p[0] == '\\' && plen >= 2) {
                    p++;
                    plen--;
                    if (p[0] == s[0]) match = 1;
                } else if (p[0] == ']') {
                    break;
                } else if (plen >= 3 && p[1] == '-') {
                    int a = (unsigned char)p[0], b = (unsigned char)p[2], ch = (unsigned char)s[0];
                    if (a > b) {
                        int t = a;
                        a = b;
                        b = t;
                    }
                    if (ch >= a && ch <= b) match = 1;
                    p += 2;
                    plen -= 2;
                } else if (p[0] == s[0]) {
                    match = 1;
                }
                p++;
                plen--;
            }
            if (plen == 0) { /* unterminated class: treat as end of pattern */
                p--;
                plen++;
            }
            if (neg) match = !match;
            if (!match) return 0;
            s++;
            slen--;
            break;
        }
        case '\\':
            if (plen >= 2) {
                p++;
                plen--;
            }
            /* fall through */
        default:
            if (p[0] != s[0]) return 0;
            s++;
            slen--;
            break;
        }
        p++;
        plen--;
        if (slen == 0) {
            while (plen && *p == '*') {
                p++;
                plen--;
            }
            break;
        }
    }
    return plen == 0 && slen == 0;
}

int ksStringMatch(const char *pattern, size_t plen, const char *s, size_t slen) {
    return matchImpl(pattern, plen, s, slen, 0);
}

/* --- KEYS ------------------------------------------------------------------ */

void ksKeysCommand(ksKeyspace *ks, ksClient *c, const char *pattern, size_t plen) {
    int allkeys = plen == 1 && pattern[0] == '*';
    size_t start = ksCallPathOn ? ksReplyLen(c) : c->rlen;
    long long n = 0;
    for (int slot = 0; slot < ks->nslots; slot++) {
        void *t = ks->slots[slot];
        if (!t) continue;
        ksTableIter it;
        void *entry;
        ks->ops->iterInit(&it, t, KS_ITER_SAFE, ks->var.iterate);
        while (ks->ops->iterNext(&it, &entry)) {
            ksLoadId kd = 0;
            /* The object pointer came from the bucket (cell, node) just read. */
            sds k = ksEntryGetKey(ks, entry, KS_TAKE_ENTRY_DEP(), &kd);
            size_t klen = sdslen(k);
            if (!allkeys) {
                (void)KS_LOAD(k - 1, klen + 1, KVT_TAG_KEY, KS_SITE_OBJ_KEY, kd);
                if (!ksStringMatch(pattern, plen, k, klen)) continue;
            }
            int64_t when;
            if (ks->layout == KS_LAYOUT_UNIFIED) {
                when = ksEntryGetExpireField(entry);
            } else {
                ksKeyInfo ki = {.key = k, .slot = slot};
                ki.hash = ks->expires ? ksSiphash(k, klen, ks->sipkey) : 0;
                when = ksDbGetExpire(ks, &ki, entry);
            }
            if (ksEntryIsExpired(ks, when)) continue;
            ksReplyBulkTagged(ks, c, (const uint8_t *)k, klen, kd, KVT_TAG_KEY);
            n++;
        }
        ks->ops->iterReset(&it);
    }
    /* Deferred array length: insert the header in front of the elements. */
    char hdr[32];
    int hl = snprintf(hdr, sizeof(hdr), "*%lld\r\n", n);
    if (ksCallPathOn) { /* a server's reply: the buffer and reply blocks (reply.c) */
        ksReplyInsert(c, start, hdr, (size_t)hl);
        return;
    }
    ksReplyRaw(ks, c, hdr, (size_t)hl); /* reserve room */
    memmove(c->rbuf + start + hl, c->rbuf + start, c->rlen - start - (size_t)hl);
    memcpy(c->rbuf + start, hdr, (size_t)hl);
}
