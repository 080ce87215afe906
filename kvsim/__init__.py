"""kvsim: a research simulator and reference model for the memory behaviour of in-memory
key-value stores.

One import package, one subpackage per top-level folder of the repository:

- :mod:`kvsim.traces`: the ``.kvt`` trace format, reader/writer, inspection, converters;
- :mod:`kvsim.sim`: the cache-hierarchy simulator (compiled engine, Python reference, presets);
- :mod:`kvsim.model`: the Python model of the keyspace and its batched paths, the binding to
  c_ref's library and the property-test harness;
- :mod:`kvsim.experiments`: the ``kvsim`` command and the studies it runs.

The compiled parts (c_ref's library and CLI, the simulator's engine) are found by
:mod:`kvsim.artifacts`. ``import kvsim`` is cheap: a subpackage is imported on first use
(``kvsim.sim.simulate(...)`` works after ``import kvsim``).
"""

from __future__ import annotations

import importlib

SUBPACKAGES = ("traces", "sim", "model", "experiments")

__all__ = ["SUBPACKAGES", "__version__", *SUBPACKAGES]


def _version() -> str:
    # importlib.metadata costs tens of milliseconds at import (it pulls in the email
    # package), a large part of a short `kvsim simulate`: looked up on first use only
    from importlib import metadata

    try:
        return metadata.version("kvsim")
    except metadata.PackageNotFoundError:  # imported from a source tree that is not installed
        return "0+unknown"


def __getattr__(name: str):
    if name in SUBPACKAGES:
        return importlib.import_module(f"{__name__}.{name}")
    if name == "__version__":
        v = _version()
        globals()["__version__"] = v
        return v
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
