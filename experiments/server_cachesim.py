"""Cache and branch misses per request of c_ref's server and the real Valkey server.

``kvsim native server --callgrind`` counts instructions per request; this module runs the
same procedure (same cells, keys, values and client run, from :mod:`server`) with callgrind's
cache and branch simulation (``--cache-sim=yes --branch-sim=yes``), which is deterministic and
unaffected by the machine's load. The simulated caches are fixed, not the host's, so the
figures carry across machines: I1 32 KiB 8-way, D1 48 KiB 12-way, LL 8 MiB 16-way, 64-byte
lines (:data:`CACHES`). Callgrind's LL is one level (no L2) and it simulates no TLB.

The keyspace is loaded with instrumentation off (``--instr-atstart=no``: valgrind's core
only, some 5x slower than native instead of 50-100x), then instrumentation is switched on
(``callgrind_control -i on``), one warm-up client run fills the simulated caches, counters are
zeroed (``callgrind_control -z``), the measured client run is served and dumped
(``callgrind_control -d``). Per request: instructions (Ir), I1 misses (I1mr), D1 read and
write misses (D1mr, D1mw), LL data misses (DLmr + DLmw), conditional branches (Bc) and their
mispredicts (Bcm), indirect branches (Bi) and their mispredicts (Bim); and per server the
functions with the most LL data misses and I1 misses (self cost).

``python -m kvsim.experiments.server_cachesim --keys 1000000`` writes
``results/native-server-cachesim.json``. With ``--cref-build LABEL=BINARY`` (repeatable) each
cell runs Valkey once and c_ref's server of every given ``kvsim-cref`` build (the same sources
compiled with other flags: c_ref/Makefile ``server``), each under its label in ``builds``,
with its ratios to Valkey and the binary's SHA-256 and code size
(``results/server-build-callgrind.json``).

With ``--gap SPLIT --cpu CPUFILE`` (batch 0 only) the file also gets, per cell and server,
what callgrind's branch and I1 misses would cost against the cell's gap between the native
user time per request (``server_split``'s tick split, side a) and the predicted one (the
split's prediction on CPUFILE): mispredicts (Bcm + Bim) at ``--penalty-cycles``, I1 misses
at the CPU file's L2 latency, both at its ``freq_ghz`` (:func:`gap_rows`). Callgrind's
predictor is a simple one (a table of 2-bit counters for conditional branches, a
last-target table for indirect ones), which mispredicts more than a modern core's, so the
charge is an upper bound. ``python -m kvsim.experiments.server_cachesim --keys 100000 --gap
results/server-split.json --cpu results/calibrate-xeon-m167-srvloop.toml --out
results/native-server-branchsim.json`` writes ``results/native-server-branchsim.json``."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from kvsim.experiments import callgrind, progress, valkey
from kvsim.experiments import server as S

RESULT_NAME = "native-server-cachesim.json"
#: The simulated caches (size, associativity, line bytes): Sapphire Rapids' L1i and L1d, and
#: an 8 MiB last level so that a keyspace of a few hundred MB misses it, whatever the host.
CACHES = {"I1": (32768, 8, 64), "D1": (49152, 12, 64), "LL": (8388608, 16, 64)}
CELLS = ["get-p1", "get-p10", "mget-20", "mget-100", "mset-10"]
#: The per-request figures of a server, from callgrind's event names.
FIGURES = {"instructions": ("Ir",), "i1_misses": ("I1mr",), "d1_read_misses": ("D1mr",),
           "d1_write_misses": ("D1mw",), "ll_data_misses": ("DLmr", "DLmw"),
           "ll_instr_misses": ("ILmr",), "cond_branches": ("Bc",),
           "cond_mispredicts": ("Bcm",), "indirect_branches": ("Bi",),
           "indirect_mispredicts": ("Bim",)}
#: The misprediction penalty charged by ``--gap`` unless told (cycles): the front end's
#: refill after a mispredicted branch is 14-17 cycles in Sniper's configured cores (the
#: interval model: Eyerman, Eeckhout, Karkhanis and Smith, ACM TOCS 2009; Carlson et al.,
#: SC 2011); 20 is taken above it so that the charge is an upper bound (the branch's
#: resolution time, the work before it, is in the model's own time already).
PENALTY_CYCLES = 20


def callgrind_events(path: Path) -> tuple[dict[str, int], dict[str, dict[str, int]]]:
    """``(totals, self_costs)`` of a callgrind output file with several events: the total of
    each event, and per function its self cost of each event (:func:`.callgrind.read`)."""
    prof = callgrind.read(path)
    return prof.totals, prof.self_costs


def _per_request(totals: dict[str, int], n: int) -> dict[str, float]:
    return {k: round(sum(totals.get(e, 0) for e in evs) / n, 2) for k, evs in FIGURES.items()}


def _top(per_fn: dict[str, dict[str, int]], evs: tuple[str, ...], n: int,
         top: int) -> list[list[Any]]:
    cost = {f: sum(r.get(e, 0) for e in evs) for f, r in per_fn.items()}
    ranked = sorted(cost.items(), key=lambda kv: -kv[1])[:top]
    return [[f, round(v / n, 2)] for f, v in ranked if v > 0]


def _ratios(a: dict[str, float], b: dict[str, float]) -> dict[str, float | None]:
    return {k: (round(a[k] / b[k], 3) if b[k] else None) for k in FIGURES}


def cachesim_profile(spec: dict, warmup_requests: int, top: int = 12, log=None,
                     cref_builds: dict[str, Path] | None = None,
                     caches_used: dict[str, tuple[int, int, int]] | None = None
                     ) -> dict[str, Any]:
    """Per-request cache and branch figures of both servers for one cell (prefetch at
    ``batch_a``), with the functions that miss most; with ``cref_builds`` (``{label:
    binary}``) Valkey's and each c_ref build's, the builds under ``builds``; ``caches_used``
    in place of :data:`CACHES`."""
    n = valkey.normalize_spec(spec)["requests"]
    caches = tuple(f"--{k}={','.join(map(str, v))}"
                   for k, v in (caches_used or CACHES).items())
    out: dict[str, Any] = {}
    for name, prof in S.callgrind_runs(spec, spec["batch_a"],
                                       ("--cache-sim=yes", "--branch-sim=yes", *caches),
                                       instr_at_start=False, warmup_requests=warmup_requests,
                                       cref_builds=cref_builds):
        per_fn = prof.self_costs
        out[name] = {**_per_request(prof.totals, n),
                     "top_ll_data_misses": _top(per_fn, ("DLmr", "DLmw"), n, top),
                     "top_d1_misses": _top(per_fn, ("D1mr", "D1mw"), n, top),
                     "top_i1_misses": _top(per_fn, ("I1mr",), n, top),
                     "top_cond_mispredicts": _top(per_fn, ("Bcm",), n, top)}
        if log:
            log(f"{name}: " + ", ".join(f"{k} {out[name][k]:,.1f}" for k in FIGURES))
    if cref_builds:
        builds = {label: out.pop(label) for label in cref_builds}
        return {"valkey": out["valkey"], "builds": builds,
                "ratio_over_valkey": {label: _ratios(m, out["valkey"])
                                      for label, m in builds.items()}}
    out["ratio_cref_over_valkey"] = _ratios(out["cref"], out["valkey"])
    return out


def gap_rows(cells: list[dict[str, Any]], split: dict[str, Any], cpu_path: str,
             penalty_cycles: float) -> dict[str, Any]:
    """Per cell and server: the native user time per request of ``split`` (a
    ``server-split.json``, side a), the predicted one on ``cpu_path`` (one of its CPU files),
    the gap between them, and the time callgrind's mispredicts and I1 misses of ``cells``
    would take at ``penalty_cycles`` and the CPU file's L2 latency, both at its clock; the
    cycles per instruction natively and predicted, from callgrind's instructions."""
    from kvsim.sim.config import load_file

    cpu = load_file(cpu_path)
    if not cpu.freq_ghz:
        raise ValueError(f"--cpu {cpu_path}: no freq_ghz")
    l2 = next((c.latency for c in cpu.caches if c.name == "L2"), None)
    if l2 is None:
        raise ValueError(f"--cpu {cpu_path}: no L2 level")
    ghz = cpu.freq_ghz
    pred = {r["cell"]: r for r in split["predicted"]
            if r["side"] == "a" and Path(r["cpu"]).name == Path(cpu_path).name}
    native = {(r["server"], r["cell"]): r for r in split["native"] if r["side"] == "a"}
    rows = []
    for c in cells:
        for server in ("cref", "valkey"):
            p, n, m = pred.get(c["cell"]), native.get((server, c["cell"])), c.get(server)
            if p is None or n is None or m is None:
                raise ValueError(f"--gap: no predicted or native row of {c['cell']} "
                                 f"({server}, side a, {Path(cpu_path).name}) in the split")
            gap = n["user_ns"] - p["user_ns"]
            mis = m["cond_mispredicts"] + m["indirect_mispredicts"]
            mis_ns, i1_ns = mis * penalty_cycles / ghz, m["i1_misses"] * l2 / ghz
            rows.append({
                "cell": c["cell"], "server": server,
                "native_user_ns": round(n["user_ns"], 1),
                "native_user_ns_ci95": [round(x, 1) for x in n["user_ns_ci95"]],
                "predicted_user_ns": round(p["user_ns"], 1), "gap_ns": round(gap, 1),
                "instructions": m["instructions"],
                "native_cpi": round(n["user_ns"] * ghz / m["instructions"], 3),
                "predicted_cpi": round(p["user_ns"] * ghz / m["instructions"], 3),
                "mispredicts": round(mis, 2), "mispredict_ns": round(mis_ns, 1),
                "mispredict_share_of_gap": round(mis_ns / gap, 3) if gap > 0 else None,
                "i1_misses": m["i1_misses"], "i1_ns": round(i1_ns, 1),
                "i1_share_of_gap": round(i1_ns / gap, 3) if gap > 0 else None})
    return {"split": split.get("_file"), "split_provenance": split.get("provenance"),
            "cpu": str(cpu_path), "freq_ghz": ghz, "penalty_cycles": penalty_cycles,
            "i1_miss_cycles": l2, "rows": rows}


def gap_markdown(gap: dict[str, Any]) -> str:
    """The ``gap`` of a result file: per cell and server, the gap and what the branch and
    I1 misses would take of it."""
    rows = [f"| cell | server | native user ns [95 %] | predicted user ns | gap ns | CPI native "
            f"/ predicted | mispredicts | x {gap['penalty_cycles']:g} cycles, ns (of gap) | "
            f"I1 misses | x {gap['i1_miss_cycles']:g} cycles, ns (of gap) |",
            "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]

    def share(x: float | None) -> str:
        return "-" if x is None else f"{x:.0%}"
    for r in gap["rows"]:
        lo, hi = r["native_user_ns_ci95"]
        rows.append(
            f"| {r['cell']} | {r['server']} | {r['native_user_ns']:,.0f} [{lo:,.0f}, {hi:,.0f}]"
            f" | {r['predicted_user_ns']:,.0f} | {r['gap_ns']:,.0f} | {r['native_cpi']:.2f} / "
            f"{r['predicted_cpi']:.2f} | {r['mispredicts']:,.1f} | {r['mispredict_ns']:,.0f} "
            f"({share(r['mispredict_share_of_gap'])}) | {r['i1_misses']:,.1f} | "
            f"{r['i1_ns']:,.0f} ({share(r['i1_share_of_gap'])}) |")
    return "\n".join(rows)


def table_markdown(doc: dict[str, Any]) -> str:
    """Per cell and server: the per-request figures of a ``native-server-cachesim.json``."""
    cols = ["instructions", "i1_misses", "d1_read_misses", "d1_write_misses",
            "ll_data_misses", "cond_branches", "cond_mispredicts", "indirect_branches",
            "indirect_mispredicts"]
    rows = ["| cell | server | " + " | ".join(c.replace("_", " ") for c in cols) + " |",
            "|---|---|" + "---:|" * len(cols)]
    for c in doc["cells"]:
        for name, label in (("cref", "c_ref"), ("valkey", "Valkey")):
            rows.append(f"| {c['cell']} | {label} | "
                        + " | ".join(_fig(c[name], k) for k in cols) + " |")
        r = c["ratio_cref_over_valkey"]
        rows.append(f"| {c['cell']} | c_ref/Valkey | "
                    + " | ".join("-" if r.get(k) is None else f"{r[k]:.2f}" for k in cols)
                    + " |")
    table = "\n".join(rows)
    return table + ("\n\n" + gap_markdown(doc["gap"]) if "gap" in doc else "")


def _fig(m: dict[str, Any], k: str) -> str:
    """A figure of a server's row, "-" where an older file lacks it."""
    return "-" if m.get(k) is None else f"{m[k]:,.1f}"


#: The columns of the builds' table: a figure and its label.
BUILD_COLUMNS = {"instructions": "instructions", "i1_misses": "I1 misses",
                 "d1_read_misses": "D1 read misses", "d1_write_misses": "D1 write misses",
                 "ll_data_misses": "LL data misses", "cond_mispredicts": "cond mispredicts",
                 "indirect_mispredicts": "indirect mispredicts"}


def builds_table_markdown(doc: dict[str, Any]) -> str:
    """Per cell: Valkey's per-request figures, then each c_ref build's with its ratio to
    Valkey's in brackets (a ``--cref-build`` result)."""
    rows = ["| cell | server | " + " | ".join(BUILD_COLUMNS.values()) + " |",
            "|---|---|" + "---:|" * len(BUILD_COLUMNS)]
    for c in doc["cells"]:
        v = c["valkey"]
        rows.append(f"| {c['cell']} | Valkey | "
                    + " | ".join(f"{v[k]:,.1f}" for k in BUILD_COLUMNS) + " |")
        for label, m in c["builds"].items():
            r = c["ratio_over_valkey"][label]
            rows.append(f"| {c['cell']} | c_ref {label} | " + " | ".join(
                f"{m[k]:,.1f}" + ("" if r[k] is None else f" ({r[k]:.2f})")
                for k in BUILD_COLUMNS) + " |")
    return "\n".join(rows)


def _binary_facts(path: Path) -> dict[str, Any]:
    """What identifies a build: the binary's SHA-256 and its code size (``.text`` bytes)."""
    from kvsim import provenance

    return {"binary": path.name, "sha256": provenance.file_sha256(path),
            "bytes": path.stat().st_size, "text_bytes": _text_bytes(path)}


def _text_bytes(path: Path) -> int | None:
    """The size of the ``.text`` section of an ELF file (None if it has none)."""
    import struct

    data = path.read_bytes()
    if data[:4] != b"\x7fELF" or data[4] != 2:  # 64-bit ELF only
        return None
    end = "<" if data[5] == 1 else ">"
    shoff, = struct.unpack_from(end + "Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from(end + "HHH", data, 0x3A)

    def sh(i: int) -> tuple[int, int, int]:  # a section header's name, offset and size
        name, _t, _f, _a, off, size = struct.unpack_from(end + "IIQQQQ", data,
                                                         shoff + i * shentsize)
        return name, off, size
    _, stroff, _ = sh(shstrndx)
    for i in range(shnum):
        name, _off, size = sh(i)
        if data[stroff + name:stroff + name + 6] == b".text\0":
            return size
    return None


def main(argv: list[str] | None = None,
         prog: str = "python -m kvsim.experiments.server_cachesim") -> int:
    from kvsim import provenance

    ap = S._Parser(prog=prog, description="Cache and branch misses per request of c_ref's "
                   "server and the real Valkey server under callgrind's simulation.")
    ap.add_argument("--cell", action="append", default=None,
                    help=f"cell(s), repeatable (default: {' '.join(CELLS)})")
    ap.add_argument("--keys", type=int, default=1_000_000, help="keys loaded (1000000)")
    ap.add_argument("--value-size", type=int, default=valkey.DEFAULTS["value_size"])
    ap.add_argument("--requests", type=int, default=4000, help="measured commands (4000)")
    ap.add_argument("--warmup-requests", type=int, default=2000,
                    help="commands served before the counters are zeroed (2000)")
    ap.add_argument("--clients", type=int, default=valkey.DEFAULTS["clients"])
    ap.add_argument("--batch", type=int, default=0, help="prefetch-batch-max-size (0: off)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cref-build", action="append", default=None, metavar="LABEL=BINARY",
                    help="instead of c_ref's server: the server of this kvsim-cref build, "
                    "under LABEL (repeatable; Valkey runs once per cell)")
    ap.add_argument("--gap", metavar="SPLIT", default=None,
                    help="a server-split.json: charge the branch and I1 misses against each "
                    "cell's gap between native and predicted user time (with --cpu)")
    ap.add_argument("--cpu", metavar="CPUFILE", default=None,
                    help="with --gap: the CPU file of the split's prediction (its clock and "
                    "L2 latency)")
    ap.add_argument("--penalty-cycles", type=float, default=PENALTY_CYCLES,
                    help=f"with --gap: cycles per mispredict ({PENALTY_CYCLES})")
    ap.add_argument("--ll", metavar="BYTES,ASSOC", default=None,
                    help="the simulated last level (default 8388608,16); e.g. a core's L2, "
                    "so that LL misses count what leaves it")
    ap.add_argument("--out", default=None, help=f"result file (default results/{RESULT_NAME})")
    ap.add_argument("--render", metavar="RESULT", default=None,
                    help="print the Markdown table of a result file and exit")
    a = ap.parse_args(argv)
    if a.render:
        return S.render_result(prog, a.render, lambda d: (
            builds_table_markdown(d) if "builds" in d["cells"][0] else table_markdown(d)))
    out = provenance.out_path(a.out, RESULT_NAME)
    specs = []
    builds: dict[str, Path] = {}
    try:
        for arg in a.cref_build or ():
            label, path = S.build_arg(arg, "--cref-build", ("valkey", "cref"))
            if label in builds:
                raise ValueError(f"--cref-build: label {label!r} given twice")
            builds[label] = path
        for cell in a.cell or CELLS:
            spec = {**S.parse_cell(cell), "keys": a.keys, "value_size": a.value_size,
                    "clients": a.clients, "batch_a": a.batch, "batch_b": a.batch,
                    "rounds": 1, "warmup_rounds": 0, "seed": a.seed, "requests": a.requests}
            specs.append((cell, valkey.normalize_spec(spec)))
        split = _split(a.gap, a.cpu, a.batch, a.penalty_cycles, bool(builds))
        caches = {**CACHES, "LL": _ll(a.ll)} if a.ll else dict(CACHES)
    except ValueError as exc:
        ap.error(str(exc))
    def profiles() -> list[dict[str, Any]]:
        cells = []
        for cell, spec in specs:
            prof = cachesim_profile(spec, a.warmup_requests, cref_builds=builds or None,
                                    log=progress.log_line, caches_used=caches)
            ratios = prof.get("ratio_over_valkey") or {"": prof["ratio_cref_over_valkey"]}
            for label, r in ratios.items():
                print(f"{cell}: c_ref{' ' + label if label else ''}/Valkey per request: "
                      f"instructions {r['instructions']}, LL data misses "
                      f"{r['ll_data_misses']}, I1 misses {r['i1_misses']}, "
                      f"cond mispredicts {r['cond_mispredicts']}", flush=True)
            cells.append({"cell": cell, "spec": spec, **prof})
        return cells

    cells, status = S.run_or_status(prog, profiles)
    if status:
        return status
    doc: dict[str, Any] = {
        "experiment": "native_server_build_cachesim" if builds else "native_server_cachesim",
        "caches": {k: {"size": v[0], "assoc": v[1], "line": v[2]} for k, v in caches.items()},
        "warmup_requests": a.warmup_requests}
    if builds:
        doc["cref_builds"] = {label: _binary_facts(p) for label, p in builds.items()}
    if split is not None:
        try:
            doc["gap"] = gap_rows(cells, split, a.cpu, a.penalty_cycles)
        except ValueError as exc:
            ap.error(str(exc))
    return provenance.publish(prog, out, {**doc, "cells": cells})


def _ll(arg: str) -> tuple[int, int, int]:
    """``--ll BYTES,ASSOC``: callgrind's LL of 64-byte lines (a power of two of sets)."""
    try:
        size, assoc = (int(x) for x in arg.split(","))
    except ValueError:
        raise ValueError(f"--ll {arg!r}: expected BYTES,ASSOC (two integers)") from None
    sets = size // (assoc * 64) if size > 0 and assoc > 0 else 0
    if sets < 1 or sets & (sets - 1) or sets * assoc * 64 != size:
        raise ValueError(f"--ll {arg!r}: BYTES / (ASSOC * 64) must be a power of two")
    return (size, assoc, 64)


def _split(path: str | None, cpu: str | None, batch: int, penalty: float,
           builds: bool) -> dict[str, Any] | None:
    """The ``server-split.json`` of ``--gap`` (None without it), its options checked before
    any run; its path under ``_file``."""
    import json

    if path is None:
        if cpu is not None:
            raise ValueError("--cpu is an option of --gap")
        return None
    if cpu is None or builds or batch != 0 or penalty <= 0:
        raise ValueError("--gap needs --cpu, --batch 0 (the split's side a), a positive "
                         "--penalty-cycles and no --cref-build")
    try:
        doc = json.loads(Path(path).read_text())
        doc["native"], doc["predicted"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"--gap {path}: not a server-split result ({exc})") from None
    if not Path(cpu).is_file():
        raise ValueError(f"--cpu {cpu}: no such file")
    return {**doc, "_file": path}


if __name__ == "__main__":
    sys.exit(main())
