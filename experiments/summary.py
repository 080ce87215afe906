"""Readable summaries of a ``sim.simulate`` result: demand misses apart from prefetch and
victim traffic, IPC and MLP, the top stall causes and the structures that miss most.

A level's ``accesses`` and ``misses`` count every kind of access that reached it (sim/MODEL.md
section 5): demand ``load`` and ``store`` accesses, software prefetches (``swpf``), hardware
prefetches (``hwpf``), dirty lines written back from the level above (``writeback``) and
clean lines offered to an exclusive level (``victim``). A program waits on demand misses;
the others are the price of prefetching and of an exclusive hierarchy. The functions here
keep them apart, so that a prefetching variant is not read as one that misses more.

:func:`simulate_text` is ``kvsim simulate``'s default output; :mod:`kvsim.experiments.compare`
builds its tables from the same functions.
"""

from __future__ import annotations

from typing import Any

__all__ = ["DEMAND_KINDS", "KINDS_HELP", "demand_misses_by_tag", "level_rows", "prefetch_totals",
           "roles", "simulate_text", "top_stalls", "top_structures"]

#: The access kinds a program waits on.
DEMAND_KINDS = ("load", "store")

#: One line per access kind, for --help texts.
KINDS_HELP = {
    "load": "demand load (a load record, or the miss of one from the level above)",
    "store": "demand store",
    "swpf": "software prefetch (a prefetch record: the program's prefetch instruction)",
    "hwpf": "hardware prefetch (issued by the level's [[prefetcher]])",
    "writeback": "dirty line written back from the level above",
    "victim": "clean line offered to an exclusive (victim) level by the level above",
}


def roles(result: dict) -> list[str]:
    """Each level's stable role (``L1``, ``L2``, ``LLC``), from the core outward."""
    from kvsim.sim.api import level_roles

    return [lv.get("role") or r for lv, r in
            zip(result["levels"], level_roles(len(result["levels"])), strict=True)]


def level_rows(result: dict) -> list[dict[str, Any]]:
    """One dict per level: ``name``, ``role``, ``demand_accesses``, ``demand_misses``,
    ``demand_miss_rate``, ``swpf_misses``, ``hwpf_misses``, ``writeback_in`` and
    ``victim_in`` (accesses of those kinds), ``misses`` (all kinds) and ``writebacks``
    (dirty lines sent below)."""
    out = []
    for lv, role in zip(result["levels"], roles(result), strict=True):
        bk = lv["by_kind"]
        da = sum(bk[k]["accesses"] for k in DEMAND_KINDS)
        dm = sum(bk[k]["misses"] for k in DEMAND_KINDS)
        out.append({
            "name": lv["name"], "role": role, "demand_accesses": da, "demand_misses": dm,
            "demand_miss_rate": dm / da if da else 0.0,
            "swpf_misses": bk.get("swpf", {}).get("misses", 0),
            "hwpf_misses": bk.get("hwpf", {}).get("misses", 0),
            "writeback_in": bk.get("writeback", {}).get("accesses", 0),
            "victim_in": bk.get("victim", {}).get("accesses", 0),
            "misses": lv["misses"], "writebacks": lv["writebacks"],
        })
    return out


def demand_misses_by_tag(result: dict) -> dict[str, list[int]]:
    """Demand misses per structure (tag name): one count per level, from L1 outward."""
    names = [lv["name"] for lv in result["levels"]]
    index = {n: i for i, n in enumerate(names)}
    out: dict[str, list[int]] = {}
    for row in result["by_tag"]:
        if row["kind"] not in DEMAND_KINDS:
            continue
        counts = out.setdefault(row["tag_name"], [0] * len(names))
        counts[index[row["level"]]] += row["misses"]
    return out


def top_structures(result: dict, n: int = 5) -> list[tuple[str, list[int]]]:
    """The ``n`` structures with the most demand misses: ranked by the last level's (the
    ones that go to DRAM), then by L1's. Structures without a demand miss are left out."""
    rows = [(t, c) for t, c in demand_misses_by_tag(result).items() if any(c)]
    rows.sort(key=lambda tc: (-tc[1][-1], -tc[1][0], tc[0]))
    return rows[:n]


def top_stalls(result: dict, n: int = 3) -> list[tuple[str, float]]:
    """The ``n`` largest stall causes as ``(name, cycles)``; empty without timing. The causes
    overlap (sim/MODEL.md section 6): ``rob_full:<level>`` is dispatch time lost, the waits
    are summed over accesses; they do not add up to the cycles."""
    t = result.get("timing")
    if not t:
        return []
    items = [(k, float(v)) for k, v in t["stall_cycles"].items() if v]
    items.sort(key=lambda kv: (-kv[1], kv[0]))
    return items[:n]


def prefetch_totals(result: dict) -> dict[str, dict[str, int]]:
    """Software and hardware prefetch classes summed over the levels:
    ``{"software": {"issued", "useful", "late", "useless", ...}, "hardware": {...}}``."""
    out: dict[str, dict[str, int]] = {}
    for which in ("software", "hardware"):
        total: dict[str, int] = {}
        for d in result["prefetch"].get(which, {}).values():
            for k, v in d.items():
                total[k] = total.get(k, 0) + int(v)
        out[which] = total
    return out


def _int(v: int) -> str:
    return f"{v:,}"


def simulate_text(result: dict, structures: int = 5, stalls: int = 3) -> str:
    """``kvsim simulate``'s default text for one result."""
    lines = []
    cyc = result.get("cycles")
    name = result.get("cpu_label", result["cpu"])  # `local (uncalibrated)` where so
    head = (f"{name} ({result['mode']}): {_int(result['records'])} records, "
            f"{_int(result['instructions'])} instructions")
    if cyc is not None:
        head += f", {_int(cyc)} cycles"
    lines.append(head)
    t = result.get("timing")
    if t:
        lines.append(f"IPC {t['ipc']:.2f}   MLP {t['mlp']:.2f} (L1 misses in flight, average)"
                     f"   load latency {t['avg_load_latency_cycles']:.1f} cycles (average)")
    lvs = level_rows(result)
    w = max(5, *(len(r["name"]) for r in lvs))
    lines.append("")
    lines.append(f"{'level':<{w}} {'role':<4}{'demand':>12}{'demand':>12}{'demand':>8}"
                 f"{'swpf':>10}{'hwpf':>10}{'writeback':>11}{'victim':>10}{'all':>10}"
                 f"{'writebacks':>12}")
    lines.append(f"{'':<{w}} {'':<4}{'accesses':>12}{'misses':>12}{'miss%':>8}"
                 f"{'misses':>10}{'misses':>10}{'in':>11}{'in':>10}{'misses':>10}{'out':>12}")
    for r in lvs:
        lines.append(
            f"{r['name']:<{w}} {r['role']:<4}{r['demand_accesses']:>12}{r['demand_misses']:>12}"
            f"{100 * r['demand_miss_rate']:>7.2f}%{r['swpf_misses']:>10}{r['hwpf_misses']:>10}"
            f"{r['writeback_in']:>11}{r['victim_in']:>10}{r['misses']:>10}"
            f"{r['writebacks']:>12}")
    top = top_structures(result, structures)
    if top:
        tw = max(9, *(len(name) for name, _ in top))
        lines.append("")
        lines.append(f"demand misses by structure (top {len(top)}, by {lvs[-1]['role']}):")
        lines.append(f"  {'structure':<{tw}}" + "".join(f"{r['name']:>12}" for r in lvs))
        for name, counts in top:
            lines.append(f"  {name:<{tw}}" + "".join(f"{c:>12}" for c in counts))
    st = top_stalls(result, stalls)
    if st and cyc:
        lines.append("")
        lines.append("top stall causes, in cycles (they overlap: rob_full:LEVEL is dispatch time")
        lines.append("lost, also as a share of all cycles; waits are summed over accesses):")
        for name, v in st:
            share = f"{100 * v / cyc:>7.1f}%" if name.startswith("rob_full:") else ""
            lines.append(f"  {name:<22}{v:>14,.0f}{share}")
    return "\n".join(lines)
