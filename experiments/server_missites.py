"""Last-level misses per request of c_ref's server: natively by function (callgrind), traced
by code site, on the same caches.

The native side is a ``native-server-cachesim.json`` (:mod:`.server_cachesim`: c_ref's
server under callgrind's cache simulation, I1 32 KiB, D1 48 KiB 12-way, LL 8 MiB 16-way,
no prefetchers), its cells' last-level data misses per request, by function. The traced
side: c_ref's server traced (``kvsim-cref serve --trace``, :func:`.server_study.traced_side`)
under the same client run (the cell, keys, values and batch of that file's cell), the same
warm-up requests before the measured ones, and its measured requests simulated on the same
two data levels (functional counts, LRU, no TLB, no prefetchers; every level below the
first non-inclusive, write-back and write-allocate: sim/MODEL.md §2), the misses counted by
site (the trace's site numbers taken as its tags). Two ways:

- ``model``: stores as the model takes them: a store piece that covers a whole line
  allocates it without fetching it (DineroIV's rule, sim/MODEL.md §2);
- ``fetched``: every store piece fetches its line, as callgrind counts a write miss (a
  read miss) and as a core's read-for-ownership of an ordinary store does (the whole-line
  pieces made 63 bytes long).

Each ``--build LABEL=BINARY`` traces with that ``kvsim-cref`` build (default: the
project's, label ``this``), so a change to what is traced shows before and after on the
same runs. With ``--cpu CPUFILE`` each trace is also simulated on that CPU file and its
predicted user time per request (the time less the system calls' part) given.

``python -m kvsim.experiments.server_missites --native results/native-server-branchsim.json
--cell mset-10 --cell mget-20 --cell get-p10 --build before=BINARY --cpu
results/calibrate-xeon-m167-srvloop.toml`` writes ``results/server-missites.json``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

RESULT_NAME = "server-missites.json"
#: The two ways of counting a store (module docstring).
WAYS = ("model", "fetched")
#: Native functions grouped as the traced sites are: the allocator (glibc's malloc, free,
#: malloc_usable_size and their helpers).
ALLOCATOR_FUNCTIONS = ("malloc", "free", "_int_malloc", "_int_free", "malloc_usable_size",
                       "unlink_chunk.constprop.0", "malloc_consolidate", "tcache_get",
                       "tcache_put", "calloc", "realloc", "_int_realloc")


def cachegrind_cpu(caches: dict[str, Any]):
    """The two data levels of a cachesim result file (``caches``: D1 and LL) as a CPU."""
    from kvsim import sim

    return sim.config.parse_cpu({"name": "callgrind", "cache": [
        {"name": k, "size": caches[k]["size"], "ways": caches[k]["assoc"],
         "line": caches[k]["line"]} for k in ("D1", "LL")]})


def rewrite(src: Path, dst: Path, fetched: bool, site_as_tag: bool) -> None:
    """``src`` to ``dst`` with the whole-line store pieces made partial (``fetched``: 63 of
    their 64 bytes, so the model fetches their line) and/or each record's tag set to its
    site (``site_as_tag``: the header's ``tags`` become its ``sites``)."""
    from kvsim import traces

    with traces.open(src) as r:
        header = dict(r.header)
        sites = list(header.get("sites") or [])
        if site_as_tag:
            if len(sites) > 256:
                raise ValueError(f"{src}: {len(sites)} sites, more than the 256 tags")
            header["tags"] = sites
        with traces.Writer(dst, header, codec="zstd") as w:
            for c in r:
                c = c.copy()
                if fetched:
                    whole = ((c["kind"] == traces.KIND_STORE) & (c["size"] == 64)
                             & (c["addr"] % np.uint64(64) == 0))
                    c["size"][whole] = 63
                if site_as_tag:
                    c["tag"] = c["site"].astype(np.uint8)
                w.write(c)


def site_misses(trace: Path, cpu: Any, requests: int, tmp: Path) -> dict[str, Any]:
    """Per way of :data:`WAYS`: the last level's demand misses per request of ``trace``'s
    measured part on ``cpu``, in all and by site (sites under 0.01 left out)."""
    from kvsim import sim

    out: dict[str, Any] = {}
    for way in WAYS:
        d = tmp / f"{trace.stem}-{way}.kvt"
        rewrite(trace, d, way == "fetched", True)
        res = sim.simulate(str(d), cpu, functional=True, tlb=False, prefetchers=False)
        d.unlink()
        last = res["levels"][-1]
        by: dict[str, float] = {}
        for t in res["by_tag"]:
            if t["level"] == last["name"] and t["kind"] in ("load", "store"):
                by[t["tag_name"]] = by.get(t["tag_name"], 0.0) + t["misses"] / requests
        out[way] = {"ll_misses": round(last["demand_misses"] / requests, 2),
                    "by_site": {k: round(v, 2) for k, v in
                                sorted(by.items(), key=lambda kv: -kv[1]) if v >= 0.01}}
    return out


def predicted_user(trace: Path, cpu_path: str, requests: int,
                   store_buffer: int | None = None) -> dict[str, float]:
    """The trace's predicted time and user time per request (ns) on ``cpu_path`` (with
    ``store_buffer``: that many entries of ``[core] store_buffer``, sim/MODEL.md §6)."""
    from kvsim import sim

    cpu = sim.load_cpu(cpu_path)
    if store_buffer:
        cpu = cpu.with_changes(store_buffer=store_buffer)
    res = sim.simulate(str(trace), cpu)
    ghz = res["timing"]["freq_ghz"]
    sys_cycles = (res.get("syscalls") or {}).get("cycles") or 0
    ns = res["cycles"] / ghz / requests
    return {"ns": round(ns, 1), "user_ns": round(ns - sys_cycles / ghz / requests, 1),
            "llc_demand_misses": round(res["levels"][-1]["demand_misses"] / requests, 2)}


def native_groups(top: list[list[Any]]) -> dict[str, float]:
    """A native cell's top functions by LL data misses, the allocator's summed."""
    alloc = sum(v for f, v in top if f in ALLOCATOR_FUNCTIONS)
    return {"allocator": round(alloc, 2),
            "rest": round(sum(v for f, v in top if f not in ALLOCATOR_FUNCTIONS), 2)}


def run(native: dict[str, Any], cells: list[str], builds: dict[str, Path | None],
        cpu_path: str | None, tmp: Path, log=None,
        store_buffer: int | None = None) -> list[dict[str, Any]]:
    from kvsim.experiments.server_study import SERVER_ARGS, traced_side

    by_cell = {c["cell"]: c for c in native["cells"]}
    cpu = cachegrind_cpu(native["caches"])
    warm = int(native["warmup_requests"])
    out = []
    for cell in cells:
        nc = by_cell[cell]
        spec = dict(nc["spec"])
        n = int(spec["requests"])
        spec["requests"] = n + warm  # the warm-up run, then the measured one
        row: dict[str, Any] = {
            "cell": cell, "keys": spec["keys"], "requests": n, "warmup_requests": warm,
            "batch": spec["batch_a"],
            "native": {"ll_data_misses": nc["cref"]["ll_data_misses"],
                       "top_ll_data_misses": nc["cref"]["top_ll_data_misses"],
                       **native_groups(nc["cref"]["top_ll_data_misses"])},
            "traced": {}}
        for label, binary in builds.items():
            tr = traced_side(spec, spec["batch_a"], SERVER_ARGS, log=log, binary=binary,
                             measured=n)
            t = site_misses(tr, cpu, n, tmp)
            if cpu_path:
                t["predicted"] = predicted_user(tr, cpu_path, n)
            if cpu_path and store_buffer:  # stores fetched, their fetches timed
                d = tmp / f"{tr.stem}-fetched-t.kvt"
                rewrite(tr, d, True, False)
                t["predicted_fetched_store_buffer"] = {
                    "store_buffer": store_buffer,
                    **predicted_user(d, cpu_path, n, store_buffer)}
                d.unlink()
            row["traced"][label] = t
            if log:
                log(f"{cell} {label}: LL misses per request {t['model']['ll_misses']} "
                    f"(stores fetched: {t['fetched']['ll_misses']}), native "
                    f"{row['native']['ll_data_misses']}")
        out.append(row)
    return out


def markdown(doc: dict[str, Any]) -> str:
    """Per cell and build: the LL misses per request natively and traced, and the sites
    and functions that miss most."""
    labels = list(doc["cells"][0]["traced"])
    cpu = Path(doc["cpu"]).name if doc.get("cpu") else None
    head = ("| cell | c_ref build | LL misses: native (allocator) | traced, model's stores "
            "(alloc.*) | traced, stores fetched | sites missing most (stores fetched) |"
            + (f" predicted user ns on {cpu} (stores fetched, store buffer) |" if cpu
               else ""))
    rows = [head, "|---|---|---:|---:|---:|---|" + ("---:|" if cpu else "")]
    for c in doc["cells"]:
        nat = c["native"]
        for label in labels:
            t = c["traced"][label]
            m, f = t["model"], t["fetched"]
            alloc = sum(v for k, v in m["by_site"].items() if k.startswith("alloc."))
            top = ", ".join(f"{k} {v:.1f}" for k, v in list(f["by_site"].items())[:4])
            fsb = t.get("predicted_fetched_store_buffer")
            pred = (f" {t['predicted']['user_ns']:,.0f}"
                    + (f" ({fsb['user_ns']:,.0f})" if fsb else "") + " |") if cpu and t.get(
                "predicted") else (" |" if cpu else "")
            rows.append(f"| {c['cell']} | {label} | {nat['ll_data_misses']:.1f} "
                        f"({nat['allocator']:.1f}) | {m['ll_misses']:.1f} ({alloc:.1f}) | "
                        f"{f['ll_misses']:.1f} | {top} |" + pred)
    fns = "; ".join(f"{c['cell']}: " + ", ".join(f"{fn} {v:.1f}" for fn, v in
                                                c["native"]["top_ll_data_misses"][:6])
                    for c in doc["cells"])
    return "\n".join(rows) + f"\n\nNative LL data misses per request by function: {fns}."


def _binary_id(path: Path | None) -> dict[str, str]:
    """A build's SHA-256 (``path`` None: the project's kvsim-cref)."""
    from kvsim import provenance
    from kvsim.experiments import cref

    p = path or cref.binary()
    return {"sha256": provenance.file_sha256(p),
            "project_build": path is None}


def main(argv: list[str] | None = None,
         prog: str = "python -m kvsim.experiments.server_missites") -> int:
    import tempfile

    from kvsim import provenance
    from kvsim.experiments import progress
    from kvsim.experiments import server as S

    ap = S._Parser(prog=prog, description="Last-level misses per request of c_ref's server, "
                   "natively by function (callgrind) and traced by site on the same caches.")
    ap.add_argument("--native", metavar="CACHESIM",
                    help="a native-server-cachesim result (server_cachesim)")
    ap.add_argument("--cell", action="append", default=None,
                    help="cell(s) of that file, repeatable (default: all of them)")
    ap.add_argument("--build", action="append", default=None, metavar="LABEL=BINARY",
                    help="trace with this kvsim-cref build under LABEL (repeatable; the "
                    "project's build is always traced, as 'this')")
    ap.add_argument("--cpu", metavar="CPUFILE", default=None,
                    help="also predict each trace's user time per request on this CPU file")
    ap.add_argument("--store-buffer", type=int, default=None, metavar="N",
                    help="with --cpu: also predict each trace with its stores fetched and "
                    "timed by a store buffer of N entries")
    ap.add_argument("--out", default=None, help=f"result file (default results/{RESULT_NAME})")
    ap.add_argument("--render", metavar="RESULT", default=None,
                    help="print the Markdown table of a result file and exit")
    a = ap.parse_args(argv)
    if a.render:
        return S.render_result(prog, a.render, markdown)
    if not a.native:
        ap.error("--native is required")
    try:
        native = json.loads(Path(a.native).read_text())
        known = [c["cell"] for c in native["cells"]]
        native["caches"], native["warmup_requests"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        ap.error(f"--native {a.native}: not a server_cachesim result ({exc})")
    cells = a.cell or known
    bad = [c for c in cells if c not in known]
    if bad:
        ap.error(f"--cell {bad[0]}: not in {a.native} (it has {', '.join(known)})")
    if a.cpu and not Path(a.cpu).is_file():
        ap.error(f"--cpu {a.cpu}: no such file")
    if a.store_buffer is not None and (a.store_buffer < 1 or not a.cpu):
        ap.error("--store-buffer: a positive number of entries, with --cpu")
    builds: dict[str, Path | None] = {}
    try:
        for arg in a.build or ():
            label, path = S.build_arg(arg, "--build")
            if label in builds or label == "this":
                raise ValueError(f"--build: label {label!r} given twice or reserved")
            builds[label] = path
    except ValueError as exc:
        ap.error(str(exc))
    builds["this"] = None
    out = provenance.out_path(a.out, RESULT_NAME)
    with tempfile.TemporaryDirectory(prefix="kvsim-missites-") as tmp:
        rows, status = S.run_or_status(prog, lambda: run(native, cells, builds, a.cpu,
                                                         Path(tmp), progress.log_line,
                                                         a.store_buffer))
    if status:
        return status
    doc = {"experiment": "server_missites", "native": a.native,
           "native_provenance": native.get("provenance"), "caches": native["caches"],
           "cpu": a.cpu, "builds": {k: _binary_id(v) for k, v in builds.items()},
           "cells": rows}
    return provenance.publish(prog, out, doc)


if __name__ == "__main__":
    sys.exit(main())
