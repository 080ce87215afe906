"""Demo study: does lookahead prefetching speed up pipelined GETs, and on which CPU?

Traces a pipelined GET workload (256 B values, depth 16) twice with the c_ref keyspace, once
``naive`` (parse one command, execute it) and once ``lookahead`` (parse up to 16 queued
commands, interleave their lookups with software prefetches, then execute in order), simulates
both traces on several CPU presets, and reports misses per level, predicted cycles and the
predicted speedup.

Inputs:  keys, ops, presets (defaults: two seed CPUs and ``local``).
Natively, the same workload (more operations, so the timed phase is long enough) is run on
this machine with real prefetch instructions; its measured speedup is printed beside the
``local`` preset's predicted one.

Outputs: ``OUT/demo.csv``, ``OUT/demo.json`` (with git commit and parameters) and
         ``OUT/demo.png``; the table is printed.
Runtime: well under a minute at the default scale (200k keys, 20k GETs) on 2 cores.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pandas as pd

from kvsim import sim, traces
from kvsim.experiments import cref

VARIANTS = ("naive", "lookahead")
DEFAULT_CPUS = ("xeon-8255c", "graviton3", "local")


def _default_cpus() -> list[str]:
    names = [p["name"] for p in sim.list_presets()]
    chosen = [c for c in DEFAULT_CPUS if c in names]
    return chosen if len(chosen) >= 2 else names[:3]


def run(out: Path, keys: int = 200_000, ops: int = 20_000, cpus: list[str] | None = None,
        value_size: int = 256, depth: int = 16, batch: int = 16, seed: int = 1,
        native_ops: int | None = None) -> pd.DataFrame:
    """Run the demo; return the result table (one row per CPU x variant)."""
    out.mkdir(parents=True, exist_ok=True)
    cpus = cpus or _default_cpus()
    configs = {name: sim.load_cpu(name) for name in cpus}  # fail early on a bad name
    params = dict(keys=keys, ops=ops, value_size=value_size, depth=depth, seed=seed)
    rows = []
    for variant in VARIANTS:
        path = out / f"pipeline-{variant}.kvt"
        opts = dict(params, variant=variant, batch=batch if variant == "lookahead" else None)
        cref.trace("pipeline", path, opts)
        records = traces.read_all(path)
        for name, cfg in configs.items():
            res = sim.simulate(records, cfg)
            row = {"cpu": name, "variant": variant, "records": res["records"],
                   "instructions": res["instructions"], "cycles": res["cycles"]}
            for i, lv in enumerate(res["levels"]):  # by position: presets name LLCs differently
                row[f"L{i + 1}_misses"] = lv["misses"]
            rows.append(row)
    df = pd.DataFrame(rows)
    base = df[df.variant == "naive"].set_index("cpu")["cycles"]
    df["speedup"] = df.cpu.map(base) / df.cycles
    native = _native(params, batch, native_ops or max(50 * ops, 200_000))
    _write(out, df, params | {"batch": batch, "cpus": cpus}, native)
    return df


def _native(params: dict, batch: int, ops: int) -> dict:
    """Time both variants natively on this machine (median of 5 runs of the measured phase)."""
    res = {}
    for variant in VARIANTS:
        opts = dict(params, ops=ops, variant=variant,
                    batch=batch if variant == "lookahead" else None)
        res[variant] = cref.native("pipeline", opts, repeat=5)["median_s"]
    res["ops"] = ops
    res["speedup"] = res["naive"] / res["lookahead"]
    return res


def _write(out: Path, df: pd.DataFrame, params: dict, native: dict) -> None:
    with pd.option_context("display.width", 160, "display.max_columns", 20):
        print(df.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    predicted = df[(df.cpu == "local") & (df.variant == "lookahead")]["speedup"]
    print(f"native on this machine ({native['ops']} GETs, median of 5): naive "
          f"{native['naive']:.3f} s, lookahead {native['lookahead']:.3f} s, speedup "
          f"{native['speedup']:.2f}x"
          + (f" (local preset predicts {predicted.iloc[0]:.2f}x)" if len(predicted) else ""))
    df.to_csv(out / "demo.csv", index=False)
    meta = {"experiment": "demo", "git_commit": cref.git_commit(), "params": params,
            "config_hash": hashlib.sha256(json.dumps(params, sort_keys=True).encode())
            .hexdigest()[:16], "rows": df.to_dict(orient="records"), "native": native}
    (out / "demo.json").write_text(json.dumps(meta, indent=2, default=str))
    _plot(out / "demo.png", df)
    print(f"wrote {out / 'demo.csv'}, {out / 'demo.json'}, {out / 'demo.png'}")


def _plot(path: Path, df: pd.DataFrame) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cpus = list(dict.fromkeys(df.cpu))
    miss_cols = [c for c in df.columns if c.endswith("_misses")]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    width = 0.38
    for i, variant in enumerate(VARIANTS):
        sub = df[df.variant == variant].set_index("cpu").loc[cpus]
        xs = [x + (i - 0.5) * width for x in range(len(cpus))]
        ax1.bar(xs, sub["cycles"] / 1e6, width, label=variant)
    ax1.set_xticks(range(len(cpus)), cpus)
    ax1.set_ylabel("predicted cycles (millions)")
    ax1.set_title("Pipelined GET: predicted cycles")
    ax1.legend()
    naive = df[df.variant == "naive"].set_index("cpu").loc[cpus[0]]
    look = df[df.variant == "lookahead"].set_index("cpu").loc[cpus[0]]
    xs = range(len(miss_cols))
    ax2.bar([x - width / 2 for x in xs], [naive[c] for c in miss_cols], width, label="naive")
    ax2.bar([x + width / 2 for x in xs], [look[c] for c in miss_cols], width, label="lookahead")
    ax2.set_xticks(list(xs), [c.removesuffix("_misses") for c in miss_cols])
    ax2.set_ylabel("demand misses")
    ax2.set_title(f"Misses per level ({cpus[0]})")
    ax2.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
