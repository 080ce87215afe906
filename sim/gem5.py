"""The gem5 backend: simulate a kvt trace with gem5's classic caches, next to kvsim's engine.

``kvsim simulate TRACE --engine gem5 --cpu PRESET [--gem5 PATH]`` runs :func:`run`:

1. the trace is exported as a gem5 packet trace (:func:`kvsim.traces.convert.gem5.
   records_to_gem5`: loads ``ReadReq``, stores ``WriteReq``, software prefetches
   ``SoftPFReq``, accesses split at line boundaries);
2. :func:`config_script` writes a gem5 configuration script: a ``System`` clocked at the
   preset's frequency, one classic ``Cache`` per preset level (size, ways, line size as
   ``cache_line_size``, latency as tag/data/response latency, miss buffers as ``mshrs``,
   replacement policy, clusivity), joined by ``L2XBar``\\ s, the last on a ``SystemXBar`` to a
   ``SimpleMemory`` with no backing store (``null=True``: only addresses matter), and a
   ``TrafficGen`` whose one TRACE state replays the packet trace, then an EXIT state;
3. the gem5 binary (``--gem5`` or ``$GEM5``; a NULL-ISA build such as
   ``build/NULL/gem5.opt``, compiled with protobuf) runs it with ``--outdir`` in a temporary
   directory;
4. :func:`parse_stats` reads ``stats.txt`` into the result dict kvsim's engine returns
   (``levels`` with ``demand_accesses``, ``demand_misses``, ``accesses``, ``hits``,
   ``misses``, ``writebacks`` per level), and the same trace runs on kvsim's engine with the
   same model: functional, no TLB, no hardware prefetchers, no final flush.

What the two models share, and what they do not:

* Replay is serial: packets are :data:`SPACING_TICKS` apart, so every access completes
  before the next is sent. gem5 counts an access to a line whose miss is still in flight as
  a miss (an MSHR hit); kvsim's functional counts have no time, so spacing the packets is
  what makes the counts comparable.
* Replacement: ``lru`` -> ``LRURP``, ``plru`` -> ``TreePLRURP``, ``srrip`` -> ``RRIPRP``,
  ``brrip`` -> ``BRRIPRP``, ``random`` -> ``RandomRP``; only ``lru`` is the same model
  access for access (:func:`model_differences` says why the others are not).
* Clusivity: ``non-inclusive`` -> ``mostly_incl`` (gem5's classic caches never
  back-invalidate, which is kvsim's non-inclusive); ``exclusive`` -> ``mostly_excl`` with
  ``writeback_clean`` on the level above; ``inclusive`` has no gem5 classic equivalent and
  is run as ``mostly_incl`` (noted in the result).
* gem5 caches are write-back, write-allocate, and a partial store miss fetches the line
  (``ReadExReq``), as kvsim's do. Two rules of gem5's that kvsim's non-inclusive model
  lacks (sim/GEM5.md): a clean line evicted above is looked up below (``CleanEvict``),
  which refreshes its recency there, and a whole-line store miss invalidates the line
  below (``InvalidateReq``).

Terms: *packet* is a gem5 memory request in the trace; *level* a preset cache level.
"""

from __future__ import annotations

import math
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .config import CpuConfig

__all__ = ["GEM5_ENV", "REPLACEMENT", "SPACING_TICKS", "Gem5Error", "compare_text",
           "config_script", "find_binary", "kvsim_requests", "model_differences", "notes",
           "parse_stats", "rel_diff", "run", "warmup_windows"]

GEM5_ENV = "GEM5"
SPACING_TICKS = 1_000_000  #: ticks (1 us at gem5's 1 ps tick) between replayed packets
REPLACEMENT = {"lru": "LRURP", "plru": "TreePLRURP", "srrip": "RRIPRP", "brrip": "BRRIPRP",
               "random": "RandomRP", "qlru": "RRIPRP"}
CLUSIVITY = {"non-inclusive": "mostly_incl", "inclusive": "mostly_incl",
             "exclusive": "mostly_excl"}
HOW_TO = (f"no gem5 binary: pass --gem5 PATH or set {GEM5_ENV}=PATH to a gem5 NULL-ISA build "
          "with protobuf (scons build/NULL/gem5.opt in a gem5 checkout)")


class Gem5Error(RuntimeError):
    """gem5 is missing, failed, or wrote statistics that cannot be read."""


def find_binary(path: str | None = None) -> str:
    """The gem5 binary: ``path``, else ``$GEM5``; :class:`Gem5Error` with :data:`HOW_TO`
    when neither names an executable file."""
    cand = path or os.environ.get(GEM5_ENV)
    if not cand:
        raise Gem5Error(HOW_TO)
    resolved = shutil.which(cand) or cand
    if not (os.path.isfile(resolved) and os.access(resolved, os.X_OK)):
        raise Gem5Error(f"{cand}: not an executable file; {HOW_TO}")
    return resolved


def _counterpart(table: dict[str, str], name: str, level: str, what: str) -> str:
    """gem5's name for the engine's ``name`` (a policy or an inclusion mode); a name the
    engine's registry has and ``table`` does not is an error, never a silent stand-in."""
    try:
        return table[name]
    except KeyError:
        raise Gem5Error(f"{level}: {what} {name!r} has no gem5 counterpart (mapped: "
                        f"{', '.join(table)})") from None


def _cache_name(i: int) -> str:
    return f"cache{i}"


def config_script(cpu: CpuConfig, trace_file: str, last_tick: int, mem_bytes: int = 1 << 48,
                  warmup: Sequence[tuple[int, int]] = ()) -> str:
    """The gem5 configuration script (Python run by gem5) for ``cpu`` replaying the packet
    trace ``trace_file`` whose last packet is at ``last_tick``. The script writes the
    TrafficGen's configuration next to itself; gem5 reads ``trace_file`` relative to that
    (then to its working directory), and the name must hold no white space (the
    configuration is split at white space).
    ``warmup``: (first, last) packet tick of each warm-up window, in order; the script dumps
    the statistics before each window and resets them after it, so the blocks of
    ``stats.txt`` add up to the measured packets only (:func:`parse_stats` sums them)."""
    if not trace_file or any(ch.isspace() for ch in trace_file):
        raise ValueError(f"gem5 trace file name {trace_file!r}: empty or holds white space")
    levels = []
    for i, c in enumerate(cpu.caches):
        nxt = cpu.caches[i + 1] if i + 1 < len(cpu.caches) else None
        levels.append({
            "name": _cache_name(i), "preset_name": c.name, "size": c.size, "assoc": c.ways,
            "latency": max(1, int(c.latency)), "mshrs": c.mshrs or 256,
            "replacement": _counterpart(REPLACEMENT, c.replacement, c.name, "replacement"),
            "clusivity": _counterpart(CLUSIVITY, c.inclusion, c.name, "inclusion"),
            "writeback_clean": bool(nxt is not None and nxt.inclusion == "exclusive"),
        })
    line = cpu.caches[0].line
    freq = cpu.freq_ghz or 4.0
    snoop = [sum(c.size for c in cpu.caches[:i + 1]) for i in range(len(cpu.caches))]
    windows = [(int(a), int(b)) for a, b in warmup]
    duration = last_tick + 10 * SPACING_TICKS
    return f'''# gem5 configuration written by kvsim (kvsim.sim.gem5.config_script) for the
# preset {cpu.name!r}: classic caches, a TrafficGen replaying a packet trace.
import os

import m5
from m5.objects import *  # noqa: F403 -- gem5's configuration idiom

LEVELS = {levels!r}
TRACE = {trace_file!r}
SNOOP_BYTES = {snoop!r}  # bytes of cache above each crossbar (L2XBar i, then the membus)
SPACING = {SPACING_TICKS}
WARMUP = {windows!r}  # (first, last) tick of each warm-up window's packets
here = os.path.dirname(os.path.abspath(__file__))
tgen_cfg = os.path.join(here, "tgen.cfg")
# the EXIT state lasts a packet spacing: with no duration its self-transition fires again at
# the same tick ahead of the exit event it scheduled, forever (each one allocating)
with open(tgen_cfg, "w") as f:
    f.write("STATE 0 {duration} TRACE %s 0\\n" % TRACE)
    f.write("STATE 1 %d EXIT\\n" % SPACING)
    f.write("INIT 0\\n")
    f.write("TRANSITION 0 1 1\\n")
    f.write("TRANSITION 1 1 1\\n")

system = System(membus=SystemXBar(width=64))
# a crossbar's snoop filter tracks every line cached above it; its default capacity (8 MiB)
# is smaller than a large last level, and overflowing it is a gem5 panic
system.membus.snoop_filter = SnoopFilter(lookup_latency=0,
                                         max_capacity="%dB" % (2 * SNOOP_BYTES[-1]))
system.clk_domain = SrcClockDomain(clock="{freq}GHz", voltage_domain=VoltageDomain())
system.mem_mode = "timing"
system.cache_line_size = {line}
system.mem_ranges = [AddrRange(0, size={mem_bytes})]
system.tgen = TrafficGen(config_file=tgen_cfg, elastic_req=False)
system.mem = SimpleMemory(range=system.mem_ranges[0], null=True, latency="30ns")
system.mem.port = system.membus.mem_side_ports
system.system_port = system.membus.cpu_side_ports

upstream = system.tgen.port
for i, lv in enumerate(LEVELS):
    cache = Cache(size="%dB" % lv["size"], assoc=lv["assoc"], tag_latency=lv["latency"],
                  data_latency=lv["latency"], response_latency=lv["latency"],
                  mshrs=lv["mshrs"], tgts_per_mshr=16, write_buffers=lv["mshrs"],
                  clusivity=lv["clusivity"], writeback_clean=lv["writeback_clean"])
    cache.replacement_policy = globals()[lv["replacement"]]()
    setattr(system, lv["name"], cache)
    cache.cpu_side = upstream
    if i + 1 < len(LEVELS):
        xbar = L2XBar(width=64)
        xbar.snoop_filter = SnoopFilter(lookup_latency=0,
                                        max_capacity="%dB" % (2 * SNOOP_BYTES[i]))
        setattr(system, "xbar%d" % i, xbar)
        cache.mem_side = xbar.cpu_side_ports
        upstream = xbar.mem_side_ports
    else:
        cache.mem_side = system.membus.cpu_side_ports

root = Root(full_system=False, system=system)
m5.instantiate()


def run_until(tick):
    """Simulate to ``tick`` (half a packet spacing after a packet: it has completed)."""
    if tick > m5.curTick():
        m5.simulate(tick - m5.curTick())


# Statistics of warm-up packets are not counted: a dump closes the measured segment before a
# window, a reset drops the window's counts; kvsim sums the dumped blocks.
for first, last in WARMUP:
    run_until(first - SPACING // 2)
    m5.stats.dump()
    run_until(last + SPACING // 2)
    m5.stats.reset()
event = m5.simulate()
print("kvsim-gem5: exit at tick %d: %s" % (m5.curTick(), event.getCause()))
'''


_STAT = re.compile(r"^(\S+)\s+(-?[0-9.eE+]+|nan|inf)\b")


def read_stats(text: str) -> dict[str, float]:
    """Name -> value summed over the statistics blocks of a gem5 ``stats.txt``: each block
    is one dump, and :func:`config_script` resets the counters after every dump, so the sum
    is the whole measured run (one block without warm-up). Non-finite values are left out."""
    blocks = text.split("---------- Begin Simulation Statistics ----------")
    if len(blocks) < 2:
        raise Gem5Error("stats.txt has no 'Begin Simulation Statistics' block")
    out: dict[str, float] = {}
    for block in blocks[1:]:
        for line in block.splitlines():
            m = _STAT.match(line)
            if m:
                v = float(m.group(2))
                if math.isfinite(v):
                    out[m.group(1)] = out.get(m.group(1), 0.0) + v
    return out


def parse_stats(text: str, cpu: CpuConfig, records: int | None = None) -> dict[str, Any]:
    """kvsim's result dict from gem5's ``stats.txt`` text for a run of :func:`config_script`:
    per level (named and in the order of ``cpu.caches``) ``demand_accesses``,
    ``demand_misses`` (gem5's ``demandAccesses``/``demandMisses``: reads and writes from
    above), ``accesses``, ``hits``, ``misses`` (``overall*``: plus prefetches),
    ``writebacks`` and ``miss_rate``; ``upgrade_misses``, the stores that found their line
    present but read-only (gem5 counts them as misses and sends an ``UpgradeReq`` down: the
    crossbar below counts those), and ``data_misses``, ``misses`` without them: the misses
    whose line was absent, what kvsim counts. A statistic gem5 omits (it drops zero counts)
    is 0."""
    stats = read_stats(text)
    levels = []
    n = len(cpu.caches)
    for i, c in enumerate(cpu.caches):
        p = f"system.{_cache_name(i)}."
        if not any(k.startswith(p) for k in stats):
            raise Gem5Error(f"stats.txt has no statistics for {p[:-1]} ({c.name})")

        def get(name: str, p: str = p) -> int:
            return int(stats.get(f"{p}{name}::total", stats.get(f"{p}{name}", 0.0)))

        acc, miss = get("overallAccesses"), get("overallMisses")
        below = f"system.xbar{i}." if i + 1 < n else "system.membus."
        upgrades = int(stats.get(f"{below}transDist::UpgradeReq", 0.0))
        levels.append({
            "name": c.name, "role": "LLC" if i == n - 1 and n > 1 else f"L{i + 1}",
            "size": c.size, "ways": c.ways, "line": c.line, "replacement": c.replacement,
            "inclusion": c.inclusion, "accesses": acc, "hits": get("overallHits"),
            "misses": miss, "miss_rate": miss / acc if acc else 0.0,
            "demand_accesses": get("demandAccesses"), "demand_misses": get("demandMisses"),
            "writebacks": get("writebacks"), "upgrade_misses": upgrades,
            "data_misses": miss - upgrades,
        })
    return {"cpu": cpu.name, "trace": None, "engine": "gem5", "mode": "functional",
            "records": records, "levels": levels,
            "sim_ticks": int(stats.get("simTicks", 0))}


def warmup_windows(chunks: Iterable[np.ndarray], line: int,
                   windows: list[tuple[int, int]]) -> Iterator[np.ndarray]:
    """Pass ``chunks`` through, appending to ``windows`` the (first, last) packet numbers
    (1-based, as :func:`records_to_gem5` numbers them with ``packet_spacing``) of each
    warm-up window: the packets of the records from a ``WARMUP_BEGIN`` marker to the next
    ``WARMUP_END`` (kvsim's rule); a window still open at the end runs to the last packet
    and is appended when the input ends. A load or store is one packet per cache line it
    touches, a prefetch one packet, a marker none."""
    from kvsim import traces

    sent = 0
    begin: int | None = None
    for chunk in chunks:
        kind = chunk["kind"]
        mem = kind < traces.KIND_MARKER
        a = chunk["addr"].astype(np.uint64)
        last = a + (np.maximum(chunk["size"], 1).astype(np.uint64) - np.uint64(1))
        ln = np.uint64(line)
        n = np.where(mem, (last // ln - a // ln + np.uint64(1)).astype(np.int64), 0)
        n = np.where(kind == traces.KIND_PREFETCH, 1, n)
        before = sent + np.cumsum(n) - n  # packets before each record
        marks = np.nonzero(~mem & ((chunk["flags"] == traces.MARK_WARMUP_BEGIN)
                                   | (chunk["flags"] == traces.MARK_WARMUP_END)))[0]
        for i in marks.tolist():
            if chunk["flags"][i] == traces.MARK_WARMUP_BEGIN:
                if begin is None:
                    begin = int(before[i]) + 1
            elif begin is not None:
                if int(before[i]) >= begin:
                    windows.append((begin, int(before[i])))
                begin = None
        sent += int(n.sum())
        yield chunk
    if begin is not None and sent >= begin:
        windows.append((begin, sent))


def run(trace: str | os.PathLike[str], cpu: CpuConfig, gem5: str | None = None,
        keep: str | os.PathLike[str] | None = None, timeout: float | None = None
        ) -> dict[str, Any]:
    """Run ``trace`` (a .kvt path) through gem5 with ``cpu``'s caches; returns the result
    dict of :func:`parse_stats` plus ``gem5`` (binary, version, packets, warm-up packets,
    exit line, notes). ``keep``: a directory to keep the packet trace, script and gem5's
    output in (else a temporary one). Warm-up records are replayed but not counted, as in
    kvsim (see :func:`config_script`)."""
    from kvsim import traces
    from kvsim.traces.convert.gem5 import records_to_gem5

    binary = find_binary(gem5)
    line = cpu.caches[0].line
    with tempfile.TemporaryDirectory(prefix="kvsim-gem5-") as tmp:
        work = Path(keep) if keep else Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        trc = work / "trace.trc.gz"
        count = [0]
        windows: list[tuple[int, int]] = []

        def counted(reader: Any) -> Any:
            for chunk in reader:
                count[0] += chunk.size
                yield chunk

        with traces.open(trace) as reader:
            n_packets = records_to_gem5(warmup_windows(counted(reader), line, windows), trc,
                                        line_size=line, prefetch="softpf",
                                        packet_spacing=SPACING_TICKS)
        records = count[0]
        last_tick = n_packets * SPACING_TICKS
        script = work / "kvsim_gem5_config.py"
        script.write_text(config_script(
            cpu, trc.name, last_tick,
            warmup=[(a * SPACING_TICKS, b * SPACING_TICKS) for a, b in windows]))
        out = work / "m5out"
        proc = subprocess.run([binary, f"--outdir={out}", str(script)], capture_output=True,
                              text=True, timeout=timeout, check=False)
        stats_file = out / "stats.txt"
        if proc.returncode != 0 or not stats_file.is_file():
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
            raise Gem5Error(f"{binary} exited with status {proc.returncode}: {tail[0]}")
        if "unable to replay the entire trace" in proc.stderr + proc.stdout:
            raise Gem5Error(f"{binary}: the TrafficGen did not replay the whole packet trace")
        res = parse_stats(stats_file.read_text(), cpu, records)
        exit_line = next((ln for ln in proc.stdout.splitlines()
                          if ln.startswith("kvsim-gem5:")), "")
        version = next((ln.split()[-1] for ln in proc.stdout.splitlines()
                        if ln.startswith("gem5 version ")), None)
    res["gem5"] = {"binary": os.path.basename(binary), "version": version,
                   "packets": n_packets, "warmup_packets": sum(b - a + 1 for a, b in windows),
                   "exit": exit_line, "notes": notes(cpu)}
    return res


def notes(cpu: CpuConfig) -> list[str]:
    """Where gem5's model of ``cpu`` is not kvsim's, one line per level that differs (the
    reasons of :func:`model_differences`)."""
    return [f"{c.name}: {'; '.join(why)}"
            for c, why in zip(cpu.caches, model_differences(cpu), strict=True) if why]


def model_differences(cpu: CpuConfig) -> list[list[str]]:
    """Per level of ``cpu``, why gem5's classic cache built by :func:`config_script` is not
    kvsim's model of it (empty: the same model, so the miss counts must agree)."""
    out: list[list[str]] = []
    for i, c in enumerate(cpu.caches):
        why = []
        if c.replacement in ("srrip", "brrip"):
            why.append(f"{c.replacement}: gem5's {REPLACEMENT[c.replacement]} ages and inserts "
                       "differently")
        elif c.replacement == "qlru":
            why.append("qlru: gem5's RRIPRP inserts at 2 and ages every line (QLRU_H00_M1_R0_U1 "
                       "inserts at 1 and ages the others)")
        elif c.replacement == "random":
            why.append("random: gem5 draws other random numbers")
        elif c.replacement == "plru":
            why.append("plru: gem5's TreePLRURP takes the tree's victim even when a way is "
                       "invalid (kvsim fills the lowest invalid way first)")
        if c.inclusion == "inclusive":
            why.append("inclusive: gem5's classic caches do not back-invalidate "
                       "(run as mostly_incl)")
        elif c.inclusion == "exclusive":
            why.append("exclusive: gem5 drops a clean victim that a level above still "
                       "holds (Cache::doWritebacks); kvsim puts every clean victim here")
        if i == 0 and cpu.swpf_fill != 0:
            why.append(f"software prefetches fill {cpu.caches[cpu.swpf_fill].name} in kvsim, "
                       "L1 in gem5")
        above = [a.name for a, w in zip(cpu.caches[:i], out, strict=True) if w]
        if above:
            why.append(f"fed by {', '.join(above)}, which differ{'s' if len(above) == 1 else ''}")
        out.append(why)
    return out


def kvsim_requests(level: dict[str, Any]) -> tuple[int, int]:
    """(accesses, misses) of one level of kvsim's result that gem5 counts in
    ``overallAccesses``/``overallMisses``: loads, stores and software prefetches from above,
    not write-backs or clean victims. (At L2 and below gem5 sees the fill of an L1
    software-prefetch miss as a demand read, kvsim as a prefetch: the sum is the same.)"""
    bk = level["by_kind"]
    return (sum(bk[k]["accesses"] for k in ("load", "store", "swpf")),
            sum(bk[k]["misses"] for k in ("load", "store", "swpf")))


def rel_diff(gem5_misses: int, kvsim_misses: int) -> float | None:
    """(gem5 - kvsim) / kvsim; 0 when both are 0, None when only kvsim's is 0."""
    if kvsim_misses:
        return (gem5_misses - kvsim_misses) / kvsim_misses
    return 0.0 if gem5_misses == 0 else None


def compare_text(gem5_res: dict[str, Any], native: dict[str, Any]) -> str:
    """The two results side by side: per level the misses of loads, stores and software
    prefetches (:func:`kvsim_requests`; gem5's ``overallMisses``) and their difference."""
    rows = [f"{'level':<8} {'kvsim misses':>14} {'gem5 misses':>14} {'diff':>8}   "
            f"{'kvsim accesses':>15} {'gem5 accesses':>15}"]
    for k, g in zip(native["levels"], gem5_res["levels"], strict=True):
        ka, km = kvsim_requests(k)
        gm = g["data_misses"]
        d = rel_diff(gm, km)
        diff = "n/a" if d is None else f"{d * 100:+.2f}%"
        rows.append(f"{k['name']:<8} {km:>14,d} {gm:>14,d} {diff:>8}   "
                    f"{ka:>15,d} {g['accesses']:>15,d}")
    head = (f"{gem5_res['cpu']}: gem5 ({gem5_res['gem5']['binary']}, "
            f"{gem5_res['gem5']['packets']:,d} packets) vs kvsim (functional, no TLB, "
            f"no hardware prefetchers, no final flush); misses of loads, stores and "
            f"software prefetches")
    notes_ = [f"note: {n}" for n in gem5_res["gem5"]["notes"]]
    return "\n".join([head, *rows, *notes_])
