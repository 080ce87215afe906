"""The validation experiment: the calibrated ``local`` model's predictions against native
timings on this machine (``kvsim experiment run validation``).

For every seed workload and its variants (KEYS and SAVE iterator prefetching, pipelined GET
at several depths and batch sizes, MGET and MSET on both tables, snapshot load from 8 B to
16 KB values, unified against legacy GET) the experiment measures the native speedup of the
variant over its baseline and sets the speedup the calibrated ``local`` CPU file predicts
beside it, with the absolute time per operation of both sides (predicted cycles per
operation over the calibrated clock, against native CPU time over operations).

Cells, in the order they run (all in the serial phase, alone on the machine):

``calibrate``
    ``kvsim calibrate --quick`` (:func:`kvsim.sim.calibrate.calibrate`), or the cached CPU
    file of this machine when it was written less than :data:`FRESH_S` seconds ago on this
    machine. Metrics: the file's path, SHA-256, text and its measurement's date, load and
    commit, so the result says which CPU file the predictions used.
``native-round``
    One round of every pair: for each pair, one ``kvsim-cref native --repeat 1`` run of the
    baseline then one of the variant, each timed by its process CPU time. Rounds are
    grouped into ``runs``; the pairs' order rotates from round to round, so drift in the
    machine's speed hits every row alike instead of one pair's block. The first round is a
    discarded warm-up. Metrics: the CPU seconds and operation counts of every run, as JSON.
``predict``
    Trace one side of a pair with c_ref and simulate it on ``local``: the calibration the
    ``calibrate`` cell took (its copy :data:`PINNED`; the cached file when no validation
    calibrated on this machine yet), warmed: every trace carries its setup as a warm-up
    prefix (:data:`WARM_SETUP`, c_ref's ``--warm-setup``; traces/FORMAT.md), so its measured
    phase starts in the state the native one does, and pipeline and MGET traces also c_ref's
    ``--warmup-ops``; a side traced with ``warm_setup`` ``none`` is warmed by the ``kvsim
    simulate --warmup`` rule instead (:class:`kvsim.sim.warmup.WarmupPrefix`, the first
    :data:`WARMUP_FRACTION` of the records). Metrics: cycles, counted operations, cycles
    and nanoseconds per operation, the CPU file's path and SHA-256.

Per pair the table reports the native speedup (median of the rounds' ratios, bootstrap 95 %
interval, "within noise" when it holds 1.0, the ratio of the minimums beside it, and the
spread between the runs' medians), the predicted speedup, their ratio predicted / native
with the interval the native interval gives it, and whether the ratio lies within
0.85-1.15. The time table gives each side's predicted and native ns per operation and, for a
side outside the band, what this CPU's ablation results say of it
(:mod:`kvsim.experiments.validation_diagnosis`).

Held back. Rows marked ``held back`` (:data:`HELD_BACK_FAMILIES`: SAVE, MSET, snapshot
load) are not used to tune the model (the validation's rule: fixes to the timing model or
the traces are judged on the other rows, then checked on these); the tables report them in
their own ``set`` column and summary.
"""

from __future__ import annotations

import hashlib
import json
import math
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import pandas as pd

from kvsim import provenance, stats
from kvsim.experiments import cells as C
from kvsim.experiments import cref, studies  # noqa: F401 - studies: the seeds register first
from kvsim.experiments import pairs as catalogue
from kvsim.experiments.framework import Experiment, Plot, Table, register

NAME = "validation"
#: A cached calibration younger than this (seconds) is reused instead of measuring again.
FRESH_S = 3600
#: The calibration a validation run took, copied beside the cache (``cache_dir()``) so the
#: predictions use it even if another `kvsim calibrate` rewrites the cached file meanwhile.
PINNED = "validation-local.toml"
#: Share of the records of a trace without its own warm-up that warm the caches uncounted.
WARMUP_FRACTION = 0.2
#: How the predictions' traces carry their setup (c_ref's --warm-setup; sim/warmup.py).
WARM_SETUP = "compact"
#: The band a predicted / native ratio should fall in.
BAND = (0.85, 1.15)
#: Workload families kept out of any tuning of the model and reported separately: the
#: split sim/VALIDATION.md uses (tuning on KEYS, MGET and pipelined GET; SAVE, MSET and
#: snapshot load held back).
HELD_BACK_FAMILIES = ("SAVE", "MSET", "load")

# --- the rows ---------------------------------------------------------------------------------


#: row -> the name of its pair in the catalogue (kvsim.experiments.pairs), which gives the
#: row's seed (:func:`seed_of`)
_PAIR_OF_ROW: dict[str, str] = {}


def _pairs(scale: str) -> list[dict[str, Any]]:
    """Every row: ``{"row", "workload", "common", "a", "b", "sim", "warmup_ops", "env"}``;
    ``common`` are the native options, ``sim`` what the traced run changes (fewer
    operations; a load's restarted pages, reused as the native run's under ``env``),
    ``warmup_ops`` the trace's warm-up prefix (pipeline, mget) or None (the
    fraction rule)."""
    small = scale == "small"
    keys = 50_000 if small else 500_000
    out: list[dict[str, Any]] = []

    def add(row: str, name: str, sizes: dict, sim: dict | None = None,
            warmup_ops: int | None = None, env: dict | None = None) -> None:
        p = catalogue.get(name)
        _PAIR_OF_ROW[row] = name
        out.append({"row": row, "workload": p.workload,
                    "common": {**sizes, **p.common, "seed": 1}, "a": p.side("a"),
                    "b": p.side("b"), "sim": sim or {}, "warmup_ops": warmup_ops,
                    "env": env or {}})

    for op in ("keys", "save"):
        for v in ("next-bucket", "valkey"):
            add(f"{op.upper()} none -> {v}", f"{op}-nochecksum-{v}", {"keys": keys})
    gops, gsim = (200_000, 20_000) if small else (500_000, 100_000)
    for depth, batch in ((1, 16), (10, 16), (32, 16), (10, 4), (10, 64)):
        add(f"GET d{depth} naive -> lookahead {batch}", f"get-d{depth}-b{batch}",
            {"keys": keys, "ops": gops}, {"ops": gsim}, warmup_ops=gsim)
    add("GET legacy -> unified", "unified", {"keys": keys, "ops": gops}, {"ops": gsim},
        warmup_ops=gsim)
    mops, msim = (2_000, 400) if small else (5_000, 1_000)
    for table, v in (("hashtable", "batch"), ("dict", "chunk-15133")):
        add(f"MGET {table} none -> {v}", f"mget-{table}-{v}", {"keys": keys, "ops": mops},
            {"ops": msim}, warmup_ops=msim)
    # MSET traces every command the native run times: over random keys of a half-filled
    # range each MSET leaves more keys existing, so its cost drifts through the run and a
    # shorter trace predicts another phase of it (results/trace-length-xeon-m167.json)
    sops = 5_000 if small else 20_000
    for table, v in (("hashtable", "batch"), ("dict", "redis-15043"), ("dict", "chunk-15133")):
        add(f"MSET {table} none -> {v}", f"mset10-{table}-{v}", {"keys": keys, "ops": sops})
    loads = ({8: 50_000, 256: 20_000, 4096: 4_000, 16384: 1_000} if small else
             {8: 500_000, 256: 200_000, 4096: 40_000, 16384: 12_000})
    for value, n in loads.items():
        add(f"load {value} B none -> prefetch-after-key", f"load-{value}", {"keys": n},
            cref.LOAD_PAGES_REUSED, env=cref.ARENA_WARM)
    for r in out:
        r["held_back"] = r["row"].split()[0] in HELD_BACK_FAMILIES
    return out


#: The held-back rows by name.
HELD_BACK = frozenset(p["row"] for p in _pairs("full") if p["held_back"])


def seed_of(row: str) -> float | None:
    """The ``seed`` column of a row: the upstream speedup its catalogue pair is read against
    (:attr:`kvsim.experiments.pairs.Pair.seed_speedup`), None where upstream reported none
    as a speedup."""
    if not _PAIR_OF_ROW:
        _pairs("full")
    p = catalogue.get(_PAIR_OF_ROW[row])
    return p.seed_speedup() if p.seed_speedup else None


def _pair_id(p: dict) -> str:
    return hashlib.sha256(json.dumps([p["workload"], p["common"], p["a"], p["b"]],
                                     sort_keys=True).encode()).hexdigest()[:12]


def _sim_opts(p: dict, side: str) -> dict:
    opts = {"warm_setup": WARM_SETUP, **p["common"], **p["sim"], **p[side]}
    if p["warmup_ops"]:
        opts["warmup_ops"] = p["warmup_ops"]
    return opts


def predict_spec(p: dict, side: str, cpu: str) -> dict[str, Any]:
    """The ``predict`` cell of one side ("a" or "b") of row ``p`` (:func:`_pairs`) on
    ``cpu`` (``local`` or a CPU file's path)."""
    opts = _sim_opts(p, side)
    return {"experiment": NAME, "kind": "predict", "workload": p["workload"],
            "options": opts, "cpu": cpu,
            "warmup": None if p["warmup_ops"] or opts["warm_setup"] != "none"
            else WARMUP_FRACTION, "params": {}}


def _runs(scale: str) -> tuple[int, int]:
    """(runs, rounds per run): the rounds pooled give the interval, the runs the spread."""
    return (2, 3) if scale == "small" else (2, 4)


def _predict_cpu(cpus: list[str]) -> tuple[str, str | None]:
    """The CPU the predictions use and its file's SHA-256: `local` (the calibration this
    experiment pins), or the one CPU file (a ``.toml`` path) among ``cpus``, e.g. the pinned
    calibration with a model change to test on the same native rounds. Preset names among
    ``cpus`` (the default list) are ignored."""
    files = [c for c in cpus if c.endswith(".toml")]
    if len(files) > 1:
        raise ValueError(f"validation: predicts with one CPU file, got {len(files)}")
    if not files:
        return "local", None
    path = Path(files[0]).resolve()
    try:
        return str(path), _sha(path.read_text())
    except OSError as exc:
        raise ValueError(f"--cpu {files[0]}: {exc.strerror}") from None


def _cells(scale: str, cpus: list[str]) -> list[dict]:
    """Every seed workload and its variants natively on this machine and simulated on the
    calibrated `local` (calibrated first, in the same window), one row per pair; with a
    CPU file among ``cpus``, simulated on that file instead (:func:`_predict_cpu`)."""
    cpu, cpu_sha = _predict_cpu(cpus)
    pairs = _pairs(scale)
    out: list[dict] = [{"experiment": NAME, "kind": "calibrate", "quick": True,
                        "fresh_s": FRESH_S, "params": {}}]
    runs, per_run = _runs(scale)
    natives = [{"id": _pair_id(p), "workload": p["workload"],
                "a": {**p["common"], **p["a"]}, "b": {**p["common"], **p["b"]},
                "env": p["env"]} for p in pairs]
    n = 0
    for run in range(runs):
        for r in range(per_run + (1 if run == 0 else 0)):
            k = n % len(natives)
            out.append({"experiment": NAME, "kind": "native-round",
                        "pairs": natives[k:] + natives[:k], "warmup": run == 0 and r == 0,
                        "params": {"run": run, "round": n}})
            n += 1
    seen = set()
    for p in pairs:
        for side in ("a", "b"):
            opts = _sim_opts(p, side)
            key = json.dumps([p["workload"], opts], sort_keys=True)
            if key in seen:
                continue
            seen.add(key)
            spec = predict_spec(p, side, cpu)
            if cpu_sha is not None:  # the file's content is part of the cell's identity
                spec["cpu_sha256"] = cpu_sha
            out.append(spec)
    return out


# --- the cells -----------------------------------------------------------------------------


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _cpu_file_meta(path: Path) -> dict[str, Any]:
    import tomllib

    text = path.read_text()
    doc = tomllib.loads(text)
    meta = doc.get("meta", {})
    prov = meta.get("provenance", {})
    return {"cpu_file": str(path), "cpu_file_sha256": _sha(text), "cpu_file_text": text,
            "calibrated_utc": prov.get("date_utc"), "calibrated_quick": meta.get("quick"),
            "calibrated_commit": prov.get("commit"),
            "calibrated_load_1m": (prov.get("machine") or {}).get("load_average_1m"),
            "machine_key": meta.get("machine_key"), "freq_ghz": doc.get("freq_ghz"),
            "dram_latency_ns": (doc.get("dram") or {}).get("latency_ns"),
            "selfcheck": _selfcheck_word(doc.get("selfcheck"))}


def _selfcheck_word(sc: dict | None) -> str:
    """The calibration's self-check in a phrase: ``passed``, or why not."""
    from kvsim.sim.calibrate_check import status_line

    why = status_line(sc)
    return "passed" if why is None else "NOT PASSED: " + why


def _age_s(utc: str | None) -> float | None:
    import datetime as dt

    if not utc:
        return None
    t = dt.datetime.strptime(utc, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.UTC)
    return (dt.datetime.now(dt.UTC) - t).total_seconds()


def _calibrate(spec: dict) -> dict[str, Any]:
    """Reuse this machine's cached CPU file if it is fresh, else run `kvsim calibrate`."""
    from kvsim.sim import calibrate as cal
    from kvsim.sim.local import read_sysfs

    levels = read_sysfs()
    ident = cal.cpu_identity()
    path = cal.cache_path(levels, ident)
    reused = False
    if path.is_file():
        meta = _cpu_file_meta(path)
        age = _age_s(meta["calibrated_utc"])
        reused = (age is not None and age < spec["fresh_s"]
                  and meta["machine_key"] == cal.machine_key(levels, ident))
    t0 = time.perf_counter()
    if not reused:  # the cache file, or beside it when it failed its self-check
        path = cal.calibrate(None, quick=spec["quick"])
    pinned = cal.cache_dir() / PINNED
    tmp = pinned.with_name(pinned.name + ".tmp")
    tmp.write_text(path.read_text())
    tmp.replace(pinned)
    meta = _cpu_file_meta(path)
    return {**meta, "reused": reused, "calibrate_seconds": time.perf_counter() - t0,
            "age_s": _age_s(meta["calibrated_utc"])}


def _native_round(spec: dict) -> dict[str, Any]:
    """One run of each side of every pair, in the spec's order."""
    from kvsim.experiments import cref

    times = {}
    for p in spec["pairs"]:
        got = {}
        for side in ("a", "b"):
            res = cref.native(p["workload"], p[side], repeat=1, env=p.get("env") or None)
            got[side] = [res["cpu_runs_s"][0], res.get("ops"), res.get("reply_crc32")]
        times[p["id"]] = got
    return {"times": json.dumps(times, sort_keys=True)}


def _predict(spec: dict) -> dict[str, Any]:
    """Trace and simulate one side on ``local``, warmed."""
    from kvsim import sim, traces
    from kvsim.experiments import cref, progress
    from kvsim.sim import calibrate as cal
    from kvsim.sim import warmup as wu

    pinned = cal.cache_dir() / PINNED
    if spec["cpu"] == "local" and pinned.is_file():
        cpu, path = sim.load_cpu(str(pinned)), pinned
    else:
        cpu = sim.load_cpu(spec["cpu"])
        path = Path(cpu.source) if getattr(cpu, "source", None) else None
        if spec.get("cpu_sha256") and _sha(Path(spec["cpu"]).read_text()) != spec["cpu_sha256"]:
            raise ValueError(f"{spec['cpu']}: changed since the sweep was planned")
    with tempfile.TemporaryDirectory(prefix="kvsim-validation-") as tmp:
        t = Path(tmp) / "t.kvt"
        cref.trace(spec["workload"], t, spec["options"])
        total = progress.trace_total_records(str(t))
        nwarm = 0  # records the --warmup fraction rule leaves uncounted
        with traces.open(t) as reader:
            feed = reader
            if spec.get("warmup") is not None:
                nwarm = wu.warmup_records(spec["warmup"], total)
                feed = wu.WarmupPrefix(reader, nwarm)
            res = sim.simulate(feed, cpu)
    cmds = res["commands"]["count"] or 0
    if cmds and spec["workload"] not in ("iterate", "load"):
        ops = cmds
    else:  # iterate and load (KEYS is one command): one operation per key, the counted share
        # of the records
        # (res["records"] counts the measured records only; the rule took nwarm of them)
        keys = spec["options"]["keys"]
        ops = keys * res["records"] / (res["records"] + nwarm) if nwarm else keys
    cycles = res["cycles"]
    t_ = res.get("timing") or {}
    m = {"cycles": cycles, "records": res["records"], "warmup_records": res["warmup_records"],
         "operations": ops, "cycles_per_op": cycles / ops if ops and cycles else None,
         "freq_ghz": cpu.freq_ghz, "mlp": t_.get("mlp"),
         "ns_per_op": cycles / ops / cpu.freq_ghz if ops and cycles and cpu.freq_ghz else None,
         "cpu_file": str(path) if path else None,
         "cpu_file_sha256": _sha(path.read_text()) if path and path.is_file() else None}
    return m


C.register_kind("calibrate", _calibrate, counts_as="native", module="validation",
                artifacts=("kvsim-calibrate",))
C.register_kind("native-round", _native_round, counts_as="native", module="validation")
C.register_kind("predict", _predict, counts_as="sim", module="validation")


# --- the tables ------------------------------------------------------------------------------


def _fmt_interval(v: float | None, lo: float | None, hi: float | None, unit: str = "x") -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return ""
    s = f"{v:.2f}{unit}"
    if lo is not None and hi is not None:
        s += f" [{lo:.2f}, {hi:.2f}]"
    return s


def _band_verdict(ratio: float | None, lo: float | None, hi: float | None) -> str:
    if ratio is None:
        return ""
    if BAND[0] <= ratio <= BAND[1]:
        return "yes"
    if lo is not None and hi is not None and lo <= BAND[1] and hi >= BAND[0]:
        return "no (interval reaches the band)"
    return "no"


def pair_rows(rows: pd.DataFrame) -> tuple[list[dict], dict | None]:
    """The per-pair statistics from the experiment's rows, and the calibration row."""
    scale_pairs, scale_of = {}, {}
    for scale in ("small", "full"):
        for p in _pairs(scale):
            scale_pairs[_pair_id(p)] = p
            scale_of[_pair_id(p)] = scale
    kind = rows["kind"] if "kind" in rows else pd.Series(dtype=str)
    cal = rows[kind == "calibrate"]
    calib = cal.sort_values("date_utc").iloc[-1].to_dict() if len(cal) else None
    nat_dates = rows.loc[kind == "native-round", "date_utc"] if "date_utc" in rows else []
    if calib is not None and len(nat_dates):
        first = min(nat_dates)  # the first round's end: rounds of one size, minus one round
        calib["minutes_before_natives"] = _minutes(calib.get("calibrated_utc"), first)
    nat = rows[kind == "native-round"]
    times: dict[str, list[tuple[int, int, list, list]]] = {}
    for _, r in nat.iterrows():
        if json.loads(r["spec"]).get("warmup"):
            continue
        for pid, got in json.loads(r["times"]).items():
            times.setdefault(pid, []).append((int(r["run"]), int(r["round"]), got["a"],
                                              got["b"]))
    pred = {}
    for _, r in rows[kind == "predict"].iterrows():
        s = json.loads(r["spec"])
        pred[json.dumps([s["workload"], s["options"]], sort_keys=True)] = r
    out = []
    for pid, p in scale_pairs.items():
        if pid not in times and json.dumps([p["workload"], _sim_opts(p, "a")],
                                           sort_keys=True) not in pred:
            continue
        line: dict[str, Any] = {"row": p["row"], "set": "held back" if p["held_back"]
                                else "tuning", "workload": p["workload"],
                                "scale": scale_of[pid]}
        ts = sorted(times.get(pid, []), key=lambda x: x[1])
        if ts:
            a = [x[2][0] for x in ts]
            b = [x[3][0] for x in ts]
            sp = stats.paired_speedup(a, b)
            boot = sp["bootstrap_ci95"]
            line.update({"native_speedup": sp["median"],
                         "native_ci95_low": boot[0] if boot else None,
                         "native_ci95_high": boot[1] if boot else None,
                         "native_from_minimums": sp["from_minimums"], "rounds": len(ts)})
            byrun: dict[int, list[float]] = {}
            for run, _, xa, xb in ts:
                byrun.setdefault(run, []).append(xa[0] / xb[0])
            meds = [statistics.median(v) for _, v in sorted(byrun.items())]
            line["run_medians"] = ", ".join(f"{m:.2f}" for m in meds)
            line["run_spread"] = max(meds) / min(meds) - 1 if len(meds) > 1 else None
            noise = (boot is None or len(ts) < stats.MIN_ROUNDS
                     or boot[0] <= 1.0 <= boot[1])
            line["native_within_noise"] = bool(noise)
            for side, xs in (("a", a), ("b", b)):
                ops = ts[-1][2 if side == "a" else 3][1]
                line[f"native_ns_per_op_{side}"] = (1e9 * statistics.median(xs) / ops
                                                    if ops else None)
        pa = pred.get(json.dumps([p["workload"], _sim_opts(p, "a")], sort_keys=True))
        pb = pred.get(json.dumps([p["workload"], _sim_opts(p, "b")], sort_keys=True))
        if pa is not None and pb is not None and pa["cycles_per_op"] and pb["cycles_per_op"]:
            line["predicted_speedup"] = pa["cycles_per_op"] / pb["cycles_per_op"]
            line["predicted_ns_per_op_a"] = pa["ns_per_op"]
            line["predicted_ns_per_op_b"] = pb["ns_per_op"]
            line["predicted_mlp_a"], line["predicted_mlp_b"] = pa["mlp"], pb["mlp"]
            line["cpu_file"], line["cpu_file_sha256"] = pa["cpu_file"], pa["cpu_file_sha256"]
        out.append(line)
    return out, calib


def _speedup_frame(lines: list[dict]) -> pd.DataFrame:
    recs = []
    for ln in lines:
        pred, nat = ln.get("predicted_speedup"), ln.get("native_speedup")
        lo, hi = ln.get("native_ci95_low"), ln.get("native_ci95_high")
        ratio = pred / nat if pred and nat else None
        rlo = pred / hi if pred and hi else None
        rhi = pred / lo if pred and lo else None
        native_txt = _fmt_interval(nat, lo, hi)
        if native_txt and ln.get("native_within_noise"):
            native_txt += " within noise"
        recs.append({
            "row": ln["row"], "set": ln["set"], "seed": seed_of(ln["row"]),
            "predicted": f"{pred:.2f}x" if pred else "",
            "native [95 % CI]": native_txt,
            "native (minimums)": (f"{ln['native_from_minimums']:.2f}x"
                                  if ln.get("native_from_minimums") else ""),
            "run medians": ln.get("run_medians", ""),
            "ratio [interval]": _fmt_interval(ratio, rlo, rhi, unit=""),
            "within 0.85-1.15": _band_verdict(ratio, rlo, rhi),
            "predicted_speedup": pred, "native_speedup": nat,
            "native_ci95_low": lo, "native_ci95_high": hi, "ratio": ratio,
            "ratio_low": rlo, "ratio_high": rhi, "run_spread": ln.get("run_spread"),
            "rounds": ln.get("rounds"),
        })
    return pd.DataFrame(recs)


def diagnoser(ablations: list[tuple[str, dict]], defaults: dict | None = None):
    """``(line, side, ratio) -> diagnosis`` of a time-table side from the ablation results
    ``[(file, result)]`` (:mod:`kvsim.experiments.validation_diagnosis`); ``defaults``:
    c_ref's option defaults per workload (read from c_ref when None)."""
    from kvsim.experiments import validation_diagnosis as vd

    if defaults is None:
        defaults = vd.cref_defaults()
    cands = [s for f, doc in ablations for s in vd.sides(doc, f, defaults)]
    by_row = {(scale, p["row"]): p for scale in ("small", "full") for p in _pairs(scale)}

    def diagnose(line: dict, side: str, ratio: float | None) -> str:
        p = by_row.get((line.get("scale"), line["row"]))
        if p is None:
            return ""
        return vd.diagnose(ratio, p["workload"], p[side], {**p["common"], **p[side]}, cands,
                           defaults, BAND)
    return diagnose


def _diagnoser_for(calib: dict | None):
    """The :func:`diagnoser` of the ablation results run on the CPU the validation's
    calibration names (its CPU file's ``[meta] cpu``); with none found every side outside
    the band says "no ablation"."""
    from kvsim.experiments import validation_diagnosis as vd

    try:
        return diagnoser(vd.ablations_for(vd.file_cpu((calib or {}).get("cpu_file_text"))))
    except Exception as exc:  # noqa: BLE001 - c_ref missing: the tables still assemble
        if type(exc).__name__ not in ("CrefError", "ArtifactMissing"):
            raise
        return None


def _time_frame(lines: list[dict], diagnose=None) -> pd.DataFrame:
    """Per row and side the predicted and native ns per operation, their ratio and, with
    ``diagnose`` (:func:`diagnoser`), what the ablation says of a side outside the band."""
    recs = []
    for ln in lines:
        for side, label in (("a", "baseline"), ("b", "variant")):
            p = ln.get(f"predicted_ns_per_op_{side}")
            n = ln.get(f"native_ns_per_op_{side}")
            ratio = p / n if p and n else None
            recs.append({"row": ln["row"], "side": label, "set": ln["set"],
                         "predicted_ns_per_op": p, "native_ns_per_op": n, "ratio": ratio,
                         "predicted_mlp": ln.get(f"predicted_mlp_{side}"),
                         "diagnosis": diagnose(ln, side, ratio) if diagnose else ""})
    return pd.DataFrame(recs)


def _summary_frame(sp: pd.DataFrame) -> pd.DataFrame:
    recs = []
    for s in ("tuning", "held back"):
        g = sp[(sp["set"] == s) & sp["ratio"].notna()] if len(sp) else sp
        if not len(g):
            continue
        inside = ((g["ratio"] >= BAND[0]) & (g["ratio"] <= BAND[1])).sum()
        recs.append({"set": s, "rows": len(g), "within 0.85-1.15": int(inside),
                     "median ratio": float(g["ratio"].median()),
                     "geometric mean of max(ratio, 1/ratio)": float(
                         math.exp(g["ratio"].map(lambda v: abs(math.log(v))).mean()))})
    return pd.DataFrame(recs)


def _minutes(earlier: str | None, later: str | None) -> float | None:
    import datetime as dt

    if not earlier or not later:
        return None
    f = "%Y-%m-%dT%H:%M:%SZ"
    return round((dt.datetime.strptime(later, f) - dt.datetime.strptime(earlier, f))
                 .total_seconds() / 60, 1)


def _calibration_frame(calib: dict | None, lines: list[dict]) -> pd.DataFrame:
    if calib is None:
        return pd.DataFrame(columns=["field", "setting"])
    used = sorted({ln["cpu_file_sha256"] for ln in lines if ln.get("cpu_file_sha256")})
    same = used == [calib.get("cpu_file_sha256")]
    items = [
        ("scale", ", ".join(sorted({ln["scale"] for ln in lines}))),
        ("CPU file", provenance.shown_path(calib.get("cpu_file"))),
        ("CPU file SHA-256", calib.get("cpu_file_sha256")),
        ("calibrated, minutes before the first native round ended",
         calib.get("minutes_before_natives")),
        ("calibration reused (younger than "
         f"{FRESH_S // 60} min) or measured here", "reused" if calib.get("reused")
         else "measured by this run"),
        ("quick calibration", calib.get("calibrated_quick")),
        ("calibrated at commit", calib.get("calibrated_commit")),
        ("load average while calibrating", calib.get("calibrated_load_1m")),
        ("self-check of the calibration", calib.get("selfcheck")),
        ("clock (GHz)", calib.get("freq_ghz")),
        ("DRAM latency (ns)", calib.get("dram_latency_ns")),
        ("predictions used this file", "yes" if same else
         f"no: {len(used)} file(s) by SHA-256 {', '.join(u[:12] for u in used)}"),
    ]
    return pd.DataFrame([{"field": k, "setting": "" if v is None else str(v)}
                         for k, v in items])


def _draw_scatter(x: str, y: str, xlabel: str, ylabel: str, log: bool,
                  xerr: tuple[str, str] | None = None):
    def draw(t: Table, ax: Any) -> None:
        f = t.frame[t.frame[x].notna() & t.frame[y].notna()]
        vals = list(f[x]) + list(f[y])
        if not vals:
            return
        lo, hi = min(vals) * 0.8, max(vals) * 1.25
        grid = [lo + (hi - lo) * i / 100 for i in range(101)]
        ax.fill_between(grid, [g * BAND[0] for g in grid], [g * BAND[1] for g in grid],
                        color="0.85", label="within ±15 %")
        ax.plot(grid, grid, color="black", linewidth=0.8, label="y = x")
        for s, marker in (("tuning", "o"), ("held back", "s")):
            g = f[f["set"] == s]
            if not len(g):
                continue
            err = None
            if xerr is not None and g[xerr[0]].notna().all():
                err = [g[x] - g[xerr[0]], g[xerr[1]] - g[x]]
            ax.errorbar(g[x], g[y], xerr=err, fmt=marker, markersize=5, capsize=2,
                        label=f"{s} ({len(g)})")
            for _, r in g.iterrows():
                label = r["row"] + (f" ({r['side']})" if "side" in r else "")
                ax.annotate(label, (r[x], r[y]), fontsize=5, xytext=(3, 2),
                            textcoords="offset points")
        if log:
            ax.set_xscale("log")
            ax.set_yscale("log")
        ax.set_xlim(lo, hi)
        ax.set_ylim(lo, hi)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.set_title(t.title, fontsize=9)
        ax.legend(fontsize=7, loc="upper left")
    return draw


def _tables(rows: pd.DataFrame) -> list[Table]:
    lines, calib = pair_rows(rows)
    sp = _speedup_frame(lines)
    tm = _time_frame(lines, _diagnoser_for(calib))
    # the CPU file(s) the predictions used: the calibration's, or one given by --cpu
    used = sorted({(ln.get("cpu_file"), ln["cpu_file_sha256"]) for ln in lines
                   if ln.get("cpu_file_sha256")}, key=str)
    where = ("; ".join(f"Predicted with the CPU file {provenance.shown_path(f)} "
                       f"(SHA-256 {h[:12]})" for f, h in used) or "no prediction ran")
    local = not used or [h for _, h in used] == [(calib or {}).get("cpu_file_sha256")]
    cpu = "calibrated local" if local else \
        ", ".join(Path(f).name for f, _ in used if f) or "a CPU file"
    return [
        Table("validation", f"Predicted ({cpu}) against native speedup on this machine", sp,
              "speedup (x: baseline time / variant time)",
              Plot(x="native_speedup", xlabel="native speedup on this machine (x)",
                   ylabel=f"predicted speedup, {cpu} (x)",
                   draw=_draw_scatter("native_speedup", "predicted_speedup",
                                      "native speedup on this machine (x)",
                                      f"predicted speedup, {cpu} (x)", log=False,
                                      xerr=("native_ci95_low", "native_ci95_high"))),
              note=f"native: median of interleaved rounds (A B per pair, every pair in each "
                   f"round, the pairs' order rotating), process CPU time, bootstrap 95 % "
                   f"interval; minimums: the ratio of the fastest runs; run medians: each "
                   f"run's median (the spread between runs). Ratio: predicted / native, its "
                   f"interval from the native interval. {where}; held-back rows were not "
                   f"used to tune the model."),
        Table("validation_time", "Time per operation: predicted against native", tm,
              "ns per operation (predicted: cycles per operation / calibrated clock; "
              "native: CPU time / operations)",
              Plot(x="native_ns_per_op", xlabel="native time per operation (ns)",
                   ylabel="predicted time per operation (ns)",
                   draw=_draw_scatter("native_ns_per_op", "predicted_ns_per_op",
                                      "native time per operation (ns)",
                                      "predicted time per operation (ns)", log=True)),
              note="an operation is a command (GET, MGET, MSET) or a key (KEYS, SAVE, load); "
                   "the predicted figure counts only the simulated phase after the warm-up; "
                   "predicted_mlp: the simulated L1 misses in flight on average (the "
                   "miss-buffer occupancy). Diagnosis, for a side outside 0.85-1.15: the "
                   "setting of this CPU's ablation (results/ablation-*.json, `kvsim ablate`) "
                   "that moves the matching ablation side's predicted time toward native "
                   "most nearly, by how much, and the share of the miss it covers "
                   "(kvsim.experiments.validation_diagnosis); `no ablation` where none "
                   "matches."),
        Table("validation_summary", "Rows within 0.85-1.15, tuning and held-back sets",
              _summary_frame(sp), "rows; ratio predicted / native",
              note="held back: " + ", ".join(sorted(HELD_BACK)) + "."),
        Table("validation_calibration", "The calibration the predictions used",
              _calibration_frame(calib, lines), "the CPU file and its provenance",
              note="the experiment calibrates first (kvsim calibrate --quick), or reuses "
                   "this machine's cached calibration when it is fresh."),
        Table("validation_selfcheck", "The calibration's self-check",
              _selfcheck_frame(calib), "each check, then each replayed microbenchmark",
              note="kvsim calibrate's own microbenchmarks simulated on the CPU file it wrote, "
                   "against what they measured natively (sim/calibrate_check.py); a point "
                   "off by more than 10 % fails the file, which `--cpu local` then refuses; "
                   "work rows are shown, not gated."),
    ]


def _selfcheck_frame(calib: dict | None) -> pd.DataFrame:
    """The ``[selfcheck]`` of the CPU file the calibration cell recorded, as rows."""
    import tomllib

    cols = ["item", "ok", "native_ns", "predicted_ns", "ratio", "detail"]
    text = (calib or {}).get("cpu_file_text")
    sc = tomllib.loads(text).get("selfcheck") if isinstance(text, str) else None
    if not sc:
        return pd.DataFrame([{"item": "self-check", "ok": "no",
                              "detail": "the CPU file has none"}], columns=cols)
    out = [{"item": c["check"], "ok": "yes" if c["ok"] else "no", "detail": c["detail"]}
           for c in sc.get("checks", [])]
    for r in sc.get("replay", []):
        # each point's own tolerance (its native spread, sim/calibrate_check.py) where kept
        off = abs(r["ratio"] - 1.0) > r.get("tolerance", sc.get("tolerance", 0.1)) + 1e-9
        out.append({"item": r["point"], "ok": ("no" if off else "yes") if r["gated"]
                    else "(not gated)", "native_ns": r["measured_ns"],
                    "predicted_ns": r["predicted_ns"], "ratio": r["ratio"],
                    "detail": r.get("note", "")})
    return pd.DataFrame(out, columns=cols)


register(Experiment(NAME, "Predicted against native on this machine",
                    "native rounds on this machine",
                    _cells, _tables, doc=" ".join((_cells.__doc__ or "").split())))
