"""`kvsim calibrate`'s kinds of work (sim/calibrate_work.py): the traces' instruction counts
it assumes are c_ref's, the rates follow from the samples, and the generic rate found by
bisection is the one the simulator needs to predict c_ref's GET kernel at its time."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
from sim_helpers import CALIBRATED_DOC

from kvsim import artifacts, sim
from kvsim.sim import calibrate as cal
from kvsim.sim import calibrate_work as cw

ROOT = Path(__file__).resolve().parents[2]

DOC = CALIBRATED_DOC


def test_the_instruction_counts_are_c_refs():
    sites = (ROOT / "c_ref" / "sites.h").read_text()
    m = re.search(r'X\(SNAP_REFILL, "snap.refill", (\d+)\)', sites)
    assert m and int(m.group(1)) == cw.SNAP_REFILL_COST
    emit = (ROOT / "c_ref" / "emit.h").read_text()
    assert f"#define KS_WORK_SCALE_PCT {cw.WORK_SCALE_PCT}u" in emit
    assert "KS_WORK_OF(KVT_WORK_COMPARE, la / 8)" in (ROOT / "c_ref" / "object.c").read_text()
    assert [cw.compare_instructions(n) for n in (7, 16, 256)] == [0, 2, 33]


def test_kernel_rates_are_instructions_over_cycles():
    work = {"siphash/16": [10.0, 8.0], "siphash/64": [20.0], "crc64/512": [300.0, 250.0]}
    kinds = {"copy/4096": [40.0, 30.0], "compare/16": [2.0], "compare/256": [3.0]}
    r = cw.kernel_rates(work, kinds, ghz=2.0)
    hash_instr = cal.work_instructions("siphash", 16) + cal.work_instructions("siphash", 64)
    assert r["hash"]["ipc"] == pytest.approx(hash_instr / ((8.0 + 20.0) * 2.0))
    assert r["crc"]["ipc"] == pytest.approx(cal.work_instructions("crc64", 512) / 500.0)
    assert r["copy"]["ipc"] == pytest.approx(cw.SNAP_REFILL_COST / 60.0)
    assert r["compare"]["ipc"] == pytest.approx((33 - 2) / 2.0)


@pytest.mark.parametrize("rates", [{"crc": 2.0, "crc_streams": 3.5, "crc_combine": 0.35},
                                   {"crc": 1.1, "crc_streams": 0.9, "crc_combine": 4.0}])
def test_the_crcs_three_rates_come_back_from_their_kernels(rates):
    """Samples made at given rates (each point's instructions by kind over its kind's rate)
    give those rates back: crc from the one-stream calls alone, crc_combine from the joins,
    crc_streams from the long calls less their other parts; without the joins no
    crc_streams, and the long calls never move the crc rate."""
    ghz = 2.0

    def ns(kind: str, chunk: int) -> float:
        parts = cal.work_instructions_by_kind(kind, chunk)
        return sum(c / rates[k] for k, c in parts.items()) / ghz

    work = {f"{k}/{c}": [ns(k, c), ns(k, c) * 1.2] for k, c in cal.WORK_POINTS
            if k != "siphash"}
    r = cw.kernel_rates(work, {}, ghz)
    for kind, want in rates.items():
        assert r[kind]["ipc"] == pytest.approx(want, rel=1e-9), kind
    no_joins = cw.kernel_rates({k: v for k, v in work.items()
                                if not k.startswith("crc64combine")}, {}, ghz)
    assert "crc_streams" not in no_joins and "crc_combine" not in no_joins
    assert no_joins["crc"]["ipc"] == pytest.approx(rates["crc"], rel=1e-9)


def _predicted_ns(doc: dict, rates: dict, trace: Path, ops: int) -> float:
    d = {**doc, "work": rates}
    return sim.simulate(str(trace), sim.parse_cpu(tomllib.loads(cal.to_toml(d))))[
        "timing"]["time_ns"] / ops


def test_the_generic_rate_reproduces_the_kernels_time(tmp_path, monkeypatch):
    """A native time made by the simulator at generic rate 2 gives back 2; one the model
    cannot reach at any rate gives the bound it hit."""
    kernel = {"keys": 200, "ops": 2000, "value-size": 100}
    monkeypatch.setattr(cw, "GENERIC_KERNEL", kernel)
    trace = tmp_path / "g.kvt"
    cw._cref("trace", "pipeline", *cw._kernel_args(), "-o", trace)
    rates = {"hash": 2.5, "crc": 2.0}
    ns = _predicted_ns(DOC, {**rates, "generic": 2.0, "parse": 2.0}, trace, 2000)
    fit = cw.fit_generic(DOC, rates, ns * 1e-9, 6, trace, 2000)
    assert fit["bound"] is None and fit["ipc"] == pytest.approx(2.0, rel=0.02)
    fast = cw.fit_generic(DOC, rates, ns * 1e-12, 6, trace, 2000)
    assert fast["bound"] == "width" and fast["ipc"] == 6

    # the hash kernel's time at the rate the native time was made with (2.5 per cycle)
    sip_ns = cal.work_instructions("siphash", 16) / (rates["hash"] * DOC["freq_ghz"])
    raw = {"work": {"siphash/16": [sip_ns]},
           "work_kinds": {"ns_per_call": {"copy/4096": [30.0]}, "generic_s_per_op": [ns * 1e-9],
                          "generic_kernel": kernel}}
    doc = {**DOC, "notes": ["sustained IPC of c_ref's CRC-64 and SipHash measured at 2.8"]}
    cw.apply(doc, raw)
    assert set(doc["work"]) == {"generic", "parse", "hash", "copy", "gap_model", "src"}
    assert doc["work"]["gap_model"] == cw.KS_GAP_MODEL
    assert doc["work"]["generic"] == pytest.approx(2.0, rel=0.02)
    assert set(doc["work"]["src"]) == set(doc["work"]) - {"src", "gap_model"}
    assert all(v.startswith("measured") for v in doc["work"]["src"].values())
    assert not any(n.startswith("sustained IPC") for n in doc["notes"])
    again = cw.raw_from_meta(doc["meta"]["raw"])
    assert again == raw["work_kinds"]
    sim.parse_cpu(tomllib.loads(cal.to_toml(doc)))


def test_no_core_no_work():
    doc = {k: v for k, v in DOC.items() if k != "core"}
    cw.apply(doc, {"work": {"siphash/16": [6.0]}, "work_kinds": {"ns_per_call": {}}})
    assert "work" not in doc


def test_a_file_with_work_is_refused_in_one_line(tmp_path):
    f = tmp_path / "c.toml"
    f.write_text(cal.to_toml({**DOC, "work": {"generic": 2.0, "server": 2.0}}))
    with pytest.raises(sim.ConfigError, match="already has \\[work\\] server") as e:
        cw.add_to_file(f, tmp_path / "out.toml")
    assert "\n" not in str(e.value)
    assert not (tmp_path / "out.toml").exists()


def test_the_kernels_run():
    if not artifacts.path(artifacts.CALIBRATE_CLI).exists():
        pytest.skip("kvsim-calibrate not built")
    for kind, chunk in cw.KIND_POINTS:
        out = cal.run_bench("workkind", kind, chunk, 1000, 2)
        assert out["kind"] == kind and len(out["ns_per_call"]) == 2
        assert all(x > 0 for x in out["ns_per_call"])
    with pytest.raises(OSError, match="expected copy or compare"):
        cal.run_bench("workkind", "hash", 16, 10, 1)


def test_again_measures_every_kind_and_keeps_the_rates_before(tmp_path, monkeypatch):
    f = tmp_path / "c.toml"
    f.write_text(cal.to_toml({**DOC, "work": {"generic": 2.0, "server": 2.5,
                                              "src": {"generic": "old"}}}))
    seen = {}

    def fake_apply(doc, raw, log):
        seen["work_in_doc"] = "work" in doc
        doc["work"] = {"generic": 4.0, "src": {"generic": "now"}}

    monkeypatch.setattr(cw, "measure", lambda rounds, calls, log: {"ns_per_call": {}})
    monkeypatch.setattr(cw, "apply", fake_apply)
    with pytest.raises(sim.ConfigError, match="already has"):
        cw.add_to_file(f, tmp_path / "no.toml")
    work = cw.add_to_file(f, tmp_path / "out.toml", again=True)
    assert seen["work_in_doc"] is False and work["generic"] == 4.0
    out = tomllib.loads((tmp_path / "out.toml").read_text())
    assert out["meta"]["work_again"]["before"] == {"generic": 2.0, "server": 2.5}
    assert out["meta"]["work_again"]["date_utc"]


def test_again_and_from_raw_are_refused_together(tmp_path, capsys):
    assert cw.main([str(tmp_path / "c.toml"), "-o", str(tmp_path / "o.toml"), "--again",
                    "--from-raw"]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1
