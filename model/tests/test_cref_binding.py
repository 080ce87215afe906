"""The ctypes binding, and the model against c_ref naive on fixed inputs."""

import pytest

from kvsim.model import cref_binding as cref
from kvsim.model.keyspace import Keyspace as Model
from kvsim.model.resp import encode_command as E
from kvsim.model.snapshot import (
    SnapshotError,
    crc64,
    load_snapshot,
    parse_snapshot,
    save_snapshot,
    snapshot_contents,
)


def test_library_locations(cref_lib):
    assert cref.library_path().is_file()
    assert str(cref.library_path()) == cref_lib


def test_bad_options_raise(cref_lib):
    with pytest.raises(cref.CrefError, match="nosuch"):
        cref.Keyspace("nosuch=1")


def test_execute_consumed_and_partial(cref_lib):
    with cref.Keyspace() as ks:
        q = E("SET", "a", "1") + E("GET", "a")
        rep, used = ks.execute(q + b"*2\r\n$3\r\nGET\r\n$1")
        assert (rep, used) == (b"+OK\r\n$1\r\n1\r\n", len(q))
        rep, used = ks.execute(b"*1\r\n$x\r\n")
        assert rep == b"-ERR Protocol error: invalid bulk length\r\n" and used == 8
        assert ks.dbsize() == 1 and ks.memory_bytes() > 0
        ks.check_valid()


FIXED = [
    ["SET", "a", "1"], ["SET", "", "empty"], ["SET", "b\r\n\x00", "bin"], ["GET", "a"],
    ["MSET", "x", "1", "y", "2", "x", "3"], ["MGET", "x", "y", "nope", "x"],
    ["MSETNX", "x", "9", "z", "9"], ["MSETNX", "p", "1", "q", "2"], ["DEL", "p", "p", "zz"],
    ["EXISTS", "q", "q", "zz"], ["SET", "t", "v", "PX", "100"], ["TTL", "t"], ["PTTL", "t"],
    ["EXPIRE", "a", "100", "NX"], ["EXPIRE", "a", "50", "GT"], ["EXPIRE", "a", "50", "LT"],
    ["TTL", "a"], ["PEXPIRE", "q", "0"], ["SET", "k", "v", "XX"], ["SET", "x", "v", "NX"],
    ["SET", "x", "v", "GET"], ["SET", "x", "w", "KEEPTTL"], ["SET", "x", "v", "EX", "0"],
    ["SET", "x", "v", "EX", "9999999999999999999"], ["SET", "x", "v", "BAD"],
    ["EXPIRE", "x", "1", "NX", "XX"], ["EXPIRE", "x", "1", "GT", "LT"], ["GET"],
    ["MSET", "a"], ["nosuch", "a" * 200, "b"], ["KEYS", "nomatch*"], ["DBSIZE"],
    ["SCAN", "abc"], ["SCAN", "0", "COUNT", "0"], ["SCAN", "0", "FOO"], ["TTL", "nope"],
    ["FLUSHALL", "BAD"], ["DBSIZE"],
]


@pytest.mark.parametrize("options", ["", "cluster=1", "layout=legacy", "table=dict"])
def test_model_matches_cref_on_fixed_commands(cref_lib, options):
    ks = cref.Keyspace(options)
    m = Model(cluster="cluster=1" in options)
    for cmd in FIXED:
        q = E(*cmd)
        assert ks.execute(q) == m.execute(q), cmd
    ks.set_time_ms(200)
    m.set_time_ms(200)
    for cmd in (["DBSIZE"], ["GET", "t"], ["DBSIZE"], ["TTL", "a"]):
        assert ks.execute(E(*cmd)) == m.execute(E(*cmd)), cmd
    ks.check_valid()
    ks.close()


def test_snapshot_format_roundtrip(cref_lib):
    with cref.Keyspace() as ks:
        ks.execute(E("MSET", "a", "1", "", "2", "long", "x" * 300) + E("SET", "e", "v", "PX", "5"))
        snap = ks.save_snapshot()
        content = snapshot_contents(snap)
        assert content == {b"a": (b"1", None), b"": (b"2", None),
                           b"long": (b"x" * 300, None), b"e": (b"v", 5)}
        hint, _ = parse_snapshot(snap)
        assert hint == 4
        # the model's writer produces a snapshot c_ref loads, and vice versa
        ours = save_snapshot(sorted((k, v, e) for k, (v, e) in content.items()))
        with cref.Keyspace() as ks2:
            ks2.set_time_ms(10)  # "e" expired: dropped at load
            ks2.load_snapshot(ours)
            assert ks2.dbsize() == 3
        m = Model()
        m.set_time_ms(10)
        load_snapshot(m, snap)
        assert m.dbsize() == 3
        with pytest.raises(cref.CrefError):
            ks.load_snapshot(snap[:-1])
        assert ks.dbsize() == 4  # unchanged after a failed load


def test_snapshot_checksum_is_valkey_crc64(cref_lib):
    """The stored checksum is CRC-64/Jones (Valkey ``crc64.c``): the standard check value,
    and c_ref's stored sum equals the model's over the same bytes; corrupting a byte is
    caught, and a stored 0 (``rdbchecksum no``) is not checked."""
    assert crc64(b"123456789") == 0xE9C6D914C4B8D9CA
    with cref.Keyspace() as ks:
        ks.execute(E("MSET", "a", "1", "b", "y" * 200))
        snap = ks.save_snapshot()
        assert int.from_bytes(snap[-8:], "little") == crc64(snap[:-8])
        bad = bytearray(snap)
        bad[-10] ^= 1
        with pytest.raises(SnapshotError):
            parse_snapshot(bytes(bad))
        bad[-8:] = bytes(8)
        assert parse_snapshot(bytes(bad))[0] == 2


def test_binary_path_next_to_the_library(cref_lib):
    """The CLI is built with the library (c_ref/build/ or model/_native/)."""
    p = cref.binary_path()
    assert p.is_file() and p.parent == cref.library_path().parent


def _model_markers(depth: int, ops: int, batch: int) -> list[str]:
    """BATCH/COMMAND markers the model predicts for the CLI pipeline workload: each
    group of ``depth`` one-key commands is one query buffer."""
    from kvsim.model.batching import pipeline_lookahead

    out = []
    for start in range(0, ops, depth):
        n = min(depth, ops - start)
        buf = b"".join(E(b"GET", b"k%d" % (start + i)) for i in range(n))
        batches, perr, used = pipeline_lookahead(buf, batch)
        assert perr is None and used == len(buf)
        for b in batches:
            if b.prefetch_keys:
                out.append(f"B{len(b.prefetch_keys)}")
            out += ["C"] * len(b.commands)
    return out


@pytest.mark.parametrize("batch,depth", [(1, 5), (2, 7), (3, 7), (4, 16), (16, 10),
                                         (16, 40), (128, 200)])
def test_lookahead_batches_match_a_cref_trace(cref_lib, batch, depth):
    """model.batching.pipeline_lookahead splits like c_ref: BATCH markers (addr = keys
    prefetched) and COMMAND markers of a real ``kvsim-cref trace pipeline`` run.
    The CLI workload sends only GET/SET (one key each); mixed GET/MGET/MSET batches are
    checked against c_ref's own marker test (c_ref/tests/test_emit.c) in
    test_prefetch.py::test_pipeline_lookahead_keys_rule."""
    import subprocess

    from kvsim import traces

    ops = 300
    r = subprocess.run(
        [str(cref.binary_path()), "trace", "pipeline", "-o", "-", "--keys", "100",
         "--ops", str(ops), "--depth", str(depth), "--batch", str(batch),
         "--variant", "lookahead", "--set-ratio", "0.3"],
        capture_output=True, check=True)
    import io

    got = []
    with traces.open(io.BytesIO(r.stdout)) as tr:
        for chunk in tr:
            for rec in chunk[chunk["kind"] == traces.KIND_MARKER]:
                if rec["flags"] == traces.MARK_BATCH:
                    got.append(f"B{int(rec['addr'])}")
                elif rec["flags"] == traces.MARK_COMMAND:
                    got.append("C")
    assert got.count("C") == ops
    assert got == _model_markers(depth, ops, batch)


def _model_multikey_markers(workload: str, depth: int, ops: int, batch: int,
                            kpc: int) -> list[str]:
    """BATCH/COMMAND markers the model predicts for ``kvsim-cref trace mget|mset
    --pipeline-depth depth --pipeline lookahead --variant none``: each group of ``depth``
    MGETs (MSETs) of ``kpc`` keys (pairs) is one query buffer. Key names do not matter to
    the batch rule, only each command's key count."""
    from kvsim.model.batching import pipeline_lookahead

    out = []
    for start in range(0, ops, depth):
        n = min(depth, ops - start)
        if workload == "mget":
            cmds = [E(b"MGET", *[b"k%d" % j for j in range(kpc)]) for _ in range(n)]
        else:
            cmds = [E(b"MSET", *[x for j in range(kpc) for x in (b"k%d" % j, b"v")])
                    for _ in range(n)]
        batches, perr, used = pipeline_lookahead(b"".join(cmds), batch)
        assert perr is None and used == sum(map(len, cmds))
        for b in batches:
            if b.prefetch_keys:
                out.append(f"B{len(b.prefetch_keys)}")
            out += ["C"] * len(b.commands)
    return out


@pytest.mark.parametrize("workload,batch,depth,kpc", [
    ("mget", 16, 10, 6), ("mget", 16, 10, 100), ("mget", 4, 3, 3), ("mget", 128, 7, 20),
    ("mset", 16, 10, 10), ("mset", 8, 5, 3), ("mset", 2, 4, 1)])
def test_multikey_pipelines_batch_like_the_model(cref_lib, workload, batch, depth, kpc):
    """c_ref's pipelined MGET/MSET (``--pipeline-depth``, ``--pipeline lookahead``) split
    their query buffers into the lookahead batches model.batching.pipeline_lookahead
    predicts (Valkey #2092's key-counted batches spanning the pipelined commands)."""
    import io
    import subprocess

    from kvsim import traces

    ops = 45
    extra = ["--mset-keys", "random"] if workload == "mset" else []
    r = subprocess.run(
        [str(cref.binary_path()), "trace", workload, "-o", "-", "--keys", "500",
         "--ops", str(ops), "--keys-per-command", str(kpc), "--pipeline-depth", str(depth),
         "--pipeline", "lookahead", "--batch", str(batch), "--variant", "none", *extra],
        capture_output=True, check=True)
    got = []
    with traces.open(io.BytesIO(r.stdout)) as tr:
        for chunk in tr:
            for rec in chunk[chunk["kind"] == traces.KIND_MARKER]:
                if rec["flags"] == traces.MARK_BATCH:
                    got.append(f"B{int(rec['addr'])}")
                elif rec["flags"] == traces.MARK_COMMAND:
                    got.append("C")
    assert got.count("C") == ops
    assert got == _model_multikey_markers(workload, depth, ops, batch, kpc)
