"""The PING study's traced side (experiments/server_kernel.py): c_ref's traced server under
redis-benchmark, its measured part simulated, the system calls per request counted as the
native server makes them (a read and a write per pipeline of PINGs)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from kvsim.experiments import server_kernel as sk


@pytest.mark.skipif(shutil.which("redis-benchmark") is None, reason="redis-tools not installed")
@pytest.mark.parametrize("depth", [1, 10])
def test_traced_pings_are_charged_their_calls(tmp_path: Path, depth: int) -> None:
    n = 400
    trace = sk.traced_ping(depth, 4, n, tmp_path / "p.kvt")
    p = sk.predicted(trace, "xeon-8488c", n)
    assert p["calls"]["read"] == pytest.approx(1 / depth, rel=0.1)
    assert p["calls"]["write"] == pytest.approx(1 / depth, rel=0.1)
    assert p["bytes"]["read"] == pytest.approx(14, rel=0.1)  # *1\r\n$4\r\nPING\r\n
    assert p["bytes"]["write"] == pytest.approx(7, rel=0.1)  # +PONG\r\n
    assert 0 < p["syscall_ns"] < p["ns"] and p["user_ns"] > 0
