"""A stream of misses with the prefetchers below L1 issuing into their own level's miss
buffers: copy-fetch's kernels and the validation's loads, simulated with and without.

    python -m kvsim.experiments.stream_queue --native results/copy-fetch.json
        [--cpu CPU ...] [--sizes 4096,...] [--rows load-4096,...] [--out FILE]

The ``[[prefetcher]]`` keys ``arrival``, ``stores`` and ``hits`` (sim/MODEL.md §4; default
off) change how a prefetcher below L1 sees a stream: its candidates issue when the request
that trains it reaches its level (not at the load's issue, while the request still waits for
an L1 miss buffer), a store's read for ownership trains it as a load does, and a request
that hits its level (a line it prefetched) trains it as a miss. Per CPU file (``--cpu``,
repeatable; default this machine's calibration and two presets) and per variant
(:data:`VARIANTS`: the file as it is, the three keys on every prefetcher below L1, and the
same with the stream prefetchers' degree 16), this simulates copy-fetch's kernels
(:mod:`kvsim.experiments.copy_fetch`: a sequential load stream over cold lines, *touch*, and
copies into cold destinations, *flushed* and *pool*) and gives each one's penalty per line
(ns beyond hot) beside the native figures of ``--native`` (``python -m
kvsim.sim.calibrate_copy``'s result), and the L2's hardware prefetches on the cold stream
(issued, dropped). With ``--rows``, the validation's rows of those names
(:mod:`kvsim.experiments.validation`, full scale, traced as the validation traces them: a
load in reused pages) are traced with c_ref and simulated on the first ``--cpu`` under each
variant: ns per operation of both sides. Simulation only; nothing native is run.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from kvsim import provenance
from kvsim.experiments import ablation, copy_fetch
from kvsim.sim.config import ConfigError, CpuConfig, load_cpu

RESULT_NAME = "stream-queue.json"
DEFAULT_CPUS = ("results/calibrate-xeon-m167-q15-quick.toml", "epyc-7713", "xeon-8255c")
DEFAULT_SIZES = (4096, 16384, 65536, 262144)
#: native method and state of each simulated kernel's penalty (copy_fetch's names)
KERNELS = {"touch_flushed": (("touch", "flushed"),),
           "copy_flushed": (("movsb", "flushed"), ("loop", "flushed")),
           "copy_pool": (("read", "pool"),)}


#: variant -> the ablation's setting it is (experiments/ablation.py SETTINGS: one _below_l1,
#: not a second copy)
SETTING_OF = {"file": "base", "stream_queue": "pf_stream_queue",
              "stream_queue_d16": "pf_stream_queue_d16"}
#: variant -> (what it is, CPU change: its setting's, :data:`SETTING_OF`)
VARIANTS = {v: (what, ablation.SETTINGS[SETTING_OF[v]][1]) for v, what in (
    ("file", "the CPU file as it is"),
    ("stream_queue", "arrival, stores and hits on every prefetcher below L1"),
    ("stream_queue_d16", "the same, the stream prefetchers' degree 16"))}


def _ns(cpu: CpuConfig, size: int, state: str, touch: bool) -> tuple[float, dict]:
    from kvsim import sim

    rec, copies = copy_fetch.records(size, state, cpu.caches[-1].size, touch=touch)
    res = sim.simulate(rec, cpu, page_size=4096, validate=False, flush=False)
    hw = {lv: {k: c[k] for k in ("issued", "dropped")}
          for lv, c in res["prefetch"]["hardware"].items()}
    return res["cycles"] / cpu.freq_ghz / copies, hw


def kernels(nat: dict[str, Any], cpu_path: str, sizes: tuple[int, ...],
            log=lambda m: None) -> list[dict[str, Any]]:
    """Per size: the native penalties per line and each variant's simulated ones."""
    base = load_cpu(cpu_path)
    by = {(r["size"], r["method"]): r for r in nat["rows"]}
    rows = []
    for size in sizes:
        lines = size / copy_fetch.LINE
        row: dict[str, Any] = {"size": size, "native": {}, "predicted": {}}
        for refs in KERNELS.values():
            for method, state in refs:
                r = by.get((size, method), {}).get(f"{state}_penalty_ns_per_line")
                if r:
                    row["native"][f"{method}_{state}"] = r
        for label, (_, change) in VARIANTS.items():
            cpu = change(base)
            hot, _ = _ns(cpu, size, "hot", False)
            touch_hot, _ = _ns(cpu, size, "hot", True)
            touch, hw_touch = _ns(cpu, size, "flushed", True)
            flushed, hw_copy = _ns(cpu, size, "flushed", False)
            pool, _ = _ns(cpu, size, "pool", False)
            row["predicted"][label] = {
                "touch_flushed": (touch - touch_hot) / lines,
                "copy_flushed": (flushed - hot) / lines,
                "copy_pool": (pool - hot) / lines,
                "hw_prefetch_touch_flushed": hw_touch, "hw_prefetch_copy_flushed": hw_copy}
        p = row["predicted"]
        log(f"{cpu_path} {size:>7} B: touch ns/line " + ", ".join(
            f"{v} {p[v]['touch_flushed']:.2f}" for v in VARIANTS))
        rows.append(row)
    return rows


def validation_rows(names: list[str], cpu_path: str, workdir: Path,
                    log=lambda m: None) -> list[dict[str, Any]]:
    """The validation's rows whose catalogue pair is in ``names`` (full scale), each side
    traced as the validation traces it and simulated under every variant: ns per op. The
    ablation's pass over a pair (:func:`kvsim.experiments.ablation.predict_pair`, the row's
    sizes and options: :func:`~kvsim.experiments.ablation.validation_pairs`) under the
    variants' settings (:data:`SETTING_OF`)."""
    from kvsim.experiments import validation

    base = load_cpu(cpu_path)
    settings = list(SETTING_OF.values())
    out = []
    with ablation.validation_pairs(names, "full", instead=True):
        for p in validation._pairs("full"):
            name = validation._PAIR_OF_ROW.get(p["row"])
            if name not in names:
                continue
            pred = ablation.predict_pair(name, ablation.SCALES["full"][name], base, workdir,
                                         settings, log)
            sides = {label: {v: {k: pred[side]["settings"][s][k] for k in ("ns_per_op", "mlp")}
                             for v, s in SETTING_OF.items()}
                     for label, side in (("baseline", "base"), ("variant", "variant"))}
            out.append({"row": p["row"], "pair": name,
                        "options": {**p["common"], **p["sim"]}, "sides": sides})
            log(f"{p['row']}: " + ", ".join(
                f"{v} {sides['baseline'][v]['ns_per_op']:.1f}" for v in VARIANTS))
    return out


def main(argv: list[str] | None = None, prog: str = "python -m kvsim.experiments.stream_queue"
         ) -> int:
    ap = argparse.ArgumentParser(prog=prog, description=__doc__.splitlines()[0])
    ap.add_argument("--native", required=True, help="a file calibrate_copy wrote")
    ap.add_argument("--cpu", action="append", default=None,
                    help=f"a CPU file or preset (repeatable; default {', '.join(DEFAULT_CPUS)})")
    ap.add_argument("--sizes", default=",".join(str(s) for s in DEFAULT_SIZES),
                    help="copy sizes in bytes (comma-separated)")
    ap.add_argument("--rows", default="",
                    help="validation pairs to simulate on the first --cpu (comma-separated: "
                         "load-4096, keys-nochecksum-valkey, ...)")
    provenance.add_out_option(ap, RESULT_NAME)
    a = ap.parse_args(argv)
    log = lambda m: print(f"stream_queue: {m}", file=sys.stderr, flush=True)  # noqa: E731
    out = provenance.out_path(a.out, RESULT_NAME)
    if provenance.out_dir_missing(out):
        return 2
    cpus = a.cpu or list(DEFAULT_CPUS)
    try:
        sizes = tuple(int(x) for x in a.sizes.split(",") if x.strip())
        nat = json.loads(Path(a.native).read_text())
        if "rows" not in nat or "raw" not in nat:
            raise ValueError(f"{a.native}: not a calibrate_copy result (no rows)")
        payload: dict[str, Any] = {
            "command": provenance.command(), "native_file": a.native,
            "native_provenance": nat.get("provenance"),
            "variants": {k: v[0] for k, v in VARIANTS.items()},
            "kernels": {c: kernels(nat, c, sizes, log) for c in cpus}}
        names = [x.strip() for x in a.rows.split(",") if x.strip()]
        if names:
            with tempfile.TemporaryDirectory() as d:
                payload["rows_cpu"] = cpus[0]
                payload["rows"] = validation_rows(names, cpus[0], Path(d), log)
    except (ConfigError, ValueError, OSError) as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        return 2
    return provenance.publish(prog, out, payload)


if __name__ == "__main__":
    sys.exit(main())
