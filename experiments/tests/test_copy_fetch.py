"""experiments/copy_fetch.py: the traces of copies into hot and cold destinations, and the
simulator's penalty per destination line with and without whole-line store fetches."""

from __future__ import annotations

import json

import numpy as np
import pytest

from kvsim import traces
from kvsim.experiments import copy_fetch as cf


def _body(rec):
    end = np.nonzero((rec["kind"] == traces.KIND_MARKER)
                     & (rec["flags"] == traces.MARK_WARMUP_END))[0][0]
    return rec[end + 1:]


@pytest.mark.parametrize("state", ["hot", "flushed", "pool"])
def test_a_sample_copies_the_batch_line_by_line(state):
    rec, copies = cf.records(16384, state, 1 << 20)
    body = _body(rec)
    assert copies == cf.BATCH // 16384 and len(body) == 2 * cf.BATCH // 64
    assert (body["kind"][0::2] == traces.KIND_LOAD).all()
    assert (body["kind"][1::2] == traces.KIND_STORE).all()
    assert (body["size"] == 64).all() and (body["addr"] % 64 == 0).all()
    dst = np.unique(body["addr"][1::2])
    assert len(dst) == (16384 // 64 if state == "hot" else cf.BATCH // 64)
    warm_stores = (rec["kind"][:len(rec) - len(body)] == traces.KIND_STORE).sum()
    assert warm_stores == {"hot": 256, "flushed": 0, "pool": 2 * (1 << 20) // 64}[state]


def test_touch_loads_the_destinations_without_stores():
    rec, _ = cf.records(4096, "flushed", 1 << 20, touch=True)
    body = _body(rec)
    assert (body["kind"] == traces.KIND_LOAD).all() and len(body) == cf.BATCH // 64


def test_whole_line_fetches_make_cold_destinations_dearer(tmp_path):
    nat = {"raw": {"sizes": [4096]}, "rows": []}
    rows = cf.compare(nat, "xeon-8255c")
    p = rows[0]["predicted"]
    assert p["file"]["full_line_store_fetch"] is True
    assert p["no_fetch"]["full_line_store_fetch"] is False
    assert (p["file"]["flushed_penalty_ns_per_line"]
            > p["no_fetch"]["flushed_penalty_ns_per_line"])
    native = tmp_path / "n.json"
    native.write_text(json.dumps({"rows": [], "raw": {"sizes": [2 << 20]}}))
    out = tmp_path / "c.json"
    assert cf.main(["compare", "--native", str(native), "--cpu", "xeon-8255c",
                    "--out", str(out)]) == 0
    assert json.loads(out.read_text())["rows"] == []  # sizes above a sample are skipped


def test_a_file_that_is_not_a_native_result_is_one_line(tmp_path, capsys):
    bad = tmp_path / "x.json"
    bad.write_text("{}")
    assert cf.main(["compare", "--native", str(bad), "--out", str(tmp_path / "o.json")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not a calibrate_copy result" in err[0]
