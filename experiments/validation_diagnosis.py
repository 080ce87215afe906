"""What an ablation says about a validation row's time: the diagnosis column of the
validation's time table (:mod:`kvsim.experiments.validation`, issue 42 section 2).

A side (baseline or variant) of a validation row whose predicted / native time per
operation lies outside the band misses by a factor ``miss = native / predicted``. The
ablation results of the same CPU (``kvsim ablate``, ``results/ablation-*.json`` whose
provenance names the same CPU vendor model, family and model number) predict the same kind
of trace under settings that change one thing (DRAM latency, the last level's size, the
ROB...). Each setting moves the side's predicted time by ``f = ns(setting) / ns(base)``; the
diagnosis is the setting that moves it in the direction it misses and closest to ``miss``
(in log terms), with how much of the miss it covers:

* ``covers``: ``f / miss`` within the band;
* ``N %``: ``ln f / ln miss``, the share of the miss it covers;
* ``more than``: ``f`` beyond the miss (past the band).

Which ablation side matches a validation side: the same c_ref workload with the same
structure (:data:`STRUCTURAL`: the iterate operation, the table, the object layout, and
every option either side sets itself: the variant, its batch), c_ref's defaults filled in
(``kvsim-cref options --json``, the one definition). Other options may differ (the pipeline
depth, keys per command, the value size): the diagnosis names each difference and the
ablation's key count, so the reader sees how near the ablation's trace is to the row's.
Sizes (keys, operations, warm-up, seed) are never compared. A side with no match says
``no ablation``; a side within the band says nothing.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: options that only size a run: never compared
SIZES = frozenset({"keys", "ops", "seed", "warmup_ops", "warm_setup", "warm_setup_lines",
                   "trace_ops", "native_ops"})
#: options that change what is traced: an ablation matches only when they agree
STRUCTURAL = ("op", "table", "layout", "variant")
#: what a side says with no ablation that matches it
NO_ABLATION = "no ablation"


def cref_defaults() -> dict[str, dict[str, Any]]:
    """workload -> {option: c_ref's default} (``kvsim-cref options --json``)."""
    from kvsim.experiments import cref

    out: dict[str, dict[str, Any]] = {}
    for o in cref.workload_options()["options"]:
        for w in o.get("workloads", ()):
            out.setdefault(w, {})[o["name"].replace("-", "_")] = o.get("default")
    return out


def normalised(workload: str, options: Mapping[str, Any],
               defaults: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """``options`` with c_ref's defaults of ``workload`` filled in, sizes left out."""
    full = {**defaults.get(workload, {}), **options}
    return {k: v for k, v in full.items() if k not in SIZES}


@dataclass(frozen=True)
class AblationSide:
    """One side of one ablation pair: its options and predicted ns per operation under
    every setting of the file."""

    file: str
    cpu_file: str
    pair: str
    workload: str
    keys: int
    own: frozenset[str]  # the options the side sets itself
    options: Mapping[str, Any]  # normalised (common and the side's)
    ns: Mapping[str, float]  # setting -> ns per operation


def sides(doc: Mapping[str, Any], file: str,
          defaults: Mapping[str, Mapping[str, Any]]) -> list[AblationSide]:
    """The sides of every pair of an ablation result (``kvsim ablate``'s JSON)."""
    cpu = doc.get("cpu") or {}
    cpu_file = cpu.get("file") or cpu.get("name") or "" if isinstance(cpu, dict) else str(cpu)
    out = []
    for row in doc.get("rows", ()):
        pred = row.get("predicted") or {}
        for side in ("base", "variant"):
            got = pred.get(side)
            if not got or "base" not in got.get("settings", {}):
                continue
            v = got["variant"]
            own = dict(v) if isinstance(v, dict) else {"variant": v}
            out.append(AblationSide(
                file, cpu_file, row["pair"], row["workload"], int(row["keys"]),
                frozenset(own), normalised(row["workload"], {**row.get("options", {}), **own},
                                           defaults),
                {s: float(x["ns_per_op"]) for s, x in got["settings"].items()}))
    return out


def match(workload: str, own: Iterable[str], options: Mapping[str, Any], keys: int | None,
          candidates: Iterable[AblationSide]) -> tuple[list[AblationSide], list[str]] | None:
    """The ablation sides nearest to a validation side (``options`` normalised, ``own`` the
    options the side sets itself): every one of the fewest differing options and the nearest
    key count (the same trace in several results: each has settings of its own), in file
    order, and the options where they differ; None without one."""
    best: list[tuple[tuple, AblationSide, list[str]]] = []
    for c in candidates:
        if c.workload != workload:
            continue
        must = set(STRUCTURAL) | set(own) | set(c.own)
        if any(c.options.get(k) != options.get(k) for k in must):
            continue
        diffs = sorted(k for k in set(c.options) | set(options)
                       if k not in must and c.options.get(k) != options.get(k))
        rank = (len(diffs), abs(math.log(c.keys / keys)) if keys else 0.0)
        best.append((rank, c, diffs))
    if not best:
        return None
    best.sort(key=lambda x: (x[0], x[1].file, x[1].pair))
    rank, _, diffs = best[0]
    return [c for r, c, d in best if r == rank and d == diffs], diffs


def explain(ratio: float | None, sides: list[AblationSide], diffs: list[str],
            options: Mapping[str, Any], keys: int | None,
            band: tuple[float, float]) -> str:
    """The diagnosis of one side predicted at ``ratio`` of native by the settings of
    ``sides`` (each setting's move against its own result's base)."""
    if ratio is None or not ratio > 0 or band[0] <= ratio <= band[1]:
        return ""
    miss = 1.0 / ratio

    def where(side: AblationSide) -> str:
        w = [f"{Path(side.file).name}: {side.pair}, {side.keys:,} keys"]
        if keys and keys != side.keys:
            w[-1] += f" (row {keys:,})"
        w += [f"{k} {side.options.get(k)} (row {options.get(k)})" for k in diffs]
        return "; ".join(x for x in w if x)

    toward = {}
    for side in sides:
        base = side.ns["base"]
        for s, v in side.ns.items():
            f = v / base if s != "base" and base > 0 and v > 0 else 1.0
            if f != 1 and (f > 1) == (miss > 1) and s not in toward:
                toward[s] = (f, side)
    if not toward:
        return f"no setting moves it toward the {miss:.2f}x it misses [{where(sides[0])}]"
    s, (f, side) = min(toward.items(),
                       key=lambda x: (abs(math.log(x[1][0]) - math.log(miss)), x[0]))
    if band[0] <= f / miss <= band[1]:
        said = f"covers the {miss:.2f}x it misses"
    elif abs(math.log(f)) < abs(math.log(miss)):
        said = f"{100 * math.log(f) / math.log(miss):.0f} % of the {miss:.2f}x it misses"
    else:
        said = f"more than the {miss:.2f}x it misses"
    return f"{s} moves it {f:.2f}x: {said} [{where(side)}]"


def diagnose(ratio: float | None, workload: str, own: Iterable[str],
             options: Mapping[str, Any], candidates: list[AblationSide],
             defaults: Mapping[str, Mapping[str, Any]], band: tuple[float, float]) -> str:
    """The diagnosis of a validation side: empty within the band (or without a ratio),
    :data:`NO_ABLATION` without a matching ablation side, else :func:`explain`'s."""
    if ratio is None or not ratio > 0 or band[0] <= ratio <= band[1]:
        return ""
    keys = options.get("keys")
    norm = normalised(workload, options, defaults)
    got = match(workload, own, norm, keys, candidates)
    if got is None:
        return NO_ABLATION
    return explain(ratio, got[0], got[1], norm, keys, band)


def same_cpu(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Whether two CPUs as a CPU file's ``[meta] cpu`` names them (``model_name``,
    ``family``, ``model``) are the same (a provenance's machine: :func:`machine_cpu`)."""
    return (bool(b.get("model_name")) and a.get("model_name") == b.get("model_name")
            and str(a.get("family")) == str(b.get("family"))
            and str(a.get("model")) == str(b.get("model")))


def machine_cpu(machine: Mapping[str, Any]) -> dict[str, Any]:
    """A provenance's ``machine`` (``cpu_model``, ``cpu_family``, ``cpu_model_number``,
    /proc/cpuinfo's) as a CPU file's ``[meta] cpu`` names its CPU."""
    return {"model_name": machine.get("cpu_model"), "family": machine.get("cpu_family"),
            "model": machine.get("cpu_model_number")}


#: the fields of a CPU file's ``[meta] cpu`` that name the CPU (its flags do not)
CPU_FIELDS = ("vendor", "family", "model", "model_name")


def file_cpu(text: str | None) -> dict[str, Any] | None:
    """The CPU a CPU file's TOML ``text`` was calibrated on (its ``[meta] cpu``, the fields
    of :data:`CPU_FIELDS`); None for a preset, a file without it or text that is no TOML."""
    import tomllib

    if not isinstance(text, str):
        return None
    try:
        cpu = (tomllib.loads(text).get("meta") or {}).get("cpu")
    except tomllib.TOMLDecodeError:
        return None
    return {k: cpu[k] for k in CPU_FIELDS if k in cpu} if isinstance(cpu, dict) else None


def ablated_on(doc: Mapping[str, Any], cpu: Mapping[str, Any]) -> bool:
    """Whether ablation result ``doc`` predicted on a CPU file of the CPU ``cpu`` (a CPU
    file's ``[meta] cpu``): the ``[meta] cpu`` of its CPU file, which it records (``cpu``
    ``meta_cpu``; None for a preset), wherever it ran; a result from before that key, the
    machine it ran on (its provenance), which was the file's own then."""
    figures = doc.get("cpu") or {}
    if isinstance(figures, Mapping) and "meta_cpu" in figures:
        return same_cpu(figures["meta_cpu"] or {}, cpu)
    return same_cpu(machine_cpu((doc.get("provenance") or {}).get("machine") or {}), cpu)


def ablations_for(cpu: Mapping[str, Any] | None, root: Path | None = None
                  ) -> list[tuple[str, dict]]:
    """``(path as shown, result)`` of every ``results/ablation-*.json`` of the checkout run on
    the CPU ``cpu`` (a CPU file's ``[meta] cpu``); none without a CPU or a checkout."""
    if not cpu:
        return []
    if root is None:
        from kvsim import artifacts

        root = artifacts.source_root()
    if root is None:
        return []
    out = []
    for p in sorted((Path(root) / "results").glob("ablation-*.json")):
        try:
            doc = json.loads(p.read_text())
        except (OSError, json.JSONDecodeError):
            continue
        if ablated_on(doc, cpu):
            out.append((str(p.relative_to(root)), doc))
    return out


def result_cpu(doc: Mapping[str, Any]) -> dict[str, Any]:
    """The CPU a published validation result ran its native rounds on, as a CPU file's
    ``[meta] cpu`` names one (its provenance's machine)."""
    return machine_cpu((doc.get("provenance") or {}).get("machine") or {})


def from_result(doc: Mapping[str, Any], root: Path | None = None,
                defaults: Mapping[str, Mapping[str, Any]] | None = None) -> list[dict]:
    """The diagnosis of every side of a published validation result (its
    ``validation_time`` table; its scale from ``validation_calibration``), from the ablation
    results of the CPU its provenance names: ``[{"row", "side", "ratio", "diagnosis"}]``."""
    from kvsim.experiments import validation

    tables = {t["name"]: t for t in doc.get("tables", ())}
    if "validation_time" not in tables:
        raise ValueError("not a validation result: no validation_time table")
    cal = dict(tables["validation_calibration"]["rows"]) if "validation_calibration" in \
        tables else {}
    scale = cal.get("scale") or "full"
    diagnose = validation.diagnoser(ablations_for(result_cpu(doc), root), defaults)
    t = tables["validation_time"]
    out = []
    for r in (dict(zip(t["columns"], row, strict=True)) for row in t["rows"]):
        side = "a" if r["side"] == "baseline" else "b"
        out.append({"row": r["row"], "side": r["side"], "ratio": r["ratio"],
                    "diagnosis": diagnose({"row": r["row"], "scale": scale}, side,
                                          r["ratio"])})
    return out


def main(argv: list[str] | None = None) -> int:
    """``python -m kvsim.experiments.validation_diagnosis RESULT [--out FILE]``: the
    diagnosis of a published validation result's time table, printed and written."""
    import argparse
    import sys

    from kvsim import provenance

    prog = "python -m kvsim.experiments.validation_diagnosis"
    ap = argparse.ArgumentParser(prog=prog, description=main.__doc__.split("\n")[0])
    ap.add_argument("result", help="a validation result (results/experiments/*.json)")
    ap.add_argument("--update", action="store_true",
                    help="write the diagnosis into RESULT's time table instead (its "
                         "provenance's `diagnosis` says by which command, commit and date)")
    provenance.add_out_option(ap, "validation-diagnosis.json")
    a = ap.parse_args(argv)
    try:
        doc = json.loads(Path(a.result).read_text())
        rows = from_result(doc)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
        print(f"{prog}: error: {a.result}: {why}", file=sys.stderr)
        return 2
    for r in rows:
        ratio = f"{r['ratio']:.2f}" if r["ratio"] else "-"
        print(f"{r['row']:40} {r['side']:8} {ratio:>5}  {r['diagnosis']}")
    if a.update:
        return _update(prog, Path(a.result), doc, rows)
    return provenance.publish(prog, provenance.out_path(a.out, "validation-diagnosis.json"),
                              {"validation": a.result, "rows": rows})


def _update(prog: str, path: Path, doc: dict, rows: list[dict]) -> int:
    """``--update``: ``rows``' diagnoses into ``doc``'s time table, ``doc`` rewritten at
    ``path`` with ``provenance.diagnosis`` (this command's provenance and the ablation files
    read); the rest of the result as it was."""
    import sys

    from kvsim import provenance

    t = next(t for t in doc["tables"] if t["name"] == "validation_time")
    if "diagnosis" not in t["columns"]:  # a result from before the column: added
        t["columns"].append("diagnosis")
        for row in t["rows"]:
            row.append("")
    col = t["columns"].index("diagnosis")
    for row, r in zip(t["rows"], rows, strict=True):
        row[col] = r["diagnosis"]
    p = provenance.provenance()
    doc.setdefault("provenance", {})["diagnosis"] = {
        k: p[k] for k in ("commit", "dirty", "date_utc", "command") if k in p} | {
        "ablations": [f for f, _ in ablations_for(result_cpu(doc))]}
    try:
        provenance.write_atomic(path, json.dumps(doc, indent=2, default=str) + "\n")
    except OSError as exc:
        print(f"{prog}: error: {path}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    print(f"# updated {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
