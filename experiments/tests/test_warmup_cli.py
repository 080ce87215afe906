"""`kvsim trace ... --warmup-ops N` and `kvsim simulate --warmup`: the warm-up records are
simulated but not counted, the measured ones are those of the run without warm-up, and bad
values give one line."""

import json

import pytest

from .conftest import SMALL
from .test_cli import assert_one_line_error


def _sim(kvsim, path, *extra):
    res = kvsim("simulate", path, "--cpu", "graviton3", "--json", *extra)
    assert res.returncode == 0, res.stderr.decode()
    return json.loads(res.stdout)


def test_warmup_prefix_keeps_the_counted_records(kvsim, tmp_path):
    cold, warm = tmp_path / "cold.kvt", tmp_path / "warm.kvt"
    nosetup = ("--warm-setup", "none")  # the --warmup-ops prefix alone
    kvsim("trace", "pipeline", "-o", cold, "--variant", "naive", *SMALL, *nosetup, check=True)
    kvsim("trace", "pipeline", "-o", warm, "--variant", "naive", *SMALL, "--warmup-ops", "500",
          *nosetup, check=True)
    info = json.loads(kvsim("trace-info", warm, "--json", check=True).stdout)
    assert info["header"]["warmup"] == "prefix"
    assert info["header"]["workload"]["warmup_ops"] == 500
    assert info["markers"]["warmup_begin"] == 1 and info["markers"]["warmup_end"] == 1
    a, b = _sim(kvsim, cold, "--functional"), _sim(kvsim, warm, "--functional")
    # the same measured records, less the first touches (sys.page_fault markers) the
    # warm-up's operations took first
    faults = json.loads(kvsim("trace-info", cold, "--json", check=True).stdout)["markers"]
    assert 0 <= a["records"] - b["records"] <= faults.get("syscall", 0)
    assert b["instructions"] == a["instructions"]
    assert a["warmup_records"] == 0 and b["warmup_records"] > 0
    # the warm-up warmed something: fewer L1D misses in the same measured records
    assert b["levels"][0]["misses"] < a["levels"][0]["misses"]


def test_simulate_warmup_rule(kvsim, small_trace):
    total = json.loads(kvsim("trace-info", small_trace, "--json", check=True).stdout)["records"]
    base = _sim(kvsim, small_trace, "--functional")
    n = _sim(kvsim, small_trace, "--functional", "--warmup", "1000")
    assert n["records"] == base["records"] - 1000
    f = _sim(kvsim, small_trace, "--functional", "--warmup", "0.5")
    assert f["records"] == base["records"] - int(0.5 * total)
    assert _sim(kvsim, small_trace, "--functional", "--warmup", "0") == base


@pytest.mark.parametrize("value", ["-3", "1.5", "abc"])
def test_simulate_warmup_bad_values(kvsim, small_trace, value):
    assert_one_line_error(kvsim("simulate", small_trace, "--cpu", "graviton3", "--warmup", value),
                          "--warmup")


def test_simulate_warmup_refuses_a_prefixed_trace(kvsim, tmp_path):
    warm = tmp_path / "warm.kvt"
    kvsim("trace", "mget", "-o", warm, *SMALL, "--warmup-ops", "10", check=True)
    assert_one_line_error(kvsim("simulate", warm, "--cpu", "graviton3", "--warmup", "10"),
                          "own warm-up")


def test_warmup_ops_only_where_it_applies(kvsim, tmp_path):
    res = kvsim("trace", "iterate", "-o", tmp_path / "x.kvt", "--keys", "100",
                "--warmup-ops", "5")
    assert_one_line_error(res, "--warmup-ops")
    assert not (tmp_path / "x.kvt").exists()
