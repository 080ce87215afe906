"""The speed a user sees: whole-process ``kvsim simulate`` on the shipped presets.

    kvsim bench [--scale S] [--repeat R] [--no-callgrind] [--out FILE] [--workdir DIR]
    kvsim bench --moonshot [--moonshot-records N] [--functional]
    python -m bench presets ...   (the same)

For four traces it makes itself (deterministic, under ``--workdir``; 10-16 M records each at
``--scale 1``): random 8-byte loads over 1 GiB; c_ref ``iterate``; c_ref ``pipeline
--variant lookahead`` (software prefetches); and random reads and writes written as
DineroIV text and converted with ``kvsim convert``. Per trace it measures, in records per
second of wall time (best of ``--repeat``):

* **whole process**, per preset, functional and timed: ``kvsim simulate TRACE --cpu P
  [--functional] --json`` in a fresh process, start-up, reading, decoding and printing
  included, as a user runs it;
* **one pass, all presets**: ``kvsim simulate TRACE --cpu P1 ... --cpu P6``, the trace's
  records times the presets per second;
* **beside pycachesim**: the 3-level LRU hierarchy of :mod:`bench.sim` (pycachesim
  models no TLB, prefetcher or inclusion), ``kvsim simulate --functional`` against a process
  that reads the same trace chunk by chunk (``traces.open``) and runs pycachesim's batched
  ``load(list, length=8)`` on its loads and stores;
* **engine only**: the compiled engine on the records already in memory, in this process,
  with the threads ``kvsim simulate`` gives one CPU (one per core, at most 2);
* **instructions per record** (callgrind, deterministic where timings are not): the engine
  alone (``sim/_engine/build/bench_engine`` with ``KVSIM_CONFIG``, the preset's engine
  configuration) on the first ``--callgrind-records`` records, the setup subtracted;

and, once: **start-up** (a bare interpreter, and ``kvsim simulate`` of a 1000-record trace:
the part of every whole-process figure that does not depend on the records), and **peak
memory**: the peak RSS of ``kvsim simulate`` (timed, first preset) on a pipeline trace and on
one 10 times longer, which must stay close (memory does not grow with the trace).

Every figure, with each trace's parameters and the 1-minute load average beside each trace's
runs, goes to ``--out`` (default ``results/sim-bench-presets.json`` in a checkout) through
:func:`kvsim.provenance.write_result`; :func:`render_table` turns it into docs/performance.md's
table, :func:`render_user_table` into docs/performance.md's first one.

``--moonshot`` measures instead every preset in one pass (one whole process) over a c_ref
pipeline trace of about ``--moonshot-records`` records (default 10^9) and writes the wall
time, its linear scaling to 10^9 records and the goal (300 s) to
``results/sim-bench-moonshot.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench import _callgrind, _pycachesim
from bench import sim as engine_bench
from kvsim import artifacts, provenance, sim, traces
from kvsim.sim import _binding as B

RESULT_NAME = "sim-bench-presets.json"
SEED = 12345
CHUNK = 1 << 16


class BenchError(Exception):
    """Bad input or a failed step: a one-line message naming what and where."""


# --- traces ---------------------------------------------------------------------------------

def _kvsim(*args: str) -> list[str]:
    return [sys.executable, "-m", "kvsim.experiments.cli", *args]


def _run(cmd: list[str], what: str) -> None:
    res = subprocess.run(cmd, capture_output=True, timeout=3600)
    if res.returncode != 0:
        msg = (res.stderr.decode(errors="replace").strip().splitlines() or ["failed"])[-1]
        raise BenchError(f"{what}: {msg}")


#: Trace sizes at ``--scale 1``: each trace holds 10-16 M records, so the start-up of a
#: process (reported apart, ``startup``) is a small part of a whole-process run.
RANDOM_LOADS = 16_000_000
ITERATE_KEYS = 3_000_000
PIPELINE_OPS = 300_000
DINERO_LINES = 10_000_000
#: The peak-memory pair: a pipeline trace of this many operations and one 10 times longer
#: (both past the record rules' dep window, traces.DEP_CHECK_WINDOW, at scale 1).
MEMORY_OPS = 50_000
# The c_ref traces start cold (--warm-setup none): the benchmark times the simulator on the
# records of the measured phase, as its committed figures were taken.
PIPELINE_ARGS = ["pipeline", "--variant", "lookahead", "--keys", "200000", "--warm-setup", "none"]
ITERATE_ARGS = ["iterate", "--warm-setup", "none", "--keys"]


def _pipeline(workdir: Path, ops: int) -> dict[str, Any]:
    p = workdir / f"pipeline-la-{ops}.kvt"
    args = [*PIPELINE_ARGS, "--ops", str(ops)]
    if not p.exists():
        _run(_kvsim("trace", *args, "-o", str(p)), "c_ref pipeline")
    return {"name": "c_ref pipeline lookahead", "path": p,
            "source": {"kind": "c_ref", "args": args}}


def _dinero(path: Path, lines: int) -> None:
    """``lines`` random reads (70 %) and writes of 8 bytes as DineroIV text (written in
    batches, so memory does not grow with ``lines``)."""
    rng = np.random.default_rng(SEED)
    with open(path, "w") as f:
        for lo in range(0, lines, 1 << 20):
            n = min(1 << 20, lines - lo)
            addr = rng.integers(0, 1 << 28, n, dtype=np.uint64) & ~np.uint64(7)
            label = np.where(rng.random(n) < 0.3, "w", "r")
            f.write("".join(f"{lb} {a:x} 8\n" for lb, a in zip(label, addr.tolist(),
                                                                 strict=True)))


def make_traces(workdir: Path, scale: float) -> list[dict[str, Any]]:
    """The four traces, then the memory pair (made once per parameter set; reused when
    present)."""
    workdir.mkdir(parents=True, exist_ok=True)
    n_rand = max(1000, int(RANDOM_LOADS * scale))
    it_keys = max(1000, int(ITERATE_KEYS * scale))
    pl_ops = max(100, int(PIPELINE_OPS * scale))
    din_lines = max(1000, int(DINERO_LINES * scale))
    mem_ops = max(100, int(MEMORY_OPS * scale))
    out = []

    p = workdir / f"random-{n_rand}.kvt"
    if not p.exists():
        recs = engine_bench.random_loads(n_rand, SEED)
        with traces.Writer(p, {"workload": {"name": "random_loads", "records": n_rand,
                                            "seed": SEED, "span_bytes": 1 << 30}}) as w:
            w.write(recs)
        del recs
    out.append({"name": "random 8 B loads over 1 GiB", "path": p,
                "source": {"kind": "random_loads", "records": n_rand, "seed": SEED}})

    p = workdir / f"iterate-{it_keys}.kvt"
    if not p.exists():
        _run(_kvsim("trace", *ITERATE_ARGS, str(it_keys), "-o", str(p)), "c_ref iterate")
    out.append({"name": "c_ref iterate", "path": p,
                "source": {"kind": "c_ref", "args": [*ITERATE_ARGS, str(it_keys)]}})

    out.append(_pipeline(workdir, pl_ops))

    p = workdir / f"dinero-{din_lines}.kvt"
    if not p.exists():
        din = workdir / f"dinero-{din_lines}.din"
        _dinero(din, din_lines)
        _run(_kvsim("convert", str(din), str(p)), "kvsim convert")
        din.unlink()
    out.append({"name": "DineroIV text, converted", "path": p,
                "source": {"kind": "dinero", "lines": din_lines, "seed": SEED,
                           "reads": 0.7, "span_bytes": 1 << 28}})
    mem = [_pipeline(workdir, mem_ops), _pipeline(workdir, 10 * mem_ops)]
    for t in [*out, *mem]:
        t["records"] = trace_records(t["path"])
    return [*out, *mem]


def trace_records(path: Path) -> int:
    """A trace's record count, from its chunk headers (no payload decoded)."""
    from kvsim.experiments import progress

    n = progress.trace_total_records(str(path))
    if n is None:
        with traces.open(path) as tr:
            n = sum(len(c) for c in tr)
    return int(n)


# --- measurements ---------------------------------------------------------------------------

def measured_env() -> dict[str, str]:
    """The environment of a measured process: this one's, with Python's bytecode cache on.
    A PYTHONDONTWRITEBYTECODE set where the benchmark runs would make every measured
    process compile kvsim's modules from source again (tens of milliseconds of start-up),
    which an installed kvsim never does (pip compiles them at install); the first run of
    each measurement writes the cache, and the best of ``repeat`` runs is kept."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def run_measured(cmd: list[str], env: dict[str, str] | None = None
                 ) -> tuple[float, Any, str]:
    """(wall seconds, resource usage as ``os.wait4`` gives it, stderr) of one process
    running ``cmd`` in :func:`measured_env` with ``env`` added; a failing process raises
    :class:`BenchError` with its command and its last line on stderr."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            env=measured_env() | (env or {}))
    _, status, ru = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    if proc.returncode != 0:
        lines = [ln for ln in err.strip().splitlines() if not ln.startswith(HWM_TAG)]
        raise BenchError(f"{' '.join(cmd[3:])}: {(lines or ['failed'])[-1]}")
    return wall, ru, err


def whole_process(cmd: list[str]) -> tuple[float, int]:
    """(wall seconds, peak RSS in KiB) of one process running ``cmd`` in
    :func:`measured_env`. The peak RSS is the process's own high-water mark when it reports
    one (:func:`_kvsim_hwm` commands print it), else its ``ru_maxrss``, which on Linux also
    counts this process's RSS when it started the child."""
    wall, ru, err = run_measured(cmd)
    hwm = [ln.split()[1] for ln in err.splitlines() if ln.startswith(HWM_TAG)]
    return wall, int(hwm[-1]) if hwm else int(ru.ru_maxrss)


HWM_TAG = "kvsim-bench-vmhwm-kib"
#: Runs the kvsim CLI and, at exit, prints its own peak RSS (VmHWM of /proc/self/status:
#: the high-water mark of this process's memory since its exec, nothing inherited).
HWM_SCRIPT = f"""
import atexit, runpy, sys
def hwm():
    try:
        for line in open("/proc/self/status"):
            if line.startswith("VmHWM:"):
                sys.stderr.write("\\n{HWM_TAG} " + line.split()[1] + "\\n")
    except OSError:
        pass
atexit.register(hwm)
sys.argv = ["kvsim", *sys.argv[1:]]
runpy.run_module("kvsim.experiments.cli", run_name="__main__")
"""


def _kvsim_hwm(*args: str) -> list[str]:
    """:func:`_kvsim`'s command, reporting its peak RSS for :func:`whole_process`."""
    return [sys.executable, "-c", HWM_SCRIPT, *args]


def best_rate(cmd: list[str], records: int, repeat: int) -> tuple[float, int]:
    """(best M records/s over ``repeat`` runs, peak RSS KiB of the fastest)."""
    best = (float("inf"), 0)
    for _ in range(repeat):
        best = min(best, whole_process(cmd))
    return round(records / best[0] / 1e6, 3), best[1]


#: pycachesim on a trace in a process of its own, through bench.sim's hierarchy:
#: ``python -c SCRIPT TRACE``, SCRIPT this with the checkout (where bench/ is) and the
#: hierarchy's geometry (bench._pycachesim.levels) filled in (:func:`pycachesim_command`).
PYCACHESIM_SCRIPT = """
import sys
sys.path.insert(0, {root!r})
from bench import _pycachesim
_pycachesim.run_trace({geometry!r}, sys.argv[1])
"""


def pycachesim_command(path: str) -> list[str]:
    """The process that runs :data:`PYCACHESIM_SCRIPT` on the trace at ``path``."""
    script = PYCACHESIM_SCRIPT.format(
        root=str(Path(__file__).resolve().parents[1]),
        geometry=_pycachesim.levels(sim.parse_cpu(engine_bench.HIER)))
    return [sys.executable, "-c", script, path]


def hier_toml() -> str:
    """bench.sim's hierarchy as a CPU file."""
    h = engine_bench.HIER
    lines = [f'name = "{h["name"]}"', f'freq_ghz = {h["freq_ghz"]}', "", "[core]"]
    lines += [f"{k} = {v}" for k, v in h["core"].items()]
    for c in h["cache"]:
        lines += ["", "[[cache]]"]
        lines += [f'{k} = {json.dumps(v)}' for k, v in c.items()]
    lines += ["", "[dram]"] + [f"{k} = {v}" for k, v in h["dram"].items()]
    return "\n".join(lines) + "\n"


def engine_only(recs: np.ndarray, cpu: sim.CpuConfig, timing: bool, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        cfg = cpu.to_engine(timing=timing, tlb=True, prefetchers=True, flush=True)
        cfg.threads = min(2, os.cpu_count() or 1)  # as `kvsim simulate` with one --cpu
        eng = B.Engine(cfg)
        t0 = time.perf_counter()
        for i in range(0, len(recs), CHUNK):
            eng.run(recs[i:i + CHUNK])
        eng.finish()
        best = min(best, time.perf_counter() - t0)
        eng.close()
    return round(len(recs) / best / 1e6, 3)


def bench_engine_path() -> Path | None:
    root = artifacts.source_root()
    p = root / "sim" / "_engine" / "build" / "bench_engine" if root else None
    return p if p is not None and p.exists() and shutil.which("valgrind") else None


def parse_callgrind_args(suite: str, name: str, doc: str, argv: list[str] | None,
                         option: tuple[str, str]) -> tuple[argparse.Namespace, Path | None]:
    """The command line of the callgrind suite ``suite`` (bench/engine_presets.py,
    profile.py: its own ``option``, a string and its help, then the options they share), and
    :func:`bench_engine_or_say` as ``name``."""
    ap = argparse.ArgumentParser(prog=f"python -m bench {suite}",
                                 description=doc.splitlines()[0])
    ap.add_argument(option[0], help=option[1])
    ap.add_argument("--records", type=int, default=100_000, help="records per trace")
    ap.add_argument("--scale", type=float, default=0.1, help="kvsim bench's trace scale")
    ap.add_argument("--workdir", default="build/bench-presets", help="where the traces are")
    ap.add_argument("--out", help="result file")
    a = ap.parse_args(argv)
    return a, bench_engine_or_say(name)


def bench_engine_or_say(prog: str) -> Path | None:
    """:func:`bench_engine_path`, or None after saying on stderr how to build it."""
    binary = bench_engine_path()
    if binary is None:
        print(f"{prog}: no sim/_engine/build/bench_engine or valgrind "
              "(make -C sim/_engine bench-c)", file=sys.stderr)
    return binary


def callgrind_traces(prog: str, a: argparse.Namespace, min_records: int,
                     pick: slice) -> list[dict[str, Any]] | None:
    """The traces a callgrind suite counts (:func:`make_traces` at ``--scale`` in
    ``--workdir``, the slice ``pick`` of them) once ``--records`` is checked to be above
    ``min_records``; None after saying on stderr, as ``prog``, what is wrong."""
    if a.records <= min_records:
        print(f"{prog}: --records {a.records}: must be > {min_records}", file=sys.stderr)
        return None
    try:
        return make_traces(Path(a.workdir), a.scale)[pick]
    except (BenchError, _callgrind.CallgrindError) as e:
        print(f"{prog}: {e}", file=sys.stderr)
        return None


def instructions(binary: Path, recs: np.ndarray, cpu: sim.CpuConfig, tmp: Path,
                 threads: int = 1, refs=None) -> dict:
    """Engine instructions per record (setup subtracted), functional and timed, with the
    engine's ``threads``; ``refs(binary, cfg_file, raw)`` counts a run (default: every
    thread's instructions, :func:`bench._callgrind.total`). A ``refs`` that returns one count
    per thread gives one unrounded figure per thread."""
    refs = refs or _callgrind.total
    raw, setup = tmp / "recs.raw", tmp / "setup.raw"
    recs.tofile(raw)
    recs[:10].tofile(setup)
    out = {}
    for timing in (False, True):
        cfg = cpu.to_engine(timing=timing, tlb=True, prefetchers=True, flush=True)
        if threads > 1:
            cfg.threads = threads
        cf = tmp / "cfg.bin"
        cf.write_bytes(bytes(cfg))
        full, base = refs(binary, cf, raw), refs(binary, cf, setup)
        n = len(recs) - 10
        out["timed" if timing else "functional"] = (
            round((full - base) / n, 1) if isinstance(full, int)
            else [(f - b) / n for f, b in zip(full, base, strict=True)])
    return out


def measure_trace(t: dict, presets: list[str], repeat: int, cg_records: int,
                  cg_binary: Path | None, tmp: Path, echo) -> dict[str, Any]:
    path, n = str(t["path"]), t["records"]
    row: dict[str, Any] = {"name": t["name"], "file": Path(path).name, "records": n,
                           "source": t["source"], "load_average_1m_before": os.getloadavg()[0]}
    recs = traces.read_all(path)
    cg_recs = recs[:cg_records]
    per = []
    for p in presets:
        cpu = sim.load_cpu(p)
        entry: dict[str, Any] = {"preset": p}
        for mode, extra in (("functional", ["--functional"]), ("timed", [])):
            entry[f"{mode}_mrec_s"], _ = best_rate(
                _kvsim("simulate", path, "--cpu", p, "--json", *extra), n, repeat)
            entry[f"{mode}_engine_mrec_s"] = engine_only(recs, cpu, mode == "timed", repeat)
        if cg_binary is not None and len(cg_recs) > 10:
            ins = instructions(cg_binary, cg_recs, cpu, tmp)
            entry["functional_instructions"] = ins["functional"]
            entry["timed_instructions"] = ins["timed"]
        echo(f"{t['name']:28s} {p:12s} functional {entry['functional_mrec_s']:7.2f} "
             f"(engine {entry['functional_engine_mrec_s']:7.2f}) timed "
             f"{entry['timed_mrec_s']:7.2f} (engine {entry['timed_engine_mrec_s']:7.2f}) "
             f"M rec/s; instr/rec {entry.get('functional_instructions', '-')} / "
             f"{entry.get('timed_instructions', '-')}")
        per.append(entry)
    row["presets"] = per
    many = ["--cpu"] * (2 * len(presets))
    many[1::2] = presets
    for mode, extra in (("functional", ["--functional"]), ("timed", [])):
        rate, _ = best_rate(_kvsim("simulate", path, *many, "--json", *extra),
                            n * len(presets), repeat)
        row[f"all_presets_one_pass_{mode}_mrec_s"] = rate
    echo(f"{t['name']:28s} one pass, {len(presets)} presets: functional "
         f"{row['all_presets_one_pass_functional_mrec_s']:.2f}, timed "
         f"{row['all_presets_one_pass_timed_mrec_s']:.2f} M rec/s (records x presets)")
    hier = tmp / "lru3.toml"
    hier.write_text(hier_toml())
    row["lru3_functional_mrec_s"], _ = best_rate(
        _kvsim("simulate", path, "--cpu", str(hier), "--json", "--functional"), n, repeat)
    row["pycachesim_records"] = int(np.count_nonzero(recs["kind"] <= 1))
    row["pycachesim_mrec_s"] = None
    if engine_bench.pycachesim_version() is not None:
        row["pycachesim_mrec_s"], _ = best_rate(pycachesim_command(path), n, repeat)
    pyc = row["pycachesim_mrec_s"]
    row["lru3_over_pycachesim"] = round(row["lru3_functional_mrec_s"] / pyc, 2) if pyc else None
    echo(f"{t['name']:28s} 3-level LRU, functional: kvsim {row['lru3_functional_mrec_s']:.2f}, "
         f"pycachesim {pyc if pyc else '-'} M rec/s (whole process)")
    row["load_average_1m_after"] = os.getloadavg()[0]
    return row


def startup(preset: str, workdir: Path, repeat: int) -> dict[str, Any]:
    """Start-up, apart from the records: the best wall seconds of a bare interpreter
    (``python -c pass``) and of ``kvsim simulate`` on a 1000-record trace (the interpreter,
    numpy, the CLI and kvsim's imports, the engine's creation, the JSON printed)."""
    tiny = workdir / "tiny-1000.kvt"
    if not tiny.exists():
        with traces.Writer(tiny, {"workload": {"name": "random_loads", "records": 1000,
                                               "seed": SEED}}) as w:
            w.write(engine_bench.random_loads(1000, SEED))
    bare = min(whole_process([sys.executable, "-c", "pass"])[0] for _ in range(repeat))
    sim_s = min(whole_process(_kvsim("simulate", str(tiny), "--cpu", preset, "--json"))[0]
                for _ in range(max(repeat, 3)))
    return {"python_s": round(bare, 4), "simulate_1000_records_s": round(sim_s, 4),
            "preset": preset}


def run(workdir: Path, scale: float, repeat: int, cg_records: int, callgrind: bool,
        presets: list[str] | None = None, echo=print) -> dict[str, Any]:
    if scale <= 0:
        raise BenchError(f"--scale {scale}: must be > 0")
    if repeat < 1:
        raise BenchError(f"--repeat {repeat}: must be >= 1")
    presets = presets or sim.preset_names()
    cg_binary = bench_engine_path() if callgrind else None
    if callgrind and cg_binary is None:
        echo("# no sim/_engine/build/bench_engine or valgrind: instruction counts skipped "
             "(make -C sim/_engine bench-c)")
    all_traces = make_traces(workdir, scale)
    short, mem_pair = all_traces[:-2], all_traces[-2:]
    up = startup(presets[0], workdir, repeat)
    echo(f"start-up: python {up['python_s']:.3f} s; kvsim simulate of 1000 records on "
         f"{presets[0]} {up['simulate_1000_records_s']:.3f} s (in every whole-process figure)")
    rows = []
    with tempfile.TemporaryDirectory() as td:
        for t in short:
            rows.append(measure_trace(t, presets, repeat, cg_records, cg_binary, Path(td), echo))
    mem = {}
    for key, t in zip(("trace", "trace_x10"), mem_pair, strict=True):
        _, rss = whole_process(_kvsim_hwm("simulate", str(t["path"]), "--cpu", presets[0],
                                          "--json"))
        mem[key] = {"file": Path(t["path"]).name, "records": t["records"], "peak_rss_kib": rss}
    mem["ratio"] = round(mem["trace_x10"]["peak_rss_kib"] / mem["trace"]["peak_rss_kib"], 3)
    echo(f"peak RSS, kvsim simulate --cpu {presets[0]}: {mem['trace']['records']:,} records "
         f"{mem['trace']['peak_rss_kib']} KiB, {mem['trace_x10']['records']:,} records "
         f"{mem['trace_x10']['peak_rss_kib']} KiB (x{mem['ratio']})")
    return {
        "benchmark": "kvsim.sim.bench_presets",
        "units": "M records/s of wall time, whole process unless named engine; best of "
                 "`repeat`; instructions per record from callgrind (engine only); "
                 "start-up in seconds",
        "parameters": {"scale": scale, "repeat": repeat, "presets": presets,
                       "callgrind_records": cg_records if cg_binary else None,
                       "lru3_hierarchy": engine_bench.HIER,
                       "pycachesim": engine_bench.pycachesim_version(),
                       "decode_threads": os.cpu_count(),
                       "local": local_description() if "local" in presets else None},
        "startup": up,
        "traces": rows,
        "memory": {"preset": presets[0], "mode": "timed", **mem},
    }


# --- the moonshot: 10^9 records on every preset in one pass ----------------------------------

MOONSHOT_NAME = "sim-bench-moonshot.json"
MOONSHOT_GOAL = {"records": 10**9, "seconds": 300}


def moonshot(workdir: Path, records: int, presets: list[str] | None = None,
             functional: bool = False, echo=print) -> dict[str, Any]:
    """``kvsim simulate TRACE --cpu P1 ... --cpu P6 --json`` (every preset in one pass) on
    a c_ref pipeline-lookahead trace of about ``records`` records, whole process, once; the
    wall time scaled to 10^9 records (linear: the run's memory does not grow with the
    trace) beside the goal of 300 s."""
    if records < 10_000:
        raise BenchError(f"--moonshot-records {records}: must be >= 10000")
    presets = presets or sim.preset_names()
    workdir.mkdir(parents=True, exist_ok=True)
    probe = _pipeline(workdir, 2000)
    per_op = trace_records(probe["path"]) / 2000
    t = _pipeline(workdir, max(100, round(records / per_op)))
    n = trace_records(t["path"])
    many = ["--cpu"] * (2 * len(presets))
    many[1::2] = presets
    load_before = os.getloadavg()[0]
    wall, rss = whole_process(_kvsim_hwm("simulate", str(t["path"]), *many, "--json",
                                         *(["--functional"] if functional else [])))
    rate = n * len(presets) / wall / 1e6
    scaled = wall * MOONSHOT_GOAL["records"] / n
    measured = n >= MOONSHOT_GOAL["records"]  # the goal's size itself: nothing extrapolated
    how = "measured" if measured else "by linear scaling"
    echo(f"moonshot: {n:,} records x {len(presets)} presets "
         f"({'functional' if functional else 'timed'}) in {wall:.1f} s "
         f"({rate:.2f} M records x presets /s), peak RSS {rss} KiB; 10^9 records: "
         f"{scaled:.0f} s {how} (goal {MOONSHOT_GOAL['seconds']} s)")
    return {
        "benchmark": "kvsim.sim.bench_presets --moonshot",
        "units": "seconds of wall time, whole process; M records x presets per second",
        "parameters": {"records_asked": records, "presets": presets,
                       "mode": "functional" if functional else "timed"},
        "trace": {"file": Path(t["path"]).name, "records": n, "source": t["source"]},
        "load_average_1m_before": load_before,
        "load_average_1m_after": os.getloadavg()[0],
        "wall_s": round(wall, 4),
        "records_x_presets_mrec_s": round(rate, 3),
        "peak_rss_kib": rss,
        "goal": MOONSHOT_GOAL,
        "extrapolated_10e9_s": round(scaled, 1),
        "extrapolation": ("none: the trace has at least 10^9 records, the time is measured"
                          if measured else
                          "wall time x 10^9 / records: one pass is linear in the records and "
                          "its memory does not grow with the trace; not measured at 10^9"),
        "goal_met_by_extrapolation": scaled <= MOONSHOT_GOAL["seconds"],
        "measured_at_goal_size": measured,
        "goal_met": measured and wall <= MOONSHOT_GOAL["seconds"],
    }


def local_description() -> str:
    """What ``local`` is where the benchmark runs: a calibrated file, or sysfs geometry
    with the table's figures (sim/local.py); its figures depend on which."""
    return sim.load_cpu("local").description


def _local_note(doc: dict[str, Any]) -> str | None:
    desc = doc["parameters"].get("local")
    return f"`local` is {desc}" if desc else None


def render_table(doc: dict[str, Any]) -> str:
    """docs/performance.md's table of whole-process speeds, from a result file."""
    lines = ["| trace | records | preset | functional | timed | engine only (f / t) | "
             "instructions per record (f / t) |", "|---|---|---|---|---|---|---|"]
    for t in doc["traces"]:
        for e in t["presets"]:
            ins = (f"{e['functional_instructions']:.0f} / {e['timed_instructions']:.0f}"
                   if "functional_instructions" in e else "-")
            lines.append(f"| {t['name']} | {t['records']:,} | {e['preset']} | "
                         f"{e['functional_mrec_s']:.2f} | {e['timed_mrec_s']:.2f} | "
                         f"{e['functional_engine_mrec_s']:.2f} / "
                         f"{e['timed_engine_mrec_s']:.2f} | {ins} |")
    lines += ["", "| trace | all presets in one pass (f / t) | 3-level LRU, kvsim functional "
              "| pycachesim | kvsim / pycachesim |", "|---|---|---|---|---|"]
    for t in doc["traces"]:
        pyc = t["pycachesim_mrec_s"]
        ratio = t["lru3_over_pycachesim"]
        lines.append(f"| {t['name']} | {t['all_presets_one_pass_functional_mrec_s']:.2f} / "
                     f"{t['all_presets_one_pass_timed_mrec_s']:.2f} | "
                     f"{t['lru3_functional_mrec_s']:.2f} | "
                     f"{'-' if pyc is None else f'{pyc:.2f}'} | "
                     f"{'-' if ratio is None else f'{ratio:.2f}x'} |")
    up = doc.get("startup")
    if up:
        lines += ["", f"Start-up, in every whole-process figure: `kvsim simulate` of 1,000 "
                  f"records on {up['preset']} takes {up['simulate_1000_records_s']:.3f} s "
                  f"(a bare `python -c pass`: {up['python_s']:.3f} s)."]
    m = doc["memory"]
    lines += ["", f"Peak RSS of `kvsim simulate --cpu {m['preset']}` ({m['mode']}): "
              f"{m['trace']['records']:,} records {m['trace']['peak_rss_kib']:,} KiB, "
              f"{m['trace_x10']['records']:,} records {m['trace_x10']['peak_rss_kib']:,} KiB "
              f"(ratio {m['ratio']:.3f})."]
    local = _local_note(doc)
    if local:
        lines += ["", local + "."]
    return "\n".join(lines) + "\n"


def render_user_table(doc: dict[str, Any]) -> str:
    """docs/performance.md's speed table: whole-process M records/s per preset (rows) and trace
    (columns: functional / timed), then all presets in one pass, kvsim against pycachesim,
    start-up and peak memory, with the machine's load."""
    ts = doc["traces"]
    presets = [e["preset"] for e in ts[0]["presets"]]
    head = "| preset | " + " | ".join(f"{t['name']} ({t['records'] / 1e6:.1f} M)"
                                      for t in ts) + " |"
    lines = [head, "|---|" + "---|" * len(ts)]
    for i, p in enumerate(presets):
        cells = [f"{t['presets'][i]['functional_mrec_s']:.1f} / "
                 f"{t['presets'][i]['timed_mrec_s']:.1f}" for t in ts]
        lines.append(f"| {p} | " + " | ".join(cells) + " |")
    lines.append(f"| all {len(presets)} in one pass (records x presets) | " + " | ".join(
        f"{t['all_presets_one_pass_functional_mrec_s']:.1f} / "
        f"{t['all_presets_one_pass_timed_mrec_s']:.1f}" for t in ts) + " |")
    pyc = [f"{t['lru3_over_pycachesim']:.1f}x" if t.get("lru3_over_pycachesim") else "-"
           for t in ts]
    lines.append("| 3-level LRU, kvsim functional over pycachesim | " + " | ".join(pyc) + " |")
    loads = [t.get("load_average_1m_before") for t in ts]
    loads = [x for x in loads if x is not None]
    notes = []
    up = doc.get("startup")
    if up:
        notes.append(f"start-up (in every figure): {up['simulate_1000_records_s']:.2f} s for "
                     f"1,000 records")
    m = doc["memory"]
    notes.append(f"peak RSS {m['trace']['peak_rss_kib'] / 1024:.0f} MiB at "
                 f"{m['trace']['records'] / 1e6:.1f} M records, "
                 f"{m['trace_x10']['peak_rss_kib'] / 1024:.0f} MiB at "
                 f"{m['trace_x10']['records'] / 1e6:.1f} M (x{m['ratio']:.2f})")
    if loads:
        notes.append(f"1-minute load average {min(loads):.1f}-{max(loads):.1f} on "
                     f"{doc['parameters']['decode_threads']} cores")
    local = _local_note(doc)
    if local:
        notes.append(local)
    return "\n".join(lines) + "\n\nM records/s, functional / timed; " + "; ".join(notes) + ".\n"


def main(argv: list[str] | None = None, prog: str = "python -m bench presets") -> int:
    ap = argparse.ArgumentParser(prog=prog, description=__doc__.splitlines()[0])
    ap.add_argument("--scale", type=float, default=1.0,
                    help="trace sizes relative to the defaults (16 M random loads, iterate of "
                         "3 M keys, pipeline of 300 k ops, 10 M DineroIV lines)")
    ap.add_argument("--repeat", type=int, default=2, help="runs of each measurement (best)")
    ap.add_argument("--callgrind-records", type=int, default=200_000,
                    help="records of each trace counted under callgrind (default 200000)")
    ap.add_argument("--no-callgrind", action="store_true", help="skip instruction counts")
    ap.add_argument("--preset", action="append", default=None,
                    help="a preset to measure (repeatable; default every preset)")
    ap.add_argument("--workdir", default="build/bench-presets",
                    help="where the traces are made and kept (default build/bench-presets)")
    ap.add_argument("--moonshot", action="store_true",
                    help=f"instead: every preset in one pass over a c_ref trace of "
                         f"--moonshot-records records, scaled to 10^9 (writes "
                         f"results/{MOONSHOT_NAME})")
    ap.add_argument("--moonshot-records", type=float, default=1e9,
                    help="the moonshot trace's records (default 1e9; about 24 bytes each "
                         "before compression)")
    ap.add_argument("--functional", action="store_true",
                    help="the moonshot without the timing model")
    ap.add_argument("--out", default=None,
                    help=f"result file (default results/{RESULT_NAME} in a checkout, or "
                         f"results/{MOONSHOT_NAME} with --moonshot)")
    a = ap.parse_args(argv)
    name = MOONSHOT_NAME if a.moonshot else RESULT_NAME
    out = provenance.out_path(a.out, name)
    try:
        for p in a.preset or []:
            if p not in sim.preset_names():
                raise BenchError(f"--preset {p}: not a preset ({', '.join(sim.preset_names())})")
        if a.moonshot:
            payload = moonshot(Path(a.workdir), int(a.moonshot_records), a.preset,
                               a.functional)
        else:
            payload = run(Path(a.workdir), a.scale, a.repeat, a.callgrind_records,
                          not a.no_callgrind, a.preset)
    except (BenchError, _callgrind.CallgrindError) as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 2
    return provenance.publish(prog, out, payload)


if __name__ == "__main__":
    sys.exit(main())
