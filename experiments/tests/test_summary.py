"""experiments.summary: demand misses kept apart from prefetch and victim traffic, checked
against the simulator's own per-kind and per-tag counters on every preset."""

import json

import pytest

from kvsim import sim, traces
from kvsim.experiments import summary

from .conftest import run_kvsim

PRESETS = [n for n in sim.preset_names() if n != "local"]


@pytest.fixture(scope="module")
def results(small_trace):
    recs = traces.read_all(small_trace)
    with traces.open(small_trace) as tr:
        tags = list(tr.header.get("tags") or [])
    return {cpu: sim.simulate(recs, cpu, tag_names=tags) for cpu in PRESETS}


@pytest.mark.parametrize("cpu", PRESETS)
def test_roles_are_stable_and_names_kept(results, cpu):
    res = results[cpu]
    cfg = sim.load_cpu(cpu)
    assert [lv["name"] for lv in res["levels"]] == [c.name for c in cfg.caches]
    roles = [lv["role"] for lv in res["levels"]]
    assert roles[0] == "L1" and roles[-1] == "LLC"
    assert roles[1:-1] == [f"L{i + 2}" for i in range(len(roles) - 2)]
    assert {r["role"] for r in res["by_tag"]} <= set(roles)
    df = sim.stats_dataframe(res)
    assert set(df["role"]) <= set(roles)


@pytest.mark.parametrize("cpu", PRESETS)
def test_demand_misses_exclude_prefetch_and_victims(results, cpu):
    res = results[cpu]
    for row, lv in zip(summary.level_rows(res), res["levels"], strict=True):
        assert row["demand_misses"] == lv["demand_misses"]
        bk = lv["by_kind"]
        assert row["swpf_misses"] == bk["swpf"]["misses"]
        assert row["victim_in"] == bk["victim"]["accesses"]
        others = sum(v["misses"] for k, v in bk.items() if k not in summary.DEMAND_KINDS)
        assert row["demand_misses"] + others == lv["misses"]
    # the lookahead trace prefetches, so L1 sees software-prefetch misses
    assert summary.level_rows(res)[0]["swpf_misses"] > 0


@pytest.mark.parametrize("cpu", PRESETS)
def test_by_tag_adds_up_to_level_demand_misses(results, cpu):
    res = results[cpu]
    by_tag = summary.demand_misses_by_tag(res)
    for i, lv in enumerate(res["levels"]):
        assert sum(c[i] for c in by_tag.values()) == lv["demand_misses"]
    assert all(not name.startswith("tag") for name in by_tag), by_tag.keys()
    top = summary.top_structures(res, 3)
    keys = [(-c[-1], -c[0]) for _, c in top]
    assert keys == sorted(keys)
    rest = [c for t, c in by_tag.items() if t not in dict(top)]
    assert all(c[-1] <= top[-1][1][-1] for c in rest)


def test_top_stalls_are_the_largest(results):
    res = results[PRESETS[0]]
    st = summary.top_stalls(res, 2)
    vals = sorted(res["timing"]["stall_cycles"].values(), reverse=True)
    assert [v for _, v in st] == vals[:2]


def test_simulate_text_shows_demand_misses(small_trace):
    cpu = PRESETS[0]
    js = json.loads(run_kvsim("simulate", small_trace, "--cpu", cpu, "--json",
                              check=True).stdout)
    text = run_kvsim("simulate", small_trace, "--cpu", cpu, check=True).stdout.decode()
    assert f"IPC {js['ipc']:.2f}" in text
    assert f"MLP {js['timing']['mlp']:.2f}" in text
    for lv in js["levels"]:
        line = next(ln for ln in text.splitlines() if ln.startswith(lv["name"] + " "))
        fields = line.split()
        assert fields[1] == lv["role"]
        assert int(fields[2]) == lv["demand_accesses"]
        assert int(fields[3]) == lv["demand_misses"]
        assert int(fields[-2]) == lv["misses"]
    name, _ = summary.top_structures(js, 1)[0]
    assert f"\n  {name} " in text
    assert summary.top_stalls(js, 1)[0][0] in text


def test_simulate_help_explains_every_kind():
    text = run_kvsim("simulate", "--help", check=True).stdout.decode()
    for kind in ("demand", "swpf", "hwpf", "writeback", "victim", "role", "MLP"):
        assert kind in text, kind
