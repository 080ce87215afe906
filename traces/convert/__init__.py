"""Converters between kvsim traces and other simulators' trace formats.

One module per format, each documenting its mapping and what is lost, and one row per format
in the table of :mod:`traces.convert.formats` (which everything below reads):

* :mod:`traces.convert.dinero`     DineroIV din text (read and write)
* :mod:`traces.convert.gem5`       gem5 protobuf packet traces (read and write, byte-exact)
* :mod:`traces.convert.elastic`    gem5 elastic traces for TraceCPU (write)
* :mod:`traces.convert.lackey`     Valgrind lackey ``--trace-mem=yes`` text (read and write)
* :mod:`traces.convert.champsim`   ChampSim ``input_instr`` binary traces (read and write)
* :mod:`traces.convert.drmemtrace` DynamoRIO drmemtrace offline traces (read)

:func:`convert` (behind ``kvsim convert``) takes the input format from the file's content
(:func:`detect_format`; the name only when the content does not tell), the output format from
the name, and streams: every reader and writer works chunk by chunk, so memory does not
grow with the trace. An output name ending in ``.gz``, ``.xz`` or ``.bz2`` is compressed
(:mod:`traces.convert._io`: gzip and xz on every core).
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from . import formats

__all__ = ["DEFAULT_FREQ_GHZ", "FORMATS_IN", "FORMATS_OUT", "HUGE_OUTPUT", "PREFERRED",
           "convert", "detect_format", "formats", "guess_format", "input_format",
           "open_records"]

HUGE_OUTPUT = 1 << 30  #: an uncompressed output projected past this many bytes gets a warning
DEFAULT_FREQ_GHZ = 4.0  #: instructions per ns when ticks meet instructions, without a preset


def __getattr__(name: str) -> Any:
    """FORMATS_IN, FORMATS_OUT and PREFERRED, read from the table
    (:mod:`traces.convert.formats`) when asked, so a format registered later is in them."""
    if name == "FORMATS_IN":
        return formats.readable()
    if name == "FORMATS_OUT":
        return formats.writable()
    if name == "PREFERRED":  #: the output ending to prefer per format
        return {n: f.preferred for n, f in formats.FORMATS.items() if f.preferred}
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def guess_format(name: str) -> str:
    """Format name for a file name (``-`` is kvt); raises ValueError when unknown. A
    compression ending (``.gz``, ``.xz``, ``.bz2``) is looked through."""
    return formats.guess(name)


def detect_format(head: bytes) -> str | None:
    """The input format ``head`` (a file's first bytes, compressed or not; 4 KiB is plenty)
    shows, or None: inside gzip, xz or bzip2 the decompressed bytes are asked; each row of
    the table (:mod:`traces.convert.formats`) tests them in turn: the kvt and gem5 magics,
    a zip archive or a drmemtrace HEADER entry, text lines shaped like lackey's or din's,
    and last, whole 64-byte ChampSim instructions whose branch flags are 0 or 1."""
    from ._io import sniff

    comp = sniff(head)
    if comp is None:
        return formats.detect(head, compressed=False)
    inner = _peek_decompressed(head, comp)
    return formats.detect(inner, compressed=True) if inner else None


def _peek_decompressed(head: bytes, comp: str) -> bytes:
    import bz2
    import lzma
    import zlib

    try:
        if comp == "gz":
            return zlib.decompressobj(31).decompress(head, 4096)
        if comp == "xz":
            return lzma.LZMADecompressor().decompress(head, 4096)
        return bz2.BZ2Decompressor().decompress(head)[:4096]
    except (OSError, EOFError, lzma.LZMAError, zlib.error, ValueError):
        return b""


@contextlib.contextmanager
def _atomic(dst: str) -> Iterator[str]:
    """Yield a temp path beside ``dst`` (same ending, so suffix rules hold); rename on
    success, remove on error."""
    p = Path(dst)
    tmp = p.with_name(f".tmp-{os.getpid()}-{p.name}")
    try:
        yield str(tmp)
        os.replace(tmp, p)
    finally:
        tmp.unlink(missing_ok=True)


class _CountingFile(io.RawIOBase):
    """A binary file (a path, opened and closed here, or an open stream) that reports every
    byte read to ``progress``; named like the original, so readers' messages are unchanged."""

    def __init__(self, src: Any, progress: Callable[[int], object]) -> None:
        self._owns = isinstance(src, str)
        self._f = open(src, "rb") if self._owns else src  # noqa: SIM115 -- see close()
        self._progress = progress
        self.name = src if self._owns else getattr(src, "name", "<stdin>")

    def readable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self._f.fileno()

    def readinto(self, b: Any) -> int:
        n = self._f.readinto(b)
        if n:
            self._progress(n)
        return n

    def close(self) -> None:
        if self._owns:
            self._f.close()
        super().close()


def _open_counted(src: str, fmt: str, progress: Callable[[int], object],
                  stack: contextlib.ExitStack) -> Any:
    """An open stream of ``src`` that reports every byte read to ``progress``: binary, or
    ASCII text (decompressed) for a text format; ``sys.stdin`` for text from stdin."""
    text = formats.FORMATS[fmt].text
    if src == "-" and text:
        return sys.stdin
    raw = stack.enter_context(_CountingFile(sys.stdin.buffer if src == "-" else src, progress))
    buffered = io.BufferedReader(raw)
    if not text:
        return buffered
    from ._io import open_input

    return io.TextIOWrapper(open_input(buffered), encoding="ascii")


def _header(fmt: str, source: str, **extra: Any) -> dict[str, Any]:
    from kvsim import traces

    return {"producer": {"name": "kvsim.traces.convert", "version": traces.__version__,
                         "git_commit": None},
            "workload": {"name": f"converted from {fmt}", "source": source},
            "tags": traces.TAG_NAMES, "markers": traces.MARKER_NAMES, **extra}


def _read(src: Any, fmt: str, path: str, freq_ghz: float, need_sites: bool
          ) -> tuple[Any, dict[str, Any]]:
    """(iterable of record chunks, kvt header) for ``src`` (an open stream from
    :func:`_open_counted`), by the table's reader of ``fmt``; ``path`` is what the user
    named."""
    row = formats.by_name(fmt, "read")
    records, extra = row.reader()(src, formats.ReadOptions(path, freq_ghz, need_sites))
    if fmt == "kvt":
        return records, extra  # the trace's own header
    return records, _header(fmt, os.path.basename(path), **extra)


class _Records:
    """A trace of any readable format as a stream of record chunks with a kvt ``header``,
    as :func:`kvsim.traces.open` gives a .kvt (see :func:`open_records`)."""

    def __init__(self, records: Any, header: dict[str, Any], fmt: str,
                 stack: contextlib.ExitStack) -> None:
        self._records, self.header, self.format, self._stack = records, header, fmt, stack

    def __iter__(self) -> Iterator[Any]:
        return iter(self._records)

    def close(self) -> None:
        self._stack.close()

    def __enter__(self) -> _Records:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_records(src: str, fmt: str | None = None, freq_ghz: float | None = None,
                 progress: Callable[[int], object] | None = None) -> Any:
    """Open the trace ``src`` (a path or ``-``) of any readable format, detected from its
    content (then its name) unless ``fmt`` is given: a ``.kvt`` is :func:`kvsim.traces.open`'s
    reader, any other a streaming reader of record chunks with the kvt header
    :func:`convert` would write (iterable, ``header``, ``format``, ``close``, usable in
    ``with``). ``freq_ghz`` converts gem5 ticks (default :data:`DEFAULT_FREQ_GHZ`);
    ``progress`` is called with the input bytes read (not for a .kvt, whose reader counts
    records)."""
    name = (fmt or _detect(src)).lower()
    formats.by_name(name, "read")
    if name == "kvt":  # the reader itself, which the engine decodes natively
        from kvsim import traces

        return traces.open(sys.stdin.buffer if src == "-" else src)
    stack = contextlib.ExitStack()
    try:
        inp = _open_counted(src, name, progress or (lambda n: None), stack)
        records, header = _read(inp, name, src,
                                DEFAULT_FREQ_GHZ if freq_ghz is None else freq_ghz,
                                need_sites=False)
        if hasattr(records, "close"):
            stack.callback(records.close)
    except BaseException:
        stack.close()
        raise
    return _Records(records, header, name, stack)


class _Meter(io.RawIOBase):
    """A write-only binary stream over ``raw`` that counts bytes and, for an uncompressed
    output, calls ``warn`` once when the output's projected size passes
    :data:`HUGE_OUTPUT` (projected from the share of the input read so far)."""

    def __init__(self, raw: Any, check: Callable[[int], None] | None) -> None:
        super().__init__()
        self._raw, self._check, self.written = raw, check, 0

    def writable(self) -> bool:
        return True

    def write(self, b: Any) -> int:
        n = len(b) if not isinstance(b, memoryview) else b.nbytes
        if self._check is not None:
            self._check(self.written + n)
        from ..writer import write_all

        write_all(self._raw, b)  # all of it, or the error (sys.stdout.buffer may take less)
        self.written += n
        return n

    def fileno(self) -> int:
        return self._raw.fileno()

    def flush(self) -> None:
        self._raw.flush()


def _human(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1024
    return f"{n:.1f} TiB"


def convert(src: str, dst: str, src_format: str | None = None,
            dst_format: str | None = None,
            progress: Callable[[int], object] | None = None,
            warn: Callable[[str], object] | None = None,
            freq_ghz: float | None = None) -> dict[str, Any]:
    """Convert trace ``src`` to ``dst``.

    Readable and writable: the rows of :mod:`traces.convert.formats`. Without ``src_format``
    the input's content decides (:func:`detect_format`), then its name; without
    ``dst_format`` the output's name (:func:`guess_format`). ``-`` means stdin / stdout. An
    output name ending in ``.gz``, ``.xz`` or ``.bz2`` is compressed. A ``.kvt`` input is
    validated as it streams; on any error nothing is left at ``dst``. Returns ``{"from",
    "to", "records"}`` where ``records`` counts records (kvt output) or
    lines/packets/instructions/nodes written.

    ``progress``, if given, is called with the number of input bytes read since its previous
    call (for example a tqdm bar's ``update``). ``warn`` is called once with a one-line
    message when an uncompressed output is projected past :data:`HUGE_OUTPUT` bytes.
    ``freq_ghz`` (default :data:`DEFAULT_FREQ_GHZ`) converts between gem5 ticks and
    instructions: one instruction per cycle at that frequency.
    """
    fin = formats.by_name(src_format or _detect(src), "read").name
    row_out = formats.by_name(dst_format or guess_format(dst), "write")
    fout = row_out.name
    freq = DEFAULT_FREQ_GHZ if freq_ghz is None else freq_ghz
    if not freq > 0:
        raise ValueError(f"frequency must be positive, not {freq}")
    from kvsim import traces

    read = [0]

    def count(n: int) -> None:
        read[0] += n
        if progress is not None:
            progress(n)

    in_size = os.path.getsize(src) if src != "-" and os.path.isfile(src) else None
    if fin == "kvt" and fout == "kvt":
        with contextlib.ExitStack() as stack:
            inp = _open_counted(src, fin, count, stack)
            out = dst if dst == "-" else stack.enter_context(_atomic(dst))
            n = traces.recompress(inp, out)["records"]
        return {"from": fin, "to": fout, "records": n}
    from ._io import compression_of, open_output

    comp = compression_of(dst) if dst != "-" else None
    warned = [False]

    def check(written: int) -> None:
        if warned[0] or warn is None or comp is not None or dst == "-" or fout == "kvt":
            return
        projected = written * in_size / read[0] if in_size and read[0] else None
        if written > HUGE_OUTPUT or (projected is not None and projected > HUGE_OUTPUT
                                     and written >= 1 << 20):
            warned[0] = True
            size = _human(projected) if projected else f"over {_human(written)}"
            warn(f"{dst}: writing about {size} uncompressed; a name ending in "
                 f"{row_out.preferred} writes it compressed")

    with contextlib.ExitStack() as stack:
        records, header = _read(_open_counted(src, fin, count, stack), fin, src, freq,
                                need_sites=fout == "kvt")
        if hasattr(records, "close"):
            stack.callback(records.close)
        if row_out.writes_path:  # more than one file: the writer takes the name
            n = row_out.writer()(iter(records), header, dst,
                                 formats.WriteOptions(dst, freq))
            return {"from": fin, "to": fout, "records": n}
        if dst == "-":
            raw: Any = sys.stdout.buffer
        else:
            raw = stack.enter_context(open(stack.enter_context(_atomic(dst)), "wb"))
        meter = _Meter(raw, check)
        out = open_output(meter, comp)
        try:
            n = _write(records, header, out, row_out, formats.WriteOptions(dst, freq))
        finally:
            if out is not meter:
                out.close()
        raw.flush()
    return {"from": fin, "to": fout, "records": n}


def input_format(src: str) -> str:
    """The format of the trace at ``src`` (a path, or ``-`` for stdin): by content, else by
    name (see :func:`detect_format`); a missing file is FileNotFoundError, a format neither
    tells a ValueError naming the file and the readable formats."""
    return _detect(src, hint=f"readable: {', '.join(formats.readable())}")


def _detect(src: str, hint: str | None = None) -> str:
    """The input format by content, else by name (see :func:`detect_format`)."""
    head = b""
    if src == "-":
        try:
            head = sys.stdin.buffer.peek(4096)[:4096]
        except (AttributeError, OSError, ValueError):
            head = b""
    elif os.path.isfile(src):
        with open(src, "rb") as f:
            head = f.read(4096)
    elif not os.path.exists(src):
        raise FileNotFoundError(2, "No such file or directory", src)
    fmt = detect_format(head) if head else None
    if fmt is not None:
        return fmt
    try:
        return guess_format(src)
    except ValueError:
        hint = hint or f"pass --from (one of {', '.join(formats.readable())})"
        raise ValueError(f"{src}: cannot tell the trace format from its content or name; "
                         f"{hint}") from None


def _write(records: Any, header: dict[str, Any], out: Any, row: formats.Format,
           opts: formats.WriteOptions) -> int:
    """Write ``records`` to the binary stream ``out`` with ``row``'s writer (through an
    ASCII text layer for a text format)."""
    chunks: Iterator[Any] = iter([records] if hasattr(records, "dtype") else records)
    if not row.text:
        return row.writer()(chunks, header, out, opts)
    text = io.TextIOWrapper(out, encoding="ascii", newline="\n", write_through=False)
    try:
        return row.writer()(chunks, header, text, opts)
    finally:
        text.flush()
        text.detach()
