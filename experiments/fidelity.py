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

from kvsim import provenance
from kvsim.experiments import cref, pairs

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


def measure(build_env: dict[str, str], workload: str, variant: str, opts: dict[str, Any],
            repeat: int, cpu: str, tmp: Path) -> dict:
    """One (build, variant): native medians and simulated cycles."""
    traced_ops = OPS.get(workload, (None, None))[1]
    nopts = native_options(workload, opts)
    topts = cref.workload_args({**opts, "ops": traced_ops})
    k = kvsim_bin()
    nat = native(build_env, workload, variant, nopts, repeat)
    trace = tmp / "t.kvt"
    subprocess.run([k, "trace", workload, "--variant", variant, "-o", str(trace), *topts],
                   env=build_env, check=True, capture_output=True)
    sim = run_json([k, "simulate", str(trace), "--cpu", cpu, "--json"], build_env)
    trace.unlink()
    return {
        "native": {key: nat.get(key) for key in ("cpu_median_s", "median_s", "cpu_runs_s",
                                                   "runs_s", "ops", "reply_crc32")},
        "native_options": cref.workload_args(nopts),
        "traced_options": topts,
        "simulated": {"cycles": sim["cycles"], "instructions": sim["instructions"],
                      "ipc": sim["ipc"], "records": sim["records"],
                      # L1D misses per structure tag and access kind ("value load", ...)
                      "l1d_misses": {f"{t['tag_name']} {t['kind']}": t["misses"]
                                     for t in sim.get("by_tag", []) if t["level"] == "L1D"},
                      "software_prefetch_l1d": sim.get("prefetch", {}).get("software", {})
                      .get("L1D")},
    }


def speedups(base: dict, var: dict) -> dict:
    def ratio(a, b):
        return round(a / b, 4) if a and b else None
    return {
        "native_cpu": ratio(base["native"]["cpu_median_s"], var["native"]["cpu_median_s"]),
        "native_wall": ratio(base["native"]["median_s"], var["native"]["median_s"]),
        "predicted": ratio(base["simulated"]["cycles"], var["simulated"]["cycles"]),
    }


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
    builds = {"after": dict(os.environ)}
    if a.before_bin:
        if not Path(a.before_bin).is_file():
            ap.error(f"--before-bin {a.before_bin}: no such file")
        builds = {"before": dict(os.environ, KVSIM_CREF_BIN=str(Path(a.before_bin).resolve())),
                  **builds}
    for name in a.only or sorted(WORKLOADS):
        workload, baseline, variant, opts, why = WORKLOADS[name]
        res: dict[str, dict] = {}
        with tempfile.TemporaryDirectory() as td:
            for label, env in builds.items():  # before and after back to back
                if name in NEW and label == "before":
                    continue
                b = measure(env, workload, baseline, opts, a.repeat, a.cpu, Path(td))
                v = measure(env, workload, variant, opts, a.repeat, a.cpu, Path(td))
                res[label] = {"baseline": b, "variant": v, "speedup": speedups(b, v)}
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
