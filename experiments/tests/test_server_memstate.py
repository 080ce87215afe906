"""experiments/server_memstate.py: the memory path put into the study's file, the rounds'
chases and the CPU files' own (the traces and simulations are the server study's, tested
there)."""

from __future__ import annotations

import pytest

from kvsim import sim
from kvsim.experiments import server_memstate as M
from kvsim.experiments.server_heldout import WALK_FIELDS

PRESETS = ("epyc-7713", "xeon-8488c", "graviton4")


@pytest.mark.parametrize("a,b", [(x, y) for x in PRESETS for y in PRESETS if x != y])
def test_the_memory_path_is_the_other_files_and_the_rest_stays(a, b):
    dst, src = sim.load_cpu(a), sim.load_cpu(b)
    m = M.with_memory_path(dst, src)
    assert m.caches == src.caches and m.dram_latency_ns == src.dram_latency_ns
    assert all(getattr(m.tlb, k) == getattr(src.tlb, k) for k in WALK_FIELDS)
    assert (m.rob, m.width, m.freq_ghz, m.work, m.syscall, m.name) == (
        dst.rob, dst.width, dst.freq_ghz, dst.work, dst.syscall, dst.name)
    assert (m.tlb.l1_entries, m.tlb.l2_entries, m.tlb.walkers) == (
        dst.tlb.l1_entries, dst.tlb.l2_entries, dst.tlb.walkers)


def test_each_round_gives_its_probe_once_in_round_order():
    runs = []
    for r in (1, 0):
        probe = {"chase_4k_ns": 200.0 + r, "chase_2m_ns": 180.0 + r,
                 "chase_2m_ns_by_size": {"4194304": 40.0 + r}}
        for who in ("cref", "valkey"):
            runs.append({"server": who, "cell": "get-p10", "side": "a", "round": r, **probe})
    runs.append({"server": "cref", "cell": "get-p10", "side": "a", "round": 2})  # no probe
    got = M.memory_rounds(runs)
    assert [g["round"] for g in got] == [0, 1]
    assert [g["chase_2m_ns_by_size"]["4194304"] for g in got] == [40.0, 41.0]


def test_a_cpu_files_chases_are_read_by_size(tmp_path):
    f = tmp_path / "cal.toml"
    f.write_text("[meta.raw]\nsizes = [4096, 8192]\nchase_ns_fastest = [1.5, 2.5]\n")
    assert M.file_chases(str(f)) == {"4096": 1.5, "8192": 2.5}
    g = tmp_path / "preset.toml"
    g.write_text("[meta]\nname = 'x'\n")
    assert M.file_chases(str(g)) == {}


def test_a_missing_input_is_one_line_and_exit_2(tmp_path, capsys):
    out = tmp_path / "o.json"
    rc = M.main(["--native", str(tmp_path / "none.json"), "--cpu", "epyc-7713",
                 "--memory-from", "epyc-7713", "--out", str(out)])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "none.json" in err
    assert not out.exists()
