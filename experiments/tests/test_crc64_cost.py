"""experiments/crc64_cost.py's SipHash part: the model's structure and its fit."""

from __future__ import annotations

import random

from kvsim.experiments import crc64_cost as cc
from kvsim.sim import calibrate as cal


def _in_force(nocase: bool) -> dict[str, int]:
    prefix = "SIPHASH_NOCASE_" if nocase else "SIPHASH_"
    return {t: getattr(cal, prefix + t) for t in cc.SIPHASH_TERMS}


def test_siphash_features_are_the_models_structure():
    # the fit's columns times the constants in force are sim/calibrate.py siphash_cost
    for nocase in (False, True):
        consts = _in_force(nocase)
        for n in [*range(200), 4095, 4096, 100_003]:
            assert cc.siphash_model_of(consts, n) == cal.siphash_cost(n, nocase), (nocase, n)


def test_fit_siphash_recovers_the_constants_of_exact_counts():
    # counts made by known integer constants over the experiment's lengths: the fit gives
    # them back; with a little noise it stays within one of each
    truth = {"CALL": 71, "WORDS_ENTRY": 2, "WORD": 23, "BYTE_FIRST": 4, "BYTE": 5}
    lens = cc.siphash_lens()
    rows = [{"len": n, "callgrind": float(cc.siphash_model_of(truth, n))} for n in lens]
    assert cc.fit_siphash(rows) == truth
    rng = random.Random(3)
    noisy = [{**r, "callgrind": r["callgrind"] * (1 + rng.uniform(-0.002, 0.002))}
             for r in rows]
    got = cc.fit_siphash(noisy)
    assert all(abs(got[t] - truth[t]) <= 1 for t in truth), got
