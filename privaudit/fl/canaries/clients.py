"""Canary clients (Andrew, Kairouz, Oh, Oprea, McMahan & Suriyakumar 2024, "One-shot empirical privacy
estimation for federated learning", ICLR 2024, §3).

m canaries, each a fixed uniformly random unit direction c_j over the whole released model state; canary j
is *inserted* (becomes a client of the federation) with probability ½, otherwise it stays unseen. An inserted
canary client takes part in sampling, privatization and aggregation like any client, but its update is

    Δ_j = M·c_j     (its released local model before privatization is ω̄ + M·c_j),

with M large enough that any clipping makes the clipped update exactly the clip norm (Andrew et al. scale by
10⁴; with no ``update_norm`` given, M = 10⁴·τ for the clip norm τ of the privatizer the wrapper finds).

Engine side, two pieces: :func:`add_canary_clients` appends one placeholder client per inserted canary to the
dataset (one all-zero record, no test data: the trainer needs something to run; its result is discarded),
and :class:`CanaryClientInsertion` replaces the placeholder's local model by ω̄ + M·c_j before the inner
privatizer and weighs it in aggregation as ``weight`` examples (default: the mean real client size). Canary
clients are sampled, privatized and recorded in the privacy ledger like any client (ids after the real ones).
Scoring (cosines with the model delta, the analytic null) is :mod:`attacks.membership.client_canaries`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import torch

from privaudit.data.base import ClientData, FederatedDataset
from privaudit.errors import InvalidParameterError
from privaudit.fl.algorithms.base import AlgorithmWrapper
from privaudit.fl.canaries.directions import (
    membership_bits,
    random_orthonormal_directions,
    random_unit_directions,
)
from privaudit.fl.engine import params as P
from privaudit.fl.engine.algorithm import Algorithm, ClientContext, ClientResult, SetupContext
from privaudit.fl.engine.capabilities import ReleaseBound
from privaudit.fl.engine.params import State

#: Andrew et al.'s scale: the canary update is 10⁴ × the clip norm, so clipping always binds.
CLIP_SCALE = 1e4


@dataclass(frozen=True, eq=False)
class CanaryClients:
    """m canary directions, which of them are inserted, and (once added to a dataset) their client ids."""

    directions: np.ndarray  # (m, d) unit vectors
    inserted: np.ndarray  # (m,) bool
    seed: int
    update_norm: float | None = None  # M; None: 10⁴ × the privatizer's clip norm
    weight: int | None = None  # examples a canary counts for in aggregation; None: mean real client size
    client_ids: tuple[int, ...] = ()  # engine ids of the inserted canaries, in canary order

    def __post_init__(self) -> None:
        if self.directions.ndim != 2 or self.inserted.shape != (len(self.directions),):
            raise InvalidParameterError("canary clients need one membership bit per direction")
        if self.update_norm is not None and not self.update_norm > 0:
            raise InvalidParameterError(f"the canary update norm must be positive, got {self.update_norm}")
        if self.client_ids and len(self.client_ids) != int(self.inserted.sum()):
            raise InvalidParameterError("canary client ids must list exactly the inserted canaries")

    @property
    def count(self) -> int:
        return len(self.directions)

    @property
    def dimension(self) -> int:
        return int(self.directions.shape[1])

    def canary_of_client(self) -> dict[int, int]:
        """Engine client id → canary index."""
        return dict(zip(self.client_ids, (int(j) for j in np.flatnonzero(self.inserted)), strict=True))

    def to_dict(self) -> dict[str, Any]:
        return {
            "directions": self.directions.tolist(), "inserted": self.inserted.tolist(), "seed": self.seed,
            "update_norm": self.update_norm, "weight": self.weight, "client_ids": list(self.client_ids),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CanaryClients:
        return cls(
            directions=np.asarray(data["directions"], dtype=np.float64), inserted=np.asarray(data["inserted"], dtype=bool),
            seed=int(data["seed"]), update_norm=data.get("update_norm"), weight=data.get("weight"),
            client_ids=tuple(int(c) for c in data.get("client_ids", ())),
        )


def make_canary_clients(
    dimension: int,
    count: int,
    *,
    seed: int = 0,
    update_norm: float | None = None,
    weight: int | None = None,
    inclusion: float = 0.5,
    orthonormal: bool = False,
) -> CanaryClients:
    """``count`` random unit directions in ``dimension`` (= scalars in the model state), each inserted w.p. ``inclusion``.

    ``orthonormal``: mutually orthonormal directions (``count`` ≤ ``dimension``), so the round's isotropic noise
    projects onto the canaries as independent coordinates and no canary leaks into another's projection. The same
    (dimension, count, seed, inclusion, orthonormal) give the same directions and bits: a recorded run stores only those.
    """
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), 0xCC]))
    draw = random_orthonormal_directions if orthonormal else random_unit_directions
    directions = draw(int(count), int(dimension), rng)
    return CanaryClients(directions, membership_bits(int(count), rng, inclusion), int(seed),
                         None if update_norm is None else float(update_norm), None if weight is None else int(weight))


def add_canary_clients(dataset: FederatedDataset, canaries: CanaryClients) -> tuple[FederatedDataset, CanaryClients]:
    """Append one placeholder client per inserted canary; returns the dataset and the canaries with their ids."""
    inserted = int(canaries.inserted.sum())
    first = dataset.num_clients
    shape = tuple(dataset.input_shape)
    placeholder = [
        ClientData(np.zeros((1, *shape), np.float32), np.zeros(1, np.int64), np.zeros((0, *shape), np.float32), np.zeros(0, np.int64))
        for _ in range(inserted)
    ]
    weight = canaries.weight if canaries.weight is not None else max(1, round(float(dataset.client_sizes.mean())))
    ids = tuple(range(first, first + inserted))
    metadata = {**dataset.metadata, "canary_clients": {"count": canaries.count, "inserted": inserted, "first_id": first,
                                                       "seed": canaries.seed}}
    # the pooled test set stays the real clients' (placeholders have none, so the default would not change it)
    grown = replace(dataset, clients=[*dataset.clients, *placeholder], metadata=metadata)
    return grown, replace(canaries, weight=int(weight), client_ids=ids)


class CanaryClientInsertion(AlgorithmWrapper):
    """Replaces a canary client's local model by ω̄ + M·c_j before the inner privatizer."""

    prefix = "canary-clients"

    def __init__(self, inner: Algorithm, canaries: CanaryClients) -> None:
        super().__init__(inner)
        if not canaries.client_ids and canaries.inserted.any():
            raise InvalidParameterError("add the canary clients to the dataset first (add_canary_clients)")
        self.canaries = canaries
        self._by_client = canaries.canary_of_client()
        self.update_norm = canaries.update_norm

    def setup(self, context: SetupContext) -> None:
        size = P.num_scalars(context.initial_state)
        if size != self.canaries.dimension:
            raise InvalidParameterError(f"the canaries have dimension {self.canaries.dimension}, the model state has {size} scalars")
        if self._by_client and max(self._by_client) >= context.num_clients:
            raise InvalidParameterError("the dataset does not hold the canary clients (use the dataset add_canary_clients returned)")
        if self.update_norm is None:
            clip = ReleaseBound.of(self.inner).release_clip
            if clip is None:
                raise InvalidParameterError("canary clients need update_norm: no clipping privatizer is wrapped to take the clip norm from")
            self.update_norm = CLIP_SCALE * float(clip)
        super().setup(context)

    def finish(self, global_state: State, client: ClientContext, outcome) -> ClientResult:
        canary = self._by_client.get(client.client_id)
        if canary is None:
            return self.inner.finish(global_state, client, outcome)
        update = P.unflatten(torch.from_numpy(self.update_norm * self.canaries.directions[canary]), global_state)
        outcome = replace(outcome, state=P.add(global_state, update), mean_loss=0.0)
        result = self.inner.finish(global_state, client, outcome)
        return replace(result, num_examples=int(self.canaries.weight or 1), info={**result.info, "canary": canary})

    def hyperparameters(self) -> dict:
        return {"canaries": self.canaries.count, "inserted": len(self._by_client), "update_norm": self.update_norm,
                "weight": self.canaries.weight}
