"""The ``seed_absolute`` study: the seeds' published times on their own machines, predicted.

Every row of ``data/seed_results.csv`` whose figure has no network in it (Valkey #1501's
``KEYS *`` and ``SAVE`` over 50M keys x 100 B on AWS Graviton 3, seed 002; Valkey #2311's
snapshot loads on an Intel Xeon Platinum 8255C, seed 000, every key count and value size,
cluster mode off and on) is predicted on the seed's own preset (:data:`KINDS`): the time
without and with the change, each beside the published time with their ratio, and the
predicted speedup beside the published one. The goal bands are :data:`TIME_BAND` for times and
:data:`SPEEDUP_BAND` for speedups; a row outside stays in the table with what explains it.

Scale. A row is simulated at its seed's key count where the trace fits (:func:`sim_keys`: at
most :data:`SIM_KEYS` keys and :data:`SIM_VALUE_BYTES` of values per trace at each scale), else
at that cap; its ``basis`` says which. Where ``results/scale.json`` measured the row's pair on
its preset at the seed's own key count (KEYS over 5x10^7 keys on ``graviton3``), that
measurement is the row's prediction (``at_seed_scale``; ``source`` names the file). A
capped row's time at the seed's key count is *extrapolated*: cycles per key at the simulated
size times the seed's key count, and, where ``results/scale.json`` (``python -m
kvsim.experiments.scale``) has the same pair on the same preset at a larger size, times the
growth of cycles per key it measured up to the largest size
at or below the seed's (``*_scaled_s``). Extrapolated figures never fill the measured
columns. Each trace is simulated once on its seed's preset (the study's CPUs are the seeds'
presets; ``--cpu`` does not change them); traces stream, so memory stays independent of
their length.

Nothing here tunes a preset: the presets are read as they are, and a row that misses is a
finding to explain.
"""

from __future__ import annotations

import csv
import functools
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from kvsim.experiments import studies_upstream  # noqa: F401  (registered before this study)
from kvsim.experiments.framework import Experiment, Plot, Table, register
from kvsim.experiments.studies import _sims

__all__ = ["KINDS", "SEED_CSV", "SPEEDUP_BAND", "TIME_BAND", "SeedRow", "band_verdict",
           "growth", "published", "render", "seed_rows", "sim_keys"]

#: the seeds' table: every figure the five seed PRs published, one row each
SEED_CSV = Path(__file__).resolve().parent / "data" / "seed_results.csv"
#: predicted time over published time: the goal
TIME_BAND = (0.80, 1.25)
#: predicted speedup over published speedup: the goal
SPEEDUP_BAND = (0.85, 1.15)
#: per scale, the most keys and (loads) value bytes one trace holds (a larger row is capped)
SIM_KEYS = {"small": 20_000, "full": 1_000_000}
SIM_VALUE_BYTES = {"small": 16 << 20, "full": 64 << 20}
#: the result file whose growth of cycles per key extrapolates a capped row, and whose
#: measurement at a seed's own key count replaces the extrapolation (``at_seed_scale``)
SCALE_JSON = Path(__file__).resolve().parents[1] / "results" / "scale.json"
#: the newest scale.json rows the tables read (ISO UTC date; None: those written up to the
#: newest cell); :func:`reassemble` sets it for the cells of an older model
SCALE_UNTIL: str | None = None
#: the seed's small-value loads on their preset under one change at a time (``python -m
#: kvsim.experiments.seed_load_gap``): what the diagnosis says each change moves
LOAD_GAP_JSON = Path(__file__).resolve().parents[1] / "results" / \
    "seed-load-gap-xeon-8255c.json"
#: the settings of LOAD_GAP_JSON the diagnosis names, in its words
LOAD_GAP_NAMED = {"work_valkey": "Valkey's instruction count", "clock_base": "the base clock",
                  "work_valkey_clock_base": "the two together",
                  "kernel_x2": "kernel calls x2", "dram_x2": "DRAM latency x2",
                  "walk_x2": "walks x2"}
#: scale.json's pair -> the c_ref variant of its side b (kvsim.experiments.scale.PAIRS)
SCALE_VARIANT = {"keys": "valkey", "save": "valkey", "load": "prefetch-after-key"}


@dataclass(frozen=True)
class Kind:
    """How one seed experiment runs in c_ref: workload, the seed's preset, the options both
    sides share, the c_ref variant of each of the seed's variants (None: c_ref has none),
    and the pair of ``scale.json`` whose growth extrapolates it (None: it has none)."""

    workload: str
    preset: str
    common: dict[str, Any]
    variants: dict[str, str | None]
    scale_pair: str | None


#: seed experiment -> how it runs. SAVE as Valkey #1501 ran it: checksum and compression off
#: (c_ref's snapshot has no compression). The loads keep Valkey's default rdbchecksum (yes),
#: as #2311's script did; v1-initial's figures are those of the final version (the PR's
#: description was updated with them), c_ref's ``prefetch-after-key``.
KINDS: dict[str, Kind] = {
    "iterate_keys": Kind("iterate", "graviton3", {"op": "keys", "value_size": 100},
                         {"merged": "valkey", "next-bucket-simple": "next-bucket",
                          "batch-iterator": None}, "keys"),
    "iterate_save": Kind("iterate", "graviton3",
                         {"op": "save", "value_size": 100, "rdbchecksum": "no"},
                         {"merged": "valkey"}, "save"),
    "rdb_load_prefetch": Kind("load", "xeon-8255c", {},
                              {"v1-initial": "prefetch-after-key",
                               "v2-prefetch-rehashes": "prefetch-rehash",
                               "v3-final-cached-hash": "prefetch-after-key"}, "load"),
}
_METRICS = ("keys_command_seconds", "save_seconds", "load_seconds")
_PR = {"iterate_keys": "Valkey #1501", "iterate_save": "Valkey #1501",
       "rdb_load_prefetch": "Valkey #2311"}


@dataclass(frozen=True)
class SeedRow:
    """One published pair of times (seconds): ``baseline`` before the change, ``optimized``
    after, at ``keys`` keys of ``value_bytes``; ``also`` names duplicate rows merged in."""

    seed: str
    experiment: str
    cpu: str
    variant: str
    cluster: bool
    value_bytes: int
    keys: int
    metric: str
    baseline: float
    optimized: float
    also: str = ""

    @property
    def kind(self) -> Kind:
        return KINDS[self.experiment]

    @property
    def cref_variant(self) -> str | None:
        return self.kind.variants[self.variant]

    @property
    def config(self) -> dict[str, Any]:
        """The c_ref options of the row's workload but its size and variant."""
        out = dict(self.kind.common, value_size=self.value_bytes, seed=1)
        if self.cluster:
            out["cluster"] = True
        return out


def seed_rows(path: Path = SEED_CSV) -> list[SeedRow]:
    """The time rows of the seeds' table with no network in their figure, in file order;
    a row repeating another's figures under another variant name (#2311's v1-initial and
    final tables) is merged into the first (``also``)."""
    out: list[SeedRow] = []
    with open(path, newline="") as f:
        for i, r in enumerate(csv.DictReader(f), 2):
            if r["metric"] not in _METRICS:
                continue
            if r["experiment"] not in KINDS or r["variant"] not in KINDS[r["experiment"]
                                                                         ].variants:
                raise ValueError(f"{path}:{i}: no c_ref mapping for {r['experiment']!r} "
                                 f"variant {r['variant']!r}")
            row = SeedRow(r["seed"][:3], r["experiment"], r["cpu"], r["variant"],
                          r["cluster"] == "on", int(r["value_bytes"]), int(r["keys"]),
                          r["metric"], float(r["baseline"]), float(r["optimized"]))
            twin = next((j for j, o in enumerate(out)
                         if (o.experiment, o.cluster, o.value_bytes, o.keys, o.baseline,
                             o.optimized, o.cref_variant)
                         == (row.experiment, row.cluster, row.value_bytes, row.keys,
                             row.baseline, row.optimized, row.cref_variant)), None)
            if twin is None:
                out.append(row)
            else:
                o = out[twin]
                out[twin] = SeedRow(**{**o.__dict__, "also": ", ".join(
                    x for x in (o.also, row.variant) if x)})
    return out


def sim_keys(row: SeedRow, scale: str) -> int:
    """The keys a row is simulated at: its own, capped at :data:`SIM_KEYS` and, for a load
    (whose trace copies and checksums every value byte), at :data:`SIM_VALUE_BYTES` of
    values."""
    cap = max(1, SIM_VALUE_BYTES[scale] // max(1, row.value_bytes))
    if row.kind.workload != "load":
        cap = row.keys
    return min(row.keys, SIM_KEYS[scale], cap)


def band_verdict(ratio: float | None, band: tuple[float, float]) -> str:
    """``in`` when ``band[0] <= ratio <= band[1]``, ``low`` or ``high`` outside, ``""``
    without a ratio."""
    if ratio is None or not math.isfinite(ratio):
        return ""
    return "in" if band[0] <= ratio <= band[1] else ("low" if ratio < band[0] else "high")


def published(row: SeedRow) -> dict[str, float]:
    """The row's published figures: both times and the speedup (time before over after)."""
    return {"base_s": row.baseline, "opt_s": row.optimized,
            "speedup": row.baseline / row.optimized}


# --- cells --------------------------------------------------------------------------------------

def _params(row: SeedRow, keys: int) -> dict[str, Any]:
    return {"experiment_kind": row.experiment, "cluster": row.cluster,
            "value_size": row.value_bytes, "sim_keys": keys}


def _cells(scale: str, cpus: list[str]) -> list[dict]:
    """Each seed row's configuration at :func:`sim_keys`, on the seed's preset: the baseline
    (``none``) and the row's c_ref variant; rows that share a configuration share its
    cells. KEYS and SAVE come first, then the loads by value size, cluster mode off before on
    (a sweep stopped early has the PR's main tables)."""
    out: list[dict] = []
    seen: set[str] = set()
    for row in sorted(seed_rows(), key=lambda r: (r.kind.workload != "iterate", r.cluster,
                                                  r.value_bytes)):
        if row.cref_variant is None:
            continue
        keys = sim_keys(row, scale)
        for variant in ("none", row.cref_variant):
            opts = dict(row.config, keys=keys)
            params = _params(row, keys)
            for cell in _sims("seed_absolute", row.kind.workload, opts,
                              [{"variant": variant, "label": variant}], [row.kind.preset],
                              params):
                cell["baseline"] = variant == "none"
                key = json.dumps([cell["options"], cell["cpu"]], sort_keys=True)
                if key not in seen:
                    seen.add(key)
                    out.append(cell)
    return out


# --- tables -------------------------------------------------------------------------------------

def _scale_growth(until: str | None = None
                  ) -> dict[tuple[str, str, str], list[tuple[int, float]]]:
    """``(pair, preset, side) -> [(keys, cycles per key)]`` from ``results/scale.json``,
    sorted by keys (empty when the file is absent). ``until``: only the rows written at or
    before that UTC date (ISO), those of the model the cells were computed with as far as
    the file can tell; a later run (after a change of the model) would mix two models in
    one curve."""
    if not SCALE_JSON.is_file():
        return {}
    out: dict[tuple[str, str, str], dict[int, float]] = {}
    for r in json.loads(SCALE_JSON.read_text()).get("rows", []):  # oldest first: the
        when = (r.get("provenance") or {}).get("date_utc")
        if until is not None and when is not None and when > until:
            continue
        for cpu, p in r.get("predicted", {}).items():             # newest row of a size wins
            for side in ("a", "b"):
                if side in p:
                    out.setdefault((r["workload"], cpu, side), {})[int(r["keys"])] = float(
                        p[side]["cycles_per_key"])
    return {k: sorted(v.items()) for k, v in out.items()}


def _on_scale_curve(row: SeedRow) -> bool:
    """Whether scale.json's pair is the row's configuration (its load pair: 8 B values,
    cluster mode off)."""
    pair = row.kind.scale_pair
    return pair is not None and not row.cluster and (pair != "load" or row.value_bytes == 8)


def _largest_at_most(curve: list[tuple[int, float]], keys: int) -> tuple[int, float] | None:
    return max(((k, v) for k, v in curve if k <= keys), default=None)


def _at_seed_scale(row: SeedRow, curves: dict) -> tuple[float, float] | None:
    """Cycles per key before and after the change that ``results/scale.json`` measured at
    the row's own key count on its own preset (the row's pair, both sides), or None."""
    if not _on_scale_curve(row) or row.cref_variant != SCALE_VARIANT.get(row.kind.scale_pair):
        return None
    a = dict(curves.get((row.kind.scale_pair, row.kind.preset, "a"), [])).get(row.keys)
    b = dict(curves.get((row.kind.scale_pair, row.kind.preset, "b"), [])).get(row.keys)
    return None if a is None or b is None else (a, b)


def growth(curve: list[tuple[int, float]], sim: int, seed: int) -> tuple[float, int] | None:
    """How cycles per key grow from ``sim`` keys to the largest size of ``curve`` at or below
    ``seed`` keys: ``(factor, that size)``; None when ``sim`` is not on the curve or nothing
    larger is."""
    at = dict(curve)
    top = max((k for k, _ in curve if sim < k <= seed), default=None)
    if sim not in at or top is None:
        return None
    return at[top] / at[sim], top


@functools.cache
def _freq(preset: str) -> float:
    from kvsim import sim

    return sim.load_cpu(preset).freq_ghz


def _diagnosis(row: SeedRow, line: dict[str, Any]) -> str:
    """Where a row's time goes missing, from its own figures: the cycles per key the
    published times take at the preset's clock less the predicted ones (scaled where
    scale.json allows), before and after the change. What both sides miss alike is work or
    misses the change cannot hide; what only the time before misses is what it hides."""
    if row.cref_variant is None:
        return "c_ref has no variant of this iterator (the PR's batch-iterator draft)"
    if "gap_cycles_per_key_base" not in line:
        return ""
    if line.get("base_verdict") == "in" and line.get("opt_verdict") == "in":
        return "in band" if line.get("speedup_verdict") == "in" else \
            f"times in band, speedup {line['speedup_verdict']}"
    gb, go = line["gap_cycles_per_key_base"], line["gap_cycles_per_key_opt"]
    text = f"published - predicted: {gb:+.0f} / {go:+.0f} cycles per key before / after"
    if min(gb, go) > 0:
        text += f"; {min(gb, go):.0f} on both sides (work or misses the change does not hide)"
    if gb - go > 0.1 * max(abs(gb), 1):
        text += f"; {gb - go:.0f} more before (misses the change hides)"
    elif go - gb > 0.1 * max(abs(go), 1):
        text += f"; {go - gb:.0f} more after"
    walk = line.get("walk_reads_1_cycles_per_key_base")
    if walk is not None:
        text += (f"; one page-table read per walk: {walk:.0f} cycles per key before at "
                 f"{line['walk_reads_1_keys']:,} keys (scale.json)")
    return text + _load_gap(row)


@functools.lru_cache(maxsize=4)
def _load_gap_rows(path: Path) -> tuple[dict[str, Any], ...]:
    """The rows of a ``seed_load_gap`` result, read once per assembly (every load row's
    diagnosis reads them)."""
    return tuple(json.loads(path.read_text()).get("rows", []))


def _load_gap(row: SeedRow) -> str:
    """What each change of :data:`LOAD_GAP_NAMED` moves the row's predicted cycles per key
    before the change (at the preset's clock), from :data:`LOAD_GAP_JSON`'s row of the same
    value size and preset (cluster mode off); empty without one."""
    if row.kind.workload != "load" or row.cluster or not LOAD_GAP_JSON.is_file():
        return ""
    for r in _load_gap_rows(LOAD_GAP_JSON):
        if r["value_size"] != row.value_bytes or r["cpu"] != row.kind.preset:
            continue
        by = r["predicted"]["arena"]["base"]
        moves = ", ".join(
            f"{label} {(by[s]['ns_per_key'] - by['base']['ns_per_key']) * r['freq_ghz']:+.0f}"
            for s, label in LOAD_GAP_NAMED.items() if s in by)
        return (f"; what changes to the preset move the cycles per key before, at "
                f"{r['keys']:,} keys: "
                f"{moves} ({LOAD_GAP_JSON.parent.name}/{LOAD_GAP_JSON.name})")
    return ""


_SHORT = {"iterate_keys": "KEYS", "iterate_save": "SAVE", "rdb_load_prefetch": "load"}


def _size(n: int, binary: str = "i") -> str:
    """``128Mi``, ``4Ki``: powers of two in binary units (the load's sizes), else decimal
    (``50M``); ``binary`` is the binary units' suffix."""
    for unit, m in (("M", 1 << 20), ("K", 1 << 10)):
        if n >= m and n % m == 0:
            return f"{n // m}{unit}{binary}"
    for unit, m in (("M", 10**6), ("K", 10**3)):
        if n >= m and n % m == 0:
            return f"{n // m}{unit}"
    return str(n)


def _label(row: SeedRow) -> str:
    """``load v3 cl 8B x 128Mi``: the seed experiment, its variant, cluster mode, value
    bytes and keys."""
    variant = row.variant.split("-")[0] if row.variant.startswith("v") else row.variant
    return (f"{_SHORT[row.experiment]} {variant}{' cl' if row.cluster else ''} "
            f"{_size(row.value_bytes, 'iB')}{'' if row.value_bytes >= 1024 else 'B'} x "
            f"{_size(row.keys)}")


def _tables(rows: pd.DataFrame) -> list[Table]:
    if "kind" not in rows or not len(rows):
        return []
    sim = rows[rows.kind == "sim"]
    cyc: dict[tuple, float] = {}
    for _, r in sim.iterrows():
        k = (r["experiment_kind"], bool(r["cluster"]), int(r["value_size"]),
             int(r["sim_keys"]), r["variant"])
        cyc[k] = float(r["cycles"]) / int(r["sim_keys"])
    dates = sim["date_utc"].dropna() if "date_utc" in sim else []
    curves = _scale_growth(SCALE_UNTIL or (str(max(dates)) if len(dates) else None))
    out = []
    for row in seed_rows():
        pub = published(row)
        line: dict[str, Any] = {
            "row": _label(row),
            "seed": f"{_PR[row.experiment]} ({row.seed})", "experiment": row.experiment,
            "preset": row.kind.preset, "variant": row.variant, "also": row.also,
            "cref_variant": row.cref_variant or "", "cluster": row.cluster,
            "value_bytes": row.value_bytes, "keys": row.keys,
            "published_base_s": pub["base_s"], "published_opt_s": pub["opt_s"],
            "published_speedup": pub["speedup"]}
        got = None
        for n in sorted({int(k[3]) for k in cyc if k[:3] == (row.experiment, row.cluster,
                                                              row.value_bytes)}):
            a = cyc.get((row.experiment, row.cluster, row.value_bytes, n, "none"))
            b = cyc.get((row.experiment, row.cluster, row.value_bytes, n, row.cref_variant))
            if a is not None and b is not None and n <= row.keys:
                got = (n, a, b)  # the largest simulated size at or below the row's
        at = _at_seed_scale(row, curves)
        line["at_seed_scale"] = at is not None
        if at is not None:
            got = (row.keys, *at)
            line["source"] = "results/scale.json"
        elif got is not None:
            line["source"] = "cells"
        if got is not None:
            n, a, b = got
            f = _freq(row.kind.preset)
            secs = {s: c * row.keys / f / 1e9 for s, c in (("base", a), ("opt", b))}
            measured = n == row.keys
            line.update(sim_keys=n, basis="measured at the seed's key count" if measured
                        else f"extrapolated from {n:,} keys",
                        cycles_per_key_base=a, cycles_per_key_opt=b,
                        predicted_speedup=a / b)
            for s in ("base", "opt"):
                col = f"predicted_{s}_s" if measured else f"extrapolated_{s}_s"
                line[col] = secs[s]
                line[f"ratio_{s}"] = secs[s] / pub[f"{s}_s"]
                line[f"{s}_verdict"] = band_verdict(line[f"ratio_{s}"], TIME_BAND)
                pair = row.kind.scale_pair
                curve = curves.get((pair, row.kind.preset, "a" if s == "base" else "b"), [])
                g = growth(curve, n, row.keys) if _on_scale_curve(row) and (
                    s == "base" or row.cref_variant in ("valkey", "prefetch-after-key")) \
                    else None
                if g is not None and not measured:
                    line[f"extrapolated_{s}_scaled_s"] = secs[s] * g[0]
                    line[f"scaled_to_keys_{s}"] = g[1]
            for s in ("base", "opt"):
                best = line.get(f"extrapolated_{s}_scaled_s") or line.get(
                    f"predicted_{s}_s") or line.get(f"extrapolated_{s}_s")
                pub_cpk = pub[f"{s}_s"] * f * 1e9 / row.keys
                line[f"published_cycles_per_key_{s}"] = pub_cpk
                line[f"gap_cycles_per_key_{s}"] = pub_cpk - best * f * 1e9 / row.keys
            walk = _largest_at_most(curves.get((row.kind.scale_pair, f"{row.kind.preset}"
                                                "+walk_reads=1", "a"), []), row.keys)
            if walk is not None and _on_scale_curve(row):
                line["walk_reads_1_keys"], line["walk_reads_1_cycles_per_key_base"] = walk
            line["speedup_ratio"] = line["predicted_speedup"] / pub["speedup"]
            line["speedup_verdict"] = band_verdict(line["speedup_ratio"], SPEEDUP_BAND)
        line["diagnosis"] = _diagnosis(row, line)
        out.append(line)
    t = pd.DataFrame(out)
    order = ["row", "seed", "experiment", "preset", "variant", "also",
             "cref_variant", "cluster", "value_bytes", "keys", "sim_keys", "basis",
             "at_seed_scale", "source",
             "published_base_s", "predicted_base_s", "extrapolated_base_s",
             "extrapolated_base_scaled_s", "scaled_to_keys_base", "ratio_base",
             "base_verdict", "published_opt_s", "predicted_opt_s", "extrapolated_opt_s",
             "extrapolated_opt_scaled_s", "scaled_to_keys_opt", "ratio_opt", "opt_verdict",
             "published_speedup", "predicted_speedup", "speedup_ratio", "speedup_verdict",
             "cycles_per_key_base", "cycles_per_key_opt", "published_cycles_per_key_base",
             "published_cycles_per_key_opt", "gap_cycles_per_key_base",
             "gap_cycles_per_key_opt", "walk_reads_1_keys",
             "walk_reads_1_cycles_per_key_base", "diagnosis"]
    t = t[[c for c in order if c in t.columns]]
    return [Table("seed_absolute", "The seeds' published times on their own machines: "
                  "predicted against published", t,
                  "seconds; ratios predicted / published; speedup = time before / after",
                  Plot(x="row", xlabel="seed row", ylabel="predicted / published",
                       series=[c for c in ("ratio_base", "ratio_opt", "speedup_ratio")
                               if c in t.columns]),
                  note=f"goal: times within {TIME_BAND[0]}-{TIME_BAND[1]} of the published, "
                       f"speedups within {SPEEDUP_BAND[0]}-{SPEEDUP_BAND[1]}. seed: the PR "
                       "and the seed file. A row whose pair results/scale.json measured "
                       "at the seed's own key count on the seed's preset takes that "
                       "measurement (at_seed_scale, source). A row simulated below its "
                       "seed's key count has "
                       "only extrapolated times (cycles per key x the seed's keys; "
                       "*_scaled_s: times the growth of cycles per key results/scale.json "
                       "measured up to scaled_to_keys; scale.json's rows written after "
                       "the last cell are left out, as they may be of another model).")]


register(Experiment("seed_absolute", "The seeds' published times on their own machines",
                    "Valkey PR #1501, Valkey PR #2311", _cells, _tables))


# --- rendering (docs/studies/seed_absolute.md) --------------------------------------------------

def _num(v: Any, fmt: str = ".3g") -> str:
    return "" if v is None else format(v, fmt)


def render(doc: dict[str, Any], result: str) -> str:
    """The published table, compact: per seed row the published and predicted times (the
    predicted measured, else extrapolated and, where scale.json allows, scaled) with their
    ratio and verdict, the speedups, and the diagnosis; then the plot and the provenance."""
    from kvsim import provenance
    from kvsim.experiments.render import provenance_line

    (t,) = [x for x in doc["tables"] if x["name"] == "seed_absolute"]
    rows = [dict(zip(t["columns"], r, strict=True)) for r in t["rows"]]

    def side(r: dict[str, Any], s: str) -> str:
        meas, ext = r.get(f"predicted_{s}_s"), r.get(f"extrapolated_{s}_s")
        if meas is None and ext is None:
            return f"{_num(r[f'published_{s}_s'])} / -"
        pred = _num(meas) if meas is not None else f"~{_num(ext)}"
        scaled = r.get(f"extrapolated_{s}_scaled_s")
        if scaled is not None:
            pred += f" (scaled ~{_num(scaled)}: {scaled / r[f'published_{s}_s']:.2f})"
        return (f"{_num(r[f'published_{s}_s'])} / {pred} | {r[f'ratio_{s}']:.2f} "
                f"{r[f'{s}_verdict']}")

    out = [f"**{t['title']}** ({t['unit']})", "",
           "| seed row | simulated at | before: published / predicted s | ratio | "
           "after: published / predicted s | ratio | speedup: published / predicted | "
           "ratio | diagnosis |", "|" + "---|" * 9]
    for r in rows:
        at = (f"{r['sim_keys']:,.0f}" + (
            " (the seed's scale, scale.json)" if r.get("at_seed_scale") else
            "" if r["basis"].startswith("measured") else " (extrapolated)")
        ) if r.get("sim_keys") else "-"
        if r.get("ratio_base") is None:
            out.append(f"| {r['row']} | {at} | {r['published_base_s']:.3g} / - | | "
                       f"{r['published_opt_s']:.3g} / - | | {r['published_speedup']:.2f} / - "
                       f"| | {r.get('diagnosis') or ''} |")
            continue
        out.append(f"| {r['row']} | {at} | {side(r, 'base')} | {side(r, 'opt')} | "
                   f"{r['published_speedup']:.2f} / {r['predicted_speedup']:.2f} | "
                   f"{r['speedup_ratio']:.2f} {r['speedup_verdict']} | {r['diagnosis']} |")
    out += ["", t["note"][0].upper() + t["note"][1:].rstrip(".") + ".", "",
            f"![{t['title']}]({result.rsplit('/', 1)[0]}/seed_absolute.png)", ""]
    command = doc["provenance"].get("command") or "kvsim experiment run seed_absolute"
    out.append(provenance_line(doc, result, provenance.scrub_line(command)))
    return "\n".join(out)


# --- re-assembly ----------------------------------------------------------------------------

def reassemble(directory: Path, publish: bool, scale_until: str | None = None) -> Path:
    """Assemble ``directory``'s seed_absolute cells (a ``kvsim experiment run seed_absolute -o
    DIRECTORY``) into its tables again with this code and the current ``results/scale.json``,
    without recomputing a cell (kvsim.experiments.runner.assemble), reading scale.json's rows
    written up to ``scale_until`` (default: the newest cell's date); the result file's
    ``assembled`` says when, at which commit, with which scale.json. ``publish``: copy it to
    results/experiments/. Returns the written file."""
    from kvsim import provenance
    from kvsim.experiments import runner

    global SCALE_UNTIL
    SCALE_UNTIL, before = scale_until, SCALE_UNTIL
    try:
        if not runner.assemble(directory, "seed_absolute"):
            raise ValueError(f"{directory}: no seed_absolute cells")
    finally:
        SCALE_UNTIL = before
    path = directory / "seed_absolute" / "seed_absolute.json"
    doc = json.loads(path.read_text())
    scale = json.loads(SCALE_JSON.read_text())["provenance"] if SCALE_JSON.is_file() else None
    now = provenance.provenance()
    doc["assembled"] = {"command": "python -m kvsim.experiments.seed_absolute_assemble DIR"
                        + (" --publish" if publish else "")
                        + (f" --scale-until {scale_until}" if scale_until else ""),
                        "scale_until": scale_until,
                        "commit": now["commit"], "dirty": now["dirty"],
                        "date_utc": now["date_utc"],
                        "scale_json": {k: (scale or {}).get(k) for k in ("commit", "date_utc")}}
    provenance.write_atomic(path, json.dumps(doc, indent=2, default=str) + "\n")
    if publish:
        dst = provenance.results_dir() / "experiments"
        for src in [path, *sorted(path.parent.glob("*.png"))]:
            provenance.write_atomic(dst / src.name, src.read_bytes())
    return path

