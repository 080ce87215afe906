"""Whole-process A B A B of ``kvsim simulate`` between two engine builds or two option sets.

    .venv/bin/python sim/_engine/bench/ab.py [--base REV | --base-tree REV | --a-lib LIB]
        [--b-lib LIB]
        [--a-args ARGS] [--b-args ARGS] [--a-codec CODEC] [--b-codec CODEC]
        [--traces NAME,...] [--presets CPU,...]
        [--modes functional,timed] [--rounds N] [--scale S] [--workdir DIR]
        [--out RESULT.json]

Side A runs ``kvsim simulate TRACE --cpu PRESET --json [--functional] A_ARGS`` with engine
library A (``KVSIM_ENGINE_LIB``), side B the same with B_ARGS and library B (default: this
tree's build). Rounds alternate the order (A B, then B A, ...), each run a fresh process in
the environment of ``kvsim bench`` (kvsim.sim.bench_presets.measured_env), timed by its wall
time (what a user waits) and by its CPU time (every thread's: ``ru_utime + ru_stime`` of
``wait4``). Per trace, preset and mode it reports each side's median and minimum and the
speedup of B over A, of wall and of CPU time: kvsim.experiments.timing.paired_speedup (the
median of the rounds' ratios A / B, its sign-test and bootstrap 95 % intervals, "within
noise" when the sign-test interval includes 1.0; at least 6 rounds for an interval).

The traces are ``kvsim bench``'s (kvsim.sim.bench_presets.make_traces; ``--traces`` picks
among random, iterate, pipeline, dinero; ``--scale`` as there). ``--base REV`` builds the
engine of git revision REV for side A (``git archive`` of sim/_engine and traces into a
temporary folder, then ``make``); its engine.h layouts must be this tree's (the binding
refuses a library whose kvsimConfigSize or kvsimStatsSize differ). ``--base-tree REV``
makes side A the whole of revision REV, its Python package as well as its engine (for a
change outside the engine): ``git archive`` of the revision, its engine built, and its
folders assembled into a ``kvsim`` package that side A imports instead of this tree's (both
sides start through ``BOOT``, which for side A takes an editable install's import finder
away and puts that package first on the path). Each side runs once,
untimed, before the rounds (bytecode caches, page cache). ``--out`` writes the figures with
kvsim.provenance (commit, machine, date).

``--a-codec`` / ``--b-codec`` (raw, zstd, zstd_planes: traces/FORMAT.md's codecs) give a
side the same records stored with that codec: each trace is rewritten once, chunk for
chunk, into a temporary folder (:func:`recode`). What the trace's storage costs the whole
process then shows against the same engine: ``--b-codec raw`` is a reader with nothing to
decompress.
"""

from __future__ import annotations

import argparse
import shlex
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import kvsim
from bench import presets as bp
from kvsim import provenance, sim, traces
from kvsim.experiments import timing
from kvsim.traces.format import CODEC_NAMES, PLANES_VERSION

TRACES = ("random", "iterate", "pipeline", "dinero")  # make_traces' first four, in order
MODES = ("functional", "timed")
ROOT = Path(__file__).resolve().parents[1]


class AbError(Exception):
    """One line for the user: what failed."""


def build_revision(rev: str, into: Path, whole: bool = False) -> Path:
    """The engine library of git revision ``rev``, built under ``into`` (``whole``: the
    revision's every file is extracted there, not only the engine's)."""
    tar = into / "src.tar"
    with open(tar, "wb") as f:
        paths = [] if whole else ["sim/_engine", "traces"]
        res = subprocess.run(["git", "-C", str(ROOT), "archive", rev, *paths],
                             stdout=f, stderr=subprocess.PIPE)
    if res.returncode != 0:
        why = res.stderr.decode(errors="replace").strip().splitlines() or ["git archive failed"]
        raise AbError(f"--base {rev}: {why[-1]}")
    subprocess.run(["tar", "-x", "-f", str(tar), "-C", str(into)], check=True)
    res = subprocess.run(["make", "-s", "-C", str(into / "sim" / "_engine")],
                         capture_output=True)
    lib = into / "sim" / "_engine" / "build" / "libkvsim_sim.so"
    if res.returncode != 0 or not lib.is_file():
        raise AbError(f"--base {rev}: the engine does not build: "
                      f"{(res.stderr.decode(errors='replace').strip().splitlines() or ['?'])[-1]}")
    return lib


def stage_revision(rev: str, into: Path) -> tuple[Path, dict[str, str]]:
    """Side A of ``--base-tree``: (engine library, environment) of the whole of git revision
    ``rev``, extracted and its engine built under ``into`` (:func:`package_env`)."""
    lib = build_revision(rev, into, whole=True)
    return lib, package_env(into)


def package_env(tree: Path) -> dict[str, str]:
    """The environment in which :data:`BOOT` imports kvsim from the source tree ``tree``:
    its folders assembled (by symbolic links, under ``tree/stage``) into a ``kvsim`` package
    as the wheel maps them (pyproject.toml ``wheel.packages``: kvsim/, then one folder per
    subpackage)."""
    pkg = tree / "stage" / "kvsim"
    pkg.mkdir(parents=True)
    for f in (tree / "kvsim").iterdir():
        (pkg / f.name).symlink_to(f)
    for sub in kvsim.SUBPACKAGES:
        (pkg / sub).symlink_to(tree / sub)
    return {"KVSIM_AB_TREE": str(pkg.parent)}


#: How a side imports kvsim: from KVSIM_AB_TREE when it is set, with an editable install's
#: finder (a meta path finder of an ``_editable_*`` module, which would map kvsim to this
#: checkout) removed first; else as installed.
IMPORT_FROM_TREE = """import os, sys
tree = os.environ.pop("KVSIM_AB_TREE", None)
if tree:
    sys.meta_path[:] = [f for f in sys.meta_path
                        if not type(f).__module__.startswith("_editable_")]
    sys.path.insert(0, tree)
"""
#: How both sides start ``kvsim`` (``python -c BOOT ARGS``), as ``python -m
#: kvsim.experiments.cli`` does once kvsim is imported.
BOOT = IMPORT_FROM_TREE + """from kvsim.experiments.cli import main
sys.exit(main(sys.argv[1:]))
"""


Side = tuple[Path | None, list[str], dict[str, str]]  # engine library, options, environment


def recode(path: Path, codec: str, into: Path) -> Path:
    """``path``'s header and records, chunk for chunk, in a trace of codec ``codec`` (at the
    format version that has it) under ``into``; the file is made once per run."""
    out = into / codec / path.name
    if out.exists():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    with traces.TraceReader(path) as r:
        header = dict(r.header)
        version = max(r.version, PLANES_VERSION) if codec == "zstd_planes" else r.version
        with traces.Writer(out, header, codec=codec, version=version,
                           chunk_records=header["chunk_records"]) as w:
            for chunk in r:
                w.write_chunk(chunk)
    return out


def run_once(cmd: list[str], side: Side) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one process running ``cmd`` as ``side``."""
    lib, _, env = side
    wall, ru, _ = bp.run_measured(cmd, env | ({"KVSIM_ENGINE_LIB": str(lib)} if lib else {}))
    return wall, ru.ru_utime + ru.ru_stime


def measure(paths: list[Path], preset: str, mode: str, sides: list[Side], rounds: int) -> dict:
    """Interleaved rounds of both sides on one trace (``paths``: each side's file of it),
    preset and mode."""
    cmds = [[sys.executable, "-c", BOOT, "simulate", str(path), "--cpu", preset, "--json",
             *(["--functional"] if mode == "functional" else []), *args]
            for path, (_, args, _) in zip(paths, sides, strict=True)]
    for s in (0, 1):  # untimed: bytecode caches, page cache
        run_once(cmds[s], sides[s])
    wall: list[list[float]] = [[], []]
    cpu: list[list[float]] = [[], []]
    for r in range(rounds):
        for s in ((0, 1) if r % 2 == 0 else (1, 0)):
            w, c = run_once(cmds[s], sides[s])
            wall[s].append(w)
            cpu[s].append(c)
    out: dict = {}
    for what, v in (("wall", wall), ("cpu", cpu)):
        for s, name in ((0, "a"), (1, "b")):
            out[f"{name}_{what}_median"] = statistics.median(v[s])
            out[f"{name}_{what}_min"] = min(v[s])
        out[f"{what}_speedup"] = timing.paired_speedup(v[0], v[1])
    return out


def _ci(sp: dict) -> str:
    ci = sp["ci95"]
    return f"[{ci[0]:.3f}, {ci[1]:.3f}]" if ci else "[-]"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench ab", description=__doc__.splitlines()[0])
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--base", help="side A: the engine of this git revision")
    g.add_argument("--base-tree", help="side A: this git revision whole (Python and engine)")
    g.add_argument("--a-lib", help="side A: this engine library (default: this tree's)")
    ap.add_argument("--b-lib", help="side B: this engine library (default: this tree's)")
    ap.add_argument("--a-args", default="", help="side A: more kvsim simulate options")
    ap.add_argument("--b-args", default="", help="side B: more kvsim simulate options")
    for side in ("a", "b"):
        ap.add_argument(f"--{side}-codec", help=f"side {side.upper()}: the traces rewritten "
                        f"with this codec ({', '.join(sorted(CODEC_NAMES.values()))})")
    ap.add_argument("--traces", default=",".join(TRACES), help=f"among {', '.join(TRACES)}")
    ap.add_argument("--presets", default=",".join(sim.preset_names()),
                    help="presets, local or CPU files (sim.load_cpu)")
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--rounds", type=int, default=8, help="rounds (A and B once each)")
    ap.add_argument("--scale", type=float, default=1.0, help="kvsim bench's trace scale")
    ap.add_argument("--workdir", default="build/bench-presets", help="where the traces are")
    ap.add_argument("--out", help="result file")
    a = ap.parse_args(argv)
    names = [t for t in a.traces.split(",") if t]
    modes = [m for m in a.modes.split(",") if m]
    presets = [p for p in a.presets.split(",") if p]
    for what, got, known in (("--traces", names, TRACES), ("--modes", modes, MODES)):
        bad = [x for x in got if x not in known]
        if bad or not got:
            print(f"ab.py: error: {what}: {bad[0] if bad else 'none given'}: not one of "
                  f"{', '.join(known)}", file=sys.stderr)
            return 2
    for p in presets or [""]:
        try:
            sim.load_cpu(p)
        except (sim.ConfigError, OSError, ValueError) as e:
            print(f"ab.py: error: --presets: {p}: {str(e).splitlines()[0] if str(e) else e}",
                  file=sys.stderr)
            return 2
    for side in ("a", "b"):
        codec = getattr(a, f"{side}_codec")
        if codec is not None and codec not in CODEC_NAMES.values():
            print(f"ab.py: error: --{side}-codec {codec}: not one of "
                  f"{', '.join(sorted(CODEC_NAMES.values()))}", file=sys.stderr)
            return 2
    if a.rounds < 1:
        print(f"ab.py: error: --rounds {a.rounds}: must be >= 1", file=sys.stderr)
        return 2
    for opt in ("a_lib", "b_lib"):
        p = getattr(a, opt)
        if p and not Path(p).is_file():
            print(f"ab.py: error: --{opt.replace('_', '-')} {p}: no such file", file=sys.stderr)
            return 2
    rows = []
    try:
        with tempfile.TemporaryDirectory() as td:
            env_a: dict[str, str] = {}
            if a.base_tree:
                lib_a, env_a = stage_revision(a.base_tree, Path(td))
            else:
                lib_a = build_revision(a.base, Path(td)) if a.base else \
                    (Path(a.a_lib) if a.a_lib else None)
            sides: list[Side] = [(lib_a, shlex.split(a.a_args), env_a),
                                 (Path(a.b_lib) if a.b_lib else None, shlex.split(a.b_args), {})]
            found = bp.make_traces(Path(a.workdir), a.scale)[:len(TRACES)]
            paths = dict(zip(TRACES, (t["path"] for t in found), strict=True))
            for name in names:
                files = [recode(paths[name], codec, Path(td)) if codec else paths[name]
                         for codec in (a.a_codec, a.b_codec)]
                for p in presets:
                    for mode in modes:
                        row = {"trace": name, "file": paths[name].name, "preset": p,
                               "mode": mode} | measure(files, p, mode, sides, a.rounds)
                        rows.append(row)
                        w, c = row["wall_speedup"], row["cpu_speedup"]
                        print(f"{name:9s} {p:11s} {mode:10s} wall A {row['a_wall_median']:.3f} "
                              f"B {row['b_wall_median']:.3f} s: A/B {w['median']:.3f} {_ci(w)} "
                              f"{w['verdict']}; cpu A/B {c['median']:.3f} {_ci(c)}", flush=True)
    except (AbError, bp.BenchError, traces.TraceError) as e:
        print(f"ab.py: error: {e}", file=sys.stderr)
        return 1
    if not a.out:
        return 0
    return provenance.publish("ab.py", a.out, {
        "benchmark": "sim/_engine/bench/ab.py",
        "command": provenance.scrub_command(["sim/_engine/bench/ab.py",
                                             *(argv if argv is not None else sys.argv[1:])]),
        "sides": {"a": {"engine": f"git revision {a.base}" if a.base else a.a_lib or "this tree",
                        "args": a.a_args} if not a.base_tree else
                  {"tree": f"git revision {a.base_tree} (Python package and engine)",
                   "args": a.a_args},
                  "b": {"engine": a.b_lib or "this tree", "args": a.b_args}},
        "codecs": {"a": a.a_codec, "b": a.b_codec},
        "rounds": a.rounds,
        "units": "seconds per whole kvsim simulate process (wall; cpu: every thread's); "
                 "*_speedup: A / B per round, median, sign-test 95 % interval (ci95), "
                 "bootstrap 95 % interval",
        "local": bp.local_description(),
        "rows": rows,
    })


if __name__ == "__main__":
    sys.exit(main())
