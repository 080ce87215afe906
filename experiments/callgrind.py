"""Callgrind's output format, read once: the one reader of callgrind profiles in kvsim.

:func:`read` parses a file that valgrind's callgrind writes (the format of the Valgrind
manual, "Callgrind Format Specification", version 1) and returns a :class:`Profile`:

- ``events``: the event names of the ``events:`` line (``Ir``, and with ``--cache-sim=yes``
  ``--branch-sim=yes`` also ``Dr Dw I1mr D1mr D1mw ILmr DLmr DLmw Bc Bcm Bi Bim``);
- ``totals``: per event, the sum of every self cost in the file (checked against the file's
  ``totals:`` line where it has one);
- ``self_costs``: per function, per event, the cost of the function's own code (the cost
  lines after ``fn=``; callgrind's "self" or "exclusive" cost);
- ``inclusive``: per function, per event, its self cost plus the cost of each call it makes
  (the cost line after each ``calls=`` line is the call's inclusive cost);
- ``self_by_file``: the self costs by ``(file, function)``, where the file is the one of
  the code (``fl=``, or ``fi=``/``fe=`` inside a function for inlined code), as
  callgrind_annotate names its rows ``file:function``;
- ``calls``: per function, how many times it was called (the counts of the ``calls=`` lines
  naming it by the ``cfn=`` before them), so that ``inclusive / calls`` is its cost per call
  (calls the compiler inlined are not calls: their code counts in the caller);
- ``call_costs``: per ``(caller, callee)``, the calls' count (``"calls"``) and their
  inclusive cost of each event (the cost lines after those ``calls=`` lines).

What the reader follows of the format: name compression (``fn=(12) name`` defines 12,
``fn=(12)`` refers to it; one table for ``fn``/``cfn``/``jfn``, one for the files
``fl``/``fi``/``fe``/``cfi``/``cfl``/``jfi``, one for the objects ``ob``/``cob``), the
``positions:`` line (``line``, or ``instr line`` with ``--dump-instr=yes``: one or two
subpositions before the costs), subposition compression (``+N``, ``-N``, ``*``, hexadecimal
``0x..``), cost lines shorter than the event list (the rest are zero), ``calls=`` (its next
line is the call's cost, not a self cost) and ``jump=``/``jcnd=`` (ignored, as
callgrind_annotate does: the position line callgrind writes after them carries no cost).
Functions are named by their name alone (two static functions of one name in different
files add up), as the server profiles rank them.

A file that breaks the format raises :class:`CallgrindFormatError`, whose message names the
file, the line and what is wrong.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["CallgrindFormatError", "Profile", "read"]

#: The name-compression table each position specification uses (the format's "separate
#: ID mapping" per kind of position: functions, files, objects).
_TABLE = {"fn": "fn", "cfn": "fn", "jfn": "fn",
          "fl": "fl", "fi": "fl", "fe": "fl", "cfi": "fl", "cfl": "fl", "jfi": "fl",
          "ob": "ob", "cob": "ob"}
_SPEC = re.compile(r"^(" + "|".join(sorted(_TABLE, key=len, reverse=True)) + r")=(.*)$")
_COMPRESSED = re.compile(r"^\((\d+)\)\s*(.*)$")
_SUBPOSITION = re.compile(r"^(\*|[+-]\d+|[+-]?0[xX][0-9a-fA-F]+|\d+)$")
#: A header line ("key: value"), met anywhere (a file may hold several parts, each with its
#: header); keys other than events, positions and totals carry nothing the costs need.
_HEADER = re.compile(r"^([A-Za-z]\w*):(?:\s+(.*))?$")


class CallgrindFormatError(ValueError):
    """A callgrind file that breaks the format: ``FILE:LINE: what``."""


@dataclass
class Profile:
    """One callgrind file's costs (module docstring); every cost row has every event."""

    events: list[str]
    totals: dict[str, int]
    self_costs: dict[str, dict[str, int]] = field(default_factory=dict)
    inclusive: dict[str, dict[str, int]] = field(default_factory=dict)
    self_by_file: dict[tuple[str, str], dict[str, int]] = field(default_factory=dict)
    calls: dict[str, int] = field(default_factory=dict)
    call_costs: dict[tuple[str, str], dict[str, int]] = field(default_factory=dict)

    def event_costs(self, event: str, inclusive: bool = False) -> dict[str, int]:
        """``{function: cost}`` of one event, self (default) or inclusive."""
        table = self.inclusive if inclusive else self.self_costs
        return {fn: row.get(event, 0) for fn, row in table.items()}

    def check_valid(self) -> None:
        """Assert the invariants: every row has every event; the totals are the sum of the
        self costs, and so of the self costs by file; each function's inclusive cost is at
        least its self cost, and the by-file rows add up to the per-function ones."""
        tables = (self.self_costs, self.inclusive, self.self_by_file)
        assert all(list(row) == self.events for t in tables for row in t.values())
        for ev in self.events:
            assert sum(r[ev] for r in self.self_costs.values()) == self.totals[ev]
            by_fn: dict[str, int] = {}
            for (_, fn), r in self.self_by_file.items():
                by_fn[fn] = by_fn.get(fn, 0) + r[ev]
            assert by_fn == self.event_costs(ev)
            for fn, r in self.self_costs.items():
                assert self.inclusive[fn][ev] >= r[ev] >= 0


def _number(tok: str) -> int:
    return int(tok, 16) if tok[:2] in ("0x", "0X") else int(tok)


def _add(table: dict, key, events: list[str], costs: list[int]) -> None:
    row = table.get(key)
    if row is None:
        row = table[key] = dict.fromkeys(events, 0)
    for ev, v in zip(events, costs, strict=False):
        row[ev] = row.get(ev, 0) + v


def read(path: Path | str) -> Profile:
    """The :class:`Profile` of the callgrind output file ``path`` (module docstring).
    Raises CallgrindFormatError on a line that breaks the format, OSError if unreadable."""
    path = Path(path)
    names: dict[tuple[str, str], str] = {}
    fn: str | None = None  # the current function
    file = "???"  # the file of the current code: the last fl=, fi= or fe= (callgrind writes
    # fl= at a function only where its file differs from the last one, inlined files included)
    events: list[str] = []  # this part's (the last events: line)
    seen: list[str] = []  # every part's, in order
    npos = 1  # subpositions before the costs: "line" (the default) or "instr line"
    prof = Profile(events=seen, totals={})
    part_sum: dict[str, int] = {}
    call_pending = False
    cfn: str | None = None  # the callee of the next calls= line

    def fail(lineno: int, what: str) -> CallgrindFormatError:
        return CallgrindFormatError(f"{path}:{lineno}: {what}")

    with path.open(errors="replace") as f:
        for lineno, raw in enumerate(f, 1):
            line = raw.rstrip("\n")
            if not line.strip() or line.startswith("#"):
                continue
            c0 = line[0]
            if c0.isdigit() or c0 in "+-*":
                toks = line.split()
                if len(toks) < npos or not all(_SUBPOSITION.match(t) for t in toks[:npos]):
                    raise fail(lineno, f"expected {npos} subposition(s) then costs: {line!r}")
                try:
                    costs = [_number(t) for t in toks[npos:]]
                except ValueError:
                    raise fail(lineno, f"a cost is not a number: {line!r}") from None
                if len(costs) > len(events):
                    raise fail(lineno, f"{len(costs)} costs for {len(events)} events "
                               f"({' '.join(events) or 'no events: line yet'})")
                if fn is None:
                    raise fail(lineno, "a cost line before any fn= line")
                _add(prof.inclusive, fn, events, costs)
                if call_pending:  # the call's inclusive cost: the caller's, not its own
                    call_pending = False
                    _add(prof.call_costs, (fn, cfn), events, costs)
                    continue
                _add(prof.self_costs, fn, events, costs)
                _add(prof.self_by_file, (file, fn), events, costs)
                for ev, v in zip(events, costs, strict=False):
                    part_sum[ev] = part_sum.get(ev, 0) + v
                continue
            if call_pending:
                raise fail(lineno, f"a calls= line must be followed by its cost line: {line!r}")
            m = _SPEC.match(line)
            if m:
                spec, value = m.groups()
                table = _TABLE[spec]
                cm = _COMPRESSED.match(value)
                if cm:
                    ident, name = cm.groups()
                    if name:
                        names[table, ident] = name
                    elif (table, ident) in names:
                        name = names[table, ident]
                    else:
                        raise fail(lineno, f"{spec}=({ident}) refers to no earlier name")
                else:
                    name = value.strip()
                if spec == "fn":
                    fn = name
                elif spec == "cfn":
                    cfn = name
                elif spec in ("fl", "fi", "fe"):
                    file = name
                continue
            if line.startswith("calls="):
                count = line[6:].split()
                if cfn is None or not count or not count[0].isdigit():
                    raise fail(lineno, f"a calls= line without a count or a cfn= before it: "
                               f"{line!r}")
                prof.calls[cfn] = prof.calls.get(cfn, 0) + int(count[0])
                row = prof.call_costs.setdefault((fn, cfn), {})
                row["calls"] = row.get("calls", 0) + int(count[0])
                call_pending = True
                continue
            if line.startswith(("jump=", "jcnd=")):
                continue
            h = _HEADER.match(line)
            if h is None:
                raise fail(lineno, f"not a line of callgrind's format: {line!r}")
            key, value = h.group(1), h.group(2) or ""
            if key == "events":
                events = value.split()
                if not events:
                    raise fail(lineno, "an events: line with no events")
                seen += [ev for ev in events if ev not in seen]
                part_sum = {}
            elif key == "positions":
                words = value.split()
                if not words or any(w not in ("instr", "line", "bb", "addr") for w in words):
                    raise fail(lineno, f"unknown positions: {value!r}")
                npos = len(words)
            elif key == "totals":
                try:
                    want = [_number(t) for t in value.split()]
                except ValueError:
                    raise fail(lineno, f"a total is not a number: {line!r}") from None
                got = [part_sum.get(ev, 0) for ev in events]
                want += [0] * (len(events) - len(want))
                if got != want:
                    raise fail(lineno, f"totals: {' '.join(map(str, want))} but the cost "
                               f"lines add up to {' '.join(map(str, got))}")
    if call_pending:
        raise fail(lineno, "the file ends after a calls= line (a truncated file)")
    if not seen:
        raise CallgrindFormatError(f"{path}: no events: line (not a callgrind file)")
    for table in (prof.self_costs, prof.inclusive, prof.self_by_file):
        for key, row in table.items():
            table[key] = {ev: row.get(ev, 0) for ev in seen}
    for key, row in prof.call_costs.items():
        prof.call_costs[key] = {"calls": row["calls"], **{ev: row.get(ev, 0) for ev in seen}}
    prof.totals = {ev: sum(r[ev] for r in prof.self_costs.values()) for ev in seen}
    return prof
