"""The experiments' tables in ns per key, each side converted from its own unit.

rdb_load: time per key without prefetching, what prefetch-after-key saves and what cluster
mode adds. mset_batch: MSET over existing keys, time per key and what each prefetch saves.
The seed's from its load times or throughputs, the native pairs' sides, and each preset's
simulated cycles at the preset's clock."""

from __future__ import annotations

import pandas as pd
import pytest

from kvsim import sim
from kvsim.experiments import framework, seeds


def _rows() -> pd.DataFrame:
    rows = []
    for cpu, off, on in (("epyc-7713", 500.0, 1100.0), ("xeon-8488c", 320.0, 640.0)):
        for cluster, cyc in ((False, off), (True, on)):
            for variant, scale in (("none", 1.0), ("prefetch-after-key", 0.9)):
                rows.append({"kind": "sim", "cpu": cpu, "value_size": 8, "cluster": cluster,
                             "variant": variant, "cycles_per_op": cyc * scale,
                             "demand_misses_per_op_LLC": cyc / 300,
                             "operation_unit": "key loaded", "speedup": 1 / scale,
                             "keys": 2_000_000})
    rows.append({"kind": "native", "value_size": 8, "cluster": False, "keys": 16_000_000,
                 "variant": "prefetch-after-key", "a_ns_per_op": 400.0, "b_ns_per_op": 380.0,
                 "speedup": 1.05})
    return pd.DataFrame(rows)


def _cluster_table(rows: pd.DataFrame) -> pd.DataFrame:
    tables = {t.name: t for t in framework.get("rdb_load").tables(rows)}
    return tables["rdb_load_ns"].frame.set_index("time")


def test_added_time_is_the_cycle_difference_at_the_preset_clock():
    t = _cluster_table(_rows())
    for cpu, off, on in (("epyc-7713", 500.0, 1100.0), ("xeon-8488c", 320.0, 640.0)):
        f = sim.load_cpu(cpu).freq_ghz
        assert t.loc["without prefetching", f"sim:{cpu}"] == pytest.approx(off / f)
        assert t.loc["added by cluster mode", f"sim:{cpu}"] == pytest.approx((on - off) / f)
        assert t.loc["saved by prefetch-after-key", f"sim:{cpu}"] == pytest.approx(
            0.1 * off / f)


def test_seed_column_is_the_pr_load_time_per_key():
    t = _cluster_table(_rows())
    keys, off_s = seeds.RDB_LOAD_SECONDS[(False, 8)]
    _, on_s = seeds.RDB_LOAD_SECONDS[(True, 8)]
    assert t.loc["without prefetching", "seed"] == pytest.approx(off_s / keys * 1e9)
    assert t.loc["added by cluster mode", "seed"] == pytest.approx((on_s - off_s) / keys * 1e9)
    pct = seeds.rdb_load("prefetch-after-key", False, 8)
    assert t.loc["saved by prefetch-after-key", "seed"] == pytest.approx(
        off_s / keys * 1e9 * pct / 100)
    # Valkey #2311: cluster mode costs 8-19 % more load time at every size it measured
    for v in (8, 32, 256, 4096, 16384):
        off, on = seeds.rdb_load_ns_per_key(False, v), seeds.rdb_load_ns_per_key(True, v)
        assert off is not None and on is not None and 1.0 < on / off < 1.2


def test_native_added_time_needs_both_modes():
    rows = _rows()
    t = _cluster_table(rows)
    assert t.loc["without prefetching", "native"] == pytest.approx(400.0)
    assert t.loc["saved by prefetch-after-key", "native"] == pytest.approx(20.0)
    assert pd.isna(t.loc["added by cluster mode", "native"])
    on = rows.iloc[[-1]].assign(cluster=True, a_ns_per_op=1000.0)
    t = _cluster_table(pd.concat([rows, on], ignore_index=True))
    assert t.loc["added by cluster mode", "native"] == pytest.approx(600.0)


def _mset_rows() -> pd.DataFrame:
    rows = []
    for variant, cyc in (("none", 9000.0), ("redis-15043", 8000.0), ("chunk-15133", 8500.0)):
        rows.append({"kind": "sim", "cpu": "xeon-8488c", "command": "MSET random", "depth": 1,
                     "keys": 1_000_000, "value_size": 10, "keys_per_command": 10,
                     "variant": variant, "cycles_per_op": cyc, "cycles": cyc * 100,
                     "group": "g", "baseline": variant == "none", "speedup": 9000.0 / cyc})
    rows.append({"kind": "native", "command": "MSET random", "depth": 1, "keys": 1_000_000,
                 "value_size": 10, "keys_per_command": 10, "variant": "redis-15043",
                 "a_ns_per_op": 5000.0, "b_ns_per_op": 4500.0, "speedup": 5000 / 4500})
    return pd.DataFrame(rows)


def test_mset_time_table_converts_each_side_to_ns_per_key():
    tables = {t.name: t for t in framework.get("mset_batch").tables(_mset_rows())}
    t = tables["mset_batch_ns"].frame.set_index("time")
    f = sim.load_cpu("xeon-8488c").freq_ghz
    assert t.loc["without prefetching", "sim:xeon-8488c"] == pytest.approx(9000 / f / 10)
    assert t.loc["saved by redis-15043", "sim:xeon-8488c"] == pytest.approx(1000 / f / 10)
    assert t.loc["saved by chunk-15133", "sim:xeon-8488c"] == pytest.approx(500 / f / 10)
    assert t.loc["without prefetching", "native"] == pytest.approx(500.0)
    assert t.loc["saved by redis-15043", "native"] == pytest.approx(50.0)
    assert pd.isna(t.loc["saved by chunk-15133", "native"])
    base, saved = seeds.mset_15043_ns_per_key(10, 10, 1_000_000)
    assert t.loc["without prefetching", "seed"] == pytest.approx(base)
    assert t.loc["saved by redis-15043", "seed"] == pytest.approx(saved)
    # the seed's throughputs give back its reported percentages
    for (kpc, v, k), runs in seeds.MSET_15043_OPS.items():
        pct = sum((b / a - 1) * 100 for a, b in runs) / len(runs)
        assert pct == pytest.approx(seeds.mset_15043(kpc, v, k), abs=0.15)


def test_mset_command_column_comes_from_the_pr_profile():
    """The 50-key, 100 B, 10M-key rows carry msetGenericCommand's part of the seed's time per
    key (its share of the profiled samples); no other configuration has one."""
    rows = _mset_rows()
    rows[["keys", "value_size", "keys_per_command"]] = (10_000_000, 100, 50)
    t = {x.name: x for x in framework.get("mset_batch").tables(rows)}["mset_batch_ns"]
    t = t.frame.set_index("time")
    p = seeds.MSET_15043_PROFILE
    before = p["share"][0] * 1e9 / p["ops"][0] / 50
    after = p["share"][1] * 1e9 / p["ops"][1] / 50
    assert t.loc["without prefetching", "seed_command"] == pytest.approx(before)
    assert t.loc["saved by redis-15043", "seed_command"] == pytest.approx(before - after)
    assert pd.isna(t.loc["saved by chunk-15133", "seed_command"])
    # the command's part is below the whole time per key; it saves more than the throughput
    assert before < t.loc["without prefetching", "seed"]
    assert before - after > t.loc["saved by redis-15043", "seed"]
    # the shares and the samples agree: both runs' windows hold the same samples
    total = [s / sh for s, sh in zip(p["samples"], p["share"], strict=True)]
    assert total[0] == pytest.approx(total[1], rel=0.005)
    assert seeds.mset_15043_command_speedup() == pytest.approx(
        (0.765 / 66_949) / (0.337 / 68_850), rel=0.005)
    other = {x.name: x for x in framework.get("mset_batch").tables(_mset_rows())}
    assert pd.isna(other["mset_batch_ns"].frame.set_index("time")
                   .loc["without prefetching", "seed_command"])
