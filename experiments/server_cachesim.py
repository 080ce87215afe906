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
mispredicts (Bcm), indirect branch mispredicts (Bim); and per server the functions with the
most LL data misses and I1 misses (self cost).

``python -m kvsim.experiments.server_cachesim --keys 1000000`` writes
``results/native-server-cachesim.json``. With ``--cref-build LABEL=BINARY`` (repeatable) each
cell runs Valkey once and c_ref's server of every given ``kvsim-cref`` build (the same sources
compiled with other flags: c_ref/Makefile ``server``), each under its label in ``builds``,
with its ratios to Valkey and the binary's SHA-256 and code size
(``results/server-build-callgrind.json``)."""

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
CELLS = ["get-p10", "mget-20", "mget-100", "mset-10"]
#: The per-request figures of a server, from callgrind's event names.
FIGURES = {"instructions": ("Ir",), "i1_misses": ("I1mr",), "d1_read_misses": ("D1mr",),
           "d1_write_misses": ("D1mw",), "ll_data_misses": ("DLmr", "DLmw"),
           "ll_instr_misses": ("ILmr",), "cond_branches": ("Bc",),
           "cond_mispredicts": ("Bcm",), "indirect_mispredicts": ("Bim",)}


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
                     cref_builds: dict[str, Path] | None = None) -> dict[str, Any]:
    """Per-request cache and branch figures of both servers for one cell (prefetch at
    ``batch_a``), with the functions that miss most; with ``cref_builds`` (``{label:
    binary}``) Valkey's and each c_ref build's, the builds under ``builds``."""
    n = valkey.normalize_spec(spec)["requests"]
    caches = tuple(f"--{k}={','.join(map(str, v))}" for k, v in CACHES.items())
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


def table_markdown(doc: dict[str, Any]) -> str:
    """Per cell and server: the per-request figures of a ``native-server-cachesim.json``."""
    cols = ["instructions", "i1_misses", "d1_read_misses", "d1_write_misses",
            "ll_data_misses", "cond_mispredicts", "indirect_mispredicts"]
    rows = ["| cell | server | " + " | ".join(c.replace("_", " ") for c in cols) + " |",
            "|---|---|" + "---:|" * len(cols)]
    for c in doc["cells"]:
        for name, label in (("cref", "c_ref"), ("valkey", "Valkey")):
            rows.append(f"| {c['cell']} | {label} | "
                        + " | ".join(f"{c[name][k]:,.1f}" for k in cols) + " |")
        r = c["ratio_cref_over_valkey"]
        rows.append(f"| {c['cell']} | c_ref/Valkey | "
                    + " | ".join("-" if r[k] is None else f"{r[k]:.2f}" for k in cols) + " |")
    return "\n".join(rows)


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


def _build(arg: str) -> tuple[str, Path]:
    """``LABEL=BINARY`` of ``--cref-build``: the label and an existing binary's path."""
    label, sep, path = arg.partition("=")
    if not sep or not label or label in ("valkey", "cref") or not path:
        raise ValueError(f"--cref-build {arg!r}: expected LABEL=BINARY (a label other than "
                         "valkey and cref)")
    if not Path(path).is_file():
        raise ValueError(f"--cref-build {arg!r}: no such file {path}")
    return label, Path(path)


def _binary_facts(path: Path) -> dict[str, Any]:
    """What identifies a build: the binary's SHA-256 and its code size (``.text`` bytes)."""
    import hashlib

    data = path.read_bytes()
    return {"binary": path.name, "sha256": hashlib.sha256(data).hexdigest(),
            "bytes": len(data), "text_bytes": _text_bytes(path)}


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
    ap.add_argument("--out", default=None, help=f"result file (default results/{RESULT_NAME})")
    ap.add_argument("--render", metavar="RESULT", default=None,
                    help="print the Markdown table of a result file and exit")
    a = ap.parse_args(argv)
    if a.render:
        return S.render_result(prog, a.render, lambda d: (
            builds_table_markdown(d) if "builds" in d["cells"][0] else table_markdown(d)))
    out = Path(a.out) if a.out else provenance.default_result_path(RESULT_NAME)
    specs = []
    builds: dict[str, Path] = {}
    try:
        for arg in a.cref_build or ():
            label, path = _build(arg)
            if label in builds:
                raise ValueError(f"--cref-build: label {label!r} given twice")
            builds[label] = path
        for cell in a.cell or CELLS:
            spec = {**S.parse_cell(cell), "keys": a.keys, "value_size": a.value_size,
                    "clients": a.clients, "batch_a": a.batch, "batch_b": a.batch,
                    "rounds": 1, "warmup_rounds": 0, "seed": a.seed, "requests": a.requests}
            specs.append((cell, valkey.normalize_spec(spec)))
    except ValueError as exc:
        ap.error(str(exc))
    def profiles() -> list[dict[str, Any]]:
        cells = []
        for cell, spec in specs:
            prof = cachesim_profile(spec, a.warmup_requests, cref_builds=builds or None,
                                    log=progress.log_line)
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
        "caches": {k: {"size": v[0], "assoc": v[1], "line": v[2]} for k, v in CACHES.items()},
        "warmup_requests": a.warmup_requests}
    if builds:
        doc["cref_builds"] = {label: _binary_facts(p) for label, p in builds.items()}
    return provenance.publish(prog, out, {**doc, "cells": cells})


if __name__ == "__main__":
    sys.exit(main())
