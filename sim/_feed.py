"""Feeding one trace's chunks to several engines at once (``sim.simulate_many``).

Each engine must see the chunks in trace order, and nothing else: its results then do not
depend on how the engines share the threads. So the engines need not wait for each other.
The calling thread reads the chunks and keeps those that some engine has not yet run; each
of ``nw`` worker threads runs the next chunk of an engine that is not running and has one
ready (an engine's run releases the GIL): the engine it ran last while it can, so that the
engine's hot state (its upper levels, TLBs, prefetcher tables) stays in that core's caches,
else the one furthest behind.
A fast engine runs ahead of a slow one by up to ``window`` chunks; then the reading waits,
so memory stays bounded. A barrier per chunk (every engine done with chunk j before any
starts j + 1) would leave a thread idle at the end of every chunk while the other finishes
the slowest engine's share; here a thread is idle only when every engine with a chunk ready
is already running, or has caught up with the reading.

``progress(n)`` is called on the calling thread when every engine is done with a chunk of
n records. An error in an engine stops the workers and is raised on the calling thread; an
exception on the calling thread (a bad chunk, SIGTERM) stops the workers after their current
chunk before it propagates.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

#: chunks a fast engine may run ahead of the slowest (at 65536 records of 24 bytes, 1.5 MiB
#: each); the compiled intake keeps WINDOW - 1 of them alive when asked for the next
WINDOW = 8


class _Stop(Exception):
    """The calling thread left: workers stop after their current chunk."""


def feed(chunks: Iterable[np.ndarray], engines: Sequence[Any], nw: int,
         on_chunk: Callable[[np.ndarray], object] | None = None,
         progress: Callable[[int], object] | None = None, window: int = WINDOW) -> None:
    """Run every chunk of ``chunks`` through every engine's ``run``, in order per engine, on
    ``nw`` worker threads; ``on_chunk(chunk)`` is called on the calling thread as each chunk
    is read."""
    cv = threading.Condition()
    held: deque[np.ndarray] = deque()  # chunks base .. base + len(held) - 1
    st = {"base": 0, "done": False, "error": None}
    pos = [0] * len(engines)  # each engine's next chunk
    busy = [False] * len(engines)

    def pick(last: int) -> int:  # with cv held: the engine to run next, or -1
        end, best = st["base"] + len(held), -1
        if last >= 0 and not busy[last] and pos[last] < end:
            return last
        for e, p in enumerate(pos):
            if not busy[e] and p < end and (best < 0 or p < pos[best]):
                best = e
        return best

    def worker() -> None:
        # a thread keeps to its engine while it can: that engine's state stays in the core's
        # caches
        last = -1
        while True:
            with cv:
                while True:
                    if st["error"] is not None:
                        return
                    e = pick(last)
                    if e >= 0:
                        break
                    if st["done"] and not any(busy) and all(
                            p == st["base"] + len(held) for p in pos):
                        return
                    cv.wait()
                busy[e] = True
                chunk = held[pos[e] - st["base"]]
            try:
                engines[e].run(chunk)
            except BaseException as exc:  # noqa: BLE001 - handed to the calling thread
                with cv:
                    if st["error"] is None:
                        st["error"] = exc
                    busy[e] = False
                    cv.notify_all()
                return
            last = e
            with cv:
                busy[e] = False
                pos[e] += 1
                cv.notify_all()

    def release() -> list[int]:  # with cv held: drop the chunks every engine has run
        sizes = []
        while held and min(pos) > st["base"]:
            sizes.append(len(held.popleft()))
            st["base"] += 1
        return sizes

    def report(sizes: list[int]) -> None:
        if progress is not None:
            for n in sizes:
                progress(n)

    workers = [threading.Thread(target=worker, name=f"kvsim-engine-{i}", daemon=True)
               for i in range(nw)]
    for t in workers:
        t.start()
    try:
        for chunk in chunks:
            if on_chunk is not None:
                on_chunk(chunk)
            with cv:
                held.append(chunk)
                cv.notify_all()
                sizes = release()
                while st["error"] is None and len(held) >= window:
                    cv.wait()
                    sizes += release()
                err = st["error"]
            report(sizes)
            if err is not None:
                break
        with cv:
            st["done"] = True
            cv.notify_all()
            sizes = release()
            while st["error"] is None and (held or any(busy)):
                cv.wait()
                sizes += release()
            err = st["error"]
        report(sizes)
    except BaseException:
        with cv:
            if st["error"] is None:
                st["error"] = _Stop()
            cv.notify_all()
        for t in workers:
            t.join()
        raise
    for t in workers:
        t.join()
    if err is not None:
        raise err
