"""``python -m kvsim.experiments.gem5_compare`` without gem5: a stand-in binary runs the generated
script on the stub ``m5`` package (test_gem5_backend's), rebuilds the cache hierarchy from
the objects the script made, replays the packet trace named in the TrafficGen's
configuration on kvsim's engine, and writes gem5's stat names. The comparison must then
find no difference on any level; a stand-in that adds misses must be reported outside the
tolerance (exit status 1). sim/GEM5.md's table is rendered from the committed result."""

from __future__ import annotations

import json
import os
import sys
import textwrap
from pathlib import Path

import pytest
from test_gem5_backend import STUB_INIT, STUB_OBJECTS, STUB_STATS

from kvsim import sim
from kvsim.experiments import gem5_compare as gc
from kvsim.sim import gem5 as g5

ROOT = Path(__file__).resolve().parents[2]

STAND_IN = '''
import json, os, runpy, sys

out = sys.argv[1].split("=", 1)[1]
os.makedirs(out)
sys.path.insert(0, {stub!r})
os.environ["STUB_DUMP"] = os.path.join(out, "dump.json")
print("gem5 version 0.0-stand-in")
runpy.run_path(sys.argv[2], run_name="__main__")

from kvsim import sim
from kvsim.sim.config import CacheLevel
from kvsim.sim import gem5 as g5
from kvsim.traces.convert.gem5 import gem5_to_records

graph = json.load(open(os.environ["STUB_DUMP"]))
line = graph["system"]["params"]["cache_line_size"]
repl = {{v: k for k, v in g5.REPLACEMENT.items()}}
caches = []
i = 0
while "system.cache%d" % i in graph:
    p = graph["system.cache%d" % i]["params"]
    caches.append(CacheLevel(
        name="cache%d" % i, size=int(p["size"].rstrip("B")), ways=p["assoc"], line=line,
        latency=p["tag_latency"], replacement=repl[graph[p["replacement_policy"]]["class"]],
        inclusion="exclusive" if p["clusivity"] == "mostly_excl" else "non-inclusive"))
    i += 1
cfg_file = graph["system.tgen"]["params"]["config_file"]
cfg = open(cfg_file).read().split()
trc = os.path.join(os.path.dirname(cfg_file), cfg[cfg.index("TRACE") + 1])
_, records = gem5_to_records(trc)
res = sim.simulate(records, sim.CpuConfig(name="stand-in", caches=tuple(caches)),
                   functional=True, flush=False)
extra = float(os.environ.get("STAND_IN_EXTRA_MISSES", "0"))
lines = ["---------- Begin Simulation Statistics ----------"]
for i, lv in enumerate(res["levels"]):
    acc, miss = g5.kvsim_requests(lv)
    miss = int(miss * (1 + extra))
    for name, v in (("overallAccesses", acc), ("overallMisses", miss),
                    ("overallHits", acc - miss)):
        lines.append("system.cache%d.%s::total %d  # x" % (i, name, v))
open(os.path.join(out, "stats.txt"), "w").write("\\n".join(lines) + "\\n")
'''


@pytest.fixture
def stand_in(tmp_path: Path) -> str:
    stub = tmp_path / "stub"
    (stub / "m5").mkdir(parents=True)
    (stub / "m5" / "__init__.py").write_text(STUB_INIT)
    (stub / "m5" / "objects.py").write_text(STUB_OBJECTS)
    (stub / "m5" / "stats.py").write_text(STUB_STATS)
    fake = tmp_path / "gem5.opt"
    fake.write_text(f"#!{sys.executable}\n" + textwrap.dedent(STAND_IN.format(stub=str(stub))))
    fake.chmod(0o755)
    return str(fake)


ARGS = ["--scale", "0.01", "--trace", "random", "--trace", "pipeline-get-lookahead",
        "--preset", "xeon-8488c", "--preset", "epyc-7713, L2 non-inclusive"]


def test_same_model_agrees_exactly(stand_in: str, tmp_path: Path, capsys) -> None:
    out = tmp_path / "r.json"
    rc = gc.main([*ARGS, "--gem5", stand_in, "--workdir", str(tmp_path / "w"),
                  "--out", str(out)])
    assert rc == 0
    doc = json.loads(out.read_text())
    assert doc["gem5"] == {"binary": "gem5.opt", "version": "0.0-stand-in",
                           "git_tag": "v0.0-stand-in",
                           "git_tag_from": "the release tag of gem5's version string",
                           "spacing_ticks": g5.SPACING_TICKS}
    assert [(r["trace"], r["preset"]) for r in doc["runs"]] == [
        ("random", "xeon-8488c"), ("random", "epyc-7713, L2 non-inclusive"),
        ("pipeline-get-lookahead", "xeon-8488c"),
        ("pipeline-get-lookahead", "epyc-7713, L2 non-inclusive")]
    for r in doc["runs"]:
        assert len(r["levels"]) == 3 and r["packets"] == r["levels"][0]["kvsim_accesses"] > 0
        for lv in r["levels"]:
            assert lv["gem5_misses"] == lv["kvsim_misses"]
            assert lv["gem5_accesses"] == lv["kvsim_accesses"]
            assert lv["rel_diff"] == 0.0 or (lv["kvsim_misses"] == 0)
            assert lv["within_tolerance"] is (True if lv["same_model"] else None)
    # the exclusive L3 is reported as a different model, with the reason
    l3s = [r["levels"][2] for r in doc["runs"] if r["preset"].startswith("epyc")]
    assert l3s and all(not lv["same_model"] and "exclusive" in lv["differences"][0]
                       for lv in l3s)
    assert doc["summary"]["within_tolerance"] == doc["summary"]["same_model_levels"] == 10
    printed = capsys.readouterr().out
    assert "same-model levels within 2 %: 10 of 10" in printed
    assert "| random | xeon-8488c | L1D |" in gc.render_table(doc)


def test_a_difference_beyond_the_tolerance_fails(stand_in: str, tmp_path: Path,
                                                 monkeypatch) -> None:
    monkeypatch.setenv("STAND_IN_EXTRA_MISSES", "0.05")
    out = tmp_path / "r.json"
    rc = gc.main([*ARGS[:4], "--preset", "xeon-8488c", "--gem5", stand_in,
                  "--workdir", str(tmp_path / "w"), "--out", str(out)])
    assert rc == 1
    doc = json.loads(out.read_text())
    diffs = [lv["rel_diff"] for lv in doc["runs"][0]["levels"] if lv["kvsim_misses"] > 100]
    assert diffs and all(0.04 < d <= 0.05 for d in diffs)
    assert doc["summary"]["within_tolerance"] < doc["summary"]["same_model_levels"]


def test_bad_input_is_one_line_and_no_file(tmp_path: Path, capsys) -> None:
    out = tmp_path / "r.json"
    env_gem5 = os.environ.pop(g5.GEM5_ENV, None)
    try:
        rc = gc.main(["--out", str(out), "--workdir", str(tmp_path / "w")])
    finally:
        if env_gem5 is not None:
            os.environ[g5.GEM5_ENV] = env_gem5
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "no gem5 binary" in err[0]
    assert not out.exists()


def test_presets_run_the_models_the_comparison_needs() -> None:
    """At least two presets with every level LRU and non-inclusive (the same model in both
    simulators), and one with an exclusive last level."""
    cpus = [gc.preset(label) for label in gc.PRESETS]
    same = [c for c in cpus if not any(g5.model_differences(c))]
    assert len(same) >= 2
    assert all(lv.replacement == "lru" for c in same for lv in c.caches)
    assert any(c.caches[-1].inclusion == "exclusive" for c in cpus)
    assert [c.name for c in cpus] == list(gc.PRESETS)
    for label, c in zip(gc.PRESETS, cpus, strict=True):
        shipped = sim.load_cpu(gc.PRESETS[label][0])
        changed = {lv.name for lv, s in zip(c.caches, shipped.caches, strict=True) if lv != s}
        assert changed == set(gc.PRESETS[label][1])


RESULT = ROOT / "results" / gc.RESULT_NAME


@pytest.mark.skipif(not RESULT.exists(),
                    reason=f"results/{gc.RESULT_NAME} is written by a run with real gem5 "
                           "(python -m kvsim.experiments.gem5_compare)")
def test_gem5_md_table_is_the_result_file() -> None:
    doc = json.loads(RESULT.read_text())
    assert doc["benchmark"] == "kvsim.sim.gem5_compare"
    assert gc.render_table(doc) in (ROOT / "sim" / "GEM5.md").read_text()


def _one_cell(monkeypatch) -> None:
    monkeypatch.setitem(gc.SCALES, "small", 0.01)
    monkeypatch.setattr(gc, "TRACES", {"random": gc.TRACES["random"]})
    monkeypatch.setattr(gc, "PRESETS", {"xeon-8488c": gc.PRESETS["xeon-8488c"]})


def test_the_framework_study_gives_the_commands_figures(stand_in: str, tmp_path: Path,
                                                        monkeypatch) -> None:
    from kvsim.experiments import runner

    _one_cell(monkeypatch)
    monkeypatch.setenv(g5.GEM5_ENV, stand_in)
    res = runner.run(["gem5_compare"], tmp_path / "out", scale="small", workers=1,
                     log=lambda m: None)
    assert res["failed"] == [] and res["computed"] == 1
    doc = json.loads((tmp_path / "out" / "gem5_compare" / "gem5_compare.json").read_text())
    t = doc["tables"][0]
    got = [dict(zip(t["columns"], r, strict=True)) for r in t["rows"]]
    out = tmp_path / "r.json"
    assert gc.main(["--scale", "0.01", "--trace", "random", "--preset", "xeon-8488c",
                    "--gem5", stand_in, "--workdir", str(tmp_path / "w"),
                    "--out", str(out)]) == 0
    levels = json.loads(out.read_text())["runs"][0]["levels"]
    assert [(g["level"], g["kvsim_misses"], g["gem5_misses"]) for g in got] == [
        (lv["level"], lv["kvsim_misses"], lv["gem5_misses"]) for lv in levels]
    assert all(g["model"] == "same" and g["rel_diff"] == 0 for g in got)
    assert sum(g["kvsim_misses"] for g in got) > 0


def test_the_framework_study_without_gem5_skips_and_stores_nothing(tmp_path: Path,
                                                                   monkeypatch) -> None:
    from kvsim.experiments import runner

    _one_cell(monkeypatch)
    monkeypatch.delenv(g5.GEM5_ENV, raising=False)
    res = runner.run(["gem5_compare"], tmp_path / "out", scale="small", workers=1,
                     log=lambda m: None)
    assert res["computed"] == 0 and len(res["skipped"]) == 1
    assert "gem5" in res["skipped"][0][1]
    assert not list((tmp_path / "out" / "gem5_compare" / "cells").glob("*.json"))
