"""Run the c_ref CLI binary (``kvsim-cref``) for traced and native runs.

The binary is found by :mod:`kvsim.artifacts`; this module only builds its command lines and
relays its errors (as :class:`kvsim.model.cref_binding.CrefError`, the one c_ref error class).
"""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from kvsim import artifacts, provenance, traces
from kvsim.model.cref_binding import CrefError

__all__ = ["CrefError", "THEN_OPTIONS", "binary", "git_commit", "killed_by", "native", "setup_key",
           "trace", "trace_many", "workload_args", "workload_options"]


def binary() -> Path:
    """Path of the ``kvsim-cref`` CLI; raises :class:`kvsim.artifacts.ArtifactMissing`."""
    return artifacts.path(artifacts.CREF_CLI)


_OPTIONS: dict | None = None


def workload_options() -> dict:
    """The workloads and their options as c_ref defines them (``kvsim-cref options --json``):
    ``{"workloads": [...], "options": [{"name", "type", "default", "help", "workloads",
    "min"/"max" or "choices"}, ...]}``, the one definition the CLI builds its options from.
    """
    global _OPTIONS
    if _OPTIONS is None:
        proc = subprocess.run([str(binary()), "options", "--json"], capture_output=True,
                              check=False, timeout=60)
        if proc.returncode != 0:
            raise _fail(proc, proc.stderr)
        try:
            _OPTIONS = json.loads(proc.stdout)
        except json.JSONDecodeError as exc:
            raise CrefError(f"kvsim-cref options printed invalid JSON: {exc}") from None
    return _OPTIONS


def workload_args(options: Mapping[str, object]) -> list[str]:
    """Turn ``{"keys": 1000, "cluster": True, "value_size": 8}`` into CLI flags.

    None values are left out; True becomes a bare flag; False is left out.
    """
    args: list[str] = []
    for name, value in options.items():
        if value is None or value is False:
            continue
        flag = "--" + name.replace("_", "-")
        if value is True:
            args.append(flag)
        else:
            args.extend([flag, str(value)])
    return args


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("KVSIM_GIT_COMMIT", git_commit() or "")
    return env


def git_commit() -> str | None:
    """The repository's HEAD commit when running from a checkout, else None."""
    return provenance.git_state()["commit"]


def killed_by(returncode: int | None) -> str | None:
    """``"killed by signal SIGKILL"`` for a child's return code that says a signal ended it
    (``subprocess``'s negative code, ``os.waitstatus_to_exitcode``'s), else None."""
    if returncode is None or returncode >= 0:
        return None
    try:
        name = signal.Signals(-returncode).name
    except ValueError:
        name = str(-returncode)
    return f"killed by signal {name}"


def _fail(proc: subprocess.Popen | subprocess.CompletedProcess, stderr: bytes | str) -> CrefError:
    """The child's failure as one line: its last message, or, when a signal ended it (the
    message, if any, was not its last word), the signal and that message."""
    text = stderr.decode(errors="replace") if isinstance(stderr, bytes) else stderr
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    last = lines[-1].removeprefix("kvsim-cref: ") if lines else None
    killed = killed_by(proc.returncode)
    if killed is not None:
        return CrefError(f"kvsim-cref was {killed}" + (f" (its last message: {last})"
                                                        if last else ""))
    return CrefError(last or f"kvsim-cref exited with status {proc.returncode}")


class _Counted(io.RawIOBase):
    """A binary stream that reports the bytes read from ``f`` to ``progress``."""

    def __init__(self, f, progress: Callable[[int], object]) -> None:
        self._f = f
        self._progress = progress

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        n = self._f.readinto(b)
        if n:
            self._progress(n)
        return n


def trace(workload: str, out, options: Mapping[str, object], codec: str | None = None,
          progress: Callable[[int], object] | None = None, version: int | None = None,
          cli: Path | None = None) -> None:
    """Trace ``workload`` with c_ref and write the trace to ``out`` (a path, or a binary
    stream such as stdout), recompressing c_ref's raw chunks with ``codec`` as format
    ``version`` (defaults: ``traces.Writer``'s, byte planes and the newest version).
    ``cli``: another build's ``kvsim-cref`` (an older commit's, to compare with).

    ``progress``, if given, is called with the number of trace bytes received from c_ref
    since its previous call. On any failure no output file is left behind.
    """
    cmd = [str(cli or binary()), "trace", workload, "-o", "-", *workload_args(options)]
    # stderr goes to a file, not a pipe, so a chatty child can never block on it while we
    # drain its stdout.
    with tempfile.TemporaryFile() as errfile:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=errfile, env=_env())
        try:
            src = proc.stdout if progress is None else \
                io.BufferedReader(_Counted(proc.stdout, progress))
            traces.recompress(src, out, codec=codec or traces.DEFAULT_CODEC,
                              version=version or traces.VERSION)
        except traces.TraceError:
            proc.stdout.close()
            proc.wait()
            if proc.returncode != 0:
                errfile.seek(0)
                raise _fail(proc, errfile.read()) from None
            raise
        finally:
            if not proc.stdout.closed:
                proc.stdout.close()
            proc.wait()
        if proc.returncode != 0:
            if isinstance(out, str | Path) and Path(out).exists():
                Path(out).unlink()
            errfile.seek(0)
            raise _fail(proc, errfile.read())


#: the options that may differ between traces of one setup (c_ref's ``trace --then``): the
#: variants'; every other option is the setup's
THEN_OPTIONS = ("variant", "batch", "chunk", "pipeline")


def setup_key(workload: str, options: Mapping[str, object]) -> str:
    """What traces of ``workload`` with ``options`` share when their setup is one: the
    workload and every option but :data:`THEN_OPTIONS`."""
    rest = {k: v for k, v in options.items() if k not in THEN_OPTIONS}
    return json.dumps([workload, rest], sort_keys=True, default=str)


def trace_many(workload: str, outs: list[tuple[Path, Mapping[str, object]]],
               codec: str | None = None) -> None:
    """Trace ``workload`` once per ``(path, options)`` of ``outs``, all from one run of its
    setup (c_ref's ``trace --then``: after the setup a child process per further trace goes
    on from it), each written to its path as :func:`trace` writes it: the same bytes as
    tracing each alone. The options must differ only in :data:`THEN_OPTIONS` (ValueError).
    On a failure no output file is left behind."""
    if not outs:
        return
    (first, opts0), rest = outs[0], outs[1:]
    key = setup_key(workload, opts0)
    if any(setup_key(workload, o) != key for _, o in rest):
        raise ValueError("trace_many: the traces must differ only in "
                         f"{', '.join(THEN_OPTIONS)}")
    if not rest:
        trace(workload, first, opts0, codec=codec)
        return
    with tempfile.TemporaryDirectory(prefix="kvsim-then-",
                                     dir=Path(first).parent) as tmp:
        raws = [Path(tmp) / f"{i}.raw" for i in range(len(outs))]
        cmd = [str(binary()), "trace", workload, "-o", str(raws[0]),
               *workload_args(opts0)]
        for raw, (_, o) in zip(raws[1:], rest, strict=True):
            cmd += ["--then", str(raw),
                    *workload_args({k: v for k, v in o.items() if k in THEN_OPTIONS})]
        # c_ref writes the --then traces one after the other, then the first, each renamed
        # into place when complete: each is recompressed as soon as it appears, so at most
        # two raw traces are on disk at a time
        order = [*range(1, len(outs)), 0]
        done: list[Path] = []
        with tempfile.TemporaryFile() as errfile:
            proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=errfile, env=_env())
            try:
                while order:
                    i = order[0]
                    exited = proc.poll() is not None
                    if raws[i].exists():
                        traces.recompress(str(raws[i]), outs[i][0],
                                          codec=codec or traces.DEFAULT_CODEC,
                                          version=traces.VERSION)
                        done.append(Path(outs[i][0]))
                        raws[i].unlink()
                        order.pop(0)
                    elif exited:
                        break
                    else:
                        time.sleep(0.05)
                proc.wait()
                if proc.returncode != 0 or order:
                    errfile.seek(0)
                    raise _fail(proc, errfile.read())
            except BaseException:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
                for p in done:
                    p.unlink(missing_ok=True)
                raise


#: a native run's environment for the workloads that fill fresh servers (load, MSET into an
#: empty keyspace): they do so on memory the process already has (c_ref's
#: ``KVSIM_CREF_ARENA_WARM``). On a virtual machine whose host takes freed memory back (free
#: page reporting), the system time of a first touch of a page varies several-fold with how
#: long ago it was freed, which would swamp a prefetch's effect and depend on the order of
#: the runs.
ARENA_WARM = {"KVSIM_CREF_ARENA_WARM": "1"}
#: a load's trace in the state of a native load under :data:`ARENA_WARM` (c_ref's
#: ``--restart-pages reused``): the restarted server loads into the pages of an unmeasured
#: load before it, carried in the setup's warm-up, so the trace marks none of the page faults
#: the native load does not take (a fresh arena's trace marks one per first touch)
LOAD_PAGES_REUSED = {"restart_pages": "reused"}


def native(workload: str, options: Mapping[str, object], repeat: int = 3,
           waiting: Callable[[], object] | None = None,
           env: Mapping[str, str] | None = None,
           versus: Mapping[str, object] | None = None, versus_first: str = "a") -> dict:
    """Run ``kvsim-cref native WORKLOAD ... --repeat R --json`` and return its JSON.

    c_ref reports nothing until all runs are done; ``waiting``, if given, is called about
    twice a second meanwhile (for example to refresh a progress bar's elapsed time).
    ``env``: variables added to the child's environment (:data:`ARENA_WARM`, ...); a
    ``KVSIM_CREF_BIN`` there also names the binary run (another build of c_ref).
    ``versus``: a second configuration B (``variant``, ``pipeline``, ``batch``: c_ref's
    ``--versus-*``) timed against ``options`` in the same process, ``repeat`` rounds of A B
    and B A alternately (``versus_first="b"``: B A first); B's runs are under the JSON's
    ``versus`` key.
    """
    exe = (env or {}).get("KVSIM_CREF_BIN") or str(binary())
    cmd = [exe, "native", workload, *workload_args(options),
           "--repeat", str(repeat), "--json"]
    if versus:
        cmd += [*workload_args({f"versus_{k}": v for k, v in versus.items()}),
                "--versus-first", versus_first]
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          env=_env() | dict(env or {})) as proc:
        while True:
            try:
                stdout, stderr = proc.communicate(timeout=None if waiting is None else 0.5)
                break
            except subprocess.TimeoutExpired:
                waiting()  # type: ignore[misc]
    if proc.returncode != 0:
        raise _fail(proc, stderr)
    try:
        return json.loads(stdout)
    except json.JSONDecodeError as exc:
        raise CrefError(f"kvsim-cref native printed invalid JSON: {exc}") from None
