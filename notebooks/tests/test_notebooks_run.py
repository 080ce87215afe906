"""`kvsim notebooks run -o DIR`: the notebooks run headless from any directory, find their
data through kvsim (not the current directory) and write nothing outside DIR."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from kvsim.experiments import explore

pytest.importorskip("nbclient")

ROOT = Path(__file__).resolve().parents[2]


def files(folder: Path) -> set[Path]:
    return {p for p in folder.rglob("*") if p.is_file()} if folder.exists() else set()


def test_notebooks_run_writes_only_into_the_folder_given(tmp_path):
    cwd, out = tmp_path / "elsewhere", tmp_path / "out"
    cwd.mkdir()
    repo_data = explore.data_dir() if not os.environ.get(explore.DATA_ENV) else None
    before = files(repo_data) if repo_data else set()
    env = {k: v for k, v in os.environ.items() if k != explore.DATA_ENV}
    res = subprocess.run([sys.executable, "-m", "kvsim.experiments.cli", "--quiet",
                          "notebooks", "run", "-o", str(out), "--only", "01"],
                         cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr
    assert "ran 1 notebook into" in res.stdout
    assert (out / "01-trace-anatomy.ipynb").is_file()
    assert any(p.suffix == ".kvt" for p in files(out / "data")), "its traces go to DIR/data"
    assert files(cwd) == set(), "nothing in the current directory"
    if repo_data:
        assert files(repo_data) == before, "nothing in the checkout's data folder"
    import nbformat

    nb = nbformat.read(out / "01-trace-anatomy.ipynb", as_version=4)
    assert any(o.get("output_type") == "display_data" for c in nb.cells
               if c.cell_type == "code" for o in c.get("outputs", []))


def test_data_dir_does_not_depend_on_the_current_directory(tmp_path, monkeypatch):
    monkeypatch.delenv(explore.DATA_ENV, raising=False)
    here = explore.data_dir()
    monkeypatch.chdir(tmp_path)
    assert explore.data_dir() == here and here.is_absolute()
    monkeypatch.setenv(explore.DATA_ENV, str(tmp_path / "d"))
    assert explore.data_dir() == tmp_path / "d"


def test_an_unknown_notebook_is_one_line(tmp_path):
    res = subprocess.run([sys.executable, "-m", "kvsim.experiments.cli", "notebooks", "run",
                          "-o", str(tmp_path / "o"), "--only", "99-nosuch"],
                         capture_output=True, text=True, cwd=ROOT)
    assert res.returncode != 0
    assert res.stderr.strip().splitlines() == [
        "kvsim: error: notebooks: no notebook '99-nosuch' (known: 01-trace-anatomy, "
        "02-cpu-comparison, 03-batching-study, 04-seed-reproduction)"]
    assert not (tmp_path / "o").exists()
