import pytest
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from kvsim.model.keyspace import Keyspace, ModelError
from kvsim.model.resp import encode_command as E
from kvsim.model.resp import parse_replies


def ex(ks, *cmds):
    out, used = ks.execute(b"".join(E(*c) for c in cmds))
    return out


def test_exact_reply_bytes():
    ks = Keyspace()
    assert ex(ks, ["SET", "a", "1"], ["GET", "a"], ["GET", "b"]) == b"+OK\r\n$1\r\n1\r\n$-1\r\n"
    assert ex(ks, ["MGET", "a", "b"]) == b"*2\r\n$1\r\n1\r\n$-1\r\n"
    assert ex(ks, ["MSET", "a"]) == b"-ERR wrong number of arguments for 'mset' command\r\n"
    assert ex(ks, ["MSET", "a", "1", "b"]) == (
        b"-ERR wrong number of arguments for 'mset' command\r\n")
    assert ex(ks, ["GET"]) == b"-ERR wrong number of arguments for 'get' command\r\n"
    assert ex(ks, ["SET", "a", "1", "EX", "x"]) == (
        b"-ERR value is not an integer or out of range\r\n")
    assert ex(ks, ["SET", "a", "1", "EX", "0"]) == (
        b"-ERR invalid expire time in 'set' command\r\n")
    assert ex(ks, ["SET", "a", "1", "EX", "1", "PX", "1"]) == b"-ERR syntax error\r\n"
    assert ex(ks, ["SET", "a", "1", "NX"]) == b"$-1\r\n"
    assert ex(ks, ["SET", "zz", "1", "XX"]) == b"$-1\r\n"
    assert ex(ks, ["MSETNX", "a", "2", "q", "3"]) == b":0\r\n"
    assert ex(ks, ["MSETNX", "p", "2", "q", "3"]) == b":1\r\n"
    assert ex(ks, ["DEL", "p", "p", "nope"]) == b":1\r\n"
    assert ex(ks, ["EXISTS", "q", "q", "p"]) == b":2\r\n"
    assert ex(ks, ["FOO", "x\r\ny"]) == (
        b"-ERR unknown command 'FOO', with args beginning with: 'x  y' \r\n")
    assert ex(ks, ["DBSIZE"]) == b":2\r\n"
    assert ex(ks, ["FLUSHALL", "ASYNC"]) == b"+OK\r\n"
    assert ex(ks, ["FLUSHALL", "x"]) == b"-ERR syntax error\r\n"
    assert ex(ks, ["EXPIRE", "a", "1", "NX", "XX"]) == (
        b"-ERR NX and XX, GT or LT options at the same time are not compatible\r\n")
    assert ex(ks, ["EXPIRE", "a", "1", "FOO"]) == b"-ERR Unsupported option FOO\r\n"
    assert ex(ks, ["SCAN", "x"]) == b"-ERR invalid cursor\r\n"
    assert ex(ks, ["SCAN", "0", "COUNT", "0"]) == b"-ERR syntax error\r\n"


def test_unknown_command_args_truncated_at_128():
    ks = Keyspace()
    rep = ex(ks, ["nope", "a" * 200, "b"])
    assert rep == b"-ERR unknown command 'nope', with args beginning with: '" + b"a" * 128 + (
        b"' \r\n")


def test_lazy_expiry_and_ttl():
    ks = Keyspace()
    ex(ks, ["SET", "a", "1", "PX", "1500"], ["SET", "b", "2", "EX", "1"], ["SET", "c", "3"])
    assert ex(ks, ["TTL", "a"], ["TTL", "c"], ["TTL", "nope"]) == b":2\r\n:-1\r\n:-2\r\n"
    ks.set_time_ms(1000)
    assert ex(ks, ["TTL", "b"]) == b":0\r\n"  # at `when` the key still lives
    ks.set_time_ms(1001)
    assert ex(ks, ["DBSIZE"]) == b":3\r\n"  # expired but not yet deleted
    assert parse_replies(ex(ks, ["KEYS", "*"]))[0] == [b"a", b"c"] or set(
        parse_replies(ex(ks, ["KEYS", "*"]))[0]) == {b"a", b"c"}
    assert ex(ks, ["DBSIZE"]) == b":3\r\n"  # KEYS does not delete
    assert ex(ks, ["GET", "b"], ["DBSIZE"]) == b"$-1\r\n:2\r\n"
    assert ex(ks, ["EXPIRE", "c", "-1"], ["DBSIZE"]) == b":1\r\n:1\r\n"
    assert ex(ks, ["SET", "a", "x"], ["TTL", "a"]) == b"+OK\r\n:-1\r\n"  # SET clears TTL


def test_msetnx_stops_lookups_at_first_existing_key():
    ks = Keyspace()
    ex(ks, ["SET", "x", "1", "PX", "1"], ["SET", "live", "1"], ["SET", "y", "1", "PX", "1"])
    ks.set_time_ms(5)
    assert ex(ks, ["MSETNX", "x", "1", "live", "2", "y", "3"], ["DBSIZE"]) == b":0\r\n:2\r\n"


def test_cluster_slot_tables_freed_and_crossslot():
    ks = Keyspace(cluster=True, crossslot=True)
    ex(ks, ["SET", "{a}1", "v", "PX", "1"])
    assert len(ks.slots) == 1
    ks.set_time_ms(2)
    ex(ks, ["GET", "{a}1"])
    assert ks.slots == {}
    assert ex(ks, ["MGET", "a", "b"]).startswith(b"-CROSSSLOT")
    ks.check_valid()


def test_scan_full_iteration_covers_everything():
    ks = Keyspace()
    keys = [b"k%d" % i for i in range(50)]
    ks.execute(b"".join(E("SET", k, "v") for k in keys))
    seen, cur = set(), b"0"
    while True:
        (rep,) = parse_replies(ex(ks, ["SCAN", cur, "COUNT", "7"]))
        cur, got = rep
        seen |= set(got)
        if cur == b"0":
            break
    assert seen == set(keys)


class DictMachine(RuleBasedStateMachine):
    """The model against a plain dict for the no-expiry subset (style guide section 6)."""

    def __init__(self):
        super().__init__()
        self.ks = Keyspace(cluster=True)
        self.d = {}

    keys = st.sampled_from([b"a", b"b", b"{x}1", b"{x}2", b""])

    @rule(k=keys, v=st.binary(max_size=4))
    def set(self, k, v):
        assert ex(self.ks, [b"SET", k, v]) == b"+OK\r\n"
        self.d[k] = v

    @rule(k=keys)
    def delete(self, k):
        assert ex(self.ks, [b"DEL", k]) == b":%d\r\n" % (k in self.d)
        self.d.pop(k, None)

    @rule(ks=st.lists(keys, min_size=1))
    def mget(self, ks):
        assert parse_replies(ex(self.ks, [b"MGET", *ks]))[0] == [self.d.get(k) for k in ks]

    @invariant()
    def agree(self):
        assert self.ks.dbsize() == len(self.d)
        self.ks.check_valid()


TestDictMachine = DictMachine.TestCase


def test_valkey_option_order_and_repeats():
    ks = Keyspace()
    # every option is parsed for syntax before the expire value is validated
    assert ex(ks, ["SET", "k", "v", "EX", "abc", "FOO"]) == b"-ERR syntax error\r\n"
    # EXPIRE parses its flags before its integer
    assert ex(ks, ["EXPIRE", "k", "abc", "FOO"]) == b"-ERR Unsupported option FOO\r\n"
    # a repeated EX replaces the earlier one
    assert ex(ks, ["SET", "k", "v", "EX", "10", "EX", "20"], ["TTL", "k"]) == b"+OK\r\n:20\r\n"
    assert ex(ks, ["SET", "k", "v", "EX", "10", "PX", "20"]) == b"-ERR syntax error\r\n"
    assert ex(ks, ["SET", "k", "v", "KEEPTTL", "EX", "1"]) == b"-ERR syntax error\r\n"
    assert ex(ks, ["FLUSHALL", "SYNC", "ASYNC"]) == b"-ERR syntax error\r\n"


def test_set_get_keepttl_exat_pttl():
    ks = Keyspace()
    assert ex(ks, ["SET", "k", "1", "GET"]) == b"$-1\r\n"
    assert ex(ks, ["SET", "k", "2", "GET", "NX"]) == b"$1\r\n1\r\n"  # not set: NX
    assert ex(ks, ["GET", "k"]) == b"$1\r\n1\r\n"
    assert ex(ks, ["SET", "k", "3", "PX", "1500"], ["SET", "k", "4", "KEEPTTL"],
              ["PTTL", "k"]) == b"+OK\r\n+OK\r\n:1500\r\n"
    assert ex(ks, ["SET", "a", "1", "PXAT", "5"], ["DBSIZE"]) == b"+OK\r\n:2\r\n"
    ks.set_time_ms(6)
    assert ex(ks, ["GET", "a"], ["DBSIZE"]) == b"$-1\r\n:1\r\n"
    assert ex(ks, ["SET", "a", "1", "EXAT", "0"]) == (
        b"-ERR invalid expire time in 'set' command\r\n")


def test_scan_star_and_expiry_semantics():
    """SCAN MATCH * returns the empty key (no glob run); KEYS filters expired keys without
    deleting them, SCAN deletes the ones it visits; protocol errors carry "ERR "."""
    ks = Keyspace()
    ex(ks, ["SET", "", "v"], ["SET", "e", "v", "PX", "1"])
    (rep,) = parse_replies(ex(ks, ["SCAN", "0", "MATCH", "*"]))
    assert b"" in rep[1]
    ks.set_time_ms(5)
    assert ex(ks, ["KEYS", "*"], ["DBSIZE"]) == b"*1\r\n$0\r\n\r\n:2\r\n"  # no delete
    ex(ks, ["SCAN", "0", "COUNT", "100"])
    assert ks.dbsize() == 1
    assert Keyspace().execute(b"*x\r\n")[0] == (
        b"-ERR Protocol error: invalid multibulk length\r\n")


def test_check_valid_detects_corruption():
    ks = Keyspace(cluster=True)
    ex(ks, ["SET", "{a}1", "v"])
    ks.check_valid()
    ks.expires[b"ghost"] = 5
    with pytest.raises(ModelError):
        ks.check_valid()
    del ks.expires[b"ghost"]
    ks.slots[0] = {b"{a}1"}  # wrong slot
    with pytest.raises(ModelError):
        ks.check_valid()
