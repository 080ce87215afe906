"""The hierarchy fit of `kvsim calibrate`: the CPU file whose own simulation of the pointer
chases costs what they measured.

The knee fit (:func:`kvsim.sim.calibrate.fit_levels`) reads the chase curve as an ideal
hierarchy of random-replacement levels (a chase of S bytes over a level of C hits it
min(1, C/S) of the time). The simulator is not that hierarchy: its LRU L1 gives a chase
just larger than itself no hits at all, a non-inclusive L2 behind it keeps some of a
chase larger than itself, and past the TLBs' reach each load also pays a walk whose
page-table reads go through the same caches. A file fitted to the ideal hierarchy is off
by the difference, so :func:`fit_hierarchy` fits the file to the simulator instead, starting
from the knee fit's values:

* **Latencies and DRAM** (:func:`solve`): a chase is one dependent load after another, so
  its simulated cycles per load are, to first order, a constant plus the loads (data and
  page-table reads) each level serves times its latency, the loads DRAM serves times its
  latency, the STLB hits times their cost and the walks times their fixed part (one
  simulation per chase gives those counts, :func:`chase_row`; the constant is what the
  counts leave of the simulated time: the gaps' and what is not linear). The STLB hit's
  cost (``[tlb] l2_latency``) is an unknown like a level's latency: the chases from the
  DTLB's reach to the STLB's rise by it, and no vendor publishes it for a guest, where the
  table's figure for the core left the chases there 12-17 % slow (sim/VALIDATION.md,
  finding 13); it is kept at 0 rather than below. The unknowns are the least-squares
  solution in relative error over every chase: the 2 MiB-page (else 4 KiB-page) chases at
  every size and the 4 KiB-page chases. The walk's fixed part is one of them where the
  chases tell it from DRAM (:data:`IDENTIFY_ROWS` chases past the STLB's reach whose data
  and page-table reads the caches serve, where a walk costs its fixed part and no memory
  access), else it stays the translation fit's (calibrate.py ``fit_translation``): with
  every load of the largest chases walking, it and DRAM trade against each other there;
  the STLB hit's cost likewise needs chases that hit the STLB without walking. What a
  walk of a 4 KiB page adds to the fixed part (``[tlb] walk_extra_4k``: the level its table
  has beyond a 2 MiB page's, in a guest also the host's translation of that table's page;
  sim/MODEL.md §3) is one where both the 4 KiB-page chases and the others walk and the
  walk's fixed part is solved too: it is then the 4 KiB-page chases' own part, with the rest
  pinned by the 2 MiB-page chases (otherwise the translation fit's walk, from the 4 KiB-page
  chases, holds both). All three
  are kept at 0 rather than below. The solution is simulated again and solved once
  more, so that the constant is the one at the solution.
* **Effective capacities and replacement** (:func:`fit_hierarchy`): the capacity of each
  level and its replacement policy (:data:`POLICIES`) are searched, one level at a
  time, the last level first, for the smallest error of that solution: L1 and L2 between
  half and all of their sysfs size (private levels; another thread on the core can hold
  part of one, and the knee fit reads a cyclic chase's cliff at an LRU level's capacity,
  where the lines a core keeps beside the chase miss every time, as a smaller level:
  the L1 of 32 KiB it read as 16 KiB on one guest put the L2's latency a quarter short,
  sim/VALIDATION.md, finding 39),
  the last level over every size its chase curve can show (from the L2 to a quarter
  of the largest chase), since a guest or a container gets a varying share of a shared
  last level that no sysfs file reports. A candidate is the sysfs associativity with fewer
  sets (a power of two) and, between two powers of two, more ways.
* **Nested paging** (in a guest, with 2 MiB pages): whether the host backs the guest's huge
  pages with 4 KiB pages (``[tlb] host_page_size``, engine.h ``guest_page_bits``: the TLBs
  then hold 4 KiB translations and every walk reads the host's leaf entry of the 4 KiB
  page) is chosen the same way, by the error with and without it: the huge-page chases
  then rise past the DTLB's reach in 4 KiB entries (384 KiB on a 96-entry DTLB) and keep
  rising with the host's page table past the last level, which 2 MiB TLB entries do not.

* **Page-table lines by time** (with nested walks, ``walk_reads`` >= 2): the host's
  page-table read from memory is an unknown of the least squares (``[tlb] host_read_ns``,
  DRAM's to start with), and the page-table lines' retention (``[tlb] walk_retention_ns``,
  sim/MODEL.md §3) is chosen among :data:`RETENTION_CANDIDATES` by the error of the chases
  plus that of the parallel chases at the largest set (:func:`mlp_error`), each simulated at
  the least-squares solution for that retention: the parallel chases are what tell an age in
  time from a capacity (where a chain's load is faster beside others natively, and the
  caches see the same lines either way). One candidate keeps no page-table line in the last
  level (``[tlb] walk_last_level = false``): where a chain's load costs the same beside
  others as alone and still more the larger the set, the private levels' capacity is what
  keeps the lines. The rest have both: the private levels keep the lines by their
  capacity, the last level those a walk read within the retention, so that a page table
  the L2 holds costs the L2 at any rate, and one larger costs the last level only where
  the walks come back to it soon enough. A third set keeps the guest's page-table lines in
  the last level as the caches hold them and none of the host's (``walk_last_level =
  "guest"``): the guest's leaf entries are ordinary loads of the guest's memory, while the
  host's part of a nested walk is timed by the fitted ``host_read_ns`` past the private
  levels (sim/VALIDATION.md, finding 30). The retention is chosen twice: with nested paging,
  on the knee fit's levels, and again once the levels and the placement are fitted, since
  the private levels' capacity decides what the candidates without the last level keep.

Only the chases are fitted, and the parallel chases choose the retention; the rest of the
parallel chases, the bandwidth and the work kernels are the self-check's
(:mod:`kvsim.sim.calibrate_check`) and the other fits' (calibrate.py).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from .calibrate_check import DRAM_NS, DRAM_OVER_LAST, dram_floor_ns
from .placement import PLACEMENTS

#: Replacement policies the fit tries for each level (the engine's registry names).
POLICIES = ("lru", "random")
#: Chase loads simulated per point (the self-check's replay simulates as many).
STEPS = 20_000
#: An STLB hit's cost (a walk's fixed part) is solved for only when at least this many
#: chases have this share of their loads hit the STLB without walking (walk with no more
#: than half as many DRAM accesses): elsewhere the chases cannot tell it from the rest.
IDENTIFY_ROWS = 3
IDENTIFY_SHARE = 0.1
#: Times the levels are fitted in turn. The last level's candidates start at the
#: L2's capacity, and the first time round the L2 is still the knee fit's: where that is
#: smaller than the L2 the chases show, a last level of a few MiB can stand in for the rest
#: of the L2 and keep the fit from the last level's real share (sim/VALIDATION.md, finding
#: 18); the second time round the last level is searched from the L2 the first chose.
LEVEL_PASSES = 2
#: L1 and L2 candidates: these fractions of their sysfs size.
PRIVATE_FRACTIONS = (0.5, 0.625, 0.75, 0.875, 1.0)
#: Last-level candidates per octave, and the largest chase (a fraction of the largest
#: working set) whose curve can still show the last level's knee.
LLC_PER_OCTAVE = 4
LLC_TOP_FRACTION = 0.25
#: The chases a candidate level's capacity C changes enough to simulate again: those up to
#: this many times C (the larger ones keep the rows of the current file).
WINDOW = 4
#: Above this working set, every candidate keeps the current file's rows (the chases there
#: are served by memory whatever the caches hold; their simulations cost the most).
WINDOW_CAP = 64 * 1024 * 1024

KIB, MIB = 1024, 1024 * 1024
#: The page-table lines' retention (ns; sim/MODEL.md §3) the fit tries under nested paging:
#: none, then octaves. A chase over S bytes with 4 KiB host pages reads each host
#: page-table line once every S / 32 KiB loads, so these are the ages at which a single
#: chain's reads over some hundreds of MiB to some GiB go from kept to lost.
RETENTION_NS = (0.0, 0.25e6, 0.5e6, 1e6, 2e6, 4e6, 8e6, 16e6)
#: Beside them, a last level that keeps no page-table line by its capacity (``[tlb]
#: walk_last_level = false``): the private levels keep the lines by their capacity, whatever
#: the rate (sim/VALIDATION.md, finding 20); alone (no retention), and with each retention,
#: where the last level keeps a line that a walk read at most that long before and the
#: private levels still keep theirs by capacity (finding 23); and one that keeps none of
#: the host's lines but the guest's by its capacity (``walk_last_level = "guest"``, no
#: retention: finding 30).
RETENTION_CANDIDATES = (tuple((r, True) for r in RETENTION_NS)
                        + tuple((r, False) for r in RETENTION_NS)
                        + ((0.0, "guest"),))
#: The chases a retention changes: past the STLB's reach (smaller ones keep their rows).
RETENTION_FROM = 8 * MIB
#: The parallel chases that choose the retention with the chases (chain counts): a time
#: retention shows most between a few chains and the miss buffers' ceiling.
RETENTION_CHAINS = (1, 2, 4, 8, 12, 16)


def chase_row(cpu, size: int, page: int, steps: int = STEPS) -> tuple[np.ndarray, float]:
    """One chase simulated on ``cpu``: per load, the loads each cache level served (data,
    and the page-table reads it was timed at), those DRAM served (data and the guest's
    page-table reads timed at DRAM), the host's page-table reads timed at their own latency
    (``[tlb] host_read_ns``), the STLB hits, the walks (the row of :func:`solve`), and the
    simulated cycles."""
    from kvsim import sim

    from . import calibrate_check as check
    from . import micro

    rec = micro.chase_records(size, 1, steps, mlp_loop=False,
                              warmup=check.steady_warmup(size, check.cache_bytes(cpu)))
    r = sim.simulate(rec, cpu, page_size=page, validate=False)
    return _row_of(cpu, r, steps, page)


def _row_of(cpu, r: dict, loads: int, page: int = 0) -> tuple[np.ndarray, float]:
    names = [c.name for c in cpu.caches]
    n = len(names)
    counts = np.zeros(n + 5)
    for row in r["by_tag"]:
        if row["kind"] == "load":
            k = names.index(row["level"])
            counts[k] += row["hits"]
            if k == n - 1:
                counts[n] += row["misses"]
    t = r.get("tlb") or {}
    # the page-table reads: counted above where they were served, timed where MODEL.md §3
    # says (a retention or the host's own latency move them)
    served, timed = t.get("walk_reads_served") or {}, t.get("walk_reads_timed") or {}
    for k, name in enumerate(names + ["DRAM"]):
        counts[k] += timed.get(name, 0) - served.get(name, 0)
    counts[n + 1] = timed.get("host", 0)
    if t.get("stlb_accesses"):
        counts[n + 2] = t["stlb_accesses"] - t.get("stlb_misses", 0)
    counts[n + 3] = t.get("stlb_misses", 0) if t.get("stlb_accesses") else t.get(
        "dtlb_misses", 0)
    # the walks of a 4 KiB page (the run's page is the guest's: engine.c walkCost)
    counts[n + 4] = counts[n + 3] if page == 4096 else 0.0
    return counts / loads, r["cycles"] / loads


def unknowns(cpu) -> np.ndarray:
    """The file's values of the unknowns, in cycles: each level's latency, DRAM, the host's
    page-table read from memory (DRAM's when the file has none), an STLB hit's cost (``[tlb]
    l2_latency``), the walk's fixed part, what a 4 KiB page's walk adds to it (``[tlb]
    walk_extra_4k``): the columns of :func:`cols`."""
    t = cpu.tlb
    host = (round(t.host_read_ns * cpu.freq_ghz) if t is not None and t.host_read_ns
            else cpu.dram_latency_cycles)
    return np.array([c.latency for c in cpu.caches] + [
        cpu.dram_latency_cycles, host, t.l2_latency if t else 0, t.walk_latency if t else 0,
        t.walk_extra_4k if t else 0], dtype=float)


def cols(m: int) -> dict[str, int]:
    """The columns of :func:`solve`'s rows and unknowns past the levels (``m`` of them in
    all): DRAM, the host's read, an STLB hit, a walk's fixed part, a 4 KiB page's walk's
    extra."""
    return {"dram": m - 5, "host": m - 4, "stlb": m - 3, "walk": m - 2, "walk4k": m - 1}


def point_weights(tolerances) -> np.ndarray:
    """Each chase's weight in the least squares: one over its tolerance in the self-check
    (calibrate_check.point_tolerance: 10 %, or the point's native spread between rounds up
    to 25 %), so that the fit minimises each residual in the units the check judges it in,
    and a point whose native figure moved between rounds (the step past L2, where each
    round's fresh mapping puts the pages in other frames) weighs as little as it tells."""
    return 1.0 / np.asarray(tolerances, dtype=float)


def solve(rows: list[tuple[np.ndarray, float]], base: np.ndarray,
          measured_cycles: np.ndarray, dram_min: float = 0.0,
          fixed: tuple[str, ...] = (),
          weights: np.ndarray | None = None) -> tuple[float, np.ndarray]:
    """Least squares (relative error) of the unknowns over every chase: ``rows`` simulated
    at ``base``; returns (sum of squared relative errors, unknowns), inf when the solution
    makes no CPU file (:func:`invalid`: a latency below one cycle or not increasing down the
    hierarchy, the host's read not above the last level's) or a measured time is not a
    positive number. A DRAM latency below ``dram_min`` cycles (the plausibility check's
    floor) is held at it and the rest solved again, as an STLB hit or a walk below 0 is
    held at 0. ``fixed``: unknowns (:func:`cols`' names) kept at ``base``'s values.
    ``weights``: each chase's weight in the sum (:func:`point_weights`; None: all 1)."""
    a = np.array([r[0] for r in rows])
    c0 = np.array([r[1] for r in rows]) - a @ base
    y = measured_cycles
    with np.errstate(divide="ignore", invalid="ignore"):
        aa, bb = a / y[:, None], 1.0 - c0 / y
    if weights is not None:
        aa, bb = aa * weights[:, None], bb * weights
    x = base.copy()
    if not (np.all(y > 0) and np.all(np.isfinite(aa)) and np.all(np.isfinite(bb))):
        return math.inf, x  # a measured time <= 0 or not finite: nothing to fit
    c = cols(a.shape[1])
    free = [j for j in range(a.shape[1]) if np.any(a[:, j] > 0)
            and j not in [c[k] for k in fixed]]
    walk, stlb, w4 = c["walk"], c["stlb"], c["walk4k"]
    got = identified(a)
    if stlb in free and not got["stlb"]:
        free.remove(stlb)
    if walk in free and (not got["walk"] or np.linalg.matrix_rank(aa[:, free]) < len(free)):
        free.remove(walk)
    # a 4 KiB page's walk's extra is the 4 KiB-page chases' walks beyond the others': only
    # with the others' walk solved too (else the file's walk, the translation fit's from the
    # 4 KiB-page chases alone, already holds it)
    if w4 in free and (walk not in free or not got["walk4k"]
                       or np.linalg.matrix_rank(aa[:, free]) < len(free)):
        free.remove(w4)

    def lstsq(start):
        fixed = [j for j in range(a.shape[1]) if j not in free]
        out = start.copy()
        sol, *_ = np.linalg.lstsq(aa[:, free], bb - aa[:, fixed] @ out[fixed], rcond=None)
        out[free] = sol
        return out

    def no_negative_walk(x: np.ndarray) -> np.ndarray:
        # an STLB hit or a walk (or a 4 KiB page's walk's extra) costs nothing rather than
        # less: solved again without it
        for j in (stlb, walk, w4):
            if j in free and x[j] < 0:
                free.remove(j)
                start[j] = 0.0
                x = lstsq(start)
        return x

    start = base.copy()
    x = no_negative_walk(lstsq(start))
    dram = c["dram"]
    if dram in free and x[dram] < dram_min and len(free) > 1:
        # DRAM no faster than the plausibility floor: held there, the rest solved again
        # (the walk and the host's read take what the chases give beyond it)
        free.remove(dram)
        start[dram] = dram_min
        x = no_negative_walk(lstsq(start))
    if invalid(x, a, dram_min):
        return math.inf, x
    r = aa @ x - bb
    err = float(r @ r)
    return (err if math.isfinite(err) else math.inf), x


def apply_solution(d: dict, x: np.ndarray, ghz: float) -> None:
    """Write :func:`solve`'s unknowns ``x`` (cycles, in :func:`unknowns`' order) into the CPU
    document ``d``: each level's latency, DRAM's in ns, and the TLB's STLB hit, walk and
    host page-table read and a 4 KiB page's walk's extra (absent when 0) where the document
    has a TLB."""
    n = len(d["cache"])
    for k, c in enumerate(d["cache"]):
        c["latency"] = max(1, int(round(x[k])))
    d["dram"]["latency_ns"] = round(float(x[n]) / ghz, 1)
    if d.get("tlb"):
        d["tlb"]["l2_latency"] = max(0, int(round(x[n + 2])))
        d["tlb"]["walk_latency"] = max(0, int(round(x[n + 3])))
        w4 = max(0, int(round(x[n + 4])))
        if w4:
            d["tlb"]["walk_extra_4k"] = w4
        else:
            d["tlb"].pop("walk_extra_4k", None)
        if d["tlb"].get("host_read_ns"):
            d["tlb"]["host_read_ns"] = round(float(x[n + 1]) / ghz, 1)


def identified(a: np.ndarray) -> dict[str, bool]:
    """Whether the chases (rows ``a``, as :func:`solve`'s) show an STLB hit's cost and the
    walk's fixed part apart from the rest: at least :data:`IDENTIFY_ROWS` chases with
    :data:`IDENTIFY_SHARE` of their loads hitting the STLB without walking, and as many
    walking with no more than half as many memory reads as walks (their page-table lines
    and data in the caches); and a 4 KiB page's walk's extra, at least as many chases with
    4 KiB pages walking on :data:`IDENTIFY_SHARE` of their loads (it is then the 4 KiB-page
    chases' own part beside the 2 MiB-page ones', which pin the rest). Otherwise the file's
    values stay."""
    c = cols(a.shape[1])
    walk, stlb, dram, w4 = c["walk"], c["stlb"], c["dram"], c["walk4k"]
    alone = np.sum((a[:, stlb] >= IDENTIFY_SHARE) & (a[:, walk] < IDENTIFY_SHARE / 2))
    cached = np.sum((a[:, walk] >= IDENTIFY_SHARE) & (a[:, dram] < a[:, walk] / 2))
    small = np.sum(a[:, w4] >= IDENTIFY_SHARE)
    other = np.sum((a[:, walk] >= IDENTIFY_SHARE) & (a[:, w4] == 0))
    return {"stlb": bool(alone >= IDENTIFY_ROWS), "walk": bool(cached >= IDENTIFY_ROWS),
            "walk4k": bool(small >= IDENTIFY_ROWS and other >= IDENTIFY_ROWS)}


def invalid(x: np.ndarray, a: np.ndarray, dram_min: float = 0.0) -> list[int]:
    """The unknowns of ``x`` (as :func:`solve`'s) that make no CPU file: a latency not
    finite or below one cycle, one not above the level's before it (DRAM after the last
    level, and not below ``dram_min`` cycles: the fit passes the plausibility check's
    floor, so that it never picks a file the check refuses), the host's page-table read
    (when the chases ``a`` have any) not above the last level's (and never <= 0), an STLB
    hit's cost or a 4 KiB page's walk's extra not finite; none when ``x`` is valid."""
    c = cols(len(x))
    lat = x[:c["host"]]
    bad = [k for k, v in enumerate(lat) if not math.isfinite(v) or v < 1
           or (k and v <= lat[k - 1]) or (k == len(lat) - 1 and v < dram_min)]
    host = x[c["host"]]
    if not math.isfinite(host) or host <= 0 or (np.any(a[:, c["host"]] > 0)
                                                and host <= lat[-2]):
        bad.append(c["host"])
    bad += [c[k] for k in ("stlb", "walk4k") if not math.isfinite(x[c[k]])]
    return bad


def geometry(size: int, ways: int, sysfs_size: int, line: int = 64) -> tuple[int, int]:
    """(size, ways) of a level of capacity about ``size``: sysfs's ways with fewer sets (a
    power of two), and more ways between two powers of two; sysfs's own at or above it."""
    sets_sysfs = 1 << max(0, (sysfs_size // (ways * line)).bit_length() - 1)
    sets = min(sets_sysfs, 1 << max(0, (max(1, size // (ways * line))).bit_length() - 1))
    w = max(ways, int(round(size / (sets * line))))
    if sets == sets_sysfs:
        w = min(w, max(ways, sysfs_size // (sets * line)))
    return sets * w * line, w


def fit_hierarchy(doc: dict, points: list[tuple[int, int, float]], *, guest_huge: bool,
                  sysfs: list[dict], largest: int,
                  mlp: tuple[int, int, dict[int, float]] | None = None,
                  last_level_ns: float | None = None,
                  log: Callable[[str], None] = lambda m: None) -> dict:
    """Fit ``doc`` (a CPU file as a dict, changed in place) to the chases ``points``
    ((working set, page size, measured ns), fastest samples); see the module docstring.
    ``mlp``: the parallel chases (working set, page size, {chains: measured ns per load}),
    which choose the page-table lines' retention with the chases. ``last_level_ns``: the
    last level's latency as the knee fit read it off the chase curve, which DRAM must exceed
    :data:`~kvsim.sim.calibrate_check.DRAM_OVER_LAST` times (the plausibility check's
    ``dram.over_last``). Returns what the fit
    chose and each point's prediction and residual. Raises ConfigError (one line) for a
    measured time that is not a positive number, and when no candidate's solution is one a
    CPU file can have (:func:`invalid`)."""
    from .config import ConfigError, fmt_size, parse_cpu

    ghz = doc["freq_ghz"]
    for size, page, ns in points:
        if not (isinstance(ns, (int, float)) and math.isfinite(ns) and ns > 0):
            raise ConfigError(f"calibrate: the chase over {fmt_size(size)} "
                              f"({fmt_size(page)} pages) "
                              f"measured {ns!r} ns, not a time")
    y = np.array([p[2] for p in points]) * ghz
    n = len(doc["cache"])
    # the plausibility check's floor (calibrate_check.dram_floor_ns), in cycles
    dram_min = dram_floor_ns(last_level_ns) * ghz

    def cpu_of(d):
        return parse_cpu(d, "calibrate")

    # each chase's row on each file simulated so far: a level searched again in the second
    # pass (LEVEL_PASSES) with the other levels as they were, or a candidate that is the
    # file itself, costs no simulation
    simulated: dict[tuple[str, int, int], tuple[np.ndarray, float]] = {}

    def rows_of(d, keep=None, window=None):
        import json

        from .micro import map_threads

        cpu = cpu_of(d)
        key = json.dumps(d, sort_keys=True, default=str)
        out = list(keep) if keep is not None else [None] * len(points)
        again = [i for i, (size, page, _) in enumerate(points)
                 if keep is None or window(size, page)]
        new = [i for i in again if (key, *points[i][:2]) not in simulated]
        rows = map_threads(lambda i: chase_row(cpu, points[i][0], points[i][1]), new)
        for i, row in zip(new, rows, strict=True):
            simulated[(key, *points[i][:2])] = row
        for i in again:
            out[i] = simulated[(key, *points[i][:2])]
        return cpu, out

    def evaluate(d, keep=None, window=None):
        cpu, rows = rows_of(d, keep, window)
        err, x = solve(rows, unknowns(cpu), y, dram_min)
        return err, x, rows

    def apply(d, x):
        apply_solution(d, x, ghz)

    chosen: dict = {}
    # whether any chase reaches past what a retention changes (else none can choose one)
    past = max(p[0] for p in points) > RETENTION_FROM or bool(mlp and mlp[0] > RETENTION_FROM)
    if nested_walks(doc) and not doc["tlb"].get("host_read_ns"):
        # the host's page-table reads get a latency of their own, DRAM's to start with
        doc["tlb"]["host_read_ns"] = doc["dram"]["latency_ns"]
    log(f"hierarchy fit: {len(points)} chases simulated on the file")
    best_err, best_x, best_rows = evaluate(doc)
    def score(d, err, x):
        """The chases' error plus the parallel chases' at the solution ``x`` (what the
        retention is chosen by), so that nested paging is chosen on the same terms."""
        if mlp is None or not nested_walks(d) or not math.isfinite(err):
            return err
        solved = _copy(d)
        apply(solved, x)
        return err + mlp_error(solved, mlp)

    if guest_huge and doc.get("tlb"):
        nested = _copy(doc)
        nested["tlb"]["host_page_size"] = "4KiB"
        err, x, rows = evaluate(nested, best_rows, lambda s, p: p > 4096)
        s_flat, ret = score(doc, best_err, best_x), {}
        if nested_walks(nested):  # nested walks with their page-table lines' retention
            ret = _copy(chosen)
            err, x, rows, s_nested = _fit_retention(nested, ret, evaluate, apply,
                                                    (err, x, rows), mlp, log, past)
        else:
            s_nested = score(nested, err, x)
        log(f"hierarchy fit: nested paging on 4 KiB host pages: error {s_nested:.4g} "
            f"against {s_flat:.4g} without")
        chosen["host_page_size"] = {"error_with": _rounded(s_nested), "error_without":
                                    _rounded(s_flat), "nested": bool(s_nested < s_flat)}
        if s_nested < s_flat:
            doc.clear()
            doc.update(nested)
            best_err, best_x, best_rows = err, x, rows
            if "walk_retention" in ret:
                chosen["walk_retention"] = ret["walk_retention"]
    if nested_walks(doc) and "walk_retention" not in chosen:
        best_err, best_x, best_rows, _ = _fit_retention(
            doc, chosen, evaluate, apply, (best_err, best_x, best_rows), mlp, log, past)
    if nested_walks(doc) and not math.isfinite(best_err):
        # neither the host's 4 KiB pages nor a retention gave the host's read a valid latency
        best_err, best_x, best_rows = _host_reads(doc, chosen, (best_err, best_x, best_rows),
                                                  evaluate, dram_min, ghz, log)
    def fit_levels(doc, best_err, best_x, best_rows):
        """The capacity and policy of each level (the last level first), from
        the state (error, unknowns, rows) of ``doc``, which is changed in place; returns
        the state of the best and what each level chose."""
        chosen = {}
        # the last level first, then L1, L2..., and again (LEVEL_PASSES)
        order = ([n - 1] + list(range(0, n - 1))) * LEVEL_PASSES
        for k in order:
            c, sysfs_k = doc["cache"][k], sysfs[k]
            ways0 = sysfs_k["ways"] or 8
            if k == n - 1:
                # an octave apart with the first policy, then quarter octaves around the best
                lo = doc["cache"][k - 1]["size"]
                hi = min(sysfs_k["size"], int(largest * LLC_TOP_FRACTION))
                m = max(0, int(math.floor(math.log2(hi / lo))))
                stages = [([lo * 2 ** i for i in range(m + 1)], POLICIES[:1]), (None, POLICIES)]
            else:
                stages = [([f * sysfs_k["size"] for f in PRIVATE_FRACTIONS], POLICIES)]
            tried, pick = [], None
            for caps, pols in stages:
                if caps is None:
                    at = doc["cache"][k]["size"] if pick is None else pick["cache"][k]["size"]
                    caps = [at * 2 ** (i / LLC_PER_OCTAVE) for i in range(-3, 4)]
                cands = sorted({geometry(int(cp), ways0, sysfs_k["size"]) for cp in caps})
                for (size, ways), pol in ((g, p) for g in cands for p in pols):
                    if any(t["size"] == size and t["ways"] == ways and t["replacement"] == pol
                           for t in tried):
                        continue
                    d = _copy(doc)
                    d["cache"][k].update(size=size, ways=ways, replacement=pol)
                    lim = min(WINDOW * size, WINDOW_CAP)
                    # chases within L1 do not see the levels below
                    first = sysfs[0]["size"] if k else 0
                    err, x, rows = evaluate(d, best_rows,
                                            lambda s, p, lim=lim, lo=first: lo < s <= lim)
                    tried.append({"size": size, "ways": ways, "replacement": pol,
                                  "error": _rounded(err)})
                    if err < best_err:
                        best_err, best_x, best_rows, pick = err, x, rows, d
            if pick is not None:
                doc.clear()
                doc.update(pick)
            got = doc["cache"][k]
            log(f"hierarchy fit: {c['name']} at {got['size'] // KIB} KiB, "
                f"{got.get('replacement', 'lru')} ({len(tried)} candidates)")
            earlier = chosen.get(c["name"], {}).get("candidates", [])
            chosen[c["name"]] = {"size": got["size"], "ways": got["ways"],
                                 "replacement": got.get("replacement", "lru"),
                                 "candidates": earlier + tried}
        return best_err, best_x, best_rows, chosen

    # physical page placement (sim/placement.py): the levels fitted with the trace's
    # addresses indexing the caches and with each page in a random frame; the better kept
    by_place = {}
    for place in PLACEMENTS if doc.get("tlb") else PLACEMENTS[:1]:
        d = _copy(doc)
        if place == PLACEMENTS[0]:
            d.get("tlb", {}).pop("placement", None)
            state = (best_err, best_x, best_rows)
        else:
            d["tlb"]["placement"] = place
            state = evaluate(d, best_rows, lambda s, p, lo=sysfs[0]["size"]: s > lo)
        by_place[place] = (d, *fit_levels(d, *state))
        log(f"hierarchy fit: placement {place}: {by_place[place][1]:.4g} (squared relative "
            "residuals)")
    place = min(by_place, key=lambda q: by_place[q][1])
    d, best_err, best_x, best_rows, levels_chosen = by_place[place]
    doc.clear()
    doc.update(d)
    chosen.update(levels_chosen)
    if len(by_place) > 1:
        chosen["placement"] = {"placement": place, "candidates": [
            {"placement": q, "error": _rounded(v[1]),
             "levels": {name: {key: c[key] for key in ("size", "ways", "replacement")}
                        for name, c in v[4].items()}}
            for q, v in by_place.items()]}
    if nested_walks(doc) and "walk_retention" in chosen and math.isfinite(best_err):
        # the retention chosen again on the levels and placement the file will have: the
        # first choice was made on the knee fit's, where the private levels' capacity that
        # keeps the lines without the last level was not yet fitted (sim/VALIDATION.md,
        # finding 23)
        first, tlb = chosen.pop("walk_retention"), _copy(doc["tlb"])
        doc["tlb"].pop("walk_retention_ns", None)
        doc["tlb"].pop("walk_last_level", None)
        best_err, best_x, best_rows, _ = _fit_retention(
            doc, chosen, evaluate, apply, (best_err, best_x, best_rows), mlp, log, past)
        if "walk_retention" not in chosen:  # no candidate valid: the first choice stays
            doc["tlb"] = tlb
            chosen["walk_retention"] = first
        else:
            chosen["walk_retention"]["first"] = first
    if not math.isfinite(best_err):
        # no candidate gave latencies a CPU file can have: say which, rather than write
        # (or fail to parse) the least-squares solution's
        raise ConfigError(_no_solution(doc, best_x, best_rows, points, dram_min))
    # the solution, simulated again: its constant part at the solution
    apply(doc, best_x)
    cpu, rows = rows_of(doc)
    err, x = solve(rows, unknowns(cpu), y, dram_min)
    if math.isfinite(err):
        apply(doc, x)
        cpu, rows = rows_of(doc)
    pred = np.array([r[1] for r in rows]) / ghz
    meas = y / ghz
    chosen["solved"] = identified(np.array([r[0] for r in rows]))
    return {"chosen": chosen, "unknowns_cycles": [round(float(v), 2) for v in unknowns(cpu)],
            "points": [[int(s), int(p)] for s, p, _ in points],
            "measured_ns": [round(float(v), 3) for v in meas],
            "predicted_ns": [round(float(v), 3) for v in pred],
            "residual_rel": [round(float(v), 4) for v in pred / meas - 1.0],
            "rms_rel_error": float(np.sqrt(np.mean((pred / meas - 1.0) ** 2)))}


def nested_walks(doc: dict) -> bool:
    """Whether the file's walks read the host's entries too (``walk_reads`` >= 2)."""
    t = doc.get("tlb")
    return bool(t and t.get("walk_reads", 0) >= 2)


def mlp_warm(size: int, cpu) -> int:
    """Loads of a parallel chase's own loop before it is timed (as the self-check's)."""
    from . import calibrate_check as check

    return check.steady_warmup(size, check.cache_bytes(cpu))


def ceiling_per_load(meas: dict) -> float:
    """The parallel chases' fastest time per load: the median of the three fastest chain
    counts (``meas``: chains -> ns per load), where the miss buffers or the walkers hold."""
    per_load = sorted(meas.values())[:3]
    return float(np.median(per_load))


def walkers_needed(walk_ns: float, per_load: float, have: int) -> int:
    """The page walkers a file needs for its walks of ``walk_ns`` each to keep up with
    ``per_load`` ns per load (the parallel chases' ceiling), at least ``have``."""
    from ._binding import MAX_WALKERS

    need = int(math.ceil(max(0.0, walk_ns) / per_load)) if per_load > 0 else have
    return max(have, min(need, MAX_WALKERS))


def mlp_error(d: dict, mlp: tuple[int, int, dict[int, float]],
              chains: tuple[int, ...] = RETENTION_CHAINS) -> float:
    """Sum of squared relative errors of the file ``d``'s simulation of the parallel
    chases ``mlp`` (as :func:`fit_hierarchy`'s) at ``chains``, each in its loop's steady
    state (as the self-check replays them), with the walkers the file will have: under
    nested paging on smaller host pages, at least the walks the chases overlap (a lone
    chain's load less the DRAM latency, over :func:`ceiling_per_load`), as calibrate.py
    sets them once the fit is done."""
    from . import micro
    from .config import parse_cpu

    cpu = parse_cpu(d, "calibrate")
    size, page, meas = mlp
    warm = mlp_warm(size, cpu)

    def predict(cpu, n):
        return micro.predict(cpu, size, n, max(1, STEPS // n), page, True,
                             loop_warmup=warm // n)["ns_per_load"]

    t = d.get("tlb") or {}
    if t.get("host_page_size") and t.get("walkers") and meas:
        walkers = walkers_needed(predict(cpu, 1) - d["dram"]["latency_ns"],
                                 ceiling_per_load(meas), t["walkers"])
        if walkers != t["walkers"]:
            cpu = parse_cpu(dict(d, tlb=dict(t, walkers=walkers)), "calibrate")
    from .micro import map_threads

    have = [n for n in chains if n in meas]
    err = sum((p / meas[n] - 1.0) ** 2
              for n, p in zip(have, map_threads(lambda n: predict(cpu, n), have), strict=True))
    return err if math.isfinite(err) else math.inf  # never nan: no comparison picks it


def _host_reads(doc, chosen, best, evaluate, dram_min, ghz, log):
    """Whether a nested walk reads the host's leaf entry past the caches at all: where the
    chases' least squares with it (``best``, no valid file) put the host's read at or
    below the last level's latency (below nothing, on one guest: its 4 KiB-page chases cost
    barely more than the 2 MiB-page ones up to 128 MiB), the host's translations stay in
    the walker's caches and a walk reads the guest's leaf entry alone (``walk_reads`` 1,
    sim/VALIDATION.md, finding 37), kept where its least squares give a valid file.
    ``doc`` is changed in place; returns the state (error, unknowns, rows) kept."""
    err, x, rows = best
    host = cols(len(x))["host"]
    if host not in invalid(x, np.array([r[0] for r in rows]), dram_min):
        return best
    d = _copy(doc)
    d["tlb"]["walk_reads"] = 1
    d["tlb"].pop("host_read_ns", None)
    err1, x1, rows1 = evaluate(d)
    log(f"hierarchy fit: the host's page-table read solves at {x[host] / ghz:.3g} ns, not "
        f"above the last level's; a walk reading the guest's entry alone: error {err1:.4g}")
    chosen["walk_reads"] = {"walk_reads": 1 if math.isfinite(err1) else 2,
                            "host_read_ns": round(float(x[host]) / ghz, 1),
                            "error_without": _rounded(err1)}
    if not math.isfinite(err1):
        return best
    doc.clear()
    doc.update(d)
    return err1, x1, rows1


def _fit_retention(doc, chosen, evaluate, apply, best, mlp, log, past=True):
    """The page-table lines' retention (``[tlb] walk_retention_ns``, and whether the last
    level keeps them, ``walk_last_level``), chosen among :data:`RETENTION_CANDIDATES` by the
    error of the chases (their least-squares solution at each candidate) plus that of the
    parallel chases simulated at that solution: on one machine a chain's walks cost less the
    faster the chains come back to the same page-table lines (sim/VALIDATION.md, finding
    12), which only an age in time, not a capacity, gives; on another they cost the same at
    every rate and still more the larger the set (finding 20), which a last level that keeps
    no page-table line gives; with both, the private levels keep the lines by capacity and
    the last level in time (finding 23). ``doc`` is changed in place to the best; returns
    its (error of the chases, unknowns, rows, error with the parallel chases'). ``past``:
    whether a chase or the parallel chases reach past :data:`RETENTION_FROM`; where none
    does, every candidate simulates alike, and the first (no retention) is the one tried."""
    best_err, best_x, best_rows = best
    tried, pick = [], None
    scored = math.inf
    for r, kept in RETENTION_CANDIDATES if past else RETENTION_CANDIDATES[:1]:
        d = _copy(doc)
        d["tlb"]["walk_retention_ns"] = r
        if kept is not True:
            d["tlb"]["walk_last_level"] = kept
        err, x, rows = evaluate(d, best_rows, lambda s, p: s > RETENTION_FROM)
        e_mlp = math.inf
        if math.isfinite(err):
            e_mlp = 0.0
            if mlp is not None:
                solved = _copy(d)
                apply(solved, x)
                e_mlp = mlp_error(solved, mlp)
        total = err + e_mlp
        tried.append({"retention_ns": r, "last_level_kept": kept,
                      "error_chases": _rounded(err), "error_parallel": _rounded(e_mlp)})
        how = ("" if kept is True else
               (", none in the last level" if kept is False else
                ", none of the host's in the last level") if not r
               else ", the last level's in time, the private levels' by capacity")
        log(f"hierarchy fit: page-table retention {r / 1e6:g} ms{how}: error {err:.4g} (chases) "
            f"+ {e_mlp:.4g} (parallel chases)")
        if total < scored:
            scored, pick = total, (d, err, x, rows)
    if pick is None:
        return best_err, best_x, best_rows, math.inf
    d, err, x, rows = pick
    if not d["tlb"]["walk_retention_ns"]:
        d["tlb"].pop("walk_retention_ns")
    doc.clear()
    doc.update(d)
    chosen["walk_retention"] = {"ns": doc["tlb"].get("walk_retention_ns", 0.0),
                                "last_level_kept": doc["tlb"].get("walk_last_level", True),
                                "candidates": tried}
    return err, x, rows, scored


def _rounded(err: float) -> float | str:
    """An error as the file keeps it: "inf" for none (TOML has no infinity here)."""
    return round(err, 6) if math.isfinite(err) else "inf"


def _no_solution(doc: dict, x: np.ndarray, rows: list, points: list,
                 dram_min: float = 0.0) -> str:
    """The one line that says the fit found no valid solution: the chases it had, and the
    file's own solution's latencies that no CPU file can have (:func:`invalid`)."""
    from .config import fmt_size

    ghz = doc["freq_ghz"]
    names = [c["name"] for c in doc["cache"]] + ["DRAM", "the host's page-table read",
                                                 "an STLB hit", "a walk",
                                                 "a 4 KiB page's walk's extra"]
    bad = invalid(x, np.array([r[0] for r in rows]), dram_min)
    what = ", ".join(f"{names[k]} {x[k] / ghz:.3g} ns" for k in bad)
    sizes = sorted(p[0] for p in points)
    return (f"calibrate: the hierarchy fit found no valid latencies for the {len(points)} "
            f"chases ({fmt_size(sizes[0])} to {fmt_size(sizes[-1])}): every candidate's least "
            f"squares give a latency below one cycle or not above the level's before it, or DRAM "
            f"below {dram_min / ghz:.3g} ns ({DRAM_NS[0]:g} ns, and {DRAM_OVER_LAST:g}x the "
            "chase curve's last level) "
            f"({what or 'a measured time not a positive number'}); the chase curve does "
            "not rise from level to level (a noisy run, or a largest working set "
            "(--max-size) within the caches)")


def _copy(doc: dict) -> dict:
    import copy

    return copy.deepcopy(doc)
