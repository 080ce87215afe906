"""Memory a Python fuzz target keeps per input, instrumented as ``atheris_main`` fuzzes it.

    python fuzz/py/leak_check.py TARGET... [--no-fix] [--inputs N]

Instruments kvsim as ``atheris_main.main`` does (without starting libFuzzer: atheris'
comparison hook works before it), runs each target over deterministic byte mutations of its
seed corpus, and prints one JSON line per target: the bytes ``tracemalloc`` sees still
allocated per input after a warm-up (``bytes_per_input``), the references atheris' hook
kept per comparison before any fix (``hook_extra_refs``), and whether the comparison-hook
fix (``atheris_main.CmpRefFix``) was applied. ``--no-fix`` leaves the hook as atheris installs
it, to show what the fix prevents. ``fuzz/tests/test_leak.py`` runs it.
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import sys
import tracemalloc
from pathlib import Path

import atheris_main
import fuzz_targets

CORPUS = Path(__file__).resolve().parent.parent / "corpus"


def inputs(target: str, n: int) -> list[bytes]:
    """``n`` mutations of ``target``'s committed corpus (a fixed seed: the same every run)."""
    seeds = [p.read_bytes() for p in sorted((CORPUS / target).iterdir())]
    rng = random.Random(15)
    out = []
    for i in range(n):
        b = bytearray(seeds[i % len(seeds)])
        for _ in range(rng.randint(0, 6)):
            if b:
                b[rng.randrange(len(b))] = rng.randrange(256)
        out.append(bytes(b))
    return out


def run(target: str, data: list[bytes]) -> None:
    fn = fuzz_targets.TARGETS[target]
    for d in data:
        try:
            fn(d)
        except fuzz_targets.FuzzFinding:
            pass  # a finding is the fuzzer's business, not this check's


def measure(target: str, n: int) -> float:
    """Bytes still allocated per input over ``n`` inputs, after ``n`` others warmed up."""
    warm, measured = inputs(target, n), inputs(target, n)
    run(target, warm)  # caches, lazily built tables, interned strings
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    run(target, measured)
    gc.collect()
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    return (after - before) / n


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("targets", nargs="+", choices=sorted(fuzz_targets.TARGETS))
    ap.add_argument("--no-fix", action="store_true")
    ap.add_argument("--inputs", type=int, default=400)
    a = ap.parse_args(argv)
    fix = atheris_main.CmpRefFix()
    extra = fix.extra_refs()
    atheris_main.instrument_kvsim()
    if not a.no_fix:
        fix.ensure()
    for t in a.targets:
        print(json.dumps({"target": t, "fixed": not a.no_fix, "hook_extra_refs": extra,
                          "hook_wrapped": fix.wrapped, "inputs": a.inputs,
                          "bytes_per_input": measure(t, a.inputs)}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
