"""Structural model of Redis's chained ``dict`` (no_value keyspace dict) and of the
``dictPrefetcher`` state machine from ``memory_prefetch.c`` (PR #15133).

Buckets are Python lists, head first (new entries go to the chain head). A bucket holding
exactly one key stores it "directly" (the tagged kvobj pointer); longer chains use nodes.
``rehashidx`` and ``dictRehash(d, n)`` (n buckets, at most n*10 empty visits) follow
Redis 8.4. Names mirror the C ones in snake_case.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum

from kvsim.model.hashtable import default_hash
from kvsim.model.prefetch import Access

__all__ = ["Dict", "DictPrefetchState", "dict_prefetch_keys", "DICT_PREFETCH_MAX_SIZE"]

DICT_HT_INITIAL_EXP = 2
DICT_PREFETCH_MAX_SIZE = 64


class Dict:
    """Redis ``dict`` under resize ENABLE: expand at used >= buckets, shrink at used*8 <=
    buckets (never below 4)."""

    def __init__(self, hash_fn: Callable[[bytes], int] = default_hash) -> None:
        self.hash_fn = hash_fn
        self.ht_table: list[list[list[bytes]] | None] = [None, None]
        self.ht_used = [0, 0]
        self.rehashidx = -1
        self.pauserehash = 0

    def size(self) -> int:
        return self.ht_used[0] + self.ht_used[1]

    def is_rehashing(self) -> bool:
        return self.rehashidx != -1

    def _mask(self, t: int) -> int:
        tab = self.ht_table[t]
        return len(tab) - 1 if tab is not None else 0

    def _expand(self, size: int) -> None:
        exp = max(DICT_HT_INITIAL_EXP, (size - 1).bit_length())
        if self.ht_table[0] is not None and len(self.ht_table[0]) == 1 << exp:
            return
        new: list[list[bytes]] = [[] for _ in range(1 << exp)]
        if self.ht_table[0] is None:
            self.ht_table[0] = new
            return
        self.ht_table[1] = new
        self.rehashidx = 0

    def expand_if_needed(self) -> None:
        if self.is_rehashing():
            return
        if self.ht_table[0] is None:
            self._expand(1 << DICT_HT_INITIAL_EXP)
        elif self.ht_used[0] >= len(self.ht_table[0]):
            self._expand(self.ht_used[0] + 1)

    def shrink_if_needed(self) -> None:
        t0 = self.ht_table[0]
        if self.is_rehashing() or t0 is None or len(t0) <= 1 << DICT_HT_INITIAL_EXP:
            return
        if self.ht_used[0] * 8 <= len(t0):
            self._expand(self.ht_used[0] + 1)

    def rehash(self, n: int) -> None:
        """``dictRehash``: move up to n non-empty buckets, visiting at most n*10 empty."""
        empty_visits = n * 10
        t0, t1 = self.ht_table[0], self.ht_table[1]
        assert t0 is not None and t1 is not None
        while n and self.ht_used[0]:
            while not t0[self.rehashidx]:
                self.rehashidx += 1
                empty_visits -= 1
                if empty_visits == 0:
                    return
            self._rehash_bucket(self.rehashidx)
            self.rehashidx += 1
            n -= 1
        if self.ht_used[0] == 0:
            self.ht_table[0], self.ht_table[1] = t1, None
            self.ht_used[0], self.ht_used[1] = self.ht_used[1], 0
            self.rehashidx = -1

    def _rehash_bucket(self, idx: int) -> None:
        t0, t1 = self.ht_table[0], self.ht_table[1]
        assert t0 is not None and t1 is not None
        for key in t0[idx]:
            t1[self.hash_fn(key) & (len(t1) - 1)].insert(0, key)
            self.ht_used[0] -= 1
            self.ht_used[1] += 1
        t0[idx] = []

    def rehash_step_if_needed(self, idx0: int) -> None:
        """``_dictRehashStepIfNeeded``: rehash bucket idx0 itself if pending, else one step."""
        if not self.is_rehashing() or self.pauserehash:
            return
        t0 = self.ht_table[0]
        assert t0 is not None
        if idx0 >= self.rehashidx and t0[idx0]:
            self._rehash_bucket(idx0)
            if self.ht_used[0] == 0:
                self.rehash(1)
        else:
            self.rehash(1)

    def find(self, key: bytes) -> bool:
        if self.size() == 0:
            return False
        h = self.hash_fn(key)
        self.rehash_step_if_needed(h & self._mask(0))
        return any(key in chain for chain in self._chains(h))

    def _chains(self, h: int) -> list[list[bytes]]:
        out = []
        for t in (0, 1):
            tab = self.ht_table[t]
            if tab is None:
                continue
            idx = h & (len(tab) - 1)
            if t == 0 and self.is_rehashing() and idx < self.rehashidx:
                continue
            out.append(tab[idx])
        return out

    def add(self, key: bytes) -> bool:
        """Redis ``setKey`` of a new key: ``dbFindByLink`` (one walk, one rehash step), then
        ``dictSetKeyAtLink(newItem=1)``: expand if needed and insert at the chain head, with
        no second rehash step."""
        if self.find(key):
            return False
        self.expand_if_needed()
        t = 1 if self.is_rehashing() else 0
        tab = self.ht_table[t]
        assert tab is not None
        tab[self.hash_fn(key) & (len(tab) - 1)].insert(0, key)
        self.ht_used[t] += 1
        return True

    def delete(self, key: bytes) -> bool:
        if not self.find(key):
            return False
        h = self.hash_fn(key)
        for t in (0, 1):
            tab = self.ht_table[t]
            if tab is None:
                continue
            chain = tab[h & (len(tab) - 1)]
            if key in chain and not (t == 0 and self.is_rehashing() and
                                     (h & (len(tab) - 1)) < self.rehashidx):
                chain.remove(key)
                self.ht_used[t] -= 1
                break
        self.shrink_if_needed()
        return True

    def check_valid(self) -> None:
        seen: set[bytes] = set()
        for t in (0, 1):
            tab = self.ht_table[t]
            if tab is None:
                assert self.ht_used[t] == 0
                continue
            n = 0
            for idx, chain in enumerate(tab):
                if t == 0 and self.is_rehashing() and idx < self.rehashidx:
                    assert not chain, "entries below rehashidx"
                for k in chain:
                    assert self.hash_fn(k) & (len(tab) - 1) == idx and k not in seen
                    seen.add(k)
                    n += 1
            assert n == self.ht_used[t]


class DictPrefetchState(Enum):
    """``dictPrefetcher`` states; member names are c_ref's C enum names
    (``DICT_PREFETCH_*``), the Redis names (``PREFETCH_*``) are aliases."""

    DICT_PREFETCH_BUCKET = "BUCKET"
    DICT_PREFETCH_ENTRY = "ENTRY"
    DICT_PREFETCH_ENTRY_KEY = "ENTRY_KEY"
    DICT_PREFETCH_ENTRY_VALUE = "ENTRY_VALUE"
    DICT_PREFETCH_DONE = "DONE"
    PREFETCH_BUCKET = "BUCKET"
    PREFETCH_ENTRY = "ENTRY"
    PREFETCH_ENTRY_KEY = "ENTRY_KEY"
    PREFETCH_ENTRY_VALUE = "ENTRY_VALUE"
    PREFETCH_DONE = "DONE"


@dataclass
class DictPrefetchLookup:
    """``dictPrefetchLookup``: per-key snapshot of an in-flight ``dictFind``."""

    key: bytes
    d: Dict | None
    state: DictPrefetchState = DictPrefetchState.PREFETCH_BUCKET
    ht_idx: int = -1
    key_hash: int = 0
    chain: list[bytes] | None = None
    pos: int = -1  # current entry position in the chain


def dict_prefetch_keys(
    batch: list[tuple[Dict | None, bytes]],
    value_is_raw: Callable[[bytes], bool] = lambda k: True,
) -> list[Access]:
    """``dictPrefetchKeys`` + ``dictPrefetcherRun``: round-robin over the batch; as in
    Redis #15133, a state only moves the cursor to the next key when it issued a
    prefetch (or finished). No-op if n <= 1. c_ref's ``dictPrefetcherStep`` does the same:
    the cursor stays on a key whose step issued no prefetch and moves only after a
    prefetch or when the key is done, so the interleaving matches c_ref's."""
    n = len(batch)
    trace: list[Access] = []
    if n <= 1:
        return trace
    assert n <= DICT_PREFETCH_MAX_SIZE
    lk = []
    for d, key in batch:
        p = DictPrefetchLookup(key, d)
        if d is None or d.size() == 0:
            p.state = DictPrefetchState.PREFETCH_DONE
        else:
            trace.append(Access("read", "key", key, key))
            p.key_hash = d.hash_fn(key)
        lk.append(p)
    remaining = sum(p.state is not DictPrefetchState.PREFETCH_DONE for p in lk)
    cur = 0
    while remaining:
        p = lk[cur]
        if p.state is DictPrefetchState.PREFETCH_DONE:
            cur = (cur + 1) % n
            continue
        issued = _dict_prefetch_step(p, trace, value_is_raw)
        if p.state is DictPrefetchState.PREFETCH_DONE:
            remaining -= 1
        if issued or p.state is DictPrefetchState.PREFETCH_DONE:
            cur = (cur + 1) % n
    return trace


def _dict_prefetch_step(p: DictPrefetchLookup, tr: list[Access], raw: Callable) -> bool:
    d, key = p.d, p.key
    assert d is not None
    st = p.state
    if st is DictPrefetchState.PREFETCH_BUCKET:  # dictPrefetchBucket
        p.ht_idx += 1
        if p.ht_idx > 1 or (p.ht_idx == 1 and not d.is_rehashing()):
            p.state = DictPrefetchState.PREFETCH_DONE
            return False
        tab = d.ht_table[p.ht_idx]
        assert tab is not None
        p.chain = tab[p.key_hash & (len(tab) - 1)]
        p.pos = -1
        tr.append(Access("prefetch", "bucket", (p.ht_idx, p.key_hash & (len(tab) - 1)), key))
        p.state = DictPrefetchState.PREFETCH_ENTRY
        return True
    if st is DictPrefetchState.PREFETCH_ENTRY:  # dictPrefetchEntry
        assert p.chain is not None
        p.pos += 1
        if p.pos >= len(p.chain):
            p.state = DictPrefetchState.PREFETCH_BUCKET
            return False
        tr.append(Access("prefetch", "entry", p.chain[p.pos], key))
        p.state = DictPrefetchState.PREFETCH_ENTRY_KEY
        return True
    if st is DictPrefetchState.PREFETCH_ENTRY_KEY:  # dictPrefetchEntryKey
        assert p.chain is not None
        p.state = DictPrefetchState.PREFETCH_ENTRY_VALUE
        if len(p.chain) > 1:  # a node, not a direct tagged key: prefetch the kvobj
            tr.append(Access("prefetch", "key", p.chain[p.pos], key))
            return True
        return False
    assert st is DictPrefetchState.PREFETCH_ENTRY_VALUE and p.chain is not None
    entry = p.chain[p.pos]
    last = p.pos == len(p.chain) - 1
    if last and not d.is_rehashing():
        hit = True  # assume hit without compare
    else:
        tr.append(Access("read", "key", entry, key))
        hit = entry == key
    if hit:
        p.state = DictPrefetchState.PREFETCH_DONE
        if raw(entry):
            tr.append(Access("prefetch", "value", entry, key))
            return True
        return False
    p.state = DictPrefetchState.PREFETCH_ENTRY
    return False
