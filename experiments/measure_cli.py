"""One command line for the callgrind counts that write one result file.

``python -m kvsim.experiments.work_stores`` and ``python -m kvsim.experiments.crc64_cost``
take the same shape: ``-o FILE`` (default ``results/<name>``), a measurement that logs its
steps to stderr, a note, the result written with its provenance, the Markdown table printed.
:func:`main` is that shape, once; a module with options of its own adds them (``options``)
and its measurement receives them. A failed measurement (an OS or subprocess error, a bad
value, the simulator's ConfigError, a missing key in an input file) prints one line and
exits 1; an output folder that does not exist, or an option ``check`` refuses, one line and 2;
no partial file either way.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any


def main(argv: list[str] | None, *, module: str, description: str, result_name: str,
         measure: Callable[[Callable[[str], None]], dict[str, Any]],
         markdown: Callable[[dict[str, Any]], str], note: str,
         options: Callable[[argparse.ArgumentParser], None] | None = None,
         check: Callable[[argparse.Namespace], str | None] | None = None) -> int:
    """Parse ``-o`` (and the module's ``options``, whose parsed values ``measure`` then takes
    as its second argument, and ``check`` returns a one-line complaint about, or None),
    measure, write the result with ``note`` and print its table."""
    from kvsim import provenance

    ap = argparse.ArgumentParser(prog=f"python -m kvsim.experiments.{module}",
                                 description=description)
    ap.add_argument("-o", "--output", default=f"results/{result_name}")
    if options is not None:
        options(ap)
    a = ap.parse_args(argv)
    out = Path(a.output)
    if provenance.out_dir_missing(out):
        return 2
    bad = check(a) if check is not None else None
    if bad is not None:
        print(f"{module}: {bad}", file=sys.stderr)
        return 2
    try:
        def log(m: str) -> None:
            print(m, file=sys.stderr)

        doc = measure(log, a) if options is not None else measure(log)
    except (OSError, ValueError, KeyError, subprocess.SubprocessError) as e:
        # ConfigError is a ValueError; a KeyError's message is the key alone
        msg = f"no {e} in an input" if isinstance(e, KeyError) else e
        print(f"{module}: {str(msg).splitlines()[0] if str(msg) else type(e).__name__}",
              file=sys.stderr)
        return 1
    doc["note"] = note
    provenance.write_result(out, doc)
    print(markdown(doc))
    print(f"wrote {out}")
    return 0
