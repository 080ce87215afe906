import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def run_kvsim(*args, input=None, check=False, cwd=None):
    """Run the kvsim CLI in a subprocess; returns CompletedProcess with bytes output."""
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", "kvsim.experiments.cli", *map(str, args)],
                          input=input, capture_output=True, check=check, cwd=cwd or ROOT,
                          env=env, timeout=600)


@pytest.fixture
def kvsim():
    return run_kvsim


SMALL = ["--keys", "2000", "--ops", "300", "--value-size", "64", "--seed", "7"]


@pytest.fixture(scope="session")
def small_trace(tmp_path_factory):
    """A small pipelined GET trace (lookahead variant) made once per session."""
    path = tmp_path_factory.mktemp("traces") / "small.kvt"
    res = run_kvsim("trace", "pipeline", "-o", path, "--variant", "lookahead", *SMALL)
    assert res.returncode == 0, res.stderr.decode()
    return path
