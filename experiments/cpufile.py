"""``kvsim cpus --show NAME``: a CPU model as a TOML file to copy and edit (schema in
sim/PRESETS.md).

A preset kept as a file is shown as written, with its comments and source tables. A model
built at run time (``local``, from sysfs and measured corrections) is written out by
:func:`cpu_toml`, which gives the same model back when parsed (``sim.parse_cpu``).
"""

from __future__ import annotations

import json
from pathlib import Path

from kvsim import sim
from kvsim.sim.config import SYSCALL_KEYS

__all__ = ["cpu_toml", "show"]


def _size(n: int) -> str:
    for unit, f in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n % f == 0:
            return f'"{n // f}{unit}"'
    return str(n)


def _val(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return json.dumps(v)  # a TOML basic string is a JSON string for these texts
    return repr(v)


def cpu_toml(cpu: sim.CpuConfig) -> str:
    """``cpu`` as a TOML document in the schema of sim/PRESETS.md; every key is written, so
    the file shows each knob there is to edit."""
    out = [f"name = {_val(cpu.name)}"]
    if cpu.description:
        out.append(f"description = {_val(cpu.description)}")
    if cpu.freq_ghz is not None:
        out.append(f"freq_ghz = {_val(cpu.freq_ghz)}")
    if cpu.notes:
        out.append("notes = [" + ", ".join(_val(n) for n in cpu.notes) + "]")
    if cpu.width is not None and cpu.rob is not None:
        out += ["", "[core]", f"width = {cpu.width}", f"rob = {cpu.rob}"]
        if cpu.sustained_ipc is not None:
            out.append(f"sustained_ipc = {_val(cpu.sustained_ipc)}")
        if cpu.scheduler is not None:
            out.append(f"scheduler = {cpu.scheduler}")
        if cpu.store_buffer is not None:
            out.append(f"store_buffer = {cpu.store_buffer}")
        if cpu.full_line_store_fetch:
            out.append("full_line_store_fetch = true")
    for c in cpu.caches:
        out += ["", "[[cache]]", f"name = {_val(c.name)}", f"size = {_size(c.size)}",
                f"ways = {c.ways}", f"line = {c.line}", f"latency = {c.latency}",
                f"replacement = {_val(c.replacement)}", f"inclusion = {_val(c.inclusion)}",
                f"mshrs = {c.mshrs}", f"seed = {c.seed}"]
    if cpu.dram_latency_ns is not None:
        out += ["", "[dram]", f"latency_ns = {_val(cpu.dram_latency_ns)}"]
        if cpu.dram_bandwidth_gbs is not None:
            out.append(f"bandwidth_gbs = {_val(cpu.dram_bandwidth_gbs)}")
    if cpu.tlb is not None:
        t = cpu.tlb
        out += ["", "[tlb]", f"page_size = {_size(t.page_size)}",
                f"l1_entries = {t.l1_entries}", f"l1_ways = {t.l1_ways}",
                f"l2_entries = {t.l2_entries}", f"l2_ways = {t.l2_ways}",
                f"l2_latency = {t.l2_latency}", f"walk_latency = {t.walk_latency}",
                f"walk_reads = {t.walk_reads}", f"walkers = {t.walkers}"]
        if t.host_page_size:
            out.append(f"host_page_size = {_size(t.host_page_size)}")
        if t.walk_extra_4k:
            out.append(f"walk_extra_4k = {t.walk_extra_4k}")
        for key in ("walk_retention_ns", "host_read_ns"):
            if getattr(t, key):
                out.append(f"{key} = {_val(getattr(t, key))}")
        if t.walk_last_level is not True:
            out.append(f"walk_last_level = {_val(t.walk_last_level)}")
        if t.placement != "virtual" or t.placement_seed != 1:
            out += [f"placement = {_val(t.placement)}", f"placement_seed = {t.placement_seed}"]
    if cpu.work:
        out += ["", "[work]"] + [f"{k} = {_val(r)}" for k, r in cpu.work]
        if cpu.work_gap_model is not None:  # the counts the rates were fitted to
            out.append(f"gap_model = {_val(cpu.work_gap_model)}")
    out += ["", "[swprefetch]", f"fill = {_val(cpu.caches[cpu.swpf_fill].name)}",
            f"tlb_miss = {_val('drop' if cpu.swpf_drop_on_tlb_miss else 'walk')}"]
    if cpu.swpf_trains:
        out.append("trains_prefetchers = true")
    for p in cpu.prefetchers:
        out += ["", "[[prefetcher]]", f"level = {_val(cpu.caches[p.level].name)}",
                f"kind = {_val(p.kind)}", f"degree = {p.degree}", f"table = {p.table}"]
        out += [f"{k} = true" for k in ("arrival", "stores", "hits") if getattr(p, k)]
    sy = cpu.syscall
    if any(sy.call_ns) or any(sy.byte_ns):
        vals = [v for pair in zip(sy.call_ns, sy.byte_ns, strict=True) for v in pair]
        out += ["", "[syscall]"] + [f"{k} = {_val(v)}" for k, v in zip(SYSCALL_KEYS, vals,
                                                                        strict=True)]
    return "\n".join(out) + "\n"


def show(name: str) -> str:
    """The TOML text of preset ``name`` (or of a .toml file): the file itself when the model
    comes from one, else :func:`cpu_toml` of the model."""
    cpu = sim.load_cpu(name)
    src = Path(cpu.source) if cpu.source else None
    if src is not None and src.suffix == ".toml" and src.is_file():
        return src.read_text()
    head = (f"# {cpu.name}: written out by `kvsim cpus --show {name}` "
            "(schema: sim/PRESETS.md)\n")
    return head + cpu_toml(cpu)
