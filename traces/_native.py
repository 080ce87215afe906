"""ctypes binding of the trace layer's compiled pieces: the chunk decoder and record checks
(``sim/_engine/decode.c``) and the reuse-distance counter (``sim/_engine/reuse.c``).

They are compiled into the one native library the engine is built as (``libkvsim_sim.so``,
found by :mod:`kvsim.artifacts`), but they belong to the traces: they read the trace format
(``traces/trace_format.h``) and nothing of the simulator. So they are bound here, below the
simulator, and :mod:`kvsim.sim._binding` takes :class:`Records` (the memory the decoder
writes and the engine runs) from here. :func:`load_library` declares only these functions
and checks no engine struct: reading a trace never depends on the engine's layout.
"""

from __future__ import annotations

import ctypes as C
import mmap
from typing import TYPE_CHECKING, Any

from kvsim import artifacts

from . import format as _format
from .format import RECORD_SIZE

if TYPE_CHECKING:
    import numpy as np

__all__ = ["REUSE_BUCKETS", "NativeMissing", "Records", "Reuse", "load_library",
           "records_address"]

REUSE_BUCKETS = 65  # KVSIM_REUSE_BUCKETS
u32, u64 = C.c_uint32, C.c_uint64


class NativeMissing(artifacts.ArtifactMissing):
    """The native library (libkvsim_sim.so) was not found."""


_LIB: C.CDLL | None = None


def load_library() -> C.CDLL:
    """The native library with the trace layer's functions declared (decode.c, reuse.c)."""
    global _LIB
    if _LIB is not None:
        return _LIB
    try:
        lib = C.CDLL(str(artifacts.path(artifacts.ENGINE_LIB)))
    except artifacts.ArtifactMissing as e:
        raise NativeMissing(f"kvsim engine library: {e}") from None
    lib.kvsimReuseCreate.restype = C.c_void_p
    lib.kvsimReuseCreate.argtypes = []
    lib.kvsimReuseAdd.restype = C.c_int
    lib.kvsimReuseAdd.argtypes = [C.c_void_p, C.c_void_p, C.c_void_p, C.c_size_t, C.c_void_p,
                                  C.c_void_p, C.c_void_p]
    lib.kvsimReuseDistinct.restype = u64
    lib.kvsimReuseDistinct.argtypes = [C.c_void_p]
    lib.kvsimReuseFree.restype = None
    lib.kvsimReuseFree.argtypes = [C.c_void_p]
    _LIB = lib
    return lib


class Records:
    """``n`` trace records (``RECORD_DTYPE``'s layout, ``RECORD_SIZE`` bytes
    each) in memory that ctypes owns: what the compiled intake decodes into and
    :meth:`Engine.run` takes, with no numpy. ``Records(n)`` allocates room for ``n``;
    :meth:`head` is a view of the first records; :meth:`array` a read-only numpy view."""

    __slots__ = ("_mem", "_n")

    def __init__(self, n: int, mem: C.Array | None = None) -> None:
        if mem is None:
            size = n * RECORD_SIZE
            # anonymous pages, as a large np.empty gets: no page is touched before a decode
            # writes it (a ctypes array of its own would be zeroed, every page faulted in)
            mem = (C.c_char * size).from_buffer(mmap.mmap(-1, max(size, 1)))
        self._mem = mem
        self._n = n

    def __len__(self) -> int:
        return self._n

    @property
    def capacity(self) -> int:
        """Records the memory has room for."""
        return len(self._mem) // RECORD_SIZE

    @property
    def address(self) -> int:
        """Address of the first record."""
        return C.addressof(self._mem)

    def head(self, n: int) -> Records:
        """The first ``n`` records (a view of the same memory)."""
        if not 0 <= n <= self.capacity:
            raise ValueError(f"{n} records of a buffer for {self.capacity}")
        return Records(n, self._mem)

    def whole(self) -> Records:
        """The whole buffer (a view of the same memory)."""
        return Records(self.capacity, self._mem)

    def array(self) -> np.ndarray:
        """The records as a read-only numpy array of RECORD_DTYPE (a view: valid while
        the memory is not reused)."""
        import numpy as np

        a = np.frombuffer(self._mem, dtype=_format.RECORD_DTYPE, count=self._n)
        a.flags.writeable = False
        return a


def records_address(records: Any) -> tuple[int, int]:
    """``(address, count)`` of contiguous trace records: :class:`Records` or a numpy array
    of the 24-byte record dtype (an array it must copy to make contiguous is refused)."""
    if isinstance(records, Records):
        return records.address, len(records)
    import numpy as np

    if not isinstance(records, np.ndarray) or records.dtype.itemsize != RECORD_SIZE:
        raise TypeError("records must have the 24-byte trace record dtype (or be Records)")
    if not records.flags.c_contiguous:
        raise TypeError("records must be a contiguous array")
    return records.ctypes.data, len(records)


class Reuse:
    """Streaming LRU stack distances (sim/_engine/reuse.c): ``add(lines, cls)`` per chunk."""

    def __init__(self) -> None:
        self._lib = load_library()
        self._h = self._lib.kvsimReuseCreate()
        if not self._h:
            raise MemoryError("reuse distances: out of memory")

    def add(self, lines: np.ndarray, cls: np.ndarray | None = None,
            dist: np.ndarray | None = None, hist: np.ndarray | None = None,
            cold: np.ndarray | None = None) -> None:
        """Feed ``lines`` (uint64 line ids, in access order) and optional ``cls`` (uint8 per
        access). Adds to ``dist`` (int64 per access), ``hist`` (uint64, classes x
        REUSE_BUCKETS, C order) and ``cold`` (uint64 per class) when given."""
        import numpy as np

        lines = np.ascontiguousarray(lines, dtype=np.uint64)
        n = lines.size
        arrays = {"cls": (cls, np.uint8, n), "dist": (dist, np.int64, n)}
        for name, (a, dt, size) in arrays.items():
            if a is not None and (a.dtype != dt or a.size != size or not a.flags.c_contiguous):
                raise ValueError(f"reuse: {name} must be a contiguous {np.dtype(dt)} array "
                                 f"of {size}")
        rows = 256 if cls is not None else 1
        for name, a, size in (("hist", hist, rows * REUSE_BUCKETS), ("cold", cold, rows)):
            if a is not None and (a.dtype != np.uint64 or a.size != size
                                  or not a.flags.c_contiguous):
                raise ValueError(f"reuse: {name} must be a contiguous uint64 array of {size}")

        def ptr(a: np.ndarray | None):
            return None if a is None else a.ctypes.data

        if self._lib.kvsimReuseAdd(self._h, ptr(lines), ptr(cls), n, ptr(dist), ptr(hist),
                                   ptr(cold)) != 0:
            raise MemoryError("reuse distances: out of memory")

    @property
    def distinct(self) -> int:
        """Distinct lines seen so far."""
        return int(self._lib.kvsimReuseDistinct(self._h))

    def close(self) -> None:
        if self._h:
            self._lib.kvsimReuseFree(self._h)
            self._h = None

    def __enter__(self) -> Reuse:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass
