"""The catalogue of workload pairs (kvsim.experiments.pairs) and the studies that read it.

The studies plan what they planned before the catalogue: ``data/pairs_before.json`` holds
each consumer's pair list and planned cell ids as the commit before the catalogue computed
them (:func:`snapshot`, run there), so cached and published results keep their cells. Every
pair is a real c_ref configuration (c_ref's own option table), no two entries are one pair,
every seed figure is a speedup, and a pair added as one entry reaches the study that uses it.
"""

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from kvsim.experiments import (
    ablation,
    cref,
    fidelity,
    scale,
    studies,
    validation,
    warmup_convergence,
)
from kvsim.experiments import pairs as catalogue
from kvsim.experiments.cells import cell_id

ROOT = Path(__file__).resolve().parents[2]
BEFORE = Path(__file__).with_name("data") / "pairs_before.json"
CPUS = ["epyc-7713", "xeon-8255c"]


def _fidelity_command_lines():
    """The fidelity study's pairs with each one's options as its command line (what the
    before-data recorded, from the study's first home c_ref/bench/fidelity.py)."""
    return {n: [w, a, b, cref.workload_args(opts), why]
            for n, (w, a, b, opts, why) in fidelity.WORKLOADS.items()}


def snapshot() -> dict:
    """What every consumer of the pairs plans: its pair table and, for the framework's
    studies, the ids of its planned cells at both scales."""
    out = {"ablation": {"PAIRS": ablation.PAIRS, "SCALES": ablation.SCALES},
           "fidelity": _fidelity_command_lines(), "warmup": warmup_convergence.WORKLOADS,
           "scale": scale.PAIRS}
    for s in ("small", "full"):
        out[f"validation_pairs_{s}"] = validation._pairs(s)
        out[f"validation_cells_{s}"] = [cell_id(c) for c in validation._cells(s, CPUS)]
        out[f"headline_rows_{s}"] = studies._headline_rows(s)
        out[f"headline_cells_{s}"] = [cell_id(c) for c in studies._headline_cells(s, CPUS)
                                      if c["kind"] in ("sim", "native")]  # not the server's
    return out


def _canonical(x) -> str:
    # lists keep their order (rows, cells, command lines); dicts compare by content
    return json.dumps(x, sort_keys=True)


@pytest.mark.parametrize("key", sorted(k for k in json.loads(BEFORE.read_text())
                                       if not k.startswith("_")))
def test_every_consumer_plans_what_it_planned_before(key):
    before = json.loads(BEFORE.read_text())[key]
    now = json.loads(json.dumps(snapshot()[key]))
    if isinstance(before, dict):
        assert sorted(now) == sorted(before), key
        for name in before:
            assert _canonical(now[name]) == _canonical(before[name]), f"{key}: {name}"
    assert _canonical(now) == _canonical(before), key


def _identity(p):
    return _canonical([p.workload, dict(p.common), dict(p.a), dict(p.b)])


def test_each_pair_is_defined_once():
    seen = {}
    for name, p in catalogue.PAIRS.items():
        assert _identity(p) not in seen, f"{name} is {seen.get(_identity(p))}"
        seen[_identity(p)] = name


@pytest.mark.parametrize("name", list(catalogue.PAIRS))
def test_every_pair_is_a_c_ref_configuration(name):
    spec = cref.workload_options()
    opts = {o["name"]: o for o in spec["options"]}
    p = catalogue.PAIRS[name]
    assert p.workload in spec["workloads"]
    for side in ("a", "b"):
        o = p.options(side)
        assert o.get("variant", spec["variants"][p.workload][0]) in spec["variants"][p.workload]
        for k, v in o.items():
            flag = k.replace("_", "-")
            assert flag in opts and p.workload in opts[flag]["workloads"], (name, k)
            if opts[flag].get("choices"):
                assert v in opts[flag]["choices"], (name, k, v)
            if opts[flag]["type"] == "int":
                assert opts[flag]["min"] <= v <= opts[flag]["max"], (name, k, v)
    assert p.side("a") != p.side("b")
    assert not set(p.common) & (set(p.a) | set(p.b)), name
    assert p.seed


@pytest.mark.parametrize("name", [n for n, p in catalogue.PAIRS.items() if p.seed_speedup])
def test_seed_speedups_come_from_the_seeds(name):
    s = catalogue.PAIRS[name].seed_speedup()
    assert isinstance(s, float) and 0.5 < s < 10, (name, s)


def test_every_headline_row_has_its_seed():
    for s in ("small", "full"):
        assert all(r["seed"] is not None for r in studies._headline_rows(s))


def test_the_validation_seed_column_is_the_catalogues(monkeypatch):
    """Each validation row's ``seed`` is its catalogue pair's upstream speedup: the rows
    the catalogue gives a figure for have it, the others none, and a changed figure in the
    catalogue is the column's."""
    rows = [p["row"] for p in validation._pairs("small")]
    assert rows == [p["row"] for p in validation._pairs("full")]
    frame = validation._speedup_frame([{"row": r, "set": "tuning"} for r in rows])
    assert list(frame["row"]) == rows
    got = dict(zip(frame["row"], frame["seed"], strict=True))
    assert got["KEYS none -> valkey"] == catalogue.get("keys-nochecksum-valkey").seed_speedup()
    assert got["GET d10 naive -> lookahead 16"] == catalogue.get("get-d10-b16").seed_speedup()
    assert got["load 8 B none -> prefetch-after-key"] == catalogue.get("load-8").seed_speedup()
    assert math.isnan(got["GET d1 naive -> lookahead 16"])  # upstream gave no figure for it
    assert sum(not math.isnan(v) for v in got.values()) >= 4
    toy = catalogue.get("get-d1-b16")
    monkeypatch.setitem(catalogue.PAIRS, "get-d1-b16",
                        catalogue.Pair(toy.workload, toy.common, toy.a, toy.b, toy.seed,
                                       lambda: 1.5))
    assert validation.seed_of("GET d1 naive -> lookahead 16") == 1.5


def test_options_put_sizes_first_and_the_side_last():
    p = catalogue.get("unified")
    assert p.options("b", keys=7, ops=3) == {"keys": 7, "ops": 3, "depth": 1,
                                             "value_size": 32, "key_size": 16,
                                             "layout": "unified"}
    with pytest.raises(ValueError, match="'a' or 'b'"):
        p.side("c")


def test_unknown_and_taken_names_are_one_line_errors():
    with pytest.raises(KeyError, match="unknown pair 'nope' .*keys"):
        catalogue.get("nope")
    with pytest.raises(ValueError, match="'keys' is already in the catalogue"):
        catalogue.register("keys", catalogue.get("keys"))


_TOY = """
from kvsim.experiments import pairs
pairs.register("toy", pairs.Pair("mget", {"keys_per_command": 8}, {"variant": "none"},
                                 {"variant": "batch"}, "a toy seed",
                                 uses={"ablation": {"keys": {"small": 1000, "full": 2000},
                                                    "trace_ops": 10, "native_ops": 20,
                                                    "warmup_ops": None, "role": "tuning"}}))
from kvsim.experiments import ablation
import json
print(json.dumps({"pair": ablation.PAIRS["toy"], "order": list(ablation.PAIRS),
                  "small": ablation.SCALES["small"]["toy"],
                  "options": ablation._options("toy", 1000, 10, None, "batch")}))
"""


def test_adding_a_pair_is_one_entry():
    """One entry in the catalogue, and the ablation runs it: its table, sizes, options."""
    r = subprocess.run([sys.executable, "-c", _TOY], capture_output=True, text=True,
                       check=True)
    got = json.loads(r.stdout)
    assert got["pair"] == {"workload": "mget", "base": "none", "variant": "batch",
                           "options": {"keys_per_command": 8}, "trace_ops": 10,
                           "native_ops": 20, "warmup_ops": None, "role": "tuning",
                           "seed": "a toy seed"}
    assert got["order"][-1] == "toy" and got["order"][:-1] == list(ablation.PAIRS)
    assert got["small"] == 1000
    assert got["options"] == {"keys": 1000, "keys_per_command": 8, "variant": "batch",
                              "ops": 10}
    # the pair by name is all the other studies need of it
    toy = catalogue.Pair("mget", {"keys_per_command": 8}, {"variant": "none"},
                         {"variant": "batch"}, "a toy seed")
    assert cref.workload_args(toy.options("b", keys=1000)) == [
        "--keys", "1000", "--keys-per-command", "8", "--variant", "batch"]


if __name__ == "__main__":  # writes the snapshot (run at the commit before a change)
    print(json.dumps(snapshot(), indent=1, sort_keys=True))
