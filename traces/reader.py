"""Streaming reader for kvsim traces (``.kvt``), validating every byte as it goes.

The reader never seeks and reads nothing beyond the part it is decoding (plus one byte
after the end chunk, to prove nothing follows), so it works on pipes and stdin::

    with traces.open("run.kvt") as tr:      # or traces.open("-"), or a binary file object
        print(tr.header["workload"])
        for chunk in tr:                    # numpy arrays of RECORD_DTYPE, one per chunk
            ...

Validation follows FORMAT.md "Errors" and "Record rules" (the latter by
:class:`traces.validate.RecordValidator`, vectorised per chunk). Every failure raises
:class:`TraceError` with a one line message naming the file, the chunk number and the byte
offset of that chunk's header.
A chunk is yielded only after its CRC and size checks pass; the end-chunk checks run when
iteration reaches the end, so a consumer that iterates to the end (or calls
:meth:`TraceReader.read_all`) never sees a silently shortened trace.
"""

from __future__ import annotations

import io
import json
import os
import sys
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, BinaryIO

from . import planes
from .format import (
    CHUNK_HEADER,
    CHUNK_MAGIC,
    CODEC_NAMES,
    CODEC_RAW,
    CODEC_ZSTD,
    CODEC_ZSTD_PLANES,
    END_CHUNK,
    END_MAGIC,
    FIXED_HEADER,
    MAGIC,
    MAX_CHUNK_RECORDS,
    MAX_JSON_LEN,
    MIN_VERSION,
    PLANES_VERSION,
    RECORD_SIZE,
    VERSION,
    TraceError,
    zstd_compress_bound,
)
from .validate import RecordError, RecordValidator

if TYPE_CHECKING:  # numpy and zstandard are imported where records are made in Python
    import numpy as np
    import zstandard

__all__ = ["ChunkInfo", "TraceReader", "open_trace", "read_all"]

PathOrStream = str | os.PathLike[str] | IO[bytes]

_READ_PIECE = 1 << 20  # read large parts in pieces so a bad length cannot allocate GBs


@dataclass(frozen=True)
class ChunkInfo:
    """Where a data chunk sits in the stream and how it was stored."""

    index: int  #: chunk number, from 0
    offset: int  #: byte offset of the chunk header in the stream
    n_records: int  #: records in the chunk
    stored_bytes: int  #: payload bytes as stored (compressed size for zstd)
    codec: int  #: CODEC_RAW, CODEC_ZSTD or CODEC_ZSTD_PLANES


def _stream_name(src: Any) -> str:
    if isinstance(src, str | os.PathLike):
        return "<stdin>" if os.fspath(src) == "-" else os.fspath(src)
    name = getattr(src, "name", None)
    if isinstance(name, str) and name not in ("<stdin>", "<stdout>") and not name.isdigit():
        return name
    if src is sys.stdin.buffer or name == "<stdin>":
        return "<stdin>"
    return "<stream>"


class TraceReader:
    """A validated, streaming view of one trace. Create with :func:`traces.open`.

    Attributes: ``header`` (dict: the JSON header keys, with ``"format_version"`` equal to the
    binary version), ``name`` (file name for messages), ``version``, ``chunks`` (the
    :class:`ChunkInfo` of every chunk read so far), ``total_records`` (records read so far)
    and ``complete`` (True once the end chunk and the end of stream were checked).
    """

    def __init__(self, src: PathOrStream, validate: bool = True) -> None:
        self.name = _stream_name(src)
        self._owns = False
        if isinstance(src, str | os.PathLike):
            if os.fspath(src) == "-":
                self._f: BinaryIO = sys.stdin.buffer
            else:
                self._f = open(Path(src), "rb")  # noqa: SIM115 -- closed by close()
                self._owns = True
        elif isinstance(src, io.TextIOBase):
            raise TypeError(f"{self.name}: traces are read from binary streams, not text")
        else:
            self._f = src  # type: ignore[assignment]
        self._pos = 0
        self._started = False
        self.chunks: list[ChunkInfo] = []
        self.total_records = 0
        self.complete = False
        self._dctx: zstandard.ZstdDecompressor | None = None  # made at the first zstd chunk
        try:
            self.header: dict[str, Any] = self._read_header()
        except BaseException:
            self.close()
            raise
        self._validator = RecordValidator(self.header) if validate else None

    # --- context manager / lifetime ---------------------------------------------------------
    def close(self) -> None:
        """Close the underlying file if this reader opened it (never closes a caller's stream)."""
        if self._owns and not self._f.closed:
            self._f.close()

    def _abandon(self) -> None:
        """Leave the file open for good: a thread is blocked reading it (a pipe that stalls),
        and closing it would wait for that read to return (the buffered file's lock)."""
        self._owns = False

    def __enter__(self) -> TraceReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- low-level reading ------------------------------------------------------------------
    def _err(self, msg: str, chunk: int | str | None, offset: int) -> TraceError:
        if chunk is None:
            where = f"header at byte {offset}"
        elif chunk == "end":
            where = f"end chunk at byte {offset}"
        else:
            where = f"chunk {chunk} at byte {offset}"
        return TraceError(f"{self.name}: {where}: {msg}", name=self.name, chunk=chunk,
                          offset=offset)

    def _read(self, n: int) -> bytes | bytearray:
        """Read up to ``n`` bytes (fewer only at end of stream); advance the position."""
        if n <= _READ_PIECE:
            parts = []
            got = 0
            while got < n:
                b = self._f.read(n - got)
                if not b:
                    break
                parts.append(b)
                got += len(b)
            data = b"".join(parts)
        else:
            buf = bytearray()
            while len(buf) < n:
                b = self._f.read(min(_READ_PIECE, n - len(buf)))
                if not b:
                    break
                buf += b
            data = buf  # no copy: large payloads are read into one bytearray
        self._pos += len(data)
        return data

    def _truncated(self, what: str, chunk: int | str | None, start: int) -> TraceError:
        return TraceError(
            f"{self.name}: truncated: stream ended inside {what} at byte {self._pos}"
            f" ({what} starts at byte {start})",
            name=self.name, chunk=chunk, offset=start,
        )

    # --- header -----------------------------------------------------------------------------
    def _read_header(self) -> dict[str, Any]:
        fixed = self._read(FIXED_HEADER.size)
        if not fixed:
            raise TraceError(f"{self.name}: truncated: stream is empty at byte 0 (no file "
                             f"header)", name=self.name, chunk=None, offset=0)
        if len(fixed) < FIXED_HEADER.size:
            if fixed[: len(MAGIC)] != MAGIC[: len(fixed)]:
                raise self._err(f"bad magic {fixed[:8]!r} (not a kvsim trace)", None, 0)
            raise self._truncated("file header", None, 0)
        magic, version, record_size, json_len = FIXED_HEADER.unpack(fixed)
        if magic != MAGIC:
            raise self._err(f"bad magic {magic!r} (not a kvsim trace)", None, 0)
        if not MIN_VERSION <= version <= VERSION:
            raise self._err(f"unsupported format version {version} (this reader knows "
                            f"{MIN_VERSION}..{VERSION})", None, 0)
        if record_size != RECORD_SIZE:
            raise self._err(f"record size {record_size} unknown for version {version} "
                            f"(expected {RECORD_SIZE})", None, 0)
        if json_len > MAX_JSON_LEN:
            raise self._err(f"JSON header length {json_len} exceeds {MAX_JSON_LEN}", None, 0)
        body = self._read(json_len)
        crc_b = self._read(4)
        if len(body) < json_len or len(crc_b) < 4:
            raise self._truncated("file header", None, 0)
        stored = int.from_bytes(crc_b, "little")
        computed = zlib.crc32(body, zlib.crc32(fixed))
        if stored != computed:
            raise self._err(f"header crc32 mismatch (stored 0x{stored:08x}, computed "
                            f"0x{computed:08x})", None, 0)
        try:
            header = json.loads(body.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as e:
            raise self._err(f"JSON header does not parse: {e}", None, 0) from None
        if not isinstance(header, dict):
            raise self._err("JSON header is not an object", None, 0)
        fv = header.get("format_version", version)
        if fv != version:
            raise self._err(f"JSON format_version {fv!r} differs from binary version "
                            f"{version}", None, 0)
        header["format_version"] = version
        self.version = version
        return header

    # --- chunks -----------------------------------------------------------------------------
    def iter_chunks(self) -> Iterator[tuple[ChunkInfo, np.ndarray]]:
        """Yield ``(ChunkInfo, records)`` for every data chunk, validating as it goes.

        Can be consumed once. Raises :class:`TraceError` at the first bad byte; after the
        last chunk it checks the end chunk counts and that nothing follows it.
        """
        if self._started:
            raise RuntimeError(f"{self.name}: a trace reader can be iterated only once")
        self._started = True
        while True:
            info, records = self._next_chunk()
            if info is None:
                return
            yield info, records

    def __iter__(self) -> Iterator[np.ndarray]:
        """Yield one read-only numpy array (dtype RECORD_DTYPE) per chunk (copy to modify)."""
        for _, records in self.iter_chunks():
            yield records

    def read_all(self) -> np.ndarray:
        """Read every remaining chunk and return one array (copy); raises on any error."""
        import numpy as np

        from .format import RECORD_DTYPE

        parts = list(self)
        if not parts:
            return np.empty(0, dtype=RECORD_DTYPE)
        return np.concatenate(parts)

    def _next_chunk(self) -> tuple[ChunkInfo | None, np.ndarray]:
        info, payload, crc = self._read_frame()
        if info is None:
            import numpy as np

            from .format import RECORD_DTYPE

            return None, np.empty(0, dtype=RECORD_DTYPE)
        computed = zlib.crc32(payload)
        if computed != crc:
            raise self.crc_error(info, crc, computed)
        records = self.payload_records(info, payload)
        records.flags.writeable = False  # same for every codec; copy to modify
        if self._validator is not None:
            try:
                self._validator.check(records)
            except RecordError as e:
                raise self.record_error(info, self.total_records, e.index, e.field,
                                        e.problem) from None
        self._accept(info)
        return info, records

    def crc_error(self, info: ChunkInfo, stored: int, computed: int) -> TraceError:
        """The error of a data chunk whose payload's CRC32 differs from its header's."""
        return self._err(f"crc32 mismatch (stored 0x{stored:08x}, computed 0x{computed:08x})",
                         info.index, info.offset)

    def record_error(self, info: ChunkInfo, first: int, index: int, field: str,
                     problem: str) -> TraceError:
        """The error of record ``index`` of a data chunk whose first record is trace record
        ``first`` (FORMAT.md "Record rules")."""
        return self._err(f"record {index} (trace record {first + index}): {field}: {problem}",
                         info.index, info.offset)

    def _accept(self, info: ChunkInfo) -> None:
        self.chunks.append(info)
        self.total_records += info.n_records

    def _read_frame(self) -> tuple[ChunkInfo | None, bytes | bytearray, int]:
        """Read the next data chunk's header and stored payload, checking the framing (not the
        CRC, codec payload or records): ``(info, payload, crc)``; ``(None, b"", 0)`` after
        the end chunk and the end of the stream were checked. The chunk counts as read only
        once :meth:`_accept` took it (the end chunk's counts are checked against those)."""
        index = len(self.chunks)
        start = self._pos
        magic_b = self._read(4)
        if not magic_b:
            after = f"after chunk {index - 1}" if index else "after the file header"
            raise TraceError(f"{self.name}: truncated: missing end chunk {after} "
                             f"(stream ends at byte {start})", name=self.name, chunk=index,
                             offset=start)
        if len(magic_b) < 4:
            raise self._truncated(f"chunk {index} header", index, start)
        magic = int.from_bytes(magic_b, "little")
        if magic == END_MAGIC:
            self._read_end(start)
            return None, b"", 0
        if magic != CHUNK_MAGIC:
            raise self._err(f"bad chunk magic {magic_b!r} (expected b'KVCK' or b'KVEN')",
                            index, start)
        rest = self._read(CHUNK_HEADER.size - 4)
        if len(rest) < CHUNK_HEADER.size - 4:
            raise self._truncated(f"chunk {index} header", index, start)
        _, n, stored_bytes, codec, reserved, crc = CHUNK_HEADER.unpack(magic_b + rest)
        if n == 0 or n > MAX_CHUNK_RECORDS:
            raise self._err(f"chunk holds {n} records (allowed 1..{MAX_CHUNK_RECORDS})",
                            index, start)
        if reserved != b"\0\0\0":
            raise self._err(f"reserved chunk header bytes are {reserved.hex()} (must be zero)",
                            index, start)
        raw_len = n * RECORD_SIZE
        if codec == CODEC_RAW:
            if stored_bytes != raw_len:
                raise self._err(f"raw chunk of {n} records stores {stored_bytes} bytes "
                                f"(expected {raw_len})", index, start)
        elif codec == CODEC_ZSTD_PLANES and self.version < PLANES_VERSION:
            raise self._err(f"codec {codec} ({CODEC_NAMES[codec]}) in a version {self.version} "
                            f"trace (it needs version {PLANES_VERSION} or later)", index, start)
        elif codec in (CODEC_ZSTD, CODEC_ZSTD_PLANES):
            if stored_bytes > zstd_compress_bound(raw_len):
                raise self._err(f"zstd chunk of {n} records stores {stored_bytes} bytes, more "
                                f"than zstd can produce", index, start)
        else:
            raise self._err(f"unknown codec {codec}", index, start)
        payload = self._read(stored_bytes)
        if len(payload) < stored_bytes:
            raise self._truncated(f"chunk {index} payload", index, start)
        return ChunkInfo(index, start, n, stored_bytes, codec), payload, crc

    def payload_records(self, info: ChunkInfo, payload: bytes | bytearray) -> np.ndarray:
        """The records of a data chunk's stored payload (its CRC already checked)."""
        import numpy as np

        from .format import RECORD_DTYPE

        if info.codec == CODEC_RAW:
            return np.frombuffer(payload, dtype=RECORD_DTYPE)
        raw = self._decompress(payload, info.n_records * RECORD_SIZE, info.index, info.offset)
        if info.codec == CODEC_ZSTD_PLANES:
            return planes.join(raw, info.n_records)
        return np.frombuffer(raw, dtype=RECORD_DTYPE)

    def _decompress(self, payload: bytes | bytearray, raw_len: int, index: int,
                    start: int) -> bytes:
        import zstandard

        if self._dctx is None:
            self._dctx = zstandard.ZstdDecompressor()
        dobj = self._dctx.decompressobj()
        try:
            out = dobj.decompress(payload)
        except zstandard.ZstdError as e:
            raise self._err(f"zstd payload does not decompress: {e}", index, start) from None
        if not dobj.eof or dobj.unused_data:
            raise self._err("zstd payload is not exactly one complete frame", index, start)
        if len(out) != raw_len:
            raise self._err(f"zstd payload decompresses to {len(out)} bytes (expected "
                            f"{raw_len})", index, start)
        return out

    def _read_end(self, start: int) -> None:
        rest = self._read(END_CHUNK.size - 4)
        if len(rest) < END_CHUNK.size - 4:
            raise self._truncated("end chunk", "end", start)
        _, n_chunks, total = END_CHUNK.unpack(END_MAGIC.to_bytes(4, "little") + rest)
        if n_chunks != len(self.chunks) or total != self.total_records:
            raise self._err(f"end chunk counts {n_chunks} chunks / {total} records, but "
                            f"{len(self.chunks)} chunks / {self.total_records} records were "
                            f"read", "end", start)
        extra = self._f.read(1)
        if extra:
            raise self._err(f"bytes follow the end chunk (at byte {self._pos})", "end", start)
        self.complete = True

    # --- convenience ------------------------------------------------------------------------
    @property
    def codecs(self) -> dict[str, int]:
        """Chunks read so far per codec name."""
        out: dict[str, int] = {}
        for c in self.chunks:
            name = CODEC_NAMES.get(c.codec, str(c.codec))
            out[name] = out.get(name, 0) + 1
        return out


def open_trace(path_or_stream: PathOrStream, validate: bool = True) -> TraceReader:
    """Open a trace for streaming: a path, ``"-"`` for stdin, or a binary file object.

    Reads and validates the file header immediately (raising :class:`TraceError`); the
    chunks are read and validated as the returned reader is iterated. ``validate=False``
    skips the record rules (FORMAT.md "Record rules") but never the stream checks; it is
    for measuring their cost and for tools that inspect broken traces.
    """
    return TraceReader(path_or_stream, validate)


def read_all(path_or_stream: PathOrStream) -> np.ndarray:
    """Read a whole trace into one RECORD_DTYPE array; raises :class:`TraceError` on any
    error (never returns a shortened array)."""
    with open_trace(path_or_stream) as tr:
        return tr.read_all()
