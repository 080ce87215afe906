"""The batched-path models: what each batch touches, and that prefetching is advisory."""

from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from kvsim.model.batching import (
    first_key,
    get_keys_from_command,
    load_prefetch_order,
    mset_prefetch_batches,
    multikey_batches,
    pipeline_lookahead,
    prefetch_next_batch_size,
    redis_15043_batches,
    valkey_multikey_batch,
)
from kvsim.model.dictmodel import Dict, dict_prefetch_keys
from kvsim.model.hashing import colliding_keys, keyspace_hash
from kvsim.model.hashtable import Hashtable
from kvsim.model.prefetch import (
    IncrementalFindState,
    PrefetchState,
    hashtable_prefetch,
    incremental_find_get_result,
    incremental_find_init,
    incremental_find_step,
    iterator_prefetch_order,
)
from kvsim.model.resp import encode_command, split_commands
from kvsim.model.strategies import command, key_pool

UNIVERSE = [b"k%d" % i for i in range(30)] + list(colliding_keys(b"c", 12, 3, True))
ops = st.lists(st.tuples(st.booleans(), st.sampled_from(UNIVERSE)), max_size=80)


def build(oplist, cls=Hashtable):
    t = cls(hash_fn=keyspace_hash)
    present = set()
    for add, k in oplist:
        if add:
            t.add(k)
            present.add(k)
        else:
            t.delete(k)
            present.discard(k)
    return t, present


def standalone(ht, key):
    trace = []
    st_ = incremental_find_init(ht, key, trace)
    steps, states = 0, [st_.state]
    while incremental_find_step(st_):
        steps += 1
        states.append(st_.state)
    return st_, trace, states


@given(ops, st.sampled_from(UNIVERSE))
def test_incremental_find_equals_find_and_never_rehashes(oplist, key):
    ht, present = build(oplist)
    before = (ht.rehash_steps, ht.rehash_idx)
    st_, trace, states = standalone(ht, key)
    assert (incremental_find_get_result(st_) == key) == (key in present)
    assert st_.state in (IncrementalFindState.FOUND, IncrementalFindState.NOT_FOUND)
    assert (ht.rehash_steps, ht.rehash_idx) == before  # incremental find never rehashes
    # one prefetch per step at most, and only for this key
    assert sum(a.op == "prefetch" for a in trace) <= len(states)
    assert all(a.key == key for a in trace)
    assert set(states) <= {IncrementalFindState.NEXT_ENTRY, IncrementalFindState.CHECK_ENTRY,
                           IncrementalFindState.NEXT_BUCKET, IncrementalFindState.FOUND,
                           IncrementalFindState.NOT_FOUND}


@given(ops, st.lists(st.sampled_from(UNIVERSE), min_size=2, max_size=20))
def test_round_robin_prefetches_only_batch_keys_in_per_key_order(oplist, batch):
    ht, present = build(oplist)
    trace = hashtable_prefetch([(ht, k) for k in batch])
    prefetched = {a.key for a in trace if a.op == "prefetch"}
    assert prefetched <= set(batch)  # every prefetched key is demanded by the batch
    # values are prefetched for found keys only, and only once per batch position
    vals = Counter(a.key for a in trace if a.what == "value")
    assert set(vals) <= present
    assert all(vals[k] <= batch.count(k) for k in vals)
    if ht.size():
        # interleaving does not change what each key touches: per-key projection equals
        # a standalone incremental find (+ its value prefetch)
        for k in set(batch):
            _, alone, _ = standalone(ht, k)
            proj = [a for a in trace if a.key == k and a.what != "value"]
            assert proj == alone * batch.count(k) or Counter(proj) == Counter(
                alone * batch.count(k))


def test_round_robin_interleaves_one_prefetch_per_turn():
    ht = Hashtable(hash_fn=keyspace_hash)
    keys = [b"k%d" % i for i in range(8)]
    for k in keys:
        ht.add(k)
    trace = [a for a in hashtable_prefetch([(ht, k) for k in keys]) if a.op == "prefetch"]
    # first turn: one bucket prefetch per key, in batch order
    assert [(a.what, a.key) for a in trace[:8]] == [("bucket", k) for k in keys]
    assert hashtable_prefetch([(ht, b"k0")]) == []  # a single key is not prefetched
    assert hashtable_prefetch([(None, b"k0"), (None, b"k1")]) == []  # no table: DONE
    _ = PrefetchState


def test_rehash_mid_batch_makes_prefetched_buckets_stale_but_answers_stay_right():
    """The seed risk made visible: prefetch a batch, then execute inserts that grow the
    table; some prefetched bucket is no longer on the demand path, yet lookups (which
    re-derive the bucket) answer as naive execution does."""
    ht = Hashtable(hash_fn=keyspace_hash)
    for i in range(6):
        ht.add(b"k%d" % i)
    batch = [b"n%d" % i for i in range(16)]
    trace = hashtable_prefetch([(ht, k) for k in batch])
    pre = {a.key: a.ref for a in trace if a.what == "bucket"}
    stale = 0
    for k in batch:
        first = ht.first_bucket(keyspace_hash(k))
        stale += first is None or first[1].bid != pre[k]
        ht.add(k)  # the demand access: re-derives the bucket, may start a rehash
        assert ht.find(k)
    ht.check_valid()
    assert stale > 0


def test_dict_prefetcher_assume_hit_prefetches_an_undemanded_entry():
    """Redis's "last node, not rehashing: assume hit" shortcut prefetches the value of
    whatever key sits alone in the bucket, demanded or not (harmless: advisory)."""
    d = Dict(hash_fn=keyspace_hash)
    d.add(b"present")
    h = keyspace_hash(b"present") & 3
    absent = next(k for k in (b"a%d" % i for i in range(1000))
                  if keyspace_hash(k) & 3 == h and k != b"present")
    trace = dict_prefetch_keys([(d, absent), (d, b"zzz")])
    vals = [a for a in trace if a.what == "value"]
    assert any(a.ref == b"present" and a.key == absent for a in vals)


@given(ops, st.lists(st.sampled_from(UNIVERSE), min_size=2, max_size=20))
def test_dict_prefetcher_touches_only_batch_keys(oplist, batch):
    d, present = build(oplist, Dict)
    before = (d.rehashidx, d.ht_used[:])
    trace = dict_prefetch_keys([(d, k) for k in batch])
    assert {a.key for a in trace} <= set(batch)
    assert (d.rehashidx, d.ht_used) == before
    found = {a.key for a in trace if a.what == "value" and a.ref == a.key}
    assert found <= present


@given(st.integers(0, 300), st.integers(1, 64))
def test_multikey_batches_adaptive_tail(n, b):
    rs = multikey_batches(n, b)
    assert [i for r in rs for i in r] == list(range(n))
    assert all(len(r) == b for r in rs[:-1])
    if rs:
        assert 1 <= len(rs[-1]) < 2 * b or len(rs[-1]) == b
    assert prefetch_next_batch_size(32, 16) == 16 and prefetch_next_batch_size(31, 16) == 31


POOL = key_pool()


@settings(max_examples=60)
@given(st.lists(command(POOL), min_size=1, max_size=6), st.integers(1, 128), st.data(),
       st.sampled_from(["keys", "commands", "whole-commands"]))
def test_pipeline_lookahead_batches(cmds, bsize, data, unit):
    buf = b"".join(encode_command(*c) for c in cmds)
    cut = data.draw(st.integers(0, len(buf)))
    batches, perr, used = pipeline_lookahead(buf[:cut], bsize, unit)
    items, used2 = split_commands(buf[:cut])
    assert perr is None and used == used2
    flat = [c for b in batches for c in b.commands]
    assert [c.argv for c in flat] == [i.argv for i in items]  # each command once, in order
    for i, b in enumerate(batches):
        demanded = [k for c in b.commands for k in get_keys_from_command(c.argv)]
        if unit == "keys":  # c_ref (Valkey #2092): keys added while the batch has room
            assert b.commands and len(b.commands) <= 128
            want = demanded[:bsize]
            assert b.prefetch_keys == (want if len(want) > 1 else [])
            if i + 1 < len(batches):  # closed early only when full
                assert len(demanded) >= bsize or len(b.commands) == 128
                # full only after the last command: the one before it left room
                before = [k for c in b.commands[:-1] for k in get_keys_from_command(c.argv)]
                assert len(before) < bsize or len(b.commands) == 128
        elif unit == "whole-commands":  # whole commands, up to bsize keys, oversize alone
            assert b.commands and len(b.commands) <= 128
            if len(demanded) > bsize:
                assert len(b.commands) == 1 and b.prefetch_keys == []  # alone, unprefetched
            else:
                assert b.prefetch_keys == (demanded if len(demanded) > 1 else [])
                if i + 1 < len(batches) and len(b.commands) < 128 and len(demanded) < bsize:
                    # not full (bsize keys or 128 commands): the next command overflowed it
                    nxt = get_keys_from_command(batches[i + 1].commands[0].argv)
                    assert nxt and len(demanded) + len(nxt) > bsize
        else:
            assert len(b.commands) <= bsize
            firsts = [first_key(c.argv) for c in b.commands]
            assert b.prefetch_keys in ([], [k for k in firsts if k is not None])
            assert set(b.prefetch_keys) <= set(demanded) | {c.argv[1] for c in b.commands
                                                             if len(c.argv) > 1}
    # a command cut off at the end is not in any batch and is not consumed
    assert used <= cut and all(c.end <= used for c in flat)


def test_pipeline_lookahead_keys_rule():
    """The rule at the top of c_ref/pipeline.c on c_ref's own example (test_emit.c):
    keys join until the batch is full; the command that fills it closes it."""
    q = (b"SET a 1\r\nGET a\r\nMGET a b c\r\nDBSIZE\r\nMSET a 1 b\r\n"
         b"MGET a b c d e\r\nGET x\r\nGET y\r\nDEL a b c d\r\nGET z\r\n")
    batches, perr, used = pipeline_lookahead(q, 4)
    assert perr is None and used == len(q)
    assert [[c.argv[0] for c in b.commands] for b in batches] == [
        [b"SET", b"GET", b"MGET"], [b"DBSIZE", b"MSET", b"MGET"], [b"GET", b"GET", b"DEL"],
        [b"GET"]]
    assert [b.prefetch_keys for b in batches] == [
        [b"a", b"a", b"a", b"b"], [b"a", b"b", b"c", b"d"], [b"x", b"y", b"a", b"b"], []]
    zero_key = b"DBSIZE\r\n" * 300  # no keys: the batch closes at 128 commands
    assert [len(b.commands) for b in pipeline_lookahead(zero_key, 4)[0]] == [128, 128, 44]
    mget50 = encode_command(b"MGET", *[b"k%d" % i for i in range(50)])
    get_x = encode_command(b"GET", b"x")
    (b,), _, _ = pipeline_lookahead(get_x + mget50, 16)  # one batch of 16 keys
    assert b.prefetch_keys == [b"x"] + [b"k%d" % i for i in range(15)]
    old = pipeline_lookahead(mget50, 16, "whole-commands")[0]
    assert [x.prefetch_keys for x in old] == [[]]  # the rule without the key budget


@given(st.lists(st.sampled_from(UNIVERSE), min_size=1, max_size=60, unique=True),
       st.booleans())
def test_load_prefetch_targets_the_loaded_key(keys, cluster):
    trace = load_prefetch_order([(k, b"v") for k in keys], cluster=cluster)
    for i, a in enumerate(trace):
        if a.op == "prefetch":
            assert trace[i - 1] == ("read", "key", a.key, a.key)  # right after the key
            assert trace[i + 1] == ("read", "value", a.key, a.key)  # before the value
    none = load_prefetch_order([(k, b"v") for k in keys], "none")
    assert [a for a in none if a.op == "prefetch"] == []
    rehash = load_prefetch_order([(k, b"v") for k in keys], "prefetch-rehash")
    key_reads = Counter(a.key for a in rehash if a.what == "key")
    assert all(n == 2 for n in key_reads.values())  # read once more to hash again


def test_load_prefetch_goes_stale_when_the_insert_grows_the_table():
    keys = [b"k%d" % i for i in range(40)]
    trace = load_prefetch_order([(k, b"v") for k in keys])
    pre = [a.ref for a in trace if a.op == "prefetch"]
    used = [a.ref for a in trace if a.op == "read" and a.what == "bucket"]
    assert len(pre) == len(used) == 40
    assert any(p != u for p, u in zip(pre, used, strict=True))  # resize made some stale


@given(ops, st.booleans(), st.sampled_from(["none", "next-bucket", "valkey"]))
def test_iterator_prefetches_only_what_it_then_returns(oplist, values, mode):
    ht, present = build(oplist)
    trace = iterator_prefetch_order(ht, prefetch_values=values, mode=mode)
    if mode == "none":
        assert all(a.op == "read" for a in trace)
    visited = [a.ref for a in trace if a.op == "read"]
    buckets = [b.bid for t in (0, 1) if ht.tables[t] for i in range(len(ht.tables[t]))
               for b in ht.chain(t, i)]
    for a in trace:
        if a.what == "bucket":
            assert a.ref in buckets  # a prefetched bucket line is one the iteration visits
    assert sorted(visited) == sorted(present)
    reads = [a.ref for a in trace if a.op == "read"]
    assert sorted(reads) == sorted(present)
    for i, a in enumerate(trace):
        if a.op == "prefetch" and a.what in ("entry", "value"):
            assert a.ref in reads[len([x for x in trace[:i] if x.op == "read"]):]


@given(st.integers(0, 200), st.booleans(), st.integers(1, 128))
def test_valkey_mset_prefetches_the_first_batch_once(npairs, nx, b):
    """Valkey (``multikey=batch`` on a hashtable): one batch of the first ``b`` keys, in
    the first pass only, whatever the command's size."""
    plan = mset_prefetch_batches(npairs, nx, b, rule="valkey")
    want = [("check" if nx else "set", range(min(npairs, b)))] if min(npairs, b) > 1 else []
    assert plan == want
    assert valkey_multikey_batch(50, 16) == [range(16)]


@given(st.integers(0, 200), st.booleans())
def test_mset_prefetches_every_key_once(npairs, nx):
    """Redis #15133 ``do_prefetch &&= !nx``: MSETNX prefetches in its check pass only, so
    no key is prefetched twice; MSET in its one pass. Either way every key of a batch of
    more than one is prefetched exactly once."""
    plan = mset_prefetch_batches(npairs, nx)
    assert {p for p, _ in plan} <= ({"check"} if nx else {"set"})
    keys = [i for _, r in plan for i in r]
    assert len(keys) == len(set(keys))
    assert set(keys) == set(range(npairs)) if npairs > 1 else keys == []


@given(st.integers(0, 200), st.booleans())
def test_redis_15043_batches_cover_each_pass(npairs, nx):
    """Redis PR #15043: fixed 16-key chunks in order, every chunk full but the last;
    MSETNX prefetches each key once per pass (check and set), MSET once (a last chunk of
    one key is not a batch: c_ref prefetches batches of more than one key)."""
    chunks = redis_15043_batches(npairs)
    assert [i for r in chunks for i in r] == list(range(npairs))
    assert all(len(r) == 16 for r in chunks[:-1])
    batched = [i for r in chunks if len(r) > 1 for i in r]
    plan = mset_prefetch_batches(npairs, nx, rule="15043")
    for p in ("check", "set"):
        keys = [i for q, r in plan if q == p for i in r]
        assert keys == (batched if p == "set" or nx else []), p


def test_batch_rules_differ_on_40_keys():
    """The rule c_ref test_fidelity.c counts in a trace: 40 keys are 16 + 16 + 8 under
    #15043 and 16 + 24 under #15133."""
    assert [len(r) for r in redis_15043_batches(40)] == [16, 16, 8]
    assert [len(r) for r in multikey_batches(40)] == [16, 24]


@given(st.lists(st.sampled_from(UNIVERSE), min_size=2, max_size=40, unique=True),
       st.booleans())
def test_dict_prefetcher_one_value_line_per_raw_hit(batch, raw):
    """Redis #15133 ``dbDictPrefetchEntryValue``: every key found prefetches its value
    line when the value is RAW (c_ref test_fidelity.c counts the same in a trace)."""
    d = Dict(hash_fn=keyspace_hash)
    for k in batch:
        d.add(k)
    trace = dict_prefetch_keys([(d, k) for k in batch[:DICT_MAX]], lambda k: raw)
    vals = [a for a in trace if a.op == "prefetch" and a.what == "value"]
    assert len(vals) == (min(len(batch), DICT_MAX) if raw else 0)
    assert all(a.ref == a.key for a in vals)  # present keys: the value is the key's own


DICT_MAX = 64
