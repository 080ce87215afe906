"""The many-engine feeder (sim/_feed.py): every engine sees every chunk once, in order,
whatever the threads; engines do not wait for each other at each chunk (a fast one runs
ahead of a slow one, up to the window); errors reach the caller without a hang."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from kvsim.sim import _feed


class FakeEngine:
    """Records the chunks it runs; sleeps `delay` seconds per chunk (GIL released)."""

    def __init__(self, delay: float = 0.0, fail_at: int | None = None) -> None:
        self.delay, self.fail_at, self.seen = delay, fail_at, []

    def run(self, chunk: np.ndarray) -> None:
        if self.fail_at is not None and len(self.seen) == self.fail_at:
            raise RuntimeError(f"engine failed at chunk {self.fail_at}")
        if self.delay:
            time.sleep(self.delay)
        self.seen.append(int(chunk[0]))


def chunks(n: int, size: int = 3):
    return [np.arange(i * size, (i + 1) * size) for i in range(n)]


@pytest.mark.parametrize("nw", [1, 2, 3])
def test_every_engine_sees_every_chunk_in_order(nw) -> None:
    engines = [FakeEngine(d) for d in (0.0, 0.002, 0.0, 0.001)]
    sizes: list[int] = []
    read: list[int] = []
    data = chunks(30)
    _feed.feed(iter(data), engines, nw, on_chunk=lambda c: read.append(int(c[0])),
               progress=sizes.append)
    want = [int(c[0]) for c in data]
    assert all(e.seen == want for e in engines)
    assert read == want
    assert sizes == [3] * 30  # each chunk reported once, when every engine is done with it


def test_a_fast_engine_runs_ahead_up_to_the_window() -> None:
    slow, fast = FakeEngine(0.01), FakeEngine(0.0)
    lead = []
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            lead.append(len(fast.seen) - len(slow.seen))
            time.sleep(0.001)

    t = threading.Thread(target=watch)
    t.start()
    try:
        _feed.feed(iter(chunks(20)), [slow, fast], 2, window=5)
    finally:
        stop.set()
        t.join()
    # engines in lock-step would never lead by more than 1; the window bounds the lead
    assert 2 <= max(lead) <= 5


@pytest.mark.parametrize("nw", [1, 2])
def test_an_engine_error_reaches_the_caller(nw) -> None:
    engines = [FakeEngine(), FakeEngine(fail_at=4), FakeEngine(0.001)]
    with pytest.raises(RuntimeError, match="failed at chunk 4"):
        _feed.feed(iter(chunks(50)), engines, nw, window=3)
    assert len(engines[1].seen) == 4


def test_a_reading_error_stops_the_engines() -> None:
    def bad():
        yield from chunks(5)
        raise ValueError("chunk 5: bad CRC")

    engines = [FakeEngine(0.001), FakeEngine()]
    with pytest.raises(ValueError, match="bad CRC"):
        _feed.feed(bad(), engines, 2)
    assert all(len(e.seen) <= 5 for e in engines)
    assert not [t for t in threading.enumerate() if t.name.startswith("kvsim-engine")]
