"""A calibration that cannot lie: the clock `kvsim calibrate` trusts, and the checks a CPU
file passes before `--cpu local` uses it.

**The clock** (:func:`clock_estimate`). ``kvsim-calibrate clock`` times dependent chains of
register operations (``sim/_calibrate/calibrate.c``): on x86-64 a chain of ``imul r64, r64``
(3 cycles on every x86-64 core kvsim knows) sets the clock and a chain of ``add r64, r64``
(1 cycle) checks it; on aarch64 the register add sets it and a ``mul`` chain checks that its
latency comes out a whole number of cycles. A chain of adds of an immediate, which the
first calibrations took as one add per cycle, is timed beside them and never trusted: some
cores fold those at rename and run several per cycle (an Intel core of the Golden Cove
line measured them at five per cycle), which made every cycle figure of a file five times
too long.

**The kernel's word** (:func:`kernel_clock`). The clock must fall within what the kernel
reports: ``cpufreq``'s hardware range where the kernel has one, else (a guest, typically)
the ``cpu MHz`` of ``/proc/cpuinfo``, which is the TSC's rate there, near the nominal
clock; a turbo clock runs above it, so the band is :data:`NOMINAL_BAND` of it.

**Plausibility** (:func:`plausibility`): each figure within what every core kvsim may meet
has (an L1 hit in 2.5-8 cycles, every level slower than the one before and DRAM slower
still, a private level's fitted capacity near its sysfs size, non-memory work below the
core's width).

**The replay** (:func:`replay`): calibrate.c's own microbenchmarks (the pointer chases at
every size with the page size the native run had, the 4 KiB-page chases, the parallel
chases), as :mod:`kvsim.sim.micro` traces them, simulated on the CPU file about to be
written and set beside what they measured natively. Every point must be within
:data:`TOLERANCE`, or, where its native figure moved more than that between the run's
rounds (:func:`round_spread`: the machine's own noise, which on a shared guest reaches 2x),
within that spread, at most :data:`SPREAD_MAX` (:func:`point_tolerance`); a wrong level or
walk is still refused at the cap (sim/tests/test_calibrate_check.py). The work kernels are
replayed too (one load of the kernel's piece, the traces' instruction count as its gap,
marked as the kernel's kind of work as c_ref's traces mark it, so the file's ``[work]`` rate
of that kind retires it) and shown, but not gated: they are the very samples ``[work]`` is
fitted to, one rate per kind over every call size, so their rows say how far that one rate
is from each size (short calls run at a higher rate than long ones).

**Agreement** (:func:`agreement`): a quick and a full calibration of the same machine must
agree within :data:`TOLERANCE` on what the two runs measure the same way: the clock, the
caches the kernel reports, the private levels' latencies, and what the files predict: each
file's replayed pointer chases (its ``[selfcheck]`` rows' predicted ns) at every working set
within the private levels, and past them wherever the two runs' own native figures agree.
A guest's share of the shared last level (and its memory) moves with its neighbours between
two runs minutes apart; where the native chases moved by more than the tolerance, each file
is judged by its own replay there, within its rounds' spread (sim/VALIDATION.md, finding
19). Not on the parameters behind the predictions: under nested paging the DRAM latency
and the host's page-table reads trade against each other (two files 1.7x apart on DRAM
predicted the same chases within 10 %, finding 13), and a level's latency against its
fitted capacity, so a parameter the chases do not identify would fail two files that
predict the same.

All of it goes into the file's ``[selfcheck]`` table (:func:`summarise`): ``status``
(``passed``/``failed``), ``failed`` (one line per failed check), the checks and the replay's
rows. `--cpu local` refuses a file whose status is not ``passed`` (kvsim.sim.local).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from pathlib import Path

#: Largest relative difference a replayed point, or a quick and a full run, may show.
TOLERANCE = 0.10
#: A replayed point whose native figure moved more than TOLERANCE between the run's own
#: rounds is judged within its measured spread instead (:func:`round_spread`), never wider
#: than this: a point the machine cannot measure within it fails whatever the file says.
SPREAD_MAX = 0.25
#: The chain of known latency that sets the clock, and the one that checks it, per
#: architecture: (chain, cycles per operation); None = read off, must be a whole number.
CLOCK_CHAINS = {
    "x86_64": {"primary": ("imul", 3), "cross": ("add", 1)},
    "aarch64": {"primary": ("add", 1), "cross": ("mul", None)},
}
#: Without cpufreq the kernel's ``cpu MHz`` is the nominal (TSC) rate: a turbo clock runs
#: above it (server parts to about 1.6x, desktop parts to about 2x), a throttled one below.
NOMINAL_BAND = (0.5, 2.0)
#: With cpufreq, its [cpuinfo_min_freq, cpuinfo_max_freq] widened by this fraction.
CPUFREQ_MARGIN = 0.05
#: No core shipped runs outside this; the band when the kernel reports nothing.
ABSOLUTE_GHZ = (0.5, 6.5)
#: An L1 data-cache hit, load to use, on any core kvsim may meet (3-6 on the presets' cores).
L1_CYCLES = (2.5, 8.0)
#: A private level's fitted capacity against its sysfs size.
PRIVATE_CAPACITY = (0.5, 1.25)
#: DRAM load-to-use latency, ns.
DRAM_NS = (40.0, 500.0)
#: DRAM against the last level's latency as the chase curve shows it (the knee fit's
#: plateau past the level before it, ``[meta.raw] knee_fit``): at least this many times it.
#: Memory is 3.3-7.5x the last level on the presets' cores (sim/PRESETS.md); a file below
#: 1.5x has read the last level's plateau as memory (sim/VALIDATION.md, finding 18).
DRAM_OVER_LAST = 1.5
#: Fewest instructions per cycle c_ref's cache-resident kernels may retire (the dependent
#: CRC steps retire about 2 on every core measured; a quarter of that is a broken clock).
WORK_IPC_MIN = 0.5
#: Kernels that retire fewer by design, and their floor: the join of the CRC's streams
#: branches on the sum's random bits (0.34-0.43 per cycle measured on the Intel guest,
#: sim/VALIDATION.md finding 30), so a quarter of that is a broken clock there.
WORK_IPC_FLOOR = {"crc64combine": 0.1}
#: Chase loads simulated per replayed point.
REPLAY_STEPS = 20_000
#: The longest warm-up of a replayed chase, in loads (see steady_warmup).
WARMUP_MAX = 1 << 21
#: Times round the file's caches after which a replayed chase's warm-up stops.
WARMUP_TURNS = 4


def fastest(xs: Sequence[float]) -> float:
    return float(min(xs))


def dram_floor_ns(last_level_ns: float | None) -> float:
    """The fewest ns a file's DRAM latency may have: :data:`DRAM_NS`' floor, and
    :data:`DRAM_OVER_LAST` times the last level's latency as the knee fit read it off the
    chase curve (``last_level_ns``; None: the floor alone), rounded up to the 0.1 ns a file
    keeps, so that a DRAM latency the fit held at the floor passes the check."""
    if last_level_ns is None or not last_level_ns > 0:
        return DRAM_NS[0]
    return max(DRAM_NS[0], math.ceil(DRAM_OVER_LAST * float(last_level_ns) * 10) / 10)


def knee_last_ns(doc: dict) -> float | None:
    """The last level's latency (ns) as the knee fit read it off the chase curve: ``[meta.raw]
    knee_fit`` when the hierarchy fit replaced it, else ``[meta] fit``; None without one."""
    meta = doc.get("meta") or {}
    knee = (meta.get("raw") or {}).get("knee_fit") or meta.get("fit")
    n = len(doc.get("cache") or [])
    try:
        return float(knee["latency_ns"][n - 1]) if knee and n else None
    except (KeyError, IndexError, TypeError, ValueError):
        return None


# --- the clock --------------------------------------------------------------------------

def clock_estimate(clock: dict) -> dict:
    """The clock from ``kvsim-calibrate clock`` samples (``{"arch", "ns_per_op": {chain:
    [ns, ...]}}``, every sample of every round): ``ghz`` from the fastest sample of the
    primary chain; ``cross_cycles``, the cross chain's cycles per operation at that clock
    (its fastest sample), and ``cross_error``, its relative distance from the chain's known
    latency (or from the nearest whole number); ``addi_per_cycle``, the immediate adds per
    cycle (1 on a core that does not fold them). ``error``: why there is no clock."""
    arch = clock.get("arch", "")
    ns = clock.get("ns_per_op") or {}
    spec = CLOCK_CHAINS.get(arch)
    out: dict = {"arch": arch, "ghz": None}
    if spec is None:
        out["error"] = f"no chain of known latency on {arch or 'this architecture'}"
        return out
    (pname, plat), (cname, clat) = spec["primary"], spec["cross"]
    if not ns.get(pname) or not ns.get(cname):
        out["error"] = f"the {pname} and {cname} chains were not timed"
        return out
    ghz = plat / fastest(ns[pname])
    cross = fastest(ns[cname]) * ghz
    want = clat if clat is not None else max(1, round(cross))
    out.update(ghz=ghz, primary=pname, primary_latency=plat, cross=cname,
               cross_cycles=cross, cross_latency=want, cross_error=cross / want - 1.0)
    if ns.get("addi"):
        out["addi_per_cycle"] = 1.0 / (fastest(ns["addi"]) * ghz)
    return out


def kernel_clock(cpuinfo: Path = Path("/proc/cpuinfo"),
                 cpufreq: Path = Path("/sys/devices/system/cpu/cpu0/cpufreq")) -> dict:
    """What the kernel reports of the clock: ``cpu_mhz`` (every CPU's line of
    /proc/cpuinfo), ``cpufreq_khz`` (cpuinfo_min_freq, cpuinfo_max_freq, base_frequency
    where present), ``model_ghz`` (the "@ x.xxGHz" of the model name, if any)."""
    out: dict = {"cpu_mhz": [], "cpufreq_khz": {}, "model_ghz": None}
    try:
        text = cpuinfo.read_text()
    except OSError:
        text = ""
    for line in text.splitlines():
        k, _, v = (s.strip() for s in line.partition(":"))
        if k == "cpu MHz":
            try:
                out["cpu_mhz"].append(float(v))
            except ValueError:
                pass
        elif k == "model name" and out["model_ghz"] is None:
            m = re.search(r"@\s*([0-9.]+)\s*GHz", v)
            if m:
                out["model_ghz"] = float(m.group(1))
    for name in ("cpuinfo_min_freq", "cpuinfo_max_freq", "base_frequency"):
        try:
            out["cpufreq_khz"][name] = int((cpufreq / name).read_text().strip())
        except (OSError, ValueError):
            pass
    return out


def kernel_band(k: dict) -> tuple[float, float, str]:
    """The clock range (GHz) the kernel's report allows, and where it comes from."""
    f = k.get("cpufreq_khz") or {}
    if f.get("cpuinfo_max_freq"):
        lo = f.get("cpuinfo_min_freq", 0) / 1e6 * (1 - CPUFREQ_MARGIN)
        hi = f["cpuinfo_max_freq"] / 1e6 * (1 + CPUFREQ_MARGIN)
        return lo, hi, "cpufreq cpuinfo_min_freq..cpuinfo_max_freq"
    nominal = max(k.get("cpu_mhz") or [0.0]) / 1000.0 or (k.get("model_ghz") or 0.0)
    if nominal > 0:
        return (NOMINAL_BAND[0] * nominal, NOMINAL_BAND[1] * nominal,
                f"{NOMINAL_BAND[0]:g}-{NOMINAL_BAND[1]:g} x the nominal {nominal:.3f} GHz "
                "(/proc/cpuinfo cpu MHz; no cpufreq)")
    return ABSOLUTE_GHZ[0], ABSOLUTE_GHZ[1], "no clock from the kernel: the range of all cores"


# --- the checks ---------------------------------------------------------------------------

def _check(name: str, ok: bool, detail: str) -> dict:
    return {"check": name, "ok": bool(ok), "detail": detail}


def clock_checks(est: dict, kernel: dict) -> list[dict]:
    """The clock's method (its two chains agree) and its range (the kernel's; also for the
    ``untrusted_ghz`` of a file of the old method)."""
    ghz = est.get("ghz") or est.get("untrusted_ghz")
    out = []
    if est.get("ghz") is None:
        out.append(_check("clock.method", False, f"clock: {est.get('error', 'not measured')}"))
    else:
        out.append(_check(
            "clock.method", abs(est["cross_error"]) <= TOLERANCE,
            f"clock: {est['primary']} chain at {est['primary_latency']} cycles gives "
            f"{est['ghz']:.3f} GHz; the {est['cross']} chain then takes "
            f"{est['cross_cycles']:.2f} cycles per operation (want {est['cross_latency']}, "
            f"within {TOLERANCE:.0%})"))
    if ghz:
        lo, hi, why = kernel_band(kernel)
        out.append(_check("clock.kernel", lo <= ghz <= hi,
                          f"clock: {ghz:.3f} GHz against {lo:.2f}-{hi:.2f} GHz ({why})"))
    return out


def plausibility(doc: dict, levels: list[dict], fit: dict, work: dict | None) -> list[dict]:
    """Each figure of the file within what a real core has (module docstring)."""
    out = []
    ghz = doc["freq_ghz"]
    caches = doc["cache"]
    l1 = fit["latency_ns"][0] * ghz
    out.append(_check("l1.latency", L1_CYCLES[0] <= l1 <= L1_CYCLES[1],
                      f"L1D hit {l1:.1f} cycles ({fit['latency_ns'][0]:.2f} ns x {ghz:.3f} "
                      f"GHz), want {L1_CYCLES[0]:g}-{L1_CYCLES[1]:g}"))
    names = [c["name"] for c in caches] + ["DRAM"]
    lat = list(fit["latency_ns"][: len(caches)]) + [doc["dram"]["latency_ns"]]
    for i in range(1, len(lat)):
        out.append(_check(f"order.{names[i]}", lat[i] > lat[i - 1],
                          f"{names[i]} {lat[i]:.2f} ns against {names[i - 1]} "
                          f"{lat[i - 1]:.2f} ns: a level must be slower than the one before"))
    for i, x in enumerate(levels[:-1]):
        r = fit["capacity"][i] / x["size"]
        out.append(_check(
            f"capacity.{names[i]}", PRIVATE_CAPACITY[0] <= r <= PRIVATE_CAPACITY[1],
            f"{names[i]} fitted at {fit['capacity'][i] / 1024:.0f} KiB against sysfs "
            f"{x['size'] // 1024} KiB ({r:.2f}x; want {PRIVATE_CAPACITY[0]:g}-"
            f"{PRIVATE_CAPACITY[1]:g}x)"))
    if levels:
        r = fit["capacity"][-1] / levels[-1]["size"]
        out.append(_check(f"capacity.{names[len(levels) - 1]}", r <= PRIVATE_CAPACITY[1],
                          f"{names[len(levels) - 1]} fitted at {r:.2f}x its sysfs size "
                          f"(want at most {PRIVATE_CAPACITY[1]:g}x)"))
    d = doc["dram"]["latency_ns"]
    out.append(_check("dram.latency", DRAM_NS[0] <= d <= DRAM_NS[1],
                      f"DRAM {d:.1f} ns, want {DRAM_NS[0]:g}-{DRAM_NS[1]:g}"))
    last = knee_last_ns(doc)
    if last is not None:
        out.append(_check("dram.over_last", d >= dram_floor_ns(last),
                          f"DRAM {d:.1f} ns against the chase curve's last level "
                          f"{last:.1f} ns ({d / last:.2f}x; want at least "
                          f"{DRAM_OVER_LAST:g}x: below it, the last level's plateau was "
                          "read as memory)"))
    width = (doc.get("core") or {}).get("width")
    if work is not None and width:
        pts = work["points"]
        hi = max(p["ipc"] for p in pts.values())
        lo = min(p["ipc"] for p in pts.values())
        low = sorted(k for k, p in pts.items()
                     if p["ipc"] < WORK_IPC_FLOOR.get(k.split("/")[0], WORK_IPC_MIN))
        floors = "".join(f", {k} {f:g}" for k, f in WORK_IPC_FLOOR.items())
        out.append(_check("work.ipc", not low and hi <= width,
                          f"c_ref's kernels at {lo:.2f}-{hi:.2f} instructions per cycle "
                          f"(want {WORK_IPC_MIN:g}{floors} to the width, {width})"
                          + (f"; below: {', '.join(low)}" if low else "")))
    return out


# --- the replay ---------------------------------------------------------------------------

def _row(point: str, measured: float, predicted: float, gated: bool = True,
         why: str = "", spread: float = 0.0) -> dict:
    r = {"point": point, "measured_ns": round(measured, 3), "predicted_ns": round(predicted, 3),
         "ratio": round(predicted / measured, 4), "gated": gated}
    if gated:
        r["spread"] = round(spread, 4)
        r["tolerance"] = round(point_tolerance(spread), 4)
    if why:
        r["note"] = why
    return r


def round_spread(samples: Sequence[float], repeats: int | None) -> float:
    """How far a point's native figure moved between the run's rounds: the slowest round's
    fastest sample over the fastest round's, less one (``samples``: every round's
    ``repeats`` samples in turn, as :func:`kvsim.sim.calibrate.measure` keeps them). 0 with
    fewer than two rounds or no ``repeats`` (a file written before rounds were kept apart)."""
    if not repeats or len(samples) < 2 * repeats:
        return 0.0
    per = [min(samples[i:i + repeats]) for i in range(0, len(samples), repeats)]
    return max(per) / min(per) - 1.0


def point_tolerance(spread: float) -> float:
    """A gated point's tolerance: :data:`TOLERANCE`, or its native spread between rounds
    when that is larger, at most :data:`SPREAD_MAX`."""
    return max(TOLERANCE, min(spread, SPREAD_MAX))


def _off(r: dict) -> bool:
    """Whether a gated replayed row is outside its tolerance (rows of files written before
    per-point tolerances: :data:`TOLERANCE`)."""
    return r["gated"] and abs(r["ratio"] - 1.0) > r.get("tolerance", TOLERANCE) + 1e-9


def steady_warmup(size: int, cache_bytes: int | None = None) -> int:
    """Chase loads before a replayed point is timed: twice round the cycle, as the native
    program's repeats go round it many times (the caches reach their steady state under
    any replacement), at most :data:`WARMUP_MAX`; a larger set is served by memory anyway.
    With ``cache_bytes`` (the file's caches together), at most :data:`WARMUP_TURNS` times
    round them: by then the caches' content no longer depends on where the warm-up began."""
    n = min(2 * (size // 64), WARMUP_MAX)
    return n if cache_bytes is None else min(n, max(2, WARMUP_TURNS * cache_bytes // 64))


def cache_bytes(cpu) -> int:
    """The capacity of the file's caches together (see :func:`steady_warmup`)."""
    return sum(c.size for c in cpu.caches)


def replay(cpu, raw: dict, *, steps: int = REPLAY_STEPS, log=lambda m: None) -> list[dict]:
    """The native microbenchmarks beside their simulation on ``cpu`` (rows of
    ``point``, ``measured_ns`` (the fastest sample), ``predicted_ns``, ``ratio``,
    ``gated``)."""
    from . import micro
    from .config import fmt_size

    rows = []
    rep = raw.get("repeats")
    huge = (raw.get("huge_fraction_top") or 0.0) >= 0.5
    top_page = 2 * 1024 * 1024 if huge else 4096
    sizes = raw["sizes"]
    log(f"self-check: {len(sizes)} chases with {top_page // 1024} KiB pages")
    cb = cache_bytes(cpu)

    def chase(point):
        s, page = point
        return micro.predict(cpu, s, 1, steps, page, False,
                             warmup=steady_warmup(s, cb))["ns_per_load"]

    fours = sorted((raw.get("chase_4k") or {}).items(), key=lambda kv: int(kv[0]))
    points = ([(s, top_page, raw["chase"][str(s)]) for s in sizes]
              + [(int(k), 4096, v) for k, v in fours])
    got = micro.map_threads(chase, [(s, page) for s, page, _ in points])
    for (s, page, v), p in zip(points, got, strict=True):
        rows.append(_row(f"chase {fmt_size(s)} {page // 1024}K", fastest(v), p,
                         spread=round_spread(v, rep)))
    top = sizes[-1]
    log("self-check: parallel chases")
    mlp = sorted((raw.get("mlp") or {}).items(), key=lambda kv: int(kv[0]))
    # in the loop's steady state, as a native repeat after the first (sim/micro.py)
    got = micro.map_threads(
        lambda n: micro.predict(cpu, top, n, max(1, steps // n), top_page, True,
                                loop_warmup=steady_warmup(top, cb) // n)["ns_per_load"],
        [int(k) for k, _ in mlp])
    for (k, v), p in zip(mlp, got, strict=True):
        rows.append(_row(f"mlp {fmt_size(top)} x{k}", fastest(v), p,
                         spread=round_spread(v, rep)))
    probe = raw.get("l2probe")
    if probe and len(cpu.caches) > 1:
        from .calibrate_prefetch import replay_rows

        log("self-check: the L2 prefetch probe")
        rows += replay_rows(cpu, probe, steps, steady_warmup(int(probe["size"]), cb), _row)
    for key, v in sorted((raw.get("work") or {}).items()):
        kind, chunk = key.split("/")
        rows.append(_row(f"work {key}", fastest(v), work_predict(cpu, kind, int(chunk)),
                         gated=False,
                         why="shown, not gated: the samples [work] is fitted to, one rate "
                             "per kind over every call size"))
    return rows


def work_predict(cpu, kind: str, chunk: int, calls: int = 4000) -> float:
    """Simulated ns per call of ``kvsim-calibrate work KIND CHUNK``: per call one load of
    its piece of the 16 KiB buffer with the trace's instruction count as its gap, each part
    marked as the kind of work c_ref's traces give the same code (a ``WORK`` marker per
    kind, traces/work.py; sim/calibrate.py work_instructions_by_kind), after a warm-up pass
    over the buffer (simulated, not counted)."""
    import numpy as np

    from kvsim import sim, traces
    from kvsim.traces.format import MARK_WORK, WORK_COUNT_BITS, WORK_NAMES

    from .calibrate import WORK_BUF, work_instructions_by_kind

    parts = {k: c for k, c in work_instructions_by_kind(kind, chunk).items() if c > 0}
    per = 1 if kind == "crc64combine" else max(1, WORK_BUF // chunk)
    warm = per  # once over the buffer, as calibrate.c's repeat 0 warms the caches

    def marked(n: int) -> np.ndarray:
        """Per call a WORK marker for each kind of its count, then its load, whose gap
        is their sum (each kind's mean the trace's count, a fraction spread over the
        calls)."""
        acc = np.zeros(n, dtype=traces.RECORD_DTYPE)
        acc["kind"] = traces.KIND_LOAD
        acc["addr"] = 0x7F00_0000_0000 + (np.arange(n) % per) * chunk
        acc["size"] = min(chunk, 8)
        rows = [acc]
        for k, c in parts.items():
            cum = np.floor(np.arange(1, n + 1) * c)
            g = np.diff(np.concatenate([[0.0], cum])).astype(np.uint64)
            acc["gap"] += g.astype(np.uint32)
            m = np.zeros(n, dtype=traces.RECORD_DTYPE)
            m["kind"], m["flags"] = traces.KIND_MARKER, MARK_WORK
            m["addr"] = (np.uint64(WORK_NAMES.index(k)) << np.uint64(WORK_COUNT_BITS)) | g
            rows.insert(-1, m)
        out = np.empty(len(rows) * n, dtype=traces.RECORD_DTYPE)
        for i, r in enumerate(rows):
            out[i::len(rows)] = r
        return out

    rec = np.concatenate([traces.marker_record(traces.MARK_WARMUP_BEGIN), marked(warm),
                          traces.marker_record(traces.MARK_WARMUP_END), marked(calls)])
    res = sim.simulate(rec, cpu, page_size=4096, validate=False)
    return res["cycles"] / cpu.freq_ghz / calls


def replay_checks(rows: list[dict]) -> list[dict]:
    """One check for the gated replayed points: each within its tolerance (:data:`TOLERANCE`,
    or its native spread between rounds up to :data:`SPREAD_MAX`), else the one that fails
    and the worst point named."""
    gated = [r for r in rows if r["gated"]]
    wide = [r for r in gated if r.get("tolerance", TOLERANCE) > TOLERANCE]
    how = (f"{TOLERANCE:.0%}, or the point's native spread between rounds when larger "
           f"(at most {SPREAD_MAX:.0%}; {len(wide)} points)" if wide else f"{TOLERANCE:.0%}")
    bad = [r for r in gated if _off(r)]
    if not bad:
        only = sum(abs(r["ratio"] - 1.0) > TOLERANCE for r in gated)
        return [_check("replay", True, f"all {len(gated)} replayed points within {how}; "
                                       f"{only} of them only within their spread")]
    worst = max(bad, key=lambda r: abs(r["ratio"] - 1.0))
    return [_check("replay", False,
                   f"replay: {len(bad)} of {len(gated)} points off by more than {how}, worst "
                   f"{worst['point']}: predicted {worst['predicted_ns']:.2f} ns against "
                   f"{worst['measured_ns']:.2f} native ({worst['ratio']:.2f}x), native spread "
                   f"{worst.get('spread', 0.0):.0%}")]


# --- quick against full -------------------------------------------------------------------

def predicted_chases(rows: list[dict]) -> dict[str, float]:
    """A file's replayed pointer chases, point name -> predicted ns (its gated ``chase``
    rows: every working set at the page size its native run had, and the 4 KiB-page
    ones)."""
    return {r["point"]: float(r["predicted_ns"]) for r in rows
            if r.get("gated") and r["point"].startswith("chase ")}


def private_reach(doc: dict) -> int | None:
    """The working set below which a chase is the private levels' alone: the sysfs size of
    the last level before the shared last one (``[meta] sysfs_levels``; the core's L2).
    None for a file without two levels there."""
    lv = (doc.get("meta") or {}).get("sysfs_levels") or []
    return int(lv[-2]["size"]) if len(lv) >= 2 and lv[-2].get("size") else None


def chase_sizes(doc: dict) -> dict[str, int]:
    """A file's replayed chases' point names (as :func:`replay` writes them) -> working
    set, from its ``[meta.raw]``."""
    from .config import fmt_size

    raw = (doc.get("meta") or {}).get("raw") or {}
    huge = (raw.get("huge_fraction_top") or 0.0) >= 0.5
    page = 2048 if huge else 4
    out = {f"chase {fmt_size(int(s))} {page}K": int(s) for s in raw.get("sizes") or []}
    out.update({f"chase {fmt_size(int(s))} 4K": int(s) for s in raw.get("chase_4k") or {}})
    return out


def agreement(doc: dict, other: dict, other_name: str,
              rows: list[dict] | None = None) -> list[dict]:
    """This calibration against another of the same machine (quick against full), each
    within :data:`TOLERANCE`, on what the two runs measure the same way:

    * ``agree.clock``: the clock;
    * ``agree.sysfs``: the caches' sizes, ways and line the kernel reports
      (``[meta] sysfs_levels``);
    * ``agree.levels``: the private levels' latencies (every level before the last, ns);
    * ``agree.chases``: the chases both replayed, predicted by this file (``rows``, its
      replay; else its ``[selfcheck]``'s) against the other's ``[selfcheck]`` rows, at
      every working set below the private levels' reach (:func:`private_reach`), and past
      it wherever the two runs' own native figures agree within :data:`TOLERANCE`.

    Past the private levels a chase is the shared last level's and memory's, and a guest's
    share of those moves with its neighbours between two runs minutes apart
    (sim/VALIDATION.md, finding 19): where the two runs' native figures there differ by
    more than the tolerance, the two files are each judged by their own replay (within
    their rounds' spread) and the detail counts the points left to it, with each file's
    last level."""
    out = []
    a, b = float(doc["freq_ghz"]), float(other.get("freq_ghz") or 0.0)
    if b > 0:
        r = a / b
        out.append(_check("agree.clock", abs(r - 1.0) <= TOLERANCE,
                          f"clock GHz {a:.3f} against {b:.3f} in {other_name} ({r:.2f}x, "
                          f"want within {TOLERANCE:.0%})"))
    out += _agree_sysfs(doc, other, other_name)
    out += _agree_levels(doc, other, other_name)
    mine_rows = rows if rows is not None else (doc.get("selfcheck") or {}).get("replay", [])
    their_rows = (other.get("selfcheck") or {}).get("replay", [])
    mine, theirs = predicted_chases(mine_rows), predicted_chases(their_rows)
    both = [p for p in mine if theirs.get(p, 0.0) > 0]
    if not both:
        out.append(_check("agree.chases", False,
                          f"agreement: no replayed chase in common with {other_name} (its "
                          "[selfcheck] has none of this file's points)"))
        return out
    reach, sizes = private_reach(doc), chase_sizes(doc)
    nat_a = {r["point"]: float(r["measured_ns"]) for r in mine_rows if r.get("gated")}
    nat_b = {r["point"]: float(r["measured_ns"]) for r in their_rows if r.get("gated")}

    def compared(p: str) -> bool:
        if reach is not None and sizes.get(p, reach) < reach:
            return True  # the private levels' alone
        na, nb = nat_a.get(p, 0.0), nat_b.get(p, 0.0)
        return na > 0 and nb > 0 and abs(na / nb - 1.0) <= TOLERANCE

    gated = [p for p in both if compared(p)]
    moved = len(both) - len(gated)
    share = (f"; {moved} past the private levels left to each file's own replay, where the "
             f"two runs' native figures differ by more than {TOLERANCE:.0%} (last level "
             f"{_last_size(doc)} here, {_last_size(other)} there)") if moved else ""
    if not gated:
        out.append(_check("agree.chases", True,
                          f"predicted chases against {other_name}: none compared{share}"))
        return out
    ratio = {p: mine[p] / theirs[p] for p in gated}
    off = [p for p in gated if abs(ratio[p] - 1.0) > TOLERANCE]
    worst = max(gated, key=lambda p: abs(ratio[p] - 1.0))
    out.append(_check(
        "agree.chases", not off,
        f"predicted chases against {other_name}: {len(off)} of {len(gated)} off by more "
        f"than {TOLERANCE:.0%}, worst {worst}: {mine[worst]:.2f} ns against "
        f"{theirs[worst]:.2f} ({ratio[worst]:.2f}x){share}"))
    return out


def _last_size(doc: dict) -> str:
    from .config import fmt_size

    caches = doc.get("cache") or []
    return fmt_size(int(caches[-1]["size"])) if caches else "none"


def _agree_sysfs(doc: dict, other: dict, other_name: str) -> list[dict]:
    """The caches the kernel reports, the same in both files (none without them)."""
    mine = (doc.get("meta") or {}).get("sysfs_levels")
    theirs = (other.get("meta") or {}).get("sysfs_levels")
    if not mine or not theirs:
        return []
    keys = ("level", "size", "ways", "line")
    ok = [[lv.get(k) for k in keys] for lv in mine] == [[lv.get(k) for k in keys]
                                                       for lv in theirs]
    show = ", ".join(f"L{lv.get('level')} {lv.get('size', 0) // 1024} KiB {lv.get('ways')}-way"
                     for lv in mine)
    return [_check("agree.sysfs", ok,
                   f"sysfs caches {show}" + (f", the same in {other_name}" if ok else
                                             f": {other_name} reports other caches"))]


def _agree_levels(doc: dict, other: dict, other_name: str) -> list[dict]:
    """The private levels' latencies (ns; every level before the last), each within
    :data:`TOLERANCE` of the other file's; one check naming the worst."""
    ca, cb = doc.get("cache") or [], other.get("cache") or []
    ga, gb = float(doc["freq_ghz"]), float(other.get("freq_ghz") or 0.0)
    if len(ca) < 2 or len(ca) != len(cb) or gb <= 0:
        return []
    pairs = [(x["name"], x["latency"] / ga, y["latency"] / gb)
             for x, y in zip(ca[:-1], cb[:-1], strict=True)]
    worst = max(pairs, key=lambda t: abs(t[1] / t[2] - 1.0))
    ok = all(abs(x / y - 1.0) <= TOLERANCE for _, x, y in pairs)
    return [_check("agree.levels", ok,
                   "private levels' latencies against " + other_name + ": " + ", ".join(
                       f"{n} {x:.2f} ns against {y:.2f}" for n, x, y in pairs)
                   + f" (worst {worst[0]}, {worst[1] / worst[2]:.2f}x; want within "
                   f"{TOLERANCE:.0%})")]


def native_agreement(rows: list[dict], other: dict) -> dict | None:
    """How far this run's native figures are from another run's of the same machine, at the
    replayed points both have: the points, how many differ by more than :data:`TOLERANCE`
    and the largest ratio. Shown, not gated: a machine whose own figures move more than
    the tolerance between runs cannot pass any file's replay twice (sim/VALIDATION.md,
    finding 9)."""
    theirs = {r["point"]: r["measured_ns"]
              for r in (other.get("selfcheck") or {}).get("replay", []) if r.get("gated")}
    pairs = [(r["point"], r["measured_ns"] / theirs[r["point"]])
             for r in rows if r["gated"] and theirs.get(r["point"])]
    if not pairs:
        return None
    off = [p for p in pairs if abs(p[1] - 1.0) > TOLERANCE]
    worst = max(pairs, key=lambda p: abs(p[1] - 1.0))
    return {"points": len(pairs), "off": len(off), "worst_point": worst[0],
            "worst_ratio": round(worst[1], 4)}


def summarise(checks: list[dict], rows: list[dict], against: str | None = None,
              native: dict | None = None) -> dict:
    """The ``[selfcheck]`` table (``native``: :func:`native_agreement`, when known)."""
    failed = [c["detail"] for c in checks if not c["ok"]]
    out = {"status": "failed" if failed else "passed", "tolerance": TOLERANCE,
           "spread_max": SPREAD_MAX, "failed": failed, "checks": checks, "replay": rows}
    if against:
        out["against"] = against
    if native:
        out["native_agreement"] = native
    return out


def status_line(sc: dict | None) -> str | None:
    """Why a file may not be used as `local`, or None when it passed its self-check."""
    if not sc:
        return ("it has no self-check (written by a kvsim whose calibration did not check "
                "itself)")
    if sc.get("status") != "passed":
        failed = sc.get("failed") or ["status " + str(sc.get("status"))]
        return f"it failed its self-check: {failed[0]}"
    return None


def table(sc: dict) -> str:
    """The self-check as a Markdown table (for the validation page)."""
    lines = [f"Self-check: **{sc['status']}** (tolerance {sc['tolerance']:.0%})", "",
             "| check | ok | detail |", "|---|---|---|"]
    lines += [f"| {c['check']} | {'yes' if c['ok'] else '**no**'} | {c['detail']} |"
              for c in sc["checks"]]
    na = sc.get("native_agreement")
    if na:
        lines += ["", f"Native against {sc.get('against')}: {na['off']} of {na['points']} "
                  f"points differ by more than {sc['tolerance']:.0%} between the two runs "
                  f"(most: {na['worst_point']}, {na['worst_ratio']:.2f}x)."]
    lines += ["", "Each gated point must be within its tolerance: the larger of "
              f"{sc['tolerance']:.0%} and the native spread between the run's rounds (the "
              "slowest round's fastest sample over the fastest round's), at most "
              f"{sc.get('spread_max', sc['tolerance']):.0%}.", "",
              "| point | native ns | native spread | predicted ns | predicted / native | "
              "tolerance | gated |", "|---|---|---|---|---|---|---|"]
    for r in sc["replay"]:
        ratio = f"**{r['ratio']:.2f}**" if _off(r) else f"{r['ratio']:.2f}"
        spread = f"{r['spread']:.0%}" if "spread" in r else "-"
        tol = f"{r.get('tolerance', sc['tolerance']):.0%}" if r["gated"] else "-"
        lines.append(f"| {r['point']} | {r['measured_ns']:.2f} | {spread} | "
                     f"{r['predicted_ns']:.2f} | {ratio} | {tol} | "
                     f"{'yes' if r['gated'] else 'no'} |")
    return "\n".join(lines)

