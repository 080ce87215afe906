"""Plain Python semantic model of the keyspace c_ref implements.

This is the oracle: no buckets, no prefetching, just what the keyspace answers and stores.
Commands (RESP2, Valkey reply bytes and error strings): GET, SET [NX|XX] [GET]
[EX s|PX ms|EXAT s|PXAT ms|KEEPTTL], DEL, UNLINK (DEL), EXISTS, MGET, MSET, MSETNX,
EXPIRE/PEXPIRE [NX|XX|GT|LT], TTL, PTTL, KEYS, SCAN cursor [MATCH p] [COUNT n] [TYPE t],
DBSIZE, FLUSHALL [SYNC|ASYNC], TOUCH, the hash type's HSET, HGET, HMGET, HGETALL, HDEL and
the sorted set's ZADD [NX|XX] [GT|LT] [CH] [INCR], ZSCORE, ZMSCORE, ZREM (a value is bytes,
a string, a dict of field -> value, a hash, or a :class:`ZSet` of member -> score; a command
on a key of another type answers WRONGTYPE, MGET a null). Anything else is an unknown command.

A hash keeps its fields in insertion order (an overwrite keeps the place, HDEL removes),
the order of c_ref's listpack encoding; ``hash_encoding`` says whether c_ref holds it as
a listpack (that order) or a table (another order): c_ref/t_hash.c's conversion rule.

c_ref is a single node owning every slot, so there is no CROSSSLOT by default.

SCAN's cursor is the model's own (a stable per-key hash order), not c_ref's: compare SCAN
results by coverage, not bytes.

Expiry runs on a logical clock in milliseconds (``set_time_ms``) that the test controls. A
key with absolute expire time ``when`` is logically expired once ``now > when``
(``keyIsExpired``). Expired keys are removed only lazily, when a command looks them up
(``expireIfNeeded`` from ``lookupKey*``), exactly where Valkey does; so DBSIZE counts
expired keys not yet looked up. KEYS filters expired keys without deleting them; SCAN
deletes the expired keys it visits that pass the MATCH filter (Valkey's scan filter step).

Cluster mode (``cluster=True``) keeps keys in per-slot tables (``key_hash_slot`` with
{hashtag}); a table exists only while non-empty, as with ``KVSTORE_FREE_EMPTY_HASHTABLES``.
With ``crossslot=True`` multi-key commands whose keys span slots get ``-CROSSSLOT``.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Callable

from kvsim.model import resp
from kvsim.model.d2string import d2string
from kvsim.model.glob import key_hash_slot, string_match_len
from kvsim.model.resp import LLONG_MAX, LLONG_MIN, Command, ProtocolError, split_commands

__all__ = ["Keyspace", "ModelError", "ZSet", "format_score", "parse_score", "scan_order_hash"]


class ModelError(AssertionError):
    """check_valid() found a broken model invariant."""


def scan_order_hash(key: bytes) -> int:
    """The model's SCAN order: a stable 62-bit hash per key (not c_ref's SipHash)."""
    return int.from_bytes(hashlib.blake2b(key, digest_size=8).digest(), "little") >> 2


def _wrap64(v: int) -> int:
    v &= (1 << 64) - 1
    return v - (1 << 64) if v >= 1 << 63 else v


def _err_arity(name: str) -> bytes:
    return resp.error(f"ERR wrong number of arguments for '{name}' command")


def _cstr(b: bytes) -> str:
    """An argument as C's %s prints it: up to the first NUL."""
    return b.split(b"\0", 1)[0].decode("latin-1")


SYNTAX_ERR = resp.error("ERR syntax error")
WRONGTYPE = resp.error("WRONGTYPE Operation against a key holding the wrong kind of value")
#: hash-max-listpack-entries / -value (c_ref/t_hash.h KS_HASH_MAX_LISTPACK_*)
HASH_MAX_LISTPACK_ENTRIES = 512
HASH_MAX_LISTPACK_VALUE = 64
NOT_INT = resp.error("ERR value is not an integer or out of range")
NOT_FLOAT = resp.error("ERR value is not a valid float")


class ZSet(dict):
    """A sorted set: member -> score (c_ref/t_zset.c). The order of its members is not
    modelled: no command here replies more than one member."""


#: what C's strtod reads as a whole decimal float or infinity (hexadecimal floats, which
#: strtod also reads, are outside the model)
_FLOAT_RE = re.compile(rb"[+-]?(?:(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|(?i:inf|infinity))")


def parse_score(b: bytes) -> float | None:
    """``getDoubleFromObject`` (c_ref ksZsetParseScore): the whole argument a float,
    no leading space, not NaN, no overflow or underflow to zero; else None."""
    if not _FLOAT_RE.fullmatch(b):
        return None
    d = float(b)
    digits = b.lower().split(b"e")[0]
    if math.isinf(d) and b"inf" not in b.lower():
        return None  # ERANGE overflow
    if d == 0 and any(c in b"123456789" for c in digits):
        return None  # ERANGE underflow to zero
    return d


def format_score(d: float) -> bytes:
    """``addReplyDouble``'s and ``zzlInsertAt``'s text of a score: Valkey's ``d2string``
    (c_ref's ksZsetFormatScore)."""
    return d2string(d)


class Keyspace:
    """The semantic model. ``execute(query)`` behaves like ``ksExecute`` (naive variant)."""

    def __init__(self, cluster: bool = False, crossslot: bool = False) -> None:
        self.cluster = cluster
        self.crossslot = crossslot and cluster
        self.data: dict[bytes, bytes | dict[bytes, bytes] | ZSet] = {}
        self.hash_tables: set[bytes] = set()  # hashes c_ref holds as a table
        self.expires: dict[bytes, int] = {}
        self.slots: dict[int, set[bytes]] = {}
        self.now_ms = 0
        #: lookupKey's ``stat_keyspace_hits`` / ``stat_keyspace_misses`` (INFO stats), as
        #: c_ref's ``ks->stats`` counts them: reads only (lookupKeyRead*), not writes
        self.stats = {"keyspace_hits": 0, "keyspace_misses": 0}
        self.commands: dict[bytes, tuple[str, int, Callable[[list[bytes]], bytes]]] = {
            b"get": ("get", 2, self._get),
            b"set": ("set", -3, self._set),
            b"del": ("del", -2, self._del),
            b"unlink": ("unlink", -2, self._del),
            b"exists": ("exists", -2, self._exists),
            b"touch": ("touch", -2, self._touch),
            b"mget": ("mget", -2, self._mget),
            b"mset": ("mset", -3, self._mset),
            b"msetnx": ("msetnx", -3, self._msetnx),
            b"expire": ("expire", -3, self._expire),
            b"pexpire": ("pexpire", -3, self._pexpire),
            b"ttl": ("ttl", 2, self._ttl),
            b"pttl": ("pttl", 2, self._pttl),
            b"keys": ("keys", 2, self._keys),
            b"scan": ("scan", -2, self._scan),
            b"dbsize": ("dbsize", 1, self._dbsize),
            b"flushall": ("flushall", -1, self._flushall),
            b"hset": ("hset", -4, self._hset),
            b"hget": ("hget", 3, self._hget),
            b"hmget": ("hmget", -3, self._hmget),
            b"hgetall": ("hgetall", 2, self._hgetall),
            b"hdel": ("hdel", -3, self._hdel),
            b"zadd": ("zadd", -4, self._zadd),
            b"zscore": ("zscore", 3, self._zscore),
            b"zmscore": ("zmscore", -3, self._zmscore),
            b"zrem": ("zrem", -3, self._zrem),
        }

    # --- Storage primitives (names mirror db.c) ---------------------------------------

    def set_time_ms(self, now_ms: int) -> None:
        """Set the logical clock (``ksSetTimeMs``)."""
        self.now_ms = now_ms

    def _slot(self, key: bytes) -> int:
        return key_hash_slot(key) if self.cluster else 0

    def key_is_expired(self, key: bytes) -> bool:
        when = self.expires.get(key)
        return when is not None and self.now_ms > when

    def db_add(self, key: bytes, val: bytes) -> None:
        self.data[key] = val
        self.slots.setdefault(self._slot(key), set()).add(key)

    def db_delete(self, key: bytes) -> bool:
        if key not in self.data:
            return False
        del self.data[key]
        self.expires.pop(key, None)
        self.hash_tables.discard(key)
        slot = self._slot(key)
        self.slots[slot].discard(key)
        if not self.slots[slot]:
            del self.slots[slot]  # the empty slot table is freed
        return True

    def expire_if_needed(self, key: bytes) -> bool:
        """Delete ``key`` if logically expired; True if it was deleted."""
        if key in self.data and self.key_is_expired(key):
            self.db_delete(key)
            return True
        return False

    def lookup_key(self, key: bytes) -> bytes | None:
        """``lookupKeyWrite``: lazy expiry, then the value or None."""
        self.expire_if_needed(key)
        return self.data.get(key)

    def lookup_key_read(self, key: bytes) -> bytes | None:
        """``lookupKeyRead`` (and ``lookupKeyReadWithFlags``): :meth:`lookup_key`, and the
        keyspace hit or miss ``lookupKey`` counts."""
        v = self.lookup_key(key)
        self.stats["keyspace_hits" if v is not None else "keyspace_misses"] += 1
        return v

    def set_key(self, key: bytes, val: bytes, keepttl: bool = False) -> None:
        """``setKey``: lookup (lazy expiry), then add or overwrite; clears the TTL unless
        keepttl."""
        self.lookup_key(key)
        if key in self.data:
            self.data[key] = val
            self.hash_tables.discard(key)
            if not keepttl:
                self.expires.pop(key, None)
        else:
            self.db_add(key, val)

    def set_expire(self, key: bytes, when: int) -> None:
        self.expires[key] = when

    # --- Queries used as invariants -------------------------------------------------

    def dbsize(self) -> int:
        """Stored keys, including expired ones not yet deleted (what DBSIZE answers)."""
        return len(self.data)

    def live_keys(self) -> set[bytes]:
        """Keys that are not logically expired (what ``KEYS *`` returns, as a set)."""
        return {k for k in self.data if not self.key_is_expired(k)}

    def items(self) -> dict[bytes, tuple[bytes, int | None]]:
        """Every stored key -> (value, absolute expire ms or None)."""
        return {k: (v, self.expires.get(k)) for k, v in self.data.items()}

    def hash_encoding(self, key: bytes) -> str | None:
        """How c_ref holds the hash at ``key``: "listpack" (fields in this model's order)
        or "hashtable" (a table: another order); None if ``key`` holds no hash."""
        v = self.data.get(key)
        if not isinstance(v, dict) or isinstance(v, ZSet):
            return None
        return "hashtable" if key in self.hash_tables else "listpack"

    def check_valid(self) -> None:
        """Assert the model's own invariants (expensive no-op when all is well)."""
        if not set(self.expires) <= set(self.data):
            raise ModelError("expire without key")
        for k, v in self.data.items():
            if isinstance(v, dict) and not v:
                raise ModelError(f"empty hash or sorted set kept at {k!r}")
        if not self.hash_tables <= {k for k, v in self.data.items()
                                    if isinstance(v, dict) and not isinstance(v, ZSet)}:
            raise ModelError("a table encoding recorded for a key that holds no hash")
        seen: set[bytes] = set()
        for slot, keys in self.slots.items():
            if not keys:
                raise ModelError(f"empty slot table {slot} not freed")
            for k in keys:
                if self._slot(k) != slot:
                    raise ModelError(f"key {k!r} in wrong slot {slot}")
            seen |= keys
        if seen != set(self.data) or sum(map(len, self.slots.values())) != len(self.data):
            raise ModelError("slot tables disagree with the key set")

    # --- Execution ------------------------------------------------------------------

    def execute(self, query: bytes) -> tuple[bytes, int]:
        """Run every complete command in ``query``; return (replies, bytes consumed)."""
        items, consumed = split_commands(query)
        out = []
        for item in items:
            if isinstance(item, ProtocolError):
                out.append(resp.error("ERR " + item.message))
            else:
                assert isinstance(item, Command)
                out.append(self.call(list(item.argv)))
        return b"".join(out), consumed

    def call(self, argv: list[bytes]) -> bytes:
        """Execute one command given as an argument vector; return its reply bytes."""
        entry = self.commands.get(argv[0].lower())
        if entry is None:
            args = ""
            for a in argv[1:]:
                if len(args) >= 128:
                    break
                args += "'" + _cstr(a)[: 128 - len(args)] + "' "
            return resp.error(
                f"ERR unknown command '{_cstr(argv[0])[:128]}', with args beginning with: {args}"
            )
        name, arity, fn = entry
        if (arity > 0 and len(argv) != arity) or len(argv) < -arity:
            return _err_arity(name)
        if self.crossslot and name in _MULTIKEY:
            keys = argv[1::2] if name in ("mset", "msetnx") else argv[1:]
            if len({key_hash_slot(k) for k in keys}) > 1:
                return resp.error("CROSSSLOT Keys in request don't hash to the same slot")
        return fn(argv)

    # --- Commands -------------------------------------------------------------------

    def _get(self, argv: list[bytes]) -> bytes:
        v = self.lookup_key_read(argv[1])
        if isinstance(v, dict):
            return WRONGTYPE
        return resp.NULL_BULK if v is None else resp.bulk(v)

    def _set(self, argv: list[bytes]) -> bytes:
        """SET key value [NX|XX] [GET] [EX s|PX ms|EXAT s|PXAT ms|KEEPTTL].

        As ``parseExtendedStringArgumentsOrReply``: every option is checked for syntax
        first (a repeated EX/PX replaces the earlier one), the expire is validated after,
        then GET replies the old value, then NX/XX decide."""
        nx = xx = get = keepttl = False
        unit: str | None = None
        expire: bytes | None = None
        j = 3
        while j < len(argv):
            opt = _cstr(argv[j]).lower()
            nxt = argv[j + 1] if j + 1 < len(argv) else None
            others = {"ex", "px", "exat", "pxat"} - {opt}
            if opt == "nx" and not xx:
                nx = True
            elif opt == "xx" and not nx:
                xx = True
            elif opt == "get":
                get = True
            elif opt == "keepttl" and unit is None:
                keepttl = True
            elif opt in ("ex", "px", "exat", "pxat") and not keepttl and unit not in others \
                    and nxt is not None:
                unit, expire = opt, nxt
                j += 1
            else:
                return SYNTAX_ERR
            j += 1
        when = None
        if expire is not None:
            ms = resp.string2ll(expire)
            if ms is None:
                return NOT_INT
            secs = unit in ("ex", "exat")
            if ms <= 0 or (secs and ms > LLONG_MAX // 1000):
                return resp.error("ERR invalid expire time in 'set' command")
            ms *= 1000 if secs else 1
            when = _wrap64(ms + self.now_ms) if unit in ("ex", "px") else ms
            if when <= 0:
                return resp.error("ERR invalid expire time in 'set' command")
        key = argv[1]
        out = b""
        if get:  # getGenericCommand: lookupKeyReadOrReply
            old = self.lookup_key_read(key)
            if isinstance(old, dict):
                return WRONGTYPE
            out = resp.NULL_BULK if old is None else resp.bulk(old)
        found = self.lookup_key(key) is not None
        if (nx and found) or (xx and not found):
            return out or resp.NULL_BULK
        self.set_key(key, argv[2], keepttl=keepttl or when is not None)
        if when is not None:
            self.set_expire(key, when)
        return out or resp.OK

    def _del(self, argv: list[bytes]) -> bytes:
        n = 0
        for k in argv[1:]:
            self.expire_if_needed(k)
            n += self.db_delete(k)
        return resp.integer(n)

    def _exists(self, argv: list[bytes]) -> bytes:
        return resp.integer(sum(self.lookup_key_read(k) is not None for k in argv[1:]))

    def _touch(self, argv: list[bytes]) -> bytes:
        """TOUCH (``touchCommand``: ``lookupKeyRead`` per key): the keys that exist. Its
        other effect, the access clock stored in each found key's object, is not modelled:
        no command of the model reads it."""
        return self._exists(argv)

    def _mget(self, argv: list[bytes]) -> bytes:
        vals = [self.lookup_key_read(k) for k in argv[1:]]
        return resp.array([resp.bulk(v) if isinstance(v, bytes) else resp.NULL_BULK for v in vals])

    def _mset(self, argv: list[bytes], nx: bool = False) -> bytes:
        if len(argv) % 2 == 0:
            return _err_arity("msetnx" if nx else "mset")
        if nx:
            for k in argv[1::2]:
                if self.lookup_key(k) is not None:
                    return resp.integer(0)
        for k, v in zip(argv[1::2], argv[2::2], strict=True):
            self.set_key(k, v)
        return resp.integer(1) if nx else resp.OK

    def _msetnx(self, argv: list[bytes]) -> bytes:
        return self._mset(argv, nx=True)

    def _expire(self, argv: list[bytes], unit: int = 1000, name: str = "expire") -> bytes:
        flags: set[str] = set()
        for a in argv[3:]:
            o = _cstr(a).lower()
            if o in ("nx", "xx", "gt", "lt"):
                flags.add(o)
            else:
                return resp.error(f"ERR Unsupported option {_cstr(a)}")
        if "nx" in flags and flags & {"xx", "gt", "lt"}:
            return resp.error("ERR NX and XX, GT or LT options at the same time are not compatible")
        if {"gt", "lt"} <= flags:
            return resp.error("ERR GT and LT options at the same time are not compatible")
        when = resp.string2ll(argv[2])
        if when is None:
            return NOT_INT
        bad = resp.error(f"ERR invalid expire time in '{name}' command")
        if unit == 1000:
            if when > LLONG_MAX // 1000 or when < -(-LLONG_MIN // 1000):
                return bad
            when *= 1000
        if when > LLONG_MAX - self.now_ms:
            return bad
        when += self.now_ms
        key = argv[1]
        if self.lookup_key(key) is None:
            return resp.integer(0)
        cur = self.expires.get(key)
        if "nx" in flags and cur is not None:
            return resp.integer(0)
        if "xx" in flags and cur is None:
            return resp.integer(0)
        if "gt" in flags and (cur is None or when <= cur):
            return resp.integer(0)
        if "lt" in flags and cur is not None and when >= cur:
            return resp.integer(0)
        if when <= self.now_ms:
            self.db_delete(key)
        else:
            self.set_expire(key, when)
        return resp.integer(1)

    def _pexpire(self, argv: list[bytes]) -> bytes:
        return self._expire(argv, unit=1, name="pexpire")

    def _ttl(self, argv: list[bytes], ms: bool = False) -> bytes:
        key = argv[1]
        if self.lookup_key_read(key) is None:  # LOOKUP_NOTOUCH: counted
            return resp.integer(-2)
        when = self.expires.get(key)
        if when is None:
            return resp.integer(-1)
        ttl = max(when - self.now_ms, 0)
        return resp.integer(ttl if ms else (ttl + 500) // 1000)

    def _pttl(self, argv: list[bytes]) -> bytes:
        return self._ttl(argv, ms=True)

    def _keys(self, argv: list[bytes]) -> bytes:
        pat = argv[1]
        allkeys = pat == b"*"
        out = [
            resp.bulk(k)
            for k in sorted(self.data, key=scan_order_hash)
            if (allkeys or string_match_len(pat, k)) and not self.key_is_expired(k)
        ]
        return resp.array(out)

    def _scan(self, argv: list[bytes]) -> bytes:
        cur = _string2ull(argv[1])
        if cur is None:
            return resp.error("ERR invalid cursor")
        count, pat, typename = 10, None, None
        i = 2
        while i < len(argv):
            opt, left = _cstr(argv[i]).lower(), len(argv) - i
            if opt == "count" and left >= 2:
                c = resp.string2ll(argv[i + 1])
                if c is None:
                    return NOT_INT
                if c < 1:
                    return SYNTAX_ERR
                count = c
            elif opt == "match" and left >= 2:
                pat = None if argv[i + 1] == b"*" else argv[i + 1]
            elif opt == "type" and left >= 2:
                typename = _cstr(argv[i + 1]).lower()
            else:
                return SYNTAX_ERR
            i += 2
        order = sorted((scan_order_hash(k), k) for k in self.data)
        batch = [(h, k) for h, k in order if h >= cur]
        take: list[bytes] = []
        nxt = 0
        for idx, (h, k) in enumerate(batch):
            if len(take) >= count and h != batch[idx - 1][0]:
                nxt = h
                break
            take.append(k)
        out = []
        for k in take:
            v = self.data[k]
            kind = "zset" if isinstance(v, ZSet) else "hash" if isinstance(v, dict) else "string"
            if typename is not None and typename != kind:
                continue  # filtered before the expiry check: deletes nothing
            if pat is not None and not string_match_len(pat, k):
                continue
            if self.expire_if_needed(k):
                continue
            out.append(resp.bulk(k))
        return resp.array([resp.bulk(str(nxt).encode()), resp.array(out)])

    def _dbsize(self, argv: list[bytes]) -> bytes:
        return resp.integer(self.dbsize())

    def _flushall(self, argv: list[bytes]) -> bytes:
        if len(argv) > 2 or (len(argv) == 2 and _cstr(argv[1]).lower() not in ("sync", "async")):
            return SYNTAX_ERR
        self.data.clear()
        self.expires.clear()
        self.slots.clear()
        self.hash_tables.clear()
        return resp.OK

    # --- The hash type (c_ref/t_hash.c, commands_hash.c) ----------------------------

    def lookup_hash(self, key: bytes, write: bool = False
                    ) -> tuple[dict[bytes, bytes] | None, bool]:
        """``lookupKeyRead`` (``lookupKeyWrite`` with ``write``) + ``checkType``: (the hash
        or None, whether the key holds a string)."""
        v = self.lookup_key(key) if write else self.lookup_key_read(key)
        if isinstance(v, (bytes, ZSet)):
            return None, True
        return v, False

    def _hset(self, argv: list[bytes]) -> bytes:
        if len(argv) % 2 == 1:
            return _err_arity("hset")
        key = argv[1]
        h, wrong = self.lookup_hash(key, write=True)
        if wrong:
            return WRONGTYPE
        if h is None:
            h = {}
            self.db_add(key, h)
        pairs = list(zip(argv[2::2], argv[3::2], strict=True))
        # hashTypeTryConversion, then hashTypeSet's length check
        if len(pairs) > HASH_MAX_LISTPACK_ENTRIES or any(
                len(a) > HASH_MAX_LISTPACK_VALUE for a in argv[2:]):
            self.hash_tables.add(key)
        created = 0
        for f, v in pairs:
            created += f not in h
            h[f] = v
        if len(h) > HASH_MAX_LISTPACK_ENTRIES:
            self.hash_tables.add(key)
        return resp.integer(created)

    def _hget(self, argv: list[bytes]) -> bytes:
        h, wrong = self.lookup_hash(argv[1])
        if wrong:
            return WRONGTYPE
        v = None if h is None else h.get(argv[2])
        return resp.NULL_BULK if v is None else resp.bulk(v)

    def _hmget(self, argv: list[bytes]) -> bytes:
        h, wrong = self.lookup_hash(argv[1])
        if wrong:
            return WRONGTYPE
        vals = [None if h is None else h.get(f) for f in argv[2:]]
        return resp.array([resp.NULL_BULK if v is None else resp.bulk(v) for v in vals])

    def _hgetall(self, argv: list[bytes]) -> bytes:
        h, wrong = self.lookup_hash(argv[1])
        if wrong:
            return WRONGTYPE
        return resp.array([resp.bulk(x) for fv in (h or {}).items() for x in fv])

    def _hdel(self, argv: list[bytes]) -> bytes:
        return self._remove_each(argv, self.lookup_hash)

    def _remove_each(self, argv: list[bytes],
                     lookup: Callable[..., tuple[dict | None, bool]]) -> bytes:
        """HDEL / ZREM (``lookup``: lookup_hash / lookup_zset): each name present in the
        key's hash or sorted set removed; the key goes with its last field or member. The
        reply counts the names removed."""
        key = argv[1]
        coll, wrong = lookup(key, write=True)  # lookupKeyWriteOrReply
        if wrong:
            return WRONGTYPE
        deleted = 0
        for n in argv[2:]:
            if coll is None or n not in coll:
                continue
            del coll[n]
            deleted += 1
            if not coll:
                self.db_delete(key)
                break
        return resp.integer(deleted)

    # --- The sorted set (c_ref/t_zset.c, commands_zset.c) ---------------------------

    def lookup_zset(self, key: bytes, write: bool = False) -> tuple[ZSet | None, bool]:
        """``lookupKeyRead`` (``lookupKeyWrite`` with ``write``) + ``checkType``: (the
        sorted set or None, whether the key holds another type)."""
        v = self.lookup_key(key) if write else self.lookup_key_read(key)
        if v is not None and not isinstance(v, ZSet):
            return None, True
        return v, False

    def _zadd(self, argv: list[bytes]) -> bytes:
        """ZADD key [NX|XX] [GT|LT] [CH] [INCR] score member ... (``zaddGenericCommand``,
        ``zsetAdd``): the flags up to the first argument that is none, then the errors in
        Valkey's order, every score parsed before the key is looked up."""
        flags: set[bytes] = set()
        i = 2
        while i < len(argv) and argv[i].lower() in _ZADD_FLAGS:
            flags.add(argv[i].lower())
            i += 1
        rest = argv[i:]
        if len(rest) % 2 or not rest:
            return SYNTAX_ERR
        nx, xx, gt, lt = (f in flags for f in (b"nx", b"xx", b"gt", b"lt"))
        incr = b"incr" in flags
        if nx and xx:
            return resp.error("ERR XX and NX options at the same time are not compatible")
        if (gt and nx) or (lt and nx) or (gt and lt):
            return resp.error(
                "ERR GT, LT, and/or NX options at the same time are not compatible")
        if incr and len(rest) > 2:
            return resp.error("ERR INCR option supports a single increment-element pair")
        pairs = []
        for sc, m in zip(rest[::2], rest[1::2], strict=True):  # every score before anything
            d = parse_score(sc)
            if d is None:
                return NOT_FLOAT
            pairs.append((m, d))
        key = argv[1]
        z, wrong = self.lookup_zset(key, write=True)
        if wrong:
            return WRONGTYPE
        if z is None and not xx:
            z = ZSet()
            self.db_add(key, z)
        added = updated = processed = 0
        score = 0.0
        for m, d in pairs if z is not None else []:
            if m in z:
                if nx:
                    continue
                cur = z[m]
                if incr:
                    d += cur
                    if math.isnan(d):
                        return resp.error("ERR resulting score is not a number (NaN)")
                if (lt and d >= cur) or (gt and d <= cur):
                    continue
                if d != cur:  # an equal score (0 and -0) is left as it is
                    z[m] = d
                    updated += 1
            elif xx:
                continue
            else:
                z[m] = d
                added += 1
            processed += 1
            score = d
        if not incr:
            return resp.integer(added + updated if b"ch" in flags else added)
        return resp.bulk(format_score(score)) if processed else resp.NULL_BULK

    def _zscore(self, argv: list[bytes]) -> bytes:
        z, wrong = self.lookup_zset(argv[1])
        if wrong:
            return WRONGTYPE
        if z is None or argv[2] not in z:
            return resp.NULL_BULK
        return resp.bulk(format_score(z[argv[2]]))

    def _zmscore(self, argv: list[bytes]) -> bytes:
        z, wrong = self.lookup_zset(argv[1])
        if wrong:
            return WRONGTYPE
        return resp.array([resp.bulk(format_score(z[m])) if z is not None and m in z
                           else resp.NULL_BULK for m in argv[2:]])

    def _zrem(self, argv: list[bytes]) -> bytes:
        return self._remove_each(argv, self.lookup_zset)


_MULTIKEY = {"del", "unlink", "exists", "touch", "mget", "mset", "msetnx"}
#: ZADD's flags (``zaddGenericCommand``'s option loop)
_ZADD_FLAGS = {b"nx", b"xx", b"ch", b"incr", b"gt", b"lt"}

def _string2ull(b: bytes) -> int | None:
    """Valkey ``string2ull`` (SCAN cursor): string2ll, else strtoull leniency."""
    v = resp.string2ll(b)
    if v is not None:
        return v if v >= 0 else None
    s = _cstr(b)
    t = s.lstrip(" \t\n\v\f\r")
    neg = t.startswith("-")
    if t[:1] in "+-" and t:
        t = t[1:]
    if not t or not t.isdigit() or not t.isascii():
        return None
    v = int(t)
    if v >= 1 << 64:
        return None
    return ((1 << 64) - v) % (1 << 64) if neg else v
