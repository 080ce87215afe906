"""The ``server`` study's GET depth 10 seed row (Valkey #2092: 3M keys of 256 B, batch 0
against 16) held out on this machine: the seed row's traces (c_ref's server traced at the
seed's keys, the load carried compact: ``server_study.traced_side``, the study's ``--scale
seed`` cell) predicted on this machine's calibrated CPU file and on the seed's preset, beside
the native servers at the same keys (``kvsim native server``'s cell ``get-p10``).

Then which of a CPU file's parameters carry the predicted prefetch saving: the preset with
one part of the calibrated file put in its place, and the calibrated file with the preset's
(each taken from the two files, never a number of this module's): the DRAM latency; the
page walk (``[tlb]`` walk_latency, walk_extra_4k, walk_reads, host_page_size: a fixed walk
against page-table reads through the caches, the host's too under nested paging); the cache
levels; all three.

``--huge-native FILE``: a native run of the same cell with glibc's blocks on 2 MiB pages
(``GLIBC_TUNABLES=glibc.malloc.hugetlb=1``; its ``anon_huge_kib`` says whether they were),
against the same traces simulated with 2 MiB pages on each CPU file: whether the walks the
model charges are the ones the native servers pay. ``--native-4k FILE``: the same cell on 4
KiB pages measured just before it, so the two are compared at the guest's speed of one
sitting. ``--allocator arena``: the traces again with c_ref's jemalloc-like arena (``kvsim
serve --allocator arena``) in place of glibc's blocks (where a bucket array lies a page plus
16 bytes into its mmap'd chunk, so every 64-byte bucket straddles two lines), as a Valkey
built with its default allocator lays the keyspace out.

    python -m kvsim.experiments.server_heldout [--cpu CPU ...] [--native FILE]
        [--native-4k FILE] [--huge-native FILE] [--allocator libc|arena ...] [--out FILE]

Writes results/server-getp10-heldout.json. Each trace is made once and kept
(``server_study.trace_cache``): tracing a side at 3M keys takes a minute or two on two
vCPUs (the load is not recorded); each simulation some seconds.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

RESULT_NAME = "server-getp10-heldout.json"
CELL = "get-p10"
#: the calibrated file of the server study (its table's this-machine CPU)
DEFAULT_CPUS = ("results/calibrate-xeon-m167-srvloop.toml", "epyc-7713")
HUGE = 2 << 20
#: the page walk's parameters ([tlb]), swapped together
WALK_FIELDS = ("walk_latency", "walk_extra_4k", "walk_reads", "host_page_size")


def _seed_row() -> dict[str, Any]:
    from kvsim.experiments import server_study as S

    return next(r for r in S._seed_rows() if r["cell"] == CELL)


def traces(allocator: str) -> dict[str, Path]:
    """The seed row's two traces (batch 0 and 16) at the seed's keys, the load carried
    compact by the traced server (the study's ``--scale seed``), with ``allocator``."""
    from kvsim.experiments import server_study as S

    row = _seed_row()
    keys = S._seed_keys(row, "seed")
    spec = S.bench_spec(CELL, keys, S.seed_row_requests(row)[1], row["value_size"])
    args = list(row["args"]) + ([] if allocator == "libc" else ["--allocator", allocator])
    return {side: S.traced_side(spec, b, args, setup=True) for side, b in S.SIDES.items()}


def simulate_pair(tr: dict[str, Path], cpu: Any, requests: int,
                  page_size: int | None = None) -> dict[str, Any]:
    """Per request at each side: ns, system calls' ns, instructions, L1 misses; the saving
    and the speedup."""
    from kvsim import sim

    out: dict[str, Any] = {}
    for side, path in tr.items():
        r = sim.simulate(path, cpu, page_size=page_size)
        f = r["timing"]["freq_ghz"]
        sc = (r.get("syscalls") or {}).get("cycles") or 0
        out[side] = {"ns": r["cycles"] / f / requests, "syscall_ns": sc / f / requests,
                     "instructions": r["instructions"] / requests,
                     "dram_reads": (r.get("dram") or {}).get("reads", 0) / requests,
                     "stlb_misses": ((r.get("tlb") or {}).get("stlb_misses") or 0) / requests}
    out["saved_ns"] = out["a"]["ns"] - out["b"]["ns"]
    out["speedup"] = out["a"]["ns"] / out["b"]["ns"]
    return out


def swaps(calibrated: Any, preset: Any) -> list[tuple[str, Any]]:
    """The preset with parts of the calibrated file, and the calibrated file with the
    preset's: (label, CPU). The parts: the DRAM latency; the walk (:data:`WALK_FIELDS`); the
    cache levels (sizes, ways, latencies, miss buffers, inclusion, replacement)."""
    def walk(dst: Any, src: Any) -> Any:
        return replace(dst, tlb=replace(dst.tlb, **{k: getattr(src.tlb, k)
                                                    for k in WALK_FIELDS}))

    def dram(dst: Any, src: Any) -> Any:
        return replace(dst, dram_latency_ns=src.dram_latency_ns)

    def caches(dst: Any, src: Any) -> Any:
        return replace(dst, caches=src.caches)

    def every(dst: Any, src: Any) -> Any:
        return caches(walk(dram(dst, src), src), src)

    p, c = preset.name, "calibrated"
    return [(p, preset),
            (f"{p} with the calibrated DRAM latency", dram(preset, calibrated)),
            (f"{p} with the calibrated walk", walk(preset, calibrated)),
            (f"{p} with the calibrated caches", caches(preset, calibrated)),
            (f"{p} with the calibrated DRAM latency and walk",
             walk(dram(preset, calibrated), calibrated)),
            (f"{p} with the calibrated DRAM latency, walk and caches",
             every(preset, calibrated)),
            (c, calibrated),
            (f"{c} with {p}'s DRAM latency", dram(calibrated, preset)),
            (f"{c} with {p}'s walk", walk(calibrated, preset)),
            (f"{c} with {p}'s caches", caches(calibrated, preset)),
            (f"{c} with {p}'s DRAM latency, walk and caches", every(calibrated, preset))]


def native_cell(path: str | None) -> dict[str, Any] | None:
    """The ``get-p10`` cell of a ``kvsim native server`` result at the seed's keys: both
    servers' CPU time per request at each side, the saving, the speedups with their 95 %
    intervals, the huge pages each server held."""
    if not path:
        return None
    doc = json.loads(Path(path).read_text())
    for c in doc.get("cells", []):
        m = c.get("metrics", {})
        if c.get("cell") != CELL or m.get("keys") != _seed_row()["seed_keys"]:
            continue
        out: dict[str, Any] = {"file": str(path), "commit": doc["provenance"].get("commit"),
                               "date_utc": doc["provenance"].get("date_utc"),
                               "command": doc["provenance"].get("command"),
                               "rounds": m.get("rounds")}
        for who in ("cref", "valkey"):
            a, b = m[f"{who}_cpu_a_rps_median"], m[f"{who}_cpu_b_rps_median"]
            huge = [r.get("anon_huge_kib", 0) for r in m.get(f"{who}_proc_runs", [])]
            out[who] = {"ns_a": 1e9 / a, "ns_b": 1e9 / b, "saved_ns": 1e9 / a - 1e9 / b,
                        "speedup": m[f"{who}_cpu_speedup"],
                        "speedup_ci95": [m[f"{who}_cpu_speedup_ci95_low"],
                                         m[f"{who}_cpu_speedup_ci95_high"]],
                        "anon_huge_kib_max": max(huge) if huge else None}
        return out
    raise ValueError(f"{path}: no {CELL} cell at {_seed_row()['seed_keys']:,} keys")


def ratios(pred: dict[str, Any], nat: dict[str, Any] | None) -> dict[str, Any]:
    """Predicted over native, per server: time per request at each side, saving, speedup."""
    if not nat:
        return {}
    return {who: {"ns_a": pred["a"]["ns"] / nat[who]["ns_a"],
                  "ns_b": pred["b"]["ns"] / nat[who]["ns_b"],
                  "saved": pred["saved_ns"] / nat[who]["saved_ns"],
                  "speedup": pred["speedup"] / nat[who]["speedup"]}
            for who in ("cref", "valkey")}


def run(cpus: list[str], native: str | None, native_4k: str | None, huge_native: str | None,
        allocators: list[str], log=print) -> dict[str, Any]:
    from kvsim import sim
    from kvsim.experiments import server_study as S

    row = _seed_row()
    requests = S.seed_row_requests(row)[1]
    nat = {"native": native_cell(native), "native_4k": native_cell(native_4k),
           "huge_native": native_cell(huge_native)}
    models = {c: sim.load_cpu(c) for c in cpus}
    cal = next((c for c in cpus if c.endswith(".toml")), None)
    preset = row["cpu"] if row["cpu"] in models else None
    doc: dict[str, Any] = {"row": row["row"], "cell": CELL, "keys": row["seed_keys"],
                           "requests": requests, "seed_rps": [row["seed_rps_a"],
                                                              row["seed_rps_b"]],
                           "native": nat, "predictions": [], "swaps": [], "huge": []}
    for alloc in allocators:
        tr = traces(alloc)
        doc.setdefault("traces", {})[alloc] = {k: v.name for k, v in tr.items()}  # cache keys
        for c, m in models.items():
            p = simulate_pair(tr, m, requests)
            line = {"allocator": alloc, "cpu": c, **p, "rob": m.rob,
                    "vs_native": ratios(p, nat["native"])}
            doc["predictions"].append(line)
            log(f"{alloc:5s} {c}: a {p['a']['ns']:,.0f} ns, b {p['b']['ns']:,.0f} ns, saved "
                f"{p['saved_ns']:,.0f} ns, speedup {p['speedup']:.3f}")
        if alloc != "libc":
            continue
        if cal and preset:
            for label, m in swaps(models[cal], models[preset]):
                p = simulate_pair(tr, m, requests)
                doc["swaps"].append({"cpu": label, **p})
                log(f"  {label}: saved {p['saved_ns']:,.0f} ns, speedup {p['speedup']:.3f}")
        if nat["huge_native"]:
            for c, m in models.items():
                p4 = next(x for x in doc["predictions"] if x["cpu"] == c
                          and x["allocator"] == alloc)
                ph = simulate_pair(tr, m, requests, page_size=HUGE)
                doc["huge"].append({"cpu": c, "page_4k": {k: p4[k] for k in (
                    "a", "b", "saved_ns", "speedup")}, "page_2m": ph})
                log(f"  2 MiB pages {c}: saved {ph['saved_ns']:,.0f} ns (4 KiB: "
                    f"{p4['saved_ns']:,.0f}), speedup {ph['speedup']:.3f}")
    return doc


def _f(x: float | None, fmt: str = ",.0f") -> str:
    return "" if x is None else format(x, fmt)


def markdown(doc: dict[str, Any]) -> str:
    """The predictions beside the native servers, the parameter swaps, the 2 MiB pages."""
    out = ["| allocator | cpu | ns/request a | b | saved | speedup | system calls a | "
           "instructions a | DRAM reads a | STLB misses a | / c_ref's server: a, b, speedup "
           "| / Valkey: a, b, speedup |", "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for p in doc["predictions"]:
        r = p.get("vs_native") or {}
        rr = ["{ns_a:.2f}, {ns_b:.2f}, {speedup:.2f}".format(**r[w]) if w in r else ""
              for w in ("cref", "valkey")]
        out.append(f"| {p['allocator']} | {p['cpu']} | {_f(p['a']['ns'])} | {_f(p['b']['ns'])} "
                   f"| {_f(p['saved_ns'])} | {p['speedup']:.2f} | {_f(p['a']['syscall_ns'])} "
                   f"| {_f(p['a']['instructions'])} | {p['a']['dram_reads']:.1f} | "
                   f"{p['a']['stlb_misses']:.1f} | {rr[0]} | {rr[1]} |")
    sa, sb = (1e9 / x for x in doc["seed_rps"])
    lines = [("seed (Valkey #2092, EPYC 7713)", sa, sb, sa / sb, None, None)]
    for key, label in (("native", "native"), ("native_4k", "native, 4 KiB pages"),
                       ("huge_native", "native, glibc's blocks on 2 MiB pages")):
        n = doc["native"].get(key)
        if n:
            for w, name in (("cref", "c_ref's server"), ("valkey", "Valkey 9.1.2")):
                lines.append((f"{name}, {label}", n[w]["ns_a"], n[w]["ns_b"], n[w]["speedup"],
                              n[w]["speedup_ci95"], n[w]["anon_huge_kib_max"]))
    out += ["", "| measured | CPU ns/request a | b | saved | speedup [95 %] | 2 MiB pages held "
            "(KiB) |", "|---|---|---|---|---|---|"]
    for name, a, b, s, ci, huge in lines:
        ci_s = f" [{ci[0]:.2f}, {ci[1]:.2f}]" if ci else ""
        out.append(f"| {name} | {_f(a)} | {_f(b)} | {_f(a - b)} | {s:.2f}{ci_s} | "
                   f"{_f(huge)} |")
    if doc["swaps"]:
        out += ["", "| CPU file (libc traces) | ns/request a | b | saved | speedup |",
                "|---|---|---|---|---|"]
        out += [f"| {s['cpu']} | {_f(s['a']['ns'])} | {_f(s['b']['ns'])} | "
                f"{_f(s['saved_ns'])} | {s['speedup']:.2f} |" for s in doc["swaps"]]
    if doc["huge"]:
        out += ["", "| CPU file | pages | ns/request a | b | saved | speedup |",
                "|---|---|---|---|---|---|"]
        for h in doc["huge"]:
            for pg, k in (("4 KiB", "page_4k"), ("2 MiB", "page_2m")):
                p = h[k]
                out.append(f"| {h['cpu']} | {pg} | {_f(p['a']['ns'])} | {_f(p['b']['ns'])} | "
                           f"{_f(p['saved_ns'])} | {p['speedup']:.2f} |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    from kvsim import provenance
    from kvsim.experiments.valkey_server import ToolMissing, ValkeyError

    ap = argparse.ArgumentParser(prog="python -m kvsim.experiments.server_heldout",
                                 description="the server study's GET depth 10 seed row "
                                             "predicted on this machine against the native "
                                             "servers at the seed's keys")
    ap.add_argument("--cpu", action="append", default=None,
                    help="CPU (repeatable; default: " + ", ".join(DEFAULT_CPUS) + ")")
    ap.add_argument("--native", default="results/native-server.json",
                    help="kvsim native server result with the get-p10 cell at the seed's keys")
    ap.add_argument("--native-4k", default=None, metavar="FILE",
                    help="the same cell on 4 KiB pages, measured beside --huge-native")
    ap.add_argument("--huge-native", default=None, metavar="FILE",
                    help="the same cell with glibc's blocks on 2 MiB pages")
    ap.add_argument("--allocator", action="append", choices=("libc", "arena"), default=None,
                    help="the traced server's allocator (repeatable; default libc)")
    provenance.add_out_option(ap, RESULT_NAME)
    a = ap.parse_args(argv)
    out = provenance.out_path(a.out, RESULT_NAME)
    if provenance.out_dir_missing(out):
        return 2
    for f in (a.native, a.native_4k, a.huge_native):
        if f and not Path(f).is_file():
            print(f"server_heldout: {f}: no such file", file=sys.stderr)
            return 2
    try:
        doc = run(a.cpu or list(DEFAULT_CPUS), a.native, a.native_4k, a.huge_native,
                  a.allocator or ["libc"])
    except (OSError, ToolMissing, ValkeyError, ValueError, KeyError) as e:
        print(f"server_heldout: {e}", file=sys.stderr)
        return 1
    provenance.write_result(out, {**doc, "note": (
        "per request: ns predicted (the server's time, system calls included) against the "
        "native servers' CPU time (1 / cpu_rps); saved = a - b; swaps: one part of a CPU "
        "file replaced by the other file's (DRAM latency; the walk's walk_latency, "
        "walk_extra_4k, walk_reads, host_page_size; the cache levels)")})
    print(markdown(doc))
    print(f"# wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
