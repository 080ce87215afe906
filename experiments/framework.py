"""Experiments: named grids of cells, and the tables they are read through.

An :class:`Experiment` has a name, the upstream study it reproduces (``seed``), and two
functions: ``cells(scale, cpus)`` lists its cell specs (:mod:`kvsim.experiments.cells`)
for ``scale`` ``"small"`` or ``"full"`` and the CPU presets to simulate, and
``tables(rows)`` turns the assembled rows (one per cell, a pandas DataFrame) into
:class:`Table` objects: a frame with a ``seed`` column beside kvsim's figures, a title, a
unit and a :class:`Plot`. Experiments register themselves with :func:`register`
(:mod:`kvsim.experiments.studies` holds them); :func:`get` and :func:`names` find them.

Every cell spec carries ``experiment`` (the name), ``kind``, and ``params`` (the grid
coordinates the tables group by). A sim cell also carries ``group`` (the comparison it
belongs to: the same configuration but for the variant) and ``baseline`` (True for the
group's reference variant); the runner derives each sim row's ``speedup`` from those.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import pandas as pd

from kvsim.experiments import cells

__all__ = ["ALL_SCALES", "SCALES", "Experiment", "Plot", "Table", "get", "names", "native_cell",
           "published_name", "register", "sim_cell", "speedup_table", "valkey_cell"]

SCALES = ("small", "full")
#: every scale ``kvsim experiment run --scale`` takes: the framework's, and those some
#: experiments add (:attr:`Experiment.scales`; ``seed``: the server study's seed rows, each
#: at its seed's own key count)
ALL_SCALES = (*SCALES, "seed")


def published_name(experiment: str, stem: str, name: str) -> str:
    """File or table ``name`` of ``experiment`` as published under the result name ``stem``
    (the experiment's own, or ``--publish-as``): a name that starts with the experiment's
    has that part replaced by ``stem``, any other is prefixed with ``stem-``."""
    return stem + name[len(experiment):] if name.startswith(experiment) else f"{stem}-{name}"


@dataclass(frozen=True)
class Plot:
    """How a table is drawn: ``x`` (a column; categories, or numbers with ``kind="line"``),
    the series (columns; default every column but ``x``, the label columns and ``seed``),
    axis labels with units, and an optional reference line (1.0 for a speedup)."""

    x: str
    ylabel: str
    xlabel: str
    kind: str = "bar"
    series: Sequence[str] | None = None
    ref: float | None = 1.0
    logx: bool = False
    #: a symmetric-log y axis (linear near 0, logarithmic beyond 10 in either sign): for
    #: figures of several magnitudes in one plot
    logy: bool = False
    #: draws the whole plot instead: ``draw(table, ax)`` (for example a scatter against y = x)
    draw: Callable[[Any, Any], None] | None = None


@dataclass
class Table:
    """One table of an experiment: ``frame`` (with a ``seed`` column), its title, the unit
    of its figures, an explanatory note and the plot."""

    name: str
    title: str
    frame: pd.DataFrame
    unit: str
    plot: Plot | None = None
    note: str = ""


@dataclass(frozen=True)
class Experiment:
    name: str
    title: str
    seed: str  #: the upstream study reproduced (PR numbers)
    cells: Callable[[str, list[str]], list[dict[str, Any]]]
    tables: Callable[[pd.DataFrame], list[Table]]
    doc: str = ""
    needs: Sequence[str] = field(default_factory=tuple)  #: cell kinds beyond sim/native
    #: the scales ``cells`` takes (:data:`SCALES`, and any of :data:`ALL_SCALES` it adds)
    scales: Sequence[str] = SCALES


_REGISTRY: dict[str, Experiment] = {}
_MODULE: dict[str, str] = {}  #: experiment name -> the module that registered it

#: The order `kvsim experiment list` and `all` give the modules' experiments in, whatever
#: order the modules are first imported in (within a module: its registration order).
MODULE_ORDER = ("studies", "validation", "studies_upstream", "warmup_convergence",
                "gem5_compare", "micro", "seed_absolute", "fidelity", "pipeline_demo",
                "warm_setup", "warm_check", "ablation", "scale")


def register(exp: Experiment) -> Experiment:
    """Register ``exp``; without a ``doc``, the docstring of its ``cells`` function is it."""
    if not exp.doc:
        exp = replace(exp, doc=" ".join((exp.cells.__doc__ or "").split()))
    if exp.name in _REGISTRY:
        raise ValueError(f"experiment {exp.name!r} is registered twice")
    _REGISTRY[exp.name] = exp
    _MODULE[exp.name] = sys._getframe(1).f_globals.get("__name__", "").rpartition(".")[2]
    return exp


def _rank(name: str) -> int:
    mod = _MODULE.get(name, "")
    return MODULE_ORDER.index(mod) if mod in MODULE_ORDER else len(MODULE_ORDER)


def _load() -> None:
    from kvsim.experiments import (  # noqa: F401
        ablation,
        fidelity,
        gem5_compare,
        micro,
        pipeline_demo,
        scale,
        seed_absolute,
        studies,
        studies_upstream,
        validation,
        warm_check,
        warm_setup,
        warmup_convergence,
    )


def names() -> list[str]:
    """Registered experiment names, in registration order."""
    _load()
    return sorted(_REGISTRY, key=_rank)


def get(name: str) -> Experiment:
    """The experiment ``name``; ValueError naming the known ones otherwise."""
    _load()
    if name not in _REGISTRY:
        raise ValueError(f"unknown experiment {name!r} (known: {', '.join(names())}, all)")
    return _REGISTRY[name]


# --- cell builders -----------------------------------------------------------------------------

def _clean(opts: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in opts.items() if v is not None and v is not False}


def sim_cell(experiment: str, workload: str, options: dict[str, Any], cpu: str,
             params: dict[str, Any], group: str, baseline: bool) -> dict[str, Any]:
    """A traced-and-simulated cell (``options`` include the variant)."""
    return {"experiment": experiment, "kind": "sim", "workload": workload,
            "options": _clean(options), "cpu": cpu, "params": params, "group": group,
            "baseline": baseline}


def native_cell(experiment: str, workload: str, a: dict[str, Any], b: dict[str, Any],
                rounds: int, params: dict[str, Any], env: dict[str, str] | None = None,
                warmup_rounds: int = 1, halfwidth: float | None = None,
                min_rounds: int | None = None) -> dict[str, Any]:
    """A native timing pair: ``a`` the baseline's options, ``b`` the variant's.

    ``rounds`` interleaved rounds; with ``halfwidth``, at most ``rounds``: the cell stops
    after ``min_rounds`` or more once the speedup's bootstrap 95 % interval is no wider than
    ``halfwidth`` (a fraction of the speedup) either side (:mod:`kvsim.experiments.cells`).
    A pair whose sides can alternate in one c_ref process (``cells.versus_options``) does,
    ``cells.IN_PROCESS_ROUNDS`` timed rounds per process."""
    spec = {"experiment": experiment, "kind": "native", "workload": workload, "a": _clean(a),
            "b": _clean(b), "rounds": rounds, "warmup_rounds": warmup_rounds,
            "params": params}
    if cells.versus_options(workload, spec["a"], spec["b"]) is not None:
        spec["rounds_per_process"] = cells.IN_PROCESS_ROUNDS
    if halfwidth is not None:
        spec["halfwidth"] = halfwidth
        spec["min_rounds"] = min(rounds, min_rounds or rounds)
    if env:
        spec["env"] = env
    return spec


def valkey_cell(experiment: str, valkey: dict[str, Any], params: dict[str, Any]) -> dict:
    """A real-Valkey cell: ``valkey`` is passed to ``run_valkey_cell``."""
    return {"experiment": experiment, "kind": "valkey", "valkey": valkey, "params": params}


# --- tables ------------------------------------------------------------------------------------

def _fmt_native(r: pd.Series, convert: Callable[[float], float] | None = None) -> str:
    """``1.23x [1.10, 1.31]`` (or, with ``convert``, the same in the table's unit:
    ``+18.7 [+9.1, +23.7]``), then "within noise" when the interval includes 1.0."""
    if pd.isna(r.get("speedup")):
        return ""
    lo, hi = r.get("speedup_ci95_low"), r.get("speedup_ci95_high")
    have = pd.notna(lo) and pd.notna(hi)
    if convert is None:
        text = f"{r['speedup']:.2f}x" + (f" [{lo:.2f}, {hi:.2f}]" if have else "")
    else:
        text = f"{convert(r['speedup']):+.1f}" + (
            f" [{convert(lo):+.1f}, {convert(hi):+.1f}]" if have else "")
    return text + (" within noise" if r.get("verdict") == "within noise" else "")


def speedup_table(rows: pd.DataFrame, coords: Sequence[str],
                  seed: Callable[[dict[str, Any]], float | None],
                  value: str = "speedup", native_value: str = "speedup",
                  convert: Callable[[float], float] | None = None) -> pd.DataFrame:
    """The usual table shape: one line per ``coords`` combination (the variant among them)
    with ``seed`` (the upstream number, from ``seed(coords)``), ``native`` (this machine:
    median [bootstrap 95 % interval], "within noise" when it includes 1.0), ``native_value``
    (the median alone, for plots; left out of printed tables) and one ``sim:<cpu>`` column
    per preset.

    ``convert`` maps a speedup to the table's unit (for example to a percent change), for
    every column.
    """
    conv = convert or (lambda v: v)
    sim = rows[(rows.kind == "sim")] if "kind" in rows else rows.iloc[0:0]
    nat = rows[(rows.kind == "native")] if "kind" in rows else rows.iloc[0:0]
    keys = []
    for df in (sim, nat):
        for _, r in df.iterrows():
            k = tuple(r.get(c) for c in coords)
            base = r.get("baseline")
            if k not in keys and not (df is sim and pd.notna(base) and bool(base)):
                keys.append(k)  # a baseline's line would be all 1.0 (or 0 %): left out
    out = []
    for k in keys:
        sel = dict(zip(coords, k, strict=True))
        line: dict[str, Any] = dict(sel)
        line["seed"] = seed(sel)
        n = nat
        for c, v in sel.items():
            n = n[n[c] == v] if c in n else n.iloc[0:0]
        if len(n):
            r = n.iloc[0]
            line["native"] = _fmt_native(r, convert)
            line["native_value"] = conv(r[native_value]) if pd.notna(r[native_value]) else None
        else:
            line["native"], line["native_value"] = "", None
        s = sim
        for c, v in sel.items():
            s = s[s[c] == v] if c in s else s.iloc[0:0]
        for _, r in s.iterrows():
            v = r.get(value)
            line[f"sim:{r['cpu']}"] = conv(v) if v is not None and pd.notna(v) else None
        out.append(line)
    frame = pd.DataFrame(out)
    try:
        frame = frame.sort_values(list(coords), kind="stable").reset_index(drop=True)
    except TypeError:  # coordinates of mixed types keep the grid's order
        pass
    sims = sorted(c for c in frame.columns if c.startswith("sim:"))
    front = [c for c in frame.columns if not c.startswith("sim:")]
    return frame[front + sims]


def change_pct(speedup: float) -> float:
    """A speedup as the percent change of a time (seed 000's and 001's unit):
    ``(t_base - t_variant) / t_base * 100``."""
    return (1.0 - 1.0 / speedup) * 100.0


def throughput_change_pct(speedup: float) -> float:
    """A speedup as the percent change of a throughput: ``(speedup - 1) * 100``."""
    return (speedup - 1.0) * 100.0
