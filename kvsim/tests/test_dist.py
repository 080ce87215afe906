"""The distribution as a new user gets it: ``python -m build`` on a copy of the repository
gives an sdist and a platform wheel built from that sdist; the wheel installs into a fresh
venv, where ``import kvsim`` and a traced-and-simulated pipeline work outside the checkout.

Slow (a build and a venv with the runtime dependencies): ``make test-dist`` runs it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import venv
import zipfile
from pathlib import Path

import pytest

from kvsim import artifacts

pytestmark = pytest.mark.slow


def _run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    assert r.returncode == 0, f"{cmd} failed:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    return r


def _tracked_copy(root: Path, dest: Path) -> Path:
    """The repository's tracked files (what a fresh clone has), without build products."""
    files = _run(["git", "-C", str(root), "ls-files", "-z"]).stdout.split("\0")
    for rel in filter(None, files):
        src = root / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
    return dest


@pytest.fixture(scope="module")
def dist(tmp_path_factory) -> dict[str, Path]:
    root = artifacts.source_root()
    assert root is not None, "the distribution test runs from a checkout"
    tmp = tmp_path_factory.mktemp("dist")
    src = _tracked_copy(root, tmp / "src")
    out = tmp / "out"
    # sdist first, then the wheel built from the unpacked sdist (build's default)
    _run([sys.executable, "-m", "build", "--outdir", str(out), str(src)])
    (sdist,) = out.glob("kvsim-*.tar.gz")
    (wheel,) = out.glob("kvsim-*.whl")
    return {"tmp": tmp, "sdist": sdist, "wheel": wheel}


def test_sdist_holds_every_source_the_build_needs(dist):
    with tarfile.open(dist["sdist"]) as t:
        names = {n.split("/", 1)[1] for n in t.getnames() if "/" in n}
    for need in ("pyproject.toml", "CMakeLists.txt", "c_ref/CMakeLists.txt", "c_ref/main.c",
                 "c_ref/dict.c", "c_ref/prefix_symbols.sh", "sim/_engine/CMakeLists.txt",
                 "sim/_engine/engine.c", "sim/_calibrate/calibrate.c",
                 "sim/_calibrate/CMakeLists.txt", "traces/trace_format.h", "kvsim/artifacts.py"):
        assert need in names, need


def test_wheel_is_a_platform_wheel_with_one_top_level_package(dist):
    name = dist["wheel"].name
    assert name.endswith("-py3-none-linux_x86_64.whl"), name
    with zipfile.ZipFile(dist["wheel"]) as z:
        names = z.namelist()
        wheel_meta = z.read(next(n for n in names if n.endswith(".dist-info/WHEEL"))).decode()
    assert "Root-Is-Purelib: false" in wheel_meta
    tops = {n.split("/", 1)[0] for n in names}
    assert tops == {"kvsim", name.split("-")[0] + "-" + name.split("-")[1] + ".dist-info"}
    for art in (artifacts.CREF_CLI, artifacts.CREF_LIB, artifacts.ENGINE_LIB,
                artifacts.CALIBRATE_CLI):
        assert f"kvsim/_native/{art}" in names, art
    assert not [n for n in names if "/tests/" in n or n.endswith(".c")]


def test_wheel_installs_and_runs_outside_the_checkout(dist):
    env_dir = dist["tmp"] / "venv"
    venv.create(env_dir, with_pip=True)
    py, kvsim_cmd = env_dir / "bin" / "python", env_dir / "bin" / "kvsim"
    _run([str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check",
          str(dist["wheel"])])
    work = dist["tmp"] / "elsewhere"
    work.mkdir()
    env = {k: v for k, v in os.environ.items()
           if k not in artifacts.ENV.values() and k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    probe = ("import kvsim, kvsim.artifacts as a; "
             "print(kvsim.__version__, a.source_root(), a.path(a.ENGINE_LIB))")
    out = _run([str(py), "-c", probe], cwd=work, env=env).stdout.split()
    assert out[1] == "None" and "/site-packages/kvsim/_native/" in out[2], out
    pipe = (f"{kvsim_cmd} trace pipeline --keys 2000 --ops 2000 -o - | "
            f"{kvsim_cmd} simulate - --cpu graviton3 --json")
    r = _run(["bash", "-o", "pipefail", "-c", pipe], cwd=work, env=env)
    import json

    result = json.loads(r.stdout)
    assert result["records"] > 2000 and result["levels"], sorted(result)
