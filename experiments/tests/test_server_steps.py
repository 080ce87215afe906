"""The traced server's work constants against their callgrind measurement
(experiments/server_steps.py, results/server-steps-callgrind.json)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from kvsim.experiments import callgrind as CG
from kvsim.experiments import server_steps as SS

ROOT = Path(__file__).resolve().parents[2]
PUBLISHED = ROOT / "results" / SS.RESULT_NAME


def test_every_constant_agrees_with_the_committed_measurement():
    """Each KS_*_WORK of c_ref/callpath.c and c_ref/server.c has a step in STEPS, and its
    value is within TOLERANCE of the committed file's instructions per call, but for the
    constants KNOWN_DRIFT lists: exactly those disagree (a new drift, or a constant brought
    back to its measurement, fails until the list says so)."""
    doc = json.loads(PUBLISHED.read_text())
    constants = SS.c_constants(ROOT / "c_ref")
    assert set(constants) >= {"KS_ZMALLOC_WORK", "KS_CALL_WORK", "KS_QB_ROOM_WORK"}
    lines = SS.agreement(constants, doc)
    disagree = {line.split(" ", 1)[0].rstrip(":") for line in lines}
    assert disagree == set(SS.KNOWN_DRIFT), "\n".join(lines)
    assert set(SS.KNOWN_DRIFT) < set(SS.STEPS) and len(SS.KNOWN_DRIFT) < len(SS.STEPS) / 2


def _doc(figures: dict[str, float | None]) -> dict:
    return {"cells": {cell: {"steps": {n: {"per_call": figures[n]} for n in SS.STEPS
                                       if SS.STEPS[n]["cell"] == cell}}
                      for cell in SS.CELLS}}


def test_agreement_names_each_kind_of_disagreement():
    """A constant off by more than the tolerance, a constant without a step, a step without
    a constant and a step never called: one line each; within the tolerance: none."""
    figures = {n: 100.0 for n in SS.STEPS}
    constants = {n: ("callpath.c", 100) for n in SS.STEPS}
    assert SS.agreement(constants, _doc(figures)) == []
    name = sorted(SS.STEPS)[0]
    ok_high = int(100 * (1 + SS.TOLERANCE[0]))
    assert SS.agreement({**constants, name: ("callpath.c", ok_high)}, _doc(figures)) == []
    (line,) = SS.agreement({**constants, name: ("callpath.c", ok_high + 2)}, _doc(figures))
    assert line.startswith(f"{name} = {ok_high + 2} (c_ref/callpath.c) but measured 100.0")
    (line,) = SS.agreement({**constants, "KS_NEW_WORK": ("server.c", 5)}, _doc(figures))
    assert line.startswith("KS_NEW_WORK: a work constant without a measured step")
    missing = dict(constants)
    del missing[name]
    (line,) = SS.agreement(missing, _doc(figures))
    assert "in STEPS but not defined" in line
    (line,) = SS.agreement(constants, _doc({**figures, name: None}))
    assert "no call of" in line
    # small constants: the absolute slack
    assert SS.agreement({**constants, name: ("callpath.c", 7)}, _doc({**figures, name: 3.0})) \
        == []


def test_step_figure_counts_calls_callers_and_callees():
    """Inclusive instructions of the calls from the named callers, less the named callees'
    inside them, over the calls to the first function."""
    prof = CG.Profile(events=["Ir"], totals={"Ir": 0}, call_costs={
        ("a", "f"): {"calls": 3, "Ir": 300}, ("b", "f"): {"calls": 1, "Ir": 50},
        ("a", "g"): {"calls": 3, "Ir": 30}, ("f", "h"): {"calls": 4, "Ir": 40}})
    step = SS._step("callpath.c", ["f", "g"], minus=("h",))
    assert SS.step_figure(prof, step) == {"calls": 4, "inclusive": 380, "minus": 40,
                                          "per_call": 85.0}
    only_a = SS._step("callpath.c", ["f"], callers=("a",), less=2.0)
    assert SS.step_figure(prof, only_a)["per_call"] == 98.0
    assert SS.step_figure(prof, SS._step("callpath.c", ["nothing"]))["per_call"] is None
    either = SS._step("callpath.c", ["f", "g"], per="any")  # per call of either function
    assert SS.step_figure(prof, either)["per_call"] == round(380 / 7, 1)


def test_clones_count_as_their_function():
    """A compiler's clone (f.constprop.0, f.isra.0, f.part.0) is its function, as caller and
    as callee."""
    prof = CG.Profile(events=["Ir"], totals={"Ir": 0}, call_costs={
        ("a.constprop.0", "f.part.0"): {"calls": 2, "Ir": 40},
        ("f.part.0", "h.isra.0"): {"calls": 2, "Ir": 10}})
    step = SS._step("callpath.c", ["f"], callers=("a",), minus=("h",))
    assert SS.step_figure(prof, step)["per_call"] == 15.0
    assert SS.base_name("hdr_record_values.constprop.0.isra.0") == "hdr_record_values"


def test_the_c_constants_are_read_from_the_defines(tmp_path):
    (tmp_path / "callpath.c").write_text("#define KS_A_WORK 12 /* x */\n#define KS_B 3\n"
                                         "  #define KS_C_WORK 4\n#define KS_D_WORK 7\n")
    (tmp_path / "server.c").write_text("#define KS_QB_ROOM_WORK 34\n")
    assert SS.c_constants(tmp_path) == {"KS_A_WORK": ("callpath.c", 12),
                                        "KS_D_WORK": ("callpath.c", 7),
                                        "KS_QB_ROOM_WORK": ("server.c", 34)}


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("valgrind") is None or shutil.which("redis-benchmark") is None,
                    reason="valgrind or redis-tools not installed")
def test_measure_real_server_tiny(tmp_path):
    """The command on a tiny run: every step of every cell is measured (called at least
    once), and the file has the committed file's keys."""
    out = tmp_path / "steps.json"
    assert SS.main(["--keys", "300", "--requests", "200", "--warmup-requests", "50",
                    "--clients", "2", "--out", str(out)]) == 0
    doc = json.loads(out.read_text())
    for cell in SS.CELLS:
        for name, st in SS.STEPS.items():
            if st["cell"] == cell:
                assert doc["cells"][cell]["steps"][name]["calls"] > 0, (cell, name)
    assert set(doc) == set(json.loads(PUBLISHED.read_text()))


def test_a_step_excludes_the_steps_inside_it(monkeypatch):
    """step_figures: a step's figure less the figures of its minus_steps, from one profile."""
    prof = CG.Profile(events=["Ir"], totals={"Ir": 0}, call_costs={
        ("main", "outer"): {"calls": 2, "Ir": 1000}, ("outer", "inner"): {"calls": 2, "Ir": 60},
        ("outer", "cmd"): {"calls": 2, "Ir": 400}})
    monkeypatch.setattr(SS, "STEPS", {
        "KS_OUTER_WORK": SS._step("callpath.c", ["outer"], minus=("cmd",),
                                  minus_steps=("KS_INNER_WORK",)),
        "KS_INNER_WORK": SS._step("callpath.c", ["inner"])})
    figs = SS.step_figures(prof)
    assert figs["KS_INNER_WORK"]["per_call"] == 30.0
    assert figs["KS_OUTER_WORK"]["per_call"] == 270.0  # (1000 - 400) / 2 - 30
    assert figs["KS_OUTER_WORK"]["minus_steps"] == {"KS_INNER_WORK": 30.0}
