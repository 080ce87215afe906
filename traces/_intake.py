"""The trace intake: a trace's chunks checked and decoded in compiled code, ahead of the
simulation (or of a re-encoding, ``traces.recompress``), on other cores. Bound to
``sim/_engine/decode.c`` through :mod:`traces._native` (the trace layer's compiled pieces);
``kvsim.sim._intake`` is this module under its old name.

:func:`chunks` takes a :class:`traces.TraceReader` that has not been iterated and yields the
same record arrays as iterating it, raising the same one-line :class:`traces.TraceError` at the
same place. The split of the work: the reader's own Python code reads the framing (chunk
headers, lengths, the end chunk: a few bytes per chunk) on a background thread; each data
chunk's payload then goes to a small pool of threads that check its CRC32 and decompress it
in ``sim/_engine/decode.c`` (outside the GIL, so chunks decompress in parallel and beside the
engine), and check the record rules each chunk settles alone in the same call, while its
records are at hand (``kvsimDecodeChecked``: for byte planes, a vector screen of 16 records
at a time before the join, ``kvsimValidatePlanes``); the calling thread finishes the check in
order as it takes each chunk (``kvsimValidateJoin``: the warm-up markers' turn, and deps
naming a record of an earlier chunk), so only those few records wait on it. At most
``ahead`` chunks are decoded ahead of the consumer, so memory does not grow with the trace
(the record rules keep one bit for each of the last ``traces.DEP_CHECK_WINDOW`` records, for
``dep``).

Errors keep the reference's wording: a CRC or record-rule failure is worded by the reader's
own functions (``crc_error``, ``record_error``, ``RecordValidator.describe``), and a zstd
payload the compiled decoder refuses is handed back to the reader's Python decompressor, which
raises its message (or, should it accept the payload, decodes it). Without libzstd.so.1 the
zstd chunks are decompressed in Python, by the same pool.
"""

from __future__ import annotations

import ctypes as C
import os
import queue
import threading
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING

from kvsim import traces

from . import _native as B

if TYPE_CHECKING:
    import numpy as np

u32, u64 = C.c_uint32, C.c_uint64

DEC_OK, DEC_CRC, DEC_ZSTD, DEC_NO_ZSTD, DEC_CODEC, DEC_MEMORY = range(6)  # decode.h KVSIM_DEC_*


class RecordErrorC(C.Structure):
    """decode.h kvsimRecordError."""

    _fields_ = [("index", u64), ("rule", u32), ("pad", u32), ("dep", u64), ("named", u64)]


class ChunkCheckC(C.Structure):
    """decode.h kvsimChunkCheck."""

    _fields_ = [("base", u64), ("n", u64), ("bad", u64), ("rule", u32), ("pad", u32),
                ("join_end", u64)]


_READY = False


def _lib() -> C.CDLL:
    global _READY
    lib = B.load_library()
    if not _READY:
        lib.kvsimDecodePayload.restype = C.c_int
        lib.kvsimDecodePayload.argtypes = [C.c_void_p, C.c_size_t, u32, u32, C.c_void_p,
                                           C.c_size_t, C.POINTER(u32)]
        if hasattr(lib, "kvsimDecodeChecked"):  # not in a library built before it (ab.py --base)
            lib.kvsimDecodeChecked.restype = C.c_int
            lib.kvsimDecodeChecked.argtypes = [C.c_void_p, C.c_size_t, u32, u32, C.c_void_p,
                                               C.c_size_t, C.POINTER(u32), C.c_void_p, u64,
                                               C.c_void_p, C.c_void_p]
        lib.kvsimCrc32.restype = u32
        lib.kvsimCrc32.argtypes = [u32, C.c_void_p, C.c_size_t]
        lib.kvsimValidatorCreate.restype = C.c_void_p
        lib.kvsimValidatorCreate.argtypes = [C.c_int64, C.c_int64, u32]
        lib.kvsimValidateLocal.restype = None
        lib.kvsimValidateLocal.argtypes = [C.c_void_p, C.c_void_p, C.c_size_t, u64, C.c_void_p,
                                           C.POINTER(ChunkCheckC)]
        lib.kvsimValidateJoin.restype = C.c_int
        lib.kvsimValidateJoin.argtypes = [C.c_void_p, C.c_void_p, C.c_void_p,
                                          C.POINTER(ChunkCheckC), C.POINTER(RecordErrorC)]
        lib.kvsimValidatorFree.restype = None
        lib.kvsimValidatorFree.argtypes = [C.c_void_p]
        _READY = True
    return lib


def crc32(data: bytes, crc: int = 0) -> int:
    """The compiled CRC32 (zlib's polynomial), for tests."""
    return int(_lib().kvsimCrc32(crc, _pointer(data), len(data)))


def _pointer(payload: bytes | bytearray) -> bytes | C.Array:
    """What a ``c_void_p`` parameter takes to point at ``payload``'s bytes, without a copy
    (a bytearray is viewed by a ctypes array, to keep alive for the call)."""
    if isinstance(payload, bytes):
        return payload
    return (C.c_char * len(payload)).from_buffer(payload)


def default_workers() -> int:
    """Decoding threads: one per core, at most 2 (one chunk decodes several times faster than
    the engine simulates it)."""
    return max(1, min(2, os.cpu_count() or 1))


class _Decoder:
    """Decodes one data chunk's payload (CRC32, codec) into a record array, on any thread."""

    def __init__(self, reader: traces.TraceReader) -> None:
        self.reader = reader
        self.lib = _lib()
        self._py_lock = threading.Lock()  # the reader's zstd decompressor is not thread-safe
        self._checked = hasattr(self.lib, "kvsimDecodeChecked")

    def __call__(self, info: traces.ChunkInfo, payload: bytes | bytearray, crc: int,
                 buffers: queue.Queue | None = None, validator: _Validator | None = None,
                 base: int = 0) -> tuple[B.Records, tuple | None]:
        """The chunk's records and, with a validator, their local check (``base``: the trace
        index of the first), made in the same compiled call while the records are at hand."""
        raw_len = info.n_records * traces.RECORD_SIZE
        out = None
        if buffers is not None:  # a recycled buffer: no fresh pages to fault in
            buf = buffers.get()
            if buf.capacity >= info.n_records:
                out = buf.head(info.n_records)
        if out is None:
            out = B.Records(info.n_records)
        src = _pointer(payload)
        computed = u32(0)
        check = None  # the local check, when the compiled call made it
        if validator is None or not self._checked:
            code = self.lib.kvsimDecodePayload(src, len(payload), info.codec, crc, out.address,
                                               raw_len, C.byref(computed))
        else:
            chk, loads = validator.buffers(info.n_records)
            code = self.lib.kvsimDecodeChecked(src, len(payload), info.codec, crc, out.address,
                                               raw_len, C.byref(computed), validator.h, base,
                                               loads, C.byref(chk))
            check = chk, loads
        del src  # a bytearray's view ends here
        if code == DEC_CRC:
            raise self.reader.crc_error(info, crc, int(computed.value))
        if code == DEC_MEMORY:
            raise MemoryError(f"chunk {info.index}: byte planes of {raw_len} bytes")
        if code in (DEC_ZSTD, DEC_NO_ZSTD):
            with self._py_lock:  # the reference words the error, or decodes what it accepts
                recs = self.reader.payload_records(info, payload)
            C.memmove(out.address, recs.ctypes.data, raw_len)
            check = None  # the compiled call checked nothing
        elif code != DEC_OK:
            raise self.reader._err(f"codec {info.codec} payload of {len(payload)} bytes refused",
                                   info.index, info.offset)
        if validator is not None and check is None:
            check = validator.local(out, base)
        return out, check


class _Validator:
    """The compiled record rules, with the reference's wording of a failure."""

    def __init__(self, reader: traces.TraceReader) -> None:
        self.lib = _lib()
        self.ref = reader._validator
        assert self.ref is not None
        n_tags = -1 if self.ref.n_tags is None else self.ref.n_tags
        n_sites = -1 if self.ref.n_sites is None else self.ref.n_sites
        self.h = self.lib.kvsimValidatorCreate(n_tags, n_sites, self.ref.n_markers)
        if not self.h:
            raise MemoryError("kvsimValidatorCreate")
        self.records = 0
        self.err = RecordErrorC()

    @staticmethod
    def buffers(n: int) -> tuple[ChunkCheckC, C.Array]:
        """What the local check of ``n`` records fills: the outcome and a load bit each."""
        return ChunkCheckC(), (u64 * ((n + 63) // 64 + 1))()

    def local(self, recs: B.Records | np.ndarray, base: int) -> tuple[ChunkCheckC, C.Array]:
        """The rules ``recs`` (trace records ``base`` on) settle alone; any thread."""
        addr, n = B.records_address(recs)
        chk, loads = self.buffers(n)
        self.lib.kvsimValidateLocal(self.h, addr, n, base, loads, C.byref(chk))
        return chk, loads

    def join(self, reader: traces.TraceReader, info: traces.ChunkInfo,
             recs: B.Records | np.ndarray, chk: ChunkCheckC, loads: C.Array) -> None:
        """The rest of the check, in trace order (the calling thread)."""
        rc = self.lib.kvsimValidateJoin(self.h, B.records_address(recs)[0], loads,
                                        C.byref(chk), C.byref(self.err))
        if rc < 0:
            raise RuntimeError(f"kvsimValidateJoin: chunk {info.index} out of turn")
        if rc:
            e = self.err
            field, problem = self.ref.describe(int(e.rule), int(e.dep), int(e.named))
            raise reader.record_error(info, self.records, int(e.index), field, problem)
        self.records += len(recs)

    def close(self) -> None:
        if self.h:
            self.lib.kvsimValidatorFree(self.h)
            self.h = None


_END = object()


def chunks(reader: traces.TraceReader, workers: int | None = None, ahead: int = 4,
           reuse: bool = False, hold: int = 0, arrays: bool = True
           ) -> Iterator[np.ndarray | B.Records]:
    """Yield the record arrays of ``reader`` (not yet iterated), decoded as described above
    by ``workers`` threads (default :func:`default_workers`), at most ``ahead`` chunks ahead
    of the consumer. The arrays are read-only, as the reader's. ``reuse``: the consumer is
    done with each array when it asks for the ``hold`` + 1-th after it (with ``hold`` 0, the
    next one, as :func:`sim.simulate` is), so the arrays' memory is recycled. ``arrays``
    False: yield the :class:`_native.Records` themselves (what the engine runs; numpy is
    then never imported)."""
    if reader._started:
        raise RuntimeError(f"{reader.name}: a trace reader can be iterated only once")
    reader._started = True
    decode = _Decoder(reader)
    validator = _Validator(reader) if reader._validator is not None else None
    q: queue.Queue = queue.Queue(maxsize=max(1, ahead))
    stop = threading.Event()
    pool = ThreadPoolExecutor(max_workers=workers or default_workers(),
                              thread_name_prefix="kvsim-decode")
    # With reuse, one array per chunk that can be alive at once: `ahead` queued, one the
    # producer waits to queue, one being yielded, `hold` the consumer keeps, one spare; each
    # decode takes one (a chunk larger than an array gets a fresh one, which then joins the
    # pool).
    buffers: queue.Queue | None = None
    if reuse:
        buffers = queue.Queue()
        for _ in range(max(1, ahead) + 3 + hold):
            buffers.put(B.Records(traces.DEFAULT_CHUNK_RECORDS))

    def put(item: object) -> bool:
        while not stop.is_set():
            try:
                q.put(item, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    def job(info: traces.ChunkInfo, payload: bytes | bytearray, crc: int, base: int):
        return decode(info, payload, crc, buffers, validator, base)

    def produce() -> None:
        base = 0  # trace index of the chunk's first record
        try:
            while not stop.is_set():
                info, payload, crc = reader._read_frame()
                if info is None:
                    put(_END)
                    return
                reader._accept(info)
                if not put((info, pool.submit(job, info, payload, crc, base))):
                    return
                base += info.n_records
        except BaseException as exc:  # handed to the consumer, in stream order
            put(exc)

    thread = threading.Thread(target=produce, name="kvsim-frames", daemon=True)
    thread.start()
    held: deque[B.Records] = deque()  # the buffers of the chunks yielded last (reuse)
    try:
        while True:
            item = q.get()
            while len(held) > hold:
                buffers.put(held.popleft())
            if item is _END:
                return
            if isinstance(item, BaseException):
                raise item
            info, fut = item
            recs, chk = _result(fut)
            if validator is not None:
                validator.join(reader, info, recs, *chk)
            if buffers is not None:
                held.append(recs.whole())
            yield recs.array() if arrays else recs
    finally:
        stop.set()
        thread.join(timeout=1)
        if thread.is_alive():
            # blocked reading a pipe that stalls (the thread is a daemon): closing the file
            # would wait for that read, so the reader leaves it open
            reader._abandon()
        pool.shutdown(wait=True, cancel_futures=True)
        if validator is not None:
            validator.close()


def _result(fut: Future) -> tuple[B.Records, tuple | None]:
    try:
        return fut.result()
    except traces.TraceError as exc:
        raise exc.with_traceback(None) from None
