"""One-run audit (Steinke, Nasr & Jagielski 2023, "Privacy auditing with one (1) training run"; approximate-DP p-value).

m canaries are each included independently with probability ½; the auditor makes r guesses (abstaining
on the rest) and v of them are right. With q = e^ε/(1 + e^ε), the p-value of H₀: "M is (ε, δ)-DP" is
(Steinke, Nasr & Jagielski, "Privacy auditing with one (1) training run", NeurIPS 2023)

    p(ε, δ) = P[Bin(r, q) ≥ v] + 2mδ · max_{i=1..v} (1/i) · P[v − i ≤ Bin(r, q) < v],

and ε_lb = inf{ε ≥ 0 : p(ε, δ) > α} (:func:`privaudit.stats.epsilon_search.first_unrejected_epsilon`).
With δ = 0 this is the binomial tail of randomised response. The 2mδ term makes the bound vacuous for
large m·δ: at δ = 1e-3 and α = 0.05 even a perfect attack is capped near 3.6 (at m ≈ 300;
tests/stats/test_one_run.py checks it).

Assumption the auditor cannot check: each canary's membership was an independent fair coin (design
``bernoulli``, :mod:`privaudit.stats.assumptions`). With fixed in/out counts the bound is NOT valid: on identical
in/out scores with 900 in / 100 out, guessing "in" for the top tenth is right 90 % of the time and certifies ε > 0 in
every run. The route therefore refuses the ``fixed`` and ``trials`` designs; :mod:`privaudit.stats.one_run_paired`
is the valid route there.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy import special

from privaudit.stats.epsilon_search import first_unrejected_epsilon
from privaudit.stats.guess_selection import guess_bound
from privaudit.stats.scores import AuditScores
from privaudit.stats.strategies import GuessStrategy

_WINDOW_SDS = 12.0


def _binomial_pmf_descending(top: int, bottom: int, r: int, q: float) -> np.ndarray:
    """P[Bin(r, q) = k] for k = top, top − 1, …, bottom, by the ratio recurrence in log space.

    P(k − 1)/P(k) = k/(r − k + 1) · (1 − q)/q; one log-gamma evaluation for P(top), then cumulative sums of
    log ratios (cheap, and free of underflow when P(top) itself is tiny).
    """
    log_top = (
        special.gammaln(r + 1.0) - special.gammaln(top + 1.0) - special.gammaln(r - top + 1.0)
        + special.xlogy(top, q) + special.xlog1py(r - top, -q)
    )
    k = np.arange(top, bottom, -1, dtype=np.float64)
    with np.errstate(divide="ignore"):
        steps = np.log(k) - np.log(r - k + 1.0) + (math.log1p(-q) if q < 1.0 else -math.inf) - math.log(q)
    return np.exp(log_top + np.concatenate([[0.0], np.cumsum(steps)]))


def _max_average_below(v: int, r: int, q: float) -> float:
    """max_{i=1..v} (1/i)·P[v − i ≤ Bin(r, q) ≤ v − 1], exact up to a rigorous upper-bounded remainder.

    Only k within 12 standard deviations below the mean carry mass; for longer windows the average can
    only fall, and the mass left out (P[Bin < lo]) is added to the last window, which keeps the value an
    upper bound (so the p-value stays conservative).
    """
    mean = r * q
    sd = math.sqrt(max(r * q * (1.0 - q), 1e-300))
    lo = int(max(0, min(v - 1, math.floor(mean - _WINDOW_SDS * sd))))
    partial = np.cumsum(_binomial_pmf_descending(v - 1, lo, r, q))  # windows [v−1], [v−2, v−1], …, [lo, v−1]
    averages = partial / np.arange(1, partial.size + 1)
    best = float(np.max(averages))
    if lo > 0:
        remainder = float(special.bdtr(lo - 1, r, q))
        best = max(best, (float(partial[-1]) + remainder) / (partial.size + 1))
    return best


def one_run_p_value(m: int, r: int, v: int, epsilon: float, delta: float) -> float:
    """p-value of H₀ "(ε, δ)-DP" after v correct out of r guesses on m canaries (Steinke, Nasr & Jagielski 2023)."""
    q = float(special.expit(epsilon))
    tail = 1.0 if v == 0 else float(special.bdtrc(v - 1, r, q))
    if delta == 0.0 or v == 0:
        return min(1.0, tail)
    return min(1.0, tail + 2.0 * m * delta * _max_average_below(v, r, q))


def one_run_epsilon(m: int, r: int, v: int, significance: float, delta: float, *, precise: bool = True) -> float:
    """ε_lb = inf{ε ≥ 0 : p(ε, δ) > α} for one guess count (0 when even ε = 0 is not rejected).

    ``precise=False`` (coarser, unguarded search) is only for ranking guess counts on selection data.
    """
    if r == 0 or v == 0 or one_run_p_value(m, r, v, 0.0, 0.0) > significance:
        return 0.0  # p(ε, δ) ≥ p(ε, 0), and p(0, 0) > α already
    return first_unrejected_epsilon(
        lambda eps: one_run_p_value(m, r, v, eps, delta) <= significance,
        tolerance=1e-6 if precise else 1e-3,
        scan=precise,
        margin=lambda eps: significance - one_run_p_value(m, r, v, eps, delta),
    )


def one_run_bound(
    scores: AuditScores, significance: float, delta: float, strategy: GuessStrategy
) -> tuple[float, dict[str, Any]]:
    """ε lower bound of the one-run audit under ``strategy`` (validated inputs; see module docstring)."""

    def test(m: int, r: int, v: int, share: float, precise: bool) -> float:
        return one_run_epsilon(m, r, v, share, delta, precise=precise)

    epsilon, details, split_values = guess_bound(scores, strategy, significance, test)
    if split_values:
        details["split_epsilons"] = list(split_values)
    return epsilon, details
