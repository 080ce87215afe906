"""The SYSCALL marker (version 4, FORMAT.md "System calls"): written and read back, counted
by the inspection, and bounded by the header's markers list like every marker type."""

from __future__ import annotations

import io

import numpy as np
import pytest
from trace_helpers import HEADER

from kvsim import traces
from kvsim.traces.validate import RecordValidator

SITES = ["none", *traces.SYSCALL_SITES]
NEW = dict(HEADER, sites=SITES, markers=list(traces.MARKER_NAMES))


def _syscalls(n: int) -> np.ndarray:
    r = np.zeros(n, dtype=traces.RECORD_DTYPE)
    r["kind"] = traces.KIND_MARKER
    r["flags"] = traces.MARK_SYSCALL
    r["site"] = 1 + np.arange(n) % traces.NUM_SYSCALLS
    r["addr"] = np.arange(n) * 37
    return r


def test_constants() -> None:
    assert traces.MARKER_NAMES[7] == "syscall" and traces.MARK_SYSCALL == 7
    # calls are added, never renumbered: a trace names them by site
    assert traces.SYSCALL_NAMES == ["read", "write", "epoll_wait", "file_read", "page_fault"]
    assert traces.SYSCALL_SITES == [f"sys.{n}" for n in traces.SYSCALL_NAMES]
    assert (traces.SYSCALL_FILE_READ, traces.SYSCALL_PAGE_FAULT) == (3, 4)
    assert traces.VERSION >= traces.SYSCALL_VERSION == 4


@pytest.mark.parametrize("codec", ["raw", "zstd", "zstd_planes"])
def test_roundtrip(codec: str) -> None:
    rec = _syscalls(50)
    buf = io.BytesIO()
    with traces.Writer(buf, NEW, codec=codec, chunk_records=16) as w:
        w.write(rec)
    buf.seek(0)
    with traces.open(buf) as tr:
        assert tr.header["markers"][traces.MARK_SYSCALL] == "syscall"
        back = np.concatenate(list(tr))
    assert back.tobytes() == rec.tobytes()
    s = traces.summarize(io.BytesIO(buf.getvalue()))
    assert s["markers"] == {"syscall": 50}


def test_validator_bounds_the_marker_by_the_header() -> None:
    rec = _syscalls(4)
    RecordValidator(NEW).check(rec)  # accepted
    old = dict(HEADER, sites=SITES)  # a version 1-3 producer's list: 7 marker types
    with pytest.raises(traces.validate.RecordError, match=r"unknown marker type \(known: 0..6\)"):
        RecordValidator(old).check(rec)
    bad = rec.copy()
    bad["flags"][2] = traces.NUM_MARKERS
    with pytest.raises(traces.validate.RecordError, match="flags"):
        RecordValidator(NEW).check(bad)
    bad = rec.copy()
    bad["size"][1] = 5  # a marker's size is 0 (its bytes are in addr)
    with pytest.raises(traces.validate.RecordError, match="size"):
        RecordValidator(NEW).check(bad)
    with pytest.raises(ValueError, match=r"record 0 would break the format: flags"):
        with traces.Writer(io.BytesIO(), old) as w:
            w.write(rec)
