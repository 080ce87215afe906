"""Prefetch distance of a traced snapshot load (kvsim-cref trace load ...).

For every bucket prefetch, the number of instructions (the trace's gaps plus one per
memory record) until the first access to the same line, and the instructions per loaded
key (between OP markers).  Usage (from the repository root):

    .venv/bin/python -m bench load-distance x.kvt
"""

from __future__ import annotations

import argparse
import json
import sys

import numpy as np

from kvsim.traces.reader import open_trace

KIND_LOAD, KIND_STORE, KIND_PREFETCH, KIND_MARKER = 0, 1, 2, 3


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench load-distance",
                                 description=__doc__.split("\n")[0])
    ap.add_argument("trace", help="a .kvt of `kvsim-cref trace load ...`")
    path = ap.parse_args(argv).trace
    with open_trace(path) as tr:
        tags = tr.header["tags"]
        markers = tr.header["markers"]
        recs = tr.read_all()
    mem = recs["kind"] != KIND_MARKER
    instr = np.cumsum(recs["gap"].astype(np.int64) + mem)
    bucket = tags.index("bucket")
    sel = np.flatnonzero(mem & (recs["tag"] == bucket))
    lines = recs["addr"][sel] >> 6
    is_pf = recs["kind"][sel] == KIND_PREFETCH
    k = np.flatnonzero(is_pf[:-1])
    same = lines[k + 1] == lines[k]
    dist = instr[sel[k + 1][same]] - instr[sel[k][same]]
    op = markers.index("op")
    ops = np.flatnonzero((recs["kind"] == KIND_MARKER) & (recs["flags"] == op))
    out = {
        "records": int(len(recs)),
        "instructions": int(instr[-1]) if len(instr) else 0,
        "keys": int(len(ops)),
        "instructions_per_key": float(np.median(np.diff(instr[ops]))) if len(ops) > 1 else None,
        "bucket_prefetches": int(is_pf.sum()),
        "prefetch_then_same_line": int(same.sum()),
    }
    if len(dist):
        out["distance_instructions"] = {
            "p10": float(np.percentile(dist, 10)),
            "median": float(np.median(dist)),
            "p90": float(np.percentile(dist, 90)),
        }
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
