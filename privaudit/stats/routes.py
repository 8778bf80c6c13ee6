"""The ε lower-bound routes and what each assumes: the mechanism families and designs it is valid for.

======================  ===============================================  ===================  ========================
route                   what it tests                                    valid for mechanism  needs design
======================  ===============================================  ===================  ========================
``cp``                  (ε, δ)-DP curve at a threshold, Clopper–Pearson  any, gaussian, pure  trials
``gdp``                 μ-GDP, converted to (ε, δ) through G_μ           gaussian             trials
``one-run``             (ε, δ) box, Steinke et al. p-value               any, gaussian, pure  bernoulli
``one-run-fdp``         Gaussian curve through (ε, δ), one run           gaussian             bernoulli
``one-run-fdp-box``     (ε, δ)-DP curve (δ = 0: randomized response)     any, gaussian, pure  bernoulli
``one-run-paired``      Steinke et al. on random in/out pairs, (2ε, ·δ)  any, gaussian, pure  trials, bernoulli, fixed
``one-run-fdp-ledger``  the run's own curve (its ledger, noise scaled)   ledger               bernoulli
======================  ===============================================  ===================  ========================

(:mod:`privaudit.stats.assumptions` defines the families and designs.) Why the restrictions:

* ``gdp`` and ``one-run-fdp`` refute "M's trade-off curve is at least G_μ"; that refutes an (ε, δ) claim only when
  the mechanism's curve is G_μ (Nasr et al. 2023 §4; Dong, Roth & Su 2022). On Laplace or randomized-response
  scores they certify ε several times above the truth.
* ``cp`` is the non-parametric trade-off route for independent trials: it tests the (ε, δ)-DP curve itself
  (Kairouz, Oh & Viswanath 2015 Thm 2.1), so it holds for every mechanism, pure claims (δ = 0) included; its
  Clopper–Pearson rates need independent trials (Jagielski, Ullman & Oprea 2020).
* ``one-run``, ``one-run-fdp`` and ``one-run-fdp-box`` need each canary included by an independent fair coin
  (Steinke, Nasr & Jagielski 2023 Thm 3.1; Mahloujifar, Melis & Chaudhuri 2024 Thm 9): with fixed, unequal
  counts guessing the majority side is right more often than ½ with no signal at all.
* ``one-run-fdp-ledger`` tests the declared mechanism's own trade-off curve (its ledger's composition with the
  noise scaled, :mod:`privaudit.stats.one_run_fdp_ledger`): valid for the mechanism as declared, subsampled or not,
  and for nothing else; the caller passes the curve family itself as the mechanism (family ``ledger``), which every
  route valid for ``any`` also takes.
* ``one-run-paired`` pairs the canaries at random and needs only that the "in" set was a uniformly random subset
  of its size (:mod:`privaudit.stats.one_run_paired`), so it is valid for every design, at the price of a factor 2
  in ε per pair.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from privaudit.errors import InvalidParameterError, RouteNotApplicable
from privaudit.stats.assumptions import (
    DESIGN_TEXT,
    MECHANISM_TEXT,
    Design,
    MechanismFamily,
    design_of,
    mechanism_family,
)
from privaudit.stats.clopper_pearson import cp_bound
from privaudit.stats.curve_family import CurveFamily
from privaudit.stats.gdp import gdp_bound
from privaudit.stats.one_run import one_run_bound
from privaudit.stats.one_run_fdp import one_run_fdp_bound
from privaudit.stats.one_run_fdp_ledger import one_run_fdp_ledger_bound
from privaudit.stats.one_run_paired import one_run_paired_bound
from privaudit.stats.scores import AuditScores
from privaudit.stats.strategies import (
    DEFAULT_GDP_FAMILY,
    DEFAULT_GUESS_GRID,
    Bonferroni,
    OrderStatistics,
    Strategy,
)

Bound = Callable[[AuditScores, float, float, Any, bool], tuple[float, dict[str, Any]]]

_ALL = (MechanismFamily.ANY, MechanismFamily.GAUSSIAN, MechanismFamily.PURE)


@dataclass(frozen=True)
class Route:
    """One estimator: its bound, default strategy, and the assumptions under which the bound is valid."""

    name: str
    bound: Bound
    default_strategy: Strategy
    two_sided: bool  # threshold estimators (cp, gdp); they also split each side separately
    positive_delta: bool
    families: tuple[MechanismFamily, ...]
    designs: tuple[Design, ...]
    reference: str
    summary: str
    one_run: bool = False
    #: the bound reads the scores only through their order (False: it also reads score differences), so its power
    #: against an optimal attack is the same for every strictly increasing transform (:mod:`privaudit.stats.power`)
    order_only: bool = True
    #: routes that test a declared curve family (``ledger``): family -> the bound against its curves
    curve_bound: Callable[[CurveFamily], Bound] | None = None

    def bound_for(self, mechanism: object) -> Bound:
        """The bound to run for the declared ``mechanism``: the route's own, or the one of the family's curves."""
        if self.curve_bound is None:
            return self.bound
        if not isinstance(mechanism, CurveFamily):
            raise RouteNotApplicable(f"{self.name} tests the run's own trade-off curves: pass the curve family itself "
                                     "as the mechanism (e.g. LedgerFamily.subsampled_gaussian(T, q, sigma))")
        return self.curve_bound(mechanism)

    def not_applicable(self, mechanism: MechanismFamily, design: Design) -> str | None:
        """Why the route's bound would not be valid for ``mechanism`` under ``design`` (None when it is)."""
        if mechanism is MechanismFamily.LEDGER and MechanismFamily.ANY in self.families:
            mechanism = MechanismFamily.ANY  # a declared mechanism is one (ε, δ)-DP mechanism among all
        if mechanism not in self.families:
            return (f"{self.name} is valid only for {' or '.join(MECHANISM_TEXT[f] for f in self.families)}; "
                    f"the audited mechanism is declared as {MECHANISM_TEXT[mechanism]} ({mechanism.value})")
        if design not in self.designs:
            return (f"{self.name} needs {' or '.join(DESIGN_TEXT[d] for d in self.designs)}; the scores are declared "
                    f"as {DESIGN_TEXT[design]} ({design.value})")
        return None

    def to_dict(self) -> dict[str, Any]:
        return {"route": self.name, "summary": self.summary, "families": [f.value for f in self.families],
                "designs": [d.value for d in self.designs], "reference": self.reference}


def _needs_family(scores: AuditScores, significance: float, delta: float, strategy: Any, two_sided: bool):
    raise RouteNotApplicable("one-run-fdp-ledger needs the run's curve family as its mechanism (Route.bound_for)")


def _ledger_bound(family: CurveFamily) -> Bound:
    def wrapped(scores: AuditScores, significance: float, delta: float, strategy: Any, two_sided: bool):
        return one_run_fdp_ledger_bound(scores, significance, delta, strategy, family)

    return wrapped


def _one_sided(bound: Callable[..., tuple[float, dict[str, Any]]], **keywords: Any) -> Bound:
    def wrapped(scores: AuditScores, significance: float, delta: float, strategy: Any, two_sided: bool):
        return bound(scores, significance, delta, strategy, **keywords)

    return wrapped


ROUTES: Mapping[str, Route] = MappingProxyType({
    "cp": Route(
        "cp", cp_bound, Bonferroni(OrderStatistics()), True, False, _ALL, (Design.TRIALS,),
        "Jagielski, Ullman & Oprea 2020; Nasr et al. 2021; Kairouz, Oh & Viswanath 2015 Thm 2.1",
        "(ε, δ) lower bound by δ-aware Clopper–Pearson rates at a threshold",
    ),
    "gdp": Route(
        "gdp", gdp_bound, Bonferroni(DEFAULT_GDP_FAMILY), True, True, (MechanismFamily.GAUSSIAN,), (Design.TRIALS,),
        "Nasr et al. 2023 (tight auditing, GDP estimate); Dong, Roth & Su 2022 Cor. 2.13",
        "ε lower bound through a μ-GDP lower bound (Gaussian-shaped mechanisms only)",
    ),
    "one-run": Route(
        "one-run", _one_sided(one_run_bound), Bonferroni(DEFAULT_GUESS_GRID), False, False, _ALL, (Design.BERNOULLI,),
        "Steinke, Nasr & Jagielski 2023 (one-run p-value with δ, Thm 3.1)",
        "(ε, δ) lower bound from one training run, each canary in w.p. ½",
        one_run=True,
    ),
    "one-run-fdp": Route(
        "one-run-fdp", _one_sided(one_run_fdp_bound, curve="gaussian"), Bonferroni(DEFAULT_GUESS_GRID), False, True,
        (MechanismFamily.GAUSSIAN,), (Design.BERNOULLI,),
        "Mahloujifar, Melis & Chaudhuri 2024 (f-DP in one run), Gaussian curve",
        "ε lower bound from one run against the Gaussian curve through (ε, δ) (Gaussian-shaped mechanisms only)",
        one_run=True,
    ),
    "one-run-fdp-box": Route(
        "one-run-fdp-box", _one_sided(one_run_fdp_bound, curve="dp"), Bonferroni(DEFAULT_GUESS_GRID), False, False,
        _ALL, (Design.BERNOULLI,),
        "Mahloujifar, Melis & Chaudhuri 2024 (f-DP in one run) with the (ε, δ)-DP curve of Kairouz et al. 2015",
        "ε lower bound from one run against the (ε, δ)-DP trade-off curve (any mechanism; δ = 0: pure DP)",
        one_run=True,
    ),
    "one-run-paired": Route(
        "one-run-paired", _one_sided(one_run_paired_bound), Bonferroni(DEFAULT_GUESS_GRID), False, False, _ALL,
        (Design.TRIALS, Design.BERNOULLI, Design.FIXED),
        "Steinke, Nasr & Jagielski 2023 Thm 3.1 on random in/out pairs; group privacy (Dwork & Roth 2014 Thm 2.2)",
        "ε lower bound from random in/out pairs, valid for fixed in/out counts",
        one_run=True,
        order_only=False,  # pairs are ranked by |s_in − s_out|, a difference on the score's own scale
    ),
    "one-run-fdp-ledger": Route(
        "one-run-fdp-ledger", _needs_family, Bonferroni(DEFAULT_GUESS_GRID), False, True,
        (MechanismFamily.LEDGER,), (Design.BERNOULLI,),
        "Mahloujifar, Melis & Chaudhuri 2024 (f-DP in one run, Thm 9) with the run's own curve; Steinke, Nasr & "
        "Jagielski 2023 (one-run design)",
        "ε lower bound from one run against the declared mechanism's own trade-off curve (its ledger, noise scaled)",
        one_run=True,
        curve_bound=_ledger_bound,
    ),
})


def route(name: str) -> Route:
    """The route called ``name``, or one clear error listing the known ones."""
    try:
        return ROUTES[name]
    except KeyError:
        raise InvalidParameterError(f"unknown estimator {name!r}; choose one of {', '.join(ROUTES)}") from None


def resolve_assumptions(chosen: Route, mechanism: object, design: object | None) -> tuple[MechanismFamily, Design]:
    """The declared (family, design), ``design=None`` meaning the route's own; raises when the route does not apply."""
    family = mechanism_family(mechanism)
    provenance = chosen.designs[0] if design is None else design_of(design)
    reason = chosen.not_applicable(family, provenance)
    if reason is not None:
        raise RouteNotApplicable(reason)
    return family, provenance


def applicable_routes(mechanism: object, design: object) -> dict[str, str | None]:
    """name → None where the route applies to (mechanism, design), else the reason it does not."""
    family, provenance = mechanism_family(mechanism), design_of(design)
    reasons = {name: r.not_applicable(family, provenance) for name, r in ROUTES.items()}
    for name, r in ROUTES.items():
        if reasons[name] is None and r.curve_bound is not None and not isinstance(mechanism, CurveFamily):
            reasons[name] = f"{name} needs the run's curve family itself (e.g. LedgerFamily), not only its name"
    return reasons
