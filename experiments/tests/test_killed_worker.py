"""A local worker process killed by a signal in the middle of a task (`kvsim experiment
run`), as the OOM killer's SIGKILL ends one: a real process pool, whose worker is killed by
the ``kvsim-cref`` it runs (a shell script found through kvsim.artifacts' environment
override that, the first time it is run, kills its parent, the worker, with SIGKILL).

The cells the worker was computing fail with one line naming the signal and those cells;
the task queued behind it goes on in a new pool and its cell is written; the same command
again computes only the failed cells.
"""

import json

import pandas as pd
import pytest

from kvsim.experiments import runner
from kvsim.experiments.framework import sim_cell

NAME = "tiny_killed_worker"
OPTS = {"keys": 2000, "ops": 200, "value_size": 64, "depth": 8, "seed": 3}


def _cells(scale, cpus):
    # two setups, so two tasks: the first traces two variants in one c_ref run
    out = [sim_cell(NAME, "pipeline", dict(OPTS, variant=v), "epyc-7713", {"variant": v},
                    "g", v == "naive") for v in ("naive", "lookahead")]
    alone = dict(OPTS, keys=1000, variant="naive")
    out.append(sim_cell(NAME, "pipeline", alone, "epyc-7713", {"variant": "alone"}, "h",
                        True))
    return out


KILLER = """#!/bin/sh
# the first trace run (mkdir of $KVSIM_TEST_KILL_WORKER succeeds once) kills the process
# that started it, the pool's worker, with SIGKILL; every other run is the real kvsim-cref
case "$1" in
    trace)
        if [ -n "$KVSIM_TEST_KILL_WORKER" ] && mkdir "$KVSIM_TEST_KILL_WORKER" 2>/dev/null
        then
            kill -s KILL $PPID
            exit 1
        fi;;
esac
exec "{real}" "$@"
"""


@pytest.fixture
def killer(cref_stand_in, monkeypatch, tmp_path):
    script = cref_stand_in(NAME, "a worker process killed", _cells, KILLER)
    monkeypatch.setenv("KVSIM_TEST_KILL_WORKER", str(tmp_path / "killed-once"))
    return script


def test_a_killed_worker_fails_its_cells_naming_the_signal_and_a_rerun_resumes(killer,
                                                                              tmp_path):
    out = tmp_path / "res"
    logged: list[str] = []
    res = runner.run([NAME], out, log=logged.append, workers=1)
    assert (tmp_path / "killed-once").is_dir(), "the worker was not killed"
    assert res["total"] == 3 and not res["skipped"]
    # the first task's two cells were in flight: they fail, naming the signal and the cells
    assert len(res["failed"]) == 2 and res["computed"] == 1, res
    lost = sorted(cid for cid, _ in res["failed"])
    for cid, msg in res["failed"]:
        assert "\n" not in msg and msg.startswith(f"{NAME} cell {cid}: a worker process "
                                                  "(pid "), msg
        assert msg.endswith("was killed by signal SIGKILL with 2 cells in flight: "
                            + ", ".join(lost)), msg
    said = [m for m in logged if "killed by signal SIGKILL" in m]
    assert len(said) == 1 and said[0] in res["failed"][0][1]
    assert any("in a new pool" in m for m in logged)
    # the task queued behind it ran in a new pool: its cell is written, the lost ones not
    cdir = out / NAME / "cells"
    written = {p.stem for p in cdir.glob("*.json")}
    assert len(written) == 1 and not written & set(lost)
    table = out / NAME / f"{NAME}.parquet"
    assert list(pd.read_parquet(table)["cell_id"]) == sorted(written)  # the done cells

    # the same command again: the done cell is kept, the failed ones are computed
    again = runner.run([NAME], out, log=lambda m: None, workers=1)
    assert not again["failed"], again["failed"]
    assert (again["already_done"], again["computed"]) == (1, 2)
    assert {p.stem for p in cdir.glob("*.json")} == written | set(lost)
    for p in cdir.glob("*.json"):
        assert json.loads(p.read_text())["metrics"]["cycles"] > 0
    assert sorted(pd.read_parquet(table)["cell_id"]) == sorted(written | set(lost))


def test_the_lost_tasks_are_the_dead_workers():
    """Which tasks fail: those on a worker ended by a signal of its own, not the SIGTERM
    the broken pool sends the others (their tasks go on in a new pool); every task that
    was computing when no worker's end tells (each by SIGTERM, or no status known)."""
    ran = {0: 101, 1: 102, 2: 103}
    assert runner._lost_tasks(ran, {101: -9, 102: -15, 103: 0}) == {0: 101}
    assert runner._lost_tasks(ran, {101: -9, 102: -9, 103: -15}) == {0: 101, 1: 102}
    assert runner._lost_tasks(ran, {101: -15, 102: -15, 103: -15}) == ran
    assert runner._lost_tasks(ran, {}) == ran
    assert runner._by_worker({0: 101, 2: 101, 1: None}, {101: -9}) == {(101, -9): [0, 2],
                                                                       (None, None): [1]}
