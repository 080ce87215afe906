"""The layering contract (pyproject.toml's [tool.importlinter]) holds on the import graph,
imports inside functions included; it is not vacuous (the same graph with the layers
reversed breaks it); and every exemption says why."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = ROOT / "pyproject.toml"


def _lint(config: Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    exe = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    if exe is None:
        pytest.skip("import-linter is not installed (pip install -e '.[test]')")
    return subprocess.run([exe, "--no-cache", str(config)], capture_output=True, text=True,
                          cwd=tmp_path, timeout=300)


def test_the_layers_hold(tmp_path: Path) -> None:
    res = _lint(PYPROJECT, tmp_path)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr


def test_the_contract_sees_the_real_graph(tmp_path: Path) -> None:
    """Reversed (traces on top), the contract must break, naming real imports."""
    conf = tomllib.loads(PYPROJECT.read_text())["tool"]["importlinter"]
    layers = conf["contracts"][0]["layers"]
    reversed_conf = tmp_path / "reversed.toml"
    reversed_conf.write_text(
        '[tool.importlinter]\nroot_packages = ["kvsim"]\n\n'
        '[[tool.importlinter.contracts]]\nname = "reversed"\ntype = "layers"\nlayers = ['
        + ", ".join(f'"{layer}"' for layer in reversed(layers)) + "]\n")
    res = _lint(reversed_conf, tmp_path)
    assert res.returncode != 0
    assert "kvsim.sim.api -> kvsim.traces" in res.stdout


def test_every_exemption_is_documented() -> None:
    lines = PYPROJECT.read_text().splitlines()
    start = lines.index("ignore_imports = [")
    end = lines.index("]", start)
    for i in range(start + 1, end):
        if lines[i].strip().startswith('"'):
            assert lines[i - 1].strip().startswith("#"), f"undocumented exemption: {lines[i]}"
