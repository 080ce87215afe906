"""The validation's diagnosis column: a side outside the band gets what a matching
ablation says, computed from the ablation's numbers; no match says "no ablation"."""

import json
import math

import pytest

from kvsim.experiments import render, validation
from kvsim.experiments import validation_diagnosis as vd

#: c_ref's defaults for the options these tests use (the real ones come from c_ref)
DEFAULTS = {w: {"variant": None, "table": "hashtable", "layout": "unified", "batch": 16,
                "keys_per_command": 10, "value_size": 100, "depth": 16, "op": "keys",
                "rdbchecksum": "yes", "mset_keys": "new"}
            for w in ("mget", "mset", "pipeline", "iterate", "load")}
XEON = {"model_name": "Intel(R) Xeon(R) Processor", "family": 6, "model": 167}


def _ablation(pair, workload, options, base, variant, ns_base, ns_variant, keys=1_000_000,
              machine=None):
    """A `kvsim ablate` result of one pair: ns per operation per setting of each side."""
    def side(v, ns):
        return {"variant": v, "settings": {s: {"ns_per_op": x} for s, x in ns.items()}}
    return {"provenance": {"machine": machine or {"cpu_model": XEON["model_name"],
                                                  "cpu_family": "6",
                                                  "cpu_model_number": "167"}},
            "cpu": {"file": "calibrate-test.toml"},
            "rows": [{"pair": pair, "workload": workload, "keys": keys, "options": options,
                      "predicted": {"base": side(base, ns_base),
                                    "variant": side(variant, ns_variant)}}]}


MGET = _ablation("mget", "mget", {"keys_per_command": 50, "value_size": 100}, "none", "batch",
                 {"base": 1000.0, "dram_x2": 2000.0, "llc_x0.25": 1300.0,
                  "dram_x0.75": 900.0},
                 {"base": 800.0, "dram_x2": 1200.0, "llc_x0.25": 880.0})
GET = _ablation("get", "pipeline", {"depth": 10, "value_size": 256}, "naive", "lookahead",
                {"base": 700.0, "dram_x2": 1260.0}, {"base": 300.0, "dram_x2": 450.0})


def _line(row, pred_a, nat_a, pred_b=None, nat_b=None):
    return {"row": row, "set": "tuning", "scale": "small",
            "predicted_ns_per_op_a": pred_a, "native_ns_per_op_a": nat_a,
            "predicted_ns_per_op_b": pred_b, "native_ns_per_op_b": nat_b}


def _frame(lines, ablations):
    return validation._time_frame(lines, validation.diagnoser(ablations, DEFAULTS))


def _said(frame, row, side):
    return frame[(frame["row"] == row) & (frame["side"] == side)]["diagnosis"].iloc[0]


def test_the_diagnosis_follows_the_ablation_numbers():
    row = "MGET hashtable none -> batch"
    # baseline at 0.5 of native: DRAM x 2 moves the matching ablation side 2.00x
    f = _frame([_line(row, 500.0, 1000.0, 400.0, 600.0)], [("results/ablation-t.json", MGET)])
    said = _said(f, row, "baseline")
    assert said.startswith("dram_x2 moves it 2.00x: covers the 2.00x it misses")
    assert "ablation-t.json: mget, 1,000,000 keys (row 50,000)" in said
    assert "keys_per_command 50 (row 50)" not in said, "the same keys per command: no diff"
    # the variant at 0.667 (misses 1.5x): 1200 / 800 = 1.50x covers it
    assert _said(f, row, "variant").startswith("dram_x2 moves it 1.50x: covers the 1.50x")
    # missing 1.3x: the last level's quarter (1.30x) is nearer than DRAM x 2 (2.00x)
    f = _frame([_line(row, 1000.0, 1300.0)], [("a.json", MGET)])
    assert _said(f, row, "baseline").startswith("llc_x0.25 moves it 1.30x: covers the 1.30x")
    # missing 8x: the nearest (2x) covers ln 2 / ln 8 of it
    f = _frame([_line(row, 100.0, 800.0)], [("a.json", MGET)])
    pct = round(100 * math.log(2) / math.log(8))
    assert _said(f, row, "baseline").startswith(f"dram_x2 moves it 2.00x: {pct} % of the 8.00x")
    # predicted slow by 1.5x: only DRAM x 0.75 moves it down (0.90x)
    f = _frame([_line(row, 1500.0, 1000.0)], [("a.json", MGET)])
    pct = round(100 * math.log(0.9) / math.log(1 / 1.5))
    assert _said(f, row, "baseline").startswith(f"dram_x0.75 moves it 0.90x: {pct} % of the "
                                                "0.67x")
    # slow by 1.2x: 0.90x covers the 0.83x it misses (0.90 / 0.83 is in the band)
    f = _frame([_line(row, 1200.0, 1000.0)], [("a.json", MGET)])
    assert _said(f, row, "baseline").startswith("dram_x0.75 moves it 0.90x: covers the 0.83x")
    # predicted slow where no setting moves it down
    f = _frame([_line("GET d10 naive -> lookahead 16", 1400.0, 700.0)], [("b.json", GET)])
    assert _said(f, "GET d10 naive -> lookahead 16", "baseline").startswith(
        "no setting moves it toward the 0.50x it misses")
    # a change of the numbers changes the diagnosis
    other = json.loads(json.dumps(MGET))
    other["rows"][0]["predicted"]["base"]["settings"]["dram_x2"]["ns_per_op"] = 1100.0
    f = _frame([_line(row, 500.0, 1000.0)], [("a.json", other)])
    assert _said(f, row, "baseline").startswith("llc_x0.25 moves it 1.30x: 38 % of the 2.00x")


def test_every_result_of_the_nearest_trace_gives_its_settings():
    """The same pair at the same size in two results (each its own settings, each against
    its own base): the diagnosis reads both, and names the file of the setting it picks."""
    row = "MGET hashtable none -> batch"
    other = json.loads(json.dumps(MGET))
    for side, ns in (("base", {"base": 2000.0, "rob_x0.5": 3000.0}),
                     ("variant", {"base": 1600.0, "rob_x0.5": 1700.0})):
        other["rows"][0]["predicted"][side]["settings"] = {k: {"ns_per_op": v}
                                                           for k, v in ns.items()}
    # misses 1.5x: rob_x0.5 (1.50x, in the second file) is nearer than dram_x2 (2.00x)
    f = _frame([_line(row, 1000.0, 1500.0)], [("results/ablation-a.json", MGET),
                                              ("results/ablation-b.json", other)])
    said = _said(f, row, "baseline")
    assert said.startswith("rob_x0.5 moves it 1.50x: covers the 1.50x") and "ablation-b" in said
    # misses 2x: dram_x2 of the first file
    f = _frame([_line(row, 500.0, 1000.0)], [("results/ablation-a.json", MGET),
                                             ("results/ablation-b.json", other)])
    assert "ablation-a" in _said(f, row, "baseline")
    # a trace of another size is not merged in: the nearer one alone speaks
    far = json.loads(json.dumps(other))
    far["rows"][0]["keys"] = 10
    f = _frame([_line(row, 1000.0, 1500.0)], [("results/ablation-a.json", MGET),
                                              ("results/ablation-b.json", far)])
    assert _said(f, row, "baseline").startswith("llc_x0.25 moves it 1.30x")


def test_within_the_band_says_nothing_and_unmatched_says_no_ablation():
    rows = ["MGET hashtable none -> batch", "KEYS none -> valkey",
            "MGET dict none -> chunk-15133", "GET d10 naive -> lookahead 4"]
    f = _frame([_line(rows[0], 950.0, 1000.0, 400.0, 1000.0), _line(rows[1], 50.0, 100.0),
                _line(rows[2], 50.0, 100.0, 50.0, 100.0),
                _line(rows[3], 350.0, 700.0, 100.0, 200.0)],
               [("a.json", MGET), ("b.json", GET)])
    assert _said(f, rows[0], "baseline") == "", "0.95 is in the band"
    # the variant misses 2.5x; the ablation moves it at most 1.5x
    assert _said(f, rows[0], "variant").startswith("dram_x2 moves it 1.50x: 44 % of the 2.50x")
    assert _said(f, rows[1], "baseline") == vd.NO_ABLATION, "no KEYS pair in the ablation"
    # the table is structure: a hashtable ablation says nothing about the dict
    assert _said(f, rows[2], "baseline") == _said(f, rows[2], "variant") == vd.NO_ABLATION
    # the baseline (naive) matches the ablation's; lookahead with batch 4 is not batch 16
    said = _said(f, rows[3], "baseline")
    assert said.startswith("dram_x2 moves it 1.80x: covers the 2.00x")
    assert _said(f, rows[3], "variant") == vd.NO_ABLATION
    # no ablation at all: every side outside the band says so
    f = _frame([_line(rows[0], 500.0, 1000.0)], [])
    assert _said(f, rows[0], "baseline") == vd.NO_ABLATION


def test_a_near_ablation_names_its_differences():
    row = "GET d1 naive -> lookahead 16"
    f = _frame([_line(row, 350.0, 700.0, 150.0, 300.0)], [("b.json", GET)])
    said = _said(f, row, "baseline")
    assert said.startswith("dram_x2 moves it 1.80x") and "depth 10 (row 1)" in said
    assert "value_size" not in said
    assert _said(f, row, "variant").startswith("dram_x2 moves it 1.50x")


def test_defaults_come_from_c_ref():
    """An ablation that leaves the table unset matches a row that names c_ref's default."""
    d = vd.cref_defaults()
    assert d["mget"]["table"] == "hashtable" and d["pipeline"]["batch"] == 16
    f = validation._time_frame([_line("MGET hashtable none -> batch", 500.0, 1000.0)],
                               validation.diagnoser([("a.json", MGET)], d))
    assert _said(f, "MGET hashtable none -> batch", "baseline").startswith("dram_x2 moves")


def test_only_the_same_cpus_ablations_are_read(tmp_path):
    (tmp_path / "results").mkdir()
    zen = _ablation("mget", "mget", {}, "none", "batch", {"base": 1.0}, {"base": 1.0},
                    machine={"cpu_model": "AMD EPYC", "cpu_family": "26",
                             "cpu_model_number": "2"})
    (tmp_path / "results" / "ablation-xeon.json").write_text(json.dumps(MGET))
    (tmp_path / "results" / "ablation-zen5.json").write_text(json.dumps(zen))
    (tmp_path / "results" / "ablation-broken.json").write_text("{")
    got = vd.ablations_for(XEON, tmp_path)
    assert [f for f, _ in got] == ["results/ablation-xeon.json"]
    assert vd.ablations_for({**XEON, "model": 143}, tmp_path) == []
    assert vd.ablations_for(None, tmp_path) == []


def test_an_ablation_is_the_cpu_files_not_the_hosts(tmp_path):
    """An ablation records its CPU file's [meta] cpu: a Xeon file's ablation run on an AMD
    host diagnoses the Xeon's validation, not the host's; a preset's (None) no machine's."""
    (tmp_path / "results").mkdir()
    amd = {"cpu_model": "AMD EPYC", "cpu_family": "25", "cpu_model_number": "1"}
    on_amd = json.loads(json.dumps(MGET))
    on_amd["provenance"]["machine"] = amd
    on_amd["cpu"]["meta_cpu"] = {"vendor": "GenuineIntel", **XEON}
    preset = json.loads(json.dumps(on_amd))
    preset["cpu"]["meta_cpu"] = None
    (tmp_path / "results" / "ablation-xeon-on-amd.json").write_text(json.dumps(on_amd))
    (tmp_path / "results" / "ablation-preset-on-amd.json").write_text(json.dumps(preset))
    assert [f for f, _ in vd.ablations_for(XEON, tmp_path)] == [
        "results/ablation-xeon-on-amd.json"]
    assert vd.ablations_for({"model_name": "AMD EPYC", "family": 25, "model": 1},
                            tmp_path) == []


def test_the_ablation_records_its_cpu_files_machine(tmp_path):
    from kvsim.experiments import ablation

    f = tmp_path / "c.toml"
    f.write_text('[meta]\ncpu = { vendor = "AuthenticAMD", family = 25, model = 1, '
                 'model_name = "AMD EPYC", flags = ["fpu"] }\n')
    assert ablation._meta_cpu(str(f)) == {"vendor": "AuthenticAMD", "family": 25, "model": 1,
                                          "model_name": "AMD EPYC"}
    assert ablation._meta_cpu("epyc-7713") is None


@pytest.mark.parametrize("with_column", [True, False])
def test_the_page_shows_the_diagnosis(with_column):
    cols = ["row", "side", "set", "predicted_ns_per_op", "native_ns_per_op", "ratio",
            "predicted_mlp"] + (["diagnosis"] if with_column else [])
    row = ["MGET hashtable none -> batch", "baseline", "tuning", 500.0, 1000.0, 0.5, 2.0]
    doc = {"experiment": "validation", "provenance": {"command": "kvsim experiment run "
                                                      "validation", "commit": "abc",
                                                      "date_utc": "2026-01-01" + "T00:00:00Z",
                                                      "machine": {"cpu_model": "X", "cores": 2}},
           "tables": [{"name": "validation_time", "title": "Time", "unit": "ns", "note": "",
                       "columns": cols,
                       "rows": [row + (["dram_x2 moves it 2.00x"] if with_column else [])]}]}
    text = render.render_validation(doc, "results/experiments/validation-t.json")
    assert ("| diagnosis |" in text) == with_column
    assert ("dram_x2 moves it 2.00x" in text) == with_column


def test_a_published_result_is_diagnosed_and_bad_input_is_one_line(tmp_path, capsys):
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "ablation-x.json").write_text(json.dumps(MGET))
    row = "MGET hashtable none -> batch"
    doc = {"provenance": {"machine": {"cpu_model": XEON["model_name"], "cpu_family": "6",
                                      "cpu_model_number": "167"}},
           "tables": [{"name": "validation_time", "columns": ["row", "side", "ratio"],
                       "rows": [[row, "baseline", 0.5], [row, "variant", 1.0],
                                ["KEYS none -> valkey", "baseline", 0.5]]},
                      {"name": "validation_calibration", "columns": ["field", "setting"],
                       "rows": [["scale", "small"]]}]}
    got = vd.from_result(doc, tmp_path, DEFAULTS)
    assert got[0]["diagnosis"].startswith("dram_x2 moves it 2.00x: covers the 2.00x")
    assert "(row 50,000)" in got[0]["diagnosis"], "the small scale's keys"
    assert got[1]["diagnosis"] == "" and got[2]["diagnosis"] == vd.NO_ABLATION
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"tables": []}))
    out = tmp_path / "out.json"
    for arg in (str(bad), str(tmp_path / "missing.json")):
        assert vd.main([arg, "--out", str(out)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and arg in err[0]
        assert not out.exists()


def test_update_rewrites_the_diagnosis_column_alone(tmp_path, monkeypatch, capsys):
    from kvsim import artifacts

    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "ablation-x.json").write_text(json.dumps(MGET))
    monkeypatch.setattr(artifacts, "source_root", lambda: tmp_path)
    row = "MGET hashtable none -> batch"
    doc = {"provenance": {"commit": "old", "machine": {
               "cpu_model": XEON["model_name"], "cpu_family": "6", "cpu_model_number": "167"}},
           "tables": [{"name": "validation_time",
                       "columns": ["row", "side", "ratio", "diagnosis"],
                       "rows": [[row, "baseline", 0.5, "stale"], [row, "variant", 1.0, "x"]]},
                      {"name": "validation_calibration", "columns": ["field", "setting"],
                       "rows": [["scale", "small"]]}]}
    path = tmp_path / "v.json"
    path.write_text(json.dumps(doc))
    assert vd.main([str(path), "--update", "--out", str(tmp_path / "o.json")]) == 0
    got = json.loads(path.read_text())
    rows = got["tables"][0]["rows"]
    assert rows[0][3].startswith("dram_x2 moves it 2.00x") and rows[1][3] == ""
    assert [r[:3] for r in rows] == [r[:3] for r in doc["tables"][0]["rows"]]
    assert got["tables"][1] == doc["tables"][1] and got["provenance"]["commit"] == "old"
    assert got["provenance"]["diagnosis"]["ablations"] == ["results/ablation-x.json"]
    assert "date_utc" in got["provenance"]["diagnosis"]
    assert not (tmp_path / "o.json").exists()
    assert "# updated" in capsys.readouterr().out
    # a result from before the column gets it
    del doc["tables"][0]["columns"][3]
    for r in doc["tables"][0]["rows"]:
        del r[3]
    path.write_text(json.dumps(doc))
    assert vd.main([str(path), "--update"]) == 0
    t = json.loads(path.read_text())["tables"][0]
    assert t["columns"][-1] == "diagnosis" and t["rows"][0][-1].startswith("dram_x2")


def test_the_tables_read_the_ablations_of_the_calibrations_cpu(tmp_path, monkeypatch):
    """The validation's tables find the ablation results run on the CPU its calibration
    names (the CPU file's [meta] cpu), in the checkout's results/."""
    from kvsim import artifacts

    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "ablation-x.json").write_text(json.dumps(MGET))
    monkeypatch.setattr(artifacts, "source_root", lambda: tmp_path)
    text = ('[meta]\ncpu = { vendor = "GenuineIntel", family = 6, model = 167, '
            f'model_name = "{XEON["model_name"]}" }}\n')
    line = _line("MGET hashtable none -> batch", 500.0, 1000.0)
    diagnose = validation._diagnoser_for({"cpu_file_text": text})
    assert diagnose(line, "a", 0.5).startswith("dram_x2 moves it 2.00x")
    other = validation._diagnoser_for({"cpu_file_text": text.replace("167", "143")})
    assert other(line, "a", 0.5) == vd.NO_ABLATION
    assert validation._diagnoser_for(None)(line, "a", 0.5) == vd.NO_ABLATION
    assert validation._diagnoser_for({"cpu_file_text": "not toml ["})(line, "a", 0.5) == \
        vd.NO_ABLATION
