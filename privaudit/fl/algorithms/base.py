"""The small interface every federated algorithm implements, and the wrapper base class.

A training round, as the federation runs it (:mod:`privaudit.fl.engine.round_loop`)::

    objective_i = algorithm.local_objective(ω̄, client_i)       # what client i minimises (no data read)
    outcome_i   = trainer.train(ω̄, [task_i ...])                # local SGD, batched or sequential
    result_i    = algorithm.finish(ω̄, client_i, outcome_i)      # client-side post-processing → release
    ω̄'          = algorithm.aggregate(round, ω̄, [result_i ...])  # server

Splitting the architecture's ``client_update(global_state, client_data, rng) -> ClientResult`` into
``local_objective`` → training → ``finish`` lets the trainer run every sampled client at once;
:meth:`Algorithm.client_update` composes the three for one client. A round in which
:meth:`Algorithm.trains_clients` is false touches no client: the federation calls
:meth:`Algorithm.server_update` instead (Upcycled-FL's even rounds).

Privacy mechanisms and Upcycled-FL are *wrappers* (:class:`AlgorithmWrapper`) around any algorithm, in
the manner of Flower's ``DifferentialPrivacyClientSideFixedClipping`` strategy wrapping a strategy.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch

from privaudit.accounting.ledger import PrivacyEvent
from privaudit.data.base import ClientData
from privaudit.fl.engine import params as P
from privaudit.fl.engine.local_training import LocalObjective
from privaudit.fl.engine.params import State
from privaudit.fl.engine.seeding import SeedTree

if TYPE_CHECKING:
    from torch import nn

    from privaudit.fl.engine.trainer import ClientTrainer, LocalOutcome


@dataclass(frozen=True)
class SetupContext:
    """What an algorithm may know before the first round (no client data beyond its size)."""

    model: nn.Module
    initial_state: State
    trainable: tuple[str, ...]
    input_shape: tuple[int, ...]
    num_clients: int
    client_sizes: tuple[int, ...]
    local_lr: float
    local_momentum: float
    seeds: SeedTree
    trainer: ClientTrainer | None = None
    #: (low, high) of the inputs in model space (broadcastable to a batch), from the dataset's data range
    #: and normalisation; ``None`` when unknown. FedReg clamps its FGSM pseudo data to it.
    input_bounds: tuple[torch.Tensor, torch.Tensor] | None = None


@dataclass(frozen=True)
class ClientContext:
    """One sampled client in one training round: its data and its seeded random streams.

    ``round`` is the iteration number (1-based, as recorded in privacy events); ``training_round`` the
    index of this round among the rounds that train clients (it keys the random streams).
    """

    round: int
    training_round: int
    client_id: int
    data: ClientData
    epochs: int
    seeds: SeedTree

    @property
    def num_examples(self) -> int:
        return self.data.num_train

    def generator(self, stream: str) -> torch.Generator:
        """A torch generator private to (stream, training round, client)."""
        return self.seeds.torch(stream, self.training_round, self.client_id)


@dataclass(frozen=True)
class ClientResult:
    """What a client released in a round, plus its privacy events and training statistics.

    ``state`` is the released local model (after any privatizer); ``extras`` other released tensors
    (e.g. SCAFFOLD's control-variate change). White-box attacks read these from checkpoints.
    """

    client_id: int
    num_examples: int
    state: State
    train_loss: float
    steps: int
    epochs: int
    extras: dict[str, State] = field(default_factory=dict)
    events: tuple[PrivacyEvent, ...] = ()
    info: dict[str, Any] = field(default_factory=dict)


def example_weighted_average(results: Sequence[ClientResult]) -> State:
    """ω̄ = Σ_i p_i ω_i with p_i = |D_i| / Σ_{j sampled} |D_j| (FedProx Alg. 2 / Upcycled-FL 003 Alg. 2)."""
    return P.weighted_average([r.state for r in results], [r.num_examples for r in results])


class Algorithm:
    """Base class: FedAvg-like defaults that subclasses override where they differ."""

    name = "algorithm"

    def setup(self, context: SetupContext) -> None:
        """Initialise server (and simulated client) state before round 1."""
        self.context = context

    def trains_clients(self, round: int) -> bool:
        return True

    def local_objective(self, global_state: State, client: ClientContext) -> LocalObjective:
        return LocalObjective()

    def finish(self, global_state: State, client: ClientContext, outcome: LocalOutcome) -> ClientResult:
        return ClientResult(
            client_id=client.client_id,
            num_examples=client.num_examples,
            state=outcome.state,
            train_loss=outcome.mean_loss,
            steps=outcome.steps,
            epochs=outcome.epochs,
            info=dict(outcome.info),
        )

    def aggregate(self, round: int, global_state: State, results: Sequence[ClientResult]) -> State:
        raise NotImplementedError

    def server_update(self, round: int, global_state: State) -> State:
        """The global model after a round that trains no client (only wrappers that skip rounds need it)."""
        raise NotImplementedError(f"{self.name} trains clients in every round")

    def personal_states(self) -> dict[int, State]:
        """Per-client personalised models, for algorithms that keep them (pFedMe); empty otherwise."""
        return {}

    def hyperparameters(self) -> dict[str, Any]:
        return {}

    def find(self, attribute: str) -> Any:
        """The value of ``attribute`` on this algorithm or the innermost algorithm that has it, else ``None``."""
        return getattr(self, attribute, None)

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "hyperparameters": self.hyperparameters()}

    def client_update(self, global_state: State, client: ClientContext) -> ClientResult:
        """One client's round (objective → sequential local training → finish), for single-client use."""
        from privaudit.fl.engine.trainer import LocalTask

        trainer = self.context.trainer
        if trainer is None:
            raise RuntimeError("client_update needs an algorithm set up with a trainer")
        task = LocalTask(client.client_id, client.data, client.epochs, self.local_objective(global_state, client))
        outcome = trainer.train_one(global_state, task, client.training_round)
        return self.finish(global_state, client, outcome)


class AlgorithmWrapper(Algorithm):
    """Delegates everything to ``inner``; subclasses override the steps they change."""

    prefix = "wrapped"

    def __init__(self, inner: Algorithm) -> None:
        self.inner = inner

    @property
    def name(self) -> str:  # type: ignore[override]
        return f"{self.prefix}-{self.inner.name}"

    def setup(self, context: SetupContext) -> None:
        self.context = context
        self.inner.setup(context)

    def trains_clients(self, round: int) -> bool:
        return self.inner.trains_clients(round)

    def local_objective(self, global_state: State, client: ClientContext) -> LocalObjective:
        return self.inner.local_objective(global_state, client)

    def finish(self, global_state: State, client: ClientContext, outcome: LocalOutcome) -> ClientResult:
        return self.inner.finish(global_state, client, outcome)

    def aggregate(self, round: int, global_state: State, results: Sequence[ClientResult]) -> State:
        return self.inner.aggregate(round, global_state, results)

    def server_update(self, round: int, global_state: State) -> State:
        return self.inner.server_update(round, global_state)

    def personal_states(self) -> dict[int, State]:
        return self.inner.personal_states()

    def find(self, attribute: str) -> Any:
        value = getattr(self, attribute, None)
        return value if value is not None else self.inner.find(attribute)

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "hyperparameters": self.hyperparameters(), "wraps": self.inner.describe()}
