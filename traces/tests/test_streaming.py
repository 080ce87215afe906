"""Reading from pipes, stdin and child processes: the reader never seeks."""

from __future__ import annotations

import io
import os
import stat
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
from trace_helpers import HEADER, random_records

from kvsim import traces

REPO = Path(traces.__file__).resolve().parent.parent


class NoSeek(io.RawIOBase):
    """A readable stream that refuses seek/tell/peek and returns short reads."""

    def __init__(self, data: bytes, piece: int = 7) -> None:
        self._data, self._pos, self._piece = data, 0, piece

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False

    def readinto(self, b: bytearray) -> int:  # type: ignore[override]
        n = min(len(b), self._piece, len(self._data) - self._pos)
        b[:n] = self._data[self._pos:self._pos + n]
        self._pos += n
        return n

    def seek(self, *a: object) -> int:
        raise io.UnsupportedOperation("seek")

    def tell(self) -> int:
        raise io.UnsupportedOperation("tell")


def _trace_bytes(records: np.ndarray, codec: str = "zstd", chunk: int = 700) -> bytes:
    buf = io.BytesIO()
    with traces.Writer(buf, HEADER, codec=codec, chunk_records=chunk) as w:
        w.write(records)
    return buf.getvalue()


def test_short_reads_without_seek() -> None:
    records = random_records(3000, 5)
    out = traces.read_all(NoSeek(_trace_bytes(records), piece=7))
    np.testing.assert_array_equal(out, records)


def test_os_pipe_streaming_chunks_arrive_before_end() -> None:
    records = random_records(3000, 6)
    data = _trace_bytes(records, "raw", 1000)
    r, w = os.pipe()
    first_chunk_seen = threading.Event()

    def producer() -> None:
        with os.fdopen(w, "wb") as f:
            end_of_chunk0 = len(data) - 16 - 2 * (20 + 24000)
            f.write(data[:end_of_chunk0])
            f.flush()
            first_chunk_seen.wait(10)  # the reader must yield chunk 0 before the rest exists
            f.write(data[end_of_chunk0:])

    t = threading.Thread(target=producer)
    t.start()
    with os.fdopen(r, "rb") as f, traces.open(f) as tr:
        chunks = []
        for chunk in tr:
            chunks.append(chunk)
            first_chunk_seen.set()
    t.join()
    assert tr.complete
    np.testing.assert_array_equal(np.concatenate(chunks), records)


def test_subprocess_stdout_and_stdin_dash(tmp_path: Path) -> None:
    records = random_records(2000, 8)
    path = tmp_path / "t.kvt"
    path.write_bytes(_trace_bytes(records))
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent)}
    # a child writes the trace to its stdout ("-"); we read the pipe
    writer = (
        "from kvsim import traces; from trace_helpers import HEADER, random_records\n"
        "with traces.Writer('-', HEADER, chunk_records=700) as w:\n"
        "    w.write(random_records(2000, 8))\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", writer], stdout=subprocess.PIPE, env=env)
    assert proc.stdout is not None
    out = traces.read_all(proc.stdout)
    assert proc.wait() == 0
    np.testing.assert_array_equal(out, records)
    # a child reads "-" (stdin) from a pipe and prints the record count
    reader = "from kvsim import traces; print(traces.read_all('-').size, traces.summarize.__name__)"
    with open(path, "rb") as f:
        res = subprocess.run([sys.executable, "-c", reader], stdin=f, env=env,
                             capture_output=True, text=True, check=True)
    assert res.stdout.split() == ["2000", "summarize"]
    # errors on stdin name "<stdin>"
    bad = path.read_bytes()[:-5]
    res = subprocess.run([sys.executable, "-c", reader], input=bad, env=env,
                         capture_output=True)
    assert res.returncode != 0
    assert b"TraceError: <stdin>: truncated" in res.stderr


def test_a_path_that_is_a_pipe_is_written_in_place(tmp_path):
    """A trace written to a FIFO (as to /dev/null) goes into it: the path stays a FIFO, no temp
    file is renamed over it (which, run as root, would replace /dev/null with a file), and the
    bytes are those of the same trace written to a regular file."""
    recs = random_records(5_000, seed=3)
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()), daemon=True)
    reader.start()
    with traces.Writer(fifo, HEADER, chunk_records=700) as w:
        w.write_chunk(recs)
    reader.join(timeout=30)
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pipe"]
    plain = tmp_path / "plain.kvt"
    with traces.Writer(plain, HEADER, chunk_records=700) as w:
        w.write_chunk(recs)
    assert got == [plain.read_bytes()]
