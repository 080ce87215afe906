"""The fidelity study (kvsim.experiments.fidelity) and the paired build comparison (bench
suite ``paired``) at a tiny size: both builds run through the experiments' native path (the
"before" build by KVSIM_CREF_BIN), and the result files keep the keys of the published
ones."""

import json
from pathlib import Path

import pytest

from bench import paired
from kvsim import provenance
from kvsim.experiments import cref, fidelity

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
