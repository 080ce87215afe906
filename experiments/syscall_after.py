"""The user code's time after a system call, natively: the test of whether a kernel entry
and exit leaves the user's caches, TLB or predictors colder than the trace model assumes
(sim/calibrate_sysafter.py, sim/_calibrate/sysafter.c).

``python -m kvsim.experiments.syscall_after [--out results/syscall-after.json] [--quick]``

Writes per working set (dense lines and one line per page) and per call (getppid, a 64-byte
loopback write + read) the extra ns of the user segment after the call, with the rounds'
raw medians, the mitigations the kernel reports (/sys/devices/system/cpu/vulnerabilities)
and the provenance block (command, commit, machine, date, load).
"""

from __future__ import annotations

import argparse
from pathlib import Path

RESULT_NAME = "syscall-after.json"
VULN_DIR = Path("/sys/devices/system/cpu/vulnerabilities")


def mitigations() -> dict[str, str]:
    """The kernel's report per vulnerability ({} where the directory is missing)."""
    if not VULN_DIR.is_dir():
        return {}
    return {p.name: p.read_text().strip() for p in sorted(VULN_DIR.iterdir())}


def markdown(rows: list[dict]) -> str:
    lines = ["| layout | lines | bytes | segment ns | after getppid ns [95 %] "
             "| after loopback write+read ns [95 %] |", "|---|---|---|---|---|---|"]
    for r in rows:
        cells = []
        for c in ("getppid", "loopback"):
            e = r[c]
            ci = f"[{e['ci95'][0]:.0f}, {e['ci95'][1]:.0f}]" if e["ci95"] else "[-]"
            cells.append(f"{e['median']:+.0f} {ci}")
        lines.append(f"| {r['layout']} | {r['lines']} | {r['bytes']:,} | "
                     f"{r['segment_ns']:,.0f} | {cells[0]} | {cells[1]} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    from kvsim.provenance import add_out_option, out_path, publish
    from kvsim.sim import calibrate_sysafter as sa

    ap = argparse.ArgumentParser(prog="syscall_after", description=__doc__.splitlines()[0])
    add_out_option(ap, RESULT_NAME)
    ap.add_argument("--quick", action="store_true", help="fewer iterations and rounds")
    args = ap.parse_args(argv)
    try:
        raw = sa.measure(quick=args.quick)
    except OSError as exc:
        ap.exit(1, f"syscall_after: error: {exc}\n")
    rows = sa.after_effect(raw)
    print(markdown(rows))
    return publish("syscall_after", out_path(args.out, RESULT_NAME),
                   {"mitigations": mitigations(), "raw": raw, "after_effect": rows,
                    "note": "extra ns of the user segment after the call: median over "
                            "interleaved rounds of (arm - none) in the same round; "
                            "user_ns_per_iter: getrusage ru_utime per iteration "
                            "(tick-sampled, a cross-check only)"})


if __name__ == "__main__":
    raise SystemExit(main())
