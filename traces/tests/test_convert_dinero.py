"""DineroIV din reader/writer against the golden small_mixed_trace."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import numpy as np
import pytest
from trace_helpers import HEADER

from kvsim import traces
from kvsim.traces.convert.dinero import DinError, din_to_records, records_to_din

DATA = Path(__file__).with_name("data")
DIN = DATA / "small_mixed_trace.din"


def _csv_rows() -> list[tuple[str, int, int]]:
    with open(DATA / "small_mixed_trace.csv") as f:
        return [(r["op"], int(r["addr"]), int(r["size"])) for r in csv.DictReader(f)]


def test_golden_din_parses_to_csv_records() -> None:
    stats: dict[str, int] = {}
    rec = din_to_records(DIN, stats=stats)
    rows = _csv_rows()
    assert rec.size == len(rows) == 2005
    assert stats == {"lines": 2005, "records": 2005, "ifetch": 0, "dropped": 0}
    assert rec["addr"].tolist() == [a for _, a, _ in rows]
    assert rec["size"].tolist() == [s for _, _, s in rows]
    assert rec["kind"].tolist() == [traces.KIND_LOAD if op == "R" else traces.KIND_STORE
                                    for op, _, _ in rows]
    assert (rec["kind"] == traces.KIND_STORE).sum() == 582
    crossing = (rec["addr"] % 64 + rec["size"]) > 64
    assert crossing.sum() == 25  # as the golden README says
    assert not rec["gap"].any() and not rec["dep"].any()


def test_golden_din_roundtrip_is_byte_identical(tmp_path: Path) -> None:
    rec = din_to_records(DIN)
    out = tmp_path / "out.din"
    assert records_to_din(rec, out) == 2005
    assert out.read_bytes() == DIN.read_bytes()


def test_din_via_kvt_streaming(tmp_path: Path) -> None:
    rec = din_to_records(DIN)
    p = tmp_path / "t.kvt"
    with traces.Writer(p, HEADER, chunk_records=300) as w:
        w.write(rec)
    buf = io.StringIO()
    with traces.open(p) as tr:
        records_to_din(tr, buf)
    assert buf.getvalue() == DIN.read_text()


def test_prefetch_and_marker_export() -> None:
    rec = np.zeros(4, dtype=traces.RECORD_DTYPE)
    rec["kind"] = [traces.KIND_PREFETCH, traces.KIND_MARKER, traces.KIND_LOAD, traces.KIND_STORE]
    rec["addr"] = [0x1000, 7, 0x2000, 0x3000]
    rec["size"] = [1, 0, 8, 0]
    for mode, first in (("misc", "m 1000 1\n"), ("read", "r 1000 1\n"), ("skip", "")):
        buf = io.StringIO()
        records_to_din(rec, buf, prefetch=mode)
        assert buf.getvalue() == first + "r 2000 8\nw 3000 1\n"
    back = din_to_records(io.StringIO("m 1000 1\nr 2000 8\n"))
    assert back["kind"].tolist() == [traces.KIND_PREFETCH, traces.KIND_LOAD]


def test_old_format_and_ifetch_gap() -> None:
    text = "2 400000\n2 400004\n0 1003 ignored\n1 0x2000\n3 10\n4 0\n5 0\n# comment\n\n"
    stats: dict[str, int] = {}
    rec = din_to_records(io.StringIO(text), ifetch="gap", stats=stats)
    assert rec["addr"].tolist() == [0x1000, 0x2000, 0x10]
    assert rec["size"].tolist() == [4, 4, 1]  # a prefetch names one address (FORMAT.md)
    assert rec["kind"].tolist() == [0, 1, 2]
    assert rec["gap"].tolist() == [2, 0, 0]
    assert stats == {"lines": 7, "records": 3, "ifetch": 2, "dropped": 2}
    assert din_to_records(io.StringIO(text))["gap"].tolist() == [0, 0, 0]
    ext = din_to_records(io.StringIO("i 400000 4\nR 0x10 0x40\nc 0 40\nv 0 40\n"), "gap")
    assert ext["addr"].tolist() == [0x10] and ext["size"].tolist() == [64]
    assert ext["gap"].tolist() == [1]


@pytest.mark.parametrize("line", ["x 10 4", "r 10", "r zz 4", "w 10 0", "r 10 10000", "0"])
def test_bad_lines_name_the_line(line: str) -> None:
    with pytest.raises(DinError, match=r"line 2: "):
        din_to_records(io.StringIO("r 0 1\n" + line + "\n"))
