"""experiments/seed_load_gap.py: the seed's small-value load on its preset, in parts, under
one change at a time, beside the published time per key."""

from __future__ import annotations

import csv
import json

from kvsim.experiments import seed_absolute as sa
from kvsim.experiments import seed_load_gap as g
from kvsim.sim.config import load_cpu


def test_each_setting_changes_what_it_names():
    cpu = load_cpu(g.PRESET)
    other = load_cpu(g.WORK_FROM)
    for name, (_, change) in g.settings(g.WORK_FROM, 1.3).items():
        c = change(cpu)
        assert (c == cpu) == (name == "base"), name
    s = g.settings(g.WORK_FROM, 1.3)
    assert dict(s["work_valkey"][1](cpu).work) == {k: r / 1.3 for k, r in cpu.work}
    both = s["work_valkey_clock_base"][1](cpu)
    assert both.work == s["work_valkey"][1](cpu).work
    assert both.freq_ghz == g.BASE_CLOCK_GHZ
    assert s["clock_base"][1](cpu).freq_ghz == g.BASE_CLOCK_GHZ != cpu.freq_ghz
    free = s["kernel_0"][1](cpu).syscall
    twice = s["kernel_x2"][1](cpu).syscall
    from kvsim import traces
    for name in ("page_fault", "file_read"):
        k = traces.SYSCALL_NAMES.index(name)
        assert free.call_ns[k] == free.byte_ns[k] == 0
        assert twice.call_ns[k] == 2 * cpu.syscall.call_ns[k] > 0
    k = traces.SYSCALL_NAMES.index("read")  # the server's socket reads are not the load's
    assert free.call_ns[k] == cpu.syscall.call_ns[k]
    assert s["work_calibrated"][1](cpu).work == other.work != cpu.work


def test_the_published_figures_are_the_seed_tables():
    with open(sa.SEED_CSV, newline="") as f:
        want = {int(r["keys"]): (float(r["baseline"]), float(r["optimized"]))
                for r in csv.DictReader(f) if r["metric"] == "load_seconds"
                and r["cluster"] == "off" and r["value_bytes"] == "32"}
    pub = g.published(g.seed_rows(32), 3.0)
    assert {p["keys"] for p in pub} == set(want)
    for p in pub:
        b, o = want[p["keys"]]
        assert abs(p["ns_per_key"]["base"] - b * 1e9 / p["keys"]) < 1e-9
        assert abs(p["cycles_per_key"]["opt"] - o * 3e9 / p["keys"]) < 1e-6


def test_valkeys_count_over_crefs_is_the_callgrind_files(tmp_path):
    f = tmp_path / "c.json"
    f.write_text(json.dumps({"profiles": [
        {"value_bytes": 8, "valkey": {"instructions_per_key": 3000.0},
         "cref-arena": {"instructions_per_key": 2400.0}}]}))
    assert g.valkey_over_cref(str(f), 8) == 1.25
    try:
        g.valkey_over_cref(str(f), 32)
    except ValueError as e:
        assert "no valkey and cref-arena profile of 32 B" in str(e)
    else:
        raise AssertionError("a size without a profile passed")


def test_a_tiny_run_end_to_end(tmp_path, capsys):
    out = tmp_path / "g.json"
    assert g.main(["--value-sizes", "8", "--keys", "400", "--out", str(out)]) == 0
    (doc,) = json.loads(out.read_text())["rows"]
    assert doc["keys"] == 400 and doc["sides"] == {"base": "none",
                                                   "opt": "prefetch-after-key"}
    for side in ("base", "opt"):
        assert set(doc["predicted"]["libc"][side]) == {"base"}
        assert doc["predicted"]["libc"][side]["base"]["instructions_per_key"] > 100
        by = doc["predicted"]["arena"][side]
        assert set(by) == set(doc["settings"])
        base = by["base"]
        assert base["cycles_per_key"] > 0 and base["instructions_per_key"] > 100
        assert by["kernel_0"]["ns_per_key"] < base["ns_per_key"] < by["kernel_x2"][
            "ns_per_key"]
        assert by["dram_x2"]["ns_per_key"] >= base["ns_per_key"]
        assert by["clock_base"]["ns_per_key"] > base["ns_per_key"]
    kinds = doc["kinds_of_work"]
    assert kinds["cycles_per_key"]["generic"] > 0
    assert 0 < kinds["work_free_cycles_per_key"] < doc["predicted"]["arena"]["base"][
        "base"]["cycles_per_key"]
    (p, _) = doc["published"]
    gap = p["gap_ns_per_key"]["arena"]["base"]["base"]
    assert abs(gap - (p["ns_per_key"]["base"]
                      - doc["predicted"]["arena"]["base"]["base"]["ns_per_key"])) < 1e-9


def test_a_size_with_no_seed_row_is_one_line(tmp_path, capsys):
    out = tmp_path / "g.json"
    assert g.main(["--value-sizes", "8,7", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--value-size 7: no seed load row" in err[0]
    assert not out.exists()


def test_the_tables_diagnosis_names_each_changes_move_from_the_file(tmp_path, monkeypatch):
    f = tmp_path / "gap.json"
    by = {"base": {"ns_per_key": 300.0}, "work_valkey": {"ns_per_key": 350.0},
          "clock_base": {"ns_per_key": 340.0}, "dram_x2": {"ns_per_key": 380.0}}
    f.write_text(json.dumps({"rows": [{"value_size": 8, "cpu": "xeon-8255c", "keys": 1000,
                                       "freq_ghz": 3.0, "predicted": {"arena": {
                                           "base": by}}}]}))
    monkeypatch.setattr(sa, "LOAD_GAP_JSON", f)
    rows = [r for r in sa.seed_rows() if r.kind.workload == "load" and r.value_bytes == 8]
    off = next(r for r in rows if not r.cluster)
    text = sa._load_gap(off)
    assert "Valkey's instruction count +150, the base clock +120, DRAM latency x2 +240" in text
    assert "kernel" not in text and "at 1,000 keys" in text
    assert sa._load_gap(next(r for r in rows if r.cluster)) == ""
    line = {"gap_cycles_per_key_base": 600.0, "gap_cycles_per_key_opt": 590.0,
            "base_verdict": "low", "opt_verdict": "low"}
    assert sa._diagnosis(off, line).endswith(text)
    big = next(r for r in sa.seed_rows() if r.kind.workload == "load" and not r.cluster
               and r.value_bytes == 4096)
    assert sa._load_gap(big) == ""
