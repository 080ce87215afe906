"""python -m kvsim.experiments.keys_keysize: the key's second line and the reply's faults
move with the key size as the layout says, and bad input is one line."""

from __future__ import annotations

import json

import pytest

from kvsim.experiments import keys_keysize


def test_the_key_size_moves_the_split_line_and_the_faults(tmp_path, capsys):
    out = tmp_path / "k.json"
    assert keys_keysize.main(["--cpu", "epyc-7713", "--keys", "3000", "--key-sizes", "6,16",
                              "--settings", "base,no_hw_prefetch", "--no-native",
                              "--out", str(out)]) == 0
    doc = json.loads(out.read_text())
    got = {(r["key_size"], r["side"]): r["predicted"] for r in doc["rows"]}
    assert set(got) == {(6, "none"), (6, "valkey"), (16, "none"), (16, "valkey")}
    assert "native" not in doc["rows"][0] and doc["rounds"] is None
    for k in (6, 16):
        b = got[(k, "valkey")]["base"]
        # the page faults' cycles are part of the time, and only they are taken out
        assert 0 < b["ns_per_key_less_faults"] < b["ns_per_key"]
        assert b["faults_per_key"] > 0
    # a 16-byte key after the object's header runs onto the next line for some objects,
    # a 6-byte one never; a longer key is a longer reply, more fresh pages per key
    assert got[(6, "valkey")]["base"]["key_l1_misses_per_key"] == 0
    assert got[(16, "valkey")]["base"]["key_l1_misses_per_key"] > 0.1
    assert got[(16, "none")]["base"]["faults_per_key"] > got[(6, "none")]["base"][
        "faults_per_key"]
    assert "| 16 | valkey |" in capsys.readouterr().out


@pytest.mark.parametrize("argv, what", [
    (["--cpu", "nope"], "unknown CPU"),
    (["--cpu", "epyc-7713", "--settings", "rob_x3"], "rob_x3"),
    (["--cpu", "epyc-7713", "--key-sizes", "0"], "--key-sizes"),
    (["--cpu", "epyc-7713", "--rounds", "1"], "--rounds"),
])
def test_bad_input_is_one_line(argv, what, tmp_path, capsys):
    out = tmp_path / "k.json"
    assert keys_keysize.main([*argv, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and what in err[0]
    assert not out.exists()
