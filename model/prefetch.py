"""Valkey's batched prefetch paths as explicit step-wise state machines.

Each function mirrors a C function (snake_case of the C name) and records what it touches
in an ``Access`` list, so tests can ask "which keys and structures does this batch touch,
in which order" and check that every prefetched key is then demanded.

- ``incremental_find_init/step/get_result``: ``hashtableIncrementalFind*`` (states
  NEXT_BUCKET -> NEXT_ENTRY -> CHECK_ENTRY -> FOUND / NOT_FOUND), one prefetch per step.
- ``hashtable_prefetch``: ``memory_prefetch.c``'s round-robin driver over a batch
  (PREFETCH_ENTRY -> PREFETCH_VALUE -> PREFETCH_DONE).
- ``iterator_prefetch_order``: the safe/unsafe iterator's ``prefetchNextBucketEntries``
  (and ``HASHTABLE_ITER_PREFETCH_VALUES``) order.

The Redis ``dictPrefetcher`` lives in ``model.dictmodel``; batch splitting (pipeline
lookahead, MGET/MSET adaptive tail, load prefetch) lives in ``model.batching``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from typing import NamedTuple

from kvsim.model.hashtable import Bucket, Hashtable, high_bits

__all__ = [
    "Access",
    "IncrementalFindState",
    "IncrementalFind",
    "incremental_find_init",
    "incremental_find_step",
    "incremental_find_get_result",
    "PrefetchState",
    "hashtable_prefetch",
    "prefetch_keys",
    "iterator_prefetch_order",
]


class Access(NamedTuple):
    """One memory touch: ``op`` is "prefetch" or "read"; ``what`` is "bucket", "entry",
    "key", "value" or "slot_table"; ``ref`` names the structure (bucket id, key bytes);
    ``key`` is the lookup key on whose behalf it happened (None for iterators)."""

    op: str
    what: str
    ref: object
    key: bytes | None


class IncrementalFindState(Enum):
    """States of ``hashtableIncrementalFind*``; member names are the C enum names
    (``.name`` diffs against c_ref traces), the short names are aliases."""

    HASHTABLE_NEXT_BUCKET = "NEXT_BUCKET"
    HASHTABLE_NEXT_ENTRY = "NEXT_ENTRY"
    HASHTABLE_CHECK_ENTRY = "CHECK_ENTRY"
    HASHTABLE_FOUND = "FOUND"
    HASHTABLE_NOT_FOUND = "NOT_FOUND"
    NEXT_BUCKET = "NEXT_BUCKET"
    NEXT_ENTRY = "NEXT_ENTRY"
    CHECK_ENTRY = "CHECK_ENTRY"
    FOUND = "FOUND"
    NOT_FOUND = "NOT_FOUND"


@dataclass
class IncrementalFind:
    """``hashtableIncrementalFindState`` (caller-owned, lives across steps)."""

    ht: Hashtable
    key: bytes
    hash: int = 0
    state: IncrementalFindState = IncrementalFindState.NOT_FOUND
    table: int = 0
    bucket: Bucket | None = None
    pos: int = 0
    trace: list[Access] = field(default_factory=list)


S = IncrementalFindState


def incremental_find_init(ht: Hashtable, key: bytes, trace: list[Access]) -> IncrementalFind:
    """``hashtableIncrementalFindInit``: NOT_FOUND if empty, else hash the key now."""
    st = IncrementalFind(ht, key, trace=trace)
    if ht.size() == 0:
        st.state = S.NOT_FOUND
    else:
        trace.append(Access("read", "key", key, key))  # hashing reads the key bytes
        st.hash = ht.hash_fn(key)
        st.state = S.NEXT_BUCKET
    return st


def _next_bucket(st: IncrementalFind) -> Bucket | None:
    ht = st.ht
    if st.bucket is None:
        first = ht.first_bucket(st.hash)
        if first is None:
            return None
        st.table, b = first
        return b
    if st.bucket.child is not None:
        return st.bucket.child
    if st.table == 0 and ht.is_rehashing():
        st.table = 1
        t1 = ht.tables[1]
        assert t1 is not None
        return t1[st.hash & (len(t1) - 1)]
    return None


def incremental_find_step(st: IncrementalFind) -> bool:
    """``hashtableIncrementalFindStep``: at most one prefetch; True if more work remains."""
    key, tr = st.key, st.trace
    if st.state in (S.FOUND, S.NOT_FOUND):
        return False
    if st.state is S.CHECK_ENTRY:
        assert st.bucket is not None
        entry = st.bucket.entries[st.pos]
        tr.append(Access("read", "entry", entry, key))  # entryGetKey + compareKeys
        if entry == key:
            st.state = S.FOUND
            return False
        st.pos += 1
        st.state = S.NEXT_ENTRY
    if st.state is S.NEXT_ENTRY:
        b = st.bucket
        assert b is not None
        h2 = high_bits(st.hash)
        for pos in range(st.pos, b.num_positions()):
            if b.is_filled(pos) and b.hashes[pos] == h2:
                tr.append(Access("prefetch", "entry", b.entries[pos], key))
                st.pos = pos
                st.state = S.CHECK_ENTRY
                return True
        st.state = S.NEXT_BUCKET
    nb = _next_bucket(st)
    if nb is None:
        st.state = S.NOT_FOUND
        return False
    st.bucket = nb
    tr.append(Access("prefetch", "bucket", nb.bid, key))
    st.state = S.NEXT_ENTRY
    st.pos = 0
    return True


def incremental_find_get_result(st: IncrementalFind) -> bytes | None:
    """``hashtableIncrementalFindGetResult``: the entry if FOUND, else None."""
    if st.state is S.FOUND:
        assert st.bucket is not None
        return st.bucket.entries[st.pos]
    return None


class PrefetchState(Enum):
    """Per-key states of the round-robin driver (``memory_prefetch.c``, c_ref
    ``pipeline.c``), named as in C."""

    PREFETCH_ENTRY = "PREFETCH_ENTRY"
    PREFETCH_VALUE = "PREFETCH_VALUE"
    PREFETCH_DONE = "PREFETCH_DONE"


def hashtable_prefetch(
    batch: list[tuple[Hashtable | None, bytes]],
    value_is_raw: Callable[[bytes], bool] = lambda k: True,
    prefetch_values: bool = True,
) -> list[Access]:
    """``hashtablePrefetch`` in ``memory_prefetch.c``: round-robin over a batch.

    ``batch`` holds (table or None, key) per key; a NULL or empty table means DONE at once.
    Each turn advances one key by one incremental-find step (one prefetch) and moves to the
    next key; when a key's find finishes it goes to VALUE without yielding, which prefetches
    the RAW value of a found entry. Returns the ordered accesses. Nothing is modified."""
    trace: list[Access] = []
    if len(batch) <= 1:
        return trace  # "only if more than one key was collected"
    states: list[PrefetchState] = []
    finds: list[IncrementalFind | None] = []
    for ht, key in batch:
        if ht is None or ht.size() == 0:
            states.append(PrefetchState.PREFETCH_DONE)
            finds.append(None)
        else:
            states.append(PrefetchState.PREFETCH_ENTRY)
            finds.append(incremental_find_init(ht, key, trace))
    cur = 0
    n = len(batch)
    while True:
        nxt = get_next_prefetch_info(states, cur)
        if nxt is None:
            return trace
        cur = nxt
        st = finds[cur]
        assert st is not None
        if states[cur] is PrefetchState.PREFETCH_ENTRY:
            if incremental_find_step(st):
                cur = (cur + 1) % n
                continue
            states[cur] = (
                PrefetchState.PREFETCH_VALUE if prefetch_values else PrefetchState.PREFETCH_DONE
            )
        if states[cur] is PrefetchState.PREFETCH_VALUE:
            entry = incremental_find_get_result(st)
            if entry is not None and value_is_raw(entry):
                trace.append(Access("prefetch", "value", entry, st.key))
            states[cur] = PrefetchState.PREFETCH_DONE
        cur = (cur + 1) % n


prefetch_keys = hashtable_prefetch  # c_ref pipeline.c ksPrefetchKeys


def get_next_prefetch_info(states: list[PrefetchState], cur: int) -> int | None:
    """``getNextPrefetchInfo``: the next not-DONE key at or after ``cur``, cyclically."""
    n = len(states)
    for i in range(n):
        j = (cur + i) % n
        if states[j] is not PrefetchState.PREFETCH_DONE:
            return j
    return None


def iterator_prefetch_order(
    ht: Hashtable, prefetch_values: bool = False, mode: str = "valkey"
) -> list[Access]:
    """Order of accesses of a full (unpaused) iteration under an ``iterate=`` mode.

    ``none``: no prefetch. ``next-bucket``: on every new bucket prefetch the next bucket's
    line. ``valkey`` (#1501/#1568, ``prefetchNextBucketEntries``): with
    ``prefetch_values``, prefetch the value of each filled slot of the current bucket;
    prefetch every filled entry of the next bucket (the child if chained, else the next
    top-level index of the same table) and the bucket line of the one after (next's
    child, else the following top-level index). Then each entry of the current bucket is
    read (returned). Buckets are visited in ``Hashtable.iter_buckets`` order."""
    if mode not in ("none", "next-bucket", "valkey"):
        raise ValueError(mode)
    out: list[Access] = []
    for t, idx, b in ht.iter_buckets():
        tab = ht.tables[t]
        assert tab is not None
        nxt = b.child if b.chained else (tab[idx + 1] if idx + 1 < len(tab) else None)
        if mode == "next-bucket" and nxt is not None:
            out.append(Access("prefetch", "bucket", nxt.bid, None))
        if mode == "valkey":
            if prefetch_values:
                out.extend(Access("prefetch", "value", b.entries[p], None)
                           for p in b.filled())
            if nxt is not None:
                out.extend(Access("prefetch", "entry", nxt.entries[p], None)
                           for p in nxt.filled())
                if nxt.chained:
                    nn = nxt.child
                elif b.chained:
                    nn = tab[idx + 1] if idx + 1 < len(tab) else None
                else:
                    nn = tab[idx + 2] if idx + 2 < len(tab) else None
                if nn is not None:
                    out.append(Access("prefetch", "bucket", nn.bid, None))
        out.extend(Access("read", "entry", b.entries[p], None) for p in b.filled())
    return out
