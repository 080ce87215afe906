"""Ablation: one model parameter at a time over the seed workload pairs, beside native.

    kvsim ablate [--scale small|full] [--pairs keys,mget,...] [--rounds R] [--cpu local]
                 [--no-native] [--out FILE]

For each workload pair (a baseline and its prefetching variant, :data:`PAIRS`) it traces
both with c_ref (``kvsim trace``, with a warm-up prefix where the workload has one), and
simulates each trace on ``--cpu`` and on copies of it that change one thing
(:data:`SETTINGS`): the L1 miss buffers, the ROB, the DRAM latency and bandwidth, the page
size, the page-walk cost, its page-table reads and the walks in flight, the hardware
prefetchers (none, or one more: an L1 region prefetcher), the instruction-gap model (every
record's gap scaled). All CPUs of one trace
run in one pass (``sim.simulate_many``). Per setting it gives the predicted time per
operation of each side and the predicted speedup.

Natively, the same pair runs in interleaved rounds (baseline, variant, baseline, ...), each
one ``kvsim native ... --repeat 1`` timed by process CPU time (:mod:`kvsim.stats`, as
``python -m bench paired``): the native time per operation of each side (median, minimum,
bootstrap 95 % interval) and the paired speedup (median of the rounds' ratios with its
intervals, and the ratio of the minimums). The 1-minute load average is recorded per round.

Pairs carry a role: ``tuning`` pairs are the ones a model change may be judged on;
``held-back`` pairs are never used to choose a change and are reported apart, as the test
of whether a change generalises.

Writes ``results/ablation-<scale>.json`` (kvsim.provenance).

It is a study of the experiment framework: ``kvsim experiment run ablation [--scale
small|full] [--cpu CPU ...] -o DIR`` plans per pair one ``ablation-native`` cell and one
``ablation-predict`` cell per CPU (every setting); ``kvsim ablate`` computes the same cells
(:func:`kvsim.experiments.cells.run_cell`) and writes the result file.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from kvsim import provenance, traces
from kvsim.experiments import (
    cells,
    warm_check,  # noqa: F401 - the studies before this one register first
)
from kvsim.experiments import pairs as _catalogue
from kvsim.experiments.framework import Experiment, Table, register
from kvsim.sim.config import ConfigError, CpuConfig, Prefetcher, load_cpu


def _side(v: dict) -> str | dict:
    """A side as the ablation names it: a variant name, or a dict of options (a layout)."""
    return v["variant"] if set(v) == {"variant"} else dict(v)


def pair_table() -> dict[str, dict[str, Any]]:
    """name -> workload, base, variant, options, traced ops, native ops, warm-up ops, role,
    seed: the catalogue's pairs with an ablation use (:mod:`kvsim.experiments.pairs`). Ops
    None: the workload's own (a whole keyspace for iterate/load). A side is a variant name,
    or a dict of options (a layout against another)."""
    return {n: {"workload": p.workload, "base": _side(p.side("a")),
                "variant": _side(p.side("b")), "options": dict(p.common),
                **{k: v for k, v in p.uses["ablation"].items() if k != "keys"},
                "seed": p.seed} for n, p in _catalogue.used_by("ablation").items()}


#: the ablation's pairs (:func:`pair_table`)
PAIRS: dict[str, dict[str, Any]] = pair_table()

#: keys per pair at each scale
SCALES = {s: {n: p.uses["ablation"]["keys"][s]
              for n, p in _catalogue.used_by("ablation").items()} for s in ("small", "full")}


def validation_pair(name: str, scale: str) -> tuple[dict[str, Any], int] | None:
    """A catalogue pair the validation runs (:mod:`kvsim.experiments.validation`) and the
    ablation does not: its entry as :data:`PAIRS` holds them and its keys, sized as the
    validation's row at ``scale`` (traced, native and warm-up operations) and traced as the
    row's simulated run is (its other c_ref options, ``trace_options``: a load's restarted
    pages), so that a validation row's diagnosis
    (:mod:`kvsim.experiments.validation_diagnosis`) can have an ablation of its own pair;
    None when no validation row runs ``name``."""
    from kvsim.experiments import validation

    for p in validation._pairs(scale):
        if validation._PAIR_OF_ROW.get(p["row"]) != name:
            continue
        ops = p["common"].get("ops")
        return ({"workload": p["workload"], "base": _side(p["a"]), "variant": _side(p["b"]),
                 "options": {k: v for k, v in p["common"].items()
                             if k not in ("keys", "ops", "seed")},
                 "trace_ops": p["sim"].get("ops", ops), "native_ops": ops,
                 "trace_options": {k: v for k, v in p["sim"].items() if k != "ops"},
                 "warmup_ops": p["warmup_ops"],
                 "role": "held-back" if p["held_back"] else "tuning",
                 "seed": _catalogue.get(name).seed}, int(p["common"]["keys"]))
    return None


@contextmanager
def validation_pairs(names: list[str], scale: str, instead: bool = False
                     ) -> Iterator[list[str]]:
    """Within the block, the names of ``names`` that a validation row runs are in
    :data:`PAIRS` and :data:`SCALES` as that row at ``scale`` (:func:`validation_pair`), so
    that :func:`predict_pair` and :func:`native_pair` run them: those that are not ablation
    pairs, and with ``instead`` the ablation's own pairs too (the row's sizes and options in
    place of the ablation's); yields the names changed."""
    saved: dict[str, tuple[dict[str, Any] | None, int | None]] = {}
    for x in names:
        got = validation_pair(x, scale) if instead or x not in PAIRS else None
        if got is not None and x not in saved:
            saved[x] = (PAIRS.get(x), SCALES[scale].get(x))
            PAIRS[x], SCALES[scale][x] = got
    try:
        yield list(saved)
    finally:
        for x, (pair, keys) in saved.items():
            if pair is None:
                del PAIRS[x], SCALES[scale][x]
            else:
                PAIRS[x], SCALES[scale][x] = pair, keys


def _meta_cpu(name: str) -> dict[str, Any] | None:
    """The CPU a CPU file was calibrated on (its ``[meta] cpu``:
    :func:`kvsim.experiments.validation_diagnosis.file_cpu`), which the validation's
    diagnosis matches an ablation to (a preset, or a file without it: None, no machine's)."""
    from kvsim.experiments import validation_diagnosis as vd

    p = Path(name)
    if p.suffix != ".toml" or not p.is_file():
        return None
    try:
        return vd.file_cpu(p.read_text())
    except OSError:
        return None


def _scale(x: float, f: float) -> int:
    return max(1, int(round(x * f)))


def _tlb(cpu: CpuConfig, **kw: Any) -> CpuConfig:
    return cpu.with_changes(tlb=replace(cpu.tlb, **kw)) if cpu.tlb is not None else cpu


def _l1(cpu: CpuConfig, **kw: Any) -> CpuConfig:
    return cpu.with_changes(caches=(replace(cpu.caches[0], **kw), *cpu.caches[1:]))


def _llc(cpu: CpuConfig, f: float) -> CpuConfig:
    last = cpu.caches[-1]
    sets = max(1, int(last.size * f) // (last.ways * last.line))
    size = 1 << (sets.bit_length() - 1)  # a power-of-two number of sets
    return cpu.with_changes(caches=(*cpu.caches[:-1],
                                    replace(last, size=size * last.ways * last.line)))


def _below_l1(cpu: CpuConfig, stream_degree: int | None = None, **flags: bool) -> CpuConfig:
    """The prefetchers below L1 with ``flags`` (arrival, stores, hits: sim/MODEL.md §4) and,
    given ``stream_degree``, the stream prefetchers' degree."""
    return cpu.with_changes(prefetchers=tuple(
        replace(p, **flags, **({"degree": stream_degree}
                               if stream_degree and p.kind == "stream" else {}))
        if p.level > 0 else p for p in cpu.prefetchers))


#: setting -> (what it changes, CPU change, gap scale of the trace)
SETTINGS: dict[str, tuple[str, Callable[[CpuConfig], CpuConfig], float]] = {
    "base": ("the CPU as given", lambda c: c, 1.0),
    "l1_mshrs_x0.5": ("half the L1 miss buffers",
                      lambda c: _l1(c, mshrs=_scale(c.caches[0].mshrs, 0.5)), 1.0),
    "l1_mshrs_x2": ("twice the L1 miss buffers",
                    lambda c: _l1(c, mshrs=_scale(c.caches[0].mshrs, 2)), 1.0),
    "rob_x0.5": ("half the ROB", lambda c: c.with_changes(rob=_scale(c.rob, 0.5)), 1.0),
    "rob_x2": ("twice the ROB", lambda c: c.with_changes(rob=_scale(c.rob, 2)), 1.0),
    "rob_x0.75": ("three quarters of the ROB",
                  lambda c: c.with_changes(rob=_scale(c.rob, 0.75)), 1.0),
    "rob_x0.25": ("a quarter of the ROB", lambda c: c.with_changes(rob=_scale(c.rob, 0.25)),
                  1.0),
    "no_scheduler": ("no scheduler limit (the ROB alone bounds the window; [core] scheduler "
                     "unset)", lambda c: c.with_changes(scheduler=None), 1.0),
    "scheduler_64": ("a scheduler of 64 entries ([core] scheduler = 64: a record waiting for "
                     "its producer holds its gap there; about the reach of chainlap's `dep` "
                     "loop on AMD's Zen 3, 52-100 instructions, sim/VALIDATION.md finding 31)",
                     lambda c: c.with_changes(scheduler=64), 1.0),
    "dram_x0.75": ("DRAM latency x 0.75",
                   lambda c: c.with_changes(dram_latency_ns=c.dram_latency_ns * 0.75), 1.0),
    "dram_x1.25": ("DRAM latency x 1.25",
                   lambda c: c.with_changes(dram_latency_ns=c.dram_latency_ns * 1.25), 1.0),
    "dram_x1.5": ("DRAM latency x 1.5",
                  lambda c: c.with_changes(dram_latency_ns=c.dram_latency_ns * 1.5), 1.0),
    "dram_x2": ("DRAM latency x 2",
                lambda c: c.with_changes(dram_latency_ns=c.dram_latency_ns * 2), 1.0),
    "llc_x0.25": ("a quarter of the last level", lambda c: _llc(c, 0.25), 1.0),
    "llc_x0.25_dram_x2": ("a quarter of the last level and DRAM latency x 2 (a guest's memory "
                          "under its neighbours' load, sim/VALIDATION.md finding 11)",
                          lambda c: _llc(c, 0.25).with_changes(
                              dram_latency_ns=c.dram_latency_ns * 2), 1.0),
    "page_2m": ("2 MiB pages", lambda c: _tlb(c, page_size=2 * 1024 * 1024), 1.0),
    "walk_0": ("free page walks", lambda c: _tlb(c, walk_latency=0), 1.0),
    "walk_x2": ("page walks cost twice",
                lambda c: _tlb(c, walk_latency=2 * c.tlb.walk_latency if c.tlb else 0), 1.0),
    "walk_reads_0": ("walks of the fixed part alone (no page-table reads through the caches)",
                     lambda c: _tlb(c, walk_reads=0), 1.0),
    "walkers_unlimited": ("any number of page walks in flight (no walker limit)",
                          lambda c: _tlb(c, walkers=0), 1.0),
    "dram_bw_unlimited": ("no DRAM bandwidth limit",
                          lambda c: c.with_changes(dram_bandwidth_gbs=None), 1.0),
    "no_hw_prefetch": ("no hardware prefetchers", lambda c: c.with_changes(prefetchers=()),
                       1.0),
    "ipc_width": ("the core sustaining its width on work without misses (no [core] "
                  "sustained_ipc)", lambda c: c.with_changes(sustained_ipc=None), 1.0),
    "region_prefetch": ("an L1 region prefetcher added (AMD's fifth, no preset has it: a "
                        "footprint of nearby lines per PC, prefetch_region.c, degree 2, "
                        "64 keys)", lambda c: c.with_changes(
                            prefetchers=c.prefetchers + (Prefetcher(0, "region", 2, 64),)),
                        1.0),
    "region_miss_prefetch": ("the same, its trigger an L1 miss (region_miss)",
                             lambda c: c.with_changes(prefetchers=c.prefetchers + (
                                 Prefetcher(0, "region_miss", 2, 64),)), 1.0),
    "swpf_trains": ("software prefetches that miss their fill level train the hardware "
                    "prefetchers below it ([swprefetch] trains_prefetchers)",
                    lambda c: c.with_changes(swpf_trains=True), 1.0),
    "pf_arrival": ("the prefetchers below L1 issue when the request that trains them reaches "
                   "their level ([[prefetcher]] arrival)",
                   lambda c: _below_l1(c, arrival=True), 1.0),
    "pf_stores": ("stores train the prefetchers below L1 ([[prefetcher]] stores)",
                  lambda c: _below_l1(c, stores=True), 1.0),
    "pf_hits": ("the prefetchers below L1 train on hits as on misses ([[prefetcher]] hits)",
                lambda c: _below_l1(c, hits=True), 1.0),
    "pf_stream_queue": ("the three: the prefetchers below L1 trained by every load and store "
                        "that reaches them, issuing when it does (arrival, stores, hits)",
                        lambda c: _below_l1(c, arrival=True, stores=True, hits=True), 1.0),
    "pf_stream_queue_d16": ("the three, and the stream prefetchers' degree 16",
                            lambda c: _below_l1(c, arrival=True, stores=True, hits=True,
                                                stream_degree=16), 1.0),
    "pf_stream_queue_swpf_trains": ("the three, and software prefetches that miss their fill "
                                    "level training those prefetchers (pf_stream_queue and "
                                    "swpf_trains together)",
                                    lambda c: _below_l1(c, arrival=True, stores=True, hits=True
                                                        ).with_changes(swpf_trains=True), 1.0),
    "gap_x0.5": ("every record's instruction gap halved", lambda c: c, 0.5),
    "gap_x1.5": ("every record's instruction gap x 1.5", lambda c: c, 1.5),
}


class AblationError(Exception):
    """Bad input or a failed step: one line naming what and where."""


def _options(name: str, keys: int, ops: int | None, warmup: int | None,
             variant: str | dict) -> dict[str, Any]:
    p = PAIRS[name]
    o = {"keys": keys, **p["options"]}
    if isinstance(variant, dict):
        o.update(variant)
    else:
        o["variant"] = variant
    if ops is not None:
        o["ops"] = ops
    if warmup:
        o["warmup_ops"] = warmup
    return o


def _ops_of(header: dict, workload: str) -> int:
    w = header.get("workload", {})
    if workload in ("iterate", "load"):
        return int(w["keys"])
    return int(w["ops"])


def predict_pair(name: str, keys: int, cpu: CpuConfig, workdir: Path,
                 settings: list[str], log=lambda m: None) -> dict[str, Any]:
    """Predicted ns per operation of both sides of pair ``name`` under every setting; each
    side traced with the pair's ``trace_options`` too (a validation row's traced run, a
    load's restarted pages: :func:`validation_pair`)."""
    from kvsim import sim
    from kvsim.experiments import cref

    p = PAIRS[name]
    out: dict[str, Any] = {}
    for side in ("base", "variant"):
        v = p[side]
        slug = "-".join(f"{k}-{x}" for k, x in v.items()) if isinstance(v, dict) else v
        path = workdir / f"{name}-{slug}.kvt"
        log(f"{name}: trace {v}")
        cref.trace(p["workload"], str(path), {**_options(name, keys, p["trace_ops"],
                                                         p["warmup_ops"], v),
                                              **p.get("trace_options", {})})
        with traces.open(str(path)) as r:
            header = r.header
        ops = _ops_of(header, p["workload"])
        rec = traces.read_all(str(path))
        by_gap: dict[float, list[str]] = {}
        for s in settings:
            by_gap.setdefault(SETTINGS[s][2], []).append(s)
        res: dict[str, dict] = {}
        for g, names in by_gap.items():
            r2 = rec
            if g != 1.0:
                r2 = rec.copy()
                r2["gap"] = np.round(rec["gap"].astype(np.float64) * g).astype(np.uint32)
            cpus = [SETTINGS[s][1](cpu) for s in names]
            log(f"{name}: simulate {v} on {len(cpus)} setting(s)")
            for s, rs in zip(names, sim.simulate_many(r2, cpus, validate=False, header=header),
                             strict=True):
                t = rs["timing"]
                res[s] = {"ns_per_op": t["time_ns"] / ops, "mlp": t["mlp"],
                          "ipc": t["ipc"], "avg_l1_miss_cycles": t["avg_l1_miss_cycles"],
                          "instructions_per_op": rs["instructions"] / ops,
                          "stall_cycles_per_op": {k: x / ops for k, x in
                                                  t["stall_cycles"].items()},
                          "walks_per_op": (rs["tlb"] or {}).get("stlb_misses", 0) / ops,
                          "dram_reads_per_op": rs["dram"]["reads"] / ops}
        out[side] = {"variant": v, "ops": ops, "records": int(len(rec)), "settings": res}
        path.unlink()
    out["speedup"] = {s: out["base"]["settings"][s]["ns_per_op"]
                      / out["variant"]["settings"][s]["ns_per_op"] for s in settings}
    return out


def native_pair(name: str, keys: int, rounds: int, log=lambda m: None) -> dict[str, Any]:
    """Interleaved native rounds of both sides: ns per operation and the paired speedup."""
    from kvsim import stats
    from kvsim.experiments import cref

    p = PAIRS[name]
    t: dict[str, list[float]] = {"base": [], "variant": []}
    ops: dict[str, int] = {}
    load = []
    for r in range(rounds):
        for side in ("base", "variant"):
            res = cref.native(p["workload"], _options(name, keys, p["native_ops"], None,
                                                      p[side]), repeat=1)
            ops[side] = int(res["ops"])
            t[side].append(res["cpu_median_s"])
        load.append(os.getloadavg()[0])
        log(f"{name}: native round {r + 1}/{rounds}")
    out: dict[str, Any] = {"rounds": rounds, "load_average_1m": load}
    for side in ("base", "variant"):
        ns = [x * 1e9 / ops[side] for x in t[side]]
        ci = stats.bootstrap_ci95(ns)
        out[side] = {"variant": p[side], "ops": ops[side], "cpu_s": t[side],
                     "ns_per_op": {"median": statistics.median(ns), "min": min(ns),
                                   "bootstrap_ci95": list(ci) if ci else None}}
    out["speedup"] = stats.paired_speedup(t["base"], t["variant"])
    return out


def native_spec(name: str, keys: int, rounds: int) -> dict[str, Any]:
    """The ``ablation-native`` cell of pair ``name`` (:func:`native_pair`)."""
    return {"experiment": NAME, "kind": "ablation-native", "pair": name, "keys": keys,
            "rounds": rounds, "definition": PAIRS[name],
            "params": {"pair": name, "role": PAIRS[name]["role"]}}


def predict_spec(name: str, keys: int, cpu: str, settings: list[str]) -> dict[str, Any]:
    """The ``ablation-predict`` cell of pair ``name`` on ``cpu`` (:func:`predict_pair`):
    every setting in one cell, one trace per side."""
    from kvsim.experiments.micro import _cpu_digest

    return {"experiment": NAME, "kind": "ablation-predict", "pair": name, "keys": keys,
            "cpu": cpu, "cpu_digest": _cpu_digest(cpu), "settings": list(settings),
            "definition": PAIRS[name],
            "params": {"pair": name, "role": PAIRS[name]["role"]}}


def _native_cell(spec: dict[str, Any]) -> dict[str, Any]:
    return {"native": json.dumps(native_pair(spec["pair"], spec["keys"], spec["rounds"]))}


def _predict_cell(spec: dict[str, Any]) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="kvsim-ablate-") as td:
        out = predict_pair(spec["pair"], spec["keys"], load_cpu(spec["cpu"]), Path(td),
                           spec["settings"])
    return {"predicted": json.dumps(out)}


cells.register_kind("ablation-native", _native_cell, counts_as="native", module="ablation")
cells.register_kind("ablation-predict", _predict_cell, counts_as="sim", module="ablation")


def run(cpu: CpuConfig, pairs: list[str], scale: str, rounds: int, native: bool,
        settings: list[str], log=lambda m: None, cpu_name: str | None = None
        ) -> dict[str, Any]:
    """Every pair natively (unless not ``native``) and predicted on ``cpu`` under every
    setting: the study's cells (:func:`native_spec`, :func:`predict_spec`) computed by
    :func:`kvsim.experiments.cells.run_cell` (a CPU given as a configuration rather than by
    name, ``cpu_name`` None, is predicted directly)."""
    rows = []
    with tempfile.TemporaryDirectory(prefix="kvsim-ablate-") as td:
        for name in pairs:
            keys = SCALES[scale][name]
            row: dict[str, Any] = {"pair": name, "role": PAIRS[name]["role"],
                                   "seed": PAIRS[name]["seed"], "workload":
                                   PAIRS[name]["workload"], "keys": keys,
                                   "options": PAIRS[name]["options"]}
            if native:
                log(f"{name}: native, {rounds} rounds")
                m = cells.run_cell(native_spec(name, keys, rounds))["metrics"]
                row["native"] = json.loads(m["native"])
            if cpu_name is None:
                row["predicted"] = predict_pair(name, keys, cpu, Path(td), settings, log)
            else:
                log(f"{name}: predict on {len(settings)} setting(s)")
                m = cells.run_cell(predict_spec(name, keys, cpu_name, settings))["metrics"]
                row["predicted"] = json.loads(m["predicted"])
            if native:
                nat = row["native"]["speedup"]["median"]
                row["predicted_over_native"] = {s: v / nat for s, v in
                                                row["predicted"]["speedup"].items()}
            rows.append(row)
    return {"rows": rows}


# --- the framework's study -------------------------------------------------------------------

NAME = "ablation"
#: native rounds per pair of ``kvsim experiment run ablation`` (the command's default)
ROUNDS = 5


def _cells(scale: str, cpus: list[str]) -> list[dict[str, Any]]:
    """Every pair of the catalogue with an ablation use natively (5 interleaved rounds) and
    predicted on every CPU under every setting (one model parameter changed at a time); the
    pairs' keys per scale are the catalogue's."""
    out = []
    for name in PAIRS:
        keys = SCALES[scale][name]
        out.append(native_spec(name, keys, ROUNDS))
        out += [predict_spec(name, keys, cpu, list(SETTINGS)) for cpu in cpus]
    return out


def _tables(rows: pd.DataFrame) -> list[Table]:
    kind = rows["kind"] if "kind" in rows else pd.Series(dtype=str)
    native = {r["pair"]: json.loads(r["native"])["speedup"]
              for _, r in rows[kind == "ablation-native"].iterrows()}
    lines: dict[tuple[str, str], dict[str, Any]] = {}
    for _, r in rows[kind == "ablation-predict"].iterrows():
        pred = json.loads(r["predicted"])
        for s, v in pred["speedup"].items():
            nat = native.get(r["pair"])
            line = lines.setdefault((r["pair"], s), {
                "pair": r["pair"], "role": r["role"], "setting": s, "seed": None,
                "native": f"{nat['median']:.2f}x" if nat else "",
                "native_value": nat["median"] if nat else None})
            line[f"sim:{r['cpu']}"] = v
    frame = pd.DataFrame([lines[k] for k in sorted(lines)])
    return [Table(NAME, "Ablation: the predicted speedup with one model parameter changed",
                  frame, "speedup (x: baseline / variant)",
                  note="setting: what is changed (base: the CPU as given); native: median of "
                       "the interleaved rounds' ratios; held-back pairs are never used to "
                       "choose a change. No upstream figure (seed) column: the pairs' seeds "
                       "are in results/ablation-*.json.")]


register(Experiment(NAME, "Ablation: one model parameter at a time over the seed pairs",
                    "the seed pairs (kvsim.experiments.pairs)", _cells, _tables))


def main(argv: list[str] | None = None, prog: str = "kvsim ablate") -> int:
    ap = argparse.ArgumentParser(prog=prog, description=__doc__.splitlines()[0])
    ap.add_argument("--cpu", default="local")
    ap.add_argument("--scale", choices=sorted(SCALES), default="small")
    ap.add_argument("--pairs", default=",".join(PAIRS),
                    help="the ablation's pairs, or a catalogue pair a validation row runs "
                         "(sized as that row at --scale)")
    ap.add_argument("--settings", default=",".join(SETTINGS))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--no-native", action="store_true", help="predictions only")
    ap.add_argument("--out", default=None)
    a = ap.parse_args(argv)
    pairs = [x.strip() for x in a.pairs.split(",") if x.strip()]
    settings = [x.strip() for x in a.settings.split(",") if x.strip()]
    with validation_pairs(pairs, a.scale):  # for this command only
        return _main(a, pairs, settings, prog, argv)


def _main(a: argparse.Namespace, pairs: list[str], settings: list[str], prog: str,
          argv: list[str] | None) -> int:
    try:
        bad = [x for x in pairs if x not in PAIRS] + [x for x in settings if x not in SETTINGS]
        if bad:
            raise AblationError(f"unknown pair or setting {bad[0]!r} (pairs: {', '.join(PAIRS)};"
                                f" settings: {', '.join(SETTINGS)})")
        if "base" not in settings:
            settings.insert(0, "base")
        if a.rounds < 2:
            raise AblationError("--rounds: at least 2")
        cpu = load_cpu(a.cpu)
        if not cpu.timing_capable:
            raise AblationError(f"--cpu {a.cpu}: no timing (freq, core or DRAM missing)")
        res = run(cpu, pairs, a.scale, a.rounds, not a.no_native, settings,
                  log=lambda m: print(f"ablate: {m}", file=sys.stderr, flush=True),
                  cpu_name=a.cpu)
    except (AblationError, ConfigError, OSError) as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        return 2
    except Exception as e:  # c_ref's one-line errors (CrefError) and trace errors
        if type(e).__name__ not in ("CrefError", "TraceError", "ArtifactMissing"):
            raise
        print(f"{prog}: error: {e}", file=sys.stderr)
        return 2
    from kvsim.experiments.micro import cpu_figures

    payload = {"command": f"{prog} " + " ".join(argv if argv is not None else sys.argv[1:]),
               "scale": a.scale, "settings": {s: SETTINGS[s][0] for s in settings},
               "cpu": {**cpu_figures(cpu), "meta_cpu": _meta_cpu(a.cpu)}, **res}
    for role in ("tuning", "held-back"):
        for row in (x for x in res["rows"] if x["role"] == role):
            pr = row["predicted"]
            nat = row.get("native")
            head = f"[{role}] {row['pair']}:"
            if nat:
                head += (f" native {nat['base']['ns_per_op']['median']:.1f} -> "
                         f"{nat['variant']['ns_per_op']['median']:.1f} ns/op, speedup "
                         f"{nat['speedup']['median']:.2f}x (min-based "
                         f"{nat['speedup']['from_minimums']:.2f}x)")
            print(head)
            width = max(map(len, pr["speedup"]))
            for s in pr["speedup"]:
                b, v = pr["base"]["settings"][s], pr["variant"]["settings"][s]
                print(f"  {s:<{width}} {b['ns_per_op']:8.1f} -> {v['ns_per_op']:8.1f} ns/op  "
                      f"{pr['speedup'][s]:.2f}x  mlp {b['mlp']:.2f} -> {v['mlp']:.2f}")
    out = a.out or provenance.default_result_path(f"ablation-{a.scale}.json")
    return provenance.publish(prog, out, payload)


if __name__ == "__main__":
    sys.exit(main())
