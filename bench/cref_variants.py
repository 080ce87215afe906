"""Native benchmarks of c_ref's prefetch variants; writes ``results/c_ref-bench.json``.

``make bench`` at the repository root (or ``make -C c_ref bench``) runs this, ``python -m
bench cref``, with the CLI it built. Each comparison times a baseline variant and
one or more variants of the same workload with ``kvsim-cref native ... --json``,
interleaved: every round runs one invocation of each variant in turn (A B A B ..., or
A B C for the snapshot load), each timing ``--repeat`` runs. The statistic is process CPU
time (``cpu_runs_s``), which other work on a shared machine disturbs less than wall time.

Per variant against its baseline the result file gives ``speedup_median`` (median baseline
CPU seconds / median variant CPU seconds, over every timed run), its 95 % bootstrap interval
``speedup_ci95`` (:func:`kvsim.stats.independent_speedup`: the two samples resampled
independently, 2,000 times, fixed seed), ``speedup_min`` (fastest baseline run / fastest
variant run) beside it, the per-round ratios, the raw runs, and ``verdict``: ``faster`` or
``slower`` when the interval excludes 1.0, else ``within noise``. Snapshot loads are timed
warm (``KVSIM_CREF_ARENA_WARM=1``: no page faults in the timed loads) unless
``--load-cold``.

Also measured: arena bytes of the unified and legacy layouts (deterministic) and the
traced build's throughput (records per CPU second of the measured phase).

Usage (from the repository root; sizes are the full ones times ``--scale``):

    .venv/bin/python -m bench cref --cli c_ref/build/kvsim-cref [--scale 0.25]
        [--rounds 5] [--repeat 3] [--only keys-valkey,load-8] [--out results/c_ref-bench.json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

PROG = "python -m bench cref"

try:
    import numpy as np

    from kvsim import provenance, stats
except ImportError as e:  # run with the venv's python (make bench passes it)
    sys.exit(f"{PROG}: {e.name} not importable: run with the venv's python (`make bench`)")

BOOTSTRAP = 2000


def _groups(scale: float) -> list[dict]:
    def n(x: int) -> int:
        return max(1, int(x * scale))

    groups = [
        ("keys-valkey", "KEYS", ["none", "valkey"],
         ["iterate", "--op", "keys", "--keys", n(5_000_000), "--value-size", 100]),
        ("keys-next-bucket", "KEYS", ["none", "next-bucket"],
         ["iterate", "--op", "keys", "--keys", n(5_000_000), "--value-size", 100]),
        ("save-valkey", "SAVE", ["none", "valkey"],
         ["iterate", "--op", "save", "--keys", n(2_000_000), "--value-size", 100]),
        ("pipeline-lookahead", "pipelined GET, depth 10, batch 16", ["naive", "lookahead"],
         ["pipeline", "--keys", n(3_000_000), "--ops", n(2_000_000), "--value-size", 256,
          "--depth", 10]),  # lookahead's batch: the default 16 (naive refuses a --batch)
        ("mset-batch", "MSET, 50 keys per command", ["none", "batch"],
         ["mset", "--keys", n(5_000_000), "--keys-per-command", 50, "--value-size", 100]),
        ("mget-batch", "MGET, 50 keys per command", ["none", "batch"],
         ["mget", "--keys", n(3_000_000), "--ops", n(40_000), "--keys-per-command", 50,
          "--value-size", 100]),
    ]
    for keys, vs in ((4_000_000, 8), (4_000_000, 32), (4_000_000, 256), (1_000_000, 4096),
                     (250_000, 16384)):
        groups.append((f"load-{vs}", "snapshot load",
                       ["none", "prefetch-after-key", "prefetch-rehash"],
                       ["load", "--keys", n(keys), "--value-size", vs]))
    return [{"name": g[0], "what": g[1], "variants": g[2], "args": [str(a) for a in g[3]]}
            for g in groups]


def _run(cmd: list[str], env: dict[str, str] | None = None) -> tuple[dict, str]:
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        line = (r.stderr.strip().splitlines() or ["no message"])[-1]
        raise SystemExit(f"{PROG}: `{' '.join(cmd)}` failed: {line}")
    return (json.loads(r.stdout) if r.stdout.strip() else {}), r.stderr


def _compare(cli: str, g: dict, rounds: int, repeat: int, env: dict[str, str]) -> dict:
    runs: dict[str, list[list[float]]] = {v: [] for v in g["variants"]}
    wall: dict[str, list[float]] = {v: [] for v in g["variants"]}
    replies: dict[str, list[int]] = {}
    loads = []
    for _ in range(rounds):
        loads.append(round(os.getloadavg()[0], 2))
        for v in g["variants"]:
            j, _err = _run([cli, "native", *g["args"], "--variant", v, "--repeat", str(repeat),
                            "--json"], env)
            runs[v].append(j["cpu_runs_s"])
            wall[v].extend(j["runs_s"])
            replies[v] = [j["reply_bytes"], j["reply_crc32"]]
            workload = {k: val for k, val in j["workload"].items() if k != "variant"}
    rng = np.random.default_rng(0)
    base = g["variants"][0]
    b = np.array([x for r in runs[base] for x in r])
    out = {"what": g["what"], "workload": workload, "baseline": base, "rounds": rounds,
           "repeat": repeat, "load_average_1m_per_round": loads, "variants": {}}
    for v in g["variants"]:
        x = np.array([s for r in runs[v] for s in r])
        row = {"cpu_median_s": round(float(np.median(x)), 6),
               "cpu_min_s": round(float(x.min()), 6),
               "wall_median_s": round(float(np.median(wall[v])), 6),
               "cpu_runs_s": runs[v], "reply_bytes_crc32": replies[v]}
        if v != base:
            row.update(stats.independent_speedup(b, x, rng, resamples=BOOTSTRAP))
            row["round_ratios"] = [round(float(np.median(rb) / np.median(rv)), 4)
                                   for rb, rv in zip(runs[base], runs[v], strict=True)]
            row["same_replies_as_baseline"] = replies[v] == replies[base]
        out["variants"][v] = row
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n")[0])
    ap.add_argument("--cli", default="c_ref/build/kvsim-cref", help="the kvsim-cref binary")
    ap.add_argument("--scale", type=float, default=1.0, help="key and op counts times this")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=3, help="timed runs per invocation")
    ap.add_argument("--only", default="", help="comma-separated comparison names")
    ap.add_argument("--load-cold", action="store_true",
                    help="time snapshot loads with page faults (a fresh arena per load)")
    ap.add_argument("--out", default=None, help="default: results/c_ref-bench.json")
    a = ap.parse_args(argv)
    if a.scale <= 0 or a.rounds < 2 or a.repeat < 1:
        print(f"{PROG}: --scale must be > 0, --rounds >= 2, --repeat >= 1", file=sys.stderr)
        return 2
    if not os.access(a.cli, os.X_OK):
        print(f"{PROG}: {a.cli}: not an executable (run `make -C c_ref`)", file=sys.stderr)
        return 2
    groups = _groups(a.scale)
    if a.only:
        names = {g["name"] for g in groups}
        want = a.only.split(",")
        bad = [w for w in want if w not in names]
        if bad:
            print(f"{PROG}: --only: unknown {', '.join(bad)} (known: {', '.join(sorted(names))})",
                  file=sys.stderr)
            return 2
        groups = [g for g in groups if g["name"] in want]
    out = Path(a.out or (provenance.results_dir() or Path("results")) / "c_ref-bench.json")
    env = dict(os.environ)
    res: dict = {"scale": a.scale, "statistic": "process CPU seconds per run; speedup = "
                 "baseline / variant; ci95: bootstrap of the ratio of medians",
                 "load_mode": "cold" if a.load_cold else "warm", "comparisons": {}}
    for g in groups:
        genv = dict(env, KVSIM_CREF_ARENA_WARM="0" if a.load_cold else "1")
        c = _compare(a.cli, g, a.rounds, a.repeat, genv if g["name"].startswith("load") else env)
        res["comparisons"][g["name"]] = c
        for v, row in c["variants"].items():
            if v != c["baseline"]:
                lo, hi = row["speedup_ci95"]
                print(f"{g['name']:20s} {c['baseline']}->{v:20s} x{row['speedup_median']:.3f} "
                      f"[{lo:.3f}, {hi:.3f}] min x{row['speedup_min']:.3f}  {row['verdict']}",
                      flush=True)
    if not a.only:
        mem = {}
        for lay in ("unified", "legacy"):
            j, _ = _run([a.cli, "native", "pipeline", "--keys", str(max(1, int(2e6 * a.scale))),
                         "--ops", "1", "--value-size", "8", "--key-size", "16", "--layout", lay,
                         "--json"])
            mem[f"{lay}_bytes"] = j["memory_bytes"]
        mem["keys"] = max(1, int(2e6 * a.scale))
        mem["unified_over_legacy"] = round(mem["unified_bytes"] / mem["legacy_bytes"], 4)
        res["memory_16B_keys_8B_values"] = mem
        _, err = _run([a.cli, "trace", "pipeline", "--keys", str(max(1, int(1e6 * a.scale))),
                       "--ops", str(max(1, int(2e6 * a.scale))), "-o", os.devnull],
                      dict(env, KVSIM_CREF_STATS="1"))
        res["tracing_pipeline_get"] = json.loads(err.strip().splitlines()[-1])
    provenance.write_result(out, res)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
