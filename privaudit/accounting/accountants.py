"""Accountant registry, the default fallback chain, and side-by-side comparison.

``get_accountant("auto")`` (the default) tries ``ctd`` → ``prv`` → ``pld`` → ``rdp`` and answers with the first
that supports the composition and succeeds; its result names the accountant that answered and why each
earlier one did not (unsupported, failed numerically, declined by its resource limits, or skipped). ``ctd``
(privaudit's own connect-the-dots PLD) is the tightest and fastest certified bound where it applies, and
needs no third-party import (prv-accountant costs ~1 s to import). ``prv`` and dp-accounting's ``pld`` pay a
discretisation per distinct mechanism and are skipped beyond :data:`MAX_DISTINCT_FOR_NUMERICAL` of them;
``prv`` is also skipped when ε is tiny (below :data:`PRV_MIN_EPSILON` by RDP), where its error floor of 1e-3
would make it loose. All of them share one work budget (:mod:`privaudit.accounting.limits`): which accountant
answers depends on the inputs and the limits, never on the machine's load.
``compare`` runs several accountants side by side and flags disagreements beyond their own error bounds.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace

from privaudit.accounting.base import Accountant, DeltaResult, EpsilonResult
from privaudit.accounting.ctd import CtdAccountant
from privaudit.accounting.gaussian import plain_gaussian_mu
from privaudit.accounting.gdp import GdpAccountant
from privaudit.accounting.limits import ResourceRefusal, shared_work
from privaudit.accounting.mechanisms import Composition
from privaudit.accounting.pld import PldAccountant
from privaudit.accounting.prv import PrvAccountant
from privaudit.accounting.pure import PureCompositionAccountant
from privaudit.accounting.rdp import RdpAccountant
from privaudit.errors import InvalidParameterError, NumericalFailure, UnsupportedMechanismError

ACCOUNTANTS: dict[str, type[Accountant]] = {
    "rdp": RdpAccountant,
    "prv": PrvAccountant,
    "ctd": CtdAccountant,
    "pld": PldAccountant,
    "gdp": GdpAccountant,
    "pure": PureCompositionAccountant,
}
DEFAULT_CHAIN = ("ctd", "prv", "pld", "rdp")
#: prv and pld (dp-accounting), whose cost grows with the number of distinct mechanisms (a discretisation and
#: convolution of 0.1–1 s each), are skipped by the default chain beyond this many; ctd is not.
MAX_DISTINCT_FOR_NUMERICAL = 64
#: Below this ε (by RDP, an upper bound) prv's error floor (eps_error ≥ 1e-3) exceeds 0.5 % of ε: skipped.
PRV_MIN_EPSILON = 0.2


_OPTIONS: dict[str, float] = {}


@contextmanager
def accountant_options(value_discretization_interval: float | None = None, eps_error: float | None = None) -> Iterator[None]:
    """Within the block, accountants built by :func:`get_accountant` (also inside ``auto``) use these numerics:
    the discretisation interval h of ``ctd`` and ``pld`` (``--vdi``) and the ε error bound of ``prv`` (``--eps-error``)."""
    for name, value in (("value_discretization_interval", value_discretization_interval), ("eps_error", eps_error)):
        if value is not None and not (value > 0 and math.isfinite(value)):
            raise InvalidParameterError(f"{name} must be a positive number, got {value}")
    previous = dict(_OPTIONS)
    _OPTIONS.update({k: float(v) for k, v in (("value_discretization_interval", value_discretization_interval),
                                               ("eps_error", eps_error)) if v is not None})
    try:
        yield
    finally:
        _OPTIONS.clear()
        _OPTIONS.update(previous)


def accountant_names() -> list[str]:
    return ["auto", *ACCOUNTANTS]


def get_accountant(name: str | Accountant) -> Accountant:
    """An accountant by registry name (``auto``, ``rdp``, ``prv``, ``pld``, ``gdp``, ``pure``)."""
    if isinstance(name, Accountant):
        return name
    key = str(name).strip().lower()
    if key in ("auto", "default"):
        return DefaultAccountant()
    if key not in ACCOUNTANTS:
        raise InvalidParameterError(f"unknown accountant {name!r}; choose one of: {', '.join(accountant_names())}")
    if key in ("ctd", "pld") and "value_discretization_interval" in _OPTIONS:
        return ACCOUNTANTS[key](value_discretization_interval=_OPTIONS["value_discretization_interval"])
    if key == "prv" and "eps_error" in _OPTIONS:
        return ACCOUNTANTS[key](eps_error=_OPTIONS["eps_error"])
    return ACCOUNTANTS[key]()


class DefaultAccountant(Accountant):
    """ctd → prv → pld → rdp: the first supported accountant that succeeds answers."""

    name = "auto"
    description = "ctd, falling back to prv, pld, then rdp; names the accountant that answered"
    delegates = True

    def __init__(self, chain: tuple[str | Accountant, ...] = DEFAULT_CHAIN) -> None:
        self.chain = tuple(get_accountant(n) for n in chain)

    def unsupported_reason(self, composition: Composition) -> str | None:
        reasons = [f"{a.name}: {a.unsupported_reason(composition)}" for a in self.chain if not a.supports(composition)]
        return None if len(reasons) < len(self.chain) else "; ".join(reasons)

    def _skip_reason(self, accountant: Accountant, composition: Composition, delta: float | None) -> str | None:
        if accountant.name in ("prv", "pld") and len(composition) > MAX_DISTINCT_FOR_NUMERICAL:
            return (f"skipped: {len(composition)} distinct mechanisms exceed the default limit of "
                    f"{MAX_DISTINCT_FOR_NUMERICAL} for {accountant.name} (ask for --accountant {accountant.name} to force it)")
        if accountant.name == "prv" and delta is not None and any(a.name == "ctd" for a in self.chain):
            rdp = RdpAccountant()
            if rdp.supports(composition) and plain_gaussian_mu(composition) is None:
                eps = rdp.epsilon(composition, delta).epsilon
                if eps < PRV_MIN_EPSILON:
                    return (f"skipped: ε ≤ {eps:.3g} (RDP) is below {PRV_MIN_EPSILON:g}, where prv's error floor "
                            "(eps_error ≥ 1e-3) would make it loose; ctd resolves small ε")
        return None

    def _first(self, composition: Composition, call, delta: float | None = None):
        """The first accountant's answer; all of them share one work budget (the last one, rdp, is fast)."""
        with shared_work():
            return self._first_within_budget(composition, call, delta)

    def _first_within_budget(self, composition: Composition, call, delta: float | None):
        declined: dict[str, str] = {}
        for accountant in self.chain:
            reason = accountant.unsupported_reason(composition)
            if reason is None:
                reason = self._skip_reason(accountant, composition, delta)
            if reason is not None:
                declined[accountant.name] = reason if reason.startswith("skipped") else f"unsupported: {reason}"
                continue
            try:
                result = call(accountant)
            except NumericalFailure as exc:
                declined[accountant.name] = f"{'declined' if isinstance(exc, ResourceRefusal) else 'failed'}: {exc}"
                continue
            notes = tuple(f"{name} did not answer ({why})" for name, why in declined.items())
            return replace(result, notes=result.notes + notes), declined
        raise NumericalFailure("no accountant could answer: " + "; ".join(f"{k}: {v}" for k, v in declined.items()))

    def _epsilon(self, composition: Composition, delta: float) -> EpsilonResult:
        result, declined = self._first(composition, lambda a: a.epsilon(composition, delta), delta)
        return replace(result, details={**result.details, "declined": declined})

    def _delta(self, composition: Composition, epsilon: float) -> DeltaResult:
        result, _ = self._first(composition, lambda a: a.delta(composition, epsilon))
        return result


@dataclass
class Comparison:
    """Side-by-side answers of several accountants for one composition and δ."""

    delta: float
    results: dict[str, EpsilonResult] = field(default_factory=dict)
    unavailable: dict[str, str] = field(default_factory=dict)
    disagreements: list[str] = field(default_factory=list)


def _prv_error(result: EpsilonResult) -> float:
    return float(result.details.get("eps_error", 0.0))


def find_disagreements(results: dict[str, EpsilonResult]) -> list[str]:
    """Disagreements beyond the accountants' own error bounds.

    * a certified upper bound below PRV's certified lower bound (one of the two is wrong);
    * PLD (tight up to its discretisation) farther from PRV's estimate than PRV's eps_error.
    """
    found: list[str] = []
    prv = results.get("prv")
    if prv is not None and prv.lower is not None:
        for name, res in results.items():
            if name == "prv" or res.approximate or math.isinf(res.epsilon):
                continue
            if res.epsilon < prv.lower - 1e-6 * max(1.0, prv.lower):
                found.append(f"{name} gives ε = {res.epsilon:.6g}, below PRV's certified lower bound {prv.lower:.6g}")
        for tight in ("pld", "ctd"):
            res = results.get(tight)
            if res is not None and prv.estimate is not None:
                tol = max(_prv_error(prv), 1e-6) + 1e-3 * max(1.0, res.epsilon)
                if abs(res.epsilon - prv.estimate) > tol:
                    found.append(f"{tight} ({res.epsilon:.6g}) and prv's estimate ({prv.estimate:.6g}) differ by more than prv's error bound")
    return found


def compare(composition: Composition, delta: float, names: tuple[str, ...] = ("prv", "ctd", "pld", "rdp", "gdp", "pure")) -> Comparison:
    """Run each named accountant; unsupported or failed ones are listed with the reason."""
    comparison = Comparison(delta=delta)
    for name in names:
        accountant = get_accountant(name)
        reason = accountant.unsupported_reason(composition)
        if reason is not None:
            comparison.unavailable[name] = f"unsupported: {reason}"
            continue
        try:
            comparison.results[name] = accountant.epsilon(composition, delta)
        except (NumericalFailure, UnsupportedMechanismError) as exc:
            comparison.unavailable[name] = f"failed: {exc}"
    comparison.disagreements = find_disagreements(comparison.results)
    return comparison
