"""Converters between kvsim traces and other simulators' trace formats.

One module per foreign format, each documenting its mapping and what is lost:

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
import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from ..writer import write_all

__all__ = ["DEFAULT_FREQ_GHZ", "FORMATS_IN", "FORMATS_OUT", "HUGE_OUTPUT", "PREFERRED",
           "convert", "detect_format", "guess_format"]

FORMATS_IN = ("kvt", "dinero", "lackey", "gem5", "champsim", "drmemtrace")
FORMATS_OUT = ("kvt", "dinero", "lackey", "champsim", "gem5", "elastic")
#: the output ending to prefer per format: compressed, as the tools read them
PREFERRED = {"kvt": ".kvt", "dinero": ".din.gz", "lackey": ".lackey.gz",
             "champsim": ".champsimtrace.xz", "gem5": ".trc.gz",
             "elastic": ".deptrace.proto.gz"}
HUGE_OUTPUT = 1 << 30  #: an uncompressed output projected past this many bytes gets a warning
DEFAULT_FREQ_GHZ = 4.0  #: instructions per ns when ticks meet instructions, without a preset

_SUFFIXES = [  # (name ending, format); first match wins; a .gz/.xz/.bz2 ending is peeled off
    (".kvt", "kvt"), (".din", "dinero"), (".dinero", "dinero"), (".trc", "gem5"),
    (".deptrace.proto", "elastic"), (".champsimtrace", "champsim"),
    (".champsim", "champsim"), (".lackey", "lackey"), (".lackey.txt", "lackey"),
    (".trace.zip", "drmemtrace"), (".trace", "drmemtrace"),
]


def guess_format(name: str) -> str:
    """Format name for a file name (``-`` is kvt); raises ValueError when unknown. A
    compression ending (``.gz``, ``.xz``, ``.bz2``) is looked through."""
    if name == "-":
        return "kvt"
    low = name.lower()
    bare = re.sub(r"\.(gz|xz|bz2)$", "", low)
    for ending, fmt in _SUFFIXES:
        if low.endswith(ending) or bare.endswith(ending):
            return fmt
    known = ", ".join(e for e, _ in _SUFFIXES)
    raise ValueError(f"cannot tell the trace format of {name!r} (known endings: {known}, "
                     f"each optionally followed by .gz, .xz or .bz2); pass it explicitly")


_LACKEY_LINE = re.compile(r"^(I  [0-9a-fA-F]+,\d+| [LSM] [0-9a-fA-F]+,\d+|==\d+==|--\d+--)")
_DIN_LINE = re.compile(r"^\s*([rwimcv]\s+(0x)?[0-9a-fA-F]+\s+(0x)?[0-9a-fA-F]+"
                       r"|[0-5]\s+(0x)?[0-9a-fA-F]+)(\s|$)")


def detect_format(head: bytes) -> str | None:
    """The input format ``head`` (a file's first bytes, compressed or not; 4 KiB is plenty)
    shows, or None: kvt, gem5 and zip archives by their magic; inside gzip, xz or bzip2, a
    gem5 magic or a drmemtrace HEADER entry; text lines shaped like lackey's or din's; and
    otherwise ChampSim when the bytes are whole 64-byte instructions whose branch flags are
    0 or 1."""
    from ._io import sniff
    from .drmemtrace import looks_like_entries

    if head.startswith(b"KVTRACE\0"):
        return "kvt"
    if head.startswith(b"gem5"):
        return "gem5"
    if head.startswith(b"PK\x03\x04"):
        return "drmemtrace"
    comp = sniff(head)
    if comp is not None:
        inner = _peek_decompressed(head, comp)
        if inner.startswith(b"gem5"):
            return "gem5"
        if looks_like_entries(inner):
            return "drmemtrace"
        return "champsim" if _champsim_like(inner, partial=True) else None
    if looks_like_entries(head):
        return "drmemtrace"
    try:
        text = head.decode("ascii")
    except UnicodeDecodeError:
        text = None
    if text is not None:
        lines = [ln for ln in text.splitlines()[:-1] or text.splitlines()
                 if ln.strip() and not ln.startswith("#")][:20]
        if lines and all(_LACKEY_LINE.match(ln) for ln in lines):
            return "lackey"
        if lines and all(_DIN_LINE.match(ln) for ln in lines):
            return "dinero"
        return None
    return "champsim" if _champsim_like(head, partial=False) else None


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


def _champsim_like(data: bytes, partial: bool) -> bool:
    import numpy as np

    from .champsim import CHAMPSIM_DTYPE

    n = len(data) // 64
    if n == 0 or (not partial and len(data) % 64 and len(data) < 4096):
        return False
    ins = np.frombuffer(data[:n * 64], dtype=CHAMPSIM_DTYPE)
    return bool((ins["is_branch"] <= 1).all() and (ins["branch_taken"] <= 1).all()
                and (ins["ip"] != 0).any())


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
    ASCII text for the text formats; ``src`` itself for a zip archive (read by member) and
    for text from stdin."""
    if fmt == "drmemtrace" and src != "-":
        import zipfile

        if zipfile.is_zipfile(src):
            return src
    text = fmt in ("dinero", "lackey")
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
    """(records or iterable of record chunks, kvt header) for ``src`` (``-``, a path or an
    open stream from :func:`_open_counted`); ``path`` is what the user named."""
    from kvsim import traces

    if fmt == "kvt":
        reader = traces.open(src)
        return reader, reader.header
    source = os.path.basename(path)
    if fmt == "dinero":
        from .dinero import iter_din

        return iter_din(src), _header(fmt, source)
    if fmt == "lackey":
        from .lackey import iter_lackey, lackey_sites

        extra = {"sites": lackey_sites(path)} if need_sites and path != "-" else {}
        return iter_lackey(src), _header(fmt, source, **extra)
    if fmt == "gem5":
        from .gem5 import GEM5_TAGS, iter_gem5_records

        g5, rec = iter_gem5_records(src, freq_ghz=freq_ghz)
        return rec, _header(fmt, source, tags=GEM5_TAGS,
                            gem5={"obj_id": g5["obj_id"], "tick_freq": g5["tick_freq"],
                                  "freq_ghz": freq_ghz})
    if fmt == "champsim":
        from .champsim import IMPORT_SIZE, champsim_to_records

        return champsim_to_records(src), _header(fmt, source,
                                                 champsim={"access_size": IMPORT_SIZE})
    if fmt == "drmemtrace":
        from .drmemtrace import drmemtrace_to_records

        return drmemtrace_to_records(src), _header(fmt, source)
    raise ValueError(f"cannot read format {fmt!r} (readable: {', '.join(FORMATS_IN)})")


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

    Readable: kvt, dinero, lackey, gem5, champsim, drmemtrace. Writable: kvt, dinero,
    lackey, champsim, gem5, elastic. Without ``src_format`` the input's content decides
    (:func:`detect_format`), then its name; without ``dst_format`` the output's name
    (:func:`guess_format`). ``-`` means stdin / stdout. An output name ending in ``.gz``,
    ``.xz`` or ``.bz2`` is compressed. A ``.kvt`` input is validated as it streams; on any
    error nothing is left at ``dst``. Returns ``{"from", "to", "records"}`` where ``records``
    counts records (kvt output) or lines/packets/instructions/nodes written.

    ``progress``, if given, is called with the number of input bytes read since its previous
    call (for example a tqdm bar's ``update``). ``warn`` is called once with a one-line
    message when an uncompressed output is projected past :data:`HUGE_OUTPUT` bytes.
    ``freq_ghz`` (default :data:`DEFAULT_FREQ_GHZ`) converts between gem5 ticks and
    instructions: one instruction per cycle at that frequency.
    """
    fin = (src_format or _detect(src)).lower()
    fout = (dst_format or guess_format(dst)).lower()
    if fin not in FORMATS_IN:
        raise ValueError(f"cannot read format {fin!r} (readable: {', '.join(FORMATS_IN)})")
    if fout not in FORMATS_OUT:
        raise ValueError(f"cannot write format {fout!r} (writable: {', '.join(FORMATS_OUT)})")
    if fout == "elastic" and dst == "-":
        raise ValueError("an elastic trace is two files (dependency and fetch traces): "
                         "give a file name, not -")
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
                 f"{PREFERRED[fout]} writes it compressed")

    with contextlib.ExitStack() as stack:
        records, header = _read(_open_counted(src, fin, count, stack), fin, src, freq,
                                need_sites=fout == "kvt")
        if hasattr(records, "close"):
            stack.callback(records.close)
        if fout == "elastic":
            from .elastic import records_to_elastic

            tpi = round(10**12 / (freq * 1e9)) or 1
            n = records_to_elastic(records, dst, ticks_per_instruction=tpi)["nodes"]
            return {"from": fin, "to": fout, "records": n}
        if dst == "-":
            raw: Any = sys.stdout.buffer
        else:
            raw = stack.enter_context(open(stack.enter_context(_atomic(dst)), "wb"))
        meter = _Meter(raw, check)
        out = open_output(meter, comp)
        try:
            n = _write(records, header, out, fout, freq)
        finally:
            if out is not meter:
                out.close()
        raw.flush()
    return {"from": fin, "to": fout, "records": n}


def _detect(src: str) -> str:
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
        raise ValueError(f"{src}: cannot tell the trace format from its content or name; "
                         f"pass --from (one of {', '.join(FORMATS_IN)})") from None


def _write(records: Any, header: dict[str, Any], out: Any, fmt: str, freq: float) -> int:
    from kvsim import traces

    chunks: Iterator[Any] = iter([records] if hasattr(records, "dtype") else records)
    if fmt == "kvt":
        with traces.Writer(out, header) as w:
            for chunk in chunks:
                w.write(chunk)
        return w.total_records
    if fmt in ("dinero", "lackey"):
        text = io.TextIOWrapper(out, encoding="ascii", newline="\n", write_through=False)
        try:
            if fmt == "dinero":
                from .dinero import records_to_din

                return records_to_din(chunks, text)
            from .lackey import records_to_lackey

            return records_to_lackey(chunks, text, instructions=True)
        finally:
            text.flush()
            text.detach()
    if fmt == "champsim":
        from .champsim import records_to_champsim

        return int(records_to_champsim(chunks, out)["instructions"])
    from .gem5 import GEM5_TAGS, IMPORTED_CMDS, records_to_gem5

    g5 = header.get("gem5") or {}
    tick_freq = int(g5.get("tick_freq") or 10**12)
    commands = IMPORTED_CMDS if header.get("tags") == GEM5_TAGS else None
    return records_to_gem5(chunks, out, obj_id=str(g5.get("obj_id") or "kvsim trace"),
                           tick_freq=tick_freq,
                           ticks_per_instruction=max(1, round(tick_freq / (freq * 1e9))),
                           compress=False, commands=commands)
