"""Microbenchmark traces: `kvsim calibrate`'s pointer chases as .kvt traces, and their
predicted time.

Each trace mirrors, record for record, a loop of ``sim/_calibrate/calibrate.c`` (the
``kvsim-calibrate`` program that `kvsim calibrate` runs), so that the simulator's prediction
of it can be set beside the time the same loop takes natively:

* ``chase`` (``--chains 1``, the ``chase`` subcommand): one pointer chase through a random
  cycle over every line of the working set. Per load the compiled loop is four
  instructions (``add``; ``mov (%r),%r``; ``cmp``; ``jne``): one load with a gap of 3,
  whose address is the previous load's value (``dep = 1``).
* ``mlp`` (``--chains N``, the ``mlp`` subcommand): N chases along the same cycle, started
  evenly spaced, advanced in turn by ``chain[c] = *chain[c]``. Per chain step the loop is
  six instructions: the load of ``chain[c]`` from the stack, the chase load (``dep = 1``),
  the store of ``chain[c]``, then ``add``, ``cmp``, ``jb``; a new round of the N chains adds
  five more (the outer loop's ``add``, ``cmp``, ``jb`` and the ``xor``, ``nop`` before the
  inner loop). The stack load's value is the chain's previous chase load, forwarded by the
  store: it names that load as its producer (``dep = 3N - 1``), so each chain is one
  dependent chain and the N chains are independent.

The instruction counts are those of the program as ``cc -O2`` compiles it on x86-64 (read
from ``objdump -d``); a compiler that unrolls differently changes only the gaps.

Both programs walk the cycle before they time it (``chase``: min(lines, loads) steps;
``mlp``: the walk that places the chains' starts, once round the cycle): a trace carries that
walk as a warm-up prefix (between ``WARMUP_BEGIN``/``WARMUP_END`` markers; simulated, not
counted), capped at :data:`WARMUP_CAP` loads.

The cycle is numpy's permutation of the working set's lines (seeded), not calibrate.c's
xorshift Sattolo cycle: both are uniformly random cycles, so their miss and TLB behaviour is
the same in distribution, which is what a prediction is compared on.

The ``kvsim micro`` command (``trace`` writes one of these traces; ``compare`` sets their
predictions beside the native loops, ``results/micro-vs-native.json``) is the study
:mod:`kvsim.experiments.micro`; this module is the traces and their prediction, which
``kvsim calibrate``'s self-check replays too.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np

from kvsim import traces

from .config import CpuConfig

LINE = 64
#: Where the chased buffer starts (2 MiB aligned, as calibrate.c aligns its huge-page buffers).
BASE = 0x7F00_0000_0000
#: The ``chain[]`` array of the ``mlp`` loop (on the stack natively).
STACK = 0x7FFD_0000_0000
#: Gaps of the compiled loops (see the module docstring).
CHASE_GAP = 3
MLP_GAP_INNER = 3
MLP_GAP_ROUND = MLP_GAP_INNER + 5
#: Longest warm-up prefix, in chase loads.
WARMUP_CAP = 1 << 18


class MicroError(Exception):
    """Bad input: a one-line message naming what and where."""


#: Bytes of cycles :func:`cycle_lines` keeps. A calibration's fit simulates every working
#: set once per candidate file, in the same order each time, and a cycle over 1 GiB takes
#: seconds to draw: the cycles are kept while they fit in this budget, and one that does
#: not fit is drawn again at each use rather than evicting others (an order that scans
#: more than the budget would otherwise evict each cycle before its next use).
CYCLE_CACHE_BYTES = 512 * 1024 * 1024
_cycles: dict[tuple[int, int], np.ndarray] = {}


def cycle_lines(size: int, seed: int = 1) -> np.ndarray:
    """The lines of a ``size``-byte working set in the order one random cycle visits them
    (read-only: kept within :data:`CYCLE_CACHE_BYTES`, as a calibration simulates each set
    many times)."""
    n = size // LINE
    if n < 2:
        raise MicroError(f"--working-set: {size} B is less than two lines")
    out = _cycles.get((n, seed))
    if out is None:
        out = np.random.default_rng(seed).permutation(n).astype(np.uint64)
        out.setflags(write=False)
        if sum(c.nbytes for c in _cycles.values()) + out.nbytes <= CYCLE_CACHE_BYTES:
            _cycles[(n, seed)] = out
    return out


def map_threads(fn: Callable[[Any], Any], items: Iterable[Any]) -> list[Any]:
    """``[fn(x) for x in items]``, on one thread per core this process may run on (at most
    eight): the compiled engine releases the GIL while it simulates, so independent
    simulations (a calibration's chases) run side by side. Each result is its item's alone,
    whatever the threads: the same as in turn."""
    items = list(items)
    n = min(len(items), len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
            else os.cpu_count() or 1, 8)
    if n <= 1:
        return [fn(x) for x in items]
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=n, thread_name_prefix="kvsim-micro") as pool:
        return list(pool.map(fn, items))


def _chase_block(lines: np.ndarray) -> np.ndarray:
    r = np.zeros(len(lines), dtype=traces.RECORD_DTYPE)
    r["addr"] = BASE + lines * LINE
    r["gap"], r["dep"], r["size"], r["kind"] = CHASE_GAP, 1, 8, traces.KIND_LOAD
    return r


def _mlp_block(order: np.ndarray, chains: int) -> np.ndarray:
    """``order``: (steps, chains) line numbers; three records per chain step."""
    steps = order.shape[0]
    r = np.zeros((steps, chains, 3), dtype=traces.RECORD_DTYPE)
    r["size"] = 8
    stack = STACK + 8 * np.arange(chains, dtype=np.uint64)
    r["addr"][:, :, 0] = stack
    r["kind"][:, :, 0] = traces.KIND_LOAD
    r["gap"][:, :, 0] = MLP_GAP_INNER
    r["gap"][:, 0, 0] = MLP_GAP_ROUND
    r["dep"][:, :, 0] = 3 * chains - 1
    r["addr"][:, :, 1] = BASE + order * LINE
    r["kind"][:, :, 1] = traces.KIND_LOAD
    r["dep"][:, :, 1] = 1
    r["addr"][:, :, 2] = stack
    r["kind"][:, :, 2] = traces.KIND_STORE
    return r.reshape(-1)


def chase_records(size: int, chains: int = 1, steps: int = 20_000, seed: int = 1,
                  warmup: int | None = None, mlp_loop: bool | None = None,
                  loop_warmup: int = 0) -> np.ndarray:
    """The records of ``chains`` chases of ``steps`` steps each over ``size`` bytes.

    ``mlp_loop``: the ``mlp`` loop (default when ``chains > 1``), else the ``chase`` loop.
    ``warmup``: chase loads of the warm-up prefix (default: what the native program walks
    first, capped at :data:`WARMUP_CAP`; 0 for none). ``loop_warmup``: steps of the timed
    loop itself after it, still in the warm-up, as a native repeat after the first starts
    where the loop's own steady state is (the caches, the TLBs, and the ages of the
    page-table lines, which the loop's rate sets: sim/MODEL.md §3). The first record of the
    measured part has no producer (its chain's previous load is in the warm-up or does not
    exist)."""
    if chains < 1 or steps < 1:
        raise MicroError("--chains and --steps: at least 1")
    mlp_loop = chains > 1 if mlp_loop is None else mlp_loop
    if not mlp_loop and chains != 1:
        raise MicroError("the chase loop has one chain")
    lines = cycle_lines(size, seed)
    n = len(lines)
    if warmup is None:
        warmup = min(n, steps * chains if not mlp_loop else n, WARMUP_CAP)
    if not mlp_loop:
        return _chase_loop(lines, steps, warmup, loop_warmup)
    parts = [_warmup_walk(lines, warmup)] if warmup else []
    gap = n // chains  # starts spread evenly along the cycle, as calibrate.c
    idx = (np.arange(steps + loop_warmup)[:, None] + gap * np.arange(chains)[None, :]) % n
    m = _mlp_block(lines[idx], chains)
    m["dep"][: 3 * chains : 3] = 0  # first round: the chains' starts are not loaded
    return _marked(parts, m, loop_warmup, 3 * chains, 3)


def cycle_records(lines: np.ndarray, steps: int, warmup: int) -> np.ndarray:
    """The chase loop over the cycle ``lines`` (line numbers in visiting order, the last
    linked to the first): ``warmup`` loads between warm-up markers (none for 0), then
    ``steps`` timed loads, the first without a producer."""
    return _chase_loop(lines, steps, warmup)


def _warmup_walk(lines: np.ndarray, warmup: int) -> np.ndarray:
    """The first ``warmup`` loads along the cycle, the first without a producer."""
    w = _chase_block(lines[np.arange(warmup) % len(lines)])
    w["dep"][0] = 0
    return w


def _chase_loop(lines: np.ndarray, steps: int, warmup: int, loop_warmup: int = 0
                ) -> np.ndarray:
    """The ``chase`` loop over the cycle ``lines``: the warm-up walk of ``warmup`` loads,
    then ``loop_warmup`` + ``steps`` loads of the loop going on from where it ended (see
    :func:`chase_records`)."""
    parts = [_warmup_walk(lines, warmup)] if warmup else []
    m = _chase_block(lines[(warmup + np.arange(steps + loop_warmup)) % len(lines)])
    m["dep"][0] = 0
    return _marked(parts, m, loop_warmup, 1, 1)


def _marked(parts: list[np.ndarray], m: np.ndarray, loop_warmup: int, per: int,
            stride: int) -> np.ndarray:
    """``parts`` and the first ``loop_warmup`` steps (``per`` records each) of the loop ``m``
    between warm-up markers (none when both are empty), then the rest of ``m``, whose first
    step's chase loads (every ``stride``-th record of it) lose their producers to the
    marker."""
    if loop_warmup:
        parts = parts + [m[: loop_warmup * per]]
        m = m[loop_warmup * per:].copy()
        m["dep"][: per : stride] = 0
    if parts:
        parts = ([traces.marker_record(traces.MARK_WARMUP_BEGIN)] + parts
                 + [traces.marker_record(traces.MARK_WARMUP_END)])
    return np.concatenate(parts + [m])


def header(size: int, chains: int, steps: int, seed: int, mlp_loop: bool) -> dict[str, Any]:
    return {"producer": {"name": "kvsim.sim.micro", "version": "1", "git_commit": None},
            "workload": {"name": "mlp" if mlp_loop else "chase", "working_set": size,
                         "chains": chains, "steps": steps, "seed": seed},
            "gap_model": "calibrate.c loops at cc -O2 (sim/micro.py)"}


def write_trace(path: str | Path, size: int, chains: int = 1, steps: int = 20_000,
                seed: int = 1) -> int:
    """Write one chase trace; returns its record count."""
    rec = chase_records(size, chains, steps, seed)
    with traces.Writer(str(path), header(size, chains, steps, seed, chains > 1)) as w:
        w.write(rec)
    return len(rec)


# --- predicted against native ------------------------------------------------------------

def predict(cpu: CpuConfig, size: int, chains: int, steps: int, page_size: int,
            mlp_loop: bool, seed: int = 1, warmup: int | None = None,
            loop_warmup: int = 0) -> dict[str, Any]:
    """Simulated ns per chase load of one point, with the figures that explain it
    (``warmup``, ``loop_warmup``: as :func:`chase_records`)."""
    from kvsim import sim

    rec = chase_records(size, chains, steps, seed, warmup=warmup, mlp_loop=mlp_loop,
                        loop_warmup=loop_warmup)
    res = sim.simulate(rec, cpu, page_size=page_size, validate=False)
    loads = steps * chains
    ns = res["cycles"] / cpu.freq_ghz / loads
    t = res.get("timing", {})
    return {"ns_per_load": ns, "cycles": res["cycles"], "mlp": t.get("mlp"),
            "avg_l1_miss_cycles": t.get("avg_l1_miss_cycles"),
            "walker_wait_cycles": t.get("stall_cycles", {}).get("walker_wait"),
            "tlb": res.get("tlb")}
