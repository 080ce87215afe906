"""What the compact form of the setup's warm-up changes in a prediction (traces/FORMAT.md,
"The setup's warm-up"): ``python -m kvsim.experiments.warm_setup [--scale small|full]``.

Every c_ref workload is traced three times, its setup carried as every access
(``--warm-setup accesses``: the literal setup), as every line it left behind in last-touch
order (``compact``, the default) and not at all (``none``), and each trace is simulated on
every preset in one pass. A row gives the predicted cycles per operation of the measured
phase and its ratio to the accesses form; the summary the largest deviation of ``compact``
(the bound: 1 %) and of ``none`` (what carrying the setup changes), and the traces' sizes.
Writes ``results/warm-setup-bound.json`` (``--out``).

The rows are the study's sim cells (:func:`specs`, computed by
:func:`kvsim.experiments.cells.run_sim_group`); ``kvsim experiment run warm_setup [--scale
small|full] [--cpu CPU ...] -o DIR`` runs the same cells through the framework (resumed,
Parquet rows, a table of each form's cycles over the accesses form's).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import pandas as pd

from kvsim import provenance
from kvsim.experiments import (
    cells,
    pipeline_demo,  # noqa: F401 - the studies before this one register first
)
from kvsim.experiments.framework import Experiment, Plot, Table, register, sim_cell

__all__ = ["MODES", "WORKLOADS", "measure", "run", "specs"]

#: The setup's forms, the reference (the setup's own accesses) first.
MODES = ("accesses", "compact", "none")

#: (label, workload, options) at full scale; small divides keys and ops by 10.
WORKLOADS = (
    ("KEYS", "iterate", {"keys": 200_000, "op": "keys"}),
    ("KEYS valkey", "iterate", {"keys": 200_000, "op": "keys", "variant": "valkey"}),
    ("SAVE", "iterate", {"keys": 200_000, "op": "save"}),
    ("pipelined GET", "pipeline", {"keys": 200_000, "ops": 20_000, "depth": 10}),
    ("MGET", "mget", {"keys": 200_000, "ops": 2_000, "keys_per_command": 50}),
    ("MSET random", "mset", {"keys": 200_000, "ops": 2_000, "mset_keys": "random"}),
    ("MSET new", "mset", {"keys": 50_000}),
    ("load", "load", {"keys": 200_000, "value_size": 32}),
)


def _scaled(opts: dict, scale: str) -> dict:
    if scale == "full":
        return dict(opts)
    return {k: (v // 10 if k in ("keys", "ops") else v) for k, v in opts.items()}


def _ops(metrics: dict, opts: dict) -> int:
    """Operations of the measured phase: its commands, or one per key (KEYS, SAVE, load)."""
    cmds = metrics["operations"] if metrics.get("operation_unit") == "command" else 0
    return int(cmds or 0) or int(opts["keys"])


def specs(label: str, workload: str, opts: dict, cpus: list[str]) -> list[dict]:
    """The sim cells of one row: the workload traced in every :data:`MODES` form (one trace
    each) on every CPU; the group's baseline is the setup's own accesses."""
    return [sim_cell(NAME, workload, {**opts, "warm_setup": mode}, cpu,
                     {"row": label, "mode": mode, "keys": opts["keys"]}, label,
                     mode == MODES[0])
            for mode in MODES for cpu in cpus]


def measure(workload: str, opts: dict, cpus: list[str], tmp: Path) -> list[dict]:
    """Trace ``workload`` in every :data:`MODES` form and simulate each on ``cpus`` in one
    pass (the study's sim cells, :func:`kvsim.experiments.cells.run_sim_group`); one row
    per (mode, cpu)."""
    rows = []
    todo = specs(workload, workload, opts, cpus)
    for mode in MODES:
        group = [c for c in todo if c["params"]["mode"] == mode]
        results = cells.run_sim_group(group, str(tmp))
        t = tmp / f"{cells.trace_key(group[0])}.kvt"
        for cell, res in zip(group, results, strict=True):
            m = res["metrics"]
            ops = _ops(m, opts)
            rows.append({"mode": mode, "cpu": cell["cpu"], "cycles": m["cycles"],
                         "operations": ops,
                         "cycles_per_op": m["cycles"] / ops if m["cycles"] else None,
                         "records": m["records"], "warmup_records": m["warmup_records"],
                         "trace_bytes": t.stat().st_size})
        t.unlink()
    ref = {r["cpu"]: r["cycles_per_op"] for r in rows if r["mode"] == "accesses"}
    for r in rows:
        r["ratio_to_accesses"] = (r["cycles_per_op"] / ref[r["cpu"]]
                                  if r["cycles_per_op"] and ref[r["cpu"]] else None)
    return rows


# --- the framework's study -------------------------------------------------------------------

NAME = "warm_setup"


def _cells(scale: str, cpus: list[str]) -> list[dict]:
    """Every row's workload traced with its setup as every access, in the compact form and
    not at all, simulated on every CPU; ``small``: a tenth of the keys and operations."""
    return [c for label, workload, opts in WORKLOADS
            for c in specs(label, workload, _scaled(opts, scale), cpus)]


def _tables(rows: pd.DataFrame) -> list[Table]:
    sim = rows[rows.kind == "sim"] if "kind" in rows else rows.iloc[0:0]
    lines = []
    for (label, cpu), g in sim.groupby(["row", "cpu"], sort=False):
        by = {r["mode"]: r for _, r in g.iterrows()}
        line = {"row": label, "cpu": cpu, "seed": None}
        for mode in MODES[1:]:  # the cycles over the accesses form's: 1 / the speedup
            sp = by[mode]["speedup"] if mode in by else None
            line[f"{mode}/accesses"] = 1 / sp if sp is not None and pd.notna(sp) else None
        lines.append(line)
    return [Table(NAME, "The setup's compact form against its own accesses", pd.DataFrame(lines),
                  "predicted cycles of the measured phase over those with the setup's own "
                  "accesses as the warm-up",
                  Plot(x="row", ylabel="cycles / accesses form's", xlabel="row",
                       series=[f"{m}/accesses" for m in MODES[1:]]),
                  note="the bound: compact within 1 %; none: what carrying the setup changes; "
                       "no upstream figure (seed) exists for a check of the traces' warm-up. "
                       "`python -m kvsim.experiments.warm_setup` writes the same cells with "
                       "the traces' sizes to results/warm-setup-bound.json.")]


register(Experiment(NAME, "The setup's warm-up: the compact form within 1 % of the accesses",
                    "none (a check of the traces' warm-up)", _cells, _tables))


def run(scale: str, cpus: list[str]) -> dict:
    rows = []
    with tempfile.TemporaryDirectory(prefix="kvsim-warm-setup-") as tmp:
        for label, workload, opts in WORKLOADS:
            o = _scaled(opts, scale)
            for r in measure(workload, o, cpus, Path(tmp)):
                rows.append({"row": label, "workload": workload, "options": o, **r})
                print(f"{label:14} {r['mode']:9} {r['cpu']:11} {r['cycles_per_op']:10.1f} "
                      f"cycles/op  x{r['ratio_to_accesses']:.4f}  {r['trace_bytes']:>11,} B",
                      flush=True)

    def worst(mode: str) -> float:
        return max(abs(r["ratio_to_accesses"] - 1) for r in rows if r["mode"] == mode)

    size = {m: sum(r["trace_bytes"] for r in rows if r["mode"] == m and r["cpu"] == cpus[0])
            for m in MODES}
    summary = {"max_abs_deviation_compact": worst("compact"),
               "max_abs_deviation_none": worst("none"), "bound": 0.01,
               "within_bound": worst("compact") <= 0.01, "trace_bytes": size}
    return {"scale": scale, "cpus": cpus, "modes": list(MODES), "rows": rows,
            "summary": summary,
            "note": "cycles per operation of the measured phase; ratio_to_accesses: against "
                    "the same workload traced with its setup's own accesses as the warm-up"}


def main(argv: list[str] | None = None) -> int:
    from kvsim import sim

    ap = argparse.ArgumentParser(prog="python -m kvsim.experiments.warm_setup",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--scale", choices=("small", "full"), default="full")
    ap.add_argument("--cpu", action="append", default=None,
                    help="preset or CPU file (repeatable; default: every preset)")
    provenance.add_out_option(ap, "warm-setup-bound.json")
    a = ap.parse_args(argv)
    cpus = a.cpu or [p for p in sim.preset_names() if p != "local"]
    payload = run(a.scale, cpus)
    s = payload["summary"]
    print(f"compact against accesses: largest deviation {s['max_abs_deviation_compact']:.4%} "
          f"(bound 1 %); none against accesses: {s['max_abs_deviation_none']:.2%}")
    out = provenance.out_path(a.out, "warm-setup-bound.json")
    return provenance.publish("warm_setup", out, payload)


if __name__ == "__main__":
    sys.exit(main())
