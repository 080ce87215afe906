"""gem5 protobuf packet traces (TrafficGen TRACE mode, MemTraceProbe): read and write.

Container (gem5 ``src/proto/protoio.cc``, ``util/protolib.py``; simulators.md section 1a):
magic ``gem5`` (u32 LE 0x356d6567), then varint32-length-prefixed protobuf messages: one
``PacketHeader`` {1 obj_id string, 2 ver uint32 (optional), 3 tick_freq uint64, 4 id_strings
repeated {1 key uint32, 2 value string}}, then ``Packet`` {1 tick, 2 cmd, 3 addr, 4 size,
5 flags (opt), 6 pkt_id (opt), 7 pc (opt)} until end of file. The whole file may be gzipped
(gem5 writes gzip iff the name ends in ``.gz`` and reads gzip iff the first bytes are 1f 8b;
both rules are followed here).

Header and packets are plain dicts with the field names above; optional packet fields are
present exactly when present in the file, and ``ver`` reads as 0 when absent. On writing,
``ver`` is emitted only when non-zero (gem5's own encoder never sets it), which reproduces
gem5's files byte for byte (``traces/tests/test_convert_gem5.py``). gzip output is deterministic:
zlib level 9, mtime 0, no file name, OS byte 3 (what ``gzip -n -9`` writes).

Protobuf backend: the ``protobuf`` package is used when importable (message classes are built
at run time from a descriptor equal to gem5's ``packet.proto``; no ``protoc`` needed);
otherwise a minimal built-in varint codec does the same job. ``backend=`` selects one
explicitly; the tests check both agree on the golden files.

kvsim records <-> packets (:func:`records_to_packets`, :func:`packets_to_records`): loads ->
``ReadReq`` (1), stores -> ``WriteReq`` (4), prefetches -> ``SoftPFReq`` (11, or dropped with
``prefetch="skip"``); markers are dropped. An access that crosses a ``line_size`` boundary is
split into one packet per line (gem5's classic caches assert on line-crossing packets).
``tick`` is the instruction index times ``ticks_per_instruction`` (the index counts ``gap``
instructions plus one per memory record). Lost on export: ``dep``, ``tag``, ``site``,
``flags`` and markers; ``gap`` survives only through the tick spacing.
"""

from __future__ import annotations

import gzip
import os
import struct
import zlib
from collections.abc import Iterable, Iterator
from functools import lru_cache
from pathlib import Path
from typing import IO, Any

import numpy as np

from ..format import KIND_LOAD, KIND_MARKER, KIND_PREFETCH, KIND_STORE, RECORD_DTYPE

__all__ = [
    "CMD_NAMES", "CMD_READ_REQ", "CMD_SOFT_PF_REQ", "CMD_WRITE_REQ", "Gem5TraceError",
    "decode", "encode", "gem5_to_records", "packets_to_records", "read_packets",
    "records_to_gem5", "records_to_packets", "write_packets",
]  # fmt: skip

MAGIC = b"gem5"
CMD_READ_REQ = 1  #: MemCmd::ReadReq (gem5 v24.0.0.1 enum position)
CMD_WRITE_REQ = 4  #: MemCmd::WriteReq
CMD_SOFT_PF_REQ = 11  #: MemCmd::SoftPFReq
#: A few MemCmd values by position in gem5 v24.0.0.1 (version-specific, see simulators.md).
CMD_NAMES = {1: "ReadReq", 4: "WriteReq", 7: "WritebackDirty", 8: "WritebackClean",
             10: "CleanEvict", 11: "SoftPFReq", 12: "SoftPFExReq", 13: "HardPFReq",
             16: "WriteLineReq", 17: "UpgradeReq", 22: "ReadExReq", 24: "ReadCleanReq",
             25: "ReadSharedReq"}
_CMD_KIND = {1: KIND_LOAD, 22: KIND_LOAD, 24: KIND_LOAD, 25: KIND_LOAD, 4: KIND_STORE,
             16: KIND_STORE, 11: KIND_PREFETCH, 12: KIND_PREFETCH}

# field number -> (name, is_string) per message; all other fields are varints
_HEADER_FIELDS = {1: "obj_id", 2: "ver", 3: "tick_freq", 4: "id_strings"}
_ENTRY_FIELDS = {1: "key", 2: "value"}
_PACKET_FIELDS = {1: "tick", 2: "cmd", 3: "addr", 4: "size", 5: "flags", 6: "pkt_id", 7: "pc"}
_PACKET_REQUIRED = ("tick", "cmd", "addr", "size")


class Gem5TraceError(ValueError):
    """A gem5 packet trace is malformed; the message names the file and byte offset."""


# --- varint codec (built-in backend, and message framing for both backends) -----------------
def _varint(v: int) -> bytes:
    if v < 0:
        raise ValueError(f"negative value {v} in a gem5 trace field")
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def _read_varint(buf: bytes, pos: int, limit: int) -> tuple[int, int]:
    shift = value = 0
    while pos < limit and shift < 70:
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos
        shift += 7
    raise ValueError("truncated or overlong varint")


def _enc_builtin(fields: dict[int, str], msg: dict[str, Any]) -> bytes:
    out = bytearray()
    for num, name in fields.items():
        if name not in msg or msg[name] is None:
            continue
        vals = msg[name] if name == "id_strings" else [msg[name]]
        for v in vals:
            if name == "id_strings":
                body = _enc_builtin(_ENTRY_FIELDS, v)
            elif isinstance(v, str):
                body = v.encode("utf-8")
            else:
                out += _varint(num << 3) + _varint(int(v))
                continue
            out += _varint((num << 3) | 2) + _varint(len(body)) + body
    return bytes(out)


def _dec_builtin(fields: dict[int, str], buf: bytes, pos: int, end: int) -> dict[str, Any]:
    msg: dict[str, Any] = {}
    while pos < end:
        key, pos = _read_varint(buf, pos, end)
        num, wt = key >> 3, key & 7
        if wt == 0:
            val, pos = _read_varint(buf, pos, end)
        elif wt == 2:
            n, pos = _read_varint(buf, pos, end)
            if pos + n > end:
                raise ValueError("length-delimited field runs past the message")
            val, pos = buf[pos:pos + n], pos + n
        elif wt in (1, 5):
            pos += 8 if wt == 1 else 4
            if pos > end:
                raise ValueError("fixed-width field runs past the message")
            continue  # unknown fixed-width field: skip
        else:
            raise ValueError(f"unsupported wire type {wt}")
        name = fields.get(num)
        if name is None:
            continue
        if name == "id_strings":
            msg.setdefault(name, []).append(_dec_builtin(_ENTRY_FIELDS, val, 0, len(val)))
        elif name in ("obj_id", "value"):
            msg[name] = bytes(val).decode("utf-8")
        else:
            msg[name] = val
    return msg


# --- protobuf backend ------------------------------------------------------------------------
@lru_cache(maxsize=1)
def _pb_classes() -> tuple[type, type] | None:
    """(PacketHeader, Packet) classes from gem5's packet.proto, or None without protobuf."""
    try:
        from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
    except ImportError:
        return None
    fd = descriptor_pb2.FieldDescriptorProto
    f = descriptor_pb2.FileDescriptorProto(name="kvsim_gem5_packet.proto",
                                           package="ProtoMessage", syntax="proto2")

    def msg(name: str, spec: list[tuple[str, int, int, int, str]]) -> None:
        m = f.message_type.add(name=name)
        for fname, num, ftype, label, tname in spec:
            fld = m.field.add(name=fname, number=num, type=ftype, label=label)
            if tname:
                fld.type_name = tname

    req, opt, rep = fd.LABEL_REQUIRED, fd.LABEL_OPTIONAL, fd.LABEL_REPEATED
    u32, u64, s, m_ = fd.TYPE_UINT32, fd.TYPE_UINT64, fd.TYPE_STRING, fd.TYPE_MESSAGE
    msg("IdStringEntry", [("key", 1, u32, opt, ""), ("value", 2, s, opt, "")])
    msg("PacketHeader", [("obj_id", 1, s, req, ""), ("ver", 2, u32, opt, ""),
                         ("tick_freq", 3, u64, req, ""),
                         ("id_strings", 4, m_, rep, ".ProtoMessage.IdStringEntry")])
    msg("Packet", [("tick", 1, u64, req, ""), ("cmd", 2, u32, req, ""),
                   ("addr", 3, u64, req, ""), ("size", 4, u32, req, ""),
                   ("flags", 5, u32, opt, ""), ("pkt_id", 6, u64, opt, ""),
                   ("pc", 7, u64, opt, "")])
    pool = descriptor_pool.DescriptorPool()  # private pool: no clash with a real packet_pb2
    fdesc = pool.Add(f)
    return (message_factory.GetMessageClass(fdesc.message_types_by_name["PacketHeader"]),
            message_factory.GetMessageClass(fdesc.message_types_by_name["Packet"]))


def _backend(backend: str) -> tuple[type, type] | None:
    if backend == "builtin":
        return None
    classes = _pb_classes()
    if backend == "protobuf" and classes is None:
        raise ImportError("the protobuf package is not installed")
    if backend not in ("auto", "protobuf"):
        raise ValueError("backend must be 'auto', 'protobuf' or 'builtin'")
    return classes


def _enc_pb(cls: type, msg: dict[str, Any], fields: dict[int, str]) -> bytes:
    m = cls()
    for name in fields.values():
        v = msg.get(name)
        if v is None:
            continue
        if name == "id_strings":
            for e in v:
                m.id_strings.add(**e)
        else:
            setattr(m, name, v)
    return m.SerializeToString()


def _dec_pb(cls: type, buf: bytes, fields: dict[int, str]) -> dict[str, Any]:
    m = cls()
    m.ParseFromString(buf)
    out: dict[str, Any] = {}
    for name in fields.values():
        if name == "id_strings":
            if len(m.id_strings):
                out[name] = [{k: getattr(e, k) for k in ("key", "value") if e.HasField(k)}
                             for e in m.id_strings]
        elif m.HasField(name):
            out[name] = getattr(m, name)
    return out


# --- whole files -----------------------------------------------------------------------------
def encode(header: dict[str, Any], packets: Iterable[dict[str, Any]],
           backend: str = "auto") -> bytes:
    """Uncompressed file bytes for ``header`` and ``packets`` (see module docstring)."""
    classes = _backend(backend)
    h = dict(header)
    if not h.get("ver"):
        h.pop("ver", None)
    for k in ("obj_id", "tick_freq"):
        if k not in h:
            raise ValueError(f"gem5 header needs {k!r}")
    parts = [MAGIC]
    if classes:
        body = _enc_pb(classes[0], h, _HEADER_FIELDS)
    else:
        body = _enc_builtin(_HEADER_FIELDS, h)
    parts += [_varint(len(body)), body]
    for p in packets:
        missing = [k for k in _PACKET_REQUIRED if k not in p]
        if missing:
            raise ValueError(f"gem5 packet {p} lacks required field(s) {missing}")
        body = _enc_pb(classes[1], p, _PACKET_FIELDS) if classes else \
            _enc_builtin(_PACKET_FIELDS, p)
        parts += [_varint(len(body)), body]
    return b"".join(parts)


def gzip_bytes(data: bytes, os_byte: int = 3) -> bytes:
    """Deterministic gzip member (zlib level 9, mtime 0, no name) like ``gzip -n -9``."""
    c = zlib.compressobj(9, zlib.DEFLATED, -15, 9)
    body = c.compress(data) + c.flush()
    head = b"\x1f\x8b\x08\x00" + b"\0\0\0\0" + bytes([2, os_byte])
    return head + body + struct.pack("<II", zlib.crc32(data), len(data) & 0xFFFFFFFF)


def decode(data: bytes, name: str = "<gem5>", backend: str = "auto"
           ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Parse gem5 packet-trace bytes (gzip detected by magic) into (header, packets)."""
    classes = _backend(backend)
    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as e:
            raise Gem5TraceError(f"{name}: bad gzip data: {e}") from None
    if data[:4] != MAGIC:
        raise Gem5TraceError(f"{name}: byte 0: bad magic {data[:4]!r} (expected b'gem5')")
    pos, n, header, packets = 4, len(data), None, []
    while pos < n:
        start = pos
        try:
            ln, pos = _read_varint(data, pos, n)
            if pos + ln > n:
                raise ValueError(f"message of {ln} bytes runs past the end of the file")
            body = data[pos:pos + ln]
            fields = _HEADER_FIELDS if header is None else _PACKET_FIELDS
            if classes:
                msg = _dec_pb(classes[0] if header is None else classes[1], body, fields)
            else:
                msg = _dec_builtin(fields, body, 0, ln)
        except Exception as e:  # protobuf's DecodeError or our ValueError
            what = "header" if header is None else f"packet {len(packets)}"
            raise Gem5TraceError(f"{name}: {what} at byte {start}: {e}") from None
        pos += ln
        if header is None:
            msg.setdefault("ver", 0)
            msg.setdefault("id_strings", [])
            header = msg
        else:
            missing = [k for k in _PACKET_REQUIRED if k not in msg]
            if missing:
                raise Gem5TraceError(f"{name}: packet {len(packets)} at byte {start}: "
                                     f"missing required field(s) {missing}")
            packets.append(msg)
    if header is None:
        raise Gem5TraceError(f"{name}: byte 4: no PacketHeader")
    return header, packets


def read_packets(src: str | os.PathLike[str] | IO[bytes] | bytes, backend: str = "auto"
                 ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Read a gem5 packet trace (path, binary stream or bytes; gzip or not)."""
    if isinstance(src, bytes | bytearray):
        return decode(bytes(src), backend=backend)
    if isinstance(src, str | os.PathLike):
        return decode(Path(src).read_bytes(), str(src), backend)
    return decode(src.read(), str(getattr(src, "name", "<gem5>")), backend)


def write_packets(dst: str | os.PathLike[str] | IO[bytes], header: dict[str, Any],
                  packets: Iterable[dict[str, Any]], compress: bool | None = None,
                  backend: str = "auto", gzip_os: int = 3) -> None:
    """Write a gem5 packet trace. ``compress=None`` gzips iff ``dst`` is a path ending in
    ``.gz`` (gem5's rule). A path is written via a temp file and renamed when complete."""
    data = encode(header, packets, backend)
    if compress is None:
        compress = isinstance(dst, str | os.PathLike) and os.fspath(dst).endswith(".gz")
    if compress:
        data = gzip_bytes(data, gzip_os)
    if isinstance(dst, str | os.PathLike):
        tmp = Path(f"{os.fspath(dst)}.tmp-{os.getpid()}")
        try:
            tmp.write_bytes(data)
            os.replace(tmp, dst)
        finally:
            tmp.unlink(missing_ok=True)
    else:
        dst.write(data)


# --- kvsim records <-> packets ----------------------------------------------------------------
def records_to_packets(records: np.ndarray | Iterable[np.ndarray], line_size: int = 64,
                       ticks_per_instruction: int = 250, prefetch: str = "softpf"
                       ) -> Iterator[dict[str, Any]]:
    """Yield gem5 packets for memory records, split at ``line_size``-byte boundaries.

    ``ticks_per_instruction`` (ticks; 250 = one instruction per cycle at 4 GHz with 1 ps
    ticks) spaces packets by the instruction index; the pieces of a split access share its
    tick. ``prefetch`` is ``"softpf"`` (SoftPFReq) or ``"skip"``.
    """
    if prefetch not in ("softpf", "skip"):
        raise ValueError("prefetch must be 'softpf' or 'skip'")
    cmd_of = {KIND_LOAD: CMD_READ_REQ, KIND_STORE: CMD_WRITE_REQ, KIND_PREFETCH: CMD_SOFT_PF_REQ}
    chunks = [records] if isinstance(records, np.ndarray) else records
    instr = 0
    for chunk in chunks:
        gaps = chunk["gap"].astype(np.int64)
        is_mem = chunk["kind"] < KIND_MARKER
        # instruction index of each record: all gaps so far + memory records before it
        idx = instr + np.cumsum(gaps) + np.cumsum(is_mem) - is_mem
        instr = int(idx[-1] + is_mem[-1]) if chunk.size else instr
        for r, i in zip(chunk[is_mem].tolist(), idx[is_mem].tolist(), strict=True):
            addr, size, kind = r[0], max(r[3], 1), r[4]
            if kind == KIND_PREFETCH and prefetch == "skip":
                continue
            tick, end = i * ticks_per_instruction, addr + size
            while addr < end:
                piece = min(end, (addr // line_size + 1) * line_size) - addr
                yield {"tick": tick, "cmd": cmd_of[kind], "addr": addr, "size": piece}
                addr += piece


def packets_to_records(packets: Iterable[dict[str, Any]], ticks_per_instruction: int = 0,
                       stats: dict[str, int] | None = None) -> np.ndarray:
    """Records for the packets whose command is a demand read/write or software prefetch.

    ReadReq/ReadExReq/ReadCleanReq/ReadSharedReq -> load, WriteReq/WriteLineReq -> store,
    SoftPFReq/SoftPFExReq -> prefetch; other commands (write-backs, evictions, upgrades,
    hardware prefetches) are dropped and counted in ``stats["dropped"]``. With
    ``ticks_per_instruction > 0`` the gap is recovered from tick spacing (``delta / tpi - 1``
    for the first packet at a new tick, 0 for packets sharing a tick).
    """
    rows, dropped, last = [], 0, None
    for i, p in enumerate(packets):
        kind = _CMD_KIND.get(p["cmd"])
        if kind is None:
            dropped += 1
            continue
        # FORMAT.md "Record rules": a prefetch names one address (size 1); a load or store
        # is 1..65535 bytes; no access wraps past 2^64 - 1
        size, addr = (1 if kind == KIND_PREFETCH else p["size"]), p["addr"]
        if not 1 <= size <= 0xFFFF:
            raise Gem5TraceError(f"packet {i}: size {size} outside 1..65535")
        if not 0 <= addr <= (1 << 64) - size:
            raise Gem5TraceError(f"packet {i}: the access at 0x{addr:x} of {size} bytes "
                                 "wraps past address 2^64 - 1")
        gap = 0
        if ticks_per_instruction > 0:
            instr = p["tick"] // ticks_per_instruction
            gap = instr if last is None else max(0, instr - last - 1)
            last = instr
        rows.append((addr, gap, 0, size, kind, 0, 0, 0))
    if stats is not None:
        stats.update(records=len(rows), dropped=dropped)
    return np.array(rows, dtype=RECORD_DTYPE)


def records_to_gem5(records: np.ndarray | Iterable[np.ndarray],
                    dst: str | os.PathLike[str] | IO[bytes], obj_id: str = "kvsim trace",
                    tick_freq: int = 10**12, line_size: int = 64,
                    ticks_per_instruction: int = 250, prefetch: str = "softpf",
                    compress: bool | None = None) -> int:
    """Export records as a gem5 packet trace; returns the number of packets written."""
    packets = list(records_to_packets(records, line_size, ticks_per_instruction, prefetch))
    write_packets(dst, {"obj_id": obj_id, "tick_freq": tick_freq}, packets, compress)
    return len(packets)


def gem5_to_records(src: str | os.PathLike[str] | IO[bytes] | bytes,
                    ticks_per_instruction: int = 0, stats: dict[str, int] | None = None
                    ) -> tuple[dict[str, Any], np.ndarray]:
    """Read a gem5 packet trace into (gem5 header, records); see :func:`packets_to_records`."""
    header, packets = read_packets(src)
    try:
        return header, packets_to_records(packets, ticks_per_instruction, stats)
    except Gem5TraceError as e:
        name = "<gem5>" if isinstance(src, bytes | bytearray) else \
            str(src if isinstance(src, str | os.PathLike) else getattr(src, "name", "<gem5>"))
        raise Gem5TraceError(f"{name}: {e}") from None
