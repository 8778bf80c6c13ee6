"""Per-round white-box observations of gradient canaries (Nasr et al. 2023; Steinke, Nasr & Jagielski 2023).

The auditor sees the released models of every round (the FL server's view). In the canaries' chosen
training round t (iteration r) the observation of canary j is the projection of the round's update on its
direction,

    o_{t,j} = ⟨ρ_r − ω̄^{r−1}, c_j⟩,

with ρ_r the canary client's release (``view="client"``, needs client releases) or the aggregate ω̄^r
(``view="aggregate"``). Without the canary o_{t,j} is the projection of the client's own update plus the
privatizer's noise ⟨n, c_j⟩ ~ N(0, s²) (c_j is a unit vector); with it, C more (times the client's aggregation
weight in the aggregate view) as long as clipping does not bind. Each round is returned separately
(:class:`~attacks.membership.scores.RoundObservations`) so the auditor can bound μ_t per round and compose.
With the per-canary design (one bit for all rounds), :func:`summed_canary_scores` adds a canary's
observations over the rounds: one score per canary for a one-run audit.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from privaudit.errors import InvalidParameterError
from privaudit.fl.canaries.gradients import GradientCanaries
from privaudit.fl.engine.params import flatten

from .releases import FederationReleases, releases_of
from .scores import MembershipScores, RoundObservations

VIEWS = ("client", "aggregate")


def _vector(state) -> np.ndarray:
    return flatten(state).double().numpy()


def _noise_std(privacy: dict[str, Any] | None) -> float | None:
    if not privacy or privacy.get("mechanism") != "output-perturbation":
        return None
    sigma = float(privacy["sigma"])
    return sigma if privacy.get("noise_std", "sigma") == "sigma" else sigma**2


def gradient_canary_observations(source: Any, canaries: GradientCanaries, *, view: str = "client") -> RoundObservations:
    """One :class:`MembershipScores` per chosen training round (see the module docstring).

    ``source``: a checkpoint path, a :class:`~privaudit.fl.engine.recording.ReleaseRecorder` or a
    :class:`~attacks.membership.releases.FederationReleases`. Rounds in which the canary client was not
    sampled give no observation and are listed in ``meta["rounds_without_client"]``.
    """
    if view not in VIEWS:
        raise InvalidParameterError(f"unknown observation view {view!r}; use client or aggregate")
    releases: FederationReleases = releases_of(source)
    if canaries.dimension != len(_vector(releases.global_state(0))):
        raise InvalidParameterError("the canaries' dimension differs from the model state's")
    trained = releases.trained_rounds
    rounds, per_round, missing = [], [], []
    for row, training_round in enumerate(canaries.rounds):
        if training_round > len(trained):
            raise InvalidParameterError(f"training round {training_round} was never run ({len(trained)} training rounds)")
        iteration = trained[training_round - 1]
        start = _vector(releases.global_state(iteration - 1))
        if view == "client":
            released = releases.client_releases(iteration).get(canaries.client)
            if released is None:
                missing.append(iteration)
                continue
            end = _vector(released)
        else:
            end = _vector(releases.global_state(iteration))
        observed = canaries.directions @ (end - start)
        bits = canaries.inserted[row]
        per_round.append(MembershipScores(observed[bits], observed[~bits], {"round": iteration, "training_round": training_round}))
        rounds.append(iteration)
    meta = {
        "attack": "gradient-canaries", "view": view, "kind": canaries.kind, "membership": canaries.membership,
        "magnitude": canaries.magnitude, "canaries": canaries.count, "client": canaries.client,
        "noise_std": _noise_std(releases.privacy()), "rounds_without_client": missing, "source": releases.source,
        "threat_model": "white-box: every round's " + ("client releases" if view == "client" else "aggregates"),
    }
    return RoundObservations(tuple(rounds), tuple(per_round), meta)


def summed_canary_scores(observations: RoundObservations, canaries: GradientCanaries) -> MembershipScores:
    """Σ_t o_{t,j} per canary, for the per-canary design (one membership bit per canary, all rounds)."""
    if canaries.membership != "per-canary":
        raise InvalidParameterError("summing a canary's rounds needs the per-canary membership design")
    totals = np.zeros(canaries.count)
    bits = canaries.inserted[0]
    for scores in observations.per_round:
        totals[bits] += scores.in_scores
        totals[~bits] += scores.out_scores
    return MembershipScores.from_labels(totals, bits, {**observations.meta, "combined": "sum over rounds"})
