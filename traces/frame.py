"""A trace as a pandas DataFrame with names, not codes: ``kind``, ``tag``, ``site`` and
``marker`` are categoricals named by the trace header (``tags``, ``sites``, ``markers``)
or, without a header, by the format's own tables (``TAG_NAMES``, ``KIND_NAMES``, ...).

    df = traces.to_dataframe("run.kvt")
    df[df.kind == "load"].groupby("tag", observed=True).size()
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from .format import KIND_MARKER, KIND_NAMES, MARKER_NAMES, RECORD_DTYPE, TAG_NAMES

__all__ = ["to_dataframe"]


def _categorical(codes: np.ndarray, names: list[str], prefix: str):
    """``codes`` as a categorical of ``names``; a code past the list is named prefix+code."""
    import pandas as pd

    names = [str(n) for n in names]
    top = int(codes.max()) + 1 if len(codes) else 0
    names += [f"{prefix}{i}" for i in range(len(names), top)]
    return pd.Categorical.from_codes(codes.astype(np.int64), categories=names)


def to_dataframe(source: Any, header: dict | None = None):
    """The records of ``source`` as a DataFrame, one row per record.

    source: a path (``str`` or ``Path``), an open ``traces.open`` reader (read to its end),
    or a numpy array of ``RECORD_DTYPE`` (then ``header``, if given, names tags and sites).
    Columns: ``addr`` (virtual byte address; a marker's value), ``gap``, ``dep``, ``size``
    (bytes), ``flags`` as in traces/FORMAT.md, and the categoricals ``kind`` (load, store,
    prefetch, marker), ``tag`` (the structure), ``site`` (the code site) and ``marker``
    (the marker type for marker records, missing for the others).
    """
    import pandas as pd

    if isinstance(source, str | Path):
        from .reader import open_trace

        with open_trace(source) as tr:
            return to_dataframe(tr.read_all(), tr.header)
    if not isinstance(source, np.ndarray):
        hdr = getattr(source, "header", None)
        if hdr is None:
            raise TypeError("source must be a path, a traces reader or a record array")
        return to_dataframe(source.read_all(), hdr)
    if source.dtype != RECORD_DTYPE:
        raise TypeError(f"a record array must have dtype traces.RECORD_DTYPE, got {source.dtype}")
    hdr = header or {}
    tags = list(hdr.get("tags") or TAG_NAMES)
    sites = list(hdr.get("sites") or [])
    markers = list(hdr.get("markers") or MARKER_NAMES)
    is_marker = source["kind"] == KIND_MARKER
    marker = _categorical(np.where(is_marker, source["flags"], 0), markers, "marker")
    marker[~is_marker] = np.nan
    return pd.DataFrame({
        "addr": source["addr"], "gap": source["gap"], "dep": source["dep"],
        "size": source["size"],
        "kind": _categorical(source["kind"], list(KIND_NAMES), "kind"),
        "tag": _categorical(source["tag"], tags, "tag"),
        "site": _categorical(source["site"], sites, "site"),
        "marker": marker,
        "flags": source["flags"],
    })
