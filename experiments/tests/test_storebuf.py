"""experiments/storebuf.py: the storemiss loop as records, its prediction beside native
samples, and the CPU file with a store buffer."""

from __future__ import annotations

import tomllib

import numpy as np
import pytest

from kvsim import sim, traces
from kvsim.experiments import storebuf


def test_records_follow_the_loop():
    size, k, n = 1 << 20, 4, 64
    rec = storebuf.records(size, k, True, n, native_accesses=1000)
    loop = rec[-n:]
    assert (loop["kind"] == traces.KIND_STORE).all()
    bits = (size // 64).bit_length() - 1
    first = 2 * 1000  # the first measured store loop's counter
    want = [storebuf.BASE + ((((first + j) * storebuf.G) % 2**64) >> (64 - bits)) * 64
            for j in range(n)]
    assert loop["addr"].tolist() == want
    assert loop["gap"].tolist() == [storebuf.BODY_GAP + storebuf.STEP_GAP * (j % k == 0)
                                    for j in range(n)]
    assert (loop["dep"] == 0).all() and (loop["size"] == 8).all()
    marks = np.flatnonzero(rec["kind"] == traces.KIND_MARKER)
    assert rec["flags"][marks].tolist() == [traces.MARK_WARMUP_BEGIN, traces.MARK_WARMUP_END]
    # the warm-up touches every line once (a buffer this small), then the load loop before
    assert (rec["kind"][marks[0] + 1: marks[1]] == traces.KIND_STORE).sum() == size // 64


def test_bad_sizes_and_steps():
    with pytest.raises(storebuf.StoreBufError, match="power of two"):
        storebuf.records(3000, 1, True, 8, 8)
    with pytest.raises(storebuf.StoreBufError, match="k:"):
        storebuf.records(4096, 3, True, 9, 9)


def test_compare_without_a_buffer_charges_stores_nothing():
    nat = {"accesses": 4096, "points": [
        {"size": 1 << 30, "k": 1, "store_ns": [30.0, 31.0, 32.0], "load_ns": [30.0, 31.0, 29.0]}]}
    rows = storebuf.compare(nat, "xeon-8488c", [0, 16], 2048)
    store = next(r for r in rows if r["kind"] == "store")
    free, held = store["predicted"]["0"], store["predicted"]["16"]
    assert held["ns"] > 5 * free["ns"]  # 1 GiB of random lines: the stores miss to DRAM
    assert store["native_ns"]["median"] == 31.0
    assert held["ratio"] == pytest.approx(held["ns"] / 31.0)


def test_cpufile_sets_the_buffer_and_its_source():
    text = """name = "t"
freq_ghz = 2.0

[core]
width = 4
rob = 64
src = { width = "V x", rob = "V y" }

[[cache]]
name = "L1D"
size = 4096
ways = 4
line = 64
latency = 4

[dram]
latency_ns = 80.0
"""
    out = storebuf.with_store_buffer(text, 48, "E a guess")
    doc = tomllib.loads(out)
    assert doc["core"]["store_buffer"] == 48
    assert doc["core"]["src"] == {"width": "V x", "rob": "V y", "store_buffer": "E a guess"}
    assert sim.parse_cpu(doc).store_buffer == 48
    with pytest.raises(storebuf.StoreBufError, match="without store_buffer"):
        storebuf.with_store_buffer(out, 48, "again")
