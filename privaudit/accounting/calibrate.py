"""Noise calibration: the smallest noise multiplier whose composition meets a target (ε, δ).

Strategy (cheap bracket, then a safeguarded root search on the tight accountant):

1. RDP is an upper bound on ε, so the RDP-calibrated σ_R is feasible for every certified accountant;
   RDP is at most ~70 % loose in ε at practical settings, so the smallest feasible σ lies in
   [σ_R/2, σ_R] (the bracket is widened until the lower end is infeasible).
2. On the chosen accountant, a bracket [lo (infeasible), hi (feasible)] is shrunk with Illinois
   (regula falsi) steps on log σ, falling back to bisection, until hi/lo − 1 ≤ ``rtol``.
3. ``hi`` is returned: it was *evaluated* feasible, so ε(σ) ≤ target holds for the accountant's certified
   upper bound — never a σ that misses the target (opacus' GDP calibration does, spec accountants.md §2.4).

The approximate ``gdp`` accountant is refused: it is not a bound.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

from privaudit.accounting.accountants import DefaultAccountant, get_accountant
from privaudit.accounting.base import Accountant, EpsilonResult, check_delta
from privaudit.accounting.mechanisms import Composition
from privaudit.accounting.prv import PrvAccountant
from privaudit.errors import InvalidParameterError, NumericalFailure

SIGMA_MAX = 1e6
SIGMA_MIN = 1e-3


@dataclass(frozen=True)
class Calibration:
    """The calibrated noise multiplier and ε at that noise from the accountant that was used."""

    noise_multiplier: float
    target_epsilon: float
    delta: float
    accountant: str
    epsilon_at_noise: EpsilonResult
    evaluations: int
    notes: tuple[str, ...] = field(default_factory=tuple)


def _single_pass(acct: Accountant, target: float) -> Accountant:
    """PRV with one pass per probe: its error bound is tied to the known target (0.4 % of it)."""
    eps_error = max(0.004 * target, 1e-3)
    if isinstance(acct, PrvAccountant) and acct.eps_error is None:
        return PrvAccountant(eps_error=eps_error)
    if isinstance(acct, DefaultAccountant):
        return DefaultAccountant(tuple(_single_pass(a, target) for a in acct.chain))
    return acct


def _eps(accountant: Accountant, make: Callable[[float], Composition], sigma: float, delta: float) -> EpsilonResult:
    return accountant.epsilon(make(sigma), delta)


def calibrate_noise(
    make_composition: Callable[[float], Composition],
    target_epsilon: float,
    delta: float,
    accountant: str | Accountant = "auto",
    rtol: float = 1e-3,
) -> Calibration:
    """Smallest σ (to relative tolerance ``rtol``) with ε(make_composition(σ), δ) ≤ target_epsilon."""
    delta = check_delta(delta)
    target = float(target_epsilon)
    if not target > 0 or math.isinf(target) or math.isnan(target):
        raise InvalidParameterError(f"target epsilon must be a positive finite number, got {target_epsilon}")
    acct = get_accountant(accountant)
    if acct.approximate:
        raise InvalidParameterError(f"the {acct.name} accountant is an approximation, never used for calibration")
    acct = _single_pass(acct, target)
    rdp = get_accountant("rdp")
    evaluations = 0

    def feasible_rdp(sigma: float) -> bool:
        nonlocal evaluations
        evaluations += 1
        return _eps(rdp, make_composition, sigma, delta).epsilon <= target

    # 1. RDP bracket (fast): find σ_R with RDP feasibility by doubling, then bisect loosely.
    rdp_ok = rdp.supports(make_composition(1.0))
    if rdp_ok:
        hi = 1.0
        while not feasible_rdp(hi):
            hi *= 2.0
            if hi > SIGMA_MAX:
                raise NumericalFailure(f"no noise multiplier up to {SIGMA_MAX:g} reaches ε = {target:g} at δ = {delta:g}")
        lo = hi / 2.0
        while feasible_rdp(lo) and lo > SIGMA_MIN:
            hi, lo = lo, lo / 2.0
        for _ in range(30):  # RDP bisection to 1e-3 relative
            if hi / lo - 1 <= 1e-3:
                break
            mid = math.sqrt(lo * hi)
            if feasible_rdp(mid):
                hi = mid
            else:
                lo = mid
        sigma_rdp = hi
        if acct.name == "rdp":
            res = _eps(rdp, make_composition, sigma_rdp, delta)
            return _finish(sigma_rdp, target, delta, acct, res, evaluations, ())
        hi, lo = sigma_rdp, sigma_rdp / 2.0
    else:
        hi, lo = 1.0, 0.5

    # 2. Root search on the chosen accountant, keeping an evaluated-feasible upper end.
    def excess(sigma: float) -> tuple[float, EpsilonResult]:
        nonlocal evaluations
        evaluations += 1
        res = _eps(acct, make_composition, sigma, delta)
        return res.epsilon - target, res

    f_hi, res_hi = excess(hi)
    while f_hi > 0:  # only if RDP was unavailable or disagrees
        lo, hi = hi, hi * 2.0
        if hi > SIGMA_MAX:
            raise NumericalFailure(f"no noise multiplier up to {SIGMA_MAX:g} reaches ε = {target:g} at δ = {delta:g}")
        f_hi, res_hi = excess(hi)
    f_lo, _ = excess(lo)
    while f_lo <= 0:
        hi, f_hi, res_hi = lo, f_lo, _eps(acct, make_composition, lo, delta)
        lo /= 2.0
        if lo < SIGMA_MIN:
            return _finish(hi, target, delta, acct, res_hi, evaluations, ("target met at the smallest noise tried",))
        f_lo, _ = excess(lo)
    side = 0
    for _ in range(60):
        if hi / lo - 1 <= rtol:
            break
        a, b = math.log(lo), math.log(hi)
        x = b - f_hi * (b - a) / (f_hi - f_lo) if f_hi != f_lo else 0.5 * (a + b)
        if not a < x < b or abs(x - a) < 1e-3 * (b - a) or abs(b - x) < 1e-3 * (b - a):
            x = 0.5 * (a + b)
        sigma = math.exp(x)
        f_mid, res_mid = excess(sigma)
        if f_mid <= 0:
            hi, f_hi, res_hi = sigma, f_mid, res_mid
            if side == 1:
                f_lo /= 2.0  # Illinois modification
            side = 1
        else:
            lo, f_lo = sigma, f_mid
            if side == -1:
                f_hi /= 2.0
            side = -1
    return _finish(hi, target, delta, acct, res_hi, evaluations, ())


def _finish(sigma: float, target: float, delta: float, acct: Accountant, res: EpsilonResult, evaluations: int,
            notes: tuple[str, ...]) -> Calibration:
    if res.epsilon > target * (1 + 1e-12):  # pragma: no cover - guaranteed by construction
        raise NumericalFailure("calibration ended on an infeasible noise multiplier")
    return Calibration(sigma, target, delta, res.accountant, res, evaluations, notes)
