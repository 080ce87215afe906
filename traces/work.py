"""Instructions by kind of work (FORMAT.md, kinds of work): how many of a trace's
instructions each kind (``WORK_NAMES``: generic, hash, crc, ...) counts, as a timing model
with per-kind rates (the engine, sim/MODEL.md) retires them.

A ``WORK`` marker names some of the next access record's gap as its kind; the rest of the
gap and the access itself are of the record's site's kind (header ``site_kinds``; none:
generic). Warm-up records (between ``WARMUP_BEGIN`` and ``WARMUP_END``) are left out, as a
simulator leaves them out of its counts.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .format import (
    KIND_MARKER,
    MARK_WARMUP_BEGIN,
    MARK_WARMUP_END,
    MARK_WORK,
    WORK_COUNT_BITS,
    WORK_NAMES,
)


def instructions_by_kind(header: dict[str, Any], records: np.ndarray) -> dict[str, int]:
    """{kind name: instructions} over the measured records of a whole trace ``records``
    (gaps plus one per access, the engine's ``instructions``)."""
    names = list(header.get("work_kinds") or WORK_NAMES)
    site_kinds = np.asarray(header.get("site_kinds") or [0], dtype=np.int64)
    kind, flags = records["kind"], records["flags"]
    marker = kind == KIND_MARKER
    wb = marker & (flags == MARK_WARMUP_BEGIN)
    we = marker & (flags == MARK_WARMUP_END)
    # inside a warm-up: more BEGINs than ENDs before (and at) the record
    warm = (np.cumsum(wb) - np.cumsum(we) + we) > 0
    out = np.zeros(max(len(names), 1), dtype=np.int64)
    access = np.flatnonzero(~marker & ~warm)
    sites = records["site"][access].astype(np.int64)
    own = np.where(sites < len(site_kinds), site_kinds[np.minimum(sites, len(site_kinds) - 1)],
                   0)
    own = np.where(own < len(out), own, 0)
    np.add.at(out, own, records["gap"][access].astype(np.int64) + 1)
    work = np.flatnonzero(marker & (flags == MARK_WORK) & ~warm)
    if work.size:
        value = records["addr"][work].astype(np.uint64)
        k = (value >> np.uint64(WORK_COUNT_BITS)).astype(np.int64)
        n = (value & np.uint64((1 << WORK_COUNT_BITS) - 1)).astype(np.int64)
        nxt = np.searchsorted(access, work)  # the access record each marker annotates
        ok = (nxt < access.size) & (k < len(out))
        np.add.at(out, k[ok], n[ok])
        np.add.at(out, own[nxt[ok]], -n[ok])
    return {name: int(out[i]) for i, name in enumerate(names)}
