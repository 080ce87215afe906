"""Whether the L2's prefetchers fire on a random chase's misses: `kvsim calibrate`'s probe
of them, the file's L2 prefetchers it decides, and its replay.

The table of known cores (calibrate.py ``KNOWN_CORES``) names the L2 prefetchers a core has
(Intel's adjacent-line and streamer, AMD's stream and up/down); what it cannot say is which
of their triggers the core acts on for a random pointer chase, whose every load misses the
L2 once it is past the L2's capacity. There the model's prefetchers decide the chase: with
Intel's two kinds the model's L2 served 30-33 % of the loads of a random chase over 4 MiB
that natively sits on the last level's plateau (sim/VALIDATION.md, finding 19). So the file
keeps an L2 prefetcher of a kind a probe measures only where the probe shows it firing.

**The probe** (``kvsim-calibrate l2probe``, ``sim/_calibrate/calibrate.c`` benchL2Probe,
whose comment has the orders): chases over a buffer :data:`SIZE_OVER_L2` times the L2's
sysfs size whose order gives a prefetcher its trigger on a lead's miss and visits the line it
would fetch (the follow) :func:`probe_distance` loads later, each against a control with
the same regions in the same order and the same distances but no relation between a lead
and its follow (:data:`TRIGGERS`: the 128-byte pair partner for ``adjacent_line``, the line
after three ascending misses in a 4 KiB region for ``stream``). The orders here
(:func:`probe_order`) are the program's, drawn by numpy's generator instead of its
xorshift: the same in distribution, which is what a prediction is compared on.

**The reading** (:func:`reading`): a follow the probe serves from the L2 costs the L2's
latency instead of what the control's loads cost, so the share of follows served from the
L2 beyond the control is ``(control - probe) / (share * (control - L2))``, with ``share`` the
follows' share of the loads (a half, a quarter), the L2's latency the knee fit's and each
chase's figure its fastest sample. The same orders simulated on the file before its fit
(:func:`simulated`) give the model's share with the table's prefetchers; a kind **fires**
where the native share is at least half the model's (:func:`fires`: nearer the model with
the kind than without it, which serves none), and the probe cannot tell (the table's word
stands) where that half is within what the native spread between rounds moves the reading
by. Not every follow is served even where the
kind fires on every miss (the L2's replacement evicts some before their visit), which is
why the native share is set beside the model's rather than beside one.

The probe's chases are replayed by the self-check beside the other chases
(:func:`replay_rows`): the pair orders gated, so a file whose ``adjacent_line`` disagrees
with the core's is refused there too; the stream orders shown (:data:`TRIGGERS`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported where the orders are made: `local` reads calibrate's table alone
    import numpy as np

#: The probe's footprint over the L2's sysfs size (a power of two at least this): a line's
#: own previous visit has left the L2, as it has for a chase on the last level's plateau.
SIZE_OVER_L2 = 4
#: Per kind of L2 prefetcher the probe measures: its order in ``kvsim-calibrate l2probe``,
#: the order of its control, the follows' share of the loads, and whether the self-check
#: gates the replay of its two chases. The pair orders visit every line of the footprint
#: once per cycle, as a chase does; the stream orders visit half of each 8-line group
#: (lines 8u + 0, 3, 5, 6), so the levels past L1, indexed by the address's low bits, see
#: them on half their sets: the order's time tests how the levels hold such an order more
#: than the prefetchers, whose answer is its difference from its control. Shown.
TRIGGERS = {
    "adjacent_line": {"probe": "pair", "control": "pair_control", "share": 0.5,
                      "gated": True},
    "stream": {"probe": "stream", "control": "stream_control", "share": 0.25,
               "gated": False},
}
#: The orders as calibrate.c names them, in the order it times them.
ORDERS = ("pair", "pair_control", "stream", "stream_control")
#: A region (the 4 KiB a stream prefetcher keeps to), in lines; units per region per order
#: (calibrate.c probeOrder).
REGION_LINES = 64
UNITS = {"pair": 32, "stream": 8}
LINE = 64


def probe_size(levels: Sequence[dict]) -> int | None:
    """The probe's footprint: :data:`SIZE_OVER_L2` times the L2's sysfs size, rounded up to
    a power of two; None without a level past L1 of known size."""
    if len(levels) < 2 or not levels[1].get("size"):
        return None
    return 1 << math.ceil(math.log2(SIZE_OVER_L2 * int(levels[1]["size"])))


def probe_distance(levels: Sequence[dict]) -> int | None:
    """Loads from a lead to its follow: the smallest power of two above the L1D's lines (the
    lead has left the L1D; a line prefetched on its miss has all of the L2 but the few
    thousand lines filled meanwhile), and a divisor of the orders' slots."""
    size = probe_size(levels)
    if size is None:
        return None
    l1 = int(levels[0]["size"]) // LINE
    slots = size // (REGION_LINES * LINE) * UNITS["stream"] // 2
    return max(1, min(1 << l1.bit_length(), slots))


def probe_order(order: str, size: int, distance: int, seed: int = 1) -> np.ndarray:
    """The lines of ``kvsim-calibrate l2probe``'s cycle ``order`` (:data:`ORDERS`) over
    ``size`` bytes with leads ``distance`` slots before their follows, in visiting order
    (calibrate.c probeOrder; numpy's generator)."""
    stream = order.startswith("stream")
    control = order.endswith("_control")
    units = UNITS["stream" if stream else "pair"]
    half = units // 2
    regions = size // (REGION_LINES * LINE)
    slots = regions * half
    if regions < 1 or slots % distance:
        raise ValueError(f"l2probe: distance {distance} does not divide the {slots} slots "
                         f"of {size} B")
    import numpy as np

    rng = np.random.default_rng(seed)
    slot = rng.permutation(slots)
    bit = rng.integers(0, 2, regions * units)
    r, h = slot // half, slot % half
    out = []
    for w in (0, 1):  # the two halves of the cycle: the other unit of each slot
        lead_u = h + w * half
        follow_u = h + ((w ^ 1) * half if control else w * half)
        base = r * REGION_LINES
        if stream:
            lead = np.stack([base + 8 * lead_u, base + 8 * lead_u + 3,
                             base + 8 * lead_u + 5], axis=1)
            follow = (base + 8 * follow_u + 6)[:, None]
        else:
            s = bit[r * units + lead_u]
            lead = (base + 2 * lead_u + s)[:, None]
            follow = (base + 2 * follow_u + 1 - bit[r * units + follow_u])[:, None]
        for b in range(0, slots, distance):  # a block's leads, then its follows
            out.append(lead[b:b + distance].reshape(-1))
            out.append(follow[b:b + distance].reshape(-1))
    return np.concatenate(out).astype(np.uint64)


def records(order: str, size: int, distance: int, steps: int, warmup: int,
            seed: int = 1) -> np.ndarray:
    """The probe's chase loop over ``order``'s cycle as trace records (sim/micro.py's chase
    loop): ``warmup`` loads of warm-up, then ``steps`` timed."""
    from . import micro

    return micro.cycle_records(probe_order(order, size, distance, seed), steps, warmup)


def served(probe_ns: float, control_ns: float, l2_ns: float, share: float) -> float:
    """The share of a probe's follows served from the L2 beyond its control's."""
    return (control_ns - probe_ns) / (share * (control_ns - l2_ns))


class ProbeError(ValueError):
    """A probe reading that cannot tell (one line naming what and where)."""


def reading(raw: dict, l2_ns: float) -> dict:
    """Per kind of :data:`TRIGGERS`, the probe's reading from ``raw`` (``kvsim-calibrate
    l2probe``'s figures, every round's samples under ``ns``): the probe's and the
    control's fastest sample, the L2's latency, the share of follows served from the L2
    (:func:`served`), and ``noise``, the share the native spread between rounds alone
    (the larger of the two chases', calibrate_check.round_spread) would move it by.
    Raises ProbeError for a reading that cannot tell: a sample that is not a positive time,
    or a control no slower than the L2 (the footprint did not leave it)."""
    from .calibrate_check import round_spread

    size = raw.get("size")
    out = {}
    if not (isinstance(l2_ns, (int, float)) and math.isfinite(l2_ns) and l2_ns > 0):
        raise ProbeError(f"l2probe: the L2's latency {l2_ns!r} ns is not a time")
    for kind, t in TRIGGERS.items():
        figs = {}
        for role in ("probe", "control"):
            xs = (raw.get("ns") or {}).get(t[role])
            if not xs or not all(isinstance(x, (int, float)) and math.isfinite(x) and x > 0
                                 for x in xs):
                raise ProbeError(f"l2probe: the {t[role]} chase over {size} B has no "
                                 f"positive time ({xs!r})")
            figs[role] = float(min(xs))
        if figs["control"] <= l2_ns:
            raise ProbeError(
                f"l2probe: the {t['control']} chase over {size} B took {figs['control']:.2f} "
                f"ns, no slower than the L2's {l2_ns:.2f}: its footprint did not leave the "
                "L2, so it cannot tell whether the L2's prefetchers fire")
        f = served(figs["probe"], figs["control"], l2_ns, t["share"])
        # the share of follows the rounds' spread alone could move the reading by
        spread = max(round_spread(raw["ns"][t[role]], raw.get("repeats"))
                     for role in ("probe", "control"))
        noise = spread * figs["control"] / (t["share"] * (figs["control"] - l2_ns))
        out[kind] = {"probe": t["probe"], "probe_ns": round(figs["probe"], 3),
                     "control_ns": round(figs["control"], 3), "l2_ns": round(l2_ns, 3),
                     "served": round(f, 4), "noise": round(noise, 4)}
    return out


def decide(prefetchers: list[dict], got: dict | None, model: dict | None,
           source: str) -> tuple[list[dict], str]:
    """The file's ``[[prefetcher]]`` tables from the table's ``prefetchers`` (``source``: the
    table's name), the probe's native reading ``got`` (:func:`reading`; None: not measured)
    and the model's (``model``: kind -> the share the table's prefetchers serve,
    :func:`simulated`). An L2 prefetcher of a kind the probe measures is kept only where it
    fires (:func:`fires`), its ``src`` saying so; the others keep the table's word. Returns
    the tables and a line for the file's top-level ``src.prefetcher`` naming what was
    dropped and why."""
    kept, dropped = [], []
    for p in prefetchers:
        kind = p["kind"]
        if p["level"] != "L2" or kind not in TRIGGERS:
            kept.append(dict(p, src={"kind": source}))
            continue
        if got is None or model is None:
            kept.append(dict(p, src={"kind": f"{source}; not measured (no l2probe in the raw "
                                             "measurements)"}))
            continue
        r, m = got[kind], model[kind]
        why = (f"measured: the {r['probe']} probe (sim/calibrate_prefetch.py) served "
               f"{r['served']:.2f} of its follows from the L2 ({r['probe_ns']:.2f} ns per "
               f"load against its control's {r['control_ns']:.2f}, the L2 {r['l2_ns']:.2f}), "
               f"the model with it {m:.2f}")
        verdict = fires(r["served"], m, r["noise"])
        if verdict is None:
            kept.append(dict(p, src={"kind": f"{source}; {why}, and the rounds' spread alone "
                                             f"moves the reading by {r['noise']:.2f}: the "
                                             "probe cannot tell; kept"}))
        elif verdict:
            kept.append(dict(p, src={"kind": f"{source}; {why}: fires"}))
        else:
            dropped.append(f"L2 {kind} dropped: {why}")
    line = (f"{source}; " + "; ".join(dropped)) if dropped else source
    return kept, line


def fires(native: float, model: float, noise: float = 0.0) -> bool | None:
    """Whether a kind fires: the probe's native share served at least half the model's
    with the kind (nearer the model with it than the model without, which serves none);
    None (the probe cannot tell) where that half is within ``noise``, the share the native
    spread between rounds alone moves the reading by (:func:`reading`)."""
    if not (math.isfinite(model) and math.isfinite(noise) and model / 2 > noise):
        return None
    return native >= model / 2


def simulated(cpu, size: int, distance: int, page: int, steps: int,
              warmup: int) -> tuple[dict[str, float], dict[str, float]]:
    """The probe's orders simulated on ``cpu``: ns per load of each order, and per kind of
    :data:`TRIGGERS` the share of follows its L2 serves beyond the control's
    (:func:`served` with the file's L2 latency; nan where the control is no slower)."""
    from kvsim import sim

    ns = {}
    for order in ORDERS:
        rec = records(order, size, distance, steps, warmup)
        res = sim.simulate(rec, cpu, page_size=page, validate=False)
        ns[order] = res["cycles"] / cpu.freq_ghz / steps
    l2_ns = cpu.caches[1].latency / cpu.freq_ghz
    share = {}
    for kind, t in TRIGGERS.items():
        c = ns[t["control"]]
        share[kind] = (served(ns[t["probe"]], c, l2_ns, t["share"]) if c > l2_ns
                       else float("nan"))
    return ns, share


def replay_rows(cpu, raw: dict, steps: int, warmup: int, row) -> list[dict]:
    """The probe's chases simulated on ``cpu`` beside their native figures, as the
    self-check's rows (``row``: calibrate_check._row), each probe's note the share of its
    follows the file's L2 serves."""
    from .calibrate_check import round_spread
    from .config import fmt_size

    size, dist = int(raw["size"]), int(raw["distance"])
    page = page_of(raw)
    ns, share = simulated(cpu, size, dist, page, steps, warmup)
    rows = []
    for kind, t in TRIGGERS.items():
        for role in ("probe", "control"):
            o = t[role]
            xs = raw["ns"][o]
            why = (f"{kind}: the file's L2 serves {share[kind]:.2f} of the follows"
                   if role == "probe" else "")
            if not t["gated"]:
                why = "; ".join(x for x in (why, "shown, not gated: an order over half of "
                                            "each 8-line group's lines (calibrate_prefetch."
                                            "TRIGGERS)") if x)
            rows.append(row(f"l2probe {o} {fmt_size(size)} d{dist} {page // 1024}K",
                            float(min(xs)), ns[o], gated=t["gated"], why=why,
                            spread=round_spread(xs, raw.get("repeats"))))
    return rows


def page_of(raw: dict) -> int:
    """The probe's page size: 2 MiB where the kernel backed its buffer with huge pages."""
    return 2 * 1024 * 1024 if (raw.get("huge_fraction") or 0.0) >= 0.5 else 4096


def apply_probe(doc: dict, probed: dict) -> None:
    """``doc``'s prefetchers as :mod:`kvsim.sim.calibrate` writes them today for its CPU:
    the table of known cores' kinds, its L2 ones kept or dropped by the probe of ``probed``,
    a file calibrated on the same machine (``[meta] machine_key``) that ran it. Changes
    ``doc`` in place (``[[prefetcher]]``, ``src.prefetcher``, ``[meta] l2_prefetch``);
    raises ValueError (one line) where the two files' machines differ or ``probed`` has no
    probe's decision."""
    from .calibrate import identity_core, table_source

    key, pkey = (doc.get("meta") or {}).get("machine_key"), \
        (probed.get("meta") or {}).get("machine_key")
    if not key or key != pkey:
        raise ValueError(f"the probed file's machine ({pkey}) is not the CPU file's ({key})")
    got = (probed["meta"].get("l2_prefetch") or {})
    if not got.get("reading") or not got.get("model_served"):
        raise ValueError("the probed file has no [meta] l2_prefetch reading (calibrated "
                         "before kvsim calibrate's L2 prefetch probe)")
    table = identity_core(doc["meta"].get("cpu") or {})
    if table is None:
        raise ValueError("no entry of the table of known cores for the CPU file's CPU")
    tname = table_source(table)
    doc["prefetcher"], line = decide([dict(p) for p in table["prefetchers"]],
                                     got["reading"], got["model_served"], tname)
    doc.setdefault("src", {})["prefetcher"] = line
    doc["meta"]["l2_prefetch"] = dict(got, kept=[p["kind"] for p in doc["prefetcher"]
                                                 if p["level"] == "L2"])


def main(argv: Sequence[str] | None = None) -> int:
    import argparse
    import tomllib

    from .calibrate import write_cpu_file

    prog = "python -m kvsim.sim.calibrate_prefetch"
    ap = argparse.ArgumentParser(prog=prog, description="Write a calibrated CPU file with the "
                                 "hardware prefetchers kvsim calibrate writes today: the table "
                                 "of known cores' kinds, the L2 ones as the L2 prefetch probe "
                                 "of another file of the same machine decided.")
    ap.add_argument("cpu_file", type=Path)
    ap.add_argument("--probe", type=Path, required=True, metavar="CPU_FILE",
                    help="a file kvsim calibrate wrote with the probe, on the same machine")
    ap.add_argument("-o", "--out", type=Path, required=True)
    a = ap.parse_args(argv)

    def build() -> dict:
        doc = tomllib.loads(a.cpu_file.read_text())
        apply_probe(doc, tomllib.loads(a.probe.read_text()))
        doc["meta"]["l2_prefetch"]["from"] = a.probe.name
        return doc

    return write_cpu_file(prog, a.out, build)


if __name__ == "__main__":
    raise SystemExit(main())
