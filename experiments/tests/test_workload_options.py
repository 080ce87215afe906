"""The workload options have one definition, c_ref's table (c_ref/workload.c): kvsim-cref
parses it, exports it (``kvsim-cref options --json``, ``ksWorkloadOptionsJson`` in
libkvsim_cref.so), and ``kvsim trace`` / ``kvsim native`` are built from that export."""

from __future__ import annotations

import ctypes as C
import io
import json
import re
import subprocess

import click
import pytest
from click.testing import CliRunner

from kvsim import artifacts, traces
from kvsim.experiments import cli, cref

from .conftest import run_kvsim


@pytest.fixture(scope="module")
def spec() -> dict:
    return cref.workload_options()


def test_library_and_binary_export_the_same_table(spec):
    lib = C.CDLL(str(artifacts.path(artifacts.CREF_LIB)))
    lib.ksWorkloadOptionsJson.restype = C.c_size_t
    lib.ksWorkloadOptionsJson.argtypes = [C.c_char_p, C.c_size_t]
    n = lib.ksWorkloadOptionsJson(None, 0)
    buf = C.create_string_buffer(n + 1)
    assert lib.ksWorkloadOptionsJson(buf, n + 1) == n
    assert json.loads(buf.value) == spec
    small = C.create_string_buffer(b"\xff" * 16)
    assert lib.ksWorkloadOptionsJson(small, 10) == n  # snprintf semantics: truncated, NUL
    assert small.raw[:10] == buf.raw[:9] + b"\0"


def test_table_is_well_formed(spec):
    assert set(spec["workloads"]) >= {"load", "iterate", "pipeline", "mset", "mget"}
    names = [o["name"] for o in spec["options"]]
    assert len(set(names)) == len(names) and "keys" in names and "variant" in names
    for o in spec["options"]:
        assert o["help"] and set(o["workloads"]) <= set(spec["workloads"]), o["name"]
        if o["type"] in ("int", "float"):
            assert o["min"] <= o["default"] <= o["max"], o["name"]
        if o["type"] == "choice":
            assert o["default"] in o["choices"], o["name"]


@pytest.mark.parametrize("sub", ["trace", "native"])
def test_help_shows_every_option_with_its_help_and_default(spec, sub):
    res = run_kvsim(sub, "--help")
    assert res.returncode == 0, res.stderr.decode()
    text = " ".join(res.stdout.decode().split())  # undo click's wrapping
    for w in spec["workloads"]:
        assert w in text
    for o in spec["options"]:
        assert f"--{o['name']}" in text
        assert " ".join(o["help"].split()) in text, o["name"]
        if o["default"] is not None and o["type"] != "flag":
            assert re.search(rf"--{o['name']} .*?\[default: {re.escape(str(o['default']))}[;\]]",
                             text), o["name"]


def test_declared_defaults_are_the_ones_kvsim_cref_applies(spec):
    """With no option but --keys, the trace header's workload spec holds c_ref's defaults."""
    out = subprocess.run([str(cref.binary()), "trace", "iterate", "-o", "-", "--keys", "20"],
                         capture_output=True, check=True, timeout=120).stdout
    with traces.open(io.BytesIO(out)) as tr:
        wl = tr.header["workload"]
    for o in spec["options"]:
        key = o["name"].replace("-", "_")
        if o["name"] == "keys":
            continue
        want = False if o["type"] == "flag" else o["default"]
        if want is None:  # chosen by the workload: --variant
            assert wl[key] == "none"
            continue
        if o["name"] in HEADER_WHEN_GIVEN:  # absent by default: earlier traces stay identical
            assert key not in wl
            continue
        if o["name"] in HEADER_OF_WORKLOAD:  # only its workload's traces record it
            assert key not in wl
            continue
        assert wl[key] == want, o["name"]


#: options the trace header records only when given (c_ref/main.c jworkload)
HEADER_WHEN_GIVEN = {"chunk", "allocator", "restart-pages"}
#: options the trace header records only for their workload (c_ref/main.c jworkload)
HEADER_OF_WORKLOAD = {"zset-members": ("zscore", "zmscore")}


def _other_value(o: dict):
    """A valid value that is not the option's default."""
    t, d = o["type"], o["default"]
    if t == "int":
        return d + 1 if d + 1 <= min(o["max"], 64) else o["min"]
    if t == "float":
        return 0.5 if d != 0.5 else 0.25
    if t == "choice":
        return next(c for c in o["choices"] if c != d)
    if t == "flag":
        return True
    return "lookahead"  # --variant, for the pipeline workload


VARIANT = {"load": "prefetch-after-key", "iterate": "next-bucket", "pipeline": "lookahead",
           "mset": "batch", "mget": "batch", "hash": "nested-3940", "zscore": "nested-3940",
           "exists": "batch", "del": "batch", "touch": "batch",
           "zmscore": "find-batch-4017"}


@pytest.mark.parametrize("workload", list(VARIANT))
def test_every_option_reaches_kvsim_cref(spec, tmp_path, workload):
    """Each option the workload uses, set to a value other than its default through `kvsim
    trace`, arrives in kvsim-cref (its trace header records the workload spec it ran)."""
    assert workload in spec["workloads"]
    given = {o["name"]: _other_value(o) for o in spec["options"] if workload in o["workloads"]}
    given.update({k: v for k, v in (("keys", 64), ("ops", 20), ("key-size", 12)) if k in given})
    given["variant"] = VARIANT[workload]  # variants belong to each workload's family
    args = []
    for name, value in given.items():
        args += [f"--{name}"] if value is True else [f"--{name}", str(value)]
    out = tmp_path / "t.kvt"
    res = run_kvsim("trace", workload, "-o", out, *args)
    assert res.returncode == 0, res.stderr.decode()
    with traces.open(out) as tr:
        wl = tr.header["workload"]
    for name, value in given.items():
        assert wl[name.replace("-", "_")] == value, name


def test_every_option_is_used_by_some_workload(spec):
    assert all(set(o["workloads"]) & set(spec["workloads"]) for o in spec["options"])


FAKE = {
    "workloads": ["alpha", "beta"],
    "options": [
        {"name": "frob", "type": "int", "min": 2, "max": 9, "default": 3, "help": "Frob count.",
         "workloads": ["beta"]},
        {"name": "mode", "type": "choice", "choices": ["x", "y"], "default": "x",
         "help": "Mode.", "workloads": ["alpha", "beta"]},
        {"name": "loud", "type": "flag", "default": False, "help": "Be loud.",
         "workloads": ["alpha", "beta"]},
    ],
}


def _fake_command(seen: list) -> click.Command:
    @click.command(cls=cli.WorkloadCommand, spec=FAKE)
    @click.option("--repeat", type=int, default=1)
    def fake(workload, repeat, **kwargs):
        seen.append((workload, cref.workload_args(cli._pick(kwargs))))

    return fake


def test_cli_options_are_built_from_the_table_alone():
    """A different table gives a different command: its options, ranges, choices, defaults."""
    seen: list = []
    cmd = _fake_command(seen)
    runner = CliRunner()
    res = runner.invoke(cmd, ["--help"])
    assert res.exit_code == 0
    assert "--frob" in res.output and "Frob count. (used by beta)" in res.output
    assert "{alpha|beta}" in res.output and "--keys" not in res.output
    assert runner.invoke(cmd, ["beta", "--frob", "7", "--loud"]).exit_code == 0
    assert runner.invoke(cmd, ["alpha"]).exit_code == 0
    # defaults are kvsim-cref's own and not forwarded (so it can tell a given --batch from
    # its default); alpha does not use --frob: giving it is an error
    assert seen == [("beta", ["--frob", "7", "--loud"]), ("alpha", [])]
    res = runner.invoke(cmd, ["alpha", "--frob", "7"])
    assert res.exit_code == 2
    assert "--frob does not apply to workload 'alpha' (used by beta)" in res.output
    assert len(seen) == 2
    for bad in (["gamma"], ["beta", "--frob", "10"], ["beta", "--mode", "z"], ["beta", "--keys"]):
        assert runner.invoke(cmd, bad).exit_code == 2, bad


@pytest.mark.parametrize("args, needle", [
    (["--op", "nope"], "--op"),
    (["--set-ratio", "2"], "--set-ratio"),
    (["--seed", "-1"], "--seed"),
    (["--keys-per-command", "0"], "--keys-per-command"),
])
def test_bad_option_values_fail_with_one_line(args, needle, tmp_path):
    res = run_kvsim("trace", "iterate", "-o", tmp_path / "t.kvt", "--keys", "10", *args)
    assert res.returncode == 2
    lines = res.stderr.decode().strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kvsim: error: ") and needle in lines[0]
    assert list(tmp_path.iterdir()) == []


def test_every_listed_variant_runs_and_no_other_does(spec, tmp_path):
    """The variant names the table lists per workload (its family's entries in c_ref's
    variant registry) are exactly the ones kvsim-cref accepts, and `--help` shows them."""
    assert sorted(spec["variants"]) == sorted(spec["workloads"])
    binary = str(artifacts.path(artifacts.CREF_CLI))
    uses = {o["name"]: o["workloads"] for o in spec["options"]}
    for workload, names in spec["variants"].items():
        assert names and VARIANT[workload] in names, workload
        small = ["--keys", "64"] + (["--ops", "20"] if workload in uses["ops"] else [])
        for name in [*names, "no-such-variant"]:
            r = subprocess.run([binary, "trace", workload, *small,
                                "--variant", name, "-o", str(tmp_path / "t.kvt")],
                               capture_output=True, text=True, timeout=120)
            assert (r.returncode == 0) == (name in names), (workload, name, r.stderr)
    help_text = "".join(run_kvsim("trace", "--help").stdout.decode().split())  # click wraps
    for workload, names in spec["variants"].items():
        assert f"{workload}:{','.join(names)}" in help_text, workload
