"""README regions agree with their result files; the renderer rejects broken markers."""

import json
import re
import subprocess
import sys

import pytest

import bench.renderings  # noqa: F401 -- the benchmarks' renderings register in the one registry
from kvsim.experiments import render

from .conftest import ROOT

#: every Markdown page of the repository with a rendered region (READMEs, sim/GEM5.md, ...)
READMES = sorted(p for p in ROOT.rglob("*.md")
                 if not {".venv", "build", "node_modules"} & set(p.relative_to(ROOT).parts)
                 and (p.name == "README.md" or "<!-- kvsim:results " in p.read_text()))


DOCS = sorted(p for p in (ROOT / "docs").rglob("*.md") if "tests" not in p.parts)


def test_every_readme_and_page_agrees_with_its_result_files():
    regions = 0
    for path in READMES + DOCS:
        text = path.read_text()
        regions += text.count("<!-- kvsim:results ")
        new, changed = render.render_text(text, ROOT, str(path),
                                          render.link_prefix(path, ROOT))
        assert not changed, (f"{path.relative_to(ROOT)}: regions {changed} disagree with their "
                             f"result files; run python -m bench render "
                             f"{path.relative_to(ROOT)}")
        assert new == text
    assert regions >= 1, "README.md renders the demo figures"


def test_every_rendering_reads_a_committed_result_file():
    for r in render.RENDERINGS.values():
        doc = render._load(ROOT, r.result)  # JSON, or a CPU file `kvsim calibrate` wrote
        prov = doc["provenance"] if "provenance" in doc else doc["meta"]["provenance"]
        assert {"commit", "machine", "date_utc"} <= set(prov), r.result


def demo_copy(tmp_path):
    """The demo's result file (returned for the test to change and write), with every other
    registered rendering's result file copied under ``tmp_path`` as committed."""
    (tmp_path / "results").mkdir()
    for r in render.RENDERINGS.values():
        if r.name != "demo":
            (tmp_path / r.result).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / r.result).write_text((ROOT / r.result).read_text())
    doc = json.loads((ROOT / "results/demo.json").read_text())
    return doc


def test_a_changed_figure_makes_the_region_stale(tmp_path):
    page = ROOT / "docs" / "studies" / "demo.md"
    readme, prefix = page.read_text(), render.link_prefix(page, ROOT)
    assert prefix == "../"
    doc = demo_copy(tmp_path)
    (tmp_path / "results/demo.json").write_text(json.dumps(doc))
    assert render.render_text(readme, tmp_path, prefix=prefix)[1] == []
    doc["rows"][0]["cycles"] += 1
    (tmp_path / "results/demo.json").write_text(json.dumps(doc))
    new, changed = render.render_text(readme, tmp_path, prefix=prefix)
    assert changed == ["demo"]
    assert f"{doc['rows'][0]['cycles']:,}" in new


def test_rendering_fills_an_empty_region_and_keeps_the_rest(tmp_path):
    doc = demo_copy(tmp_path)
    (tmp_path / "results/demo.json").write_text(json.dumps(doc))
    text = "intro\n<!-- kvsim:results demo -->\n<!-- /kvsim:results -->\noutro\n"
    new, changed = render.render_text(text, tmp_path)
    assert changed == ["demo"]
    assert new.startswith("intro\n<!-- kvsim:results demo -->\n")
    assert new.endswith("<!-- /kvsim:results -->\noutro\n")
    assert doc["native"]["verdict"] in new
    assert render.render_text(new, tmp_path) == (new, [])


@pytest.mark.parametrize("text, needle", [
    ("<!-- kvsim:results demo -->\nno end\n", "no '<!-- /kvsim:results -->'"),
    ("<!-- kvsim:results nosuch -->\n<!-- /kvsim:results -->\n", "unknown rendering 'nosuch'"),
])
def test_bad_markers(tmp_path, text, needle):
    with pytest.raises(render.RenderError, match=needle.replace("(", r"\(")):
        render.render_text(text, tmp_path, "doc.md")


def test_missing_result_file(tmp_path):
    text = "<!-- kvsim:results demo -->\n<!-- /kvsim:results -->\n"
    with pytest.raises(render.RenderError, match="results/demo.json: cannot read"):
        render.render_text(text, tmp_path)


def test_command_check_and_rewrite(tmp_path):
    doc = tmp_path / "doc.md"
    doc.write_text("<!-- kvsim:results demo -->\nold\n<!-- /kvsim:results -->\n")
    cmd = [sys.executable, "-m", "kvsim.experiments.render"]
    res = subprocess.run([*cmd, "--check", doc], capture_output=True, text=True)
    assert res.returncode == 1 and "region 'demo'" in res.stderr
    assert "old" in doc.read_text()
    res = subprocess.run([*cmd, doc], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert "old" not in doc.read_text()
    assert subprocess.run([*cmd, "--check", doc]).returncode == 0
    bad = tmp_path / "bad.md"
    bad.write_text("<!-- kvsim:results nosuch -->\n<!-- /kvsim:results -->\n")
    res = subprocess.run([*cmd, bad], capture_output=True, text=True)
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1


def test_a_validation_page_names_its_cpu_file_without_the_machines_folders():
    """The CPU file's folder is the machine's (a cache or scratch directory): the page keeps
    its name and hash, not the path (the Intel guest's run used a scratch cache)."""
    result = "results/experiments/validation-xeon-m167.json"
    raw = (ROOT / result).read_text()
    # the run's CPU file as recorded: a bare name, or a path under the home folder's cache
    found = re.search(r'"((?:~/[^"]*/)?(local-[^"/]*\.toml))"', raw)
    assert found, "the published validation records no local CPU file"
    recorded, name = found.groups()
    # a result written where the CPU file sat in a scratch folder records that folder
    doc = json.loads(raw.replace(f'"{recorded}"', f'"/tmp/kvsim-scratch/kvsim/{name}"'))
    assert "/tmp/" in json.dumps(doc)
    text = render.render_validation(doc, result)
    assert "/tmp/" not in text and "~/" not in text
    assert f"| CPU file | {name} |" in text
