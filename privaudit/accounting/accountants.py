"""Accountant registry, the default fallback chain, and side-by-side comparison.

``get_accountant("auto")`` (the default) tries ``prv`` → ``pld`` → ``rdp`` and answers with the first that
supports the composition and succeeds; its result names the accountant that answered and why each
earlier one did not (unsupported, failed numerically, or skipped because it would be too slow).
``compare`` runs several accountants side by side and flags disagreements beyond their own error bounds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from privaudit.accounting.base import Accountant, DeltaResult, EpsilonResult
from privaudit.accounting.gdp import GdpAccountant
from privaudit.accounting.mechanisms import Composition
from privaudit.accounting.pld import PldAccountant
from privaudit.accounting.prv import PrvAccountant
from privaudit.accounting.pure import PureCompositionAccountant
from privaudit.accounting.rdp import RdpAccountant
from privaudit.errors import InvalidParameterError, NumericalFailure, UnsupportedMechanismError

ACCOUNTANTS: dict[str, type[Accountant]] = {
    "rdp": RdpAccountant,
    "prv": PrvAccountant,
    "pld": PldAccountant,
    "gdp": GdpAccountant,
    "pure": PureCompositionAccountant,
}
DEFAULT_CHAIN = ("prv", "pld", "rdp")
#: Accountants whose cost grows with the number of distinct mechanisms are skipped by the default chain
#: beyond this many (each distinct mechanism costs a discretisation/convolution of 0.1–1 s).
MAX_DISTINCT_FOR_NUMERICAL = 64


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
    return ACCOUNTANTS[key]()


class DefaultAccountant(Accountant):
    """prv → pld → rdp: the first supported accountant that succeeds answers."""

    name = "auto"
    description = "prv, falling back to pld then rdp; names the accountant that answered"

    def __init__(self, chain: tuple[str | Accountant, ...] = DEFAULT_CHAIN) -> None:
        self.chain = tuple(get_accountant(n) for n in chain)

    def unsupported_reason(self, composition: Composition) -> str | None:
        reasons = [f"{a.name}: {a.unsupported_reason(composition)}" for a in self.chain if not a.supports(composition)]
        return None if len(reasons) < len(self.chain) else "; ".join(reasons)

    def _skip_reason(self, accountant: Accountant, composition: Composition) -> str | None:
        if accountant.name in ("prv", "pld") and len(composition) > MAX_DISTINCT_FOR_NUMERICAL:
            return (f"skipped: {len(composition)} distinct mechanisms exceed the default limit of "
                    f"{MAX_DISTINCT_FOR_NUMERICAL} for {accountant.name} (ask for --accountant {accountant.name} to force it)")
        return None

    def _first(self, composition: Composition, call):
        declined: dict[str, str] = {}
        for accountant in self.chain:
            reason = accountant.unsupported_reason(composition)
            if reason is None:
                reason = self._skip_reason(accountant, composition)
            if reason is not None:
                declined[accountant.name] = reason if reason.startswith("skipped") else f"unsupported: {reason}"
                continue
            try:
                result = call(accountant)
            except NumericalFailure as exc:
                declined[accountant.name] = f"failed: {exc}"
                continue
            notes = tuple(f"{name} did not answer ({why})" for name, why in declined.items())
            return replace(result, notes=result.notes + notes), declined
        raise NumericalFailure("no accountant could answer: " + "; ".join(f"{k}: {v}" for k, v in declined.items()))

    def _epsilon(self, composition: Composition, delta: float) -> EpsilonResult:
        result, declined = self._first(composition, lambda a: a.epsilon(composition, delta))
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
        pld = results.get("pld")
        if pld is not None and prv.estimate is not None:
            tol = max(_prv_error(prv), 1e-6) + 1e-3 * max(1.0, pld.epsilon)
            if abs(pld.epsilon - prv.estimate) > tol:
                found.append(f"pld ({pld.epsilon:.6g}) and prv's estimate ({prv.estimate:.6g}) differ by more than prv's error bound")
    return found


def compare(composition: Composition, delta: float, names: tuple[str, ...] = ("prv", "pld", "rdp", "gdp", "pure")) -> Comparison:
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
