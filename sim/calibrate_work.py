"""The rates of the kinds of non-memory work for ``kvsim calibrate``: a CPU file's ``[work]``.

c_ref's traces name the kind of every gap instruction (the format's ``enum kvtWork``: WORK
markers and the header's ``site_kinds``), and the engine retires each kind at its own rate
(instructions per cycle, counted as the traces count them). Each rate is measured here with
c_ref's own code on this machine, never fitted to a validation row:

* **hash**, **crc**, **crc_combine**, **crc_streams**: c_ref's SipHash and CRC-64
  (``kvsim-calibrate work``, measured with the rest of the calibration in ``[meta.raw]
  work_ns_per_call``): the traces' instructions of every point
  (:func:`kvsim.sim.calibrate.work_instructions_by_kind`) over their cycles together
  (fastest sample of each point), so the long calls weigh as they take time. The CRC-64 is
  three kinds, as the core runs its parts at three rates (sim/VALIDATION.md, the finding on
  the load's checksum): one stream (calls to 1 KiB), the join of two streams alone
  (``crc64combine``: matrix products that branch on the sum's bits), and the two-stream loop
  of the 4 and 16 KiB calls (their cycles less their other parts at those two rates). A file
  without the last two charges them at its crc rate (sim/config.py ``WORK_FALLBACK``).
* **copy**: libc's memcpy of a 4 KiB buffer (``kvsim-calibrate workkind copy``), the copy the
  traces count at fread's refill (site ``snap.refill``, :data:`SNAP_REFILL_COST`).
* **compare**: libc's memcmp of equal strings (``workkind compare``) at two lengths: the
  traces' added instructions (``KS_WORK_OF(compare, len / 8)``) over the added cycles.
* **generic** and **parse**: the rest of c_ref's code (control flow, the tables' address
  arithmetic, RESP) has no kernel of its own, so c_ref itself is the kernel: GET over a
  keyspace that stays in the caches (:data:`GENERIC_KERNEL`), timed natively (fastest run,
  process CPU time) and traced. The generic rate is the one at which the simulator, given
  this file with every other rate as measured, predicts the native time per GET (a
  bisection: the predicted time falls as the rate rises). The parse kind runs at it too: its
  only kernel would be the same run.
* **server**: the server's request path around the keyspace (c_ref/callpath.c: argv objects
  from malloc and free with zmalloc's atomic counter, the command dict, processCommand's
  checks, call()'s bookkeeping and its two clock reads, the reply appends), which only a
  server runs. Its kernel is c_ref's server itself (``kvsim-cref serverloop``,
  c_ref/serverloop.c, :data:`SERVER_KERNEL`): PINGs fed to the server's entry point between
  read() and write() (ksServerSessionFeed), each read's worth timed alone after a loopback
  write and read (the system calls a server makes between two reads; their after-effect is
  the server's, the calls themselves are ``[syscall]``'s), less the clock's own cost. The
  rate is the one at which the simulator, given this file with every other rate as found
  above, predicts the same PINGs traced by the same loop at that time (fastest round).

A rate above the core's width is written as the width (the engine's limit), a rate that
cannot be measured (no timing model: the core is not in the table) leaves ``[work]`` out.
"""

from __future__ import annotations

import json
import math
import subprocess
import tempfile
import tomllib
from collections.abc import Callable, Sequence
from pathlib import Path

from kvsim import artifacts

from . import gap_model
from .config import WORK_KINDS, ConfigError, parse_cpu
from .gap_model import KS_GAP_MODEL

#: ``kvsim-calibrate workkind`` points (kind, bytes per call).
KIND_POINTS = [("copy", 4096), ("compare", 16), ("compare", 256)]
#: c_ref/sites.h's cost of ``snap.refill`` (fread's refill of its 4 KiB buffer): the
#: instructions the traces count for a 4 KiB copy. The tests check it against sites.h.
SNAP_REFILL_COST = 180
#: c_ref/emit.h KS_WORK_SCALE_PCT (KS_WORK_OF's scale), checked by the tests likewise.
WORK_SCALE_PCT = 106
#: c_ref's GET kernel for the generic rate: ``kvsim-cref`` pipeline options (a keyspace
#: in the caches of any core kvsim models: 1000 keys of 16 B with 100-byte values).
GENERIC_KERNEL = {"keys": 1000, "ops": 50_000, "value-size": 100}
#: native runs of it per calibration round
GENERIC_REPEAT = 5
#: the bisection's bounds (instructions per cycle) and steps
RATE_MIN, BISECT_STEPS = 0.1, 20
#: c_ref's server kernel for the server rate: ``kvsim-cref serverloop`` options (PING, one
#: request per read, as redis-benchmark's PING_MBULK at pipeline depth 1)
SERVER_KERNEL = {"command": "ping", "depth": 1, "iters": 20_000}
#: the arm whose time the server rate reproduces (serverloop's arms: none, loopback)
SERVER_ARM = "loopback"


def compare_instructions(chunk: int) -> int:
    """The instructions a trace counts for comparing ``chunk`` bytes (ksKeyCompare's
    KS_WORK_OF(compare, len / 8), scaled as ksEmitWorkOf scales)."""
    return (chunk // 8) * WORK_SCALE_PCT // 100


def _cref(*args: object) -> str:
    exe = artifacts.path(artifacts.CREF_CLI)
    p = subprocess.run([str(exe), *map(str, args)], capture_output=True, text=True, check=False)
    if p.returncode != 0:
        last = (p.stderr.strip().splitlines() or ["no message"])[-1]
        raise OSError(f"kvsim-cref {args[0]}: {last}")
    return p.stdout


def _kernel_args() -> list[str]:
    return [x for k, v in GENERIC_KERNEL.items() for x in (f"--{k}", str(v))]


def _server_args(kernel: dict) -> list[str]:
    return [x for k, v in kernel.items() for x in (f"--{k}", str(v))]


def server_ns_per_request(runs: Sequence[dict], arm: str = SERVER_ARM) -> float:
    """The server kernel's native ns per request in ``arm``: per round the median segment
    less the median empty segment (the clock's cost), the fastest round, over the depth."""
    per = [(s - c) / r["depth"] for r in runs
           for s, c in zip(r[f"{arm}_segment_ns"], r[f"{arm}_clock_ns"], strict=True)]
    return min(per)


def measure(rounds: int, calls: int, log: Callable[[str], None] = lambda m: None) -> dict:
    """Time the kernels of :data:`KIND_POINTS` and the generic kernel natively, ``rounds``
    times each; the raw samples (ns per call; seconds of process CPU time per GET)."""
    from .calibrate import run_bench

    raw: dict = {"ns_per_call": {}, "generic_s_per_op": [], "generic_kernel": GENERIC_KERNEL}
    for r in range(rounds):
        log(f"kinds of work {r + 1}/{rounds}: copy, compare, c_ref's GET in the caches")
        for kind, chunk in KIND_POINTS:
            w = run_bench("workkind", kind, chunk, calls, 2)
            raw["ns_per_call"].setdefault(f"{kind}/{chunk}", []).extend(w["ns_per_call"])
        out = json.loads(_cref("native", "pipeline", *_kernel_args(),
                               "--repeat", GENERIC_REPEAT, "--json"))
        ops = out["ops"]
        raw["generic_s_per_op"] += [s / ops for s in out["cpu_runs_s"]]
        raw.setdefault("server_runs", []).append(
            json.loads(_cref("serverloop", *_server_args(SERVER_KERNEL), "--rounds", 3)))
    raw["server_kernel"] = SERVER_KERNEL
    return raw


def _rate(instructions: float, ns: float, ghz: float) -> float:
    return instructions / (ns * ghz) if ns > 0 else math.inf


def _points(work_ns: dict[str, Sequence[float]], bench: str,
            keep: Callable[[int], bool] = lambda n: True) -> dict[str, Sequence[float]]:
    return {k: v for k, v in work_ns.items()
            if k.split("/")[0] == bench and v and keep(int(k.split("/")[1]))}


def kernel_rates(work_ns: dict[str, Sequence[float]], kinds_ns: dict[str, Sequence[float]],
                 ghz: float) -> dict[str, dict]:
    """hash, crc, crc_combine, crc_streams, copy and compare: each kind's rate (``ipc``) and
    how it was found. The CRC's three kinds (c_ref/crc64.c ksCrc64CostKinds): crc from the
    calls of one stream (``crc64`` points up to CRC64_DUAL_CUTOFF bytes), crc_combine from
    the joins alone (``crc64combine``), crc_streams from the longer calls, each call's cycles
    less its crc and crc_combine parts at those two rates."""
    from .calibrate import CRC64_DUAL_CUTOFF, work_instructions_by_kind

    def alone(kind: str, bench: str, pts: dict[str, Sequence[float]]) -> dict:
        instr = sum(work_instructions_by_kind(bench, int(k.split("/")[1]))[kind] for k in pts)
        ns = sum(min(v) for v in pts.values())
        return {"ipc": _rate(instr, ns, ghz), "instructions": round(instr, 1),
                "cycles": round(ns * ghz, 1), "points": sorted(pts)}

    out: dict[str, dict] = {}
    for kind, bench, pts in (
            ("hash", "siphash", _points(work_ns, "siphash")),
            ("crc", "crc64", _points(work_ns, "crc64", lambda n: n <= CRC64_DUAL_CUTOFF)),
            ("crc_combine", "crc64combine", _points(work_ns, "crc64combine"))):
        if pts:
            out[kind] = alone(kind, bench, pts)
    long_calls = _points(work_ns, "crc64", lambda n: n > CRC64_DUAL_CUTOFF)
    if long_calls and "crc" in out and "crc_combine" in out:
        instr = cycles = 0.0
        for k, v in long_calls.items():
            parts = work_instructions_by_kind("crc64", int(k.split("/")[1]))
            instr += parts["crc_streams"]
            cycles += (min(v) * ghz - parts["crc"] / out["crc"]["ipc"]
                       - parts["crc_combine"] / out["crc_combine"]["ipc"])
        out["crc_streams"] = {"ipc": instr / cycles if cycles > 0 else math.inf,
                              "instructions": round(instr, 1), "cycles": round(cycles, 1),
                              "points": sorted(long_calls)}
    copy = kinds_ns.get("copy/4096")
    if copy:
        out["copy"] = {"ipc": _rate(SNAP_REFILL_COST, min(copy), ghz),
                       "instructions": SNAP_REFILL_COST, "cycles": round(min(copy) * ghz, 1),
                       "points": ["copy/4096"]}
    lo, hi = kinds_ns.get("compare/16"), kinds_ns.get("compare/256")
    if lo and hi:
        d_instr = compare_instructions(256) - compare_instructions(16)
        d_ns = min(hi) - min(lo)
        out["compare"] = {"ipc": _rate(d_instr, d_ns, ghz), "instructions": d_instr,
                          "cycles": round(d_ns * ghz, 2), "points": ["compare/16", "compare/256"]}
    return out


def _with_rates(doc: dict, rates: dict[str, float]):
    from .calibrate import to_toml

    d = dict(doc)
    d["work"] = {**rates, "gap_model": KS_GAP_MODEL}  # rates in this c_ref's counts
    return parse_cpu(tomllib.loads(to_toml(d)), "calibrate")


def fit_generic(doc: dict, rates: dict[str, float], native_s_per_op: float, width: float,
                trace: Path, ops: int) -> dict:
    """The generic (and parse) rate at which the simulator predicts c_ref's GET kernel
    (``trace``, ``ops`` measured GETs) at its native time: bisection on a log scale."""
    return _fit(doc, rates, ("generic", "parse"), native_s_per_op * 1e9, width, trace, ops)


def fit_server(doc: dict, rates: dict[str, float], native_ns: float, width: float,
               trace: Path, requests: int) -> dict:
    """The server rate at which the simulator predicts c_ref's server kernel (``trace``,
    ``requests`` measured requests, every other kind at ``rates``) at ``native_ns`` per
    request: bisection on a log scale."""
    return _fit(doc, rates, ("server",), native_ns, width, trace, requests)


def _fit(doc: dict, rates: dict[str, float], kinds: Sequence[str], want: float, width: float,
         trace: Path, ops: int) -> dict:
    from .api import simulate

    def predicted_ns(g: float) -> float:
        cpu = _with_rates(doc, {**rates, **{k: g for k in kinds}})
        return simulate(str(trace), cpu)["timing"]["time_ns"] / ops

    lo, hi = RATE_MIN, float(width)
    if predicted_ns(hi) >= want:
        return {"ipc": hi, "bound": "width", "native_ns_per_op": want,
                "predicted_ns_per_op": predicted_ns(hi)}
    if predicted_ns(lo) <= want:
        return {"ipc": lo, "bound": "minimum", "native_ns_per_op": want,
                "predicted_ns_per_op": predicted_ns(lo)}
    for _ in range(BISECT_STEPS):
        mid = math.sqrt(lo * hi)
        if predicted_ns(mid) > want:
            lo = mid
        else:
            hi = mid
    g = math.sqrt(lo * hi)
    return {"ipc": g, "bound": None, "native_ns_per_op": want,
            "predicted_ns_per_op": predicted_ns(g)}


def apply(doc: dict, raw: dict, log: Callable[[str], None] = lambda m: None) -> None:
    """Add ``[work]`` (every kind's rate and its ``src``) to the calibration ``doc``, from
    ``raw["work"]`` and ``raw["work_kinds"]`` (:func:`measure`), and keep the samples and
    the fits in ``[meta.raw] work_kinds``. Nothing without a timing model or samples."""
    wk = raw.get("work_kinds")
    core = doc.get("core") or {}
    if not wk or "width" not in core or "freq_ghz" not in doc:
        return
    ghz, width = float(doc["freq_ghz"]), float(core["width"])
    found = kernel_rates(raw.get("work") or {}, wk.get("ns_per_call") or {}, ghz)
    rates, src = {}, {}
    for kind, f in found.items():
        r = min(f["ipc"], width)
        rates[kind] = round(r, 3)
        src[kind] = (f"measured: c_ref's kernel ({', '.join(f['points'])}): "
                     f"{f['instructions']} trace instructions in {f['cycles']} cycles"
                     + (" (capped at the width)" if f["ipc"] > width else ""))
    fit = None
    if wk.get("generic_s_per_op"):
        log("kinds of work: the generic rate (c_ref's GET in the caches, simulated)")
        ops = int(wk.get("generic_kernel", GENERIC_KERNEL)["ops"])
        kernel = wk.get("generic_kernel", GENERIC_KERNEL)
        with tempfile.TemporaryDirectory() as d:
            path = Path(d) / "generic.kvt"
            _cref("trace", "pipeline", *[x for k, v in kernel.items() for x in (f"--{k}", str(v))],
                  "-o", path)
            try:
                fit = fit_generic(doc, rates, min(wk["generic_s_per_op"]), width, path, ops)
            except ConfigError as e:
                log(f"kinds of work: no generic rate ({e})")
    if fit is not None:
        g = round(fit["ipc"], 3)
        rates["generic"] = rates["parse"] = g
        how = (f"measured: c_ref's GET over {kernel['keys']} keys in the caches, "
               f"native {fit['native_ns_per_op']:.1f} ns per GET (fastest run), simulated "
               f"with this file at {fit['predicted_ns_per_op']:.1f}")
        if fit["bound"]:
            how += f" (at the {fit['bound']} rate: the kernel is outside the range)"
        src["generic"] = how
        src["parse"] = "measured: as generic (the same kernel parses each GET's query)"
    sfit = server_fit(doc, rates, wk, width, log) if fit is not None else None
    if sfit is not None:
        rates["server"] = round(sfit["ipc"], 3)
        src["server"] = _server_src(sfit)
    if not rates:
        return
    doc["work"] = {k: rates[k] for k in WORK_KINDS if k in rates}
    doc["work"]["gap_model"] = KS_GAP_MODEL  # the counts the rates are in (sim/gap_model.py)
    doc["work"]["src"] = src
    doc.setdefault("meta", {}).setdefault("raw", {})["work_kinds"] = {**wk, "fits": {
        **{k: {kk: vv for kk, vv in f.items() if kk != "points"} for k, f in found.items()},
        **({"generic": fit} if fit else {}), **({"server": sfit} if sfit else {})}}
    doc["notes"] = [n for n in doc.get("notes", [])
                    if not n.startswith("sustained IPC of c_ref's CRC-64")]
    note = ("kinds of work: [work] gives each kind's instructions per cycle, measured with "
            "c_ref's own kernels (sim/calibrate_work.py)")
    if note not in doc["notes"]:
        doc["notes"].append(note)


def server_fit(doc: dict, rates: dict[str, float], wk: dict, width: float,
               log: Callable[[str], None] = lambda m: None) -> dict | None:
    """The server rate's fit from the samples ``wk["server_runs"]`` (:func:`measure`):
    the kernel traced now, the rate found by :func:`fit_server`; None without samples."""
    runs = wk.get("server_runs")
    if not runs:
        return None
    log("kinds of work: the server rate (c_ref's server serving PINGs, simulated)")
    kernel = dict(wk.get("server_kernel") or SERVER_KERNEL)
    native = server_ns_per_request(runs)
    requests = int(kernel["iters"]) * int(kernel["depth"])
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "server.kvt"
        _cref("serverloop", *_server_args(kernel), "--trace", path)
        try:
            fit = fit_server(doc, rates, native, width, path, requests)
        except ConfigError as e:
            log(f"kinds of work: no server rate ({e})")
            return None
    hot = server_ns_per_request(runs, "none")
    return {**fit, "kernel": kernel, "arm": SERVER_ARM, "native_ns_per_op_none": hot}


def _server_src(sfit: dict) -> str:
    k = sfit["kernel"]
    return (f"measured: c_ref's server (kvsim-cref serverloop) serving {k['command']} "
            f"{k['depth']} per read after a loopback write and read, native "
            f"{sfit['native_ns_per_op']:.1f} ns per request (fastest round, the clock's cost "
            f"less), simulated with this file at {sfit['predicted_ns_per_op']:.1f}"
            + (f" (at the {sfit['bound']} rate: the kernel is outside the range)"
               if sfit["bound"] else ""))


def measure_server(rounds: int, log: Callable[[str], None] = lambda m: None) -> dict:
    """The server kernel's samples alone (``server_runs``, ``server_kernel``)."""
    runs = []
    for r in range(rounds):
        log(f"the server kernel {r + 1}/{rounds}: c_ref's server serving PINGs")
        runs.append(json.loads(_cref("serverloop", *_server_args(SERVER_KERNEL), "--rounds", 3)))
    return {"server_runs": runs, "server_kernel": SERVER_KERNEL}


def add_server(doc: dict, wk: dict, log: Callable[[str], None] = lambda m: None) -> None:
    """Add the server rate to a calibration ``doc`` whose ``[work]`` has the other kinds,
    from the server kernel's samples ``wk`` (:func:`measure_server`)."""
    width = float(doc["core"]["width"])
    rates = {k: float(v) for k, v in doc["work"].items() if k in WORK_KINDS}
    sfit = server_fit(doc, rates, wk, width, log)
    if sfit is None:
        raise ConfigError("no server rate (no samples)")
    doc["work"]["server"] = round(sfit["ipc"], 3)
    doc["work"].setdefault("src", {})["server"] = _server_src(sfit)
    order = {k: i for i, k in enumerate([*WORK_KINDS, "gap_model", "src", "notes"])}
    doc["work"] = dict(sorted(doc["work"].items(), key=lambda kv: order.get(kv[0], 99)))
    wkraw = doc.setdefault("meta", {}).setdefault("raw", {}).setdefault("work_kinds", {})
    wkraw.update(wk)
    wkraw.setdefault("fits", {})["server"] = sfit


def raw_from_meta(meta_raw: dict) -> dict | None:
    """The samples :func:`measure` took, from a written file's ``[meta.raw]`` (for
    ``--from-raw``)."""
    wk = meta_raw.get("work_kinds")
    if not isinstance(wk, dict):
        return None
    return {k: v for k, v in wk.items() if k != "fits"}


def add_to_file(src: Path, out: Path, rounds: int = 3, calls: int = 100_000,
                log: Callable[[str], None] = lambda m: None, again: bool = False) -> dict:
    """``src``'s CPU file (a calibration with its ``[meta.raw]``) with ``[work]`` measured
    now (:func:`measure`, :func:`apply`) written to ``out``: the same file's predictions
    with and without the kinds of work side by side; a file whose ``[work]`` has no
    ``server`` rate gains that one alone (:func:`add_server`). ``again``: the file's
    ``[work]`` is dropped and fitted anew: copy, compare and the GET and server kernels
    measured now, hash and crc from the file's own samples (``[meta.raw]
    work_ns_per_call``) as c_ref counts them now (the rates before kept in ``[meta]
    work_again``). Returns the ``[work]`` table."""
    from .calibrate import to_toml

    try:
        doc = tomllib.loads(Path(src).read_text())
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise ConfigError(f"{src}: {e}") from None
    if again and "work" in doc:
        from kvsim.provenance import provenance

        before = {k: v for k, v in doc.pop("work").items() if k != "src"}
        doc.setdefault("meta", {})["work_again"] = {"before": before, **provenance()}
    if "server" in (doc.get("work") or {}):
        raise ConfigError(f"{src}: already has [work] server")
    fitted = _fitted_to(doc, src)
    if "work" in doc and fitted not in (None, KS_GAP_MODEL):  # one model's counts per file
        raise ConfigError(f"{src}: [work] was fitted to {fitted}'s counts, this c_ref's are "
                          f"{KS_GAP_MODEL}'s: fit it again first (--from-raw)")
    if "work" in doc:  # the other kinds as the file has them: the server kernel alone now
        from kvsim.provenance import provenance

        add_server(doc, measure_server(rounds, log), log)
        doc["meta"]["server_work_provenance"] = provenance()
    else:
        raw = {"work": (doc.get("meta", {}).get("raw") or {}).get("work_ns_per_call") or {},
               "work_kinds": measure(rounds, calls, log)}
        apply(doc, raw, log)
    if "work" not in doc:
        raise ConfigError(f"{src}: no [work] (the file has no [core] or clock)")
    text = to_toml(doc)
    parse_cpu(tomllib.loads(text), str(out))
    Path(out).write_text(text)
    return doc["work"]


def _fitted_to(doc: dict, src: Path) -> str | None:
    try:
        return gap_model.of_work(doc)
    except ValueError as e:
        raise ConfigError(f"{src}: {e}") from None


#: how far today's trace of a fitted kernel (c_ref's GET, its server) may move the kernel's
#: prediction at the file's own rates (the counted kinds counted again) from the one its fit
#: made before ``--from-raw`` refuses: further, and c_ref's code on the kernel's path, or the
#: counts of its kind, changed since the native samples, which the samples cannot tell apart
STALE = 0.05


def kernel_drift(doc: dict, meta_raw: dict, log: Callable[[str], None] = lambda m: None
                 ) -> dict[str, dict]:
    """For each fitted kernel (generic, server) of a calibrated ``doc``: the kernel traced by
    this c_ref and simulated on ``doc`` at its own rates, hash, crc, copy and compare counted
    again from its samples (what the count alone changes), against the prediction its fit
    made (``[meta.raw] work_kinds.fits``): ``{kind: {"then", "now", "drift"}}``. A drift past
    :data:`STALE` says c_ref changed on the kernel's path since its native samples (its code,
    timed by them no more, or counts of that kind, which fitting again would absorb): the
    samples alone cannot tell which, so they are not fitted again."""
    wk = meta_raw.get("work_kinds") or {}
    fits = wk.get("fits") or {}
    width = float(doc["core"]["width"])
    found = kernel_rates(meta_raw.get("work_ns_per_call") or {}, wk.get("ns_per_call") or {},
                         float(doc["freq_ghz"]))
    rates = {**{k: float(v) for k, v in doc["work"].items() if k in WORK_KINDS},
             **{k: round(min(f["ipc"], width), 3) for k, f in found.items()}}
    cpu = _with_rates(doc, rates)
    out = {}
    with tempfile.TemporaryDirectory() as d:
        for kind, kernel, run in (
                ("generic", wk.get("generic_kernel", GENERIC_KERNEL),
                 lambda k, p: _cref("trace", "pipeline", *_server_args(k), "-o", p)),
                ("server", wk.get("server_kernel", SERVER_KERNEL),
                 lambda k, p: _cref("serverloop", *_server_args(k), "--trace", p))):
            then = (fits.get(kind) or {}).get("predicted_ns_per_op")
            if not then:
                continue
            log(f"kinds of work: the {kind} kernel at the file's rates, traced now")
            path = Path(d) / f"{kind}.kvt"
            run(kernel, path)
            n = int(kernel["ops"]) if kind == "generic" else \
                int(kernel["iters"]) * int(kernel["depth"])
            from .api import simulate

            now = simulate(str(path), cpu)["timing"]["time_ns"] / n
            out[kind] = {"then": then, "now": now, "drift": now / then - 1}
    return out


def refit(src: Path, out: Path, log: Callable[[str], None] = lambda m: None,
          mark_stale: bool = False) -> dict:
    """``src``'s CPU file written to ``out`` with ``[work]`` fitted again to this c_ref's
    counts (:data:`KS_GAP_MODEL`) from the samples the file keeps (``[meta.raw]``
    ``work_ns_per_call`` and ``work_kinds``), measuring nothing: the kernels' instructions
    counted again, c_ref's GET and server kernels traced again and the generic and server
    rates fitted again on the file's own hierarchy (:func:`apply`). The rates before, their
    model and :func:`kernel_drift` are kept in ``[meta] work_refit``. Returns the ``[work]``
    table. A file whose kernels drifted past :data:`STALE` is refused (ConfigError, nothing
    written), or with ``mark_stale`` written with ``[work]`` as it was, its model named and
    a note saying why, so that it stays refused for this c_ref's traces."""
    from kvsim.provenance import provenance

    try:
        doc = tomllib.loads(Path(src).read_text())
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise ConfigError(f"{src}: {e}") from None
    before = _fitted_to(doc, src)
    meta_raw = (doc.get("meta") or {}).get("raw") or {}
    wk = raw_from_meta(meta_raw)
    if "work" not in doc or before is None or not wk:
        raise ConfigError(f"{src}: no [work] fitted to c_ref's kernels with its samples "
                          "([meta.raw] work_kinds): nothing to fit again")
    if "core" not in doc or "freq_ghz" not in doc:
        raise ConfigError(f"{src}: [work] cannot be fitted again (no [core] width or clock)")
    drift = kernel_drift(doc, meta_raw, log)
    stale = [f"{k} kernel {d['now']:.1f} ns against {d['then']:.1f} at its fit"
             for k, d in drift.items() if abs(d["drift"]) > STALE]
    if stale:
        why = (f"c_ref changed on its kernels' path since its samples (its code or their "
               f"kind's counts): traced now, at the file's rates (the counted kinds counted "
               f"again), the {'; the '.join(stale)} (more than {STALE:.0%})")
        if not mark_stale:
            raise ConfigError(f"{src}: {why}: measure it again (kvsim calibrate)")
        doc["work"]["gap_model"] = before
        doc.setdefault("meta", {})["work_refit"] = {
            "refused": why, "kernel_drift": drift, "provenance": provenance()}
        doc.setdefault("notes", []).append(
            f"[work]: not fitted again to {KS_GAP_MODEL}'s counts (python -m "
            f"kvsim.sim.calibrate_work --from-raw --mark-stale): {why}; refused for "
            f"{KS_GAP_MODEL} traces until measured again")
        _write(doc, out)
        return doc["work"]
    old = {k: v for k, v in doc["work"].items() if k in WORK_KINDS}
    apply(doc, {"work": meta_raw.get("work_ns_per_call") or {}, "work_kinds": wk}, log)
    if doc["work"].get("gap_model") != KS_GAP_MODEL:  # apply fitted nothing
        raise ConfigError(f"{src}: [work] cannot be fitted again (no [core] width or clock)")
    missing = sorted(set(old) - set(doc["work"]))
    if missing:
        raise ConfigError(f"{src}: [work] {', '.join(missing)}: cannot be fitted "
                          "again from the samples the file keeps")
    doc["meta"]["work_refit"] = {"gap_model_before": before, "rates_before": old,
                                 "kernel_drift": drift, "provenance": provenance()}
    doc["notes"].append(f"[work] fitted again to {KS_GAP_MODEL}'s counts from the samples in "
                        f"[meta.raw] (python -m kvsim.sim.calibrate_work --from-raw); the "
                        f"rates fitted to {before}'s are in [meta] work_refit, and [selfcheck]'s "
                        "work-kernel rows (shown, not gated) are still those of the rates "
                        "before")
    _write(doc, out)
    return doc["work"]


def _write(doc: dict, out: Path) -> None:
    from .calibrate import to_toml

    text = to_toml(doc)
    parse_cpu(tomllib.loads(text), str(out))
    Path(out).write_text(text)


def main(argv: Sequence[str] | None = None) -> int:
    import argparse
    import sys

    ap = argparse.ArgumentParser(prog="python -m kvsim.sim.calibrate_work",
                                 description="Write a calibrated CPU file with [work] measured "
                                             "now (the kinds of work's rates).")
    ap.add_argument("cpu_file", type=Path)
    ap.add_argument("-o", "--output", type=Path, required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--from-raw", action="store_true",
                    help="fit [work] again to this c_ref's counts from the samples the file "
                         "keeps ([meta.raw]), measuring nothing; refused where c_ref's kernels "
                         "moved since the samples more than the counted kinds explain")
    ap.add_argument("--again", action="store_true",
                    help="drop the file's [work] and fit it anew: copy, compare and c_ref's "
                         "GET and server kernels measured now (a native measurement), hash and crc "
                         "from the file's own samples; the rates before in [meta] work_again")
    ap.add_argument("--mark-stale", action="store_true",
                    help="with --from-raw: write such a file with [work] as it was, its gap "
                         "model named and a note saying why")
    a = ap.parse_args(argv)
    if a.again and a.from_raw:
        print("calibrate_work: --again measures, --from-raw does not: not both", file=sys.stderr)
        return 2
    if a.mark_stale and not a.from_raw:
        print("calibrate_work: --mark-stale: only with --from-raw", file=sys.stderr)
        return 2
    try:
        def log(m: str) -> None:
            print(m, file=sys.stderr)

        work = (refit(a.cpu_file, a.output, log, a.mark_stale) if a.from_raw else
                add_to_file(a.cpu_file, a.output, a.rounds, log=log, again=a.again))
    except (ConfigError, OSError) as e:
        print(f"calibrate_work: {e}", file=sys.stderr)
        return 1
    print(json.dumps({k: v for k, v in work.items() if k != "src"}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
