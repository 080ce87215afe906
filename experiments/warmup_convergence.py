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

Usage (after ``make build``; ``c_ref/bench/warmup.py`` is its old spelling, same options):

    python -m kvsim.experiments.warmup_convergence [--cpu local] [--scale 1.0]

Runtime: a few minutes at scale 1 (the sizes are in _USES, times --scale).

How much warm-up is enough depends on the CPU: the measured phase is warm once the warm-up
has touched more distinct lines than the last-level cache holds, so a larger LLC (relative
to the keyspace) needs a longer one (``--warmup-ops W`` overrides every workload's).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from kvsim import provenance
from kvsim.experiments import cref, pairs

#: name -> (pair of the catalogue, keys, N measured ops, W warm-up ops)
_USES: dict[str, tuple[str, int, int, int]] = {
    "pipeline-get": ("get", 1_000_000, 20000, 50000),
    "mget": ("mget", 1_000_000, 1000, 2000),
}


def _workload(name: str, keys: int, n: int, w: int) -> tuple[str, str, str, list[str], int, int]:
    p = pairs.get(name)
    return (p.workload, p.side("a")["variant"], p.side("b")["variant"],
            cref.workload_args({"keys": keys, **p.common}), n, w)


#: name -> (workload, baseline, variant, options, N measured ops, W warm-up ops)
WORKLOADS: dict[str, tuple[str, str, str, list[str], int, int]] = {
    n: _workload(*u) for n, u in _USES.items()}


def kvsim_bin() -> str:
    return str(Path(sys.executable).with_name("kvsim"))


def cycles(workload: str, variant: str, opts: list[str], ops: int, warm: int, cpu: str,
           tmp: Path) -> dict:
    """Trace one run and simulate it: the measured phase's cycles and records."""
    k = kvsim_bin()
    trace = tmp / "t.kvt"
    cmd = [k, "trace", workload, "--variant", variant, "-o", str(trace), *opts,
           "--ops", str(ops), "--warmup-ops", str(warm)]
    r = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if r.returncode != 0:
        raise SystemExit(f"warmup_convergence: {' '.join(cmd)} failed: {r.stderr.strip()[:300]}")
    r = subprocess.run([k, "simulate", str(trace), "--cpu", cpu, "--json"],
                       capture_output=True, text=True, check=False)
    trace.unlink()
    if r.returncode != 0:
        raise SystemExit(f"warmup_convergence: simulate failed: {r.stderr.strip()[:300]}")
    sim = json.loads(r.stdout)
    return {"cycles": sim["cycles"], "records": sim["records"],
            "warmup_records": sim["warmup_records"], "instructions": sim["instructions"]}


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
    rows = {}
    ok = True
    with tempfile.TemporaryDirectory() as td:
        for name in a.only or sorted(WORKLOADS):
            workload, base, var, opts, n, w = WORKLOADS[name]
            n, w = max(1, int(n * a.scale)), max(1, int(w * a.scale))
            if a.warmup_ops is not None:
                w = a.warmup_ops
            row: dict = {"workload": workload, "baseline": base, "variant": var,
                         "options": opts, "n_ops": n, "warmup_ops": w, "runs": {}}
            runs = [("N", n, w), ("4N", 4 * n, w)]
            if not a.no_cold:
                runs += [("N cold", n, 0), ("4N cold", 4 * n, 0)]
            for label, ops, warm in runs:
                b = cycles(workload, base, opts, ops, warm, a.cpu, Path(td))
                v = cycles(workload, var, opts, ops, warm, a.cpu, Path(td))
                row["runs"][label] = {"ops": ops, "warmup_ops": warm, "baseline": b,
                                      "variant": v,
                                      "speedup": round(b["cycles"] / v["cycles"], 4)}
                print(f"{name} {label:<8} ops {ops:>7} warm-up {warm:>6}: predicted "
                      f"{row['runs'][label]['speedup']:.4f}x", flush=True)
            s1, s4 = row["runs"]["N"]["speedup"], row["runs"]["4N"]["speedup"]
            row["relative_difference"] = round(abs(s4 - s1) / s4, 4)
            row["converged"] = row["relative_difference"] <= a.tolerance
            if not a.no_cold:
                c1, c4 = row["runs"]["N cold"]["speedup"], row["runs"]["4N cold"]["speedup"]
                row["relative_difference_cold"] = round(abs(c4 - c1) / c4, 4)
            ok &= row["converged"]
            rows[name] = row
    payload = {"cpu_preset": a.cpu, "scale": a.scale, "tolerance": a.tolerance,
               "rule": "the same --warmup-ops W before N and before 4N measured operations; "
                       "speedup = baseline cycles / variant cycles of the measured phase",
               "all_converged": ok, "workloads": rows}
    path = provenance.write_result(out, payload)
    print(f"all within {a.tolerance:.0%}: {ok} -> {path}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
