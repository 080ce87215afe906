"""The --warmup rule for traces without warm-up markers (sim/warmup.py): the first N records
are bracketed by WARMUP_BEGIN / WARMUP_END, and every dependency still names the same
load."""

import numpy as np
import pytest

from kvsim import sim, traces
from kvsim.sim import warmup as wu


class _Reader:
    def __init__(self, chunks, header=None):
        self.chunks = chunks
        self.header = header or {}

    def __iter__(self):
        return iter(self.chunks)


def _trace(n, seed=1):
    """n loads, each depending on a random earlier load (or none)."""
    rng = np.random.default_rng(seed)
    r = np.zeros(n, dtype=traces.RECORD_DTYPE)
    r["kind"] = traces.KIND_LOAD
    r["size"] = 8
    r["addr"] = rng.integers(0, 1 << 30, n) * 64
    dep = rng.integers(0, 40, n)
    dep = np.minimum(dep, np.arange(n))
    r["dep"] = dep
    return r


def _flat(reader):
    return np.concatenate(list(reader))


@pytest.mark.parametrize("n", [0, 1, 37, 100, 299, 300, 500])
@pytest.mark.parametrize("chunk", [7, 64, 1000])
def test_markers_and_deps(n, chunk):
    rec = _trace(300)
    chunks = [rec[i:i + chunk] for i in range(0, len(rec), chunk)]
    out = _flat(wu.WarmupPrefix(_Reader(chunks), n))
    marks = np.flatnonzero(out["kind"] == traces.KIND_MARKER)
    if n == 0:
        assert len(marks) == 0 and np.array_equal(out, rec)
        return
    assert list(out["flags"][marks]) == [traces.MARK_WARMUP_BEGIN, traces.MARK_WARMUP_END]
    assert marks[0] == 0 and marks[1] == 1 + min(n, len(rec))
    data = np.delete(out, marks)
    assert np.array_equal(data["addr"], rec["addr"])
    # every dep names the same load as before: compare the addresses it points at
    idx = np.flatnonzero(out["dep"] > 0)
    src = idx - out["dep"][idx].astype(np.int64)
    assert (out["kind"][src] == traces.KIND_LOAD).all()
    orig = np.flatnonzero(rec["dep"] > 0)
    assert np.array_equal(out["addr"][src], rec["addr"][orig - rec["dep"][orig].astype(np.int64)])


def test_simulation_counts_only_after_the_prefix():
    rec = _trace(3000)
    cpu = "local"
    full = sim.simulate(rec, cpu, functional=True)
    part = sim.simulate(wu.WarmupPrefix(_Reader([rec[:1000], rec[1000:]]), 1200), cpu,
                        functional=True)
    assert part["records"] == full["records"] - 1200
    assert part["warmup_records"] >= 1200


def test_rule_parsing_and_refusals():
    assert wu.parse_warmup("500") == 500 and wu.parse_warmup("0.25") == 0.25
    assert wu.warmup_records(0.25, 1000) == 250 and wu.warmup_records(7, None) == 7
    for bad in ("-1", "1.5", "0", "0.0", "abc", "1e400"):
        if bad == "0":
            assert wu.parse_warmup(bad) == 0
            continue
        with pytest.raises(wu.WarmupError):
            wu.parse_warmup(bad)
    with pytest.raises(wu.WarmupError, match="stdin"):
        wu.warmup_records(0.5, None)
    with pytest.raises(wu.WarmupError, match="own warm-up"):
        wu.WarmupPrefix(_Reader([], {"warmup": "prefix"}), 10)
    marked = _trace(10)
    marked["kind"][4] = traces.KIND_MARKER
    marked["flags"][4] = traces.MARK_WARMUP_BEGIN
    marked["dep"][4:] = 0
    with pytest.raises(wu.WarmupError, match="record 4"):
        _flat(wu.WarmupPrefix(_Reader([marked]), 2))


@pytest.mark.parametrize("n", [0, 150, 1000])
def test_a_trace_file_is_decoded_by_the_compiled_intake(tmp_path, monkeypatch, n):
    """Around a trace reader, the prefix takes the records from the compiled intake (the
    decoding `kvsim simulate` uses without --warmup), and gives what it gives around the
    reader's own Python decoding."""
    from kvsim.sim import _intake

    p = tmp_path / "t.kvt"
    with traces.Writer(p, {"workload": {"name": "test"}}, chunk_records=64) as w:
        w.write(_trace(300))
    calls = []
    real = _intake.chunks
    monkeypatch.setattr(_intake, "chunks", lambda *a, **k: calls.append(1) or real(*a, **k))
    with traces.open(p) as tr:
        got = _flat(wu.WarmupPrefix(tr, n))
    assert calls == [1]
    with traces.open(p) as tr:
        want = _flat(wu.WarmupPrefix(_Reader(list(tr)), n))
    assert got.tobytes() == want.tobytes()
