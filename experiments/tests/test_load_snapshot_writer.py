"""``kvsim-cref ... load --cluster --snapshot-from standalone|cluster``: which server wrote
the snapshot that a cluster-mode server loads. Valkey PR #2311's script saved the file from a
standalone server (keys in its one table's order, so in random slots) and loaded it with
``--cluster-enabled yes``; a cluster-mode writer saves slot by slot, so consecutive keys
fill one small slot table and the load's table accesses stay in cache."""

from __future__ import annotations

from kvsim import sim, traces
from kvsim.experiments import cref

CPU = {"name": "l1-l2", "cache": [
    {"name": "L1", "size": "32KiB", "ways": 8, "line": 64},
    {"name": "L2", "size": "256KiB", "ways": 8, "line": 64},
]}


def _measured_misses(tmp_path, writer: str, keys: int = 60_000) -> tuple[int, int]:
    out = tmp_path / f"{writer}.kvt"
    cref.trace("load", out, {"keys": keys, "value_size": 8, "cluster": True,
                             "snapshot_from": writer, "seed": 1})
    res = sim.simulate(str(out), sim.parse_cpu(CPU), functional=True)
    measured = [p for p in res["phases"] if p["phase"] == 1]
    assert measured, "the load's measured phase is marked"
    l2 = measured[0]["levels"][1]
    return l2["accesses"], l2["misses"]


def test_a_standalone_snapshot_scatters_a_cluster_load_over_the_slot_tables(tmp_path):
    _, standalone = _measured_misses(tmp_path, "standalone")
    _, clustered = _measured_misses(tmp_path, "cluster")
    # slot order keeps each slot table's buckets hot; random slots miss on most inserts
    assert standalone > 1.5 * clustered, (standalone, clustered)


def test_the_writer_is_the_default_and_only_matters_in_cluster_mode(tmp_path):
    spec = {o["name"]: o for o in cref.workload_options()["options"]}
    assert spec["snapshot-from"]["default"] == "standalone"
    assert spec["snapshot-from"]["workloads"] == ["load"]
    paths = []
    for writer in ("standalone", "cluster"):
        paths.append(tmp_path / f"{writer}-off.kvt")
        cref.trace("load", paths[-1], {"keys": 5000, "value_size": 8, "seed": 1,
                                       "snapshot_from": writer})
    a, b = (traces.read_all(p) for p in paths)
    assert len(a) > 5000 and (a == b).all()  # the same records; the headers name the writer
    with traces.open(paths[1]) as tr:
        assert tr.header["workload"]["snapshot_from"] == "cluster"
