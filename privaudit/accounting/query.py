"""One call that answers "what is ε here?" the way ``privaudit compute-epsilon`` reports it.

:func:`epsilon_report` runs the requested accountant(s) on a composition (optionally next to a paper's
closed form) and returns an :class:`EpsilonReport` whose :meth:`~EpsilonReport.to_dict` is the documented
``--json`` object::

    {"inputs": {...}, "delta": 1e-05, "accountant": "ctd",
     "epsilon": {"ctd": 1.829, "prv": {"lower": ..., "estimate": ..., "upper": ...}, "rdp": 2.101, "closed_form": 1.587},
     "notes": [...], "assumptions": [...], "composition": "...", "unavailable": {...}, "disagreements": [...],
     "guarantee": "none", "statement": "no DP guarantee (ε = ∞)"}          # the last two only when ε = ∞
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from privaudit.accounting.accountants import DEFAULT_CHAIN, compare, get_accountant
from privaudit.accounting.base import NO_GUARANTEE, EpsilonResult
from privaudit.accounting.closed_form import ClosedForm
from privaudit.accounting.mechanisms import Composition
from privaudit.errors import NumericalFailure

ALL_ACCOUNTANTS = ("ctd", "prv", "pld", "rdp", "gdp", "pure")


@dataclass
class EpsilonReport:
    inputs: dict[str, Any]
    delta: float | None
    accountant: str | None
    results: dict[str, EpsilonResult] = field(default_factory=dict)
    closed_form: ClosedForm | None = None
    notes: list[str] = field(default_factory=list)
    unavailable: dict[str, str] = field(default_factory=dict)
    disagreements: list[str] = field(default_factory=list)
    composition: Composition | None = None
    extra_assumptions: list[str] = field(default_factory=list)

    @property
    def answer(self) -> EpsilonResult | None:
        return self.results.get(self.accountant) if self.accountant else None

    def assumptions(self) -> list[str]:
        if self.closed_form is None:
            return list(self.extra_assumptions)
        return (list(self.closed_form.assumptions) + list(self.extra_assumptions)
                + [f"FAILED: {a}" for a in self.closed_form.failed_assumptions])

    def to_dict(self) -> dict[str, Any]:
        epsilon: dict[str, Any] = {name: res.json_value() for name, res in self.results.items()}
        if self.closed_form is not None:
            epsilon["closed_form"] = self.closed_form.value
        out: dict[str, Any] = {
            "inputs": self.inputs,
            "delta": self.delta,
            "accountant": self.accountant,
            "epsilon": epsilon,
            "notes": self.notes,
            "assumptions": self.assumptions(),
        }
        if self.composition is not None:
            out["composition"] = self.composition.describe()
        if self.unavailable:
            out["unavailable"] = self.unavailable
        if self.disagreements:
            out["disagreements"] = self.disagreements
        answer = self.answer
        if answer is not None and math.isinf(answer.epsilon):
            out["guarantee"] = "none"
            out["statement"] = NO_GUARANTEE
        approximate = [n for n, r in self.results.items() if r.approximate]
        if approximate:
            out["approximate"] = approximate
        return out


def _collect_notes(results: dict[str, EpsilonResult]) -> list[str]:
    notes: list[str] = []
    for name, res in results.items():
        for note in res.notes:
            line = f"{name}: {note}"
            if line not in notes:
                notes.append(line)
        if math.isinf(res.epsilon) and not any(NO_GUARANTEE in n for n in res.notes):
            notes.append(f"{name}: ε = ∞ ({NO_GUARANTEE})")
    return notes


def epsilon_report(
    composition: Composition | None,
    delta: float | None,
    accountant: str = "auto",
    *,
    inputs: dict[str, Any] | None = None,
    closed_form: ClosedForm | None = None,
    with_rdp: bool = True,
) -> EpsilonReport:
    """Run ``accountant`` (``auto``, ``all`` or a name) on ``composition`` at ``delta``.

    ``auto`` answers with the first of ctd → prv → pld → rdp that works and, when ``with_rdp`` is set, also shows
    the (fast) RDP value. A composition of ``None`` (e.g. a closed form that is infinite) reports only the
    closed form.
    """
    report = EpsilonReport(inputs=inputs or {}, delta=delta, accountant=None, closed_form=closed_form, composition=composition)
    if closed_form is not None and closed_form.failed_assumptions:
        report.notes.append(f"closed form: {len(closed_form.failed_assumptions)} assumption(s) fail; see assumptions")
    if composition is None or delta is None:
        return report
    key = accountant.strip().lower()
    if key == "all":
        comparison = compare(composition, delta, ALL_ACCOUNTANTS)
        report.results = comparison.results
        report.unavailable = comparison.unavailable
        report.disagreements = comparison.disagreements
        report.accountant = next((n for n in DEFAULT_CHAIN if n in comparison.results), None)
    elif key in ("auto", "default"):
        res = get_accountant("auto").epsilon(composition, delta)
        report.results[res.accountant] = res
        report.accountant = res.accountant
        declined = res.details.get("declined", {})
        report.unavailable.update(declined)
        if with_rdp and res.accountant != "rdp":
            rdp = get_accountant("rdp")
            if rdp.supports(composition):
                report.results["rdp"] = rdp.epsilon(composition, delta)
    else:
        acct = get_accountant(key)
        try:
            res = acct.epsilon(composition, delta)
        except NumericalFailure as exc:
            raise NumericalFailure(f"{exc}; hint: try --accountant auto, which falls back to another accountant") from None
        report.results[res.accountant] = res
        report.accountant = res.accountant
    report.notes.extend(_collect_notes(report.results))
    return report
