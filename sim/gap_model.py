"""c_ref's gap model by name: which counts a trace's gaps, and a CPU file's ``[work]``, are in.

A c_ref trace's gap counts each record's non-memory instructions by c_ref's gap model (every
site's cost, the work units' scale, the CRC-64's and SipHash's counts; c_ref/emit.h
``KS_GAP_MODEL``, the header's ``gap_model``). A calibrated CPU file's ``[work]`` rates are
instructions per cycle *in those counts*: a kernel's traced instructions over its native
cycles (sim/calibrate_work.py), so a rate fitted to one model's counts charges the work of
another's wrongly (SipHash's exact count, ``site-cost-v2``, is 1.6-2 times the one
``site-cost-v1`` charged; a v1 hash rate charges a v2 trace's hash that much too long). So a
file whose rates were fitted names its model (``[work] gap_model``, written by ``kvsim
calibrate``), and a timing run refuses a c_ref trace of another model on it
(:func:`check`), with one line naming both.

Which files are checked: a ``[work]`` that names its model; one that does not, in a file
that keeps the samples it was fitted to (``[meta.raw] work_kinds``, only ``kvsim calibrate``
writes them), was fitted before models had names, to ``site-cost-v1`` (:data:`UNNAMED`).
A preset's ``[work]`` (sourced estimates, not fitted to c_ref's counts) and a hand-written
one are not checked. Which traces: c_ref's (a ``gap_model`` of :data:`KS_GAP_MODELS`, or
any ``site-cost-vN`` a newer c_ref may write); a trace of another producer's model (the
unit tests', ``kvsim micro``'s) is not.
"""

from __future__ import annotations

import re

#: c_ref/emit.h KS_GAP_MODEL: the model of the traces this c_ref writes (the tests check it
#: against the header c_ref writes)
KS_GAP_MODEL = "site-cost-v2"
#: every name c_ref's model has had, oldest first, and what it counts differently from the one
#: before (c_ref/emit.h keeps the same list)
KS_GAP_MODELS: dict[str, str] = {
    "site-cost-v1": "every count before the names were kept: SipHash charged 40 + 12 per "
                    "word, scaled (0.5-0.6 of its instructions); the CRC-64's count was "
                    "refitted to callgrind within it",
    "site-cost-v2": "SipHash's exact count (c_ref/siphash.c ksSiphashCost, "
                    "ksSiphashNocaseCost; sim/VALIDATION.md finding 22)",
}
#: the model of a fitted ``[work]`` that names none (written before the names were kept)
UNNAMED = "site-cost-v1"
#: how to fit a file's [work] again to the current counts, from the samples it keeps
REFIT = "python -m kvsim.sim.calibrate_work FILE -o OUT --from-raw"

_CREF = re.compile(r"site-cost-v\d+")

assert KS_GAP_MODEL == list(KS_GAP_MODELS)[-1]


def is_cref(name: object) -> bool:
    """``name`` (a trace header's ``gap_model``) is one of c_ref's models."""
    return isinstance(name, str) and _CREF.fullmatch(name) is not None


def of_work(doc: dict) -> str | None:
    """The model a CPU file document's ``[work]`` was fitted to: its ``gap_model``, else
    :data:`UNNAMED` when the file keeps the samples it was fitted to, else None (no
    ``[work]``, or one that was not fitted to c_ref's counts: not checked). Raises
    ValueError with one line for a name that is not one of :data:`KS_GAP_MODELS`."""
    work = doc.get("work")
    if not isinstance(work, dict):
        return None
    if "gap_model" in work:
        name = work["gap_model"]
        if name not in KS_GAP_MODELS:
            raise ValueError(f"work.gap_model: unknown gap model {name!r} (valid: "
                             f"{', '.join(KS_GAP_MODELS)})")
        return name
    raw = (doc.get("meta") or {}).get("raw") if isinstance(doc.get("meta"), dict) else None
    return UNNAMED if isinstance(raw, dict) and raw.get("work_kinds") else None


def mismatch(cpu_model: str | None, header: dict | None, cpu_name: str) -> str | None:
    """The one-line refusal of a trace with ``header`` on a CPU (``cpu_name``) whose [work]
    was fitted to ``cpu_model``, or None when they agree or nothing is checked."""
    trace_model = (header or {}).get("gap_model")
    if cpu_model is None or not is_cref(trace_model) or trace_model == cpu_model:
        return None
    order = list(KS_GAP_MODELS)
    newer_trace = trace_model not in order or order.index(trace_model) > order.index(cpu_model)
    fix = (f"fit them again ({REFIT})" if newer_trace else
           "trace it again with this c_ref")
    return (f"the trace's gap model is {trace_model}, and {cpu_name}'s [work] rates were "
            f"fitted to {cpu_model}'s counts: {fix}, or simulate on a preset")


def against_cref(cpu_model: str | None, cpu_name: str) -> str | None:
    """:func:`mismatch` for the traces this c_ref writes (:data:`KS_GAP_MODEL`): a study
    that traces and simulates asks before any work."""
    return mismatch(cpu_model, {"gap_model": KS_GAP_MODEL}, cpu_name)
