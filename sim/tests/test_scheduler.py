"""``[core] scheduler`` (sim/MODEL.md §6): a record waiting for its producer holds its gap's
instructions in the scheduler until it issues, and dispatch waits while they fill it."""

from __future__ import annotations

import tomllib

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from sim_helpers import records, tiny_cpu_text

from kvsim import sim
from kvsim.sim.config import ConfigError


def _cpu(scheduler: int | None, rob: int = 512) -> sim.CpuConfig:
    core = f"width = 4\nrob = {rob}\n" + (f"scheduler = {scheduler}\n" if scheduler else "")
    return sim.parse_cpu(tomllib.loads(tiny_cpu_text(core)))


def _keys(n: int, work: int) -> np.ndarray:
    """n keys as MGET walks them: a bucket miss, then the object's load, which waits for
    the bucket and comes after `work` instructions that scan it (dependent on it)."""
    rows = []
    for k in range(n):
        rows.append(("load", 0x100000 + k * 8192, 8, 30, 0))
        rows.append(("load", 0x900000 + k * 8192, 8, work, 1))
    return records(rows)


def _timeline(recs: np.ndarray, cpu: sim.CpuConfig, engine: str = "fast") -> list[dict]:
    res = sim.simulate(recs, cpu, timeline=(0, len(recs)), engine=engine, validate=False)
    return res["timeline"], res


@pytest.mark.parametrize("engine", ["fast", "reference"])
def test_a_full_scheduler_keeps_the_next_key_from_issuing(engine):
    # 100 instructions wait for the bucket: a 64-entry scheduler is full, so the next key's
    # bucket (independent of it) dispatches only once this key's object load issues; without
    # the limit the 512-entry ROB lets both keys' buckets miss together
    recs = _keys(4, 100)
    free, _ = _timeline(recs, _cpu(None), engine)
    held, res = _timeline(recs, _cpu(64), engine)
    for k in range(1, 4):
        prev_obj, bucket = held[2 * k - 1], held[2 * k]
        assert bucket["dispatch"] >= prev_obj["issue"]
        assert free[2 * k]["issue"] < free[2 * k - 1]["issue"]  # overlapped without it
    assert res["timing"]["stall_cycles"]["scheduler_full"] > 0
    assert held[-1]["retire"] > free[-1]["retire"]


@pytest.mark.parametrize("engine", ["fast", "reference"])
def test_a_scheduler_that_holds_the_waiting_work_changes_nothing(engine):
    # two keys' 21 waiting instructions each fit in 64 entries beside the next ones: no stall
    recs = _keys(2, 20)
    free, a = _timeline(recs, _cpu(None), engine)
    held, b = _timeline(recs, _cpu(64), engine)
    assert free == held and a["cycles"] == b["cycles"]
    assert b["timing"]["stall_cycles"]["scheduler_full"] == 0


@given(sched=st.integers(1, 80), work=st.integers(0, 120), n=st.integers(1, 6))
def test_a_scheduler_never_speeds_the_core_up(sched, work, n):
    recs = _keys(n, work)
    a = sim.simulate(recs, _cpu(None), validate=False)
    b = sim.simulate(recs, _cpu(sched), validate=False)
    assert b["cycles"] >= a["cycles"]
    ref = sim.simulate(recs, _cpu(sched), engine="reference", validate=False)
    assert ref["cycles"] == b["cycles"]


def test_scheduler_bounds():
    with pytest.raises(ConfigError, match="scheduler"):
        _cpu(5000)
    with pytest.raises(ConfigError, match="scheduler"):
        sim.parse_cpu(tomllib.loads(_cpu_text_with("scheduler = -1")))


def _cpu_text_with(line: str) -> str:
    return tiny_cpu_text(f"width = 4\nrob = 64\n{line}", mshrs=None)
