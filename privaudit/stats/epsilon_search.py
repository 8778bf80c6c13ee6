"""Find the smallest ε that a test can no longer reject, without trusting monotonicity.

A hypothesis test for "M is (ε, δ)-DP" at each ε gives a lower bound ε_lb = inf{ε ≥ 0 : not rejected}.
This definition is valid even where the rejection region is not monotone in ε: if M is (ε₀, δ)-DP then
ε_lb > ε₀ needs the true hypothesis at ε₀ to be rejected, which happens with probability ≤ α. (The
supremum of the rejected set would need monotonicity.) The search brackets by doubling, bisects, and
then scans the interval below the answer on a grid so that an earlier crossing the bisection stepped
over is found and bisected instead.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from scipy import optimize

EPSILON_CAP = 1000.0  # far beyond any certifiable ε; reported as-is (still a valid lower bound) if reached
_SCAN_POINTS = 16


def _bisect(
    rejected: Callable[[float], bool],
    lo: float,
    hi: float,
    tolerance: float,
    margin: Callable[[float], float] | None = None,
) -> float:
    """Boundary in [lo, hi] given rejected(lo) and not rejected(hi); returns the rejected side.

    With a continuous ``margin`` (≥ 0 exactly where rejected) Brent's method finds the crossing in a few
    evaluations; the answer is then stepped down until it is on the rejected side.
    """
    if margin is not None:
        answer = float(optimize.brentq(margin, lo, hi, xtol=tolerance * max(1.0, lo) / 4.0))
        step = tolerance * max(1.0, answer) / 4.0
        while answer > lo and not rejected(answer):
            answer = max(lo, answer - step)
        return answer
    while hi - lo > tolerance * max(1.0, lo):
        mid = 0.5 * (lo + hi)
        if rejected(mid):
            lo = mid
        else:
            hi = mid
    return lo


def first_unrejected_epsilon(
    rejected: Callable[[float], bool],
    tolerance: float = 1e-6,
    scan: bool = True,
    margin: Callable[[float], float] | None = None,
) -> float:
    """inf{ε ≥ 0 : not rejected(ε)}, to ``tolerance`` (relative above 1), rounded down (conservative).

    ``margin`` (optional) is a continuous function that is ≥ 0 exactly where ``rejected`` holds, used to
    speed up the last step. ``scan=False`` skips the guard against earlier crossings; only for ranking
    candidates on selection data, never for a reported bound.
    """
    if not rejected(0.0):
        return 0.0
    lo, hi = 0.0, 1.0
    while rejected(hi):
        lo, hi = hi, 2.0 * hi
        if hi > EPSILON_CAP:
            return EPSILON_CAP
    answer = _bisect(rejected, lo, hi, tolerance, margin)
    if not scan:
        return answer
    # Guard against non-monotone rejection regions: look for an earlier crossing below the answer.
    while answer > 0.0:
        grid = np.linspace(0.0, answer, _SCAN_POINTS + 1)[1:-1]
        failing = [eps for eps in grid if not rejected(float(eps))]
        if not failing:
            return answer
        first = failing[0]
        below = float(grid[grid < first][-1]) if np.any(grid < first) else 0.0
        answer = _bisect(rejected, below, float(first), tolerance, margin)
    return answer
