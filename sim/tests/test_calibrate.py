"""`kvsim calibrate`: the analysis on synthetic curves with known answers, the CPU file it
writes, the cache lookup of `local` and its fallback, and the command end to end."""

from __future__ import annotations

import io
import math
import tomllib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvsim import sim
from kvsim.sim import calibrate as cal
from kvsim.sim import calibrate_check as check
from kvsim.sim import local

KIB, MIB = 1024, 1024**2
ZEN4 = {"vendor": "AuthenticAMD", "family": 25, "model": 17, "model_name": "Test EPYC"}
LEVELS = [{"level": 1, "size": 32 * KIB, "ways": 8, "line": 64},
          {"level": 2, "size": 1 * MIB, "ways": 8, "line": 64},
          {"level": 3, "size": 32 * MIB, "ways": 16, "line": 64}]


# --- analysis: known answers on synthetic curves -------------------------------------------

@st.composite
def hierarchies(draw):
    """Capacities 16x-64x apart from 16 KiB up, latencies 2.5x-10x apart (real hierarchies:
    32 KiB / 1 MiB / 32 MiB, about 1 / 4 / 16 / 120 ns), noise up to 3 %."""
    n = draw(st.integers(1, 3))
    caps = [2 ** draw(st.integers(14, 16))]
    for _ in range(n - 1):
        caps.append(caps[-1] * 2 ** draw(st.integers(4, 6)))
    lats = [draw(st.floats(0.8, 2.0))]
    for _ in range(n):
        lats.append(lats[-1] * draw(st.floats(2.5, 10.0)))
    return caps, lats, draw(st.floats(0.0, 0.03)), draw(st.integers(0, 2**32 - 1))


@settings(max_examples=40, deadline=None)
@given(hierarchies())
def test_fit_levels_recovers_latencies_and_capacities(h):
    caps, lats, noise, seed = h
    sizes = cal.sweep_sizes(1024 * MIB, 4)
    rng = np.random.default_rng(seed)
    ns = cal.model_latency(sizes, caps, lats) * (1 + rng.uniform(-noise, noise, len(sizes)))
    fit = cal.fit_levels(sizes, ns, len(caps))
    for got, want in zip(fit["latency_ns"], lats, strict=True):
        assert got == pytest.approx(want, rel=0.12)
    for got, want in zip(fit["capacity"], caps, strict=True):
        assert got == pytest.approx(want, rel=0.2)


def test_fit_levels_is_exact_without_noise():
    sizes = cal.sweep_sizes(512 * MIB, 4)
    caps, lats = [32 * KIB, 1 * MIB, 32 * MIB], [1.1, 3.9, 16.0, 120.0]
    fit = cal.fit_levels(sizes, cal.model_latency(sizes, caps, lats), 3)
    assert fit["rms_rel_error"] < 1e-6
    assert fit["latency_ns"] == pytest.approx(lats, rel=1e-6)
    assert fit["capacity"] == pytest.approx(caps, rel=0.05)  # the search grid's step


def test_segments_split_a_step_curve_at_its_steps():
    y = np.log(np.array([1.0] * 5 + [4.0] * 7 + [20.0] * 3))
    assert cal._segments(y, 3) == [0, 5, 12]


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 70), st.floats(20.0, 400.0), st.floats(0.0, 0.03),
       st.integers(0, 2**32 - 1))
def test_mlp_ceiling_is_where_the_speedup_levels_off(m, lat1, noise, seed):
    rng = np.random.default_rng(seed)
    chains = cal.MLP_CHAINS
    per_load = [lat1 / min(n, m) * (1 + rng.uniform(-noise, noise)) for n in chains]
    per_load[0] = lat1
    got = cal.mlp_ceiling(chains, per_load)
    if sum(n >= m for n in chains) >= 3:  # resolved: three counts at or above it
        assert got == pytest.approx(m, rel=0.08)
    else:  # not reached: a lower bound, never more than the chains measured
        assert got <= max(chains) * 1.04 and got <= m * 1.04


def test_mlp_ceiling_needs_one_chain():
    with pytest.raises(ValueError, match="include 1"):
        cal.mlp_ceiling([2, 4], [50.0, 25.0])


def test_amd_tlb_leaves_decode():
    # AMD APM vol. 3, CPUID Fn8000_0005 EBX (L1 DTLB 4 KiB: assoc 31:24, entries 23:16) and
    # Fn8000_0006 EBX (L2 DTLB 4 KiB: assoc code 31:28, entries 27:16): 72 entries fully
    # associative, 3072 entries 8-way (code 6)
    raw = {"x86": True, "max_ext": 0x80000021, "l1_tlb_ebx": (0xFF << 24) | (72 << 16),
           "l2_tlb_ebx": (6 << 28) | (3072 << 16)}
    assert cal._tlb_from_cpuid(raw) == {"l1_entries": 72, "l1_ways": 0, "l2_entries": 3072,
                                        "l2_ways": 8}
    assert cal._tlb_from_cpuid({"x86": False}) is None
    w = cal._pow2_sets_ways(3072, 8)
    assert w >= 8 and 3072 % w == 0 and (3072 // w) & (3072 // w - 1) == 0


def test_known_core_table():
    assert cal.known_core("AuthenticAMD", 25, 17)["core"] == "AMD Zen 4"
    assert cal.known_core("AuthenticAMD", 25, 1)["core"] == "AMD Zen 3"
    # family 19h model ranges as Linux's amd.c sorts them (Zen 3: 00-0F, 20-5F; Zen 4: 10-1F,
    # 60-AF); nothing past them
    for model in range(0x100):
        c = cal.known_core("AuthenticAMD", 25, model)
        want = ("AMD Zen 4" if 0x10 <= model < 0x20 or 0x60 <= model < 0xB0
                else "AMD Zen 3" if model < 0x60 else None)
        assert (c["core"] if c else None) == want, hex(model)
    assert cal.known_core("GenuineIntel", 6, 0x8F)["rob"] == 512
    assert cal.known_core("CentaurHauls", 6, 15) is None
    for c in cal.KNOWN_CORES:
        assert c["sources"] and len(c["latency"]) == len(c["inclusion"]) == 3
        assert 1 <= c["tlb"]["walkers"] <= 64
        # an Intel core's L2 streamer issues on the L1's request and trains on stores and
        # hits (finding 33); the table's prefetchers are what a CPU file can hold
        streams = [p for p in c["prefetchers"] if p["level"] == "L2" and p["kind"] == "stream"]
        intel = c["vendor"] == "GenuineIntel"
        assert all(p.get(k, False) is intel for p in streams for k in ("arrival", "stores", "hits"))


# --- the CPU file from raw measurements ----------------------------------------------------

def clock_samples(ghz, add_cycles=1.0, addi_per_cycle=1.0, arch="x86_64"):
    """`kvsim-calibrate clock` samples of a core at ``ghz`` (slower samples beside): imul 3
    cycles, register add ``add_cycles``, immediate add ``addi_per_cycle`` per cycle."""
    mul, add = ("imul", "add") if arch == "x86_64" else ("mul", "add")
    lat = {"imul": 3.0, "mul": 3.0, "add": add_cycles}
    ns = {mul: [lat[mul] / ghz * f for f in (1.02, 1.0)],
          "add": [add_cycles / ghz * f for f in (1.0, 1.05)],
          "addi": [1.0 / addi_per_cycle / ghz] * 2}
    if arch == "aarch64":
        ns["add"] = [1.0 / ghz] * 2
        ns["mul"] = [add_cycles / ghz] * 2  # here: the mul chain's cycles
    return {"arch": arch, "ns_per_op": ns}


#: The knees of synthetic_raw's chase curve (its last level: 8 MiB of sysfs's 32 MiB).
FULL_CAPS = (32 * KIB, 1 * MIB, 8 * MIB)


def synthetic_raw(ghz=3.5, walk=90.0, huge=1.0, top=256 * MIB, caps=FULL_CAPS):
    """Raw measurements of a machine whose chases follow the knee model over ``caps`` (DRAM
    140 ns) up to ``top``; returns them and the chase curve."""
    sizes = cal.sweep_sizes(top, 2)
    caps, lats = list(caps), [1.15, 4.0, 16.0, 140.0]
    curve = cal.model_latency(sizes, caps, lats)
    return {
        "sizes": sizes, "clock": clock_samples(ghz),
        "kernel_clock": {"cpu_mhz": [3000.0, 3000.0], "cpufreq_khz": {}, "model_ghz": None},
        "chase": {str(s): [float(v)] * 3 for s, v in zip(sizes, curve, strict=True)},
        "chase_top_4k": [float(curve[-1]) + walk] * 3, "huge_fraction_top": huge,
        "mlp": {str(n): [float(curve[-1]) / min(n, 18)] for n in cal.MLP_CHAINS},
        "bw_gbs": [20.0, 21.0, 19.0], "cpuid": {"x86": False},
        # c_ref's kernels at 2.5 instructions per cycle (slower samples beside)
        "work": {f"{k}/{c}": [cal.work_instructions(k, c) / 2.5 / ghz * f for f in (1.3, 1.0)]
                 for k, c in cal.WORK_POINTS},
    }, curve


def test_build_doc_values_and_provenance():
    raw, curve = synthetic_raw()
    doc = cal.build_doc(raw, LEVELS, ZEN4, quick=True)
    cpu = sim.parse_cpu(tomllib.loads(cal.to_toml(doc)))
    assert cpu.name == "local" and cpu.timing_capable
    assert cpu.freq_ghz == pytest.approx(3.5)
    assert cpu.dram_latency_ns == pytest.approx(curve[-1], abs=0.05)
    assert cpu.dram_bandwidth_gbs == pytest.approx(21.0)
    assert cpu.tlb.walk_latency == round(90.0 * 3.5)
    assert cpu.caches[0].mshrs == 18
    assert [c.latency for c in cpu.caches] == [round(x * 3.5) for x in (1.15, 4.0, 16.0)]
    # L3: fitted 8 MiB of sysfs's 32 MiB -> 8192 sets x 16 ways; L1 and L2 keep sysfs's
    assert [c.size for c in cpu.caches] == [32 * KIB, 1 * MIB, 8 * MIB]
    assert [c.ways for c in cpu.caches] == [x["ways"] for x in LEVELS]
    assert (cpu.rob, cpu.width) == (320, 6)
    for c in doc["cache"]:
        for key in ("size", "latency", "ways"):
            assert c["src"][key].split(":")[0].split(" ")[0] in {"sysfs", "measured"}
    assert doc["core"]["src"]["rob"].startswith("table")
    # walks in flight: the known core's figure, said to come from the table
    assert cpu.tlb.walkers == cal.known_core("AuthenticAMD", 25, 17)["tlb"]["walkers"] > 0
    assert doc["tlb"]["src"]["walkers"].startswith("table (AMD Zen 4)")
    assert doc["meta"]["raw"]["chase_ns"] == raw["chase"]
    assert doc["meta"]["quick"] is True


def test_build_doc_without_huge_pages_or_a_table_entry():
    raw, _ = synthetic_raw(huge=0.0)
    doc = cal.build_doc(raw, LEVELS, {**ZEN4, "vendor": "Unknown"}, quick=False)
    cpu = sim.parse_cpu(tomllib.loads(cal.to_toml(doc)))
    assert not cpu.timing_capable  # no ROB/width: caches only, and the file says so
    assert any("no table entry" in n for n in cpu.notes)
    assert cpu.tlb is None and doc["meta"]["chase_pages"] == "4KiB"


def test_to_toml_round_trips():
    doc = {"name": "x", "f": 1.5, "n": 3, "b": True, "s": 'a "q"', "xs": [1, 2.5],
           "src": {"f": "measured"}, "core": {"rob": 1, "src": {"rob": "table"}},
           "cache": [{"name": "L1D", "size": 4096, "src": {"size": "sysfs"}}],
           "meta": {"nested": {"4096": [1.0, 2.0]}, "t": [{"a": 1}]}}
    assert tomllib.loads(cal.to_toml(doc)) == doc


# --- `local`: the cached file, else the labelled fallback ----------------------------------

@pytest.fixture
def fake_sysfs(tmp_path, monkeypatch):
    root = tmp_path / "sysfs"
    for i, (lvl, typ, size, ways) in enumerate([
        (1, "Data", "48K", 12), (1, "Instruction", "64K", 16),
        (2, "Unified", "2048K", 16), (3, "Unified", "491520K", 16),
    ]):
        d = root / f"index{i}"
        d.mkdir(parents=True)
        for k, v in {"level": lvl, "type": typ, "size": size, "ways_of_associativity": ways,
                     "coherency_line_size": 64}.items():
            (d / k).write_text(f"{v}\n")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("KVSIM_LOCAL_OVERRIDES", raising=False)
    return root


def test_local_without_calibration_is_labelled_fallback(fake_sysfs, tmp_path):
    cpu = local.local_cpu(fake_sysfs)
    assert "NOT calibrated" in cpu.description
    assert "kvsim calibrate" in cpu.notes[0]
    path = cal.cache_path(local.read_sysfs(fake_sysfs))
    assert str(path) in cpu.notes[0] and str(path).startswith(str(tmp_path / "cache"))
    assert [c.size for c in cpu.caches][:2] == [48 * KIB, 2 * MIB]
    assert cpu.caches[2].size == 262144 * 16 * 64  # 491520 sets rounded down to a power of 2
    assert cpu.provenance["calibrated"] is False


def test_local_fallback_for_a_core_not_in_the_table(fake_sysfs, monkeypatch):
    monkeypatch.setattr(cal, "cpu_identity", lambda: {**ZEN4, "vendor": "CentaurHauls"})
    cpu = local.local_cpu(fake_sysfs)
    assert not cpu.timing_capable and "sysfs geometry only" in cpu.description
    assert any("no table entry" in n for n in cpu.notes)
    assert [c.size for c in cpu.caches][:2] == [48 * KIB, 2 * MIB]


def test_local_uses_the_calibrated_file(fake_sysfs):
    levels = local.read_sysfs(fake_sysfs)
    raw, _ = synthetic_raw()
    path = cal.cache_path(levels)
    path.parent.mkdir(parents=True)
    doc = cal.build_doc(raw, levels, cal.cpu_identity(), quick=True)
    doc["selfcheck"] = check.summarise([], [])  # passed: this test is about the lookup
    path.write_text(cal.to_toml(doc))
    cpu = local.local_cpu(fake_sysfs)
    assert cpu.name == "local" and cpu.provenance["calibrated"] is True
    assert cpu.freq_ghz == pytest.approx(3.5) and "calibrated" in cpu.description
    assert cpu.source == str(path)
    # another geometry is another machine: its key differs, so the file is not used
    other = [dict(x, size=x["size"] * 2) for x in levels]
    assert cal.cache_path(other) != path


def test_fallback_message_on_a_terminal_only(fake_sysfs, monkeypatch):
    class Tty(io.StringIO):
        def isatty(self):
            return True

    local._announced.clear()
    tty = Tty()
    monkeypatch.setattr("sys.stderr", tty)
    local.local_cpu(fake_sysfs)
    local.local_cpu(fake_sysfs)
    out = tty.getvalue()
    assert out.count("\n") == 1 and "not calibrated" in out and "kvsim calibrate" in out
    local._announced.clear()
    pipe = io.StringIO()
    monkeypatch.setattr("sys.stderr", pipe)
    local.local_cpu(fake_sysfs)
    assert pipe.getvalue() == ""


def test_local_overrides(fake_sysfs):
    over = local.local_cpu(fake_sysfs, {"l3_effective": "8MiB", "dram_latency_ns": 120,
                                        "l2_latency": 30})
    assert over.caches[2].size == 8 * MIB and over.dram_latency_ns == 120
    assert over.caches[1].latency == 30
    both = local.apply_overrides(sim.load_cpu("epyc-7713"), {"walkers": 3, "walk_latency_ns": 50})
    assert both.tlb.walkers == 3 and both.tlb.walk_latency == round(50 * both.freq_ghz)
    with pytest.raises(sim.ConfigError, match="unknown local override"):
        local.local_cpu(fake_sysfs, {"l4_latency": 3})


# --- the command, end to end at a tiny scale -----------------------------------------------

def test_calibrate_cli_tiny(tmp_path, monkeypatch, capsys):
    from kvsim.experiments.cli import main
    from kvsim.sim import calibrate_loop

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    # a tenth of the server loop's PINGs: each at depth 1 is a round trip between two
    # processes, whose wall time grows with the machine's load (the figures are not checked)
    monkeypatch.setitem(calibrate_loop.REQUESTS, "quick",
                        tuple(n // 10 for n in calibrate_loop.REQUESTS["quick"]))
    # and of the tick test's round trips and the traced PINGs, where the split is biased
    monkeypatch.setattr(calibrate_loop, "BIAS_ITERS", calibrate_loop.BIAS_ITERS // 10)
    monkeypatch.setattr(calibrate_loop, "TRACED_REQUESTS", {1: 2000, 10: 5000})
    # and the hierarchy fit's candidates and loads per chase (the fit's own tests search
    # them all): what this test checks is the command, not the fit
    from kvsim.sim import calibrate_fit

    monkeypatch.setattr(calibrate_fit, "STEPS", 5000)
    monkeypatch.setattr(calibrate_fit, "PRIVATE_FRACTIONS", (0.5, 1.0))
    monkeypatch.setattr(calibrate_fit, "LLC_PER_OCTAVE", 1)
    out = tmp_path / "cpu.toml"
    rc = main(["calibrate", "--quick", "--max-size", "4MiB", "--rounds", "1", "-o", str(out)])
    cpu = sim.load_cpu(str(out))  # written either way, its self-check in it
    assert cpu.name == "local" and len(cpu.caches) == len(local.read_sysfs())
    doc = tomllib.loads(out.read_text())
    assert doc["meta"]["raw"]["sizes"][-1] == 4 * MIB
    assert doc["meta"]["provenance"]["machine"]["load_average_1m"] is not None
    assert not (tmp_path / "cache").exists(), "-o writes only there"
    loop = doc["meta"].get("syscall_loop")  # the server loop's method, where it was measured
    if loop is not None:
        assert loop["method"] == ("cpu" if loop["bias"]["biased"] else "ticks")
        assert f"method {loop['method']}" in doc["syscall"]["src"]["write_ns"]
        assert doc["syscall"]["write_ns"] > loop["residue_per_write_ns"]
    # the exit status is the self-check's; a failure is one line naming the check
    sc = doc["selfcheck"]
    assert sc["status"] in ("passed", "failed") and sc["replay"]
    assert rc == (0 if sc["status"] == "passed" else 1)
    err = capsys.readouterr().err.splitlines()
    errors = [x for x in err if x.startswith("kvsim: error")]
    assert errors == ([] if rc == 0 else [errors[0]])
    if rc:
        assert sc["failed"][0] in errors[0]
    # without -o it goes to the cache, where `local` finds it; a failed one goes beside it,
    # and `local` stays the labelled fallback, saying why. Derived again from the file above
    # (--from-raw, the same file): what is written where does not depend on measuring again
    rc2 = main(["calibrate", "--from-raw", str(out)])
    assert rc2 == rc
    rc = rc2
    cached = cal.cache_path(local.read_sysfs())
    assert cached.is_file() == (rc == 0) and cal.failed_path(cached).is_file() == (rc == 1)
    cpu = sim.load_cpu("local")
    assert cpu.provenance["calibrated"] is (rc == 0)
    if rc:
        assert "NOT calibrated" in cpu.description
        assert any("is not used: it failed its self-check" in n for n in cpu.notes)
    assert "wrote" in capsys.readouterr().out


def test_calibrate_cli_refuses_a_tiny_sweep(tmp_path, capsys):
    from kvsim.experiments.cli import main

    out = tmp_path / "cpu.toml"
    assert main(["calibrate", "--max-size", "8KiB", "-o", str(out)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "too small" in err and not out.exists()


def test_sweep_sizes():
    s = cal.sweep_sizes(1024 * MIB, 4)
    assert s[0] == 4 * KIB and s[-1] == 1024 * MIB and len(s) == 4 * 18 + 1
    assert all(x % 64 == 0 for x in s) and s == sorted(set(s))
    assert math.isclose(s[1] / s[0], 2 ** 0.25, rel_tol=0.01)
    c = cal.sweep_sizes(1024 * MIB, 4, coarse_above=64 * MIB)
    assert c[-1] == 1024 * MIB and [x for x in c if x <= 64 * MIB] == [x for x in s
                                                                       if x <= 64 * MIB]
    above = [x for x in c if x > 64 * MIB]
    assert len(above) == 8 and all(math.isclose(b / a, 2 ** 0.5, rel_tol=0.01)
                                   for a, b in zip(above, above[1:], strict=False))


def test_a_simulated_chase_costs_what_the_file_says():
    """A dependent chase over 1 GiB simulated on a calibrated file costs its DRAM latency
    with 2 MiB pages, plus its measured walk with 4 KiB pages (what the chases measured)."""
    from kvsim import traces

    raw, curve = synthetic_raw(walk=90.0)
    cpu = sim.parse_cpu(tomllib.loads(cal.to_toml(cal.build_doc(raw, LEVELS, ZEN4,
                                                                quick=True))))
    n = 50_000
    rng = np.random.default_rng(3)
    tr = np.zeros(n, dtype=traces.RECORD_DTYPE)
    tr["kind"] = traces.KIND_NAMES.index("load")
    tr["addr"] = 1 << 40 | rng.choice((1 << 30) // 64, size=n, replace=False) * 64
    tr["size"] = 8
    tr["dep"][1:] = 1
    for page, want in ((2 * MIB, curve[-1]), (4096, curve[-1] + 90.0)):
        res = sim.simulate(tr, cpu, page_size=page)
        assert res["cycles"] / n / cpu.freq_ghz == pytest.approx(want, rel=0.05), page


def _translation_truth(levels, top, caps):
    """Synthetic raw measurements (knees at ``caps``; sysfs ``levels``) up to ``top``, the
    CPU file derived from
    them, and the 4 KiB-page chases it predicts with a DRAM latency of 150 ns and a walk of
    200 cycles reading two lines (a guest's): what `kvsim calibrate` would measure there."""
    from dataclasses import replace

    from kvsim.sim import micro

    raw, _ = synthetic_raw(top=top, caps=caps)
    cpu = sim.parse_cpu(cal.build_doc(raw, levels, ZEN4, quick=True))
    truth = cpu.with_changes(dram_latency_ns=150.0,
                             tlb=replace(cpu.tlb, walk_latency=200, walk_reads=2))
    sizes = cal.translation_sizes(top)
    meas = {s: micro.predict(truth, s, 1, 20_000, 4096, False)["ns_per_load"] for s in sizes}
    return raw, cpu, meas


def test_fit_translation_recovers_dram_and_walk():
    """4 KiB-page chases simulated on a known DRAM latency and walk give them back: the fit
    inverts the model's own prediction of calibrate.c's chase."""
    _, cpu, meas = _translation_truth(LEVELS, 256 * MIB, FULL_CAPS)
    sizes = sorted(meas)
    # the smaller set's page table is better cached: its walks cost less
    assert meas[sizes[0]] < meas[sizes[1]] - 20
    fit = cal.fit_translation(cpu, meas, 2)
    assert fit["dram_latency_ns"] == pytest.approx(150.0, rel=0.01)
    assert fit["walk_latency"] == pytest.approx(200, abs=4)
    assert len(sizes) == 5 and max(map(abs, fit["residual_rel"])) < 0.01
    # 3 % noise on each point: the fit over five sizes stays near, its residuals show it
    rng = np.random.default_rng(5)
    noisy = {s: v * (1 + rng.uniform(-0.03, 0.03)) for s, v in meas.items()}
    nfit = cal.fit_translation(cpu, noisy, 2)
    assert nfit["dram_latency_ns"] == pytest.approx(150.0, rel=0.08)
    assert nfit["residual_rel"] == pytest.approx(
        [p / noisy[s] - 1 for s, p in zip(sizes, nfit["predicted_ns"], strict=True)], abs=1e-3)
    assert max(map(abs, nfit["residual_rel"])) < 0.06


def _check_file_carries_the_translation_fit(levels, top, caps, dram_low):
    """The CPU file built from raw measurements with 4 KiB-page chases carries their
    translation fit, with its provenance; its DRAM is the hierarchy fit's over every chase
    (sim/calibrate_fit.py), from ``dram_low`` up to the 4 KiB-page chases' 150 ns."""
    raw, _, meas = _translation_truth(levels, top, caps)
    raw["chase_4k"] = {str(s): [v] * 3 for s, v in meas.items()}
    raw["hypervisor"] = True
    doc = cal.build_doc(raw, levels, ZEN4, quick=True)
    got = sim.parse_cpu(tomllib.loads(cal.to_toml(doc)))
    tf = doc["meta"]["raw"]["translation_fit"]
    assert tf["dram_latency_ns"] == pytest.approx(150.0, rel=0.01)
    assert tf["walk_latency"] == pytest.approx(200, abs=4)
    assert dram_low <= got.dram_latency_ns <= 151.5
    assert doc["meta"]["fit"]["latency_ns"][-1] == got.dram_latency_ns
    assert "calibrate_fit" in doc["dram"]["src"]["latency_ns"]
    assert got.tlb.walk_reads == 2 and got.tlb.walk_latency == pytest.approx(200, abs=4)
    assert "nested paging" in doc["tlb"]["src"]["walk_reads"]
    assert doc["meta"]["raw"]["translation_fit"]["sizes"] == sorted(meas)


def test_the_cpu_file_carries_the_translation_fit():
    """A machine with small caches (2 MiB last level) chased up to 64 MiB: every chase's
    simulation warms the caches four times round (sim/calibrate_check.py steady_warmup),
    so the hierarchy fit costs about a quarter of the 8 MiB last level's below. Its DRAM lies
    between 0.9x the 2 MiB-page curve's 140 ns and the 4 KiB-page chases' 150 ns."""
    caps = (32 * KIB, 256 * KIB, 2 * MIB)
    levels = [dict(x, size=c) for x, c in zip(LEVELS, caps, strict=True)]
    _check_file_carries_the_translation_fit(levels, 64 * MIB, caps, 0.9 * 140.0)


@pytest.mark.slow
def test_the_cpu_file_carries_the_translation_fit_at_full_scale():
    """As above on an 8 MiB last level chased up to 256 MiB (`--quick`'s largest set): the
    file's DRAM is near both, the 2 MiB-page curve's 140 ns (at 256 MiB) and the 4 KiB-page
    chases' 150 ns."""
    _check_file_carries_the_translation_fit(LEVELS, 256 * MIB, FULL_CAPS, 135.0)


def test_from_raw_derives_the_same_file(tmp_path, monkeypatch):
    """--from-raw: a file written from raw measurements, derived again from its [meta.raw]
    without measuring, gives the same CPU."""
    from kvsim.sim import local

    raw, _ = synthetic_raw()
    # derived on another machine: the measured one's geometry and identity are the file's
    monkeypatch.setattr(cal, "cpu_identity", lambda: {**ZEN4, "model_name": "elsewhere"})
    monkeypatch.setattr(local, "read_sysfs",
                        lambda: [dict(x, size=2 * x["size"]) for x in LEVELS])
    monkeypatch.setattr(cal, "measure", lambda *a, **k: pytest.fail("measured"))
    src = tmp_path / "first.toml"
    first = cal.build_doc(raw, LEVELS, ZEN4, quick=True, machine={"date_utc": "then"})
    src.write_text(cal.to_toml(first))
    out = cal.calibrate(tmp_path / "again.toml", from_raw=src)
    a, b = sim.load_cpu(str(src)), sim.load_cpu(str(out))
    assert (a.caches, a.dram_latency_ns, a.tlb, a.freq_ghz) == \
        (b.caches, b.dram_latency_ns, b.tlb, b.freq_ghz)
    again = tomllib.loads(out.read_text())
    assert again["meta"]["machine_key"] == first["meta"]["machine_key"]
    assert again["meta"]["measured_provenance"] == {"date_utc": "then"}
    assert again["selfcheck"]["status"] in ("passed", "failed")


# --- robustness under load: fastest sample, monotone curve, time budget --------------------

@settings(max_examples=40, deadline=None)
@given(hierarchies(), st.floats(0.0, 0.6), st.integers(2, 4))
def test_fit_levels_holds_under_interference(h, busy, repeats):
    """Interference only adds time: each sample is the curve times (1 + up to 2 %) and, with
    probability ``busy``, a spike of 20-200 %. The fastest of a few repeats, fitted, gives
    back the hierarchy whenever each point kept at least one quiet sample, which is where
    the median of the same samples may already be a spike."""
    caps, lats, _, seed = h
    sizes = cal.sweep_sizes(1024 * MIB, 4)
    rng = np.random.default_rng(seed)
    true = cal.model_latency(sizes, caps, lats)
    spikes = rng.random((repeats, len(sizes))) < busy
    samples = true * (1 + rng.uniform(0, 0.02, (repeats, len(sizes)))
                      + spikes * rng.uniform(0.2, 2.0, (repeats, len(sizes))))
    quiet = ~spikes.all(axis=0)
    # a point with only spiked samples may sit above the curve; the monotone pass lowers it
    # to a larger set's when that one is quiet, so only the largest sets must be quiet
    if not quiet.all() and not quiet[-3:].all():
        return
    fit = cal.fit_levels(sizes, [cal.fastest(col) for col in samples.T], len(caps))
    if quiet.all():
        for got, want in zip(fit["latency_ns"], lats, strict=True):
            assert got == pytest.approx(want, rel=0.12)
        for got, want in zip(fit["capacity"], caps, strict=True):
            assert got == pytest.approx(want, rel=0.2)
    assert all(a < b for a, b in zip(fit["capacity"], fit["capacity"][1:], strict=False))


@given(st.lists(st.floats(0.5, 500.0), min_size=1, max_size=40))
def test_monotone_is_the_largest_non_decreasing_curve_below(ys):
    m = cal.monotone(ys)
    assert all(a <= b for a, b in zip(m, m[1:], strict=False))
    assert all(a <= y for a, y in zip(m, ys, strict=True))
    # nothing lowered more than it must: each point is the minimum of itself and what follows
    assert all(a == min(ys[i:]) for i, a in enumerate(m))


def test_a_spike_moves_no_knee():
    sizes = cal.sweep_sizes(512 * MIB, 4)
    caps, lats = [32 * KIB, 1 * MIB, 32 * MIB], [1.1, 3.9, 16.0, 120.0]
    clean = cal.model_latency(sizes, caps, lats)
    spiked = clean.copy()
    spiked[sizes.index(256 * KIB)] *= 3  # one busy sample between L1 and L2's knees
    assert cal.fit_levels(sizes, spiked, 3)["capacity"] == \
        pytest.approx(cal.fit_levels(sizes, clean, 3)["capacity"], rel=1e-9)


def test_measure_stops_at_its_time_budget(monkeypatch):
    """Rounds stop when the next one would pass the budget, but not before the plan's
    fewest (the self-check's spread between rounds needs them); every round's samples are
    kept and the file says how many rounds ran and how many repeats each has."""
    calls = []

    def fake(cmd, *args):
        calls.append(cmd)
        if cmd == "cpuid":
            return {"x86": False}
        if cmd == "clock":
            return {"ghz": [3.0]}
        if cmd == "work":
            return {"ns_per_call": [10.0]}
        if cmd == "chase":
            return {"points": [{"size": int(x), "ns": [5.0], "huge_fraction": 1.0}
                               for x in args[3:]]}
        if cmd == "mlp":
            return {"points": [{"chains": n, "ns_per_load": [1.0]} for n in args[4:]]}
        return {"gbs": [10.0]}

    now = [0.0]

    def clock():  # every microbenchmark run takes a second
        return now[0]

    def tick(*a):
        now[0] += 1.0
        return fake(*a)

    monkeypatch.setattr(cal, "run_bench", tick)
    per = 4 + len(cal.WORK_POINTS) + 1  # seconds a round takes: clock, work, 2 chases, mlp, bw
    # rounds start at 0 and per after the first run's: with 2.5 rounds' budget no third one
    # starts (its start plus the longest round so far, 3 per, passes the budget)
    plan = dict(cal.PLANS["quick"], max_bytes=4 * MIB, rounds=10, budget_s=2.5 * per,
                min_rounds=1)
    raw = cal.measure(plan, clock=clock)
    per_round = calls.count("bw") and len(calls[1:]) // calls.count("bw")
    assert per_round == per
    assert raw["rounds_done"] == 2 and calls.count("clock") == 2
    assert len(raw["work"]["crc64/1"]) == 2 and raw["elapsed_s"] == 2.0 * per
    assert raw["repeats"] == plan["repeats"]
    # the quick plan's fewest rounds run even when the first already passes the budget
    calls.clear()
    raw = cal.measure(dict(plan, budget_s=5.0, min_rounds=cal.PLANS["quick"]["min_rounds"]),
                      clock=clock)
    assert raw["rounds_done"] == calls.count("clock") == cal.PLANS["quick"]["min_rounds"] == 3


# --- non-memory work: c_ref's kernels against the traces' instruction counts ---------------

def _c_source(path):
    from pathlib import Path

    return (Path(__file__).resolve().parents[2] / path).read_text()


def _c_define(path, name):
    import re

    m = re.search(rf"#define {name}\s+\(?(\d+)u?\b", _c_source(path))
    assert m, f"{name} not in {path}"
    return int(m.group(1))


def test_work_instruction_counts_are_c_refs():
    import re

    for n in ("CALL", "BYTE_HEAD", "BODY", "BYTE", "BYTES_ENTRY", "WORD", "WORDS_ENTRY",
              "STEP2", "STEP3", "COMBINE", "COMBINE_BIT", "MUL", "DUAL_CUTOFF"):
        assert getattr(cal, f"CRC64_{n}") == _c_define("c_ref/crc64.c", f"CRC64_{n}"), n
    m = re.search(r"#define CRC64_TRI_CUTOFF \((\d+) \* 1024\)", _c_source("c_ref/crc64.c"))
    assert m and int(m.group(1)) * 1024 == cal.CRC64_TRI_CUTOFF
    for v in ("", "NOCASE_"):
        for n in ("CALL", "WORDS_ENTRY", "WORD", "BYTE_FIRST", "BYTE"):
            name = f"SIPHASH_{v}{n}"
            assert getattr(cal, name) == _c_define("c_ref/siphash.c", name), name
    assert _c_define("sim/_calibrate/calibrate.c", "WORK_BUF") * 1024 == cal.WORK_BUF


def test_work_instructions_follow_each_pieces_alignment():
    # 8-byte pieces from a 64-byte aligned buffer: one aligned word per call
    word = cal.CRC64_WORD + cal.CRC64_WORDS_ENTRY
    assert cal.work_instructions("crc64", 8) == cal.CRC64_CALL + cal.CRC64_BODY + word
    # 1-byte pieces: at offset 0 mod 8 a byte after the (empty) words, else the call ends
    # in the head
    tail = cal.CRC64_CALL + cal.CRC64_BODY + cal.CRC64_BYTE + cal.CRC64_BYTES_ENTRY
    assert cal.work_instructions("crc64", 1) == pytest.approx(
        (tail + 7 * (cal.CRC64_CALL + cal.CRC64_BYTE_HEAD)) / 8)
    # 12-byte pieces alternate between offsets 0 mod 8 and 4 mod 8
    body = cal.CRC64_CALL + cal.CRC64_BODY
    a = body + word + 4 * cal.CRC64_BYTE + cal.CRC64_BYTES_ENTRY  # word, 4 bytes
    b = body + 4 * cal.CRC64_BYTE_HEAD + word  # 4 bytes, word
    assert cal.work_instructions("crc64", 12) == pytest.approx((a + b) / 2, rel=1e-3)
    # past the cutoffs: the streams' steps and the combines
    assert cal.crc64_cost(0, 2048) == (body + 128 * cal.CRC64_STEP2
                                       + cal._crc64_combine_cost(1024))
    assert cal.crc64_cost(0, 3 * 8192) == (body + 1024 * cal.CRC64_STEP3
                                           + 2 * cal._crc64_combine_cost(8192))
    assert cal.crc64_cost(3, 0) == cal.CRC64_CALL
    # SipHash: two words, no tail; 17 bytes: two words and the tail's first byte
    two = cal.SIPHASH_CALL + cal.SIPHASH_WORDS_ENTRY + 2 * cal.SIPHASH_WORD
    assert cal.work_instructions("siphash", 16) == two
    assert cal.siphash_cost(17) == two + cal.SIPHASH_BYTE_FIRST
    assert cal.siphash_cost(3, nocase=True) == (cal.SIPHASH_NOCASE_CALL
                                                + cal.SIPHASH_NOCASE_BYTE_FIRST
                                                + 2 * cal.SIPHASH_NOCASE_BYTE)


def test_siphash_cost_is_c_refs_function():
    """siphash_cost against c_ref's ksSiphashCost and ksSiphashNocaseCost themselves
    (`kvsim-calibrate sipcost` prints them per length) at every length 0-300 and at random
    lengths to 1 MiB."""
    import random

    from kvsim import artifacts

    if not artifacts.path(artifacts.CALIBRATE_CLI).exists():
        pytest.skip("kvsim-calibrate not built")
    rng = random.Random(42)
    lens = [*range(301), *(rng.randrange(1 << 20) for _ in range(200))]
    for variant in ("case", "nocase"):
        out = cal.run_bench("sipcost", 0, variant, *lens)
        assert [p[0] for p in out["points"]] == lens
        for n, c_cost in out["points"]:
            assert cal.siphash_cost(n, nocase=variant == "nocase") == c_cost, (variant, n)


def test_crc64_cost_is_c_refs_function():
    """crc64_cost against c_ref's ksCrc64Cost itself (`kvsim-calibrate crccost` prints it
    per point) at every length 0-80 at every offset mod 8 and at random lengths and offsets
    to 300 KiB: every path, cutoff and combine length."""
    import random

    from kvsim import artifacts

    if not artifacts.path(artifacts.CALIBRATE_CLI).exists():
        pytest.skip("kvsim-calibrate not built")
    rng = random.Random(42)
    points = [(n, o) for n in range(81) for o in range(8)]
    points += [(c + d, rng.randrange(64)) for c in (cal.CRC64_DUAL_CUTOFF, cal.CRC64_TRI_CUTOFF)
               for d in range(-9, 30)]
    points += [(rng.randrange(300 * 1024), rng.randrange(64)) for _ in range(300)]
    out = cal.run_bench("crccost", 1, *(f"{n}@{o}" for n, o in points))
    assert [p[:2] for p in out["points"]] == [list(p) for p in points]
    for n, o, c_cost in out["points"]:
        assert cal.crc64_cost(o, n) == c_cost, (n, o)
    for (n, o, c_cost), kinds in zip(out["points"], out["kinds"], strict=True):
        by = cal.crc64_cost_by_kind(o, n)
        assert [by[k] for k in cal.CRC64_WORK_KINDS] == kinds, (n, o)
        assert sum(kinds) == c_cost
        # one stream has no streams' steps and no join; the join's bits are the second
        # stream's length's set bits, which the offset moves
        rest = n - min((8 - o % 8) % 8, n)
        assert (kinds[1] == 0) == (kinds[2] == 0) == (rest <= cal.CRC64_DUAL_CUTOFF)


def test_sustained_ipc_is_measured_and_recorded_not_applied():
    raw, _ = synthetic_raw()
    doc = cal.build_doc(raw, LEVELS, ZEN4, quick=True)
    cpu = sim.parse_cpu(tomllib.loads(cal.to_toml(doc)))
    work = doc["meta"]["raw"]["work_ipc"]
    assert work["ipc"] == pytest.approx(2.5, abs=0.01)  # the fastest samples
    assert set(work["points"]) == {f"{k}/{c}" for k, c in cal.WORK_POINTS}
    assert cpu.sustained_ipc is None and "sustained_ipc" not in doc["core"]
    assert any("sustained IPC" in n and "2.50" in n for n in cpu.notes)
