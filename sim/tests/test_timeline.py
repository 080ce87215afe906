"""``simulate(..., timeline=(first, count))``: the engine's captured times equal the reference
simulator's, capturing changes no statistic, and the times obey the model's order."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sim_helpers import records
from test_differential import cpu_docs, lru_docs, traces_

from kvsim import sim, traces

SETTINGS = settings(max_examples=60, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


def _timed(doc: dict) -> dict:
    doc = dict(doc)
    doc.setdefault("freq_ghz", 2.0)
    doc.setdefault("core", {"width": 2, "rob": 16})
    doc.setdefault("dram", {"latency_ns": 60.0})
    return doc


def _without_timeline(res: dict) -> dict:
    return {k: v for k, v in res.items() if k not in ("timeline", "engine", "engine_threads")}


def _check(doc: dict, recs: np.ndarray, first: int, count: int) -> None:
    cpu = sim.parse_cpu(_timed(doc))
    # the engines on any record array, as the differential tests run them (not a trace's
    # record rules: validate=False)
    a = sim.simulate(recs, cpu, timeline=(first, count), validate=False)
    b = sim.simulate(recs, cpu, timeline=(first, count), engine="reference", validate=False)
    assert a["timeline"] == b["timeline"]
    plain = sim.simulate(recs, cpu, validate=False)
    assert _without_timeline(a) == _without_timeline(plain)
    window = recs[first:first + count]
    mem = np.flatnonzero(window["kind"] < traces.KIND_MARKER) + first
    assert [r["record"] for r in a["timeline"]] == mem.tolist()
    for r in a["timeline"]:
        assert r["dispatch"] <= r["issue"] <= r["complete"] and r["dispatch"] < r["retire"]
        if r["kind"] == "load":
            assert r["complete"] <= r["retire"]


@SETTINGS
@given(doc=cpu_docs(), recs=traces_(), first=st.integers(0, 260), count=st.integers(0, 260))
def test_timeline_equals_reference(doc, recs, first, count):
    _check(doc, recs, first, count)


@SETTINGS
@given(doc=lru_docs(), recs=traces_(), first=st.integers(0, 100), count=st.integers(0, 260))
def test_timeline_on_the_common_configuration(doc, recs, first, count):
    """The common configuration normally runs level by level on its own path; a timeline
    moves it to the record-by-record path, with the same statistics."""
    _check(doc, recs, first, count)


def test_a_pointer_chase_completes_one_after_another():
    doc = _timed({"name": "t", "cache": [{"name": "L1", "size": "1KiB", "ways": 2,
                                          "line": 64, "latency": 4, "mshrs": 8}]})
    chase = records([("load", 4096 * i, 8, 0, 1 if i else 0) for i in range(6)])
    rows = sim.simulate(chase, sim.parse_cpu(doc), timeline=(0, 6))["timeline"]
    for prev, cur in zip(rows, rows[1:], strict=False):
        assert cur["issue"] == prev["complete"]
        assert cur["level"] == "DRAM"
    free = records([("load", 4096 * i, 8) for i in range(6)])
    rows = sim.simulate(free, sim.parse_cpu(doc), timeline=(0, 6))["timeline"]
    assert max(r["issue"] for r in rows) < min(r["complete"] for r in rows)  # they overlap


def test_timeline_frame_and_bad_windows():
    doc = _timed({"name": "t", "cache": [{"name": "L1", "size": "1KiB", "ways": 2,
                                          "line": 64, "latency": 4}]})
    recs = records([("load", 64 * i, 8) for i in range(10)])
    res = sim.simulate(recs, sim.parse_cpu(doc), timeline=(2, 3))
    df = sim.dataframes(res, trace="t")["timeline"]
    assert list(df.columns[:2]) == ["cpu", "trace"] and df["record"].tolist() == [2, 3, 4]
    for bad in ((1,), (-1, 2), "0,3", (0.5, 2)):
        with pytest.raises(sim.ConfigError, match="timeline"):
            sim.simulate(recs, sim.parse_cpu(doc), timeline=bad)
    with pytest.raises(sim.ConfigError, match="timing"):
        sim.simulate(recs, sim.parse_cpu(doc), functional=True, timeline=(0, 3))
