"""A c_ref child killed by a signal in the middle of a cell (`kvsim experiment run`).

A tiny study (a setup traced for two variants in one c_ref run, ``trace --then``; a setup
traced alone; a native pair) runs on a ``kvsim-cref`` that dies by SIGKILL or SIGTERM in
each trace and native run (a shell script found through kvsim.artifacts' environment
override, which says a line on stderr and runs the real binary first: half a trace on
stdout, the --then traces whole, the native JSON whole). Every cell of the sweep is then
failed with one line naming the signal, none is written as done, no trace is kept for a
later run to reuse; the same command again (the same script, so the same cell ids)
computes every cell.
"""

import json
import os
import signal

import pytest

from kvsim.experiments import runner
from kvsim.experiments.framework import native_cell, sim_cell

NAME = "tiny_killed"
OPTS = {"keys": 2000, "ops": 200, "value_size": 64, "depth": 8, "seed": 3}


def _cells(scale, cpus):
    out = [sim_cell(NAME, "pipeline", dict(OPTS, variant=v), "epyc-7713", {"variant": v},
                    "g", v == "naive") for v in ("naive", "lookahead")]
    alone = dict(OPTS, keys=1000, variant="naive")  # another setup: c_ref's plain trace
    out.append(sim_cell(NAME, "pipeline", alone, "epyc-7713", {"variant": "alone"}, "h",
                        True))
    out.append(native_cell(NAME, "pipeline", dict(OPTS, variant="naive"),
                           dict(OPTS, variant="lookahead"), 2, {"variant": "lookahead"},
                           warmup_rounds=0))
    return out


KILLER = """#!/bin/sh
# kvsim-cref dying by signal $KVSIM_TEST_KILL in each trace and native run, after a line on
# stderr and the real one's run: at most 64 KiB of what it printed (half a trace with -o -),
# its files whole
case "$1" in
    trace|native)
        if [ -n "$KVSIM_TEST_KILL" ]; then
            echo "kvsim-cref: building the setup" >&2
            "{real}" "$@" | head -c 65536
            kill -s "$KVSIM_TEST_KILL" $$
            exit 0
        fi;;
esac
exec "{real}" "$@"
"""


@pytest.fixture
def killer(cref_stand_in):
    return cref_stand_in(NAME, "a c_ref child killed", _cells, KILLER)


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_cells_of_a_killed_c_ref_child_fail_naming_the_signal_and_rerun(killer, tmp_path,
                                                                        monkeypatch, sig):
    out = tmp_path / "res"
    quiet = {"log": lambda m: None, "workers": 1}
    monkeypatch.setenv("KVSIM_TEST_KILL", sig.name.removeprefix("SIG"))
    res = runner.run([NAME], out, **quiet)
    assert res["total"] == 4 and res["computed"] == 0 and not res["skipped"]
    assert len(res["failed"]) == 4  # every cell: the three traced ones and the native pair
    for cid, msg in res["failed"]:
        assert "\n" not in msg and msg.startswith(f"{NAME} cell {cid}: ")
        assert f"kvsim-cref was killed by signal {sig.name}" in msg, msg
        assert "its last message: building the setup" in msg  # said, but not why it stopped
    cdir = out / NAME / "cells"
    assert not list(cdir.glob("*")), "a cell of a killed child was written as done"
    assert not list((out / NAME).glob(".traces/**/*.kvt")), "a killed child's trace was kept"
    assert not (out / NAME / f"{NAME}.parquet").exists()

    # the same command again, the child left alive: every cell is computed, none was done
    monkeypatch.delenv("KVSIM_TEST_KILL")
    again = runner.run([NAME], out, **quiet)
    assert not again["failed"], again["failed"]
    assert (again["already_done"], again["computed"]) == (0, 4)
    ids = {p.stem for p in cdir.glob("*.json")}
    assert ids == {cid for cid, _ in res["failed"]}
    for p in cdir.glob("*.json"):
        doc = json.loads(p.read_text())
        assert doc["metrics"], p.name
        if doc["spec"]["kind"] == "sim":
            assert doc["metrics"]["cycles"] > 0
    assert os.environ.get("KVSIM_TEST_KILL") is None


def test_a_killed_continued_simulation_fails_naming_the_signal(tmp_path, monkeypatch):
    """The setup's other child, the forked process that continues a trace's simulation from
    the shared warm-up (cells._continue_in_child), killed before it sends its metrics: the
    group fails naming the signal, whatever part of them came through."""
    from kvsim.experiments import cells, cref

    opts = {"keys": 3000, "value_size": 100, "keys_per_command": 10, "ops": 300, "seed": 1,
            "table": "hashtable"}
    outs = [(tmp_path / "none.kvt", dict(opts, variant="none")),
            (tmp_path / "batch.kvt", dict(opts, variant="batch", batch=16))]
    cref.trace_many("mget", outs)
    monkeypatch.setattr(cells, "_finish_continued",
                        lambda *a: os.kill(os.getpid(), signal.SIGKILL))
    with pytest.raises(RuntimeError, match=r"^none\.kvt: the continued simulation was killed "
                                           r"by signal SIGKILL$"):
        cells._simulate_continued([p for p, _ in outs], ["epyc-7713"])
