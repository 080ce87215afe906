"""The issue-45 studies: the prefetching Valkey and Redis merged or proposed after the seeds.

``multikey_window`` (Valkey #3389's sliding window, Redis #15133's chunks, Redis #15043's MSET
batches), ``hash`` (Valkey #3940, #4017, #2180, Redis #14988) and ``pipeline_mget`` (Redis
#14899 with and without its pipeline guard). Each table has an ``upstream`` column beside the
simulated and native ones: the change the upstream PR reported for the nearest workload it
measured (:func:`upstream_change`, from :mod:`kvsim.experiments.upstream`), and each study
ends with a ``*_signs`` table that says, per upstream figure, whether kvsim's figures have its
sign (gain, loss, or no change within :data:`NO_CHANGE_PCT`), negative results included.

Variants are c_ref's registry names (``kvsim-cref options --json``); each cell passes only
the sizes its variants read (``--batch`` to the lookahead pipeline, ``batch`` on a hashtable
and ``window-3389``; ``--chunk`` to ``chunk-15133``), since c_ref refuses the others.
``multikey_window`` runs c_ref's ``mget``, ``mset``, ``exists``, ``del`` and ``touch``
workloads (TOUCH batched under the same variants as EXISTS and DEL).
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

# validation (and the seed studies it imports) register before these studies, whoever imports
# them first
from kvsim.experiments import upstream, validation  # noqa: F401
from kvsim.experiments.framework import (
    Experiment,
    Plot,
    Table,
    register,
    speedup_table,
    throughput_change_pct,
)
from kvsim.experiments.studies import _natives, _plan, _sims

__all__ = ["NO_CHANGE_PCT", "WINDOW_OFFSETS", "sign_of", "upstream_change"]

#: a change within this many percent either side is "no change" (the benchmark runners'
#: "No Change" band that upstream's comparisons quote for figures this small)
NO_CHANGE_PCT = 2.0

#: #3389's offsets (``--batch`` of ``window-3389``) by scale
WINDOW_OFFSETS = {"small": [4, 16, 64], "full": [2, 4, 8, 16, 32, 64, 128]}

_THROUGHPUT = ("requests_per_sec", "ops_per_sec")


def _rows() -> tuple[upstream.UpstreamRow, ...]:
    return upstream.load() + upstream.seed_rows()


def _distance(r: upstream.UpstreamRow, want: dict[str, Any]) -> float:
    """How far an upstream row's workload is from a study line's: log distance over the
    counts both state (an unstated count is no distance)."""
    d = 0.0
    for k, v in want.items():
        got = getattr(r, k)
        if got is not None and v is not None:
            d += abs(math.log(got) - math.log(v))
    return d


def upstream_match(pr: int, command: str, want: dict[str, Any],
                   variant: str | None = None) -> list[upstream.UpstreamRow]:
    """The throughput figures of ``pr`` for ``command`` (``variant``: a prefix of the
    upstream row's variant) nearest to the study's workload ``want`` (UpstreamRow counts:
    keys, fields, keys_per_command, value_bytes, pipeline)."""
    rows = [r for r in upstream.select(_rows(), pr=pr, command=command)
            if r.metric in _THROUGHPUT]
    if variant is not None:
        rows = [r for r in rows if r.variant.startswith(variant)]
    if not rows:
        return []
    best = min(_distance(r, want) for r in rows)
    return [r for r in rows if _distance(r, want) == best]


def upstream_change(pr: int, command: str, want: dict[str, Any],
                    variant: str | None = None) -> float | None:
    """The mean reported change (%) of :func:`upstream_match`'s rows, or None."""
    rows = upstream_match(pr, command, want, variant)
    return sum(r.change_pct for r in rows) / len(rows) if rows else None


def sign_of(pct: float | None) -> str:
    """``gain``, ``loss`` or ``no change`` (within :data:`NO_CHANGE_PCT`); "" for None."""
    if pct is None or pd.isna(pct):
        return ""
    return "gain" if pct > NO_CHANGE_PCT else "loss" if pct < -NO_CHANGE_PCT else "no change"


def _native_sign(r: pd.Series) -> str:
    if r.get("native_value") is None or pd.isna(r.get("native_value")):
        return ""
    if "within noise" in str(r.get("native", "")):
        return "no change"
    return sign_of(r["native_value"])


def _signs_table(name: str, title: str, lines: pd.DataFrame,
                 matches: list[tuple[upstream.UpstreamRow, dict[str, Any]]]) -> Table:
    """One line per upstream figure: the study line it is matched with (``match``: a dict of
    the line's coordinates), the figure's sign and kvsim's (simulated: the presets' median;
    native), and whether they agree."""
    sims = [c for c in lines.columns if c.startswith("sim:")]
    out = []
    for row, match in matches:
        sel = lines
        for k, v in match.items():
            sel = sel[sel[k] == v] if k in sel else sel.iloc[0:0]
        line = {"pr": f"{row.project} #{row.pr}", "upstream_workload": row.experiment,
                "upstream_cpu": row.cpu, "upstream_variant": row.variant,
                "upstream_keys": row.keys, "upstream_value_bytes": row.value_bytes,
                "upstream_pipeline": row.pipeline,
                "kvsim_line": ", ".join(f"{k}={v}" for k, v in match.items()),
                "upstream": row.change_pct, "upstream_sign": sign_of(row.change_pct)}
        if len(sel):
            r = sel.iloc[0]
            vals = [r[c] for c in sims if pd.notna(r[c])]
            med = float(pd.Series(vals).median()) if vals else None
            line.update(sim_median=med, sim_sign=sign_of(med), native=r.get("native", ""),
                        native_value=r.get("native_value"), native_sign=_native_sign(r))
        else:
            line.update(sim_median=None, sim_sign="", native="", native_value=None,
                        native_sign="")
        want = line["upstream_sign"]
        line["sim_reproduces"] = ("" if not line["sim_sign"] else
                                  "yes" if line["sim_sign"] == want else "no")
        line["native_reproduces"] = ("" if not line["native_sign"] else
                                     "yes" if line["native_sign"] == want else "no")
        line["figure"] = f"{len(out) + 1}: {line['pr']}"
        out.append(line)
    return Table(name, title, pd.DataFrame(out), "% change of throughput (positive: faster)",
                 Plot(x="figure", xlabel="upstream figure (line of the table)",
                      ylabel="throughput change (%)", ref=0.0,
                      series=["sim_median", "native_value"]),
                 note=f"gain / loss: beyond +-{NO_CHANGE_PCT:g} %; native: 'no change' "
                            "when its 95 % interval includes no change; sim_median: the "
                            "median over the simulated presets.")


def _nearest(cand: pd.DataFrame, want: dict[str, Any]) -> pd.Series | None:
    """The line of ``cand`` nearest to ``want`` (log distance over the columns ``want``
    states; the first of equals), or None when ``cand`` is empty."""
    if not len(cand):
        return None
    dist = [sum(abs(math.log(c[k]) - math.log(v)) for k, v in want.items() if v)
            for _, c in cand.iterrows()]
    return cand.iloc[dist.index(min(dist))]


def _pct_table(rows: pd.DataFrame, coords: list[str], seed) -> pd.DataFrame:
    t = speedup_table(rows, coords, seed, convert=throughput_change_pct)
    return t.rename(columns={"seed": "upstream"})


def _label(t: pd.DataFrame, cols: list[str]) -> pd.Series:
    return t[cols].astype(str).agg(" ".join, axis=1)


# --- 1. multikey_window (Valkey #3389, Redis #15133, #15043) -----------------------------------

def _multikey_cells(scale: str, cpus: list[str]) -> list[dict]:
    """MGET, EXISTS, DEL and TOUCH over existing keys (DEL's keys restored between runs) and MSET
    of random keys over a prefilled range, 2-1000 keys per command, 100 B values. On
    Valkey's hashtable: none, ``batch`` (today's first 16 keys) and ``window-3389`` at
    several offsets (``--batch``); on Redis's dict (``--table dict``): none,
    ``chunk-15133`` (``--chunk 16``) and, for MSET, ``redis-15043``. Native pairs (each
    variant against none, interleaved) for every line at full scale, for 100 keys per
    command at small scale."""
    if scale == "small":
        keys, kpcs, total, value = 20_000, [2, 10, 100, 1000], 20_000, 100
    else:
        keys, kpcs, total, value = 2_000_000, [2, 10, 100, 1000], 400_000, 100
    offsets = WINDOW_OFFSETS[scale]
    out: list[dict] = []
    for workload in ("mget", "mset", "exists", "del", "touch"):
        for kpc in kpcs:
            common = {"keys": keys, "value_size": value, "keys_per_command": kpc, "seed": 1,
                      "ops": max(10, total // kpc)}
            if workload == "mset":
                common.update(mset_keys="random", prefill=1.0)
            params = {"command": workload.upper(), "keys": keys, "keys_per_command": kpc}
            hashtable = [{"variant": "none", "label": "none"},
                         {"variant": "batch", "batch": 16, "label": "batch 16"},
                         *[{"variant": "window-3389", "batch": o, "label": f"window {o}"}
                           for o in offsets]]
            dict_ = [{"variant": "none", "label": "none"},
                     {"variant": "chunk-15133", "chunk": 16, "label": "chunk-15133"}]
            if workload == "mset":
                dict_.append({"variant": "redis-15043", "label": "redis-15043"})
            native = scale == "full" or kpc == 100
            for table, variants in (("hashtable", hashtable), ("dict", dict_)):
                base = dict(common, table=table)
                p = dict(params, table=table)
                out += _sims("multikey_window", workload, base, variants, cpus, p)
                if native:
                    out += _natives("multikey_window", workload, base, variants,
                                    _plan(scale, 0.05), p)
    return out


def _multikey_upstream(s: dict) -> float | None:
    want = {"keys": s["keys"], "keys_per_command": s["keys_per_command"], "value_bytes": 100,
            "pipeline": 1}
    if s["variant"] == "chunk-15133":
        return None  # #15133's figures are the seed's (mset_batch), not this file's
    if s["variant"] == "redis-15043" and s["command"] == "MSET":
        return upstream_change(15043, "MSET", want)
    return None


def _multikey_tables(rows: pd.DataFrame) -> list[Table]:
    coords = ["command", "table", "keys", "keys_per_command", "variant"]
    t = _pct_table(rows, coords, _multikey_upstream)
    t["value"] = _label(t, ["command", "table", "keys_per_command", "variant"])
    main = Table("multikey_window", "Multi-key commands: first-16, #3389's window by "
                 "offset, Redis's chunks: throughput change over none", t,
                 "% change of throughput (positive: faster)",
                 Plot(x="value", xlabel="command, table, keys per command, variant",
                      ylabel="throughput change (%)", ref=0.0),
                 note="upstream: Redis #15043's MSET figures (seed 001) at the nearest key "
                      "count; #3389 reported no figure in the data file. window N: "
                      "window-3389 with offset N (--batch N).")
    best = _best_offset(t)
    matches = []
    for r in upstream.select(_rows(), pr=15043):
        cand = t[(t.command == "MSET") & (t.table == "dict") & (t.variant == "redis-15043")]
        c = _nearest(cand, {"keys": r.keys, "keys_per_command": r.keys_per_command})
        if c is not None:
            matches.append((r, {k: c[k] for k in ("command", "table", "keys",
                                                  "keys_per_command", "variant")}))
    signs = _signs_table("multikey_window_signs", "Multi-key commands: upstream figures "
                         "reproduced in sign", t, matches)
    return [main, best, signs]


def _best_offset(t: pd.DataFrame) -> Table:
    """Per command and keys per command, the window offset with the largest change on each
    simulated CPU and natively (``native_value``; ``native``: with its change)."""
    w = t[t.variant.astype(str).str.startswith("window ")]
    sims = [c for c in w.columns if c.startswith("sim:")]
    out = []
    for (cmd, kpc), g in w.groupby(["command", "keys_per_command"], sort=True):
        offset = g.variant.str.split().str[1].astype(int)
        line: dict[str, Any] = {"command": cmd, "keys_per_command": kpc,
                                "value": f"{cmd} {kpc}"}
        for c in [*sims, "native_value"]:
            v = pd.to_numeric(g[c], errors="coerce")
            line[c] = int(offset[v.idxmax()]) if v.notna().any() else None
            if c == "native_value":
                line["native"] = (f"{line[c]} ({v.max():+.1f} %)" if v.notna().any()
                                  else "")
        out.append(line)
    frame = pd.DataFrame(out)
    front = ["command", "keys_per_command", "value", "native", "native_value"]
    return Table("multikey_window_best", "#3389's window: the best offset per CPU",
                 frame[front + sims], "offset (window-3389 --batch)",
                 Plot(x="value", xlabel="command, keys per command", ylabel="best offset",
                      ref=None),
                 note="the offset with the largest simulated or native change over none, "
                      "per command and keys per command (the changes: the table above); "
                      "native: the best offset and its change.")


register(Experiment("multikey_window", "Multi-key commands: #3389's sliding window",
                    "Valkey PR #3389, Redis PRs #15133, #15043", _multikey_cells,
                    _multikey_tables))


# --- 2. hash (Valkey #3940, #4017, #2180, Redis #14988) ----------------------------------------

#: (shape, keys, fields per hash, value bytes) by scale: one large hash, many small hashes
#: kept as tables (100 B values are above the listpack's 64), many kept as listpacks
_HASH_SHAPES = {
    "small": [("large", 1, 100_000, 70), ("many tables", 2_000, 100, 100),
              ("many listpacks", 2_000, 100, 16)],
    "full": [("large", 1, 4_000_000, 70), ("many tables", 100_000, 100, 100),
             ("many listpacks", 100_000, 100, 16)],
}
#: (shape, keys, members per sorted set) by scale for ZSCORE under #3940 and ZMSCORE under
#: #3940 and #4017: many sets kept
#: as a skiplist and member table (past 128 members), many kept as listpacks
_ZSET_SHAPES = {
    "small": [("many tables", 2_000, 200), ("many listpacks", 2_000, 100)],
    "full": [("many tables", 100_000, 200), ("many listpacks", 100_000, 100)],
}
#: Valkey's lookahead pipeline for the nested variants (its batch spans the clients' commands)
_HASH_DEPTH = 16


def _hash_cells(scale: str, cpus: list[str]) -> list[dict]:
    """Valkey (``table=hashtable``, the lookahead pipeline, 16 commands per buffer, batch
    16): HGET (none, nested-3940, value-2180) and HMGET of 10 fields (none, nested-3940,
    find-batch-4017) over one large hash, many small hashes kept as tables and many kept as
    listpacks; ZSCORE (none, nested-3940: #3940's member prefetch in the sorted set's member
    table) and ZMSCORE of 10 members (none, nested-3940, find-batch-4017: #4017's batched
    find in the member table) over many sorted sets kept as skiplists (200 members) and many
    kept as listpacks (100). Redis (``table=dict``, commands one after the other): HGETALL (none,
    getall-14988) over many hashes of 100 and 500 fields and one of 1000, the last also
    pipelined 10 deep, as #14988's benchmarks."""
    ops = 2_000 if scale == "small" else 100_000
    out: list[dict] = []
    for shape, keys, fields, value in _HASH_SHAPES[scale]:
        for op, variants in (("hget", ["none", "nested-3940", "value-2180"]),
                             ("hmget", ["none", "nested-3940", "find-batch-4017"])):
            base = {"keys": keys, "hash_fields": fields, "value_size": value, "ops": ops,
                    "hash_op": op, "table": "hashtable", "pipeline": "lookahead", "batch": 16,
                    "pipeline_depth": _HASH_DEPTH, "seed": 1}
            if op == "hmget":
                base["fields_per_command"] = 10
            params = {"op": op.upper(), "shape": shape, "keys": keys, "fields": fields,
                      "value_size": value, "depth": _HASH_DEPTH, "table": "hashtable"}
            vs = [{"variant": v, "label": v} for v in variants]
            out += _sims("hash", "hash", base, vs, cpus, params)
            if scale == "full" or shape != "many listpacks":
                out += _natives("hash", "hash", base, vs, _plan(scale, 0.05), params)
    for shape, keys, members in _ZSET_SHAPES[scale]:
        for workload, variants in (("zscore", ["none", "nested-3940"]),
                                   ("zmscore", ["none", "nested-3940", "find-batch-4017"])):
            base = {"keys": keys, "zset_members": members, "ops": ops, "table": "hashtable",
                    "pipeline": "lookahead", "batch": 16, "pipeline_depth": _HASH_DEPTH,
                    "seed": 1}
            if workload == "zmscore":
                base["fields_per_command"] = 10
            params = {"op": workload.upper(), "shape": shape, "keys": keys, "fields": members,
                      "value_size": 0, "depth": _HASH_DEPTH, "table": "hashtable"}
            vs = [{"variant": v, "label": v} for v in variants]
            out += _sims("hash", workload, base, vs, cpus, params)
            if scale == "full" or shape != "many listpacks":
                out += _natives("hash", workload, base, vs, _plan(scale, 0.05), params)
    many = 2_000 if scale == "small" else 10_000
    for keys, fields, depth in ((many, 100, 1), (many, 500, 1), (1, 1000, 1), (1, 1000, 10)):
        base = {"keys": keys, "hash_fields": fields, "value_size": 100,
                "ops": max(200, ops // 10), "hash_op": "hgetall", "table": "dict",
                "pipeline_depth": depth, "seed": 1}
        params = {"op": "HGETALL", "shape": "large" if keys == 1 else "many tables",
                  "keys": keys, "fields": fields, "value_size": 100, "depth": depth,
                  "table": "dict"}
        vs = [{"variant": v, "label": v} for v in ("none", "getall-14988")]
        out += _sims("hash", "hash", base, vs, cpus, params)
        out += _natives("hash", "hash", base, vs, _plan(scale, 0.05), params)
    return out


_HASH_PR = {"nested-3940": 3940, "value-2180": 2180, "getall-14988": 14988,
            "find-batch-4017": 4017}


def _hash_upstream(s: dict) -> float | None:
    pr = _HASH_PR.get(s["variant"])
    if pr is None or s["shape"] == "many listpacks":
        return None  # the PRs measured hashes kept as tables
    rows = upstream_match(pr, s["op"], _hash_want(s))
    return sum(r.change_pct for r in rows) / len(rows) if rows else None


def _hash_want(s: dict) -> dict[str, Any]:
    return {"keys": s["keys"], "fields": s["fields"], "value_bytes": s["value_size"],
            "pipeline": s["depth"] if s["op"] == "HGETALL" else None}


def _hash_tables(rows: pd.DataFrame) -> list[Table]:
    coords = ["op", "table", "shape", "keys", "fields", "value_size", "depth", "variant"]
    t = _pct_table(rows, coords, _hash_upstream)
    t["value"] = _label(t, ["op", "shape", "fields", "depth", "variant"])
    main = Table("hash", "Hash commands: nested, batch-find, value and HGETALL prefetching: "
                 "throughput change over none", t, "% change of throughput (positive: faster)",
                 Plot(x="value", xlabel="command, hashes, fields per hash, depth, variant",
                      ylabel="throughput change (%)", ref=0.0),
                 note="upstream: the PR's figure for the nearest workload it measured "
                      "(Valkey #2180 and #3940: HGET on one hash of 30M fields; Redis "
                      "#14988: HGETALL, 10K hashes of 100-500 fields or one of 1K); #4017 "
                      "reported no figure in the data file, #3940 none for ZSCORE. Valkey "
                      f"rows: lookahead pipeline, {_HASH_DEPTH} commands per buffer, batch 16; "
                      "ZSCORE and ZMSCORE (10 members a command) rows: fields = members per "
                      "sorted set, no values.")
    matches = []
    for pr, variant in ((2180, "value-2180"), (3940, "nested-3940"), (14988, "getall-14988")):
        for r in upstream.select(upstream.load(), pr=pr):
            if r.metric not in _THROUGHPUT or not r.command.startswith("H"):
                continue
            cand = t[(t.variant == variant) & (t.op == r.command)]
            if not len(cand):
                continue
            c = _nearest(cand, {"keys": r.keys, "fields": r.fields,
                                "value_size": r.value_bytes, "depth": r.pipeline})
            matches.append((r, {k: c[k] for k in ("op", "shape", "fields", "depth",
                                                  "variant")}))
    signs = _signs_table("hash_signs", "Hash commands: upstream figures reproduced in sign", t,
                         matches)
    return [main, signs]


register(Experiment("hash", "Hash commands: nested and batched field prefetching",
                    "Valkey PRs #3940, #4017, #2180, Redis PR #14988", _hash_cells,
                    _hash_tables))


# --- 3. pipeline_mget (Redis #14899) -----------------------------------------------------------

def _pipeline_mget_cells(scale: str, cpus: list[str]) -> list[dict]:
    """MGET of 100 keys on Redis's dict (``--table dict``), 10 B and 100 B values, alone
    and pipelined 10 deep, each buffer run naive (one command after the other), with
    Valkey #2092's lookahead batch of 16 keys across the buffered commands (``lookahead``),
    or with Redis's own cross-command batch (``all-pending-14754``: #14440's lookahead
    parsing, #14754's batch over every pending command, 2 x 16 keys by #14017's sizing):
    none, ``redis-14899`` (the in-command prefetch without its guard) and
    ``redis-14899-guard`` (no in-command prefetch while a pipeline is active)."""
    keys, ops = (20_000, 200) if scale == "small" else (5_000_000, 4_000)
    values = [100] if scale == "small" else [10, 100]
    out: list[dict] = []
    for value in values:
        for depth in (1, 10):
            for pipe in ("naive", "lookahead", "all-pending-14754"):
                base = {"keys": keys, "value_size": value, "keys_per_command": 100,
                        "ops": ops, "table": "dict", "pipeline_depth": depth,
                        "pipeline": pipe, "seed": 1}
                if pipe != "naive":
                    base["batch"] = 16
                params = {"keys": keys, "value_size": value, "depth": depth, "pipeline": pipe}
                vs = [{"variant": v, "label": v}
                      for v in ("none", "redis-14899", "redis-14899-guard")]
                out += _sims("pipeline_mget", "mget", base, vs, cpus, params)
                out += _natives("pipeline_mget", "mget", base, vs, _plan(scale, 0.05), params)
    return out


_14899_STATE = {"redis-14899": "70d4444ce", "redis-14899-guard": "4ef667ae6"}


def _pipeline_mget_upstream(s: dict) -> float | None:
    state = _14899_STATE.get(s["variant"])
    if state is None:
        return None
    return upstream_change(14899, "MGET", {"keys": s["keys"], "value_bytes": s["value_size"],
                                           "pipeline": s["depth"], "keys_per_command": 100},
                           variant=state)


def _pipeline_mget_tables(rows: pd.DataFrame) -> list[Table]:
    coords = ["keys", "value_size", "depth", "pipeline", "variant"]
    t = _pct_table(rows, coords, _pipeline_mget_upstream)
    t["value"] = _label(t, ["value_size", "depth", "pipeline", "variant"])
    main = Table("pipeline_mget", "Pipelined MGET: #14899's in-command prefetch with and "
                 "without its guard: throughput change over none", t,
                 "% change of throughput (positive: faster)",
                 Plot(x="value", xlabel="value bytes, depth, pipeline, variant",
                      ylabel="throughput change (%)", ref=0.0),
                 note="upstream: Redis #14899 at 5M keys, 100 keys per MGET, the mean over "
                      "the machines it was measured on (x86 m7i, ARM m8g) of the nearest "
                      "value size and depth: 70d4444ce (no guard) for redis-14899, "
                      "4ef667ae6 (guard) for redis-14899-guard.")
    matches = []
    for r in upstream.select(upstream.load(), pr=14899):
        variant = next((v for v, s in _14899_STATE.items() if r.variant.startswith(s)),
                       "redis-14899-guard")
        for pipe in ("naive", "lookahead", "all-pending-14754"):
            cand = t[(t.variant == variant) & (t.pipeline == pipe) & (t.depth == r.pipeline)]
            if not len(cand):
                continue
            c = _nearest(cand, {"value_size": r.value_bytes})
            matches.append((r, {"value_size": c["value_size"], "depth": r.pipeline,
                                "pipeline": pipe, "variant": variant}))
    signs = _signs_table("pipeline_mget_signs", "Pipelined MGET: Redis #14899's figures "
                         "reproduced in sign", t, matches)
    return [main, signs]


register(Experiment("pipeline_mget", "Pipelined MGET: Redis #14899's regression and guard",
                    "Redis PR #14899", _pipeline_mget_cells, _pipeline_mget_tables))


# the `server` study (experiments/server_study.py: issue 43, section 4)
from kvsim.experiments import server_study  # noqa: E402

register(server_study.EXPERIMENT)
