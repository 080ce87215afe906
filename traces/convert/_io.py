"""Streaming compression for the converters: open by content on input, by name on output.

Input (:func:`open_input`): gzip, xz and bzip2 are recognised by their first bytes (gzip
``1f 8b``, xz ``fd 37 7a 58 5a 00``, bzip2 ``BZh``), whatever the file is called, and
decompressed as they are read, so memory does not grow with the file.

Output (:func:`open_output`), chosen by the name's ending as the foreign tools do:

* ``.gz``: :class:`ParallelGzip`, one gzip member whose deflate stream is cut into
  :data:`GZIP_BLOCK` blocks compressed on a thread pool (zlib releases the GIL), the way
  ``pigz`` does without its shared dictionaries. Byte-stable: a block boundary depends only
  on the byte count, never on the thread count. Output up to one block is exactly what a
  single ``zlib`` deflate of the whole data gives (``gzip -n`` at the same level).
* ``.xz``: the ``xz`` program with ``-T0`` (every core) when it is on ``PATH``, otherwise
  Python's single-threaded :mod:`lzma`; either output is a standard ``.xz`` file.
* ``.bz2``: :mod:`bz2` (single-threaded).
* anything else: written as is.
"""

from __future__ import annotations

import bz2
import contextlib
import gzip
import io
import lzma
import os
import shutil
import struct
import subprocess
import zlib
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import IO, Any

__all__ = ["COMPRESSED_ENDINGS", "GZIP_BLOCK", "ParallelGzip", "compression_of",
           "open_input", "open_output", "sniff"]

GZIP_BLOCK = 1 << 22  #: bytes of input per parallel deflate block (4 MiB)
COMPRESSED_ENDINGS = (".gz", ".xz", ".bz2")
_XZ_MAGIC = b"\xfd7zXZ\x00"


def compression_of(name: str) -> str | None:
    """``"gz"``, ``"xz"``, ``"bz2"`` or None, from a file name's ending."""
    low = name.lower()
    for e in COMPRESSED_ENDINGS:
        if low.endswith(e):
            return e[1:]
    return None


def sniff(head: bytes) -> str | None:
    """The compression whose magic ``head`` starts with, or None."""
    if head[:2] == b"\x1f\x8b":
        return "gz"
    if head[:6] == _XZ_MAGIC:
        return "xz"
    if head[:3] == b"BZh":
        return "bz2"
    return None


def open_input(src: str | os.PathLike[str] | IO[bytes]) -> IO[bytes]:
    """A buffered binary stream of ``src``'s content, decompressed when its first bytes say
    it is compressed. A path is opened here; the caller closes the returned stream."""
    raw: Any = open(src, "rb") if isinstance(src, str | os.PathLike) else src  # noqa: SIM115
    buf = raw if hasattr(raw, "peek") else io.BufferedReader(raw)
    kind = sniff(buf.peek(6)[:6])
    if kind == "gz":
        return gzip.GzipFile(fileobj=buf, mode="rb")  # type: ignore[return-value]
    if kind == "xz":
        return lzma.LZMAFile(buf, "rb")  # type: ignore[return-value]
    if kind == "bz2":
        return bz2.BZ2File(buf, "rb")  # type: ignore[return-value]
    return buf


class _NamedText(io.TextIOWrapper):
    """A text stream named by the path it was opened from, whatever the layers under it."""

    path = ""

    @property
    def name(self) -> str:  # type: ignore[override]
        return self.path


@contextlib.contextmanager
def open_text(path: str | os.PathLike[str]) -> Iterator[IO[str]]:
    """The ASCII text of the file at ``path``, decompressed when compressed (as
    :func:`open_input`), named ``path`` in the readers' messages; closed on exit."""
    with open(path, "rb") as raw:
        inner = open_input(raw)
        text = _NamedText(inner, encoding="ascii")
        text.path = os.fspath(path)
        try:
            yield text
        finally:
            text.detach()
            if inner is not raw:
                inner.close()


class ParallelGzip(io.RawIOBase):
    """A write-only gzip stream over ``raw`` that deflates :data:`GZIP_BLOCK` blocks on
    ``threads`` threads (default: one per core). ``close`` finishes the member and leaves
    ``raw`` open. Header: no name, mtime 0, OS byte ``os_byte`` (3 = Unix, like ``gzip``)."""

    def __init__(self, raw: IO[bytes], level: int = 6, threads: int | None = None,
                 os_byte: int = 3, block: int = GZIP_BLOCK) -> None:
        super().__init__()
        self._raw, self._level, self._block = raw, level, block
        xfl = 2 if level == 9 else 4 if level == 1 else 0
        raw.write(b"\x1f\x8b\x08\x00\0\0\0\0" + bytes([xfl, os_byte]))
        self._pool = ThreadPoolExecutor(max_workers=threads or os.cpu_count() or 1)
        self._ahead = 2 * (threads or os.cpu_count() or 1)
        self._pending: deque[Future[bytes]] = deque()
        self._buf = bytearray()
        self._crc = 0
        self._size = 0

    def writable(self) -> bool:
        return True

    def _deflate(self, data: bytes, last: bool) -> bytes:
        c = zlib.compressobj(self._level, zlib.DEFLATED, -15, 9)
        return c.compress(data) + c.flush(zlib.Z_FINISH if last else zlib.Z_SYNC_FLUSH)

    def _submit(self, data: bytes, last: bool) -> None:
        self._crc = zlib.crc32(data, self._crc)
        self._size += len(data)
        self._pending.append(self._pool.submit(self._deflate, data, last))
        while len(self._pending) > self._ahead or (last and self._pending):
            self._raw.write(self._pending.popleft().result())

    def write(self, b: Any) -> int:
        self._buf += b
        while len(self._buf) > self._block:  # keep at least one byte for the last block
            self._submit(bytes(self._buf[:self._block]), False)
            del self._buf[:self._block]
        return len(b) if not isinstance(b, memoryview) else b.nbytes

    def close(self) -> None:
        if self.closed:
            return
        try:
            self._submit(bytes(self._buf), True)
            self._raw.write(struct.pack("<II", self._crc, self._size & 0xFFFFFFFF))
        finally:
            self._pool.shutdown(wait=True)
            super().close()


class _XzPipe(io.RawIOBase):
    """Writes through an ``xz -T0`` child whose output goes to ``raw``."""

    def __init__(self, raw: IO[bytes], preset: int) -> None:
        super().__init__()
        raw.flush()
        self._proc = subprocess.Popen([_XZ, "-T0", f"-{preset}", "-c", "-q"],
                                      stdin=subprocess.PIPE, stdout=raw.fileno(),
                                      stderr=subprocess.DEVNULL)

    def writable(self) -> bool:
        return True

    def write(self, b: Any) -> int:
        assert self._proc.stdin is not None
        self._proc.stdin.write(b)
        return len(b) if not isinstance(b, memoryview) else b.nbytes

    def close(self) -> None:
        if self.closed:
            return
        try:
            assert self._proc.stdin is not None
            self._proc.stdin.close()
            if self._proc.wait() != 0:
                raise OSError(f"xz exited with status {self._proc.returncode}")
        finally:
            if self._proc.poll() is None:
                self._proc.kill()
                self._proc.wait()
            super().close()


_XZ = shutil.which("xz")


def open_output(raw: IO[bytes], kind: str | None, level: int | None = None,
                threads: int | None = None) -> IO[bytes]:
    """A binary stream compressing into ``raw`` with ``kind`` (``gz``, ``xz``, ``bz2`` or None
    for none). Closing it finishes the compressed stream and leaves ``raw`` open.
    ``level``: the codec's level (defaults: gzip 6, xz 1, bzip2 9: xz's default 6 is many
    times slower on the repetitive filler instructions of a ChampSim trace, for a file about
    a quarter smaller)."""
    if kind is None:
        return raw
    if kind == "gz":
        return ParallelGzip(raw, 6 if level is None else level, threads)  # type: ignore[return-value]
    if kind == "xz":
        preset = 1 if level is None else level
        if _XZ is not None and threads != 1 and hasattr(raw, "fileno"):
            try:
                raw.fileno()
                return _XzPipe(raw, preset)  # type: ignore[return-value]
            except (OSError, io.UnsupportedOperation):
                pass
        return lzma.LZMAFile(raw, "wb", preset=preset)  # type: ignore[return-value]
    if kind == "bz2":
        return bz2.BZ2File(raw, "wb", compresslevel=9 if level is None else level)  # type: ignore[return-value]
    raise ValueError(f"unknown compression {kind!r}")


_DIGITS = {10: frozenset("0123456789"), 16: frozenset("0123456789abcdefABCDEF")}


def number(text: str, base: int, what: str) -> int:
    """``text`` (surrounding blanks aside; ``0x`` allowed in base 16) as an unsigned integer,
    else a ValueError saying that ``what`` is missing or is not a number (never Python's
    "invalid literal for int()"): the text readers' one way to read a field."""
    t = text.strip()
    digits = t[2:] if base == 16 and t[:2].lower() == "0x" else t
    if not digits:
        raise ValueError(f"{what} is missing")
    if not set(digits) <= _DIGITS[base]:
        raise ValueError(f"{what} is not a number: {t!r}")
    return int(digits, base)
