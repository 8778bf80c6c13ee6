"""``privaudit audit --scores FILE``: the audit of attack scores computed elsewhere, as one JSON-able result.

Every route of :mod:`privaudit.stats.routes` is listed: the ones valid for the declared mechanism family and design
run at α/k each (k = how many run), so the largest bound holds with family-wise confidence 1 − α; the others carry
the reason they were not run. With a claimed ε the verdict rules of :mod:`privaudit.audit.verdict` apply; each
route's power is that of an optimal attack on a Gaussian mechanism at 2× the claim with these sample sizes
(:mod:`privaudit.stats.power`; declared Gaussian family only), and it makes the claim "consistent" only when the
user declares the attack optimal (``attack_optimal``, ``--optimal-attack``).
"""

from __future__ import annotations

import math
from typing import Any

from privaudit.audit.verdict import decide
from privaudit.stats.assumptions import DESIGN_TEXT, MECHANISM_TEXT, Design, MechanismFamily
from privaudit.stats.claim_power import ClaimPower
from privaudit.stats.estimators import audit_scores
from privaudit.stats.metrics import attack_metrics
from privaudit.stats.scores import AuditScores


def _fmt(x: float) -> str:
    return "∞" if math.isinf(x) else f"{x:.4g}"


def swap_warning(scores: AuditScores, *, mechanism: MechanismFamily, design: Design, delta: float,
                 significance: float) -> dict[str, Any] | None:
    """A diagnostic for "in" and "out" swapped: the same routes on (out, in), at the same α and δ, without power.

    Run only when the real direction certifies nothing (a swap makes every one-sided bound 0). When the reversed
    direction certifies ε > 0, the one line returned says so. It is a diagnostic: it changes neither the verdict nor
    α of the real audit, whose bounds and family-wise confidence stand as computed.
    """
    outcomes = audit_scores(scores.out_scores, scores.in_scores, mechanism=mechanism, design=design,
                            significance=significance, delta=delta)
    reversed_best = max((o.bound for o in outcomes if o.bound is not None), key=lambda b: b.epsilon_lb)
    if not reversed_best.epsilon_lb > 0.0:
        return None
    message = (f"the out-scores are higher than the in-scores: were 'in' and 'out' swapped? reversed, "
               f"{reversed_best.estimator} would give ε ≥ {_fmt(reversed_best.epsilon_lb)} (a diagnostic only: the verdict "
               "and α stay those of the scores as given)")
    return {"message": message, "route": reversed_best.estimator, "reversed_epsilon_lb": reversed_best.epsilon_lb,
            "diagnostic_only": True}


def audit_score_file(scores: AuditScores, *, mechanism: MechanismFamily, design: Design, delta: float,
                     significance: float, claim: ClaimPower, source: str) -> dict[str, Any]:
    """Run every applicable route on ``scores``; the result data (routes, best bound, verdict, summary lines).

    ``claim`` holds the claimed ε (``None``: no verdict), the power simulation's size and seed (the seed of the attack
    metrics' bootstrap too), whether a bar shows for long power simulations (10⁵ scores and more), and the user's
    declaration that the attack is optimal for the declared mechanism (``attack_optimal``, recorded in the result).
    """
    claimed_epsilon, attack_optimal = claim.claimed_epsilon, claim.attack_optimal
    outcomes = audit_scores(scores.in_scores, scores.out_scores, mechanism=mechanism, design=design,
                            significance=significance, delta=delta, claim=claim)
    bounds = [o.bound for o in outcomes if o.bound is not None]
    best = max(bounds, key=lambda b: b.epsilon_lb)
    metrics = attack_metrics(scores.in_scores, scores.out_scores, n_resamples=200, seed=claim.seed).to_dict()
    metrics.pop("roc", None)
    summary = [f"{len(bounds)} of {len(outcomes)} routes are valid for {MECHANISM_TEXT[mechanism]} under "
               f"{DESIGN_TEXT[design]}; each ran at α = {significance / len(bounds):.3g}",
               f"best: {best.estimator} certifies ε ≥ {_fmt(best.epsilon_lb)} at δ = {delta:g} "
               f"(family-wise confidence {1 - significance:.3g}; ceiling {_fmt(best.ceiling)})"]
    swapped = None
    if not best.epsilon_lb > 0.0:
        swapped = swap_warning(scores, mechanism=mechanism, design=design, delta=delta, significance=significance)
    if swapped is not None:
        summary.append(f"warning: {swapped['message']}")
    verdict = None
    if claimed_epsilon is not None:
        verdict = decide(claimed_epsilon, delta, bounds)
        powered = [b.power for b in bounds if b.power is not None]
        if powered:
            top = max(powered, key=lambda p: p.lower)
            declaration = ("declared optimal (--optimal-attack)" if attack_optimal else
                           "not declared optimal (--optimal-attack), so it can refute the claim but not support it")
            summary.append(f"power: an optimal attack on a Gaussian mechanism at {top.factor:g}× the claim "
                           f"(ε = {_fmt(top.alternative_epsilon)}) would be refuted with probability ≥ {top.lower:.2f} at "
                           f"these sample sizes; this attack is {declaration}")
        summary.append(f"verdict on ε = {_fmt(claimed_epsilon)}: {verdict.verdict.value} — {verdict.reason}")
    for outcome in outcomes:
        if outcome.bound is None:
            summary.append(f"not run: {outcome.route} — {outcome.reason}")
    return {
        "source": source,
        "n_in": scores.n_in,
        "n_out": scores.n_out,
        "mechanism": mechanism.value,
        "design": design.value,
        "delta": delta,
        "alpha": significance,
        "claimed_epsilon": claimed_epsilon,
        "attack_optimal": bool(attack_optimal),
        "routes": [o.to_dict() for o in outcomes],
        "best": {"route": best.estimator, "epsilon_lb": best.epsilon_lb, "ceiling": best.ceiling},
        "verdict": None if verdict is None else verdict.to_dict(),
        "swap_warning": swapped,
        "attack_metrics": metrics,
        "summary": summary,
    }


def scores_audit_table(result: dict[str, Any]):
    """A rich table: one row per route, its bound, α, ceiling and power, or why it was not run.

    "power" is that of an optimal attack on a Gaussian mechanism at 2× the claim with these sample sizes (its
    Monte-Carlo lower limit), not of the attack that ran; "—" where no such power applies.
    """
    from rich.table import Table

    table = Table(title=f"ε lower bounds for {result['source']} ({result['n_in']} in, {result['n_out']} out; "
                        f"mechanism {result['mechanism']}, design {result['design']})")
    for name in ("route", "ε lower bound", "α", "ceiling", "power (optimal attack, 2× claim)"):
        table.add_column(name)
    for route in result["routes"]:
        if not route["run"]:
            table.add_row(route["route"], "not run", "—", "—", "—")
            continue
        bound = route["result"]
        power = bound["power"]
        table.add_row(route["route"], _fmt(bound["epsilon_lb"]), f"{bound['significance']:.3g}", _fmt(bound["ceiling"]),
                      "—" if power is None else f"≥ {power['lower']:.2f}")
    return table
