"""What the round loop asks of a federated algorithm: the round's steps (the core), and the values it passes.

A training round, as :class:`~privaudit.fl.engine.round_loop.Federation` runs it::

    objective_i = algorithm.local_objective(ω̄, client_i)       # what client i minimises (no data read)
    outcome_i   = trainer.train(ω̄, [task_i ...])                # local training, batched or sequential
    result_i    = algorithm.finish(ω̄, client_i, outcome_i)      # client-side post-processing → release
    ω̄'          = algorithm.aggregate(round, ω̄, [result_i ...])  # server

Splitting the architecture's ``client_update(global_state, client_data, rng) -> ClientResult`` into
``local_objective`` → training → ``finish`` lets the trainer run every sampled client at once;
:meth:`Algorithm.client_update` composes the three for one client. A round in which
:meth:`Algorithm.trains_clients` is false touches no client: the federation calls
:meth:`Algorithm.server_update` instead (Upcycled-FL's even rounds).

:class:`Algorithm` is the *core*: the steps every algorithm has, with FedAvg-like defaults. Everything else an
algorithm may add — hooks of the run (PFA's planning and client choice), what it contributes to a run's record, what
privatizers need to know — is an optional capability declared in :mod:`privaudit.fl.engine.capabilities` and found
with :meth:`Algorithm.capability`; wrappers (:class:`privaudit.fl.algorithms.base.AlgorithmWrapper`) forward every
capability they do not declare themselves to the algorithm they wrap.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

import torch

from privaudit.accounting.ledger import PrivacyEvent
from privaudit.data.base import ClientData
from privaudit.fl.engine.capabilities import require_declared
from privaudit.fl.engine.local_solver import LocalOutcome, LocalTask
from privaudit.fl.engine.local_training import LocalObjective, Schedule
from privaudit.fl.engine.params import State
from privaudit.fl.engine.seeding import SeedTree

if TYPE_CHECKING:
    from torch import nn

    from privaudit.fl.engine.local_solver import TrainerView

C = TypeVar("C")

#: ``ClientResult.info`` key of a result that stands for several clients (a server-side private aggregate): how many,
#: e.g. the fixed denominator q·N of a noised mean. Server steps that need a *sum* over the round's clients (FedDyn's h)
#: multiply by it.
AGGREGATE_OF_CLIENTS = "aggregate_of_clients"


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
    trainer: TrainerView | None = None
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


@dataclass(frozen=True)
class ClientDraws:
    """A training round's local epochs and mini-batch orders, aligned with its sampled clients, for an algorithm that
    draws them itself (:class:`~privaudit.fl.engine.capabilities.ClientSchedules`); a ``None`` schedule keeps the
    federation's seeded one."""

    epochs: tuple[int, ...]
    schedules: tuple[Schedule | None, ...]


class Algorithm:
    """The core every algorithm implements: FedAvg-like defaults that subclasses override where they differ.

    Optional capabilities (:mod:`privaudit.fl.engine.capabilities`) are declared by inheriting them; the round loop,
    privatizers and reports find them with :meth:`capability`, never by probing attributes.
    """

    name = "algorithm"

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        require_declared(cls, Algorithm)  # a capability's member defined without declaring it would go unseen

    def capability(self, kind: type[C]) -> C | None:
        """This algorithm as capability ``kind`` when it declares it, else ``None`` (wrappers look further in)."""
        return self if isinstance(self, kind) else None

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

    def hyperparameters(self) -> dict[str, Any]:
        return {}

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "hyperparameters": self.hyperparameters()}

    def client_update(self, global_state: State, client: ClientContext) -> ClientResult:
        """One client's round (objective → sequential local training → finish), for single-client use."""
        trainer = self.context.trainer
        if trainer is None:
            raise RuntimeError("client_update needs an algorithm set up with a trainer")
        task = LocalTask(client.client_id, client.data, client.epochs, self.local_objective(global_state, client))
        outcome = trainer.train_one(global_state, task, client.training_round)
        return self.finish(global_state, client, outcome)
