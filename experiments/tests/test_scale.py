"""``python -m kvsim.experiments.scale``: both sides of a seed pair traced with the setup
carried and simulated on several CPUs in one pass; bad arguments give one line."""

from kvsim.experiments import scale


def test_run_size_simulates_every_cpu_in_one_pass(tmp_path):
    cpus = ["xeon-8255c", "graviton3"]
    r = scale.run_size("keys", 4000, cpus, tmp_path, repeat=1, native=False)
    assert set(r["predicted"]) == set(cpus)
    for cpu in cpus:
        p = r["predicted"][cpu]
        assert p["a"]["cycles_per_key"] > 0 and p["b"]["cycles_per_key"] > 0
        assert p["speedup"] == p["a"]["cycles_per_key"] / p["b"]["cycles_per_key"]
        assert p["a"]["dtlb_misses_per_key"] >= p["a"]["stlb_misses_per_key"] >= 0
    # the setup is carried: a warm-up prefix, and no trace left behind
    assert r["trace_a"]["warmup_records"] > 0 and not list(tmp_path.iterdir())
    assert "native" not in r


def test_bad_arguments_one_line(capsys):
    assert scale.main(["--workloads", "nope"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["scale: error: unknown workload 'nope'"]
    assert scale.main(["--keys", "x"]) == 2


def test_page_table_reads_are_the_walks_reads(tmp_path):
    """With one page-table read per walk every walk reads L1 once and each level below sees
    what the one above missed; a fixed walk reads nothing; both CPUs in the same pass walk
    alike (same TLBs)."""
    cpus = ["graviton3", "graviton3+walk_reads=1"]
    r = scale.run_size("keys", 20_000, cpus, tmp_path, repeat=1, native=False)
    for side in ("a", "b"):
        fixed, reads = (r["predicted"][c][side] for c in cpus)
        assert fixed["page_table_reads"] == {}
        assert fixed["walks_per_key"] == reads["walks_per_key"] > 0
        pt = list(reads["page_table_reads"].values())
        assert pt[0]["accesses_per_key"] == reads["walks_per_key"]
        for up, down in zip(pt, pt[1:], strict=False):
            assert down["accesses_per_key"] == up["misses_per_key"]
        assert set(reads["levels"]) == set(reads["page_table_reads"])


def test_the_tables_render_from_the_file(tmp_path):
    """docs/scale.md's tables come from the result file: a CPU's row per size, the newest
    run of a size winning; the walks table only where walks read the page table."""
    from kvsim import provenance
    from kvsim.experiments import scale_render

    cpus = ["graviton3", "graviton3+walk_reads=1"]
    rows = []
    for keys in (3000, 3000, 6000):
        r = scale.run_size("keys", keys, cpus, tmp_path, repeat=1, native=False)
        rows.append(dict(r, provenance=provenance.provenance()))
    rows[0]["predicted"]["graviton3"]["a"]["cycles_per_key"] = -1.0  # replaced by rows[1]
    doc = {"provenance": provenance.provenance(), "rows": rows}
    text = scale_render.render(doc, "results/scale.json", "cycles")
    lines = [x for x in text.splitlines() if x.startswith("| keys")]
    assert len(lines) == 4 and "| -1 /" not in text
    walks = scale_render.render(doc, "results/scale.json", "walks").splitlines()
    assert sum(x.startswith("| keys") for x in walks) == 2
    assert "no chase yet" in scale_render.render(doc, "results/scale.json", "chase")
    assert len(scale_render.render(doc, "results/scale.json", "memory").splitlines()) > 4


def test_the_command_and_the_framework_compute_the_same_cells(tmp_path, monkeypatch):
    """``kvsim experiment run scale`` computes the command's cells: the predicted figures of
    the sweep's rows are those ``python -m kvsim.experiments.scale`` writes (deterministic),
    and the command's file has every key of the published results/scale.json."""
    import json
    from pathlib import Path

    import pandas as pd

    from kvsim.experiments import cells, framework, runner

    seen: list[str] = []
    real = cells.run_cell
    monkeypatch.setattr(cells, "run_cell", lambda spec, *a, **k: (seen.append(spec["kind"]),
                                                                  real(spec, *a, **k))[1])
    cpus = ["graviton3", "xeon-8255c"]
    monkeypatch.setitem(scale.SCALES, "small", {"keys": (3000,), "workloads": ("load",),
                                                "repeat": 1, "chase": ((1 << 20,), 1)})
    res = runner.run(["scale"], tmp_path / "sweep", scale="small", cpus=cpus,
                     log=lambda *_: None)
    assert res["failed"] == []
    rows = pd.read_parquet(tmp_path / "sweep" / "scale" / "scale.parquet")
    assert sorted(rows.kind) == ["scale-chase", "scale-native", "scale-predict"]
    seen.clear()
    out = tmp_path / "scale.json"
    args = ["--keys", "3000", "--workloads", "load", "--repeat", "1", "--out", str(out)]
    for cpu in cpus:
        args += ["--cpu", cpu]
    assert scale.main(args) == 0
    assert scale.main([*args, "--chase", "1MiB"]) == 0
    assert seen == ["scale-predict", "scale-native", "scale-chase"]
    doc = json.loads(out.read_text())
    sweep = json.loads(rows[rows.kind == "scale-predict"].iloc[0]["row"])
    assert doc["rows"][0]["predicted"] == sweep["predicted"]
    assert {k: v for k, v in doc["rows"][0]["trace_a"].items() if not k.endswith("_s")} == {
        k: v for k, v in sweep["trace_a"].items() if not k.endswith("_s")}
    published = json.loads((Path(__file__).resolve().parents[2] / "results"
                            / "scale.json").read_text())
    assert set(doc) == set(published)
    assert set(doc["chase"]) == set(published["chase"])
    old = next(r for r in published["rows"] if r["workload"] == "load" and "native" in r)
    new = doc["rows"][0]
    assert set(new) == set(old) and set(new["native"]) == set(old["native"])
    first = next(iter(old["predicted"].values()))
    for side in ("a", "b"):
        assert set(first[side]) <= set(new["predicted"][cpus[0]][side])
    tables = {t.name: t for t in framework.get("scale").tables(rows)}
    assert tables["scale"].frame["sim:graviton3"].iloc[0] == new["predicted"]["graviton3"][
        "speedup"]
    assert len(tables["scale-chase"].frame) == len(cpus)
