"""Statistics of native timings: medians with distribution-free 95 % intervals.

(``kvsim.experiments.timing`` is this module under its old name.)

Native runs on a shared machine are noisy, so a speedup is never one ratio of two runs. Two
variants A and B are run in interleaved rounds (A B, B A, ...), each run timed by its
process CPU time; a round gives one paired ratio A / B. The speedup reported is the median
of those ratios with a 95 % confidence interval for the median, and the ratio of the two
minimum times beside it. An interval that includes 1.0 is reported as "within noise".

The interval uses order statistics (the sign-test interval, as in Conover, *Practical
Nonparametric Statistics*, section 3.2): for ``n`` sorted values it is ``(x[k], x[n-1-k])``
with the largest ``k`` for which ``P(Binomial(n, 1/2) <= k) <= 2.5 %``. It assumes nothing
about the distribution and is deterministic; it needs at least 6 values.

Beside it, :func:`bootstrap_ci95` gives the percentile bootstrap interval of the median
(Efron and Tibshirani, *An Introduction to the Bootstrap*, chapter 13): the values are
resampled with replacement 2,000 times with a fixed seed (so the interval is reproducible)
and the 2.5th and 97.5th percentiles of the resampled medians are the interval. It is
narrower than the sign-test interval for small samples; the experiments framework reports
both and calls a speedup a gain or a loss only when the bootstrap interval excludes 1.0
and at least :data:`MIN_ROUNDS` rounds ran.

How many rounds resolve an effect: a round's ratio scatters around the true speedup with
some relative spread ``s``; the median of ``n`` ratios has a standard error of about
``1.25 s / sqrt(n)``, so an interval of half-width ``e`` needs about
``n = (1.96 * 1.25 * s / e) ** 2`` rounds (:func:`rounds_for_effect`). A 2-3x effect is
resolved by the minimum; a 2 % effect on a machine whose rounds scatter by 5 % needs ~37.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Any

__all__ = ["MIN_ROUNDS", "bootstrap_ci95", "independent_speedup", "median_ci95", "paired_speedup",
           "rounds_for_effect", "summary", "wilson"]

#: Fewest values for which the order-statistic interval reaches 95 % coverage.
MIN_ROUNDS = 6


def _binom_cdf_half(n: int, k: int) -> float:
    """P(Binomial(n, 1/2) <= k)."""
    return sum(math.comb(n, i) for i in range(k + 1)) / 2**n


def median_ci95(values: Sequence[float]) -> tuple[float, float, float] | None:
    """``(low, high, coverage)`` of a 95 % interval for the median of ``values``, or None
    with fewer than :data:`MIN_ROUNDS` values. ``coverage`` is the interval's exact
    confidence (at least 0.95)."""
    xs = sorted(values)
    n = len(xs)
    k = -1
    while _binom_cdf_half(n, k + 1) <= 0.025:
        k += 1
    if k < 0:
        return None
    return xs[k], xs[n - 1 - k], 1.0 - 2.0 * _binom_cdf_half(n, k)


def bootstrap_ci95(values: Sequence[float], resamples: int = 2000,
                   seed: int = 0) -> tuple[float, float] | None:
    """``(low, high)``: the percentile bootstrap 95 % interval of the median of ``values``
    (``resamples`` resamples, numpy's PCG64 seeded with ``seed``), or None with fewer than
    two values."""
    import numpy as np

    xs = np.asarray(values, dtype=float)
    if xs.size < 2:
        return None
    rng = np.random.default_rng(seed)
    meds = np.median(xs[rng.integers(0, xs.size, size=(resamples, xs.size))], axis=1)
    low, high = np.percentile(meds, [2.5, 97.5])
    return float(low), float(high)


def rounds_for_effect(effect: float, spread: float = 0.05, lo: int = MIN_ROUNDS,
                      hi: int = 60) -> int:
    """Rounds whose median ratio has a 95 % interval of half-width about ``effect`` (a
    fraction: 0.05 for a 5 % speedup) when one round's ratio scatters by ``spread``
    (relative standard deviation), clamped to ``lo..hi``."""
    if effect <= 0:
        raise ValueError(f"effect: must be positive, got {effect}")
    n = math.ceil((1.96 * 1.25 * spread / effect) ** 2)
    return max(lo, min(hi, n))


def summary(values: Sequence[float]) -> dict[str, Any]:
    """``{"median", "ci95", "min", "runs"}`` of one variant's times (seconds)."""
    ci = median_ci95(values)
    return {"median": statistics.median(values), "ci95": list(ci[:2]) if ci else None,
            "min": min(values), "runs": list(values)}


def paired_speedup(a: Sequence[float], b: Sequence[float]) -> dict[str, Any]:
    """Speedup of B over A from paired runs (``a[i]`` and ``b[i]`` ran in round ``i``).

    Returns ``{"median", "ci95", "ci95_coverage", "bootstrap_ci95", "from_minimums",
    "ratios", "verdict"}``: the median of the ratios ``a[i] / b[i]``, its sign-test 95 %
    interval (None with fewer than :data:`MIN_ROUNDS` rounds), its bootstrap 95 % interval
    (:func:`bootstrap_ci95`), ``min(a) / min(b)``, the ratios, and ``verdict``: "faster"
    or "slower" (B against A) when the sign-test interval excludes 1.0, else "within noise".
    """
    if len(a) != len(b) or not a:
        raise ValueError("paired_speedup needs two equally long, non-empty series")
    ratios = [x / y for x, y in zip(a, b, strict=True)]
    ci = median_ci95(ratios)
    if ci is None or ci[0] <= 1.0 <= ci[1]:
        verdict = "within noise"
    else:
        verdict = "faster" if ci[0] > 1.0 else "slower"
    boot = bootstrap_ci95(ratios)
    return {"median": statistics.median(ratios), "ci95": list(ci[:2]) if ci else None,
            "ci95_coverage": ci[2] if ci else None,
            "bootstrap_ci95": list(boot) if boot else None, "from_minimums": min(a) / min(b),
            "ratios": ratios, "verdict": verdict}


def independent_speedup(base: Any, var: Any, rng: Any, resamples: int = 2000
                        ) -> dict[str, Any]:
    """Speedup of ``var`` over ``base`` from two samples of times that are not paired (numpy
    arrays): the ratio of their medians, its percentile-bootstrap 95 % interval (each
    sample resampled independently ``resamples`` times with ``rng``, a numpy Generator the
    caller seeds), the ratio of the minimums and the verdict (``faster``/``slower`` when
    the interval excludes 1.0, else ``within noise``); figures rounded to 4 places."""
    import numpy as np

    point = float(np.median(base) / np.median(var))
    bi = rng.integers(0, base.size, (resamples, base.size))
    vi = rng.integers(0, var.size, (resamples, var.size))
    boot = np.median(base[bi], axis=1) / np.median(var[vi], axis=1)
    lo, hi = (float(x) for x in np.percentile(boot, [2.5, 97.5]))
    verdict = "within noise" if lo <= 1.0 <= hi else ("faster" if lo > 1.0 else "slower")
    return {"speedup_median": round(point, 4), "speedup_ci95": [round(lo, 4), round(hi, 4)],
            "speedup_min": round(float(base.min() / var.min()), 4), "verdict": verdict}


def wilson(k: float, n: float, z: float = 1.96) -> tuple[float, float]:
    """The Wilson 95 % interval of a proportion ``k`` of ``n``."""
    if n <= 0:
        return 0.0, 1.0
    p = k / n
    mid, half = p + z * z / (2 * n), z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return max(0.0, (mid - half) / (1 + z * z / n)), min(1.0, (mid + half) / (1 + z * z / n))
