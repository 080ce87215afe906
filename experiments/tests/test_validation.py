"""The validation experiment: its grid covers every seed workload, its tables and plots
follow the cells they are made of, and a rerun resumes.

The run is the real experiment on a reduced grid (four pairs at 20,000 keys, the small
scale's rounds) with a tiny calibration in a temporary cache directory, so it takes well
under a minute.
"""

import hashlib
import json
import statistics
from pathlib import Path

import pandas as pd
import pytest

from kvsim import provenance
from kvsim.experiments import cells, runner, timing, validation
from kvsim.sim import calibrate as cal
from kvsim.sim.local import core_is_known, read_sysfs

PAIRS = validation._pairs  # the experiment's own grid (the run below replaces it)
ROWS = {"KEYS none -> valkey", "GET d10 naive -> lookahead 16", "GET legacy -> unified",
        "load 8 B none -> prefetch-after-key"}


def _tiny_pairs(scale):
    if scale != "small":
        return []
    out = []
    for p in PAIRS("small"):
        if p["row"] not in ROWS:
            continue
        p = json.loads(json.dumps(p))
        if "keys" in p["common"] and p["workload"] != "load":
            p["common"]["keys"] = 20_000
        if p["workload"] == "pipeline":
            p["common"]["ops"], p["sim"]["ops"], p["warmup_ops"] = 50_000, 2_000, 2_000
        if p["workload"] == "load":
            p["common"]["keys"] = 20_000
        out.append(p)
    return out


@pytest.fixture(scope="module")
def calibration(tmp_path_factory):
    """One tiny calibration of this machine for the module, as `kvsim calibrate` writes it
    into the cache (its text): it measures the server loop too, whose wall time grows with
    the machine's load, so it is made once."""
    tmp = tmp_path_factory.mktemp("calibration")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("XDG_CACHE_HOME", str(tmp / "cache"))
        mp.delenv("KVSIM_LOCAL_OVERRIDES", raising=False)
        path = cal.cache_path(read_sysfs())
        cal.calibrate(path, quick=True, max_bytes=4 << 20, rounds=1)
        return path.read_text()


def _cached(calibration):
    """``calibration`` in the cache directory of the environment, where `local` reads it."""
    path = cal.cache_path(read_sysfs())
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(calibration)
    return path


@pytest.fixture(scope="module")
def run(tmp_path_factory, calibration):
    """The experiment on the reduced grid, calibrated (tiny) into a temporary cache."""
    if not core_is_known():
        pytest.skip("this machine's core is not in the table of known cores: a calibration "
                    "gives `local` caches only, no predicted time")
    tmp = tmp_path_factory.mktemp("validation")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("XDG_CACHE_HOME", str(tmp / "cache"))
        mp.delenv("KVSIM_LOCAL_OVERRIDES", raising=False)
        mp.setattr(validation, "_pairs", _tiny_pairs)
        path = _cached(calibration)
        out = tmp / "out"
        first = runner.run(["validation"], out, scale="small", log=lambda m: None)
        again = runner.run(["validation"], out, scale="small", log=lambda m: None)
        yield out, first, again, path


def _cells(out):
    docs = [json.loads(p.read_text()) for p in (out / "validation" / "cells").glob("*.json")]
    return {k: [d for d in docs if d["spec"]["kind"] == k]
            for k in ("calibrate", "native-round", "predict")}


def _table(out, name):
    doc = json.loads((out / "validation" / "validation.json").read_text())
    t = next(t for t in doc["tables"] if t["name"] == name)
    return pd.DataFrame(t["rows"], columns=t["columns"])


def test_every_seed_workload_and_variant_is_a_row():
    for scale in ("small", "full"):
        pairs = PAIRS(scale)
        rows = {p["row"] for p in pairs}
        assert len(rows) == len(pairs), "row names are unique"
        assert validation.HELD_BACK <= rows, "every held-back name is a row"
        assert 0 < len(validation.HELD_BACK) < len(rows)
        assert {p["workload"] for p in pairs} == {"iterate", "pipeline", "mget", "mset", "load"}
        assert {p["common"]["op"] for p in pairs if p["workload"] == "iterate"} == {"keys",
                                                                                  "save"}
        for w in ("mget", "mset"):
            assert {p["common"]["table"] for p in pairs if p["workload"] == w} == {
                "dict", "hashtable"}
        sizes = {p["common"]["value_size"] for p in pairs if p["workload"] == "load"}
        assert min(sizes) == 8 and max(sizes) == 16384
        gets = [p for p in pairs if p["workload"] == "pipeline" and "batch" in p["b"]]
        assert len({p["common"]["depth"] for p in gets}) >= 3
        assert len({p["b"]["batch"] for p in gets}) >= 3
        assert any(p["a"].get("layout") == "legacy" for p in pairs)
        # traced runs are warmed: every trace carries its setup (and pipeline/MGET also
        # --warmup-ops), so the fraction rule is never applied
        specs = runner.plan(["validation"], scale, None)["validation"]
        for s in specs:
            if s["kind"] == "predict":
                assert s["cpu"] == "local"
                assert s["options"]["warm_setup"] == validation.WARM_SETUP != "none"
                assert s["warmup"] is None


def test_rounds_interleave_every_pair_and_rotate():
    specs = runner.plan(["validation"], "full", None)["validation"]
    assert specs[0]["kind"] == "calibrate", "calibrated first, in the same window"
    rounds = [s for s in specs if s["kind"] == "native-round"]
    ids = {p["id"] for p in rounds[0]["pairs"]}
    assert len(ids) == len(PAIRS("full"))
    assert [s["warmup"] for s in rounds].count(True) == 1 and rounds[0]["warmup"]
    firsts = []
    for s in rounds:
        assert [p["id"] for p in s["pairs"]] and {p["id"] for p in s["pairs"]} == ids
        firsts.append(s["pairs"][0]["id"])
    assert len(set(firsts)) == len(firsts), "each round starts with another pair"
    runs, per_run = validation._runs("full")
    assert len({s["params"]["run"] for s in rounds}) == runs >= 2
    assert len(rounds) == runs * per_run + 1


def test_the_speedup_table_follows_the_cells(run):
    out, *_ = run
    got = _cells(out)
    t = _table(out, "validation").set_index("row")
    assert set(t.index) == ROWS
    by_id = {validation._pair_id(p): p for p in _tiny_pairs("small")}
    times = {}
    for d in got["native-round"]:
        if d["spec"]["warmup"]:
            continue
        for pid, v in json.loads(d["metrics"]["times"]).items():
            times.setdefault(pid, []).append((d["spec"]["params"]["round"], v))
    pred = {json.dumps([d["spec"]["workload"], d["spec"]["options"]], sort_keys=True):
            d["metrics"] for d in got["predict"]}
    for pid, p in by_id.items():
        r = t.loc[p["row"]]
        ts = [v for _, v in sorted(times[pid], key=lambda x: x[0])]
        ratios = [v["a"][0] / v["b"][0] for v in ts]
        assert r["native_speedup"] == pytest.approx(statistics.median(ratios))
        boot = timing.bootstrap_ci95(ratios)
        assert (r["native_ci95_low"], r["native_ci95_high"]) == pytest.approx(boot)
        assert r["rounds"] == len(ratios) == 6
        a = pred[json.dumps([p["workload"], validation._sim_opts(p, "a")], sort_keys=True)]
        b = pred[json.dumps([p["workload"], validation._sim_opts(p, "b")], sort_keys=True)]
        assert r["predicted_speedup"] == pytest.approx(a["cycles_per_op"] / b["cycles_per_op"])
        ratio = r["predicted_speedup"] / r["native_speedup"]
        assert r["ratio"] == pytest.approx(ratio)
        assert r["ratio_low"] <= ratio <= r["ratio_high"]
        inside = validation.BAND[0] <= ratio <= validation.BAND[1]
        assert (r["within 0.85-1.15"] == "yes") == inside
        assert r["set"] == ("held back" if p["row"] in validation.HELD_BACK else "tuning")
        assert f"{r['native_speedup']:.2f}x" in r["native [95 % CI]"]
    summary = _table(out, "validation_summary").set_index("set")
    for s, g in t.groupby("set"):
        assert summary.loc[s, "rows"] == len(g)
        assert summary.loc[s, "within 0.85-1.15"] == (g["within 0.85-1.15"] == "yes").sum()


def test_time_per_operation_follows_the_cells(run):
    out, *_ = run
    got = _cells(out)
    t = _table(out, "validation_time")
    pred = {json.dumps([d["spec"]["workload"], d["spec"]["options"]], sort_keys=True):
            d["metrics"] for d in got["predict"]}
    for p in _tiny_pairs("small"):
        for side, label in (("a", "baseline"), ("b", "variant")):
            r = t[(t.row == p["row"]) & (t.side == label)].iloc[0]
            m = pred[json.dumps([p["workload"], validation._sim_opts(p, side)],
                                sort_keys=True)]
            assert r["predicted_ns_per_op"] == pytest.approx(
                m["cycles"] / m["operations"] / m["freq_ghz"])
            assert r["predicted_mlp"] == pytest.approx(m["mlp"])
            assert 0 < r["native_ns_per_op"] and r["ratio"] == pytest.approx(
                r["predicted_ns_per_op"] / r["native_ns_per_op"])


def test_the_calibration_used_is_recorded(run):
    out, _, _, path = run
    t = _table(out, "validation_calibration").set_index("field")["setting"]
    sha = hashlib.sha256(path.read_text().encode()).hexdigest()
    assert t["CPU file"] == provenance.shown_path(str(path)) and t["CPU file SHA-256"] == sha
    assert t["predictions used this file"] == "yes"
    assert t["scale"] == "small"
    assert 0 <= float(t["calibrated, minutes before the first native round ended"]) < 60
    cal_cell = _cells(out)["calibrate"][0]["metrics"]
    assert cal_cell["reused"] is True, "a fresh calibration of this machine is reused"
    assert cal_cell["cpu_file_text"] == path.read_text()
    assert (path.parent / validation.PINNED).read_text() == path.read_text(), \
        "the predictions' copy of the calibration"


def test_the_calibrations_self_check_is_on_the_page(run):
    """The [selfcheck] of the file the predictions used: its status beside the file, then
    every check and replayed point (a failed calibration is never used silently)."""
    import tomllib

    out, _, _, path = run
    sc = tomllib.loads(path.read_text())["selfcheck"]
    t = _table(out, "validation_calibration").set_index("field")["setting"]
    want = "passed" if sc["status"] == "passed" else "NOT PASSED: it failed its self-check"
    assert t["self-check of the calibration"].startswith(want)
    check = _table(out, "validation_selfcheck")
    assert list(check["item"][: len(sc["checks"])]) == [c["check"] for c in sc["checks"]]
    assert len(check) == len(sc["checks"]) + len(sc["replay"])
    off = check[check["ok"] == "no"]
    assert len(off) == sum(not c["ok"] for c in sc["checks"]) + sum(
        r["gated"] and abs(r["ratio"] - 1) > sc["tolerance"] for r in sc["replay"])


def test_plots_draw_the_table_against_y_equals_x(run):
    from matplotlib.figure import Figure

    out, *_ = run
    for png in ("validation.png", "validation_time.png"):
        assert (out / "validation" / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    rows = runner.load_rows(out, "validation")
    for t in validation._tables(rows)[:2]:
        ax = Figure().subplots()
        t.plot.draw(t, ax)
        x, y = t.plot.x, ("predicted_speedup" if t.plot.x == "native_speedup"
                          else "predicted_ns_per_op")
        points = set()
        for line in ax.lines:
            if line.get_marker() in ("o", "s"):
                points |= {(round(a, 9), round(b, 9)) for a, b in zip(*line.get_data(),
                                                                       strict=True)}
        want = {(round(a, 9), round(b, 9)) for a, b in zip(t.frame[x], t.frame[y],
                                                           strict=True)}
        assert points == want
        diag = [ln for ln in ax.lines if ln.get_label() == "y = x"][0]
        assert list(diag.get_xdata()) == list(diag.get_ydata())
        band = ax.collections[0].get_paths()[0].vertices
        xs, ys = band[:, 0], band[:, 1]
        assert min(ys / xs) == pytest.approx(0.85) and max(ys / xs) == pytest.approx(1.15)


def test_a_rerun_computes_nothing(run):
    _, first, again, _ = run
    assert first["failed"] == [] and first["computed"] == first["total"]
    assert again["computed"] == 0 and again["already_done"] == first["total"]


def test_a_stale_calibration_is_measured_again(tmp_path, monkeypatch, calibration):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    path = cal.cache_path(read_sysfs())
    calls = []

    def fake(output, quick):  # writes where the real one writes a calibration that passed
        calls.append(quick)
        out = Path(output) if output is not None else path
        out.write_text(old)
        return out

    old = _cached(calibration).read_text()  # `kvsim calibrate`'s, of this module
    monkeypatch.setattr(cal, "calibrate", fake)
    m = cells.run_cell({"kind": "calibrate", "quick": True, "fresh_s": 0, "params": {},
                        "experiment": "validation"})["metrics"]
    assert calls == [True] and m["reused"] is False
    m = cells.run_cell({"kind": "calibrate", "quick": True, "fresh_s": 3600, "params": {},
                        "experiment": "validation"})["metrics"]
    assert calls == [True] and m["reused"] is True


def test_a_cpu_file_replaces_local_in_the_predictions(tmp_path):
    from kvsim.sim.config import PRESET_DIR

    f = tmp_path / "variant.toml"
    f.write_text((PRESET_DIR / "graviton3.toml").read_text())
    specs = validation._cells("small", ["graviton3", str(f)])
    preds = [s for s in specs if s["kind"] == "predict"]
    sha = hashlib.sha256(f.read_text().encode()).hexdigest()
    assert preds and all(s["cpu"] == str(f.resolve()) and s["cpu_sha256"] == sha for s in preds)
    base = validation._cells("small", ["graviton3"])  # presets alone: `local`
    assert all(s["cpu"] == "local" and "cpu_sha256" not in s for s in base
               if s["kind"] == "predict")
    # the calibration and the native rounds are the same cells either way
    assert [s for s in base if s["kind"] != "predict"] == [s for s in specs
                                                          if s["kind"] != "predict"]
    with pytest.raises(ValueError, match="one CPU file"):
        validation._cells("small", [str(f), str(tmp_path / "other.toml")])


def test_a_fraction_warmup_counts_the_keys_of_the_measured_records():
    """With the --warmup fraction rule on a trace without its setup, KEYS over N keys counts
    (1 - fraction) x N operations: the simulator's records are the measured ones already."""
    m = validation._predict({"workload": "iterate", "cpu": "graviton3", "warmup": 0.2,
                             "options": {"keys": 4000, "op": "keys", "variant": "none",
                                         "warm_setup": "none"}})
    assert m["operations"] == pytest.approx(3200, rel=0.01)
    assert m["records"] / (m["records"] + m["warmup_records"]) == pytest.approx(0.8, rel=0.01)
