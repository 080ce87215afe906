"""sim/calibrate_stores.py: a calibrated file's [core] store_buffer and
full_line_store_fetch, from the table of known cores and the instruction set."""

from __future__ import annotations

import tomllib

import pytest
from test_calibrate import LEVELS, ZEN4, synthetic_raw

from kvsim import sim
from kvsim.sim import calibrate as cal
from kvsim.sim import calibrate_stores as cs


def test_every_table_entry_is_a_known_core():
    names = {c["core"] for c in cal.KNOWN_CORES}
    assert set(cs.STORE_BUFFERS) <= names
    for n, src in cs.STORE_BUFFERS.values():
        assert 0 < n <= sim.config.B.MAX_STORE_BUFFER and src[0] in "VRE"


def test_a_calibrated_x86_file_fetches_and_has_its_cores_buffer():
    raw, _ = synthetic_raw()
    doc = cal.build_doc(raw, LEVELS, ZEN4, quick=True)
    cpu = sim.parse_cpu(tomllib.loads(cal.to_toml(doc)))
    table = cal.identity_core(ZEN4)
    assert cpu.store_buffer == cs.STORE_BUFFERS[table["core"]][0]
    assert cpu.full_line_store_fetch is True
    assert doc["core"]["src"]["store_buffer"].startswith("table (")
    assert "read" in doc["core"]["src"]["full_line_store_fetch"]


@pytest.mark.parametrize(("vendor", "machine", "want"), [
    ("GenuineIntel", "x86_64", True), ("AuthenticAMD", "x86_64", True),
    ("", "aarch64", False), ("", "riscv64", None)])
def test_the_fetch_goes_by_the_instruction_set(vendor, machine, want):
    core: dict = {"width": 4, "rob": 100}
    cs.apply(core, vendor, None, machine)
    assert core.get("full_line_store_fetch") is want
    assert "store_buffer" not in core  # no table entry: no store buffer


def test_adding_to_a_calibrated_file(tmp_path):
    raw, _ = synthetic_raw()
    doc = cal.build_doc(raw, LEVELS, ZEN4, quick=True)
    for k in ("store_buffer", "full_line_store_fetch"):  # as a file written before
        del doc["core"][k], doc["core"]["src"][k]
    doc["meta"]["cpu"] = ZEN4
    src, out = tmp_path / "old.toml", tmp_path / "new.toml"
    src.write_text(cal.to_toml(doc))
    assert sim.load_cpu(str(src)).store_buffer is None
    assert cs.main([str(src), "-o", str(out)]) == 0
    cpu = sim.load_cpu(str(out))
    assert cpu.store_buffer == 64 and cpu.full_line_store_fetch is True


def test_a_file_that_is_not_calibrated_is_refused_in_one_line(tmp_path, capsys):
    src, out = tmp_path / "x.toml", tmp_path / "y.toml"
    src.write_text('name = "x"\n[[cache]]\nname = "L1D"\nsize = 4096\nways = 4\nline = 64\n'
                   'latency = 4\n')
    assert cs.main([str(src), "-o", str(out)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not a calibrated file" in err[0]
    assert not out.exists()
