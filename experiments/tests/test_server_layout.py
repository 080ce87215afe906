"""The memory a GET touches in c_ref's server and in the real Valkey server
(kvsim.experiments.server_layout): the bucket walk, the object parser and the per-GET
figures, checked on hand-made memory and on both servers loaded the same way."""

from __future__ import annotations

import os

import pytest

from kvsim.experiments import server_layout as L
from kvsim.experiments.server import CrefServer
from kvsim.experiments.valkey_server import ToolMissing, ValkeyError, populate


def _kvobj(val: int, key: bytes, expire: bool, server: str) -> bytes:
    """An object with an embedded key and a RAW value pointer, as each server lays it out."""
    flags = (1 if expire else 0) | 2 | ((1 << 3) if server == "valkey" else (1 << 2))
    hdr = bytes([0, 0, 0, 0, flags, 0, 0, 0]) + val.to_bytes(8, "little")
    if expire:
        hdr += b"\xff" * 8
    raw = hdr + bytes([1, len(key) << 3]) + key + b"\0"
    return raw + b"\0" * (64 - len(raw))


@pytest.mark.parametrize("server", ["cref", "valkey"])
@pytest.mark.parametrize("expire", [False, True])
def test_object_extent_reads_the_embedded_key(server, expire):
    key = b"key:000000001234"
    val, end, idx = L.object_extent(server, _kvobj(0x1234560, key, expire, server))
    assert (val, idx) == (0x1234560, 1234)
    assert end == 16 + (8 if expire else 0) + 2 + len(key)


def test_object_extent_refuses_an_embedded_value():
    raw = bytearray(_kvobj(0, b"k:1", False, "valkey"))
    raw[4] |= 4  # hasembval
    with pytest.raises(ValkeyError, match="not a RAW string"):
        L.object_extent("valkey", bytes(raw))


class _FakeMem:
    """Mem over a dict of address -> bytes blocks."""

    def __init__(self, blocks: dict[int, bytes]):
        self.blocks = blocks

    def read(self, addr: int, n: int) -> bytes:
        for a, b in self.blocks.items():
            if a <= addr and addr + n <= a + len(b):
                return b[addr - a:addr - a + n]
        raise ValkeyError(f"unmapped {addr:#x}")


def _bucket(chained: bool, entries: list[int], hashes: list[int]) -> bytes:
    presence = sum(1 << i for i, e in enumerate(entries) if e)
    meta = bytes([(1 if chained else 0) | presence << 1]) + bytes(hashes + [0] * (7 - len(hashes)))
    return meta + b"".join(e.to_bytes(8, "little") for e in entries + [0] * (7 - len(entries)))


def test_walk_follows_child_buckets_and_footprint_counts_lines_and_pages():
    base, child, obj, other, val = 0x10010, 0x200000, 0x300000, 0x300040, 0x400005
    home = _bucket(True, [other, 0, 0, 0, 0, 0, child], [7])
    kid = _bucket(False, [other, obj], [9, 9])  # an earlier entry with the same hash byte
    mem = _FakeMem({base: home + _bucket(False, [], []), child: kid,
                    obj: _kvobj(val, b"key:000000000007", False, "valkey"),
                    other: _kvobj(val, b"key:000000000008", False, "valkey"),
                    val - 5: bytes([0, 1, 2, 1, 2]) + b"v" * 256})
    entries = L.walk_entries(mem, [(base, 2)])
    assert entries == [((base,), 0), ((base, child), 0), ((base, child), 1)]
    f = L.get_footprint("valkey", mem, (base, child), 1, 256)
    # home bucket (2 lines: meta and the chained slot), child (1), the other object (1),
    # the object (1), the value's sds header and bytes (5 lines from 0x400000)
    assert f["lines"] == 10 and f["buckets"] == 2 and f["key"] == 7
    assert f["pages"] == 4 and not f["object_value_same_page"]
    assert f["lines_not_prefetched"] == 10 - 3


def _proc_mem_readable() -> bool:
    try:
        L.Mem(os.getpid()).close()
        return True
    except OSError:
        return False


@pytest.mark.skipif(not _proc_mem_readable(), reason="/proc/PID/mem not readable")
def test_cref_server_lays_out_a_get_as_valkey_does():
    """After the same pipelined MSET load, a GET in c_ref's server touches as many lines and
    pages as in Valkey's: the object (allocated when the MSET runs) and its value (the
    argument the parser allocated) on different pages in both, objects 48 bytes apart."""
    from kvsim.experiments.valkey_server import ValkeyServer, server_binary

    try:
        vbinary, _ = server_binary()
    except ToolMissing as exc:
        pytest.skip(str(exc))
    keys, out = 20_000, {}
    for name in ("cref", "valkey"):
        srv = (CrefServer() if name == "cref" else
               ValkeyServer(vbinary, extra={"io-threads": 1}))
        with srv:
            with srv.client() as c:
                populate(c, keys, 256, 0)
            out[name] = L.layout_of(name, srv.pid, keys, 256, 4000, 0)
    c, v = out["cref"], out["valkey"]
    assert c["entries"] == v["entries"] == keys
    assert abs(c["object_value_same_page"] - v["object_value_same_page"]) < 0.05
    assert abs(c["per_get"]["pages"] - v["per_get"]["pages"]) < 0.1
    assert abs(c["per_get"]["lines"] - v["per_get"]["lines"]) < 0.2
    assert c["next_key_object_delta_median"] == v["next_key_object_delta_median"]
