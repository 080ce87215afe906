"""Tables, plots and the Markdown report of experiment results.

:func:`write_experiment` turns one experiment's rows into its tables
(:class:`kvsim.experiments.framework.Table`), writes ``DIR/NAME/<table>.png`` and
``DIR/NAME/NAME.md``; :func:`report` reads every ``DIR/NAME/NAME.parquet`` and returns one
Markdown document (``kvsim experiment report DIR``), each table with its ``seed`` column
beside kvsim's figures and the commit, machine and date of the rows.
"""

from __future__ import annotations

import math
import numbers
import os
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from kvsim.experiments import framework
from kvsim.sim import local as sim_local

__all__ = ["markdown_table", "plot_table", "report", "write_experiment"]


def _cell(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, bool | np.bool_):
        return "yes" if v else "no"
    if isinstance(v, numbers.Integral):
        return f"{v:,}" if abs(v) >= 10000 else str(v)
    if isinstance(v, numbers.Real):
        v = float(v)
        if math.isnan(v):
            return ""
        if v == int(v) and abs(v) < 1e15:
            return f"{int(v):,}" if abs(v) >= 10000 else str(int(v))
        return f"{v:.3g}" if abs(v) < 10 else f"{v:,.1f}"
    return str(v).replace("|", "\\|")


#: Columns kept for plots only: the plot labels and the native median (the ``native`` column
#: prints it with its interval).
PLOT_ONLY = ("value", "native_value")


def markdown_table(frame: pd.DataFrame) -> str:
    """``frame`` as a GitHub Markdown table (the :data:`PLOT_ONLY` columns left out)."""
    f = frame[[c for c in frame.columns if c not in PLOT_ONLY]]
    lines = ["| " + " | ".join(f.columns) + " |", "|" + "---|" * len(f.columns)]
    for r in f.itertuples(index=False):  # per-column types (iterrows would upcast ints)
        lines.append("| " + " | ".join(_cell(v) for v in r) + " |")
    return "\n".join(lines)


def _series(t: framework.Table) -> list[str]:
    if t.plot and t.plot.series is not None:
        return [c for c in t.plot.series if c in t.frame.columns]
    cols = [c for c in t.frame.columns if c.startswith("sim:")]
    if "native_value" in t.frame.columns and t.frame["native_value"].notna().any():
        cols.append("native_value")
    return cols


def plot_table(t: framework.Table, path: Path) -> Path | None:
    """Draw ``t`` to ``path`` (PNG) with its title, axis labels and a legend; the seed's
    numbers, where numeric, as black markers. Written whole or not at all."""
    # a Figure of its own, not pyplot: the process's backend (a notebook's) stays as it is
    from matplotlib.figure import Figure

    p, f = t.plot, t.frame
    series = _series(t)
    if p is not None and p.draw is not None and len(f):
        fig = Figure(figsize=(7.5, 6.0))
        p.draw(t, fig.subplots())
        fig.tight_layout()
        return _save(fig, path)
    if p is None or not len(f) or not series:
        return None
    fig = Figure(figsize=(max(6.0, min(16.0, 0.45 * len(f) + 4)), 4.5))
    ax = fig.subplots()
    label = {"native_value": "native (this machine)"}
    if p.kind == "line":
        for c in series:
            ax.plot(f[p.x], f[c], marker="o", label=label.get(c, c.removeprefix("sim:")))
        if p.logx:
            ax.set_xscale("log", base=2)
        xs = list(f[p.x])
    else:
        n = len(series)
        width = 0.8 / n
        for j, c in enumerate(series):
            pos = [i + (j - (n - 1) / 2) * width for i in range(len(f))]
            vals = pd.to_numeric(f[c], errors="coerce").fillna(0.0)
            ax.bar(pos, vals, width, label=label.get(c, c.removeprefix("sim:")))
        ax.set_xticks(range(len(f)), [str(v) for v in f[p.x]], rotation=35, ha="right",
                      fontsize=8)
        xs = list(range(len(f)))
    ref = next((c for c in ("seed", "upstream") if c in f), None)  # the upstream figures
    seed = pd.to_numeric(f[ref], errors="coerce") if ref else None
    if seed is not None and seed.notna().any():
        ax.plot([x for x, s in zip(xs, seed, strict=True) if pd.notna(s)],
                [s for s in seed if pd.notna(s)], "k*", markersize=11,
                label="seed (upstream)" if ref == "seed" else "upstream")
    if p.ref is not None:
        ax.axhline(p.ref, color="grey", linewidth=0.8)
    if p.logy:
        ax.set_yscale("symlog", linthresh=10)
    ax.set_title(t.title, fontsize=10)
    ax.set_xlabel(p.xlabel)
    ax.set_ylabel(p.ylabel)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    fig.tight_layout()
    return _save(fig, path)


def _save(fig: Any, path: Path) -> Path:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        fig.savefig(tmp, dpi=100, format="png", metadata={"Software": None})
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def _provenance(rows: pd.DataFrame) -> str:
    def first(col: str) -> Any:
        return rows[col].dropna().iloc[0] if col in rows and rows[col].notna().any() else None

    commits = sorted({str(c)[:12] for c in rows.get("commit", pd.Series()).dropna()})
    dates = rows["date_utc"].dropna() if "date_utc" in rows else pd.Series(dtype=str)
    span = f"{dates.min()} to {dates.max()}" if len(dates) else "unknown dates"
    return (f"{len(rows)} cells at commit {', '.join(commits) or 'unknown'}"
            f"{' (with local changes)' if first('dirty') else ''}, {span}; machine: "
            f"{first('machine_cpu')} ({first('machine_cores')} cores; caches "
            f"{first('machine_caches')}; kernel {first('machine_kernel')}; THP "
            f"{first('machine_thp')}; 1-minute load {rows['machine_load_1m'].min()}-"
            f"{rows['machine_load_1m'].max()} while the cells ran)."
            if "machine_load_1m" in rows else f"{len(rows)} cells.")


#: The line above a table with an uncalibrated `local` column: how to calibrate.
CALIBRATE_HINT = (f"`{sim_local.UNCALIBRATED_LABEL}`: this machine's cache sizes with "
                  "published core figures, not measured here; `kvsim calibrate --quick` "
                  "measures it in a few minutes, then rerun for a calibrated `local`.")


#: The line above the tables of a run without `local` on a machine that cannot model itself.
LOCAL_ABSENT_HINT = ("`local` is not in these tables: this machine is not calibrated and its "
                     "core has no published figures; `kvsim calibrate --quick` measures it in "
                     "a few minutes, then rerun for a `local` column.")


def calibrate_note(cpus: list[str] | None) -> str | None:
    """The line to print above a run's tables about this machine's `local`: none when it
    is calibrated, or when the tables carry the mark themselves (`local (uncalibrated)`,
    with :data:`CALIBRATE_HINT` above them); :data:`LOCAL_ABSENT_HINT` when a run on the
    default CPUs leaves `local` out because it has no timing model."""
    if sim_local.is_calibrated() or (cpus and "local" not in cpus):
        return None
    return None if sim_local.core_is_known() else LOCAL_ABSENT_HINT


def experiment_markdown(name: str, rows: pd.DataFrame, plots: bool = True) -> str:
    exp = framework.get(name)
    out = [f"## {name}: {exp.title}", "", f"Seed: {exp.seed}. {' '.join(exp.doc.split())}",
           "", _provenance(rows), ""]
    for t in exp.tables(rows):
        out += [f"### {t.title}", "", f"Unit: {t.unit}.", ""]
        if any(str(c).endswith(sim_local.UNCALIBRATED_LABEL) for c in t.frame.columns):
            out += [CALIBRATE_HINT, ""]
        out.append(markdown_table(t.frame) if len(t.frame) else "(no rows)")
        if t.note:
            out += ["", t.note[0].upper() + t.note[1:] + ("" if t.note.endswith(".") else ".")]
        if plots and t.plot is not None:
            out += ["", f"![{t.title}]({t.name}.png)"]
        out.append("")
    return "\n".join(out)


def tables_json(name: str, rows: pd.DataFrame) -> dict[str, Any]:
    """The experiment's tables as JSON (the result file ``NAME.json``; README renderings
    read it): ``{"experiment", "title", "seed", "cells", "commits", "machine", "tables":
    [{"name", "title", "unit", "note", "columns", "rows"}]}``."""
    exp = framework.get(name)

    def plain(v: Any) -> Any:
        if v is None or (isinstance(v, float) and math.isnan(v)):
            return None
        if isinstance(v, np.generic):
            return plain(v.item())
        return v

    tabs = []
    for t in exp.tables(rows):
        f = t.frame.drop(columns=[c for c in PLOT_ONLY if c in t.frame.columns])
        tabs.append({"name": t.name, "title": t.title, "unit": t.unit, "note": t.note,
                     "columns": list(f.columns),
                     "rows": [[plain(v) for v in r] for r in f.itertuples(index=False)]})
    first = rows.iloc[0]
    return {"experiment": name, "title": exp.title, "seed": exp.seed, "cells": len(rows),
            "commits": sorted({str(c) for c in rows["commit"].dropna()}) if "commit" in rows
            else [],
            "machine": {k: plain(first[k]) for k in rows.columns if k.startswith("machine_")},
            "load_1m_range": [plain(rows["machine_load_1m"].min()),
                              plain(rows["machine_load_1m"].max())]
            if "machine_load_1m" in rows else None,
            "tables": tabs}


def write_experiment(out: Path, name: str, rows: pd.DataFrame) -> None:
    """Write the experiment's plots, NAME.md and NAME.json (a result file with provenance)
    into ``out/name``."""
    from kvsim import provenance

    d = Path(out) / name
    # the provenance of the figures is that of the cells: the commit and tree state they
    # were computed at, the last cell's date, the highest load while they ran
    prov = provenance.provenance()
    commits = sorted({str(c) for c in rows["commit"].dropna()}) if "commit" in rows else []
    if len(commits) == 1:
        prov["commit"] = commits[0]
    if "dirty" in rows:
        prov["dirty"] = bool(rows["dirty"].fillna(False).astype(bool).any())
    cmd = "sweep_command" if "sweep_command" in rows else "command"
    if cmd in rows and rows[cmd].nunique() == 1:
        prov["command"] = str(rows[cmd].dropna().iloc[0])
    if "date_utc" in rows and rows["date_utc"].notna().any():
        prov["date_utc"] = str(rows["date_utc"].dropna().max())
    if "machine_load_1m" in rows and rows["machine_load_1m"].notna().any():
        prov["machine"]["load_average_1m"] = float(rows["machine_load_1m"].max())
    provenance.write_result(d / f"{name}.json", {"provenance": prov,
                                                  **tables_json(name, rows)})
    for t in framework.get(name).tables(rows):
        if t.plot is not None and len(t.frame):
            plot_table(t, d / f"{t.name}.png")
    text = experiment_markdown(name, rows) + "\n"
    tmp = d / f".{name}.md.{os.getpid()}.tmp"
    try:
        tmp.write_text(text)
        os.replace(tmp, d / f"{name}.md")
    finally:
        tmp.unlink(missing_ok=True)


def report(out: str | Path) -> str:
    """One Markdown document of every experiment result in ``out`` (ValueError when there
    is none)."""
    out = Path(out)
    if not out.is_dir():
        raise ValueError(f"{out}: not a directory of experiment results")
    parts = [f"# kvsim experiments in {out.name}", ""]
    found = 0
    known = framework.names()
    for name in known:
        pq = out / name / f"{name}.parquet"
        if not pq.exists():
            continue
        rows = pd.read_parquet(pq)
        text = experiment_markdown(name, rows, plots=False)
        # plots live beside each experiment's rows
        for t in framework.get(name).tables(rows):
            if (out / name / f"{t.name}.png").exists():
                text = text.replace(f"### {t.title}\n", f"### {t.title}\n\n"
                                    f"![{t.title}]({name}/{t.name}.png)\n", 1)
        parts.append(text)
        found += 1
    if not found:
        raise ValueError(f"{out}: no experiment results (expected NAME/NAME.parquet for a "
                         f"NAME among {', '.join(known)})")
    return "\n".join(parts)
