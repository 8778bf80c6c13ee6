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

Beyond the round's steps, the interface declares the *capabilities* the federation and the wrappers ask an
algorithm about — the federation's hooks (:meth:`Algorithm.start_federation`, :meth:`Algorithm.select_clients`,
:meth:`Algorithm.end_federation`), what it contributes to a finished run's record
(:meth:`Algorithm.manifest_sections`, :meth:`Algorithm.summary_rows`, :meth:`Algorithm.model_for`) and what the
privatizers need to know (:attr:`Algorithm.neighbouring`, :attr:`Algorithm.accounts_own_privacy`,
:attr:`Algorithm.shared_names`, ...). Each has a documented default that changes nothing; an algorithm overrides
the ones it has, and :class:`AlgorithmWrapper` passes every one through to the algorithm it wraps explicitly, so a
capability of the innermost algorithm is seen through any stack of wrappers and a wrapper that changes one
overrides it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch

from privaudit.accounting.ledger import PrivacyEvent
from privaudit.accounting.mechanisms import Neighbouring
from privaudit.data.base import ClientData
from privaudit.fl.engine import params as P
from privaudit.fl.engine.local_training import LocalObjective, Schedule
from privaudit.fl.engine.params import State
from privaudit.fl.engine.seeding import SeedTree

if TYPE_CHECKING:
    import numpy as np
    from torch import nn

    from privaudit.accounting.ledger import PrivacyLedger
    from privaudit.fl.engine.config import FederationConfig
    from privaudit.fl.engine.round_loop import FederationResult
    from privaudit.fl.engine.trainer import ClientTrainer, LocalOutcome

#: What :meth:`Algorithm.model_for` returns for an architecture no registered name describes:
#: ``build(input_shape, num_classes) -> nn.Module``, called under the run's seeded model initialisation.
ModelBuilder = Callable[[tuple[int, ...], int], "nn.Module"]


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


@dataclass(frozen=True)
class ClientDraws:
    """A training round's local epochs and mini-batch orders, aligned with its sampled clients, for an algorithm that
    draws them itself (:meth:`Algorithm.client_draws`); a ``None`` schedule keeps the federation's seeded one."""

    epochs: tuple[int, ...]
    schedules: tuple[Schedule | None, ...]


def example_weighted_average(results: Sequence[ClientResult]) -> State:
    """ω̄ = Σ_i p_i ω_i with p_i = |D_i| / Σ_{j sampled} |D_j| (FedProx Alg. 2 / Upcycled-FL 003 Alg. 2)."""
    return P.weighted_average([r.state for r in results], [r.num_examples for r in results])


class Algorithm:
    """Base class: FedAvg-like defaults that subclasses override where they differ."""

    name = "algorithm"

    # -- capabilities the privatizers ask about (class attributes or properties; defaults change nothing) --------
    #: The neighbouring relation of the guarantees this algorithm's privacy events state; the run's ledger records it.
    neighbouring: Neighbouring = Neighbouring.ADD_REMOVE
    #: Whether the algorithm records its own privacy events (PFA: its private clients run DP-SGD inside it and its
    #: public clients release without noise by design), so ``--privacy none`` adds no "no DP guarantee" event.
    accounts_own_privacy: bool = False
    #: Whether the local step has a DP-SGD form, so ``--privacy dp-sgd`` may swap DP-SGD in for the local solver
    #: (pFedMe's Moreau-envelope loop and FedReg's pseudo-data step have none).
    dp_sgd_compatible: bool = True
    #: Whether clients take full-batch steps, so DP-SGD samples every record (q = 1) once per epoch (FedSGD).
    full_batch_dp_sgd: bool = False
    #: Whether the server step is post-processing of the clients' mean update and clients release nothing else, so
    #: ``--privacy cdp|ddp`` may privatise that mean (each algorithm declares it; one that declares nothing is refused).
    server_dp_compatible: bool = False
    #: Why the server step is not post-processing of the mean update (shown when ``--privacy cdp|ddp`` is refused).
    server_dp_reason: str | None = None

    @property
    def shared_names(self) -> tuple[str, ...]:
        """The parameters the server aggregates (after :meth:`setup`): every trainable one unless the algorithm keeps
        some on the clients (PrivateFL's personal transformation)."""
        return tuple(self.context.trainable)

    @property
    def proximal_mu(self) -> float:
        """μ of the proximal term (μ/2)‖ω − ω̄‖² of the local objective (FedProx), 0 without one.

        Upcycled-FL's u = μ/(μ + λ) (000 eq. 4) takes it from the algorithm it wraps.
        """
        return 0.0

    @property
    def release_clip(self) -> float | None:
        """τ: the norm every released client model is clipped to by a privatizer (output perturbation), ``None``
        when nothing bounds the releases. Canary clients take their update norm from it."""
        return None

    # -- hooks of the federation (round loop) and of privaudit train ---------------------------------------
    def start_federation(self, config: FederationConfig, ledger: PrivacyLedger) -> None:
        """Called once after :meth:`setup` and before round 1 with the run's configuration and privacy ledger.

        Algorithms that plan from the run do it here (PFA draws the budgets, calibrates every client's σ_m and
        sets the budgets in ``ledger``). Default: nothing.
        """

    def select_clients(self, training_round: int, rng: np.random.Generator) -> Sequence[int] | None:
        """The clients of training round ``training_round`` for algorithms that choose them (PFA's budget pre-check),
        drawn with the round's seeded sampling stream ``rng``; ``None`` (default): the federation samples them."""
        return None

    def client_draws(self, training_round: int, sampled: Sequence[int], epochs: Sequence[int],
                     config: FederationConfig) -> ClientDraws | None:
        """The local epochs and mini-batch orders of the sampled clients (sorted ids) when they do not come from the
        federation's seeded streams ("stragglers", "shuffle"); ``epochs`` are the ones those streams drew. The
        reference code's clock-seeded privatizers use it: there the global generator, reseeded from the clock at
        every release, drives the next client's straggler draw and shuffles
        (:mod:`privaudit.fl.privacy.clock_seed`). ``None`` (default): the federation's draws."""
        return None

    def end_federation(self, result: FederationResult) -> None:
        """After the last round, before any observer sees the end (the checkpoint writer among them): complete the
        run's record (PrivateFL's privacy modes put their budgets into ``result.ledger``). Default: nothing."""

    def manifest_sections(self) -> dict[str, Any]:
        """Sections this algorithm adds to the checkpoint manifest of its finished run, by key (PFA's participation,
        uplink and per-round aggregation report under ``"pfa"``). Default: none."""
        return {}

    def summary_rows(self, result: FederationResult) -> dict[str, Any]:
        """Rows this algorithm adds to ``privaudit train``'s summary of the finished run ``result`` (PFA: when and why
        training stopped, ε spent, uplink reduction). Default: none."""
        return {}

    def model_for(self, name: str) -> str | ModelBuilder:
        """The model this algorithm trains when the run names model ``name``: ``name`` itself (default), another
        registered name, or a :data:`ModelBuilder` for an architecture no name describes (PrivateFL puts its
        personalised transformation in front of ``name``)."""
        return name

    # -- the round -------------------------------------------------------------------------------------
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

    # -- capabilities and hooks: the wrapped algorithm's, unless a wrapper overrides them ---------------------
    @property
    def neighbouring(self) -> Neighbouring:  # type: ignore[override]
        return self.inner.neighbouring

    @property
    def accounts_own_privacy(self) -> bool:  # type: ignore[override]
        return self.inner.accounts_own_privacy

    @property
    def dp_sgd_compatible(self) -> bool:  # type: ignore[override]
        return self.inner.dp_sgd_compatible

    @property
    def full_batch_dp_sgd(self) -> bool:  # type: ignore[override]
        return self.inner.full_batch_dp_sgd

    @property
    def server_dp_compatible(self) -> bool:  # type: ignore[override]
        return self.inner.server_dp_compatible

    @property
    def server_dp_reason(self) -> str | None:  # type: ignore[override]
        return self.inner.server_dp_reason

    @property
    def shared_names(self) -> tuple[str, ...]:
        return self.inner.shared_names

    @property
    def proximal_mu(self) -> float:
        return self.inner.proximal_mu

    @property
    def release_clip(self) -> float | None:
        return self.inner.release_clip

    def start_federation(self, config: FederationConfig, ledger: PrivacyLedger) -> None:
        self.inner.start_federation(config, ledger)

    def select_clients(self, training_round: int, rng: np.random.Generator) -> Sequence[int] | None:
        return self.inner.select_clients(training_round, rng)

    def client_draws(self, training_round: int, sampled: Sequence[int], epochs: Sequence[int],
                     config: FederationConfig) -> ClientDraws | None:
        return self.inner.client_draws(training_round, sampled, epochs, config)

    def end_federation(self, result: FederationResult) -> None:
        self.inner.end_federation(result)

    def manifest_sections(self) -> dict[str, Any]:
        return self.inner.manifest_sections()

    def summary_rows(self, result: FederationResult) -> dict[str, Any]:
        return self.inner.summary_rows(result)

    def model_for(self, name: str) -> str | ModelBuilder:
        return self.inner.model_for(name)

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "hyperparameters": self.hyperparameters(), "wraps": self.inner.describe()}
