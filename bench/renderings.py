"""The benchmarks' renderings: README regions rendered from their result files, registered in
the one rendering mechanism (:mod:`kvsim.experiments.render`: ``<!-- kvsim:results NAME
-->`` markers, a registry of name -> result file and function). ``python -m bench render
FILE.md ... [--check]`` renders a README's regions with these and the experiments'.
"""

from __future__ import annotations

import sys
from typing import Any

from bench import presets
from bench import sim as engine_bench
from kvsim.experiments import render


@render.rendering("speed", "results/sim-bench-presets.json")
def render_speed(doc: dict[str, Any]) -> str:
    """What a user sees of the simulator's speed: whole-process ``kvsim simulate`` per
    preset (``kvsim bench``)."""
    return (presets.render_user_table(doc) + "\n"
            + render.provenance_line(doc, render.RENDERINGS["speed"].result, "kvsim bench"))


def _sides(doc: dict[str, Any]) -> str:
    """What the two sides of an A B A B file (``python -m bench ab``) were: the engine build
    or whole revision, its arguments, and the traces' storage where ``--a-codec`` /
    ``--b-codec`` rewrote them."""
    a, b = doc["sides"]["a"], doc["sides"]["b"]
    a_is = a["tree"] if "tree" in a else a["engine"]  # ab.py --base-tree: a whole revision
    codecs = doc.get("codecs") or {}

    def stored(side: str) -> str:
        if not any(codecs.values()):
            return ""
        c = codecs.get(side)
        return f", the traces stored {c}" if c else ", the traces as written"

    return (f"A: {a_is}{' ' + a['args'] if a['args'] else ''}{stored('a')}; "
            f"B: {b['engine']}{' ' + b['args'] if b['args'] else ''}{stored('b')}; "
            f"{doc['rounds']} rounds of each, interleaved, wall time of the whole process")


def render_ab_summary(doc: dict[str, Any], result: str) -> str:
    """An A B A B file (``python -m bench ab``) in a few lines, for docs/performance.md: what
    the two sides were, the range of B's speedups over A per mode (medians of the rounds'
    ratios) and how many sign-test 95 % intervals exclude 1.0 either way; the full table, per
    trace and preset, is in the file."""
    out = []
    for mode in ("functional", "timed"):
        sp = [r["wall_speedup"] for r in doc["rows"] if r["mode"] == mode]
        if not sp:
            continue
        med = [x["median"] for x in sp]
        faster = sum(x["verdict"] == "faster" for x in sp)
        slower = sum(x["verdict"] == "slower" for x in sp)
        out.append(f"{mode}: B over A {min(med):.2f}-{max(med):.2f} (medians of "
                   f"{len(sp)} trace x preset rows); {faster} faster, {slower} slower, "
                   f"{len(sp) - faster - slower} within noise")
    return ("; ".join(out) + f". {_sides(doc)}. "
            + render.provenance_line(doc, result, doc.get("command", "python -m bench ab")))


# the A B A B files docs/performance.md summarises (region NAME_summary): the TLB thread's choice
# of slices against a thread that takes them all; the engine without its store-forwarding and
# division stalls, with the victim look-ahead; LRU ranks for levels of 17 to 32 ways against their
# stamps; the last level on a thread of its own (counting only); the intake's screened check; set
# blocks mapped lazily; each against the commit before; and `kvsim simulate` without numpy, a
# whole revision against this one, on traces of about a thousand records and on the bench's
# traces; and the bench's traces as written against raw copies of them (what decompressing the
# trace costs the whole process)
AB_FILES = {
    "tlb_thread_choice": "results/sim-tlb-thread-choice.json",
    "engine_stalls": "results/sim-engine-stalls.json",
    "engine_wide_ranks": "results/sim-engine-wide-ranks.json",
    "engine_lower_thread": "results/sim-engine-lower-thread.json",
    "intake_screened_check": "results/intake-screened-check.json",
    "engine_lazy_sets": "results/sim-engine-lazy-sets.json",
    "simulate_startup_numpy_free": "results/simulate-startup-numpy-free.json",
    "simulate_numpy_free": "results/simulate-numpy-free.json",
    "simulate_raw_traces": "results/simulate-raw-traces.json",
}
render.register_each(render_ab_summary, {f"{k}_summary": v for k, v in AB_FILES.items()})


# docs/performance.md's tables of the engine's and the whole process's speed
render.rendering("bench_sim", f"results/{engine_bench.RESULT_NAME}")(engine_bench.render_table)
render.rendering("bench_instructions", "results/sim-bench-instructions.json")(
    engine_bench.render_instructions_table)
render.rendering("bench_threads", "results/sim-bench-threads.json")(
    engine_bench.render_threads_table)
render.rendering("bench_presets", f"results/{presets.RESULT_NAME}")(presets.render_table)


def main(argv: list[str] | None = None) -> int:
    """Render README regions with the benchmarks' renderings and the experiments'."""
    return render.main(argv)


if __name__ == "__main__":
    sys.exit(main())
