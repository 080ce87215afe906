"""The README's newcomer sections run as written: every ```sh and ```python block of
"Ask a question", "Your own CPU", "From Python" and "Trace length and warm-up", in order, in
one scratch directory (later blocks use the files earlier ones write)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from kvsim import artifacts

ROOT = artifacts.source_root()
SECTIONS = ("Ask a question", "Your own CPU", "From Python", "Trace length and warm-up")
BLOCK = re.compile(r"^```(\w+)\n(.*?)^```", re.M | re.S)


def readme_blocks(text: str) -> list[tuple[str, str, str]]:
    """``(section, language, code)`` of the fenced blocks in :data:`SECTIONS`, in order."""
    out = []
    for part in re.split(r"^## ", text, flags=re.M)[1:]:
        title, _, body = part.partition("\n")
        if title.strip() in SECTIONS:
            out += [(title.strip(), lang, code) for lang, code in BLOCK.findall(body)]
    return out


def test_every_section_has_runnable_blocks():
    assert ROOT is not None, "the README test runs from a checkout"
    blocks = readme_blocks((ROOT / "README.md").read_text())
    assert {s for s, _, _ in blocks} == set(SECTIONS)
    assert {lang for _, lang, _ in blocks} <= {"sh", "python"}


def test_readme_blocks_run(tmp_path):
    blocks = readme_blocks((ROOT / "README.md").read_text())
    env = dict(os.environ, PATH=str(Path(sys.executable).parent) + os.pathsep
               + os.environ.get("PATH", ""))
    for section, lang, code in blocks:
        cmd = ["bash", "-euo", "pipefail", "-c", code] if lang == "sh" else \
            [sys.executable, "-c", code]
        res = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True,
                             timeout=600)
        if res.returncode != 0:
            pytest.fail(f"README section {section!r} ({lang}) failed:\n{code}\n{res.stderr}")
        assert res.stdout.strip(), f"README section {section!r} printed nothing:\n{code}"
