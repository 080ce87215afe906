"""The fuzz driver: build, run and replay every fuzz target; ``make fuzz`` calls it.

    python fuzz/run.py [--seconds S] [--min-execs N] [--targets a,b] [--result FILE]
    python fuzz/run.py --replay            # every corpus input once, no fuzzing
    python fuzz/run.py --runs N --seed S   # N inputs per target from seed S (make test)
    python fuzz/run.py --render results/fuzz.json   # a result file as a Markdown table

Targets: the libFuzzer programs of ``fuzz/c/`` (built by ``fuzz/Makefile`` with clang under
ASan + UBSan) and the Python targets of ``fuzz/py/fuzz_targets.py`` (run by atheris). Each
one starts from its seed corpus ``fuzz/corpus/<target>/`` (read only: the inputs a run adds
go to ``fuzz/build/work/<target>/``) for ``--seconds`` and prints
``fuzz TARGET: N execs, K crashes``. With ``--min-execs N`` (``make fuzz``: 10^5, the
issue's bar) a target that ran fewer than N inputs in its ``--seconds`` goes on fuzzing the
corpus it grew until it has run N (``-runs``), for at most ``--max-seconds`` more: the bar is
executions, and how many fit in a minute depends on the target (one that builds a simulator
per input under ASan runs a few thousand a second on a core of its own) and on the machine's
load. A crash's input is kept as
``fuzz/build/artifacts/<target>/crash-*``; copied into the corpus folder as ``crash-<what>``,
it becomes a regression test that ``--replay`` (and so ``make test``) runs. With
``--result`` the summary, with the machine's load and the seconds per target, is written
through ``kvsim.provenance.write_result``. Exit status: 1 if any target crashed (or a
replayed input failed), else 0.

With ``--runs N --seed S`` (``make test``'s smoke run) each target runs exactly N inputs from
libFuzzer's seed S, starting from its committed corpus in a fresh work folder: the inputs are
the same on every run, so the suite draws nothing new at random.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

FUZZ = Path(__file__).resolve().parent
ROOT = FUZZ.parent
BUILD = FUZZ / "build"
CORPUS = FUZZ / "corpus"
C_TARGETS = ["cref_resp", "cref_server", "cref_snapshot", "cref_options", "engine_records"]
sys.path.insert(0, str(FUZZ / "py"))
from fuzz_targets import TARGETS as _PY  # noqa: E402 -- the one list of Python targets

PY_TARGETS = list(_PY)
_EXECS = re.compile(rb"stat::number_of_executed_units:\s*(\d+)")
_COV = re.compile(rb"\bcov: (\d+) ft: (\d+)")
_FAILS = ("crash-", "leak-", "timeout-", "oom-", "slow-unit-")


class FuzzError(Exception):
    """A setup problem, reported as one line."""


def _command(target: str) -> list[str]:
    if target in C_TARGETS:
        return [str(BUILD / f"fuzz_{target}")]
    return [sys.executable, str(FUZZ / "py" / "atheris_main.py"), target]


def build(targets: list[str]) -> None:
    if not any(t in C_TARGETS for t in targets):
        return
    clang = os.environ.get("CLANG", "clang")
    if shutil.which(clang) is None:
        raise FuzzError(f"{clang} not found: the C targets need clang and libFuzzer "
                        "(Debian: apt-get install clang libclang-rt-14-dev)")
    jobs = str(min(2, os.cpu_count() or 1))
    r = subprocess.run(["make", "-s", "-C", str(FUZZ), f"-j{jobs}", f"CLANG={clang}"],
                       capture_output=True, text=True, check=False)
    if r.returncode:
        tail = (r.stderr or r.stdout).strip().splitlines()[-1:] or ["(no output)"]
        raise FuzzError(f"building the C targets failed: {tail[0]}")


def _check_python(targets: list[str]) -> None:
    if not any(t in PY_TARGETS for t in targets):
        return
    try:
        import atheris  # noqa: F401
    except ImportError:
        raise FuzzError("atheris is not installed: the Python targets need it "
                        "(pip install atheris, or make setup)") from None


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(FUZZ / "py"), env.get("PYTHONPATH", "")])
    # the sanitizers stop at the first error; leaks count as crashes (libFuzzer's default)
    env.setdefault("UBSAN_OPTIONS", "halt_on_error=1:print_stacktrace=1")
    return env


def _libfuzzer(target: str, limits: list[str], work: Path, arts: Path, log) -> tuple:
    """One libFuzzer run of ``target`` over its work and seed corpora under ``limits`` (which
    hold a ``-max_total_time``): (execs, libFuzzer's last coverage report, exit code,
    seconds)."""
    cmd = [*_command(target), *limits, "-print_final_stats=1",
           "-timeout=20", "-rss_limit_mb=4096", "-max_len=8192",
           f"-artifact_prefix={arts}/", str(work), str(CORPUS / target)]
    t0 = time.monotonic()
    r = subprocess.run(cmd, capture_output=True, env=_env(), check=False,
                       timeout=_seconds_of(limits) + 600)
    wall = time.monotonic() - t0
    log.write(f"=== {target}: {' '.join(cmd)}\n".encode() + r.stdout + r.stderr)
    m = _EXECS.findall(r.stderr + r.stdout)
    cov = _COV.findall(r.stderr + r.stdout)
    return (int(m[-1]) if m else 0), (cov[-1] if cov else None), r.returncode, wall


def _seconds_of(limits: list[str]) -> int:
    return next(int(a.split("=")[1]) for a in limits if a.startswith("-max_total_time="))


def fuzz_one(target: str, seconds: int, log, min_execs: int = 0,
             max_seconds: int = 0, runs: int = 0, seed: int = 0) -> dict:
    """Fuzz ``target`` for ``seconds``, then, if it ran fewer than ``min_execs`` inputs, on
    until it has (for at most ``max_seconds`` more); or, with ``runs``, exactly that many
    inputs from libFuzzer's ``seed`` in a fresh work folder. Its execs, crashes and new
    artifacts."""
    work = BUILD / ("smoke" if runs else "work") / target
    arts = BUILD / "artifacts" / target
    if runs:
        shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True, exist_ok=True)
    arts.mkdir(parents=True, exist_ok=True)
    before = set(os.listdir(arts))
    limits = ([f"-runs={runs}", f"-seed={seed}", f"-max_total_time={seconds}"] if runs
              else [f"-max_total_time={seconds}"])
    execs, cov, code, wall = _libfuzzer(target, limits, work, arts, log)
    timed_execs, timed_wall = execs, wall
    if code == 0 and execs < min_execs and max_seconds > 0:
        # libFuzzer's -runs counts every input it runs, the corpus it reloads included
        more, cov2, code, wall2 = _libfuzzer(
            target, [f"-runs={min_execs - execs}", f"-max_total_time={max_seconds}"],
            work, arts, log)
        execs, wall = execs + more, wall + wall2
        cov = cov2 or cov
    new = sorted(f for f in set(os.listdir(arts)) - before if f.startswith(_FAILS))
    crashes = len(new) or (1 if code else 0)
    return {"target": target, "execs": execs, "crashes": crashes,
            "seconds": round(wall, 1), "exit_code": code,
            # the first, timed run alone (--seconds); execs - timed_execs came after it
            "timed_execs": timed_execs, "timed_seconds": round(timed_wall, 1),
            # libFuzzer's last report: code edges reached, and features (edge x hit count)
            "coverage_edges": int(cov[0]) if cov else None,
            "coverage_features": int(cov[1]) if cov else None,
            "artifacts": [str((arts / f).relative_to(ROOT)) for f in new],
            "corpus_seeds": len(list((CORPUS / target).iterdir())),
            "corpus_after": len(list(work.iterdir()))}


def replay_one(target: str, log) -> dict:
    """Run every input of ``target``'s committed corpus once (no mutation)."""
    files = sorted(p for p in (CORPUS / target).iterdir() if p.is_file())
    cmd = [*_command(target), *map(str, files)]  # libFuzzer runs files given by name once
    r = subprocess.run(cmd, capture_output=True, env=_env(), check=False, timeout=600)
    log.write(f"=== replay {target}: {len(files)} inputs\n".encode() + r.stdout + r.stderr)
    return {"target": target, "inputs": len(files), "failed": r.returncode != 0}


def render(path: str) -> str:
    """A result file of ``--result`` as Markdown: the run, then one row per target."""
    import json

    d = json.loads(Path(path).read_text())
    p, m = d["provenance"], d["provenance"]["machine"]
    rows = ["| target | execs | crashes | in the first "
            f"{d['seconds_per_target']} s | seconds | coverage edges |",
            "|---|---:|---:|---:|---:|---:|"]
    for t in d["targets"]:
        rows.append(f"| `{t['target']}` | {t['execs']:,} | {t['crashes']} | "
                    f"{t.get('timed_execs', t['execs']):,} | {t['seconds']} | "
                    f"{t['coverage_edges'] if t['coverage_edges'] is not None else '-'} |")
    head = (f"`{d['command']}` at commit {p['commit'][:10]} (its date: `provenance`), on "
            f"{m['cpu_model']} ({m['cores']} cores{', a VM' if m.get('hypervisor') else ''}), "
            f"1-minute load average {d['load_average_1m_before']:.1f} before and "
            f"{d['load_average_1m_after']:.1f} after; goal {d['goal_execs_per_target']:,} "
            "executions per target.")
    return head + "\n\n" + "\n".join(rows) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=int, default=int(os.environ.get("FUZZ_SECONDS", 60)),
                    help="fuzzing time per target (default: $FUZZ_SECONDS or 60)")
    ap.add_argument("--min-execs", type=int, default=int(os.environ.get("FUZZ_MIN_EXECS", 0)),
                    help="a target that ran fewer inputs in --seconds fuzzes on until it has "
                         "(default: $FUZZ_MIN_EXECS or 0, none)")
    ap.add_argument("--max-seconds", type=int, default=None,
                    help="at most this much more time per target for --min-execs "
                         "(default: 15 x --seconds)")
    ap.add_argument("--targets", default=",".join(C_TARGETS + PY_TARGETS),
                    help="comma-separated targets (default: all)")
    ap.add_argument("--runs", type=int, default=0,
                    help="run exactly this many inputs per target from --seed, in a fresh work "
                         "folder (a reproducible smoke run; --seconds is then only a bound)")
    ap.add_argument("--seed", type=int, default=1,
                    help="libFuzzer's random seed for --runs (default 1; must be >= 1)")
    ap.add_argument("--replay", action="store_true",
                    help="run every committed corpus input once instead of fuzzing")
    ap.add_argument("--result", help="write the summary here (kvsim.provenance.write_result)")
    ap.add_argument("--render", metavar="FILE",
                    help="print a --result file as a Markdown table (fuzz/README.md) and exit")
    a = ap.parse_args(argv)
    if a.render:
        try:
            print(render(a.render), end="")
        except (OSError, ValueError, KeyError) as exc:
            print(f"fuzz: error: {a.render}: cannot render: {exc}", file=sys.stderr)
            return 2
        return 0
    targets = [t for t in a.targets.split(",") if t]
    unknown = [t for t in targets if t not in C_TARGETS + PY_TARGETS]
    try:
        if unknown:
            raise FuzzError(f"unknown target {unknown[0]!r} "
                            f"(known: {', '.join(C_TARGETS + PY_TARGETS)})")
        if a.seconds < 1:
            raise FuzzError(f"--seconds: must be >= 1, got {a.seconds}")
        if a.runs < 0:
            raise FuzzError(f"--runs: must be >= 0, got {a.runs}")
        if a.seed < 1:
            raise FuzzError(f"--seed: must be >= 1, got {a.seed}")
        if a.min_execs < 0:
            raise FuzzError(f"--min-execs: must be >= 0, got {a.min_execs}")
        if a.max_seconds is None:
            a.max_seconds = 15 * a.seconds
        if a.max_seconds < 0:
            raise FuzzError(f"--max-seconds: must be >= 0, got {a.max_seconds}")
        build(targets)
        _check_python(targets)
    except FuzzError as exc:
        print(f"fuzz: error: {exc}", file=sys.stderr)
        return 2
    BUILD.mkdir(exist_ok=True)
    log_path = BUILD / ("replay.log" if a.replay else "fuzz.log")
    bad = 0
    rows = []
    load_before = os.getloadavg()[0]
    with open(log_path, "wb") as log:
        for t in targets:
            if a.replay:
                row = replay_one(t, log)
                print(f"fuzz replay {t}: {row['inputs']} inputs, "
                      f"{'FAILED' if row['failed'] else 'ok'}", flush=True)
                bad += row["failed"]
            else:
                row = fuzz_one(t, a.seconds, log, a.min_execs, a.max_seconds, a.runs, a.seed)
                print(f"fuzz {t}: {row['execs']} execs, {row['crashes']} crashes", flush=True)
                bad += row["crashes"] > 0
                for art in row["artifacts"]:
                    print(f"  crash input: {art}", flush=True)
            rows.append(row)
    if bad:
        print(f"fuzz: {bad} target(s) failed; output in {log_path.relative_to(ROOT)}",
              file=sys.stderr)
    if a.result and not a.replay:
        sys.path.insert(0, str(ROOT))
        from kvsim.provenance import write_result

        write_result(a.result, {
            "benchmark": "fuzz",
            "command": f"make fuzz FUZZ_SECONDS={a.seconds} FUZZ_MIN_EXECS={a.min_execs}",
            "seconds_per_target": a.seconds,
            "min_execs_per_target": a.min_execs,
            "max_extra_seconds_per_target": a.max_seconds,
            "load_average_1m_before": load_before,
            "load_average_1m_after": os.getloadavg()[0],
            "goal_execs_per_target": 100_000,
            "targets": rows,
        })
        print(f"fuzz: summary written to {a.result}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
