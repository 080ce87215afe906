"""The catalogue of baseline/variant workload pairs: each pair defined once.

A pair is one c_ref workload run two ways: side A (the baseline) and side B (the variant
or layout under study), with the options both sides share. Its identity is
``(workload, common, a, b)``; sizes (``keys``, ``ops``, warm-up operations) are not part of
it: each study chooses them per scale, and a study that needs named sizes finds them here
under its name (:attr:`Pair.uses`). Its seed is the upstream figure it is read against:
a sentence naming the pull request, and where :mod:`kvsim.experiments.seeds` reports it as
a speedup, the function giving that speedup.

The studies read the catalogue: the headline and validation rows of
:mod:`kvsim.experiments.studies` and :mod:`kvsim.experiments.validation`, the ablation
(:mod:`kvsim.experiments.ablation`), the fidelity study (:mod:`kvsim.experiments.fidelity`)
and the warm-up convergence (:mod:`kvsim.experiments.warmup_convergence`). Adding a pair
is one entry of :data:`PAIRS` (or one :func:`register`); adding it to a study that lists
its pairs here (``uses``) is the same entry.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from kvsim.experiments import seeds

__all__ = ["MSET_15043_PREFILL", "PAIRS", "Pair", "get", "register", "used_by"]

#: the share of the key range that exists before the MSETs over existing keys. Redis
#: #15043's benchmarks (redis-benchmarks-specification ``memtier_benchmark-10Mkeys-load-string-
#: mset-*``) preload every key of the range (the dataset's check: ``keyspacelen`` 10M) and
#: MSET keys drawn uniformly from it (memtier's default command key pattern, R): every MSET
#: key exists, none is new.
MSET_15043_PREFILL = 1.0


@dataclass(frozen=True)
class Pair:
    """One baseline/variant pair (see the module's docstring)."""

    workload: str
    common: Mapping[str, Any]
    a: Mapping[str, Any]
    b: Mapping[str, Any]
    #: the upstream figure it is read against (a pull request and what it measured)
    seed: str
    #: that figure as a speedup (time before / time after), from kvsim.experiments.seeds
    seed_speedup: Callable[[], float | None] | None = None
    #: study -> what the study needs of the pair beyond its identity (sizes per scale, role)
    uses: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    def side(self, which: str) -> dict[str, Any]:
        """The options of side ``"a"`` or ``"b"`` (without the common ones)."""
        if which not in ("a", "b"):
            raise ValueError(f"pair side: 'a' or 'b', got {which!r}")
        return dict(self.a if which == "a" else self.b)

    def options(self, which: str, **sizes: Any) -> dict[str, Any]:
        """All options of one side: the sizes, the common options, the side's."""
        return {**sizes, **self.common, **self.side(which)}


def _v(name: str) -> dict[str, str]:
    return {"variant": name}


def _pair(workload: str, common: dict, a: dict | str, b: dict | str, seed: str,
          seed_speedup: Callable[[], float | None] | None = None,
          uses: dict | None = None) -> Pair:
    return Pair(workload, MappingProxyType(common),
                MappingProxyType(_v(a) if isinstance(a, str) else a),
                MappingProxyType(_v(b) if isinstance(b, str) else b),
                seed, seed_speedup, MappingProxyType(uses or {}))


def _ablation(keys: tuple[int, int], trace_ops: int | None, native_ops: int | None,
              warmup_ops: int | None, role: str) -> dict[str, dict[str, Any]]:
    """An ablation use: keys at the small and full scale, traced, native and warm-up
    operations (None: the workload's own), and the role (``tuning`` or ``held-back``)."""
    return {"ablation": {"keys": {"small": keys[0], "full": keys[1]}, "trace_ops": trace_ops,
                         "native_ops": native_ops, "warmup_ops": warmup_ops, "role": role}}


_V1501 = "Valkey PR #1501"
_R15133 = "Redis PR #15133"
_R15043 = "Redis PR #15043"
_V2092 = "Valkey PR #2092 pipelined GET"
_V2311 = "Valkey PR #2311 RDB load"

#: name -> pair. The ablation's pairs come first, in its order (its default ``--pairs``).
PAIRS: dict[str, Pair] = {
    "keys": _pair("iterate", {"op": "keys", "value_size": 100}, "none", "valkey",
                  f"{_V1501} KEYS", lambda: seeds.ITERATE[("keys", "valkey")],
                  _ablation((300_000, 2_000_000), None, None, None, "tuning")),
    "mget": _pair("mget", {"keys_per_command": 50, "value_size": 100}, "none", "batch",
                  f"{_R15133} MGET (hashtable)",
                  uses=_ablation((1_000_000, 3_000_000), 2000, 20000, 500, "tuning")),
    # lookahead's batch: c_ref's default 16 (a --batch would be refused for naive)
    "get": _pair("pipeline", {"depth": 10, "value_size": 256}, "naive", "lookahead", _V2092,
                 uses=_ablation((1_000_000, 3_000_000), 50000, 500000, 20000, "tuning")),
    "mset": _pair("mset", {"keys_per_command": 50, "value_size": 100}, "none", "batch",
                  "MSET batch (hashtable)",
                  uses=_ablation((200_000, 1_000_000), 2000, 20000, None, "held-back")),
    "load": _pair("load", {"value_size": 32}, "none", "prefetch-after-key", _V2311,
                  uses=_ablation((300_000, 2_000_000), None, None, None, "held-back")),
    "unified": _pair("pipeline", {"depth": 1, "value_size": 32, "key_size": 16},
                     {"layout": "legacy"}, {"layout": "unified"},
                     "Redis PR #13806 unified key-value object (GET)",
                     uses=_ablation((500_000, 3_000_000), 50000, 500000, 20000, "tuning")),
    "save": _pair("iterate", {"op": "save", "value_size": 100}, "none", "valkey",
                  f"{_V1501} SAVE", lambda: seeds.ITERATE[("save", "valkey")],
                  _ablation((300_000, 2_000_000), None, None, None, "held-back")),
    # c_ref's defaults for what is not given (the value size of iterate, the table)
    "iterate-keys": _pair("iterate", {"op": "keys"}, "none", "valkey", f"{_V1501} KEYS"),
    "iterate-save": _pair("iterate", {"op": "save"}, "none", "valkey", f"{_V1501} SAVE"),
    "iterate-save-nochecksum": _pair("iterate", {"op": "save", "rdbchecksum": "no"}, "none",
                                     "valkey", f"{_V1501} SAVE"),
    "mget-dict": _pair("mget", {"table": "dict", "keys_per_command": 50, "value_size": 100},
                       "none", "batch", f"{_R15133} MGET (dict)"),
    "get-d16": _pair("pipeline", {"depth": 16, "value_size": 256}, "naive", "lookahead",
                     _V2092),
    "get-d16-dict": _pair("pipeline", {"table": "dict", "depth": 16, "value_size": 256},
                          "naive", "lookahead", _V2092),
    "load-100": _pair("load", {"value_size": 100}, "none", "prefetch-after-key", _V2311),
    **{f"mset-dict-{v}": _pair("mset", {"table": "dict", "mset_keys": "random", "prefill": 0.5,
                                        "keys_per_command": 50, "value_size": 100},
                               "none", v, f"{_R15043} MSET over a half-existing range")
       for v in ("redis-15043", "batch")},
    # KEYS and SAVE as Valkey #1501 measured them (rdbchecksum no)
    **{f"{op}-nochecksum-{v}": _pair("iterate", {"value_size": 100, "op": op,
                                                 "rdbchecksum": "no"}, "none", v,
                                     f"{_V1501} {op.upper()}",
                                     (lambda op=op, v=v: seeds.ITERATE[(op, v)])
                                     if (op, v) in seeds.ITERATE else None)
       for op in ("keys", "save") for v in ("next-bucket", "valkey")},
    **{f"get-d{d}-b{b}": _pair("pipeline", {"value_size": 256, "depth": d}, "naive",
                               {"variant": "lookahead", "batch": b}, _V2092,
                               (lambda: seeds.PIPELINE_2092) if (d, b) == (10, 16) else None)
       for d, b in ((1, 16), (10, 16), (32, 16), (10, 4), (10, 64))},
    **{f"mget-{t}-{v}": _pair("mget", {"value_size": 100, "table": t, "keys_per_command": 50},
                              "none", v, f"{_R15133} MGET ({t})")
       for t, v in (("hashtable", "batch"), ("dict", "chunk-15133"))},
    "mget100-dict-chunk-15133": _pair(
        "mget", {"value_size": 100, "table": "dict", "keys_per_command": 100}, "none",
        "chunk-15133", f"{_R15133} MGET 100 keys",
        lambda: 1 + seeds.MGET_15133[(100, 100)] / 100),
    **{f"mset10-{t}-{v}": _pair("mset", {"value_size": 100, "table": t,
                                         "keys_per_command": 10, "mset_keys": "random"},
                                "none", v, f"{_R15043} MSET 10 keys")
       for t, v in (("hashtable", "batch"), ("dict", "redis-15043"), ("dict", "chunk-15133"))},
    "mset10-dict-redis-15043-prefill": _pair(
        "mset", {"value_size": 100, "table": "dict", "mset_keys": "random",
                 "prefill": MSET_15043_PREFILL, "keys_per_command": 10},
        "none", "redis-15043", f"{_R15043} MSET 10 keys over existing",
        lambda: 1 + seeds.mset_15043(10, 100, 1_000_000) / 100),
    **{f"load-{n}": _pair("load", {"value_size": n}, "none", "prefetch-after-key", _V2311,
                          (lambda n=n: 1 / (1 - seeds.rdb_load("prefetch-after-key", False, n)
                                            / 100)) if n == 8 else None)
       for n in (8, 256, 4096, 16384)},
}


def register(name: str, pair: Pair) -> None:
    """Add a pair to the catalogue; a name already taken is an error."""
    if name in PAIRS:
        raise ValueError(f"pairs: {name!r} is already in the catalogue")
    PAIRS[name] = pair


def get(name: str) -> Pair:
    """The pair ``name``; an unknown name is a one-line error naming the known ones."""
    try:
        return PAIRS[name]
    except KeyError:
        raise KeyError(f"unknown pair {name!r} (pairs: {', '.join(PAIRS)})") from None


def used_by(study: str) -> dict[str, Pair]:
    """The pairs with a use by ``study``, in catalogue order."""
    return {n: p for n, p in PAIRS.items() if study in p.uses}

