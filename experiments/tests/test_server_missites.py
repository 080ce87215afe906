"""The allocator's accesses in a traced server (c_ref/libc_alloc.h) and the per-site miss
counts of experiments/server_missites.py."""

from __future__ import annotations

import json
import os
import signal
import socket
from pathlib import Path

import numpy as np
import pytest

from kvsim import sim, traces
from kvsim.experiments import server_missites as M
from kvsim.experiments.server import CrefServer
from kvsim.model.resp import encode_command

TIMEOUT = 20.0
VALUE = 300  # a RAW string: its sds is a block of its own, five lines


def _binary() -> Path | None:
    env = os.environ.get("KVSIM_CREF_SERVE")
    return Path(env) if env else None


def _serve_traced(out: Path, cmds: list[bytes]) -> None:
    srv = CrefServer(binary=_binary(), args=["--trace", str(out)]).start()
    try:
        with socket.create_connection(("127.0.0.1", srv.port), timeout=TIMEOUT) as s:
            for c in cmds:  # one at a time: each reply before the next command
                s.sendall(c)
                assert s.recv(64).startswith(b"+OK")
        srv.proc.send_signal(signal.SIGTERM)
        assert srv.proc.wait(timeout=TIMEOUT) == 0
    finally:
        srv.stop()


def _commands(rec: np.ndarray) -> list[np.ndarray]:
    """The records of each command: from its COMMAND marker to the next one."""
    at = np.flatnonzero((rec["kind"] == traces.KIND_MARKER)
                        & (rec["flags"] == traces.MARK_COMMAND))
    return [rec[a:b] for a, b in zip(at, [*at[1:], rec.size], strict=True)]


def _set_then_mset(tmp_path: Path) -> tuple[dict, np.ndarray]:
    """SET k to a RAW value, then MSET k over it, traced: the trace's header and records."""
    out = tmp_path / "mset.kvt"
    _serve_traced(out, [encode_command(b"SET", b"k", b"a" * VALUE),
                        encode_command(b"MSET", b"k", b"b" * VALUE)])
    t = traces.open(out)
    return t.header, t.read_all()


def test_traced_mset_over_an_existing_key_records_the_old_values_free(tmp_path):
    """SET k (a 300-byte value), then MSET k over it: the old value's block, written by the
    SET's parse, is freed when the MSET's argv is (dbSetValue's swap gave it to the
    argument): its size field and the next chunk's are read at alloc.usable_size, and its
    first 16 bytes (tcache_put's e->next and e->key) stored at alloc.free."""
    header, rec = _set_then_mset(tmp_path)
    sites = header["sites"]
    s_set, s_mset = _commands(rec)[-2:]

    def at(r: np.ndarray, site: str, kind: int) -> np.ndarray:
        return r[(r["site"] == sites.index(site)) & (r["kind"] == kind)]
    # the SET's value: a run of contiguous argv store pieces (one store split by line) of
    # at least its 300 bytes
    argv = at(s_set, "resp.argv", traces.KIND_STORE)
    runs: list[list[int]] = []
    for a, n in zip(argv["addr"].tolist(), argv["size"].tolist(), strict=True):
        if runs and runs[-1][0] + runs[-1][1] == a:
            runs[-1][1] += n
        else:
            runs.append([a, n])
    blocks = [a for a, n in runs if n >= VALUE]
    assert len(blocks) == 1, runs
    block = blocks[0]
    freed = at(s_mset, "alloc.free", traces.KIND_STORE)
    assert block in freed["addr"].tolist()
    assert int(freed["size"][freed["addr"] == block][0]) == 16
    usable = at(s_mset, "alloc.usable_size", traces.KIND_LOAD)["addr"].tolist()
    assert block - 8 in usable  # the chunk's size field
    assert any(block + VALUE <= a < block + VALUE + 64 for a in usable)  # the next chunk's
    # the allocator's work is the server's kind (callpath.c charges its instructions)
    server = header["work_kinds"].index("server")
    assert all(header["site_kinds"][sites.index(s)] == server
               for s in ("alloc.malloc", "alloc.free", "alloc.usable_size"))


def test_traced_mset_chains_the_old_values_reads(tmp_path):
    """MSET k over a RAW value: the old value's reads form one chain, as their addresses do
    natively: the object's value pointer, the value's sds type byte (sdsAllocPtr) from it,
    and every read of the next chunk's size field from a read of the block's own size
    field (malloc_usable_size's inuse test, at the block plus the size read)."""
    header, rec = _set_then_mset(tmp_path)
    sites = header["sites"]
    at = np.flatnonzero((rec["kind"] == traces.KIND_MARKER)
                        & (rec["flags"] == traces.MARK_COMMAND))
    first = int(at[-1])  # the MSET's records: rec[first:]
    load = rec["kind"] == traces.KIND_LOAD

    def producer(i: int) -> int:
        assert rec["dep"][i] > 0, (i, sites[rec["site"][i]])
        return i - int(rec["dep"][i])

    value = sites.index("obj.value")
    typebytes = [i for i in range(first, rec.size) if load[i] and rec["site"][i] == value
                 and rec["size"][i] == 1]
    assert typebytes  # sdsAllocPtr's read of the old value's type byte
    i = typebytes[0]
    block = int(rec["addr"][i]) - 4  # a 300-byte value's sdshdr16: five bytes
    ptr = producer(i)  # the object's value pointer, its own read after the lookup's bucket
    assert load[ptr] and rec["size"][ptr] == 8 and producer(ptr) < ptr
    # glibc's request2size of the sds (5-byte header, the bytes, the NUL) less SIZE_SZ: the
    # next chunk's size field lies at the block plus its usable size
    nextsize = block + ((5 + VALUE + 1 + 8 + 15) & ~15) - 8
    # (musable's pair is two records in a row, size then next; the block's size field is
    # also the chunk before's next size field: a read right after another alloc.usable_size
    # record may be that, and is left out)
    usable = sites.index("alloc.usable_size")
    sizes = [j for j in range(first, rec.size - 1) if load[j] and rec["site"][j] == usable
             and int(rec["addr"][j]) == block - 8 and rec["site"][j - 1] != usable]
    assert sizes
    for j in sizes:
        assert rec["site"][j + 1] == usable and int(rec["addr"][j + 1]) == nextsize
        assert producer(j + 1) == j


def _tiny(path: Path, records: list[tuple[int, int, int, int]], sites: list[str]) -> None:
    """A trace of (kind, addr, size, site) records (no warm-up: all measured)."""
    r = np.zeros(len(records), dtype=traces.RECORD_DTYPE)
    for i, (kind, addr, size, site) in enumerate(records):
        r["kind"][i], r["addr"][i], r["size"][i], r["site"][i] = kind, addr, size, site
    with traces.Writer(path, {"sites": sites}, codec="zstd") as w:
        w.write(r)


def test_whole_line_stores_miss_only_when_fetched(tmp_path):
    """A 64-byte store to a cold line allocates it unfetched in the model (no last-level
    miss) and misses when stores are fetched; a load misses both ways; each miss is counted
    at its record's site."""
    src = tmp_path / "t.kvt"
    sites = ["none", "a.store", "b.load"]
    _tiny(src, [(traces.KIND_STORE, 1 << 20, 64, 1), (traces.KIND_STORE, 2 << 20, 64, 1),
                (traces.KIND_LOAD, 3 << 20, 8, 2), (traces.KIND_STORE, 4 << 20 | 8, 8, 1)],
          sites)
    caches = {"D1": {"size": 4096, "assoc": 4, "line": 64},
              "LL": {"size": 65536, "assoc": 8, "line": 64}}
    got = M.site_misses(src, M.cachegrind_cpu(caches), 1, tmp_path)
    assert got["model"]["by_site"] == {"b.load": 1.0, "a.store": 1.0}  # the partial store
    assert got["model"]["ll_misses"] == 2.0
    assert got["fetched"]["by_site"] == {"a.store": 3.0, "b.load": 1.0}
    assert got["fetched"]["ll_misses"] == 4.0
    assert sim.simulate(str(src), M.cachegrind_cpu(caches), functional=True, tlb=False,
                        prefetchers=False)["levels"][1]["demand_misses"] == 2


def test_native_groups_sum_the_allocator():
    top = [["__memcpy_avx_unaligned_erms", 25.5], ["malloc_usable_size", 8.6],
           ["_int_free", 2.1], ["findBucket", 4.4]]
    assert M.native_groups(top) == {"allocator": 10.7, "rest": 29.9}


def test_bad_native_file_is_one_line(tmp_path, capsys):
    bad = tmp_path / "x.json"
    bad.write_text(json.dumps({"cells": []}))
    with pytest.raises(SystemExit) as e:
        M.main(["--native", str(bad)])
    assert e.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(
        f"python -m kvsim.experiments.server_missites: error: --native {bad}")
