"""The `local` preset: this machine, as `kvsim calibrate` measured it.

``load_cpu("local")`` reads this machine's calibrated CPU file from the user's cache
directory (``$XDG_CACHE_HOME/kvsim/local-<key>.toml``, the key naming the CPU model and the
sysfs cache geometry; see :mod:`kvsim.sim.calibrate`). `kvsim calibrate` writes it: every
value there carries its provenance (measured, sysfs, cpuid, table) and the raw measurements.

Without a calibration, `local` is the **uncalibrated fallback**, labelled as such in its
description and notes (and announced on stderr when that is a terminal): the cache geometry
from ``/sys/devices/system/cpu/cpu0/cache/index*`` and, for a core in the table of known
cores (:data:`kvsim.sim.calibrate.KNOWN_CORES`), that core's published latencies, core size,
miss buffers and TLBs; for an unknown core, caches only (no timing). Nothing in this module
was measured on any machine.

Override any value with a TOML file named by ``KVSIM_LOCAL_OVERRIDES`` holding keys of
:data:`OVERRIDE_KEYS` (e.g. ``l3_effective = "8MiB"``, ``dram_latency_ns = 120``), or from
Python with ``local_cpu(overrides={...})``.
"""

from __future__ import annotations

import os
import sys
import tomllib
from dataclasses import replace
from pathlib import Path

from .config import CacheLevel, ConfigError, CpuConfig, Tlb, load_file, parse_size

SYSFS = Path("/sys/devices/system/cpu/cpu0/cache")

# what an override may set: the clock, each level's latency and miss buffers, the last
# level's size, DRAM, the page-walk cost and the core
OVERRIDE_KEYS = ("freq_ghz", "l1_latency", "l2_latency", "l3_latency", "l3_effective",
                 "dram_latency_ns", "dram_bandwidth_gbs", "walk_latency_ns", "l1_mshrs",
                 "l2_mshrs", "width", "rob", "walkers")


def _read(p: Path) -> str:
    return p.read_text().strip()


def read_sysfs(root: Path = SYSFS) -> list[dict]:
    """Data/unified cache levels of cpu0 as dicts (level, size, ways, line)."""
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


def fallback_message(path: Path) -> str:
    return (f"local: this machine is not calibrated (no {path}); run `kvsim calibrate` "
            "(`--quick`: a minute or two) to measure it; meanwhile `local` is sysfs geometry "
            "with published figures for the core, not measured")


_announced: set[str] = set()


def _announce(msg: str) -> None:
    """Say ``msg`` once per process on stderr, if that is a terminal and ``$KVSIM_QUIET`` is
    unset (``kvsim --quiet`` sets it; pipes and tests keep clean stderr; the description and
    notes carry the message too)."""
    if msg in _announced or os.environ.get("KVSIM_QUIET"):
        return
    _announced.add(msg)
    try:
        if sys.stderr.isatty():
            sys.stderr.write(f"kvsim: note: {msg}\n")
    except (AttributeError, ValueError):
        pass


def sysfs_cpu(levels: list[dict], ident: dict, path: Path) -> CpuConfig:
    """The uncalibrated `local`: sysfs geometry plus the core table's published figures."""
    from .calibrate import identity_core, thp_mode

    table = identity_core(ident)
    caches = []
    notes = [fallback_message(path)]
    for i, x in enumerate(levels):
        ways, line = x["ways"] or 8, x["line"]
        sets = _pow2_floor(x["size"] // (ways * line))
        if sets * ways * line != x["size"]:
            notes.append(f"L{x['level']}: {x['size']} B rounded down to {sets} sets x {ways} ways")
        lat, incl, mshrs = 1, "non-inclusive", 0
        if table and i < len(table["latency"]):
            lat = table["latency"][i]
            incl = table["inclusion"][i]
            if incl == "exclusive" and i != len(levels) - 1:
                incl = "non-inclusive"
            mshrs = (table["l1_mshrs"], table["l2_mshrs"], 0)[min(i, 2)]
        caches.append(CacheLevel("L1D" if x["level"] == 1 else f"L{x['level']}",
                                 sets * ways * line, ways, line, lat, "lru", incl, mshrs))
    if table is None:
        notes.append(f"no table entry for {ident.get('vendor')!r} family {ident.get('family')} "
                     f"model {ident.get('model')}: caches only, no timing")
        return CpuConfig(name="local", caches=tuple(caches),
                         description="this machine, NOT calibrated: sysfs geometry only "
                                     "(run `kvsim calibrate`)",
                         source=str(path), notes=tuple(notes),
                         provenance={"calibrated": False, "table": None})
    t = table["tlb"]
    notes.append(f"core, latencies, miss buffers, TLBs and DRAM: table ({table['core']}): "
                 f"{table['sources']}")
    notes.append("clock: /proc/cpuinfo 'cpu MHz' (in a guest often the TSC, not the core clock)")
    return CpuConfig(
        name="local",
        description=f"this machine, NOT calibrated: sysfs geometry + published {table['core']} "
                    "figures (run `kvsim calibrate`)",
        caches=tuple(caches), freq_ghz=None, width=table["width"], rob=table["rob"],
        dram_latency_ns=table["dram_latency_ns"], dram_bandwidth_gbs=None,
        tlb=Tlb(page_size=2 * 1024 * 1024 if thp_mode() == "always" else 4096,
                l1_entries=t["l1_entries"], l1_ways=t["l1_ways"], l2_entries=t["l2_entries"],
                l2_ways=t["l2_ways"], l2_latency=t["l2_latency"], walkers=t["walkers"]),
        source=str(path), notes=tuple(notes),
        provenance={"calibrated": False, "table": table["core"]},
    ).with_changes(freq_ghz=_nominal_ghz())


def _nominal_ghz() -> float | None:
    """The clock /proc/cpuinfo reports (a guest's is often the TSC's), or None."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("cpu MHz"):
                return float(line.split(":")[1]) / 1000.0
    except (OSError, ValueError, IndexError):
        pass
    return None


def _overrides(overrides: dict | None) -> dict:
    corr: dict = {}
    env = os.environ.get("KVSIM_LOCAL_OVERRIDES")
    if env:
        try:
            corr.update(tomllib.loads(Path(env).read_text()))
        except (OSError, tomllib.TOMLDecodeError) as e:
            raise ConfigError(f"KVSIM_LOCAL_OVERRIDES: {e}") from None
    corr.update(overrides or {})
    unknown = set(corr) - set(OVERRIDE_KEYS)
    if unknown:
        raise ConfigError(f"{sorted(unknown)[0]}: unknown local override")
    return corr


def apply_overrides(cpu: CpuConfig, corr: dict) -> CpuConfig:
    """``cpu`` with the :data:`OVERRIDE_KEYS` values of ``corr`` in place."""
    if not corr:
        return cpu
    caches = list(cpu.caches)
    for i, c in enumerate(caches):
        lvl = i + 1
        ch: dict = {}
        if f"l{lvl}_latency" in corr:
            ch["latency"] = int(corr[f"l{lvl}_latency"])
        if f"l{lvl}_mshrs" in corr:
            ch["mshrs"] = int(corr[f"l{lvl}_mshrs"])
        if lvl >= 3 and "l3_effective" in corr:
            size = parse_size(corr["l3_effective"], "l3_effective")
            sets = _pow2_floor(size // (c.ways * c.line))
            ch["size"] = sets * c.ways * c.line
        caches[i] = replace(c, **ch)
    kw: dict = {"caches": tuple(caches)}
    for key in ("freq_ghz", "dram_latency_ns", "dram_bandwidth_gbs"):
        if key in corr:
            kw[key] = float(corr[key])
    for key in ("width", "rob"):
        if key in corr:
            kw[key] = int(corr[key])
    if "walk_latency_ns" in corr and cpu.tlb is not None:
        ghz = float(kw.get("freq_ghz", cpu.freq_ghz or 1.0))
        kw["tlb"] = replace(cpu.tlb,
                            walk_latency=int(round(float(corr["walk_latency_ns"]) * ghz)))
    if "walkers" in corr and cpu.tlb is not None:
        kw["tlb"] = replace(kw.get("tlb", cpu.tlb), walkers=int(corr["walkers"]))
    notes = cpu.notes + (f"overridden: {', '.join(sorted(corr))}",)
    return cpu.with_changes(**kw, notes=notes)


def local_cpu(root: Path = SYSFS, overrides: dict | None = None) -> CpuConfig:
    """This machine's CPU model: its calibrated file if there is one, else the labelled
    sysfs fallback; then any overrides."""
    from .calibrate import cache_path, cpu_identity

    corr = _overrides(overrides)
    levels = read_sysfs(root)
    ident = cpu_identity()
    path = cache_path(levels, ident)
    if path.is_file():
        cpu = load_file(path)
        from .calibrate_check import status_line

        why = status_line(cpu.provenance.get("selfcheck"))
        if why is not None:
            raise ConfigError(f"local: the calibrated file {path}: {why}; run `kvsim calibrate` "
                              f"again, or name the file (--cpu {path}) to use it anyway")
        cpu = cpu.with_changes(name="local", source=str(path),
                               notes=cpu.notes + (f"calibrated file: {path}",),
                               provenance={**cpu.provenance, "calibrated": True})
    else:
        from .calibrate import failed_path

        msg = fallback_message(path)
        failed = failed_path(path)
        if failed.is_file():
            from .calibrate_check import status_line

            try:
                sc = tomllib.loads(failed.read_text()).get("selfcheck")
            except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError):
                sc = None
            msg += f"; the last calibration ({failed}) is not used: {status_line(sc)}"
        _announce(msg)
        cpu = sysfs_cpu(levels, ident, path)
        if failed.is_file():
            cpu = cpu.with_changes(notes=cpu.notes + (msg,))
    return apply_overrides(cpu, corr)


def core_is_known() -> bool:
    """Whether this machine's core is in the table of known cores, which gives `local` (and
    a calibration) its core size, miss buffers and TLBs: without it `local` has caches only
    and no timing model, calibrated or not."""
    from .calibrate import cpu_identity, identity_core

    return identity_core(cpu_identity()) is not None


#: How tables, plots and JSON rows name the `local` preset when this machine has no
#: calibrated file (the fallback above).
UNCALIBRATED_LABEL = "local (uncalibrated)"


def is_calibrated(root: Path = SYSFS) -> bool:
    """Whether this machine has a calibrated CPU file that passed its self-check (what
    ``load_cpu("local")`` reads)."""
    from .calibrate import cache_path, cpu_identity
    from .calibrate_check import status_line

    try:
        path = cache_path(read_sysfs(root), cpu_identity())
        if not path.is_file():
            return False
        return status_line(tomllib.loads(path.read_text()).get("selfcheck")) is None
    except (ConfigError, OSError, tomllib.TOMLDecodeError, UnicodeDecodeError):
        return False


def label(cpu: str | CpuConfig) -> str:
    """The name a table, plot or JSON row shows for ``cpu`` (a preset name, a path or a
    loaded :class:`CpuConfig`): :data:`UNCALIBRATED_LABEL` for an uncalibrated `local`,
    else the name itself."""
    if isinstance(cpu, CpuConfig):
        if cpu.name == "local" and cpu.provenance.get("calibrated") is False:
            return UNCALIBRATED_LABEL
        return cpu.name
    return UNCALIBRATED_LABEL if cpu == "local" and not is_calibrated() else cpu
