"""Throughput benchmark of the engine: prints records/s figures and writes them to a result file.

    python -m bench sim [--records N] [--trace PATH ...] [--repeat R] [--threads 1,2]
                              [--out FILE]

Workloads: (a) N random 8-byte loads uniform over 1 GiB (numpy seed 12345), (b) a real c_ref
trace for each ``--trace`` (e.g. an iterate trace from ``kvsim trace``). Hierarchy: L1 48 KiB
12-way, L2 2 MiB 16-way, L3 32 MiB 16-way, 64 B lines, LRU, no TLB or prefetchers; timing adds
a 6-wide core with a 512-entry ROB, 16/48 miss buffers and 100 ns DRAM at 3 GHz. The same
addresses go through pycachesim's fastest batched API (``load(list, length=8)``) when it is
installed (loads only; stores go through its ``load`` too, as reads). Each engine run is
repeated for every ``--threads`` count (the engine's results do not depend on it). Rates are
records per second of wall time, best of ``--repeat`` interleaved rounds (on a shared machine a
slow spell then hits every variant instead of one), and of process CPU time (all threads: the
work, where wall time is the speed; the two agree for one thread).

Every figure printed, with the parameters and each trace's c_ref workload, goes to the result
file ``--out`` (default ``results/sim-bench.json`` in a checkout), written through
:func:`kvsim.provenance.write_result` (commit, machine, load average, date) once the run ends.
:func:`render_table` turns that file into the table sim/README.md shows.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench import _pycachesim
from bench._pycachesim import version as pycachesim_version
from kvsim import provenance, sim, traces
from kvsim.sim import _binding as B

RESULT_NAME = "sim-bench.json"
SEED = 12345
CHUNK = 1 << 16
MAX_THREADS = 8

HIER = {
    "name": "bench-48k-2m-32m", "freq_ghz": 3.0, "core": {"width": 6, "rob": 512},
    "cache": [
        {"name": "L1D", "size": "48KiB", "ways": 12, "line": 64, "latency": 5, "mshrs": 16},
        {"name": "L2", "size": "2MiB", "ways": 16, "line": 64, "latency": 16, "mshrs": 48},
        {"name": "L3", "size": "32MiB", "ways": 16, "line": 64, "latency": 60},
    ],
    "dram": {"latency_ns": 100.0},
}


class BenchError(Exception):
    """Bad input: a one-line message naming what and where."""


def random_loads(n: int, seed: int = SEED) -> np.ndarray:
    rng = np.random.default_rng(seed)
    recs = np.zeros(n, dtype=traces.RECORD_DTYPE)
    recs["addr"] = (rng.integers(0, 1 << 30, n, dtype=np.uint64) & ~np.uint64(7))
    recs["size"] = 8
    recs["kind"] = traces.KIND_LOAD
    return recs


def time_engine(recs: np.ndarray, timing: bool, threads: int = 1,
                chunk: int = CHUNK) -> tuple[float, float]:
    """(records/s of wall time, records/s of process CPU time) of one run."""
    cpu = sim.parse_cpu(HIER)
    cfg = cpu.to_engine(timing=timing, tlb=False, prefetchers=False)
    cfg.threads = threads
    eng = B.Engine(cfg)
    w0, c0 = time.perf_counter(), time.process_time()
    for i in range(0, len(recs), chunk):
        eng.run(recs[i:i + chunk])
    eng.finish()
    w, c = time.perf_counter() - w0, time.process_time() - c0
    eng.close()
    return len(recs) / w, len(recs) / c


def time_pycachesim(recs: np.ndarray, repeat: int) -> float | None:
    """Loads and stores per second of wall time through :data:`HIER` built in pycachesim (its
    batched ``load(list, length=8)``), best of ``repeat``; None without pycachesim."""
    if pycachesim_version() is None:
        return None
    geometry = _pycachesim.levels(sim.parse_cpu(HIER))
    mem = recs[recs["kind"] <= 1]
    addrs = mem["addr"].astype(np.int64).tolist()
    best = float("inf")
    for _ in range(repeat):
        cs = _pycachesim.simulator(geometry)
        t0 = time.perf_counter()
        cs.load(addrs, length=8)
        best = min(best, time.perf_counter() - t0)
    return len(addrs) / best


def _mrec(rate: float) -> float:
    """A rate in M records/s, as the result file holds it."""
    return round(rate / 1e6, 3)


def measure(name: str, recs: np.ndarray, source: dict[str, Any], counts: list[int],
            repeat: int) -> dict[str, Any]:
    """One workload's figures: interleaved rounds (engine functional and timing at every thread
    count, then pycachesim), the best of each."""
    best: dict[tuple[bool, int], tuple[float, float]] = {}
    p: float | None = 0.0
    for _ in range(repeat):
        for t in counts:
            for timing in (False, True):
                r = time_engine(recs, timing, t)
                old = best.get((timing, t), (0.0, 0.0))
                best[timing, t] = (max(old[0], r[0]), max(old[1], r[1]))
        q = time_pycachesim(recs, 1)
        p = None if q is None else max(p or 0.0, q)
    pyc = _mrec(p) if p else None
    runs = []
    for t in counts:
        (fw, fc), (tw, tc) = best[False, t], best[True, t]
        runs.append({
            "threads": t,
            "functional_wall_mrec_s": _mrec(fw), "functional_cpu_mrec_s": _mrec(fc),
            "timing_wall_mrec_s": _mrec(tw), "timing_cpu_mrec_s": _mrec(tc),
            "functional_wall_over_pycachesim": round(_mrec(fw) / pyc, 2) if pyc else None,
        })
    return {
        "name": name, "source": source, "records": int(len(recs)),
        "pycachesim_records": int(np.count_nonzero(recs["kind"] <= 1)),
        "pycachesim_mrec_s": pyc, "runs": runs,
    }


def row_text(w: dict[str, Any], r: dict[str, Any]) -> str:
    """The printed line of one workload at one thread count, from the result file's values."""
    pyc = w["pycachesim_mrec_s"]
    ps = f"{pyc:10.2f}" if pyc else " not inst."
    ratio = r["functional_wall_over_pycachesim"]
    sp = f"{ratio:6.2f}x" if ratio is not None else "      -"
    return (f"{w['name']:40s} {w['records']:10d} {r['threads']:3d} "
            f"{r['functional_wall_mrec_s']:7.3f} ({r['functional_cpu_mrec_s']:7.3f}) "
            f"{r['timing_wall_mrec_s']:7.3f} ({r['timing_cpu_mrec_s']:7.3f}) {ps} {sp}")


HEADER = (f"{'workload':40s} {'records':>10s} {'thr':>3s} {'functional':>17s} "
          f"{'timing':>17s} {'pycachesim':>10s} {'ratio':>7s}")


def render_table(doc: dict[str, Any]) -> str:
    """The Markdown table of a result file: M records/s of wall time (of CPU time in brackets),
    functional and timed, per workload and thread count, and pycachesim."""
    lines = ["| workload | records | threads | functional | timing | pycachesim | "
             "functional / pycachesim |", "|---|---|---|---|---|---|---|"]
    for w in doc["workloads"]:
        pyc = w["pycachesim_mrec_s"]
        for r in w["runs"]:
            ratio = r["functional_wall_over_pycachesim"]
            lines.append(
                f"| {w['name']} | {w['records']:,} | {r['threads']} | "
                f"{r['functional_wall_mrec_s']:.2f} ({r['functional_cpu_mrec_s']:.2f}) | "
                f"{r['timing_wall_mrec_s']:.2f} ({r['timing_cpu_mrec_s']:.2f}) | "
                f"{'-' if pyc is None else f'{pyc:.2f}'} | "
                f"{'-' if ratio is None else f'{ratio:.2f}x'} |")
    return "\n".join(lines) + "\n"


def render_instructions_table(doc: dict[str, Any]) -> str:
    """The Markdown table of a result file of sim/_engine/bench/instructions.sh."""
    lines = ["| file | records | functional | timing |", "|---|---|---|---|"]
    for f in doc["files"]:
        lines.append(f"| {f['file']} | {f['records']:,} | {f['functional']:.1f} | "
                     f"{f['timing']:.1f} |")
    return "\n".join(lines) + "\n"


def render_threads_table(doc: dict[str, Any]) -> str:
    """The Markdown table of a result file of sim/_engine/bench/threads.sh: per file and mode,
    the calling thread's instructions per record, then each worker's."""
    lines = ["| file | mode | calling thread | workers |", "|---|---|---|---|"]
    for f in doc["files"]:
        workers = " / ".join(f"{w:.1f}" for w in f["workers"])
        lines.append(f"| {f['file']} | {f['mode']} | {f['caller']:.1f} | {workers} |")
    return "\n".join(lines) + "\n"


def _thread_counts(text: str) -> list[int]:
    try:
        counts = [int(t) for t in text.split(",")]
    except ValueError:
        raise BenchError(f"--threads {text!r}: comma-separated integers expected") from None
    bad = [t for t in counts if not 1 <= t <= MAX_THREADS]
    if bad:
        raise BenchError(f"--threads {text!r}: each count must be 1..{MAX_THREADS}")
    return counts


def _load_trace(path: str) -> tuple[np.ndarray, dict[str, Any]]:
    try:
        with traces.open(path) as tr:
            header = tr.header
            recs = tr.read_all()
    except OSError as exc:
        raise BenchError(f"--trace {path}: {exc.strerror or exc}") from None
    except Exception as exc:  # a malformed trace: the reader names the chunk and offset
        raise BenchError(f"--trace {path}: {str(exc).splitlines()[0]}") from None
    source = {"kind": "trace", "file": Path(path).name,
              "producer": header.get("producer"), "workload": header.get("workload")}
    return recs, source


def run(records: int, trace_paths: list[str], repeat: int, counts: list[int],
        echo=print) -> dict[str, Any]:
    """Measure every workload, echoing each line as it is ready; the result file's payload."""
    if records < 1:
        raise BenchError(f"--records {records}: must be >= 1")
    if repeat < 1:
        raise BenchError(f"--repeat {repeat}: must be >= 1")
    loaded = [_load_trace(p) for p in trace_paths]  # bad paths fail before any timing
    workloads = [("random loads over 1 GiB", random_loads(records),
                  {"kind": "random_loads", "records": records, "seed": SEED,
                   "span_bytes": 1 << 30, "size": 8})]
    for path, (recs, source) in zip(trace_paths, loaded, strict=True):
        workloads.append((f"trace {Path(path).name}", recs, source))
    echo(f"# kvsim engine benchmark, best of {repeat}; M records/s of wall time (of CPU time "
         "in brackets); ratio: functional wall / pycachesim")
    echo(HEADER)
    results = []
    for name, recs, source in workloads:
        w = measure(name, recs, source, counts, repeat)
        for r in w["runs"]:
            echo(row_text(w, r))
        results.append(w)
    return {
        "benchmark": "kvsim.sim.bench",
        "units": "M records/s; wall: best of `repeat` rounds, cpu: process CPU time of the "
                 "same run (all threads)",
        "parameters": {
            "records": records, "repeat": repeat, "threads": counts, "chunk_records": CHUNK,
            "hierarchy": HIER, "tlb": False, "prefetchers": False,
            "pycachesim": pycachesim_version(),
        },
        "workloads": results,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench sim",
                                 description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=5_000_000,
                    help="random loads in workload (a) (default 5000000)")
    ap.add_argument("--trace", action="append", default=[],
                    help="a .kvt trace (e.g. a c_ref iterate trace); repeatable")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--threads", default="1,2",
                    help="comma-separated engine thread counts (default 1,2)")
    provenance.add_out_option(ap, RESULT_NAME)
    a = ap.parse_args(argv)
    out = provenance.out_path(a.out, RESULT_NAME)
    try:
        payload = run(a.records, a.trace, a.repeat, _thread_counts(a.threads))
    except BenchError as exc:
        print(f"python -m bench sim: error: {exc}", file=sys.stderr)
        return 2
    return provenance.publish("python -m bench sim", out, payload)


def load(path: str | Path) -> dict[str, Any]:
    """A result file written by this benchmark."""
    return json.loads(Path(path).read_text())


if __name__ == "__main__":
    sys.exit(main())
