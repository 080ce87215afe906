"""The documentation site builds with ``mkdocs build --strict`` (a broken link, a page
missing from the nav's files, a CLI or API reference that does not resolve, or a generated
region that disagrees with its result file fails it), and the hook's checks can fail."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytest.importorskip("mkdocs")


def build(root: Path, site: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
    # not -q: MkDocs counts the warnings --strict fails on only where it logs them
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict",
                           "-f", str(root / "mkdocs.yml"), "-d", str(site)],
                          cwd=root, env=env, capture_output=True, text=True, timeout=600)


def test_the_site_builds_strictly(tmp_path):
    res = build(ROOT, tmp_path / "site")
    assert res.returncode == 0, res.stderr
    site = tmp_path / "site"
    for page in ("index.html", "studies/iterate/index.html", "reference/cli/index.html",
                 "reference/api/index.html", "validation/zen5/index.html",
                 "results/experiments/iterate.png", "sim/MODEL/index.html"):
        assert (site / page).is_file(), page
    cli = (site / "reference/cli/index.html").read_text()
    assert "kvsim experiment run" in cli and "--scheduler" in cli
    api = (site / "reference/api/index.html").read_text()
    assert "check_batched" in api and "BatchedCommand" in api


@pytest.fixture
def copy(tmp_path):
    """The site's sources copied (the pages, results/, mkdocs.yml), to be broken; the
    components the pages link to, as links to the checkout's."""
    dst = tmp_path / "repo"
    dst.mkdir()
    for item in ("mkdocs.yml", "pyproject.toml", "docs", "results"):
        src = ROOT / item
        (shutil.copytree if src.is_dir() else shutil.copy)(src, dst / item)
    for item in ("kvsim", "traces", "sim", "model", "experiments", "c_ref", "notebooks",
                 "fuzz"):
        (dst / item).symlink_to(ROOT / item)
    return dst


def test_a_stale_region_fails_the_build(copy, tmp_path):
    page = copy / "docs/studies/pipeline.md"
    text = page.read_text()
    start = text.index("<!-- kvsim:results pipeline -->")
    i = text.index("| 1 |", start)
    page.write_text(text[:i] + "| 9 |" + text[i + 5:])
    res = build(copy, tmp_path / "site")
    assert res.returncode != 0
    assert "regions pipeline disagree with their result files" in res.stderr


def test_a_broken_link_fails_the_build(copy, tmp_path):
    page = copy / "docs/howto/compare.md"
    page.write_text(page.read_text() + "\n[gone](nosuch-page.md)\n")
    res = build(copy, tmp_path / "site")
    assert res.returncode != 0 and "nosuch-page.md" in res.stderr
