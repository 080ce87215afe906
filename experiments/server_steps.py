"""Instructions per call of each step c_ref's traced server charges as work units.

The traced build of c_ref's server records its memory accesses and charges the instructions
between them as work units (``KS_WORK_OF``), one constant per modelled step: ``#define
KS_<STEP>_WORK N`` in c_ref/callpath.c and c_ref/server.c, each beside the function whose
instructions it stands for. This module measures them: c_ref's native server (the
``kvsim-cref`` build the traced constants model, ``-O2``) runs under callgrind with the
client of ``kvsim native server`` (:func:`.server.callgrind_runs`: keys loaded
uninstrumented, a warm-up run, then the counted run), and for every step of :data:`STEPS`
the file gets the instructions per call of its function: callgrind's inclusive cost of the
calls from the step's callers, less the inclusive cost of the callees the trace charges apart
(their own steps, or the recorded accesses' code), over the number of those calls.

``python -m kvsim.experiments.server_steps`` writes ``results/server-steps-callgrind.json``;
``experiments/tests/test_server_steps.py`` compares every constant in the C files with that
file (:data:`TOLERANCE`), so that a constant cannot drift from its measurement silently.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

from kvsim.experiments import callgrind, progress, valkey
from kvsim.experiments import server as S

RESULT_NAME = "server-steps-callgrind.json"
#: The cells measured: GET at depths 1 and 10, MSET of 10 keys (the key writes' steps).
CELLS = ["get-p1", "get-p10", "mset-10"]
#: A constant agrees with its measurement within this fraction of it or this many
#: instructions, whichever is larger (callgrind's counts are exact; a step's cost moves with
#: the branches it takes, and a few of the constants are a difference of two counts).
TOLERANCE = (0.15, 4.0)


def _step(file: str, fns: list[str], cell: str = "get-p10", minus: tuple[str, ...] = (),
          callers: tuple[str, ...] = (), less: float = 0.0, minus_steps: tuple[str, ...] = (),
          per: str = "first", note: str = "") -> dict[str, Any]:
    return {"file": file, "functions": fns, "cell": cell, "minus": list(minus),
            "callers": list(callers), "less": less, "minus_steps": list(minus_steps),
            "per": per, "note": note}


#: Each work constant (``KS_<STEP>_WORK``): the C file that defines it, the native functions
#: whose instructions per call it stands for, the cell measured, the callees charged apart
#: (``minus``), the callers whose calls count (``callers``; all if empty), an amount the
#: constant leaves to other code (``less``), the other steps whose figures it excludes
#: (``minus_steps``: steps inside its functions, measured in the same run), and why.
STEPS: dict[str, dict[str, Any]] = {
    "KS_CALL_WORK": _step("callpath.c", ["ksCallCommand"], minus=("getCommand",),
                          minus_steps=("KS_COMMIT_DEFERRED_WORK",
                                       "KS_AFTER_COMMAND_LISTS_WORK",
                                       "KS_CALL_CLOCK_HIST_WORK"),
                          note="processCommand's checks and call()'s bookkeeping around the "
                          "command (GET), less the steps inside it charged apart"),
    "KS_CALL_CLOCK_HIST_WORK": _step("callpath.c", ["ustimeNow", "counts_index_for"],
                                     callers=("ksCallCommand", "hdr_record_values"), less=12.0,
                                     note="call()'s ustime and the histogram's index, less "
                                     "the 12 instructions of call()'s own code they replaced"),
    "KS_ZMALLOC_WORK": _step("callpath.c", ["ksZmalloc", "zmalloc_usable"], per="any",
                             less=4.0,
                             note="malloc, malloc_usable_size and the per-thread stat (per "
                             "call of either), less the 4 accesses the trace records "
                             "(c_ref/libc_alloc.h)"),
    "KS_ZFREE_WORK": _step("callpath.c", ["ksZfree"], less=4.0,
                           note="malloc_usable_size, free and the stat, less the 4 accesses "
                           "the trace records (c_ref/libc_alloc.h)"),
    "KS_REPLY_APPEND_WORK": _step("callpath.c", ["ksCallAppend", "ksCallPrepareWrite"],
                                  minus=("ksReplyRaw",),
                                  note="prepareClientToWrite (the callers' ksCallPrepareWrite "
                                  "before each piece) and _addReplyToBufferOrList's tests; the "
                                  "copy into the buffer (ksReplyRaw) is traced"),
    "KS_COPY_AVOID_WORK": _step("callpath.c", ["ksCallCopyAvoidPreferred"],
                                minus=("ksObjectGetValOfValue",),
                                callers=("serverReplyBulkObject", "serverReplyBulk"),
                                note="isCopyAvoidPreferred of a bulk reply's object; its "
                                "objectGetVal is KS_OBJECT_GET_VAL_VALUE_WORK"),
    "KS_OBJECT_GET_VAL_WORK": _step("callpath.c", ["ksObjectGetVal"],
                                    note="objectGetVal of an argument object"),
    "KS_OBJECT_GET_VAL_VALUE_WORK": _step("callpath.c", ["ksObjectGetValOfValue"], less=1.0,
                                          note="objectGetVal of a value object, less the "
                                          "header's load (recorded)"),
    "KS_STRING_OBJECT_LEN_WORK": _step("callpath.c", ["ksCallStringObjectLen"],
                                       minus=("ksObjectGetValOfValue",),
                                       note="stringObjectLen's own code"),
    "KS_GET_KEYS_WORK": _step("callpath.c", ["ksCallGetKeys", "ksCallGetKeysFree"],
                              note="getKeysFromCommand and getKeysFreeResult of a GET"),
    "KS_LOOKUP_TOUCH_WORK": _step("callpath.c", ["ksCallLookupKeyTouch"],
                                  note="lookupKey's gate of a hit and LRU_CLOCK()"),
    "KS_AFTER_SLEEP_WORK": _step("callpath.c", ["ksCallAfterSleep"],
                                 note="afterSleep: the GIL, the clocks, localtime_r"),
    "KS_PARSE_RESULTS_WORK": _step("callpath.c", ["ksCallParseResults"],
                                   note="the read flags and handleParseResults"),
    "KS_COMMIT_DEFERRED_WORK": _step("callpath.c", ["commitDeferredReplyBuffer"],
                                     note="the empty path, with listEmpty"),
    "KS_AFTER_COMMAND_LISTS_WORK": _step("callpath.c", ["firePostExecutionUnitJobs",
                                                        "listJoin"],
                                         note="afterCommand's calls of the two"),
    "KS_SETKEY_WORK": _step("callpath.c", ["ksCallSetKeyValueArg", "ksCallSetKeyDone"],
                            "mset-10", note="per key written: tryObjectEncoding's tests and "
                            "setKey's bookkeeping"),
    "KS_QB_ROOM_WORK": _step("server.c", ["sdsMakeRoomForQb"],
                             note="sdsMakeRoomFor's early return"),
    "KS_QB_INCR_WORK": _step("server.c", ["sdsIncrLenQb"], note="sdsIncrLen"),
}

#: The constants that disagree with their measurement, each with what the measurement shows
#: (results/server-steps-callgrind.json; docs/server.md, "What is left"). The test holds this
#: list to the file both ways: a constant that drifts, or one brought back to its
#: measurement, changes the set and fails it until this list says so. Empty: every constant
#: is its measurement.
KNOWN_DRIFT: dict[str, str] = {}

_DEFINE = re.compile(r"^#define\s+(KS_[A-Z0-9_]+_WORK)\s+(\d+)\b", re.M)


def c_constants(c_ref: Path) -> dict[str, tuple[str, int]]:
    """Every ``#define KS_<STEP>_WORK N`` of the C files named in :data:`STEPS`:
    ``{name: (file, N)}``."""
    out: dict[str, tuple[str, int]] = {}
    for file in sorted({s["file"] for s in STEPS.values()}):
        for name, value in _DEFINE.findall((c_ref / file).read_text()):
            out[name] = (file, int(value))
    return out


def base_name(fn: str) -> str:
    """A function's name without the suffix of a compiler's clone (``f.constprop.0``,
    ``f.isra.0``, ``f.part.0``, ``f.cold``): callgrind names the clone that ran."""
    return fn.split(".", 1)[0]


def step_figure(prof: callgrind.Profile, step: dict[str, Any]) -> dict[str, Any]:
    """The instructions per call of one step in a profile: the inclusive instructions of the
    calls to its functions (from its callers, if it names any), less those of the callees it
    names (``minus``) inside them, over the calls to its first function (a step of several
    functions runs each once: their sum per step), less ``less``."""
    calls = incl = minus = 0
    counted = step["functions"] if step["per"] == "any" else step["functions"][:1]
    for (caller, callee), row in prof.call_costs.items():
        caller, callee = base_name(caller), base_name(callee)
        if callee in step["functions"] and (not step["callers"] or caller in step["callers"]):
            incl += row["Ir"]
            if callee in counted:
                calls += row["calls"]
        if caller in step["functions"] and callee in step["minus"]:
            minus += row["Ir"]
    per_call = (incl - minus) / calls - step["less"] if calls else None
    return {"calls": calls, "inclusive": incl, "minus": minus,
            "per_call": None if per_call is None else round(per_call, 1)}


def step_figures(prof: callgrind.Profile) -> dict[str, dict[str, Any]]:
    """:func:`step_figure` of every step of :data:`STEPS`, each less the figures of its
    ``minus_steps`` (computed first)."""
    out = {name: step_figure(prof, st) for name, st in STEPS.items()}
    for name, st in STEPS.items():
        inner = [out[n]["per_call"] for n in st["minus_steps"]]
        if out[name]["per_call"] is not None and None not in inner:
            out[name]["per_call"] = round(out[name]["per_call"] - sum(inner), 1)
            out[name]["minus_steps"] = dict(zip(st["minus_steps"], inner, strict=True))
    return out


def measure(keys: int, requests: int, warmup: int, clients: int, log=None) -> dict[str, Any]:
    """Each cell of :data:`CELLS` served by c_ref's native server under callgrind; per cell
    every step's figure (:func:`step_figure`)."""
    from kvsim.experiments import cref

    cells: dict[str, Any] = {}
    for cell in CELLS:
        spec = valkey.normalize_spec({
            **S.parse_cell(cell), "keys": keys, "value_size": valkey.DEFAULTS["value_size"],
            "clients": clients, "batch_a": 16, "batch_b": 16, "rounds": 1, "warmup_rounds": 0,
            "seed": 0, "requests": requests})
        for _, prof in S.callgrind_runs(spec, 16, instr_at_start=False, warmup_requests=warmup,
                                        cref_builds={"cref": cref.binary()},
                                        with_valkey=False):
            cells[cell] = {"spec": spec,
                           "steps": step_figures(prof)}
        if log:
            log(f"{cell}: " + ", ".join(f"{n} {f['per_call']}"
                                        for n, f in cells[cell]["steps"].items()))
    return cells


def agreement(constants: dict[str, tuple[str, int]], doc: dict[str, Any]) -> list[str]:
    """The constants that disagree with the measured file (one line each); [] if all agree.
    A constant of STEPS missing from the C files, or a C constant missing from STEPS, is a
    disagreement too."""
    bad = []
    for name in sorted(set(constants) | set(STEPS)):
        if name not in STEPS:
            bad.append(f"{name}: a work constant without a measured step (STEPS)")
            continue
        if name not in constants:
            bad.append(f"{name}: in STEPS but not defined in c_ref/{STEPS[name]['file']}")
            continue
        file, value = constants[name]
        fig = doc["cells"][STEPS[name]["cell"]]["steps"][name]["per_call"]
        if fig is None:
            bad.append(f"{name}: no call of {STEPS[name]['functions']} measured")
            continue
        tol = max(TOLERANCE[0] * fig, TOLERANCE[1])
        if abs(value - fig) > tol:
            bad.append(f"{name} = {value} (c_ref/{file}) but measured {fig} "
                       f"({STEPS[name]['cell']}; tolerance {tol:.1f})")
    return bad


def main(argv: list[str] | None = None,
         prog: str = "python -m kvsim.experiments.server_steps") -> int:
    from kvsim import provenance

    ap = S._Parser(prog=prog, description="Instructions per call of each step the traced "
                   "server charges (c_ref's KS_*_WORK constants), from callgrind of c_ref's "
                   "native server.")
    ap.add_argument("--keys", type=int, default=20_000, help="keys loaded (20000)")
    ap.add_argument("--requests", type=int, default=4000, help="measured commands (4000)")
    ap.add_argument("--warmup-requests", type=int, default=1000,
                    help="commands served before the counters are zeroed (1000)")
    ap.add_argument("--clients", type=int, default=valkey.DEFAULTS["clients"])
    ap.add_argument("--out", default=None, help=f"result file (default results/{RESULT_NAME})")
    a = ap.parse_args(argv)
    if min(a.keys, a.requests, a.clients) < 1 or a.warmup_requests < 0:
        ap.error("--keys, --requests and --clients must be at least 1, --warmup-requests 0")
    out = provenance.out_path(a.out, RESULT_NAME)
    cells, status = S.run_or_status(prog, lambda: measure(
        a.keys, a.requests, a.warmup_requests, a.clients,
        log=progress.log_line))
    if status:
        return status
    doc = {"experiment": "server_steps_callgrind", "tolerance": list(TOLERANCE),
           "steps": STEPS, "cells": cells}
    for line in agreement(c_constants(Path(__file__).resolve().parents[1] / "c_ref"), doc):
        known = line.split(" ", 1)[0].rstrip(":") in KNOWN_DRIFT
        print(f"# disagrees{' (known)' if known else ''}: {line}", file=sys.stderr)
    return provenance.publish(prog, out, doc)


if __name__ == "__main__":
    sys.exit(main())
