"""Where a validation row's missing time lies: its baseline with the keyspace in the caches
and past them, natively and predicted (sim/VALIDATION.md, finding 11).

    python -m kvsim.experiments.absolute_split --cpu FILE [--keys 2000,20000] [--repeat 5]
        [--out FILE]

For each row (:data:`ROWS`, the validation's MGET and MSET baselines with its options, MSET on both
tables) and
each keyspace size: the native time per operation (``kvsim-cref native``, process CPU time,
the fastest and the median of ``--repeat`` runs) and the predicted one (the row's trace,
warmed as the validation's, simulated on ``--cpu``). When predicted / native is in the band
with the keyspace in the caches and falls below it past them, the non-memory work is right
and what is missing is on the memory side. Writes ``results/absolute-split.json``
(kvsim.provenance).
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
}


def point(row: str, keys: int, cpu: sim.CpuConfig, repeat: int) -> dict:
    workload, opts, traced = ROWS[row]
    common = {**opts, "keys": keys, "seed": 1}
    nat = cref.native(workload, common, repeat=repeat)
    runs = [s * 1e9 / nat["ops"] for s in nat["cpu_runs_s"]]
    with tempfile.TemporaryDirectory(prefix="kvsim-split-") as tmp:
        t = Path(tmp) / "t.kvt"
        cref.trace(workload, t, {**common, **traced})
        res = sim.simulate(str(t), cpu)
    ops = res["commands"]["count"]
    pred = res["cycles"] / ops / cpu.freq_ghz
    return {"row": row, "keys": keys, "native_ns_per_op_min": min(runs),
            "native_ns_per_op_median": statistics.median(runs), "native_runs_ns": runs,
            "predicted_ns_per_op": pred, "ratio_to_min": pred / min(runs),
            "ratio_to_median": pred / statistics.median(runs),
            "predicted_mlp": res["timing"]["mlp"], "instructions_per_op":
            res["instructions"] / ops if "instructions" in res else None}


def main(argv: list[str] | None = None) -> int:
    prog = "python -m kvsim.experiments.absolute_split"
    ap = argparse.ArgumentParser(prog=prog, description=__doc__.splitlines()[0])
    ap.add_argument("--cpu", required=True)
    ap.add_argument("--keys", default="2000,20000")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--out")
    a = ap.parse_args(argv)
    try:
        cpu = sim.load_cpu(a.cpu)
        sizes = [int(k) for k in a.keys.split(",")]
    except (ValueError, OSError) as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 2
    rows = []
    for row in ROWS:
        for k in sizes:
            rows.append(point(row, k, cpu, a.repeat))
            r = rows[-1]
            print(f"{row:22s} {k:8d} keys  native {r['native_ns_per_op_min']:9.1f} ns (min)"
                  f"  predicted {r['predicted_ns_per_op']:9.1f}  ratio {r['ratio_to_min']:.2f}")
    out = a.out or provenance.default_result_path("absolute-split.json")
    return provenance.publish(prog, out, {"cpu": a.cpu, "rows": rows})


if __name__ == "__main__":
    raise SystemExit(main())
