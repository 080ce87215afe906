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
import time
from pathlib import Path

import pandas as pd

from kvsim import provenance, sim, stats
from kvsim.experiments import cells, cref, framework, progress
from kvsim.sim import local as sim_local

VARIANTS = ("naive", "lookahead")
DEFAULT_CPUS = ("xeon-8255c", "graviton3", "local")
DEFAULT_ROUNDS = 9
CLOCK = "process CPU time of the measured phase (CLOCK_PROCESS_CPUTIME_ID), one run per process"


def _default_cpus() -> list[str]:
    names = [p["name"] for p in sim.list_presets() if p["timing"]]  # `local` where timed
    chosen = [c for c in DEFAULT_CPUS if c in names]
    return chosen if len(chosen) >= 2 else names[:3]


def run(out: Path, keys: int = 200_000, ops: int = 20_000, cpus: list[str] | None = None,
        value_size: int = 256, depth: int = 16, batch: int = 16, seed: int = 1,
        native_ops: int | None = None, rounds: int = DEFAULT_ROUNDS,
        publish: bool = False) -> pd.DataFrame:
    """Run the demo; return the result table (one row per CPU x variant).

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
    configs = {name: sim.load_cpu(name) for name in cpus}  # fail early on a bad name
    out.mkdir(parents=True, exist_ok=True)
    params = dict(keys=keys, ops=ops, value_size=value_size, depth=depth, seed=seed)
    native_ops = native_ops or max(50 * ops, 200_000)
    steps = len(VARIANTS) * (1 + len(configs)) + len(VARIANTS) * rounds
    rows = []
    # wall time of the simulated half: traces made, passes over them (one per trace, every
    # CPU in it) and the seconds each stage took
    stages = {"traces_made": 0, "trace_s": 0.0, "simulate_passes": 0, "simulate_s": 0.0}
    with progress.bar("pipeline-demo", total=steps, unit="step") as bar:
        for variant in VARIANTS:
            path = out / f"pipeline-{variant}.kvt"
            opts = dict(params, variant=variant, batch=batch if variant == "lookahead" else None)
            bar.set_postfix_str(f"trace {variant}")
            t0 = time.perf_counter()
            cref.trace("pipeline", path, opts)
            stages["trace_s"] += time.perf_counter() - t0
            stages["traces_made"] += 1
            bar.update()
            bar.set_postfix_str(f"simulate {variant} on {', '.join(configs)}")
            # one pass over the trace: each chunk decoded once, the CPUs side by side
            t0 = time.perf_counter()
            results = sim.simulate_many(str(path), list(configs.values()))
            stages["simulate_s"] += time.perf_counter() - t0
            stages["simulate_passes"] += 1
            bar.update(len(configs))
            for name, res in zip(configs, results, strict=True):
                # `cpu` names the CPU (what --cpu takes); an uncalibrated `local` is shown
                # as `local (uncalibrated)` (cpu_label, in the table and the plot)
                row = {"cpu": name, "cpu_label": sim_local.label(configs[name]),
                       "variant": variant,
                       "records": res["records"], "instructions": res["instructions"],
                       "cycles": res["cycles"]}
                for i, lv in enumerate(res["levels"]):  # by position: LLC names differ
                    row[f"L{i + 1}_misses"] = lv["misses"]  # every kind, victim offers too
                for i, lv in enumerate(res["levels"]):  # loads and stores only
                    row[f"L{i + 1}_demand_misses"] = lv["demand_misses"]
                t = res["timing"]  # average misses in flight; cycles the ROB stalled full
                row["mlp"] = t["mlp"] if t else None
                row["rob_full_cycles"] = sum(v for k, v in t["stall_cycles"].items()
                                             if k.startswith("rob_full:")) if t else None
                rows.append(row)
        df = pd.DataFrame(rows)
        base = df[df.variant == "naive"].set_index("cpu")["cycles"]
        df["speedup"] = df.cpu.map(base) / df.cycles
        native = _native(params, batch, native_ops, rounds, bar)
    meta = {"params": params | {"batch": batch, "cpus": cpus, "native_ops": native_ops,
                                "rounds": rounds}}
    _write(out, df, meta["params"], native, published, stages)
    return df


def _native(params: dict, batch: int, ops: int, rounds: int, bar) -> dict:
    """Time both variants natively on this machine in ``rounds`` interleaved rounds: the
    experiments' native cell (:func:`kvsim.experiments.cells.native_rounds`, A B then B A),
    one run per process."""
    sides = [dict(params, ops=ops, variant=v, batch=batch if v == "lookahead" else None)
             for v in VARIANTS]
    spec = framework.native_cell("pipeline-demo", "pipeline", *sides, rounds=rounds,
                                 params={}, warmup_rounds=0)
    spec.pop("rounds_per_process", None)  # one run per process, each timed on its own
    bar.set_postfix_str(f"native: {rounds} interleaved rounds")
    runs = cells.native_rounds(spec)
    bar.update(len(VARIANTS) * rounds)
    cpu = {v: [r["cpu_runs_s"][0] for r in runs[s]] for v, s in zip(VARIANTS, "ab", strict=True)}
    wall = {v: [r["runs_s"][0] for r in runs[s]] for v, s in zip(VARIANTS, "ab", strict=True)}
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
