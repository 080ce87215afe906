"""Contracts of the kvsim CLI: options, JSON keys, determinism, pipes and bad input."""

import json
import os
import subprocess
import sys

import pytest

from .conftest import ROOT, SMALL, run_kvsim

SUBCOMMANDS = ["trace", "native", "simulate", "trace-info", "convert", "cpus", "experiment",
               "compare"]


def assert_one_line_error(res, *needles):
    assert res.returncode != 0
    err = res.stderr.decode()
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("kvsim: error: "), err
    assert "Traceback" not in err
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])


@pytest.mark.parametrize("sub", [None, *SUBCOMMANDS])
def test_help(sub):
    res = run_kvsim(*([sub] if sub else []), "--help")
    assert res.returncode == 0, res.stderr.decode()
    assert b"Usage:" in res.stdout


def test_trace_is_deterministic(tmp_path):
    a, b = tmp_path / "a.kvt", tmp_path / "b.kvt"
    for path in (a, b):
        res = run_kvsim("trace", "pipeline", "-o", path, "--variant", "naive", *SMALL)
        assert res.returncode == 0, res.stderr.decode()
    assert a.read_bytes() == b.read_bytes()
    c = tmp_path / "c.kvt"
    run_kvsim("trace", "pipeline", "-o", c, "--variant", "naive", *SMALL[:-1], "8", check=True)
    assert c.read_bytes() != a.read_bytes(), "the seed must matter"


def test_trace_codecs_and_versions_are_the_formats():
    from kvsim import traces
    from kvsim.experiments import cli

    assert sorted(cli.TRACE_CODECS) == sorted(traces.format.CODEC_NAMES.values())
    assert cli.TRACE_CODECS[0] == traces.DEFAULT_CODEC
    assert cli.TRACE_VERSIONS == list(range(traces.MIN_VERSION, traces.VERSION + 1))


def test_trace_codec_and_format_version(tmp_path):
    from kvsim import traces

    got = {}
    for name, args in {"planes": [], "zstd1": ["--codec", "zstd", "--format-version", "1"],
                       "raw": ["--codec", "raw"]}.items():
        path = tmp_path / f"{name}.kvt"
        run_kvsim("trace", "pipeline", "-o", path, "--variant", "naive", *SMALL, *args,
                  check=True)
        with traces.open(path) as tr:
            got[name] = (tr.read_all(), tr.version, set(tr.codecs))
    assert got["planes"][1:] == (traces.VERSION, {"zstd_planes"})
    assert got["zstd1"][1:] == (1, {"zstd"})
    assert got["raw"][1:] == (traces.VERSION, {"raw"})
    assert got["planes"][0].tobytes() == got["zstd1"][0].tobytes() == got["raw"][0].tobytes()
    res = run_kvsim("trace", "pipeline", "-o", tmp_path / "x.kvt", "--format-version", "1",
                    *SMALL)
    assert_one_line_error(res, "needs format version 2")
    assert not (tmp_path / "x.kvt").exists()


def test_trace_info_json(kvsim, small_trace):
    res = kvsim("trace-info", small_trace, "--json")
    assert res.returncode == 0, res.stderr.decode()
    info = json.loads(res.stdout)
    assert info["records"] > 0
    assert info["header"]["workload"]["variant"] == "lookahead"
    assert info["header"]["workload"]["seed"] == 7
    assert sum(info["by_kind"].values()) == info["records"]
    assert info["by_kind"].get("prefetch", 0) > 0


def test_pipe_trace_into_simulate():
    kv = f"{sys.executable} -m kvsim.experiments.cli"
    cmd = (f"{kv} trace pipeline {' '.join(SMALL)} --variant lookahead -o - "
           f"| {kv} simulate - --cpu graviton3 --json")
    res = subprocess.run(["bash", "-o", "pipefail", "-c", cmd], capture_output=True, cwd=ROOT,
                         timeout=600)
    assert res.returncode == 0, res.stderr.decode()
    out = json.loads(res.stdout)
    for key in ("records", "instructions", "cycles", "levels"):
        assert key in out
    assert out["records"] > 0 and out["cycles"] > 0
    first = out["levels"][0]
    for key in ("name", "accesses", "hits", "misses", "writebacks"):
        assert key in first
    assert first["hits"] + first["misses"] == first["accesses"]


def test_simulate_matches_between_file_and_pipe(kvsim, small_trace):
    a = json.loads(kvsim("simulate", small_trace, "--cpu", "local", "--json").stdout)
    b = json.loads(kvsim("simulate", "-", "--cpu", "local", "--json",
                         input=small_trace.read_bytes()).stdout)
    assert a == b


LRU_CPU = """name = "lru3"
freq_ghz = 3.0
[core]
width = 4
rob = 128
[[cache]]
name = "L1D"
size = "32KiB"
ways = 8
line = 64
latency = 5
mshrs = 8
[[cache]]
name = "L2"
size = "256KiB"
ways = 16
line = 64
latency = 14
mshrs = 16
[[cache]]
name = "L3"
size = "2MiB"
ways = 16
line = 64
latency = 40
[dram]
latency_ns = 90
"""


@pytest.mark.parametrize("functional", [[], ["--functional"]])
def test_simulate_threads_give_the_same_json(kvsim, small_trace, tmp_path, functional):
    cpu = tmp_path / "lru3.toml"
    cpu.write_text(LRU_CPU)
    runs = [json.loads(kvsim("simulate", small_trace, "--cpu", cpu, "--json", *functional,
                             "--threads", str(t)).stdout) for t in (1, 2, 3)]
    assert [r.pop("engine_threads") for r in runs] == [1, 2, 3]
    assert runs[0]["levels"][0]["accesses"] > 0
    assert runs[0] == runs[1] == runs[2]


def test_simulate_bad_threads(kvsim, small_trace):
    res = kvsim("simulate", small_trace, "--cpu", "local", "--threads", "0")
    assert res.returncode != 0 and b"Traceback" not in res.stderr
    assert b"--threads" in res.stderr


def test_cpus(kvsim):
    res = kvsim("cpus", "--json")
    assert res.returncode == 0, res.stderr.decode()
    names = [p["name"] for p in json.loads(res.stdout)]
    assert "local" in names and len(names) >= 3


def test_unknown_cpu(kvsim, small_trace):
    assert_one_line_error(kvsim("simulate", small_trace, "--cpu", "no-such-cpu"), "no-such-cpu")


def test_invalid_cpu_file(kvsim, small_trace, tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('name = "bad"\n[[cache]]\nname = "L1D"\nsize = "32KiB"\nways = 0\nline = 64\n')
    assert_one_line_error(kvsim("simulate", small_trace, "--cpu", bad), "ways")


def test_missing_trace(kvsim, tmp_path):
    assert_one_line_error(kvsim("trace-info", tmp_path / "nope.kvt"), "nope.kvt")


@pytest.mark.parametrize("damage", ["flip", "truncate"])
@pytest.mark.parametrize("cmd", [["trace-info"], ["simulate", "--cpu", "graviton3"]])
def test_damaged_trace(kvsim, small_trace, tmp_path, damage, cmd):
    data = bytearray(small_trace.read_bytes())
    if damage == "flip":
        data[len(data) // 2] ^= 0xFF
    else:
        data = data[: len(data) * 2 // 3]
    bad = tmp_path / "bad.kvt"
    bad.write_bytes(bytes(data))
    res = kvsim(cmd[0], bad, *cmd[1:])
    assert_one_line_error(res, "bad.kvt")


@pytest.mark.parametrize("args, needle", [
    (["--keys", "zero"], "--keys"),
    (["--batch", "500"], "--batch"),
    (["--variant", "no-such-variant"], "no-such-variant"),
])
def test_bad_trace_options_leave_no_file(kvsim, tmp_path, args, needle):
    out = tmp_path / "out.kvt"
    res = kvsim("trace", "pipeline", "-o", out, "--keys", "100", "--ops", "10", *args)
    assert_one_line_error(res, needle)
    assert not out.exists()
    assert list(tmp_path.iterdir()) == []


def test_native_json(kvsim):
    res = kvsim("native", "pipeline", "--keys", "5000", "--ops", "2000", "--repeat", "2",
                "--json")
    assert res.returncode == 0, res.stderr.decode()
    out = json.loads(res.stdout)
    for key in ("runs_s", "median_s", "ops_per_s", "memory_bytes", "keys"):
        assert key in out
    assert len(out["runs_s"]) == 2 and out["keys"] == 5000


@pytest.mark.parametrize("preset, expect", [(None, "1"), ("3", "3")])
def test_blas_threads_default_to_one(preset, expect):
    """The command keeps numpy's OpenBLAS to one thread unless the user chose a count."""
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    if preset is not None:
        env["OPENBLAS_NUM_THREADS"] = preset
    code = ("import os; from kvsim.experiments import cli; cli.main(['--version']); "
            "print(os.environ.get('OPENBLAS_NUM_THREADS'))")
    res = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         check=True)
    assert res.stdout.decode().split()[-1] == expect
