"""`kvsim cpus --show`: the printed TOML gives the same model back; a bad CPU file's error
lists the valid keys at that place and points to the schema."""

import dataclasses
import tomllib

import pytest

from kvsim import sim
from kvsim.experiments import cpufile

from .conftest import ROOT, run_kvsim
from .test_cli import assert_one_line_error


def _same(a: sim.CpuConfig, b: sim.CpuConfig) -> bool:
    return dataclasses.replace(a, source=b.source) == b


@pytest.mark.parametrize("name", sim.preset_names())
def test_cpu_toml_round_trips(name):
    cpu = sim.load_cpu(name)
    back = sim.parse_cpu(tomllib.loads(cpufile.cpu_toml(cpu)))
    assert _same(back, cpu)


def test_a_calibrated_file_round_trips():
    """A calibrated file's [tlb] keys a preset leaves at their defaults (the walk's 4 KiB
    level, the page-table lines' retention and host read, a last level that keeps none of
    them, random frames) survive cpu_toml, whatever this machine's cache holds."""
    cpu = sim.load_cpu(str(ROOT / "results" / "calibrate-xeon-m167-q15-quick.toml"))
    assert cpu.tlb.host_read_ns and not cpu.tlb.walk_last_level
    others = dataclasses.replace(cpu, tlb=dataclasses.replace(
        cpu.tlb, placement="random", placement_seed=7, walk_retention_ns=2e6,
        walk_extra_4k=35))
    for c in (cpu, others):
        back = sim.parse_cpu(tomllib.loads(cpufile.cpu_toml(c)))
        assert _same(back, c)


@pytest.mark.parametrize("name", ["graviton3", "local"])
def test_show_prints_a_usable_file(name, tmp_path, monkeypatch):
    # an empty cache: `local` is the same preset whether or not this machine is calibrated
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    res = run_kvsim("cpus", "--show", name)
    assert res.returncode == 0, res.stderr.decode()
    path = tmp_path / "mine.toml"
    path.write_bytes(res.stdout)
    assert _same(sim.load_cpu(path), sim.load_cpu(name))


def test_show_unknown_name_lists_presets():
    assert_one_line_error(run_kvsim("cpus", "--show", "no-such-cpu"), "graviton3")


def _broken(tmp_path, old: str, new: str):
    text = (sim.config.PRESET_DIR / "graviton3.toml").read_text()
    assert old in text
    path = tmp_path / "bad.toml"
    path.write_text(text.replace(old, new, 1))
    return path


def test_wrong_section_names_the_valid_keys(tmp_path, small_trace):
    path = _broken(tmp_path, "[core]", '[L2]\nsize = "1MiB"\n\n[core]')
    res = run_kvsim("simulate", small_trace, "--cpu", path)
    assert_one_line_error(res, "bad.toml", "L2: unknown top-level key", "[[cache]]",
                          "sim/PRESETS.md", *sorted(sim.config._TOP_KEYS))


def test_wrong_key_names_the_valid_keys_there(tmp_path, small_trace):
    path = _broken(tmp_path, "latency = 12", "latncy = 12")
    res = run_kvsim("simulate", small_trace, "--cpu", path)
    assert_one_line_error(res, "cache[1].latncy: unknown key", "sim/PRESETS.md",
                          *sorted(sim.config._KEYS["cache"]))


def test_cpu_toml_keeps_a_sustained_ipc():
    cpu = sim.load_cpu("graviton3")
    cpu = cpu.with_changes(sustained_ipc=cpu.width / 2)
    assert _same(sim.parse_cpu(tomllib.loads(cpufile.cpu_toml(cpu))), cpu)


def test_cpu_toml_keeps_software_prefetch_training():
    cpu = dataclasses.replace(sim.load_cpu("epyc-7713"), swpf_trains=True)
    assert "trains_prefetchers = true" in cpufile.cpu_toml(cpu)
    assert _same(sim.parse_cpu(tomllib.loads(cpufile.cpu_toml(cpu))), cpu)


def test_cpu_toml_keeps_the_prefetcher_keys_below_l1():
    cpu = sim.load_cpu("xeon-8255c")
    cpu = cpu.with_changes(prefetchers=tuple(
        dataclasses.replace(p, arrival=True, stores=i % 2 == 1, hits=i % 3 == 0)
        if p.level > 0 else p for i, p in enumerate(cpu.prefetchers)))
    assert "arrival = true" in cpufile.cpu_toml(cpu)
    assert _same(sim.parse_cpu(tomllib.loads(cpufile.cpu_toml(cpu))), cpu)


def test_simulate_refuses_a_file_fitted_to_other_counts(tmp_path, small_trace):
    """A calibrated file whose [work] names no gap model (fitted before the names: v1) on
    this c_ref's trace: one line naming both models and the file, nothing on stdout; the
    same file re-fitted (the current name) runs."""
    from kvsim.sim import gap_model

    src = (ROOT / "results" / "calibrate-xeon-m167-q15-quick.toml").read_text()
    doc = tomllib.loads(src)
    doc["work"].pop("gap_model", None)
    from kvsim.sim.calibrate import to_toml

    old = tmp_path / "old.toml"
    old.write_text(to_toml(doc))
    res = run_kvsim("simulate", small_trace, "--cpu", old)
    assert_one_line_error(res, "site-cost-v1", gap_model.KS_GAP_MODEL, str(old))
    assert res.stdout == b""
    doc["work"]["gap_model"] = gap_model.KS_GAP_MODEL
    new = tmp_path / "new.toml"
    new.write_text(to_toml(doc))
    assert run_kvsim("simulate", small_trace, "--cpu", new).returncode == 0
