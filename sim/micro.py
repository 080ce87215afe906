"""Microbenchmark traces: `kvsim calibrate`'s pointer chases as .kvt traces, and their
predicted time beside the native one.

    kvsim micro trace OUT.kvt --working-set 1GiB [--chains N] [--steps M]
    kvsim micro compare [--cpu local] [--rounds R] [--out FILE]

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

``compare`` runs the native programs (``kvsim-calibrate chase|mlp``, in interleaved rounds)
and simulates the same points on ``--cpu`` with the page size the native run was given
(2 MiB when the kernel backed the buffer with huge pages, else 4 KiB), and writes, per
point, the predicted and measured ns per load and their ratio to
``results/micro-vs-native.json`` (kvsim.provenance). A pure chase must be predicted at the
latency it measures; N chases must overlap as the native run shows.
"""

from __future__ import annotations

import argparse
import functools
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from kvsim import provenance, traces

from .config import ConfigError, CpuConfig, load_cpu, parse_size

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
RESULT_NAME = "micro-vs-native.json"


class MicroError(Exception):
    """Bad input: a one-line message naming what and where."""


@functools.lru_cache(maxsize=2)
def cycle_lines(size: int, seed: int = 1) -> np.ndarray:
    """The lines of a ``size``-byte working set in the order one random cycle visits them
    (read-only: the last two are kept, as a self-check simulates one set many times)."""
    n = size // LINE
    if n < 2:
        raise MicroError(f"--working-set: {size} B is less than two lines")
    out = np.random.default_rng(seed).permutation(n).astype(np.uint64)
    out.setflags(write=False)
    return out


def _marker(flag: int) -> np.ndarray:
    m = np.zeros(1, dtype=traces.RECORD_DTYPE)
    m["kind"], m["flags"] = traces.KIND_MARKER, flag
    return m


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
                  warmup: int | None = None, mlp_loop: bool | None = None) -> np.ndarray:
    """The records of ``chains`` chases of ``steps`` steps each over ``size`` bytes.

    ``mlp_loop``: the ``mlp`` loop (default when ``chains > 1``), else the ``chase`` loop.
    ``warmup``: chase loads of the warm-up prefix (default: what the native program walks
    first, capped at :data:`WARMUP_CAP`; 0 for none). The first record of the measured part
    has no producer (its chain's previous load is in the warm-up or does not exist)."""
    if chains < 1 or steps < 1:
        raise MicroError("--chains and --steps: at least 1")
    mlp_loop = chains > 1 if mlp_loop is None else mlp_loop
    if not mlp_loop and chains != 1:
        raise MicroError("the chase loop has one chain")
    lines = cycle_lines(size, seed)
    n = len(lines)
    if warmup is None:
        warmup = min(n, steps * chains if not mlp_loop else n, WARMUP_CAP)
    parts: list[np.ndarray] = []
    pos = 0
    if warmup:
        w = _chase_block(lines[np.arange(warmup) % n])
        w["dep"][0] = 0
        parts += [_marker(traces.MARK_WARMUP_BEGIN), w, _marker(traces.MARK_WARMUP_END)]
        pos = warmup % n
    if not mlp_loop:
        m = _chase_block(lines[(pos + np.arange(steps)) % n])
        m["dep"][0] = 0
    else:
        gap = n // chains  # starts spread evenly along the cycle, as calibrate.c
        idx = (np.arange(steps)[:, None] + gap * np.arange(chains)[None, :]) % n
        m = _mlp_block(lines[idx], chains)
        m["dep"][: 3 * chains : 3] = 0  # first round: the chains' starts are not loaded
    parts.append(m)
    return np.concatenate(parts)


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
            mlp_loop: bool, seed: int = 1, warmup: int | None = None) -> dict[str, Any]:
    """Simulated ns per chase load of one point, with the figures that explain it
    (``warmup``: as :func:`chase_records`)."""
    from kvsim import sim

    rec = chase_records(size, chains, steps, seed, warmup=warmup, mlp_loop=mlp_loop)
    res = sim.simulate(rec, cpu, page_size=page_size, validate=False)
    loads = steps * chains
    ns = res["cycles"] / cpu.freq_ghz / loads
    t = res.get("timing", {})
    return {"ns_per_load": ns, "cycles": res["cycles"], "mlp": t.get("mlp"),
            "avg_l1_miss_cycles": t.get("avg_l1_miss_cycles"),
            "walker_wait_cycles": t.get("stall_cycles", {}).get("walker_wait"),
            "tlb": res.get("tlb")}


def _native(cmd: Sequence[object]) -> dict[str, Any]:
    from .calibrate import run_bench

    try:
        return run_bench(*cmd)
    except OSError as e:
        raise MicroError(str(e)) from None


def _stats(xs: list[float]) -> dict[str, Any]:
    from kvsim import stats

    ci = stats.bootstrap_ci95(xs)
    return {"median": statistics.median(xs), "min": min(xs),
            "bootstrap_ci95": list(ci) if ci else None, "samples": xs}


def compare(cpu: CpuConfig, *, sizes: Sequence[int], chains: Sequence[int], mlp_size: int,
            pages: Sequence[str], rounds: int, loads: int, steps: int,
            log=lambda m: None) -> dict[str, Any]:
    """Native and predicted ns per load at every point (see the module docstring)."""
    if not cpu.timing_capable:
        raise MicroError(f"--cpu {cpu.name}: no timing (freq, core or DRAM missing)")
    nat: dict[tuple, list[float]] = {}
    huge: dict[tuple, float] = {}
    for r in range(rounds):
        for page in pages:
            log(f"round {r + 1}/{rounds}: native chase, {page} pages")
            out = _native(["chase", page, loads, 1, *sizes])
            for pt in out["points"]:
                k = ("chase", page, pt["size"], 1)
                nat.setdefault(k, []).extend(pt["ns"])
                huge[k] = pt["huge_fraction"]
            log(f"round {r + 1}/{rounds}: native parallel chases, {page} pages")
            out = _native(["mlp", page, mlp_size, loads, 1, *chains])
            for pt in out["points"]:
                k = ("mlp", page, out["size"], pt["chains"])
                nat.setdefault(k, []).extend(pt["ns_per_load"])
                huge[k] = out["huge_fraction"]
    rows = []
    for (kind, page, size, n), xs in sorted(nat.items()):
        ps = 2 * 1024 * 1024 if huge[(kind, page, size, n)] >= 0.5 else 4096
        log(f"simulate {kind} {size} B, {n} chain(s), {ps // 1024} KiB pages")
        p = predict(cpu, size, n, max(1, steps // n) if kind == "mlp" else steps, ps,
                    kind == "mlp")
        native = _stats(xs)
        rows.append({"loop": kind, "page": page, "huge_fraction": huge[(kind, page, size, n)],
                     "sim_page_size": ps, "working_set": size, "chains": n,
                     "native_ns": native, "predicted_ns": p["ns_per_load"],
                     "ratio": p["ns_per_load"] / native["median"],
                     "ratio_to_min": p["ns_per_load"] / native["min"],
                     "sim": {k: v for k, v in p.items() if k != "ns_per_load"}})
    # overlap: lat(1) / ns(N) of the mlp loop, natively and predicted
    for page in pages:
        one = [x for x in rows if x["loop"] == "mlp" and x["page"] == page and x["chains"] == 1]
        if not one:
            continue
        for x in rows:
            if x["loop"] == "mlp" and x["page"] == page:
                x["native_overlap"] = one[0]["native_ns"]["median"] / x["native_ns"]["median"]
                x["predicted_overlap"] = one[0]["predicted_ns"] / x["predicted_ns"]
    return {"rows": rows}


def _cpu_figures(cpu: CpuConfig) -> dict[str, Any]:
    t = cpu.tlb
    return {"name": cpu.name, "file": Path(cpu.source).name if cpu.source else None,
            "freq_ghz": cpu.freq_ghz,
            "dram_latency_ns": cpu.dram_latency_ns, "dram_bandwidth_gbs": cpu.dram_bandwidth_gbs,
            "rob": cpu.rob, "width": cpu.width,
            "caches": [{"name": c.name, "size": c.size, "latency": c.latency,
                        "mshrs": c.mshrs} for c in cpu.caches],
            "tlb": None if t is None else {"page_size": t.page_size,
                                           "walk_latency": t.walk_latency,
                                           "walk_reads": t.walk_reads,
                                           "walkers": t.walkers,
                                           "l2_latency": t.l2_latency}}


def _size_list(text: str, opt: str) -> list[int]:
    try:
        return [parse_size(x.strip(), opt) for x in text.split(",") if x.strip()]
    except ConfigError as e:
        raise MicroError(str(e)) from None


def main(argv: list[str] | None = None, prog: str = "kvsim micro") -> int:
    ap = argparse.ArgumentParser(prog=prog, description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("trace", help="write one chase trace (.kvt)")
    t.add_argument("output")
    t.add_argument("--working-set", default="1GiB")
    t.add_argument("--chains", type=int, default=1)
    t.add_argument("--steps", type=int, default=20_000)
    t.add_argument("--seed", type=int, default=1)
    c = sub.add_parser("compare", help="native against predicted, written to a result file")
    c.add_argument("--cpu", default="local")
    c.add_argument("--sizes", default="16KiB,256KiB,2MiB,16MiB,128MiB,1GiB",
                   help="working sets of the single chase (comma-separated)")
    c.add_argument("--mlp-size", default="1GiB", help="working set of the parallel chases")
    c.add_argument("--chains", default="1,2,4,8,16,24,32")
    c.add_argument("--pages", default="2m,4k")
    c.add_argument("--rounds", type=int, default=3)
    c.add_argument("--loads", type=int, default=300_000, help="native loads per sample")
    c.add_argument("--steps", type=int, default=40_000, help="simulated loads per point")
    c.add_argument("--out", default=None)
    a = ap.parse_args(argv)
    try:
        if a.cmd == "trace":
            n = write_trace(a.output, _size_list(a.working_set, "--working-set")[0],
                            a.chains, a.steps, a.seed)
            print(f"# wrote {a.output} ({n} records)")
            return 0
        cpu = load_cpu(a.cpu)
        pages = [p.strip() for p in a.pages.split(",") if p.strip()]
        if any(p not in ("2m", "4k") for p in pages):
            raise MicroError(f"--pages: 2m or 4k, got {a.pages}")
        chains = [int(x) for x in a.chains.split(",")]
        if 1 not in chains:
            chains.insert(0, 1)
        res = compare(cpu, sizes=_size_list(a.sizes, "--sizes"), chains=chains,
                      mlp_size=_size_list(a.mlp_size, "--mlp-size")[0], pages=pages,
                      rounds=a.rounds, loads=a.loads, steps=a.steps,
                      log=lambda m: print(f"micro: {m}", file=sys.stderr, flush=True))
    except (MicroError, ConfigError, ValueError) as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        return 2
    payload = {"command": f"{prog} " + " ".join(argv or sys.argv[1:]), "cpu": _cpu_figures(cpu),
               **res}
    for x in res["rows"]:
        ov = (f" overlap native {x['native_overlap']:.1f} predicted {x['predicted_overlap']:.1f}"
              if "native_overlap" in x else "")
        print(f"{x['loop']:5} {x['page']} {x['working_set'] // 1024:>8} KiB x{x['chains']:<3} "
              f"native {x['native_ns']['median']:7.1f} ns (min {x['native_ns']['min']:.1f}) "
              f"predicted {x['predicted_ns']:7.1f} ratio {x['ratio']:.2f}{ov}")
    out = a.out or provenance.default_result_path(RESULT_NAME)
    return provenance.publish(prog, out, payload)


if __name__ == "__main__":
    sys.exit(main())
