"""The hash type in lockstep: model == c_ref naive == c_ref under every hash variant.

A Hypothesis state machine sends pipelines of hash commands (HSET, HGET, HMGET, HGETALL,
HDEL), mixed with the string commands that meet them (GET, SET, MGET, DEL, EXISTS, SCAN
TYPE), to the model and to c_ref keyspaces on every table and layout: one run naively,
the others with the lookahead pipeline and each ``hash=`` variant at a drawn batch size.
Every reply must be the model's, byte for byte, but an HGETALL of a hash the model says
c_ref holds as a table (``Keyspace.hash_encoding``), whose pairs are compared as a set,
and SCAN (its keys as a set; in cluster mode not compared: one call covers the slots its
budget reaches).
After each step every backend's DBSIZE equals the model's and ``check_valid`` passes
(c_ref checks each hash's listpack or inner table). Hashes grow past the listpack limits:
a field pool of 1300 names, HSETs of up to 600 pairs and values up to 90 bytes.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    rule,
    run_state_machine_as_test,
)
from model_helpers import scale

from kvsim.model import cref_binding as cref
from kvsim.model.keyspace import Keyspace as Model
from kvsim.model.resp import encode_command as E
from kvsim.model.resp import parse_replies

#: The hash variants c_ref ships (c_ref/README.md, "The hash type"), run pipelined.
HASH_VARIANTS = ["nested-3940", "value-2180", "find-batch-4017", "getall-14988"]
OPTIONS = [f"table={t} layout={lay}" for t in ("hashtable", "dict")
           for lay in ("unified", "legacy")] + ["table=hashtable cluster=1"]
KEYS = [b"h0", b"h1", b"{h}2", b"s"]

fields = st.one_of(st.integers(0, 12), st.integers(0, 1300)).map(lambda i: b"f:%d" % i)
values = st.one_of(st.binary(max_size=8), st.binary(min_size=60, max_size=90))
keys = st.sampled_from(KEYS)


@st.composite
def hash_command(draw) -> list[bytes]:
    kind = draw(st.sampled_from(["hset", "hset", "hbig", "hget", "hmget", "hgetall", "hdel",
                                 "get", "set", "mget", "del", "exists", "scan"]))
    k = draw(keys)
    if kind == "hset":
        pairs = draw(st.lists(st.tuples(fields, values), min_size=1, max_size=4))
        return [b"HSET", k, *[x for p in pairs for x in p]]
    if kind == "hbig":  # past hash-max-listpack-entries in one command, or grown past it
        n = draw(st.sampled_from([3, 200, 513, 600]))
        base = draw(st.integers(0, 700))
        return [b"HSET", k, *[x for i in range(n) for x in (b"f:%d" % (base + i), b"v")]]
    if kind == "hget":
        return [b"HGET", k, draw(fields)]
    if kind == "hmget":
        return [b"HMGET", k, *draw(st.lists(fields, min_size=1, max_size=40))]
    if kind == "hgetall":
        return [b"HGETALL", k]
    if kind == "hdel":
        return [b"HDEL", k, *draw(st.lists(fields, min_size=1, max_size=5))]
    if kind == "get":
        return [b"GET", k]
    if kind == "set":
        return [b"SET", k, draw(st.binary(max_size=8))]
    if kind == "mget":
        return [b"MGET", *draw(st.lists(keys, min_size=1, max_size=4))]
    if kind == "del":
        return [b"DEL", k]
    if kind == "exists":
        return [b"EXISTS", k]
    return [b"SCAN", b"0", b"TYPE", draw(st.sampled_from([b"hash", b"string"])), b"COUNT",
            b"100"]


def _pairs(reply: object) -> object:
    """An HGETALL reply as a set of (field, value) pairs (a table's order is its own)."""
    if not isinstance(reply, list):
        return reply
    return sorted(zip(reply[::2], reply[1::2], strict=True))


def _scan_keys(reply: object) -> object:
    return sorted(reply[1]) if isinstance(reply, list) else reply


def make_machine(options: str) -> type[RuleBasedStateMachine]:
    class HashLockstep(RuleBasedStateMachine):
        @initialize(batch=st.integers(1, 32))
        def start(self, batch: int) -> None:
            self.model = Model(cluster="cluster=1" in options)
            self.backends = [(cref.Keyspace(options), "")]
            self.backends += [(cref.Keyspace(options),
                               f"pipeline=lookahead hash={v} batch={batch}")
                              for v in HASH_VARIANTS]

        def teardown(self) -> None:
            for ks, _ in getattr(self, "backends", []):
                ks.close()

        @rule(cmds=st.lists(hash_command(), min_size=1, max_size=8))
        def pipeline(self, cmds: list[list[bytes]]) -> None:
            query = b"".join(E(*c) for c in cmds)
            want, unordered = [], []
            for c in cmds:  # one at a time: HGETALL's order depends on the encoding then
                unordered.append(c[0] == b"HGETALL"
                                 and self.model.hash_encoding(c[1]) == "hashtable")
                want.append(parse_replies(self.model.execute(E(*c))[0])[0])
            for ks, variant in self.backends:
                out, used = ks.execute(query, variant)
                assert used == len(query)
                got = parse_replies(out)
                assert len(got) == len(cmds), variant
                for c, g, w, u in zip(cmds, got, want, unordered, strict=True):
                    if u:
                        g, w = _pairs(g), _pairs(w)
                    elif c[0] == b"SCAN" and "cluster=1" in options:
                        continue  # one call covers slots up to its budget (SCAN's cursor)
                    elif c[0] == b"SCAN":
                        g, w = _scan_keys(g), _scan_keys(w)
                    assert g == w, (variant, c[:3])

        @invariant()
        def same_state(self) -> None:
            if not hasattr(self, "model"):
                return
            self.model.check_valid()
            for ks, variant in self.backends:
                assert ks.dbsize() == self.model.dbsize(), variant
                ks.check_valid()

    return HashLockstep


@pytest.mark.parametrize("options", OPTIONS)
def test_hash_commands_in_lockstep(cref_lib, options):
    run_state_machine_as_test(make_machine(options), settings=settings(
        max_examples=scale(25), stateful_step_count=12, deadline=None, derandomize=True,
        database=None, suppress_health_check=list(HealthCheck)))


def test_hash_encoding_follows_c_ref_rule():
    """The model's encoding bookkeeping is c_ref's conversion rule (t_hash.c)."""
    m = Model()
    m.execute(E("HSET", "a", *[x for i in range(512) for x in (f"f{i}", "v")]))
    assert m.hash_encoding(b"a") == "listpack"
    m.execute(E("HSET", "a", "one-more", "v"))
    assert m.hash_encoding(b"a") == "hashtable"
    m.execute(E("HSET", "b", "f", "x" * 64))
    assert m.hash_encoding(b"b") == "listpack"
    m.execute(E("HSET", "b", "g", "x" * 65))
    assert m.hash_encoding(b"b") == "hashtable"
    m.execute(E("HDEL", "b", "f", "g"))  # deleted with its last field, then made anew
    m.execute(E("HSET", "b", "f", "v"))
    assert m.hash_encoding(b"b") == "listpack" and m.hash_encoding(b"nope") is None
