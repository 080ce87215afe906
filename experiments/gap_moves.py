"""What a change of c_ref's gap model moves: validation sides traced by more than one c_ref
build, simulated on CPU files, against the native time of a published validation.

``python -m kvsim.experiments.gap_moves --arm NAME CREF CPU [--arm ...] [--row ROW ...]
[--validation FILE] -o results/FILE``. Each arm is a c_ref CLI (a ``kvsim-cref``; ``-`` for
the build at hand) and a CPU file. Each row's two sides are the validation's (its pairs at
full scale: the same options, warm setup and warm-up operations), traced by the arm's c_ref
and simulated on the arm's CPU file by the validation's own ``predict`` cell. Per side the
result holds each arm's predicted ns per operation and its ratio to the native ns per
operation in the validation file's time table (``validation_time``), and per arm the SHA-256
of its c_ref binary and of its CPU file.

A c_ref build of another commit, for an arm: ``git archive REV c_ref traces | tar -x -C DIR
&& make -C DIR/c_ref`` (its CLI: ``DIR/c_ref/build/kvsim-cref``). Traces and simulations are
deterministic and time nothing: run it niced.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Any

RESULT_NAME = "gap-moves.json"
ROWS = ("GET d10 naive -> lookahead 16", "MGET hashtable none -> batch")
VALIDATION = "results/experiments/validation-xeon-m167.json"
SIDES = (("a", "baseline"), ("b", "variant"))


@contextmanager
def _cref(cli: str):
    """The c_ref CLI ``cli`` as the one kvsim runs (``-``: the build at hand)."""
    from kvsim import artifacts

    env = artifacts.ENV[artifacts.CREF_CLI]
    old = os.environ.get(env)
    if cli != "-":
        os.environ[env] = str(Path(cli).resolve())
    try:
        yield artifacts.path(artifacts.CREF_CLI)
    finally:
        if old is None:
            os.environ.pop(env, None)
        else:
            os.environ[env] = old


def native_ns(path: Path) -> dict[tuple[str, str], float]:
    """(row, side) -> native ns per operation in a validation result's time table."""
    try:
        doc = json.loads(path.read_text())
        table = next(t for t in doc["tables"] if t["name"] == "validation_time")
    except (OSError, ValueError, KeyError, StopIteration) as e:
        raise ValueError(f"--validation {path}: no validation_time table ({e})") from None
    col = {c: i for i, c in enumerate(table["columns"])}
    return {(r[col["row"]], r[col["side"]]): r[col["native_ns_per_op"]] for r in table["rows"]}


def measure(log, a: argparse.Namespace) -> dict[str, Any]:
    """Every side of every row under every arm (module docstring)."""
    from kvsim.experiments import cells, validation
    from kvsim.provenance import file_sha256

    pairs = {p["row"]: p for p in validation._pairs("full")}
    rows = a.row or list(ROWS)
    for row in rows:
        if row not in pairs:
            raise ValueError(f"--row {row!r}: not a validation row")
    native = native_ns(Path(a.validation))
    arms = []
    for name, cli, cpu in a.arm:
        if not Path(cpu).is_file():
            raise ValueError(f"--arm {name}: no CPU file {cpu}")
        with _cref(cli) as binary:
            if not binary.is_file():
                raise ValueError(f"--arm {name}: no c_ref CLI {binary}")
            arms.append({"name": name, "cref": cli, "cref_sha256": file_sha256(binary),
                         "cpu": cpu, "cpu_sha256": file_sha256(cpu)})
    out = []
    for row in rows:
        for side, label in SIDES:
            nat = native.get((row, label))
            rec: dict[str, Any] = {"row": row, "side": label, "native_ns_per_op": nat,
                                   "arms": {}}
            for arm in arms:
                log(f"{row}, {label}: traced by {arm['name']}'s c_ref, simulated on "
                    f"{arm['cpu']}")
                spec = validation.predict_spec(pairs[row], side, arm["cpu"])
                with _cref(arm["cref"]):
                    m = cells.run_cell(spec)["metrics"]
                ns = m["ns_per_op"]
                rec["arms"][arm["name"]] = {
                    "ns_per_op": ns, "cycles_per_op": m["cycles_per_op"],
                    "ratio": round(ns / nat, 4) if ns and nat else None}
            rec["options"] = spec["options"]
            out.append(rec)
    return {"validation": a.validation, "arms": arms, "sides": out}


def markdown(doc: dict[str, Any]) -> str:
    names = [arm["name"] for arm in doc["arms"]]
    head = "| row | side | native ns/op | " + " | ".join(
        f"{n}: ns/op (/ native)" for n in names) + " |"
    rows = [head, "|" + "---|" * (3 + len(names))]
    for r in doc["sides"]:
        cells = []
        for n in names:
            x = r["arms"][n]
            ratio = f" ({x['ratio']:.3f})" if x["ratio"] is not None else ""
            cells.append(f"{x['ns_per_op']:.1f}{ratio}")
        nat = f"{r['native_ns_per_op']:.1f}" if r["native_ns_per_op"] else "-"
        rows.append(f"| {r['row']} | {r['side']} | {nat} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


def _options(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--arm", nargs=3, action="append", required=True,
                    metavar=("NAME", "CREF", "CPU"),
                    help="a c_ref CLI (- for the build at hand) and a CPU file")
    ap.add_argument("--row", action="append", help=f"a validation row (default: {ROWS})")
    ap.add_argument("--validation", default=VALIDATION,
                    help="the validation result whose native ns/op the sides are read against")


def main(argv: list[str] | None = None) -> int:
    from kvsim.experiments import measure_cli

    return measure_cli.main(
        argv, module="gap_moves", result_name=RESULT_NAME, measure=measure,
        markdown=markdown, options=_options,
        description=("validation sides traced by c_ref builds and simulated on CPU files, "
                     "against a validation's native time"),
        note=("predicted ns per operation of validation sides (the validation's predict "
              "cell: its options, warm setup and warm-up operations), each arm a c_ref CLI "
              "and a CPU file; ratio = predicted / the validation's native ns per operation; "
              "module docstring of kvsim.experiments.gap_moves"))


if __name__ == "__main__":
    sys.exit(main())
