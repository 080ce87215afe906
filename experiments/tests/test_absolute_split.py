"""experiments/absolute_split.py: the rows' baselines natively and predicted at given sizes."""

from __future__ import annotations

import json

from kvsim.experiments import absolute_split


def test_points_are_written_with_their_ratio(tmp_path, capsys):
    out = tmp_path / "split.json"
    assert absolute_split.main(["--cpu", "epyc-7713", "--keys", "300", "--repeat", "1",
                                "--out", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert "provenance" in doc and doc["cpu"] == "epyc-7713"
    assert [r["row"] for r in doc["rows"]] == list(absolute_split.ROWS)
    for r in doc["rows"]:
        assert r["keys"] == 300 and r["native_ns_per_op_min"] > 0
        assert r["ratio_to_min"] == r["predicted_ns_per_op"] / r["native_ns_per_op_min"]
        assert r["instructions_per_op"] > 0
    assert "# wrote" in capsys.readouterr().out


def test_bad_input_is_one_line_and_no_file(tmp_path, capsys):
    out = tmp_path / "split.json"
    assert absolute_split.main(["--cpu", "no-such-cpu", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no-such-cpu" in err[0]
    assert not out.exists()
    assert absolute_split.main(["--cpu", "epyc-7713", "--keys", "x", "--out", str(out)]) == 2
    assert not out.exists()


def test_keys_counts_per_key_and_rows_pick(tmp_path):
    out = tmp_path / "split.json"
    assert absolute_split.main(["--cpu", "epyc-7713", "--keys", "300,600", "--repeat", "1",
                                "--rows", "KEYS none", "--out", str(out)]) == 0
    rows = json.loads(out.read_text())["rows"]
    assert [(r["row"], r["keys"]) for r in rows] == [("KEYS none", 300), ("KEYS none", 600)]
    for r in rows:  # one KEYS command: time per key, not per command
        assert r["native_ns_per_op_min"] < 2_000 and r["predicted_ns_per_op"] < 2_000
        assert len(r["load_average_1m"]) == 2
    assert absolute_split.main(["--cpu", "epyc-7713", "--rows", "NOPE", "--out",
                                str(out)]) == 2


def test_llc_scale_changes_the_last_level_only(tmp_path):
    from kvsim import sim

    base = sim.load_cpu("epyc-7713").caches[-1].size
    out = tmp_path / "split.json"
    assert absolute_split.main(["--cpu", "epyc-7713", "--keys", "300", "--repeat", "1",
                                "--rows", "KEYS none", "--llc-scale", "0.25", "--out",
                                str(out)]) == 0
    doc = json.loads(out.read_text())
    assert doc["llc_scale"] == 0.25 and doc["llc_bytes"] <= base // 4
    assert absolute_split.main(["--cpu", "epyc-7713", "--llc-scale", "0", "--out",
                                str(out) + "x"]) == 2
