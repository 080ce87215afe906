"""The upstream figures each experiment is read against (the "seed" column of its tables).

Every number here is the one reported on the upstream pull request named beside it, in
the unit it was reported in; the experiments convert kvsim's figures to that unit (a time
change in percent, a speedup, bytes per key). A seed row's machine is the PR author's, not
this one and not a preset: a simulated figure that disagrees is a finding to explain (which
structure misses, which latency differs), never a reason to fit a parameter.

* Valkey PR #2311 (RDB load prefetch, Intel Xeon Platinum 8255C): load time change in
  percent, ``(t_before - t_after) / t_before * 100``, per value size and cluster mode, at
  the largest key count the PR measured for that size. The PR's final version (hash
  computed once, the reviewer's caching) is c_ref's ``prefetch-after-key``; its second
  version (the key hashed again at insert) is ``prefetch-rehash``, measured for 4 KB values
  and up only. The load times before the change, per key, give what cluster mode adds.
* Valkey PR #1501 (iterator prefetch, AWS Graviton 3, 50M keys, 100 B values): ``KEYS *``
  11.11 s -> 3.14 s merged (c_ref ``valkey``), 3.71 s with next-bucket prefetching only
  (``next-bucket``); ``SAVE`` 28.0 s -> 19.6 s merged.
* Redis PR #15043 (MSET bucket prefetch, batch 16, Intel Xeon Platinum 8488C; c_ref
  ``redis-15043`` with ``--mset-keys random``): throughput change in percent per keys per
  MSET, value size and key count (the mean of the PR's runs of one configuration).
* Redis PR #15133 (``dictPrefetchKeys`` for multi-key commands; c_ref ``chunk-15133`` on
  ``--table dict``): MGET throughput change in percent, 5M keys, x86 benchmark runner; at
  pipeline depth 10 (c_ref ``--pipeline-depth 10``) also on AWS Graviton 4.
* Valkey PR #2092 (pipeline lookahead, AMD EPYC 7713, 3M keys, 256 B values, depth 10,
  ``prefetch-batch-max-size`` 16, one I/O thread): 352,796 -> 604,376 GET/s.
* Redis PR #13806 (unified key-value object, memtier short strings: 16 B keys, 32 B values):
  ``used_memory`` per key before (legacy) and after (unified); 100k and 500k keys on AWS
  c6i.2xlarge, without (``string``) and with expire (``string_ex``); 1M-10M keys on a
  laptop, reported as ``used_memory_human`` in MB (read as MiB, Redis's unit there). The
  figures include the server's fixed baseline (about 1 MB), so the small key counts read
  high.
"""

from __future__ import annotations

__all__ = ["ITERATE", "KVOBJ", "MGET_15133", "MGET_15133_KEYS", "MGET_15133_PIPELINE10",
           "MGET_15133_PIPELINE10_GRAVITON4", "MSET_15043", "PIPELINE_2092",
           "PIPELINE_2092_KEYS", "RDB_LOAD",
           "MSET_15043_OPS", "MSET_15043_PROFILE", "RDB_LOAD_SECONDS", "mset_15043",
           "mset_15043_command_ns_per_key", "mset_15043_command_speedup",
           "mset_15043_ns_per_key",
           "rdb_load", "rdb_load_ns_per_key"]

# (variant, cluster, value bytes) -> (keys, percent change of the load time)
RDB_LOAD: dict[tuple[str, bool, int], tuple[int, float]] = {
    ("prefetch-after-key", False, 8): (268435456, 10.0),
    ("prefetch-after-key", False, 32): (67108864, 9.2),
    ("prefetch-after-key", False, 256): (8388608, 7.0),
    ("prefetch-after-key", False, 4096): (4194304, 1.4),
    ("prefetch-after-key", False, 16384): (1048576, 0.0),
    ("prefetch-after-key", True, 8): (268435456, 9.6),
    ("prefetch-after-key", True, 32): (67108864, 9.0),
    ("prefetch-after-key", True, 256): (8388608, 5.8),
    ("prefetch-after-key", True, 4096): (4194304, 1.0),
    ("prefetch-after-key", True, 16384): (1048576, 0.0),
    ("prefetch-rehash", False, 4096): (4194304, -1.3),
    ("prefetch-rehash", False, 16384): (1048576, -0.6),
    ("prefetch-rehash", True, 4096): (4194304, -1.8),
    ("prefetch-rehash", True, 16384): (1048576, -1.5),
}


def rdb_load(variant: str, cluster: bool, value_size: int) -> float | None:
    row = RDB_LOAD.get((variant, bool(cluster), int(value_size)))
    return row[1] if row else None


# (cluster, value bytes) -> (keys, load seconds before the change): the PR's final tables,
# at the largest key count per value size, cluster mode off and on measured together
RDB_LOAD_SECONDS: dict[tuple[bool, int], tuple[int, float]] = {
    (False, 8): (268435456, 163.619),
    (False, 32): (67108864, 46.513),
    (False, 256): (8388608, 8.955),
    (False, 4096): (4194304, 28.029),
    (False, 16384): (1048576, 20.588),
    (True, 8): (268435456, 195.051),
    (True, 32): (67108864, 54.820),
    (True, 256): (8388608, 10.083),
    (True, 4096): (4194304, 28.806),
    (True, 16384): (1048576, 20.873),
}


def rdb_load_ns_per_key(cluster: bool, value_size: int) -> float | None:
    """Load time per key in ns before the change (the unstable branch)."""
    row = RDB_LOAD_SECONDS.get((bool(cluster), int(value_size)))
    return row[1] / row[0] * 1e9 if row else None


# (op, variant) -> speedup (time before / time after)
ITERATE: dict[tuple[str, str], float] = {
    ("keys", "valkey"): 11.112279 / 3.141916,
    ("keys", "next-bucket"): 11.112279 / 3.712602,
    ("save", "valkey"): 28.0 / 19.6,
}

# (keys per MSET, value bytes, keys) -> throughput change in percent, one per reported run
MSET_15043: dict[tuple[int, int, int], list[float]] = {
    (10, 1000, 10_000_000): [4.3, 1.4],
    (10, 100, 10_000_000): [3.7, 4.0],
    (10, 10, 10_000_000): [1.3, 2.7],
    (50, 10, 10_000_000): [5.2, 8.2],
    (50, 100, 10_000_000): [4.3, 6.9],
    (10, 10, 1_000_000): [1.5, 2.0],
    (10, 100, 1_000_000): [3.2],
}


# the same runs' throughputs: (keys per MSET, value bytes, keys) -> [(MSETs/s before, after)]
MSET_15043_OPS: dict[tuple[int, int, int], list[tuple[int, int]]] = {
    (10, 1000, 10_000_000): [(97435, 101644), (102009, 103484)],
    (10, 100, 10_000_000): [(127689, 132416), (128794, 133960)],
    (10, 10, 10_000_000): [(132908, 134659), (134977, 138582)],
    (50, 10, 10_000_000): [(65714, 69115), (65166, 70529)],
    (50, 100, 10_000_000): [(61021, 63665), (61376, 65584)],
    (10, 10, 1_000_000): [(123191, 124979), (122092, 124487)],
    (10, 100, 1_000_000): [(113461, 117142)],
}


#: Redis #15043's CPU profile of ``memtier_benchmark-10Mkeys-load-string-mset-50-keys-with-
#: 100B-values`` (parca-agent on the Intel Xeon Platinum 8488C profiler runner), without and
#: with the prefetch: msetGenericCommand's cumulative samples and their share of all the
#: server's samples, and the runner's throughput (MSETs per second). The two runs' samples
#: total the same (59.9 billion), so their windows are of one length.
MSET_15043_PROFILE: dict = {
    "keys_per_command": 50, "value_size": 100, "keys": 10_000_000,
    "samples": (45.8e9, 20.2e9), "share": (0.765, 0.337), "ops": (66_949, 68_850)}


def mset_15043_command_ns_per_key(keys_per_command: int, value_size: int,
                                  keys: int) -> tuple[float, float] | None:
    """``(ns per key in msetGenericCommand before, ns per key it saves)`` from the PR's
    profile (:data:`MSET_15043_PROFILE`): the command's share of the server's time per MSET
    (the inverse of its throughput) over the MSET's keys. It reads the samples as the time of
    one server thread busy throughout; None for any other configuration."""
    p = MSET_15043_PROFILE
    if (keys_per_command, value_size, keys) != (p["keys_per_command"], p["value_size"],
                                                p["keys"]):
        return None
    per_key = [share * 1e9 / ops / keys_per_command
               for share, ops in zip(p["share"], p["ops"], strict=True)]
    return per_key[0], per_key[0] - per_key[1]


def mset_15043_command_speedup() -> float:
    """How many times less CPU msetGenericCommand takes per MSET with the prefetch, by the
    PR's profile: its samples per MSET before over after (the windows are of one length)."""
    p = MSET_15043_PROFILE
    return (p["samples"][0] / p["ops"][0]) / (p["samples"][1] / p["ops"][1])


def mset_15043_ns_per_key(keys_per_command: int, value_size: int,
                          keys: int) -> tuple[float, float] | None:
    """``(ns per key before, ns per key saved)`` of the server's time per MSET (the inverse
    of its throughput) over the keys of an MSET, the mean of the PR's runs, at exactly this
    configuration (None where the PR did not measure it)."""
    runs = MSET_15043_OPS.get((keys_per_command, value_size, keys))
    if not runs:
        return None
    before = [1e9 / a / keys_per_command for a, _ in runs]
    saved = [(1e9 / a - 1e9 / b) / keys_per_command for a, b in runs]
    return sum(before) / len(before), sum(saved) / len(saved)


def mset_15043(keys_per_command: int, value_size: int, keys: int) -> float | None:
    """The mean reported change for the configuration, or for the nearest key count the PR
    measured with the same keys per MSET and value size."""
    runs = MSET_15043.get((keys_per_command, value_size, keys))
    if runs is None:
        near = [k for (kpc, v, k) in MSET_15043 if kpc == keys_per_command and v == value_size]
        if not near:
            return None
        runs = MSET_15043[(keys_per_command, value_size,
                           min(near, key=lambda k: abs(k - keys)))]
    return sum(runs) / len(runs)


# (keys per MGET, value bytes) -> throughput change in percent (x86, 5M keys, no pipelining)
MGET_15133: dict[tuple[int, int], float] = {(100, 100): 37.33, (30, 100): 22.4}
#: the keys of #15133's keyspace (every run of it, x86 and Graviton 4)
MGET_15133_KEYS = 5_000_000

# the same at pipeline depth 10 (10 MGETs per read): x86 runner, and AWS Graviton 4
MGET_15133_PIPELINE10: dict[tuple[int, int], float] = {(100, 10): 89.44}
MGET_15133_PIPELINE10_GRAVITON4: dict[tuple[int, int], float] = {(100, 10): 128.34,
                                                                 (100, 100): 46.76}

#: GET throughput speedup at depth 10, batch 16 (io-threads 1)
PIPELINE_2092 = 604375.69 / 352795.91
#: the keys of #2092's keyspace
PIPELINE_2092_KEYS = 3_000_000

# (keys, expire) -> (legacy bytes per key, unified bytes per key)
KVOBJ: dict[tuple[int, bool], tuple[float, float]] = {
    (100_000, False): (8285848 / 100_000, 6364712 / 100_000),
    (100_000, True): (11783864 / 100_000, 8742168 / 100_000),
    (500_000, False): (37278912 / 500_000, 28121544 / 500_000),
    (500_000, True): (53473280 / 500_000, 39159272 / 500_000),
    **{(n * 1_000_000, False): (before * 2**20 / (n * 1e6), after * 2**20 / (n * 1e6))
       for n, before, after in [(1, 77.34, 59.87), (2, 161.63, 119.07), (3, 253.93, 183.08),
                                (4, 330.22, 237.47), (5, 438.51, 312.37),
                                (6, 514.81, 365.47), (7, 591.1, 419.46), (8, 667.39, 474.25),
                                (9, 807.69, 571.71), (10, 883.98, 624.07)]},
}
