"""cref.trace_many (c_ref's ``trace --then``): the traces of one setup, each from a child
process that goes on from the one setup, are the same bytes as each traced alone, for every
workload and variant family the issue-45 studies share setups across; and the refusals."""

from pathlib import Path

import pytest

from kvsim.experiments import cref

MK = {"keys": 3000, "value_size": 100, "keys_per_command": 10, "ops": 300, "seed": 1}
HASH = {"keys": 1, "hash_fields": 4000, "value_size": 70, "ops": 400, "table": "hashtable",
        "pipeline": "lookahead", "batch": 16, "pipeline_depth": 16, "seed": 1}
ZSET = {"keys": 200, "zset_members": 200, "ops": 300, "table": "hashtable",
        "pipeline": "lookahead", "batch": 16, "pipeline_depth": 16, "seed": 1}
PMGET = {"keys": 5000, "value_size": 10, "keys_per_command": 100, "ops": 40, "table": "dict",
         "pipeline_depth": 10, "seed": 1}

CASES = {
    "mget hashtable": ("mget", dict(MK, table="hashtable"), [
        {"variant": "none"}, {"variant": "batch", "batch": 16},
        {"variant": "window-3389", "batch": 4}]),
    "mget dict": ("mget", dict(MK, table="dict"), [
        {"variant": "none"}, {"variant": "chunk-15133", "chunk": 16}]),
    "mset random": ("mset", dict(MK, table="dict", mset_keys="random", prefill=1.0), [
        {"variant": "none"}, {"variant": "chunk-15133", "chunk": 16},
        {"variant": "redis-15043"}]),
    "exists": ("exists", dict(MK, table="hashtable"), [
        {"variant": "none"}, {"variant": "window-3389", "batch": 64}]),
    "del": ("del", dict(MK, table="hashtable"), [
        {"variant": "none"}, {"variant": "batch", "batch": 16}]),
    "touch": ("touch", dict(MK, table="hashtable"), [
        {"variant": "window-3389", "batch": 8}, {"variant": "none"}]),
    "hget": ("hash", dict(HASH, hash_op="hget"), [
        {"variant": "none"}, {"variant": "nested-3940"}, {"variant": "value-2180"}]),
    "hmget": ("hash", dict(HASH, hash_op="hmget", fields_per_command=10), [
        {"variant": "none"}, {"variant": "nested-3940"}, {"variant": "find-batch-4017"}]),
    "hgetall": ("hash", {"keys": 50, "hash_fields": 100, "value_size": 100, "ops": 200,
                         "hash_op": "hgetall", "table": "dict", "pipeline_depth": 10,
                         "seed": 1}, [{"variant": "none"}, {"variant": "getall-14988"}]),
    "zmscore": ("zmscore", dict(ZSET, fields_per_command=10), [
        {"variant": "none"}, {"variant": "nested-3940"}, {"variant": "find-batch-4017"}]),
    "pipelined mget": ("mget", PMGET, [
        {"pipeline": "naive", "variant": "none"},
        {"pipeline": "naive", "variant": "redis-14899"},
        {"pipeline": "lookahead", "batch": 16, "variant": "redis-14899-guard"},
        {"pipeline": "all-pending-14754", "batch": 16, "variant": "none"}]),
}


@pytest.mark.parametrize("case", list(CASES))
def test_traces_of_one_setup_are_the_traces_alone(case: str, tmp_path: Path) -> None:
    workload, base, variants = CASES[case]
    outs = [(tmp_path / f"many-{i}.kvt", dict(base, **v)) for i, v in enumerate(variants)]
    cref.trace_many(workload, outs)
    for i, (path, opts) in enumerate(outs):
        alone = tmp_path / f"alone-{i}.kvt"
        cref.trace(workload, alone, opts)
        assert path.read_bytes() == alone.read_bytes(), (case, variants[i])
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [f"many-{i}.kvt" for i in range(len(outs))] + [f"alone-{i}.kvt" for i in range(len(outs))])


def test_setup_key_ignores_only_the_variant_options() -> None:
    a = {"keys": 10, "ops": 5, "variant": "none", "pipeline": "naive"}
    b = {"keys": 10, "ops": 5, "variant": "batch", "batch": 16, "pipeline": "lookahead",
         "chunk": 16}
    assert cref.setup_key("mget", a) == cref.setup_key("mget", b)
    assert cref.setup_key("mget", a) != cref.setup_key("mget", dict(a, ops=6))
    assert cref.setup_key("mget", a) != cref.setup_key("exists", a)


def test_options_beyond_the_variants_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="differ only in"):
        cref.trace_many("mget", [(tmp_path / "a.kvt", dict(MK, table="dict")),
                                 (tmp_path / "b.kvt", dict(MK, table="dict", ops=301))])
    assert not list(tmp_path.iterdir())


def test_a_failing_variant_leaves_no_file(tmp_path: Path) -> None:
    # --batch with a variant that reads none: c_ref refuses it in the parent, before any child
    outs = [(tmp_path / "a.kvt", dict(MK, table="hashtable", variant="none")),
            (tmp_path / "b.kvt", dict(MK, table="hashtable", variant="none", batch=16))]
    with pytest.raises(cref.CrefError, match="--batch 16: not used"):
        cref.trace_many("mget", outs)
    assert not list(tmp_path.iterdir())


def test_the_cli_refuses_a_setup_option_after_then(tmp_path: Path) -> None:
    import subprocess

    proc = subprocess.run([str(cref.binary()), "trace", "mget", "-o", str(tmp_path / "a"),
                           "--keys", "100", "--then", str(tmp_path / "b"), "--keys", "200"],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 2 and not list(tmp_path.iterdir())
    assert proc.stderr.strip().splitlines() == [
        "kvsim-cref: --then 1: only --variant, --batch, --chunk and --pipeline may differ, "
        "not '--keys'"]


def _small_multikey_setup(cpus: list[str]) -> list[list[dict]]:
    """The sim cell groups (one per trace) of multikey_window's first setup, small scale,
    with fewer keys so the test stays quick."""
    from kvsim.experiments import cells, runner

    specs = runner.plan(["multikey_window"], "small", cpus, ["sim"])["multikey_window"]
    for s in specs:
        s["options"] = dict(s["options"], keys=2000, ops=min(s["options"]["ops"], 200))
    key = cref.setup_key(specs[0]["workload"], specs[0]["options"])
    groups: dict[str, list[dict]] = {}
    for s in specs:
        if cref.setup_key(s["workload"], s["options"]) == key:
            groups.setdefault(cells.trace_key(s), []).append(s)
    return list(groups.values())


def test_a_setup_group_is_one_c_ref_run_and_equals_its_cells(tmp_path: Path, monkeypatch
                                                             ) -> None:
    """cells.run_setup_group: the traces of one setup in one c_ref run, their shared warm-up
    prefix simulated once and each trace continued from a copy of the engines' state; every
    cell's metrics (every field) what the cell computes alone, its trace simulated whole."""
    from kvsim.experiments import cells, runner

    groups = _small_multikey_setup(runner.default_cpus())
    assert len(groups) >= 3  # none, batch 16 and the window offsets
    calls = []
    real = cref.trace_many
    monkeypatch.setattr(cref, "trace_many", lambda w, outs, **k: calls.append(len(outs))
                        or real(w, outs, **k))
    continued = []
    real_continued = cells._simulate_continued
    monkeypatch.setattr(cells, "_simulate_continued", lambda *a: continued.append(
        real_continued(*a)) or continued[-1])
    together = cells.run_setup_group(groups, str(tmp_path / "shared"))
    assert calls == [len(groups)]
    # the warm-up prefix simulated once, each trace continued from a copy of the engines
    assert len(continued) == 1 and continued[0] is not None
    for group, res in zip(groups, together, strict=True):
        alone = [cells.run_cell(s)["metrics"] for s in group]
        assert [r["metrics"] for r in res] == alone
    # a second call finds every trace in place: no c_ref run
    cells.run_setup_group(groups, str(tmp_path / "shared"))
    assert calls == [len(groups), 0]
    other = dict(groups[0][0], options=dict(groups[0][0]["options"], ops=7))
    with pytest.raises(ValueError, match="one setup"):
        cells.run_setup_group([groups[0], [other]])


def test_setup_tasks_split_until_every_worker_has_one() -> None:
    from kvsim.experiments import runner

    def group(variant: str, keys: int = 10) -> list[tuple[str, str, dict]]:
        spec = {"workload": "mget", "options": {"keys": keys, "variant": variant}}
        return [("e", variant + str(keys), spec)]

    gs = [group(v) for v in ("a", "b", "c", "d", "e")] + [group("a", keys=20)]
    tasks = runner._setup_tasks(gs, 1)
    assert [len(t) for t in tasks] == [5, 1]  # one task per setup, in plan order
    tasks = runner._setup_tasks(gs, 4)
    assert len(tasks) == 4 and sorted(len(t) for t in tasks) == [1, 1, 2, 2]
    assert [g for t in tasks for g in t] == gs  # halves in place: the plan's order kept
    assert len(runner._setup_tasks(gs[:1], 8)) == 1  # a single trace is not split


@pytest.mark.parametrize("case", ["hget", "pipelined mget", "mset random", "hgetall",
                                  "zmscore", "del"])
def test_a_continued_simulation_equals_the_whole_one(case: str, tmp_path: Path) -> None:
    """cells._simulate_continued: each trace of one setup continued from a copy of the
    engines after the shared warm-up prefix gives every metric the whole trace gives."""
    from kvsim.experiments import cells, runner

    workload, base, variants = CASES[case]
    outs = [(tmp_path / f"{i}.kvt", dict(base, **v)) for i, v in enumerate(variants)]
    cref.trace_many(workload, outs)
    cpus = runner.default_cpus()
    continued = cells._simulate_continued([p for p, _ in outs], cpus)
    assert continued is not None
    for (path, _), got in zip(outs, continued, strict=True):
        got.pop("_seconds")
        assert got == cells._simulate_many(path, cpus), (case, path.name)
