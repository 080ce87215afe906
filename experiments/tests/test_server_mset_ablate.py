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


def test_rob_below_one_is_one_line(tmp_path, capsys):
    out = tmp_path / "x.json"
    assert A.main(["--cpu", "skylake", "--native", str(tmp_path / "n.json"), "--rob", "0",
                   "-o", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["server_mset_ablate: --rob 0: must be at least 1"]
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


def test_a_native_file_without_its_runs_is_one_line(tmp_path, capsys):
    """measure_cli's shape: a missing key of an input file is one line, status 1, no file."""
    out, native = tmp_path / "x.json", tmp_path / "n.json"
    native.write_text("{}")
    assert A.main(["--cpu", "skylake", "--native", str(native), "-o", str(out)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["server_mset_ablate: no 'runs' in an input"]
    assert not out.exists()


def test_a_cpu_file_of_other_counts_is_one_line(tmp_path, capsys, monkeypatch):
    """The simulator's ConfigError (here: a [work] fitted to site-cost-v1's counts, on this
    c_ref's trace) is one line, status 1, no file."""
    from kvsim.experiments import server_mset as M
    from kvsim.sim import calibrate as cal

    cpu = tmp_path / "v1.toml"
    cpu.write_text(cal.to_toml({
        "name": "t", "freq_ghz": 3.0, "core": {"width": 6, "rob": 256},
        "cache": [{"name": "L1D", "size": 49152, "ways": 12, "line": 64, "latency": 5}],
        "dram": {"latency_ns": 100.0}, "work": {"generic": 4.0, "hash": 2.5},
        "meta": {"raw": {"work_kinds": {"ns_per_call": {}}}}}))
    monkeypatch.setattr(M, "TRACE_ITERS", 20)
    monkeypatch.setattr(M, "summarize", lambda runs: [
        {"label": label, "loopback": {"median": 1000.0}} for label in A.ENTRIES])
    out, native = tmp_path / "x.json", tmp_path / "n.json"
    native.write_text('{"runs": []}')
    assert A.main(["--cpu", str(cpu), "--native", str(native), "-o", str(out)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and err[0] == "traced: mset-10", err  # the log, then the one line
    assert err[1].startswith("server_mset_ablate: the trace's gap model is site-cost-v2")
    assert "site-cost-v1" in err[1] and str(cpu) in err[1]
    assert not out.exists()


def test_chain_to_lookup_counts_from_the_last_value_load_to_the_next_bucket(tmp_path):
    import numpy as np

    from kvsim import traces

    sites = ["none", "ht.find.bucket", "obj.value", "obj.header"]
    # one key: bucket, bucket, header, value, value; the next key's first bucket after
    # `gap` instructions; then that key's second bucket (not counted: a bucket before it)
    gap = 37
    spec = [(1, 3), (1, 0), (3, 10), (2, 4), (2, 0), (1, gap), (1, 0), (3, 10), (2, 4), (2, 0)]
    rec = np.zeros(len(spec), dtype=traces.RECORD_DTYPE)
    rec["site"], rec["gap"] = zip(*spec, strict=True)
    rec["addr"] = 4096 + 64 * np.arange(len(spec), dtype=np.uint64)
    rec["size"], rec["kind"] = 8, traces.KIND_LOAD
    path = tmp_path / "t.kvt"
    with traces.Writer(str(path), {"sites": sites}) as w:
        w.write(rec)
    got = A.chain_to_lookup(path)
    assert got["count"] == 1 and got["median"] == gap + 1
