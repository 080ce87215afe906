"""CPU models: TOML presets, validation, the run-time `local` preset, engine configs.

A CPU file (schema in ``sim/PRESETS.md``) is parsed into a :class:`CpuConfig`. Every problem
raises :class:`ConfigError` with one line naming the key and the reason. Validation happens
here, before anything reaches the C engine.
"""

from __future__ import annotations

import math
import re
import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from kvsim.traces import format as _format

from . import _binding as B
from . import gap_model
from .placement import PLACEMENTS

PRESET_DIR = Path(__file__).resolve().parent / "presets"
_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMG]i?B|B)?\s*$", re.IGNORECASE)
_UNITS = {"b": 1, "kib": 1024, "kb": 1024, "mib": 1024**2, "mb": 1024**2, "gib": 1024**3,
          "gb": 1024**3}


#: Ticks of one instruction when the core sustains fewer instructions per cycle than its
#: width (CpuConfig.timing_ticks): the sustained IPC is modelled to 1/IPC_TICKS.
IPC_TICKS = 16

#: Ticks of one cycle when the CPU file gives rates per kind of work ([work]): an
#: instruction of a kind sustained at r per cycle takes round(WORK_TICKS / r) ticks
#: (CpuConfig.work_ticks); 240 is divisible by every whole rate up to 6 and by 8.
WORK_TICKS = 240

#: The kinds of non-memory work ([work] keys; the traces' enum kvtWork).
WORK_KINDS: tuple[str, ...] = tuple(_format.WORK_NAMES)
#: kinds of work a ``[work]`` without them charges at another kind's rate: the CRC-64's
#: streams loop and joins were crc's instructions in the counts before they had kinds of
#: their own (traces/FORMAT.md, version 6), so a file fitted then predicts as it did
WORK_FALLBACK: dict[str, str] = {"crc_streams": "crc", "crc_combine": "crc"}


class ConfigError(ValueError):
    """An invalid CPU configuration; the message is one line naming the key and the reason."""


@dataclass(frozen=True)
class CacheLevel:
    name: str
    size: int  # bytes
    ways: int
    line: int  # bytes
    latency: int  # load-to-use cycles when served here
    # the engine's default policy (the first of its registry) unless named
    replacement: str = field(default_factory=lambda: B.policy_names()[0])
    inclusion: str = "non-inclusive"
    mshrs: int = 0  # 0 = not modelled (unlimited)
    seed: int = 1

    @property
    def sets(self) -> int:
        return self.size // (self.ways * self.line)


@dataclass(frozen=True)
class Tlb:
    page_size: int = 4096
    l1_entries: int = 64
    l1_ways: int = 4  # 0 = fully associative
    l2_entries: int = 1536  # 0 = no STLB
    l2_ways: int = 12
    l2_latency: int = 9  # cycles added when the L1 DTLB misses and the STLB hits
    walk_latency: int = 30  # cycles added by a page walk: its fixed part
    # cycles a walk of a 4 KiB page (the guest's, under nested paging) adds to walk_latency:
    # the level its table has beyond a 2 MiB page's (engine.h walk_extra_4k; 0 = none)
    walk_extra_4k: int = 0
    # page-table lines a walk reads through the caches (each adds the latency of the level
    # that served it): 0 = the fixed part alone; 1 = the leaf PTE; 2 = nested paging (the
    # guest's leaf PTE and the host's)
    walk_reads: int = 0
    # page walks in flight at once: a walk holds a walker from its start to its end, and a
    # TLB miss that finds none free waits for the earliest to free (0 = unlimited)
    walkers: int = 0
    # nested paging whose host backs the guest's pages with smaller ones (bytes; 0 = none,
    # the TLB's entries are of page_size): with a larger page_size (a guest's 2 MiB pages on
    # 4 KiB host pages), the TLBs hold translations of the host's page, and a walk's first
    # read (the guest's leaf entry) is of the guest's page, its second (the host's) of the
    # host's (engine.h guest_page_bits)
    host_page_size: int = 0
    # page-table lines under other tenants' traffic (timing; sim/MODEL.md §3), in ns (0 =
    # none): a walk's page-table read whose line no walk has read for longer is timed as a
    # read from memory whatever the caches hold; and the latency of a read of the host's
    # entries from memory (reads 1.. under nested paging; 0 = the DRAM latency)
    walk_retention_ns: float = 0.0
    host_read_ns: float = 0.0
    # whether the last level keeps page-table lines (timing; sim/MODEL.md §3): False, a
    # walk's page-table read timed at the last level is timed as a read from memory;
    # "guest", only the host's reads are (nested paging; engine.h walk_last_level_lost)
    walk_last_level: bool | str = True
    # physical page placement (sim/placement.py): "virtual", the trace's address indexes the
    # caches; "random", each page of the translation's smallest size (the host's under
    # nested paging) sits in a frame of its own drawn by placement_seed (engine.h place_bits)
    placement: str = "virtual"
    placement_seed: int = 1


@dataclass(frozen=True)
class Prefetcher:
    level: int  # cache index
    kind: str
    degree: int = 1
    table: int = 16
    # below L1 only (sim/MODEL.md §4): its candidates issue when the request that trains it
    # reaches its level (the request's miss start), not at the request's issue
    arrival: bool = False
    # below L1 only: store pieces (their read-for-ownership) train it as load pieces do
    stores: bool = False
    # below L1 only: a request that hits its level trains it as a miss would
    hits: bool = False


@dataclass(frozen=True)
class Syscall:
    """The cost of a system call in nanoseconds: a fixed part per call and a part per byte it
    moves (``[syscall]`` of a CPU file; sim/PRESETS.md). The calls are traces' SYSCALL markers
    (traces/FORMAT.md): read, write, epoll_wait, file_read and page_fault, in the order of
    ``traces.SYSCALL_NAMES``. The default, all zero, charges nothing: a CPU file without the
    section (or without a call's keys) keeps its predictions."""

    call_ns: tuple[float, ...] = (0.0,) * len(_format.SYSCALL_NAMES)  # per call, by SYSCALL_NAMES
    byte_ns: tuple[float, ...] = (0.0,) * len(_format.SYSCALL_NAMES)  # per byte moved


#: [syscall] keys: "<call>_ns" (per call) and "<call>_byte_ns" (per byte), by call
SYSCALL_KEYS = tuple(k for c in _format.SYSCALL_NAMES for k in (f"{c}_ns", f"{c}_byte_ns"))


@dataclass(frozen=True)
class CpuConfig:
    """A CPU model. ``timing_capable`` is False for a caches-only (functional) file."""

    name: str
    caches: tuple[CacheLevel, ...]
    description: str = ""
    freq_ghz: float | None = None
    width: int | None = None
    rob: int | None = None
    # instructions per cycle the core sustains on the trace's work when no miss holds it up
    # (the instruction gaps of dependent non-memory work); None = width
    sustained_ipc: float | None = None
    # scheduler entries: a record waiting for its producer holds its gap's instructions in
    # them until it issues, and dispatch waits while they are full (sim/MODEL.md §6); None
    # = no limit (the ROB alone bounds the window)
    scheduler: int | None = None
    # store-buffer entries: a store holds one from dispatch until it commits, in program
    # order, once retired and its line has arrived (its read-for-ownership, timed as a
    # load's); stores dispatch only while one is free (sim/MODEL.md §6); None = not modelled
    store_buffer: int | None = None
    # a store covering a whole line fetches it (read for ownership; sim/MODEL.md §2);
    # False (absent): it allocates the line without a fetch, as DineroIV
    full_line_store_fetch: bool = False
    # instructions per cycle by kind of work ([work]: (kind, rate) pairs; a kind not given
    # runs at the generic rate, generic not given at sustained_ipc); () = one rate for all
    work: tuple[tuple[str, float], ...] = ()
    # the c_ref gap model [work]'s rates were fitted to ([work] gap_model; sim/gap_model.py):
    # a timing run refuses a c_ref trace of another; None = not fitted (a preset), no check
    work_gap_model: str | None = None
    dram_latency_ns: float | None = None
    dram_bandwidth_gbs: float | None = None  # per core; None = no bandwidth limit
    tlb: Tlb | None = None
    swpf_fill: int = 0
    swpf_drop_on_tlb_miss: bool = False
    # a software prefetch that misses its fill level trains the hardware prefetchers below it
    swpf_trains: bool = False
    prefetchers: tuple[Prefetcher, ...] = ()
    syscall: Syscall = field(default_factory=Syscall)
    source: str = ""
    notes: tuple[str, ...] = ()
    provenance: dict = field(default_factory=dict, compare=False)

    @property
    def timing_capable(self) -> bool:
        return None not in (self.freq_ghz, self.width, self.rob, self.dram_latency_ns)

    @property
    def dram_latency_cycles(self) -> int:
        return int(round(self.dram_latency_ns * self.freq_ghz))

    def timing_ticks(self) -> tuple[int, int]:
        """(ticks per cycle, ticks per instruction) for the engine: (width, 1) when the core
        sustains its width, else an instruction is IPC_TICKS ticks and a cycle the nearest
        whole number of ticks to sustained_ipc of them."""
        if self.work:
            return WORK_TICKS, self.work_ticks()["generic"]
        ipc = self.sustained_ipc
        if ipc is None or ipc == self.width:
            return self.width, 1
        return max(1, round(ipc * IPC_TICKS)), IPC_TICKS

    def work_ipc(self) -> dict[str, float]:
        """Instructions per cycle by kind of work (every kind of WORK_KINDS)."""
        given = dict(self.work)
        base = given.get("generic", self.sustained_ipc or self.width)
        return {k: given.get(k, given.get(WORK_FALLBACK.get(k, ""), base)) for k in WORK_KINDS}

    def work_ticks(self) -> dict[str, int]:
        """Ticks per instruction by kind of work at WORK_TICKS ticks per cycle ([work])."""
        return {k: max(1, round(WORK_TICKS / r)) for k, r in self.work_ipc().items()}

    def apply_work(self, ec: B.EngineConfig, header: dict | None) -> None:
        """Set the engine's kinds of work for a trace with this header: its "work_kinds"
        name the kinds of its WORK markers and "site_kinds" each site's kind (a trace without
        them: every site generic, and no markers). No [work] or no timing: one rate. With a
        store buffer, also the work's stores per instruction of each kind, the header's
        "work_stores" (traces/FORMAT.md; absent: none, as before the key existed)."""
        if not ec.timing:
            return
        h = header or {}
        refused = gap_model.mismatch(self.work_gap_model if self.work else None, h,
                                     self.source or self.name)
        if refused is not None:
            raise ConfigError(refused)
        names = h.get("work_kinds") or list(WORK_KINDS)
        stores = work_store_q16(h) if self.store_buffer else []
        if not self.work and not any(stores):
            return
        for i, q in enumerate(stores[:B.MAX_WORK_KINDS]):
            ec.kind_store_q16[i] = q
        if self.work:
            ticks = self.work_ticks()
            ec.per_kind = 1
            for i, name in enumerate(names[:B.MAX_WORK_KINDS]):
                ec.kind_ticks[i] = ticks.get(name, ticks["generic"])
        kinds = h.get("site_kinds") or []
        for i, k in enumerate(kinds[:B.MAX_SITES]):
            ec.site_kind[i] = k if isinstance(k, int) and 0 <= k < B.MAX_WORK_KINDS else 0

    def with_changes(self, **kw: Any) -> CpuConfig:
        return replace(self, **kw)

    def summary(self) -> str:
        parts = []
        for c in self.caches:
            parts.append(f"{c.name} {fmt_size(c.size)}/{c.ways}w/{c.latency}c")
        if self.dram_latency_ns is not None:
            parts.append(f"DRAM {self.dram_latency_ns:g}ns")
        return ", ".join(parts)

    def to_engine(self, *, timing: bool, tlb: bool = True, prefetchers: bool = True,
                  flush: bool = True, page_size: int | None = None) -> B.EngineConfig:
        """The C struct for this CPU (see sim/_engine/engine.h)."""
        ec = B.EngineConfig()
        ec.nlevels = len(self.caches)
        ec.line_bits = self.caches[0].line.bit_length() - 1
        ec.full_line_store_fetch = int(self.full_line_store_fetch)
        for k, c in enumerate(self.caches):
            lc = ec.level[k]
            lc.sets, lc.ways, lc.latency = c.sets, c.ways, c.latency
            lc.inclusion = B.inclusion_names().index(c.inclusion)
            lc.mshrs = c.mshrs
            lc.seed = c.seed
            lc.policy = c.replacement.encode()
        pfs = self.prefetchers if prefetchers else ()
        ec.nprefetchers = len(pfs)
        for i, p in enumerate(pfs):
            ec.prefetcher[i].level, ec.prefetcher[i].degree = p.level, p.degree
            ec.prefetcher[i].table = p.table
            ec.prefetcher[i].flags = ((B.PF_ARRIVAL if p.arrival else 0)
                                      | (B.PF_STORES if p.stores else 0)
                                      | (B.PF_HITS if p.hits else 0))
            ec.prefetcher[i].kind = p.kind.encode()
        if timing:
            if not self.timing_capable:
                raise ConfigError(
                    f"{self.name}: timing needs freq_ghz, [core] width/rob and [dram] latency_ns "
                    "(use functional mode)"
                )
            ec.timing = 1
            (ec.width, ec.instr_ticks), ec.rob = self.timing_ticks(), self.rob
            ec.scheduler = self.scheduler or 0
            ec.store_buffer = self.store_buffer or 0
            ec.dram_latency = self.dram_latency_cycles
            if self.dram_bandwidth_gbs:
                bytes_per_cycle = self.dram_bandwidth_gbs / self.freq_ghz
                ec.dram_xfer_ticks = max(1, round(self.caches[0].line / bytes_per_cycle
                                                  * ec.width))
        t = self.tlb
        if tlb and t is not None:
            ps = page_size or t.page_size
            ec.tlb = 1
            ec.page_bits = ps.bit_length() - 1
            l1w = t.l1_ways or t.l1_entries
            ec.dtlb_sets, ec.dtlb_ways = t.l1_entries // l1w, l1w
            if t.l2_entries:
                l2w = t.l2_ways or t.l2_entries
                ec.stlb_sets, ec.stlb_ways = t.l2_entries // l2w, l2w
            ec.stlb_latency, ec.walk_latency = t.l2_latency, t.walk_latency
            ec.walk_extra_4k = t.walk_extra_4k
            ec.walk_reads = t.walk_reads
            ec.walkers = t.walkers
            if timing:  # ns -> cycles (timing only, MODEL.md §3)
                ec.walk_retention = round(t.walk_retention_ns * self.freq_ghz)
                ec.host_read_latency = round(t.host_read_ns * self.freq_ghz)
                ec.walk_last_level_lost = WALK_LAST_LEVEL[t.walk_last_level]
            if t.host_page_size and t.host_page_size < ps:
                ec.guest_page_bits = ec.page_bits
                ec.page_bits = t.host_page_size.bit_length() - 1
        if t is not None and t.placement == "random":  # frames of the smallest page
            ps = min(x for x in (page_size or t.page_size, t.host_page_size) if x)
            ec.place_bits, ec.place_seed = ps.bit_length() - 1, t.placement_seed
        for c in range(len(ec.syscall_site)):  # named by the trace: engine_syscall_sites
            ec.syscall_site[c] = B.NO_SITE
        if timing:  # ns -> ticks (width ticks a cycle)
            tpn = self.freq_ghz * ec.width
            for c, (call, byte) in enumerate(zip(self.syscall.call_ns, self.syscall.byte_ns,
                                                 strict=True)):
                ec.syscall_call_ticks[c] = round(call * tpn)
                ec.syscall_byte_q16[c] = round(byte * tpn * 65536)
        ec.swpf_level = self.swpf_fill
        ec.swpf_drop_on_tlb_miss = int(self.swpf_drop_on_tlb_miss)
        ec.swpf_trains = int(self.swpf_trains)
        ec.flush_at_end = int(flush)
        return ec


# --- parsing --------------------------------------------------------------------------------

def parse_size(v: Any, key: str) -> int:
    if isinstance(v, bool):
        raise ConfigError(f"{key}: expected a size like \"32KiB\", got {v!r}")
    if isinstance(v, int):
        return v
    if isinstance(v, str):
        m = _SIZE_RE.match(v)
        if m:
            n = float(m.group(1)) * _UNITS[(m.group(2) or "B").lower()]
            if n == int(n):
                return int(n)
    raise ConfigError(f"{key}: expected a size like \"32KiB\" or a byte count, got {v!r}")


def fmt_size(n: int) -> str:
    """A byte count as kvsim prints it, everywhere: in the largest binary unit it reaches,
    whole or to three significant digits, no space ("48KiB", "1.5MiB", "5.62KiB", "512B").
    The calibration's replayed points are named so (``chase 1.41MiB 2048K``), and files of
    two runs are compared point by point on those names."""
    for unit, f in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= f:
            v = n / f
            return f"{v:.0f}{unit}" if v == int(v) or v >= 1000 else f"{v:.3g}{unit}"
    return f"{n}B"


def _get(t: dict, key: str, where: str, typ: type | tuple, default: Any = ..., pos=False):
    if key not in t:
        if default is ...:
            raise ConfigError(f"{where}.{key}: missing")
        return default
    v = t[key]
    ok = isinstance(v, typ) and not (isinstance(v, bool) and bool not in _tuple(typ))
    if not ok:
        names = "/".join(x.__name__ for x in _tuple(typ))
        raise ConfigError(f"{where}.{key}: expected {names}, got {v!r}")
    if pos and v <= 0:
        raise ConfigError(f"{where}.{key}: must be > 0, got {v!r}")
    return v


def _tuple(t):
    return t if isinstance(t, tuple) else (t,)


def _check_ways(p: B.PolicyInfo, ways: int, where: str) -> None:
    """The policy's constraint on the way count, as the engine's registry states it."""
    pow2_ok = not p.pow2_ways or ways & (ways - 1) == 0
    if not pow2_ok or (p.max_ways and ways > p.max_ways):
        need = "a power of two" if p.pow2_ways else "a way count"
        limit = f" <= {p.max_ways}" if p.max_ways else ""
        raise ConfigError(f"{where}.ways: {p.name} needs {need}{limit}, got {ways}")


#: ``[tlb] walk_last_level``'s values and the engine's (engine.h walk_last_level_lost): the
#: last level keeps every page-table line a walk reads, none, or the guest's (read 0) alone.
WALK_LAST_LEVEL = {True: B.WALK_LL_ALL, False: B.WALK_LL_NONE, "guest": B.WALK_LL_GUEST}
#: The most cycles ``[tlb] walk_extra_4k`` may add to a walk (a walk of hundreds of
#: thousands of cycles is no core's; the engine's field is 32 bits).
WALK_EXTRA_MAX = 100_000

def work_store_q16(header: dict) -> list[int]:
    """The work's stores per instruction of each kind of a trace header's "work_stores"
    (traces/FORMAT.md: an object, kind name -> stores per instruction, beside "work_kinds"),
    in 1/65536, in the order of "work_kinds"; [] when the header has none. A figure that is
    not a number from 0 to 1 is refused (ConfigError)."""
    ws = header.get("work_stores")
    if ws is None:
        return []
    if not isinstance(ws, dict):
        raise ConfigError("trace header: work_stores must be an object (kind -> stores)")
    names = header.get("work_kinds") or list(WORK_KINDS)
    out = []
    for name in names:
        v = ws.get(name, 0)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v <= 1:
            raise ConfigError(f"trace header: work_stores.{name}: a number from 0 to 1, "
                              f"got {v!r}")
        out.append(round(v * 65536))
    return out


_KEYS = {
    "cache": {"name", "size", "ways", "line", "latency", "replacement", "inclusion", "mshrs",
              "seed", "src", "notes"},
    "core": {"width", "rob", "sustained_ipc", "scheduler", "store_buffer",
             "full_line_store_fetch", "src", "notes"},
    "work": {*WORK_KINDS, "gap_model", "src", "notes"},
    "dram": {"latency_ns", "bandwidth_gbs", "src", "notes"},
    "tlb": {"page_size", "l1_entries", "l1_ways", "l2_entries", "l2_ways", "l2_latency",
            "walk_latency", "walk_reads", "walkers", "host_page_size", "walk_retention_ns",
            "host_read_ns", "walk_last_level", "placement", "placement_seed", "walk_extra_4k",
            "src", "notes"},
    "swprefetch": {"fill", "tlb_miss", "trains_prefetchers", "src", "notes"},
    "prefetcher": {"level", "kind", "degree", "table", "arrival", "stores", "hits",
                   "src", "notes"},
    "syscall": set(SYSCALL_KEYS) | {"src", "notes"},
}


def _check_keys(t: Any, section: str, where: str) -> None:
    if not isinstance(t, dict):
        raise ConfigError(f"{where}: must be a table")
    unknown = sorted(set(t) - _KEYS[section])
    if unknown:
        table = f"[[{section}]]" if section in ("cache", "prefetcher") else f"[{section}]"
        raise ConfigError(f"{where}.{unknown[0]}: unknown key (valid in {table}: "
                          f"{', '.join(_ordered(_KEYS[section]))}; {SCHEMA})")


_TOP_KEYS = {"name", "description", "freq_ghz", "core", "cache", "dram", "tlb", "swprefetch",
             "prefetcher", "syscall", "work", "src", "notes", "sources", "meta", "selfcheck"}

#: Where a CPU-file error points to.
SCHEMA = "schema: sim/PRESETS.md; start from `kvsim cpus --show NAME`"

_DOC_KEYS = ("src", "notes", "sources", "meta", "selfcheck")


def _ordered(keys: set[str]) -> list[str]:
    """Keys sorted, the documentation-only ones last."""
    return sorted(keys, key=lambda k: (k in _DOC_KEYS, k))


def _unknown_top(doc: dict, key: str) -> str:
    v = doc[key]
    hint = ""
    if isinstance(v, dict) and set(v) & (_KEYS["cache"] - set(_DOC_KEYS) - {"name"}):
        hint = f" (a cache level is a [[cache]] table with name = \"{key}\")"
    elif isinstance(v, list) and v and all(isinstance(x, dict) for x in v) and \
            set(v[0]) & (_KEYS["cache"] - set(_DOC_KEYS) - {"name"}):
        hint = " (cache levels are [[cache]] tables)"
    return (f"{key}: unknown top-level key{hint} (valid: {', '.join(_ordered(_TOP_KEYS))}; "
            f"{SCHEMA})")


def parse_cpu(doc: dict, source: str = "") -> CpuConfig:
    """Validate a parsed TOML document and build a CpuConfig."""
    unknown = set(doc) - _TOP_KEYS
    if unknown:
        raise ConfigError(_unknown_top(doc, sorted(unknown)[0]))
    name = _get(doc, "name", "cpu", str)
    if "cache" not in doc or not isinstance(doc["cache"], list) or not doc["cache"]:
        raise ConfigError("cache: at least one [[cache]] table is required")
    prov: dict = {}
    caches = []
    names: dict[str, int] = {}
    for i, t in enumerate(doc["cache"]):
        w = f"cache[{i}]"
        _check_keys(t, "cache", w)
        cname = _get(t, "name", w, str, f"L{i + 1}")
        size = parse_size(_get(t, "size", w, (str, int)), f"{w}.size")
        ways = _get(t, "ways", w, int)
        if ways < 1:
            raise ConfigError(f"{w}.ways: must be >= 1, got {ways}")
        line = _get(t, "line", w, int, 64)
        if line < 4 or line > 4096 or line & (line - 1):
            raise ConfigError(f"{w}.line: must be a power of two 4..4096, got {line}")
        if i and line != caches[0].line:
            raise ConfigError(
                f"{w}.line: every level must use the L1 line size ({caches[0].line})")
        if size <= 0 or size % (ways * line):
            raise ConfigError(
                f"{w}.size: {size} B is not a multiple of ways x line ({ways * line})")
        sets = size // (ways * line)
        if sets & (sets - 1):
            raise ConfigError(
                f"{w}.size: gives {sets} sets ({size} B / {ways} ways / {line} B), "
                "not a power of two"
            )
        lat = _get(t, "latency", w, int, 1)
        if lat < 1:
            raise ConfigError(f"{w}.latency: must be >= 1 cycle, got {lat}")
        pols = {p.name: p for p in B.policies()}
        repl = _get(t, "replacement", w, str, B.policy_names()[0])
        if repl not in pols:
            raise ConfigError(
                f"{w}.replacement: unknown policy {repl!r} (valid: {', '.join(pols)})")
        _check_ways(pols[repl], ways, w)
        incl = _get(t, "inclusion", w, str, "non-inclusive")
        if incl not in B.inclusion_names():
            raise ConfigError(f"{w}.inclusion: unknown value {incl!r} "
                              f"(valid: {', '.join(B.inclusion_names())})")
        n_levels = len(doc["cache"])
        if incl == "exclusive" and (i == 0 or i != n_levels - 1):
            raise ConfigError(
                f"{w}.inclusion: exclusive (victim) is supported for the last level only")
        if incl == "inclusive" and i == 0:
            raise ConfigError(f"{w}.inclusion: L1 cannot be inclusive of anything")
        mshrs = _get(t, "mshrs", w, int, 0)
        if mshrs < 0:
            raise ConfigError(f"{w}.mshrs: must be >= 0, got {mshrs}")
        seed = _get(t, "seed", w, int, 1)
        if cname in names:
            raise ConfigError(f"{w}.name: duplicate level name {cname!r}")
        names[cname] = i
        caches.append(CacheLevel(cname, size, ways, line, lat, repl, incl, mshrs, seed))
        if "src" in t:
            prov[cname] = t["src"]
    if len(caches) > B.MAX_LEVELS:
        raise ConfigError(f"cache: at most {B.MAX_LEVELS} levels")

    def level_ref(v: Any, key: str) -> int:
        if isinstance(v, str) and v in names:
            return names[v]
        if isinstance(v, int) and not isinstance(v, bool) and 0 <= v < len(caches):
            return v
        raise ConfigError(f"{key}: unknown cache level {v!r} (valid: {', '.join(names)})")

    kw: dict[str, Any] = {}
    if "freq_ghz" in doc:
        kw["freq_ghz"] = float(_get(doc, "freq_ghz", "cpu", (int, float), pos=True))
    for sec in ("core", "dram", "tlb", "swprefetch", "syscall", "work"):
        if sec in doc:
            _check_keys(doc[sec], sec, sec)
    if not isinstance(doc.get("prefetcher", []), list):
        raise ConfigError("prefetcher: must be an array of tables ([[prefetcher]])")
    if "core" in doc:
        core = doc["core"]
        kw["width"] = _get(core, "width", "core", int, pos=True)
        kw["rob"] = _get(core, "rob", "core", int, pos=True)
        ipc = _get(core, "sustained_ipc", "core", (int, float), None, pos=True)
        if ipc is not None:
            if ipc > kw["width"]:
                raise ConfigError(f"core.sustained_ipc: at most the width ({kw['width']}), "
                                  f"got {ipc!r}")
            kw["sustained_ipc"] = float(ipc)
        sched = _get(core, "scheduler", "core", int, None, pos=True)
        if sched is not None:
            if sched > B.MAX_SCHEDULER:
                raise ConfigError(f"core.scheduler: at most {B.MAX_SCHEDULER}, got {sched}")
            kw["scheduler"] = sched
        sbuf = _get(core, "store_buffer", "core", int, None, pos=True)
        if sbuf is not None:
            if sbuf > B.MAX_STORE_BUFFER:
                raise ConfigError(f"core.store_buffer: at most {B.MAX_STORE_BUFFER}, "
                                  f"got {sbuf}")
            kw["store_buffer"] = sbuf
        kw["full_line_store_fetch"] = _get(core, "full_line_store_fetch", "core", bool, False)
        if "src" in core:
            prov["core"] = core["src"]
    if "work" in doc:
        if "width" not in kw:
            raise ConfigError("work: needs [core] width (rates are instructions per cycle)")
        rates = []
        for k in WORK_KINDS:
            r = _get(doc["work"], k, "work", (int, float), None, pos=True)
            if r is None:
                continue
            if r > kw["width"]:
                raise ConfigError(f"work.{k}: at most the width ({kw['width']}), got {r!r}")
            rates.append((k, float(r)))
        kw["work"] = tuple(rates)
        _get(doc["work"], "gap_model", "work", str, None)  # a name, if given
        try:
            kw["work_gap_model"] = gap_model.of_work(doc)
        except ValueError as e:
            raise ConfigError(str(e)) from None
        if "src" in doc["work"]:
            prov["work"] = doc["work"]["src"]
    if "dram" in doc:
        d = doc["dram"]
        kw["dram_latency_ns"] = float(_get(d, "latency_ns", "dram", (int, float), pos=True))
        bw = _get(d, "bandwidth_gbs", "dram", (int, float), None)
        if bw is not None and bw <= 0:
            raise ConfigError(f"dram.bandwidth_gbs: must be > 0, got {bw}")
        kw["dram_bandwidth_gbs"] = float(bw) if bw is not None else None
        if "src" in d:
            prov["dram"] = d["src"]
    if "tlb" in doc:
        t = doc["tlb"]
        ps = parse_size(_get(t, "page_size", "tlb", (str, int), "4KiB"), "tlb.page_size")
        if ps not in (4096, 2 * 1024 * 1024):
            raise ConfigError(f"tlb.page_size: must be 4KiB or 2MiB, got {ps}")
        vals = {}
        for key, dflt in (("l1_entries", 64), ("l1_ways", 4), ("l2_entries", 0), ("l2_ways", 8),
                          ("l2_latency", 9), ("walk_latency", 30), ("walk_reads", 0),
                          ("walkers", 0), ("walk_extra_4k", 0)):
            v = _get(t, key, "tlb", int, dflt)
            if v < 0:
                raise ConfigError(f"tlb.{key}: must be >= 0, got {v}")
            vals[key] = v
        if vals["walk_extra_4k"] > WALK_EXTRA_MAX:
            raise ConfigError(f"tlb.walk_extra_4k: must be 0..{WALK_EXTRA_MAX} cycles, got "
                              f"{vals['walk_extra_4k']}")
        if vals["walk_reads"] > B.MAX_WALK_READS:
            raise ConfigError(f"tlb.walk_reads: at most {B.MAX_WALK_READS}, got "
                              f"{vals['walk_reads']}")
        if vals["walkers"] > B.MAX_WALKERS:
            raise ConfigError(f"tlb.walkers: at most {B.MAX_WALKERS} (0 = unlimited), got "
                              f"{vals['walkers']}")
        for lvl in ("l1", "l2"):
            e, w = vals[f"{lvl}_entries"], vals[f"{lvl}_ways"]
            if lvl == "l1" and e < 1:
                raise ConfigError("tlb.l1_entries: must be >= 1")
            if e == 0:
                continue
            ww = w or e
            if e % ww or (e // ww) & (e // ww - 1):
                raise ConfigError(
                    f"tlb.{lvl}_entries: {e} entries / {ww} ways is not a power-of-two set count"
                )
        hp = t.get("host_page_size", 0)
        hp = parse_size(hp, "tlb.host_page_size") if hp else 0
        if hp not in (0, 4096, 2 * 1024 * 1024):
            raise ConfigError(f"tlb.host_page_size: must be 4KiB or 2MiB, got {hp}")
        extra = {}
        for key in ("walk_retention_ns", "host_read_ns"):
            v = _get(t, key, "tlb", (int, float), 0)
            if not math.isfinite(v) or v < 0 or v > 1e9:
                raise ConfigError(f"tlb.{key}: must be 0..1e9 ns, got {v}")
            extra[key] = float(v)
        keeps = _get(t, "walk_last_level", "tlb", (bool, str), True)
        if keeps not in WALK_LAST_LEVEL:
            raise ConfigError(f"tlb.walk_last_level: must be true, false or \"guest\", "
                              f"got {keeps!r}")
        extra["walk_last_level"] = keeps
        place = _get(t, "placement", "tlb", str, "virtual")
        if place not in PLACEMENTS:
            raise ConfigError(f"tlb.placement: must be one of {', '.join(PLACEMENTS)}, "
                              f"got {place!r}")
        seed = _get(t, "placement_seed", "tlb", int, 1)
        if not 0 <= seed < 2 ** 64:
            raise ConfigError(f"tlb.placement_seed: must be 0..2^64-1, got {seed}")
        kw["tlb"] = Tlb(page_size=ps, host_page_size=hp, placement=place,
                        placement_seed=seed, **vals, **extra)
        if "src" in t:
            prov["tlb"] = t["src"]
    if "swprefetch" in doc:
        sp = doc["swprefetch"]
        kw["swpf_fill"] = level_ref(_get(sp, "fill", "swprefetch", (str, int), 0),
                                    "swprefetch.fill")
        if caches[kw["swpf_fill"]].inclusion == "exclusive":
            raise ConfigError("swprefetch.fill: cannot fill an exclusive (victim) level")
        pol = _get(sp, "tlb_miss", "swprefetch", str, "walk")
        if pol not in ("walk", "drop"):
            raise ConfigError(f"swprefetch.tlb_miss: must be \"walk\" or \"drop\", got {pol!r}")
        kw["swpf_drop_on_tlb_miss"] = pol == "drop"
        kw["swpf_trains"] = _get(sp, "trains_prefetchers", "swprefetch", bool, False)
        if "src" in sp:
            prov["swprefetch"] = sp["src"]
    if "syscall" in doc:
        sy = doc["syscall"]
        vals = []
        for key in SYSCALL_KEYS:
            v = _get(sy, key, "syscall", (int, float), 0.0)
            if v < 0 or v != v or v == float("inf"):
                raise ConfigError(f"syscall.{key}: must be a finite number >= 0 (ns), got {v!r}")
            vals.append(float(v))
        kw["syscall"] = Syscall(tuple(vals[0::2]), tuple(vals[1::2]))
        if "src" in sy:
            prov["syscall"] = sy["src"]
    pfs = []
    for i, p in enumerate(doc.get("prefetcher", [])):
        w = f"prefetcher[{i}]"
        _check_keys(p, "prefetcher", w)
        lvl = level_ref(_get(p, "level", w, (str, int)), f"{w}.level")
        if caches[lvl].inclusion == "exclusive":
            raise ConfigError(f"{w}.level: cannot prefetch into an exclusive (victim) level")
        kind = _get(p, "kind", w, str)
        if kind not in B.prefetcher_names():
            raise ConfigError(f"{w}.kind: unknown prefetcher {kind!r} "
                              f"(valid: {', '.join(B.prefetcher_names())})")
        deg = _get(p, "degree", w, int, 1)
        if not 1 <= deg <= 16:
            raise ConfigError(f"{w}.degree: must be 1..16, got {deg}")
        table = _get(p, "table", w, int, 16)
        if table < 1:
            raise ConfigError(f"{w}.table: must be >= 1, got {table}")
        flags = {}
        for key in ("arrival", "stores", "hits"):
            flags[key] = _get(p, key, w, bool, False)
            if flags[key] and lvl == 0:
                raise ConfigError(f"{w}.{key}: only for a prefetcher below L1")
        pfs.append(Prefetcher(lvl, kind, deg, table, **flags))
    if len(pfs) > B.MAX_PREFETCHERS:
        raise ConfigError(f"prefetcher: at most {B.MAX_PREFETCHERS}")
    notes = doc.get("notes", ())
    if isinstance(notes, str):
        notes = (notes,)
    sc = doc.get("selfcheck")
    if isinstance(sc, dict):  # a calibrated file's self-check (sim/calibrate_check.py)
        prov["selfcheck"] = {"status": sc.get("status"), "failed": list(sc.get("failed", []))}
    return CpuConfig(
        name=name, caches=tuple(caches), description=str(doc.get("description", "")),
        prefetchers=tuple(pfs), source=source, notes=tuple(notes), provenance=prov, **kw,
    )


def load_file(path: str | Path) -> CpuConfig:
    p = Path(path)
    try:
        doc = tomllib.loads(p.read_text())
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such file") from None
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{path}: invalid TOML: {e}") from None
    except UnicodeDecodeError as e:
        raise ConfigError(f"{path}: not a UTF-8 TOML file (byte {e.start}: {e.reason})") from None
    try:
        return parse_cpu(doc, str(p))
    except ConfigError as e:
        raise ConfigError(f"{path}: {e}") from None


def engine_syscall_sites(ec: B.EngineConfig, header: dict | None) -> None:
    """Point ``ec``'s system-call costs at the sites a trace's header names for its SYSCALL
    markers ("sys.read", ...; traces/FORMAT.md). A call the header does not name (every trace
    without SYSCALL markers) keeps no site, so nothing is charged for it."""
    from kvsim import traces

    sites = list((header or {}).get("sites") or [])
    for c, name in enumerate(traces.SYSCALL_SITES):
        ec.syscall_site[c] = sites.index(name) if name in sites else B.NO_SITE


def preset_names() -> list[str]:
    return sorted([p.stem for p in PRESET_DIR.glob("*.toml")] + ["local"])


def load_cpu(name_or_path: str | Path) -> CpuConfig:
    """A CPU model by preset name ("graviton3", "xeon-8255c", "local", ...) or TOML path."""
    s = str(name_or_path)
    if s.endswith(".toml") or "/" in s or Path(s).is_file():
        return load_file(s)
    if s == "local":
        from .local import local_cpu

        return local_cpu()
    p = PRESET_DIR / f"{s}.toml"
    if p.is_file():
        return load_file(p)
    raise ConfigError(f"unknown CPU {s!r} (valid: {', '.join(preset_names())}, or a .toml path)")


def list_presets() -> list[dict]:
    """One dict per preset: name, description, freq_ghz, levels (summary), timing, source."""
    out = []
    for n in preset_names():
        try:
            c = load_cpu(n)
        except ConfigError as e:  # a broken local sysfs must not hide the other presets
            out.append({"name": n, "description": f"unavailable: {e}", "freq_ghz": None,
                        "levels": "", "timing": False, "source": ""})
            continue
        out.append({
            "name": n, "description": c.description, "freq_ghz": c.freq_ghz,
            "levels": c.summary(), "timing": c.timing_capable, "source": c.source,
            "caches": [
                {"name": x.name, "size": x.size, "ways": x.ways, "line": x.line,
                 "latency": x.latency, "replacement": x.replacement, "inclusion": x.inclusion,
                 "mshrs": x.mshrs} for x in c.caches
            ],
        })
    return out


__all__ = [
    "CacheLevel", "ConfigError", "CpuConfig", "Prefetcher", "Syscall", "Tlb", "list_presets",
    "load_cpu", "load_file", "parse_cpu", "parse_size", "preset_names", "engine_syscall_sites",
]
