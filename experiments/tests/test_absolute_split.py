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
