"""SYSCALL markers (traces/FORMAT.md) and their cost (a CPU file's [syscall], sim/PRESETS.md):
the engine's arithmetic on tiny traces, the compiled engine against sim/reference.py, and
traces and CPU files without them predicting what they did before."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sim_helpers import records

from kvsim import sim, traces
from kvsim.sim.config import ConfigError, Syscall, parse_cpu

SITES = ["none", "work", *traces.SYSCALL_SITES]
HEADER = {"producer": {"name": "tests", "version": "0", "git_commit": None},
          "tags": ["other", "query_buf", "reply_buf"], "sites": SITES,
          "markers": list(traces.MARKER_NAMES)}
SYS = traces.MARK_SYSCALL
READ, WRITE, EPOLL, FILE_READ, FAULT = (SITES.index(s) for s in traces.SYSCALL_SITES)
CALLS = [READ, WRITE, EPOLL, FILE_READ, FAULT]
COSTS = Syscall(call_ns=(400.0, 900.0, 250.0, 150.0, 1100.0),
                byte_ns=(0.05, 0.125, 0.0, 0.2, 0.01))


def _cpu(syscall: Syscall | None = None) -> sim.CpuConfig:
    cpu = sim.load_cpu("xeon-8488c")
    return cpu.with_changes(syscall=syscall or Syscall())


def _write(tmp_path: Path, recs: np.ndarray, name: str = "t.kvt", header=None) -> Path:
    p = tmp_path / name
    with traces.Writer(p, header or HEADER) as w:
        w.write(recs)
    return p


def _server_like(n: int, seed: int = 1) -> np.ndarray:
    """n requests as a server traces them: epoll_wait, a read and its copy into the query
    buffer, dependent loads, a reply store, a write and its copy out of the reply buffer."""
    rng = np.random.default_rng(seed)
    rows = []
    for _ in range(n):
        q, nb = int(rng.integers(20, 200)), int(rng.integers(0, 4000))
        rows += [("marker", 12, 0, 0, 0, 0, EPOLL, SYS),
                 ("marker", q, 0, 0, 0, 0, READ, SYS),
                 ("store", 0x10000, q, 3, 0, 1, 1),
                 ("load", 0x10000, 16, 40, 0, 1, 1)]
        for _ in range(3):
            rows.append(("load", int(rng.integers(1 << 20, 1 << 32)) & ~7, 8, 20, 1, 0, 1))
        rows += [("store", 0x20000, nb + 5, 30, 0, 2, 1),
                 ("marker", nb + 5, 0, 0, 0, 0, WRITE, SYS),
                 ("load", 0x20000, nb + 5, 0, 0, 2, 1)]
    return records(rows)


def _ticks_of(rec: np.ndarray, cpu: sim.CpuConfig) -> int:
    """The cost the engine is to charge for rec's SYSCALL markers, in ticks, by hand."""
    tpn = cpu.freq_ghz * cpu.timing_ticks()[0]
    total = 0
    for r in rec[(rec["kind"] == traces.KIND_MARKER) & (rec["flags"] == SYS)]:
        c = CALLS.index(int(r["site"]))
        q16 = round(cpu.syscall.byte_ns[c] * tpn * 65536)
        total += round(cpu.syscall.call_ns[c] * tpn) + ((int(r["addr"]) * q16 + 32768) >> 16)
    return total


def test_syscall_cost_arithmetic(tmp_path: Path) -> None:
    rec = _server_like(40)
    path = _write(tmp_path, rec)
    base, costed = (sim.simulate(path, _cpu(s)) for s in (None, COSTS))
    cyc = _ticks_of(rec, _cpu(COSTS)) / _cpu(COSTS).timing_ticks()[0]
    assert costed["syscalls"]["cycles"] == pytest.approx(cyc)
    assert costed["syscalls"]["calls"] == {"read": 40, "write": 40, "epoll_wait": 40}
    assert costed["syscalls"]["bytes"]["read"] == int(rec["addr"][(rec["flags"] == SYS) & (
        rec["site"] == READ) & (rec["kind"] == traces.KIND_MARKER)].sum())
    # a call starts once every earlier record has retired: it adds at least its cost
    assert costed["cycles"] >= base["cycles"] + cyc - 1
    assert base["syscalls"]["cycles"] == 0


def test_a_lone_syscall_adds_exactly_its_cost(tmp_path: Path) -> None:
    """Nothing in flight before the call and nothing after: the cycles grow by its cost."""
    rows = [("load", 0x1000, 8, 5), ("marker", 1000, 0, 0, 0, 0, WRITE, SYS)]
    rec = records(rows)
    base = sim.simulate(_write(tmp_path, rec[:1], "a.kvt"), _cpu(COSTS))
    both = sim.simulate(_write(tmp_path, rec, "b.kvt"), _cpu(COSTS))
    cpu = _cpu(COSTS)
    ticks = _ticks_of(rec, cpu)
    assert ticks == round(900.0 * cpu.freq_ghz * cpu.timing_ticks()[0]) + round(
        1000 * round(0.125 * cpu.freq_ghz * cpu.timing_ticks()[0] * 65536) / 65536)
    assert both["cycles"] == pytest.approx(base["cycles"] + ticks / cpu.timing_ticks()[0])


@pytest.mark.parametrize("functional", [False, True])
def test_compiled_engine_equals_reference(tmp_path: Path, functional: bool) -> None:
    path = _write(tmp_path, _server_like(12, seed=3))
    cpu = _cpu(COSTS)
    fast = sim.simulate(path, cpu, functional=functional)
    ref = sim.simulate(path, cpu, functional=functional, engine="reference")
    for key in ("cycles", "syscalls", "levels", "instructions", "commands"):
        assert fast.get(key) == ref.get(key), key


def test_without_costs_a_syscall_marker_changes_nothing(tmp_path: Path) -> None:
    """Old CPU files (no [syscall]) and traces naming no sys.* site: the markers count but
    cost nothing, so the prediction equals the trace's without them."""
    rec = _server_like(30, seed=5)
    plain = rec[~((rec["kind"] == traces.KIND_MARKER) & (rec["flags"] == SYS))]
    a = sim.simulate(_write(tmp_path, rec, "a.kvt"), _cpu())
    b = sim.simulate(_write(tmp_path, plain, "b.kvt"), _cpu(COSTS))
    hdr = dict(HEADER, sites=["none", "work", "x", "y", "z"])  # no sys.* site: not charged
    c = sim.simulate(_write(tmp_path, rec, "c.kvt", hdr), _cpu(COSTS))
    assert a["cycles"] == b["cycles"] == c["cycles"]
    assert c["syscalls"]["calls"] == {"unnamed": 90} and c["syscalls"]["cycles"] == 0


def _doc(**syscall) -> dict:
    return {"name": "t", "freq_ghz": 2.0, "core": {"width": 4, "rob": 64},
            "dram": {"latency_ns": 80}, "cache": [{"size": "32KiB", "ways": 8}],
            "syscall": syscall}


def test_cpu_file_section() -> None:
    cpu = parse_cpu(_doc(read_ns=500, read_byte_ns=0.1, write_ns=800, epoll_wait_ns=300,
                         src={"read_ns": "E"}))
    assert cpu.syscall == Syscall((500.0, 800.0, 300.0, 0.0, 0.0), (0.1, 0.0, 0.0, 0.0, 0.0))
    assert cpu.provenance["syscall"] == {"read_ns": "E"}
    ec = cpu.to_engine(timing=True)
    # ns x 2 GHz x 4 ticks a cycle; a file without the kernel's keys charges nothing for them
    assert list(ec.syscall_call_ticks) == [4000, 6400, 2400, 0, 0]
    assert ec.syscall_byte_q16[0] == round(0.1 * 8 * 65536)
    kern = parse_cpu(_doc(file_read_ns=100, file_read_byte_ns=0.25, page_fault_ns=1000))
    ek = kern.to_engine(timing=True)
    assert list(ek.syscall_call_ticks) == [0, 0, 0, 800, 8000]
    assert ek.syscall_byte_q16[3] == round(0.25 * 8 * 65536) and ek.syscall_byte_q16[4] == 0
    assert parse_cpu({k: v for k, v in _doc().items() if k != "syscall"}).syscall == Syscall()
    with pytest.raises(ConfigError, match=r"syscall\.read_ns: must be a finite number >= 0"):
        parse_cpu(_doc(read_ns=-1))
    with pytest.raises(ConfigError, match=r"syscall\.send_ns: unknown key"):
        parse_cpu(_doc(send_ns=1))
    with pytest.raises(ConfigError, match=r"syscall\.write_ns: expected"):
        parse_cpu(_doc(write_ns="fast"))


@pytest.mark.parametrize("name", sim.config.preset_names())
def test_every_preset_gives_its_syscall_costs_with_a_source(name: str) -> None:
    if name == "local":
        pytest.skip("the calibrated file: `kvsim calibrate` measures [syscall]")
    import tomllib

    doc = tomllib.loads((sim.config.PRESET_DIR / f"{name}.toml").read_text())
    sec = doc["syscall"]
    for key in sim.config.SYSCALL_KEYS:
        assert key in sec and key in sec["src"], key
        assert sec["src"][key][:1] in ("V", "R", "E"), key
    assert sim.load_cpu(name).syscall.call_ns[0] > 0


def test_fit_line_recovers_a_line() -> None:
    from kvsim.sim.calibrate_syscall import fit_line

    xs = [64.0, 256.0, 1024.0, 4096.0, 16384.0]
    assert fit_line(xs, [800 + 0.02 * x for x in xs]) == pytest.approx((800, 0.02))
    assert fit_line(xs, [900 - 0.01 * x for x in xs])[1] == 0.0  # clamped: never a gain


def test_calibrate_measures_a_section_the_parser_takes() -> None:
    """The loopback microbenchmark at a tiny size: every key, positive call costs, and the
    section a CPU file accepts (the figures themselves are this machine's: not asserted)."""
    from kvsim.sim import calibrate_syscall as cs

    raw = cs.measure(quick=True, iters=64, loop=False)
    assert raw["sizes"] == list(cs.SIZES) and len(raw["read_ns"]) == len(cs.SIZES)
    sec = cs.section(raw)
    socket = set(sim.config.SYSCALL_KEYS[:6])  # the load's kernel keys: calibrate_kernel.py
    assert set(sec) == {*socket, "src"} and set(sec["src"]) == socket
    assert min(sec["read_ns"], sec["write_ns"], sec["epoll_wait_ns"]) > 0
    cpu = parse_cpu(_doc(**sec))
    assert cpu.syscall.call_ns[:3] == (sec["read_ns"], sec["write_ns"], sec["epoll_wait_ns"])


def test_microbenchmark_rejects_bad_arguments() -> None:
    from kvsim.sim.calibrate import run_bench

    with pytest.raises(OSError, match="kvsim-calibrate syscall: usage"):
        run_bench("syscall", 4, 0)


def test_the_peer_measurement_gives_the_per_byte_costs() -> None:
    """With a peer measurement, read_byte_ns and write_byte_ns are its slopes from 1 KiB up
    (the sizes below left out), the per-call costs the sweep's intercepts."""
    from kvsim.sim import calibrate_syscall as cs

    sizes = list(cs.SIZES)
    peer = list(cs.PEER_SIZES)
    raw = {"sizes": sizes, "iters": 10, "rounds": 1,
           "read_ns": [800 + 0.01 * s for s in sizes],
           "write_ns": [900 + 0.02 * s for s in sizes],
           "epoll_wait_ns": [250.0] * len(sizes),
           "peer": {"sizes": peer, "iters": 10, "rounds": 1,
                    "read_median_ns": [2500.0 if s < 1024 else 300 + 0.06 * s for s in peer],
                    "write_median_ns": [1000 + 0.05 * s for s in peer],
                    "read_min_ns": [0.0] * len(peer), "write_min_ns": [0.0] * len(peer)}}
    sec = cs.section(raw)
    assert sec["read_byte_ns"] == pytest.approx(0.06) and sec["write_byte_ns"] == 0.05
    assert sec["read_ns"] == pytest.approx(800, abs=0.1)
    assert sec["write_ns"] == pytest.approx(900, abs=0.1)
    assert "syspeer" in sec["src"]["read_byte_ns"] and "syspeer" not in sec["src"]["read_ns"]
    alone = cs.alone(raw)
    assert alone["read_byte_ns"] == pytest.approx(0.06)
    assert alone["write_ns"] == pytest.approx(900)
    without = {k: v for k, v in raw.items() if k != "peer"}
    assert cs.section(without)["read_byte_ns"] == pytest.approx(0.01)
    parse_cpu(_doc(**sec))


def test_the_peer_microbenchmark_moves_every_byte() -> None:
    """kvsim-calibrate syspeer at two sizes: a sample per call and size, none negative (the
    figures are this machine's: not asserted); bad arguments are a usage error."""
    from kvsim.sim.calibrate import run_bench

    out = run_bench("syspeer", 32, 64, 8192)
    assert out["sizes"] == [64, 8192]
    for c in ("read", "write"):
        assert len(out[f"{c}_median_ns"]) == 2 and min(out[f"{c}_min_ns"]) >= 0
        assert all(m >= lo for m, lo in zip(out[f"{c}_median_ns"], out[f"{c}_min_ns"],
                                            strict=True))
    for bad in ((4, 64), (32, 0), (32, 1 << 20)):
        with pytest.raises(OSError, match="kvsim-calibrate syspeer: usage"):
            run_bench("syspeer", *bad)


def test_the_tick_bias_loop_spins_what_it_is_told() -> None:
    """kvsim-calibrate sysbias: every round trip spins at least SPIN_NS in user mode, the CPU
    time covers the spins, the ticks are counts (their split is this machine's: not
    asserted); bad arguments are a usage error."""
    from kvsim.sim.calibrate import run_bench

    out = run_bench("sysbias", 64, 5000)
    assert out["iters"] == 64 and out["spun_ns"] >= 64 * 5000
    assert out["cpu_ns"] >= out["spun_ns"] and min(out["utime"], out["stime"]) >= 0
    for bad in ((4, 100), (64, -1), (64,)):
        with pytest.raises(OSError, match="kvsim-calibrate sysbias: usage"):
            run_bench("sysbias", *bad)


def test_fault_and_file_read_costs_on_a_tiny_trace(tmp_path: Path) -> None:
    """A fault is charged once per marker (its page's bytes at the per-byte rate) and a file
    read per call and per byte; a lone marker after a retired load adds exactly its cost."""
    cpu = _cpu(COSTS)
    tps = cpu.timing_ticks()[0]
    tpn = cpu.freq_ghz * tps
    load = records([("load", 0x1000, 8, 5)])
    base = sim.simulate(_write(tmp_path, load, "a.kvt"), cpu)["cycles"]
    for site, nbytes, k in ((FAULT, 4096, 4), (FILE_READ, 65536, 3), (FILE_READ, 0, 3)):
        rec = records([("load", 0x1000, 8, 5), ("marker", nbytes, 0, 0, 0, 0, site, SYS)])
        got = sim.simulate(_write(tmp_path, rec, f"{site}-{nbytes}.kvt"), cpu)
        want = round(COSTS.call_ns[k] * tpn) + (
            (nbytes * round(COSTS.byte_ns[k] * tpn * 65536) + 32768) >> 16)
        assert got["cycles"] == pytest.approx(base + want / tps, abs=1)  # whole cycles
        assert got["syscalls"]["calls"] == {traces.SYSCALL_NAMES[k]: 1}
    # two faults cost twice one: the engine keeps no memory of a page (the producer says
    # which pages are fresh)
    two = records([("load", 0x1000, 8, 5)] + [("marker", 4096, 0, 0, 0, 0, FAULT, SYS)] * 2)
    got = sim.simulate(_write(tmp_path, two, "two.kvt"), cpu)
    one = round(COSTS.call_ns[4] * tpn) + ((4096 * round(COSTS.byte_ns[4] * tpn * 65536)
                                            + 32768) >> 16)
    assert got["cycles"] == pytest.approx(base + 2 * one / tps, abs=1)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(rows=st.lists(st.one_of(
    st.tuples(st.sampled_from(["load", "store"]), st.integers(0, 1 << 22).map(lambda a: a * 8),
              st.integers(1, 256), st.integers(0, 40)),
    st.tuples(st.just("marker"), st.integers(0, 1 << 17), st.just(0), st.integers(0, 20),
              st.just(0), st.just(0), st.sampled_from([1, *CALLS]), st.just(SYS))),
    min_size=1, max_size=80),
    call=st.lists(st.sampled_from([0.0, 35.0, 400.0, 1151.5]), min_size=5, max_size=5),
    byte=st.lists(st.sampled_from([0.0, 0.001, 0.18, 0.5]), min_size=5, max_size=5))
def test_engine_equals_reference_with_every_calls_costs(tmp_path: Path, rows, call,
                                                         byte) -> None:
    """Random accesses and SYSCALL markers at every call's site (and one naming none), with
    random costs for all five calls: the compiled engine and the reference agree exactly."""
    path = _write(tmp_path, records(rows), "p.kvt")
    cpu = _cpu(Syscall(tuple(call), tuple(byte)))
    fast = sim.simulate(path, cpu)
    ref = sim.simulate(path, cpu, engine="reference")
    for key in ("cycles", "syscalls", "levels", "instructions"):
        assert fast.get(key) == ref.get(key), key
