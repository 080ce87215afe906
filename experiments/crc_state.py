"""c_ref's CRC-64 natively in the snapshot load's states, at the load's sizes and alignments,
and its join of two streams alone: where the 4 KiB load's checksum time goes.

    python -m kvsim.experiments.crc_state [--rounds R] [--repeats N] [--cpu FILE] [--out FILE]
    python -m kvsim.experiments.crc_state predict --cpu FILE --native RESULT
        [--validation RESULT] [--out FILE]

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

``predict`` (simulation only: niced) puts the CRC-64's two new kinds of work into a
calibrated CPU file from such a result (:func:`with_crc_kinds`: its crc64 samples at 4 and
16 KiB aligned, ``hot``, and its joins alone, fitted with the file's own one-stream samples
by sim/calibrate_work.py ``kernel_rates``, as ``kvsim calibrate`` fits them from its own
samples) and predicts the validation's 4 and 16 KiB load rows (both sides, the validation's
full-scale keys and options) on the file as it is (its crc rate for all of the CRC) and
with the two rates, beside the native time per key of a validation result.
"""

from __future__ import annotations

import statistics
import sys
import tomllib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

RESULT_NAME = "crc-state.json"
PREDICT_NAME = "crc-state-predict.json"
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


#: the validation's load rows ``predict`` runs (experiments/validation.py ``_pairs``)
PREDICT_ROWS = ("load 4096 B none -> prefetch-after-key", "load 16384 B none -> prefetch-after-key")


def native_samples(native: dict[str, Any]) -> dict[str, list[float]]:
    """``kvsim-calibrate work`` samples (``kind/chunk`` -> ns per call) from a measurement:
    the CRC over a buffer in the L1 (``hot``) at the aligned long points, and the joins."""
    out: dict[str, list[float]] = {}
    for p in native["raw"]["points"]:
        if p["state"] == "hot" and p["crc"] == 1 and p["offset"] == 0 and p["len"] > 1024:
            out[f"crc64/{p['len']}"] = list(p["ns"])
    for c in native["raw"]["combine"]:
        out[f"crc64combine/{c['len2']}"] = list(c["ns"])
    return out


def with_crc_kinds(doc: dict[str, Any], native: dict[str, Any]) -> tuple[dict, dict]:
    """A calibrated CPU ``doc`` with ``[work]`` crc_streams and crc_combine fitted from
    ``native``'s samples (:func:`native_samples`) with the file's own crc64 samples
    (``[meta.raw] work_ns_per_call``) at its clock; and the fits."""
    from kvsim.sim.calibrate_work import kernel_rates

    raw = ((doc.get("meta") or {}).get("raw") or {}).get("work_ns_per_call") or {}
    samples = {**{k: v for k, v in raw.items() if k.startswith("crc64/")},
               **native_samples(native)}
    found = kernel_rates(samples, {}, float(doc["freq_ghz"]))
    width = float(doc["core"]["width"])
    out = {**doc, "work": dict(doc["work"])}
    for kind in ("crc_streams", "crc_combine"):
        out["work"][kind] = round(min(found[kind]["ipc"], width), 3)
    return out, {k: found[k] for k in ("crc", "crc_streams", "crc_combine")}


def _validation_native(path: Path | None) -> dict[tuple[str, str], float]:
    """(row, side) -> native ns per operation of a validation result's time table."""
    if path is None:
        return {}
    import json

    doc = json.loads(path.read_text())
    out = {}
    for t in doc.get("tables", []):
        cols = t.get("columns") or []
        if "native_ns_per_op" not in cols:
            continue
        i, j, k = cols.index("row"), cols.index("side"), cols.index("native_ns_per_op")
        for r in t["rows"]:
            out[(r[i], r[j])] = r[k]
    return out


def predict(cpu_path: Path, native: dict[str, Any], validation: Path | None,
            log: Callable[[str], None] = lambda m: None) -> dict[str, Any]:
    """The validation's :data:`PREDICT_ROWS` traced and simulated on ``cpu_path`` as it is
    and with the CRC's kinds (:func:`with_crc_kinds`): ns per key per side."""
    import tempfile

    from kvsim import sim
    from kvsim.experiments import cref
    from kvsim.experiments import validation as val
    from kvsim.sim.calibrate import to_toml
    from kvsim.sim.config import parse_cpu

    doc = tomllib.loads(cpu_path.read_text())
    after_doc, fits = with_crc_kinds(doc, native)
    before = sim.load_cpu(str(cpu_path))
    after = parse_cpu(tomllib.loads(to_toml(after_doc)), f"{cpu_path.name} with the CRC's kinds")
    natives = _validation_native(validation)
    rows = []
    pairs = {p["row"]: p for p in val._pairs("full")}
    with tempfile.TemporaryDirectory(prefix="kvsim-crc-state-") as tmp:
        for row in PREDICT_ROWS:
            p = pairs[row]
            for side, name in (("a", "baseline"), ("b", "variant")):
                opts = val._sim_opts(p, side)
                t = Path(tmp) / "t.kvt"
                log(f"{row} {name}: trace")
                cref.trace(p["workload"], t, opts)
                keys = opts["keys"]
                got = {}
                for label, cpu in (("before", before), ("after", after)):
                    log(f"{row} {name}: simulate {label}")
                    res = sim.simulate(str(t), cpu)
                    got[label] = res["cycles"] / keys / cpu.freq_ghz
                nat = natives.get((row, name))
                rows.append({"row": row, "side": name, "keys": keys, "ns_per_key": got,
                             "native_ns_per_key": nat,
                             "ratio": {k: v / nat for k, v in got.items()} if nat else None})
    return {"cpu_file": str(cpu_path), "rates": {k: after_doc["work"][k] for k in
                                                 ("crc", "crc_streams", "crc_combine")},
            "fits": fits, "validation": str(validation) if validation else None, "rows": rows}


def main_predict(argv: Sequence[str]) -> int:
    import argparse
    import json

    from kvsim import provenance

    prog = "python -m kvsim.experiments.crc_state predict"
    ap = argparse.ArgumentParser(prog=prog, description="the validation's 4 and 16 KiB load "
                                 "rows predicted without and with the CRC-64's kinds of work")
    ap.add_argument("--cpu", type=Path, required=True, help="a calibrated CPU file")
    ap.add_argument("--native", type=Path, required=True, help="a crc_state result")
    ap.add_argument("--validation", type=Path, help="a validation result (native times)")
    provenance.add_out_option(ap, PREDICT_NAME)
    a = ap.parse_args(argv)
    try:
        native = json.loads(a.native.read_text())
        native["raw"]["points"], native["raw"]["combine"]  # noqa: B018
        tomllib.loads(a.cpu.read_text())["work"]["crc"]  # noqa: B018
    except (OSError, ValueError, KeyError, TypeError, tomllib.TOMLDecodeError) as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        return 2
    out = provenance.out_path(a.out, PREDICT_NAME)
    if provenance.out_dir_missing(out):
        return 2
    log = lambda m: print(f"crc_state: {m}", file=sys.stderr, flush=True)  # noqa: E731
    res = predict(a.cpu, native, a.validation, log)
    for r in res["rows"]:
        g, n = r["ns_per_key"], r["native_ns_per_key"]
        print(f"{r['row']} {r['side']}: before {g['before']:.0f} after {g['after']:.0f} ns/key"
              + (f", native {n:.0f}" if n else ""))
    return provenance.publish(prog, out, {"command": provenance.command(), **res})


def main(argv: Sequence[str] | None = None) -> int:
    import argparse

    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["predict"]:
        return main_predict(argv[1:])

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
