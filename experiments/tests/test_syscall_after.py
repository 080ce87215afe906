"""experiments/syscall_after.py: the tick-sampling interval and the PING gap arithmetic."""

from __future__ import annotations

import pytest

from kvsim.experiments.syscall_after import ping_gap, wilson


def test_wilson_holds_the_proportion_and_narrows_with_n() -> None:
    lo, hi = wilson(10, 100)
    assert lo < 0.1 < hi
    lo2, hi2 = wilson(100, 1000)
    assert hi2 - lo2 < hi - lo
    assert wilson(0, 50)[0] == 0.0 and wilson(0, 0) == (0.0, 1.0)


def test_ping_gap_adds_only_an_after_effect_outside_noise() -> None:
    noisy = {"median": 500.0, "within_noise": True}
    real = {"median": 70.0, "within_noise": False}
    rows = [{"loopback": noisy}, {"loopback": real}]
    ping = {"predicted": [{"depth": 1, "clients": 50, "cpu": "x", "user_ns": 100.0}],
            "native": [{"depth": 1, "clients": 50, "user_ns": 400.0, "cpu_ns": 4000.0,
                        "writes": 1.0}],
            "measured": {"runs": [{"depth": 1, "clients": 50, "ticks": 50, "user_ns": 400.0,
                                   "cpu_ns": 4000.0}]}}
    (g,) = ping_gap(ping, rows)
    assert g["user_ticks"] == 5 and g["ratio"] == 0.25
    assert g["after_effect_ns_max"] == 70.0
    assert g["ratio_with_after_effect_max"] == pytest.approx(170 / 400)
    lo, hi = g["native_user_ns_ci95"]
    assert lo < 400 < hi
