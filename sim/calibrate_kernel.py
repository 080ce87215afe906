"""The kernel's work in a snapshot load, for ``kvsim calibrate``: ``[syscall]``'s
``page_fault`` and ``file_read`` costs (the SYSCALL markers ``sys.page_fault`` and
``sys.file_read`` of traces/FORMAT.md; sim/MODEL.md §6).

One probe (:func:`probe`), by process CPU time (the clock, not the ticks' split), measures
both, and ``python -m kvsim.experiments.load_split measure`` runs the same one in each of its
rounds:

* **a minor fault**: the first touch of a page of fresh private anonymous memory, memset of
  a new mapping of :data:`PROBE_PAGES` 4 KiB pages less a second memset of the same pages,
  per page (the fault and the kernel's zeroing of the page; the program's own stores are the
  trace's records after the marker);
* **a read() from the page cache**: a file on a memory file system (larger than any last
  level) read into a reused buffer, per byte with 1 MiB calls and per call with 4 KiB calls
  less their bytes' cost (the Python call's own cost included, some tens of ns).

``page_fault_byte_ns`` is 0: the probe's pages are all 4 KiB, so the zeroing is in the per-call
figure (a 2 MiB page's fault is not measured). The costs are the medians of the rounds; no
figure is fitted to a prediction. ``python -m kvsim.sim.calibrate_kernel FILE -o OUT`` adds
them to a file calibrated before, measured now or (``--from-load-split``) taken from the
probes a ``load_split`` result recorded.
"""

from __future__ import annotations

import math
import statistics
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

from .config import ConfigError

PAGE = 4096
#: pages first touched per probe (128 MiB)
PROBE_PAGES = 1 << 15
#: the probe file's size when calibrate writes one (above any preset's last level), quick/full
PROBE_FILE_BYTES = {"quick": 64 << 20, "full": 256 << 20}
#: a probe's figures: (key, lowest valid value); the per-call figure is a difference of two
#: times and may come out below 0 on a busy machine (clamped when charged), never non-finite
FIGURES = (("first_touch_ns_per_page", 0.0), ("read_ns_per_byte", 0.0),
           ("read_ns_per_call", -math.inf))
ROUNDS = {"quick": 3, "full": 7}


def probe(path: Path) -> dict[str, float]:
    """One round: the first touch of a fresh page (ns per page) and read() of ``path`` (a
    file in the page cache) into a reused buffer, ns per byte (1 MiB calls) and per call
    (4 KiB calls, less their bytes' cost)."""
    import ctypes
    import mmap
    import time

    n = PROBE_PAGES * PAGE
    m = mmap.mmap(-1, n, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    buf = (ctypes.c_char * n).from_buffer(m)
    addr = ctypes.addressof(buf)
    t0 = time.process_time_ns()
    ctypes.memset(addr, 1, n)
    t1 = time.process_time_ns()
    ctypes.memset(addr, 2, n)
    t2 = time.process_time_ns()
    del buf
    m.close()
    out = {"first_touch_ns_per_page": ((t1 - t0) - (t2 - t1)) / PROBE_PAGES}

    def read_all(chunk: int) -> tuple[int, int, int]:
        b = bytearray(chunk)
        calls = nbytes = 0
        with open(path, "rb", buffering=0) as f:
            t = time.process_time_ns()
            while (got := f.readinto(b)):
                calls += 1
                nbytes += got
            return time.process_time_ns() - t, calls, nbytes
    big, _, nbytes = read_all(1 << 20)
    small, calls, _ = read_all(PAGE)
    out["read_ns_per_byte"] = big / nbytes
    out["read_ns_per_call"] = (small - big) / calls
    return out


def check(samples: Sequence[dict]) -> list[dict[str, float]]:
    """The probes' rounds, each with every figure a finite number above its floor; else a
    ConfigError of one line naming the round and the figure."""
    if not samples:
        raise ConfigError("calibrate: kernel probe: no rounds")
    out = []
    for i, s in enumerate(samples):
        row = {}
        for key, low in FIGURES:
            v = s.get(key) if isinstance(s, dict) else None
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) \
                    or v <= low:
                raise ConfigError(f"calibrate: kernel probe round {i + 1}: {key}: must be a "
                                  f"finite number{f' > {low:g}' if low > -math.inf else ''}, "
                                  f"got {v!r}")
            row[key] = float(v)
        out.append(row)
    return out


def memory_dir() -> Path | None:
    """A memory file system to hold the probe file (/dev/shm), None where there is none."""
    shm = Path("/dev/shm")
    return shm if shm.is_dir() else None


def measure(quick: bool, log: Callable[[str], None] = lambda m: None,
            rounds: int | None = None, file_bytes: int | None = None) -> list[dict]:
    """``rounds`` probes (default :data:`ROUNDS`) on a file of ``file_bytes`` (default
    :data:`PROBE_FILE_BYTES`) written to a memory file system (the temporary directory where
    there is none), checked."""
    n = rounds or ROUNDS["quick" if quick else "full"]
    file_bytes = file_bytes or PROBE_FILE_BYTES["quick" if quick else "full"]
    log(f"kernel: first touch of {PROBE_PAGES * PAGE >> 20} MiB and read() of a "
        f"{file_bytes >> 20} MiB file, {n} rounds")
    with tempfile.TemporaryDirectory(prefix="kvsim-kernel-", dir=memory_dir()) as tmp:
        path = Path(tmp) / "probe"
        with open(path, "wb") as f:
            block = bytes(range(256)) * (1 << 12)
            for _ in range(file_bytes // len(block)):
                f.write(block)
        return check([probe(path) for _ in range(n)])


def section(samples: Sequence[dict], how: str) -> dict:
    """The four ``[syscall]`` keys of the load's kernel work and their ``src`` (a dict with
    key ``src``), from checked probe rounds; ``how`` says where the rounds were run."""
    rounds = check(samples)
    med = {k: statistics.median(r[k] for r in rounds) for k, _ in FIGURES}
    base = f"measured: {how}, median of {len(rounds)} rounds (sim/calibrate_kernel.py probe)"
    return {
        "page_fault_ns": round(med["first_touch_ns_per_page"], 1),
        "page_fault_byte_ns": 0.0,
        "file_read_ns": round(max(0.0, med["read_ns_per_call"]), 1),
        "file_read_byte_ns": round(med["read_ns_per_byte"], 5),
        "src": {
            "page_fault_ns": f"{base}: memset of {PROBE_PAGES:,} fresh private anonymous 4 KiB "
                             "pages less a second memset of them, per page (the fault and the "
                             "kernel's zeroing of the page)",
            "page_fault_byte_ns": "measured: in page_fault_ns (the probe's pages are all "
                                  "4 KiB, their zeroing included); a 2 MiB page's is not "
                                  "measured",
            "file_read_ns": f"{base}: read() of a file in the page cache into a reused buffer "
                            "in 4 KiB calls less their bytes' cost at file_read_byte_ns, per "
                            "call, at least 0",
            "file_read_byte_ns": f"{base}: read() of a file in the page cache into a reused "
                                 "1 MiB buffer in 1 MiB calls, per byte",
        }}


def apply(doc: dict, samples: Sequence[dict], how: str) -> None:
    """Merge :func:`section` into ``doc``'s ``[syscall]`` (made if absent) and keep the
    rounds in ``[meta] kernel_probe``."""
    sec = section(samples, how)
    syscall = doc.setdefault("syscall", {})
    syscall.setdefault("src", {}).update(sec.pop("src"))
    syscall.update(sec)
    doc.setdefault("meta", {})["kernel_probe"] = {"how": how, "rounds": check(samples)}


def main(argv: Sequence[str] | None = None) -> int:
    import argparse
    import json
    import sys
    import tomllib

    from .calibrate import write_cpu_file

    prog = "python -m kvsim.sim.calibrate_kernel"
    ap = argparse.ArgumentParser(prog=prog, description="Write a calibrated CPU file with the "
                                 "snapshot load's kernel costs ([syscall] page_fault_*, "
                                 "file_read_*) measured now, or from a load_split result.")
    ap.add_argument("cpu_file", type=Path)
    ap.add_argument("-o", "--out", type=Path, required=True)
    ap.add_argument("--quick", action="store_true", help="fewer rounds")
    ap.add_argument("--from-load-split", type=Path, metavar="JSON",
                    help="the probes recorded by `python -m kvsim.experiments.load_split "
                         "measure` (its kernel_runs), measuring nothing")
    a = ap.parse_args(argv)

    def build() -> dict:
        doc = tomllib.loads(a.cpu_file.read_text())
        if a.from_load_split:
            split = json.loads(a.from_load_split.read_text())
            prov = split.get("provenance") or {}
            how = (f"the probes of {a.from_load_split.name} (python -m kvsim.experiments."
                   f"load_split measure, commit {str(prov.get('commit'))[:12]}, "
                   f"{prov.get('date_utc')})")
            samples = split.get("kernel_runs") or []
        else:
            samples = measure(a.quick, log=lambda m: print(m, file=sys.stderr))
            how = "kvsim calibrate's kernel probe (python -m kvsim.sim.calibrate_kernel)"
        apply(doc, samples, how)
        if not a.from_load_split:  # the machine, commit and date of this run
            from kvsim import provenance

            doc["meta"]["kernel_probe"]["provenance"] = provenance.provenance()
        return doc

    return write_cpu_file(prog, a.out, build)


if __name__ == "__main__":
    raise SystemExit(main())
