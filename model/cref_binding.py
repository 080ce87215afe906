"""ctypes binding to the c_ref shared library (``libkvsim_cref.so``, API in
``c_ref/kvsim_cref.h``). Argument marshalling only: no keyspace logic lives here.

The library and the CLI are found by :mod:`kvsim.artifacts` (an environment override, the
source tree's ``c_ref/build/``, or the installed wheel). ``LibraryMissing`` names every place
tried.
"""

from __future__ import annotations

import ctypes
from pathlib import Path

from kvsim import artifacts

__all__ = [
    "CrefError",
    "Keyspace",
    "LibraryMissing",
    "binary_path",
    "library_available",
    "library_path",
    "test_library_path",
]

LIB_NAME = artifacts.CREF_LIB
BIN_NAME = artifacts.CREF_CLI
LibraryMissing = artifacts.ArtifactMissing


class CrefError(RuntimeError):
    """c_ref failed: a library call returned -1 (the message is ``ksLastError``), or the CLI
    exited with an error (the message is its one-line error)."""


def library_path() -> Path:
    """Path of ``libkvsim_cref.so``; raises LibraryMissing."""
    return artifacts.path(LIB_NAME)


def binary_path() -> Path:
    """Path of the ``kvsim-cref`` CLI; raises LibraryMissing."""
    return artifacts.path(BIN_NAME)


def library_available() -> bool:
    try:
        library_path()
    except LibraryMissing:
        return False
    return True


_libs: dict[str, ctypes.CDLL] = {}
_P = ctypes.POINTER
_u8p = _P(ctypes.c_uint8)


TEST_LIB_NAME = artifacts.CREF_TEST_LIB


def test_library_path() -> Path:
    """The library plus c_ref's deliberately broken variants (``c_ref/tests/
    broken_variants.c``, e.g. ``multikey=batch-stale-table``), in a source checkout only;
    raises LibraryMissing."""
    return artifacts.path(TEST_LIB_NAME)


def _load(path: Path | None = None) -> ctypes.CDLL:
    key = str(path or library_path())
    if key in _libs:
        return _libs[key]
    lib = ctypes.CDLL(key)
    lib.ksCreate.restype = ctypes.c_void_p
    lib.ksCreate.argtypes = [ctypes.c_char_p]
    lib.ksDestroy.restype = None
    lib.ksDestroy.argtypes = [ctypes.c_void_p]
    lib.ksLastError.restype = ctypes.c_char_p
    lib.ksLastError.argtypes = [ctypes.c_void_p]
    lib.ksExecute.restype = ctypes.c_int
    lib.ksExecute.argtypes = [
        ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t,
        _P(_u8p), _P(ctypes.c_size_t), _P(ctypes.c_size_t),
    ]
    lib.ksSetTimeMs.restype = None
    lib.ksSetTimeMs.argtypes = [ctypes.c_void_p, ctypes.c_int64]
    lib.ksSaveSnapshot.restype = ctypes.c_int
    lib.ksSaveSnapshot.argtypes = [ctypes.c_void_p, ctypes.c_char_p, _P(_u8p),
                                   _P(ctypes.c_size_t)]
    lib.ksLoadSnapshot.restype = ctypes.c_int
    lib.ksLoadSnapshot.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p,
                                   ctypes.c_size_t]
    lib.ksDbSize.restype = ctypes.c_uint64
    lib.ksDbSize.argtypes = [ctypes.c_void_p]
    lib.ksMemoryBytes.restype = ctypes.c_uint64
    lib.ksMemoryBytes.argtypes = [ctypes.c_void_p]
    lib.ksCheckValid.restype = ctypes.c_int
    lib.ksCheckValid.argtypes = [ctypes.c_void_p]
    _libs[key] = lib
    return lib


def _opt(s: str) -> bytes:
    return s.encode()


class Keyspace:
    """One c_ref keyspace. ``options`` as for ``ksCreate`` (e.g. ``"table=dict cluster=1"``).

    Use as a context manager or call ``close()``; the handle is also freed on GC."""

    def __init__(self, options: str = "", library: str | Path | None = None) -> None:
        self._lib = _load(Path(library) if library else None)
        self.options = options
        h = self._lib.ksCreate(_opt(options))
        if not h:
            msg = self._lib.ksLastError(None)
            raise CrefError(f"ksCreate({options!r}): {(msg or b'').decode(errors='replace')}")
        self._h: int | None = h

    def _handle(self) -> int:
        if self._h is None:
            raise CrefError("keyspace is closed")
        return self._h

    def _fail(self, what: str) -> CrefError:
        msg = self._lib.ksLastError(self._h)
        return CrefError(f"{what}: {(msg or b'').decode(errors='replace')}")

    def close(self) -> None:
        if self._h is not None:
            self._lib.ksDestroy(self._h)
            self._h = None

    def __enter__(self) -> Keyspace:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass

    def execute(self, query: bytes, variant: str = "") -> tuple[bytes, int]:
        """Run every complete command of ``query`` under ``variant``.

        Returns (concatenated reply bytes, bytes of ``query`` consumed)."""
        rep = _u8p()
        rlen = ctypes.c_size_t()
        used = ctypes.c_size_t()
        rc = self._lib.ksExecute(self._handle(), _opt(variant), query, len(query),
                                 ctypes.byref(rep), ctypes.byref(rlen), ctypes.byref(used))
        if rc != 0:
            raise self._fail(f"ksExecute(variant={variant!r})")
        data = ctypes.string_at(rep, rlen.value) if rlen.value else b""
        return data, used.value

    def set_time_ms(self, now_ms: int) -> None:
        self._lib.ksSetTimeMs(self._handle(), now_ms)

    def save_snapshot(self, variant: str = "") -> bytes:
        buf = _u8p()
        n = ctypes.c_size_t()
        if self._lib.ksSaveSnapshot(self._handle(), _opt(variant), ctypes.byref(buf),
                                    ctypes.byref(n)) != 0:
            raise self._fail("ksSaveSnapshot")
        return ctypes.string_at(buf, n.value) if n.value else b""

    def load_snapshot(self, data: bytes, variant: str = "") -> None:
        if self._lib.ksLoadSnapshot(self._handle(), _opt(variant), data, len(data)) != 0:
            raise self._fail("ksLoadSnapshot")

    def dbsize(self) -> int:
        return int(self._lib.ksDbSize(self._handle()))

    def memory_bytes(self) -> int:
        return int(self._lib.ksMemoryBytes(self._handle()))

    def check_valid(self) -> None:
        """Raise CrefError with the C message if any structural invariant is broken."""
        if self._lib.ksCheckValid(self._handle()) != 0:
            raise self._fail("ksCheckValid")
