"""Constants, numpy dtype and binary layouts of the kvsim trace format (``.kvt``).

``trace_format.h`` (the one C definition of the layout, shipped beside this module) is parsed
at import: every stream constant (``#define KVT_*``) and every enum member (record kinds,
marker types, structure tags, codecs) is read from it, never repeated here. ``FORMAT.md`` is
the prose specification. ``traces/tests/test_format.py`` compiles a tiny C program against
the header and checks that the parse, the sizes and the offsets agree with the compiler.

Naming: C ``KVT_LOAD`` -> ``KIND_LOAD``, ``KVT_TAG_BUCKET`` -> ``TAG_BUCKET``,
``KVT_MARK_OP`` -> ``MARK_OP``, ``KVT_CODEC_ZSTD`` -> ``CODEC_ZSTD``, ``KVT_NUM_TAGS`` ->
``NUM_TAGS``; ``KIND_NAMES``, ``MARKER_NAMES`` and ``TAG_NAMES`` are the members' short
names in lower case, indexed by value (``TAG_NAMES[TAG_KEY] == "key"``).
"""

from __future__ import annotations

import ast
import re
import struct
from pathlib import Path
from typing import Any

HEADER_PATH = Path(__file__).with_name("trace_format.h")

#: enum name in trace_format.h -> (C member prefix, Python constant prefix, names list)
ENUMS = {
    "kvtKind": ("KVT_", "KIND_", "KIND_NAMES"),
    "kvtMarker": ("KVT_MARK_", "MARK_", "MARKER_NAMES"),
    "kvtTag": ("KVT_TAG_", "TAG_", "TAG_NAMES"),
    "kvtCodec": ("KVT_CODEC_", "CODEC_", "CODEC_NAMES"),
    "kvtSyscall": ("KVT_SYSCALL_", "SYSCALL_", "SYSCALL_NAMES"),
    "kvtWork": ("KVT_WORK_", "WORK_", "WORK_NAMES"),
}

_COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)
_DEFINE = re.compile(r"^#define\s+(KVT_\w+)\s+(.+?)\s*$", re.M)
_ENUM = re.compile(r"\benum\s+(\w+)\s*\{(.*?)\}\s*;", re.S)
_INT_SUFFIX = re.compile(r"\b(0[xX][0-9a-fA-F]+|\d+)[uUlL]+\b")


def _c_int(expr: str, where: str) -> int:
    """Value of an integer constant expression of the header (literals, ( ), <<, |, +, -)."""
    tree = ast.parse(_INT_SUFFIX.sub(r"\1", expr).strip(), mode="eval")
    ops = {ast.LShift: lambda a, b: a << b, ast.BitOr: lambda a, b: a | b,
           ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b}

    def ev(node: ast.AST) -> int:
        if isinstance(node, ast.Constant) and type(node.value) is int:
            return node.value
        if isinstance(node, ast.BinOp) and type(node.op) in ops:
            return ops[type(node.op)](ev(node.left), ev(node.right))
        raise ValueError(f"{where}: unsupported constant expression {expr!r}")

    return ev(tree.body)


def parse_header(text: str) -> tuple[dict[str, int | bytes], dict[str, dict[str, int]]]:
    """Parse trace_format.h: (``#define KVT_*`` values, ``{enum: {member: value}}``).

    String defines become bytes (C escapes decoded, without the implicit NUL); enum members
    without ``= value`` follow the previous one, as in C.
    """
    text = _COMMENT.sub(" ", text)
    defines: dict[str, int | bytes] = {}
    for name, value in _DEFINE.findall(text):
        if value.startswith('"'):
            defines[name] = ast.literal_eval("b" + value)
        elif not name.endswith("_H"):
            defines[name] = _c_int(value, name)
    enums: dict[str, dict[str, int]] = {}
    for name, body in _ENUM.findall(text):
        members, value = {}, -1
        for item in filter(None, (x.strip() for x in body.split(","))):
            member, _, expr = (x.strip() for x in item.partition("="))
            value = _c_int(expr, member) if expr else value + 1
            members[member] = value
        enums[name] = members
    return defines, enums


def constants_from_header(text: str) -> dict[str, object]:
    """The module-level constants this module derives from a trace_format.h text."""
    defines, enums = parse_header(text)
    out: dict[str, object] = {}
    for enum, (c_prefix, py_prefix, names_key) in ENUMS.items():
        if enum not in enums:
            raise ValueError(f"trace_format.h: enum {enum} not found")
        names: dict[int, str] = {}
        for member, value in enums[enum].items():
            if member.startswith("KVT_NUM_"):
                out[member.removeprefix("KVT_")] = value
                continue
            short = member.removeprefix(c_prefix)
            out[py_prefix + short] = value
            names[value] = short.lower()
        if sorted(names) != list(range(len(names))):
            raise ValueError(f"trace_format.h: enum {enum} values are not 0..{len(names) - 1}")
        out[names_key] = [names[i] for i in range(len(names))]
    for key in ("KVT_MAGIC", "KVT_MAGIC_LEN", "KVT_VERSION", "KVT_MIN_VERSION",
                "KVT_PLANES_VERSION", "KVT_SYSCALL_VERSION", "KVT_FIXED_HEADER_LEN",
                "KVT_CHUNK_MAGIC", "KVT_END_MAGIC", "KVT_DEFAULT_CHUNK_RECORDS",
                "KVT_MAX_CHUNK_RECORDS", "KVT_DEP_CHECK_WINDOW", "KVT_WORK_COUNT_BITS"):
        if key not in defines:
            raise ValueError(f"trace_format.h: #define {key} not found")
        out[key.removeprefix("KVT_")] = defines[key]
    magic_len = out.pop("MAGIC_LEN")  # the magic's bytes on disk: the literal's, NUL included
    out["MAGIC"] = (bytes(out["MAGIC"]) + b"\x00")[:magic_len]
    out["CODEC_NAMES"] = dict(enumerate(out["CODEC_NAMES"]))  # codec value -> name
    # a SYSCALL marker's site is named "sys.<call>" (FORMAT.md, "System calls")
    out["SYSCALL_SITES"] = [f"sys.{n}" for n in out["SYSCALL_NAMES"]]
    return out


try:
    _CONSTANTS = constants_from_header(HEADER_PATH.read_text())
except OSError as _e:
    raise ImportError(f"kvsim.traces: cannot read {HEADER_PATH.name} beside {__name__} "
                      f"(a broken install?): {_e.strerror}") from None
globals().update(_CONSTANTS)

# Names the rest of kvsim uses (all of them come from the header above):
#   MAGIC (8 bytes, NUL included), VERSION (written), MIN_VERSION (the oldest read),
#   PLANES_VERSION (the first with CODEC_ZSTD_PLANES), FIXED_HEADER_LEN, CHUNK_MAGIC, END_MAGIC,
#   DEFAULT_CHUNK_RECORDS, MAX_CHUNK_RECORDS, DEP_CHECK_WINDOW, KIND_*, MARK_*, TAG_*,
#   CODEC_*, NUM_KINDS, NUM_MARKERS, NUM_TAGS, KIND_NAMES, MARKER_NAMES, TAG_NAMES,
#   CODEC_NAMES (a dict by value), SYSCALL_VERSION (the first with MARK_SYSCALL), SYSCALL_*,
#   NUM_SYSCALLS, SYSCALL_NAMES and SYSCALL_SITES (the site naming each call, "sys.read", ...).

#: Reader sanity bound on the JSON header length in bytes (not a format constant: a
#: corrupted length field must not make the reader allocate gigabytes).
MAX_JSON_LEN = 64 << 20

#: zstd compression level used by the Python writer. Fixed so output bytes are deterministic
#: for a given zstd library version (single-threaded, content size written in the frame).
ZSTD_LEVEL = 3

# --- Layouts ----------------------------------------------------------------------------------
#: One trace record (kvtRecord): 24 bytes, little-endian, naturally aligned. The fields, in
#: order: addr (virtual byte address; a marker's value), gap (non-memory instructions since the
#: previous record), dep (records back to the producing load; 0 = none), size (bytes accessed;
#: prefetch 1, marker 0), kind (KIND_*), tag (TAG_*, named by header["tags"]), site (code site
#: id, named by header["sites"]), flags (a marker's MARK_*; otherwise 0).
RECORD_FIELDS = (("addr", "<u8"), ("gap", "<u4"), ("dep", "<u4"), ("size", "<u2"),
                 ("kind", "u1"), ("tag", "u1"), ("site", "<u2"), ("flags", "<u2"))
#: The same layout as a struct (no padding): what code without numpy reads.
RECORD_STRUCT = struct.Struct("<" + "".join({"<u8": "Q", "<u4": "I", "<u2": "H", "u1": "B"}[t]
                                            for _, t in RECORD_FIELDS))
RECORD_SIZE = RECORD_STRUCT.size
assert RECORD_SIZE == 24


def __getattr__(name: str) -> Any:
    """``RECORD_DTYPE``, the numpy dtype of RECORD_FIELDS, made at its first use: reading a
    trace into the compiled engine (``kvsim simulate``) never imports numpy."""
    if name != "RECORD_DTYPE":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import numpy as np

    dtype = np.dtype(list(RECORD_FIELDS))
    assert dtype.itemsize == RECORD_SIZE
    globals()["RECORD_DTYPE"] = dtype
    return dtype


def marker_record(flag: int) -> Any:
    """One ``MARKER`` record (a one-element array of ``RECORD_DTYPE``) with ``flags = flag``
    (``MARK_WARMUP_BEGIN``, ``MARK_WARMUP_END``, ...), every other field 0."""
    import numpy as np

    r = np.zeros(1, dtype=__getattr__("RECORD_DTYPE"))
    r["kind"], r["flags"] = _CONSTANTS["KIND_MARKER"], flag
    return r


FIXED_HEADER = struct.Struct("<8sHHI")  # magic, version, record_size, json_len
CHUNK_HEADER = struct.Struct("<III B3s I")  # magic, n_records, stored_bytes, codec, rsvd, crc
END_CHUNK = struct.Struct("<IIQ")  # magic, n_chunks, total_records
assert FIXED_HEADER.size == _CONSTANTS["FIXED_HEADER_LEN"]
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
    + ["RECORD_DTYPE", "TraceError", "zstd_compress_bound"]
)
