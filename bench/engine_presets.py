"""Engine instructions per record on every shipped preset (callgrind: deterministic).

    .venv/bin/python sim/_engine/bench/presets.py [--baseline OLD_BENCH_ENGINE]
        [--records N] [--scale S] [--workdir DIR] [--out RESULT.json]

For the four traces of ``kvsim bench`` (kvsim.sim.bench_presets.make_traces: random 8 B
loads, c_ref iterate, c_ref pipeline lookahead, DineroIV text converted), it counts the
instructions the engine alone (``sim/_engine/build/bench_engine``, ``make -C sim/_engine
bench-c``) spends per record on the first ``--records`` records of each, with each preset's
full engine configuration (TLB, prefetchers, flush), functional and timed, the setup
subtracted (kvsim.sim.bench_presets.instructions), and with two threads (the TLB thread
translating ahead: _engine/tlb.c) the calling thread's and the TLB thread's apart.  The
TLB thread takes only the slices of 65,536 records that follow one with a DTLB miss per two
records or more (tlb.c engTlbRun), so on a trace that stays on fewer pages its count is
0 and the calling thread's is the one-thread count.  With
``--baseline`` it counts the same with another build of bench_engine (e.g. from an earlier
commit's tree) beside it.  The
figures do not depend on the machine's load, unlike timings; ``--out`` writes them with
kvsim.provenance.write_result (commit, machine, date).
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import numpy as np

from bench import _callgrind
from bench import presets as bp
from kvsim import provenance, sim, traces

#: This suite's own option (its name and help), beside the callgrind suites' shared ones.
BASELINE = ("--baseline", "another bench_engine build to count beside this one")


def thread_refs(binary: Path, cfg_file: Path, raw: Path, tmp: Path) -> list[int]:
    """Callgrind instruction counts of each thread of one bench_engine run, in thread
    order (the calling thread first)."""
    return _callgrind.per_thread(binary, cfg_file, raw, tmp)


def calling_thread(binary: Path, recs: np.ndarray, cpu: sim.CpuConfig, tmp: Path) -> dict:
    """With the TLB thread (threads = 2), functional and timed, the setup subtracted: the
    calling thread's instructions per record ("functional", "timed") and the TLB thread's
    ("functional_tlb_thread", "timed_tlb_thread"), each pair from the same runs."""
    per_thread = bp.instructions(binary, recs, cpu, tmp, threads=2,
                                 refs=lambda b, cf, raw: thread_refs(b, cf, raw, tmp))
    out = {}
    for mode, counts in per_thread.items():
        out[mode] = round(counts[0], 1)
        out[f"{mode}_tlb_thread"] = round(sum(counts[1:]), 1)
    return out


def count(binary: Path, trace_list: list[dict], presets: list[str], records: int,
          tmp: Path, threads: bool = False) -> dict[str, dict[str, dict[str, float]]]:
    """{trace file: {preset: {"functional": i/rec, "timed": i/rec}}}; with `threads`, also
    "functional_calling_thread" and "timed_calling_thread" (the TLB thread on) and
    "functional_tlb_thread" and "timed_tlb_thread" (the TLB thread's own)."""
    out: dict[str, dict[str, dict[str, float]]] = {}
    for t in trace_list:
        recs = traces.read_all(t["path"])[:records]
        per = {}
        for p in presets:
            cpu = sim.load_cpu(p)
            per[p] = bp.instructions(binary, recs, cpu, tmp)
            if threads:
                ct = calling_thread(binary, recs, cpu, tmp)
                per[p] |= {(k if k.endswith("_tlb_thread") else f"{k}_calling_thread"): v
                           for k, v in ct.items()}
        out[Path(t["path"]).name] = per
    return out


def main(argv: list[str] | None = None) -> int:
    a, binary = bp.parse_callgrind_args("engine-presets", "presets.py", __doc__, argv, BASELINE)
    if binary is None:
        return 1
    base = Path(a.baseline) if a.baseline else None
    if base is not None and not base.is_file():
        print(f"presets.py: --baseline {base}: no such file", file=sys.stderr)
        return 1
    trace_list = bp.callgrind_traces("presets.py", a, 10, slice(-1))  # not the long one
    if trace_list is None:
        return 1
    presets = sim.preset_names()
    with tempfile.TemporaryDirectory() as td:
        now = count(binary, trace_list, presets, a.records, Path(td), threads=True)
        old = count(base, trace_list, presets, a.records, Path(td), threads=True) if base \
            else None
    rows = []
    for name, per in now.items():
        for p, v in per.items():
            row = {"trace": name, "preset": p, "functional": v["functional"],
                   "timed": v["timed"],
                   "functional_calling_thread": v["functional_calling_thread"],
                   "timed_calling_thread": v["timed_calling_thread"],
                   "functional_tlb_thread": v["functional_tlb_thread"],
                   "timed_tlb_thread": v["timed_tlb_thread"]}
            if old is not None:
                row |= {f"baseline_{k}": old[name][p][k] for k in
                        ("functional", "timed", "functional_calling_thread",
                         "timed_calling_thread", "functional_tlb_thread", "timed_tlb_thread")}
            rows.append(row)
            b = (f"  (baseline {row['baseline_functional']:7.1f} {row['baseline_timed']:7.1f})"
                 if old is not None else "")
            print(f"{name:24s} {p:12s} functional {v['functional']:7.1f} "
                  f"timed {v['timed']:7.1f}  calling thread with the TLB thread "
                  f"{v['functional_calling_thread']:7.1f} {v['timed_calling_thread']:7.1f}{b}")
    if a.out:
        return provenance.publish("presets.py", a.out, {
            "benchmark": "sim/_engine/bench/presets.py",
            "units": "engine instructions per record (callgrind I refs, setup subtracted), "
                     "one thread, each preset's full configuration; *_calling_thread: the "
                     "calling thread's alone with threads = 2 (the TLB thread on); "
                     "*_tlb_thread: the TLB thread's in those runs",
            "parameters": {"records": a.records, "scale": a.scale,
                           "baseline": base.name if base else None},
            "rows": rows,
        })
    return 0


if __name__ == "__main__":
    sys.exit(main())
