"""The gap model's name (sim/gap_model.py): c_ref writes the name Python mirrors, a CPU file
whose [work] was fitted to other counts is refused for c_ref's traces in one line, a fitted
file of the same model and the presets are not, and `--from-raw` fits [work] again."""

from __future__ import annotations

import copy
import re
import tomllib
from pathlib import Path

import numpy as np
import pytest
from sim_helpers import CALIBRATED_DOC

from kvsim import sim, traces
from kvsim.experiments import cpufile, runner
from kvsim.sim import calibrate as cal
from kvsim.sim import calibrate_work as cw
from kvsim.sim import gap_model as gm

ROOT = Path(__file__).resolve().parents[2]

DOC = {
    **CALIBRATED_DOC,
    "work": {"generic": 4.0, "hash": 2.5, "parse": 4.0},
    "meta": {"raw": {"work_kinds": {"ns_per_call": {}}}},  # fitted: it keeps its samples
}


def _file(tmp_path: Path, name: str, doc: dict) -> Path:
    p = tmp_path / name
    p.write_text(cal.to_toml(doc))
    return p


def _named(model: str | None) -> dict:
    d = copy.deepcopy(DOC)
    if model is not None:
        d["work"]["gap_model"] = model
    return d


@pytest.fixture(scope="module")
def cref_trace(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("gap") / "get.kvt"
    cw._cref("trace", "pipeline", "--keys", 200, "--ops", 300, "--warm-setup", "none",
             "-o", path)
    return path


def test_the_name_is_c_refs():
    """emit.h defines the name Python mirrors, lists every earlier one, and c_ref writes it."""
    emit = (ROOT / "c_ref" / "emit.h").read_text()
    assert f'#define KS_GAP_MODEL "{gm.KS_GAP_MODEL}"' in emit
    listed = re.findall(r"^ \*   (site-cost-v\d+) ", emit, re.M)
    assert listed == list(gm.KS_GAP_MODELS)
    assert "site-cost-v" not in (ROOT / "c_ref" / "main.c").read_text()  # defined once


def test_c_ref_writes_the_name(cref_trace):
    with traces.open(cref_trace) as r:
        assert r.header["gap_model"] == gm.KS_GAP_MODEL


def test_which_files_name_a_model():
    assert gm.of_work(_named("site-cost-v2")) == "site-cost-v2"
    assert gm.of_work(_named(None)) == gm.UNNAMED  # fitted before the names: v1
    preset = {k: v for k, v in DOC.items() if k != "meta"}
    assert gm.of_work(preset) is None  # a preset's estimates are not checked
    assert gm.of_work({k: v for k, v in DOC.items() if k != "work"}) is None
    for bad, msg in (("site-cost-v9", "unknown gap model"), (2, "expected str")):
        with pytest.raises(sim.ConfigError, match=msg) as e:
            sim.parse_cpu(_named(bad))
        assert "\n" not in str(e.value) and "work.gap_model" in str(e.value)


def test_a_file_fitted_to_other_counts_is_refused(tmp_path, cref_trace):
    old = _file(tmp_path, "old.toml", _named(None))
    with pytest.raises(sim.ConfigError) as e:
        sim.simulate(str(cref_trace), sim.load_cpu(old))
    msg = str(e.value)
    assert "\n" not in msg
    assert gm.KS_GAP_MODEL in msg and "site-cost-v1" in msg and str(old) in msg
    assert "--from-raw" in msg
    # the same file counting only (no rates), and on records that name no gap model
    assert sim.simulate(str(cref_trace), sim.load_cpu(old), functional=True)["levels"]
    with traces.open(cref_trace) as r:
        records = np.concatenate(list(r))
    assert sim.simulate(records, sim.load_cpu(old))["timing"]["time_ns"] > 0


def test_an_older_trace_on_a_newer_file_says_trace_again():
    msg = gm.mismatch("site-cost-v2", {"gap_model": "site-cost-v1"}, "f.toml")
    assert msg is not None and "trace it again" in msg
    assert gm.mismatch("site-cost-v2", {"gap_model": "unit"}, "f.toml") is None
    assert gm.mismatch("site-cost-v2", {}, "f.toml") is None
    assert gm.mismatch(None, {"gap_model": "site-cost-v1"}, "f.toml") is None


def test_a_file_of_the_same_model_and_the_presets_are_used(tmp_path, cref_trace):
    new = _file(tmp_path, "new.toml", _named(gm.KS_GAP_MODEL))
    res = sim.simulate(str(cref_trace), sim.load_cpu(new))
    assert res["timing"]["time_ns"] > 0
    preset = {k: v for k, v in DOC.items() if k != "meta"}
    assert sim.simulate(str(cref_trace), sim.parse_cpu(preset))["timing"]["time_ns"] > 0
    for name in sim.preset_names():
        if name != "local":
            assert sim.load_cpu(name).work_gap_model is None, name


def test_the_name_survives_kvsim_cpus_show(tmp_path):
    for model in (None, gm.KS_GAP_MODEL):
        cpu = sim.load_cpu(_file(tmp_path, "f.toml", _named(model)))
        back = sim.parse_cpu(tomllib.loads(cpufile.cpu_toml(cpu)))
        assert back.work_gap_model == cpu.work_gap_model == (model or gm.UNNAMED)


def test_the_studies_refuse_the_file_before_any_work(tmp_path):
    old = _file(tmp_path, "old.toml", _named(None))
    with pytest.raises(ValueError, match=f"--cpu {old}: .*site-cost-v1") as e:
        runner.plan(["validation"], "small", cpus=[str(old)])
    assert "\n" not in str(e.value)


def test_from_raw_fits_work_again_to_the_current_counts(tmp_path, monkeypatch):
    """A file fitted before the names (v1) gains the current name and rates from its own
    samples; the rates before are kept; a file without samples is refused, nothing written."""
    kernel = {"keys": 200, "ops": 1000, "value-size": 100}
    monkeypatch.setattr(cw, "GENERIC_KERNEL", kernel)
    sip_ns = cal.work_instructions("siphash", 16) / (2.5 * DOC["freq_ghz"])
    doc = copy.deepcopy(DOC)
    doc["meta"] = {"raw": {"work_ns_per_call": {"siphash/16": [sip_ns]},
                           "work_kinds": {"ns_per_call": {"copy/4096": [30.0]},
                                          "generic_s_per_op": [2e-7],
                                          "generic_kernel": kernel}}}
    doc["work"] = {"generic": 3.0, "hash": 1.5, "copy": 2.0, "parse": 3.0}
    src = _file(tmp_path, "v1.toml", doc)
    assert sim.load_cpu(src).work_gap_model == "site-cost-v1"
    out = tmp_path / "v2.toml"
    assert cw.main([str(src), "-o", str(out), "--from-raw"]) == 0
    new = tomllib.loads(out.read_text())
    assert new["work"]["gap_model"] == gm.KS_GAP_MODEL
    assert new["work"]["hash"] == pytest.approx(2.5, rel=1e-3)  # the samples' own rate
    assert new["meta"]["work_refit"]["rates_before"] == doc["work"]
    assert new["meta"]["work_refit"]["gap_model_before"] == "site-cost-v1"
    assert sim.load_cpu(out).work_gap_model == gm.KS_GAP_MODEL

    bare = {k: v for k, v in DOC.items() if k != "meta"}
    none = tmp_path / "none.toml"
    with pytest.raises(sim.ConfigError, match="nothing to fit again") as e:
        cw.refit(_file(tmp_path, "bare.toml", bare), none)
    assert "\n" not in str(e.value) and not none.exists()


def test_a_server_rate_is_not_added_to_rates_of_other_counts(tmp_path):
    src = _file(tmp_path, "v1.toml", _named(None))
    out = tmp_path / "out.toml"
    with pytest.raises(sim.ConfigError, match="fitted to site-cost-v1's counts") as e:
        cw.add_to_file(src, out)
    assert "\n" not in str(e.value) and not out.exists()


def test_from_raw_refuses_samples_of_another_c_ref(tmp_path):
    """A kernel whose prediction at the file's own rates, traced now, is far from the one its
    fit made (c_ref changed on its path): refused in one line with nothing written, or, with
    --mark-stale, written with [work] as it was and its model named (still refused)."""
    kernel = {"keys": 200, "ops": 1000, "value-size": 100}
    doc = copy.deepcopy(DOC)
    sip_ns = cal.work_instructions("siphash", 16) / (2.5 * DOC["freq_ghz"])
    doc["meta"] = {"raw": {"work_ns_per_call": {"siphash/16": [sip_ns]}, "work_kinds": {
        "ns_per_call": {}, "generic_s_per_op": [2e-7], "generic_kernel": kernel}}}
    assert cw.kernel_drift(doc, doc["meta"]["raw"]) == {}  # no fit to compare with
    doc["meta"]["raw"]["work_kinds"]["fits"] = {"generic": {"predicted_ns_per_op": 1.0}}
    drift = cw.kernel_drift(doc, doc["meta"]["raw"])
    now = drift["generic"]["now"]
    assert now > 1.0 and drift["generic"]["drift"] == pytest.approx(now - 1)
    src = _file(tmp_path, "v1.toml", doc)
    out = tmp_path / "out.toml"
    with pytest.raises(sim.ConfigError, match="changed on its kernels' path .*generic kernel") \
            as e:
        cw.refit(src, out)
    assert "\n" not in str(e.value) and not out.exists()
    # within STALE of what the fit predicted: fitted again
    doc["meta"]["raw"]["work_kinds"]["fits"]["generic"]["predicted_ns_per_op"] = now * 1.01
    assert cw.refit(_file(tmp_path, "near.toml", doc), out)["gap_model"] == gm.KS_GAP_MODEL
    out.unlink()
    doc["meta"]["raw"]["work_kinds"]["fits"]["generic"]["predicted_ns_per_op"] = 1.0
    assert cw.main([str(src), "-o", str(out), "--from-raw", "--mark-stale"]) == 0
    marked = tomllib.loads(out.read_text())
    assert marked["work"] == {**doc["work"], "gap_model": "site-cost-v1"}
    assert "changed on its kernels' path" in marked["meta"]["work_refit"]["refused"]
    assert any("not fitted again" in n for n in marked["notes"])
    assert sim.load_cpu(out).work_gap_model == "site-cost-v1"


ZEN5_WORK = "results/calibrate-zen5-validation.toml"


@pytest.mark.parametrize(("kind", "bench"), [("hash", "siphash"), ("crc", "crc64")])
def test_the_presets_hash_and_crc_are_the_zen5_points_in_c_refs_counts(kind, bench):
    """A preset names no gap model, so nothing refuses it when c_ref's counts change: its
    hash and crc rates, estimated from the Zen 5 file's kernel points, are those points'
    cycles over the instructions c_ref counts for them now (one decimal, at most the
    width); a recount that leaves a preset behind fails here."""
    path = ROOT / ZEN5_WORK
    if not path.is_file():
        pytest.skip(f"{ZEN5_WORK}: not in this checkout")
    pts = tomllib.loads(path.read_text())["meta"]["raw"]["work_ipc"]["points"]
    mine = {int(k.split("/")[1]): v["cycles"] for k, v in pts.items() if k.startswith(bench)}
    assert mine, bench
    rate = sum(cal.work_instructions(bench, n) for n in mine) / sum(mine.values())
    checked = 0
    for name in sim.preset_names():
        cpu = sim.load_cpu(name)
        if not cpu.work or ZEN5_WORK not in cpu.provenance["work"].get(kind, ""):
            continue
        assert dict(cpu.work)[kind] == min(round(rate, 1), cpu.width), name
        checked += 1
    assert checked >= 5
