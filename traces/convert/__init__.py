"""Converters between kvsim traces and other simulators' trace formats.

One module per foreign format, each documenting its mapping and what is lost:

* :mod:`traces.convert.dinero`   DineroIV din text (read and write)
* :mod:`traces.convert.gem5`     gem5 protobuf packet traces (read and write, byte-exact)
* :mod:`traces.convert.lackey`   Valgrind lackey ``--trace-mem=yes`` text (read and write)
* :mod:`traces.convert.champsim` ChampSim ``input_instr`` binary traces (write, read back)

:func:`convert` (behind ``kvsim convert``) picks the formats from the file names and streams
``.kvt`` input chunk by chunk where the output format allows.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

__all__ = ["FORMATS_IN", "FORMATS_OUT", "convert", "guess_format"]

FORMATS_IN = ("kvt", "dinero", "lackey", "gem5")
FORMATS_OUT = ("kvt", "dinero", "lackey", "champsim", "gem5")

_SUFFIXES = [  # (name ending, format); first match wins
    (".kvt", "kvt"), (".din", "dinero"), (".dinero", "dinero"), (".trc", "gem5"),
    (".trc.gz", "gem5"), (".champsimtrace", "champsim"), (".champsimtrace.xz", "champsim"),
    (".champsimtrace.gz", "champsim"), (".champsimtrace.bz2", "champsim"),
    (".champsim", "champsim"), (".lackey", "lackey"), (".lackey.txt", "lackey"),
]


def guess_format(name: str) -> str:
    """Format name for a file name (``-`` is kvt); raises ValueError when unknown."""
    if name == "-":
        return "kvt"
    low = name.lower()
    for ending, fmt in _SUFFIXES:
        if low.endswith(ending):
            return fmt
    known = ", ".join(e for e, _ in _SUFFIXES)
    raise ValueError(f"cannot tell the trace format of {name!r} (known endings: {known}); "
                     f"pass it explicitly")


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

    def readinto(self, b: Any) -> int:
        n = self._f.readinto(b)
        if n:
            self._progress(n)
        return n

    def close(self) -> None:
        if self._owns:
            self._f.close()
        super().close()


def _open_counted(src: str, fmt: str, progress: Callable[[int], object] | None,
                  stack: contextlib.ExitStack) -> Any:
    """``src`` itself, or (with ``progress``) an open counting stream: binary for kvt and
    gem5 (from a path or stdin), ASCII text for the text formats (from a path), as the
    readers open them."""
    binary = fmt in ("kvt", "gem5")
    if progress is None or (src == "-" and not binary):
        return src
    raw = stack.enter_context(_CountingFile(sys.stdin.buffer if src == "-" else src, progress))
    buffered = io.BufferedReader(raw)
    return buffered if binary else io.TextIOWrapper(buffered, encoding="ascii")


def _read(src: Any, fmt: str) -> tuple[Any, dict[str, Any]]:
    """(records or iterable of record chunks, kvt header) for ``src`` (a path, ``-`` or an
    open stream from :func:`_open_counted`)."""
    from kvsim import traces

    if fmt == "kvt":
        reader = traces.open(src)
        return reader, reader.header
    source = os.path.basename(str(getattr(src, "name", src)))
    header = {"producer": {"name": "kvsim.traces.convert", "version": traces.__version__,
                           "git_commit": None},
              "workload": {"name": f"converted from {fmt}", "source": source},
              "tags": traces.TAG_NAMES, "markers": traces.MARKER_NAMES}
    if fmt == "dinero":
        from .dinero import din_to_records

        return din_to_records(sys.stdin if src == "-" else src), header
    if fmt == "lackey":
        from .lackey import lackey_to_records

        sites: list[str] = []
        rec = lackey_to_records(sys.stdin if src == "-" else src, sites=sites)
        return rec, {**header, "sites": sites}
    if fmt == "gem5":
        from .gem5 import gem5_to_records

        g5, rec = gem5_to_records(sys.stdin.buffer if src == "-" else src)
        return rec, {**header, "gem5": {"obj_id": g5["obj_id"], "tick_freq": g5["tick_freq"]}}
    raise ValueError(f"cannot read format {fmt!r} (readable: {', '.join(FORMATS_IN)})")


def convert(src: str, dst: str, src_format: str | None = None,
            dst_format: str | None = None,
            progress: Callable[[int], object] | None = None) -> dict[str, Any]:
    """Convert trace ``src`` to ``dst``; formats are guessed from the names when omitted.

    Readable: kvt, dinero, lackey, gem5. Writable: kvt, dinero, lackey, champsim, gem5.
    ``-`` means stdin / stdout. A ``.kvt`` input is validated as it streams; on any error
    nothing is left at ``dst``. Returns ``{"from", "to", "records"}`` where ``records``
    counts records (kvt output) or lines/packets/instructions written (other formats).
    ``progress``, if given, is called with the number of input bytes read since its previous
    call (for example a tqdm bar's ``update``); text formats from stdin report nothing.
    """
    fin = (src_format or guess_format(src)).lower()
    fout = (dst_format or guess_format(dst)).lower()
    if fin not in FORMATS_IN:
        raise ValueError(f"cannot read format {fin!r} (readable: {', '.join(FORMATS_IN)})")
    if fout not in FORMATS_OUT:
        raise ValueError(f"cannot write format {fout!r} (writable: {', '.join(FORMATS_OUT)})")
    from kvsim import traces

    if fin == "kvt" and fout == "kvt":
        with contextlib.ExitStack() as stack:
            inp = _open_counted(src, fin, progress, stack)
            out = dst if dst == "-" else stack.enter_context(_atomic(dst))
            n = traces.recompress(inp, out)["records"]
        return {"from": fin, "to": fout, "records": n}
    with contextlib.ExitStack() as stack:
        records, header = _read(_open_counted(src, fin, progress, stack), fin)
        if hasattr(records, "close"):
            stack.callback(records.close)
        binary = fout in ("kvt", "champsim", "gem5")
        out: Any = (sys.stdout.buffer if binary else sys.stdout) if dst == "-" else \
            stack.enter_context(_atomic(dst))
        n = _write(records, header, out, fout)
    return {"from": fin, "to": fout, "records": n}


def _write(records: Any, header: dict[str, Any], out: Any, fmt: str) -> int:
    from kvsim import traces

    if fmt == "kvt":
        with traces.Writer(out, header) as w:
            for chunk in [records] if hasattr(records, "dtype") else records:
                w.write(chunk)
        return w.total_records
    if fmt == "dinero":
        from .dinero import records_to_din

        return records_to_din(records, out)
    if fmt == "lackey":
        from .lackey import records_to_lackey

        return records_to_lackey(records, out, instructions=True)
    if fmt == "champsim":
        from .champsim import records_to_champsim

        return int(records_to_champsim(records, out)["instructions"])
    from .gem5 import records_to_gem5

    return records_to_gem5(records, out, compress=None if isinstance(out, str) else False)
