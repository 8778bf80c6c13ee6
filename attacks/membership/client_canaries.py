"""Scoring canary clients (Andrew et al. 2024, "One-shot empirical privacy estimation for FL", §3).

Canary j is a fixed unit direction c_j; inserted canaries took part in training as clients whose update was
c_j scaled to the clip norm (:mod:`privaudit.fl.canaries.clients`), unseen canaries never did. Scores:

* ``final-model``: g_j = cos(θ_T − θ_0, c_j) — only the final model is released;
* ``all-iterates``: g_j = max_t cos(θ_t − θ_{t−1}, c_j) over every iteration's released aggregate.

In-scores are the inserted canaries', out-scores the unseen ones'. For the final-model threat model the
out-scores follow the analytic null of :mod:`attacks.membership.cosine_null` exactly (density ∝
(1 − t²)^{(d−3)/2}, ≈ N(0, 1/d)); for all-iterates the max over correlated rounds has no closed form and the
unseen canaries are the null.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from privaudit.errors import InvalidParameterError
from privaudit.fl.canaries.clients import CanaryClients
from privaudit.fl.engine.params import flatten

from .releases import releases_of
from .scores import MembershipScores

THREAT_MODELS = ("final-model", "all-iterates")


def _vector(state) -> np.ndarray:
    return flatten(state).double().numpy()


def _cosines(directions: np.ndarray, delta: np.ndarray) -> np.ndarray:
    norm = float(np.linalg.norm(delta))
    if norm == 0:
        raise InvalidParameterError("the model did not move, so its delta has no direction to compare with")
    return directions @ delta / norm


def canary_client_cosines(source: Any, canaries: CanaryClients, *, threat_model: str = "final-model") -> np.ndarray:
    """g_j for every canary (inserted and unseen), in canary order."""
    if threat_model not in THREAT_MODELS:
        raise InvalidParameterError(f"unknown threat model {threat_model!r}; use final-model or all-iterates")
    releases = releases_of(source)
    first = _vector(releases.global_state(0))
    if first.size != canaries.dimension:
        raise InvalidParameterError(f"the canaries have dimension {canaries.dimension}, the model state {first.size}")
    if threat_model == "final-model":
        return _cosines(canaries.directions, _vector(releases.global_state(releases.rounds)) - first)
    best = np.full(canaries.count, -np.inf)
    previous = first
    for r in range(1, releases.rounds + 1):
        current = _vector(releases.global_state(r))
        delta = current - previous
        if np.linalg.norm(delta) > 0:
            best = np.maximum(best, _cosines(canaries.directions, delta))
        previous = current
    if not np.all(np.isfinite(best)):
        raise InvalidParameterError("the model never moved, so no round has a direction to compare with")
    return best


def canary_client_scores(source: Any, canaries: CanaryClients, *, threat_model: str = "final-model") -> MembershipScores:
    """Cosines of the inserted (in) and unseen (out) canaries; larger = member."""
    cosines = canary_client_cosines(source, canaries, threat_model=threat_model)
    meta = {"attack": "canary-clients", "threat_model": threat_model, "dimension": canaries.dimension,
            "canaries": canaries.count, "inserted": int(canaries.inserted.sum()),
            "analytic_null": "(t+1)/2 ~ Beta((d−1)/2, (d−1)/2), variance 1/d" if threat_model == "final-model" else None}
    return MembershipScores.from_labels(cosines, canaries.inserted, meta)
