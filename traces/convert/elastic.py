"""gem5 elastic traces (TraceCPU's instruction-dependency records): write from kvsim records.

An elastic trace (Jagtap et al., "Exploring System Performance using Elastic Traces: Fast,
Accurate and Portable", SAMOS 2016) is what gem5's ``TraceCPU`` replays: a dependency graph
of loads, stores and compute nodes whose timing stretches with the memory system. It uses
gem5's packet-trace container (magic ``gem5``, then varint32-length-prefixed protobuf
messages, the whole file gzipped when the name ends in ``.gz``) with the messages of gem5's
``src/proto/inst_dep_record.proto`` (proto2, package ``ProtoMessage``):

* ``InstDepRecordHeader`` {1 obj_id string, 2 ver uint32 (optional), 3 tick_freq uint64,
  4 window_size uint32}
* ``InstDepRecord`` {1 seq_num uint64, 2 type enum RecordType {INVALID 0, LOAD 1, STORE 2,
  COMP 3}, 3 p_addr uint64, 4 size uint32, 5 flags uint32, 6 rob_dep repeated uint64,
  7 comp_delay uint64, 8 reg_dep repeated uint64, 9 weight uint32, 10 pc uint64,
  11 v_addr uint64, 12 asid uint32}

The message classes are built at run time from a descriptor equal to those definitions
(:func:`message_classes`; the ``protobuf`` package, no ``protoc``), and every message is
serialised by protobuf itself; only the container's length prefixes are written here.

Mapping (:func:`records_to_elastic`), one node per load or store record:

* ``seq_num``: the record's instruction number, counting from 1 every ``gap`` instruction
  and one per memory record, as gem5 numbers committed instructions.
* ``type``: LOAD or STORE; ``p_addr`` the address, ``size`` the size; ``pc`` the site's
  stand-in address (``0x400000 + 4 * site``, as the ChampSim and lackey exporters use).
* ``reg_dep``: the ``seq_num`` of the load a record's ``dep`` names (the loaded value
  produced this address), kept when that load is among the last :data:`HISTORY` records.
* ``weight``: ``gap``, the non-memory instructions folded into this node, which TraceCPU
  counts towards ROB occupancy (gem5's ``ElasticTrace`` probe sets it the same way for the
  compute nodes it filters out); absent when 0.
* ``comp_delay``: ``gap * ticks_per_instruction``: the gap's instructions executed at one
  per cycle before the access can issue (ticks; 250 = 4 GHz with 1 ps ticks).
* Not written: ``rob_dep`` (kvt records no order dependencies), ``flags``, ``v_addr``,
  ``asid``. Prefetches and markers are dropped (their gap carries over to the next node).

TraceCPU also needs an instruction fetch trace (``instTraceFile``): :func:`records_to_elastic`
writes one beside the dependency trace, named with ``fetchtrace`` for ``deptrace`` (gem5's
``ElasticTrace`` probe's default names are ``deptrace.proto.gz`` and
``fetchtrace.proto.gz``): a gem5 packet trace with one 4-byte ``ReadReq`` per node at its
``pc``, ticked by instruction number.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from functools import lru_cache
from pathlib import Path
from typing import IO, Any

import numpy as np

from ..format import KIND_LOAD, KIND_MARKER, KIND_STORE, RECORD_DTYPE
from .gem5 import MAGIC, _read_varint, _varint

__all__ = ["HISTORY", "WINDOW_SIZE", "fetch_path", "message_classes", "read_elastic",
           "records_to_elastic"]

HISTORY = 1 << 16  #: records back that a ``dep`` may reach and still become a ``reg_dep``
WINDOW_SIZE = 3000  #: header ``window_size``: gem5's ``ElasticTrace.depWindowSize`` default
TYPE_LOAD, TYPE_STORE = 1, 2
SITE_PC_BASE = 0x400000


@lru_cache(maxsize=1)
def message_classes() -> tuple[type, type]:
    """(InstDepRecordHeader, InstDepRecord) from gem5's ``inst_dep_record.proto``."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    fd = descriptor_pb2.FieldDescriptorProto
    f = descriptor_pb2.FileDescriptorProto(name="kvsim_gem5_inst_dep_record.proto",
                                           package="ProtoMessage", syntax="proto2")
    req, opt, rep = fd.LABEL_REQUIRED, fd.LABEL_OPTIONAL, fd.LABEL_REPEATED
    u32, u64, s, e = fd.TYPE_UINT32, fd.TYPE_UINT64, fd.TYPE_STRING, fd.TYPE_ENUM
    h = f.message_type.add(name="InstDepRecordHeader")
    for name, num, typ, label in (("obj_id", 1, s, req), ("ver", 2, u32, opt),
                                  ("tick_freq", 3, u64, req), ("window_size", 4, u32, req)):
        fld = h.field.add(name=name, number=num, type=typ, label=label)
        if name == "ver":
            fld.default_value = "0"
    r = f.message_type.add(name="InstDepRecord")
    enum = r.enum_type.add(name="RecordType")
    for name, num in (("INVALID", 0), ("LOAD", 1), ("STORE", 2), ("COMP", 3)):
        enum.value.add(name=name, number=num)
    for name, num, typ, label in (
            ("seq_num", 1, u64, req), ("type", 2, e, req), ("p_addr", 3, u64, opt),
            ("size", 4, u32, opt), ("flags", 5, u32, opt), ("rob_dep", 6, u64, rep),
            ("comp_delay", 7, u64, req), ("reg_dep", 8, u64, rep), ("weight", 9, u32, opt),
            ("pc", 10, u64, opt), ("v_addr", 11, u64, opt), ("asid", 12, u32, opt)):
        fld = r.field.add(name=name, number=num, type=typ, label=label)
        if typ == e:
            fld.type_name = ".ProtoMessage.InstDepRecord.RecordType"
            fld.default_value = "INVALID"
    pool = descriptor_pool.DescriptorPool()
    fdesc = pool.Add(f)
    return (message_factory.GetMessageClass(fdesc.message_types_by_name["InstDepRecordHeader"]),
            message_factory.GetMessageClass(fdesc.message_types_by_name["InstDepRecord"]))


def fetch_path(dep_path: str | os.PathLike[str]) -> Path:
    """The fetch trace written beside ``dep_path``: ``deptrace`` in its name becomes
    ``fetchtrace`` (or ``.fetch`` is put before the endings when the name lacks it)."""
    p = Path(dep_path)
    if "deptrace" in p.name:
        return p.with_name(p.name.replace("deptrace", "fetchtrace", 1))
    stem, dot, rest = p.name.partition(".")
    return p.with_name(f"{stem}.fetch{dot}{rest}" if dot else f"{stem}.fetch")


def _frame(body: bytes) -> bytes:
    return _varint(len(body)) + body


def _nodes(chunks: Iterable[np.ndarray], ticks_per_instruction: int, stats: dict[str, int]
           ) -> Iterator[tuple[bytes, np.ndarray]]:
    """(framed InstDepRecord messages, the nodes' (seq_num, pc) columns) per chunk."""
    _, rec_cls = message_classes()
    instr = 0  # instructions numbered so far
    pending = 0  # gap of dropped records, carried to the next node
    hist = np.zeros(0, dtype=np.int64)  # seq_num of the last HISTORY records (0: not a load)
    base = 0  # global index of the chunk's first record
    for chunk in chunks:
        if chunk.dtype != RECORD_DTYPE:
            raise TypeError("records must have dtype traces.RECORD_DTYPE")
        n = chunk.size
        kind = chunk["kind"]
        gap = chunk["gap"].astype(np.int64)
        is_mem = kind < KIND_MARKER
        seq = instr + np.cumsum(gap) + np.cumsum(is_mem)  # 1-based at memory records
        instr = int(seq[-1]) if n else instr
        node = (kind == KIND_LOAD) | (kind == KIND_STORE)
        # gap folded into each node: its own plus those of dropped records since the last
        folded = np.cumsum(gap + (is_mem & ~node)) + pending
        idx = np.flatnonzero(node)
        prev = np.concatenate([[0], folded[idx[:-1]]]) if idx.size else np.zeros(0, np.int64)
        weight = folded[idx] - prev
        if idx.size:
            weight[0] = folded[idx[0]]
            pending = int(folded[-1] - folded[idx[-1]])
        else:
            pending = int(folded[-1]) if n else pending
        loads_seq = np.where(kind == KIND_LOAD, seq, 0)
        window = np.concatenate([hist, loads_seq])
        dep = chunk["dep"].astype(np.int64)
        at = hist.size + np.arange(n) - dep  # position of the named load in ``window``
        ok = (dep > 0) & (at >= 0)
        dep_seq = np.where(ok, window[np.clip(at, 0, max(window.size - 1, 0))], 0)
        hist = window[-HISTORY:]
        base += n
        pc = SITE_PC_BASE + 4 * chunk["site"].astype(np.uint64)
        parts = []
        msg = rec_cls()
        for i, w in zip(idx.tolist(), weight.tolist(), strict=True):
            msg.Clear()
            msg.seq_num = int(seq[i])
            msg.type = TYPE_LOAD if kind[i] == KIND_LOAD else TYPE_STORE
            msg.p_addr = int(chunk["addr"][i])
            msg.size = int(chunk["size"][i])
            msg.pc = int(pc[i])
            msg.comp_delay = w * ticks_per_instruction
            if w:
                msg.weight = min(w, 2**32 - 1)
            if dep_seq[i]:
                msg.reg_dep.append(int(dep_seq[i]))
            parts.append(_frame(msg.SerializeToString()))
        stats["nodes"] += idx.size
        stats["loads"] += int((kind[idx] == KIND_LOAD).sum())
        stats["stores"] += int((kind[idx] == KIND_STORE).sum())
        stats["reg_deps"] += int((dep_seq[idx] > 0).sum())
        stats["deps_lost"] += int(((dep[idx] > 0) & (dep_seq[idx] == 0)).sum())
        yield b"".join(parts), np.stack([seq[idx], pc[idx].astype(np.int64)], axis=1)


def records_to_elastic(records: np.ndarray | Iterable[np.ndarray],
                       dst: str | os.PathLike[str], obj_id: str = "kvsim trace",
                       tick_freq: int = 10**12, ticks_per_instruction: int = 250,
                       window_size: int = WINDOW_SIZE, fetch: bool = True) -> dict[str, int]:
    """Write ``records`` as an elastic dependency trace at ``dst`` (gzip iff it ends in
    ``.gz``) and, with ``fetch``, the fetch trace at :func:`fetch_path` ``(dst)``. Both are
    written via temporary files and renamed when complete. Returns counts: ``nodes``,
    ``loads``, ``stores``, ``reg_deps``, ``deps_lost`` (a dep further back than
    :data:`HISTORY` records)."""
    from ._io import compression_of, open_output
    from .gem5 import CMD_READ_REQ, encode, encode_packet_columns

    hdr_cls, _ = message_classes()
    chunks = [records] if isinstance(records, np.ndarray) else records
    stats = {"nodes": 0, "loads": 0, "stores": 0, "reg_deps": 0, "deps_lost": 0}
    dst = Path(dst)
    targets = [dst] + ([fetch_path(dst)] if fetch else [])
    tmps = [t.with_name(f".{t.name}.tmp-{os.getpid()}") for t in targets]
    files: list[Any] = []
    try:
        for tmp in tmps:
            raw = open(tmp, "wb")  # noqa: SIM115 -- closed below
            files.append((raw, open_output(raw, compression_of(tmp.name))))
        h = hdr_cls(obj_id=obj_id, tick_freq=tick_freq, window_size=window_size)
        files[0][1].write(MAGIC + _frame(h.SerializeToString()))
        if fetch:
            files[1][1].write(encode({"obj_id": f"{obj_id} fetch", "tick_freq": tick_freq},
                                     []))
        for body, nodes in _nodes(chunks, ticks_per_instruction, stats):
            files[0][1].write(body)
            if fetch and nodes.size:
                cols = {"tick": (nodes[:, 0] * ticks_per_instruction).astype(np.uint64),
                        "cmd": np.full(nodes.shape[0], CMD_READ_REQ, dtype=np.uint64),
                        "addr": nodes[:, 1].astype(np.uint64),
                        "size": np.full(nodes.shape[0], 4, dtype=np.uint64)}
                files[1][1].write(encode_packet_columns(cols))
        for raw, out in files:
            if out is not raw:
                out.close()
            raw.close()
        for tmp, t in zip(tmps, targets, strict=True):
            os.replace(tmp, t)
    finally:
        for raw, out in files:
            if not raw.closed:
                try:
                    if out is not raw:
                        out.close()
                finally:
                    raw.close()
        for tmp in tmps:
            tmp.unlink(missing_ok=True)
    return stats


def read_elastic(src: str | os.PathLike[str] | IO[bytes]
                 ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Decode an elastic dependency trace (gzip by content) into (header, records) dicts
    with gem5's message definitions; every field present in a message is returned."""
    from ._io import open_input

    hdr_cls, rec_cls = message_classes()
    with open_input(src) as f:
        data = f.read()
    if data[:4] != MAGIC:
        raise ValueError(f"{src}: byte 0: bad magic {data[:4]!r} (expected b'gem5')")
    pos, out, header = 4, [], None
    while pos < len(data):
        ln, pos = _read_varint(data, pos, len(data))
        m = (hdr_cls if header is None else rec_cls)()
        m.ParseFromString(data[pos:pos + ln])
        pos += ln
        d = {fd.name: (v if isinstance(v, int | str) else list(v))
             for fd, v in m.ListFields()}
        if header is None:
            header = d
        else:
            out.append(d)
    if header is None:
        raise ValueError(f"{src}: no InstDepRecordHeader")
    return header, out


def convert_write(chunks: Iterable[np.ndarray], header: dict[str, Any], out: str,
                  opts: Any) -> int:
    """The converters' table writer (a ``writes_path`` format: the dependency trace at
    ``out`` and the fetch trace beside it); returns the nodes written."""
    if out == "-":
        raise ValueError("an elastic trace is two files (dependency and fetch traces): "
                         "give a file name, not -")
    tpi = round(10**12 / (opts.freq_ghz * 1e9)) or 1
    return records_to_elastic(chunks, out, ticks_per_instruction=tpi)["nodes"]
