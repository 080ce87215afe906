"""gem5 against kvsim: the same traces on the same cache models, miss counts per level.

    python -m kvsim.experiments.gem5_compare [--gem5 PATH] [--scale S] [--out FILE] \
        [--workdir DIR]

(``python -m kvsim.sim.gem5_compare`` is its old spelling, kept for one release.)

Needs a gem5 NULL-ISA build with protobuf (``--gem5`` or ``$GEM5``; see sim/GEM5.md). For
each trace of :data:`TRACES` (c_ref's pipeline GET without and with software prefetches,
iterate KEYS and MGET, made with ``kvsim trace``, and random loads and stores over 16 MiB)
and each preset of :data:`PRESETS` (shipped presets, some with a level's inclusion changed
so that gem5's classic caches can build the same model), it runs the gem5 backend
(:func:`kvsim.sim.gem5.run`) and kvsim's engine on the same model (functional, no TLB, no
hardware prefetchers, no final flush), and records per level the misses of loads, stores
and software prefetches from above on both sides (:func:`kvsim.sim.gem5.kvsim_requests`;
gem5's ``overallMisses``), their relative difference, whether the two models are the same
there (:func:`kvsim.sim.gem5.model_differences`) and, if so, whether they agree within
:data:`TOLERANCE`. The gem5 version (from gem5's banner) and the git tag it was built from
are recorded; the binary by its file name only.

The result goes to ``--out`` (default ``results/gem5-vs-kvsim.json`` in a checkout) through
:func:`kvsim.provenance.write_result`; :func:`render_table` turns it into sim/GEM5.md's
table. Exit status 1 when a same-model level is outside the tolerance, 2 on bad input or a
failed run.

It is also a study of the experiment framework: ``kvsim experiment run gem5_compare
[--scale small|full] -o DIR`` plans one ``gem5`` cell per trace and preset (``small``: a
tenth of the sizes; the gem5 binary from ``$GEM5``, named in each cell's spec), each the
same :func:`make_trace` and :func:`compare_run` as the command; without gem5 the cells are
skipped with the line saying how to build it, and a later run tries them again. Its table
gives the misses per trace, preset and level.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from kvsim import provenance, sim, traces
from kvsim.experiments import (
    cells,
    warmup_convergence,  # noqa: F401 - the studies before this one register first
)
from kvsim.experiments.framework import Experiment, Table, register
from kvsim.sim import gem5 as g5

RESULT_NAME = "gem5-vs-kvsim.json"
TOLERANCE = 0.02  #: |gem5 - kvsim| / kvsim allowed where the models are the same
SEED = 18

#: name -> (what it is, ``kvsim trace`` arguments with {k}/{n} scaled, or None: random); the
#: c_ref traces start cold (``--warm-setup none``): gem5 replays every packet it is given, so
#: both sides count the same accesses from empty caches
COLD = ["--warm-setup", "none"]
TRACES: dict[str, tuple[str, list[str] | None]] = {
    "pipeline-get": ("c_ref pipelined GET, naive", [
        "pipeline", "--keys", "{k}", "--ops", "{n}", "--variant", "naive", *COLD]),
    "pipeline-get-lookahead": ("c_ref pipelined GET, lookahead software prefetches", [
        "pipeline", "--keys", "{k}", "--ops", "{n}", "--variant", "lookahead", *COLD]),
    "iterate-keys": ("c_ref KEYS over the keyspace", [
        "iterate", "--keys", "{k}", "--op", "keys", *COLD]),
    "mget": ("c_ref MGET, 10 keys per command", [
        "mget", "--keys", "{k}", "--ops", "{m}", *COLD]),
    "random": ("random 8-byte loads (75 %) and stores over 16 MiB", None),
}
RANDOM_SPAN = 16 << 20

#: label -> (shipped preset, {level name: inclusion}) the comparison runs
PRESETS: dict[str, tuple[str, dict[str, str]]] = {
    "xeon-8488c": ("xeon-8488c", {}),
    "xeon-8255c, L2 non-inclusive": ("xeon-8255c", {"L2": "non-inclusive"}),
    "epyc-7713, L2 non-inclusive": ("epyc-7713", {"L2": "non-inclusive"}),
}


class CompareError(Exception):
    """Bad input or a failed step: a one-line message naming what and where."""


def preset(label: str) -> sim.CpuConfig:
    """The CPU model a :data:`PRESETS` label names, its whole-line stores written without a
    fetch as gem5's classic cache writes them (``WriteLineReq``; the preset's
    ``full_line_store_fetch`` is a core's store protocol, not a cache's model)."""
    name, inclusion = PRESETS[label]
    cpu = sim.load_cpu(name)
    caches = []
    for c in cpu.caches:
        if c.name in inclusion:
            c = c.__class__(**{**c.__dict__, "inclusion": inclusion[c.name]})
        caches.append(c)
    return cpu.with_changes(caches=tuple(caches), name=label, full_line_store_fetch=False)


def make_trace(name: str, workdir: Path, scale: float) -> tuple[Path, str]:
    """(path, the command that made it) of trace ``name`` at ``scale``, made once."""
    what, args = TRACES[name]
    k, n, m = (max(1000, int(v * scale)) for v in (100_000, 10_000, 2_000))
    path = workdir / f"{name}-{scale:g}.kvt"
    if args is None:
        count = max(1000, int(300_000 * scale))
        cmd = (f"numpy default_rng({SEED}): {count} records, 8-byte aligned addresses "
               f"uniform over {RANDOM_SPAN >> 20} MiB, 25 % stores, gap 3")
        if not path.exists():
            rng = np.random.default_rng(SEED)
            r = np.zeros(count, dtype=traces.RECORD_DTYPE)
            r["addr"] = (np.uint64(1 << 32) + rng.integers(0, RANDOM_SPAN // 8, count)
                         .astype(np.uint64) * np.uint64(8))
            r["size"], r["gap"] = 8, 3
            r["kind"] = np.where(rng.random(count) < 0.25, traces.KIND_STORE, traces.KIND_LOAD)
            tmp = path.with_name(path.name + ".tmp.kvt")
            with traces.Writer(tmp, {"name": "random", "seed": SEED}) as w:
                w.write(r)
            tmp.replace(path)
        return path, cmd
    argv = [a.format(k=k, n=n, m=m) for a in args]
    cmd = "kvsim trace " + " ".join(argv)
    if not path.exists():
        tmp = path.with_name(path.name + ".tmp.kvt")
        res = subprocess.run([sys.executable, "-m", "kvsim.experiments.cli", "-q", "trace",
                              *argv, "-o", str(tmp)], capture_output=True, text=True,
                             timeout=3600, check=False)
        if res.returncode != 0:
            msg = (res.stderr.strip().splitlines() or ["failed"])[-1]
            raise CompareError(f"{cmd}: {msg}")
        tmp.replace(path)
    return path, cmd


def git_tag(binary: str, version: str | None) -> tuple[str | None, str]:
    """(tag, how it was found) of the gem5 source ``binary`` was built from: ``git describe``
    in the checkout holding ``build/<ISA>/`` when it is one, else ``v`` + the version gem5
    prints (gem5 tags its releases ``v<version>``)."""
    src = Path(binary).resolve().parent.parent.parent
    try:
        res = subprocess.run(["git", "-C", str(src), "describe", "--tags", "--exact-match"],
                             capture_output=True, text=True, timeout=30, check=False)
        if res.returncode == 0 and res.stdout.strip():
            return res.stdout.strip(), "git describe --tags in the source tree"
    except (OSError, subprocess.SubprocessError):
        pass
    return (f"v{version}" if version else None), "the release tag of gem5's version string"


def compare_run(trace: Path, cpu: sim.CpuConfig, binary: str, timeout: float
                ) -> dict[str, Any]:
    """One trace on one model: per level both sides' accesses and misses (loads, stores
    and software prefetches from above), the difference and the model differences."""
    t0 = time.perf_counter()
    try:
        res = g5.run(trace, cpu, binary, timeout=timeout)
    except (g5.Gem5Error, subprocess.TimeoutExpired) as exc:
        raise CompareError(f"{trace.name} on {cpu.name}: {exc}") from None
    seconds = time.perf_counter() - t0
    with traces.open(trace) as reader:
        native = sim.simulate(reader, cpu, functional=True, tlb=False, prefetchers=False,
                              flush=False)
    levels = []
    for k, g, why in zip(native["levels"], res["levels"], g5.model_differences(cpu),
                         strict=True):
        ka, km = g5.kvsim_requests(k)
        d = g5.rel_diff(g["data_misses"], km)
        levels.append({
            "level": k["name"], "replacement": k["replacement"], "inclusion": k["inclusion"],
            "kvsim_accesses": ka, "gem5_accesses": g["accesses"],
            "kvsim_misses": km, "gem5_misses": g["data_misses"],
            "gem5_upgrade_misses": g["upgrade_misses"], "gem5_overall_misses": g["misses"],
            "rel_diff": None if d is None else round(d, 6),
            "same_model": not why, "differences": why,
            "within_tolerance": None if why else (d is not None and abs(d) <= TOLERANCE),
        })
    return {"records": res["records"], "packets": res["gem5"]["packets"],
            "gem5_seconds": round(seconds, 1), "gem5_exit": res["gem5"]["exit"],
            "gem5_version": res["gem5"]["version"], "levels": levels}


def run(binary: str, workdir: Path, scale: float, timeout: float,
        trace_names: list[str], preset_labels: list[str], echo: Any = print
        ) -> dict[str, Any]:
    workdir.mkdir(parents=True, exist_ok=True)
    made = {}
    for name in trace_names:
        path, cmd = make_trace(name, workdir, scale)
        made[name] = {"path": path, "description": TRACES[name][0], "command": cmd}
    cpus = {label: preset(label) for label in preset_labels}
    runs = []
    version = None
    for name, t in made.items():
        for label, cpu in cpus.items():
            r = compare_run(t["path"], cpu, binary, timeout)
            version = version or r.pop("gem5_version")
            r.pop("gem5_version", None)
            runs.append({"trace": name, "preset": label, **r})
            for lv in r["levels"]:
                d = "n/a" if lv["rel_diff"] is None else f"{lv['rel_diff'] * 100:+.2f}%"
                echo(f"{name:<24} {label:<30} {lv['level']:<4} kvsim {lv['kvsim_misses']:>9,d}"
                     f" gem5 {lv['gem5_misses']:>9,d} {d:>8}"
                     f"{'' if lv['same_model'] else '  (models differ)'}")
    tag, tag_from = git_tag(binary, version)
    same = [lv for r in runs for lv in r["levels"] if lv["same_model"]]
    return {
        "benchmark": "kvsim.sim.gem5_compare",
        "what": "misses of loads, stores and software prefetches from above, per level: "
                "gem5's overallMisses less its upgrade misses (stores to a present, "
                "read-only line) against kvsim's load+store+swpf misses; kvsim "
                "functional, no TLB, no hardware prefetchers, no final flush",
        "gem5": {"binary": os.path.basename(binary), "version": version, "git_tag": tag,
                 "git_tag_from": tag_from, "spacing_ticks": g5.SPACING_TICKS},
        "tolerance": TOLERANCE,
        "parameters": {"scale": scale, "seed": SEED},
        "traces": {n: {"description": t["description"], "command": t["command"],
                       "records": next(r["records"] for r in runs if r["trace"] == n)}
                   for n, t in made.items()},
        "presets": {label: {"preset": PRESETS[label][0],
                            "inclusion_changed": PRESETS[label][1],
                            "levels": [{"name": c.name, "size": c.size, "ways": c.ways,
                                        "replacement": c.replacement,
                                        "inclusion": c.inclusion} for c in cpu.caches]}
                    for label, cpu in cpus.items()},
        "runs": runs,
        "summary": {"same_model_levels": len(same),
                    "within_tolerance": sum(bool(lv["within_tolerance"]) for lv in same),
                    "max_abs_rel_diff_same_model": max(
                        (abs(lv["rel_diff"]) for lv in same if lv["rel_diff"] is not None),
                        default=None)},
    }


# --- the framework's study -------------------------------------------------------------------

NAME = "gem5_compare"
#: trace sizes per scale of ``kvsim experiment run`` (the command's ``--scale``)
SCALES = {"small": 0.1, "full": 1.0}


def _cells(scale: str, cpus: list[str]) -> list[dict[str, Any]]:
    """Every trace of TRACES on every model of PRESETS (the presets are fixed: gem5's classic
    caches build only some of kvsim's models); ``small``: a tenth of the sizes."""
    gem5 = os.environ.get(g5.GEM5_ENV)
    return [{"experiment": NAME, "kind": "gem5", "trace": t, "preset": p,
             "scale": SCALES[scale], "gem5": os.path.basename(gem5) if gem5 else None,
             "params": {"trace": t, "preset": p}} for t in TRACES for p in PRESETS]


def _gem5_cell(spec: dict[str, Any]) -> dict[str, Any]:
    """One trace on one model in gem5 and in kvsim (the command's steps)."""
    try:
        binary = g5.find_binary(None)
    except g5.Gem5Error as exc:
        raise cells.CellSkipped(str(exc)) from None
    with tempfile.TemporaryDirectory(prefix="kvsim-gem5-cell-") as tmp:
        path, cmd = make_trace(spec["trace"], Path(tmp), spec["scale"])
        r = compare_run(path, preset(spec["preset"]), binary, 3600)
    same = [lv for lv in r["levels"] if lv["same_model"]]
    return {"records": r["records"], "packets": r["packets"], "gem5_version": r["gem5_version"],
            "gem5_seconds": r["gem5_seconds"], "trace_command": cmd,
            "same_model_levels": len(same),
            "within_tolerance": sum(bool(lv["within_tolerance"]) for lv in same),
            "levels": json.dumps(r["levels"])}


cells.register_kind("gem5", _gem5_cell, counts_as="sim", module="gem5_compare")


def _tables(rows: pd.DataFrame) -> list[Table]:
    lines = []
    for _, r in (rows[rows.kind == "gem5"] if len(rows) else rows).iterrows():
        for lv in json.loads(r["levels"]):
            lines.append({"trace": r["trace"], "preset": r["preset"], "level": lv["level"],
                          "seed": None, "kvsim_misses": lv["kvsim_misses"],
                          "gem5_misses": lv["gem5_misses"], "rel_diff": lv["rel_diff"],
                          "model": "same" if lv["same_model"] else "differs",
                          "within_tolerance": lv["within_tolerance"]})
    return [Table(NAME, "gem5 against kvsim: misses per trace, preset and level",
                  pd.DataFrame(lines), "misses (loads, stores and software prefetches from "
                  "above); rel_diff: (gem5 - kvsim) / kvsim",
                  note=f"same-model levels must agree within {TOLERANCE * 100:g} %; no "
                       "upstream figure (seed) exists for a comparison of two simulators.")]


register(Experiment(NAME, "gem5 against kvsim on the same cache models",
                    "none (gem5 as a second simulator)", _cells, _tables))


def _pct(d: float | None) -> str:
    return "n/a" if d is None else f"{d * 100:+.2f} %"


def render_table(doc: dict[str, Any]) -> str:
    """sim/GEM5.md's tables, from a result file: misses per trace, preset and level, then
    the model differences of the levels marked *differs*."""
    lines = ["| trace | preset | level | kvsim misses | gem5 misses | gem5 - kvsim | "
             "gem5 upgrades | model |", "|---|---|---|---:|---:|---:|---:|---|"]
    diffs: dict[tuple[str, str], list[str]] = {}
    for r in doc["runs"]:
        for lv in r["levels"]:
            model = "same" if lv["same_model"] else "differs"
            if not lv["same_model"]:
                diffs[(r["preset"], lv["level"])] = lv["differences"]
            lines.append(f"| {r['trace']} | {r['preset']} | {lv['level']} | "
                         f"{lv['kvsim_misses']:,} | {lv['gem5_misses']:,} | "
                         f"{_pct(lv['rel_diff'])} | {lv.get('gem5_upgrade_misses', 0):,} | "
                         f"{model} |")
    if diffs:
        lines += ["", "| preset | level | why the models differ |", "|---|---|---|"]
        for (p, lvl), why in diffs.items():
            lines.append(f"| {p} | {lvl} | {'; '.join(why)} |")
    s = doc["summary"]
    lines += ["", f"Same-model levels within {doc['tolerance'] * 100:g} %: "
              f"{s['within_tolerance']} of {s['same_model_levels']} (largest difference "
              f"{_pct(s['max_abs_rel_diff_same_model'])}). gem5 {doc['gem5']['version']} "
              f"({doc['gem5']['git_tag']}, {doc['gem5']['binary']})."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None,
         prog: str = "python -m kvsim.experiments.gem5_compare") -> int:
    ap = argparse.ArgumentParser(prog=prog, description=__doc__.splitlines()[0])
    ap.add_argument("--gem5", default=None, metavar="PATH",
                    help=f"gem5 binary (default ${g5.GEM5_ENV})")
    ap.add_argument("--scale", type=float, default=1.0,
                    help="trace sizes relative to the defaults (100 k keys, 10 k pipeline "
                         "ops, 2 k MGETs, 300 k random records)")
    ap.add_argument("--trace", action="append", default=None, choices=list(TRACES),
                    help="a trace to run (repeatable; default all)")
    ap.add_argument("--preset", action="append", default=None, choices=list(PRESETS),
                    help="a preset to run (repeatable; default all)")
    ap.add_argument("--timeout", type=float, default=3600, help="seconds per gem5 run")
    ap.add_argument("--workdir", default="build/gem5-compare",
                    help="where the traces are made and kept (default build/gem5-compare)")
    provenance.add_out_option(ap, RESULT_NAME)
    a = ap.parse_args(argv)
    out = provenance.out_path(a.out, RESULT_NAME)
    if a.scale <= 0:
        print(f"{prog}: error: --scale {a.scale}: must be positive", file=sys.stderr)
        return 2
    try:
        binary = g5.find_binary(a.gem5)
        payload = run(binary, Path(a.workdir), a.scale, a.timeout, a.trace or list(TRACES),
                      a.preset or list(PRESETS))
    except (g5.Gem5Error, CompareError) as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 2
    status = provenance.publish(prog, out, payload)
    s = payload["summary"]
    print(f"same-model levels within {TOLERANCE * 100:g} %: {s['within_tolerance']} of "
          f"{s['same_model_levels']}")
    if status == 0 and s["within_tolerance"] != s["same_model_levels"]:
        return 1
    return status


if __name__ == "__main__":
    sys.exit(main())
