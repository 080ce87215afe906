"""The gem5 backend without gem5: the generated configuration script run against a stub
``m5`` package written here, the stats parser on a ``stats.txt`` built from the stat names
gem5's classic caches define (``src/mem/cache/base.cc``: ``demandMisses``, ``overallHits``,
...), the plumbing through a stand-in binary, and the message without a binary. The real
run needs ``GEM5`` (a gem5 NULL build) and is skipped without it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from kvsim import sim, traces
from kvsim.sim import gem5 as g5

STUB_OBJECTS = '''
import json, os

_objects = []


class _Port:
    def __init__(self, owner, name):
        self.owner, self.name = owner, name

    def ref(self):
        return self.owner._path + "." + self.name


class SimObject:
    def __init__(self, **kw):
        object.__setattr__(self, "_params", {})
        object.__setattr__(self, "_path", "?")
        _objects.append(self)
        for k, v in kw.items():
            setattr(self, k, v)

    def __setattr__(self, k, v):
        self._params[k] = v

    def name_children(self):
        for k, v in self._params.items():
            if isinstance(v, SimObject) and v._path == "?":
                object.__setattr__(v, "_path", k if self._path == "root" else
                                   self._path + "." + k)
                v.name_children()

    def __getattr__(self, k):
        if k.startswith("_"):
            raise AttributeError(k)
        if k in self._params:
            return self._params[k]
        return _Port(self, k)

    def dump(self):
        out = {"class": type(self).__name__, "params": {}, "ports": {}}
        for k, v in self._params.items():
            if isinstance(v, _Port):
                out["ports"][k] = v.ref()
            elif isinstance(v, SimObject):
                out["params"][k] = v._path
            elif isinstance(v, list):
                out["params"][k] = [x.dump() if isinstance(x, SimObject) else x for x in v]
            else:
                out["params"][k] = v
        return out


def _cls(name):
    return type(name, (SimObject,), {})


for _n in ("System SystemXBar L2XBar SnoopFilter SrcClockDomain VoltageDomain TrafficGen "
           "SimpleMemory Cache LRURP TreePLRURP RRIPRP BRRIPRP RandomRP").split():
    globals()[_n] = _cls(_n)


def AddrRange(start, size):
    return [start, size]


class Root(SimObject):
    def __init__(self, **kw):
        object.__setattr__(self, "_params", {})
        object.__setattr__(self, "_path", "root")
        _objects.append(self)
        for k, v in kw.items():
            setattr(self, k, v)
'''

STUB_INIT = '''
import json
import os

from . import objects, stats  # noqa: F401 -- m5.stats as in gem5

_tick = [0]


class _Event:
    def __init__(self, cause):
        self.cause = cause

    def getCause(self):
        return self.cause


def _log(*call):
    with open(os.environ["STUB_DUMP"] + ".calls", "a") as f:
        f.write(json.dumps(call) + "\\n")


def instantiate():
    for o in objects._objects:
        if o._path == "root":
            o.name_children()
    out = {o._path: o.dump() for o in objects._objects if o._path != "?"}
    with open(os.environ["STUB_DUMP"], "w") as f:
        json.dump(out, f, default=str)


def simulate(ticks=None):
    # gem5: simulate(ticks) runs that many more ticks; without it, until an exit event
    if ticks is None:
        _log("simulate")
        return _Event("stub: simulate() called")
    assert ticks > 0
    _tick[0] += ticks
    _log("simulate", ticks)
    return _Event("simulate() limit reached")


def curTick():
    return _tick[0]
'''

STUB_STATS = '''
def dump():
    import m5
    m5._log("dump", m5.curTick())


def reset():
    import m5
    m5._log("reset", m5.curTick())
'''


@pytest.fixture
def stub_m5(tmp_path: Path) -> Path:
    d = tmp_path / "stub"
    (d / "m5").mkdir(parents=True)
    (d / "m5" / "__init__.py").write_text(STUB_INIT)
    (d / "m5" / "objects.py").write_text(STUB_OBJECTS)
    (d / "m5" / "stats.py").write_text(STUB_STATS)
    return d


def _run_script(script: str, stub: Path, tmp: Path) -> dict:
    path = tmp / "run" / "config.py"
    path.parent.mkdir(exist_ok=True)
    path.write_text(script)
    env = dict(os.environ, PYTHONPATH=str(stub), STUB_DUMP=str(tmp / "dump.json"))
    res = subprocess.run([sys.executable, str(path)], env=env, capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 0, res.stderr
    assert "kvsim-gem5: exit at tick " in res.stdout and ": stub" in res.stdout
    graph = json.loads((tmp / "dump.json").read_text())
    calls = (tmp / "dump.json.calls").read_text().splitlines()
    graph["calls"] = [json.loads(c) for c in calls]
    return graph


PRESETS = sorted(p.stem for p in (Path(sim.__file__).parent / "presets").glob("*.toml"))


@pytest.mark.parametrize("preset", PRESETS)
def test_script_builds_the_presets_caches(preset: str, stub_m5: Path, tmp_path: Path) -> None:
    cpu = sim.load_cpu(preset)
    graph = _run_script(g5.config_script(cpu, "/data/t.trc.gz", 5_000_000), stub_m5, tmp_path)
    system = graph["system"]["params"]
    assert system["cache_line_size"] == cpu.caches[0].line
    assert graph["system.clk_domain"]["params"]["clock"] == f"{cpu.freq_ghz}GHz"
    assert graph["system.mem"]["params"]["null"] is True
    assert graph["system.tgen"]["class"] == "TrafficGen"
    upstream = "system.tgen.port"
    for i, c in enumerate(cpu.caches):
        node = graph[f"system.cache{i}"]
        p = node["params"]
        assert node["class"] == "Cache"
        assert (p["size"], p["assoc"]) == (f"{c.size}B", c.ways)
        assert p["tag_latency"] == p["data_latency"] == p["response_latency"] == c.latency
        assert p["mshrs"] == (c.mshrs or 256)
        assert p["clusivity"] == g5.CLUSIVITY[c.inclusion]
        assert graph[p["replacement_policy"]]["class"] == g5.REPLACEMENT[c.replacement]
        assert node["ports"]["cpu_side"] == upstream
        if i + 1 < len(cpu.caches):
            assert node["ports"]["mem_side"] == f"system.xbar{i}.cpu_side_ports"
            upstream = f"system.xbar{i}.mem_side_ports"
        else:
            assert node["ports"]["mem_side"] == "system.membus.cpu_side_ports"
    assert graph["system.mem"]["ports"]["port"] == "system.membus.mem_side_ports"
    # every crossbar's snoop filter holds at least the lines of all the caches above it
    above = 0
    for i, c in enumerate(cpu.caches):
        above += c.size
        xbar = f"system.xbar{i}" if i + 1 < len(cpu.caches) else "system.membus"
        sf = graph[graph[xbar]["params"]["snoop_filter"]]["params"]
        assert int(sf["max_capacity"].rstrip("B")) >= above
    assert graph["calls"] == [["simulate"]]  # no warm-up: one run to the exit state
    cfg = (tmp_path / "run" / "tgen.cfg").read_text().splitlines()
    duration = 5_000_000 + 10 * g5.SPACING_TICKS
    # the exit state has a duration: with none, real gem5 loops at the exit tick
    assert cfg == [f"STATE 0 {duration} TRACE /data/t.trc.gz 0",
                   f"STATE 1 {g5.SPACING_TICKS} EXIT", "INIT 0", "TRANSITION 0 1 1",
                   "TRANSITION 1 1 1"]


def test_trace_name_with_white_space_is_refused() -> None:
    cpu = sim.load_cpu(PRESETS[0])
    for bad in ("my trace.trc.gz", "", "t.trc.gz\n"):
        with pytest.raises(ValueError, match="white space"):
            g5.config_script(cpu, bad, 0)


def test_every_engine_policy_and_inclusion_has_a_gem5_counterpart() -> None:
    from kvsim.sim import _binding as B

    assert sorted(g5.REPLACEMENT) == sorted(B.policy_names())
    assert sorted(g5.CLUSIVITY) == sorted(B.inclusion_names())


@pytest.mark.parametrize("field", ["replacement", "inclusion"])
def test_a_name_gem5_cannot_map_is_an_error_not_lru(field: str) -> None:
    """A policy the engine registers and gem5.py does not map (here: one named after a
    policy yet to come) is refused with the level and the name, never run as LRU."""
    import dataclasses

    cpu = sim.load_cpu(PRESETS[0])
    odd = dataclasses.replace(cpu.caches[-1], **{field: "not-in-gem5"})
    cpu = dataclasses.replace(cpu, caches=(*cpu.caches[:-1], odd))
    with pytest.raises(g5.Gem5Error, match=f"{odd.name}: {field} 'not-in-gem5' has no gem5"):
        g5.config_script(cpu, "t.trc.gz", 0)


def test_exclusive_level_gets_clean_writebacks_from_above(stub_m5: Path, tmp_path: Path
                                                          ) -> None:
    cpu = sim.load_cpu(PRESETS[0])
    caches = list(cpu.caches)
    caches[-1] = caches[-1].__class__(**{**caches[-1].__dict__, "inclusion": "exclusive"})
    cpu = cpu.with_changes(caches=tuple(caches))
    graph = _run_script(g5.config_script(cpu, "t.trc.gz", 0), stub_m5, tmp_path)
    n = len(caches)
    assert graph[f"system.cache{n - 1}"]["params"]["clusivity"] == "mostly_excl"
    assert graph[f"system.cache{n - 2}"]["params"]["writeback_clean"] is True
    assert graph["system.cache0"]["params"]["writeback_clean"] is (n == 2)


def stats_txt(levels: list[dict[str, int]], sim_ticks: int = 123) -> str:
    """A stats.txt in gem5's layout with its classic-cache stat names."""
    lines = ["", "---------- Begin Simulation Statistics ----------",
             f"simTicks {sim_ticks:>30}                       # Number of ticks simulated (Tick)"]
    for i, lv in enumerate(levels):
        p = f"system.cache{i}"
        for name, v in lv.items():
            lines.append(f"{p}.{name}::system.tgen {v:>20}   # per requestor (Count)")
            lines.append(f"{p}.{name}::total {v:>20}   # {name} (Count)")
        lines.append(f"{p}.ReadSharedReq.misses::total {lv.get('demandMisses', 0):>10}  # x")
        lines.append(f"{p}.overallMissRate::total 0.5   # Ratio")
    lines += ["", "---------- End Simulation Statistics   ----------", ""]
    return "\n".join(lines)


def test_stats_parser_reads_gem5_names() -> None:
    cpu = sim.load_cpu(PRESETS[0])
    levels = [{"demandAccesses": 1000 - 100 * i, "demandMisses": 400 - 100 * i,
               "overallAccesses": 1100 - 100 * i, "overallHits": 650 - i,
               "overallMisses": 450 - 100 * i, "writebacks": 30 + i}
              for i in range(len(cpu.caches))]
    levels[-1].pop("writebacks")  # gem5 leaves zero counts out (nozero)
    res = g5.parse_stats(stats_txt(levels, 99), cpu, records=5)
    assert res["engine"] == "gem5" and res["records"] == 5 and res["sim_ticks"] == 99
    for i, (lv, out) in enumerate(zip(levels, res["levels"], strict=True)):
        assert out["name"] == cpu.caches[i].name
        assert (out["demand_accesses"], out["demand_misses"]) == (lv["demandAccesses"],
                                                                  lv["demandMisses"])
        assert (out["accesses"], out["hits"], out["misses"]) == (
            lv["overallAccesses"], lv["overallHits"], lv["overallMisses"])
        assert out["writebacks"] == lv.get("writebacks", 0)
    with pytest.raises(g5.Gem5Error, match="cache"):
        g5.parse_stats(stats_txt(levels[:1]), cpu)
    with pytest.raises(g5.Gem5Error, match="Begin Simulation"):
        g5.parse_stats("nothing here\n", cpu)


def test_stats_parser_adds_the_dumped_blocks() -> None:
    """Each dump is a measured segment (the script resets after every dump): the blocks add
    up, a statistic missing from one block (gem5 drops zeros) counting 0 there."""
    cpu = sim.load_cpu(PRESETS[0])
    rng = np.random.default_rng(3)
    names = ("demandAccesses", "demandMisses", "overallAccesses", "overallHits",
             "overallMisses", "writebacks")
    blocks = [[{k: int(rng.integers(0, 10**6)) for k in names} for _ in cpu.caches]
              for _ in range(3)]
    blocks[1][0].pop("writebacks")
    res = g5.parse_stats("".join(stats_txt(b, 10 + j) for j, b in enumerate(blocks)), cpu)
    assert res["sim_ticks"] == 10 + 11 + 12
    for i, out in enumerate(res["levels"]):
        assert out["misses"] == sum(b[i]["overallMisses"] for b in blocks)
        assert out["writebacks"] == sum(b[i].get("writebacks", 0) for b in blocks)


def test_stats_parser_sets_upgrade_misses_apart() -> None:
    """A store to a line its cache holds read-only is a miss in gem5's counts, sent down as
    an ``UpgradeReq`` (the crossbar below counts it): ``data_misses`` leaves those out."""
    cpu = sim.load_cpu(PRESETS[0])
    n = len(cpu.caches)
    levels = [{"overallAccesses": 900, "overallHits": 500, "overallMisses": 400 - i}
              for i in range(n)]
    below = [f"system.xbar{i}" for i in range(n - 1)] + ["system.membus"]
    ups = [7 * (i + 1) for i in range(n)]
    text = stats_txt(levels).replace(
        "---------- End", "\n".join(f"{b}.transDist::UpgradeReq {u:>10}  # (Count)"
                                    for b, u in zip(below, ups, strict=True)) + "\n---------- End")
    res = g5.parse_stats(text, cpu)
    for i, out in enumerate(res["levels"]):
        assert (out["misses"], out["upgrade_misses"]) == (400 - i, ups[i])
        assert out["data_misses"] == 400 - i - ups[i]
    plain = g5.parse_stats(stats_txt(levels), cpu)
    assert all(lv["upgrade_misses"] == 0 and lv["data_misses"] == lv["misses"]
               for lv in plain["levels"])


def _trace(tmp: Path) -> Path:
    rng = np.random.default_rng(5)
    r = np.zeros(3000, dtype=traces.RECORD_DTYPE)
    r["addr"] = rng.integers(1, 1 << 16, 3000).astype(np.uint64) * np.uint64(64)
    r["size"], r["kind"], r["gap"] = 8, rng.choice([0, 1], 3000), 3
    p = tmp / "t.kvt"
    with traces.Writer(p, {}) as w:
        w.write(r)
    return p


def test_plumbing_through_a_stand_in_binary(stub_m5: Path, tmp_path: Path) -> None:
    """A stand-in "gem5" runs the script on the stub m5 and writes a stats.txt whose
    figures are fixed: the result must be those figures, the packet trace gem5's."""
    cpu = sim.load_cpu(PRESETS[0])
    levels = [{"demandAccesses": 10 + i, "demandMisses": 5 + i, "overallAccesses": 11 + i,
               "overallHits": 6, "overallMisses": 5 + i} for i in range(len(cpu.caches))]
    (tmp_path / "stats.txt").write_text(stats_txt(levels))
    fake = tmp_path / "gem5.opt"
    fake.write_text(textwrap.dedent(f"""\
        #!{sys.executable}
        import os, runpy, shutil, sys
        out = sys.argv[1].split("=", 1)[1]
        os.makedirs(out)
        sys.path.insert(0, {str(stub_m5)!r})
        os.environ["STUB_DUMP"] = os.path.join(out, "dump.json")
        runpy.run_path(sys.argv[2], run_name="__main__")
        shutil.copy({str(tmp_path / "stats.txt")!r}, os.path.join(out, "stats.txt"))
        """))
    fake.chmod(0o755)
    keep = tmp_path / "keep dir"  # white space in the directory: the trace is named relatively
    res = g5.run(_trace(tmp_path), cpu, str(fake), keep=keep)
    assert (keep / "tgen.cfg").read_text().splitlines()[0].split()[4] == "trace.trc.gz"
    assert [lv["demand_misses"] for lv in res["levels"]] == [5 + i for i in range(len(levels))]
    assert res["records"] == 3000 and res["gem5"]["packets"] == 3000
    assert res["gem5"]["exit"].startswith("kvsim-gem5: exit at tick 0")
    from kvsim.traces.convert.gem5 import read_packets

    _, packets = read_packets(keep / "trace.trc.gz")
    assert [p["tick"] for p in packets[:3]] == [g5.SPACING_TICKS * k for k in (1, 2, 3)]
    graph = json.loads((keep / "m5out" / "dump.json").read_text())
    assert graph["system.cache0"]["params"]["assoc"] == cpu.caches[0].ways


def test_cli_without_a_binary_says_how_to_point_at_one(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != g5.GEM5_ENV}
    res = subprocess.run([sys.executable, "-m", "kvsim.experiments.cli", "simulate",
                          str(_trace(tmp_path)), "--engine", "gem5", "--cpu", PRESETS[0]],
                         capture_output=True, text=True, env=env, timeout=300)
    assert res.returncode != 0
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kvsim: error: no gem5 binary")
    assert "--gem5 PATH" in lines[0] and "GEM5=" in lines[0]


def _warmup_trace(tmp: Path, seed: int) -> Path:
    """Loads, stores (some crossing a line), prefetches and markers, with warm-up windows:
    closed, empty, back to back, and one left open at the end."""
    rng = np.random.default_rng(seed)
    n = 4000
    r = np.zeros(n, dtype=traces.RECORD_DTYPE)
    r["addr"] = rng.integers(1, 1 << 20, n).astype(np.uint64) * np.uint64(8)
    r["size"] = rng.choice([1, 8, 16, 64], n)
    r["kind"] = rng.choice([traces.KIND_LOAD, traces.KIND_STORE, traces.KIND_PREFETCH], n,
                           p=[0.6, 0.3, 0.1])
    r["size"][r["kind"] == traces.KIND_PREFETCH] = 1
    marks = np.sort(rng.choice(np.arange(2, n), 40, replace=False))
    marks = np.concatenate([[0, 1], marks])  # an empty window first
    r["kind"][marks] = traces.KIND_MARKER
    r["size"][marks] = 0
    r["flags"][marks] = traces.MARK_COMMAND
    warm = marks[np.concatenate([[True, True], rng.random(marks.size - 2) < 0.5])]
    warm = warm[: warm.size - (warm.size % 2 == 0)]  # odd: the last window stays open
    r["flags"][warm[0::2]] = traces.MARK_WARMUP_BEGIN
    r["flags"][warm[1::2]] = traces.MARK_WARMUP_END
    p = tmp / f"w{seed}.kvt"
    with traces.Writer(p, {}) as w:
        for part in np.array_split(r, 7):  # windows cross chunk boundaries
            w.write(part)
    return p


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_warmup_windows_are_the_packets_kvsim_does_not_count(seed: int, tmp_path: Path
                                                             ) -> None:
    """The packets inside the windows are exactly the accesses kvsim's engine leaves out of
    its counts: L1 accesses counted = packets written - warm-up packets."""
    from kvsim.traces.convert.gem5 import records_to_gem5

    cpu = sim.load_cpu(PRESETS[0])
    path = _warmup_trace(tmp_path, seed)
    windows: list[tuple[int, int]] = []
    with traces.open(path) as reader:
        n = records_to_gem5(g5.warmup_windows(reader, cpu.caches[0].line, windows),
                            tmp_path / "t.trc.gz", line_size=cpu.caches[0].line,
                            packet_spacing=g5.SPACING_TICKS)
    assert windows and windows[-1][1] == n  # the last window is open: to the end
    assert all(a <= b for a, b in windows)
    assert all(b < a for (_, b), (a, _) in zip(windows, windows[1:], strict=False))
    native = sim.simulate(traces.open(path), cpu, functional=True, tlb=False,
                          prefetchers=False, flush=False)
    counted, _ = g5.kvsim_requests(native["levels"][0])
    assert counted == n - sum(b - a + 1 for a, b in windows)
    assert native["warmup_records"] > 0


def test_script_resets_statistics_around_warmup(stub_m5: Path, tmp_path: Path) -> None:
    cpu = sim.load_cpu(PRESETS[0])
    s = g5.SPACING_TICKS
    script = g5.config_script(cpu, "t.trc.gz", 100 * s, warmup=[(1 * s, 10 * s),
                                                                 (40 * s, 100 * s)])
    calls = _run_script(script, stub_m5, tmp_path)["calls"]
    assert calls == [["simulate", s // 2], ["dump", s // 2], ["simulate", 10 * s],
                     ["reset", 10 * s + s // 2], ["simulate", 29 * s], ["dump", 40 * s - s // 2],
                     ["simulate", 61 * s], ["reset", 100 * s + s // 2], ["simulate"]]


NEEDS_GEM5 = pytest.mark.skipif(
    not os.environ.get(g5.GEM5_ENV),
    reason="GEM5 is not set: no gem5 binary to run (point GEM5 at a gem5 NULL build, "
           "build/NULL/gem5.opt, to run this test)")


@NEEDS_GEM5
@pytest.mark.parametrize("make", ["random", "warmup"])
def test_real_gem5_agrees_with_kvsim_on_lru(make: str, tmp_path: Path) -> None:
    """Real gem5 on xeon-8488c (every level LRU and non-inclusive): L1 sees exactly the
    accesses kvsim counts (warm-up left out on both sides), and every level's misses agree
    within 2 %."""
    cpu = sim.load_cpu("xeon-8488c")
    assert not any(g5.model_differences(cpu))
    trace = _trace(tmp_path) if make == "random" else _warmup_trace(tmp_path, 1)
    res = g5.run(trace, cpu, timeout=1800)
    assert res["gem5"]["version"] and "exit state" in res["gem5"]["exit"]
    native = sim.simulate(traces.open(trace), cpu, functional=True, tlb=False,
                          prefetchers=False, flush=False)
    assert res["levels"][0]["accesses"] == g5.kvsim_requests(native["levels"][0])[0]
    for k, g in zip(native["levels"], res["levels"], strict=True):
        _, km = g5.kvsim_requests(k)
        assert abs(g["misses"] - km) <= 0.02 * km, (k["name"], g["misses"], km)
