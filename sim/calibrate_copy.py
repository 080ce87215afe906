"""Whether a copy reads the lines it writes, measured: ``kvsim-calibrate copyfetch``
(sim/_calibrate/copy_fetch.c), its analysis, and a result file.

    python -m kvsim.sim.calibrate_copy [--rounds R] [--repeats N] [--sizes ...] [--out FILE]

Each round is one run of the program: every size, copy method (``rep movsb``, glibc's
memcpy, a loop of ordinary vector stores, non-temporal stores, the kernel's ``read()`` from
the page cache, and loads alone) and destination state (hot: in the L1/L2; flushed: in no
cache; pool: evicted, dirty, from a region far above the last level) sampled in turn, so all
are interleaved. Per size and method the result holds each state's median, 95 % interval
and minimum (ns per copy, process CPU time) and the **fetch share**: per repeat, what the
copy pays for flushed destinations beyond hot ones over what loads of the same lines pay
(``touch``), median and 95 % interval over the repeats. A copy whose stores read their lines
for ownership has a share near 1; one that writes whole lines without reading them (a
no-RFO protocol, as non-temporal stores do) near 0. :func:`no_fetch_bytes` gives the
smallest measured size from which the kernel's copies show no fetch, else 0 (every copy
fetches, as ``[core] full_line_store_fetch = true`` has every x86 store do; sim/MODEL.md §2).
On the Intel guest it is 0 (sim/VALIDATION.md finding 27), so the model has no key for it
and ``kvsim calibrate`` does not run this.

It is a native timing: run it alone (a quiet window). ``/proc/cpuinfo``'s fast-string flags
(``erms``, ``fsrm``) and glibc's copy thresholds (``ld.so --list-tunables``) are recorded
beside the figures.
"""

from __future__ import annotations

import glob
import statistics
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

KIB = 1024
#: copy sizes (bytes) measured by default: the snapshot load's values and beyond
SIZES = (4 * KIB, 8 * KIB, 16 * KIB, 32 * KIB, 64 * KIB, 128 * KIB, 256 * KIB, 1024 * KIB)
#: bytes copied per sample (at most half a core's L2 on the cores kvsim knows, so that a
#: flushed sample writes nothing back while it runs)
BATCH = 1 << 20
#: the pool's size: this many times the last level's (sysfs), at least POOL_MIN bytes
POOL_LLC_TIMES, POOL_MIN = 4, 256 << 20
#: a fetch share below this is "no fetch" (a copy that reads its lines for ownership has
#: a share near 1; one that does not, near 0)
NO_FETCH_SHARE = 0.5
#: the copy whose threshold the model takes: the kernel's copy into the caller's buffer
MODEL_METHOD = "read"
FLAGS = ("erms", "fsrm", "fzrm", "fsrs", "fsrc")
TUNABLES = ("x86_rep_movsb_threshold", "x86_rep_stosb_threshold",
            "x86_non_temporal_threshold")


def llc_bytes() -> int | None:
    """The largest cache size sysfs reports for cpu0, or None."""
    best = None
    for p in glob.glob("/sys/devices/system/cpu/cpu0/cache/index*/size"):
        try:
            t = Path(p).read_text().strip()
        except OSError:
            continue
        mult = {"K": KIB, "M": KIB * KIB, "G": KIB ** 3}.get(t[-1:], 1)
        try:
            n = int(t.rstrip("KMG")) * mult
        except ValueError:
            continue
        best = n if best is None or n > best else best
    return best


def pool_bytes() -> int:
    llc = llc_bytes() or 0
    return max(POOL_MIN, POOL_LLC_TIMES * llc)


def cpu_flags() -> dict[str, bool]:
    """The fast-string flags of /proc/cpuinfo's first processor."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return {}
    flags: set[str] = set()
    for line in text.splitlines():
        if line.startswith(("flags", "Features")):
            flags = set(line.partition(":")[2].split())
            break
    return {f: f in flags for f in FLAGS}


def glibc_tunables() -> dict[str, str]:
    """glibc's copy thresholds as its dynamic loader reports them (``--list-tunables``,
    glibc 2.33 on), by tunable name; empty where it cannot say."""
    out: dict[str, str] = {}
    for ld in sorted(glob.glob("/lib64/ld-linux-*.so*") + glob.glob("/lib/ld-linux-*.so*")):
        try:
            p = subprocess.run([ld, "--list-tunables"], capture_output=True, text=True,
                               timeout=10, check=False)
        except (OSError, subprocess.SubprocessError):
            continue
        for line in p.stdout.splitlines():
            name, _, rest = line.partition(":")
            short = name.strip().rpartition(".")[2]
            if short in TUNABLES:
                out[short] = rest.strip().split()[0]
        if out:
            break
    return out


def measure(sizes: Sequence[int] = SIZES, rounds: int = 3, repeats: int = 41,
            batch: int = BATCH, pool: int | None = None,
            log: Callable[[str], None] = lambda m: None) -> dict[str, Any]:
    """Every sample of every (size, method, state), over ``rounds`` runs of the program."""
    from .calibrate import run_bench

    pool = pool_bytes() if pool is None else pool
    pts: dict[tuple[int, str, str], list[float]] = {}
    for r in range(rounds):
        log(f"copyfetch round {r + 1}/{rounds}")
        out = run_bench("copyfetch", "4k", batch, pool, repeats, *sizes)
        for p in out["points"]:
            pts.setdefault((p["size"], p["method"], p["state"]), []).extend(p["ns"])
    return {"batch": batch, "pool": pool, "rounds": rounds, "repeats": repeats,
            "sizes": list(sizes),
            "points": [{"size": s, "method": m, "state": st, "ns": v}
                       for (s, m, st), v in pts.items()]}


def _summary(xs: Sequence[float]) -> dict[str, Any]:
    from kvsim import stats

    ci = stats.median_ci95(xs)
    return {"median": statistics.median(xs), "ci95": list(ci[:2]) if ci else None,
            "min": min(xs)}


def analyse(raw: dict[str, Any]) -> list[dict[str, Any]]:
    """Per size and method: each state's summary (ns per copy), the flushed and pool
    penalties per line (median over repeats of the paired difference from hot) and the
    fetch share (flushed penalty over ``touch``'s, paired by repeat)."""
    by = {(p["size"], p["method"], p["state"]): p["ns"] for p in raw["points"]}
    rows = []
    for size in raw["sizes"]:
        lines = size / 64
        touch = [f - h for f, h in zip(by.get((size, "touch", "flushed"), []),
                                       by.get((size, "touch", "hot"), []), strict=True)]
        for method in dict.fromkeys(m for (s, m, _) in by if s == size):
            row: dict[str, Any] = {"size": size, "method": method}
            hot = by.get((size, method, "hot"), [])
            for st in ("hot", "flushed", "pool"):
                if (size, method, st) in by:
                    row[st] = _summary(by[(size, method, st)])
            for st in ("flushed", "pool"):
                xs = by.get((size, method, st))
                if xs and hot:
                    row[f"{st}_penalty_ns_per_line"] = _summary(
                        [(x - h) / lines for x, h in zip(xs, hot, strict=True)])
            fl = by.get((size, method, "flushed"))
            if fl and touch and method != "touch":
                share = [(f - h) / t for f, h, t in zip(fl, hot, touch, strict=True)
                         if t > 0]
                if share:
                    row["fetch_share"] = _summary(share)
            rows.append(row)
    return rows


def no_fetch_bytes(rows: Sequence[dict[str, Any]], method: str = MODEL_METHOD) -> int:
    """The smallest measured size from which ``method``'s copies show no fetch (fetch share
    median below :data:`NO_FETCH_SHARE` at that size and every larger one measured), or 0
    when the largest does not (the copies fetch: the model's behaviour without the key)."""
    shares = sorted((r["size"], r["fetch_share"]["median"]) for r in rows
                    if r["method"] == method and "fetch_share" in r)
    best = 0
    for size, share in reversed(shares):
        if share >= NO_FETCH_SHARE:
            break
        best = size
    return best


def main(argv: Sequence[str] | None = None) -> int:
    import argparse

    from kvsim import provenance

    prog = "python -m kvsim.sim.calibrate_copy"
    ap = argparse.ArgumentParser(prog=prog, description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default=",".join(str(s) for s in SIZES),
                    help="copy sizes in bytes, whole lines, comma-separated")
    ap.add_argument("--rounds", type=int, default=3, help="runs of the program")
    ap.add_argument("--repeats", type=int, default=41, help="samples per run and point")
    ap.add_argument("--batch", type=int, default=BATCH, help="bytes copied per sample")
    provenance.add_out_option(ap, "copy-fetch.json")
    a = ap.parse_args(argv)
    try:
        sizes = [int(s) for s in a.sizes.split(",")]
    except ValueError:
        print(f"{prog}: error: --sizes: integers, got {a.sizes!r}", file=sys.stderr)
        return 2
    out = provenance.out_path(a.out, "copy-fetch.json")
    if provenance.out_dir_missing(out):
        return 2
    log = lambda m: print(f"calibrate_copy: {m}", file=sys.stderr, flush=True)  # noqa: E731
    try:
        raw = measure(sizes, a.rounds, a.repeats, a.batch, log=log)
    except OSError as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        return 1
    rows = analyse(raw)
    payload = {"command": provenance.command(), "cpu_flags": cpu_flags(),
               "glibc_tunables": glibc_tunables(), "llc_bytes": llc_bytes(),
               "no_fetch_share_below": NO_FETCH_SHARE, "model_method": MODEL_METHOD,
               "copy_no_fetch_bytes": no_fetch_bytes(rows), "rows": rows, "raw": raw}
    for r in rows:
        fs = r.get("fetch_share")
        print(f"{r['size']:>8} {r['method']:<7} hot {r['hot']['median']:10.1f}"
              + (f" flushed {r['flushed']['median']:10.1f}" if "flushed" in r else "")
              + (f" pool {r['pool']['median']:10.1f}" if "pool" in r else "")
              + (f" fetch share {fs['median']:.2f} {fs['ci95']}" if fs else ""))
    return provenance.publish(prog, out, payload)


if __name__ == "__main__":
    raise SystemExit(main())
