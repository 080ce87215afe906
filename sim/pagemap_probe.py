"""Where the kernel puts a fresh anonymous buffer's pages: the frames of its 4 KiB pages, read
from ``/proc/self/pagemap`` (frame numbers need root), as `kvsim-calibrate` maps its chase
buffers (``madvise`` for 4 KiB or 2 MiB pages, then touched in ascending order). In a guest
these are guest-physical frames: they say how the guest's own page table and the host's
entries for it are laid out (the host's leaf entries of a 4 KiB-page buffer are 8 bytes per
frame, so runs of at least 8 contiguous frames share their lines as the virtual pages' do),
not where the host put them. sim/VALIDATION.md, finding 16::

    python -m kvsim.sim.pagemap_probe --out results/pagemap-....json 64MiB 1GiB

Per buffer: the runs of contiguous frames (count, mean length, the share of pages in runs of
at least 8 and 512 frames), the distinct lines of 8-byte entries indexed by frame per page,
and the spread of the frames' low 5 bits above the page offset (the colours of a 2 MiB,
16-way L2's set index: 32 of them) as min and max pages per colour.
"""

from __future__ import annotations

import argparse
import ctypes
import mmap
import struct
import sys
from collections import Counter

from .config import ConfigError, parse_size

PAGE = 4096
HUGE = 2 << 20
PFN_MASK = (1 << 55) - 1
COLOURS = 32


def frames(size: int, huge: bool) -> list[int]:
    """The frame number of each 4 KiB page of a fresh buffer of ``size`` bytes (2 MiB-aligned
    and ``MADV_HUGEPAGE`` with ``huge``, else ``MADV_NOHUGEPAGE``), touched in order."""
    m = mmap.mmap(-1, size + HUGE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    addr = ctypes.addressof(ctypes.c_char.from_buffer(m))
    off = (-addr) % HUGE if huge else 0
    m.madvise(mmap.MADV_HUGEPAGE if huge else mmap.MADV_NOHUGEPAGE, off, size)
    for i in range(off, off + size, PAGE):
        m[i] = 1
    n = size // PAGE
    with open("/proc/self/pagemap", "rb") as f:
        f.seek((addr + off) // PAGE * 8)
        data = f.read(n * 8)
    pfn = [v & PFN_MASK for v in struct.unpack(f"{n}Q", data)]
    if not all(pfn):
        raise ConfigError("pagemap_probe: /proc/self/pagemap gives no frame numbers "
                          "(they need root)")
    return pfn


def summary(pfn: list[int]) -> dict:
    """Runs of contiguous frames and colours of the frames ``pfn`` (module docstring)."""
    runs, r = [], 1
    for a, b in zip(pfn[:-1], pfn[1:], strict=True):
        if b == a + 1:
            r += 1
        else:
            runs.append(r)
            r = 1
    runs.append(r)
    n = len(pfn)
    colours = Counter(p % COLOURS for p in pfn)
    return {"pages": n, "runs": len(runs), "mean_run": round(n / len(runs), 2),
            "share_in_runs_8": round(sum(x for x in runs if x >= 8) / n, 4),
            "share_in_runs_512": round(sum(x for x in runs if x >= 512) / n, 4),
            "entry_lines_per_page": round(len({p >> 3 for p in pfn}) / n, 4),
            "colour_pages_min": min(colours.get(c, 0) for c in range(COLOURS)),
            "colour_pages_max": max(colours.values()), "colour_pages_mean": n / COLOURS}


def main(argv: list[str] | None = None) -> int:
    from kvsim import provenance

    ap = argparse.ArgumentParser(prog="python -m kvsim.sim.pagemap_probe",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("sizes", nargs="+")
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    try:
        out = {f"{s} {p}": summary(frames(parse_size(s, "size"), p == "2MiB"))
               for s in a.sizes for p in ("4KiB", "2MiB")}
    except (ConfigError, OSError, ValueError) as e:
        print(f"pagemap_probe: error: {e}", file=sys.stderr)
        return 1
    return provenance.publish("pagemap_probe", a.out, {"buffers": out})


if __name__ == "__main__":
    sys.exit(main())
