"""The [syscall] section measured again in this sitting (sim/calibrate_sitting.py): a real
re-measure at a small size (loopback calls, c_ref's server under redis-benchmark, the traced
PINGs) gives a well-formed section with its provenance and leaves the rest of the file as it
was; the file's method and replaced figures are read back from both forms the calibration
has written; a file of no use here is refused in one line before anything is measured. The
figures themselves are this machine's at the time: only their form and their relations are
asserted."""

from __future__ import annotations

import math
import shutil
import tomllib
from pathlib import Path

import pytest

from kvsim.provenance import file_sha256
from kvsim.sim import calibrate_sitting as cs
from kvsim.sim.calibrate import cpu_identity, machine_key, to_toml
from kvsim.sim.config import ConfigError, load_cpu, parse_cpu
from kvsim.sim.local import read_sysfs

PRESET = Path(cs.__file__).with_name("presets") / "xeon-8488c.toml"
#: write_ns's src as server_split --loop-cpu wrote it before [meta] syscall_loop existed
OLD_SRC = ("measured: kvsim-calibrate syscall, TCP loopback, medians of 3 x 2000 calls; "
           "intercept of the least-squares line (975 ns) plus the server loop's kernel time "
           "per write (4,211 ns: c_ref's server under redis-benchmark PING_MBULK from 50 "
           "clients, its CPU time (schedstat) less the traced PINGs' predicted user time less "
           "the calls' costs)")


def _calibrated(here: bool = True) -> dict:
    """A preset made a CPU file `kvsim calibrate` wrote on this machine (or another one),
    its [syscall] a measured one's as an older file gives it."""
    doc = tomllib.loads(PRESET.read_text())
    doc["name"], doc["notes"] = "local", ["a note"]
    doc["syscall"].update({"read_ns": 880.0, "read_byte_ns": 0.06, "write_ns": 5186.0,
                           "write_byte_ns": 0.07, "epoll_wait_ns": 0.0})
    doc["syscall"]["src"]["write_ns"] = OLD_SRC
    key = machine_key(read_sysfs(), cpu_identity()) if here else "other-cpu-0123456789ab"
    doc["meta"] = {"machine_key": key, "quick": True, "fit": {"rms_rel_error": 0.1}}
    return doc


def _untouched(a: dict, b: dict) -> None:
    """``b`` is ``a`` but for the socket figures, the records of the re-measure and a note."""
    new_meta = {"syscall_sitting", "syscall_loop"}
    assert {k: v for k, v in a.items() if k not in ("syscall", "meta", "notes")} == {
        k: v for k, v in b.items() if k not in ("syscall", "meta", "notes")}
    assert {k: v for k, v in b["meta"].items() if k not in new_meta} == a["meta"]
    assert b["notes"][:-1] == a["notes"] and len(b["notes"]) == len(a["notes"]) + 1
    for k in set(a["syscall"]) - set(cs.SOCKET_KEYS) - {"src"}:  # the load's, kept
        assert b["syscall"][k] == a["syscall"][k]
        assert b["syscall"]["src"][k] == a["syscall"]["src"][k]


def test_file_method_and_replaced_read_both_forms() -> None:
    old = _calibrated()
    assert cs.file_method(old) == "cpu"
    r = cs.replaced(old)
    assert (r["write_alone_ns"], r["loop_per_write_ns"]) == (975.0, 4211.0)
    assert r["write_ns"] == 5186.0 and r["method"] == "cpu"
    new = {**old, "meta": {**old["meta"], "syscall_loop": {"method": "ticks",
                                                           "residue_per_write_ns": 3000.0}}}
    assert cs.file_method(new) == "ticks"
    assert cs.replaced(new)["write_alone_ns"] == pytest.approx(2186.0)
    ticks = {**old, "syscall": {**old["syscall"], "src": {
        "write_ns": "intercept (900 ns) plus the server loop's residue per write (2,000 ns, "
                    "method ticks"}}}
    assert cs.file_method(ticks) == "ticks"
    assert cs.replaced(ticks)["loop_per_write_ns"] == 2000.0
    plain = {**old, "syscall": {**old["syscall"], "src": {"write_ns": "E a guess"}}}
    assert cs.file_method(plain) is None and "loop_per_write_ns" not in cs.replaced(plain)


def test_sitting_names_the_boot(tmp_path: Path) -> None:
    (tmp_path / "b").write_text("8a1fd9e3-9de4\n")
    (tmp_path / "u").write_text("3600.5 100.0\n")
    s = cs.sitting(tmp_path / "b", tmp_path / "u")
    assert s["boot_id"] == "8a1fd9e3-9de4" and s["uptime_s"] == 3600
    assert s["booted_utc"].endswith("Z") and "T" in s["booted_utc"]
    gone = cs.sitting(tmp_path / "x", tmp_path / "y")
    assert gone == {"boot_id": "", "booted_utc": "", "uptime_s": ""}


def _write(tmp_path: Path, doc: dict, name: str = "cpu.toml") -> Path:
    p = tmp_path / name
    p.write_text(to_toml(doc))
    return p


@pytest.mark.parametrize("case", ["missing", "directory", "not-toml", "not-a-cpu",
                                  "preset", "other-machine"])
def test_a_file_of_no_use_here_is_refused_in_one_line(tmp_path: Path, case: str) -> None:
    p = tmp_path / "cpu.toml"
    if case == "directory":
        p.mkdir()
    elif case == "not-toml":
        p.write_text("[syscall\nread_ns = ")
    elif case == "not-a-cpu":
        p.write_text('name = "x"\n[syscall]\nread_ns = -1\n')
    elif case == "preset":
        shutil.copy(PRESET, p)
    elif case == "other-machine":
        p = _write(tmp_path, _calibrated(here=False))
    with pytest.raises(ConfigError) as e:
        cs.remeasure(p, tmp_path / "out.toml")
    msg = str(e.value)
    assert "\n" not in msg and str(p.name) in msg
    assert not (tmp_path / "out.toml").exists()
    with pytest.raises(ConfigError, match="is the file being measured again"):
        cs.remeasure(_write(tmp_path, _calibrated(), "ok.toml"), tmp_path / "ok.toml")


@pytest.mark.skipif(shutil.which("redis-benchmark") is None, reason="redis-tools not installed")
def test_a_small_real_remeasure_gives_a_well_formed_section(tmp_path: Path) -> None:
    """The whole procedure for real at a small size, on whatever else the cores run."""
    old = _calibrated()
    src = _write(tmp_path, old)
    raw = cs.measure(True, rounds=1, iters=64, loop_requests=(2000, 5000), bias_iters=200)
    new = cs.derive(old, raw, source="cpu.toml", source_sha256=file_sha256(src),
                    ping_requests={1: 500, 10: 1000})
    out = cs.write(new, tmp_path / "again.toml")
    back = tomllib.loads(out.read_text())
    _untouched(old, back)
    sec, ss, loop = back["syscall"], back["meta"]["syscall_sitting"], back["meta"][
        "syscall_loop"]
    # well formed: every socket figure finite and >= 0, with its source, the parser's
    assert parse_cpu(back).syscall.call_ns[:2] == (sec["read_ns"], sec["write_ns"])
    load_cpu(str(out))
    for k in cs.SOCKET_KEYS:
        assert math.isfinite(sec[k]) and sec[k] >= 0, k
        assert "measured" in sec["src"][k] and "sitting" in sec["src"][k], k
    # plausible: a call costs something, a byte far less than a call, the loop's kernel
    # time is what the file's method takes and is on top of the write alone
    assert sec["read_ns"] > 0 and sec["write_ns"] > 0
    assert sec["read_byte_ns"] < sec["read_ns"] and sec["write_byte_ns"] < sec["write_ns"]
    assert ss["method"] == loop["method"] == "cpu"
    assert sec["write_ns"] == pytest.approx(ss["alone"]["write_ns"]
                                            + loop["residue_per_write_ns"], abs=0.06)
    assert loop["residue_per_write_ns"] >= 0 and sec["epoll_wait_ns"] == 0.0
    assert [p["depth"] for p in loop["ping_user_ns"]] == [1, 10]
    assert all(p["user_ns"] > 0 for p in loop["ping_user_ns"])
    # the provenance: commit, machine, date, this sitting, the file measured for
    prov = ss["provenance"]
    assert {"commit", "machine", "date_utc", "command"} <= set(prov)
    assert prov["machine"]["cores"] and ss["sitting"]["boot_id"] == Path(
        "/proc/sys/kernel/random/boot_id").read_text().strip()
    assert ss["source"] == "cpu.toml" and ss["source_sha256"] == file_sha256(src)
    assert ss["replaced"]["write_ns"] == 5186.0 and ss["raw"]["sizes"]
    rows = {r["figure"].strip(): r for r in cs.summary(back)}
    assert rows["write per call"]["file"] == 5186.0
    assert rows["the loop's kernel time per write"]["file"] == 4211.0
    assert rows["read per call"]["sitting"] == sec["read_ns"]
