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


# --- ChampSim -> kvt -------------------------------------------------------------------------
def _c_ref_like(n: int, seed: int) -> np.ndarray:
    """Loads and stores inside one line (as c_ref emits them), deps on recent loads."""
    rng = np.random.default_rng(seed)
    r = np.zeros(n, dtype=traces.RECORD_DTYPE)
    r["kind"] = rng.choice([0, 0, 1], n)
    r["size"] = rng.choice([1, 4, 8, 16], n)
    line = rng.integers(1, 1 << 34, n, dtype=np.uint64) * np.uint64(64)
    off = rng.integers(0, 64, n).astype(np.uint64) % (np.uint64(65) - r["size"])
    r["addr"] = line + off
    r["gap"] = rng.integers(0, 40, n)
    back = rng.integers(1, 30, n)
    src = np.arange(n) - back
    ok = (src >= 0) & (rng.random(n) < 0.4)
    ok[ok] = r["kind"][src[ok]] == 0
    r["dep"] = np.where(ok, back, 0)
    return r


@pytest.mark.parametrize("suffix", [".champsimtrace", ".champsimtrace.gz",
                                    ".champsimtrace.xz"])
def test_kvt_champsim_kvt_keeps_loads_stores_in_order(suffix: str, tmp_path: Path) -> None:
    from kvsim.traces.convert import convert

    rec = _c_ref_like(20_000, 4)
    src = tmp_path / "a.kvt"
    with traces.Writer(src, {}, chunk_records=3001) as w:
        w.write(rec)
    convert(str(src), str(tmp_path / f"t{suffix}"))
    convert(str(tmp_path / f"t{suffix}"), str(tmp_path / "b.kvt"))  # format from content
    back = traces.read_all(tmp_path / "b.kvt")
    for f in ("addr", "kind", "gap", "dep"):
        np.testing.assert_array_equal(back[f], rec[f], err_msg=f)
    # an imported access is 8 bytes, clipped at its line's end
    expected = np.minimum(8, 64 - (rec["addr"] % 64))
    np.testing.assert_array_equal(back["size"], expected)


def test_import_orders_an_instructions_loads_before_stores() -> None:
    from kvsim.traces.convert.champsim import champsim_to_records

    ins = np.zeros(5, dtype=CHAMPSIM_DTYPE)
    ins["ip"] = 0x1000
    ins[1]["source_memory"] = [0x100, 0, 0x13C, 0]  # zeros are empty slots
    ins[1]["destination_memory"] = [0x200, 0]
    ins[1]["destination_registers"] = [9, 0]
    ins[4]["source_memory"][0] = 0x300
    ins[4]["source_registers"] = [9, 0, 0, 0]  # reads what instruction 1 loaded
    stats: dict = {}
    rec = np.concatenate(list(champsim_to_records([ins[:3], ins[3:]], stats=stats)))
    assert rec["addr"].tolist() == [0x100, 0x13C, 0x200, 0x300]
    assert rec["kind"].tolist() == [0, 0, 1, 0]
    assert rec["gap"].tolist() == [1, 0, 0, 2]
    assert rec["size"].tolist() == [8, 4, 8, 8]
    assert rec["dep"].tolist() == [0, 0, 0, 2]  # the instruction's last load, 0x13C
    assert stats == {"instructions": 5, "memory_instructions": 2, "loads": 3, "stores": 1,
                     "records": 4, "deps": 1}


def test_a_later_writer_breaks_the_register_dependency() -> None:
    from kvsim.traces.convert.champsim import champsim_to_records

    ins = np.zeros(3, dtype=CHAMPSIM_DTYPE)
    ins[0]["source_memory"][0] = 0x100
    ins[0]["destination_registers"][0] = 9
    ins[1]["destination_registers"][0] = 9  # an add overwrites r9
    ins[2]["source_memory"][0] = 0x200
    ins[2]["source_registers"][0] = 9
    rec = np.concatenate(list(champsim_to_records([ins])))
    assert rec["dep"].tolist() == [0, 0]


def test_truncated_champsim_trace_is_refused(tmp_path: Path) -> None:
    from kvsim.traces.convert.champsim import ChampSimError

    p = tmp_path / "t.champsimtrace"
    p.write_bytes(np.zeros(3, dtype=CHAMPSIM_DTYPE).tobytes()[:-10])
    with pytest.raises(ChampSimError, match="t.champsimtrace.*64 bytes"):
        read_champsim(p)
