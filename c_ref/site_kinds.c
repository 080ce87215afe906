/*
 * site_kinds.c -- the kind of non-memory work (enum kvtWork, trace_format.h) of each
 * site's cost (sites.h).
 *
 * The engine retires a record's gap at the rate of its kind of work (sim/MODEL.md): a
 * CPU file gives instructions per cycle per kind (`[work]`, measured by `kvsim calibrate`
 * on c_ref's own kernels).  A site's cost is the common path's instructions between two
 * recorded accesses; most of it is control flow and address arithmetic (generic).  The
 * sites listed here do one kind of work: the query buffer's parse and the reply's
 * formatting (resp.c), the key re-hash (SipHash), fread's refill of its buffer (a copy).
 * Variable work names its kind at the call (KS_WORK_OF, emit.h); plain KS_WORK is generic.
 *
 * A site not listed is generic (0).  The list is in the trace header ("site_kinds",
 * beside "sites" and "work_kinds"); tests/test_emit.c checks it against the names.
 */
#include <assert.h>

#include "emit.h"

static_assert(KVT_WORK_GENERIC == 0, "an unlisted site is generic");

const uint8_t ksSiteKind[KS_NUM_SITES] = {
    [KS_SITE_RESP_PARSE] = KVT_WORK_PARSE,
    [KS_SITE_RESP_ARGV] = KVT_WORK_PARSE,
    [KS_SITE_RESP_REPLY] = KVT_WORK_PARSE,
    [KS_SITE_KEY_REHASH] = KVT_WORK_HASH,
    [KS_SITE_SNAP_REFILL] = KVT_WORK_COPY,
};

void ksEmitWorkMarkers(ksEmitter *e, uint16_t site) {
    const uint32_t own = ksSiteKind[site];
    for (uint32_t k = 0; k < KVT_NUM_WORK; k++) {
        const uint64_t n = e->pending_kind[k];
        if (n && k != own)
            ksEmitterMarker(e, KVT_MARK_WORK,
                            KVT_WORK_VALUE(k, n < UINT32_MAX ? n : UINT32_MAX));
        e->pending_kind[k] = 0;
    }
    e->pending_kinds = 0;
}
