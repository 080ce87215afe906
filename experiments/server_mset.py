"""MSET's user-space time, timed by the clock alone and predicted, factor by factor (issue 43).

The server study's native user time per MSET of 10 keys (``server_split``) is the process's
CPU time split by scheduler ticks, which overstate user time between round trips with a peer
(``kvsim-calibrate sysbias``). This module times MSET's request code with no tick in the way:
``kvsim-cref serverloop --command mset`` (c_ref/serverloop.c) feeds MSETs to the server's own
entry point between read() and write() (ksServerSessionFeed: the query buffer, the parse, the
dispatch, call(), the keyspace's lookups, the value swap and the old values' free, the reply)
and times each feed by the vDSO clock, hot and after a loopback write + read. Each plan entry
changes one factor against the study's cell (MSET of 10 keys of 256 B over 100,000 keys):

- ``keys`` 1,000: the same work with the keyspace in the caches (no last-level misses);
- ``value_size`` 16: small values (the copies and the allocator's large bins out of it);
- ``mset_keys`` 1: MSET of one key (the per-command part against the per-key part);
- GET at depth 10 over the same keys: a request the study predicts within the band;
- ``batch`` 16 (the study's side b, prefetch-batch-max-size 16) beside the cell and GET: the
  keys' buckets, entries and values prefetched together (:data:`BATCH_PAIRS`, the speedup).

The same loop traced (the ``none`` arm's requests) and simulated on ``--cpu`` gives the
predicted ns per request, its instructions by kind of work and its last-level misses; the
ratio predicted / native after the calls is the model's error on that code, entry by entry.

``python -m kvsim.experiments.server_mset --native-only -o NATIVE`` measures (run it through
the quiet window); ``python -m kvsim.experiments.server_mset --native NATIVE --cpu CPU
[-o results/server-mset.json]`` traces, simulates and writes the result (provenance of both).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

RESULT_NAME = "server-mset.json"
ARMS = ("none", "loopback")
#: (label, serverloop options): the study's cell, then one factor changed per entry
PLAN: tuple[tuple[str, dict[str, Any]], ...] = (
    ("mset-10", {"command": "mset", "mset_keys": 10, "keys": 100_000, "value_size": 256}),
    ("mset-10 batch 16", {"command": "mset", "mset_keys": 10, "keys": 100_000,
                          "value_size": 256, "batch": 16}),
    ("mset-10 hot keys", {"command": "mset", "mset_keys": 10, "keys": 1000, "value_size": 256}),
    ("mset-10 16 B values", {"command": "mset", "mset_keys": 10, "keys": 100_000,
                             "value_size": 16}),
    ("mset-1", {"command": "mset", "mset_keys": 1, "keys": 100_000, "value_size": 256}),
    ("get-p10", {"command": "get", "depth": 10, "keys": 100_000, "value_size": 256}),
    ("get-p10 batch 16", {"command": "get", "depth": 10, "keys": 100_000, "value_size": 256,
                          "batch": 16}),
)
#: (without, with prefetching): the pairs whose speedup is reported (:func:`speedups`)
BATCH_PAIRS = (("mset-10", "mset-10 batch 16"), ("get-p10", "get-p10 batch 16"))
#: timed feeds per arm and round natively; measured feeds of the trace (requests: x depth)
ITERS = 20_000
TRACE_ITERS = 2000
#: MSETs of each in-situ run of the real server
INSITU_REQUESTS = 50_000
#: feeds per arm of the shorter of callgrind's two runs, and the keys they fill (native_counts)
CG_ITERS = 2000
CG_KEYS = 1000


def _cref(*args: object) -> str:
    from kvsim import artifacts

    exe = artifacts.path(artifacts.CREF_CLI)
    return subprocess.run([str(exe), *map(str, args)], capture_output=True, text=True,
                          check=True).stdout


def _args(opts: dict[str, Any], iters: int) -> list[object]:
    out: list[object] = ["--iters", iters]
    for k, v in opts.items():
        out += [f"--{k.replace('_', '-')}", v]
    return out


def _depth(opts: dict[str, Any]) -> int:
    return int(opts.get("depth", 1))


def measure(rounds: int, iters: int, log=lambda m: None) -> list[dict]:
    """``rounds`` serverloop runs of every :data:`PLAN` entry, interleaved (the order
    reversed every other round), three rounds of both arms each."""
    runs = []
    for r in range(rounds):
        for label, opts in PLAN if r % 2 == 0 else PLAN[::-1]:
            log(f"round {r + 1}/{rounds}: {label}")
            out = json.loads(_cref("serverloop", *_args(opts, iters), "--rounds", 3))
            runs.append({**out, "label": label, "round": r})
    return runs


def _cmdstat(client, op: str) -> tuple[int, int]:
    """(calls, usec) of ``op`` in the server's INFO commandstats."""
    line = client.info("commandstats").get(f"cmdstat_{op}", "")
    fields = dict(kv.split("=", 1) for kv in line.split(",") if "=" in kv)
    return int(fields.get("calls", 0)), int(fields.get("usec", 0))


def _proc(pid: int) -> tuple[int, int, int]:
    """(CPU ns from schedstat, user ticks, system ticks) of process ``pid``."""
    cpu = int(Path(f"/proc/{pid}/schedstat").read_text().split()[0])
    f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return cpu, int(f[11]), int(f[12])


def insitu(rounds: int, requests: int, log=lambda m: None) -> list[dict]:
    """c_ref's server (``kvsim-cref serve``, pinned apart from its client) loaded with the
    study's cell (MSET of 10 keys of 256 B over 100,000 keys, 50 clients) and run ``rounds``
    times, each run between two serverloop runs of the same MSETs: per run the command's own
    time as call() takes it (INFO commandstats usec over calls), the server's CPU time per
    request (schedstat) and its tick split (/proc/PID/stat)."""
    from kvsim.experiments import server as S
    from kvsim.experiments import valkey
    from kvsim.experiments.valkey_server import benchmark_binary, pick_cpus, populate

    spec = valkey.normalize_spec({**S.parse_cell("mset-10"), "keys": PLAN[0][1]["keys"],
                                  "value_size": PLAN[0][1]["value_size"],
                                  "requests": requests})
    bench, (server_cpu, client_cpu) = benchmark_binary(), pick_cpus()
    out = []
    with S.CrefServer(cpu=server_cpu) as srv:
        with srv.client() as c:
            populate(c, spec["keys"], spec["value_size"], spec["seed"])
            c.config_set("prefetch-batch-max-size", 0)
        valkey._bench_once(bench, srv.port, {**spec, "requests": requests // 4}, client_cpu)
        for r in range(rounds):
            log(f"in situ {r + 1}/{rounds}")
            loop = json.loads(_cref("serverloop", *_args(PLAN[0][1], ITERS), "--rounds", 1))
            with srv.client() as c:
                c0, u0 = _cmdstat(c, "mset")
            p0 = _proc(srv.proc.pid)
            valkey._bench_once(bench, srv.port, spec, client_cpu)
            p1 = _proc(srv.proc.pid)
            with srv.client() as c:
                c1, u1 = _cmdstat(c, "mset")
            ticks = (p1[1] - p0[1]) + (p1[2] - p0[2])
            cpu = (p1[0] - p0[0]) / (c1 - c0)
            out.append({"round": r, "calls": c1 - c0, "usec_per_call": (u1 - u0) / (c1 - c0),
                        "cpu_ns": cpu, "ticks": ticks,
                        "user_ns": cpu * (p1[1] - p0[1]) / ticks if ticks else None,
                        "loop": loop})
    return out


def summarize(runs: list[dict]) -> list[dict]:
    """Per :data:`PLAN` entry and arm: ns per request less the clock's cost (median, 95 %
    interval, minimum over every round of every run)."""
    from kvsim.stats import median_ci95

    out = []
    for label, opts in PLAN:
        mine = [r for r in runs if r["label"] == label]
        row: dict[str, Any] = {"label": label, "options": opts}
        for arm in ARMS:
            xs = sorted((s - c) / _depth(opts) for r in mine for s, c in
                        zip(r[f"{arm}_segment_ns"], r[f"{arm}_clock_ns"], strict=True))
            ci = median_ci95(xs)
            row[arm] = {"median": statistics.median(xs),
                        "ci95": list(ci[:2]) if ci else None, "min": xs[0], "n": len(xs)}
        out.append(row)
    return out


def speedups(runs: list[dict], traced_rows: list[dict] | None = None) -> list[dict]:
    """Per :data:`BATCH_PAIRS` pair, after the calls (the loopback arm): the native speedup
    (ns per request without over with prefetching) of each round's runs, paired round by
    round (median, 95 % interval, minimum) and, with ``traced_rows``, the predicted one."""
    from kvsim.stats import median_ci95

    ns = {t["label"]: t["ns"] for t in traced_rows or []}
    out = []
    for a, b in BATCH_PAIRS:
        xs = []
        for r in sorted({x["round"] for x in runs if x["label"] == a}):
            ra, rb = ([x for x in runs if x["label"] == lab and x["round"] == r]
                      for lab in (a, b))
            for x, y in zip(ra, rb, strict=True):
                xs += [(sa - ca) / (sb - cb) for sa, ca, sb, cb in
                       zip(x["loopback_segment_ns"], x["loopback_clock_ns"],
                           y["loopback_segment_ns"], y["loopback_clock_ns"], strict=True)]
        xs.sort()
        ci = median_ci95(xs)
        row = {"without": a, "with": b, "native": {
            "median": statistics.median(xs), "ci95": list(ci[:2]) if ci else None,
            "min": xs[0], "n": len(xs)}}
        if a in ns and b in ns:
            row["predicted"] = ns[a] / ns[b]
        out.append(row)
    return out


def native_counts(opts: dict[str, Any], tmp: Path) -> dict[str, float]:
    """Callgrind's counts per request of the loop's request code natively (the native
    ``kvsim-cref``, ``--toggle-collect=ksServerSessionFeed``, its cache simulation): two runs
    of :data:`CG_ITERS` and twice as many feeds, the difference over the feeds between them
    (the fill's feeds cancel), over :data:`CG_KEYS` keys (what a request executes does not
    depend on how many keys there are; a fill of 100,000 keys under callgrind takes minutes).
    Instructions (Ir), data reads (Dr) and writes (Dw: every store, the work's included)."""
    from kvsim import artifacts
    from kvsim.experiments import callgrind

    totals = []
    for iters in (CG_ITERS, 2 * CG_ITERS):
        out = tmp / f"cg-{iters}.out"
        subprocess.run(["valgrind", "--tool=callgrind", "--cache-sim=yes",
                        "--toggle-collect=ksServerSessionFeed",
                        f"--callgrind-out-file={out}", str(artifacts.path(artifacts.CREF_CLI)),
                        "serverloop", *map(str, _args({**opts, "keys": CG_KEYS}, iters)),
                        "--rounds", "1"],
                       capture_output=True, text=True, check=True)
        totals.append(callgrind.read(out).totals)
        out.unlink()
    feeds = 2 * ((2 * CG_ITERS + 2 * CG_ITERS // 8) - (CG_ITERS + CG_ITERS // 8))
    n = feeds * _depth(opts)
    return {e: (totals[1].get(e, 0) - totals[0].get(e, 0)) / n
            for e in ("Ir", "Dr", "Dw")}


def traced(tmp: Path, cpu: str, iters: int, store_buffer: int | None = None,
           log=lambda m: None) -> list[dict]:
    """Per :data:`PLAN` entry: the traced loop's instructions per request by kind, its
    last-level misses per request and its predicted ns per request on ``cpu``. With
    ``store_buffer`` (the core's entries) also callgrind's native counts
    (:func:`native_counts`) and the sensitivity test: the trace with its whole-line stores
    fetched (server_missites.rewrite) on ``cpu`` with a store buffer of that many entries
    scaled by the traced stores over the native stores per request (the entries the traced
    stores would find, were the work's untraced stores spread evenly among them)."""
    from kvsim import sim, traces
    from kvsim.experiments.server_missites import rewrite
    from kvsim.traces.work import instructions_by_kind

    conf = sim.load_cpu(cpu)
    out = []
    for label, opts in PLAN:
        log(f"traced: {label}")
        path = tmp / "loop.kvt"
        _cref("serverloop", *_args(opts, iters), "--trace", path)
        n = iters * _depth(opts)
        with traces.open(path) as tr:
            header = tr.header
        kinds = instructions_by_kind(header, traces.read_all(path))
        res = sim.simulate(str(path), conf)
        last = res["levels"][-1]
        row = {"label": label, "requests": n, "instructions": sum(kinds.values()) / n,
               "by_kind": {k: v / n for k, v in kinds.items() if v},
               "stores": res["record_kinds"]["store"] / n,
               "ll_misses": last["demand_misses"] / n, "ll_level": last["name"],
               "ns": res["timing"]["time_ns"] / n, "freq_ghz": res["timing"]["freq_ghz"],
               "cpu": cpu}
        sb = res["timing"].get("store_buffer")
        if sb:  # the model's store buffer: the work's stores it placed (sim/MODEL.md §6)
            row["store_buffer"] = sb["entries"]
            row["work_stores"] = sb["work_stores"] / n
            row["store_buffer_full_ns"] = (res["timing"]["stall_cycles"]["store_buffer_full"]
                                           / res["timing"]["freq_ghz"] / n)
        if store_buffer:
            log(f"callgrind: {label}")
            nat = native_counts(opts, tmp)
            entries = max(1, round(store_buffer * row["stores"] / nat["Dw"]))
            fetched = tmp / "fetched.kvt"
            rewrite(path, fetched, True, False)
            sens = sim.simulate(str(fetched), conf.with_changes(store_buffer=entries))
            fetched.unlink()
            row["native_counts"] = nat
            row["sensitivity"] = {"store_buffer": store_buffer, "entries": entries,
                                  "ll_misses": sens["levels"][-1]["demand_misses"] / n,
                                  "ns": sens["timing"]["time_ns"] / n}
        out.append(row)
        path.unlink()
    return out


def summarize_insitu(runs: list[dict]) -> dict[str, Any]:
    """Medians (95 % intervals) of the in-situ runs: call()'s usec per MSET in the real
    server and in the serverloop runs between them (per arm), the real server's CPU and
    tick-split user ns per request."""
    from kvsim.stats import median_ci95

    def med(xs: list[float]) -> dict[str, Any]:
        ci = median_ci95(xs)
        return {"median": statistics.median(xs), "ci95": list(ci[:2]) if ci else None,
                "min": min(xs), "n": len(xs)}

    out = {"server_usec_per_call": med([r["usec_per_call"] for r in runs]),
           "server_cpu_ns": med([r["cpu_ns"] for r in runs]),
           "server_user_ns_ticks": med([r["user_ns"] for r in runs if r["user_ns"]])}
    for arm in ARMS:
        out[f"loop_{arm}_usec_per_call"] = med([u for r in runs
                                                for u in r["loop"][f"{arm}_usec_per_call"]])
        out[f"loop_{arm}_ns"] = med([s - c for r in runs for s, c in
                                     zip(r["loop"][f"{arm}_segment_ns"],
                                         r["loop"][f"{arm}_clock_ns"], strict=True)])
    return out


def markdown(doc: dict) -> str:
    """One row per plan entry: native hot and after the calls, instructions, native IPC after
    the calls at the file's clock, last-level misses, predicted, predicted / native."""
    rows = ["| loop | native ns/request hot [95 %] | after loopback write+read [95 %] | "
            "instructions (parse, server, generic) | native IPC after the calls | "
            "LL misses (model) | predicted ns | predicted / native |", "|" + "---|" * 8]

    def ci95(e: dict, fmt: str = ",.0f") -> str:
        return f"[{e['ci95'][0]:{fmt}}, {e['ci95'][1]:{fmt}}]" if e["ci95"] else "[-]"

    ci = ci95

    for n, t in zip(doc["native"], doc["traced"], strict=True):
        lb, hot, k = n["loopback"], n["none"], t["by_kind"]
        rows.append(f"| {n['label']} | {hot['median']:,.0f} {ci(hot)} | {lb['median']:,.0f} "
                    f"{ci(lb)} | {t['instructions']:,.0f} ({k.get('parse', 0):,.0f}, "
                    f"{k.get('server', 0):,.0f}, {k.get('generic', 0):,.0f}) | "
                    f"{t['instructions'] / (lb['median'] * t['freq_ghz']):.2f} | "
                    f"{t['ll_misses']:.1f} | {t['ns']:,.0f} | {t['ns'] / lb['median']:.2f} |")
    if doc.get("speedups"):
        rows += ["", "| prefetching (batch 16 against 0) | native speedup after the calls "
                 "[95 %] | predicted | predicted / native |", "|---|---|---|---|"]
        for x in doc["speedups"]:
            nat = x["native"]
            rows.append(f"| {x['without']} | {nat['median']:.2f} {ci95(nat, '.2f')} | "
                        f"{x['predicted']:.2f} | {x['predicted'] / nat['median']:.2f} |")
    if all("sensitivity" in t for t in doc["traced"]):
        sb = doc["traced"][0]["sensitivity"]["store_buffer"]
        rows += ["", "| loop | instructions per request: native (callgrind) / traced | "
                 "stores per request: native / traced | stores fetched, store buffer of "
                 f"{sb} scaled: entries | LL misses (model) | predicted ns | "
                 "predicted / native |", "|" + "---|" * 7]
        for n, t in zip(doc["native"], doc["traced"], strict=True):
            c, x = t["native_counts"], t["sensitivity"]
            rows.append(f"| {n['label']} | {c['Ir']:,.0f} / {t['instructions']:,.0f} | "
                        f"{c['Dw']:,.0f} / {t['stores']:,.0f} | {x['entries']} | "
                        f"{x['ll_misses']:.1f} | {x['ns']:,.0f} | "
                        f"{x['ns'] / n['loopback']['median']:.2f} |")
    ins = doc.get("insitu_summary")
    if ins:
        def f(e: dict, scale: float = 1.0) -> str:
            if e["ci95"]:
                lo, hi = e["ci95"]
                return f"{e['median'] * scale:,.0f} [{lo * scale:,.0f}, {hi * scale:,.0f}]"
            return f"{e['median'] * scale:,.0f} (min {e['min'] * scale:,.0f})"

        rows += ["", f"| MSET of 10 keys, 100,000 keys ({ins['server_cpu_ns']['n']} runs; "
                 "median [95 %] or (minimum)) | call()'s ns per MSET | ns per feed (whole "
                 "request code) | CPU ns per request | user ns by ticks |",
                 "|---|---|---|---|---|",
                 f"| serverloop, hot | {f(ins['loop_none_usec_per_call'], 1000)} | "
                 f"{f(ins['loop_none_ns'])} | | |",
                 f"| serverloop, after loopback write+read | "
                 f"{f(ins['loop_loopback_usec_per_call'], 1000)} | {f(ins['loop_loopback_ns'])}"
                 " | | |",
                 f"| c_ref's server, redis-benchmark, 50 clients | "
                 f"{f(ins['server_usec_per_call'], 1000)} | | {f(ins['server_cpu_ns'])} | "
                 f"{f(ins['server_user_ns_ticks'])} |"]
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    from kvsim import provenance
    from kvsim.experiments.valkey_server import ToolMissing, ValkeyError
    from kvsim.sim.config import ConfigError

    ap = argparse.ArgumentParser(prog="python -m kvsim.experiments.server_mset",
                                 description="MSET's request code timed by the clock alone "
                                             "and predicted, factor by factor")
    ap.add_argument("-o", "--output", default=f"results/{RESULT_NAME}")
    ap.add_argument("--cpu", help="CPU file or preset of the prediction")
    ap.add_argument("--native", help="the native runs (a --native-only file)")
    ap.add_argument("--native-only", action="store_true", help="measure, write, stop")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--store-buffer", type=int, default=None,
                    help="the core's store-buffer entries: adds callgrind's native counts and "
                         "the sensitivity test (stores fetched, the entries scaled)")
    a = ap.parse_args(argv)
    out = Path(a.output)
    if provenance.out_dir_missing(out):
        return 2
    if not a.native_only and not a.cpu:
        print("server_mset: --cpu is required unless --native-only", file=sys.stderr)
        return 2
    log = lambda m: print(m, file=sys.stderr)  # noqa: E731
    try:
        if a.native:
            nat = json.loads(Path(a.native).read_text())
            runs, ins, nat_prov = nat["runs"], nat["insitu"], nat["provenance"]
        else:
            runs = measure(a.rounds, ITERS, log)
            ins, nat_prov = insitu(a.rounds, INSITU_REQUESTS, log), None
        if a.native_only:
            provenance.write_result(out, {"runs": runs, "insitu": ins})
            print(f"wrote {out}")
            return 0
        with tempfile.TemporaryDirectory() as tmp:
            tr = traced(Path(tmp), a.cpu, TRACE_ITERS, a.store_buffer, log)
    except (OSError, ValueError, KeyError, subprocess.SubprocessError, ConfigError, ToolMissing,
            ValkeyError) as e:
        print(f"server_mset: {e}", file=sys.stderr)
        return 1
    doc = {"runs": runs, "native": summarize(runs), "traced": tr,
           "speedups": speedups(runs, tr), "insitu": ins,
           "insitu_summary": summarize_insitu(ins), "native_source": a.native,
           "measured_provenance": nat_prov,
           "note": "native: c_ref's server code between read and write (kvsim-cref "
                   "serverloop), ns per request less the clock's cost, hot (none) and after a "
                   "loopback write+read (loopback); traced: the same loop's measured feeds, "
                   "instructions per request by kind, last-level demand misses per request "
                   "and the predicted ns per request on cpu"}
    provenance.write_result(out, doc)
    print(markdown(doc))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
