"""The server study's ``--sitting-syscall``: this machine's rows predicted with the kernel's
costs measured in the same sitting as the native cells they are judged against.

``kvsim experiment run server --sitting-syscall --cpu FILE ...``: before any cell, in the
process that then measures the native cells, each CPU file among ``--cpu`` has its
``[syscall]`` socket calls measured again (sim/calibrate_sitting.py, the procedure of
``kvsim calibrate --remeasure-syscall``: loopback calls and PINGs only, never the study's
rows) and written to ``DIR/server/sitting/NAME.toml`` (:func:`sitting_cpus`); the study
predicts this machine's rows on that file instead of FILE, and its table ``server_syscall``
(:func:`table`) records the section measured beside the one FILE gave.

A resumed run finds the file there and measures nothing: the stored section is reused, so
the cells give the same figures whenever the tables are assembled again. The cells are keyed
by it: a prediction's spec carries its CPU file's SHA-256 (:func:`cpu_key`), and the native
cells carry the sitting (the boot and the time the section was measured: :func:`native_key`)
and reuse no earlier native result file, so a section measured again (its file removed)
measures the native cells again too. The presets' cells are those of a run without the
option. Under ``--only sim`` nothing is measured: the section is measured with the native
cells.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd

from kvsim import provenance

SITTING_DIR = "sitting"
#: how a prediction on a re-measured file is named in the tables (after the file's path)
LABEL = ", [syscall] of this sitting"


def sitting_path(out: Path, cpu: str) -> Path:
    """Where the re-measured copy of CPU file ``cpu`` of a run into ``out`` is kept."""
    return Path(out) / "server" / SITTING_DIR / Path(cpu).name


def _stored(path: Path) -> dict[str, Any] | None:
    """``[meta] syscall_sitting`` of a CPU file, or None (no such file, or none there)."""
    try:
        doc = tomllib.loads(Path(path).read_text())
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return None
    return (doc.get("meta") or {}).get("syscall_sitting")


def sitting_cpus(out: Path, cpus: list[str], measure: bool,
                 log: Callable[[str], None] = lambda m: None, rounds: int | None = None,
                 **small: Any) -> list[str]:
    """``cpus`` with each CPU file (a ``.toml`` path) replaced by its copy re-measured in this
    sitting (:func:`sitting_path`): the one stored there for the same file's bytes, else,
    with ``measure``, measured now (one measurement for every file; each file's traced PINGs
    predicted on it). ValueError (one line) where there is no CPU file, two share a name, or
    a copy is missing and ``measure`` is False. ``rounds``, ``small``: the measurement's
    (sim/calibrate_sitting.py ``measure``; tests)."""
    from kvsim.sim import calibrate_sitting as cs

    files = [c for c in dict.fromkeys(cpus) if c.endswith(".toml")]
    if not files:
        raise ValueError("--sitting-syscall: no CPU file among --cpu (it measures the "
                         "[syscall] of each CPU file given by its path)")
    names = [Path(f).name for f in files]
    if len(set(names)) < len(names):
        raise ValueError("--sitting-syscall: two CPU files of one name among --cpu")
    todo = []
    for f in files:
        try:
            digest = provenance.file_sha256(f)
        except OSError as e:
            raise ValueError(f"--cpu {f}: {e.strerror or e}") from None
        got = _stored(sitting_path(out, f))
        if got and got.get("source_sha256") == digest:
            log(f"server: [syscall] of {f} as measured in the sitting of "
                f"{got['provenance']['date_utc']} ({sitting_path(out, f)})")
        else:
            todo.append((f, digest))
    if todo and not measure:
        raise ValueError("--sitting-syscall: the [syscall] of this sitting is measured with "
                         "the native cells: run them first (without --only sim)")
    if todo:
        docs = {f: cs.load(Path(f)) for f, _ in todo}
        quick = all(bool((d.get("meta") or {}).get("quick", True)) for d in docs.values())
        loop = any(cs.file_method(d) is not None for d in docs.values())
        ping = small.pop("ping_requests", None)
        log(f"server: measuring the [syscall] of {', '.join(docs)} in this sitting")
        raw = cs.measure(quick, rounds, loop=loop, log=log, **small)
        for f, digest in todo:
            new = cs.derive(docs[f], raw, source=provenance.shown_path(f), source_sha256=digest,
                            log=log, ping_requests=ping)
            cs.write(new, sitting_path(out, f))
            log(f"server: wrote {sitting_path(out, f)}")
    return [str(sitting_path(out, c)) if c in files else c for c in cpus]


def _doc(cpu: str) -> dict | None:
    if not str(cpu).endswith(".toml"):
        return None
    try:
        return tomllib.loads(Path(cpu).read_text())
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return None


def cpu_key(cpu: str) -> dict[str, str]:
    """What a prediction on ``cpu`` is keyed by beyond its name: a CPU file's SHA-256
    (``cpu_digest``; a section measured again is another file), nothing for a preset."""
    if not str(cpu).endswith(".toml"):
        return {}
    try:
        return {"cpu_digest": provenance.file_sha256(cpu)[:16]}
    except OSError:
        return {}


def native_key(cpus: list[str]) -> dict[str, Any]:
    """``{"sitting": ...}`` (the boot and date of the section) where ``cpus`` holds a file
    re-measured in this sitting, else nothing: the native cells' key."""
    for c in cpus:
        got = ((_doc(c) or {}).get("meta") or {}).get("syscall_sitting")
        if got:
            return {"sitting": {"boot_id": got["sitting"]["boot_id"],
                                "date_utc": got["provenance"]["date_utc"]}}
    return {}


def predict_fields(cpu: str) -> dict[str, Any]:
    """A prediction's fields on a re-measured file: its label (the file it was measured for,
    :data:`LABEL`), ``syscall_source`` and the section against the file's
    (``syscall_sitting``: JSON of sim/calibrate_sitting.py ``summary``, the sitting);
    nothing on any other CPU."""
    from kvsim.sim import calibrate_sitting as cs

    doc = _doc(cpu) or {}
    got = (doc.get("meta") or {}).get("syscall_sitting")
    if not got:
        return {}
    boot = got["sitting"]["boot_id"][:8] or "unknown"
    return {"cpu_label": got["source"] + LABEL,
            "syscall_source": f"measured in this sitting: {got['provenance']['date_utc']}, "
                              f"boot {boot} (sim/calibrate_sitting.py)",
            "syscall_sitting": json.dumps({"date_utc": got["provenance"]["date_utc"],
                                           "boot": boot, "method": got.get("method", ""),
                                           "figures": cs.summary(doc)})}


def is_sitting(cpu: Any) -> bool:
    """Whether a row's ``cpu`` (its label) is a file re-measured in this sitting."""
    return str(cpu).endswith(LABEL)


def table(pred: pd.DataFrame):
    """``server_syscall``: per re-measured file, each socket figure of this sitting beside
    the file's (and their ratio); None where no prediction used one."""
    from kvsim.experiments.framework import Plot, Table

    if "syscall_sitting" not in pred:
        return None
    lines = []
    for cpu, p in pred.dropna(subset=["syscall_sitting"]).groupby("cpu", sort=False):
        s = json.loads(p["syscall_sitting"].iloc[0])
        for f in s["figures"]:
            new, old = f["sitting"], f["file"]
            lines.append({"cpu": cpu, "figure": f["figure"].strip(), "unit": f["unit"],
                          "sitting": new, "file": old,
                          "ratio": new / old if new is not None and old else None,
                          "measured": f"{s['date_utc']}, boot {s['boot']}",
                          "method": s["method"], "seed": None})
    if not lines:
        return None
    frame = pd.DataFrame(lines)
    frame["value"] = frame["figure"] + (" (" + frame["cpu"].str.removesuffix(LABEL) + ")"
                                        if frame["cpu"].nunique() > 1 else "")
    return Table("server_syscall", "The kernel's costs: this sitting's [syscall] against the "
                 "CPU file's", frame, "ns per call, ns per byte",
                 Plot(x="value", xlabel="figure", ylabel="this sitting / the file (x)",
                      series=["ratio"]),
                 note="sitting: the server's socket calls measured again at the time the "
                      "measured column gives (sim/calibrate_sitting.py: each call alone on a "
                      "loopback pair, the per-byte costs with a peer on the other CPU, "
                      "c_ref's server under PING_MBULK from 50 clients for the loop's "
                      "kernel time per write, taken by the file's own method; with "
                      "--sitting-syscall, at the start of the run that measures the native "
                      "cells); file: the CPU file's own section, measured on another day; "
                      "ratio: sitting / file.")
