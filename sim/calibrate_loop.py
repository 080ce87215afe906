"""The system calls as a server's loop makes them: c_ref's server under a real client sending
PING, for the ``[syscall]`` section of a calibrated CPU file (sim/calibrate_syscall.py).

The microbenchmark (``kvsim-calibrate syscall``) times ``read``, ``write`` and ``epoll_wait``
on one socket pair, each call alone. In a server's loop under many clients the same calls
cost more of the server's CPU time: a reply wakes a client asleep on another CPU, the loop
sleeps in ``epoll_wait`` when no request is pending and is woken again, each a round of the
scheduler (and, in a virtual machine, of the hypervisor: an interprocessor interrupt and a
halted CPU resumed). None of that is the server's user-space work, so none is in its trace.

:func:`measure` runs c_ref's server (``kvsim-cref serve``, untraced) pinned to one CPU and
redis-benchmark's ``PING_MBULK`` test pinned to another, at each (pipeline depth, clients)
of the plan, interleaved over rounds. PING does no keyspace work: the server reads, parses,
replies and writes. Per run and per request: the server's CPU time (``/proc/PID/task/*/
schedstat``) split into user and system time in the proportion of ``/proc/PID/stat``'s
utime and stime, its ``read`` and ``write`` calls and bytes (``/proc/PID/io``: syscr, syscw,
rchar, wchar) and its voluntary context switches (``/proc/PID/status``: the times it slept).

:func:`loop_cost` turns the runs into the model's terms: the system time per request beyond
what the microbenchmark's per-call and per-byte costs give for the calls counted, the
*loop residue*, divided by the reply writes. The calls the loop makes are one ``read`` and
one ``write`` per batch of requests a client sends (one per request at depth 1), and the
sleeps and wakeups come with those round trips, so the residue is charged per ``write``: a
traced server's writes are as many per request as the native server's, where its
``epoll_wait`` calls are fewer (tracing slows the server, so each wait finds more clients
ready). The residue holds the ``epoll_wait`` calls' own time too, so a calibrated file
charges ``epoll_wait`` nothing. The client count is the server study's (50): the residue
depends on how often the loop sleeps, which the runs at other client counts show
(``python -m kvsim.experiments.server_kernel``, results/server-kernel-ping.json).
Nothing here is fitted to a prediction or a validation row: the commands are PINGs.

The split into user and system time follows the ticks, which on a guest can overstate the
user time of such a loop. :func:`measure_bias` tests it (``kvsim-calibrate sysbias``: round
trips with a peer on another CPU, a user-mode spin of a set length between them, so the user
time is known by construction) and :func:`tick_bias` judges it: the split is *biased* when
at some spin the user share of its ticks (summed over the rounds), at the bottom of its
Wilson 95 % interval, exceeds the spin's share of the CPU time by more than
:data:`BIAS_TOLERANCE`. Each spin is judged alone: the bias depends on the pattern (none at
a spin of 50 us on the Xeon guest, some 1-3 us a round trip at spins of 0-10 us), and a
server's loop is the short-spin end (a PING's user time is some 0.2 us), which pooling
with the long spins, whose ticks are the most, would hide. Then :func:`kernel_time` takes the
loop's kernel time per write not from the ticks' system time but from the whole CPU time
(schedstat, exact): per PING run, its CPU time less the traced PINGs' user time predicted on
the CPU file being written (:func:`ping_user`: c_ref's server traced under the same PINGs,
simulated, its user part) less the calls' costs, per write (:func:`cpu_residue`); the method
and its figures go into the CPU file (``[syscall]``'s src, ``[meta] syscall_loop``).
``kvsim calibrate`` and ``python -m kvsim.experiments.server_split --loop-cpu`` both take it
from here.
"""

from __future__ import annotations

import contextlib
import os
import select
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kvsim import artifacts

#: (pipeline depth, clients) of a calibration: the server study's 50 clients, depths 1, 10
PLAN = ((1, 50), (10, 50))
#: PINGs per run at depth 1 and at depth 10 (about a second each on a 2-vCPU guest)
REQUESTS = {"quick": (100_000, 500_000), "full": (200_000, 1_000_000)}
ROUNDS = {"quick": 3, "full": 5}


#: c_ref's server as the server study runs it: Valkey's lookahead and multi-key batch
SERVER_ARGS = ("--pipeline", "lookahead", "--variant", "batch")


class LoopError(OSError):
    """The server or the client could not be run (one line)."""


def benchmark_binary() -> Path:
    """redis-benchmark (or valkey-benchmark) on PATH, or ``VALKEY_BENCHMARK``; LoopError
    when there is none."""
    for name in (os.environ.get("VALKEY_BENCHMARK"), "valkey-benchmark", "redis-benchmark"):
        found = shutil.which(name) if name else None
        if found:
            return Path(found)
    raise LoopError("no redis-benchmark or valkey-benchmark on PATH (Debian: redis-tools)")


def _pinned(cpu: int | None) -> Callable[[], None]:
    def setup() -> None:
        if cpu is not None:
            os.sched_setaffinity(0, {cpu})
    return setup


def _cpus() -> tuple[int | None, int | None]:
    """(server CPU, client CPU): two different CPUs, or nothing pinned on one."""
    cpus = sorted(os.sched_getaffinity(0))
    return (cpus[-1], cpus[0]) if len(cpus) > 1 else (None, None)


@contextlib.contextmanager
def _server(cpu: int | None, timeout: float = 20.0, extra: tuple[str, ...] = ()):
    """``kvsim-cref serve`` on 127.0.0.1 (a port it picks), pinned to ``cpu``, with ``extra``
    arguments after :data:`SERVER_ARGS`: (pid, port)."""
    try:
        exe = artifacts.path(artifacts.CREF_CLI)
    except artifacts.ArtifactMissing as e:
        raise LoopError(str(e)) from None
    proc = subprocess.Popen([str(exe), "serve", "--port", "0", "--bind", "127.0.0.1",
                             *SERVER_ARGS, *extra], stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            preexec_fn=_pinned(cpu))
    try:
        ready, _, _ = select.select([proc.stdout], [], [], timeout)
        words = proc.stdout.readline().decode(errors="replace").split() if ready else []
        if len(words) != 3 or words[0] != "ready":
            raise LoopError(f"kvsim-cref serve did not start within {timeout} s")
        yield proc.pid, int(words[2])
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        proc.stdout.close()


def _counters(pid: int) -> dict[str, int]:
    """The server process's CPU time (every thread's on-CPU ns, schedstat) and counters."""
    cpu_ns = sum(int((t / "schedstat").read_text().split()[0])
                 for t in Path(f"/proc/{pid}/task").iterdir())
    stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    status = dict(line.split(":", 1) for line in
                  Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
    io = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/io").read_text().splitlines())
    return {"cpu_ns": cpu_ns, "utime": int(stat[11]), "stime": int(stat[12]),
            "sleeps": int(status["voluntary_ctxt_switches"]),
            "preempted": int(status["nonvoluntary_ctxt_switches"]),
            "reads": int(io["syscr"]), "writes": int(io["syscw"]),
            "read_bytes": int(io["rchar"]), "write_bytes": int(io["wchar"])}


def _run(server: tuple[int, int], bench: Path, client_cpu: int | None, depth: int,
         clients: int, requests: int) -> dict[str, Any]:
    pid, port = server
    argv = [str(bench), "-h", "127.0.0.1", "-p", str(port), "-c", str(clients), "-n",
            str(requests), "-P", str(depth), "-t", "ping_mbulk", "--csv"]
    return {"depth": depth, "clients": clients,
            **client_run(pid, argv, client_cpu, requests)}


def client_run(pid: int, argv: list[str], client_cpu: int | None,
               requests: int) -> dict[str, Any]:
    """One run of the client command ``argv`` (pinned to ``client_cpu``) against the server
    process ``pid``, serving ``requests`` requests: per request the server's CPU time split
    into user and system time in the proportion of its ``/proc/PID/stat`` ticks, its calls,
    bytes and context switches; ``ticks`` the run's tick count. LoopError when the client
    fails."""
    c0, t0 = _counters(pid), time.monotonic()
    name = Path(argv[0]).name
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=600, check=False,
                           preexec_fn=_pinned(client_cpu))
    except subprocess.TimeoutExpired:
        raise LoopError(f"{name} did not finish within 600 s") from None
    c1, wall = _counters(pid), time.monotonic() - t0
    if p.returncode != 0:
        raise LoopError(f"{name} exited with status {p.returncode}")
    d = {k: c1[k] - c0[k] for k in c0}
    ticks = d["utime"] + d["stime"]
    sys_share = d["stime"] / ticks if ticks else 0.0
    out: dict[str, Any] = {"requests": requests, "wall_s": round(wall, 3),
                           "cpu_ns": d["cpu_ns"] / requests,
                           "sys_ns": d["cpu_ns"] * sys_share / requests,
                           "user_ns": d["cpu_ns"] * (1 - sys_share) / requests,
                           "ticks": ticks, "user_ticks": d["utime"]}
    for k in ("reads", "writes", "read_bytes", "write_bytes", "sleeps", "preempted"):
        out[k] = d[k] / requests
    return out


def _requests(reqs: tuple[int, int], depth: int, clients: int) -> int:
    """PINGs of a run: fewer with fewer clients (each round trip then sleeps)."""
    n = reqs[0] if depth == 1 else reqs[1]
    return n if clients >= 50 else max(10_000, n * clients // 50)


def measure(plan=PLAN, quick: bool = True, rounds: int | None = None,
            requests: tuple[int, int] | None = None,
            log: Callable[[str], None] = lambda m: None) -> dict[str, Any]:
    """The runs (:func:`_run`) of every (depth, clients) of ``plan``, interleaved over
    ``rounds`` rounds (the order reversed every other round), after one discarded run of
    the first; requests per run at depth 1 and above from ``requests``. LoopError when the
    server or the client cannot run."""
    kind = "quick" if quick else "full"
    n = rounds or ROUNDS[kind]
    reqs = requests or REQUESTS[kind]
    bench = benchmark_binary()
    server_cpu, client_cpu = _cpus()
    log(f"server loop: c_ref's server under {bench.name} PING_MBULK, {n} rounds of "
        + ", ".join(f"depth {d} x {c} clients" for d, c in plan))
    runs: list[dict[str, Any]] = []
    with _server(server_cpu) as srv:
        d0, c0 = plan[0]
        _run(srv, bench, client_cpu, d0, c0, reqs[0] // 10)  # warm-up, discarded
        for r in range(n):
            for depth, clients in (plan if r % 2 == 0 else plan[::-1]):
                run = _run(srv, bench, client_cpu, depth, clients,
                           _requests(reqs, depth, clients))
                runs.append({**run, "round": r})
    return {"plan": [list(p) for p in plan], "rounds": n, "runs": runs,
            "server": "kvsim-cref serve " + " ".join(SERVER_ARGS),
            "client": f"{bench.name} -t ping_mbulk"}


def residue(run: dict[str, Any], alone: dict[str, float]) -> float:
    """The run's system ns per request beyond the microbenchmark's costs of its read and
    write calls and bytes (``alone``: read_ns, read_byte_ns, write_ns, write_byte_ns)."""
    return run["sys_ns"] - (run["reads"] * alone["read_ns"]
                            + run["read_bytes"] * alone["read_byte_ns"]
                            + run["writes"] * alone["write_ns"]
                            + run["write_bytes"] * alone["write_byte_ns"])


def by_cell(raw: dict[str, Any], alone: dict[str, float]) -> list[dict[str, Any]]:
    """Per (depth, clients): medians over the rounds, and the residue per write and (where
    the loop slept) per sleep."""
    out = []
    for depth, clients in raw["plan"]:
        rs = [r for r in raw["runs"] if r["depth"] == depth and r["clients"] == clients]
        if not rs:
            continue
        med = {k: statistics.median(r[k] for r in rs) for k in (
            "cpu_ns", "user_ns", "sys_ns", "reads", "writes", "read_bytes", "write_bytes",
            "sleeps", "preempted")}
        res = [residue(r, alone) for r in rs]
        cell = {"depth": depth, "clients": clients, "rounds": len(rs), **med,
                "residue_ns": statistics.median(res),
                "residue_per_write_ns": statistics.median(
                    x / r["writes"] for x, r in zip(res, rs, strict=True) if r["writes"]),
                "min_cpu_ns": min(r["cpu_ns"] for r in rs)}
        if med["sleeps"] > 0:
            cell["residue_per_sleep_ns"] = cell["residue_ns"] / med["sleeps"]
        out.append(cell)
    return out


def loop_cost(raw: dict[str, Any], alone: dict[str, float]) -> tuple[float, str]:
    """(the residue per write: the median over every run of the plan, ns; its source)."""
    per_write = [residue(r, alone) / r["writes"] for r in raw["runs"] if r["writes"]]
    cells = by_cell(raw, alone)
    how = "; ".join(
        f"depth {c['depth']} x {c['clients']} clients: {c['sys_ns']:,.0f} ns system time "
        f"per request, {c['writes']:.3f} writes and {c['sleeps']:.3f} sleeps, residue "
        f"{c['residue_per_write_ns']:,.0f} ns per write" for c in cells)
    return max(0.0, statistics.median(per_write)), how


#: ``kvsim-calibrate sysbias``: the user-mode spins (ns) between round trips, and the round
#: trips per run (some 1-2 s of CPU time each)
BIAS_SPINS = (0, 2000, 10000, 50000)
BIAS_ITERS = 20_000
#: the tick split is biased when, at some spin, the ticks' user share, at the bottom of its
#: 95 % interval, exceeds the spin's share of the CPU time by more than this: the loop's own
#: user code around the spin (its calls' wrappers and clock reads, some 100-200 ns of a round
#: trip of 25 us or more) is under it
BIAS_TOLERANCE = 0.01


def measure_bias(rounds: int, log: Callable[[str], None] = lambda m: None,
                 spins: tuple[int, ...] = BIAS_SPINS,
                 iters: int | None = None) -> list[dict[str, Any]]:
    """``kvsim-calibrate sysbias`` at every spin of ``spins``, ``iters`` (default
    :data:`BIAS_ITERS`) round trips a run, interleaved over ``rounds`` rounds (the order
    reversed every other round): per round trip the user time by
    construction (``spun_ns``), the CPU time, and the user time the tick-sampled split gives
    (CPU time x utime / (utime + stime)); the run's ticks."""
    from .calibrate import run_bench

    out = []
    for r in range(rounds):
        for spin in (spins if r % 2 == 0 else spins[::-1]):
            x = run_bench("sysbias", iters or BIAS_ITERS, spin)
            ticks = x["utime"] + x["stime"]
            cpu = x["cpu_ns"] / x["iters"]
            row = {"round": r, "spin_ns": spin, "ticks": ticks, "user_ticks": x["utime"],
                   "spun_ns": x["spun_ns"] / x["iters"], "cpu_ns": cpu,
                   "tick_user_ns": cpu * x["utime"] / ticks if ticks else 0.0}
            out.append(row)
            log(f"sysbias spin {spin}: cpu {cpu:,.0f} ns per round trip, spun "
                f"{row['spun_ns']:,.0f}, tick-sampled user {row['tick_user_ns']:,.0f}")
    return out


def bias_rows(rows: list[dict[str, Any]]) -> list[dict[str, float]]:
    """Per spin of :func:`measure_bias`'s runs: medians over the rounds, the ticks summed."""
    out = []
    for spin in sorted({r["spin_ns"] for r in rows}):
        rs = [r for r in rows if r["spin_ns"] == spin]
        out.append({"spin_ns": spin, **{k: statistics.median(r[k] for r in rs) for k in (
            "cpu_ns", "spun_ns", "tick_user_ns")}, "ticks": sum(r["ticks"] for r in rs)})
    return out


def tick_bias(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Whether the tick split overstates user time (module docstring), from
    :func:`measure_bias`'s runs. Per spin (``spins``): the ticks and user ticks summed over
    its rounds, the user share with its Wilson 95 % interval, the share the spin would give
    (each run's spun / CPU time, weighted by its ticks) and whether it exceeds that by more
    than the tolerance. The spin whose interval's bottom is furthest above its spin's share
    is named at the top (``spin_ns``, ``ticks``, ``user_share``, ``user_share_ci95``,
    ``spin_share``), with the tolerance and the verdict ``biased`` (at some spin)."""
    from kvsim.stats import wilson

    spins = []
    for spin in sorted({r["spin_ns"] for r in rows}):
        rs = [r for r in rows if r["spin_ns"] == spin]
        ticks = sum(r["ticks"] for r in rs)
        uticks = sum(r["user_ticks"] for r in rs)
        share = (sum(r["ticks"] * r["spun_ns"] / r["cpu_ns"] for r in rs if r["cpu_ns"])
                 / ticks if ticks else 0.0)
        lo, hi = wilson(uticks, ticks)
        spins.append({"spin_ns": spin, "runs": len(rs), "ticks": ticks, "user_ticks": uticks,
                      "user_share": uticks / ticks if ticks else 0.0,
                      "user_share_ci95": [lo, hi], "spin_share": share,
                      "biased": bool(ticks) and lo > share + BIAS_TOLERANCE})
    worst = max(spins, key=lambda s: s["user_share_ci95"][0] - s["spin_share"],
                default={"spin_ns": 0, "ticks": 0, "user_ticks": 0, "user_share": 0.0,
                         "user_share_ci95": [0.0, 1.0], "spin_share": 0.0})
    return {"runs": len(rows), **{k: worst[k] for k in (
        "spin_ns", "ticks", "user_ticks", "user_share", "user_share_ci95", "spin_share")},
        "tolerance": BIAS_TOLERANCE, "biased": any(s["biased"] for s in spins),
        "spins": spins}


def calls_ns(run: dict[str, Any], costs: dict[str, float]) -> float:
    """The costs (read_ns, read_byte_ns, write_ns, write_byte_ns) of a run's calls and bytes
    per request."""
    return (run["reads"] * costs["read_ns"] + run["read_bytes"] * costs["read_byte_ns"]
            + run["writes"] * costs["write_ns"] + run["write_bytes"] * costs["write_byte_ns"])


def cpu_residue(runs: list[dict[str, Any]], user_ns: dict[int, float],
                costs: dict[str, float]) -> tuple[float, list[dict[str, Any]]]:
    """The loop's kernel time per write from the whole CPU time: per PING run at a depth of
    ``user_ns`` (the traced PINGs' predicted user ns per request at that depth), (CPU ns -
    user ns - :func:`calls_ns`) / writes; the median over the runs (at least 0) and the
    runs' figures. ValueError when no run is at such a depth."""
    rows = []
    for r in runs:
        if r["depth"] not in user_ns or not r["writes"]:
            continue
        calls = calls_ns(r, costs)
        rows.append({**{k: r[k] for k in ("cell", "side", "round", "depth") if k in r},
                     "cpu_ns": r["cpu_ns"], "user_ns": user_ns[r["depth"]], "calls_ns": calls,
                     "writes": r["writes"],
                     "residue_per_write_ns": (r["cpu_ns"] - user_ns[r["depth"]] - calls)
                     / r["writes"]})
    if not rows:
        raise ValueError("no PING runs at a depth with a predicted user time")
    return max(0.0, statistics.median(x["residue_per_write_ns"] for x in rows)), rows


#: PINGs of a traced run per depth (the traced server is slower: fewer than :data:`REQUESTS`)
TRACED_REQUESTS = {1: 20_000, 10: 50_000}


def traced_ping(depth: int, clients: int, requests: int, out: Path) -> Path:
    """The measured trace (:func:`kvsim.traces.commands.measured_trace`) of c_ref's server,
    traced (``serve --trace``), serving ``requests`` PINGs from ``clients`` clients at
    pipeline ``depth``; LoopError when the server or the client cannot be run."""
    from kvsim.traces.commands import measured_trace

    bench = benchmark_binary()
    server_cpu, client_cpu = _cpus()
    raw = out.with_name(out.stem + ".raw.kvt")
    with _server(server_cpu, extra=("--trace", str(raw))) as (_, port):
        argv = [str(bench), "-h", "127.0.0.1", "-p", str(port), "-c", str(clients), "-n",
                str(requests), "-P", str(depth), "-t", "ping_mbulk", "--csv"]
        try:
            p = subprocess.run(argv, capture_output=True, timeout=900, check=False,
                               preexec_fn=_pinned(client_cpu))
        except subprocess.TimeoutExpired:
            raise LoopError(f"{bench.name} did not finish within 900 s") from None
        if p.returncode != 0:
            raise LoopError(f"{bench.name} exited with status {p.returncode}")
    try:
        measured_trace(raw, out, requests, after=0)
    finally:
        raw.unlink(missing_ok=True)
    return out


def predicted(trace: Path, cpu: str, requests: int) -> dict[str, Any]:
    """The prediction of a traced PING run on ``cpu`` (a CPU name or file), per request: ns,
    its system calls' part, user ns, instructions, calls and bytes by call."""
    from kvsim import sim
    from kvsim.sim import local as sim_local

    res = sim.simulate(trace, sim.load_cpu(cpu))
    ghz = res["timing"]["freq_ghz"]
    sc = res.get("syscalls") or {}
    ns = res["cycles"] / ghz / requests
    sys_ns = (sc.get("cycles") or 0) / ghz / requests
    return {"cpu": sim_local.label(cpu), "ns": ns, "syscall_ns": sys_ns,
            "user_ns": ns - sys_ns, "instructions": res["instructions"] / requests,
            "calls": {k: v / requests for k, v in (sc.get("calls") or {}).items()},
            "bytes": {k: v / requests for k, v in (sc.get("bytes") or {}).items()}}


def ping_user(cpu: str | Path, plan=PLAN, log: Callable[[str], None] = lambda m: None,
              requests: dict[int, int] | None = None) -> dict[int, float]:
    """Per depth of ``plan``: the user ns per request of c_ref's server traced under the
    same PINGs (:func:`traced_ping`, at the plan's clients; ``requests`` per depth, default
    :data:`TRACED_REQUESTS`) and simulated on ``cpu`` (a CPU name or file), its system
    calls' charge left out."""
    out = {}
    with tempfile.TemporaryDirectory(prefix="kvsim-ping-") as tmp:
        for depth, clients in plan:
            n = (requests or TRACED_REQUESTS)[depth]
            t = traced_ping(depth, clients, n, Path(tmp) / f"ping-{depth}.kvt")
            out[depth] = predicted(t, str(cpu), n)["user_ns"]
            log(f"server loop: traced PINGs at depth {depth} predicted at "
                f"{out[depth]:,.0f} ns of user time per request")
    return out


def kernel_time(loop: dict[str, Any], costs: dict[str, float],
                method: str | None = None) -> dict[str, Any]:
    """The loop's kernel time per write beyond the calls' ``costs``, and how it was taken.

    ``loop``: :func:`measure`'s runs (``plan``, ``rounds``, ``runs``), with ``tick_bias``
    (:func:`measure_bias`'s runs) and ``ping_user_ns`` (``[{"depth", "user_ns"}]``, from
    :func:`ping_user`) where measured. ``method`` None: ``cpu`` (:func:`cpu_residue`) when
    the tick split is biased (:func:`tick_bias`) and the predicted user times are there,
    else ``ticks`` (:func:`loop_cost`: the tick-sampled system time); ``"cpu"`` forces the
    former. Returns ``method``, ``residue_per_write_ns``, each method's figure (the ticks':
    ``ticks_residue_per_write_ns`` and its ``cells``; the whole CPU time's, where the user
    times are there: ``cpu_residue_per_write_ns``, the user times and each run's
    ``cpu_runs``), and the bias test (``bias``, per spin ``bias_spins``)."""
    ticks, cells = loop_cost(loop, costs)
    out: dict[str, Any] = {"method": "ticks", "residue_per_write_ns": ticks,
                           "ticks_residue_per_write_ns": ticks, "cells": cells}
    if loop.get("rounds"):
        out["rounds"] = loop["rounds"]
    if loop.get("tick_bias"):
        out["bias"] = tick_bias(loop["tick_bias"])
        out["bias_spins"] = bias_rows(loop["tick_bias"])
    biased = bool(out.get("bias", {}).get("biased"))
    user = {int(p["depth"]): float(p["user_ns"]) for p in loop.get("ping_user_ns") or []}
    if method == "cpu" and not user:
        raise ValueError("the loop's kernel time from the whole CPU time needs the traced "
                         "PINGs' predicted user time")
    if user:  # the whole CPU time's figure, beside the ticks' whichever is taken
        value, rows = cpu_residue(loop["runs"], user, costs)
        out.update({"cpu_residue_per_write_ns": value, "cpu_runs": rows,
                    "ping_user_ns": [{"depth": d, "user_ns": u} for d, u in sorted(user.items())]})
        if method == "cpu" or (method is None and biased):
            out.update({"method": "cpu", "residue_per_write_ns": value})
    return out
