"""The demo study at a tiny scale: it runs, and its numbers come from the traces."""

import json

from .conftest import run_kvsim


def test_demo_tiny(tmp_path):
    out = tmp_path / "demo"
    res = run_kvsim("experiment", "demo", "--out", out, "--keys", "3000", "--ops", "400",
                    "--cpu", "local", "--cpu", "graviton3")
    assert res.returncode == 0, res.stderr.decode()
    meta = json.loads((out / "demo.json").read_text())
    rows = meta["rows"]
    assert {(r["cpu"], r["variant"]) for r in rows} == {
        (c, v) for c in ("local", "graviton3") for v in ("naive", "lookahead")}
    for r in rows:
        assert r["cycles"] > 0 and r["records"] > 0
    naive = {r["cpu"]: r for r in rows if r["variant"] == "naive"}
    look = {r["cpu"]: r for r in rows if r["variant"] == "lookahead"}
    for cpu in naive:
        assert look[cpu]["records"] > naive[cpu]["records"], "lookahead adds prefetch records"
    native = meta["native"]
    assert native["naive"] > 0 and native["lookahead"] > 0
    assert native["speedup"] == native["naive"] / native["lookahead"]
    assert (out / "demo.png").stat().st_size > 1000
    assert (out / "demo.csv").exists()
