"""Where kvsim's compiled artifacts are: the one place every module asks.

The artifacts are c_ref's CLI and library (``kvsim-cref``, ``libkvsim_cref.so``, built from
``c_ref/``), the library with c_ref's test-only variants and its ASan+UBSan build (source
tree only, for the tests), the simulator's engine (``libkvsim_sim.so``, built from
``sim/_engine/``) and the calibration microbenchmarks (``kvsim-calibrate``, built from
``sim/_calibrate/``).

Each is looked up, in order:

1. an environment variable naming the file (``ENV`` below), for a build kept elsewhere;
2. the source tree's build folders (``c_ref/build/``, ``sim/_engine/build/``,
   ``sim/_calibrate/build/``), when kvsim runs from a checkout (an editable install):
   ``make build`` refreshes them;
3. ``kvsim/_native/`` inside the installed package, where a wheel puts them.

:class:`ArtifactMissing` names every path tried.
"""

from __future__ import annotations

import os
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
NATIVE_DIR = PACKAGE_DIR / "_native"
# The repository root when kvsim runs from a checkout: the folder holding c_ref/Makefile.
_ROOT = PACKAGE_DIR.parent
SOURCE_ROOT: Path | None = _ROOT if (_ROOT / "c_ref" / "Makefile").is_file() else None

CREF_CLI = "kvsim-cref"
CREF_LIB = "libkvsim_cref.so"
CREF_TEST_LIB = "libkvsim_cref_testvariants.so"
CREF_ASAN_LIB = "libkvsim_cref_asan.so"
ENGINE_LIB = "libkvsim_sim.so"
CALIBRATE_CLI = "kvsim-calibrate"

# artifact -> (environment override, build folder in the source tree, shipped in the wheel)
_TABLE: dict[str, tuple[str, str, bool]] = {
    CREF_CLI: ("KVSIM_CREF_BIN", "c_ref/build", True),
    CREF_LIB: ("KVSIM_CREF_LIB", "c_ref/build", True),
    CREF_TEST_LIB: ("KVSIM_CREF_TEST_LIB", "c_ref/build", False),
    CREF_ASAN_LIB: ("KVSIM_CREF_ASAN_LIB", "c_ref/build", False),
    ENGINE_LIB: ("KVSIM_ENGINE_LIB", "sim/_engine/build", True),
    CALIBRATE_CLI: ("KVSIM_CALIBRATE_BIN", "sim/_calibrate/build", True),
}
ENV = {name: row[0] for name, row in _TABLE.items()}


class ArtifactMissing(FileNotFoundError):
    """A compiled artifact was not found; the message names every path tried."""


def candidates(name: str) -> list[Path]:
    """The paths tried for artifact ``name``, in order."""
    env, build_dir, shipped = _TABLE[name]
    out = []
    if os.environ.get(env):
        out.append(Path(os.environ[env]))
    if SOURCE_ROOT is not None:
        out.append(SOURCE_ROOT / build_dir / name)
    if shipped:
        out.append(NATIVE_DIR / name)
    return out


def path(name: str) -> Path:
    """Path of artifact ``name`` (one of the constants above); raises ArtifactMissing."""
    tried = candidates(name)
    for p in tried:
        if p.is_file():
            return p
    how = ("run `make build` in the repository" if SOURCE_ROOT is not None
           else "reinstall kvsim (the wheel ships it)")
    if not _TABLE[name][2]:
        how = "it exists only in a source checkout: run `make -C c_ref all asan-lib`"
    raise ArtifactMissing(f"{name} not found (tried: {', '.join(map(str, tried))}); {how}")


def source_root() -> Path | None:
    """The repository root when running from a checkout, else None."""
    return SOURCE_ROOT
