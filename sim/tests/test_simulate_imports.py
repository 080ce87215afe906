"""`kvsim simulate` loads only what a simulation needs: start-up is part of every run a user
times, so numpy (a trace file is decoded into memory that ctypes owns, and the engine's
counters come back as lists), zstandard (the compiled intake decompresses) and the modules of
other commands (pandas, pyarrow, matplotlib, tqdm, the trace inspection and writer modules)
stay unloaded; and what it prints is what the Python API gives with all of them at hand."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from bench import sim as bench
from kvsim import sim, traces

NOT_FOR_SIMULATE = ("numpy", "zstandard", "pandas", "pyarrow", "matplotlib", "tqdm",
                    "kvsim.traces.inspect", "kvsim.traces.writer", "kvsim.traces.frame",
                    "kvsim.sim.reference", "kvsim.sim.calibrate")

SCRIPT = """
import atexit, json, runpy, sys
atexit.register(lambda: print(json.dumps(sorted(sys.modules)), file=sys.stderr))
sys.argv = ["kvsim", "simulate", *sys.argv[1:], "--json"]
runpy.run_module("kvsim.experiments.cli", run_name="__main__")
"""


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    p = tmp_path_factory.mktemp("imports") / "t.kvt"
    with traces.Writer(p, {"workload": {"name": "test"}}) as w:
        w.write(bench.random_loads(5000, 3))
    return p


@pytest.mark.parametrize("cpus, functional", [(["graviton3"], False), (["local"], True),
                                              (["epyc-7713", "xeon-8255c"], False)])
def test_simulate_loads_no_module_of_other_commands(trace, cpus, functional) -> None:
    args = [a for c in cpus for a in ("--cpu", c)] + (["--functional"] if functional else [])
    res = subprocess.run([sys.executable, "-c", SCRIPT, str(trace), *args],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    loaded = set(json.loads(res.stderr.strip().splitlines()[-1]))
    assert "kvsim.traces._intake" in loaded  # the run went through the compiled intake
    # the local preset reads calibrate's table of known cores (not its numpy fits)
    unwanted = [m for m in NOT_FOR_SIMULATE
                if not (m == "kvsim.sim.calibrate" and "local" in cpus)]
    assert not [m for m in unwanted if m in loaded]
    got = json.loads(res.stdout)
    got = got if isinstance(got, list) else [got]
    with traces.open(trace) as tr:  # numpy arrays, decoded by the reader's Python code
        want = sim.simulate_many(tr, cpus, functional=functional, decode="python")
    assert [g["records"] for g in got] == [5000] * len(cpus)
    for g, w in zip(got, want, strict=True):
        for key in ("trace", "engine_threads"):  # the path given; the threads it ran on
            g.pop(key), w.pop(key)
        g.pop("cpu_label")  # the CLI's name for the CPU in tables: `local (uncalibrated)`
        g.pop("setup")  # the CLI's word on how the measured phase starts (the header's)
        assert g == json.loads(json.dumps(w))
