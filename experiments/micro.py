"""Calibrate's pointer chases as traces, their predicted time beside the native one.

The ``kvsim micro`` study; the traces themselves are :mod:`kvsim.sim.micro`.

    kvsim micro trace OUT.kvt --working-set 1GiB [--chains N] [--steps M]
    kvsim micro compare [--cpu local] [--rounds R] [--out FILE]

``trace`` writes one chase trace (:func:`kvsim.sim.micro.write_trace`). ``compare`` runs the
native programs (``kvsim-calibrate chase|mlp``, in interleaved rounds) and simulates the
same points on ``--cpu`` with the page size the native run was given (2 MiB when the kernel
backed the buffer with huge pages, else 4 KiB), and writes, per point, the predicted and
measured ns per load (median, minimum and the bootstrap 95 % interval of
:func:`kvsim.stats.bootstrap_ci95`) and their ratio to ``results/micro-vs-native.json``
(:func:`kvsim.provenance.publish`). A pure chase must be predicted at the latency it
measures; N chases must overlap as the native run shows.

It is also a study of the experiment framework: ``kvsim experiment run micro [--scale
small|full] [--cpu CPU ...] -o DIR`` runs the same native loops as one cell (every round,
interleaved as above) and predicts every point at both page sizes in cells of their own;
its table sets each native point beside the prediction at its page size
(:func:`rows_of`, as ``compare`` does).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from kvsim import provenance, stats
from kvsim.experiments import (
    cells,
    gem5_compare,  # noqa: F401 - the studies before this one first
)
from kvsim.experiments.framework import Experiment, Table, register
from kvsim.sim.config import ConfigError, CpuConfig, load_cpu, parse_size
from kvsim.sim.micro import MicroError, predict, write_trace

__all__ = ["RESULT_NAME", "compare", "cpu_figures", "main"]

RESULT_NAME = "micro-vs-native.json"


def _native(cmd: Sequence[object]) -> dict[str, Any]:
    from kvsim.sim.calibrate import run_bench

    try:
        return run_bench(*cmd)
    except OSError as e:
        raise MicroError(str(e)) from None


def _stats(xs: list[float]) -> dict[str, Any]:
    ci = stats.bootstrap_ci95(xs)
    return {"median": statistics.median(xs), "min": min(xs),
            "bootstrap_ci95": list(ci) if ci else None, "samples": xs}


#: a point: (loop, page option, working set, chains)
Point = tuple[str, str, int, int]


def native_points(*, sizes: Sequence[int], chains: Sequence[int], mlp_size: int,
                  pages: Sequence[str], rounds: int, loads: int, log=lambda m: None
                  ) -> tuple[dict[Point, list[float]], dict[Point, float]]:
    """The native loops in ``rounds`` interleaved rounds: ns per load per point (every
    sample), and the share of each point's buffer the kernel backed with huge pages."""
    nat: dict[Point, list[float]] = {}
    huge: dict[Point, float] = {}
    for r in range(rounds):
        for page in pages:
            log(f"round {r + 1}/{rounds}: native chase, {page} pages")
            out = _native(["chase", page, loads, 1, *sizes])
            for pt in out["points"]:
                k = ("chase", page, pt["size"], 1)
                nat.setdefault(k, []).extend(pt["ns"])
                huge[k] = pt["huge_fraction"]
            log(f"round {r + 1}/{rounds}: native parallel chases, {page} pages")
            out = _native(["mlp", page, mlp_size, loads, 1, *chains])
            for pt in out["points"]:
                k = ("mlp", page, out["size"], pt["chains"])
                nat.setdefault(k, []).extend(pt["ns_per_load"])
                huge[k] = out["huge_fraction"]
    return nat, huge


def sim_page_size(huge_fraction: float) -> int:
    """The page size a point is simulated with: 2 MiB where the kernel backed at least half
    of its buffer with huge pages, else 4 KiB."""
    return 2 * 1024 * 1024 if huge_fraction >= 0.5 else 4096


def point_steps(kind: str, chains: int, steps: int) -> int:
    """Simulated chase steps per chain of a point (``steps`` loads in all)."""
    return max(1, steps // chains) if kind == "mlp" else steps


def compare(cpu: CpuConfig, *, sizes: Sequence[int], chains: Sequence[int], mlp_size: int,
            pages: Sequence[str], rounds: int, loads: int, steps: int,
            log=lambda m: None) -> dict[str, Any]:
    """Native and predicted ns per load at every point (see the module docstring)."""
    if not cpu.timing_capable:
        raise MicroError(f"--cpu {cpu.name}: no timing (freq, core or DRAM missing)")
    nat, huge = native_points(sizes=sizes, chains=chains, mlp_size=mlp_size, pages=pages,
                              rounds=rounds, loads=loads, log=log)

    def predicted(kind: str, size: int, n: int, ps: int) -> dict[str, Any]:
        log(f"simulate {kind} {size} B, {n} chain(s), {ps // 1024} KiB pages")
        return predict(cpu, size, n, point_steps(kind, n, steps), ps, kind == "mlp")

    return {"rows": rows_of(nat, huge, predicted, pages)}


def rows_of(nat: dict[Point, list[float]], huge: dict[Point, float], predicted,
            pages: Sequence[str]) -> list[dict[str, Any]]:
    """The result rows: per point the native statistics, ``predicted(loop, working set,
    chains, page size)`` (:func:`kvsim.sim.micro.predict`'s figures), their ratio, and the
    parallel chases' overlap natively and predicted."""
    rows = []
    for (kind, page, size, n), xs in sorted(nat.items()):
        ps = sim_page_size(huge[(kind, page, size, n)])
        p = predicted(kind, size, n, ps)
        native = _stats(xs)
        rows.append({"loop": kind, "page": page, "huge_fraction": huge[(kind, page, size, n)],
                     "sim_page_size": ps, "working_set": size, "chains": n,
                     "native_ns": native, "predicted_ns": p["ns_per_load"],
                     "ratio": p["ns_per_load"] / native["median"],
                     "ratio_to_min": p["ns_per_load"] / native["min"],
                     "sim": {k: v for k, v in p.items() if k != "ns_per_load"}})
    # overlap: lat(1) / ns(N) of the mlp loop, natively and predicted
    for page in pages:
        one = [x for x in rows if x["loop"] == "mlp" and x["page"] == page and x["chains"] == 1]
        if not one:
            continue
        for x in rows:
            if x["loop"] == "mlp" and x["page"] == page:
                x["native_overlap"] = one[0]["native_ns"]["median"] / x["native_ns"]["median"]
                x["predicted_overlap"] = one[0]["predicted_ns"] / x["predicted_ns"]
    return rows


# --- the framework's study -------------------------------------------------------------------

NAME = "micro"
#: the points per scale of ``kvsim experiment run micro`` (full: the command's defaults)
SCALES: dict[str, dict[str, Any]] = {
    "small": {"sizes": [16 << 10, 256 << 10, 2 << 20, 16 << 20], "mlp_size": 256 << 20,
              "chains": [1, 2, 4, 8], "pages": ["2m", "4k"], "rounds": 3, "loads": 100_000,
              "steps": 10_000},
    "full": {"sizes": [16 << 10, 256 << 10, 2 << 20, 16 << 20, 128 << 20, 1 << 30],
             "mlp_size": 1 << 30, "chains": [1, 2, 4, 8, 16, 24, 32], "pages": ["2m", "4k"],
             "rounds": 3, "loads": 300_000, "steps": 40_000},
}


def _cpu_digest(name: str) -> str:
    """What a prediction on ``name`` depends on beyond the code: the CPU as loaded (a
    calibration changes `local`; a CPU file its text), or why it could not be loaded."""
    import hashlib

    try:
        text = repr(load_cpu(name))
    except ConfigError as exc:
        text = f"unavailable: {exc}"
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _cells(scale: str, cpus: list[str]) -> list[dict[str, Any]]:
    """The calibration's pointer chases natively on this machine (one cell: every round),
    and each point predicted on every CPU at both page sizes (the table takes the one the
    native buffer had)."""
    g = SCALES[scale]
    out = [{"experiment": NAME, "kind": "micro-native", "params": {"part": "native"},
            **{k: g[k] for k in ("sizes", "chains", "mlp_size", "pages", "rounds", "loads")}}]
    points = [("chase", s, 1) for s in g["sizes"]] + [("mlp", g["mlp_size"], n)
                                                      for n in g["chains"]]
    for cpu in cpus:
        digest = _cpu_digest(cpu)
        for kind, size, n in points:
            for ps in (4096, 2 << 20):
                out.append({"experiment": NAME, "kind": "micro-predict", "cpu": cpu,
                            "cpu_digest": digest, "loop": kind, "working_set": size,
                            "chains": n, "steps": point_steps(kind, n, g["steps"]),
                            "sim_page_size": ps,
                            "params": {"loop": kind, "working_set": size, "chains": n,
                                       "sim_page_size": ps}})
    return out


def _native_cell(spec: dict[str, Any]) -> dict[str, Any]:
    nat, huge = native_points(**{k: spec[k] for k in ("sizes", "chains", "mlp_size", "pages",
                                                      "rounds", "loads")})
    return {"points": json.dumps([[*k, xs, huge[k]] for k, xs in sorted(nat.items())])}


def _predict_cell(spec: dict[str, Any]) -> dict[str, Any]:
    p = predict(load_cpu(spec["cpu"]), spec["working_set"], spec["chains"], spec["steps"],
                spec["sim_page_size"], spec["loop"] == "mlp")
    return {**{k: v for k, v in p.items() if k != "tlb"}, "tlb": json.dumps(p["tlb"])}


cells.register_kind("micro-native", _native_cell, counts_as="native", module="micro",
                    artifacts=("kvsim-calibrate",))
cells.register_kind("micro-predict", _predict_cell, counts_as="sim", module="micro")


def _tables(rows: pd.DataFrame) -> list[Table]:
    kind = rows["kind"] if "kind" in rows else pd.Series(dtype=str)
    lines: list[dict[str, Any]] = []
    for _, r in rows[kind == "micro-native"].iterrows():
        nat = {tuple(x[:4]): x[4] for x in json.loads(r["points"])}
        huge = {tuple(x[:4]): x[5] for x in json.loads(r["points"])}
        pages = sorted({k[1] for k in nat})
        pred = rows[kind == "micro-predict"]
        for cpu in sorted(set(pred["cpu"])):
            by = {(p["loop"], int(p["working_set"]), int(p["chains"]), int(p["sim_page_size"])):
                  p for _, p in pred[pred["cpu"] == cpu].iterrows()}

            def predicted(loop: str, size: int, n: int, ps: int, by=by) -> dict[str, Any]:
                return dict(by[(loop, size, n, ps)])

            try:
                got = rows_of(nat, huge, predicted, pages)
            except KeyError:  # a prediction not computed (yet)
                continue
            for x in got:
                lines.append({"cpu": cpu, "loop": x["loop"], "page": x["page"],
                              "working_set": x["working_set"], "chains": x["chains"],
                              "seed": None, "native_ns": x["native_ns"]["median"],
                              "native_min_ns": x["native_ns"]["min"],
                              "predicted_ns": x["predicted_ns"], "ratio": x["ratio"],
                              "native_overlap": x.get("native_overlap"),
                              "predicted_overlap": x.get("predicted_overlap")})
    return [Table(NAME, "The calibration's pointer chases: predicted against native",
                  pd.DataFrame(lines), "ns per load; ratio: predicted / native median",
                  note="chase: one dependent chase over the working set; mlp: N chases "
                       "advanced in turn (overlap: one chain's time per load over N's); each "
                       "point simulated with the page size its native buffer had; no upstream "
                       "figure (seed) exists for the machine's own loops.")]


register(Experiment(NAME, "Pointer chases: predicted against native",
                    "none (the calibration's own loops)", _cells, _tables))


def cpu_figures(cpu: CpuConfig) -> dict[str, Any]:
    t = cpu.tlb
    return {"name": cpu.name, "file": Path(cpu.source).name if cpu.source else None,
            "freq_ghz": cpu.freq_ghz,
            "dram_latency_ns": cpu.dram_latency_ns, "dram_bandwidth_gbs": cpu.dram_bandwidth_gbs,
            "rob": cpu.rob, "width": cpu.width,
            "caches": [{"name": c.name, "size": c.size, "latency": c.latency,
                        "mshrs": c.mshrs} for c in cpu.caches],
            "tlb": None if t is None else {"page_size": t.page_size,
                                           "walk_latency": t.walk_latency,
                                           "walk_reads": t.walk_reads,
                                           "walkers": t.walkers,
                                           "l2_latency": t.l2_latency}}


def _size_list(text: str, opt: str) -> list[int]:
    try:
        return [parse_size(x.strip(), opt) for x in text.split(",") if x.strip()]
    except ConfigError as e:
        raise MicroError(str(e)) from None


def main(argv: list[str] | None = None, prog: str = "kvsim micro") -> int:
    ap = argparse.ArgumentParser(prog=prog, description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("trace", help="write one chase trace (.kvt)")
    t.add_argument("output")
    t.add_argument("--working-set", default="1GiB")
    t.add_argument("--chains", type=int, default=1)
    t.add_argument("--steps", type=int, default=20_000)
    t.add_argument("--seed", type=int, default=1)
    c = sub.add_parser("compare", help="native against predicted, written to a result file")
    c.add_argument("--cpu", default="local")
    c.add_argument("--sizes", default="16KiB,256KiB,2MiB,16MiB,128MiB,1GiB",
                   help="working sets of the single chase (comma-separated)")
    c.add_argument("--mlp-size", default="1GiB", help="working set of the parallel chases")
    c.add_argument("--chains", default="1,2,4,8,16,24,32")
    c.add_argument("--pages", default="2m,4k")
    c.add_argument("--rounds", type=int, default=3)
    c.add_argument("--loads", type=int, default=300_000, help="native loads per sample")
    c.add_argument("--steps", type=int, default=40_000, help="simulated loads per point")
    c.add_argument("--out", default=None)
    a = ap.parse_args(argv)
    try:
        if a.cmd == "trace":
            n = write_trace(a.output, _size_list(a.working_set, "--working-set")[0],
                            a.chains, a.steps, a.seed)
            print(f"# wrote {a.output} ({n} records)")
            return 0
        cpu = load_cpu(a.cpu)
        pages = [p.strip() for p in a.pages.split(",") if p.strip()]
        if any(p not in ("2m", "4k") for p in pages):
            raise MicroError(f"--pages: 2m or 4k, got {a.pages}")
        chains = [int(x) for x in a.chains.split(",")]
        if 1 not in chains:
            chains.insert(0, 1)
        res = compare(cpu, sizes=_size_list(a.sizes, "--sizes"), chains=chains,
                      mlp_size=_size_list(a.mlp_size, "--mlp-size")[0], pages=pages,
                      rounds=a.rounds, loads=a.loads, steps=a.steps,
                      log=lambda m: print(f"micro: {m}", file=sys.stderr, flush=True))
    except (MicroError, ConfigError, ValueError) as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        return 2
    payload = {"command": f"{prog} " + " ".join(argv or sys.argv[1:]), "cpu": cpu_figures(cpu),
               **res}
    for x in res["rows"]:
        ov = (f" overlap native {x['native_overlap']:.1f} predicted {x['predicted_overlap']:.1f}"
              if "native_overlap" in x else "")
        print(f"{x['loop']:5} {x['page']} {x['working_set'] // 1024:>8} KiB x{x['chains']:<3} "
              f"native {x['native_ns']['median']:7.1f} ns (min {x['native_ns']['min']:.1f}) "
              f"predicted {x['predicted_ns']:7.1f} ratio {x['ratio']:.2f}{ov}")
    out = a.out or provenance.default_result_path(RESULT_NAME)
    return provenance.publish(prog, out, payload)


if __name__ == "__main__":
    sys.exit(main())
