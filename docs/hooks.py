"""MkDocs hooks of the documentation site (mkdocs.yml ``hooks:``).

* **The repository at its own paths.** Every file of the repository outside ``docs/`` (the
  result files under ``results/``, the component documents such as ``sim/MODEL.md``, the
  sources they link to) is added to the site at its path from the repository root, so that a
  page links ``../results/experiments/iterate.png`` or ``../sim/MODEL.md`` and the component
  documents' own relative links keep working. The top-level README.md is left out (the site's
  front page is ``docs/index.md``). In those documents a link to something the site does not
  have (a folder, a file outside the repository) becomes plain text; in the pages of
  ``docs/`` it stays a link, and ``mkdocs build --strict`` fails on it.
* **Generated regions are checked.** A region between ``<!-- kvsim:results NAME -->`` and
  ``<!-- /kvsim:results -->`` (:mod:`kvsim.experiments.render`) must equal the rendering of
  its result file; where it does not, the build fails naming the page, the region and the
  command that rewrites it.
"""

from __future__ import annotations

import os
import posixpath
import re
import subprocess
from pathlib import Path

from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[1]
SKIP_PARTS = {".git", ".venv", "build", "dist", "node_modules", "__pycache__", ".ci"}
_LINK = re.compile(r"(?<!!)\[([^\]\n]*)\]\(([^)\s]+)\)")
_REF = re.compile(r"(?<![\\!])\[([^\]\n]+)\]\[([^\]\n]+)\]")


def repository_files() -> list[str]:
    """The repository's files outside docs/, as paths from its root (git's list in a clone,
    else a walk that leaves out build products)."""
    try:
        out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True,
                             check=True).stdout.decode()
        paths = [p for p in out.split("\0") if p]
    except (OSError, subprocess.CalledProcessError):
        paths = []
        for d, dirs, names in os.walk(ROOT, followlinks=True):
            dirs[:] = [x for x in dirs if x not in SKIP_PARTS and not x.endswith(".egg-info")]
            paths += [os.path.relpath(os.path.join(d, n), ROOT) for n in names]
    return sorted(p for p in paths
                  if not p.startswith("docs/") and p not in ("README.md", "mkdocs.yml")
                  and (ROOT / p).is_file())


API_DIR = ROOT / "build" / "docs-api"


def package_layout() -> None:
    """``build/docs-api/kvsim``: the import package as the wheel lays it out (pyproject.toml's
    ``[tool.scikit-build.wheel.packages]``: ``kvsim.sim`` is ``sim/``, ...), as links, for
    mkdocstrings to read the sources of ``kvsim.*`` statically."""
    import shutil
    import tomllib

    packages = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["scikit-build"][
        "wheel"]["packages"]
    shutil.rmtree(API_DIR, ignore_errors=True)
    for dst, src in sorted(packages.items()):  # "kvsim" before "kvsim/sim"
        if not (ROOT / src).is_dir():
            continue
        target = API_DIR / dst
        target.mkdir(parents=True, exist_ok=True)
        for item in (ROOT / src).iterdir():
            package = item.is_dir() and (item / "__init__.py").is_file() and \
                item.name != "tests"
            if (item.suffix == ".py" or package) and not (target / item.name).exists():
                (target / item.name).symlink_to(item)


# made when MkDocs loads this file, before the plugins' on_config: mkdocstrings keeps only
# the search paths that exist when it starts
package_layout()


def on_files(files: Files, config) -> Files:
    have = {f.src_uri for f in files}
    for rel in repository_files():
        if rel not in have:
            files.append(File(rel, str(ROOT), config["site_dir"], config["use_directory_urls"]))
    return files


def _mounted(page, config) -> bool:
    """A file of the repository outside docs/ (on_files), not a page of docs/."""
    return not Path(page.file.abs_src_path).is_relative_to(Path(config["docs_dir"]))


def _unlink_missing(markdown: str, src_uri: str, files: Files) -> str:
    """A component document's links to what the site lacks, as plain text."""
    base = posixpath.dirname(src_uri)

    def sub(m: re.Match[str]) -> str:
        text, target = m.group(1), m.group(2)
        if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
            return m.group(0)
        path = target.split("#", 1)[0]
        rel = posixpath.normpath(posixpath.join(base, path))
        if files.get_file_from_path(rel) is not None:
            return m.group(0)
        if rel.startswith("docs/") and files.get_file_from_path(rel[5:]) is not None:
            # a component document's link to a page of the site (docs/ is the site's top)
            to = posixpath.relpath(rel[5:], base or ".")
            return f"[{text}]({to}{target[len(path):]})"
        return text if text.startswith("`") else f"`{text}`" if text == path else text

    markdown = _LINK.sub(sub, markdown)
    # ``[structure tag][kind]`` is an index in prose, not a reference link (autorefs would
    # look for an anchor ``kind``) unless the document defines it
    defined = set(re.findall(r"^\[([^\]\n]+)\]:", markdown, re.M))
    return _REF.sub(lambda m: m.group(0) if m.group(2) in defined else
                    "\\[" + m.group(1) + "\\]\\[" + m.group(2) + "\\]", markdown)


def on_page_markdown(markdown: str, page, config, files: Files) -> str:
    from kvsim.experiments import render

    render.load_benchmark_renderings()  # docs/performance.md's regions are bench/'s
    path = Path(page.file.abs_src_path)
    prefix = render.link_prefix(path, ROOT)
    where = os.path.relpath(path, ROOT)
    try:
        _, changed = render.render_text(markdown, ROOT, where, prefix)
    except render.RenderError as exc:
        raise PluginError(f"{where}: {exc}") from None
    if changed:
        raise PluginError(f"{where}: regions {', '.join(changed)} disagree with their result "
                          f"files; run python -m kvsim.experiments.render {where}")
    if _mounted(page, config):
        markdown = _unlink_missing(markdown, page.file.src_uri, files)
    return markdown
