"""The probe of the L2 prefetchers (sim/calibrate_prefetch.py): its orders, the reading
and the decision it makes, and the model's own answer to it on both engines."""

from __future__ import annotations

import math

import numpy as np
import pytest
from test_calibrate import LEVELS, ZEN4, synthetic_raw

from kvsim import sim
from kvsim.sim import calibrate as cal
from kvsim.sim import calibrate_prefetch as cp
from kvsim.sim.config import ConfigError

KIB = 1024
REGION = cp.REGION_LINES
# a small machine: L1D 4 KiB (64 lines), L2 256 KiB LRU (the probe: 1 MiB, 128 loads)
SMALL = [{"level": 1, "size": 4 * KIB, "ways": 4, "line": 64},
         {"level": 2, "size": 256 * KIB, "ways": 8, "line": 64},
         {"level": 3, "size": 4096 * KIB, "ways": 16, "line": 64}]


# --- the orders -----------------------------------------------------------------------------

@pytest.mark.parametrize("kind", ["pair", "stream"])
def test_probe_and_control_visit_the_same_regions_in_the_same_order(kind):
    size, d = 256 * KIB, 32
    probe = cp.probe_order(kind, size, d)
    ctl = cp.probe_order(f"{kind}_control", size, d)
    for order in (probe, ctl):
        assert len(np.unique(order)) == len(order)  # a cycle: every line at most once
    assert np.array_equal(probe // REGION, ctl // REGION)
    assert len(probe) == size // 64 // (1 if kind == "pair" else 2)


def _distance_to(order: np.ndarray, target) -> np.ndarray:
    """For every line of ``order``, loads from it to ``target(line)`` along the cycle."""
    pos = np.full(int(order.max()) + 2, -1)
    pos[order.astype(int)] = np.arange(len(order))
    t = pos[target(order.astype(int))]
    return np.where(t < 0, -1, (t - np.arange(len(order))) % len(order))


def test_a_pair_partner_comes_exactly_the_distance_later():
    size, d = 256 * KIB, 32
    probe = cp.probe_order("pair", size, d)
    dist = _distance_to(probe, lambda x: x ^ 1)
    n = len(probe)
    # each pair: one line leads, its partner follows d loads later (d from the other side)
    assert set(dist.tolist()) == {d, n - d}
    assert sum(dist == d) == n // 2
    ctl = _distance_to(cp.probe_order("pair_control", size, d), lambda x: x ^ 1)
    assert min(np.minimum(ctl, n - ctl)) == n // 2 - d  # half a cycle from the partner


def test_a_stream_follow_is_the_line_after_three_ascending_misses():
    size, d = 256 * KIB, 32
    order = cp.probe_order("stream", size, d).astype(int)
    n = len(order)
    for b in range(0, n // 2, 4 * d):  # a block: d leads of three lines, then d follows
        leads = order[b:b + 3 * d].reshape(d, 3)
        follows = order[b + 3 * d:b + 4 * d]
        assert np.all(np.diff(leads, axis=1) > 0)  # ascending
        assert np.all(leads // REGION == (follows // REGION)[:, None])
        assert np.array_equal(follows, leads[:, 2] + 1)
        assert np.all(leads[:, 2] % 2 == 1)  # the follow is not the last lead's pair
    ctl = cp.probe_order("stream_control", size, d).astype(int)
    assert not np.any(ctl[3 * d:4 * d] == ctl[2:3 * d:3] + 1)


def test_distance_divides_the_slots_and_passes_the_l1():
    assert cp.probe_size(SMALL) == 1024 * KIB
    d = cp.probe_distance(SMALL)
    assert d == 128 and d > SMALL[0]["size"] // 64
    cp.probe_order("stream", cp.probe_size(SMALL), d)  # no error
    assert cp.probe_size(SMALL[:1]) is None and cp.probe_distance(SMALL[:1]) is None


# --- the reading and the decision ------------------------------------------------------------

def _raw(pair_served: float, stream_served: float, control=40.0, l2=4.0) -> dict:
    """A probe's raw figures whose follows the L2 served these shares of."""
    def probe(share, served):
        return control - share * served * (control - l2)
    return {"size": 8 << 20, "distance": 1024, "huge_fraction": 1.0, "repeats": 2,
            "ns": {"pair": [probe(0.5, pair_served)] * 4, "pair_control": [control] * 4,
                   "stream": [probe(0.25, stream_served)] * 4,
                   "stream_control": [control] * 4}}


TABLE = [{"level": "L1D", "kind": "ascending", "degree": 1, "table": 16},
         {"level": "L2", "kind": "stream", "degree": 2, "table": 32},
         {"level": "L2", "kind": "adjacent_line", "degree": 1, "table": 16}]
MODEL = {"adjacent_line": 0.85, "stream": 0.6}


def _kinds(pfs):
    return [(p["level"], p["kind"]) for p in pfs]


def test_pair_hits_keep_adjacent_line_and_none_drop_it():
    got = cp.reading(_raw(0.8, 0.5), 4.0)
    assert got["adjacent_line"]["served"] == pytest.approx(0.8)
    assert got["stream"]["served"] == pytest.approx(0.5)
    kept, line = cp.decide(TABLE, got, MODEL, "table (T)")
    assert _kinds(kept) == _kinds(TABLE) and line == "table (T)"
    adj = kept[2]["src"]["kind"]
    assert adj.startswith("table (T); measured: the pair probe") and "0.80 of its follows" in adj

    kept, line = cp.decide(TABLE, cp.reading(_raw(0.02, 0.5), 4.0), MODEL, "table (T)")
    assert _kinds(kept) == [("L1D", "ascending"), ("L2", "stream")]
    assert "L2 adjacent_line dropped: measured: the pair probe" in line
    assert "served 0.02 of its follows" in line and "the model with it 0.85" in line

    kept, line = cp.decide(TABLE, cp.reading(_raw(0.0, -0.1), 4.0), MODEL, "table (T)")
    assert _kinds(kept) == [("L1D", "ascending")]
    assert "L2 stream dropped" in line and "L2 adjacent_line dropped" in line


def test_fires_is_half_the_models_share_beyond_the_noise():
    assert cp.fires(0.43, 0.85) is True and cp.fires(0.42, 0.85) is False
    assert cp.fires(0.43, 0.85, noise=0.4) is True
    # half the model's share within the noise, or no model share: the probe cannot tell
    assert cp.fires(0.0, 0.85, noise=0.5) is None and cp.fires(0.0, 0.1, noise=0.06) is None
    assert cp.fires(0.9, math.nan) is None
    raw = _raw(0.0, 0.0)
    raw["ns"]["stream_control"] = [40.0, 40.0, 48.0, 48.0]  # rounds 20 % apart
    got = cp.reading(raw, 4.0)
    assert got["stream"]["noise"] == pytest.approx(0.2 * 40 / (0.25 * 36), abs=1e-4)
    assert got["adjacent_line"]["noise"] == 0.0
    kept, line = cp.decide(TABLE, got, MODEL, "table (T)")
    assert _kinds(kept) == [("L1D", "ascending"), ("L2", "stream")]
    assert "probe cannot tell; kept" in kept[1]["src"]["kind"]
    assert "L2 adjacent_line dropped" in line


def test_without_a_probe_the_table_stands_and_says_so():
    kept, line = cp.decide(TABLE, None, None, "table (T)")
    assert _kinds(kept) == _kinds(TABLE) and line == "table (T)"
    assert kept[0]["src"] == {"kind": "table (T)"}
    assert "not measured" in kept[1]["src"]["kind"]


@pytest.mark.parametrize("change, want", [
    (lambda r: r["ns"].update(pair=[math.nan]), "the pair chase over 8388608 B has no positive"),
    (lambda r: r["ns"].pop("stream_control"), "the stream_control chase over 8388608 B has no"),
    (lambda r: r["ns"].update(pair_control=[3.9]), "took 3.90 ns, no slower than the L2's 4.00"),
])
def test_a_reading_that_cannot_tell_is_one_line(change, want):
    raw = _raw(0.5, 0.5)
    change(raw)
    with pytest.raises(cp.ProbeError) as e:
        cp.reading(raw, 4.0)
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith("l2probe: ") and want in msg


def test_build_doc_refuses_a_bad_probe_in_one_line_and_keeps_a_good_one():
    raw, _ = synthetic_raw()
    raw["l2probe"] = _raw(0.0, 0.0, control=16.0, l2=4.0)
    raw["l2probe"]["ns"]["pair_control"] = [-1.0]
    with pytest.raises(ConfigError, match=r"^calibrate: l2probe: the pair_control chase"):
        cal.build_doc(raw, LEVELS, ZEN4, quick=True)
    # a probe whose follows no L2 served: the table's L2 stream goes, its up_down stays
    raw["l2probe"] = _raw(0.0, 0.0, control=16.0, l2=4.0)
    doc = cal.build_doc(raw, LEVELS, ZEN4, quick=True)
    assert ("L2", "stream") not in _kinds(doc["prefetcher"])
    assert ("L2", "up_down") in _kinds(doc["prefetcher"])
    assert "L2 stream dropped: measured: the stream probe" in doc["src"]["prefetcher"]
    assert doc["meta"]["l2_prefetch"]["reading"]["stream"]["served"] == pytest.approx(0.0)
    assert doc["meta"]["raw"]["l2probe"] == raw["l2probe"]
    assert cal.raw_from_doc(doc)["l2probe"] == raw["l2probe"]


# --- the model's answer: the probe's address stream on both engines ---------------------------

def _small_cpu(l2_prefetchers: list[str]):
    doc = {"name": "t", "freq_ghz": 2.0,
           "core": {"width": 4, "rob": 128},
           "cache": [{"name": "L1D", "size": 4 * KIB, "ways": 4, "line": 64, "latency": 4,
                      "mshrs": 8},
                     {"name": "L2", "size": 256 * KIB, "ways": 8, "line": 64, "latency": 12,
                      "mshrs": 16},
                     {"name": "L3", "size": 4096 * KIB, "ways": 16, "line": 64,
                      "latency": 40}],
           "dram": {"latency_ns": 80.0, "bandwidth_gbs": 20.0},
           "prefetcher": [{"level": "L2", "kind": k, "degree": 2, "table": 32}
                          for k in l2_prefetchers]}
    return sim.parse_cpu(doc)


def _l2_hits(order: str, cpu, engine: str = "fast", steps: int = 4000) -> tuple[int, dict]:
    size, d = cp.probe_size(SMALL), cp.probe_distance(SMALL)
    rec = cp.records(order, size, d, steps, warmup=2 * size // 64)
    r = sim.simulate(rec, cpu, functional=True, engine=engine, page_size=4096, validate=False)
    hits = {row["level"]: row["hits"] for row in r["by_tag"] if row["kind"] == "load"}
    return hits.get("L2", 0), r


@pytest.mark.parametrize("kind, order, share", [("adjacent_line", "pair", 0.5),
                                                ("stream", "stream", 0.25)])
def test_the_probe_gets_l2_hits_exactly_with_its_prefetcher(kind, order, share):
    steps = 4000
    on, _ = _l2_hits(order, _small_cpu([kind]), steps=steps)
    off, _ = _l2_hits(order, _small_cpu([]), steps=steps)
    ctl_on, _ = _l2_hits(f"{order}_control", _small_cpu([kind]), steps=steps)
    assert on >= 0.8 * share * steps  # the follows, served by the L2
    assert off <= 0.02 * steps and ctl_on <= 0.02 * steps
    # the other kind gives the probe no more hits than its control
    other = _small_cpu(["stream" if kind == "adjacent_line" else "adjacent_line"])
    assert abs(_l2_hits(order, other, steps=steps)[0]
               - _l2_hits(f"{order}_control", other, steps=steps)[0]) <= 0.02 * steps


def test_the_probe_is_the_same_on_the_reference_engine():
    cpu = _small_cpu(["stream", "adjacent_line"])
    for order in ("pair", "stream_control"):
        _, fast = _l2_hits(order, cpu, steps=600)
        _, ref = _l2_hits(order, cpu, engine="reference", steps=600)
        assert fast["by_tag"] == ref["by_tag"] and fast["prefetch"] == ref["prefetch"]


def test_the_self_check_replays_the_probe_and_gates_the_pair_orders():
    from kvsim.sim import calibrate_check as check

    size, d = cp.probe_size(SMALL), cp.probe_distance(SMALL)
    raw = dict(_raw(0.0, 0.0), size=size, distance=d, huge_fraction=0.0)
    rows = cp.replay_rows(_small_cpu(["adjacent_line"]), raw, 2000, 2 * size // 64, check._row)
    got = {r["point"].split()[1]: r for r in rows}
    assert list(got) == ["pair", "pair_control", "stream", "stream_control"]
    assert got["pair"]["gated"] and got["pair_control"]["gated"]
    assert not got["stream"]["gated"] and "shown, not gated" in got["stream"]["note"]
    # the file's adjacent_line serves the pair probe's follows, and shows it
    assert got["pair"]["predicted_ns"] < got["pair_control"]["predicted_ns"]
    assert "adjacent_line: the file's L2 serves" in got["pair"]["note"]


def _intel_doc(key="m-1", reading=None) -> dict:
    """A calibrated file's fields apply_probe reads: an Intel core of the table, the old
    Intel L1 prefetcher, the table's L2 ones, and (``reading``) a probe's decision."""
    cpu = {"vendor": "GenuineIntel", "family": 6, "model": 0x8F, "flags": []}
    meta = {"machine_key": key, "cpu": cpu}
    if reading is not None:
        meta["l2_prefetch"] = {"reading": reading, "model_served": MODEL}
    return {"meta": meta, "src": {},
            "prefetcher": [{"level": "L1D", "kind": "next_line", "degree": 1, "table": 16}]}


def test_a_probe_of_the_same_machine_sets_an_older_files_prefetchers():
    doc = _intel_doc()
    cp.apply_probe(doc, _intel_doc(reading=cp.reading(_raw(0.02, 0.5), 4.0)))
    table = cal.known_core("GenuineIntel", 6, 0x8F)["prefetchers"]
    want = [(p["level"], p["kind"]) for p in table if p["kind"] != "adjacent_line"]
    assert _kinds(doc["prefetcher"]) == want and ("L1D", "next_line") not in want
    assert "L2 adjacent_line dropped" in doc["src"]["prefetcher"]
    assert doc["meta"]["l2_prefetch"]["kept"] == ["stream"]

    doc = _intel_doc()
    cp.apply_probe(doc, _intel_doc(reading=cp.reading(_raw(0.8, 0.5), 4.0)))
    assert _kinds(doc["prefetcher"]) == [(p["level"], p["kind"]) for p in table]


@pytest.mark.parametrize("probed, want", [
    (_intel_doc(key="m-2", reading={}), "is not the CPU file's"),
    (_intel_doc(), "has no [meta] l2_prefetch reading"),
])
def test_apply_probe_refuses_another_machine_or_no_probe_in_one_line(probed, want):
    with pytest.raises(ValueError, match=want.replace("[", r"\[").replace("]", r"\]")):
        cp.apply_probe(_intel_doc(), probed)


def test_the_command_writes_nothing_on_a_bad_input(tmp_path, capsys):
    src, out = tmp_path / "cpu.toml", tmp_path / "out.toml"
    src.write_text("[meta]\nmachine_key = 'a'\n")
    assert cp.main([str(src), "--probe", str(src), "-o", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("python -m kvsim.sim.calibrate_prefetch:") and "\n" not in err
    assert not out.exists()
