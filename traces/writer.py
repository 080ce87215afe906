"""Writer for kvsim traces (``.kvt``), and :func:`recompress` (re-encode a trace's chunks).

Output is deterministic: the JSON header is written with sorted keys and no whitespace, chunk
boundaries depend only on the record sequence (not on how it was split across
:meth:`Writer.write` calls), and zstd runs single-threaded at the fixed level
:data:`traces.format.ZSTD_LEVEL`. Writing to a path goes through a temporary file in the same
directory that is renamed over the target only by a successful :meth:`Writer.close`; on any
error the temporary file is removed, so a partial trace never appears under the target name.
"""

from __future__ import annotations

import json
import os
import stat
import sys
import tempfile
import threading
import warnings
import zlib
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import IO, Any

import numpy as np
import zstandard

from . import planes
from .format import (
    CHUNK_HEADER,
    CHUNK_MAGIC,
    CODEC_NAMES,
    CODEC_RAW,
    CODEC_ZSTD_PLANES,
    DEFAULT_CHUNK_RECORDS,
    END_CHUNK,
    END_MAGIC,
    FIXED_HEADER,
    MAGIC,
    MAX_CHUNK_RECORDS,
    MIN_VERSION,
    PLANES_VERSION,
    RECORD_DTYPE,
    RECORD_SIZE,
    VERSION,
    ZSTD_LEVEL,
)
from .reader import PathOrStream, TraceReader, open_trace
from .validate import RecordError, RecordValidator

__all__ = ["Writer", "encode_header", "recompress"]

#: codec name -> value; a writer's default is DEFAULT_CODEC
_CODECS = {name: value for value, name in CODEC_NAMES.items()}
DEFAULT_CODEC = "zstd_planes"


def _json_default(obj: Any) -> Any:
    """Let headers hold numpy scalars and arrays (common in workload specs)."""
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.floating):
        return float(obj)
    if isinstance(obj, np.bool_):
        return bool(obj)
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    raise TypeError(f"header value of type {type(obj).__name__} is not JSON serializable")


def encode_header(header: dict[str, Any], version: int = VERSION) -> bytes:
    """Return the file header bytes (fixed part, canonical JSON, crc32) for ``header``, of
    format ``version`` (MIN_VERSION .. VERSION).

    ``format_version`` is set to the binary version; a different value raises ValueError.
    """
    if not MIN_VERSION <= version <= VERSION:
        raise ValueError(f"format version {version}: writers write {MIN_VERSION}..{VERSION}")
    h = dict(header)
    if h.setdefault("format_version", version) != version:
        raise ValueError(f"header format_version {h['format_version']!r} != {version}")
    body = json.dumps(h, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      allow_nan=False, default=_json_default).encode("utf-8")
    fixed = FIXED_HEADER.pack(MAGIC, version, RECORD_SIZE, len(body))
    crc = zlib.crc32(body, zlib.crc32(fixed))
    return fixed + body + crc.to_bytes(4, "little")


def as_records(records: Any) -> np.ndarray:
    """Return ``records`` as a contiguous little-endian RECORD_DTYPE array (copy if needed).

    Accepts any structured array with exactly RECORD_DTYPE's field names (fields are matched
    by name, values cast safely); raises TypeError otherwise.
    """
    arr = np.asarray(records)
    if arr.dtype == RECORD_DTYPE:
        return np.ascontiguousarray(arr).reshape(-1)
    if arr.dtype.names is None or set(arr.dtype.names) != set(RECORD_DTYPE.names or ()):
        raise TypeError(f"records must have dtype traces.RECORD_DTYPE, got {arr.dtype}")
    out = np.empty(arr.size, dtype=RECORD_DTYPE)
    flat = arr.reshape(-1)
    for name in RECORD_DTYPE.names or ():
        out[name] = flat[name].astype(RECORD_DTYPE[name], casting="same_kind")
    return out



def write_all(f: IO[bytes], data: Any) -> None:
    """Write every byte of ``data`` to ``f``. A buffered stream whose file fails partway
    through a large write (its reader closed the pipe) returns the short count instead of
    raising; writing the rest raises the error, so nothing is lost without one."""
    view = memoryview(data).cast("B")
    while view.nbytes:
        k = f.write(view)
        if k is None or k >= view.nbytes:  # None: a stream that does not count (all taken)
            return
        if k <= 0:
            raise OSError(f"short write: {view.nbytes} bytes not taken")
        view = view[k:]


def _special(path: str | os.PathLike) -> bool:
    """Whether ``path`` exists and is not a regular file (a device such as /dev/null, a pipe)."""
    try:
        return not stat.S_ISREG(os.stat(path).st_mode)
    except FileNotFoundError:
        return False


class Writer:
    """Write a trace chunk by chunk.

    ``dst`` is a path (written via a temp file, renamed on close), ``"-"`` for stdout, or a
    binary file object (written in place; the caller closes it). ``header`` is the JSON header
    (see FORMAT.md); ``format_version`` and ``chunk_records`` are filled in. ``codec`` is
    ``"zstd_planes"`` (default: zstd of the records' byte planes), ``"zstd"`` or ``"raw"``;
    ``version`` the format version written (default the newest, VERSION; 1 for readers that
    predate version 2, which has no ``zstd_planes``); ``chunk_records`` is the records per
    chunk (1 .. 2**22); ``threads`` how many chunks are compressed at once (default: one per
    core, at most 4; the output bytes are the same for any number, each chunk being
    compressed alone with the same parameters, and are written in order). Every record is
    checked against FORMAT.md's record rules as its chunk is written (``validate=False``
    skips that, for tests that need a bad trace); a violation raises ValueError naming the
    trace record and field, and aborts the write. Use as a context manager: an exception
    inside the ``with`` block aborts the write and removes the temp file; normal exit closes
    (finishes) the trace.
    """

    def __init__(self, dst: PathOrStream, header: dict[str, Any], codec: str = DEFAULT_CODEC,
                 chunk_records: int = DEFAULT_CHUNK_RECORDS, validate: bool = True,
                 version: int = VERSION, threads: int | None = None) -> None:
        if codec not in _CODECS:
            raise ValueError(f"codec must be one of {', '.join(map(repr, _CODECS))}, "
                             f"got {codec!r}")
        if not 1 <= chunk_records <= MAX_CHUNK_RECORDS:
            raise ValueError(f"chunk_records must be in 1..{MAX_CHUNK_RECORDS}")
        self.version = int(version)
        self.codec = self._check_codec(_CODECS[codec])
        self.chunk_records = int(chunk_records)
        h = dict(header)
        h["chunk_records"] = self.chunk_records
        head = encode_header(h, self.version)
        self.header = json.loads(head[FIXED_HEADER.size:-4])
        self._validator = RecordValidator(self.header) if validate else None
        self._local = threading.local()  # each compressing thread's zstd compressor
        self._threads = max(1, min(4, os.cpu_count() or 1)) if threads is None else int(threads)
        if self._threads < 1:
            raise ValueError(f"threads must be >= 1, got {threads}")
        self._pool: ThreadPoolExecutor | None = None  # made at the first compressed chunk
        self._inflight: deque[Future] = deque()  # chunks being compressed, in file order
        self._pending: list[np.ndarray] = []
        self._pending_n = 0
        self.n_chunks = 0
        self.total_records = 0
        self._closed = False
        self._tmp: str | None = None
        self._target: Path | None = None
        self._owns = False
        if isinstance(dst, str | os.PathLike) and os.fspath(dst) != "-" and _special(dst):
            # /dev/null, a pipe: written in place (a rename would replace the device itself)
            self._f = open(dst, "wb")  # noqa: SIM115 (closed by close/abort)
            self._owns = True
        elif isinstance(dst, str | os.PathLike) and os.fspath(dst) != "-":
            self._target = Path(dst)
            fd, self._tmp = tempfile.mkstemp(prefix=f".{self._target.name}.",
                                             suffix=".tmp", dir=self._target.parent or ".")
            os.fchmod(fd, 0o666 & ~_umask())  # mkstemp makes 0600; a trace is an ordinary file
            self._f: IO[bytes] = os.fdopen(fd, "wb")
            self._owns = True
        elif isinstance(dst, str | os.PathLike):
            self._f = sys.stdout.buffer
        else:
            self._f = dst
        try:
            write_all(self._f, head)
        except BaseException:
            self.abort()
            raise

    def __enter__(self) -> Writer:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()

    def __del__(self) -> None:
        if not getattr(self, "_closed", True):
            warnings.warn(f"traces.Writer for {self._target or 'a stream'} was never closed; "
                          f"output discarded", ResourceWarning, stacklevel=2)
            self.abort()

    def _check_codec(self, codec: int) -> int:
        if codec not in CODEC_NAMES:
            raise ValueError(f"unknown codec {codec}")
        if codec == CODEC_ZSTD_PLANES and self.version < PLANES_VERSION:
            raise ValueError(f"codec zstd_planes needs format version {PLANES_VERSION} or "
                             f"later (writing version {self.version})")
        return codec

    def write(self, records: Any) -> None:
        """Append records (an array of RECORD_DTYPE, or same field names) to the trace."""
        if self._closed:
            raise ValueError("write to a closed trace Writer")
        arr = as_records(records)
        if arr.size == 0:
            return
        try:
            self._pending.append(arr)
            self._pending_n += arr.size
            if self._pending_n >= self.chunk_records:
                buf = np.concatenate(self._pending) if len(self._pending) > 1 else arr
                full = (buf.size // self.chunk_records) * self.chunk_records
                for i in range(0, full, self.chunk_records):
                    self.write_chunk(buf[i:i + self.chunk_records])
                rest = buf[full:]
                self._pending = [rest] if rest.size else []
                self._pending_n = rest.size
        except BaseException:
            self.abort()
            raise

    def write_chunk(self, records: np.ndarray, codec: int | None = None) -> None:
        """Write ``records`` (1 .. 2**22 of RECORD_DTYPE) as one chunk, bypassing the
        chunk_records buffering. Buffered records are not flushed first."""
        arr = as_records(records)
        n = arr.size
        if not 1 <= n <= MAX_CHUNK_RECORDS:
            raise ValueError(f"a chunk holds 1..{MAX_CHUNK_RECORDS} records, got {n}")
        if self._validator is not None:
            try:
                self._validator.check(arr)
            except RecordError as e:
                where = self._target if self._target is not None else "trace"
                raise ValueError(f"{where}: record {self.total_records + e.index} would break "
                                 f"the format: {e.field}: {e.problem}") from None
        codec = self.codec if codec is None else self._check_codec(codec)
        # the bytes to store, taken now (the caller may reuse its array); compressed on the
        # pool when there is one
        raw = planes.split(arr) if codec == CODEC_ZSTD_PLANES else arr.tobytes()
        self.n_chunks += 1
        self.total_records += n
        if codec == CODEC_RAW or self._threads == 1:
            self._drain()  # the chunks before it first
            self._write_framed(self._encode(n, codec, raw))
            return
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self._threads, thread_name_prefix="kvsim-zstd")
        self._inflight.append(self._pool.submit(self._encode, n, codec, raw))
        while len(self._inflight) > 2 * self._threads:  # memory stays bounded
            self._write_framed(self._inflight.popleft().result())

    def _encode(self, n: int, codec: int, raw: bytes | np.ndarray) -> tuple[bytes, bytes]:
        """A chunk's header and stored payload (any thread)."""
        if codec != CODEC_RAW:
            cctx = getattr(self._local, "cctx", None)
            if cctx is None:
                cctx = self._local.cctx = zstandard.ZstdCompressor(
                    level=ZSTD_LEVEL, threads=0, write_content_size=True, write_checksum=False,
                    write_dict_id=False)
            raw = cctx.compress(raw)
        head = CHUNK_HEADER.pack(CHUNK_MAGIC, n, len(raw), codec, b"\0\0\0", zlib.crc32(raw))
        return head, raw

    def _write_framed(self, framed: tuple[bytes, bytes]) -> None:
        write_all(self._f, framed[0])
        write_all(self._f, framed[1])

    def _drain(self) -> None:
        while self._inflight:
            self._write_framed(self._inflight.popleft().result())

    def close(self) -> None:
        """Flush the last partial chunk, write the end chunk and, for a path, rename the
        temp file onto the target. Idempotent."""
        if self._closed:
            return
        try:
            if self._pending_n:
                buf = np.concatenate(self._pending)
                self._pending, self._pending_n = [], 0
                self.write_chunk(buf)
            self._drain()
            self._stop_pool()
            write_all(self._f, END_CHUNK.pack(END_MAGIC, self.n_chunks, self.total_records))
            self._f.flush()
            if self._owns:
                self._f.close()
            if self._tmp is not None and self._target is not None:
                os.replace(self._tmp, self._target)
                self._tmp = None
            self._closed = True
        except BaseException:
            self.abort()
            raise

    def _stop_pool(self) -> None:
        if getattr(self, "_pool", None) is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    def abort(self) -> None:
        """Stop writing; remove the temp file (path output). The target is left untouched."""
        self._closed = True
        self._pending, self._pending_n = [], 0
        for fut in self._inflight:
            fut.cancel()
        self._inflight.clear()
        self._stop_pool()
        if self._owns and not self._f.closed:
            self._f.close()
        if self._tmp is not None:
            try:
                os.unlink(self._tmp)
            except FileNotFoundError:
                pass
            self._tmp = None


def recompress(src: PathOrStream, dst: PathOrStream, codec: str = DEFAULT_CODEC,
               chunk_records: int | None = None, version: int = VERSION) -> dict[str, int]:
    """Copy trace ``src`` to ``dst`` re-encoding it with ``codec``, as format ``version``
    (Writer's defaults: byte planes, the newest version).

    Records are re-chunked to ``chunk_records`` per chunk (default: the source header's
    ``chunk_records`` if valid, else 65536), so the output header's ``chunk_records`` is
    truthful and the output bytes depend only on the records, header and codec. The header
    is re-serialized canonically. The input is fully validated while streaming; on any error
    (TraceError) nothing is left at a ``dst`` path. Returns ``{"chunks": n, "records": n}``
    of the output.
    """
    with open_trace(src) as tr:
        header = dict(tr.header)
        header.pop("format_version", None)  # the output's own
        if chunk_records is None:
            chunk_records = header.get("chunk_records", DEFAULT_CHUNK_RECORDS)
            if not isinstance(chunk_records, int) or not 1 <= chunk_records <= MAX_CHUNK_RECORDS:
                chunk_records = DEFAULT_CHUNK_RECORDS
        # the reader has checked every record already
        with Writer(dst, header, codec=codec, chunk_records=chunk_records,
                    validate=False, version=version) as w:
            for records in _checked_chunks(tr):
                w.write(records)
            if not tr.complete:  # defensive: iteration only stops at a checked end chunk
                raise RuntimeError("trace reader stopped before the end chunk")
        return {"chunks": w.n_chunks, "records": w.total_records}


def _checked_chunks(tr: TraceReader) -> Iterator[np.ndarray]:
    """The reader's chunks, checked and decoded by the compiled intake (traces/_intake.py)
    on other threads when the native library is built and the trace is a regular file (the
    same records and errors, sim/tests/test_intake.py), else by the reader itself: a read of a
    pipe may stall, and a stalled read on another thread would keep the caller from closing
    the stream on its way out (SIGTERM), where the reading thread itself is interrupted."""
    from kvsim import artifacts

    if not _regular_file(tr):
        return iter(tr)
    try:
        from . import _intake

        _intake._lib()
    except (ImportError, OSError, artifacts.ArtifactMissing):  # the reader decodes
        return iter(tr)
    return _intake.chunks(tr)


def _regular_file(tr: TraceReader) -> bool:
    try:
        return stat.S_ISREG(os.fstat(tr._f.fileno()).st_mode)
    except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation is both
        return False


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask
