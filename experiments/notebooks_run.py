"""``kvsim notebooks run -o DIR``: execute every notebook headless, into DIR.

Each notebook of the checkout's ``notebooks/`` runs top to bottom in a fresh kernel
(nbclient), with DIR as its working directory and ``DIR/data`` as its data folder
(``$KVSIM_NOTEBOOK_DATA``, read by :func:`kvsim.experiments.explore.data_dir`); the executed
copy, outputs and figures included, is written as ``DIR/NN-topic.ipynb``. Nothing is written
outside DIR. Needs nbclient, nbformat and ipykernel (the ``notebooks`` or ``test`` extra).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from kvsim.experiments.explore import DATA_ENV

__all__ = ["notebooks", "run"]


def folder() -> Path:
    """The checkout's ``notebooks/`` (ValueError outside a source checkout)."""
    from kvsim import artifacts

    root = artifacts.source_root()
    if root is None or not (root / "notebooks").is_dir():
        raise ValueError("notebooks: the notebooks are in a kvsim source checkout "
                         "(notebooks/), not in an installed package")
    return root / "notebooks"


def notebooks(only: Sequence[str] = ()) -> list[Path]:
    """The notebooks to run, in order: every ``NN-*.ipynb``, or those named by ``only``
    (a stem such as ``01-trace-anatomy`` or its number ``01``)."""
    found = sorted(folder().glob("[0-9][0-9]-*.ipynb"))
    if not only:
        return found
    chosen = []
    for name in only:
        hits = [p for p in found if name in (p.stem, p.stem[:2], p.name)]
        if not hits:
            known = ", ".join(p.stem for p in found)
            raise ValueError(f"notebooks: no notebook {name!r} (known: {known})")
        chosen += [p for p in hits if p not in chosen]
    return chosen


def run(out: str | Path, only: Sequence[str] = (), timeout: int = 600,
        log: Callable[[str], Any] = print) -> list[Path]:
    """Execute the notebooks into ``out``; return the executed copies' paths. A notebook
    that fails raises ValueError naming it and the error; the copies already written
    stay."""
    try:
        import nbclient
        import nbformat
    except ImportError:
        raise ValueError("notebooks run: needs nbclient, nbformat and ipykernel: "
                         "pip install 'kvsim[notebooks]'") from None
    paths = notebooks(only)
    out = Path(out).resolve()
    data = out / "data"
    data.mkdir(parents=True, exist_ok=True)
    written = []
    old = os.environ.get(DATA_ENV)
    os.environ[DATA_ENV] = str(data)  # the kernel inherits it
    try:
        for path in paths:
            nb = nbformat.read(path, as_version=4)
            t0 = time.perf_counter()
            client = nbclient.NotebookClient(nb, timeout=timeout, kernel_name="python3",
                                             resources={"metadata": {"path": str(out)}})
            try:
                client.execute()
            except nbclient.exceptions.CellExecutionError as exc:
                last = [ln for ln in str(exc).strip().splitlines() if ln.strip()]
                raise ValueError(f"{path.name}: a cell failed: "
                                 f"{last[-1] if last else type(exc).__name__}") from None
            dst = out / path.name
            tmp = dst.with_name(f".{dst.name}.{os.getpid()}.tmp")
            nbformat.write(nb, tmp)
            tmp.replace(dst)
            written.append(dst)
            log(f"{path.name}: ran in {time.perf_counter() - t0:.1f} s -> {dst}")
    finally:
        if old is None:
            os.environ.pop(DATA_ENV, None)
        else:
            os.environ[DATA_ENV] = old
    return written
