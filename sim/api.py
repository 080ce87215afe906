"""``sim.simulate``: run a trace through a CPU model and return JSON-ready statistics."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kvsim import traces
from kvsim.traces.validate import RecordError, RecordValidator

from . import _binding as B
from . import _feed
from .config import ConfigError, CpuConfig, engine_syscall_sites, load_cpu

if TYPE_CHECKING:  # imported where arrays are made: a trace file simulates without numpy
    import numpy as np

#: Names of the engine's marker counters: the trace format's marker types (traces/
#: trace_format.h), then "m<i>" for the counters past them.
MARKER_NAMES = traces.MARKER_NAMES + [f"m{i}" for i in range(traces.NUM_MARKERS, B.NMARKERS)]


def level_roles(n: int) -> list[str]:
    """Stable role names of ``n`` cache levels, from the core outward: ``L1``, ``L2``, ...,
    and ``LLC`` for the last of two or more (a single level is ``L1``). Preset names differ
    by CPU (Graviton's last level is "SLC", EPYC's "L3"); roles do not."""
    return [("LLC" if i == n - 1 and n > 1 else f"L{i + 1}") for i in range(n)]


def check_array(records: np.ndarray) -> None:
    """Refuse a record array that breaks FORMAT.md's record rules, as the trace reader refuses
    such a trace (the same rules, ``traces.validate.RecordValidator``, and the same message
    after the location): ``TraceError("record array: record <i>: <field>: <problem>")``. The
    array is a whole trace: a ``dep`` must name a load within it."""
    try:
        RecordValidator().check(records)
    except RecordError as e:
        raise traces.TraceError(f"record array: record {e.index}: {e.field}: {e.problem}") \
            from None


DECODERS = ("compiled", "python")


def _is_array(x: Any) -> bool:
    """``x`` is a numpy array (numpy is not imported to tell: without it, none exists)."""
    np = sys.modules.get("numpy")
    return np is not None and isinstance(x, np.ndarray)


def _chunks(source: Any, decode: str = "compiled", validate: bool = True, hold: int = 0,
            arrays: bool = False, header: dict | None = None
            ) -> tuple[Iterable[np.ndarray | B.Records], list[str] | None, dict]:
    if decode not in DECODERS:
        raise ValueError(f"decode must be one of {', '.join(DECODERS)}, got {decode!r}")
    if _is_array(source):
        if source.dtype != traces.RECORD_DTYPE:
            raise TypeError(f"a record array must have dtype traces.RECORD_DTYPE, "
                            f"got {source.dtype}")
        if validate:
            check_array(source)
        if header is None:
            return [source], None, {}
        if not isinstance(header, dict):
            raise TypeError(f"header: must be a trace header (a dict), got {type(header)}")
        tags = header.get("tags")
        return [source], list(tags) if tags else None, header
    if header is not None:
        raise TypeError("header: only for a record array (a file or reader has its own)")
    header = getattr(source, "header", None)
    if header is None:
        raise TypeError("source must be a traces reader (traces.open) or a numpy record array")
    tags = header.get("tags")
    chunks: Iterable[np.ndarray | B.Records] = source
    if decode == "compiled" and isinstance(source, traces.TraceReader) and not source._started:
        from . import _intake

        chunks = _intake.chunks(source, reuse=True, hold=hold, arrays=arrays)
    return chunks, list(tags) if tags else None, header


def simulate(
    source: Any,
    cpu: CpuConfig | str,
    functional: bool = False,
    engine: str = "fast",
    *,
    tlb: bool = True,
    prefetchers: bool = True,
    flush: bool = True,
    page_size: int | None = None,
    tag_names: list[str] | None = None,
    threads: int = 1,
    progress: Callable[[int], object] | None = None,
    decode: str = "compiled",
    timeline: tuple[int, int] | None = None,
    validate: bool = True,
    header: dict | None = None,
) -> dict:
    """Simulate ``source`` on ``cpu`` and return a JSON-serialisable dict of statistics.

    source: a trace path (``str`` or ``Path``; the result's ``trace`` key is set to it), a
    ``traces.open(...)`` reader (its numpy chunks are fed in order; its header's ``tags``
    name the structure tags) or a numpy array of ``traces.RECORD_DTYPE``.
    cpu: a :class:`CpuConfig` or anything :func:`sim.load_cpu` accepts.
    functional: count hits and misses only (``cycles`` is None). A CPU file without
    ``freq_ghz``/``[core]``/``[dram]`` is always functional.
    engine: ``"fast"`` (compiled) or ``"reference"`` (pure Python, slow, same numbers).
    tlb / prefetchers: model the preset's TLBs / hardware prefetchers (DineroIV-style
    validation runs turn both off). flush: write every dirty line back at the end, as
    DineroIV does (the write-back counts include it; ``writebacks_flush`` says how many).
    page_size: 4096 or 2 MiB, overriding the preset's ``[tlb] page_size`` for this run.
    threads: 1-8 threads for the compiled engine's common configuration (every level LRU
    and non-inclusive, no TLB or hardware prefetchers). Other configurations (the presets):
    counting only (``functional``), a last of three levels that is not inclusive runs on a
    second thread when threads >= 2; a TLB runs on a thread of its own when threads >= 2,
    for the slices of records whose translations are costly (sim/README.md). The results
    are identical for any number, only the wall time changes. The result's
    ``engine_threads`` says how many ran.
    progress: called after each chunk with the number of records it held (for example a
    tqdm bar's ``update``); None by default.
    decode: ``"compiled"`` (default): a trace reader's chunks are checked and decoded in
    compiled code on other threads, ahead of the simulation (sim/_intake.py); ``"python"``:
    by the reader itself (the reference). Same records, same errors.
    timeline: ``(first, count)``: the result's ``"timeline"`` lists, for each load, store
    and software prefetch among records first .. first+count-1 (indices in the trace,
    markers included), its ``dispatch``, ``issue``, ``complete`` and ``retire`` cycle and
    the ``level`` that served it (see :func:`timeline_rows`; :func:`dataframes` gives it as
    a frame). Needs timing; the run then takes the engine's record-by-record path on one
    thread (the same statistics).
    validate: check a record array against FORMAT.md's record rules first (``check_array``:
    a bad record raises ``traces.TraceError`` naming it, before anything runs). A reader
    checks its own records (``traces.open(path, validate=...)``), so this applies to arrays.
    header: the header of the trace a record array was read from (``reader.header``): its
    sites' kinds of work, its WORK markers' kinds, its system-call sites and its tags, as a
    file or reader gives them. An array without it is simulated as a trace without a header
    (every site generic work, no system-call sites): not the prediction its file gives. A
    file or reader carries its own header; giving one with it is an error.
    Counts are per cache line touched: an access spanning two lines counts twice.
    """
    return simulate_many(source, [cpu], functional, engine, tlb=tlb, prefetchers=prefetchers,
                         flush=flush, page_size=page_size, tag_names=tag_names,
                         threads=threads, progress=progress, decode=decode,
                         timeline=timeline, validate=validate, header=header)[0]


def simulate_many(
    source: Any,
    cpus: Sequence[CpuConfig | str],
    functional: bool = False,
    engine: str = "fast",
    *,
    tlb: bool = True,
    prefetchers: bool = True,
    flush: bool = True,
    page_size: int | None = None,
    tag_names: list[str] | None = None,
    threads: int = 1,
    progress: Callable[[int], object] | None = None,
    decode: str = "compiled",
    workers: int | None = None,
    timeline: tuple[int, int] | None = None,
    validate: bool = True,
    header: dict | None = None,
) -> list[dict]:
    """Simulate ``source`` on every CPU of ``cpus`` in one pass over the trace: each chunk is
    read and decoded once and fed to every CPU's engine; the engines run side by side on
    ``workers`` threads (default: one per core, at most one per CPU). Returns one result per
    CPU, in order, each equal to what :func:`simulate` returns for that CPU (the same
    parameters apply to all; ``threads`` is each engine's own, see :func:`simulate`).
    """
    if isinstance(source, str | Path):
        with traces.open(source) as reader:
            out = simulate_many(reader, cpus, functional, engine, tlb=tlb,
                                prefetchers=prefetchers, flush=flush, page_size=page_size,
                                tag_names=tag_names, threads=threads, progress=progress,
                                decode=decode, workers=workers, timeline=timeline,
                                validate=validate, header=header)
        for res in out:
            res["trace"] = str(source)
        return out
    if isinstance(cpus, str | Path | CpuConfig):
        raise TypeError("cpus must be a list of CPUs (for one CPU use sim.simulate)")
    cpus = [load_cpu(c) if isinstance(c, str | Path) else c for c in cpus]
    if not cpus:
        raise ValueError("cpus: at least one CPU is needed")
    if page_size not in (None, 4096, 2 * 1024 * 1024):
        raise ConfigError(f"page_size: must be 4096 or 2097152, got {page_size}")
    if not isinstance(threads, int) or not 1 <= threads <= 8:
        raise ConfigError(f"threads: must be 1..8, got {threads!r}")
    if engine not in ("fast", "reference"):
        raise ValueError(f"engine must be 'fast' or 'reference', got {engine!r}")
    windows = [_timeline_window(timeline, (not functional) and cpu.timing_capable)
               for cpu in cpus]
    nw = min(len(cpus), workers or os.cpu_count() or 1)
    chunks, hdr_tags, header = _chunks(source, decode, validate,
                                       hold=_feed.WINDOW - 1 if nw > 1 else 0,
                                       arrays=engine != "fast", header=header)
    cfgs = engine_configs(cpus, header, functional, tlb=tlb, prefetchers=prefetchers,
                          flush=flush, page_size=page_size, threads=threads)
    window = windows[0]
    rows_of: list[Any] = []
    seen, picked = 0, []
    engines: list[Any] = []
    try:
        for cfg in cfgs:
            if engine == "fast":
                engines.append(B.Engine(cfg))
            else:
                from .reference import ReferenceSim

                engines.append(ReferenceSim(cfg))
        if window is not None:
            rows_of = [eng.set_timeline(*window) for eng in engines]

        def pick(chunk: np.ndarray | B.Records) -> None:
            nonlocal seen
            lo, hi = window[0] - seen, window[0] + window[1] - seen
            if hi > 0 and lo < len(chunk):
                arr = chunk.array() if isinstance(chunk, B.Records) else chunk
                picked.append(arr[max(lo, 0):min(hi, len(chunk))].copy())
            seen += len(chunk)

        on_chunk = pick if window is not None else None
        if nw > 1:  # the engines' runs release the GIL: they run side by side
            _feed.feed(chunks, engines, nw, on_chunk, progress)
        else:
            for chunk in chunks:
                if on_chunk is not None:
                    on_chunk(chunk)
                for eng in engines:
                    eng.run(chunk)
                if progress is not None:
                    progress(len(chunk))
        raws = [eng.finish() for eng in engines]
        used = [eng.threads if engine == "fast" else 1 for eng in engines]
    finally:
        if engine == "fast":
            for eng in engines:
                eng.close()
    out = []
    for cpu, cfg, raw, u in zip(cpus, cfgs, raws, used, strict=True):
        res = build_result(raw, cpu, cfg, tag_names or hdr_tags, engine, header)
        res["engine_threads"] = u
        out.append(res)
    if window is not None:
        import numpy as np

        recs = np.concatenate(picked) if picked else np.zeros(0, traces.RECORD_DTYPE)
        for i, (cpu, cfg, res) in enumerate(zip(cpus, cfgs, out, strict=True)):
            rows = rows_of[i]
            if engine == "reference":
                rows = _reference_rows(rows, window)
            res["timeline"] = timeline_rows(rows[:len(recs)], recs, window[0], cpu, cfg,
                                            tag_names or hdr_tags)
    return out


def engine_configs(cpus: Sequence[CpuConfig], header: dict | None, functional: bool = False,
                   *, tlb: bool = True, prefetchers: bool = True, flush: bool = True,
                   page_size: int | None = None, threads: int = 1) -> list[B.EngineConfig]:
    """The engine configuration :func:`simulate_many` runs each of ``cpus`` with on a trace
    of ``header``: timing where the CPU has a model (unless ``functional``), the trace's
    kinds of work at the CPU's rates and its system-call sites."""
    cfgs = []
    for cpu in cpus:
        cfg = cpu.to_engine(timing=(not functional) and cpu.timing_capable, tlb=tlb,
                            prefetchers=prefetchers, flush=flush, page_size=page_size)
        cfg.threads = threads
        cpu.apply_work(cfg, header)  # the trace's kinds of work at the CPU's rates
        engine_syscall_sites(cfg, header)
        cfgs.append(cfg)
    return cfgs


def _timeline_window(timeline: Any, timing: bool) -> tuple[int, int] | None:
    if timeline is None:
        return None
    import numpy as np

    ok = (isinstance(timeline, tuple | list) and len(timeline) == 2
          and all(isinstance(v, int | np.integer) and v >= 0 for v in timeline))
    if not ok:
        raise ConfigError(f"timeline: must be (first, count) with integers >= 0, "
                          f"got {timeline!r}")
    if not timing:
        raise ConfigError("timeline: needs a timing run (not functional, a CPU with [core])")
    return int(timeline[0]), int(timeline[1])


def _reference_rows(rows: dict, window: tuple[int, int]) -> np.ndarray:
    """The reference simulator's captured rows as the engine's TIMELINE_DTYPE array."""
    import numpy as np

    out = np.zeros(window[1], dtype=B.TIMELINE_DTYPE)
    for rec, (d, x, c, r, lv) in rows.items():
        out[rec - window[0]] = (d, x, c, r, lv, B.TIMELINE_CAPTURED)
    return out


def timeline_rows(rows: np.ndarray, records: np.ndarray, first: int, cpu: CpuConfig,
                  cfg: B.EngineConfig, tag_names: list[str] | None) -> list[dict]:
    """JSON-ready timeline rows, one per captured record (``rows``: the engine's
    TIMELINE_DTYPE array over ``records``, the window starting at trace record ``first``).

    Keys: ``record`` (index in the trace), ``kind``, ``tag`` (name), ``addr``, ``dep``;
    ``dispatch``, ``issue``, ``complete``, ``retire`` in cycles from the start of the run
    (ticks / width, so fractions occur): issue is when its producer's data had arrived,
    complete when its data arrived (a prefetch: its fill, or its issue when it found the
    line or was dropped; a store: one cycle after dispatch, or with a store buffer the later
    of that and its line's arrival, its read-for-ownership); ``latency`` = complete -
    issue; ``level``: the preset's name of the level that served it, ``"DRAM"``, or
    ``"dropped"`` (a prefetch without a free miss buffer or dropped on a TLB miss);
    ``role`` likewise (``L1``, ``L2``, ``LLC``, ``DRAM``,
    ``dropped``).
    """
    import numpy as np

    w = cfg.width or 1
    n = len(cpu.caches)
    roles = level_roles(n)
    out = []
    for i in np.flatnonzero(rows["flags"] & B.TIMELINE_CAPTURED):
        row, rec = rows[i], records[i]
        lv = int(row["level"])
        name, role = ((cpu.caches[lv].name, roles[lv]) if lv < n else
                      ("DRAM", "DRAM") if lv == n else ("dropped", "dropped"))
        t = int(rec["tag"])
        out.append({
            "record": first + int(i),
            "kind": traces.KIND_NAMES[int(rec["kind"])],
            "tag": str(tag_names[t]) if tag_names and t < len(tag_names) else
            (traces.TAG_NAMES[t] if t < len(traces.TAG_NAMES) else f"tag{t}"),
            "addr": int(rec["addr"]), "dep": int(rec["dep"]),
            "dispatch": int(row["dispatch"]) / w, "issue": int(row["issue"]) / w,
            "complete": int(row["complete"]) / w, "retire": int(row["retire"]) / w,
            "latency": (int(row["complete"]) - int(row["issue"])) / w,
            "level": name, "role": role,
        })
    return out


def build_result(raw: dict, cpu: CpuConfig, cfg: B.EngineConfig, tag_names: list[str] | None,
                 engine: str, header: dict | None = None) -> dict:
    """Turn raw engine counters (identical for both engines) into the published result."""
    n = cfg.nlevels
    timing = bool(cfg.timing)
    width = cfg.width if timing else 1

    def tname(t: int) -> str:
        if tag_names and t < len(tag_names):
            return str(tag_names[t])
        return f"tag{t}"

    def cyc(ticks: int) -> float:
        return ticks / width

    levels = []
    roles = level_roles(len(cpu.caches))
    kind_names = B.access_kind_names()
    by_tag = []
    for k, c in enumerate(cpu.caches):
        ls = raw["level"][k]
        acc, hit, miss = ls["access"], ls["hit"], ls["miss"]  # NTAGS lists of NKINDS ints
        by_kind = {}
        for j, kn in enumerate(kind_names):
            by_kind[kn] = {"accesses": sum(r[j] for r in acc), "hits": sum(r[j] for r in hit),
                           "misses": sum(r[j] for r in miss)}
        a, h, m = (sum(map(sum, x)) for x in (acc, hit, miss))
        demand_a = by_kind["load"]["accesses"] + by_kind["store"]["accesses"]
        demand_m = by_kind["load"]["misses"] + by_kind["store"]["misses"]
        levels.append({
            "name": c.name, "role": roles[k], "size": c.size, "ways": c.ways, "line": c.line,
            "replacement": c.replacement, "inclusion": c.inclusion,
            "accesses": a, "hits": h, "misses": m, "miss_rate": (m / a) if a else 0.0,
            "demand_accesses": demand_a, "demand_misses": demand_m,
            "fetches": ls["fetches"], "writebacks": ls["writebacks"],
            "writebacks_flush": ls["writebacks_flush"], "evictions": ls["evictions"],
            "back_invalidations": ls["back_invalidations"], "by_kind": by_kind,
        })
        for t, row in enumerate(acc):
            for j, x in enumerate(row):
                if x:
                    by_tag.append({
                        "level": c.name, "role": roles[k], "tag": t, "tag_name": tname(t),
                        "kind": kind_names[j],
                        "accesses": x, "hits": hit[t][j], "misses": miss[t][j],
                    })
    pf: dict = {"software": {}, "hardware": {}, "software_dropped_tlb": raw["swpf_dropped_tlb"]}
    for k, c in enumerate(cpu.caches):
        ls = raw["level"][k]
        for i, which in enumerate(("software", "hardware")):
            d = {name[3:]: ls[name][i] for name in B.LEVEL_PF}
            if any(d.values()):
                pf[which][c.name] = d
    result: dict[str, Any] = {
        "cpu": cpu.name,
        "trace": None,
        "engine": engine,
        "mode": "timing" if timing else "functional",
        "records": raw["records"],
        "warmup_records": raw["warmup_records"],
        "instructions": raw["instructions"],
        "record_kinds": dict(zip(traces.KIND_NAMES,
                                 [int(x) for x in raw["kind"]], strict=True)),
        "pieces": raw["pieces"],
        "multiline_accesses": raw["multiline"],
        "levels": levels,
        "by_tag": by_tag,
        "prefetch": pf,
        "dram": {"reads": raw["dram_reads"], "writes": raw["dram_writes"]},
        "tlb": None,
        "markers": {MARKER_NAMES[i]: int(x) for i, x in enumerate(raw["markers"]) if x},
        "cycles": None,
        "ipc": None,
        "timing": None,
        "notes": list(cpu.notes),
    }
    if cfg.tlb:
        result["tlb"] = {
            "page_size": 1 << cfg.page_bits,
            "dtlb_accesses": raw["dtlb_access"], "dtlb_misses": raw["dtlb_miss"],
            "stlb_accesses": raw["stlb_access"], "stlb_misses": raw["stlb_miss"],
            "walk": "fixed latency (walks do not access the simulated caches)"
            if not cfg.walk_reads else
            f"fixed part + {cfg.walk_reads} page-table read(s) through the caches (loads of "
            "tag 0)",
            "walk_reads": cfg.walk_reads,
            "walkers": cfg.walkers or "unlimited",
        }
        if cfg.guest_page_bits:  # nested paging on the host's smaller pages
            result["tlb"]["guest_page_size"] = 1 << cfg.guest_page_bits
        if cfg.walk_reads and cfg.timing:  # page-table reads: served by, timed at (MODEL §3)
            names = [c.name for c in cpu.caches] + ["DRAM", "host"]
            result["tlb"]["walk_reads_served"] = {
                names[k]: int(raw["walk_served"][k]) for k in range(n + 1)}
            result["tlb"]["walk_reads_timed"] = {
                names[k]: int(raw["walk_timed"][k]) for k in range(n + 2)}
    if timing:
        cycles = -(-raw["ticks"] // width)
        stalls = {}
        for k in range(n + 2):
            name = cpu.caches[k].name if k < n else ("DRAM" if k == n else "core")
            v = int(raw["stall_rob"][k])
            if v:
                stalls[f"rob_full:{name}"] = cyc(v)
        stalls["dependency_wait"] = cyc(raw["wait_dep"])
        stalls["mshr_wait"] = cyc(raw["wait_mshr"])
        stalls["tlb"] = cyc(raw["wait_tlb"])
        stalls["walker_wait"] = cyc(raw["wait_walker"])
        stalls["dram_bandwidth_wait"] = cyc(raw["wait_dram_bw"])
        stalls["inflight_wait"] = cyc(raw["wait_inflight"])
        if cfg.scheduler:
            stalls["scheduler_full"] = cyc(raw["wait_scheduler"])
        if cfg.store_buffer:
            stalls["store_buffer_full"] = cyc(raw["wait_store_buffer"])
        result["cycles"] = cycles
        result["ipc"] = raw["instructions"] / cycles if cycles else 0.0
        result["timing"] = {
            "cycles": cycles,
            "time_ns": cycles / cpu.freq_ghz,
            "freq_ghz": cpu.freq_ghz,
            "ipc": result["ipc"],
            "mlp": (raw["miss_ticks"] / raw["ticks"]) if raw["ticks"] else 0.0,
            "l1_misses_timed": raw["l1_misses_timed"],
            "avg_l1_miss_cycles": cyc(raw["miss_ticks"]) / raw["l1_misses_timed"]
            if raw["l1_misses_timed"] else 0.0,
            "avg_load_latency_cycles": cyc(raw["load_latency"]) / raw["loads_timed"]
            if raw["loads_timed"] else 0.0,
            "stall_cycles": stalls,
            "width": cpu.width,
            "sustained_ipc": cpu.sustained_ipc if cpu.sustained_ipc is not None else cpu.width,
            "work_ipc": cpu.work_ipc() if cpu.work else None,
            "rob": cfg.rob,
            "scheduler": cfg.scheduler or None,
            "dram_latency_cycles": cfg.dram_latency,
        }
        if cfg.store_buffer:  # sim/MODEL.md §6: a store's commit after its retirement
            stores = raw["kind"][traces.KIND_STORE]
            result["timing"]["store_buffer"] = {
                "entries": cfg.store_buffer,
                "avg_commit_lag_cycles": cyc(raw["store_commit_lag"]) / stores if stores
                else 0.0,
                # the work's stores that took entries (the header's "work_stores")
                "work_stores": raw["work_stores"]}
    ncmd = raw["commands"]
    result["commands"] = {
        "count": ncmd,
        "mean_cycles": cyc(raw["command_ticks"]) / ncmd if timing and ncmd else None,
        "max_cycles": cyc(raw["command_ticks_max"]) if timing and ncmd else None,
        "mean_l1_misses": raw["command_l1_misses"] / ncmd if ncmd else None,
        "cycles_log2_histogram": [int(x) for x in raw["command_ticks_hist"]] if timing else None,
        "l1_misses_log2_histogram": [int(x) for x in raw["command_l1_miss_hist"]],
        "note": "a command runs from a COMMAND marker to the next one or the end; histogram "
                "bucket b counts values v with floor(log2(v + 1)) == b; cycles before "
                "rounding are ticks / width",
    }
    if any(raw["syscalls"]):
        names = [*traces.SYSCALL_NAMES, "unnamed"]
        result["syscalls"] = {
            "calls": {n: int(v) for n, v in zip(names, raw["syscalls"], strict=True) if v},
            "bytes": {n: int(v) for n, v in zip(names, raw["syscall_bytes"], strict=True) if v},
            "cycles": cyc(raw["syscall_ticks"]) if timing else None,
            "note": "SYSCALL markers (traces/FORMAT.md) charged from the CPU file's [syscall] "
                    "costs; unnamed: markers at a site naming no call, charged nothing",
        }
    phase_names = (header or {}).get("phases") or []
    phases = []
    for p in range(max(1, raw["nphases_seen"])):
        ph = raw["phase"][p]
        if not ph["records"]:
            continue
        phases.append({
            "phase": p,
            "name": str(phase_names[p]) if p < len(phase_names) else f"phase{p}",
            "records": ph["records"], "instructions": ph["instructions"],
            "cycles": cyc(ph["ticks"]) if timing else None,
            "levels": [{"name": cpu.caches[k].name, "role": roles[k],
                        "accesses": ph["access"][k], "misses": ph["miss"][k]}
                       for k in range(n)],
        })
    result["phases"] = phases
    return result


def stats_dataframe(result: dict):
    """One row per level x tag x kind with accesses, hits, misses and miss_rate; ``level`` is
    the preset's name of the level, ``role`` its stable role (``L1``, ``L2``, ``LLC``)."""
    import pandas as pd

    df = pd.DataFrame(result["by_tag"],
                      columns=["level", "role", "tag", "tag_name", "kind", "accesses", "hits",
                               "misses"])
    df["miss_rate"] = (df["misses"] / df["accesses"]).where(df["accesses"] > 0, 0.0)
    return df


def _frame(rows: list[dict], result: dict, trace: str | None):
    import pandas as pd

    df = pd.DataFrame(rows)
    df.insert(0, "trace", trace if trace is not None else result.get("trace"))
    df.insert(0, "cpu", result["cpu"])
    return df


def dataframes(result: dict, trace: str | None = None) -> dict:
    """``result`` as pandas DataFrames, each with ``cpu`` and ``trace`` columns first, so the
    frames of a sweep concatenate (``pd.concat``):

    * ``"levels"``: one row per level: ``level`` (preset name), ``role`` (``L1``, ``L2``,
      ``LLC``), size and counters, and ``<kind>_accesses``/``<kind>_misses`` per access kind
      (load, store, swpf, hwpf, writeback, victim);
    * ``"by_tag"``: :func:`stats_dataframe` (level x tag x kind);
    * ``"timing"``: one row: cycles, ipc, mlp, latencies and ``stall:<cause>`` columns
      (empty without timing);
    * ``"stalls"``: one row per stall cause: ``cause`` and ``cycles`` (they overlap; empty
      without timing);
    * ``"phases"``: one row per phase and level: records, instructions, cycles, accesses,
      misses;
    * ``"prefetch"``: one row per prefetch source (``software``, ``hardware``) and level
      that saw any: ``issued``, ``redundant``, ``useful``, ``late``, ``useless``,
      ``unused_end``, ``dropped`` (sim/MODEL.md);
    * ``"commands"``: one row: ``count``, ``mean_cycles``, ``max_cycles``,
      ``mean_l1_misses``;
    * ``"timeline"``: the rows of ``result["timeline"]`` (:func:`simulate`'s ``timeline``;
      empty without it).

    ``trace``: the trace column's value (default: the result's ``trace``, set when
    :func:`simulate` was given a path).
    """
    levels = []
    for lv in result["levels"]:
        row = {"level": lv["name"]}
        row.update({k: v for k, v in lv.items() if k not in ("name", "by_kind")})
        for kind, d in lv["by_kind"].items():
            row[f"{kind}_accesses"] = d["accesses"]
            row[f"{kind}_misses"] = d["misses"]
        levels.append(row)
    timing, stalls = [], []
    t = result.get("timing")
    if t:
        row = {k: v for k, v in t.items() if k != "stall_cycles"}
        row.update({f"stall:{k}": v for k, v in t["stall_cycles"].items()})
        timing.append(row)
        stalls = [{"cause": k, "cycles": v} for k, v in t["stall_cycles"].items()]
    phases = []
    for ph in result.get("phases", []):
        for lv in ph["levels"]:
            phases.append({"phase": ph["name"], "records": ph["records"],
                           "instructions": ph["instructions"], "cycles": ph["cycles"],
                           "level": lv["name"], "role": lv.get("role"),
                           "accesses": lv["accesses"], "misses": lv["misses"]})
    roles = {lv["name"]: lv.get("role") for lv in result["levels"]}
    prefetch = []
    for which in ("software", "hardware"):
        for level, d in result.get("prefetch", {}).get(which, {}).items():
            prefetch.append({"source": which, "level": level, "role": roles.get(level), **d})
    cmd = result.get("commands") or {}
    commands = [{k: cmd.get(k) for k in ("count", "mean_cycles", "max_cycles",
                                         "mean_l1_misses")}] if cmd else []
    by_tag = stats_dataframe(result)
    tr = trace if trace is not None else result.get("trace")
    by_tag.insert(0, "trace", tr)
    by_tag.insert(0, "cpu", result["cpu"])
    return {"levels": _frame(levels, result, trace), "by_tag": by_tag,
            "timing": _frame(timing, result, trace), "stalls": _frame(stalls, result, trace),
            "phases": _frame(phases, result, trace),
            "prefetch": _frame(prefetch, result, trace),
            "commands": _frame(commands, result, trace),
            "timeline": _frame(result.get("timeline") or [], result, trace)}


def concat_dataframes(frames: Iterable[dict]) -> dict:
    """The frames of several runs (each a :func:`dataframes` dict) concatenated key by key
    (``pd.concat``, fresh index); a key missing from a run is skipped for it."""
    import pandas as pd

    out: dict[str, list] = {}
    for d in frames:
        for k, df in d.items():
            out.setdefault(k, []).append(df)
    return {k: pd.concat([f for f in v if len(f)] or v[:1], ignore_index=True)
            for k, v in out.items()}
