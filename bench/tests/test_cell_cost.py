"""python -m bench cell-cost: one small study group by phase, written with its provenance; the
projection pays each setup once; a missing --cref-before is one line and no file."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench import cell_cost

ROOT = Path(__file__).resolve().parents[2]


def test_the_projection_pays_each_setup_once() -> None:
    r = {"plan": {"cells": 60, "traces": 10, "setups": 2},
         "setup_group": {"traces": 5, "cpu_s_alone": 150.0, "cpu_s_together": 86.0,
                         "setup_cpu_s": 16.0}}
    p = cell_cost.project(r, cores=2)
    assert p["cpu_s_per_trace_before"] == 30.0
    # after: 2 setups of 16 s, and per trace (86 - 16) / 5 = 14 s
    assert p["cpu_s_per_trace_after"] == round((2 * 16 + 10 * 14) / 10, 2)
    assert p["cpu_s_per_cell_before"] == 5.0
    assert p["hours_before"] == round(300 / 2 / 3600, 3)


@pytest.mark.slow
def test_a_small_hash_group(tmp_path: Path) -> None:
    out = tmp_path / "cc.json"
    res = subprocess.run([sys.executable, "-m", "bench", "cell-cost", "--study", "hash",
                          "--scale", "small", "--cpu", "epyc-7713", "--out", str(out)],
                         capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert res.returncode == 0, res.stderr
    doc = json.loads(out.read_text())
    assert {"commit", "machine", "date_utc"} <= set(doc["provenance"])
    (s,) = doc["studies"]
    assert s["plan"]["traces"] >= s["plan"]["setups"] >= 1
    assert 0 < s["warmup_records"] < s["records"]
    assert set(s["engine"]) == {"epyc-7713"}
    # the variants of one setup trace the same warm-up prefix (c_ref's setup ignores them)
    assert s["setup_shared_check"]["same_warmup_prefix"] is True
    assert s["setup_group"]["same_bytes"] is True
    assert s["setup_group"]["same_metrics"] is True
    assert f"# wrote {out}" in res.stdout


def test_a_missing_before_binary_is_one_line(tmp_path: Path) -> None:
    out = tmp_path / "cc.json"
    res = subprocess.run([sys.executable, "-m", "bench", "cell-cost", "--cref-before",
                          str(tmp_path / "nosuch"), "--out", str(out)],
                         capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert res.returncode == 1 and not out.exists()
    assert len(res.stderr.strip().splitlines()) == 1
