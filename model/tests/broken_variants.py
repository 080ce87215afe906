"""Deliberately broken (and matching correct) batched variants, for tests only.

``StaleSlotTableMset`` is the first version of Redis PR #15043's MSET prefetch in
Python: it looks up the slot table of the first key once and keeps using it for every
16-key batch. In C that pointer dangles once a ``setKey`` in batch 1 deletes the slot's
last (expired) key and the empty table is freed; here, so that the mistake has a visible
effect without a sanitizer, the stale table object also receives the later batches'
inserts, which therefore vanish from the live keyspace. ``PerBatchSlotTableMset`` is the
fix (re-read the table per batch), which must pass the same harness.
"""

from __future__ import annotations

from kvsim.model import resp
from kvsim.model.batching import multikey_batches
from kvsim.model.harness import ModelBackend
from kvsim.model.keyspace import Keyspace


class _BatchedMset(Keyspace):
    stale = False

    def _live(self, key: bytes) -> bool:
        return key in self.slots.get(self._slot(key), ())

    def lookup_key(self, key: bytes) -> bytes | None:
        self.expire_if_needed(key)
        return self.data.get(key) if self._live(key) else None

    def db_delete(self, key: bytes) -> bool:
        if key in self.data and not self._live(key):
            del self.data[key]
            self.expires.pop(key, None)
            return True
        return super().db_delete(key)

    def _mset(self, argv: list[bytes], nx: bool = False) -> bytes:
        if nx or not self.cluster or len(argv) % 2 == 0:
            return super()._mset(argv, nx)
        pairs = list(zip(argv[1::2], argv[2::2], strict=True))
        first_slot = self._slot(pairs[0][0])
        cached = self.slots.get(first_slot)  # kvstoreGetDict(slot of argv[1]), once
        for r in multikey_batches(len(pairs)):
            # the table this batch prefetched from: cached (broken) or re-read (fixed)
            table = cached if self.stale else self.slots.get(first_slot)
            for i in r:
                k, v = pairs[i]
                self.set_key(k, v)
                live = self.slots.get(first_slot)
                if (self.stale and r.start > 0 and table is not None and live is not table
                        and self._slot(k) == first_slot):
                    assert live is not None
                    live.discard(k)  # the insert lands in the table the batch holds
                    if not live:
                        del self.slots[first_slot]
                    table.add(k)
        return resp.OK


class StaleSlotTableMset(_BatchedMset):
    stale = True


class PerBatchSlotTableMset(_BatchedMset):
    stale = False


def backend(cls: type[Keyspace], name: str):
    def make(options: str = "cluster=1") -> ModelBackend:
        b = ModelBackend(options, crossslot=False, name=name)
        b.ks = cls(cluster=b.ks.cluster)
        return b

    return make
