"""The benchmarks' renderings (bench/renderings.py) in the one rendering mechanism."""

import json
from pathlib import Path

import pytest

from bench import renderings
from kvsim.experiments import render

ROOT = Path(__file__).resolve().parents[2]


def test_the_benchmarks_renderings_are_in_the_one_registry():
    for name in ("speed", "engine_stalls_summary", "simulate_raw_traces_summary", "bench_sim",
                 "bench_instructions", "bench_threads", "bench_presets"):
        assert name in render.RENDERINGS, name
    assert render.RENDERINGS["bench_presets"].render is renderings.presets.render_table


def test_the_performance_page_agrees_with_its_result_files():
    path = ROOT / "docs" / "performance.md"
    text = path.read_text()
    assert text.count("<!-- kvsim:results bench_") == 4
    assert text.count("_summary -->") == len(renderings.AB_FILES)
    assert render.render_text(text, ROOT, "docs/performance.md",
                              render.link_prefix(path, ROOT))[1] == []


def test_an_ab_file_names_each_sides_trace_storage():
    """ab.py --b-codec: the sides line says which traces each side read; a file without
    codecs (every earlier A B A B) says nothing of them."""
    doc = json.loads((ROOT / "results/simulate-raw-traces.json").read_text())
    assert doc["codecs"] == {"a": None, "b": "raw"}
    text = renderings.render_ab_summary(doc, "results/simulate-raw-traces.json")
    assert "A: this tree, the traces as written; B: this tree, the traces stored raw;" in text
    del doc["codecs"]
    assert "A: this tree; B: this tree; 6 rounds" in renderings.render_ab_summary(doc, "x.json")


@pytest.mark.parametrize("command", [["-m", "kvsim.experiments.render"], ["-m", "bench", "render"]])
def test_both_commands_render_every_region(command, tmp_path) -> None:
    """In a checkout, the experiments' command renders the benchmarks' regions too."""
    import subprocess
    import sys

    res = subprocess.run([sys.executable, *command, "--check", "README.md",
                          "docs/performance.md", "sim/GEM5.md"],
                         capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert res.returncode == 0, res.stderr
