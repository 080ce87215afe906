"""Physical page placement: the frame each virtual page sits in, for the caches a physical
address indexes (the engine's sim/_engine/placement.h, whose design note says why).

A trace records virtual addresses. Natively the levels past L1 are indexed by the physical
address, and the pages sit in whatever frames the operating system (in a guest: the host,
whose 4 KiB pages back even the guest's huge pages) had free, so the set-index bits above
the page offset are in effect random per page. With ``[tlb] placement = "random"`` (sim/
PRESETS.md) every line the caches see (a piece, a prefetch, a walk's page-table read) is
moved to the frame :func:`place_frame` gives its page: a seeded bijection of the page
numbers (no two pages share a frame; one seed, one placement), the offset kept. The TLBs
still translate the virtual page. Frames are of the smallest page of the translation: the
TLB's page, or the host's under nested paging (``[tlb] host_page_size``).

:func:`place_line` is the engine's ``kvsimPlaceLine``, bit for bit (sim/tests/
test_placement.py compares them); sim/reference.py uses it.
"""

from __future__ import annotations

#: The placements a CPU file may name (``[tlb] placement``): the trace's address indexes
#: the caches, or each page sits in a seeded random frame.
PLACEMENTS = ("virtual", "random")
#: Page sizes placement takes, as bits (engine placement.h KVSIM_PLACE_MIN/MAX_BITS).
MIN_BITS, MAX_BITS = 12, 30

MUL1, MUL2 = 0xBF58476D1CE4E5B9, 0x94D049BB133111EB  # placement.h KVSIM_PLACE_MUL1/2
GOLDEN = 0x9E3779B97F4A7C15  # placement.h KVSIM_PLACE_GOLDEN
MASK64 = (1 << 64) - 1


def place_frame(page: int, bits: int, seed: int) -> int:
    """The frame of ``page`` (a (64 - bits)-bit page number): two rounds of multiply by an
    odd constant and xor-shift modulo 2^(64 - bits), each a bijection (placement.h
    kvsimPlaceFrame)."""
    w = 64 - bits
    m = (1 << w) - 1
    x = (page ^ ((seed * GOLDEN) & MASK64)) & m
    x = (x * MUL1) & m
    x ^= x >> (w // 2)
    x = (x * MUL2) & m
    x ^= x >> (w // 2 - 1)
    return x


def place_line(line: int, line_bits: int, bits: int, seed: int) -> int:
    """The physical line of virtual ``line`` with pages of 2^bits bytes (0: the line
    itself; placement.h kvsimPlaceLine)."""
    if not bits:
        return line
    sh = bits - line_bits
    return (place_frame(line >> sh, bits, seed) << sh) | (line & ((1 << sh) - 1))
