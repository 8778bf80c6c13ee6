"""What an ε lower bound assumes: the audited mechanism's family and the scores' provenance (the design).

Every route of :mod:`privaudit.stats.routes` is valid only under stated assumptions, and the caller says
which hold; a route whose assumptions are not declared is not run (:class:`~privaudit.errors.RouteNotApplicable`).

Mechanism families (what the audited claim is about):

``any``
    Any (ε, δ)-DP mechanism. Only routes that test the (ε, δ)-DP trade-off curve itself,
    f_{ε,δ}(x) = max(0, 1 − δ − e^ε·x, e^{−ε}(1 − δ − x)) (Kairouz, Oh & Viswanath 2015; Dong, Roth & Su 2022
    Prop. 2.5), are valid.
``gaussian``
    A mechanism whose trade-off curve is exactly Gaussian, G_μ (Dong, Roth & Su 2022 Def. 2.7): the Gaussian
    mechanism and compositions of Gaussian mechanisms, *without* subsampling. Routes that convert through G_μ
    (``gdp``, ``one-run-fdp``) are valid only here: fed a Laplace or randomized-response mechanism they certify ε
    above its true value.
``pure``
    A pure ε-DP mechanism (δ = 0: Laplace, randomized response, objective perturbation with exponential-family
    noise). Every route valid for ``any`` applies, at δ = 0 where the route allows it.
``ledger``
    Exactly the mechanism a run declares (its ledger's composition, e.g. T steps of a Poisson-subsampled Gaussian),
    up to its noise scale: declared by passing the family itself
    (a :class:`~privaudit.stats.curve_family.CurveFamily` such as :class:`~privaudit.stats.ledger_family.LedgerFamily`)
    as the mechanism. Route ``one-run-fdp-ledger`` tests its curves; as an (ε, δ)-DP mechanism it also takes every
    route valid for ``any``.

Designs (how the in/out scores came about):

``trials``
    Independent training runs: the in-scores are independent draws from runs with the canary, the out-scores
    from runs without it (Jagielski, Ullman & Oprea 2020). Counts per side may differ.
``bernoulli``
    One run: each of the m canaries was included independently with probability ½ (Steinke, Nasr & Jagielski
    2023, §3). The realised counts may differ; the coins must have been fair and independent.
``fixed``
    One run (or trials) with fixed counts: which canaries are "in" was chosen uniformly at random among all
    subsets of that size, and the scores are listed in an order that does not depend on their values. The
    weakest assumption: Bernoulli inclusion conditioned on its counts, and independent trials, both satisfy it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from enum import Enum

from privaudit.accounting.mechanisms import Gaussian, Laplace, PureDP, SubsampledGaussian
from privaudit.errors import InvalidParameterError
from privaudit.stats.curve_family import CurveFamily


class MechanismFamily(str, Enum):
    ANY = "any"
    GAUSSIAN = "gaussian"
    PURE = "pure"
    LEDGER = "ledger"


class Design(str, Enum):
    TRIALS = "trials"
    BERNOULLI = "bernoulli"
    FIXED = "fixed"


MECHANISM_TEXT = {
    MechanismFamily.ANY: "any (ε, δ)-DP mechanism",
    MechanismFamily.GAUSSIAN: "a Gaussian-shaped mechanism (Gaussian noise, composed, no subsampling)",
    MechanismFamily.PURE: "a pure ε-DP mechanism",
    MechanismFamily.LEDGER: "the run's own declared mechanism (its ledger's trade-off curve family)",
}

DESIGN_TEXT = {
    Design.TRIALS: "independent trials (in- and out-scores from separate runs)",
    Design.BERNOULLI: "one run, each canary included independently with probability ½",
    Design.FIXED: "fixed in/out counts, the 'in' canaries chosen uniformly at random",
}


def mechanism_family(value: object) -> MechanismFamily:
    """The family named by ``value`` (an enum member or its name; a curve family declares ``ledger``), or one error."""
    if isinstance(value, CurveFamily):
        return MechanismFamily.LEDGER
    try:
        return MechanismFamily(value.value if isinstance(value, MechanismFamily) else str(value).strip().lower())
    except ValueError:
        raise InvalidParameterError(
            f"unknown mechanism family {value!r}; choose one of {', '.join(m.value for m in MechanismFamily)}") from None


def design_of(value: object) -> Design:
    """The design named by ``value`` (an enum member or its name), or one clear error."""
    try:
        return Design(value.value if isinstance(value, Design) else str(value).strip().lower())
    except ValueError:
        raise InvalidParameterError(
            f"unknown design {value!r}; choose one of {', '.join(d.value for d in Design)}") from None


def family_of_mechanisms(mechanisms: Sequence[object]) -> tuple[MechanismFamily, str]:
    """The family of a run whose releases are ``mechanisms`` (ledger events' mechanisms), with the reason.

    Gaussian releases without subsampling (a :class:`~privaudit.accounting.mechanisms.Gaussian`, or a subsampled one
    at rate 1) compose to a Gaussian trade-off curve (Dong, Roth & Su 2022 Cor. 3.3): ``gaussian``. Finite pure-DP
    releases (Laplace, closed-form ε-DP): ``pure``. Anything else — subsampling (a Gaussian mixture, not G_μ),
    Skellam, releases without a guarantee, a mix of kinds, or nothing recorded — is ``any``.
    """
    if not mechanisms:
        return MechanismFamily.ANY, "the run records no privacy mechanism"
    if all(isinstance(m, Gaussian) or (isinstance(m, SubsampledGaussian) and m.sample_rate >= 1.0) for m in mechanisms):
        return MechanismFamily.GAUSSIAN, "every release is a Gaussian mechanism without subsampling"
    if all(isinstance(m, Laplace) or (isinstance(m, PureDP) and math.isfinite(m.epsilon)) for m in mechanisms):
        return MechanismFamily.PURE, "every release is pure ε-DP (Laplace or a closed-form ε-DP release)"
    kinds = sorted({type(m).__name__ for m in mechanisms})
    return MechanismFamily.ANY, (f"the releases ({', '.join(kinds)}) are not all un-subsampled Gaussian or pure DP, so only "
                                 "routes valid for every mechanism apply")
