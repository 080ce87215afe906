"""c_ref's CRC-64 natively in the snapshot load's states, at the load's sizes and alignments,
and its join of two streams alone: where the 4 KiB load's checksum time goes.

    python -m kvsim.experiments.crc_state [--rounds R] [--repeats N] [--cpu FILE] [--out FILE]

Each round runs, in turn, ``kvsim-calibrate crcstate`` (sim/_calibrate/crc_state.c: the CRC
over a buffer in the L1, after a copy into the same buffer, after a copy into fresh memory,
after pread(2) and after fread, each beside the same steps without the CRC, every state
interleaved within the run) at :data:`POINTS`, and ``kvsim-calibrate work crc64combine`` (the
streams' join, ``ksCrc64Combine``, alone) at :data:`COMBINE_LENS`. The loader checksums a
value at the end of its sds header, 5 bytes past an 8-byte boundary at 4 and 16 KiB
(sdshdr16), so the points are at offset 0 and 5: the offset moves where the two streams split,
and with it the number of set bits of the second stream's length, each one a matrix product
in the join (c_ref/crc64.c).

Per point and state: the CRC's cost (the sample with it less the one without, paired per
repeat; median, 95 % interval, minimum, ns per call), c_ref's count of its instructions
(``ksCrc64Cost``, the traces' count) and, with ``--cpu``, the instructions per cycle at that
file's clock next to the file's ``[work] crc``. Per join length: ns per call, its count
(sim/calibrate.py ``_crc64_combine_cost``) and the rate likewise.

It is a native timing: run it alone (a quiet window).
"""

from __future__ import annotations

import statistics
import sys
import tomllib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

RESULT_NAME = "crc-state.json"
#: (bytes, offset past a 64-byte boundary) of the crcstate points
POINTS = ((512, 0), (512, 5), (4096, 0), (4096, 5), (16384, 0), (16384, 5))
#: the second stream's bytes of the joins timed alone: 4 and 16 KiB calls aligned (one set
#: bit) and at the loader's offset 5 (2040 = 0b11111111000, 8184 = 0b1111111111000)
COMBINE_LENS = (2048, 2040, 8192, 8184)
#: bytes checksummed per sample, and the calls of the join per sample
BATCH, COMBINE_CALLS = 256 * 1024, 20_000


def measure(rounds: int, repeats: int, pool: int,
            log: Callable[[str], None] = lambda m: None) -> dict[str, Any]:
    """Every sample of every (point, state, crc) and of every join length, ``rounds`` runs."""
    from kvsim.sim.calibrate import run_bench

    pts: dict[tuple[int, int, str, int], dict] = {}
    comb: dict[int, list[float]] = {}
    for r in range(rounds):
        log(f"crc_state round {r + 1}/{rounds}")
        out = run_bench("crcstate", pool, BATCH, repeats, *(f"{n}@{o}" for n, o in POINTS))
        for p in out["points"]:
            key = (p["len"], p["offset"], p["state"], p["crc"])
            pts.setdefault(key, {"cost": p["cost"], "ns": []})["ns"].extend(p["ns"])
        for n in COMBINE_LENS:
            w = run_bench("work", "crc64combine", n, COMBINE_CALLS, max(1, repeats // 4))
            comb.setdefault(n, []).extend(w["ns_per_call"])
    return {"pool": pool, "batch": BATCH, "rounds": rounds, "repeats": repeats,
            "points": [{"len": n, "offset": o, "state": st, "crc": c, **v}
                       for (n, o, st, c), v in pts.items()],
            "combine": [{"len2": n, "ns": v} for n, v in comb.items()]}


def _summary(xs: Sequence[float]) -> dict[str, Any]:
    from kvsim import stats

    ci = stats.median_ci95(xs)
    return {"median": statistics.median(xs), "ci95": list(ci[:2]) if ci else None,
            "min": min(xs)}


def analyse(raw: dict[str, Any], ghz: float | None) -> dict[str, list[dict[str, Any]]]:
    """Per point and state the CRC's cost (paired difference), per join length its time."""
    from kvsim.sim.calibrate import _crc64_combine_cost

    by = {(p["len"], p["offset"], p["state"], p["crc"]): p for p in raw["points"]}
    rows = []
    for (n, o, st, c), p in by.items():
        if c != 1:
            continue
        base = by[(n, o, st, 0)]["ns"]
        diff = [a - b for a, b in zip(p["ns"], base, strict=True)]
        row = {"len": n, "offset": o, "state": st, "instructions": p["cost"],
               "crc_ns": _summary(diff), "without_ns": _summary(base)}
        if ghz:
            row["ipc"] = p["cost"] / (row["crc_ns"]["median"] * ghz)
        rows.append(row)
    combine = []
    for c in raw["combine"]:
        instr = _crc64_combine_cost(c["len2"])
        row = {"len2": c["len2"], "set_bits": bin(c["len2"]).count("1"),
               "instructions": instr, "ns": _summary(c["ns"])}
        if ghz:
            row["ipc"] = instr / (row["ns"]["median"] * ghz)
        combine.append(row)
    return {"rows": rows, "combine": combine}


def main(argv: Sequence[str] | None = None) -> int:
    import argparse

    from kvsim import provenance
    from kvsim.sim.calibrate_copy import pool_bytes

    prog = "python -m kvsim.experiments.crc_state"
    ap = argparse.ArgumentParser(prog=prog, description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5, help="runs of the programs")
    ap.add_argument("--repeats", type=int, default=21, help="samples per run and point")
    ap.add_argument("--cpu", type=Path, help="a CPU file: rates at its clock beside its [work]")
    provenance.add_out_option(ap, RESULT_NAME)
    a = ap.parse_args(argv)
    if a.rounds < 1 or a.repeats < 1:
        print(f"{prog}: error: --rounds and --repeats: positive integers", file=sys.stderr)
        return 2
    ghz, work = None, {}
    if a.cpu is not None:
        try:
            doc = tomllib.loads(a.cpu.read_text())
            ghz, work = float(doc["freq_ghz"]), dict(doc.get("work") or {})
        except (OSError, tomllib.TOMLDecodeError, KeyError, ValueError, TypeError) as e:
            print(f"{prog}: error: --cpu {a.cpu}: {e}", file=sys.stderr)
            return 2
    out = provenance.out_path(a.out, RESULT_NAME)
    if provenance.out_dir_missing(out):
        return 2
    log = lambda m: print(f"crc_state: {m}", file=sys.stderr, flush=True)  # noqa: E731
    try:
        raw = measure(a.rounds, a.repeats, pool_bytes(), log)
    except OSError as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        return 1
    res = analyse(raw, ghz)
    for r in res["rows"]:
        s = r["crc_ns"]
        print(f"{r['len']:>6}@{r['offset']} {r['state']:<8} crc {s['median']:8.0f} ns "
              f"{s['ci95']} (min {s['min']:.0f})" + (f" ipc {r['ipc']:.2f}" if ghz else ""))
    for c in res["combine"]:
        print(f"combine {c['len2']:>6} ({c['set_bits']} bits) {c['ns']['median']:8.0f} ns"
              + (f" ipc {c['ipc']:.2f}" if ghz else ""))
    payload = {"command": provenance.command(), "cpu_file": str(a.cpu) if a.cpu else None,
               "freq_ghz": ghz, "cpu_work": {k: v for k, v in work.items()
                                             if isinstance(v, (int, float))},
               **res, "raw": raw}
    return provenance.publish(prog, out, payload)


if __name__ == "__main__":
    raise SystemExit(main())
