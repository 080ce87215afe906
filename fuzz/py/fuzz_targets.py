"""The Python fuzz targets: one function per parser of untrusted input, ``target(data)``.

Each target feeds ``data`` to one reader the way the ``kvsim`` CLI does and returns normally
when the reader either accepts the bytes or refuses them with its documented error (a one-line
message: the CLI prints it as is). Anything else is a finding and raises
:class:`FuzzFinding` (or lets the unexpected exception through): an exception of another type
(the CLI would print "internal error"), a multi-line message, or an accepted input whose
result breaks a property stated beside the target (records a converter produced that break
FORMAT.md's record rules, a trace that does not survive writing and reading back, a CPU file
the loader accepts but the engine refuses).

``fuzz/run.py`` runs these under atheris (coverage-guided); ``fuzz/tests`` replays the seed
corpora through them without atheris. ``TARGETS`` maps a target's name (its corpus folder,
``fuzz/corpus/<name>/``) to its function.
"""

from __future__ import annotations

import io
import tomllib
from collections.abc import Callable

import numpy as np

from kvsim import sim, traces
from kvsim.sim import _binding as B
from kvsim.sim.config import parse_cpu
from kvsim.traces.convert import champsim, dinero, drmemtrace, gem5, lackey
from kvsim.traces.validate import RecordError, RecordValidator

__all__ = ["TARGETS", "FuzzFinding", "table_reader", "targets"]

#: The header ``traces.convert`` gives a converted trace (tags and markers named), whose
#: record rules the converters' output must keep.
CONVERTED_HEADER = {"tags": traces.TAG_NAMES, "markers": traces.MARKER_NAMES}


class FuzzFinding(AssertionError):
    """An input made a target break its contract."""


def _one_line(exc: BaseException) -> None:
    msg = str(exc)
    if not msg.strip() or "\n" in msg.strip():
        raise FuzzFinding(f"{type(exc).__name__} without a one-line message: {msg!r}") from exc


def _rules_hold(records: np.ndarray, header: dict) -> None:
    try:
        RecordValidator(header).check(records)
    except RecordError as exc:
        raise FuzzFinding(f"the reader produced a record the format forbids: {exc}") from exc


def trace_reader(data: bytes) -> None:
    """``traces.open`` on a .kvt stream, read to the end. Accepted: the records written
    again with ``traces.Writer`` read back identical (header and records)."""
    try:
        with traces.open(io.BytesIO(data)) as tr:
            records = tr.read_all()
            header = tr.header
    except traces.TraceError as exc:
        _one_line(exc)
        return
    out = io.BytesIO()
    h = {k: v for k, v in header.items() if k not in ("format_version", "chunk_records")}
    with traces.Writer(out, h, codec="raw") as w:
        w.write(records)
    back = traces.read_all(io.BytesIO(out.getvalue()))
    if back.tobytes() != records.tobytes():
        raise FuzzFinding("records changed when written and read again")


def trace_records(data: bytes) -> None:
    """Arbitrary record bytes in a well-formed .kvt (written with ``traces.Writer`` with its
    checks off, so the CRCs hold and only the records are wrong): the reader's record checks.
    Byte 0 gives the header's table lengths (tags, sites, markers; 0 = no table) and the
    chunk size. The reader refuses exactly the arrays ``traces.check_records`` finds a
    problem in, with a one-line message naming a record; what it accepts comes back intact.
    """
    if not data:
        return
    sel, body = data[0], data[1:]
    rec = np.frombuffer(body[: len(body) // traces.RECORD_SIZE * traces.RECORD_SIZE],
                        dtype=traces.RECORD_DTYPE)
    header: dict = {}
    if sel & 1:
        header["tags"] = traces.TAG_NAMES[: 1 + (sel >> 1) % len(traces.TAG_NAMES)]
    if sel & 2:
        header["sites"] = [f"s{i}" for i in range(1 + (sel >> 2) % 8)]
    if sel & 4:
        header["markers"] = traces.MARKER_NAMES[: 1 + (sel >> 3) % traces.NUM_MARKERS]
    out = io.BytesIO()
    with traces.Writer(out, header, codec="raw", chunk_records=1 + (sel >> 4),
                       validate=False) as w:
        w.write(rec)
    problems = traces.check_records(rec, header)
    try:
        back = traces.read_all(io.BytesIO(out.getvalue()))
    except traces.TraceError as exc:
        _one_line(exc)
        if "record" not in str(exc):
            raise FuzzFinding(f"a record error that names no record: {exc}") from exc
        if not problems:
            raise FuzzFinding(f"the reader refuses what check_records accepts: {exc}") from exc
        return
    if problems:
        raise FuzzFinding(f"the reader accepts what check_records refuses: {problems[0]}")
    if back.tobytes() != rec.tobytes():
        raise FuzzFinding("records changed when written and read again")


def _text(data: bytes) -> io.TextIOWrapper:
    """``data`` as the CLI opens a text trace (ASCII; a non-ASCII byte is a one-line
    UnicodeDecodeError, which the CLI reports as is)."""
    return io.TextIOWrapper(io.BytesIO(data), encoding="ascii")


def dinero_reader(data: bytes) -> None:
    """DineroIV din text (``traces.convert.dinero.din_to_records``), in both ifetch modes.
    Accepted: every record keeps the record rules."""
    for ifetch in ("skip", "gap"):
        try:
            rec = dinero.din_to_records(_text(data), ifetch=ifetch)
        except (dinero.DinError, UnicodeDecodeError) as exc:
            _one_line(exc)
            return
        _rules_hold(rec, CONVERTED_HEADER)


def lackey_reader(data: bytes) -> None:
    """Valgrind lackey output (``traces.convert.lackey.lackey_to_records``), in both
    instruction modes. Accepted: every record keeps the record rules, sites included."""
    for instructions in ("gap", "ignore"):
        sites: list[str] = []
        try:
            rec = lackey.lackey_to_records(_text(data), instructions=instructions, sites=sites)
        except (lackey.LackeyError, UnicodeDecodeError) as exc:
            _one_line(exc)
            return
        _rules_hold(rec, {**CONVERTED_HEADER, "sites": sites})


def gem5_reader(data: bytes) -> None:
    """A gem5 packet trace, raw or gzip (``traces.convert.gem5.gem5_to_records``), with the
    built-in protobuf decoder. Accepted: every record keeps the record rules."""
    try:
        _, rec = gem5.gem5_to_records(data)
    except gem5.Gem5TraceError as exc:
        _one_line(exc)
        return
    _rules_hold(rec, CONVERTED_HEADER)


def champsim_reader(data: bytes) -> None:
    """A ChampSim trace (``traces.convert.champsim.read_champsim``): 64-byte instructions.
    Accepted: the array holds every byte, one row per 64."""
    try:
        arr = champsim.read_champsim(io.BytesIO(data))
    except ValueError as exc:
        _one_line(exc)
        return
    if arr.size * champsim.CHAMPSIM_DTYPE.itemsize != len(data):
        raise FuzzFinding("read_champsim lost bytes")


def champsim_import(data: bytes) -> None:
    """A ChampSim trace imported as records (``traces.convert.champsim.champsim_to_records``,
    as ``kvsim convert`` does). Accepted: every record keeps the record rules."""
    try:
        for rec in champsim.champsim_to_records(io.BytesIO(data)):
            _rules_hold(rec, CONVERTED_HEADER)
    except champsim.ChampSimError as exc:
        _one_line(exc)


def drmemtrace_reader(data: bytes) -> None:
    """A DynamoRIO drmemtrace stream of ``trace_entry_t`` (raw or gzip) imported as records
    (``traces.convert.drmemtrace.drmemtrace_to_records``). Accepted: every record keeps the
    record rules."""
    try:
        for rec in drmemtrace.drmemtrace_to_records(io.BytesIO(data)):
            _rules_hold(rec, CONVERTED_HEADER)
    except drmemtrace.DrmemtraceError as exc:
        _one_line(exc)


#: Largest cache (bytes per level) the CPU target builds an engine for: bigger ones are
#: checked up to ``to_engine`` only (allocating them is slow, not a finding).
_ENGINE_BYTES = 1 << 22


def cpu_toml(data: bytes) -> None:
    """A CPU file: UTF-8 TOML (as ``sim.load_cpu`` reads it) through ``parse_cpu``.
    Accepted: its engine configuration is one the compiled engine takes (the Python checks
    come first; the engine's are only a backstop, so a refusal there is a finding)."""
    try:
        doc = tomllib.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        _one_line(exc)
        return
    try:
        cpu = parse_cpu(doc, "<fuzz>")
    except sim.ConfigError as exc:
        _one_line(exc)
        return
    for timing in (False, True) if cpu.timing_capable else (False,):
        cfg = cpu.to_engine(timing=timing)
        if all(c.size <= _ENGINE_BYTES for c in cpu.caches):
            try:
                B.Engine(cfg).close()
            except (ValueError, sim.ConfigError) as exc:
                raise FuzzFinding(f"parse_cpu accepted what the engine refuses: {exc}") from exc


def table_reader(name: str) -> Callable[[bytes], None]:
    """The target of a format that has no hand-written one: the table's reader
    (``traces.convert.formats``) on ``data`` as ``kvsim convert`` opens it (ASCII text for a
    text format). Accepted: every record keeps the record rules."""
    from kvsim.traces.convert import formats

    def target(data: bytes) -> None:
        row = formats.FORMATS[name]
        src = _text(data) if row.text else io.BytesIO(data)
        try:
            records, _ = row.reader()(src, formats.ReadOptions("<fuzz>", 4.0))
            for rec in records:
                _rules_hold(rec, CONVERTED_HEADER)
        except (ValueError, UnicodeDecodeError) as exc:
            _one_line(exc)

    target.__name__ = target.__qualname__ = f"{name}_reader"
    return target


def targets() -> dict[str, Callable[[bytes], None]]:
    """Every target: per readable row of the converters' table, the targets its ``fuzz``
    names (a hand-written function here, else :func:`table_reader`; ``<name>_reader`` when
    it names none), then the CPU file's."""
    from kvsim.traces.convert import formats

    out: dict[str, Callable[[bytes], None]] = {}
    for row in formats.FORMATS.values():
        if row.readable:
            for t in row.fuzz or (f"{row.name}_reader",):
                out[t] = globals().get(t) or table_reader(row.name)
    out["cpu_toml"] = cpu_toml
    return out


#: target name -> function, as :func:`targets` gives them when this module is imported
TARGETS: dict[str, Callable[[bytes], None]] = targets()
