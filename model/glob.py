"""Valkey's ``stringmatchlen`` glob (KEYS, SCAN MATCH) and cluster ``keyHashSlot``.

Bytes semantics follow the C code on x86/ARM64 Linux with signed ``char``: in a ``[a-z]``
range the bounds and the subject byte are compared as signed 8-bit values. Reading one byte
past the pattern (the C code does, relying on the sds NUL terminator) yields 0 here.
"""

from __future__ import annotations

__all__ = ["string_match_len", "crc16", "key_hash_slot", "CLUSTER_SLOTS"]

CLUSTER_SLOTS = 16384


def _signed(b: int) -> int:
    return b - 256 if b >= 128 else b


def string_match_len(pattern: bytes, string: bytes, nocase: bool = False) -> bool:
    """True if ``string`` matches glob ``pattern`` (``* ? [...] [^...] [a-z] \\x``)."""
    skip = [False]
    return _match(pattern, 0, string, 0, nocase, skip, 0)


def _lower(c: int) -> int:
    return c + 32 if 0x41 <= c <= 0x5A else c


def _match(p: bytes, pi: int, s: bytes, si: int, nocase: bool, skip: list[bool], nest: int) -> bool:
    if nest > 1000:
        return False
    plen, slen = len(p) - pi, len(s) - si

    def pat(k: int) -> int:
        return p[k] if k < len(p) else 0

    while plen and slen:
        c = p[pi]
        if c == 0x2A:  # '*'
            while plen and pat(pi + 1) == 0x2A:
                pi += 1
                plen -= 1
            if plen == 1:
                return True
            while slen:
                if _match(p, pi + 1, s, si, nocase, skip, nest + 1):
                    return True
                if skip[0]:
                    return False
                si += 1
                slen -= 1
            skip[0] = True
            return False
        elif c == 0x3F:  # '?'
            si += 1
            slen -= 1
        elif c == 0x5B:  # '['
            pi += 1
            plen -= 1
            neg = pat(pi) == 0x5E
            if neg:
                pi += 1
                plen -= 1
            matched = False
            sc = s[si]
            while True:
                if pat(pi) == 0x5C and plen >= 2:
                    pi += 1
                    plen -= 1
                    if pat(pi) == sc:
                        matched = True
                elif pat(pi) == 0x5D:
                    break
                elif plen == 0:
                    pi -= 1
                    plen += 1
                    break
                elif plen >= 3 and pat(pi + 1) == 0x2D:
                    start, end, ch = _signed(pat(pi)), _signed(pat(pi + 2)), _signed(sc)
                    if start > end:
                        start, end = end, start
                    if nocase:
                        start, end, ch = _lower(start), _lower(end), _lower(ch)
                    pi += 2
                    plen -= 2
                    if start <= ch <= end:
                        matched = True
                elif nocase:
                    if _lower(pat(pi)) == _lower(sc):
                        matched = True
                elif pat(pi) == sc:
                    matched = True
                pi += 1
                plen -= 1
            if neg:
                matched = not matched
            if not matched:
                return False
            si += 1
            slen -= 1
        else:
            if c == 0x5C and plen >= 2:  # '\\'
                pi += 1
                plen -= 1
            pc, sc = pat(pi), s[si]
            if (_lower(pc) != _lower(sc)) if nocase else (pc != sc):
                return False
            si += 1
            slen -= 1
        pi += 1
        plen -= 1
        if slen == 0:
            while pat(pi) == 0x2A:
                pi += 1
                plen -= 1
            break
    return plen == 0 and slen == 0


def crc16(data: bytes) -> int:
    """CRC16-CCITT (XMODEM: poly 0x1021, init 0), as Valkey's ``crc16.c``."""
    crc = 0
    for b in data:
        crc ^= b << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else (crc << 1)
            crc &= 0xFFFF
    return crc


def key_hash_slot(key: bytes) -> int:
    """``keyHashSlot``: CRC16 of the {hashtag} if present and non-empty, else the key."""
    s = key.find(b"{")
    if s != -1:
        e = key.find(b"}", s + 1)
        if e != -1 and e != s + 1:
            key = key[s + 1 : e]
    return crc16(key) & (CLUSTER_SLOTS - 1)
