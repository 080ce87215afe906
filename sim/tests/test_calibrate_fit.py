"""The hierarchy fit of `kvsim calibrate` (sim/calibrate_fit.py) on small synthetic
hierarchies: a noisy but plausible chase curve still gives a CPU file; one no latencies
can fit fails with one line naming what, and writes nothing."""

from __future__ import annotations

import math
import tomllib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvsim import sim
from kvsim.sim import calibrate as cal
from kvsim.sim import calibrate_fit as cf

KIB = 1024
#: Working sets from within L1 to past L3 (4 KiB pages; no TLB in the file).
SIZES = [512, 768, 1536, 3072, 6144, 12288, 24576, 49152, 98304, 196608, 393216]
#: A fixed perturbation of each point, up to 8 %: it makes the curve non-monotone where
#: it is flat (within a level), as a busy machine's samples are.
NOISE = [1.06, 0.94, 1.08, 0.93, 1.05, 0.95, 1.07, 0.92, 1.04, 0.96, 1.03]


def _doc(lats=(4, 12, 40), dram_ns=100.0) -> dict:
    return {"name": "t", "freq_ghz": 1.0, "core": {"width": 4, "rob": 64},
            "cache": [{"name": "L1D", "size": 1 * KIB, "ways": 4, "line": 64,
                       "latency": lats[0]},
                      {"name": "L2", "size": 8 * KIB, "ways": 8, "line": 64,
                       "latency": lats[1]},
                      {"name": "L3", "size": 64 * KIB, "ways": 8, "line": 64,
                       "latency": lats[2]}],
            "dram": {"latency_ns": dram_ns}}


@pytest.fixture
def small(monkeypatch):
    """Few loads per chase and few candidates: each fit takes about a second."""
    monkeypatch.setattr(cf, "STEPS", 2000)
    monkeypatch.setattr(cf, "PRIVATE_FRACTIONS", (0.5, 1.0))
    monkeypatch.setattr(cf, "LLC_PER_OCTAVE", 1)


def _sysfs(doc):
    return [{"size": c["size"], "ways": c["ways"]} for c in doc["cache"]]


def _fit(doc, points):
    return cf.fit_hierarchy(doc, points, guest_huge=False, sysfs=_sysfs(doc),
                            largest=SIZES[-1])


def test_a_noisy_curve_still_gives_a_valid_file(small):
    truth = sim.parse_cpu(_doc())
    clean = [cf.chase_row(truth, s, 4096, cf.STEPS)[1] for s in SIZES]
    meas = [c * f for c, f in zip(clean, NOISE, strict=True)]
    assert any(b < a for a, b in zip(meas, meas[1:], strict=False)), "not non-monotone"
    doc = _doc((3, 15, 30), 80.0)  # the knee fit's starting values, off
    out = _fit(doc, [(s, 4096, m) for s, m in zip(SIZES, meas, strict=True)])
    cpu = sim.parse_cpu(doc)  # a file load_cpu takes
    lats = [c.latency for c in cpu.caches] + [cpu.dram_latency_ns * cpu.freq_ghz]
    assert all(b > a >= 1 for a, b in zip(lats, lats[1:], strict=False)), lats
    assert math.isfinite(out["rms_rel_error"]) and out["rms_rel_error"] < 0.1
    # near the truth that made the curve, despite the noise
    assert cpu.dram_latency_ns == pytest.approx(100.0, rel=0.15)
    assert cpu.caches[-1].latency == pytest.approx(40, rel=0.25)


_TRUTH: list[float] = []


def _truth_curve() -> list[float]:
    """The chases' simulated ns on :func:`_doc`'s hierarchy (computed once)."""
    if not _TRUTH:
        cpu = sim.parse_cpu(_doc())
        _TRUTH.extend(cf.chase_row(cpu, s, 4096, 2000)[1] for s in SIZES)
    return _TRUTH


@settings(max_examples=4, deadline=None)
@given(st.lists(st.floats(0.5, 2.0), min_size=len(SIZES), max_size=len(SIZES)),
       st.booleans())
def test_any_curve_gives_a_valid_file_or_one_line(factors, falling):
    """Whatever the noise on each point (half to twice the truth), on the curve or on it
    reversed (falling as the working set grows), the fit leaves a file load_cpu takes with
    latencies rising down the hierarchy, or fails with one line."""
    import unittest.mock

    truth = _truth_curve()[::-1] if falling else _truth_curve()
    points = [(s, 4096, t * f) for s, t, f in zip(SIZES, truth, factors, strict=True)]
    doc = _doc((3, 15, 30), 80.0)
    with (unittest.mock.patch.object(cf, "STEPS", 2000),
          unittest.mock.patch.object(cf, "PRIVATE_FRACTIONS", (0.5, 1.0)),
          unittest.mock.patch.object(cf, "LLC_PER_OCTAVE", 1)):
        try:
            _fit(doc, points)
        except sim.ConfigError as e:
            assert "\n" not in str(e) and str(e).startswith("calibrate: the hierarchy fit")
            return
    cpu = sim.parse_cpu(doc)
    lats = [c.latency for c in cpu.caches] + [cpu.dram_latency_ns * cpu.freq_ghz]
    assert all(b >= a >= 1 for a, b in zip(lats, lats[1:], strict=False)), lats


def _inverted_points():
    """A chase curve that falls as the working set grows: no latencies increasing down the
    hierarchy fit it, whatever the capacities."""
    return [(s, 4096, 200.0 / (1 + i)) for i, s in enumerate(SIZES)]


def test_no_valid_solution_is_one_line_naming_what(small):
    doc = _doc()
    with pytest.raises(sim.ConfigError) as e:
        _fit(doc, _inverted_points())
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith("calibrate: the hierarchy fit found no valid")
    assert "the 11 chases (512B to 384KiB)" in msg
    # names the latencies no CPU file can have (the file's own solution's)
    assert any(f"{name} " in msg for name in ("L2", "L3", "DRAM"))


@pytest.mark.parametrize("bad", [math.nan, math.inf, 0.0, -3.0])
def test_a_measured_time_that_is_not_one_is_named(bad):
    points = [(s, 4096, 10.0) for s in SIZES]
    points[4] = (SIZES[4], 4096, bad)
    with pytest.raises(sim.ConfigError, match=r"chase over 6KiB \(4KiB pages\) measured"):
        _fit(_doc(), points)


def _w4(x) -> np.ndarray:
    """Rows or unknowns of calibrate_fit.solve without 4 KiB-page walks: a last column (a 4
    KiB page's walk's extra, calibrate_fit.cols) of 0."""
    a = np.asarray(x, dtype=float)
    return np.concatenate([a, np.zeros(a.shape[:-1] + (1,))], axis=-1)


def test_solve_never_returns_nan():
    """A row with nothing finite to fit gives inf (no candidate wins by a nan comparison)."""
    rows = [(_w4([1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]), 5.0),
            (_w4([0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0]), 12.0)]
    base = _w4([4.0, 12.0, 40.0, 100.0, 100.0, 9.0, 0.0])
    assert cf.solve(rows, base, np.array([4.0, 12.0]))[0] < 1e-9
    for y in ([4.0, math.nan], [4.0, 0.0], [math.inf, 12.0]):
        assert cf.solve(rows, base, np.array(y))[0] == math.inf


def test_calibrate_from_raw_fails_in_one_line_and_writes_nothing(tmp_path, monkeypatch,
                                                                  capsys, small):
    """End to end: raw measurements whose chases no latencies fit (the curve falls past
    the first level) make `kvsim calibrate` exit 1 with one line, and write no file."""
    from test_calibrate import ZEN4, synthetic_raw

    from kvsim.experiments.cli import main
    from kvsim.sim import local

    levels = [{"level": k + 1, "size": c, "ways": 8, "line": 64}
              for k, c in enumerate((4 * KIB, 16 * KIB, 64 * KIB))]
    raw, curve = synthetic_raw(top=256 * KIB, caps=(4 * KIB, 16 * KIB, 64 * KIB))
    falling = [float(curve[0]) * 8 / (1 + i) for i in range(len(curve))]
    raw["chase"] = {str(s): [v] for s, v in zip(raw["sizes"], falling, strict=True)}
    raw["chase_4k"] = {str(s): [falling[raw["sizes"].index(s)]]
                       for s in cal.translation_sizes(raw["sizes"][-1])}
    raw["chase_top_4k"] = [falling[-1]]
    raw["hypervisor"] = False
    src = tmp_path / "raw.toml"
    src.write_text(cal.to_toml({"name": "local", "meta": {
        "quick": True, "sysfs_levels": levels, "cpu": ZEN4, "raw": {
            "sizes": raw["sizes"], "chase_ns": raw["chase"],
            "chase_top_4k_ns": raw["chase_top_4k"], "huge_fraction_top": 1.0,
            "mlp_ns_per_load": raw["mlp"], "bandwidth_gbs": raw["bw_gbs"],
            "cpuid": raw["cpuid"], "hypervisor": False, "clock": raw["clock"],
            "kernel_clock": raw["kernel_clock"], "chase_4k_ns": raw["chase_4k"]}}}))
    assert tomllib.loads(src.read_text())["meta"]["raw"]["sizes"] == raw["sizes"]
    monkeypatch.setattr(local, "read_sysfs", lambda: levels)
    out = tmp_path / "cpu.toml"
    assert main(["calibrate", "--from-raw", str(src), "-o", str(out)]) == 1
    errors = [x for x in capsys.readouterr().err.splitlines() if "error" in x]
    assert len(errors) == 1 and "hierarchy fit found no valid latencies" in errors[0], errors
    assert not out.exists() and not list(tmp_path.glob("cpu.toml*"))


def test_solve_recovers_an_stlb_hits_cost_and_keeps_it_at_zero_not_below():
    """The STLB hits are an unknown of the least squares (calibrate_fit.solve): simulated
    times made with a known cost give it back; times that would need a negative cost get 0
    and the rest solved without it."""
    truth = _w4([4.0, 14.0, 50.0, 300.0, 300.0, 5.0, 0.0])
    a = _w4([[1.0, 0, 0, 0, 0, 0, 0], [0.2, 0.8, 0, 0, 0, 0.5, 0],
                  [0, 1.0, 0, 0, 0, 0.9, 0], [0, 0.3, 0.7, 0, 0, 1.0, 0],
                  [0, 0, 0.5, 0.5, 0, 0.2, 0.8]])
    y = a @ truth + 3.0  # a constant part the counts do not explain
    base = _w4([5.0, 12.0, 40.0, 200.0, 200.0, 9.0, 0.0])
    rows = [(r, float(r @ base + 3.0)) for r in a]
    err, x = cf.solve(rows, base, y)
    assert err < 1e-12 and x[5] == pytest.approx(5.0) and x[:4] == pytest.approx(truth[:4])
    y_neg = a @ _w4([4.0, 14.0, 50.0, 300.0, 300.0, -3.0, 0.0]) + 3.0
    err, x = cf.solve(rows, base, y_neg)
    assert x[5] == 0.0 and math.isfinite(err) and err > 0


def _tlb_doc(stlb: int, lats=(4, 12, 40), dram_ns=100.0) -> dict:
    """:func:`_doc` with a TLB whose STLB hits cost ``stlb`` cycles (4-entry DTLB, 64-entry
    STLB: the chases from 16 KiB to 256 KiB hit the STLB) and the ascending L1 prefetcher."""
    d = _doc(lats, dram_ns)
    d["tlb"] = {"page_size": "4KiB", "l1_entries": 4, "l1_ways": 0, "l2_entries": 64,
                "l2_ways": 4, "l2_latency": stlb, "walk_latency": 20}
    d["prefetcher"] = [{"level": "L1D", "kind": "ascending", "degree": 1, "table": 16}]
    return d


def test_the_fit_recovers_the_stlb_cost_of_a_curve_the_model_made(small):
    """A chase curve simulated on a file with the ascending prefetcher and STLB hits of 3
    cycles, fitted from a file that starts at the tables' 9 cycles and wrong latencies: the
    fit gives back the cost, the latencies and the curve."""
    truth = sim.parse_cpu(_tlb_doc(3))
    meas = [cf.chase_row(truth, s, 4096, cf.STEPS)[1] for s in SIZES]
    doc = _tlb_doc(9, (3, 15, 30), 80.0)
    out = _fit(doc, [(s, 4096, m) for s, m in zip(SIZES, meas, strict=True)])
    cpu = sim.parse_cpu(doc)
    assert out["chosen"]["solved"]["stlb"]  # chases with STLB hits and no walks: solved
    assert cpu.tlb.l2_latency == 3
    assert [c.latency for c in cpu.caches] == [4, 12, 40]
    assert cpu.dram_latency_ns == pytest.approx(100.0, rel=0.05)
    assert out["rms_rel_error"] < 0.02


def test_a_last_level_is_not_fitted_around_an_l2_left_too_small(small, monkeypatch):
    """The last level is searched from the L2's capacity, before the L2 is: fitted from an
    L2 at half its size (the knee fit's, short), one pass over the levels lets a last level
    of half its size stand in for the L2's missing half and DRAM drop to take the rest;
    the second pass (LEVEL_PASSES) searches it again from the L2 the first chose and gives
    back the hierarchy the chases were made on."""
    truth_doc = _doc()
    truth = sim.parse_cpu(truth_doc)
    points = [(s, 4096, cf.chase_row(truth, s, 4096, cf.STEPS)[1]) for s in SIZES]
    got = {}
    for passes in (1, 2):
        monkeypatch.setattr(cf, "LEVEL_PASSES", passes)
        doc = _doc((3, 15, 30), 80.0)
        doc["cache"][1].update(size=4 * KIB)
        out = cf.fit_hierarchy(doc, points, guest_huge=False, sysfs=_sysfs(truth_doc),
                               largest=SIZES[-1])
        got[passes] = (doc, out)
    one, two = got[1][0], got[2][0]
    assert one["cache"][2]["size"] < 64 * KIB  # the failure the second pass exists for
    assert [c["size"] for c in two["cache"]] == [1 * KIB, 8 * KIB, 64 * KIB]
    assert [c["latency"] for c in two["cache"]] == [4, 12, 40]
    assert two["dram"]["latency_ns"] == pytest.approx(100.0, rel=0.05)
    assert got[2][1]["rms_rel_error"] < 0.02 < got[1][1]["rms_rel_error"]


def test_an_l1_read_short_by_the_knee_is_fitted_back(small):
    """The L1 is searched like the L2: fitted from an L1 at half its size (the knee fit
    reads an LRU level's cliff under a cyclic chase as a smaller level), the chases the
    model made on the whole L1 give it back, and with it the L2's latency, which a half
    L1 would have the chases just past it pull down (sim/VALIDATION.md, finding 39)."""
    truth_doc = _doc()
    truth = sim.parse_cpu(truth_doc)
    points = [(s, 4096, cf.chase_row(truth, s, 4096, cf.STEPS)[1]) for s in SIZES]
    doc = _doc((3, 15, 30), 80.0)
    doc["cache"][0].update(size=KIB // 2, ways=2)
    out = cf.fit_hierarchy(doc, points, guest_huge=False, sysfs=_sysfs(truth_doc),
                           largest=SIZES[-1])
    assert [c["size"] for c in doc["cache"]] == [1 * KIB, 8 * KIB, 64 * KIB]
    assert [c["latency"] for c in doc["cache"]] == [4, 12, 40]
    assert {c["size"] for c in out["chosen"]["L1D"]["candidates"]} == {KIB // 2, KIB}
    assert out["rms_rel_error"] < 0.02


def test_solve_fits_the_walk_where_the_chases_tell_it_from_dram():
    """Chases whose walks read cached page-table lines (walks without DRAM) give the walk's
    fixed part back; when every walk comes with a DRAM access the two trade and the walk
    keeps the file's value; a negative one is kept at 0."""
    truth = _w4([4.0, 14.0, 50.0, 300.0, 300.0, 5.0, 120.0])
    # L1D, L2, L3, DRAM, host, STLB hits, walks per load: chases within the levels, with
    # STLB hits alone, with walks the caches serve, and with walks and DRAM together
    a = _w4([[1.0, 0, 0, 0, 0, 0, 0], [0, 1.0, 0, 0, 0, 0.9, 0],
                  [0, 0.3, 0.7, 0, 0, 1.0, 0], [0.5, 0.5, 0, 0, 0, 0.4, 0],
                  [0, 0, 1.0, 0, 0, 0, 0.5], [0, 0.5, 0.5, 0, 0, 0, 0.3],
                  [0, 0, 1.0, 0, 0, 0, 0.8],
                  [0, 0, 0.5, 0.5, 0, 0, 0.5], [0, 0, 0, 1.0, 0, 0, 1.0]])
    base = _w4([5.0, 12.0, 40.0, 200.0, 200.0, 9.0, 60.0])
    rows = [(r, float(r @ base + 3.0)) for r in a]
    err, x = cf.solve(rows, base, a @ truth + 3.0)
    assert err < 1e-12 and x[6] == pytest.approx(120.0) and x[3] == pytest.approx(300.0)
    # without the chases whose walks the caches serve, the walk trades against DRAM: it
    # keeps the file's 60 cycles and DRAM takes the rest
    tied = a[[0, 1, 2, 3, 7, 8]]
    rows_t = [(r, float(r @ base + 3.0)) for r in tied]
    err, x = cf.solve(rows_t, base, tied @ truth + 3.0)
    assert x[6] == 60.0 and err < 1e-12 and x[3] == pytest.approx(360.0)
    err, x = cf.solve(rows, base, a @ _w4([4.0, 14.0, 50.0, 300.0, 300.0, 5.0, -40.0])
                      + 3.0)
    assert x[6] == 0.0 and x[5] >= 0.0


def test_solve_holds_dram_at_the_plausibility_floor():
    """A solution whose DRAM latency is below ``dram_min`` cycles (the plausibility check's
    floor: 40 ns, and 1.5x the chase curve's last level) has DRAM held at the floor and the
    rest solved again, so the fit never picks a file the check refuses (a last level's
    plateau taken for memory); where the rest then makes no CPU file (the last level below
    the one before it), there is no solution."""
    a = _w4([[1.0, 0, 0, 0, 0, 0, 0], [0, 1.0, 0, 0, 0, 0, 0],
                  [0, 0, 1.0, 0, 0, 0, 0], [0, 0, 0.2, 0.8, 0, 0, 0]])
    base = _w4([4.0, 12.0, 40.0, 100.0, 100.0, 0.0, 0.0])
    rows = [(r, float(r @ base)) for r in a]
    y = a @ _w4([4.0, 12.0, 40.0, 90.0, 100.0, 0.0, 0.0])
    err, x = cf.solve(rows, base, y, dram_min=80.0)
    assert err < 1e-12 and x[3] == pytest.approx(90.0)
    err, x = cf.solve(rows, base, y, dram_min=120.0)
    assert 0 < err < math.inf and x[3] == 120.0 and 12.0 < x[2] < 40.0
    assert cf.invalid(x, a, 120.0) == []
    err, x = cf.solve(rows, base, y, dram_min=1000.0)
    assert err == math.inf and x[3] == 1000.0 and x[2] < 12.0
    assert cf.invalid(x, a, 1000.0) == [2]


def test_solve_fits_a_4k_pages_walk_apart_from_the_others():
    """What a 4 KiB page's walk adds (``[tlb] walk_extra_4k``, the last unknown) is solved
    where 4 KiB-page chases and others both walk, given back from times made with it, kept
    at 0 rather than below, and kept at the file's value when fixed or when no chase with
    4 KiB pages walks."""
    truth = np.array([4.0, 14.0, 50.0, 300.0, 300.0, 5.0, 30.0, 70.0])
    # L1D, L2, L3, DRAM, host, STLB hits, walks, 4 KiB-page walks per load: chases within
    # the levels, 2 MiB-page chases that walk (cached tables, then DRAM), 4 KiB-page ones
    a = np.array([[1.0, 0, 0, 0, 0, 0, 0, 0], [0, 1.0, 0, 0, 0, 0.9, 0, 0],
                  [0, 0.3, 0.7, 0, 0, 1.0, 0, 0], [0, 0, 1.0, 0, 0, 0, 0.5, 0],
                  [0, 0.5, 0.5, 0, 0, 0, 0.3, 0], [0, 0, 1.0, 0, 0, 0, 0.8, 0],
                  [0, 0, 0.5, 0.5, 0.3, 0, 0.5, 0], [0, 0, 0, 1.0, 1.0, 0, 1.0, 0],
                  [0, 0, 1.5, 0, 0, 0, 0.5, 0.5], [0, 0, 1.2, 0.8, 0.5, 0, 0.9, 0.9],
                  [0, 0, 0.2, 2.0, 1.0, 0, 1.0, 1.0], [0.5, 0.5, 0, 0, 0, 0.4, 0, 0]])
    base = np.array([5.0, 12.0, 40.0, 200.0, 200.0, 9.0, 10.0, 0.0])
    rows = [(r, float(r @ base + 3.0)) for r in a]
    err, x = cf.solve(rows, base, a @ truth + 3.0)
    assert err < 1e-12 and x[7] == pytest.approx(70.0) and x[6] == pytest.approx(30.0)
    assert cf.identified(a)["walk4k"]
    neg = truth.copy()
    neg[7] = -50.0
    err, x = cf.solve(rows, base, a @ neg + 3.0)
    assert x[7] == 0.0 and math.isfinite(err) and err > 0
    err, x = cf.solve(rows, base, a @ truth + 3.0, fixed=("walk4k",))
    assert x[7] == 0.0 and err > 0
    # without the walks the caches serve (the walk's fixed part not solved), the extra is
    # not solved either: the file's walk holds the 4 KiB-page chases' walks
    tied = a[[0, 1, 2, 6, 7, 9, 10, 11]]
    err, x = cf.solve([(r, float(r @ base + 3.0)) for r in tied], base, tied @ truth + 3.0)
    assert x[6] == 10.0 and x[7] == 0.0
    # no chase with 4 KiB pages: not identified, the file's value stays
    two_mib = a[[0, 1, 2, 3, 4, 5, 6, 7, 11]]
    assert not cf.identified(two_mib)["walk4k"]
    err, x = cf.solve([(r, float(r @ base + 3.0)) for r in two_mib], base,
                      two_mib @ truth + 3.0)
    assert x[7] == 0.0 and err < 1e-12


def test_weights_let_a_point_that_moved_between_rounds_tell_less():
    """With each chase weighed by one over its tolerance (calibrate_fit.point_weights), a
    point off the others' solution pulls the solution less the wider its tolerance; with
    equal weights the solution is the unweighted one."""
    a = _w4([[1.0, 0, 0, 0, 0, 0, 0], [0, 1.0, 0, 0, 0, 0, 0],
             [0, 0.5, 0.5, 0, 0, 0, 0], [0, 0, 1.0, 0, 0, 0, 0],
             [0, 0.2, 0.8, 0, 0, 0, 0]])
    truth = _w4([4.0, 12.0, 40.0, 100.0, 100.0, 0.0, 0.0])
    base = _w4([5.0, 10.0, 30.0, 100.0, 100.0, 0.0, 0.0])
    rows = [(r, float(r @ base)) for r in a]
    y = a @ truth
    y[2] *= 0.7  # the step's point, 30 % off the hierarchy the others follow
    plain = cf.solve(rows, base, y)[1]
    same = cf.solve(rows, base, y, weights=cf.point_weights([0.1] * 5))[1]
    assert same == pytest.approx(plain)
    loose = cf.solve(rows, base, y, weights=cf.point_weights([0.1, 0.1, 0.25, 0.1, 0.1]))[1]
    assert abs(loose[2] - 40.0) < abs(plain[2] - 40.0)


def test_walkers_needed_keep_up_with_the_ceiling_and_never_fall():
    from kvsim.sim import calibrate_fit as cf
    from kvsim.sim._binding import MAX_WALKERS

    assert cf.walkers_needed(100.0, 16.5, 4) == 7  # ceil(100 / 16.5)
    assert cf.walkers_needed(50.0, 16.5, 4) == 4  # never fewer than the file has
    assert cf.walkers_needed(-5.0, 16.5, 2) == 2
    assert cf.walkers_needed(1e9, 1.0, 4) == MAX_WALKERS
    assert cf.ceiling_per_load({1: 200.0, 16: 17.0, 24: 16.0, 48: 18.0, 8: 30.0}) == 17.0


def _nested_state(host_cycles: float):
    """A least-squares state of a guest's file (:func:`cf.solve`'s unknowns and rows): two
    levels of 4 and 40 cycles, DRAM 200, the host's read ``host_cycles``, rows that read the
    host's entry."""
    x = np.array([4.0, 40.0, 200.0, host_cycles, 0.0, 0.0, 0.0])
    rows = [(np.array([0.5, 0.3, 0.2, 0.1, 0.0, 0.1, 0.0]), 60.0)]
    return x, rows


def test_a_host_read_below_the_last_level_drops_the_hosts_read():
    """A nested walk whose host read solves below the last level's latency (no valid file)
    is fitted again reading the guest's entry alone, and kept when that is valid; a host
    read above it, or a fit without it that is no better, leaves the file as it was."""
    doc = {"freq_ghz": 2.0, "tlb": {"walk_reads": 2, "host_read_ns": 100.0}}
    seen = []

    def evaluate(d, err=0.5):
        seen.append(d["tlb"])
        return err, np.zeros(7), ["rows"]

    x, rows = _nested_state(-30.0)
    chosen = {}
    got = cf._host_reads(doc, chosen, (math.inf, x, rows), evaluate, 0.0, 2.0, lambda m: None)
    assert seen == [{"walk_reads": 1}] and doc["tlb"] == {"walk_reads": 1}
    assert got[0] == 0.5 and chosen["walk_reads"] == {"walk_reads": 1, "host_read_ns": -15.0,
                                                      "error_without": 0.5}
    # the host's read above the last level: its invalidity is elsewhere, nothing tried
    doc2, seen[:] = {"freq_ghz": 2.0, "tlb": {"walk_reads": 2, "host_read_ns": 100.0}}, []
    x2, _ = _nested_state(90.0)
    x2[1] = 1.0  # invalid: the L2 at 1 cycle, not above the L1
    state = (math.inf, x2, rows)
    assert cf._host_reads(doc2, {}, state, evaluate, 0.0, 2.0, lambda m: None) is state
    assert seen == [] and doc2["tlb"]["walk_reads"] == 2
    # without it no valid file either: the file keeps the host's read
    doc3 = {"freq_ghz": 2.0, "tlb": {"walk_reads": 2, "host_read_ns": 100.0}}
    chosen3 = {}
    state3 = (math.inf, x, rows)
    got3 = cf._host_reads(doc3, chosen3, state3, lambda d: evaluate(d, math.inf), 0.0, 2.0,
                          lambda m: None)
    assert got3 is state3 and doc3["tlb"]["walk_reads"] == 2
    assert chosen3["walk_reads"]["walk_reads"] == 2
