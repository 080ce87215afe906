"""The user code's time after a system call, natively: the test of whether a kernel entry
and exit leaves the user's caches, TLB or predictors colder than the trace model assumes
(sim/calibrate_sysafter.py, sim/_calibrate/sysafter.c).

``python -m kvsim.experiments.syscall_after [--out results/syscall-after.json] [--quick]
[--reuse] [--ping results/server-kernel-ping.json]``

Writes per working set (dense lines and one line per page) and per call (getppid, a 64-byte
loopback write + read) the extra ns of the user segment after the call, with the rounds'
raw medians, the mitigations the kernel reports (/sys/devices/system/cpu/vulnerabilities)
and the provenance block (command, commit, machine, date, load). ``--reuse`` takes the raw
runs of the existing result file (its provenance kept as ``measured_provenance``) instead of
measuring again. With ``--ping``, the PING comparison of that file
(kvsim.experiments.server_kernel) is set beside the after-effect: per traced row, the native
user ns per request with the 95 % interval of its tick sampling (the user/system split of
``/proc/PID/stat`` rests on a few ticks per run: a Wilson interval on the pooled user ticks),
the predicted user ns, and the largest share of the gap the measured after-effect could
explain (one loopback write+read pair per write, at its largest extra outside noise).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from kvsim.stats import wilson

RESULT_NAME = "syscall-after.json"
VULN_DIR = Path("/sys/devices/system/cpu/vulnerabilities")


def mitigations() -> dict[str, str]:
    """The kernel's report per vulnerability ({} where the directory is missing)."""
    if not VULN_DIR.is_dir():
        return {}
    return {p.name: p.read_text().strip() for p in sorted(VULN_DIR.iterdir())}


def ping_gap(ping: dict, rows: list[dict]) -> list[dict]:
    """Per traced PING row and CPU of ``ping`` (server-kernel-ping.json): native user ns
    per request (median and tick-sampling interval), predicted user ns, and predicted plus
    the largest after-effect per write over native."""
    worst = max((r["loopback"]["median"] for r in rows if not r["loopback"]["within_noise"]),
                default=0.0)
    out = []
    for p in ping["predicted"]:
        d, c = p["depth"], p["clients"]
        nat = next(n for n in ping["native"] if (n["depth"], n["clients"]) == (d, c))
        runs = [r for r in ping["measured"]["runs"] if (r["depth"], r["clients"]) == (d, c)]
        ticks = sum(r["ticks"] for r in runs)
        user_ticks = sum(r["ticks"] * r["user_ns"] / r["cpu_ns"] for r in runs if r["cpu_ns"])
        lo, hi = wilson(user_ticks, ticks)
        after = nat["writes"] * worst
        out.append({"depth": d, "clients": c, "cpu": p["cpu"],
                    "native_user_ns": nat["user_ns"], "native_cpu_ns": nat["cpu_ns"],
                    "ticks": ticks, "user_ticks": round(user_ticks, 2),
                    "native_user_ns_ci95": [lo * nat["cpu_ns"], hi * nat["cpu_ns"]],
                    "predicted_user_ns": p["user_ns"],
                    "ratio": p["user_ns"] / nat["user_ns"],
                    "ratio_ci95": [p["user_ns"] / (hi * nat["cpu_ns"]),
                                   p["user_ns"] / (lo * nat["cpu_ns"]) if lo else None],
                    "after_effect_ns_max": after,
                    "ratio_with_after_effect_max": (p["user_ns"] + after) / nat["user_ns"]})
    return out


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
    ap.add_argument("--reuse", action="store_true",
                    help="the raw runs of the existing result file, not a new measurement")
    ap.add_argument("--ping", type=Path, default=None,
                    help="server_kernel's result file: the PING user-time gap beside it")
    args = ap.parse_args(argv)
    out = out_path(args.out, RESULT_NAME)
    extra: dict = {}
    try:
        if args.reuse:
            old = json.loads(out.read_text())
            raw = old["raw"]
            extra["measured_provenance"] = old.get("measured_provenance", old["provenance"])
        else:
            raw = sa.measure(quick=args.quick)
        ping = json.loads(args.ping.read_text()) if args.ping else None
    except OSError as exc:
        ap.exit(1, f"syscall_after: error: {exc}\n")
    except (ValueError, KeyError) as exc:
        ap.exit(1, f"syscall_after: error: not a result file ({exc})\n")
    rows = sa.after_effect(raw)
    print(markdown(rows))
    if ping is not None:
        extra["ping"] = ping_gap(ping, rows)
        extra["ping_source"] = str(args.ping)
        for g in extra["ping"]:
            print(f"PING depth {g['depth']}: native user {g['native_user_ns']:.0f} ns "
                  f"[{g['native_user_ns_ci95'][0]:.0f}, {g['native_user_ns_ci95'][1]:.0f}] "
                  f"({g['user_ticks']:.0f} of {g['ticks']} ticks), {g['cpu']}: predicted "
                  f"{g['predicted_user_ns']:.0f} ns, ratio {g['ratio']:.2f}; with the largest "
                  f"after-effect {g['ratio_with_after_effect_max']:.2f}")
    return publish("syscall_after", out,
                   {**extra, "mitigations": mitigations(), "raw": raw, "after_effect": rows,
                    "note": "extra ns of the user segment after the call: median over "
                            "interleaved rounds of (arm - none) in the same round; "
                            "user_ns_per_iter: getrusage ru_utime per iteration "
                            "(tick-sampled, a cross-check only)"})


if __name__ == "__main__":
    raise SystemExit(main())
