"""traces.convert.convert (behind `kvsim convert`): format guessing and end-to-end paths."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from kvsim import traces
from kvsim.traces.convert import convert, guess_format
from kvsim.traces.convert.champsim import read_champsim
from kvsim.traces.convert.gem5 import read_packets

DATA = Path(__file__).with_name("data")


@pytest.mark.parametrize(("name", "fmt"), [
    ("a.kvt", "kvt"), ("-", "kvt"), ("x.din", "dinero"), ("g.trc", "gem5"),
    ("g.trc.gz", "gem5"), ("c.champsimtrace.xz", "champsim"), ("l.lackey", "lackey"),
])
def test_guess_format(name: str, fmt: str) -> None:
    assert guess_format(name) == fmt


def test_guess_format_unknown() -> None:
    with pytest.raises(ValueError, match="cannot tell"):
        guess_format("trace.bin")


def test_din_kvt_roundtrip_and_exports(tmp_path: Path) -> None:
    kvt = tmp_path / "t.kvt"
    assert convert(str(DATA / "small_mixed_trace.din"), str(kvt))["records"] == 2005
    rec = traces.read_all(kvt)
    with traces.open(kvt) as tr:
        assert tr.header["workload"]["source"] == "small_mixed_trace.din"
    din = tmp_path / "back.din"
    convert(str(kvt), str(din))
    assert din.read_bytes() == (DATA / "small_mixed_trace.din").read_bytes()
    res = convert(str(kvt), str(tmp_path / "t.trc.gz"))
    _, packets = read_packets(tmp_path / "t.trc.gz")
    assert res["records"] == len(packets) == 2005 + 25  # 25 accesses cross a line
    res = convert(str(kvt), str(tmp_path / "t.champsimtrace.xz"))
    assert read_champsim(tmp_path / "t.champsimtrace.xz").size == res["records"] == 2005
    convert(str(kvt), str(tmp_path / "t.lackey"))
    convert(str(tmp_path / "t.lackey"), str(tmp_path / "t2.kvt"))
    back = traces.read_all(tmp_path / "t2.kvt")
    for f in ("addr", "size", "kind", "gap"):
        np.testing.assert_array_equal(back[f], rec[f])
    convert(str(kvt), str(tmp_path / "t3.kvt"))
    np.testing.assert_array_equal(traces.read_all(tmp_path / "t3.kvt"), rec)


def test_gem5_golden_to_kvt(tmp_path: Path) -> None:
    convert(str(DATA / "gem5_packet_trace.trc"), str(tmp_path / "g.kvt"))
    rec = traces.read_all(tmp_path / "g.kvt")
    assert rec.size == 24 and rec["size"].tolist()[:3] == [64, 64, 8]


def test_damaged_input_leaves_no_output(tmp_path: Path) -> None:
    from kvsim.traces.convert.dinero import din_to_records

    kvt = tmp_path / "t.kvt"
    with traces.Writer(kvt, {}, chunk_records=100) as w:  # damage the last of many chunks
        w.write(din_to_records(DATA / "small_mixed_trace.din"))
    data = bytearray(kvt.read_bytes())
    data[-40] ^= 0xFF
    kvt.write_bytes(bytes(data))
    for out in ("o.din", "o.kvt", "o.trc", "o.champsimtrace", "o.lackey"):
        with pytest.raises(traces.TraceError):
            convert(str(kvt), str(tmp_path / out))
    assert sorted(os.listdir(tmp_path)) == ["t.kvt"]
