"""ctypes binding to the compiled engine (``libkvsim_sim.so``); no Python.h anywhere.

The structs below mirror ``sim/_engine/engine.h`` field by field; ``load_library`` checks
``sizeof`` of both structs against the library so a stale build is refused loudly.
Records cross the boundary as whole chunks (``kvsimRun(sim, ptr, n)``): numpy arrays of
``traces.RECORD_DTYPE``, or :class:`Records`, the memory the compiled intake decodes into (so
that ``kvsim simulate`` runs a trace without importing numpy, a large part of its start-up).
"""

from __future__ import annotations

import ctypes as C
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kvsim import artifacts, traces
from kvsim.traces._native import Records, Reuse, records_address  # noqa: F401 -- re-exported

if TYPE_CHECKING:
    import numpy as np

MAX_LEVELS = 8
MAX_PREFETCHERS = 8
NTAGS = 256
NKINDS = 6
MAX_PHASES = 64
NMARKERS = 8
DEP_WINDOW = 1024
MAX_WALK_READS = 4  # engine.h KVSIM_MAX_WALK_READS
MAX_WALKERS = 64  # engine.h KVSIM_MAX_WALKERS
# walk_last_level_lost's values (engine.h KVSIM_WALK_LL_*): the last level keeps every
# page-table line, none, or the guest's (read 0) but not the host's
WALK_LL_ALL, WALK_LL_NONE, WALK_LL_GUEST = 0, 1, 2
MAX_SCHEDULER = 4096  # engine.h KVSIM_MAX_SCHEDULER
MAX_STORE_BUFFER = 1024  # engine.h KVSIM_MAX_STORE_BUFFER
PF_ARRIVAL = 1  # engine.h KVSIM_PF_ARRIVAL: a prefetcher issues when its request arrives
PF_STORES = 2  # engine.h KVSIM_PF_STORES: store pieces train a prefetcher
PF_HITS = 4  # engine.h KVSIM_PF_HITS: a request that hits trains a prefetcher as a miss
NAME_LEN = 16
MAX_WORK_KINDS = 16  # engine.h KVSIM_MAX_WORK_KINDS
MAX_SITES = 1024  # engine.h KVSIM_MAX_SITES
TIMELINE_DROPPED = 0xFFFF  # kvsimTimelineRow.level of a dropped prefetch
TIMELINE_CAPTURED = 1  # kvsimTimelineRow.flags: the row was written


u32, u64 = C.c_uint32, C.c_uint64


class LevelConfig(C.Structure):
    _fields_ = [
        ("sets", u32), ("ways", u32), ("latency", u32), ("inclusion", u32), ("mshrs", u32),
        ("pad", u32), ("seed", u64), ("policy", C.c_char * NAME_LEN),
    ]


class PrefetcherConfig(C.Structure):
    _fields_ = [
        ("level", u32), ("degree", u32), ("table", u32), ("flags", u32),
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
        ("syscall_site", u32 * traces.NUM_SYSCALLS),
        ("syscall_call_ticks", u32 * traces.NUM_SYSCALLS),
        ("syscall_byte_q16", u32 * traces.NUM_SYSCALLS),
        ("guest_page_bits", u32),
        ("per_kind", u32), ("kind_ticks", u32 * MAX_WORK_KINDS),
        ("site_kind", C.c_uint8 * MAX_SITES),
        ("scheduler", u32), ("store_buffer", u32),
        ("host_read_latency", u32), ("walk_retention", u64),
        ("place_bits", u32), ("place_seed", u64),
        ("walk_extra_4k", u32),
        ("full_line_store_fetch", u32), ("kind_store_q16", u32 * MAX_WORK_KINDS),
        ("walk_last_level_lost", u32),
    ]

#: EngineConfig.syscall_site of a call the trace does not name (engine.h KVSIM_NO_SITE)
NO_SITE = 0xFFFFFFFF


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
    "wait_scheduler", "wait_store_buffer", "store_commit_lag", "work_stores",
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
        + [("walk_served", u64 * (MAX_LEVELS + 1)), ("walk_timed", u64 * (MAX_LEVELS + 2))]
        + [(n, u64) for n in COMMAND_SCALARS]
        + [("command_ticks_hist", u64 * 64), ("command_l1_miss_hist", u64 * 64)]
        + [("syscalls", u64 * (traces.NUM_SYSCALLS + 1)),
           ("syscall_bytes", u64 * (traces.NUM_SYSCALLS + 1)), ("syscall_ticks", u64)]
        + [("level", LevelStats * MAX_LEVELS), ("phase", PhaseStats * MAX_PHASES)]
    )


class TimelineRow(C.Structure):
    _fields_ = [("dispatch", u64), ("issue", u64), ("complete", u64), ("retire", u64),
                ("level", u32), ("flags", u32)]


#: the fields of TimelineRow, as the numpy dtype TIMELINE_DTYPE has them (same layout)
TIMELINE_FIELDS = (("dispatch", "<u8"), ("issue", "<u8"), ("complete", "<u8"),
                   ("retire", "<u8"), ("level", "<u4"), ("flags", "<u4"))


def _timeline_dtype() -> np.dtype:
    dtype = globals().get("TIMELINE_DTYPE")
    if dtype is None:
        import numpy as np

        dtype = np.dtype(list(TIMELINE_FIELDS))
        assert dtype.itemsize == C.sizeof(TimelineRow)
        globals()["TIMELINE_DTYPE"] = dtype
    return dtype


def __getattr__(name: str) -> Any:
    """``TIMELINE_DTYPE``, the numpy view of an array of TimelineRow, made at its first use."""
    if name != "TIMELINE_DTYPE":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return _timeline_dtype()


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
    lib.kvsimStatsSize.restype = C.c_size_t
    lib.kvsimConfigSize.restype = C.c_size_t
    lib.kvsimPlacedLine.restype = u64
    lib.kvsimPlacedLine.argtypes = [u64, u32, u32, u64]
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
    """Flatten a Stats struct into plain ints and lists (the 'raw' stats); a level's
    ``access``/``hit``/``miss`` are NTAGS lists of NKINDS counts."""
    out: dict = {}
    for name, _ in Stats._fields_:
        if name in ("level", "phase"):
            continue
        v = getattr(st, name)
        out[name] = v[:] if isinstance(v, C.Array) else int(v)
    levels = []
    for k in range(nlevels):
        ls = st.level[k]
        d = {}
        for name in ("access", "hit", "miss"):
            flat = getattr(ls, name)[:]
            d[name] = [flat[t:t + NKINDS] for t in range(0, NTAGS * NKINDS, NKINDS)]
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

    def run(self, records: Records | np.ndarray) -> None:
        """Simulate the next records: :class:`Records` or a numpy array of the 24-byte
        record dtype (copied first if not contiguous)."""
        if not isinstance(records, Records):
            import numpy as np

            records = np.ascontiguousarray(records)
        addr, n = records_address(records)
        if n:
            self._lib.kvsimRun(self._h, addr, n)

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
        import numpy as np

        rows = np.zeros(count, dtype=_timeline_dtype())
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
