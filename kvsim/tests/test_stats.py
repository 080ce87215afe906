"""The native-timing statistics: the median interval's coverage and the speedup verdict."""

import math
import statistics

from hypothesis import given
from hypothesis import strategies as st

from kvsim import stats as native_stats


def coverage_by_enumeration(n: int, k: int) -> float:
    """P(x[k] <= median < x[n-1-k]) for n draws of a continuous distribution: the number of
    draws below the median is Binomial(n, 1/2) and must lie in k+1 .. n-1-k."""
    return sum(math.comb(n, i) for i in range(k + 1, n - k)) / 2**n


def test_too_few_values_give_no_interval():
    for n in range(1, native_stats.MIN_ROUNDS):
        assert native_stats.median_ci95([float(i) for i in range(n)]) is None
    assert native_stats.median_ci95([float(i) for i in range(native_stats.MIN_ROUNDS)]) is not None


def test_interval_is_the_narrowest_with_95_percent_coverage():
    for n in range(native_stats.MIN_ROUNDS, 60):
        xs = [float(i) for i in range(n)]
        low, high, cov = native_stats.median_ci95(xs)
        k = int(low)
        assert high == n - 1 - k
        assert math.isclose(cov, coverage_by_enumeration(n, k))
        assert cov >= 0.95
        assert coverage_by_enumeration(n, k + 1) < 0.95, "a narrower interval would also do"


@given(st.lists(st.floats(0.01, 100.0), min_size=native_stats.MIN_ROUNDS, max_size=40))
def test_interval_holds_the_median(xs):
    low, high, _ = native_stats.median_ci95(xs)
    assert low <= statistics.median(xs) <= high


@given(st.lists(st.tuples(st.floats(0.01, 10.0), st.floats(0.01, 10.0)), min_size=1,
                max_size=30))
def test_paired_speedup(pairs):
    a, b = [p[0] for p in pairs], [p[1] for p in pairs]
    sp = native_stats.paired_speedup(a, b)
    assert sp["ratios"] == [x / y for x, y in pairs]
    assert sp["median"] == statistics.median(sp["ratios"])
    assert sp["from_minimums"] == min(a) / min(b)
    ci = sp["ci95"]
    if ci is None or ci[0] <= 1.0 <= ci[1]:
        assert sp["verdict"] == "within noise"
    else:
        assert sp["verdict"] == ("faster" if ci[0] > 1.0 else "slower")


def test_clear_speedup_and_noise():
    assert native_stats.paired_speedup([2.0] * 9, [1.0 + i / 100 for i in range(9)])["verdict"] == \
        "faster"
    noisy = native_stats.paired_speedup([1.0] * 9,
                                        [0.8, 1.2, 0.9, 1.1, 1.0, 0.95, 1.05, 0.85, 1.15])
    assert noisy["verdict"] == "within noise"


@given(st.lists(st.floats(0.01, 100.0), min_size=2, max_size=40))
def test_bootstrap_interval_brackets_the_median_and_is_reproducible(xs):
    low, high = native_stats.bootstrap_ci95(xs)
    assert min(xs) <= low <= high <= max(xs)
    assert native_stats.bootstrap_ci95(xs) == (low, high), "fixed seed: the same interval"


def test_bootstrap_interval_narrows_with_more_rounds():
    import numpy as np

    rng = np.random.default_rng(5)
    few = rng.normal(1.1, 0.05, 8)
    many = rng.normal(1.1, 0.05, 200)
    w_few = np.subtract(*reversed(native_stats.bootstrap_ci95(few)))
    w_many = np.subtract(*reversed(native_stats.bootstrap_ci95(many)))
    assert w_many < w_few
    lo, hi = native_stats.bootstrap_ci95(many)
    assert lo < 1.1 < hi


def test_bootstrap_needs_two_values():
    assert native_stats.bootstrap_ci95([1.0]) is None
    assert native_stats.paired_speedup([1.0], [2.0])["bootstrap_ci95"] is None


@given(st.floats(0.001, 2.0), st.floats(0.001, 0.5))
def test_rounds_for_effect_grows_as_the_effect_shrinks(effect, spread):
    n = native_stats.rounds_for_effect(effect, spread)
    assert native_stats.MIN_ROUNDS <= n <= 60
    assert native_stats.rounds_for_effect(effect / 2, spread) >= n
    assert native_stats.rounds_for_effect(effect, spread * 2) >= n


def test_the_old_name_is_the_same_module() -> None:
    from kvsim.experiments import timing

    assert timing is native_stats
    assert timing.paired_speedup is native_stats.paired_speedup
