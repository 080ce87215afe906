"""Provenance of a measured figure: which code, which machine, when.

Every command that measures something writes a result file through :func:`write_result`:
a JSON document whose ``provenance`` key holds the kvsim version, the git commit (and
whether the tree had uncommitted changes), a description of the machine (CPU model and
flags that matter, cores, memory, kernel, hypervisor) and the UTC date. Docs cite those
files (``results/`` at the repository root holds the published ones) instead of restating
figures by hand. ``python -m kvsim.provenance`` prints the block, for shell benchmarks.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

from kvsim import __version__, artifacts

RESULTS_DIR_NAME = "results"


def git_state(root: Path | None = None) -> dict[str, Any]:
    """``{"commit": sha or None, "dirty": bool or None}`` of the checkout kvsim runs from."""
    root = root or artifacts.source_root()
    if root is None:
        return {"commit": os.environ.get("KVSIM_GIT_COMMIT") or None, "dirty": None}
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"],
                              capture_output=True, text=True, timeout=10, check=False)
        status = subprocess.run(["git", "-C", str(root), "status", "--porcelain",
                                 "--untracked-files=no"],
                                capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return {"commit": None, "dirty": None}
    if head.returncode != 0:
        return {"commit": None, "dirty": None}
    return {"commit": head.stdout.strip(), "dirty": bool(status.stdout.strip())}


def _cpuinfo() -> dict[str, str]:
    out: dict[str, str] = {}
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return out
    for line in text.splitlines():
        if not line.strip():
            break  # the first processor is enough
        key, _, value = line.partition(":")
        out[key.strip()] = value.strip()
    return out


def load_average_1m() -> float | None:
    """The 1-minute load average now: other work on the machine (other tenants, builds)."""
    return round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None


AUTOGROUP = Path("/proc/sys/kernel/sched_autogroup_enabled")


def sched_autogroup(path: Path = AUTOGROUP) -> bool | None:
    """Whether Linux groups processes by the shell that started them, for the scheduler
    (``kernel.sched_autogroup_enabled``): while it is on, ``nice`` ranks processes only
    within their own group, so a niced build started from another shell still takes its
    full share of the cores beside a measurement. None where the setting does not exist."""
    try:
        return path.read_text().strip() == "1"
    except OSError:
        return None


def machine() -> dict[str, Any]:
    """What the figures were measured on; read fresh on every call (never assumed)."""
    info = _cpuinfo()
    flags = set(info.get("flags", "").split())
    try:
        mem_kib = int(next(ln.split()[1] for ln in Path("/proc/meminfo").read_text()
                           .splitlines() if ln.startswith("MemTotal:")))
    except (OSError, StopIteration, ValueError):
        mem_kib = None
    return {
        "cpu_model": info.get("model name") or platform.processor() or platform.machine(),
        "cpu_family": info.get("cpu family"),
        "cpu_model_number": info.get("model"),
        "cpu_mhz": info.get("cpu MHz"),
        "cache_size": info.get("cache size"),
        "hypervisor": "hypervisor" in flags,
        "arch": platform.machine(),
        "cores": os.cpu_count(),
        "memory_gib": round(mem_kib / 2**20, 1) if mem_kib else None,
        "kernel": platform.release(),
        # other work on the machine while measuring (shared guests: other tenants, builds)
        "load_average_1m": load_average_1m(),
        "sched_autogroup": sched_autogroup(),
        "hostname": platform.node(),
        "python": platform.python_version(),
    }


def date_utc() -> str:
    """Now, as a result file's ``date_utc``."""
    return _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def command() -> str | None:
    """This process's command line, as a result file's ``command`` (:func:`scrub_command`)."""
    return scrub_command([Path(sys.argv[0]).name, *sys.argv[1:]]) if sys.argv else None


def provenance() -> dict[str, Any]:
    """The ``provenance`` block of a result file."""
    return {
        "kvsim_version": __version__,
        **git_state(),
        "machine": machine(),
        "date_utc": date_utc(),
        "command": command(),
    }


#: what an absolute path outside the checkout reads as, by the option it is the value of
_PATH_ROLES = {"-o": "DIR", "--output": "DIR", "--out": "FILE"}


def scrub_word(word: str, option: str | None = None, root: Path | None = None) -> str:
    """One word of a recorded command without the machine's paths: an absolute path inside
    the checkout ``root`` becomes relative to it, one under the home directory ``~/...``,
    any other absolute path the role of its option (``DIR`` for ``-o``/``--output``,
    ``FILE`` for ``--out``, else ``PATH``). ``--opt=/abs`` is scrubbed after its ``=``;
    other words are kept."""
    if word.startswith("--") and "=" in word:
        opt, _, value = word.partition("=")
        return f"{opt}={scrub_word(value, opt, root)}"
    if not word.startswith("/"):
        return word
    known = _in_known_folder(Path(word), root)
    return known if known is not None else _PATH_ROLES.get(option or "", "PATH")


def _in_known_folder(path: Path, root: Path | None) -> str | None:
    """Absolute ``path`` relative to the checkout ``root`` where inside it, as ``~/...``
    under the home directory, else None."""
    for base, show in ((root, None), (Path.home(), "~")):
        if base is not None and base != Path("/") and path.is_relative_to(base):
            rel = path.relative_to(base).as_posix()
            return rel if show is None else f"{show}/{rel}".rstrip("/.")
    return None


def shown_path(path: str | os.PathLike | None, root: Path | None = None) -> str | None:
    """A file's path as a result records or a table shows it, never a machine's absolute
    path: inside the checkout (``root``, by default the one kvsim runs from) relative to it,
    under the home directory ``~/...``, else the file's name alone (a scratch folder names
    no file a reader has; the SHA-256 recorded beside it identifies the file). A relative
    path is taken from the current directory. None and "" are returned as they are."""
    if not path:
        return path if path is None else str(path)
    full = Path(os.path.abspath(path))
    known = _in_known_folder(full, root or artifacts.source_root())
    return known if known is not None else full.name


def scrub_command(argv: list[str], root: Path | None = None) -> str:
    """``argv`` as one line a result file can publish: the program's name (``kvsim`` for
    ``python -m kvsim``), then each argument through :func:`scrub_word`; an empty argument
    reads ``""``, so that the line splits into as many words as ``argv`` had."""
    root = root or artifacts.source_root()
    prog = "kvsim" if argv and argv[0] == "__main__.py" else (argv[0] if argv else "")
    words, prev = [prog], None
    for word in argv[1:]:
        words.append(scrub_word(word, prev, root) if word else '""')
        prev = word
    return " ".join(words)


def scrub_line(command: str) -> str:
    """A command already recorded as one line, through :func:`scrub_command` (idempotent:
    result files written before the scrub existed render the same way)."""
    return scrub_command(command.split())


def file_sha256(path: str | os.PathLike) -> str:
    """The SHA-256 of a file's bytes, 64 hex digits: how a result names a binary or CPU file
    it used (a caller that keys by it keeps a prefix). OSError where it cannot be read."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def write_atomic(path: str | os.PathLike, data: str | bytes) -> Path:
    """Write ``data`` to ``path`` through a temporary file renamed over it, so a file that
    exists is whole (its folder is made if missing); return the path. Every result, cell
    and published copy is written by this."""
    path = Path(path)
    if path.exists() and not path.is_file():  # /dev/null, a pipe: a rename would replace it
        with open(path, "wb" if isinstance(data, bytes) else "w") as f:
            f.write(data)
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        if isinstance(data, bytes):
            tmp.write_bytes(data)
        else:
            tmp.write_text(data)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def write_result(path: str | os.PathLike, payload: dict[str, Any]) -> Path:
    """Write ``payload`` plus its provenance to ``path`` (JSON) atomically; return the path."""
    doc = {"provenance": provenance(), **payload}
    return write_atomic(path, json.dumps(doc, indent=2, default=str) + "\n")


def publish(prog: str, path: str | os.PathLike, payload: dict[str, Any]) -> int:
    """A benchmark command's last step: :func:`write_result`, then ``# wrote PATH`` on
    stdout; return the exit status (0, or 1 with one line ``PROG: error: --out PATH: why`` on
    stderr when the file cannot be written)."""
    try:
        write_result(path, payload)
    except OSError as exc:
        print(f"{prog}: error: --out {path}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    print(f"# wrote {path}")
    return 0


def results_dir() -> Path | None:
    """``results/`` of the checkout (where published result files live), or None."""
    root = artifacts.source_root()
    return root / RESULTS_DIR_NAME if root is not None else None


def add_out_option(parser: Any, name: str) -> None:
    """A command's ``--out FILE`` option (an argparse parser's): the result file, by default
    :func:`default_result_path` of ``name``; :func:`out_path` reads it."""
    parser.add_argument("--out", default=None,
                        help=f"result file (default results/{name} in a checkout)")


def out_dir_missing(out: str | os.PathLike) -> bool:
    """True (after one line on stderr naming it) when result file ``out``'s folder does not
    exist: a command checks this before it measures anything."""
    if Path(out).parent.is_dir():
        return False
    print(f"{out}: no such directory", file=sys.stderr)
    return True


def out_path(out: str | os.PathLike | None, name: str) -> Path:
    """The result file of a command: ``out`` as given, else :func:`default_result_path`."""
    return Path(out) if out else default_result_path(name)


def default_result_path(name: str) -> Path:
    """Where a benchmark writes result file ``name`` without ``--out``: the checkout's
    ``results/``, else ``results/`` under the current directory."""
    d = results_dir()
    return (d if d is not None else Path(RESULTS_DIR_NAME)) / name


if __name__ == "__main__":  # pragma: no cover - used by shell benchmarks
    print(json.dumps(provenance(), indent=2))
