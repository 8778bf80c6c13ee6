"""Statistics that turn attack scores into ε lower bounds; claims and verdicts.

Convenience API (numpy/scipy only, no torch)::

    from privaudit.audit import epsilon_gdp, Bonferroni, Split
    result = epsilon_gdp(in_scores, out_scores, mechanism="gaussian", design="trials", significance=0.05,
                         delta=1e-5, claim=ClaimPower(1.4, attack_optimal=False))
    result.epsilon_lb, result.ceiling, result.power.lower, result.to_dict()

``result.power`` is the power of an optimal attack on a Gaussian mechanism at 2× the claim with these sample sizes
(:mod:`privaudit.stats.power`); it supports "consistent" only with ``attack_optimal=True``
(:func:`privaudit.audit.verdict.decide`). A route's strategy and sidedness: :class:`RouteOptions`.

Estimators by name: :data:`ESTIMATORS` (``cp``, ``gdp``, ``one-run``, ``one-run-fdp``, ``one-run-fdp-box``,
``one-run-paired``, ``one-run-fdp-ledger`` — the run's own curve, ``mechanism=LedgerFamily(...)``); each is valid
only for the mechanism families and score designs listed in :mod:`privaudit.stats.routes`, and :func:`audit_scores`
runs every route that applies. Threshold and guess strategies: :mod:`privaudit.stats.strategies`. Attack metrics
with bootstrap intervals: :func:`attack_metrics`. Per-round white-box composition: :func:`compose_mu`,
:func:`gdp_rounds_lower_bound`; the bound that needs no composition, :func:`gdp_best_round_lower_bound`; the
gradient-canary audit of a checkpoint, :func:`run_gradient_canary_audit` with :class:`GradientCanaryOptions`
(imports torch only when called).
"""

from privaudit.audit.workflows.gradient_canaries import (
    CompositionValidity,
    GradientCanaryAudit,
    GradientCanaryOptions,
    composition_validity,
    run_gradient_canary_audit,
)
from privaudit.stats.assumptions import Design, MechanismFamily
from privaudit.stats.bootstrap import bootstrap_auc, bootstrap_intervals, bootstrap_tpr_at_fpr
from privaudit.stats.claim_power import ClaimPower
from privaudit.stats.estimates import IntervalEstimate, LowerBound, PowerEstimate
from privaudit.stats.estimators import (
    ESTIMATORS,
    RouteOptions,
    RouteOutcome,
    audit_scores,
    default_strategy,
    describe_estimators,
    epsilon_cp,
    epsilon_gdp,
    epsilon_one_run,
    epsilon_one_run_fdp,
    epsilon_one_run_fdp_box,
    epsilon_one_run_fdp_ledger,
    epsilon_one_run_paired,
    estimate,
)
from privaudit.stats.gdp_composition import (
    GdpComposition,
    compose_mu,
    gdp_best_round_lower_bound,
    gdp_rounds_lower_bound,
)
from privaudit.stats.ledger_family import LedgerFamily
from privaudit.stats.metrics import AttackMetrics, attack_metrics
from privaudit.stats.roc import RocCurve, auc, roc_curve, tpr_at_fpr
from privaudit.stats.routes import ROUTES, Route
from privaudit.stats.scores import AuditScores
from privaudit.stats.strategies import (
    DEFAULT_GDP_FAMILY,
    DEFAULT_GUESS_GRID,
    Bonferroni,
    Explicit,
    Guesses,
    GuessGrid,
    MultiSplit,
    OrderStatistics,
    QuantileGrid,
    Split,
    ThresholdGrid,
)

__all__ = [
    "DEFAULT_GDP_FAMILY",
    "DEFAULT_GUESS_GRID",
    "ESTIMATORS",
    "ROUTES",
    "AttackMetrics",
    "AuditScores",
    "Bonferroni",
    "ClaimPower",
    "CompositionValidity",
    "Design",
    "Explicit",
    "GdpComposition",
    "GradientCanaryAudit",
    "GradientCanaryOptions",
    "GuessGrid",
    "Guesses",
    "IntervalEstimate",
    "LedgerFamily",
    "LowerBound",
    "MechanismFamily",
    "MultiSplit",
    "OrderStatistics",
    "PowerEstimate",
    "QuantileGrid",
    "RocCurve",
    "Route",
    "RouteOptions",
    "RouteOutcome",
    "Split",
    "ThresholdGrid",
    "attack_metrics",
    "auc",
    "audit_scores",
    "bootstrap_auc",
    "bootstrap_intervals",
    "bootstrap_tpr_at_fpr",
    "compose_mu",
    "composition_validity",
    "default_strategy",
    "describe_estimators",
    "epsilon_cp",
    "epsilon_gdp",
    "epsilon_one_run",
    "epsilon_one_run_fdp",
    "epsilon_one_run_fdp_box",
    "epsilon_one_run_fdp_ledger",
    "epsilon_one_run_paired",
    "estimate",
    "gdp_best_round_lower_bound",
    "gdp_rounds_lower_bound",
    "roc_curve",
    "run_gradient_canary_audit",
    "tpr_at_fpr",
]
