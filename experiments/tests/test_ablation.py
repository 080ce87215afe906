"""kvsim ablate (kvsim.experiments.ablation): each setting changes one thing of the CPU or the
trace, and bad input is one line."""

from __future__ import annotations

import json

import pytest

from kvsim import sim
from kvsim.experiments import ablation


def test_each_setting_changes_what_it_names():
    from dataclasses import replace

    cpu = sim.load_cpu("epyc-7713")
    cpu = cpu.with_changes(tlb=replace(cpu.tlb, walk_reads=1), dram_bandwidth_gbs=20.0,
                           sustained_ipc=2.5, scheduler=64)
    for name, (_, change, gap) in ablation.SETTINGS.items():
        c = change(cpu)
        if name == "base" or name.startswith("gap_"):
            assert c == cpu, name
        else:
            assert c != cpu, name
        assert (gap == 1.0) != name.startswith("gap_"), name


def test_predict_pair_small(tmp_path):
    cpu = sim.load_cpu("epyc-7713")
    out = ablation.predict_pair("keys", 3000, cpu, tmp_path,
                                ["base", "gap_x0.5", "rob_x2", "page_2m"])
    base = out["base"]["settings"]
    assert out["base"]["ops"] == 3000
    # halving every gap leaves the memory records and halves the rest
    assert base["gap_x0.5"]["instructions_per_op"] < 0.75 * base["base"]["instructions_per_op"]
    assert base["rob_x2"]["instructions_per_op"] == base["base"]["instructions_per_op"]
    assert set(out["speedup"]) == {"base", "gap_x0.5", "rob_x2", "page_2m"}
    assert all(v > 0 for v in out["speedup"].values())
    assert not list(tmp_path.iterdir())  # traces are removed


def test_predict_pair_is_the_simulation_of_each_sides_trace_file(tmp_path):
    """Differential: the ablation's base setting predicts what simulating each side's trace
    file predicts (its header's site kinds and system-call sites applied: the validation's
    cells simulate files), on a preset whose [work] rates differ by kind."""
    from kvsim.experiments import cref

    cpu = sim.load_cpu("xeon-8488c")
    assert len({r for _, r in cpu.work}) > 1, "the preset's kinds must differ for this test"
    keys = 3000
    out = ablation.predict_pair("keys", keys, cpu, tmp_path, ["base"])
    for side in ("base", "variant"):
        path = tmp_path / f"{side}.kvt"
        p = ablation.PAIRS["keys"]
        cref.trace(p["workload"], str(path), ablation._options(
            "keys", keys, p["trace_ops"], p["warmup_ops"], p[side]))
        res = sim.simulate(str(path), cpu)
        assert out[side]["settings"]["base"]["ns_per_op"] == pytest.approx(
            res["timing"]["time_ns"] / out[side]["ops"], rel=1e-12), side


@pytest.mark.parametrize("argv, what", [(["--pairs", "bogus"], "bogus"),
                                        (["--settings", "rob_x3"], "rob_x3"),
                                        (["--rounds", "1"], "--rounds")])
def test_bad_input_is_one_line(argv, what, capsys, tmp_path):
    assert ablation.main([*argv, "--out", str(tmp_path / "a.json")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and what in err[0]
    assert not (tmp_path / "a.json").exists()


def test_a_pair_of_layouts_traces_each_side_with_its_options(tmp_path):
    cpu = sim.load_cpu("epyc-7713")
    out = ablation.predict_pair("unified", 3000, cpu, tmp_path, ["base", "region_prefetch"])
    assert out["base"]["variant"] == {"layout": "legacy"}
    assert out["variant"]["variant"] == {"layout": "unified"}
    # one layout's trace is not the other's: the unified object holds its key
    assert out["base"]["records"] != out["variant"]["records"]
    assert set(out["speedup"]) == {"base", "region_prefetch"}
    assert not list(tmp_path.iterdir())


def test_prefetch_settings_change_what_they_name():
    cpu = sim.load_cpu("epyc-7713")
    miss = ablation.SETTINGS["region_miss_prefetch"][1](cpu)
    assert miss.prefetchers[:-1] == cpu.prefetchers
    assert miss.prefetchers[-1].kind == "region_miss" and miss.prefetchers[-1].level == 0
    assert not cpu.swpf_trains and ablation.SETTINGS["swpf_trains"][1](cpu).swpf_trains


def _keys_of(new, old, where=""):
    """The keys of document ``old`` (nested dicts; data-keyed maps of settings and stall
    causes left out) that ``new`` lacks."""
    out = []
    for k, v in old.items():
        if k not in new:
            out.append(where + k)
        elif (isinstance(v, dict) and isinstance(new[k], dict)
              and k not in ("settings", "speedup", "stall_cycles_per_op",
                            "predicted_over_native")):
            out += _keys_of(new[k], v, f"{where}{k}.")
    return out


def test_the_command_and_the_study_compute_the_same_cells(tmp_path, monkeypatch):
    """``kvsim ablate`` runs the study's cells (cells.run_cell) and keeps the published
    file's keys; ``kvsim experiment run ablation`` computes the same predictions."""
    import json
    from pathlib import Path

    import pandas as pd

    from kvsim.experiments import cells, runner

    seen = []
    real = cells.run_cell
    monkeypatch.setattr(cells, "run_cell", lambda spec, *a: seen.append(spec) or real(spec, *a))
    monkeypatch.setitem(ablation.SCALES["small"], "keys", 3000)
    out = tmp_path / "a.json"
    assert ablation.main(["--pairs", "keys", "--settings", "base,rob_x2", "--rounds", "2",
                          "--cpu", "epyc-7713", "--out", str(out)]) == 0
    assert [s["kind"] for s in seen] == ["ablation-native", "ablation-predict"]
    doc = json.loads(out.read_text())
    published = json.loads((Path(__file__).resolve().parents[2] / "results"
                            / "ablation-small.json").read_text())
    assert not _keys_of(doc, {k: v for k, v in published.items() if k != "rows"})
    assert not _keys_of(doc["rows"][0], published["rows"][0])
    assert len(doc["rows"][0]["native"]["base"]["cpu_s"]) == 2

    monkeypatch.setattr(ablation, "PAIRS", {"keys": ablation.PAIRS["keys"]})
    monkeypatch.setattr(ablation, "SETTINGS", {k: ablation.SETTINGS[k] for k in
                                               ("base", "rob_x2")})
    monkeypatch.setattr(ablation, "ROUNDS", 2)
    res = runner.run(["ablation"], tmp_path / "sweep", cpus=["epyc-7713"],
                     log=lambda *_: None)
    assert res["failed"] == [] and res["computed"] == 2
    rows = pd.read_parquet(tmp_path / "sweep" / "ablation" / "ablation.parquet")
    (pred,) = rows[rows.kind == "ablation-predict"]["predicted"]
    assert json.loads(pred)["speedup"] == doc["rows"][0]["predicted"]["speedup"]
    md = (tmp_path / "sweep" / "ablation" / "ablation.md").read_text()
    assert "rob_x2" in md and "sim:epyc-7713" in md


def test_a_validation_rows_pair_is_ablated_at_its_size(tmp_path, monkeypatch):
    """A catalogue pair a validation row runs (and the ablation does not) is ablated sized
    as that row, for this command only."""
    from kvsim.experiments import validation

    real = validation._pairs

    def small(scale):
        out = json.loads(json.dumps(real(scale)))
        for p in out:
            p["common"]["keys"] = 3000
            if "ops" in p["common"]:
                p["common"]["ops"], p["sim"] = 40, {"ops": 20}
                p["warmup_ops"] = 20 if p["warmup_ops"] else None
        return out

    monkeypatch.setattr(validation, "_pairs", small)
    before = (dict(ablation.PAIRS), {s: dict(v) for s, v in ablation.SCALES.items()})
    out = tmp_path / "a.json"
    assert ablation.main(["--cpu", "epyc-7713", "--pairs", "mget-dict-chunk-15133,keys",
                          "--settings", "base,dram_x2", "--no-native",
                          "--out", str(out)]) == 0
    assert (ablation.PAIRS, ablation.SCALES) == before, "the catalogue's entry is not kept"
    rows = {r["pair"]: r for r in json.loads(out.read_text())["rows"]}
    got = rows["mget-dict-chunk-15133"]
    assert got["keys"] == 3000 and got["options"]["table"] == "dict"
    assert got["role"] == "tuning" and got["workload"] == "mget"
    pred = got["predicted"]
    assert pred["base"]["variant"] == "none" and pred["variant"]["variant"] == "chunk-15133"
    assert pred["base"]["ops"] == 20, "the row's traced MGETs, after its warm-up"
    assert set(pred["speedup"]) == {"base", "dram_x2"}
    assert rows["keys"]["keys"] == ablation.SCALES["small"]["keys"]
    assert ablation.main(["--cpu", "epyc-7713", "--pairs", "no-such-pair", "--no-native",
                          "--out", str(out) + "x"]) == 2


def test_a_validation_rows_pair_is_traced_as_the_row_is():
    """A load row's traces reuse the restarted process's pages (no fault charged): the
    ablation of its pair traces them so, or its base is not the row's prediction."""
    entry, keys = ablation.validation_pair("load-4096", "full")
    assert keys == 40_000 and entry["trace_options"] == {"restart_pages": "reused"}
    assert "restart_pages" not in entry["options"], "a trace option, not the row's identity"


def test_validation_pairs_adds_and_with_instead_replaces_then_restores():
    own = dict(ablation.PAIRS["unified"]), ablation.SCALES["full"]["unified"]
    with ablation.validation_pairs(["load-8", "unified", "no-such-pair"], "full") as added:
        assert added == ["load-8"]
        assert ablation.PAIRS["load-8"]["workload"] == "load"
        assert ablation.SCALES["full"]["load-8"] == 500_000
        assert ablation.PAIRS["unified"] == own[0]
    assert "load-8" not in ablation.PAIRS and "load-8" not in ablation.SCALES["full"]
    with ablation.validation_pairs(["unified"], "full", instead=True) as added:
        assert added == ["unified"]
        assert ablation.SCALES["full"]["unified"] == 500_000 != own[1]
    assert (ablation.PAIRS["unified"], ablation.SCALES["full"]["unified"]) == own
