"""The ``seed_absolute`` study: every no-network seed row is planned on its seed's preset, the
published figures and the ratios and verdicts of the table follow from the seeds' CSV itself
(read here with the csv module, not through the study), extrapolated and measured figures
never share a column, and a tiny run goes end to end through the framework."""

from __future__ import annotations

import csv
import dataclasses
import json

import pandas as pd
import pytest

from kvsim.experiments import framework, runner, seeds
from kvsim.experiments import seed_absolute as sa

TIME_METRICS = {"keys_command_seconds", "save_seconds", "load_seconds"}


def _csv_rows() -> list[dict[str, str]]:
    with open(sa.SEED_CSV, newline="") as f:
        return [r for r in csv.DictReader(f) if r["metric"] in TIME_METRICS]


def _line(t: pd.DataFrame, r: dict[str, str]) -> pd.Series:
    """The table's line of CSV row ``r`` (by its figures: a merged duplicate finds its
    twin)."""
    sel = t[(t.experiment == r["experiment"]) & (t.cluster == (r["cluster"] == "on"))
            & (t.value_bytes == int(r["value_bytes"])) & (t["keys"] == int(r["keys"]))
            & (t.published_base_s == float(r["baseline"]))
            & (t.published_opt_s == float(r["optimized"]))]
    assert len(sel) >= 1, r
    own = sel[(sel.variant == r["variant"]) | sel.also.str.contains(r["variant"], regex=False)]
    assert len(own) == 1, r
    return own.iloc[0]


def test_the_seed_rows_are_the_csvs_time_rows_and_agree_with_the_seed_constants():
    csv_rows = _csv_rows()
    rows = sa.seed_rows()
    merged = sum(len(r.also.split(", ")) for r in rows if r.also)
    assert len(rows) + merged == len(csv_rows)
    assert {r.experiment for r in rows} == {"iterate_keys", "iterate_save", "rdb_load_prefetch"}
    # the seeds' constants say the same as the CSV (one figure, two places: kept equal)
    for r in csv_rows:
        if r["experiment"] == "iterate_keys" and r["variant"] == "merged":
            want = float(r["baseline"]) / float(r["optimized"])
            assert seeds.ITERATE[("keys", "valkey")] == pytest.approx(want)
        if r["experiment"] == "rdb_load_prefetch" and r["variant"].startswith("v3"):
            key = (r["cluster"] == "on", int(r["value_bytes"]))
            if seeds.RDB_LOAD_SECONDS.get(key, (None,))[0] == int(r["keys"]):
                assert seeds.RDB_LOAD_SECONDS[key][1] == float(r["baseline"])


@pytest.mark.parametrize("scale", framework.SCALES)
def test_every_row_is_planned_on_its_seeds_own_preset(scale):
    from kvsim import sim

    specs = runner.plan(["seed_absolute"], scale, ["epyc-7713"])["seed_absolute"]
    assert specs and all(s["kind"] == "sim" for s in specs)
    for row in sa.seed_rows():
        preset = sim.load_cpu(row.kind.preset)
        # the preset is the seed's CPU (its description names it)
        words = row.cpu.replace("AWS ", "").replace("Intel ", "").split()
        assert all(w.lower() in preset.description.lower() for w in words[-2:]), row.cpu
        if row.cref_variant is None:
            continue
        n = sa.sim_keys(row, scale)
        assert 1 <= n <= row.keys
        for variant in ("none", row.cref_variant):
            got = [s for s in specs if s["cpu"] == row.kind.preset
                   and s["options"]["variant"] == variant and s["options"]["keys"] == n
                   and s["options"].get("value_size") == row.value_bytes
                   and bool(s["options"].get("cluster")) == row.cluster
                   and s["workload"] == row.kind.workload
                   and s["params"]["experiment_kind"] == row.experiment]
            assert len(got) == 1, (row, variant)
            assert got[0]["baseline"] == (variant == "none")
            if row.experiment == "iterate_save":
                assert got[0]["options"]["rdbchecksum"] == "no"  # as seed 002 ran it


def test_band_verdict_edges():
    assert sa.band_verdict(0.80, sa.TIME_BAND) == "in"
    assert sa.band_verdict(1.25, sa.TIME_BAND) == "in"
    assert sa.band_verdict(0.7999, sa.TIME_BAND) == "low"
    assert sa.band_verdict(1.2501, sa.TIME_BAND) == "high"
    assert sa.band_verdict(None, sa.TIME_BAND) == ""
    assert sa.band_verdict(float("nan"), sa.SPEEDUP_BAND) == ""


def test_growth_reads_the_curve_up_to_the_seeds_size():
    curve = [(1_000_000, 100.0), (5_000_000, 120.0), (20_000_000, 150.0)]
    assert sa.growth(curve, 1_000_000, 50_000_000) == (1.5, 20_000_000)
    assert sa.growth(curve, 1_000_000, 5_000_000) == (1.2, 5_000_000)
    assert sa.growth(curve, 2_000_000, 50_000_000) is None  # the simulated size is not on it
    assert sa.growth(curve, 20_000_000, 50_000_000) is None  # nothing larger


def _fake_rows(scale: str, cycles_per_key: dict[str, float]) -> pd.DataFrame:
    """Rows shaped as the runner's, for every planned cell: cycles = cycles per key of the
    cell's variant x its keys."""
    out = []
    for s in runner.plan(["seed_absolute"], scale, [])["seed_absolute"]:
        p = s["params"]
        out.append({"kind": "sim", "cpu": s["cpu"], "baseline": s["baseline"], **p,
                    "cycles": cycles_per_key[p["variant"]] * p["sim_keys"]})
    return pd.DataFrame(out)


@pytest.mark.parametrize("scale", framework.SCALES)
def test_the_table_arithmetic_follows_the_csv(scale, monkeypatch):
    from kvsim import sim

    monkeypatch.setattr(sa, "SCALE_JSON", sa.SCALE_JSON.with_name("no-such-file.json"))
    cpk = {"none": 900.0, "valkey": 300.0, "next-bucket": 450.0, "prefetch-after-key": 800.0,
           "prefetch-rehash": 1000.0}
    (t,) = framework.get("seed_absolute").tables(_fake_rows(scale, cpk))
    t = t.frame
    for r in _csv_rows():
        line = _line(t, r)
        base, opt = float(r["baseline"]), float(r["optimized"])
        assert line["published_speedup"] == pytest.approx(base / opt)
        if line["cref_variant"] == "":
            assert r["variant"] == "batch-iterator" and pd.isna(line.get("ratio_base"))
            continue
        ghz = sim.load_cpu(line["preset"]).freq_ghz
        keys = int(r["keys"])
        want = {"base": cpk["none"] * keys / ghz / 1e9,
                "opt": cpk[line["cref_variant"]] * keys / ghz / 1e9}
        measured = sa.sim_keys(sa.SeedRow(
            "000", r["experiment"], r["cpu"], r["variant"], r["cluster"] == "on",
            int(r["value_bytes"]), keys, r["metric"], base, opt), scale) == keys
        assert line["basis"].startswith("measured" if measured else "extrapolated")
        for side, pub in (("base", base), ("opt", opt)):
            have, other = ((f"predicted_{side}_s", f"extrapolated_{side}_s") if measured
                           else (f"extrapolated_{side}_s", f"predicted_{side}_s"))
            assert line[have] == pytest.approx(want[side])
            assert other not in t or pd.isna(line[other])  # never both
            ratio = want[side] / pub
            assert line[f"ratio_{side}"] == pytest.approx(ratio)
            lo, hi = sa.TIME_BAND
            assert line[f"{side}_verdict"] == ("in" if lo <= ratio <= hi else
                                               "low" if ratio < lo else "high")
        sp = cpk["none"] / cpk[line["cref_variant"]]
        assert line["predicted_speedup"] == pytest.approx(sp)
        assert line["speedup_ratio"] == pytest.approx(sp / (base / opt))
        lo, hi = sa.SPEEDUP_BAND
        assert line["speedup_verdict"] == ("in" if lo <= sp / (base / opt) <= hi else
                                           "low" if sp / (base / opt) < lo else "high")


def test_a_row_at_its_seeds_scale_takes_scale_json(tmp_path, monkeypatch):
    """KEYS over 5x10^7 keys on graviton3 in scale.json (both sides of its pair) replaces
    the merged iterator's extrapolation, marked; the next-bucket row (a variant scale.json
    does not run) and the loads (scale.json below their key counts) stay extrapolated; the
    newest row of a size wins."""
    from kvsim import sim

    rows = [{"workload": "keys", "keys": 50_000_000, "predicted": {"graviton3": {
        "a": {"cycles_per_key": c}, "b": {"cycles_per_key": c / 2}}}} for c in (999.0, 600.0)]
    rows.append({"workload": "load", "keys": 1_000_000, "predicted": {"xeon-8255c": {
        "a": {"cycles_per_key": 1.0}, "b": {"cycles_per_key": 1.0}}}})
    f = tmp_path / "scale.json"
    f.write_text(json.dumps({"rows": rows}))
    monkeypatch.setattr(sa, "SCALE_JSON", f)
    cpk = {"none": 900.0, "valkey": 300.0, "next-bucket": 450.0, "prefetch-after-key": 800.0,
           "prefetch-rehash": 1000.0}
    (t,) = framework.get("seed_absolute").tables(_fake_rows("full", cpk))
    t = t.frame
    ghz = sim.load_cpu("graviton3").freq_ghz
    keys = t[t.experiment == "iterate_keys"].set_index("variant")
    merged = keys.loc["merged"]
    assert bool(merged["at_seed_scale"]) and merged["source"] == "results/scale.json"
    assert merged["sim_keys"] == 50_000_000 and merged["basis"].startswith("measured")
    assert merged["predicted_base_s"] == pytest.approx(600.0 * 50_000_000 / ghz / 1e9)
    assert merged["predicted_speedup"] == pytest.approx(2.0)
    nb = keys.loc["next-bucket-simple"]
    assert not nb["at_seed_scale"] and nb["basis"].startswith("extrapolated")
    assert not t[t.experiment == "rdb_load_prefetch"].at_seed_scale.any()


def _tiny(name: str) -> framework.Experiment:
    """The study on a few configurations at tiny sizes: KEYS (both its variants), SAVE, and
    the load of 8 B and 4 KB values (a rehash row among them)."""
    exp = framework.get(name)

    def cells(scale, cpus):
        out = []
        for s in exp.cells("small", cpus):
            o = s["options"]
            if o.get("value_size") not in (8, 100, 4096) or o.get("cluster"):
                continue
            s = dict(s, options=dict(o, keys=min(o["keys"], 400)),
                     params=dict(s["params"], sim_keys=min(o["keys"], 400)))
            out.append(s)
        return out

    return dataclasses.replace(exp, cells=cells)


def test_a_tiny_run_goes_through_the_framework(tmp_path, monkeypatch):
    monkeypatch.setitem(framework._REGISTRY, "seed_absolute", _tiny("seed_absolute"))
    monkeypatch.setattr(sa, "SCALE_JSON", tmp_path / "no-scale.json")  # the cells alone
    res = runner.run(["seed_absolute"], tmp_path, log=lambda *_: None)
    assert not res["failed"], res["failed"]
    rows = pd.read_parquet(tmp_path / "seed_absolute" / "seed_absolute.parquet")
    assert set(rows.cpu) == {"graviton3", "xeon-8255c"}
    (t,) = framework.get("seed_absolute").tables(rows)
    f = t.frame
    done = f[f.value_bytes.isin([8, 100, 4096]) & ~f.cluster & (f.cref_variant != "")]
    assert len(done) and done["ratio_base"].notna().all() and done["ratio_opt"].notna().all()
    assert done["basis"].str.startswith("extrapolated from 400 keys").all()
    assert (done["extrapolated_base_s"] > 0).all() and (done["predicted_speedup"] > 0).all()
    assert f[~f.value_bytes.isin([8, 100, 4096]) | f.cluster]["ratio_base"].isna().all()
    md = (tmp_path / "seed_absolute" / "seed_absolute.md").read_text()
    assert "published_base_s" in md
    # the page's compact rendering: one line per seed row, the provenance under it
    doc = json.loads((tmp_path / "seed_absolute" / "seed_absolute.json").read_text())
    text = sa.render(doc, "results/experiments/seed_absolute.json")
    lines = [x for x in text.splitlines() if x.startswith("| ") and "seed row" not in x]
    assert len(lines) == len(f) == len(sa.seed_rows())
    assert sum("(extrapolated)" in x for x in lines) == len(done)
    assert "Source: [`results/experiments/seed_absolute.json`]" in text
    # assembled again (no cell recomputed): the same tables, and when it was assembled
    before = doc["tables"]
    sa.reassemble(tmp_path, publish=False)
    again = json.loads((tmp_path / "seed_absolute" / "seed_absolute.json").read_text())
    assert again["tables"] == before and again["assembled"]["commit"]


def test_scale_rows_written_after_the_cells_are_left_out(tmp_path, monkeypatch):
    """A scale.json row written after the newest cell may be of another model: the growth
    curve leaves it out, the older rows stay."""
    def day(d: int, h: int) -> str:  # an ISO date of the test's, not a run's
        return f"2026-01-{d:02d}T{h:02d}:00:00Z"

    rows = [{"workload": "load", "keys": k, "provenance": {"date_utc": d},
             "predicted": {"xeon-8255c": {"a": {"cycles_per_key": c},
                                          "b": {"cycles_per_key": c}}}}
            for k, c, d in ((1_000_000, 100.0, day(1, 0)),
                            (20_000_000, 150.0, day(1, 1)),
                            (1_000_000, 130.0, day(2, 0)))]
    f = tmp_path / "scale.json"
    f.write_text(json.dumps({"rows": rows}))
    monkeypatch.setattr(sa, "SCALE_JSON", f)
    old = sa._scale_growth(day(1, 12))[("load", "xeon-8255c", "a")]
    assert old == [(1_000_000, 100.0), (20_000_000, 150.0)]
    assert sa._scale_growth()[("load", "xeon-8255c", "a")] == [(1_000_000, 130.0),
                                                               (20_000_000, 150.0)]
