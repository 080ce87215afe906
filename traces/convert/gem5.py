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
    header, packets = iter_packets(src, backend)
    return header, list(packets)


_READ_BLOCK = 1 << 20


def iter_packets(src: str | os.PathLike[str] | IO[bytes], backend: str = "auto"
                 ) -> tuple[dict[str, Any], Iterator[dict[str, Any]]]:
    """(header, iterator of packets) of a gem5 packet trace read block by block (gzip
    detected by its magic): memory stays bounded whatever the file's length. The header is
    read before returning; a damaged packet raises :class:`Gem5TraceError` when reached."""
    from ._io import open_input

    name = str(src) if isinstance(src, str | os.PathLike) else \
        str(getattr(src, "name", "<gem5>"))
    classes = _backend(backend)
    try:
        f = open_input(src)
        magic = f.read(4)
    except (OSError, EOFError, zlib.error, gzip.BadGzipFile) as e:
        if isinstance(e, OSError) and not isinstance(e, gzip.BadGzipFile) and e.errno:
            raise
        raise Gem5TraceError(f"{name}: bad gzip data: {e}") from None
    if magic != MAGIC:
        f.close()
        raise Gem5TraceError(f"{name}: byte 0: bad magic {magic!r} (expected b'gem5')")
    state = {"buf": b"", "pos": 0, "base": 4, "eof": False}

    def fill() -> bool:
        if state["eof"]:
            return False
        try:
            more = f.read(_READ_BLOCK)
        except (OSError, EOFError, zlib.error) as e:
            raise Gem5TraceError(f"{name}: bad gzip data: {e}") from None
        if not more:
            state["eof"] = True
            return False
        state["base"] += state["pos"]
        state["buf"] = state["buf"][state["pos"]:] + more
        state["pos"] = 0
        return True

    def message(what: str) -> dict[str, Any] | None:
        while True:
            buf, pos = state["buf"], state["pos"]
            start = state["base"] + pos
            n = len(buf)
            if pos >= n and not fill():
                return None
            buf, pos, n = state["buf"], state["pos"], len(state["buf"])
            try:
                try:
                    ln, body_at = _read_varint(buf, pos, n)
                except ValueError:
                    if fill():
                        continue
                    raise
                if body_at + ln > n:
                    if fill():
                        continue
                    raise ValueError(f"message of {ln} bytes runs past the end of the file")
                body = buf[body_at:body_at + ln]
                header_msg = what == "header"
                fields = _HEADER_FIELDS if header_msg else _PACKET_FIELDS
                if classes:
                    msg = _dec_pb(classes[0] if header_msg else classes[1], body, fields)
                else:
                    msg = _dec_builtin(fields, body, 0, ln)
            except Gem5TraceError:
                raise
            except Exception as e:  # protobuf's DecodeError or our ValueError
                raise Gem5TraceError(f"{name}: {what} at byte {start}: {e}") from None
            state["pos"] = body_at + ln
            if not header_msg:
                missing = [k for k in _PACKET_REQUIRED if k not in msg]
                if missing:
                    raise Gem5TraceError(f"{name}: {what} at byte {start}: "
                                         f"missing required field(s) {missing}")
            return msg

    try:
        header = message("header")
    except BaseException:
        f.close()
        raise
    if header is None:
        f.close()
        raise Gem5TraceError(f"{name}: byte 4: no PacketHeader")
    header.setdefault("ver", 0)
    header.setdefault("id_strings", [])

    def packets() -> Iterator[dict[str, Any]]:
        try:
            i = 0
            while (p := message(f"packet {i}")) is not None:
                yield p
                i += 1
        finally:
            f.close()

    return header, packets()


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
_CMD_OF_KIND = np.array([CMD_READ_REQ, CMD_WRITE_REQ, CMD_SOFT_PF_REQ, 0], dtype=np.uint64)


def records_to_packet_columns(chunk: np.ndarray, first_instr: int, line_size: int = 64,
                              ticks_per_instruction: int = 250, prefetch: str = "softpf",
                              commands: Iterable[int] | None = None
                              ) -> tuple[dict[str, np.ndarray], int]:
    """(columns ``tick``, ``cmd``, ``addr``, ``size`` of the packets of one chunk, the
    instruction index after it); see :func:`records_to_packets` for the mapping.
    ``commands[tag]``, when given, is the command of a record with that tag (a trace
    imported from gem5 names them in its ``tags``), used when it agrees with the kind."""
    if prefetch not in ("softpf", "skip"):
        raise ValueError("prefetch must be 'softpf' or 'skip'")
    gaps = chunk["gap"].astype(np.int64)
    kind = chunk["kind"]
    is_mem = kind < KIND_MARKER
    idx = first_instr + np.cumsum(gaps) + np.cumsum(is_mem) - is_mem
    nxt = int(idx[-1] + is_mem[-1]) if chunk.size else first_instr
    keep = is_mem if prefetch == "softpf" else is_mem & (kind != KIND_PREFETCH)
    a = chunk["addr"][keep]
    last = a + (np.maximum(chunk["size"][keep], 1).astype(np.uint64) - np.uint64(1))
    ls = np.uint64(line_size)
    first_line = a // ls
    pieces = (last // ls - first_line + np.uint64(1)).astype(np.int64)
    rec = np.repeat(np.arange(a.size), pieces)
    j = (np.arange(rec.size) - np.repeat(np.cumsum(pieces) - pieces, pieces)).astype(np.uint64)
    line = first_line[rec] + j
    start = np.where(j == 0, a[rec], line * ls)
    end = np.minimum(last[rec], line * ls + (ls - np.uint64(1)))
    k = kind[keep]
    cmd = _CMD_OF_KIND[k]
    if commands is not None:
        table = np.array(list(commands), dtype=np.uint64)
        tag = chunk["tag"][keep]
        known = tag < table.size
        by_tag = table[np.minimum(tag, max(table.size - 1, 0))] if table.size else cmd
        kind_of = np.array([_CMD_KIND.get(int(c), 255) for c in table], dtype=np.uint8)
        agree = known & (kind_of[np.minimum(tag, max(table.size - 1, 0))] == k) \
            if table.size else known
        cmd = np.where(agree, by_tag, cmd)
    cols = {"tick": (idx[keep][rec] * ticks_per_instruction).astype(np.uint64),
            "cmd": cmd[rec], "addr": start,
            "size": end - start + np.uint64(1)}
    return cols, nxt


def _varint_len(v: np.ndarray) -> np.ndarray:
    n = np.ones(v.size, dtype=np.int64)
    for k in range(1, 10):
        n += v >= np.uint64(1 << (7 * k))
    return n


def encode_packet_columns(cols: dict[str, np.ndarray]) -> bytes:
    """The framed ``Packet`` messages (tick, cmd, addr, size; no optional field) for
    columns as :func:`records_to_packet_columns` returns, built with numpy. Byte-identical
    to :func:`encode`'s packets (a test holds the two against each other and against the
    protobuf backend), and about a hundred times faster than one message at a time."""
    fields = [(0x08, cols["tick"]), (0x10, cols["cmd"]), (0x18, cols["addr"]),
              (0x20, cols["size"])]
    lens = [_varint_len(v.astype(np.uint64)) for _, v in fields]
    body = 4 + sum(lens)  # < 128: one length byte
    total = body + 1
    out = np.zeros(int(total.sum()), dtype=np.uint8)
    pos = np.cumsum(total) - total
    out[pos] = body
    pos = pos + 1
    for (tag, v), n in zip(fields, lens, strict=True):
        out[pos] = tag
        pos = pos + 1
        v = v.astype(np.uint64)
        for k in range(int(n.max()) if n.size else 0):
            m = n > k
            byte = (v[m] >> np.uint64(7 * k)) & np.uint64(0x7F)
            byte |= (n[m] > k + 1).astype(np.uint64) << np.uint64(7)
            out[pos[m] + k] = byte
        pos = pos + n
    return out.tobytes()


def records_to_packets(records: np.ndarray | Iterable[np.ndarray], line_size: int = 64,
                       ticks_per_instruction: int = 250, prefetch: str = "softpf"
                       ) -> Iterator[dict[str, Any]]:
    """Yield gem5 packets for memory records, split at ``line_size``-byte boundaries.

    ``ticks_per_instruction`` (ticks; 250 = one instruction per cycle at 4 GHz with 1 ps
    ticks) spaces packets by the instruction index; the pieces of a split access share its
    tick. ``prefetch`` is ``"softpf"`` (SoftPFReq) or ``"skip"``.
    """
    chunks = [records] if isinstance(records, np.ndarray) else records
    instr = 0
    for chunk in chunks:
        cols, instr = records_to_packet_columns(chunk, instr, line_size,
                                                ticks_per_instruction, prefetch)
        names = ("tick", "cmd", "addr", "size")
        for row in zip(*(cols[k].tolist() for k in names), strict=True):
            yield dict(zip(names, row, strict=True))


#: commands a kvt can hold, in tag order: an imported record's ``tag`` names its command
#: (the kvt header's ``tags`` list is :data:`GEM5_TAGS`), so export restores it
IMPORTED_CMDS = (1, 4, 11, 22, 24, 25, 16, 12)
GEM5_TAGS = [f"gem5 {CMD_NAMES[c]}" for c in IMPORTED_CMDS]
_TAG_OF_CMD = {c: i for i, c in enumerate(IMPORTED_CMDS)}


class _Importer:
    """Packets to records, batch by batch, carrying the last instruction index across."""

    def __init__(self, ticks_per_instruction: int, name: str = "<gem5>") -> None:
        self.tpi, self.name = ticks_per_instruction, name
        self.last: int | None = None
        self.count = {"records": 0, "dropped": 0}

    def batch(self, packets: list[dict[str, Any]]) -> np.ndarray:
        rows = []
        for p in packets:
            cmd = p["cmd"]
            kind = _CMD_KIND.get(cmd)
            if kind is None:
                self.count["dropped"] += 1
                continue
            size = p["size"]
            if kind == KIND_PREFETCH:
                size = 1  # a kvt prefetch is one byte (traces/FORMAT.md)
            elif not 1 <= size <= 0xFFFF:
                raise Gem5TraceError(f"{self.name}: packet at tick {p['tick']}: size {size} "
                                     f"outside a kvt record's 1..65535")
            if not 0 <= p["addr"] <= (1 << 64) - size:  # FORMAT.md: no access wraps
                raise Gem5TraceError(f"{self.name}: packet at tick {p['tick']}: the access at "
                                     f"0x{p['addr']:x} of {size} bytes wraps past 2^64 - 1")
            gap = 0
            if self.tpi > 0:
                instr = p["tick"] // self.tpi
                gap = instr if self.last is None else max(0, instr - self.last - 1)
                gap = min(gap, 2**32 - 1)
                self.last = instr
            rows.append((p["addr"], gap, 0, size, kind, _TAG_OF_CMD[cmd], 0, 0))
        self.count["records"] += len(rows)
        return np.array(rows, dtype=RECORD_DTYPE)


def packets_to_records(packets: Iterable[dict[str, Any]], ticks_per_instruction: int = 0,
                       stats: dict[str, int] | None = None) -> np.ndarray:
    """Records for the packets whose command is a demand read/write or software prefetch.

    ReadReq/ReadExReq/ReadCleanReq/ReadSharedReq -> load, WriteReq/WriteLineReq -> store,
    SoftPFReq/SoftPFExReq -> prefetch (size 1, a kvt prefetch's size); ``tag`` is the
    command's index in :data:`IMPORTED_CMDS`. Other commands (write-backs, evictions,
    upgrades, hardware prefetches) are dropped and counted in ``stats["dropped"]``. With
    ``ticks_per_instruction > 0`` the gap is recovered from tick spacing (instruction index
    ``tick // ticks_per_instruction``; ``delta - 1`` for the first packet at a new index, 0
    for packets sharing one).
    """
    imp = _Importer(ticks_per_instruction)
    out = imp.batch(list(packets))
    if stats is not None:
        stats.update(imp.count)
    return out


def iter_gem5_records(src: str | os.PathLike[str] | IO[bytes], ticks_per_instruction: int = 0,
                      stats: dict[str, int] | None = None, chunk_records: int = 65536,
                      freq_ghz: float | None = None
                      ) -> tuple[dict[str, Any], Iterator[np.ndarray]]:
    """(gem5 header, iterator of record arrays of up to ``chunk_records``), streaming; see
    :func:`packets_to_records`. ``freq_ghz``, when given, sets ``ticks_per_instruction`` to
    the file's ``tick_freq`` over that frequency (one instruction per cycle). ``stats`` is
    filled in as the iterator runs."""
    header, packets = iter_packets(src)
    if freq_ghz is not None:
        ticks_per_instruction = max(1, round(header["tick_freq"] / (freq_ghz * 1e9)))
    name = str(src) if isinstance(src, str | os.PathLike) else str(getattr(src, "name", ""))
    imp = _Importer(ticks_per_instruction, name or "<gem5>")

    def gen() -> Iterator[np.ndarray]:
        batch: list[dict[str, Any]] = []
        for p in packets:
            batch.append(p)
            if len(batch) == chunk_records:
                yield imp.batch(batch)
                batch = []
        if batch:
            yield imp.batch(batch)
        if stats is not None:
            stats.update(imp.count)

    return header, gen()


def records_to_gem5(records: np.ndarray | Iterable[np.ndarray],
                    dst: str | os.PathLike[str] | IO[bytes], obj_id: str = "kvsim trace",
                    tick_freq: int = 10**12, line_size: int = 64,
                    ticks_per_instruction: int = 250, prefetch: str = "softpf",
                    compress: bool | None = None, commands: Iterable[int] | None = None,
                    packet_spacing: int = 0) -> int:
    """Export records as a gem5 packet trace, chunk by chunk; returns the number of packets
    written. ``compress=None`` gzips iff ``dst`` is a path ending in ``.gz``; gzip runs on
    every core (:class:`traces.convert._io.ParallelGzip`, level 6). A path is written via a
    temp file and renamed when complete. ``packet_spacing > 0`` replaces the instruction
    ticks by ``packet_spacing * (packet number + 1)``: one packet at a time, each
    ``packet_spacing`` ticks after the previous (pieces of a split access too)."""
    from ._io import open_output

    if compress is None:
        compress = isinstance(dst, str | os.PathLike) and os.fspath(dst).endswith(".gz")
    chunks = [records] if isinstance(records, np.ndarray) else records

    def write(raw: IO[bytes]) -> int:
        out = open_output(raw, "gz" if compress else None)
        n = 0
        try:
            out.write(MAGIC)
            body = encode({"obj_id": obj_id, "tick_freq": tick_freq}, [])[4:]
            out.write(body)
            instr = 0
            for chunk in chunks:
                if chunk.dtype != RECORD_DTYPE:
                    raise TypeError("records must have dtype traces.RECORD_DTYPE")
                cols, instr = records_to_packet_columns(chunk, instr, line_size,
                                                        ticks_per_instruction, prefetch,
                                                        commands)
                if packet_spacing > 0:
                    k = np.arange(n + 1, n + 1 + cols["addr"].size, dtype=np.uint64)
                    cols["tick"] = k * np.uint64(packet_spacing)
                out.write(encode_packet_columns(cols))
                n += cols["addr"].size
        finally:
            if out is not raw:
                out.close()
        return n

    if isinstance(dst, str | os.PathLike):
        tmp = Path(f"{os.fspath(dst)}.tmp-{os.getpid()}")
        try:
            with open(tmp, "wb") as f:
                n = write(f)
            os.replace(tmp, dst)
        finally:
            tmp.unlink(missing_ok=True)
        return n
    return write(dst)


def gem5_to_records(src: str | os.PathLike[str] | IO[bytes] | bytes,
                    ticks_per_instruction: int = 0, stats: dict[str, int] | None = None
                    ) -> tuple[dict[str, Any], np.ndarray]:
    """Read a gem5 packet trace into (gem5 header, records); see :func:`packets_to_records`."""
    if isinstance(src, bytes | bytearray):
        header, packets = read_packets(src)
        return header, packets_to_records(packets, ticks_per_instruction, stats)
    header, chunks = iter_gem5_records(src, ticks_per_instruction, stats)
    parts = list(chunks)
    return header, np.concatenate(parts) if parts else np.zeros(0, dtype=RECORD_DTYPE)


def convert_read(src: IO[bytes], opts: Any) -> tuple[Iterator[np.ndarray], dict[str, Any]]:
    """The converters' table reader (:mod:`traces.convert.formats`): packets become records
    at ``opts.freq_ghz`` instructions per ns; the header keeps gem5's command names as
    tags and the trace's object id and tick frequency."""
    g5, rec = iter_gem5_records(src, freq_ghz=opts.freq_ghz)
    return rec, {"tags": GEM5_TAGS, "gem5": {"obj_id": g5["obj_id"],
                                             "tick_freq": g5["tick_freq"],
                                             "freq_ghz": opts.freq_ghz}}


def convert_write(chunks: Iterable[np.ndarray], header: dict[str, Any], out: IO[bytes],
                  opts: Any) -> int:
    """The converters' table writer: ticks made from the gaps at ``opts.freq_ghz``; a
    trace imported from gem5 keeps its commands, object id and tick frequency."""
    g5 = header.get("gem5") or {}
    tick_freq = int(g5.get("tick_freq") or 10**12)
    commands = IMPORTED_CMDS if header.get("tags") == GEM5_TAGS else None
    return records_to_gem5(chunks, out, obj_id=str(g5.get("obj_id") or "kvsim trace"),
                           tick_freq=tick_freq,
                           ticks_per_instruction=max(1, round(tick_freq / (opts.freq_ghz * 1e9))),
                           compress=False, commands=commands)
