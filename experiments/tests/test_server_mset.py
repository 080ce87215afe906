"""`kvsim-cref serverloop --command mset` and experiments/server_mset.py's figures."""

from __future__ import annotations

import json
import subprocess

import pytest

from kvsim import artifacts
from kvsim.experiments import server_mset as sm


def _cref(*args: object, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run([str(artifacts.path(artifacts.CREF_CLI)), *map(str, args)],
                          capture_output=True, text=True, check=check)


def test_serverloop_mset_runs_over_the_filled_keys():
    out = json.loads(_cref("serverloop", "--command", "mset", "--mset-keys", 3, "--keys", 50,
                           "--value-size", 40, "--iters", 64, "--rounds", 2).stdout)
    assert out["command"] == "mset" and out["mset_keys"] == 3 and out["keys"] == 50
    for arm in sm.ARMS:
        assert len(out[f"{arm}_segment_ns"]) == len(out[f"{arm}_usec_per_call"]) == 2
        assert all(s > 0 for s in out[f"{arm}_segment_ns"])
        assert all(u >= 0 for u in out[f"{arm}_usec_per_call"])  # -1: no commandstats line


def test_serverloop_mset_trace_is_deterministic(tmp_path):
    a, b = tmp_path / "a.kvt", tmp_path / "b.kvt"
    for p in (a, b):
        _cref("serverloop", "--command", "mset", "--mset-keys", 4, "--keys", 200,
              "--value-size", 64, "--iters", 50, "--trace", p)
    assert a.read_bytes() == b.read_bytes()


@pytest.mark.parametrize("args, word", [(("--command", "hset"), "--command"),
                                        (("--command", "mset", "--mset-keys", 0), "--mset-keys")])
def test_serverloop_bad_option_is_one_line(args, word):
    res = _cref("serverloop", *args, "--iters", 5, check=False)
    assert res.returncode != 0 and word in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1 and "Traceback" not in res.stderr


def _run(label: str, depth: int, none: list[float], loop: list[float]) -> dict:
    return {"label": label, "depth": depth, "none_segment_ns": none,
            "none_clock_ns": [10.0] * len(none), "loopback_segment_ns": loop,
            "loopback_clock_ns": [10.0] * len(loop),
            "none_usec_per_call": [1.0] * len(none), "loopback_usec_per_call": [2.0] * len(loop)}


def test_per_request_is_the_segment_less_the_clock_over_the_depth():
    runs = [_run(label, sm._depth(o), [10.0 + 100 * sm._depth(o) + i for i in range(3)],
                 [10.0 + 120 * sm._depth(o) + 2 * i for i in range(3)])
            for _ in range(3) for label, o in sm.PLAN]
    rows = sm.summarize(runs)
    assert [r["label"] for r in rows] == [label for label, _ in sm.PLAN]
    for r, (_, o) in zip(rows, sm.PLAN, strict=True):
        d = sm._depth(o)
        assert r["none"]["n"] == r["loopback"]["n"] == 9
        assert r["none"]["min"] == pytest.approx(100.0)
        assert r["none"]["median"] == pytest.approx(100 + 1 / d)
        assert r["loopback"]["median"] == pytest.approx(120 + 2 / d)
        lo, hi = r["loopback"]["ci95"]
        assert lo <= r["loopback"]["median"] <= hi


def test_insitu_summary_takes_medians_of_the_runs():
    runs = [{"round": i, "calls": 100, "usec_per_call": 7.0 + i, "cpu_ns": 15000.0 + i,
             "ticks": 10, "user_ns": 10000.0 + i,
             "loop": _run("mset-10", 1, [6010.0 + i], [7010.0 + i])} for i in range(7)]
    s = sm.summarize_insitu(runs)
    assert s["server_usec_per_call"]["median"] == 10.0
    assert s["server_cpu_ns"]["median"] == 15003.0
    assert s["loop_none_ns"]["median"] == 6003.0 and s["loop_loopback_ns"]["median"] == 7003.0
    assert s["loop_loopback_usec_per_call"]["median"] == 2.0
    assert s["server_cpu_ns"]["ci95"][0] <= 15003.0 <= s["server_cpu_ns"]["ci95"][1]


def test_speedups_pair_the_rounds_and_divide_the_predictions():
    runs = []
    for r in range(3):
        for label, o in sm.PLAN:
            base = 2000.0 if "batch" in o else 3000.0
            runs.append({**_run(label, 1, [base] * 3, [base + 10 * r + i for i in range(3)]),
                         "round": r})
    tr = [{"label": label, "ns": 300.0 if "batch" in o else 600.0} for label, o in sm.PLAN]
    out = sm.speedups(runs, tr)
    assert [(x["without"], x["with"]) for x in out] == list(sm.BATCH_PAIRS)
    for x in out:
        assert x["native"]["n"] == 9 and x["predicted"] == 2.0
        ratios = sorted((3000 + 10 * r + i - 10) / (2000 + 10 * r + i - 10)
                        for r in range(3) for i in range(3))
        assert x["native"]["median"] == pytest.approx(ratios[4])
        assert x["native"]["min"] == pytest.approx(ratios[0])
