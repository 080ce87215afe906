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


def held_after_keyed(kind: str, loads: list[tuple[int, int]], **kw) -> list[set[int]]:
    """As held_after, with each load's site (the prefetchers' key) given: (line, site)."""
    out = []
    for eng in engines(kind, **kw):
        eng.run(records([("load", ln * LINE, 8, 0, 0, 0, site) for ln, site in loads]))
        out.append({x for x in eng.peek_set(0, 0) if x is not None})
    return out


# one key's trigger at line t is followed by a load of t - 1 (an object and the line
# before it); at the key's later triggers the region prefetcher brings t - 1 along
_FOLLOWED = [(100, 1), (99, 2), (300, 3), (500, 3), (700, 3), (900, 3), (200, 1)]


def test_region_learns_a_keys_footprint_and_replays_it():
    for got in held_after_keyed("region", _FOLLOWED, degree=2, table=8):
        assert got == {100, 99, 300, 500, 700, 900, 200, 199}
    # before the footprint is stored (its generation is still open): nothing
    for got in held_after_keyed("region", _FOLLOWED[:2] + [(200, 1)], degree=2, table=8):
        assert got == {100, 99, 200}
    # another key's trigger replays nothing; nor across the 4 KiB page (line 128 = 2 x 64)
    for got in held_after_keyed("region", _FOLLOWED[:-1] + [(200, 4), (128, 1)], table=8):
        assert got == {100, 99, 300, 500, 700, 900, 200, 128}


def test_region_degree_nearest_first_and_table():
    # footprint {-1, +2, +3}; degree 2 gives -1 and +2
    loads = [(100, 1), (99, 2), (102, 2), (103, 2)] + [(300 + 200 * i, 3) for i in range(4)]
    for got in held_after_keyed("region", loads + [(1000, 1)], degree=2, table=8):
        assert {999, 1002} <= got and 1003 not in got
    # table 1: key 3's triggers overwrite key 1's pattern
    for got in held_after_keyed("region", loads + [(1000, 1)], degree=2, table=1):
        assert not {999, 1002} & got


def test_region_miss_triggers_on_misses_only():
    # key 1's footprint {-1} is stored; line 2000 is loaded (a miss, key 5) and its window
    # closed by four other triggers; then key 1 loads 2000 again, a hit outside every window:
    # region takes it as key 1's trigger and brings 1999, region_miss does not
    far = [(1100 + 200 * i, 6) for i in range(4)]
    loads = _FOLLOWED[:-1] + [(2000, 5)] + far + [(2000, 1)]
    lines = {ln for ln, _ in loads}
    for got in held_after_keyed("region", loads, table=8):
        assert got == lines | {1999}
    for got in held_after_keyed("region_miss", loads, table=8):
        assert got == lines
    # a miss is a trigger for both: the first replay of the footprint
    for kind in ("region", "region_miss"):
        for got in held_after_keyed(kind, _FOLLOWED, degree=2, table=8):
            assert got == {100, 99, 300, 500, 700, 900, 200, 199}


def test_new_kinds_are_registered():
    assert {"adjacent_line", "up_down", "region", "region_miss",
            "ascending"} <= set(B.prefetcher_names())


@pytest.mark.parametrize("lines, want", [
    ([10], {10}),                  # a first load: nothing recent
    ([10, 10], {10, 11}),          # the line just loaded again (a stream's second load)
    ([10, 11], {10, 11, 12}),      # the line after one just loaded
    ([11, 10], {11, 10}),          # the line before: not ascending
    ([5, 40, 17, 90, 33], {5, 40, 17, 90, 33}),  # a random chase: never
])
def test_ascending_fires_on_ascending_access_to_recent_lines(lines, want):
    for got in held_after("ascending", lines):
        assert got == want


def test_ascending_table_and_degree():
    # table 1: 20 pushes 10 out of the ring, so 10 again is not recent; table 2 keeps it
    for got in held_after("ascending", [10, 20, 10], table=1):
        assert got == {10, 20}
    for got in held_after("ascending", [10, 20, 10], table=2):
        assert got == {10, 20, 11}
    for got in held_after("ascending", [10, 11], degree=3):
        assert got == {10, 11, 12, 13, 14}


def _l1_hits(eng) -> int:
    return sum(sum(row) for row in eng.finish()["level"][0]["hit"])


def test_ascending_gives_a_chase_past_capacity_no_hits():
    # the reference point: a random chase 1.5x an LRU level's capacity gets no hits without
    # a prefetcher (every set cycles through more lines than ways); next_line's prefetch
    # of line + 1 on every miss gives it hits, ascending none
    import numpy as np

    doc = {"name": "t", "cache": [{"name": "L1", "size": 64 * WAYS * LINE, "ways": WAYS,
                                   "line": LINE, "replacement": "lru"}]}
    order = np.random.default_rng(7).permutation(int(1.5 * 64 * WAYS))
    trace = records([("load", int(ln) * LINE, 8) for ln in np.tile(order, 3)])
    hits = {}
    for kind in (None, "next_line", "ascending"):
        d = dict(doc, prefetcher=[{"level": "L1", "kind": kind, "degree": 1, "table": 16}]
                 if kind else [])
        cfg = sim.parse_cpu(d).to_engine(timing=False)
        for eng in (B.Engine(cfg), ReferenceSim(cfg)):
            eng.run(trace)
            hits.setdefault(kind, set()).add(_l1_hits(eng))
    (none,), (nl,), (asc,) = hits[None], hits["next_line"], hits["ascending"]
    assert none == 0 and asc < 0.01 * len(trace) and nl > 10 * asc


@pytest.mark.parametrize("trains", [False, True])
def test_software_prefetch_trains_the_levels_below_when_asked(trains):
    # L1 without prefetchers above an L2 with a next-line prefetcher: a software prefetch
    # of line 40 misses both; with swprefetch.trains_prefetchers the L2 prefetcher sees the
    # request and brings line 41 into L2, without it nothing does
    doc = {"name": "t",
           "cache": [{"name": "L1", "size": 4 * LINE, "ways": 4, "line": LINE},
                     {"name": "L2", "size": WAYS * LINE, "ways": WAYS, "line": LINE}],
           "swprefetch": {"fill": "L1", "trains_prefetchers": trains},
           "prefetcher": [{"level": "L2", "kind": "next_line"}]}
    cfg = sim.parse_cpu(doc).to_engine(timing=False)
    for eng in (B.Engine(cfg), ReferenceSim(cfg)):
        eng.run(records([("prefetch", 40 * LINE, 8)]))
        held = {x for x in eng.peek_set(1, 0) if x is not None}
        assert held == ({40, 41} if trains else {40})


@pytest.mark.parametrize("trains", [False, True])
@pytest.mark.parametrize("kind, want", [("adjacent_line", {40, 41}), ("next_line", {40}),
                                        ("stream", {40})])
def test_adjacent_line_completes_a_software_prefetchs_fill(trains, kind, want):
    # Intel's spatial prefetcher completes every line fetched into L2 with its pair, a
    # software prefetch's too: an L2 adjacent-line prefetcher sees a software prefetch that
    # missed L1 and L2 without swprefetch.trains_prefetchers, the other kinds only with it
    doc = {"name": "t",
           "cache": [{"name": "L1", "size": 4 * LINE, "ways": 4, "line": LINE},
                     {"name": "L2", "size": WAYS * LINE, "ways": WAYS, "line": LINE}],
           "swprefetch": {"fill": "L1", "trains_prefetchers": trains},
           "prefetcher": [{"level": "L2", "kind": kind}]}
    cfg = sim.parse_cpu(doc).to_engine(timing=False)
    for eng in (B.Engine(cfg), ReferenceSim(cfg)):
        eng.run(records([("prefetch", 40 * LINE, 8)]))
        held = {x for x in eng.peek_set(1, 0) if x is not None}
        assert held == ({40, 41} if trains and kind == "next_line" else want)


def _stream_run(flags: dict, kind: str = "load", store_buffer: int | None = None):
    """A sequential stream of 8-byte accesses, one per line, over 256 cold lines (four 4 KiB
    regions) on an L1 of 2 miss buffers above an L2 of 32 with a stream prefetcher of degree
    8 and ``flags``, and memory 100 cycles away: (ticks, L2 prefetches issued, dropped) of
    each engine."""
    doc = {"name": "t", "freq_ghz": 1.0,
           "core": {"width": 4, "rob": 64, **({"store_buffer": store_buffer}
                                                if store_buffer else {})},
           "dram": {"latency_ns": 100.0},
           "cache": [{"name": "L1", "size": 64 * LINE, "ways": 4, "line": LINE, "latency": 2,
                      "mshrs": 2},
                     {"name": "L2", "size": 4096 * LINE, "ways": 16, "line": LINE,
                      "latency": 6, "mshrs": 32}],
           "prefetcher": [{"level": "L2", "kind": "stream", "degree": 8, "table": 4,
                           **flags}]}
    cfg = sim.parse_cpu(doc).to_engine(timing=True)
    out = []
    for eng in (B.Engine(cfg), ReferenceSim(cfg)):
        eng.run(records([(kind, ln * LINE, 8) for ln in range(256)]))
        raw = eng.finish()
        l2 = raw["level"][1]
        out.append((raw["ticks"], l2["pf_issued"][1], l2["pf_dropped"][1]))
    return out


def test_stream_prefetches_issue_when_the_l2_sees_the_request():
    # The L1's 2 miss buffers hold the stream back; each load's miss waits for one, and
    # the L2's buffers are taken by the loads queued behind them.  Issued at the load's
    # issue tick the L2 streamer's prefetches find every L2 buffer taken and are dropped;
    # issued when the miss reaches the L2 (`arrival`) they fill the L2's own buffers, and
    # the stream gets faster.  Trained by hits as by misses (`hits`, Intel's streamer
    # watching every L1 request) it issues on every line, not every ninth, and gets faster
    # still.
    old, arrival, both = (_stream_run(f) for f in ({}, {"arrival": True},
                                                  {"arrival": True, "hits": True}))
    assert old[0] == old[1] and arrival[0] == arrival[1] and both[0] == both[1]
    (t_old, iss_old, drop_old), (t_arr, iss_arr, drop_arr), (t_both, iss_both, _) = (
        old[0], arrival[0], both[0])
    assert drop_old > 10 * iss_old  # a few issue before the queue behind L1 builds up
    assert iss_arr > 5 * iss_old and drop_arr == 0
    assert t_arr < 0.5 * t_old
    assert iss_both > iss_arr and t_both < t_arr


@pytest.mark.parametrize("stores", [False, True])
def test_stores_train_the_l2_streamer_when_asked(stores):
    # A stream of stores with a store buffer: their reads for ownership miss L1 and L2;
    # with `stores` the L2 streamer sees them as it sees loads (Intel's streamer watches
    # the L1's requests for loads and stores alike) and its prefetches speed the stream up
    flags = {"arrival": True, **({"stores": True} if stores else {})}
    runs = _stream_run(flags, kind="store", store_buffer=4)
    assert runs[0] == runs[1]
    ticks, issued, _ = runs[0]
    base_ticks = _stream_run({"arrival": True}, kind="store", store_buffer=4)[0][0]
    if stores:
        assert issued > 0 and ticks < 0.8 * base_ticks
    else:
        assert issued == 0


@pytest.mark.parametrize("key", ["arrival", "stores", "hits"])
def test_prefetcher_flags_are_for_levels_below_l1(key):
    doc = {"name": "t", "cache": [{"name": "L1", "size": 4 * LINE, "ways": 4, "line": LINE}],
           "prefetcher": [{"level": "L1", "kind": "stream", key: True}]}
    with pytest.raises(sim.ConfigError, match=rf"prefetcher\[0\]\.{key}: only for a prefetcher "
                                              r"below L1"):
        sim.parse_cpu(doc)
