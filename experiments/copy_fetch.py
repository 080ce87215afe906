"""Copies into cold destinations, native beside the simulator: what a line of a copy's
destination costs when it is not in the cache, against when it is.

    python -m kvsim.experiments.copy_fetch compare --native results/copy-fetch.json
        [--cpu CPU] [--stream-degree N,...] [--out FILE]

The native side is ``python -m kvsim.sim.calibrate_copy``'s result (sim/calibrate_copy.py;
``kvsim-calibrate copyfetch``): per copy size, method and destination state, ns per copy.
``compare`` writes the same copies as traces and simulates them on ``--cpu``, as it is and
with ``[core] full_line_store_fetch = false`` (whole-line stores allocate without a fetch)
and, an ablation, with each ``--stream-degree`` given to the file's stream prefetchers, and
sets each state's penalty per destination line (ns per copy beyond hot, over the copy's
lines) beside the native ones of the kernel's ``read()``, ``rep movsb`` and the vector-store
loop. The penalty is the memory system's part of a copy: the rest (the instructions, the
kernel's own per-byte cost) is the same in every state.

A copy's records: per 64-byte line a load of the source's line and a store of the
destination's whole line, each with a gap of :data:`LINE_GAP` instructions (c_ref's
``KS_LINE_CONTINUATION_COST``). The source (the copy's size, one buffer) is loaded in the
warm-up, as natively it sits in the cache. States, each over :data:`BATCH` bytes of copies:

* hot: every copy into the same destination, copied once in the warm-up;
* flushed: consecutive destinations never touched before (in no cache, nothing dirty);
* pool: the same, after a warm-up that stores over :data:`POOL_WARM_LLC_TIMES` times the
  file's last level, so that every level is full of dirty lines, as natively the pool's
  earlier copies leave it.

``touch`` (hot and flushed) is the same with loads of the destinations' lines in place of
the copies, as ``kvsim-calibrate copyfetch``'s: what fetching the lines alone costs.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

from kvsim import provenance, traces
from kvsim.sim.config import ConfigError, load_cpu

LINE = 64
LINE_GAP = 4  # c_ref/emit.h KS_LINE_CONTINUATION_COST
BATCH = 1 << 20  # sim/calibrate_copy.py BATCH: bytes copied per sample
POOL_WARM_LLC_TIMES = 2
SRC, HOT, FRESH, WARM = 0x10_0000_0000, 0x20_0000_0000, 0x30_0000_0000, 0x40_0000_0000
NATIVE_METHODS = ("read", "movsb", "loop", "nt", "touch")
RESULT_NAME = "copy-fetch-compare.json"


def _stream(kind: int, base: int, nbytes: int) -> np.ndarray:
    r = np.zeros(nbytes // LINE, dtype=traces.RECORD_DTYPE)
    r["addr"] = np.uint64(base) + np.arange(nbytes // LINE, dtype=np.uint64) * np.uint64(LINE)
    r["size"], r["kind"], r["gap"], r["tag"] = LINE, kind, LINE_GAP, traces.TAG_VALUE
    return r


def _copy(dst: int, size: int) -> np.ndarray:
    """One copy of ``size`` bytes from SRC to ``dst``: per line a load then a store."""
    ld, st = _stream(traces.KIND_LOAD, SRC, size), _stream(traces.KIND_STORE, dst, size)
    out = np.empty(2 * len(ld), dtype=traces.RECORD_DTYPE)
    out[0::2], out[1::2] = ld, st
    return out


def records(size: int, state: str, llc_bytes: int, touch: bool = False
            ) -> tuple[np.ndarray, int]:
    """The trace of one state's sample of ``size``-byte copies (``touch``: loads of the
    destinations' lines, no stores), and its number of copies."""
    copies = BATCH // size
    warm = [traces.marker_record(traces.MARK_WARMUP_BEGIN)]
    if state == "pool":
        warm.append(_stream(traces.KIND_STORE, WARM, POOL_WARM_LLC_TIMES * llc_bytes))
    warm.append(_stream(traces.KIND_LOAD, SRC, size))
    if state == "hot":
        warm.append(_copy(HOT, size))
    warm.append(traces.marker_record(traces.MARK_WARMUP_END))
    one = (lambda d: _stream(traces.KIND_LOAD, d, size)) if touch else (lambda d: _copy(d, size))
    body = [one(HOT if state == "hot" else FRESH + c * size) for c in range(copies)]
    return np.concatenate(warm + body), copies


def _native_rows(nat: dict[str, Any]) -> dict[tuple[int, str], dict[str, Any]]:
    return {(r["size"], r["method"]): r for r in nat["rows"]}


def _with_stream_degree(cpu: Any, degree: int) -> Any:
    from dataclasses import replace

    return cpu.with_changes(prefetchers=tuple(
        replace(p, degree=degree) if p.kind == "stream" else p for p in cpu.prefetchers))


def compare(nat: dict[str, Any], cpu_path: str, stream_degrees: tuple[int, ...] = (),
            log=lambda m: None) -> list[dict[str, Any]]:
    from kvsim import sim

    base = load_cpu(cpu_path)
    llc = base.caches[-1].size
    by = _native_rows(nat)
    rows = []
    for size in nat["raw"]["sizes"]:
        if size > BATCH:
            continue
        lines = size / LINE
        row: dict[str, Any] = {"size": size, "native": {}, "predicted": {}}
        for m in NATIVE_METHODS:
            r = by.get((size, m))
            if r:
                row["native"][m] = {k: r[k] for k in ("hot", "flushed", "pool",
                                                       "flushed_penalty_ns_per_line",
                                                       "pool_penalty_ns_per_line",
                                                       "fetch_share") if k in r}
        variants = [("file", base), ("no_fetch", base.with_changes(full_line_store_fetch=False))]
        variants += [(f"stream_degree_{d}", _with_stream_degree(base, d)) for d in stream_degrees]
        for label, cpu in variants:
            fetch = cpu.full_line_store_fetch
            ns, hw = {}, {}
            for state, touch in (("hot", False), ("flushed", False), ("pool", False),
                                 ("hot", True), ("flushed", True)):
                rec, copies = records(size, state, llc, touch=touch)
                res = sim.simulate(rec, cpu, page_size=4096, validate=False, flush=False)
                key = f"touch_{state}" if touch else state
                ns[key] = res["cycles"] / cpu.freq_ghz / copies
                if state == "flushed":  # the hardware prefetches on the cold stream
                    hw[key] = {lv: {k: c[k] for k in ("issued", "useful", "late", "dropped")}
                               for lv, c in res["prefetch"]["hardware"].items()}
            row["predicted"][label] = {
                "full_line_store_fetch": bool(fetch), "ns_per_copy": ns,
                "hw_prefetch_flushed": hw, "mshrs": [c.mshrs for c in cpu.caches],
                "touch_flushed_penalty_ns_per_line": (ns["touch_flushed"] - ns["touch_hot"])
                / lines,
                "flushed_penalty_ns_per_line": (ns["flushed"] - ns["hot"]) / lines,
                "pool_penalty_ns_per_line": (ns["pool"] - ns["hot"]) / lines}
        nr = row["native"].get("read", {}).get("pool_penalty_ns_per_line", {})
        log(f"{size:>8} B: pool penalty ns/line native read "
            f"{nr.get('median', float('nan')):.2f}, predicted "
            f"{row['predicted']['file']['pool_penalty_ns_per_line']:.2f} (fetch), "
            f"{row['predicted']['no_fetch']['pool_penalty_ns_per_line']:.2f} (no fetch)")
        rows.append(row)
    return rows


def main(argv: list[str] | None = None, prog: str = "python -m kvsim.experiments.copy_fetch"
         ) -> int:
    ap = argparse.ArgumentParser(prog=prog, description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("compare", help="the native copies beside the simulator's")
    c.add_argument("--native", required=True, help="a file calibrate_copy wrote")
    c.add_argument("--cpu", default="local")
    c.add_argument("--stream-degree", default="",
                   help="an ablation: also simulate with every stream prefetcher's degree set "
                        "to each of these (comma-separated)")
    provenance.add_out_option(c, RESULT_NAME)
    a = ap.parse_args(argv)
    log = lambda m: print(f"copy_fetch: {m}", file=sys.stderr, flush=True)  # noqa: E731
    out = provenance.out_path(a.out, RESULT_NAME)
    if provenance.out_dir_missing(out):
        return 2
    try:
        nat = json.loads(Path(a.native).read_text())
        if "rows" not in nat or "raw" not in nat:
            raise ValueError(f"{a.native}: not a calibrate_copy result (no rows)")
        degrees = tuple(int(x) for x in a.stream_degree.split(",") if x.strip())
        rows = compare(nat, a.cpu, degrees, log)
    except (ConfigError, ValueError, OSError) as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        return 2
    payload = {"command": provenance.command(), "native_file": a.native,
               "native_provenance": nat.get("provenance"), "cpu": a.cpu,
               "line_gap": LINE_GAP, "batch": BATCH, "rows": rows}
    return provenance.publish(prog, out, payload)


if __name__ == "__main__":
    sys.exit(main())
