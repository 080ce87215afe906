"""Equivalence harness: prove a batched variant equals naive execution.

Someone adding a batched path in C runs::

    from kvsim.model.harness import assert_variant_equivalent
    assert_variant_equivalent("multikey=mine batch={batch}", options="table=dict cluster=1")

(or uses the ``check_variant`` pytest fixture from ``model/tests/conftest.py``). It drives a
Hypothesis ``RuleBasedStateMachine`` that runs, in lockstep, the Python model, c_ref under
the naive variant and c_ref under each variant given (``{batch}`` is replaced by a batch
size drawn per call from 1..128, so one run covers every size). After every step all
replies and consumed byte counts must be identical (c_ref variants byte for byte against
c_ref naive; the model byte for byte too except KEYS/SCAN order, compared as sets); the
invariants are identical DBSIZE, identical snapshot bytes across c_ref backends and
identical snapshot content everywhere, and ``check_valid()`` of every backend; rules also
check KEYS sets, full-SCAN coverage, SCAN coverage across interleaved writes, snapshot
save/load and rejection of corrupted snapshots.

Any object with the ``Backend`` methods can take part, so a Python model of a variant can
be checked (and caught) by the same machine.

This module and :mod:`kvsim.model.strategies` are public API: Hypothesis is one of kvsim's
run-time dependencies, so a base install (no ``test`` extra) can use them; pytest is not
needed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from kvsim.model import cref_binding as cref
from kvsim.model import resp, snapshot
from kvsim.model import strategies as S
from kvsim.model.keyspace import Keyspace as ModelKeyspace
from kvsim.model.resp import encode_command, parse_replies

__all__ = [
    "Backend",
    "ModelBackend",
    "CrefBackend",
    "LockstepConfig",
    "make_lockstep_machine",
    "assert_variant_equivalent",
    "parse_options",
    "Mismatch",
]


class Mismatch(AssertionError):
    """Two backends disagreed."""


class Backend(Protocol):
    """What the lockstep machine needs from one implementation."""

    name: str

    def execute(self, query: bytes, batch: int) -> tuple[bytes, int]: ...
    def set_time_ms(self, now_ms: int) -> None: ...
    def dbsize(self) -> int: ...
    def check_valid(self) -> None: ...
    def snapshot(self) -> bytes: ...
    def contents(self) -> dict[bytes, tuple[bytes, int | None]]: ...
    def load(self, snap: bytes) -> bool: ...
    def close(self) -> None: ...


def parse_options(options: str) -> dict[str, str]:
    return dict(kv.split("=", 1) for kv in options.split())


class _KeyspaceBackend:
    """What both backends hand straight to their keyspace ``ks``."""

    ks: Any

    def set_time_ms(self, now_ms: int) -> None:
        self.ks.set_time_ms(now_ms)

    def dbsize(self) -> int:
        return self.ks.dbsize()

    def check_valid(self) -> None:
        self.ks.check_valid()


class ModelBackend(_KeyspaceBackend):
    """The semantic model (``model.keyspace.Keyspace``)."""

    def __init__(self, options: str = "", crossslot: bool = False, name: str = "model"):
        opts = parse_options(options)
        self.name = name
        self.ks = ModelKeyspace(cluster=opts.get("cluster", "0") == "1", crossslot=crossslot)

    def execute(self, query: bytes, batch: int) -> tuple[bytes, int]:
        return self.ks.execute(query)

    def snapshot(self) -> bytes:
        return snapshot.save_snapshot(snapshot.model_records(self.ks))

    def contents(self) -> dict[bytes, tuple[bytes, int | None]]:
        return self.ks.items()

    def load(self, snap: bytes) -> bool:
        try:
            snapshot.load_snapshot(self.ks, snap)
        except snapshot.SnapshotError:
            return False
        return True

    def close(self) -> None:
        pass


class CrefBackend(_KeyspaceBackend):
    """c_ref under one variant template (``{batch}`` is formatted per call)."""

    def __init__(self, options: str, variant: str = "", name: str | None = None,
                 library: str | None = None):
        self.name = name or (variant or "naive")
        self.variant = variant
        self.ks = cref.Keyspace(options, library)

    def execute(self, query: bytes, batch: int) -> tuple[bytes, int]:
        return self.ks.execute(query, self.variant.format(batch=batch))

    def _v(self) -> str:
        return self.variant.format(batch=16)

    def snapshot(self) -> bytes:
        return self.ks.save_snapshot(self._v())

    def contents(self) -> dict[bytes, tuple[bytes, int | None]]:
        return snapshot.snapshot_contents(self.snapshot())

    def load(self, snap: bytes) -> bool:
        try:
            self.ks.load_snapshot(snap, self._v())
        except cref.CrefError:
            return False
        return True

    def close(self) -> None:
        self.ks.close()


def probe_crossslot(options: str, library: str | None = None) -> bool:
    """Does c_ref (with these options) reject multi-key commands spanning slots?"""
    if parse_options(options).get("cluster", "0") != "1":
        return False
    if library is None and not cref.library_available():
        return False
    with cref.Keyspace(options, library) as ks:
        rep, _ = ks.execute(encode_command(b"MGET", b"a", b"b"))
    return rep.startswith(b"-CROSSSLOT")


@dataclass
class LockstepConfig:
    """One lockstep run: c_ref ``options``, the variant templates to check against naive,
    whether to include the model and c_ref naive, and extra Python backends."""

    options: str = ""
    variants: Sequence[str] = ()
    with_model: bool = True
    with_cref_naive: bool = True
    extra_backends: Sequence[Callable[[], Backend]] = ()
    seed: int = 0
    crossslot: bool | None = None  # None: probe c_ref
    model_factory: Callable[[str, bool], Backend] | None = None
    library: str | None = None  # c_ref library path (default: cref.library_path())
    pool: list[bytes] = field(default_factory=list)


def make_lockstep_machine(cfg: LockstepConfig) -> type[RuleBasedStateMachine]:
    """Build the RuleBasedStateMachine class for ``cfg``."""
    seed = cfg.seed or int(parse_options(cfg.options).get("seed", "0"))
    pool = cfg.pool or S.key_pool(seed)
    cluster = parse_options(cfg.options).get("cluster", "0") == "1"
    crossslot = (probe_crossslot(cfg.options, cfg.library) if cfg.crossslot is None
                 else cfg.crossslot)
    batches = st.integers(1, 128)

    class Lockstep(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.backends: list[Backend] = []
            if cfg.with_model:
                mk = cfg.model_factory or ModelBackend
                self.backends.append(mk(cfg.options, crossslot))
            if cfg.with_cref_naive:
                self.backends.append(CrefBackend(cfg.options, "", "cref-naive", cfg.library))
            for v in cfg.variants:
                self.backends.append(CrefBackend(cfg.options, v, library=cfg.library))
            for f in cfg.extra_backends:
                self.backends.append(f())
            self.now = 0
            self.tag = 0

        def teardown(self) -> None:
            for b in self.backends:
                b.close()

        # --- lockstep execution ----------------------------------------------------

        def feed(self, chunks: list[bytes], batch: int, unordered: bool = False) -> bytes:
            """Feed ``chunks`` as successive reads into every backend; compare every reply
            and consumed count. Returns the reference backend's concatenated replies."""
            ref_out = b""
            qbufs = [b""] * len(self.backends)
            for chunk in chunks:
                results = []
                for i, b in enumerate(self.backends):
                    qbufs[i] += chunk
                    rep, used = b.execute(qbufs[i], batch)
                    qbufs[i] = qbufs[i][used:]
                    results.append((b.name, rep, used))
                self.compare(results, unordered)
                ref_out += results[0][1]
            return ref_out

        def compare(self, results: list[tuple[str, bytes, int]], unordered: bool) -> None:
            n0, r0, u0 = results[0]
            for n, r, u in results[1:]:
                if u != u0:
                    raise Mismatch(f"consumed: {n0}={u0} {n}={u}")
                same = r == r0
                if not same and unordered:
                    same = _as_sets(r) == _as_sets(r0)
                if not same:
                    raise Mismatch(f"reply differs:\n  {n0}: {r0[:600]!r}\n  {n}: {r[:600]!r}")

        def run(self, cmds: list[list[bytes]], batch: int) -> None:
            self.feed([S.encode(cmds)], batch)

        # --- rules -------------------------------------------------------------------

        @initialize(cmds=S.pipeline(pool, 4), batch=batches)
        def start(self, cmds: list[list[bytes]], batch: int) -> None:
            self.run(cmds, batch)

        @rule(cmds=S.pipeline(pool), batch=batches)
        def pipeline(self, cmds: list[list[bytes]], batch: int) -> None:
            self.run(cmds, batch)

        @rule(cmds=S.pipeline(pool, 4), batch=batches, data=st.data())
        def split_pipeline(self, cmds: list[list[bytes]], batch: int, data: st.DataObject) -> None:
            """The same pipeline delivered in pieces: cut at arbitrary bytes."""
            buf = S.encode(cmds)
            cuts = sorted(data.draw(st.lists(st.integers(0, len(buf)), max_size=3)))
            pts = [0, *cuts, len(buf)]
            self.feed([buf[a:b] for a, b in zip(pts, pts[1:], strict=False)], batch)

        @rule(cmds=S.pipeline(pool, 3), junk=S.malformed, batch=batches)
        def malformed(self, cmds: list[list[bytes]], junk: bytes, batch: int) -> None:
            """Valid commands, then bytes that are a protocol error (or an inline
            command): the commands before it run, then the error reply, all consumed."""
            self.feed([S.encode(cmds) + junk], batch)

        @rule(ms=st.one_of(st.integers(0, 50), st.integers(0, 4000)))
        def advance_clock(self, ms: int) -> None:
            self.now += ms
            for b in self.backends:
                b.set_time_ms(self.now)

        @rule(n=st.one_of(st.sampled_from([1, 2, 16, 17, 31, 32, 33, 48]), st.integers(1, 64)),
              expired=st.sampled_from([1, 1, 2, 3, 20]),
              kind=st.sampled_from([b"MSET", b"MSETNX", b"MGET"]),
              batch=batches)
        def expire_then_multikey(self, n: int, expired: int, kind: bytes, batch: int) -> None:
            """A fresh slot holding only expired keys, then one MSET/MSETNX/MGET whose first
            keys are those: the lookup of the last one empties the slot table (freed in
            cluster mode) in the middle of the command, before the next 16-key batch."""
            self.tag += 1
            keys = S.hashtag_keys(b"x%d" % self.tag, n)
            setup = [[b"SET", k, b"old", b"PX", b"1"] for k in keys[:expired]]
            self.run(setup, batch)
            self.advance_clock(2)
            if kind == b"MGET":
                cmds = [[b"MGET", *keys]]
            else:
                cmds = [[kind, *[x for k in keys for x in (k, b"new")]], [b"MGET", *keys]]
            self.run([*cmds, [b"DBSIZE"]], batch)

        @rule(pattern=S.glob_patterns, batch=batches)
        def keys(self, pattern: bytes, batch: int) -> None:
            self.feed([encode_command(b"KEYS", pattern)], batch, unordered=True)

        @rule(pattern=st.one_of(st.none(), S.glob_patterns), count=st.integers(1, 20),
              batch=batches)
        def full_scan(self, pattern: bytes | None, count: int, batch: int) -> None:
            """A complete SCAN iteration per backend; the union of returned keys must equal
            the live keys matching the pattern (nothing changes between the calls)."""
            expect = None
            for i, b in enumerate(self.backends):
                got: set[bytes] = set()
                cursor = b"0"
                for _ in range(10_000):
                    args = [b"SCAN", cursor, b"COUNT", str(count).encode()]
                    if pattern is not None:
                        args += [b"MATCH", pattern]
                    rep, _ = b.execute(encode_command(*args), batch)
                    (val,) = parse_replies(rep)
                    assert isinstance(val, list), f"{b.name}: SCAN replied {rep!r}"
                    cursor = val[0]
                    got |= set(val[1])
                    if cursor == b"0":
                        break
                else:
                    raise Mismatch(f"{b.name}: SCAN did not terminate")
                if i == 0:
                    expect = got
                elif got != expect:
                    raise Mismatch(f"SCAN coverage: {self.backends[0].name}={sorted(expect)} "
                                   f"{b.name}={sorted(got)}")

        @rule(count=st.sampled_from([3, 50, 500]),
              writes=st.lists(S.pipeline(pool, 3), max_size=6),
              batch=batches)
        def scan_across_writes(self, count: int, writes: list[list[list[bytes]]],
                               batch: int) -> None:
            """SCAN calls interleaved with writes (which may resize or rehash the tables):
            every key live from start to end and not named by a write must be returned.
            c_ref backends share one structure, so their SCAN replies must be identical.
            A full scan first deletes every expired key everywhere: SCAN expires the keys
            it visits, and which ones a partial scan visits is implementation-defined, so
            expired keys left over would make DBSIZE differ mid-rule."""
            self.full_scan(None, 500, batch)
            stable = self.live_keys()
            for cmds in writes:
                for c in cmds:
                    stable -= set(c[1:])
            cursors = [b"0"] * len(self.backends)
            seen: list[set[bytes]] = [set() for _ in self.backends]
            done = [False] * len(self.backends)
            pending = list(writes)
            for _ in range(10_000):
                if all(done):
                    break
                replies = []
                for i, b in enumerate(self.backends):
                    if done[i]:
                        continue
                    q = encode_command(b"SCAN", cursors[i], b"COUNT", str(count).encode())
                    rep, _ = b.execute(q, batch)
                    (val,) = parse_replies(rep)
                    cursors[i] = val[0]
                    seen[i] |= set(val[1])
                    done[i] = cursors[i] == b"0"
                    if isinstance(b, CrefBackend):
                        replies.append((b.name, rep))
                if len({r for _, r in replies}) > 1:
                    raise Mismatch(f"SCAN replies differ across c_ref backends: {replies}")
                if pending:
                    self.run(pending.pop(0), batch)
            else:
                raise Mismatch("SCAN did not terminate")
            for cmds in pending:
                self.run(cmds, batch)
            for b, got in zip(self.backends, seen, strict=True):
                if not stable <= got:
                    raise Mismatch(f"{b.name}: SCAN missed {sorted(stable - got)[:5]}")

        def live_keys(self) -> set[bytes]:
            rep, _ = self.backends[0].execute(encode_command(b"KEYS", b"*"), 16)
            (val,) = parse_replies(rep)
            for b in self.backends[1:]:
                b.execute(encode_command(b"KEYS", b"*"), 16)  # keep the backends in step
            return set(val)

        @precondition(lambda self: cluster)
        @rule(batch=batches, data=st.data())
        def many_in_one_slot(self, batch: int, data: st.DataObject) -> None:
            """A large MSET/MGET in one slot (hashtag keys), crossing batch boundaries."""
            ks = data.draw(st.lists(st.sampled_from(S.hashtag_keys(b"t", 24)), min_size=15,
                                    max_size=70))
            self.run([[b"MSET", *[x for k in ks for x in (k, k)]], [b"MGET", *ks]], batch)

        @rule(p=st.integers(0, 30))
        def flushall(self, p: int) -> None:
            if p == 0:  # rare: it wipes the state the other rules build up
                self.run([[b"FLUSHALL"]], 16)

        # --- invariants --------------------------------------------------------------

        @invariant()
        def same_dbsize(self) -> None:
            sizes = {b.name: b.dbsize() for b in self.backends}
            if len(set(sizes.values())) > 1:
                raise Mismatch(f"DBSIZE differs: {sizes}")

        @invariant()
        def all_valid(self) -> None:
            for b in self.backends:
                b.check_valid()

        @invariant()
        def same_snapshot(self) -> None:
            """Identical snapshot bytes across c_ref backends (same structure, whatever the
            iterate= prefetch), identical content everywhere."""
            snaps = [(b.name, b.snapshot()) for b in self.backends]
            c0 = snapshot.snapshot_contents(snaps[0][1])
            crefs = [(n, sn) for (n, sn), b in zip(snaps, self.backends, strict=True)
                     if isinstance(b, CrefBackend)]
            for n, sn in crefs[1:]:
                if sn != crefs[0][1]:
                    raise Mismatch(f"snapshot bytes differ: {crefs[0][0]} vs {n}")
            for n, sn in snaps[1:]:
                if snapshot.snapshot_contents(sn) != c0:
                    raise Mismatch(f"snapshot content differs: {snaps[0][0]} vs {n}")

        @rule(corrupt=st.one_of(st.none(), st.integers(0, 10_000)), flip=st.booleans())
        def save_and_load(self, corrupt: int | None, flip: bool) -> None:
            """Each backend saves and reloads its own snapshot (load= variants apply);
            a corrupted snapshot must be rejected everywhere, leaving the keyspace as is."""
            oks = []
            for b in self.backends:
                snap = b.snapshot()
                if corrupt is not None:
                    i = corrupt % len(snap)
                    snap = snap[:i] + bytes([snap[i] ^ 0x5A]) + snap[i + 1 :] if flip else snap[:i]
                oks.append(b.load(snap))
            if len(set(oks)) > 1:
                who = [(b.name, ok) for b, ok in zip(self.backends, oks, strict=True)]
                raise Mismatch(f"load accepted by some only: {who}")

    Lockstep.__name__ = Lockstep.__qualname__ = "Lockstep_" + _ident(cfg.options, cfg.variants)
    _ = cluster
    return Lockstep


def _ident(options: str, variants: Sequence[str]) -> str:
    s = "_".join([options, *variants]) or "default"
    return "".join(c if c.isalnum() else "_" for c in s)[:80]


def _as_sets(reply: bytes) -> object:
    """KEYS replies as sets; anything unparsable compares as itself."""
    try:
        vals = parse_replies(reply)
    except ValueError:
        return reply
    return [frozenset(v) if isinstance(v, list) else v for v in vals]


def assert_variant_equivalent(
    variant: str | Sequence[str],
    options: str = "",
    *,
    max_examples: int = 50,
    stateful_step_count: int = 25,
    with_model: bool = True,
    extra_backends: Sequence[Callable[[], Backend]] = (),
    hypothesis_settings: settings | None = None,
    **cfg_kw: object,
) -> None:
    """Raise (with a minimal failing program) unless ``variant`` equals naive execution.

    ``variant`` is a ``ksExecute`` variant string or a list of them; ``{batch}`` in it is
    replaced per call by a batch size in 1..128. ``options`` is the ``ksCreate`` option
    string (table, layout, cluster, seed, hashtable_min_exp). Needs the c_ref library."""
    variants = [variant] if isinstance(variant, str) else list(variant)
    cfg = LockstepConfig(options=options, variants=variants, with_model=with_model,
                         extra_backends=extra_backends, **cfg_kw)  # type: ignore[arg-type]
    machine = make_lockstep_machine(cfg)
    s = hypothesis_settings or settings(
        max_examples=max_examples,
        stateful_step_count=stateful_step_count,
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )
    run_state_machine_as_test(machine, settings=s)


_ = resp
