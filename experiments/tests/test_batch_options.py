"""--batch and --chunk are read by the variants they size, or refused (issue 44, section 2).

A size given to variants that ignore it is one line naming the option and the variants, a
non-zero exit and no output, from kvsim-cref and from ``kvsim``; ``--chunk`` sizes Redis
#15133's in-command chunk (checked against the model's ``multikey_batches``); without it
the traces are those of before.
"""

from __future__ import annotations

import io
import json
import subprocess

import pytest
from click.testing import CliRunner

from kvsim import traces
from kvsim.experiments import cref
from kvsim.experiments.cli import cli, main
from kvsim.model.batching import multikey_batches

SMALL = ["--keys", "300", "--ops", "20"]

#: (workload, extra args, the option refused, the variants the error names)
UNUSED = [
    ("mget", ["--variant", "chunk-15133", "--batch", "8"], "--batch 8",
     "multikey=chunk-15133 pipeline=naive on table=hashtable"),
    ("mget", ["--variant", "chunk-15133", "--table", "dict", "--batch", "8"], "--batch 8",
     "multikey=chunk-15133 pipeline=naive on table=dict"),
    ("mget", ["--variant", "batch", "--table", "dict", "--batch", "8"], "--batch 8",
     "multikey=batch pipeline=naive on table=dict"),
    ("mset", ["--variant", "batch", "--table", "dict", "--batch", "4"], "--batch 4",
     "multikey=batch pipeline=naive on table=dict"),
    ("mget", ["--variant", "redis-14899", "--batch", "8"], "--batch 8",
     "multikey=redis-14899 pipeline=naive"),
    ("pipeline", ["--batch", "8"], "--batch 8", "pipeline=naive on table=hashtable"),
    ("mget", ["--variant", "batch", "--chunk", "8"], "--chunk 8",
     "multikey=batch pipeline=naive on table=hashtable"),
    ("mset", ["--variant", "redis-15043", "--table", "dict", "--chunk", "8"], "--chunk 8",
     "multikey=redis-15043 pipeline=naive on table=dict"),
    ("mget", ["--variant", "none", "--pipeline", "lookahead", "--chunk", "8"], "--chunk 8",
     "multikey=none pipeline=lookahead"),
]


@pytest.mark.parametrize("workload,args,option,names", UNUSED)
def test_unused_size_is_refused_by_kvsim_cref(workload, args, option, names, tmp_path):
    out = tmp_path / "t.kvt"
    r = subprocess.run([str(cref.binary()), "trace", workload, "-o", str(out), *SMALL, *args],
                       capture_output=True, text=True)
    assert r.returncode != 0
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith(f"kvsim-cref: {option}: not used by {names}")
    assert not out.exists()


@pytest.mark.parametrize("workload,args,option,names", UNUSED)
def test_unused_size_is_refused_by_kvsim(workload, args, option, names, tmp_path, capsys):
    out = tmp_path / "t.kvt"
    assert main(["trace", workload, "-o", str(out), *SMALL, *args]) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{option}: not used by {names}" in err[0]
    assert not out.exists()


@pytest.mark.parametrize("args", [
    ["--variant", "lookahead", "--batch", "8"],
    ["--variant", "naive"],  # kvsim forwards no default --batch, so naive runs
])
def test_used_or_default_size_runs(args, tmp_path):
    r = CliRunner().invoke(cli, ["trace", "pipeline", "-o", str(tmp_path / "t.kvt"), *SMALL,
                                 *args])
    assert r.exit_code == 0, r.output


def test_versus_batch_must_be_read_by_b():
    r = subprocess.run([str(cref.binary()), "native", "mget", *SMALL, "--variant", "batch",
                        "--versus-variant", "chunk-15133", "--versus-batch", "4", "--json"],
                       capture_output=True, text=True)
    assert r.returncode != 0
    assert "--versus-batch 4: not used by multikey=chunk-15133" in r.stderr


def _trace(workload: str, *args: str) -> tuple[dict, list[int]]:
    r = subprocess.run([str(cref.binary()), "trace", workload, "-o", "-", *args],
                       capture_output=True, check=True)
    sizes = []
    with traces.open(io.BytesIO(r.stdout)) as tr:
        header = tr.header
        recs = []
        for chunk in tr:
            recs.append(chunk.tobytes())
            for rec in chunk[chunk["kind"] == traces.KIND_MARKER]:
                if rec["flags"] == traces.MARK_BATCH:
                    sizes.append(int(rec["addr"]))
    return {"header": header, "records": b"".join(recs)}, sizes


#: the paths that read --chunk (multikey=batch on a hashtable is Valkey's, sized by --batch)
CHUNKED = [(w, v, t) for w in ("mget", "mset") for v, t in
           (("chunk-15133", "hashtable"), ("chunk-15133", "dict"), ("batch", "dict"))]


@pytest.mark.parametrize("workload,variant,table", CHUNKED)
@pytest.mark.parametrize("chunk", [1, 3, 8, 16, 32])
def test_chunk_sizes_the_15133_batches(workload, variant, table, chunk):
    kpc = 45
    ops = ["--ops", "3"] if workload == "mget" else []
    _, sizes = _trace(workload, "--keys", str(kpc * 3), *ops, "--keys-per-command", str(kpc),
                      "--variant", variant, "--table", table, "--chunk", str(chunk))
    want = [len(b) for b in multikey_batches(kpc, chunk) if len(b) > 1]
    assert sizes == want * 3
    assert all(n <= 2 * chunk - 1 for n in sizes)


@pytest.mark.parametrize("table", ["hashtable", "dict"])
def test_default_chunk_is_16_and_leaves_the_trace_as_before(table):
    base = ["--keys", "400", "--ops", "5", "--keys-per-command", "40",
            "--variant", "chunk-15133", "--table", table]
    plain, sizes = _trace("mget", *base)
    given, _ = _trace("mget", *base, "--chunk", "16")
    assert sizes == [16, 24] * 5
    assert plain["records"] == given["records"]
    assert "chunk" not in plain["header"]["workload"]  # headers without --chunk as before
    assert given["header"]["workload"]["chunk"] == 16


def test_chunk_out_of_range_is_refused():
    r = subprocess.run([str(cref.binary()), "trace", "mget", "-o", "-", *SMALL, "--variant",
                        "chunk-15133", "--chunk", "33"], capture_output=True, text=True)
    assert r.returncode != 0
    assert r.stderr.strip() == "kvsim-cref: --chunk: expected an integer in 1..32, got '33'"


# --- the batch_size study: MGET and MSET batch/chunk sizes on both tables -------------------

@pytest.mark.parametrize("scale", ["small", "full"])
def test_batch_size_study_sweeps_mget_and_mset_on_both_tables(scale):
    from kvsim.experiments import runner

    specs = runner.plan(["batch_size"], scale, ["epyc-7713"])["batch_size"]
    sims = [s for s in specs if s["kind"] == "sim"]
    seen = {}
    for s in sims:
        o = s["options"]
        key = (s["workload"], o.get("table", "hashtable"))
        size = o.get("chunk" if key[1] == "dict" and s["workload"] != "pipeline" else "batch")
        seen.setdefault(key, set()).add((o["variant"], size))
    assert set(seen) == {("pipeline", "hashtable"), ("mget", "hashtable"), ("mget", "dict"),
                         ("mset", "hashtable"), ("mset", "dict")}
    for key in [k for k in seen if k[0] != "pipeline"]:
        sizes = {n for v, n in seen[key] if v == "batch"}
        assert {1, 4, 16} <= sizes and ("none", None) in seen[key], key
    natives = {(s["workload"], s["b"].get("table", "hashtable")) for s in specs
               if s["kind"] == "native"}
    assert natives == set(seen)


def test_batch_size_study_cells_are_valid_kvsim_cref_options():
    """Every option set the small study plans is accepted by kvsim-cref (no size given to a
    variant that ignores it), traced at a tiny size."""
    from kvsim.experiments import runner

    specs = runner.plan(["batch_size"], "small", ["epyc-7713"])["batch_size"]
    opts = [(s["workload"], s["options"]) for s in specs if s["kind"] == "sim"]
    opts += [(s["workload"], s[side]) for s in specs if s["kind"] == "native"
             for side in ("a", "b")]
    for workload, o in opts:
        tiny = dict(o, keys=200, ops=3)
        r = subprocess.run([str(cref.binary()), "trace", workload, "-o", "/dev/null",
                            *cref.workload_args(tiny)], capture_output=True, text=True)
        assert r.returncode == 0, (workload, o, r.stderr)


def _tiny(o: dict) -> dict:
    t = dict(o, keys=min(o.get("keys", 200), 200))
    for k, cap in (("ops", 3), ("warmup_ops", 0), ("hash_fields", 20)):
        if k in t:
            t[k] = min(t[k], cap)
    return t


def test_every_planned_cell_and_ablation_side_gives_only_sizes_its_variants_read():
    """No study, validation row or ablation pair gives --batch or --chunk to variants that
    ignore it (kvsim-cref would refuse the cell): each option set traced at a tiny size."""
    from kvsim.experiments import ablation, framework, runner

    sets = set()
    for name, specs in runner.plan(framework.names(), "small", ["epyc-7713"]).items():
        for s in specs:
            sides = [s.get("options")] if s["kind"] == "sim" else [s.get("a"), s.get("b")]
            for o in sides:
                if o is not None and s.get("workload"):
                    sets.add((name, s["workload"], json.dumps(o, sort_keys=True)))
    for pair, p in ablation.PAIRS.items():
        for side in (p["base"], p["variant"]):
            o = ablation._options(pair, 1000, p["trace_ops"], None, side)
            sets.add(("ablation " + pair, p["workload"], json.dumps(o, sort_keys=True)))
    assert len(sets) > 20
    for name, workload, o in sorted(sets):
        r = subprocess.run([str(cref.binary()), "trace", workload, "-o", "/dev/null",
                            *cref.workload_args(_tiny(json.loads(o)))],
                           capture_output=True, text=True)
        assert "not used by" not in r.stderr, (name, workload, o, r.stderr)


def test_compare_gives_a_shared_batch_to_the_variants_that_read_it(tmp_path):
    from kvsim.experiments import compare

    opts = {"keys": 300, "ops": 50, "batch": 8}
    rows = compare.compare("pipeline", ["naive", "lookahead"], ["epyc-7713"], opts,
                           trace_dir=tmp_path)
    assert {r["variant"] for r in rows} >= {"naive", "lookahead"}
    for v, want in (("naive", 16), ("lookahead", 8)):  # naive runs without --batch
        with traces.open(tmp_path / f"pipeline-{v}.kvt") as tr:
            assert tr.header["workload"]["batch"] == want
    with pytest.raises(cref.CrefError, match=r"^--batch 8: read by none of the compared "
                                             r"variants \(none, chunk-15133\); --batch 8: not"):
        compare.compare("mget", ["none", "chunk-15133"], ["epyc-7713"], opts,
                        trace_dir=tmp_path)


def test_bench_cref_groups_give_only_sizes_their_variants_read():
    """``python -m bench cref``'s groups run each variant with the group's options."""
    from bench import cref_variants as bench_cref

    for g in bench_cref._groups(0.0001):
        for v in g["variants"]:
            r = subprocess.run([str(cref.binary()), "trace", *g["args"], "--variant", v,
                                "-o", "/dev/null"], capture_output=True, text=True)
            assert "not used by" not in r.stderr, (g["name"], v, r.stderr)
