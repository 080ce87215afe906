"""The native load split (experiments/load_split.py): c_ref's per-run system time and page
faults, the per-key arithmetic, a tiny end-to-end run against the real Valkey, bad input."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from kvsim.experiments import cref, load_split
from kvsim.experiments.valkey_server import ToolMissing, server_binary


def _valkey() -> None:
    try:
        server_binary()
    except ToolMissing as exc:
        pytest.skip(f"needs the real server: {exc}")


def test_cref_reports_system_time_and_faults_per_run():
    # a load fills fresh memory: each 64 KiB value is 16 pages first touched in the run
    out = cref.native("load", {"keys": 64, "value_size": 65536, "key_size": 16}, repeat=3)
    assert len(out["sys_runs_s"]) == len(out["minflt_runs"]) == 3
    for cpu, sys_s, flt in zip(out["cpu_runs_s"], out["sys_runs_s"], out["minflt_runs"],
                               strict=True):
        assert 0 <= sys_s <= cpu + 0.01
        assert flt >= 64 * 16


def test_native_load_faults_no_more_pages_than_its_trace_marks(tmp_path):
    # the trace marks each fresh page of the arena once (sys.page_fault); natively each is
    # one fault when its first touch is a write, two when a read comes first (the zero
    # page's fault, then the write's): an object header's bit-fields written by a
    # read-modify-write (c_ref/object.c stringHeader) faulted 60 % more pages at 32 B
    import numpy as np

    from kvsim import traces

    opts = {"keys": 6_000, "value_size": 32, "key_size": 16, "allocator": "arena"}
    path = tmp_path / "load.kvt"
    cref.trace("load", path, opts)
    reader = traces.open(path)
    recs, sites = reader.read_all(), reader.header["sites"]
    marker = recs["kind"] == traces.KIND_MARKER
    start = np.nonzero(marker & (recs["flags"] == traces.MARK_PHASE) & (recs["addr"] == 1))[0]
    rest = recs[start[-1]:]
    marked = int(((rest["kind"] == traces.KIND_MARKER) & (rest["flags"] == traces.MARK_SYSCALL)
                  & (rest["site"] == sites.index("sys.page_fault"))).sum())
    assert marked > 100
    native = cref.native("load", opts, repeat=3)["minflt_runs"]
    # a kernel that maps huge pages faults fewer times; a few faults of the C library's own
    assert min(native) <= marked * 1.1 + 8


def test_the_benchmark_value_is_valkey_benchmarks_generator():
    # the generator's first outputs by hand: state 1234 -> 1103515245 * 1234 + 12345 ...
    state, want = 1234, []
    for _ in range(3):
        state = (state * 1103515245 + 12345) % 2**32
        want.append(chr(ord("0") + (state >> 16) % 64))
    v = load_split.benchmark_value(4096)
    assert v[:3].decode() == "".join(want) and len(v) == 4096
    assert set(v) <= set(range(48, 48 + 64)) and len(set(v)) == 64


def test_per_key_subtracts_the_rounds_empty_server_and_pairs_rounds():
    def run(user, sys_s, flt):
        return {"user_s": user, "sys_s": sys_s, "minflt": flt, "syscr": 0, "rchar": 0,
                "wall_s": None}
    raw = {"plan": {"8": 1000}, "runs": {"8": {
        "empty": [run(0.01, 0.02, 500), run(0.02, 0.02, 600)],
        "valkey-lzf": [run(0.11, 0.07, 1500), run(0.12, 0.06, 1600)],
        "valkey": [run(0.21, 0.02, 2500), run(0.22, 0.02, 2600)],
        "cref": [run(0.05, 0.0, 100), run(0.05, 0.0, 100)]}}}
    (row,) = load_split.per_key(raw)
    lzf = row["valkey-lzf"]
    # (0.11 - 0.01) and (0.12 - 0.02) s user over 1000 keys; 1000 faults each round
    assert lzf["user_ns_per_key"]["median"] == pytest.approx(1e5)
    assert lzf["sys_ns_per_key"]["median"] == pytest.approx(0.045e9 / 1000)
    assert lzf["minflt_per_key"]["median"] == pytest.approx(1.0)
    assert row["valkey_over_cref"]["median"] == pytest.approx(4.0)
    assert row["cref"]["cpu_ns_per_key"]["median"] == pytest.approx(5e4)
    # Valkey's 200 us of user time per key, of which c_ref's 50 covers a quarter
    assert row["valkey_beyond_cref_user"]["user_share"] == pytest.approx(0.75)
    assert row["valkey_beyond_cref_user"]["system_share"] == pytest.approx(0.0)
    assert row["valkey-lzf_beyond_cref_user"]["system_share"] == pytest.approx(45 / 145)
    assert "by_probe" not in lzf  # no kernel probes in this document


def test_per_key_gives_the_checksums_time_paired_per_round():
    # each no-checksum side less its checksummed side, round by round (Valkey's sides less
    # the round's empty server first): the checksum's CPU time per key
    def run(user, sys_s=0.0):
        return {"user_s": user, "sys_s": sys_s, "minflt": 0, "syscr": 0, "rchar": 0,
                "wall_s": None}
    raw = {"plan": {"8": 1000}, "runs": {"8": {
        "empty": [run(0.01), run(0.03)],
        "valkey": [run(0.21), run(0.33)],
        "valkey-nocrc": [run(0.16), run(0.23)],
        "cref-arena-reused": [run(0.10, 0.01), run(0.12)],
        "cref-arena-reused-nocrc": [run(0.07), run(0.10)]}}}
    (row,) = load_split.per_key(raw)
    assert row["valkey_checksum_ns_per_key"]["median"] == pytest.approx(0.075e9 / 1000)
    assert row["valkey_checksum_ns_per_key"]["min"] == pytest.approx(0.05e9 / 1000)
    assert row["cref-arena-reused_checksum_ns_per_key"]["median"] == pytest.approx(3e4)
    assert "cref-arena-reused-nocrc" in load_split.markdown({"per_key": [row]})


def test_the_no_checksum_sides_load_without_it(tmp_path):
    # c_ref's side: --rdbchecksum no, its snapshot cache a file of its own (the cache's
    # header names rdbchecksum); Valkey's: the checksummed side's snapshot, rdbchecksum no
    opts = load_split._cref_options(8, 64, "arena", True, checksum=False)
    assert opts["rdbchecksum"] == "no" and opts["restart_pages"] == "reused"
    assert "rdbchecksum" not in load_split._cref_options(8, 64, "arena", True)
    assert load_split._cref_snapshot(tmp_path, 8, False) != load_split._cref_snapshot(tmp_path, 8)
    assert set(load_split.NOCRC) <= set(load_split.SIDES)
    assert all(b in load_split.SIDES for b in load_split.NOCRC.values())
    got = load_split.load_cref(tmp_path, 256, 64, "arena", True, checksum=False)
    assert got["minflt"] < 64
    head = load_split._cref_snapshot(tmp_path, 256, False).read_bytes().split(b"\n", 1)[0]
    assert b"rdbchecksum=no" in head


def test_by_probe_charges_faults_calls_and_bytes_and_leaves_the_rest_to_user():
    def run(cpu, flt, calls, nbytes):
        return {"user_s": cpu, "sys_s": 0.0, "minflt": flt, "syscr": calls, "rchar": nbytes,
                "wall_s": None}
    empty = run(0.0, 100, 10, 1000)
    raw = {"plan": {"4096": 1000}, "runs": {"4096": {
        "empty": [empty] * 3,
        "valkey": [run(0.01, 1100, 1010, 4_097_000)] * 3,
        "valkey-lzf": [run(0.01, 1100, 20, 41_000)] * 3,
        "cref": [run(0.005, 1200, 0, 0)] * 3}},
        "kernel_runs": [{"first_touch_ns_per_page": 1000.0, "read_ns_per_call": 100.0,
                         "read_ns_per_byte": 0.25}] * 3}
    (row,) = load_split.per_key(raw)
    v = row["valkey"]["by_probe"]
    # per key: 1 fault (1000 ns), 1 read call (100 ns), 4096 bytes (1024 ns)
    assert v["fault_ns_per_key"] == pytest.approx(1000)
    assert v["read_ns_per_key"] == pytest.approx(1124)
    assert v["user_ns_per_key"] == pytest.approx(10_000 - 2124)
    assert row["cref"]["by_probe"]["sys_ns_per_key"] == pytest.approx(1200)


def test_kernel_probe_measures_positive_costs(tmp_path):
    f = tmp_path / "f"
    f.write_bytes(b"x" * (1 << 20))
    k = load_split.kernel_probe(f)
    assert k["first_touch_ns_per_page"] > 0 and k["read_ns_per_byte"] > 0


def test_tiny_end_to_end(tmp_path):
    _valkey()
    data = tmp_path / "data"
    data.mkdir()
    load_split.prepare(data, quick=True, log=lambda m: None)
    out = tmp_path / "r.json"
    assert load_split.main(["measure", str(data), "--rounds", "1", "--out", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert {"commit", "machine", "date_utc", "command"} <= set(doc["provenance"])
    rows = {r["value_bytes"]: r for r in doc["per_key"]}
    assert set(rows) == set(load_split.PLAN)
    # every side faults in at least the 16 pages of each 64 KiB value: c_ref's own count;
    # a Valkey side's whole run (its count less the round's empty server moves by a page or
    # two per key between runs at the quick plan's 16 keys)
    raw = doc["runs"]["65536"]
    keys = doc["plan"]["65536"]
    assert rows[65536]["cref"]["minflt_per_key"]["median"] >= 15.5
    for side in ("valkey", "valkey-lzf"):
        assert raw[side][0]["minflt"] >= 16 * keys
    # valkey-benchmark's value is not compressed: its snapshot is read in full, the
    # repeated byte's is not
    assert raw["valkey"][0]["rchar"] > 16 * 65536 > raw["valkey-lzf"][0]["rchar"]


@pytest.mark.parametrize("args", [["measure", "/nonexistent/dir"], ["prepare", "/nonexistent"]])
def test_a_missing_directory_is_one_line_and_exit_2(args):
    p = subprocess.run([sys.executable, "-m", "kvsim.experiments.load_split", *args],
                       capture_output=True, text=True)
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "Traceback" not in p.stderr


def test_measure_without_prepare_is_one_line_and_exit_2(tmp_path):
    p = subprocess.run([sys.executable, "-m", "kvsim.experiments.load_split", "measure",
                        str(tmp_path)], capture_output=True, text=True)
    assert p.returncode == 2 and "plan.json" in p.stderr and p.stderr.count("\n") == 1


@pytest.mark.parametrize("sizes", ["7", "8,x", ""])
def test_sizes_outside_the_plan_are_one_line_and_exit_2(tmp_path, sizes):
    p = subprocess.run([sys.executable, "-m", "kvsim.experiments.load_split", "prepare",
                        str(tmp_path), "--sizes", sizes], capture_output=True, text=True)
    assert p.returncode == 2 and "--sizes" in p.stderr and p.stderr.count("\n") == 1
    assert not (tmp_path / "plan.json").exists()


def test_plan_keeps_the_sizes_asked_for():
    assert load_split.plan(False, [32, 8]) == {8: 2_000_000, 32: 2_000_000}
    assert set(load_split.plan(True)) == set(load_split.PLAN)
    assert load_split.plan(True, [65536]) == {65536: 16}


def test_sides_keep_the_order_and_add_the_empty_server_for_valkey():
    assert load_split.parse_sides(None) == load_split.SIDES
    assert load_split.parse_sides("cref-arena-reused,cref-arena") == (
        "cref-arena", "cref-arena-reused")
    assert load_split.parse_sides("valkey") == ("empty", "valkey")
    for bad in ("", "cref,x"):
        with pytest.raises(ValueError, match="--sides"):
            load_split.parse_sides(bad)


def test_crefs_sides_alone_measure_without_prepare(tmp_path, monkeypatch):
    # c_ref's sides need no Valkey: the plan is the full one (here two tiny sizes), each
    # snapshot built in DIR by its first load; the reused side takes no fault per value page
    monkeypatch.setattr(load_split, "plan", lambda quick, sizes=None: {4096: 64, 8: 64})
    monkeypatch.setattr(load_split, "kernel_probe", lambda path: {
        "first_touch_ns_per_page": 1000.0, "read_ns_per_byte": 0.2, "read_ns_per_call": 50.0})
    raw = load_split.measure(tmp_path, 1, log=lambda m: None,
                             sides=("cref-arena", "cref-arena-reused"))
    assert set(raw["runs"]["4096"]) == {"cref-arena", "cref-arena-reused"}
    rows = {r["value_bytes"]: r for r in load_split.per_key(raw)}
    assert rows[4096]["cref-arena"]["minflt_per_key"]["median"] >= 1
    assert rows[4096]["cref-arena-reused"]["minflt_per_key"]["median"] < 0.5
    assert "cref-arena-reused" in load_split.markdown({**raw, "per_key": list(rows.values())})
