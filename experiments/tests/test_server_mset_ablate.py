"""Bad input of python -m kvsim.experiments.server_mset_ablate: one line, non-zero, no file."""

from __future__ import annotations

from kvsim.experiments import server_mset_ablate as A


def test_scheduler_below_one_is_one_line(tmp_path, capsys):
    out = tmp_path / "x.json"
    assert A.main(["--cpu", "skylake", "--native", str(tmp_path / "n.json"), "--scheduler", "0",
                   "-o", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["server_mset_ablate: --scheduler 0: must be at least 1"]
    assert not out.exists()


def test_missing_native_file_is_one_line(tmp_path, capsys):
    out = tmp_path / "x.json"
    native = tmp_path / "missing.json"
    assert A.main(["--cpu", "skylake", "--native", str(native), "-o", str(out)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("server_mset_ablate: ") and str(native) in err[0]
    assert not out.exists()


def test_markdown_has_one_row_per_entry():
    v = {"ns": 1000.0, "ll_misses": 5.0, "walks": 1.0, "mlp": 1.0}
    doc = {"rows": [{"label": "mset-10", "native_ns": 1200.0,
                     "variants": {name: v for name in A.VARIANTS}}]}
    lines = A.markdown(doc).splitlines()
    assert len(lines) == 3 and lines[2].startswith("| mset-10 | 1,200 | 1,000 (5.0, 1.0)")
