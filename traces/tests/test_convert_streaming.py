"""Streaming conversion: parallel gzip, numpy packet encoding, bounded ChampSim pieces,
content detection, the huge-output warning."""

from __future__ import annotations

import gzip
import io
import lzma
from pathlib import Path

import numpy as np
import pytest
from trace_helpers import random_records

from kvsim import traces
from kvsim.traces.convert import _io, convert, detect_format, gem5
from kvsim.traces.convert import champsim as cs

DATA = Path(__file__).parent / "data"


def _blob(n: int, seed: int = 0) -> bytes:
    rng = np.random.default_rng(seed)  # half random, half repetitive: both deflate paths
    return (rng.integers(0, 256, n // 2, dtype=np.uint8).tobytes() + b"kvsim " * (n // 12))


@pytest.mark.parametrize("threads", [1, 3])
def test_parallel_gzip_is_valid_and_independent_of_threads(threads: int) -> None:
    data = _blob(300_000)
    outs = []
    for t in (threads, 1):
        buf = io.BytesIO()
        g = _io.ParallelGzip(buf, level=6, threads=t, block=50_000)
        for i in range(0, len(data), 7777):  # write sizes unrelated to the block size
            g.write(data[i:i + 7777])
        g.close()
        outs.append(buf.getvalue())
    assert outs[0] == outs[1]
    assert gzip.decompress(outs[0]) == data


def test_parallel_gzip_one_block_equals_gzip_n() -> None:
    data = (DATA / "gem5_packet_trace.trc").read_bytes()
    buf = io.BytesIO()
    g = _io.ParallelGzip(buf, level=9)
    g.write(data)
    g.close()
    assert buf.getvalue() == gem5.gzip_bytes(data) == (DATA / "gem5_packet_trace.trc.gz"
                                                       ).read_bytes()


@pytest.mark.parametrize("kind", ["gz", "xz", "bz2", None])
def test_open_output_then_open_input(kind: str | None, tmp_path: Path) -> None:
    data = _blob(100_000, 1)
    p = tmp_path / "x.bin"
    with open(p, "wb") as raw:
        out = _io.open_output(raw, kind)
        out.write(data)
        if out is not raw:
            out.close()
    assert _io.sniff(p.read_bytes()[:6]) == kind
    with _io.open_input(str(p)) as f:
        assert f.read() == data


def test_xz_without_the_program_falls_back_to_lzma(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_io, "_XZ", None)
    buf = io.BytesIO()
    out = _io.open_output(buf, "xz")
    assert isinstance(out, lzma.LZMAFile)
    out.write(b"abc" * 1000)
    out.close()
    assert lzma.decompress(buf.getvalue()) == b"abc" * 1000


@pytest.mark.parametrize("backend", ["builtin", "protobuf"])
def test_numpy_packet_encoding_equals_messages(backend: str) -> None:
    rec = random_records(3000, 11)
    rec["size"][rec["kind"] < 2] = np.minimum(rec["size"][rec["kind"] < 2], 300)
    rec["gap"] %= 1000
    cols, _ = gem5.records_to_packet_columns(rec, 5, 64, 333)
    packets = list(gem5.records_to_packets(rec, 64, 333))
    assert len(packets) == cols["addr"].size > 3000 // 4
    expected = gem5.encode({"obj_id": "x", "tick_freq": 10**12}, [
        {**p, "tick": p["tick"] + 5 * 333} for p in packets], backend)
    header_len = len(gem5.encode({"obj_id": "x", "tick_freq": 10**12}, [], backend))
    assert gem5.encode_packet_columns(cols) == expected[header_len:]


def test_gem5_reader_streams_in_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gem5, "_READ_BLOCK", 7)  # every message straddles a block boundary
    for name in ("gem5_packet_trace.trc", "gem5_packet_trace.trc.gz",
                 "gem5_packet_trace_probe_style.trc.gz"):
        whole = gem5.decode((DATA / name).read_bytes())
        header, it = gem5.iter_packets(DATA / name)
        assert (header, list(it)) == whole


def test_champsim_pieces_stay_bounded_for_huge_gaps() -> None:
    rec = np.zeros(3, dtype=traces.RECORD_DTYPE)
    rec["addr"], rec["size"], rec["kind"] = [64, 128, 192], 8, [0, 1, 0]
    rec["gap"] = [5, 3 * cs._PIECE + 17, 0]
    state = cs._State()
    ins, fill = cs._memory_instructions(rec, state, "load")
    pieces = list(cs._expand(ins, fill))
    assert max(p.size for p in pieces) <= cs._PIECE + 1
    flat = np.concatenate(pieces)
    mem = np.flatnonzero(flat["ip"] != cs.FILLER_IP)
    assert mem.tolist() == [5, 5 + 1 + 3 * cs._PIECE + 17, 5 + 1 + 3 * cs._PIECE + 17 + 1]
    buf = io.BytesIO()
    cs.records_to_champsim(rec, buf)
    assert buf.getvalue() == flat.tobytes()


def _bytes_of(fmt: str, tmp_path: Path) -> Path:
    rec = random_records(200, 3)
    rec = rec[rec["kind"] < 2]
    rec["size"] = 8
    rec["addr"] = (rec["addr"] % (1 << 40)) // 64 * 64 + 64
    rec["dep"] = 0
    rec["gap"] %= 50
    src = tmp_path / "r.kvt"
    with traces.Writer(src, {}) as w:
        w.write(rec)
    ending = {"kvt": ".kvt", "dinero": ".din", "lackey": ".lackey", "gem5": ".trc.gz",
              "champsim": ".champsimtrace.xz", "champsim-raw": ".champsimtrace",
              "champsim-gz": ".champsimtrace.gz"}[fmt]
    out = tmp_path / f"o{ending}"
    convert(str(src), str(out))
    return out


@pytest.mark.parametrize("fmt", ["kvt", "dinero", "lackey", "gem5", "champsim",
                                 "champsim-raw", "champsim-gz"])
def test_detect_format_by_content(fmt: str, tmp_path: Path) -> None:
    out = _bytes_of(fmt, tmp_path)
    renamed = out.with_name("no-ending")
    out.rename(renamed)
    assert detect_format(renamed.read_bytes()[:4096]) == fmt.split("-")[0]
    back = tmp_path / "back.kvt"
    convert(str(renamed), str(back))  # no --from, no telling name
    assert traces.read_all(back).size > 0


def test_detect_format_refuses_other_bytes() -> None:
    assert detect_format(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4) is None
    assert detect_format(b"hello world\nthis is text\n") is None


@pytest.mark.parametrize("ending,warned", [(".champsimtrace", True),
                                           (".champsimtrace.xz", False), (".din", True),
                                           (".din.gz", False), (".trc", True)])
def test_one_warning_before_a_huge_uncompressed_output(ending: str, warned: bool,
                                                       tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch
                                                       ) -> None:
    import kvsim.traces.convert as conv

    monkeypatch.setattr(conv, "HUGE_OUTPUT", 1000)
    rec = np.zeros(40_000, dtype=traces.RECORD_DTYPE)
    rec["addr"], rec["size"], rec["gap"] = np.arange(40_000) * 64 + 64, 8, 3
    src = tmp_path / "r.kvt"
    with traces.Writer(src, {}, chunk_records=1000) as w:
        w.write(rec)
    said: list[str] = []
    convert(str(src), str(tmp_path / f"o{ending}"), warn=said.append)
    assert len(said) == (1 if warned else 0)
    if warned:
        assert "uncompressed" in said[0] and conv.PREFERRED[conv.guess_format(ending)] in said[0]
        assert "\n" not in said[0]


def test_text_outputs_compress_and_read_back(tmp_path: Path) -> None:
    din = DATA / "small_mixed_trace.din"
    convert(str(din), str(tmp_path / "a.kvt"))
    convert(str(tmp_path / "a.kvt"), str(tmp_path / "b.din.gz"))
    assert gzip.decompress((tmp_path / "b.din.gz").read_bytes()) == din.read_bytes()
    convert(str(tmp_path / "b.din.gz"), str(tmp_path / "c.kvt"))
    np.testing.assert_array_equal(traces.read_all(tmp_path / "c.kvt"),
                                  traces.read_all(tmp_path / "a.kvt"))
