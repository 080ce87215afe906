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


def test_a_record_array_with_its_header_is_its_file(tmp_path):
    """A trace's records simulated with its header (``header=``) give what the file gives;
    without it every site is generic work, another prediction (the array path once
    dropped the header silently: `kvsim ablate` predicted a model the validation did not)."""
    from experiments import cref

    path = tmp_path / "t.kvt"
    cref.trace("pipeline", path, {"keys": 200, "ops": 150})
    cpu_ = sim.load_cpu("xeon-8488c").with_changes(
        work=(("generic", 2.0), ("hash", 3.0), ("compare", 4.0), ("parse", 1.5)))
    with traces.open(path) as r:
        header = r.header
    recs = traces.read_all(path)
    by_file = sim.simulate(str(path), cpu_)
    with_header = sim.simulate(recs, cpu_, header=header)
    assert with_header["cycles"] == by_file["cycles"]
    assert with_header["timing"]["stall_cycles"] == by_file["timing"]["stall_cycles"]
    many = sim.simulate_many(recs, [cpu_, sim.load_cpu("xeon-8488c")], header=header)
    assert many[0]["cycles"] == by_file["cycles"]
    assert sim.simulate(recs, cpu_)["cycles"] != by_file["cycles"]
    with pytest.raises(TypeError, match="only for a record array"):
        sim.simulate(str(path), cpu_, header=header)


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


def test_the_crcs_kinds_fall_back_to_its_rate(engine):
    """A [work] without crc_streams and crc_combine charges them at its crc rate (their
    instructions were crc's before they had kinds), so a file fitted then predicts a trace
    that splits them as it predicted the trace that did not; with rates of their own the
    run moves by exactly their instructions times the change of their cycles."""
    n, gap = 300, 60
    split = hits(n, gap, [("crc", 10), ("crc_streams", 30), ("crc_combine", 15)])
    whole = hits(n, gap, [("crc", 55)])
    rates = {"generic": 2, "crc": 2.5}
    assert cpu(rates).work_ipc()["crc_streams"] == cpu(rates).work_ipc()["crc_combine"] == 2.5
    a = sim.simulate(split, cpu(rates), engine=engine)
    b = sim.simulate(whole, cpu(rates), engine=engine)
    assert a["cycles"] == b["cycles"]
    own = sim.simulate(split, cpu({**rates, "crc_streams": 4, "crc_combine": 0.5}),
                       engine=engine)
    want = n * (30 / 4 + 15 / 0.5 - 45 / 2.5)
    assert own["cycles"] - a["cycles"] == pytest.approx(want, abs=1)


def test_a_c_ref_load_names_the_crcs_parts(tmp_path):
    """c_ref's load of 4 KiB values checksums each value at its sds header's end (sdshdr16:
    5 bytes past an 8-byte boundary): per key the streams' steps and the join of
    sim/calibrate.py crc64_cost_by_kind at offset 5, and 256-byte values none of either;
    with a slower join the same trace is predicted slower, on both engines alike."""
    from experiments import cref
    from kvsim.sim import calibrate as cal
    from kvsim.traces.work import instructions_by_kind

    got = {}
    for size in (256, 4096):
        path = tmp_path / f"l{size}.kvt"
        cref.trace("load", path, {"keys": 64, "value_size": size, "restart_pages": "reused"})
        with traces.open(path) as r:
            got[size] = instructions_by_kind(r.header, r.read_all())
    want = cal.crc64_cost_by_kind(5, 4096)
    assert got[4096]["crc_streams"] == 64 * want["crc_streams"]
    assert got[4096]["crc_combine"] == 64 * want["crc_combine"]
    assert got[256]["crc_streams"] == got[256]["crc_combine"] == 0 < got[256]["crc"]
    base = sim.load_cpu("xeon-8488c").with_changes(
        work=(("generic", 2.0), ("crc", 2.0)))
    slow = base.with_changes(work=(("generic", 2.0), ("crc", 2.0), ("crc_combine", 0.4)))
    path = str(tmp_path / "l4096.kvt")
    runs = {(c, e): sim.simulate(path, cpu_, engine=e)["cycles"]
            for c, cpu_ in (("base", base), ("slow", slow)) for e in ("fast", "reference")}
    assert runs[("base", "fast")] == runs[("base", "reference")]
    assert runs[("slow", "fast")] == runs[("slow", "reference")]
    assert runs[("slow", "fast")] > runs[("base", "fast")]
