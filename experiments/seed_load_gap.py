"""Where the seed's small-value snapshot loads lose their time: the ``seed_absolute`` row's
pair on the seed's preset, its predicted time per key in parts, and what each candidate
cause moves.

    python -m kvsim.experiments.seed_load_gap [--value-sizes 8,32,256] [--keys N]
        [--work-from CPUFILE] [--out results/seed-load-gap-xeon-8255c.json]

Valkey #2311 (seed 000) timed snapshot loads of 8-256 B values on an Intel Xeon Platinum
8255C; the ``seed_absolute`` table (:mod:`kvsim.experiments.seed_absolute`) predicts them on
the seed's preset at 0.50-0.73 of the published time, before and after the change alike. This
traces the row's pair as that table's cells do (the seed row's options at
:func:`~kvsim.experiments.seed_absolute.sim_keys`' keys, ``--keys`` to override: c_ref's
defaults, the snapshot's read(2) calls and the fresh arena's page faults in the trace), once
with c_ref's arena (the cells' allocator) and once with the C library's malloc
(``--allocator libc``: its accesses traced, not its instructions). Each trace is simulated on
the preset and on copies of it that change one thing (:func:`settings`: the ablation's
settings of the same names, :data:`kvsim.experiments.ablation.SETTINGS`, and this study's: a
walk that reads a page-table line, the 8255C's base clock, the load's kernel calls free or
twice their cost, the ``[work]`` rates of a calibrated CPU file, ``--work-from``, and every
rate over Valkey's instructions per key over c_ref's, measured by callgrind,
``--callgrind``). The baseline's predicted time is split into parts: instructions per key,
the stall causes, demand misses per level, walks, DRAM reads, the kernel's calls, and each
kind of work (the time less the same with that kind free:
``kvsim.experiments.load_split._kind_split``). Each figure is set beside the published ns per
key of the seed's rows of that value size (cluster mode off), unscaled and, where
``results/scale.json`` has the pair, scaled by its growth of cycles per key (as the table
scales). Simulation only; nothing native is run.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kvsim import provenance
from kvsim.sim.config import ConfigError, CpuConfig, load_cpu

RESULT_NAME = "seed-load-gap-xeon-8255c.json"
PRESET = "xeon-8255c"
#: the CPU file whose measured ``[work]`` rates ``work_calibrated`` puts on the preset
WORK_FROM = "results/calibrate-xeon-m167-q15-quick.toml"
#: callgrind's instructions per key of Valkey's load and of c_ref's (its arena) on the same
#: keys (``python -m kvsim.experiments.load_split callgrind``): ``work_valkey``'s factor
CALLGRIND = "results/load-split-callgrind-work.json"
#: the 8255C's base clock (the preset's src S17: 2.5 GHz; the preset runs at 3.0, the
#: all-core clock a host reported, S18)
BASE_CLOCK_GHZ = 2.5
#: the ablation's settings this study runs (kvsim.experiments.ablation.SETTINGS; none of them
#: scales the trace's gaps)
ABLATION = ("base", "walk_0", "walk_x2", "dram_x2", "no_hw_prefetch")
#: allocator -> the settings its traces are simulated under (the arena: every one)
ALLOCATORS = {"arena": None, "libc": ("base",)}


def _kernel(scale: float) -> Callable[[CpuConfig], CpuConfig]:
    """The load's kernel calls (page faults, file reads) at ``scale`` times their cost."""
    from kvsim import traces
    from kvsim.experiments.load_split import KERNEL_CALLS
    from kvsim.sim.config import Syscall

    def change(cpu: CpuConfig) -> CpuConfig:
        call, byte = list(cpu.syscall.call_ns), list(cpu.syscall.byte_ns)
        for name in KERNEL_CALLS:
            k = traces.SYSCALL_NAMES.index(name)
            call[k], byte[k] = call[k] * scale, byte[k] * scale
        return cpu.with_changes(syscall=Syscall(tuple(call), tuple(byte)))
    return change


def valkey_over_cref(callgrind: str, value_size: int) -> float:
    """Valkey's instructions per key over c_ref's arena load's at ``value_size`` in a
    ``load_split callgrind`` result."""
    import json

    for p in json.loads(Path(callgrind).read_text())["profiles"]:
        if p["value_bytes"] == value_size and "valkey" in p and "cref-arena" in p:
            return p["valkey"]["instructions_per_key"] / p["cref-arena"]["instructions_per_key"]
    raise ValueError(f"{callgrind}: no valkey and cref-arena profile of {value_size} B")


def settings(work_from: str, valkey_factor: float = 1.0
             ) -> dict[str, tuple[str, Callable[[CpuConfig], CpuConfig]]]:
    """setting -> (what it changes, CPU change): :data:`ABLATION`'s, then this study's;
    ``valkey_factor``: Valkey's instructions per key over c_ref's (:func:`valkey_over_cref`),
    ``work_valkey``'s."""
    from kvsim.experiments import ablation

    other = load_cpu(work_from)
    out = {s: ablation.SETTINGS[s][:2] for s in ABLATION}
    out.update({
        "walk_reads_1": ("each page walk also reads one page-table line through the caches "
                         "(the preset's walks read none: [tlb] walk_reads)",
                         lambda c: ablation._tlb(c, walk_reads=1)),
        "clock_base": (f"the 8255C's base clock, {BASE_CLOCK_GHZ} GHz (the preset: all-core "
                       "3.0 GHz)", lambda c: c.with_changes(freq_ghz=BASE_CLOCK_GHZ)),
        "kernel_0": ("the load's kernel calls (page faults, the snapshot's read(2)) free",
                     _kernel(0.0)),
        "kernel_x2": ("the load's kernel calls at twice their cost", _kernel(2.0)),
        "work_calibrated": (f"the [work] rates of {work_from} (measured on an Intel guest), "
                            "its gap model's", lambda c: c.with_changes(
                                work=other.work, work_gap_model=other.work_gap_model)),
        "work_valkey": (f"every [work] rate over {valkey_factor:.3f}, Valkey's instructions per "
                        "key over c_ref's (callgrind): c_ref's work done at Valkey's count",
                        lambda c: c.with_changes(work=tuple((k, r / valkey_factor)
                                                            for k, r in c.work))),
    })
    out["work_valkey_clock_base"] = (
        "the two together: Valkey's count at the base clock",
        lambda c: out["work_valkey"][1](out["clock_base"][1](c)))
    return out


def seed_rows(value_size: int) -> list[Any]:
    """The seed's load rows of ``value_size`` with cluster mode off."""
    from kvsim.experiments import seed_absolute as sa

    rows = [r for r in sa.seed_rows() if r.kind.workload == "load" and not r.cluster
            and r.value_bytes == value_size and r.cref_variant is not None]
    if not rows:
        raise ValueError(f"--value-size {value_size}: no seed load row of that size")
    return rows


def _per_key(res: dict[str, Any], cpu: CpuConfig, keys: int) -> dict[str, Any]:
    """A simulation's measured phase per key, in parts."""
    phase = next(p for p in res["phases"] if p["phase"] == 1)
    t = res["timing"]
    sysc = res.get("syscalls") or {}
    from kvsim import traces

    kernel = {}
    for name, n in (sysc.get("calls") or {}).items():
        k = traces.SYSCALL_NAMES.index(name)
        ns = n * cpu.syscall.call_ns[k] + sysc["bytes"].get(name, 0) * cpu.syscall.byte_ns[k]
        kernel[name] = {"calls": n / keys, "cycles": ns * cpu.freq_ghz / keys}
    return {"cycles_per_key": phase["cycles"] / keys,
            "ns_per_key": phase["cycles"] / cpu.freq_ghz / keys,
            "instructions_per_key": phase["instructions"] / keys, "ipc": t["ipc"],
            "mlp": t["mlp"],
            "stall_cycles_per_key": {k: v / keys for k, v in t["stall_cycles"].items()},
            "demand_misses_per_key": {lv["name"]: lv["demand_misses"] / keys
                                      for lv in res["levels"]},
            "stlb_misses_per_key": (res["tlb"] or {}).get("stlb_misses", 0) / keys,
            "dram_reads_per_key": res["dram"]["reads"] / keys,
            "kernel_per_key": kernel}


def simulate(trace: Path, keys: int, cpus: dict[str, CpuConfig]) -> dict[str, dict]:
    """``trace`` on every CPU of ``cpus`` in one pass: name -> :func:`_per_key`."""
    from kvsim import sim

    res = sim.simulate_many(str(trace), list(cpus.values()))
    return {n: _per_key(r, c, keys) for (n, c), r in zip(cpus.items(), res, strict=True)}


def published(rows: list[Any], freq_ghz: float) -> list[dict[str, Any]]:
    """Each seed row's published ns (and cycles at ``freq_ghz``) per key, both sides, and
    the growth of cycles per key ``results/scale.json`` measured for the pair on the
    preset from the simulated keys to the largest at or below the row's (None without)."""
    from kvsim.experiments import seed_absolute as sa

    out = []
    for r in rows:
        ns = {"base": r.baseline * 1e9 / r.keys, "opt": r.optimized * 1e9 / r.keys}
        out.append({"row": sa._label(r), "keys": r.keys, "variant": r.cref_variant,
                    "ns_per_key": ns,
                    "cycles_per_key": {s: v * freq_ghz for s, v in ns.items()}})
    return out


def _growth(row: Any, keys: int) -> dict[str, Any] | None:
    from kvsim.experiments import seed_absolute as sa

    if not sa._on_scale_curve(row):
        return None
    curves = sa._scale_growth()
    out = {}
    for s, side in (("base", "a"), ("opt", "b")):
        g = sa.growth(curves.get((row.kind.scale_pair, row.kind.preset, side), []), keys,
                      row.keys)
        if g is None:
            # the simulated size is not on the curve: the growth from its nearest size
            curve = curves.get((row.kind.scale_pair, row.kind.preset, side), [])
            near = min((k for k, _ in curve), key=lambda k: abs(k - keys), default=None)
            g = sa.growth(curve, near, row.keys) if near is not None else None
        out[s] = {"factor": g[0], "to_keys": g[1]} if g else None
    return out


def run(value_size: int, keys: int | None, work_from: str, workdir: Path,
        log=lambda m: None, callgrind: str = CALLGRIND) -> dict[str, Any]:
    """The study: both sides traced with each allocator and simulated under every setting;
    the baseline's kinds of work; the published figures beside them."""
    from kvsim.experiments import cref, load_split
    from kvsim.experiments import seed_absolute as sa

    rows = seed_rows(value_size)
    row = rows[0]
    keys = keys or sa.sim_keys(row, "full")
    base = load_cpu(PRESET)
    factor = valkey_over_cref(callgrind, value_size)
    sets = settings(work_from, factor)
    cpus = {n: change(base) for n, (_, change) in sets.items()}
    sides = {"base": "none", "opt": row.cref_variant}
    predicted: dict[str, dict[str, Any]] = {}
    kinds: dict[str, Any] = {}
    for alloc in ALLOCATORS:
        predicted[alloc] = {}
        for s, variant in sides.items():
            path = workdir / f"load-{value_size}-{alloc}-{variant}.kvt"
            opts = dict(row.config, keys=keys, variant=variant)
            if alloc != "arena":
                opts["allocator"] = alloc
            log(f"{value_size} B, {alloc}, {variant}: trace {keys:,} keys")
            cref.trace("load", path, opts)
            on = {n: c for n, c in cpus.items() if n in (ALLOCATORS[alloc] or cpus)}
            log(f"{value_size} B, {alloc}, {variant}: simulate {len(on)} settings")
            predicted[alloc][s] = simulate(path, keys, on)
            if alloc == "arena" and s == "base":
                log(f"{value_size} B: the kinds of work")
                total = predicted[alloc][s]["base"]["ns_per_key"]
                k = load_split._kind_split(base, path, keys, total)
                kinds = {"cycles_per_key": {n: v * base.freq_ghz
                                            for n, v in k["kind_ns_per_key"].items()},
                         "work_free_cycles_per_key": k["work_free_ns_per_key"]
                         * base.freq_ghz}
            path.unlink()
    pub = published(rows, base.freq_ghz)
    for p, r in zip(pub, rows, strict=True):
        p["scale_growth"] = _growth(r, keys)
        gaps = {}
        for alloc in ALLOCATORS:
            gaps[alloc] = {n: {s: p["ns_per_key"][s] - predicted[alloc][s][n]["ns_per_key"]
                               for s in sides} for n in predicted[alloc]["base"]}
        p["gap_ns_per_key"] = gaps
        g = p["scale_growth"] or {}
        p["gap_scaled_ns_per_key"] = {
            s: p["ns_per_key"][s] - predicted["arena"][s]["base"]["ns_per_key"]
            * g[s]["factor"] for s in sides if g.get(s)}
    return {"cpu": PRESET, "freq_ghz": base.freq_ghz, "value_size": value_size,
            "keys": keys, "sides": sides, "options": dict(row.config),
            "allocators": {"arena": "c_ref's arena (the seed_absolute cells' traces)",
                           "libc": "the C library's malloc and free, traced"},
            "work_from": work_from, "callgrind": callgrind,
            "valkey_instructions_over_cref": factor,
            "settings": {n: d for n, (d, _) in sets.items()},
            "predicted": predicted, "kinds_of_work": kinds, "published": pub}


def _summary(doc: dict[str, Any]) -> list[str]:
    out = [f"{doc['value_size']} B, {doc['keys']:,} keys on {doc['cpu']}:"]
    pred = doc["predicted"]
    for p in doc["published"]:
        out.append(f"{p['row']}: published {p['ns_per_key']['base']:.0f} / "
                   f"{p['ns_per_key']['opt']:.0f} ns per key before / after")
    for alloc, by in pred.items():
        for n in by["base"]:
            b, o = by["base"][n], by["opt"][n]
            out.append(f"  {alloc:<5} {n:<16} {b['ns_per_key']:7.1f} / {o['ns_per_key']:7.1f} "
                       f"ns per key ({b['cycles_per_key']:.0f} / {o['cycles_per_key']:.0f} "
                       f"cycles, {b['instructions_per_key']:.0f} instructions)")
    return out


def main(argv: list[str] | None = None,
         prog: str = "python -m kvsim.experiments.seed_load_gap") -> int:
    ap = argparse.ArgumentParser(prog=prog, description=__doc__.splitlines()[0])
    ap.add_argument("--value-sizes", default="8",
                    help="the seed rows' value bytes (comma-separated: 8, 32, 256)")
    ap.add_argument("--keys", type=int, default=None,
                    help="keys traced (default: the seed_absolute cells' at full scale)")
    ap.add_argument("--work-from", default=WORK_FROM,
                    help="the CPU file whose [work] rates work_calibrated uses")
    ap.add_argument("--callgrind", default=CALLGRIND,
                    help="a load_split callgrind result: work_valkey's factor")
    provenance.add_out_option(ap, RESULT_NAME)
    a = ap.parse_args(argv)
    out = provenance.out_path(a.out, RESULT_NAME)
    if provenance.out_dir_missing(out):
        return 2
    log = lambda m: print(f"seed_load_gap: {m}", file=sys.stderr, flush=True)  # noqa: E731
    try:
        if a.keys is not None and a.keys < 1:
            raise ValueError("--keys: at least 1")
        sizes = [int(x) for x in a.value_sizes.split(",") if x.strip()]
        for v in sizes:
            seed_rows(v)  # every size checked before any is traced
            valkey_over_cref(a.callgrind, v)
        with tempfile.TemporaryDirectory(prefix="kvsim-seedgap-") as d:
            rows = [run(v, a.keys, a.work_from, Path(d), log, a.callgrind) for v in sizes]
    except (ConfigError, ValueError, OSError) as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        return 2
    for doc in rows:
        print("\n".join(_summary(doc)))
    return provenance.publish(prog, out, {"command": provenance.command(), "rows": rows})


if __name__ == "__main__":
    sys.exit(main())
