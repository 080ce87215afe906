"""The experiments framework end to end: a real sweep, resume after SIGKILL, a Dask cluster,
the report's seed column, and bad names or scales.

The sweeps run real experiments at ``--scale small`` on the ``local`` preset only (and,
for the Dask comparison, their simulated cells only), so the suite stays within minutes.
"""

import json
import os
import signal
import statistics
import subprocess
import sys
import time

import pandas as pd
import pytest

import kvsim.experiments
from kvsim.experiments import cells, framework, runner
from kvsim.sim.local import core_is_known

from .conftest import ROOT, run_kvsim

# the sweeps' CPU: `local` where this machine's core has a timing model, else a preset
CPU = "local" if core_is_known() else "epyc-7713"
#: how tables name its column: `local` reads `local (uncalibrated)` where this machine has no
#: calibration that passed its self-check (the test's process and kvsim's may differ in that)
SIM_COLS = {f"sim:{CPU}", f"sim:{CPU} (uncalibrated)"}


@pytest.fixture(scope="module")
def pipeline_run(tmp_path_factory):
    """`kvsim experiment run pipeline --cpu local` at small scale, every cell kind."""
    out = tmp_path_factory.mktemp("exp") / "res"
    res = run_kvsim("--quiet", "experiment", "run", "pipeline", "--cpu", CPU, "-o", out)
    assert res.returncode == 0, res.stderr.decode()
    return out, res


def test_sweep_writes_tidy_rows_plots_and_tables(pipeline_run):
    out, res = pipeline_run
    d = out / "pipeline"
    rows = pd.read_parquet(d / "pipeline.parquet")
    planned = runner.plan(["pipeline"], "small", [CPU])["pipeline"]
    assert len(rows) == len(planned) == len(list((d / "cells").glob("*.json")))
    assert set(rows.kind) == {"sim", "native"}
    for col in ("spec", "commit", "date_utc", "machine_cpu", "machine_caches", "machine_kernel",
                "machine_thp", "cycles", "speedup", "variant", "depth", "keys"):
        assert col in rows.columns, col
    # every spec in the table is one the plan asked for, and its id is its hash
    assert sorted(json.dumps(s, sort_keys=True) for s in planned) == sorted(rows.spec)
    sim = rows[rows.kind == "sim"]
    assert (sim[sim.baseline == True].speedup == 1.0).all()  # noqa: E712
    for _, r in sim[sim.baseline == False].iterrows():  # noqa: E712
        base = sim[(sim.group == r.group) & (sim.baseline == True)]  # noqa: E712
        assert r.speedup == pytest.approx(base.cycles.iloc[0] / r.cycles)
    nat = rows[rows.kind == "native"]
    for _, r in nat.iterrows():
        a, b = json.loads(r.a_cpu_runs_s), json.loads(r.b_cpu_runs_s)
        ratios = json.loads(r.round_ratios)
        assert len(ratios) == len(a) == len(b) == r.rounds >= 6
        assert ratios == pytest.approx([x / y for x, y in zip(a, b, strict=True)], rel=1e-12)
        assert r.speedup == pytest.approx(statistics.median(ratios), rel=1e-12)
        assert r.a_cpu_median_s == pytest.approx(statistics.median(a), rel=1e-12)
        assert r.speedup_ci95_low <= r.speedup <= r.speedup_ci95_high
        within = r.speedup_ci95_low <= 1.0 <= r.speedup_ci95_high
        assert (r.verdict == "within noise") == within
    png = (d / "pipeline.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    md = (d / "pipeline.md").read_text()
    header = next(ln for ln in md.splitlines() if ln.startswith("| keys |"))
    assert " seed " in header and any(f" {c} " in header for c in SIM_COLS)


def test_report_has_a_seed_column_beside_ours(pipeline_run):
    out, _ = pipeline_run
    res = run_kvsim("experiment", "report", out)
    assert res.returncode == 0, res.stderr.decode()
    text = res.stdout.decode()
    header = next(ln for ln in text.splitlines() if ln.startswith("| keys |"))
    cols = [c.strip() for c in header.strip("|").split("|")]
    assert "seed" in cols and SIM_COLS & set(cols) and "native" in cols
    # the seed's number (Valkey #2092, depth 10, batch 16) sits in the seed column
    line = next(ln for ln in text.splitlines() if ln.startswith("| 100,000 | 10 | batch 16"))
    seed = line.strip("|").split("|")[cols.index("seed")].strip()
    assert float(seed) == pytest.approx(604375.69 / 352795.91, rel=1e-2)


def test_resume_after_sigkill_recomputes_nothing(tmp_path):
    out = tmp_path / "res"
    cmd = [sys.executable, "-m", "kvsim.experiments.cli", "--quiet", "experiment", "run",
           "iterate", "--cpu", CPU, "--only", "sim", "--workers", "1", "-o", str(out)]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                            start_new_session=True)
    cdir = out / "iterate" / "cells"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and proc.poll() is None:
        if cdir.is_dir() and len(list(cdir.glob("*.json"))) >= 2:
            break
        time.sleep(0.05)
    assert proc.poll() is None, "the sweep ended before it could be killed"
    os.killpg(proc.pid, signal.SIGKILL)  # the CLI and its worker processes, mid-sweep
    proc.wait()
    done = {p.name: p.stat().st_mtime_ns for p in cdir.glob("*.json")}
    total = len(runner.plan(["iterate"], "small", [CPU], ["sim"])["iterate"])
    assert 2 <= len(done) < total
    for p in cdir.glob("*.json"):
        json.loads(p.read_text())  # every cell file there is whole
    res = subprocess.run(cmd, capture_output=True, env=env, timeout=600)
    assert res.returncode == 0, res.stderr.decode()
    assert f"{len(done)} of {total} cells already done" in res.stderr.decode()
    assert f"computed {total - len(done)} cells" in res.stdout.decode()
    for name, mtime in done.items():
        assert (cdir / name).stat().st_mtime_ns == mtime, "a finished cell was recomputed"
    assert len(pd.read_parquet(out / "iterate" / "iterate.parquet")) == total


def test_dask_cluster_gives_the_same_simulated_rows(tmp_path):
    distributed = pytest.importorskip("distributed")
    local = runner.run(["kvobj_memory"], tmp_path / "local", cpus=[CPU], kinds=["sim"],
                       workers=2, log=lambda m: None)
    assert not local["failed"]
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster:
        res = runner.run(["kvobj_memory"], tmp_path / "dask", cpus=[CPU], kinds=["sim"],
                         scheduler=cluster.scheduler_address, log=lambda m: None)
    assert not res["failed"] and res["computed"] == local["computed"] > 0
    a, b = (pd.read_parquet(tmp_path / d / "kvobj_memory" / "kvobj_memory.parquet")
            .sort_values("cell_id").reset_index(drop=True) for d in ("local", "dask"))
    varying = [c for c in a.columns if c.startswith("machine_") or c in ("date_utc",
                                                                          "seconds")]
    pd.testing.assert_frame_equal(a.drop(columns=varying), b.drop(columns=varying))


def test_publish_as_names_the_published_files(tmp_path, monkeypatch):
    results = tmp_path / "results"
    monkeypatch.setattr(runner.provenance, "results_dir", lambda: results)
    res = runner.run(["iterate"], tmp_path / "r", cpus=[CPU], kinds=["sim"], workers=1,
                     log=lambda m: None, publish_as="iterate-other")
    assert not res["failed"]
    got = sorted(p.name for p in (results / "experiments").iterdir())
    made = sorted(p.name for p in (tmp_path / "r" / "iterate").glob("*.png"))
    assert made and got == sorted(["iterate-other.json"]
                                  + [n.replace("iterate", "iterate-other", 1) for n in made])
    assert (json.loads((results / "experiments" / "iterate-other.json").read_text())
            == json.loads((tmp_path / "r" / "iterate" / "iterate.json").read_text()))


def test_scheduler_without_dask_says_what_to_install(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "distributed", None)  # import fails as if absent
    with pytest.raises(ValueError, match=r"pip install 'kvsim\[dask\]'"):
        runner.run(["pipeline"], tmp_path / "r", cpus=[CPU], scheduler="tcp://x:1")
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("args, needle", [
    (["run", "no-such-experiment"], "unknown experiment 'no-such-experiment'"),
    (["run", "pipeline", "--scale", "huge"], "--scale"),
    (["run", "pipeline", "--cpu", "no-such-cpu"], "no-such-cpu"),
    (["report"], "no experiment results"),
    (["run", "all", "--publish-as", "validation-b"], "--publish-as"),
    (["run", "iterate", "--publish-as", "../iterate"], "--publish-as"),
])
def test_bad_input_is_one_line_and_no_output(tmp_path, args, needle):
    out = tmp_path / "res"
    if args[0] == "report":
        out.mkdir()
        res = run_kvsim("experiment", "report", out)
    else:
        res = run_kvsim("experiment", *args, "-o", out)
    err = res.stderr.decode()
    assert res.returncode != 0
    assert len(err.strip().splitlines()) == 1 and err.startswith("kvsim: error: "), err
    assert needle in err
    assert "Traceback" not in err
    if args[0] == "run":
        assert not out.exists()


def test_a_cpu_without_timing_is_refused_before_any_work(tmp_path):
    untimed = tmp_path / "caches-only.toml"
    untimed.write_text('name = "c"\n[[cache]]\nname = "L1D"\nsize = "32KiB"\nways = 8\n'
                       'line = 64\n')
    out = tmp_path / "res"
    res = run_kvsim("experiment", "run", "pipeline", "--cpu", untimed, "-o", out)
    err = res.stderr.decode()
    assert res.returncode != 0 and len(err.strip().splitlines()) == 1, err
    assert "no timing model" in err and "caches-only.toml" in err
    assert not out.exists()
    from kvsim import sim

    assert all(sim.load_cpu(c).timing_capable for c in runner.default_cpus())


def test_every_experiment_plans_both_scales_with_valid_specs():
    kinds = set()
    for name in framework.names():
        for scale in framework.SCALES:
            specs = runner.plan([name], scale, [CPU])[name]
            assert specs, (name, scale)
            ids = [cells.cell_id(s) for s in specs]
            assert len(set(ids)) == len(ids), f"{name} {scale}: duplicate cells"
            for s in specs:
                kinds.add(s["kind"])
                assert s["experiment"] == name and "params" in s
                if s["kind"] == "sim":
                    groups = [t for t in specs if t.get("group") == s["group"]
                              and t["cpu"] == s["cpu"]]
                    assert sum(bool(t["baseline"]) for t in groups) == 1
    assert kinds == set(cells.KIND_BASE)  # every kind, the registered ones among them


def test_cell_specs_are_json_and_ids_are_stable():
    spec = framework.sim_cell("x", "pipeline", {"keys": 10, "variant": "naive", "batch": None},
                              "local", {"keys": 10}, "g", True)
    assert "batch" not in spec["options"]
    assert cells.cell_id(spec) == cells.cell_id(json.loads(json.dumps(spec)))
    assert cells.cell_id(spec) != cells.cell_id(dict(spec, cpu="graviton3"))


def test_cell_ids_name_the_machine_of_timed_cells_and_the_local_cpu(monkeypatch):
    opts = {"keys": 10, "variant": "naive"}
    local = framework.sim_cell("x", "pipeline", opts, "local", {}, "g", True)
    preset = dict(local, cpu="graviton3")
    native = framework.native_cell("x", "pipeline", opts, dict(opts, variant="lookahead"),
                                   5, {})
    valkey = framework.valkey_cell("x", {"mode": "get"}, {})
    inputs = {k: "f" for k in cells.KIND_BASE}

    def keys():
        return {n: runner._cell_key(s, inputs)
                for n, s in (("local", local), ("preset", preset), ("native", native),
                             ("valkey", valkey))}

    before = keys()
    assert cells.context_key(preset) == {} and set(cells.context_key(native)) == {"machine"}
    monkeypatch.setattr(cells, "machine_identity", lambda: "another-machine")
    moved = keys()
    assert [n for n in before if before[n] != moved[n]] == ["native", "valkey"]
    monkeypatch.setattr(cells, "_local_cpu_digest", lambda: "recalibrated")
    assert [n for n in before if moved[n] != keys()[n]] == ["local"]


def test_list_names_every_experiment():
    res = run_kvsim("experiment", "list")
    assert res.returncode == 0, res.stderr.decode()
    names = [ln.split()[0] for ln in res.stdout.decode().splitlines()]
    assert names == framework.names()
    assert {"rdb_load", "iterate", "mset_batch", "pipeline", "kvobj_memory", "batch_size",
            "real_valkey"} <= set(names)


def test_experiment_demo_keeps_its_invocation():
    res = run_kvsim("experiment", "demo", "--help")
    assert res.returncode == 0
    for opt in ("--out", "--keys", "--ops", "--cpu", "--rounds", "--publish"):
        assert opt in res.stdout.decode()



def test_expire_option_costs_memory_and_changes_no_reply():
    """kvobj_memory's with-expire case: --expire gives every populated key an expire time;
    the legacy layout pays an expires-table entry per key, the unified one at most its
    embedded 8 bytes, and no GET reply changes (no key expires during the run)."""
    def native(layout, expire):
        args = ["native", "pipeline", "--keys", "3000", "--ops", "500", "--value-size", "32",
                "--layout", layout, "--repeat", "1", "--json"] + (["--expire"] if expire else [])
        res = run_kvsim(*args)
        assert res.returncode == 0, res.stderr.decode()
        return json.loads(res.stdout)

    for layout, most in (("legacy", None), ("unified", 8)):
        plain, exp = native(layout, False), native(layout, True)
        assert exp["workload"]["expire"] is True and plain["workload"]["expire"] is False
        assert exp["reply_crc32"] == plain["reply_crc32"]
        extra = (exp["memory_bytes"] - plain["memory_bytes"]) / 3000
        assert extra > 0 if most is None else 0 <= extra <= most, (layout, extra)


def _fake_valkey(monkeypatch, run):
    import types

    mod = types.ModuleType("kvsim.experiments.valkey")
    mod.run_valkey_cell = run
    monkeypatch.setitem(sys.modules, "kvsim.experiments.valkey", mod)
    # `from kvsim.experiments import valkey` reads the package's attribute first, set once
    # the real module has been imported
    monkeypatch.setattr(kvsim.experiments, "valkey", mod, raising=False)


def test_real_valkey_cells_call_the_valkey_module_and_reach_the_table(tmp_path, monkeypatch):
    """The framework's side of the real-Valkey cells, with a stand-in for
    kvsim.experiments.valkey (its own tests run the real server)."""
    seen = []

    def run(spec):
        seen.append(spec)
        ratio = 1.0 + spec["batch_b"] / 100 + spec["pipeline"] / 1000
        return {**spec, "speedup": ratio, "speedup_ci95_low": ratio - 0.01,
                "speedup_ci95_high": ratio + 0.01, "verdict": "faster",
                "round_ratios": [ratio] * spec["rounds"]}

    _fake_valkey(monkeypatch, run)
    res = runner.run(["real_valkey"], tmp_path, log=lambda m: None)
    assert not res["failed"] and res["computed"] == len(seen) == 2
    assert {s["op"] for s in seen} == {"mget", "get"}
    rows = pd.read_parquet(tmp_path / "real_valkey" / "real_valkey.parquet")
    assert sorted(rows.speedup) == sorted(1.0 + s["batch_b"] / 100 + s["pipeline"] / 1000
                                          for s in seen)
    md = (tmp_path / "real_valkey" / "real_valkey.md").read_text()
    header = next(ln for ln in md.splitlines() if ln.startswith("| command |"))
    assert " seed " in header and " speedup " in header


def test_a_missing_valkey_tool_skips_the_cell_and_stores_nothing(tmp_path, monkeypatch):
    class ToolMissing(RuntimeError):
        pass

    def run(spec):
        raise ToolMissing("redis-benchmark not found: apt-get install redis-tools")

    _fake_valkey(monkeypatch, run)
    lines = []
    res = runner.run(["real_valkey"], tmp_path, log=lines.append)
    assert not res["failed"] and res["computed"] == 0 and len(res["skipped"]) == 2
    assert any("apt-get install redis-tools" in ln for ln in lines)
    assert not list((tmp_path / "real_valkey" / "cells").glob("*.json"))


def test_a_trace_group_is_traced_once_and_equals_its_cells(tmp_path, monkeypatch):
    """The cells that share a trace: one trace, one pass on all their CPUs, and each cell's
    metrics what the cell computes alone."""
    from kvsim.experiments import cref

    specs = runner.plan(["kvobj_memory"], "small", [CPU, "graviton3"], ["sim"])
    specs = specs["kvobj_memory"]
    key = cells.trace_key(specs[0])
    group = [s for s in specs if cells.trace_key(s) == key]
    assert {s["cpu"] for s in group} == {CPU, "graviton3"}
    made = []
    real = cref.trace
    monkeypatch.setattr(cref, "trace", lambda *a, **k: made.append(a) or real(*a, **k))
    together = cells.run_sim_group(group)
    assert len(made) == 1
    alone = [cells.run_cell(s, str(tmp_path))["metrics"] for s in group]
    assert [r["metrics"] for r in together] == alone
    with pytest.raises(ValueError, match="one trace"):
        cells.run_sim_group([group[0], next(s for s in specs if cells.trace_key(s) != key)])


@pytest.mark.parametrize("scale", ["small", "full"])
def test_kvobj_cells_compare_layouts_on_redis_dict(scale):
    """Redis #13806 changed Redis's chained dict: every kvobj_memory cell runs on
    ``table=dict``, and a native pair differs in the layout alone."""
    specs = runner.plan(["kvobj_memory"], scale, [CPU])["kvobj_memory"]
    sims = [s for s in specs if s["kind"] == "sim"]
    pairs = [s for s in specs if s["kind"] == "native"]
    assert sims and pairs
    assert all(s["options"]["table"] == "dict" for s in sims)
    for p in pairs:
        a, b = dict(p["a"]), dict(p["b"])
        assert (a.pop("layout"), b.pop("layout")) == ("legacy", "unified")
        assert a == b and a["table"] == "dict"


@pytest.mark.parametrize("scale", ["small", "full"])
def test_mset_over_existing_keys_preloads_the_whole_range(scale):
    """Redis #15043's benchmarks preload every key of the range before the MSETs (their
    dataset check: keyspacelen = the range), so every MSET over existing keys, simulated or
    native, prefills the whole range; the fill of an empty keyspace prefills nothing."""
    plan = runner.plan(["mset_batch", "headline"], scale, [CPU])
    specs = plan["mset_batch"] + plan["headline"]
    assert any(s["experiment"] == "headline" and s["workload"] == "mset" for s in specs)
    sims = [s["options"] for s in specs if s["kind"] == "sim" and s["workload"] == "mset"]
    natives = [s[side] for s in specs if s["kind"] == "native" and s["workload"] == "mset"
               for side in ("a", "b")]
    over = [o for o in sims + natives if o["mset_keys"] == "random"]
    assert over and all(o["prefill"] == 1.0 for o in over)
    assert all("prefill" not in o for o in sims + natives if o["mset_keys"] == "new")


def test_experiment_order_does_not_depend_on_the_first_import():
    def order(first: str) -> str:
        code = (f"import kvsim.experiments.{first}\n"
                "from kvsim.experiments import framework; print(framework.names())")
        res = subprocess.run([sys.executable, "-c", code], capture_output=True, check=True)
        return res.stdout.decode()

    orders = {order(m) for m in ("seed_absolute", "micro", "studies", "validation")}
    assert len(orders) == 1
