"""Chunk codecs side by side: bytes per record and decoding speed, writes a result file.

    python -m bench codec TRACE [TRACE ...] [--records N] [--repeat R] [--out FILE]

Each trace's first ``--records`` records (default 4,000,000) are written in memory once per
codec (``raw``, ``zstd``, ``zstd_planes``: traces/FORMAT.md "Codecs"), in chunks of 65536
records, as ``traces.Writer`` writes them. Per codec it reports the stored bytes per record
and its decoding speeds, best of ``--repeat`` rounds that alternate the codecs (so a slow
spell on a shared machine hits each):

* **compiled**, the simulator's intake on one thread: every chunk's CRC32, decompression and,
  for ``zstd_planes``, the join of its byte planes (``kvsimDecodePayload``, sim/_engine/decode.c),
  from payloads already in memory; records per second of CPU time; and the same with the
  record rules each chunk settles alone (the local check), in the decoding call as the
  simulator's intake makes it (``kvsimDecodeChecked``: for byte planes, screened 16 records at
  a time before the join) and in a second call (``kvsimValidateLocal``, one record at a time);
* **reader**, ``traces.open(..., validate=False)`` read to the end (the pure-Python reader that
  notebooks and converters use; it joins byte planes in compiled code when the engine library
  is built, with numpy otherwise); records per second of wall time.

Every figure goes to ``--out`` (default ``results/trace-codec-bench.json`` in a checkout)
through :func:`kvsim.provenance.publish` (commit, machine, load average, date).
"""

from __future__ import annotations

import argparse
import ctypes as C
import io
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from kvsim import provenance, traces

RESULT_NAME = "trace-codec-bench.json"
CODECS = ("raw", "zstd", "zstd_planes")


def head(path: Path, records: int) -> tuple[np.ndarray, dict]:
    """The first ``records`` records of a trace, and its header."""
    parts, got = [], 0
    with traces.open(path) as tr:
        header = dict(tr.header)
        for chunk in tr:
            parts.append(chunk[: records - got].copy())
            got += parts[-1].size
            if got >= records:
                break
    header.pop("format_version", None)
    return np.concatenate(parts), header


def encode(recs: np.ndarray, header: dict, codec: str) -> bytes:
    buf = io.BytesIO()
    with traces.Writer(buf, header, codec=codec, validate=False) as w:
        w.write(recs)
    return buf.getvalue()


def payloads(data: bytes) -> list[tuple[traces.ChunkInfo, bytes, int]]:
    """Every data chunk's (info, stored payload, CRC), by the reader's framing."""
    out = []
    with traces.open(io.BytesIO(data), validate=False) as tr:
        while True:
            info, payload, crc = tr._read_frame()
            if info is None:
                return out
            tr._accept(info)
            out.append((info, bytes(payload), crc))


def compiled_seconds(data: bytes, chunks: list[tuple[traces.ChunkInfo, bytes, int]],
                     check: str = "none") -> float:
    """CPU seconds of the compiled intake over every chunk, on this thread: decoding alone
    (``check`` "none": kvsimDecodePayload), decoding and the local record check in one call
    ("checked": kvsimDecodeChecked, as traces/_intake.py does), or in two ("two calls":
    kvsimDecodePayload, then kvsimValidateLocal)."""
    from kvsim.traces import _intake

    lib = _intake._lib()
    out = np.empty(traces.DEFAULT_CHUNK_RECORDS, dtype=traces.RECORD_DTYPE)
    loads = np.empty(traces.DEFAULT_CHUNK_RECORDS // 64 + 2, dtype=np.uint64)
    chk = _intake.ChunkCheckC()
    got = C.c_uint32(0)
    srcs = [(info, np.frombuffer(p, dtype=np.uint8), crc) for info, p, crc in chunks]
    with traces.open(io.BytesIO(data)) as tr:
        v = _intake._Validator(tr)
    try:
        base = 0
        t0 = time.process_time()
        for info, src, crc in srcs:
            n, raw = info.n_records, info.n_records * traces.RECORD_SIZE
            if check == "checked":
                code = lib.kvsimDecodeChecked(src.ctypes.data, src.size, info.codec, crc,
                                              out.ctypes.data, raw, C.byref(got), v.h, base,
                                              loads.ctypes.data, C.byref(chk))
            else:
                code = lib.kvsimDecodePayload(src.ctypes.data, src.size, info.codec, crc,
                                              out.ctypes.data, raw, C.byref(got))
                if check == "two calls":
                    lib.kvsimValidateLocal(v.h, out.ctypes.data, n, base, loads.ctypes.data,
                                           C.byref(chk))
            if code != 0:
                raise traces.TraceError(f"chunk {info.index}: the compiled decoder returned "
                                        f"{code}")
            base += n
        return time.process_time() - t0
    finally:
        v.close()


def reader_seconds(data: bytes) -> float:
    t0 = time.perf_counter()
    with traces.open(io.BytesIO(data), validate=False) as tr:
        for _ in tr:
            pass
    return time.perf_counter() - t0


def measure(path: Path, records: int, repeat: int) -> dict[str, Any]:
    recs, header = head(path, records)
    n = recs.size
    data = {c: encode(recs, header, c) for c in CODECS}
    chunks = {c: payloads(data[c]) for c in CODECS}
    kinds = ("compiled", "checked", "two calls", "reader")
    best = {(c, k): float("inf") for c in CODECS for k in kinds}
    for _ in range(repeat):
        for c in CODECS:
            best[c, "compiled"] = min(best[c, "compiled"], compiled_seconds(data[c], chunks[c]))
            for k in ("checked", "two calls"):
                best[c, k] = min(best[c, k], compiled_seconds(data[c], chunks[c], k))
            best[c, "reader"] = min(best[c, "reader"], reader_seconds(data[c]))
    row: dict[str, Any] = {"trace": path.name, "records": int(n), "codecs": {}}
    for c in CODECS:
        row["codecs"][c] = {
            "bytes_per_record": round(len(data[c]) / n, 3),
            "compiled_mrec_per_cpu_s": round(n / best[c, "compiled"] / 1e6, 1),
            "compiled_ns_per_record": round(best[c, "compiled"] / n * 1e9, 2),
            "checked_ns_per_record": round(best[c, "checked"] / n * 1e9, 2),
            "decode_then_check_ns_per_record": round(best[c, "two calls"] / n * 1e9, 2),
            "reader_mrec_s": round(n / best[c, "reader"] / 1e6, 1),
        }
        r = row["codecs"][c]
        print(f"{path.name:<28} {c:<12} {r['bytes_per_record']:6.2f} B/rec  compiled "
              f"{r['compiled_ns_per_record']:6.2f} ns/rec, checked "
              f"{r['checked_ns_per_record']:6.2f} (in two calls "
              f"{r['decode_then_check_ns_per_record']:6.2f})  reader "
              f"{r['reader_mrec_s']:6.1f} M/s")
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench codec",
                                 description=(__doc__ or "").splitlines()[0])
    ap.add_argument("trace", nargs="+", help="a .kvt trace")
    ap.add_argument("--records", type=int, default=4_000_000,
                    help="records taken from the start of each trace (default 4000000)")
    ap.add_argument("--repeat", type=int, default=5)
    provenance.add_out_option(ap, RESULT_NAME)
    a = ap.parse_args(argv)
    if a.records < 1 or a.repeat < 1:
        print("python -m bench codec: error: --records and --repeat must be >= 1",
              file=sys.stderr)
        return 2
    out = provenance.out_path(a.out, RESULT_NAME)
    try:
        rows = [measure(Path(t), a.records, a.repeat) for t in a.trace]
    except (OSError, traces.TraceError) as exc:
        print(f"python -m bench codec: error: {exc}", file=sys.stderr)
        return 1
    payload = {"benchmark": "trace-codecs", "repeat": a.repeat, "records": a.records,
               "chunk_records": traces.DEFAULT_CHUNK_RECORDS, "rows": rows}
    return provenance.publish("python -m bench codec", out, payload)


if __name__ == "__main__":
    sys.exit(main())
