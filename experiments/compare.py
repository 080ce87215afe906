"""``kvsim compare``: one workload, two or more variants, one or more CPUs, one table per CPU.

Each variant's trace is made once with the c_ref keyspace (:func:`kvsim.experiments.cref.trace`,
or taken from a file) and simulated on every CPU (:func:`kvsim.sim.simulate`). The first
variant is the baseline: ``speedup`` is its cycles over a variant's cycles on the same CPU.

A row (one per CPU and variant, in that order) holds:

* ``cpu``, ``variant``, ``levels`` (preset names) and ``roles`` (``L1``, ``L2``, ``LLC``);
* ``records``, ``instructions``, ``operations`` (COMMAND markers), ``cycles``,
  ``cycles_per_op``, ``speedup``, ``ipc``, ``mlp`` (None on a caches-only CPU file);
* ``demand_misses``: load and store misses per level from L1 outward (prefetches, write-backs
  and victim offers left out, see :mod:`kvsim.experiments.summary`);
  ``demand_misses_by_structure``: the same per structure (trace tag name);
* ``prefetch``: software and hardware prefetches summed over the levels (``issued``,
  ``useful``, ``late``, ``useless``, ...; sim/MODEL.md section 4);
* ``stall_cycles``: every stall cause (they overlap; sim/MODEL.md section 6).

Runtime: the traces take a fraction of a second each at 100k keys and 10k GETs; each
simulation about as long.
"""

from __future__ import annotations

import csv
import io
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from kvsim import sim, traces
from kvsim.experiments import cref, summary
from kvsim.sim import local as sim_local

__all__ = ["compare", "flat_row", "plot", "rows_csv", "rows_text", "simulate_rows"]


def simulate_rows(traced: Mapping[str, str | Path], cpus: Sequence[str],
                  step: Callable[[str], object] | None = None) -> list[dict[str, Any]]:
    """Simulate each ``{variant: trace path}`` on each CPU (preset name or .toml path) and
    return the rows, CPU by CPU, variants in the given order (the first is the baseline).
    Each trace is read once and fed to every CPU side by side (:func:`sim.simulate_many`)."""
    if len(traced) < 1:
        raise ValueError("compare: at least one variant is needed")
    configs = {c: sim.load_cpu(c) for c in cpus}  # fail on a bad CPU before any work
    results: dict[str, dict[str, dict]] = {}
    for variant, path in traced.items():
        with traces.open(path) as tr:
            got = sim.simulate_many(tr, list(configs.values()))
        results[variant] = dict(zip(configs, got, strict=True))
        if step is not None:
            for cpu in configs:
                step(f"simulate {variant} on {cpu}")
    rows = []
    for cpu in configs:
        base_cycles = None
        for i, variant in enumerate(traced):
            row = _row(cpu, variant, results[variant][cpu])
            row["cpu_label"] = sim_local.label(configs[cpu])  # local (uncalibrated)
            if i == 0:
                base_cycles = row["cycles"]
            row["speedup"] = (base_cycles / row["cycles"]
                              if base_cycles and row["cycles"] else None)
            rows.append(row)
    return rows


def _row(cpu: str, variant: str, res: dict) -> dict[str, Any]:
    lv = summary.level_rows(res)
    ops = res["commands"]["count"]
    t = res.get("timing")
    return {
        "cpu": cpu, "variant": variant,
        "levels": [r["name"] for r in lv], "roles": [r["role"] for r in lv],
        "records": res["records"], "instructions": res["instructions"], "operations": ops,
        "cycles": res["cycles"], "speedup": None,
        "cycles_per_op": res["cycles"] / ops if res["cycles"] is not None and ops else None,
        "ipc": res["ipc"], "mlp": t["mlp"] if t else None,
        "demand_misses": [r["demand_misses"] for r in lv],
        "demand_misses_by_structure": summary.demand_misses_by_tag(res),
        "prefetch": summary.prefetch_totals(res),
        "stall_cycles": dict(t["stall_cycles"]) if t else {},
    }


def compare(workload: str, variants: Sequence[str], cpus: Sequence[str],
            options: Mapping[str, object] | None = None, trace_dir: str | Path | None = None,
            step: Callable[[str], object] | None = None) -> list[dict[str, Any]]:
    """Trace ``workload`` once per variant (``options`` are c_ref's workload options, without
    ``variant``) and simulate every trace on every CPU; see :func:`simulate_rows`.

    ``trace_dir``: keep the traces there as ``WORKLOAD-VARIANT.kvt`` (default: a temporary
    directory, removed afterwards).

    ``batch`` and ``chunk`` (:data:`SHARED_SIZES`) go to the variants that read them (the
    baseline ``naive`` ignores a lookahead batch); one that no variant reads is an error, c_ref's
    (``--batch 8: not used by ...``).
    """
    if len(variants) < 2:
        raise ValueError("compare: give at least two --variant (the first is the baseline)")
    if len(set(variants)) != len(variants):
        raise ValueError(f"compare: a variant is given twice: {', '.join(variants)}")
    for c in cpus:
        sim.load_cpu(c)  # a bad CPU fails before any tracing
    opts = {k: v for k, v in (options or {}).items() if k != "variant"}
    with tempfile.TemporaryDirectory(prefix="kvsim-compare-") as tmp:
        out = Path(trace_dir) if trace_dir is not None else Path(tmp)
        out.mkdir(parents=True, exist_ok=True)
        paths = {}
        unused: dict[str, Exception | None] = {}
        for v in variants:
            if step is not None:
                step(f"trace {v}")
            paths[v] = out / f"{workload}-{v}.kvt"
            _trace_reading(workload, paths[v], dict(opts, variant=v), unused)
        for k, err in unused.items():
            if err is not None:  # no variant read it
                raise cref.CrefError(f"--{k} {opts[k]}: read by none of the compared variants "
                                     f"({', '.join(variants)}); {err}")
        return simulate_rows(paths, cpus, step=step)


#: the batch sizes a comparison shares among its variants, given to those that read them
SHARED_SIZES = ("batch", "chunk")


def _trace_reading(workload: str, path: Path, opts: dict, unused: dict) -> None:
    """Trace one variant; a shared size it does not read (c_ref's ``--SIZE N: not used
    by``) is left out for it, and ``unused[SIZE]`` keeps the error until a variant reads it."""
    while True:
        try:
            cref.trace(workload, path, opts)
        except cref.CrefError as exc:
            size = next((k for k in SHARED_SIZES if k in opts and str(exc).startswith(
                f"--{k} {opts[k]}: not used by")), None)
            if size is None:
                raise
            unused.setdefault(size, exc)
            opts = {k: v for k, v in opts.items() if k != size}
            continue
        for k in SHARED_SIZES:
            if k in opts:
                unused[k] = None  # read by this variant
        return


# --- output -------------------------------------------------------------------------------

def _fmt(v: Any, digits: int = 2) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:,.{digits}f}"
    return f"{v:,}"


def _structures(rows: list[dict], level: int, n: int) -> list[str]:
    """The ``n`` structures with the most demand misses at ``level`` in the baseline row,
    then any other variant's top ones (so a structure a variant makes worse shows)."""
    names: list[str] = []
    for r in rows:
        by = r["demand_misses_by_structure"]
        ranked = sorted((t for t in by if by[t][level]), key=lambda t: (-by[t][level], t))
        names += [t for t in ranked[:n] if t not in names]
    return names


def rows_text(rows: list[dict[str, Any]], structures: int = 5, stalls: int = 3) -> str:
    """One table per CPU: a column per variant, a line per figure."""
    out: list[str] = []
    for cpu in dict.fromkeys(r["cpu"] for r in rows):
        rs = [r for r in rows if r["cpu"] == cpu]
        variants = [r["variant"] for r in rs]
        w = max(12, *(len(v) + 2 for v in variants))
        lines: list[tuple[str, list[str]]] = []

        def add(label: str, vals: list[Any], digits: int = 2) -> None:
            lines.append((label, [_fmt(v, digits) for v in vals]))  # noqa: B023

        add("speedup", [r["speedup"] for r in rs])
        add("cycles/op", [r["cycles_per_op"] for r in rs], 1)
        add("IPC", [r["ipc"] for r in rs])
        add("MLP", [r["mlp"] for r in rs])
        names, roles = rs[0]["levels"], rs[0]["roles"]
        lines.append(("demand misses per level", []))
        for i, (name, role) in enumerate(zip(names, roles, strict=True)):
            add(f"  {role} ({name})", [r["demand_misses"][i] for r in rs])
        for i in sorted({0, len(names) - 1}):
            lines.append((f"{roles[i]} ({names[i]}) demand misses by structure", []))
            for t in _structures(rs, i, structures):
                add(f"  {t}", [r["demand_misses_by_structure"].get(t, [0] * len(names))[i]
                               for r in rs])
        for which, short in (("software", "swpf"), ("hardware", "hwpf")):
            pfs = [r["prefetch"][which] for r in rs]
            if not any(p.get("issued") for p in pfs):
                continue
            lines.append((f"{which} prefetches (all levels)", []))
            for k in ("issued", "useful", "late", "useless"):
                add(f"  {short} {k}", [p.get(k, 0) for p in pfs])
        st: list[str] = []
        for r in rs:
            top = sorted(r["stall_cycles"].items(), key=lambda kv: (-kv[1], kv[0]))[:stalls]
            st += [k for k, v in top if v and k not in st]
        if st:
            lines.append(("stall cycles per op (top causes; they overlap)", []))
            for k in st:
                add(f"  {k}", [r["stall_cycles"].get(k, 0.0) / r["operations"]
                               if r["operations"] else None for r in rs], 1)
        lw = max(len(label) for label, _ in lines) + 2
        shown = rs[0].get("cpu_label", cpu)
        out.append(f"== {shown}: {' / '.join(names)}; baseline {variants[0]}, "
                   f"{rs[0]['operations']:,} operations ==")
        out.append(" " * lw + "".join(f"{v:>{w}}" for v in variants))
        for label, vals in lines:
            out.append((f"{label:<{lw}}" + "".join(f"{v:>{w}}" for v in vals)).rstrip())
        out.append("")
    return "\n".join(out).rstrip("\n")


def flat_row(r: dict[str, Any]) -> dict[str, Any]:
    """A row with one column per figure: ``demand_misses_<role>``, ``<role>_misses:<tag>``,
    ``swpf_<class>``/``hwpf_<class>`` and ``stall:<cause>``."""
    f = {k: r[k] for k in ("cpu", "variant", "records", "instructions", "operations", "cycles",
                           "cycles_per_op", "speedup", "ipc", "mlp")}
    f["cpu_label"] = r.get("cpu_label", r["cpu"])
    for i, role in enumerate(r["roles"]):
        f[f"demand_misses_{role}"] = r["demand_misses"][i]
        f[f"level_{role}"] = r["levels"][i]
    for t, counts in sorted(r["demand_misses_by_structure"].items()):
        for i, role in enumerate(r["roles"]):
            f[f"{role}_misses:{t}"] = counts[i]
    for which, short in (("software", "swpf"), ("hardware", "hwpf")):
        for k, v in sorted(r["prefetch"][which].items()):
            f[f"{short}_{k}"] = v
    for k, v in r["stall_cycles"].items():
        f[f"stall:{k}"] = v
    return f


def rows_csv(rows: list[dict[str, Any]]) -> str:
    """The rows as CSV, one line per CPU and variant (columns of :func:`flat_row`; a figure
    a row lacks is empty)."""
    flat = [flat_row(r) for r in rows]
    cols = list(dict.fromkeys(k for f in flat for k in f))
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=cols, lineterminator="\n")
    w.writeheader()
    w.writerows(flat)
    return buf.getvalue()


def plot(rows: list[dict[str, Any]], path: str | Path, structures: int = 5) -> Path:
    """Draw the rows to ``path`` (PNG, or any format matplotlib knows by the suffix): the
    speedup per CPU and variant, then per CPU the L1 demand misses of the structures that
    miss most. The file is written whole or not at all."""
    import os

    # a Figure of its own, not pyplot: the process's backend (a notebook's) stays as it is
    from matplotlib.figure import Figure

    path = Path(path)
    cpus = list(dict.fromkeys(r["cpu"] for r in rows))
    variants = list(dict.fromkeys(r["variant"] for r in rows))
    get = {(r["cpu"], r["variant"]): r for r in rows}
    width = 0.8 / len(variants)
    fig = Figure(figsize=(4.2 * (1 + len(cpus)), 4))
    axes = fig.subplots(1, 1 + len(cpus), squeeze=False)
    ax = axes[0][0]
    for j, v in enumerate(variants):
        xs = [i + (j - (len(variants) - 1) / 2) * width for i in range(len(cpus))]
        ax.bar(xs, [get[(c, v)]["speedup"] or 0.0 for c in cpus], width, label=v)
    shown = {r["cpu"]: r.get("cpu_label", r["cpu"]) for r in rows}
    ax.set_xticks(range(len(cpus)), [shown[c] for c in cpus], rotation=15)
    ax.set_ylabel(f"predicted speedup over {variants[0]}")
    ax.axhline(1.0, color="grey", linewidth=0.8)
    ax.legend()
    for k, cpu in enumerate(cpus):
        ax = axes[0][k + 1]
        rs = [get[(cpu, v)] for v in variants]
        names = _structures(rs, 0, structures)
        for j, r in enumerate(rs):
            xs = [i + (j - (len(variants) - 1) / 2) * width for i in range(len(names))]
            by = r["demand_misses_by_structure"]
            ax.bar(xs, [by.get(t, [0])[0] for t in names], width, label=r["variant"])
        ax.set_xticks(range(len(names)), names, rotation=30, ha="right")
        ax.set_ylabel(f"L1 ({rs[0]['levels'][0]}) demand misses")
        ax.set_title(shown[cpu])
    fig.tight_layout()
    tmp = path.with_name(f".tmp-{os.getpid()}-{path.name}")
    try:
        fig.savefig(tmp, dpi=110, format=path.suffix.lstrip(".") or "png",
                    metadata={"Software": None} if path.suffix in ("", ".png") else None)
        tmp.replace(path)
    finally:
        tmp.unlink(missing_ok=True)
    return path
