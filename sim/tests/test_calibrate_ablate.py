"""`python -m kvsim.sim.calibrate_ablate`: a calibration's variants on its own samples."""

from __future__ import annotations

import pytest

from kvsim.sim import calibrate_ablate as ab
from kvsim.sim.config import ConfigError

DOC = {"name": "local", "freq_ghz": 2.0, "meta": {"raw": {}}, "selfcheck": {},
       "cache": [{"name": "L1D", "size": 4096, "ways": 4, "line": 64, "latency": 4},
                 {"name": "L2", "size": 65536, "ways": 8, "line": 64, "latency": 12}],
       "tlb": {"page_size": "4KiB"}}


def test_variant_changes_what_it_names_and_nothing_else():
    d = ab.variant(DOC, "placement=random, seed=7, L2=128KiB:16:qlru, L2.inclusion=inclusive")
    assert "meta" not in d and "selfcheck" not in d
    assert d["tlb"] == {"page_size": "4KiB", "placement": "random", "placement_seed": 7}
    assert d["cache"][1] == {"name": "L2", "size": 131072, "ways": 16, "line": 64,
                             "latency": 12, "replacement": "qlru", "inclusion": "inclusive"}
    assert d["cache"][0] == DOC["cache"][0]
    assert ab.variant(DOC, "")["cache"] == DOC["cache"]
    assert "placement" not in DOC["tlb"]  # the file itself is not changed


def test_unknown_variant_key_is_one_line():
    with pytest.raises(ConfigError, match="^calibrate_ablate: variant 'L9=1KiB:1:lru': unknown"):
        ab.variant(DOC, "L9=1KiB:1:lru")


def test_points_carry_the_self_checks_tolerance():
    raw = {"sizes": [65536], "repeats": 2, "huge_fraction_top": 1.0,
           "chase_ns": {"65536": [4.0, 4.1, 5.0, 5.2]}, "chase_4k_ns": {"16777216": [90.0]}}
    pts, tol = ab.points_of({"meta": {"raw": raw}})
    assert pts == [(65536, 2 << 20, 4.0), (16777216, 4096, 90.0)]
    assert tol == [pytest.approx(0.25), pytest.approx(0.10)]  # 5.0 / 4.0 - 1, capped


def test_bad_file_exits_1_with_one_line(tmp_path, capsys):
    bad = tmp_path / "x.toml"
    bad.write_text("name = ")
    assert ab.main([str(bad), "", "--out", str(tmp_path / "o.json")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("calibrate_ablate: error: ")
    assert not (tmp_path / "o.json").exists()


def test_variant_drops_adds_prefetchers_and_sets_tlb_keys():
    doc = {**DOC, "prefetcher": [{"level": "L2", "kind": "adjacent_line", "degree": 1},
                                 {"level": "L2", "kind": "stream", "degree": 2}]}
    d = ab.variant(doc, "drop=L2:adjacent_line, add=L1D:ascending, tlb.walk_retention_ns=8e6")
    assert [(p["level"], p["kind"]) for p in d["prefetcher"]] == [("L2", "stream"),
                                                                 ("L1D", "ascending")]
    assert d["tlb"]["walk_retention_ns"] == 8e6
    assert len(doc["prefetcher"]) == 2  # the file itself is not changed
    with pytest.raises(ConfigError, match="^calibrate_ablate: variant 'drop=L1D:stream': "
                                          "the file has no 'stream' prefetcher at 'L1D'$"):
        ab.variant(doc, "drop=L1D:stream")


def test_round_median_takes_each_rounds_fastest():
    """``round-median``: the median over the rounds of each round's fastest sample (a
    placement drawn afresh each round), not the fastest of all; the tolerance is the same."""
    raw = {"sizes": [65536], "repeats": 2, "huge_fraction_top": 1.0,
           "chase_ns": {"65536": [4.0, 4.1, 5.0, 5.2, 6.0, 5.5]}}
    pts, tol = ab.points_of({"meta": {"raw": raw}}, "round-median")
    assert pts == [(65536, 2 << 20, 5.0)]
    assert tol == ab.points_of({"meta": {"raw": raw}})[1]


def test_variant_sets_the_last_levels_page_table_lines_and_refuses_a_bad_value():
    d = ab.variant(DOC, "tlb.walk_last_level=false, tlb.walkers=6")
    assert d["tlb"]["walk_last_level"] is False and d["tlb"]["walkers"] == 6
    assert ab.variant(DOC, "tlb.walk_last_level=True")["tlb"]["walk_last_level"] is True
    with pytest.raises(ConfigError, match="^calibrate_ablate: variant 'tlb.walk_last_level=no'"
                                          ": tlb.walk_last_level='no' is not a value"):
        ab.variant(DOC, "tlb.walk_last_level=no")


def test_parallel_rows_replay_the_files_parallel_chases():
    """``--parallel``: each chain count the file measured, simulated on the variant as the
    self-check replays it (calibrate_check.replay's prediction of the same point)."""
    from kvsim.sim import calibrate_check as check
    from kvsim.sim.config import parse_cpu

    doc = {"name": "local", "freq_ghz": 2.0,
           "core": {"width": 4, "rob": 64},
           "cache": [{"name": "L1D", "size": 4096, "ways": 4, "line": 64, "latency": 4,
                      "mshrs": 4},
                     {"name": "L2", "size": 65536, "ways": 8, "line": 64, "latency": 12}],
           "dram": {"latency_ns": 80.0},
           "meta": {"raw": {"sizes": [65536, 1 << 20], "huge_fraction_top": 0.0,
                            "mlp_ns_per_load": {"1": [90.0, 88.0], "4": [30.0]}}}}
    rows = ab.parallel_rows(ab.variant(doc, ""), doc, [1, 4])
    assert [r["point"] for r in rows] == ["mlp 1MiB x1", "mlp 1MiB x4"]
    assert [r["measured_ns"] for r in rows] == [88.0, 30.0]
    plain = {k: v for k, v in ab.variant(doc, "").items() if k != "_fixed"}
    replay = {r["point"]: r for r in check.replay(
        parse_cpu(plain, "t"),
        {"sizes": [1 << 20], "chase": {"1048576": [50.0]}, "mlp": {"1": [88.0], "4": [30.0]},
         "huge_fraction_top": 0.0}, steps=check.REPLAY_STEPS)}
    for r in rows:
        assert r["predicted_ns"] == pytest.approx(replay[r["point"]]["predicted_ns"], rel=1e-3)
    with pytest.raises(ConfigError, match="--parallel 8: the file measured no"):
        ab.parallel_rows(ab.variant(doc, ""), doc, [8])


def test_variant_sets_walk_reads_miss_buffers_and_the_dram_channel():
    d = ab.variant(dict(DOC, dram={"latency_ns": 100.0}),
                   "tlb.walk_reads=1, L1D.mshrs=24, dram.bandwidth_gbs=6.9")
    assert d["tlb"]["walk_reads"] == 1 and d["cache"][0]["mshrs"] == 24
    assert d["dram"]["bandwidth_gbs"] == 6.9 and "mshrs" not in d["cache"][1]
    with pytest.raises(ConfigError, match="^calibrate_ablate: variant 'dram.bandwidth_gbs=x'"):
        ab.variant(dict(DOC, dram={}), "dram.bandwidth_gbs=x")
    with pytest.raises(ConfigError, match="unknown key 'L1D.mshrs'"):
        ab.variant(DOC, "L1D.mshrs=many")
