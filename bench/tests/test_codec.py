"""python -m bench codec: every codec timed and written, bad input one line and no file."""

import json

import numpy as np

from kvsim import traces


def _records(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    raw = rng.integers(0, 256, n * traces.RECORD_SIZE, dtype=np.uint8)
    return raw.view(traces.RECORD_DTYPE)


def test_codec_bench_writes_every_codec(tmp_path) -> None:
    from bench import codec as codec_bench

    recs = _records(3000, 2)
    recs["kind"] = traces.KIND_LOAD
    recs["size"], recs["flags"], recs["dep"], recs["tag"], recs["site"] = 8, 0, 0, 0, 0
    recs["addr"] &= np.uint64((1 << 40) - 1)
    src = tmp_path / "t.kvt"
    with traces.Writer(src, {}) as w:
        w.write(recs)
    out = tmp_path / "r.json"
    assert codec_bench.main([str(src), "--records", "2000", "--repeat", "1",
                             "--out", str(out)]) == 0

    row = json.loads(out.read_text())["rows"][0]
    assert row["records"] == 2000 and set(row["codecs"]) == set(codec_bench.CODECS)
    assert row["codecs"]["raw"]["bytes_per_record"] > 24  # the framing on top
    for c in codec_bench.CODECS:  # the three compiled timings of each codec
        r = row["codecs"][c]
        assert 0 < r["compiled_ns_per_record"] and 0 < r["checked_ns_per_record"]
        assert 0 < r["decode_then_check_ns_per_record"]
    assert codec_bench.main([str(tmp_path / "missing.kvt"), "--out", str(out)]) == 1
