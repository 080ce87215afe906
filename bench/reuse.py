"""Reuse-distance throughput of the compiled counter: prints accesses/s, writes a result file.

    python -m bench reuse [--records N] [--lines L] [--python-records M]
                                       [--out FILE]

Input: N synthetic records (numpy seed 12345) in chunks of 2^20, each one 64 B load of a line
drawn uniformly from L distinct lines (a footprint of 64 L bytes, so nearly every reuse
distance is large and the counter's tree and hash map do not fit the host caches: a hard
case), over 16 structure tags. The records go through :func:`traces.reuse.reuse_counts`
chunk by chunk, as a trace file's would, so memory stays O(L) whatever N. The pure-Python
reference (``reuse_distance(..., method="python")``) runs on the first M records for
comparison. The figures are wall-time rates of one run each; the machine's load is in the
result file's provenance.

Every figure printed goes to ``--out`` (default ``results/reuse-bench.json`` in a checkout)
through :func:`kvsim.provenance.write_result` (commit, machine, load average, date).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from kvsim import provenance, traces
from kvsim.traces.reuse import reuse_counts

RESULT_NAME = "reuse-bench.json"
SEED = 12345
CHUNK = 1 << 20


def chunks(n: int, lines: int, seed: int = SEED) -> Iterator[np.ndarray]:
    """``n`` load records of 64 B lines drawn from ``lines`` distinct ones, 2^20 at a time."""
    rng = np.random.default_rng(seed)
    for lo in range(0, n, CHUNK):
        k = min(CHUNK, n - lo)
        r = np.zeros(k, dtype=traces.RECORD_DTYPE)
        r["kind"] = traces.KIND_LOAD
        r["size"] = 8
        r["addr"] = rng.integers(0, lines, k, dtype=np.uint64) << np.uint64(6)
        r["tag"] = rng.integers(0, 16, k)
        yield r


class _Chunks:
    """A record-array stream shaped like a trace reader for :func:`reuse_counts`."""

    def __init__(self, n: int, lines: int) -> None:
        self.n, self.lines = n, lines

    def __iter__(self) -> Iterator[np.ndarray]:
        return chunks(self.n, self.lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench reuse",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=10_000_000)
    ap.add_argument("--lines", type=int, default=1 << 20)
    ap.add_argument("--python-records", type=int, default=200_000)
    ap.add_argument("--out", default=None)
    a = ap.parse_args(argv)
    if a.records < 1 or a.lines < 1 or a.python_records < 0:
        print("python -m bench reuse: --records and --lines must be >= 1, --python-records >= 0",
              file=sys.stderr)
        return 2
    out = Path(a.out) if a.out else (provenance.results_dir() or Path(".")) / RESULT_NAME
    t0 = time.perf_counter()
    hist, cold, got, _ = reuse_counts(_Chunks(a.records, a.lines), None, by_tag=True)
    compiled_s = time.perf_counter() - t0
    rows = {"compiled": {"records": got, "seconds": compiled_s,
                         "accesses_per_s": got / compiled_s,
                         "cold": int(cold.sum()), "reuses": int(hist.sum())}}
    if a.python_records:
        recs = next(chunks(min(a.python_records, CHUNK), a.lines))
        t0 = time.perf_counter()
        traces.reuse_distance(recs, max_accesses=None, method="python")
        py_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        traces.reuse_distance(recs, max_accesses=None)
        c_s = time.perf_counter() - t0
        rows["python_reference"] = {"records": int(recs.size), "seconds": py_s,
                                    "accesses_per_s": recs.size / py_s}
        rows["compiled_same_input"] = {"records": int(recs.size), "seconds": c_s,
                                       "accesses_per_s": recs.size / c_s}
    for name, r in rows.items():
        print(f"{name:20s} {r['records']:>12,d} accesses  {r['seconds']:8.2f} s  "
              f"{r['accesses_per_s'] / 1e6:8.2f} M accesses/s")
    provenance.write_result(out, {
        "benchmark": "reuse distances (traces.reuse_counts, sim/_engine/reuse.c)",
        "command": "python -m bench reuse " + " ".join(argv or sys.argv[1:]),
        "params": {"records": a.records, "lines": a.lines, "python_records": a.python_records,
                   "chunk_records": CHUNK, "seed": SEED},
        "rows": rows,
    })
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
