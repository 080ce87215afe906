"""Where a server's CPU time per request goes, per cell of the ``server`` study: natively
(user and system time, calls, bytes, sleeps) and as the model predicts it (user-space work
and system calls, their counts and bytes).

``python -m kvsim.experiments.server_split [-o results/server-split.json] [--cpu CPU ...]
[--rounds N] [--cell CELL ...] [--native FILE] [--no-native]``

1. Natively: c_ref's server and the real Valkey server (as ``kvsim native server`` runs them,
   :mod:`.server`), pinned to one CPU, redis-benchmark pinned to another, both loaded with
   the study's small-scale keys (100,000 of 256 B); per cell of the study
   (:data:`.server_study.CELLS`) and side (prefetch-batch-max-size 0 and 16), interleaved
   rounds (servers, cells and sides in alternating order), each run the cell's client
   command (:func:`.valkey.bench_argv`) under :func:`kvsim.sim.calibrate_loop.client_run`:
   the server's CPU time per request split into user and system time in the proportion of
   ``/proc/PID/stat``'s ticks (summed over the rounds, with the Wilson interval of the
   user share), its ``read``/``write`` calls and bytes (``/proc/PID/io``) and its sleeps;
   every run's replies checked (:func:`.valkey._check_counts`).
2. Predicted: the study's small-scale traces of the same cells (:func:`.server_study.
   traced_side`, the study's requests) simulated on each ``--cpu``: per request the time,
   its system calls' part, that part split into per-call and per-byte charges of ``read``
   and ``write`` by the CPU file's ``[syscall]``, and the calls and bytes per request.

3. The calls' costs, natively, before the servers' runs: ``kvsim-calibrate syscall`` (each
   call alone) and ``kvsim-calibrate syspeer`` (the other end a process on another CPU that
   writes the requests and reads the replies), interleaved (:func:`kvsim.sim.
   calibrate_syscall.measure`): the per-byte costs either way. ``--peer-cpu OUT`` writes the
   first ``--cpu`` file with its ``[syscall]`` per-byte costs from the peer measurement (the
   per-call costs kept) to OUT, and predicts the cells on it too.

``--native FILE`` takes the native part (runs and calls) of an earlier result file (the
prediction is redone). The result file carries the provenance block (command, commit,
machine, date, load).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

RESULT_NAME = "server-split.json"
KEYS = 100_000
VALUE_SIZE = 256
SIDES = {"a": 0, "b": 16}
#: requests per native run: some 1.5-2 s of the server's CPU time each on a 2-vCPU guest
REQUESTS = {"get-p1": 200_000, "get-p10": 1_000_000, "mget-20": 60_000, "mget-100": 15_000,
            "mset-10": 80_000}
SERVERS = ("cref", "valkey")


#: PING cells (``--ping``): redis-benchmark's PING_MBULK at depth 1 and 10, 50 clients
#: (sim/calibrate_loop.py's), the requests per run
PING = {"ping-p1": 400_000, "ping-p10": 2_000_000}


def _spec(cell: str, requests: int) -> dict[str, Any]:
    from kvsim.experiments.server_study import bench_spec

    return bench_spec(cell, KEYS, requests, VALUE_SIZE)


def _argv(bench: Path, port: int, cell: str, requests: int) -> list[str]:
    """The client's command line of one run of ``cell`` (a study cell or a PING cell)."""
    from kvsim.experiments import valkey

    if cell in PING:
        return [str(bench), "-h", "127.0.0.1", "-p", str(port), "-c", "50", "-n",
                str(requests), "-P", cell.split("-p")[1], "-t", "ping_mbulk", "--csv"]
    return valkey.bench_argv(bench, port, _spec(cell, requests))


#: ``--memory``: the memory path taken before each round by the calibration's own dependent
#: chase (``kvsim-calibrate chase``): DRAM's load-to-use latency over
#: :data:`MEMORY_PROBE_BYTES` of 4 KiB and of 2 MiB pages, far past any last level, and, on
#: 2 MiB pages, the sizes of :data:`MEMORY_PROBE_SHARE_BYTES` around the keyspace's
#: (100,000 keys of 256 B take some 40 MB), whose latency says how much of the host's last
#: level the guest holds at the time (the calibrated file's effective L3 is one day's share)
MEMORY_PROBE_BYTES = 256 * 1024 * 1024
MEMORY_PROBE_SHARE_BYTES = tuple(m * 1024 * 1024 for m in (4, 8, 16, 32))
MEMORY_PROBE_LOADS, MEMORY_PROBE_REPEATS = 200_000, 5


def memory_probe() -> dict[str, Any]:
    """ns per dependent load (the fastest of the repeats, as the calibration takes its
    chases): over :data:`MEMORY_PROBE_BYTES` of 4 KiB and of 2 MiB pages (``chase_4k_ns``,
    ``chase_2m_ns``) and over each of :data:`MEMORY_PROBE_SHARE_BYTES` of 2 MiB pages
    (``chase_2m_ns_by_size``, keyed by bytes)."""
    from kvsim.sim.calibrate import run_bench

    out: dict[str, Any] = {}
    for page in ("4k", "2m"):
        sizes = (MEMORY_PROBE_BYTES,) + (MEMORY_PROBE_SHARE_BYTES if page == "2m" else ())
        pts = run_bench("chase", page, MEMORY_PROBE_LOADS, MEMORY_PROBE_REPEATS,
                        *sizes)["points"]
        fastest = {pt["size"]: min(pt["ns"]) for pt in pts}
        out[f"chase_{page}_ns"] = fastest[MEMORY_PROBE_BYTES]
        if page == "2m":
            out["chase_2m_ns_by_size"] = {str(k): v for k, v in sorted(fastest.items())}
    return out


def measure_native(cells: list[str], rounds: int, log=None,
                   memory: bool = False) -> list[dict[str, Any]]:
    """The runs (module docstring, 1.), after one discarded run of each cell and server;
    with ``memory``, each run carries the :func:`memory_probe` taken before its round."""
    from kvsim.experiments import valkey
    from kvsim.experiments.server import CREF_SERVER_ARGS, CrefServer
    from kvsim.experiments.valkey_server import (
        ValkeyServer,
        benchmark_binary,
        pick_cpus,
        populate,
        server_binary,
    )
    from kvsim.sim.calibrate_loop import client_run

    requests = {**REQUESTS, **PING}
    bench = benchmark_binary()
    vbinary, _ = server_binary()
    server_cpu, client_cpu = pick_cpus()
    runs: list[dict[str, Any]] = []
    with CrefServer(cpu=server_cpu, args=CREF_SERVER_ARGS) as cref_srv, \
            ValkeyServer(vbinary, cpu=server_cpu, extra={"io-threads": 1}) as valkey_srv:
        servers = {"cref": cref_srv, "valkey": valkey_srv}
        for srv in servers.values():
            with srv.client() as c:
                s = _spec("get-p1", 1)
                populate(c, s["keys"], s["value_size"], s["seed"])

        def one(name: str, cell: str, side: str, requests: int) -> dict[str, Any]:
            srv = servers[name]
            with srv.client() as c:
                c.config_set("prefetch-batch-max-size", SIDES[side])
                c.call("CONFIG", "RESETSTAT")
                run = client_run(srv.pid, _argv(bench, srv.port, cell, requests),
                                 client_cpu, requests)
                if cell not in PING:
                    valkey._check_counts(c, _spec(cell, requests))
            return {"server": name, "cell": cell, "side": side, **run}

        for name in SERVERS:  # warm-up, discarded
            for cell in cells:
                one(name, cell, "a", requests[cell] // 10)
        for r in range(rounds):
            probe = memory_probe() if memory else {}
            if probe and log:
                log(f"round {r + 1}/{rounds} memory: {probe}")
            names = SERVERS if r % 2 == 0 else SERVERS[::-1]
            for cell in (cells if r % 2 == 0 else cells[::-1]):
                for name in names:
                    for side in (("a", "b") if r % 2 == 0 else ("b", "a")):
                        run = one(name, cell, side, requests[cell])
                        runs.append({**run, "round": r, **probe})
                        if log:
                            log(f"round {r + 1}/{rounds} {name} {cell} {side}: cpu "
                                f"{run['cpu_ns']:,.0f} user {run['user_ns']:,.0f} sys "
                                f"{run['sys_ns']:,.0f} ns/request ({run['ticks']} ticks)")
    return runs


def native_cells(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per (server, cell, side): medians over the rounds of the per-request figures; the
    user/system split of the summed ticks (user share with its Wilson 95 % interval, times
    the median CPU time); the CPU time's median interval and minimum."""
    from kvsim import stats
    from kvsim.stats import wilson

    keys = sorted({(r["server"], r["cell"], r["side"]) for r in runs},
                  key=lambda k: (SERVERS.index(k[0]), k[1], k[2]))
    out = []
    for server, cell, side in keys:
        rs = [r for r in runs if (r["server"], r["cell"], r["side"]) == (server, cell, side)]
        med = {k: statistics.median(r[k] for r in rs) for k in (
            "cpu_ns", "reads", "writes", "read_bytes", "write_bytes", "sleeps", "preempted")}
        ticks = sum(r["ticks"] for r in rs)
        uticks = sum(r["user_ticks"] for r in rs)
        share = uticks / ticks if ticks else 0.0
        lo, hi = wilson(uticks, ticks)
        ci = stats.median_ci95([r["cpu_ns"] for r in rs])
        out.append({"server": server, "cell": cell, "side": side, "rounds": len(rs), **med,
                    "ticks": ticks, "user_ticks": uticks,
                    "user_ns": share * med["cpu_ns"], "sys_ns": (1 - share) * med["cpu_ns"],
                    "user_ns_ci95": [lo * med["cpu_ns"], hi * med["cpu_ns"]],
                    "sys_ns_ci95": [(1 - hi) * med["cpu_ns"], (1 - lo) * med["cpu_ns"]],
                    "cpu_ns_ci95": [ci[0], ci[1]] if ci else None,
                    "min_cpu_ns": min(r["cpu_ns"] for r in rs)})
    return out


def predicted(cell: str, cpu: str, log=None) -> list[dict[str, Any]]:
    """Per side, the study's trace of ``cell`` simulated on ``cpu``: per request the time,
    user part, system calls' part (per call and per byte of read and write, by the CPU
    file's [syscall]), calls and bytes."""
    from kvsim import sim, traces
    from kvsim.experiments.server_study import CELLS, SERVER_ARGS, traced_side
    from kvsim.sim import local as sim_local

    model = sim.load_cpu(cpu)
    n = CELLS[cell][0]
    spec = _spec(cell, n)
    out = []
    for side, batch in SIDES.items():
        res = sim.simulate(traced_side(spec, batch, SERVER_ARGS, log=log), model)
        ghz = res["timing"]["freq_ghz"]
        sc = res.get("syscalls") or {}
        calls = {k: v / n for k, v in (sc.get("calls") or {}).items()}
        nbytes = {k: v / n for k, v in (sc.get("bytes") or {}).items()}
        ns = res["cycles"] / ghz / n
        sys_ns = (sc.get("cycles") or 0) / ghz / n
        parts = {}
        for i, name in enumerate(traces.SYSCALL_NAMES):
            parts[f"{name}_call_ns"] = calls.get(name, 0.0) * model.syscall.call_ns[i]
            parts[f"{name}_byte_ns"] = nbytes.get(name, 0.0) * model.syscall.byte_ns[i]
        out.append({"cell": cell, "side": side, "cpu": sim_local.label(cpu), "requests": n,
                    "ns": ns, "user_ns": ns - sys_ns, "syscall_ns": sys_ns, **parts,
                    "calls": calls, "bytes": nbytes,
                    "instructions": res["instructions"] / n,
                    "misses": {lv.get("name", str(i)): lv["misses"] / n
                               for i, lv in enumerate(res.get("levels") or [])},
                    "llc_misses": _llc_misses(res, n),
                    "syscall_params": {"call_ns": list(model.syscall.call_ns),
                                       "byte_ns": list(model.syscall.byte_ns)}})
        if log:
            log(f"predicted {cell} {side} on {cpu}: {ns:,.0f} ns/request, user "
                f"{ns - sys_ns:,.0f}, system calls {sys_ns:,.0f}")
    return out


def _llc_misses(res: dict[str, Any], n: int) -> dict[str, float]:
    """The last level's misses per request by kind of access (load, store, hardware
    prefetch, writeback), from the simulation's per-tag counts."""
    out: dict[str, float] = {}
    for v in res.get("by_tag") or []:
        if v.get("role") == "LLC":
            out[v["kind"]] = out.get(v["kind"], 0.0) + v["misses"] / n
    return out


def compare(native: list[dict[str, Any]], pred: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per predicted (cell, side, cpu): its parts beside c_ref's server's and Valkey's native
    ones, with predicted / native of the whole, the user part and the system part."""
    nat = {(c["server"], c["cell"], c["side"]): c for c in native}
    out = []
    for p in pred:
        row = {k: p[k] for k in ("cell", "side", "cpu", "ns", "user_ns", "syscall_ns")}
        row["llc_misses"] = p.get("llc_misses") or {}
        row["read_bytes"] = p["bytes"].get("read", 0.0)
        row["write_bytes"] = p["bytes"].get("write", 0.0)
        row["writes"] = p["calls"].get("write", 0.0)
        for s in SERVERS:
            n = nat.get((s, p["cell"], p["side"]))
            if not n:
                continue
            row.update({f"{s}_cpu_ns": n["cpu_ns"], f"{s}_user_ns": n["user_ns"],
                        f"{s}_sys_ns": n["sys_ns"], f"{s}_read_bytes": n["read_bytes"],
                        f"{s}_write_bytes": n["write_bytes"], f"{s}_writes": n["writes"],
                        f"{s}_ratio": p["ns"] / n["cpu_ns"],
                        f"{s}_user_ratio": p["user_ns"] / n["user_ns"] if n["user_ns"] else None,
                        f"{s}_sys_ratio": p["syscall_ns"] / n["sys_ns"] if n["sys_ns"] else None})
        out.append(row)
    return out


def sweep_costs(raw: dict[str, Any]) -> dict[str, float]:
    """The sweep's per-call and per-byte costs (each call alone, no peer)."""
    from kvsim.sim import calibrate_syscall

    return calibrate_syscall.alone({k: v for k, v in raw.items() if k != "peer"})


def write_peer_cpu(src: Path, dst: Path, calls: dict[str, Any]) -> None:
    """``src`` (a CPU file) written to ``dst`` with ``[syscall]``'s per-byte costs those of
    the peer measurement in ``calls`` (:func:`kvsim.sim.calibrate_syscall.section`'s), its
    per-call costs kept; the parser must take it."""
    import tomllib

    from kvsim.sim.calibrate import to_toml
    from kvsim.sim.calibrate_syscall import section
    from kvsim.sim.config import parse_cpu

    doc = tomllib.loads(src.read_text())
    new = section(calls)
    sec = doc["syscall"]
    for c in ("read", "write"):
        sec[f"{c}_byte_ns"] = new[f"{c}_byte_ns"]
        sec["src"][f"{c}_byte_ns"] = (new["src"][f"{c}_byte_ns"] + "; python -m "
                                      "kvsim.experiments.server_split --peer-cpu")
    doc.setdefault("notes", []).append(
        f"{src.name} with [syscall]'s per-byte costs measured with a peer on another CPU "
        "(kvsim-calibrate syspeer; python -m kvsim.experiments.server_split --peer-cpu)")
    text = to_toml(doc)
    parse_cpu(tomllib.loads(text), str(dst))
    dst.write_text(text)


def predicted_ping(cpu: str, traces_dir: Path, log=None) -> list[dict[str, Any]]:
    """c_ref's server traced under PING_MBULK at depth 1 and 10, 50 clients
    (:func:`kvsim.sim.calibrate_loop.traced_ping`, made once in ``traces_dir``), simulated
    on ``cpu`` (:func:`kvsim.sim.calibrate_loop.predicted`): per request the user part and
    the calls."""
    from kvsim.sim import calibrate_loop as sk

    out = []
    for depth in (1, 10):
        n = sk.TRACED_REQUESTS[depth]
        t = traces_dir / f"ping-{depth}.kvt"
        if not t.is_file():
            sk.traced_ping(depth, 50, n, t)
        p = sk.predicted(t, cpu, n)
        out.append({"cell": f"ping-p{depth}", "requests": n, **p})
        if log:
            log(f"predicted ping-p{depth} on {cpu}: user {p['user_ns']:,.0f} ns/request")
    return out


def loop_measure(runs: list[dict[str, Any]], ping: list[dict[str, Any]],
                 bias: list[dict[str, Any]] | None) -> dict[str, Any]:
    """The server loop's measurement as ``kvsim calibrate`` takes it
    (:func:`kvsim.sim.calibrate_loop.measure`'s shape): c_ref's server's PING runs (each with
    its depth and 50 clients), the sysbias runs and the traced PINGs' predicted user time."""
    from kvsim.sim.calibrate_loop import PLAN

    pings = [{**r, "depth": int(r["cell"].split("-p")[1]), "clients": 50} for r in runs
             if r["server"] == "cref" and r["cell"] in PING]
    if not pings:
        raise ValueError("no PING runs of c_ref's server (run with --ping)")
    return {"plan": [list(p) for p in PLAN], "rounds": len({r["round"] for r in pings}),
            "runs": pings,
            "tick_bias": bias or [],
            "ping_user_ns": [{"depth": int(p["cell"].split("-p")[1]), "user_ns": p["user_ns"]}
                             for p in ping]}


def write_loop_cpu(src: Path, dst: Path, calls: dict[str, Any],
                   loop: dict[str, Any]) -> dict[str, Any]:
    """``src`` with ``[syscall]`` from this run, as ``kvsim calibrate`` writes it
    (:func:`kvsim.sim.calibrate_syscall.section`: the sweep's per-call intercepts, the
    peer's per-byte costs, ``write_ns`` the intercept plus the loop's kernel time per write,
    here always from the whole CPU time) and ``[meta] syscall_loop``; returns the latter."""
    import tomllib

    from kvsim.sim.calibrate import to_toml
    from kvsim.sim.calibrate_syscall import loop_meta, section
    from kvsim.sim.config import parse_cpu

    raw = {**{k: v for k, v in calls.items() if k not in ("write_wake_ns", "loop")},
           "loop": loop}
    doc = tomllib.loads(src.read_text())
    meta = loop_meta(raw, method="cpu")
    sec = section(raw, method="cpu")
    doc["syscall"] = sec
    doc.setdefault("meta", {})["syscall_loop"] = meta
    doc.setdefault("notes", []).append(
        f"{src.name} with [syscall] from python -m kvsim.experiments.server_split --loop-cpu "
        "(per-byte costs with a peer on another CPU, the loop's kernel time per write from "
        "PING's whole CPU time)")
    text = to_toml(doc)
    parse_cpu(tomllib.loads(text), str(dst))
    dst.write_text(text)
    return meta


def markdown(doc: dict[str, Any]) -> str:
    """Natively per cell at batch 0 (c_ref's server and Valkey), the tick split's bias, the
    calls' costs, and the prediction's parts on each CPU file beside c_ref's server."""
    nat = doc["native"]
    out = ["| cell | server | CPU ns/request [95 %] | user, ticks [95 %] | system, ticks | "
           "reads | writes | bytes in | bytes out |", "|" + "---|" * 9]
    for c in nat:
        if c["side"] != "a":
            continue
        ci, u = c.get("cpu_ns_ci95") or [c["cpu_ns"]] * 2, c["user_ns_ci95"]
        out.append(f"| {c['cell']} | {c['server']} | {c['cpu_ns']:,.0f} [{ci[0]:,.0f}, "
                   f"{ci[1]:,.0f}] | {c['user_ns']:,.0f} [{u[0]:,.0f}, {u[1]:,.0f}] | "
                   f"{c['sys_ns']:,.0f} | {c['reads']:.3f} | {c['writes']:.3f} | "
                   f"{c['read_bytes']:,.0f} | {c['write_bytes']:,.0f} |")
    if doc.get("tick_bias"):
        out += ["", "| sysbias: user spin ns per round trip | CPU ns per round trip | "
                "user by ticks | ticks' user beyond the spin |", "|" + "---|" * 4]
        from kvsim.sim.calibrate_loop import bias_rows

        for b in bias_rows(doc["tick_bias"]):
            out.append(f"| {b['spun_ns']:,.0f} | {b['cpu_ns']:,.0f} | "
                       f"{b['tick_user_ns']:,.0f} | {b['tick_user_ns'] - b['spun_ns']:,.0f} |")
    sc = doc.get("syscalls")
    if sc:
        a, w = sc["alone"], sc["with_peer"]
        out += ["", f"Per byte: each call alone (`kvsim-calibrate syscall`) read "
                f"{a['read_byte_ns']:.3f} ns/B, write {a['write_byte_ns']:.3f} ns/B; with a "
                f"peer on the other CPU (`kvsim-calibrate syspeer`) read "
                f"{w['read_byte_ns']:.3f} ns/B, write {w['write_byte_ns']:.3f} ns/B."]
    if doc.get("loop"):
        lp = doc["loop"]
        users = ", ".join(f"{p['cell']} {p['user_ns']:,.0f} ns" for p in lp["ping_predicted"])
        out += ["", f"The loop's kernel time per write from PING's whole CPU time: "
                f"{lp['residue_per_write_ns']:,.0f} ns (median of "
                f"{len(lp['runs'])} runs; predicted user time per PING: {users})."]
    out += ["", "| cell | side | CPU file | predicted ns/request | user | system calls | "
            "last-level load / store misses | c_ref CPU ns | predicted / c_ref | "
            "predicted / Valkey |", "|" + "---|" * 10]
    for r in sorted(doc["compare"], key=lambda r: (r["cell"], r["side"])):
        if "cref_cpu_ns" not in r:
            continue
        cpu = r["cpu"].rsplit("/", 1)[-1]
        v = f"{r['valkey_ratio']:.2f}" if r.get("valkey_ratio") else ""
        m = r.get("llc_misses") or {}
        out.append(f"| {r['cell']} | {r['side']} | {cpu} | {r['ns']:,.0f} | "
                   f"{r['user_ns']:,.0f} | {r['syscall_ns']:,.0f} | {m.get('load', 0):.1f} / "
                   f"{m.get('store', 0):.1f} | {r['cref_cpu_ns']:,.0f} | "
                   f"{r['cref_ratio']:.2f} | {v} |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    from kvsim import provenance
    from kvsim.experiments.server_study import CELLS
    from kvsim.experiments.valkey_server import ToolMissing, ValkeyError
    from kvsim.sim import calibrate_loop, calibrate_syscall
    from kvsim.sim.calibrate_loop import LoopError
    from kvsim.sim.config import ConfigError

    ap = argparse.ArgumentParser(prog="python -m kvsim.experiments.server_split",
                                 description="the server study's cells: CPU time per request "
                                             "split into user and system time, natively and "
                                             "as predicted")
    ap.add_argument("-o", "--output", default=f"results/{RESULT_NAME}")
    ap.add_argument("--cpu", action="append", default=None,
                    help="CPU (preset, `local` or a CPU file) to simulate the cells on "
                         "(repeatable; default: local)")
    ap.add_argument("--cell", action="append", choices=list(CELLS), default=None)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--native", default=None,
                    help="take the native runs of this result file instead of measuring")
    ap.add_argument("--no-native", action="store_true", help="predictions only")
    ap.add_argument("--ping", action="store_true",
                    help="native runs of PING_MBULK at depth 1 and 10 (cells ping-p1, "
                         "ping-p10) besides the cells")
    ap.add_argument("--bias", action="store_true",
                    help="also kvsim-calibrate sysbias: the tick-sampled user time of a "
                         "known user-mode spin between round trips with a peer")
    ap.add_argument("--short", action="store_true",
                    help="native runs of the study's requests per run (server_study.CELLS, "
                         "small scale) instead of REQUESTS")
    ap.add_argument("--loop-cpu", default=None,
                    help="write the first --cpu file with [syscall] from this run (peer "
                         "per-byte costs; the loop's kernel time per write from the PING "
                         "cells' whole CPU time) here, and predict on it too (needs --ping "
                         "runs)")
    ap.add_argument("--memory", action="store_true",
                    help="before each native round, the memory path by the calibration's "
                         "chase (kvsim-calibrate chase: 256 MiB of 4 KiB and of 2 MiB "
                         "pages, 4-32 MiB of 2 MiB pages), carried by each run")
    ap.add_argument("--no-predict", action="store_true",
                    help="native runs only (predict later with --native)")
    ap.add_argument("--peer-cpu", default=None,
                    help="write the first --cpu file with the peer measurement's per-byte "
                         "[syscall] costs here, and predict on it too")
    a = ap.parse_args(argv)
    out = Path(a.output)
    if provenance.out_dir_missing(out):
        return 2
    cells = a.cell or list(CELLS)
    log = lambda m: print(f"# {m}", file=sys.stderr, flush=True)  # noqa: E731
    if a.short:
        REQUESTS.update({c: CELLS[c][0] for c in cells})
    doc: dict[str, Any] = {"keys": KEYS, "value_size": VALUE_SIZE, "cells": cells,
                           "native_requests": {c: REQUESTS[c] for c in cells}}
    try:
        calls = None
        if a.native:
            try:
                prev = json.loads(Path(a.native).read_text())
                runs, calls = prev["runs"], prev.get("syscalls")
            except (OSError, ValueError, KeyError) as e:
                print(f"server_split: {a.native}: not a server-split result ({e})",
                      file=sys.stderr)
                return 2
            doc["native_from"] = {"file": a.native, "provenance": prev.get("provenance")}
            if prev.get("tick_bias"):
                doc["tick_bias"] = prev["tick_bias"]
        elif a.no_native:
            runs = []
        else:
            calls = calibrate_syscall.measure(quick=True, log=log, loop=False)
            if a.bias:
                doc["tick_bias"] = calibrate_loop.measure_bias(a.rounds, log)
            runs = measure_native(cells + list(PING) * a.ping, a.rounds, log=log,
                                  memory=a.memory)
        cpus = list(a.cpu or ["local"])
        if calls:
            doc["syscalls"] = {**calls, "alone": sweep_costs(calls),
                               "with_peer": calibrate_syscall.alone(calls)}
        if a.peer_cpu and not a.no_predict:
            if not (calls and calls.get("peer")):
                print("server_split: --peer-cpu needs the peer measurement (not --no-native)",
                      file=sys.stderr)
                return 2
            write_peer_cpu(Path(cpus[0]), Path(a.peer_cpu), calls)
            cpus.append(a.peer_cpu)
        if a.loop_cpu and not a.no_predict:
            if not (calls and calls.get("peer")):
                print("server_split: --loop-cpu needs the peer measurement (not --no-native)",
                      file=sys.stderr)
                return 2
            with tempfile.TemporaryDirectory() as tmp:
                ping = predicted_ping(cpus[0], Path(tmp), log=log)
            costs = calibrate_syscall.alone(calls)
            k = write_loop_cpu(Path(cpus[0]), Path(a.loop_cpu), calls, loop_measure(
                runs, ping, doc.get("tick_bias")))
            doc["loop"] = {"cpu": cpus[0], "ping_predicted": ping, "costs": costs,
                           "residue_per_write_ns": k["residue_per_write_ns"],
                           "runs": k["cpu_runs"], "method": k}
            cpus.append(a.loop_cpu)
        pred = [] if a.no_predict else [p for cpu in cpus for cell in cells
                                        for p in predicted(cell, cpu, log=log)]
    except (OSError, subprocess.SubprocessError, ToolMissing, ValkeyError, LoopError,
            ConfigError, ValueError) as e:
        print(f"server_split: {e}", file=sys.stderr)
        return 1
    native = native_cells(runs)
    doc.update({"runs": runs, "native": native, "predicted": pred,
                "compare": compare(native, pred),
                "note": "native: per request, medians over interleaved rounds; user/system "
                        "split by /proc/PID/stat ticks summed over the rounds (Wilson 95 % "
                        "interval of the user share); predicted: the server study's "
                        "small-scale traces simulated, system calls charged by the CPU "
                        "file's [syscall]"})
    provenance.write_result(out, doc)
    print(markdown(doc))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
