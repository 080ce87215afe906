"""Native and predicted speedups of the workloads c_ref/FIDELITY.md's changes affect.

For each workload: the baseline and the prefetching variant, run natively (``kvsim native
... --repeat R --json``: process-CPU and wall medians) and traced then simulated
(``kvsim trace`` + ``kvsim simulate --cpu CPU --json``: cycles of the measured phase), with
the c_ref build of this checkout ("after") and, optionally, another build ("before",
``--before-bin``, e.g. the parent commit's ``kvsim-cref``), run interleaved. Speedup =
baseline / variant. Writes ``results/fidelity-<workload>.json`` (kvsim.provenance).

Usage (after ``make build``; ``c_ref/bench/fidelity.py`` is its old spelling, same options):

    python -m kvsim.experiments.fidelity --before-bin OLD/kvsim-cref \\
        --before-commit SHA [--repeat 5] [--cpu local] [--only mget-dict]

The native runs are :func:`kvsim.experiments.cref.native` (``kvsim-cref native ... --json``,
the path every native cell of the experiments takes; a build's binary by
``KVSIM_CREF_BIN``), the result file :func:`kvsim.provenance.write_result`, and
``render.render_fidelity`` renders c_ref/FIDELITY.md's table from the files.

It is a study of the experiment framework: ``kvsim experiment run fidelity [--scale
small|full] [--cpu CPU ...] -o DIR`` plans per pair and build one ``fidelity-native`` cell
and one ``fidelity-sim`` cell per CPU, the "before" build named by
``$KVSIM_FIDELITY_BEFORE`` (a ``kvsim-cref`` binary; its SHA-256 is in each cell's spec,
so another build is another cell; ``$KVSIM_FIDELITY_BEFORE_COMMIT`` records its commit);
without it only this checkout's build runs. The command above computes the same cells
(:func:`specs`, :func:`kvsim.experiments.cells.run_cell`) and writes the result files.

Runtime: a few minutes at the default sizes (the sizes are in _USES, the pairs in
kvsim.experiments.pairs).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pandas as pd

from kvsim import provenance
from kvsim.experiments import (
    cells,
    cref,
    micro,  # noqa: F401 - the studies before this one register first
    pairs,
)
from kvsim.experiments.framework import Experiment, Plot, Table, register

#: name -> (pair of the catalogue, keys, what the change does to it)
_USES: dict[str, tuple[str, int, str]] = {
    "mget-dict": (
        "mget-dict", 1_000_000,
        "the dictPrefetcher prefetches each RAW value (Redis #15133 dbDictPrefetchEntryValue)",
    ),
    "mget-hashtable": (
        "mget", 1_000_000,
        "Valkey's batch rule: the first 16 of the 50 keys are prefetched, not all 50 in "
        "Redis #15133 chunks; each prefetched key is hashed again by its lookup; every hit "
        "stores the LRU clock into its object",
    ),
    "mset-hashtable": (
        "mset", 200_000,
        "Valkey's batch rule: the first 16 of the 50 keys are prefetched; each prefetched "
        "key is hashed again by its lookup",
    ),
    "pipeline-get-hashtable": (
        "get-d16", 1_000_000,
        "each prefetched GET key is hashed again by its lookup; every GET hit stores the LRU "
        "clock into its object (dirtying the object line)",
    ),
    "pipeline-dict": (
        "get-d16-dict", 1_000_000,
        "the value prefetch is the dictPrefetcher's ENTRY_VALUE state, not the driver's; "
        "a found node's key field is read once",
    ),
    "pipeline-hashtable": (
        "get-d16", 1_000_000,
        "GET's object and expire reads and the lookahead value prefetch depend on the bucket "
        "load that produced the object pointer",
    ),
    "iterate-keys": (
        "iterate-keys", 500_000, "KEYS: each object-header load depends on its bucket load",
    ),
    "iterate-save": (
        "iterate-save", 500_000,
        "SAVE: each object-header and value read depends on its bucket load; the checksum is "
        "CRC-64/Jones folded in per write (Valkey crc64.c, rioWrite), not one CRC32 pass over "
        "the finished buffer",
    ),
    "iterate-save-nochecksum": (
        "iterate-save-nochecksum", 500_000,
        "SAVE with rdbchecksum no, as Valkey PR #1501's SAVE benchmark",
    ),
    "load": (
        "load-100", 500_000,
        "every rio read folds its bytes into a CRC-64/Jones (Valkey crc64.c), not a CRC32: "
        "more work between a key's bucket prefetch and its insert",
    ),
    "mset-dict-15043": (
        "mset-dict-redis-15043", 1_000_000,
        "Redis PR #15043 (seed 001): MSETs of random keys over a half-existing range, each "
        "key's bucket cell prefetched in batches of 16",
    ),
    "mset-dict-random-batch": (
        "mset-dict-batch", 1_000_000,
        "Redis PR #15133's full dictPrefetcher on the same MSET workload as mset-dict-15043",
    ),
}


#: options given before --keys on the command lines (as the recorded results have them)
_BEFORE_KEYS = ("table", "mset_keys", "prefill")


def _workload(name: str, keys: int, why: str) -> tuple[str, str, str, dict[str, Any], str]:
    p = pairs.get(name)
    first = {k: v for k, v in p.common.items() if k in _BEFORE_KEYS}
    return (p.workload, p.side("a")["variant"], p.side("b")["variant"],
            {**first, "keys": keys, **p.common}, why)


#: name -> (workload, baseline, variant, options (c_ref's, in command-line order), what the
#: change does to it)
WORKLOADS: dict[str, tuple[str, str, str, dict[str, Any], str]] = {
    n: _workload(*u) for n, u in _USES.items()}
#: Workloads whose options or variant a build without this change lacks: "after" only.
NEW = {"iterate-save-nochecksum", "mset-dict-15043", "mset-dict-random-batch"}

#: Measured operations per workload: native (timed), traced (simulated).
OPS = {"mget": ("20000", "2000"), "pipeline": ("1000000", "100000"), "mset": ("20000", "2000")}


def kvsim_bin() -> str:
    return str(Path(sys.executable).with_name("kvsim"))


def run_json(cmd: list[str], env: dict[str, str]) -> dict:
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    if r.returncode != 0:
        raise SystemExit(f"fidelity: {' '.join(cmd)} failed: {r.stderr.strip()[:300]}")
    return json.loads(r.stdout)


def native_options(workload: str, opts: dict[str, Any], ops: str | None = None
                   ) -> dict[str, Any]:
    """The options of a native run: ``opts`` and the measured operations (``ops``, default
    :data:`OPS`'s native ones)."""
    ops = ops or OPS.get(workload, (None, None))[0]
    return {**opts, "ops": ops} if ops else dict(opts)


def native(build_env: dict[str, str], workload: str, variant: str, opts: dict[str, Any],
           repeat: int) -> dict:
    """``repeat`` native runs of one (build, variant) in one c_ref process (the build's
    binary: ``KVSIM_CREF_BIN`` of ``build_env``)."""
    env = {k: v for k, v in build_env.items() if k == "KVSIM_CREF_BIN"}
    try:
        return cref.native(workload, {**opts, "variant": variant}, repeat=repeat, env=env)
    except cref.CrefError as exc:
        raise SystemExit(f"fidelity: {workload} --variant {variant}: {exc}") from None


def measure_native(build_env: dict[str, str], workload: str, variant: str,
                   opts: dict[str, Any], repeat: int, ops: str | None = None) -> dict:
    """One (build, variant) natively: the medians and runs of ``repeat`` runs."""
    nopts = native_options(workload, opts, ops)
    nat = native(build_env, workload, variant, nopts, repeat)
    return {"native": {key: nat.get(key) for key in ("cpu_median_s", "median_s", "cpu_runs_s",
                                                       "runs_s", "ops", "reply_crc32")},
            "native_options": cref.workload_args(nopts)}


def measure_sim(build_env: dict[str, str], workload: str, variant: str, opts: dict[str, Any],
                cpu: str, tmp: Path, ops: str | None = None) -> dict:
    """One (build, variant) traced by that build and simulated on ``cpu``."""
    traced_ops = ops or OPS.get(workload, (None, None))[1]
    topts = cref.workload_args({**opts, "ops": traced_ops})
    k = kvsim_bin()
    trace = tmp / "t.kvt"
    r = subprocess.run([k, "trace", workload, "--variant", variant, "-o", str(trace), *topts],
                       env=build_env, check=False, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"fidelity: {workload} --variant {variant}: trace failed: "
                         f"{r.stderr.strip()[:300]}")
    sim = run_json([k, "simulate", str(trace), "--cpu", cpu, "--json"], build_env)
    trace.unlink()
    return {
        "traced_options": topts,
        "simulated": {"cycles": sim["cycles"], "instructions": sim["instructions"],
                      "ipc": sim["ipc"], "records": sim["records"],
                      # L1D misses per structure tag and access kind ("value load", ...)
                      "l1d_misses": {f"{t['tag_name']} {t['kind']}": t["misses"]
                                     for t in sim.get("by_tag", []) if t["level"] == "L1D"},
                      "software_prefetch_l1d": sim.get("prefetch", {}).get("software", {})
                      .get("L1D")},
    }


def measure(build_env: dict[str, str], workload: str, variant: str, opts: dict[str, Any],
            repeat: int, cpu: str, tmp: Path) -> dict:
    """One (build, variant): native medians and simulated cycles."""
    nat = measure_native(build_env, workload, variant, opts, repeat)
    sim = measure_sim(build_env, workload, variant, opts, cpu, tmp)
    return {"native": nat["native"], "native_options": nat["native_options"],
            "traced_options": sim["traced_options"], "simulated": sim["simulated"]}


def speedups(base: dict, var: dict) -> dict:
    def ratio(a, b):
        return round(a / b, 4) if a and b else None
    return {
        "native_cpu": ratio(base["native"].get("cpu_median_s"),
                            var["native"].get("cpu_median_s")),
        "native_wall": ratio(base["native"].get("median_s"), var["native"].get("median_s")),
        "predicted": ratio(base["simulated"].get("cycles"), var["simulated"].get("cycles")),
    }


# --- the framework's study -------------------------------------------------------------------

NAME = "fidelity"
#: the environment variables naming the "before" build of ``kvsim experiment run fidelity``:
#: a ``kvsim-cref`` binary (its SHA-256 goes into each cell's spec, so another build is
#: another cell) and, for the record, the commit it was built from
BEFORE_ENV, BEFORE_COMMIT_ENV = "KVSIM_FIDELITY_BEFORE", "KVSIM_FIDELITY_BEFORE_COMMIT"
#: per scale of ``kvsim experiment run``: the factor on keys and operations, native runs
SCALES = {"small": (0.1, 3), "full": (1.0, 5)}


def build(label: str, binary: str | None = None, commit: str | None = None) -> dict[str, Any]:
    """A build as a cell spec names it: ``label`` ("before", "after"), the ``kvsim-cref``
    binary (None: this checkout's, whose bytes the kind's inputs already hash) with its
    SHA-256, and the commit it was built from. ValueError when the binary is not a file."""
    if binary is None:
        return {"label": label, "cref_bin": None, "cref_sha256": None, "commit": commit}
    path = Path(binary).resolve()
    if not path.is_file():
        raise ValueError(f"{label} build {binary}: no such file")
    return {"label": label, "cref_bin": str(path), "cref_sha256": provenance.file_sha256(path),
            "commit": commit}


def _build_env(b: dict[str, Any]) -> dict[str, str]:
    if b["cref_bin"] is None:
        return dict(os.environ)
    if provenance.file_sha256(b["cref_bin"]) != b["cref_sha256"]:
        raise ValueError(f"{b['label']} build {b['cref_bin']}: its bytes changed since the "
                         "cell was planned")
    return dict(os.environ, KVSIM_CREF_BIN=b["cref_bin"])


def _scaled(n: int | str | None, factor: float) -> str | None:
    return None if n is None else str(max(1, int(int(n) * factor)))


def specs(names: list[str], builds: list[dict[str, Any]], repeat: int, cpus: list[str],
          scale: float = 1.0) -> list[dict[str, Any]]:
    """The study's cells: per pair and build (a pair of :data:`NEW` with the "after" build
    only), one ``fidelity-native`` cell (baseline and variant natively, ``repeat`` runs each)
    and one ``fidelity-sim`` cell per CPU (both traced by that build and simulated);
    ``scale`` multiplies the keys and the operations."""
    from kvsim.experiments.micro import _cpu_digest

    digest = {cpu: _cpu_digest(cpu) for cpu in cpus}  # a calibration changes `local`
    out = []
    for name in names:
        workload, base, var, opts, _ = WORKLOADS[name]
        opts = {**opts, "keys": max(1000, int(opts["keys"] * scale))}
        nops, tops = (_scaled(n, scale) for n in OPS.get(workload, (None, None)))
        for b in builds:
            if name in NEW and b["label"] == "before":
                continue
            common = {"experiment": NAME, "pair": name, "workload": workload,
                      "variants": [base, var], "options": opts, "build": b}
            out.append({**common, "kind": "fidelity-native", "repeat": repeat, "ops": nops,
                        "params": {"pair": name, "build": b["label"]}})
            out += [{**common, "kind": "fidelity-sim", "cpu": cpu, "cpu_digest": digest[cpu],
                     "ops": tops, "params": {"pair": name, "build": b["label"]}}
                    for cpu in cpus]
    return out


class FidelityError(RuntimeError):
    """A build failed to run or trace (one line saying which)."""


def _native_cell(spec: dict[str, Any]) -> dict[str, Any]:
    env = _build_env(spec["build"])
    try:
        b, v = (measure_native(env, spec["workload"], x, spec["options"], spec["repeat"],
                               spec["ops"]) for x in spec["variants"])
    except SystemExit as exc:  # the command's one-line error, as a failed cell
        raise FidelityError(str(exc)) from None
    sp = speedups({**b, "simulated": {}}, {**v, "simulated": {}})
    return {"baseline": json.dumps(b), "variant": json.dumps(v),
            "native_cpu": sp["native_cpu"], "native_wall": sp["native_wall"]}


def _sim_cell(spec: dict[str, Any]) -> dict[str, Any]:
    env = _build_env(spec["build"])
    try:
        with tempfile.TemporaryDirectory(prefix="kvsim-fidelity-") as td:
            b, v = (measure_sim(env, spec["workload"], x, spec["options"], spec["cpu"],
                                Path(td), spec["ops"]) for x in spec["variants"])
    except SystemExit as exc:
        raise FidelityError(str(exc)) from None
    sp = speedups({"native": {}, **b}, {"native": {}, **v})
    return {"baseline": json.dumps(b), "variant": json.dumps(v), "predicted": sp["predicted"]}


cells.register_kind("fidelity-native", _native_cell, counts_as="native", module="fidelity")
cells.register_kind("fidelity-sim", _sim_cell, counts_as="sim", module="fidelity",
                    artifacts=("libkvsim_sim.so",))


def _cells(scale: str, cpus: list[str]) -> list[dict[str, Any]]:
    """Every pair of the fidelity list natively and predicted on every CPU, with this
    checkout's c_ref and, where $KVSIM_FIDELITY_BEFORE names another build's kvsim-cref,
    with that one too; ``small``: a tenth of the keys and operations, 3 native runs."""
    factor, repeat = SCALES[scale]
    builds = [build("after")]
    if os.environ.get(BEFORE_ENV):
        builds.insert(0, build("before", os.environ[BEFORE_ENV],
                               os.environ.get(BEFORE_COMMIT_ENV)))
    return specs(sorted(WORKLOADS), builds, repeat, cpus, factor)


def _tables(rows: pd.DataFrame) -> list[Table]:
    kind = rows["kind"] if "kind" in rows else pd.Series(dtype=str)
    lines: dict[tuple[str, str], dict[str, Any]] = {}
    for _, r in rows[kind.isin(["fidelity-native", "fidelity-sim"])].iterrows():
        line = lines.setdefault((r["pair"], r["build"]),
                                {"pair": r["pair"], "build": r["build"], "seed": None,
                                 "native": None, "native_value": None})
        if r["kind"] == "fidelity-native":
            line["native"] = f"{r['native_cpu']:.2f}x" if pd.notna(r["native_cpu"]) else ""
            line["native_value"] = r["native_cpu"]
        else:
            line[f"sim:{r['cpu']}"] = r["predicted"]
    frame = pd.DataFrame([lines[k] for k in sorted(lines)])
    return [Table(NAME, "Native and predicted speedups before and after a change to c_ref",
                  frame, "speedup (x: baseline / variant; native: process CPU medians, "
                  "predicted: cycles)",
                  Plot(x="pair", ylabel="speedup (x)", xlabel="pair"),
                  note=f"before: the build ${BEFORE_ENV} names (absent: after only); no "
                       "upstream figure (seed): the change is c_ref's own.")]


register(Experiment(NAME, "Fidelity: speedups before and after a change to c_ref",
                    "none (two builds of c_ref)", _cells, _tables))


def _decode(metrics: dict[str, Any]) -> tuple[dict, dict]:
    return json.loads(metrics["baseline"]), json.loads(metrics["variant"])


def main(argv: list[str] | None = None, prog: str = "python -m kvsim.experiments.fidelity"
         ) -> int:
    ap = argparse.ArgumentParser(prog=prog, description=__doc__.splitlines()[0])
    ap.add_argument("--before-bin", help="kvsim-cref of the build to compare with")
    ap.add_argument("--before-commit", help="the commit --before-bin was built from")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--cpu", default="local")
    ap.add_argument("--only", action="append", choices=sorted(WORKLOADS))
    ap.add_argument("--out-dir", type=Path, default=None)
    a = ap.parse_args(argv)
    out_dir = a.out_dir or provenance.results_dir()
    if out_dir is None:
        ap.error("no results/ directory (not a checkout): pass --out-dir")
    builds = [build("after")]
    if a.before_bin:
        try:
            builds.insert(0, build("before", a.before_bin, a.before_commit))
        except ValueError:
            ap.error(f"--before-bin {a.before_bin}: no such file")
    for name in a.only or sorted(WORKLOADS):
        workload, baseline, variant, opts, why = WORKLOADS[name]
        res: dict[str, dict] = {}
        todo = specs([name], builds, a.repeat, [a.cpu])
        for nat, sim in zip(todo[::2], todo[1::2], strict=True):  # before, then after
            try:
                (nb, nv), (sb, sv) = (_decode(cells.run_cell(c)["metrics"])
                                      for c in (nat, sim))
            except FidelityError as exc:
                raise SystemExit(str(exc)) from None
            b, v = {**nb, **sb}, {**nv, **sv}
            res[nat["build"]["label"]] = {"baseline": b, "variant": v,
                                          "speedup": speedups(b, v)}
        payload = {
            "workload": workload, "baseline": baseline, "variant": variant,
            "options": cref.workload_args(opts),
            "change": why, "cpu_preset": a.cpu, "repeat": a.repeat,
            "before_commit": a.before_commit, **res,
        }
        path = provenance.write_result(out_dir / f"fidelity-{name}.json", payload)
        line = {k: res[k]["speedup"] for k in res}
        print(f"{name}: {json.dumps(line)} -> {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
