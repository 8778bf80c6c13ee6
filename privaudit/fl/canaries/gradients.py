"""Gradient canaries: C·c added to one client's update in chosen rounds, before the privatizer.

White-box auditing in the style of Nasr et al. 2023 ("Tight auditing of differentially private machine
learning", Dirac canaries, every step observed) and Steinke, Nasr & Jagielski 2023 (many random-direction
canaries in one run). In FL the "gradient" a client contributes is its model update Δ = ω − ω̄; the canary
client's update becomes

    Δ ← Δ + C · Σ_j b_{t,j} c_j

for the canaries j whose bit b_{t,j} is 1 in training round t. Each c_j is a unit vector over the whole
released state (all tensors, in the model's order), Dirac or uniformly random; the bits are independent
Bernoulli(½), either per (round, canary) — every round is its own experiment, so the auditor can compose
per-round μ — or per canary (one bit for all chosen rounds; the one-run design).

:class:`GradientCanaryInsertion` wraps the privatizer (``Upcycled(GradientCanaryInsertion(Privatizer(X)))``),
so the canary passes through clipping and noise exactly like the client's own update, and it records which
canaries entered in the client's :attr:`ClientResult.info`. Scoring is
:mod:`attacks.membership.gradient_canaries`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import torch

from privaudit.errors import InvalidParameterError
from privaudit.fl.algorithms.base import AlgorithmWrapper
from privaudit.fl.canaries.directions import DirectionKind, make_directions, membership_bits
from privaudit.fl.engine import params as P
from privaudit.fl.engine.algorithm import Algorithm, ClientContext, ClientResult, SetupContext
from privaudit.fl.engine.params import State

MEMBERSHIP_DESIGNS = ("per-round", "per-canary")


@dataclass(frozen=True, eq=False)
class GradientCanaries:
    """k canary directions, their magnitude C, the client that carries them and the bits per chosen round."""

    directions: np.ndarray  # (k, d) unit vectors over the flattened state
    magnitude: float
    client: int
    rounds: tuple[int, ...]  # training-round indices (1-based) in which canaries may enter
    inserted: np.ndarray  # (len(rounds), k) bool
    kind: str
    membership: str
    seed: int

    def __post_init__(self) -> None:
        if self.directions.ndim != 2 or self.inserted.shape != (len(self.rounds), len(self.directions)):
            raise InvalidParameterError("gradient canaries need a (rounds × canaries) bit matrix matching the directions")
        if not self.magnitude > 0:
            raise InvalidParameterError(f"the canary magnitude C must be positive, got {self.magnitude}")

    @property
    def count(self) -> int:
        return int(self.directions.shape[0])

    @property
    def dimension(self) -> int:
        return int(self.directions.shape[1])

    def row(self, training_round: int) -> int | None:
        """Index of ``training_round`` among the chosen rounds, or ``None``."""
        try:
            return self.rounds.index(int(training_round))
        except ValueError:
            return None

    def vector(self, training_round: int) -> np.ndarray | None:
        """C·Σ_j b_{t,j} c_j for ``training_round`` (``None`` when no canary enters that round)."""
        row = self.row(training_round)
        if row is None or not self.inserted[row].any():
            return None
        return self.magnitude * self.directions[self.inserted[row]].sum(axis=0)

    def to_dict(self) -> dict[str, Any]:
        return {
            "directions": self.directions.tolist(), "magnitude": self.magnitude, "client": self.client,
            "rounds": list(self.rounds), "inserted": self.inserted.tolist(), "kind": self.kind,
            "membership": self.membership, "seed": self.seed,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> GradientCanaries:
        return cls(
            directions=np.asarray(data["directions"], dtype=np.float64), magnitude=float(data["magnitude"]),
            client=int(data["client"]), rounds=tuple(int(r) for r in data["rounds"]),
            inserted=np.asarray(data["inserted"], dtype=bool).reshape(len(data["rounds"]), -1),
            kind=str(data["kind"]), membership=str(data["membership"]), seed=int(data["seed"]),
        )


def make_gradient_canaries(
    dimension: int,
    count: int,
    *,
    magnitude: float,
    client: int,
    rounds: Sequence[int],
    kind: str | DirectionKind = DirectionKind.RANDOM,
    membership: str = "per-round",
    seed: int = 0,
) -> GradientCanaries:
    """Draw ``count`` canary directions in ``dimension`` (= number of scalars in the model state) and their bits.

    ``rounds`` are training-round indices (1 = the first round that trains clients; for Upcycled-X that is
    iteration 1, then 3, 5, ...). ``membership="per-round"`` draws a bit per (round, canary);
    ``"per-canary"`` one bit per canary, the same in every chosen round.
    """
    if membership not in MEMBERSHIP_DESIGNS:
        raise InvalidParameterError(f"unknown canary membership design {membership!r}; use {' or '.join(MEMBERSHIP_DESIGNS)}")
    chosen = tuple(sorted({int(r) for r in rounds}))
    if not chosen or chosen[0] < 1:
        raise InvalidParameterError(f"gradient canaries need training rounds ≥ 1, got {list(rounds)}")
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), 0x9C]))
    kind = DirectionKind.parse(kind)
    directions = make_directions(kind, int(count), int(dimension), rng)
    if membership == "per-round":
        bits = membership_bits((len(chosen), int(count)), rng)
    else:
        bits = np.repeat(membership_bits((1, int(count)), rng), len(chosen), axis=0)
    return GradientCanaries(directions, float(magnitude), int(client), chosen, bits, kind.value, membership, int(seed))


class GradientCanaryInsertion(AlgorithmWrapper):
    """Adds the round's canary vector to the canary client's local model before the inner privatizer."""

    prefix = "gradient-canaries"

    def __init__(self, inner: Algorithm, canaries: GradientCanaries) -> None:
        super().__init__(inner)
        self.canaries = canaries

    def setup(self, context: SetupContext) -> None:
        size = P.num_scalars(context.initial_state)
        if size != self.canaries.dimension:
            raise InvalidParameterError(f"the canaries have dimension {self.canaries.dimension}, the model state has {size} scalars")
        if not 0 <= self.canaries.client < context.num_clients:
            raise InvalidParameterError(f"canary client {self.canaries.client} is not one of the {context.num_clients} clients")
        super().setup(context)

    def finish(self, global_state: State, client: ClientContext, outcome) -> ClientResult:
        added: list[int] = []
        if client.client_id == self.canaries.client:
            vector = self.canaries.vector(client.training_round)
            if vector is not None:
                row = self.canaries.row(client.training_round)
                added = [int(j) for j in np.flatnonzero(self.canaries.inserted[row])]
                shift = P.unflatten(torch.from_numpy(vector), outcome.state)
                outcome = replace(outcome, state=P.add(outcome.state, shift))
        result = self.inner.finish(global_state, client, outcome)
        if client.client_id != self.canaries.client:
            return result
        return replace(result, info={**result.info, "gradient_canaries": added})

    def hyperparameters(self) -> dict:
        c = self.canaries
        return {"canaries": c.count, "magnitude": c.magnitude, "client": c.client, "kind": c.kind, "membership": c.membership}
