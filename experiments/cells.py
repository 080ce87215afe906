"""Cells: the unit of work of an experiment, each a pure function of its spec.

A cell's spec is a JSON-able dict; its identity is the hash of that dict (:func:`cell_id`),
so a result is identified by its spec and the commit that computed it. Three kinds:

``sim``
    Trace one c_ref workload configuration (``workload``, ``options``, the variant among
    them) and simulate it on one CPU preset (``cpu``). Cells that differ only in their CPU
    share one trace (:func:`trace_key`): :func:`run_sim_group` traces it once and simulates
    it on all their CPUs in one pass over its records (``sim.simulate_many``). Metrics:
    cycles, instructions, operations (COMMAND markers), cycles and demand misses per
    operation, demand misses per level role (L1, L2, LLC), MLP (average L1 misses in
    flight: the miss-buffer occupancy), software prefetches issued / useful / late and the
    late share, the top stall cause.
    The speedup over the comparison group's baseline is derived when the experiment's rows
    are assembled (:mod:`kvsim.experiments.runner`), from the baseline cell's cycles.
``native``
    Time two configurations ``a`` (baseline) and ``b`` of one workload on this machine:
    ``warmup_rounds`` discarded rounds, then ``rounds`` interleaved rounds (A B, A B, ...),
    one ``kvsim-cref native --repeat 1`` process per run, timed by its process CPU time.
    Metrics: the median of the rounds' ratios A/B with its bootstrap and sign-test 95 %
    intervals, the ratio of the minimums, ``verdict`` ("faster", "slower" or "within
    noise": the bootstrap interval includes 1.0, or fewer than ``timing.MIN_ROUNDS``
    rounds ran), both sides' median and minimum CPU seconds, arena bytes and keys.
``valkey``
    The real Valkey server (``kvsim.experiments.valkey.run_valkey_cell``, imported only
    when such a cell runs): its ``valkey`` dict is passed on, its metrics returned as they
    come.

:func:`run_cell` runs any of them and returns ``{"metrics": {...}, "seconds": wall}``.
"""

from __future__ import annotations

import hashlib
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

__all__ = ["CellSkipped", "KIND_BASE", "cell_id", "register_kind", "run_cell", "run_sim_group",
           "trace_key"]

#: Cell kinds an experiment module adds (:func:`register_kind`): kind -> function(spec)
#: returning the metrics.
_EXTRA_KINDS: dict[str, Any] = {}
#: Every kind -> the built-in kind it counts as for ``kvsim experiment run --only``.
KIND_BASE: dict[str, str] = {"sim": "sim", "native": "native", "valkey": "valkey"}


def register_kind(kind: str, run: Any, counts_as: str) -> None:
    """Add cell kind ``kind`` computed by ``run(spec) -> metrics``; it runs in the serial
    phase (after the parallel sim cells, in the order the experiment lists it) and is
    selected by ``--only counts_as``."""
    if kind in KIND_BASE:
        raise ValueError(f"cell kind {kind!r} is registered twice")
    _EXTRA_KINDS[kind] = run
    KIND_BASE[kind] = counts_as


class CellSkipped(RuntimeError):
    """The cell cannot run on this machine (a missing server or tool); the message says
    what to install. Nothing is stored, so a later run tries it again."""


def _canonical(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"))


def cell_id(spec: dict) -> str:
    """16 hex digits identifying ``spec`` (its canonical JSON's SHA-256)."""
    return hashlib.sha256(_canonical(spec).encode()).hexdigest()[:16]


def trace_key(spec: dict) -> str:
    """Identity of a sim cell's trace: the workload and options (not the CPU)."""
    return hashlib.sha256(_canonical([spec["workload"], spec["options"]]).encode()
                          ).hexdigest()[:16]


def run_cell(spec: dict, trace_dir: str | None = None) -> dict[str, Any]:
    """Compute one cell. ``trace_dir``: where sim cells may keep and reuse their traces
    (shared by the cells that simulate one trace on several CPUs); None traces into a
    temporary directory."""
    t0 = time.perf_counter()
    kind = spec.get("kind")
    if kind == "sim":
        metrics = _sim(spec, trace_dir)
    elif kind == "native":
        metrics = _native(spec)
    elif kind == "valkey":
        metrics = _valkey(spec)
    elif kind in _EXTRA_KINDS or _load_kinds(kind):
        metrics = _EXTRA_KINDS[kind](spec)
    else:
        raise ValueError(f"cell {cell_id(spec)}: unknown kind {kind!r}")
    return {"metrics": metrics, "seconds": time.perf_counter() - t0}


def _load_kinds(kind: str) -> bool:
    from kvsim.experiments import framework

    framework.names()  # imports the experiment modules, which register their kinds
    return kind in _EXTRA_KINDS


# --- sim ---------------------------------------------------------------------------------------

def _sim(spec: dict, trace_dir: str | None) -> dict[str, Any]:
    return run_sim_group([spec], trace_dir)[0]["metrics"]


def run_sim_group(specs: list[dict], trace_dir: str | None = None) -> list[dict[str, Any]]:
    """Compute sim cells that share one trace (the same :func:`trace_key`; ValueError
    otherwise): the workload is traced once (reused from ``trace_dir`` when it is there;
    None: a temporary directory) and simulated on every cell's CPU in one pass
    (``sim.simulate_many``: each chunk decoded once, the CPUs side by side on the cores).
    Returns one ``{"metrics", "seconds"}`` per spec, in order, each the same as
    :func:`run_cell` gives for that spec alone; ``seconds`` is the group's wall time shared
    equally among its cells."""
    from kvsim.experiments import cref

    if not specs:
        return []
    key = trace_key(specs[0])
    if any(s.get("kind") != "sim" or trace_key(s) != key for s in specs):
        raise ValueError("run_sim_group: the cells must be sim cells of one trace")
    t0 = time.perf_counter()
    cpus = list(dict.fromkeys(s["cpu"] for s in specs))  # each CPU simulated once
    if trace_dir is not None:
        Path(trace_dir).mkdir(parents=True, exist_ok=True)
        path = Path(trace_dir) / f"{key}.kvt"
        if not path.exists():
            cref.trace(specs[0]["workload"], path, specs[0]["options"])  # written atomically
        by_cpu = _simulate_many(path, cpus)
    else:
        with tempfile.TemporaryDirectory(prefix="kvsim-cell-") as tmp:
            path = Path(tmp) / "t.kvt"
            cref.trace(specs[0]["workload"], path, specs[0]["options"])
            by_cpu = _simulate_many(path, cpus)
    share = (time.perf_counter() - t0) / len(specs)
    return [{"metrics": by_cpu[s["cpu"]], "seconds": share} for s in specs]


def _simulate_many(path: Path, cpus: list[str]) -> dict[str, dict[str, Any]]:
    from kvsim import sim, traces

    with traces.open(path) as reader:
        results = sim.simulate_many(reader, cpus)
    return {cpu: _metrics(res) for cpu, res in zip(cpus, results, strict=True)}


def _metrics(res: dict) -> dict[str, Any]:
    from kvsim.experiments import summary

    ops = res["commands"]["count"] or 0
    t = res.get("timing") or {}
    m: dict[str, Any] = {
        "records": res["records"], "instructions": res["instructions"], "operations": ops,
        "cycles": res["cycles"], "ipc": res["ipc"], "mlp": t.get("mlp"),
        "cycles_per_op": res["cycles"] / ops if ops and res["cycles"] is not None else None,
        "avg_l1_miss_cycles": t.get("avg_l1_miss_cycles"),
    }
    for lv in summary.level_rows(res):
        m[f"demand_misses_{lv['role']}"] = lv["demand_misses"]
        m[f"demand_misses_per_op_{lv['role']}"] = lv["demand_misses"] / ops if ops else None
        m[f"level_{lv['role']}"] = lv["name"]
    sw = summary.prefetch_totals(res)["software"]
    for k in ("issued", "useful", "late", "useless"):
        m[f"swpf_{k}"] = sw.get(k, 0)
    m["late_prefetch_share"] = sw.get("late", 0) / sw["issued"] if sw.get("issued") else None
    stalls = t.get("stall_cycles") or {}
    rob = {k: v for k, v in stalls.items() if k.startswith("rob_full:")}
    m["rob_full_cycles"] = sum(rob.values()) if rob else 0.0
    m["top_rob_stall"] = max(rob, key=rob.get) if rob else None
    by_tag = summary.demand_misses_by_tag(res)
    if by_tag:
        top = max(by_tag, key=lambda tag: (by_tag[tag][-1], tag))
        m["top_llc_miss_structure"] = top
    return m


# --- native ------------------------------------------------------------------------------------

def _native(spec: dict) -> dict[str, Any]:
    from kvsim.experiments import cref, timing

    workload = spec["workload"]
    sides = {"a": spec["a"], "b": spec["b"]}
    env = spec.get("env") or {}
    runs: dict[str, list[dict]] = {"a": [], "b": []}
    for r in range(spec.get("warmup_rounds", 1) + spec["rounds"]):
        for side, opts in sides.items():
            res = cref.native(workload, opts, repeat=1, env=env)
            if r >= spec.get("warmup_rounds", 1):
                runs[side].append(res)
    cpu = {s: [x["cpu_runs_s"][0] for x in runs[s]] for s in runs}
    sp = timing.paired_speedup(cpu["a"], cpu["b"])
    boot = sp["bootstrap_ci95"]
    if boot is None or len(cpu["a"]) < timing.MIN_ROUNDS or boot[0] <= 1.0 <= boot[1]:
        verdict = "within noise"
    else:
        verdict = "faster" if boot[0] > 1.0 else "slower"
    m: dict[str, Any] = {
        "rounds": len(cpu["a"]), "warmup_rounds": spec.get("warmup_rounds", 1),
        "speedup": sp["median"],
        "speedup_ci95_low": boot[0] if boot else None,
        "speedup_ci95_high": boot[1] if boot else None,
        "speedup_sign_ci95_low": sp["ci95"][0] if sp["ci95"] else None,
        "speedup_sign_ci95_high": sp["ci95"][1] if sp["ci95"] else None,
        "speedup_from_minimums": sp["from_minimums"],
        "verdict": verdict,
        "round_ratios": json.dumps(sp["ratios"]),
        "a_cpu_runs_s": json.dumps(cpu["a"]), "b_cpu_runs_s": json.dumps(cpu["b"]),
    }
    for s in ("a", "b"):
        last = runs[s][-1]
        m[f"{s}_cpu_median_s"] = statistics.median(cpu[s])
        m[f"{s}_cpu_min_s"] = min(cpu[s])
        m[f"{s}_ops"] = last.get("ops")
        m[f"{s}_keys"] = last.get("keys")
        m[f"{s}_memory_bytes"] = last.get("memory_bytes")
        m[f"{s}_bytes_per_key"] = (last["memory_bytes"] / last["keys"]
                                   if last.get("keys") and last.get("memory_bytes") else None)
        m[f"{s}_ns_per_op"] = (1e9 * m[f"{s}_cpu_median_s"] / last["ops"]
                               if last.get("ops") else None)
        m[f"{s}_reply_crc32"] = last.get("reply_crc32")
    return m


# --- real Valkey -------------------------------------------------------------------------------

def _valkey(spec: dict) -> dict[str, Any]:
    try:
        from kvsim.experiments import valkey
    except ImportError as exc:  # the module or its dependency is absent from this install
        raise CellSkipped(f"the real Valkey cells need kvsim.experiments.valkey ({exc})"
                          ) from None
    try:
        out = valkey.run_valkey_cell(dict(spec["valkey"]))
    except Exception as exc:
        # no server binary or load generator: kvsim.experiments.valkey_server.ToolMissing,
        # whose message says what to install
        if type(exc).__name__ == "ToolMissing" or isinstance(exc, FileNotFoundError):
            raise CellSkipped(str(exc)) from None
        raise
    return {k: (json.dumps(v) if isinstance(v, list | dict) else v) for k, v in out.items()}
