"""Statistics of native timings: medians with distribution-free 95 % intervals.

Native runs on a shared machine are noisy, so a speedup is never one ratio of two runs. Two
variants A and B are run in interleaved rounds (A B, A B, ...), each run timed by its
process CPU time; a round gives one paired ratio A / B. The speedup reported is the median
of those ratios with a 95 % confidence interval for the median, and the ratio of the two
minimum times beside it. An interval that includes 1.0 is reported as "within noise".

The interval uses order statistics (the sign-test interval, as in Conover, *Practical
Nonparametric Statistics*, section 3.2): for ``n`` sorted values it is ``(x[k], x[n-1-k])``
with the largest ``k`` for which ``P(Binomial(n, 1/2) <= k) <= 2.5 %``. It assumes nothing
about the distribution and is deterministic; it needs at least 6 values.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Any

__all__ = ["MIN_ROUNDS", "median_ci95", "paired_speedup", "summary"]

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


def summary(values: Sequence[float]) -> dict[str, Any]:
    """``{"median", "ci95", "min", "runs"}`` of one variant's times (seconds)."""
    ci = median_ci95(values)
    return {"median": statistics.median(values), "ci95": list(ci[:2]) if ci else None,
            "min": min(values), "runs": list(values)}


def paired_speedup(a: Sequence[float], b: Sequence[float]) -> dict[str, Any]:
    """Speedup of B over A from paired runs (``a[i]`` and ``b[i]`` ran in round ``i``).

    Returns ``{"median", "ci95", "ci95_coverage", "from_minimums", "ratios", "verdict"}``:
    the median of the ratios ``a[i] / b[i]``, its 95 % interval (None with fewer than
    :data:`MIN_ROUNDS` rounds), ``min(a) / min(b)``, the ratios, and ``verdict``: "faster"
    or "slower" (B against A) when the interval excludes 1.0, else "within noise".
    """
    if len(a) != len(b) or not a:
        raise ValueError("paired_speedup needs two equally long, non-empty series")
    ratios = [x / y for x, y in zip(a, b, strict=True)]
    ci = median_ci95(ratios)
    if ci is None or ci[0] <= 1.0 <= ci[1]:
        verdict = "within noise"
    else:
        verdict = "faster" if ci[0] > 1.0 else "slower"
    return {"median": statistics.median(ratios), "ci95": list(ci[:2]) if ci else None,
            "ci95_coverage": ci[2] if ci else None, "from_minimums": min(a) / min(b),
            "ratios": ratios, "verdict": verdict}
