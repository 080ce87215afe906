"""gem5 elastic traces: the output decoded with gem5's inst_dep_record.proto definitions (the
message classes) and, independently, field by field with the plain varint decoder."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from kvsim import traces
from kvsim.traces.convert import convert, elastic, gem5


def _records() -> np.ndarray:
    r = np.zeros(7, dtype=traces.RECORD_DTYPE)
    r["kind"] = [0, 3, 1, 2, 0, 0, 1]
    r["addr"] = [0x40, 5, 0x80, 0x100, 0x200, 0x400, 0x800]
    r["size"] = [8, 0, 8, 1, 8, 4, 2]
    r["gap"] = [2, 3, 0, 1, 0, 5, 0]
    r["dep"] = [0, 0, 2, 0, 0, 1, 2]
    r["site"] = [1, 0, 2, 0, 0, 3, 1]
    return r


def test_nodes_deps_weights(tmp_path: Path) -> None:
    dst = tmp_path / "x.deptrace.proto.gz"
    stats = elastic.records_to_elastic([_records()[:3], _records()[3:]], dst,
                                       ticks_per_instruction=100)
    header, recs = elastic.read_elastic(dst)
    assert header == {"obj_id": "kvsim trace", "tick_freq": 10**12, "window_size": 3000}
    # instruction numbers: load 3; store 3+3+1 = 7; prefetch 9 (dropped); loads 10, 16; st 17
    assert [r["seq_num"] for r in recs] == [3, 7, 10, 16, 17]
    assert [r["type"] for r in recs] == [1, 2, 1, 1, 2]
    assert [r["p_addr"] for r in recs] == [0x40, 0x80, 0x200, 0x400, 0x800]
    assert [r["size"] for r in recs] == [8, 8, 8, 4, 2]
    assert [r.get("reg_dep", []) for r in recs] == [[], [3], [], [10], [10]]
    assert [r.get("weight", 0) for r in recs] == [2, 3, 2, 5, 0]
    assert [r["comp_delay"] for r in recs] == [200, 300, 200, 500, 0]
    assert [r["pc"] for r in recs] == [0x400004, 0x400008, 0x400000, 0x40000C, 0x400004]
    assert stats == {"nodes": 5, "loads": 3, "stores": 2, "reg_deps": 3, "deps_lost": 0}
    # the fetch trace beside it: one ReadReq per node at its pc, ticked by seq_num
    fh, fetch = gem5.read_packets(elastic.fetch_path(dst))
    assert elastic.fetch_path(dst).name == "x.fetchtrace.proto.gz"
    assert [(p["tick"], p["cmd"], p["addr"], p["size"]) for p in fetch] == [
        (r["seq_num"] * 100, 1, r["pc"], 4) for r in recs]


def test_field_numbers_match_gem5_proto(tmp_path: Path) -> None:
    """Decode the raw messages without the classes: field numbers and wire types are those of
    gem5's src/proto/inst_dep_record.proto (seq_num 1, type 2, p_addr 3, size 4, comp_delay 7,
    reg_dep 8, weight 9, pc 10)."""
    import gzip

    dst = tmp_path / "y.deptrace.proto"
    elastic.records_to_elastic(_records(), dst, fetch=False)
    assert not elastic.fetch_path(dst).exists()
    data = dst.read_bytes()
    assert data[:4] == b"gem5" and gzip.decompress(gzip.compress(data)) == data
    fields = {i: str(i) for i in range(1, 13)}
    pos, msgs = 4, []
    while pos < len(data):
        ln, pos = gem5._read_varint(data, pos, len(data))
        msgs.append(gem5._dec_builtin(fields, data, pos, pos + ln))
        pos += ln
    assert msgs[0] == {"1": b"kvsim trace", "3": 10**12, "4": 3000}
    assert msgs[2] == {"1": 7, "2": 2, "3": 0x80, "4": 8, "7": 750, "8": 3, "9": 3,
                       "10": 0x400008}


def test_convert_cli_path_writes_both_files(tmp_path: Path) -> None:
    src = tmp_path / "a.kvt"
    with traces.Writer(src, {}) as w:
        w.write(_records())
    res = convert(str(src), str(tmp_path / "o.deptrace.proto.gz"))
    assert res["records"] == 5
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "a.kvt", "o.deptrace.proto.gz", "o.fetchtrace.proto.gz"]
