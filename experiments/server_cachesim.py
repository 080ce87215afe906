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
``results/native-server-cachesim.json``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

from kvsim.experiments import callgrind, valkey
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


def cachesim_profile(spec: dict, warmup_requests: int, top: int = 12,
                     log=None) -> dict[str, Any]:
    """Per-request cache and branch figures of both servers for one cell (prefetch at
    ``batch_a``), with the functions that miss most."""
    n = valkey.normalize_spec(spec)["requests"]
    caches = tuple(f"--{k}={','.join(map(str, v))}" for k, v in CACHES.items())
    out: dict[str, Any] = {}
    for name, prof in S.callgrind_runs(spec, spec["batch_a"],
                                       ("--cache-sim=yes", "--branch-sim=yes", *caches),
                                       instr_at_start=False, warmup_requests=warmup_requests):
        per_fn = prof.self_costs
        out[name] = {**_per_request(prof.totals, n),
                     "top_ll_data_misses": _top(per_fn, ("DLmr", "DLmw"), n, top),
                     "top_d1_misses": _top(per_fn, ("D1mr", "D1mw"), n, top),
                     "top_i1_misses": _top(per_fn, ("I1mr",), n, top),
                     "top_cond_mispredicts": _top(per_fn, ("Bcm",), n, top)}
        if log:
            log(f"{name}: " + ", ".join(f"{k} {out[name][k]:,.1f}" for k in FIGURES))
    out["ratio_cref_over_valkey"] = {
        k: (round(out["cref"][k] / out["valkey"][k], 3) if out["valkey"][k] else None)
        for k in FIGURES}
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
    ap.add_argument("--out", default=None, help=f"result file (default results/{RESULT_NAME})")
    ap.add_argument("--render", metavar="RESULT", default=None,
                    help="print the Markdown table of a result file and exit")
    a = ap.parse_args(argv)
    if a.render:
        return S.render_result(prog, a.render, table_markdown)
    out = Path(a.out) if a.out else provenance.default_result_path(RESULT_NAME)
    specs = []
    try:
        for cell in a.cell or CELLS:
            spec = {**S.parse_cell(cell), "keys": a.keys, "value_size": a.value_size,
                    "clients": a.clients, "batch_a": a.batch, "batch_b": a.batch,
                    "rounds": 1, "warmup_rounds": 0, "seed": a.seed, "requests": a.requests}
            specs.append((cell, valkey.normalize_spec(spec)))
    except ValueError as exc:
        ap.error(str(exc))
    cells = []
    try:
        for cell, spec in specs:
            prof = cachesim_profile(spec, a.warmup_requests,
                                    log=lambda s: print(f"# {s}", file=sys.stderr, flush=True))
            r = prof["ratio_cref_over_valkey"]
            print(f"{cell}: c_ref/Valkey per request: instructions {r['instructions']}, "
                  f"LL data misses {r['ll_data_misses']}, I1 misses {r['i1_misses']}, "
                  f"cond mispredicts {r['cond_mispredicts']}", flush=True)
            cells.append({"cell": cell, "spec": spec, **prof})
    except S.ToolMissing as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 2
    except (S.ValkeyError, OSError, subprocess.SubprocessError,
            callgrind.CallgrindFormatError) as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 1
    return provenance.publish(prog, out, {
        "experiment": "native_server_cachesim",
        "caches": {k: {"size": v[0], "assoc": v[1], "line": v[2]} for k, v in CACHES.items()},
        "warmup_requests": a.warmup_requests, "cells": cells})


if __name__ == "__main__":
    sys.exit(main())
