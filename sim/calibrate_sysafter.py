"""Does a system call slow down the user code after it?  ``kvsim-calibrate sysafter``
(sim/_calibrate/sysafter.c) times a user segment -- a dependent chase over a working set of
LINES cache lines with a fixed instruction mix per line, the lines either consecutive
(``dense``: the caches) or one per 4 KiB page (``pages``: the TLB) -- back to back
(``none``), after a ``getppid`` (the cheapest kernel entry and exit) and after a 64-byte
``write`` + ``read`` on TCP loopback (a server's calls), the arms interleaved per round.

:func:`after_effect` gives, per working set and call, the extra ns of the segment after the
call: the median over rounds of the paired difference (arm minus ``none`` in the same
round), its 95 % interval (:func:`kvsim.stats.median_ci95`) and the minimum.  A cost that
stays flat as LINES grows is the pipeline's or the predictors'; one that grows with the
lines of ``dense`` is cache lines evicted, with the pages of ``pages`` TLB entries.
Nothing here is fitted to a prediction or a validation row.
"""

from __future__ import annotations

import statistics

#: working sets (lines): 64 B .. 256 KiB dense, 1 .. 4096 pages
LINES = (1, 16, 64, 256, 1024, 4096)
ARMS = ("none", "getppid", "loopback")
CALLS = ARMS[1:]
ITERS = {"quick": 2000, "full": 10000}
ROUNDS = {"quick": 7, "full": 15}


def measure(quick: bool, lines: tuple[int, ...] = LINES, rounds: int | None = None,
            iters: int | None = None) -> dict:
    """One ``kvsim-calibrate sysafter`` run (all arms and sets interleaved inside it)."""
    from .calibrate import run_bench

    mode = "quick" if quick else "full"
    return run_bench("sysafter", iters or ITERS[mode], rounds or ROUNDS[mode], *lines)


def after_effect(raw: dict) -> list[dict]:
    """Per (lines, layout): the segment's median ns alone and, per call, the extra ns after
    it (``median``, ``ci95`` or None with too few rounds, ``min``) and ``within_noise`` (the
    interval includes 0); the getrusage user ns per iteration of each arm (median)."""
    from kvsim.stats import median_ci95

    out = []
    for s in raw["sets"]:
        base = s["none_segment_ns"]
        row: dict = {"lines": s["lines"], "layout": s["layout"],
                     "bytes": s["lines"] * (64 if s["layout"] == "dense" else 4096),
                     "segment_ns": statistics.median(base),
                     "user_ns_per_iter": {a: statistics.median(s[f"{a}_user_ns"])
                                          for a in ARMS}}
        for c in CALLS:
            d = [x - y for x, y in zip(s[f"{c}_segment_ns"], base, strict=True)]
            ci = median_ci95(d)
            row[c] = {"median": statistics.median(d), "ci95": list(ci[:2]) if ci else None,
                      "min": min(d), "within_noise": ci is None or ci[0] <= 0 <= ci[1]}
        out.append(row)
    return out
