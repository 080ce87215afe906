"""experiments/trace_length.py: a validation row's prediction as its trace doubles, and the
MSET rows tracing what their native runs time."""

from __future__ import annotations

import json

from kvsim.experiments import trace_length, validation

PAIRS = validation._pairs


def _tiny(scale):
    out = []
    for p in PAIRS(scale):
        if p["row"].split()[0] == "MSET":
            p = json.loads(json.dumps(p))
            p["common"]["keys"], p["common"]["ops"] = 2000, 40
            out.append(p)
    return out


def test_mset_rows_trace_every_command_the_native_run_times():
    for scale in ("small", "full"):
        rows = [p for p in PAIRS(scale) if p["workload"] == "mset"]
        assert len(rows) == 3
        for p in rows:
            for side in ("a", "b"):
                assert validation._sim_opts(p, side)["ops"] == p["common"]["ops"]


def test_points_double_and_a_shared_side_runs_once(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(validation, "_pairs", _tiny)
    calls = []
    real = trace_length.predict

    def counting(workload, options, cpu):
        calls.append(options["ops"])
        return real(workload, options, cpu)

    monkeypatch.setattr(trace_length, "predict", counting)
    out = tmp_path / "tl.json"
    assert trace_length.main(["--cpu", "epyc-7713", "--ops", "20,80", "--out", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert "provenance" in doc and doc["family"] == "MSET"
    assert [(r["row"], r["side"]) for r in doc["rows"]] == [
        (p["row"], s) for p in _tiny("small") for s in ("baseline", "variant")]
    for r in doc["rows"]:
        pts = r["points"]
        assert [x["ops"] for x in pts] == [20, 40, 80], "the traced count (40) is among them"
        assert r["traced_ops"] == r["native_ops"] == 40
        assert pts[0]["move_from_previous"] is None
        for a, b in zip(pts, pts[1:], strict=False):
            assert b["operations"] == b["ops"] and b["ns_per_op"] > 0
            assert abs(b["move_from_previous"] - (b["ns_per_op"] / a["ns_per_op"] - 1)) < 1e-12
    # the dict's baseline is the same trace in two rows: simulated once
    base = [r for r in doc["rows"] if r["side"] == "baseline" and "dict" in r["row"]]
    assert base[0]["points"] == base[1]["points"]
    assert len(calls) == 5 * 3
    assert "# wrote" in capsys.readouterr().out


def test_bad_input_is_one_line_and_no_file(tmp_path, capsys):
    out = tmp_path / "tl.json"
    for args in (["--cpu", "no-such-cpu"], ["--cpu", "epyc-7713", "--ops", "0"],
                 ["--cpu", "epyc-7713", "--ops", "x"],
                 ["--cpu", "epyc-7713", "--family", "NOPE"]):
        assert trace_length.main([*args, "--out", str(out)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("python -m kvsim.experiments.trace_length")
        assert not out.exists()
