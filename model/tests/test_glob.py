import fnmatch

from hypothesis import given
from hypothesis import strategies as st

from kvsim.model.glob import crc16, key_hash_slot, string_match_len


def test_known_matches():
    yes = [(b"*", b"abc"), (b"a?c", b"abc"), (b"a[bc]d", b"acd"),
           (b"a[^b]d", b"acd"), (b"a[a-c]", b"ab"), (b"a[c-a]", b"ab"), (b"\\*", b"*"),
           (b"a\\", b"a\\"), (b"[\\]]", b"]"), (b"h*llo", b"heeeello"), (b"[abc", b"a"),
           (b"**a", b"xa")]
    no = [(b"*", b""), (b"a", b""),  # "*" vs "": Valkey quirk, no match
          (b"", b"a"), (b"a?c", b"ac"), (b"a[^b]d", b"abd"), (b"\\*", b"a"),
          (b"a[a-c]", b"ad"), (b"h*llo", b"hell")]
    for p, s in yes:
        assert string_match_len(p, s), (p, s)
    for p, s in no:
        assert not string_match_len(p, s), (p, s)


def test_signed_char_ranges():
    # bytes >= 0x80 are negative as C chars: [\x01-\xff] means [-1..1], which holds \x00
    assert string_match_len(b"[\x01-\xff]", b"\x00")
    assert not string_match_len(b"[\x01-\xff]", b"\x50")


plain = st.text(alphabet="ab*?", max_size=6)


@given(plain, st.text(alphabet="ab", min_size=1, max_size=6))
def test_agrees_with_fnmatch_on_star_and_question(p, s):
    assert string_match_len(p.encode(), s.encode()) == fnmatch.fnmatchcase(s, p)


def test_crc16_and_slots():
    assert crc16(b"123456789") == 0x31C3
    assert key_hash_slot(b"foo") == 12182
    assert key_hash_slot(b"{user1000}.following") == key_hash_slot(b"{user1000}.followers")
    assert key_hash_slot(b"foo{}{bar}") == key_hash_slot(b"foo{}{bar}")
    assert key_hash_slot(b"{}x") == crc16(b"{}x") & 16383
    assert key_hash_slot(b"a{b}c") == crc16(b"b") & 16383
