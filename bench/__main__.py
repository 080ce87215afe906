"""``python -m bench SUITE [ARGS]``: the one benchmark driver. ``python -m bench`` lists the
suites; ``python -m bench SUITE --help`` gives a suite's options; ``python -m bench render
FILE.md ...`` re-renders README regions from result files (the benchmarks' renderings and
the experiments', kvsim.experiments.render) without measuring anything."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

#: suite -> (module of bench/ with main(argv), or a shell script, and what it measures)
SUITES: dict[str, tuple[str, str]] = {
    "presets": ("presets", "whole-process `kvsim simulate` per preset (= `kvsim bench`)"),
    "sim": ("sim", "engine records/s on synthetic and given traces, beside pycachesim"),
    "traces": ("traces", "trace reader records/s, with and without the record checks"),
    "codec": ("codec", "chunk codecs: bytes per record and decoding speed"),
    "convert": ("convert", "`kvsim convert` to every output format: time, memory, size"),
    "reuse": ("reuse", "reuse-distance counter: accesses/s"),
    "cref": ("cref_variants", "c_ref's prefetch variants natively, interleaved (= `make bench`)"),
    "paired": ("paired", "two c_ref builds' native speedups, interleaved rounds "
               "(was c_ref/bench/paired.py)"),
    "load-distance": ("load_distance", "prefetch distance of a traced snapshot load"),
    "ab": ("ab", "A B A B of whole-process `kvsim simulate`: two engines or option sets"),
    "engine-presets": ("engine_presets", "engine instructions per record per preset "
                       "(callgrind)"),
    "profile": ("profile", "where the engine's instructions go per preset (callgrind)"),
    "instructions": ("instructions.sh", "engine instructions per record of raw record "
                     "files (callgrind)"),
    "threads": ("threads.sh", "engine wall time per thread count on raw record files"),
    "cell-cost": ("cell_cost", "one sim cell group of an experiment by phase: c_ref, "
                  "decode, engine per CPU, warm-up"),
    "render": ("renderings", "re-render README regions from result files (no measuring)"),
}


def usage() -> str:
    rows = "\n".join(f"  {name:<15} {what}" for name, (_, what) in SUITES.items())
    return f"usage: python -m bench SUITE [ARGS]   (SUITE --help for its options)\n{rows}"


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(usage())
        return 0
    name, args = argv[0], argv[1:]
    if name not in SUITES:
        print(f"python -m bench: error: unknown suite {name!r} (known: "
              f"{', '.join(SUITES)})", file=sys.stderr)
        return 2
    target = SUITES[name][0]
    if target.endswith(".sh"):
        env = dict(os.environ, PYTHON=os.environ.get("PYTHON", sys.executable))
        return subprocess.run(["sh", str(HERE / target), *args], env=env,
                              check=False).returncode
    return int(importlib.import_module(f"bench.{target}").main(args) or 0)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
