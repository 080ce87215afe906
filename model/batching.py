"""How batched paths split work: pipeline lookahead, MGET/MSET batches, load prefetch.

These answer "which keys does batch i prefetch, and which commands does it cover" for a
given batch size, without executing anything. Together with ``model.prefetch`` they let a
test check the advisory contract: every key a batch prefetches is demanded by a command of
that batch, and every command is executed exactly once, in order.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kvsim.model.glob import key_hash_slot
from kvsim.model.hashtable import Hashtable
from kvsim.model.prefetch import Access
from kvsim.model.resp import Command, ProtocolError, split_commands

__all__ = [
    "PREFETCH_BATCH_SIZE",
    "KS_MAX_BATCH",
    "get_keys_from_command",
    "prefetch_next_batch_size",
    "next_batch_size",
    "multikey_batches",
    "mset_prefetch_batches",
    "valkey_multikey_batch",
    "redis_15043_batches",
    "LookaheadBatch",
    "pipeline_lookahead",
    "REDIS_LOOKAHEAD",
    "redis_all_pending",
    "first_key",
    "load_prefetch_order",
]

PREFETCH_BATCH_SIZE = 16

_ARITY = {
    b"get": 2, b"set": -3, b"del": -2, b"unlink": -2, b"exists": -2, b"touch": -2,
    b"mget": -2, b"mset": -3,
    b"msetnx": -3, b"expire": -3, b"pexpire": -3, b"ttl": 2, b"pttl": 2, b"keys": 2,
    b"scan": -2, b"dbsize": 1, b"flushall": -1,
}

KS_MAX_BATCH = 128  # c_ref keyspace.h: at most this many commands per lookahead batch


def get_keys_from_command(argv: tuple[bytes, ...] | list[bytes]) -> list[bytes]:
    """``getKeysFromCommand`` (c_ref ``ksCommandKeys``) for the supported commands: the key
    arguments, in order, repeats kept; [] for unknown commands or a failed arity check,
    incl. MSET/MSETNX's pair count (such commands are not prefetched)."""
    name = argv[0].lower()
    arity = _ARITY.get(name)
    if arity is None or (arity > 0 and len(argv) != arity) or len(argv) < -arity:
        return []
    if name in (b"get", b"set", b"expire", b"pexpire", b"ttl", b"pttl"):
        return [argv[1]]
    if name in (b"del", b"unlink", b"exists", b"touch", b"mget"):
        return list(argv[1:])
    if name in (b"mset", b"msetnx"):
        return list(argv[1::2]) if len(argv) % 2 == 1 else []
    return []


def prefetch_next_batch_size(remaining: int, batch_size: int = PREFETCH_BATCH_SIZE) -> int:
    """``prefetchNextBatchSize``: one batch if at least two remain, else everything."""
    return batch_size if remaining >= 2 * batch_size else remaining


next_batch_size = prefetch_next_batch_size  # c_ref commands.c nextBatchSize


def multikey_batches(nkeys: int, batch_size: int = PREFETCH_BATCH_SIZE) -> list[range]:
    """Index ranges (into the command's key list) of the MGET/MSET prefetch batches:
    chunks of ``batch_size`` while at least ``2*batch_size`` keys remain, then the rest."""
    out, start = [], 0
    while start < nkeys:
        n = prefetch_next_batch_size(nkeys - start, batch_size)
        out.append(range(start, start + n))
        start += n
    return out


def valkey_multikey_batch(nkeys: int, batch_size: int = PREFETCH_BATCH_SIZE) -> list[range]:
    """The prefetched batch of one MGET/MSET/MSETNX under ``multikey=batch`` on a
    hashtable (Valkey ``memory_prefetch.c`` as of #2092, the command alone in a batch):
    its first ``batch_size`` keys (``prefetch-batch-max-size``), once; the rest are looked
    up cold. [] when at most one key would be prefetched."""
    n = min(nkeys, batch_size)
    return [range(n)] if n > 1 else []


def redis_15043_batches(nkeys: int, batch_size: int = PREFETCH_BATCH_SIZE) -> list[range]:
    """Index ranges of Redis PR #15043's MSET batches (``MSET_BATCH_SIZE`` = 16): fixed
    chunks, the last one shorter (no adaptive tail)."""
    return [range(s, min(s + batch_size, nkeys)) for s in range(0, nkeys, batch_size)]


def mset_prefetch_batches(
    npairs: int, nx: bool, batch_size: int = PREFETCH_BATCH_SIZE, rule: str = "15133"
) -> list[tuple[str, range]]:
    """The prefetched batches of one MSET / MSETNX under ``multikey=batch``, as (pass,
    pair-index range).

    ``rule="15133"`` (Redis PR #15133 ``msetGenericCommand``; c_ref ``commands.c`` on
    ``table=dict`` and ``multikey=chunk-15133``): MSET has one pass ("set") in
    ``multikey_batches`` chunks. MSETNX first checks every key ("check" pass, same
    chunks, stopping at the first existing key), then sets them with ``do_prefetch &&=
    !nx``: its "set" pass prefetches nothing, since the check pass warmed every key. Only
    batches of more than one key are prefetched (c_ref emits a BATCH marker for each).
    The check pass is listed whole (it ends early only when a key exists, and then
    nothing is set).

    ``rule="15043"`` (c_ref ``multikey=redis-15043``, Redis PR #15043): fixed chunks
    (``redis_15043_batches``), and MSETNX prefetches in both passes.

    ``rule="valkey"`` (``multikey=batch`` on a hashtable): the first pass prefetches the
    first ``batch_size`` keys once (``valkey_multikey_batch``); nothing else."""
    if rule not in ("15133", "15043", "valkey"):
        raise ValueError(rule)
    if rule == "15043":
        chunks = [r for r in redis_15043_batches(npairs, batch_size) if len(r) > 1]
        return ([("check", r) for r in chunks] if nx else []) + [("set", r) for r in chunks]
    if rule == "valkey":
        chunks = valkey_multikey_batch(npairs, batch_size)
    else:
        chunks = [r for r in multikey_batches(npairs, batch_size) if len(r) > 1]
    if nx:
        return [("check", r) for r in chunks]
    return [("set", r) for r in chunks]


@dataclass
class LookaheadBatch:
    """One lookahead batch: the commands parsed ahead and the keys prefetched for them."""

    commands: list[Command] = field(default_factory=list)
    prefetch_keys: list[bytes] = field(default_factory=list)


def first_key(argv: tuple[bytes, ...] | list[bytes]) -> bytes | None:
    """The first key of a command with a valid arity (what ``unit="commands"`` lookahead
    resolves), or None."""
    keys = get_keys_from_command(argv)
    if keys:
        return keys[0]
    name = argv[0].lower()
    if name in (b"mset", b"msetnx") and len(argv) >= 3:
        return argv[1]  # arity -3 holds even when the pair count is odd
    return None


def pipeline_lookahead(
    buf: bytes, batch_size: int, unit: str = "keys"
) -> tuple[list[LookaheadBatch], ProtocolError | None, int]:
    """Split a query buffer into lookahead batches.

    ``unit="keys"`` (the default) is c_ref's ``ksPipelineLookahead`` (Valkey #2092,
    ``memory_prefetch.c`` ``addCommandToBatch``; the rule is documented at the top of
    ``c_ref/pipeline.c``): ``batch_size`` counts KEYS. Every command joins the batch, in
    order; its keys (``get_keys_from_command``) are added one by one while the batch
    holds fewer than ``batch_size`` (a 50-key MGET in a 16-key batch: its first 16 keys),
    and the batch closes when it holds ``batch_size`` keys (after the command that filled
    it) or ``KS_MAX_BATCH`` (128) commands. Unknown commands and commands that fail their
    arity check add no keys but still run in their batch. Only a batch of more than one
    key is prefetched (c_ref then emits a BATCH marker whose addr is the key count):
    ``prefetch_keys`` is [] otherwise.

    Alternatives (not what c_ref does; kept for comparison):
    ``unit="whole-commands"`` adds commands whole while their keys fit: a command whose
    keys would overflow the batch closes it and starts the next one, and a command with
    more keys than ``batch_size`` runs alone, unprefetched (no Valkey version does this).
    ``unit="commands"``: up to ``batch_size`` commands per batch, the first key of each
    command whose arity is valid (``first_key``) prefetched, only if more than one.

    A protocol error closes the last batch (the commands before it still run). A command
    cut off at the end of the buffer is in no batch and is not consumed.
    Returns (batches, protocol error or None, bytes consumed)."""
    if unit not in ("keys", "commands", "whole-commands"):
        raise ValueError(unit)
    items, consumed = split_commands(buf)
    batches: list[LookaheadBatch] = []
    cur = LookaheadBatch()

    def close() -> None:
        nonlocal cur
        if cur.commands:
            batches.append(cur)
        cur = LookaheadBatch()

    perr = None
    for it in items:
        if isinstance(it, ProtocolError):
            perr = it
            break
        if unit == "whole-commands":
            keys = get_keys_from_command(it.argv)
            if len(keys) > batch_size:  # oversize: alone, unprefetched
                close()
                batches.append(LookaheadBatch([it], []))
                continue
            if len(cur.prefetch_keys) + len(keys) > batch_size:  # would overflow
                close()
            cur.commands.append(it)
            cur.prefetch_keys.extend(keys)
            full = len(cur.prefetch_keys) == batch_size or len(cur.commands) >= KS_MAX_BATCH
        elif unit == "commands":
            cur.commands.append(it)
            k = first_key(it.argv)
            if k is not None:
                cur.prefetch_keys.append(k)
            full = len(cur.commands) >= batch_size
        else:
            cur.commands.append(it)
            room = batch_size - len(cur.prefetch_keys)
            cur.prefetch_keys.extend(get_keys_from_command(it.argv)[:room])
            full = len(cur.prefetch_keys) == batch_size or len(cur.commands) >= KS_MAX_BATCH
        if full:
            close()
    close()
    for b in batches:
        if len(b.prefetch_keys) <= 1:
            b.prefetch_keys = []  # a single key is not prefetched
    return batches, perr, consumed


REDIS_LOOKAHEAD = 16  # Redis server.lookahead: commands parsed ahead (c_ref pipeline.c)


def _redis_read_error(argv: tuple[bytes, ...] | list[bytes]) -> bool:
    """A command Redis's parser marks with a read error: unknown, or failing its arity."""
    arity = _ARITY.get(argv[0].lower())
    return arity is None or (arity > 0 and len(argv) != arity) or len(argv) < -arity


def redis_all_pending(
    buf: bytes, batch_size: int, lookahead: int = REDIS_LOOKAHEAD
) -> tuple[list[LookaheadBatch], ProtocolError | None, int]:
    """Split a query buffer as c_ref's ``pipeline=all-pending-14754`` (Redis
    ``processInputBuffer`` after #14440, ``addCommandToBatch`` after #14754, #14017's
    ``max_prefetch_size``; the rule is documented at the top of ``c_ref/pipeline.c``).

    Commands are parsed in rounds of up to ``lookahead``; every command of a round runs
    before the next is parsed. A round of more than one command gets one batch: its
    commands' keys in order while the batch holds fewer than ``2 * batch_size``, the walk
    stopping at an unknown command or one failing its arity check. A round of one command,
    or a batch of one key, prefetches nothing (``prefetch_keys`` []). A protocol error ends
    the last round; a command cut off at the end is in no round and not consumed.
    Returns (rounds, protocol error or None, bytes consumed)."""
    items, consumed = split_commands(buf)
    perr = next((it for it in items if isinstance(it, ProtocolError)), None)
    cmds = [it for it in items if not isinstance(it, ProtocolError)]
    if perr is not None:
        cmds = cmds[: items.index(perr)]
    cap = 2 * batch_size
    rounds = []
    for start in range(0, len(cmds), lookahead):
        r = LookaheadBatch(cmds[start:start + lookahead], [])
        if len(r.commands) > 1:
            for c in r.commands:
                if _redis_read_error(c.argv):
                    break
                room = cap - len(r.prefetch_keys)
                r.prefetch_keys.extend(get_keys_from_command(c.argv)[:room])
        if len(r.prefetch_keys) <= 1:
            r.prefetch_keys = []
        rounds.append(r)
    return rounds, perr, consumed


def load_prefetch_order(
    records: list[tuple[bytes, bytes]],
    variant: str = "prefetch-after-key",
    cluster: bool = False,
    min_exp: int = -1,
) -> list[Access]:
    """Access order of a snapshot load (``rdbLoad`` loop) under a load variant.

    Per record: read the key; with ``prefetch-after-key`` (PR #2311) hash it and prefetch
    the bucket an insert would use (creating the slot table first if missing); read the
    value; insert. ``prefetch-rehash`` hashes the key again at insert (the PR's double
    hashing: one more read of the key). ``none`` skips the prefetch and hashes at
    insert. Tables are ``Hashtable`` models."""
    if variant not in ("none", "prefetch-after-key", "prefetch-rehash"):
        raise ValueError(variant)
    tables: dict[int, Hashtable] = {}
    out: list[Access] = []
    for key, _val in records:
        slot = key_hash_slot(key) if cluster else 0
        out.append(Access("read", "key", key, key))
        ht = tables.setdefault(slot, Hashtable(min_exp=min_exp))
        if variant != "none":
            if ht.tables[0] is None:
                ht.expand_if_needed()
            t = 1 if ht.is_rehashing() else 0
            tab = ht.tables[t]
            assert tab is not None
            b = tab[ht.hash_fn(key) & (len(tab) - 1)]
            out.append(Access("prefetch", "bucket", b.bid, key))
        out.append(Access("read", "value", key, key))
        if variant != "prefetch-after-key":
            out.append(Access("read", "key", key, key))  # hash (again) at insert
        ht.add(key)
        h = ht.hash_fn(key)
        home = next(b for _, b in ht.buckets_for(h) if key in b.entries)
        out.append(Access("read", "bucket", home.bid, key))
    return out
