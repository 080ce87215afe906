"""Progress bars for the ``kvsim`` command line (tqdm, on stderr only).

A bar is drawn only when stderr is a terminal and ``--quiet`` was not given; otherwise every
bar is disabled and writes nothing, so a piped or redirected run leaves stderr empty on
success. Bars never touch stdout, which carries traces and JSON.

The library packages (``kvsim.sim``, ``kvsim.traces``) know nothing of terminals: they take
an optional ``progress`` callable and call it with the amount of work done since the
previous call; :func:`bar` returns a tqdm whose ``update`` is such a callable.
"""

from __future__ import annotations

import os
import struct
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tqdm import tqdm

__all__ = ["bar", "enabled", "log_line", "quiet", "set_quiet", "trace_total_records"]

_quiet = False


QUIET_ENV = "KVSIM_QUIET"


def set_quiet(quiet: bool) -> None:
    """Silence (True) or allow (False) every bar made afterwards, and the one-line notes that
    library code says on a terminal (they read ``$KVSIM_QUIET``, set here)."""
    global _quiet
    _quiet = bool(quiet)
    if _quiet:
        os.environ[QUIET_ENV] = "1"
    else:
        os.environ.pop(QUIET_ENV, None)


def quiet() -> bool:
    """True when ``--quiet`` was given (warnings and notes are silenced too)."""
    return _quiet


def enabled() -> bool:
    """True when bars are drawn: stderr is a terminal and ``--quiet`` was not given."""
    if _quiet:
        return False
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):  # replaced or closed stderr
        return False


def log_line(s: str) -> None:
    """One progress line of a long experiment on stderr, ``# s`` (a comment beside the
    figures the command prints): the ``log`` callable the server experiments take."""
    print(f"# {s}", file=sys.stderr, flush=True)


def bar(desc: str, total: float | None = None, unit: str = "it", **kwargs: Any) -> tqdm:
    """A tqdm bar on stderr, disabled (silent) unless :func:`enabled`.

    ``unit="B"`` shows bytes with binary prefixes. Use it as a context manager; pass its
    ``update`` method where a library function takes a ``progress`` callable.
    """
    if not enabled():
        # tqdm costs tens of milliseconds to import (a large part of a short `kvsim
        # simulate`); a disabled bar does nothing, so none is made
        return _NullBar()  # type: ignore[return-value]
    from tqdm import tqdm

    if unit == "B":
        kwargs.setdefault("unit_scale", True)
        kwargs.setdefault("unit_divisor", 1024)
    return tqdm(desc=desc, total=total, unit=unit, file=sys.stderr, disable=not enabled(),
                dynamic_ncols=True, leave=False, **kwargs)


class _NullBar:
    """What :func:`bar` returns when bars are off: the methods kvsim calls, doing nothing."""

    def __enter__(self) -> _NullBar:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def update(self, n: float = 1) -> None:
        return None

    def refresh(self, *args: Any, **kwargs: Any) -> None:
        return None

    def set_postfix_str(self, s: str = "", refresh: bool = True) -> None:
        return None

    def close(self) -> None:
        return None


# The end chunk closes every .kvt file (traces/FORMAT.md): magic "KVEN", u32 n_chunks,
# u64 total_records. Reading it is a hint for a bar's total, not a validation.
_END = struct.Struct("<4sIQ")


def trace_total_records(path: str | os.PathLike[str]) -> int | None:
    """Records in the trace at ``path`` as its end chunk states, or None (stdin, a pipe, a
    short or damaged file). The reader still validates the count when it gets there."""
    if os.fspath(path) == "-" or not os.path.isfile(path):  # a FIFO would block in open()
        return None
    try:
        with open(path, "rb") as f:
            if f.seek(0, os.SEEK_END) < _END.size:
                return None
            f.seek(-_END.size, os.SEEK_END)
            magic, _, total = _END.unpack(f.read(_END.size))
    except OSError:
        return None
    return total if magic == b"KVEN" else None
