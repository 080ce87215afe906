"""Valgrind lackey ``--trace-mem=yes`` text: read into records, write from records.

Lackey prints one line per event (hex address, decimal size in bytes)::

    I  04010173,3        instruction fetch (two spaces after I)
     L 04222cac,8        data load
     S 04222cac,8        data store
     M 0421ff3c,4        data modify (load then store of the same bytes)

plus Valgrind's own ``==pid==`` / ``--pid--`` messages when they share the stream.

Reading (:func:`lackey_to_records`): ``L`` -> KIND_LOAD, ``S`` -> KIND_STORE, ``M`` -> a load
followed by a store of the same address and size (the store has ``dep`` 0: its address does
not come from the loaded value). ``I`` lines are not records; with ``instructions="gap"``
(default) they set ``gap``: an instruction whose data accesses follow it counts as the memory
instruction itself, every other instruction adds 1 to the next record's gap. So ``gap +
memory instructions`` equals lackey's instruction count, except that an instruction with
several data accesses (e.g. ``M``) yields several records. Each distinct instruction address
that makes data accesses gets a ``site`` id (first-seen order; ids beyond 65534 share 65535);
pass a list as ``sites`` to receive the addresses (hex strings, index = site id).

Writing (:func:`records_to_lackey`): loads and stores become ``L`` / ``S`` lines; prefetches
are dropped (their instruction then counts as a non-memory one in the next gap) or written
as ``L`` with ``prefetch="load"``; markers are dropped. With
``instructions=True`` each record is preceded by ``gap`` filler ``I`` lines and one ``I`` line
for its own instruction (address ``0x400000 + 4 * site``; fillers use ``0x3ffffc``), so
``gap`` survives a round trip. Lost: ``dep``, ``tag``, ``flags``, markers, and real PCs.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from typing import IO, Any

import numpy as np

from ..format import KIND_LOAD, KIND_MARKER, KIND_PREFETCH, KIND_STORE, RECORD_DTYPE
from ._io import number, open_text

__all__ = ["LackeyError", "iter_lackey", "lackey_sites", "lackey_to_records",
           "records_to_lackey"]

SITE_PC_BASE = 0x400000  #: instruction address written for site 0
FILLER_PC = 0x3FFFFC  #: instruction address written for gap (non-memory) instructions
_MAX_SITE = 0xFFFF
_HOLD = 1 << 16  # filler lines the writer holds before writing them out


class LackeyError(ValueError):
    """A lackey line does not parse; the message names the source, the line number and
    what was expected."""


_EXPECTED = "expected 'I|L|S|M <hex addr>,<size>'"


def lackey_to_records(src: str | os.PathLike[str] | Iterable[str] | IO[str],
                      instructions: str = "gap", sites: list[str] | None = None,
                      stats: dict[str, int] | None = None) -> np.ndarray:
    """The whole of :func:`iter_lackey`'s output as one RECORD_DTYPE array."""
    parts = list(iter_lackey(src, instructions, sites, stats))
    return np.concatenate(parts) if parts else np.zeros(0, dtype=RECORD_DTYPE)


def lackey_sites(src: str | os.PathLike[str]) -> list[str]:
    """The ``sites`` list :func:`iter_lackey` builds for the file at ``src``, from a first
    pass (so a kvt header can name the sites before the records stream)."""
    sites: list[str] = []
    for _ in iter_lackey(src, sites=sites):
        pass
    return sites


def iter_lackey(src: str | os.PathLike[str] | Iterable[str] | IO[str],
                instructions: str = "gap", sites: list[str] | None = None,
                stats: dict[str, int] | None = None, chunk_records: int = 65536
                ) -> Iterator[np.ndarray]:
    """Parse lackey ``--trace-mem=yes`` output into RECORD_DTYPE arrays of up to
    ``chunk_records`` records, line by line (memory does not grow with the input).

    ``src``: path, text stream or iterable of lines. ``instructions``: ``"gap"`` or
    ``"ignore"`` (see module docstring). ``stats`` receives ``{"instructions", "loads",
    "stores", "modifies", "records"}``. Raises :class:`LackeyError` on a malformed line.
    """
    if instructions not in ("gap", "ignore"):
        raise ValueError("instructions must be 'gap' or 'ignore'")
    if isinstance(src, str | os.PathLike):
        with open_text(src) as f:  # compressed or not
            yield from iter_lackey(f, instructions, sites, stats, chunk_records)
        return
    name = str(getattr(src, "name", "<lackey>"))
    site_of: dict[int, int] = {}
    rows: list[tuple[int, int, int, int, int]] = []  # addr, gap, size, kind, site
    counts = {"instructions": 0, "loads": 0, "stores": 0, "modifies": 0}
    since = 0  # instructions since the last record
    n_records = 0
    pc = -1  # address of the current instruction
    for lineno, line in enumerate(src, 1):
        s = line.strip()
        if not s or s.startswith(("==", "--")):
            continue
        op, _, rest = s.partition(" ")
        try:
            a, comma, sz = rest.strip().partition(",")
            if op not in ("I", "L", "S", "M") or not comma:
                raise ValueError(_EXPECTED)
            addr = number(a, 16, f"{_EXPECTED}: the hex address")
            size = number(sz, 10, f"{_EXPECTED}: the decimal size")
            if not 0 <= addr < 1 << 64:
                raise ValueError(f"address {a} outside 64 bits")
            if op != "I" and not 1 <= size <= 0xFFFF:
                raise ValueError(f"size {size} outside 1..65535")
            if op != "I" and addr + size > 1 << 64:
                raise ValueError("the access wraps past address 2^64 - 1")
        except ValueError as e:
            raise LackeyError(f"{name}: line {lineno}: {e}: {line.rstrip()!r}") from None
        if op == "I":
            counts["instructions"] += 1
            since += 1
            pc = addr
            continue
        if pc not in site_of:
            site_of[pc] = min(len(site_of), _MAX_SITE)
        site = site_of[pc]
        gap = max(since - 1, 0) if instructions == "gap" else 0
        since = 0
        if op in ("L", "M"):
            rows.append((addr, gap, size, KIND_LOAD, site))
            gap = 0
        if op in ("S", "M"):
            rows.append((addr, gap, size, KIND_STORE, site))
        counts[{"L": "loads", "S": "stores", "M": "modifies"}[op]] += 1
        if len(rows) >= chunk_records:
            n_records += len(rows)
            yield _lackey_chunk(rows)
            rows = []
    if rows:
        n_records += len(rows)
        yield _lackey_chunk(rows)
    if sites is not None:
        sites[:] = [f"0x{p:x}" if p >= 0 else "none" for p in list(site_of)[:_MAX_SITE + 1]]
    if stats is not None:
        stats.update(counts, records=n_records)


def _lackey_chunk(rows: list[tuple[int, int, int, int, int]]) -> np.ndarray:
    out = np.zeros(len(rows), dtype=RECORD_DTYPE)
    cols = list(zip(*rows, strict=True))
    out["addr"] = np.array(cols[0], dtype=np.uint64)
    out["gap"] = np.minimum(np.array(cols[1], dtype=np.int64), 2**32 - 1)
    out["size"], out["kind"], out["site"] = cols[2], cols[3], cols[4]
    return out


def records_to_lackey(records: np.ndarray | Iterable[np.ndarray],
                      out: str | os.PathLike[str] | IO[str], instructions: bool = False,
                      prefetch: str = "skip") -> int:
    """Write records as lackey lines; returns the number of data lines written.

    ``records``: array or iterable of arrays (e.g. a ``traces.open`` reader). ``out``: path or
    text stream. See the module docstring for ``instructions`` and ``prefetch``.
    """
    if prefetch not in ("skip", "load"):
        raise ValueError("prefetch must be 'skip' or 'load'")
    if isinstance(out, str | os.PathLike):
        with open(out, "w", encoding="ascii", newline="\n") as f:
            return records_to_lackey(records, f, instructions, prefetch)
    chunks = [records] if isinstance(records, np.ndarray) else records
    filler = f"I  {FILLER_PC:08x},1\n"
    n = 0
    pending = 0  # gaps of dropped records carry over to the next written one
    for chunk in chunks:
        lines: list[str] = []
        held = 0  # filler lines held in ``lines``
        for addr, gap, _dep, size, kind, _tag, site, _flags in chunk.tolist():
            pending += gap
            if kind == KIND_MARKER:
                continue
            if kind == KIND_PREFETCH and prefetch == "skip":
                pending += 1  # the prefetch instruction remains, as a non-memory one
                continue
            if instructions:
                if held + pending > _HOLD:  # bounded memory whatever the gaps
                    out.write("".join(lines))
                    lines, held = [], 0
                    while pending > _HOLD:
                        out.write(filler * _HOLD)
                        pending -= _HOLD
                lines.append(filler * pending)
                held += pending
                lines.append(f"I  {SITE_PC_BASE + 4 * site:08x},1\n")
            pending = 0
            op = "S" if kind == KIND_STORE else "L"
            lines.append(f" {op} {addr:08x},{max(size, 1)}\n")
            n += 1
        out.write("".join(lines))
    return n


def convert_read(src: IO[str], opts: Any) -> tuple[Iterator[np.ndarray], dict[str, Any]]:
    """The converters' table reader (:mod:`traces.convert.formats`): lackey text, streamed;
    the header names the sites (a first pass over the file) when ``opts.need_sites``."""
    extra = {"sites": lackey_sites(opts.path)} if opts.need_sites and opts.path != "-" else {}
    return iter_lackey(src), extra


def convert_write(chunks: Iterable[np.ndarray], header: dict[str, Any], out: IO[str],
                  opts: Any) -> int:
    """The converters' table writer: lackey lines, with ``I`` lines for the gaps."""
    return records_to_lackey(chunks, out, instructions=True)
