"""External golden: DineroIV 7 on small_mixed_trace.din (traces/tests/data), flush on."""

from __future__ import annotations

import re

import numpy as np
import pytest
from sim_helpers import DATA

from kvsim import sim
from kvsim.traces.convert.dinero import din_to_records


def _din_records(path) -> np.ndarray:
    return din_to_records(path)


def _dinero_figures(out_text: str) -> dict:
    """Parse DineroIV's report: per cache, demand fetches/misses and bytes to/from memory."""
    figs = {}
    for block in re.split(r"\n(?=l\d-\w+\n)", out_text):
        m = re.match(r"(l\d-\w+)\n", block)
        if not m:
            continue

        def num(label, block=block):
            return int(re.search(label + r"\s+(\d+)", block).group(1))

        figs[m.group(1)] = {
            "fetches": num("Demand Fetches"), "misses": num("Demand Misses"),
            "bytes_from": num("Bytes From Memory"), "bytes_to": num("Bytes To Memory"),
        }
    return figs


@pytest.mark.parametrize("engine", ["fast", "reference"])
def test_small_mixed_trace_matches_dinero(golden_dir, engine):
    recs = _din_records(golden_dir / "small_mixed_trace.din")
    assert len(recs) == 2005
    want = _dinero_figures((golden_dir / "small_mixed_trace.dinero.out").read_text())
    cpu = sim.load_cpu(DATA / "dinero_small.toml")
    assert not cpu.timing_capable
    res = sim.simulate(recs, cpu, engine=engine)
    assert res["cycles"] is None
    assert res["multiline_accesses"] == 25
    for lv in res["levels"]:
        w = want[lv["name"]]
        assert lv["accesses"] == w["fetches"], lv["name"]
        assert lv["misses"] == w["misses"], lv["name"]
        assert lv["fetches"] * 64 == w["bytes_from"], lv["name"]
        assert lv["writebacks"] * 64 == w["bytes_to"], lv["name"]
    l1, l2 = res["levels"]
    # read/write split of DineroIV's "Demand Misses" row
    assert l1["by_kind"]["load"]["misses"] == 754 and l1["by_kind"]["store"]["misses"] == 293
    assert l2["by_kind"]["writeback"]["accesses"] == 408
    assert l2["by_kind"]["writeback"]["misses"] == 14
    assert res["dram"] == {"reads": 586, "writes": 267}


def test_without_flush_writebacks_drop(golden_dir):
    """The golden README's figures without DineroIV's end-of-run flush: 381 and 43."""
    recs = _din_records(golden_dir / "small_mixed_trace.din")
    res = sim.simulate(recs, sim.load_cpu(DATA / "dinero_small.toml"), flush=False)
    assert [lv["writebacks"] for lv in res["levels"]] == [381, 43]
