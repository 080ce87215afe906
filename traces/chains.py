"""Dependency chains: how deep each record's pointer chase is, and per command.

A record's ``dep`` names the earlier load whose value produced its address (FORMAT.md): the
records linked that way form chains, and a chain of d loads costs at least d memory latencies
one after the other, whatever the out-of-order window (the loads of different chains overlap).

The *depth* of a memory record is the number of records in its chain up to and including
itself: 1 without a ``dep``, else 1 + the depth of the record ``dep`` names. Markers have depth
0, and a ``dep`` that reaches before the first record of the array counts as none.

    depth = traces.chain_depths(records)
    traces.command_chains(records)        # one row per command: loads, max_depth, ...
"""

from __future__ import annotations

import numpy as np

from .format import KIND_LOAD, KIND_MARKER, MARK_COMMAND, RECORD_DTYPE

__all__ = ["chain_depths", "chain_parents", "command_chains"]


def chain_parents(records: np.ndarray) -> np.ndarray:
    """Index of each record's producer (``i - dep``), or -1 when it has none (no ``dep``, a
    marker, or a ``dep`` reaching before the array). int64."""
    r = np.asarray(records)
    n = r.size
    dep = r["dep"].astype(np.int64)
    src = np.arange(n, dtype=np.int64) - dep
    ok = (dep > 0) & (src >= 0) & (r["kind"] < KIND_MARKER)
    return np.where(ok, src, -1)


def chain_depths(records: np.ndarray) -> np.ndarray:
    """Depth of each record's dependency chain (module docstring); int64 per record.

    Pointer jumping: each step doubles the links followed, so the work is O(n log depth)
    whole-array operations.
    """
    r = np.asarray(records)
    if r.dtype != RECORD_DTYPE:
        raise TypeError(f"records must have dtype traces.RECORD_DTYPE, got {r.dtype}")
    n = r.size
    parent = chain_parents(r)
    is_mem = r["kind"] < KIND_MARKER
    idx = np.arange(n, dtype=np.int64)
    # jump[i]: the record reached from i by following 2^k links (itself at a root);
    # hops[i]: how many links that is
    jump = np.where(parent >= 0, parent, idx)
    hops = (parent >= 0).astype(np.int64)
    while n:
        nxt = jump[jump]
        if np.array_equal(nxt, jump):
            break
        hops = hops + hops[jump]  # a root's hops are 0
        jump = nxt
    return np.where(is_mem, hops + 1, 0)


def command_chains(records: np.ndarray, header: dict | None = None):
    """Per command (from one COMMAND marker to the next; records before the first are
    command -1), a pandas DataFrame: ``command``, ``first_record`` (its marker's index),
    ``records``, ``loads``, ``dependent_loads`` (loads with a producer), ``max_depth`` and
    ``mean_depth`` (over its loads; 0 without loads), ``chains`` (loads that start a chain:
    depth 1). ``header`` is accepted for symmetry with the other frames and unused.
    """
    import pandas as pd

    r = np.asarray(records)
    depth = chain_depths(r)
    is_cmd = (r["kind"] == KIND_MARKER) & (r["flags"] == MARK_COMMAND)
    cmd = np.cumsum(is_cmd) - 1
    is_load = r["kind"] == KIND_LOAD
    df = pd.DataFrame({"command": cmd, "record": np.arange(r.size), "load": is_load,
                       "dependent": is_load & (chain_parents(r) >= 0),
                       "depth": np.where(is_load, depth, 0),
                       "root": is_load & (depth == 1)})
    g = df.groupby("command", sort=True)
    out = pd.DataFrame({
        "first_record": g["record"].min(),
        "records": g.size(),
        "loads": g["load"].sum(),
        "dependent_loads": g["dependent"].sum(),
        "max_depth": g["depth"].max(),
        "chains": g["root"].sum(),
    })
    out["mean_depth"] = (g["depth"].sum() / out["loads"].where(out["loads"] > 0)).fillna(0.0)
    return out.reset_index()
