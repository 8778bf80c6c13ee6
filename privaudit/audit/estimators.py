"""The estimators by name: each turns in/out scores into a :class:`LowerBound` with its ceiling and power.

==============  ===================================================  ======================================
name            what it bounds                                       default strategy
==============  ===================================================  ======================================
``cp``          (ε, δ) box, δ-aware Clopper–Pearson (§2.2)           Bonferroni over all order statistics
``gdp``         μ-GDP, converted to (ε, δ) (§2.4)                    Bonferroni over :data:`DEFAULT_GDP_FAMILY`
``one-run``     (ε, δ) from one training run (§2.5)                  Bonferroni over :data:`DEFAULT_GUESS_GRID`
``one-run-fdp`` Gaussian f-DP curve through (ε, δ), one run (§2.6)   Bonferroni over :data:`DEFAULT_GUESS_GRID`
==============  ===================================================  ======================================

(§ = spec ``auditing.md``.) Every estimator validates its inputs here, once; computes the bound; computes
the ceiling (:mod:`privaudit.audit.ceiling`); and, when a claimed ε is given, the power to refute it if
the mechanism were ``power_factor``× less private (:mod:`privaudit.audit.power`, by simulation).
:data:`ESTIMATORS` maps the names to the functions so the CLI and the report can list them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from privaudit.audit.ceiling import ceiling
from privaudit.audit.clopper_pearson import cp_bound
from privaudit.audit.gdp import gdp_bound
from privaudit.audit.one_run import one_run_bound
from privaudit.audit.one_run_fdp import one_run_fdp_bound
from privaudit.audit.power import simulated_power
from privaudit.audit.results import LowerBound
from privaudit.audit.scores import AuditScores, check_delta, check_positive_delta, check_significance
from privaudit.audit.strategies import (
    DEFAULT_GDP_FAMILY,
    DEFAULT_GUESS_GRID,
    Bonferroni,
    MultiSplit,
    OrderStatistics,
    Split,
    Strategy,
)
from privaudit.errors import InvalidParameterError

Bound = Callable[[AuditScores, float, float, Any, bool], tuple[float, dict[str, Any]]]


@dataclass(frozen=True)
class _Route:
    name: str
    bound: Bound
    default_strategy: Strategy
    two_sided: bool  # threshold estimators (cp, gdp); they also split each side separately
    positive_delta: bool
    reference: str


def _one_sided(bound: Callable[[AuditScores, float, float, Any], tuple[float, dict[str, Any]]]) -> Bound:
    def wrapped(scores: AuditScores, significance: float, delta: float, strategy: Any, two_sided: bool):
        return bound(scores, significance, delta, strategy)

    return wrapped


_ROUTES = {
    "cp": _Route(
        "cp", cp_bound, Bonferroni(OrderStatistics()), True, False,
        "Jagielski, Ullman & Oprea 2020; Nasr et al. 2021; Kairouz, Oh & Viswanath 2015 Thm 2.1",
    ),
    "gdp": _Route(
        "gdp", gdp_bound, Bonferroni(DEFAULT_GDP_FAMILY), True, True,
        "Nasr et al. 2023 (tight auditing, GDP estimate); Dong, Roth & Su 2022 Cor. 2.13",
    ),
    "one-run": _Route(
        "one-run", _one_sided(one_run_bound), Bonferroni(DEFAULT_GUESS_GRID), False, False,
        "Steinke, Nasr & Jagielski 2023 (one-run p-value with δ; spec §2.5)",
    ),
    "one-run-fdp": _Route(
        "one-run-fdp", _one_sided(one_run_fdp_bound), Bonferroni(DEFAULT_GUESS_GRID), False, True,
        "Mahloujifar, Melis & Chaudhuri 2024 (f-DP in one run), Gaussian curve",
    ),
}


def _ceiling(route: _Route, bound, scores: AuditScores, strategy: Strategy, significance: float, delta: float) -> float:
    """The perfect attack's bound (:mod:`privaudit.audit.ceiling`); for one-run splits, the best any outcome allows."""
    if route.name in ("one-run", "one-run-fdp") and isinstance(strategy, (Split, MultiSplit)):
        from privaudit.audit.guess_selection import split_ceiling
        from privaudit.audit.one_run import one_run_epsilon
        from privaudit.audit.one_run_fdp import one_run_fdp_epsilon

        epsilon_of = one_run_epsilon if route.name == "one-run" else one_run_fdp_epsilon

        def test(m: int, r: int, v: int, share: float, precise: bool) -> float:
            return epsilon_of(m, r, v, share, delta, precise=precise)

        return split_ceiling(scores.n_in + scores.n_out, strategy, significance, test)
    return ceiling(bound, scores.n_in, scores.n_out, strategy, stratified_splits=route.two_sided)


def default_strategy(name: str) -> Strategy:
    """The strategy an estimator uses when none is given."""
    return _route(name).default_strategy


def _route(name: str) -> _Route:
    try:
        return _ROUTES[name]
    except KeyError:
        raise InvalidParameterError(f"unknown estimator {name!r}; choose one of {', '.join(_ROUTES)}") from None


def estimate(
    name: str,
    in_scores: object,
    out_scores: object,
    *,
    significance: float = 0.05,
    delta: float = 1e-5,
    strategy: Strategy | None = None,
    two_sided: bool = False,
    claimed_epsilon: float | None = None,
    power_factor: float = 2.0,
    power_trials: int = 200,
    power_seed: int = 0,
) -> LowerBound:
    """Run estimator ``name`` (see the module table) and return its bound, ceiling and (optional) power."""
    route = _route(name)
    scores = AuditScores.of(in_scores, out_scores)
    significance = check_significance(significance)
    delta = check_positive_delta(delta, name) if route.positive_delta else check_delta(delta)
    if two_sided and not route.two_sided:
        raise InvalidParameterError(f"{name} is one-sided: it guesses 'in' for high scores; negate the scores instead")
    strategy = route.default_strategy if strategy is None else strategy

    def bound(candidate: AuditScores, chosen: Strategy = strategy) -> float:
        return route.bound(candidate, significance, delta, chosen, two_sided)[0]

    epsilon, details = route.bound(scores, significance, delta, strategy, two_sided)
    details = dict(details, reference=route.reference)
    power = None
    if claimed_epsilon is not None:
        power = simulated_power(
            bound,
            claimed_epsilon=claimed_epsilon,
            delta=delta,
            n_in=scores.n_in,
            n_out=scores.n_out,
            factor=power_factor,
            trials=power_trials,
            seed=power_seed,
        )
    return LowerBound(
        estimator=name,
        epsilon_lb=epsilon,
        significance=significance,
        delta=delta,
        strategy=strategy,
        ceiling=_ceiling(route, bound, scores, strategy, significance, delta),
        power=power,
        n_in=scores.n_in,
        n_out=scores.n_out,
        details=details,
    )


def epsilon_cp(
    in_scores: object,
    out_scores: object,
    *,
    significance: float = 0.05,
    delta: float = 1e-5,
    strategy: Strategy | None = None,
    two_sided: bool = False,
    claimed_epsilon: float | None = None,
    power_factor: float = 2.0,
    power_trials: int = 200,
    power_seed: int = 0,
) -> LowerBound:
    """(ε, δ) lower bound by δ-aware Clopper–Pearson (Jagielski et al. 2020; spec §2.2)."""
    return estimate(
        "cp", in_scores, out_scores, significance=significance, delta=delta, strategy=strategy,
        two_sided=two_sided, claimed_epsilon=claimed_epsilon, power_factor=power_factor,
        power_trials=power_trials, power_seed=power_seed,
    )


def epsilon_gdp(
    in_scores: object,
    out_scores: object,
    *,
    significance: float = 0.05,
    delta: float = 1e-5,
    strategy: Strategy | None = None,
    two_sided: bool = False,
    claimed_epsilon: float | None = None,
    power_factor: float = 2.0,
    power_trials: int = 200,
    power_seed: int = 0,
) -> LowerBound:
    """ε lower bound through a μ-GDP lower bound (Nasr et al. 2023; spec §2.4); needs δ > 0."""
    return estimate(
        "gdp", in_scores, out_scores, significance=significance, delta=delta, strategy=strategy,
        two_sided=two_sided, claimed_epsilon=claimed_epsilon, power_factor=power_factor,
        power_trials=power_trials, power_seed=power_seed,
    )


def epsilon_one_run(
    in_scores: object,
    out_scores: object,
    *,
    significance: float = 0.05,
    delta: float = 1e-5,
    strategy: Strategy | None = None,
    claimed_epsilon: float | None = None,
    power_factor: float = 2.0,
    power_trials: int = 200,
    power_seed: int = 0,
) -> LowerBound:
    """(ε, δ) lower bound from one training run (Steinke, Nasr & Jagielski 2023; spec §2.5)."""
    return estimate(
        "one-run", in_scores, out_scores, significance=significance, delta=delta, strategy=strategy,
        claimed_epsilon=claimed_epsilon, power_factor=power_factor, power_trials=power_trials,
        power_seed=power_seed,
    )


def epsilon_one_run_fdp(
    in_scores: object,
    out_scores: object,
    *,
    significance: float = 0.05,
    delta: float = 1e-5,
    strategy: Strategy | None = None,
    claimed_epsilon: float | None = None,
    power_factor: float = 2.0,
    power_trials: int = 200,
    power_seed: int = 0,
) -> LowerBound:
    """ε lower bound from one run against the Gaussian f-DP curve through (ε, δ) (Mahloujifar et al. 2024)."""
    return estimate(
        "one-run-fdp", in_scores, out_scores, significance=significance, delta=delta, strategy=strategy,
        claimed_epsilon=claimed_epsilon, power_factor=power_factor, power_trials=power_trials,
        power_seed=power_seed,
    )


#: name → estimator function (all return :class:`LowerBound`).
ESTIMATORS: Mapping[str, Callable[..., LowerBound]] = MappingProxyType(
    {
        "cp": epsilon_cp,
        "gdp": epsilon_gdp,
        "one-run": epsilon_one_run,
        "one-run-fdp": epsilon_one_run_fdp,
    }
)


def describe_estimators() -> dict[str, str]:
    """name → one-line description, for ``--help`` texts and reports."""
    return {name: (fn.__doc__ or "").strip().splitlines()[0] for name, fn in ESTIMATORS.items()}
