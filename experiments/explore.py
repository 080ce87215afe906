"""What the notebooks (``notebooks/``) compute: traces made on demand, per-CPU comparisons,
the batching sweep and the seed tables, as pandas DataFrames. The notebooks only show these
frames as tables and plots; everything here is tested in ``experiments/tests``.

Every function that needs a trace makes it with the c_ref keyspace the first time, in a
folder the caller names, and reuses it afterwards (a trace's file name encodes its workload
and options, so a different option makes a different file).

Runtime at the notebooks' scale (tens of thousands of keys, a few thousand operations): a
trace or a simulation takes a fraction of a second each.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from kvsim import sim, traces
from kvsim.experiments import cref

__all__ = ["DATA_ENV", "batch_timelines", "batching_sweep", "best_batch", "command_window",
           "cpu_comparison", "data_dir", "prefetch_timeliness_by_tag", "preset_table",
           "seed_presets", "seed_reproduction", "seed_tables", "workload_trace"]


#: The folder a notebook keeps its traces and results in, when set (`kvsim notebooks run`
#: sets it to a folder inside the one it is given).
DATA_ENV = "KVSIM_NOTEBOOK_DATA"


def data_dir() -> Path:
    """Where the notebooks keep their traces and results, whatever the current directory:
    ``$KVSIM_NOTEBOOK_DATA`` if set; else ``experiments/results/notebooks`` of the checkout
    kvsim runs from (git-ignored); else ``$XDG_CACHE_HOME/kvsim/notebooks`` (an installed
    kvsim)."""
    from kvsim import artifacts

    if os.environ.get(DATA_ENV):
        return Path(os.environ[DATA_ENV])
    root = artifacts.source_root()
    if root is not None:
        return root / "experiments" / "results" / "notebooks"
    cache = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(cache) / "kvsim" / "notebooks"


def seed_presets() -> list[str]:
    """The CPU presets of the seed machines: every preset but ``local`` (this machine, whose
    model depends on a calibration), so that the notebooks show the same numbers anywhere."""
    return [p for p in sim.preset_names() if p != "local"]


def workload_trace(folder: str | Path, workload: str = "pipeline", **options: Any) -> Path:
    """Path of the trace of ``workload`` with c_ref ``options`` (as ``kvsim trace`` takes
    them, e.g. ``keys=50_000, ops=5_000, variant="lookahead", batch=8``) in ``folder``;
    traced now if the file does not exist yet."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    opts = {k: v for k, v in sorted(options.items()) if v is not None}
    key = hashlib.sha256(json.dumps([workload, opts], sort_keys=True).encode()).hexdigest()
    path = folder / f"{workload}-{opts.get('variant', 'default')}-{key[:12]}.kvt"
    if not path.exists():
        tmp = path.with_suffix(".kvt.part")
        cref.trace(workload, tmp, opts)
        tmp.replace(path)
    return path


# --- one batch, naive against lookahead ------------------------------------------------------

def command_window(records: np.ndarray, first_command: int, commands: int) -> tuple[int, int]:
    """``(first record, count)`` of commands ``first_command`` .. ``first_command +
    commands - 1``, counted from 0 at the first COMMAND marker after the last warm-up end
    (from the first one when there is no warm-up). Raises ValueError when the trace has
    fewer commands."""
    kind, flags = records["kind"], records["flags"]
    is_marker = kind == traces.KIND_MARKER
    ends = np.flatnonzero(is_marker & (flags == traces.MARK_WARMUP_END))
    start = int(ends[-1]) + 1 if ends.size else 0
    cmds = np.flatnonzero(is_marker & (flags == traces.MARK_COMMAND))
    cmds = cmds[cmds >= start]
    if first_command < 0 or commands < 1 or first_command + commands > cmds.size:
        raise ValueError(f"commands {first_command}..{first_command + commands - 1}: the "
                         f"trace has {cmds.size} measured commands")
    lo = int(cmds[first_command])
    hi = int(cmds[first_command + commands]) if first_command + commands < cmds.size \
        else records.size
    return lo, hi - lo


def batch_timelines(paths: dict[str, str | Path], cpu: str, first_command: int = 100,
                    commands: int = 16) -> pd.DataFrame:
    """Per-record times of the same commands in each trace of ``paths`` ({variant: trace}),
    simulated on ``cpu``: :func:`kvsim.sim.simulate`'s timeline frame with a ``variant``
    column, and ``dispatch``, ``issue``, ``complete``, ``retire`` shifted so that each
    variant's window starts at cycle 0 (its first record's dispatch)."""
    frames = []
    for variant, path in paths.items():
        with traces.open(path) as tr:
            recs = tr.read_all()
        window = command_window(recs, first_command, commands)
        res = sim.simulate(str(path), cpu, timeline=window)  # the file: its header's kinds
        df = sim.dataframes(res, trace=str(path))["timeline"]
        t0 = df["dispatch"].min() if len(df) else 0.0
        for c in ("dispatch", "issue", "complete", "retire"):
            df[c] = df[c] - t0
        df.insert(2, "variant", variant)
        frames.append(df)
    return pd.concat(frames, ignore_index=True)


# --- CPUs ------------------------------------------------------------------------------------

def cpu_comparison(trace: str | Path, cpus: Iterable[str]) -> dict[str, pd.DataFrame]:
    """``trace`` simulated on each CPU: :func:`kvsim.sim.dataframes` of every run,
    concatenated (levels, by_tag, timing, stalls, phases, prefetch, commands)."""
    return sim.concat_dataframes(
        sim.dataframes(sim.simulate(str(trace), c), trace=str(trace)) for c in cpus)


def preset_table(cpus: Iterable[str]) -> pd.DataFrame:
    """What sets the CPUs apart, one row per CPU and level (and one for DRAM): ``cpu``,
    ``level``, ``role``, ``size_kib``, ``ways``, ``latency_cycles``, ``latency_ns``,
    ``mshrs`` (0 = not modelled), and the core's ``freq_ghz``, ``width``, ``rob``."""
    rows = []
    for name in cpus:
        c = sim.load_cpu(name)
        roles = sim.api.level_roles(len(c.caches))
        core = {"freq_ghz": c.freq_ghz, "width": c.width, "rob": c.rob}
        for lv, role in zip(c.caches, roles, strict=True):
            rows.append({"cpu": name, "level": lv.name, "role": role, "size_kib": lv.size / 1024,
                         "ways": lv.ways, "latency_cycles": lv.latency,
                         "latency_ns": lv.latency / c.freq_ghz if c.freq_ghz else None,
                         "mshrs": lv.mshrs, **core})
        rows.append({"cpu": name, "level": "DRAM", "role": "DRAM", "size_kib": None,
                     "ways": None,
                     "latency_cycles": c.dram_latency_ns * c.freq_ghz
                     if c.dram_latency_ns and c.freq_ghz else None,
                     "latency_ns": c.dram_latency_ns, "mshrs": None, **core})
    return pd.DataFrame(rows)


# --- batching --------------------------------------------------------------------------------

def batching_sweep(folder: str | Path, cpus: Sequence[str], depths: Sequence[int],
                   batches: Sequence[int], **options: Any) -> dict[str, pd.DataFrame]:
    """Pipelined GETs traced naive and with lookahead at each batch size, for each pipeline
    depth, simulated on each CPU (``options``: the other c_ref options, e.g. ``keys``,
    ``ops``, ``value_size``). Returns two frames:

    * ``"speedup"``: one row per CPU x depth x variant x batch (naive: batch 0) with
      ``cycles``, ``cycles_per_op``, ``mlp``, ``speedup`` (the naive run's cycles at that
      depth over this one's);
    * ``"prefetch"``: the runs' :func:`kvsim.sim.dataframes` prefetch rows (per source and
      level: issued, useful, late, useless, dropped, ...) with ``depth``, ``variant`` and
      ``batch`` columns.
    """
    speed, pf = [], []
    for depth in depths:
        runs = {("naive", 0): workload_trace(folder, "pipeline", variant="naive", depth=depth,
                                              **options)}
        for b in batches:
            runs[("lookahead", b)] = workload_trace(folder, "pipeline", variant="lookahead",
                                                    depth=depth, batch=b, **options)
        for cpu in cpus:
            base = None
            for (variant, b), trace_path in runs.items():
                # the file, not its records: its header names the tags, the sites' kinds of
                # work and the system calls the CPU's rates apply to
                path = str(trace_path)
                res = sim.simulate(path, cpu)
                if base is None:
                    base = res["cycles"]
                ops = res["commands"]["count"]
                speed.append({"cpu": cpu, "trace": path, "depth": depth, "variant": variant,
                              "batch": b, "cycles": res["cycles"],
                              "cycles_per_op": res["cycles"] / ops if ops else None,
                              "mlp": res["timing"]["mlp"], "speedup": base / res["cycles"]})
                f = sim.dataframes(res, trace=path)["prefetch"]
                f.insert(2, "depth", depth)
                f.insert(3, "variant", variant)
                f.insert(4, "batch", b)
                pf.append(f)
    prefetch = pd.concat([f for f in pf if len(f)] or pf[:1], ignore_index=True)
    return {"speedup": pd.DataFrame(speed), "prefetch": prefetch}


def best_batch(speedup: pd.DataFrame) -> pd.DataFrame:
    """Per CPU and depth, the lookahead batch size with the highest speedup (the smallest
    one on a tie): ``cpu``, ``depth``, ``batch``, ``speedup``."""
    la = speedup[speedup["variant"] == "lookahead"]
    la = la.sort_values(["cpu", "depth", "speedup", "batch"],
                        ascending=[True, True, False, True], kind="stable")
    best = la.groupby(["cpu", "depth"], sort=True).head(1)
    return best[["cpu", "depth", "batch", "speedup"]].reset_index(drop=True)


def prefetch_timeliness_by_tag(trace: str | Path, cpu: str) -> pd.DataFrame:
    """What became of each software prefetch of ``trace`` on ``cpu``, per structure tag, from
    the timeline of the whole trace (:func:`kvsim.sim.simulate` with ``timeline``; the
    engine's own counters are per level, not per tag). Outcomes, per prefetch record:

    * ``dropped``: no free miss buffer (or dropped on a TLB miss);
    * ``redundant``: the line was already in the level prefetches fill;
    * ``timely``: the next demand access (load or store, in program order) to its line
      issued at or after the fill completed;
    * ``late``: that access issued before the fill completed;
    * ``unused``: no later demand access to its line.

    A demand access counts for the line of its first byte. The next access may find the line
    evicted meanwhile (the engine's ``useless``); this view does not tell. Returns one row
    per tag: ``tag``, ``prefetches`` and a count per outcome.
    """
    with traces.open(trace) as tr:
        recs = tr.read_all()
    cfg = sim.load_cpu(cpu)
    fill = cfg.caches[cfg.swpf_fill].name
    res = sim.simulate(str(trace), cfg, timeline=(0, len(recs)))
    tl = sim.dataframes(res)["timeline"]
    shift = int(cfg.caches[0].line).bit_length() - 1
    line = (tl["addr"].to_numpy(np.uint64) >> np.uint64(shift))
    order = np.lexsort((tl["record"].to_numpy(), line))  # by line, then program order
    ln = line[order]
    kind = tl["kind"].to_numpy()[order]
    issue = tl["issue"].to_numpy()[order]
    n = len(order)
    # the next demand access after each row, in the sorted order, and whether it is the
    # same line's
    pos = np.where(np.isin(kind, ["load", "store"]), np.arange(n), n)
    nxt = np.r_[np.minimum.accumulate(pos[::-1])[::-1][1:], n] if n else pos
    has = nxt < n
    has[has] = ln[nxt[has]] == ln[has]
    is_pf = kind == "prefetch"
    level = tl["level"].to_numpy()[order]
    complete = tl["complete"].to_numpy()[order]
    nxt_issue = np.where(has, issue[np.minimum(nxt, n - 1)] if n else issue, np.nan)
    outcome = np.select(
        [level == "dropped", level == fill, ~has, nxt_issue >= complete],
        ["dropped", "redundant", "unused", "timely"], "late")
    df = pd.DataFrame({"tag": tl["tag"].to_numpy()[order][is_pf], "outcome": outcome[is_pf]})
    cols = ["timely", "late", "unused", "dropped", "redundant"]
    out = df.groupby(["tag", "outcome"]).size().unstack(fill_value=0)
    out = out.reindex(columns=cols, fill_value=0)
    out.insert(0, "prefetches", out.sum(axis=1))
    return out.reset_index()


# --- seed tables -----------------------------------------------------------------------------

def seed_tables(results: str | Path, names: Sequence[str], scale: str = "small",
                cpus: Sequence[str] | None = None) -> dict[str, pd.DataFrame]:
    """The seed tables of experiments ``names`` from the experiments framework's results in
    ``results`` (``results/NAME/NAME.parquet``, ``kvsim experiment run NAME -o results``),
    running the experiments at ``scale`` first when their Parquet file does not exist.
    Returns ``{"NAME: table title": frame}``; each frame has the grid coordinates, ``seed``
    (the upstream figure), ``native`` (this machine, with its 95 % interval) and one
    ``sim:<cpu>`` column per preset.
    """
    from kvsim.experiments import framework, runner

    results = Path(results)
    out = {}
    for name in names:
        parquet = results / name / f"{name}.parquet"
        if not parquet.exists():
            # one worker: the simulations run in this process (a notebook's kernel)
            runner.run([name], results, scale=scale, cpus=list(cpus) if cpus else None,
                       workers=1)
        rows = pd.read_parquet(parquet)
        for t in framework.get(name).tables(rows):
            out[f"{name}: {t.title}"] = t.frame
    return out


def seed_reproduction(folder: str | Path, names: Sequence[str] = ("pipeline",),
                      cpus: Sequence[str] | None = None) -> dict[str, pd.DataFrame]:
    """The seed tables to show: :func:`seed_tables` of ``names`` at small scale, with the
    results in ``folder/experiments``."""
    return seed_tables(Path(folder) / "experiments", names, cpus=cpus)
