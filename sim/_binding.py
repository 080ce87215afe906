"""ctypes binding to the compiled engine (``libkvsim_sim.so``); no Python.h anywhere.

The structs below mirror ``sim/_engine/engine.h`` field by field; ``load_library`` checks
``sizeof`` of both structs against the library so a stale build is refused loudly.
Records cross the boundary as whole numpy chunks (``kvsimRun(sim, ptr, n)``).
"""

from __future__ import annotations

import ctypes as C
from dataclasses import dataclass

import numpy as np

from kvsim import artifacts, traces

MAX_LEVELS = 8
MAX_PREFETCHERS = 8
NTAGS = 256
NKINDS = 6
MAX_PHASES = 64
NMARKERS = 8
DEP_WINDOW = 1024
MAX_WALK_READS = 4  # engine.h KVSIM_MAX_WALK_READS
MAX_WALKERS = 64  # engine.h KVSIM_MAX_WALKERS
NAME_LEN = 16
TIMELINE_DROPPED = 0xFFFF  # kvsimTimelineRow.level of a dropped prefetch
TIMELINE_CAPTURED = 1  # kvsimTimelineRow.flags: the row was written
REUSE_BUCKETS = 65  # KVSIM_REUSE_BUCKETS


u32, u64 = C.c_uint32, C.c_uint64


class LevelConfig(C.Structure):
    _fields_ = [
        ("sets", u32), ("ways", u32), ("latency", u32), ("inclusion", u32), ("mshrs", u32),
        ("pad", u32), ("seed", u64), ("policy", C.c_char * NAME_LEN),
    ]


class PrefetcherConfig(C.Structure):
    _fields_ = [
        ("level", u32), ("degree", u32), ("table", u32), ("pad", u32),
        ("kind", C.c_char * NAME_LEN),
    ]


class EngineConfig(C.Structure):
    _fields_ = [
        ("nlevels", u32), ("line_bits", u32), ("level", LevelConfig * MAX_LEVELS),
        ("nprefetchers", u32), ("swpf_trains", u32),
        ("prefetcher", PrefetcherConfig * MAX_PREFETCHERS),
        ("timing", u32), ("width", u32), ("rob", u32), ("dram_latency", u32),
        ("dram_xfer_ticks", u32), ("tlb", u32), ("page_bits", u32),
        ("dtlb_sets", u32), ("dtlb_ways", u32), ("stlb_sets", u32), ("stlb_ways", u32),
        ("stlb_latency", u32), ("walk_latency", u32), ("swpf_level", u32),
        ("swpf_drop_on_tlb_miss", u32), ("flush_at_end", u32), ("queue_cap", u32),
        ("threads", u32), ("walk_reads", u32), ("instr_ticks", u32), ("walkers", u32),
    ]


LEVEL_SCALARS = [
    "fetches", "writebacks", "writebacks_flush", "evictions", "back_invalidations",
]
LEVEL_PF = [
    "pf_issued", "pf_redundant", "pf_useful", "pf_late", "pf_useless", "pf_unused_end",
    "pf_dropped",
]


class LevelStats(C.Structure):
    _fields_ = (
        [(n, u64 * (NTAGS * NKINDS)) for n in ("access", "hit", "miss")]
        + [(n, u64) for n in LEVEL_SCALARS]
        + [(n, u64 * 2) for n in LEVEL_PF]
    )


class PhaseStats(C.Structure):
    _fields_ = [
        ("records", u64), ("instructions", u64), ("ticks", u64),
        ("access", u64 * MAX_LEVELS), ("miss", u64 * MAX_LEVELS),
    ]


GLOBAL_SCALARS = [
    "records", "warmup_records", "instructions",
]
GLOBAL_SCALARS2 = [
    "pieces", "multiline",
]
GLOBAL_SCALARS3 = [
    "dram_reads", "dram_writes", "dtlb_access", "dtlb_miss", "stlb_access", "stlb_miss",
    "swpf_dropped_tlb", "ticks",
]
TIMING_SCALARS = [
    "wait_dep", "wait_mshr", "wait_tlb", "wait_walker", "wait_dram_bw", "wait_inflight",
    "miss_ticks", "l1_misses_timed", "load_latency", "loads_timed", "nphases_seen",
]
COMMAND_SCALARS = ["commands", "command_ticks", "command_ticks_max", "command_l1_misses"]


class Stats(C.Structure):
    _fields_ = (
        [(n, u64) for n in GLOBAL_SCALARS]
        + [("kind", u64 * traces.NUM_KINDS)]
        + [(n, u64) for n in GLOBAL_SCALARS2]
        + [("markers", u64 * NMARKERS)]
        + [(n, u64) for n in GLOBAL_SCALARS3]
        + [("stall_rob", u64 * (MAX_LEVELS + 2))]
        + [(n, u64) for n in TIMING_SCALARS]
        + [(n, u64) for n in COMMAND_SCALARS]
        + [("command_ticks_hist", u64 * 64), ("command_l1_miss_hist", u64 * 64)]
        + [("level", LevelStats * MAX_LEVELS), ("phase", PhaseStats * MAX_PHASES)]
    )


class TimelineRow(C.Structure):
    _fields_ = [("dispatch", u64), ("issue", u64), ("complete", u64), ("retire", u64),
                ("level", u32), ("flags", u32)]


#: numpy view of an array of TimelineRow (same layout)
TIMELINE_DTYPE = np.dtype([("dispatch", "<u8"), ("issue", "<u8"), ("complete", "<u8"),
                           ("retire", "<u8"), ("level", "<u4"), ("flags", "<u4")])

_LIB = None


class EngineMissing(artifacts.ArtifactMissing):
    """The compiled engine library was not found."""


def load_library() -> C.CDLL:
    """Load ``libkvsim_sim.so`` where :mod:`kvsim.artifacts` finds it."""
    global _LIB
    if _LIB is not None:
        return _LIB
    try:
        p = artifacts.path(artifacts.ENGINE_LIB)
        lib = C.CDLL(str(p))
    except artifacts.ArtifactMissing as e:
        raise EngineMissing(f"kvsim engine library: {e}") from None
    lib.kvsimCreate.restype = C.c_void_p
    lib.kvsimCreate.argtypes = [C.POINTER(EngineConfig), C.c_char_p, C.c_size_t]
    lib.kvsimRun.restype = None
    lib.kvsimRun.argtypes = [C.c_void_p, C.c_void_p, C.c_size_t]
    lib.kvsimFinish.restype = None
    lib.kvsimFinish.argtypes = [C.c_void_p]
    lib.kvsimGetStats.restype = C.POINTER(Stats)
    lib.kvsimGetStats.argtypes = [C.c_void_p]
    lib.kvsimFree.restype = None
    lib.kvsimFree.argtypes = [C.c_void_p]
    lib.kvsimPeekSet.restype = u32
    lib.kvsimPeekSet.argtypes = [C.c_void_p, u32, u64, C.POINTER(u64)]
    lib.kvsimThreads.restype = u32
    lib.kvsimThreads.argtypes = [C.c_void_p]
    lib.kvsimSetTimeline.restype = C.c_int
    lib.kvsimSetTimeline.argtypes = [C.c_void_p, u64, u64, C.c_void_p]
    lib.kvsimReuseCreate.restype = C.c_void_p
    lib.kvsimReuseCreate.argtypes = []
    lib.kvsimReuseAdd.restype = C.c_int
    lib.kvsimReuseAdd.argtypes = [C.c_void_p, C.c_void_p, C.c_void_p, C.c_size_t, C.c_void_p,
                                  C.c_void_p, C.c_void_p]
    lib.kvsimReuseDistinct.restype = u64
    lib.kvsimReuseDistinct.argtypes = [C.c_void_p]
    lib.kvsimReuseFree.restype = None
    lib.kvsimReuseFree.argtypes = [C.c_void_p]
    lib.kvsimStatsSize.restype = C.c_size_t
    lib.kvsimConfigSize.restype = C.c_size_t
    for fn, res in (("kvsimPolicyCount", u32), ("kvsimPolicyName", C.c_char_p),
                    ("kvsimPolicyPow2Ways", C.c_int), ("kvsimPolicyMaxWays", u32),
                    ("kvsimPrefetcherCount", u32), ("kvsimPrefetcherName", C.c_char_p),
                    ("kvsimAccessKindCount", u32), ("kvsimAccessKindName", C.c_char_p),
                    ("kvsimInclusionCount", u32), ("kvsimInclusionName", C.c_char_p)):
        getattr(lib, fn).restype = res
        getattr(lib, fn).argtypes = [] if fn.endswith("Count") else [u32]
    if (lib.kvsimStatsSize() != C.sizeof(Stats) or lib.kvsimConfigSize() != C.sizeof(EngineConfig)
            or lib.kvsimAccessKindCount() != NKINDS):
        raise EngineMissing(
            f"{p}: struct sizes differ from sim/_binding.py (stale build?): rebuild with "
            "`make -C sim/_engine`"
        )
    _LIB = lib
    return lib


# --- registries (sim/_engine/policy_factory.c, prefetch_factory.c) ---------------------------

@dataclass(frozen=True)
class PolicyInfo:
    """One replacement policy of the engine's registry and its constraint on ``ways``."""

    name: str
    pow2_ways: bool  # ways must be a power of two
    max_ways: int  # largest supported way count; 0 = no limit


_POLICIES: tuple[PolicyInfo, ...] | None = None
_NAMES: dict[str, tuple[str, ...]] = {}


def _names(what: str) -> tuple[str, ...]:
    """Names 0..count-1 of one engine registry (``kvsim<what>Count``/``Name``), cached."""
    if what not in _NAMES:
        lib = load_library()
        count, name = getattr(lib, f"kvsim{what}Count"), getattr(lib, f"kvsim{what}Name")
        _NAMES[what] = tuple(name(i).decode() for i in range(count()))
    return _NAMES[what]


def policies() -> tuple[PolicyInfo, ...]:
    """The engine's replacement policies in registry order; the first is the default."""
    global _POLICIES
    if _POLICIES is None:
        lib = load_library()
        _POLICIES = tuple(
            PolicyInfo(lib.kvsimPolicyName(i).decode(), bool(lib.kvsimPolicyPow2Ways(i)),
                       int(lib.kvsimPolicyMaxWays(i)))
            for i in range(lib.kvsimPolicyCount())
        )
    return _POLICIES


def policy_names() -> tuple[str, ...]:
    """Names of the engine's replacement policies; ``policy_names()[0]`` is the default."""
    return tuple(p.name for p in policies())


def prefetcher_names() -> tuple[str, ...]:
    """Kinds of the engine's hardware prefetchers, in registry order."""
    return _names("Prefetcher")


def access_kind_names() -> tuple[str, ...]:
    """Names of the per-level access kinds (enum kvsimKind), by value: the kind axis of the
    ``access``/``hit``/``miss`` arrays and the keys of the result's ``by_kind``."""
    return _names("AccessKind")


def inclusion_names() -> tuple[str, ...]:
    """Names of the inclusion values (enum kvsimInclusion), by value."""
    return _names("Inclusion")


def stats_to_dict(st: Stats, nlevels: int) -> dict:
    """Flatten a Stats struct into plain ints and numpy arrays (the 'raw' stats)."""
    out: dict = {}
    for name, _ in Stats._fields_:
        if name in ("level", "phase"):
            continue
        v = getattr(st, name)
        out[name] = np.array(v[:], dtype=np.uint64) if isinstance(v, C.Array) else int(v)
    levels = []
    for k in range(nlevels):
        ls = st.level[k]
        d = {}
        for name in ("access", "hit", "miss"):
            d[name] = np.ctypeslib.as_array(getattr(ls, name)).reshape(NTAGS, NKINDS).copy()
        for name in LEVEL_SCALARS:
            d[name] = int(getattr(ls, name))
        for name in LEVEL_PF:
            d[name] = [int(x) for x in getattr(ls, name)]
        levels.append(d)
    out["level"] = levels
    phases = []
    for p in range(MAX_PHASES):
        ph = st.phase[p]
        phases.append(
            {
                "records": int(ph.records), "instructions": int(ph.instructions),
                "ticks": int(ph.ticks), "access": [int(x) for x in ph.access[:nlevels]],
                "miss": [int(x) for x in ph.miss[:nlevels]],
            }
        )
    out["phase"] = phases
    return out


class Engine:
    """One engine instance: ``run(chunk)`` any number of times, then ``finish()``."""

    def __init__(self, cfg: EngineConfig):
        self._lib = load_library()
        err = C.create_string_buffer(256)
        self._cfg = cfg
        self._h = self._lib.kvsimCreate(C.byref(cfg), err, 256)
        if not self._h:
            raise ValueError(err.value.decode())

    def run(self, records: np.ndarray) -> None:
        arr = np.ascontiguousarray(records)
        if arr.dtype.itemsize != 24:
            raise TypeError("records must have the 24-byte trace record dtype")
        if len(arr):
            self._lib.kvsimRun(self._h, arr.ctypes.data, len(arr))

    @property
    def threads(self) -> int:
        """Threads the engine actually runs on: up to cfg.threads in its common
        configuration, 2 once the TLB thread (a TLB elsewhere and cfg.threads > 1) has taken
        a slice of records (_engine/tlb.c engTlbRun), else 1."""
        return int(self._lib.kvsimThreads(self._h))

    def finish(self) -> dict:
        self._lib.kvsimFinish(self._h)
        st = self._lib.kvsimGetStats(self._h).contents
        return stats_to_dict(st, self._cfg.nlevels)

    def set_timeline(self, first: int, count: int) -> np.ndarray:
        """Capture the times of records first .. first+count-1 (engine.h kvsimSetTimeline)
        into the returned TIMELINE_DTYPE array (filled as the records run); before any
        ``run``."""
        rows = np.zeros(count, dtype=TIMELINE_DTYPE)
        if self._lib.kvsimSetTimeline(self._h, first, count, rows.ctypes.data) != 0:
            raise ValueError("a timeline needs a timing configuration, set before any record")
        self._timeline = rows  # the engine writes into it: keep it alive
        return rows

    def peek_set(self, level: int, set_index: int) -> list[int | None]:
        """Lines held by one set, way by way (None = invalid way); for tests."""
        buf = (u64 * 4096)()
        n = self._lib.kvsimPeekSet(self._h, level, set_index, buf)
        return [x - 1 if x else None for x in buf[:n]]

    def close(self) -> None:
        if self._h:
            self._lib.kvsimFree(self._h)
            self._h = None

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


class Reuse:
    """Streaming LRU stack distances (sim/_engine/reuse.c): ``add(lines, cls)`` per chunk."""

    def __init__(self) -> None:
        self._lib = load_library()
        self._h = self._lib.kvsimReuseCreate()
        if not self._h:
            raise MemoryError("reuse distances: out of memory")

    def add(self, lines: np.ndarray, cls: np.ndarray | None = None,
            dist: np.ndarray | None = None, hist: np.ndarray | None = None,
            cold: np.ndarray | None = None) -> None:
        """Feed ``lines`` (uint64 line ids, in access order) and optional ``cls`` (uint8 per
        access). Adds to ``dist`` (int64 per access), ``hist`` (uint64, classes x
        REUSE_BUCKETS, C order) and ``cold`` (uint64 per class) when given."""
        lines = np.ascontiguousarray(lines, dtype=np.uint64)
        n = lines.size
        arrays = {"cls": (cls, np.uint8, n), "dist": (dist, np.int64, n)}
        for name, (a, dt, size) in arrays.items():
            if a is not None and (a.dtype != dt or a.size != size or not a.flags.c_contiguous):
                raise ValueError(f"reuse: {name} must be a contiguous {np.dtype(dt)} array "
                                 f"of {size}")
        rows = 256 if cls is not None else 1
        for name, a, size in (("hist", hist, rows * REUSE_BUCKETS), ("cold", cold, rows)):
            if a is not None and (a.dtype != np.uint64 or a.size != size
                                  or not a.flags.c_contiguous):
                raise ValueError(f"reuse: {name} must be a contiguous uint64 array of {size}")

        def ptr(a: np.ndarray | None):
            return None if a is None else a.ctypes.data

        if self._lib.kvsimReuseAdd(self._h, ptr(lines), ptr(cls), n, ptr(dist), ptr(hist),
                                   ptr(cold)) != 0:
            raise MemoryError("reuse distances: out of memory")

    @property
    def distinct(self) -> int:
        """Distinct lines seen so far."""
        return int(self._lib.kvsimReuseDistinct(self._h))

    def close(self) -> None:
        if self._h:
            self._lib.kvsimReuseFree(self._h)
            self._h = None

    def __enter__(self) -> Reuse:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass
