"""The throughput benchmark's result file: what it prints is what it writes, and
docs/performance.md's Speed table is rendered from the committed file."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from bench import sim as bench
from kvsim import traces

ROOT = Path(__file__).resolve().parents[2]


def _small_trace(path: Path, n: int) -> None:
    recs = bench.random_loads(n, seed=7)
    recs["kind"][::3] = traces.KIND_STORE
    with traces.Writer(path, {"workload": {"name": "test"}}) as w:
        w.write(recs)


def test_result_file_holds_every_printed_figure(tmp_path, capsys):
    trace = tmp_path / "small.kvt"
    _small_trace(trace, 1500)
    out = tmp_path / "r" / "bench.json"
    rc = bench.main(["--records", "2000", "--repeat", "1", "--threads", "1,2",
                     "--trace", str(trace), "--out", str(out)])
    assert rc == 0
    printed = capsys.readouterr().out.splitlines()
    doc = json.loads(out.read_text())
    assert {"commit", "machine", "date_utc"} <= doc["provenance"].keys()
    assert doc["parameters"]["records"] == 2000 and doc["parameters"]["threads"] == [1, 2]
    names = [w["name"] for w in doc["workloads"]]
    assert names == ["random loads over 1 GiB", "trace small.kvt"]
    assert [w["records"] for w in doc["workloads"]] == [2000, 1500]
    assert doc["workloads"][1]["source"]["workload"] == {"name": "test"}
    assert doc["workloads"][1]["pycachesim_records"] == 1500
    rows = [bench.row_text(w, r) for w in doc["workloads"] for r in w["runs"]]
    assert [r["threads"] for w in doc["workloads"] for r in w["runs"]] == [1, 2, 1, 2]
    assert printed[2:6] == rows
    for w in doc["workloads"]:
        for r in w["runs"]:
            rates = [r[k] for k in ("functional_wall_mrec_s", "functional_cpu_mrec_s",
                                    "timing_wall_mrec_s", "timing_cpu_mrec_s")]
            assert all(np.isfinite(x) and x > 0 for x in rates)


@pytest.mark.parametrize("args, what", [
    (["--threads", "0"], "--threads"),
    (["--threads", "1,x"], "--threads"),
    (["--records", "0"], "--records"),
    (["--trace", "missing.kvt"], "--trace missing.kvt"),
])
def test_bad_input_one_line_no_file(tmp_path, capsys, args, what):
    out = tmp_path / "bench.json"
    rc = bench.main(["--records", "100", "--repeat", "1", "--out", str(out), *args])
    err = capsys.readouterr().err
    assert rc != 0
    assert len(err.strip().splitlines()) == 1 and what in err
    assert not out.exists()


@pytest.mark.parametrize("name, render, benchmark", [
    (bench.RESULT_NAME, bench.render_table, "kvsim.sim.bench"),
    ("sim-bench-instructions.json", bench.render_instructions_table,
     "sim/_engine/bench/instructions.sh"),
    ("sim-bench-threads.json", bench.render_threads_table, "sim/_engine/bench/threads.sh"),
])
def test_readme_speed_tables_are_the_result_files(name, render, benchmark):
    doc = json.loads((ROOT / "results" / name).read_text())
    assert doc["benchmark"] == benchmark
    readme = (ROOT / "docs" / "performance.md").read_text()
    assert render(doc) in readme


def test_pycachesim_builds_the_benchmark_hierarchy():
    """pycachesim's side of both comparisons (bench.sim here, bench.presets in its own
    process) is HIER: each level's sets, ways and line from the CPU file, LRU, each level
    backed by the next and the last by memory."""
    pytest.importorskip("cachesim")
    from bench import _pycachesim
    from kvsim import sim

    cpu = sim.parse_cpu(bench.HIER)
    cs = _pycachesim.simulator(_pycachesim.levels(cpu))
    got = [(c.sets * c.ways * c.cl_size, c.ways, c.cl_size, c.replacement_policy)
           for c in cs.levels(with_mem=False)]
    assert got == [(c.size, c.ways, c.line, "LRU") for c in cpu.caches]
    names = [c.name for c in cs.levels(with_mem=False)]
    assert [getattr(c.load_from, "name", None) for c in cs.levels(with_mem=False)] == \
        names[1:] + [None]
    assert cs.main_memory.last_level_load.name == names[-1]
