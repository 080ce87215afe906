"""The server loop's system calls (sim/calibrate_loop.py): the residue's arithmetic on runs
built by hand, the [syscall] section it gives, and a short real run of c_ref's server under
redis-benchmark counting its calls (the figures themselves are this machine's: not asserted)."""

from __future__ import annotations

import shutil

import pytest

from kvsim.sim import calibrate_loop as cl
from kvsim.sim import calibrate_syscall as cs
from kvsim.sim.config import parse_cpu

ALONE = {"read_ns": 900.0, "read_byte_ns": 0.02, "write_ns": 1000.0, "write_byte_ns": 0.05}


def _run(depth: int, clients: int, extra_per_write: float, sleeps: float = 0.0) -> dict:
    """A run whose system time is the calls alone plus ``extra_per_write`` per write."""
    reads = writes = 1.0 / depth
    rb, wb = 14.0, 7.0
    sys_ns = (reads * ALONE["read_ns"] + rb * ALONE["read_byte_ns"] + writes
              * (ALONE["write_ns"] + extra_per_write) + wb * ALONE["write_byte_ns"])
    return {"depth": depth, "clients": clients, "requests": 1000, "cpu_ns": sys_ns + 300,
            "sys_ns": sys_ns, "user_ns": 300.0, "reads": reads, "writes": writes,
            "read_bytes": rb, "write_bytes": wb, "sleeps": sleeps, "preempted": 0.0}


def test_the_residue_is_what_the_calls_alone_leave_per_write() -> None:
    raw = {"plan": [[1, 50], [10, 50]], "rounds": 3,
           "runs": [_run(1, 50, e) for e in (2000, 2500, 3000)]
           + [_run(10, 50, e, sleeps=0.01) for e in (2400, 2600, 2800)]}
    assert cl.residue(_run(1, 50, 1234.0), ALONE) == pytest.approx(1234.0)
    assert cl.residue(_run(10, 50, 1234.0), ALONE) == pytest.approx(123.4)
    extra, how = cl.loop_cost(raw, ALONE)
    assert extra == pytest.approx(2550.0)  # median of the six runs' residues per write
    cells = cl.by_cell(raw, ALONE)
    assert [c["residue_per_write_ns"] for c in cells] == pytest.approx([2500.0, 2600.0])
    assert cells[1]["residue_per_sleep_ns"] == pytest.approx(260.0 / 0.01)
    assert "residue_per_sleep_ns" not in cells[0] and "depth 10 x 50 clients" in how
    # a loop cheaper than the calls alone adds nothing (never a gain)
    assert cl.loop_cost({**raw, "runs": [_run(1, 50, -500.0)]}, ALONE)[0] == 0.0


def test_a_measured_loop_moves_the_write_cost_and_epoll_wait_into_it() -> None:
    sizes = list(cs.SIZES)
    raw = {"sizes": sizes, "iters": 10, "rounds": 1,
           "read_ns": [900 + 0.02 * s for s in sizes],
           "write_ns": [1000 + 0.05 * s for s in sizes],
           "epoll_wait_ns": [260.0] * len(sizes), "epoll_wait_sleep_ns": 350.0,
           "write_wake_ns": 1800.0}
    plain = cs.section(raw)
    assert plain["write_ns"] == 1800.0 and plain["epoll_wait_ns"] == 350.0
    looped = cs.section({**raw, "loop": {"plan": [[1, 50]], "rounds": 1,
                                         "runs": [_run(1, 50, 3000.0)]}})
    assert looped["write_ns"] == pytest.approx(1000.0 + 3000.0, abs=0.2)
    assert looped["epoll_wait_ns"] == 0.0 and looped["read_ns"] == plain["read_ns"]
    assert "residue" in looped["src"]["write_ns"]
    doc = {"name": "t", "freq_ghz": 2.0, "cache": [{"size": "32KiB", "ways": 8}],
           "syscall": looped}
    assert parse_cpu(doc).syscall.call_ns[1] == looped["write_ns"]


@pytest.mark.skipif(shutil.which("redis-benchmark") is None, reason="redis-tools not installed")
def test_a_short_real_loop_counts_a_read_and_a_write_per_round_trip() -> None:
    raw = cl.measure(((1, 5), (10, 5)), rounds=1, requests=(2000, 5000))
    by = {(r["depth"], r["clients"]): r for r in raw["runs"]}
    assert set(by) == {(1, 5), (10, 5)}
    for depth in (1, 10):
        r = by[(depth, 5)]
        # redis-benchmark sends depth PINGs at once: one read and one write of each batch
        assert r["reads"] == pytest.approx(1 / depth, rel=0.05)
        assert r["writes"] == pytest.approx(1 / depth, rel=0.05)
        assert r["read_bytes"] == pytest.approx(14, rel=0.02)  # *1\r\n$4\r\nPING\r\n
        assert r["write_bytes"] == pytest.approx(7, rel=0.02)  # +PONG\r\n
        assert r["cpu_ns"] > 0 and r["sys_ns"] + r["user_ns"] == pytest.approx(r["cpu_ns"])
