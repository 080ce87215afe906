"""The stores per instruction of each kind of work of c_ref's code, counted natively by
callgrind: the figures c_ref's traces carry in their header's ``work_stores``
(traces/FORMAT.md, "Kinds of work"; sim/MODEL.md §6, "The work's stores").

A trace records the accesses of the data structures; the instructions between them (a
record's gap) are counted by kind of work, and they store too: a copy's stores, a hash's and
a parse's spills, the stack, the allocator's bookkeeping. Those stores are a property of the
code of each kind, not of the CPU, so they are counted on c_ref's own native code: callgrind
(``--cache-sim=yes``: ``Ir`` instructions, ``Dw`` data writes) over

- ``kvsim-cref serverloop`` MSETs of 10 keys of 256 B and GETs at depth 10, only the server's
  request code (``--toggle-collect=ksServerSessionFeed``), over :data:`KEYS` keys;
- ``kvsim-cref native load`` (a snapshot load, CRC-64 checked), the whole process, for the
  crc kind alone (no request carries it).

Each function's own cost (callgrind's self cost by file, inlined code by its own file) goes
to the kind of work the traces give that code: siphash.c hash, crc64.c crc, resp.c parse,
the C library's ``memcpy``/``memmove`` copy and ``memcmp``/``bcmp`` compare, the server's
request path (server.c, callpath.c) and the C library's allocator server (c_ref/emit.c
site_kinds: the allocation sites are of the server kind), the rest generic. A kind's figure
is its ``Dw`` over its ``Ir``. The traced instructions of a kind are c_ref's cost model of that
code (c_ref/sites.h), not these native instructions; stores per instruction are taken to
carry over. The figures are x86-64's (this build): another instruction set's code stores at
its own rate.

``python -m kvsim.experiments.work_stores`` writes ``results/work-stores.json``; c_ref's
table (c_ref/work_stores.h) is these figures to 4 decimals, checked by the tests.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

RESULT_NAME = "work-stores.json"
KINDS = ("generic", "hash", "crc", "copy", "compare", "parse", "server")
#: kinds whose code is another kind's file, which callgrind's self cost by file does not split
#: (the CRC-64's streams loop and joins are crc64.c's, counted as crc): they take its figure
SHARED = {"crc_streams": "crc", "crc_combine": "crc"}
#: keys of the serverloop runs and of the snapshot load; feeds of the serverloop runs
KEYS = 1000
ITERS = 2000
#: C library functions by the kind the traces give them (a name holding one of these)
LIBC_KINDS = (("memcpy", "copy"), ("memmove", "copy"), ("memcmp", "compare"),
              ("bcmp", "compare"), ("malloc", "server"), ("free", "server"),
              ("usable_size", "server"), ("tcache", "server"))
#: c_ref source files by kind (the rest generic)
FILE_KINDS = {"siphash.c": "hash", "crc64.c": "crc", "resp.c": "parse",
              "server.c": "server", "callpath.c": "server"}
DIGITS = 4


def _cref_files() -> frozenset[str]:
    """The names of c_ref's source files (its code is c_ref's by its file's name)."""
    from kvsim import artifacts

    root = artifacts.source_root()
    cref = root / "c_ref" if root is not None else None
    if cref is None or not cref.is_dir():
        return frozenset()
    return frozenset(p.name for p in cref.iterdir() if p.suffix in (".c", ".h"))


CREF_FILES = _cref_files()


def kind_of(file: str, fn: str) -> str:
    """The kind of work of function ``fn``'s code in ``file`` (module docstring): c_ref's
    files by :data:`FILE_KINDS` (the rest generic), other code (the C library) by the name
    of its function (:data:`LIBC_KINDS`, the rest generic)."""
    base = file.rsplit("/", 1)[-1]
    if base in FILE_KINDS:
        return FILE_KINDS[base]
    if base not in CREF_FILES:
        for part, kind in LIBC_KINDS:
            if part in fn:
                return kind
    return "generic"


def by_kind(self_by_file: dict[tuple[str, str], dict[str, int]]) -> dict[str, dict[str, int]]:
    """``Ir`` and ``Dw`` by kind of work of a callgrind profile's self costs by file."""
    out = {k: {"Ir": 0, "Dw": 0} for k in KINDS}
    for (file, fn), row in self_by_file.items():
        k = kind_of(file, fn)
        out[k]["Ir"] += row.get("Ir", 0)
        out[k]["Dw"] += row.get("Dw", 0)
    return out


def _callgrind(args: list[str], out: Path, toggle: str | None) -> dict:
    from kvsim import artifacts
    from kvsim.experiments import callgrind

    cmd = ["valgrind", "--tool=callgrind", "--cache-sim=yes", f"--callgrind-out-file={out}"]
    if toggle:
        cmd.append(f"--toggle-collect={toggle}")
    subprocess.run([*cmd, str(artifacts.path(artifacts.CREF_CLI)), *args],
                   capture_output=True, text=True, check=True)
    prof = callgrind.read(out)
    out.unlink()
    return by_kind(prof.self_by_file)


RUNS: tuple[tuple[str, list[str], str | None, tuple[str, ...]], ...] = (
    ("serverloop mset", ["serverloop", "--command", "mset", "--mset-keys", "10", "--keys",
                         str(KEYS), "--value-size", "256", "--iters", str(ITERS),
                         "--rounds", "1"], "ksServerSessionFeed", KINDS),
    ("serverloop get", ["serverloop", "--command", "get", "--depth", "10", "--keys", str(KEYS),
                        "--value-size", "256", "--iters", str(ITERS), "--rounds", "1"],
     "ksServerSessionFeed", KINDS),
    ("native load", ["native", "load", "--keys", str(10 * KEYS), "--repeat", "1"], None,
     ("crc",)),
)


def measure(log=lambda m: None) -> dict[str, Any]:
    """Every run of :data:`RUNS` under callgrind; per kind the counts of the runs that take
    it, and the stores per instruction."""
    runs, total = [], {k: {"Ir": 0, "Dw": 0} for k in KINDS}
    with tempfile.TemporaryDirectory() as tmp:
        for label, args, toggle, kinds in RUNS:
            log(f"callgrind: {label}")
            counts = _callgrind(args, Path(tmp) / "cg.out", toggle)
            runs.append({"label": label, "args": args, "toggle_collect": toggle,
                         "kinds_taken": list(kinds), "by_kind": counts})
            for k in kinds:
                total[k]["Ir"] += counts[k]["Ir"]
                total[k]["Dw"] += counts[k]["Dw"]
    figures = {k: round(c["Dw"] / c["Ir"], DIGITS) if c["Ir"] else None
               for k, c in total.items()}
    return {"runs": runs, "by_kind": total, "stores_per_instruction": figures}


def stores_per_instruction(doc: dict) -> dict[str, float | None]:
    """The figures of every kind of the format (c_ref's header ``work_stores``): a result
    file's, and for each kind of :data:`SHARED` the figure of the kind whose code it is."""
    figures = dict(doc["stores_per_instruction"])
    for kind, of in SHARED.items():
        figures[kind] = figures[of]
    return figures


def markdown(doc: dict) -> str:
    rows = ["| kind of work | instructions (callgrind) | stores | stores per instruction |",
            "|---|---|---|---|"]
    for k in KINDS:
        c, f = doc["by_kind"][k], doc["stores_per_instruction"][k]
        rows.append(f"| {k} | {c['Ir']:,} | {c['Dw']:,} | "
                    f"{'-' if f is None else f'{f:.{DIGITS}f}'} |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    from kvsim.experiments import measure_cli

    return measure_cli.main(
        argv, module="work_stores", result_name=RESULT_NAME, measure=measure, markdown=markdown,
        description="stores per instruction of each kind of work of c_ref's code, counted "
                    "by callgrind",
        note=("callgrind's Ir and Dw of c_ref's native code by kind of work (module docstring "
              "of kvsim.experiments.work_stores); stores_per_instruction = Dw / Ir, the "
              "figures of c_ref's trace header's work_stores"))


if __name__ == "__main__":
    sys.exit(main())
