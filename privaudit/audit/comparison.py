"""Comparison claims: a paper that states no ε is audited for what it does state.

Some papers claim privacy without any (ε, δ). FedReg (002 §4.5) says its modified gradients keep "a similar privacy
protection level" as DP-SGD, measured by the PSNR of the images an inversion attack recovers. Such a claim is audited
as stated — a measured quantity of the paper's method (the *candidate*) against the same quantity of its comparison
point (the *reference*), paired per sample — and never turned into an invented ε to refute. The (ε, δ) vocabulary
(refuted / consistent / inconclusive, :mod:`privaudit.audit.verdict`) is not used for it; its findings are:

``supported``
    every comparison's one-sided upper confidence bound on mean(candidate − reference) is at most the margin Δ:
    the candidate is, with confidence, no worse than the reference by more than Δ;
``not supported``
    some comparison's one-sided lower confidence bound on mean(candidate − reference) exceeds Δ: the candidate is,
    with confidence, worse than the reference by more than Δ;
``inconclusive``
    neither — too few samples (the bound needs two), the bounds straddle Δ, the measurement failed its own check (the
    attack does not beat its baseline even without a defence), or "supported" would rest on a weaker attacker than
    the code has (the adaptive attacker was not run at this size).

Bounds are Student-t bounds on the mean of the paired differences, each at level 1 − α/k for k comparisons
(Bonferroni), so a reading's family-wise confidence is 1 − α (α: the audit's significance). With few samples the
t-bound assumes roughly normal differences; it is stated with every verdict.

``fact``
    a reading that establishes something by construction or by exact accounting — "FedReg+MG adds no noise, so it has
    no DP guarantee (ε = ∞)", "DP-SGD at the paper's σ is (5.4e3, 1e-5)-DP" — reported as a fact beside the verdict,
    never as a verdict on an ε nobody claimed.

A reading opts into these rules with ``Reading.decision`` (:mod:`privaudit.audit.plan`); the runner then calls
``decision(analysis, significance)`` instead of :func:`~privaudit.audit.verdict.decide`, and a claim made of such
readings is combined by :func:`overall_comparison` / :func:`comparison_by_role`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

import numpy as np

from privaudit.audit.verdict import VerdictResult
from privaudit.errors import InvalidParameterError


class Finding(str, Enum):
    """The findings of comparison claims, and ``fact`` for fact readings."""

    SUPPORTED = "supported"
    NOT_SUPPORTED = "not supported"
    INCONCLUSIVE = "inconclusive"
    FACT = "fact"


@dataclass(frozen=True)
class ComparisonRule:
    """What a comparison reading decides: ``statement`` holds if mean(candidate − reference) ≤ ``margin``."""

    statement: str
    margin: float
    unit: str = "dB"

    def __post_init__(self) -> None:
        if not (math.isfinite(self.margin) and self.margin >= 0):
            raise InvalidParameterError(f"a comparison margin must be a finite number ≥ 0, got {self.margin!r}")

    def to_dict(self) -> dict[str, Any]:
        return {"statement": self.statement, "margin": self.margin, "unit": self.unit}


@dataclass(frozen=True)
class PairedComparison:
    """One comparison: candidate − reference on each paired sample (e.g. one image's PSNR under both)."""

    label: str
    candidate: str
    reference: str
    differences: tuple[float, ...]


@dataclass(frozen=True)
class ComparisonBound:
    """The mean paired difference with its one-sided bounds at ``level`` each, and the comparison's finding."""

    label: str
    candidate: str
    reference: str
    n: int
    mean: float
    lower: float
    upper: float
    level: float
    finding: Finding

    def to_dict(self) -> dict[str, Any]:
        return {"label": self.label, "candidate": self.candidate, "reference": self.reference, "n": self.n,
                "mean_difference": self.mean, "lower": self.lower, "upper": self.upper, "level": self.level,
                "finding": self.finding.value}

    def text(self, unit: str) -> str:
        if self.n < 2:
            return f"{self.label}: {self.candidate} − {self.reference} = {self.mean:+.3g} {unit} on {self.n} sample (no bound)"
        return (f"{self.label}: {self.candidate} − {self.reference} = {self.mean:+.3g} {unit} "
                f"[{_f(self.lower)}, {_f(self.upper)}] ({self.level:.3g} one-sided each, n = {self.n})")


@dataclass(frozen=True)
class ComparisonResult(VerdictResult):
    """A :class:`~privaudit.audit.verdict.VerdictResult` whose ``basis`` holds the rule and every comparison's numbers
    (JSON); the runner stores it in the reading's details under ``"decision"``."""

    basis: Mapping[str, Any] = field(default_factory=dict)


def _f(x: float) -> str:
    return "∞" if x == math.inf else ("−∞" if x == -math.inf else f"{x:+.3g}")


def paired_bound(comparison: PairedComparison, significance: float, margin: float) -> ComparisonBound:
    """One-sided Student-t bounds at level 1 − ``significance`` each on mean(differences), and the finding vs ``margin``."""
    from scipy.stats import t

    d = np.asarray(comparison.differences, dtype=np.float64)
    if d.size == 0 or not np.all(np.isfinite(d)):
        raise InvalidParameterError(f"comparison {comparison.label!r} needs finite paired differences")
    mean = float(d.mean())
    if d.size < 2:
        lower, upper = -math.inf, math.inf
    else:
        half = float(t.ppf(1.0 - significance, d.size - 1) * d.std(ddof=1) / math.sqrt(d.size))
        lower, upper = mean - half, mean + half
    tolerance = 1e-12 * max(1.0, abs(margin))
    if lower > margin + tolerance:
        finding = Finding.NOT_SUPPORTED
    elif upper <= margin + tolerance:
        finding = Finding.SUPPORTED
    else:
        finding = Finding.INCONCLUSIVE
    return ComparisonBound(comparison.label, comparison.candidate, comparison.reference, int(d.size), mean, lower, upper,
                           1.0 - significance, finding)


def decide_comparison(comparisons: Sequence[PairedComparison], rule: ComparisonRule, significance: float, *,
                      invalid: Sequence[str] = (), support_needs: Sequence[str] = (),
                      context: Sequence[str] = ()) -> ComparisonResult:
    """The finding of one comparison reading (module docstring); the reason carries every comparison's numbers.

    ``invalid``: reasons the measurement cannot decide anything (inconclusive whatever the numbers); ``support_needs``:
    reasons "supported" cannot be concluded yet (it becomes inconclusive; "not supported" stands, since what is missing
    could only make the candidate look worse); ``context``: numbers reported after the finding.
    """
    if not comparisons:
        raise InvalidParameterError("a comparison reading needs at least one comparison")
    if not 0.0 < significance < 1.0:
        raise InvalidParameterError(f"significance must lie in (0, 1), got {significance!r}")
    share = significance / len(comparisons)
    bounds = [paired_bound(c, share, rule.margin) for c in comparisons]
    failing = [b for b in bounds if b.finding is Finding.NOT_SUPPORTED]
    numbers = "; ".join(b.text(rule.unit) for b in bounds)
    head = f"rule: {rule.statement} (Δ = {rule.margin:g} {rule.unit}, family-wise confidence {1 - significance:.3g})"
    if invalid:
        finding, why = Finding.INCONCLUSIVE, "; ".join(invalid)
    elif failing:
        worst = max(failing, key=lambda b: b.lower)
        finding = Finding.NOT_SUPPORTED
        why = (f"{worst.candidate} is worse than {worst.reference} by more than Δ: the mean difference is at least "
               f"{worst.lower:.3g} {rule.unit} > {rule.margin:g} {rule.unit}")
    elif all(b.finding is Finding.SUPPORTED for b in bounds) and not support_needs:
        finding = Finding.SUPPORTED
        why = f"every comparison's upper bound is ≤ Δ = {rule.margin:g} {rule.unit}"
    else:
        finding = Finding.INCONCLUSIVE
        open_ = [b.label for b in bounds if b.finding is Finding.INCONCLUSIVE]
        if bounds[0].n < 2:
            parts = [f"{bounds[0].n} sample gives no confidence bound (the rule needs at least 2)"]
        else:
            parts = [f"the bounds of {', '.join(open_)} straddle Δ (n = {bounds[0].n})"] if open_ else []
        why = "; ".join([*parts, *support_needs]) or "undecided"
    reason = f"{why} — {numbers}"
    if context:
        reason += "; " + "; ".join(context)
    basis = {"rule": rule.to_dict(), "significance": significance, "per_comparison_level": 1 - share,
             "comparisons": [b.to_dict() for b in bounds], "invalid": list(invalid), "support_needs": list(support_needs)}
    return ComparisonResult(finding, f"{reason} ({head})", (), 1.0 - significance, (), basis)  # type: ignore[arg-type]


def fact(headline: str, reason: str, **numbers: Any) -> ComparisonResult:
    """A fact reading's result: ``headline`` (e.g. "no DP guarantee (ε = ∞)") and the reason with its numbers."""
    return ComparisonResult(Finding.FACT, f"{headline}: {reason}", (), None, (),  # type: ignore[arg-type]
                            {"fact": headline, "detail": reason, **numbers})


# ------------------------------------------------------------------------------------------------
# a claim made of comparison and fact readings
# ------------------------------------------------------------------------------------------------
def is_comparison_claim(outcomes: Sequence[Any]) -> bool:
    """Whether a claim's readings decide by their own rule (``Reading.decision``) rather than by (ε, δ)."""
    return any(o.reading.decision is not None for o in outcomes)


def _is_fact(outcome: Any) -> bool:
    return outcome.verdict.verdict is Finding.FACT


def overall_comparison(outcomes: Sequence[Any]) -> tuple[Finding, str, list[str]]:
    """The claim's finding from its comparison readings (facts are reported beside it, never combined into it).

    not supported — some comparison reading is not supported; supported — every one is; inconclusive — otherwise.
    """
    decisive = [o for o in outcomes if not _is_fact(o) and o.reading.role.value != "validity"]
    notes: list[str] = []  # the facts are in comparison_by_role (verdicts_by_role), shown beside the finding
    if not decisive:
        return Finding.INCONCLUSIVE, "no comparison reading ran", notes
    failing = [o for o in decisive if o.verdict.verdict is Finding.NOT_SUPPORTED]
    if failing:
        more = f" (and {len(failing) - 1} more reading(s))" if len(failing) > 1 else ""
        return Finding.NOT_SUPPORTED, f"{failing[0].reading.reading_id}: {failing[0].verdict.reason}{more}", notes
    if all(o.verdict.verdict is Finding.SUPPORTED for o in decisive):
        return Finding.SUPPORTED, "; ".join(f"{o.reading.reading_id}: {o.verdict.reason}" for o in decisive), notes
    open_ = next(o for o in decisive if o.verdict.verdict is not Finding.SUPPORTED)
    return Finding.INCONCLUSIVE, f"{open_.reading.reading_id}: {open_.verdict.reason}", notes


def comparison_by_role(outcomes: Sequence[Any]) -> dict[str, dict[str, Any]]:
    """Like the runner's ``verdicts_by_role``: the comparison readings' finding "as stated", then one entry per fact.

    Fact entries are keyed ``fact:<reading>`` with basis ``fact`` and the fact's headline as their verdict, so the
    CLI and the report print e.g. "no DP guarantee for FedReg+MG (ε = ∞) (fact)" beside the finding.
    """
    out: dict[str, dict[str, Any]] = {}
    decisive = [o for o in outcomes if not _is_fact(o) and o.reading.role.value != "validity"]
    if decisive:
        finding, reason, _ = overall_comparison(decisive)
        if len(decisive) > 1:
            reason += f" (readings: {', '.join(f'{o.reading.reading_id} {o.verdict.verdict.value}' for o in decisive)})"
        out["paper"] = {"verdict": finding.value, "basis": "as stated", "reason": reason,
                        "readings": {o.reading.reading_id: o.verdict.verdict.value for o in decisive}}
    for o in outcomes:
        if _is_fact(o):
            basis = dict(o.verdict.basis) if isinstance(o.verdict, ComparisonResult) else {}
            headline = str(basis.get("fact", Finding.FACT.value))
            out[f"fact:{o.reading.reading_id}"] = {"verdict": headline, "basis": "fact",
                                                   "reason": f"{o.reading.reading_id}: {basis.get('detail', o.verdict.reason)}",
                                                   "readings": {o.reading.reading_id: Finding.FACT.value}}
    return out
