"""The validity suite: does every route keep P[ε_lb > ε_true] ≤ α? Coverage of one grid cell, and tightness.

A level-α lower bound is valid when P[ε_lb > ε_true] ≤ α. This module makes that checkable for every
estimator route, threshold or guess strategy, score shape and membership design, on the scenarios and
designs of :mod:`privaudit.stats.validity_scenarios` (re-exported here):

* :func:`evaluate_cell` runs one route × strategy × scenario × design R times with seeded draws (the same
  draws for every route and strategy of a scenario × design, so routes are compared on common random
  numbers) and returns a :class:`CoverageResult`: the over-claim rate, its Clopper–Pearson interval, a
  verdict, and the one-sided binomial p-value of "coverage ≤ α" that the test suite gates on. A route that
  refuses the scenario (its mechanism family or design is not one it is valid for:
  :class:`privaudit.errors.RouteNotApplicable`) is a result too, "not run" with the reason — never
  silently dropped. The mechanism claim passed is the most general true one the route accepts.
* :class:`~privaudit.stats.ledger_scenarios.LedgerMechanism` (re-exported) — T steps of a (subsampled) Gaussian with
  a declared ledger, the scenario of route ``one-run-fdp-ledger``.
* :func:`measure_tightness` — mean ε_lb/ε_true of a route on the Gaussian mechanism in its natural design.

The verdicts' own property — P[consistent | true ε ≥ factor × claimed ε] ≤ 1 − min_power, for optimal, weak,
saturating, discrete and zero-signal attacks (:class:`Attack`) — is checked by
:mod:`privaudit.audit.verdict_validity`, which sits above ``stats`` because it runs the verdict rules.

Route metadata (which mechanism families and designs each route accepts) is read from
:data:`privaudit.stats.routes.ROUTES`. The full grid is ``benchmarks/validity_grid.py`` (``make validity``). numpy
and scipy only.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

import numpy as np
from scipy import stats

from privaudit.errors import InvalidParameterError, RouteNotApplicable
from privaudit.stats.estimators import RouteOptions, default_strategy, estimate
from privaudit.stats.ledger_scenarios import LedgerMechanism
from privaudit.stats.power import monte_carlo_interval
from privaudit.stats.routes import ROUTES
from privaudit.stats.strategies import (
    DEFAULT_GDP_FAMILY,
    Bonferroni,
    Explicit,
    Guesses,
    GuessGrid,
    MultiSplit,
    OrderStatistics,
    Split,
    Strategy,
)
from privaudit.stats.validity_scenarios import (
    ATTACK_KINDS,
    CLAIM_ANY,
    CLAIM_GAUSSIAN,
    CLAIM_PURE,
    NULL_SHAPES,
    Attack,
    Bernoulli,
    Design,
    Fixed,
    GaussianMechanism,
    LaplaceMechanism,
    NullScores,
    RandomizedResponse,
    Scenario,
    SubsampledGaussian,
    Trials,
    draw_attacked_scores,
    draw_scores,
    draw_seed,
    laplace_delta,
    laplace_epsilon,
    randomized_response_delta,
    randomized_response_epsilon,
    subsampled_gaussian_delta,
    subsampled_gaussian_epsilon,
)

__all__ = [
    "ATTACK_KINDS", "CLAIM_ANY", "CLAIM_GAUSSIAN", "CLAIM_PURE", "NULL_SHAPES", "TEST_LEVEL", "Attack", "Bernoulli",
    "Cell", "CellBounds", "CoverageResult", "Design", "Fixed", "GaussianMechanism", "LaplaceMechanism", "LedgerMechanism",
    "NullScores",
    "RandomizedResponse", "RouteInfo", "Scenario", "SubsampledGaussian", "Tightness", "Trials", "available_routes",
    "build_strategy", "call_route", "cell_bounds", "coverage_verdict", "design_of_size", "draw_attacked_scores",
    "draw_scores", "draw_seed", "evaluate_cell", "laplace_delta", "laplace_epsilon", "measure_tightness",
    "natural_design", "over_claim_p_value", "randomized_response_delta", "randomized_response_epsilon",
    "strategy_names", "subsampled_gaussian_delta", "subsampled_gaussian_epsilon",
]

#: A valid route fails the suite's one-sided binomial test with at most this probability.
TEST_LEVEL = 1e-3


# --------------------------------------------------------------------------------------------------
# Routes: metadata from privaudit.stats.routes
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RouteInfo:
    """A route's name, the mechanism families and designs it declares (None: not declared), its strategy kind."""

    name: str
    families: tuple[str, ...] | None
    designs: tuple[str, ...] | None
    kind: str  # "threshold" (cp, gdp: Explicit / OrderStatistics / QuantileGrid …) or "guess" (one-run routes)


def _strategy_kind(name: str) -> str:
    strategy = default_strategy(name)
    if isinstance(strategy, Guesses) or (isinstance(strategy, Bonferroni) and isinstance(strategy.family, GuessGrid)):
        return "guess"
    return "threshold"


def available_routes() -> tuple[RouteInfo, ...]:
    """Every route the auditor offers, with its declared families and designs."""
    return tuple(RouteInfo(name, _names(route.families), _names(route.designs), _strategy_kind(name))
                 for name, route in ROUTES.items())


def _names(values: tuple[Enum, ...]) -> tuple[str, ...] | None:
    """Enum members as their string values (None when nothing is declared)."""
    return tuple(str(value.value) for value in values) or None


def natural_design(route: RouteInfo) -> str:
    """The design a route is built for: its first declared design, else trials (threshold) / bernoulli (guess)."""
    if route.designs:
        return route.designs[0]
    return "trials" if route.kind == "threshold" else "bernoulli"


# --------------------------------------------------------------------------------------------------
# Strategies by name (built per repetition: split seeds vary, guess counts follow m)
# --------------------------------------------------------------------------------------------------

THRESHOLD_STRATEGIES = (
    "default",
    "explicit",
    "order-statistics",
    "order-statistics two-sided",
    "quantile-grid",
    "split",
    "multi-split",
)
GUESS_STRATEGIES = ("default", "guesses balanced", "guesses in-only", "guesses out-only", "split", "multi-split")

#: The explicit threshold, fixed before any score is drawn (the midpoint of every mechanism's two means).
EXPLICIT_THRESHOLD = 0.5


def strategy_names(kind: str) -> tuple[str, ...]:
    return THRESHOLD_STRATEGIES if kind == "threshold" else GUESS_STRATEGIES


def build_strategy(name: str, rep: int, m: int) -> tuple[Strategy | None, bool]:
    """(strategy, two_sided) for strategy ``name`` at repetition ``rep`` with m scores in all; None = route default.

    Split seeds are the repetition index, so each repetition splits afresh; guess counts are fixed
    fractions of m (m/20 + m/20 balanced, m/10 one-sided), so they are fixed before the scores are seen.
    """
    k = max(1, m // 10)
    match name:
        case "default":
            return None, False
        case "explicit":
            return Explicit(EXPLICIT_THRESHOLD), False
        case "order-statistics":
            return Bonferroni(OrderStatistics()), False
        case "order-statistics two-sided":
            return Bonferroni(OrderStatistics()), True
        case "quantile-grid":
            return Bonferroni(DEFAULT_GDP_FAMILY), False
        case "split":
            return Split(0.5, seed=rep), False
        case "multi-split":
            return MultiSplit(5, seed=rep), False
        case "guesses balanced":
            return Guesses(max(1, m // 20), max(1, m // 20)), False
        case "guesses in-only":
            return Guesses(k, 0), False
        case "guesses out-only":
            return Guesses(0, k), False
    raise InvalidParameterError(f"unknown validity-suite strategy {name!r}")


# --------------------------------------------------------------------------------------------------
# One cell: a route × strategy × scenario × design, R repetitions
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Cell:
    """One point of the grid (all fields picklable, so cells can run in worker processes)."""

    route: str
    strategy: str
    scenario: Scenario
    design: Design
    delta: float = 1e-5
    significance: float = 0.05

    @property
    def key(self) -> str:
        return f"{self.route} | {self.strategy} | {self.scenario.name} | {self.design.label} | δ={self.delta:g}"


@dataclass(frozen=True)
class CoverageResult:
    """Over-claim rate of one cell: ``exceed`` of ``runs`` repetitions had ε_lb > ε_true.

    ``status`` is ``pass`` (point estimate ≤ α), ``flag`` (point estimate above α, but the 95%
    Clopper–Pearson interval reaches α), ``fail`` (the interval lies above α: significantly invalid) or
    ``not run`` (``reason`` says why; ``refusals`` lists each mechanism claim the route refused, with its
    reason). ``claim`` is the mechanism claim the route ran under (None: the auditor takes no claim).
    """

    cell: Cell
    status: str
    runs: int = 0
    exceed: int = 0
    true_epsilon: float = 0.0
    claim: str | None = None
    interval: tuple[float, float] = (0.0, 1.0)
    mean_lb: float = 0.0
    max_lb: float = 0.0
    p_value: float = 1.0
    seconds: float = 0.0
    reason: str = ""
    refusals: tuple[tuple[str, str], ...] = field(default_factory=tuple)

    @property
    def coverage(self) -> float:
        return self.exceed / self.runs if self.runs else 0.0


def coverage_verdict(exceed: int, runs: int, significance: float) -> tuple[str, tuple[float, float], float]:
    """(status, 95% Clopper–Pearson interval, one-sided p-value of "coverage ≤ α") for ``exceed`` of ``runs``."""
    interval = monte_carlo_interval(exceed, runs)
    p_value = over_claim_p_value(exceed, runs, significance)
    if interval[0] > significance:
        return "fail", interval, p_value
    if exceed / runs > significance:
        return "flag", interval, p_value
    return "pass", interval, p_value


def over_claim_p_value(exceed: int, runs: int, significance: float) -> float:
    """P[Bin(runs, α) ≥ exceed]: small when the over-claim rate is significantly above α."""
    return float(stats.binom.sf(exceed - 1, runs, significance)) if exceed > 0 else 1.0


def call_route(
    route: str,
    in_scores: np.ndarray,
    out_scores: np.ndarray,
    *,
    claim: str | None,
    design: str,
    significance: float,
    delta: float,
    strategy: Strategy | None,
    two_sided: bool,
) -> float:
    """ε_lb of ``route`` through the public :func:`~privaudit.audit.estimate` (with the claim and design when gated)."""
    options: dict[str, Any] = {"significance": significance, "delta": delta,
                               "route_options": RouteOptions(strategy, two_sided)}
    if claim is not None:
        options.update(mechanism=claim, design=design)
    return float(estimate(route, in_scores, out_scores, **options).epsilon_lb)


def _first_accepted_claim(
    cell: Cell, run: Callable[[str | None], float]
) -> tuple[str | None, float | None, list[tuple[str, str]], str]:
    """Try the scenario's true claims from the most general on; (claim, first ε_lb, refusals, reason)."""
    refusals: list[tuple[str, str]] = []
    for claim in cell.scenario.claims:
        try:
            return claim, run(claim), refusals, ""
        except RouteNotApplicable as error:  # the route's own "not valid here"
            refusals.append((claim, str(error)))
        except InvalidParameterError as error:  # e.g. a strategy or δ the route does not take
            return claim, None, refusals, str(error)
    reasons = list(dict.fromkeys(reason for _, reason in refusals))
    if len(reasons) == 1:
        return None, None, refusals, reasons[0]
    return None, None, refusals, "; ".join(f"mechanism={c!r}: {r}" for c, r in refusals)


@dataclass(frozen=True)
class CellBounds:
    """The raw outcome of a cell: its bounds (empty when not run), the claim used, the refusals, the reason."""

    values: np.ndarray
    claim: str | None
    refusals: tuple[tuple[str, str], ...]
    reason: str

    @property
    def ran(self) -> bool:
        return self.values.size > 0


def cell_bounds(cell: Cell, runs: int, base_seed: int = 0) -> CellBounds:
    """ε_lb of ``runs`` seeded repetitions of ``cell`` through the public estimator.

    Repetition r draws its scores from :func:`draw_seed` (base_seed, scenario, design, r), so every route
    and strategy of a scenario × design sees the same scores. The mechanism claim is settled on the first
    repetition (the most general true claim the route accepts) and kept. A draw that leaves one side
    empty (possible only for tiny Bernoulli designs) gives the auditor no bound and counts as ε_lb = 0.
    """
    if isinstance(runs, bool) or not isinstance(runs, int) or runs < 1:
        raise InvalidParameterError(f"runs must be a positive integer, got {runs!r}")
    values: list[float] = []
    claim: str | None = None
    settled = False
    for rep in range(runs):
        rng = np.random.default_rng(draw_seed(base_seed, cell.scenario, cell.design, rep))
        in_scores, out_scores = draw_scores(cell.scenario, cell.design, rng)
        if in_scores.size == 0 or out_scores.size == 0:
            values.append(0.0)
            continue
        strategy, two_sided = build_strategy(cell.strategy, rep, in_scores.size + out_scores.size)

        def run(chosen: str | None, a=in_scores, b=out_scores, s=strategy, t=two_sided) -> float:
            return call_route(cell.route, a, b, claim=chosen, design=cell.design.design,
                              significance=cell.significance, delta=cell.delta, strategy=s, two_sided=t)

        if settled:
            values.append(run(claim))
            continue
        claim, first, refusals, reason = _first_accepted_claim(cell, run)
        if first is None:
            return CellBounds(np.empty(0), None, tuple(refusals), reason)
        settled, kept_refusals = True, tuple(refusals)
        values.append(first)
    if not settled:  # every draw had an empty side
        return CellBounds(np.zeros(runs), None, (), "")
    return CellBounds(np.asarray(values), claim, kept_refusals, "")


def evaluate_cell(cell: Cell, runs: int, base_seed: int = 0) -> CoverageResult:
    """Run ``cell`` ``runs`` times (:func:`cell_bounds`) and return its coverage and verdict."""
    start = time.perf_counter()
    true_epsilon = cell.scenario.true_epsilon(cell.delta)
    outcome = cell_bounds(cell, runs, base_seed)
    seconds = time.perf_counter() - start
    if not outcome.ran:
        return CoverageResult(cell, "not run", true_epsilon=true_epsilon, reason=outcome.reason,
                              refusals=outcome.refusals, seconds=seconds)
    values = outcome.values
    exceed = int(np.sum(values > true_epsilon))
    status, interval, p_value = coverage_verdict(exceed, runs, cell.significance)
    return CoverageResult(
        cell, status, runs=runs, exceed=exceed, true_epsilon=true_epsilon, claim=outcome.claim, interval=interval,
        mean_lb=float(values.mean()), max_lb=float(values.max()), p_value=p_value, seconds=seconds,
        refusals=outcome.refusals,
    )


# --------------------------------------------------------------------------------------------------
# Tightness: how much of the true ε a valid route certifies on the Gaussian mechanism
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Tightness:
    """Mean and spread of ε_lb/ε_true over ``runs`` audits of the Gaussian mechanism (μ, δ) of size ``n``."""

    route: str
    strategy: str
    mu: float
    delta: float
    design: str
    n: int
    runs: int
    true_epsilon: float
    mean_fraction: float
    sd_fraction: float
    claim: str | None
    reason: str = ""


def design_of_size(design: str, n: int) -> Design:
    """The balanced design of size n: n scores per side for trials, m = n canaries for one-run designs."""
    match design:
        case "trials":
            return Trials(n, n)
        case "fixed":
            return Fixed(n // 2, n - n // 2)
        case "bernoulli":
            return Bernoulli(n)
    raise InvalidParameterError(f"unknown design {design!r}; choose trials, fixed or bernoulli")


def measure_tightness(
    route: RouteInfo, strategy: str, *, mu: float = 1.0, delta: float = 1e-5, n: int = 10_000, runs: int = 10,
    significance: float = 0.05, base_seed: int = 0,
) -> Tightness:
    """ε_lb/ε_true of ``route`` on the Gaussian mechanism N(μ, 1) vs N(0, 1) in the route's natural design."""
    design_name = natural_design(route)
    cell = Cell(route.name, strategy, GaussianMechanism(mu), design_of_size(design_name, n), delta, significance)
    true_epsilon = cell.scenario.true_epsilon(delta)
    outcome = cell_bounds(cell, runs, base_seed)
    if not outcome.ran:
        return Tightness(route.name, strategy, mu, delta, design_name, n, 0, true_epsilon, math.nan, math.nan, None,
                         outcome.reason)
    fractions = outcome.values / true_epsilon
    return Tightness(route.name, strategy, mu, delta, design_name, n, runs, true_epsilon, float(fractions.mean()),
                     float(fractions.std(ddof=1)) if runs > 1 else 0.0, outcome.claim)
