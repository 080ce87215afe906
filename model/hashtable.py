"""Structural model of Valkey's ``hashtable.c`` (64-byte buckets, 7 slots, chaining,
incremental rehashing), enough to replay which buckets and entries a lookup touches.

Entries are keys (``bytes``); the value lives elsewhere. Buckets carry a unique ``bid`` so
traces can name them and tests can ask whether a prefetched bucket is still live. The hash
function is pluggable (64-bit int); the default is keyed BLAKE2b, not c_ref's SipHash, so
bucket indexes do not match c_ref's: the model reproduces the *shape* of every path
(which states, which structures, in which order), not addresses.

Names mirror the C functions in snake_case (``find_bucket`` <-> ``findBucket``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from itertools import count

__all__ = [
    "Bucket",
    "Hashtable",
    "ENTRIES_PER_BUCKET",
    "default_hash",
    "high_bits",
]

ENTRIES_PER_BUCKET = 7
BUCKET_FACTOR = 5
BUCKET_DIVISOR = 32
MAX_FILL_PERCENT_SOFT = 100
MIN_FILL_PERCENT_SOFT = 13

_ids = count(1)


def default_hash(key: bytes, seed: int = 0) -> int:
    """64-bit keyed hash used by the model (stands in for SipHash-1-2)."""
    d = hashlib.blake2b(key, digest_size=8, key=seed.to_bytes(8, "little")).digest()
    return int.from_bytes(d, "little")


def high_bits(h: int) -> int:
    """The tag byte ``h2``: the top 8 bits of the hash (``highBits``)."""
    return (h >> 56) & 0xFF


class Bucket:
    """One 64-byte bucket: presence bits, tag bytes, entry slots, optional child."""

    __slots__ = ("bid", "presence", "hashes", "entries", "chained", "child")

    def __init__(self) -> None:
        self.bid = next(_ids)
        self.presence = 0
        self.hashes = [0] * ENTRIES_PER_BUCKET
        self.entries: list[bytes | None] = [None] * ENTRIES_PER_BUCKET
        self.chained = False
        self.child: Bucket | None = None

    def num_positions(self) -> int:
        return ENTRIES_PER_BUCKET - 1 if self.chained else ENTRIES_PER_BUCKET

    def is_filled(self, pos: int) -> bool:
        return bool(self.presence >> pos & 1)

    def is_full(self) -> bool:
        return self.presence == (1 << self.num_positions()) - 1

    def filled(self) -> list[int]:
        return [p for p in range(self.num_positions()) if self.is_filled(p)]


def next_bucket_exp(min_capacity: int) -> int:
    """``nextBucketExp``: exponent of the smallest table holding ``min_capacity``."""
    if min_capacity == 0:
        return -1
    min_buckets = (min_capacity * BUCKET_FACTOR - 1) // BUCKET_DIVISOR + 1
    if min_buckets == 1:
        return 0
    return (min_buckets - 1).bit_length()


def num_buckets(exp: int) -> int:
    return 0 if exp < 0 else 1 << exp


class Hashtable:
    """Valkey-style hashtable under resize policy ALLOW."""

    def __init__(self, hash_fn: Callable[[bytes], int] = default_hash, min_exp: int = -1):
        self.hash_fn = hash_fn
        self.tables: list[list[Bucket] | None] = [None, None]
        self.used = [0, 0]
        self.bucket_exp = [-1, -1]
        self.rehash_idx = -1
        self.pause_rehash = 0
        self.child_buckets = [0, 0]
        self.rehash_steps = 0  # total rehash steps done (for tests)
        if min_exp >= 0:
            self.tables[0] = [Bucket() for _ in range(1 << min_exp)]
            self.bucket_exp[0] = min_exp

    # --- Size and rehashing -------------------------------------------------------------

    def size(self) -> int:
        return self.used[0] + self.used[1]

    def is_rehashing(self) -> bool:
        return self.rehash_idx != -1

    def resize(self, min_capacity: int) -> bool:
        exp = max(next_bucket_exp(min_capacity), 0)
        if self.is_rehashing():
            if self.pause_rehash:
                return False
            while self.is_rehashing():
                self.rehash_step()
        if exp == self.bucket_exp[0]:
            return False
        self.tables[1] = [Bucket() for _ in range(1 << exp)]
        self.bucket_exp[1] = exp
        self.rehash_idx = 0
        if self.tables[0] is None or (self.used[0] == 0 and self.child_buckets[0] == 0):
            self._rehashing_completed()
        return True

    def expand_if_needed(self) -> bool:
        min_capacity = self.size() + 1
        nb = num_buckets(self.bucket_exp[1 if self.is_rehashing() else 0])
        if nb == 0:
            return self.resize(min_capacity)
        if min_capacity * 100 <= nb * ENTRIES_PER_BUCKET * MAX_FILL_PERCENT_SOFT:
            return False
        return self.resize(min_capacity)

    def shrink_if_needed(self) -> bool:
        if self.is_rehashing() or self.pause_rehash:
            return False
        cap = num_buckets(self.bucket_exp[0]) * ENTRIES_PER_BUCKET
        if self.used[0] * 100 > cap * MIN_FILL_PERCENT_SOFT:
            return False
        return self.resize(self.used[0])

    def _rehashing_completed(self) -> None:
        self.tables[0], self.tables[1] = self.tables[1], None
        self.used[0], self.used[1] = self.used[1] + self.used[0], 0
        self.bucket_exp[0], self.bucket_exp[1] = self.bucket_exp[1], -1
        self.child_buckets[0], self.child_buckets[1] = self.child_buckets[1], 0
        self.rehash_idx = -1

    def rehash_step(self) -> None:
        """``rehashStep``: move the whole chain at ``rehash_idx`` into table 1."""
        assert self.is_rehashing()
        t0 = self.tables[0]
        assert t0 is not None
        b: Bucket | None = t0[self.rehash_idx]
        first = True
        while b is not None:
            for pos in b.filled():
                key = b.entries[pos]
                assert key is not None
                h = self.hash_fn(key)
                dst, dpos = self.find_bucket_for_insert(h, 1)
                dst.entries[dpos], dst.hashes[dpos] = key, b.hashes[pos]
                dst.presence |= 1 << dpos
                self.used[0] -= 1
                self.used[1] += 1
            nxt = b.child
            if not first:
                self.child_buckets[0] -= 1
            b.presence, b.chained, b.child = 0, False, None
            b.entries = [None] * ENTRIES_PER_BUCKET
            first = False
            b = nxt
        self.rehash_idx += 1
        self.rehash_steps += 1
        if self.rehash_idx >= num_buckets(self.bucket_exp[0]):
            self._rehashing_completed()

    def rehash_step_on_read_if_needed(self) -> None:
        if self.is_rehashing() and not self.pause_rehash:
            self.rehash_step()

    # --- Find, insert, delete -----------------------------------------------------------

    def first_bucket(self, h: int) -> tuple[int, Bucket] | None:
        """The first bucket a lookup of hash ``h`` probes, as (table, bucket)."""
        if self.tables[0] is None:
            return None
        idx = h & (num_buckets(self.bucket_exp[0]) - 1)
        if self.is_rehashing() and idx < self.rehash_idx:
            t1 = self.tables[1]
            assert t1 is not None
            return 1, t1[h & (num_buckets(self.bucket_exp[1]) - 1)]
        return 0, self.tables[0][idx]

    def buckets_for(self, h: int) -> Iterator[tuple[int, Bucket]]:
        """Every bucket a lookup of ``h`` probes, in probe order (no rehash step)."""
        for t in (0, 1):
            tab = self.tables[t]
            if tab is None:
                continue
            idx = h & (num_buckets(self.bucket_exp[t]) - 1)
            if t == 0 and self.is_rehashing() and idx < self.rehash_idx:
                continue
            b: Bucket | None = tab[idx]
            while b is not None:
                yield t, b
                b = b.child

    def find_bucket(self, key: bytes) -> tuple[int, Bucket, int] | None:
        """``findBucket``: one rehash step (on read), then probe; (table, bucket, pos)."""
        if self.size() == 0:
            return None
        h = self.hash_fn(key)
        self.rehash_step_on_read_if_needed()
        h2 = high_bits(h)
        for t, b in self.buckets_for(h):
            for pos in b.filled():
                if b.hashes[pos] == h2 and b.entries[pos] == key:
                    return t, b, pos
        return None

    def find(self, key: bytes) -> bool:
        return self.find_bucket(key) is not None

    def find_bucket_for_insert(self, h: int, table: int) -> tuple[Bucket, int]:
        tab = self.tables[table]
        assert tab is not None
        b = tab[h & (num_buckets(self.bucket_exp[table]) - 1)]
        while b.is_full():
            if not b.chained:
                self._convert_to_chained(b, table)
            assert b.child is not None
            b = b.child
        pos = next(p for p in range(b.num_positions()) if not b.is_filled(p))
        return b, pos

    def _convert_to_chained(self, b: Bucket, table: int) -> None:
        child = Bucket()
        last = ENTRIES_PER_BUCKET - 1
        child.entries[0], child.hashes[0] = b.entries[last], b.hashes[last]
        child.presence = 1
        b.presence &= ~(1 << last)
        b.entries[last] = None
        b.chained, b.child = True, child
        self.child_buckets[table] += 1

    def add(self, key: bytes) -> bool:
        """``hashtableAdd``: False if the key exists, else insert and return True."""
        if self.find_bucket(key) is not None:
            return False
        self.expand_if_needed()
        h = self.hash_fn(key)
        t = 1 if self.is_rehashing() else 0
        b, pos = self.find_bucket_for_insert(h, t)
        b.entries[pos], b.hashes[pos] = key, high_bits(h)
        b.presence |= 1 << pos
        self.used[t] += 1
        return True

    def delete(self, key: bytes) -> bool:
        """``hashtableDelete``: find (one rehash step), remove, fill hole, maybe shrink."""
        found = self.find_bucket(key)
        if found is None:
            return False
        t, b, pos = found
        b.presence &= ~(1 << pos)
        b.entries[pos] = None
        self.used[t] -= 1
        if b.chained and not self.pause_rehash:
            self._fill_bucket_hole(b, pos, t)
        self.shrink_if_needed()
        return True

    def _fill_bucket_hole(self, b: Bucket, pos: int, table: int) -> None:
        before, last = b, b.child
        assert last is not None
        while last.chained:
            before, last = last, last.child  # type: ignore[assignment]
            assert last is not None
        if last.presence:
            lp = last.filled()[0]
            b.entries[pos], b.hashes[pos] = last.entries[lp], last.hashes[lp]
            b.presence |= 1 << pos
            last.presence &= ~(1 << lp)
            last.entries[lp] = None
        if bin(last.presence).count("1") <= 1:
            self._prune_last_bucket(before, last, table)

    def _prune_last_bucket(self, before: Bucket, last: Bucket, table: int) -> None:
        slot = ENTRIES_PER_BUCKET - 1
        before.chained, before.child = False, None
        if last.presence:
            lp = last.filled()[0]
            before.entries[slot], before.hashes[slot] = last.entries[lp], last.hashes[lp]
            before.presence |= 1 << slot
        self.child_buckets[table] -= 1

    # --- Iteration and validation -------------------------------------------------------

    def chain(self, table: int, idx: int) -> list[Bucket]:
        tab = self.tables[table]
        out = []
        b: Bucket | None = tab[idx] if tab is not None else None
        while b is not None:
            out.append(b)
            b = b.child
        return out

    def iter_buckets(self) -> Iterator[tuple[int, int, Bucket]]:
        """Yield ``(table, index, bucket)`` in iteration order: table 0 from the rehash index
        (or 0), then all of table 1; each top-level bucket followed by its child chain."""
        for t in (0, 1):
            tab = self.tables[t]
            if tab is None:
                continue
            start = self.rehash_idx if (t == 0 and self.is_rehashing()) else 0
            for idx in range(start, len(tab)):
                for b in self.chain(t, idx):
                    yield t, idx, b

    def keys(self) -> list[bytes]:
        out = []
        for _t, _idx, b in self.iter_buckets():
            out.extend(b.entries[p] for p in b.filled())  # type: ignore[misc]
        return out

    def check_valid(self) -> None:
        """Assert presence/tag/used/chain/rehash invariants."""
        seen: set[bytes] = set()
        for t in (0, 1):
            tab = self.tables[t]
            if tab is None:
                assert self.used[t] == 0 and self.bucket_exp[t] == -1, "ghost table"
                continue
            assert len(tab) == num_buckets(self.bucket_exp[t])
            n = children = 0
            lo = self.rehash_idx if (t == 0 and self.is_rehashing()) else 0
            for idx in range(len(tab)):
                chain = self.chain(t, idx)
                children += len(chain) - 1
                for b in chain:
                    assert b.presence < (1 << b.num_positions()), "presence on chain slot"
                    assert b.chained == (b.child is not None)
                    for pos in b.filled():
                        key = b.entries[pos]
                        assert key is not None and key not in seen, "lost or duplicate entry"
                        h = self.hash_fn(key)
                        assert b.hashes[pos] == high_bits(h), "bad tag"
                        assert h & (len(tab) - 1) == idx, "entry in wrong bucket"
                        assert idx >= lo, "entry below rehash_idx"
                        seen.add(key)
                        n += 1
            assert n == self.used[t], f"used[{t}]={self.used[t]} but {n} entries"
            assert children == self.child_buckets[t], "child bucket count"
        if self.is_rehashing():
            assert self.tables[1] is not None and 0 <= self.rehash_idx < len(self.tables[0] or [])
