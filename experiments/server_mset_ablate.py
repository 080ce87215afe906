"""MSET's predicted time with one part of the model taken out at a time (issue 43).

``python -m kvsim.experiments.server_mset`` finds MSET of 10 keys over 100,000 keys predicted
below its native time at batch 0 and close to it at batch 16. This module asks which part of
the model the prediction leans on: it traces the same loops (``kvsim-cref serverloop``,
:data:`kvsim.experiments.server_mset.PLAN`'s entries named in :data:`ENTRIES`) and simulates
each on ``--cpu`` as it is, without its hardware prefetchers, without its TLB (no walks), and
with ``[core] scheduler`` set to ``--scheduler`` entries (a sensitivity: no calibration
measures it; sim/MODEL.md §6), and with ``[core] rob`` set to ``--rob`` entries (the reach of
a window bounded by its physical registers: sim/VALIDATION.md, "The overlap of a dependent
chain with the next lookup"). Per entry and variant: the predicted ns per request, the
last-level misses, the page walks (STLB misses) and the average misses in flight; beside them
the native ns per request after the loopback calls from ``--native`` (a ``server_mset
--native-only`` file), and how far the next key's lookup comes after a key's old value
(:func:`chain_to_lookup`).

    python -m kvsim.experiments.server_mset_ablate --native results/server-mset-native.json \\
        --cpu results/calibrate-xeon-m167-srvloop-probed.toml [-o results/server-mset-ablate.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

RESULT_NAME = "server-mset-ablate.json"
#: the plan entries simulated (server_mset.PLAN's labels)
ENTRIES = ("mset-10", "mset-10 batch 16", "mset-10 16 B values")
#: the variants :func:`simulate` runs, in their columns' order
VARIANTS = ("as is", "no prefetchers", "no TLB", "scheduler", "rob")


def simulate(path: Path, cpu: str, scheduler: int, n: int, rob: int = 256
             ) -> dict[str, dict[str, Any]]:
    """The trace at ``path`` (``n`` requests) on ``cpu`` under each of :data:`VARIANTS`."""
    from kvsim import sim

    conf = sim.load_cpu(cpu)
    runs = {"as is": (conf, {}), "no prefetchers": (conf, {"prefetchers": False}),
            "no TLB": (conf, {"tlb": False}),
            "scheduler": (conf.with_changes(scheduler=scheduler), {}),
            "rob": (conf.with_changes(rob=rob), {})}
    out = {}
    for name in VARIANTS:
        c, kw = runs[name]
        res = sim.simulate(str(path), c, **kw)
        tlb = res.get("tlb") or {}
        out[name] = {"ns": res["timing"]["time_ns"] / n,
                     "ll_misses": res["levels"][-1]["demand_misses"] / n,
                     "walks": tlb.get("stlb_misses", 0) / n, "mlp": res["timing"]["mlp"]}
    return out


def chain_to_lookup(path: Path) -> dict[str, Any]:
    """Instructions (gaps and records) from a key's last ``obj.value`` load (the old value's
    chain) to the next ``ht.find.bucket`` load with no bucket load between (the next key's
    lookup), over the trace's measured part: count, median, 10th and 90th percentiles."""
    import numpy as np

    from kvsim import traces

    sites = traces.open(str(path)).header["sites"]
    rec = traces.read_all(str(path))
    rec = rec[1] if isinstance(rec, tuple) else rec
    end = np.flatnonzero((rec["kind"] == traces.KIND_MARKER)
                         & (rec["flags"] == traces.MARK_WARMUP_END))
    rec = rec[int(end[-1]) + 1:] if len(end) else rec
    at = np.cumsum(rec["gap"].astype(np.int64) + 1)
    load = rec["kind"] == traces.KIND_LOAD
    value = np.flatnonzero(load & (rec["site"] == sites.index("obj.value")))
    bucket = np.flatnonzero(load & (rec["site"] == sites.index("ht.find.bucket")))
    prev_v = np.searchsorted(value, bucket) - 1
    prev_b = np.searchsorted(bucket, bucket) - 1
    ok = prev_v >= 0
    ok[ok] &= value[prev_v[ok]] > np.where(prev_b[ok] >= 0, bucket[prev_b[ok]], -1)
    d = at[bucket[ok]] - at[value[prev_v[ok]]]
    if not len(d):
        return {"count": 0}
    return {"count": int(len(d)), "median": float(np.median(d)),
            "p10": float(np.percentile(d, 10)), "p90": float(np.percentile(d, 90))}


def markdown(doc: dict) -> str:
    """One row per entry: native, then each variant's predicted ns (LL misses, walks); the
    variants the file has (one written before the ``rob`` variant has not that column)."""
    have = [v for v in VARIANTS if all(v in r["variants"] for r in doc["rows"])]
    heads = " | ".join(f"{v}: ns (LL misses, walks)" for v in have)
    rows = [f"| loop | native ns after the calls | {heads} |", "|" + "---|" * (2 + len(have))]
    for r in doc["rows"]:
        cells = " | ".join(f"{r['variants'][v]['ns']:,.0f} ({r['variants'][v]['ll_misses']:.1f}, "
                           f"{r['variants'][v]['walks']:.1f})" for v in have)
        rows.append(f"| {r['label']} | {r['native_ns']:,.0f} | {cells} |")
    return "\n".join(rows)


NOTE = ("predicted ns per request of server_mset's traced loops on cpu as it is, without its "
        "hardware prefetchers, without its TLB, with [core] scheduler set and with [core] rob set "
        "(sensitivities); "
        "LL misses and walks (STLB misses) per request; native: ns per request after the "
        "loopback calls (median)")


def _options(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--cpu", required=True, help="CPU file or preset")
    ap.add_argument("--native", required=True, help="a server_mset --native-only file")
    ap.add_argument("--scheduler", type=int, default=97,
                    help="[core] scheduler entries of the sensitivity variant (default 97)")
    ap.add_argument("--rob", type=int, default=256,
                    help="[core] rob of the rob variant (default 256)")


def _check(a: argparse.Namespace) -> str | None:
    if a.scheduler < 1:
        return f"--scheduler {a.scheduler}: must be at least 1"
    return f"--rob {a.rob}: must be at least 1" if a.rob < 1 else None


def measure(log, a: argparse.Namespace) -> dict[str, Any]:
    """Trace each of :data:`ENTRIES` and simulate it under every variant (:func:`simulate`)
    beside its native time from ``a.native``."""
    from kvsim.experiments import server_mset as M

    plan = dict(M.PLAN)
    nat = json.loads(Path(a.native).read_text())
    native = {r["label"]: r["loopback"]["median"] for r in M.summarize(nat["runs"])}
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for label in ENTRIES:
            log(f"traced: {label}")
            path = Path(tmp) / "loop.kvt"
            M._cref("serverloop", *M._args(plan[label], M.TRACE_ITERS), "--trace", path)
            n = M.TRACE_ITERS * M._depth(plan[label])
            rows.append({"label": label, "native_ns": native[label],
                         "variants": simulate(path, a.cpu, a.scheduler, n, a.rob),
                         "chain_to_lookup_instructions": chain_to_lookup(path)})
            path.unlink()
    return {"rows": rows, "cpu": a.cpu, "scheduler": a.scheduler, "rob": a.rob,
            "native_source": a.native,
            "measured_provenance": nat.get("provenance")}


def main(argv: list[str] | None = None) -> int:
    from kvsim.experiments import measure_cli

    return measure_cli.main(
        argv, module="server_mset_ablate", description="MSET's prediction with one part of "
        "the model taken out at a time", result_name=RESULT_NAME, measure=measure,
        markdown=markdown, note=NOTE, options=_options, check=_check)


if __name__ == "__main__":
    sys.exit(main())
