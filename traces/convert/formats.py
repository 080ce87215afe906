"""The one table of trace formats: what ``kvsim convert`` reads and writes.

Each row (:class:`Format`) names a format, the file endings that mean it, how its content is
recognised, and the module that reads and writes it. :func:`traces.convert.convert`, ``kvsim
simulate`` (which reads any readable format, detected from the content), the ``kvsim
convert --help`` text, the table in traces/CONVERT.md (:func:`markdown_table`, checked by
``tests/test_convert_formats.py``) and the fuzz targets (``fuzz/py/fuzz_targets.py``) all
read this table; none keeps a list of its own.

Adding a format is one module and one row:

* the module, ``traces/convert/NAME.py``, documents its mapping and what is lost, and
  defines ``convert_read(src, opts)`` returning ``(records, extra_header)`` (records: an
  iterable of RECORD_DTYPE arrays, streamed; ``src`` is an ASCII text stream for a ``text``
  format, else a binary stream; ``opts`` a :class:`ReadOptions`) and/or
  ``convert_write(chunks, header, out, opts)`` returning the count written (``out``: a
  binary stream, or the output path for a ``writes_path`` format; ``opts`` a
  :class:`WriteOptions`); errors are one-line ``ValueError``\\ s naming the file, the line
  or byte, and what was expected;
* the row, appended to :data:`FORMATS` below (or given to :func:`register`, as a test does
  with a toy format).

This module imports nothing heavy: the readers and writers are imported when first called.
"""

from __future__ import annotations

import contextlib
import importlib
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

__all__ = ["FORMATS", "Format", "ReadOptions", "WriteOptions", "by_name", "detect",
           "guess", "markdown_table", "readable", "register", "registered", "writable"]


@dataclass(frozen=True)
class ReadOptions:
    """What a reader may need besides its stream: ``path`` as the user named it (``-`` for
    stdin), gem5's instructions per ns, and whether the kvt header should name the sites
    (a second pass over a path, for lackey)."""

    path: str
    freq_ghz: float
    need_sites: bool = False


@dataclass(frozen=True)
class WriteOptions:
    """What a writer may need besides records and stream: the output path (``-`` for
    stdout) and gem5's instructions per ns."""

    path: str
    freq_ghz: float


Reader = Callable[[Any, ReadOptions], tuple[Any, dict[str, Any]]]
Writer = Callable[[Iterator[Any], dict[str, Any], Any, WriteOptions], int]


@dataclass(frozen=True)
class Format:
    """One trace format.

    ``name``: what ``--from``/``--to`` take. ``title``: a few words for help and docs.
    ``suffixes``: file endings (before a ``.gz``/``.xz``/``.bz2``) that mean it; the
    longest matching ending over the table decides. ``preferred``: the output ending to
    prefer (compressed as the tools read it), ``None`` when not writable. ``detect(head,
    compressed)``: whether ``head`` (the first bytes, decompressed when ``compressed``)
    shows this format; rows are asked in ``rank`` order, then table order (a format that
    claims almost anything, like ChampSim, ranks last). ``module``: the module under
    ``kvsim.traces.convert`` with ``convert_read``/``convert_write``; ``read``/``write``
    override them (a format registered at run time). ``text``: read and written as ASCII
    lines. ``streaming``: memory does not grow with the trace. ``writes_path``: the writer
    takes the output path, not a stream (it writes more than one file). ``fuzz``: the
    fuzz targets (``fuzz/py/fuzz_targets.py``) of its reader. ``notes``: a few words for
    the docs' table."""

    name: str
    title: str
    suffixes: tuple[str, ...]
    preferred: str | None
    detect: Callable[[bytes, bool], bool] | None
    module: str | None = None
    readable: bool = True
    writable: bool = True
    text: bool = False
    streaming: bool = True
    writes_path: bool = False
    rank: int = 0
    fuzz: tuple[str, ...] = ()
    notes: str = ""
    read: Reader | None = field(default=None, compare=False)
    write: Writer | None = field(default=None, compare=False)

    def reader(self) -> Reader:
        if not self.readable:
            raise ValueError(f"cannot read format {self.name!r} (readable: "
                             f"{', '.join(readable())})")
        return self.read or self._module().convert_read

    def writer(self) -> Writer:
        if not self.writable:
            raise ValueError(f"cannot write format {self.name!r} (writable: "
                             f"{', '.join(writable())})")
        return self.write or self._module().convert_write

    def _module(self) -> Any:
        return importlib.import_module(f"kvsim.traces.convert.{self.module}")


# --- detection: each row's test of the first bytes --------------------------------------
_LACKEY_LINE = re.compile(r"^(I  [0-9a-fA-F]+,\d+| [LSM] [0-9a-fA-F]+,\d+|==\d+==|--\d+--)")
_DIN_LINE = re.compile(r"^\s*([rwimcv]\s+(0x)?[0-9a-fA-F]+\s+(0x)?[0-9a-fA-F]+"
                       r"|[0-5]\s+(0x)?[0-9a-fA-F]+)(\s|$)")


def text_lines(head: bytes) -> list[str] | None:
    """Up to 20 whole, non-empty, non-comment lines of ``head`` when it is ASCII, else
    None (a last line cut by the 4 KiB window is left out when others exist)."""
    try:
        text = head.decode("ascii")
    except UnicodeDecodeError:
        return None
    return [ln for ln in text.splitlines()[:-1] or text.splitlines()
            if ln.strip() and not ln.startswith("#")][:20]


def _lines_match(pattern: re.Pattern[str]) -> Callable[[bytes, bool], bool]:
    """A text format's test: ``head`` is ASCII and each of its first lines matches."""
    def detect(head: bytes, compressed: bool) -> bool:
        lines = text_lines(head)
        return lines is not None and bool(lines) and all(pattern.match(ln) for ln in lines)
    return detect


def _kvt(head: bytes, compressed: bool) -> bool:
    return not compressed and head.startswith(b"KVTRACE\0")


def _gem5(head: bytes, compressed: bool) -> bool:
    return head.startswith(b"gem5")


def _drmemtrace(head: bytes, compressed: bool) -> bool:
    from .drmemtrace import looks_like_entries

    return (not compressed and head.startswith(b"PK\x03\x04")) or looks_like_entries(head)


def _champsim(head: bytes, compressed: bool) -> bool:
    """Whole 64-byte instructions whose branch flags are 0 or 1 and some non-zero ip."""
    import numpy as np

    from .champsim import CHAMPSIM_DTYPE

    n = len(head) // 64
    if n == 0 or (not compressed and len(head) % 64 and len(head) < 4096):
        return False
    ins = np.frombuffer(head[:n * 64], dtype=CHAMPSIM_DTYPE)
    return bool((ins["is_branch"] <= 1).all() and (ins["branch_taken"] <= 1).all()
                and (ins["ip"] != 0).any())


#: The formats, in the order the docs list them and detection asks them (within a rank).
FORMATS: dict[str, Format] = {f.name: f for f in (
    Format("kvt", "kvsim trace", (".kvt",), ".kvt", _kvt, module="kvt",
           fuzz=("trace_reader", "trace_records"),
           notes="zstd of byte planes; reads versions 1 and 2"),
    Format("gem5", "gem5 packet trace (TrafficGen, MemTraceProbe)", (".trc",), ".trc.gz",
           _gem5, module="gem5", fuzz=("gem5_reader",), notes="written byte-exact"),
    Format("elastic", "gem5 elastic trace (TraceCPU)", (".deptrace.proto",),
           ".deptrace.proto.gz", None, module="elastic", readable=False, writes_path=True,
           notes="the fetch trace is written beside it"),
    Format("champsim", "ChampSim `input_instr`", (".champsimtrace", ".champsim"),
           ".champsimtrace.xz", _champsim, module="champsim", rank=1,
           fuzz=("champsim_reader", "champsim_import")),
    Format("drmemtrace", "DynamoRIO drmemtrace (`trace_entry_t`)", (".trace.zip", ".trace"),
           None, _drmemtrace, module="drmemtrace", writable=False,
           fuzz=("drmemtrace_reader",), notes="also gzip; one thread a file"),
    Format("dinero", "DineroIV din", (".din", ".dinero"), ".din.gz", _lines_match(_DIN_LINE),
           module="dinero", text=True, fuzz=("dinero_reader",)),
    Format("lackey", "lackey `--trace-mem=yes`", (".lackey", ".lackey.txt"), ".lackey.gz",
           _lines_match(_LACKEY_LINE), module="lackey", text=True, fuzz=("lackey_reader",)),
)}


def register(fmt: Format) -> None:
    """Add ``fmt`` to the table (a name already there is an error)."""
    if fmt.name in FORMATS:
        raise ValueError(f"trace format {fmt.name!r} is already registered")
    if fmt.read is None and fmt.write is None and fmt.module is None:
        raise ValueError(f"trace format {fmt.name!r}: give a module or read/write functions")
    FORMATS[fmt.name] = fmt


@contextlib.contextmanager
def registered(fmt: Format) -> Iterator[Format]:
    """``fmt`` in the table for the duration of a ``with`` block (tests)."""
    register(fmt)
    try:
        yield fmt
    finally:
        FORMATS.pop(fmt.name, None)


def readable() -> tuple[str, ...]:
    return tuple(n for n, f in FORMATS.items() if f.readable)


def writable() -> tuple[str, ...]:
    return tuple(n for n, f in FORMATS.items() if f.writable)


def by_name(name: str, want: str = "read") -> Format:
    """The row of ``name`` (any case, or one of its endings without the dot) that can
    ``want`` ("read" or "write"); else a ValueError listing the formats that can."""
    fmt = FORMATS.get(name.lower())
    if fmt is None:  # an ending names its format too: --from din, --to champsimtrace
        fmt = next((f for f in FORMATS.values() if f".{name.lower()}" in f.suffixes), None)
    names = readable() if want == "read" else writable()
    if fmt is None or fmt.name not in names:
        able = "readable" if want == "read" else "writable"
        raise ValueError(f"cannot {want} format {name!r} ({able}: {', '.join(names)})")
    return fmt


def detect(head: bytes, compressed: bool) -> str | None:
    """The first readable row, by rank then table order, whose test ``head`` passes."""
    rows = sorted((f for f in FORMATS.values() if f.readable and f.detect is not None),
                  key=lambda f: f.rank)
    for f in rows:
        if f.detect is not None and f.detect(head, compressed):
            return f.name
    return None


_COMPRESSED_ENDING = re.compile(r"\.(gz|xz|bz2)$")


def guess(name: str) -> str:
    """Format name for a file name (``-`` is kvt): the row with the longest ending that
    ``name`` has, a ``.gz``/``.xz``/``.bz2`` ending looked through; ValueError when none."""
    if name == "-":
        return "kvt"
    low = name.lower()
    bare = _COMPRESSED_ENDING.sub("", low)
    best = max(((len(e), f.name) for f in FORMATS.values() for e in f.suffixes
                if low.endswith(e) or bare.endswith(e)), default=None)
    if best is not None:
        return best[1]
    known = ", ".join(e for f in FORMATS.values() for e in f.suffixes)
    raise ValueError(f"cannot tell the trace format of {name!r} (known endings: {known}, "
                     f"each optionally followed by .gz, .xz or .bz2); pass it explicitly")


def help_lines() -> list[str]:
    """``kvsim convert --help``'s list of formats: name, what reads/writes, endings."""
    out = []
    for f in FORMATS.values():
        rw = "read, write" if f.readable and f.writable else ("read" if f.readable
                                                             else "write")
        ends = f.preferred or "/".join(f.suffixes)
        out.append(f"  {f.name:<11} {rw:<12} {ends:<20} {f.title.replace('`', '')}")
    return out


def markdown_table() -> str:
    """The table of traces/CONVERT.md (a test checks that the page holds it)."""
    rows = ["| format | name | read | write | streaming | module | ending to prefer |",
            "|---|---|---|---|---|---|---|"]
    for f in FORMATS.values():
        ends = f"`{f.preferred}`" if f.preferred else ", ".join(f"`{s}`" for s in f.suffixes)
        if f.notes:
            ends += f" ({f.notes})"
        mod = f"`convert/{f.module}.py`" if f.module else "(registered)"
        rows.append(f"| {f.title} | `{f.name}` | {'yes' if f.readable else 'no'} | "
                    f"{'yes' if f.writable else 'no'} | {'yes' if f.streaming else 'no'} | "
                    f"{mod} | {ends} |")
    return "\n".join(rows) + "\n"
