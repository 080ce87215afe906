"""The upstream pull requests' reported figures after the seeds: the "upstream" column of the
issue-45 studies (``multikey_window``, ``hash``, ``pipeline_mget``).

The figures are data, not code: one row per reported figure in ``data/upstream_results.csv``
(what each column means, and how a row is added: ``data/README.md``). This module reads that
file, validates every cell, and gives the rows to the studies as :class:`UpstreamRow`.

The five seed PRs' figures stay where they are, as constants in :mod:`.seeds`;
:func:`seed_rows` gives the two whose negative findings the issue-45 studies reproduce (Redis
#15043 at 1M keys, Valkey #2311 at 4 KB values and up) in the same row shape, derived from
those constants rather than copied, so each figure lives in one place.

Like a seed row, an upstream row's machine is the PR author's: a simulated or native figure
that disagrees is a finding to explain, never a reason to fit a parameter.

``python -m kvsim.experiments.upstream [FILE]`` validates a file (the shipped one by default)
and prints its rows per PR, or one line naming the file, line and column of the first bad
cell, with exit status 2.
"""

from __future__ import annotations

import csv
import math
import sys
from dataclasses import dataclass, fields
from pathlib import Path

from kvsim.experiments import seeds

__all__ = ["COLUMNS", "DATA", "METRICS", "PROJECTS", "UpstreamError", "UpstreamRow",
           "change_pct", "load", "main", "seed_rows", "select"]

#: The shipped data file.
DATA = Path(__file__).resolve().parent / "data" / "upstream_results.csv"

#: Known projects -> the prefix every row's ``source`` starts with (its PR's URL).
PROJECTS: dict[str, str] = {
    "valkey": "https://github.com/valkey-io/valkey/pull/",
    "redis": "https://github.com/redis/redis/pull/",
}

#: Known metrics -> whether a higher value is better. A row's change in percent is the
#: improvement: ``(optimized - baseline) / baseline * 100`` when higher is better,
#: ``(baseline - optimized) / baseline * 100`` when lower is (Valkey #2311's convention for
#: load times), so a positive change is a gain for every metric.
METRICS: dict[str, bool] = {
    "requests_per_sec": True,
    "ops_per_sec": True,
    "avg_latency_ms": False,
    "p99_latency_ms": False,
    "load_seconds": False,
}

_TEXT = ("project", "experiment", "cpu", "variant", "command", "metric", "source")
_COUNTS = ("keys", "fields", "keys_per_command", "value_bytes", "pipeline", "io_threads")
_FIGURES = ("baseline", "optimized", "reported_change_pct")
#: The file's columns, in order (the header must be exactly these).
COLUMNS = ("project", "pr", "experiment", "cpu", "variant", "command", *_COUNTS, "cluster",
           "metric", *_FIGURES, "source", "note")
_CLUSTER = {"": None, "off": False, "on": True}


class UpstreamError(ValueError):
    """A bad upstream data file; the message is one line naming the file, line and column."""


@dataclass(frozen=True)
class UpstreamRow:
    """One figure an upstream PR reported. ``None`` is a parameter the PR did not state."""

    project: str
    pr: int
    experiment: str  #: the PR's name for the workload (the benchmark suite's test name if any)
    cpu: str  #: the machine as the PR names it ("unstated" when it does not)
    variant: str  #: which state of the PR was measured ("pr", or the commit named)
    command: str
    keys: int | None  #: keys in the keyspace
    fields: int | None  #: fields (members) per hash or sorted set
    keys_per_command: int | None
    value_bytes: int | None
    pipeline: int | None  #: pipeline depth
    io_threads: int | None  #: the server's io-threads (1: the main thread alone)
    cluster: bool | None
    metric: str  #: a name in :data:`METRICS`
    baseline: float | None
    optimized: float | None
    reported_change_pct: float | None  #: the change the PR wrote, when it wrote one
    source: str  #: the PR's URL and where in its thread
    note: str = ""

    @property
    def change_pct(self) -> float:
        """The reported change, else the one the baseline and optimized figures give."""
        if self.reported_change_pct is not None:
            return self.reported_change_pct
        return change_pct(self.metric, self.baseline, self.optimized)


def change_pct(metric: str, baseline: float, optimized: float) -> float:
    """The improvement in percent from ``baseline`` to ``optimized`` (see :data:`METRICS`)."""
    delta = optimized - baseline if METRICS[metric] else baseline - optimized
    return delta / baseline * 100


def _decimals(text: str) -> int:
    return len(text.partition(".")[2])


def _parse_row(cells: dict[str, str], where) -> UpstreamRow:
    """One row from its cells; ``where(column)`` formats an error's location."""
    def bad(column: str, reason: str) -> UpstreamError:
        return UpstreamError(f"{where(column)}: {reason}")

    for c in _TEXT:
        if not cells[c]:
            raise bad(c, "empty (required)")
    project = cells["project"]
    if project not in PROJECTS:
        raise bad("project", f"unknown project {project!r} (known: {', '.join(PROJECTS)})")
    try:
        pr = int(cells["pr"])
    except ValueError:
        raise bad("pr", f"not a PR number: {cells['pr']!r}") from None
    if pr <= 0:
        raise bad("pr", f"not a PR number: {cells['pr']!r}")
    url = PROJECTS[project] + str(pr)
    source = cells["source"]
    if not (source == url or source.startswith(url + " ")):
        raise bad("source", f"does not start with the PR's URL {url}")
    if cells["metric"] not in METRICS:
        raise bad("metric", f"unknown metric {cells['metric']!r} "
                            f"(known: {', '.join(METRICS)})")
    counts = {}
    for c in _COUNTS:
        text = cells[c]
        if not text:
            counts[c] = None
            continue
        if not text.isdigit():
            raise bad(c, f"not a whole number: {text!r}")
        counts[c] = int(text)
        if counts[c] < 1:
            raise bad(c, f"must be at least 1: {text!r}")
    if cells["cluster"] not in _CLUSTER:
        raise bad("cluster", f"not 'on', 'off' or empty: {cells['cluster']!r}")
    figures = {}
    for c in _FIGURES:
        text = cells[c]
        if not text:
            figures[c] = None
            continue
        try:
            figures[c] = float(text)
        except ValueError:
            raise bad(c, f"not a number: {text!r}") from None
        if not math.isfinite(figures[c]):
            raise bad(c, f"not a finite number: {text!r}")
        if c != "reported_change_pct" and figures[c] <= 0:
            raise bad(c, f"must be positive: {text!r}")
    base, opt, pct = (figures[c] for c in _FIGURES)
    if (base is None) != (opt is None):
        raise bad("optimized" if opt is None else "baseline",
                  "baseline and optimized go together (both or neither)")
    if base is None and pct is None:
        raise bad("reported_change_pct",
                  "empty while baseline and optimized are too: the row has no figure")
    if base is not None and pct is not None:
        # the reported change must agree with its own figures to the digits it was written with
        got = change_pct(cells["metric"], base, opt)
        tolerance = 0.5 * 10 ** -_decimals(cells["reported_change_pct"]) + 1e-9
        if abs(got - pct) > tolerance:
            raise bad("reported_change_pct",
                      f"{pct:g} disagrees with baseline and optimized, which give {got:+.3f}")
    return UpstreamRow(project=project, pr=pr, experiment=cells["experiment"],
                       cpu=cells["cpu"], variant=cells["variant"], command=cells["command"],
                       cluster=_CLUSTER[cells["cluster"]], metric=cells["metric"],
                       source=source, note=cells["note"], **counts, **figures)


def _identity(row: UpstreamRow) -> tuple:
    """What makes two rows the same figure: everything but the figures, source and note."""
    return tuple(getattr(row, f.name) for f in fields(row)
                 if f.name not in (*_FIGURES, "source", "note"))


def load(path: str | Path = DATA) -> tuple[UpstreamRow, ...]:
    """Every row of ``path``, validated; :class:`UpstreamError` on the first bad cell."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as e:
        reason = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
        raise UpstreamError(f"{path}: cannot read: {reason}") from None
    reader = csv.reader(text.splitlines(), strict=True)
    try:
        header = next(reader, None)
        if header is None:
            raise UpstreamError(f"{path}: empty file (expected a header line)")
        if tuple(header) != COLUMNS:
            missing = [c for c in COLUMNS if c not in header]
            extra = [c for c in header if c not in COLUMNS]
            what = (f"missing column {missing[0]!r}" if missing else
                    f"unknown column {extra[0]!r}" if extra else
                    "columns out of order or repeated")
            raise UpstreamError(f"{path}:1: header: {what} "
                                f"(expected: {','.join(COLUMNS)})")
        rows, seen = [], {}
        for values in reader:
            line = reader.line_num
            if not any(values):
                continue
            if len(values) != len(COLUMNS):
                raise UpstreamError(f"{path}:{line}: {len(values)} cells, "
                                    f"expected {len(COLUMNS)}")
            cells = dict(zip(COLUMNS, (v.strip() for v in values), strict=True))
            row = _parse_row(cells, lambda c, line=line: f"{path}:{line}: column {c!r}")
            key = _identity(row)
            if key in seen:
                raise UpstreamError(f"{path}:{line}: the same figure as line {seen[key]} "
                                    "(project to metric all equal)")
            seen[key] = line
            rows.append(row)
    except csv.Error as e:
        raise UpstreamError(f"{path}:{reader.line_num}: malformed CSV: {e}") from None
    return tuple(rows)


def select(rows, **where) -> list[UpstreamRow]:
    """The rows whose fields equal every ``column=value`` given (e.g. ``pr=14899``)."""
    names = {f.name for f in fields(UpstreamRow)}
    for k in where:
        if k not in names:
            raise ValueError(f"no column {k!r} (columns: {', '.join(sorted(names))})")
    return [r for r in rows if all(getattr(r, k) == v for k, v in where.items())]


_SEED_15043 = "https://github.com/redis/redis/pull/15043 description and comments (seed 001)"
_SEED_2311 = "https://github.com/valkey-io/valkey/pull/2311 description and review (seed 000)"


def seed_rows() -> tuple[UpstreamRow, ...]:
    """The seed figures whose negative findings the issue-45 studies reproduce, read from
    :mod:`.seeds` (their one place): Redis #15043's MSET runs, 1M keys ("L3-resident", no
    gain expected) beside 10M, and Valkey #2311's load-time changes, 4 KB values and up
    (no gain) beside the small values. Validated like a file's rows."""
    out = []
    cpu_15043 = "Intel Xeon Platinum 8488C (x86-aws-m7i.metal-24xl)"
    for (kpc, value, keys), runs in seeds.MSET_15043_OPS.items():
        for run, ((before, after), pct) in enumerate(
                zip(runs, seeds.MSET_15043[(kpc, value, keys)], strict=True), 1):
            cells = dict(project="redis", pr="15043", experiment=f"mset-{kpc}-keys",
                         cpu=cpu_15043, variant=f"batch16-run{run}", command="MSET",
                         keys=str(keys), fields="", keys_per_command=str(kpc),
                         value_bytes=str(value), pipeline="1", io_threads="1",
                         cluster="off", metric="ops_per_sec", baseline=str(before),
                         optimized=str(after), reported_change_pct=str(pct),
                         source=_SEED_15043, note="from experiments/seeds.py MSET_15043_OPS")
            out.append(_parse_row(cells, lambda c: f"seeds.MSET_15043 column {c!r}"))
    for (variant, cluster, value), (keys, pct) in seeds.RDB_LOAD.items():
        cells = dict(project="valkey", pr="2311", experiment="rdb-load",
                     cpu="Intel Xeon Platinum 8255C", variant=variant, command="(snapshot load)",
                     keys=str(keys), fields="", keys_per_command="", value_bytes=str(value),
                     pipeline="", io_threads="", cluster="on" if cluster else "off",
                     metric="load_seconds", baseline="", optimized="",
                     reported_change_pct=str(pct), source=_SEED_2311,
                     note="from experiments/seeds.py RDB_LOAD (c_ref variant names)")
        out.append(_parse_row(cells, lambda c: f"seeds.RDB_LOAD column {c!r}"))
    return tuple(out)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) > 1 or (args and args[0].startswith("-")):
        print("usage: python -m kvsim.experiments.upstream [FILE]", file=sys.stderr)
        return 2
    try:
        rows = load(args[0] if args else DATA)
    except UpstreamError as e:
        print(f"upstream: error: {e}", file=sys.stderr)
        return 2
    for project, pr in sorted({(r.project, r.pr) for r in rows}):
        mine = select(rows, project=project, pr=pr)
        changes = ", ".join(f"{r.change_pct:+.1f} %" for r in mine)
        print(f"{project} #{pr}: {len(mine)} figures: {changes}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
