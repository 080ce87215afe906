"""The lockstep matrix: model == c_ref naive == every c_ref batched variant.

Adding a variant: append its variant template to VARIANTS (``{batch}`` = a batch size
drawn per call from 1..128), or write a test calling the ``check_variant`` fixture."""

import pytest
from hypothesis import HealthCheck, Phase, settings
from model_helpers import scale

from kvsim import artifacts
from kvsim.model import cref_binding as cref
from kvsim.model.harness import (
    CrefBackend,
    LockstepConfig,
    Mismatch,
    ModelBackend,
    assert_variant_equivalent,
    make_lockstep_machine,
)
from kvsim.model.keyspace import Keyspace as Model
from kvsim.model.resp import encode_command as E
from kvsim.model.strategies import hashtag_keys

#: Every batched variant c_ref ships (c_ref/README.md), as templates.
VARIANTS = [
    "pipeline=lookahead batch={batch}",
    "multikey=batch batch={batch}",
    "pipeline=lookahead multikey=batch batch={batch}",
    "multikey=chunk-15133 batch={batch}",
    "pipeline=lookahead-hash-once multikey=batch-hash-once batch={batch}",
    "load=prefetch-after-key iterate=next-bucket",
    "load=prefetch-rehash iterate=valkey pipeline=lookahead multikey=batch batch={batch}",
    "multikey=redis-15043",
    "multikey=window-3389 batch={batch}",
    "pipeline=lookahead multikey=redis-14899 batch={batch}",
    "pipeline=lookahead multikey=redis-14899-guard batch={batch}",
    "pipeline=all-pending-14754 multikey=batch batch={batch}",
    "pipeline=all-pending-14754 multikey=redis-14899 batch={batch}",
    "pipeline=all-pending-14754 multikey=redis-14899-guard batch={batch}",
]

OPTIONS = [
    f"table={t} layout={lay} cluster={c}"
    for t in ("hashtable", "dict") for lay in ("unified", "legacy") for c in (0, 1)
]


@pytest.mark.parametrize("options", OPTIONS)
def test_every_variant_equals_naive_and_model(cref_lib, options):
    assert_variant_equivalent(VARIANTS, options, max_examples=scale(40),
                              stateful_step_count=30)


@pytest.mark.parametrize("variant", ["load=prefetch-after-key", "load=prefetch-rehash"])
def test_regression_load_prefetch_empty_slot_table(cref_lib, variant):
    """Found by the lockstep run (fixed in c_ref): loading a snapshot whose only key has
    expired, in cluster mode, left the slot table the prefetch had created, empty."""
    with cref.Keyspace("cluster=1") as ks:
        ks.execute(E("SET", "k0", "v", "EX", "1"))
        snap = ks.save_snapshot()
        ks.set_time_ms(1001)
        ks.load_snapshot(snap, variant)
        assert ks.dbsize() == 0
        ks.check_valid()


@pytest.mark.slow
@pytest.mark.parametrize("options", OPTIONS)
def test_every_variant_long_run(cref_lib, options):
    """The matrix with 25x the examples and longer programs (``pytest -m slow``)."""
    assert_variant_equivalent(VARIANTS, options, max_examples=1000,
                              stateful_step_count=60)


@pytest.mark.parametrize("options", ["hashtable_min_exp=0 seed=7", "cluster=1 seed=3"])
def test_other_seeds_and_tiny_tables(cref_lib, options):
    assert_variant_equivalent(VARIANTS[:3], options, max_examples=scale(25),
                              seed=int(options.split("seed=")[1]))


def test_check_variant_fixture(check_variant):
    """The fixture a variant author uses (model/README.md)."""
    check_variant("multikey=batch batch={batch}", "cluster=1", max_examples=10)


def _pipeline() -> bytes:
    keys = hashtag_keys(b"p", 40)
    cmds = [
        ["SET", keys[0], "old", "PX", "1"], ["MSET", *[x for k in keys for x in (k, k)]],
        ["MGET", *keys[::-1]], ["SET", "", "e"], ["GET", ""], ["SET", "b\r\n", "\x00"],
        ["MSETNX", keys[1], "n", "zz", "n"], ["DEL", *keys[:20]], ["GET", keys[30]],
        ["KEYS", "{p}1*"], ["DBSIZE"],
    ]
    return b"".join(E(*c) for c in cmds)


@pytest.mark.parametrize("options", ["", "cluster=1", "table=dict layout=legacy"])
def test_pipeline_split_at_every_byte_boundary(cref_lib, options):
    """Deliver one pipeline in two reads cut at every byte; every variant, every batch
    size class, must reply and consume exactly like the model and naive c_ref."""
    buf = _pipeline()
    variants = ["", "pipeline=lookahead batch=1", "pipeline=lookahead batch=3",
                "pipeline=lookahead multikey=batch batch=16", "pipeline=lookahead batch=128"]
    for cut in range(len(buf) + 1):
        outs = []
        for v in variants:
            with cref.Keyspace(options) as ks:
                ks.set_time_ms(0)
                r1, u1 = ks.execute(buf[:cut], v)
                rest = buf[u1:]
                ks.set_time_ms(5)
                r2, u2 = ks.execute(rest, v)
                ks.check_valid()
                outs.append((v, r1, u1, r2, u2, ks.dbsize()))
        m = Model(cluster="cluster=1" in options)
        r1, u1 = m.execute(buf[:cut])
        m.set_time_ms(5)
        r2, u2 = m.execute(buf[u1:])
        for v, *rest in outs:
            assert rest == [r1, u1, r2, u2, m.dbsize()], (cut, v)


# --- the broken variant is caught ---------------------------------------------------


@pytest.fixture(scope="module")
def cref_test_lib() -> str:
    """libkvsim_cref_testvariants.so: c_ref plus c_ref/tests/broken_variants.c (built by
    ``make build``; LibraryMissing, naming every path tried, fails the test)."""
    return str(cref.test_library_path())


def test_broken_variant_differs_after_an_expired_key(cref_test_lib):
    """The minimal failing case: a cluster slot holding one expired key, then a 32-key MSET
    in that slot. Batch 1 deletes the key (the slot table is freed and re-created, maybe
    at the same address); batch 2 of the broken variant still holds the old table."""
    keys = hashtag_keys(b"s", 32)
    out = {}
    for v in ("", "multikey=batch", "multikey=batch-stale-table"):
        with cref.Keyspace("cluster=1", cref_test_lib) as ks:
            ks.execute(E("SET", keys[0], "old", "PX", "1"), v)
            ks.set_time_ms(5)
            mset = E("MSET", *[x for k in keys for x in (k, b"new")])
            out[v] = ks.execute(mset + E("MGET", *keys) + E("DBSIZE"), v)[0]
    assert out[""] == out["multikey=batch"]
    assert out["multikey=batch-stale-table"] != out[""]


def test_broken_variant_is_not_in_the_product(cref_lib):
    """The product library (and so the CLI and the wheel) does not know the test variant."""
    with cref.Keyspace("cluster=1") as ks, pytest.raises(
            cref.CrefError, match=r"unknown multikey variant 'batch-stale-table' "
                  r"\(none\|batch\|chunk-15133\|batch-hash-once\|redis-15043\|window-3389\|"
                  r"redis-14899\|redis-14899-guard\)"):
        ks.execute(E("MGET", "a"), "multikey=batch-stale-table")


def test_broken_variant_is_caught_by_the_harness(cref_test_lib):
    """Hypothesis must find the broken variant from the harness's generic strategies."""
    cfg = LockstepConfig(options="cluster=1", variants=["multikey=batch-stale-table "
                                                        "batch={batch}"],
                         library=cref_test_lib)
    machine = make_lockstep_machine(cfg)
    from hypothesis.stateful import run_state_machine_as_test

    with pytest.raises(Mismatch):
        run_state_machine_as_test(machine, settings=settings(
            max_examples=400, stateful_step_count=20, deadline=None, derandomize=True,
            database=None, phases=[Phase.generate], suppress_health_check=list(HealthCheck)))


# --- c_ref departures from Valkey these tests found, kept as regressions -------------

REGRESSIONS = {
    "protocol_error_has_err_prefix": [["@raw", b"*1\r\n$x\r\n"]],
    "scan_match_star": [["SET", "", "v"], ["SCAN", "0", "MATCH", "*"]],
    "scan_deletes_expired": [["SET", "k", "v", "PX", "1"], ["@clock", 5], ["SCAN", "0"],
                             ["DBSIZE"]],
    "set_syntax_before_expire_value": [["SET", "k", "v", "EX", "abc", "FOO"]],
    "expire_options_before_integer": [["EXPIRE", "k", "abc", "FOO"]],
    "flushall_argc": [["FLUSHALL", "SYNC", "ASYNC"]],
    "unsupported_option_not_truncated": [["SET", "k", "v"], ["EXPIRE", "k", "1", "x" * 100]],
    "set_repeated_ex_last_wins": [["SET", "k", "v", "EX", "10", "EX", "20"], ["TTL", "k"]],
}


def _same_as_valkey(steps) -> None:
    ks, m = cref.Keyspace(), Model()
    for cmd in steps:
        if cmd[0] == "@clock":
            ks.set_time_ms(cmd[1])
            m.set_time_ms(cmd[1])
        elif cmd[0] == "@raw":
            assert ks.execute(cmd[1]) == m.execute(cmd[1])
        else:
            assert ks.execute(E(*cmd)) == m.execute(E(*cmd)), cmd
    ks.close()


@pytest.mark.parametrize("name", sorted(REGRESSIONS))
def test_cref_matches_valkey_on_former_deviations(cref_lib, name):
    _same_as_valkey(REGRESSIONS[name])


ASAN_RUNTIMES = ("libasan.so", "libubsan.so")


def test_lockstep_under_address_sanitizer(cref_lib):
    """Re-run part of the lockstep matrix in a subprocess against c_ref built with
    ASan+UBSan (``c_ref/build/libkvsim_cref_asan.so`` or ``$KVSIM_CREF_ASAN_LIB``), the
    sanitizer runtimes preloaded: any invalid access aborts the subprocess."""
    import os
    import subprocess
    import sys

    lib = str(artifacts.path(artifacts.CREF_ASAN_LIB))
    cc = os.environ.get("CC", "cc")
    pre = [subprocess.run([cc, f"-print-file-name={r}"], capture_output=True, text=True,
                          check=True).stdout.strip() for r in ASAN_RUNTIMES]
    env = dict(os.environ, KVSIM_CREF_LIB=lib, KVSIM_CREF_TEST_LIB=lib, LD_PRELOAD=" ".join(pre),
               KVSIM_EXAMPLES_FACTOR=os.environ.get("KVSIM_ASAN_EXAMPLES_FACTOR", "0.3"),
               ASAN_OPTIONS="detect_leaks=0:halt_on_error=1:abort_on_error=1",
               UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1")
    root = artifacts.source_root()
    here = "model/tests/test_lockstep_cref.py::"
    r = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x",
         f"{here}test_every_variant_equals_naive_and_model[{OPTIONS[1]}]",
         f"{here}test_every_variant_equals_naive_and_model[{OPTIONS[6]}]",
         f"{here}test_pipeline_split_at_every_byte_boundary",
         f"{here}test_broken_variant_differs_after_an_expired_key"],
        cwd=root, env=env, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]


def test_backends_share_one_protocol(cref_lib):
    """CrefBackend and ModelBackend are interchangeable in the harness."""
    for b in (CrefBackend("", "pipeline=lookahead batch={batch}"), ModelBackend("")):
        rep, used = b.execute(E("SET", "a", "1"), 4)
        assert rep == b"+OK\r\n" and b.dbsize() == 1
        b.check_valid()
        assert b.contents() == {b"a": (b"1", None)}
        assert b.load(b.snapshot())
        b.close()
