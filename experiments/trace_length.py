"""How long a validation row's simulated part must be: the predicted time per operation as
the traced operations double (the warm-up convergence idea, :mod:`warmup_convergence`, for
rows without a warm-up prefix: MSET's).

    python -m kvsim.experiments.trace_length --cpu FILE [--scale small|full]
        [--family MSET] [--ops 1000,2000,4000] [--out FILE]

For each validation row of ``--family`` (the first word of its name) and each side, the
row's trace (its options, its setup carried in as the validation traces it) at each
``--ops`` count and at the count the validation traces, simulated on ``--cpu``: the
predicted ns per operation and its move from the count before. The native side of the row
times ``native_ops`` operations; a trace shorter than that predicts another phase of the
run wherever the workload's cost per operation drifts. Writes
``results/trace-length.json`` (kvsim.provenance).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from kvsim import provenance, sim
from kvsim.experiments import cref, validation


def predict(workload: str, options: dict, cpu: sim.CpuConfig) -> dict:
    """The measured phase of one trace on ``cpu``: ns per command, records, seconds."""
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="kvsim-trace-length-") as tmp:
        t = Path(tmp) / "t.kvt"
        cref.trace(workload, t, options)
        res = sim.simulate(str(t), cpu)
    ops = res["commands"]["count"]
    return {"ns_per_op": res["cycles"] / ops / cpu.freq_ghz, "operations": ops,
            "records": res["records"], "seconds": round(time.perf_counter() - t0, 2)}


def sweep(cpu: sim.CpuConfig, scale: str, family: str, counts: list[int],
          log=lambda m: None) -> list[dict]:
    """Every side of every row of ``family`` at each count, and at the validation's."""
    rows = []
    seen: dict[str, list[dict]] = {}
    for p in validation._pairs(scale):
        if p["row"].split()[0] != family:
            continue
        traced = p["sim"].get("ops", p["common"].get("ops"))
        for side in ("a", "b"):
            base = validation._sim_opts(p, side)
            key = repr(sorted((k, v) for k, v in base.items() if k != "ops"))
            if key not in seen:  # a side two rows share (the dict's baseline) runs once
                seen[key] = []
                for n in sorted(set(counts) | {traced}):
                    got = predict(p["workload"], {**base, "ops": n}, cpu)
                    seen[key].append({"ops": n, **got})
                    log(f"{p['row']} {side} {n}: {got['ns_per_op']:.1f} ns/op")
            pts = seen[key]
            for i, x in enumerate(pts):
                x["move_from_previous"] = (x["ns_per_op"] / pts[i - 1]["ns_per_op"] - 1
                                           if i else None)
            rows.append({"row": p["row"], "side": "baseline" if side == "a" else "variant",
                         "options": {k: v for k, v in base.items() if k != "ops"},
                         "native_ops": p["common"].get("ops"), "traced_ops": traced,
                         "points": pts})
    return rows


def main(argv: list[str] | None = None) -> int:
    prog = "python -m kvsim.experiments.trace_length"
    ap = argparse.ArgumentParser(prog=prog, description=__doc__.splitlines()[0])
    ap.add_argument("--cpu", required=True)
    ap.add_argument("--scale", choices=("small", "full"), default="small")
    ap.add_argument("--family", default="MSET")
    ap.add_argument("--ops", default="1000,2000,4000,8000,16000")
    provenance.add_out_option(ap, "trace-length.json")
    a = ap.parse_args(argv)
    try:
        cpu = sim.load_cpu(a.cpu)
        counts = [int(x) for x in a.ops.split(",") if x.strip()]
        if not counts or min(counts) < 1:
            raise ValueError(f"--ops {a.ops!r}: positive operation counts")
        families = {p["row"].split()[0] for p in validation._pairs(a.scale)}
        if a.family not in families:
            raise ValueError(f"--family {a.family!r}: one of {', '.join(sorted(families))}")
    except (ValueError, OSError) as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 2
    rows = sweep(cpu, a.scale, a.family, counts,
                 log=lambda m: print(m, file=sys.stderr, flush=True))
    for r in rows:
        pts = ", ".join(f"{x['ops']}: {x['ns_per_op']:.0f}" for x in r["points"])
        print(f"{r['row']} ({r['side']}; native {r['native_ops']} ops, traced "
              f"{r['traced_ops']}): {pts} ns/op")
    out = provenance.out_path(a.out, "trace-length.json")
    return provenance.publish(prog, out, {"cpu": a.cpu, "scale": a.scale,
                                          "family": a.family, "rows": rows})


if __name__ == "__main__":
    sys.exit(main())
