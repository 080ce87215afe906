"""Hardware-prefetcher unit tests: one fully associative level with the prefetcher under
test, a few loads, and the lines the level then holds. Both engines are checked (the
property tests of test_differential.py compare them on random traces; these pin what each
kind is documented to fetch)."""

from __future__ import annotations

import pytest
from sim_helpers import records

from kvsim import sim
from kvsim.sim import _binding as B
from kvsim.sim.reference import ReferenceSim

LINE, WAYS = 64, 16


def engines(kind: str, degree: int = 1, table: int = 4):
    doc = {"name": "t", "cache": [{"name": "L1", "size": WAYS * LINE, "ways": WAYS,
                                   "line": LINE, "replacement": "lru"}],
           "prefetcher": [{"level": "L1", "kind": kind, "degree": degree, "table": table}]}
    cfg = sim.parse_cpu(doc).to_engine(timing=False)
    return [B.Engine(cfg), ReferenceSim(cfg)]


def held_after(kind: str, lines: list[int], **kw) -> list[set[int]]:
    """The set of lines the level holds after loading `lines` in order, per engine."""
    out = []
    for eng in engines(kind, **kw):
        eng.run(records([("load", ln * LINE, 8) for ln in lines]))
        out.append({x for x in eng.peek_set(0, 0) if x is not None})
    return out


@pytest.mark.parametrize("lines, want", [
    ([5], {5, 4}),             # an odd line brings the even one below it
    ([8], {8, 9}),             # an even line the odd one above
    ([5, 4], {5, 4}),          # a hit triggers nothing
    ([6, 9], {6, 7, 9, 8}),
])
def test_adjacent_line_fetches_the_other_line_of_the_pair(lines, want):
    for got in held_after("adjacent_line", lines):
        assert got == want


@pytest.mark.parametrize("lines, want", [
    ([10], {10, 11}),              # a region without history goes up
    ([10, 7], {10, 11, 7, 6}),     # below the region's last access: down
    ([10, 7, 11], {10, 11, 7, 6, 12}),  # a hit trains it too (11 was prefetched): up
    ([10, 63], {10, 11, 63}),      # up from the region's last line: nothing beyond 4 KiB
    ([70, 64], {70, 71, 64}),      # down from the region's first line: nothing below it
    ([200], {200, 201}),           # another region starts without history
])
def test_up_down_follows_the_region_direction(lines, want):
    for got in held_after("up_down", lines):
        assert got == want


def test_up_down_degree_and_table():
    # degree 2: two lines in the direction; table 1: region 1 evicts region 0's history, so
    # going back to region 0 below its last line goes up again
    for got in held_after("up_down", [10, 7], degree=2):
        assert got == {10, 11, 12, 7, 6, 5}
    for got in held_after("up_down", [10, 100, 7], table=1):
        assert got == {10, 11, 100, 101, 7, 8}
    for got in held_after("up_down", [10, 100, 7], table=2):
        assert got == {10, 11, 100, 101, 7, 6}


def test_new_kinds_are_registered():
    assert {"adjacent_line", "up_down"} <= set(B.prefetcher_names())
