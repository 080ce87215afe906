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

The figures are the study's cells: the native rounds of its native cell
(:func:`native_spec`, :func:`kvsim.experiments.cells.native_rounds`) and its sim cells
(:func:`sim_specs`, :func:`kvsim.experiments.cells.run_sim_group`); ``kvsim experiment run
warm_check [--scale small|full] [--cpu CPU ...] -o DIR`` runs them through the framework.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

import pandas as pd

from kvsim import provenance, stats
from kvsim.experiments import (
    cells,
    warm_setup,  # noqa: F401 - the studies before this one register first
)
from kvsim.experiments.framework import (
    Experiment,
    Plot,
    Table,
    _fmt_native,
    native_cell,
    register,
    sim_cell,
)

__all__ = ["native", "predict", "native_spec", "sim_specs"]

SIDES = {"a": "none", "b": "valkey"}


def native_spec(keys: int, processes: int, rounds: int) -> dict:
    """The study's native cell: the two sides alternating in ``processes`` c_ref processes
    of one discarded and ``rounds`` kept rounds each."""
    spec = native_cell(NAME, "iterate", {"keys": keys, "op": "keys", "variant": SIDES["a"]},
                       {"keys": keys, "op": "keys", "variant": SIDES["b"]},
                       rounds=processes * rounds, params={"keys": keys}, warmup_rounds=1)
    spec["rounds_per_process"] = rounds
    return spec


def native(keys: int, processes: int, rounds: int) -> dict:
    """Interleaved native runs: ``processes`` processes of ``rounds`` kept rounds each (the
    rounds of the study's native cell, :func:`kvsim.experiments.cells.native_rounds`)."""
    load = [provenance.load_average_1m()]
    runs = cells.native_rounds(native_spec(keys, processes, rounds))
    load.append(provenance.load_average_1m())
    a, b = ([x["cpu_runs_s"][0] for x in runs[s]] for s in ("a", "b"))
    return {"speedup": stats.paired_speedup(a, b),
            "ns_per_key": {"a": statistics.median(a) / keys * 1e9,
                           "b": statistics.median(b) / keys * 1e9,
                           "a_min": min(a) / keys * 1e9, "b_min": min(b) / keys * 1e9},
            "a": stats.summary(a), "b": stats.summary(b), "load_average_1m": load,
            "processes": processes, "rounds_per_process": rounds}


#: the LLC demand misses counted as the keyspace's own (trace tags)
KEYSPACE_TAGS = ("bucket", "child_bucket", "key", "object", "value")


def sim_specs(keys: int, cpus: list[str]) -> list[dict]:
    """The study's sim cells: both sides traced with the setup carried (compact) and not
    (none), each trace on every CPU; the group per setup, side A its baseline."""
    return [sim_cell(NAME, "iterate", {"keys": keys, "op": "keys", "variant": variant,
                                       "warm_setup": mode}, cpu,
                     {"setup": mode, "side": side, "keys": keys}, mode, side == "a")
            for mode in ("compact", "none") for side, variant in SIDES.items()
            for cpu in cpus]


def predict(keys: int, cpus: list[str], tmp: Path) -> list[dict]:
    """Cycles and ns per key of both sides, setup carried (compact) or not, per CPU."""
    from kvsim import sim

    configs = [sim.load_cpu(c) for c in cpus]
    missing = [c for c, cfg in zip(cpus, configs, strict=True) if not cfg.timing_capable]
    if missing:
        raise SystemExit(f"warm_check: {', '.join(missing)}: no timing model (counts only)")
    freq = {c: cfg.freq_ghz for c, cfg in zip(cpus, configs, strict=True)}
    got: dict[tuple[str, str, str], dict] = {}
    todo = sim_specs(keys, cpus)
    for i in range(0, len(todo), len(cpus)):  # one trace, every CPU in one pass
        group = todo[i:i + len(cpus)]
        for cell, res in zip(group, cells.run_sim_group(group, str(tmp)), strict=True):
            m = res["metrics"]
            got[(cell["params"]["setup"], cell["params"]["side"], cell["cpu"])] = {
                "cycles_per_key": m["cycles"] / keys,
                "ns_per_key": m["cycles"] / keys / freq[cell["cpu"]],
                "llc_keyspace_demand_misses": sum(m.get(f"llc_misses_{t}", 0)
                                                  for t in KEYSPACE_TAGS)}
        (tmp / f"{cells.trace_key(group[0])}.kvt").unlink()
    rows = []
    for mode in ("compact", "none"):
        for cpu in cpus:
            a, b = got[(mode, "a", cpu)], got[(mode, "b", cpu)]
            rows.append({"setup": mode, "cpu": cpu, "a": a, "b": b,
                         "speedup": a["cycles_per_key"] / b["cycles_per_key"]})
    return rows


# --- the framework's study -------------------------------------------------------------------

NAME = "warm_check"
#: per scale of ``kvsim experiment run warm_check``: keys, processes, kept rounds each
SCALES = {"small": (100_000, 2, 8), "full": (100_000, 6, 8)}


def _cells(scale: str, cpus: list[str]) -> list[dict]:
    """KEYS over 10^5 keys, no prefetch against Valkey's iterator prefetch: natively (the
    sides alternating in 2 c_ref processes, 6 at full scale) and predicted on every CPU with
    the setup carried into the trace and without it."""
    keys, processes, rounds = SCALES[scale]
    return [native_spec(keys, processes, rounds)] + sim_specs(keys, cpus)


def _tables(rows: pd.DataFrame) -> list[Table]:
    kind = rows["kind"] if "kind" in rows else pd.Series(dtype=str)
    nat = rows[kind == "native"]
    sims = rows[(kind == "sim") & (rows["side"] == "b")] if "side" in rows else rows.iloc[0:0]
    lines = []
    for mode in ("compact", "none"):
        line = {"setup": mode, "seed": None, "native": "", "native_value": None}
        if len(nat):
            line["native"] = _fmt_native(nat.iloc[0])
            line["native_value"] = nat.iloc[0]["speedup"]
        for _, r in sims[sims["setup"] == mode].iterrows():
            line[f"sim:{r['cpu']}"] = r["speedup"]
        lines.append(line)
    return [Table(NAME, "KEYS on a keyspace that fits the last level: predicted with and "
                  "without the setup, against native", pd.DataFrame(lines),
                  "speedup (x: time of none / time of valkey)",
                  Plot(x="setup", ylabel="speedup (x)", xlabel="setup in the trace"),
                  note="native: median of the paired rounds' ratios, process CPU time; no "
                       "upstream figure (seed) exists for this check. `python -m "
                       "kvsim.experiments.warm_check` writes the same cells to "
                       "results/warm-keys-native.json.")]


register(Experiment(NAME, "The same starting state, checked natively (KEYS)",
                    "none (a check of the traces' warm-up)", _cells, _tables))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m kvsim.experiments.warm_check",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--keys", type=int, default=100_000)
    ap.add_argument("--processes", type=int, default=6)
    ap.add_argument("--rounds", type=int, default=8, help="kept rounds per process")
    ap.add_argument("--cpu", action="append", default=None,
                    help="preset or CPU file (repeatable; default: every preset but local)")
    provenance.add_out_option(ap, "warm-keys-native.json")
    a = ap.parse_args(argv)
    from kvsim import sim

    cpus = a.cpu or [p for p in sim.preset_names() if p != "local"]
    nat = native(a.keys, a.processes, a.rounds)
    with tempfile.TemporaryDirectory(prefix="kvsim-warm-check-") as tmp:
        rows = predict(a.keys, cpus, Path(tmp))
    s = nat["speedup"]
    ci = f"[{s['ci95'][0]:.3f}, {s['ci95'][1]:.3f}]" if s["ci95"] else "[no interval]"
    print(f"native KEYS {a.keys} keys, none -> valkey: {s['median']:.3f}x "
          f"{ci} (minimums {s['from_minimums']:.3f}x), "
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
    out = provenance.out_path(a.out, "warm-keys-native.json")
    return provenance.publish("warm_check", out, payload)


if __name__ == "__main__":
    sys.exit(main())
