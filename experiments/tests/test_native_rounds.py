"""A native pair's rounds: the fixed-width stopping rule, the first round's reply check and
the load pair's shared snapshot, on real kvsim-cref runs at a tiny size."""

import json
import os

import pytest

from kvsim.experiments import cells, cref, framework, studies, timing


def _pair(workload, a, b, rounds, **kw):
    return framework.native_cell("t", workload, a, b, rounds, {}, **kw)


def test_wide_halfwidth_stops_at_the_minimum_and_a_zero_one_runs_every_round():
    a = {"keys": 3000, "ops": 300, "value_size": 32, "seed": 1, "variant": "naive"}
    b = dict(a, variant="lookahead")
    loose = cells.run_cell(_pair("pipeline", a, b, 9, halfwidth=1e9, min_rounds=6))["metrics"]
    tight = cells.run_cell(_pair("pipeline", a, b, 7, halfwidth=0.0, min_rounds=6))["metrics"]
    fixed = cells.run_cell(_pair("pipeline", a, b, 6))["metrics"]
    assert (loose["rounds"], tight["rounds"], fixed["rounds"]) == (6, 7, 6)
    for m in (loose, tight, fixed):
        assert len(json.loads(m["round_ratios"])) == m["rounds"]


def test_reply_check_runs_in_the_first_round_and_both_sides_agree():
    opts = {"keys": 2000, "ops": 200, "value_size": 32, "keys_per_command": 10, "seed": 1,
            "table": "dict", "mset_keys": "random", "variant": "none"}
    m = cells.run_cell(_pair("mset", opts, dict(opts, variant="redis-15043"), 6))["metrics"]
    assert isinstance(m["a_reply_crc32"], int)
    assert m["a_reply_crc32"] == m["b_reply_crc32"]
    # a later round's run skips the pass: its crc is null
    later = cref.native("mset", opts, env={"KVSIM_CREF_REPLY_CHECK": "0"})
    assert later["reply_crc32"] is None


def test_load_pair_builds_its_snapshot_once(tmp_path, monkeypatch):
    a = {"keys": 3000, "value_size": 64, "seed": 1, "variant": "none"}
    b = dict(a, variant="prefetch-after-key")
    seen = []
    real = cref.native

    def spy(workload, options, repeat=3, waiting=None, env=None, **kw):
        path = (env or {}).get("KVSIM_CREF_SNAPSHOT_CACHE")
        seen.append((path, path is not None and os.path.exists(path)))
        return real(workload, options, repeat=repeat, waiting=waiting, env=env, **kw)

    monkeypatch.setattr(cref, "native", spy)
    monkeypatch.setattr(cells, "IN_PROCESS_ROUNDS", 3)  # two processes (the sides alternate)
    m = cells.run_cell(_pair("load", a, b, 6, env=cref.ARENA_WARM))["metrics"]
    assert m["rounds"] == 6 and len(seen) == 2
    assert len({p for p, _ in seen}) == 1          # one file for both sides
    assert [exists for _, exists in seen].count(False) == 1  # built by the first process only
    assert m["a_keys"] == m["b_keys"] == 3000
    assert m["a_reply_crc32"] == m["b_reply_crc32"]
    assert not os.path.exists(seen[0][0])  # removed with the cell


@pytest.mark.parametrize("effect", [0.03, 0.1, 0.3])
def test_full_scale_plan_stops_early_only_for_small_effects(effect):
    plan = studies._plan("full", effect)
    assert plan["rounds"] == timing.rounds_for_effect(effect)
    if plan["rounds"] > studies.FULL_MIN_ROUNDS:
        assert plan["halfwidth"] == effect and plan["min_rounds"] == studies.FULL_MIN_ROUNDS
    else:
        assert "halfwidth" not in plan
    assert studies._plan("small", effect) == {"rounds": studies.SMALL_ROUNDS}


def test_rounds_alternate_the_order_of_the_sides(monkeypatch):
    seen = []
    real = cref.native

    def spy(workload, options, repeat=3, waiting=None, env=None, **kw):
        assert not kw  # a pair of layouts runs one process per run
        seen.append(options["layout"])
        return real(workload, options, repeat=repeat, waiting=waiting, env=env)

    monkeypatch.setattr(cref, "native", spy)
    a = {"keys": 2000, "ops": 300, "value_size": 32, "seed": 1, "layout": "legacy"}
    cells.run_cell(_pair("pipeline", a, dict(a, layout="unified"), 6))
    rounds = [tuple(seen[i:i + 2]) for i in range(0, len(seen), 2)]
    assert len(rounds) == 7  # the warm-up round and six timed ones
    assert rounds == [("legacy", "unified") if r % 2 == 0 else ("unified", "legacy")
                      for r in range(7)]


def test_iterate_pair_alternates_in_process():
    a = {"keys": 3000, "op": "save", "value_size": 32, "seed": 1, "rdbchecksum": "no",
         "variant": "none"}
    spec = _pair("iterate", a, dict(a, variant="valkey"), 6)
    assert spec["rounds_per_process"] == cells.IN_PROCESS_ROUNDS
    m = cells.run_cell(spec)["metrics"]
    assert m["rounds"] == 6
    # a prefetch changes no byte of the snapshot: both sides' CRCs equal a process's alone
    alone = cref.native("iterate", dict(a, variant="valkey"), repeat=1)
    assert m["a_reply_crc32"] == m["b_reply_crc32"] == alone["reply_crc32"]


def test_mset_new_pair_alternates_in_process_on_warm_memory():
    a = {"keys": 3000, "keys_per_command": 10, "value_size": 32, "seed": 1, "table": "dict",
         "variant": "none"}
    spec = _pair("mset", a, dict(a, variant="redis-15043"), 6,
                 env=cref.ARENA_WARM)
    assert spec["rounds_per_process"] == cells.IN_PROCESS_ROUNDS
    m = cells.run_cell(spec)["metrics"]
    assert m["rounds"] == 6 and m["a_keys"] == m["b_keys"] == 3000
    # each side's CRC reads back its own fill: equal to a process filling alone
    alone = cref.native("mset", dict(a, variant="redis-15043"), repeat=1)
    assert m["a_reply_crc32"] == m["b_reply_crc32"] == alone["reply_crc32"]


@pytest.mark.parametrize("workload,a,b,versus", [
    ("pipeline", {"variant": "naive"}, {"variant": "lookahead", "batch": 8},
     {"variant": "lookahead", "batch": 8}),
    ("mget", {"variant": "none"}, {"variant": "none", "pipeline": "lookahead"},
     {"variant": "none", "pipeline": "lookahead"}),
    ("mset", {"mset_keys": "random", "variant": "none"},
     {"mset_keys": "random", "variant": "redis-15043"}, {"variant": "redis-15043"}),
    ("mset", {"variant": "none"}, {"variant": "batch"}, {"variant": "batch"}),
    ("load", {"variant": "none"}, {"variant": "prefetch-rehash"},
     {"variant": "prefetch-rehash"}),
    ("load", {"variant": "none", "keys": 10}, {"variant": "none", "keys": 20}, None),
    ("iterate", {"op": "save", "variant": "none"}, {"op": "save", "variant": "valkey"},
     {"variant": "valkey"}),
    ("iterate", {"op": "keys", "variant": "none"}, {"op": "save", "variant": "none"}, None),
    ("iterate", {"variant": "none"}, {"variant": "valkey", "batch": 8}, None),
    ("pipeline", {"variant": "naive", "layout": "legacy"}, {"variant": "lookahead"}, None),
    ("pipeline", {"variant": "naive", "batch": 8}, {"variant": "lookahead"}, None),
])
def test_which_pairs_alternate_in_one_process(workload, a, b, versus):
    assert cells.versus_options(workload, a, b) == versus
    spec = _pair(workload, a, b, 6)
    assert ("rounds_per_process" in spec) == (versus is not None)


def test_in_process_rounds_continue_the_alternation_across_processes(monkeypatch):
    calls = []
    real = cref.native

    def spy(workload, options, repeat=3, waiting=None, env=None, versus=None,
            versus_first="a"):
        calls.append((repeat, versus_first, env["KVSIM_CREF_REPLY_CHECK"], dict(versus)))
        return real(workload, options, repeat=repeat, waiting=waiting, env=env, versus=versus,
                    versus_first=versus_first)

    monkeypatch.setattr(cref, "native", spy)
    monkeypatch.setattr(cells, "IN_PROCESS_ROUNDS", 2)
    a = {"keys": 2000, "ops": 100, "keys_per_command": 10, "value_size": 32, "seed": 1,
         "table": "dict", "variant": "none"}
    m = cells.run_cell(_pair("mget", a, dict(a, variant="chunk-15133"), 5))["metrics"]
    # one warm-up round per process, then up to two timed ones; the order of the sides
    # goes on alternating from one process to the next (3 rounds run: the next is B A)
    assert calls == [(3, "a", "1", {"variant": "chunk-15133"}),
                     (3, "b", "0", {"variant": "chunk-15133"}),
                     (2, "a", "0", {"variant": "chunk-15133"})]
    assert m["rounds"] == 5 and len(json.loads(m["b_cpu_runs_s"])) == 5
    assert isinstance(m["a_reply_crc32"], int) and m["a_reply_crc32"] == m["b_reply_crc32"]
    assert m["a_keys"] == m["b_keys"] == 2000


def test_in_process_pair_stops_at_min_rounds_once_narrow_enough():
    a = {"keys": 3000, "ops": 300, "value_size": 32, "seed": 1, "variant": "naive"}
    b = dict(a, variant="lookahead")
    loose = cells.run_cell(_pair("pipeline", a, b, 20, halfwidth=1e9, min_rounds=6))["metrics"]
    assert loose["rounds"] == 6
