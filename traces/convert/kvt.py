"""kvsim's own ``.kvt`` as a row of the converters' table (:mod:`traces.convert.formats`):
read with :func:`kvsim.traces.open` (validated as it streams), written with
:class:`kvsim.traces.Writer`. The format itself is traces/FORMAT.md."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from .formats import ReadOptions, WriteOptions


def convert_read(src: Any, opts: ReadOptions) -> tuple[Any, dict[str, Any]]:
    """(the reader, its header): the reader is an iterable of record chunks."""
    from kvsim import traces

    reader = traces.open(src)
    return reader, reader.header


def convert_write(chunks: Iterator[Any], header: dict[str, Any], out: Any,
                  opts: WriteOptions) -> int:
    from kvsim import traces

    with traces.Writer(out, header) as w:
        for chunk in chunks:
            w.write(chunk)
    return w.total_records
