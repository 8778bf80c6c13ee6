"""Scoring canary clients (Andrew et al. 2024, "One-shot empirical privacy estimation for FL", §3).

Canary j is a fixed unit direction c_j; inserted canaries took part in training as clients whose update was
c_j scaled to the clip norm (:mod:`privaudit.fl.canaries.clients`), unseen canaries never did. Scores:

* ``final-model``: g_j = cos(θ_T − θ_0, c_j) — only the final model is released;
* ``all-iterates``: g_j = max_t cos(θ_t − θ_{t−1}, c_j) over every iteration's released aggregate;
* ``iterate-sums`` (:func:`canary_client_sums`): s_j = Σ_t ⟨θ_t − θ_{t−1}, c_j⟩ over every iteration's released
  aggregate — the white-box score of the all-iterates adversary. Under DP-FedAvg with every client in every round
  (θ_t = θ_{t−1} + (Σ_k clip_C(Δ_k) + N(0, σ²C²I))/n), an inserted canary adds C/n to each round's projection and
  the noise projects onto orthonormal c_j as independent N(0, σ²C²/n²), so s_j·n/C is N(T·b_j, Tσ²) plus the
  real clients' projections (the same law in and out): the likelihood-ratio statistic of T Gaussian shifts, μ = √T/σ
  (Dong, Roth & Su 2022, Cor. 3.3). For a plain server step the sum telescopes to ⟨θ_T − θ_0, c_j⟩; with server
  momentum or adaptive steps it does not.

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

THREAT_MODELS = ("final-model", "all-iterates", "iterate-sums")


def _vector(state) -> np.ndarray:
    return flatten(state).double().numpy()


def _cosines(directions: np.ndarray, delta: np.ndarray) -> np.ndarray:
    norm = float(np.linalg.norm(delta))
    if norm == 0:
        raise InvalidParameterError("the model did not move, so its delta has no direction to compare with")
    return directions @ delta / norm


def canary_client_cosines(source: Any, canaries: CanaryClients, *, threat_model: str = "final-model") -> np.ndarray:
    """g_j for every canary (inserted and unseen), in canary order."""
    if threat_model not in THREAT_MODELS[:2]:
        raise InvalidParameterError(f"unknown threat model {threat_model!r} for cosines; use final-model or all-iterates "
                                    "(iterate-sums: canary_client_sums)")
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


def canary_client_sums(source: Any, canaries: CanaryClients) -> np.ndarray:
    """s_j = Σ_t ⟨θ_t − θ_{t−1}, c_j⟩ over every released iteration, for every canary (inserted and unseen), in
    canary order (the ``iterate-sums`` score of the module docstring)."""
    releases = releases_of(source)
    previous = _vector(releases.global_state(0))
    if previous.size != canaries.dimension:
        raise InvalidParameterError(f"the canaries have dimension {canaries.dimension}, the model state {previous.size}")
    if releases.rounds < 1:
        raise InvalidParameterError(f"{releases.source} released no iteration after the initial model")
    total = np.zeros_like(previous)
    for r in range(1, releases.rounds + 1):
        current = _vector(releases.global_state(r))
        total += current - previous
        previous = current
    return canaries.directions @ total


def canary_client_scores(source: Any, canaries: CanaryClients, *, threat_model: str = "final-model") -> MembershipScores:
    """Cosines (or, for ``iterate-sums``, the summed projections) of the inserted (in) and unseen (out) canaries;
    larger = member."""
    if threat_model == "iterate-sums":
        cosines = canary_client_sums(source, canaries)
    else:
        cosines = canary_client_cosines(source, canaries, threat_model=threat_model)
    meta = {"attack": "canary-clients", "threat_model": threat_model, "dimension": canaries.dimension,
            "canaries": canaries.count, "inserted": int(canaries.inserted.sum()),
            "analytic_null": "(t+1)/2 ~ Beta((d−1)/2, (d−1)/2), variance 1/d" if threat_model == "final-model" else None}
    return MembershipScores.from_labels(cosines, canaries.inserted, meta)
