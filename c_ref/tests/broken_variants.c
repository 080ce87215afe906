/*
 * broken_variants.c -- deliberately broken variants, for the tests only.
 *
 * A test suite that cannot fail proves nothing: the differential tests
 * (tests/test_keyspace.c, model/tests/test_lockstep_cref.py) must catch these.
 * This file is linked into the C tests and the test libraries
 * (libkvsim_cref_testvariants.so, libkvsim_cref_asan.so) only; the CLI, the
 * product library and the wheel never contain it.  Its variants join the
 * registry of variants.c through ksRegisterVariant when the program or library
 * loads (a constructor), so ksExecute accepts them like any other.
 *
 *   multikey=batch-stale-table
 *       Redis PR #15043 before its fix: an MGET/MSET/MSETNX resolves each
 *       slot's table once, in its first batch, and later batches of the same
 *       command keep using that table.  A table freed since (cluster mode:
 *       emptied by an expired key) and re-created is dead: lookups through it
 *       miss and writes through it are lost, as with a dangling dict.
 *       Identity is the pointer plus the slot's creation count
 *       (ksKeyspace.slot_gen), so a table re-created at a reused address is
 *       still a different table.  The dead table is never dereferenced.
 */
#include <stdlib.h>

#include "keyspace.h"

/* --- multikey=batch-stale-table -------------------------------------------- */

typedef struct {
    void *table;   /* the slot's table when the command first resolved it */
    uint64_t gen;  /* ks->slot_gen[slot] then */
    int valid;
} staleEntry;

static void *staleBegin(ksKeyspace *ks) { return calloc((size_t)ks->nslots, sizeof(staleEntry)); }

static int staleLost(ksKeyspace *ks, void *state, const ksKeyInfo *ki) {
    const staleEntry *e = &((staleEntry *)state)[ki->slot];
    if (!e->valid || e->table == NULL) return 0; /* nothing cached: live lookups */
    return e->table != ks->slots[ki->slot] || e->gen != ks->slot_gen[ki->slot];
}

static void staleResolved(ksKeyspace *ks, void *state, ksKeyInfo *ki) {
    staleEntry *e = &((staleEntry *)state)[ki->slot];
    if (!e->valid) {
        *e = (staleEntry){ki->table, ks->slot_gen[ki->slot], 1};
        return;
    }
    ki->table = e->table; /* the cached (maybe dangling) table */
    if (staleLost(ks, state, ki)) ki->table = NULL; /* never dereferenced */
}

static void staleEnd(void *state) { free(state); }

static const ksMultikeyTableHooks staleHooks = {staleBegin, staleResolved, staleLost, staleEnd};

static void applyStale(ksVariants *v, const void *fn) {
    (void)fn;
    ksSetVariant(v, "multikey", "batch"); /* the shipped batch prefetch ... */
    v->multikey_tables = &staleHooks;     /* ... over stale tables */
}

/* --- Registration ---------------------------------------------------------- */

__attribute__((constructor)) static void registerBrokenVariants(void) {
    if (ksRegisterVariant("multikey", "batch-stale-table", applyStale, NULL)) abort();
}
