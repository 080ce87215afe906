"""Where the record-by-record path's instructions go, per preset (callgrind, by function).

    .venv/bin/python sim/_engine/bench/profile.py [--presets P,...] [--records N]
        [--scale S] [--workdir DIR] [--out RESULT.json]

For each of ``kvsim bench``'s first three traces (random 8 B loads, c_ref iterate, c_ref
pipeline lookahead; kvsim.sim.bench_presets.make_traces) and each preset, it runs the engine
alone (``sim/_engine/build/bench_engine``, ``make -C sim/_engine bench-c``) on the first
``--records`` records under callgrind (``--dump-instr=no``, one thread), functional and timed,
and sums each function's own instructions (callgrind's exclusive costs, read by
kvsim.experiments.callgrind, inlined code attributed to the file it comes from) into the
parts of the model (``PARTS``), per record.
The engine's setup (creating the caches) is its own part, not divided by the records.  The
trace intake (``decode.c``) is not in these counts: ``kvsim simulate`` runs it on other
threads.  ``--out`` writes the figures with kvsim.provenance (commit, machine, date).
"""

from __future__ import annotations

import re
import sys
import tempfile
from pathlib import Path

from bench import _callgrind
from bench import presets as bp
from kvsim import provenance, sim, traces
from kvsim.experiments import callgrind

# part -> the source files (of inlined code too) and the functions it is made of; a
# "file:function" (callgrind_annotate's name of a row) goes to the first part whose file
# pattern matches its file, else to the first whose function pattern matches its function
PARTS = [
    ("setup", None, re.compile(r"^(kvsimCreate|kvsimFree|engTlbInit|bigAlloc|bigFree|"
                               r"__memset\w*|_dl_\w+|calloc|malloc|free)$")),
    ("tlb", re.compile(r"/tlb\.c$"),
     re.compile(r"^(engTlbCode|translate|tlbApply|walkCost|tlb\w+)$")),
    ("timing model", re.compile(r"/timing\.h$"),
     re.compile(r"^(timeMiss|dramSlot|inflightScan|timeAccess\w*|poolsFree)$")),
    ("hardware prefetchers", re.compile(r"/prefetch_\w+\.[ch]$"),
     re.compile(r"^(runPrefetchers|issueHwPrefetch|stOperate|ipsOperate|nlOperate)$")),
    ("caches below L1 and prefetch fills", None,
     re.compile(r"^(access(Any|Rank\w+|Stamp\w+)|cacheAccess\w*|allocWay|evict\w*|sendVictim|probe|"
                r"heldAt|prefetchDropped|invalidateWay|scanSet|findWay)$")),
    ("record loop and L1", None,
     re.compile(r"^(kvsimRun|engRunRecords|runLoop|doMemoryT|engDoMarker|engFlushBatch)$")),
]


#: This suite's own option (its name and help), beside the callgrind suites' shared ones.
PRESETS = ("--presets", "comma-separated presets (default: every preset)")


def part_of(name: str) -> str:
    """The part of "file:function" (callgrind_annotate's name; a function's "'2" suffix
    and GCC's ".constprop.0"-style clone suffixes are ignored)."""
    file, _, func = name.rpartition(":")
    func = func.split("'")[0].split(".")[0]
    for part, frx, _ in PARTS:
        if frx is not None and frx.search(file):
            return part
    for part, _, rx in PARTS:
        if rx.search(func):
            return part
    return "other"


def self_costs(out_file: Path) -> dict[str, int]:
    """{"file:function": exclusive instructions} from a callgrind output file, the file
    being the one of the code (inlined code's own), as callgrind_annotate names its rows
    (:func:`kvsim.experiments.callgrind.read`)."""
    prof = callgrind.read(out_file)
    return {f"{file}:{fn}": c["Ir"] for (file, fn), c in prof.self_by_file.items()}


def profile(binary: Path, recs, cpu: sim.CpuConfig, timing: bool, tmp: Path) -> dict:
    raw, cfg_file, out = tmp / "recs.raw", tmp / "cfg.bin", tmp / "cg.out"
    recs.tofile(raw)
    cfg = cpu.to_engine(timing=timing, tlb=True, prefetchers=True, flush=True)
    cfg_file.write_bytes(bytes(cfg))
    _callgrind.by_function(binary, cfg_file, raw, out)
    parts: dict[str, float] = {p: 0.0 for p, _, _ in PARTS} | {"other": 0.0}
    for name, n in self_costs(out).items():
        parts[part_of(name)] += n
    setup = parts.pop("setup")
    per = {p: round(v / len(recs), 1) for p, v in parts.items()}
    return {"per_record": per, "total_per_record": round(sum(per.values()), 1),
            "setup_instructions": int(setup)}


def main(argv: list[str] | None = None) -> int:
    a, binary = bp.parse_callgrind_args("profile", "profile.py", __doc__, argv, PRESETS)
    if binary is None:
        return 1
    presets = a.presets.split(",") if a.presets else sim.preset_names()
    unknown = [p for p in presets if p not in sim.preset_names()]
    if unknown:
        print(f"profile.py: --presets: no preset {unknown[0]!r}", file=sys.stderr)
        return 1
    trace_list = bp.callgrind_traces("profile.py", a, 0, slice(3))
    if trace_list is None:
        return 1
    rows = []
    with tempfile.TemporaryDirectory() as td:
        for t in trace_list:
            recs = traces.read_all(t["path"])[:a.records]
            for p in presets:
                cpu = sim.load_cpu(p)
                for timing in (False, True):
                    try:
                        r = profile(binary, recs, cpu, timing, Path(td))
                    except callgrind.CallgrindFormatError as exc:
                        print(f"profile.py: {exc}", file=sys.stderr)
                        return 1
                    rows.append({"trace": Path(t["path"]).name, "preset": p,
                                 "mode": "timed" if timing else "functional", **r})
                    print(f"{rows[-1]['trace']:24s} {p:12s} {rows[-1]['mode']:10s} "
                          f"{r['total_per_record']:7.1f}  " + "  ".join(
                              f"{k} {v:.0f}" for k, v in r["per_record"].items()))
    if a.out:
        return provenance.publish("profile.py", a.out, {
            "benchmark": "sim/_engine/bench/profile.py",
            "units": "engine instructions per record by part of the model (callgrind "
                     "exclusive costs per function, grouped), one thread; setup apart",
            "parameters": {"records": a.records, "scale": a.scale,
                           "parts": [p for p, _, _ in PARTS[1:]] + ["other"]},
            "rows": rows,
        })
    return 0


if __name__ == "__main__":
    sys.exit(main())
