import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


IS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0
# Root reads and writes past permission bits through two capabilities; a subprocess started
# without them (util-linux's setpriv) meets the bits like any user.
NO_DAC_OVERRIDE = ["setpriv", "--bounding-set", "-dac_override,-dac_read_search", "--"]


def run_kvsim(*args, input=None, check=False, cwd=None, honour_permissions=False):
    """Run the kvsim CLI in a subprocess; returns CompletedProcess with bytes output.

    ``honour_permissions``: when running as root, drop the capabilities that bypass file
    permission bits, so an unreadable file or a read-only directory is one for the CLI."""
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    prefix = []
    if honour_permissions and IS_ROOT:
        if shutil.which("setpriv") is None:
            pytest.skip("running as root without util-linux's setpriv: cannot drop the "
                        "capabilities that bypass permission bits")
        prefix = NO_DAC_OVERRIDE
    return subprocess.run([*prefix, sys.executable, "-m", "kvsim.experiments.cli",
                           *map(str, args)],
                          input=input, capture_output=True, check=check, cwd=cwd or ROOT,
                          env=env, timeout=600)


@pytest.fixture
def kvsim():
    return run_kvsim


SMALL = ["--keys", "2000", "--ops", "300", "--value-size", "64", "--seed", "7"]


@pytest.fixture(scope="session")
def small_trace(tmp_path_factory):
    """A small pipelined GET trace (lookahead variant) made once per session, without its
    setup's warm-up (``--warm-setup none``: the records the tests count are the measured
    phase's; test_warm_setup.py covers the default)."""
    path = tmp_path_factory.mktemp("traces") / "small.kvt"
    res = run_kvsim("trace", "pipeline", "-o", path, "--variant", "lookahead", *SMALL,
                    "--warm-setup", "none")
    assert res.returncode == 0, res.stderr.decode()
    return path


@pytest.fixture
def cref_stand_in(monkeypatch, tmp_path):
    """Install a tiny experiment and a ``kvsim-cref`` stand-in for this test: a function of
    (name, title, cells, script) registering ``Experiment(name, title, "none", cells)`` and
    writing ``script`` (a shell script whose ``{real}`` is the real binary's path) where
    kvsim.artifacts' environment override finds it; returns the script's path."""
    from kvsim import artifacts
    from kvsim.experiments import framework
    from kvsim.experiments.framework import Experiment

    def install(name, title, cells, script):
        framework._load()
        monkeypatch.setitem(framework._REGISTRY, name,
                            Experiment(name, title, "none", cells, lambda rows: []))
        path = tmp_path / "kvsim-cref"
        path.write_text(script.replace("{real}", str(artifacts.path(artifacts.CREF_CLI))))
        path.chmod(0o755)
        monkeypatch.setenv(artifacts.ENV[artifacts.CREF_CLI], str(path))
        return path
    return install
