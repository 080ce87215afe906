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
``epoll_wait`` then costs nothing of its own (its time is in that residue). Where the guest's
tick-sampled split of CPU time into user and system time overstates user time
(``kvsim-calibrate sysbias``), that residue is taken instead from the PINGs' whole CPU time
less their predicted user time on the file being written (sim/calibrate_loop.py,
:func:`~kvsim.sim.calibrate_loop.kernel_time`); ``write_ns``'s src and ``[meta]
syscall_loop`` (:func:`loop_meta`) say which method and give its figures.
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
            loop_rounds: int | None = None, peer: bool = True,
            cpu_doc: dict | None = None, loop_requests: tuple[int, int] | None = None,
            bias_iters: int | None = None,
            ping_requests: dict[int, int] | None = None) -> dict:
    """The raw samples: per call, the median ns at each size (median over ROUNDS runs);
    with ``peer``, the peer measurement's (``peer``: per call, the median over ROUNDS runs
    of the median ns at each of PEER_SIZES, the sweep's and the peer's runs interleaved);
    with ``loop``, the server loop's runs too (``loop``: :func:`.calibrate_loop.measure`,
    ``loop_rounds`` rounds, by default its own; left out, with a line in the log, where
    redis-benchmark is missing), with the tick split's test (``loop.tick_bias``:
    :func:`.calibrate_loop.measure_bias`, as many rounds) and, where ``cpu_doc`` (the CPU
    file being written, without its ``[syscall]``) is given, the traced PINGs' user time
    predicted on ``cpu_doc`` with this ``[syscall]`` as the ticks give it
    (``loop.ping_user_ns``: :func:`.calibrate_loop.ping_user`), so that the file gives both
    methods' figures whichever the test chooses. ``loop_requests``, ``bias_iters`` and
    ``ping_requests`` shrink the loop's runs, the tick test's and the traced PINGs' (tests;
    default: their modules' own)."""
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
            out["loop"] = calibrate_loop.measure(quick=quick, rounds=loop_rounds,
                                                 requests=loop_requests, log=log)
        except calibrate_loop.LoopError as e:
            log(f"server loop not measured ({e}): the sweep's and ping-pong's costs stand")
            return out
        out["loop"]["tick_bias"] = calibrate_loop.measure_bias(out["loop"]["rounds"], log,
                                                               iters=bias_iters)
        bias = calibrate_loop.tick_bias(out["loop"]["tick_bias"])
        log(f"tick split at a spin of {bias['spin_ns']:,} ns: user share "
            f"{bias['user_share']:.3f} [{bias['user_share_ci95'][0]:.3f}, "
            f"{bias['user_share_ci95'][1]:.3f}] against the spin's {bias['spin_share']:.3f}: "
            + ("biased" if bias["biased"] else "unbiased"))
        if cpu_doc is not None:  # both methods' figures, whichever the test chooses
            out["loop"]["ping_user_ns"] = ping_user(cpu_doc, section(out), log, ping_requests)
    return out


def ping_user(cpu_doc: dict, sec: dict, log: Callable[[str], None] = lambda m: None,
              requests: dict[int, int] | None = None) -> list[dict]:
    """:func:`.calibrate_loop.ping_user` on ``cpu_doc`` with ``[syscall]`` ``sec``
    (``requests``: its traced PINGs per depth)."""
    import tempfile
    from pathlib import Path

    from . import calibrate_loop
    from .calibrate import to_toml

    with tempfile.TemporaryDirectory(prefix="kvsim-cpu-") as tmp:
        path = Path(tmp) / "cpu.toml"
        path.write_text(to_toml({**cpu_doc, "syscall": sec}))
        user = calibrate_loop.ping_user(path, log=log, requests=requests)
    return [{"depth": d, "user_ns": u} for d, u in sorted(user.items())]


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


def section(raw: dict, method: str | None = None) -> dict:
    """The [syscall] table (the socket calls' keys of sim.config.SYSCALL_KEYS, with its src;
    the load's kernel keys are sim/calibrate_kernel.py's) from measure();
    ``method``: the loop's, as :func:`loop_meta` takes it."""
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
    if raw.get("loop"):  # the loop's kernel time per write; epoll_wait's time is in it
        base = alone(raw)
        k = loop_meta(raw, method)
        sec["write_ns"] = round(base["write_ns"] + k["residue_per_write_ns"], 1)
        src["write_ns"] = (f"{how}; intercept of the least-squares line "
                           f"({base['write_ns']:,.0f} ns) plus {loop_src(k)}")
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


def loop_meta(raw: dict, method: str | None = None) -> dict | None:
    """The server loop's kernel time per write and how it was taken
    (:func:`.calibrate_loop.kernel_time` over the costs :func:`alone` gives), for ``[meta]
    syscall_loop``; None where the loop was not measured."""
    from .calibrate_loop import kernel_time

    return kernel_time(raw["loop"], alone(raw), method) if raw.get("loop") else None


def loop_src(k: dict) -> str:
    """``write_ns``'s src after the intercept: the loop's kernel time per write, the method
    (:func:`loop_meta`'s ``k``) and the figures behind it."""
    b = k.get("bias")
    test = (f"kvsim-calibrate sysbias, at its spin of {b['spin_ns']:,} ns furthest from its "
            f"share: the ticks' user share {b['user_share']:.3f} [{b['user_share_ci95'][0]:.3f}"
            f", {b['user_share_ci95'][1]:.3f}] of {b['ticks']} ticks against the spin's "
            f"{b['spin_share']:.3f}, tolerance {b['tolerance']}"
            if b else "the tick split not tested (no kvsim-calibrate sysbias runs)")
    if k["method"] == "cpu":
        users = ", ".join(f"depth {p['depth']} {p['user_ns']:,.0f} ns"
                          for p in k["ping_user_ns"])
        return (f"the server loop's kernel time per write ({k['residue_per_write_ns']:,.0f} ns, "
                "method cpu: c_ref's server under redis-benchmark PING_MBULK from 50 clients, "
                "its whole CPU time (schedstat) less the traced PINGs' predicted user time ("
                f"{users}) less the calls' costs, per write, median of {len(k['cpu_runs'])} "
                "runs; not the tick-sampled system time, "
                f"{k['ticks_residue_per_write_ns']:,.0f} ns per write, the split being biased "
                f"({test}); sim/calibrate_loop.py; [meta] syscall_loop)")
    other = (f"; from the whole CPU time less the traced PINGs' predicted user time it would "
             f"be {k['cpu_residue_per_write_ns']:,.0f} ns"
             if k.get("cpu_residue_per_write_ns") is not None else "")
    return (f"the server loop's residue per write ({k['residue_per_write_ns']:,.0f} ns, method "
            "ticks: system time per request of c_ref's server under redis-benchmark "
            "PING_MBULK beyond the sweep's read and write costs, the wakeups, sleeps and "
            f"epoll_wait calls of the loop, the CPU time split by its ticks ({test}: "
            + ("biased, but no predicted user time to take the whole CPU time from" if b and
               b["biased"] else "unbiased" if b else "taken as is")
            + f"); median of {k.get('rounds')} interleaved rounds; {k['cells']}{other}; "
            "sim/calibrate_loop.py; [meta] syscall_loop)")
