"""The server's user-space code per request: what it is, how fast it runs natively, and what
the model predicts for it before and after the ``server`` kind of work (issue 43 section 3,
issue 42 section 2).

``python -m kvsim.experiments.server_user [-o results/server-user.json] --before CPU
--after CPU [--rounds N] [--ping results/server-kernel-ping.json] [--quick]``

1. Natively: c_ref's server code between read() and write() (``kvsim-cref serverloop``,
   c_ref/serverloop.c: the server's entry point ksServerSessionFeed, not a copy) serving
   PING and GET at one and ten requests per read, ``--rounds`` invocations interleaved
   (A B A B over the four), each with three rounds of both arms: ``none`` (segments back to
   back: the code hot in every predictor) and ``loopback`` (a TCP loopback write and read
   before each segment: a server's calls between reads). Per request: ns of the segment less
   the clock's cost, median with its 95 % interval and minimum over all rounds; the
   after-effect of the calls (loopback minus none, paired per round).
2. Traced: the same loop traced (the ``none`` arm's requests), instructions per request by
   kind of work (traces/work.py) and the native instructions per cycle at the ``--after``
   file's clock.
3. Predicted: each trace simulated with ``--before`` (no ``server`` rate: generic's) and
   ``--after`` (``[work] server`` measured by ``kvsim calibrate``), against the native
   ``loopback`` median.
4. The real server: with ``--ping``, c_ref's server traced under redis-benchmark's
   PING_MBULK (kvsim.experiments.server_kernel, 50 clients, depths 1 and 10) is simulated on
   both files: predicted user ns per request against the native user time of that file (its
   tick-sampled interval, kvsim.experiments.syscall_after), and the whole CPU time.

The result carries the provenance block (command, commit, machine, date, load).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

RESULT_NAME = "server-user.json"
#: (command, requests per read) of the native and traced runs
PLAN = (("ping", 1), ("ping", 10), ("get", 1), ("get", 10))
ARMS = ("none", "loopback")
#: serverloop's options per run (segments per arm and round; keys of the GETs)
LOOP = {"iters": 20_000, "keys": 1000}
TRACE_ITERS = 4000


def _cref(*args: object) -> str:
    from kvsim import artifacts

    exe = artifacts.path(artifacts.CREF_CLI)
    return subprocess.run([str(exe), *map(str, args)], capture_output=True, text=True,
                          check=True).stdout


def _loop_args(command: str, depth: int, iters: int) -> list[object]:
    return ["--command", command, "--depth", depth, "--iters", iters, "--keys", LOOP["keys"]]


def measure(rounds: int, iters: int, log=lambda m: None) -> list[dict]:
    """``rounds`` serverloop runs of every :data:`PLAN` entry, interleaved."""
    runs = []
    for r in range(rounds):
        for command, depth in PLAN if r % 2 == 0 else PLAN[::-1]:
            log(f"round {r + 1}/{rounds}: {command} x{depth}")
            out = json.loads(_cref("serverloop", *_loop_args(command, depth, iters),
                                   "--rounds", 3))
            runs.append({**out, "round": r})
    return runs


def summarize(runs: list[dict]) -> list[dict]:
    """Per :data:`PLAN` entry and arm: ns per request (median, 95 % interval, minimum) and
    the calls' after-effect (loopback minus none per round)."""
    from kvsim.stats import median_ci95

    out = []
    for command, depth in PLAN:
        mine = [r for r in runs if (r["command"], r["depth"]) == (command, depth)]
        row: dict[str, Any] = {"command": command, "depth": depth}
        per = {}
        for arm in ARMS:
            per[arm] = [(s - c) / depth for r in mine for s, c in
                        zip(r[f"{arm}_segment_ns"], r[f"{arm}_clock_ns"], strict=True)]
            ci = median_ci95(per[arm])
            xs = sorted(per[arm])
            row[arm] = {"median": xs[len(xs) // 2] if len(xs) % 2 else
                        (xs[len(xs) // 2 - 1] + xs[len(xs) // 2]) / 2,
                        "ci95": list(ci[:2]) if ci else None, "min": xs[0], "n": len(xs)}
        diff = sorted(b - a for a, b in zip(per["none"], per["loopback"], strict=True))
        ci = median_ci95(diff)
        row["after_effect"] = {"median": diff[len(diff) // 2],
                               "ci95": list(ci[:2]) if ci else None}
        out.append(row)
    return out


def traced(tmp: Path, iters: int, before: str, after: str) -> list[dict]:
    """Per :data:`PLAN` entry: the traced loop's instructions per request by kind and its
    predicted ns per request on ``before`` and ``after``."""
    from kvsim import sim, traces
    from kvsim.traces.work import instructions_by_kind

    out = []
    for command, depth in PLAN:
        path = tmp / f"{command}-{depth}.kvt"
        _cref("serverloop", *_loop_args(command, depth, iters), "--trace", path)
        n = iters * depth
        with traces.open(path) as tr:
            header = tr.header
        kinds = instructions_by_kind(header, traces.read_all(path))
        row = {"command": command, "depth": depth, "requests": n,
               "instructions": sum(kinds.values()) / n,
               "by_kind": {k: v / n for k, v in kinds.items() if v}}
        for side, cpu in (("before", before), ("after", after)):
            res = sim.simulate(path, sim.load_cpu(cpu))
            row[side] = {"cpu": cpu, "ns": res["timing"]["time_ns"] / n,
                         "freq_ghz": res["timing"]["freq_ghz"]}
        out.append(row)
    return out


def real_server(ping: dict, tmp: Path, before: str, after: str) -> list[dict]:
    """c_ref's real server's traced PINGs (server_kernel) on both files, against the native
    user and CPU time per request of ``ping`` (server-kernel-ping.json)."""
    from kvsim import stats
    from kvsim.experiments import server_kernel

    out = []
    for depth, clients in server_kernel.TRACED:
        n = server_kernel.TRACED_REQUESTS[depth]
        t = server_kernel.traced_ping(depth, clients, n, tmp / f"ping-{depth}.kvt")
        nat = next(c for c in ping["native"] if (c["depth"], c["clients"]) == (depth, clients))
        runs = [r for r in ping["measured"]["runs"]
                if (r["depth"], r["clients"]) == (depth, clients)]
        ticks = sum(r["ticks"] for r in runs)
        user_ticks = sum(r["ticks"] * r["user_ns"] / r["cpu_ns"] for r in runs if r["cpu_ns"])
        lo, hi = stats.wilson(user_ticks, ticks)
        row = {"depth": depth, "clients": clients, "requests": n,
               "native_user_ns": nat["user_ns"],
               "native_user_ns_ci95": [lo * nat["cpu_ns"], hi * nat["cpu_ns"]],
               "native_cpu_ns": nat["cpu_ns"]}
        for side, cpu in (("before", before), ("after", after)):
            p = server_kernel.predicted(t, cpu, n)
            row[side] = {"cpu": cpu, "user_ns": p["user_ns"], "ns": p["ns"],
                         "instructions": p["instructions"],
                         "user_ratio": p["user_ns"] / nat["user_ns"],
                         "cpu_ratio": p["ns"] / nat["cpu_ns"]}
        out.append(row)
    return out


def markdown(doc: dict) -> str:
    """The loop's table (native, instructions, predicted before and after) and, with the
    real server's rows, theirs."""
    ghz = doc["traced"][0]["after"]["freq_ghz"]
    out = ["| request | per read | native ns/request hot [95 %] | after loopback write+read "
           "[95 %] | instructions (server, parse, generic) | native IPC after the calls | "
           "predicted before | after | after / native |", "|" + "---|" * 9]
    for n, t in zip(doc["native"], doc["traced"], strict=True):
        lb, hot = n["loopback"], n["none"]

        def ci(e: dict) -> str:
            return f"[{e['ci95'][0]:.0f}, {e['ci95'][1]:.0f}]" if e["ci95"] else "[-]"

        k = t["by_kind"]
        out.append(f"| {n['command'].upper()} | {n['depth']} | {hot['median']:.0f} {ci(hot)} | "
                   f"{lb['median']:.0f} {ci(lb)} | {t['instructions']:,.0f} "
                   f"({k.get('server', 0):,.0f}, {k.get('parse', 0):,.0f}, "
                   f"{k.get('generic', 0):,.0f}) | "
                   f"{t['instructions'] / (lb['median'] * ghz):.2f} | {t['before']['ns']:.0f} "
                   f"| {t['after']['ns']:.0f} | {t['after']['ns'] / lb['median']:.2f} |")
    if doc.get("real_server"):
        out += ["", "| c_ref's server, PING_MBULK | native user ns/request [95 %] | predicted "
                "before | after | after / native | CPU ns/request: native | predicted before "
                "| after |", "|" + "---|" * 8]
        for r in doc["real_server"]:
            lo, hi = r["native_user_ns_ci95"]
            out.append(f"| depth {r['depth']}, {r['clients']} clients | "
                       f"{r['native_user_ns']:.0f} [{lo:.0f}, {hi:.0f}] | "
                       f"{r['before']['user_ns']:.0f} | {r['after']['user_ns']:.0f} | "
                       f"{r['after']['user_ratio']:.2f} | {r['native_cpu_ns']:,.0f} | "
                       f"{r['before']['ns']:,.0f} | {r['after']['ns']:,.0f} |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    from kvsim import provenance
    from kvsim.experiments.valkey_server import ToolMissing, ValkeyError
    from kvsim.sim.config import ConfigError

    ap = argparse.ArgumentParser(prog="python -m kvsim.experiments.server_user",
                                 description="the server's user-space code per request, "
                                             "natively and predicted before and after "
                                             "[work] server")
    ap.add_argument("-o", "--output", default=f"results/{RESULT_NAME}")
    ap.add_argument("--before", required=True, help="CPU file without [work] server")
    ap.add_argument("--after", required=True, help="the same with [work] server")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--ping", default=None,
                    help="server-kernel-ping.json: the real server's native PING figures")
    ap.add_argument("--quick", action="store_true", help="fewer segments per run")
    a = ap.parse_args(argv)
    out = Path(a.output)
    if provenance.out_dir_missing(out):
        return 2
    log = lambda m: print(m, file=sys.stderr)  # noqa: E731
    iters = LOOP["iters"] // (4 if a.quick else 1)
    try:
        ping = json.loads(Path(a.ping).read_text()) if a.ping else None
        runs = measure(a.rounds, iters, log)
        with tempfile.TemporaryDirectory() as tmp:
            tr = traced(Path(tmp), TRACE_ITERS, a.before, a.after)
            real = real_server(ping, Path(tmp), a.before, a.after) if ping else []
    except (OSError, ValueError, KeyError, subprocess.SubprocessError, ToolMissing,
            ValkeyError, ConfigError) as e:
        print(f"server_user: {e}", file=sys.stderr)
        return 1
    doc = {"runs": runs, "native": summarize(runs), "traced": tr, "real_server": real,
           "ping_source": a.ping,
           "note": "native: c_ref's server code between read and write (kvsim-cref "
                   "serverloop), ns per request less the clock's cost, hot (none) and after "
                   "a loopback write+read (loopback); traced: the same loop's instructions "
                   "per request by kind; predicted: simulated on the file without and with "
                   "[work] server; real_server: c_ref's server traced under PING_MBULK "
                   "against the native user time of ping_source"}
    provenance.write_result(out, doc)
    print(markdown(doc))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
