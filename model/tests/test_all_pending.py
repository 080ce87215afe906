"""Redis's cross-command batch over every pending command (``pipeline=all-pending-14754``):
the model's rule (``model.batching.redis_all_pending``) on its own, and against the BATCH
and COMMAND markers of real c_ref traces of every workload that runs query buffers."""

import io
import subprocess

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvsim import traces
from kvsim.model import cref
from kvsim.model.batching import REDIS_LOOKAHEAD, get_keys_from_command, redis_all_pending
from kvsim.model.resp import encode_command as E
from kvsim.model.resp import split_commands

_KEYS = st.sampled_from([b"a", b"b", b"c", b"k1", b"k2", b"{t}x", b"{t}y"])
_CMD = st.one_of(
    st.builds(lambda k: [b"GET", k], _KEYS),
    st.lists(_KEYS, min_size=1, max_size=40).map(lambda ks: [b"MGET", *ks]),
    st.lists(_KEYS, min_size=1, max_size=40).map(lambda ks: [b"DEL", *ks]),
    st.lists(_KEYS, min_size=1, max_size=40).map(lambda ks: [b"EXISTS", *ks]),
    st.lists(_KEYS, min_size=1, max_size=40).map(lambda ks: [b"TOUCH", *ks]),
    st.lists(_KEYS, min_size=1, max_size=20).map(
        lambda ks: [b"MSET", *[x for k in ks for x in (k, b"v")]]),
    st.just([b"DBSIZE"]),
    st.just([b"GET"]),  # wrong arity: a read error, the walk stops there
    st.just([b"NOSUCH", b"a"]),
)


@settings(max_examples=80)
@given(st.lists(_CMD, min_size=0, max_size=40), st.integers(1, 128))
def test_rounds_and_their_batch(cmds, batch):
    buf = b"".join(E(*c) for c in cmds)
    rounds, perr, used = redis_all_pending(buf, batch)
    assert perr is None and used == len(buf)
    flat = [c.argv for r in rounds for c in r.commands]
    assert flat == [i.argv for i in split_commands(buf)[0]]  # each command once, in order
    for i, r in enumerate(rounds):
        assert 1 <= len(r.commands) <= REDIS_LOOKAHEAD
        if i + 1 < len(rounds):
            assert len(r.commands) == REDIS_LOOKAHEAD  # only the last round is short
        if len(r.commands) == 1:
            assert r.prefetch_keys == []  # ready_len > 1 only
            continue
        walked = []
        for c in r.commands:
            name = c.argv[0].lower()
            if name == b"nosuch" or (name == b"get" and len(c.argv) != 2):
                break
            walked += get_keys_from_command(c.argv)
        want = walked[:2 * batch]
        assert r.prefetch_keys == (want if len(want) > 1 else [])


def test_ten_mgets_of_100_keys_get_the_first_32_keys():
    """#14899's benchmark shape: of a 10-deep pipeline of 100-key MGETs, Redis's batch
    holds the first 32 keys of the first MGET (2 x prefetch-batch-max-size 16)."""
    mgets = [E(b"MGET", *[b"k%d:%d" % (c, j) for j in range(100)]) for c in range(10)]
    (r,), perr, _ = redis_all_pending(b"".join(mgets), 16)
    assert perr is None and len(r.commands) == 10
    assert r.prefetch_keys == [b"k0:%d" % j for j in range(32)]


def _trace_markers(args: list[str]) -> list[str]:
    r = subprocess.run([str(cref.binary_path()), "trace", *args, "-o", "-"],
                       capture_output=True, check=True)
    got = []
    with traces.open(io.BytesIO(r.stdout)) as tr:
        for chunk in tr:
            for rec in chunk[chunk["kind"] == traces.KIND_MARKER]:
                if rec["flags"] == traces.MARK_BATCH:
                    got.append(f"B{int(rec['addr'])}")
                elif rec["flags"] == traces.MARK_COMMAND:
                    got.append("C")
    return got


def _model_markers(cmds_per_buffer: list[list[bytes]], batch: int) -> list[str]:
    out = []
    for buf in cmds_per_buffer:
        rounds, perr, used = redis_all_pending(b"".join(buf), batch)
        assert perr is None
        for r in rounds:
            if r.prefetch_keys:
                out.append(f"B{len(r.prefetch_keys)}")
            out += ["C"] * len(r.commands)
    return out


@pytest.mark.parametrize("workload,batch,depth,kpc", [
    ("mget", 16, 10, 100), ("mget", 16, 10, 3), ("mget", 4, 20, 2), ("mget", 16, 1, 50),
    ("exists", 8, 5, 6), ("del", 16, 17, 4), ("touch", 16, 10, 3), ("mset", 16, 10, 10),
    ("mset", 2, 4, 1)])
def test_multikey_pipelines_batch_like_the_model(cref_lib, workload, batch, depth, kpc):
    """``kvsim-cref trace WORKLOAD --pipeline all-pending-14754``: the markers the model
    predicts (only each command's key count matters to the rule)."""
    ops = 45
    extra = ["--mset-keys", "random"] if workload == "mset" else []
    got = _trace_markers([workload, "--keys", "500", "--ops", str(ops), "--keys-per-command",
                          str(kpc), "--pipeline-depth", str(depth), "--pipeline",
                          "all-pending-14754", "--batch", str(batch), "--variant", "none",
                          *extra])
    name = workload.upper().encode()
    bufs = []
    for start in range(0, ops, depth):
        n = min(depth, ops - start)
        if workload == "mset":
            cmd = E(name, *[x for j in range(kpc) for x in (b"k%d" % j, b"v")])
        else:
            cmd = E(name, *[b"k%d" % j for j in range(kpc)])
        bufs.append([cmd] * n)
    assert got.count("C") == ops
    assert got == _model_markers(bufs, batch)


@pytest.mark.parametrize("batch,depth", [(1, 5), (4, 16), (16, 40), (128, 200)])
def test_get_set_pipeline_batches_like_the_model(cref_lib, batch, depth):
    ops = 300
    got = _trace_markers(["pipeline", "--keys", "100", "--ops", str(ops), "--depth",
                          str(depth), "--batch", str(batch), "--variant", "all-pending-14754",
                          "--set-ratio", "0.3"])
    bufs = [[E(b"GET", b"k")] * min(depth, ops - s) for s in range(0, ops, depth)]
    assert got.count("C") == ops
    assert got == _model_markers(bufs, batch)
