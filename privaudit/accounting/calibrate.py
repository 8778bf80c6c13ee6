"""Noise calibration: the smallest noise multiplier whose composition meets a target (ε, δ).

Strategy (bracket from the target, then a safeguarded root search):

1. **Bracket.** Starting from σ = 1, σ is multiplied (or divided) by 4 until ε(σ) crosses the target, so the
   search walks only as far as the target demands and never starts at an extreme (a loose target such as
   ε = 10⁶ no longer walks σ down to 10⁻³ with a slow accountant, a tiny one such as ε = 10⁻⁴ is not refused
   because RDP's floor cannot reach it). σ stays within [:data:`SIGMA_MIN`, :data:`SIGMA_MAX`].
2. **Root search.** The bracket [lo (infeasible), hi (feasible)] is shrunk with Illinois (regula falsi) steps
   on log σ, falling back to bisection, until hi/lo − 1 ≤ ``rtol``.
3. ``hi`` is returned: it was *evaluated* feasible, so ε(σ) ≤ target holds for the accountant's certified
   upper bound — never a σ that misses the target (opacus' GDP calibration does: ``get_noise_multiplier(accountant="gdp")``
   returns σ whose PLD ε exceeds the target at small q).

With ``accountant="auto"`` the probes use ``ctd`` first (milliseconds per probe at any σ, tight, resource
guarded), then prv → pld → rdp where ctd does not apply. The whole calibration shares one work budget
(:mod:`privaudit.accounting.limits`: counted from the inputs, so the answer never depends on the machine's load).
The approximate ``gdp`` accountant is refused: it is not a bound.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

from privaudit.accounting.accountants import DefaultAccountant, get_accountant
from privaudit.accounting.base import Accountant, EpsilonResult, check_delta
from privaudit.accounting.limits import shared_work
from privaudit.accounting.mechanisms import Composition
from privaudit.accounting.prv import PrvAccountant
from privaudit.errors import InvalidParameterError, NumericalFailure

SIGMA_MAX = 1e8
SIGMA_MIN = 1e-6
#: The default accountant chain for calibration: ctd answers fastest at any σ; the others where it does not apply.
CALIBRATION_CHAIN = ("ctd", "prv", "pld", "rdp")


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
    if isinstance(accountant, str) and accountant.strip().lower() in ("auto", "default"):
        acct: Accountant = DefaultAccountant(CALIBRATION_CHAIN)
    else:
        acct = get_accountant(accountant)
    if acct.approximate:
        raise InvalidParameterError(f"the {acct.name} accountant is an approximation, never used for calibration")
    acct = _single_pass(acct, target)
    with shared_work():  # every probe's work counts against one budget
        return _search(make_composition, target, delta, acct, rtol)


def _search(make_composition: Callable[[float], Composition], target: float, delta: float, acct: Accountant,
            rtol: float) -> Calibration:
    """Steps 1–3 of the module docstring."""
    evaluations = 0
    results: dict[float, EpsilonResult] = {}

    def excess(sigma: float) -> float:
        nonlocal evaluations
        if sigma not in results:
            evaluations += 1
            results[sigma] = acct.epsilon(make_composition(sigma), delta)
        return results[sigma].epsilon - target

    # 1. bracket from σ = 1 by factors of 4
    sigma = 1.0
    f = excess(sigma)
    if f > 0:
        lo, f_lo = sigma, f
        while True:
            hi = lo * 4.0
            if hi > SIGMA_MAX:
                raise NumericalFailure(f"no noise multiplier up to {SIGMA_MAX:g} reaches ε = {target:g} at δ = {delta:g} "
                                       f"with the {acct.name} accountant")
            f_hi = excess(hi)
            if f_hi <= 0:
                break
            lo, f_lo = hi, f_hi
    else:
        hi, f_hi = sigma, f
        while True:
            lo = hi / 4.0
            if lo < SIGMA_MIN:
                return _finish(hi, target, delta, results[hi], evaluations,
                               (f"the target is met at every noise down to σ = {hi:g} (the smallest tried)",))
            f_lo = excess(lo)
            if f_lo > 0:
                break
            hi, f_hi = lo, f_lo
    # 2. Illinois steps on log σ, keeping an evaluated-feasible upper end
    side = 0
    for _ in range(80):
        if hi / lo - 1 <= rtol:
            break
        a, b = math.log(lo), math.log(hi)
        x = b - f_hi * (b - a) / (f_hi - f_lo) if f_hi != f_lo and math.isfinite(f_lo) else 0.5 * (a + b)
        if not a < x < b or abs(x - a) < 1e-3 * (b - a) or abs(b - x) < 1e-3 * (b - a):
            x = 0.5 * (a + b)
        mid = math.exp(x)
        f_mid = excess(mid)
        if f_mid <= 0:
            hi, f_hi = mid, f_mid
            if side == 1:
                f_lo /= 2.0  # Illinois modification
            side = 1
        else:
            lo, f_lo = mid, f_mid
            if side == -1:
                f_hi /= 2.0
            side = -1
    return _finish(hi, target, delta, results[hi], evaluations, ())


def _finish(sigma: float, target: float, delta: float, res: EpsilonResult, evaluations: int,
            notes: tuple[str, ...]) -> Calibration:
    if res.epsilon > target * (1 + 1e-12):  # pragma: no cover - guaranteed by construction
        raise NumericalFailure("calibration ended on an infeasible noise multiplier")
    return Calibration(sigma, target, delta, res.accountant, res, evaluations, notes)
