"""The stores of a calibrated file's core for ``kvsim calibrate``: ``[core] store_buffer`` and
``[core] full_line_store_fetch`` (sim/MODEL.md §2, §6; sim/PRESETS.md).

Neither is measured here. A store buffer's size shows natively only as the point where
independent store misses between long-latency loads stop overlapping, which on a shared
guest moves with everything else the host runs; the vendors and the well-known analyses
give it per core, so the file takes the table's figure for the core ``kvsim calibrate``
recognises (:data:`STORE_BUFFERS`, keyed by :data:`kvsim.sim.calibrate.KNOWN_CORES`' core
names), its source in the file's ``src``, and none for a core the table lacks (then the
model has no store buffer, as before). Whether an ordinary store covering a whole line reads
the line goes by the instruction set: an x86 core's ordinary store reads its line for
ownership, only non-temporal stores write a whole line around it (Intel 64 and IA-32
Architectures Optimization Reference Manual, "Streaming Non-temporal Stores"; AMD's Software
Optimization Guide #25112 likewise), so every x86 vendor's file says ``true``; an Arm core
streams runs of whole-line stores without a linefill (its write streaming mode, the Arm
Cortex-A76 TRM's "Write streaming mode"), so an Arm file says ``false``.

The codes are cpu-facts' (V verified against retrieved text, R recalled from the named
source, E estimate).
"""

from __future__ import annotations

import platform
import tomllib
from collections.abc import Sequence
from pathlib import Path

#: store-buffer entries by KNOWN_CORES core name: (entries, source)
STORE_BUFFERS: dict[str, tuple[int, str]] = {
    "AMD Zen 3": (64, "V: AnandTech's Zen 3 review, article 16214 p.4 (64-entry store queue)"),
    "AMD Zen 4": (64, "R: Software Optimization Guide for the AMD Zen4 Microarchitecture "
                      "(#57647), store queue as Zen 3's 64 entries"),
    "AMD Zen 5": (104, "R: AMD's Hot Chips 2024 Zen 5 slides (104-entry store queue)"),
    "Intel Golden Cove / Raptor Cove / Redwood Cove": (
        114, "R: Chips and Cheese, 'Popping the Hood on Golden Cove' (114-entry store "
             "queue)"),
    "Intel Skylake-SP / Cascade Lake": (
        56, "R: Intel 64 and IA-32 Architectures Optimization Reference Manual, Skylake "
            "server microarchitecture (56 store-buffer entries)"),
}
X86_VENDORS = ("GenuineIntel", "AuthenticAMD", "HygonGenuine")
FETCH_SRC = ("V: an x86 core's ordinary store reads its line for ownership; only "
             "non-temporal stores write a whole line without (Intel 64 and IA-32 "
             "Architectures Optimization Reference Manual, 'Streaming Non-temporal Stores'; "
             "AMD's Software Optimization Guide #25112 likewise, R)")
STREAM_SRC = ("R: Arm's write streaming mode streams whole-line stores without a linefill "
              "(Arm Cortex-A76 TRM 100798, 'Write streaming mode', and its Neoverse "
              "successors); E that every whole-line store piece streams")


def apply(core: dict, vendor: str, table: dict | None,
          machine: str | None = None) -> None:
    """Add ``store_buffer`` (the table's, for a core it knows) and ``full_line_store_fetch``
    (by ``vendor``: x86 fetches; on an ``aarch64`` ``machine``, this one's by default, it
    does not; otherwise it is left out) to a calibrated file's ``[core]`` table and its
    ``src``."""
    machine = platform.machine() if machine is None else machine
    src = core.setdefault("src", {})
    entry = STORE_BUFFERS.get(table["core"]) if table else None
    if entry:
        core["store_buffer"], src["store_buffer"] = entry[0], f"table ({entry[1]})"
    if vendor in X86_VENDORS:
        core["full_line_store_fetch"], src["full_line_store_fetch"] = True, FETCH_SRC
    elif machine == "aarch64":
        core["full_line_store_fetch"], src["full_line_store_fetch"] = False, STREAM_SRC


def add_to_file(src: Path, out: Path) -> dict:
    """``src``'s calibrated CPU file with :func:`apply` done by the core its ``[meta] cpu``
    names (as ``kvsim calibrate`` now writes it; the machine taken as the file's own
    ``[meta] provenance``'s arch, else this one's), written to ``out``; the notes say so
    and ``[meta] stores_provenance`` holds this run's provenance. Returns ``[core]``."""
    from kvsim.provenance import provenance

    from .calibrate import identity_core, to_toml
    from .config import ConfigError, parse_cpu

    try:
        doc = tomllib.loads(Path(src).read_text())
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise ConfigError(f"{src}: {e}") from None
    meta = doc.get("meta") or {}
    ident = meta.get("cpu") or {}
    if "core" not in doc or not ident:
        raise ConfigError(f"{src}: no [core] or no [meta] cpu (not a calibrated file)")
    arch = ((meta.get("provenance") or {}).get("machine") or {}).get("arch")
    apply(doc["core"], ident.get("vendor", ""), identity_core(ident), arch)
    doc.setdefault("notes", []).append(
        f"[core] store_buffer and full_line_store_fetch added by `python -m "
        f"kvsim.sim.calibrate_stores` (sim/calibrate_stores.py) to {Path(src).name}")
    meta["stores_provenance"] = provenance()
    text = to_toml(doc)
    parse_cpu(tomllib.loads(text), str(out))
    Path(out).write_text(text)
    return doc["core"]


def main(argv: Sequence[str] | None = None) -> int:
    import argparse
    import sys

    from .config import ConfigError

    ap = argparse.ArgumentParser(prog="python -m kvsim.sim.calibrate_stores",
                                 description="Write a calibrated CPU file with [core] "
                                             "store_buffer and full_line_store_fetch as "
                                             "`kvsim calibrate` writes them now.")
    ap.add_argument("cpu_file", type=Path)
    ap.add_argument("-o", "--output", type=Path, required=True)
    a = ap.parse_args(argv)
    try:
        core = add_to_file(a.cpu_file, a.output)
    except (ConfigError, OSError) as e:
        print(f"calibrate_stores: {e}", file=sys.stderr)
        return 1
    print({k: v for k, v in core.items() if k != "src"})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
