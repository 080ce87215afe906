"""Run experiments: cells in parallel (local processes or a Dask cluster), natives alone,
results resumable, tables assembled at the end.

Layout of ``-o DIR`` (what :mod:`kvsim.experiments.report` and notebooks read)::

    DIR/NAME/cells/<cell id>.json    one finished cell: {"id", "spec", "metrics", "seconds",
                                     "commit", "dirty", "command", "date_utc", "machine_*"};
                                     written
                                     to a temporary name and renamed, so a file that exists
                                     is whole
    DIR/NAME/NAME.parquet            the tidy table: one row per cell (columns below)
    DIR/NAME/<table>.png             a plot per table
    DIR/NAME/NAME.md                 the tables in Markdown, a ``seed`` column in each
    DIR/NAME/.traces/                traces shared by the sim cells of one configuration,
                                     removed when the experiment is complete

A Parquet row holds ``experiment``, ``cell_id``, ``kind`` (sim, native, valkey),
``workload``, ``cpu`` (sim cells), ``group`` and ``baseline`` (sim cells), ``spec`` (the
cell's spec as JSON), every ``params`` coordinate as its own column (``variant``,
``keys``, ``value_size``, ...), every metric (:mod:`kvsim.experiments.cells`),
``speedup`` (sim: the group baseline's cycles over the cell's, on the same CPU; native:
the median of the rounds' ratios), ``commit``, ``dirty``, ``date_utc``, ``seconds`` and
the ``machine_*`` columns of :func:`kvsim.experiments.machine.describe`.

Resuming: a cell's id hashes its spec and the fingerprint of what computes its kind
(:func:`kvsim.experiments.cells.inputs_fingerprint`: the c_ref CLI's and the engine's bytes,
the Python modules that trace, simulate and time), so the same command run again skips
every cell whose file exists ("N of M cells already done") and computes only the rest. A
commit that leaves those inputs alone (documentation, tests, another experiment's tables)
keeps every id; a change to c_ref or the simulator recomputes the cells it affects. Each
cell file records the commit that computed it and the fingerprint (``inputs``). A cell that
fails is not written: it is reported in one line (``failed``; a c_ref child, or the forked
process that continues a setup's simulation, ended by a signal is "killed by signal
SIGKILL" and the like, and every cell of its setup fails with it, its traces not kept), and
the same command computes it again (experiments/tests/test_killed_child.py). A local worker
process that dies (the OOM killer's SIGKILL and the like) fails the cells it was computing
with one line naming its signal and those cells; the cells done before stay written, and the
tasks not started yet go on in a new pool (experiments/tests/test_killed_worker.py).

Parallelism: the sim cells to compute are grouped by trace (the cells of one experiment
that differ only in their CPU: :func:`kvsim.experiments.cells.trace_key`), and the traces by
setup (those that differ only in their variants: ``cref.setup_key``); each setup is one
task, which traces its workloads in one c_ref run (the setup built once), simulates their
shared warm-up prefix once and each trace on all its cells' CPUs
(:func:`kvsim.experiments.cells.run_setup_group`), and its results are split back into the
cells' files (cell ids and resuming are per cell, as above). While there are fewer tasks
than workers, the largest is split in two. The tasks run on ``workers``
local processes (default: one per core), or as Dask tasks on ``--scheduler
tcp://HOST:PORT`` (results come back to this process, which writes them). Native and
real-Valkey cells run afterwards in this process, one at a time, with nothing else
running, since concurrent work would disturb their timings.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Callable, Iterable
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any

import pandas as pd

from kvsim import provenance
from kvsim.experiments import cells as C
from kvsim.experiments import framework, machine, progress

__all__ = ["assemble", "plan", "run"]

PARALLEL_KINDS = ("sim",)


def _commit() -> tuple[str | None, bool | None]:
    g = provenance.git_state()
    return g["commit"], g["dirty"]


_atomic_write = provenance.write_atomic


def default_cpus() -> list[str]:
    """Every preset with a timing model: all the shipped ones, and `local` where this
    machine's core is in the table of known cores or has been calibrated."""
    from kvsim import sim

    return [p["name"] for p in sim.list_presets() if p["timing"]]


KINDS = ("sim", "native", "valkey")


def plan(names: Iterable[str], scale: str, cpus: list[str] | None,
         kinds: Iterable[str] | None = None) -> dict[str, list[dict]]:
    """``{experiment: [spec, ...]}`` (only cells of ``kinds``, default every kind);
    ValueError on an unknown name, scale, kind or CPU."""
    kinds = set(kinds or KINDS)
    if kinds - set(KINDS):
        raise ValueError(f"unknown cell kind {sorted(kinds - set(KINDS))[0]!r} (known: "
                         f"{', '.join(KINDS)})")
    if scale not in framework.ALL_SCALES:
        raise ValueError(f"--scale: unknown scale {scale!r} (known: "
                         f"{', '.join(framework.ALL_SCALES)})")
    names = list(names)
    if "all" in names:
        names = framework.names()
    exps = [framework.get(n) for n in names]
    for e in exps:
        if scale not in e.scales:
            raise ValueError(f"--scale {scale}: experiment {e.name!r} runs at "
                             f"{', '.join(e.scales)} only")
    if cpus:
        from kvsim import sim

        for c in cpus:  # a bad CPU fails before any work
            if not sim.load_cpu(c).timing_capable:
                raise ValueError(f"--cpu {c}: no timing model (the experiments compare "
                                 "cycles): choose a preset, or a CPU file with [core], "
                                 "[dram] and a clock")
    cpus = list(cpus) if cpus else default_cpus()
    _check_gap_model(cpus)
    return {e.name: [c for c in e.cells(scale, cpus) if C.KIND_BASE.get(c["kind"]) in kinds]
            for e in exps}


def _check_gap_model(cpus: list[str]) -> None:
    """Refuse, before any work, a CPU whose [work] rates were fitted to other counts than
    those of the traces this c_ref writes (sim/gap_model.py): the cells' traces are its."""
    from kvsim import sim
    from kvsim.sim import gap_model

    for c in cpus:
        refused = gap_model.against_cref(sim.load_cpu(c).work_gap_model, c)
        if refused is not None:
            raise ValueError(f"--cpu {c}: {refused}")


def _cell_key(spec: dict, inputs: dict[str, str]) -> str:
    """A cell's id: its spec, the fingerprint of its kind's inputs (``inputs[kind]``) and,
    where it has one, its context (:func:`kvsim.experiments.cells.context_key`: the machine
    of a timed cell, the ``local`` CPU of a simulated one)."""
    key: dict[str, Any] = {"spec": spec, "inputs": inputs[spec["kind"]]}
    context = C.context_key(spec)
    if context:
        key["context"] = context
    return C.cell_id(key)


def _fingerprints(grids: dict[str, list[dict]]) -> dict[str, str]:
    return {k: C.inputs_fingerprint(k)
            for k in sorted({s["kind"] for specs in grids.values() for s in specs})}


def run(names: Iterable[str], out: str | Path, scale: str = "small",
        cpus: list[str] | None = None, scheduler: str | None = None,
        workers: int | None = None, log: Callable[[str], Any] = print,
        kinds: Iterable[str] | None = None, publish: bool = False,
        publish_as: str | None = None) -> dict[str, Any]:
    """Run the experiments ``names`` (or ``["all"]``) into ``out``, only cells of ``kinds``
    if given; return ``{"total", "already_done", "computed", "failed": [(cell id,
    message)], "skipped": [...], "where": [a line per kind of cell saying where it ran:
    local processes, or the Dask scheduler's address and its workers], "names": [the
    experiments run]}``. ``publish``: also copy each complete experiment's
    NAME.json and plots to ``results/experiments/`` of the checkout (where README renderings
    read). ``publish_as``: publish the one experiment run under this name instead (NAME.json
    as PUBLISH_AS.json, each plot NAME*.png as PUBLISH_AS*.png), e.g. a machine's own
    validation beside another's; implies ``publish``."""
    out, names = Path(out), list(names)
    C.forget_context()  # this sweep's ids name the local CPU as it is now
    if publish_as is not None:
        if not re.fullmatch(r"[a-z0-9][a-z0-9_.-]*", publish_as):
            raise ValueError(f"--publish-as: {publish_as!r} is not a result name (lower-case "
                             "letters, digits, '_', '-', '.')")
        if len(names) != 1 or "all" in names:
            raise ValueError("--publish-as: names the result of one experiment; run one")
        publish = True
    published = provenance.results_dir() if publish else None
    if published is not None:
        published = published / "experiments"
        published.mkdir(parents=True, exist_ok=True)
    if publish and published is None:
        raise ValueError("--publish: results/ exists only in a kvsim source checkout")
    grids = plan(names, scale, cpus, kinds)
    if scheduler is not None:
        try:
            import distributed  # noqa: F401
        except ImportError:
            raise ValueError("--scheduler needs dask.distributed: pip install 'kvsim[dask]'"
                             ) from None
    if workers is not None and workers < 1:
        raise ValueError(f"--workers: must be at least 1, got {workers}")
    out.mkdir(parents=True, exist_ok=True)
    commit, dirty = _commit()
    inputs = _fingerprints(grids)
    ids: dict[str, set[str]] = {name: set() for name in grids}
    todo: list[tuple[str, str, dict]] = []  # (experiment, cell id, spec)
    total = done = 0
    for name, specs in grids.items():
        cdir = out / name / "cells"
        cdir.mkdir(parents=True, exist_ok=True)
        seen = set()
        for spec in specs:
            cid = _cell_key(spec, inputs)
            if cid in seen:
                continue
            seen.add(cid)
            ids[name].add(cid)
            total += 1
            if (cdir / f"{cid}.json").exists():
                done += 1
            else:
                todo.append((name, cid, spec))
    log(f"{done} of {total} cells already done; computing {len(todo)}")
    stamp = {"commit": commit, "dirty": dirty, "command": provenance.command(),
             **machine.describe()}
    result: dict[str, Any] = {"total": total, "already_done": done, "computed": 0,
                              "failed": [], "skipped": [], "where": [],
                              "names": list(grids)}

    def where(line: str) -> None:
        """Say where a kind of cell runs; kept in the result's ``where``."""
        result["where"].append(line)
        log(line)

    def finish(name: str, cid: str, spec: dict, res: dict) -> None:
        doc = {"id": cid, "spec": spec, "metrics": res["metrics"], "seconds": res["seconds"],
               "inputs": inputs[spec["kind"]], **stamp,
               "machine_load_1m": provenance.load_average_1m(),
               "date_utc": provenance.date_utc()}
        _atomic_write(out / name / "cells" / f"{cid}.json",
                      json.dumps(doc, sort_keys=True, default=str) + "\n")
        result["computed"] += 1

    def failed(name: str, cid: str, spec: dict, exc: BaseException) -> None:
        msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        if isinstance(exc, C.CellSkipped):
            result["skipped"].append((cid, f"{name}: {msg}"))
        else:
            result["failed"].append((cid, f"{name} cell {cid}: {msg}"))

    groups = _groups([t for t in todo if t[2]["kind"] in PARALLEL_KINDS])
    par = _setup_tasks(groups, workers or os.cpu_count() or 1) if groups else []
    ser = [t for t in todo if t[2]["kind"] not in PARALLEL_KINDS]
    if par:
        log(f"{sum(len(g) for g in groups)} sim cells: {len(groups)} traces of {len(par)} "
            "setups, each setup built once, each trace simulated on its cells' CPUs in one "
            "pass")
    with progress.bar("experiments", total=total, initial=done, unit="cell") as bar:
        if par:
            if scheduler is not None:
                _run_dask(par, scheduler, finish, failed, bar, where)
            else:
                n = min(workers or os.cpu_count() or 1, len(par))
                where(f"sim cells: {n} local worker process{'es' if n > 1 else ''} on "
                      f"this machine")
                _run_local(par, out, workers, finish, failed, bar, log)
        if ser:
            kinds_ser = sorted({spec["kind"] for _, _, spec in ser})
            where(f"{len(ser)} cell{'s' if len(ser) > 1 else ''} ({', '.join(kinds_ser)}): "
                  "in this process on this machine, one at a time")
        for name, cid, spec in ser:  # alone: nothing else runs meanwhile
            bar.set_postfix_str(f"{name} {spec['kind']}")
            try:
                finish(name, cid, spec, C.run_cell(spec))
            except Exception as exc:  # noqa: BLE001 - reported per cell, the sweep goes on
                failed(name, cid, spec, exc)
            bar.update()
    # the tables hold every kind's finished cells of the grid (a run with --only native
    # after one with --only sim assembles both); complete = every cell of this run's kinds
    full = grids if kinds is None else plan(grids, scale, cpus)
    every_inputs = {**_fingerprints(full), **inputs}
    for name in grids:
        n = assemble(out, name, ids={_cell_key(s, every_inputs) for s in full[name]})
        cdir = out / name / "cells"
        if n and all((cdir / f"{cid}.json").exists() for cid in ids[name]):
            shutil.rmtree(out / name / ".traces", ignore_errors=True)
            if published is not None:
                stem = publish_as or name
                for src in [out / name / f"{name}.json", *sorted((out / name).glob("*.png"))]:
                    dst = published / framework.published_name(name, stem, src.name)
                    _atomic_write(dst, src.read_bytes())
                    log(f"published {dst}")
    for _, msg in result["skipped"]:
        log(f"skipped: {msg}")
    return result


def _groups(todo: list[tuple[str, str, dict]]) -> list[list[tuple[str, str, dict]]]:
    """The sim cells grouped by experiment and trace, in plan order."""
    groups: dict[tuple[str, str], list] = {}
    for name, cid, spec in todo:
        groups.setdefault((name, C.trace_key(spec)), []).append((name, cid, spec))
    return list(groups.values())


def _setup_tasks(groups: list[list[tuple[str, str, dict]]], workers: int
                 ) -> list[list[list[tuple[str, str, dict]]]]:
    """The trace groups as tasks, one per experiment and setup (``cref.setup_key``: the
    traces that differ only in their variants, traced from one c_ref run of the setup,
    :func:`kvsim.experiments.cells.run_setup_group`), in plan order; while there are fewer
    tasks than ``workers``, the largest is split in two (each half builds the setup once)."""
    from kvsim.experiments import cref

    tasks: dict[tuple[str, str], list] = {}
    for g in groups:
        name, _, spec = g[0]
        tasks.setdefault((name, cref.setup_key(spec["workload"], spec["options"])),
                         []).append(g)
    out = list(tasks.values())
    while len(out) < workers:
        big = max(range(len(out)), key=lambda i: len(out[i]))
        if len(out[big]) < 2:
            break
        half = len(out[big]) // 2
        out[big:big + 1] = [out[big][:half], out[big][half:]]
    return out


def _finish_group(group: list, results: list[dict] | None, exc: BaseException | None,
                  finish, failed, bar) -> None:
    for i, (name, cid, spec) in enumerate(group):
        if exc is None:
            finish(name, cid, spec, results[i])
        else:
            failed(name, cid, spec, exc)
    bar.update(len(group))


def _finish_task(task: list, results: list[list[dict]] | None, exc: BaseException | None,
                 finish, failed, bar) -> None:
    for i, group in enumerate(task):
        _finish_group(group, None if results is None else results[i], exc, finish, failed,
                      bar)


def _specs(task: list) -> list[list[dict]]:
    return [[spec for _, _, spec in group] for group in task]


#: Each local worker process's queue of the tasks it starts (:func:`_run_local`).
_STARTED = None


def _worker_init(started) -> None:
    global _STARTED
    _STARTED = started


def _run_started(i: int, specs: list[list[dict]], trace_dir: str) -> list[list[dict]]:
    """Task ``i`` in a local worker process: says it started (and in which process) before
    computing it, so that a worker that dies is known to have been computing it."""
    _STARTED.put((i, os.getpid()))
    return C.run_setup_group(specs, trace_dir)


class WorkerDied(RuntimeError):
    """A local worker process ended (by a signal, the OOM killer's SIGKILL and the like)
    while it computed a task: its cells fail with this one line."""


def _run_local(par: list, out: Path, workers: int | None, finish, failed, bar,
               log: Callable[[str], Any] = lambda m: None) -> None:
    """The tasks on local worker processes. A worker that dies (by a signal) breaks the
    pool: the tasks it was computing fail, naming its signal and their cells (the cells
    done before stay written; a rerun computes the failed ones), and the tasks not started
    yet or stopped with it go on in a new pool."""
    import multiprocessing

    from kvsim.experiments.cref import killed_by

    n = workers or os.cpu_count() or 1
    ctx = multiprocessing.get_context("spawn")
    left = dict(enumerate(par))
    while left:
        started = ctx.SimpleQueue()
        done: set[int] = set()
        broken = False
        with ProcessPoolExecutor(max_workers=min(n, len(left)), mp_context=ctx,
                                 initializer=_worker_init, initargs=(started,)) as pool:
            pending = {}
            for i, task in left.items():
                name = task[0][0][0]
                f = pool.submit(_run_started, i, _specs(task), str(out / name / ".traces"))
                pending[f] = i
            procs = dict(getattr(pool, "_processes", None) or {})  # pid -> Process
            while pending:
                ready, _ = wait(pending, return_when=FIRST_COMPLETED)
                for f in ready:
                    i = pending.pop(f)
                    exc = f.exception()
                    if isinstance(exc, BrokenProcessPool):
                        broken = True
                        continue
                    done.add(i)
                    _finish_task(left[i], f.result() if exc is None else None, exc, finish,
                                 failed, bar)
        for i in done:
            del left[i]
        ran: dict[int, int] = {}  # task -> the pid that started it
        while broken and not started.empty():
            i, pid = started.get()
            ran[i] = pid
        started.close()
        if not broken:
            break
        codes = {pid: p.exitcode for pid, p in procs.items()}
        lost = _lost_tasks({i: pid for i, pid in ran.items() if i in left}, codes)
        if not lost:  # none known to be computing: the rest fail rather than loop
            lost = {i: None for i in left}
        for (pid, code), tasks in _by_worker(lost, codes).items():
            cells = sorted(cid for i in tasks for g in left[i] for _, cid, _ in g)
            how = (killed_by(code)
                   or (f"ended with status {code}" if code is not None else "ended"))
            line = (f"a worker process{f' (pid {pid})' if pid else ''} was {how} with "
                    f"{len(cells)} cell{'s' if len(cells) > 1 else ''} in flight: "
                    f"{', '.join(cells)}")
            log(line)
            for i in tasks:
                _finish_task(left.pop(i), None, WorkerDied(line), finish, failed, bar)
        if left:
            log(f"{sum(len(g) for t in left.values() for g in t)} sim cells not computed "
                "yet: in a new pool")


def _lost_tasks(ran: dict[int, int], codes: dict[int, int | None]) -> dict[int, int]:
    """The tasks (task -> pid) that were computing on a worker that died of its own: ended
    by a signal other than the SIGTERM the broken pool sends the others (or, when each
    ended so, or with no status known, every task that was computing)."""
    import signal

    own = {pid for pid, c in codes.items() if c not in (None, 0, -signal.SIGTERM)}
    lost = {i: pid for i, pid in ran.items() if pid in own}
    return lost or dict(ran)


def _by_worker(lost: dict[int, int | None], codes: dict[int, int | None]
               ) -> dict[tuple[int | None, int | None], list[int]]:
    out: dict[tuple[int | None, int | None], list[int]] = {}
    for i, pid in sorted(lost.items()):
        out.setdefault((pid, codes.get(pid) if pid else None), []).append(i)
    return out



def _run_dask(par: list, scheduler: str, finish, failed, bar,
              where: Callable[[str], Any] = lambda m: None) -> None:
    from distributed import Client, as_completed

    with Client(scheduler, timeout="30s") as client:
        workers = sorted(client.scheduler_info().get("workers", {}))
        where(f"sim cells: on the Dask scheduler {client.scheduler.address}, "
              f"{len(workers)} worker{'s' if len(workers) != 1 else ''}: "
              f"{', '.join(workers) or 'none yet'}")
        futures = {}
        for task in par:
            # a Dask worker runs tasks on threads: no fork there (cells.run_setup_group)
            f = client.submit(C.run_setup_group, _specs(task), None, False,
                              key=f"kvsim-cells-{task[0][0][1]}", pure=False)
            futures[f] = task
        for f in as_completed(list(futures)):
            task = futures[f]
            ok = f.status == "finished"
            _finish_task(task, f.result() if ok else None, None if ok else f.exception(),
                         finish, failed, bar)


# --- assembling the rows --------------------------------------------------------------------

def load_rows(out: Path, name: str, commit: str | None = None,
              ids: set[str] | None = None) -> pd.DataFrame:
    """The experiment's cell files as tidy rows: every one, or those computed at ``commit``,
    or those whose id is in ``ids`` (a sweep's planned cells)."""
    rows = []
    for path in sorted((out / name / "cells").glob("*.json")):
        doc = json.loads(path.read_text())
        if commit is not None and doc.get("commit") != commit:
            continue
        if ids is not None and doc.get("id") not in ids:
            continue
        spec = doc["spec"]
        row: dict[str, Any] = {"experiment": name, "cell_id": doc["id"], "kind": spec["kind"],
                               "workload": spec.get("workload"), "cpu": spec.get("cpu"),
                               "group": spec.get("group"), "baseline": spec.get("baseline"),
                               "spec": json.dumps(spec, sort_keys=True)}
        row.update(spec.get("params", {}))
        row.update(doc["metrics"])
        if row.get("cpu_label"):  # `local (uncalibrated)`: every table and plot says so
            row["cpu"] = row["cpu_label"]
        # the sweep's stamps (commit, machine, ...) never hide a grid coordinate or metric:
        # mset_batch's and real_valkey's ``command`` is the Redis command, the invocation
        # that computed the cell is ``sweep_command``
        row["sweep_command"] = doc.get("command")
        row.update({k: v for k, v in doc.items()
                    if k not in ("id", "spec", "metrics") and k not in row})
        rows.append(row)
    df = pd.DataFrame(rows)
    if not len(df):
        return df
    if "speedup" not in df:
        df["speedup"] = None
    sim = df.kind == "sim"
    if sim.any():
        base = (df[sim & (df.baseline == True)]  # noqa: E712 - a column of booleans
                .set_index(["group", "cpu"])["cycles"])
        idx = list(zip(df.loc[sim, "group"], df.loc[sim, "cpu"], strict=True))
        df.loc[sim, "speedup"] = [base.get(k) / c if base.get(k) and c else None
                                  for k, c in zip(idx, df.loc[sim, "cycles"], strict=True)]
    df["speedup"] = pd.to_numeric(df["speedup"], errors="coerce")
    return df


def assemble(out: Path, name: str, commit: str | None = None,
             ids: set[str] | None = None) -> int:
    """Write NAME.parquet, the plots and NAME.md from the cells of ``commit`` or with an id
    in ``ids`` (see :func:`load_rows`); return how many cells there were."""
    from kvsim.experiments import report

    df = load_rows(out, name, commit, ids)
    if not len(df):
        return 0
    _atomic_write(out / name / f"{name}.parquet", _parquet_bytes(df))
    report.write_experiment(out, name, df)
    return len(df)


def _parquet_bytes(df: pd.DataFrame) -> bytes:
    import io

    import pyarrow as pa
    import pyarrow.parquet as pq

    buf = io.BytesIO()
    clean = df.copy()
    for c in clean.columns:  # mixed-type object columns become strings (Parquet is typed)
        if clean[c].dtype == object:
            types = {type(v) for v in clean[c] if v is not None and v == v}
            if len(types) > 1:
                clean[c] = [None if v is None or v != v else str(v) for v in clean[c]]
    pq.write_table(pa.Table.from_pandas(clean, preserve_index=False), buf)
    return buf.getvalue()
