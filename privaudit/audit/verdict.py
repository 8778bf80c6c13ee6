"""The verdict on one privacy claim, from accounting evidence and empirical lower bounds.

Three verdicts, each with a one-line reason that carries the numbers:

``refuted``
    The claim is false for the mechanism examined, shown by
    (a) an attack: some estimator's ε lower bound exceeds the claimed ε (at the stated confidence; when
        several estimators are consulted their significances add up — Bonferroni — and the reason states
        the family-wise confidence), or
    (b) accounting: a *certified lower bound* on the true ε of the mechanism examined exceeds the
        claim — e.g. the exact ε of a Gaussian release, PRV's lower end, or ε = ∞ for noise that takes at
        most 1000 values. An accountant's *upper* bound above the claim refutes nothing (RDP is loose).
``consistent``
    Not refuted, and either a certified upper bound under assumptions that hold for the implementation is
    at or below the claim (the claim is proven, given those assumptions), or an attack had the power to
    refute a mechanism ``power_factor``× less private (probability ≥ ``min_power``) and did not.
    "Consistent" never means "proven private" unless the first condition is the reason given.
``inconclusive``
    Neither: the audit could not have detected a violation of that size, or the accounting rests on
    assumptions that fail or cannot be checked.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from privaudit.stats.estimates import LowerBound


class Verdict(str, Enum):
    REFUTED = "refuted"
    CONSISTENT = "consistent"
    INCONCLUSIVE = "inconclusive"


@dataclass(frozen=True)
class AccountingEvidence:
    """What an accountant says about one reading of the mechanism.

    ``upper`` is a certified upper bound on ε at the claimed δ (``inf`` if none); ``lower`` a certified lower
    bound on the true ε of that mechanism (``None`` if the accountant gives none). ``implementation`` marks
    the reading that matches what the code runs (vs the paper's assumptions); ``assumptions_hold`` is False
    when the accounting rests on an assumption known to fail or unverifiable (then it proves nothing).
    """

    label: str
    accountant: str
    upper: float
    lower: float | None = None
    implementation: bool = False
    assumptions_hold: bool = True
    assumptions: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "accountant": self.accountant,
            "upper": self.upper,
            "lower": self.lower,
            "implementation": self.implementation,
            "assumptions_hold": self.assumptions_hold,
            "assumptions": list(self.assumptions),
        }


@dataclass(frozen=True)
class VerdictResult:
    verdict: Verdict
    reason: str
    refuted_by: tuple[str, ...] = ()
    family_confidence: float | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)

    def to_dict(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict.value,
            "reason": self.reason,
            "refuted_by": list(self.refuted_by),
            "family_confidence": self.family_confidence,
            "notes": list(self.notes),
        }


def _fmt(x: float) -> str:
    return "∞" if math.isinf(x) else f"{x:.3g}"


def decide(
    claimed_epsilon: float,
    claimed_delta: float,
    lower_bounds: Sequence[LowerBound] = (),
    accounting: Sequence[AccountingEvidence] = (),
    *,
    min_power: float = 0.8,
    tolerance: float = 1e-9,
) -> VerdictResult:
    """Combine evidence into a verdict (see the module docstring for the rules)."""
    notes: list[str] = []
    bounds = [b for b in lower_bounds if b is not None]
    for b in bounds:
        if not math.isclose(b.delta, claimed_delta, rel_tol=1e-9):
            notes.append(f"{b.estimator}: bound computed at δ = {b.delta:g}, not the claimed {claimed_delta:g}; ignored")
    bounds = [b for b in bounds if math.isclose(b.delta, claimed_delta, rel_tol=1e-9)]
    family_alpha = sum(b.significance for b in bounds)
    family_confidence = max(0.0, 1.0 - family_alpha) if bounds else None

    # (a) refuted by an attack
    beating = [b for b in bounds if b.epsilon_lb > claimed_epsilon * (1 + tolerance)]
    # (b) refuted by a certified lower bound of the implementation's ε
    accounting_refutes = [e for e in accounting if e.implementation and e.lower is not None
                          and e.lower > claimed_epsilon * (1 + tolerance)]
    if beating or accounting_refutes:
        parts, refuted_by = [], []
        if beating:
            best = max(beating, key=lambda b: b.epsilon_lb)
            parts.append(f"{best.estimator} proves ε ≥ {_fmt(best.epsilon_lb)} > claimed {_fmt(claimed_epsilon)} "
                         f"at family-wise confidence {family_confidence:.3g}")
            refuted_by += [f"attack:{b.estimator}" for b in beating]
        if accounting_refutes:
            worst = max(accounting_refutes, key=lambda e: e.lower)
            parts.append(f"the mechanism examined ({worst.label}) has ε ≥ {_fmt(worst.lower)} "
                         f"({worst.accountant}) > claimed {_fmt(claimed_epsilon)}")
            refuted_by += [f"accounting:{e.label}" for e in accounting_refutes]
        return VerdictResult(Verdict.REFUTED, "; ".join(parts), tuple(refuted_by), family_confidence, tuple(notes))

    proven = [e for e in accounting if e.implementation and e.assumptions_hold and e.upper <= claimed_epsilon * (1 + tolerance)]
    powerful = [b for b in bounds if b.power is not None and b.power.probability >= min_power]
    if proven:
        best = min(proven, key=lambda e: e.upper)
        reason = (f"the mechanism examined ({best.label}) is certified ε ≤ {_fmt(best.upper)} ({best.accountant}) "
                  f"≤ claimed {_fmt(claimed_epsilon)} under assumptions that hold")
        if bounds:
            top = max(bounds, key=lambda b: b.epsilon_lb)
            reason += f"; attacks found ε ≥ {_fmt(top.epsilon_lb)} (ceiling {_fmt(top.ceiling)})"
        return VerdictResult(Verdict.CONSISTENT, reason, (), family_confidence, tuple(notes))
    if powerful:
        b = max(powerful, key=lambda b: b.power.probability)
        reason = (f"no refutation although {b.estimator} would refute a {b.power.factor:g}× less private mechanism with "
                  f"probability {b.power.probability:.2f} (ε ≥ {_fmt(b.epsilon_lb)} found, ceiling {_fmt(b.ceiling)}); "
                  "this is evidence against large violations, not a proof of privacy")
        return VerdictResult(Verdict.CONSISTENT, reason, (), family_confidence, tuple(notes))

    why: list[str] = []
    if bounds:
        top = max(bounds, key=lambda b: b.ceiling)
        if top.ceiling <= claimed_epsilon:
            why.append(f"even a perfect attack could certify only ε ≥ {_fmt(top.ceiling)} with these samples")
        powers = [b.power.probability for b in bounds if b.power is not None]
        if powers:
            why.append(f"the attacks' power to catch a violation was at most {max(powers):.2f} (< {min_power:g})")
        else:
            why.append("no power estimate was available")
    else:
        why.append("no attack was run")
    failing = [e for e in accounting if e.implementation and not e.assumptions_hold]
    if failing:
        why.append(f"the accounting of the mechanism examined ({failing[0].label}) rests on assumptions that fail or cannot be checked")
    elif not any(e.implementation for e in accounting):
        why.append("no accountant gave a certified bound on the mechanism examined")
    return VerdictResult(Verdict.INCONCLUSIVE, "; ".join(why), (), family_confidence, tuple(notes))
