"""Write the seed corpora, ``fuzz/corpus/<target>/seed-*``, from kvsim itself.

Run from the repository root with the venv's Python after ``make build``:
``.venv/bin/python fuzz/make_seeds.py``. The output is deterministic (fixed records, fixed
c_ref keyspaces), so re-running it rewrites the committed files unchanged. Other files in a
corpus folder (``crash-*``: inputs that once broke a target, kept as regression tests) are
left alone.
"""

from __future__ import annotations

import io
import struct
import sys
from pathlib import Path

import numpy as np

from kvsim import traces
from kvsim.model.cref_binding import Keyspace
from kvsim.traces.convert import champsim, dinero, gem5, lackey

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "fuzz" / "corpus"
L, S, P, M = traces.KIND_LOAD, traces.KIND_STORE, traces.KIND_PREFETCH, traces.KIND_MARKER


def sample_records() -> np.ndarray:
    """A small trace using every kind, marker type, dep, multi-line and large accesses."""
    rows = [  # kind, addr, size, dep, tag, site, flags, gap
        (M, 0, 0, 0, 0, 0, traces.MARK_WARMUP_BEGIN, 0),
        (L, 0x1000, 8, 0, traces.TAG_BUCKET, 1, 0, 3),
        (L, 0x2040, 16, 1, traces.TAG_KEY, 2, 0, 0),
        (M, 0, 0, 0, 0, 0, traces.MARK_WARMUP_END, 0),
        (M, 7, 0, 0, 0, 0, traces.MARK_COMMAND, 0),
        (S, 0x203C, 8, 0, traces.TAG_VALUE, 3, 0, 1),
        (P, 0x8000, 1, 0, traces.TAG_DICT_ENTRY, 4, 0, 0),
        (L, 0x8000, 200, 0, traces.TAG_OBJECT, 5, 0, 2),
        (L, 0x1000, 8, 1, traces.TAG_BUCKET, 1, 0, 0),
        (M, 1, 0, 0, 0, 0, traces.MARK_PHASE, 0),
        (S, 0xFFFF_FFFF_FFFF_FFC0, 64, 2, traces.TAG_STACK, 6, 0, 0),
        (L, 0x40_0000, 4096, 0, traces.TAG_SNAPSHOT_BUF, 7, 0, 9),
        (M, 3, 0, 0, 0, 0, traces.MARK_BATCH, 0),
        (M, 4, 0, 0, 0, 0, traces.MARK_OP, 0),
    ]
    r = np.zeros(len(rows), dtype=traces.RECORD_DTYPE)
    for i, (kind, addr, size, dep, tag, site, flags, gap) in enumerate(rows):
        r[i] = 0
        r["kind"][i], r["addr"][i], r["size"][i], r["dep"][i] = kind, addr, size, dep
        r["tag"][i], r["site"][i], r["flags"][i], r["gap"][i] = tag, site, flags, gap
    return r


HEADER = {"workload": {"name": "fuzz seed"}, "tags": traces.TAG_NAMES,
          "markers": traces.MARKER_NAMES, "sites": [f"s{i}" for i in range(8)]}


def kvt(records: np.ndarray, header: dict, codec: str, chunk: int) -> bytes:
    out = io.BytesIO()
    with traces.Writer(out, header, codec=codec, chunk_records=chunk) as w:
        w.write(records)
    return out.getvalue()


def toml_seed(path: Path) -> bytes:
    """A CPU file without its comment lines (only what the loader reads)."""
    lines = path.read_bytes().splitlines(keepends=True)
    return b"".join(ln for ln in lines if not ln.lstrip().startswith(b"#"))


def resp(*args: bytes) -> bytes:
    return b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in args)


def drmemtrace_seed() -> bytes:
    """One thread of ``trace_entry_t`` (type u16, size u16, addr u64; DynamoRIO
    ``clients/drcachesim/common/trace_entry.h``): HEADER (version 6), THREAD, instructions,
    a load, a store, a data prefetch, FOOTER."""
    entries = [(25, 0, 6), (22, 4, 7), (10, 3, 0x400000), (10, 2, 0x400003), (0, 8, 0x1000),
               (10, 4, 0x400005), (1, 4, 0x1040), (2, 1, 0x1080), (26, 0, 0)]
    return b"".join(struct.pack("<HHQ", t, size, addr) for t, size, addr in entries)


def seeds() -> dict[str, dict[str, bytes]]:
    rec = sample_records()
    text = io.StringIO()
    dinero.records_to_din(rec, text)
    lk = io.StringIO()
    lackey.records_to_lackey(rec, lk, instructions=True)
    cs = io.BytesIO()
    champsim.records_to_champsim(rec, cs)
    g5 = io.BytesIO()
    gem5.records_to_gem5(rec, g5, compress=False)
    data = ROOT / "traces" / "tests" / "data"
    presets = ROOT / "sim" / "presets"
    out: dict[str, dict[str, bytes]] = {
        "trace_reader": {
            "seed-zstd": kvt(rec, HEADER, "zstd", 1024),
            "seed-raw-chunks": kvt(rec, HEADER, "raw", 4),
            "seed-no-tables": kvt(rec[rec["kind"] != M], {}, "raw", 1024),
            "seed-empty": kvt(rec[:0], {}, "raw", 16),
        },
        "trace_records": {
            "seed-all-tables": bytes([0xFF]) + rec.tobytes(),
            "seed-no-tables": bytes([0x30]) + rec.tobytes(),
        },
        "dinero_reader": {
            "seed-records": text.getvalue().encode(),
            "seed-mixed": (data / "small_mixed_trace.din").read_bytes()[:2000],
        },
        "lackey_reader": {
            "seed-records": b"==1== lackey\n" + lk.getvalue().encode(),
        },
        "gem5_reader": {
            "seed-records": g5.getvalue(),
            "seed-sample": (data / "gem5_packet_trace.trc").read_bytes(),
            "seed-sample-gz": (data / "gem5_packet_trace.trc.gz").read_bytes(),
        },
        "champsim_reader": {"seed-records": cs.getvalue()[: 64 * 16]},
        "champsim_import": {"seed-records": cs.getvalue()[: 64 * 16]},
        "drmemtrace_reader": {"seed-thread": drmemtrace_seed()},
        "cpu_toml": {
            "seed-graviton3": toml_seed(presets / "graviton3.toml"),
            "seed-xeon-8488c": toml_seed(presets / "xeon-8488c.toml"),
            "seed-dinero-small": toml_seed(ROOT / "sim" / "tests" / "data" / "dinero_small.toml"),
        },
    }
    # c_ref: byte 0 selects options/variants (see each fuzz/c/fuzz_cref_*.c)
    cmds = (resp(b"SET", b"k1", b"v1") + resp(b"MSET", b"a", b"1", b"b", b"2")
            + resp(b"GET", b"k1") + resp(b"MGET", b"a", b"b", b"zz")
            + resp(b"SET", b"k2", b"x" * 100, b"PX", b"50") + resp(b"DEL", b"a")
            + resp(b"EXISTS", b"b") + resp(b"KEYS", b"*") + resp(b"SCAN", b"0")
            + resp(b"DBSIZE") + b"PING\r\nSET inline \"q\\x41\"\r\n")
    # the hash and sorted-set commands, ZADD's flags, ZMSCORE past 16 members and TOUCH
    types = (resp(b"HSET", b"h", b"f", b"v", b"g", b"w") + resp(b"HMGET", b"h", b"f", b"x")
             + resp(b"ZADD", b"z", *[x for i in range(140) for x in (b"%d" % i, b"m%d" % i)])
             + resp(b"ZADD", b"z", b"NX", b"CH", b"1", b"a", b"2", b"m1")
             + resp(b"ZADD", b"z", b"XX", b"GT", b"INCR", b"inf", b"m2")
             + resp(b"ZADD", b"z", b"LT", b"INCR", b"-inf", b"m2")
             + resp(b"ZADD", b"z", b"NX", b"XX", b"1", b"a")
             + resp(b"ZMSCORE", b"z", *[b"m%d" % i for i in range(0, 40, 2)], b"zz")
             + resp(b"ZSCORE", b"z", b"a") + resp(b"ZREM", b"z", b"a", b"m3")
             + resp(b"TOUCH", b"h", b"z", b"k1", b"nokey") + resp(b"ZMSCORE", b"h", b"f"))
    out["cref_resp"] = {"seed-commands": b"\x00" + cmds, "seed-lookahead": b"\x25" + cmds,
                        "seed-partial": b"\x86" + cmds + b"*2\r\n$3\r\nGET\r\n$2\r\nk",
                        "seed-types": b"\x08" + cmds + types}
    # cref_server: byte 0 options/variants/batch, byte 1 the read size (0: whole)
    srv_cmds = (cmds + resp(b"CONFIG", b"GET", b"save") + resp(b"CONFIG", b"SET",
                b"prefetch-batch-max-size", b"0") + resp(b"INFO", b"commandstats")
                + resp(b"SAVE") + resp(b"DEBUG", b"RELOAD") + resp(b"MGET", b"k1", b"b")
                + resp(b"PING", b"x") + resp(b"FLUSHALL"))
    out["cref_server"] = {"seed-whole": b"\x00\x00" + srv_cmds,
                          "seed-reads": b"\x85\x07" + srv_cmds,
                          "seed-error": b"\x40\x03" + srv_cmds + b"*1\r\n$x\r\n"}
    snaps = {}
    for sel, opts in ((0, "rdbchecksum=no"), (1, "rdbchecksum=no table=dict"),
                      (2, "rdbchecksum=no cluster=1")):
        with Keyspace(opts) as ks:
            ks.execute(cmds[:-len(b"PING\r\nSET inline \"q\\x41\"\r\n")])
            ks.execute(resp(b"SET", b"big", b"y" * 300) + resp(b"SET", b"e", b"1", b"EX", b"9"))
            snaps[f"seed-snapshot-{sel}"] = bytes([sel]) + ks.save_snapshot()
    out["cref_snapshot"] = snaps
    out["cref_options"] = {
        "seed-options": b"\x02table=dict layout=legacy cluster=1 seed=7\0"
                        b"pipeline=lookahead batch=8 multikey=batch\0keys=1000\0"
                        b"variant=lookahead\0value-size=64\0cluster",
        "seed-defaults": b"\x00\0\0keys=10\0ops=20\0get-ratio=0.5",
    }
    cfgs = (b"\x00\x00\x00\x00\x00\x10\x00\x00\x07",  # 1 level, lru, functional
            b"\x02\x09\x2a\x4f\x05\x20\x09\x9d\x03",  # 3 levels, timing, prefetchers, TLB
            b"\x01\x15\x33\x00\x46\x44\x38\x00\x05",  # inclusive, TLB + STLB
            b"\x02\x01\x02\x03\x00\x08\x10\x00\x0b")  # common config, 2 threads
    raw = rec.tobytes()
    out["engine_records"] = {f"seed-config-{i}": c + raw for i, c in enumerate(cfgs)}
    return out


def main() -> int:
    for target, files in seeds().items():
        d = CORPUS / target
        d.mkdir(parents=True, exist_ok=True)
        for name, data in files.items():
            (d / name).write_bytes(data)
    n = sum(len(f) for f in seeds().values())
    print(f"make_seeds: {n} seed files under {CORPUS.relative_to(ROOT)}/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
