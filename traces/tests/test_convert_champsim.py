"""ChampSim input_instr export: layout, fillers, line splits, register dependencies."""

from __future__ import annotations

import ctypes
import io
from pathlib import Path

import numpy as np
import pytest
from trace_helpers import random_records

from kvsim import traces
from kvsim.traces.convert.champsim import (
    CHAMPSIM_DTYPE,
    FILLER_IP,
    REG_POOL,
    SITE_IP_BASE,
    read_champsim,
    records_to_champsim,
)


class InputInstr(ctypes.Structure):
    """ChampSim's input_instr as documented in simulators.md (natural alignment)."""

    _fields_ = [("ip", ctypes.c_uint64), ("is_branch", ctypes.c_uint8),
                ("branch_taken", ctypes.c_uint8),
                ("destination_registers", ctypes.c_uint8 * 2),
                ("source_registers", ctypes.c_uint8 * 4),
                ("destination_memory", ctypes.c_uint64 * 2),
                ("source_memory", ctypes.c_uint64 * 4)]


def test_dtype_matches_documented_struct() -> None:
    assert ctypes.sizeof(InputInstr) == CHAMPSIM_DTYPE.itemsize == 64
    for name, *_ in InputInstr._fields_:
        assert getattr(InputInstr, name).offset == CHAMPSIM_DTYPE.fields[name][1], name
    assert not set(REG_POOL.tolist()) & {0, 6, 25, 26}


def _rec(rows: list[tuple[int, int, int, int, int, int]]) -> np.ndarray:
    """rows of (kind, addr, size, gap, dep, site)."""
    r = np.zeros(len(rows), dtype=traces.RECORD_DTYPE)
    for i, (k, a, s, g, d, site) in enumerate(rows):
        r[i] = (a, g, d, s, k, 0, site, 0)
    return r


def test_mapping_fillers_lines_and_deps() -> None:
    L, S, P, M = (traces.KIND_LOAD, traces.KIND_STORE, traces.KIND_PREFETCH,
                  traces.KIND_MARKER)
    rec = _rec([
        (L, 0x1000, 8, 2, 0, 1),      # 2 fillers, then load -> reg pool[0]
        (M, 5, 0, 1, 0, 0),           # marker: its gap 1 carries over
        (L, 0x203C, 200, 0, 2, 2),    # depends on record 0; spans 5 lines (4 kept)
        (S, 0x30FC, 8, 0, 1, 3),      # depends on record 2; spans 2 lines
        (P, 0x4000, 1, 0, 0, 4),      # prefetch as a load
        (L, 0, 8, 0, 0, 5),           # address 0: becomes a filler
        (S, 0x5000, 4, 3, 0, 6),
    ])
    buf = io.BytesIO()
    stats = records_to_champsim(rec, buf)
    ins = np.frombuffer(buf.getvalue(), dtype=CHAMPSIM_DTYPE)
    ips = ins["ip"].tolist()
    F = FILLER_IP
    assert ips == [F, F, SITE_IP_BASE + 4, F, SITE_IP_BASE + 8, SITE_IP_BASE + 12,
                   SITE_IP_BASE + 16, F, F, F, F, SITE_IP_BASE + 24]
    assert stats == {"instructions": 12, "memory_instructions": 5, "fillers": 7,
                     "lines_lost": 1, "zero_addr": 1, "deps_kept": 2, "deps_lost": 0}
    mem = ins[ins["ip"] != F]
    assert mem["source_memory"].tolist()[0] == [0x1000, 0, 0, 0]
    assert mem["source_memory"].tolist()[1] == [0x203C, 0x2040, 0x2080, 0x20C0]
    assert mem["destination_memory"].tolist()[2] == [0x30FC, 0x3100]
    assert mem["source_memory"].tolist()[3] == [0x4000, 0, 0, 0]
    assert mem["destination_memory"].tolist()[4] == [0x5000, 0]
    r0, r1 = REG_POOL[0], REG_POOL[1]
    assert mem["destination_registers"].tolist() == [[r0, 0], [r1, 0], [0, 0], [0, 0], [0, 0]]
    assert [s[0] for s in mem["source_registers"].tolist()] == [0, r0, r1, 0, 0]
    assert not ins["is_branch"].any()
    fill = ins[ins["ip"] == F]
    assert not fill["source_memory"].any() and not fill["destination_memory"].any()


def test_dependency_lost_after_register_reuse() -> None:
    n = len(REG_POOL)
    L = traces.KIND_LOAD
    rows = [(L, 0x1000 + 64 * i, 8, 0, 0, 0) for i in range(n + 2)]
    rows.append((L, 0x9000, 8, 0, n + 2, 0))  # names record 0: its register was reused
    rows.append((L, 0x9040, 8, 0, n, 0))      # names record 2: still live
    stats = records_to_champsim(_rec(rows), io.BytesIO())
    assert stats["deps_kept"] == 1 and stats["deps_lost"] == 1


def test_chunked_input_gives_identical_bytes(tmp_path: Path) -> None:
    rec = random_records(3000, 4)
    dep = np.random.default_rng(1).integers(0, 80, rec.size)
    src = np.arange(rec.size) - dep
    ok = (dep > 0) & (src >= 0) & (rec["kind"] != traces.KIND_MARKER)
    ok[ok] = rec["kind"][src[ok]] == traces.KIND_LOAD
    rec["dep"] = np.where(ok, dep, 0)  # FORMAT.md: a dep names an earlier load
    rec["gap"] %= 7
    whole = io.BytesIO()
    s1 = records_to_champsim(rec, whole)
    kvt = tmp_path / "t.kvt"
    with traces.Writer(kvt, {}, chunk_records=257) as w:
        w.write(rec)
    chunked = io.BytesIO()
    with traces.open(kvt) as tr:
        s2 = records_to_champsim(tr, chunked)
    assert s1 == s2
    assert whole.getvalue() == chunked.getvalue()
    assert s1["instructions"] * 64 == len(whole.getvalue())


@pytest.mark.parametrize("suffix", ["", ".gz", ".xz", ".bz2"])
def test_compressed_files_roundtrip(tmp_path: Path, suffix: str) -> None:
    rec = _rec([(traces.KIND_LOAD, 0x1000 * (i + 1), 8, i % 3, 0, i) for i in range(50)])
    p = tmp_path / f"t.champsimtrace{suffix}"
    stats = records_to_champsim(rec, p)
    ins = read_champsim(p)
    assert ins.size == stats["instructions"] == 50 + sum(i % 3 for i in range(50))
    assert sorted(x.name for x in tmp_path.iterdir()) == [p.name]
    mem = ins[ins["ip"] != FILLER_IP]
    assert mem["source_memory"][:, 0].tolist() == rec["addr"].tolist()
    again = tmp_path / f"u.champsimtrace{suffix}"
    records_to_champsim(rec, again)
    assert again.read_bytes() == p.read_bytes()  # deterministic, including compression
