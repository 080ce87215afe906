"""Native speedups of two c_ref builds from interleaved rounds (kvsim.stats).

For one workload of the fidelity study's list (:mod:`kvsim.experiments.fidelity`), each
round runs, in turn, the baseline and the variant with the "before" build (``--before-bin``)
and with this checkout's build (one ``kvsim-cref native ... --repeat 1 --json`` run each,
:func:`kvsim.experiments.cref.native`, process CPU time); rounds spread every build and
variant over the same minutes, so a change of the machine's speed hits all four alike. Per
build, the speedup baseline / variant is :func:`kvsim.stats.paired_speedup` over the rounds
(median, bootstrap 95 % interval, from the minimums). Writes
``results/paired-<workload>.json`` (kvsim.provenance, with the load average).

Usage (from the repository root, after ``make build``; ``c_ref/bench/paired.py`` is its
old spelling):

    .venv/bin/python -m bench paired mget-dict --before-bin OLD/kvsim-cref \\
        --before-commit SHA [--rounds 7] [--set keys_per_command=1000 ...] [--out FILE]

``--set KEY=VALUE`` replaces one of the workload's c_ref options (its name as in
``kvsim-cref``'s help, with ``_`` for ``-``); ``--out`` names the result file (default
``results/paired-<workload>.json``).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from kvsim import provenance, stats
from kvsim.experiments import cref
from kvsim.experiments.fidelity import WORKLOADS, native, native_options


def main(argv: list[str] | None = None, prog: str = "python -m bench paired") -> int:
    ap = argparse.ArgumentParser(prog=prog, description=__doc__.splitlines()[0])
    ap.add_argument("workload", choices=sorted(WORKLOADS))
    ap.add_argument("--before-bin", required=True)
    ap.add_argument("--before-commit", required=True)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--ops", help="measured operations (default: fidelity.py's native ones)")
    ap.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                    help="replace one of the workload's c_ref options (repeatable)")
    ap.add_argument("--out", help="result file (default results/paired-<workload>.json)")
    a = ap.parse_args(argv)
    if not Path(a.before_bin).is_file():
        ap.error(f"--before-bin {a.before_bin}: no such file")
    if a.rounds < 2:
        ap.error("--rounds: at least 2")
    workload, base, var, opts, why = WORKLOADS[a.workload]
    opts = dict(opts)
    for kv in a.sets:
        key, eq, value = kv.partition("=")
        if not eq or key not in opts:
            ap.error(f"--set {kv}: want KEY=VALUE with KEY one of {', '.join(sorted(opts))}")
        opts[key] = int(value) if value.isdigit() else value
    nopts = native_options(workload, opts, a.ops)
    builds = {"before": dict(os.environ, KVSIM_CREF_BIN=str(Path(a.before_bin).resolve())),
              "after": dict(os.environ)}
    times: dict[str, dict[str, list[float]]] = {b: {base: [], var: []} for b in builds}
    for r in range(a.rounds):
        for label, env in builds.items():
            for v in (base, var):
                res = native(env, workload, v, nopts, repeat=1)
                times[label][v].append(res["cpu_median_s"])
        print(f"round {r + 1}/{a.rounds} done", flush=True)
    out = {}
    for label in builds:
        out[label] = {"cpu_s": times[label],
                      "speedup": stats.paired_speedup(times[label][base], times[label][var])}
    payload = {"workload": workload, "baseline": base, "variant": var,
               "options": cref.workload_args(nopts),
               "change": why, "rounds": a.rounds, "before_commit": a.before_commit, **out}
    rd = provenance.results_dir()
    if a.out:
        target = Path(a.out)
    elif rd is None:
        ap.error("no results/ directory (not a checkout)")
    else:
        target = rd / f"paired-{a.workload}.json"
    path = provenance.write_result(target, payload)
    for label in builds:
        s = out[label]["speedup"]
        print(f"{label}: median {s['median']:.3f} ci95 {s['ci95']} min-based "
              f"{s['from_minimums']:.3f} ({s['verdict']})")
    print(f"-> {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
