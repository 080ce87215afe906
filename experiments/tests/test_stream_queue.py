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


def test_the_rows_are_the_ablations_pass_over_the_validations_pairs(monkeypatch, tmp_path):
    """validation_rows runs ablation.predict_pair on each row's pair as the validation runs
    it (its keys, its traced run's options: a load's reused pages), under the variants'
    settings, and leaves the ablation's own pairs as they were."""
    from kvsim.experiments import ablation

    before = dict(ablation.PAIRS["unified"])
    calls = []

    def fake(name, keys, cpu, workdir, settings, log=None):
        calls.append((name, keys, dict(ablation.PAIRS[name]), list(settings),
                      ablation.PAIRS[name].get("trace_options")))
        side = {"settings": {s: {"ns_per_op": 10.0 + i, "mlp": 1.0 + i, "ipc": 1.0}
                             for i, s in enumerate(settings)}}
        return {"base": side, "variant": side, "speedup": {}}

    monkeypatch.setattr(ablation, "predict_pair", fake)
    rows = sq.validation_rows(["load-4096", "unified"], "xeon-8255c", tmp_path)
    assert [r["pair"] for r in rows] == ["unified", "load-4096"]  # the validation's order
    by = {c[0]: c for c in calls}
    assert by["load-4096"][1] == 40_000 and by["load-4096"][4] == {"restart_pages": "reused"}
    assert by["unified"][1] == 500_000 and not by["unified"][4]
    assert by["unified"][2]["trace_ops"] == 100_000  # the row's, not the ablation's
    assert all(c[3] == list(sq.SETTING_OF.values()) for c in calls)
    for r in rows:
        assert set(r["sides"]) == {"baseline", "variant"}
        assert r["sides"]["baseline"]["file"] == {"ns_per_op": 10.0, "mlp": 1.0}
        assert r["sides"]["variant"]["stream_queue_d16"] == {"ns_per_op": 12.0, "mlp": 3.0}
    assert rows[1]["options"]["restart_pages"] == "reused"
    assert ablation.PAIRS["unified"] == before and "load-4096" not in ablation.PAIRS
