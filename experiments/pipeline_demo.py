"""The pipeline demo: does lookahead prefetching speed up pipelined GETs, and on which CPU?

``kvsim experiment pipeline-demo`` (``kvsim experiment demo`` is its old spelling; ``make
demo`` is another study, the headline one). Its result file keeps its name,
``demo.json``.

Traces a pipelined GET workload (256 B values, depth 16) twice with the c_ref keyspace, once
``naive`` (parse one command, execute it) and once ``lookahead`` (parse up to 16 queued
commands, interleave their lookups with software prefetches, then execute in order), simulates
both traces on several CPU presets, and reports misses per level (``L<n>_misses``: every
kind of access, prefetches and victim offers included; ``L<n>_demand_misses``: loads and
stores only), predicted cycles and the predicted speedup.

Natively, the same workload (more operations, so the timed phase is long enough) is run on
this machine with real prefetch instructions, in interleaved rounds (naive then lookahead,
then lookahead then naive, ...: the experiments' native cell), one kvsim-cref process per
run, each timed by its process CPU time; the measured speedup (median of the rounds' ratios
with a 95 % interval, and the ratio of the minimums; see :mod:`kvsim.stats`) is printed
beside the ``local`` preset's predicted one.

The rows come from the experiment framework's cells: each variant's trace simulated on every
CPU in sim cells (:func:`sim_specs`, ``cells.run_sim_group``) and the native rounds of its
native cell (:func:`native_spec`). It is also a registered study, ``kvsim experiment run
pipeline_demo [--scale small|full] [--cpu CPU ...] -o DIR`` (resumed, Parquet rows, a
speedup table and a table of misses per level; ``full`` is this command's defaults).

Inputs:  keys, ops, presets (defaults: two seed CPUs and ``local``), native rounds.
Outputs: ``OUT/demo.json`` (a result file: provenance, parameters, every printed figure),
         ``OUT/demo.csv``, ``OUT/demo.png`` and the two traces ``OUT/pipeline-*.kvt``; the
         table is printed. ``publish=True`` also copies demo.json and demo.png to
         ``results/`` of the checkout, where README.md's figures are rendered from.
Runtime: about a minute at the default scale (200k keys, 20k traced GETs, 9 rounds of 1M
         native GETs) on 2 cores.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import time
from pathlib import Path

import pandas as pd

from kvsim import provenance, sim, stats
from kvsim.experiments import (
    cells,
    cref,
    fidelity,  # noqa: F401 - the studies before this one register first
    framework,
    progress,
)

VARIANTS = ("naive", "lookahead")
DEFAULT_CPUS = ("xeon-8255c", "graviton3", "local")
DEFAULT_ROUNDS = 9
CLOCK = "process CPU time of the measured phase (CLOCK_PROCESS_CPUTIME_ID), one run per process"


def _default_cpus() -> list[str]:
    names = [p["name"] for p in sim.list_presets() if p["timing"]]  # `local` where timed
    chosen = [c for c in DEFAULT_CPUS if c in names]
    return chosen if len(chosen) >= 2 else names[:3]


def _options(params: dict, variant: str, batch: int) -> dict:
    return dict(params, variant=variant, batch=batch if variant == "lookahead" else None)


def sim_specs(params: dict, batch: int, cpus: list[str]) -> list[dict]:
    """The demo's sim cells: each variant's trace on every CPU (one group: the speedup is
    naive's cycles over the cell's)."""
    return [framework.sim_cell(NAME, "pipeline", _options(params, v, batch), cpu,
                               {"variant": v}, "pipeline", v == VARIANTS[0])
            for v in VARIANTS for cpu in cpus]


def native_spec(params: dict, batch: int, ops: int, rounds: int) -> dict:
    """The demo's native cell: both variants in ``rounds`` interleaved rounds (A B, then
    B A), no discarded round, one run per process."""
    sides = [_options(dict(params, ops=ops), v, batch) for v in VARIANTS]
    spec = framework.native_cell(NAME, "pipeline", *sides, rounds=rounds,
                                 params={"variant": VARIANTS[1]}, warmup_rounds=0)
    spec.pop("rounds_per_process", None)  # one run per process, each timed on its own
    return spec


def row_of(spec: dict, metrics: dict) -> dict:
    """A result row of the demo from a sim cell's metrics: misses per level by position
    (``L<n>_misses``: every kind, victim offers too; ``L<n>_demand_misses``: loads and
    stores), the last level being ``L<number of levels>`` whatever the CPU calls it."""
    roles = [k.removeprefix("level_") for k in metrics if k.startswith("level_")]
    n = len(roles)
    pos = {r: (n if r == "LLC" else int(r[1:])) for r in roles}
    order = sorted(roles, key=pos.get)
    row = {"cpu": spec["cpu"], "cpu_label": metrics.get("cpu_label", spec["cpu"]),
           "variant": spec["options"]["variant"], "records": metrics["records"],
           "instructions": metrics["instructions"], "cycles": metrics["cycles"]}
    row.update({f"L{pos[r]}_misses": metrics[f"misses_{r}"] for r in order})
    row.update({f"L{pos[r]}_demand_misses": metrics[f"demand_misses_{r}"] for r in order})
    row["mlp"] = metrics.get("mlp")  # average misses in flight; cycles the ROB stalled full
    row["rob_full_cycles"] = metrics.get("rob_full_cycles")
    return row


def run(out: Path, keys: int = 200_000, ops: int = 20_000, cpus: list[str] | None = None,
        value_size: int = 256, depth: int = 16, batch: int = 16, seed: int = 1,
        native_ops: int | None = None, rounds: int = DEFAULT_ROUNDS,
        publish: bool = False) -> pd.DataFrame:
    """Run the demo; return the result table (one row per CPU x variant).

    The rows are the framework's sim cells (:func:`sim_specs`, computed by
    :func:`kvsim.experiments.cells.run_sim_group`, each variant's trace kept as
    ``OUT/pipeline-<variant>.kvt``) and the native timings its native cell's rounds
    (:func:`native_spec`, :func:`kvsim.experiments.cells.native_rounds`).
    ``rounds``: interleaved native rounds (at least :data:`stats.MIN_ROUNDS` for a 95 %
    interval). ``publish``: also copy the result file and plot to the checkout's
    ``results/`` (raises ValueError outside a source checkout).
    """
    if rounds < 1:
        raise ValueError(f"rounds: must be at least 1, got {rounds}")
    published = provenance.results_dir() if publish else None
    if publish and published is None:
        raise ValueError("--publish: results/ exists only in a kvsim source checkout")
    cpus = cpus or _default_cpus()
    for name in cpus:  # fail early on a bad name
        sim.load_cpu(name)
    out.mkdir(parents=True, exist_ok=True)
    params = dict(keys=keys, ops=ops, value_size=value_size, depth=depth, seed=seed)
    native_ops = native_ops or max(50 * ops, 200_000)
    steps = len(VARIANTS) * (1 + len(cpus)) + len(VARIANTS) * rounds
    specs = sim_specs(params, batch, cpus)
    rows = []
    # wall time of the simulated half: traces made, passes over them (one per trace, every
    # CPU in it) and the seconds each stage took
    stages = {"traces_made": 0, "trace_s": 0.0, "simulate_passes": 0, "simulate_s": 0.0}
    with progress.bar("pipeline-demo", total=steps, unit="step") as bar, \
            tempfile.TemporaryDirectory(prefix=".cells-", dir=out) as trace_dir:
        for variant in VARIANTS:
            group = [s for s in specs if s["options"]["variant"] == variant]
            kept = Path(trace_dir) / f"{cells.trace_key(group[0])}.kvt"
            bar.set_postfix_str(f"trace {variant}")
            t0 = time.perf_counter()
            cref.trace("pipeline", kept, group[0]["options"])  # run_sim_group reuses it
            stages["trace_s"] += time.perf_counter() - t0
            stages["traces_made"] += 1
            bar.update()
            bar.set_postfix_str(f"simulate {variant} on {', '.join(cpus)}")
            # one pass over the trace: each chunk decoded once, the CPUs side by side
            t0 = time.perf_counter()
            results = cells.run_sim_group(group, trace_dir)
            stages["simulate_s"] += time.perf_counter() - t0
            stages["simulate_passes"] += 1
            os.replace(kept, out / f"pipeline-{variant}.kvt")
            bar.update(len(cpus))
            rows += [row_of(s, r["metrics"]) for s, r in zip(group, results, strict=True)]
        df = pd.DataFrame(rows)
        base = df[df.variant == VARIANTS[0]].set_index("cpu")["cycles"]
        df["speedup"] = df.cpu.map(base) / df.cycles
        native = _native(params, batch, native_ops, rounds, bar)
    meta = {"params": params | {"batch": batch, "cpus": cpus, "native_ops": native_ops,
                                "rounds": rounds}}
    _write(out, df, meta["params"], native, published, stages)
    return df


def _native(params: dict, batch: int, ops: int, rounds: int, bar) -> dict:
    """Time both variants natively on this machine in ``rounds`` interleaved rounds: the
    rounds of the demo's native cell (:func:`native_spec`,
    :func:`kvsim.experiments.cells.native_rounds`, A B then B A), one run per process."""
    spec = native_spec(params, batch, ops, rounds)
    bar.set_postfix_str(f"native: {rounds} interleaved rounds")
    runs = cells.native_rounds(spec)
    bar.update(len(VARIANTS) * rounds)
    return native_summary(ops, rounds,
                          {v: [r["cpu_runs_s"][0] for r in runs[s]]
                           for v, s in zip(VARIANTS, "ab", strict=True)},
                          {v: [r["runs_s"][0] for r in runs[s]]
                           for v, s in zip(VARIANTS, "ab", strict=True)})


def native_summary(ops: int, rounds: int, cpu: dict[str, list[float]],
                   wall: dict[str, list[float]]) -> dict:
    """The demo's ``native`` figures from each variant's process CPU and wall seconds."""
    sp = stats.paired_speedup(cpu["naive"], cpu["lookahead"])
    return {
        "ops": ops,
        "rounds": rounds,
        "clock": CLOCK,
        # median process CPU seconds of one measured phase, per variant
        "naive": stats.summary(cpu["naive"])["median"],
        "lookahead": stats.summary(cpu["lookahead"])["median"],
        "speedup": sp["median"],
        "speedup_ci95": sp["ci95"],
        "speedup_ci95_coverage": sp["ci95_coverage"],
        "speedup_from_minimums": sp["from_minimums"],
        "verdict": sp["verdict"],
        "round_ratios": sp["ratios"],
        "cpu_s": {v: stats.summary(cpu[v]) for v in VARIANTS},
        "wall_s": {v: stats.summary(wall[v]) for v in VARIANTS},
    }


# --- the framework's study -------------------------------------------------------------------

NAME = "pipeline_demo"
#: per scale of ``kvsim experiment run pipeline_demo``: keys, traced GETs, native GETs,
#: native rounds (full: the command's defaults)
SCALES = {"small": (20_000, 2_000, 200_000, 6), "full": (200_000, 20_000, 1_000_000, 9)}


def _cells(scale: str, cpus: list[str]) -> list[dict]:
    """Pipelined GETs (256 B values, depth 16), naive and lookahead, traced and simulated on
    every CPU, and timed natively in interleaved rounds; ``small``: a tenth of the keys and
    GETs."""
    keys, ops, native_ops, rounds = SCALES[scale]
    params = dict(keys=keys, ops=ops, value_size=256, depth=16, seed=1)
    return sim_specs(params, 16, cpus) + [native_spec(params, 16, native_ops, rounds)]


def _tables(rows: pd.DataFrame) -> list[framework.Table]:
    speed = framework.speedup_table(rows, ["variant"], lambda _: None)
    sims = rows[rows.kind == "sim"] if "kind" in rows else rows.iloc[0:0]
    misses = pd.DataFrame([{**{k: v for k, v in row_of(
        {"cpu": r["cpu"], "options": {"variant": r["variant"]}},
        {k: v for k, v in r.items() if pd.notna(v)}).items() if k != "cpu_label"},
        "seed": None} for _, r in sims.iterrows()])
    return [framework.Table(NAME, "Pipelined GET: lookahead against naive, predicted and "
                            "native", speed, "speedup (x: naive / lookahead)",
                            framework.Plot(x="variant", ylabel="speedup (x)",
                                           xlabel="variant"),
                            note="no upstream figure (seed): the demo of the pipeline's "
                                 "prefetch; `kvsim experiment pipeline-demo` writes the same "
                                 "rows to demo.json."),
            framework.Table(f"{NAME}_misses", "Pipelined GET: misses per level", misses,
                            "misses (L<n>_misses: every kind; L<n>_demand_misses: loads and "
                            "stores)")]


framework.register(framework.Experiment(
    NAME, "The pipeline demo: lookahead against naive pipelined GETs",
    "none (the pipeline demo)", _cells, _tables))


def native_line(native: dict, predicted: float | None, local_name: str = "local") -> str:
    """The printed summary of the native timings."""
    def span(ci, digits: int) -> str:
        return f"[{ci[0]:.{digits}f}, {ci[1]:.{digits}f}]" if ci else "[no interval]"

    c = native["cpu_s"]
    times = "; ".join(f"{v} {c[v]['median']:.3f} {span(c[v]['ci95'], 3)} min {c[v]['min']:.3f}"
                      for v in VARIANTS)
    verdict = native["verdict"]
    if verdict != "within noise":
        verdict = f"lookahead {verdict}"
    elif native["speedup_ci95"] is None:
        verdict += f" (fewer than {stats.MIN_ROUNDS} rounds give no interval)"
    text = (f"native on this machine ({native['ops']:,} GETs, {native['rounds']} interleaved "
            f"rounds; process CPU s as median [95 % interval] min): {times}; speedup "
            f"{native['speedup']:.2f}x {span(native['speedup_ci95'], 2)}, from minimums "
            f"{native['speedup_from_minimums']:.2f}x: {verdict}")
    if predicted is not None:
        text += f"; the {local_name} preset predicts {predicted:.2f}x"
    return text


def predicted_local(rows: list[dict]) -> float | None:
    """The ``local`` preset's predicted lookahead speedup, if it was simulated."""
    for r in rows:
        if r["cpu"] == "local" and r["variant"] == "lookahead":
            return r["speedup"]
    return None


def _write(out: Path, df: pd.DataFrame, params: dict, native: dict,
           published: Path | None, stages: dict | None = None) -> None:
    shown = df.drop(columns="cpu").rename(columns={"cpu_label": "cpu"})
    with pd.option_context("display.width", 160, "display.max_columns", 20):
        print(shown.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    rows = df.to_dict(orient="records")
    local_name = next((r["cpu_label"] for r in rows if r["cpu"] == "local"), "local")
    print(native_line(native, predicted_local(rows), local_name))
    df.to_csv(out / "demo.csv", index=False)
    payload = {"experiment": "demo", "git_commit": cref.git_commit(), "params": params,
               "config_hash": hashlib.sha256(json.dumps(params, sort_keys=True).encode())
               .hexdigest()[:16], "rows": rows, "native": native,
               "stages": {k: round(v, 3) if isinstance(v, float) else v
                          for k, v in (stages or {}).items()}}
    written = [provenance.write_result(out / "demo.json", payload), out / "demo.csv"]
    if _plot(out / "demo.png", df):
        written.append(out / "demo.png")
    if published is not None:
        for src in [p for p in written if p.suffix in (".json", ".png")]:
            written.append(provenance.write_atomic(published / src.name, src.read_bytes()))
    print("wrote " + ", ".join(str(p) for p in written))


def _plot(path: Path, df: pd.DataFrame) -> bool:
    """Draw the plot; without matplotlib print a one-line note instead and return False."""
    try:
        import matplotlib  # noqa: F401 -- only whether it is installed
    except ImportError:
        print(f"plot skipped ({path.name}): matplotlib is not installed")
        return False

    # a Figure of its own, not pyplot: the process's backend (a notebook's) stays as it is
    from matplotlib.figure import Figure

    cpus = list(dict.fromkeys(df.cpu))
    miss_cols = [c for c in df.columns if c.endswith("_demand_misses")]
    fig = Figure(figsize=(11, 4))
    ax1, ax2 = fig.subplots(1, 2)
    width = 0.38
    for i, variant in enumerate(VARIANTS):
        sub = df[df.variant == variant].set_index("cpu").loc[cpus]
        xs = [x + (i - 0.5) * width for x in range(len(cpus))]
        ax1.bar(xs, sub["cycles"] / 1e6, width, label=variant)
    labels = dict(zip(df.cpu, df.cpu_label, strict=True))
    ax1.set_xticks(range(len(cpus)), [labels[c] for c in cpus])
    ax1.set_ylabel("predicted cycles (millions)")
    ax1.set_title("Pipelined GET: predicted cycles")
    ax1.legend()
    naive = df[df.variant == "naive"].set_index("cpu").loc[cpus[0]]
    look = df[df.variant == "lookahead"].set_index("cpu").loc[cpus[0]]
    xs = range(len(miss_cols))
    ax2.bar([x - width / 2 for x in xs], [naive[c] for c in miss_cols], width, label="naive")
    ax2.bar([x + width / 2 for x in xs], [look[c] for c in miss_cols], width, label="lookahead")
    ax2.set_xticks(list(xs), [c.removesuffix("_demand_misses") for c in miss_cols])
    ax2.set_ylabel("demand misses (loads and stores)")
    ax2.set_title(f"Demand misses per level ({labels[cpus[0]]})")
    ax2.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110, metadata={"Software": None})  # same bytes for the same figures
    return True
