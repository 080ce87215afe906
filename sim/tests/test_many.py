"""One pass, many CPUs: ``sim.simulate_many`` and ``kvsim simulate --cpu a --cpu b`` give
each CPU exactly the result ``sim.simulate`` gives it alone, whatever the number of engine
threads side by side; one ``--cpu`` keeps the single result."""

from __future__ import annotations

import io
import json
import subprocess
import sys

import numpy as np
import pytest
from trace_helpers import HEADER, random_records

from kvsim import sim, traces

PRESETS = ["graviton3", "xeon-8488c", "epyc-7713"]


@pytest.fixture(scope="module")
def trace_file(tmp_path_factory):
    rec = random_records(6000, 11)
    rec = rec[rec["kind"] != traces.KIND_MARKER]
    rec["dep"] = 0
    rec["addr"] &= np.uint64((1 << 26) - 1)  # a 64 MiB footprint: hits and misses
    rec["size"] = np.where(rec["kind"] == traces.KIND_PREFETCH, 1, 8)
    p = tmp_path_factory.mktemp("many") / "t.kvt"
    with traces.Writer(p, HEADER, codec="zstd", chunk_records=1000) as w:
        w.write(rec)
    return p


@pytest.mark.parametrize("functional", [True, False])
@pytest.mark.parametrize("workers", [1, 2, 3])
def test_many_equals_one_by_one(trace_file, functional, workers) -> None:
    many = sim.simulate_many(str(trace_file), PRESETS, functional=functional, workers=workers)
    alone = [sim.simulate(str(trace_file), p, functional=functional) for p in PRESETS]
    assert [r["cpu"] for r in many] == PRESETS
    assert many == alone


def test_many_over_many_chunks(tmp_path) -> None:
    """More chunks than the feeder's window, engines of unequal speed on two threads: each
    engine's chunks are the right ones, though the faster run ahead of the slower while the
    compiled intake recycles the arrays the slowest is done with."""
    rec = random_records(30000, 5)
    rec = rec[rec["kind"] != traces.KIND_MARKER]
    rec["dep"] = 0
    rec["addr"] &= np.uint64((1 << 30) - 1)
    rec["size"] = np.where(rec["kind"] == traces.KIND_PREFETCH, 1, 8)
    p = tmp_path / "t.kvt"
    with traces.Writer(p, HEADER, chunk_records=500) as w:
        w.write(rec)
    cpus = ["xeon-8488c", "graviton3", "local"]
    many = sim.simulate_many(str(p), cpus, functional=True, workers=2)
    assert many == [sim.simulate(str(p), c, functional=True) for c in cpus]


def test_many_from_an_array_and_a_reader(trace_file) -> None:
    rec = traces.read_all(trace_file)
    a = sim.simulate_many(rec, PRESETS[:2])
    with traces.open(io.BytesIO(trace_file.read_bytes())) as tr:
        b = sim.simulate_many(tr, PRESETS[:2])
    for x, y in zip(a, b, strict=True):  # names aside (an array has no header)
        assert x["levels"] == y["levels"] and x["timing"] == y["timing"]


def test_many_wants_a_list() -> None:
    with pytest.raises(TypeError):
        sim.simulate_many(np.empty(0, traces.RECORD_DTYPE), "graviton3")
    with pytest.raises(ValueError):
        sim.simulate_many(np.empty(0, traces.RECORD_DTYPE), [])


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kvsim.experiments.cli", *args],
                          capture_output=True, timeout=600)


def test_cli_repeated_cpu(trace_file) -> None:
    one = [json.loads(_cli("simulate", str(trace_file), "--cpu", p, "--json").stdout)
           for p in PRESETS[:2]]
    both = _cli("simulate", str(trace_file), "--cpu", PRESETS[0], "--cpu", PRESETS[1],
                "--json")
    assert both.returncode == 0, both.stderr.decode()
    # alone, a CPU's engine may take a second core (its TLB thread takes slices of 65,536
    # records, none in a trace this short); side by side, one each: the same results
    # (sim/README.md), only engine_threads could differ
    many = json.loads(both.stdout)
    assert [r.pop("engine_threads") for r in many] == [1, 1]
    assert [r.pop("engine_threads") for r in one] == [1, 1]
    assert many == one
    text = _cli("simulate", str(trace_file), "--cpu", PRESETS[0], "--cpu", PRESETS[1],
                "--functional")
    assert text.returncode == 0 and text.stdout.decode().count("== ") == 2
