"""The local solver: the plug-in point that turns one client's local objective into its trained model.

Every :class:`~privaudit.fl.engine.local_training.LocalObjective` names a solver, and the trainer
(:class:`~privaudit.fl.engine.trainer.ClientTrainer`) dispatches on what the solver declares:

* :class:`LaneSolver` — solved by the federation's own lane optimiser
  (:func:`~privaudit.fl.engine.local_training.run_lanes`): mini-batch SGD (the default) and pFedMe's Moreau-envelope
  step. Clients with the same lane solver are trained together, batched on stacked parameters when the model allows it.
* :class:`ClientSolver` — runs a client's whole job itself through :meth:`ClientSolver.train_client`, given the
  trainer's public :class:`TrainerView`: DP-SGD (Abadi et al. 2016), exact minimisation (Upcycled-FL Thm 6.3's
  setting), FedCurv's penalised step, FedSGD's full-batch step, the papers' own solvers. Such clients train one after
  another. A new solver is one file: a :class:`ClientSolver` subclass.

Solvers that wrap another solver (FedCurv's penalty, PFA's fixed epoch count, PrivateFL's personal start) override
:meth:`LocalSolver.with_solver`, so a privatizer that swaps the solver (local DP puts DP-SGD in) keeps the wrapper.

:class:`LocalTask` is what the trainer is asked per client, :class:`LocalOutcome` what it returns; :class:`Trainer`
is what the round loop needs of a trainer (the :class:`TrainerView` plus training a round, its mode and its end).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import torch
    from torch import nn

    from privaudit.data.base import ClientData
    from privaudit.fl.engine.config import LocalTrainingConfig
    from privaudit.fl.engine.local_training import LocalObjective, Schedule
    from privaudit.fl.engine.params import State
    from privaudit.fl.engine.seeding import SeedTree


class LocalSolver:
    """Base of every local solver. Defaults: ``kind`` names the solver in messages; :meth:`with_solver` returns the
    replacement itself (a plain solver is replaced whole)."""

    kind: str = "solver"

    @property
    def full_batch(self) -> bool:
        """Whether every step uses all of the client's records (default ``False``)."""
        return False

    def with_solver(self, solver: LocalSolver) -> LocalSolver:
        """This solver with ``solver`` in place of the solving step (default: ``solver`` alone; wrappers keep
        themselves around it)."""
        return solver


class LaneSolver(LocalSolver):
    """A solver the federation's lane optimiser runs (:func:`~privaudit.fl.engine.local_training.run_lanes`),
    one client or many at once; clients sharing one are batched when the model has a stacked form."""


class ClientSolver(LocalSolver):
    """A solver that runs a client's whole local job itself (sequentially, one client after another).

    ``device_ready`` (default ``False``): whether it runs on the trainer's device; a solver that does not is refused
    on an accelerator with one line. A client solver computes its own loss, so the run's ``double_softmax`` switch
    (which changes the federation's own mini-batch loss) is refused with it.
    """

    device_ready: bool = False

    def train_client(self, trainer: TrainerView, global_state: State, task: LocalTask, training_round: int) -> LocalOutcome:
        """The client's trained model (and statistics) from ``global_state``; randomness from ``trainer.seeds``
        keyed by ``(stream, training_round, task.client_id)``, so a run repeats bit for bit."""
        raise NotImplementedError(f"the local solver {type(self).__name__} does not implement train_client")


#: ``gradient(params) -> [g ...]``: the gradient of a data-independent regulariser at the trainable parameters (in
#: :attr:`TrainerView.names` order), added to every step of a :class:`RegularisableSolver`.
RegulariserGradient = Callable[[Sequence["torch.Tensor"]], list["torch.Tensor"]]


class RegularisableSolver(ClientSolver):
    """A client solver that can add a data-independent regulariser's gradient to each of its steps (FedCurv's EWC
    penalty under DP-SGD: the penalty depends on the other clients' released Fisher sums, not on this client's data)."""

    def with_regulariser(self, gradient: RegulariserGradient | None) -> ClientSolver:
        """This solver adding ``gradient`` to every step (``None``: no regulariser)."""
        raise NotImplementedError(f"{type(self).__name__} declares RegularisableSolver without with_regulariser")


@dataclass(frozen=True)
class LocalTask:
    """One sampled client's job in a training round."""

    client_id: int
    data: ClientData
    epochs: int
    objective: LocalObjective
    #: mini-batch order drawn by the algorithm (:class:`~privaudit.fl.engine.capabilities.ClientSchedules`);
    #: ``None``: the trainer's seeded stream ("shuffle", training round, client)
    schedule: Schedule | None = None


@dataclass
class LocalOutcome:
    """What local training produced (before the algorithm and any privatizer turn it into a release)."""

    client_id: int
    state: State
    steps: int
    epochs: int
    mean_loss: float
    personal: State | None = None
    info: dict[str, Any] = field(default_factory=dict)


class TrainerView(Protocol):
    """The trainer as a client solver (and an algorithm, through ``SetupContext.trainer``) may use it."""

    #: the module to evaluate with a client's parameters (``torch.func.functional_call``), on :attr:`device`
    model: nn.Module
    #: its trainable parameters, in order
    names: tuple[str, ...]
    local: LocalTrainingConfig
    seeds: SeedTree
    device: torch.device

    def tensors(self, data: ClientData, client_id: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """A client's training inputs and labels on :attr:`device`."""
        ...

    def schedule(self, task: LocalTask, training_round: int) -> Schedule:
        """The client's mini-batch schedule for the round: the task's own, or the seeded ("shuffle", round, client) one."""
        ...

    def train_one(self, global_state: State, task: LocalTask, training_round: int) -> LocalOutcome:
        """The task trained alone by its objective's solver (what a solver wrapper calls for the solver it wraps)."""
        ...


class Trainer(TrainerView, Protocol):
    """What the round loop needs of a trainer: a round's clients trained, how they were, and the end of the run."""

    @property
    def mode(self) -> str:
        """How clients were trained (written to the checkpoint manifest)."""
        ...

    def train(self, global_state: State, tasks: Sequence[LocalTask], training_round: int) -> list[LocalOutcome]:
        """Every task of the round, outcomes in task order."""
        ...

    def share_clients(self, clients: Sequence[ClientData]) -> None:
        """The federation's clients (client id = index), for trainers that hand data to worker processes once."""
        ...

    def close(self) -> None:
        """Release what the trainer holds (worker processes) when the run ends, however it ends."""
        ...
