"""The Python fuzz targets keep no memory per input when instrumented as they are fuzzed.

``fuzz/py/leak_check.py`` instruments kvsim as ``atheris_main`` does and measures, with
tracemalloc, the bytes still allocated per input after a warm-up. A target that keeps
anything per input (a leaked array, a growing cache) exceeds the bound below; atheris'
comparison hook, unwrapped, leaks every instrumented numpy comparison's result, which
``test_the_bound_catches_the_hook_leak`` shows the bound catching.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from fuzz_targets import TARGETS

pytest.importorskip("atheris")

FUZZ = Path(__file__).resolve().parent.parent
#: Bytes per input a target may keep: what warm-up leaves behind (one-off caches) over
#: 200 inputs stays far below; the hook's leak was 1-7 KiB per input.
BOUND = 256


def _check(*args: str) -> list[dict]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(FUZZ / "py"),
                                                       os.environ.get("PYTHONPATH", "")]))
    r = subprocess.run([sys.executable, str(FUZZ / "py" / "leak_check.py"), *args],
                       capture_output=True, text=True, env=env, check=False, timeout=900)
    assert r.returncode == 0, r.stderr
    return [json.loads(line) for line in r.stdout.splitlines()]


def test_no_target_keeps_memory_per_input() -> None:
    rows = _check(*TARGETS, "--inputs", "200")
    assert [r["target"] for r in rows] == list(TARGETS)
    for r in rows:
        assert r["bytes_per_input"] < BOUND, r


def test_the_bound_catches_the_hook_leak() -> None:
    (row,) = _check("trace_records", "--no-fix")
    if row["hook_extra_refs"] == 0:
        pytest.skip("this atheris' comparison hook keeps no extra reference")
    assert row["bytes_per_input"] > BOUND, row
