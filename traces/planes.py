"""Byte planes: the layout of a ``zstd_planes`` chunk's payload before compression.

A chunk of ``n`` records (24 bytes each) becomes 24 planes of ``n`` bytes: plane ``j`` holds
byte ``j`` of every record, in record order (FORMAT.md, codec ``zstd_planes``). Most planes of
a trace hardly vary (the kind, the tag, the high bytes of addresses near each other, flags),
so zstd stores them as long matches and keeps literals for the few planes that do vary: the
payload is smaller than the records' own bytes compressed, and decompresses several times
faster.

:func:`split` and :func:`join` use the engine library's ``kvsimPlanesSplit`` /
``kvsimPlanesJoin`` (``sim/_engine/decode.c``) when it is built, and numpy otherwise; both
give the same bytes (``traces/tests/test_planes.py``).
"""

from __future__ import annotations

import ctypes as C
from typing import TYPE_CHECKING

from .format import RECORD_SIZE

if TYPE_CHECKING:
    import numpy as np

_LIB: C.CDLL | None | bool = None  # None: not looked for yet; False: not built


def _lib() -> C.CDLL | None:
    global _LIB
    if _LIB is None:
        from kvsim import artifacts

        try:
            lib = C.CDLL(str(artifacts.path(artifacts.ENGINE_LIB)))
            lib.kvsimPlanesSplit.argtypes = [C.c_void_p, C.c_size_t, C.c_void_p]
            lib.kvsimPlanesJoin.argtypes = [C.c_void_p, C.c_size_t, C.c_void_p]
            lib.kvsimPlanesSplit.restype = lib.kvsimPlanesJoin.restype = None
            _LIB = lib
        except (artifacts.ArtifactMissing, OSError, AttributeError):
            _LIB = False
    return _LIB or None


def split(records: np.ndarray, compiled: bool = True) -> np.ndarray:
    """The byte planes of ``records`` (a RECORD_DTYPE array): a new uint8 array of
    ``n * 24`` bytes (a buffer zstd takes as it is; no second copy as ``bytes``)."""
    import numpy as np

    from .format import RECORD_DTYPE

    recs = np.ascontiguousarray(records, dtype=RECORD_DTYPE)
    n = recs.size
    lib = _lib() if compiled else None
    if lib is None:
        return np.ascontiguousarray(recs.view(np.uint8).reshape(n, RECORD_SIZE).T).reshape(-1)
    out = np.empty(n * RECORD_SIZE, dtype=np.uint8)
    lib.kvsimPlanesSplit(recs.ctypes.data, n, out.ctypes.data)
    return out


def join(planes: bytes | bytearray | memoryview, n: int, compiled: bool = True) -> np.ndarray:
    """The ``n`` records whose byte planes are ``planes`` (``n * 24`` bytes)."""
    import numpy as np

    from .format import RECORD_DTYPE

    src = np.frombuffer(planes, dtype=np.uint8)
    if src.size != n * RECORD_SIZE:
        raise ValueError(f"{src.size} bytes of planes for {n} records (expected "
                         f"{n * RECORD_SIZE})")
    lib = _lib() if compiled else None
    if lib is None:
        return src.reshape(RECORD_SIZE, n).T.copy().view(RECORD_DTYPE).reshape(n)
    out = np.empty(n, dtype=RECORD_DTYPE)
    lib.kvsimPlanesJoin(src.ctypes.data, n, out.ctypes.data)
    return out
