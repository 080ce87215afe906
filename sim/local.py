"""The `local` preset: this machine's caches from sysfs, with documented corrections.

Geometry (sizes, ways, line) comes from ``/sys/devices/system/cpu/cpu0/cache/index*`` at run
time. What sysfs cannot give, or gives wrongly inside this KVM guest, is replaced by values
measured here (``CORRECTIONS``; see sim/PRESETS.md and shared cpu-facts.md section 8):

* the L3 a process actually gets is about 4-5 MiB (latency jumps at 5 MiB, DRAM-like from
  6 MiB), not the sysfs size, so the simulated L3 is capped at ``l3_effective``;
* latencies: L1 5 cycles, L2 16 cycles, L3 ~121 cycles (35 ns), DRAM 195 ns with 2 MiB
  pages (174-214 ns measured; up to ~480 ns at 1 GiB with 4 KiB pages, from nested EPT walks);
* clock 3.46 GHz (dependent imul chain), not the TSC;
* a page walk costs ~170 ns (nested EPT walk: 1 GiB chase with 4 KiB pages minus 2 MiB
  pages), and the default page size is 2 MiB (THP); ``simulate(page_size=4096)`` models
  the 4 KiB-page case;
* core (ROB 512, width 6) and TLB sizes: Golden Cove values; the guest hides them.

Override any correction with a TOML file named by ``KVSIM_LOCAL_OVERRIDES`` holding the keys
of ``CORRECTIONS`` (e.g. ``l3_effective = "8MiB"``, ``dram_latency_ns = 120``).
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

from .config import CacheLevel, ConfigError, CpuConfig, Tlb, parse_size

SYSFS = Path("/sys/devices/system/cpu/cpu0/cache")

CORRECTIONS = {
    "freq_ghz": 3.46,  # M: dependent imul chain
    "l1_latency": 5,  # M: 1.45 ns
    "l2_latency": 16,  # M: 4.6 ns
    "l3_latency": 121,  # M: 35 ns at 2.5-4 MiB
    "l3_effective": 4 * 1024 * 1024,  # M: effective capacity 4-5 MiB
    "dram_latency_ns": 195.0,  # M: 174-214 ns, 2 MiB pages, 64-256 MiB working set
    "dram_bandwidth_gbs": 14.3,  # M: one-thread streaming read
    # M (derived): a 1 GiB pointer chase costs 272-296 ns with 2 MiB pages but 410-482 ns with
    # 4 KiB pages; the ~170 ns difference is the nested (EPT) page walk of a TLB miss
    "walk_latency_ns": 170.0,
    "l1_mshrs": 16,  # E: Golden Cove fill buffers
    "l2_mshrs": 48,  # E: Golden Cove L2
    "width": 6,  # E: Golden Cove allocate width
    "rob": 512,  # E: Golden Cove
}


def _read(p: Path) -> str:
    return p.read_text().strip()


def read_sysfs(root: Path = SYSFS) -> list[dict]:
    """Data/unified cache levels of cpu0 as dicts (level, size, ways, line, sets)."""
    out = []
    for d in sorted(root.glob("index*")):
        try:
            typ = _read(d / "type")
            if typ == "Instruction":
                continue
            out.append({
                "level": int(_read(d / "level")),
                "size": parse_size(_read(d / "size") + "iB" if _read(d / "size")[-1] in "KMG"
                                   else _read(d / "size"), f"{d}/size"),
                "ways": int(_read(d / "ways_of_associativity") or 0),
                "line": int(_read(d / "coherency_line_size") or 64),
            })
        except (OSError, ValueError) as e:
            raise ConfigError(f"local: cannot read {d}: {e}") from None
    if not out:
        raise ConfigError(f"local: no cache information under {root}")
    return sorted(out, key=lambda x: x["level"])


def _pow2_floor(n: int) -> int:
    return 1 << (n.bit_length() - 1) if n > 0 else 0


def local_cpu(root: Path = SYSFS, overrides: dict | None = None) -> CpuConfig:
    corr = dict(CORRECTIONS)
    env = os.environ.get("KVSIM_LOCAL_OVERRIDES")
    if env:
        try:
            corr.update(tomllib.loads(Path(env).read_text()))
        except (OSError, tomllib.TOMLDecodeError) as e:
            raise ConfigError(f"KVSIM_LOCAL_OVERRIDES: {e}") from None
    corr.update(overrides or {})
    unknown = set(corr) - set(CORRECTIONS)
    if unknown:
        raise ConfigError(f"{sorted(unknown)[0]}: unknown local override")
    if isinstance(corr["l3_effective"], str):
        corr["l3_effective"] = parse_size(corr["l3_effective"], "l3_effective")
    levels = read_sysfs(root)
    notes = []
    caches = []
    for x in levels:
        lvl, ways, line = x["level"], x["ways"] or 8, x["line"]
        size = x["size"]
        if lvl >= 3 and size > corr["l3_effective"]:
            notes.append(
                f"L{lvl}: sysfs says {size // 1024} KiB; simulated as the measured effective "
                f"{corr['l3_effective'] // 1024} KiB (KVM guest)"
            )
            size = corr["l3_effective"]
        sets = _pow2_floor(size // (ways * line))
        if sets * ways * line != size:
            notes.append(f"L{lvl}: {size} B rounded down to {sets} sets x {ways} ways")
        lat = corr.get(f"l{lvl}_latency", corr["l3_latency"])
        mshrs = corr.get(f"l{lvl}_mshrs", 0)
        caches.append(CacheLevel(f"L{lvl}" + ("D" if lvl == 1 else ""), sets * ways * line, ways,
                                 line, int(lat), "lru", "non-inclusive", int(mshrs)))
    notes.append(
        "latencies, clock and DRAM are corrections measured on this KVM guest "
        "(sim/local.py CORRECTIONS); core and TLB are Golden Cove estimates"
    )
    return CpuConfig(
        name="local",
        description="this machine: sysfs geometry + measured KVM-guest corrections",
        caches=tuple(caches),
        freq_ghz=float(corr["freq_ghz"]),
        width=int(corr["width"]),
        rob=int(corr["rob"]),
        dram_latency_ns=float(corr["dram_latency_ns"]),
        dram_bandwidth_gbs=float(corr["dram_bandwidth_gbs"]),
        tlb=Tlb(page_size=2 * 1024 * 1024, l1_entries=96, l1_ways=6, l2_entries=2048, l2_ways=8,
                l2_latency=9,
                walk_latency=int(round(float(corr["walk_latency_ns"]) * float(corr["freq_ghz"])))),
        source=str(root),
        notes=tuple(notes),
        provenance={"corrections": corr},
    )
