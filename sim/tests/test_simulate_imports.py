"""`kvsim simulate` loads only what a simulation needs: start-up is part of every run a user
times, so the modules of other commands (pandas, pyarrow, matplotlib, tqdm, the trace
inspection and writer modules) stay unloaded."""

from __future__ import annotations

import json
import subprocess
import sys

from kvsim import traces
from kvsim.sim import bench

NOT_FOR_SIMULATE = ("pandas", "pyarrow", "matplotlib", "tqdm", "kvsim.traces.inspect",
                    "kvsim.traces.writer", "kvsim.traces.frame", "kvsim.sim.reference",
                    "kvsim.sim.calibrate")

SCRIPT = """
import atexit, json, runpy, sys
atexit.register(lambda: print(json.dumps(sorted(sys.modules)), file=sys.stderr))
sys.argv = ["kvsim", "simulate", sys.argv[1], "--cpu", "graviton3", "--json"]
runpy.run_module("kvsim.experiments.cli", run_name="__main__")
"""


def test_simulate_loads_no_module_of_other_commands(tmp_path) -> None:
    p = tmp_path / "t.kvt"
    with traces.Writer(p, {"workload": {"name": "test"}}) as w:
        w.write(bench.random_loads(5000, 3))
    res = subprocess.run([sys.executable, "-c", SCRIPT, str(p)], capture_output=True,
                         text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["records"] == 5000
    loaded = set(json.loads(res.stderr.strip().splitlines()[-1]))
    assert "kvsim.sim._intake" in loaded  # the run went through the compiled intake
    assert not [m for m in NOT_FOR_SIMULATE if m in loaded]
