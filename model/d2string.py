"""A double as Valkey's replies and listpacks write it: ``d2string`` (c_ref/d2string.c).

nan, inf, -inf, 0 and -0 are fixed texts; an integral double within +-LLONG_MAX / 2 is
the integer's digits (``double2ll`` + ``ll2string``); anything else is ``fpconv_dtoa``:
Grisu2's digits (not always the shortest that reads back, so not Python's ``repr``), laid
out by :func:`emit_digits`. Every step is c_ref's, on 64-bit unsigned words (``_M64``),
so the two agree bit for bit; the cached powers of ten are computed here exactly.
"""

from __future__ import annotations

import math
import struct
from fractions import Fraction
from functools import cache

__all__ = ["LLONG_MAX", "cached_power", "d2string", "double2ll", "fpconv_dtoa"]

LLONG_MAX = 2**63 - 1
_M64 = 2**64 - 1
CACHED_FIRST, CACHED_STEP, CACHED_COUNT = -348, 8, 87
ALPHA, GAMMA = -60, -32


@cache
def cached_power(i: int) -> tuple[int, int]:
    """The i-th cached power, 10^(CACHED_FIRST + i * CACHED_STEP): the nearest significand
    f (2^63 <= f < 2^64, half up) and binary exponent e with f * 2^e ~ 10^k."""
    v = Fraction(10) ** (CACHED_FIRST + i * CACHED_STEP)
    e = v.numerator.bit_length() - v.denominator.bit_length() - 64
    while not 2**63 <= v / Fraction(2) ** e < 2**64:
        e += 1 if v / Fraction(2) ** e >= 2**64 else -1
    f = v / Fraction(2) ** e
    q, r = divmod(f.numerator, f.denominator)
    q += 2 * r >= f.denominator
    return (q >> 1, e + 1) if q == 2**64 else (q, e)


def _bits(d: float) -> int:
    return struct.unpack("<Q", struct.pack("<d", d))[0]


def _from_double(d: float) -> tuple[int, int]:
    b = _bits(d)
    frac, biased = b & (2**52 - 1), (b >> 52) & 0x7FF
    return (frac | 2**52, biased - 1075) if biased else (frac, -1074)


def _normalized(f: int, e: int) -> tuple[int, int]:
    while not f & 2**52:
        f, e = f << 1, e - 1
    return (f << 11) & _M64, e - 11


def _boundaries(f: int, e: int) -> tuple[tuple[int, int], tuple[int, int]]:
    pf, pe = (f << 1) + 1, e - 1
    while not pf & 2**53:
        pf, pe = pf << 1, pe - 1
    pf, pe = (pf << 10) & _M64, pe - 10
    below = 2 if f == 2**52 else 1
    mf, me = (f << below) - 1, e - below
    return ((mf << (me - pe)) & _M64, pe), (pf, pe)


def _times(a: tuple[int, int], b: tuple[int, int]) -> tuple[int, int]:
    m32 = 2**32 - 1
    ah, al, bh, bl = a[0] >> 32, a[0] & m32, b[0] >> 32, b[0] & m32
    hh, hl, lh, ll = ah * bh, ah * bl, al * bh, al * bl
    mid = (hl & m32) + (lh & m32) + (ll >> 32) + 2**31
    return (hh + (hl >> 32) + (lh >> 32) + (mid >> 32)) & _M64, a[1] + b[1] + 64


def _cached_for(e: int) -> tuple[tuple[int, int], int]:
    guess = math.trunc(-(e + CACHED_COUNT) * 0.30102999566398114)
    i = (guess - CACHED_FIRST) // CACHED_STEP  # positive: C's truncation
    while True:
        s = e + cached_power(i)[1] + 64
        if s < ALPHA:
            i += 1
        elif s > GAMMA:
            i -= 1
        else:
            return cached_power(i), CACHED_FIRST + i * CACHED_STEP


def _round_weed(digits: list[int], delta: int, rest: int, unit: int, w: int) -> None:
    """roundWeed, with C's unsigned wrap-around."""
    while (rest < w and (delta - rest) & _M64 >= unit
           and ((rest + unit) & _M64 < w or (w - rest) & _M64 > (rest + unit - w) & _M64)):
        digits[-1] -= 1
        rest = (rest + unit) & _M64


def _digit_gen(w: tuple[int, int], hi: tuple[int, int], lo: tuple[int, int]
               ) -> tuple[list[int], int]:
    dist, delta = (hi[0] - w[0]) & _M64, (hi[0] - lo[0]) & _M64
    shift = -hi[1]
    one = 1 << shift
    p1, p2 = hi[0] >> shift, hi[0] & (one - 1)
    digits: list[int] = []
    kappa = 10
    while kappa > 0:
        div = 10 ** (kappa - 1)
        d = p1 // div
        if d or digits:
            digits.append(d)
        p1 -= d * div
        kappa -= 1
        rest = ((p1 << shift) + p2) & _M64
        if rest <= delta:
            _round_weed(digits, delta, rest, (div << shift) & _M64, dist)
            return digits, kappa
    u = 0
    while True:
        p2, delta, kappa = (p2 * 10) & _M64, (delta * 10) & _M64, kappa - 1
        d = p2 >> shift
        if d or digits:
            digits.append(d)
        p2 &= one - 1
        if p2 < delta:
            _round_weed(digits, delta, p2, one, (dist * 10 ** min(u + 1, 19)) & _M64)
            return digits, kappa
        u += 1


def _grisu2(d: float) -> tuple[str, int]:
    f, e = _from_double(d)
    lo, hi = _boundaries(f, e)
    v = _normalized(f, e)
    c, k = _cached_for(hi[1])
    v, hi, lo = _times(v, c), _times(hi, c), _times(lo, c)
    lo, hi = ((lo[0] + 1) & _M64, lo[1]), ((hi[0] - 1) & _M64, hi[1])
    digits, kappa = _digit_gen(v, hi, lo)
    return "".join(map(str, digits)), kappa - k


def emit_digits(digits: str, K: int, neg: bool) -> str:
    """fpconv's layout: an integer while the exponent is small, a decimal for -7 < K or an
    exponent below 4, else d.ddde+X (the exponent without leading zeros)."""
    n = len(digits)
    exp = abs(K + n - 1)
    if K >= 0 and exp < n + 7:
        return digits + "0" * K
    if K < 0 and (K > -7 or exp < 4):
        point = n + K
        if point <= 0:
            return "0." + "0" * -point + digits
        return digits[:point] + "." + digits[point:]
    m = min(n, 18 - neg)
    mant = digits[0] + ("." + digits[1:m] if m > 1 else "")
    return f"{mant}e{'-' if K + m - 1 < 0 else '+'}{exp}"


def fpconv_dtoa(d: float) -> str:
    """fpconv_dtoa: the sign, then 0, nan, inf or Grisu2's digits laid out."""
    sign = "-" if _bits(d) >> 63 else ""
    if d == 0:
        return sign + "0"
    if math.isnan(d) or math.isinf(d):
        return sign + ("nan" if math.isnan(d) else "inf")
    digits, K = _grisu2(d)
    return sign + emit_digits(digits, K, bool(sign))


def double2ll(d: float) -> int | None:
    """util.c double2ll: the integer if d is integral within +-LLONG_MAX / 2, else None."""
    if d < float(-(LLONG_MAX // 2)) or d > float(LLONG_MAX // 2):
        return None
    return int(d) if float(int(d)) == d else None


def d2string(d: float) -> bytes:
    """util.c d2string."""
    if math.isnan(d):
        return b"nan"
    if math.isinf(d):
        return b"-inf" if d < 0 else b"inf"
    if d == 0:
        return b"-0" if math.copysign(1.0, d) < 0 else b"0"
    ll = double2ll(d)
    return str(ll).encode() if ll is not None else fpconv_dtoa(d).encode()
