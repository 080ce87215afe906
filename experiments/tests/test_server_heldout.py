"""experiments/server_heldout.py: the parameter swaps between two CPU files, the native
cell's reading and the ratios (the traces and simulations are the server study's, tested
there)."""

from __future__ import annotations

import json

import pytest

from kvsim import sim
from kvsim.experiments import server_heldout as H

PRESETS = ("epyc-7713", "xeon-8488c", "graviton4")


@pytest.mark.parametrize("a,b", [(x, y) for x in PRESETS for y in PRESETS if x != y])
def test_each_swap_takes_exactly_its_part_from_the_other_file(a, b):
    """Every swapped CPU equals its base but for the named part, which is the other file's;
    swapping every part both ways round gives the other file's memory path."""
    cal, pre = sim.load_cpu(a), sim.load_cpu(b)
    got = dict(H.swaps(cal, pre))
    base = {True: pre, False: cal}
    for label, m in got.items():
        on_preset = label.startswith(pre.name)
        dst, src = base[on_preset], base[not on_preset]
        parts = {"DRAM": m.dram_latency_ns == src.dram_latency_ns,
                 "walk": all(getattr(m.tlb, k) == getattr(src.tlb, k) for k in H.WALK_FIELDS),
                 "caches": m.caches == src.caches}
        for part, took in parts.items():
            named = part in label
            kept = {"DRAM": m.dram_latency_ns == dst.dram_latency_ns,
                    "walk": all(getattr(m.tlb, k) == getattr(dst.tlb, k)
                                for k in H.WALK_FIELDS),
                    "caches": m.caches == dst.caches}[part]
            assert took if named else kept, (label, part)
        # what no swap touches stays the base's
        assert (m.rob, m.width, m.freq_ghz, m.work, m.syscall, m.prefetchers) == (
            dst.rob, dst.width, dst.freq_ghz, dst.work, dst.syscall, dst.prefetchers)
        assert (m.tlb.l1_entries, m.tlb.l2_entries, m.tlb.walkers) == (
            dst.tlb.l1_entries, dst.tlb.l2_entries, dst.tlb.walkers)


def _native_doc(keys: int, cref=(400_000.0, 800_000.0), valkey=(500_000.0, 900_000.0)):
    m = {"keys": keys, "rounds": 6}
    for who, (a, b) in (("cref", cref), ("valkey", valkey)):
        m.update({f"{who}_cpu_a_rps_median": a, f"{who}_cpu_b_rps_median": b,
                  f"{who}_cpu_speedup": b / a * 1.01,  # the median ratio, not the ratio
                  f"{who}_cpu_speedup_ci95_low": 1.5, f"{who}_cpu_speedup_ci95_high": 2.5,
                  f"{who}_proc_runs": [{"anon_huge_kib": 0}, {"anon_huge_kib": 2048}]})
    return {"provenance": {"commit": "c", "date_utc": "d", "command": "kvsim native server"},
            "cells": [{"cell": "get-p1", "metrics": {"keys": keys}},
                      {"cell": H.CELL, "metrics": m}]}


def test_native_cell_reads_the_cells_cpu_time_per_request(tmp_path):
    keys = H._seed_row()["seed_keys"]
    p = tmp_path / "n.json"
    p.write_text(json.dumps(_native_doc(keys)))
    n = H.native_cell(str(p))
    assert n["cref"]["ns_a"] == pytest.approx(2500.0)
    assert n["cref"]["saved_ns"] == pytest.approx(2500.0 - 1250.0)
    assert n["valkey"]["speedup"] == pytest.approx(900 / 500 * 1.01)  # the file's own
    assert n["valkey"]["anon_huge_kib_max"] == 2048
    pred = {"a": {"ns": 2500.0}, "b": {"ns": 2500.0 / 1.5}, "saved_ns": 2500.0 / 3,
            "speedup": 1.5}
    r = H.ratios(pred, n)
    assert r["cref"]["ns_a"] == pytest.approx(1.0)
    assert r["cref"]["saved"] == pytest.approx((2500.0 / 3) / 1250.0)
    assert r["cref"]["speedup"] == pytest.approx(1.5 / (2.0 * 1.01))
    assert H.ratios(pred, None) == {}


def test_native_cell_at_other_keys_is_refused(tmp_path):
    p = tmp_path / "n.json"
    p.write_text(json.dumps(_native_doc(100_000)))
    with pytest.raises(ValueError, match="no get-p10 cell"):
        H.native_cell(str(p))
    assert H.native_cell(None) is None


def test_a_missing_native_file_is_one_line_and_exit_2(tmp_path, capsys):
    rc = H.main(["--native", str(tmp_path / "none.json"), "--out", str(tmp_path / "o.json")])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "none.json" in err
    assert not (tmp_path / "o.json").exists()
