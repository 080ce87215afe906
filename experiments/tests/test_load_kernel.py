"""A snapshot load's kernel work in c_ref's traces and its cost (traces/FORMAT.md "System
calls", sim/MODEL.md §6): one ``sys.page_fault`` marker per page the arena first hands out,
before the page's first store; one ``sys.file_read`` per read() of the file, followed by the
store of its bytes; the costs of the CPU file's ``[syscall]`` charged per fault and per byte
read, identically by the compiled engine and the reference, and nothing without them."""

from __future__ import annotations

import numpy as np
import pytest

from kvsim import sim, traces
from kvsim.experiments import cref
from kvsim.sim.config import Syscall

PAGE = 4096


def _trace(tmp_path, value_size: int, keys: int):
    out = tmp_path / f"load-{value_size}.kvt"
    cref.trace("load", out, {"keys": keys, "value_size": value_size, "seed": 3})
    with traces.open(out) as tr:
        header = tr.header
    return out, header, traces.read_all(out)


def _measured(rec: np.ndarray) -> np.ndarray:
    """The index of every record after the trace's last WARMUP_END."""
    marker = rec["kind"] == traces.KIND_MARKER
    ends = np.flatnonzero(marker & (rec["flags"] == traces.MARK_WARMUP_END))
    return np.arange(int(ends[-1]) + 1 if len(ends) else 0, len(rec))


@pytest.mark.parametrize(("value_size", "keys"), [(16384, 64), (65536, 24)])
def test_a_fault_marker_precedes_each_fresh_pages_first_touch(tmp_path, value_size, keys):
    """In the measured load, every page of the arena that no earlier record touched is
    first touched after a fault marker not yet used by another page (one fault per page,
    never after the touch); the markers left over (pages the arena writes untraced: its page
    map, a table's zeroing) are a handful."""
    _, header, rec = _trace(tmp_path, value_size, keys)
    fault = header["sites"].index("sys.page_fault")
    arena = header["arena_base"]
    marker = rec["kind"] == traces.KIND_MARKER
    is_fault = marker & (rec["flags"] == traces.MARK_SYSCALL) & (rec["site"] == fault)
    assert (rec["addr"][is_fault] == PAGE).all()
    start = int(_measured(rec)[0])
    seen: set[int] = set()
    pending = fresh = 0  # fault markers not yet matched to a page; fresh pages touched
    for i in range(len(rec)):
        if is_fault[i]:
            pending += i >= start
            continue
        if rec["kind"][i] not in (traces.KIND_LOAD, traces.KIND_STORE):
            continue
        a, n = int(rec["addr"][i]), max(1, int(rec["size"][i]))
        for page in range(a // PAGE, (a + n - 1) // PAGE + 1):
            if page in seen or page * PAGE < arena:
                continue
            seen.add(page)
            if i >= start:
                fresh += 1
                pending -= 1
                assert pending >= 0, f"record {i}: a fresh page touched before its fault"
    assert fresh > 0 and pending <= 4, (fresh, pending)
    per_key = int(is_fault[start:].sum()) / keys
    # a value's pages and its share of the entry: one fault per 4 KiB of the new objects
    assert value_size / PAGE <= per_key <= value_size / PAGE + 2


def test_file_reads_move_the_snapshot_once(tmp_path):
    """The read() markers of the measured load add up to the snapshot's bytes, and each is
    followed by the store of its bytes at the call's own site."""
    _, header, rec = _trace(tmp_path, 4096, 200)
    site = header["sites"].index("sys.file_read")
    meas = _measured(rec)
    sub = rec[meas]
    is_read = (sub["kind"] == traces.KIND_MARKER) & (sub["flags"] == traces.MARK_SYSCALL) & (
        sub["site"] == site)
    idx = np.flatnonzero(is_read)
    assert len(idx) >= 200  # one refill per 4 KiB block at least
    for i in idx:
        nxt = sub[i + 1]
        assert nxt["kind"] == traces.KIND_STORE and nxt["site"] == site
    # the file: 4 KiB values, 16-byte keys, a few bytes of framing per key
    total = int(sub["addr"][idx].sum())
    assert 200 * (4096 + 16) < total < 200 * (4096 + 16 + 16) + 64


def test_the_costs_are_charged_per_fault_and_per_byte_read(tmp_path):
    """On a load's trace: without the kernel's keys the prediction is the old one; with them
    the cycles charged are each call's cost (faults by count, reads by count and bytes), and
    the compiled engine equals the reference."""
    path, _, _ = _trace(tmp_path, 16384, 16)
    base = sim.load_cpu("xeon-8488c")
    none = base.with_changes(syscall=Syscall())
    call = list(base.syscall.call_ns)
    byte = list(base.syscall.byte_ns)
    a = sim.simulate(path, none)
    kern = base.with_changes(syscall=Syscall(
        (call[0], call[1], call[2], 0.0, 0.0), (byte[0], byte[1], byte[2], 0.0, 0.0)))
    b = sim.simulate(path, kern)  # no load keys: the load predicts as before
    assert a["cycles"] == b["cycles"]
    costs = Syscall((0.0, 0.0, 0.0, 300.0, 1500.0), (0.0, 0.0, 0.0, 0.25, 0.001))
    cpu = base.with_changes(syscall=costs)
    c = sim.simulate(path, cpu)
    ref = sim.simulate(path, cpu, engine="reference")
    assert c["cycles"] == ref["cycles"] and c["syscalls"] == ref["syscalls"]
    tpn = cpu.freq_ghz * cpu.timing_ticks()[0]
    calls, nbytes = c["syscalls"]["calls"], c["syscalls"]["bytes"]
    ticks = 0
    for k, name in ((3, "file_read"), (4, "page_fault")):
        q16 = round(costs.byte_ns[k] * tpn * 65536)
        # every marker's bytes rounded on its own: bounded by half a tick a call
        ticks += calls[name] * round(costs.call_ns[k] * tpn) + nbytes[name] * q16 / 65536
    tps = cpu.timing_ticks()[0]
    assert c["syscalls"]["cycles"] == pytest.approx(ticks / tps, abs=sum(calls.values()) / tps)
    assert c["cycles"] > a["cycles"] + c["syscalls"]["cycles"] * 0.9


def test_predict_compares_before_faults_and_after_with_the_native_rows(monkeypatch, tmp_path):
    """load_split predict at two tiny sizes on a preset: the three predictions in order (each
    adds a kernel cost), the kernel's share only in the later ones, the ratios the
    predictions over the native medians and their intervals; a size without a native row has
    no ratio."""
    from kvsim.experiments import load_split

    monkeypatch.setattr(load_split, "plan", lambda quick: {4096: 32, 8: 64})
    native = {"provenance": {"commit": "x"}, "per_key": [{
        "value_bytes": 4096, "keys": 32,
        "cref": {"cpu_ns_per_key": {"median": 4000.0, "ci95": [3800.0, 4400.0]}},
        "valkey": {"cpu_ns_per_key": {"median": 5000.0, "ci95": None}}}]}
    # the prior build this build itself: its column is "before" exactly
    doc = load_split.predict("xeon-8488c", native, quick=True, log=lambda m: None,
                             prior=cref.binary(), prior_label="this build")
    big, small = doc["rows"]
    assert big["prior"] == big["before"] and small["prior"] == small["before"]
    assert doc["prior_cref"] == {"label": "this build"}
    b, f, a = (big[p]["ns_per_key"] for p in ("before", "faults", "after"))
    assert b < f < a
    assert big["before"]["kernel_ns_per_key"] == 0 < big["faults"]["kernel_ns_per_key"]
    assert big["per_key"]["page_fault"] >= 1 and big["per_key"]["file_read"] >= 1
    r = big["over_cref"]["after"]
    assert r["median"] == pytest.approx(a / 4000) and r["ci95"] == pytest.approx(
        [a / 4400, a / 3800])
    assert big["over_valkey"]["after"]["ci95"] is None
    assert "over_cref" not in small
    # the trace's instructions per key: its measured phase's gaps and accesses, counted here
    path = tmp_path / "small.kvt"
    cref.trace("load", path, load_split._cref_options(8, 64, load_split.PREDICT_ALLOCATOR))
    recs = traces.read_all(path)
    start = np.nonzero((recs["kind"] == traces.KIND_MARKER)
                       & (recs["flags"] == traces.MARK_PHASE) & (recs["addr"] == 1))[0][-1]
    rest = recs[start:]
    counted = int(rest["gap"].sum()) + int((rest["kind"] != traces.KIND_MARKER).sum())
    assert small["instructions_per_key"] == pytest.approx(counted / 64)
    assert big["instructions_per_key"] > small["instructions_per_key"]
    text = load_split.predict_markdown(doc)
    assert text.count("\n| ") == 2 and "Kernel costs on `xeon-8488c`" in text
    assert doc["restart_pages"] == "fresh" and "Ablation" not in text
    assert "prior, before, faults, after" in text and "c_ref of this build" in text


def test_predict_refuses_a_bad_cpu_file_with_one_line(tmp_path):
    import subprocess
    import sys

    bad = tmp_path / "cpu.toml"
    bad.write_text('name = "x"\n[syscall]\npage_fault_ns = -1\n')
    p = subprocess.run([sys.executable, "-m", "kvsim.experiments.load_split", "predict",
                        "--cpu", str(bad), "--native", "", "--out", str(tmp_path / "o.json")],
                       capture_output=True, text=True)
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "Traceback" not in p.stderr
    assert not (tmp_path / "o.json").exists()


def _syscalls(rec: np.ndarray, header: dict, name: str, start: int) -> np.ndarray:
    site = header["sites"].index(name)
    sub = rec[start:]
    return sub[(sub["kind"] == traces.KIND_MARKER) & (sub["flags"] == traces.MARK_SYSCALL)
               & (sub["site"] == site)]


def test_a_load_into_reused_pages_marks_no_fault_and_reads_the_same(tmp_path):
    """--restart-pages reused: the restarted server loads into the pages of an unmeasured
    load before it (the native state under KVSIM_CREF_ARENA_WARM). Its trace's measured
    load marks no page fault where the fresh restart's marks one per 4 KiB of values, reads
    the same calls and bytes, and is the same load otherwise (the same records but the
    markers); the unmeasured load's lines are in the warm-up (its values' lines, which the
    fresh trace's warm-up lacks). Natively that load takes no fault per value page either."""
    keys, size = 48, 16384
    opts = {"keys": keys, "value_size": size, "seed": 3}
    got = {}
    for pages in ("fresh", "reused"):
        out = tmp_path / f"{pages}.kvt"
        cref.trace("load", out, {**opts, "restart_pages": pages})
        with traces.open(out) as tr:
            header = tr.header
        rec = traces.read_all(out)
        start = int(_measured(rec)[0])
        got[pages] = (header, rec, start)
        assert header["workload"]["restart_pages"] == pages
    (hf, fresh, sf), (hr, reused, sr) = got["fresh"], got["reused"]
    assert len(_syscalls(fresh, hf, "sys.page_fault", sf)) >= keys * size // PAGE
    assert len(_syscalls(reused, hr, "sys.page_fault", sr)) == 0
    rf, rr = (_syscalls(r, h, "sys.file_read", s) for r, h, s in
              ((fresh, hf, sf), (reused, hr, sr)))
    assert len(rf) == len(rr) and int(rf["addr"].sum()) == int(rr["addr"].sum())

    def accesses(rec, start):
        sub = rec[start:]
        sub = sub[sub["kind"] != traces.KIND_MARKER]
        return sub[["kind", "addr", "size", "site"]]
    assert np.array_equal(accesses(fresh, sf), accesses(reused, sr))
    # the values' lines the measured load stores into: warm in the reused trace alone
    value_tag = hr["tags"].index("value")
    meas = reused[sr:]
    lines = set((meas["addr"][(meas["kind"] == traces.KIND_STORE)
                              & (meas["tag"] == value_tag)] // 64).tolist())
    assert lines

    def warm_lines(rec, start):
        w = rec[:start]
        return set((w["addr"][w["kind"] != traces.KIND_MARKER] // 64).tolist())
    assert len(lines & warm_lines(reused, sr)) > 0.9 * len(lines)
    assert len(lines & warm_lines(fresh, sf)) < 0.1 * len(lines)
    native = {p: cref.native("load", {**opts, "restart_pages": p}, repeat=2)["minflt_runs"]
              for p in ("fresh", "reused")}
    assert min(native["fresh"]) >= keys * size // PAGE
    assert max(native["reused"]) < keys  # a handful of the C library's own, not a page a value


def test_predict_into_reused_pages_charges_no_fault_and_the_ablation_says_so(monkeypatch):
    """load_split predict --restart-pages reused: no fault per key in the trace, the reads as
    before, compared with the native side that reuses its pages; the ablation without
    whole-line fetches is recorded and named under the table."""
    from kvsim.experiments import load_split

    monkeypatch.setattr(load_split, "plan", lambda quick: {16384: 16})
    side = {k: {"median": v, "ci95": None} for k, v in (
        ("cpu_ns_per_key", 9000.0), ("user_ns_per_key", 6000.0), ("sys_ns_per_key", 3000.0),
        ("minflt_per_key", 0.0))}
    native = {"per_key": [{"value_bytes": 16384, "keys": 16, "cref-arena-reused": side}]}
    doc = load_split.predict("xeon-8488c", native, quick=True, log=lambda m: None,
                             reused=True, no_line_fetch=True)
    (row,) = doc["rows"]
    assert row["per_key"]["page_fault"] == 0 and row["per_key"]["file_read"] >= 2
    assert row["bytes_per_key"]["file_read"] >= 16384
    assert row["native_cref_side"] == "cref-arena-reused"
    assert row["over_cref"]["after"]["median"] == pytest.approx(row["after"]["ns_per_key"] / 9000)
    assert doc["restart_pages"] == "reused" and doc["full_line_store_fetch"] is False
    text = load_split.predict_markdown(doc)
    assert "(reused pages)" in text and "6,000, 3,000, 0.00" in text and "Ablation" in text
