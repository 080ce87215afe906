"""The ``[syscall]`` section of a calibrated CPU file measured again in this sitting.

What a system call costs the server on this guest moves between boots, and between sittings
of one boot, by as much as the server study's band (docs/studies/server.md): a ``[syscall]``
section measured on another day cannot predict today's native cells. :func:`remeasure`
measures the server's socket calls again on the machine at hand, by ``kvsim calibrate``'s
own procedure (sim/calibrate_syscall.py: the calls alone on a loopback pair, the per-byte
costs with a peer on another CPU, c_ref's server loop under PINGs from 50 clients with the
tick split's test, and the traced PINGs' user time predicted on the file itself), and writes
the file again with that part of it replaced:

* ``[syscall]``: ``read_*``, ``write_*`` and ``epoll_wait_*`` measured now, the loop's
  kernel time per write taken by the method the file's own section was taken with
  (:func:`file_method`: from the whole CPU time or from the ticks; where the file does not
  say, ``kvsim calibrate``'s tick test decides); any other key of the section (a snapshot
  load's ``page_fault_*`` and ``file_read_*``, sim/calibrate_kernel.py's) kept with its src;
* ``[meta] syscall_sitting``: the provenance (command, commit, machine, date), the sitting
  (:func:`sitting`: the boot's id and time), the file measured for (its path and SHA-256),
  the section replaced (:func:`replaced`) and the sweep's raw medians; ``[meta]
  syscall_loop``: the loop's figures and method, as ``kvsim calibrate`` writes them;
* ``notes``: one line saying so.

Every other table and key is the file's, unchanged. Nothing here is fitted to a study's
rows: the commands are PINGs, the calls a loopback pair's.

``kvsim calibrate --remeasure-syscall FILE -o OUT`` runs it; ``kvsim experiment run server
--sitting-syscall`` runs it inside the study's run, beside its native cells
(experiments/server_sitting.py).
"""

from __future__ import annotations

import datetime as _dt
import re
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from . import calibrate_syscall
from .config import ConfigError

#: the keys measured again: the server's socket calls (the rest of [syscall] is kept)
SOCKET_KEYS = tuple(k for c in calibrate_syscall.CALLS for k in (f"{c}_ns", f"{c}_byte_ns"))
#: ``write_ns``'s src as sim/calibrate_syscall.py writes it (and wrote it before [meta]
#: syscall_loop existed): the sweep's intercept, then the loop's kernel time per write
_SPLIT = re.compile(r"\(([\d,.]+) ns\) plus the server loop's (?:kernel time|residue) per "
                    r"write \(([\d,.]+) ns")


def sitting(boot_id: Path = Path("/proc/sys/kernel/random/boot_id"),
            uptime: Path = Path("/proc/uptime")) -> dict[str, Any]:
    """The sitting measured in: this boot's id (the kernel's, new at every boot), when it
    booted (UTC, to the minute) and how long ago (s); empty strings where unreadable."""
    try:
        ident = boot_id.read_text().strip()
    except OSError:
        ident = ""
    try:
        up = float(uptime.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return {"boot_id": ident, "booted_utc": "", "uptime_s": ""}
    booted = _dt.datetime.now(_dt.UTC) - _dt.timedelta(seconds=up)
    return {"boot_id": ident, "booted_utc": booted.strftime("%Y-%m-%dT%H:%MZ"),
            "uptime_s": round(up)}


def load(path: Path) -> dict:
    """The CPU file at ``path``, checked: TOML the parser takes, written by ``kvsim
    calibrate`` on this machine (its ``[meta] machine_key`` is this machine's). ConfigError
    (one line naming the file) otherwise."""
    from .calibrate import cpu_identity, machine_key
    from .config import parse_cpu
    from .local import read_sysfs

    try:
        text = Path(path).read_text()
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise ConfigError(f"{path}: is a directory (expected a CPU file)") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"{path}: cannot read: {getattr(e, 'strerror', None) or e}") from None
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{path}: not TOML ({e})") from None
    try:
        parse_cpu(doc, str(path))
    except ConfigError as e:
        raise ConfigError(f"{path}: {e}") from None
    key = (doc.get("meta") or {}).get("machine_key")
    if not key:
        raise ConfigError(f"{path}: not a CPU file `kvsim calibrate` wrote (no [meta] "
                          "machine_key): its [syscall] is measured on its own machine")
    here = machine_key(read_sysfs(), cpu_identity())
    if key != here:
        raise ConfigError(f"{path}: calibrated on another machine ({key}; this one is "
                          f"{here}): its [syscall] cannot be measured here")
    return doc


def file_method(doc: dict) -> str | None:
    """How the file's ``[syscall]`` took the server loop's kernel time per write: ``cpu``
    (the whole CPU time less the traced PINGs' predicted user time) or ``ticks`` (the
    tick-sampled system time), from ``[meta] syscall_loop`` or, in a file written before it
    existed, ``write_ns``'s src; None where the section has no loop's part."""
    m = ((doc.get("meta") or {}).get("syscall_loop") or {}).get("method")
    if m:
        return str(m)
    src = str(((doc.get("syscall") or {}).get("src") or {}).get("write_ns", ""))
    if "predicted user time" in src:
        return "cpu"
    return "ticks" if "server loop's residue" in src else None


def replaced(doc: dict) -> dict[str, Any]:
    """The file's socket figures before the re-measure: each of :data:`SOCKET_KEYS` it has,
    the write call alone (``write_alone_ns``: the sweep's intercept) and the loop's kernel
    time per write (``loop_per_write_ns``), where the file gives them ([meta] syscall_loop,
    else ``write_ns``'s src), and :func:`file_method`."""
    sec = doc.get("syscall") or {}
    out: dict[str, Any] = {k: float(sec[k]) for k in SOCKET_KEYS if k in sec}
    loop = (doc.get("meta") or {}).get("syscall_loop") or {}
    m = _SPLIT.search(str((sec.get("src") or {}).get("write_ns", "")))
    if loop.get("residue_per_write_ns") is not None and "write_ns" in sec:
        out["loop_per_write_ns"] = float(loop["residue_per_write_ns"])
        out["write_alone_ns"] = float(sec["write_ns"]) - out["loop_per_write_ns"]
    elif m:
        out["write_alone_ns"] = float(m.group(1).replace(",", ""))
        out["loop_per_write_ns"] = float(m.group(2).replace(",", ""))
    out["method"] = file_method(doc) or ""
    return out


def measure(quick: bool, rounds: int | None = None, loop: bool = True,
            log: Callable[[str], None] = lambda m: None, **small: Any) -> dict:
    """The raw measurement (:func:`.calibrate_syscall.measure`: the sweep, the peer and,
    with ``loop``, the server loop and the tick test; ``rounds`` of the loop's), without the
    traced PINGs' prediction, which is per file (:func:`derive`). With ``loop``, the loop
    must run: LoopError (one line) before any measuring where redis-benchmark is missing, or
    after it where the loop did not run. ``small``: the sizes :func:`.calibrate_syscall.
    measure` takes (``iters``, ``loop_requests``, ``bias_iters``; tests)."""
    from . import calibrate_loop

    if loop:
        calibrate_loop.benchmark_binary()  # the loop's client, before minutes of measuring
    raw = calibrate_syscall.measure(quick, log, loop=loop, loop_rounds=rounds, **small)
    if loop and not raw.get("loop"):
        raise calibrate_loop.LoopError("the server loop could not be measured (see the log): "
                                       "the file's write_ns holds its kernel time per write")
    return raw


def derive(doc: dict, raw: dict, *, source: str, source_sha256: str,
           log: Callable[[str], None] = lambda m: None,
           ping_requests: dict[int, int] | None = None) -> dict:
    """``doc`` with its socket figures from ``raw`` (:func:`measure`'s) and the records the
    module docstring lists; ``source``: the file's path as it records it
    (``kvsim.provenance.shown_path``), ``source_sha256`` its bytes'. The traced PINGs' user
    time is predicted on ``doc`` itself (its own [syscall] left out), as ``kvsim calibrate``
    predicts it on the file it writes."""
    from kvsim import provenance

    method = file_method(doc)
    r = dict(raw)
    if r.get("loop"):
        cpu_doc = {k: v for k, v in doc.items() if k not in ("syscall", "selfcheck")}
        r["loop"] = {**r["loop"], "ping_user_ns": calibrate_syscall.ping_user(
            cpu_doc, calibrate_syscall.section(raw), log, ping_requests)}
    sec = calibrate_syscall.section(r, method)
    loop = calibrate_syscall.loop_meta(r, method)
    now = sitting()
    prov = provenance.provenance()
    where = (f"; measured again in the sitting of {prov['date_utc']} (boot "
             f"{now['boot_id'][:8] or 'unknown'}) for {source}: sim/calibrate_sitting.py")
    old = doc.get("syscall") or {}
    new = {k: v for k, v in old.items() if k not in (*SOCKET_KEYS, "src")}
    src = {k: v for k, v in (old.get("src") or {}).items() if k not in SOCKET_KEYS}
    for k in SOCKET_KEYS:
        new[k] = sec[k]
        src[k] = sec["src"][k] + where
    new["src"] = src
    out = {k: (new if k == "syscall" else v) for k, v in doc.items()}
    out.setdefault("syscall", new)
    meta = dict(doc.get("meta") or {})
    meta["syscall_sitting"] = {
        "provenance": prov, "sitting": now, "source": source, "source_sha256": source_sha256,
        "method": loop["method"] if loop else "", "replaced": replaced(doc),
        "alone": calibrate_syscall.alone(raw),
        "raw": {k: v for k, v in raw.items() if k != "loop"}}
    if loop:
        meta["syscall_loop"] = loop
    out["meta"] = meta
    out["notes"] = [*doc.get("notes", []), (
        f"[syscall]'s socket calls (read, write, epoll_wait) measured again on "
        f"{prov['date_utc']} (boot {now['boot_id'][:8] or 'unknown'}) by "
        "sim/calibrate_sitting.py ([meta] syscall_sitting); the rest of the file as "
        f"{Path(source).name} gives it")]
    return out


def write(doc: dict, out: Path) -> Path:
    """``doc`` as TOML at ``out`` (atomically), refused whole where the parser would."""
    from kvsim import provenance

    from .calibrate import to_toml
    from .config import parse_cpu

    text = to_toml(doc)
    parse_cpu(tomllib.loads(text), str(out))  # never write a file load_cpu refuses
    return provenance.write_atomic(out, text)


def remeasure(src: Path, out: Path, rounds: int | None = None,
              log: Callable[[str], None] = lambda m: None) -> Path:
    """``kvsim calibrate --remeasure-syscall SRC -o OUT``: SRC (:func:`load`) written to OUT
    with its socket calls measured now (:func:`measure`, at SRC's quick or full sizes;
    :func:`derive`). ConfigError before any measuring where OUT is SRC."""
    from kvsim.provenance import file_sha256, shown_path

    doc = load(src)
    if Path(out).resolve() == Path(src).resolve():
        raise ConfigError(f"-o {out}: is the file being measured again (write a new file)")
    quick = bool((doc.get("meta") or {}).get("quick", True))
    raw = measure(quick, rounds, loop=file_method(doc) is not None, log=log)
    new = derive(doc, raw, source=shown_path(src), source_sha256=file_sha256(src), log=log)
    return write(new, Path(out))


def summary(doc: dict) -> list[dict[str, Any]]:
    """A re-measured file's socket figures against those it replaced, one row per figure:
    ``figure``, ``unit``, ``sitting`` (now), ``file`` (before; None where the file did not
    give it)."""
    sec, ss = doc["syscall"], doc["meta"]["syscall_sitting"]
    old, loop = ss.get("replaced") or {}, (doc["meta"].get("syscall_loop") or {})
    per_write = loop.get("residue_per_write_ns")
    rows = [("read per call", "ns", sec["read_ns"], old.get("read_ns")),
            ("read per byte", "ns/B", sec["read_byte_ns"], old.get("read_byte_ns")),
            ("write per call", "ns", sec["write_ns"], old.get("write_ns")),
            ("  the call alone", "ns", ss["alone"]["write_ns"] if per_write is not None
             else None, old.get("write_alone_ns")),
            ("  the loop's kernel time per write", "ns", per_write,
             old.get("loop_per_write_ns")),
            ("write per byte", "ns/B", sec["write_byte_ns"], old.get("write_byte_ns")),
            ("epoll_wait per call", "ns", sec["epoll_wait_ns"], old.get("epoll_wait_ns"))]
    return [{"figure": f, "unit": u, "sitting": s, "file": o} for f, u, s, o in rows]
