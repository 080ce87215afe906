"""What the legacy layout's GET pays that the unified one does not: the validation's row
"GET legacy -> unified" split by keyspace size and page size, natively and in the traces
(sim/VALIDATION.md, the finding on this row).

    python -m kvsim.experiments.layout_split native [--keys 20000,50000,500000]
        [--thp-keys 500000] [--rounds 10] [--out FILE]          (through the quiet window)
    python -m kvsim.experiments.layout_split predict --cpu FILE [--keys ...] [--out FILE]
        [--native FILE]                                         (niced: traces, simulations)
    python -m kvsim.experiments.layout_split callgrind [--keys 20000,500000] [--out FILE]
                                                                (niced: valgrind's counts)

The row is the catalogue's pair ``unified`` (:mod:`kvsim.experiments.pairs`: pipelined GET at
depth 1, 16-byte keys, 32-byte values) with the validation's operation counts
(:func:`kvsim.experiments.validation._pairs`); only the keyspace size changes.

``native``: per size, rounds of one ``kvsim-cref native --repeat 1`` process per side (A =
legacy, B = unified; the order of the sides and of the sizes rotating per round), process CPU
time per GET; per size the speedup of B over A (median of the rounds' ratios, sign-test and
bootstrap 95 % intervals, the ratio of the minimums) and each side's median, interval and
minimum. ``--thp-keys``: sizes also run with the arena on transparent huge pages (c_ref's
``KVSIM_CREF_THP=1``), a point where the page walks change and the caches' share does not.

``predict``: per size, both sides traced as the validation traces the row (its warm setup and
warm-up operations) and simulated on ``--cpu`` and, a what-if, the same CPU with 2 MiB pages
(the ablation's ``page_2m``); per side and GET: the distinct lines and 4 KiB pages of the
measured phase's records, the allocations they touch (distinct (tag, line) pairs of the
keyspace's structures), the deepest dependent chain, the simulated demand misses per level,
DRAM reads, DTLB and STLB misses, the TLB stall, and the predicted ns per GET. With
``--native`` (a ``native`` result) each size's predicted speedup and ns per GET are set beside
the native ones.

``callgrind``: per size and side, ``valgrind --tool=callgrind --cache-sim=yes`` on two runs
that differ only in their GET count; the difference over the extra GETs is the instructions
(Ir), data reads (Dr) and last-level data misses (DLmr) of one GET: what the trace's
instruction gaps and records are checked against (callgrind's cache is its own simple model,
not this machine's).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
from typing import Any

from kvsim import provenance, stats
from kvsim.experiments import cref
from kvsim.experiments import pairs as catalogue

PAIR = "unified"
ROW = "GET legacy -> unified"
SIDES = ("a", "b")
#: GETs of a native run and of a trace's measured phase and warm-up: the validation's (full)
NATIVE_OPS = 500_000
SIM_OPS = 100_000
THP_ENV = {"KVSIM_CREF_THP": "1"}
WARM_SETUP = "compact"


def _options(keys: int, ops: int) -> dict[str, dict[str, Any]]:
    p = catalogue.get(PAIR)
    common = {"keys": keys, "ops": ops, **p.common, "seed": 1}
    return {s: {**common, **p.side(s)} for s in SIDES}


def _sizes(text: str) -> list[int]:
    try:
        sizes = [int(float(k)) for k in text.split(",") if k.strip()]
    except ValueError:
        raise ValueError(f"--keys {text!r}: comma-separated key counts") from None
    if not sizes or min(sizes) < 1:
        raise ValueError(f"--keys {text!r}: comma-separated positive key counts")
    return sizes


# --- native ------------------------------------------------------------------------------


def _point_name(keys: int, thp: bool) -> str:
    return f"{keys}{'-thp' if thp else ''}"


def native(sizes: list[int], thp_sizes: list[int], rounds: int, log) -> dict[str, Any]:
    points = [(k, False) for k in sizes] + [(k, True) for k in thp_sizes]
    ns: dict[str, dict[str, list[float]]] = {_point_name(*p): {"a": [], "b": []}
                                             for p in points}
    for r in range(rounds + 1):  # round 0: a discarded warm-up
        order = points[r % len(points):] + points[:r % len(points)]
        for keys, thp in order:
            sides = SIDES if r % 2 == 0 else SIDES[::-1]
            for s in sides:
                opts = _options(keys, NATIVE_OPS)[s]
                res = cref.native("pipeline", opts, repeat=1, env=THP_ENV if thp else None)
                if r:
                    ns[_point_name(keys, thp)][s].append(res["cpu_runs_s"][0] * 1e9 / res["ops"])
        log(f"round {r}/{rounds} done" + (" (warm-up, discarded)" if r == 0 else ""))
    out = []
    for keys, thp in points:
        d = ns[_point_name(keys, thp)]
        sp = stats.paired_speedup(d["a"], d["b"])
        out.append({"keys": keys, "thp": thp, "speedup": sp,
                    "legacy_ns_per_get": stats.summary(d["a"]),
                    "unified_ns_per_get": stats.summary(d["b"]),
                    "legacy_extra_ns_per_get": statistics.median(
                        [x - y for x, y in zip(d["a"], d["b"], strict=True)])})
    return {"row": ROW, "pair": PAIR, "ops": NATIVE_OPS, "rounds": rounds, "points": out}


def _native_table(doc: dict[str, Any]) -> str:
    lines = ["| keys | pages | legacy ns/GET [95 %] (min) | unified ns/GET [95 %] (min) | "
             "legacy - unified ns | speedup [95 %] | from minimums |",
             "|---|---|---|---|---|---|---|"]
    for p in doc["points"]:
        def cell(s):
            ci = s["ci95"] or [float("nan")] * 2
            return f"{s['median']:.1f} [{ci[0]:.1f}, {ci[1]:.1f}] ({s['min']:.1f})"
        sp = p["speedup"]
        ci = sp["ci95"] or sp["bootstrap_ci95"] or [float("nan")] * 2
        lines.append(f"| {p['keys']:,} | {'THP' if p['thp'] else '4 KiB'} | "
                     f"{cell(p['legacy_ns_per_get'])} | {cell(p['unified_ns_per_get'])} | "
                     f"{p['legacy_extra_ns_per_get']:.1f} | {sp['median']:.2f}x "
                     f"[{ci[0]:.2f}, {ci[1]:.2f}] | {sp['from_minimums']:.2f}x |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    prog = "python -m kvsim.experiments.layout_split"
    ap = argparse.ArgumentParser(prog=prog, description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    n = sub.add_parser("native", help="interleaved native rounds (run it in a quiet window)")
    n.add_argument("--keys", default="20000,50000,500000")
    n.add_argument("--thp-keys", default="500000", help="sizes also run on huge pages "
                   "('' for none)")
    n.add_argument("--rounds", type=int, default=10)
    n.add_argument("--out")
    a = ap.parse_args(argv)
    try:
        if a.cmd == "native":
            sizes = _sizes(a.keys)
            thp = _sizes(a.thp_keys) if a.thp_keys.strip() else []
            if a.rounds < 1:
                raise ValueError(f"--rounds {a.rounds}: at least 1")
    except ValueError as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 2

    def log(m: str) -> None:
        print(m, file=sys.stderr)

    try:
        if a.cmd == "native":
            load = provenance.load_average_1m()
            doc = native(sizes, thp, a.rounds, log)
            doc["load_average_1m"] = [load, provenance.load_average_1m()]
            out = a.out or provenance.default_result_path("layout-split-native.json")
            print(_native_table(doc))
    except (OSError, cref.CrefError, subprocess.SubprocessError) as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 1
    return provenance.publish(prog, out, doc)


if __name__ == "__main__":
    raise SystemExit(main())
