"""gem5 elastic traces: the output decoded with gem5's inst_dep_record.proto definitions (the
message classes) and, independently, field by field with the plain varint decoder."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from kvsim import traces
from kvsim.traces.convert import convert, elastic, gem5


def _records() -> np.ndarray:
    r = np.zeros(7, dtype=traces.RECORD_DTYPE)
    r["kind"] = [0, 3, 1, 2, 0, 0, 1]
    r["addr"] = [0x40, 5, 0x80, 0x100, 0x200, 0x400, 0x800]
    r["size"] = [8, 0, 8, 1, 8, 4, 2]
    r["gap"] = [2, 3, 0, 1, 0, 5, 0]
    r["dep"] = [0, 0, 2, 0, 0, 1, 2]
    r["site"] = [1, 0, 2, 0, 0, 3, 1]
    return r


def test_nodes_deps_weights(tmp_path: Path) -> None:
    dst = tmp_path / "x.deptrace.proto.gz"
    stats = elastic.records_to_elastic([_records()[:3], _records()[3:]], dst,
                                       ticks_per_instruction=100)
    header, recs = elastic.read_elastic(dst)
    assert header == {"obj_id": "kvsim trace", "tick_freq": 10**12, "window_size": 3000}
    # instruction numbers: load 3; store 3+3+1 = 7; prefetch 9 (dropped); loads 10, 16; st 17
    assert [r["seq_num"] for r in recs] == [3, 7, 10, 16, 17]
    assert [r["type"] for r in recs] == [1, 2, 1, 1, 2]
    assert [r["p_addr"] for r in recs] == [0x40, 0x80, 0x200, 0x400, 0x800]
    assert [r["size"] for r in recs] == [8, 8, 8, 4, 2]
    assert [r.get("reg_dep", []) for r in recs] == [[], [3], [], [10], [10]]
    assert [r.get("weight", 0) for r in recs] == [2, 3, 2, 5, 0]
    assert [r["comp_delay"] for r in recs] == [200, 300, 200, 500, 0]
    assert [r["pc"] for r in recs] == [0x400004, 0x400008, 0x400000, 0x40000C, 0x400004]
    assert stats == {"nodes": 5, "loads": 3, "stores": 2, "reg_deps": 3, "deps_lost": 0}
    # the fetch trace beside it: one ReadReq per node at its pc, ticked by seq_num
    fh, fetch = gem5.read_packets(elastic.fetch_path(dst))
    assert elastic.fetch_path(dst).name == "x.fetchtrace.proto.gz"
    assert [(p["tick"], p["cmd"], p["addr"], p["size"]) for p in fetch] == [
        (r["seq_num"] * 100, 1, r["pc"], 4) for r in recs]


def test_field_numbers_match_gem5_proto(tmp_path: Path) -> None:
    """Decode the raw messages without the classes: field numbers and wire types are those of
    gem5's src/proto/inst_dep_record.proto (seq_num 1, type 2, p_addr 3, size 4, comp_delay 7,
    reg_dep 8, weight 9, pc 10)."""
    import gzip

    dst = tmp_path / "y.deptrace.proto"
    elastic.records_to_elastic(_records(), dst, fetch=False)
    assert not elastic.fetch_path(dst).exists()
    data = dst.read_bytes()
    assert data[:4] == b"gem5" and gzip.decompress(gzip.compress(data)) == data
    fields = {i: str(i) for i in range(1, 13)}
    pos, msgs = 4, []
    while pos < len(data):
        ln, pos = gem5._read_varint(data, pos, len(data))
        msgs.append(gem5._dec_builtin(fields, data, pos, pos + ln))
        pos += ln
    assert msgs[0] == {"1": b"kvsim trace", "3": 10**12, "4": 3000}
    assert msgs[2] == {"1": 7, "2": 2, "3": 0x80, "4": 8, "7": 750, "8": 3, "9": 3,
                       "10": 0x400008}


def test_convert_cli_path_writes_both_files(tmp_path: Path) -> None:
    src = tmp_path / "a.kvt"
    with traces.Writer(src, {}) as w:
        w.write(_records())
    res = convert(str(src), str(tmp_path / "o.deptrace.proto.gz"))
    assert res["records"] == 5
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "a.kvt", "o.deptrace.proto.gz", "o.fetchtrace.proto.gz"]


_TRACECPU_SCRIPT = """\
import m5
from m5.objects import *  # noqa: F403 -- gem5's configuration idiom

system = System(membus=SystemXBar())
system.clk_domain = SrcClockDomain(clock="2GHz", voltage_domain=VoltageDomain())
system.mem_mode = "timing"
system.mem_ranges = [AddrRange(0, size=1 << 48)]
system.cpu = TraceCPU(instTraceFile="t.fetchtrace.proto.gz", dataTraceFile="t.deptrace.proto.gz")
for side in ("icache", "dcache"):
    cache = Cache(size="32kB", assoc=8, tag_latency=2, data_latency=2, response_latency=2,
                  mshrs=16, tgts_per_mshr=8)
    setattr(system.cpu, side, cache)
    setattr(system.cpu, side + "_port", cache.cpu_side)
    cache.mem_side = system.membus.cpu_side_ports
system.mem = SimpleMemory(range=system.mem_ranges[0], null=True, latency="50ns")
system.mem.port = system.membus.mem_side_ports
system.system_port = system.membus.cpu_side_ports
root = Root(full_system=False, system=system)
m5.instantiate()
print("kvsim-exit:", m5.simulate().getCause())
"""


@pytest.mark.skipif(not os.environ.get("GEM5"),
                    reason="needs GEM5=path of a gem5 build (build/NULL/gem5.opt) to replay")
def test_real_gem5_tracecpu_replays_a_c_ref_trace(tmp_path: Path) -> None:
    """gem5's TraceCPU replays an exported c_ref trace to its end: its data cache sees every
    load and store of the trace, and its op count is the trace's instructions (to 0.01 %)."""
    import subprocess
    import sys

    from kvsim import sim

    kvt = tmp_path / "t.kvt"
    kvsim = [sys.executable, "-c", "from kvsim.experiments.cli import main; main()"]
    subprocess.run([*kvsim, "trace", "pipeline", "--keys", "2000",
                    "--ops", "300", "--seed", "3", "-o", str(kvt)], check=True,
                   capture_output=True, timeout=300)
    convert(str(kvt), str(tmp_path / "t.deptrace.proto.gz"))
    (tmp_path / "replay.py").write_text(_TRACECPU_SCRIPT)
    proc = subprocess.run([os.environ["GEM5"], "--outdir=m5out", "replay.py"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "kvsim-exit: end of all traces reached" in proc.stdout
    stats = {}
    for line in (tmp_path / "m5out" / "stats.txt").read_text().splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[0].startswith("system.cpu."):
            stats[parts[0]] = parts[1]
    with traces.open(kvt) as reader:
        res = sim.simulate(reader, "local", functional=True)
    kinds = res["record_kinds"]
    assert int(stats["system.cpu.dcache.overallAccesses::total"]) == (kinds["load"]
                                                                     + kinds["store"])
    assert abs(int(stats["system.cpu.numOps"]) - res["instructions"]) <= (
        1e-4 * res["instructions"])
