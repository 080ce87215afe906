"""Kinds of work: a trace's gaps are retired at the rate of their kind (CPU file [work]),
in both engines: the WORK markers' instructions at their kinds' rates, the rest of a record's
gap at its site's kind's (header "site_kinds"; none: generic)."""

from __future__ import annotations

import copy
import io

import numpy as np
import pytest
from sim_helpers import records

from kvsim import sim, traces
from kvsim.traces import format as fmt

BASE = {
    "name": "t", "freq_ghz": 1.0, "core": {"width": 4, "rob": 256},
    "cache": [{"name": "L1", "size": "4KiB", "ways": 4, "line": 64, "latency": 4}],
    "dram": {"latency_ns": 100.0},
}
KIND = {name: i for i, name in enumerate(fmt.WORK_NAMES)}


def cpu(work: dict | None = None, **core) -> sim.CpuConfig:
    doc = copy.deepcopy(BASE)
    doc["core"].update(core)
    if work is not None:
        doc["work"] = work
    return sim.parse_cpu(doc)


def work(kind: str, n: int) -> tuple:
    return ("marker", (KIND[kind] << fmt.WORK_COUNT_BITS) | n, 0, 0, 0, 0, 0, fmt.MARK_WORK)


def hits(n: int, gap: int, per: list[tuple[str, int]], site: int = 0) -> np.ndarray:
    """n loads of one line (L1 hits: its miss is in a warm-up, not counted), each of `gap`
    gap instructions, of which the WORK markers `per` (kind, instructions) before it name
    some."""
    rows = [("marker", 0, 0, 0, 0, 0, 0, fmt.MARK_WARMUP_BEGIN), ("load", 64, 8),
            ("marker", 0, 0, 0, 0, 0, 0, fmt.MARK_WARMUP_END)]
    for _ in range(n):
        rows += [work(k, c) for k, c in per]
        rows.append(("load", 64, 8, gap, 0, 0, site))
    return records(rows)


@pytest.fixture(params=["fast", "reference"])
def engine(request):
    return request.param


def test_each_kind_is_retired_at_its_own_rate(engine):
    """Loads that hit retire in order at their dispatch rate: with [work], each record takes
    (hash instructions / hash rate + the rest / generic rate) cycles, so the whole run moves
    by exactly the instructions of a kind times the change of that kind's cycles each."""
    n, gap = 400, 40
    trace = hits(n, gap, [("hash", 24), ("compare", 8)])
    one = sim.simulate(trace, cpu(sustained_ipc=2), engine=engine)
    kinds = sim.simulate(trace, cpu({"generic": 2, "hash": 4, "compare": 1}), engine=engine)
    # per record: 24 hash at 4/cycle, 8 compare at 1/cycle, the rest (9 with the load) at 2
    want_delta = n * ((24 / 4 + 8 / 1 + 9 / 2) - (gap + 1) / 2)
    assert kinds["cycles"] - one["cycles"] == pytest.approx(want_delta, abs=1)
    assert kinds["timing"]["work_ipc"]["hash"] == 4
    assert one["instructions"] == kinds["instructions"]  # markers annotate, the gaps count


def test_one_rate_for_every_kind_is_the_sustained_ipc(engine):
    trace = hits(300, 30, [("hash", 10), ("crc", 5)])
    one = sim.simulate(trace, cpu(sustained_ipc=3), engine=engine)
    same = sim.simulate(trace, cpu({k: 3 for k in fmt.WORK_NAMES}), engine=engine)
    assert same["cycles"] == one["cycles"]


def test_without_work_the_markers_change_nothing(engine):
    marked = hits(200, 30, [("hash", 10)])
    plain = marked[(marked["kind"] != traces.KIND_MARKER) | (marked["flags"] != fmt.MARK_WORK)]
    a = sim.simulate(marked, cpu(), engine=engine)
    b = sim.simulate(plain, cpu(), engine=engine)
    assert a["cycles"] == b["cycles"]


def _trace_file(recs: np.ndarray, header: dict) -> io.BytesIO:
    buf = io.BytesIO()
    with traces.Writer(buf, header) as w:
        w.write(recs)
    buf.seek(0)
    return buf


def test_a_sites_kind_comes_from_the_header(engine):
    """The rest of a record's gap takes its site's kind ("site_kinds"); a trace without the
    list (an older one) is all generic."""
    n, gap = 300, 20
    recs = hits(n, gap, [], site=1)
    base = {"format_version": traces.VERSION, "sites": ["none", "resp.parse"]}
    rates = {"generic": 1, "parse": 4}
    with traces.open(_trace_file(recs, {**base, "site_kinds": [0, KIND["parse"]],
                                        "work_kinds": fmt.WORK_NAMES})) as r:
        parse = sim.simulate(r, cpu(rates), engine=engine)
    with traces.open(_trace_file(recs, base)) as r:
        generic = sim.simulate(r, cpu(rates), engine=engine)
    assert generic["cycles"] - parse["cycles"] == pytest.approx(n * (gap + 1) * (1 - 1 / 4),
                                                                abs=1)


def test_a_c_ref_trace_agrees_with_the_reference(tmp_path):
    """Differential: a c_ref trace (its WORK markers and site kinds) on a preset with [work],
    the compiled engine against the reference simulator."""
    from experiments import cref

    path = tmp_path / "t.kvt"
    cref.trace("pipeline", path, {"keys": 200, "ops": 150})
    cpu_ = sim.load_cpu("xeon-8488c").with_changes(
        work=(("generic", 2.0), ("hash", 3.0), ("compare", 4.0), ("parse", 1.5)))
    fast = sim.simulate(str(path), cpu_)
    ref = sim.simulate(str(path), cpu_, engine="reference")
    assert fast["cycles"] == ref["cycles"]
    assert fast["timing"]["stall_cycles"] == ref["timing"]["stall_cycles"]


@pytest.mark.parametrize(("work", "msg"), [
    ({"hashing": 2}, "work.hashing: unknown key"),
    ({"hash": 9}, "work.hash: at most the width"),
    ({"hash": 0}, "work.hash: must be > 0"),
    ({"hash": "fast"}, "work.hash: expected"),
])
def test_bad_work_sections_are_refused_in_one_line(work, msg):
    with pytest.raises(sim.ConfigError, match=msg) as e:
        cpu(work)
    assert "\n" not in str(e.value)
