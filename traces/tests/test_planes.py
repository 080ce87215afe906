"""Byte planes (codec zstd_planes): the compiled transform equals numpy's, both invert."""

from __future__ import annotations

import io

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvsim import traces
from kvsim.traces import planes


def _records(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    raw = rng.integers(0, 256, n * traces.RECORD_SIZE, dtype=np.uint8)
    return raw.view(traces.RECORD_DTYPE)


needs_lib = pytest.mark.skipif(planes._lib() is None, reason="engine library not built")


@needs_lib
@settings(max_examples=80, deadline=None)
@given(n=st.integers(0, 600), seed=st.integers(0, 2**32 - 1))
def test_compiled_equals_numpy_and_inverts(n: int, seed: int) -> None:
    recs = _records(n, seed)
    split = planes.split(recs).tobytes()
    assert split == planes.split(recs, compiled=False).tobytes()
    # plane j holds byte j of every record
    as_bytes = recs.view(np.uint8).reshape(n, traces.RECORD_SIZE)
    for j in (0, 7, 18, 23):
        assert split[j * n:(j + 1) * n] == as_bytes[:, j].tobytes()
    for compiled in (True, False):
        back = planes.join(split, n, compiled=compiled)
        assert back.dtype == traces.RECORD_DTYPE and back.tobytes() == recs.tobytes()


def test_numpy_path_inverts_and_sizes_are_checked() -> None:
    recs = _records(37, 1)
    back = planes.join(planes.split(recs, compiled=False), 37, compiled=False)
    assert back.tobytes() == recs.tobytes()
    with pytest.raises(ValueError, match="for 36 records"):
        planes.join(planes.split(recs), 36)


def test_planes_compress_better_on_a_scattered_trace() -> None:
    """The reason for the codec: near-constant planes compress to little."""
    rng = np.random.default_rng(5)
    recs = np.zeros(20_000, dtype=traces.RECORD_DTYPE)
    recs["addr"] = rng.integers(0, 1 << 30, recs.size) & ~7
    recs["size"] = 8
    sizes = {}
    for codec in ("zstd", "zstd_planes"):
        buf = io.BytesIO()
        with traces.Writer(buf, {}, codec=codec) as w:
            w.write(recs)
        sizes[codec] = len(buf.getvalue())
    assert sizes["zstd_planes"] < sizes["zstd"]
