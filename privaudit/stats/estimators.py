"""The estimators by name: each turns in/out scores into a :class:`LowerBound` with its ceiling and power.

The routes and what each assumes are in :mod:`privaudit.stats.routes`. The caller says what it audits —
``mechanism`` (``any`` | ``gaussian`` | ``pure``) and ``design`` (``trials`` | ``bernoulli`` | ``fixed``, default:
the route's own) — and a route whose bound would not be valid under those assumptions is refused with
:class:`~privaudit.errors.RouteNotApplicable`, never run. :func:`audit_scores` runs every route and lists, for
each, its bound or the reason it was not run.

Every estimator validates its inputs here, once; computes the bound (with the route's strategy and sidedness,
:class:`RouteOptions`); computes the ceiling (:mod:`privaudit.stats.ceiling`); and, when a claimed ε is given
(:class:`~privaudit.stats.claim_power.ClaimPower`), the power of an *optimal* attack to refute it if the mechanism
were ``factor``× less private — calibrated to the claim, from the declared family's canonical mechanism, never from
the observed scores (:mod:`privaudit.stats.power`; Gaussian family only, else ``power`` is None and
``no_power_reason`` says why). The claim's ``attack_optimal`` records the auditor's declaration that the attack is
optimal for the declared mechanism, the assumption under which that power speaks for the attack that ran.
:data:`ESTIMATORS` maps the names to functions so the CLI and the report can list them.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import numpy as np

from privaudit.errors import InvalidParameterError
from privaudit.stats.assumptions import MechanismFamily
from privaudit.stats.ceiling import ceiling
from privaudit.stats.claim_power import NO_CLAIM, ClaimPower
from privaudit.stats.curve_family import CurveFamily
from privaudit.stats.estimates import LowerBound
from privaudit.stats.guess_selection import split_ceiling
from privaudit.stats.one_run import one_run_epsilon
from privaudit.stats.one_run_fdp import one_run_fdp_epsilon
from privaudit.stats.one_run_fdp_ledger import ledger_guess_test
from privaudit.stats.power import canonical_power, declared, power_unavailable
from privaudit.stats.routes import ROUTES, Route, applicable_routes, resolve_assumptions, route
from privaudit.stats.scores import AuditScores, check_delta, check_positive_delta, check_significance
from privaudit.stats.strategies import MultiSplit, Split, Strategy


@functools.lru_cache(maxsize=4096)
def _cached_ceiling(name: str, n_in: int, n_out: int, strategy: Strategy, significance: float, delta: float,
                    two_sided: bool, curves: CurveFamily | None = None) -> float:
    """The ceiling depends only on the route, sample sizes, strategy, α, δ, sidedness and (for a curve route) the curve
    family: computed once per tuple."""
    chosen = route(name)
    run_bound = chosen.bound_for(curves)

    def bound(candidate: AuditScores, picked: Strategy = strategy) -> float:
        return run_bound(candidate, significance, delta, picked, two_sided)[0]

    sizes = AuditScores.trusted(np.zeros(n_in), np.zeros(n_out))
    return _ceiling(chosen, bound, sizes, strategy, significance, delta, curves)


def _ceiling(chosen: Route, bound, scores: AuditScores, strategy: Strategy, significance: float, delta: float,
             curves: CurveFamily | None = None) -> float:
    """The perfect attack's bound (:mod:`privaudit.stats.ceiling`); for one-run splits, the best any outcome allows."""
    if chosen.one_run and isinstance(strategy, (Split, MultiSplit)):
        def test(m: int, r: int, v: int, share: float, precise: bool) -> float:
            if chosen.name == "one-run":
                return one_run_epsilon(m, r, v, share, delta, precise=precise)
            curve = "dp" if chosen.name == "one-run-fdp-box" else "gaussian"
            return one_run_fdp_epsilon(m, r, v, share, delta, precise=precise, curve=curve)

        if curves is not None:
            test = ledger_guess_test(curves, delta)
        return split_ceiling(scores.n_in + scores.n_out, strategy, significance, test)
    return ceiling(bound, scores.n_in, scores.n_out, strategy, stratified_splits=chosen.two_sided)


def default_strategy(name: str) -> Strategy:
    """The strategy an estimator uses when none is given."""
    return route(name).default_strategy


@dataclass(frozen=True)
class RouteOptions:
    """How a route turns scores into guesses: its ``strategy`` (thresholds, splits, guess counts; ``None``: the route's
    default) and whether it also guesses "in" for low scores (``two_sided``; only routes that allow it)."""

    strategy: Strategy | None = None
    two_sided: bool = False


DEFAULT_ROUTE_OPTIONS = RouteOptions()


def estimate(
    name: str,
    in_scores: object,
    out_scores: object,
    *,
    mechanism: object = MechanismFamily.ANY,
    design: object | None = None,
    significance: float = 0.05,
    delta: float = 1e-5,
    route_options: RouteOptions = DEFAULT_ROUTE_OPTIONS,
    claim: ClaimPower = NO_CLAIM,
) -> LowerBound:
    """Run estimator ``name`` (see :mod:`privaudit.stats.routes`) and return its bound, ceiling and (optional) power.

    Raises :class:`~privaudit.errors.RouteNotApplicable` when the route is not valid for ``mechanism`` under
    ``design``. ``claim`` asks for the power against a claimed ε (its ``min_power`` is the target of the power
    simulation's stopping rule, the verdict's ``min_power``; its ``progress`` shows a bar for long simulations).
    """
    chosen = route(name)
    family, provenance = resolve_assumptions(chosen, mechanism, design)
    scores = AuditScores.of(in_scores, out_scores)
    significance = check_significance(significance)
    delta = check_positive_delta(delta, name) if chosen.positive_delta else check_delta(delta)
    two_sided = route_options.two_sided
    if two_sided and not chosen.two_sided:
        raise InvalidParameterError(f"{name} is one-sided: it guesses 'in' for high scores; negate the scores instead")
    strategy = chosen.default_strategy if route_options.strategy is None else route_options.strategy
    run_bound = chosen.bound_for(mechanism)
    curves = mechanism if chosen.curve_bound is not None else None

    def bound(candidate: AuditScores, picked: Strategy = strategy) -> float:
        return run_bound(candidate, significance, delta, picked, two_sided)[0]

    epsilon, details = run_bound(scores, significance, delta, strategy, two_sided)
    details = dict(details, reference=chosen.reference)
    power, no_power = None, None
    if claim.claimed_epsilon is not None:
        request = claim.request(delta)
        no_power = power_unavailable(family, chosen, strategy, delta, claim.factor)
        if no_power is None:
            power = declared(canonical_power(
                bound, request, sizes=(scores.n_in, scores.n_out), design=provenance,
                key=(name, strategy, two_sided, significance), method_suffix=f"; route {name}",
                label=f"power of an optimal attack at {claim.factor:g}× the claim · {name}",
            ), claim.attack_optimal)
    return LowerBound(
        estimator=name,
        epsilon_lb=epsilon,
        significance=significance,
        delta=delta,
        strategy=strategy,
        ceiling=_cached_ceiling(name, scores.n_in, scores.n_out, strategy, significance, delta, two_sided, curves),
        power=power,
        n_in=scores.n_in,
        n_out=scores.n_out,
        details=details,
        mechanism=family.value,
        design=provenance.value,
        attack_optimal=bool(claim.attack_optimal),
        no_power_reason=no_power,
    )


@dataclass(frozen=True)
class RouteOutcome:
    """One route of :func:`audit_scores`: its bound, or the reason it was not run."""

    route: str
    bound: LowerBound | None
    reason: str | None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"route": self.route, "run": self.bound is not None,
                               "epsilon_lb": None if self.bound is None else float(self.bound.epsilon_lb)}
        if self.bound is not None:
            out["result"] = self.bound.to_dict()
        else:
            out["reason"] = self.reason
        return out


def audit_scores(
    in_scores: object,
    out_scores: object,
    *,
    mechanism: object = MechanismFamily.ANY,
    design: object = "fixed",
    significance: float = 0.05,
    delta: float = 1e-5,
    claim: ClaimPower = NO_CLAIM,
) -> list[RouteOutcome]:
    """Every route on the same scores: the applicable ones at α/(number applicable) each, the others with a reason.

    Splitting α over the routes that run keeps the family-wise confidence 1 − α for "the largest bound holds".
    """
    reasons = applicable_routes(mechanism, design)
    scores = AuditScores.of(in_scores, out_scores)
    significance = check_significance(significance)
    delta = check_delta(delta)
    for name, reason in list(reasons.items()):
        if reason is None and ROUTES[name].positive_delta and delta == 0:
            reasons[name] = f"{name} needs δ > 0 (its curve has no pure-DP member)"
    runnable = [name for name, reason in reasons.items() if reason is None]
    if not runnable:
        raise InvalidParameterError(f"no route is valid for mechanism {mechanism!s} under design {design!s}")
    share = significance / len(runnable)
    outcomes = []
    for name, reason in reasons.items():
        if reason is not None:
            outcomes.append(RouteOutcome(name, None, reason))
            continue
        bound = estimate(name, scores.in_scores, scores.out_scores, mechanism=mechanism, design=design,
                         significance=share, delta=delta, claim=claim)
        outcomes.append(RouteOutcome(name, bound, None))
    return outcomes


def _estimator(name: str, doc: str) -> Callable[..., LowerBound]:
    def run(in_scores: object, out_scores: object, **options: Any) -> LowerBound:
        return estimate(name, in_scores, out_scores, **options)

    run.__name__ = "epsilon_" + name.replace("-", "_")
    run.__doc__ = doc
    return run


epsilon_cp = _estimator("cp", "(ε, δ) lower bound by δ-aware Clopper–Pearson (Jagielski et al. 2020); any mechanism, independent trials.")
epsilon_gdp = _estimator("gdp", "ε lower bound through a μ-GDP lower bound (Nasr et al. 2023); Gaussian-shaped mechanisms, δ > 0.")
epsilon_one_run = _estimator("one-run", "(ε, δ) lower bound from one training run (Steinke, Nasr & Jagielski 2023); fair-coin canaries.")
epsilon_one_run_fdp = _estimator(
    "one-run-fdp", "ε lower bound from one run against the Gaussian f-DP curve (Mahloujifar et al. 2024); Gaussian-shaped mechanisms.")
epsilon_one_run_fdp_box = _estimator(
    "one-run-fdp-box", "ε lower bound from one run against the (ε, δ)-DP curve (Mahloujifar et al. 2024); any mechanism.")
epsilon_one_run_fdp_ledger = _estimator(
    "one-run-fdp-ledger", "ε lower bound from one run against the run's own trade-off curve (Mahloujifar et al. 2024); "
    "mechanism = LedgerFamily(...).")
epsilon_one_run_paired = _estimator(
    "one-run-paired", "ε lower bound from random in/out pairs (Steinke et al. 2023 on pairs); any mechanism, fixed counts.")

#: name → estimator function (all return :class:`LowerBound`).
ESTIMATORS: Mapping[str, Callable[..., LowerBound]] = MappingProxyType({
    "cp": epsilon_cp,
    "gdp": epsilon_gdp,
    "one-run": epsilon_one_run,
    "one-run-fdp": epsilon_one_run_fdp,
    "one-run-fdp-box": epsilon_one_run_fdp_box,
    "one-run-paired": epsilon_one_run_paired,
    "one-run-fdp-ledger": epsilon_one_run_fdp_ledger,
})


def describe_estimators() -> dict[str, str]:
    """name → one-line description, for ``--help`` texts and reports."""
    return {name: (fn.__doc__ or "").strip().splitlines()[0] for name, fn in ESTIMATORS.items()}
