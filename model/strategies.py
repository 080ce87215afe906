"""Hypothesis strategies that reach the hard cases of batched paths on purpose.

Keys come from a fixed pool (so commands keep hitting the same keys) that mixes: short
keys, the empty key, binary keys (CR, LF, NUL, 0xff, braces), long keys (> 64 bytes, so the
object is not embedded), keys of one hashtag (one cluster slot), and keys that collide in
one bucket of every table of up to 8 buckets and carry the same tag byte (so lookups chain
through child buckets and compare keys), computed with c_ref's SipHash under ``seed``.

Public API, like :mod:`kvsim.model.harness`: Hypothesis is a run-time dependency of kvsim.
"""

from __future__ import annotations

from hypothesis import strategies as st

from kvsim.model.hashing import colliding_keys
from kvsim.model.resp import encode_command

__all__ = [
    "key_pool",
    "keys_from",
    "values",
    "command",
    "pipeline",
    "glob_patterns",
    "malformed",
    "hashtag_keys",
]


def hashtag_keys(tag: bytes, n: int) -> list[bytes]:
    """``n`` keys in the cluster slot of ``{tag}``."""
    return [b"{" + tag + b"}" + str(i).encode() for i in range(n)]


def key_pool(seed: int = 0) -> list[bytes]:
    """The fixed key universe of the lockstep tests (about 90 keys)."""
    pool = [b"k%d" % i for i in range(12)]
    pool += [b"", b"\r\n", b"\x00", b"a\x00b", b"\xff\xfe", b"{", b"}{", b"{}x", b" sp ace"]
    pool += [b"L" * 65, b"long:" + b"x" * 200, b"{t}" + b"y" * 120]
    pool += hashtag_keys(b"t", 24)
    pool += list(colliding_keys(b"c", 12, 3, True, seed))
    pool += list(colliding_keys(b"d", 10, 2, False, seed))
    return pool


def keys_from(pool: list[bytes]) -> st.SearchStrategy[bytes]:
    return st.sampled_from(pool)


values = st.one_of(
    st.sampled_from([b"v", b"", b"1", b"\r\n\x00", b"0" * 44, b"1" * 45]),
    st.binary(max_size=8),
    st.builds(lambda n, c: bytes([c]) * n, st.integers(40, 300), st.integers(0, 255)),
)


def _set(k: bytes, v: bytes, cond: list[bytes], exp: list[bytes]) -> list[bytes]:
    return [b"SET", k, v, *cond, *exp]


_ttl_ms = st.one_of(st.integers(1, 3000), st.sampled_from([0, -5, 10**15, 2**62]))


def command(pool: list[bytes]) -> st.SearchStrategy[list[bytes]]:
    """One command (argument vector) over the key pool, valid or deliberately not."""
    k = keys_from(pool)
    ks = st.lists(k, min_size=1, max_size=40)
    cond = st.sampled_from([[], [], [b"NX"], [b"XX"], [b"nx", b"XX"]])
    exp = st.one_of(
        st.just([]),
        st.tuples(st.sampled_from([b"EX", b"PX", b"px"]), _ttl_ms).map(
            lambda t: [t[0], str(t[1]).encode()]
        ),
        st.sampled_from([[b"EX", b"abc"], [b"EX"], [b"KEEPTTL"]]),
    )
    pairs = st.lists(st.tuples(k, values), min_size=1, max_size=40)
    flat = pairs.map(lambda ps: [x for p in ps for x in p])
    return st.one_of(
        st.builds(lambda a: [b"GET", a], k),
        st.builds(_set, k, values, cond, exp),
        ks.map(lambda a: [b"DEL", *a]),
        ks.map(lambda a: [b"UNLINK", *a]),
        ks.map(lambda a: [b"EXISTS", *a]),
        ks.map(lambda a: [b"TOUCH", *a]),
        ks.map(lambda a: [b"MGET", *a]),
        flat.map(lambda a: [b"MSET", *a]),
        flat.map(lambda a: [b"MSETNX", *a]),
        st.builds(
            lambda c, a, t, f: [c, a, str(t).encode(), *f],
            st.sampled_from([b"EXPIRE", b"PEXPIRE"]),
            k,
            st.integers(-2, 3000),
            st.sampled_from([[], [], [b"NX"], [b"XX"], [b"GT"], [b"LT"]]),
        ),
        st.builds(lambda a: [b"TTL", a], k),
        st.just([b"DBSIZE"]),
        st.sampled_from(
            [
                [b"GET"],
                [b"GET", b"a", b"b"],
                [b"MSET", b"a"],
                [b"MSET", b"a", b"1", b"b"],
                [b"NOSUCH", b"x", b"y"],
                [b"ttl"],
                [b"DBSIZE", b"x"],
                [b"TOUCH"],
            ]
        ),
    )


def pipeline(pool: list[bytes], max_size: int = 6) -> st.SearchStrategy[list[list[bytes]]]:
    return st.lists(command(pool), min_size=1, max_size=max_size)


def encode(cmds: list[list[bytes]]) -> bytes:
    return b"".join(encode_command(*c) for c in cmds)


#: Malformed or inline input: each either ends in a protocol error (the connection
#: closes, everything is consumed) or is an inline command.
malformed = st.sampled_from([
    b"*x\r\n", b"*3000000000\r\n", b"*1\r\n$x\r\n", b"*1\r\n$-5\r\n", b"*2\r\nGET\r\n",
    b"*1\r\n$3\r\nGET\r\nXY", b"*-1\r\n", b"*0\r\n", b"GET k0\r\n", b"SET k1 'a b'\r\n",
    b'SET k2 "x\\x41y"\n', b'GET "unbalanced\r\n', b"\r\n", b"*1\r\n$600000000\r\n",
    b"*+1\r\n", b"*01\r\n", b"*1\r\n$03\r\nGET\r\n",
])

glob_patterns = st.one_of(
    st.sampled_from([b"*", b"k*", b"k?", b"{t}*", b"*[0-3]", b"[^k]*", b"c*", b"\\{*", b""]),
    st.text(alphabet="k{}t*?[]^-\\0123ac", max_size=6).map(str.encode),
)
