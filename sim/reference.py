"""The reference simulator: the kvsim model in plain Python, written to be read, not to be fast.

It implements sim/MODEL.md independently of the C engine (sim/_engine/engine.c) and returns
the same raw counters; the Hypothesis tests require both to agree on every counter and on
the cycle count. Roughly 10^4-10^5 records per second: use it on small traces only.

Time is in ticks (one cycle = ``width`` ticks) so everything stays integer.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from kvsim.traces import KIND_MARKER as MARKER
from kvsim.traces import KIND_PREFETCH as PREFETCH
from kvsim.traces import KIND_STORE as STORE
from kvsim.traces import (
    MARK_COMMAND,
    MARK_PHASE,
    MARK_SYSCALL,
    MARK_WARMUP_BEGIN,
    MARK_WARMUP_END,
    NUM_KINDS,
    NUM_SYSCALLS,
)
from kvsim.traces.format import MARK_WORK, WORK_COUNT_BITS

from . import _binding as B
from .placement import place_line

if TYPE_CHECKING:
    import numpy as np

TIMELINE_DROPPED = B.TIMELINE_DROPPED


def _engine_values(names: tuple[str, ...], wanted: tuple[str, ...], what: str) -> list[int]:
    """The engine's values of the named enum members (engine.h), by name from its registry."""
    missing = [n for n in wanted if n not in names]
    if missing:
        raise ValueError(f"sim.reference: the engine has no {what} {missing[0]!r} "
                         f"(it has: {', '.join(names)})")
    return [names.index(n) for n in wanted]


K_LOAD, K_STORE, K_SWPF, K_HWPF, K_WRITEBACK, K_VICTIM = _engine_values(
    B.access_kind_names(), ("load", "store", "swpf", "hwpf", "writeback", "victim"),
    "access kind")
NON_INCLUSIVE, INCLUSIVE, EXCLUSIVE = _engine_values(
    B.inclusion_names(), ("non-inclusive", "inclusive", "exclusive"), "inclusion")
READ, WRITE, WFULL, VICTIM = range(4)
MASK64 = (1 << 64) - 1
# page-table reads of a walk (engine.h KVSIM_WALK_BASE, KVSIM_WALK_STRIDE)
WALK_BASE, WALK_STRIDE = 0xFFFF800000000000, 1 << 44
WALK_SLOT_BITS = 20  # engine.h KVSIM_WALK_SLOT_BITS
DRAM_SLOTS = 4096  # the DRAM channel's calendar (engine_impl.h KVSIM_DRAM_SLOTS)


def xorshift64s(state: int) -> tuple[int, int]:
    """One xorshift64* step: (new state, output)."""
    x = state
    x ^= x >> 12
    x ^= (x << 25) & MASK64
    x ^= x >> 27
    return x, (x * 0x2545F4914F6CDD1D) & MASK64


# --- replacement policies (same state words as policy_*.c) ---------------------------------


class Policy:
    """Per-line words ``line[set][way]``, per-set words ``sets[set]``, clock, fills, rng."""

    def __init__(self, sets: int, ways: int, seed: int):
        self.ways = ways
        self.line = [[0] * ways for _ in range(sets)]
        self.sets = [0] * sets
        self.clock = 0
        self.fills = 0
        self.rng = seed or 0x9E3779B97F4A7C15

    def age(self, s: int, w: int) -> int:
        return 0


class Lru(Policy):
    def on_hit(self, s, w):
        self.clock += 1
        self.line[s][w] = self.clock

    on_fill = on_hit

    def victim(self, s):
        st = self.line[s]
        return st.index(min(st))  # stamps are unique

    def on_invalidate(self, s, w):
        self.line[s][w] = 0

    def age(self, s, w):
        return self.clock - self.line[s][w]


class Plru(Policy):
    def _path(self, w):
        """(node, goes_left) pairs from the root to way w."""
        node, lo, span, out = 0, 0, self.ways, []
        while span > 1:
            span //= 2
            left = w < lo + span
            out.append((node, left))
            node = 2 * node + (1 if left else 2)
            if not left:
                lo += span
        return out

    def on_hit(self, s, w):
        bits = self.sets[s]
        for node, left in self._path(w):
            bits = (bits | (1 << node)) if left else (bits & ~(1 << node))
        self.sets[s] = bits

    on_fill = on_hit

    def victim(self, s):
        bits, node, lo, span = self.sets[s], 0, 0, self.ways
        while span > 1:
            span //= 2
            if bits >> node & 1:
                node, lo = 2 * node + 2, lo + span
            else:
                node = 2 * node + 1
        return lo

    def on_invalidate(self, s, w):
        pass


class Srrip(Policy):
    def __init__(self, sets, ways, seed):
        super().__init__(sets, ways, seed)
        self.line = [[3] * ways for _ in range(sets)]

    def on_hit(self, s, w):
        self.line[s][w] = 0

    def on_fill(self, s, w):
        self.line[s][w] = 2

    def victim(self, s):
        rr = self.line[s]
        while True:
            for w in range(self.ways):
                if rr[w] >= 3:
                    return w
            for w in range(self.ways):
                rr[w] += 1

    def on_invalidate(self, s, w):
        self.line[s][w] = 3

    def age(self, s, w):
        return self.line[s][w]


class Brrip(Srrip):
    def on_fill(self, s, w):
        n = self.fills
        self.fills += 1
        self.line[s][w] = 2 if n % 32 == 0 else 3


class Random(Policy):
    def on_hit(self, s, w):
        pass

    on_fill = on_hit
    on_invalidate = on_hit

    def victim(self, s):
        self.rng, out = xorshift64s(self.rng)
        return out % self.ways


class Qlru(Policy):
    """QLRU_H00_M1_R0_U1 (policy_qlru.c): 2-bit ages, hit 0, fill 1, the lowest way of age
    3 replaced, and after each access the others aged until the oldest of them is 3."""

    def __init__(self, sets, ways, seed):
        super().__init__(sets, ways, seed)
        self.line = [[3] * ways for _ in range(sets)]

    def _update(self, s, w):
        a = self.line[s]
        m = max((a[i] for i in range(self.ways) if i != w), default=3)
        if m < 3:
            for i in range(self.ways):
                if i != w:
                    a[i] += 3 - m

    def on_hit(self, s, w):
        self.line[s][w] = 0
        self._update(s, w)

    def on_fill(self, s, w):
        self.line[s][w] = 1
        self._update(s, w)

    def victim(self, s):
        a = self.line[s]
        for w in range(self.ways):
            if a[w] >= 3:
                return w
        return max(range(self.ways), key=lambda w: (a[w], -w))

    def on_invalidate(self, s, w):
        pass

    def age(self, s, w):
        return self.line[s][w]


POLICY_CLASSES = {"lru": Lru, "plru": Plru, "srrip": Srrip, "brrip": Brrip, "random": Random,
                  "qlru": Qlru}


# --- hardware prefetchers (same state as prefetch_*.c) ---------------------------------------


class NextLine:
    def __init__(self, degree, table):
        self.degree = degree

    def operate(self, line, hit, key):
        return [] if hit else [line + 1 + i for i in range(self.degree)]


class Ascending:
    """prefetch_ascending.c: a load to one of the last ``table`` distinct lines
    loaded, or to the line after one, prefetches the next ``degree`` lines."""

    def __init__(self, degree, table):
        self.degree, self.n = degree, table or 1
        self.ring, self.next = [0] * self.n, 0

    def operate(self, line, hit, key):
        seen = line + 1 in self.ring
        recent = seen or (line != 0 and line in self.ring)
        if not seen:
            self.ring[self.next] = line + 1
            self.next = (self.next + 1) % self.n
        return [line + 1 + i for i in range(self.degree)] if recent else []


class IpStride:
    def __init__(self, degree, table):
        self.degree, self.table = degree, table
        self.e = [[0, 0, 0, 0] for _ in range(table)]

    def operate(self, line, hit, key):
        e = self.e[key % self.table]
        if e[0] != key + 1:
            e[:] = [key + 1, line, 0, 0]
            return []
        d = (line - e[1]) & MASK64
        if d == 0:
            return []
        if d == e[2]:
            e[3] = min(e[3] + 1, 3)
        else:
            e[2], e[3] = d, 0
        e[1] = line
        if e[3] < 1:
            return []
        return [(line + d * (i + 1)) & MASK64 for i in range(self.degree)]


class Stream:
    def __init__(self, degree, table):
        self.degree, self.table = degree, table
        self.e = [[0, 0, 0, 0, 0] for _ in range(table)]
        self.clock = 0

    def operate(self, line, hit, key):
        if hit:
            return []
        region = line >> 6
        match = [e for e in self.e if e[0] == region + 1]
        if not match:
            lru = min(self.e, key=lambda e: e[4])  # first of the smallest stamps
            self.clock += 1
            lru[:] = [region + 1, line, 0, 0, self.clock]
            return []
        e = match[0]
        self.clock += 1
        e[4] = self.clock
        direction = 1 if line > e[1] else (2 if line < e[1] else 0)
        if direction == 0:
            return []
        if direction == e[2]:
            e[3] = min(e[3] + 1, 3)
        else:
            e[2], e[3] = direction, 0
        e[1] = line
        if e[3] < 1:
            return []
        out = []
        for i in range(1, self.degree + 1):
            c = line + i if direction == 1 else line - i
            if c >> 6 != region:
                break
            out.append(c)
        return out


class AdjacentLine:
    #: completes every line fetched into its level, a software prefetch's too (engine:
    #: kvsimPrefetcherOps.sees_fills, prefetch_adjacent_line.c)
    sees_fills = True

    def __init__(self, degree, table):
        pass

    def operate(self, line, hit, key):
        return [] if hit else [line ^ 1]


class UpDown:
    def __init__(self, degree, table):
        self.degree, self.table = degree, table
        self.e = [[0, 0, 0] for _ in range(table)]

    def operate(self, line, hit, key):
        region = line >> 6
        e = self.e[region % self.table]
        if e[0] != region + 1:
            e[:] = [region + 1, line, 1]
        else:
            if line > e[1]:
                e[2] = 1
            elif line < e[1]:
                e[2] = 2
            e[1] = line
        out = []
        for i in range(1, self.degree + 1):
            c = line + i if e[2] == 1 else line - i
            if c >> 6 != region:
                break
            out.append(c)
        return out


class RegionFootprint:
    """prefetch_region.c: per key, the lines within WINDOW of its last trigger that the
    following loads touched, prefetched at its next trigger; ``miss_only`` (region_miss):
    only a load that misses the level is a trigger."""

    GENS, WINDOW = 4, 8

    def __init__(self, degree, table, miss_only=False):
        self.degree, self.table, self.miss_only = degree, table, miss_only
        self.gens = [[0, 0, 0] for _ in range(self.GENS)]  # trigger + 1, key, footprint
        self.ring = 0
        self.patterns = [[0, 0] for _ in range(table)]  # key + 1, footprint

    def _bit(self, d):
        return d + self.WINDOW if d < 0 else d + self.WINDOW - 1

    def operate(self, line, hit, key):
        for g in self.gens:
            if g[0] and -self.WINDOW <= line - (g[0] - 1) <= self.WINDOW:
                d = line - (g[0] - 1)
                if d:
                    g[2] |= 1 << self._bit(d)
                return []
        if self.miss_only and hit:
            return []
        slot = self.gens[self.ring]
        if slot[0]:
            self.patterns[slot[1] % self.table] = [slot[1] + 1, slot[2]]
        slot[:] = [line + 1, key, 0]
        self.ring = (self.ring + 1) % self.GENS
        p = self.patterns[key % self.table]
        if p[0] != key + 1 or not p[1]:
            return []
        out = []
        for k in range(1, self.WINDOW + 1):
            for d in (-k, k):
                if len(out) < self.degree and p[1] >> self._bit(d) & 1 \
                        and (line + d) >> 6 == line >> 6:
                    out.append(line + d)
        return out


PREFETCHER_CLASSES = {"next_line": NextLine, "ip_stride": IpStride, "stream": Stream,
                      "adjacent_line": AdjacentLine, "up_down": UpDown,
                      "region": RegionFootprint,
                      "region_miss": functools.partial(RegionFootprint, miss_only=True),
                      "ascending": Ascending}


def _implementation(classes: dict, name: str, what: str):
    """The reference's class for an engine policy or prefetcher; a one-line error for a name
    the engine registers but the reference does not implement (test_registry.py checks
    that there is none)."""
    if name not in classes:
        raise ValueError(f"sim.reference: no implementation of the engine's {what} {name!r}")
    return classes[name]


# --- the model ----------------------------------------------------------------------------------


class Line:
    __slots__ = ("line", "dirty", "pf", "stag")

    def __init__(self, line, dirty, pf, stag):
        self.line, self.dirty, self.pf, self.stag = line, dirty, pf, stag


class Cache:
    def __init__(self, c: B.LevelConfig, timing: bool):
        self.nsets, self.ways, self.latency = c.sets, c.ways, c.latency
        self.inclusion = c.inclusion
        self.mshrs = c.mshrs if timing else 0
        self.sets: list[list[Line | None]] = [[None] * c.ways for _ in range(c.sets)]
        self.policy = _implementation(POLICY_CLASSES, c.policy.decode() or B.policy_names()[0],
                                      "policy")(c.sets, c.ways, c.seed)
        self.mline = [0] * self.mshrs  # miss buffers: line, ready tick, prefetch kind
        self.mready = [0] * self.mshrs
        self.mmax_ready = 0

    def find(self, line):
        s = line % self.nsets
        for w, x in enumerate(self.sets[s]):
            if x is not None and x.line == line:
                return s, w
        return s, None


class Tlb:
    def __init__(self, sets, ways):
        self.nsets, self.ways = sets, ways
        self.sets = [[None] * ways for _ in range(sets)]  # [page, stamp]
        self.clock = 0

    def lookup(self, page):
        for e in self.sets[page % self.nsets]:
            if e is not None and e[0] == page:
                self.clock += 1
                e[1] = self.clock
                return True
        return False

    def fill(self, page):
        st = self.sets[page % self.nsets]
        self.clock += 1
        for w in range(self.ways):
            if st[w] is None:
                st[w] = [page, self.clock]
                return
        w = min(range(self.ways), key=lambda i: st[i][1])
        st[w] = [page, self.clock]


def _new_stats(nlevels):
    """Zeroed raw counters, as ``_binding.stats_to_dict`` shapes the engine's: ints and lists
    (a level's ``access``/``hit``/``miss``: NTAGS lists of NKINDS counts)."""
    def z(n):
        return [0] * n

    def tag_kind():
        return [[0] * B.NKINDS for _ in range(B.NTAGS)]

    return {
        "records": 0, "warmup_records": 0, "instructions": 0,
        "kind": z(NUM_KINDS), "pieces": 0, "multiline": 0,
        "markers": z(B.NMARKERS),
        "dram_reads": 0, "dram_writes": 0, "dtlb_access": 0, "dtlb_miss": 0,
        "stlb_access": 0, "stlb_miss": 0, "swpf_dropped_tlb": 0, "ticks": 0,
        "stall_rob": z(B.MAX_LEVELS + 2),
        "wait_dep": 0, "wait_mshr": 0, "wait_tlb": 0, "wait_walker": 0, "wait_dram_bw": 0,
        "wait_inflight": 0, "wait_scheduler": 0, "wait_store_buffer": 0,
        "store_commit_lag": 0, "work_stores": 0,
        "miss_ticks": 0, "l1_misses_timed": 0, "load_latency": 0, "loads_timed": 0,
        "nphases_seen": 0,
        "walk_served": z(B.MAX_LEVELS + 1), "walk_timed": z(B.MAX_LEVELS + 2),
        "commands": 0, "command_ticks": 0, "command_ticks_max": 0, "command_l1_misses": 0,
        "command_ticks_hist": z(64), "command_l1_miss_hist": z(64),
        "syscalls": z(NUM_SYSCALLS + 1), "syscall_bytes": z(NUM_SYSCALLS + 1),
        "syscall_ticks": 0,
        "level": [
            {
                "access": tag_kind(), "hit": tag_kind(), "miss": tag_kind(),
                **{n: 0 for n in B.LEVEL_SCALARS},
                **{n: [0, 0] for n in B.LEVEL_PF},
            }
            for _ in range(nlevels)
        ],
        "phase": [
            {"records": 0, "instructions": 0, "ticks": 0, "access": [0] * nlevels,
             "miss": [0] * nlevels}
            for _ in range(B.MAX_PHASES)
        ],
    }


class ReferenceSim:
    """Same interface as ``sim._binding.Engine``: ``run(records)``, ``finish() -> raw``."""

    def __init__(self, cfg: B.EngineConfig):
        self.cfg = cfg
        self.n = cfg.nlevels
        self.lb = cfg.line_bits
        self.timing = bool(cfg.timing)
        self.W = cfg.width or 1
        self.ipt = cfg.instr_ticks or 1  # ticks per instruction
        # kinds of work (engine.h kvsimConfig.per_kind): ticks per instruction by kind, the
        # site's kind, and the WORK markers' instructions waiting for the next record
        self.per_kind = bool(cfg.per_kind)
        # the work's stores (MODEL.md §6): per kind, stores per 65536 gap instructions;
        # they take store-buffer entries only with a store buffer, in timing mode
        self.kstq = [cfg.kind_store_q16[k] for k in range(B.MAX_WORK_KINDS)]
        if max(self.kstq) > 65536:
            raise ValueError("work stores: at most 1 per instruction")
        self.wst = any(self.kstq) and self.timing and cfg.store_buffer > 0
        self.wst_acc = self.wst_new = 0  # 1/65536 stores carried; the record's whole ones
        self.split = self.per_kind or self.wst  # WORK markers split the records by kind
        self.kticks = [cfg.kind_ticks[k] or self.ipt for k in range(B.MAX_WORK_KINDS)]
        self.wpend: dict[int, int] = {}
        self.levels = [Cache(cfg.level[k], self.timing) for k in range(self.n)]
        self.prefetchers = []
        for p in range(cfg.nprefetchers):
            pc = cfg.prefetcher[p]
            impl = _implementation(PREFETCHER_CLASSES, pc.kind.decode(),
                                   "prefetcher")(pc.degree, pc.table)
            impl.arrival = bool(pc.flags & B.PF_ARRIVAL)  # engine.h KVSIM_PF_ARRIVAL
            impl.stores = bool(pc.flags & B.PF_STORES)
            impl.hits = bool(pc.flags & B.PF_HITS)
            if (pc.flags & ~(B.PF_ARRIVAL | B.PF_STORES | B.PF_HITS)
                    or (pc.flags and pc.level == 0)):
                raise ValueError(f"prefetcher[{p}].flags: arrival, stores and hits are for "
                                 f"levels below L1")
            self.prefetchers.append((pc.level, impl))
        self.pf_fills = any(getattr(p, "sees_fills", False) for _, p in self.prefetchers)
        self.pf_stores = any(p.stores for _, p in self.prefetchers)
        self.miss_start = 0  # the latest timed miss's start (engine: miss_start)
        self.dtlb = Tlb(cfg.dtlb_sets, cfg.dtlb_ways) if cfg.tlb else None
        self.stlb = Tlb(cfg.stlb_sets, cfg.stlb_ways) if cfg.tlb and cfg.stlb_sets else None
        self.stats = _new_stats(self.n)
        self.scratch = _new_stats(self.n)
        self.st = self.stats
        self.phase = 0
        self.pfh = None  # (kind, level) of a demand hit on an unused prefetched line
        self.t_disp = self.r_last = self.instr = self.recno = 0
        self.rob: list[tuple[int, int, int]] = []  # (instruction index, retire tick, class)
        self.blk = None
        self.dep_ring = [0] * B.DEP_WINDOW
        self.dram_base = 0  # the DRAM calendar's first slot (MODEL.md §6)
        self.dram_busy: set[int] = set()  # its slots that carry a fill
        self.walker_free = [0] * cfg.walkers  # tick each page walker is free (MODEL.md §3)
        # the walk's retention (MODEL.md §3): slot -> [line, tick of its latest read]
        self.walk_keep = (cfg.walk_retention * self.W
                          if self.timing and cfg.tlb and cfg.walk_reads else 0)
        self.walk_slots: dict[int, list[int]] = {}
        self.walk_now = 0  # the tick the current translation is wanted at
        # the scheduler (MODEL.md §6): (issue tick, entries) of the records holding entries
        self.sched: list[tuple[int, int]] = []
        self.sched_used = 0
        # the store buffer (MODEL.md §6): commit ticks of the last store_buffer stores,
        # oldest first, and the last store's commit tick
        self.sb_commits: list[int] = []
        self.sb_last = 0
        self.last_cause = self.n + 1
        self.finished = False
        self.command = None  # (counted, start tick, L1 misses at start) of the open command
        self.l1_misses_all = 0  # every L1 miss, warm-up included
        # set_timeline: (first record, count, {record: (D, X, complete, retire, level)})
        self.timeline: tuple[int, int, dict] | None = None

    def phys(self, line: int) -> int:
        """The line the caches see: its physical line under placement (sim/placement.py)."""
        cfg = self.cfg
        return place_line(line, self.lb, cfg.place_bits, cfg.place_seed)

    def set_timeline(self, first: int, count: int) -> dict:
        """Capture the times of records first .. first+count-1 (engine.h kvsimSetTimeline);
        returns the dict the rows go into, keyed by record index."""
        if not self.timing or self.recno:
            raise ValueError("a timeline needs a timing configuration, set before any record")
        rows: dict = {}
        self.timeline = (first, count, rows)
        return rows

    # --- TLB ---
    def translate(self, addr, is_swpf):
        """(added cycles, walked), or (None, False) for a software prefetch dropped on a
        DTLB miss."""
        st, cfg = self.st, self.cfg
        page = addr >> cfg.page_bits
        st["dtlb_access"] += 1
        if self.dtlb.lookup(page):
            return 0, False
        st["dtlb_miss"] += 1
        if is_swpf and cfg.swpf_drop_on_tlb_miss:
            return None, False
        walked = True
        if self.stlb is not None:
            st["stlb_access"] += 1
            if self.stlb.lookup(page):
                cost, walked = cfg.stlb_latency, False
            else:
                st["stlb_miss"] += 1
                self.stlb.fill(page)
                cost = self.walk_cost(addr)
        else:
            cost = self.walk_cost(addr)
        self.dtlb.fill(page)
        return cost, walked

    def walk_time(self, x, dur):
        """End tick of a walk of ``dur`` ticks wanted at tick ``x``: with walkers, it takes
        the earliest-free one (lowest index on a tie) and holds it to its end (timing.h
        walkTime)."""
        if not self.walker_free:
            return x + dur
        e = min(range(len(self.walker_free)), key=lambda i: (self.walker_free[i], i))
        start = max(x, self.walker_free[e])
        self.st["wait_walker"] += start - x
        self.walker_free[e] = start + dur
        return start + dur

    def walk_cost(self, addr):
        """The walk's fixed part plus its page-table reads through the caches (MODEL.md §3):
        read j reads the leaf entry of ``addr``'s page; under nested paging with a smaller
        host page (``cfg.guest_page_bits``) read 0, the guest's, takes the guest's page. A
        read from memory costs the DRAM latency (the host's, reads 1.., the host read
        latency when set); with a retention the line's age decides, and with
        ``walk_last_level_lost`` a read timed at the last level costs memory (with
        ``B.WALK_LL_GUEST`` the host's reads only), unless a retention kept it there (the
        private levels then serve what they hold whatever its age; engine.c walkCost). The
        fixed part is ``walk_latency``, plus ``walk_extra_4k`` when the guest's page (the
        run's page without a smaller host page) is 4 KiB."""
        cfg, st, n = self.cfg, self.st, self.n
        # a 4 KiB (guest) page's walk has one level more than a 2 MiB page's
        gb = cfg.guest_page_bits or cfg.page_bits
        cost = cfg.walk_latency + (cfg.walk_extra_4k if gb == 12 else 0)
        keep = self.walk_keep
        for j in range(cfg.walk_reads):
            pb = cfg.guest_page_bits if j == 0 and cfg.guest_page_bits else cfg.page_bits
            a = (WALK_BASE + j * WALK_STRIDE + (addr >> pb) * 8) & MASK64
            line = self.phys(a >> self.lb)
            sv = self.access(0, line, READ, 0, K_LOAD, 0)[0]
            mem = n + 1 if j > 0 and cfg.host_read_latency else n
            at = sv if sv < n else mem
            # with walk_last_level_lost the private levels keep the line by their capacity
            # and a retention is the last level's alone: in time, not by its capacity
            lost = n > 1 and (cfg.walk_last_level_lost == B.WALK_LL_NONE
                              or (cfg.walk_last_level_lost == B.WALK_LL_GUEST and j > 0))
            timed_kept = False
            if keep:
                slot = ((line * 0x9E3779B97F4A7C15) & MASK64) >> (64 - WALK_SLOT_BITS)
                now = self.walk_now
                held = self.walk_slots.get(slot)
                if held is not None and held[0] == line:
                    if lost and sv < n - 1:
                        pass  # a private level holds it
                    elif now > held[1] and now - held[1] > keep:
                        at = mem  # lost meanwhile
                    elif sv >= n - 1:
                        at = n - 1  # kept by the last level
                        timed_kept = True
                    if now > held[1]:
                        held[1] = now
                else:
                    self.walk_slots[slot] = [line, now]
            if lost and at == n - 1 and not timed_kept:
                at = mem  # the last level does not keep page-table lines (by capacity)
            if self.timing:  # (engine.c: a functional run may not know which level served)
                st["walk_served"][sv] += 1
                st["walk_timed"][at] += 1
            cost += (self.levels[at].latency if at < n else
                     cfg.dram_latency if at == n else cfg.host_read_latency)
        return cost

    # --- caches ---
    def probe(self, start, line):
        for k in range(start, self.n):
            if self.levels[k].find(line)[1] is not None:
                return k
        return self.n

    def invalidate(self, c: Cache, s, w):
        c.sets[s][w] = None
        c.policy.on_invalidate(s, w)

    def evict(self, k, s, w):
        c = self.levels[k]
        x = c.sets[s][w]
        ls = self.st["level"][k]
        victim = Line(x.line, x.dirty, 0, x.stag)
        ls["evictions"] += 1
        if x.pf:
            ls["pf_useless"][x.pf - 1] += 1
        if c.inclusion == INCLUSIVE:
            for j in range(k):
                u = self.levels[j]
                us, uw = u.find(x.line)
                if uw is None:
                    continue
                ux = u.sets[us][uw]
                if ux.dirty:
                    victim.dirty = True
                if ux.pf:
                    self.st["level"][j]["pf_useless"][ux.pf - 1] += 1
                self.invalidate(u, us, uw)
                ls["back_invalidations"] += 1
        c.sets[s][w] = None  # replaced: the caller fills this way (on_fill, not on_invalidate)
        return victim

    def send_victim(self, k, v):
        if v is None:
            return
        if v.dirty:
            self.st["level"][k]["writebacks"] += 1
            self.access(k + 1, v.line, WFULL, v.stag, K_WRITEBACK, 0)
        elif k + 1 < self.n and self.levels[k + 1].inclusion == EXCLUSIVE:
            self.access(k + 1, v.line, VICTIM, v.stag, K_VICTIM, 0)

    def access(self, k, line, op, stag, kind, pfk):
        """Returns (serving level, dirty bit moved up from an exclusive level)."""
        st = self.st
        if k == self.n:
            st["dram_reads" if op == READ else "dram_writes"] += 1
            return k, False
        c = self.levels[k]
        ls = st["level"][k]
        ls["access"][stag][kind] += 1
        st["phase"][self.phase]["access"][k] += 1
        s, w = c.find(line)
        if w is not None:
            x = c.sets[s][w]
            ls["hit"][stag][kind] += 1
            c.policy.on_hit(s, w)
            if kind in (K_LOAD, K_STORE) and x.pf:
                self.pfh = (x.pf, k)
                x.pf = 0
            if pfk:
                ls["pf_redundant"][pfk - 1] += 1
            if op in (WRITE, WFULL):
                x.dirty = True
            if c.inclusion == EXCLUSIVE and op == READ:
                self.invalidate(c, s, w)
                return k, x.dirty
            return k, False
        ls["miss"][stag][kind] += 1
        st["phase"][self.phase]["miss"][k] += 1
        if k == 0:
            self.l1_misses_all += 1
        if c.inclusion == EXCLUSIVE and op == READ:
            ls["fetches"] += 1
            return self.access(k + 1, line, READ, stag, kind, 0)[0], False
        victim = None
        free = [i for i in range(c.ways) if c.sets[s][i] is None]
        if free:
            w = free[0]
        else:
            w = c.policy.victim(s)
            victim = self.evict(k, s, w)
        x = Line(line, op in (WRITE, WFULL), pfk, stag)
        c.sets[s][w] = x
        c.policy.on_fill(s, w)
        if pfk:
            ls["pf_issued"][pfk - 1] += 1
        served = k
        if op in (READ, WRITE):
            ls["fetches"] += 1
            served, dirty_up = self.access(k + 1, line, READ, stag, kind, 0)
            if dirty_up and c.sets[s][w] is x:
                x.dirty = True
        self.send_victim(k, victim)
        return served, False

    # --- timing ---
    def dram_slot(self, start, xfer):
        """Start tick of a DRAM fill ready at ``start``: the earliest free channel slot at or
        after start's own (timing.h dramSlot)."""
        k = start // xfer
        if k < self.dram_base:
            return start
        while True:
            if k >= self.dram_base + DRAM_SLOTS:
                nb = k - DRAM_SLOTS + 1
                self.dram_busy = {j for j in self.dram_busy if j >= nb}
                self.dram_base = nb
            if k not in self.dram_busy:
                self.dram_busy.add(k)
                return max(start, k * xfer)
            k += 1

    def latency(self, sv):
        return (self.levels[sv].latency if sv < self.n else self.cfg.dram_latency) * self.W

    @staticmethod
    def earliest(c: Cache):
        return min(range(c.mshrs), key=lambda i: (c.mready[i], i))

    def pools_free(self, lo, hi, x):
        return all(not self.levels[j].mshrs
                   or self.levels[j].mready[self.earliest(self.levels[j])] <= x
                   for j in range(lo, hi))

    def inflight(self, sv, line, x):
        if sv >= self.n:
            return 0
        c = self.levels[sv]
        if not c.mshrs or x >= c.mmax_ready:
            return 0
        ready = [c.mready[i] for i in range(c.mshrs) if c.mline[i] == line and c.mready[i] > x]
        return max(ready, default=0)

    def time_access(self, line, f, sv, x, pfk):
        """(completion tick, waited for an in-flight fill)."""
        st = self.st
        lat = self.latency(sv)
        rif = self.inflight(sv, line, x)
        waited = rif > x
        if sv == f:
            c = x + lat
            if rif > c:
                st["wait_inflight"] += rif - c
                c = rif
            return c, waited
        start = x
        entries = {}
        for j in range(f, sv):
            cj = self.levels[j]
            if cj.mshrs:
                entries[j] = self.earliest(cj)
                start = max(start, cj.mready[entries[j]])
        st["wait_mshr"] += start - x
        self.miss_start = start
        if sv == self.n:
            if self.cfg.dram_xfer_ticks:
                ds = self.dram_slot(start, self.cfg.dram_xfer_ticks)
                st["wait_dram_bw"] += ds - start
            else:
                ds = start
            c = ds + lat
        else:
            c = start + lat
            if rif > c:
                st["wait_inflight"] += rif - c
                c = rif
        for j, e in entries.items():
            cj = self.levels[j]
            cj.mline[e], cj.mready[e] = line, c
            cj.mmax_ready = max(cj.mmax_ready, c)
        if f == 0:
            st["miss_ticks"] += c - start
            st["l1_misses_timed"] += 1
        return c, waited

    def train(self, line, sv, stag, site, x, xa, lo, fills_only=False, stores=False):
        """engine.c runPrefetchers: every prefetcher at level ``lo`` or below that a request
        served by level ``sv`` reaches trains, in order, and its candidates are issued (a demand
        load piece: lo 0; a software prefetch that missed its fill level f: lo f + 1, with
        ``fills_only`` only the kinds that see fills; a store piece: lo 1, ``stores``, only
        those that store pieces train). They issue at ``x``, or for an ``arrival``
        prefetcher at ``xa``, the request's miss start; a ``hits`` prefetcher takes a hit at
        its level for a miss."""
        key = (stag << 16) | site
        for lvl, p in self.prefetchers:
            if sv < lvl or lvl < lo or (fills_only and not getattr(p, "sees_fills", False)):
                continue
            if stores and not p.stores:
                continue
            for cand in p.operate(line, sv == lvl and not p.hits, key):
                self.hw_prefetch(lvl, cand, stag, xa if p.arrival else x)

    def hw_prefetch(self, k, line, stag, x):
        sp = self.probe(k, line)
        ls = self.st["level"][k]
        if sp == k:
            ls["pf_redundant"][1] += 1
            return
        if self.timing and not self.pools_free(k, sp, x):
            ls["pf_dropped"][1] += 1
            return
        sv, _ = self.access(k, line, READ, stag, K_HWPF, 2)
        if self.timing:
            self.time_access(line, k, sv, x, 2)

    def classify(self, waited):
        if self.pfh is None:
            return
        kind, lvl = self.pfh
        self.st["level"][lvl]["pf_late" if waited else "pf_useful"][kind - 1] += 1
        self.pfh = None

    # --- commands ---
    def close_command(self):
        if self.command is None:
            return
        counted, t0, m0 = self.command
        self.command = None
        if not counted:
            return
        st = self.stats
        t, m = self.r_last - t0, self.l1_misses_all - m0
        st["commands"] += 1
        st["command_ticks"] += t
        st["command_ticks_max"] = max(st["command_ticks_max"], t)
        st["command_l1_misses"] += m
        if self.timing:
            st["command_ticks_hist"][(t + 1).bit_length() - 1] += 1
        st["command_l1_miss_hist"][(m + 1).bit_length() - 1] += 1

    # --- records ---
    def set_counting(self, on):
        self.st = self.stats if on else self.scratch

    def marker(self, r):
        m, gap = r["flags"], r["gap"]
        if m == MARK_WARMUP_BEGIN:
            self.set_counting(False)
        st = self.st
        if st is not self.stats:
            self.stats["warmup_records"] += 1
        st["records"] += 1
        st["kind"][MARKER] += 1
        if m < B.NMARKERS:
            st["markers"][m] += 1
        if m == MARK_WORK and self.split:
            k = int(r["addr"]) >> WORK_COUNT_BITS
            if k < B.MAX_WORK_KINDS:
                n = int(r["addr"]) & ((1 << WORK_COUNT_BITS) - 1)
                self.wpend[k] = self.wpend.get(k, 0) + n
        if m == MARK_PHASE:
            self.phase = min(r["addr"], B.MAX_PHASES - 1)
            self.stats["nphases_seen"] = max(self.stats["nphases_seen"], self.phase + 1)
        st["instructions"] += gap
        ph = st["phase"][self.phase]
        ph["records"] += 1
        ph["instructions"] += gap
        self.instr += gap
        if self.timing:
            self.t_disp += gap * self.ipt
            self.r_last += gap * self.ipt
            self.dep_ring[self.recno % B.DEP_WINDOW] = self.t_disp
            st["ticks"] += gap * self.ipt
            ph["ticks"] += gap * self.ipt
        if m == MARK_SYSCALL:
            self.syscall(r, st, ph)
        self.recno += 1
        if m == MARK_COMMAND:
            self.close_command()
            self.command = (self.st is self.stats, self.r_last, self.l1_misses_all)
        if m == MARK_WARMUP_END:
            self.set_counting(True)

    def syscall(self, r, st, ph):
        """A SYSCALL marker (engine.c doSyscall): starts when every earlier record has
        retired, holds dispatch and retirement for its per-call and per-byte cost."""
        cfg, site = self.cfg, r["site"]
        c = next((k for k in range(NUM_SYSCALLS) if cfg.syscall_site[k] == site), NUM_SYSCALLS)
        st["syscalls"][c] += 1
        st["syscall_bytes"][c] = (st["syscall_bytes"][c] + int(r["addr"])) & MASK64  # wraps as C
        if not self.timing or c == NUM_SYSCALLS or not (cfg.syscall_call_ticks[c]
                                                         or cfg.syscall_byte_q16[c]):
            return  # no call named, or no cost for it: not even the drain
        cost = cfg.syscall_call_ticks[c] + (
            ((int(r["addr"]) * cfg.syscall_byte_q16[c] + 32768) & MASK64) >> 16)
        t0, r0 = max(self.t_disp, self.r_last), self.r_last
        self.t_disp = self.r_last = t0 + cost
        self.dep_ring[self.recno % B.DEP_WINDOW] = self.t_disp
        st["syscall_ticks"] += cost
        st["ticks"] += self.r_last - r0
        ph["ticks"] += self.r_last - r0

    def record_ticks(self, r, ninstr: int) -> int:
        """timing.h recordTicks: the WORK markers' instructions at their kinds' rates, the
        rest of the record's at its site's kind's; with the work's stores, the gap's stores
        (each kind's instructions at kind_store_q16 / 65536 a piece; the record's own
        instruction is not work): the whole ones are the record's, the fraction carries."""
        if not self.split:
            return ninstr * self.ipt
        t, rest, q = 0, ninstr, 0
        for k in sorted(self.wpend):
            n = min(self.wpend[k], rest)
            t += n * self.kticks[k]
            q += n * self.kstq[k]
            rest -= n
        self.wpend = {}
        site = int(r["site"])
        own = self.cfg.site_kind[site] if site < B.MAX_SITES else 0
        own = own if own < B.MAX_WORK_KINDS else 0
        if self.wst:
            q += max(rest - 1, 0) * self.kstq[own]
            self.wst_new, self.wst_acc = divmod(self.wst_acc + q, 65536)
        return t + rest * self.kticks[own]

    def store_admit(self, D: int, w: int) -> int:
        """timing.h storeAdmit: a record with ``w`` stores to place (its gap's, then its
        own) dispatches once its last one has an entry: the store buffer's entries are the
        last N stores' (sb_commits, oldest first), and the last of w needs the min(w, N)-th
        oldest to have committed (with w > N, every earlier store)."""
        N = self.cfg.store_buffer
        pos = len(self.sb_commits) - N + min(w, N) - 1
        if pos < 0:
            return D
        b = self.sb_commits[pos]
        if b > D:
            self.st["wait_store_buffer"] += b - D
            return b
        return D

    def work_commit(self, P: int) -> None:
        """timing.h workCommit: the record's work stores commit in order at the latest of
        P (its gap's retirement) and the previous store's commit."""
        m = self.wst_new
        if not m:
            return
        N = self.cfg.store_buffer
        c = max(P, self.sb_last)
        self.sb_commits = (self.sb_commits + [c] * min(m, N))[-N:]
        self.sb_last = c
        self.st["work_stores"] += m
        self.wst_new = 0

    def sched_admit(self, need: int, D: int) -> int:
        """Dispatch tick of a record wanting ``need`` scheduler entries at ``D``: the
        holders that issued by then free theirs; while ``need`` does not fit beside the
        rest, it waits for the earliest holder to issue (MODEL.md §6)."""
        while True:
            keep = [h for h in self.sched if h[0] > D]
            self.sched_used -= sum(n for x, n in self.sched if x <= D)
            self.sched = keep
            if self.sched_used + need <= self.cfg.scheduler:
                return D
            x = min(h[0] for h in self.sched)
            self.st["wait_scheduler"] += x - D
            D = x

    def memory(self, r):
        st, cfg, W, lb = self.st, self.cfg, self.W, self.lb
        kind, addr, tag = r["kind"], r["addr"], r["tag"]
        ninstr = r["gap"] + 1
        if st is not self.stats:
            self.stats["warmup_records"] += 1
        st["records"] += 1
        st["kind"][kind] += 1
        st["instructions"] += ninstr
        ph = st["phase"][self.phase]
        ph["records"] += 1
        ph["instructions"] += ninstr
        self.instr += ninstr
        D = X = rt = 0
        if self.timing:
            rt = self.record_ticks(r, ninstr)
            D = self.t_disp + rt
            if self.instr > cfg.rob:
                lim = self.instr - cfg.rob
                while self.rob and self.rob[0][0] <= lim:
                    self.blk = self.rob.pop(0)
                if self.blk is not None:
                    b = self.blk[1] + (lim - self.blk[0]) * self.ipt
                    if b > D:
                        st["stall_rob"][self.blk[2]] += b - D
                        D = b
            sb = cfg.store_buffer
            w = self.wst_new + (kind == STORE)
            if sb and w:  # the gap's work stores and a store's own need entries
                D = self.store_admit(D, w)
            need = min(ninstr, cfg.scheduler)
            if need:
                D = self.sched_admit(need, D)
            self.t_disp = X = D
            dep = r["dep"]
            if (kind != STORE or sb) and dep and dep < B.DEP_WINDOW and dep <= self.recno:
                c = self.dep_ring[(self.recno - dep) % B.DEP_WINDOW]
                if c > X:
                    st["wait_dep"] += c - X
                    X = c
                    if need:  # it waits for its producer: it holds its entries until X
                        self.sched.append((X, need))
                        self.sched_used += need
        C = D + W
        cls = self.n + 1
        sb_store = self.timing and kind == STORE and cfg.store_buffer
        arrive = 0  # a store with a store buffer: its lines' arrival (its read-for-ownership)
        done, served = max(X, C), TIMELINE_DROPPED  # the timeline's completion, level
        if kind == PREFETCH:
            line = self.phys(addr >> lb)
            xp = X
            ok = True
            if cfg.tlb:
                self.walk_now = X
                t, walked = self.translate(addr, True)
                if t is None:
                    st["swpf_dropped_tlb"] += 1
                    ok = False
                elif self.timing:
                    st["wait_tlb"] += t * W
                    xp = self.walk_time(xp, t * W) if walked else xp + t * W
            if ok:
                f = cfg.swpf_level
                sp = self.probe(f, line)
                if sp == f:
                    self.access(f, line, READ, tag, K_SWPF, 1)
                    served = f
                elif self.timing and not self.pools_free(f, sp, xp):
                    st["level"][f]["pf_dropped"][0] += 1
                else:
                    sv, _ = self.access(f, line, READ, tag, K_SWPF, 1)
                    served = sv
                    xa = xp  # an arrival prefetcher's tick: the miss's start
                    if self.timing:
                        done, _ = self.time_access(line, f, sv, xp, 1)
                        if sv != f:
                            xa = self.miss_start
                    if (cfg.swpf_trains or self.pf_fills) and sv > f:
                        self.train(line, sv, tag, r["site"], xp, xa, f + 1,
                                   not cfg.swpf_trains)
        else:
            is_store = kind == STORE
            size = r["size"] or 1
            first, last = addr >> lb, (addr + size - 1) >> lb
            lsize = 1 << lb
            if last != first:
                st["multiline"] += 1
            svmax = 0
            for vline in range(first, last + 1):
                st["pieces"] += 1
                a0 = vline << lb
                line = self.phys(vline)
                p0, p1 = max(addr, a0), min(addr + size, a0 + lsize)
                xp = X
                if cfg.tlb:
                    self.walk_now = X
                    t, walked = self.translate(p0, False)
                    if self.timing and (not is_store or sb_store):
                        st["wait_tlb"] += t * W
                        xp = self.walk_time(xp, t * W) if walked else xp + t * W
                self.pfh = None
                # a whole-line store allocates without a fetch unless full_line_store_fetch
                full = p1 - p0 == lsize and not cfg.full_line_store_fetch
                op = (WFULL if full else WRITE) if is_store else READ
                sv, _ = self.access(0, line, op, tag, K_STORE if is_store else K_LOAD, 0)
                svmax = max(svmax, sv)
                xa = xp  # an arrival prefetcher's tick: the miss's start, for a timed miss
                if self.timing and not is_store:
                    c, waited = self.time_access(line, 0, sv, xp, 0)
                    xa = self.miss_start if sv else xp
                    C = max(C, c)
                    self.classify(waited)
                elif sb_store:
                    c, waited = self.time_access(line, 0, sv, xp, 0)
                    xa = self.miss_start if sv else xp
                    arrive = max(arrive, c)
                    self.classify(waited)
                else:
                    self.classify(False)
                if not is_store:
                    self.train(line, sv, tag, r["site"], xp, xa, 0)
                elif self.pf_stores:
                    self.train(line, sv, tag, r["site"], xp, xa, 1, stores=True)
            served, done = svmax, max(C, arrive) if sb_store else C  # a store's: its lines'
            if not is_store:
                cls = svmax
                if self.timing:
                    st["load_latency"] += C - X
                    st["loads_timed"] += 1
        if self.timing:
            # cause of the retire time: this op's level if its completion set it, else
            # whatever held up the op before it (in-order retirement)
            if self.wst:  # the gap's stores retire with it, before the record's own
                self.work_commit(self.r_last + rt)
            cause = cls if C > self.r_last + rt else self.last_cause
            self.last_cause = cause
            R = max(self.r_last + rt, C)
            self.rob.append((self.instr, R, cause))
            st["ticks"] += R - self.r_last
            ph["ticks"] += R - self.r_last
            self.r_last = R
            self.dep_ring[self.recno % B.DEP_WINDOW] = C
            if sb_store:  # commits in order, once retired and its lines have arrived
                commit = max(R, self.sb_last, arrive)
                st["store_commit_lag"] += commit - R
                self.sb_last = commit
                self.sb_commits = (self.sb_commits + [commit])[-cfg.store_buffer:]
            if self.timeline and 0 <= self.recno - self.timeline[0] < self.timeline[1]:
                self.timeline[2][self.recno] = (D, X, done, R, served)
        self.recno += 1

    def run(self, records: np.ndarray) -> None:
        fields = ("addr", "gap", "dep", "size", "kind", "tag", "site", "flags")
        cols = [records[f].tolist() for f in fields]
        for vals in zip(*cols, strict=True):
            r = dict(zip(fields, vals, strict=True))
            if r["kind"] == MARKER:
                self.marker(r)
            elif r["kind"] < MARKER:
                self.memory(r)
            else:
                self.st["records"] += 1
                self.recno += 1

    def peek_set(self, level: int, set_index: int) -> list[int | None]:
        """Lines held by one set, way by way (None = invalid way); for tests."""
        return [x.line if x is not None else None for x in self.levels[level].sets[set_index]]

    def finish(self) -> dict:
        if self.finished:
            return self.stats
        self.finished = True
        self.close_command()
        self.set_counting(True)
        st = self.st
        if self.cfg.flush_at_end:
            for k, c in enumerate(self.levels):
                for s in range(c.nsets - 1, -1, -1):
                    ways = sorted(range(c.ways), key=lambda w: (-c.policy.age(s, w), -w))
                    for w in ways:
                        x = c.sets[s][w]
                        if x is None or not x.dirty:
                            continue
                        x.dirty = False
                        st["level"][k]["writebacks"] += 1
                        st["level"][k]["writebacks_flush"] += 1
                        self.access(k + 1, x.line, WFULL, x.stag, K_WRITEBACK, 0)
        for k, c in enumerate(self.levels):
            for s in range(c.nsets):
                for x in c.sets[s]:
                    if x is not None and x.pf:
                        st["level"][k]["pf_unused_end"][x.pf - 1] += 1
        return self.stats
