"""`kvsim calibrate`: measure the machine at hand and write its CPU file (the `local` preset).

The measurements are small C programs (``sim/_calibrate/calibrate.c``, the ``kvsim-calibrate``
artifact) that print raw samples; this module runs them in rounds spread over the run (within
a time budget, :data:`PLANS`), takes each point's fastest sample (:func:`fastest`: other
work on the machine only ever adds time), and derives the model's numbers:

* **clock**: dependent chains of register multiplies and adds of known latency against the
  thread's CPU time (every timing is CPU time, so the scheduler giving the CPU to other work
  does not count), checked against each other and against the clock the kernel reports
  (:mod:`kvsim.sim.calibrate_check`);
* **cache levels**: load-to-use latency of a pointer chase (a random cycle through every line
  of the working set) over sizes from 4 KiB up, with 2 MiB pages where the kernel gives them
  (``madvise(MADV_HUGEPAGE)``; the file says which were used). Each level's latency and
  *effective capacity* are those of the ideal hierarchy that best explains the curve
  (:func:`fit_levels`): a working set of S bytes over a level of capacity C hits it with
  probability min(1, C/S), so between two levels the latency rises smoothly from one plateau
  to the next and the knee sits at C; the curve is made non-decreasing first;
* **DRAM and the page walk**: the DRAM latency and the walk's fixed part for which the
  model's own prediction of chases with 4 KiB pages from 16 MiB to the largest set (1 GiB;
  256 MiB with ``--quick``) best matches them (:func:`fit_translation`, least squares, each
  size's residual kept in the file);
* **miss overlap**: N independent chases at once; the speedup over one chase levels off at the
  number of misses the core keeps in flight (:func:`mlp_ceiling`), which bounds the L1 miss
  buffers;
* **bandwidth**: one thread streaming reads over a buffer far larger than the caches;
* **sustained IPC**: c_ref's own CRC-64 and SipHash over cache-resident data, the traces'
  instruction counts of those calls over their measured cycles (:func:`sustained_ipc`):
  how many instructions per cycle the core retires on dependent non-memory work. Kept in
  ``[meta.raw] work_ipc`` and the notes, not written to ``[core] sustained_ipc``: the model
  has one rate for every instruction gap, and these kernels' rate applied to all of them
  is refuted by the seed pairs (sim/VALIDATION.md, finding 4).

Geometry (sizes, ways, line) comes from sysfs, the TLBs from cpuid where it answers (AMD
leaves 0x80000005/6), and what no program can measure (ROB, width, L2 miss queues, STLB hit
cost, inclusion, hardware prefetchers) from :data:`KNOWN_CORES`, a table of published
figures keyed by vendor, family and model; of its L2 prefetchers, a kind a probe measures
(:mod:`kvsim.sim.calibrate_prefetch`) is kept only where the probe shows it firing on a
random chase's misses, before the hierarchy fit, so that the fit and the self-check
simulate the file's prefetchers. Every value in the written file names its
provenance (``measured``, ``sysfs``, ``cpuid``, ``table``) in the ``src`` table beside it,
and ``[meta]`` holds the raw measurements, the machine and the load average.

Before it writes, the calibration checks itself (:mod:`kvsim.sim.calibrate_check`): the
clock's two chains and the kernel's range, each figure's plausibility, its own
microbenchmarks replayed through the simulator on the file about to be written, and, when a
calibration of the other kind (quick or full) of the same machine exists, their agreement.
The result is the file's ``[selfcheck]`` table; a failed file is written marked so (beside
the cache file, never over it, when no output is named), the command exits non-zero with
one line naming the failed check, and `--cpu local` never uses it.

The file goes to the user's cache directory (``$XDG_CACHE_HOME/kvsim``, else
``~/.cache/kvsim``) under a name keyed by the CPU model and cache geometry
(:func:`cache_path`), where ``load_cpu("local")`` finds it.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import statistics
import subprocess
import time
import tomllib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from kvsim import artifacts

from . import calibrate_check as check
from . import (
    calibrate_kernel,
    calibrate_prefetch,
    calibrate_stores,
    calibrate_syscall,
    calibrate_work,
)
from .config import ConfigError, parse_cpu

if TYPE_CHECKING:  # imported by the fits: the `local` preset reads the tables without it
    import numpy as np

LINE = 64
KIB, MIB, GIB = 1024, 1024**2, 1024**3

# --- the table of known cores -------------------------------------------------------------
#
# What a program cannot measure from user space. Each entry names its sources with the
# codes of sim/PRESETS.md: V verified against retrieved text, R from the named source but
# recalled, E an estimate (the same as the predecessor core, or a modelling choice). The
# latencies and DRAM figure are used only when no calibration exists (the fallback `local`).

_ZEN_PREFETCHERS = [
    {"level": "L1D", "kind": "stream", "degree": 1, "table": 16},
    {"level": "L1D", "kind": "ip_stride", "degree": 1, "table": 64},
    {"level": "L2", "kind": "stream", "degree": 2, "table": 32},
    {"level": "L2", "kind": "up_down", "degree": 1, "table": 16},
]
# Intel's L1 DCU prefetcher is "triggered by an ascending access to very recently loaded
# data" (Intel 64 and IA-32 Architectures Optimization Reference Manual, Intel Core and Sandy
# Bridge sections) (V): prefetch_ascending.c, not next_line, which fetches line + 1 on every
# miss and so gave the chases past L1D hits the core does not have (sim/VALIDATION.md,
# finding 13)
# Its L2 streamer "monitors read requests from the L1 cache ... initiated by load and store
# operations" (the same manual, "Data Prefetch to the L2 and Last Level Cache") (R): it issues
# from the L2's own queue when the L1's request reaches it, trained by stores' reads for
# ownership and by requests the L2 serves (sim/MODEL.md §4 arrival, stores, hits;
# sim/VALIDATION.md, finding 33)
_INTEL_PREFETCHERS = [
    {"level": "L1D", "kind": "ascending", "degree": 1, "table": 16},
    {"level": "L1D", "kind": "ip_stride", "degree": 1, "table": 64},
    {"level": "L2", "kind": "stream", "degree": 2, "table": 32, "arrival": True,
     "stores": True, "hits": True},
    {"level": "L2", "kind": "adjacent_line", "degree": 1, "table": 16},
]

KNOWN_CORES: list[dict] = [
    {
        "core": "AMD Zen 3", "vendor": "AuthenticAMD", "family": 25,
        # family 19h models as the Linux kernel's arch/x86/kernel/cpu/amd.c (bsp_init_amd)
        # sorts them into Zen 3 and Zen 4 (V)
        "models": [*range(0x00, 0x10), *range(0x20, 0x60)],
        "width": 6, "rob": 256, "l1_mshrs": 24, "l2_mshrs": 32,
        "latency": [4, 12, 46], "dram_latency_ns": 115.0,
        "inclusion": ["non-inclusive", "inclusive", "exclusive"],
        "tlb": {"l1_entries": 64, "l1_ways": 0, "l2_entries": 2048, "l2_ways": 8,
                "l2_latency": 7, "walkers": 6},
        "prefetchers": _ZEN_PREFETCHERS,
        "sources": "AMD Software Optimization Guide for AMD Family 19h Processors (#56665) "
                   "via LLVM X86ScheduleZnver3.td (width, ROB, L1/L2 latency); 24 L1 misses "
                   "in flight (same guide); L2 miss queue E; L3 46 cycles and 115 ns DRAM "
                   "from AnandTech's Zen 3 review (R, E); 6 page-table walkers from "
                   "AnandTech's Zen 3 review, article 16214 p.4 (V)",
    },
    {
        "core": "AMD Zen 4", "vendor": "AuthenticAMD", "family": 25,
        "models": [*range(0x10, 0x20), *range(0x60, 0xB0)],
        "width": 6, "rob": 320, "l1_mshrs": 24, "l2_mshrs": 64,
        "latency": [4, 14, 50], "dram_latency_ns": 115.0,
        "inclusion": ["non-inclusive", "inclusive", "exclusive"],
        "tlb": {"l1_entries": 72, "l1_ways": 0, "l2_entries": 3072, "l2_ways": 12,
                "l2_latency": 7, "walkers": 6},
        "prefetchers": _ZEN_PREFETCHERS,
        "sources": "Software Optimization Guide for the AMD Zen4 Microarchitecture (#57647) "
                   "as LLVM X86ScheduleZnver4.td quotes it: dispatch 6 macro ops per cycle "
                   "(section 2.9.8), 320 macro ops in flight in the retire control unit "
                   "(2.10.3), 4-cycle integer load-to-use L1 (2.12) (V); L2 14 and L3 ~50 "
                   "cycles, 72-entry L1 DTLB, 3072-entry 12-way L2 DTLB and 64 L2 misses in "
                   "flight from the same guide, whose text was not retrieved (R); 24 L1 "
                   "misses, STLB hit cost, 6 page-table walkers and prefetchers as Zen 3 (E); "
                   "DRAM 115 ns (E); "
                   "models 10h-1Fh and 60h-AFh as Linux's amd.c (V)",
    },
    {
        "core": "AMD Zen 5", "vendor": "AuthenticAMD", "family": 26,
        # family 1Ah models Linux's amd.c (bsp_init_amd) marks X86_FEATURE_ZEN5 (V)
        "models": [*range(0x00, 0x30), *range(0x40, 0x50), *range(0x60, 0x80)],
        "width": 8, "rob": 448, "l1_mshrs": 24, "l2_mshrs": 64,
        "latency": [4, 14, 50], "dram_latency_ns": 115.0,
        "inclusion": ["non-inclusive", "inclusive", "exclusive"],
        "tlb": {"l1_entries": 96, "l1_ways": 0, "l2_entries": 4096, "l2_ways": 16,
                "l2_latency": 7, "walkers": 6},
        "prefetchers": _ZEN_PREFETCHERS,
        "sources": "Software Optimization Guide for the AMD Zen5 Microarchitecture (#58455) "
                   "as LLVM X86ScheduleZnver5.td quotes it: dispatch 8 macro ops per cycle, "
                   "448 macro ops in flight in the retire control unit, 4-cycle integer "
                   "load-to-use L1 (V); 48 KiB 12-way L1D, 1 MiB 16-way L2, 96-entry L1 "
                   "DTLB and 4096-entry L2 DTLB from AMD's Hot Chips 2024 Zen 5 slides (V); "
                   "L2 14 cycles, L2 inclusive and L3 a victim cache, L1 DTLB fully "
                   "associative, L2 DTLB 16-way and an L2 DTLB hit 7 cycles later, from a "
                   "published summary of the same guide with measurements on a Ryzen 9 9950X "
                   "(R); L3 ~50 cycles, 24 L1 and 64 L2 misses in flight, 6 page-table "
                   "walkers, DRAM 115 ns and prefetchers as Zen 4 (E); "
                   "models 00h-2Fh, 40h-4Fh and 60h-7Fh as Linux's amd.c (V)",
    },
    {
        "core": "Intel Golden Cove / Raptor Cove / Redwood Cove", "vendor": "GenuineIntel",
        "family": 6, "models": [0x97, 0x9A, 0xB7, 0xBA, 0xBF, 0x8F, 0xCF, 0xAD, 0xAE],
        # AMX exists only on the server cores of this line (Sapphire Rapids, Emerald Rapids,
        # Granite Rapids): a guest whose hypervisor reports another model number but AMX
        # tiles is one of them (Intel ISE reference, "Intel AMX") (R)
        "features": ["amx_tile"],
        "width": 6, "rob": 512, "l1_mshrs": 16, "l2_mshrs": 48,
        "latency": [5, 16, 106], "dram_latency_ns": 110.0,
        "inclusion": ["non-inclusive", "non-inclusive", "non-inclusive"],
        "tlb": {"l1_entries": 96, "l1_ways": 6, "l2_entries": 2048, "l2_ways": 8,
                "l2_latency": 9, "walkers": 4},
        "prefetchers": _INTEL_PREFETCHERS,
        "sources": "Intel 64 and IA-32 Architectures Optimization Reference Manual (Golden "
                   "Cove: 6-wide, 512-entry ROB, 16 fill buffers, 96-entry DTLB) and LLVM "
                   "X86SchedSapphireRapids.td; 4 page walkers (2 -> 4) from cpunews.net's "
                   "Alder Lake/Golden Cove analysis p.5 (V); "
                   "L2 48 misses from Intel Architecture Day 2021 "
                   "(R); L3 and DRAM latency from Chips and Cheese's Sapphire Rapids review (R, "
                   "E); Redwood Cove (Granite Rapids) taken as Golden Cove (E)",
    },
    {
        "core": "Intel Skylake-SP / Cascade Lake", "vendor": "GenuineIntel", "family": 6,
        "models": [0x55], "width": 4, "rob": 224, "l1_mshrs": 12, "l2_mshrs": 16,
        "latency": [5, 14, 70], "dram_latency_ns": 90.0,
        "inclusion": ["non-inclusive", "non-inclusive", "non-inclusive"],
        "tlb": {"l1_entries": 64, "l1_ways": 4, "l2_entries": 1536, "l2_ways": 12,
                "l2_latency": 9, "walkers": 2},
        "prefetchers": _INTEL_PREFETCHERS,
        "sources": "Intel 64 and IA-32 Architectures Optimization Reference Manual (Skylake "
                   "server: 4-wide allocation, 224-entry ROB, 12 fill buffers, 16-entry L2 "
                   "superqueue, 64-entry DTLB, 1536-entry STLB, 2 page walkers); L3 and DRAM "
                   "latency E",
    },
]


def known_core(vendor: str, family: int | None, model: int | None,
               flags: Sequence[str] = ()) -> dict | None:
    """The :data:`KNOWN_CORES` entry for this vendor/family/model, or None. A model number
    no entry lists (a hypervisor may report any) still matches an entry of its vendor and
    family whose ``features`` the CPU's ``flags`` all have."""
    for c in KNOWN_CORES:
        if c["vendor"] == vendor and c["family"] == family and model in c["models"]:
            return c
    for c in KNOWN_CORES:
        if (c["vendor"] == vendor and c["family"] == family and c.get("features")
                and set(c["features"]) <= set(flags)):
            return c
    return None


def identity_core(ident: dict) -> dict | None:
    """:func:`known_core` of a :func:`cpu_identity`."""
    return known_core(ident.get("vendor", ""), ident.get("family"), ident.get("model"),
                      ident.get("flags") or ())


def table_source(table: dict) -> str:
    """The ``src`` of a value taken from :data:`KNOWN_CORES` entry ``table``."""
    return f"table ({table['core']})"


# --- the machine and its cache file --------------------------------------------------------

def cpu_identity(cpuinfo: Path = Path("/proc/cpuinfo")) -> dict:
    """vendor, family, model (ints or None), model name and flags of the first CPU."""
    out: dict = {"vendor": "", "family": None, "model": None, "model_name": "", "flags": []}
    try:
        text = cpuinfo.read_text()
    except OSError:
        return out
    for line in text.splitlines():
        if not line.strip():
            break
        k, _, v = (s.strip() for s in line.partition(":"))
        if k == "vendor_id":
            out["vendor"] = v
        elif k == "cpu family" and v.isdigit():
            out["family"] = int(v)
        elif k == "model" and v.isdigit():
            out["model"] = int(v)
        elif k == "model name":
            out["model_name"] = v
        elif k == "flags":
            out["flags"] = v.split()
    return out


def machine_key(levels: list[dict], ident: dict) -> str:
    """A file-name-safe key of CPU model and cache geometry (a calibration is per machine)."""
    geometry = [(x["level"], x["size"], x["ways"], x["line"]) for x in levels]
    blob = json.dumps([ident.get("vendor"), ident.get("family"), ident.get("model"),
                       ident.get("model_name"), geometry])
    slug = re.sub(r"[^a-z0-9]+", "-", (ident.get("model_name") or "cpu").lower()).strip("-")
    return f"{slug[:40] or 'cpu'}-{hashlib.sha256(blob.encode()).hexdigest()[:12]}"


def cache_dir() -> Path:
    """``$XDG_CACHE_HOME/kvsim``, else ``~/.cache/kvsim``."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "kvsim"


def cache_path(levels: list[dict], ident: dict | None = None) -> Path:
    """Where this machine's calibrated CPU file lives (it may not exist)."""
    ident = ident if ident is not None else cpu_identity()
    return cache_dir() / f"local-{machine_key(levels, ident)}.toml"


# --- analysis ------------------------------------------------------------------------------

def median(xs: Sequence[float]) -> float:
    return float(statistics.median(xs))


def fastest(xs: Sequence[float]) -> float:
    """The statistic of a latency measured in repeats: their minimum. Interference from
    other work (other tenants, the scheduler, a neighbour's cache and memory traffic) only
    ever adds time, so the fastest sample is the closest to the machine's own figure."""
    return float(min(xs))


def monotone(ns: Sequence[float]) -> np.ndarray:
    """A latency-against-working-set curve made non-decreasing from above: each point is
    the minimum of itself and every larger set's. A larger set never costs less per load,
    so a point above a larger set's is interference, not the machine."""
    import numpy as np

    y = np.asarray(ns, dtype=float)
    return np.minimum.accumulate(y[::-1])[::-1]


def hierarchy_weights(sizes: np.ndarray, caps: Sequence[float]) -> np.ndarray:
    """Fraction of loads each level serves (columns: levels, then memory) for a random chase
    over each working-set size, in the ideal hierarchy with these capacities (ascending):
    level i holds min(1, C_i / S) of the set."""
    import numpy as np

    cov = [np.minimum(1.0, c / sizes) for c in caps] + [np.ones_like(sizes)]
    w = [cov[0]] + [cov[i] - cov[i - 1] for i in range(1, len(cov))]
    return np.stack(w, axis=1)


def model_latency(sizes: Sequence[float], caps: Sequence[float],
                  lats: Sequence[float]) -> np.ndarray:
    """The ideal hierarchy's mean load latency at each size (for tests and residuals)."""
    import numpy as np

    s = np.asarray(sizes, dtype=float)
    return hierarchy_weights(s, caps) @ np.asarray(lats, dtype=float)


def _solve_lats(s: np.ndarray, y: np.ndarray, caps: Sequence[float]) -> tuple[float, np.ndarray]:
    """Least-squares level latencies for fixed capacities, in relative error."""
    import numpy as np

    a = hierarchy_weights(s, caps) / y[:, None]
    lats, *_ = np.linalg.lstsq(a, np.ones_like(y), rcond=None)
    if np.any(lats <= 0):
        return math.inf, lats
    r = a @ lats - 1.0
    return float(r @ r), lats


def _segments(logy: np.ndarray, k: int) -> list[int]:
    """Start indices of the k pieces of the best piecewise-constant fit (least squares)."""
    import numpy as np

    n = len(logy)
    c1 = np.concatenate([[0.0], np.cumsum(logy)])
    c2 = np.concatenate([[0.0], np.cumsum(logy * logy)])

    def sse(i: int, j: int) -> float:  # points i..j-1
        m = j - i
        return float(c2[j] - c2[i] - (c1[j] - c1[i]) ** 2 / m)

    cost = np.full((k + 1, n + 1), math.inf)
    back = np.zeros((k + 1, n + 1), dtype=int)
    cost[0, 0] = 0.0
    for p in range(1, k + 1):
        for j in range(p, n + 1):
            for i in range(p - 1, j):
                c = cost[p - 1, i] + sse(i, j)
                if c < cost[p, j]:
                    cost[p, j], back[p, j] = c, i
    starts, j = [], n
    for p in range(k, 0, -1):
        j = back[p, j]
        starts.append(j)
    return starts[::-1]


def fit_levels(sizes: Sequence[float], ns: Sequence[float], levels: int,
               grid_per_octave: int = 16) -> dict:
    """Latency (ns) of each of ``levels`` cache levels and of memory, and each level's
    effective capacity (bytes), from a latency-against-working-set curve.

    The fit is the ideal hierarchy of :func:`hierarchy_weights` minimising the relative
    squared error: for fixed capacities the latencies are linear least squares, and each
    capacity is searched over a grid (``grid_per_octave`` points per octave between the
    smallest and largest size) one at a time, from a start given by the best
    piecewise-constant split of the curve. The curve is first made non-decreasing
    (:func:`monotone`), so an upward spike from interference moves no knee. Returns
    ``{"latency_ns": [...levels, memory], "capacity": [...levels], "rms_rel_error": float}``.
    """
    import numpy as np

    s = np.asarray(sizes, dtype=float)
    y = np.asarray(ns, dtype=float)
    order = np.argsort(s)
    s, y = s[order], monotone(y[order])
    if len(s) < levels + 1 or levels < 1:
        raise ValueError(f"fit_levels: {len(s)} points cannot give {levels} levels")
    starts = _segments(np.log(y), levels + 1)
    caps = [math.sqrt(s[i - 1] * s[i]) for i in starts[1:]]
    lo, hi = math.log2(s[0]), math.log2(s[-1])
    grid = 2.0 ** np.arange(lo, hi + 1e-9, 1.0 / grid_per_octave)
    best, lats = _solve_lats(s, y, caps)
    for _ in range(6):
        improved = False
        for i in range(levels):
            lo_c = caps[i - 1] if i else 0.0
            hi_c = caps[i + 1] if i + 1 < levels else math.inf
            for g in grid:
                if not lo_c < g < hi_c or g == caps[i]:
                    continue
                trial = caps[:i] + [float(g)] + caps[i + 1:]
                c, ls = _solve_lats(s, y, trial)
                if c < best - 1e-12:
                    best, lats, caps, improved = c, ls, trial, True
        if not improved:
            break
    return {"latency_ns": [float(x) for x in lats], "capacity": [float(c) for c in caps],
            "rms_rel_error": math.sqrt(best / len(s)) if math.isfinite(best) else math.inf}


def mlp_ceiling(chains: Sequence[int], ns_per_load: Sequence[float]) -> float:
    """How many misses overlap at most: the speedup of N parallel chases over one
    (``lat(1) / ns_per_load(N)``), taken as the median of the three largest speedups so one
    lucky sample does not set it. ``chains`` must include 1, and at least three counts at or
    above the ceiling for it to be resolved (below that it reads low)."""
    by = dict(zip(chains, ns_per_load, strict=True))
    if 1 not in by:
        raise ValueError("mlp_ceiling: the chains must include 1")
    speedups = sorted((by[1] / v for v in by.values()), reverse=True)
    return median(speedups[:3])


def work_instructions(kind: str, chunk: int) -> float:
    """Instructions per call that c_ref's trace counts for ``kvsim-calibrate work KIND
    CHUNK``: the mean over its calls, which take consecutive CHUNK-byte pieces of a 64-byte
    aligned WORK_BUF-byte buffer (back to its start when the next does not fit), so the
    CRC's alignment head and tail are those of each piece's offset."""
    return sum(work_instructions_by_kind(kind, chunk).values())


def work_instructions_by_kind(kind: str, chunk: int) -> dict[str, float]:
    """:func:`work_instructions` by the kind of work the traces give each part of it:
    SipHash's all hash; the CRC's by :func:`crc64_cost_by_kind`;
    ``crc64combine`` (a join of a CHUNK-byte second stream, ksCrc64Combine) all crc_combine."""
    if kind == "siphash":
        return {"hash": float(siphash_cost(chunk))}
    if kind == "crc64combine":
        return {"crc_combine": float(_crc64_combine_cost(chunk))}
    per = max(1, WORK_BUF // chunk)  # calls before the pieces start over
    parts = [crc64_cost_by_kind(i * chunk, chunk) for i in range(per)]
    return {k: sum(p[k] for p in parts) / per for k in CRC64_WORK_KINDS}


def crc64_cost(pos: int, n: int) -> int:
    """c_ref/crc64.c ksCrc64Cost: the traced instructions of one ksCrc64 call over ``n``
    bytes at an address ``pos`` mod 8 (crcspeed's two and three streams past their
    cutoffs, joined by crc64_combine; a call that ends in the head takes no other path)."""
    return sum(crc64_cost_by_kind(pos, n).values())


def crc64_cost_by_kind(pos: int, n: int) -> dict[str, int]:
    """c_ref/crc64.c ksCrc64CostKinds: :func:`crc64_cost` by kind of work, the two- and
    three-stream steps (crc_streams), the joins (crc_combine) and the rest (crc)."""
    head = min((8 - pos % 8) % 8, n)
    rest = n - head
    c, s, j = CRC64_CALL + head * CRC64_BYTE_HEAD, 0, 0
    if rest:
        c += CRC64_BODY
        for streams, cutoff, step in ((3, CRC64_TRI_CUTOFF, CRC64_STEP3),
                                      (2, CRC64_DUAL_CUTOFF, CRC64_STEP2)):
            if rest > cutoff:
                seg = (rest // streams) & ~7
                s = seg // 8 * step
                j = (streams - 1) * _crc64_combine_cost(seg)
                rest -= streams * seg
                break
        words, tail = rest // 8, rest % 8
        c += words * CRC64_WORD + (CRC64_WORDS_ENTRY if words else 0)
        c += tail * CRC64_BYTE + (CRC64_BYTES_ENTRY if tail else 0)
    return {"crc": c, "crc_streams": s, "crc_combine": j}


def siphash_cost(n: int, nocase: bool = False) -> int:
    """c_ref/siphash.c ksSiphashCost (ksSiphashNocaseCost if ``nocase``): the traced
    instructions of one call over ``n`` bytes (the block loop's words, the tail's bytes)."""
    if nocase:
        call, entry, word, first, byte = (SIPHASH_NOCASE_CALL, SIPHASH_NOCASE_WORDS_ENTRY,
                                          SIPHASH_NOCASE_WORD, SIPHASH_NOCASE_BYTE_FIRST,
                                          SIPHASH_NOCASE_BYTE)
    else:
        call, entry, word, first, byte = (SIPHASH_CALL, SIPHASH_WORDS_ENTRY, SIPHASH_WORD,
                                          SIPHASH_BYTE_FIRST, SIPHASH_BYTE)
    words, tail = n // 8, n % 8
    return (call + (entry + words * word if words else 0)
            + (first + (tail - 1) * byte if tail else 0))


def _crc64_combine_cost(len2: int) -> int:
    c = CRC64_COMBINE
    while len2:
        c += CRC64_COMBINE_BIT + (CRC64_MUL if len2 & 1 else 0)
        len2 >>= 1
    return c


def sustained_ipc(work: dict[str, Sequence[float]], ghz: float) -> dict:
    """The instructions per cycle the core sustains on c_ref's non-memory kernels: for each
    ``work`` point ("kind/chunk" -> ns per call samples), the trace's instructions per call
    over the cycles of its fastest sample, and their median (``ipc``)."""
    points = {}
    for key, ns in work.items():
        kind, chunk = key.split("/")
        instr = work_instructions(kind, int(chunk))
        cycles = min(ns) * ghz
        points[key] = {"instructions": round(instr, 2), "cycles": round(cycles, 2),
                       "ipc": round(instr / cycles, 3)}
    return {"ipc": median([p["ipc"] for p in points.values()]), "points": points}


def _pow2_floor(n: int) -> int:
    return 1 << (n.bit_length() - 1) if n > 0 else 0


def _tlb_from_cpuid(raw: dict) -> dict | None:
    """L1/L2 DTLB (4 KiB pages) from AMD's leaves 0x80000005/6, when they answer."""
    if not raw.get("x86") or raw.get("max_ext", 0) < 0x80000006:
        return None
    l1, l2 = raw["l1_tlb_ebx"], raw["l2_tlb_ebx"]
    l1_entries, l1_assoc = (l1 >> 16) & 0xFF, (l1 >> 24) & 0xFF
    l2_entries, code = (l2 >> 16) & 0xFFF, (l2 >> 28) & 0xF
    amd_ways = {1: 1, 2: 2, 3: 3, 4: 4, 5: 6, 6: 8, 8: 16, 0xA: 32, 0xB: 48, 0xC: 64, 0xD: 96,
                0xE: 128, 0xF: 0}
    if not l1_entries or not l2_entries or code not in amd_ways:
        return None
    return {"l1_entries": l1_entries, "l1_ways": 0 if l1_assoc == 0xFF else l1_assoc,
            "l2_entries": l2_entries, "l2_ways": amd_ways[code]}


def _pow2_sets_ways(entries: int, ways: int) -> int:
    """The smallest way count >= ``ways`` giving a power-of-two set count (0 = full)."""
    if ways == 0:
        return 0
    for w in range(ways, entries + 1):
        if entries % w == 0 and (entries // w) & (entries // w - 1) == 0:
            return w
    return 0


# --- running the microbenchmarks -----------------------------------------------------------

def run_bench(*args: object) -> dict:
    """One ``kvsim-calibrate`` run; its JSON. Raises OSError with its last stderr line."""
    exe = artifacts.path(artifacts.CALIBRATE_CLI)
    p = subprocess.run([str(exe), *map(str, args)], capture_output=True, text=True,
                       check=False)
    if p.returncode != 0:
        msg = (p.stderr.strip().splitlines() or [f"exit status {p.returncode}"])[-1]
        raise OSError(f"kvsim-calibrate {args[0]}: {msg}")
    return json.loads(p.stdout)


def sweep_sizes(max_bytes: int, per_octave: int, min_bytes: int = 4 * KIB,
                coarse_above: int | None = None) -> list[int]:
    """Working-set sizes from ``min_bytes`` to ``max_bytes``, ``per_octave`` per octave (2
    per octave above ``coarse_above``, where only memory is left and each size costs most),
    rounded to whole lines."""
    n = int(round(math.log2(max_bytes / min_bytes) * per_octave))
    out = sorted({int(min_bytes * 2 ** (i / per_octave)) // LINE * LINE for i in range(n + 1)})
    if coarse_above is not None:
        step = max(1, per_octave // 2)
        fine = [x for x in out if x <= coarse_above]
        out = fine + [x for i, x in enumerate(out) if x > coarse_above and
                      (i - len(fine) + 1) % step == 0]
    return [x for x in out if x <= max_bytes]


PLANS = {
    # rounds: the whole sweep repeated, spread over the run (at most: a round is not started
    # when the time spent plus the longest round so far would pass budget_s, but never
    # fewer than min_rounds: the self-check judges a point against its spread between
    # rounds, sim/calibrate_check.py round_spread); repeats: the
    # samples of each point within one round; loads: per chase sample. Every latency is
    # the minimum of its samples (see LATENCY_STATISTIC). The largest working set is at
    # least llc_factor x the last level's sysfs size (rounded up to a power of two), so
    # that the chases reach DRAM on a machine with a large last level.
    # loads: the same in both plans, so that a quick and a full run measure a chase the
    # same way (the fastest of 200 000-load samples read an L2-resident chase 8-12 % below
    # the fastest of 1 000 000-load ones on an Intel guest: sim/VALIDATION.md, finding 19)
    "quick": {"max_bytes": 256 * MIB, "per_octave": 2, "rounds": 3, "min_rounds": 3,
              "repeats": 2,
              "loads": 1_000_000, "clock_iters": 2_000_000, "bw_bytes": 256 * MIB,
              "work_calls": 100_000, "budget_s": 40.0, "llc_factor": 2},
    "full": {"max_bytes": 1 * GIB, "per_octave": 4, "coarse_above": 64 * MIB, "rounds": 5,
             "min_rounds": 3,
             "repeats": 3, "loads": 1_000_000, "clock_iters": 10_000_000,
             "bw_bytes": 1 * GIB, "work_calls": 400_000, "budget_s": 240.0, "llc_factor": 4},
}
# A level whose fitted capacity is below this fraction of sysfs's is modelled at the fitted
# size. The ideal hierarchy's min(1, C/S) hit curve is that of random replacement; an LRU-like
# cache under a random cycle loses hits sooner, so the fit reads a real private level as up
# to about a third smaller than it is: a quarter of margin keeps such noise out.
EFFECTIVE_BELOW = 0.75
MLP_CHAINS = [1, 2, 3, 4, 6, 8, 10, 12, 16, 20, 24, 32, 40, 48]
# The smallest working set of the 4 KiB-page chases that fit DRAM and the walk.
TRANSLATION_FROM = 16 * MIB
# c_ref's non-memory kernels timed by `kvsim-calibrate work` (kind, bytes per call): the
# CRC-64 at the sizes the snapshot loader and writer call it with (1-byte types and
# lengths, keys, values: one stream to 512 bytes, two streams at 4 and 16 KiB), its join of
# two streams alone at the second stream's lengths of a 4 and a 16 KiB value at the
# loader's offset (5 past an 8-byte boundary: 2040 and 8184 bytes, 8 and 10 set bits, a
# matrix product each), SipHash at key sizes.
WORK_POINTS = [("crc64", 1), ("crc64", 8), ("crc64", 32), ("crc64", 512), ("crc64", 4096),
               ("crc64", 16384), ("crc64combine", 2040), ("crc64combine", 8184),
               ("siphash", 16), ("siphash", 64)]
WORK_BUF = 16 * KIB  # calibrate.c WORK_BUF
# the bytes of a CRC call, and the joins, that take about as long as one call at this size:
# the longer points make fewer calls per sample (work_calls)
WORK_CALLS_BYTES, WORK_CALLS_JOIN_DIV = 512, 8


def work_calls(calls: int, kind: str, chunk: int) -> int:
    """A plan's ``work_calls`` for one point: as given up to :data:`WORK_CALLS_BYTES` bytes,
    fewer for longer CRC calls and for the joins, so that every sample takes about as long."""
    if kind == "crc64" and chunk > WORK_CALLS_BYTES:
        return max(1, calls * WORK_CALLS_BYTES // chunk)
    if kind == "crc64combine":
        return max(1, calls // WORK_CALLS_JOIN_DIV)
    return calls
# The traces' instruction counts of those kernels: c_ref/crc64.c's ksCrc64Cost constants
# (CRC64_*: per call, per byte before the first aligned word, once if bytes remain after
# them, per 8-byte step of one, two and three streams, per byte after the last word, per
# combine; crc64_cost; fitted to callgrind in results/crc64-cost-callgrind.json);
# c_ref/siphash.c's SIPHASH_* and SIPHASH_NOCASE_* (per call, once if there is a whole word,
# per word, the tail's first byte, per later tail byte; siphash_cost; fitted to callgrind
# likewise). The tests check them against those sources, crc64_cost against ksCrc64Cost
# itself (`kvsim-calibrate crccost`) and siphash_cost against ksSiphashCost and
# ksSiphashNocaseCost (`kvsim-calibrate sipcost`).
CRC64_CALL, CRC64_BYTE_HEAD, CRC64_BODY, CRC64_BYTE, CRC64_BYTES_ENTRY = 24, 12, 11, 8, 3
CRC64_WORD, CRC64_WORDS_ENTRY, CRC64_STEP2, CRC64_STEP3 = 32, 6, 60, 91
CRC64_COMBINE, CRC64_COMBINE_BIT, CRC64_MUL = 30, 5, 235
CRC64_DUAL_CUTOFF, CRC64_TRI_CUTOFF = 1024, 16 * 1024
# the kinds of work of a ksCrc64 call's parts (c_ref/crc64.c ksCrc64CostKinds)
CRC64_WORK_KINDS = ("crc", "crc_streams", "crc_combine")
SIPHASH_CALL, SIPHASH_WORDS_ENTRY, SIPHASH_WORD, SIPHASH_BYTE_FIRST, SIPHASH_BYTE = \
    68, 1, 20, 2, 3
SIPHASH_NOCASE_CALL, SIPHASH_NOCASE_WORDS_ENTRY, SIPHASH_NOCASE_WORD = 82, 1, 118
SIPHASH_NOCASE_BYTE_FIRST, SIPHASH_NOCASE_BYTE = 7, 8
# Working sets up to this many times the last level's sysfs size give the knee fit (where
# the 4 KiB-page chases fix DRAM and the walk, see build_doc).
FIT_SPAN = 4


def measure(plan: dict, log: Callable[[str], None] = lambda m: None,
            clock: Callable[[], float] = time.monotonic) -> dict:
    """Run every microbenchmark per ``plan`` (see :data:`PLANS`); the raw results (every
    sample, and the rounds run and the seconds they took)."""
    sizes = sweep_sizes(plan["max_bytes"], plan["per_octave"],
                        coarse_above=plan.get("coarse_above"))
    top = sizes[-1]
    rep = plan.get("repeats", 1)
    raw: dict = {"sizes": sizes, "repeats": rep, "clock": {"arch": "", "ns_per_op": {}},
                 "chase": {},
                 "chase_top_4k": [], "mlp": {}, "bw_gbs": [], "huge_fraction_top": None,
                 "work": {}}
    raw["cpuid"] = run_bench("cpuid")
    raw["kernel_clock"] = check.kernel_clock()
    raw["hypervisor"] = hypervisor()
    t0 = clock()
    longest = 0.0
    budget = plan.get("budget_s", math.inf)
    for r in range(plan["rounds"]):
        start = clock()
        if r >= plan.get("min_rounds", 1) and start - t0 + longest > budget:
            log(f"time budget ({budget:.0f} s): {r} of {plan['rounds']} rounds")
            break
        raw["rounds_done"] = r + 1
        log(f"round {r + 1}/{plan['rounds']}: clock, non-memory work")
        clk = run_bench("clock", plan["clock_iters"], rep)
        raw["clock"]["arch"] = clk.get("arch", "")
        for chain, ns in (clk.get("ns_per_op") or {}).items():
            raw["clock"]["ns_per_op"].setdefault(chain, []).extend(ns)
        for kind, chunk in WORK_POINTS:
            w = run_bench("work", kind, chunk, work_calls(plan["work_calls"], kind, chunk), rep)
            raw["work"].setdefault(f"{kind}/{chunk}", []).extend(w["ns_per_call"])
        log(f"round {r + 1}/{plan['rounds']}: pointer chase over {len(sizes)} sizes")
        ch = run_bench("chase", "2m", plan["loads"], rep, *sizes)
        for pt in ch["points"]:
            raw["chase"].setdefault(str(pt["size"]), []).extend(pt["ns"])
            if pt["size"] == top:
                raw["huge_fraction_top"] = pt["huge_fraction"]
        mid = translation_sizes(top)
        pts = run_bench("chase", "4k", plan["loads"], rep, *mid)["points"]
        for pt in pts:
            raw.setdefault("chase_4k", {}).setdefault(str(pt["size"]), []).extend(pt["ns"])
        raw["chase_top_4k"] += pts[-1]["ns"]
        log(f"round {r + 1}/{plan['rounds']}: parallel chases, bandwidth")
        m = run_bench("mlp", "2m", top, plan["loads"], rep, *MLP_CHAINS)
        for pt in m["points"]:
            raw["mlp"].setdefault(str(pt["chains"]), []).extend(pt["ns_per_load"])
        raw["bw_gbs"] += run_bench("bw", "2m", plan["bw_bytes"], rep)["gbs"]
        probe = plan.get("l2probe")
        if probe:
            log(f"round {r + 1}/{plan['rounds']}: the L2 prefetch probe")
            p = run_bench("l2probe", "2m", probe["size"], probe["distance"], plan["loads"], rep)
            got = raw.setdefault("l2probe", {
                "size": p["size"], "distance": p["distance"], "page": p["page"],
                "huge_fraction": p["huge_fraction"], "loads": p["loads"], "repeats": rep,
                "cycle_loads": p["cycle_loads"], "ns": {}})
            got["huge_fraction"] = min(got["huge_fraction"], p["huge_fraction"])
            for order, ns in p["ns"].items():
                got["ns"].setdefault(order, []).extend(ns)
        longest = max(longest, clock() - start)
    raw["elapsed_s"] = round(clock() - t0, 2)
    return raw


# --- address translation: DRAM latency and walk cost from 4 KiB-page chases ---------------

def translation_sizes(top: int) -> list[int]:
    """Working sets of the 4 KiB-page chases that fix the DRAM latency and the walk,
    ascending: every power of two from TRANSLATION_FROM (past the caches of the machines
    kvsim models, and where a smaller page table stays better cached) up to the largest
    one; for a small largest set, it and one 16 times smaller."""
    if top < 4 * TRANSLATION_FROM:
        return [max(top // 16, 2 * LINE), top]
    out, x = [], TRANSLATION_FROM
    while x < top:
        out.append(x)
        x *= 2
    return out + [top]


def hypervisor(cpuinfo: Path = Path("/proc/cpuinfo")) -> bool:
    """Whether the kernel runs as a guest (the ``hypervisor`` cpuinfo flag)."""
    try:
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("flags"):
                return "hypervisor" in line.split(":", 1)[1].split()
    except OSError:
        pass
    return False


def fit_translation(cpu, chase_4k: dict[int, float], walk_reads: int,
                    steps: int = 20_000) -> dict:
    """The DRAM latency (ns) and the walk's fixed part (cycles) for which the model's own
    prediction of the 4 KiB-page chases (:mod:`kvsim.sim.micro`'s trace of calibrate.c's
    loop, walks reading ``walk_reads`` page-table lines through the caches) costs what they
    measured (``chase_4k``: working set -> ns per load).

    A chase is one dependent load after another, so its simulated time per load is linear
    in both unknowns: a fraction of loads (and of page-table reads) served by DRAM times the
    DRAM latency, plus the walks per load times the fixed part, plus the cache hits. Three
    simulations per size give the coefficients; the two unknowns are then the least-squares
    solution over all sizes (exact for two), with the fixed part kept >= 0; the result
    keeps each size's prediction with the fitted values and its relative residual. Which
    level serves an access does not depend on latencies (the caches are updated in program
    order), so the coefficients are exact."""
    from dataclasses import replace

    import numpy as np

    from . import api, micro

    tlb = replace(cpu.tlb, page_size=4096, walk_reads=walk_reads)
    sizes = sorted(chase_4k)
    d0, w0, dd, dw = 100.0, 0, 100.0, 1000

    def at(dram_ns: float, walk: int):
        return cpu.with_changes(dram_latency_ns=dram_ns,
                                tlb=replace(tlb, walk_latency=walk))

    rows, ys = [], []
    for size in sizes:
        rec = micro.chase_records(size, 1, steps, mlp_loop=False)
        res = api.simulate_many(rec, [at(d0, w0), at(d0 + dd, w0), at(d0, w0 + dw)],
                                page_size=4096, validate=False)
        p0, pd, pw = (r["cycles"] / cpu.freq_ghz / steps for r in res)
        b_d, b_w = (pd - p0) / dd, (pw - p0) / dw  # per ns of DRAM, per cycle of walk
        rows.append((b_d, b_w))
        ys.append(chase_4k[size] - (p0 - d0 * b_d))
    a = np.array(rows)
    y = np.array(ys)
    (dram, walk), *_ = np.linalg.lstsq(a, y, rcond=None)
    if walk < 0:  # the walks cost no more than their page-table reads
        walk = 0.0
        dram = float(a[:, 0] @ y / (a[:, 0] @ a[:, 0]))
    walk = int(round(walk))
    offset = np.array([chase_4k[x] for x in sizes]) - y  # the cache hits' part
    pred = a @ np.array([dram, walk]) + offset
    meas = np.array([chase_4k[x] for x in sizes])
    return {"dram_latency_ns": float(dram), "walk_latency": walk,
            "walk_reads": walk_reads, "sizes": sizes,
            "measured_ns": [chase_4k[s] for s in sizes],
            "predicted_ns": [round(float(v), 2) for v in pred],
            "residual_rel": [round(float(v), 4) for v in pred / meas - 1.0],
            "coefficients": [[float(u), float(v)] for u, v in rows]}


# --- the CPU file --------------------------------------------------------------------------

def thp_mode(path: Path = Path("/sys/kernel/mm/transparent_hugepage/enabled")) -> str:
    """The kernel's transparent-huge-page mode (always, madvise, never), or "unknown"."""
    try:
        m = re.search(r"\[(\w+)\]", path.read_text())
    except OSError:
        return "unknown"
    return m.group(1) if m else "unknown"


def build_doc(raw: dict, levels: list[dict], ident: dict, *, quick: bool,
              machine: dict | None = None, log: Callable[[str], None] = lambda m: None) -> dict:
    """The CPU file (as a TOML-ready dict in the preset schema) from raw measurements,
    without its ``[selfcheck]`` (:func:`run_self_check` adds it)."""
    table = identity_core(ident)
    tname = table_source(table) if table else None
    sizes = raw["sizes"]
    curve = [fastest(raw["chase"][str(x)]) for x in sizes]
    huge = (raw.get("huge_fraction_top") or 0.0) >= 0.5
    page_used = "2MiB" if huge else "4KiB"
    # the knees are fitted up to FIT_SPAN x the last level's sysfs size: beyond it the
    # curve rises with the working set's address translation (a guest's nested walks reach
    # the host's page table even with 2 MiB guest pages), which fit_translation models
    span = [i for i, x in enumerate(sizes) if x <= FIT_SPAN * levels[-1]["size"]]
    if len(span) < len(levels) + 2 or "chase_4k" not in raw:
        span = list(range(len(sizes)))
    fit = fit_levels([sizes[i] for i in span], [curve[i] for i in span], len(levels))
    est = check.clock_estimate(raw.get("clock") or {})
    if est["ghz"] is not None:
        ghz = est["ghz"]
        freq_src = (f"measured: dependent {est['primary']} chain ({est['primary_latency']} "
                    f"cycles per operation) against thread CPU time, fastest sample; the "
                    f"{est['cross']} chain took {est['cross_cycles']:.2f} cycles per operation "
                    "at this clock ([selfcheck] clock.method)")
    elif raw.get("clock_ghz"):  # a file of the old method: kept, and failed by the check
        ghz = est["untrusted_ghz"] = max(raw["clock_ghz"])
        est["error"] = ("measured by a chain of adds of an immediate, which some cores fold "
                        "(not a clock); re-run `kvsim calibrate`")
        freq_src = "measured: dependent add-immediate chain (untrusted; see [selfcheck])"
    else:
        raise ConfigError(f"calibrate: no clock: {est.get('error')}")
    top_ns = curve[-1]
    top_4k = fastest(raw["chase_top_4k"])
    walk_ns = max(0.0, top_4k - top_ns) if huge else None
    chains = sorted(int(k) for k in raw["mlp"])
    mlp = mlp_ceiling(chains, [fastest(raw["mlp"][str(n)]) for n in chains])
    bw = max(raw["bw_gbs"])
    notes = [
        f"calibrated on this machine by `kvsim calibrate{' --quick' if quick else ''}`; "
        f"pointer chases with {page_used} pages",
        "src codes: measured (microbenchmark, fastest sample of its rounds and repeats), "
        "sysfs, cpuid, "
        f"table (published figures for the core: {table['sources'] if table else 'none'})",
    ]
    doc: dict = {"name": "local",
                 "description": f"this machine ({ident.get('model_name') or 'unknown CPU'}), "
                                "calibrated",
                 "freq_ghz": round(ghz, 3),
                 "src": {"freq_ghz": freq_src}}
    work = sustained_ipc(raw["work"], ghz) if raw.get("work") else None
    if table:
        doc["core"] = {"width": table["width"], "rob": table["rob"],
                       "src": {"width": tname, "rob": tname}}
        calibrate_stores.apply(doc["core"], ident.get("vendor", ""), table)
        if work is not None:
            # measured, not applied: one rate for every gap instruction is refuted by the
            # seed pairs (sim/VALIDATION.md, finding 4); [core] sustained_ipc stays unset
            notes.append(
                f"sustained IPC of c_ref's CRC-64 and SipHash measured at {work['ipc']:.2f} "
                "([meta.raw] work_ipc) and not applied: the model retires every gap "
                "instruction at one rate, and the kernels' rate for all of them is refuted "
                "by the seed pairs (sim/VALIDATION.md); [core] sustained_ipc sets it by hand")
    caches = []
    for i, x in enumerate(levels):
        lat_ns = fit["latency_ns"][i]
        cap = fit["capacity"][i]
        ways, line = x["ways"] or 8, x["line"]
        sets = _pow2_floor(x["size"] // (ways * line))
        size_src = "sysfs"
        if sets * ways * line != x["size"]:
            size_src += f" ({x['size']} B); rounded down to {sets} sets x {ways} ways"
        if cap < EFFECTIVE_BELOW * x["size"]:
            # sysfs's associativity, fewer sets: the nearest power of two to the capacity
            eff_sets = 1 << max(0, round(math.log2(max(1.0, cap / (ways * line)))))
            sets = min(sets, eff_sets)
            size_src = (f"measured: effective capacity {cap / KIB:.0f} KiB against sysfs "
                        f"{x['size'] // KIB} KiB; modelled as {sets} sets x {ways} ways")
        c = {"name": "L1D" if x["level"] == 1 else f"L{x['level']}",
             "size": sets * ways * line, "ways": ways, "line": line,
             "latency": max(1, int(round(lat_ns * ghz)))}
        src = {"size": size_src, "ways": "sysfs", "line": "sysfs",
               "latency": f"measured: {lat_ns:.2f} ns (knee fit, capacity "
                          f"{cap / KIB:.0f} KiB) x clock"}
        if table and i < len(table["inclusion"]):
            c["inclusion"] = table["inclusion"][i]
            if c["inclusion"] == "exclusive" and i != len(levels) - 1:
                c["inclusion"] = "non-inclusive"
            src["inclusion"] = tname
        if i == 0:
            c["mshrs"] = max(1, int(round(mlp)))
            src["mshrs"] = (f"measured: {mlp:.1f} misses overlap (N parallel chases), the "
                            "ceiling the L1 miss buffers set"
                            + (f"; table says {table['l1_mshrs']}" if table else ""))
        elif i == 1 and table:
            c["mshrs"] = max(table["l2_mshrs"], int(round(mlp)))
            src["mshrs"] = tname
        c["src"] = src
        caches.append(c)
    doc["cache"] = caches
    doc["dram"] = {
        "latency_ns": round(top_ns, 1), "bandwidth_gbs": round(bw, 2),
        "src": {"latency_ns": f"measured: pointer chase at {sizes[-1] // MIB} MiB with "
                              f"{page_used} pages",
                "bandwidth_gbs": "measured: one-thread streaming read"},
    }
    mode = thp_mode()
    cpuid_tlb = _tlb_from_cpuid(raw.get("cpuid", {}))
    tlb_geo = cpuid_tlb or (table["tlb"] if table else None)
    if tlb_geo is not None:
        l2w = _pow2_sets_ways(tlb_geo["l2_entries"], tlb_geo["l2_ways"])
        l1w = _pow2_sets_ways(tlb_geo["l1_entries"], tlb_geo["l1_ways"])
        geo_src = "cpuid" if cpuid_tlb else tname
        walk_cycles = int(round((walk_ns if walk_ns is not None else 0.0) * ghz))
        doc["tlb"] = {
            "page_size": "2MiB" if mode == "always" else "4KiB",
            "l1_entries": tlb_geo["l1_entries"], "l1_ways": l1w,
            "l2_entries": tlb_geo["l2_entries"], "l2_ways": l2w,
            "l2_latency": table["tlb"]["l2_latency"] if table else 9,
            "walk_latency": walk_cycles,
            "walkers": table["tlb"]["walkers"] if table else 0,
            "src": {
                "page_size": f"sysfs: transparent huge pages '{mode}' (an arena that does not "
                             "ask for huge pages gets them only with 'always')",
                "l1_entries": geo_src, "l2_entries": geo_src,
                "l1_ways": geo_src + ("" if l1w == tlb_geo["l1_ways"] else
                                      "; ways raised to a power-of-two set count"),
                "l2_ways": geo_src + ("" if l2w == tlb_geo["l2_ways"] else
                                      f" says {tlb_geo['l2_ways']}; raised to a power-of-two "
                                      "set count"),
                "l2_latency": tname or "default (no table entry)",
                "walk_latency": (f"measured: chase at {sizes[-1] // MIB} MiB, 4 KiB pages "
                                 f"({top_4k:.1f} ns) minus 2 MiB pages ({top_ns:.1f} ns)")
                if walk_ns is not None else "no huge pages: walk cost not separable, 0",
                "walkers": (f"{tname}: page walks in flight at once" if table else
                            "no table entry: 0 (unlimited)"),
            },
        }
    l2pf = None
    if table:
        doc["swprefetch"] = {"fill": "L1D", "tlb_miss": "walk", "src": {"fill": tname}}
        doc["prefetcher"] = [dict(p, src={"kind": tname}) for p in table["prefetchers"]]
        l2pf = _l2_prefetchers(doc, raw, fit, tname, log)
    translation = None
    chase_4k = {int(k): fastest(v) for k, v in raw.get("chase_4k", {}).items()}
    if table and "tlb" in doc and len(chase_4k) >= 2:
        # the model's own prediction of the 4 KiB-page chases fixes DRAM and the walk
        guest = raw.get("hypervisor", False)
        reads = 2 if guest else 1
        translation = fit_translation(parse_cpu(doc, "calibrate"), chase_4k, reads)
        # a fit that reads no DRAM (the largest set within the last level) gives nothing
        # positive: kept at 1 ns so the file parses, and failed by [selfcheck] dram.latency
        doc["dram"]["latency_ns"] = max(1.0, round(translation["dram_latency_ns"], 1))
        doc["dram"]["src"]["latency_ns"] = (
            "measured: the DRAM latency for which the model's prediction of pointer chases "
            "with 4 KiB pages at " + ", ".join(f"{x // MIB} MiB" for x in sorted(chase_4k))
            + " (" + ", ".join(f"{chase_4k[x]:.1f}" for x in sorted(chase_4k)) + " ns) "
            "best matches them (least squares, sim.calibrate.fit_translation; each size's "
            "residual in [meta.raw] translation_fit); the 2 MiB-page chase at "
            f"{sizes[-1] // MIB} MiB measured {top_ns:.1f} ns")
        doc["tlb"]["walk_latency"] = translation["walk_latency"]
        doc["tlb"]["walk_reads"] = reads
        doc["tlb"]["src"]["walk_latency"] = (
            "measured: the walk's fixed part fitted with the DRAM latency (see "
            "dram.src.latency_ns)")
        doc["tlb"]["src"]["walk_reads"] = (
            "cpuinfo: 'hypervisor' flag: nested paging, a walk reads the guest's and the "
            "host's leaf page-table entries" if guest else
            "a walk reads the leaf page-table entry (the upper levels stay in the walker's "
            "caches)")
    hierarchy = None
    if translation is not None:
        hierarchy = _fit_hierarchy(doc, raw, levels, sizes, curve, chase_4k, huge, log,
                                   last_level_ns=fit["latency_ns"][len(levels) - 1])
    if not table:
        notes.append("core (ROB, width) unknown: no table entry for vendor "
                     f"{ident.get('vendor')!r} family {ident.get('family')} model "
                     f"{ident.get('model')}; the file is caches-only (no timing)")
    doc["notes"] = notes
    doc["meta"] = {
        "machine_key": machine_key(levels, ident),
        "cpu": ident, "quick": quick, "thp": mode, "chase_pages": page_used,
        "sysfs_levels": levels,
        "fit": hierarchy.pop("fit") if hierarchy else fit,
        "raw": {"knee_fit": fit if hierarchy else None,"sizes": sizes,
                "chase_ns_median": [round(median(raw["chase"][str(x)]), 3) for x in sizes],
                "chase_ns_fastest": [round(v, 3) for v in curve],
                "chase_ns": raw["chase"], "chase_top_4k_ns": raw["chase_top_4k"],
                "huge_fraction_top": raw.get("huge_fraction_top"),
                "chase_4k_ns": raw.get("chase_4k"), "translation_fit": translation,
                "hierarchy_fit": hierarchy,
                "hypervisor": raw.get("hypervisor", False),
                "clock": raw.get("clock"), "clock_estimate": est,
                "kernel_clock": raw.get("kernel_clock"), "mlp_ns_per_load": raw["mlp"],
                "mlp_ceiling": mlp, "bandwidth_gbs": raw["bw_gbs"],
                "work_ns_per_call": raw.get("work", {}), "work_ipc": work,
                "rounds_done": raw.get("rounds_done"), "elapsed_s": raw.get("elapsed_s"),
                "repeats": raw.get("repeats"),
                "cpuid": raw.get("cpuid", {})},
        "provenance": machine or {},
    }
    if raw.get("l2probe"):
        doc["meta"]["raw"]["l2probe"] = raw["l2probe"]
    if l2pf:
        doc["meta"]["l2_prefetch"] = l2pf
    if raw.get("clock_ghz"):
        doc["meta"]["raw"]["clock_ghz"] = raw["clock_ghz"]
    return doc


def _l2_prefetchers(doc: dict, raw: dict, fit: dict, tname: str,
                    log: Callable[[str], None]) -> dict | None:
    """The file's L2 prefetchers as the probe of them decides (sim/calibrate_prefetch.py):
    ``doc["prefetcher"]`` (the table's) changed in place, the top-level ``src.prefetcher``
    naming what was dropped; returns the reading for ``[meta] l2_prefetch`` (None without
    a probe in ``raw``). Raises ConfigError (one line) for a reading that cannot tell."""
    probe = raw.get("l2probe")
    if not probe or len(doc["cache"]) < 2:
        doc["prefetcher"], line = calibrate_prefetch.decide(
            doc["prefetcher"], None, None, tname)
        doc["src"]["prefetcher"] = line
        return None
    try:
        got = calibrate_prefetch.reading(probe, fit["latency_ns"][1])
    except calibrate_prefetch.ProbeError as e:
        raise ConfigError(f"calibrate: {e}") from None
    cpu = parse_cpu(doc, "calibrate")
    size, dist = int(probe["size"]), int(probe["distance"])
    warm = check.steady_warmup(size, check.cache_bytes(cpu))
    _, model = calibrate_prefetch.simulated(cpu, size, dist, calibrate_prefetch.page_of(probe),
                                            check.REPLAY_STEPS, warm)
    doc["prefetcher"], line = calibrate_prefetch.decide(doc["prefetcher"], got, model, tname)
    doc["src"]["prefetcher"] = line
    log("L2 prefetch probe: " + "; ".join(
        f"{k} {v['served']:.2f} of the follows served natively, {model[k]:.2f} by the "
        "model" for k, v in got.items()))
    return {"reading": got, "model_served": {k: round(v, 4) for k, v in model.items()},
            "kept": [p["kind"] for p in doc["prefetcher"] if p["level"] == "L2"]}


def _fit_hierarchy(doc: dict, raw: dict, levels: list[dict], sizes: list[int],
                   curve: list[float], chase_4k: dict[int, float], huge: bool,
                   log: Callable[[str], None], last_level_ns: float | None = None) -> dict:
    """The file fitted to its own simulation of the chases (:mod:`kvsim.sim.calibrate_fit`),
    starting from the knee and translation fits; the sources say so. Returns the fit's
    record for ``[meta.raw] hierarchy_fit``, whose ``fit`` becomes ``[meta] fit`` (the knee
    fit's moves to ``[meta.raw] knee_fit``). ``last_level_ns``: the knee fit's last level,
    which DRAM must exceed (calibrate_check.dram_floor_ns)."""
    from .calibrate_fit import POLICIES, ceiling_per_load, fit_hierarchy, walkers_needed

    page = 2 * MIB if huge else 4096
    points = [(s, page, c) for s, c in zip(sizes, curve, strict=True)]
    points += [(s, 4096, chase_4k[s]) for s in sorted(chase_4k)]
    mlp = {int(k): fastest(v) for k, v in (raw.get("mlp") or {}).items()}
    out = fit_hierarchy(doc, points, guest_huge=huge and bool(raw.get("hypervisor")),
                        sysfs=levels, largest=sizes[-1],
                        mlp=(sizes[-1], page, mlp) if mlp else None,
                        last_level_ns=last_level_ns, log=log)
    ghz = doc["freq_ghz"]
    how = ("measured: fitted with the model's own simulation of every pointer chase "
           "(sim.calibrate_fit; each chase's residual in [meta.raw] hierarchy_fit)")
    for c, x in zip(doc["cache"], levels, strict=True):
        c["src"]["latency"] = f"{how}: {c['latency'] / ghz:.2f} ns"
        if c["size"] != x["size"] or c["ways"] != x["ways"]:
            c["src"]["size"] = c["src"]["ways"] = (
                f"measured: effective capacity {c['size'] // KIB} KiB fitted to the chases "
                f"against sysfs {x['size'] // KIB} KiB ({c['size'] // (c['ways'] * LINE)} sets "
                f"x {c['ways']} ways; a shared level's share of a guest is not in sysfs)")
        if "replacement" in c:
            c["src"]["replacement"] = f"{how}: the best of {', '.join(POLICIES)}"
    doc["dram"]["src"]["latency_ns"] = f"{how}, with the 4 KiB-page chases"
    t = doc.get("tlb")
    if t is not None:
        solved = out["chosen"].get("solved") or {}
        if solved.get("walk"):
            t["src"]["walk_latency"] = f"{how}: the walk's fixed part"
        if t.get("walk_extra_4k"):
            t["src"]["walk_extra_4k"] = (
                f"{how}: what a 4 KiB page's walk adds to the fixed part (the level its "
                "table has beyond a 2 MiB page's), from the 4 KiB-page chases beside the "
                "2 MiB-page ones")
        if solved.get("stlb"):
            t["src"]["l2_latency"] = f"{how}: an STLB hit's cost"
        hp = out["chosen"].get("host_page_size")
        if t.get("host_page_size"):
            without = (f"against {hp['error_without']:.4g}"
                       if isinstance(hp["error_without"], float) else "none valid without")
            t["src"]["host_page_size"] = (
                "measured: the 2 MiB-page chases fit better (least squares, "
                f"{hp['error_with']:.4g} {without}) with the guest's "
                "huge pages on the host's 4 KiB pages: 4 KiB TLB entries, nested walks")
        pl = out["chosen"].get("placement")
        if pl is not None and t.get("placement"):
            errs = {c["placement"]: c["error"] for c in pl["candidates"]}
            t["src"]["placement"] = (
                "measured: the chases fit better (least squares, "
                + ", ".join(f"{q} {e:.4g}" if isinstance(e, float) else f"{q} none valid"
                            for q, e in errs.items())
                + ", each with its levels fitted) with each page in a random frame "
                "(sim/placement.py): the levels past L1 are indexed by the physical address")
        wr = out["chosen"].get("walk_reads")
        if wr is not None and wr["walk_reads"] == 1:
            t["src"]["walk_reads"] = (
                "cpuinfo: 'hypervisor' flag (nested paging), but the chases' least squares "
                f"put the host's page-table read at {wr['host_read_ns']:.3g} ns, not above the "
                "last level's: a walk reads the guest's leaf entry alone, the host's "
                "translations stay in the walker's caches (sim.calibrate_fit, "
                f"error {wr['error_without']:.4g} without the host's read)")
        if t.get("host_read_ns"):
            t["src"]["host_read_ns"] = (
                f"{how}: a read of the host's page-table entries from memory (nested paging)")
        ret = out["chosen"].get("walk_retention")
        kept = t.get("walk_last_level", True)
        if ret is not None and kept is not True:
            whose = "" if kept is False else " of the host's"
            t["src"]["walk_last_level"] = (
                f"measured: the best of {len(ret['candidates'])} retentions of the page-table "
                "lines (sim/MODEL.md §3) by the error of the chases and of the parallel chases "
                f"at {sizes[-1] // MIB} MiB ([meta.raw] hierarchy_fit.chosen.walk_retention) "
                + (f"is none{whose} in the last level: a chain's walks cost as much beside "
                   "others as alone" if not t.get("walk_retention_ns") else
                   f"keeps none{whose} in the last level by its capacity: the last level's in "
                   "time (walk_retention_ns), the private levels' by their capacity"))
        if ret is not None and t.get("walk_retention_ns"):
            t["src"]["walk_retention_ns"] = (
                f"measured: the best of {len(ret['candidates'])} retentions of the page-table "
                "lines (sim/MODEL.md §3) by the error of the chases and of the parallel chases "
                f"at {sizes[-1] // MIB} MiB ([meta.raw] hierarchy_fit.chosen.walk_retention)")
    # the parallel chases at the largest set: a miss holds an L1 miss buffer for its DRAM
    # latency (not its walk), so the buffers in use are DRAM over the fastest time per load;
    # the walks they overlap need walkers for as long as each walk takes
    m = ceiling_per_load({k: fastest(v) for k, v in raw["mlp"].items()})
    dram = doc["dram"]["latency_ns"]
    l1 = doc["cache"][0]
    l1["mshrs"] = max(1, int(round(dram / m)))
    l1["src"]["mshrs"] = (f"measured: DRAM {dram:.1f} ns over {m:.2f} ns per load, the "
                          "parallel chases' fastest (median of the three fastest counts): "
                          "the misses in flight")
    top = out["predicted_ns"][len(sizes) - 1]
    if t is not None and t.get("host_page_size") and t.get("walkers"):
        need = walkers_needed(top - dram, m, t["walkers"])
        if need > t["walkers"]:
            t["walkers"] = need
            t["src"]["walkers"] = (
                f"measured: the walks the parallel chases overlap: each load of the largest "
                f"chase walks for {top - dram:.0f} ns (its {top:.0f} ns simulated less DRAM) "
                f"at {m:.2f} ns per load")
    out["fit"] = {"latency_ns": [c["latency"] / ghz for c in doc["cache"]]
                  + [doc["dram"]["latency_ns"]],
                  "capacity": [float(c["size"]) for c in doc["cache"]],
                  "rms_rel_error": out["rms_rel_error"]}
    return out


def run_self_check(doc: dict, raw: dict, levels: list[dict], *,
                   log: Callable[[str], None] = lambda m: None,
                   against: tuple[dict, str] | None = None) -> dict:
    """The ``[selfcheck]`` table of ``doc`` (:mod:`kvsim.sim.calibrate_check`); ``against``:
    another calibration of this machine (its document and name) to agree with."""
    fit, r = doc["meta"]["fit"], doc["meta"]["raw"]
    work, est = r.get("work_ipc"), r["clock_estimate"]
    checks = check.clock_checks(est, raw.get("kernel_clock") or {})
    checks += check.plausibility(doc, levels, fit, work)
    cpu = parse_cpu(tomllib.loads(to_toml(doc)), "calibrate")
    rows: list[dict] = []
    if cpu.timing_capable:
        rows = check.replay(cpu, raw, log=log)
        checks += check.replay_checks(rows)
    else:
        checks.append({"check": "replay", "ok": False,
                       "detail": "replay: the file has no timing model (core not in the "
                                 "table of known cores), so nothing can be checked"})
    native = None
    if against is not None:
        checks += check.agreement(doc, *against, rows=rows)
        native = check.native_agreement(rows, against[0])
    return check.summarise(checks, rows, against[1] if against else None, native)


# --- TOML output ---------------------------------------------------------------------------

def _key(k: str) -> str:
    return k if re.fullmatch(r"[A-Za-z0-9_-]+", k) else json.dumps(k)


def _val(v: object) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return repr(v) if math.isfinite(v) else '"nan"'
    if isinstance(v, str):
        return json.dumps(v)
    if v is None:
        return '""'
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{_key(str(k))} = {_val(x)}" for k, x in v.items()) + " }"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_val(x) for x in v) + "]"
    raise TypeError(f"cannot write {type(v).__name__} to TOML")


def to_toml(doc: dict) -> str:
    """The document as TOML: scalars and inline tables, [section]s, [[array]]s."""
    out = []
    top = {k: v for k, v in doc.items() if not isinstance(v, dict) and not (
        isinstance(v, list) and v and all(isinstance(x, dict) for x in v))}
    for k, v in top.items():
        out.append(f"{_key(k)} = {_val(v)}")
    for k, v in doc.items():
        if k in top:
            continue
        if isinstance(v, dict) and k != "src":
            out.append(f"\n[{_key(k)}]")
            out += [f"{_key(kk)} = {_val(vv)}" for kk, vv in v.items()]
        elif isinstance(v, list):
            for t in v:
                out.append(f"\n[[{_key(k)}]]")
                out += [f"{_key(kk)} = {_val(vv)}" for kk, vv in t.items()]
    src = doc.get("src")
    if src is not None:  # top-level src must precede the first table
        out.insert(len(top), f"src = {_val(src)}")
    header = ("# This machine's CPU file, written by `kvsim calibrate` (kvsim/sim/calibrate.py).\n"
              "# Every value's provenance is in the `src` table beside it; [meta] holds the raw\n"
              "# measurements. Schema: sim/PRESETS.md.\n")
    return header + "\n".join(out) + "\n"


def raw_from_doc(doc: dict) -> dict:
    """The raw measurements a written CPU file keeps in ``[meta.raw]``, as :func:`measure`
    returns them (to derive the file again without measuring: ``--from-raw``)."""
    try:
        r = doc["meta"]["raw"]
        raw = {"sizes": [int(x) for x in r["sizes"]], "repeats": r.get("repeats"),
               "chase": r["chase_ns"],
               "chase_top_4k": r["chase_top_4k_ns"],
               "huge_fraction_top": r.get("huge_fraction_top"),
               "mlp": r["mlp_ns_per_load"],
               "bw_gbs": r["bandwidth_gbs"], "cpuid": r.get("cpuid", {}),
               "hypervisor": r.get("hypervisor", hypervisor())}
    except (KeyError, TypeError) as e:
        raise ConfigError(f"--from-raw: no raw measurement {e} in its [meta.raw]") from None
    if r.get("clock"):
        raw["clock"] = r["clock"]
    elif r.get("clock_ghz"):  # the old method's samples
        raw["clock_ghz"] = r["clock_ghz"]
    else:
        raise ConfigError("--from-raw: no raw measurement 'clock' in its [meta.raw]")
    if r.get("kernel_clock"):
        raw["kernel_clock"] = r["kernel_clock"]
    if r.get("chase_4k_ns"):
        raw["chase_4k"] = r["chase_4k_ns"]
    if r.get("work_ns_per_call"):
        raw["work"] = r["work_ns_per_call"]
    if r.get("l2probe"):
        raw["l2probe"] = r["l2probe"]
    if calibrate_work.raw_from_meta(r):
        raw["work_kinds"] = calibrate_work.raw_from_meta(r)
    return raw


def calibrate(output: Path | None = None, *, quick: bool = False,
              max_bytes: int | None = None, rounds: int | None = None,
              log: Callable[[str], None] = lambda m: None,
              from_raw: Path | None = None, against: Path | None = None) -> Path:
    """Measure this machine, check the result (:func:`run_self_check`), write its CPU file
    (to ``output``, else the cache path; marked failed when a check failed, and then, without
    ``output``, to :func:`failed_path` beside the cache path, so `local` never reads it) and
    return the path. ``max_bytes``/``rounds`` shrink the plan (tests). ``from_raw``: derive the file
    from the raw measurements of a CPU file written before, measuring nothing.
    ``against``: a calibration of this machine to agree with (default: the one in the cache
    when it is of the other kind, quick or full, and passed its own self-check)."""
    from kvsim import provenance

    from .local import read_sysfs

    levels = read_sysfs()
    ident = cpu_identity()
    plan = dict(PLANS["quick" if quick else "full"])
    # past the last level, whatever its size: the plan's factor times it, a power of two
    reach = 1 << math.ceil(math.log2(plan["llc_factor"] * levels[-1]["size"]))
    plan["max_bytes"] = plan["bw_bytes"] = max(plan["max_bytes"], reach)
    if max_bytes is not None:
        plan["max_bytes"] = plan["bw_bytes"] = max_bytes
    if rounds is not None:
        plan["rounds"] = rounds
        plan["min_rounds"] = min(plan["min_rounds"], rounds)
    size, dist = calibrate_prefetch.probe_size(levels), calibrate_prefetch.probe_distance(levels)
    if size and dist:
        plan["l2probe"] = {"size": size, "distance": dist}
    if len(sweep_sizes(plan["max_bytes"], plan["per_octave"])) < 2 * (len(levels) + 1):
        raise ConfigError(f"calibrate: {plan['max_bytes']} B is too small a largest working "
                          f"set for {len(levels)} cache levels")
    if from_raw is not None:
        try:
            old = tomllib.loads(Path(from_raw).read_text())
        except (OSError, tomllib.TOMLDecodeError) as e:
            raise ConfigError(f"--from-raw {from_raw}: {e}") from None
        raw = raw_from_doc(old)
        quick = bool(old.get("meta", {}).get("quick", quick))
        # the measured machine's geometry and identity, which may not be this one's
        levels = old["meta"].get("sysfs_levels") or levels
        ident = old["meta"].get("cpu") or ident
    else:
        raw = measure(plan, log)
        raw["work_kinds"] = calibrate_work.measure(plan["rounds"], plan["work_calls"], log)
    doc = build_doc(raw, levels, ident, quick=quick, machine=provenance.provenance(), log=log)
    calibrate_work.apply(doc, raw, log)  # [work]: the kinds of work's rates
    # [syscall] (sim/calibrate_syscall.py): measured now, or kept from the file derived again
    # (the loop's kernel time per write, and how it was taken, in [meta] syscall_loop)
    if from_raw is not None and "syscall" in old:
        doc["syscall"] = old["syscall"]
        if old.get("meta", {}).get("syscall_loop"):
            doc["meta"]["syscall_loop"] = old["meta"]["syscall_loop"]
    else:
        sysraw = calibrate_syscall.measure(quick, log, loop_rounds=plan["rounds"], cpu_doc=doc)
        doc["syscall"] = calibrate_syscall.section(sysraw)
        if sysraw.get("loop"):
            doc["meta"]["syscall_loop"] = calibrate_syscall.loop_meta(sysraw)
        # a snapshot load's page faults and file reads (sim/calibrate_kernel.py)
        calibrate_kernel.apply(doc, calibrate_kernel.measure(quick, log), "kvsim calibrate")
    if from_raw is not None:  # derived now; the samples were measured then
        doc["meta"]["measured_provenance"] = old.get("meta", {}).get(
            "measured_provenance") or old.get("meta", {}).get("provenance") or {}
    other = _other_calibration(against, cache_path(levels, ident), quick)
    doc["selfcheck"] = run_self_check(doc, raw, levels, log=log, against=other)
    text = to_toml(doc)
    parse_cpu(tomllib.loads(text), "calibrate")  # never write a file load_cpu refuses
    path = Path(output) if output is not None else cache_path(levels, ident)
    if output is None and doc["selfcheck"]["status"] != "passed":
        # never `local`: kept beside the cache file, which `local` reads, for inspection
        path = failed_path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    tmp.replace(path)
    return path


def failed_path(cached: Path) -> Path:
    """Where a calibration that failed its self-check goes instead of the cache file."""
    return cached.with_name(cached.stem + ".failed.toml")


def _other_calibration(against: Path | None, cached: Path,
                       quick: bool) -> tuple[dict, str] | None:
    """The calibration to agree with (see :func:`calibrate`), as (document, name)."""
    if against is not None:
        try:
            doc = tomllib.loads(Path(against).read_text())
        except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
            raise ConfigError(f"--against {against}: {e}") from None
        if "meta" not in doc or "fit" not in doc.get("meta", {}):
            raise ConfigError(f"--against {against}: not a file `kvsim calibrate` wrote")
        return doc, Path(against).name
    try:
        doc = tomllib.loads(cached.read_text())
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError):
        return None
    sc = doc.get("selfcheck") or {}
    if sc.get("status") != "passed" or bool(doc.get("meta", {}).get("quick")) == quick:
        return None
    return doc, cached.name


def write_cpu_file(prog: str, out: Path, build: Callable[[], dict]) -> int:
    """Write the CPU file ``build()`` makes to ``out`` as TOML, or nothing: a build that
    raises, or a document `load_cpu` would refuse, gives one line on stderr naming ``prog``
    and exit status 2 (the commands that add to an older calibrated file)."""
    import sys

    try:
        text = to_toml(build())
        parse_cpu(tomllib.loads(text), str(out))  # never write a file load_cpu refuses
    except (OSError, ValueError, ConfigError, tomllib.TOMLDecodeError) as e:
        print(f"{prog}: {e}".splitlines()[0], file=sys.stderr)
        return 2
    out.write_text(text)
    return 0
