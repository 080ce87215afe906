"""The upstream data file's loader (kvsim.experiments.upstream): the shipped file, a valid file
and its types, every kind of bad cell or file (one line naming file, line and column), the seed
rows derived from kvsim.experiments.seeds, and the ``python -m`` entry point."""

from __future__ import annotations

import csv
import io
import os
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kvsim.experiments import seeds, upstream
from kvsim.experiments.upstream import COLUMNS, UpstreamError, UpstreamRow

from .conftest import ROOT


def good(**over) -> dict[str, str]:
    """A valid row's cells, with ``over`` replacing some."""
    cells = dict(project="redis", pr="14899", experiment="mget-100B-100keys", cpu="some x86",
                 variant="pr", command="MGET", keys="5000000", fields="",
                 keys_per_command="100", value_bytes="100", pipeline="10", io_threads="1",
                 cluster="off", metric="ops_per_sec", baseline="43890", optimized="48747",
                 reported_change_pct="11.1",
                 source="https://github.com/redis/redis/pull/14899 comment", note="")
    cells.update(over)
    return cells


def write(path, rows, header=COLUMNS):
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(header)
    for r in rows:
        w.writerow([r[c] for c in header] if isinstance(r, dict) else r)
    path.write_text(buf.getvalue(), encoding="utf-8")
    return path


def test_shipped_file_loads_and_every_row_has_a_figure():
    rows = upstream.load()
    assert rows
    for r in rows:
        assert r.source.startswith(upstream.PROJECTS[r.project] + str(r.pr))
        assert isinstance(r.change_pct, float)


def test_valid_file_types_and_empty_cells(tmp_path):
    p = write(tmp_path / "u.csv", [good(), good(pipeline="", io_threads="", cluster="",
                                            experiment="other", baseline="", optimized="",
                                            reported_change_pct="-9.6")])
    a, b = upstream.load(p)
    assert (a.pr, a.keys, a.pipeline, a.cluster, a.baseline) == (14899, 5_000_000, 10, False,
                                                                  43890.0)
    assert a.fields is None
    assert (b.pipeline, b.io_threads, b.cluster, b.baseline, b.optimized) == (None,) * 5
    assert b.change_pct == -9.6


def test_change_computed_when_not_reported(tmp_path):
    p = write(tmp_path / "u.csv", [
        good(reported_change_pct=""),
        good(experiment="lat", metric="avg_latency_ms", baseline="0.5", optimized="0.4",
             reported_change_pct="")])
    tput, lat = upstream.load(p)
    assert tput.change_pct == pytest.approx((48747 - 43890) / 43890 * 100)
    assert lat.change_pct == pytest.approx(20.0)  # lower is better: a fall is a gain


BAD_CELLS = [
    ({"project": "keydb"}, "project", "unknown project"),
    ({"project": ""}, "project", "empty"),
    ({"cpu": ""}, "cpu", "empty"),
    ({"pr": "#14899"}, "pr", "not a PR number"),
    ({"pr": "0"}, "pr", "not a PR number"),
    ({"source": "https://github.com/redis/redis/pull/1489 comment"}, "source", "URL"),
    ({"project": "valkey"}, "source", "URL"),
    ({"metric": "qps"}, "metric", "unknown metric"),
    ({"keys": "5M"}, "keys", "whole number"),
    ({"pipeline": "-1"}, "pipeline", "whole number"),
    ({"io_threads": "0"}, "io_threads", "at least 1"),
    ({"cluster": "yes"}, "cluster", "'on', 'off'"),
    ({"baseline": "fast"}, "baseline", "not a number"),
    ({"optimized": "inf"}, "optimized", "finite"),
    ({"reported_change_pct": "nan"}, "reported_change_pct", "finite"),
    ({"baseline": "-3"}, "baseline", "positive"),
    ({"optimized": ""}, "optimized", "both or neither"),
    ({"baseline": "", "optimized": "", "reported_change_pct": ""}, "reported_change_pct",
     "no figure"),
    ({"reported_change_pct": "12.1"}, "reported_change_pct", "disagrees"),
    ({"reported_change_pct": "11.05"}, "reported_change_pct", "disagrees"),  # 11.066 to 2 dp
]


@pytest.mark.parametrize(("over", "column", "reason"), BAD_CELLS,
                         ids=[f"{c}-{r}" for _, c, r in BAD_CELLS])
def test_bad_cell_names_file_line_and_column(tmp_path, over, column, reason):
    p = write(tmp_path / "u.csv", [good(experiment="fine"), good(**over)])
    with pytest.raises(UpstreamError) as e:
        upstream.load(p)
    msg = str(e.value)
    assert "\n" not in msg
    assert msg.startswith(f"{p}:3: column {column!r}: "), msg
    assert reason in msg


def test_reported_change_is_checked_to_its_own_precision(tmp_path):
    # 43890 -> 48747 is +11.066 %: "11.1", "11.07" and "11" agree, "11.05" does not (see BAD_CELLS)
    p = write(tmp_path / "u.csv", [good(), good(experiment="b", reported_change_pct="11"),
                                   good(experiment="c", reported_change_pct="11.07")])
    assert len(upstream.load(p)) == 3


@pytest.mark.parametrize("kind", ["missing", "directory", "not-utf8", "empty", "header-missing",
                                  "header-unknown", "header-order", "short-row", "long-row",
                                  "duplicate", "bad-quoting"])
def test_bad_file_one_line_error(tmp_path, kind):
    p = tmp_path / "u.csv"
    line = None
    if kind == "missing":
        pass
    elif kind == "directory":
        p.mkdir()
    elif kind == "not-utf8":
        p.write_bytes(b"project,pr\n\xff\xfe\n")
    elif kind == "empty":
        p.write_text("")
    elif kind == "header-missing":
        write(p, [], header=COLUMNS[:-1])
        line = 1
    elif kind == "header-unknown":
        write(p, [], header=(*COLUMNS, "machine"))
        line = 1
    elif kind == "header-order":
        write(p, [], header=(COLUMNS[1], COLUMNS[0], *COLUMNS[2:]))
        line = 1
    elif kind == "short-row":
        write(p, [list(good().values())[:-1]])
        line = 2
    elif kind == "long-row":
        write(p, [[*good().values(), "x"]])
        line = 2
    elif kind == "duplicate":
        write(p, [good(), good(note="same figure again", source=good()["source"] + " later")])
        line = 3
    elif kind == "bad-quoting":
        write(p, [good()])
        p.write_text(p.read_text() + 'redis,1,"a"b,' + "," * 16 + "\n")
        line = 3
    with pytest.raises(UpstreamError) as e:
        upstream.load(p)
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith(str(p))
    if line is not None:
        assert msg.startswith(f"{p}:{line}: "), msg


def test_blank_lines_are_skipped_and_lines_still_counted(tmp_path):
    p = write(tmp_path / "u.csv", [good()])
    p.write_text(p.read_text() + "\n" + ",".join(good(pr="x").values()) + "\n")
    with pytest.raises(UpstreamError, match=r":4: column 'pr'"):
        upstream.load(p)


_counts = st.one_of(st.none(), st.integers(1, 10**9))
_row = st.builds(
    UpstreamRow,
    project=st.sampled_from(sorted(upstream.PROJECTS)),
    pr=st.integers(1, 99999),
    experiment=st.text("abc-_ 0", min_size=1).map(str.strip).filter(bool),
    cpu=st.sampled_from(["unstated", "AWS c8g, ARM"]),
    variant=st.just("pr"), command=st.sampled_from(["MGET", "HGET", "SET+GET"]),
    keys=_counts, fields=_counts, keys_per_command=_counts, value_bytes=_counts,
    pipeline=_counts, io_threads=_counts, cluster=st.sampled_from([None, False, True]),
    metric=st.sampled_from(sorted(upstream.METRICS)),
    baseline=st.integers(1, 10**7).map(float), optimized=st.integers(1, 10**7).map(float),
    reported_change_pct=st.none(), source=st.just(""), note=st.just("a note, with a comma"))


def _cells(r: UpstreamRow) -> dict[str, str]:
    def text(v):
        if v is None:
            return ""
        if isinstance(v, bool):
            return "on" if v else "off"
        return repr(v) if isinstance(v, float) else str(v)
    cells = {c: text(getattr(r, c)) for c in COLUMNS}
    cells["source"] = upstream.PROJECTS[r.project] + str(r.pr) + " description"
    return cells


@given(st.lists(_row, min_size=1, max_size=6, unique_by=upstream._identity))
def test_written_rows_load_back_equal(tmp_path_factory, rows):
    p = write(tmp_path_factory.mktemp("rt") / "u.csv", [_cells(r) for r in rows])
    back = upstream.load(p)
    assert [r.change_pct for r in back] == [
        upstream.change_pct(r.metric, r.baseline, r.optimized) for r in rows]
    assert [(r.project, r.pr, r.keys, r.cluster, r.baseline, r.note) for r in back] == [
        (r.project, r.pr, r.keys, r.cluster, r.baseline, r.note) for r in rows]


@given(st.sampled_from(sorted(upstream.METRICS)), st.floats(0.01, 1e7), st.floats(0.01, 1e7))
def test_change_sign_follows_the_metric_direction(metric, base, opt):
    pct = upstream.change_pct(metric, base, opt)
    better = opt > base if upstream.METRICS[metric] else opt < base
    assert (pct > 0) == better or base == opt


def test_seed_rows_come_from_seeds_module_once_each():
    rows = upstream.seed_rows()
    mset = upstream.select(rows, pr=15043)
    assert len(mset) == sum(len(v) for v in seeds.MSET_15043_OPS.values())
    assert {(r.keys_per_command, r.value_bytes, r.keys) for r in mset} == set(seeds.MSET_15043_OPS)
    rdb = upstream.select(rows, pr=2311)
    assert {(r.variant, r.cluster, r.value_bytes) for r in rdb} == set(seeds.RDB_LOAD)
    assert len(rdb) == len(seeds.RDB_LOAD)
    for r in rdb:
        assert r.change_pct == seeds.rdb_load(r.variant, r.cluster, r.value_bytes)


def test_seed_rows_are_validated(monkeypatch):
    key = next(iter(seeds.MSET_15043))
    wrong = dict(seeds.MSET_15043)
    wrong[key] = [v + 5 for v in wrong[key]]
    monkeypatch.setattr(seeds, "MSET_15043", wrong)
    with pytest.raises(UpstreamError, match="seeds.MSET_15043 column 'reported_change_pct'"):
        upstream.seed_rows()


def test_select_rejects_an_unknown_column():
    with pytest.raises(ValueError, match="no column 'machine'"):
        upstream.select(upstream.load(), machine="x")


def _run(*args):
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", "kvsim.experiments.upstream", *map(str, args)],
                          capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)


def test_module_entry_point(tmp_path):
    ok = _run()
    assert ok.returncode == 0 and ok.stderr == ""
    prs = {(r.project, r.pr) for r in upstream.load()}
    assert len(ok.stdout.splitlines()) == len(prs)
    bad = _run(write(tmp_path / "u.csv", [good(metric="qps")]))
    assert bad.returncode == 2 and bad.stdout == ""
    assert bad.stderr.count("\n") == 1 and "Traceback" not in bad.stderr
    assert bad.stderr.startswith(f"upstream: error: {tmp_path / 'u.csv'}:2: column 'metric'")
