"""Cells: the unit of work of an experiment, each a pure function of its spec.

A cell's spec is a JSON-able dict; its identity is the hash of that dict (:func:`cell_id`).
A sweep keys each result by its spec and :func:`inputs_fingerprint`, the hash of what the
kind's result is computed by (the c_ref CLI's and the simulator engine's bytes, the Python
modules that trace, simulate, time and summarise); the commit is recorded beside it. A
commit that changes none of those (documentation, tests, other experiments' tables) keeps
every id; one that changes c_ref or the simulator changes them. What a result depends on
outside the code is named too (:func:`context_key`): a timed cell's (``native``,
``valkey`` and the kinds counted as them) the machine it ran on, a ``sim`` cell's on the
``local`` CPU that CPU's configuration, so a results folder resumed on another machine, or
after `kvsim calibrate`, recomputes those cells instead of mixing two machines in a table.
Three kinds:

``sim``
    Trace one c_ref workload configuration (``workload``, ``options``, the variant among
    them) and simulate it on one CPU preset (``cpu``). Cells that differ only in their CPU
    share one trace (:func:`trace_key`): :func:`run_sim_group` traces it once and simulates
    it on all their CPUs in one pass over its records (``sim.simulate_many``); traces that
    differ only in their variants share one setup (``cref.setup_key``):
    :func:`run_setup_group` traces them in one c_ref run and simulates their warm-up prefix
    once, each trace going on from a forked copy of the engines (the same metrics). Metrics:
    cycles, instructions, operations (COMMAND markers; in a trace without them, OP markers: a
    load's keys, with ``operation_unit`` saying which), cycles and demand misses per
    operation, demand misses per level role (L1, L2, LLC) and misses of every kind there
    (``misses_<role>``), MLP (average L1 misses in flight:
    the miss-buffer occupancy), software prefetches issued / useful / late and the late
    share, the top stall cause, demand misses per structure (``l1_misses_<tag>``,
    ``llc_misses_<tag>``: the trace's tags, ``object``, ``bucket``, ``reply_buf``, ...) and
    the average load and L1-miss latency.
    The speedup over the comparison group's baseline is derived when the experiment's rows
    are assembled (:mod:`kvsim.experiments.runner`), from the baseline cell's cycles.
``native``
    Time two configurations ``a`` (baseline) and ``b`` of one workload on this machine:
    ``warmup_rounds`` discarded rounds, then ``rounds`` interleaved rounds (A B, B A, A B,
    ...: the order alternates, so a drift or the previous run's after-effects favour
    neither side),
    one ``kvsim-cref native --repeat 1`` process per run, timed by its process CPU time.
    With ``halfwidth`` in the spec, ``rounds`` is a ceiling: from ``min_rounds`` on, the
    pair stops once the bootstrap 95 % interval of the speedup is within ``halfwidth`` of
    it either side (a fixed-width sequential interval, Chow and Robbins, *Ann. Math.
    Statist.* 36, 1965: the stopping rule looks at the interval's width, never at whether
    it excludes 1.0). Only the first round's runs compute c_ref's untimed reply check
    (``KVSIM_CREF_REPLY_CHECK``), and a load pair builds its snapshot once
    (``KVSIM_CREF_SNAPSHOT_CACHE``, c_ref/snapcache.c), so the timed runs are most of a
    pair's wall time.
    With ``rounds_per_process`` in the spec (set by ``framework.native_cell`` where
    :func:`versus_options` allows it: every workload, sides differing only in their
    variants), the two sides alternate inside one c_ref process (``kvsim-cref
    native --versus-*``) on one populated server (MSET into an empty keyspace, and a load's
    restarts: a fresh server per run, on the previous one's pages with
    ``KVSIM_CREF_ARENA_WARM``): each
    process runs ``warmup_rounds`` discarded rounds then up to ``rounds_per_process`` timed
    ones, the order still alternating from round to round across processes, and only the
    first process checks the replies (each side's own).
    A pair then pays the setup, populating millions of keys, once per process instead of
    once per run.
    Metrics: the median of the rounds' ratios A/B with its bootstrap and sign-test 95 %
    intervals, the ratio of the minimums, ``verdict`` ("faster", "slower" or "within
    noise": the bootstrap interval includes 1.0, or fewer than ``stats.MIN_ROUNDS``
    rounds ran), both sides' median and minimum CPU seconds, arena bytes and keys.
``valkey``
    The real Valkey server (``kvsim.experiments.valkey.run_valkey_cell``, imported only
    when such a cell runs): its ``valkey`` dict is passed on, its metrics returned as they
    come.

:func:`run_cell` runs any of them and returns ``{"metrics": {...}, "seconds": wall}``.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

__all__ = ["CellSkipped", "KIND_BASE", "cell_id", "cell_inputs", "context_key",
           "forget_context", "inputs_fingerprint", "machine_identity", "native_rounds",
           "register_kind", "run_cell", "run_setup_group", "run_sim_group", "trace_key"]

#: Cell kinds an experiment module adds (:func:`register_kind`): kind -> function(spec)
#: returning the metrics.
_EXTRA_KINDS: dict[str, Any] = {}
#: Every kind -> the built-in kind it counts as for ``kvsim experiment run --only``.
KIND_BASE: dict[str, str] = {"sim": "sim", "native": "native", "valkey": "valkey"}


def register_kind(kind: str, run: Any, counts_as: str, *, module: str | tuple[str, ...],
                  artifacts: tuple[str, ...] = ()) -> None:
    """Add cell kind ``kind`` computed by ``run(spec) -> metrics``; it runs in the serial
    phase (after the parallel sim cells, in the order the experiment lists it) and is
    selected by ``--only counts_as``. Its result depends on what ``counts_as`` depends on
    (:func:`cell_inputs`), the kvsim.experiments ``module`` that defines it (or the modules
    that compute it, a tuple) and the compiled ``artifacts`` named."""
    if kind in KIND_BASE:
        raise ValueError(f"cell kind {kind!r} is registered twice")
    _EXTRA_KINDS[kind] = run
    KIND_BASE[kind] = counts_as
    arts, packages, modules = _INPUTS[counts_as]
    own = (module,) if isinstance(module, str) else tuple(module)
    _INPUTS[kind] = (tuple(dict.fromkeys(arts + artifacts)), packages,
                     tuple(dict.fromkeys(modules + own)))


class CellSkipped(RuntimeError):
    """The cell cannot run on this machine (a missing server or tool); the message says
    what to install. Nothing is stored, so a later run tries it again."""


def _canonical(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"))


def cell_id(spec: dict) -> str:
    """16 hex digits identifying ``spec`` (its canonical JSON's SHA-256)."""
    return hashlib.sha256(_canonical(spec).encode()).hexdigest()[:16]


def trace_key(spec: dict) -> str:
    """Identity of a sim cell's trace: the workload and options (not the CPU), and the
    c_ref CLI that writes it."""
    return hashlib.sha256(_canonical([spec["workload"], spec["options"],
                                      _digest_artifact("kvsim-cref")]).encode()
                          ).hexdigest()[:16]


# --- what a cell's result depends on -----------------------------------------------------------

#: per kind: compiled artifacts (kvsim.artifacts names), the modules whose import closure in
#: the model counts (below), and the kvsim.experiments modules that compute the cell
_INPUTS: dict[str, tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]] = {
    "sim": (("kvsim-cref", "libkvsim_sim.so"),
            ("kvsim.sim", "kvsim.sim.api", "kvsim.sim.config", "kvsim.traces",
             "kvsim.experiments.cells", "kvsim.experiments.cref",
             "kvsim.experiments.summary"),
            ("cells", "cref", "summary")),
    "native": (("kvsim-cref",), (), ("cells", "cref", "kvsim.stats")),
    "valkey": ((), (), ("cells", "kvsim.stats", "valkey", "valkey_server")),
}
#: The model: a root's closure stays inside these packages, and their data files (the CPU
#: presets) count whenever a root does. Benchmarks and other programs beside the model are
#: not imported by it, so editing them changes no cell.
_MODEL_PACKAGES = ("kvsim.sim", "kvsim.traces")
_DATA_SUFFIXES = (".toml", ".json")  # compiled code counts by its artifact


def import_closure(roots: tuple[str, ...], within: tuple[str, ...] = _MODEL_PACKAGES
                   ) -> dict[str, Path]:
    """Module name -> source file of ``roots`` and every module of the ``within`` packages
    they import, directly or not: every ``import`` statement of each source, those inside
    functions (imported at first use) included, and in a package's ``__init__`` every
    string that names one of its submodules (a module ``__getattr__``'s table of what it
    imports at first use); read with :mod:`ast` (nothing is run)."""
    import ast
    import importlib.machinery
    import importlib.util

    def inside(name: str) -> bool:
        return any(name == w or name.startswith(w + ".") for w in within)

    def source_spec(name: str):
        # from the files, not sys.modules: a module kept under an old name as an alias
        # replaces itself there by its new module, and the closure must not depend on
        # whether it was imported yet
        parent = name.rpartition(".")[0]
        if parent:
            pspec = importlib.util.find_spec(parent)
            if pspec is not None and pspec.submodule_search_locations:
                spec = importlib.machinery.PathFinder.find_spec(
                    name, list(pspec.submodule_search_locations))
                if spec is not None:
                    return spec
        return importlib.util.find_spec(name)

    seen: dict[str, Path] = {}
    todo = list(roots)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        spec = source_spec(name)
        if spec is None or not (spec.origin or "").endswith(".py"):
            continue
        seen[name] = Path(spec.origin)
        package = name if spec.submodule_search_locations else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(seen[name].read_bytes())):
            if isinstance(node, ast.Import):
                found = [a.name for a in node.names]
            elif (isinstance(node, ast.Constant) and isinstance(node.value, str)
                  and spec.submodule_search_locations and node.value.isidentifier()):
                found = [f"{name}.{node.value}"]  # a package's table of lazy submodules
            elif isinstance(node, ast.ImportFrom):
                base = package.split(".")[:len(package.split(".")) - node.level + 1] \
                    if node.level else []
                mod = ".".join(base + ([node.module] if node.module else []))
                found = [mod] + [f"{mod}.{a.name}" for a in node.names]
            else:
                continue
            for n in found:
                if inside(n) and n not in seen:
                    try:
                        if source_spec(n) is not None:
                            todo.append(n)
                    except (ImportError, ValueError):  # a name imported from a module
                        pass
    return seen


def cell_inputs(kind: str) -> list[tuple[str, Path | None]]:
    """What a cell of ``kind`` is computed by, as ``(label, path)`` pairs sorted by label:
    ``artifact:NAME`` (None when the artifact is missing); the model's Python, every module
    of :data:`_MODEL_PACKAGES` in the import closure (:func:`import_closure`) of the kind's
    roots, and those packages' data files (the CPU presets), tests excluded; and the kind's
    kvsim.experiments modules (or other kvsim modules, by full name: the statistics,
    kvsim.stats). Labels are relative to the package, so the list does not depend on where
    kvsim is installed."""
    import importlib
    import importlib.util

    from kvsim import artifacts

    arts, roots, modules = _INPUTS[kind]
    out: list[tuple[str, Path | None]] = []
    for name in arts:
        try:
            out.append((f"artifact:{name}", artifacts.path(name)))
        except artifacts.ArtifactMissing:
            out.append((f"artifact:{name}", None))
    if roots:
        where = {pkg: Path(importlib.import_module(pkg).__file__).parent
                 for pkg in _MODEL_PACKAGES}
        files = set(import_closure(roots).values())
        for root in where.values():
            files |= {f for f in root.rglob("*") if f.is_file() and f.suffix in _DATA_SUFFIXES}
        for f in files:
            pkg, root = next(((p, r) for p, r in where.items() if f.is_relative_to(r)),
                             (None, None))
            if root is None:  # a root outside the model: listed below if it counts
                continue
            rel = f.relative_to(root)
            if ("tests" not in rel.parts and "__pycache__" not in rel.parts
                    and not any(p.startswith((".", "build")) for p in rel.parts)):
                out.append((f"{pkg}/{rel.as_posix()}", f))
    here = Path(__file__).parent
    for m in modules:  # a kvsim.experiments module, or another kvsim module by full name
        if "." in m:
            out.append((f"{m.replace('.', '/')}.py", Path(importlib.util.find_spec(m).origin)))
        else:
            out.append((f"kvsim.experiments/{m}.py", here / f"{m}.py"))
    return sorted(out, key=lambda t: t[0])


def _digest_artifact(name: str) -> str | None:
    from kvsim import artifacts, provenance

    try:
        return provenance.file_sha256(artifacts.path(name))
    except (artifacts.ArtifactMissing, OSError):
        return None


def inputs_fingerprint(kind: str) -> str:
    """16 hex digits: the SHA-256 of :func:`cell_inputs` (each label and its file's bytes;
    a missing artifact counts as missing). ValueError on an unknown kind."""
    if kind not in _INPUTS:
        raise ValueError(f"unknown cell kind {kind!r} (known: {', '.join(_INPUTS)})")
    h = hashlib.sha256()
    for label, path in cell_inputs(kind):
        h.update(label.encode() + b"\0")
        data = path.read_bytes() if path is not None else b"<missing>"
        h.update(len(data).to_bytes(8, "little") + data)
    return h.hexdigest()[:16]


@functools.cache
def machine_identity() -> str:
    """16 hex digits naming what a timing on this machine depends on: the CPU (vendor,
    family, model, model name), the cache sizes the kernel reports, the transparent huge
    page mode and the number of CPUs. Not the host name, load or date."""
    from kvsim.experiments import machine
    from kvsim.sim.calibrate import cpu_identity

    blob = [cpu_identity(), machine.caches(), machine.thp(), os.cpu_count()]
    return hashlib.sha256(_canonical(blob).encode()).hexdigest()[:16]


@functools.cache
def _local_cpu_digest() -> str:
    """16 hex digits of the ``local`` CPU's configuration as this machine loaded it when the
    sweep began (calibrated or not), or of the reason it could not be loaded. Kept for the
    sweep (:func:`forget_context`): a calibration during it (the validation's) must not
    change the ids of the cells it already planned, only those of the next sweep."""
    from kvsim.sim.config import ConfigError, load_cpu

    try:
        text = repr(load_cpu("local"))
    except ConfigError as exc:
        text = f"unavailable: {exc}"
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def forget_context() -> None:
    """Read the ``local`` CPU again for the next :func:`context_key` (a new sweep)."""
    _local_cpu_digest.cache_clear()


def context_key(spec: dict) -> dict[str, str]:
    """What ``spec``'s result depends on besides its spec and code: ``{"machine": ...}`` for
    a kind counted as ``native`` or ``valkey``, ``{"local": ...}`` for a ``sim`` cell on the
    ``local`` CPU, else nothing (a preset's cell is the same on every machine)."""
    out: dict[str, str] = {}
    if KIND_BASE.get(spec.get("kind", "")) in ("native", "valkey"):
        out["machine"] = machine_identity()
    if spec.get("kind") == "sim" and spec.get("cpu") == "local":
        out["local"] = _local_cpu_digest()
    return out


def run_cell(spec: dict, trace_dir: str | None = None) -> dict[str, Any]:
    """Compute one cell. ``trace_dir``: where sim cells may keep and reuse their traces
    (shared by the cells that simulate one trace on several CPUs); None traces into a
    temporary directory."""
    t0 = time.perf_counter()
    kind = spec.get("kind")
    if kind == "sim":
        metrics = _sim(spec, trace_dir)
    elif kind == "native":
        metrics = _native(spec)
    elif kind == "valkey":
        metrics = _valkey(spec)
    elif kind in _EXTRA_KINDS or _load_kinds(kind):
        metrics = _EXTRA_KINDS[kind](spec)
    else:
        raise ValueError(f"cell {cell_id(spec)}: unknown kind {kind!r}")
    return {"metrics": metrics, "seconds": time.perf_counter() - t0}


def _load_kinds(kind: str) -> bool:
    from kvsim.experiments import framework

    framework.names()  # imports the experiment modules, which register their kinds
    return kind in _EXTRA_KINDS


# --- sim ---------------------------------------------------------------------------------------

def _sim(spec: dict, trace_dir: str | None) -> dict[str, Any]:
    return run_sim_group([spec], trace_dir)[0]["metrics"]


def run_sim_group(specs: list[dict], trace_dir: str | None = None) -> list[dict[str, Any]]:
    """Compute sim cells that share one trace (the same :func:`trace_key`; ValueError
    otherwise): the workload is traced once (reused from ``trace_dir`` when it is there;
    None: a temporary directory) and simulated on every cell's CPU in one pass
    (``sim.simulate_many``: each chunk decoded once, the CPUs side by side on the cores).
    Returns one ``{"metrics", "seconds"}`` per spec, in order, each the same as
    :func:`run_cell` gives for that spec alone; ``seconds`` is the group's wall time shared
    equally among its cells."""
    from kvsim.experiments import cref

    if not specs:
        return []
    key = trace_key(specs[0])
    if any(s.get("kind") != "sim" or trace_key(s) != key for s in specs):
        raise ValueError("run_sim_group: the cells must be sim cells of one trace")
    t0 = time.perf_counter()
    cpus = list(dict.fromkeys(s["cpu"] for s in specs))  # each CPU simulated once
    if trace_dir is not None:
        Path(trace_dir).mkdir(parents=True, exist_ok=True)
        path = Path(trace_dir) / f"{key}.kvt"
        if not path.exists():
            cref.trace(specs[0]["workload"], path, specs[0]["options"])  # written atomically
        by_cpu = _simulate_many(path, cpus)
    else:
        with tempfile.TemporaryDirectory(prefix="kvsim-cell-") as tmp:
            path = Path(tmp) / "t.kvt"
            cref.trace(specs[0]["workload"], path, specs[0]["options"])
            by_cpu = _simulate_many(path, cpus)
    share = (time.perf_counter() - t0) / len(specs)
    return [{"metrics": by_cpu[s["cpu"]], "seconds": share} for s in specs]


def run_setup_group(groups: list[list[dict]], trace_dir: str | None = None,
                    fork: bool = True) -> list[list[dict[str, Any]]]:
    """Compute sim cell groups (each :func:`run_sim_group`'s: the cells of one trace) whose
    traces share one setup (``cref.setup_key``: the same workload and options but for the
    variants'; ValueError otherwise): the traces not yet in ``trace_dir`` (None: a
    temporary directory) are traced in one c_ref run (``cref.trace_many``: the setup built
    once, each trace the bytes it has traced alone), then each group is simulated as
    :func:`run_sim_group` does, but for their shared warm-up prefix: with ``fork``, it is
    simulated once and each trace continues from a copy of the engines' state
    (:func:`_simulate_continued`; the same metrics). Returns its results per group, in
    order; each cell's ``seconds`` also carries an equal share of the tracing."""
    from kvsim.experiments import cref

    if not groups:
        return []
    key = cref.setup_key(groups[0][0]["workload"], groups[0][0]["options"])
    if any(cref.setup_key(g[0]["workload"], g[0]["options"]) != key for g in groups):
        raise ValueError("run_setup_group: the groups must share one setup")
    if trace_dir is None:
        with tempfile.TemporaryDirectory(prefix="kvsim-cells-") as tmp:
            return run_setup_group(groups, tmp, fork)
    Path(trace_dir).mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    todo = {}
    for g in groups:
        path = Path(trace_dir) / f"{trace_key(g[0])}.kvt"
        if not path.exists():
            todo.setdefault(path, g[0]["options"])
    cref.trace_many(groups[0][0]["workload"], list(todo.items()))
    share = (time.perf_counter() - t0) / sum(len(g) for g in groups)
    paths = [Path(trace_dir) / f"{trace_key(g[0])}.kvt" for g in groups]
    cpus = list(dict.fromkeys(s["cpu"] for g in groups for s in g))
    continued = _simulate_continued(paths, cpus) if fork and len(groups) > 1 else None
    if continued is None:
        out = [run_sim_group(g, trace_dir) for g in groups]
    else:
        out = []
        for g, by_cpu in zip(groups, continued, strict=True):
            each = by_cpu.pop("_seconds") / len(g)
            out.append([{"metrics": by_cpu[s["cpu"]], "seconds": each} for s in g])
    for res in out:
        for r in res:
            r["seconds"] += share
    return out


def _warmup_prefix(path: Path, keep: bool = True) -> tuple[list[Any], int, str, dict]:
    """A trace's warm-up prefix (its records up to and including the first WARMUP_END, as
    arrays; with ``keep`` False, none), how many records it has, their SHA-256 and the
    trace's header; no prefix: ``([], 0, "", header)``."""
    import numpy as np

    from kvsim import traces

    h = hashlib.sha256()
    parts, n = [], 0
    with traces.open(path) as reader:
        header = dict(reader.header)
        for chunk in reader:
            end = np.flatnonzero((chunk["kind"] == traces.KIND_MARKER)
                                 & (chunk["flags"] == traces.MARK_WARMUP_END))
            part = chunk[:end[0] + 1] if len(end) else chunk
            if keep:
                parts.append(np.array(part, copy=True))
            n += len(part)
            h.update(part.tobytes())
            if len(end):
                return parts, n, h.hexdigest(), header
    return [], 0, "", header


def _engine_configs(cpus: list[str], header: dict) -> list[Any]:
    """The engine configurations ``sim.simulate_many`` builds for ``cpus`` and a trace of
    ``header`` (``sim.api.engine_configs`` with its defaults)."""
    from kvsim import sim
    from kvsim.sim.api import engine_configs

    return engine_configs([sim.load_cpu(name) for name in cpus], header)


def _simulate_continued(paths: list[Path], cpus: list[str]
                        ) -> list[dict[str, Any]] | None:
    """Simulate traces that begin with the same warm-up prefix (the setup they share) on
    ``cpus``: the prefix once, then each trace's remaining records from a copy of the
    engines' state (a child process forked per trace, one at a time: the copy is the
    process's memory, every engine field included). Each result equals what
    :func:`_simulate_many` gives for that trace alone (the engines see the same records in
    the same order; tests/test_trace_many.py compares them). None, so that the caller
    simulates each trace whole, where the traces' prefixes or engine configurations
    differ, or the platform cannot fork."""
    import ctypes

    from kvsim.sim import _binding as B

    if not hasattr(os, "fork"):
        return None
    # the first trace's prefix is kept to be simulated; the others' only compared
    prefixes = [_warmup_prefix(p, keep=i == 0) for i, p in enumerate(paths)]
    digest = prefixes[0][2]
    if not digest or any(d != digest for _, _, d, _ in prefixes):
        return None
    cfgs = [_engine_configs(cpus, h) for *_, h in prefixes]
    flat = [[ctypes.string_at(ctypes.addressof(c), ctypes.sizeof(c)) for c in cs]
            for cs in cfgs]
    if any(f != flat[0] for f in flat[1:]):
        return None
    t0 = time.perf_counter()
    engines = [B.Engine(cfg) for cfg in cfgs[0]]
    try:
        for part in prefixes[0][0]:
            for eng in engines:
                eng.run(part)
        warm = time.perf_counter() - t0
        out = []
        for path, (_, skip, _, header) in zip(paths, prefixes, strict=True):
            t1 = time.perf_counter()
            res = _continue_in_child(engines, cfgs[0], cpus, path, skip, header)
            res["_seconds"] = time.perf_counter() - t1 + warm / len(paths)
            out.append(res)
        return out
    finally:
        for eng in engines:
            eng.close()


def _continue_in_child(engines: list[Any], cfgs: list[Any], cpus: list[str], path: Path,
                       skip: int, header: dict) -> dict[str, Any]:
    """Fork; the child runs ``path``'s records after the first ``skip`` on a copy of the
    engines and sends back the cells' metrics per CPU (as :func:`_simulate_many`)."""
    import pickle
    import sys

    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        code = 0
        try:
            os.close(r)
            data = pickle.dumps(("ok", _finish_continued(engines, cfgs, cpus, path, skip,
                                                         header)))
        except BaseException as exc:  # noqa: BLE001 - reported to the parent
            code, data = 1, pickle.dumps(("error", f"{type(exc).__name__}: {exc}"))
        try:
            with os.fdopen(w, "wb") as f:
                f.write(data)
        finally:
            sys.stdout.flush()
            os._exit(code)
    from kvsim.experiments import cref

    os.close(w)
    with os.fdopen(r, "rb") as f:
        data = f.read()
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    killed = cref.killed_by(code)
    if killed:  # what it sent, if anything, may be cut short
        raise RuntimeError(f"{path.name}: the continued simulation was {killed}")
    kind, value = pickle.loads(data) if data else ("error", f"exit status {code}")
    if kind != "ok":
        raise RuntimeError(f"{path.name}: the continued simulation failed: {value}")
    return value


def _finish_continued(engines: list[Any], cfgs: list[Any], cpus: list[str], path: Path,
                      skip: int, header: dict) -> dict[str, Any]:
    from kvsim import sim, traces
    from kvsim.sim import _feed
    from kvsim.sim.api import build_result

    def rest():
        seen = 0
        with traces.open(path) as reader:
            for chunk in reader:
                if seen + len(chunk) > skip:
                    yield chunk[max(skip - seen, 0):]
                seen += len(chunk)

    nw = min(len(engines), os.cpu_count() or 1)
    if nw > 1:
        _feed.feed(rest(), engines, nw)
    else:
        for chunk in rest():
            for eng in engines:
                eng.run(chunk)
    tags = header.get("tags")
    results = []
    for name, cfg, eng in zip(cpus, cfgs, engines, strict=True):
        res = build_result(eng.finish(), sim.load_cpu(name), cfg,
                           list(tags) if tags else None, "fast", header)
        res["engine_threads"] = eng.threads
        results.append(res)
    return _cells_metrics(cpus, results)


def _simulate_many(path: Path, cpus: list[str]) -> dict[str, dict[str, Any]]:
    from kvsim import sim, traces

    with traces.open(path) as reader:
        results = sim.simulate_many(reader, cpus)
    return _cells_metrics(cpus, results)


def _cells_metrics(cpus: list[str], results: list[dict]) -> dict[str, dict[str, Any]]:
    """The cells' metrics per CPU from ``sim.simulate_many``'s results, in ``cpus``'s order."""
    from kvsim.sim import local as sim_local

    out = {cpu: _metrics(res) for cpu, res in zip(cpus, results, strict=True)}
    for cpu in cpus:  # how tables and plots name it: `local (uncalibrated)` where so
        out[cpu]["cpu_label"] = sim_local.label(cpu)
    return out


def _metrics(res: dict) -> dict[str, Any]:
    from kvsim.experiments import summary

    ops = res["commands"]["count"] or 0
    unit = "command"
    if not ops and (res.get("markers") or {}).get("op"):
        # a load's trace marks each key loaded with an OP marker, not a COMMAND marker
        ops, unit = res["markers"]["op"], "key loaded"
    t = res.get("timing") or {}
    m: dict[str, Any] = {
        "records": res["records"], "warmup_records": res.get("warmup_records"),
        "instructions": res["instructions"], "operations": ops,
        "operation_unit": unit,
        "cycles": res["cycles"], "ipc": res["ipc"], "mlp": t.get("mlp"),
        "cycles_per_op": res["cycles"] / ops if ops and res["cycles"] is not None else None,
        "avg_l1_miss_cycles": t.get("avg_l1_miss_cycles"),
        "avg_load_latency_cycles": t.get("avg_load_latency_cycles"),
        "dram_latency_cycles": t.get("dram_latency_cycles"),
    }
    for lv in summary.level_rows(res):
        m[f"demand_misses_{lv['role']}"] = lv["demand_misses"]
        m[f"demand_misses_per_op_{lv['role']}"] = lv["demand_misses"] / ops if ops else None
        m[f"level_{lv['role']}"] = lv["name"]
        m[f"misses_{lv['role']}"] = lv["misses"]  # every kind: prefetches, victims too
    sw = summary.prefetch_totals(res)["software"]
    for k in ("issued", "useful", "late", "useless"):
        m[f"swpf_{k}"] = sw.get(k, 0)
    m["late_prefetch_share"] = sw.get("late", 0) / sw["issued"] if sw.get("issued") else None
    stalls = t.get("stall_cycles") or {}
    rob = {k: v for k, v in stalls.items() if k.startswith("rob_full:")}
    m["rob_full_cycles"] = sum(rob.values()) if rob else 0.0
    m["top_rob_stall"] = max(rob, key=rob.get) if rob else None
    by_tag = summary.demand_misses_by_tag(res)
    for tag, counts in sorted(by_tag.items()):  # which structure misses, L1 and last level
        if any(counts):
            m[f"l1_misses_{tag}"] = counts[0]
            m[f"llc_misses_{tag}"] = counts[-1]
    if by_tag:
        top = max(by_tag, key=lambda tag: (by_tag[tag][-1], tag))
        m["top_llc_miss_structure"] = top
    return m


# --- native ------------------------------------------------------------------------------------

def _snapshot_cache(tmp: str, opts: dict) -> str:
    """The snapshot cache file of one side of a load pair: sides whose options differ only
    in the loading variant share it (c_ref refuses a file written for other options)."""
    writer = {k: v for k, v in opts.items() if k not in ("variant", "batch")}
    digest = hashlib.sha256(json.dumps(writer, sort_keys=True).encode()).hexdigest()[:16]
    return os.path.join(tmp, f"snapshot-{digest}")


#: what the two sides of a pair alternating in one c_ref process may differ in: c_ref's
#: ``--versus-variant``, ``--versus-pipeline`` and ``--versus-batch``
VERSUS_OPTIONS = ("variant", "pipeline", "batch")
#: the workloads whose pairs may alternate in one c_ref process, and what their sides may
#: differ in (iterate and load have no pipeline variant or batch)
_VERSUS_BY_WORKLOAD = {"pipeline": VERSUS_OPTIONS, "mget": VERSUS_OPTIONS,
                       "mset": VERSUS_OPTIONS, "exists": VERSUS_OPTIONS,
                       "del": VERSUS_OPTIONS,  # c_ref restores the deleted keys between runs
                       "touch": VERSUS_OPTIONS,
                       "iterate": ("variant",), "load": ("variant",)}
#: timed rounds per c_ref process of a pair alternating in one process
IN_PROCESS_ROUNDS = 8


def versus_options(workload: str, a: dict, b: dict) -> dict | None:
    """B's ``--versus-*`` options when the pair ``a``, ``b`` of ``workload`` can alternate
    in one c_ref process: pipeline, mget, exists, del and mset (whose runs share one
    populated server,
    or, MSET into an empty keyspace, one setup), iterate (KEYS and SAVE walk one populated
    server) and load (a restart per run from one snapshot), with sides that differ only in
    :data:`VERSUS_OPTIONS` (iterate and load: the variant), each of them given in ``b``
    where ``a`` gives it. None otherwise."""
    allowed = _VERSUS_BY_WORKLOAD.get(workload)
    if allowed is None:
        return None
    if any(a.get(k) != b.get(k) for k in (set(a) | set(b)) - set(allowed)):
        return None
    if any(k in a and k not in b for k in allowed):
        return None  # B would inherit A's value where c_ref's default was meant
    versus = {k: b[k] for k in allowed if k in b}
    return versus or None


def _converged(spec: dict, runs: dict[str, list[dict]]) -> bool:
    """The pair's fixed-width stopping rule (module docstring) after the rounds so far."""
    from kvsim import stats

    halfwidth, least = spec.get("halfwidth"), spec.get("min_rounds", spec["rounds"])
    if halfwidth is None or len(runs["a"]) < least:
        return False
    ratios = [x["cpu_runs_s"][0] / y["cpu_runs_s"][0]
              for x, y in zip(runs["a"], runs["b"], strict=True)]
    boot = stats.bootstrap_ci95(ratios)
    return bool(boot) and (boot[1] - boot[0]) / 2 <= halfwidth * statistics.median(ratios)


def _native_rounds_in_process(spec: dict, tmp: str) -> tuple[dict[str, list[dict]],
                                                             dict[str, Any]]:
    """:func:`_native_rounds` for a pair with ``rounds_per_process``: the sides alternate
    inside c_ref processes of ``warmup_rounds`` + up to ``rounds_per_process`` rounds (a
    load pair's processes share one snapshot cache)."""
    from kvsim.experiments import cref

    workload, warm = spec["workload"], spec.get("warmup_rounds", 1)
    versus = versus_options(workload, spec["a"], spec["b"])
    if versus is None:
        raise ValueError(f"cell {cell_id(spec)}: its sides cannot alternate in one process")
    env = dict(spec.get("env") or {})
    if workload == "load":
        env["KVSIM_CREF_SNAPSHOT_CACHE"] = _snapshot_cache(tmp, spec["a"])
    runs: dict[str, list[dict]] = {"a": [], "b": []}
    first: dict[str, Any] = {}
    order = 0  # rounds run so far, warm-up included: the next round is A B when even
    least = spec.get("min_rounds", spec["rounds"]) if spec.get("halfwidth") else 0
    while len(runs["a"]) < spec["rounds"]:
        n = len(runs["a"])
        k = min(spec["rounds_per_process"], spec["rounds"] - n)
        if n < least:  # a process ends at min_rounds, where the stopping rule first looks
            k = min(k, least - n)
        run_env = dict(env, KVSIM_CREF_REPLY_CHECK="0" if first else "1")
        res = cref.native(workload, spec["a"], repeat=warm + k, env=run_env, versus=versus,
                          versus_first="a" if order % 2 == 0 else "b")
        b = res["versus"]
        if not first:
            first = {"a": res, "b": dict(res, reply_crc32=b["reply_crc32"])}
        runs["a"] += [dict(res, cpu_runs_s=[x]) for x in res["cpu_runs_s"][warm:]]
        runs["b"] += [dict(res, cpu_runs_s=[y]) for y in b["cpu_runs_s"][warm:]]
        order += warm + k
        if _converged(spec, runs):
            break
    return runs, first


def _native_rounds(spec: dict, tmp: str) -> tuple[dict[str, list[dict]], dict[str, Any]]:
    """Run the pair's warm-up and timed rounds; returns the timed runs per side and the
    first run's result per side (the one whose replies were checked)."""
    from kvsim.experiments import cref

    if spec.get("rounds_per_process"):
        return _native_rounds_in_process(spec, tmp)
    workload, warm = spec["workload"], spec.get("warmup_rounds", 1)
    sides = {"a": spec["a"], "b": spec["b"]}
    env = spec.get("env") or {}
    runs: dict[str, list[dict]] = {"a": [], "b": []}
    first: dict[str, Any] = {}
    for r in range(warm + spec["rounds"]):
        # counterbalanced: A B in even rounds, B A in odd ones, so that a drift or an
        # after-effect of the run before cannot favour one side
        for side in ("a", "b") if r % 2 == 0 else ("b", "a"):
            opts = sides[side]
            # The first round checks the replies (reply_crc32); later rounds skip that
            # untimed pass. A load's snapshot is built once per configuration.
            run_env = dict(env, KVSIM_CREF_REPLY_CHECK="1" if r == 0 else "0")
            if workload == "load":
                run_env["KVSIM_CREF_SNAPSHOT_CACHE"] = _snapshot_cache(tmp, opts)
            res = cref.native(workload, opts, repeat=1, env=run_env)
            first.setdefault(side, res)
            if r >= warm:
                runs[side].append(res)
        if _converged(spec, runs):
            break
    return runs, first


def native_rounds(spec: dict) -> dict[str, list[dict]]:
    """The timed runs of a native cell ``spec`` per side (``"a"``, ``"b"``): one
    ``kvsim-cref native`` result per run (``cpu_runs_s``, ``runs_s``, ...), as the cell's
    metrics are computed from; for a study that reports the runs themselves."""
    with tempfile.TemporaryDirectory(prefix="kvsim-native-") as tmp:
        return _native_rounds(spec, tmp)[0]


def _native(spec: dict) -> dict[str, Any]:
    from kvsim import stats

    with tempfile.TemporaryDirectory(prefix="kvsim-native-") as tmp:
        runs, first = _native_rounds(spec, tmp)
    cpu = {s: [x["cpu_runs_s"][0] for x in runs[s]] for s in runs}
    sp = stats.paired_speedup(cpu["a"], cpu["b"])
    boot = sp["bootstrap_ci95"]
    if boot is None or len(cpu["a"]) < stats.MIN_ROUNDS or boot[0] <= 1.0 <= boot[1]:
        verdict = "within noise"
    else:
        verdict = "faster" if boot[0] > 1.0 else "slower"
    m: dict[str, Any] = {
        "rounds": len(cpu["a"]), "warmup_rounds": spec.get("warmup_rounds", 1),
        "speedup": sp["median"],
        "speedup_ci95_low": boot[0] if boot else None,
        "speedup_ci95_high": boot[1] if boot else None,
        "speedup_sign_ci95_low": sp["ci95"][0] if sp["ci95"] else None,
        "speedup_sign_ci95_high": sp["ci95"][1] if sp["ci95"] else None,
        "speedup_from_minimums": sp["from_minimums"],
        "verdict": verdict,
        "round_ratios": json.dumps(sp["ratios"]),
        "a_cpu_runs_s": json.dumps(cpu["a"]), "b_cpu_runs_s": json.dumps(cpu["b"]),
    }
    for s in ("a", "b"):
        last = runs[s][-1]
        m[f"{s}_cpu_median_s"] = statistics.median(cpu[s])
        m[f"{s}_cpu_min_s"] = min(cpu[s])
        m[f"{s}_ops"] = last.get("ops")
        m[f"{s}_keys"] = last.get("keys")
        m[f"{s}_memory_bytes"] = last.get("memory_bytes")
        m[f"{s}_bytes_per_key"] = (last["memory_bytes"] / last["keys"]
                                   if last.get("keys") and last.get("memory_bytes") else None)
        m[f"{s}_ns_per_op"] = (1e9 * m[f"{s}_cpu_median_s"] / last["ops"]
                               if last.get("ops") else None)
        m[f"{s}_reply_crc32"] = first[s].get("reply_crc32")
    return m


# --- real Valkey -------------------------------------------------------------------------------

def _valkey(spec: dict) -> dict[str, Any]:
    try:
        from kvsim.experiments import valkey
    except ImportError as exc:  # the module or its dependency is absent from this install
        raise CellSkipped(f"the real Valkey cells need kvsim.experiments.valkey ({exc})"
                          ) from None
    try:
        out = valkey.run_valkey_cell(dict(spec["valkey"]))
    except Exception as exc:
        # no server binary or load generator: kvsim.experiments.valkey_server.ToolMissing,
        # whose message says what to install
        if type(exc).__name__ == "ToolMissing" or isinstance(exc, FileNotFoundError):
            raise CellSkipped(str(exc)) from None
        raise
    return {k: (json.dumps(v) if isinstance(v, list | dict) else v) for k, v in out.items()}
