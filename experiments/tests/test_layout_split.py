"""experiments/layout_split.py: the GET legacy -> unified row split by size and page size."""

from __future__ import annotations

import json

import numpy as np
import pytest

from kvsim import traces
from kvsim.experiments import layout_split

SITES = ["none", "ht.find.bucket", "obj.key", "obj.legacy_entry", "obj.value_ptr", "obj.value"]


def _records(rows):
    """A record array from (kind, site, dep) rows; markers are COMMAND markers."""
    r = np.zeros(len(rows), dtype=traces.RECORD_DTYPE)
    for i, (kind, site, dep) in enumerate(rows):
        r["kind"][i] = kind
        if kind == traces.KIND_MARKER:
            r["flags"][i] = traces.MARK_COMMAND
        else:
            r["site"][i], r["dep"][i] = SITES.index(site), dep
            r["addr"][i], r["size"][i] = 64 * i, 8
    return r


L, M = traces.KIND_LOAD, traces.KIND_MARKER


def test_value_pointer_waits_for_the_key_comparison():
    r = _records([(M, "none", 0),
                  (L, "ht.find.bucket", 0),    # 1 bucket
                  (L, "obj.legacy_entry", 1),  # 2 the entry (its key pointer), from 1
                  (L, "obj.key", 1),           # 3 the key, from 2
                  (L, "obj.legacy_entry", 3),  # 4 the value pointer, from the bucket (1)
                  (L, "obj.value_ptr", 1),     # 5 the value object, from 4
                  (L, "obj.value", 1),         # 6 its bytes, from 5
                  (M, "none", 0),
                  (L, "ht.find.bucket", 0),    # 8 a command with no key comparison
                  (L, "obj.value_ptr", 1)])    # 9 from 8: left alone
    before = r.copy()
    assert layout_split.value_after_key(r, SITES) == 1
    assert r["dep"][4] == 1  # now from the key (3)
    changed = np.flatnonzero(r["dep"] != before["dep"])
    assert changed.tolist() == [4]
    # the chain now runs bucket -> entry -> key -> value pointer -> object -> bytes
    assert traces.chain_depths(r)[6] == traces.chain_depths(before)[6] + 2


def test_a_pointer_whose_producer_follows_the_key_is_left_alone():
    r = _records([(M, "none", 0), (L, "ht.find.bucket", 0), (L, "obj.key", 1),
                  (L, "obj.value_ptr", 1)])  # from the key already
    assert layout_split.value_after_key(r, SITES) == 0


def test_legacy_touches_more_allocations_and_pages_per_get(tmp_path):
    from kvsim.experiments import cref

    counts = {}
    for side, layout in (("a", "legacy"), ("b", "unified")):
        t = tmp_path / f"{layout}.kvt"
        opts = {"warm_setup": "compact", **layout_split._options(3000, 300)[side],
                "warmup_ops": 300}
        cref.trace("pipeline", t, opts)
        counts[layout] = layout_split.trace_counts(t)
    leg, uni = counts["legacy"], counts["unified"]
    assert leg["gets"] == uni["gets"] == 300
    # legacy: bucket, entry, key and value object in three size classes' slabs; unified: the
    # bucket and the object beside its value
    assert leg["keyspace_pages_4k_per_get"] > uni["keyspace_pages_4k_per_get"]
    assert leg["keyspace_lines_per_get"] > uni["keyspace_lines_per_get"]
    assert leg["keyspace_max_chain_depth_mean"] > uni["keyspace_max_chain_depth_mean"]


def test_native_points_pair_each_round(tmp_path, capsys):
    out = tmp_path / "n.json"
    assert layout_split.main(["native", "--keys", "500", "--thp-keys", "", "--rounds", "2",
                              "--out", str(out)]) == 0
    doc = json.loads(out.read_text())
    (p,) = doc["points"]
    assert p["keys"] == 500 and not p["thp"]
    assert len(p["speedup"]["ratios"]) == 2 == len(p["legacy_ns_per_get"]["runs"])
    ratios = [a / b for a, b in zip(p["legacy_ns_per_get"]["runs"],
                                    p["unified_ns_per_get"]["runs"], strict=True)]
    assert p["speedup"]["ratios"] == pytest.approx(ratios)
    assert "# wrote" in capsys.readouterr().out


@pytest.mark.parametrize("argv, what", [
    (["native", "--keys", "x"], "--keys"),
    (["native", "--rounds", "0"], "--rounds"),
    (["predict", "--cpu", "no-such-cpu"], "no-such-cpu"),
    (["predict", "--cpu", "epyc-7713", "--settings", "rob_x3"], "rob_x3"),
    (["predict", "--cpu", "epyc-7713", "--native", "/nonexistent.json"], "--native"),
    (["callgrind", "--keys", "0"], "--keys")])
def test_bad_input_is_one_line_and_no_file(argv, what, tmp_path, capsys):
    out = tmp_path / "o.json"
    assert layout_split.main([*argv, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and what in err[0]
    assert not out.exists()
