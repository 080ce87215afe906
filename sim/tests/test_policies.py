"""Replacement-policy unit tests (DynamoRIO style): addresses that alias one set, and the
expected contents of the set, way by way, after each access. Both engines are checked."""

from __future__ import annotations

import pytest
from sim_helpers import records

from kvsim import sim
from kvsim.sim import _binding as B
from kvsim.sim.reference import ReferenceSim, xorshift64s

SETS, LINE = 4, 64


def engines(policy: str, ways: int = 4, seed: int = 1, extra: list | None = None):
    caches = [{"name": "L1", "size": SETS * ways * LINE, "ways": ways, "line": LINE,
               "replacement": policy, "seed": seed}] + (extra or [])
    cfg = sim.parse_cpu({"name": "t", "cache": caches}).to_engine(timing=False)
    return [B.Engine(cfg), ReferenceSim(cfg)]


def addr(i: int) -> int:
    """Line i of the aliasing sequence: every one maps to set 1."""
    return (i * SETS + 1) * LINE


def line(i: int) -> int:
    return i * SETS + 1


def run_script(policy, script, ways=4, seed=1):
    """script: list of (access label, expected set contents as labels, None = empty)."""
    names = {}
    for eng in engines(policy, ways, seed):
        for step, (label, want) in enumerate(script):
            i = names.setdefault(label, len(names))
            eng.run(records([("load", addr(i), 8)]))
            got = eng.peek_set(0, 1)
            exp = [None if x is None else line(names[x]) for x in want]
            assert got == exp, f"{type(eng).__name__} step {step} ({label}): {got} != {exp}"


def test_lru():
    run_script("lru", [
        ("A", ["A", None, None, None]),
        ("B", ["A", "B", None, None]),
        ("C", ["A", "B", "C", None]),
        ("D", ["A", "B", "C", "D"]),
        ("A", ["A", "B", "C", "D"]),  # hit: A becomes most recent
        ("E", ["A", "E", "C", "D"]),  # victim B (least recent)
        ("F", ["A", "E", "F", "D"]),  # victim C
        ("D", ["A", "E", "F", "D"]),
        ("G", ["G", "E", "F", "D"]),  # victim A
    ])


def test_plru():
    run_script("plru", [
        ("A", ["A", None, None, None]),
        ("B", ["A", "B", None, None]),
        ("C", ["A", "B", "C", None]),
        ("D", ["A", "B", "C", "D"]),  # tree now points at w0
        ("A", ["A", "B", "C", "D"]),  # root -> right half, node2 -> w2
        ("E", ["A", "B", "E", "D"]),  # victim w2 (C), not the true-LRU B
        ("F", ["A", "F", "E", "D"]),  # root -> left, node1 -> w1
        ("G", ["A", "F", "E", "G"]),
    ])


def test_srrip():
    run_script("srrip", [
        ("A", ["A", None, None, None]),  # RRPV 2
        ("B", ["A", "B", None, None]),
        ("C", ["A", "B", "C", None]),
        ("D", ["A", "B", "C", "D"]),
        ("A", ["A", "B", "C", "D"]),  # hit: A -> 0
        ("E", ["A", "E", "C", "D"]),  # age all: A1 B3 C3 D3 -> victim B; E=2
        ("F", ["A", "E", "F", "D"]),  # C is at 3
        ("G", ["A", "E", "F", "G"]),  # D is at 3
        ("H", ["A", "H", "F", "G"]),  # age: A2 E3 F3 G3 -> victim E
    ])


def test_qlru_h00_m1_r0_u1():
    # ages (way 0..3) after each access; start 3 3 3 3 (nanoBench's QLRUSim)
    run_script("qlru", [
        ("A", ["A", None, None, None]),  # fill at 1: 1 3 3 3
        ("B", ["A", "B", None, None]),  # 1 1 3 3
        ("C", ["A", "B", "C", None]),  # 1 1 1 3
        ("D", ["A", "B", "C", "D"]),  # 1 1 1 1, the others aged to 3: 3 3 3 1
        ("A", ["A", "B", "C", "D"]),  # hit: 0 3 3 1
        ("E", ["A", "E", "C", "D"]),  # lowest way at 3 (B): 0 1 3 1
        ("F", ["A", "E", "F", "D"]),  # C: 0 1 1 1, the others aged by 2: 2 3 1 3
        ("G", ["A", "G", "F", "D"]),  # E, filled two accesses ago (LRU: D): 2 1 1 3
        ("H", ["A", "G", "F", "H"]),  # D: 2 1 1 1, the others aged by 1: 3 2 2 1
        ("I", ["I", "G", "F", "H"]),  # A
    ])


def test_qlru_keeps_part_of_a_cyclic_set_lru_loses():
    """Five lines in turn through a 4-way set: LRU misses every access, QLRU keeps some."""
    for policy, some in (("lru", False), ("qlru", True)):
        for eng in engines(policy):
            rec = records([("load", addr(i % 5), 8) for i in range(200)])
            eng.run(rec)
            r = eng.finish()
            hits = sum(map(sum, r["level"][0]["hit"]))
            assert (hits > 40) is some, (policy, type(eng).__name__, hits)


def test_brrip_inserts_distant():
    run_script("brrip", [
        ("A", ["A", None, None, None]),  # fill 0 of the cache: RRPV 2 (1 in 32)
        ("B", ["A", "B", None, None]),  # RRPV 3
        ("C", ["A", "B", "C", None]),
        ("D", ["A", "B", "C", "D"]),
        ("A", ["A", "B", "C", "D"]),
        ("E", ["A", "E", "C", "D"]),  # B at 3 -> victim; E inserted at 3
        ("F", ["A", "F", "C", "D"]),  # the new line E is the first victim again
        ("G", ["A", "G", "C", "D"]),
    ])


def test_random_follows_seeded_xorshift():
    seed, ways = 12345, 4
    expected_victims = []
    state = seed
    for _ in range(20):
        state, out = xorshift64s(state)
        expected_victims.append(out % ways)
    assert len(set(expected_victims)) == ways  # every way is reachable
    for eng in engines("random", ways, seed):
        for i in range(ways):
            eng.run(records([("load", addr(i), 8)]))
        contents = eng.peek_set(0, 1)
        for k, v in enumerate(expected_victims):
            new = line(ways + k)
            eng.run(records([("load", addr(ways + k), 8)]))
            contents[v] = new
            assert eng.peek_set(0, 1) == contents, (type(eng).__name__, k)


def test_random_different_seeds_differ():
    outs = []
    for seed in (1, 2):
        eng = engines("random", 4, seed)[0]
        for i in range(40):
            eng.run(records([("load", addr(i), 8)]))
        outs.append(eng.peek_set(0, 1))
    assert outs[0] != outs[1]


def _two_level(incl: str):
    caches = [
        {"name": "L1", "size": 2 * LINE, "ways": 2, "line": LINE},
        {"name": "L2", "size": 2 * LINE, "ways": 2, "line": LINE, "inclusion": incl},
    ]
    cfg = sim.parse_cpu({"name": "t", "cache": caches}).to_engine(timing=False)
    return [B.Engine(cfg), ReferenceSim(cfg)]


@pytest.mark.parametrize("which", [0, 1])
def test_inclusive_back_invalidates(which):
    eng = _two_level("inclusive")[which]
    A, Bb, Cc = 0, LINE, 2 * LINE
    # L1 refreshes A; L2 does not see it
    eng.run(records([("load", A, 8), ("load", Bb, 8), ("load", A, 8)]))
    eng.run(records([("load", Cc, 8)]))  # L1 evicts B; L2 evicts A (its LRU) -> A leaves L1 too
    assert sorted(x for x in eng.peek_set(0, 0) if x is not None) == [2]
    assert sorted(eng.peek_set(1, 0)) == [1, 2]
    raw = eng.finish()
    assert raw["level"][1]["back_invalidations"] == 1


@pytest.mark.parametrize("which", [0, 1])
def test_exclusive_victim_cache(which):
    eng = _two_level("exclusive")[which]
    A, Bb, Cc = 0, LINE, 2 * LINE
    eng.run(records([("load", A, 8), ("load", Bb, 8)]))
    assert eng.peek_set(1, 0) == [None, None]  # fills bypass the victim cache
    eng.run(records([("load", Cc, 8)]))  # L1 evicts A (clean) into L2
    assert eng.peek_set(1, 0) == [0, None]
    eng.run(records([("load", A, 8)]))  # L2 hit: A moves up, L1 evicts B into L2
    assert sorted(x for x in eng.peek_set(0, 0)) == [0, 2]
    assert eng.peek_set(1, 0) == [1, None]  # A left way 0 before B was inserted
    raw = eng.finish()
    assert sum(map(sum, raw["level"][1]["hit"])) == 1
    assert raw["dram_reads"] == 3
