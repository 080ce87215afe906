"""Physical page placement (``[tlb] placement``, sim/placement.py, _engine/placement.h): each
page in a seeded random frame for the caches, the TLBs on the virtual page; the engine's mix
is the reference's bit for bit, a bijection, and it changes the levels a physical address
indexes above the page offset, not an L1 indexed within it, nor the TLBs."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvsim import sim
from kvsim.sim import _binding as B
from kvsim.sim import micro
from kvsim.sim.config import ConfigError
from kvsim.sim.placement import MAX_BITS, MIN_BITS, place_frame, place_line
from kvsim.sim.reference import ReferenceSim


@settings(max_examples=300, deadline=None)
@given(line=st.integers(0, 2 ** 58 - 1), bits=st.integers(MIN_BITS, MAX_BITS),
       seed=st.integers(0, 2 ** 64 - 1))
def test_engine_mix_is_the_reference_mix(line, bits, seed):
    lib = B.load_library()
    assert lib.kvsimPlacedLine(line, 6, bits, seed) == place_line(line, 6, bits, seed)
    assert lib.kvsimPlacedLine(line, 6, 0, seed) == line  # no placement: the line itself


@pytest.mark.parametrize("bits,seed", [(12, 1), (12, 2 ** 64 - 1), (21, 5)])
def test_frames_are_a_bijection_keeping_the_offset(bits, seed):
    pages = list(range(1 << 16)) + [(1 << (64 - bits)) - 1 - i for i in range(1000)]
    frames = {place_frame(p, bits, seed) for p in pages}
    assert len(frames) == len(pages)  # no two pages share a frame
    assert all(0 <= f < 1 << (64 - bits) for f in frames)
    sh = bits - 6
    for line in (0, 1, 63, (5 << sh) + 17, (1 << 57) + 3):
        got = place_line(line, 6, bits, seed)
        assert got & ((1 << sh) - 1) == line & ((1 << sh) - 1)
        assert got >> sh == place_frame(line >> sh, bits, seed)


def test_seeds_give_other_frames_and_the_same_seed_the_same():
    a = [place_frame(p, 12, 1) for p in range(64)]
    assert a == [place_frame(p, 12, 1) for p in range(64)]
    assert a != [place_frame(p, 12, 2) for p in range(64)]
    # the set-index bits above a 4 KiB page offset (five of them: 32 colours) are spread
    colours = np.bincount([place_frame(p, 12, 1) & 31 for p in range(4096)], minlength=32)
    assert colours.min() > 64 and colours.max() < 192  # 128 each on average


def _doc(placement: str | None, seed: int = 1) -> dict:
    tlb = {"page_size": "4KiB", "l1_entries": 16, "l1_ways": 4, "l2_entries": 256,
           "l2_ways": 8, "l2_latency": 3, "walk_latency": 20, "walk_reads": 1}
    if placement:
        tlb.update(placement=placement, placement_seed=seed)
    return {"name": "t", "freq_ghz": 2.0, "core": {"width": 4, "rob": 64},
            "cache": [{"name": "L1D", "size": 4096, "ways": 1, "line": 64, "latency": 4},
                      {"name": "L2", "size": 65536, "ways": 4, "line": 64, "latency": 12}],
            "dram": {"latency_ns": 80.0}, "tlb": tlb}


def _levels(r: dict) -> dict:
    return {lv["name"]: (lv["accesses"], lv["misses"]) for lv in r["levels"]}


def test_placement_changes_the_physically_indexed_level_only():
    """A chase over exactly the L2 (64 KiB, 4 ways: 16 colours of 4 KiB) keeps all of it
    with virtual addresses, and loses the sets whose colour more than four pages share when
    each page sits in a random frame; the L1 (one 4 KiB way: indexed within the page) and
    the TLBs see the same either way."""
    rec = micro.chase_records(65536, 1, 8000, warmup=4096)
    virt = sim.simulate(rec, sim.parse_cpu(_doc(None), "t"), page_size=4096)
    placed = sim.simulate(rec, sim.parse_cpu(_doc("random"), "t"), page_size=4096)
    v, p = _levels(virt), _levels(placed)
    assert v["L1D"] == p["L1D"]
    assert v["L2"][1] == 0 and p["L2"][1] > 0
    for k in ("dtlb_accesses", "dtlb_misses", "stlb_accesses", "stlb_misses"):
        assert virt["tlb"][k] == placed["tlb"][k], k
    assert placed["cycles"] > virt["cycles"]


def test_placement_is_deterministic_and_seeded():
    rec = micro.chase_records(65536, 1, 4000, warmup=4096)
    a, b, c = (sim.simulate(rec, sim.parse_cpu(_doc("random", s), "t"), page_size=4096)
               for s in (3, 3, 4))
    assert a == b
    assert _levels(a)["L2"] != _levels(c)["L2"]


@pytest.mark.parametrize("timing", [False, True])
def test_placement_engine_equals_reference(timing):
    """With nested paging (2 MiB guest pages on 4 KiB host frames) and page-table reads: the
    pieces, the walks' lines and the prefetchers' all placed, as in the reference."""
    doc = _doc("random", 9)
    doc["tlb"].update(page_size="2MiB", host_page_size="4KiB", walk_reads=2)
    doc["prefetcher"] = [{"level": "L2", "kind": "next_line", "degree": 1, "table": 4},
                         {"level": "L1D", "kind": "ip_stride", "degree": 2, "table": 8}]
    cfg = sim.parse_cpu(doc, "t").to_engine(timing=timing)
    assert cfg.place_bits == 12 and cfg.place_seed == 9
    rec = micro.chase_records(1 << 20, 2, 1500, seed=5)
    eng, ref = B.Engine(cfg), ReferenceSim(cfg)
    eng.run(rec)
    ref.run(rec)
    a, b = eng.finish(), ref.finish()
    eng.close()
    assert a == b


def test_bad_placement_is_one_line():
    doc = _doc("scattered")
    with pytest.raises(ConfigError, match=r"^tlb.placement: must be one of virtual, random"):
        sim.parse_cpu(doc, "t")
    with pytest.raises(ConfigError, match=r"^tlb.placement_seed"):
        sim.parse_cpu(_doc("random", -1), "t")
