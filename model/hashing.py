"""SipHash-1-2 and the seed -> SipHash key derivation (splitmix64, twice).

Written from the SipHash paper (Aumasson & Bernstein, 2012) and the splitmix64 definition;
``kvsim_cref.h`` documents that c_ref derives its 16-byte key from ``seed=N`` this way. The
property tests use it to build keys that land in one bucket (same low bits) and even carry
the same tag byte (same top 8 bits) on purpose.
"""

from __future__ import annotations

from functools import lru_cache

__all__ = ["siphash12", "seed_key", "keyspace_hash", "colliding_keys"]

M64 = (1 << 64) - 1


def _rotl(x: int, b: int) -> int:
    return ((x << b) | (x >> (64 - b))) & M64


def _round(v0: int, v1: int, v2: int, v3: int) -> tuple[int, int, int, int]:
    v0 = (v0 + v1) & M64
    v1 = _rotl(v1, 13) ^ v0
    v0 = _rotl(v0, 32)
    v2 = (v2 + v3) & M64
    v3 = _rotl(v3, 16) ^ v2
    v0 = (v0 + v3) & M64
    v3 = _rotl(v3, 21) ^ v0
    v2 = (v2 + v1) & M64
    v1 = _rotl(v1, 17) ^ v2
    v2 = _rotl(v2, 32)
    return v0, v1, v2, v3


def siphash12(data: bytes, key: bytes) -> int:
    """64-bit SipHash with 1 compression and 2 finalization rounds; ``key`` is 16 bytes."""
    k0 = int.from_bytes(key[:8], "little")
    k1 = int.from_bytes(key[8:16], "little")
    v0 = 0x736F6D6570736575 ^ k0
    v1 = 0x646F72616E646F6D ^ k1
    v2 = 0x6C7967656E657261 ^ k0
    v3 = 0x7465646279746573 ^ k1
    n = len(data)
    end = n - n % 8
    for i in range(0, end, 8):
        m = int.from_bytes(data[i : i + 8], "little")
        v3 ^= m
        v0, v1, v2, v3 = _round(v0, v1, v2, v3)
        v0 ^= m
    b = ((n & 0xFF) << 56) | int.from_bytes(data[end:], "little")
    v3 ^= b
    v0, v1, v2, v3 = _round(v0, v1, v2, v3)
    v0 ^= b
    v2 ^= 0xFF
    v0, v1, v2, v3 = _round(v0, v1, v2, v3)
    v0, v1, v2, v3 = _round(v0, v1, v2, v3)
    return v0 ^ v1 ^ v2 ^ v3


def seed_key(seed: int) -> bytes:
    """16-byte SipHash key from a 64-bit seed: two splitmix64 outputs, little endian."""
    out = b""
    for _ in range(2):
        seed = (seed + 0x9E3779B97F4A7C15) & M64
        z = seed
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
        z ^= z >> 31
        out += z.to_bytes(8, "little")
    return out


def keyspace_hash(key: bytes, seed: int = 0) -> int:
    """The hash c_ref's keyspace uses for ``key`` under ``seed=N``."""
    return siphash12(key, seed_key(seed))


@lru_cache(maxsize=64)
def colliding_keys(
    prefix: bytes, n: int, bucket_bits: int, same_tag: bool = False, seed: int = 0
) -> tuple[bytes, ...]:
    """``n`` keys ``prefix + number`` whose hashes share the low ``bucket_bits`` bits (one
    bucket for every table of up to 2**bucket_bits buckets), and with ``same_tag`` also the
    top 8 bits (tag matches force key compares)."""
    k = seed_key(seed)
    mask = (1 << bucket_bits) - 1
    want: int | None = None
    out: list[bytes] = []
    i = 0
    while len(out) < n:
        key = prefix + str(i).encode()
        i += 1
        h = siphash12(key, k)
        sig = (h & mask, h >> 56 if same_tag else 0)
        if want is None:
            want = sig  # type: ignore[assignment]
        if sig == want:
            out.append(key)
    return tuple(out)
