"""CPU files: presets load, `local` derives from sysfs, invalid files give one-line errors."""

from __future__ import annotations

import copy
import tomllib

import pytest

from kvsim import sim
from kvsim.sim.config import PRESET_DIR

GOOD = {
    "name": "my-cpu", "freq_ghz": 3.0, "core": {"width": 4, "rob": 224},
    "cache": [
        {"name": "L1D", "size": "32KiB", "ways": 8, "line": 64, "latency": 5,
         "replacement": "lru", "inclusion": "non-inclusive", "mshrs": 12},
        {"name": "L2", "size": "1MiB", "ways": 16, "line": 64, "latency": 14},
    ],
    "dram": {"latency_ns": 90},
    "tlb": {"l1_entries": 64, "l1_ways": 4, "l2_entries": 1536, "l2_ways": 12},
    "prefetcher": [{"level": "L2", "kind": "stream"}],
}


def test_issue_example_schema_parses():
    cpu = sim.parse_cpu(GOOD)
    assert cpu.timing_capable
    assert [c.sets for c in cpu.caches] == [64, 1024]
    assert cpu.dram_latency_cycles == 270
    assert cpu.prefetchers[0].level == 1


def test_functional_only_file():
    cpu = sim.parse_cpu({"name": "f", "cache": GOOD["cache"][:1]})
    assert not cpu.timing_capable


@pytest.mark.parametrize("mutate, key, reason", [
    (lambda d: d["cache"][0].update(ways=0), "cache[0].ways", ">= 1"),
    (lambda d: d["cache"][0].update(size="48KiB", ways=8), "cache[0].size", "power of two"),
    (lambda d: d["cache"][1].update(replacement="lfu"), "cache[1].replacement", "unknown policy"),
    (lambda d: d["cache"][0].update(line=48), "cache[0].line", "power of two"),
    (lambda d: d["cache"][1].update(line=128), "cache[1].line", "L1 line size"),
    (lambda d: d["cache"][0].update(inclusion="exclusive"), "cache[0].inclusion", "last level"),
    (lambda d: d["cache"][1].update(inclusion="mostly"), "cache[1].inclusion", "unknown value"),
    (lambda d: d["cache"][0].update(size="24KiB", ways=6, replacement="plru"), "cache[0].ways",
     "plru"),
    (lambda d: d["cache"][0].update(size="32 parsecs"), "cache[0].size", "expected a size"),
    (lambda d: d["core"].update(rob=0), "core.rob", "> 0"),
    (lambda d: d["core"].update(width="four"), "core.width", "expected int"),
    (lambda d: d["dram"].pop("latency_ns"), "dram.latency_ns", "missing"),
    (lambda d: d["tlb"].update(l1_entries=48, l1_ways=4), "tlb.l1_entries", "power-of-two"),
    (lambda d: d["tlb"].update(page_size="1GiB"), "tlb.page_size", "4KiB or 2MiB"),
    (lambda d: d["prefetcher"][0].update(kind="markov"), "prefetcher[0].kind", "unknown"),
    (lambda d: d["prefetcher"][0].update(level="L9"), "prefetcher[0].level", "unknown cache"),
    (lambda d: d.update(cache=[]), "cache", "at least one"),
    (lambda d: d.update(colour="red"), "colour", "unknown top-level key"),
    (lambda d: d["cache"][1].update(latncy=3), "cache[1].latncy", "unknown key"),
    (lambda d: d["tlb"].update(walks=3), "tlb.walks", "unknown key"),
])
def test_invalid_files_name_key_and_reason(mutate, key, reason):
    doc = copy.deepcopy(GOOD)
    mutate(doc)
    with pytest.raises(sim.ConfigError) as e:
        sim.parse_cpu(doc)
    msg = str(e.value)
    assert "\n" not in msg
    assert msg.startswith(key), msg
    assert reason in msg, msg


def test_unknown_cpu_lists_valid_names():
    with pytest.raises(sim.ConfigError) as e:
        sim.load_cpu("pentium-4")
    for n in ("graviton3", "xeon-8255c", "local"):
        assert n in str(e.value)


def test_bad_toml_file(tmp_path):
    p = tmp_path / "bad.toml"
    p.write_text("name = \n")
    with pytest.raises(sim.ConfigError, match="invalid TOML"):
        sim.load_cpu(str(p))


@pytest.mark.parametrize("name", ["xeon-8255c", "xeon-8488c", "graviton3", "graviton4",
                                  "epyc-7713"])
def test_presets_load_and_carry_sources(name):
    cpu = sim.load_cpu(name)
    assert cpu.timing_capable and cpu.tlb is not None and cpu.prefetchers
    doc = tomllib.loads((PRESET_DIR / f"{name}.toml").read_text())
    # every number (and every modelling choice) names its source and confidence code
    tables = [("", doc, {"freq_ghz"})]
    tables += [(sec, doc[sec], set(doc[sec]) - {"src"})
               for sec in ("core", "dram", "tlb", "swprefetch")]
    tables += [(f"cache[{i}]", c, set(c) - {"src", "name", "replacement"})
               for i, c in enumerate(doc["cache"])]
    tables += [(f"prefetcher[{i}]", p, set(p) - {"src"})
               for i, p in enumerate(doc["prefetcher"])]
    for where, table, keys in tables:
        src = table.get("src", {})
        for key in keys:
            assert key in src, f"{name}: {where}.{key} has no source"
            assert src[key].split()[0] in ("V", "R", "E", "M"), (where, key, src[key])



#: a preset -> the CPUID of its part (vendor, family, model): Cascade Lake-SP, Sapphire Rapids,
#: Milan; the Graviton presets' cores have no entry in the table of known cores
PRESET_CPUID = {"xeon-8255c": ("GenuineIntel", 6, 0x55),
                "xeon-8488c": ("GenuineIntel", 6, 0x8F),
                "epyc-7713": ("AuthenticAMD", 25, 0x01)}


@pytest.mark.parametrize("name", sorted(PRESET_CPUID))
def test_preset_streamer_as_known_core(name):
    """A preset's prefetchers below L1 are trained and issue as `kvsim calibrate`'s table of
    known cores has its core's (the keys `arrival`, `stores`, `hits`: sim/MODEL.md §4): one
    vendor's documented streamer, the same in a preset and in a calibrated file."""
    from kvsim.sim import calibrate as cal
    core = cal.known_core(*PRESET_CPUID[name])
    assert core is not None, name
    keys = ("arrival", "stores", "hits")
    table = {(p["level"], p["kind"]): tuple(p.get(k, False) for k in keys)
             for p in core["prefetchers"] if p["level"] != "L1D"}
    doc = tomllib.loads((PRESET_DIR / f"{name}.toml").read_text())
    preset = {(p["level"], p["kind"]): tuple(p.get(k, False) for k in keys)
              for p in doc["prefetcher"] if p["level"] != "L1D"}
    for pf in set(table) & set(preset):
        assert preset[pf] == table[pf], (name, pf, preset[pf], table[pf])
    assert set(table) & set(preset), name

def test_list_presets():
    rows = sim.list_presets()
    names = [r["name"] for r in rows]
    want = {"xeon-8255c", "xeon-8488c", "graviton3", "graviton4", "epyc-7713", "local"}
    assert want <= set(names)
    for r in rows:
        assert {"name", "description", "freq_ghz", "levels"} <= set(r)


def test_local_on_this_machine():
    cpu = sim.load_cpu("local")
    assert cpu.caches and cpu.caches[0].name == "L1D"


@pytest.mark.parametrize("n, text", [
    (512, "512B"), (1024, "1KiB"), (48 * 1024, "48KiB"), (5760, "5.62KiB"),
    (1536 * 1024, "1.5MiB"), (1478512, "1.41MiB"), (19922944, "19MiB"), (1 << 30, "1GiB"),
    (1023 * 1024 * 1024, "1023MiB"), (3 << 40, "3072GiB"),
])
def test_one_byte_size_format(n, text):
    """Every byte count kvsim prints (the summary line, the calibration's replayed points
    and its fit's messages) is spelled by config.fmt_size; a whole figure reads back."""
    from kvsim.sim.config import fmt_size, parse_size

    assert fmt_size(n) == text
    if "." not in text:
        assert parse_size(text, "t") == n


def test_the_summary_spells_sizes_as_fmt_size():
    cpu = sim.parse_cpu({"name": "t", "cache": [
        {"name": "L1D", "size": "48KiB", "ways": 12, "line": 64, "latency": 5},
        {"name": "L2", "size": "1536KiB", "ways": 12, "line": 64, "latency": 17}]})
    assert cpu.summary() == "L1D 48KiB/12w/5c, L2 1.5MiB/12w/17c"
