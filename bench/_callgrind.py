"""The benchmarks' one way to run callgrind: ``bench_engine`` (sim/_engine/tests/bench_engine.c,
``make -C sim/_engine bench-c``) on a raw record file, with an engine configuration file.
Instruction counts are deterministic where timings are not, so they are the figures that
compare across commits on a shared machine."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from kvsim.experiments import callgrind


class CallgrindError(RuntimeError):
    """callgrind ran but reported no count; the message names the binary and the input."""


def run(binary: Path, raw: Path, cfg_file: Path, *options: str,
        check: bool = False) -> subprocess.CompletedProcess[bytes]:
    """``valgrind --tool=callgrind OPTIONS binary raw`` with ``KVSIM_CONFIG=cfg_file``."""
    env = dict(os.environ, KVSIM_CONFIG=str(cfg_file))
    return subprocess.run(["valgrind", "--tool=callgrind", *options, str(binary), str(raw)],
                          capture_output=True, env=env, timeout=3600, check=check)


def total(binary: Path, cfg_file: Path, raw: Path) -> int:
    """Instructions of a whole run, every thread's ("I refs" of callgrind's summary)."""
    res = run(binary, raw, cfg_file, "--callgrind-out-file=/dev/null")
    for line in res.stderr.decode(errors="replace").splitlines():
        if "I   refs:" in line or "I refs:" in line:
            return int(line.split(":")[-1].replace(",", ""))
    raise CallgrindError(f"callgrind of {binary.name} on {raw.name}: no instruction count")


def per_thread(binary: Path, cfg_file: Path, raw: Path, tmp: Path) -> list[int]:
    """Instructions of each thread of one run, in thread order (the calling thread first)."""
    for old in tmp.glob("cg*"):
        old.unlink()
    run(binary, raw, cfg_file, "--separate-threads=yes", f"--callgrind-out-file={tmp / 'cg'}")
    refs = []
    for f in sorted(tmp.glob("cg-*")):
        try:
            refs.append(callgrind.read(f).totals["Ir"])
        except (callgrind.CallgrindFormatError, KeyError) as exc:
            raise CallgrindError(f"callgrind of {binary.name} on {raw.name}: {exc}") from None
    if not refs:
        raise CallgrindError(f"callgrind of {binary.name} on {raw.name}: no thread counts")
    return refs


def by_function(binary: Path, cfg_file: Path, raw: Path, out: Path) -> Path:
    """One run's profile (no per-instruction data) written to ``out``, for
    :func:`kvsim.experiments.callgrind.read`."""
    run(binary, raw, cfg_file, "--dump-instr=no", f"--callgrind-out-file={out}", check=True)
    return out
