from hypothesis import given
from hypothesis import strategies as st

from kvsim.model.resp import (
    Command,
    ProtocolError,
    encode_command,
    parse_replies,
    split_commands,
    string2ll,
)


def test_string2ll_strictness():
    assert string2ll(b"0") == 0
    assert string2ll(b"-12") == -12
    for bad in [b"", b"+1", b"01", b"-0", b"-", b" 1", b"1 ", b"9223372036854775808"]:
        assert string2ll(bad) is None, bad
    assert string2ll(b"9223372036854775807") == 2**63 - 1
    assert string2ll(b"-9223372036854775808") == -(2**63)


def test_split_basic_and_incomplete():
    buf = encode_command(b"GET", b"a") + encode_command(b"SET", b"b", b"c")
    items, used = split_commands(buf + b"*2\r\n$3\r\nGET\r\n$1\r\n")
    assert [i.argv for i in items] == [(b"GET", b"a"), (b"SET", b"b", b"c")]
    assert used == len(buf)


def test_protocol_errors_are_valkeys():
    cases = {
        b"*x\r\n": "Protocol error: invalid multibulk length",
        b"*1\r\n$x\r\n": "Protocol error: invalid bulk length",
        b"*1\r\n$-1\r\n": "Protocol error: invalid bulk length",
        b"*1\r\nfoo\r\n": "Protocol error: expected '$', got 'f'",
        b'"unbalanced\r\n': "Protocol error: unbalanced quotes in request",
        b"*3000000000\r\n": "Protocol error: invalid multibulk length",
    }
    for buf, msg in cases.items():
        items, used = split_commands(buf)
        assert isinstance(items[-1], ProtocolError) and items[-1].message == msg, buf
        assert used == len(buf)


def test_empty_multibulk_and_inline():
    items, used = split_commands(b"*0\r\n*-1\r\n\r\nGET  'a b' \"c\\x41\"\r\n")
    assert [i.argv for i in items] == [(b"GET", b"a b", b"cA")]
    assert used == len(b"*0\r\n*-1\r\n\r\nGET  'a b' \"c\\x41\"\r\n")


def test_bulk_trailer_is_not_checked():
    items, _ = split_commands(b"*1\r\n$3\r\nGETxy")
    assert items[0].argv == (b"GET",)


args = st.lists(st.binary(max_size=12), min_size=1, max_size=5)


@given(st.lists(args, min_size=1, max_size=5), st.data())
def test_split_at_every_boundary_is_stable(cmds, data):
    """Feeding a pipeline in two reads yields the same commands as one read."""
    buf = b"".join(encode_command(*c) for c in cmds)
    whole, used = split_commands(buf)
    assert used == len(buf) and [c.argv for c in whole] == [tuple(c) for c in cmds]
    for cut in range(len(buf) + 1):
        a, u1 = split_commands(buf[:cut])
        b, u2 = split_commands(buf[u1:])
        assert all(isinstance(x, Command) for x in a + b)
        assert [x.argv for x in a + b] == [tuple(c) for c in cmds]
        assert u1 + u2 == len(buf)


def test_parse_replies_roundtrip():
    buf = b"+OK\r\n-ERR x\r\n:5\r\n$-1\r\n$3\r\na\r\n\r\n*2\r\n$1\r\nx\r\n*0\r\n"
    assert parse_replies(buf) == ["OK", "ERR x", 5, None, b"a\r\n", [b"x", []]]
