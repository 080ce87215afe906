"""Cell ids: a result is keyed by its spec and what computes it, not by the commit.

A sweep of a tiny experiment is run, then run again as if HEAD had moved by a commit that
touches none of the cells' inputs (documentation: no such file is an input), then with a
changed c_ref CLI and a changed simulator engine (copies with a byte appended, found through
kvsim.artifacts' environment overrides): the first rerun computes nothing, the c_ref change
recomputes every cell, the engine change only the simulated ones.
"""

import json
import shutil

import pytest

from kvsim import artifacts
from kvsim.experiments import cells, framework, runner
from kvsim.experiments.framework import Experiment, native_cell, sim_cell


def _tiny_cells(scale, cpus):
    opts = {"keys": 2000, "ops": 200, "value_size": 64, "depth": 8, "seed": 3}
    out = [sim_cell("tiny_ids", "pipeline", dict(opts, variant=v), "epyc-7713",
                    {"variant": v}, "g", v == "naive") for v in ("naive", "lookahead")]
    out.append(native_cell("tiny_ids", "pipeline", dict(opts, variant="naive"),
                           dict(opts, variant="lookahead"), 2, {"variant": "lookahead"},
                           warmup_rounds=0))
    return out


@pytest.fixture
def tiny(monkeypatch):
    framework._load()
    monkeypatch.setitem(framework._REGISTRY, "tiny_ids",
                        Experiment("tiny_ids", "ids", "none", _tiny_cells, lambda rows: []))


def _changed_copy(name, tmp_path):
    src = artifacts.path(name)
    dst = tmp_path / name
    shutil.copy2(src, dst)
    with open(dst, "ab") as f:
        f.write(b"\0changed")
    return dst


def _ids(out):
    return {p.stem for p in (out / "tiny_ids" / "cells").glob("*.json")}


def test_no_documentation_or_test_file_is_an_input():
    for kind in ("sim", "native", "valkey"):
        for label, path in cells.cell_inputs(kind):
            assert not label.endswith((".md", ".ipynb")), label
            assert "/tests/" not in label, label
            assert path is None or path.is_file(), label


def test_ids_survive_an_unrelated_commit_and_follow_c_ref_and_the_engine(tiny, tmp_path,
                                                                         monkeypatch):
    out = tmp_path / "res"
    quiet = {"log": lambda m: None, "workers": 1}
    first = runner.run(["tiny_ids"], out, **quiet)
    assert not first["failed"] and first["computed"] == first["total"] == 3
    ids = _ids(out)
    docs = [json.loads(p.read_text()) for p in (out / "tiny_ids" / "cells").glob("*.json")]
    assert {d["inputs"] for d in docs if d["spec"]["kind"] == "sim"} == {
        cells.inputs_fingerprint("sim")}
    assert all("commit" in d for d in docs)

    # HEAD moved by a commit that changes no input: every cell is already done
    monkeypatch.setattr(runner, "_commit", lambda: ("d" * 40, False))
    again = runner.run(["tiny_ids"], out, **quiet)
    assert (again["computed"], again["already_done"]) == (0, 3)
    assert _ids(out) == ids

    # a different simulator engine: the two sim cells again, the native pair kept
    monkeypatch.setenv(artifacts.ENV[artifacts.ENGINE_LIB],
                       str(_changed_copy(artifacts.ENGINE_LIB, tmp_path)))
    eng = runner.run(["tiny_ids"], out, **quiet)
    assert not eng["failed"] and (eng["computed"], eng["already_done"]) == (2, 1)

    # a different c_ref CLI: every cell again (it traces and it is timed)
    monkeypatch.setenv(artifacts.ENV[artifacts.CREF_CLI],
                       str(_changed_copy(artifacts.CREF_CLI, tmp_path)))
    cref = runner.run(["tiny_ids"], out, **quiet)
    assert not cref["failed"] and (cref["computed"], cref["already_done"]) == (3, 0)
    assert len(_ids(out)) == 3 + 2 + 3


def test_a_run_of_one_kind_assembles_the_others_already_done(tiny, tmp_path):
    """``--only sim`` then ``--only native`` into one folder: the table holds both."""
    import pandas as pd

    out = tmp_path / "res"
    quiet = {"log": lambda m: None, "workers": 1}
    sim = runner.run(["tiny_ids"], out, kinds=["sim"], **quiet)
    assert (sim["computed"], sim["total"]) == (2, 2)
    rows = pd.read_parquet(out / "tiny_ids" / "tiny_ids.parquet")
    assert sorted(rows.kind) == ["sim", "sim"]
    nat = runner.run(["tiny_ids"], out, kinds=["native"], **quiet)
    assert (nat["computed"], nat["total"]) == (1, 1)
    rows = pd.read_parquet(out / "tiny_ids" / "tiny_ids.parquet")
    assert sorted(rows.kind) == ["native", "sim", "sim"]


SIM_CELL_MODULES = """
import json, sys
from kvsim.experiments import cells
from kvsim.experiments.framework import sim_cell
opts = {"keys": 2000, "ops": 200, "value_size": 64, "depth": 8, "seed": 3,
        "variant": "lookahead"}
for cpu in ("epyc-7713", "local"):
    cells.run_cell(sim_cell("x", "pipeline", opts, cpu, {}, "g", False))
print(json.dumps({m: getattr(sys.modules[m], "__file__", None) for m in sys.modules
                  if m.startswith(("kvsim.sim", "kvsim.traces"))}))
"""


def test_every_model_module_a_sim_cell_runs_is_an_input(tmp_path):
    """The inputs of a sim cell are its import closure: every kvsim.sim and kvsim.traces
    module loaded while sim cells run (on a preset and on `local`) is one of them."""
    import subprocess
    import sys

    res = subprocess.run([sys.executable, "-c", SIM_CELL_MODULES], capture_output=True,
                         text=True, timeout=300, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    loaded = json.loads(res.stdout.strip().splitlines()[-1])
    inputs = {str(p) for _, p in cells.cell_inputs("sim") if p is not None}
    missing = [m for m, f in loaded.items() if f is not None and f not in inputs]
    assert not missing


def test_benchmarks_and_other_programs_are_not_inputs_of_a_sim_cell():
    labels = {label for label, _ in cells.cell_inputs("sim")}
    assert "kvsim.sim/api.py" in labels and "kvsim.traces/reader.py" in labels
    assert any(label.startswith("kvsim.sim/presets/") for label in labels)
    for prog in ("kvsim.sim/gem5_compare.py", "kvsim.sim/gem5.py",
                 "kvsim.traces/convert/__init__.py", "kvsim.traces/convert/gem5.py"):
        assert prog not in labels, prog
    assert not [label for label in labels if "bench" in label]


def test_the_statistics_are_an_input_of_the_timed_cells():
    """kvsim.stats (moved from kvsim.experiments.timing, now an alias) computes the native
    and valkey cells' figures: its file, not the alias, is their input."""
    for kind in ("native", "valkey"):
        inputs = dict(cells.cell_inputs(kind))
        assert inputs["kvsim/stats.py"].read_text().startswith('"""Statistics of native')
        assert "kvsim.experiments/timing.py" not in inputs


def test_a_sim_cells_inputs_do_not_depend_on_what_was_imported_before():
    """An old module name kept as an alias (kvsim.sim._intake, now kvsim.traces._intake)
    replaces itself in sys.modules when imported; the closure reads the files, so a cell's
    id is the same before and after (else a rerun recomputes every sim cell)."""
    import subprocess
    import sys

    prog = ("import json; from kvsim.experiments import cells; a = cells.cell_inputs('sim'); "
            "import kvsim.sim._intake; b = cells.cell_inputs('sim'); "
            "print(json.dumps([[x[0] for x in a], [x[0] for x in b]]))")
    res = subprocess.run([sys.executable, "-c", prog], capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 0, res.stderr
    before, after = json.loads(res.stdout)
    assert before == after and "kvsim.sim/_intake.py" in before
