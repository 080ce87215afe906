/*
 * access_body.h -- the body of one level's access on the record-by-record
 * path (engine.c), included twice by engine.c:
 *
 *   ACC_LAST 1: lastAccessBody, lastAccessBelow, lastSendVictim -- the copy of
 *               a last level (nx == NX_DRAM: memory below it);
 *   ACC_LAST 0: cacheAccessBody, accessBelow, sendVictim -- any level, whose
 *               level below is reached through its own copy (NX_ANY) or, when
 *               it is the last level of a known shape, through that level's
 *               body compiled in (lastAccessBody).
 *
 * Two copies of the text rather than one function calling itself: a compiler
 * does not inline a function into itself, whatever its constants say.  The
 * types, the layout macros (B_*), the NX_* values and the helpers (scanSet,
 * touchWay, evictT, ...) are engine.c's, defined before the inclusion.
 */
#if ACC_LAST
#define ACC_BODY lastAccessBody
#define ACC_BELOW lastAccessBelow
#define ACC_SEND lastSendVictim
#else
#define ACC_BODY cacheAccessBody
#define ACC_BELOW accessBelow
#define ACC_SEND sendVictim
#endif

/* An access one level below k (nx: what is there, above): memory is counted
 * inline (no call). */
static inline __attribute__((always_inline)) uint32_t
ACC_BELOW(kvsimSim *s, uint32_t k, uint64_t line, int op, uint8_t stag, int kind,
            int *dirty_up, const int nx) {
    if (nx == NX_DRAM || nx == NX_OWN || (nx == NX_ANY && k + 1 == s->n)) {
        kvsimStats *const st = nx == NX_OWN ? s->lv[k].wst : s->st;
        if (op == OP_READ)
            st->dram_reads++;
        else
            st->dram_writes++;
        return s->n;
    }
    if (nx == NX_ANY) return cacheAccess(s, k + 1, line, op, stag, kind, 0, dirty_up);
    if (nx == NX_QUEUE) { /* to the last level's thread (lower.c): served below k */
        lowerPush(s, line, op, stag, kind, 0);
        return k + 1;
    }
#if ACC_LAST
    return s->n; /* not reached: the last level's copy has nx == NX_DRAM */
#else
    return lastAccessBody(s, k + 1, line, op, stag, kind, 0, dirty_up, LAY_OF(nx),
                          INCL_OF(nx), (int)k + 1, NX_DRAM);
#endif
}

/* Send a removed victim of level k below it. */
static inline __attribute__((always_inline)) void ACC_SEND(kvsimSim *s, uint32_t k,
                                                           const Victim *v, const int nx) {
    if (!v->valid) return;
    if (nx == NX_QUEUE) { /* the last level's thread settles a pending line's bit */
        const uint32_t fl = v->pending ? LOW_PENDING : 0;
        if (v->dirty) {
            s->st->level[k].writebacks++;
            lowerPush(s, v->line, OP_WFULL, v->stag, KVSIM_K_WRITEBACK, fl);
        } else if (s->lower->excl) {
            lowerPush(s, v->line, OP_VICTIM, v->stag, KVSIM_K_VICTIM, fl);
        }
        return;
    }
    if (v->dirty) {
        (nx == NX_OWN ? s->lv[k].wst : s->st)->level[k].writebacks++;
        ACC_BELOW(s, k, v->line, OP_WFULL, v->stag, KVSIM_K_WRITEBACK, NULL, nx);
    } else if (nx == NX_ANY ? k + 1 < s->n && s->lv[k + 1].inclusion == KVSIM_EXCLUSIVE
                            : nx != NX_DRAM && nx != NX_OWN && INCL_OF(nx) == KVSIM_EXCLUSIVE) {
        ACC_BELOW(s, k, v->line, OP_VICTIM, v->stag, KVSIM_K_VICTIM, NULL, nx);
    }
}

/*
 * One access of one line at level k < s->n.  Returns the level that served it
 * (k on a hit; for writes that allocate without a fetch, k).  pfk != 0 marks a
 * prefetch's first level: the line is installed as an unused prefetch of that
 * kind (1 software, 2 hardware).  For a READ that hits an exclusive level the
 * line moves up: *dirty_up receives its dirty bit.  `lay` and `incl`: the
 * level's shape, `nx` what lies below it (NX_*), constants in each copy
 * (above); `kc` the level's index where the copy is compiled for one level
 * (then k is kc), else -1.
 */
static inline __attribute__((always_inline)) uint32_t
ACC_BODY(kvsimSim *s, uint32_t k, uint64_t line, int op, uint8_t stag, int kind,
                uint32_t pfk, int *dirty_up, const int lay, const int incl, const int kc,
                const int nx) {
    if (kc >= 0) k = (uint32_t)kc;
    Level *L = &s->lv[k];
    kvsimStats *st = nx == NX_OWN ? L->wst : s->st;
    kvsimLevelStats *ls = &st->level[k];
    uint64_t set = line & L->set_mask;
    uint8_t *const b = SET_BASE(L, set);
    size_t idx = (size_t)stag * KVSIM_NKINDS + (size_t)kind;
    ls->access[idx]++;
    L->tot_acc++;
    int64_t w, inv = -1;
    if (line + 1 == L->memo_key)
        w = L->memo_way;
    else
        scanSet(L, set, line, &w, &inv, lay);
    if (w >= 0) {
        uint8_t *mp = B_META(L, b, lay) + w;
        L->memo_key = line + 1;
        L->memo_set = set;
        L->memo_way = (uint32_t)w;
        touchWay(L, b, set, (uint32_t)w, 0, lay);
        uint8_t m = *mp;
        if ((kind == KVSIM_K_LOAD || kind == KVSIM_K_STORE) && (m & META_PF_MASK)) {
            s->pfh_kind = (m & META_PF_MASK) >> META_PF_SHIFT;
            s->pfh_level = k;
            m &= (uint8_t)~META_PF_MASK;
        }
        if (pfk) ls->pf_redundant[pfk - 1]++;
        if (op != OP_READ && op != OP_VICTIM) m |= META_DIRTY;
        *mp = m;
        if (INCL(L, incl) == KVSIM_EXCLUSIVE && op == OP_READ) {
            if (dirty_up) *dirty_up = (m & META_DIRTY) != 0;
            invalidateWayT(L, b, set, (uint32_t)w, lay);
        }
        return k;
    }
    ls->miss[idx]++;
    L->tot_miss++;
    if (INCL(L, incl) == KVSIM_EXCLUSIVE && op == OP_READ) {
        ls->fetches++;
        return ACC_BELOW(s, k, line, OP_READ, stag, kind, NULL, nx);
    }
    /* choose a way: the lowest invalid one, else the policy's victim (evicted) */
    Victim v;
    uint32_t way;
    v.valid = 0;
    if (inv >= 0) {
        way = (uint32_t)inv;
    } else {
        way = lay == LAY_RANK    ? kvsimLruRankVictim(b + RK_RANK, L->ways)
              : lay == LAY_WIDE ? kvsimLruRank32Victim(B_RANKS32(L, b), L->wmask)
              : L->is_lru ? kvsimLruVictim(&L->pc, (uint32_t)set)
                          : L->pol->victim(&L->pc, (uint32_t)set);
        v = evictT(s, k, set, b, way, lay, incl, ls);
    }
    uint64_t *tp = B_TAGS(L, b, lay) + way;
    uint8_t *mp = B_META(L, b, lay) + way;
    *tp = line + 1;
    b[way] = fingerprint(line); /* SET_FP */
    *mp = (uint8_t)(((op == OP_WRITE || op == OP_WFULL) ? META_DIRTY : 0) |
                    (pfk << META_PF_SHIFT));
    B_STAG(L, b, lay)[way] = stag;
    L->memo_key = line + 1;
    L->memo_set = set;
    L->memo_way = way;
    touchWay(L, b, set, way, 1, lay);
    if (pfk) ls->pf_issued[pfk - 1]++;
    uint32_t served = k;
    if (op == OP_READ || op == OP_WRITE) {
        int du = 0;
        ls->fetches++;
        served = ACC_BELOW(s, k, line, OP_READ, stag, kind, &du, nx);
        if (nx == NX_QUEUE && s->lower->excl) *mp |= META_PENDING; /* lower.c */
        if (du) {
            /* the installed way may have been back-invalidated meanwhile */
            if (*tp == line + 1) *mp |= META_DIRTY;
        }
    }
    ACC_SEND(s, k, &v, nx);
    return served;
}

#undef ACC_BODY
#undef ACC_BELOW
#undef ACC_SEND
