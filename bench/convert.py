"""Time ``kvsim convert`` from one .kvt trace to every output format; writes a result file.

    python -m bench convert [--trace PATH] [--timeout S] [--label L] [--out FILE]

Without ``--trace`` the input is made with ``kvsim trace pipeline --keys 30000 --ops 30000``
(about 0.84 M records and 54 M instructions). Each output ending in :data:`ENDINGS` is written
by a separate ``kvsim convert`` process, one after the other, with stdin and stderr detached
from the terminal (so no progress bar is drawn); per ending the file records the wall time,
the CPU time of the process and the programs it ran (user + system, from ``wait4``; less
sensitive than wall time to the machine's other load), the peak resident memory of the
process (``ru_maxrss``), the output's size,
and ``timed_out`` when the process was stopped after ``--timeout`` seconds. Outputs are
deleted after they are measured.

The figures go to ``--out`` (default ``results/convert-bench.json`` in a checkout) through
:func:`kvsim.provenance.write_result` (commit, machine, load average, date); this machine's
speed varies with the load of its neighbours, which the file records.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from kvsim import provenance

RESULT_NAME = "convert-bench.json"
#: output endings measured, in order
ENDINGS = [".kvt", ".din", ".lackey", ".trc", ".trc.gz", ".champsimtrace.gz",
           ".champsimtrace.xz", ".champsimtrace", ".deptrace.proto.gz"]
TRACE_ARGS = ["trace", "pipeline", "--keys", "30000", "--ops", "30000"]


def _kvsim(*args: str) -> list[str]:
    return [sys.executable, "-m", "kvsim.experiments.cli", *args]


def run_one(src: Path, dst: Path, timeout: float, ending: str) -> dict[str, Any]:
    """Convert ``src`` to ``dst`` in a child process; wall time, peak RSS, output size."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(_kvsim("--quiet", "convert", str(src), str(dst)),
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    timed_out = False
    while True:
        pid, status, ru = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        if time.perf_counter() - t0 > timeout:
            proc.send_signal(signal.SIGTERM)
            pid, status, ru = os.wait4(proc.pid, 0)
            timed_out = True
            break
        time.sleep(0.05)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read().decode(errors="replace").strip() if proc.stderr else ""
    row = {"ending": ending,
           "seconds": round(wall, 3), "cpu_seconds": round(ru.ru_utime + ru.ru_stime, 3),
           "peak_rss_mib": round(ru.ru_maxrss / 1024, 1),
           "bytes": dst.stat().st_size if dst.exists() else None,
           "exit": proc.returncode, "timed_out": timed_out}
    if err and not timed_out:
        row["stderr"] = err.splitlines()[-1]
    for p in dst.parent.glob(f"*{dst.name}*"):
        p.unlink()
    for p in dst.parent.glob("*fetchtrace*"):
        p.unlink()
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench convert",
                                 description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--trace", default=None, help="input .kvt (default: made, see above)")
    ap.add_argument("--timeout", type=float, default=180.0, help="seconds per conversion")
    ap.add_argument("--ending", action="append", default=[],
                    help="measure only these endings (repeatable; default: all)")
    ap.add_argument("--label", default="", help="free text stored in the result file")
    provenance.add_out_option(ap, RESULT_NAME)
    a = ap.parse_args(argv)
    out = provenance.out_path(a.out, RESULT_NAME)
    with tempfile.TemporaryDirectory(prefix="kvsim-convert-bench-") as tmp:
        src = Path(a.trace) if a.trace else Path(tmp) / "in.kvt"
        if not a.trace:
            subprocess.run(_kvsim("--quiet", *TRACE_ARGS, "-o", str(src)), check=True)
        records = subprocess.run(_kvsim("trace-info", str(src), "--json"), check=True,
                                 capture_output=True, text=True).stdout
        import json

        n = json.loads(records)["records"]
        rows = []
        for ending in a.ending or ENDINGS:
            row = run_one(src, Path(tmp) / f"out{ending}", a.timeout, ending)
            rows.append(row)
            size = "-" if row["bytes"] is None else f"{row['bytes'] / 2**20:,.1f} MiB"
            note = " (timed out)" if row["timed_out"] else \
                (f" exit {row['exit']}" if row["exit"] else "")
            print(f"{ending:<20} {row['seconds']:8.1f} s  {row['cpu_seconds']:8.1f} s CPU"
                  f"  {row['peak_rss_mib']:8.1f} MiB RSS"
                  f"  {size:>14}{note}", flush=True)
    payload = {"benchmark": "convert",
               "input": Path(a.trace).name if a.trace else " ".join(["kvsim", *TRACE_ARGS]),
               "input_records": n, "label": a.label, "timeout_s": a.timeout, "rows": rows}
    return provenance.publish("python -m bench convert", out, payload)


if __name__ == "__main__":
    sys.exit(main())
