"""The out-of-order window's reach against the machine: ``kvsim-calibrate chainlap``'s
dependent chain and independent lookup, native beside the simulator (sim/MODEL.md §6).

    python -m kvsim.experiments.chainlap native [--size 1GiB] [--rounds R] [--out FILE]
    python -m kvsim.experiments.chainlap compare --native FILE [--cpu CPU ...]
        [--variant FIELD=VALUE[,FIELD=VALUE] ...] [--out FILE]
    python -m kvsim.experiments.chainlap table COMPARE_FILE [--k K] [--model NAME ...]
    python -m kvsim.experiments.chainlap speedups ABLATION_FILE VALIDATION_FILE

``native`` runs ``kvsim-calibrate chainlap`` (sim/_calibrate/chain_lap.c) once per round, each
run timing every point's three loops in turn, and writes every sample (ns per step, thread
CPU time): ``chain`` (K dependent loads), ``lookup`` (an independent chain of
:data:`LOOKUP` loads, a bucket and its entry) and ``both`` (the chain, then the lookup), with
N instructions of one kind after each (``nop``, ``add``, ``dep``: chain_lap.c). It is a
native timing: run it alone (in a quiet window). Per sample, the overlap the core achieves
is ``chain + lookup - both`` and its share of the lookup ``(chain + lookup - both) / lookup``:
1 when the lookup runs wholly beside the chain, 0 when after it. The three loops of a sample
run one after another, so each overlap comes from loops timed together.

``compare`` writes the same loops as traces (:func:`records`; the three kinds give one
trace, since a trace's gap is a count), simulates each on every ``--cpu`` (and on the first
one with each ``--variant``'s fields changed) and writes, per point, the native overlap's
median, sign-test 95 % interval and the figure from the loops' minimums beside each
prediction. ``table`` prints a ``compare`` file as one markdown table: per gap, the native
share of each kind at ``--k`` chain loads (median and 95 % interval) and the range over every
K, then each model's share (its range over every K). ``speedups`` prints, per row of a
validation result, the speedup a ``kvsim ablate`` file (run on that row's pair) predicts
under each of its settings and its ratio to the result's native speedup (the window's
settings on the validation's rows).

The loop's records, per step (chain_lap.c; the step's end is the loop's ``sub``/``jne``,
:data:`STEP_END` instructions): ``chain``: K loads of word 0 of the chain's lines, each the
previous one's producer (``dep = 1``; in ``both`` the first one's producer is the previous
step's last chain load, ``LOOKUP + 1`` records back); ``lookup``: LOOKUP loads of word 1 of
the lookup's lines, the same way (in ``both`` the first one's producer is ``K + 1`` back).
The first load of a stream in a step has a gap of N (the gap before it) plus STEP_END when a
step's end is before it. Lines are distinct random lines of the buffer (numpy, seeded): the
native cycles are random cycles through every line, and a step's lines are as random. A
warm-up of the same loop, a quarter of the steps, comes first between warm-up markers.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path
from typing import Any

import numpy as np

from kvsim import provenance, stats, traces
from kvsim.sim.config import ConfigError, load_cpu, parse_size

__all__ = ["LOOKUP", "STEP_END", "records", "overlaps", "main"]

LINE = 64
BASE = 0x7F00_0000_0000
LOOKUP = 2  # chain_lap.c LAP_LOOKUP: bucket, entry
STEP_END = 2  # sub $1, s; jne
KINDS = ("nop", "add", "dep")
KS = (2, 3, 4, 5)
NS = (0, 52, 100, 160, 200, 240, 300, 400, 500, 600)  # the default sweep; chain_lap.c LAP_NS
MODES = ("chain", "lookup", "both")
RESULT_NAME = "chainlap-compare.json"


class ChainLapError(Exception):
    """Bad input: a one-line message naming what and where."""


def _loop(mode: str, k: int, n: int, lines: np.ndarray) -> np.ndarray:
    """``lines``: (steps, per) line numbers, the step's chain lines then its lookup's."""
    chain = k if mode != "lookup" else 0
    look = LOOKUP if mode != "chain" else 0
    per = chain + look
    steps = lines.shape[0]
    r = np.zeros((steps, per), dtype=traces.RECORD_DTYPE)
    r["addr"] = np.uint64(BASE) + lines[:, :per].astype(np.uint64) * np.uint64(LINE)
    r["addr"][:, chain:] += np.uint64(8)  # the lookup's word 1
    r["size"], r["kind"], r["dep"] = 8, traces.KIND_LOAD, 1
    r["gap"][:, 0] = n + STEP_END
    if chain and look:
        r["dep"][:, 0] = look + 1
        r["dep"][:, chain] = chain + 1
        r["gap"][:, chain] = n
    return r.reshape(-1)


def records(mode: str, k: int, n: int, steps: int, size: int, seed: int = 1) -> np.ndarray:
    """The ``mode`` loop (chain, lookup, both) of ``k`` chain loads and gap ``n``, ``steps``
    measured steps over ``size`` bytes after its warm-up (the module docstring)."""
    if mode not in MODES:
        raise ChainLapError(f"mode: one of {', '.join(MODES)}, got {mode!r}")
    if k < 1 or n < 0 or steps < 1:
        raise ChainLapError(f"k at least 1, n at least 0, steps at least 1: got {k}, {n}, "
                            f"{steps}")
    n_lines = size // LINE
    warm = max(1, steps // 4)
    per = k + LOOKUP
    if n_lines < (warm + steps) * per:
        raise ChainLapError(f"--size: {size} B has fewer lines than the loop visits")
    rng = np.random.default_rng(seed)
    lines = rng.choice(n_lines, size=(warm + steps) * per, replace=False).reshape(-1, per)
    w = _loop(mode, k, n, lines[:warm])
    m = _loop(mode, k, n, lines[warm:])
    firsts = [0, k] if mode == "both" else [0]  # each stream's first load: no producer
    w["dep"][firsts] = 0
    m["dep"][firsts] = 0
    return np.concatenate([traces.marker_record(traces.MARK_WARMUP_BEGIN), w,
                           traces.marker_record(traces.MARK_WARMUP_END), m])


def _native(args: list[object]) -> dict[str, Any]:
    from kvsim.sim.calibrate import run_bench

    try:
        return run_bench(*args)
    except OSError as e:
        raise ChainLapError(str(e)) from None


def native(size: int, page: str, kinds: list[str], ks: list[int], ns: list[int], rounds: int,
           steps: int, repeats: int, log=lambda m: None) -> dict[str, Any]:
    """Every sample of every point, one ``chainlap`` run per round."""
    pts: dict[tuple[str, int, str, int], list[float]] = {}
    hf = None
    for r in range(rounds):
        log(f"round {r + 1}/{rounds}")
        out = _native(["chainlap", page, size, steps, repeats, ",".join(kinds),
                       ",".join(map(str, ks)), ",".join(map(str, ns))])
        if not out.get("points"):
            raise ChainLapError("kvsim-calibrate chainlap: no loops on this architecture "
                                "(x86-64 only)")
        hf = out["huge_fraction"]
        for p in out["points"]:
            pts.setdefault((p["kind"], p["n"], p["mode"], p["k"]), []).extend(p["ns"])
    return {"page": page, "size": size, "steps": steps, "repeats": repeats, "rounds": rounds,
            "lookup_loads": LOOKUP, "huge_fraction": hf,
            "points": [{"kind": kd, "n": n, "mode": m, "k": k, "ns": xs}
                       for (kd, n, m, k), xs in pts.items()]}


def _summary(xs: list[float]) -> dict[str, Any]:
    ci = stats.median_ci95(xs)
    return {"median": statistics.median(xs), "ci95": list(ci[:2]) if ci else None,
            "min": min(xs)}


def overlaps(nat: dict[str, Any]) -> list[dict[str, Any]]:
    """Per (kind, k, n): the native times' summaries and the overlap per sample (chain +
    lookup - both, ns, and its share of the lookup), each sample's three loops from the same
    repeat of the same round."""
    by = {(p["kind"], p["n"], p["mode"], p["k"]): p["ns"] for p in nat["points"]}
    rows = []
    for (kind, n, mode, k), both in by.items():
        if mode != "both":
            continue
        chain, look = by[(kind, n, "chain", k)], by[(kind, n, "lookup", 0)]
        ov = [a + c - b for a, b, c in zip(chain, both, look, strict=True)]
        share = [o / c for o, c in zip(ov, look, strict=True)]
        rows.append({"kind": kind, "k": k, "n": n, "chain_ns": _summary(chain),
                     "lookup_ns": _summary(look), "both_ns": _summary(both),
                     "overlap_ns": _summary(ov), "overlap_share": _summary(share),
                     "overlap_share_from_minimums":
                         (min(chain) + min(look) - min(both)) / min(look)})
    return sorted(rows, key=lambda r: (KINDS.index(r["kind"]) if r["kind"] in KINDS else 9,
                                       r["k"], r["n"]))


def predict(cpu: Any, k: int, n: int, steps: int, size: int, page_size: int,
            seed: int = 1) -> dict[str, Any]:
    """The three loops' simulated ns per step on ``cpu`` and the overlap's share."""
    from kvsim import sim

    ns = {}
    for mode in MODES:
        res = sim.simulate(records(mode, k, n, steps, size, seed), cpu, page_size=page_size,
                           validate=False)
        ns[mode] = res["cycles"] / cpu.freq_ghz / steps
    ov = ns["chain"] + ns["lookup"] - ns["both"]
    return {**{f"{m}_ns": v for m, v in ns.items()}, "overlap_ns": ov,
            "overlap_share": ov / ns["lookup"]}


def _variant(text: str) -> dict[str, int]:
    out = {}
    for part in text.split(","):
        field, _, value = part.partition("=")
        if field.strip() not in ("rob", "scheduler", "width") or not value.strip().isdigit():
            raise ChainLapError(f"--variant: FIELD=VALUE with FIELD rob, scheduler or width "
                                f"and an integer VALUE, got {part!r}")
        out[field.strip()] = int(value)
    return out


def compare(nat: dict[str, Any], cpus: list[str], variants: list[str], steps: int,
            log=lambda m: None) -> dict[str, Any]:
    page_size = (2 << 20) if nat["page"] == "2m" else 4096
    models: dict[str, Any] = {}
    for i, c in enumerate(cpus):
        models[c] = load_cpu(c)
        if i == 0:
            for v in variants:
                models[f"{c} {v}"] = models[c].with_changes(**_variant(v))
    rows = overlaps(nat)
    pred: dict[tuple[int, int], dict[str, Any]] = {}
    for k, n in sorted({(r["k"], r["n"]) for r in rows}):
        pred[(k, n)] = {}
        for name, cpu in models.items():
            pred[(k, n)][name] = predict(cpu, k, n, steps, nat["size"], page_size)
            log(f"k={k} n={n:<3} {name}: overlap share "
                f"{pred[(k, n)][name]['overlap_share']:.2f}")
    for r in rows:
        r["predicted"] = pred[(r["k"], r["n"])]
    return {"models": list(models), "rows": rows}


def table(doc: dict[str, Any], k: int = 3, models: list[str] | None = None) -> str:
    """A ``compare`` file's overlap shares as markdown (the module docstring, ``table``)."""
    rows = doc["rows"]
    kinds = [x for x in KINDS if any(r["kind"] == x for r in rows)]
    models = models or doc["models"]
    out = ["| gap N | " + " | ".join(f"native, {x} (K = {k}; K = 2-5)" for x in kinds) + " | "
           + " | ".join(f"model: {m}" for m in models) + " |",
           "|---" * (1 + len(kinds) + len(models)) + "|"]
    for n in sorted({r["n"] for r in rows}):
        cells = []
        for x in kinds:
            at = [r for r in rows if r["kind"] == x and r["n"] == n]
            one = next((r for r in at if r["k"] == k), None)
            if one is None:
                raise ChainLapError(f"--k {k}: not in the file")
            s = one["overlap_share"]
            ci = f"[{s['ci95'][0]:.2f}, {s['ci95'][1]:.2f}]" if s["ci95"] else "[-]"
            med = [r["overlap_share"]["median"] for r in at]
            cells.append(f"{s['median']:.2f} {ci}; {min(med):.2f} to {max(med):.2f}")
        at = [r for r in rows if r["kind"] == kinds[0] and r["n"] == n]
        for m in models:
            p = [r["predicted"][m]["overlap_share"] for r in at]
            cells.append(f"{min(p):.2f} to {max(p):.2f}")
        out.append(f"| {n} | " + " | ".join(cells) + " |")
    return "\n".join(out)


def speedups(ablation: dict[str, Any], validation_doc: dict[str, Any]) -> str:
    """Markdown: per validation row whose pair ``ablation`` ran, the native speedup (its 95 %
    interval) and each setting's predicted speedup and ratio (bold within 0.85-1.15)."""
    from kvsim.experiments import validation

    t = next((t for t in validation_doc.get("tables", ()) if t["name"] == "validation"), None)
    if t is None or not ablation.get("rows"):
        raise ChainLapError("speedups: need a validation result (its validation table) and a "
                            "kvsim ablate file with rows")
    col = {c: i for i, c in enumerate(t["columns"])}
    native = {r[0]: r for r in t["rows"]}
    settings = list(ablation["rows"][0]["predicted"]["base"]["settings"])
    out = ["| row | set | native [95 % CI] | " + " | ".join(f"{s}: predicted, ratio"
                                                       for s in settings) + " |",
           "|---" * (3 + len(settings)) + "|"]
    for row, pair in validation._PAIR_OF_ROW.items():
        r = next((x for x in ablation["rows"] if x["pair"] == pair), None)
        if r is None or row not in native:
            continue
        nat = native[row]
        sp = nat[col["native_speedup"]]
        cells = []
        for s in settings:
            x = (r["predicted"]["base"]["settings"][s]["ns_per_op"]
                 / r["predicted"]["variant"]["settings"][s]["ns_per_op"])
            ratio = f"{x / sp:.2f}"
            cells.append(f"{x:.2f}x, " + (f"**{ratio}**" if 0.85 <= x / sp <= 1.15 else ratio))
        out.append(f"| {row} | {nat[col['set']]} | {sp:.2f}x [{nat[col['native_ci95_low']]:.2f}, "
                   f"{nat[col['native_ci95_high']]:.2f}] | " + " | ".join(cells) + " |")
    return "\n".join(out)


def _ints(text: str, opt: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise ChainLapError(f"{opt}: comma-separated integers, got {text!r}") from None


def main(argv: list[str] | None = None, prog: str = "python -m kvsim.experiments.chainlap"
         ) -> int:
    ap = argparse.ArgumentParser(prog=prog, description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    n = sub.add_parser("native", help="the native loops (run alone, in a quiet window)")
    n.add_argument("--size", default="1GiB")
    n.add_argument("--page", choices=("2m", "4k"), default="2m")
    n.add_argument("--kinds", default=",".join(KINDS))
    n.add_argument("--k", default=",".join(map(str, KS)), help="chain loads (2-5)")
    n.add_argument("--n", default=",".join(map(str, NS)), help="gap instructions")
    n.add_argument("--rounds", type=int, default=8)
    n.add_argument("--repeats", type=int, default=3, help="samples per round and point")
    n.add_argument("--steps", type=int, default=10_000, help="steps per sample")
    n.add_argument("--out", default=None)
    c = sub.add_parser("compare", help="the native overlaps beside the simulator's")
    c.add_argument("--native", required=True, help="a file `native` wrote")
    c.add_argument("--cpu", action="append", default=None,
                   help="CPU preset or file (repeatable; default local)")
    c.add_argument("--variant", action="append", default=[],
                   help="the first --cpu with FIELD=VALUE[,FIELD=VALUE] (rob, scheduler, "
                        "width) changed (repeatable)")
    c.add_argument("--steps", type=int, default=2000, help="simulated steps per loop")
    c.add_argument("--out", default=None)
    t = sub.add_parser("table", help="a compare file as a markdown table")
    t.add_argument("compare_file")
    t.add_argument("--k", type=int, default=3, help="chain loads of the native columns")
    t.add_argument("--model", action="append", default=None,
                   help="a model of the file (repeatable; default every one)")
    v = sub.add_parser("speedups", help="a kvsim ablate file's speedups against a "
                                        "validation result's native ones")
    v.add_argument("ablation_file")
    v.add_argument("validation_file")
    a = ap.parse_args(argv)
    log = lambda m: print(f"chainlap: {m}", file=sys.stderr, flush=True)  # noqa: E731
    command = f"{prog} " + " ".join(argv if argv is not None else sys.argv[1:])
    try:
        if a.cmd == "table":
            import json

            doc = json.loads(Path(a.compare_file).read_text())
            bad = [m for m in a.model or () if m not in doc["models"]]
            if bad:
                raise ChainLapError(f"--model {bad[0]!r}: not in {a.compare_file}")
            print(table(doc, a.k, a.model))
            return 0
        if a.cmd == "speedups":
            import json

            print(speedups(json.loads(Path(a.ablation_file).read_text()),
                           json.loads(Path(a.validation_file).read_text())))
            return 0
        if a.cmd == "native":
            kinds = [x.strip() for x in a.kinds.split(",") if x.strip()]
            if not kinds or any(x not in KINDS for x in kinds):
                raise ChainLapError(f"--kinds: some of {', '.join(KINDS)}, got {a.kinds!r}")
            if a.rounds < 1 or a.repeats < 1 or a.steps < 1:
                raise ChainLapError("--rounds, --repeats and --steps: at least 1")
            payload = {"command": command,
                       **native(parse_size(a.size, "--size"), a.page, kinds, _ints(a.k, "--k"),
                                _ints(a.n, "--n"), a.rounds, a.steps, a.repeats, log)}
            out = a.out or provenance.default_result_path("chainlap-native.json")
        else:
            import json

            nat = json.loads(Path(a.native).read_text())
            res = compare(nat, a.cpu or ["local"], a.variant, a.steps, log)
            payload = {"command": command, "native_file": a.native,
                       "native_provenance": nat.get("provenance"), **res}
            out = a.out or provenance.default_result_path(RESULT_NAME)
    except (ChainLapError, ConfigError, ValueError, OSError, KeyError) as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        return 2
    return provenance.publish(prog, out, payload)


if __name__ == "__main__":
    sys.exit(main())
