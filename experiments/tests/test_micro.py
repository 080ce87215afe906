"""`kvsim micro` (kvsim.experiments.micro): the trace command and its one-line errors (the
traces themselves are tested in sim/tests/test_micro.py)."""

from kvsim import traces
from kvsim.experiments import micro


def test_trace_command_writes_a_readable_trace(tmp_path):
    out = tmp_path / "c.kvt"
    assert micro.main(["trace", str(out), "--working-set", "64KiB", "--chains", "3",
                       "--steps", "50"]) == 0
    rec = traces.read_all(str(out))
    assert (rec["kind"] == traces.KIND_LOAD).sum() == 1024 + 2 * 3 * 50


def test_bad_working_set_is_one_line(tmp_path, capsys):
    assert micro.main(["trace", str(tmp_path / "x.kvt"), "--working-set", "lots"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--working-set" in err[0]
    assert not (tmp_path / "x.kvt").exists()


def test_the_framework_study_sets_each_prediction_beside_its_native_point(tmp_path,
                                                                         monkeypatch):
    """`kvsim experiment run micro` at a tiny size: the native cell's points, each beside the
    prediction at the page size its buffer had (the command's rows_of), ratios from them."""
    import json
    import statistics

    from kvsim import sim
    from kvsim.experiments import runner
    from kvsim.sim.micro import predict

    monkeypatch.setitem(micro.SCALES, "small", {
        "sizes": [16 << 10], "mlp_size": 1 << 20, "chains": [1, 2], "pages": ["4k"],
        "rounds": 2, "loads": 2000, "steps": 400})
    res = runner.run(["micro"], tmp_path / "out", scale="small", cpus=["epyc-7713"],
                     workers=1, log=lambda m: None)
    assert res["failed"] == [] and res["computed"] == 1 + 3 * 2
    doc = json.loads((tmp_path / "out" / "micro" / "micro.json").read_text())
    t = doc["tables"][0]
    got = [dict(zip(t["columns"], r, strict=True)) for r in t["rows"]]
    assert [(g["loop"], g["working_set"], g["chains"]) for g in got] == [
        ("chase", 16 << 10, 1), ("mlp", 1 << 20, 1), ("mlp", 1 << 20, 2)]
    rows = runner.load_rows(tmp_path / "out", "micro")
    points = json.loads(rows[rows.kind == "micro-native"].iloc[0]["points"])
    cpu = sim.load_cpu("epyc-7713")
    for g, (loop, page, size, n, xs, huge) in zip(got, points, strict=True):
        assert (loop, page, size, n) == (g["loop"], g["page"], g["working_set"], g["chains"])
        assert len(xs) >= 2 and g["native_ns"] == statistics.median(xs)
        steps = micro.point_steps(loop, n, 400)
        p = predict(cpu, size, n, steps, micro.sim_page_size(huge), loop == "mlp")
        assert g["predicted_ns"] == p["ns_per_load"]
        assert g["ratio"] == p["ns_per_load"] / g["native_ns"]
    assert got[1]["native_overlap"] == 1.0 and got[2]["predicted_overlap"] > 1.0
