"""bench/ab.py (python -m bench ab): interleaved rounds of two sides, what it prints is what it
writes, a side's options and engine reach its processes, and bad input is one line."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

_PATH = Path(__file__).resolve().parents[1] / "ab.py"
_spec = importlib.util.spec_from_file_location("engine_ab", _PATH)
ab = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ab)


def test_rounds_alternate_and_each_side_runs_as_told(tmp_path, monkeypatch):
    """Side A's options and library reach A's processes, B's reach B's, and the order of
    the two alternates from round to round."""
    seen = []

    def fake(cmd, side):
        seen.append((cmd, side[0]))
        return (2.0, 3.0) if "--threads" in cmd else (1.0, 1.5)  # A twice B's time

    monkeypatch.setattr(ab, "run_once", fake)
    lib = tmp_path / "a.so"
    row = ab.measure([Path("a.kvt"), Path("b.kvt")], "graviton3", "timed",
                     [(lib, ["--threads", "1"], {}), (None, [], {})], rounds=6)
    order = ["a" if "--threads" in c else "b" for c, _ in seen]
    assert order == ["a", "b"] + ["a", "b", "b", "a"] * 3  # an untimed run of each first
    assert all((lb == lib) == ("--threads" in c) for c, lb in seen)
    assert all(c[c.index("simulate") + 1] == ("a.kvt" if "--threads" in c else "b.kvt")
               for c, _ in seen)  # each side its own file of the trace
    tails = {tuple(c[-5:]) if "--threads" in c else tuple(c[-3:]) for c, _ in seen}
    assert tails == {("--cpu", "graviton3", "--json", "--threads", "1"),
                     ("--cpu", "graviton3", "--json")}
    assert row["wall_speedup"]["median"] == 2.0 and row["cpu_speedup"]["median"] == 2.0
    assert row["wall_speedup"]["verdict"] == "faster"
    assert row["a_wall_median"] == 2.0 and row["b_cpu_min"] == 1.5


def test_a_tree_is_imported_from_where_it_is_staged(tmp_path):
    """--base-tree: a process started with BOOT's import lines in package_env's environment
    imports kvsim from the staged revision (here HEAD, extracted as --base-tree does), not
    from this checkout."""
    tree = tmp_path / "tree"
    tree.mkdir()
    tar = tmp_path / "src.tar"
    with open(tar, "wb") as f:
        subprocess.run(["git", "-C", str(ab.ROOT), "archive", "HEAD"], stdout=f, check=True)
    subprocess.run(["tar", "-x", "-f", str(tar), "-C", str(tree)], check=True)
    env = dict(os.environ, **ab.package_env(tree))
    code = ab.IMPORT_FROM_TREE + "import kvsim.sim.api, kvsim.artifacts as a\n" \
        "print(kvsim.sim.api.__file__)\nprint(a.SOURCE_ROOT)\n"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=env, check=True).stdout.split()
    assert out == [str(tree / "stage" / "kvsim" / "sim" / "api.py"), str(tree)]
    mine = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True).stdout.split()
    assert mine[1] == str(ab.ROOT)


@pytest.mark.parametrize("codec", ["raw", "zstd", "zstd_planes"])
def test_recode_keeps_header_and_records_in_another_codec(tmp_path, codec):
    """--a-codec/--b-codec: a side's copy of a trace holds the same header fields and
    records, chunk for chunk, every chunk stored with the codec asked for."""
    from kvsim import traces

    src = tmp_path / "t.kvt"
    recs = np.zeros(5000, dtype=traces.RECORD_DTYPE)
    recs["addr"] = np.arange(5000, dtype=np.uint64) * 72
    recs["size"], recs["kind"] = 8, traces.KIND_LOAD
    with traces.Writer(src, {"workload": {"name": "t"}}, chunk_records=1024) as w:
        w.write(recs)
    out = ab.recode(src, codec, tmp_path / "copies")
    assert out == tmp_path / "copies" / codec / "t.kvt"
    assert ab.recode(src, codec, tmp_path / "copies") == out  # made once
    with traces.TraceReader(src) as a, traces.TraceReader(out) as b:
        chunks_a, chunks_b = list(a), list(b)
        assert [len(c) for c in chunks_a] == [len(c) for c in chunks_b] == [1024] * 4 + [904]
        assert np.array_equal(np.concatenate(chunks_a), np.concatenate(chunks_b))
        assert b.codecs == {codec: 5} and a.codecs == {"zstd_planes": 5}
        assert b.header["workload"] == a.header["workload"]


def test_small_run_writes_what_it_prints(tmp_path, capsys):
    out = tmp_path / "r.json"
    rc = ab.main(["--a-args", "--threads 1", "--b-codec", "raw", "--traces", "pipeline",
                  "--presets", "graviton3", "--modes", "functional", "--rounds", "2",
                  "--scale", "0.002", "--workdir", str(tmp_path / "w"), "--out", str(out)])
    assert rc == 0
    printed = capsys.readouterr().out
    doc = json.loads(out.read_text())
    assert {"commit", "machine", "date_utc"} <= doc["provenance"].keys()
    assert doc["sides"]["a"]["args"] == "--threads 1" and doc["rounds"] == 2
    assert doc["codecs"] == {"a": None, "b": "raw"}
    (row,) = doc["rows"]
    assert (row["trace"], row["preset"], row["mode"]) == ("pipeline", "graviton3", "functional")
    assert row["a_wall_min"] > 0 and row["b_cpu_median"] > 0
    assert row["wall_speedup"]["ci95"] is None  # two rounds: no interval, "within noise"
    assert row["wall_speedup"]["verdict"] == "within noise"
    assert f"A/B {row['wall_speedup']['median']:.3f}" in printed


@pytest.mark.parametrize("args, what", [
    (["--traces", "nope"], "--traces: nope"),
    (["--presets", "no-such-cpu"], "--presets: no-such-cpu"),
    (["--modes", "fast"], "--modes: fast"),
    (["--rounds", "0"], "--rounds 0"),
    (["--a-lib", "/no/such.so"], "--a-lib /no/such.so"),
    (["--base", "no-such-revision"], "--base no-such-revision"),
    (["--b-codec", "lz4"], "--b-codec lz4"),
])
def test_bad_input_one_line_no_file(tmp_path, capsys, args, what):
    out = tmp_path / "r.json"
    rest = {"--traces": "pipeline", "--presets": "graviton3", "--rounds": "1",
            "--scale": "0.002"}
    for opt in args[::2]:
        rest.pop(opt, None)
    rc = ab.main([*args, *(w for kv in rest.items() for w in kv),
                  "--workdir", str(tmp_path / "w"), "--out", str(out)])
    err = capsys.readouterr().err
    assert rc != 0
    assert len(err.strip().splitlines()) == 1 and what in err
    assert not out.exists()


def test_a_damaged_trace_to_recode_is_one_line(tmp_path, capsys):
    """--b-codec rewrites the bench's trace: a damaged one is the reader's one line, and no
    result file is written."""
    work, out = tmp_path / "w", tmp_path / "r.json"
    common = ["--traces", "pipeline", "--presets", "graviton3", "--modes", "functional",
              "--rounds", "1", "--scale", "0.002", "--workdir", str(work)]
    assert ab.main(common) == 0  # makes the traces
    trace = ab.bp.make_traces(work, 0.002)[ab.TRACES.index("pipeline")]["path"]
    data = bytearray(trace.read_bytes())
    data[len(data) // 2] ^= 0xFF
    trace.write_bytes(bytes(data))
    capsys.readouterr()
    assert ab.main(["--b-codec", "raw", *common, "--out", str(out)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and trace.name in err[0] and "crc32" in err[0]
    assert not out.exists()
