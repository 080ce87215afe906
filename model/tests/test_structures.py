import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from kvsim.model.dictmodel import Dict
from kvsim.model.hashing import colliding_keys, keyspace_hash
from kvsim.model.hashtable import Hashtable, next_bucket_exp

KEYS = [b"k%d" % i for i in range(40)] + list(colliding_keys(b"c", 12, 3, True))


def test_next_bucket_exp():
    # ceil(n * 5 / 32) buckets, rounded up to a power of two
    assert [next_bucket_exp(n) for n in (0, 1, 6, 7, 12, 13, 25, 26)] == [-1, 0, 0, 1, 1, 2, 2, 3]


def test_colliding_keys_collide():
    ks = colliding_keys(b"c", 12, 3, True)
    hs = {(keyspace_hash(k) & 7, keyspace_hash(k) >> 56) for k in ks}
    assert len(hs) == 1 and len(set(ks)) == 12


def test_chains_form_with_colliding_keys():
    ht = Hashtable(hash_fn=keyspace_hash)
    for k in colliding_keys(b"c", 12, 3, True):
        ht.add(k)
        ht.check_valid()
    assert max(len(ht.chain(0, i)) for i in range(len(ht.tables[0]))) >= 2


class TableMachine(RuleBasedStateMachine):
    """Hashtable and Dict models against a set; check_valid after every step."""

    def __init__(self):
        super().__init__()
        self.ht = Hashtable(hash_fn=keyspace_hash)
        self.d = Dict(hash_fn=keyspace_hash)
        self.s = set()

    @rule(k=st.sampled_from(KEYS))
    def add(self, k):
        assert self.ht.add(k) == (k not in self.s)
        assert self.d.add(k) == (k not in self.s)
        self.s.add(k)

    @rule(k=st.sampled_from(KEYS))
    def delete(self, k):
        assert self.ht.delete(k) == (k in self.s)
        assert self.d.delete(k) == (k in self.s)
        self.s.discard(k)

    @rule(k=st.sampled_from(KEYS))
    def find(self, k):
        assert self.ht.find(k) == (k in self.s)
        assert self.d.find(k) == (k in self.s)

    @invariant()
    def valid(self):
        self.ht.check_valid()
        self.d.check_valid()
        assert sorted(self.ht.keys()) == sorted(self.s)
        assert self.ht.size() == self.d.size() == len(self.s)


TestTableMachine = TableMachine.TestCase
TestTableMachine.settings = settings(max_examples=60, stateful_step_count=60, deadline=None)


def test_check_valid_detects_corruption():
    ht = Hashtable(hash_fn=keyspace_hash)
    for k in KEYS[:20]:
        ht.add(k)
    ht.check_valid()
    b = next(b for b in ht.tables[0] if b.presence)
    pos = b.filled()[0]
    b.hashes[pos] ^= 1
    with pytest.raises(AssertionError, match="tag"):
        ht.check_valid()
    b.hashes[pos] ^= 1
    ht.used[0] += 1
    with pytest.raises(AssertionError, match="used"):
        ht.check_valid()


def test_dict_add_runs_one_rehash_step():
    """Redis setKey: the lookup's walk runs the insert's only rehash step (dbFindByLink ->
    dictSetKeyAtLink), for a new key and for an existing one."""
    from kvsim.model.dictmodel import Dict

    d = Dict()
    calls = []
    step = d.rehash_step_if_needed
    d.rehash_step_if_needed = lambda idx: (calls.append(idx), step(idx))[1]
    d.add(b"k0")  # an empty dict: no walk, no step (dictFindLink returns at once)
    assert calls == []
    for i in range(1, 3000):  # through doublings, rehashing most of the way
        before = len(calls)
        d.add(b"k%d" % i)
        assert len(calls) - before == 1
    before = len(calls)
    assert not d.add(b"k7")
    assert len(calls) - before == 1
    d.check_valid()
