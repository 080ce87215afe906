"""sim/calibrate_kernel.py: the snapshot load's kernel costs (a minor fault, a read() from the
page cache) from load_split's probe into a CPU file's [syscall]; bad probe figures refused
with one line; the command that adds them to a file calibrated before."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import tomllib

import pytest

from kvsim import sim
from kvsim.sim import calibrate_kernel as ck
from kvsim.sim.config import ConfigError, parse_cpu

KERNEL_KEYS = ("file_read_ns", "file_read_byte_ns", "page_fault_ns", "page_fault_byte_ns")


def _round(fault=1100.0, byte=0.2, call=90.0) -> dict:
    return {"first_touch_ns_per_page": fault, "read_ns_per_byte": byte, "read_ns_per_call": call}


def _doc() -> dict:
    return {"name": "t", "freq_ghz": 2.0, "core": {"width": 4, "rob": 64},
            "dram": {"latency_ns": 80}, "cache": [{"size": "32KiB", "ways": 8}],
            "syscall": {"read_ns": 500.0, "src": {"read_ns": "E"}}}


def test_the_keys_are_the_last_two_calls() -> None:
    assert set(KERNEL_KEYS) == set(sim.config.SYSCALL_KEYS[6:])


def test_section_takes_the_medians_and_clamps_the_call_at_zero() -> None:
    rounds = [_round(1000, 0.1, -20), _round(1200, 0.3, -5), _round(5000, 0.2, -1)]
    sec = ck.section(rounds, "here")
    assert sec["page_fault_ns"] == 1200 and sec["file_read_byte_ns"] == 0.2
    assert sec["file_read_ns"] == 0.0 and sec["page_fault_byte_ns"] == 0.0
    assert set(sec) == {*KERNEL_KEYS, "src"} and set(sec["src"]) == set(KERNEL_KEYS)
    assert all(v.startswith("measured") for v in sec["src"].values())
    assert "median of 3 rounds" in sec["src"]["page_fault_ns"]


def test_apply_keeps_the_sockets_keys_and_the_rounds() -> None:
    doc = _doc()
    ck.apply(doc, [_round(), _round(1300, 0.25, 100)], "here")
    assert doc["syscall"]["read_ns"] == 500.0 and doc["syscall"]["src"]["read_ns"] == "E"
    assert doc["syscall"]["page_fault_ns"] == 1200 and doc["syscall"]["file_read_ns"] == 95
    assert len(doc["meta"]["kernel_probe"]["rounds"]) == 2
    cpu = parse_cpu(doc)
    assert cpu.syscall.call_ns[3:] == (95.0, 1200.0)
    assert cpu.syscall.byte_ns[3] == pytest.approx(0.225)


@pytest.mark.parametrize(("rounds", "where"), [
    ([], "no rounds"),
    ([_round(), {"read_ns_per_byte": 0.2, "read_ns_per_call": 1.0}],
     "round 2: first_touch_ns_per_page"),
    ([_round(fault=math.nan)], "round 1: first_touch_ns_per_page"),
    ([_round(fault=-3.0)], "round 1: first_touch_ns_per_page: must be a finite number > 0"),
    ([_round(byte=0.0)], "round 1: read_ns_per_byte"),
    ([_round(call=math.inf)], "round 1: read_ns_per_call"),
    ([_round(call="fast")], "round 1: read_ns_per_call"),
    ([_round(byte=True)], "round 1: read_ns_per_byte"),
    (["x"], "round 1: first_touch_ns_per_page"),
])
def test_bad_probe_figures_are_refused_with_one_line(rounds, where) -> None:
    with pytest.raises(ConfigError, match=where) as e:
        ck.section(rounds, "here")
    assert "\n" not in str(e.value) and str(e.value).startswith("calibrate: kernel probe")


def test_the_probe_measures_positive_costs(tmp_path) -> None:
    """One round on a small file (the figures are this machine's: not asserted)."""
    got = ck.measure(quick=True, rounds=1, file_bytes=4 << 20)
    assert len(got) == 1 and got[0]["first_touch_ns_per_page"] > 0
    assert got[0]["read_ns_per_byte"] > 0


def test_load_split_runs_the_same_probe() -> None:
    from kvsim.experiments import load_split

    assert "calibrate_kernel" in load_split.kernel_probe.__doc__
    assert not hasattr(load_split, "KERNEL_PAGES")  # the probe's constants live once


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kvsim.sim.calibrate_kernel", *args],
                          capture_output=True, text=True)


def test_the_command_adds_a_load_splits_probes(tmp_path) -> None:
    from kvsim.sim.calibrate import to_toml

    cpu = tmp_path / "cpu.toml"
    cpu.write_text(to_toml(_doc()))
    split = tmp_path / "split.json"
    split.write_text(json.dumps({"provenance": {"commit": "abc", "date_utc": "d"},
                                 "kernel_runs": [_round(), _round(1300, 0.25, 100)]}))
    out = tmp_path / "out.toml"
    p = _run(str(cpu), "-o", str(out), "--from-load-split", str(split))
    assert p.returncode == 0, p.stderr
    doc = tomllib.loads(out.read_text())
    assert doc["syscall"]["page_fault_ns"] == 1200 and doc["syscall"]["read_ns"] == 500
    assert "split.json" in doc["syscall"]["src"]["page_fault_ns"]
    sim.load_cpu(str(out))
    # bad probes, a file that is not JSON: one line, exit 2, nothing written
    split.write_text(json.dumps({"kernel_runs": [_round(fault=-1.0)]}))
    bad = tmp_path / "bad.toml"
    for content in (None, "{not json"):
        if content is not None:
            split.write_text(content)
        p = _run(str(cpu), "-o", str(bad), "--from-load-split", str(split))
        assert p.returncode == 2 and p.stderr.count("\n") == 1 and "Traceback" not in p.stderr
        assert not bad.exists()
