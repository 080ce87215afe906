"""The instructions of c_ref's CRC-64 and SipHash per call, counted by callgrind, against
the cost models the traces carry: c_ref/crc64.c ``ksCrc64Cost`` (mirrored by sim/calibrate.py
``crc64_cost``) and c_ref/siphash.h ``KS_SIPHASH_COST`` (scaled by KS_WORK_SCALE_PCT).

The calls are ``kvsim-calibrate``'s, the binary whose kernels ``kvsim calibrate`` times
(sim/_calibrate: c_ref's crc64.c and siphash.c built at -O2, the same instructions as
c_ref's own builds of them):

- CRC-64: ``kvsim-calibrate crccost CALLS LEN@OFFSET...`` (sim/_calibrate/crc_cost.c) under
  callgrind with ``--dump-before=crcCostMark``: one dump per point, each point CALLS calls of
  ``ksCrc64`` over LEN bytes at OFFSET past a 64-byte aligned buffer, each call continuing
  the sum; the point's instructions per call are ``ksCrc64``'s inclusive cost over its
  calls (the combines' matrix products included, the harness's loop not). The points:
  every length 0-64 at every offset mod 8, and longer lengths at two offsets through the
  one-stream, two-stream (past 1 KiB) and three-stream (past 16 KiB) paths. The harness
  also prints c_ref's own ``ksCrc64Cost`` of each point, compared with Python's mirror.
- SipHash: ``kvsim-calibrate work siphash CHUNK CALLS 1`` under callgrind, ``ksSiphash``'s
  inclusive cost over its calls, at each length of :data:`SIPHASH_LENS`.

:func:`fit_crc` fits the constants of ksCrc64Cost's structure to the CRC points by least
squares and rounds them to integers; the result file holds the fit beside the constants in
force, and per point callgrind's count, the model's and their ratio.

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
SIPHASH_LENS = (1, 4, 8, 15, 16, 17, 24, 32, 40, 48, 64, 100, 128, 256)
SIPHASH_CALLS = 1000


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


def measure_crc(points: list[tuple[int, int]], calls: int = CALLS) -> list[dict[str, Any]]:
    """Per point: callgrind's instructions per ``ksCrc64`` call and c_ref's ksCrc64Cost."""
    from kvsim.experiments import callgrind

    args = [f"{n}@{o}" for n, o in points]
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "cg"
        p = subprocess.run(["valgrind", "--tool=callgrind", "--dump-before=crcCostMark",
                            f"--callgrind-out-file={out}", _calibrate_bin(), "crccost",
                            str(calls), *args], capture_output=True, text=True, check=True)
        printed = json.loads(p.stdout)
        dumps = sorted((f for f in Path(tmp).glob("cg.*") if _dump_number(f) > 0),
                       key=_dump_number)
        if len(dumps) < len(points) + 1:
            raise ValueError(f"crccost under callgrind: {len(dumps)} dumps for "
                             f"{len(points)} points")
        rows = []
        for (n, o), (pn, po, model), dump in zip(points, printed["points"], dumps[1:],
                                                 strict=False):
            if (pn, po) != (n, o):
                raise ValueError(f"crccost printed point {pn}@{po} for {n}@{o}")
            prof = callgrind.read(dump)
            got = prof.calls.get("ksCrc64", 0)
            if got != calls:
                raise ValueError(f"{dump.name}: {got} calls of ksCrc64 for point {n}@{o}, "
                                 f"expected {calls}")
            rows.append({"len": n, "offset": o, "callgrind": prof.inclusive["ksCrc64"]["Ir"]
                         / calls, "model_c": model})
    return rows


def measure_siphash(lens=SIPHASH_LENS, calls: int = SIPHASH_CALLS) -> list[dict[str, Any]]:
    """Per length: callgrind's instructions per ``ksSiphash`` call."""
    from kvsim.experiments import callgrind

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "cg"
        for n in lens:
            subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
                            _calibrate_bin(), "work", "siphash", str(n), str(calls), "1"],
                           capture_output=True, text=True, check=True)
            prof = callgrind.read(out)
            rows.append({"len": n, "callgrind": prof.inclusive["ksSiphash"]["Ir"]
                         / prof.calls["ksSiphash"]})
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


def fit_crc(rows: list[dict[str, Any]]) -> dict[str, int]:
    """The integer constants of :data:`CRC_TERMS` that fit the rows' callgrind counts: least
    squares on the relative error (every point weighs alike, short or long), rounded, then
    moved one at a time by one while that lowers the largest relative error (then the sum
    of the squared ones): the code's paths give integers, the rounding alone may not."""
    import numpy as np

    a = np.array([crc_features(r["offset"], r["len"]) for r in rows], dtype=float)
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
    return {t: int(v) for t, v in zip(CRC_TERMS, c, strict=True)}


def model_of(consts: dict[str, int], pos: int, n: int) -> int:
    """ksCrc64Cost's value under the constants ``consts`` (:data:`CRC_TERMS`)."""
    return sum(consts[t] * k for t, k in zip(CRC_TERMS, crc_features(pos, n), strict=True))


def measure(log=lambda m: None) -> dict[str, Any]:
    """Every point under callgrind, the fit, and per point the model in force against
    callgrind's count (module docstring)."""
    from kvsim.sim import calibrate as cal

    points = crc_points()
    log(f"callgrind: ksCrc64 at {len(points)} points")
    crc = measure_crc(points)
    log(f"callgrind: ksSiphash at {len(SIPHASH_LENS)} lengths")
    sip = measure_siphash()
    fitted = fit_crc(crc)
    for r in crc:
        r["model"] = cal.crc64_cost(r["offset"], r["len"])
        r["ratio"] = round(r["model"] / r["callgrind"], 4) if r["callgrind"] else None
        r["fitted"] = model_of(fitted, r["offset"], r["len"])
        r["callgrind"] = round(r["callgrind"], 2)
    for r in sip:
        r["model"] = (cal.SIPHASH_FIXED + cal.SIPHASH_WORD * (r["len"] // 8)) \
            * cal.WORK_SCALE_PCT // 100
        r["ratio"] = round(r["model"] / r["callgrind"], 4)
        r["callgrind"] = round(r["callgrind"], 2)
    in_force = {t: getattr(cal, f"CRC64_{t}") for t in CRC_TERMS}

    def worst(rows: list[dict[str, Any]]) -> float:
        return max(abs(r["ratio"] - 1) for r in rows if r["ratio"] is not None)

    return {"crc64": {"calls_per_point": CALLS, "constants": in_force, "fitted": fitted,
                      "c_equals_python": all(r["model_c"] == r["model"] for r in crc),
                      "worst_ratio_error": round(worst(crc), 4),
                      "worst_ratio_error_short": round(worst([r for r in crc
                                                              if r["len"] <= 64]), 4),
                      "points": crc},
            "siphash": {"calls": SIPHASH_CALLS, "worst_ratio_error": round(worst(sip), 4),
                        "points": sip}}


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
    rows += ["", "| SipHash bytes | callgrind | model | ratio |", "|---|---|---|---|"]
    rows += [f"| {r['len']} | {r['callgrind']:.1f} | {r['model']} | {r['ratio']:.3f} |"
             for r in doc["siphash"]["points"]]
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    from kvsim.experiments import measure_cli

    return measure_cli.main(
        argv, module="crc64_cost", result_name=RESULT_NAME, measure=measure, markdown=markdown,
        description=("c_ref's CRC-64 and SipHash instructions per call under callgrind "
                     "against their cost models"),
        note=("instructions per call of ksCrc64 and ksSiphash (callgrind, inclusive, the "
              "harness excluded) against c_ref's cost models in force (model; ratio = model / "
              "callgrind) and the least-squares fit of ksCrc64Cost's constants (fitted); "
              "module docstring of kvsim.experiments.crc64_cost"))


if __name__ == "__main__":
    sys.exit(main())
