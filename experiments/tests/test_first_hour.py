"""The first hour without detours: an uncalibrated `local` is marked wherever it is shown,
and `kvsim experiment run` says where its cells ran and prints its tables."""

import json

import pandas as pd
import pytest

from kvsim.experiments import cells, compare, report, runner
from kvsim.sim import local

from .conftest import run_kvsim

UNCAL = "local (uncalibrated)"


@pytest.fixture
def no_calibration(tmp_path, monkeypatch):
    """This machine as a fresh one: no calibrated CPU file in the cache."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "empty-cache"))
    assert not local.is_calibrated()


def test_uncalibrated_local_is_marked_in_compare_rows_tables_and_csv(no_calibration,
                                                                    small_trace):
    rows = compare.simulate_rows({"a": small_trace, "b": small_trace}, ["local", "graviton3"])
    labels = {r["cpu"]: r["cpu_label"] for r in rows}
    assert labels == {"local": UNCAL, "graviton3": "graviton3"}
    assert f"== {UNCAL}:" in compare.rows_text(rows)
    assert UNCAL in compare.rows_csv(rows)


def test_uncalibrated_local_is_marked_by_kvsim_simulate(no_calibration, small_trace):
    res = run_kvsim("simulate", small_trace, "--cpu", "local", "--functional", "--json")
    assert res.returncode == 0, res.stderr.decode()
    doc = json.loads(res.stdout)
    assert doc["cpu"] == "local" and doc["cpu_label"] == UNCAL
    text = run_kvsim("simulate", small_trace, "--cpu", "local", "--cpu", "graviton3",
                     "--functional").stdout.decode()
    assert f"== {UNCAL} ==" in text and f"{UNCAL} (functional)" in text


def test_a_calibrated_file_drops_the_mark(tmp_path):
    cpu = local.local_cpu()
    calibrated = cpu.with_changes(provenance={**cpu.provenance, "calibrated": True})
    assert local.label(calibrated) == "local"
    assert local.label(cpu.with_changes(provenance={"calibrated": False})) == UNCAL
    assert local.label("graviton3") == "graviton3"


def test_uncalibrated_local_is_marked_in_experiment_cells_and_tables(no_calibration,
                                                                     small_trace, tmp_path):
    metrics = cells._simulate_many(small_trace, ["local", "epyc-7713"])
    assert metrics["local"]["cpu_label"] == UNCAL
    assert metrics["epyc-7713"]["cpu_label"] == "epyc-7713"
    # a sweep's cell files -> rows: the column says `sim:local (uncalibrated)`
    cdir = tmp_path / "pipeline" / "cells"
    cdir.mkdir(parents=True)
    for i, (cpu, m) in enumerate(metrics.items()):
        spec = {"kind": "sim", "cpu": cpu, "workload": "pipeline", "group": "g",
                "baseline": True, "params": {}}
        (cdir / f"c{i}.json").write_text(json.dumps({"id": f"c{i}", "spec": spec,
                                                     "metrics": m}))
    rows = runner.load_rows(tmp_path, "pipeline")
    assert set(rows.cpu) == {UNCAL, "epyc-7713"}


def test_a_table_with_an_uncalibrated_column_says_how_to_calibrate_above_it(monkeypatch):
    from kvsim.experiments import framework

    frame = pd.DataFrame({"row": ["x"], "seed": [1.0], f"sim:{UNCAL}": [1.5]})
    table = framework.Table(name="t", title="T", unit="x", frame=frame)

    class Exp:
        title, seed, doc = "e", "s", "d"

        def tables(self, rows):
            return [table]

    monkeypatch.setattr(framework, "get", lambda name: Exp())
    md = report.experiment_markdown("e", pd.DataFrame({"a": [1]}), plots=False)
    before, after = md.split("| row |", 1)
    assert before.rstrip().endswith(report.CALIBRATE_HINT)
    assert "kvsim calibrate" in report.CALIBRATE_HINT


def test_a_run_without_local_says_how_to_calibrate(monkeypatch):
    monkeypatch.setattr(local, "is_calibrated", lambda: False)
    monkeypatch.setattr(local, "core_is_known", lambda: False)
    assert report.calibrate_note(None) == report.LOCAL_ABSENT_HINT
    assert report.calibrate_note(["graviton3"]) is None  # local was not asked for
    monkeypatch.setattr(local, "core_is_known", lambda: True)
    assert report.calibrate_note(None) is None  # the column carries the mark and the hint
    monkeypatch.setattr(local, "is_calibrated", lambda: True)
    assert report.calibrate_note(None) is None


def test_experiment_run_says_where_its_cells_ran_and_prints_its_tables(tmp_path):
    out = tmp_path / "res"
    res = run_kvsim("experiment", "run", "kvobj_memory", "--only", "sim", "--cpu",
                    "epyc-7713", "--workers", "1", "-o", out)
    assert res.returncode == 0, res.stderr.decode()
    text = res.stdout.decode()
    assert "ran sim cells: 1 local worker process on this machine" in text
    assert "### GET misses and cycles" in text and "| epyc-7713 |" in text
    # --quiet: the summary line only, no tables
    quiet = run_kvsim("--quiet", "experiment", "run", "kvobj_memory", "--only", "sim",
                      "--cpu", "epyc-7713", "--workers", "1", "-o", out)
    assert quiet.returncode == 0 and "###" not in quiet.stdout.decode()


def test_a_dask_run_names_its_scheduler_and_workers(tmp_path):
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  host="127.0.0.1", dashboard_address=None) as cluster:
        res = runner.run(["kvobj_memory"], tmp_path, cpus=["epyc-7713"], kinds=["sim"],
                         scheduler=cluster.scheduler_address, log=lambda m: None)
        workers = sorted(cluster.scheduler_info["workers"])
    assert not res["failed"]
    (line,) = res["where"]
    assert cluster.scheduler_address in line and "2 workers" in line
    assert all(w in line for w in workers)
