"""docs/scale.md's tables, rendered from ``results/scale.json`` (``python -m
kvsim.experiments.scale``; registered in kvsim.experiments.render).

The file holds one row per run of a (workload, size) pair, each with the CPUs it was
simulated on; a later row of the same workload, size and CPU replaces an earlier one's
prediction (the newest run wins), and the native figures are those of the newest row that
timed the pair natively.
"""

from __future__ import annotations

import statistics
from typing import Any

__all__ = ["chase_table", "cycles_table", "latest", "memory_table", "walks_table"]

_WORKLOADS = ("keys", "save", "load")


def _size(n: int) -> str:
    return f"{n // 10**6}M" if n % 10**6 == 0 else f"{n:,}"


def latest(doc: dict[str, Any]) -> tuple[dict, dict]:
    """``{(workload, keys, cpu): (prediction, row)}`` and ``{(workload, keys): row}`` of the
    newest row with a native timing."""
    pred: dict = {}
    native: dict = {}
    for r in doc.get("rows", []):  # oldest first
        for cpu, p in r.get("predicted", {}).items():
            pred[(r["workload"], int(r["keys"]), cpu)] = (p, r)
        if r.get("native"):
            native[(r["workload"], int(r["keys"]))] = r
    return pred, native


def _order(pred: dict) -> list[tuple[str, int, str]]:
    return sorted(pred, key=lambda k: (_WORKLOADS.index(k[0]) if k[0] in _WORKLOADS else 9,
                                       k[1], "+" in k[2], k[2]))


def _native_cells(r: dict) -> str:
    from kvsim import stats

    n = r["native"]
    ratios = [a / b for a, b in zip(n["runs_a_s"], n["runs_b_s"], strict=True)]
    ci = stats.bootstrap_ci95(ratios)
    interval = f" [{ci[0]:.2f}, {ci[1]:.2f}]" if ci else ""
    return (f"{n['ns_per_key_a']:.0f} / {n['ns_per_key_b']:.0f} ns | "
            f"{statistics.median(ratios):.2f}{interval} (min of a / b: "
            f"{min(n['runs_a_s']) / min(n['runs_b_s']):.2f})")


def _run(row: dict) -> str:
    """The run a figure comes from: its commit and time (UTC)."""
    p = row.get("provenance") or {}
    return f"{(p.get('commit') or '?')[:7]} {(p.get('date_utc') or '')[11:16]}".strip()


def cycles_table(doc: dict[str, Any]) -> str:
    """Cycles per key of both sides and the speedup per workload, size and CPU, with the
    side a (no prefetch) misses per key that explain them; native rows in ns per key."""
    pred, native = latest(doc)
    out = ["| workload | keys | CPU | cycles per key a / b | speedup | DTLB / STLB misses "
           "per key | LLC demand misses per key | TLB cycles per key | run |",
           "|" + "---|" * 9]
    done = set()
    for w, k, cpu in _order(pred):
        p, row = pred[(w, k, cpu)]
        a, b = p["a"], p["b"]
        out.append(f"| {w} | {_size(k)} | {cpu} | {a['cycles_per_key']:.0f} / "
                   f"{b['cycles_per_key']:.0f} | {p['speedup']:.2f} | "
                   f"{a['dtlb_misses_per_key']:.2f} / {a['stlb_misses_per_key']:.2f} | "
                   f"{a['llc_demand_misses_per_key']:.2f} | "
                   f"{a['tlb_stall_cycles_per_key']:.0f} | {_run(row)} |")
        nxt = _order(pred)
        last = [x for x in nxt if x[:2] == (w, k)][-1]
        if (w, k, cpu) == last and (w, k) in native and (w, k) not in done:
            done.add((w, k))
            out.append(f"| {w} | {_size(k)} | native (ns per key) | "
                       f"{_native_cells(native[(w, k)])} | | | | {_run(native[(w, k)])} |")
    return "\n".join(out)


def walks_table(doc: dict[str, Any]) -> str:
    """Per workload, size and CPU whose walks read the page table through the caches
    (``+walk_reads=R``): walks per key and, per cache level, the page-table reads per key
    that miss it and the demand misses per key (side a), beside the cycles per key of the
    same preset with the fixed walk and with the reads."""
    pred, _ = latest(doc)
    keys = [x for x in _order(pred) if "+walk_reads=" in x[2]
            and pred[x][0]["a"].get("page_table_reads")]
    if not keys:
        return "(no row of results/scale.json has a CPU with page-table reads)"
    out = ["| workload | keys | CPU | walks per key | page-table reads missing, per key "
           "(each level) | demand misses per key (each level) | TLB cycles per key: fixed "
           "walk / with reads | cycles per key a: fixed walk / with reads | speedup: fixed "
           "walk / with reads |", "|" + "---|" * 9]
    for w, k, cpu in keys:
        p, _ = pred[(w, k, cpu)]
        a = p["a"]
        base = pred.get((w, k, cpu.split("+", 1)[0]))
        misses = ", ".join(f"{lv} {x['misses_per_key']:.3f}"
                           for lv, x in a["page_table_reads"].items())
        demand = ", ".join(f"{lv} {x['demand_misses_per_key']:.2f}"
                           for lv, x in a["levels"].items())
        fixed_tlb = f"{base[0]['a']['tlb_stall_cycles_per_key']:.0f}" if base else "-"
        fixed_cpk = f"{base[0]['a']['cycles_per_key']:.0f}" if base else "-"
        fixed_sp = f"{base[0]['speedup']:.2f}" if base else "-"
        out.append(f"| {w} | {_size(k)} | {cpu} | {a['walks_per_key']:.2f} | {misses} | {demand} | "
                   f"{fixed_tlb} / {a['tlb_stall_cycles_per_key']:.0f} | {fixed_cpk} / "
                   f"{a['cycles_per_key']:.0f} | {fixed_sp} / {p['speedup']:.2f} |")
    return "\n".join(out)


def chase_table(doc: dict[str, Any]) -> str:
    """The calibration's native pointer chase (4 KiB pages) against its prediction on each
    CPU of the file's ``chase``: ns per load, ratio to the native median."""
    ch = doc.get("chase")
    if not ch:
        return "(results/scale.json has no chase yet: `python -m kvsim.experiments.scale " \
               "--chase SIZES`)"
    cpus = list(ch["rows"])
    head = ["working set", "native ns per load: median [95 % interval] (min)",
            *[f"predicted on {c} (ratio)" for c in cpus]]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    by_size: dict[int, dict[str, dict]] = {}
    for c in cpus:
        for x in ch["rows"][c]:
            by_size.setdefault(x["working_set"], {})[c] = x
    for ws in sorted(by_size):
        row = by_size[ws]
        nat = next(iter(row.values()))["native_ns"]
        ci = nat.get("bootstrap_ci95")
        interval = f" [{ci[0]:.0f}, {ci[1]:.0f}]" if ci else ""
        cells = [f"{row[c]['predicted_ns']:.0f} ({row[c]['ratio']:.2f})" if c in row else "-"
                 for c in cpus]
        out.append(f"| {ws / 2**30:g} GiB | {nat['median']:.0f}{interval} ({nat['min']:.0f}) "
                   f"| " + " | ".join(cells) + " |")
    return "\n".join(out)


def memory_table(doc: dict[str, Any]) -> str:
    """Per run: records of side a's trace, its size on disk, the peak memory of the process
    that recompresses and simulates and of c_ref's children (the keyspace), and wall time."""
    out = ["| workload | keys | CPUs in the pass | records (a) | trace (a), MB | peak MB: "
           "recompress + simulate | peak MB: c_ref | trace / simulate s (a) |",
           "|" + "---|" * 8]
    for r in doc.get("rows", []):
        t = r["trace_a"]
        m = r["peak_rss_mb"]
        out.append(f"| {r['workload']} | {_size(int(r['keys']))} | {len(r['predicted'])} | "
                   f"{t['records']:,} | {t['bytes'] / 1e6:.0f} | "
                   f"{m['simulate_and_recompress']:.0f} | {m['c_ref_children']:.0f} | "
                   f"{t['trace_s']:.0f} / {t['simulate_s']:.0f} |")
    return "\n".join(out)


def render(doc: dict[str, Any], result: str, which: str) -> str:
    """One of the tables, with the line naming the file, command, commit and machine."""
    from kvsim.experiments.render import provenance_line

    body = {"cycles": cycles_table, "walks": walks_table, "chase": chase_table,
            "memory": memory_table}[which](doc)
    rows = doc.get("rows", [])
    dates = sorted(r["provenance"]["date_utc"][:10] for r in rows if r.get("provenance"))
    span = (f" Rows written from {dates[0]} to {dates[-1]} at "
            f"{len({r['provenance']['commit'] for r in rows})} commits; each row carries its "
            "own provenance.") if dates and which != "chase" else ""
    if which == "chase" and doc.get("chase"):
        doc = dict(doc, provenance=doc["chase"]["provenance"])
    return body + "\n\n" + provenance_line(doc, result, "python -m kvsim.experiments.scale") \
        + span
