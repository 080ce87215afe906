"""DynamoRIO drmemtrace import: vectors built from trace_entry_t's documented layout
(DynamoRIO clients/drcachesim/common/trace_entry.h: u16 type, u16 size, u64 addr, packed)."""

from __future__ import annotations

import gzip
import struct
import zipfile
from pathlib import Path

import numpy as np
import pytest

from kvsim import traces
from kvsim.traces.convert import convert, detect_format
from kvsim.traces.convert.drmemtrace import (
    ENTRY_DTYPE,
    DrmemtraceError,
    drmemtrace_to_records,
)

# trace_type_t positions used below
READ, WRITE, PREFETCHT0, PREFETCH_INSTR, INSTR, TAKEN_JUMP = 0, 1, 3, 9, 10, 48
BUNDLE, THREAD, PID, HEADER, FOOTER, MARKER, ENCODING, HW_PF = 17, 22, 24, 25, 26, 28, 47, 27


def entry(t: int, size: int, addr: int) -> bytes:
    return struct.pack("<HHQ", t, size, addr)


def thread_vector(tid: int = 7, base: int = 0x1000) -> list[bytes]:
    """One thread: 3 instructions, a load; a jump with a store; a bundle of 4 and a
    prefetch; an instruction with two loads; an instruction prefetch; 2 trailing instrs."""
    return [
        entry(HEADER, 0, 6), entry(THREAD, 4, tid), entry(PID, 4, 99),
        entry(MARKER, 12, 6), entry(MARKER, 18, 4096),
        entry(ENCODING, 3, 0xC08548), entry(INSTR, 3, 0x400000),
        entry(INSTR, 2, 0x400003), entry(INSTR, 4, 0x400005),
        entry(READ, 8, base),                                  # gap 2
        entry(TAKEN_JUMP, 2, 0x400009), entry(WRITE, 4, base + 64),   # gap 0
        entry(BUNDLE, 4, 0), entry(INSTR, 5, 0x40000B),
        entry(PREFETCHT0, 1, base + 128),                      # bundle's 4 -> gap 4
        entry(INSTR, 7, 0x400010), entry(READ, 16, base + 192),  # gap 0
        entry(READ, 0, base + 256),                             # same instruction: gap 0
        entry(PREFETCH_INSTR, 64, 0x400040), entry(HW_PF, 64, base + 512),
        entry(INSTR, 1, 0x400017), entry(INSTR, 1, 0x400018),
        entry(FOOTER, 0, 0),
    ]


EXPECTED = [  # addr, gap, size, kind
    (0x1000, 2, 8, traces.KIND_LOAD), (0x1040, 0, 4, traces.KIND_STORE),
    (0x1080, 4, 1, traces.KIND_PREFETCH), (0x10C0, 0, 16, traces.KIND_LOAD),
    (0x1100, 0, 1, traces.KIND_LOAD),
]


def _check(rec: np.ndarray) -> None:
    got = list(zip(rec["addr"].tolist(), rec["gap"].tolist(), rec["size"].tolist(),
                   rec["kind"].tolist(), strict=True))
    assert got == EXPECTED
    assert not rec["dep"].any() and not rec["tag"].any()


def test_entry_layout_is_twelve_packed_bytes() -> None:
    assert ENTRY_DTYPE.itemsize == 12 and [ENTRY_DTYPE.fields[f][1] for f in
                                          ("type", "size", "addr")] == [0, 2, 4]


def test_gz_vector(tmp_path: Path) -> None:
    p = tmp_path / "t.trace.gz"
    p.write_bytes(gzip.compress(b"".join(thread_vector())))
    stats: dict = {}
    _check(np.concatenate(list(drmemtrace_to_records(p, stats))))
    assert stats["version"] == 6 and stats["dropped"] == 2
    assert stats["threads"] == {"7": {"records": 5, "loads": 3, "stores": 1, "prefetches": 1,
                                      "instructions": 12}}


def test_zip_members_in_chunk_order_and_small_reads(tmp_path: Path) -> None:
    data = b"".join(thread_vector())
    p = tmp_path / "t.trace.zip"
    with zipfile.ZipFile(p, "w", zipfile.ZIP_DEFLATED) as z:
        # members out of order in the archive; chunk.0010 sorts after chunk.0002
        z.writestr("chunk.0010", data[12 * 15:])
        z.writestr("chunk.0002", data[:12 * 15])
    from kvsim.traces.convert import drmemtrace as dm

    st = dm._State()
    parts = [dm.entries_to_records(e, st) for e in dm.iter_entries(p, chunk_entries=4)]
    _check(np.concatenate(parts))
    _check(np.concatenate(list(drmemtrace_to_records(p))))


def test_threads_interleaved_in_file_order(tmp_path: Path) -> None:
    a, b = thread_vector(7, 0x1000), thread_vector(8, 0x9000)
    mixed = a[:10] + [entry(THREAD, 4, 8)] + b[5:10] + [entry(THREAD, 4, 7)] + a[10:]
    p = tmp_path / "m.trace.gz"
    p.write_bytes(gzip.compress(b"".join(mixed)))
    stats: dict = {}
    rec = np.concatenate(list(drmemtrace_to_records(p, stats)))
    assert rec["addr"].tolist()[:2] == [0x1000, 0x9000]
    assert stats["threads"]["8"]["loads"] == 1 and stats["threads"]["7"]["records"] == 5


def test_convert_detects_content_and_writes_kvt(tmp_path: Path) -> None:
    p = tmp_path / "no-name"
    p.write_bytes(gzip.compress(b"".join(thread_vector())))
    assert detect_format(p.read_bytes()) == "drmemtrace"
    convert(str(p), str(tmp_path / "o.kvt"))
    rec = traces.read_all(tmp_path / "o.kvt")
    _check(rec)
    assert traces.open(tmp_path / "o.kvt").header["workload"]["name"] == \
        "converted from drmemtrace"


@pytest.mark.parametrize("container", ["zip", "gz"])
def test_open_records_streams_what_convert_writes(container: str, tmp_path: Path) -> None:
    """`kvsim simulate`'s reader (traces.convert.open_records) of a drmemtrace file, a zip
    archive (read by member) or a gzip stream, named without an ending: the records and
    header convert writes to a kvt."""
    from kvsim.traces.convert import open_records

    data = b"".join(thread_vector())
    p = tmp_path / "no-name"
    if container == "zip":
        with zipfile.ZipFile(p, "w", zipfile.ZIP_DEFLATED) as z:
            z.writestr("chunk.0000", data)
    else:
        p.write_bytes(gzip.compress(data))
    convert(str(p), str(tmp_path / "o.kvt"))
    with open_records(str(p)) as r:
        assert r.format == "drmemtrace"
        got = np.concatenate(list(r))
        header = r.header
    np.testing.assert_array_equal(got, traces.read_all(tmp_path / "o.kvt"))
    with traces.open(tmp_path / "o.kvt") as kvt:
        assert header["workload"] == kvt.header["workload"]


@pytest.mark.parametrize("damage", ["no-header", "unknown-type", "truncated", "empty"])
def test_bad_files(damage: str, tmp_path: Path) -> None:
    data = b"".join(thread_vector())
    if damage == "no-header":
        data = data[12:]
    elif damage == "unknown-type":
        data = data[:12 * 6] + entry(999, 0, 0) + data[12 * 6:]
    elif damage == "truncated":
        data = data[:-5]
    else:
        data = b""
    p = tmp_path / "t.trace.gz"
    p.write_bytes(gzip.compress(data))
    with pytest.raises(DrmemtraceError, match="t.trace.gz"):
        list(drmemtrace_to_records(p))
