"""What the auditor returns: frozen values with ``to_dict()`` for the JSON/Markdown report.

``to_dict()`` output is JSON-able except that infinite floats stay ``float('inf')`` (the report writer
decides how to print them). NumPy scalars and arrays are converted to Python numbers and lists.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from privaudit.stats.strategies import Strategy, strategy_to_dict


def jsonable(value: Any) -> Any:
    """Recursively convert NumPy values, tuples and result objects to plain JSON-able Python."""
    if hasattr(value, "to_dict") and callable(value.to_dict):
        return value.to_dict()
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, np.ndarray):
        return [jsonable(v) for v in value.tolist()]
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if isinstance(value, np.bool_ | bool):
        return bool(value)
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return float(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    return value


@dataclass(frozen=True)
class PowerEstimate:
    """How likely this audit is to refute the claim if the mechanism were ``factor``× less private.

    Calibrated to the claim (:mod:`privaudit.stats.power`): the alternative is an optimal attack on a Gaussian
    mechanism at ε = ``alternative_epsilon`` = factor × claimed ε (μ = ``alternative_mu``; ``rounds`` equal rounds
    for composed white-box audits), audited with the same route, strategy, sample sizes, design, α and δ; "refute"
    means ε_lb > claimed ε. It is *the power of an optimal attack* at these sample sizes, never of the attack that
    ran: it says whether the audit's sizes could catch such a violation at all. It supports "consistent" only when
    ``attack_optimal`` (the auditor declares the attack optimal for the declared Gaussian mechanism — an assumption
    the scores cannot check) and ``lower`` ≥ ``min_power``.

    ``probability`` is the Monte-Carlo estimate over ``trials`` simulations (at most ``max_trials``: the simulation
    stops early once the answer is clear); ``interval`` holds one-sided 95 % Clopper–Pearson limits valid under
    that stopping rule, and ``lower`` is its lower end.
    """

    probability: float
    lower: float
    claimed_epsilon: float
    delta: float
    factor: float
    alternative_epsilon: float
    alternative_mu: float
    trials: int
    max_trials: int
    seed: int
    min_power: float
    interval: tuple[float, float]
    rounds: int = 1
    attack_optimal: bool = False
    method: str = "an optimal attack on a Gaussian mechanism at factor × the claim"

    def to_dict(self) -> dict[str, Any]:
        return jsonable(dataclasses.asdict(self))


@dataclass(frozen=True)
class LowerBound:
    """An ε lower bound: with probability ≥ 1 − ``significance`` the true ε at ``delta`` is at least ``epsilon_lb``,
    provided the mechanism belongs to ``mechanism``'s family and the scores came about as ``design`` says (the
    route refuses to run otherwise: :mod:`privaudit.stats.routes`).

    ``ceiling`` is what a perfect attack (no errors) could certify with the same sample sizes,
    significance, δ and strategy — a bound far below the claim means little when the ceiling is low too.
    ``power`` is filled when a claim was given and the declared family has an attack-based power (see
    :class:`PowerEstimate`); otherwise ``no_power_reason`` says why it is None. ``mechanism`` and ``design`` are the
    assumptions the bound is valid under (:mod:`privaudit.stats.assumptions`): the audited mechanism's family and
    the scores' provenance. ``attack_optimal`` records the auditor's declaration that the attack is optimal for the
    declared mechanism (its score a strictly increasing function of the privacy loss of a worst-case pair of
    neighbours), which only "consistent" relies on.
    """

    estimator: str
    epsilon_lb: float
    significance: float
    delta: float
    strategy: Strategy
    ceiling: float
    power: PowerEstimate | None
    n_in: int
    n_out: int
    details: Mapping[str, Any] = field(default_factory=dict)
    mechanism: str = "any"
    design: str = "trials"
    attack_optimal: bool = False
    no_power_reason: str | None = None

    @property
    def confidence(self) -> float:
        return 1.0 - self.significance

    def to_dict(self) -> dict[str, Any]:
        return {
            "estimator": self.estimator,
            "epsilon_lb": float(self.epsilon_lb),
            "significance": float(self.significance),
            "confidence": float(self.confidence),
            "delta": float(self.delta),
            "strategy": strategy_to_dict(self.strategy),
            "ceiling": float(self.ceiling),
            "power": None if self.power is None else self.power.to_dict(),
            "n_in": int(self.n_in),
            "n_out": int(self.n_out),
            "mechanism": self.mechanism,
            "design": self.design,
            "attack_optimal": bool(self.attack_optimal),
            "no_power_reason": self.no_power_reason,
            "details": jsonable(dict(self.details)),
        }


@dataclass(frozen=True)
class IntervalEstimate:
    """A point estimate with a seeded bootstrap confidence interval."""

    statistic: str
    estimate: float
    low: float
    high: float
    confidence: float
    method: str
    n_resamples: int
    seed: int

    def to_dict(self) -> dict[str, Any]:
        return jsonable(dataclasses.asdict(self))
