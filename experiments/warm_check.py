"""The same starting state, checked natively: KEYS over a keyspace that fits a large last
level, on this machine against the predictions with the setup carried into the trace and
without it. ``python -m kvsim.experiments.warm_check [--keys N] [--cpu CPU ...]``.

Natively, ``kvsim-cref native iterate --versus-variant valkey`` times the baseline (no
prefetch) and Valkey's iterator prefetch in the same process on one populated keyspace,
rounds alternating A B and B A, in several processes; each process's first round is
discarded. The speedup is the median of the rounds' ratios (process CPU time) with its 95 %
interval; the time per key is each side's median. The predictions trace both sides with
``--warm-setup compact`` (the default) and ``none`` and simulate them on every ``--cpu`` in
one pass. Writes ``results/warm-keys-native.json`` (``--out``).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

from kvsim import provenance

__all__ = ["native", "predict"]

SIDES = {"a": "none", "b": "valkey"}


def native(keys: int, processes: int, rounds: int) -> dict:
    """Interleaved native runs: ``processes`` processes of ``rounds`` kept rounds each."""
    from kvsim.experiments import cref, timing

    a: list[float] = []
    b: list[float] = []
    load = [provenance.load_average_1m()]
    for p in range(processes):
        res = cref.native("iterate", {"keys": keys, "op": "keys", "variant": SIDES["a"]},
                          repeat=rounds + 1, versus={"variant": SIDES["b"]},
                          versus_first="b" if p % 2 else "a")
        a += res["cpu_runs_s"][1:]
        b += res["versus"]["cpu_runs_s"][1:]
        load.append(provenance.load_average_1m())
    return {"speedup": timing.paired_speedup(a, b),
            "ns_per_key": {"a": statistics.median(a) / keys * 1e9,
                           "b": statistics.median(b) / keys * 1e9,
                           "a_min": min(a) / keys * 1e9, "b_min": min(b) / keys * 1e9},
            "a": timing.summary(a), "b": timing.summary(b), "load_average_1m": load,
            "processes": processes, "rounds_per_process": rounds}


def predict(keys: int, cpus: list[str], tmp: Path) -> list[dict]:
    """Cycles and ns per key of both sides, setup carried (compact) or not, per CPU."""
    from kvsim import sim, traces
    from kvsim.experiments import cref

    configs = [sim.load_cpu(c) for c in cpus]
    missing = [c for c, cfg in zip(cpus, configs, strict=True) if not cfg.timing_capable]
    if missing:
        raise SystemExit(f"warm_check: {', '.join(missing)}: no timing model (counts only)")
    got: dict[tuple[str, str, str], dict] = {}
    for mode in ("compact", "none"):
        for side, variant in SIDES.items():
            t = tmp / f"{mode}-{side}.kvt"
            cref.trace("iterate", t, {"keys": keys, "op": "keys", "variant": variant,
                                      "warm_setup": mode})
            with traces.open(t) as reader:
                results = sim.simulate_many(reader, configs, threads=1)
            t.unlink()
            for cpu, cfg, res in zip(cpus, configs, results, strict=True):
                llc = res["levels"][-1]["name"]
                ks = sum(r["misses"] for r in res["by_tag"] if r["level"] == llc
                         and r["kind"] in ("load", "store")
                         and r["tag_name"] in ("bucket", "child_bucket", "key", "object",
                                               "value"))
                got[(mode, side, cpu)] = {
                    "cycles_per_key": res["cycles"] / keys,
                    "ns_per_key": res["cycles"] / keys / cfg.freq_ghz,
                    "llc_keyspace_demand_misses": ks}
    rows = []
    for mode in ("compact", "none"):
        for cpu in cpus:
            a, b = got[(mode, "a", cpu)], got[(mode, "b", cpu)]
            rows.append({"setup": mode, "cpu": cpu, "a": a, "b": b,
                         "speedup": a["cycles_per_key"] / b["cycles_per_key"]})
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m kvsim.experiments.warm_check",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--keys", type=int, default=100_000)
    ap.add_argument("--processes", type=int, default=6)
    ap.add_argument("--rounds", type=int, default=8, help="kept rounds per process")
    ap.add_argument("--cpu", action="append", default=None,
                    help="preset or CPU file (repeatable; default: every preset but local)")
    ap.add_argument("--out", default=None)
    a = ap.parse_args(argv)
    from kvsim import sim

    cpus = a.cpu or [p for p in sim.preset_names() if p != "local"]
    nat = native(a.keys, a.processes, a.rounds)
    with tempfile.TemporaryDirectory(prefix="kvsim-warm-check-") as tmp:
        rows = predict(a.keys, cpus, Path(tmp))
    s = nat["speedup"]
    print(f"native KEYS {a.keys} keys, none -> valkey: {s['median']:.3f}x "
          f"[{s['ci95'][0]:.3f}, {s['ci95'][1]:.3f}] (minimums {s['from_minimums']:.3f}x), "
          f"{nat['ns_per_key']['a']:.1f} / {nat['ns_per_key']['b']:.1f} ns per key")
    for r in rows:
        r["predicted_over_native"] = r["speedup"] / s["median"]
        print(f"  {r['setup']:8} {Path(r['cpu']).stem:22} predicted {r['speedup']:.3f}x "
              f"(x{r['predicted_over_native']:.3f} of native), "
              f"{r['a']['ns_per_key']:.1f} / {r['b']['ns_per_key']:.1f} ns per key, "
              f"keyspace LLC demand misses {r['a']['llc_keyspace_demand_misses']}")
    payload = {"keys": a.keys, "sides": SIDES, "native": nat, "predicted": rows,
               "cpus": cpus,
               "note": "speedup: time of none / time of valkey (native: median of the paired "
                       "rounds' ratios, process CPU time); predicted_over_native: predicted "
                       "speedup / native median; a CPU file's ns per key rests on its clock"}
    out = a.out or provenance.default_result_path("warm-keys-native.json")
    return provenance.publish("warm_check", out, payload)


if __name__ == "__main__":
    sys.exit(main())
