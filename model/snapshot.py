"""Snapshot save/load in c_ref's format (``c_ref/SNAPSHOT.md``, ``c_ref/snapshot.c``).

Layout (all lengths in RDB length encoding)::

    "KVSNAP" 0x00 version(=1)
    0xFB len(number of keys)                          RESIZEDB hint
    { [0xFC expire_ms:i64 little-endian] 0x00 len(key) key len(value) value }*
    0xFF crc64:u64 little-endian                       CRC-64/Jones of every byte before it
                                                       (0: saved without a checksum, unchecked)

RDB length encoding: ``00xxxxxx`` (6 bits), ``01xxxxxx xxxxxxxx`` (14 bits, big endian),
``0x80`` + u32 big endian, ``0x81`` + u64 big endian.

Save writes every stored key, logically expired or not; load drops keys whose expire time
has passed (``now > expire``), as a primary loading an RDB does. Record order is the
iteration order of the writer, so snapshots are compared by content (``parse_snapshot``),
not bytes, across implementations.
"""

from __future__ import annotations

import struct

from kvsim.model.keyspace import Keyspace

__all__ = [
    "SnapshotError",
    "Record",
    "encode_len",
    "save_snapshot",
    "parse_snapshot",
    "load_snapshot",
    "snapshot_contents",
    "crc64",
]

MAGIC = b"KVSNAP"
VERSION = 2
OP_STRING, OP_RESIZEDB, OP_EXPIRETIME_MS, OP_EOF = 0x00, 0xFB, 0xFC, 0xFF

_CRC64_REFLECTED_POLY = 0x95AC9329AC4BC9B5


def _crc64_table() -> list[int]:
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ _CRC64_REFLECTED_POLY if c & 1 else c >> 1
        table.append(c)
    return table


_CRC64_TABLE = _crc64_table()


def crc64(data: bytes, crc: int = 0) -> int:
    """CRC-64/Jones as Valkey's ``crc64.c`` (reflected, init 0, no final xor)."""
    t = _CRC64_TABLE
    for b in data:
        crc = t[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc


Record = tuple[bytes, bytes, int | None]  # key, value, absolute expire ms or None


class SnapshotError(ValueError):
    """Malformed snapshot; the message matches c_ref's ``ksLastError`` text."""


def encode_len(n: int) -> bytes:
    if n < 1 << 6:
        return bytes([n])
    if n < 1 << 14:
        return bytes([0x40 | (n >> 8), n & 0xFF])
    if n <= 0xFFFFFFFF:
        return b"\x80" + n.to_bytes(4, "big")
    return b"\x81" + n.to_bytes(8, "big")


def save_snapshot(records: list[Record]) -> bytes:
    """Serialize records (in the given order)."""
    out = bytearray(MAGIC + bytes([0, VERSION]))
    out += bytes([OP_RESIZEDB]) + encode_len(len(records))
    for key, val, exp in records:
        if exp is not None:
            out += bytes([OP_EXPIRETIME_MS]) + struct.pack("<q", exp)
        out += bytes([OP_STRING]) + encode_len(len(key)) + key + encode_len(len(val)) + val
    out.append(OP_EOF)
    out += struct.pack("<Q", crc64(bytes(out)))
    return bytes(out)


class _Reader:
    def __init__(self, buf: bytes, pos: int, end: int) -> None:
        self.buf, self.p, self.end = buf, pos, end

    def byte(self) -> int:
        if self.p >= self.end:
            raise SnapshotError("snapshot truncated")
        b = self.buf[self.p]
        self.p += 1
        return b

    def length(self) -> int:
        b = self.byte()
        t = b >> 6
        if t == 0:
            return b & 0x3F
        if t == 1:
            return ((b & 0x3F) << 8) | self.byte()
        n = {0x80: 4, 0x81: 8}.get(b)
        if n is None:
            raise SnapshotError("snapshot corrupt: bad length encoding")
        if self.end - self.p < n:
            raise SnapshotError("snapshot truncated")
        v = int.from_bytes(self.buf[self.p : self.p + n], "big")
        self.p += n
        return v

    def string(self) -> bytes:
        n = self.length()
        if self.end - self.p < n:
            raise SnapshotError("snapshot truncated")
        s = self.buf[self.p : self.p + n]
        self.p += n
        return s


def parse_snapshot(buf: bytes) -> tuple[int | None, list[Record]]:
    """Return (RESIZEDB hint or None, records in file order); raise SnapshotError."""
    if len(buf) < 17 or buf[:6] != MAGIC:
        raise SnapshotError(
            "snapshot corrupt: bad magic" if len(buf) >= 6 and buf[:6] != MAGIC
            else "snapshot truncated"
        )
    if buf[6] != 0 or buf[7] != VERSION:
        raise SnapshotError(f"snapshot: unsupported version {buf[7]}")
    (crc,) = struct.unpack("<Q", buf[-8:])
    if crc != 0 and crc64(buf[:-8]) != crc:
        raise SnapshotError("snapshot corrupt or truncated: checksum mismatch")
    r = _Reader(buf, 8, len(buf))
    hint = None
    op = r.byte()
    if op == OP_RESIZEDB:
        hint = r.length()
        op = r.byte()
    records: list[Record] = []
    seen: set[bytes] = set()
    expire: int | None = None
    while op != OP_EOF:
        if op == OP_EXPIRETIME_MS:
            if r.end - r.p < 8:
                raise SnapshotError("snapshot truncated")
            (expire,) = struct.unpack("<q", buf[r.p : r.p + 8])
            r.p += 8
            op = r.byte()
            if op != OP_STRING:
                raise SnapshotError("snapshot corrupt: expire not followed by a key")
            continue
        if op != OP_STRING:
            raise SnapshotError("snapshot corrupt: unknown record type")
        key = r.string()
        val = r.string()
        if key in seen:
            raise SnapshotError("snapshot corrupt: duplicate key")
        seen.add(key)
        records.append((key, val, expire))
        expire = None
        op = r.byte()
    if len(buf) - r.p != 8:
        raise SnapshotError(
            "snapshot truncated" if len(buf) - r.p < 8
            else "snapshot corrupt: bytes after the checksum"
        )
    return hint, records


def snapshot_contents(buf: bytes) -> dict[bytes, tuple[bytes, int | None]]:
    """Snapshot content as key -> (value, expire or None), order-free."""
    return {k: (v, e) for k, v, e in parse_snapshot(buf)[1]}


def model_records(ks: Keyspace) -> list[Record]:
    return [(k, v, e) for k, (v, e) in sorted(ks.items().items())]


def load_snapshot(ks: Keyspace, buf: bytes) -> None:
    """Replace the model's contents by the snapshot's (dropping expired keys); on error
    the model is left unchanged."""
    _, records = parse_snapshot(buf)
    ks.data.clear()
    ks.expires.clear()
    ks.slots.clear()
    for k, v, e in records:
        if e is not None and ks.now_ms > e:
            continue
        ks.db_add(k, v)
        if e is not None:
            ks.set_expire(k, e)
