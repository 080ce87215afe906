"""The ``server`` study (issue 43, section 4): the server's requests per second and prefetch
speedup predicted from the traced server, beside the native servers and the seeds.

A prediction (cell kind ``server-predict``) traces c_ref's server (``kvsim-cref serve
--trace``, c_ref/server.c) as it serves the same client as the native cells:

1. the traced server starts with ``prefetch-batch-max-size`` B (``batch_a`` 0 or ``batch_b``
   16), is loaded with ``keys`` keys (:func:`.valkey_server.populate`), then redis-benchmark
   sends ``requests`` requests of the cell (:func:`.valkey._bench_once`), and the server's
   counters are checked (:func:`.valkey._check_counts`); SIGTERM writes the trace;
2. the trace is cut at its ``COMMAND`` markers (:func:`measured_trace`): everything before
   the benchmark's first command (the load, the client's start-up CONFIG GETs) becomes
   warm-up, the benchmark's commands are measured, the checks after them warm-up again;
3. the trace is simulated on the cell's CPU (``sim.simulate``), system calls included (the
   ``SYSCALL`` markers charged by the CPU file's ``[syscall]``, sim/MODEL.md §6).

Predicted requests/s = requests / (measured cycles / clock), that is 1 / the server's time
per request: the requests per second of the server's own CPU time, the native cells' figure
(``cpu_rps``). The trace of a side is made once and kept (:func:`trace_cache`) for every CPU.

A native cell (kind ``server-native``) is :func:`.server.run_server_cells`' measurement of
c_ref's server and the real Valkey server at the same keys, or the cell of
``results/native-server.json`` when its spec matches. A prediction on a CPU file is keyed by
the file's bytes. With ``--sitting-syscall`` (:mod:`.server_sitting`) this machine's rows are
predicted on a copy of each CPU file whose ``[syscall]`` the run measured first, beside native
cells keyed by that sitting and measured in the same run.

The seed rows: the seeds' server figures (``seed_results.csv``) on their own presets, each
traced in the seed's configuration (Redis's dict and its multi-key variant for Redis's
seeds). Rows whose prediction falls outside 0.85..1.15 of the native or seed figure carry a
diagnosis (:data:`DIAGNOSES`).
"""

from __future__ import annotations

import hashlib
import json
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from kvsim import provenance, stats
from kvsim.experiments import cells as C
from kvsim.experiments import seeds, server_sitting, valkey
from kvsim.experiments.framework import Experiment, Plot, Table, _fmt_native
from kvsim.traces.commands import measured_trace

BAND = (0.85, 1.15)
SIDES = {"a": 0, "b": 16}
#: this machine's cells (experiments/server.py's), their requests per side at each scale (at
#: full scale the trace's measured part stays some 10-20M records: the load's is the rest)
CELLS = {"get-p1": (20_000, 50_000), "get-p10": (50_000, 200_000),
         "mget-20": (5_000, 10_000), "mget-100": (1_000, 2_000), "mset-10": (10_000, 20_000)}
KEYS = {"small": 100_000, "full": 3_000_000}  # full: the native cells' (native-server.json)
#: Interleaved native rounds per cell: at small scale the fewest that give a verdict.
ROUNDS = {"small": stats.MIN_ROUNDS, "full": 8}
#: the warm-up's form per scale: the load replayed record by record, or compact (each line
#: once: at 3M keys the load is some 90M records a side), or ``setup``: the load carried in
#: compact form by the traced server itself (DEBUG SETUP-BEGIN .. SETUP-END, c_ref/setupwarm.c)
#: rather than recorded and compacted afterwards (results/server-setup-bound.json: the two
#: forms' predictions)
WARM: dict[str, dict[str, str]] = {"small": {}, "full": {"warm": "compact"},
                                   "seed": {"warm": "setup"}}
#: the scales of this study: the framework's, and ``seed``: the seed rows alone, each at its
#: seed's own key count (at most :data:`SEED_KEYS_CAP`) on its own preset
STUDY_SCALES = ("small", "full", "seed")
#: the most keys a seed row is traced with at ``--scale seed``: every seed's (3M to 10M keys
#: fit this 24 GiB guest: c_ref's server holds 10M keys of 100 B in some 2 GiB, and the
#: warm-up is bounded by c_ref's KS_WARM_SETUP_LINES whatever the keys)
SEED_KEYS_CAP = 10_000_000
SERVER_ARGS = ["--pipeline", "lookahead", "--variant", "batch"]


def _mset_ops(kpc: int, keys: int = 10_000_000) -> dict[str, float]:
    runs = seeds.MSET_15043_OPS[(kpc, 100, keys)]
    return {"seed_rps_a": float(np.mean([a for a, _ in runs])),
            "seed_rps_b": float(np.mean([b for _, b in runs]))}


def _seed_rows() -> list[dict[str, Any]]:
    """The seeds' server rows: cell, the seed's configuration, its preset and figures
    (requests/s where the seed gives them: MSET's are MSETs per second)."""
    redis = {"table": "dict"}
    mset_keys = 10_000_000  # #15043's keyspace (seeds.MSET_15043_OPS' configuration)
    return [
        {"row": "GET depth 10 (Valkey #2092, io-threads 1)", "cell": "get-p10",
         "cpu": "epyc-7713", "args": SERVER_ARGS, "value_size": 256,
         "seed_keys": seeds.PIPELINE_2092_KEYS,
         "seed_speedup": seeds.PIPELINE_2092, "seed_rps_a": 352_795.91,
         "seed_rps_b": 604_375.69},
        {"row": "MSET 10 keys (Redis #15043)", "cell": "mset-10", "cpu": "xeon-8488c",
         "args": ["--table", redis["table"], "--variant", "redis-15043"], "value_size": 100,
         "seed_keys": mset_keys,
         "seed_speedup": 1 + (seeds.mset_15043(10, 100, mset_keys) or 0) / 100,
         **_mset_ops(10)},
        {"row": "MSET 50 keys (Redis #15043)", "cell": "mset-50", "cpu": "xeon-8488c",
         "args": ["--table", redis["table"], "--variant", "redis-15043"], "value_size": 100,
         "seed_keys": mset_keys,
         "seed_speedup": 1 + (seeds.mset_15043(50, 100, mset_keys) or 0) / 100,
         **_mset_ops(50)},
        {"row": "MGET 100 keys, depth 10 (Redis #15133, Graviton 4)", "cell": "mget-100-p10",
         "cpu": "graviton4", "args": ["--table", "dict", "--variant", "chunk-15133"],
         "value_size": 100, "seed_keys": seeds.MGET_15133_KEYS,
         "seed_speedup": 1 + seeds.MGET_15133_PIPELINE10_GRAVITON4[(100, 100)] / 100},
        {"row": "MGET 100 keys (Redis #15133, x86 runner)", "cell": "mget-100",
         "cpu": "xeon-8488c", "args": ["--table", "dict", "--variant", "chunk-15133"],
         "value_size": 100, "seed_keys": seeds.MGET_15133_KEYS,
         "seed_speedup": 1 + seeds.MGET_15133[(100, 100)] / 100},
    ]


def bench_spec(cell: str, keys: int, requests: int, value_size: int) -> dict[str, Any]:
    """The client's spec (:func:`.valkey.normalize_spec`) of a cell name: ``get-pD``,
    ``mget-K``, ``mset-K``, ``mget-K-pD``."""
    parts = cell.split("-")
    spec: dict[str, Any] = {"op": parts[0], "keys": keys, "value_size": value_size,
                            "requests": requests, "clients": 50}
    for p in parts[1:]:
        if p.startswith("p"):
            spec["pipeline"] = int(p[1:])
        else:
            spec["keys_per_command"] = int(p)
    return valkey.normalize_spec(spec)


# --- the traced server ------------------------------------------------------------------------

def trace_cache() -> Path:
    return Path(tempfile.gettempdir()) / "kvsim-server-traces"


def _touches(c: np.ndarray, base: int) -> tuple[np.ndarray, ...]:
    """(line, order, store, tag, site) of every 64-byte line the memory records of ``c``
    touch, ``order`` the record's index in the trace (``base`` + its index in ``c``)."""
    from kvsim import traces

    mem = np.flatnonzero(c["kind"] < traces.KIND_MARKER)
    r = c[mem]
    first = r["addr"] >> np.uint64(6)
    n = ((r["addr"] + np.maximum(r["size"], 1).astype(np.uint64) - np.uint64(1))
         >> np.uint64(6)) - first + np.uint64(1)
    n = n.astype(np.int64)
    idx = np.repeat(np.arange(mem.size), n)
    step = np.arange(idx.size) - np.repeat(np.cumsum(n) - n, n)
    return (first[idx] + step.astype(np.uint64), (mem + base)[idx],
            r["kind"][idx] == traces.KIND_STORE, r["tag"][idx], r["site"][idx])


def compact_warmup(src: Path, dst: Path, max_lines: int = 1 << 23) -> dict[str, int]:
    """``src`` (a :func:`measured_trace`) with its warm-up before the measured region in
    c_ref's compact form (traces/FORMAT.md, "The setup's warm-up"): every line it touched,
    once, least recently touched first, a 64-byte store for a line it wrote and a load
    otherwise, with the tag and site of its last touch; at most the last ``max_lines``
    lines. A dep of the measured region that reached into the replaced records is dropped
    (its producer completed long before)."""
    from kvsim import traces

    parts: list[tuple[np.ndarray, ...]] = []
    end = None
    seen = 0
    with traces.open(src) as tr:
        header = dict(tr.header)
        for c in tr:
            we = np.flatnonzero((c["kind"] == traces.KIND_MARKER)
                                & (c["flags"] == traces.MARK_WARMUP_END))
            stop = int(we[0]) if we.size else c.size
            t = _touches(c[:stop], seen)
            if t[0].size:  # the chunk's last touch of each line
                o = np.lexsort((t[1], t[0]))
                line = t[0][o]
                keep = np.r_[line[1:] != line[:-1], True]
                wrote = np.maximum.reduceat(t[2][o], np.flatnonzero(np.r_[True, keep[:-1]]))
                parts.append((line[keep], t[1][o][keep], wrote, t[3][o][keep], t[4][o][keep]))
            if we.size:
                end = seen + stop
                break
            seen += c.size
    if end is None:
        raise ValueError(f"{src}: no WARMUP_END marker (not a measured trace)")
    line, order, wrote, tag, site = (np.concatenate(x) for x in zip(*parts, strict=True))
    o = np.lexsort((order, line))
    line, order, wrote, tag, site = line[o], order[o], wrote[o], tag[o], site[o]
    keep = np.r_[line[1:] != line[:-1], True]
    wrote = np.maximum.reduceat(wrote, np.flatnonzero(np.r_[True, keep[:-1]]))
    line, order, tag, site = line[keep], order[keep], tag[keep], site[keep]
    o = np.argsort(order, kind="stable")[-max_lines:]
    w = np.zeros(o.size + 1, dtype=traces.RECORD_DTYPE)
    w["kind"][0], w["flags"][0] = traces.KIND_MARKER, traces.MARK_WARMUP_BEGIN
    w["addr"][1:] = line[o] << np.uint64(6)
    w["size"][1:] = 64
    w["kind"][1:] = np.where(wrote[o], traces.KIND_STORE, traces.KIND_LOAD)
    w["tag"][1:], w["site"][1:] = tag[o], site[o]
    g = 0
    with traces.open(src) as tr, traces.Writer(dst, header, codec="zstd") as out:
        out.write(w)
        for c in tr:
            if g + c.size > end:
                m = c[max(0, end - g):].copy()
                at = max(g, end) - end  # the records' distance from the boundary
                reach = m["dep"].astype(np.int64) > at + np.arange(m.size)
                m["dep"][reach] = 0
                out.write(m)
            g += c.size
    return {"warmup_lines": int(o.size), "replaced_records": end}


def traced_side(spec: dict, batch: int, args: list[str], log=None,
                compact: bool = False, setup: bool = False, binary: Path | None = None,
                measured: int | None = None) -> Path:
    """The measured trace (:func:`measured_trace`) of c_ref's server serving ``spec`` at
    prefetch-batch-max-size ``batch``, its warm-up in compact form with ``compact``
    (:func:`compact_warmup`), or with ``setup`` the load carried in compact form by the
    traced server itself (``DEBUG SETUP-BEGIN`` .. ``SETUP-END``: never recorded record by
    record), made once per spec, server arguments and c_ref build (kept in
    :func:`trace_cache`). ``binary``: another ``kvsim-cref`` build than the project's;
    ``measured``: the last ``measured`` of the client's requests are measured, the ones
    before them warm-up (default: all of them)."""
    from kvsim.experiments.server import CrefServer
    from kvsim.experiments.valkey_server import benchmark_binary, pick_cpus, populate

    digest = (provenance.file_sha256(binary) if binary
              else C._digest_artifact("kvsim-cref"))
    key = hashlib.sha256(json.dumps([spec, batch, args, digest]
                                    + (["compact"] if compact else [])
                                    + (["setup"] if setup else [])
                                    + ([measured] if measured else []),
                                    sort_keys=True).encode()).hexdigest()[:16]
    out = trace_cache() / f"{key}.kvt"
    if out.is_file():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    raw = out.with_name(f"{key}.raw.kvt")
    server_cpu, client_cpu = pick_cpus()
    srv_args = [*args, "--batch", str(batch), "--trace", str(raw)]
    srv = CrefServer(binary, cpu=server_cpu, args=srv_args)
    srv.stop_timeout = 600.0  # the trace's end is written at SIGTERM
    with srv:
        with srv.client() as c:
            if setup:
                c.call("DEBUG", "SETUP-BEGIN")
            populate(c, spec["keys"], spec["value_size"], spec["seed"])
            c.call("CONFIG", "RESETSTAT")
            if setup:
                c.call("DEBUG", "SETUP-END")
        valkey._bench_once(benchmark_binary(), srv.port, spec, client_cpu)
        with srv.client() as c:
            valkey._check_counts(c, spec)
    try:
        tmp = out.with_name(f"{key}.tmp.kvt")
        measured_trace(raw, tmp, measured or spec["requests"])
        if compact:
            raw.unlink()
            compact_warmup(tmp, raw)
            raw.replace(tmp)
        tmp.replace(out)
    finally:
        raw.unlink(missing_ok=True)
    if log:
        log(f"traced {spec['op']} batch {batch}: {out}")
    return out


def predict(spec: dict, cpu: str, args: list[str], compact: bool = False,
            setup: bool = False) -> dict[str, Any]:
    """Predicted requests/s of each side and the speedup on ``cpu`` (``compact``, ``setup``:
    :func:`traced_side`'s)."""
    from kvsim import sim
    from kvsim.sim import calibrate_syscall
    from kvsim.sim import local as sim_local

    model = sim.load_cpu(cpu)
    out: dict[str, Any] = {"syscall_source": "the CPU file's [syscall]",
                           "syscall_call_ns": list(model.syscall.call_ns),
                           "syscall_byte_ns": list(model.syscall.byte_ns)}
    if cpu == "local" and not any(model.syscall.call_ns):
        # a `local` without [syscall] (uncalibrated, or calibrated before it existed): the
        # calibration's own microbenchmark, run now on this machine
        sec = calibrate_syscall.section(calibrate_syscall.measure(quick=True))
        model = sim.config.parse_cpu({"name": "t", "cache": [{"size": 4096, "ways": 1}],
                                      "syscall": sec})
        model = sim.load_cpu(cpu).with_changes(syscall=model.syscall)
        out.update({"syscall_source": "kvsim-calibrate syscall, run by this cell",
                    "syscall_call_ns": list(model.syscall.call_ns),
                    "syscall_byte_ns": list(model.syscall.byte_ns)})
    for side, batch in SIDES.items():
        res = sim.simulate(traced_side(spec, batch, args, compact=compact, setup=setup), model)
        seconds = res["cycles"] / (res["timing"]["freq_ghz"] * 1e9)
        sc = res.get("syscalls") or {}
        out[f"pred_rps_{side}"] = spec["requests"] / seconds
        out[f"pred_syscall_share_{side}"] = (sc.get("cycles") or 0) / res["cycles"]
        out[f"pred_cycles_per_request_{side}"] = res["cycles"] / spec["requests"]
        out[f"pred_ns_per_request_{side}"] = seconds * 1e9 / spec["requests"]
        out[f"pred_syscall_ns_per_request_{side}"] = (
            (sc.get("cycles") or 0) / res["timing"]["freq_ghz"] / spec["requests"])
        out[f"pred_instructions_per_request_{side}"] = res["instructions"] / spec["requests"]
        out[f"pred_l1_misses_per_request_{side}"] = (
            res["levels"][0]["misses"] / spec["requests"] if res.get("levels") else None)
    out["pred_speedup"] = out["pred_rps_b"] / out["pred_rps_a"]
    out["cpu_label"] = sim_local.label(cpu)  # `local (uncalibrated)` where so, as sim cells
    out.update(server_sitting.predict_fields(cpu))  # a file re-measured in this sitting
    return out


def _run_predict(spec: dict) -> dict[str, Any]:
    if server_sitting.cpu_key(spec["cpu"]) != {
            k: spec[k] for k in ("cpu_digest",) if k in spec}:
        raise ValueError(f"--cpu {spec['cpu']}: the file changed after the run was planned")
    b = bench_spec(spec["cell"], spec["keys"], spec["requests"], spec["value_size"])
    return {**predict(b, spec["cpu"], spec["args"], spec.get("warm") == "compact",
                      spec.get("warm") == "setup"),
            "requests": b["requests"], "keys": b["keys"]}


def _run_native(spec: dict) -> dict[str, Any]:
    """c_ref's server and Valkey natively: the cell of ``spec['reuse']`` when its spec
    matches (keys, value size, requests, batches), else measured now. ``spec['native']``,
    where given, is the whole client spec (``kvsim native server``'s cells: every option)."""
    from kvsim.experiments import server

    b = bench_spec(spec["cell"], spec["keys"], spec["requests"], spec["value_size"])
    want = spec.get("native") or {**b, "batch_a": SIDES["a"], "batch_b": SIDES["b"],
                                  "rounds": spec["rounds"], "warmup_rounds": 1}
    reuse = Path(spec.get("reuse") or "")
    if reuse.is_file():
        doc = json.loads(reuse.read_text())
        for c in doc.get("cells", []):
            s = c.get("spec", {})
            if c.get("cell") == spec["cell"] and all(s.get(k) == want[k] for k in (
                    "keys", "value_size", "batch_a", "batch_b", "clients")):
                return {**c["metrics"], "native_source": str(reuse),
                        "native_commit": doc.get("provenance", {}).get("commit")}
    m = server.run_server_cells([want])[0]
    return {**m, "native_source": "measured by the study"}


def native_cell(experiment: str, cell: str, native: dict[str, Any]) -> dict[str, Any]:
    """A ``server-native`` cell measuring the client spec ``native`` (every option of
    ``kvsim native server``, :func:`.server.run_server_cells`) as cell ``cell``."""
    return {"experiment": experiment, "kind": "server-native", "cell": cell,
            **{k: native[k] for k in ("keys", "requests", "value_size", "rounds")},
            "native": native, "params": {"cell": cell}}


C.register_kind("server-predict", _run_predict, counts_as="sim",
                module=("server_study", "server_sitting"), artifacts=("kvsim-cref",))
C.register_kind("server-native", _run_native, counts_as="native", module="server_study",
                artifacts=("kvsim-cref",))


# --- cells and tables -------------------------------------------------------------------------

def _seed_keys(row: dict[str, Any], scale: str) -> int:
    """The keys a seed row is traced with at ``scale``: the scale's, or at ``seed`` the
    seed's own (at most :data:`SEED_KEYS_CAP`)."""
    return min(row["seed_keys"], SEED_KEYS_CAP) if scale == "seed" else KEYS[scale]


def seed_row_requests(row: dict[str, Any]) -> tuple[int, int]:
    """A seed row's requests per side at each scale: its cell's, or for a cell this machine
    does not run (mset-50, mget-100-p10) those of the cell of its command."""
    op = row["cell"].split("-")[0]
    return CELLS.get(row["cell"], CELLS["mget-100" if op == "mget" else "mset-10"])


def _cells(scale: str, cpus: list[str]) -> list[dict[str, Any]]:
    """Per cell of this machine: the prediction on every CPU (presets and ``local``) and the
    native servers; per seed row: the prediction on the seed's preset. ``--scale seed``:
    the seed rows alone, each at its seed's own key count (at most SEED_KEYS_CAP), the load
    carried by the traced server in compact form."""
    if scale not in STUDY_SCALES:
        raise ValueError(f"--scale: the server study has no scale {scale!r} (known: "
                         f"{', '.join(STUDY_SCALES)})")
    i = 0 if scale == "small" else 1
    out = []
    # --sitting-syscall (experiments/server_sitting.py): the native cells of the sitting
    # its [syscall] was measured in, measured now
    sitting = server_sitting.native_key(cpus)
    for cell, reqs in ({} if scale == "seed" else CELLS).items():
        keys = KEYS[scale]
        common = {"cell": cell, "keys": keys, "requests": reqs[i], "value_size": 256,
                  **WARM[scale]}
        for cpu in cpus:
            out.append({"experiment": "server", "kind": "server-predict", "cpu": cpu,
                        **server_sitting.cpu_key(cpu), "args": SERVER_ARGS, **common,
                        "params": {"cell": cell, "row": "this machine"}})
        out.append({"experiment": "server", "kind": "server-native", **common,
                    "rounds": ROUNDS[scale],
                    **(sitting or {"reuse": "results/native-server.json"}),
                    "params": {"cell": cell, "row": "this machine"}})
    for r in _seed_rows():
        if r["cpu"] not in cpus:
            continue
        reqs = seed_row_requests(r)[i]
        out.append({"experiment": "server", "kind": "server-predict", "cpu": r["cpu"],
                    "args": r["args"], "cell": r["cell"], "keys": _seed_keys(r, scale),
                    "requests": reqs,
                    "value_size": r["value_size"], **WARM[scale], "params": {"cell": r["cell"],
                                                              "row": r["row"]}})
    return out


#: Why a row leaves the band, one short clause each (the row's own figures come with it); the
#: explanation they share is stated once, in the table's note (:data:`NOTE_DIAGNOSES`)
DIAGNOSES = {
    "scale": "the seed's 3M-10M keys miss the preset's last level, this scale's keyspace less",
    "seed_scale": "at the seed's own keys",
    "local": "`local` uncalibrated: the host's whole L3 holds this scale's keyspace",
    "calibrated": "this machine's calibrated file",
    "user": "c_ref's server traced ({callgrind} of Valkey's instructions)",
    "kernel": "kernel time as calibrated under PING",
    "kernel_sitting": "kernel time measured under PING in this sitting",
    "client": "the seed's client on other cores of a many-core host",
}
#: What the diagnoses share, under the server table
NOTE_DIAGNOSES = (
    "Diagnoses: the speedups follow the calibration's model of the caches; the system calls "
    "cost what the CPU file's [syscall] gives, the loop's kernel time per write measured "
    "under PINGs from 50 clients (sim/calibrate_loop.py; the presets estimate it); where "
    "the absolute time of each cell's user and system parts goes, natively and predicted: "
    "docs/studies/server.md, results/server-split.json.")


def this_machine(cpu: Any) -> bool:
    """Whether ``cpu`` models this machine: `local`, or a CPU file `kvsim calibrate` wrote
    here, named by its path (one whose self-check failed is not `local`, yet it is
    this machine's model, used by name), or by its path and :data:`.server_sitting.LABEL`
    (its copy with the [syscall] of this sitting)."""
    return str(cpu).startswith("local") or ".toml" in str(cpu)


def _ratio(a: Any, b: Any) -> float | None:
    try:
        return float(a) / float(b) if a and b and pd.notna(a) and pd.notna(b) else None
    except (TypeError, ValueError):
        return None


def _callgrind_range() -> str:
    """c_ref's instructions per request over Valkey's, lowest to highest over the cells of
    the published callgrind comparison (``kvsim native server --callgrind``)."""
    from kvsim import provenance
    from kvsim.experiments import server

    try:
        doc = json.loads(provenance.default_result_path(server.CALLGRIND_RESULT_NAME).read_text())
        r = [float(c["instructions_ratio"]) for c in doc["cells"]]
    except (OSError, ValueError, KeyError, TypeError):
        return "no comparison published"
    return f"{min(r):.2f}-{max(r):.2f} of them" if r else "no comparison published"


def _diag(ratios: dict[str, float | None], keys: list[str]) -> str:
    out = [f"{k} {v:.2f}" for k, v in ratios.items() if v is not None and not
           BAND[0] <= v <= BAND[1]]
    if not out:
        return ""
    return "outside the band (" + ", ".join(out) + "): " + "; ".join(
        DIAGNOSES[k].format(callgrind=_callgrind_range().removesuffix(" of them"))
        if k == "user" else DIAGNOSES[k]
        for k in keys)


def _per_request(p: Any, nm: Any) -> str:
    """The time of a request, predicted (and its system calls) against c_ref's server's CPU
    time natively, at batch 0: where an absolute ratio comes from."""
    nat = nm.get("cref_cpu_a_rps_median") if hasattr(nm, "get") else None
    ns, sys_ns = p.get("pred_ns_per_request_a"), p.get("pred_syscall_ns_per_request_a")
    if not nat or ns is None or pd.isna(ns) or sys_ns is None or pd.isna(sys_ns):
        return ""
    return (f" [per request at batch 0: predicted {ns:,.0f} ns, of which system calls "
            f"{sys_ns:,.0f} ns; c_ref's server natively {1e9 / nat:,.0f} ns of CPU time]")


def _seed_per_request(p: Any, r: dict[str, Any]) -> str:
    """A seed row's time per request at batch 0 and what prefetching saves of it, predicted
    (and its system calls) against the seed's (the inverse of its requests/s, its server's
    one thread busy throughout), where the seed gives requests/s."""
    a, b = p.get("pred_ns_per_request_a"), p.get("pred_ns_per_request_b")
    sys_ns = p.get("pred_syscall_ns_per_request_a")
    if not r.get("seed_rps_a") or any(v is None or pd.isna(v) for v in (a, b, sys_ns)):
        return ""
    sa, sb = 1e9 / r["seed_rps_a"], 1e9 / r["seed_rps_b"]
    return (f" [per request at batch 0: predicted {a:,.0f} ns, of which system calls "
            f"{sys_ns:,.0f} ns, the seed's {sa:,.0f} ns; saved by prefetching: predicted "
            f"{a - b:,.0f} ns, the seed's {sa - sb:,.0f} ns]")


def _tables(rows: pd.DataFrame) -> list[Table]:
    pred = rows[rows.kind == "server-predict"] if "kind" in rows else rows.iloc[0:0]
    nat = rows[rows.kind == "server-native"] if "kind" in rows else rows.iloc[0:0]
    here = pred[pred.row == "this machine"]
    lines = []
    for cell in CELLS:
        n = nat[nat.cell == cell]
        nm = n.iloc[0] if len(n) else {}
        for _, p in here[here.cell == cell].iterrows():
            line = {"cell": cell, "cpu": p["cpu"], "pred_rps_a": p.get("pred_rps_a"),
                    "pred_rps_b": p.get("pred_rps_b"), "pred_speedup": p.get("pred_speedup"),
                    "syscall_share_a": p.get("pred_syscall_share_a")}
            if this_machine(p["cpu"]):
                r = {"cref_a": _ratio(p.get("pred_rps_a"), nm.get("cref_cpu_a_rps_median")),
                     "cref_b": _ratio(p.get("pred_rps_b"), nm.get("cref_cpu_b_rps_median")),
                     "cref_speedup": _ratio(p.get("pred_speedup"), nm.get("cref_cpu_speedup")),
                     "valkey_a": _ratio(p.get("pred_rps_a"), nm.get("valkey_cpu_a_rps_median")),
                     "valkey_b": _ratio(p.get("pred_rps_b"), nm.get("valkey_cpu_b_rps_median")),
                     "valkey_speedup": _ratio(p.get("pred_speedup"),
                                              nm.get("valkey_cpu_speedup"))}
                line.update({
                    "native_cref_rps_a": nm.get("cref_cpu_a_rps_median"),
                    "native_cref_rps_b": nm.get("cref_cpu_b_rps_median"),
                    "native_cref_speedup": nm.get("cref_cpu_speedup"),
                    "native_valkey_rps_a": nm.get("valkey_cpu_a_rps_median"),
                    "native_valkey_rps_b": nm.get("valkey_cpu_b_rps_median"),
                    "native_valkey_speedup": nm.get("valkey_cpu_speedup"),
                    **{f"ratio_{k}": v for k, v in r.items()},
                    "diagnosis": _diag(r, ["local" if str(p["cpu"]).startswith("local")
                                           else "calibrated",
                                           "kernel_sitting" if server_sitting.is_sitting(
                                               p["cpu"]) else "kernel", "user"])
                    + _per_request(p, nm)})
            lines.append(line)
    t = pd.DataFrame(lines)
    if len(t):
        t["seed"] = None
        t["value"] = t["cell"] + " " + t["cpu"].astype(str)
    seeds_t = []
    for r in _seed_rows():
        p = pred[pred.row == r["row"]]
        if not len(p):
            continue
        p = p.iloc[0]
        ratio = {"speedup": _ratio(p.get("pred_speedup"), r["seed_speedup"])}
        if r.get("seed_rps_a"):
            ratio["rps_a"] = _ratio(p.get("pred_rps_a"), r["seed_rps_a"])
            ratio["rps_b"] = _ratio(p.get("pred_rps_b"), r.get("seed_rps_b"))
        keys = p.get("keys")  # the cell's metric, else its spec's
        keys = int(keys) if keys is not None and pd.notna(keys) else (
            json.loads(p["spec"]).get("keys") if isinstance(p.get("spec"), str) else None)
        small = keys is not None and keys < r["seed_keys"]
        seeds_t.append({"row": r["row"], "cpu": r["cpu"], "keys": keys,
                        "seed_keys": r["seed_keys"], "seed": r["seed_speedup"],
                        "seed_rps_a": r.get("seed_rps_a"), "seed_rps_b": r.get("seed_rps_b"),
                        "pred_rps_a": p.get("pred_rps_a"), "pred_rps_b": p.get("pred_rps_b"),
                        "pred_speedup": p.get("pred_speedup"),
                        "ratio_speedup": ratio["speedup"], "ratio_rps_a": ratio.get("rps_a"),
                        "diagnosis": (_diag(ratio, (["scale"] if small else ["seed_scale"])
                                            + ["client", "kernel"])
                                      + _seed_per_request(p, r)).strip(),
                        "value": r["row"]})
    s = pd.DataFrame(seeds_t)
    note = ("pred: c_ref's traced server simulated on the CPU, system calls charged from its "
            "[syscall] section; requests/s = 1 / the server's predicted time per request. "
            "native: requests per second of the server process's CPU time, medians of "
            "interleaved rounds (c_ref's server and Valkey 9.1.2, prefetch-batch-max-size 0 "
            "-> 16). ratio: predicted / native (or / seed); the band is 0.85-1.15. "
            + NOTE_DIAGNOSES)
    out = [Table("server", "The server: predicted requests/s and prefetch speedup against "
                 "the native servers", t, "requests/s; speedup (x)",
                 Plot(x="value", xlabel="cell, CPU", ylabel="speedup (x)",
                      series=[c for c in ("pred_speedup", "native_cref_speedup",
                                          "native_valkey_speedup") if c in t]), note=note)
           ] if len(t) or not len(s) else []  # --scale seed: the seed rows' table alone
    sitting = server_sitting.table(here)  # --sitting-syscall: the section it measured
    if sitting is not None:
        out.append(sitting)
    if len(s):
        out.append(Table("server_seeds", "The seeds' server rows on their presets", s,
                         "requests/s; speedup (x)",
                         Plot(x="value", xlabel="seed row", ylabel="speedup (x)",
                              series=["pred_speedup", "seed"]),
                         note="seed: the upstream figure on its author's machine "
                              "(seed_results.csv); pred: c_ref's server traced in the seed's "
                              "configuration on its preset; keys: the keys it held (the "
                              "seed's, seed_keys, at --scale seed, at most "
                              f"{SEED_KEYS_CAP:,}). The bracket: a request's time at batch 0 "
                              "and what prefetching saves of it, where the seed gives "
                              "requests/s (the inverse of them: its server's one thread "
                              "busy throughout)."))
    return out


#: registered by experiments/studies_upstream.py, after the studies before it (one order of
#: the experiments however the modules are first imported)
EXPERIMENT = Experiment("server", "The server: predicted requests/s against the real servers",
                        "Valkey PR #2092; Redis #15043, #15133", _cells, _tables,
                        doc=_cells.__doc__ or "", needs=("server-predict", "server-native"),
                        scales=STUDY_SCALES)


# --- the headline's server rows (experiments/studies.py: headline) ----------------------------

#: (headline row, cell, seed speedup): the server beside the keyspace rows of the same seeds
HEADLINE = [
    ("server: pipelined GET, depth 10 (Valkey #2092)", "get-p10", seeds.PIPELINE_2092),
    ("server: MGET 100 keys (Redis #15133)", "mget-100",
     1 + seeds.MGET_15133[(100, 100)] / 100),
    ("server: MSET 10 keys over existing (Redis #15043)", "mset-10",
     1 + (seeds.mset_15043(10, 100, 10_000_000) or 0) / 100),
]


def headline_cells(scale: str, cpus: list[str]) -> list[dict[str, Any]]:
    """The headline's server rows: c_ref's server traced and predicted on every CPU, and
    both servers natively (this machine's cells, at the study's sizes)."""
    keys, i = KEYS[scale], 0 if scale == "small" else 1
    out = []
    for row, cell, _ in HEADLINE:
        common = {"cell": cell, "keys": keys, "requests": CELLS[cell][i], "value_size": 256,
                  **WARM[scale]}
        out += [{"experiment": "headline", "kind": "server-predict", "workload": "serve",
                 "cpu": cpu, **server_sitting.cpu_key(cpu),
                 "args": SERVER_ARGS, **common, "params": {"row": row}} for cpu in cpus]
        out.append({"experiment": "headline", "kind": "server-native", "workload": "serve",
                    **common,
                    "rounds": ROUNDS[scale],
                    "reuse": "results/native-server.json", "params": {"row": row}})
    return out


def _speedup(m: pd.Series, prefix: str) -> pd.Series:
    """One server's speedup of a native cell (its columns ``prefix`` + speedup, its 95 %
    interval and verdict) under the keyspace cells' names, for the one formatter of both."""
    return pd.Series({k: m.get(prefix + k) for k in (
        "speedup", "speedup_ci95_low", "speedup_ci95_high", "verdict")})


def headline_lines(rows: pd.DataFrame) -> list[dict[str, Any]]:
    """One headline line per server row: the seed, ``native`` (Valkey's and c_ref's server
    speedups in server CPU time, each median [bootstrap 95 % interval] and "within noise"
    where it includes 1.0, as the keyspace rows print theirs) and ``sim:<cpu>`` (the
    predicted server speedup)."""
    out = []
    if "kind" not in rows:
        return out
    for row, _, seed in HEADLINE:
        p = rows[(rows.kind == "server-predict") & (rows.row == row)]
        n = rows[(rows.kind == "server-native") & (rows.row == row)]
        if not len(p) and not len(n):
            continue
        line: dict[str, Any] = {"row": row, "seed": seed}
        if len(n):
            m = n.iloc[0]
            line["native"] = ", ".join(
                f"{who} {_fmt_native(_speedup(m, f'{name}_cpu_'))}".rstrip()
                for who, name in (("Valkey", "valkey"), ("c_ref's server", "cref")))
            line["native_value"] = m.get("valkey_cpu_speedup")
        for _, r in p.iterrows():
            label = r.get("cpu_label")
            line[f"sim:{label if isinstance(label, str) else r['cpu']}"] = r.get("pred_speedup")
        out.append(line)
    return out
