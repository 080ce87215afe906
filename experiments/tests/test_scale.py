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


def test_page_table_reads_are_the_walks_reads(tmp_path):
    """With one page-table read per walk every walk reads L1 once and each level below sees
    what the one above missed; a fixed walk reads nothing; both CPUs in the same pass walk
    alike (same TLBs)."""
    cpus = ["graviton3", "graviton3+walk_reads=1"]
    r = scale.run_size("keys", 20_000, cpus, tmp_path, repeat=1, native=False)
    for side in ("a", "b"):
        fixed, reads = (r["predicted"][c][side] for c in cpus)
        assert fixed["page_table_reads"] == {}
        assert fixed["walks_per_key"] == reads["walks_per_key"] > 0
        pt = list(reads["page_table_reads"].values())
        assert pt[0]["accesses_per_key"] == reads["walks_per_key"]
        for up, down in zip(pt, pt[1:], strict=False):
            assert down["accesses_per_key"] == up["misses_per_key"]
        assert set(reads["levels"]) == set(reads["page_table_reads"])


def test_the_tables_render_from_the_file(tmp_path):
    """docs/scale.md's tables come from the result file: a CPU's row per size, the newest
    run of a size winning; the walks table only where walks read the page table."""
    from kvsim import provenance
    from kvsim.experiments import scale_render

    cpus = ["graviton3", "graviton3+walk_reads=1"]
    rows = []
    for keys in (3000, 3000, 6000):
        r = scale.run_size("keys", keys, cpus, tmp_path, repeat=1, native=False)
        rows.append(dict(r, provenance=provenance.provenance()))
    rows[0]["predicted"]["graviton3"]["a"]["cycles_per_key"] = -1.0  # replaced by rows[1]
    doc = {"provenance": provenance.provenance(), "rows": rows}
    text = scale_render.render(doc, "results/scale.json", "cycles")
    lines = [x for x in text.splitlines() if x.startswith("| keys")]
    assert len(lines) == 4 and "| -1 /" not in text
    walks = scale_render.render(doc, "results/scale.json", "walks").splitlines()
    assert sum(x.startswith("| keys") for x in walks) == 2
    assert "no chase yet" in scale_render.render(doc, "results/scale.json", "chase")
    assert len(scale_render.render(doc, "results/scale.json", "memory").splitlines()) > 4
