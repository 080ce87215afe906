"""Reader throughput with and without the record checks: prints records/s, writes a result file.

    python -m bench traces [--records N] [--trace PATH ...] [--repeat R] [--out FILE]

Inputs: (a) a synthetic trace of N records (numpy seed 12345: loads, stores, prefetches and
markers, a third of the memory records with a dep on an earlier load), written to memory in
zstd and in raw chunks of 65536 records; (b) each ``--trace`` file as it is. Every input is
read to the end with ``traces.open(..., validate=False)`` (stream checks only: CRCs, sizes,
zstd frames) and with ``validate=True`` (plus FORMAT.md's record rules), alternating the two in
``--repeat`` rounds so a slow spell on a shared machine hits both; the figure is the best round
in records per second of wall time.

Every figure printed goes to ``--out`` (default ``results/trace-read-bench.json`` in a
checkout) through :func:`kvsim.provenance.write_result` (commit, machine, load average, date).
"""

from __future__ import annotations

import argparse
import io
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from kvsim import provenance, traces

RESULT_NAME = "trace-read-bench.json"
SEED = 12345


def synthetic(n: int, seed: int = SEED) -> np.ndarray:
    """``n`` records that keep every record rule (see the module docstring)."""
    rng = np.random.default_rng(seed)
    r = np.zeros(n, dtype=traces.RECORD_DTYPE)
    kind = rng.choice([0, 0, 0, 1, 2, 3], n).astype(np.uint8)
    r["kind"] = kind
    r["addr"] = rng.integers(0, 1 << 34, n, dtype=np.uint64)
    r["size"] = np.where(kind == 3, 0, np.where(kind == 2, 1, 8))
    r["flags"] = np.where(kind == 3, traces.MARK_OP, 0)
    r["gap"] = rng.integers(0, 20, n)
    r["tag"] = rng.integers(0, traces.NUM_TAGS, n)
    back = rng.integers(1, 8, n)
    src = np.arange(n) - back
    ok = (kind != 3) & (src >= 0) & (rng.random(n) < 0.33)
    ok[ok] = kind[src[ok]] == 0
    r["dep"] = np.where(ok, back, 0)
    return r


def _encode(rec: np.ndarray, codec: str) -> bytes:
    buf = io.BytesIO()
    header = {"tags": traces.TAG_NAMES, "markers": traces.MARKER_NAMES,
              "workload": {"name": "bench-synthetic"}}
    with traces.Writer(buf, header, codec=codec) as w:
        w.write(rec)
    return buf.getvalue()


def _read_once(data: bytes | Path, validate: bool) -> tuple[int, float]:
    src: Any = io.BytesIO(data) if isinstance(data, bytes) else data
    t0 = time.perf_counter()
    n = 0
    with traces.open(src, validate=validate) as tr:
        for chunk in tr:
            n += chunk.size
    return n, time.perf_counter() - t0


def measure(name: str, data: bytes | Path, repeat: int) -> dict[str, Any]:
    best = {False: float("inf"), True: float("inf")}
    n = 0
    for _ in range(repeat):
        for v in (False, True):
            n, dt = _read_once(data, v)
            best[v] = min(best[v], dt)
    row = {"input": name, "records": n,
           "records_per_s_unchecked": n / best[False], "records_per_s_checked": n / best[True]}
    row["checked_over_unchecked"] = row["records_per_s_checked"] / row["records_per_s_unchecked"]
    print(f"{name:<32} {n:>11,d} rec  unchecked {row['records_per_s_unchecked'] / 1e6:8.1f} M/s"
          f"  checked {row['records_per_s_checked'] / 1e6:8.1f} M/s"
          f"  ({row['checked_over_unchecked']:.2f}x)")
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench traces",
                                 description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--records", type=int, default=4_000_000,
                    help="records in the synthetic trace (default 4000000)")
    ap.add_argument("--trace", action="append", default=[], help="a .kvt trace; repeatable")
    ap.add_argument("--repeat", type=int, default=3)
    provenance.add_out_option(ap, RESULT_NAME)
    a = ap.parse_args(argv)
    if a.records < 1 or a.repeat < 1:
        print("python -m bench traces: error: --records and --repeat must be >= 1", file=sys.stderr)
        return 2
    out = provenance.out_path(a.out, RESULT_NAME)
    rows = []
    try:
        rec = synthetic(a.records)
        for codec in ("zstd", "raw"):
            rows.append(measure(f"synthetic ({codec})", _encode(rec, codec), a.repeat))
        for t in a.trace:
            rows.append(measure(Path(t).name, Path(t), a.repeat))
    except (OSError, traces.TraceError) as exc:
        print(f"python -m bench traces: error: {exc}", file=sys.stderr)
        return 1
    payload = {"benchmark": "trace-read", "seed": SEED, "repeat": a.repeat,
               "chunk_records": traces.DEFAULT_CHUNK_RECORDS, "rows": rows}
    return provenance.publish("python -m bench traces", out, payload)


if __name__ == "__main__":
    sys.exit(main())
