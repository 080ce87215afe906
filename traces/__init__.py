"""kvsim traces: read, write, inspect and convert ``.kvt`` memory-access traces.

The format is specified in ``traces/FORMAT.md``; its byte layout is ``traces/trace_format.h``.

Typical use::

    from kvsim import traces
    with traces.open("run.kvt") as tr:          # path, "-" (stdin) or binary stream
        header = tr.header                      # dict, includes "format_version"
        for chunk in tr:                        # numpy arrays of traces.RECORD_DTYPE
            loads = chunk[chunk["kind"] == traces.KIND_LOAD]
    records = traces.read_all("run.kvt")        # one array; raises TraceError if damaged
    with traces.Writer("out.kvt", header) as w: # zstd of byte planes by default
        w.write(records)
    traces.summarize("out.kvt")["footprint"]    # {"lines": ..., "pages_4k": ..., ...}
    df = traces.to_dataframe("run.kvt")         # pandas; kind/tag/site/marker by name
    traces.reuse_histogram("run.kvt")           # reuse distances per tag (compiled, any length)
    traces.command_chains(records)              # pointer-chase depth per command

Converters to and from other simulators' formats are in :mod:`traces.convert`.
"""

from __future__ import annotations

from typing import Any

from .format import (
    CODEC_RAW,
    CODEC_ZSTD,
    CODEC_ZSTD_PLANES,
    DEFAULT_CHUNK_RECORDS,
    DEP_CHECK_WINDOW,
    KIND_LOAD,
    KIND_MARKER,
    KIND_NAMES,
    KIND_PREFETCH,
    KIND_STORE,
    MARK_BATCH,
    MARK_COMMAND,
    MARK_NONE,
    MARK_OP,
    MARK_PHASE,
    MARK_SYSCALL,
    MARK_WARMUP_BEGIN,
    MARK_WARMUP_END,
    MARKER_NAMES,
    MAX_CHUNK_RECORDS,
    MIN_VERSION,
    NUM_KINDS,
    NUM_MARKERS,
    NUM_SYSCALLS,
    NUM_TAGS,
    RECORD_SIZE,
    SYSCALL_EPOLL_WAIT,
    SYSCALL_FILE_READ,
    SYSCALL_NAMES,
    SYSCALL_PAGE_FAULT,
    SYSCALL_READ,
    SYSCALL_SITES,
    SYSCALL_VERSION,
    SYSCALL_WRITE,
    TAG_ARGV,
    TAG_BUCKET,
    TAG_CHILD_BUCKET,
    TAG_DICT_ENTRY,
    TAG_DICT_TABLE,
    TAG_EXPIRE,
    TAG_KEY,
    TAG_NAMES,
    TAG_OBJECT,
    TAG_OTHER,
    TAG_QUERY_BUF,
    TAG_REPLY_BUF,
    TAG_SLOT_TABLE,
    TAG_SNAPSHOT_BUF,
    TAG_STACK,
    TAG_TABLE_META,
    TAG_VALUE,
    VERSION,
    TraceError,
    marker_record,
)
from .reader import ChunkInfo, TraceReader, read_all
from .reader import open_trace as open  # noqa: A001 -- the documented entry point

# Imported at first use, so reading a trace (``kvsim simulate``) does not pay for them (nor
# import numpy, which RECORD_DTYPE is made of).
_LAZY = {
    "RECORD_DTYPE": "format",
    "chain_depths": "chains", "chain_parents": "chains", "command_chains": "chains",
    "to_dataframe": "frame",
    "check_records": "inspect", "footprint_by_tag": "inspect", "reuse_distance": "inspect",
    "summarize": "inspect",
    "reuse_distances": "reuse", "reuse_histogram": "reuse",
    "Writer": "writer", "recompress": "writer", "DEFAULT_CODEC": "writer",
}


def __getattr__(name: str) -> Any:
    mod = _LAZY.get(name)
    if mod is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f".{mod}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))

#: The JSON header as returned by ``reader.header``: a plain dict of the JSON keys plus
#: ``"format_version"``.
Header = dict[str, Any]

__version__ = "0.1.0"

__all__ = [
    # reading / writing
    "open", "read_all", "Writer", "recompress", "DEFAULT_CODEC", "TraceReader", "ChunkInfo",
    "TraceError",
    "Header", "RECORD_DTYPE", "RECORD_SIZE", "VERSION", "DEFAULT_CHUNK_RECORDS",
    "MAX_CHUNK_RECORDS", "DEP_CHECK_WINDOW", "CODEC_RAW", "CODEC_ZSTD", "CODEC_ZSTD_PLANES",
    "MIN_VERSION", "marker_record",
    # inspection
    "summarize", "reuse_distance", "check_records", "to_dataframe",
    "footprint_by_tag", "reuse_histogram", "reuse_distances", "chain_depths", "chain_parents",
    "command_chains",
    # enums (read from trace_format.h at import)
    "KIND_LOAD", "KIND_STORE", "KIND_PREFETCH", "KIND_MARKER", "NUM_KINDS", "KIND_NAMES",
    "MARK_NONE", "MARK_COMMAND", "MARK_OP", "MARK_PHASE", "MARK_WARMUP_BEGIN",
    "MARK_WARMUP_END", "MARK_BATCH", "MARK_SYSCALL", "NUM_MARKERS", "MARKER_NAMES",
    "SYSCALL_READ", "SYSCALL_WRITE", "SYSCALL_EPOLL_WAIT", "SYSCALL_FILE_READ",
    "SYSCALL_PAGE_FAULT", "NUM_SYSCALLS", "SYSCALL_NAMES", "SYSCALL_SITES", "SYSCALL_VERSION",
    "TAG_OTHER", "TAG_BUCKET", "TAG_CHILD_BUCKET", "TAG_DICT_TABLE", "TAG_DICT_ENTRY",
    "TAG_TABLE_META", "TAG_KEY", "TAG_OBJECT", "TAG_VALUE", "TAG_EXPIRE", "TAG_SLOT_TABLE",
    "TAG_QUERY_BUF", "TAG_REPLY_BUF", "TAG_SNAPSHOT_BUF", "TAG_ARGV", "TAG_STACK", "NUM_TAGS",
    "TAG_NAMES",
]  # fmt: skip
