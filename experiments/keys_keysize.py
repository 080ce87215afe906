"""KEYS with Valkey's iterator prefetch by key size: native against predicted, per part.

    python -m kvsim.experiments.keys_keysize --cpu CPUFILE [--key-sizes 6,16,24,40]
        [--keys 500000] [--rounds 5] [--settings base,pf_stream_queue_swpf_trains]
        [--no-native] [--out results/keys-keysize.json]

The validation's KEYS row (:mod:`kvsim.experiments.validation`: 500k keys of 100 B, 16-byte
keys, ``rdbchecksum no``) times one pass of the iterator per process, as a fresh server's
first KEYS: the reply buffer's pages are touched for the first time in it, so the pass takes
their page faults. The key size moves three things the row holds fixed: how often the key,
which sits in the object after its header, runs onto the object's second line (a line the
``valkey`` variant's prefetch of the object does not fetch), how many reply bytes (and so
page faults) a key costs, and the object's size class.

Per key size and side (``none``, ``valkey``), natively: interleaved rounds (every size and
side in each round, the sides' order alternating), each one ``kvsim native iterate
--repeat 2`` process: its first pass (the validation's: the reply buffer's faults in it) and
its second (the same buffer again, no fault), by process CPU time, with the first pass's
minor faults. Predicted: the side traced once and simulated on ``--cpu`` under each setting
of ``--settings`` (:data:`kvsim.experiments.ablation.SETTINGS`) in one pass: ns per key,
the same less the cycles charged to the trace's page faults (the second pass's analogue),
the faults, the key's L1 demand misses and the store-buffer stalls per key.

Writes ``results/keys-keysize.json`` (kvsim.provenance) and prints a table.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

from kvsim import provenance
from kvsim.sim.config import ConfigError, CpuConfig, load_cpu

RESULT_NAME = "keys-keysize.json"
#: the validation row's options but the key size (kvsim.experiments.validation)
OPTIONS = {"value_size": 100, "op": "keys", "rdbchecksum": "no", "seed": 1}
SIDES = ("none", "valkey")
KEY_SIZES = (6, 16, 24, 40)


def _options(keys: int, key_size: int, side: str) -> dict[str, Any]:
    return {"keys": keys, **OPTIONS, "key_size": key_size, "variant": side}


def native_rounds(keys: int, sizes: list[int], rounds: int, log=lambda m: None
                  ) -> dict[tuple[int, str], dict[str, list[float]]]:
    """(key size, side) -> {"first", "second": ns per key per round, "faults": the first
    pass's minor faults per key per round}."""
    from kvsim.experiments import cref

    got: dict[tuple[int, str], dict[str, list[float]]] = {
        (k, s): {"first": [], "second": [], "faults": []} for k in sizes for s in SIDES}
    for r in range(rounds):
        for k in sizes:
            for s in (SIDES if r % 2 == 0 else SIDES[::-1]):
                res = cref.native("iterate", _options(keys, k, s), repeat=2)
                n = int(res["ops"])
                g = got[(k, s)]
                g["first"].append(res["cpu_runs_s"][0] * 1e9 / n)
                g["second"].append(res["cpu_runs_s"][1] * 1e9 / n)
                g["faults"].append(res["minflt_runs"][0] / n)
        log(f"native round {r + 1}/{rounds} (load {os.getloadavg()[0]:.2f})")
    return got


def _key_l1_misses(res: dict) -> float:
    return sum(x["misses"] for x in res.get("by_tag") or ()
               if x["tag_name"] == "key" and x["role"] == "L1" and x["kind"] == "load")


def predicted(keys: int, key_size: int, side: str, cpu: CpuConfig, settings: list[str],
              workdir: Path) -> dict[str, dict[str, float]]:
    """setting -> the side's predicted figures per key (module docstring)."""
    from kvsim import sim
    from kvsim.experiments import ablation, cref

    path = workdir / f"k{key_size}-{side}.kvt"
    cref.trace("iterate", str(path), _options(keys, key_size, side))
    cpus = [ablation.SETTINGS[s][1](cpu) for s in settings]
    out = {}
    for s, c, res in zip(settings, cpus, sim.simulate_many(str(path), cpus), strict=True):
        cyc, calls = res["cycles"], res.get("syscalls") or {}
        out[s] = {"ns_per_key": cyc / keys / c.freq_ghz,
                  "ns_per_key_less_faults": (cyc - calls.get("cycles", 0.0)) / keys
                  / c.freq_ghz,
                  "faults_per_key": calls.get("calls", {}).get("page_fault", 0) / keys,
                  "key_l1_misses_per_key": _key_l1_misses(res) / keys,
                  "store_buffer_full_cycles_per_key":
                      res["timing"]["stall_cycles"].get("store_buffer_full", 0.0) / keys,
                  "mlp": res["timing"]["mlp"]}
    path.unlink()
    return out


def rows(keys: int, sizes: list[int], cpu_file: str, settings: list[str],
         native: dict | None, log=lambda m: None) -> list[dict[str, Any]]:
    from kvsim import stats

    cpu = load_cpu(cpu_file)
    out = []
    with tempfile.TemporaryDirectory(prefix="kvsim-keysize-") as d:
        for k in sizes:
            for s in SIDES:
                row: dict[str, Any] = {"key_size": k, "side": s,
                                       "predicted": predicted(keys, k, s, cpu, settings,
                                                              Path(d))}
                if native is not None:
                    g = native[(k, s)]
                    row["native"] = {"first_pass_ns_per_key": stats.summary(g["first"]),
                                     "second_pass_ns_per_key": stats.summary(g["second"]),
                                     "faults_per_key": statistics.median(g["faults"])}
                out.append(row)
                log(f"key size {k}, {s}: predicted")
    return out


def _summary(doc: dict) -> list[str]:
    settings = doc["settings"]
    head = ["key size", "side", "native 1st pass", "native 2nd pass", "faults/key (n, p)",
            *[f"{s}: ns (less faults)" for s in settings]]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in doc["rows"]:
        n = r.get("native")
        nat = ([f"{n['first_pass_ns_per_key']['median']:.1f}",
                f"{n['second_pass_ns_per_key']['median']:.1f}"] if n else ["-", "-"])
        p = r["predicted"]
        faults = (f"{n['faults_per_key']:.4f}, " if n else "") + \
            f"{p[settings[0]]['faults_per_key']:.4f}"
        lines.append("| " + " | ".join([str(r["key_size"]), r["side"], *nat, faults, *[
            f"{p[s]['ns_per_key']:.1f} ({p[s]['ns_per_key_less_faults']:.1f})"
            for s in settings]]) + " |")
    return lines


def main(argv: list[str] | None = None,
         prog: str = "python -m kvsim.experiments.keys_keysize") -> int:
    from kvsim.experiments import ablation

    ap = argparse.ArgumentParser(prog=prog, description=__doc__.splitlines()[0])
    ap.add_argument("--cpu", required=True, help="the CPU file (or preset) predicted on")
    ap.add_argument("--key-sizes", default=",".join(map(str, KEY_SIZES)))
    ap.add_argument("--keys", type=int, default=500_000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--settings", default="base,pf_stream_queue_swpf_trains",
                    help="kvsim ablate's settings, comma-separated (the first: the table's "
                         "faults column)")
    ap.add_argument("--no-native", action="store_true", help="predictions only")
    provenance.add_out_option(ap, RESULT_NAME)
    a = ap.parse_args(argv)
    out = provenance.out_path(a.out, RESULT_NAME)
    if provenance.out_dir_missing(out):
        return 2
    log = lambda m: print(f"keys_keysize: {m}", file=sys.stderr, flush=True)  # noqa: E731
    try:
        sizes = [int(x) for x in a.key_sizes.split(",") if x.strip()]
        if not sizes or any(not 1 <= k <= 4000 for k in sizes):
            raise ValueError(f"--key-sizes {a.key_sizes!r}: each 1-4000")
        if a.keys < 1 or a.rounds < 2:
            raise ValueError("--keys: at least 1; --rounds: at least 2")
        settings = [s.strip() for s in a.settings.split(",") if s.strip()]
        bad = [s for s in settings if s not in ablation.SETTINGS]
        if not settings or bad:
            raise ValueError(f"--settings: unknown {', '.join(bad) or '(none given)'}")
        load_cpu(a.cpu)  # a bad file is refused before anything runs
        native = None if a.no_native else native_rounds(a.keys, sizes, a.rounds, log)
        got = rows(a.keys, sizes, a.cpu, settings, native, log)
    except (ConfigError, ValueError, OSError) as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        return 2
    doc = {"command": provenance.command(), "cpu": a.cpu, "keys": a.keys,
           "options": OPTIONS, "settings": settings,
           "rounds": None if a.no_native else a.rounds, "rows": got}
    print("\n".join(_summary(doc)))
    return provenance.publish(prog, out, doc)


if __name__ == "__main__":
    sys.exit(main())
