"""The sorted set in lockstep: model == c_ref naive == c_ref under every hash variant.

A Hypothesis state machine sends pipelines of sorted-set commands (ZADD with and without
its flags NX XX GT LT CH INCR, compatible or not; ZSCORE, ZMSCORE of up to 40 members,
ZREM), mixed with the commands that meet them (GET, SET, MGET, DEL, EXISTS, TOUCH, HSET,
HGET, SCAN TYPE), to the model and to c_ref keyspaces on every table and layout: one run naively,
the others with the lookahead pipeline and each ``hash=`` variant at a drawn batch size
(``nested-3940`` prefetches ZSCORE's, ZMSCORE's, ZADD's and ZREM's member in the set's
member table; ``find-batch-4017`` looks ZMSCORE's members up together; the others leave
sorted sets alone and must too). Every reply must be the model's, byte
for byte, but SCAN (its keys as a set; in cluster mode not compared). After each step
every backend's DBSIZE equals the model's and ``check_valid`` passes (c_ref checks each
set's listpack order, or its skiplist and member table). Sets grow past the listpack's
limits: a member pool of 400 names, ZADDs of up to 200 pairs and members up to 70 bytes.
"""

from __future__ import annotations

import math
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    rule,
    run_state_machine_as_test,
)
from model_helpers import scale

from kvsim.model import cref
from kvsim.model.keyspace import Keyspace as Model
from kvsim.model.keyspace import format_score, parse_score
from kvsim.model.resp import encode_command as E
from kvsim.model.resp import parse_replies

#: The hash variants c_ref ships (c_ref/README.md, "The hash type"), run pipelined.
HASH_VARIANTS = ["nested-3940", "value-2180", "find-batch-4017", "getall-14988"]
OPTIONS = [f"table={t} layout={lay}" for t in ("hashtable", "dict")
           for lay in ("unified", "legacy")] + ["table=hashtable cluster=1"]
KEYS = [b"z0", b"z1", b"{z}2", b"s"]

members = st.one_of(st.integers(0, 12), st.integers(0, 400)).map(lambda i: b"m:%d" % i)
long_members = st.integers(0, 3).map(lambda i: b"L%d" % i + b"x" * 66)
scores = st.one_of(st.integers(-50, 50).map(lambda i: str(i / 4).encode()),
                   st.sampled_from([b"0.1", b"-0", b"1e300", b"-inf", b"+inf", b"3", b".5",
                                    b"x", b"nan", b" 1", b"1e400", b"", b"inf", b"-1e308"]))
keys = st.sampled_from(KEYS)
ZADD_FLAGS = [b"NX", b"XX", b"GT", b"LT", b"CH", b"INCR", b"incr", b"gt", b"ch"]


@st.composite
def zset_command(draw) -> list[bytes]:
    kind = draw(st.sampled_from(["zadd", "zadd", "zflags", "zflags", "zbig", "zscore",
                                 "zscore", "zmscore", "zrem", "get", "set", "mget", "del",
                                 "exists", "touch", "hset", "hget", "scan"]))
    k = draw(keys)
    if kind == "zadd":
        pairs = draw(st.lists(st.tuples(scores, st.one_of(members, long_members)), min_size=1,
                              max_size=4))
        return [b"ZADD", k, *[x for p in pairs for x in p]]
    if kind == "zflags":  # ZADD's flags in any order and case, compatible or not
        flags = draw(st.lists(st.sampled_from(ZADD_FLAGS), max_size=3))
        pairs = draw(st.lists(st.tuples(scores, members), min_size=b"INCR" in flags,
                              max_size=1 if b"INCR" in flags and draw(st.booleans()) else 3))
        return [b"ZADD", k, *flags, *[x for p in pairs for x in p]]
    if kind == "zmscore":  # past 16 members: #4017's second batch
        return [b"ZMSCORE", k, *draw(st.lists(st.one_of(members, long_members), min_size=1,
                                              max_size=40))]
    if kind == "touch":
        return [b"TOUCH", *draw(st.lists(keys, min_size=1, max_size=5))]
    if kind == "zbig":  # past zset-max-listpack-entries in one command, or grown past it
        n = draw(st.sampled_from([3, 60, 129, 200]))
        base = draw(st.integers(0, 300))
        return [b"ZADD", k, *[x for i in range(n) for x in (b"%d" % (i % 7), b"m:%d" % (base + i))]]
    if kind == "zscore":
        return [b"ZSCORE", k, draw(st.one_of(members, long_members))]
    if kind == "zrem":
        return [b"ZREM", k, *draw(st.lists(members, min_size=1, max_size=5))]
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
    if kind == "hset":
        return [b"HSET", k, b"f", draw(st.binary(max_size=8))]
    if kind == "hget":
        return [b"HGET", k, b"f"]
    return [b"SCAN", b"0", b"TYPE", draw(st.sampled_from([b"zset", b"hash", b"string"])),
            b"COUNT", b"100"]


def _scan_keys(reply: object) -> object:
    return sorted(reply[1]) if isinstance(reply, list) else reply


def make_machine(options: str) -> type[RuleBasedStateMachine]:
    class ZsetLockstep(RuleBasedStateMachine):
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

        @rule(cmds=st.lists(zset_command(), min_size=1, max_size=8))
        def pipeline(self, cmds: list[list[bytes]]) -> None:
            query = b"".join(E(*c) for c in cmds)
            want = [parse_replies(self.model.execute(E(*c))[0])[0] for c in cmds]
            for ks, variant in self.backends:
                out, used = ks.execute(query, variant)
                assert used == len(query)
                got = parse_replies(out)
                assert len(got) == len(cmds), variant
                for c, g, w in zip(cmds, got, want, strict=True):
                    if c[0] == b"SCAN" and "cluster=1" in options:
                        continue  # one call covers slots up to its budget (SCAN's cursor)
                    if c[0] == b"SCAN":
                        g, w = _scan_keys(g), _scan_keys(w)
                    assert g == w, (variant, c[:4])

        @invariant()
        def same_state(self) -> None:
            if not hasattr(self, "model"):
                return
            self.model.check_valid()
            for ks, variant in self.backends:
                assert ks.dbsize() == self.model.dbsize(), variant
                ks.check_valid()

    return ZsetLockstep


@pytest.mark.parametrize("options", OPTIONS)
def test_zset_commands_in_lockstep(cref_lib, options):
    run_state_machine_as_test(make_machine(options), settings=settings(
        max_examples=scale(20), stateful_step_count=12, deadline=None, derandomize=True,
        database=None, suppress_health_check=list(HealthCheck)))


def test_score_text_round_trips():
    """The model's score text (Valkey's d2string) reads back as the same double."""
    for d in (0.1, 1 / 3, 1e300, -2.5, 3.0, float("inf"), -0.0, 123456789.123456789):
        assert parse_score(format_score(d)) == d
    assert format_score(0.1) == b"0.1" and format_score(3.0) == b"3"
    assert format_score(float("-inf")) == b"-inf" and format_score(1e300) == b"1e+300"
    for bad in (b"nan", b" 1", b"1 ", b"", b"1e400", b"1e-400", b"abc"):
        assert parse_score(bad) is None


_any_double = st.one_of(
    st.floats(allow_nan=False),
    st.integers(0, 2**64 - 1).map(lambda b: struct.unpack("<d", struct.pack("<Q", b))[0]),
    st.integers(-10**7, 10**7).flatmap(lambda n: st.sampled_from([n / 4, n / 3, n / 1000, n])),
).filter(lambda d: not math.isnan(d))


@settings(derandomize=True, max_examples=scale(400), deadline=None, database=None,
          suppress_health_check=list(HealthCheck))
@given(scores=st.lists(_any_double, min_size=1, max_size=20))
def test_score_text_is_crefs_d2string(cref_lib, scores):
    """c_ref's ZSCORE text (ksD2String: integer path, Grisu2, specials) equals the model's
    d2string for any double, in a listpack and in a skiplist (the member texts differ in
    the two, the score's formatting does not)."""
    model, ks = Model(), cref.Keyspace("")
    try:
        members = [(repr(d).encode(), b"m%d" % i) for i, d in enumerate(scores)]
        big = [x for i in range(130) for x in (b"1", b"pad:%d" % i)]
        for key, extra in ((b"small", []), (b"big", big)):
            cmds = [[b"ZADD", key, *[x for sm in members for x in sm], *extra],
                    [b"ZMSCORE", key, *[m for _, m in members]]]
            for c in cmds:
                want = model.execute(E(*c))[0]
                assert ks.execute(E(*c), "")[0] == want, (key, c[:4])
    finally:
        ks.close()


@pytest.mark.parametrize("options", ["table=hashtable", "table=dict"])
def test_equal_scores_keep_the_first_text(cref_lib, options):
    """ZADD of a score equal to the member's (0 after -0) changes nothing (zsetAdd's
    ``score != curscore``): ZSCORE still answers "-0", in a listpack and in a skiplist."""
    model, ks = Model(), cref.Keyspace(options)
    try:
        big = [x for i in range(130) for x in (b"1", b"m:%d" % i)]
        for key, extra in ((b"small", []), (b"big", big)):
            cmds = [[b"ZADD", key, b"-0", b"m", *extra], [b"ZADD", key, b"0", b"m"],
                    [b"ZSCORE", key, b"m"]]
            for c in cmds:
                want = model.execute(E(*c))[0]
                assert ks.execute(E(*c), "")[0] == want, c[:3]
            assert want == b"$2\r\n-0\r\n"
    finally:
        ks.close()
