"""The compiled trace intake (sim/_intake.py, sim/_engine/decode.c) against the Python reader
(traces/reader.py, the reference): the same records from valid traces, and the same one-line
error, at the same place, from damaged ones (byte flips anywhere, truncation, broken records,
a zstd payload of another size); and sim.simulate's result through both decoders.
"""

from __future__ import annotations

import io
import struct
import zlib

import numpy as np
import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st
from trace_helpers import HEADER, random_records

from kvsim import sim, traces
from kvsim.sim import _intake
from kvsim.traces import planes

EDGE = {"addr": [0, 2**64 - 1, 2**64 - 16], "dep": [1, 2, 5, 2**32 - 1],
        "size": [0, 1, 2, 64], "kind": [0, 1, 2, 3, 4, 255], "tag": [0, 2, 3, 255],
        "site": [0, 1, 2, 65535], "flags": [0, 1, 4, 5, 6, 7, 65535]}


def _trace(records: np.ndarray, codec: str = "zstd", chunk: int = 100,
           header: dict | None = None) -> bytes:
    buf = io.BytesIO()
    with traces.Writer(buf, header or HEADER, codec=codec, chunk_records=chunk,
                       validate=False) as w:
        w.write(records)
    return buf.getvalue()


def _outcome(data: bytes, compiled: bool, workers: int = 2, reuse: bool = False,
             arrays: bool = True):
    """("ok", records) or ("error", message) of reading ``data`` to the end (``arrays``
    False: the intake's own buffers, what the engine runs, viewed as arrays here)."""
    try:
        with traces.open(io.BytesIO(data)) as tr:
            it = _intake.chunks(tr, workers=workers, ahead=2, reuse=reuse, arrays=arrays) \
                if compiled else tr
            parts = [(c if arrays else c.array()).copy() for c in it]
    except traces.TraceError as e:
        return "error", str(e)
    recs = np.concatenate(parts) if parts else np.empty(0, traces.RECORD_DTYPE)
    return "ok", recs.tobytes()


def _same(data: bytes, workers: int = 2, reuse: bool = False) -> tuple[str, object]:
    ref = _outcome(data, compiled=False)
    assert _outcome(data, compiled=True, workers=workers, reuse=reuse) == ref
    assert _outcome(data, compiled=True, workers=workers, reuse=reuse, arrays=False) == ref
    return ref


def test_crc32_is_zlibs() -> None:
    rng = np.random.default_rng(1)
    for n in (0, 1, 7, 8, 9, 63, 1000, 4097):
        data = rng.integers(0, 256, n, dtype=np.uint8).tobytes()
        assert _intake.crc32(data) == zlib.crc32(data)
        assert _intake.crc32(data, 12345) == zlib.crc32(data, 12345)


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 700), seed=st.integers(0, 2**32 - 1),
       codec=st.sampled_from(["raw", "zstd", "zstd_planes"]), chunk=st.integers(1, 300),
       workers=st.integers(1, 3), reuse=st.booleans())
def test_valid_traces_decode_alike(n, seed, codec, chunk, workers, reuse) -> None:
    kind, _ = _same(_trace(random_records(n, seed), codec, chunk), workers, reuse)
    assert kind == "ok"


@settings(max_examples=150, deadline=None)
@given(n=st.integers(1, 400), seed=st.integers(0, 2**32 - 1),
       damage=st.lists(st.tuples(st.integers(0, 399), st.sampled_from(sorted(EDGE)),
                                 st.integers(0, 6)), min_size=1, max_size=3),
       chunk=st.integers(1, 150), no_tables=st.booleans(),
       codec=st.sampled_from(["raw", "zstd", "zstd_planes"]))
def test_broken_records_same_error(n, seed, damage, chunk, no_tables, codec) -> None:
    rec = random_records(n, seed)
    for i, field, e in damage:
        vals = EDGE[field]
        rec[field][i % n] = vals[e % len(vals)]
    header = {k: v for k, v in HEADER.items() if not (no_tables and k in ("tags", "sites"))}
    _same(_trace(rec, codec, chunk, header))


def test_decode_then_check_as_a_library_without_the_fused_call(monkeypatch) -> None:
    """An engine library without kvsimDecodeChecked (ab.py --base) checks in a second call:
    the same records and the same errors."""
    real = _intake._Decoder.__init__

    def init(self, reader):
        real(self, reader)
        self._checked = False

    monkeypatch.setattr(_intake._Decoder, "__init__", init)
    for seed in range(4):
        rec = random_records(300, seed)
        rec["flags"][37 * seed + 5] = 1
        for codec in ("raw", "zstd_planes"):
            assert _same(_trace(rec, codec, 64))[0] == "error"
            assert _same(_trace(random_records(300, seed), codec, 64))[0] == "ok"


GOOD = {c: _trace(random_records(250, 3), c, 100) for c in ("raw", "zstd", "zstd_planes")}


@settings(max_examples=200, deadline=None)
@given(codec=st.sampled_from(["raw", "zstd", "zstd_planes"]), pos=st.integers(0, 10**9),
       xor=st.integers(1, 255))
def test_any_byte_flip_same_error(codec: str, pos: int, xor: int) -> None:
    data = bytearray(GOOD[codec])
    data[pos % len(data)] ^= xor
    kind, _ = _same(bytes(data))
    assert kind == "error"


@pytest.mark.parametrize("codec", ["raw", "zstd", "zstd_planes"])
def test_truncation_same_error(codec: str) -> None:
    data = _trace(random_records(5, 1), codec, 2)
    for cut in range(len(data)):
        _same(data[:cut])


def _one_zstd_chunk(payload: bytes, n: int, codec: int = traces.CODEC_ZSTD) -> bytes:
    """A trace whose single chunk claims n records and stores ``payload`` (a valid CRC)."""
    good = _trace(random_records(n, 2), "zstd", n)
    hlen = 16 + int.from_bytes(good[12:16], "little") + 4
    head = struct.pack("<IIIB3sI", traces.format.CHUNK_MAGIC, n, len(payload), codec,
                       b"\0\0\0", zlib.crc32(payload))
    end = struct.pack("<IIQ", traces.format.END_MAGIC, 1, n)
    return good[:hlen] + head + payload + end


@pytest.mark.parametrize("codec", [traces.CODEC_ZSTD, traces.CODEC_ZSTD_PLANES])
def test_zstd_payloads_the_decoder_refuses(codec: int) -> None:
    rec = random_records(10, 4)
    raw = rec.tobytes() if codec == traces.CODEC_ZSTD else planes.split(rec)
    cctx = zstandard.ZstdCompressor()
    cases = {
        "shorter content": cctx.compress(raw[:-24]),
        "two frames": cctx.compress(raw[:120]) + cctx.compress(raw[120:]),
        "trailing garbage": cctx.compress(raw) + b"\0\1",
        "no content size": zstandard.ZstdCompressor(write_content_size=False).compress(raw),
        "not zstd": b"\0" * 40,
    }
    for name, payload in cases.items():
        kind, got = _same(_one_zstd_chunk(payload, 10, codec))
        # the reader accepts a frame without its content size; the rest are refused
        assert kind == ("ok" if name == "no content size" else "error"), name
        if kind == "ok":
            assert got == rec.tobytes()


def test_stdin_like_stream_and_decoder_without_validation() -> None:
    data = _trace(random_records(300, 9), "zstd", 64)
    with traces.open(io.BytesIO(data), validate=False) as tr:
        got = np.concatenate([c.copy() for c in _intake.chunks(tr)])
    assert got.tobytes() == traces.read_all(io.BytesIO(data)).tobytes()


def test_simulate_through_both_decoders(tmp_path) -> None:
    rec = random_records(3000, 5)
    rec = rec[rec["kind"] != traces.KIND_MARKER]  # random markers: warm-up and phases aside
    rec["dep"] = 0
    rec["addr"] &= np.uint64((1 << 34) - 1)
    rec["size"] = np.where(rec["kind"] == traces.KIND_PREFETCH, 1, 8)
    p = tmp_path / "t.kvt"
    p.write_bytes(_trace(rec, "zstd", 256))
    for functional in (True, False):
        a = sim.simulate(str(p), "graviton3", functional=functional, decode="python")
        b = sim.simulate(str(p), "graviton3", functional=functional, decode="compiled")
        assert a == b


def test_dep_window_as_the_reader() -> None:
    """A dep of exactly traces.DEP_CHECK_WINDOW naming a store is refused, one reaching
    further back is not checked (FORMAT.md), across chunks, in both decoders."""
    w = traces.DEP_CHECK_WINDOW
    rec = np.zeros(w + 2, dtype=traces.RECORD_DTYPE)
    rec["size"], rec["kind"] = 8, traces.KIND_LOAD
    rec["kind"][0] = traces.KIND_STORE
    rec["dep"][w + 1] = w + 1
    assert _same(_trace(rec, "raw", 1 << 16))[0] == "ok"
    rec["dep"][w] = w
    kind, msg = _same(_trace(rec, "raw", 1 << 16))
    assert kind == "error" and f"dep {w} names trace record 0, which is not a load" in msg
