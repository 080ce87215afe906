"""DineroIV trace formats: read "din" text into records, write records as din text.

Formats (DineroIV 7's ``-informat`` option, as described in its ``dineroIV -help`` text):

* ``D`` (extended din, DineroIV's default): ``<label> <hex address> <hex size>`` per line,
  label one of ``r`` (data read), ``w`` (data write), ``i`` (instruction fetch), ``m``
  (miscellaneous), ``c`` (copy-back / flush), ``v`` (invalidate). Addresses and sizes are hex,
  with or without ``0x``; an access may span cache lines.
* ``d`` (traditional Dinero III din): ``<digit label> <hex address>`` and anything after is
  ignored; labels ``0`` read, ``1`` write, ``2`` instruction fetch, ``3`` misc, ``4``
  copy-back/flush, ``5`` invalidate. DineroIV rounds these addresses down to a multiple of 4
  and assumes 4-byte accesses; so does :func:`din_to_records`.

The reader accepts both, line by line (blank lines and lines starting with ``#`` are skipped).

Mapping to kvsim records:

========================  =========================================================
din                        kvsim
========================  =========================================================
``r`` / ``0``              KIND_LOAD, size from the line (``d``: 4)
``w`` / ``1``              KIND_STORE
``m`` / ``3``              KIND_PREFETCH, size 1 (the writer emits prefetches as ``m``)
``i`` / ``2``              not a record; ``ifetch="gap"`` adds 1 to the next record's gap
``c``, ``v``, ``4``, ``5``  dropped (no kvsim equivalent); counted in ``stats``
========================  =========================================================

Writing loses: ``gap``, ``dep``, ``tag``, ``site``, ``flags`` and markers (din has no place
for them). Prefetches are written as ``m`` (DineroIV's miscellaneous data reference; it
counts them in the Misc column rather than as demand reads) or, with ``prefetch="read"``,
as ``r``, or dropped with ``prefetch="skip"``. The writer prints lowercase hex without
``0x``, exactly like the golden ``small_mixed_trace.din``.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any

import numpy as np

from ..format import KIND_LOAD, KIND_MARKER, KIND_PREFETCH, KIND_STORE, RECORD_DTYPE
from ._io import number, open_text

__all__ = ["DinError", "din_to_records", "iter_din", "records_to_din"]

_EXT_KIND = {"r": KIND_LOAD, "w": KIND_STORE, "m": KIND_PREFETCH}
_OLD_KIND = {"0": KIND_LOAD, "1": KIND_STORE, "3": KIND_PREFETCH}
_IFETCH = {"i", "2"}
_DROPPED = {"c", "v", "4", "5"}


class DinError(ValueError):
    """A din line does not parse; the message names the source and line number."""


def _lines(src: str | os.PathLike[str] | Iterable[str] | IO[str]) -> tuple[str, Iterator[str]]:
    if isinstance(src, str | os.PathLike):
        path = Path(src)

        def gen() -> Iterator[str]:
            with open_text(path) as f:  # compressed or not
                yield from f

        return str(path), gen()
    return str(getattr(src, "name", "<din>")), iter(src)


def iter_din(src: str | os.PathLike[str] | Iterable[str] | IO[str], ifetch: str = "skip",
             stats: dict[str, int] | None = None, chunk_records: int = 65536
             ) -> Iterator[np.ndarray]:
    """Parse DineroIV din text (``D`` or ``d`` format) into RECORD_DTYPE arrays of up to
    ``chunk_records`` records, line by line: memory does not grow with the input.

    ``src`` is a path, an open text file or any iterable of lines. ``ifetch`` is ``"skip"``
    (instruction fetches are ignored) or ``"gap"`` (each one adds 1 to the next record's
    ``gap``: an instruction that made no data access). ``stats``, if given, receives counts
    ``{"lines", "records", "ifetch", "dropped"}``. Addresses are bytes; sizes are bytes
    (up to 65535). Raises :class:`DinError` naming the line on a malformed line.
    """
    if ifetch not in ("skip", "gap"):
        raise ValueError("ifetch must be 'skip' or 'gap'")
    name, lines = _lines(src)
    addrs: list[int] = []
    sizes: list[int] = []
    kinds: list[int] = []
    gaps: list[int] = []
    pending = n_lines = n_ifetch = n_dropped = n_records = 0
    for lineno, line in enumerate(lines, 1):
        parts = line.split()
        if not parts or parts[0].startswith("#"):
            continue
        n_lines += 1
        label = parts[0].lower()
        try:
            if label in _EXT_KIND or label in ("i", "c", "v"):
                want = "expected '<label> <hex address> <hex size>'"
                parts += [""] * (3 - len(parts))
                addr = number(parts[1], 16, f"{want}: the hex address")
                size = number(parts[2], 16, f"{want}: the hex size")
                kind = _EXT_KIND.get(label)
            elif label in _OLD_KIND or label in ("2", "4", "5"):
                parts += [""] * (2 - len(parts))
                addr = number(parts[1], 16, "expected '<label> <hex address>': the hex "
                              "address") & ~3
                size = 4
                kind = _OLD_KIND.get(label)
            else:
                raise ValueError(f"unknown label {parts[0]!r} (expected one of r w i m c v "
                                 f"or 0-5)")
            if not 0 <= addr < 1 << 64:
                raise ValueError("address out of 64-bit range")
            if kind is not None and not 1 <= size <= 0xFFFF:
                raise ValueError(f"size {size} outside 1..65535")
            if kind == KIND_PREFETCH:
                size = 1  # FORMAT.md: a prefetch names one address
            if kind is not None and addr + size > 1 << 64:
                raise ValueError("the access wraps past address 2^64 - 1")
        except ValueError as e:
            raise DinError(f"{name}: line {lineno}: {e}: {line.rstrip()!r}") from None
        if label in _IFETCH:
            n_ifetch += 1
            pending += ifetch == "gap"
            continue
        if kind is None:
            n_dropped += 1
            continue
        addrs.append(addr)
        sizes.append(size)
        kinds.append(kind)
        gaps.append(pending)
        pending = 0
        if len(addrs) == chunk_records:
            n_records += len(addrs)
            yield _din_chunk(addrs, sizes, kinds, gaps)
            addrs, sizes, kinds, gaps = [], [], [], []
    if addrs:
        n_records += len(addrs)
        yield _din_chunk(addrs, sizes, kinds, gaps)
    if stats is not None:
        stats.update(lines=n_lines, records=n_records, ifetch=n_ifetch, dropped=n_dropped)


def _din_chunk(addrs: list[int], sizes: list[int], kinds: list[int], gaps: list[int]
               ) -> np.ndarray:
    out = np.zeros(len(addrs), dtype=RECORD_DTYPE)
    out["addr"] = np.array(addrs, dtype=np.uint64)
    out["size"] = sizes
    out["kind"] = kinds
    out["gap"] = np.minimum(np.array(gaps, dtype=np.int64), 2**32 - 1)
    return out


def din_to_records(src: str | os.PathLike[str] | Iterable[str] | IO[str],
                   ifetch: str = "skip", stats: dict[str, int] | None = None) -> np.ndarray:
    """The whole of :func:`iter_din`'s output as one RECORD_DTYPE array."""
    parts = list(iter_din(src, ifetch, stats))
    return np.concatenate(parts) if parts else np.zeros(0, dtype=RECORD_DTYPE)


def records_to_din(records: np.ndarray | Iterable[np.ndarray],
                   out: str | os.PathLike[str] | IO[str], prefetch: str = "misc") -> int:
    """Write loads and stores (and prefetches, see ``prefetch``) as extended din lines.

    ``records`` is a RECORD_DTYPE array or an iterable of them (e.g. a ``traces.open``
    reader, streamed chunk by chunk). ``out`` is a path or a text stream. ``prefetch`` is
    ``"misc"`` (write ``m``), ``"read"`` (write ``r``) or ``"skip"``. Markers are skipped.
    Returns the number of lines written.
    """
    labels = {"misc": "m", "read": "r", "skip": None}
    if prefetch not in labels:
        raise ValueError("prefetch must be 'misc', 'read' or 'skip'")
    kind_label: dict[int, Any] = {KIND_LOAD: "r", KIND_STORE: "w",
                                  KIND_PREFETCH: labels[prefetch]}
    chunks = [records] if isinstance(records, np.ndarray) else records
    if isinstance(out, str | os.PathLike):
        with open(out, "w", encoding="ascii", newline="\n") as f:
            return _write_din(chunks, f, kind_label)
    return _write_din(chunks, out, kind_label)


def _write_din(chunks: Iterable[np.ndarray], f: IO[str], kind_label: dict[int, Any]) -> int:
    n = 0
    for chunk in chunks:
        keep = chunk["kind"] < KIND_MARKER
        if kind_label[KIND_PREFETCH] is None:
            keep &= chunk["kind"] != KIND_PREFETCH
        sel = chunk[keep]
        if sel.size == 0:
            continue
        lab = np.array(["r", "w", kind_label[KIND_PREFETCH] or "r"])[sel["kind"]]
        size = np.maximum(sel["size"], 1)
        f.write("".join(f"{k} {a:x} {s:x}\n" for k, a, s in
                        zip(lab.tolist(), sel["addr"].tolist(), size.tolist(), strict=True)))
        n += sel.size
    return n


def convert_read(src: IO[str], opts: Any) -> tuple[Iterator[np.ndarray], dict[str, Any]]:
    """The converters' table reader (:mod:`traces.convert.formats`): din text, streamed."""
    return iter_din(src), {}


def convert_write(chunks: Iterable[np.ndarray], header: dict[str, Any], out: IO[str],
                  opts: Any) -> int:
    """The converters' table writer: din lines to the text stream ``out``."""
    return records_to_din(chunks, out)
