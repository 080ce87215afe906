"""Ablations of a calibration on its own recorded samples: variants of a CPU file written by
`kvsim calibrate` (a placement, a level's capacity, ways and policy, its inclusion), each
with the latencies, DRAM, the STLB hit and the walk solved again by the hierarchy fit's
least squares (:func:`kvsim.sim.calibrate_fit.solve`), against the file's native chases
(``[meta.raw]``). What the self-check's chase rows would say of each variant, without a
native run and without the full fit's search (sim/VALIDATION.md, finding 14)::

    python -m kvsim.sim.calibrate_ablate results/calibrate-....toml \\
        --out results/calibrate-ablate-....json "" placement=random \\
        "placement=random,L2=2048KiB:16:qlru" "L3.inclusion=exclusive"

A variant is comma-separated ``key=value``: ``placement=virtual|random``, ``seed=N`` (the
placement's), ``L<k>=SIZE:WAYS:POLICY`` (a level's geometry and replacement),
``L<k>.inclusion=...``, ``L<k>.mshrs=N`` (its miss buffers), ``dram.bandwidth_gbs=X`` (the
DRAM channel's rate, engine.h ``dram_xfer_ticks``), ``drop=L<k>:KIND`` and
``add=L<k>:KIND`` (a hardware prefetcher of the level taken away or added, degree 1),
``tlb.KEY=VALUE`` (:data:`TLB_KEYS`),
(``tlb.walk_last_level=false``: a last level that keeps no page-table line; ``=guest``:
none of the host's, under nested paging),
``fix=NAME`` (an unknown of the least squares kept at the file's value instead of solved:
``walk4k``, ``walk``, ``stlb``, ``host``; ``fix=walk4k`` is the model without a 4 KiB
page's walk's own extra when the file has none); "" is the file itself. The
result (JSON, with its provenance) holds per variant the points off their tolerance, the
solved unknowns and each chase's measured and predicted ns and loads per level
(``per_load``). ``--weighted`` weighs each chase by one over its tolerance in the least
squares; ``--statistic round-median`` takes the median of the rounds' fastest samples as a
chase's native figure instead of the fastest. ``--parallel 1,4,8`` simulates the file's
parallel chases of those chain counts on each solved variant too (``parallel`` rows), as
the self-check replays them.
"""

from __future__ import annotations

import argparse
import copy
import math
import sys
import tomllib
from pathlib import Path

import numpy as np

from . import calibrate_check as check
from . import calibrate_fit as fit
from .config import ConfigError, fmt_size, parse_cpu, parse_size

MIB = 1 << 20
#: The unknowns a variant may keep at the file's value (calibrate_fit.cols' names).
FIXABLE = ("walk4k", "walk", "stlb", "host")
#: The ``[tlb]`` keys a variant may set (``tlb.KEY=VALUE``), with their types.
TLB_KEYS = {"walk_retention_ns": float, "host_read_ns": float, "host_page_size": str,
            "l2_entries": int, "walkers": int, "walk_reads": int,
            "walk_last_level": lambda v: {"true": True, "false": False,
                                          "guest": "guest"}[v.lower()]}


def points_of(doc: dict, statistic: str = "fastest"
              ) -> tuple[list[tuple[int, int, float]], list[float]]:
    """The file's chases as the hierarchy fit takes them ((size, page, native ns)) and each
    one's tolerance in the self-check (its rounds' spread). ``statistic``: the native figure
    of a point, the fastest sample (as the fit and the self-check take it) or
    ``round-median``, the median over the rounds of each round's fastest sample (what a
    model drawing one physical placement is compared with where each round maps its buffer
    afresh)."""
    raw = doc["meta"]["raw"]
    rep = raw.get("repeats")
    huge = (raw.get("huge_fraction_top") or 0.0) >= 0.5
    page = 2 * MIB if huge else 4096

    def figure(v: list[float]) -> float:
        if statistic == "fastest" or not rep:
            return min(v)
        return float(np.median([min(v[i:i + rep]) for i in range(0, len(v), rep)]))

    pts, tol = [], []
    for s in raw["sizes"]:
        v = raw["chase_ns"][str(s)]
        pts.append((int(s), page, figure(v)))
        tol.append(check.point_tolerance(check.round_spread(v, rep)))
    for k, v in sorted((raw.get("chase_4k_ns") or {}).items(), key=lambda kv: int(kv[0])):
        pts.append((int(k), 4096, figure(v)))
        tol.append(check.point_tolerance(check.round_spread(v, rep)))
    return pts, tol


def variant(doc: dict, spec: str) -> dict:
    """``doc`` (without its meta and self-check) changed as ``spec`` says."""
    d = copy.deepcopy({k: v for k, v in doc.items() if k not in ("meta", "selfcheck")})
    d["_fixed"] = []
    names = [c["name"] for c in d["cache"]]
    for kv in filter(None, (x.strip() for x in spec.split(","))):
        key, _, val = kv.partition("=")
        if key == "placement":
            d["tlb"]["placement"] = val
        elif key == "seed":
            d["tlb"]["placement_seed"] = int(val)
        elif key == "fix":
            if val not in FIXABLE:
                raise ConfigError(f"calibrate_ablate: variant {spec!r}: fix={val!r} is not "
                                  f"one of {', '.join(FIXABLE)}")
            d["_fixed"].append(val)
        elif key.startswith("tlb.") and key[4:] in TLB_KEYS:
            try:
                d["tlb"][key[4:]] = TLB_KEYS[key[4:]](val)
            except (KeyError, ValueError):
                raise ConfigError(f"calibrate_ablate: variant {spec!r}: {key}={val!r} is not "
                                  "a value of its type") from None
        elif key in ("drop", "add"):
            lvl, _, kind = val.partition(":")
            pfs = d.setdefault("prefetcher", [])
            if key == "add":
                pfs.append({"level": lvl, "kind": kind, "degree": 1, "table": 16})
            else:
                keep = [p for p in pfs if (p["level"], p["kind"]) != (lvl, kind)]
                if len(keep) == len(pfs):
                    raise ConfigError(f"calibrate_ablate: variant {spec!r}: the file has no "
                                      f"{kind!r} prefetcher at {lvl!r}")
                d["prefetcher"] = keep
        elif key in names:
            size, ways, pol = val.split(":")
            d["cache"][names.index(key)].update(size=parse_size(size, key), ways=int(ways),
                                                replacement=pol)
        elif key.endswith(".inclusion") and key[:-10] in names:
            d["cache"][names.index(key[:-10])]["inclusion"] = val
        elif key.endswith(".mshrs") and key[:-6] in names and val.isdigit():
            d["cache"][names.index(key[:-6])]["mshrs"] = int(val)
        elif key == "dram.bandwidth_gbs":
            try:
                d["dram"]["bandwidth_gbs"] = float(val)
            except ValueError:
                raise ConfigError(f"calibrate_ablate: variant {spec!r}: {key}={val!r} is "
                                  "not a number") from None
        else:
            raise ConfigError(f"calibrate_ablate: variant {spec!r}: unknown key {key!r}")
    return d


def solved(d: dict, pts: list[tuple[int, int, float]],
           last_level_ns: float | None = None,
           weights: np.ndarray | None = None) -> tuple[dict | None, np.ndarray | None]:
    """``d`` with its unknowns solved over the chases ``pts`` and the chases simulated on it
    (ns); (None, None) when the least squares give no valid file. ``d["_fixed"]`` (removed
    here): the unknowns kept at the file's values. ``last_level_ns``: the knee fit's last
    level, which DRAM must exceed as in the fit (calibrate_check.dram_floor_ns)."""
    d = dict(d)
    fixed = tuple(d.pop("_fixed", ()))
    ghz = d["freq_ghz"]
    y = np.array([p[2] for p in pts]) * ghz
    cpu = parse_cpu(d, "ablate")
    rows = [fit.chase_row(cpu, s, p) for s, p, _ in pts]
    err, x = fit.solve(rows, fit.unknowns(cpu), y, check.dram_floor_ns(last_level_ns) * ghz,
                       fixed, weights)
    if not math.isfinite(err):
        return None, None
    d = copy.deepcopy(d)
    fit.apply_solution(d, x, ghz)
    cpu = parse_cpu(d, "ablate")
    rows = [fit.chase_row(cpu, s, p) for s, p, _ in pts]
    d["_served"] = [r[0] for r in rows]
    return d, np.array([r[1] for r in rows]) / ghz


def parallel_rows(d: dict, doc: dict, chains: list[int]) -> list[dict]:
    """The parallel chases ``chains`` of the file ``doc`` (its ``[meta.raw]``), simulated
    on the variant ``d`` as the self-check replays them (calibrate_check.replay), against
    their fastest native sample."""
    from . import micro

    raw = doc["meta"]["raw"]
    meas = raw.get("mlp_ns_per_load") or {}
    top = int(raw["sizes"][-1])
    page = 2 * MIB if (raw.get("huge_fraction_top") or 0.0) >= 0.5 else 4096
    cpu = parse_cpu({k: v for k, v in d.items() if not k.startswith("_")}, "ablate")
    warm = check.steady_warmup(top, check.cache_bytes(cpu))
    out = []
    for n in chains:
        if str(n) not in meas:
            raise ConfigError(f"calibrate_ablate: --parallel {n}: the file measured no "
                              "parallel chase of that many chains")
        p = micro.predict(cpu, top, n, max(1, check.REPLAY_STEPS // n), page, True,
                          loop_warmup=warm // n)
        m = min(meas[str(n)])
        out.append({"point": f"mlp {fmt_size(top)} x{n}", "measured_ns": round(m, 3),
                    "predicted_ns": round(p["ns_per_load"], 3),
                    "ratio": round(p["ns_per_load"] / m, 4), "mlp": p["mlp"],
                    "walk_reads_timed": (p["tlb"] or {}).get("walk_reads_timed")})
    return out


def ablate(path: Path, specs: list[str], log=lambda m: None, weighted: bool = False,
           statistic: str = "fastest", parallel: list[int] | None = None) -> dict:
    doc = tomllib.loads(Path(path).read_text())
    pts, tol = points_of(doc, statistic)
    last = check.knee_last_ns(doc)
    w = fit.point_weights(tol) if weighted else None
    out = []
    for spec in specs:
        d, pred = solved(variant(doc, spec), pts, last, w)
        if d is None:
            out.append({"variant": spec, "valid": False})
            log(f"{spec or 'the file'}: no valid latencies")
            continue
        served = d.pop("_served")
        names = [c["name"] for c in d["cache"]] + list(fit.cols(len(served[0])))
        ratio = pred / np.array([p[2] for p in pts])
        off = [i for i, r in enumerate(ratio) if abs(r - 1.0) > tol[i] + 1e-9]
        out.append({
            "variant": spec, "valid": True,
            "latency_cycles": [c["latency"] for c in d["cache"]],
            "dram_ns": d["dram"]["latency_ns"], "tlb": {
                k: d["tlb"].get(k) for k in ("l2_latency", "walk_latency", "host_read_ns",
                                             "walk_extra_4k")},
            "off": [_name(pts[i]) for i in off],
            "points": [{"point": _name(p), "measured_ns": round(p[2], 3),
                        "predicted_ns": round(float(v), 3), "ratio": round(float(r), 4),
                        "tolerance": round(t, 4),
                        "per_load": {k: round(float(c), 3) for k, c in zip(names, a, strict=True)
                                     if c > 0}}
                       for p, v, r, t, a in zip(pts, pred, ratio, tol, served,
                                                strict=True)]})
        log(f"{spec or 'the file'}: {len(off)} of {len(pts)} chases off: "
            + "; ".join(f"{_name(pts[i])} {ratio[i]:.3f}" for i in off))
        if parallel:
            out[-1]["parallel"] = rows = parallel_rows(d, doc, parallel)
            log(f"{spec or 'the file'}: parallel chases "
                + ", ".join(f"{r['point']} {r['ratio']:.3f}" for r in rows))
    return {"file": str(path), "weighted": weighted, "statistic": statistic,
            "parallel": parallel or [], "variants": out}


def _name(p: tuple[int, int, float]) -> str:
    return f"chase {fmt_size(p[0])} {p[1] // 1024}K"


def main(argv: list[str] | None = None) -> int:
    from kvsim import provenance

    ap = argparse.ArgumentParser(prog="python -m kvsim.sim.calibrate_ablate",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("file", type=Path)
    ap.add_argument("variants", nargs="+")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--weighted", action="store_true",
                    help="weigh each chase by its tolerance in the least squares "
                         "(calibrate_fit.point_weights), as the hierarchy fit does")
    ap.add_argument("--statistic", choices=("fastest", "round-median"), default="fastest",
                    help="each chase's native figure: the fastest sample, or the median of "
                         "the rounds' fastest (calibrate_ablate.points_of)")
    ap.add_argument("--parallel", default="",
                    help="comma-separated chain counts: the file's parallel chases of that "
                         "many chains simulated on each variant too (as the self-check)")
    a = ap.parse_args(argv)
    try:
        chains = [int(x) for x in a.parallel.split(",") if x.strip()]
    except ValueError:
        print(f"calibrate_ablate: error: --parallel {a.parallel!r}: not chain counts",
              file=sys.stderr)
        return 1
    try:
        res = ablate(a.file, a.variants, log=lambda m: print(m, file=sys.stderr),
                     weighted=a.weighted, statistic=a.statistic, parallel=chains)
    except (ConfigError, OSError, KeyError, tomllib.TOMLDecodeError, ValueError) as e:
        print(f"calibrate_ablate: error: {a.file}: {e}", file=sys.stderr)
        return 1
    return provenance.publish("calibrate_ablate", a.out, res)


if __name__ == "__main__":
    sys.exit(main())
