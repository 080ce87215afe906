"""Every code block of README.md and of the documentation site runs as written.

The rules (docs/reference/docs.md says the same for authors):

* A fenced block is run or shown by its fence type. ``sh`` and ``python`` blocks run;
  ``text`` (output, or a sketch) and ``toml``/``yaml``/``json`` (file contents) are shown
  only. Any other fence type fails this test, so a block cannot slip through unrun.
* A page's blocks run in order in one scratch directory (later blocks use the files earlier
  ones write), ``sh`` with ``bash -euo pipefail``, ``python`` with the interpreter running
  the tests, kvsim's commands first on PATH, a cache directory of their own (a calibration
  made by a page stays in the scratch directory) and ``$KVSIM_DOCS_PORT`` set to a free
  port. Each block must exit 0.
* A ``python`` block whose first line is ``# file: NAME`` is a file the page shows: it is
  written to NAME, and a later block runs it.
* ``<!-- test: A => B -->`` on the line before a block replaces A by B in what the test
  runs (the page says so in its text, e.g. smaller sizes; ``make X`` is run as
  ``make -n X`` this way, which checks the target exists without running it).
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RUN = {"sh", "python"}
SHOWN = {"text", "toml", "yaml", "json"}
FENCE = re.compile(r"^(?P<subs>(?:<!-- test: .*? -->\n)*)```(?P<lang>[\w-]*)[^\n]*\n"
                   r"(?P<code>.*?)^```\s*$", re.M | re.S)
SUB = re.compile(r"<!-- test: (.*?) => (.*?) -->")


def pages() -> list[Path]:
    docs = sorted(p for p in (ROOT / "docs").rglob("*.md") if "tests" not in p.parts)
    return [ROOT / "README.md", *docs]


def blocks(text: str) -> list[tuple[str, str, list[tuple[str, str]]]]:
    """``(fence type, code, substitutions)`` of each fenced block, in order."""
    return [(m["lang"], m["code"], SUB.findall(m["subs"])) for m in FENCE.finditer(text)]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_every_block_has_a_known_fence_type():
    for page in pages():
        for lang, code, _ in blocks(page.read_text()):
            assert lang in RUN | SHOWN, (f"{page.relative_to(ROOT)}: a ```{lang} block "
                                         f"(run: {sorted(RUN)}; shown only: {sorted(SHOWN)})"
                                         f"\n{code[:200]}")


def test_the_rules_catch_a_block_and_its_substitution():
    text = "x\n<!-- test: --scale full => --scale small -->\n```sh\nkvsim a --scale full\n```\n"
    assert blocks(text) == [("sh", "kvsim a --scale full\n", [("--scale full",
                                                               "--scale small")])]


RUNNABLE = [p for p in pages() if any(lang in RUN for lang, _, _ in blocks(p.read_text()))]


@pytest.mark.parametrize("page", RUNNABLE, ids=lambda p: str(p.relative_to(ROOT)))
def test_page_blocks_run(page: Path, tmp_path: Path):
    env = dict(os.environ, PATH=str(Path(sys.executable).parent) + os.pathsep
               + os.environ.get("PATH", ""), XDG_CACHE_HOME=str(tmp_path / ".cache"),
               KVSIM_DOCS_PORT=str(free_port()), KVSIM_REPO=str(ROOT), MPLBACKEND="Agg")
    env.pop("KVSIM_NOTEBOOK_DATA", None)
    for lang, code, subs in blocks(page.read_text()):
        if lang not in RUN:
            continue
        for a, b in subs:
            assert a in code, f"{page.name}: the substitution {a!r} matches nothing in\n{code}"
            code = code.replace(a, b)
        first = code.split("\n", 1)[0]
        if lang == "python" and first.startswith("# file: "):
            (tmp_path / first.removeprefix("# file: ").strip()).write_text(code)
            continue
        cmd = ["bash", "-euo", "pipefail", "-c", code] if lang == "sh" else \
            [sys.executable, "-c", code]
        res = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True,
                             timeout=900)
        if res.returncode != 0:
            pytest.fail(f"{page.relative_to(ROOT)} ({lang}) failed:\n{code}\n"
                        f"--- stdout\n{res.stdout[-3000:]}\n--- stderr\n{res.stderr[-3000:]}")
