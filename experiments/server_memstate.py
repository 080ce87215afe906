"""The server study's baselines against the memory path of the hour: c_ref's server and Valkey
natively at batch 0 and 16 (``server_split --memory``: every round with the calibration's own
chases before it), beside the study's traces predicted on the study's calibrated file and on
that file with the memory path of a calibration taken in the same sitting as the native runs.

The memory path of a CPU file is its cache levels (sizes, ways, latencies, miss buffers,
replacement, prefetchers), its DRAM latency and its page walk (``[tlb]`` walk_latency,
walk_extra_4k, walk_reads, host_page_size), the parts ``server_heldout`` swaps; everything
else (the core, ``[work]``, ``[syscall]``, the store buffer) stays the study file's. Every
figure is measured by ``kvsim calibrate``; nothing is fitted to the native rows.

Per cell and side: the predicted time per request, its user part and system calls' part,
against both servers' CPU time per request (median of the rounds, 95 % interval) and the
tick split of it; and, per round, the chases' ns per load at the keyspace's scale (4-32 MiB
of 2 MiB pages) and past it (256 MiB), beside the same sizes in each CPU file's own chases
(``[meta.raw]``): how much of the host's last level the guest held then.

    python -m kvsim.experiments.server_memstate --native FILE --cpu STUDY_FILE
        --memory-from CPUFILE [--cell CELL ...] [--out FILE]

Writes results/server-memstate.json. The traces are the study's (``server_study.
traced_side``, made once and kept).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tomllib
from dataclasses import replace
from pathlib import Path
from typing import Any

RESULT_NAME = "server-memstate.json"
DEFAULT_CELLS = ("get-p10", "mget-20", "mget-100")


def with_memory_path(dst: Any, src: Any) -> Any:
    """``dst`` with ``src``'s memory path (module docstring)."""
    from kvsim.experiments.server_heldout import WALK_FIELDS

    return replace(dst, caches=src.caches, dram_latency_ns=src.dram_latency_ns,
                   tlb=replace(dst.tlb, **{k: getattr(src.tlb, k) for k in WALK_FIELDS}))


def file_chases(path: str) -> dict[str, float]:
    """A CPU file's own chases (``[meta.raw]`` sizes and chase_ns_fastest), by bytes; none
    for a preset's name."""
    if not Path(path).is_file():
        return {}
    raw = tomllib.loads(Path(path).read_text()).get("meta", {}).get("raw", {})
    sizes, ns = raw.get("sizes", []), raw.get("chase_ns_fastest", [])
    return {str(s): x for s, x in zip(sizes, ns, strict=True)}


def memory_rounds(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The probe of each native round (``server_split.memory_probe``), once per round."""
    seen: dict[int, dict[str, Any]] = {}
    for r in runs:
        if "chase_2m_ns" in r and r["round"] not in seen:
            seen[r["round"]] = {"round": r["round"], "chase_4k_ns": r["chase_4k_ns"],
                                "chase_2m_ns": r["chase_2m_ns"],
                                "chase_2m_ns_by_size": r.get("chase_2m_ns_by_size", {})}
    return [seen[k] for k in sorted(seen)]


def native_by_cell(runs: list[dict[str, Any]]) -> dict[tuple[str, str, str], dict[str, Any]]:
    from kvsim.experiments.server_split import native_cells

    return {(n["server"], n["cell"], n["side"]): n for n in native_cells(runs)}


def predict(cell: str, model: Any) -> dict[str, dict[str, float]]:
    """Per side: ns per request, its user part and system calls' part, last-level misses."""
    from kvsim import sim
    from kvsim.experiments.server_split import SIDES, _llc_misses, _spec
    from kvsim.experiments.server_study import CELLS, SERVER_ARGS, traced_side

    n = CELLS[cell][0]
    out = {}
    for side, batch in SIDES.items():
        res = sim.simulate(traced_side(_spec(cell, n), batch, SERVER_ARGS), model)
        ghz = res["timing"]["freq_ghz"]
        ns = res["cycles"] / ghz / n
        sys_ns = ((res.get("syscalls") or {}).get("cycles") or 0) / ghz / n
        llc = _llc_misses(res, n)
        out[side] = {"ns": ns, "user_ns": ns - sys_ns, "syscall_ns": sys_ns,
                     "instructions": res["instructions"] / n,
                     "llc_load_misses": llc.get("load", 0.0),
                     "llc_store_misses": llc.get("store", 0.0)}
    return out


def run(native: str, cpu: str, memory_from: str, cells: list[str]) -> dict[str, Any]:
    from kvsim import sim

    prev = json.loads(Path(native).read_text())
    runs = prev["runs"]
    nat = native_by_cell(runs)
    study = sim.load_cpu(cpu)
    models = {cpu: study,
              f"{cpu} with the memory path of {memory_from}":
                  with_memory_path(study, sim.load_cpu(memory_from))}
    rows = []
    for cell in cells:
        for label, m in models.items():
            p = predict(cell, m)
            for side in ("a", "b"):
                row = {"cell": cell, "side": side, "cpu": label, **p[side]}
                for server in ("cref", "valkey"):
                    n = nat.get((server, cell, side))
                    if n:
                        row[f"{server}_cpu_ns"] = n["cpu_ns"]
                        row[f"{server}_cpu_ns_ci95"] = n["cpu_ns_ci95"]
                        row[f"{server}_user_ns"] = n["user_ns"]
                        row[f"{server}_sys_ns"] = n["sys_ns"]
                        row[f"ratio_{server}"] = p[side]["ns"] / n["cpu_ns"]
                rows.append(row)
            if "a" in p and "b" in p:
                rows[-1]["pred_speedup"] = p["a"]["ns"] / p["b"]["ns"]
    speed = {}
    for server in ("cref", "valkey"):
        for cell in cells:
            a, b = nat.get((server, cell, "a")), nat.get((server, cell, "b"))
            if a and b:
                speed[f"{server}/{cell}"] = a["cpu_ns"] / b["cpu_ns"]
    rounds = memory_rounds(runs)
    probe = {}
    if rounds:
        sizes = sorted({s for r in rounds for s in r["chase_2m_ns_by_size"]}, key=int)
        probe = {"native_2m_ns_by_size": {s: statistics.median(
                     r["chase_2m_ns_by_size"][s] for r in rounds) for s in sizes},
                 "native_4k_256mib_ns": statistics.median(r["chase_4k_ns"] for r in rounds),
                 "files": {f: {s: file_chases(f).get(s) for s in sizes}
                           for f in (cpu, memory_from)}}
    return {"native_from": {"file": native, "provenance": prev.get("provenance")},
            "cpu": cpu, "memory_from": memory_from, "cells": cells, "rows": rows,
            "native_speedups": speed, "memory_rounds": rounds, "memory_probe": probe}


def _f(x: float | None, fmt: str = ",.0f") -> str:
    return "" if x is None else format(x, fmt)


def markdown(doc: dict[str, Any]) -> str:
    lines = ["| cell | side | CPU file | predicted ns/request | user | system calls | "
             "LL load misses | c_ref CPU ns [95 %] (user by ticks) | Valkey CPU ns | "
             "predicted / c_ref | predicted / Valkey |", "|---" * 11 + "|"]
    for r in doc["rows"]:
        ci = r.get("cref_cpu_ns_ci95") or [None, None]
        name = Path(r["cpu"].split(" with ")[0]).name + (
            f" + memory path of {Path(doc['memory_from']).name}" if " with " in r["cpu"]
            else "")
        lines.append(
            f"| {r['cell']} | {r['side']} | {name} | {_f(r['ns'])} | {_f(r['user_ns'])} | "
            f"{_f(r['syscall_ns'])} | {_f(r['llc_load_misses'], '.1f')} | "
            f"{_f(r.get('cref_cpu_ns'))} [{_f(ci[0])}, {_f(ci[1])}] "
            f"({_f(r.get('cref_user_ns'))}) | {_f(r.get('valkey_cpu_ns'))} | "
            f"{_f(r.get('ratio_cref'), '.2f')} | {_f(r.get('ratio_valkey'), '.2f')} |")
    pr = doc.get("memory_probe") or {}
    if pr:
        sizes = list(pr["native_2m_ns_by_size"])
        lines += ["", "| chase, 2 MiB pages (ns/load) | " + " | ".join(
            f"{int(s) >> 20} MiB" for s in sizes) + " |", "|---|" + "---|" * len(sizes),
            "| native rounds (median) | " + " | ".join(
                _f(pr["native_2m_ns_by_size"][s], ".1f") for s in sizes) + " |"]
        for f, v in pr["files"].items():
            lines.append(f"| {Path(f).name} | " + " | ".join(
                _f(v.get(s), ".1f") for s in sizes) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    from kvsim import provenance
    from kvsim.experiments.server_study import CELLS
    from kvsim.experiments.valkey_server import ToolMissing, ValkeyError
    from kvsim.sim.config import ConfigError

    ap = argparse.ArgumentParser(prog="python -m kvsim.experiments.server_memstate",
                                 description="the server study's cells predicted with the "
                                             "memory path of the native runs' sitting")
    ap.add_argument("--native", required=True,
                    help="a server_split result with native runs (--memory for the chases)")
    ap.add_argument("--cpu", required=True, help="the study's calibrated CPU file (or a "
                                                 "preset)")
    ap.add_argument("--memory-from", required=True,
                    help="a CPU file kvsim calibrate wrote in the native runs' sitting (or "
                         "a preset)")
    ap.add_argument("--cell", action="append", choices=list(CELLS), default=None)
    provenance.add_out_option(ap, RESULT_NAME)
    a = ap.parse_args(argv)
    out = provenance.out_path(a.out, RESULT_NAME)
    if provenance.out_dir_missing(out):
        return 2
    if not Path(a.native).is_file():
        print(f"server_memstate: {a.native}: no such file", file=sys.stderr)
        return 2
    try:
        doc = run(a.native, a.cpu, a.memory_from, a.cell or list(DEFAULT_CELLS))
    except (OSError, ToolMissing, ValkeyError, ConfigError, ValueError, KeyError) as e:
        print(f"server_memstate: {e}", file=sys.stderr)
        return 1
    provenance.write_result(out, {**doc, "note": (
        "per request: ns predicted (system calls included) against the native servers' CPU "
        "time (schedstat), user by /proc/PID/stat ticks; the memory path (caches, DRAM "
        "latency, walk) of --memory-from put into --cpu; chases: kvsim-calibrate chase, "
        "fastest of 5 repeats, before each native round")})
    print(markdown(doc))
    print(f"# wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
