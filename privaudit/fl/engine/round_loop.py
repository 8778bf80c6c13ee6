"""The round loop of a simulated federation: one :class:`Federation` that owns a run, and :func:`run_federation`.

A :class:`Federation` runs one training run in four steps, and everything that runs a federation calls them —
:func:`run_federation` (``privaudit train``, the audits' re-runs, LiRA's shadows) and Flower's hosted strategy
(:mod:`privaudit.interop.flower.hosted`, whose ClientApps train between :meth:`~Federation.plan_round` and
:meth:`~Federation.complete_round`)::

    start()                 build the model (seeded), the trainer, set the algorithm up, open the ledger (its
                            neighbouring relation, NeighbouringRelation), the algorithm plans the run (RunPlanning:
                            PFA's budgets), observers see the run's info
    for r = 1..R:
      plan_round(r)         does round r train clients (every round, or Upcycled-FL's odd ones)? If so:
                            S ← sample clients (fixed size or Poisson), seeded by the training round's index — or the
                                algorithm's own choice (ClientSelection: PFA's budget pre-check);
                            E_i ← local epochs (stragglers run fewer) — or the algorithm's draws (ClientSchedules:
                                the reference code's clock-seeded privatizers);
                            objective_i ← algorithm.local_objective(ω̄, i)    (no data read, no training)
      trainer.train(ω̄, tasks)                                              (between the two: batched or sequential)
      complete_round(plan, outcomes)
                            result_i ← algorithm.finish(ω̄, i, outcome_i)    (privatizers act, emit privacy events)
                            ledger ← events of results                       (the federation never computes ε)
                            ω̄ ← algorithm.aggregate(r, ω̄, results)  — or algorithm.server_update(r, ω̄) (no client)
                            metrics ← evaluate ω̄ (every ``eval_every`` rounds); observers see the round
    finish()                the FederationResult; the algorithm completes the record (RunCompletion: PrivateFL's
                            budgets) before the observers (the checkpoint writer) see the end; the trainer closes

Capabilities in capitals are the algorithm's optional ones (:mod:`privaudit.fl.engine.capabilities`).

Everything random comes from one :class:`~privaudit.fl.engine.seeding.SeedTree`, so on CPU a run is repeatable
bit for bit.

Local training runs on ``device`` (:mod:`privaudit.device`; the trainer is the device boundary, everything else —
algorithms, privatizers and their noise, evaluation, the ledger, checkpoints — stays on the CPU) and, on the CPU,
optionally over ``workers`` processes (:class:`LocalHardware`); both are recorded in :attr:`RunInfo.hardware` and the
checkpoint manifest.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

import torch
from torch import nn

from privaudit.accounting.ledger import PrivacyLedger
from privaudit.data.base import FederatedDataset
from privaudit.device import default_device, device_record, resolve_device
from privaudit.errors import InvalidParameterError
from privaudit.executor import threads_per_worker
from privaudit.fl.engine.algorithm import Algorithm, ClientContext, ClientResult, SetupContext
from privaudit.fl.engine.capabilities import (
    ClientSchedules,
    ClientSelection,
    NeighbouringRelation,
    PersonalModels,
    RunCompletion,
    RunPlanning,
    RunReport,
)
from privaudit.fl.engine.config import FederationConfig
from privaudit.fl.engine.evaluation import Evaluator
from privaudit.fl.engine.local_solver import LocalOutcome, LocalTask, Trainer
from privaudit.fl.engine.metrics import RoundMetrics
from privaudit.fl.engine.params import State, model_state
from privaudit.fl.engine.sampling import local_epochs, sample_clients
from privaudit.fl.engine.seeding import SEED_SCHEME, SeedTree, seeded_torch_global
from privaudit.fl.engine.trainer import ClientTrainer
from privaudit.models import build_model
from privaudit.progress import progress_bar


@dataclass(frozen=True)
class RunInfo:
    """What a run is, known before round 1 (written to the checkpoint manifest)."""

    config: FederationConfig
    algorithm: dict[str, Any]
    dataset: dict[str, Any]
    model_name: str | None
    model: nn.Module
    initial_state: State
    execution_mode: str
    seeds: dict[str, Any]
    #: where local training ran: ``{"device": "cpu", "device_name": "cpu (2 cores, x86_64)", "workers": 1, ...}``
    hardware: dict[str, Any] = field(default_factory=dict)


class RoundObserver:
    """Hooks into the round loop; every method is optional."""

    def on_start(self, info: RunInfo) -> None:
        """Before round 1, after the initial model exists."""

    def on_round_start(self, round: int, trains_clients: bool) -> None:
        """Before anything of round ``round`` happens."""

    def on_round_end(self, round: int, state: State, results: Sequence[ClientResult], metrics: RoundMetrics) -> None:
        """After aggregation (or the server-only update) and evaluation."""

    def on_end(self, result: FederationResult) -> None:
        """After the last round."""


@dataclass
class FederationResult:
    state: State
    history: list[RoundMetrics]
    ledger: PrivacyLedger
    info: RunInfo
    seconds: float
    personal_states: dict[int, State] = field(default_factory=dict)
    #: The trained algorithm (with its wrappers): its state after the last round, and its report hooks.
    algorithm: Algorithm | None = None

    @property
    def final_accuracy(self) -> float | None:
        for metrics in reversed(self.history):
            if metrics.test_accuracy is not None:
                return metrics.test_accuracy
        return None

    def summary_rows(self) -> dict[str, Any]:
        """The rows the trained algorithm adds to ``privaudit train``'s summary (:class:`RunReport`; none by default)."""
        return {} if self.algorithm is None else RunReport.of(self.algorithm).summary_rows(self)


@dataclass(frozen=True)
class RoundPlan:
    """Round ``round`` before any client trains: whether it trains, and each sampled client's context and task."""

    round: int
    trains: bool
    #: ``time.perf_counter()`` when the round began (its metrics' ``seconds``)
    started: float
    #: the global model ω̄ the round starts from
    global_state: State
    #: the index of this round among the rounds that train clients (keys the random streams); 0 if it trains none
    training_round: int = 0
    contexts: tuple[ClientContext, ...] = ()
    tasks: tuple[LocalTask, ...] = ()
    #: whether the algorithm drew the epochs and mini-batch orders itself (:class:`ClientSchedules`)
    own_draws: bool = False

    @property
    def sampled(self) -> list[int]:
        return [c.client_id for c in self.contexts]

    @property
    def epochs(self) -> list[int]:
        return [c.epochs for c in self.contexts]


class TrainerSource(Protocol):
    """Builds a federation's trainer for its model and says where it trains (the manifest's ``hardware``)."""

    def build(self, module: nn.Module, dataset: FederatedDataset, config: FederationConfig,
              seeds: SeedTree) -> tuple[Trainer, dict[str, Any]]: ...


@dataclass(frozen=True)
class LocalHardware:
    """Local training in this process: on ``device`` (``cpu``, ``cuda``, ``cuda:N``, ``auto``; default
    :func:`privaudit.device.default_device`, i.e. the CPU unless ``PRIVAUDIT_DEVICE`` names another), over ``workers``
    CPU processes. ``make_trainer`` takes :class:`~privaudit.fl.engine.trainer.ClientTrainer`'s arguments and returns
    the trainer to use (LiRA's lockstep shadows, :mod:`attacks.membership.batched_shadows`); default: a ClientTrainer.
    """

    device: Any = None
    workers: int = 1
    make_trainer: Callable[..., Trainer] | None = None

    def build(self, module: nn.Module, dataset: FederatedDataset, config: FederationConfig,
              seeds: SeedTree) -> tuple[Trainer, dict[str, Any]]:
        workers = int(self.workers)
        resolved = resolve_device(default_device() if self.device is None else self.device)  # audit --device: its trials
        options: dict[str, Any] = {"device": resolved}
        if self.make_trainer is None or workers != 1:
            options["workers"] = workers
        trainer = (self.make_trainer or ClientTrainer)(module, dataset.input_shape, dataset.num_classes, config.local,
                                                       config.execution, seeds, **options)
        if workers > 1:
            trainer.share_clients(dataset.clients)  # the worker pool gets every client's data once, when it starts
        threads = threads_per_worker(workers) if workers > 1 else torch.get_num_threads()
        return trainer, {**device_record(resolved), "workers": workers, "torch_threads": threads}


def _initial_model(model: str | nn.Module, dataset: FederatedDataset, seeds: SeedTree) -> tuple[nn.Module, str | None]:
    if isinstance(model, nn.Module):
        return model, None
    built = seeded_torch_global(seeds.integer("model-init"), lambda: build_model(model, dataset.input_shape, dataset.num_classes))
    return built, str(model)


def input_bounds(dataset: FederatedDataset) -> tuple[torch.Tensor, torch.Tensor] | None:
    """(low, high) of the dataset's inputs in model space: its data range, standardised per channel if it was."""
    if dataset.data_range is None:
        return None
    low, high = (float(v) for v in dataset.data_range)
    if dataset.normalization is None:
        return torch.tensor(low), torch.tensor(high)
    mean, std = (torch.tensor([float(v) for v in values]) for values in dataset.normalization)
    shape = (-1,) + (1,) * (len(dataset.input_shape) - 1)
    return ((low - mean) / std).reshape(shape), ((high - mean) / std).reshape(shape)


def _weighted_loss(results: Sequence[ClientResult]) -> float | None:
    total = sum(r.num_examples for r in results)
    if not results or total == 0:
        return None
    return sum(r.train_loss * r.num_examples for r in results) / total


def _round_status(metrics: RoundMetrics) -> str:
    """The short text after the round counter: test accuracy and training loss when evaluated."""
    status = "" if metrics.test_accuracy is None else f"acc {metrics.test_accuracy:.3f}"
    if metrics.train_loss is not None:
        status += f" loss {metrics.train_loss:.3f}"
    return status


class Federation:
    """One run of ``algorithm`` on ``dataset`` for ``config.rounds`` iterations (see the module docstring).

    ``model`` is a model name (built by :func:`privaudit.models.build_model` with a seeded initialisation) or a
    module whose current weights are the initial global model; ``trainers`` builds the trainer (default
    :class:`LocalHardware`: a :class:`~privaudit.fl.engine.trainer.ClientTrainer` on the default device).
    """

    def __init__(self, dataset: FederatedDataset, model: str | nn.Module, algorithm: Algorithm, config: FederationConfig,
                 *, observers: Sequence[RoundObserver] = (), trainers: TrainerSource | None = None) -> None:
        if not isinstance(config, FederationConfig):
            raise InvalidParameterError("config must be a FederationConfig")
        self.dataset, self.algorithm, self.config = dataset, algorithm, config
        self.observers = list(observers)
        self.seeds = SeedTree(config.seed)
        self.history: list[RoundMetrics] = []
        self._model = model
        self._trainers = LocalHardware() if trainers is None else trainers
        self._started = time.perf_counter()
        self._training_round = 0

    # -- start -----------------------------------------------------------------------------------------
    def set_up(self) -> tuple[nn.Module, dict[str, Any]]:
        """The model, the trainer and the algorithm set up (what a client process needs); returns the module and
        where it trains."""
        module, self.model_name = _initial_model(self._model, self.dataset, self.seeds)
        module.train()
        self.trainer, hardware = self._trainers.build(module, self.dataset, self.config, self.seeds)
        self.state = model_state(module)
        self.algorithm.setup(SetupContext(
            model=module, initial_state={k: v.clone() for k, v in self.state.items()},
            trainable=tuple(name for name, p in module.named_parameters() if p.requires_grad),
            input_shape=tuple(self.dataset.input_shape), num_clients=self.dataset.num_clients,
            client_sizes=tuple(int(n) for n in self.dataset.client_sizes), local_lr=self.config.local.lr,
            local_momentum=self.config.local.momentum, seeds=self.seeds, trainer=self.trainer,
            input_bounds=input_bounds(self.dataset)))
        return module, hardware

    def start(self) -> RunInfo:
        """Set up, open the ledger, let the algorithm plan the run and the observers see its start."""
        module, hardware = self.set_up()
        self.evaluator = Evaluator(module, self.dataset, train_loss=self.config.eval_train_loss)
        self.ledger = PrivacyLedger(neighbouring=NeighbouringRelation.of(self.algorithm).neighbouring)
        RunPlanning.of(self.algorithm).start_federation(self.config, self.ledger)  # PFA: budgets into the ledger
        self.info = RunInfo(config=self.config, algorithm=self.algorithm.describe(), dataset=self.dataset.describe(),
                            model_name=self.model_name, model=module, initial_state={k: v.clone() for k, v in self.state.items()},
                            execution_mode=self.trainer.mode, seeds={"seed": self.config.seed, "scheme": SEED_SCHEME},
                            hardware=hardware)
        for observer in self.observers:
            observer.on_start(self.info)
        return self.info

    # -- rounds ----------------------------------------------------------------------------------------
    def plan_round(self, round_: int) -> RoundPlan:
        """Everything of round ``round_`` before local training: whether it trains, its clients, epochs and tasks."""
        started = time.perf_counter()
        trains = self.algorithm.trains_clients(round_)
        for observer in self.observers:
            observer.on_round_start(round_, trains)
        if not trains:
            return RoundPlan(round_, False, started, self.state)
        self._training_round += 1
        training_round = self._training_round
        sampled = self._sample(training_round)
        epochs = [int(e) for e in local_epochs(
            len(sampled), self.config.local.epochs, self.config.stragglers, self.seeds.numpy("stragglers", training_round))]
        draws = ClientSchedules.of(self.algorithm).client_draws(training_round, sampled, epochs, self.config)
        if draws is not None:
            epochs = [int(e) for e in draws.epochs]
        schedules = draws.schedules if draws is not None else (None,) * len(sampled)
        contexts = tuple(ClientContext(round_, training_round, cid, self.dataset.clients[cid], ep, self.seeds)
                         for cid, ep in zip(sampled, epochs, strict=True))
        tasks = tuple(LocalTask(c.client_id, c.data, c.epochs, self.algorithm.local_objective(self.state, c), schedule)
                      for c, schedule in zip(contexts, schedules, strict=True))
        return RoundPlan(round_, True, started, self.state, training_round, contexts, tasks, own_draws=draws is not None)

    def _sample(self, training_round: int) -> list[int]:
        rng = self.seeds.numpy("sampling", training_round)
        chosen = ClientSelection.of(self.algorithm).select_clients(training_round, rng)  # PFA's budget pre-check
        if chosen is not None:
            return sorted(int(c) for c in chosen)
        return [int(c) for c in sample_clients(self.dataset.num_clients, self.config.clients_per_round, self.config.sampling, rng)]

    def complete_round(self, plan: RoundPlan, outcomes: Sequence[LocalOutcome]) -> RoundMetrics:
        """The round after local training: releases, privacy events into the ledger, the new global model, metrics."""
        results: list[ClientResult] = []
        if plan.trains:
            results = [self.algorithm.finish(plan.global_state, c, o) for c, o in zip(plan.contexts, outcomes, strict=True)]
            for result in results:
                self.ledger.record_all(result.events)
            self.state = self.algorithm.aggregate(plan.round, plan.global_state, results)
        else:
            self.state = self.algorithm.server_update(plan.round, plan.global_state)
        metrics = self._metrics(plan, results)
        self.history.append(metrics)
        for observer in self.observers:
            observer.on_round_end(plan.round, self.state, results, metrics)
        return metrics

    def _metrics(self, plan: RoundPlan, results: Sequence[ClientResult]) -> RoundMetrics:
        evaluated = plan.round % self.config.eval_every == 0 or plan.round == self.config.rounds
        personal = PersonalModels.of(self.algorithm).personal_states() if evaluated else None
        evaluation = self.evaluator.evaluate(self.state, personal) if evaluated else None
        sampled, epochs = plan.sampled, plan.epochs
        return RoundMetrics(
            round=plan.round,
            trained=plan.trains,
            clients=sampled,
            epochs=epochs,
            stragglers=[c for c, e in zip(sampled, epochs, strict=True) if e < self.config.local.epochs],
            train_loss=_weighted_loss(results),
            test_accuracy=evaluation.test_accuracy if evaluation else None,
            test_loss=evaluation.test_loss if evaluation else None,
            per_client_accuracy=evaluation.per_client_accuracy if evaluation else None,
            personalised_accuracy=evaluation.personalised_accuracy if evaluation else None,
            global_train_loss=evaluation.train_loss if evaluation else None,
            global_train_accuracy=evaluation.train_accuracy if evaluation else None,
            seconds=time.perf_counter() - plan.started,
        )

    # -- end -------------------------------------------------------------------------------------------
    def finish(self) -> FederationResult:
        """The trained federation; the algorithm completes its record before the observers see the end."""
        self.trainer.close()  # stop the worker pool (--workers): an audit trains many federations in one process
        result = FederationResult(
            state=self.state,
            history=self.history,
            ledger=self.ledger,
            info=replace(self.info, execution_mode=self.trainer.mode),  # what actually ran (known only after training)
            seconds=time.perf_counter() - self._started,
            personal_states=PersonalModels.of(self.algorithm).personal_states(),
            algorithm=self.algorithm,
        )
        RunCompletion.of(self.algorithm).end_federation(result)  # before any observer (the checkpoint writer) sees it
        for observer in self.observers:
            observer.on_end(result)
        return result

    @contextmanager
    def closing(self) -> Iterator[None]:
        """Stop the trainer's worker processes (if it has any) when the rounds end, however they end."""
        try:
            yield
        finally:
            self.trainer.close()


def run_federation(
    dataset: FederatedDataset,
    model: str | nn.Module,
    algorithm: Algorithm,
    config: FederationConfig,
    *,
    observers: Sequence[RoundObserver] = (),
    progress: bool = True,
    make_trainer: Callable[..., Trainer] | None = None,
    device: Any = None,
    workers: int = 1,
) -> FederationResult:
    """Train ``algorithm`` on ``dataset`` for ``config.rounds`` iterations and return the trained federation.

    ``model``: a name or a module (:class:`Federation`); ``device``, ``workers`` and ``make_trainer``: where and by
    what clients train (:class:`LocalHardware`).
    """
    federation = Federation(dataset, model, algorithm, config, observers=observers,
                            trainers=LocalHardware(device, workers, make_trainer))
    federation.start()
    with progress_bar(algorithm.name, config.rounds, enabled=progress) as bar, federation.closing():
        for round_ in range(1, config.rounds + 1):
            plan = federation.plan_round(round_)
            outcomes = federation.trainer.train(plan.global_state, list(plan.tasks), plan.training_round) if plan.trains else []
            bar.advance(status=_round_status(federation.complete_round(plan, outcomes)))
    return federation.finish()
