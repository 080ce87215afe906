"""The server study's ``--sitting-syscall`` (experiments/server_sitting.py) and ``kvsim
calibrate --remeasure-syscall``: the re-measured file kept in the run's folder and reused, the
cells keyed by it (a section measured again is new predictions and new native cells, the
presets' cells unchanged), the rows and the table that record it, and the one-line refusals.
The measurement is faked here (sim/tests/test_calibrate_sitting.py runs it for real)."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pandas as pd
import pytest

from kvsim.experiments import server_sitting as SS
from kvsim.experiments import server_study as S
from kvsim.experiments.cells import cell_id
from kvsim.provenance import file_sha256
from kvsim.sim import calibrate_sitting as cs
from kvsim.sim import calibrate_syscall
from kvsim.sim.calibrate import cpu_identity, machine_key, to_toml
from kvsim.sim.local import read_sysfs

from .conftest import run_kvsim
from .test_bad_input import assert_clean_failure

PRESET = Path(cs.__file__).with_name("presets") / "xeon-8488c.toml"


def _cpu_file(tmp_path: Path, name: str = "calibrated.toml") -> Path:
    doc = tomllib.loads(PRESET.read_text())
    doc["name"] = "local"
    doc["syscall"]["src"]["write_ns"] = (
        "intercept of the least-squares line (975 ns) plus the server loop's kernel time per "
        "write (4,211 ns: its CPU time less the traced PINGs' predicted user time)")
    doc["meta"] = {"machine_key": machine_key(read_sysfs(), cpu_identity()), "quick": True}
    p = tmp_path / name
    p.write_text(to_toml(doc))
    return p


def _raw(extra: float) -> dict:
    """A measurement: the calls alone (900 + 0.02/B, 1000 + 0.05/B) and PING runs whose CPU
    time is 300 ns of user time, the calls and ``extra`` per write."""
    sizes = list(calibrate_syscall.SIZES)
    runs = []
    for depth in (1, 10):
        w = 1 / depth
        sys_ns = w * 900 + 14 * 0.02 + w * (1000 + extra) + 7 * 0.05
        runs.append({"depth": depth, "clients": 50, "requests": 1000, "round": 0,
                     "cpu_ns": sys_ns + 300, "sys_ns": sys_ns, "user_ns": 300.0,
                     "reads": w, "writes": w, "read_bytes": 14.0, "write_bytes": 7.0,
                     "sleeps": 0.0, "preempted": 0.0})
    return {"sizes": sizes, "iters": 10, "rounds": 1,
            "read_ns": [900 + 0.02 * s for s in sizes],
            "write_ns": [1000 + 0.05 * s for s in sizes],
            "epoll_wait_ns": [260.0] * len(sizes), "epoll_wait_sleep_ns": 350.0,
            "write_wake_ns": 1800.0,
            "loop": {"plan": [[1, 50], [10, 50]], "rounds": 1, "runs": runs, "tick_bias": []}}


@pytest.fixture
def measured(monkeypatch):
    """cs.measure faked (counting its calls), the traced PINGs' user time 300 ns."""
    calls: list[bool] = []

    def measure(quick, rounds=None, loop=True, log=None, **small):
        calls.append(loop)
        return _raw(4000.0)

    monkeypatch.setattr(cs, "measure", measure)
    monkeypatch.setattr(calibrate_syscall, "ping_user", lambda *a, **k: [
        {"depth": 1, "user_ns": 300.0}, {"depth": 10, "user_ns": 300.0}])
    return calls


def test_the_section_is_measured_once_and_reused(tmp_path: Path, measured) -> None:
    src, out = _cpu_file(tmp_path), tmp_path / "run"
    cpus = SS.sitting_cpus(out, [str(src), "epyc-7713"], measure=True)
    copy = SS.sitting_path(out, str(src))
    assert cpus == [str(copy), "epyc-7713"] and measured == [True]
    doc = tomllib.loads(copy.read_text())
    assert doc["syscall"]["write_ns"] == pytest.approx(1000.0 + 4000.0, abs=0.1)
    assert doc["meta"]["syscall_sitting"]["source_sha256"] == file_sha256(src)
    first = copy.read_bytes()
    # resumed (even under --only sim): the stored section, nothing measured again
    assert SS.sitting_cpus(out, [str(src), "epyc-7713"], measure=False) == cpus
    assert measured == [True] and copy.read_bytes() == first
    # the file measured for changed: measured again (with the native cells only)
    src.write_text(src.read_text() + "\n# edited\n")
    with pytest.raises(ValueError, match="measured with the native cells"):
        SS.sitting_cpus(out, [str(src)], measure=False)
    SS.sitting_cpus(out, [str(src)], measure=True)
    assert measured == [True, True]
    with pytest.raises(ValueError, match="no CPU file"):
        SS.sitting_cpus(out, ["epyc-7713", "local"], measure=True)


def test_the_cells_are_keyed_by_the_section_and_the_sitting(tmp_path: Path, measured) -> None:
    src = _cpu_file(tmp_path)
    plain = S._cells("small", [str(src), "epyc-7713"])
    cpus = SS.sitting_cpus(tmp_path / "run", [str(src), "epyc-7713"], measure=True)
    sit = S._cells("small", cpus)
    by = lambda cells, kind, cpu=None: [c for c in cells if c["kind"] == kind  # noqa: E731
                                        and c.get("cpu") == cpu]
    # the presets' cells are the same as without the option
    assert by(sit, "server-predict", "epyc-7713") == by(plain, "server-predict", "epyc-7713")
    pred = by(sit, "server-predict", cpus[0])
    assert pred and all(c["cpu_digest"] == SS.cpu_key(cpus[0])["cpu_digest"] for c in pred)
    assert all(c["cpu_digest"] == SS.cpu_key(str(src))["cpu_digest"]
               for c in by(plain, "server-predict", str(src)))
    nat = by(sit, "server-native")
    assert nat and all("reuse" not in c and c["sitting"]["boot_id"] for c in nat)
    assert all(c["reuse"] == "results/native-server.json" and "sitting" not in c
               for c in by(plain, "server-native"))
    # another sitting's section: new predictions and new native cells, the presets' kept
    doc = tomllib.loads(Path(cpus[0]).read_text())
    doc["syscall"]["write_ns"] += 100.0
    doc["meta"]["syscall_sitting"]["provenance"]["date_utc"] = "later"  # another sitting
    Path(cpus[0]).write_text(to_toml(doc))
    again = S._cells("small", cpus)
    ids = lambda cells: {cell_id(c) for c in cells}  # noqa: E731
    assert ids(by(again, "server-predict", cpus[0])).isdisjoint(ids(pred))
    assert ids(by(again, "server-native")).isdisjoint(ids(nat))
    assert ids(by(again, "server-predict", "epyc-7713")) == ids(
        by(sit, "server-predict", "epyc-7713"))
    with pytest.raises(ValueError, match="changed after the run was planned"):
        S._run_predict(pred[0])  # planned before the file changed


def test_the_rows_name_the_sitting_and_the_table_records_the_section(tmp_path: Path,
                                                                        measured) -> None:
    cpus = SS.sitting_cpus(tmp_path / "run", [str(_cpu_file(tmp_path))], measure=True)
    f = SS.predict_fields(cpus[0])
    assert f["cpu_label"].endswith(SS.LABEL) and "calibrated.toml" in f["cpu_label"]
    assert SS.predict_fields("epyc-7713") == {} and SS.is_sitting(f["cpu_label"])
    assert S.this_machine(f["cpu_label"])
    rows = pd.DataFrame([
        {"kind": "server-predict", "cpu": f["cpu_label"], "cell": "get-p1",
         "row": "this machine", "pred_rps_a": 100.0, "pred_rps_b": 100.0, "pred_speedup": 1.0,
         "syscall_sitting": f["syscall_sitting"]},
        {"kind": "server-native", "cpu": None, "cell": "get-p1", "row": "this machine",
         "cref_cpu_a_rps_median": 200.0, "cref_cpu_b_rps_median": 200.0,
         "cref_cpu_speedup": 1.0, "valkey_cpu_a_rps_median": 200.0,
         "valkey_cpu_b_rps_median": 200.0, "valkey_cpu_speedup": 1.0}])
    tables = {t.name: t for t in S._tables(rows)}
    line = tables["server"].frame.iloc[0]
    assert "measured under PING in this sitting" in line["diagnosis"]
    t = tables["server_syscall"].frame.set_index("figure")
    preset = tomllib.loads(PRESET.read_text())["syscall"]
    assert t.loc["write per call", "file"] == preset["write_ns"]
    assert t.loc["the loop's kernel time per write", "file"] == 4211.0
    assert t.loc["the loop's kernel time per write", "sitting"] == pytest.approx(4000.0)
    assert t.loc["read per call", "ratio"] == pytest.approx(
        t.loc["read per call", "sitting"] / t.loc["read per call", "file"])
    assert json.loads(f["syscall_sitting"])["method"] == "cpu"
    # without a re-measured file: no such table
    assert "server_syscall" not in {t.name for t in S._tables(rows.assign(
        cpu=["epyc-7713", None]).drop(columns="syscall_sitting"))}


@pytest.mark.parametrize("argv,needle", [
    (["experiment", "run", "headline", "--sitting-syscall"], "run `server` alone"),
    (["experiment", "run", "server", "--scale", "seed", "--sitting-syscall"], "alone"),
    (["experiment", "run", "server", "--sitting-syscall", "--cpu", "epyc-7713"],
     "no CPU file"),
    (["experiment", "run", "server", "--sitting-syscall", "--only", "sim", "--cpu", "{CPU}"],
     "measured with the native cells"),
    (["calibrate", "--remeasure-syscall", "{D}/missing.toml", "-o", "{D}/out.toml"],
     "missing.toml"),
    (["calibrate", "--remeasure-syscall", "{PRESET}", "-o", "{D}/out.toml"], "machine_key"),
    (["calibrate", "--remeasure-syscall", "{CPU}"], "-o OUT"),
    (["calibrate", "--remeasure-syscall", "{CPU}", "--quick", "-o", "{D}/out.toml"],
     "no other option"),
    (["calibrate", "--remeasure-syscall", "{CPU}", "-o", "{CPU}"], "measured again"),
])
def test_bad_input_is_one_line_and_leaves_nothing(tmp_path: Path, argv, needle) -> None:
    (tmp_path / "in").mkdir()
    cpu = _cpu_file(tmp_path / "in")
    d = tmp_path / "d"
    d.mkdir()
    args = [a.replace("{CPU}", str(cpu)).replace("{D}", str(d)).replace("{PRESET}",
                                                                         str(PRESET))
            for a in argv]
    if args[:2] == ["experiment", "run"]:
        args += ["-o", str(d / "run")]
    before = cpu.read_bytes()
    assert_clean_failure(run_kvsim(*args), out_dir=d, needle=needle)
    assert cpu.read_bytes() == before
