"""Valgrind lackey --trace-mem=yes text: parsing, gaps, modify, and round trips."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvsim import traces
from kvsim.traces.convert.lackey import LackeyError, lackey_to_records, records_to_lackey

SAMPLE = """\
==12345== Lackey, an example Valgrind tool
==12345== Command: ./a.out
I  04010173,3
I  04010176,5
 S 1ffefffd78,8
I  0401017b,4
 L 04222cac,8
 L 04222cb4,4
I  04010180,2
I  04010182,3
 M 0421ff3c,4
--12345-- some debug line
"""


def test_parse_sample() -> None:
    sites: list[str] = []
    stats: dict[str, int] = {}
    rec = lackey_to_records(io.StringIO(SAMPLE), sites=sites, stats=stats)
    assert rec["addr"].tolist() == [0x1FFEFFFD78, 0x04222CAC, 0x04222CB4, 0x0421FF3C,
                                    0x0421FF3C]
    assert rec["size"].tolist() == [8, 8, 4, 4, 4]
    assert rec["kind"].tolist() == [1, 0, 0, 0, 1]
    # I I S: one non-memory instruction before the store; M's store shares its instruction
    assert rec["gap"].tolist() == [1, 0, 0, 1, 0]
    assert rec["site"].tolist() == [0, 1, 1, 2, 2]
    assert sites == ["0x4010176", "0x401017b", "0x4010182"]
    assert stats == {"instructions": 5, "loads": 2, "stores": 1, "modifies": 1, "records": 5}
    # instructions = gaps + memory instructions (the M counts twice as records)
    assert int(rec["gap"].sum()) + 3 == stats["instructions"]
    ign = lackey_to_records(io.StringIO(SAMPLE), instructions="ignore")
    assert not ign["gap"].any()


def test_parse_from_path(tmp_path: Path) -> None:
    p = tmp_path / "lackey.out"
    p.write_text(SAMPLE)
    assert lackey_to_records(p).size == 5


@pytest.mark.parametrize("line", [" X 10,4", " L 10", " L zz,4", " S 10,0", "I  10"])
def test_bad_lines(line: str) -> None:
    with pytest.raises(LackeyError, match="line 2: "):
        lackey_to_records(io.StringIO("I  400000,1\n" + line + "\n"))


def test_write_plain_and_prefetch_marker_handling() -> None:
    rec = np.zeros(4, dtype=traces.RECORD_DTYPE)
    rec["kind"] = [traces.KIND_LOAD, traces.KIND_MARKER, traces.KIND_PREFETCH,
                   traces.KIND_STORE]
    rec["addr"] = [0x10, 1, 0x20, 0x30]
    rec["size"] = [8, 0, 1, 0]
    rec["gap"] = [0, 2, 1, 0]
    buf = io.StringIO()
    assert records_to_lackey(rec, buf) == 2
    assert buf.getvalue() == " L 00000010,8\n S 00000030,1\n"
    buf = io.StringIO()
    assert records_to_lackey(rec, buf, prefetch="load") == 3
    buf = io.StringIO()
    records_to_lackey(rec, buf, instructions=True)
    back = lackey_to_records(io.StringIO(buf.getvalue()))
    # marker gap 2 + prefetch gap 1 + the dropped prefetch instruction = 4
    assert back["gap"].tolist() == [0, 4]


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(0, 200))
def test_roundtrip_through_kvt_keeps_addr_size_kind_gap(seed: int, n: int) -> None:
    rng = np.random.default_rng(seed)
    rec = np.zeros(n, dtype=traces.RECORD_DTYPE)
    rec["addr"] = rng.integers(0, 2**48, n, dtype=np.uint64)
    rec["size"] = rng.integers(1, 65, n)
    rec["kind"] = rng.integers(0, 2, n)
    rec["gap"] = rng.integers(0, 5, n)
    rec["site"] = rng.integers(0, 10, n)
    kvt = io.BytesIO()
    with traces.Writer(kvt, {}, chunk_records=17) as w:
        w.write(rec)
    kvt.seek(0)
    text = io.StringIO()
    with traces.open(kvt) as tr:
        records_to_lackey(tr, text, instructions=True)
    back = lackey_to_records(io.StringIO(text.getvalue()))
    for f in ("addr", "size", "kind", "gap"):
        assert back[f].tolist() == rec[f].tolist(), f
