"""Writer -> reader round trips, determinism, atomic path writes and recompress."""

from __future__ import annotations

import io
import os
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from trace_helpers import HEADER, random_records

from kvsim import traces


def _write_bytes(records: np.ndarray, codec: str = "zstd", chunk_records: int = 65536,
                 splits: list[int] | None = None, header: dict | None = None) -> bytes:
    buf = io.BytesIO()
    with traces.Writer(buf, header or HEADER, codec=codec, chunk_records=chunk_records) as w:
        for part in np.split(records, sorted(splits or [])):
            w.write(part)
    return buf.getvalue()


@settings(max_examples=60, deadline=None)
@given(n=st.integers(0, 3000), seed=st.integers(0, 2**32 - 1),
       codec=st.sampled_from(["raw", "zstd", "zstd_planes"]), chunk=st.integers(1, 1200),
       splits=st.lists(st.integers(0, 3000), max_size=4))
def test_roundtrip_hypothesis(n: int, seed: int, codec: str, chunk: int,
                              splits: list[int]) -> None:
    records = random_records(n, seed)
    data = _write_bytes(records, codec, chunk, [s for s in splits if s <= n])
    with traces.open(io.BytesIO(data)) as tr:
        assert tr.header == {**HEADER, "format_version": traces.VERSION, "chunk_records": chunk}
        chunks = list(tr)
        assert tr.complete
        assert [c.size for c in chunks] == [min(chunk, n - i) for i in range(0, n, chunk)]
        assert all(c.dtype == traces.RECORD_DTYPE for c in chunks)
        assert set(tr.codecs) <= {codec}
    out = traces.read_all(io.BytesIO(data))
    assert out.dtype == traces.RECORD_DTYPE
    np.testing.assert_array_equal(out, records)


def test_empty_trace_roundtrip(tmp_path: Path) -> None:
    p = tmp_path / "empty.kvt"
    with traces.Writer(p, HEADER):
        pass
    assert p.stat().st_size > 16
    out = traces.read_all(p)
    assert out.size == 0 and out.dtype == traces.RECORD_DTYPE


def test_deterministic_bytes_independent_of_write_splits() -> None:
    records = random_records(5000, 7)
    a = _write_bytes(records, "zstd", 1000)
    b = _write_bytes(records, "zstd", 1000, splits=[1, 999, 1000, 2500])
    c = _write_bytes(records.copy(), "zstd", 1000)
    assert a == b == c
    assert _write_bytes(records, "raw", 1000) == _write_bytes(records, "raw", 1000, [3, 4])


def test_header_is_canonical_json() -> None:
    data = _write_bytes(random_records(3), header={"z": 1, "a": {"y": [1, 2], "b": None}})
    json_len = int.from_bytes(data[12:16], "little")
    assert data[16:16 + json_len] == \
        b'{"a":{"b":null,"y":[1,2]},"chunk_records":65536,"format_version":%d,"z":1}' \
        % traces.VERSION


def test_header_format_version_mismatch_rejected() -> None:
    with pytest.raises(ValueError):
        traces.Writer(io.BytesIO(), {"format_version": 1})
    with pytest.raises(ValueError, match="format_version"):
        traces.Writer(io.BytesIO(), {"format_version": 2}, codec="zstd", version=1)
    with pytest.raises(ValueError, match=f"writers write 1..{traces.VERSION}"):
        traces.Writer(io.BytesIO(), {}, version=traces.VERSION + 1)
    with pytest.raises(ValueError, match="needs format version 2"):
        traces.Writer(io.BytesIO(), {}, version=1)  # the default codec is zstd_planes
    w = traces.Writer(io.BytesIO(), {}, codec="zstd", version=1)
    with pytest.raises(ValueError, match="needs format version 2"):
        w.write_chunk(random_records(3), traces.CODEC_ZSTD_PLANES)
    w.close()


@pytest.mark.parametrize("codec", ["raw", "zstd"])
def test_version_1_written_and_read(codec: str) -> None:
    records = random_records(300, 4)
    buf = io.BytesIO()
    with traces.Writer(buf, HEADER, codec=codec, chunk_records=100, version=1) as w:
        w.write(records)
    data = buf.getvalue()
    assert data[8:10] == (1).to_bytes(2, "little")
    with traces.open(io.BytesIO(data)) as tr:
        np.testing.assert_array_equal(tr.read_all(), records)
        assert tr.version == 1 and tr.header["format_version"] == 1
    # recompressed: the newest version, planes by default, the same records
    out = io.BytesIO()
    traces.recompress(io.BytesIO(data), out)
    with traces.open(io.BytesIO(out.getvalue())) as tr:
        np.testing.assert_array_equal(tr.read_all(), records)
        assert tr.version == traces.VERSION and tr.codecs == {"zstd_planes": 3}


def test_planes_codec_in_a_version_1_trace_is_refused() -> None:
    buf = io.BytesIO()
    with traces.Writer(buf, HEADER, codec="zstd", version=1) as w:
        w.write(random_records(10))
    data = bytearray(buf.getvalue())
    head = 16 + int.from_bytes(data[12:16], "little") + 4
    data[head + 12] = traces.CODEC_ZSTD_PLANES  # the first chunk's codec byte
    with pytest.raises(traces.TraceError,
                       match=r"chunk 0 at byte \d+: codec 2 \(zstd_planes\) in a version 1"):
        traces.read_all(io.BytesIO(bytes(data)))


def test_write_accepts_reordered_fields_by_name() -> None:
    records = random_records(100, 3)
    names = list(traces.RECORD_DTYPE.names)[::-1]
    other = np.zeros(100, dtype=[(n, ">u8") for n in names])
    for n in names:
        other[n] = records[n]
    out = traces.read_all(io.BytesIO(_write_bytes(other)))
    np.testing.assert_array_equal(out, records)
    with pytest.raises(TypeError):
        traces.Writer(io.BytesIO(), HEADER).write(np.zeros(3, dtype=np.uint64))


def test_path_write_is_atomic(tmp_path: Path) -> None:
    p = tmp_path / "t.kvt"
    p.write_bytes(b"old contents")
    with pytest.raises(RuntimeError), traces.Writer(p, HEADER, chunk_records=10) as w:
        w.write(random_records(100))
        assert p.read_bytes() == b"old contents"  # nothing visible until close
        raise RuntimeError("producer failed")
    assert p.read_bytes() == b"old contents"
    assert sorted(os.listdir(tmp_path)) == ["t.kvt"]  # temp file removed
    with traces.Writer(p, HEADER, chunk_records=10) as w:
        w.write(random_records(100))
    assert sorted(os.listdir(tmp_path)) == ["t.kvt"]
    np.testing.assert_array_equal(traces.read_all(p), random_records(100))
    np.testing.assert_array_equal(traces.read_all(str(p)), random_records(100))


def test_write_after_close_raises() -> None:
    w = traces.Writer(io.BytesIO(), HEADER)
    w.close()
    w.close()  # idempotent
    with pytest.raises(ValueError):
        w.write(random_records(1))


@pytest.mark.parametrize("src_codec", ["raw", "zstd", "zstd_planes"])
@pytest.mark.parametrize("dst_codec", ["raw", "zstd", "zstd_planes"])
def test_recompress(tmp_path: Path, src_codec: str, dst_codec: str) -> None:
    records = random_records(2500, 11)
    src = tmp_path / "src.kvt"
    src.write_bytes(_write_bytes(records, src_codec, 1000))
    dst = tmp_path / "dst.kvt"
    stats = traces.recompress(src, dst, codec=dst_codec)
    assert stats == {"chunks": 3, "records": 2500}
    assert dst.read_bytes() == _write_bytes(records, dst_codec, 1000)
    with open(src, "rb") as f:  # from a stream too
        traces.recompress(f, tmp_path / "dst2.kvt", codec=dst_codec)
    assert (tmp_path / "dst2.kvt").read_bytes() == dst.read_bytes()
    traces.recompress(src, tmp_path / "dst3.kvt", codec=dst_codec, chunk_records=700)
    assert (tmp_path / "dst3.kvt").read_bytes() == _write_bytes(records, dst_codec, 700)


def test_header_accepts_numpy_values() -> None:
    data = _write_bytes(random_records(1), header={"n": np.int64(3), "a": np.arange(2),
                                                   "f": np.float32(0.5), "b": np.bool_(True)})
    with traces.open(io.BytesIO(data)) as tr:
        assert tr.header["n"] == 3 and tr.header["a"] == [0, 1] and tr.header["b"] is True
    with pytest.raises(TypeError):
        traces.Writer(io.BytesIO(), {"x": object()})


def test_recompress_bad_input_leaves_no_file(tmp_path: Path) -> None:
    data = bytearray(_write_bytes(random_records(2500, 11), "raw", 1000))
    data[-100] ^= 0xFF  # inside the last chunk payload
    src = tmp_path / "src.kvt"
    src.write_bytes(bytes(data))
    dst = tmp_path / "dst.kvt"
    with pytest.raises(traces.TraceError, match="chunk 2 at byte .*crc32 mismatch"):
        traces.recompress(src, dst)
    assert sorted(os.listdir(tmp_path)) == ["src.kvt"]
    src.write_bytes(bytes(data[:-30]))  # truncated
    with pytest.raises(traces.TraceError, match="truncated"):
        traces.recompress(src, dst)
    assert sorted(os.listdir(tmp_path)) == ["src.kvt"]


def test_mixed_codec_chunks_readable() -> None:
    records = random_records(30, 2)
    buf = io.BytesIO()
    with traces.Writer(buf, HEADER) as w:
        w.write_chunk(records[:10], traces.CODEC_RAW)
        w.write_chunk(records[10:20], traces.CODEC_ZSTD)
        w.write_chunk(records[20:25], traces.CODEC_ZSTD_PLANES)
        w.write_chunk(records[25:], traces.CODEC_RAW)
    with traces.open(io.BytesIO(buf.getvalue())) as tr:
        np.testing.assert_array_equal(tr.read_all(), records)
        assert tr.codecs == {"raw": 2, "zstd": 1, "zstd_planes": 1}


def test_chunks_are_read_only_and_read_all_is_writable() -> None:
    data = _write_bytes(random_records(10), "raw")
    with traces.open(io.BytesIO(data)) as tr:
        (chunk,) = list(tr)
    assert not chunk.flags.writeable
    out = traces.read_all(io.BytesIO(data))
    out["addr"][0] = 1  # read_all returns its own array


@pytest.mark.slow
@pytest.mark.parametrize("codec", ["raw", "zstd", "zstd_planes"])
def test_largest_chunk_roundtrip(tmp_path: Path, codec: str) -> None:
    n = traces.MAX_CHUNK_RECORDS
    records = random_records(n + 5, 9)
    p = tmp_path / "big.kvt"
    with traces.Writer(p, HEADER, codec=codec, chunk_records=n) as w:
        w.write(records)
    with traces.open(p) as tr:
        sizes = [c.size for c in tr]
    assert sizes == [n, 5]
    np.testing.assert_array_equal(traces.read_all(p), records)


def test_unclosed_writer_leaves_nothing(tmp_path: Path) -> None:
    w = traces.Writer(tmp_path / "t.kvt", HEADER)
    w.write(random_records(10))
    with pytest.warns(ResourceWarning, match="never closed"):
        del w
        import gc

        gc.collect()
    assert os.listdir(tmp_path) == []


@settings(max_examples=25, deadline=None)
@given(n=st.integers(2, 3000), chunk=st.integers(1, 400), threads=st.integers(2, 5),
       mixed=st.booleans())
def test_threads_write_the_same_bytes(n: int, chunk: int, threads: int, mixed: bool) -> None:
    """Chunks compressed on several threads are those of one thread, in the same order."""
    records = random_records(n, 7)

    def write(t: int) -> bytes:
        buf = io.BytesIO()
        with traces.Writer(buf, HEADER, chunk_records=chunk, threads=t, validate=not mixed) as w:
            if mixed:  # a raw chunk between compressed ones, written in its turn
                w.write_chunk(records[: n // 2], traces.CODEC_ZSTD)
                w.write_chunk(records[n // 2: n // 2 + 1], traces.CODEC_RAW)
            w.write(records)
        return buf.getvalue()

    one = write(1)
    assert write(threads) == one
    with traces.open(io.BytesIO(one), validate=False) as tr:
        np.testing.assert_array_equal(tr.read_all()[-n:], records)


def test_threads_abort_leaves_nothing(tmp_path: Path) -> None:
    dst = tmp_path / "t.kvt"
    with pytest.raises(RuntimeError), traces.Writer(dst, HEADER, chunk_records=10,
                                                    threads=3) as w:
        w.write(random_records(500, 1))
        raise RuntimeError("stop")
    assert not dst.exists() and os.listdir(tmp_path) == []
    with pytest.raises(ValueError, match="threads must be >= 1"):
        traces.Writer(io.BytesIO(), HEADER, threads=0)
