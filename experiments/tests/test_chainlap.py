"""experiments/chainlap.py: the chainlap loops as records, the overlap per sample, and the
model's window on them."""

from __future__ import annotations

import numpy as np
import pytest

from kvsim import sim, traces
from kvsim.experiments import chainlap


def _measured(rec: np.ndarray) -> np.ndarray:
    marks = np.flatnonzero(rec["kind"] == traces.KIND_MARKER)
    assert rec["flags"][marks].tolist() == [traces.MARK_WARMUP_BEGIN, traces.MARK_WARMUP_END]
    return rec[marks[1] + 1:]


@pytest.mark.parametrize("k", [2, 5])
def test_both_loop_is_two_streams_that_never_depend_on_each_other(k):
    n, steps = 40, 16
    m = _measured(chainlap.records("both", k, n, steps, 1 << 24))
    per = k + chainlap.LOOKUP
    assert len(m) == steps * per
    assert (m["kind"] == traces.KIND_LOAD).all() and (m["size"] == 8).all()
    stream = (m["addr"] % 64 == 8).astype(int)  # 0: the chain's word 0, 1: the lookup's word 1
    assert stream.tolist() == ([0] * k + [1] * chainlap.LOOKUP) * steps
    idx = np.arange(len(m))
    has = m["dep"] > 0
    assert (stream[idx[has] - m["dep"][has].astype(int)] == stream[has]).all()
    # every load but each stream's first has a producer: one serial chase per stream
    assert (~has).sum() == 2 and not has[0] and not has[k]
    gaps = m["gap"].reshape(steps, per)
    assert (gaps[:, 0] == n + chainlap.STEP_END).all() and (gaps[:, k] == n).all()
    assert gaps.sum() == steps * (2 * n + chainlap.STEP_END)
    assert len(set(m["addr"].tolist())) == len(m)  # distinct random lines


@pytest.mark.parametrize("mode,per", [("chain", 3), ("lookup", chainlap.LOOKUP)])
def test_one_stream_loops(mode, per):
    m = _measured(chainlap.records(mode, 3, 52, 10, 1 << 24))
    assert len(m) == 10 * per
    assert m["dep"].tolist() == [0] + [1] * (len(m) - 1)
    assert m["gap"].tolist() == ([52 + chainlap.STEP_END] + [0] * (per - 1)) * 10
    assert ((m["addr"] % 64 == 8) == (mode == "lookup")).all()


def test_bad_input():
    with pytest.raises(chainlap.ChainLapError, match="mode"):
        chainlap.records("all", 2, 0, 4, 1 << 20)
    with pytest.raises(chainlap.ChainLapError, match="fewer lines"):
        chainlap.records("both", 2, 0, 100, 4096)
    assert chainlap.main(["compare", "--native", "/nonexistent.json"]) == 2


def test_overlaps_pair_the_loops_of_one_sample():
    pts = [{"kind": "add", "n": 100, "mode": "lookup", "k": 0, "ns": [4.0, 4.0, 8.0]},
           {"kind": "add", "n": 100, "mode": "chain", "k": 3, "ns": [10.0, 10.0, 10.0]},
           {"kind": "add", "n": 100, "mode": "both", "k": 3, "ns": [12.0, 14.0, 10.0]}]
    (row,) = chainlap.overlaps({"points": pts})
    assert (row["kind"], row["k"], row["n"]) == ("add", 3, 100)
    assert row["overlap_ns"]["median"] == 2.0  # samples 2, 0, 8
    assert row["overlap_share"]["median"] == 0.5  # 0.5, 0, 1
    assert row["overlap_share_from_minimums"] == pytest.approx((10 + 4 - 10) / 4)


def test_the_model_overlaps_what_its_rob_holds():
    """A gap the ROB holds lets the lookup run beside the chain; one it does not hold puts
    it after: the model's overlap follows the ROB, whatever the CPU's latencies."""
    cpu = sim.load_cpu("xeon-8488c")
    n = 200
    held = chainlap.predict(cpu.with_changes(rob=4 * n), 3, n, 300, 1 << 28, 2 << 20)
    cut = chainlap.predict(cpu.with_changes(rob=n // 2), 3, n, 300, 1 << 28, 2 << 20)
    assert held["overlap_share"] > 0.5 > cut["overlap_share"]
    assert cut["both_ns"] > held["both_ns"]


def test_table_has_a_row_per_gap_and_a_column_per_kind_and_model():
    pts = [{"kind": kd, "n": n, "mode": m, "k": k, "ns": [v] * 6}
           for kd in ("nop", "add") for n in (0, 300)
           for m, k, v in (("lookup", 0, 4.0), ("chain", 3, 10.0), ("both", 3, 12.0))]
    rows = chainlap.overlaps({"points": pts})
    for r in rows:
        r["predicted"] = {"m": {"overlap_share": 0.25 if r["n"] else 1.0}}
    text = chainlap.table({"rows": rows, "models": ["m"]})
    lines = text.splitlines()
    assert len(lines) == 2 + 2 and lines[0].count("native,") == 2 and "model: m" in lines[0]
    assert lines[2].startswith("| 0 | 0.50 [0.50, 0.50]; 0.50 to 0.50 |")
    assert lines[2].endswith("| 1.00 to 1.00 |") and lines[3].endswith("| 0.25 to 0.25 |")
    with pytest.raises(chainlap.ChainLapError, match="--k 5"):
        chainlap.table({"rows": rows, "models": ["m"]}, k=5)


def test_speedups_set_each_setting_beside_the_native_speedup():
    cols = ["row", "set", "native_speedup", "native_ci95_low", "native_ci95_high"]
    val = {"tables": [{"name": "validation", "columns": cols,
                       "rows": [["MSET hashtable none -> batch", "held back", 1.5, 1.4, 1.6]]}]}
    side = lambda a, b: {"settings": {"base": {"ns_per_op": a},  # noqa: E731
                                      "rob_x0.5": {"ns_per_op": b}}}
    abl = {"rows": [{"pair": "mset10-hashtable-batch",
                     "predicted": {"base": side(300.0, 400.0), "variant": side(200.0, 250.0)}}]}
    lines = chainlap.speedups(abl, val).splitlines()
    assert len(lines) == 3 and "base: predicted, ratio" in lines[0]
    assert lines[2] == ("| MSET hashtable none -> batch | held back | 1.50x [1.40, 1.60] | "
                        "1.50x, **1.00** | 1.60x, **1.07** |")
    with pytest.raises(chainlap.ChainLapError, match="validation"):
        chainlap.speedups(abl, {"tables": []})


def test_native_without_loops_is_one_error(monkeypatch):
    monkeypatch.setattr(chainlap, "_native", lambda args: {"bench": "chainlap",
                                                           "arch": "other", "points": []})
    with pytest.raises(chainlap.ChainLapError, match="x86-64 only"):
        chainlap.native(1 << 20, "2m", ["add"], [3], [0], 1, 10, 1)


@pytest.mark.parametrize("ks,ns", [("0", "0"), ("2,0", "52"), ("7", "0"), ("2", "51")])
def test_the_binary_refuses_what_it_has_no_loop_for(ks, ns):
    """`kvsim-calibrate chainlap` with a chain length or gap it has no compiled loop for (k 0
    is the lookup alone) exits 2 with one line, never runs a loop that is not there."""
    import platform
    import subprocess

    from kvsim import artifacts

    exe = artifacts.path(artifacts.CALIBRATE_CLI)
    if not exe.exists() or platform.machine() != "x86_64":
        pytest.skip("kvsim-calibrate not built, or chainlap's loops are x86-64 only")
    p = subprocess.run([str(exe), "chainlap", "4k", "65536", "10", "1", "nop", ks, ns],
                       capture_output=True, text=True, check=False)
    assert p.returncode == 2 and p.stdout == ""
    assert len(p.stderr.strip().splitlines()) == 1 and "chainlap" in p.stderr
