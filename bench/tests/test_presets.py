"""`kvsim bench` (bench/presets.py): what it prints is what it writes, bad input is one line
and no file, and docs/performance.md's whole-process table is rendered from the committed file."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from bench import presets as bp

ROOT = Path(__file__).resolve().parents[2]


def test_small_run_writes_every_figure(tmp_path, capsys):
    out = tmp_path / "r.json"
    rc = bp.main(["--scale", "0.004", "--repeat", "1", "--no-callgrind", "--preset", "graviton3",
                  "--workdir", str(tmp_path / "w"), "--out", str(out)])
    assert rc == 0
    printed = capsys.readouterr().out
    doc = json.loads(out.read_text())
    assert doc["benchmark"] == "kvsim.sim.bench_presets"
    assert {"commit", "machine", "date_utc"} <= doc["provenance"].keys()
    names = [t["name"] for t in doc["traces"]]
    assert names == ["random 8 B loads over 1 GiB", "c_ref iterate", "c_ref pipeline lookahead",
                     "DineroIV text, converted"]
    for t in doc["traces"]:
        assert t["records"] > 0 and t["name"] in printed
        (e,) = t["presets"]
        rates = [e[k] for k in ("functional_mrec_s", "timed_mrec_s", "functional_engine_mrec_s",
                                "timed_engine_mrec_s")]
        rates += [t["all_presets_one_pass_functional_mrec_s"], t["lru3_functional_mrec_s"]]
        assert all(np.isfinite(x) and x > 0 for x in rates)
        assert f"{e['functional_mrec_s']:7.2f}" in printed
    m = doc["memory"]
    assert m["trace_x10"]["records"] > 5 * m["trace"]["records"]
    assert m["trace"]["peak_rss_kib"] > 0
    assert "| c_ref iterate |" in bp.render_table(doc)
    up = doc["startup"]
    assert 0 < up["python_s"] and 0 < up["simulate_1000_records_s"]
    assert f"{up['simulate_1000_records_s']:.3f}" in printed
    user = bp.render_user_table(doc)
    assert "| graviton3 | " in user and "(x" in user
    assert doc["parameters"]["local"] is None  # not measured: not described


def test_measured_processes_keep_their_bytecode(tmp_path, monkeypatch):
    """A measured process runs with Python's bytecode cache on, as an installed kvsim does,
    even where the benchmark's own environment turns it off; the rest is inherited."""
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    monkeypatch.setenv("KVSIM_BENCH_PROBE", "kept")
    f = tmp_path / "flags"
    code = (f"import os, sys; open({str(f)!r}, 'w').write("
            f"f'{{sys.flags.dont_write_bytecode}} {{os.environ[\"KVSIM_BENCH_PROBE\"]}}')")
    wall, _ = bp.whole_process([sys.executable, "-c", code])
    assert wall > 0 and f.read_text() == "0 kept"


def test_local_is_described_where_measured():
    doc = json.loads((ROOT / "results" / bp.RESULT_NAME).read_text())
    doc["parameters"]["local"] = "this machine, calibrated by the test"
    assert "`local` is this machine, calibrated by the test" in bp.render_user_table(doc)
    assert "`local` is this machine, calibrated by the test." in bp.render_table(doc)


@pytest.mark.parametrize("args, what", [
    (["--scale", "0"], "--scale"),
    (["--repeat", "0"], "--repeat"),
    (["--preset", "no-such-cpu"], "--preset no-such-cpu"),
    (["--moonshot", "--moonshot-records", "10"], "--moonshot-records 10"),
])
def test_bad_input_one_line_no_file(tmp_path, capsys, args, what):
    out = tmp_path / "r.json"
    rc = bp.main([*args, "--workdir", str(tmp_path / "w"), "--out", str(out)])
    err = capsys.readouterr().err
    assert rc != 0
    assert len(err.strip().splitlines()) == 1 and what in err
    assert not out.exists()


def test_moonshot_scales_what_it_measured(tmp_path, capsys):
    out = tmp_path / "m.json"
    rc = bp.main(["--moonshot", "--moonshot-records", "20000", "--preset", "graviton3",
                  "--preset", "local", "--workdir", str(tmp_path / "w"), "--out", str(out)])
    assert rc == 0
    doc = json.loads(out.read_text())
    n = doc["trace"]["records"]
    assert 10_000 < n < 40_000 and doc["parameters"]["presets"] == ["graviton3", "local"]
    assert doc["extrapolated_10e9_s"] == pytest.approx(doc["wall_s"] * 1e9 / n, rel=0.01)
    assert doc["goal_met_by_extrapolation"] == (doc["extrapolated_10e9_s"] <= 300)
    # a short trace is not the goal's size: the goal is not said to be met by measurement
    assert doc["measured_at_goal_size"] is False and doc["goal_met"] is False
    assert "not measured at 10^9" in doc["extrapolation"]
    assert f"{n:,} records x 2 presets" in capsys.readouterr().out


def test_hierarchy_file_is_the_engine_benchs():
    from bench import sim as bench
    from kvsim import sim

    assert sim.parse_cpu(__import__("tomllib").loads(bp.hier_toml())) == sim.parse_cpu(bench.HIER)


def test_readme_table_is_the_result_file():
    doc = json.loads((ROOT / "results" / bp.RESULT_NAME).read_text())
    assert doc["benchmark"] == "kvsim.sim.bench_presets"
    assert bp.render_table(doc) in (ROOT / "docs" / "performance.md").read_text()


def test_peak_rss_is_the_childs_own(tmp_path):
    """The memory figure is the simulating process's own peak: not raised by the memory of
    the process that started it (Linux's ru_maxrss of a child counts the parent's RSS at
    the fork)."""
    from bench import sim as bench
    from kvsim import traces

    p = tmp_path / "t.kvt"
    with traces.Writer(p, {"workload": {"name": "test"}}) as w:
        w.write(bench.random_loads(2000, 1))
    held = np.ones(256 << 17)  # 256 MiB in this process, every page touched
    _, rss = bp.whole_process(bp._kvsim_hwm("simulate", str(p), "--cpu", "graviton3", "--json"))
    assert 0 < rss < 200 << 10, rss
    assert held.sum() == 256 << 17
