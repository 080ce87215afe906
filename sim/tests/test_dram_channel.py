"""The DRAM channel's calendar (sim/MODEL.md §6): a fill waits only for fills that use the
channel at its own time, whatever the program order of their records."""

from __future__ import annotations

import pytest
from sim_helpers import records

from kvsim import sim


def _cpu(bw_gbs: float):
    # 1 GHz, width 1: a 64-byte line takes 64 / bw cycles of the channel
    return sim.parse_cpu({
        "name": "t", "freq_ghz": 1.0, "core": {"width": 1, "rob": 64},
        "cache": [{"name": "L1D", "size": 4096, "ways": 4, "line": 64, "latency": 4,
                   "mshrs": 8}],
        "dram": {"latency_ns": 100.0, "bandwidth_gbs": bw_gbs}})


@pytest.mark.parametrize("engine", ["fast", "reference"])
def test_an_earlier_fill_does_not_queue_behind_a_later_one(engine):
    # B depends on A (its fill starts at ~100); C, after B in program order, is independent
    # and starts at ~2: the channel is idle then, so C must not wait for B's slot
    rec = records([("load", 0x10000, 8), ("load", 0x20000, 8, 0, 1), ("load", 0x30000, 8)])
    res = sim.simulate(rec, _cpu(6.4), engine=engine)  # 10 cycles per line
    t = res["timing"]
    assert t["stall_cycles"]["dram_bandwidth_wait"] <= 10  # C waits at most for A's slot
    assert res["cycles"] == pytest.approx(200 + 4, abs=4)  # A then B; C in their shadow


@pytest.mark.parametrize("engine", ["fast", "reference"])
def test_fills_at_the_same_time_share_the_channel(engine):
    # eight independent misses at once: one line per slot, so the last starts 7 slots late
    rec = records([("load", 0x10000 + i * 4096, 8) for i in range(8)])
    res = sim.simulate(rec, _cpu(6.4), engine=engine)
    assert res["cycles"] == pytest.approx(100 + 7 * 10 + 2, abs=3)
    free = sim.simulate(rec, _cpu(6.4).with_changes(dram_bandwidth_gbs=None), engine=engine)
    assert free["cycles"] == pytest.approx(100 + 8, abs=3)  # one dispatch per cycle


def test_a_long_trace_moves_the_calendar_forward():
    # far more fills than the calendar's slots, in two waves far apart: the engine and the
    # reference agree, and the second wave waits like the first
    rows = [("load", 0x100000 + i * 64, 8, 0, 1 if i % 16 else 0) for i in range(6000)]
    rec = records(rows)
    a = sim.simulate(rec, _cpu(3.2))
    b = sim.simulate(rec, _cpu(3.2), engine="reference")
    assert a["cycles"] == b["cycles"]
    assert a["timing"]["stall_cycles"] == b["timing"]["stall_cycles"]


def test_a_congested_channel_agrees_with_the_reference():
    # 64 miss buffers on a slow channel (128 cycles per line): fills queue up to 64 slots
    # ahead of their start, across the calendar's 64-slot words and past its end, while
    # dependent loads start behind them, out of time order
    cpu = sim.parse_cpu({
        "name": "t", "freq_ghz": 1.0, "core": {"width": 2, "rob": 256},
        "cache": [{"name": "L1D", "size": 4096, "ways": 4, "line": 64, "latency": 4,
                   "mshrs": 64}],
        "dram": {"latency_ns": 100.0, "bandwidth_gbs": 0.5}})
    rows = [("load", 0x100000 + i * 4096 + (i % 7) * 64, 8, i % 3, 2 if i % 5 == 4 else 0)
            for i in range(9000)]
    rec = records(rows)
    a = sim.simulate(rec, cpu)
    b = sim.simulate(rec, cpu, engine="reference")
    assert a["timing"]["stall_cycles"]["dram_bandwidth_wait"] > 1000 * 128  # congested
    assert a["cycles"] == b["cycles"]
    assert a["timing"] == b["timing"]
