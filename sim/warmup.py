"""Warm-up by rule for traces that carry no warm-up markers (``kvsim simulate --warmup``).

A trace whose measured phase starts with cold caches and TLBs gives a prediction that moves
with the trace's length. c_ref traces can carry their own warm-up prefix (``kvsim trace ...
--warmup-ops N``: operations of the same workload between ``WARMUP_BEGIN`` and
``WARMUP_END`` markers). For a trace without markers the rule is: the first ``N`` records
(or the first fraction ``f`` of its records) are warm-up. :class:`WarmupPrefix` wraps a
reader and inserts ``WARMUP_BEGIN`` before the first record and ``WARMUP_END`` before
record ``N``; both simulators then run those records through their caches without counting
them (traces/FORMAT.md). A ``dep`` that reaches back across the inserted ``WARMUP_END``
grows by one, so every dependency still names the same load.

A c_ref trace carries its workload's setup as its own warm-up prefix by default (format
version 3, header key ``setup``: ``compact`` or ``accesses``; traces/FORMAT.md, "The setup's
warm-up"). :func:`setup_state` reads that key; a trace without it (versions 1 and 2, other
producers) or with ``"none"`` starts its measured phase cold, which ``kvsim simulate`` says.

A trace that already has warm-up markers (a c_ref header saying ``"warmup": "prefix"``,
or a ``WARMUP_BEGIN``/``WARMUP_END`` record met while reading) is refused: its own
warm-up is the documented one.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from kvsim import traces

if TYPE_CHECKING:  # imported once records are wrapped: parsing --warmup needs none
    import numpy as np

__all__ = ["SETUP_CARRIED", "WarmupError", "WarmupPrefix", "parse_warmup", "setup_note",
           "setup_state", "warmup_records"]

#: The header ``setup`` values of a trace that carries its setup as a warm-up prefix.
SETUP_CARRIED = ("compact", "accesses")


class WarmupError(ValueError):
    """The --warmup rule cannot apply to this trace (one line, names what and where)."""


def setup_state(header: dict | None) -> str:
    """How a trace carries its workload's setup: its header's ``setup`` (``compact``,
    ``accesses``, ``none``), ``none`` when the header has no such key."""
    v = (header or {}).get("setup")
    return v if isinstance(v, str) and v else "none"


def setup_note(header: dict | None, rule: int | float | None = None) -> str:
    """One line for ``kvsim simulate``'s output: whether the measured phase starts from the
    setup's state (``rule``: the --warmup rule applied to a trace without it)."""
    state = setup_state(header)
    if state in SETUP_CARRIED:
        return f"setup: carried as the warm-up prefix ({state}; simulated, not counted)"
    how = ("header \"setup\": \"none\"" if (header or {}).get("setup") == "none"
           else "no \"setup\" in its header")
    warm = f"; --warmup {rule} warms it" if rule is not None else ""
    return (f"setup: NOT carried ({how}): the measured phase starts with cold caches and "
            f"TLBs{warm}")


def parse_warmup(text: str) -> int | float:
    """``--warmup`` value: an integer >= 0 (records) or a fraction in (0, 1)."""
    try:
        if text.strip().isdigit():
            return int(text)
        f = float(text)
    except ValueError:
        raise WarmupError(f"expected a record count or a fraction in (0, 1), got {text!r}") \
            from None
    if not 0 < f < 1:
        raise WarmupError(f"expected a record count or a fraction in (0, 1), got {text!r}")
    return f


def warmup_records(rule: int | float, total: int | None) -> int:
    """Records of warm-up for ``rule`` on a trace of ``total`` records (None: unknown)."""
    if isinstance(rule, int):
        return rule
    if total is None:
        raise WarmupError("a fractional --warmup needs a trace file whose record count is "
                          "known (not stdin)")
    return int(rule * total)


class WarmupPrefix:
    """A reader whose first ``n`` records are bracketed by warm-up markers.

    Iterating yields the wrapped reader's chunks with ``WARMUP_BEGIN`` in front of the
    first record and ``WARMUP_END`` in front of record ``n`` (at the end if the trace is
    shorter). ``header`` is the wrapped reader's."""

    def __init__(self, reader: Any, n: int) -> None:
        if n < 0:
            raise WarmupError(f"--warmup: record count must be >= 0, got {n}")
        self.reader = reader
        self.n = n
        self.header = getattr(reader, "header", None) or {}
        if self.header.get("warmup") == "prefix":
            raise WarmupError("--warmup: the trace carries its own warm-up prefix (header "
                              "\"warmup\": \"prefix\"); simulate it without --warmup")

    def _chunks(self) -> Iterator[np.ndarray]:
        """The wrapped reader's record arrays, decoded by the compiled intake when it can."""
        if isinstance(self.reader, traces.TraceReader) and not self.reader._started:
            from . import _intake

            return _intake.chunks(self.reader)
        return iter(self.reader)

    def __iter__(self) -> Iterator[np.ndarray]:
        import numpy as np

        if self.n == 0:
            yield from self._chunks()
            return
        base = 0  # original index of the chunk's first record
        ended = False
        yield traces.marker_record(traces.MARK_WARMUP_BEGIN)
        for chunk in self._chunks():
            marks = chunk["kind"] == traces.KIND_MARKER
            warm = marks & ((chunk["flags"] == traces.MARK_WARMUP_BEGIN) |
                            (chunk["flags"] == traces.MARK_WARMUP_END))
            if warm.any():
                i = base + int(np.argmax(warm))
                raise WarmupError(f"--warmup: record {i} is a warm-up marker; the trace carries "
                                  "its own warm-up, simulate it without --warmup")
            if ended:
                out = self._shift_deps(chunk, base)
            elif base + len(chunk) < self.n:
                out = chunk
            else:
                cut = self.n - base
                tail = self._shift_deps(chunk[cut:], self.n)
                end = traces.marker_record(traces.MARK_WARMUP_END)
                out = np.concatenate([chunk[:cut], end, tail])
                ended = True
            base += len(chunk)
            yield out
        if not ended:
            yield traces.marker_record(traces.MARK_WARMUP_END)

    def _shift_deps(self, recs: np.ndarray, first: int) -> np.ndarray:
        """``recs`` hold the original records ``first, first + 1, ...`` (all at or after
        record n): a dep reaching a record before n crosses WARMUP_END and grows by one.
        Returns ``recs``, or a copy when a dep changes."""
        import numpy as np

        if len(recs) == 0 or first - self.n >= int(recs["dep"].max(initial=0)):
            return recs
        idx = first + np.arange(len(recs), dtype=np.int64)
        dep = recs["dep"].astype(np.int64)
        cross = (dep > 0) & (idx - dep < self.n)
        if not cross.any():
            return recs
        out = recs.copy()
        out["dep"][cross] = (dep[cross] + 1).astype(out["dep"].dtype)
        return out
