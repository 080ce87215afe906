"""The seeds' scale: KEYS, SAVE and snapshot load from 10^6 to 5x10^7 keys, predicted on
every preset in one pass and natively on this machine.
``python -m kvsim.experiments.scale [--keys 1e6,5e6,2e7,5e7] [--workloads keys,save,load]``.

For each size and workload both sides of the seed's pair (KEYS and SAVE: no prefetch against
Valkey's iterator prefetch, seed 002, SAVE without the checksum as the seed ran it; load: no
prefetch against prefetch-after-key, 8-byte values, seed 000) are traced with the setup
carried (``--warm-setup compact``), each trace is simulated on every ``--cpu`` in one pass
from the file (memory independent of the trace's length: the reader streams chunks, the
compact prefix is bounded), and natively timed in one
process per side pair (``--versus-variant``, process CPU time, ``--repeat`` rounds, the first
dropped). Per preset a row gives cycles per key and what explains their growth: DTLB and STLB
misses per key (TLB reach: entries x 4 KiB against the keyspace), last-level demand misses
per key and the cycles the TLB costs (the ``tlb`` stall). Each size is appended to the result
file as it completes (``--out``, default ``results/scale.json``), with the peak memory of the
tracing and simulating processes.

The figures are the ``scale`` study's cells (:func:`predict_spec`, :func:`native_spec`,
:func:`chase_spec`: kinds ``scale-predict``, ``scale-native`` and ``scale-chase``, computed by
:func:`kvsim.experiments.cells.run_cell`); ``kvsim experiment run scale [--scale small|full]
[--cpu CPU ...] -o DIR`` runs the same cells through the framework (resumed, Parquet rows, a
table of the predicted and native speedups per size).
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pandas as pd

from kvsim import provenance
from kvsim.experiments import cells
from kvsim.experiments import pairs as catalogue
from kvsim.experiments.framework import Experiment, Plot, Table, register

__all__ = ["PAIRS", "chase_spec", "native_spec", "predict_spec", "run_size"]

#: workload -> (c_ref workload, common options, side A variant, side B variant): the pairs
#: "keys", "save-nochecksum-valkey" (SAVE as seed 002 ran it: checksum off) and "load-8" of
#: kvsim.experiments.pairs
PAIR_NAMES = {"keys": "keys", "save": "save-nochecksum-valkey", "load": "load-8"}
PAIRS = {w: (p.workload, dict(p.common), p.a["variant"], p.b["variant"])
         for w, p in ((w, catalogue.get(n)) for w, n in PAIR_NAMES.items())}


def load_cpu(spec: str):
    """A preset or CPU file, or ``NAME+walk_reads=R``: that CPU with R page-table reads per
    walk through its caches (sim/MODEL.md, section 3), a sensitivity of the walk model."""
    import dataclasses

    from kvsim import sim

    name, plus, extra = spec.partition("+walk_reads=")
    cfg = sim.load_cpu(name)
    if not plus:
        return cfg
    if cfg.tlb is None or not extra.isdigit():
        raise ValueError(f"--cpu {spec}: expected a CPU with a TLB and +walk_reads=N")
    return dataclasses.replace(cfg, name=spec,
                               tlb=dataclasses.replace(cfg.tlb, walk_reads=int(extra)))


def _peak_rss_mb(who: int) -> float:
    return resource.getrusage(who).ru_maxrss / 1024


def _sim_row(res: dict, cfg, keys: int) -> dict:
    llc = res["levels"][-1]
    tlb = res.get("tlb") or {}
    stalls = (res.get("timing") or {}).get("stall_cycles") or {}
    return {"cycles_per_key": res["cycles"] / keys,
            "ns_per_key": res["cycles"] / keys / cfg.freq_ghz,
            "dtlb_misses_per_key": tlb.get("dtlb_misses", 0) / keys,
            "stlb_misses_per_key": tlb.get("stlb_misses", 0) / keys,
            "llc_demand_misses_per_key": llc.get("demand_misses", 0) / keys,
            "tlb_stall_cycles_per_key": stalls.get("tlb", 0) / keys,
            "walks_per_key": tlb.get("stlb_misses", 0) / keys,
            "levels": {lv["name"]: {"demand_misses_per_key": lv["demand_misses"] / keys}
                       for lv in res["levels"]},
            "page_table_reads": page_table_reads(res, keys)}


def page_table_reads(res: dict, keys: int) -> dict:
    """Per cache level, the walks' page-table reads per key that reach it and that miss it:
    the loads of tag 0 (the engine's walk reads, sim/MODEL.md section 3; c_ref tags every
    access of its own, so none of its loads has tag 0). Empty with a fixed walk."""
    out: dict = {}
    for b in res.get("by_tag", []):
        if b["tag"] == 0 and b["kind"] == "load":
            out[b["level"]] = {"accesses_per_key": b["accesses"] / keys,
                               "misses_per_key": b["misses"] / keys}
    return out


#: Where the ``scale-predict`` cells write their traces (a large size's are tens of GB:
#: beside the result file, not in a memory-backed /tmp); None: the system's temporary
#: directory. :func:`run_size` and :func:`main` set it while their cells run.
TRACE_DIR: Path | None = None


def predict_spec(workload: str, keys: int, cpus: list[str]) -> dict[str, Any]:
    """The cell predicting both sides of ``workload``'s pair at ``keys`` keys on every CPU of
    ``cpus`` (one trace a side, simulated on all of them in one pass)."""
    return {"experiment": NAME, "kind": "scale-predict", "workload": workload, "keys": keys,
            "cpus": list(cpus), "params": {"workload": workload, "keys": keys}}


def native_spec(workload: str, keys: int, repeat: int) -> dict[str, Any]:
    """The cell timing both sides of ``workload``'s pair natively at ``keys`` keys: one
    process alternating the sides, ``repeat`` rounds kept (the first dropped)."""
    return {"experiment": NAME, "kind": "scale-native", "workload": workload, "keys": keys,
            "repeat": repeat, "params": {"workload": workload, "keys": keys}}


def chase_spec(sizes: list[int], cpus: list[str], rounds: int, loads: int = 300_000,
               steps: int = 40_000) -> dict[str, Any]:
    """The cell of :func:`chase`: the native pointer chase against its prediction."""
    return {"experiment": NAME, "kind": "scale-chase", "sizes": list(sizes),
            "cpus": list(cpus), "rounds": rounds, "loads": loads, "steps": steps,
            "params": {"workload": "chase", "keys": None}}


def _predict(workload: str, keys: int, cpus: list[str], tmp: Path) -> dict:
    from kvsim import sim, traces
    from kvsim.experiments import cref

    cw, common, va, vb = PAIRS[workload]
    configs = [load_cpu(c) for c in cpus]
    out: dict = {"workload": workload, "keys": keys, "sides": {"a": va, "b": vb},
                 "predicted": {c: {} for c in cpus}}
    for side, variant in (("a", va), ("b", vb)):
        t = tmp / f"{workload}-{keys}-{side}.kvt"
        t0 = time.monotonic()
        cref.trace(cw, t, {"keys": keys, **common, "variant": variant,
                           "warm_setup": "compact"})
        t1 = time.monotonic()
        with traces.open(t) as reader:
            results = sim.simulate_many(reader, configs, threads=1)
        t2 = time.monotonic()
        out[f"trace_{side}"] = {"bytes": t.stat().st_size, "trace_s": t1 - t0,
                                "simulate_s": t2 - t1, "records": results[0]["records"],
                                "warmup_records": results[0]["warmup_records"]}
        t.unlink()
        for cpu, cfg, res in zip(cpus, configs, results, strict=True):
            out["predicted"][cpu][side] = _sim_row(res, cfg, keys)
    for cpu in cpus:
        p = out["predicted"][cpu]
        p["speedup"] = p["a"]["cycles_per_key"] / p["b"]["cycles_per_key"]
    out["peak_rss_mb"] = {"simulate_and_recompress": _peak_rss_mb(resource.RUSAGE_SELF),
                          "c_ref_children": _peak_rss_mb(resource.RUSAGE_CHILDREN)}
    return out


def _native(workload: str, keys: int, repeat: int) -> dict:
    from kvsim.experiments import cref

    cw, common, va, vb = PAIRS[workload]
    env = cref.ARENA_WARM if workload == "load" else None
    load0 = provenance.load_average_1m()
    res = cref.native(cw, {"keys": keys, **common, "variant": va}, repeat=repeat + 1,
                      versus={"variant": vb}, env=env)
    a, b = res["cpu_runs_s"][1:], res["versus"]["cpu_runs_s"][1:]
    return {"ns_per_key_a": statistics.median(a) / keys * 1e9,
            "ns_per_key_b": statistics.median(b) / keys * 1e9,
            "speedup": statistics.median(x / y for x, y in zip(a, b, strict=True)),
            "runs_a_s": a, "runs_b_s": b,
            "load_average_1m": [load0, provenance.load_average_1m()]}


def _predict_cell(spec: dict) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="kvsim-scale-", dir=TRACE_DIR) as tmp:
        row = _predict(spec["workload"], spec["keys"], spec["cpus"], Path(tmp))
    return {"row": json.dumps(row),
            **{f"speedup:{c}": row["predicted"][c]["speedup"] for c in spec["cpus"]}}


def _native_cell(spec: dict) -> dict[str, Any]:
    nat = _native(spec["workload"], spec["keys"], spec["repeat"])
    return {"native": json.dumps(nat), "speedup": nat["speedup"]}


def _chase_cell(spec: dict) -> dict[str, Any]:
    return {"chase": json.dumps(chase(spec["sizes"], spec["cpus"], spec["rounds"],
                                      spec["loads"], spec["steps"]))}


cells.register_kind("scale-predict", _predict_cell, counts_as="sim", module="scale")
cells.register_kind("scale-native", _native_cell, counts_as="native", module="scale")
cells.register_kind("scale-chase", _chase_cell, counts_as="native", module="scale",
                    artifacts=("kvsim-calibrate",))


def run_size(workload: str, keys: int, cpus: list[str], tmp: Path, repeat: int,
             native: bool) -> dict:
    """One row of the result file: the study's ``scale-predict`` cell (traces in ``tmp``)
    and, with ``native``, its ``scale-native`` cell."""
    global TRACE_DIR
    before, TRACE_DIR = TRACE_DIR, Path(tmp)
    try:
        out = json.loads(cells.run_cell(predict_spec(workload, keys, cpus))["metrics"]["row"])
    finally:
        TRACE_DIR = before
    if native:
        m = cells.run_cell(native_spec(workload, keys, repeat))["metrics"]
        out["native"] = json.loads(m["native"])
    return out


def chase(sizes: list[int], cpus: list[str], rounds: int, loads: int, steps: int) -> dict:
    """The walk model against the machine: `kvsim calibrate`'s native pointer chase
    (``kvsim-calibrate chase``, 4 KiB pages) over each working set in ``rounds`` rounds, and
    the same chase predicted on every CPU of ``cpus`` (kvsim.sim.micro's trace of that loop),
    rows as ``kvsim micro compare`` writes them (kvsim.experiments.micro.rows_of)."""
    from kvsim.experiments import micro
    from kvsim.sim.calibrate import run_bench
    from kvsim.sim.micro import predict

    nat: dict = {}
    huge: dict = {}
    for r in range(rounds):
        print(f"chase round {r + 1}/{rounds}: native, 4 KiB pages", flush=True)
        for pt in run_bench("chase", "4k", loads, 1, *sizes)["points"]:
            nat.setdefault(("chase", "4k", pt["size"], 1), []).extend(pt["ns"])
            huge[("chase", "4k", pt["size"], 1)] = pt["huge_fraction"]
    out = {}
    for c in cpus:
        cfg = load_cpu(c)
        out[c] = micro.rows_of(nat, huge, lambda kind, size, n, ps, cfg=cfg: predict(
            cfg, size, n, steps, ps, False), ["4k"])
        print(f"chase on {c}: " + ", ".join(
            f"{x['working_set'] >> 20} MiB {x['predicted_ns']:.0f}/"
            f"{x['native_ns']['median']:.0f} ns" for x in out[c]), flush=True)
    return {"rows": out, "loads": loads, "steps": steps, "rounds": rounds,
            "note": "ns per chase load: predicted on each CPU against the native median "
                    "(4 KiB pages; kvsim-calibrate chase)"}


# --- the framework's study -------------------------------------------------------------------

NAME = "scale"
#: per scale: the sizes (keys), the workloads, the native rounds kept, and the chase's working
#: sets and rounds (full: the command's defaults and results/scale.json's chase)
SCALES: dict[str, dict[str, Any]] = {
    "small": {"keys": (10_000, 40_000), "workloads": ("keys", "load"), "repeat": 3,
              "chase": ((1 << 20, 16 << 20), 2)},
    "full": {"keys": (1_000_000, 5_000_000, 20_000_000, 50_000_000),
             "workloads": ("keys", "load"), "repeat": 3,
             "chase": ((256 << 20, 1 << 30, 4 << 30, 10 << 30), 3)},
}


def _cells(scale: str, cpus: list[str]) -> list[dict]:
    """Per size and workload (KEYS: no prefetch against Valkey's iterator prefetch; load: no
    prefetch against prefetch-after-key), both sides traced with the setup carried and
    predicted on every CPU in one pass, and timed natively; then the calibration's pointer
    chase against its prediction. ``small``: 10k and 40k keys and a 1-16 MiB chase; ``full``:
    10^6 to 5x10^7 keys (tens of GB of traces) and a 256 MiB to 10 GiB chase."""
    g = SCALES[scale]
    out = []
    for keys in g["keys"]:
        for w in g["workloads"]:
            out += [predict_spec(w, keys, cpus), native_spec(w, keys, g["repeat"])]
    sizes, rounds = g["chase"]
    return out + [chase_spec(list(sizes), cpus, rounds)]


def _tables(rows: pd.DataFrame) -> list[Table]:
    kind = rows["kind"] if "kind" in rows else pd.Series(dtype=str)
    native = {(r["workload"], r["keys"]): json.loads(r["native"])["speedup"]
              for _, r in rows[kind == "scale-native"].iterrows()}
    lines = []
    for _, r in rows[kind == "scale-predict"].iterrows():
        row = json.loads(r["row"])
        nat = native.get((r["workload"], r["keys"]))
        pair = catalogue.get(PAIR_NAMES[r["workload"]])
        seed = pair.seed_speedup() if pair.seed_speedup else None
        lines.append({"workload": r["workload"], "keys": int(r["keys"]), "seed": seed,
                      "native": f"{nat:.2f}x" if nat else "", "native_value": nat,
                      **{f"sim:{c}": p["speedup"] for c, p in row["predicted"].items()}})
    chase_lines = []
    for _, r in rows[kind == "scale-chase"].iterrows():
        for cpu, pts in json.loads(r["chase"])["rows"].items():
            for x in pts:
                chase_lines.append({"cpu": cpu, "working_set_mib": x["working_set"] >> 20,
                                    "seed": None, "predicted_ns": x["predicted_ns"],
                                    "native_ns": x["native_ns"]["median"]})
    return [Table(NAME, "The seeds' pairs from 10^6 keys up: predicted and native speedups",
                  pd.DataFrame(lines).sort_values(["workload", "keys"], kind="stable")
                  if lines else pd.DataFrame(lines), "speedup (x: no prefetch / variant)",
                  Plot(x="keys", ylabel="speedup", xlabel="keys", kind="line", logx=True),
                  note="native: the median of the interleaved rounds' ratios (process CPU "
                       "time); `python -m kvsim.experiments.scale` writes the same cells, "
                       "with the per-key figures, to results/scale.json"),
            Table(f"{NAME}-chase", "The page walk model against the machine: a pointer chase",
                  pd.DataFrame(chase_lines), "ns per chase load (4 KiB pages)",
                  Plot(x="working_set_mib", ylabel="ns per load", xlabel="working set (MiB)",
                       kind="line", logx=True, ref=None, series=["predicted_ns",
                                                                 "native_ns"]),
                  note="predicted on each CPU against the native median (kvsim-calibrate "
                       "chase); no upstream figure (seed) exists")]


register(Experiment(NAME, "Scale: the seeds' pairs from 10^6 to 5x10^7 keys",
                    "; ".join(catalogue.get(PAIR_NAMES[w]).seed
                              for w in SCALES["full"]["workloads"]), _cells, _tables))


def main(argv: list[str] | None = None) -> int:
    from kvsim import sim

    ap = argparse.ArgumentParser(prog="python -m kvsim.experiments.scale",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--keys", default="1e6,5e6,2e7,5e7")
    ap.add_argument("--workloads", default="keys,load")
    ap.add_argument("--cpu", action="append", default=None,
                    help="preset or CPU file, or NAME+walk_reads=R (repeatable; default: every "
                         "preset but local)")
    ap.add_argument("--repeat", type=int, default=3, help="native rounds kept per side")
    ap.add_argument("--no-native", action="store_true")
    ap.add_argument("--out", default=None)
    ap.add_argument("--chase", default=None, metavar="SIZES",
                    help="instead of the workloads: the calibration's native pointer chase "
                         "over these working sets (e.g. 256MiB,10GiB) against its "
                         "prediction on every --cpu; stored as the file's 'chase'")
    ap.add_argument("--append", action="store_true",
                    help="keep the rows of an existing --out file (each with its own run)")
    a = ap.parse_args(argv)
    try:
        sizes = [int(float(k)) for k in a.keys.split(",")]
        works = a.workloads.split(",")
        bad = [w for w in works if w not in PAIRS]
        if bad or min(sizes) < 1:
            raise ValueError(f"unknown workload {bad[0]!r}" if bad else "keys must be >= 1")
    except ValueError as exc:
        print(f"scale: error: {exc}", file=sys.stderr)
        return 2
    cpus = a.cpu or [p for p in sim.preset_names() if p != "local"]
    out = provenance.out_path(a.out, "scale.json")
    rows: list[dict] = []
    kept: dict = {}
    if a.append and out.is_file():
        old = json.loads(out.read_text())
        rows = [dict(r, provenance=r.get("provenance", old["provenance"])) for r in old["rows"]]
        kept = {k: old[k] for k in ("chase",) if k in old}
    if a.chase:
        from kvsim.sim.config import parse_size

        try:
            ws = [parse_size(x, "--chase") for x in a.chase.split(",")]
        except Exception as exc:
            print(f"scale: error: --chase: {exc}", file=sys.stderr)
            return 2
        old = json.loads(out.read_text()) if out.is_file() else {"cpus": cpus, "rows": []}
        got = cells.run_cell(chase_spec(ws, cpus, a.repeat))["metrics"]
        old["chase"] = dict(json.loads(got["chase"]), provenance=provenance.provenance())
        provenance.write_result(out, {k: v for k, v in old.items() if k != "provenance"})
        print(json.dumps({"wrote": str(out)}))
        return 0
    with tempfile.TemporaryDirectory(prefix="kvsim-scale-", dir=out.parent) as tmp:
        for keys in sizes:
            for w in works:
                r = run_size(w, keys, cpus, Path(tmp), a.repeat, not a.no_native)
                r["provenance"] = provenance.provenance()
                rows.append(r)
                line = " ".join(f"{c}={r['predicted'][c]['a']['cycles_per_key']:.0f}/"
                                f"{r['predicted'][c]['b']['cycles_per_key']:.0f}"
                                for c in cpus)
                nat = r.get("native")
                print(f"{w} {keys:>10,}: cycles/key none/variant {line}" +
                      (f"; native {nat['ns_per_key_a']:.1f}/{nat['ns_per_key_b']:.1f} ns/key"
                       if nat else ""), flush=True)
                provenance.write_result(out, {
                    "cpus": cpus, "rows": rows, **kept,
                    "note": "per key: a = no prefetch, b = the variant; predicted on every "
                            "CPU in one pass over each trace (setup carried, compact)"})
    print(json.dumps({"wrote": str(out)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
