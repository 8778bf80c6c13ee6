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
    """Probability that the audit refutes a claimed (ε, δ) when the mechanism is ``factor``× less private.

    Computed from the attack that ran (:mod:`privaudit.stats.power`): the alternative is ``compositions`` runs of
    the audited mechanism, attacked by summing the observed scores resampled with replacement. "Refute" means
    ε_lb > claimed ε. ``interval`` is a two-sided 95% Clopper–Pearson interval for the Monte-Carlo error.
    """

    probability: float
    claimed_epsilon: float
    delta: float
    factor: float
    compositions: int
    trials: int
    seed: int
    interval: tuple[float, float]
    method: str = "resampled from the observed scores"

    def to_dict(self) -> dict[str, Any]:
        return jsonable(dataclasses.asdict(self))


@dataclass(frozen=True)
class LowerBound:
    """An ε lower bound: with probability ≥ 1 − ``significance`` the true ε at ``delta`` is at least ``epsilon_lb``,
    provided the mechanism belongs to ``mechanism``'s family and the scores came about as ``design`` says (the
    route refuses to run otherwise: :mod:`privaudit.stats.routes`).

    ``ceiling`` is what a perfect attack (no errors) could certify with the same sample sizes,
    significance, δ and strategy — a bound far below the claim means little when the ceiling is low too.
    ``power`` is filled when a claim was given (see :class:`PowerEstimate`). ``mechanism`` and ``design`` are the
    assumptions the bound is valid under (:mod:`privaudit.stats.assumptions`): the audited mechanism's family and
    the scores' provenance.
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
