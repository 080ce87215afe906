"""What the legacy layout's GET pays that the unified one does not: the validation's row
"GET legacy -> unified" split by keyspace size and page size, natively and in the traces
(sim/VALIDATION.md, the finding on this row).

    python -m kvsim.experiments.layout_split native [--keys 20000,50000,500000]
        [--thp-keys 500000] [--rounds 10] [--out FILE]          (through the quiet window)
    python -m kvsim.experiments.layout_split predict --cpu FILE [--keys ...] [--out FILE]
        [--native FILE]                                         (niced: traces, simulations)
    python -m kvsim.experiments.layout_split callgrind [--keys 20000,500000] [--out FILE]
                                                                (niced: valgrind's counts)

The row is the catalogue's pair ``unified`` (:mod:`kvsim.experiments.pairs`: pipelined GET at
depth 1, 16-byte keys, 32-byte values) with the validation's operation counts
(:func:`kvsim.experiments.validation._pairs`); only the keyspace size changes.

``native``: per size, rounds of one ``kvsim-cref native --repeat 1`` process per side (A =
legacy, B = unified; the order of the sides and of the sizes rotating per round), process CPU
time per GET; per size the speedup of B over A (median of the rounds' ratios, sign-test and
bootstrap 95 % intervals, the ratio of the minimums) and each side's median, interval and
minimum. ``--thp-keys``: sizes also run with the arena on transparent huge pages (c_ref's
``KVSIM_CREF_THP=1``), a point where the page walks change and the caches' share does not.

``predict``: per size, both sides traced as the validation traces the row (its warm setup and
warm-up operations) and simulated on ``--cpu`` changed by each of ``--settings`` (the
ablation's, :data:`kvsim.experiments.ablation.SETTINGS`; ``base``: as given). Per side and
GET: the distinct lines and 4 KiB pages of the measured phase's records, those of the
keyspace's structures (:data:`KEYSPACE_TAGS`), the deepest dependent chain among the
keyspace's loads, and per setting the simulated demand misses per level, DRAM reads, DTLB
and STLB misses, the TLB stall and the predicted ns per GET. ``--value-after-key`` adds a
trace what-if on the CPU as given (:func:`value_after_key`: the value's pointer waits for
the key's comparison). With ``--native`` (a ``native``
result) each size's predicted speedup, ns per GET and legacy - unified difference are set
beside the native ones.

``callgrind``: per size and side, ``valgrind --tool=callgrind --cache-sim=yes`` collecting
c_ref's measured phase alone (``--toggle-collect=measuredPipeline*``, the compiler may suffix
the name) on two runs that differ only in their GET count; the difference over the extra GETs
is the instructions (Ir), data reads and writes (Dr, Dw) and first- and last-level data read
misses (D1mr, DLmr) of one GET: what the trace's instruction gaps and records are checked
against (callgrind's cache is its own simple model, not this machine's: a 32 MiB last level,
:data:`CALLGRIND_LL`).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from kvsim import provenance, stats
from kvsim.experiments import cref
from kvsim.experiments import pairs as catalogue

PAIR = "unified"
ROW = "GET legacy -> unified"
SIDES = ("a", "b")
#: GETs of a native run and of a trace's measured phase and warm-up: the validation's (full)
NATIVE_OPS = 500_000
SIM_OPS = 100_000
THP_ENV = {"KVSIM_CREF_THP": "1"}
WARM_SETUP = "compact"


def _options(keys: int, ops: int) -> dict[str, dict[str, Any]]:
    p = catalogue.get(PAIR)
    common = {"keys": keys, "ops": ops, **p.common, "seed": 1}
    return {s: {**common, **p.side(s)} for s in SIDES}


def _sizes(text: str) -> list[int]:
    try:
        sizes = [int(float(k)) for k in text.split(",") if k.strip()]
    except ValueError:
        raise ValueError(f"--keys {text!r}: comma-separated key counts") from None
    if not sizes or min(sizes) < 1:
        raise ValueError(f"--keys {text!r}: comma-separated positive key counts")
    return sizes


# --- native ------------------------------------------------------------------------------


def _point_name(keys: int, thp: bool) -> str:
    return f"{keys}{'-thp' if thp else ''}"


def native(sizes: list[int], thp_sizes: list[int], rounds: int, log) -> dict[str, Any]:
    points = [(k, False) for k in sizes] + [(k, True) for k in thp_sizes]
    ns: dict[str, dict[str, list[float]]] = {_point_name(*p): {"a": [], "b": []}
                                             for p in points}
    for r in range(rounds + 1):  # round 0: a discarded warm-up
        order = points[r % len(points):] + points[:r % len(points)]
        for keys, thp in order:
            sides = SIDES if r % 2 == 0 else SIDES[::-1]
            for s in sides:
                opts = _options(keys, NATIVE_OPS)[s]
                res = cref.native("pipeline", opts, repeat=1, env=THP_ENV if thp else None)
                if r:
                    ns[_point_name(keys, thp)][s].append(res["cpu_runs_s"][0] * 1e9 / res["ops"])
        log(f"round {r}/{rounds} done" + (" (warm-up, discarded)" if r == 0 else ""))
    out = []
    for keys, thp in points:
        d = ns[_point_name(keys, thp)]
        sp = stats.paired_speedup(d["a"], d["b"])
        out.append({"keys": keys, "thp": thp, "speedup": sp,
                    "legacy_ns_per_get": stats.summary(d["a"]),
                    "unified_ns_per_get": stats.summary(d["b"]),
                    "legacy_extra_ns_per_get": statistics.median(
                        [x - y for x, y in zip(d["a"], d["b"], strict=True)])})
    return {"row": ROW, "pair": PAIR, "ops": NATIVE_OPS, "rounds": rounds, "points": out}


def _native_table(doc: dict[str, Any]) -> str:
    lines = ["| keys | pages | legacy ns/GET [95 %] (min) | unified ns/GET [95 %] (min) | "
             "legacy - unified ns | speedup [95 %] | from minimums |",
             "|---|---|---|---|---|---|---|"]
    for p in doc["points"]:
        def cell(s):
            ci = s["ci95"] or [float("nan")] * 2
            return f"{s['median']:.1f} [{ci[0]:.1f}, {ci[1]:.1f}] ({s['min']:.1f})"
        sp = p["speedup"]
        ci = sp["ci95"] or sp["bootstrap_ci95"] or [float("nan")] * 2
        lines.append(f"| {p['keys']:,} | {'THP' if p['thp'] else '4 KiB'} | "
                     f"{cell(p['legacy_ns_per_get'])} | {cell(p['unified_ns_per_get'])} | "
                     f"{p['legacy_extra_ns_per_get']:.1f} | {sp['median']:.2f}x "
                     f"[{ci[0]:.2f}, {ci[1]:.2f}] | {sp['from_minimums']:.2f}x |")
    return "\n".join(lines)



# --- predict -----------------------------------------------------------------------------

#: the keyspace's structures (trace tags): what the layouts lay out differently
KEYSPACE_TAGS = ("bucket", "child_bucket", "key", "object", "value", "expire")


def trace_counts(path: Path) -> dict[str, Any]:
    """Per GET of the measured phase (after the last warm-up's end) of trace ``path``: the
    distinct lines and 4 KiB pages of its records (all, and the keyspace's structures), the
    distinct lines per keyspace tag, the memory records, and the deepest dependent chain
    (:func:`kvsim.traces.chain_depths`) of its loads, all and the keyspace's."""
    import numpy as np
    import pandas as pd

    from kvsim import traces

    r = traces.read_all(path)
    is_marker = r["kind"] == traces.KIND_MARKER
    ends = np.flatnonzero(is_marker & (r["flags"] == traces.MARK_WARMUP_END))
    start = int(ends[-1]) + 1 if ends.size else 0
    depth = traces.chain_depths(r)[start:]
    m = r[start:]
    cmd = np.cumsum((m["kind"] == traces.KIND_MARKER) & (m["flags"] == traces.MARK_COMMAND))
    gets = int(cmd[-1]) if cmd.size else 0
    if gets == 0:
        raise ValueError(f"{path}: no command in the measured phase")
    mem = m["kind"] < traces.KIND_MARKER
    tags = np.array(traces.TAG_NAMES)[m["tag"][mem]]
    df = pd.DataFrame({"cmd": cmd[mem], "line": m["addr"][mem] >> np.uint64(6),
                       "tag": tags, "load": m["kind"][mem] == traces.KIND_LOAD,
                       "depth": depth[mem]})
    df["page"] = df["line"] >> np.uint64(6)
    ks = df[df["tag"].isin(KEYSPACE_TAGS)]
    loads, ks_loads = df[df["load"]], ks[ks["load"]]

    def per_get(frame, cols) -> float:
        return len(frame.drop_duplicates(cols)) / gets

    return {
        "gets": gets,
        "memory_records_per_get": len(df) / gets,
        "lines_per_get": per_get(df, ["cmd", "line"]),
        "pages_4k_per_get": per_get(df, ["cmd", "page"]),
        "keyspace_lines_per_get": per_get(ks, ["cmd", "line"]),
        "keyspace_pages_4k_per_get": per_get(ks, ["cmd", "page"]),
        "keyspace_lines_by_tag_per_get": {t: per_get(ks[ks["tag"] == t], ["cmd", "line"])
                                          for t in KEYSPACE_TAGS if (ks["tag"] == t).any()},
        "max_chain_depth_mean": float(loads.groupby("cmd")["depth"].max().mean()),
        "keyspace_max_chain_depth_mean": float(ks_loads.groupby("cmd")["depth"].max().mean()),
        "instructions_per_get": None,  # set from the simulation (the records' gaps)
    }


#: the what-if of ``predict --value-after-key``: the loads that give the value's object its
#: address (legacy: the entry's value pointer; unified: the object's value pointer)
VALUE_POINTER_SITES = ("obj.legacy_entry", "obj.value_ptr")


def value_after_key(records, sites: list[str]) -> int:
    """Rewire ``records`` (in place) so that each command's value-pointer loads
    (:data:`VALUE_POINTER_SITES`) that come after its key comparison (site ``obj.key``) and
    whose producer comes before it wait for that comparison's load: the value is reached only
    once the key has compared equal, as if its pointer were read after the comparison's
    branch resolved. Returns the number of loads rewired. A trace what-if, not c_ref's
    behaviour: c_ref records the value pointer's dependence on the bucket or the entry."""
    import numpy as np

    from kvsim import traces

    idx = np.arange(records.size)
    site_id = {n: i for i, n in enumerate(sites)}
    load = records["kind"] == traces.KIND_LOAD
    is_key = load & (records["site"] == site_id["obj.key"])
    is_cmd = (records["kind"] == traces.KIND_MARKER) & (records["flags"] == traces.MARK_COMMAND)
    last_key = np.maximum.accumulate(np.where(is_key, idx, -1))
    last_cmd = np.maximum.accumulate(np.where(is_cmd, idx, -1))
    ptr = load & np.isin(records["site"], [site_id[n] for n in VALUE_POINTER_SITES
                                           if n in site_id])
    producer = idx - records["dep"].astype(np.int64)
    pick = ptr & (last_key > last_cmd) & (records["dep"] > 0) & (producer < last_key)
    records["dep"][pick] = (idx - last_key)[pick].astype(records["dep"].dtype)
    return int(pick.sum())


def sim_counts(res: dict[str, Any], gets: int, freq_ghz: float) -> dict[str, Any]:
    """Per GET of one simulation result (:func:`kvsim.sim.simulate`): demand misses per
    level, DRAM reads, DTLB and STLB misses, the TLB stall, cycles and ns."""
    tlb = res.get("tlb") or {}
    stall = res["timing"]["stall_cycles"]
    llc_by_tag: dict[str, float] = {}
    last = res["levels"][-1]["name"]
    for row in res["by_tag"]:
        if row["level"] == last and row["kind"] in ("load", "store"):
            llc_by_tag[row["tag_name"]] = llc_by_tag.get(row["tag_name"], 0) + row["misses"] / gets
    return {
        "cycles_per_get": res["cycles"] / gets,
        "ns_per_get": res["cycles"] / gets / freq_ghz,
        "instructions_per_get": res["instructions"] / gets,
        "demand_misses_per_get": {lv["name"]: lv["demand_misses"] / gets
                                  for lv in res["levels"]},
        "llc_demand_misses_by_tag_per_get": llc_by_tag,
        "dram_reads_per_get": res["dram"]["reads"] / gets,
        "dtlb_misses_per_get": tlb.get("dtlb_misses", 0) / gets,
        "stlb_misses_per_get": tlb.get("stlb_misses", 0) / gets,
        "walk_reads_from_dram_per_get": (tlb.get("walk_reads_timed") or {}).get("DRAM", 0) / gets,
        "tlb_stall_cycles_per_get": stall.get("tlb", 0.0) / gets,
        "mlp": res["timing"]["mlp"],
    }


def predict(sizes: list[int], cpu_spec: str, settings: list[str], log,
            what_if: bool = False) -> dict[str, Any]:
    from kvsim import sim
    from kvsim.experiments import validation
    from kvsim.experiments.ablation import SETTINGS

    cpu = sim.load_cpu(cpu_spec)
    cpus = {name: SETTINGS[name][1](cpu) for name in settings}
    points = []
    for keys in sizes:
        sides: dict[str, Any] = {}
        for s in SIDES:
            opts = {"warm_setup": WARM_SETUP, **_options(keys, SIM_OPS)[s],
                    "warmup_ops": SIM_OPS}
            with tempfile.TemporaryDirectory(prefix="kvsim-layout-") as tmp:
                t = Path(tmp) / "t.kvt"
                cref.trace("pipeline", t, opts)
                counts = trace_counts(t)
                res = sim.simulate_many(str(t), list(cpus.values()))
                simulated = {name: sim_counts(r, counts["gets"], c.freq_ghz)
                             for (name, c), r in zip(cpus.items(), res, strict=True)}
                if what_if:
                    rewired, commands = _rewrite(t, Path(tmp) / "w.kvt")
                    counts["value_after_key_rewired_per_command"] = rewired / commands
                    r = sim.simulate(str(Path(tmp) / "w.kvt"), cpu)
                    simulated["value_after_key"] = sim_counts(r, counts["gets"], cpu.freq_ghz)
            counts.pop("instructions_per_get")
            sides[catalogue.get(PAIR).side(s)["layout"]] = {
                "trace": counts, "options": opts, "simulated": simulated}
            log(f"{keys} keys, {s}: traced and simulated")
        names = list(sides["legacy"]["simulated"])
        speedups = {name: sides["legacy"]["simulated"][name]["cycles_per_get"]
                    / sides["unified"]["simulated"][name]["cycles_per_get"] for name in names}
        extra = {name: sides["legacy"]["simulated"][name]["ns_per_get"]
                 - sides["unified"]["simulated"][name]["ns_per_get"] for name in names}
        points.append({"keys": keys, "sides": sides, "predicted_speedup": speedups,
                       "predicted_legacy_extra_ns_per_get": extra})
    assert validation.WARM_SETUP == WARM_SETUP
    described = {name: SETTINGS[name][0] for name in settings}
    if what_if:
        described["value_after_key"] = ("the CPU as given, on the traces rewired so that the "
                                        "value's pointer waits for the key's comparison "
                                        "(value_after_key)")
    return {"row": ROW, "pair": PAIR, "cpu": cpu_spec, "settings": described, "ops": SIM_OPS,
            "points": points}


def _rewrite(src: Path, dst: Path) -> tuple[int, int]:
    """``src`` rewired by :func:`value_after_key` into ``dst``: the loads rewired and the
    trace's commands (the warm-up's included)."""
    from kvsim import traces

    with traces.open(src) as tr:
        header = dict(tr.header)
    r = traces.read_all(src)
    n = value_after_key(r, header["sites"])
    commands = int(((r["kind"] == traces.KIND_MARKER)
                    & (r["flags"] == traces.MARK_COMMAND)).sum())
    with traces.Writer(dst, header, codec="zstd") as w:
        w.write(r)
    return n, commands


def beside_native(doc: dict[str, Any], native_docs: list[dict[str, Any]]) -> None:
    """Set each size's native speedup and ns per GET (4 KiB pages) beside the prediction: from
    the first of ``native_docs`` that has the size."""
    nat: dict[int, dict[str, Any]] = {}
    for nd in native_docs:
        for p in nd["points"]:
            if not p["thp"]:
                nat.setdefault(p["keys"], p)
    for p in doc["points"]:
        n = nat.get(p["keys"])
        if n is None:
            continue
        p["native"] = {"speedup": n["speedup"]["median"], "speedup_ci95": n["speedup"]["ci95"],
                       "legacy_ns_per_get": n["legacy_ns_per_get"]["median"],
                       "unified_ns_per_get": n["unified_ns_per_get"]["median"],
                       "legacy_extra_ns_per_get": n["legacy_extra_ns_per_get"]}
        pr = p["sides"]
        p["ratio"] = {name: {"speedup": sp / n["speedup"]["median"],
                             "legacy": pr["legacy"]["simulated"][name]["ns_per_get"]
                             / n["legacy_ns_per_get"]["median"],
                             "unified": pr["unified"]["simulated"][name]["ns_per_get"]
                             / n["unified_ns_per_get"]["median"]}
                      for name, sp in p["predicted_speedup"].items()}


def _predict_table(doc: dict[str, Any]) -> str:
    first = next(iter(doc["settings"]))
    lines = [f"Per GET, on the CPU as given ({first}):", "",
             "| keys | side | lines | pages | keyspace lines | keyspace pages | chain | "
             "instr | L1 / L2 / LLC misses | DRAM | DTLB / STLB misses | TLB stall cyc | "
             "ns/GET | native ns/GET |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for p in doc["points"]:
        for side, d in p["sides"].items():
            t, g = d["trace"], d["simulated"][first]
            miss = " / ".join(f"{v:.2f}" for v in g["demand_misses_per_get"].values())
            nat = (p.get("native") or {}).get(f"{side}_ns_per_get")
            lines.append(
                f"| {p['keys']:,} | {side} | {t['lines_per_get']:.2f} | "
                f"{t['pages_4k_per_get']:.2f} | {t['keyspace_lines_per_get']:.2f} | "
                f"{t['keyspace_pages_4k_per_get']:.2f} | "
                f"{t['keyspace_max_chain_depth_mean']:.2f} | {g['instructions_per_get']:.0f} | "
                f"{miss} | {g['dram_reads_per_get']:.2f} | {g['dtlb_misses_per_get']:.2f} / "
                f"{g['stlb_misses_per_get']:.2f} | {g['tlb_stall_cycles_per_get']:.0f} | "
                f"{g['ns_per_get']:.1f} | {'' if nat is None else f'{nat:.1f}'} |")
    lines += ["", "Legacy - unified ns per GET and speedup, per setting (native last):", "",
              "| keys | " + " | ".join(doc["settings"]) + " | native |",
              "|---|" + "---|" * (len(doc["settings"]) + 1)]
    for p in doc["points"]:
        n = p.get("native")
        cells = [f"{p['predicted_legacy_extra_ns_per_get'][k]:.0f} ns, "
                 f"{p['predicted_speedup'][k]:.2f}x" for k in doc["settings"]]
        cells.append(f"{n['legacy_extra_ns_per_get']:.0f} ns, {n['speedup']:.2f}x" if n else "")
        lines.append(f"| {p['keys']:,} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


# --- callgrind ---------------------------------------------------------------------------

#: the GET counts of callgrind's two runs per side: their difference is what one GET costs
CALLGRIND_OPS = (50_000, 150_000)
CALLGRIND_EVENTS = ("Ir", "Dr", "Dw", "D1mr", "DLmr")
#: the measured phase's function in c_ref (workload.c, MEASURED): the query groups' run,
#: without the setup, the queries' building or the reply check
CALLGRIND_TOGGLE = "measuredPipeline*"
#: callgrind's last level (size,ways,line): its own default is what the CPU reports, which a
#: guest may report as hundreds of MiB; 32 MiB of 16 ways is a server core's last level
CALLGRIND_LL = "33554432,16,64"


def callgrind(sizes: list[int], log) -> dict[str, Any]:
    from kvsim.experiments import callgrind as cg

    points = []
    for keys in sizes:
        sides = {}
        for s in SIDES:
            totals = []
            for ops in CALLGRIND_OPS:
                opts = _options(keys, ops)[s]
                with tempfile.TemporaryDirectory(prefix="kvsim-layout-cg-") as tmp:
                    out = Path(tmp) / "cg.out"
                    cmd = ["valgrind", "--tool=callgrind", "--cache-sim=yes",
                           f"--LL={CALLGRIND_LL}", f"--toggle-collect={CALLGRIND_TOGGLE}",
                           f"--callgrind-out-file={out}", str(cref.binary()), "native",
                           "pipeline", *cref.workload_args(opts), "--repeat", "1", "--json"]
                    subprocess.run(cmd, check=True, capture_output=True)
                    totals.append(cg.read(out).totals)
            extra = CALLGRIND_OPS[1] - CALLGRIND_OPS[0]
            layout = catalogue.get(PAIR).side(s)["layout"]
            sides[layout] = {f"{ev}_per_get": (totals[1].get(ev, 0) - totals[0].get(ev, 0))
                             / extra for ev in CALLGRIND_EVENTS}
            log(f"{keys} keys, {layout}: {sides[layout]['Ir_per_get']:.0f} Ir per GET")
        points.append({"keys": keys, "sides": sides})
    return {"row": ROW, "pair": PAIR, "ops": list(CALLGRIND_OPS), "points": points}


def _callgrind_table(doc: dict[str, Any]) -> str:
    lines = ["| keys | side | " + " | ".join(f"{ev} per GET" for ev in CALLGRIND_EVENTS) + " |",
             "|---|---|" + "---|" * len(CALLGRIND_EVENTS)]
    for p in doc["points"]:
        for side, d in p["sides"].items():
            lines.append(f"| {p['keys']:,} | {side} | " + " | ".join(
                f"{d[f'{ev}_per_get']:.1f}" for ev in CALLGRIND_EVENTS) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    prog = "python -m kvsim.experiments.layout_split"
    ap = argparse.ArgumentParser(prog=prog, description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    n = sub.add_parser("native", help="interleaved native rounds (run it in a quiet window)")
    n.add_argument("--keys", default="20000,50000,500000")
    n.add_argument("--thp-keys", default="500000", help="sizes also run on huge pages "
                   "('' for none)")
    n.add_argument("--rounds", type=int, default=10)
    n.add_argument("--out")
    pr = sub.add_parser("predict", help="trace counts and simulations (niced)")
    pr.add_argument("--cpu", required=True)
    pr.add_argument("--keys", default="20000,50000,500000")
    pr.add_argument("--native", action="append", default=[],
                    help="a `native` result to set beside the prediction (repeatable: the "
                    "first that has a size gives it)")
    pr.add_argument("--settings", default="base,page_2m",
                    help="the ablation's settings (kvsim.experiments.ablation), comma-separated")
    pr.add_argument("--value-after-key", action="store_true",
                    help="also simulate the traces rewired by value_after_key (a what-if)")
    pr.add_argument("--out")
    c = sub.add_parser("callgrind", help="valgrind's counts per GET (niced)")
    c.add_argument("--keys", default="20000,500000")
    c.add_argument("--out")
    a = ap.parse_args(argv)
    try:
        if a.cmd == "native":
            sizes = _sizes(a.keys)
            thp = _sizes(a.thp_keys) if a.thp_keys.strip() else []
            if a.rounds < 1:
                raise ValueError(f"--rounds {a.rounds}: at least 1")
        if a.cmd == "callgrind":
            sizes = _sizes(a.keys)
        if a.cmd == "predict":
            from kvsim import sim
            from kvsim.experiments.ablation import SETTINGS

            sizes = _sizes(a.keys)
            try:
                sim.load_cpu(a.cpu)
            except (OSError, ValueError) as exc:
                raise ValueError(f"--cpu {a.cpu}: {str(exc).splitlines()[0]}") from None
            settings = [x.strip() for x in a.settings.split(",") if x.strip()]
            bad = [x for x in settings if x not in SETTINGS]
            if bad or not settings:
                raise ValueError(f"--settings: unknown setting {bad[0] if bad else '(none)'!r}"
                                 f" ({', '.join(SETTINGS)})")
            native_docs = []
            for f in a.native:
                try:
                    native_docs.append(json.loads(Path(f).read_text()))
                except (OSError, json.JSONDecodeError) as exc:
                    raise ValueError(f"--native {f}: {exc}") from None
    except ValueError as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 2

    def log(m: str) -> None:
        print(m, file=sys.stderr)

    try:
        if a.cmd == "native":
            load = provenance.load_average_1m()
            doc = native(sizes, thp, a.rounds, log)
            doc["load_average_1m"] = [load, provenance.load_average_1m()]
            out = a.out or provenance.default_result_path("layout-split-native.json")
            print(_native_table(doc))
        if a.cmd == "predict":
            doc = predict(sizes, a.cpu, settings, log, a.value_after_key)
            if native_docs:
                beside_native(doc, native_docs)
                doc["native_files"] = a.native
            out = a.out or provenance.default_result_path("layout-split-predict.json")
            print(_predict_table(doc))
        if a.cmd == "callgrind":
            doc = callgrind(sizes, log)
            out = a.out or provenance.default_result_path("layout-split-callgrind.json")
            print(_callgrind_table(doc))
    except (OSError, ValueError, cref.CrefError, subprocess.SubprocessError) as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 1
    return provenance.publish(prog, out, doc)


if __name__ == "__main__":
    raise SystemExit(main())
