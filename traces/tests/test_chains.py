"""Dependency-chain depths (traces.chains) against a record-by-record walk."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from kvsim import traces


def _records(seed: int, n: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    r = np.zeros(n, dtype=traces.RECORD_DTYPE)
    r["kind"] = rng.choice([traces.KIND_LOAD] * 4 + [traces.KIND_STORE, traces.KIND_MARKER], n)
    r["size"] = np.where(r["kind"] == traces.KIND_MARKER, 0, 8)
    r["flags"] = np.where(r["kind"] == traces.KIND_MARKER, traces.MARK_COMMAND, 0)
    # dep: often the previous few records, sometimes past the start of the array
    r["dep"] = np.where(rng.random(n) < 0.6, rng.integers(1, 6, n), 0)
    r["dep"][r["kind"] == traces.KIND_MARKER] = 0  # a marker has no producer
    return r


def _walk(r: np.ndarray) -> list[int]:
    depth = []
    for i in range(r.size):
        if r["kind"][i] == traces.KIND_MARKER:
            depth.append(0)
            continue
        d, j = 1, i
        while r["dep"][j] and j - int(r["dep"][j]) >= 0:
            j -= int(r["dep"][j])
            d += 1
        depth.append(d)
    return depth


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(0, 300))
def test_depths_match_a_walk(seed: int, n: int) -> None:
    r = _records(seed, n)
    assert traces.chain_depths(r).tolist() == _walk(r)


def test_a_hand_made_chain() -> None:
    r = np.zeros(6, dtype=traces.RECORD_DTYPE)
    r["kind"] = [traces.KIND_MARKER, traces.KIND_LOAD, traces.KIND_LOAD, traces.KIND_LOAD,
                 traces.KIND_MARKER, traces.KIND_LOAD]
    r["flags"][[0, 4]] = traces.MARK_COMMAND
    r["dep"] = [0, 0, 1, 1, 0, 4]  # 1 <- 2 <- 3, and 5 <- 1 (across the command marker)
    assert traces.chain_depths(r).tolist() == [0, 1, 2, 3, 0, 2]
    df = traces.command_chains(r)
    assert df["command"].tolist() == [0, 1]
    assert df["max_depth"].tolist() == [3, 2]
    assert df["loads"].tolist() == [3, 1]
    assert df["dependent_loads"].tolist() == [2, 1]
    assert df["chains"].tolist() == [1, 0]
    assert df["mean_depth"].tolist() == [2.0, 2.0]


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 300))
def test_command_table_sums_to_the_records(seed: int, n: int) -> None:
    r = _records(seed, n)
    df = traces.command_chains(r)
    depth = np.array(_walk(r))
    loads = r["kind"] == traces.KIND_LOAD
    assert df["records"].sum() == n
    assert df["loads"].sum() == loads.sum()
    assert df["max_depth"].max() == (depth[loads].max() if loads.any() else 0)
