"""experiments/stream_queue.py: copy-fetch's kernels with the prefetchers below L1 issuing on
arrival, trained by stores and hits, beside the file as it is."""

from __future__ import annotations

import json

from kvsim.experiments import stream_queue as sq
from kvsim.sim.config import load_cpu


def test_the_variants_change_only_the_prefetchers_below_l1():
    cpu = load_cpu("xeon-8255c")
    for label, (_, change) in sq.VARIANTS.items():
        pfs = change(cpu).prefetchers
        assert len(pfs) == len(cpu.prefetchers)
        for old, new in zip(cpu.prefetchers, pfs, strict=True):
            keys = (old.arrival, old.stores, old.hits)
            if label != "file" and old.level > 0:
                keys = (True, True, True)
            assert (new.arrival, new.stores, new.hits) == keys
            d16 = label == "stream_queue_d16" and old.level > 0 and old.kind == "stream"
            assert new.degree == (16 if d16 else old.degree)


def test_the_kernels_beside_native(tmp_path):
    native = tmp_path / "n.json"
    native.write_text(json.dumps({"raw": {"sizes": [4096]}, "rows": [
        {"size": 4096, "method": "touch", "flushed_penalty_ns_per_line": {"median": 3.7}}]}))
    out = tmp_path / "s.json"
    assert sq.main(["--native", str(native), "--cpu", "xeon-8255c", "--sizes", "4096",
                    "--out", str(out)]) == 0
    (row,) = json.loads(out.read_text())["kernels"]["xeon-8255c"]
    assert row["native"] == {"touch_flushed": {"median": 3.7}}
    p = row["predicted"]
    assert set(p) == set(sq.VARIANTS)
    for v in p.values():
        assert v["touch_flushed"] > 0 and v["copy_flushed"] > 0


def test_a_file_that_is_not_a_native_result_is_one_line(tmp_path, capsys):
    bad = tmp_path / "x.json"
    bad.write_text("{}")
    out = tmp_path / "o.json"
    assert sq.main(["--native", str(bad), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not a calibrate_copy result" in err[0]
    assert not out.exists()
