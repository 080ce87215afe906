"""Where a server's CPU time goes when a request does no keyspace work: c_ref's server under
redis-benchmark's PING_MBULK, natively and as the trace model charges it.

``python -m kvsim.experiments.server_kernel [-o results/server-kernel-ping.json]
[--cpu CPU ...] [--rounds N] [--quick]``

1. Natively (:func:`kvsim.sim.calibrate_loop.measure`): c_ref's server pinned to one CPU,
   the client to another, at pipeline depths 1 and 10 and 1, 10 and 50 clients, interleaved
   rounds: per request the server's user and system CPU time, its reads, writes and bytes,
   its sleeps; and the *residue*, the system time beyond what the loopback microbenchmark
   (``kvsim-calibrate syscall``) gives for those reads and writes alone, per write and per
   sleep.
2. Traced: the same server with ``--trace`` serves the same PINGs (50 clients, depths 1 and
   10); the trace's measured part (the PINGs: :func:`kvsim.traces.commands.measured_trace`) is
   simulated on each ``--cpu``: predicted ns per request, its system calls' part and their
   counts per request, beside the native figures.

PING is not a validation row: this is the measurement the server loop's calibration rests
on (sim/calibrate_loop.py), and the check of what the model charges a request besides its
keyspace work. The result file carries the provenance block (command, commit, machine,
date, load).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

# the traced PINGs are the calibration's own (sim/calibrate_loop.py): one implementation
from kvsim.sim.calibrate_loop import TRACED_REQUESTS, predicted, traced_ping

RESULT_NAME = "server-kernel-ping.json"
#: (pipeline depth, clients) measured natively; the traced ones are the server study's 50
PLAN = ((1, 1), (10, 1), (1, 10), (10, 10), (1, 50), (10, 50))
TRACED = ((1, 50), (10, 50))
def markdown(doc: dict[str, Any]) -> str:
    """The result file as two tables: native per (depth, clients), and the traced PINGs'
    prediction beside the native figures at the same depth and clients."""
    out = ["| depth | clients | CPU ns/request | user | system | writes | sleeps | "
           "residue ns/write | residue ns/sleep |", "|" + "---|" * 9]
    for c in doc["native"]:
        # per sleep where (nearly) every round trip sleeps: then the residue is the sleeps'
        per_sleep = c.get("residue_per_sleep_ns") if c["sleeps"] >= 0.5 * c["writes"] else None
        out.append(f"| {c['depth']} | {c['clients']} | {c['cpu_ns']:,.0f} | "
                   f"{c['user_ns']:,.0f} | {c['sys_ns']:,.0f} | {c['writes']:.3f} | "
                   f"{c['sleeps']:.4f} | {c['residue_per_write_ns']:,.0f} | "
                   f"{'' if per_sleep is None else f'{per_sleep:,.0f}'} |")
    a = doc["alone"]
    out += ["", f"Alone (`kvsim-calibrate syscall`): read {a['read_ns']:,.0f} ns + "
            f"{a['read_byte_ns']:.3f} ns/B, write {a['write_ns']:,.0f} ns + "
            f"{a['write_byte_ns']:.3f} ns/B.", "",
            "| depth | clients | CPU | predicted ns/request | user | system calls | "
            "native CPU ns/request | predicted / native |", "|" + "---|" * 8]
    nat = {(c["depth"], c["clients"]): c for c in doc["native"]}
    for p in doc["predicted"]:
        n = nat.get((p["depth"], p["clients"]))
        cpu = p["cpu"].rsplit("/", 1)[-1]
        out.append(f"| {p['depth']} | {p['clients']} | {cpu} | {p['ns']:,.0f} | "
                   f"{p['user_ns']:,.0f} | {p['syscall_ns']:,.0f} | "
                   f"{n['cpu_ns']:,.0f} | {p['ns'] / n['cpu_ns']:.2f} |" if n else "")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    from kvsim import provenance
    from kvsim.experiments.valkey_server import ToolMissing, ValkeyError
    from kvsim.sim import calibrate_loop, calibrate_syscall
    from kvsim.sim.config import ConfigError

    ap = argparse.ArgumentParser(prog="python -m kvsim.experiments.server_kernel",
                                 description="c_ref's server under PINGs: where its CPU "
                                             "time goes, natively and as the model charges it")
    ap.add_argument("-o", "--output", default=f"results/{RESULT_NAME}")
    ap.add_argument("--cpu", action="append", default=None,
                    help="CPU (preset, `local` or a CPU file) to simulate the traced PINGs "
                         "on (repeatable; default: local)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="fewer requests per native run")
    a = ap.parse_args(argv)
    out = Path(a.output)
    if provenance.out_dir_missing(out):
        return 2
    log = lambda m: print(m, file=sys.stderr)  # noqa: E731
    try:
        alone = calibrate_syscall.alone(calibrate_syscall.measure(quick=True, loop=False,
                                                                  peer=False))
        native = calibrate_loop.measure(PLAN, quick=a.quick, rounds=a.rounds, log=log)
        traced = []
        with tempfile.TemporaryDirectory() as tmp:
            for depth, clients in TRACED:
                n = TRACED_REQUESTS[depth]
                t = traced_ping(depth, clients, n, Path(tmp) / f"ping-{depth}.kvt")
                for cpu in a.cpu or ["local"]:
                    traced.append({"depth": depth, "clients": clients, "requests": n,
                                   **predicted(t, cpu, n)})
    except (OSError, subprocess.SubprocessError, ToolMissing, ValkeyError, ConfigError) as e:
        print(f"server_kernel: {e}", file=sys.stderr)
        return 1
    doc = {"alone": alone, "measured": native,
           "native": calibrate_loop.by_cell(native, alone), "predicted": traced,
           "note": "native: c_ref's server under redis-benchmark PING_MBULK, per request: "
                   "its CPU time split into user and system time, its read/write calls and "
                   "bytes and its sleeps (medians of interleaved rounds); residue: system "
                   "time beyond the microbenchmark's costs of the reads and writes alone "
                   "(kvsim-calibrate syscall); predicted: the traced server's PINGs "
                   "simulated, per request"}
    provenance.write_result(out, doc)
    for c in doc["native"]:
        print(f"native depth {c['depth']:>2} x {c['clients']:>2}: cpu {c['cpu_ns']:8,.0f} "
              f"user {c['user_ns']:7,.0f} sys {c['sys_ns']:8,.0f} ns/req; writes "
              f"{c['writes']:.3f} sleeps {c['sleeps']:.4f}; residue "
              f"{c['residue_per_write_ns']:8,.0f} ns/write")
    for p in traced:
        print(f"predicted depth {p['depth']:>2} x {p['clients']} on {p['cpu']}: "
              f"{p['ns']:,.0f} ns/req, user {p['user_ns']:,.0f}, system calls "
              f"{p['syscall_ns']:,.0f}; calls/req {p['calls']}")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
