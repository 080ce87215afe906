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

from kvsim import provenance
from kvsim.experiments import pairs as catalogue

__all__ = ["PAIRS", "run_size"]

#: workload -> (c_ref workload, common options, side A variant, side B variant): the pairs
#: "keys", "save-nochecksum-valkey" (SAVE as seed 002 ran it: checksum off) and "load-8" of
#: kvsim.experiments.pairs
PAIRS = {w: (p.workload, dict(p.common), p.a["variant"], p.b["variant"])
         for w, p in (("keys", catalogue.get("keys")),
                      ("save", catalogue.get("save-nochecksum-valkey")),
                      ("load", catalogue.get("load-8")))}


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


def run_size(workload: str, keys: int, cpus: list[str], tmp: Path, repeat: int,
             native: bool) -> dict:
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
    if native:
        env = cref.ARENA_WARM if workload == "load" else None
        load0 = provenance.load_average_1m()
        res = cref.native(cw, {"keys": keys, **common, "variant": va}, repeat=repeat + 1,
                          versus={"variant": vb}, env=env)
        a, b = res["cpu_runs_s"][1:], res["versus"]["cpu_runs_s"][1:]
        out["native"] = {"ns_per_key_a": statistics.median(a) / keys * 1e9,
                         "ns_per_key_b": statistics.median(b) / keys * 1e9,
                         "speedup": statistics.median(x / y for x, y in zip(a, b, strict=True)),
                         "runs_a_s": a, "runs_b_s": b,
                         "load_average_1m": [load0, provenance.load_average_1m()]}
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
    out = Path(a.out or provenance.default_result_path("scale.json"))
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
        old["chase"] = dict(chase(ws, cpus, a.repeat, 300_000, 40_000),
                            provenance=provenance.provenance())
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
