"""The reading notes under the tables are checked against the figures: every speedup a
page's text states (a number followed by ``x``, such as ``2.53x``) must be, at the decimals
shown, a figure of one of the page's generated regions, of a result file the page cites
(``results/....json``), or of the seed table (``kvsim.experiments.seeds``: the upstream
figures and what is derived from them). A figure typed from memory, or left behind when a
result file changed, fails."""

from __future__ import annotations

import inspect
import json
import re
from pathlib import Path

import pytest

from kvsim.experiments import seeds

ROOT = Path(__file__).resolve().parents[2]
REGION = re.compile(r"<!-- kvsim:results [\w.-]+ -->\n.*?<!-- /kvsim:results -->", re.S)
FENCE = re.compile(r"^```.*?^```", re.S | re.M)
CODE_SPAN = re.compile(r"`[^`\n]+`")  # an example in the text, not a figure
FIGURE = re.compile(r"(?<![\w.\[-])(\d+\.\d+)x\b")
CITED = re.compile(r"results/[\w./-]+\.json")


def numbers(obj, out: list[float]) -> list[float]:
    if isinstance(obj, bool):
        return out
    if isinstance(obj, int | float):
        out.append(float(obj))
    elif isinstance(obj, str):
        out.extend(float(x) for x in re.findall(r"\d+\.\d+", obj))
    elif isinstance(obj, dict):
        for v in obj.values():
            numbers(v, out)
    elif isinstance(obj, list | tuple):
        for v in obj:
            numbers(v, out)
    return out


def seed_figures() -> list[float]:
    """The seed module's constants, and what its functions without arguments return."""
    out: list[float] = []
    for name, value in vars(seeds).items():
        if name.startswith("_") or inspect.ismodule(value):
            continue
        if inspect.isfunction(value) and value.__module__ == seeds.__name__:
            if not any(p.default is p.empty for p in inspect.signature(value).parameters.values()):
                numbers(value(), out)
        elif not callable(value):
            numbers(value, out)
    return out


def unsupported(text: str, root: Path, extra: list[float]) -> list[str]:
    """The speedups of ``text``'s prose that no cited figure supports."""
    cited: list[float] = list(extra)
    for rel in set(CITED.findall(text)):
        path = root / rel
        if path.is_file():
            numbers(json.loads(path.read_text()), cited)
    regions = "".join(REGION.findall(text))
    prose = CODE_SPAN.sub("", FENCE.sub("", REGION.sub("", text)))
    bad = []
    for m in FIGURE.finditer(prose):
        shown = m.group(1)
        digits, value = len(shown.split(".")[1]), float(shown)
        if shown in regions or any(abs(round(n, digits) - value) < 1e-9 for n in cited):
            continue
        bad.append(f"{shown}x in '...{prose[max(0, m.start() - 50):m.end()]}'")
    return bad


PAGES = [ROOT / "README.md",
         *sorted(p for p in (ROOT / "docs").rglob("*.md") if "tests" not in p.parts)]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_speedup_in_the_text_is_a_cited_figure(page):
    bad = unsupported(page.read_text(), ROOT, seed_figures())
    assert not bad, (f"{page.relative_to(ROOT)}: speedups no generated region, cited result "
                     f"file or seed supports:\n  " + "\n  ".join(bad))


def test_a_figure_no_file_supports_is_caught(tmp_path):
    (tmp_path / "results").mkdir()
    (tmp_path / "results/r.json").write_text(json.dumps({"speedup": 2.531}))
    page = "Natively 2.53x ([`results/r.json`](results/r.json)), and 2.61x from memory.\n"
    (bad,) = unsupported(page, tmp_path, [])
    assert bad.startswith("2.61x in")
    assert unsupported(page.replace("2.61x", "2.53x"), tmp_path, []) == []
