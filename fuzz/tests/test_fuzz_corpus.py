"""Every committed corpus input of the Python fuzz targets, replayed without atheris.

The seeds (``seed-*``) keep each target's paths exercised; ``crash-*`` files are inputs that
once broke a target and stay as regression tests. ``fuzz/run.py --replay`` replays the C
targets' corpora under ASan/UBSan (``make test`` runs it).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from fuzz_targets import TARGETS, FuzzFinding

FUZZ = Path(__file__).resolve().parent.parent
CASES = [(t, p) for t in TARGETS for p in sorted((FUZZ / "corpus" / t).iterdir())]


@pytest.mark.parametrize(("target", "path"), CASES, ids=[f"{t}/{p.name}" for t, p in CASES])
def test_corpus_input(target: str, path: Path) -> None:
    TARGETS[target](path.read_bytes())


def test_every_target_has_seeds() -> None:
    for t in TARGETS:
        assert any(p.name.startswith("seed-") for p in (FUZZ / "corpus" / t).iterdir()), t


def test_a_finding_is_reported() -> None:
    """The targets can fail: a converter output that breaks a record rule is a finding."""
    import fuzz_targets
    import numpy as np

    from kvsim import traces

    bad = np.zeros(1, dtype=traces.RECORD_DTYPE)  # a load of size 0
    with pytest.raises(FuzzFinding, match="size"):
        fuzz_targets._rules_hold(bad, {})


def test_driver_refuses_an_unknown_target() -> None:
    r = subprocess.run([sys.executable, str(FUZZ / "run.py"), "--targets", "nope"],
                       capture_output=True, text=True, check=False)
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [
        r.stderr.strip()] and "unknown target 'nope'" in r.stderr
    assert r.stdout == ""


def test_the_driver_runs_every_target() -> None:
    """A target added to fuzz_targets.TARGETS or as fuzz/c/fuzz_*.c is one run.py runs."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("fuzz_run", FUZZ / "run.py")
    run = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(run)
    assert sorted(run.PY_TARGETS) == sorted(TARGETS)
    c_files = sorted(p.stem.removeprefix("fuzz_") for p in (FUZZ / "c").glob("fuzz_*.c"))
    assert sorted(run.C_TARGETS) == c_files
    for t in run.C_TARGETS + run.PY_TARGETS:
        assert (FUZZ / "corpus" / t).is_dir(), t


def _run_module():
    import importlib.util

    spec = importlib.util.spec_from_file_location("fuzz_run", FUZZ / "run.py")
    run = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(run)
    return run


def test_driver_refuses_a_negative_execution_floor() -> None:
    r = subprocess.run([sys.executable, str(FUZZ / "run.py"), "--min-execs", "-1"],
                       capture_output=True, text=True, check=False)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.strip().splitlines() == ["fuzz: error: --min-execs: must be >= 0, got -1"]


def test_render_has_one_row_per_target(tmp_path) -> None:
    """``run.py --render`` prints what the result file holds, one row per target."""
    import json

    targets = [{"target": f"t{i}", "execs": 1000 * i + 7, "crashes": i % 2, "seconds": 60.5,
                "timed_execs": 500 + i, "coverage_edges": None if i == 0 else 10 * i}
               for i in range(3)]
    doc = {"provenance": {"commit": "0123456789abcdef",
                          "machine": {"cpu_model": "CPU", "cores": 2}},
           "command": "make fuzz", "seconds_per_target": 60, "load_average_1m_before": 1.0,
           "load_average_1m_after": 2.0, "goal_execs_per_target": 100_000, "targets": targets}
    f = tmp_path / "fuzz.json"
    f.write_text(json.dumps(doc))
    rows = [ln for ln in _run_module().render(str(f)).splitlines() if ln.startswith("| `")]
    assert len(rows) == len(targets)
    for row, t in zip(rows, targets, strict=True):
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert cells[0] == f"`{t['target']}`"
        assert cells[1].replace(",", "") == str(t["execs"])
        assert cells[2] == str(t["crashes"])
        assert cells[3].replace(",", "") == str(t["timed_execs"])
