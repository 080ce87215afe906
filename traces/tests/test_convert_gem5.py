"""gem5 packet traces: byte-exact against gem5's own encoder, every field read back."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
from pathlib import Path

import numpy as np
import pytest

from kvsim import traces
from kvsim.traces.convert import gem5
from kvsim.traces.convert.gem5 import Gem5TraceError

DATA = Path(__file__).with_name("data")
BACKENDS = ["builtin"] + (["protobuf"] if gem5._pb_classes() is not None else [])


def _txt_packets() -> list[dict]:
    """gem5's encode_packet_trace.py input: cmd,addr,size,tick (r -> 1, else 4)."""
    out = []
    for line in (DATA / "gem5_packet_trace.txt").read_text().splitlines():
        cmd, addr, size, tick = line.split(",")
        out.append({"tick": int(tick), "cmd": 1 if cmd == "r" else 4, "addr": int(addr),
                    "size": int(size)})
    return out


TXT_HEADER = {"obj_id": "Converted ASCII trace gem5_packet_trace.txt", "tick_freq": 10**12}


def test_golden_files_unchanged() -> None:
    for line in (DATA / "gem5_packet_trace.sha256").read_text().splitlines():
        digest, name = line.split()
        if (DATA / name).exists():
            assert hashlib.sha256((DATA / name).read_bytes()).hexdigest() == digest, name


@pytest.mark.parametrize("backend", BACKENDS)
def test_encode_reproduces_gem5_bytes(backend: str, tmp_path: Path) -> None:
    golden = (DATA / "gem5_packet_trace.trc").read_bytes()
    assert gem5.encode(TXT_HEADER, _txt_packets(), backend) == golden
    gem5.write_packets(tmp_path / "out.trc", TXT_HEADER, _txt_packets(), backend=backend)
    assert (tmp_path / "out.trc").read_bytes() == golden
    gem5.write_packets(tmp_path / "out.trc.gz", TXT_HEADER, _txt_packets(), backend=backend)
    golden_gz = (DATA / "gem5_packet_trace.trc.gz").read_bytes()
    assert (tmp_path / "out.trc.gz").read_bytes() == golden_gz
    # the expected.json header (ver: 0 spelled out) encodes to the same bytes
    expected = json.loads((DATA / "gem5_packet_trace.expected.json").read_text())
    assert gem5.encode(expected["header"], expected["packets"], backend) == golden


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", ["gem5_packet_trace.trc", "gem5_packet_trace.trc.gz",
                                  "gem5_packet_trace_probe_style.trc.gz"])
def test_read_every_field(backend: str, name: str) -> None:
    stem = name.split(".trc")[0]
    expected = json.loads((DATA / f"{stem}.expected.json").read_text())
    header, packets = gem5.read_packets(DATA / name, backend=backend)
    assert header == expected["header"]
    assert packets == expected["packets"]
    with open(DATA / name, "rb") as f:  # stream input too
        assert gem5.read_packets(f, backend=backend) == (header, packets)


@pytest.mark.parametrize("backend", BACKENDS)
def test_probe_style_roundtrip(backend: str) -> None:
    raw = (DATA / "gem5_packet_trace_probe_style.trc.gz").read_bytes()
    header, packets = gem5.read_packets(raw, backend=backend)
    assert gem5.encode(header, packets, backend) == gzip.decompress(raw)
    # that file was gzipped by Python (OS byte 255), so this reproduces it byte for byte
    buf = io.BytesIO()
    gem5.write_packets(buf, header, packets, compress=True, backend=backend, gzip_os=255)
    assert buf.getvalue() == raw


def test_probe_style_decoded_text_matches_gem5_decoder() -> None:
    """Our fields printed like gem5's decode_packet_trace.py (pkt_id,cmd,addr,size,flags,
    tick[,pc]; 'u' for commands other than ReadReq/WriteReq)."""
    _, packets = gem5.read_packets(DATA / "gem5_packet_trace_probe_style.trc.gz")
    lines = []
    for p in packets:
        cmd = {1: "r", 4: "w"}.get(p["cmd"], "u")
        fields = [p["pkt_id"], cmd, p["addr"], p["size"], p["flags"], p["tick"]]
        lines.append(",".join(map(str, fields + ([p["pc"]] if "pc" in p else []))))
    decoded = (DATA / "gem5_packet_trace_probe_style.trc.gz.decoded.txt").read_text()
    assert "\n".join(lines) == decoded.rstrip("\n")


def test_records_export_splits_line_crossers_and_roundtrips() -> None:
    rec = np.zeros(5, dtype=traces.RECORD_DTYPE)
    rec["kind"] = [traces.KIND_LOAD, traces.KIND_MARKER, traces.KIND_STORE,
                   traces.KIND_PREFETCH, traces.KIND_LOAD]
    rec["addr"] = [0x1000, 9, 0x203C, 0x3000, 0x4000]
    rec["size"] = [8, 0, 200, 1, 64]
    rec["gap"] = [3, 5, 1, 0, 2]
    packets = list(gem5.records_to_packets(rec, ticks_per_instruction=100))
    # instruction index: load 3; marker adds 5 -> store at 3+1+5+1 = 10; pf 11; load 11+1+2 = 14
    assert packets == [
        {"tick": 300, "cmd": 1, "addr": 0x1000, "size": 8},
        {"tick": 1000, "cmd": 4, "addr": 0x203C, "size": 4},
        {"tick": 1000, "cmd": 4, "addr": 0x2040, "size": 64},
        {"tick": 1000, "cmd": 4, "addr": 0x2080, "size": 64},
        {"tick": 1000, "cmd": 4, "addr": 0x20C0, "size": 64},
        {"tick": 1000, "cmd": 4, "addr": 0x2100, "size": 4},
        {"tick": 1100, "cmd": 11, "addr": 0x3000, "size": 1},
        {"tick": 1400, "cmd": 1, "addr": 0x4000, "size": 64},
    ]
    assert all(p["addr"] // 64 == (p["addr"] + p["size"] - 1) // 64 for p in packets)
    assert [p["cmd"] for p in gem5.records_to_packets(rec, prefetch="skip")] == [1, 4, 4, 4, 4,
                                                                                 4, 1]
    buf = io.BytesIO()
    gem5.write_packets(buf, {"obj_id": "x", "tick_freq": 10**12}, packets)
    back = gem5.packets_to_records(gem5.read_packets(buf.getvalue())[1], 100)
    assert back["kind"].tolist() == [0, 1, 1, 1, 1, 1, 2, 0]
    assert back["gap"].tolist() == [3, 6, 0, 0, 0, 0, 0, 2]  # marker's 5 folded into the store


def test_records_to_gem5_file(tmp_path: Path) -> None:
    rec = traces.read_all(_kvt_of(np.array([(64, 0, 0, 8, 0, 0, 0, 0)],
                                           dtype=traces.RECORD_DTYPE)))
    assert gem5.records_to_gem5(rec, tmp_path / "t.trc.gz") == 1
    raw = (tmp_path / "t.trc.gz").read_bytes()
    assert raw[:2] == b"\x1f\x8b"
    header, rec2 = gem5.gem5_to_records(tmp_path / "t.trc.gz")
    assert header == {"obj_id": "kvsim trace", "tick_freq": 10**12, "ver": 0, "id_strings": []}
    assert rec2["addr"].tolist() == [64] and rec2["size"].tolist() == [8]


def _kvt_of(rec: np.ndarray) -> io.BytesIO:
    buf = io.BytesIO()
    with traces.Writer(buf, {}) as w:
        w.write(rec)
    buf.seek(0)
    return buf


def test_bad_files_raise() -> None:
    golden = (DATA / "gem5_packet_trace.trc").read_bytes()
    with pytest.raises(Gem5TraceError, match="bad magic"):
        gem5.read_packets(b"gem4" + golden[4:])
    with pytest.raises(Gem5TraceError, match="packet 23 at byte"):
        gem5.read_packets(golden[:-3])
    with pytest.raises(Gem5TraceError, match="no PacketHeader"):
        gem5.read_packets(b"gem5")
    with pytest.raises(Gem5TraceError, match="missing required"):
        gem5.read_packets(golden + b"\x02\x08\x01")
    with pytest.raises(ValueError, match="lacks required"):
        gem5.encode(TXT_HEADER, [{"tick": 1}])


# --- gem5 -> kvt -> gem5 ---------------------------------------------------------------------
KEPT = set(gem5.IMPORTED_CMDS)


@pytest.mark.parametrize("name", ["gem5_packet_trace.trc", "gem5_packet_trace.trc.gz",
                                  "gem5_packet_trace_probe_style.trc.gz"])
@pytest.mark.parametrize("freq", [None, 2.0])
def test_gem5_kvt_gem5_keeps_address_size_command(name: str, freq: float | None,
                                                  tmp_path: Path) -> None:
    from kvsim.traces.convert import convert

    _, before = gem5.read_packets(DATA / name)
    convert(str(DATA / name), str(tmp_path / "t.kvt"), freq_ghz=freq)
    convert(str(tmp_path / "t.kvt"), str(tmp_path / "back.trc.gz"), freq_ghz=freq)
    header, after = gem5.read_packets(tmp_path / "back.trc.gz")
    kept = [p for p in before if p["cmd"] in KEPT]
    assert [(p["addr"], p["cmd"]) for p in after] == [(p["addr"], p["cmd"]) for p in kept]
    # sizes: all kept, but a software prefetch is 1 byte in a kvt (traces/FORMAT.md)
    assert [p["size"] for p in after] == [1 if p["cmd"] in (11, 12) else p["size"]
                                          for p in kept]
    assert header["tick_freq"] == 10**12
    # ticks: regenerated from the gaps at the frequency, never earlier than the original
    # instruction (a kvt has no ticks; packets that shared a tick get consecutive ones)
    tpi = round(10**12 / ((freq or 4.0) * 1e9))
    assert all(a["tick"] % tpi == 0 for a in after)
    assert all(a["tick"] >= b["tick"] // tpi * tpi for a, b in zip(after, kept, strict=True))


def test_ticks_become_gaps_at_the_frequency(tmp_path: Path) -> None:
    from kvsim.traces.convert import convert

    packets = [{"tick": t, "cmd": 1, "addr": 64 * i, "size": 8}
               for i, t in enumerate([0, 250, 2500, 2500, 2750, 10_000])]
    src = tmp_path / "p.trc"
    gem5.write_packets(src, {"obj_id": "t", "tick_freq": 10**12}, packets)
    convert(str(src), str(tmp_path / "t.kvt"))  # 4 GHz: 250 ticks per instruction
    rec = traces.read_all(tmp_path / "t.kvt")
    assert rec["gap"].tolist() == [0, 0, 8, 0, 0, 28]
    convert(str(src), str(tmp_path / "u.kvt"), freq_ghz=1.0)  # 1000 ticks
    assert traces.read_all(tmp_path / "u.kvt")["gap"].tolist() == [0, 0, 1, 0, 0, 7]
    convert(str(tmp_path / "t.kvt"), str(tmp_path / "back.trc"))
    _, back = gem5.read_packets(tmp_path / "back.trc")
    assert [p["tick"] for p in back] == [0, 250, 2500, 2750, 3000, 10_250]
