"""Where a validation row's missing time lies: its baseline with the keyspace in the caches
and past them, natively and predicted (sim/VALIDATION.md, finding 11).

    python -m kvsim.experiments.absolute_split --cpu FILE [--keys 2000,20000] [--repeat 5]
        [--rows "KEYS none,..."] [--llc-scale F] [--out FILE]

For each row (:data:`ROWS`, the validation's MGET and MSET baselines with its options, MSET on both
tables, and KEYS; ``--rows`` picks some) and
each keyspace size: the native time per operation (``kvsim-cref native``, process CPU time,
the fastest and the median of ``--repeat`` runs) and the predicted one (the row's trace,
warmed as the validation's, simulated on ``--cpu``). When predicted / native is in the band
with the keyspace in the caches and falls below it past them, the non-memory work is right
and what is missing is on the memory side. ``--llc-scale F`` predicts with the last level
``F`` times the CPU's (the ablation's rule, :func:`kvsim.experiments.ablation._llc`): what
the prediction would be if the machine gave the keyspace that share of its last level.
Writes ``results/absolute-split.json`` (kvsim.provenance).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

from kvsim import provenance, sim
from kvsim.experiments import cref

#: row -> (workload, native options, what the traced run changes)
ROWS = {
    "MGET hashtable none": ("mget", {"ops": 5000, "value_size": 100, "table": "hashtable",
                                     "keys_per_command": 50, "variant": "none"},
                            {"ops": 1000, "warmup_ops": 1000}),
    "MSET hashtable none": ("mset", {"ops": 20000, "value_size": 100, "table": "hashtable",
                                     "keys_per_command": 10, "mset_keys": "random",
                                     "variant": "none"}, {"ops": 4000}),
    "MSET dict none": ("mset", {"ops": 20000, "value_size": 100, "table": "dict",
                                "keys_per_command": 10, "mset_keys": "random",
                                "variant": "none"}, {"ops": 4000}),
    # one KEYS over the whole keyspace: an operation is a key (as the validation counts it)
    "KEYS none": ("iterate", {"op": "keys", "value_size": 100, "rdbchecksum": "no",
                              "variant": "none"}, {}),
}
#: workloads whose operation is a key of the keyspace, not a command
PER_KEY = ("iterate", "load")


def point(row: str, keys: int, cpu: sim.CpuConfig, repeat: int) -> dict:
    workload, opts, traced = ROWS[row]
    common = {**opts, "keys": keys, "seed": 1}
    load = provenance.load_average_1m()
    nat = cref.native(workload, common, repeat=repeat)
    runs = [s * 1e9 / nat["ops"] for s in nat["cpu_runs_s"]]
    with tempfile.TemporaryDirectory(prefix="kvsim-split-") as tmp:
        t = Path(tmp) / "t.kvt"
        cref.trace(workload, t, {**common, **traced})
        res = sim.simulate(str(t), cpu)
    ops = keys if workload in PER_KEY else res["commands"]["count"]
    pred = res["cycles"] / ops / cpu.freq_ghz
    return {"row": row, "keys": keys, "native_ns_per_op_min": min(runs),
            "native_ns_per_op_median": statistics.median(runs), "native_runs_ns": runs,
            "predicted_ns_per_op": pred, "ratio_to_min": pred / min(runs),
            "ratio_to_median": pred / statistics.median(runs),
            "load_average_1m": [load, provenance.load_average_1m()],
            "predicted_mlp": res["timing"]["mlp"], "instructions_per_op":
            res["instructions"] / ops if "instructions" in res else None}


def main(argv: list[str] | None = None) -> int:
    prog = "python -m kvsim.experiments.absolute_split"
    ap = argparse.ArgumentParser(prog=prog, description=__doc__.splitlines()[0])
    ap.add_argument("--cpu", required=True)
    ap.add_argument("--keys", default="2000,20000")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--rows", default=",".join(ROWS), help="rows, comma-separated")
    ap.add_argument("--llc-scale", type=float, default=1.0,
                    help="the last level's capacity times this (a what-if)")
    ap.add_argument("--out")
    a = ap.parse_args(argv)
    try:
        cpu = sim.load_cpu(a.cpu)
        if not a.llc_scale > 0:
            raise ValueError(f"--llc-scale {a.llc_scale}: a positive factor")
        if a.llc_scale != 1.0:
            from kvsim.experiments.ablation import _llc

            cpu = _llc(cpu, a.llc_scale)
        sizes = [int(k) for k in a.keys.split(",")]
        rows_asked = [r.strip() for r in a.rows.split(",") if r.strip()]
        bad = [r for r in rows_asked if r not in ROWS]
        if bad or not rows_asked:
            raise ValueError(f"--rows: unknown row {bad[0] if bad else a.rows!r} (rows: "
                             f"{', '.join(ROWS)})")
    except (ValueError, OSError) as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 2
    rows = []
    for row in rows_asked:
        for k in sizes:
            rows.append(point(row, k, cpu, a.repeat))
            r = rows[-1]
            print(f"{row:22s} {k:8d} keys  native {r['native_ns_per_op_min']:9.1f} ns (min)"
                  f"  predicted {r['predicted_ns_per_op']:9.1f}  ratio {r['ratio_to_min']:.2f}")
    out = a.out or provenance.default_result_path("absolute-split.json")
    return provenance.publish(prog, out, {"cpu": a.cpu, "llc_scale": a.llc_scale,
                                          "llc_bytes": cpu.caches[-1].size, "rows": rows})


if __name__ == "__main__":
    raise SystemExit(main())
