"""``python -m kvsim.experiments.scale``: both sides of a seed pair traced with the setup
carried and simulated on several CPUs in one pass; bad arguments give one line."""

from kvsim.experiments import scale


def test_run_size_simulates_every_cpu_in_one_pass(tmp_path):
    cpus = ["xeon-8255c", "graviton3"]
    r = scale.run_size("keys", 4000, cpus, tmp_path, repeat=1, native=False)
    assert set(r["predicted"]) == set(cpus)
    for cpu in cpus:
        p = r["predicted"][cpu]
        assert p["a"]["cycles_per_key"] > 0 and p["b"]["cycles_per_key"] > 0
        assert p["speedup"] == p["a"]["cycles_per_key"] / p["b"]["cycles_per_key"]
        assert p["a"]["dtlb_misses_per_key"] >= p["a"]["stlb_misses_per_key"] >= 0
    # the setup is carried: a warm-up prefix, and no trace left behind
    assert r["trace_a"]["warmup_records"] > 0 and not list(tmp_path.iterdir())
    assert "native" not in r


def test_bad_arguments_one_line(capsys):
    assert scale.main(["--workloads", "nope"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["scale: error: unknown workload 'nope'"]
    assert scale.main(["--keys", "x"]) == 2
