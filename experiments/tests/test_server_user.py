"""experiments/server_user.py: the per-request figures it derives from serverloop's rounds."""

from __future__ import annotations

import pytest

from kvsim.experiments import server_user as su


def _run(command: str, depth: int, none: list[float], loop: list[float]) -> dict:
    return {"command": command, "depth": depth, "none_segment_ns": none,
            "none_clock_ns": [10.0] * len(none), "loopback_segment_ns": loop,
            "loopback_clock_ns": [10.0] * len(loop)}


def test_per_request_is_the_segment_less_the_clock_over_the_depth():
    runs = [_run(c, d, [10.0 + 100 * d + i for i in range(3)],
                 [10.0 + 120 * d + 2 * i for i in range(3)])
            for i in range(3) for c, d in su.PLAN]
    rows = su.summarize(runs)
    assert [(r["command"], r["depth"]) for r in rows] == list(su.PLAN)
    for r in rows:
        d = r["depth"]
        assert r["none"]["n"] == r["loopback"]["n"] == 9
        assert r["none"]["min"] == pytest.approx(100.0)
        assert r["none"]["median"] == pytest.approx(100 + 1 / d)
        assert r["loopback"]["median"] == pytest.approx(120 + 2 / d)
        assert r["after_effect"]["median"] == pytest.approx(20 + 1 / d)
        lo, hi = r["after_effect"]["ci95"]
        assert lo <= r["after_effect"]["median"] <= hi
