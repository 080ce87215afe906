"""Moved studies keep their old spellings for one release: the old import path is the same
module object, and the old command runs the same program with the same options."""

import importlib
import re
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import run_kvsim

ROOT = Path(__file__).resolve().parents[2]

#: old import path -> the module it now is
MODULES = {
    "kvsim.experiments.demo": "kvsim.experiments.pipeline_demo",
    "kvsim.sim.gem5_compare": "kvsim.experiments.gem5_compare",
    "kvsim.model.cref": "kvsim.model.cref_binding",
    "bench.cref": "bench.cref_variants",
}

#: (old command, new command): both print the same options
COMMANDS = [
    ([sys.executable, "c_ref/bench/fidelity.py"],
     [sys.executable, "-m", "kvsim.experiments.fidelity"]),
    ([sys.executable, "c_ref/bench/warmup.py"],
     [sys.executable, "-m", "kvsim.experiments.warmup_convergence"]),
    ([sys.executable, "c_ref/bench/paired.py"], [sys.executable, "-m", "bench", "paired"]),
    ([sys.executable, "-m", "kvsim.sim.gem5_compare"],
     [sys.executable, "-m", "kvsim.experiments.gem5_compare"]),
]


@pytest.mark.parametrize("old", sorted(MODULES))
def test_old_import_path_is_the_module(old):
    assert importlib.import_module(old) is importlib.import_module(MODULES[old])


def _options(cmd: list[str]) -> list[str]:
    res = subprocess.run([*cmd, "--help"], capture_output=True, text=True, cwd=ROOT,
                         timeout=120, check=False)
    assert res.returncode == 0, res.stderr
    return sorted(set(re.findall(r"(?<![\w-])--[a-z][\w-]*", res.stdout)))


@pytest.mark.parametrize(("old", "new"), COMMANDS, ids=lambda c: " ".join(c[1:]))
def test_old_command_takes_the_same_options(old, new):
    assert _options(old) == _options(new)
    assert len(_options(new)) > 1  # more than --help


def test_old_experiment_demo_is_the_pipeline_demo():
    old = run_kvsim("experiment", "demo", "--help", check=True).stdout.decode()
    new = run_kvsim("experiment", "pipeline-demo", "--help", check=True).stdout.decode()
    opts = [re.findall(r"(?<![\w-])--[a-z][\w-]*", t) for t in (old, new)]
    assert opts[0] == opts[1] and "--publish" in opts[1]
