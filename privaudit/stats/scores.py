"""The auditor's input boundary: two arrays of attack scores, a significance level and a δ.

Scores follow one convention everywhere in :mod:`privaudit.audit`: **larger means "member"**. The
*in* scores belong to canaries (examples, clients, gradients) that were part of the training run(s);
the *out* scores to canaries that were not. An attack whose scores run the other way is negated by
the caller, or audited with ``two_sided=True`` declared in advance.

Everything is validated here, once, and raised as :class:`~privaudit.errors.InvalidParameterError`
with one sentence; inner code trusts the values it receives. :func:`score_array` is the one validation of a score
array in the package: the attacks' scores (:class:`attacks.membership.scores.MembershipScores`, an
:class:`AuditScores` that carries how the scores were made) and the ROC of :mod:`attacks.metrics` use it too.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from privaudit.checks import probability_open
from privaudit.errors import InvalidParameterError


def score_array(name: str, values: object, *, allow_empty: bool = False) -> np.ndarray:
    """``values`` as a read-only float64 vector of finite scores (a column or row of a matrix is flattened), non-empty
    unless ``allow_empty`` (a round in which no canary was inserted)."""
    try:
        array = np.array(values, dtype=np.float64)
    except (TypeError, ValueError):
        raise InvalidParameterError(f"{name} must be a sequence of numbers") from None
    if array.ndim == 0:
        raise InvalidParameterError(f"{name} must be a one-dimensional array of scores, got a scalar")
    if array.ndim > 1:
        if sum(dim > 1 for dim in array.shape) > 1:
            raise InvalidParameterError(f"{name} must be one-dimensional, got shape {array.shape}")
        array = array.ravel()
    if array.size == 0 and not allow_empty:
        raise InvalidParameterError(f"{name} is empty; the auditor needs at least one score on each side")
    if not np.all(np.isfinite(array)):
        bad = int(np.sum(~np.isfinite(array)))
        raise InvalidParameterError(f"{name} contains {bad} non-finite value(s) (NaN or ±inf); drop or clip them first")
    array.setflags(write=False)
    return array


@dataclass(frozen=True, eq=False)
class AuditScores:
    """Validated, read-only in/out score arrays (float64, one-dimensional, finite, non-empty)."""

    in_scores: np.ndarray
    out_scores: np.ndarray

    @classmethod
    def of(cls, in_scores: object, out_scores: object) -> AuditScores:
        """Validate raw inputs (any array-like) and wrap them."""
        return cls(score_array("in_scores", in_scores), score_array("out_scores", out_scores))

    @classmethod
    def trusted(cls, in_scores: np.ndarray, out_scores: np.ndarray) -> AuditScores:
        """Wrap arrays derived from already validated scores (subsets, negations) without re-checking them."""
        return cls(in_scores, out_scores)

    @property
    def n_in(self) -> int:
        return int(self.in_scores.size)

    @property
    def n_out(self) -> int:
        return int(self.out_scores.size)

    def negated(self) -> AuditScores:
        """The same canaries with the score convention reversed (used for the reverse direction)."""
        return AuditScores.trusted(-self.in_scores, -self.out_scores)


def check_significance(significance: float) -> float:
    """α, the allowed probability that the reported lower bound exceeds the true ε; must lie in (0, 1)."""
    return probability_open("significance", significance)


def check_delta(delta: float) -> float:
    """δ of the (ε, δ) statement being audited; must lie in [0, 1)."""
    try:
        value = float(delta)
    except (TypeError, ValueError):
        raise InvalidParameterError(f"delta must be a number in [0, 1), got {delta!r}") from None
    if math.isnan(value) or not 0.0 <= value < 1.0:
        raise InvalidParameterError(f"delta must lie in [0, 1), got {delta}")
    return value


def check_positive_delta(delta: float, route: str) -> float:
    """δ for routes that go through a Gaussian trade-off curve, where δ = 0 has no finite ε."""
    value = check_delta(delta)
    if value == 0.0:
        raise InvalidParameterError(
            f"the {route} route needs delta > 0: a Gaussian trade-off curve is never (ε, 0)-DP for finite ε"
        )
    return value
