"""``python -m bench cell-cost``: what one simulated cell of an experiment costs, by phase.

A sim cell group (the cells of one trace, :func:`kvsim.experiments.cells.run_sim_group`)
traces its workload with c_ref and simulates the trace on every CPU of the group in one
pass. For one group per experiment (by default the first of its plan: ``--study``), this
times, in process CPU seconds (children's for c_ref, the process's own for Python and the
engine) and wall seconds:

* ``trace``: the cell's ``cref.trace`` (c_ref's traced run, setup included, writing raw
  chunks; this process recompressing them into the .kvt), with ``--cref-before`` also the
  same with another c_ref binary, interleaved (A B, B A, ...), and whether the two .kvt
  files are the same bytes;
* ``trace_no_setup``: c_ref alone with ``--warm-setup none`` (the setup runs untraced), so
  ``trace - trace_no_setup`` is what carrying the setup into the trace costs c_ref;
* ``native``: ``kvsim-cref native --repeat 1`` (setup and one measured run, untraced);
* ``decode``: reading the .kvt into one record array;
* ``engine``: per CPU, the warm-up prefix alone (records up to WARMUP_END) and the whole
  trace (``sim.simulate`` on the array): the measured phase costs the difference;
* ``simulate_many``: the cell's own call (every CPU in one pass from the file).

And, from the experiment's plan at the scale, without running it: its traces, and how many
distinct setups they trace (``cref.setup_key``: the options but the variants'), checked on
the measured group by tracing a second variant of the same setup and comparing the two
warm-up prefixes. Then the first ``--group-traces`` traces of that setup both ways: each
traced alone (``--cref-before``'s c_ref if given) and simulated whole, and
``cells.run_setup_group`` (one c_ref run for all, their warm-up prefix simulated once),
whether both give the same bytes and the same metrics; from these, the CPU seconds per cell
and the study's sim phase in hours on ``--cores`` cores, before and after (:func:`project`).

Scratch files go to ``--work`` (a temporary folder by default, removed at the end).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from kvsim import provenance

RESULT_NAME = "cell-cost-45.json"
PROG = "python -m bench cell-cost"


def _cpu() -> tuple[float, float]:
    me = resource.getrusage(resource.RUSAGE_SELF)
    ch = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime, ch.ru_utime + ch.ru_stime


class _Clock:
    """Wall, own CPU and children's CPU seconds of a ``with`` block."""

    def __enter__(self) -> _Clock:
        self.t0, (self.s0, self.c0) = time.perf_counter(), _cpu()
        return self

    def __exit__(self, *exc: object) -> None:
        s1, c1 = _cpu()
        self.wall = time.perf_counter() - self.t0
        self.self_cpu, self.child_cpu = s1 - self.s0, c1 - self.c0

    def row(self) -> dict[str, float]:
        return {"wall_s": round(self.wall, 3), "self_cpu_s": round(self.self_cpu, 3),
                "child_cpu_s": round(self.child_cpu, 3)}


def plan_summary(name: str, scale: str, cpus: list[str] | None) -> dict[str, Any]:
    """The experiment's sim groups at ``scale``: cells, traces, distinct setups, and the
    first group's specs (the measured one) and a second variant of its setup (or None)."""
    from kvsim.experiments import cells as C
    from kvsim.experiments import cref, runner

    def setup_key(spec: dict) -> str:
        return cref.setup_key(spec["workload"], spec["options"])

    specs = runner.plan([name], scale, cpus, ["sim"])[name]
    groups: dict[str, list[dict]] = {}
    for s in specs:
        groups.setdefault(C.trace_key(s), []).append(s)
    first = next(iter(groups.values()))
    setups = {setup_key(g[0]) for g in groups.values()}
    twin = next((g[0] for g in groups.values()
                 if g[0]["options"] != first[0]["options"]
                 and setup_key(g[0]) == setup_key(first[0])), None)
    same_setup = [g for g in groups.values() if setup_key(g[0]) == setup_key(first[0])]
    return {"cells": len(specs), "traces": len(groups), "setups": len(setups),
            "group": first, "twin": twin, "setup_group": same_setup}


def _trace(workload: str, path: Path, options: dict, binary: str | None) -> dict[str, Any]:
    from kvsim.experiments import cref

    old = os.environ.get("KVSIM_CREF_BIN")
    if binary:
        os.environ["KVSIM_CREF_BIN"] = binary
    try:
        with _Clock() as c:
            cref.trace(workload, path, options)
    finally:
        if binary:
            if old is None:
                os.environ.pop("KVSIM_CREF_BIN", None)
            else:
                os.environ["KVSIM_CREF_BIN"] = old
    return {**c.row(), "bytes": path.stat().st_size}


def _cref_alone(args: list[str]) -> dict[str, Any]:
    from kvsim.experiments import cref

    with _Clock() as c:
        proc = subprocess.run([str(cref.binary()), *args], capture_output=True, check=False)
    if proc.returncode != 0:
        msg = proc.stderr.decode(errors="replace").strip().splitlines()
        raise RuntimeError(msg[-1] if msg else f"kvsim-cref exited {proc.returncode}")
    return {**c.row(), "stdout": proc.stdout}


def _read_array(path: Path) -> tuple[np.ndarray, dict]:
    from kvsim import traces

    with traces.open(path) as r:
        header = dict(r.header)
        parts = [np.array(chunk, copy=True) for chunk in r]
    return np.concatenate(parts) if parts else np.zeros(0, traces.RECORD_DTYPE), header


def _warmup_end(arr: np.ndarray) -> int:
    """Records of the warm-up prefix (up to and including its WARMUP_END), 0 without."""
    from kvsim import traces

    idx = np.flatnonzero((arr["kind"] == traces.KIND_MARKER)
                         & (arr["flags"] == traces.MARK_WARMUP_END))
    return int(idx[0]) + 1 if len(idx) else 0


def measure_setup_group(groups: list[list[dict]], work: Path, before: str | None,
                        log) -> dict[str, Any]:
    """The traces of one setup (``groups``: their sim cell groups) both ways: the cells'
    way before setups were shared (each traced alone, with ``before``'s c_ref if given, and
    simulated whole on its cells' CPUs in one pass) and ``cells.run_setup_group`` (one
    c_ref run for all, the warm-up prefix simulated once); whether the traces are the same
    bytes and every cell's metrics the same."""
    from kvsim.experiments import cells as C

    workload = groups[0][0]["workload"]
    alone, sims, metrics = [], [], []
    for i, g in enumerate(groups):
        p = work / f"alone-{i}.kvt"
        alone.append(_trace(workload, p, g[0]["options"], before))
        with _Clock() as c:
            by_cpu = C._simulate_many(p, list(dict.fromkeys(s["cpu"] for s in g)))
        sims.append(c.row())
        metrics.append([by_cpu[s["cpu"]] for s in g])
    shared = work / "shared"
    with _Clock() as c:
        together = C.run_setup_group(groups, str(shared))
    many = c.row()
    same = all(provenance.file_sha256(work / f"alone-{i}.kvt")
               == provenance.file_sha256(shared / f"{C.trace_key(g[0])}.kvt")
               for i, g in enumerate(groups))
    same_metrics = [[r["metrics"] for r in res] for res in together] == metrics
    shutil.rmtree(shared)
    for i in range(len(groups)):
        (work / f"alone-{i}.kvt").unlink()
    n = len(groups)
    cpu = lambda r: r["self_cpu_s"] + r["child_cpu_s"]  # noqa: E731
    alone_cpu = sum(map(cpu, alone)) + sum(map(cpu, sims))
    many_cpu = cpu(many)
    out = {"traces": n, "variants": [g[0]["options"] for g in groups],
           "alone_trace": alone, "alone_simulate_many": sims, "setup_group": many,
           "same_bytes": same, "same_metrics": same_metrics,
           "cpu_s_alone": round(alone_cpu, 3), "cpu_s_together": round(many_cpu, 3),
           # what a setup costs (c_ref's setup, its prefix simulated): paid n times alone,
           # once together
           "setup_cpu_s": round((alone_cpu - many_cpu) / (n - 1), 3) if n > 1 else None,
           "cells": sum(len(g) for g in groups)}
    log(f"  setup group of {n} traces: alone {alone_cpu:.1f} s CPU (traced and simulated), "
        f"together {many_cpu:.1f} s; same bytes: {same}, same metrics: {same_metrics}")
    return out


def measure(name: str, scale: str, cpus: list[str] | None, work: Path,
            before: str | None, rounds: int, log, group_traces: int = 3) -> dict[str, Any]:
    from kvsim import sim
    from kvsim.experiments import cells as C
    from kvsim.experiments import cref

    plan = plan_summary(name, scale, cpus)
    group = plan["group"]
    spec = group[0]
    workload, options = spec["workload"], spec["options"]
    group_cpus = list(dict.fromkeys(s["cpu"] for s in group))
    out: dict[str, Any] = {"experiment": name, "scale": scale, "workload": workload,
                           "options": options, "cpus": group_cpus,
                           "plan": {k: plan[k] for k in ("cells", "traces", "setups")}}
    log(f"{name}: {plan['traces']} traces ({plan['cells']} cells), {plan['setups']} distinct "
        f"setups; measuring {workload} {json.dumps(options)}")
    path = work / f"{name}.kvt"
    sides = [("after", None)] + ([("before", before)] if before else [])
    runs: dict[str, list[dict]] = {s: [] for s, _ in sides}
    for r in range(rounds):  # interleaved: A B, B A, ...
        order = sides if r % 2 == 0 else sides[::-1]
        for side, binary in order:
            p = work / f"{name}-{side}.kvt"
            runs[side].append(_trace(workload, p, options, binary))
            log(f"  trace ({side}): {runs[side][-1]}")
    out["trace"] = runs
    if before:
        out["trace_same_bytes"] = provenance.file_sha256(work / f"{name}-after.kvt") == \
            provenance.file_sha256(work / f"{name}-before.kvt")
        (work / f"{name}-before.kvt").unlink()
    (work / f"{name}-after.kvt").rename(path)
    args = cref.workload_args(options)
    out["trace_no_setup"] = {k: v for k, v in _cref_alone(
        ["trace", workload, "-o", "/dev/null", *args, "--warm-setup", "none"]).items()
        if k != "stdout"}
    log(f"  trace without the setup carried: {out['trace_no_setup']}")
    nat = _cref_alone(["native", workload, *args, "--repeat", "1", "--json"])
    measured = json.loads(nat.pop("stdout"))["cpu_runs_s"][0]
    out["native"] = {**nat, "measured_cpu_s": round(measured, 3),
                     "setup_cpu_s": round(nat["child_cpu_s"] - measured, 3)}
    log(f"  native: {out['native']}")
    with _Clock() as c:
        arr, header = _read_array(path)
    out["decode"] = c.row()
    w = _warmup_end(arr)
    out["records"], out["warmup_records"] = int(len(arr)), w
    out["setup"] = header.get("setup")
    log(f"  decode: {out['decode']}; {len(arr)} records, {w} of them the warm-up prefix")
    engine = {}
    for cpu in group_cpus:
        with _Clock() as cw:
            sim.simulate(arr[:w], cpu)
        with _Clock() as cf:
            sim.simulate(arr, cpu)
        engine[cpu] = {"warmup_cpu_s": round(cw.self_cpu, 3),
                       "whole_cpu_s": round(cf.self_cpu, 3),
                       "measured_cpu_s": round(cf.self_cpu - cw.self_cpu, 3),
                       "records_per_s": round(len(arr) / cf.self_cpu) if cf.self_cpu else None}
        log(f"  engine {cpu}: {engine[cpu]}")
    out["engine"] = engine
    del arr
    with _Clock() as c:
        C._simulate_many(path, group_cpus)
    out["simulate_many"] = c.row()
    log(f"  simulate_many ({len(group_cpus)} CPUs, one pass): {out['simulate_many']}")
    if plan["twin"] is not None:
        twin = plan["twin"]
        tp = work / f"{name}-twin.kvt"
        cref.trace(twin["workload"], tp, twin["options"])
        a, _ = _read_array(path)
        b, _ = _read_array(tp)
        wa, wb = _warmup_end(a), _warmup_end(b)
        out["setup_shared_check"] = {
            "twin_options": twin["options"],
            "same_warmup_prefix": bool(wa == wb and np.array_equal(a[:wa], b[:wb])),
        }
        del a, b
        tp.unlink()
        log(f"  {out['setup_shared_check']}")
    path.unlink()
    out["setup_group"] = measure_setup_group(plan["setup_group"][:group_traces], work,
                                             before, log)
    t = out["trace"]["after"][0]
    group_cpu = t["self_cpu_s"] + t["child_cpu_s"] + out["simulate_many"]["self_cpu_s"]
    out["group_cpu_s"] = round(group_cpu, 3)
    out["group_wall_s"] = round(t["wall_s"] + out["simulate_many"]["wall_s"], 3)
    return out


def project(r: dict[str, Any], cores: int) -> dict[str, Any]:
    """A study's sim phase from its measured setup group: before, every trace pays its
    setup (traced alone, simulated whole); after, each setup of the plan is paid once and
    each trace its own part (the together run less one setup, shared out). CPU seconds
    over ``cores``."""
    g, plan = r["setup_group"], r["plan"]
    n = g["traces"]
    before = g["cpu_s_alone"] / n
    setup = g["setup_cpu_s"] or 0.0
    own = (g["cpu_s_together"] - setup) / n
    after_total = plan["setups"] * setup + plan["traces"] * own
    before_total = plan["traces"] * before
    per_cell = plan["cells"] / plan["traces"]
    return {"cpu_s_per_trace_before": round(before, 2),
            "cpu_s_per_trace_after": round(after_total / plan["traces"], 2),
            "cpu_s_per_cell_before": round(before / per_cell, 2),
            "cpu_s_per_cell_after": round(after_total / plan["traces"] / per_cell, 2),
            "hours_before": round(before_total / cores / 3600, 3),
            "hours_after": round(after_total / cores / 3600, 3), "cores": cores}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    ap.add_argument("--study", action="append", default=None,
                    help="experiment (repeatable; default: multikey_window, hash, "
                         "pipeline_mget)")
    ap.add_argument("--scale", default="full", choices=("small", "full"))
    ap.add_argument("--cpu", action="append", default=None,
                    help="CPU presets of the plan (default: the experiments' own)")
    ap.add_argument("--cref-before", default=None,
                    help="another kvsim-cref binary to trace with, interleaved (before/after)")
    ap.add_argument("--rounds", type=int, default=1, help="traced runs per side (default 1)")
    ap.add_argument("--cores", type=int, default=os.cpu_count() or 1,
                    help="cores the projection divides the CPU time by (default: this "
                         "machine's)")
    ap.add_argument("--group-traces", type=int, default=3,
                    help="traces of the first setup measured both ways (default 3)")
    ap.add_argument("--work", default=None, help="scratch folder (default: a temporary one)")
    provenance.add_out_option(ap, RESULT_NAME)
    a = ap.parse_args(argv)
    out = provenance.out_path(a.out, RESULT_NAME)
    if provenance.out_dir_missing(out):
        return 1
    if a.cref_before and not Path(a.cref_before).is_file():
        print(f"{PROG}: error: --cref-before {a.cref_before}: no such file", file=sys.stderr)
        return 1
    if a.rounds < 1 or a.cores < 1 or a.group_traces < 2:
        print(f"{PROG}: error: --rounds and --cores must be at least 1, --group-traces 2",
              file=sys.stderr)
        return 2
    studies = a.study or ["multikey_window", "hash", "pipeline_mget"]
    work = Path(a.work) if a.work else Path(tempfile.mkdtemp(prefix="kvsim-cell-cost-"))
    work.mkdir(parents=True, exist_ok=True)
    results = []
    try:
        for name in studies:
            try:
                r = measure(name, a.scale, a.cpu, work, a.cref_before, a.rounds,
                            lambda m: print(m, flush=True), a.group_traces)
            except ValueError as exc:
                print(f"{PROG}: error: --study {name}: {exc}", file=sys.stderr)
                return 1
            r["projection"] = project(r, a.cores)
            log = r["projection"]
            print(f"{name}: per cell {log['cpu_s_per_cell_before']} -> "
                  f"{log['cpu_s_per_cell_after']} CPU s; sim phase {log['hours_before']} -> "
                  f"{log['hours_after']} h on {a.cores} cores", flush=True)
            results.append(r)
    finally:
        if not a.work:
            shutil.rmtree(work, ignore_errors=True)
    return provenance.publish(PROG, out, {
        "benchmark": "cell-cost", "scale": a.scale, "cores": a.cores,
        "cref_before": a.cref_before is not None, "rounds": a.rounds,
        "note": "CPU seconds: c_ref's are the children's, Python's and the engine's this "
                "process's own. projection: the setup group's CPU seconds per trace (c_ref "
                "traced alone, or together with its setup once per setup of the plan; each "
                "trace simulated on its cells' CPUs) over the plan's traces and setups, "
                "divided by the cores",
        "studies": results})


if __name__ == "__main__":
    sys.exit(main())
