"""The `server` study (experiments/server_study.py): the cut of a traced server's trace into
warm-up and measured requests, a prediction from a real traced server on loopback at a tiny
scale (bounded requests; the server is stopped), the native cells' reuse, and the tables."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from kvsim import sim, traces
from kvsim.experiments import framework
from kvsim.experiments import server_study as S

HEADER = {"producer": {"name": "tests", "version": "0", "git_commit": None},
          "sites": ["none", "w"], "markers": list(traces.MARKER_NAMES)}


def _commands(n: int) -> np.ndarray:
    """n commands: a COMMAND marker, a load and a store depending on it, 3 records each."""
    r = np.zeros(3 * n, dtype=traces.RECORD_DTYPE)
    r["kind"][0::3], r["flags"][0::3], r["addr"][0::3] = traces.KIND_MARKER, \
        traces.MARK_COMMAND, np.arange(n)
    r["kind"][1::3], r["addr"][1::3], r["size"][1::3] = traces.KIND_LOAD, 4096, 8
    r["kind"][2::3], r["addr"][2::3], r["size"][2::3] = traces.KIND_STORE, 8192, 8
    r["dep"][2::3] = 1
    r["dep"][4::3] = 3  # a load depending on the previous command's load, across a marker
    r["gap"][1:] = 5
    return r


@pytest.mark.parametrize("chunk", [7, 1000])
def test_measured_trace_cuts_at_the_commands(tmp_path: Path, chunk: int) -> None:
    src, dst = tmp_path / "s.kvt", tmp_path / "d.kvt"
    rec = _commands(20)
    with traces.Writer(src, HEADER, chunk_records=chunk) as w:
        w.write(rec)
    got = S.measured_trace(src, dst, requests=10, after=2)
    assert got == {"commands": 20, "measured_commands": 10}
    out = traces.read_all(dst)  # read back: every record rule holds, deps included
    assert out.size == rec.size + 1
    m = out[out["kind"] == traces.KIND_MARKER]
    assert list(m["flags"][:2]) == [traces.MARK_WARMUP_BEGIN, traces.MARK_COMMAND]
    # commands 0..7 warm-up, 8..17 measured (8's marker is the boundary), 18.. warm-up
    assert m["flags"][1 + 8] == traces.MARK_WARMUP_END
    assert m["flags"][1 + 18] == traces.MARK_WARMUP_BEGIN
    res = sim.simulate(dst, "xeon-8488c")
    assert res["records"] == 10 * 3 - 1  # the measured commands but the boundary marker
    with pytest.raises(ValueError, match="fewer than the 30 requests"):
        S.measured_trace(src, tmp_path / "x.kvt", requests=30)


def test_bench_spec_names() -> None:
    assert S.bench_spec("get-p10", 100, 95, 256)["pipeline"] == 10
    assert S.bench_spec("get-p10", 100, 95, 256)["requests"] == 100  # whole pipelines
    s = S.bench_spec("mget-100-p10", 100, 50, 100)
    assert (s["op"], s["keys_per_command"], s["pipeline"]) == ("mget", 100, 10)
    with pytest.raises(ValueError):
        S.bench_spec("hget-3", 100, 10, 10)


@pytest.mark.skipif(shutil.which("redis-benchmark") is None, reason="redis-tools not installed")
def test_prediction_from_the_traced_server(tmp_path: Path, monkeypatch) -> None:
    """A real traced server on loopback, 2,000 keys, 400 bounded requests per side: the
    measured region holds the benchmark's requests, with SYSCALL markers at sys.* sites."""
    monkeypatch.setattr(S, "trace_cache", lambda: tmp_path)
    spec = S.bench_spec("get-p10", 2000, 400, 64)
    m = S.predict(spec, "xeon-8488c", S.SERVER_ARGS)
    assert m["pred_rps_a"] > 0 and m["pred_rps_b"] > 0
    assert m["pred_speedup"] == pytest.approx(m["pred_rps_b"] / m["pred_rps_a"])
    assert 0 < m["pred_syscall_share_a"] < 1
    trace = S.traced_side(spec, 0, S.SERVER_ARGS)  # kept: the same file, not traced again
    with traces.open(trace) as tr:
        sites = tr.header["sites"]
        rec = np.concatenate(list(tr))
    assert all(s in sites for s in traces.SYSCALL_SITES)
    sysm = rec[(rec["kind"] == traces.KIND_MARKER) & (rec["flags"] == traces.MARK_SYSCALL)]
    names = {sites[s] for s in np.unique(sysm["site"])}
    assert names == {"sys.read", "sys.write", "sys.epoll_wait"}  # a server's: no load's calls
    res = sim.simulate(trace, "xeon-8488c")
    assert res["syscalls"]["calls"]["read"] >= 400 // 10 // 50  # a read per pipeline, at least
    assert res["commands"]["count"] >= 399  # the measured requests (the boundary's uncounted)
    assert len(list(tmp_path.glob("*.kvt"))) == 2  # the two sides, no raw trace left


def test_native_cell_reuses_a_matching_result(tmp_path: Path) -> None:
    spec = S.bench_spec("get-p1", 1000, 100, 256)
    doc = {"provenance": {"commit": "abc"}, "cells": [
        {"cell": "get-p1", "spec": {**spec, "batch_a": 0, "batch_b": 16},
         "metrics": {"cref_cpu_speedup": 1.5}}]}
    f = tmp_path / "native.json"
    f.write_text(json.dumps(doc))
    got = S._run_native({"cell": "get-p1", "keys": 1000, "requests": 100, "value_size": 256,
                         "rounds": 3, "reuse": str(f)})
    assert got["cref_cpu_speedup"] == 1.5 and got["native_commit"] == "abc"


def test_tables_and_diagnoses() -> None:
    rows = pd.DataFrame([
        {"kind": "server-predict", "cpu": "local", "cell": "get-p1", "row": "this machine",
         "pred_rps_a": 100.0, "pred_rps_b": 200.0, "pred_speedup": 2.0,
         "pred_syscall_share_a": 0.5},
        {"kind": "server-native", "cpu": None, "cell": "get-p1", "row": "this machine",
         "cref_cpu_a_rps_median": 100.0, "cref_cpu_b_rps_median": 120.0,
         "cref_cpu_speedup": 1.2, "valkey_cpu_a_rps_median": 90.0,
         "valkey_cpu_b_rps_median": 100.0, "valkey_cpu_speedup": 1.1},
        {"kind": "server-predict", "cpu": "epyc-7713", "cell": "get-p10",
         "row": S._seed_rows()[0]["row"], "pred_rps_a": 3.5e5, "pred_rps_b": 6e5,
         "pred_speedup": 6 / 3.5},
    ])
    main, seeds = S._tables(rows)
    line = main.frame.iloc[0]
    assert line["ratio_cref_a"] == 1.0 and line["ratio_cref_speedup"] == pytest.approx(2 / 1.2)
    assert "cref_speedup 1.67" in line["diagnosis"] and "keyspace" in line["diagnosis"]
    s = seeds.frame.iloc[0]
    assert s["ratio_speedup"] == pytest.approx((6 / 3.5) / (604375.69 / 352795.91))
    assert s["diagnosis"] == ""  # in the band


def test_registered_with_every_cpu() -> None:
    cells = framework.get("server").cells("small", ["epyc-7713", "local"])
    kinds = {(c["kind"], c.get("cpu")) for c in cells}
    assert ("server-predict", "local") in kinds and ("server-native", None) in kinds
    assert ("server-predict", "epyc-7713") in kinds


def test_headline_gains_the_server_rows() -> None:
    """The headline's table: the keyspace rows as before, then one line per server row with
    its seed, both native servers' speedups and the prediction per CPU."""
    from kvsim.experiments import studies

    cells = studies._headline_cells("small", ["epyc-7713"])
    server = [c for c in cells if c["kind"].startswith("server-")]
    assert {c["params"]["row"] for c in server} == {r for r, _, _ in S.HEADLINE}
    row0 = studies._headline_rows("small")[0]["row"]
    rows = pd.DataFrame([
        {"kind": "sim", "cpu": "epyc-7713", "row": row0, "variant": "variant",
         "speedup": 2.0, "baseline": False, "spec": json.dumps({"options": {"keys": 1}})},
        {"kind": "server-predict", "cpu": "epyc-7713", "row": S.HEADLINE[0][0],
         "pred_speedup": 1.25, "spec": json.dumps({"keys": 1})},
        {"kind": "server-native", "cpu": None, "row": S.HEADLINE[0][0],
         "valkey_cpu_speedup": 1.4, "valkey_cpu_speedup_ci95_low": 1.3,
         "valkey_cpu_speedup_ci95_high": 1.45, "valkey_cpu_verdict": "faster",
         "cref_cpu_speedup": 1.5, "cref_cpu_speedup_ci95_low": 0.9,
         "cref_cpu_speedup_ci95_high": 1.6, "cref_cpu_verdict": "within noise",
         "spec": json.dumps({"keys": 1})},
    ])
    t = studies._headline_tables(rows)[0].frame
    assert list(t.row) == [row0, S.HEADLINE[0][0]]
    line = t.iloc[1]
    assert line["sim:epyc-7713"] == 1.25 and line["seed"] == S.HEADLINE[0][2]
    assert line["native"] == ("Valkey 1.40x [1.30, 1.45], "
                              "c_ref's server 1.50x [0.90, 1.60] within noise")


def test_compact_warmup_leaves_an_lru_hierarchy_as_the_full_one(tmp_path: Path) -> None:
    """The compact warm-up (each line once, by last touch, stores for written lines) leaves
    an LRU cache as the full warm-up does (an LRU stack orders lines by their last touch):
    the measured region's hits and misses are the same; deps reaching into the replaced
    records are dropped. (Write-backs, and levels below a first one, differ as c_ref's
    compact setup's do: a line written once counts as dirty; results/warm-setup-bound.json.)"""
    rng = np.random.default_rng(7)
    n = 4000
    pre = np.zeros(n, dtype=traces.RECORD_DTYPE)
    pre["kind"] = rng.integers(0, 2, n)
    pre["addr"] = rng.integers(0, 1 << 16, n).astype(np.uint64) * np.uint64(8)
    pre["size"] = rng.choice([8, 64, 200], n)
    pre["tag"] = rng.integers(0, 3, n)
    cmds = _commands(50)
    cmds["addr"][1::3] = rng.integers(0, 1 << 16, 50).astype(np.uint64) * np.uint64(8)
    rec = np.concatenate([pre, cmds])
    hdr = dict(HEADER, tags=["a", "b", "c"])
    src, mid, dst = tmp_path / "s.kvt", tmp_path / "m.kvt", tmp_path / "d.kvt"
    with traces.Writer(src, hdr) as w:
        w.write(rec)
    S.measured_trace(src, tmp_path / "one.kvt", requests=40, after=2)
    with traces.open(tmp_path / "one.kvt") as tr, traces.Writer(mid, tr.header,
                                                               chunk_records=500) as w:
        for c in tr:  # many chunks: the boundary falls inside one
            w.write(c)
    got = S.compact_warmup(mid, dst)
    assert got["replaced_records"] == n + 1 + 8 * 3  # WARMUP_BEGIN, the prefix, 8 commands
    head = rec[:n + 8 * 3]
    head = head[head["kind"] < traces.KIND_MARKER]
    lines = {int(x) for a, z in zip(head["addr"], head["size"], strict=True)
             for x in range(int(a) >> 6, ((int(a) + int(z) - 1) >> 6) + 1)}
    assert got["warmup_lines"] == len(lines)
    doc = {"name": "lru", "cache": [{"size": "16KiB", "ways": 4}]}
    cpu = sim.config.parse_cpu(doc)
    a, b = (sim.simulate(p, cpu, functional=True) for p in (mid, dst))
    assert a["records"] == b["records"] and a["instructions"] == b["instructions"]
    for k in ("hits", "misses"):
        assert [lv[k] for lv in a["levels"]] == [lv[k] for lv in b["levels"]], k
    assert a["levels"][0]["misses"] > 0 and a["levels"][0]["hits"] > 0
    out = traces.read_all(dst)
    assert out["dep"][got["warmup_lines"] + 1 + 1] == 0  # the first measured load's dep


def test_headline_lines_name_local_as_the_sim_cells_do():
    """A server row's `local` column reads as the keyspace rows' does: `local (uncalibrated)`
    where the cell said so, so the headline has one column per CPU, not two."""
    row = S.HEADLINE[0][0]
    rows = pd.DataFrame([
        {"kind": "server-predict", "row": row, "cpu": "local",
         "cpu_label": "local (uncalibrated)", "pred_speedup": 1.2},
        {"kind": "server-predict", "row": row, "cpu": "epyc-7713", "pred_speedup": 1.1}])
    (line,) = S.headline_lines(rows)
    assert line["sim:local (uncalibrated)"] == 1.2 and "sim:local" not in line
    assert line["sim:epyc-7713"] == 1.1


def test_headline_lines_print_native_speedups_with_their_intervals():
    """A server row's native column prints each server's speedup as the keyspace rows print
    theirs (framework._fmt_native): median [95 % interval], "within noise" where the cell's
    verdict says the interval holds 1.0."""
    from kvsim.experiments.framework import _fmt_native

    row = S.HEADLINE[0][0]
    nat = {"kind": "server-native", "row": row,
           "valkey_cpu_speedup": 1.434, "valkey_cpu_speedup_ci95_low": 1.251,
           "valkey_cpu_speedup_ci95_high": 1.502, "valkey_cpu_verdict": "faster",
           "cref_cpu_speedup": 1.046, "cref_cpu_speedup_ci95_low": 0.97,
           "cref_cpu_speedup_ci95_high": 1.12, "cref_cpu_verdict": "within noise"}
    (line,) = S.headline_lines(pd.DataFrame([nat]))
    assert line["native"] == ("Valkey 1.43x [1.25, 1.50], "
                              "c_ref's server 1.05x [0.97, 1.12] within noise")
    assert line["native_value"] == 1.434
    keyspace = pd.Series({"speedup": 1.046, "speedup_ci95_low": 0.97,
                          "speedup_ci95_high": 1.12, "verdict": "within noise"})
    assert line["native"].endswith(_fmt_native(keyspace))  # one formatter for both


def test_seed_scale_plans_the_seed_rows_alone_at_their_own_keys(monkeypatch) -> None:
    """``--scale seed``: one prediction per seed row on its own preset, no native cell and
    no cell of this machine, each at its seed's own key count up to the cap, the load
    carried by the traced server (``warm: setup``); the other scales keep their keys."""
    from kvsim.experiments import runner

    every = runner.default_cpus()
    cells = framework.get("server").cells("seed", every)
    rows = S._seed_rows()
    assert [c["params"]["row"] for c in cells] == [r["row"] for r in rows]
    assert {c["kind"] for c in cells} == {"server-predict"}
    for c, r in zip(cells, rows, strict=True):
        assert c["cpu"] == r["cpu"] and c["warm"] == "setup"
        assert c["keys"] == min(r["seed_keys"], S.SEED_KEYS_CAP)
    assert sorted({c["keys"] for c in cells}) == [3_000_000, 5_000_000, 10_000_000]
    monkeypatch.setattr(S, "SEED_KEYS_CAP", 4_000_000)
    capped = framework.get("server").cells("seed", every)
    assert [c["keys"] for c in capped] == [min(r["seed_keys"], 4_000_000) for r in rows]
    small = framework.get("server").cells("small", every)
    assert {c["keys"] for c in small} == {S.KEYS["small"]}
    assert not any(c.get("warm") == "setup" for c in small)
    with pytest.raises(ValueError, match="runs at small, full only"):
        runner.plan(["headline"], "seed", ["epyc-7713"])
    assert runner.plan(["server"], "seed", ["graviton4"])["server"][0]["cpu"] == "graviton4"


def test_seed_table_gives_the_keys_simulated() -> None:
    """The seed table's rows carry the keys simulated and the seed's; the scale diagnosis
    is given only where the keys simulated are fewer than the seed's."""
    rows = S._seed_rows()
    frame = pd.DataFrame([
        {"kind": "server-predict", "cpu": rows[0]["cpu"], "cell": rows[0]["cell"],
         "row": rows[0]["row"], "pred_rps_a": 3e5, "pred_rps_b": 3e5, "pred_speedup": 1.0,
         "spec": json.dumps({"keys": 100_000})},
        {"kind": "server-predict", "cpu": rows[3]["cpu"], "cell": rows[3]["cell"],
         "row": rows[3]["row"], "pred_rps_a": 4e4, "pred_rps_b": 4e4, "pred_speedup": 1.0,
         "keys": rows[3]["seed_keys"]},
    ])
    (seeds_t,) = S._tables(frame)  # no cell of this machine: the seed table alone
    assert seeds_t.name == "server_seeds"
    t = seeds_t.frame
    assert {"keys", "seed_keys", "ratio_speedup", "diagnosis"} <= set(t.columns)
    assert list(t["keys"]) == [100_000, rows[3]["seed_keys"]]
    assert list(t["seed_keys"]) == [rows[0]["seed_keys"], rows[3]["seed_keys"]]
    assert "this scale's keyspace" in t["diagnosis"].iloc[0]
    assert "this scale's keyspace" not in t["diagnosis"].iloc[1]
    assert "at the seed's own keys" in t["diagnosis"].iloc[1]


@pytest.mark.skipif(shutil.which("redis-benchmark") is None, reason="redis-tools not installed")
def test_the_setup_carried_by_the_traced_server(tmp_path: Path, monkeypatch) -> None:
    """``setup``: the traced server carries its load (DEBUG SETUP-BEGIN .. SETUP-END) as
    warm-up lines, never as the load's records: its trace is a fraction of the recorded
    one's, holds the same measured requests, and predicts what the load compacted
    afterwards predicts (the same LRU contents; the bound at scale:
    results/server-setup-bound.json)."""
    monkeypatch.setattr(S, "trace_cache", lambda: tmp_path)
    spec = S.bench_spec("get-p10", 3000, 400, 64)
    got = {}
    for form, kw in (("records", {}), ("compact", {"compact": True}),
                     ("setup", {"setup": True})):
        t = S.traced_side(spec, 16, S.SERVER_ARGS, **kw)
        rec = traces.read_all(t)
        got[form] = (rec, sim.simulate(t, "xeon-8488c"))
    n_rec, n_setup = got["records"][0].size, got["setup"][0].size
    assert n_setup < n_rec / 2  # the load's records are gone (some 3,000 MSET keys' worth)
    for form in ("compact", "setup"):
        res = got[form][1]
        assert res["commands"]["count"] == got["records"][1]["commands"]["count"]
        # each form is its own server run: the event loop's waits differ a little
        assert res["instructions"] == pytest.approx(got["records"][1]["instructions"],
                                                    rel=0.02)
    warm = got["setup"][0]
    warm = warm[:np.flatnonzero((warm["kind"] == traces.KIND_MARKER)
                                & (warm["flags"] == traces.MARK_WARMUP_END))[0]]
    lines = warm[(warm["kind"] < traces.KIND_MARKER) & (warm["size"] == 64)
                 & (warm["addr"] % 64 == 0)]
    assert lines.size > 3000  # the keys' lines, one record each
    a, b = got["compact"][1]["cycles"], got["setup"][1]["cycles"]
    assert abs(b / a - 1) < 0.05


def test_debug_setup_commands(tmp_path: Path) -> None:
    """DEBUG SETUP-BEGIN / SETUP-END: OK untraced; traced, a nested SETUP-BEGIN and a
    SETUP-END outside a setup are errors, and the server serves on, the setup's writes
    kept."""
    from kvsim.experiments.server import CrefServer
    from kvsim.experiments.valkey_server import ValkeyError

    with CrefServer(args=list(S.SERVER_ARGS)) as srv, srv.client() as c:
        assert c.call("DEBUG", "SETUP-BEGIN") == "OK"
        assert c.call("DEBUG", "SETUP-END") == "OK"
    args = [*S.SERVER_ARGS, "--trace", str(tmp_path / "t.kvt")]
    with CrefServer(args=args) as srv, srv.client() as c:
        with pytest.raises(ValkeyError, match="no setup is being captured"):
            c.call("DEBUG", "SETUP-END")
        assert c.call("DEBUG", "SETUP-BEGIN") == "OK"
        with pytest.raises(ValkeyError, match="a setup is being captured already"):
            c.call("DEBUG", "SETUP-BEGIN")
        assert c.call("SET", "k", "v") == "OK"
        assert c.call("DEBUG", "SETUP-END") == "OK"
        assert c.call("GET", "k") == b"v"
    assert (tmp_path / "t.kvt").is_file()
