"""The store buffer against the machine: ``kvsim-calibrate storemiss``'s stores to random
lines, native beside the simulator with and without ``[core] store_buffer`` (sim/MODEL.md §6).

    python -m kvsim.experiments.storebuf native [--sizes ...] [--rounds R] [--out FILE]
    python -m kvsim.experiments.storebuf compare --native FILE [--cpu CPU]
        [--store-buffer 0,114] [--out FILE]
    python -m kvsim.experiments.storebuf cpufile SRC DST --entries N --source TEXT

``native`` runs ``kvsim-calibrate storemiss`` (sim/_calibrate/store_miss.c) over each
working set in interleaved rounds (every size once per round, A B A B) and writes every
sample (ns per access, thread CPU time) of its store loop and of its load loop, for each
number of accesses per step. It is a native timing: run it alone (in a quiet window).
``compare`` writes the same loops as traces (:func:`records`), simulates each on ``--cpu``
with each ``--store-buffer`` size (0: the file without one), and writes, per point, the
native median, minimum and bootstrap 95 % interval beside every prediction and their
ratios (predicted / native median). ``cpufile`` writes a CPU file with ``[core]
store_buffer`` set, its source beside it.

The loop's records: access i stores (or loads) 8 bytes at line ``((i * G) mod 2^64) >> (64 -
log2(lines))`` of the buffer, G = 0x9E3779B97F4A7C15, with a gap of five instructions (its
own ``mov``, ``imul``, ``shr``, ``shl`` and the previous access's ``add``), and the first access
of a step ten more (the step's eight adds and the loop's ``sub``/``jne``). No access depends
on another's value (``dep = 0``). The native program touches the whole buffer, then runs one
repeat of both loops unmeasured; the trace's warm-up is the buffer's lines once (one 64-byte
store each) for buffers up to :data:`TOUCH_MAX` bytes, then the loop of the other kind
before the measured one (the accesses the native run makes just before it), at most
:data:`WARM_CAP` accesses.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

import numpy as np

from kvsim import provenance, stats, traces
from kvsim.sim.config import ConfigError, load_cpu, parse_size

__all__ = ["G", "records", "main"]

G = 0x9E3779B97F4A7C15
LINE = 64
BASE = 0x7F00_0000_0000
BODY_GAP = 5  # per access: mov, imul, shr, shl (its own) and add $1 (the previous access's)
STEP_GAP = 8 + 2  # per step: eight adds and the loop's sub/jne (objdump -d at cc -O2)
WARM_CAP = 1 << 17
TOUCH_MAX = 64 << 20
RESULT_NAME = "storebuf-compare.json"


class StoreBufError(Exception):
    """Bad input: a one-line message naming what and where."""


def _lines(first: int, n: int, size: int) -> np.ndarray:
    bits = (size // LINE).bit_length() - 1
    i = np.arange(first, first + n, dtype=np.uint64)
    with np.errstate(over="ignore"):
        h = i * np.uint64(G)
    return h >> np.uint64(64 - bits)


def _loop(kind: int, first: int, n: int, size: int, k: int) -> np.ndarray:
    r = np.zeros(n, dtype=traces.RECORD_DTYPE)
    r["addr"] = np.uint64(BASE) + _lines(first, n, size) * np.uint64(LINE)
    r["size"], r["kind"], r["gap"] = 8, kind, BODY_GAP
    r["gap"][::k] = BODY_GAP + STEP_GAP
    return r


def records(size: int, k: int, store: bool, accesses: int, native_accesses: int
            ) -> np.ndarray:
    """The measured loop of ``accesses`` accesses (stores, or loads), ``k`` per step, over
    ``size`` bytes, after its warm-up (the module docstring). The counter starts where the
    native program's first measured loop of that kind starts (``native_accesses`` per loop)."""
    if size & (size - 1) or size < 2 * LINE:
        raise StoreBufError(f"--sizes: a power of two of at least 128 bytes, got {size}")
    if k not in (1, 2, 4, 8, 16) or accesses % k:
        raise StoreBufError(f"k: 1, 2, 4, 8 or 16 dividing the accesses, got {k}")
    n = native_accesses
    first = 2 * n if store else 3 * n  # repeat 0 is store [0, n), load [n, 2n)
    warm = min(n, WARM_CAP) // k * k
    other = traces.KIND_LOAD if store else traces.KIND_STORE
    parts = [traces.marker_record(traces.MARK_WARMUP_BEGIN)]
    if size <= TOUCH_MAX:
        t = np.zeros(size // LINE, dtype=traces.RECORD_DTYPE)
        t["addr"] = BASE + np.arange(size // LINE, dtype=np.uint64) * LINE
        t["size"], t["kind"] = LINE, traces.KIND_STORE
        parts.append(t)
    parts += [_loop(other, first - warm, warm, size, k),
              traces.marker_record(traces.MARK_WARMUP_END),
              _loop(traces.KIND_STORE if store else traces.KIND_LOAD, first, accesses, size, k)]
    return np.concatenate(parts)


def _native(args: list[object]) -> dict[str, Any]:
    from kvsim.sim.calibrate import run_bench

    try:
        return run_bench(*args)
    except OSError as e:
        raise StoreBufError(str(e)) from None


def native(sizes: list[int], ks: list[int], rounds: int, accesses: int, repeats: int,
           log=lambda m: None) -> dict[str, Any]:
    """Every sample of every point, the sizes interleaved round by round."""
    pts: dict[str, dict[str, Any]] = {}
    for r in range(rounds):
        for size in sizes:
            log(f"round {r + 1}/{rounds}: {size} B")
            out = _native(["storemiss", "4k", size, accesses, repeats, *ks])
            for p in out["points"]:
                key = f"{size}:{p['k']}"
                d = pts.setdefault(key, {"size": size, "k": p["k"], "store_ns": [],
                                         "load_ns": [], "huge_fraction": out["huge_fraction"]})
                d["store_ns"] += p["store_ns"]
                d["load_ns"] += p["load_ns"]
    return {"page": "4k", "accesses": accesses, "repeats": repeats, "rounds": rounds,
            "work": out["work"], "points": list(pts.values())}


def _stats(xs: list[float]) -> dict[str, Any]:
    ci = stats.bootstrap_ci95(xs)
    return {"median": statistics.median(xs), "min": min(xs),
            "bootstrap_ci95": list(ci) if ci else None}


def compare(nat: dict[str, Any], cpu_path: str, sbs: list[int], accesses: int,
            log=lambda m: None) -> list[dict[str, Any]]:
    from kvsim import sim

    base = load_cpu(cpu_path)
    rows = []
    for p in nat["points"]:
        for store in (True, False):
            kind = "store" if store else "load"
            xs = p[f"{kind}_ns"]
            n = max(accesses // p["k"] * p["k"], p["k"])
            rec = records(p["size"], p["k"], store, n, nat["accesses"])
            row = {"size": p["size"], "k": p["k"], "kind": kind, "native_ns": _stats(xs),
                   "predicted": {}}
            for sb in sbs:
                cpu = base.with_changes(store_buffer=sb or None)
                res = sim.simulate(rec, cpu, page_size=4096, validate=False)
                t = res["timing"]
                ns = res["cycles"] / cpu.freq_ghz / n
                row["predicted"][str(sb)] = {
                    "ns": ns, "ratio": ns / row["native_ns"]["median"],
                    "mlp": t["mlp"], "avg_l1_miss_cycles": t["avg_l1_miss_cycles"],
                    "stall_cycles": {k: v for k, v in t["stall_cycles"].items() if v}}
                log(f"{p['size']:>11} B k={p['k']:<2} {kind:5} sb={sb:<3} native "
                    f"{row['native_ns']['median']:7.2f} ns predicted {ns:7.2f}")
            rows.append(row)
    return rows


def with_store_buffer(text: str, entries: int, source: str) -> str:
    """A CPU file's text with ``[core] store_buffer = entries`` and its source in the core's
    ``src`` table (the file's other lines as they were)."""
    import re

    m = re.search(r"(?ms)^\[core\]\n(.*?)(?=^\[)", text)
    if not m or re.search(r"(?m)^store_buffer\s*=", m.group(1)):
        raise StoreBufError("the CPU file needs a [core] table without store_buffer")
    core = m.group(1)
    src = re.search(r"(?m)^src = \{(.*)\}$", core)
    line = f"store_buffer = {entries}\n"
    if src:
        new = (core[:src.start()] + line + f"src = {{{src.group(1).rstrip()}, store_buffer = "
               f"{json.dumps(source)} }}" + core[src.end():])
    else:
        new = core + line + f"src = {{ store_buffer = {json.dumps(source)} }}\n"
    return text[:m.start(1)] + new + text[m.end(1):]


def _ints(text: str, opt: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise StoreBufError(f"{opt}: comma-separated integers, got {text!r}") from None


def main(argv: list[str] | None = None, prog: str = "python -m kvsim.experiments.storebuf"
         ) -> int:
    ap = argparse.ArgumentParser(prog=prog, description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    n = sub.add_parser("native", help="the native loops (run alone, in a quiet window)")
    n.add_argument("--sizes", default="16KiB,1MiB,1GiB")
    n.add_argument("--k", default="1,8", help="accesses per step (1, 2, 4, 8, 16)")
    n.add_argument("--rounds", type=int, default=5)
    n.add_argument("--repeats", type=int, default=3, help="samples per round and point")
    n.add_argument("--accesses", type=int, default=1 << 20, help="accesses per sample")
    n.add_argument("--out", default=None)
    c = sub.add_parser("compare", help="the native samples beside the simulator's")
    c.add_argument("--native", required=True, help="a file `native` wrote")
    c.add_argument("--cpu", default="local")
    c.add_argument("--store-buffer", default="0,114",
                   help="store-buffer entries to simulate (0: none)")
    c.add_argument("--accesses", type=int, default=1 << 16, help="simulated accesses")
    c.add_argument("--out", default=None)
    w = sub.add_parser("cpufile", help="a CPU file with [core] store_buffer set")
    w.add_argument("src")
    w.add_argument("dst")
    w.add_argument("--entries", type=int, required=True)
    w.add_argument("--source", required=True, help="where the size comes from")
    a = ap.parse_args(argv)
    log = lambda m: print(f"storebuf: {m}", file=sys.stderr, flush=True)  # noqa: E731
    command = f"{prog} " + " ".join(argv if argv is not None else sys.argv[1:])
    try:
        if a.cmd == "cpufile":
            import tomllib

            from kvsim.sim.config import parse_cpu

            text = with_store_buffer(Path(a.src).read_text(), a.entries, a.source)
            parse_cpu(tomllib.loads(text))  # the file still reads
            provenance.write_atomic(a.dst, text)
            print(f"# wrote {a.dst}")
            return 0
        if a.cmd == "native":
            sizes = [parse_size(s.strip(), "--sizes") for s in a.sizes.split(",")]
            payload = {"command": command,
                       **native(sizes, _ints(a.k, "--k"), a.rounds, a.accesses, a.repeats,
                                log)}
            out = a.out or provenance.default_result_path("storebuf-native.json")
        else:
            nat = json.loads(Path(a.native).read_text())
            rows = compare(nat, a.cpu, _ints(a.store_buffer, "--store-buffer"), a.accesses,
                           log)
            payload = {"command": command, "native_file": a.native,
                       "native_provenance": nat.get("provenance"), "cpu": a.cpu,
                       "rows": rows}
            out = a.out or provenance.default_result_path(RESULT_NAME)
    except (StoreBufError, ConfigError, ValueError, OSError) as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        return 2
    return provenance.publish(prog, out, payload)


if __name__ == "__main__":
    sys.exit(main())
