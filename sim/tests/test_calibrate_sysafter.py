"""`kvsim-calibrate sysafter` (sim/_calibrate/sysafter.c) and its analysis
(sim/calibrate_sysafter.py): the structure of a real run and the paired arithmetic."""

from __future__ import annotations

import pytest

from kvsim.sim import calibrate_sysafter as sa


def test_a_tiny_run_gives_every_arm_and_layout() -> None:
    """The figures are this machine's and not asserted; the shape and sanity are."""
    raw = sa.measure(quick=True, lines=(1, 16), rounds=6, iters=64)
    assert [(s["lines"], s["layout"]) for s in raw["sets"]] == [
        (1, "dense"), (1, "pages"), (16, "dense"), (16, "pages")]
    rows = sa.after_effect(raw)
    for r in rows:
        assert r["segment_ns"] > 0
        for c in sa.CALLS:
            assert r[c]["ci95"] is not None and r[c]["ci95"][0] <= r[c]["median"]
            assert r[c]["median"] <= r[c]["ci95"][1]


def test_after_effect_pairs_each_round_with_its_own_baseline() -> None:
    """A drift common to all arms cancels; a constant extra cost after a call is found."""
    base = [100.0 + 10 * r for r in range(7)]  # the machine slows down round by round
    s = {"lines": 64, "layout": "pages", "none_segment_ns": base,
         "getppid_segment_ns": list(base), "loopback_segment_ns": [b + 70 for b in base]}
    for a in sa.ARMS:
        s[f"{a}_user_ns"] = [1.0] * 7
    (row,) = sa.after_effect({"sets": [s]})
    assert row["bytes"] == 64 * 4096
    assert row["getppid"]["median"] == 0 and row["getppid"]["within_noise"]
    assert row["loopback"]["median"] == pytest.approx(70)
    assert row["loopback"]["ci95"] == [70, 70] and not row["loopback"]["within_noise"]


def test_microbenchmark_rejects_bad_arguments() -> None:
    from kvsim.sim.calibrate import run_bench

    with pytest.raises(OSError, match="usage"):
        run_bench("sysafter", 4, 1, 1)  # fewer than 8 iterations
    with pytest.raises(OSError, match="usage"):
        run_bench("sysafter", 64, 1, 0)  # an empty working set
