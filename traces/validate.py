"""Record validation for kvsim traces: every rule FORMAT.md "Record rules" states.

:class:`RecordValidator` checks a trace's records chunk by chunk, in order, with vectorised
numpy tests (one pass of a few array operations per rule), and keeps the little state the rules
need across chunks: whether each of the last ``DEP_CHECK_WINDOW`` records is a load (a ring of
that many flags, so memory does not grow with the trace), so a ``dep`` reaching into an
earlier chunk is checked, and the warm-up marker expected next. The first
violation raises :class:`RecordError` naming the record (index in its chunk and in the trace)
and the field; the reader turns it into its one-line ``TraceError``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .format import (
    DEP_CHECK_WINDOW,
    KIND_LOAD,
    KIND_MARKER,
    KIND_PREFETCH,
    MARK_WARMUP_BEGIN,
    MARK_WARMUP_END,
    NUM_KINDS,
    NUM_MARKERS,
)

if TYPE_CHECKING:
    import numpy as np

__all__ = ["RULES", "RecordError", "RecordValidator"]

#: The record rules in the order they are checked: of the first bad record, the first rule
#: it breaks is reported. The compiled checker (sim/_engine/decode.h, ``KVSIM_RULE_*``)
#: numbers them alike.
RULES = ("kind", "size_access", "size_prefetch", "size_marker", "flags_access", "flags_marker",
         "dep_marker", "addr_wrap", "tag", "site", "dep_before", "dep_not_load", "warmup")
(RULE_KIND, RULE_SIZE_ACCESS, RULE_SIZE_PREFETCH, RULE_SIZE_MARKER, RULE_FLAGS_ACCESS,
 RULE_FLAGS_MARKER, RULE_DEP_MARKER, RULE_ADDR_WRAP, RULE_TAG, RULE_SITE, RULE_DEP_BEFORE,
 RULE_DEP_NOT_LOAD, RULE_WARMUP) = range(len(RULES))


class RecordError(ValueError):
    """A record breaks a rule: ``index`` (in the array checked), ``field`` and a message."""

    def __init__(self, index: int, field: str, problem: str) -> None:
        super().__init__(f"record {index}: {field}: {problem}")
        self.index = index
        self.field = field
        self.problem = problem


def _table_len(header: dict[str, Any], key: str) -> int | None:
    v = header.get(key)
    return len(v) if isinstance(v, list) else None


class RecordValidator:
    """Check consecutive record arrays of one trace against FORMAT.md's record rules.

    ``header`` is the trace's JSON header: its ``tags``/``sites``/``markers`` lists, when
    present, bound the ``tag``/``site``/marker-type fields. Call :meth:`check` with each chunk
    in stream order; it raises :class:`RecordError` (``index`` counted within that chunk) at the
    first bad record and otherwise records what later chunks need. ``records_checked`` is the
    number of records accepted so far (the trace index of the next chunk's first record).
    """

    def __init__(self, header: dict[str, Any] | None = None) -> None:
        h = header or {}
        self.n_tags = _table_len(h, "tags")
        self.n_sites = _table_len(h, "sites")
        n_markers = _table_len(h, "markers")
        self.n_markers = NUM_MARKERS if n_markers is None else min(n_markers, NUM_MARKERS)
        self.records_checked = 0
        # flag g mod DEP_CHECK_WINDOW: record g is a load (the last DEP_CHECK_WINDOW records);
        # made at the first check (numpy is imported only by a validator that checks records:
        # the compiled intake keeps the ring itself and uses this one for its wording)
        self._ring: np.ndarray | None = None
        self._warmup_next = MARK_WARMUP_BEGIN
        self._texts = self._rule_texts()

    @property
    def _loads(self) -> np.ndarray:
        if self._ring is None:
            import numpy as np

            self._ring = np.zeros(DEP_CHECK_WINDOW, dtype=bool)
        return self._ring

    # --- the rules ------------------------------------------------------------------------
    def _rule_texts(self) -> dict[int, tuple[str, str]]:
        """(field, problem) of every rule but the two worded per record (the dep rules),
        for this header: built once, as every chunk checked reads them."""
        return {
            RULE_KIND: ("kind", f"kind must be 0..{NUM_KINDS - 1}"),
            RULE_SIZE_ACCESS: ("size", "a load or store has size 0"),
            RULE_SIZE_PREFETCH: ("size", "a prefetch must have size 1"),
            RULE_SIZE_MARKER: ("size", "a marker must have size 0"),
            RULE_FLAGS_ACCESS: ("flags", "a load, store or prefetch must have flags 0"),
            RULE_FLAGS_MARKER: ("flags", f"unknown marker type (known: 0..{self.n_markers - 1})"),
            RULE_DEP_MARKER: ("dep", "a marker must have dep 0"),
            RULE_ADDR_WRAP: ("addr", "the access wraps past address 2^64 - 1"),
            RULE_TAG: ("tag", f"tag not named in the header's tags (0..{(self.n_tags or 0) - 1})"),
            RULE_SITE: ("site",
                        f"site not named in the header's sites (0..{(self.n_sites or 0) - 1})"),
            RULE_WARMUP: ("flags", "warm-up markers must alternate WARMUP_BEGIN, WARMUP_END"),
        }

    def describe(self, rule: int, dep: int = 0, named: int = 0) -> tuple[str, str]:
        """(field, problem) of rule ``rule`` (a ``RULE_*``) for this header; ``dep`` and
        ``named`` (the trace index a dep names) word the dep rules."""
        if rule == RULE_DEP_BEFORE:
            return "dep", f"dep {dep} points before the trace's first record"
        if rule == RULE_DEP_NOT_LOAD:
            return "dep", f"dep {dep} names trace record {named}, which is not a load"
        return self._texts[rule]

    def violations(self, rec: np.ndarray) -> list[tuple[np.ndarray, str, str]]:
        """Every rule as ``(mask of the records of rec breaking it, field, problem)``, in
        FORMAT.md's order, for ``rec`` following the records already accepted. The one
        definition of the rules: :meth:`check` and ``traces.check_records`` both read it.
        Changes no state. (The warm-up rule marks only the first marker out of turn: after
        it, which marker is due is undefined.)"""
        import numpy as np

        n = int(rec.size)
        # contiguous copies: each field is tested several times, and numpy is several times
        # faster on contiguous arrays than on the 24-byte-strided field views
        kind = np.ascontiguousarray(rec["kind"])
        size = np.ascontiguousarray(rec["size"])
        flags = np.ascontiguousarray(rec["flags"])
        dep = np.ascontiguousarray(rec["dep"])
        marker = kind == KIND_MARKER
        access = kind < KIND_MARKER
        d = self.describe
        rules: list[tuple[np.ndarray, str, str]] = [
            (kind >= NUM_KINDS, *d(RULE_KIND)),
            ((kind < KIND_PREFETCH) & (size == 0), *d(RULE_SIZE_ACCESS)),
            ((kind == KIND_PREFETCH) & (size != 1), *d(RULE_SIZE_PREFETCH)),
            (marker & (size != 0), *d(RULE_SIZE_MARKER)),
            (access & (flags != 0), *d(RULE_FLAGS_ACCESS)),
            (marker & (flags >= self.n_markers), *d(RULE_FLAGS_MARKER)),
            (marker & (dep != 0), *d(RULE_DEP_MARKER)),
        ]
        # addr + size - 1 must not pass 2^64 - 1 (size >= 1 for accesses, by the rules above).
        u64_max = np.uint64(0xFFFF_FFFF_FFFF_FFFF)
        last = u64_max - (np.maximum(size, 1).astype(np.uint64) - np.uint64(1))
        rules.append((access & (rec["addr"] > last), *d(RULE_ADDR_WRAP)))
        if self.n_tags is not None:
            rules.append((rec["tag"] >= self.n_tags, *d(RULE_TAG)))
        if self.n_sites is not None:
            rules.append((rec["site"] >= self.n_sites, *d(RULE_SITE)))
        before, not_load = self._dep_masks(dep, kind == KIND_LOAD, access)
        rules.append((before, "dep", "dep points before the trace's first record"))
        rules.append((not_load, "dep", "dep names a record that is not a load"))
        warm_bad, _ = self._warmup_problem(flags, marker)
        wmask = np.zeros(n, dtype=bool)
        if warm_bad is not None:
            wmask[warm_bad[0]] = True
        rules.append((wmask, *d(RULE_WARMUP)))
        return rules

    def check(self, rec: np.ndarray) -> None:
        """Validate ``rec`` (RECORD_DTYPE), the next records of the trace; see the class doc."""
        import numpy as np

        n = int(rec.size)
        if n == 0:
            return
        rules = self.violations(rec)
        # one pass over all the masks: the first bad record, then the first rule it breaks
        bad = np.logical_or.reduce([mask for mask, _, _ in rules])
        if bad.any():
            i = int(np.argmax(bad))
            field, problem = next((f, p) for mask, f, p in rules if mask[i])
            if field == "dep" and rec["kind"][i] != KIND_MARKER:
                back = int(rec["dep"][i])
                g = self.records_checked + i - back
                field, problem = (self.describe(RULE_DEP_BEFORE, back) if g < 0 else
                                  self.describe(RULE_DEP_NOT_LOAD, back, g))
            raise RecordError(i, field, problem)
        flags = np.ascontiguousarray(rec["flags"])
        _, self._warmup_next = self._warmup_problem(flags, rec["kind"] == KIND_MARKER)
        self._append_loads(rec["kind"] == KIND_LOAD)
        self.records_checked += n

    def _dep_masks(self, dep: np.ndarray, is_load: np.ndarray,
                   access: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Masks of the accesses whose ``dep`` points before the trace, and of those whose
        ``dep`` (at most ``DEP_CHECK_WINDOW``) names a record that is not a load (in this
        array or an earlier one)."""
        import numpy as np

        n = dep.size
        before_m = np.zeros(n, dtype=bool)
        bad_m = np.zeros(n, dtype=bool)
        has = (dep != 0) & access
        if not has.any():
            return before_m, bad_m
        j = np.flatnonzero(has)
        back = dep[j].astype(np.int64)
        local = j - back  # index in this chunk; negative: an earlier chunk
        glob = local + self.records_checked
        before = glob < 0
        ok = np.empty(j.size, dtype=bool)
        inside = local >= 0
        ok[inside] = is_load[local[inside]]
        earlier = ~inside & ~before & (back <= DEP_CHECK_WINDOW)
        if earlier.any():
            ok[earlier] = self._loads[glob[earlier] & (DEP_CHECK_WINDOW - 1)]
        ok[before] = True
        ok[~inside & (back > DEP_CHECK_WINDOW)] = True  # beyond the window: not checked
        before_m[j[before]] = True
        bad_m[j[~ok]] = True
        return before_m, bad_m

    def _warmup_problem(self, flags: np.ndarray,
                        marker: np.ndarray) -> tuple[tuple[int, str, str] | None, int]:
        """The first warm-up marker out of turn (or None), and the one expected after
        these records."""
        import numpy as np

        w = marker & ((flags == MARK_WARMUP_BEGIN) | (flags == MARK_WARMUP_END))
        if not w.any():
            return None, self._warmup_next
        idx = np.flatnonzero(w)
        seq = flags[idx]
        expect = np.resize(np.array([self._warmup_next, self._other(self._warmup_next)]),
                           seq.size)
        if (seq != expect).any():
            b = int(np.argmax(seq != expect))
            return ((int(idx[b]), "flags",
                     "warm-up markers must alternate WARMUP_BEGIN, WARMUP_END"),
                    self._warmup_next)
        nxt = self._other(self._warmup_next) if seq.size % 2 else self._warmup_next
        return None, nxt

    @staticmethod
    def _other(m: int) -> int:
        return MARK_WARMUP_END if m == MARK_WARMUP_BEGIN else MARK_WARMUP_BEGIN

    def _append_loads(self, is_load: np.ndarray) -> None:
        """Record the kinds of the records at ``records_checked`` onwards in the ring (the
        last ``DEP_CHECK_WINDOW`` of them)."""
        w = DEP_CHECK_WINDOW
        k, n = self.records_checked, is_load.size
        if n > w:
            k, is_load, n = k + n - w, is_load[n - w:], w
        at = k & (w - 1)
        head = min(n, w - at)
        self._loads[at:at + head] = is_load[:head]
        self._loads[:n - head] = is_load[head:]
