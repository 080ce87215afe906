"""sim/calibrate_copy.py: the fetch share of a copy (its cold-destination cost beyond a hot
one, over what loads of the same lines cost) and the threshold it gives; the program's own
output on any machine (no timing asserted)."""

from __future__ import annotations

import pytest

from kvsim.sim import calibrate_copy as cc

SIZES = [4096, 16384, 65536]


def _raw(penalty: dict[str, list[float]], reps: int = 9) -> dict:
    """Samples where every method costs 100 ns hot per size's line count, touch pays 5 ns a
    line flushed, and a method pays ``penalty[method][i]`` times touch's at size i."""
    pts = []
    for i, size in enumerate(SIZES):
        lines = size // 64
        for m in ("touch", *penalty):
            hot = [100.0 + j for j in range(reps)]
            extra = 5.0 * lines * (1.0 if m == "touch" else penalty[m][i])
            pts.append({"size": size, "method": m, "state": "hot", "ns": hot})
            pts.append({"size": size, "method": m, "state": "flushed",
                        "ns": [h + extra for h in hot]})
    return {"sizes": SIZES, "points": pts}


def _share(rows, size, method):
    return next(r for r in rows if r["size"] == size and r["method"] == method)["fetch_share"]


def test_a_copy_that_pays_what_loads_pay_has_share_one_and_none_zero():
    rows = cc.analyse(_raw({"read": [1.0, 1.0, 1.0], "nt": [0.0, 0.0, 0.0]}))
    assert _share(rows, 16384, "read")["median"] == pytest.approx(1.0)
    assert _share(rows, 16384, "nt")["median"] == pytest.approx(0.0)
    r = next(r for r in rows if r["size"] == 4096 and r["method"] == "read")
    assert r["flushed_penalty_ns_per_line"]["median"] == pytest.approx(5.0)
    assert r["hot"]["ci95"] is not None  # nine samples: an order-statistic interval


@pytest.mark.parametrize(("shares", "want"), [
    ([1.2, 1.1, 1.3], 0),            # every size fetches: the model's behaviour without it
    ([1.2, 0.1, 0.05], 16384),       # no fetch from 16 KiB on
    ([0.1, 0.1, 0.1], 4096),
    ([0.1, 1.0, 0.1], 65536),        # only a run up to the largest size counts
    ([0.1, 0.1, 0.9], 0),
])
def test_the_threshold_is_the_smallest_size_from_which_no_copy_fetches(shares, want):
    rows = cc.analyse(_raw({"read": shares, "movsb": [0.0, 0.0, 0.0]}))
    assert cc.no_fetch_bytes(rows) == want
    assert cc.no_fetch_bytes(rows, "movsb") == 4096


def test_the_program_prints_every_point_it_was_asked_for():
    from kvsim.sim.calibrate import run_bench

    out = run_bench("copyfetch", "4k", 65536, 262144, 2, 4096, 8192)
    got = {(p["size"], p["method"], p["state"]) for p in out["points"]}
    methods = {"memcpy", "loop", "read", "touch"} | ({"movsb", "nt"} if out["x86"] else set())
    states = {"hot", "pool"} | ({"flushed"} if out["x86"] else set())
    assert got == {(s, m, st) for s in (4096, 8192) for m in methods for st in states}
    assert all(len(p["ns"]) == 2 and min(p["ns"]) > 0 for p in out["points"])


def test_bad_arguments_are_one_line():
    from kvsim.sim.calibrate import run_bench

    with pytest.raises(OSError, match="SIZE: whole lines"):
        run_bench("copyfetch", "4k", 65536, 262144, 2, 100)
    with pytest.raises(OSError, match="POOL"):
        run_bench("copyfetch", "4k", 65536, 65536, 2, 4096)
