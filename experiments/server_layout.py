"""Where a GET's memory lies in c_ref's server and in the real Valkey server.

The native GET of a big keyspace waits on a chain of dependent loads: the hashtable bucket,
the key's object (its key embedded), the value's sds. How many distinct cache lines and
4 KiB pages that chain touches, and which of them the batch prefetch covers, decides what a
miss costs without prefetch and what prefetching saves; on a guest with nested paging a page
walk costs as much as a DRAM line. This module reads the layout out of both running servers
after the load of ``kvsim native server`` (the same keys loaded the same way:
:func:`.valkey_server.populate`): it finds each server's bucket array (glibc's mmap'd chunk:
a mapping of a power-of-two bytes plus a page), walks every bucket (and its child buckets),
samples ``sample`` entries uniformly (a GET of ``redis-benchmark -r KEYS`` picks a key
uniformly), and reads each sampled key's object and value header from ``/proc/PID/mem``.

Both servers use Valkey's hashtable bucket (``hashtable.c`` ``bucket``: 1 chained bit, 7
presence bits, 7 hash bytes, 7 entry pointers) and an object whose bytes 8-15 are the value
pointer of a RAW string: Valkey 9.1's ``kvobj`` (``objectGetVal``: flags byte 4, bit 0
expire, bit 1 embedded key, bit 2 embedded value; the reference binary's disassembly) and
c_ref's ``robj`` (``c_ref/object.h``). Per sampled key, in the order a GET touches them
(``lookupKey`` -> ``hashtableFind`` -> ``getCommand``'s reply): the bucket's metadata and
entry slot (and every bucket of a chain before it), the objects of entries with the same
hash byte before it (a key compare each), the object's header and embedded key, the value's
header and bytes. Figures per GET: distinct lines and 4 KiB pages, the pages and lines
shared between the object and its value, and which of the lines the prefetch of
``memory_prefetch.c`` covers (``prefetchEntry`` -> the bucket, then the entry;
``prefetchValue`` -> the value's first byte: c_ref ``pipeline.c`` ``prefetchKeys`` issues
the same three), with the rest left to demand loads.

``python -m kvsim.experiments.server_layout --keys 3000000`` writes
``results/native-server-layout.json`` (provenance block: commit, machine, date, load; the
c_ref binary's SHA-256, and ``KVSIM_CREF_BIN`` when that named another build)."""

from __future__ import annotations

import os
import random
import statistics
import sys
from pathlib import Path
from typing import Any

from kvsim.experiments import progress
from kvsim.experiments import server as S
from kvsim.experiments.valkey_server import (
    ValkeyError,
    ValkeyServer,
    populate,
    server_binary,
)

RESULT_NAME = "native-server-layout.json"
LINE, PAGE, REGION = 64, 4096, 2 << 20
BUCKET = 64
ENTRIES_PER_BUCKET = 7
#: sds header bytes by type (flags & 7: sdshdr5, 8, 16, 32, 64), the byte before ``buf``.
SDS_HDR = {0: 1, 1: 3, 2: 5, 3: 9, 4: 17}
MIN_TABLE = 1 << 8


class Mem:
    """Reads of another process's memory (``/proc/PID/mem``; root or ptrace rights)."""

    def __init__(self, pid: int):
        self.pid = pid
        self.fd = os.open(f"/proc/{pid}/mem", os.O_RDONLY)

    def read(self, addr: int, n: int) -> bytes:
        b = os.pread(self.fd, n, addr)
        if len(b) != n:
            raise ValkeyError(f"pid {self.pid}: short read of {n} bytes at {addr:#x}")
        return b

    def word(self, addr: int) -> int:
        return int.from_bytes(self.read(addr, 8), "little")

    def close(self) -> None:
        os.close(self.fd)


def anon_mappings(pid: int) -> list[tuple[int, int, str]]:
    """``(start, end, name)`` of the process's private read-write mappings."""
    out = []
    for line in Path(f"/proc/{pid}/maps").read_text().splitlines():
        w = line.split()
        if w[1] != "rw-p":
            continue
        a, b = (int(x, 16) for x in w[0].split("-"))
        out.append((a, b, w[5] if len(w) > 5 else ""))
    return out


def bucket_arrays(pid: int) -> list[tuple[int, int]]:
    """``(address, buckets)`` of every bucket array of at least MIN_TABLE buckets: an
    anonymous mapping of ``2^k * 64`` bytes plus the page of glibc's mmap'd chunk header
    (the array starts 16 bytes in)."""
    out = []
    for a, b, name in anon_mappings(pid):
        size = b - a - PAGE
        if name or size < MIN_TABLE * BUCKET or size & (size - 1):
            continue
        out.append((a + 16, size // BUCKET))
    return out


def _bucket_fields(raw: bytes) -> tuple[int, int, list[int], list[int]]:
    meta = raw[0]
    return (meta & 1, meta >> 1, list(raw[1:8]),
            [int.from_bytes(raw[8 + 8 * i:16 + 8 * i], "little") for i in range(7)])


def walk_entries(mem: Mem, arrays: list[tuple[int, int]]) -> list[tuple[tuple[int, ...], int]]:
    """Every entry of the tables: ``(buckets, pos)``, ``buckets`` the chain of bucket
    addresses a find reads to reach it (the home bucket first), ``pos`` its slot in the
    last one."""
    out = []
    for base, n in arrays:
        step = 1 << 14
        for first in range(0, n, step):
            count = min(step, n - first)
            raw = mem.read(base + first * BUCKET, count * BUCKET)
            for i in range(count):
                b = raw[i * BUCKET:(i + 1) * BUCKET]
                if not any(b[:8]):
                    continue
                chain = (base + (first + i) * BUCKET,)
                while True:
                    chained, presence, _, entries = _bucket_fields(b)
                    for pos in range(ENTRIES_PER_BUCKET - chained):
                        if presence >> pos & 1:
                            out.append((chain, pos))
                    if not chained:
                        break
                    child = entries[ENTRIES_PER_BUCKET - 1]
                    b = mem.read(child, BUCKET)
                    chain = chain + (child,)
    return out


def _lines(a: int, n: int) -> set[int]:
    return set(range(a // LINE, (a + n - 1) // LINE + 1))


def object_extent(server: str, hdr: bytes) -> tuple[int, int, int]:
    """``(value_ptr, key_end, key_index)`` of an object's first 64 bytes: where its RAW
    value's sds buffer is, how many bytes of the object a key compare reads (header through
    the embedded key), and the key's number (``key:%012d``). ValkeyError if the value is
    embedded or the object not a string."""
    flags = hdr[4]
    if server == "valkey":
        hasexpire, hasembval = flags & 1, flags >> 2 & 1
    else:
        hasexpire, hasembval = flags & 1, 0
    if hdr[0] & 0xF != 0 or hdr[0] >> 4 != 0 or hasembval:
        raise ValkeyError(f"{server}: an entry is not a RAW string object")
    val = int.from_bytes(hdr[8:16], "little")
    p = 16 + (8 if hasexpire else 0)
    key_hdr = hdr[p]
    kflags = hdr[p + key_hdr]
    klen = kflags >> 3 if kflags & 7 == 0 else hdr[p + 1]
    key = hdr[p + 1 + key_hdr:p + 1 + key_hdr + klen]
    try:
        idx = int(key.split(b":")[1])
    except (IndexError, ValueError):
        idx = -1
    return val, p + 1 + key_hdr + klen, idx


def get_footprint(server: str, mem: Mem, chain: tuple[int, ...], pos: int,
                  value_size: int) -> dict[str, Any]:
    """The lines and pages one GET of this entry reads, in order, and which of them the
    three prefetches (bucket, entry, value) cover."""
    order: list[tuple[str, set[int]]] = []
    for i, b in enumerate(chain):
        last = i == len(chain) - 1
        slot = b + 8 + 8 * (pos if last else ENTRIES_PER_BUCKET - 1)
        order.append(("bucket", _lines(b, 8) | _lines(slot, 8)))
    raw = mem.read(chain[-1], BUCKET)
    _, presence, hashes, entries = _bucket_fields(raw)
    obj = entries[pos]
    for q in range(pos):  # an earlier entry with the same hash byte: its key is compared
        if presence >> q & 1 and hashes[q] == hashes[pos]:
            other = entries[q]
            order.append(("other_object", _lines(other, 24)))
    hdr = mem.read(obj, 64)
    val, key_end, idx = object_extent(server, hdr)
    order.append(("object", _lines(obj, key_end)))
    vtype = mem.read(val - 1, 1)[0] & 7
    vhdr = SDS_HDR.get(vtype, 1)
    order.append(("value", _lines(val - vhdr, vhdr + value_size)))
    prefetched = {chain[0] // LINE, obj // LINE, val // LINE}
    lines: set[int] = set()
    for _, s in order:
        lines |= s
    pages = {x * LINE // PAGE for x in lines}
    obj_pages = {x * LINE // PAGE for x in order[-2][1]}
    val_pages = {x * LINE // PAGE for x in order[-1][1]}
    return {"key": idx, "object": obj, "value": val,
            "lines": len(lines), "pages": len(pages),
            "regions": len({x * LINE // REGION for x in lines}),
            "buckets": len(chain),
            "object_value_same_page": bool(obj_pages & val_pages),
            "object_value_same_line": bool(order[-2][1] & order[-1][1]),
            "lines_not_prefetched": len(lines - prefetched),
            "pages_not_prefetched": len(pages - {x * LINE // PAGE for x in prefetched}),
            "value_minus_object": val - obj}


def _distance_bins(deltas: list[int]) -> dict[str, float]:
    """Shares of |value - object| distances: same line, same page, within 64 KiB, within
    2 MiB, farther."""
    n = len(deltas)
    bins = {"lt_64": 0, "lt_4k": 0, "lt_64k": 0, "lt_2m": 0, "far": 0}
    for d in deltas:
        d = abs(d)
        k = ("lt_64" if d < 64 else "lt_4k" if d < 4096 else "lt_64k" if d < 65536
             else "lt_2m" if d < 2 << 20 else "far")
        bins[k] += 1
    return {k: round(v / n, 4) for k, v in bins.items()}


def layout_of(server: str, pid: int, keys: int, value_size: int, sample: int,
              seed: int) -> dict[str, Any]:
    """The layout figures of one loaded server (module docstring)."""
    mem = Mem(pid)
    try:
        arrays = bucket_arrays(pid)
        if not arrays:
            raise ValkeyError(f"{server}: no bucket array found in /proc/{pid}/maps")
        entries = walk_entries(mem, arrays)
        if len(entries) != keys:
            raise ValkeyError(f"{server}: {len(entries):,} entries in the bucket arrays, "
                              f"{keys:,} keys loaded")
        rng = random.Random(seed)
        picked = rng.sample(entries, min(sample, len(entries)))
        rows = [get_footprint(server, mem, chain, pos, value_size) for chain, pos in picked]
        # Allocation order: the objects of consecutive keys (by key number).
        by_key = {r["key"]: r for r in rows}
        mem_order = sorted(rows, key=lambda r: r["key"])
        next_obj = [by_key[r["key"] + 1]["object"] - r["object"] for r in mem_order
                    if r["key"] + 1 in by_key]
    finally:
        mem.close()

    def mean(k: str) -> float:
        return round(statistics.fmean(float(r[k]) for r in rows), 4)
    return {"pid_maps_bucket_arrays": [[hex(a), n] for a, n in arrays],
            "entries": len(entries), "sampled": len(rows),
            "per_get": {k: mean(k) for k in ("lines", "pages", "regions", "buckets",
                                              "lines_not_prefetched",
                                              "pages_not_prefetched")},
            "object_value_same_page": mean("object_value_same_page"),
            "object_value_same_line": mean("object_value_same_line"),
            "value_minus_object_median": statistics.median(r["value_minus_object"]
                                                           for r in rows),
            "value_minus_object_bins": _distance_bins([r["value_minus_object"] for r in rows]),
            "next_key_object_delta_median": statistics.median(next_obj) if next_obj else None,
            "next_key_object_delta_bins": _distance_bins(next_obj) if next_obj else None,
            "examples": [{k: (hex(v) if k in ("object", "value") else v)
                          for k, v in r.items()} for r in mem_order[:8]]}


def run(keys: int, value_size: int, sample: int, seed: int, log=None) -> dict[str, Any]:
    """Both servers started as ``kvsim native server`` starts them, loaded with the same
    keys, then read (module docstring)."""
    from kvsim import artifacts, provenance

    vbinary, vsource = server_binary()
    cbinary = S.cref_binary()
    env = artifacts.ENV[artifacts.CREF_CLI]
    out: dict[str, Any] = {"keys": keys, "value_size": value_size, "sample": sample,
                           "seed": seed, "cref_server_args": S.CREF_SERVER_ARGS,
                           "cref_binary": {"from": env if os.environ.get(env) else "build",
                                           "sha256": provenance.file_sha256(cbinary)},
                           "valkey_server_source": vsource}
    for name in S.SERVERS:
        srv = (S.CrefServer() if name == "cref" else
               ValkeyServer(vbinary, extra={"io-threads": 1}))
        with srv:
            with srv.client() as c:
                populate(c, keys, value_size, seed)
                used = int(c.info("memory")["used_memory"])
            out[name] = {"used_memory_bytes": used,
                         **layout_of(name, srv.pid, keys, value_size, sample, seed)}
        if log:
            g = out[name]["per_get"]
            log(f"{name}: per GET {g['lines']:.2f} lines, {g['pages']:.2f} pages; object and "
                f"value on one page {out[name]['object_value_same_page']:.2f}")
    return out


def main(argv: list[str] | None = None) -> int:
    from kvsim import provenance

    prog = "python -m kvsim.experiments.server_layout"
    ap = S._Parser(prog=prog, description="The memory a GET touches in c_ref's server and "
                   "in the real Valkey server after the same load.")
    ap.add_argument("--keys", type=int, default=3_000_000)
    ap.add_argument("--value-size", type=int, default=256)
    ap.add_argument("--sample", type=int, default=100_000, help="keys read (100000)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=None, help=f"result file (results/{RESULT_NAME})")
    a = ap.parse_args(argv)
    if a.keys < 2 or a.sample < 1 or a.value_size < 64:
        ap.error("--keys must be >= 2, --sample >= 1, --value-size >= 64 (a RAW value)")
    out = provenance.out_path(a.out, RESULT_NAME)
    doc, status = S.run_or_status(prog, lambda: run(
        a.keys, a.value_size, a.sample, a.seed,
        log=progress.log_line))
    if status:
        return status
    return provenance.publish(prog, out, {"experiment": "native_server_layout", **doc})


if __name__ == "__main__":
    sys.exit(main())
