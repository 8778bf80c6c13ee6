"""Canary clients for your own training loop (Andrew, Kairouz, Oh, Oprea, McMahan & Suriyakumar 2024, "One-shot
empirical privacy estimation for federated learning", ICLR 2024, §3), scored on the global models you record.

::

    canaries = LoopCanaries(net, count=10_000, clip=C, first_id=num_clients, seed=0)
    population = [*range(num_clients), *canaries.client_ids]      # the inserted canaries join the population
    for r in rounds:
        sampled = my_sampling(population)                          # your own sampling, canaries included
        updates = [canaries.update(k, like=net.state_dict()) if canaries.is_canary(k) else my_update(k)
                   for k in sampled]
        ...                                                        # your clipping, noise, averaging, record_round
    canaries.save(recorder.path)                                   # after the recorder closed
    # privaudit audit --checkpoint RUN --client-canaries 10000

Each canary j is a fixed random direction c_j over the model's state (its ``state_dict`` order, as the recorder stores
it), present as a client by a fair coin drawn once (``client_ids`` lists the present ones, after your real clients'
ids); a present canary's update is C·c_j, already at the clip norm, so your clipping leaves it as it is. Your loop
samples, clips, noises and averages it like any client — a canary that skipped the loop's sampling would audit an
un-amplified mechanism. Directions are mutually orthonormal when count ≤ d (the model's scalars). The scores
(:func:`attacks.membership.canary_client_sums`, s_j = Σ_t ⟨θ_t − θ_{t−1}, c_j⟩ on the recorded global models) and the
bounds are :func:`privaudit.audit.workflows.client_canaries.run_client_canary_audit`, which :meth:`LoopCanaries.audit`
calls. Threat model: the adversary controls the canary clients' updates and sees every recorded global model.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

import torch
from torch import nn

from privaudit.checks import finite_positive, integer_at_least
from privaudit.errors import InvalidParameterError
from privaudit.fl.canaries.client_file import canary_record, write_canary_clients
from privaudit.fl.canaries.clients import CanaryClients, make_canary_clients
from privaudit.fl.engine import params as P


class LoopCanaries:
    """``count`` canary clients for a loop over clients ``0 … first_id − 1``; the present ones get ids from ``first_id``."""

    def __init__(self, model: nn.Module | Mapping[str, torch.Tensor], count: int, *, clip: float, first_id: int,
                 seed: int = 0) -> None:
        integer_at_least("the number of canary clients", count, 2)
        finite_positive("the clip norm", clip)
        integer_at_least("the first canary id", first_id, 0)
        state = dict(model.state_dict() if isinstance(model, nn.Module) else model)
        self._like = {k: v.detach().clone() for k, v in state.items()}
        dimension = P.num_scalars(self._like)
        self.orthonormal = int(count) <= dimension
        drawn = make_canary_clients(dimension, int(count), seed=int(seed), update_norm=float(clip),
                                    orthonormal=self.orthonormal)
        present = int(drawn.inserted.sum())
        self.canaries: CanaryClients = replace(drawn, client_ids=tuple(range(int(first_id), int(first_id) + present)))
        self._canary_of = self.canaries.canary_of_client()
        self.participations: dict[int, int] = {}

    @property
    def client_ids(self) -> list[int]:
        """The present canaries' client ids (add them to the population your loop samples from)."""
        return list(self.canaries.client_ids)

    @property
    def count(self) -> int:
        return self.canaries.count

    def is_canary(self, client_id: int) -> bool:
        return int(client_id) in self._canary_of

    def update(self, client_id: int, like: Mapping[str, torch.Tensor] | None = None) -> dict[str, torch.Tensor]:
        """The canary client's update C·c_j, shaped like ``like`` (default: the model's state); counts one participation."""
        canary = self._canary_of.get(int(client_id))
        if canary is None:
            raise InvalidParameterError(f"client {client_id} is not a present canary (ids: {self.client_ids[:3]} …)")
        like = self._like if like is None else like
        if P.num_scalars(like) != self.canaries.dimension:
            raise InvalidParameterError(f"the canaries span {self.canaries.dimension} scalars, the state given has "
                                        f"{P.num_scalars(like)}")
        vector = torch.from_numpy(float(self.canaries.update_norm) * self.canaries.directions[canary])
        self.participations[int(client_id)] = self.participations.get(int(client_id), 0) + 1
        return P.unflatten(vector, like)

    def updates(self, sampled, like: Mapping[str, torch.Tensor] | None = None) -> dict[int, dict[str, torch.Tensor]]:
        """Client id → update, for the canaries among ``sampled``."""
        return {int(k): self.update(k, like) for k in sampled if self.is_canary(k)}

    def save(self, checkpoint: str | Path) -> Path:
        """Store the canaries beside the recorded checkpoint (``canary-clients.json``); call it after recording."""
        if not (Path(checkpoint) / "manifest.json").is_file():
            raise InvalidParameterError(f"{checkpoint} is not a recorded checkpoint yet: save the canaries after the "
                                        "recorder has closed")
        return write_canary_clients(checkpoint, canary_record(self.canaries, orthonormal=self.orthonormal,
                                                              participations=self.participations))

    def audit(self, checkpoint: str | Path, *, delta: float = 1e-5, significance: float = 0.05, seed: int = 0,
              claimed_epsilon: float | None = None):
        """The canary-client audit of the recorded run (``privaudit audit --checkpoint RUN --client-canaries m``)."""
        from privaudit.audit.workflows.client_canaries import ClientCanaryOptions, run_client_canary_audit

        options = ClientCanaryOptions(self.count, delta=delta, significance=significance, seed=seed,
                                      claimed_epsilon=claimed_epsilon)
        return run_client_canary_audit(checkpoint, options, progress=False)

