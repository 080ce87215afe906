"""The measured region of a trace cut at its ``COMMAND`` markers.

A traced server's trace holds everything it did: the load, the benchmark's requests and the
checks its driver sends after them. :func:`measured_trace` bounds the requests with warm-up
markers (traces/FORMAT.md, "The setup's warm-up") by turning two ``COMMAND`` markers into
``WARMUP_END`` and ``WARMUP_BEGIN``: no record moves, so every dependency stays right.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from kvsim import traces


def measured_trace(src: Path, dst: Path, requests: int, after: int = 2) -> dict[str, int]:
    """Write ``src`` to ``dst`` with the measured region bounded by warm-up markers: the
    last ``requests + after`` COMMAND markers but ``after`` (the checks the driver sends
    after the benchmark) are measured, everything else is warm-up. The first measured
    command's marker becomes WARMUP_END and the first check's WARMUP_BEGIN."""
    with traces.open(src) as tr:
        header = dict(tr.header)
        n = sum(int(np.count_nonzero((c["kind"] == traces.KIND_MARKER)
                                     & (c["flags"] == traces.MARK_COMMAND))) for c in tr)
    first, last = n - requests - after, n - after
    if first < 0:
        raise ValueError(f"{src}: {n} commands, fewer than the {requests} requests measured")

    seen = 0
    with traces.open(src) as tr, traces.Writer(dst, header, codec="zstd") as w:
        # at the start: every dep keeps its record
        w.write(traces.marker_record(traces.MARK_WARMUP_BEGIN))
        for c in tr:
            cmd = np.flatnonzero((c["kind"] == traces.KIND_MARKER)
                                 & (c["flags"] == traces.MARK_COMMAND))
            c = c.copy()
            for target, m in ((first, traces.MARK_WARMUP_END), (last, traces.MARK_WARMUP_BEGIN)):
                if seen <= target < seen + cmd.size:
                    # the command's own marker becomes the boundary: no record moves, so
                    # every dep (which names a load, never a marker) stays right
                    c["flags"][cmd[target - seen]] = m
            w.write(c)
            seen += cmd.size
    return {"commands": n, "measured_commands": last - first}
