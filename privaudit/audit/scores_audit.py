"""``privaudit audit --scores FILE``: the audit of attack scores computed elsewhere, as one JSON-able result.

Every route of :mod:`privaudit.stats.routes` is listed: the ones valid for the declared mechanism family and design
run at α/k each (k = how many run), so the largest bound holds with family-wise confidence 1 − α; the others carry
the reason they were not run. With a claimed ε the verdict rules of :mod:`privaudit.audit.verdict` apply, with power
resampled from these scores (:mod:`privaudit.stats.power`).
"""

from __future__ import annotations

import math
from typing import Any

from privaudit.audit.verdict import decide
from privaudit.stats.assumptions import DESIGN_TEXT, MECHANISM_TEXT, Design, MechanismFamily
from privaudit.stats.estimators import audit_scores
from privaudit.stats.metrics import attack_metrics
from privaudit.stats.scores import AuditScores


def _fmt(x: float) -> str:
    return "∞" if math.isinf(x) else f"{x:.4g}"


def audit_score_file(scores: AuditScores, *, mechanism: MechanismFamily, design: Design, delta: float,
                     significance: float, claimed_epsilon: float | None, power_trials: int, seed: int,
                     source: str) -> dict[str, Any]:
    """Run every applicable route on ``scores``; the result data (routes, best bound, verdict, summary lines)."""
    outcomes = audit_scores(scores.in_scores, scores.out_scores, mechanism=mechanism, design=design,
                            significance=significance, delta=delta, claimed_epsilon=claimed_epsilon,
                            power_trials=power_trials, power_seed=seed)
    bounds = [o.bound for o in outcomes if o.bound is not None]
    best = max(bounds, key=lambda b: b.epsilon_lb)
    metrics = attack_metrics(scores.in_scores, scores.out_scores, n_resamples=200, seed=seed).to_dict()
    metrics.pop("roc", None)
    summary = [f"{len(bounds)} of {len(outcomes)} routes are valid for {MECHANISM_TEXT[mechanism]} under "
               f"{DESIGN_TEXT[design]}; each ran at α = {significance / len(bounds):.3g}",
               f"best: {best.estimator} certifies ε ≥ {_fmt(best.epsilon_lb)} at δ = {delta:g} "
               f"(family-wise confidence {1 - significance:.3g}; ceiling {_fmt(best.ceiling)})"]
    verdict = None
    if claimed_epsilon is not None:
        verdict = decide(claimed_epsilon, delta, bounds)
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
        "routes": [o.to_dict() for o in outcomes],
        "best": {"route": best.estimator, "epsilon_lb": best.epsilon_lb, "ceiling": best.ceiling},
        "verdict": None if verdict is None else verdict.to_dict(),
        "attack_metrics": metrics,
        "summary": summary,
    }


def scores_audit_table(result: dict[str, Any]):
    """A rich table: one row per route, its bound, α, ceiling and power, or why it was not run."""
    from rich.table import Table

    table = Table(title=f"ε lower bounds for {result['source']} ({result['n_in']} in, {result['n_out']} out; "
                        f"mechanism {result['mechanism']}, design {result['design']})")
    for name in ("route", "ε lower bound", "α", "ceiling", "power"):
        table.add_column(name)
    for route in result["routes"]:
        if not route["run"]:
            table.add_row(route["route"], "not run", "—", "—", "—")
            continue
        bound = route["result"]
        power = bound["power"]
        table.add_row(route["route"], _fmt(bound["epsilon_lb"]), f"{bound['significance']:.3g}", _fmt(bound["ceiling"]),
                      "—" if power is None else f"{power['probability']:.2f}")
    return table
