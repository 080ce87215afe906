"""The instructions of c_ref's CRC-64 and SipHash per call, counted by callgrind, against
the cost models the traces carry: c_ref/crc64.c ``ksCrc64Cost`` and c_ref/siphash.c
``ksSiphashCost`` and ``ksSiphashNocaseCost`` (mirrored by sim/calibrate.py ``crc64_cost``
and ``siphash_cost``).

The calls are ``kvsim-calibrate``'s, the binary whose kernels ``kvsim calibrate`` times
(sim/_calibrate: c_ref's crc64.c and siphash.c built at -O2, the same instructions as
c_ref's own builds of them):

- CRC-64: ``kvsim-calibrate crccost CALLS LEN@OFFSET...`` (sim/_calibrate/crc_cost.c) under
  callgrind with ``--dump-before=costMark``: one dump per point, each point CALLS calls of
  ``ksCrc64`` over LEN bytes at OFFSET past a 64-byte aligned buffer, each call continuing
  the sum; the point's instructions per call are ``ksCrc64``'s inclusive cost over its
  calls (the combines' matrix products included, the harness's loop not). The points:
  every length 0-64 at every offset mod 8, and longer lengths at two offsets through the
  one-stream, two-stream (past 1 KiB) and three-stream (past 16 KiB) paths. The harness
  also prints c_ref's own ``ksCrc64Cost`` of each point, compared with Python's mirror.
- SipHash: ``kvsim-calibrate sipcost CALLS case|nocase LEN...`` (the same file) likewise:
  ``ksSiphash``'s and ``ksSiphashNocase``'s inclusive cost over a point's calls, at every
  length 0-64 and at the longer lengths of :data:`SIPHASH_LONG_LENS` (no branch depends on
  the bytes, so one offset). The harness prints c_ref's own cost of each length too.

:func:`fit` fits the constants of each model's structure (:func:`crc_features`,
:func:`siphash_features`) to the points by least squares and rounds them to integers; the
result file holds the fits beside the constants in force, and per point callgrind's count,
the model's and their ratio.

``python -m kvsim.experiments.crc64_cost`` writes ``results/crc64-cost-callgrind.json``.
Instruction counts are not timings: run it at any priority.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

RESULT_NAME = "crc64-cost-callgrind.json"
SHORT_LENS = range(0, 65)
SHORT_OFFSETS = range(8)
LONG_LENS = (72, 100, 128, 256, 512, 1000, 1023, 1024, 1025, 1031, 1032, 1033, 1040, 2048,
             4096, 8192, 16383, 16384, 16385, 16391, 16392, 16393, 16400, 20000, 24576,
             32768, 65536, 100000, 262144)
LONG_OFFSETS = (0, 3)
CALLS = 32  # per point: the combines' products depend on the sum, the rest does not
SIPHASH_LONG_LENS = (72, 100, 128, 255, 256, 512, 1000, 1024, 4096)
SIPHASH_VARIANTS = ("case", "nocase")


def crc_points() -> list[tuple[int, int]]:
    """(length, offset mod 64) of every CRC point (module docstring)."""
    return ([(n, o) for n in SHORT_LENS for o in SHORT_OFFSETS]
            + [(n, o) for n in LONG_LENS for o in LONG_OFFSETS])


def _calibrate_bin() -> str:
    from kvsim import artifacts

    return str(artifacts.path(artifacts.CALIBRATE_CLI))


def _dump_number(p: Path) -> int:
    m = re.search(r"\.(\d+)$", p.name)
    return int(m.group(1)) if m else -1


def _count(bench: list[str], fn: str, calls: int, npoints: int) -> tuple[dict, list[float]]:
    """Run ``kvsim-calibrate BENCH...`` (a cost harness of sim/_calibrate/crc_cost.c) under
    callgrind, one dump per point: what it printed, and per point ``fn``'s inclusive
    instructions per call (the harness's loop excluded)."""
    from kvsim.experiments import callgrind

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "cg"
        p = subprocess.run(["valgrind", "--tool=callgrind", "--dump-before=costMark",
                            f"--callgrind-out-file={out}", _calibrate_bin(), *bench],
                           capture_output=True, text=True, check=True)
        dumps = sorted((f for f in Path(tmp).glob("cg.*") if _dump_number(f) > 0),
                       key=_dump_number)
        if len(dumps) < npoints + 1:
            raise ValueError(f"{bench[0]} under callgrind: {len(dumps)} dumps for "
                             f"{npoints} points")
        per_call = []
        for i, dump in enumerate(dumps[1:npoints + 1]):
            prof = callgrind.read(dump)
            got = prof.calls.get(fn, 0)
            if got != calls:
                raise ValueError(f"{dump.name}: {got} calls of {fn} for point {i}, "
                                 f"expected {calls}")
            per_call.append(prof.inclusive[fn]["Ir"] / calls)
    return json.loads(p.stdout), per_call


def measure_crc(points: list[tuple[int, int]], calls: int = CALLS) -> list[dict[str, Any]]:
    """Per point: callgrind's instructions per ``ksCrc64`` call and c_ref's ksCrc64Cost."""
    printed, counts = _count(["crccost", str(calls), *(f"{n}@{o}" for n, o in points)],
                             "ksCrc64", calls, len(points))
    rows = []
    for (n, o), (pn, po, model), cg in zip(points, printed["points"], counts, strict=True):
        if (pn, po) != (n, o):
            raise ValueError(f"crccost printed point {pn}@{po} for {n}@{o}")
        rows.append({"len": n, "offset": o, "callgrind": cg, "model_c": model})
    return rows


def siphash_lens() -> list[int]:
    """The SipHash points' lengths (module docstring)."""
    return [*range(0, 65), *SIPHASH_LONG_LENS]


def measure_siphash(variant: str, lens: list[int],
                    calls: int = CALLS) -> list[dict[str, Any]]:
    """Per length: callgrind's instructions per ``ksSiphash`` (variant "case") or
    ``ksSiphashNocase`` ("nocase") call and c_ref's ksSiphashCost or ksSiphashNocaseCost."""
    fn = "ksSiphashNocase" if variant == "nocase" else "ksSiphash"
    printed, counts = _count(["sipcost", str(calls), variant, *map(str, lens)], fn, calls,
                             len(lens))
    rows = []
    for n, (pn, model), cg in zip(lens, printed["points"], counts, strict=True):
        if pn != n:
            raise ValueError(f"sipcost printed length {pn} for {n}")
        rows.append({"len": n, "callgrind": cg, "model_c": model})
    return rows


# --- the model's structure ----------------------------------------------------------------

#: ksCrc64Cost's constants, in the order of :func:`crc_features`' columns.
CRC_TERMS = ("CALL", "BYTE_HEAD", "BODY", "WORD", "WORDS_ENTRY", "BYTE", "BYTES_ENTRY",
             "STEP2", "STEP3", "COMBINE", "COMBINE_BIT", "MUL")


def crc_features(pos: int, n: int) -> list[int]:
    """How many times ksCrc64Cost charges each constant of :data:`CRC_TERMS` for a call over
    ``n`` bytes at address ``pos`` mod 8 (its structure: sim/calibrate.py crc64_cost)."""
    from kvsim.sim import calibrate as cal

    f = dict.fromkeys(CRC_TERMS, 0)
    head = min((8 - pos % 8) % 8, n)
    rest = n - head
    f["CALL"], f["BYTE_HEAD"], f["BODY"] = 1, head, int(rest > 0)
    for streams, cutoff, step in ((3, cal.CRC64_TRI_CUTOFF, "STEP3"),
                                  (2, cal.CRC64_DUAL_CUTOFF, "STEP2")):
        if rest > cutoff:
            seg = (rest // streams) & ~7
            f[step] = seg // 8
            f["COMBINE"] = streams - 1
            f["COMBINE_BIT"] = (streams - 1) * seg.bit_length()
            f["MUL"] = (streams - 1) * bin(seg).count("1")
            rest -= streams * seg
            break
    words, tail = rest // 8, rest % 8
    f["WORD"], f["WORDS_ENTRY"] = words, int(words > 0)
    f["BYTE"], f["BYTES_ENTRY"] = tail, int(tail > 0)
    return [f[t] for t in CRC_TERMS]


#: ksSiphashCost's (and ksSiphashNocaseCost's) constants, in :func:`siphash_features`' order.
SIPHASH_TERMS = ("CALL", "WORDS_ENTRY", "WORD", "BYTE_FIRST", "BYTE")


def siphash_features(n: int) -> list[int]:
    """How many times ksSiphashCost charges each constant of :data:`SIPHASH_TERMS` for a
    call over ``n`` bytes (its structure: sim/calibrate.py siphash_cost)."""
    words, tail = n // 8, n % 8
    return [1, int(words > 0), words, int(tail > 0), max(tail - 1, 0)]


def fit(features: list[list[int]], rows: list[dict[str, Any]],
        terms: tuple[str, ...]) -> dict[str, int]:
    """The integer constants of ``terms`` that fit the rows' callgrind counts, each row's
    ``features`` (how many times the model charges each term): least squares on the
    relative error (every point weighs alike, short or long), rounded, then moved one at a
    time by one while that lowers the largest relative error (then the sum of the squared
    ones): the code's paths give integers, the rounding alone may not."""
    import numpy as np

    a = np.array(features, dtype=float)
    y = np.array([r["callgrind"] for r in rows], dtype=float)
    w = 1.0 / y
    coef, *_ = np.linalg.lstsq(a * w[:, None], y * w, rcond=None)
    c = np.rint(coef)

    def score(v: np.ndarray) -> tuple[float, float]:
        e = (a @ v) * w - 1.0
        return float(np.max(np.abs(e))), float(e @ e)

    best = score(c)
    improved = True
    while improved:
        improved = False
        for i in range(len(c)):
            for step in (-1.0, 1.0):
                trial = c.copy()
                trial[i] += step
                s = score(trial)
                if s < best:
                    c, best, improved = trial, s, True
    return {t: int(v) for t, v in zip(terms, c, strict=True)}


def fit_crc(rows: list[dict[str, Any]]) -> dict[str, int]:
    """ksCrc64Cost's constants fitted to the CRC rows (:func:`fit`)."""
    return fit([crc_features(r["offset"], r["len"]) for r in rows], rows, CRC_TERMS)


def fit_siphash(rows: list[dict[str, Any]]) -> dict[str, int]:
    """ksSiphashCost's (or the nocase variant's) constants fitted to its rows (:func:`fit`)."""
    return fit([siphash_features(r["len"]) for r in rows], rows, SIPHASH_TERMS)


def model_of(consts: dict[str, int], pos: int, n: int) -> int:
    """ksCrc64Cost's value under the constants ``consts`` (:data:`CRC_TERMS`)."""
    return sum(consts[t] * k for t, k in zip(CRC_TERMS, crc_features(pos, n), strict=True))


def siphash_model_of(consts: dict[str, int], n: int) -> int:
    """ksSiphashCost's value under the constants ``consts`` (:data:`SIPHASH_TERMS`)."""
    return sum(consts[t] * k for t, k in zip(SIPHASH_TERMS, siphash_features(n), strict=True))


def measure(log=lambda m: None) -> dict[str, Any]:
    """Every point under callgrind, the fit, and per point the model in force against
    callgrind's count (module docstring)."""
    from kvsim.sim import calibrate as cal

    points = crc_points()
    log(f"callgrind: ksCrc64 at {len(points)} points")
    crc = measure_crc(points)
    fitted = fit_crc(crc)
    for r in crc:
        r["model"] = cal.crc64_cost(r["offset"], r["len"])
        r["ratio"] = round(r["model"] / r["callgrind"], 4) if r["callgrind"] else None
        r["fitted"] = model_of(fitted, r["offset"], r["len"])
        r["callgrind"] = round(r["callgrind"], 2)
    in_force = {t: getattr(cal, f"CRC64_{t}") for t in CRC_TERMS}

    def worst(rows: list[dict[str, Any]]) -> float:
        return max(abs(r["ratio"] - 1) for r in rows if r["ratio"] is not None)

    sip = {"calls_per_point": CALLS}
    for variant in SIPHASH_VARIANTS:
        nocase = variant == "nocase"
        log(f"callgrind: SipHash ({variant}) at {len(siphash_lens())} lengths")
        rows = measure_siphash(variant, siphash_lens())
        sfit = fit_siphash(rows)
        for r in rows:
            r["model"] = cal.siphash_cost(r["len"], nocase)
            r["ratio"] = round(r["model"] / r["callgrind"], 4)
            r["fitted"] = siphash_model_of(sfit, r["len"])
            r["callgrind"] = round(r["callgrind"], 2)
        prefix = "SIPHASH_NOCASE_" if nocase else "SIPHASH_"
        sip[variant] = {"constants": {t: getattr(cal, prefix + t) for t in SIPHASH_TERMS},
                        "fitted": sfit,
                        "c_equals_python": all(r["model_c"] == r["model"] for r in rows),
                        "worst_ratio_error": round(worst(rows), 4), "points": rows}

    return {"crc64": {"calls_per_point": CALLS, "constants": in_force, "fitted": fitted,
                      "c_equals_python": all(r["model_c"] == r["model"] for r in crc),
                      "worst_ratio_error": round(worst(crc), 4),
                      "worst_ratio_error_short": round(worst([r for r in crc
                                                              if r["len"] <= 64]), 4),
                      "points": crc},
            "siphash": sip}


def markdown(doc: dict) -> str:
    crc = doc["crc64"]
    by_len: dict[int, list[dict]] = {}
    for r in crc["points"]:
        by_len.setdefault(r["len"], []).append(r)
    rows = ["| bytes | callgrind (mean over offsets) | model | model / callgrind (range) |",
            "|---|---|---|---|"]
    for n in (1, 2, 4, 8, 16, 32, 64, 512, 1025, 4096, 16385, 65536, 262144):
        rs = by_len.get(n)
        if not rs:
            continue
        cg = sum(r["callgrind"] for r in rs) / len(rs)
        mo = sum(r["model"] for r in rs) / len(rs)
        lo, hi = min(r["ratio"] for r in rs), max(r["ratio"] for r in rs)
        rows.append(f"| {n} | {cg:.1f} | {mo:.1f} | {lo:.3f}-{hi:.3f} |")
    sip = doc["siphash"]
    rows += ["", "| SipHash bytes | callgrind | model | ratio | nocase: callgrind | model | "
             "ratio |", "|---|---|---|---|---|---|---|"]
    nocase = {r["len"]: r for r in sip["nocase"]["points"]}
    for r in sip["case"]["points"]:
        if r["len"] in (0, 1, 4, 7, 8, 15, 16, 17, 24, 32, 63, 64, 100, 256, 4096):
            q = nocase[r["len"]]
            rows.append(f"| {r['len']} | {r['callgrind']:.1f} | {r['model']} | "
                        f"{r['ratio']:.3f} | {q['callgrind']:.1f} | {q['model']} | "
                        f"{q['ratio']:.3f} |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    from kvsim.experiments import measure_cli

    return measure_cli.main(
        argv, module="crc64_cost", result_name=RESULT_NAME, measure=measure, markdown=markdown,
        description=("c_ref's CRC-64 and SipHash instructions per call under callgrind "
                     "against their cost models"),
        note=("instructions per call of ksCrc64, ksSiphash and ksSiphashNocase (callgrind, "
              "inclusive, the harness excluded) against c_ref's cost models in force (model; "
              "ratio = model / callgrind) and the least-squares fits of their constants "
              "(fitted); module docstring of kvsim.experiments.crc64_cost"))


if __name__ == "__main__":
    sys.exit(main())
