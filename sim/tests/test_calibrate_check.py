"""A calibration that cannot lie: the clock's chains and the kernel's range, each
plausibility check, the replay of the microbenchmarks, quick against full, and `local`
refusing a file that failed (sim/calibrate_check.py)."""

from __future__ import annotations

import tomllib

import pytest
from test_calibrate import LEVELS, MIB, ZEN4, clock_samples, fake_sysfs, synthetic_raw  # noqa: F401

from kvsim import sim
from kvsim.sim import calibrate as cal
from kvsim.sim import calibrate_check as check
from kvsim.sim import local
from kvsim.sim.config import fmt_size

KERNEL_3GHZ = {"cpu_mhz": [3000.0], "cpufreq_khz": {}, "model_ghz": None}


def by_name(checks):
    return {c["check"]: c for c in checks}


# --- the clock ----------------------------------------------------------------------------

def test_the_clock_is_the_multiply_chains():
    est = check.clock_estimate(clock_samples(3.5, addi_per_cycle=5.0))
    assert est["ghz"] == pytest.approx(3.5) and est["primary"] == "imul"
    assert est["cross_cycles"] == pytest.approx(1.0) and abs(est["cross_error"]) < 1e-9
    # the folding core's immediate adds are seen, and never set the clock
    assert est["addi_per_cycle"] == pytest.approx(5.0)
    assert all(c["ok"] for c in check.clock_checks(est, KERNEL_3GHZ))


def test_aarch64_reads_the_multiply_latency_off_the_add_chain():
    est = check.clock_estimate(clock_samples(2.6, add_cycles=4.0, arch="aarch64"))
    assert est["ghz"] == pytest.approx(2.6) and est["cross_latency"] == 4
    assert by_name(check.clock_checks(est, {"cpu_mhz": [2600.0]}))["clock.method"]["ok"]
    odd = check.clock_estimate(clock_samples(2.6, add_cycles=3.5, arch="aarch64"))
    assert not by_name(check.clock_checks(odd, {"cpu_mhz": [2600.0]}))["clock.method"]["ok"]


def test_a_folding_probe_is_refused():
    """The chains of a core that runs 'adds' five per cycle: the register add chain
    disagrees with the multiplies, and a clock read off it is outside the kernel's range."""
    folding = check.clock_estimate(clock_samples(3.0, add_cycles=0.2))
    got = by_name(check.clock_checks(folding, KERNEL_3GHZ))
    assert not got["clock.method"]["ok"] and "0.20 cycles" in got["clock.method"]["detail"]
    # a clock five times the kernel's (as the add chain would give) fails the kernel check
    fast = check.clock_estimate(clock_samples(15.0))
    got = by_name(check.clock_checks(fast, KERNEL_3GHZ))
    assert got["clock.method"]["ok"] and not got["clock.kernel"]["ok"]
    assert "15.000 GHz against 1.50-6.00 GHz" in got["clock.kernel"]["detail"]


def test_the_old_add_chain_clock_fails_the_self_check():
    """A file of the old method (an add-immediate chain read as one add per cycle, as the
    15 GHz calibration of an Intel core) derives again only marked failed."""
    raw, _ = synthetic_raw()
    del raw["clock"]
    raw["clock_ghz"] = [15.055, 14.9]
    doc = cal.build_doc(raw, LEVELS, ZEN4, quick=True)
    assert doc["freq_ghz"] == 15.055 and "untrusted" in doc["src"]["freq_ghz"]
    sc = cal.run_self_check(doc, raw, LEVELS)
    assert sc["status"] == "failed"
    assert sc["failed"][0].startswith("clock: measured by a chain of adds of an immediate")
    assert any("15.055 GHz against" in f for f in sc["failed"])


def test_a_machine_without_a_known_chain_has_no_clock():
    est = check.clock_estimate({"arch": "other", "ns_per_op": {}})
    assert est["ghz"] is None
    [c] = check.clock_checks(est, KERNEL_3GHZ)
    assert not c["ok"] and "no chain of known latency" in c["detail"]


def test_kernel_clock_and_band(tmp_path):
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nmodel name\t: Some CPU @ 2.10GHz\ncpu MHz\t\t: 2100.5\n\n"
                    "processor\t: 1\ncpu MHz\t\t: 3400.0\n")
    freq = tmp_path / "cpufreq"
    k = check.kernel_clock(info, freq)
    assert k["cpu_mhz"] == [2100.5, 3400.0] and k["model_ghz"] == 2.1 and not k["cpufreq_khz"]
    lo, hi, why = check.kernel_band(k)
    assert (lo, hi) == pytest.approx((1.7, 6.8)) and "nominal 3.400" in why
    freq.mkdir()
    (freq / "cpuinfo_min_freq").write_text("800000\n")
    (freq / "cpuinfo_max_freq").write_text("4000000\n")
    lo, hi, why = check.kernel_band(check.kernel_clock(info, freq))
    assert (lo, hi) == pytest.approx((0.76, 4.2)) and why.startswith("cpufreq")
    assert check.kernel_band({}) == (*check.ABSOLUTE_GHZ, check.kernel_band({})[2])


# --- plausibility -------------------------------------------------------------------------

def _doc(**fit_changes):
    raw, _ = synthetic_raw()
    doc = cal.build_doc(raw, LEVELS, ZEN4, quick=True)
    doc["meta"]["fit"] = dict(doc["meta"]["fit"], **fit_changes)
    return doc


def _plaus(doc):
    return by_name(check.plausibility(doc, LEVELS, doc["meta"]["fit"],
                                      doc["meta"]["raw"]["work_ipc"]))


def test_a_plausible_file_passes_every_check():
    got = _plaus(_doc())
    assert all(c["ok"] for c in got.values()), [c for c in got.values() if not c["ok"]]
    assert set(got) >= {"l1.latency", "order.L2", "order.L3", "order.DRAM", "capacity.L1D",
                        "capacity.L2", "capacity.L3", "dram.latency", "dram.over_last",
                        "work.ipc"}


def test_an_l1_of_25_cycles_is_implausible():
    got = _plaus(_doc(latency_ns=[25 / 3.5, 30.0, 60.0, 140.0]))
    assert not got["l1.latency"]["ok"] and "25.0 cycles" in got["l1.latency"]["detail"]


def test_a_level_faster_than_the_one_below_is_implausible():
    got = _plaus(_doc(latency_ns=[1.15, 20.0, 16.0, 140.0]))
    assert got["order.L2"]["ok"] and not got["order.L3"]["ok"]
    doc = _doc()
    doc["dram"]["latency_ns"] = 10.0
    got = _plaus(doc)
    assert not got["order.DRAM"]["ok"] and not got["dram.latency"]["ok"]


def test_dram_near_the_chase_curves_last_level_is_implausible():
    """DRAM above the 40 ns floor but below DRAM_OVER_LAST times the last level the chase
    curve shows (the knee fit's) is that level's plateau read as memory: refused; the same
    DRAM beside a faster last level passes."""
    doc = _doc()
    knee = doc["meta"]["raw"].get("knee_fit") or doc["meta"]["fit"]
    knee["latency_ns"] = [1.15, 4.0, 40.0, 160.0]
    assert check.knee_last_ns(doc) == 40.0
    doc["dram"]["latency_ns"] = 48.0
    got = _plaus(doc)
    assert got["dram.latency"]["ok"] and got["order.DRAM"]["ok"]
    assert not got["dram.over_last"]["ok"] and "1.20x" in got["dram.over_last"]["detail"]
    doc["dram"]["latency_ns"] = 40.0 * check.DRAM_OVER_LAST + 1.0
    assert _plaus(doc)["dram.over_last"]["ok"]
    knee["latency_ns"] = [1.15, 4.0, 16.0, 160.0]
    doc["dram"]["latency_ns"] = 48.0
    assert _plaus(doc)["dram.over_last"]["ok"]
    assert check.dram_floor_ns(None) == check.DRAM_NS[0] == check.dram_floor_ns(10.0)
    # a DRAM held at the floor (the fit's) and written at the file's 0.1 ns passes
    doc["dram"]["latency_ns"] = round(check.dram_floor_ns(52.4999), 1)
    knee["latency_ns"] = [1.15, 4.0, 52.4999, 160.0]
    assert _plaus(doc)["dram.over_last"]["ok"]


def test_a_private_level_far_from_its_sysfs_size_is_implausible():
    doc = _doc()
    caps = list(doc["meta"]["fit"]["capacity"])
    got = _plaus(_doc(capacity=[caps[0] / 4, caps[1], caps[2]]))
    assert not got["capacity.L1D"]["ok"] and got["capacity.L2"]["ok"]
    got = _plaus(_doc(capacity=[caps[0], caps[1], 4 * LEVELS[2]["size"]]))
    assert not got["capacity.L3"]["ok"]


def test_work_faster_than_the_width_is_implausible():
    doc = _doc()
    pts = doc["meta"]["raw"]["work_ipc"]["points"]
    next(iter(pts.values()))["ipc"] = 7.5  # more than Zen 4's 6 per cycle
    assert not _plaus(doc)["work.ipc"]["ok"]


def test_work_below_its_floor_is_implausible_and_the_joins_floor_is_lower():
    # a CRC step at 0.4 per cycle is a broken clock; the join of the CRC's streams, which
    # branches on random bits, runs there on a working core (finding 30), not at 0.05
    doc = _doc()
    pts = doc["meta"]["raw"]["work_ipc"]["points"]
    ok = dict(next(iter(pts.values())))
    pts["crc64combine/2040"] = dict(ok, ipc=0.36)
    assert _plaus(doc)["work.ipc"]["ok"]
    pts["crc64combine/2040"]["ipc"] = 0.05
    got = _plaus(doc)["work.ipc"]
    assert not got["ok"] and "crc64combine/2040" in got["detail"]
    pts["crc64combine/2040"]["ipc"] = 0.36
    other = next(k for k in pts if not k.startswith("crc64combine/"))
    pts[other]["ipc"] = 0.4
    got = _plaus(doc)["work.ipc"]
    assert not got["ok"] and other in got["detail"]


# --- the replay ---------------------------------------------------------------------------

def _predicted_raw(raw, cpu):
    """``raw`` with every chase and parallel chase at the model's own prediction."""
    rows = check.replay(cpu, raw, steps=4000)
    new = dict(raw, chase=dict(raw["chase"]), chase_4k=dict(raw.get("chase_4k") or {}),
               mlp=dict(raw["mlp"]))
    for r in rows:
        kind, *rest = r["point"].split()
        if kind == "chase":
            size = next(s for s in raw["sizes"] + [int(k) for k in new["chase_4k"]]
                        if fmt_size(s) == rest[0])
            table = new["chase"] if rest[1] != "4K" else new["chase_4k"]
            table[str(size)] = [r["predicted_ns"]]
        elif kind == "mlp":
            new["mlp"][rest[1][1:]] = [r["predicted_ns"]]
    return new


def test_the_replay_passes_a_machine_the_file_describes_and_names_the_point_it_misses():
    raw, _ = synthetic_raw()
    raw["sizes"] = raw["sizes"][::3]
    raw["mlp"] = {k: v for k, v in raw["mlp"].items() if k in ("1", "4", "16")}
    raw["work"] = {}
    doc = cal.build_doc(raw, LEVELS, ZEN4, quick=True)
    cpu = sim.parse_cpu(tomllib.loads(cal.to_toml(doc)))
    same = _predicted_raw(raw, cpu)
    rows = check.replay(cpu, same, steps=4000)
    [ok] = check.replay_checks(rows)
    assert ok["ok"] and all(r["ratio"] == pytest.approx(1.0, abs=0.002) for r in rows)
    # one point 30 % slower natively than the file says: refused, that point named
    off = dict(same, chase=dict(same["chase"]))
    mid = str(raw["sizes"][len(raw["sizes"]) // 2])
    off["chase"][mid] = [v * 1.3 for v in same["chase"][mid]]
    [bad] = check.replay_checks(check.replay(cpu, off, steps=4000))
    assert not bad["ok"] and f"chase {fmt_size(int(mid))} 2048K" in bad["detail"]
    assert "1 of" in bad["detail"] and "(0.77x)" in bad["detail"]


def test_a_file_with_a_wrong_last_level_or_walk_is_refused():
    """The machine is the file (its chases at the file's own prediction, 4 KiB-page chases
    past the TLBs' reach included); a file that gives it a quarter of its last level, or
    walks that cost 300 cycles more, fails the replay at the points that show it."""
    raw, _ = synthetic_raw()
    raw["sizes"] = raw["sizes"][::2]
    raw["mlp"] = {k: v for k, v in raw["mlp"].items() if k in ("1", "16")}
    raw["work"] = {}
    doc = cal.build_doc(raw, LEVELS, ZEN4, quick=True)
    raw["chase_4k"] = {str(16 * MIB): [1.0], str(128 * MIB): [1.0]}
    cpu = sim.parse_cpu(tomllib.loads(cal.to_toml(doc)))
    same = _predicted_raw(raw, cpu)
    assert check.replay_checks(check.replay(cpu, same, steps=4000))[0]["ok"]
    l3 = [c for c in doc["cache"] if c["name"] == "L3"][0]
    small = tomllib.loads(cal.to_toml(doc))
    [c for c in small["cache"] if c["name"] == "L3"][0].update(size=l3["size"] // 4)
    [bad] = check.replay_checks(check.replay(sim.parse_cpu(small), same, steps=4000))
    assert not bad["ok"] and "worst chase" in bad["detail"]
    slow = tomllib.loads(cal.to_toml(doc))
    slow["tlb"]["walk_latency"] += 300
    rows = check.replay(sim.parse_cpu(slow), same, steps=4000)
    [bad] = check.replay_checks(rows)
    assert not bad["ok"] and "4K" in bad["detail"]
    off = {r["point"] for r in rows if r["gated"] and abs(r["ratio"] - 1) > check.TOLERANCE}
    assert f"chase {fmt_size(128 * MIB)} 4K" in off and "chase 4KiB 2048K" not in off


def test_a_points_spread_is_between_its_rounds_fastest_samples():
    # rounds of two repeats: fastest 10, 12 and 10.5 -> the slowest round 20 % above
    assert check.round_spread([10, 11, 12, 13, 10.5, 10.6], 2) == pytest.approx(0.2)
    assert check.round_spread([10, 11, 12, 13], 4) == 0.0  # one round: no spread
    assert check.round_spread([10, 12], None) == 0.0  # rounds not kept apart
    assert check.point_tolerance(0.03) == check.TOLERANCE
    assert check.point_tolerance(0.18) == pytest.approx(0.18)
    assert check.point_tolerance(0.9) == check.SPREAD_MAX


def _rounds(raw, spread):
    """``raw`` measured in two rounds of one repeat: every chase and parallel chase as
    measured, then ``1 + spread`` times slower (the machine's own figure moved)."""
    def two(v):
        return [min(v), min(v) * (1 + spread)]
    return dict(raw, repeats=1, chase={k: two(v) for k, v in raw["chase"].items()},
                chase_4k={k: two(v) for k, v in (raw.get("chase_4k") or {}).items()},
                mlp={k: two(v) for k, v in raw["mlp"].items()})


def test_a_point_is_judged_within_its_native_spread_and_no_wider_than_the_cap():
    raw, _ = synthetic_raw()
    raw["sizes"] = raw["sizes"][::3]
    raw["mlp"] = {k: v for k, v in raw["mlp"].items() if k in ("1", "16")}
    raw["work"] = {}
    doc = cal.build_doc(raw, LEVELS, ZEN4, quick=True)
    cpu = sim.parse_cpu(tomllib.loads(cal.to_toml(doc)))
    same = _predicted_raw(raw, cpu)
    mid = str(raw["sizes"][len(raw["sizes"]) // 2])
    point = f"chase {fmt_size(int(mid))} 2048K"

    def at(factor, spread):
        off = dict(same, chase=dict(same["chase"]))
        off["chase"][mid] = [v * factor for v in same["chase"][mid]]
        noisy = dict(off, repeats=1, chase=dict(off["chase"]))
        noisy["chase"][mid] = [min(off["chase"][mid]), min(off["chase"][mid]) * (1 + spread)]
        rows = check.replay(cpu, noisy, steps=4000)
        return check.replay_checks(rows)[0], {r["point"]: r for r in rows}[point]

    # 18 % off: refused when the machine was steady there, passed when its rounds moved 20 %
    bad, row = at(1 / 1.18, 0.0)
    assert not bad["ok"] and row["tolerance"] == check.TOLERANCE
    ok, row = at(1 / 1.18, 0.20)
    assert ok["ok"] and row["spread"] == pytest.approx(0.2) and "1 points)" in ok["detail"]
    assert "1 of them only within their spread" in ok["detail"]
    # 40 % off with rounds 60 % apart: the spread counts up to the cap only
    bad, row = at(1 / 1.4, 0.60)
    assert not bad["ok"] and row["tolerance"] == check.SPREAD_MAX
    assert f"worst {point}" in bad["detail"] and "native spread 60%" in bad["detail"]
    sc = check.summarise([bad], check.replay(cpu, same, steps=4000))
    assert "| native spread |" in check.table(sc) and "| 10% | yes |" in check.table(sc)


def test_a_wrong_level_or_walk_is_refused_on_a_machine_noisy_to_the_cap():
    """Every point of the machine moved by the cap between its rounds (the most a point's
    tolerance can widen): a file with a quarter of the last level, or walks 300 cycles
    longer, is still refused."""
    raw, _ = synthetic_raw()
    raw["sizes"] = raw["sizes"][::2]
    raw["mlp"] = {k: v for k, v in raw["mlp"].items() if k in ("1", "16")}
    raw["work"] = {}
    doc = cal.build_doc(raw, LEVELS, ZEN4, quick=True)
    raw["chase_4k"] = {str(16 * MIB): [1.0], str(128 * MIB): [1.0]}
    cpu = sim.parse_cpu(tomllib.loads(cal.to_toml(doc)))
    noisy = _rounds(_predicted_raw(raw, cpu), check.SPREAD_MAX)
    rows = check.replay(cpu, noisy, steps=4000)
    assert check.replay_checks(rows)[0]["ok"]
    assert all(r["tolerance"] == check.SPREAD_MAX for r in rows if r["gated"])
    small = tomllib.loads(cal.to_toml(doc))
    small["cache"][-1]["size"] //= 4
    [bad] = check.replay_checks(check.replay(sim.parse_cpu(small), noisy, steps=4000))
    assert not bad["ok"] and "worst chase" in bad["detail"]
    slow = tomllib.loads(cal.to_toml(doc))
    slow["tlb"]["walk_latency"] += 300
    [bad] = check.replay_checks(check.replay(sim.parse_cpu(slow), noisy, steps=4000))
    assert not bad["ok"] and "4K" in bad["detail"]


def test_work_rows_are_shown_not_gated():
    raw, _ = synthetic_raw()
    doc = cal.build_doc(raw, LEVELS, ZEN4, quick=True)
    cpu = sim.parse_cpu(tomllib.loads(cal.to_toml(doc)))
    ns = check.work_predict(cpu, "crc64", 512)
    # a cache-resident kernel at the width: its instructions over 6 per cycle, plus little
    assert ns == pytest.approx(cal.work_instructions("crc64", 512) / 6 / 3.5, rel=0.1)
    rows = [check._row("work crc64/512", 3 * ns, ns, gated=False)]
    assert check.replay_checks(rows)[0]["ok"]


def test_work_rows_replay_at_their_kinds_rate():
    """A file's [work] rate of the kernel's kind retires the replayed gap, not the generic
    rate: a slower crc rate slows the CRC kernel by its ratio and leaves SipHash alone."""
    raw, _ = synthetic_raw()
    doc = cal.build_doc(raw, LEVELS, ZEN4, quick=True)
    cpu = sim.parse_cpu(tomllib.loads(cal.to_toml(doc)))
    slow_crc = cpu.with_changes(work={"generic": 6.0, "crc": 1.5, "hash": 6.0})
    crc = check.work_predict(slow_crc, "crc64", 512)
    assert crc == pytest.approx(cal.work_instructions("crc64", 512) / 1.5 / 3.5, rel=0.1)
    assert check.work_predict(slow_crc, "siphash", 64) == pytest.approx(
        check.work_predict(cpu.with_changes(work={"generic": 6.0}), "siphash", 64), rel=0.02)


# --- quick against full, the file, `local` --------------------------------------------------

def _with_replay(doc: dict, raw: dict) -> dict:
    """``doc`` with the ``[selfcheck]`` rows of its own replay of ``raw``'s chases, as a
    written calibration keeps them."""
    cpu = sim.parse_cpu(tomllib.loads(cal.to_toml(doc)))
    rows = check.replay(cpu, dict(raw, mlp={}, work={}), steps=2000)
    return dict(doc, selfcheck=check.summarise([], rows))


def test_quick_and_full_must_agree_on_the_clock():
    raw, _ = synthetic_raw()
    a = _with_replay(cal.build_doc(raw, LEVELS, ZEN4, quick=True), raw)
    assert all(c["ok"] for c in check.agreement(a, a, "same.toml"))
    b = dict(cal.build_doc(dict(raw, clock=clock_samples(3.5 * 1.15)), LEVELS, ZEN4,
                           quick=False), selfcheck=a["selfcheck"])
    got = by_name(check.agreement(a, b, "full.toml"))
    assert not got["agree.clock"]["ok"] and "full.toml" in got["agree.clock"]["detail"]
    assert got["agree.chases"]["ok"]


def test_quick_and_full_agree_on_predictions_not_on_a_parameter_they_do_not_identify():
    """Two files whose DRAM latencies are 1.7x apart but whose walks make up the difference
    (the split nested paging leaves open) predict the same chases: they agree. A file whose
    predictions differ (DRAM 1.7x, nothing making up for it) fails agree.chases in one line
    naming the worst point."""
    import copy

    raw, _ = synthetic_raw(huge=0.0)  # 4 KiB pages: every chase past the STLB walks
    a = cal.build_doc(raw, LEVELS, ZEN4, quick=True)
    # the chases within L2 (no DRAM, no walk) and those where every load walks and goes to
    # DRAM: where the two trade exactly (between them each file's L3 and STLB reach decide)
    raw = dict(raw, sizes=[x for x in raw["sizes"] if x <= MIB or x >= 64 * MIB])
    a["tlb"]["walk_latency"] = 400
    a = _with_replay(a, raw)
    base = tomllib.loads(cal.to_toml(a))
    # the other split: DRAM 1.7x, the walk's fixed part less by the difference in cycles
    split = copy.deepcopy(base)
    dram = split["dram"]["latency_ns"]
    split["dram"]["latency_ns"] = round(1.7 * dram, 1)
    split["tlb"]["walk_latency"] = 400 - round(0.7 * dram * split["freq_ghz"])
    assert split["tlb"]["walk_latency"] > 0
    b = _with_replay(split, raw)
    got = by_name(check.agreement(a, b, "full.toml"))
    assert got["agree.clock"]["ok"] and got["agree.chases"]["ok"], got
    # the same DRAM change alone: the chases past the last level predicted 1.3x or more slower
    slow = copy.deepcopy(base)
    slow["dram"]["latency_ns"] = round(1.7 * dram, 1)
    c = _with_replay(slow, raw)
    got = by_name(check.agreement(a, c, "full.toml"))["agree.chases"]
    assert not got["ok"]
    assert "\n" not in got["detail"] and got["detail"].startswith(
        "predicted chases against full.toml: ")
    assert "off by more than 10%, worst chase " in got["detail"]
    # a file without replayed chases cannot be agreed with
    none = by_name(check.agreement(a, dict(c, selfcheck={}), "old.toml"))["agree.chases"]
    assert not none["ok"] and "no replayed chase in common with old.toml" in none["detail"]


def test_the_self_check_travels_in_the_file_and_local_refuses_a_failed_one(fake_sysfs):  # noqa: F811
    levels = local.read_sysfs(fake_sysfs)
    raw, _ = synthetic_raw()
    raw["clock"] = clock_samples(3.5, add_cycles=0.2)  # a folding core's probe
    doc = cal.build_doc(raw, levels, cal.cpu_identity(), quick=True)
    doc["selfcheck"] = check.summarise(check.clock_checks(
        check.clock_estimate(raw["clock"]), KERNEL_3GHZ), [])
    path = cal.cache_path(levels)
    path.parent.mkdir(parents=True)
    path.write_text(cal.to_toml(doc))
    back = tomllib.loads(path.read_text())["selfcheck"]
    assert back == doc["selfcheck"] and back["status"] == "failed"
    with pytest.raises(sim.ConfigError, match="failed its self-check: clock: imul chain"):
        local.local_cpu(fake_sysfs)
    # named explicitly, the file loads, its status in its provenance
    assert sim.load_cpu(str(path)).provenance["selfcheck"]["status"] == "failed"
    # a file without a self-check (an older kvsim's) is refused too
    del doc["selfcheck"]
    path.write_text(cal.to_toml(doc))
    with pytest.raises(sim.ConfigError, match="has no self-check"):
        local.local_cpu(fake_sysfs)
    assert "| clock.method | **no** |" in check.table(back)


def test_a_core_behind_another_model_number_is_known_by_its_features():
    amx = ["fpu", "avx512f", "amx_tile"]
    assert cal.known_core("GenuineIntel", 6, 167, amx)["core"].startswith("Intel Golden Cove")
    assert cal.known_core("GenuineIntel", 6, 167, ["fpu", "avx512f"]) is None
    assert cal.known_core("AuthenticAMD", 25, 300, amx) is None


def test_native_agreement_counts_the_points_two_runs_disagree_on():
    rows = [check._row("chase 4KiB 2048K", 1.2, 1.2), check._row("chase 1GiB 4K", 400, 380),
            check._row("mlp 1GiB x1", 300, 290), check._row("work crc64/1", 2.0, 1.5, False)]
    other = {"selfcheck": {"replay": [
        check._row("chase 4KiB 2048K", 1.25, 1.2), check._row("chase 1GiB 4K", 300, 380),
        check._row("work crc64/1", 9.0, 1.5, False)]}}
    got = check.native_agreement(rows, other)
    assert got == {"points": 2, "off": 1, "worst_point": "chase 1GiB 4K",
                   "worst_ratio": pytest.approx(1.3333, abs=1e-4)}
    assert check.native_agreement(rows, {}) is None
    sc = check.summarise([], rows, "quick.toml", got)
    assert "1 of 2 points differ by more than 10% between the two runs" in check.table(sc)


def _agreement_doc(natives: dict[int, float], predicted: dict[int, float], l2_cycles=14,
                   levels=LEVELS, last=32 * MIB) -> dict:
    """A calibration as agreement reads it: its caches, sysfs levels, chase sizes and the
    replayed chases (2 MiB pages) with their native and predicted ns."""
    sizes = sorted(natives)
    rows = [check._row(f"chase {fmt_size(s)} 2048K", natives[s], predicted[s]) for s in sizes]
    return {"freq_ghz": 3.5,
            "cache": [{"name": "L1D", "size": 32 * 1024, "latency": 4},
                      {"name": "L2", "size": MIB, "latency": l2_cycles},
                      {"name": "L3", "size": last, "latency": 50}],
            "meta": {"sysfs_levels": levels,
                     "raw": {"sizes": sizes, "huge_fraction_top": 1.0}},
            "selfcheck": {"replay": rows}}


AGREE_SIZES = (64 * 1024, 512 * 1024, 4 * MIB, 16 * MIB, 256 * MIB)
AGREE_NS = dict(zip(AGREE_SIZES, (4.0, 5.0, 16.0, 40.0, 140.0), strict=True))


def test_a_moved_last_level_share_is_left_to_each_runs_replay():
    """Past the private levels (the sysfs L2), a chase whose native figure moved between the
    two runs (a neighbour took part of the last level) is not compared: each file predicts
    its own run. Where the runs' natives agree, and within the private levels always, the
    two files' predictions must agree within the tolerance."""
    a = _agreement_doc(AGREE_NS, AGREE_NS)
    moved = {**AGREE_NS, 16 * MIB: 80.0}  # the share halved: 16 MiB now misses
    b = _agreement_doc(moved, moved, last=8 * MIB)
    got = by_name(check.agreement(a, b, "full.toml"))
    assert all(c["ok"] for c in got.values()), got
    assert "1 past the private levels left to each file's own replay" in (
        got["agree.chases"]["detail"])
    assert "last level 32MiB here, 8MiB there" in got["agree.chases"]["detail"]
    # the same natives past L2, other predictions: refused
    off = _agreement_doc(moved, {**moved, 256 * MIB: 180.0}, last=8 * MIB)
    got = by_name(check.agreement(a, off, "full.toml"))["agree.chases"]
    assert not got["ok"] and "worst chase 256MiB 2048K" in got["detail"]
    # within the private levels the predictions are compared whatever the natives did
    priv = _agreement_doc({**moved, 512 * 1024: 7.0},
                          {**moved, 512 * 1024: 6.0}, last=8 * MIB)
    got = by_name(check.agreement(a, priv, "full.toml"))["agree.chases"]
    assert not got["ok"] and "worst chase 512KiB 2048K" in got["detail"]


def test_quick_and_full_must_agree_on_the_private_levels_and_the_kernels_caches():
    a = _agreement_doc(AGREE_NS, AGREE_NS)
    near = _agreement_doc(AGREE_NS, AGREE_NS, l2_cycles=15)  # 1.07x
    assert by_name(check.agreement(a, near, "full.toml"))["agree.levels"]["ok"]
    far = _agreement_doc(AGREE_NS, AGREE_NS, l2_cycles=16)  # 1.14x
    got = by_name(check.agreement(a, far, "full.toml"))["agree.levels"]
    assert not got["ok"] and "worst L2, 0.88x" in got["detail"]
    other = [dict(lv) for lv in LEVELS]
    other[1]["size"] *= 2
    got = by_name(check.agreement(a, _agreement_doc(AGREE_NS, AGREE_NS, levels=other),
                                  "full.toml"))["agree.sysfs"]
    assert not got["ok"] and "full.toml reports other caches" in got["detail"]
    # a file without sysfs levels (an older kvsim's) is not judged on them
    old = _agreement_doc(AGREE_NS, AGREE_NS)
    del old["meta"]["sysfs_levels"]
    assert "agree.sysfs" not in by_name(check.agreement(a, old, "old.toml"))
