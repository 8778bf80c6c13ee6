"""One-run f-DP audit (Mahloujifar, Melis & Chaudhuri 2024, "Auditing f-differential privacy in one run").

The same one-run game as :mod:`privaudit.stats.one_run` (m canaries with fair-coin membership, r guesses,
v correct), but the hypothesis is a whole trade-off curve instead of an (ε, δ) box. Here the curve is the
Gaussian one through the audited (ε, δ): μ = the largest μ for which
μ-GDP is (ε, δ)-DP (:func:`privaudit.accounting.gaussian.gaussian_mu_for`, i.e. σ = 1/μ), with the
inverse of its blow-up function g(x) = Φ(Φ⁻¹(x) − μ). At significance α the claim is tested by the
paper's recursion for the guessing game (its Algorithm for reconstruction-style guesses with a cap):

    a ← α·v/m ;  h ← α·(r − v)/m
    for i = v − 1 down to 0:
        h' ← max(h, g(a));  stop if h' = h
        a  ← min(a + (i/(r − i))·(h' − h), 1);  h ← h'
    the claim is falsified iff a + h > r/m

and ε_lb = inf{ε ≥ 0 : not falsified} (:func:`privaudit.stats.epsilon_search.first_unrejected_epsilon`).
With ``curve="gaussian"`` the test refutes "M's trade-off curve is at least the Gaussian one through (ε, δ)";
like the GDP route it speaks about a plain (ε, δ) claim only when the audited mechanism's curve is Gaussian-shaped
(route ``one-run-fdp``). With ``curve="dp"`` the hypothesis is the (ε, δ)-DP curve itself
(:func:`privaudit.stats.trade_off.dp_inverse_blow_up`), which every (ε, δ)-DP mechanism satisfies, so the bound is
valid for any mechanism, and at δ = 0 for pure ε-DP claims (route ``one-run-fdp-box``).
"""

from __future__ import annotations

from typing import Any

from privaudit.accounting.gaussian import gaussian_mu_for
from privaudit.errors import InvalidParameterError
from privaudit.stats.epsilon_search import first_unrejected_epsilon
from privaudit.stats.guess_selection import guess_bound
from privaudit.stats.scores import AuditScores
from privaudit.stats.strategies import GuessStrategy
from privaudit.stats.trade_off import InverseBlowUp, dp_inverse_blow_up, gaussian_inverse_blow_up

CURVES = ("gaussian", "dp")


def curve_falsified(m: int, r: int, v: int, significance: float, g: InverseBlowUp) -> bool:
    """True when v correct of r guesses on m canaries falsify the curve with inverse blow-up g (recursion above)."""
    if v == 0:
        return False
    a = significance * v / m
    h = significance * (r - v) / m
    for i in range(v - 1, -1, -1):
        h_next = max(h, g(a))
        if h_next == h:
            break
        a = min(a + (i / (r - i)) * (h_next - h), 1.0)
        h = h_next
    return a + h > r / m


def fdp_falsified(m: int, r: int, v: int, significance: float, mu: float) -> bool:
    """True when v correct of r guesses on m canaries falsify μ-GDP at ``significance``."""
    return curve_falsified(m, r, v, significance, gaussian_inverse_blow_up(mu))


def _inverse_blow_up(curve: str, epsilon: float, delta: float) -> InverseBlowUp:
    if curve == "gaussian":
        return gaussian_inverse_blow_up(gaussian_mu_for(epsilon, delta))
    if curve == "dp":
        return dp_inverse_blow_up(epsilon, delta)
    raise InvalidParameterError(f"unknown trade-off curve {curve!r}; choose one of {', '.join(CURVES)}")


def one_run_fdp_epsilon(m: int, r: int, v: int, significance: float, delta: float, *, precise: bool = True,
                        curve: str = "gaussian") -> float:
    """ε_lb of the f-DP one-run audit against ``curve`` through (ε, δ): ``gaussian`` (δ > 0) or ``dp`` (δ ≥ 0).

    ``precise=False`` (coarser, unguarded search) is only for ranking guess counts on selection data.
    """
    if v == 0:
        return 0.0
    return first_unrejected_epsilon(
        lambda eps: curve_falsified(m, r, v, significance, _inverse_blow_up(curve, eps, delta)),
        tolerance=1e-6 if precise else 1e-3,
        scan=precise,
    )


_CURVE_TEXT = {
    "gaussian": "Gaussian trade-off through (ε, δ): μ = gaussian_mu_for(ε, δ)",
    "dp": "(ε, δ)-DP trade-off f_{ε,δ} (Kairouz, Oh & Viswanath 2015), valid for every mechanism",
}


def one_run_fdp_bound(
    scores: AuditScores, significance: float, delta: float, strategy: GuessStrategy, curve: str = "gaussian"
) -> tuple[float, dict[str, Any]]:
    """ε lower bound of the one-run f-DP audit against ``curve`` under ``strategy`` (validated inputs)."""

    def test(m: int, r: int, v: int, share: float, precise: bool) -> float:
        return one_run_fdp_epsilon(m, r, v, share, delta, precise=precise, curve=curve)

    epsilon, details, split_values = guess_bound(scores, strategy, significance, test)
    details["curve"] = _CURVE_TEXT[curve]
    if split_values:
        details["split_epsilons"] = list(split_values)
    return epsilon, details
