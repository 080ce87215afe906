"""Damaged traces raise TraceError naming file, chunk and offset; never a shortened array."""

from __future__ import annotations

import io
import re
import struct
import zlib
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from trace_helpers import HEADER, random_records

from kvsim import traces

RECORDS = random_records(250, 3)


def _trace(codec: str = "zstd", chunk: int = 100, records: np.ndarray = RECORDS) -> bytes:
    buf = io.BytesIO()
    with traces.Writer(buf, HEADER, codec=codec, chunk_records=chunk) as w:
        w.write(records)
    return buf.getvalue()


GOOD = {c: _trace(c) for c in ("raw", "zstd")}
HEADER_LEN = 16 + int.from_bytes(GOOD["raw"][12:16], "little") + 4


def _read_fully(data: bytes) -> np.ndarray:
    """Consume like a streaming consumer would: iterate, then concatenate."""
    with traces.open(io.BytesIO(data)) as tr:
        parts = list(tr)
    return np.concatenate(parts) if parts else np.empty(0, traces.RECORD_DTYPE)


def _expect_error(data: bytes) -> traces.TraceError:
    with pytest.raises(traces.TraceError) as ei:
        _read_fully(data)
    msg = str(ei.value)
    assert "\n" not in msg
    assert re.search(r"(chunk \d+|header|end chunk|stream is empty).*byte \d+", msg), msg
    with pytest.raises(traces.TraceError):
        traces.read_all(io.BytesIO(data))
    return ei.value


@settings(max_examples=300, deadline=None)
@given(codec=st.sampled_from(["raw", "zstd"]), pos=st.integers(0, 10**9),
       xor=st.integers(1, 255))
def test_any_single_byte_flip_is_detected(codec: str, pos: int, xor: int) -> None:
    data = bytearray(GOOD[codec])
    data[pos % len(data)] ^= xor
    _expect_error(bytes(data))


@pytest.mark.parametrize("codec", ["raw", "zstd"])
def test_truncation_at_every_offset(codec: str) -> None:
    data = _trace(codec, 2, RECORDS[:5])
    for cut in range(len(data)):
        err = _expect_error(data[:cut])
        assert "truncated" in str(err) or cut < 8, (cut, str(err))


def test_trailing_bytes_rejected() -> None:
    err = _expect_error(GOOD["raw"] + b"\0")
    assert "bytes follow the end chunk" in str(err)


def test_crc_message_names_file_chunk_offset(tmp_path: Path) -> None:
    data = bytearray(GOOD["raw"])
    chunk1 = HEADER_LEN + 20 + 100 * 24
    data[chunk1 + 20 + 5] ^= 1
    p = tmp_path / "trace.kvt"
    p.write_bytes(bytes(data))
    with traces.open(p) as tr:
        it = iter(tr)
        first = next(it)  # chunk 0 is intact and delivered
        np.testing.assert_array_equal(first, RECORDS[:100])
        with pytest.raises(traces.TraceError) as ei:
            next(it)
    assert re.fullmatch(rf"{re.escape(str(p))}: chunk 1 at byte {chunk1}: crc32 mismatch "
                        r"\(stored 0x[0-9a-f]{8}, computed 0x[0-9a-f]{8}\)", str(ei.value))
    assert (ei.value.chunk, ei.value.offset) == (1, chunk1)


def test_header_crc_checked() -> None:
    data = bytearray(GOOD["zstd"])
    data[HEADER_LEN - 1] ^= 0x10  # the stored crc itself
    assert "header crc32 mismatch" in str(_expect_error(bytes(data)))
    data = bytearray(GOOD["zstd"])
    data[20] ^= 0x01  # inside the JSON
    assert "header crc32 mismatch" in str(_expect_error(bytes(data)))


def _with_header(version: int = 1, record_size: int = 24, body: bytes = b"{}") -> bytes:
    fixed = struct.pack("<8sHHI", b"KVTRACE\0", version, record_size, len(body))
    crc = zlib.crc32(fixed + body)
    end = struct.pack("<IIQ", 0x4E45564B, 0, 0)
    return fixed + body + crc.to_bytes(4, "little") + end


def test_header_field_errors() -> None:
    assert traces.read_all(io.BytesIO(_with_header())).size == 0
    for version in range(traces.MIN_VERSION, traces.VERSION + 1):
        assert traces.read_all(io.BytesIO(_with_header(version=version))).size == 0
    newer = traces.VERSION + 1
    assert f"unsupported format version {newer}" in str(
        _expect_error(_with_header(version=newer)))
    assert "unsupported format version 0" in str(_expect_error(_with_header(version=0)))
    assert "record size 32" in str(_expect_error(_with_header(record_size=32)))
    assert "not an object" in str(_expect_error(_with_header(body=b"[1]")))
    assert "does not parse" in str(_expect_error(_with_header(body=b"{")))
    assert "format_version" in str(_expect_error(_with_header(body=b'{"format_version":3}')))
    assert "format_version" in str(_expect_error(_with_header(version=3,
                                                              body=b'{"format_version":2}')))
    assert "format_version" in str(_expect_error(_with_header(body=b'{"format_version":2}')))
    assert "bad magic" in str(_expect_error(b"PK\x03\x04" + bytes(40)))
    assert "stream is empty" in str(_expect_error(b""))


def _chunk(records: np.ndarray, n: int | None = None, codec: int = 0, reserved: bytes = b"\0" * 3,
           payload: bytes | None = None) -> bytes:
    payload = records.tobytes() if payload is None else payload
    n = records.size if n is None else n
    return struct.pack("<IIIB3sI", 0x4B43564B, n, len(payload), codec, reserved,
                       zlib.crc32(payload)) + payload


def _stream(*chunks: bytes, n_chunks: int | None = None, total: int | None = None) -> bytes:
    head = _with_header()[:-16]
    n_chunks = len(chunks) if n_chunks is None else n_chunks
    if total is None:
        total = sum(int.from_bytes(c[4:8], "little") for c in chunks)
    return head + b"".join(chunks) + struct.pack("<IIQ", 0x4E45564B, n_chunks, total)


def test_chunk_field_errors() -> None:
    r = RECORDS[:4]
    assert _read_fully(_stream(_chunk(r))).size == 4
    assert "holds 0 records" in str(_expect_error(_stream(_chunk(r[:0]))))
    assert "stores 96 bytes (expected 120)" in str(_expect_error(_stream(_chunk(r, n=5))))
    assert "reserved" in str(_expect_error(_stream(_chunk(r, reserved=b"\0\1\0"))))
    assert "unknown codec 7" in str(_expect_error(_stream(_chunk(r, codec=7))))
    bad_zstd = _chunk(r, codec=1, payload=b"not zstd at all")
    assert "does not decompress" in str(_expect_error(_stream(bad_zstd)))
    import zstandard
    z = zstandard.ZstdCompressor().compress(r.tobytes())
    assert "decompresses to 96 bytes (expected 120)" in str(
        _expect_error(_stream(_chunk(r, n=5, codec=1, payload=z))))
    assert "one complete frame" in str(
        _expect_error(_stream(_chunk(r, codec=1, payload=z + z))))
    assert "end chunk counts 2 chunks" in str(_expect_error(_stream(_chunk(r), n_chunks=2)))
    assert "/ 5 records" in str(_expect_error(_stream(_chunk(r), total=5)))
    big = struct.pack("<IIIB3sI", 0x4B43564B, (1 << 22) + 1, 0, 0, b"\0\0\0", 0)
    assert "allowed 1..4194304" in str(_expect_error(_stream(big)))


def test_missing_end_chunk_message() -> None:
    data = GOOD["raw"][:-16]
    err = _expect_error(data)
    assert re.search(r"truncated: missing end chunk after chunk 2 \(stream ends at byte "
                     rf"{len(data)}\)", str(err)), str(err)
    err = _expect_error(_with_header()[:-16])
    assert "missing end chunk after the file header" in str(err)


def test_truncation_message_format(tmp_path: Path) -> None:
    data = GOOD["raw"]
    chunk1 = HEADER_LEN + 20 + 100 * 24
    p = tmp_path / "trace.kvt"
    p.write_bytes(data[:chunk1 + 7])
    with pytest.raises(traces.TraceError) as ei:
        traces.read_all(p)
    assert str(ei.value) == (f"{p}: truncated: stream ended inside chunk 1 header at byte "
                             f"{chunk1 + 7} (chunk 1 header starts at byte {chunk1})")
    p.write_bytes(data[:chunk1 + 30])
    with pytest.raises(traces.TraceError, match=r"inside chunk 1 payload at byte"):
        traces.read_all(p)


def test_text_stream_rejected() -> None:
    with pytest.raises(TypeError, match="binary"):
        traces.open(io.StringIO("KVTRACE"))


@pytest.mark.parametrize("codec", ["raw", "zstd"])
def test_every_byte_flip_of_a_small_file(codec: str) -> None:
    """Exhaustive complement to the Hypothesis test: flip each byte of a 6-chunk file."""
    data = _trace(codec, 7, RECORDS[:40])
    for pos in range(len(data)):
        damaged = bytearray(data)
        damaged[pos] ^= 0x81
        with pytest.raises(traces.TraceError):
            traces.read_all(io.BytesIO(bytes(damaged)))
