"""The fidelity study (kvsim.experiments.fidelity) and the paired build comparison (bench
suite ``paired``) at a tiny size: both builds run through the experiments' native path (the
"before" build by KVSIM_CREF_BIN), and the result files keep the keys of the published
ones."""

import json
from pathlib import Path

import pytest

from bench import paired
from kvsim import provenance
from kvsim.experiments import cells, cref, fidelity

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def tiny(monkeypatch):
    w = fidelity.WORKLOADS["mget-dict"]
    monkeypatch.setitem(fidelity.WORKLOADS, "mget-dict", (*w[:3], {**w[3], "keys": 3000},
                                                         w[4]))
    monkeypatch.setitem(fidelity.OPS, "mget", ("300", "60"))


def _missing(new, old, where=""):
    """The keys of the published document ``old`` (nested, its data-keyed maps such as the
    misses per structure left out) that the new one lacks."""
    out = []
    for k, v in old.items():
        if k not in new:
            out.append(where + k)
        elif isinstance(v, dict) and isinstance(new[k], dict) and k != "l1d_misses":
            out += _missing(new[k], v, f"{where}{k}.")
    return out


def test_fidelity_times_both_builds_and_keeps_the_keys(tiny, tmp_path):
    binary = str(cref.binary())
    assert fidelity.main(["--only", "mget-dict", "--repeat", "2", "--cpu", "epyc-7713",
                          "--before-bin", binary, "--before-commit", "HEAD",
                          "--out-dir", str(tmp_path)]) == 0
    doc = json.loads((tmp_path / "fidelity-mget-dict.json").read_text())
    for build in ("before", "after"):
        side = doc[build]
        assert side["baseline"]["native"]["ops"] == 300
        assert len(side["baseline"]["native"]["cpu_runs_s"]) == 2
        sim = (side["baseline"]["simulated"]["cycles"], side["variant"]["simulated"]["cycles"])
        assert side["speedup"]["predicted"] == round(sim[0] / sim[1], 4)
    # one c_ref build, so both builds trace the same records
    assert (doc["before"]["variant"]["simulated"]["records"]
            == doc["after"]["variant"]["simulated"]["records"])
    assert doc["options"][:2] == ["--table", "dict"] and "--ops" not in doc["options"]
    published = json.loads((ROOT / "results" / "fidelity-mget-dict.json").read_text())
    assert not _missing(doc, published)


def test_a_before_build_that_is_not_c_ref_is_one_line(tiny, tmp_path, capsys):
    fake = tmp_path / "kvsim-cref"
    fake.write_text("#!/bin/sh\necho broken build >&2\nexit 3\n")
    fake.chmod(0o755)
    with pytest.raises(SystemExit) as exc:
        fidelity.main(["--only", "mget-dict", "--repeat", "2", "--before-bin", str(fake),
                       "--before-commit", "x", "--out-dir", str(tmp_path)])
    assert "fidelity: mget --variant none" in str(exc.value)
    assert "broken build" in str(exc.value)
    assert not (tmp_path / "fidelity-mget-dict.json").exists()


def test_paired_rounds_time_both_builds(tiny, tmp_path, monkeypatch):
    monkeypatch.setattr(provenance, "results_dir", lambda: tmp_path)
    assert paired.main(["mget-dict", "--before-bin", str(cref.binary()),
                        "--before-commit", "HEAD", "--rounds", "2"]) == 0
    doc = json.loads((tmp_path / "paired-mget-dict.json").read_text())
    for build in ("before", "after"):
        cpu = doc[build]["cpu_s"]
        assert [len(v) for v in cpu.values()] == [2, 2]
        assert doc[build]["speedup"]["median"] > 0
    assert doc["options"][-2:] == ["--ops", "300"]
    published = json.loads((ROOT / "results" / "paired-mget-dict.json").read_text())
    assert not _missing(doc, published)


def test_paired_set_replaces_an_option_and_out_names_the_file(tiny, tmp_path, capsys):
    out = tmp_path / "kpc.json"
    assert paired.main(["mget-hashtable", "--before-bin", str(cref.binary()),
                        "--before-commit", "HEAD", "--rounds", "2", "--set",
                        "keys_per_command=7", "--set", "keys=1000", "--ops", "20",
                        "--out", str(out)]) == 0
    opts = json.loads(out.read_text())["options"]
    assert opts[opts.index("--keys-per-command") + 1] == "7"
    assert opts[opts.index("--keys") + 1] == "1000"
    with pytest.raises(SystemExit):
        paired.main(["mget-hashtable", "--before-bin", str(cref.binary()),
                     "--before-commit", "HEAD", "--set", "no_such=1"])
    assert "--set no_such=1: want KEY=VALUE" in capsys.readouterr().err


def test_the_plan_names_the_before_build_by_its_bytes(tiny, tmp_path, monkeypatch):
    """`kvsim experiment run fidelity` plans the "before" build $KVSIM_FIDELITY_BEFORE
    names: its SHA-256 is in each cell's spec, so another build is another cell."""
    from kvsim.experiments import framework

    monkeypatch.delenv(fidelity.BEFORE_ENV, raising=False)
    after_only = framework.get("fidelity").cells("small", ["epyc-7713"])
    assert {c["build"]["label"] for c in after_only} == {"after"}
    other = tmp_path / "kvsim-cref"
    other.write_bytes(cref.binary().read_bytes() + b"\0")
    ids = {}
    for path in (cref.binary(), other):
        monkeypatch.setenv(fidelity.BEFORE_ENV, str(path))
        specs = framework.get("fidelity").cells("small", ["epyc-7713"])
        before = [c for c in specs if c["build"]["label"] == "before"]
        assert before and all(c["build"]["cref_sha256"] == provenance.file_sha256(path)
                              for c in before)
        # the pairs an older build lacks run with this checkout's build only
        assert not any(c["pair"] in fidelity.NEW for c in before)
        ids[path] = {cells.cell_id(c) for c in before}
    assert not ids[cref.binary()] & ids[other]
    monkeypatch.setenv(fidelity.BEFORE_ENV, str(tmp_path / "absent"))
    with pytest.raises(ValueError, match="no such file"):
        framework.get("fidelity").cells("small", ["epyc-7713"])


def test_the_study_runs_through_the_framework(tiny, tmp_path, monkeypatch):
    """The framework's sweep computes the command's cells: rows per pair and build, the
    predicted speedup the ratio of the cycles the sim cell recorded."""
    import pandas as pd

    from kvsim.experiments import runner

    monkeypatch.setattr(fidelity, "WORKLOADS", {"mget-dict": fidelity.WORKLOADS["mget-dict"]})
    monkeypatch.setenv(fidelity.BEFORE_ENV, str(cref.binary()))
    res = runner.run(["fidelity"], tmp_path, cpus=["epyc-7713"], log=lambda *_: None)
    assert res["failed"] == [] and res["computed"] == 4
    rows = pd.read_parquet(tmp_path / "fidelity" / "fidelity.parquet")
    assert sorted(zip(rows.kind, rows.build, strict=True)) == [
        ("fidelity-native", "after"), ("fidelity-native", "before"),
        ("fidelity-sim", "after"), ("fidelity-sim", "before")]
    for _, r in rows[rows.kind == "fidelity-sim"].iterrows():
        b, v = json.loads(r["baseline"]), json.loads(r["variant"])
        assert r["predicted"] == round(b["simulated"]["cycles"] / v["simulated"]["cycles"], 4)
    for _, r in rows[rows.kind == "fidelity-native"].iterrows():
        assert len(json.loads(r["baseline"])["native"]["cpu_runs_s"]) == 3  # small: 3 runs
    md = (tmp_path / "fidelity" / "fidelity.md").read_text()
    assert "mget-dict" in md and "sim:epyc-7713" in md
