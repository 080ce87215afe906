"""The ``[syscall]`` section of a calibrated CPU file: what a server's system calls cost on
this machine (the SYSCALL markers of traces/FORMAT.md; sim/PRESETS.md, sim/MODEL.md §6).

``kvsim-calibrate syscall`` (sim/_calibrate/syscall.c) times ``write``, ``epoll_wait`` and
``read`` on a connected TCP loopback pair, alone, at message sizes from 64 B to 16 KiB. The
per-call cost of ``read`` and ``write`` is the intercept and the per-byte cost the slope of a
least-squares line through the medians over the sizes. A server's calls differ from the
sweep's in two ways, which a ping-pong with a child process on another CPU measures in the
caller's CPU time: its replies wake a client blocked on the other end (``write_ns`` is the
CPU time of such a write, when above the sweep's intercept), and an idle server sleeps in
``epoll_wait`` until a request wakes it (``epoll_wait_ns``, with no per-byte part: the
events copied out are a few dozen bytes).
The per-byte costs come from a second loopback pair whose other end is a process on another
CPU (``kvsim-calibrate syspeer``, sim/_calibrate/syspeer.c, sizes 64 B to 32 KiB): a server's
request bytes were written by its client's CPU and its reply bytes are read out by it, where
the sweep's bytes never leave the caller's own caches; the slopes of its ``read`` and
``write`` over the sizes are ``read_byte_ns`` and ``write_byte_ns`` (the sweep's slopes where
it was not run).
Where redis-benchmark is installed, the calls are measured again as a server's loop makes
them (sim/calibrate_loop.py: c_ref's server under PINGs from 50 clients): the system time per
request beyond the sweep's costs of the reads and writes, the wakeups and sleeps of the loop
with its ``epoll_wait`` calls, is charged per ``write`` on top of the sweep's intercept, and
``epoll_wait`` then costs nothing of its own (its time is in that residue).
Nothing here is fitted to a prediction or a validation row.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable

SIZES = (64, 256, 1024, 4096, 16384)
#: message sizes of the peer measurement (syspeer.c): up to an MGET of 100 values' reply
PEER_SIZES = (64, 256, 1024, 4096, 16384, 32768)
ITERS = {"quick": 2000, "full": 20000}
ROUNDS = 3
CALLS = ("read", "write", "epoll_wait")


def measure(quick: bool, log: Callable[[str], None] = lambda m: None,
            iters: int | None = None, loop: bool = True,
            loop_rounds: int | None = None, peer: bool = True) -> dict:
    """The raw samples: per call, the median ns at each size (median over ROUNDS runs);
    with ``peer``, the peer measurement's (``peer``: per call, the median over ROUNDS runs
    of the median ns at each of PEER_SIZES, the sweep's and the peer's runs interleaved);
    with ``loop``, the server loop's runs too (``loop``: :func:`.calibrate_loop.measure`,
    ``loop_rounds`` rounds, by default its own; left out, with a line in the log, where
    redis-benchmark is missing)."""
    from .calibrate import run_bench

    n = iters or ITERS["quick" if quick else "full"]
    log(f"syscalls: read/write/epoll_wait on TCP loopback, {ROUNDS} x {n} per size"
        + (", and read/write with a peer on another CPU" if peer else ""))
    runs, peers = [], []
    for _ in range(ROUNDS):
        runs.append(run_bench("syscall", n, *SIZES))
        if peer:
            peers.append(run_bench("syspeer", n, *PEER_SIZES))
    out: dict = {"sizes": list(SIZES), "iters": n, "rounds": ROUNDS}
    for c in CALLS:
        out[f"{c}_ns"] = [statistics.median(r[f"{c}_median_ns"][i] for r in runs)
                          for i in range(len(SIZES))]
    for k in ("epoll_wait_sleep", "write_wake"):
        out[f"{k}_ns"] = statistics.median(r[f"{k}_median_ns"] for r in runs)
    if peers:
        out["peer"] = {"sizes": list(PEER_SIZES), "iters": n, "rounds": ROUNDS, **{
            f"{c}_{m}_ns": [statistics.median(r[f"{c}_{m}_ns"][i] for r in peers)
                            for i in range(len(PEER_SIZES))]
            for c in ("read", "write") for m in ("median", "min")}}
    if loop:
        from . import calibrate_loop
        try:
            out["loop"] = calibrate_loop.measure(quick=quick, rounds=loop_rounds, log=log)
        except calibrate_loop.LoopError as e:
            log(f"server loop not measured ({e}): the sweep's and ping-pong's costs stand")
    return out


def alone(raw: dict) -> dict[str, float]:
    """The per-call and per-byte costs of read and write the model charges: the sweep's
    intercepts (each call alone) and the peer measurement's slopes (the sweep's where there
    is none)."""
    sizes = [float(s) for s in raw["sizes"]]
    out = {}
    for c in ("read", "write"):
        out[f"{c}_ns"], out[f"{c}_byte_ns"] = fit_line(sizes, [float(y) for y in raw[f"{c}_ns"]])
        if raw.get("peer"):
            out[f"{c}_byte_ns"] = peer_slope(raw["peer"], c)
    return out


def peer_slope(peer: dict, call: str) -> float:
    """The per-byte cost of ``call`` with a peer: the least-squares slope of its medians
    over the sizes from 1 KiB up (below, a call's cost is its fixed part's, which varies with
    how the two CPUs meet: sim/_calibrate/syspeer.c)."""
    pts = [(float(s), float(y)) for s, y in zip(peer["sizes"], peer[f"{call}_median_ns"],
                                                 strict=True) if s >= 1024]
    return fit_line([x for x, _ in pts], [y for _, y in pts])[1]


def fit_line(xs: list[float], ys: list[float]) -> tuple[float, float]:
    """Least-squares (intercept, slope) of ys over xs, both clamped at 0."""
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx if sxx else 0.0
    return max(0.0, my - slope * mx), max(0.0, slope)


def section(raw: dict) -> dict:
    """The [syscall] table (keys of sim.config.SYSCALL_KEYS, with its src) from measure()."""
    sizes = [float(s) for s in raw["sizes"]]
    sec: dict = {}
    src: dict = {}
    how = (f"measured: kvsim-calibrate syscall, TCP loopback, medians of {raw['rounds']} x "
           f"{raw['iters']} calls at {', '.join(str(s) for s in raw['sizes'])} B")
    for c in ("read", "write"):
        call, byte = fit_line(sizes, [float(y) for y in raw[f"{c}_ns"]])
        sec[f"{c}_ns"], sec[f"{c}_byte_ns"] = round(call, 1), round(byte, 5)
        src[f"{c}_ns"] = f"{how}; intercept of the least-squares line"
        src[f"{c}_byte_ns"] = f"{how}; slope of the least-squares line"
        if raw.get("peer"):
            p = raw["peer"]
            sec[f"{c}_byte_ns"] = round(peer_slope(p, c), 5)
            src[f"{c}_byte_ns"] = (
                f"measured: kvsim-calibrate syspeer, TCP loopback with the other end a process "
                f"on another CPU that writes the requests and reads the replies, medians of "
                f"{p['rounds']} x {p['iters']} calls at "
                f"{', '.join(str(s) for s in p['sizes'] if s >= 1024)} B; slope of the "
                f"least-squares line (the sweep's, each call alone: {byte:.4f} ns/B)")
    # a server's reply wakes its client, and an idle server sleeps in epoll_wait: the
    # ping-pong's CPU times of those two calls (syscall.c), where measured
    if raw.get("write_wake_ns"):
        sec["write_ns"] = round(max(sec["write_ns"], raw["write_wake_ns"]), 1)
        src["write_ns"] = (f"{how.split(', medians')[0]}: CPU time of a 1-byte write that "
                           "wakes the reader blocked on the other end (median of the rounds' "
                           "medians), at least the sweep's intercept")
    if raw.get("loop"):  # the loop's residue per write; epoll_wait's time is in it
        from .calibrate_loop import loop_cost

        base = alone(raw)
        extra, cells = loop_cost(raw["loop"], base)
        sec["write_ns"] = round(base["write_ns"] + extra, 1)
        src["write_ns"] = (f"{how}; intercept of the least-squares line "
                           f"({base['write_ns']:,.0f} ns) plus the server loop's residue per "
                           f"write ({extra:,.0f} ns: "
                           "system time per request of c_ref's server under redis-benchmark "
                           "PING_MBULK beyond the sweep's read and write costs, the wakeups, "
                           "sleeps and epoll_wait calls of the loop; median of "
                           f"{raw['loop']['rounds']} interleaved rounds; {cells}; "
                           "sim/calibrate_loop.py)")
        sec["epoll_wait_ns"] = 0.0
        src["epoll_wait_ns"] = ("measured in the server loop: its time is in write_ns's "
                                "residue (sim/calibrate_loop.py)")
    elif raw.get("epoll_wait_sleep_ns"):
        sec["epoll_wait_ns"] = round(raw["epoll_wait_sleep_ns"], 1)
        src["epoll_wait_ns"] = (f"{how.split(', medians')[0]}: CPU time of an epoll_wait "
                                "that sleeps until an echo from another CPU wakes it")
    else:
        sec["epoll_wait_ns"] = round(statistics.median(raw["epoll_wait_ns"]), 1)
        src["epoll_wait_ns"] = f"{how}; median (one ready event)"
    sec["epoll_wait_byte_ns"] = 0.0
    src["epoll_wait_byte_ns"] = "E a few dozen bytes of events: not charged"
    sec["src"] = src
    return sec
