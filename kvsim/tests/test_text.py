"""The tree describes the project, not its history: no narration of who ran what when, no
absolute machine paths, no citations of documents outside the repository.

What a pattern can catch is caught here, over every tracked text file. Result files
(``results/``), other tools' golden data and the upstream figures (``experiments/data/``,
each dated by the upstream comment it cites) are exempt: dates and machines belong there.
"""

from __future__ import annotations

import re
import subprocess

import pytest

from kvsim import artifacts

ROOT = artifacts.source_root()

# Each pattern is assembled from pieces so this file does not match itself.
FORBIDDEN = {
    "absolute machine path": re.compile(r"(?<![\w.])/(?:" + "|".join(
        ["work", "home", "root", "old_root", "scratch"]) + r")/"),
    "document outside the repository": re.compile(
        r"\.\./" + "shared|" + r"\bshared/(?:design|golden|seeds|hooks)\b"),
    "narration of sessions": re.compile(
        r"\b(?:this|that|each|every|one|previous|next|last|earlier|later)\s+" + "session"
        + r"s?\b|\b" + "session" + r"\s+\d+\b|" + "session" + r"'s\b", re.I),
    "narration of people": re.compile(
        r"\banother\s+" + "engineer" + r"\b|\b(?:I|we)\s+(?:ran|measured|tried|found)\b"),
    "narration of trees": re.compile(r"\b(?:final|old|new)\s+" + "tree" + r"\b", re.I),
    "dated run": re.compile(r"\b20\d\d-[01]\d-[0-3]\d(?:[ T,]|\s+\d\d:\d\d)", re.I),
}
RESULT_CITATION = re.compile(r"\bresults/(?:[\w.-]+/)*[\w.-]+\.(?:json|csv|parquet|toml)\b")
EXEMPT_PREFIXES = ("results/", "experiments/data/upstream_results.csv")
EXEMPT_PARTS = ("/tests/data/",)


def _tracked_text_files():
    assert ROOT is not None, "the text checks run from a checkout"
    names = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z"], capture_output=True,
                           check=True).stdout.decode().split("\0")
    for name in filter(None, names):
        if name.startswith(EXEMPT_PREFIXES) or any(p in "/" + name for p in EXEMPT_PARTS):
            continue
        path = ROOT / name
        if not path.is_file():
            continue
        data = path.read_bytes()
        if b"\0" in data[:4096]:
            continue  # binary
        yield name, data.decode("utf-8", errors="replace")


def test_patterns_catch_what_they_are_for():
    samples = {
        "absolute machine path": "see " + "/work" + "/shared/design/x.md",
        "document outside the repository": "values from " + "shared" + "/design/cpu-facts.toml",
        "narration of sessions": "measured in this " + "session" + " on the guest",
        "narration of people": "written by another " + "engineer",
        "narration of trees": "rerun on the final " + "tree",
        "dated run": "Measured " + "2026-11-22" + " 04:26 UTC",
    }
    for what, text in samples.items():
        assert FORBIDDEN[what].search(text), what
    assert not any(p.search('@pytest.fixture(scope="session")') for p in FORBIDDEN.values())
    assert not any(p.search("a path under sim/_engine/ or ./traces/") for p in FORBIDDEN.values())
    assert RESULT_CITATION.search("Source: `results/demo.json`, at commit abc on " + "2026-11-23")
    assert RESULT_CITATION.search("Source: `results/experiments/headline.json`, on " + "2026-11-23")
    assert not RESULT_CITATION.search("results/ on " + "2026-11-23")


@pytest.mark.parametrize("what", sorted(FORBIDDEN))
def test_no_tracked_file_has(what):
    pattern = FORBIDDEN[what]
    hits = []
    for name, text in _tracked_text_files():
        if name == "kvsim/tests/test_text.py":
            continue
        for n, line in enumerate(text.splitlines(), 1):
            if what == "dated run" and RESULT_CITATION.search(line):
                continue  # a figure's provenance, rendered from or citing its result file
            if pattern.search(line):
                hits.append(f"{name}:{n}: {line.strip()[:100]}")
    assert not hits, f"{what}:\n" + "\n".join(hits[:40])
