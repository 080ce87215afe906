"""traces.work: instructions by kind of work, by hand on a tiny trace."""

from __future__ import annotations

import numpy as np

from kvsim import traces
from kvsim.traces import format as fmt
from kvsim.traces.work import instructions_by_kind


def _rec(kind, addr=0, gap=0, site=0, flags=0, size=0):
    r = np.zeros(1, dtype=traces.RECORD_DTYPE)
    r["kind"], r["addr"], r["gap"], r["site"], r["flags"] = kind, addr, gap, site, flags
    r["size"] = size or (8 if kind != traces.KIND_MARKER else 0)
    return r


def _work(kind: str, n: int):
    k = fmt.WORK_NAMES.index(kind)
    return _rec(traces.KIND_MARKER, (k << fmt.WORK_COUNT_BITS) | n, flags=fmt.MARK_WORK)


def test_markers_name_part_of_the_next_gap_the_site_the_rest():
    header = {"site_kinds": [0, fmt.WORK_NAMES.index("parse")], "work_kinds": fmt.WORK_NAMES}
    recs = np.concatenate([
        _rec(traces.KIND_MARKER, flags=fmt.MARK_WARMUP_BEGIN),
        _work("hash", 50), _rec(0, 64, gap=60, site=0),             # warm-up: not counted
        _rec(traces.KIND_MARKER, flags=fmt.MARK_WARMUP_END),
        _work("hash", 30), _work("compare", 5), _rec(0, 64, gap=40, site=1),
        _rec(1, 128, gap=9, site=0),
    ])
    got = instructions_by_kind(header, recs)
    assert got["hash"] == 30 and got["compare"] == 5
    assert got["parse"] == 41 - 35 and got["generic"] == 10
    assert sum(got.values()) == 41 + 10
    # an older trace (no site_kinds): every site generic
    old = instructions_by_kind({}, recs)
    assert old["parse"] == 0 and old["generic"] == 41 - 35 + 10
