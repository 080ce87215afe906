"""Dependencies match use: a base install runs every command, and every dependency is used.

Each subcommand runs (``--help``, then a small real run) in a fresh interpreter that then
lists ``sys.modules``. No module imported there (beyond what the bare interpreter starts
with) may come from a distribution that only the
``test`` extra brings in (pytest, ruff, pycachesim, build and what they need), nor from any
distribution outside the base dependencies. The sets are derived from the installed
metadata of kvsim, not written down here.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
PACKAGE_DIRS = ["kvsim", "traces", "sim", "model", "experiments"]


def _requirements(dist: str, extra: str | None) -> list[Requirement]:
    out = []
    for text in metadata.requires(dist) or []:
        req = Requirement(text)
        env = {"extra": extra or ""}
        if req.marker is None or req.marker.evaluate(env):
            if extra is None and req.marker is not None and "extra" in str(req.marker):
                continue
            out.append(req)
    return out


def _closure(reqs: list[Requirement]) -> set[str]:
    """Canonical names of the distributions ``reqs`` install, transitively."""
    seen: set[str] = set()
    todo = [r.name for r in reqs]
    while todo:
        name = canonicalize_name(todo.pop())
        if name in seen:
            continue
        try:
            metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue  # a requirement whose marker excludes this platform
        seen.add(name)
        todo += [r.name for r in _requirements(name, None)]
    return seen


BASE = _closure(_requirements("kvsim", None)) | {"kvsim"}
TEST_ONLY = _closure(_requirements("kvsim", "test")) - BASE
DISTS_OF = {top: {canonicalize_name(d) for d in dists}
            for top, dists in metadata.packages_distributions().items()}


def _startup_modules() -> set[str]:
    """Modules a bare interpreter has before running anything (site hooks, .pth files)."""
    out = subprocess.run([sys.executable, "-c", "import sys; print(' '.join(sys.modules))"],
                         capture_output=True, text=True, check=True).stdout
    return set(out.split())


STARTUP = _startup_modules()

_IMPORT_BASE = """
import importlib, json, sys
for name in json.loads(sys.argv[1]):
    try:
        importlib.import_module(name)
    except Exception:
        pass
print(' '.join(sys.modules))
"""


def _base_dependency_modules() -> set[str]:
    """Modules the base dependencies import by themselves when they find them installed
    (pyarrow takes cloudpickle when present, which the test extra brings in through dask):
    such an import is theirs, not kvsim's, and a base install runs without it."""
    tops = sorted(t for t, d in DISTS_OF.items() if d <= BASE - {"kvsim"}
                  and t.isidentifier() and not t.startswith("_"))
    out = subprocess.run([sys.executable, "-c", _IMPORT_BASE, json.dumps(tops)],
                         capture_output=True, text=True, check=True, timeout=300).stdout
    return {m.split(".")[0] for m in out.split()}


BASE_DEP_MODULES = _base_dependency_modules()


def test_the_derived_sets_are_not_empty():
    assert {"numpy", "click", "tqdm", "hypothesis"} <= BASE
    assert {"pytest", "ruff", "pycachesim", "build"} <= TEST_ONLY


SMALL = ["--keys", "2000", "--ops", "200", "--value-size", "32", "--seed", "3"]


def _commands(tmp: Path) -> dict[str, list[list[str]]]:
    kvt = str(tmp / "t.kvt")
    return {
        "trace": [["trace", "pipeline", "-o", kvt, *SMALL]],
        "trace-info": [["trace-info", kvt, "--json"]],
        "simulate": [["simulate", kvt, "--cpu", "local", "--json"]],
        "convert": [["convert", kvt, str(tmp / "t.din")]],
        "native": [["native", "pipeline", *SMALL, "--repeat", "1", "--json"]],
        "cpus": [["cpus", "--json"]],
        "experiment": [["experiment", "demo", "--out", str(tmp / "demo"), "--keys", "2000",
                        "--ops", "200", "--cpu", "local", "--rounds", "2"],
                       ["experiment", "run", "kvobj_memory", "--cpu", "graviton3", "--only", "sim",
                        "--workers", "1", "-o", str(tmp / "exp")],
                       ["experiment", "report", str(tmp / "exp")]],
    }


RUNNER = """
import json, sys
from kvsim.experiments.cli import main
runs = json.loads(sys.argv[1])
codes = [main(["--quiet", *args]) for args in runs]
with open(sys.argv[2], "w") as f:
    json.dump({"codes": codes, "modules": sorted(sys.modules)}, f)
"""


@pytest.mark.parametrize("sub", list(_commands(Path("."))))
def test_command_imports_only_base_dependencies(sub, tmp_path):
    cmds = _commands(tmp_path)
    runs = [[sub, "--help"]]
    if sub in ("trace-info", "simulate", "convert"):
        runs += cmds["trace"]  # their input, made in the same process
    runs += cmds[sub]
    out = tmp_path / "modules.json"
    proc = subprocess.run([sys.executable, "-c", RUNNER, json.dumps(runs), str(out)],
                          capture_output=True, text=True, cwd=tmp_path, timeout=600)
    assert proc.returncode == 0, proc.stderr
    res = json.loads(out.read_text())
    assert res["codes"] == [0] * len(runs), proc.stderr
    tops = {m.split(".")[0] for m in set(res["modules"]) - STARTUP}
    third_party = {t: DISTS_OF[t] for t in tops if t in DISTS_OF
                   and t not in sys.stdlib_module_names and t not in BASE_DEP_MODULES}
    test_only = {t: d for t, d in third_party.items() if d <= TEST_ONLY}
    assert not test_only, f"`kvsim {sub}` imports test-only packages: {test_only}"
    undeclared = {t: d for t, d in third_party.items() if not d & BASE}
    assert not undeclared, f"`kvsim {sub}` imports undeclared packages: {undeclared}"


IMPORT_ALL = """
import json, pkgutil, importlib, sys
# the test-only packages are not there, as in a base install: importing one fails (a
# dependency's optional import of one, in a try/except ImportError, falls back)
hidden = set(json.loads(sys.argv[1]))
class Hide:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in hidden:
            raise ModuleNotFoundError(f"No module named {name!r} (test-only)", name=name)
        return None
sys.meta_path.insert(0, Hide())
import kvsim
names = []
for sub in kvsim.SUBPACKAGES:
    pkg = importlib.import_module("kvsim." + sub)
    for m in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + "."):
        if ".tests" not in m.name and "._" not in m.name and not m.name.endswith("__main__"):
            importlib.import_module(m.name)
            names.append(m.name)
print(json.dumps({"imported": names, "modules": sorted(sys.modules)}))
"""


def test_importing_every_public_module_needs_no_test_extra():
    """Library users (the property-test harness included) import modules the CLI may not.

    The test-only packages are hidden from the import system, as in a base install: a
    module that needs one fails to import. (A base dependency may still import one when it
    is installed and it would do without it, as hypothesis does typing_extensions, which
    the notebooks' test packages bring in.)"""
    hidden = sorted(t for t, d in DISTS_OF.items() if d <= TEST_ONLY and t not in STARTUP)
    assert hidden, "no test-only import names found"
    proc = subprocess.run([sys.executable, "-c", IMPORT_ALL, json.dumps(hidden)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    res = json.loads(proc.stdout)
    assert "kvsim.model.harness" in res["imported"] and "kvsim.model.strategies" in res["imported"]
    tops = {m.split(".")[0] for m in set(res["modules"]) - STARTUP} - BASE_DEP_MODULES
    test_only = {t: DISTS_OF[t] for t in tops if t in DISTS_OF and DISTS_OF[t] <= TEST_ONLY}
    assert not test_only, f"importing kvsim's modules imports test-only packages: {test_only}"


def _imported_tops() -> set[str]:
    """Top-level names imported anywhere in kvsim's own (non-test) source."""
    tops: set[str] = set()
    for d in PACKAGE_DIRS:
        for path in (ROOT / d).rglob("*.py"):
            if "tests" in path.relative_to(ROOT).parts:
                continue
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Import):
                    tops |= {a.name.split(".")[0] for a in node.names}
                elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                    tops.add(node.module.split(".")[0])
    return tops


def test_every_base_dependency_is_imported():
    used = set().union(*(DISTS_OF.get(t, set()) for t in _imported_tops()))
    declared = {canonicalize_name(r.name) for r in _requirements("kvsim", None)}
    assert declared, "kvsim's metadata lists no dependencies"
    unused = declared - used
    assert not unused, f"dependencies that no kvsim module imports: {sorted(unused)}"
