"""Fixed lockstep cases for the batching rules c_ref/FIDELITY.md describes: a 50-key MGET
against a 16-key batch (alone, and after a GET that takes the batch's first key), MSET over
existing keys with RAW values (the dict batch prefetches their values), MSETNX that
succeeds and one that fails after its check pass, commands that overflow a lookahead
batch, an MSET over a partly existing range and a 40-key MSETNX; under Valkey's rule,
Redis #15133's chunking (chunk-15133), Redis PR #15043's batch rule (redis-15043) and the
hash-once study variants. Every variant must reply, and leave the keyspace, exactly
as naive c_ref and the model do, on both tables."""

import pytest

from kvsim.model import cref_binding as cref
from kvsim.model import snapshot
from kvsim.model.keyspace import Keyspace as Model
from kvsim.model.resp import encode_command as E

VARIANTS = ["multikey=batch", "pipeline=lookahead batch=16",
            "pipeline=lookahead multikey=batch batch=16", "pipeline=lookahead batch=3",
            "multikey=chunk-15133", "multikey=batch batch=4",
            "pipeline=lookahead-hash-once multikey=batch-hash-once batch=16",
            "multikey=redis-15043", "pipeline=lookahead multikey=redis-15043 batch=16"]

RAW = b"v" * 100  # a separate value allocation in every layout


def _program() -> list[bytes]:
    keys = [b"k%02d" % i for i in range(50)]
    return [
        E("MSET", *[x for k in keys[:40] for x in (k, RAW)]),
        E("MGET", *keys),  # 50 keys: 10 missing
        E("MSET", *[x for k in keys[10:45] for x in (k, RAW + k)]),  # overwrites, 5 new
        E("MSETNX", *[x for k in (b"n1", b"n2", b"n3") for x in (k, RAW)]),  # succeeds
        E("MSETNX", b"n4", b"x", keys[0], b"y", b"n5", b"z"),  # fails: k00 exists
        E("MGET", *keys[::-1], b"n1", b"n4"),
        E("GET", keys[44]), E("MGET", *keys[:17]), E("GET", keys[1]),  # overflows batch=16
        E("GET", keys[3]), E("MGET", *keys[5:55]), E("SET", keys[2], b"w"),  # 50 keys, 1 + 15
        E("MSETNX", *[x for k in keys[45:50] + [b"n6"] for x in (k, RAW)]),  # 6 new: 16-batch
        E("MGET", *keys[40:], b"n6"),
        # MSET over a range that partly exists (#15043's workload): every other key new
        E("MSET", *[x for i in range(0, 80, 2) for x in (b"k%02d" % i, RAW + b"%d" % i)]),
        E("MSETNX", *[x for i in range(100, 140) for x in (b"n%d" % i, b"v")]),  # 40 new
        E("MGET", *[b"k%02d" % i for i in range(0, 80, 3)]),
        E("DBSIZE"),
    ]


@pytest.mark.parametrize("options", ["table=hashtable", "table=dict", "table=dict layout=legacy",
                                     "table=dict cluster=1"])
def test_batching_rules_keep_replies(cref_lib, options):
    prog = _program()
    model = Model(cluster="cluster=1" in options)
    want = [model.execute(q)[0] for q in prog]
    for variant in ["", *VARIANTS]:
        with cref.Keyspace(options) as ks:
            got = [ks.execute(q, variant)[0] for q in prog]
            ks.check_valid()
            assert got == want, variant
            assert ks.dbsize() == model.dbsize()


def _dict_link_program() -> list[tuple[int | None, bytes]]:
    """Writes through the lookup's link (Redis setKey: dbFindByLink -> dictSetKeyAtLink):
    overwrites of direct items and of chained ones (SET, MSET, SET with EX, KEEPTTL, GET),
    EXPIRE reallocating an object in its chain, a SET over an expired key (the link is
    dropped with the key), inserts that resize the dict, DELs from chains; each query
    with the logical time (ms) to set first, or None."""
    keys = [b"c%03d" % i for i in range(120)]
    return [
        (None, E("SET", b"solo", b"a")),  # alone: a direct item
        (None, E("SET", b"solo", b"b")),  # overwrite keeps it direct
        (None, E("MSET", b"solo", RAW, b"solo2", b"x")),
        (None, E("SET", b"solo", b"c", b"GET")),
        (None, E("MSET", *[x for k in keys[:60] for x in (k, b"v")])),  # resizes, chains
        (None, E("MSET", *[x for k in keys[::2] for x in (k, RAW + k)])),  # overwrites, 30 new
        (None, E("SET", keys[7], b"w", b"EX", b"10")),  # overwrite with an expire
        (None, E("EXPIRE", keys[9], b"5")),  # reallocates the object in its chain
        (None, E("SET", keys[9], b"k", b"KEEPTTL")),
        (None, E("DEL", *keys[20:40:3])),
        (6000, E("SET", keys[9], b"after")),  # the old key expired: deleted, then added
        (6000, E("MGET", *keys[:12])),
        (12000, E("MSET", keys[7], b"again", b"solo", b"d")),
        (12000, E("MGET", *keys[::5], b"solo", b"solo2")),
        (12000, E("DBSIZE")),
    ]


@pytest.mark.parametrize("options", ["table=dict", "table=dict layout=legacy",
                                     "table=dict cluster=1", "table=dict layout=legacy cluster=1",
                                     "table=hashtable", "table=hashtable layout=legacy"])
def test_dict_link_writes_keep_replies(cref_lib, options):
    prog = _dict_link_program()
    model = Model(cluster="cluster=1" in options)
    want = []
    for t, q in prog:
        if t is not None:
            model.set_time_ms(t)
        want.append(model.execute(q)[0])
    for variant in ["", *VARIANTS]:
        with cref.Keyspace(options) as ks:
            got = []
            for t, q in prog:
                if t is not None:
                    ks.set_time_ms(t)
                got.append(ks.execute(q, variant)[0])
                ks.check_valid()
            assert got == want, variant
            assert ks.dbsize() == model.dbsize()
            assert snapshot.snapshot_contents(ks.save_snapshot()) == model.items(), variant
