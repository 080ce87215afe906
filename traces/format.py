"""Constants, numpy dtype and binary layouts of the kvsim trace format (``.kvt``).

Everything here mirrors ``trace_format.h`` (the one C definition of the layout) and
``FORMAT.md`` (the prose specification). ``traces/tests/test_format.py`` compiles a tiny C
program against the header and checks that sizes, offsets and enum values agree.

Naming: C ``KVT_LOAD`` -> ``KIND_LOAD``, ``KVT_TAG_BUCKET`` -> ``TAG_BUCKET``,
``KVT_MARK_OP`` -> ``MARK_OP``, ``KVT_CODEC_ZSTD`` -> ``CODEC_ZSTD``.
"""

from __future__ import annotations

import struct

import numpy as np

# --- Stream constants (trace_format.h) ----------------------------------------------------
MAGIC = b"KVTRACE\x00"  #: KVT_MAGIC, 8 bytes including the NUL
VERSION = 1  #: KVT_VERSION
FIXED_HEADER_LEN = 16  #: KVT_FIXED_HEADER_LEN: magic + u16 version + u16 record_size + u32 len
CHUNK_MAGIC = 0x4B43564B  #: KVT_CHUNK_MAGIC, b"KVCK" read as a little-endian u32
END_MAGIC = 0x4E45564B  #: KVT_END_MAGIC, b"KVEN" read as a little-endian u32
DEFAULT_CHUNK_RECORDS = 65536  #: KVT_DEFAULT_CHUNK_RECORDS (records per chunk)
MAX_CHUNK_RECORDS = 1 << 22  #: KVT_MAX_CHUNK_RECORDS; readers reject larger chunks
#: Reader sanity bound on the JSON header length in bytes (not a format constant: a
#: corrupted length field must not make the reader allocate gigabytes).
MAX_JSON_LEN = 64 << 20

#: zstd compression level used by the Python writer. Fixed so output bytes are deterministic
#: for a given zstd library version (single-threaded, content size written in the frame).
ZSTD_LEVEL = 3

# --- Codecs (enum kvtCodec) -----------------------------------------------------------------
CODEC_RAW = 0  #: payload = n_records * 24 bytes
CODEC_ZSTD = 1  #: payload = one zstd frame of n_records * 24 bytes
CODEC_NAMES = {CODEC_RAW: "raw", CODEC_ZSTD: "zstd"}

# --- Record kinds (enum kvtKind) ------------------------------------------------------------
KIND_LOAD = 0  #: demand load of `size` bytes at `addr`
KIND_STORE = 1  #: demand store
KIND_PREFETCH = 2  #: software prefetch of the line at addr (size 1)
KIND_MARKER = 3  #: not a memory access: `flags` holds a MARK_*, addr a value
NUM_KINDS = 4
KIND_NAMES = ["load", "store", "prefetch", "marker"]

# --- Marker types (enum kvtMarker) ----------------------------------------------------------
MARK_NONE = 0
MARK_COMMAND = 1  #: a command starts; addr = command index
MARK_OP = 2  #: an operation (key) starts; addr = op index
MARK_PHASE = 3  #: a phase starts; addr = phase id (header "phases")
MARK_WARMUP_BEGIN = 4  #: records up to WARMUP_END are warm-up, not measured
MARK_WARMUP_END = 5
MARK_BATCH = 6  #: a prefetch batch starts; addr = batch size
NUM_MARKERS = 7
MARKER_NAMES = ["none", "command", "op", "phase", "warmup_begin", "warmup_end", "batch"]

# --- Structure tags (enum kvtTag); the trace header's "tags" list is authoritative ---------
TAG_OTHER = 0
TAG_BUCKET = 1
TAG_CHILD_BUCKET = 2
TAG_DICT_TABLE = 3
TAG_DICT_ENTRY = 4
TAG_TABLE_META = 5
TAG_KEY = 6
TAG_OBJECT = 7
TAG_VALUE = 8
TAG_EXPIRE = 9
TAG_SLOT_TABLE = 10
TAG_QUERY_BUF = 11
TAG_REPLY_BUF = 12
TAG_SNAPSHOT_BUF = 13
TAG_ARGV = 14
TAG_STACK = 15
NUM_TAGS = 16
TAG_NAMES = [
    "other", "bucket", "child_bucket", "dict_table", "dict_entry", "table_meta", "key",
    "object", "value", "expire", "slot_table", "query_buf", "reply_buf", "snapshot_buf",
    "argv", "stack",
]  # fmt: skip

# --- Layouts ----------------------------------------------------------------------------------
#: One trace record (kvtRecord): 24 bytes, little-endian, naturally aligned.
RECORD_DTYPE = np.dtype(
    [
        ("addr", "<u8"),  # virtual byte address (marker: marker value)
        ("gap", "<u4"),  # non-memory instructions since the previous record
        ("dep", "<u4"),  # records back to the producing load; 0 = none
        ("size", "<u2"),  # bytes accessed (prefetch 1, marker 0)
        ("kind", "u1"),  # KIND_*
        ("tag", "u1"),  # TAG_* (named by header["tags"])
        ("site", "<u2"),  # code site id (named by header["sites"])
        ("flags", "<u2"),  # marker: MARK_*; otherwise 0
    ]
)
RECORD_SIZE = RECORD_DTYPE.itemsize
assert RECORD_SIZE == 24

FIXED_HEADER = struct.Struct("<8sHHI")  # magic, version, record_size, json_len
CHUNK_HEADER = struct.Struct("<III B3s I")  # magic, n_records, stored_bytes, codec, rsvd, crc
END_CHUNK = struct.Struct("<IIQ")  # magic, n_chunks, total_records
assert FIXED_HEADER.size == FIXED_HEADER_LEN
assert CHUNK_HEADER.size == 20
assert END_CHUNK.size == 16


class TraceError(ValueError):
    """A trace is malformed, corrupted or truncated.

    ``str(err)`` is one line naming the file (or ``<stdin>``), the chunk number and the
    byte offset. The parts are also available as attributes ``name``, ``chunk`` (None for
    the file header, ``"end"`` for the end chunk) and ``offset`` (byte offset of the part
    that failed, from the start of the stream).
    """

    def __init__(self, message: str, *, name: str = "", chunk: int | str | None = None,
                 offset: int | None = None) -> None:
        super().__init__(message)
        self.name = name
        self.chunk = chunk
        self.offset = offset


def zstd_compress_bound(n: int) -> int:
    """Upper bound in bytes of a zstd frame holding ``n`` input bytes (ZSTD_COMPRESSBOUND)."""
    margin = ((128 << 10) - n) >> 11 if n < (128 << 10) else 0
    return n + (n >> 8) + margin + 64  # +64: frame header/footer slack beyond the C macro


__all__ = sorted(
    [n for n in dir() if n.isupper() and not n.startswith("_")]
    + ["TraceError", "zstd_compress_bound"]
)
