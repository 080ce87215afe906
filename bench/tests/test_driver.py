"""python -m bench: the one driver lists every suite, runs each suite's own --help, refuses an
unknown suite with one line, and bench/README.md lists every suite."""

import subprocess
import sys
from pathlib import Path

import pytest

from bench.__main__ import SUITES

ROOT = Path(__file__).resolve().parents[2]


def _bench(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "bench", *args], capture_output=True,
                          text=True, cwd=ROOT, timeout=120)


def test_the_driver_lists_every_suite() -> None:
    res = _bench()
    assert res.returncode == 0
    listed = [ln.split()[0] for ln in res.stdout.splitlines()[1:]]
    assert listed == list(SUITES)


@pytest.mark.parametrize("suite", [s for s, (t, _) in SUITES.items() if not t.endswith(".sh")])
def test_every_python_suite_has_its_help(suite: str) -> None:
    res = _bench(suite, "--help")
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("usage:")


def test_an_unknown_suite_is_one_line() -> None:
    res = _bench("nosuch")
    assert res.returncode == 2 and res.stdout == ""
    assert res.stderr.strip().splitlines() == [
        f"python -m bench: error: unknown suite 'nosuch' (known: {', '.join(SUITES)})"]


def test_the_readme_lists_every_suite_and_module() -> None:
    text = (ROOT / "bench" / "README.md").read_text()
    for suite, (target, _) in SUITES.items():
        module = target if target.endswith(".sh") else f"{target}.py"
        assert f"| `{suite}` | `{module}` |" in text, suite


def test_the_benchmarks_are_not_in_the_package() -> None:
    import kvsim.sim
    import kvsim.traces

    for pkg in (kvsim.sim, kvsim.traces):
        here = Path(pkg.__file__).parent
        assert not [p.name for p in here.glob("*bench*.py")], here
