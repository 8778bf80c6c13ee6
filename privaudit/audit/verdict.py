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
    at or below the claim (the claim is proven, given those assumptions), or an attack earned it: the
    mechanism was declared Gaussian, the attack declared optimal for it (``attack_optimal``: its score a
    strictly increasing function of the privacy loss of a worst-case pair — an assumption the auditor states
    and the scores cannot check), and the one-sided 95 % Clopper–Pearson lower limit of the power of an optimal
    attack on a Gaussian mechanism at ``factor``× the claim is ≥ ``min_power`` (:mod:`privaudit.stats.power`).
    Under those assumptions P[consistent | true ε ≥ factor × claimed ε] ≤ 1 − ``min_power`` (up to that
    Monte-Carlo error), which the validity suite checks (:mod:`privaudit.audit.verdict_validity`).
    An attack that is not declared optimal, or a mechanism family without a canonical alternative ("any",
    "pure"), can never earn it: a weak attack on a leaky mechanism produces exactly the scores of an optimal
    attack on a private one, and a mechanism can leak so rarely that no finite audit sees it.
    "Consistent" never means "proven private" unless the first condition is the reason given.
``inconclusive``
    Neither: the audit could not have detected a violation of that size, the attack's silence is no evidence
    (not declared optimal, or no attack-based power for the declared family), or the accounting rests on
    assumptions that fail or cannot be checked. The reason says which.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from privaudit.stats.estimates import LowerBound, PowerEstimate


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


def _found(b: LowerBound) -> str:
    """What an attack found, never "ε ≥ 0": the bound, or that it certified nothing."""
    found = f"found ε ≥ {_fmt(b.epsilon_lb)}" if b.epsilon_lb > 0 else "found no ε > 0"
    return f"{b.estimator} {found} (ceiling {_fmt(b.ceiling)})"


def _alternative(p: PowerEstimate) -> str:
    rounds = f" ({p.rounds} equal rounds)" if p.rounds > 1 else ""
    return (f"an optimal attack on a Gaussian mechanism at {p.factor:g}× the claim (ε = {_fmt(p.alternative_epsilon)})"
            f"{rounds} would be refuted")


def _power_statement(p: PowerEstimate) -> str:
    """The power of an optimal attack at factor × the claim, with its Monte-Carlo lower limit."""
    return (f"{_alternative(p)} with probability ≥ {p.lower:.2f} at these sample sizes (95 % lower limit, "
            f"{p.trials} simulations)")


def _attack_silence(bounds: Sequence[LowerBound], min_power: float) -> list[str]:
    """Why the attacks' failure to refute is no evidence of privacy here (one clause per kind of reason)."""
    why: list[str] = []
    with_power = [b for b in bounds if b.power is not None]
    if with_power:
        best = max(with_power, key=lambda b: b.power.lower)
        p = best.power
        if p.lower >= min_power:  # the sizes would do; the attack is what is not vouched for
            why.append(f"not refuted; {_power_statement(p)}, but this attack is not declared optimal, so its silence is "
                       "no evidence of privacy")
        else:
            why.append(f"too little power: {_alternative(p)} with probability only about {p.probability:.2f} at these "
                       f"sample sizes (95 % lower limit {p.lower:.2f} < {min_power:g}), so the audit could miss a violation "
                       "of that size")
    reasons = list(dict.fromkeys(b.no_power_reason for b in bounds if b.power is None and b.no_power_reason))
    if reasons and not with_power:
        why.extend(reasons)
    if not with_power and not reasons:
        why.append("no power estimate was available (no claimed ε was given to the estimators)")
    return why


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
    earned = [b for b in bounds if b.power is not None and b.attack_optimal and b.power.lower >= min_power]
    if proven:
        best = min(proven, key=lambda e: e.upper)
        reason = (f"the mechanism examined ({best.label}) is certified ε ≤ {_fmt(best.upper)} ({best.accountant}) "
                  f"≤ claimed {_fmt(claimed_epsilon)} under assumptions that hold")
        if bounds:
            top = max(bounds, key=lambda b: b.epsilon_lb)
            reason += "; attacks " + _found(top).split(" ", 1)[1]
        return VerdictResult(Verdict.CONSISTENT, reason, (), family_confidence, tuple(notes))
    if earned:
        b = max(earned, key=lambda b: b.power.lower)
        reason = (f"not refuted; the attack is declared optimal for a Gaussian mechanism (an assumption the scores cannot "
                  f"check), and {_power_statement(b.power)}; {_found(b)}. Evidence against violations of "
                  f"{b.power.factor:g}× the claim or more under that assumption, not a proof of privacy")
        return VerdictResult(Verdict.CONSISTENT, reason, (), family_confidence, tuple(notes))

    why: list[str] = []
    if bounds:
        top = max(bounds, key=lambda b: b.ceiling)
        if top.ceiling <= claimed_epsilon:
            why.append(f"even a perfect attack could certify only ε ≥ {_fmt(top.ceiling)} with these samples")
        why.extend(_attack_silence(bounds, min_power))
    else:
        why.append("no attack was run")
    failing = [e for e in accounting if e.implementation and not e.assumptions_hold]
    if failing:
        why.append(f"the accounting of the mechanism examined ({failing[0].label}) rests on assumptions that fail or cannot be checked")
    elif not any(e.implementation for e in accounting):
        why.append("no accountant gave a certified bound on the mechanism examined")
    return VerdictResult(Verdict.INCONCLUSIVE, "; ".join(why), (), family_confidence, tuple(notes))
