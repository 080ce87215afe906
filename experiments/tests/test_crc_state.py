"""experiments/crc_state.py: the CRC's cost per state (paired differences), the CRC's kinds
put into a CPU file from a measurement, and its bad input."""

from __future__ import annotations

import pytest

from kvsim.experiments import crc_state as cs
from kvsim.sim import calibrate as cal
from kvsim.sim import calibrate_work as cw


def _raw(rates: dict[str, float], ghz: float) -> dict:
    """A measurement whose hot samples and joins are made at ``rates``."""
    def ns(kind: str, n: int) -> float:
        parts = cal.work_instructions_by_kind(kind, n)
        return sum(c / rates[k] for k, c in parts.items()) / ghz

    points = []
    for n, o in cs.POINTS:
        for st in ("hot", "copy"):
            base = 0.0 if st == "hot" else 500.0
            points.append({"len": n, "offset": o, "state": st, "crc": 1, "cost": 0,
                           "ns": [base + ns("crc64", n) + d for d in (0.0, 3.0, 1.0)]})
            points.append({"len": n, "offset": o, "state": st, "crc": 0, "cost": 0,
                           "ns": [base + d for d in (0.0, 1.0, 2.0)]})
    combine = [{"len2": n, "ns": [ns("crc64combine", n)] * 3} for n in cs.COMBINE_LENS]
    return {"points": points, "combine": combine}


def test_the_crcs_cost_is_the_paired_difference():
    raw = _raw({"crc": 2.0, "crc_streams": 3.5, "crc_combine": 0.4}, 2.0)
    rows = cs.analyse(raw, 2.0)["rows"]
    for r in rows:
        p = next(p for p in raw["points"] if (p["len"], p["offset"], p["state"], p["crc"])
                 == (r["len"], r["offset"], r["state"], 1))
        q = next(q for q in raw["points"] if (q["len"], q["offset"], q["state"], q["crc"])
                 == (r["len"], r["offset"], r["state"], 0))
        diffs = sorted(a - b for a, b in zip(p["ns"], q["ns"], strict=True))
        assert r["crc_ns"]["median"] == pytest.approx(diffs[1])
        assert r["crc_ns"]["min"] == pytest.approx(diffs[0])


def test_with_crc_kinds_fits_the_rates_the_samples_were_made_at():
    rates = {"crc": 2.0, "crc_streams": 3.5, "crc_combine": 0.4}
    ghz = 3.0
    doc = {"freq_ghz": ghz, "core": {"width": 6}, "work": {"crc": rates["crc"]},
           "meta": {"raw": {"work_ns_per_call": {
               f"crc64/{n}": [sum(c / rates[k] for k, c in
                                  cal.work_instructions_by_kind("crc64", n).items()) / ghz]
               for n in (1, 8, 32, 512)}}}}
    native = {"raw": _raw(rates, ghz)}
    out, fits = cs.with_crc_kinds(doc, native)
    assert out["work"]["crc_streams"] == pytest.approx(rates["crc_streams"], abs=1e-3)
    assert out["work"]["crc_combine"] == pytest.approx(rates["crc_combine"], abs=1e-3)
    assert doc["work"] == {"crc": 2.0}  # the file given is not changed
    assert fits == {k: v for k, v in cw.kernel_rates(
        {**doc["meta"]["raw"]["work_ns_per_call"], **cs.native_samples(native)}, {},
        ghz).items() if k in fits}


@pytest.mark.parametrize("argv", [["--rounds", "0"], ["predict", "--cpu", "nowhere.toml",
                                                       "--native", "nowhere.json"]])
def test_bad_input_is_one_line(argv, capsys):
    assert cs.main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in err[0]


def test_the_predicted_rows_are_the_validations():
    from kvsim.experiments import validation

    rows = {p["row"] for p in validation._pairs("full")}
    assert set(cs.PREDICT_ROWS) <= rows
