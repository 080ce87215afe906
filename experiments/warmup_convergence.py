"""Predicted speedups that do not depend on the trace's length: warm-up convergence.

(The warm-up itself, by rule for traces without markers, is :mod:`kvsim.sim.warmup`; this
study checks that a c_ref trace's own warm-up prefix is long enough.)

c_ref traces skip the setup, so without a warm-up the measured phase starts with cold
caches and TLBs and the predicted speedup moves with the number of measured operations.
For pipelined GET (``naive`` -> ``lookahead``) and MGET (``none`` -> ``batch``) this traces
the baseline and the variant at N and at 4N measured operations, each after the same
``--warmup-ops W`` prefix (traced between warm-up markers, simulated, not counted), and
also without a warm-up; simulates each on ``--cpu``; and writes
``results/warmup-convergence.json`` (kvsim.provenance) with the four predicted speedups per
workload and whether the warmed N and 4N ones agree within ``--tolerance`` (2 %).

It is a study of the experiment framework: ``kvsim experiment run warmup_convergence
[--scale small|full] [--cpu CPU ...] -o DIR`` plans the same runs as sim cells (resumed,
on local workers or Dask, Parquet rows, a table of predicted speedups per pair and run with
the convergence beside them); ``small`` is a tenth of the sizes. The command below computes
the same cells (:func:`kvsim.experiments.cells.run_sim_group`, one trace each) on one CPU
at any ``--scale`` and writes the result file:

    python -m kvsim.experiments.warmup_convergence [--cpu local] [--scale 1.0]

(``c_ref/bench/warmup.py`` is its old spelling, same options.) Runtime: a few minutes at
scale 1 (the sizes are in _USES, times --scale).

How much warm-up is enough depends on the CPU: the measured phase is warm once the warm-up
has touched more distinct lines than the last-level cache holds, so a larger LLC (relative
to the keyspace) needs a longer one (``--warmup-ops W`` overrides every workload's).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import pandas as pd

from kvsim import provenance
from kvsim.experiments import (
    cells,
    cref,
    pairs,
    studies_upstream,  # noqa: F401 - the seed studies register first
)
from kvsim.experiments.framework import Experiment, Plot, Table, register, sim_cell

NAME = "warmup_convergence"

#: name -> (pair of the catalogue, keys, N measured ops, W warm-up ops)
_USES: dict[str, tuple[str, int, int, int]] = {
    "pipeline-get": ("get", 1_000_000, 20000, 50000),
    "mget": ("mget", 1_000_000, 1000, 2000),
}

#: the runs of a pair: label, multiple of N measured operations, warmed
RUNS = (("N", 1, True), ("4N", 4, True), ("N cold", 1, False), ("4N cold", 4, False))


def _options(name: str) -> dict[str, Any]:
    """The c_ref options both sides of ``name`` share (its pair's, at its keys)."""
    pair, keys, _, _ = _USES[name]
    return {"keys": keys, **pairs.get(pair).common}


def _workload(name: str) -> tuple[str, str, str, list[str], int, int]:
    p = pairs.get(_USES[name][0])
    return (p.workload, p.side("a")["variant"], p.side("b")["variant"],
            cref.workload_args(_options(name)), *_USES[name][2:])


#: name -> (workload, baseline, variant, options, N measured ops, W warm-up ops)
WORKLOADS: dict[str, tuple[str, str, str, list[str], int, int]] = {
    n: _workload(n) for n in _USES}


def specs(cpu: str, scale: float = 1.0, warmup_ops: int | None = None, cold: bool = True,
          only: list[str] | None = None, keys_scale: float = 1.0) -> list[dict[str, Any]]:
    """The sim cells of the study on ``cpu``: per pair and run, the baseline and the variant
    (``scale`` multiplies N and W, ``keys_scale`` the keys; ``warmup_ops``: W for every
    pair)."""
    out = []
    for name in only or sorted(WORKLOADS):
        workload, base, var, _, n, w = WORKLOADS[name]
        n, w = max(1, int(n * scale)), max(1, int(w * scale))
        if warmup_ops is not None:
            w = warmup_ops
        opts = _options(name)
        opts["keys"] = max(1000, int(opts["keys"] * keys_scale))
        for label, times, warmed in RUNS:
            if not (warmed or cold):
                continue
            for side, variant in (("baseline", base), ("variant", var)):
                options = {**opts, "variant": variant, "ops": times * n,
                           "warmup_ops": w if warmed else 0}
                out.append(sim_cell(NAME, workload, options, cpu,
                                    {"pair": name, "run": label, "side": side},
                                    f"{name} {label}", side == "baseline"))
    return out


def _cells(scale: str, cpus: list[str]) -> list[dict[str, Any]]:
    """Pipelined GET and MGET, baseline and variant, at N and 4N measured operations after
    the same warm-up prefix and without one; ``small``: a tenth of the sizes."""
    f = 1.0 if scale == "full" else 0.1
    return [c for cpu in cpus for c in specs(cpu, scale=f, keys_scale=f)]


def _side(m: dict[str, Any]) -> dict[str, Any]:
    return {k: m[k] for k in ("cycles", "records", "warmup_records", "instructions")}


def convergence(runs: dict[str, dict[str, Any]], tolerance: float) -> dict[str, Any]:
    """The relative difference of the N and 4N speedups (warmed; cold where run) and
    whether the warmed ones agree within ``tolerance``."""
    s1, s4 = runs["N"]["speedup"], runs["4N"]["speedup"]
    out: dict[str, Any] = {"relative_difference": round(abs(s4 - s1) / s4, 4)}
    out["converged"] = out["relative_difference"] <= tolerance
    if "N cold" in runs and "4N cold" in runs:
        c1, c4 = runs["N cold"]["speedup"], runs["4N cold"]["speedup"]
        out["relative_difference_cold"] = round(abs(c4 - c1) / c4, 4)
    return out


def _tables(rows: pd.DataFrame) -> list[Table]:
    sim = rows[(rows.kind == "sim") & (rows.side == "variant")] if len(rows) else rows
    lines = []
    for (pair, cpu), g in sim.groupby(["pair", "cpu"], sort=True):
        runs = {r["run"]: {"speedup": round(r["speedup"], 4)} for _, r in g.iterrows()}
        line: dict[str, Any] = {"pair": pair, "cpu": cpu, "seed": None}
        line.update({f"{label} speedup": runs.get(label, {}).get("speedup")
                     for label, _, _ in RUNS})
        if "N" in runs and "4N" in runs:
            line.update(convergence(runs, 0.02))
        lines.append(line)
    frame = pd.DataFrame(lines)
    return [Table(NAME, "Predicted speedup at N and 4N measured operations, warmed and cold",
                  frame, "speedup (x: baseline cycles / variant cycles of the measured phase)",
                  Plot(x="pair", ylabel="predicted speedup (x)", xlabel="pair",
                       series=[f"{label} speedup" for label, _, _ in RUNS]),
                  note="warmed: the same --warmup-ops W before N and before 4N measured "
                       "operations; converged: the two agree within 2 %; no upstream "
                       "figure (seed) exists for a trace-length check.")]


register(Experiment(NAME, "Warm-up convergence: predictions independent of the trace's length",
                    "none (a check of the traces' warm-up)", _cells, _tables))


def main(argv: list[str] | None = None,
         prog: str = "python -m kvsim.experiments.warmup_convergence") -> int:
    ap = argparse.ArgumentParser(prog=prog, description=__doc__.splitlines()[0])
    ap.add_argument("--cpu", default="local")
    ap.add_argument("--scale", type=float, default=1.0,
                    help="Multiply N and W (default 1).")
    ap.add_argument("--tolerance", type=float, default=0.02)
    ap.add_argument("--only", action="append", choices=sorted(WORKLOADS))
    ap.add_argument("--warmup-ops", type=int, default=None,
                    help="W for every workload (default: each one's, times --scale).")
    ap.add_argument("--no-cold", action="store_true", help="Skip the runs without warm-up.")
    ap.add_argument("--out", type=Path, default=None,
                    help="Result file (default results/warmup-convergence.json).")
    a = ap.parse_args(argv)
    if a.scale <= 0:
        ap.error(f"--scale: must be > 0, got {a.scale}")
    out = a.out
    if out is None:
        rd = provenance.results_dir()
        if rd is None:
            ap.error("no results/ directory (not a checkout): pass --out")
        out = rd / "warmup-convergence.json"
    rows: dict[str, dict[str, Any]] = {}
    todo = specs(a.cpu, a.scale, a.warmup_ops, not a.no_cold, a.only)
    for base, var in zip(todo[::2], todo[1::2], strict=True):
        name, label = base["params"]["pair"], base["params"]["run"]
        workload, b_name, v_name, opts, _, _ = WORKLOADS[name]
        try:
            b, v = (_side(cells.run_sim_group([s])[0]["metrics"]) for s in (base, var))
        except cref.CrefError as exc:
            print(f"{prog}: error: {name} {label}: {exc}", file=sys.stderr)
            return 2
        ops, warm = base["options"]["ops"], base["options"]["warmup_ops"]
        row = rows.setdefault(name, {"workload": workload, "baseline": b_name,
                                     "variant": v_name, "options": opts, "n_ops": ops,
                                     "warmup_ops": warm, "runs": {}})
        row["runs"][label] = {"ops": ops, "warmup_ops": warm, "baseline": b, "variant": v,
                              "speedup": round(b["cycles"] / v["cycles"], 4)}
        print(f"{name} {label:<8} ops {ops:>7} warm-up {warm:>6}: predicted "
              f"{row['runs'][label]['speedup']:.4f}x", flush=True)
    ok = True
    for row in rows.values():
        row.update(convergence(row["runs"], a.tolerance))
        ok &= row["converged"]
    payload = {"cpu_preset": a.cpu, "scale": a.scale, "tolerance": a.tolerance,
               "rule": "the same --warmup-ops W before N and before 4N measured operations; "
                       "speedup = baseline cycles / variant cycles of the measured phase",
               "all_converged": ok, "workloads": rows}
    path = provenance.write_result(out, payload)
    print(f"all within {a.tolerance:.0%}: {ok} -> {path}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
