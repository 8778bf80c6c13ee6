"""The round loop of a simulated federation.

Before round 1 the algorithm is set up and started (``start_federation(config, ledger)``, with the run's ledger
for :attr:`~privaudit.fl.algorithms.base.Algorithm.neighbouring`); then for each iteration r = 1..R::

    if algorithm.trains_clients(r):                      # every round, or Upcycled-FL's odd rounds
        S  ← sample clients (fixed size or Poisson)      # seeded by the training-round index;
             (or the algorithm's own choice, select_clients: PFA's budget pre-check, set up by start_federation)
        E_i ← local epochs (stragglers run fewer)
        objectives ← algorithm.local_objective(ω̄, i)    # no data read
        outcomes   ← trainer.train(ω̄, tasks)            # batched on stacked parameters, or sequential
        results    ← algorithm.finish(ω̄, i, outcome_i)  # privatizers act here and emit privacy events
        ledger.record(events of results)                  # the federation never computes ε
        ω̄ ← algorithm.aggregate(r, ω̄, results)
    else:
        ω̄ ← algorithm.server_update(r, ω̄)               # no client, no data
    metrics ← evaluate ω̄ (every ``eval_every`` rounds); observers (checkpoint writer, ...) see the round

and after the last round ``algorithm.end_federation(result)`` completes the record before the observers see the end.

Everything random comes from one :class:`~privaudit.fl.engine.seeding.SeedTree`, so on CPU a run is repeatable
bit for bit.

Local training runs on ``device`` (:mod:`privaudit.device`; the trainer is the device boundary, everything else —
algorithms, privatizers and their noise, evaluation, the ledger, checkpoints — stays on the CPU) and, on the CPU,
optionally over ``workers`` processes; both are recorded in :attr:`RunInfo.hardware` and the checkpoint manifest.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any

import torch
from torch import nn

from privaudit.accounting.ledger import PrivacyLedger
from privaudit.data.base import FederatedDataset
from privaudit.errors import InvalidParameterError
from privaudit.fl.algorithms.base import Algorithm, ClientContext, ClientResult, SetupContext
from privaudit.fl.engine.config import FederationConfig
from privaudit.fl.engine.evaluation import Evaluator
from privaudit.fl.engine.metrics import RoundMetrics
from privaudit.fl.engine.params import State, model_state
from privaudit.fl.engine.sampling import local_epochs, sample_clients
from privaudit.fl.engine.seeding import SEED_SCHEME, SeedTree, seeded_torch_global
from privaudit.fl.engine.trainer import ClientTrainer, LocalTask
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


def _build_model(model: str | nn.Module, dataset: FederatedDataset, seeds: SeedTree) -> tuple[nn.Module, str | None]:
    if isinstance(model, nn.Module):
        return model, None
    from privaudit.models import build_model

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


@contextmanager
def _closing(trainer) -> Iterator[None]:
    """Stop the trainer's worker processes (if it has any) when the round loop ends, however it ends."""
    try:
        yield
    finally:
        close = getattr(trainer, "close", None)
        if close is not None:
            close()


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


def run_federation(
    dataset: FederatedDataset,
    model: str | nn.Module,
    algorithm: Algorithm,
    config: FederationConfig,
    *,
    observers: Sequence[RoundObserver] = (),
    progress: bool = True,
    make_trainer: Callable[..., ClientTrainer] | None = None,
    device: Any = None,
    workers: int = 1,
) -> FederationResult:
    """Train ``algorithm`` on ``dataset`` for ``config.rounds`` iterations and return the trained federation.

    ``model`` is a model name (built by :func:`privaudit.models.build_model` with a seeded initialisation)
    or a module whose current weights are the initial global model. ``make_trainer`` takes
    :class:`~privaudit.fl.engine.trainer.ClientTrainer`'s arguments and returns the trainer to use (LiRA's shadow
    federations pass one that trains many federations' clients as lanes of one stacked run,
    :mod:`attacks.membership.batched_shadows`); default: a ``ClientTrainer``. ``device`` (``cpu``, ``cuda``,
    ``cuda:N``, ``auto``; default :func:`privaudit.device.default_device`, i.e. the CPU unless ``PRIVAUDIT_DEVICE``
    names another) is where clients train, ``workers`` the CPU processes they train in; both are
    passed to ``make_trainer`` as keywords when given.
    """
    if not isinstance(config, FederationConfig):
        raise InvalidParameterError("config must be a FederationConfig")
    started = time.perf_counter()
    seeds = SeedTree(config.seed)
    module, model_name = _build_model(model, dataset, seeds)
    module.train()
    from privaudit.device import default_device, device_record, resolve_device
    from privaudit.executor import threads_per_worker

    if device is None:
        device = default_device()  # privaudit audit --device: its trials' federations
    resolved = resolve_device(device)
    hardware_options: dict[str, Any] = {}
    if make_trainer is None or device is not None:
        hardware_options["device"] = resolved
    if make_trainer is None or int(workers) != 1:
        hardware_options["workers"] = int(workers)
    trainer = (make_trainer or ClientTrainer)(module, dataset.input_shape, dataset.num_classes, config.local, config.execution, seeds,
                                              **hardware_options)
    if int(workers) > 1:
        trainer.share_clients(dataset.clients)  # the worker pool gets every client's data once, when it starts
    hardware = {**device_record(resolved), "workers": int(workers),
                "torch_threads": threads_per_worker(int(workers)) if int(workers) > 1 else torch.get_num_threads()}
    state = model_state(module)
    trainable = tuple(name for name, p in module.named_parameters() if p.requires_grad)
    algorithm.setup(
        SetupContext(
            model=module,
            initial_state={k: v.clone() for k, v in state.items()},
            trainable=trainable,
            input_shape=tuple(dataset.input_shape),
            num_clients=dataset.num_clients,
            client_sizes=tuple(int(n) for n in dataset.client_sizes),
            local_lr=config.local.lr,
            local_momentum=config.local.momentum,
            seeds=seeds,
            trainer=trainer,
            input_bounds=input_bounds(dataset),
        )
    )
    evaluator = Evaluator(module, dataset, train_loss=config.eval_train_loss)
    ledger = PrivacyLedger(neighbouring=algorithm.neighbouring)
    algorithm.start_federation(config, ledger)  # algorithms that plan from the run and set budgets in its ledger (PFA)
    info = RunInfo(
        config=config,
        algorithm=algorithm.describe(),
        dataset=dataset.describe(),
        model_name=model_name,
        model=module,
        initial_state={k: v.clone() for k, v in state.items()},
        execution_mode=trainer.mode,
        seeds={"seed": config.seed, "scheme": SEED_SCHEME},
        hardware=hardware,
    )
    for observer in observers:
        observer.on_start(info)

    history: list[RoundMetrics] = []
    training_round = 0
    with progress_bar(algorithm.name, config.rounds, enabled=progress) as bar, _closing(trainer):
        for round_ in range(1, config.rounds + 1):
            round_started = time.perf_counter()
            trains = algorithm.trains_clients(round_)
            for observer in observers:
                observer.on_round_start(round_, trains)
            results: list[ClientResult] = []
            sampled: list[int] = []
            epochs: list[int] = []
            if trains:
                training_round += 1
                rng = seeds.numpy("sampling", training_round)
                chosen = algorithm.select_clients(training_round, rng)  # PFA's budget pre-check chooses its own
                if chosen is not None:
                    sampled = sorted(int(c) for c in chosen)
                else:
                    sampled = [int(c) for c in sample_clients(dataset.num_clients, config.clients_per_round, config.sampling, rng)]
                epochs = [int(e) for e in local_epochs(
                    len(sampled), config.local.epochs, config.stragglers, seeds.numpy("stragglers", training_round)
                )]
                # the reference code's clock-seeded privatizers draw epochs and shuffles from their clock seeds
                draws = algorithm.client_draws(training_round, sampled, epochs, config)
                if draws is not None:
                    epochs = [int(e) for e in draws.epochs]
                schedules = draws.schedules if draws is not None else (None,) * len(sampled)
                contexts = [
                    ClientContext(round_, training_round, cid, dataset.clients[cid], ep, seeds)
                    for cid, ep in zip(sampled, epochs, strict=True)
                ]
                tasks = [LocalTask(c.client_id, c.data, c.epochs, algorithm.local_objective(state, c), schedule)
                         for c, schedule in zip(contexts, schedules, strict=True)]
                outcomes = trainer.train(state, tasks, training_round)
                results = [algorithm.finish(state, c, o) for c, o in zip(contexts, outcomes, strict=True)]
                for result in results:
                    ledger.record_all(result.events)
                state = algorithm.aggregate(round_, state, results)
            else:
                state = algorithm.server_update(round_, state)
            metrics = _round_metrics(round_, trains, sampled, epochs, config, results, evaluator, algorithm, state, round_started)
            history.append(metrics)
            for observer in observers:
                observer.on_round_end(round_, state, results, metrics)
            bar.advance(status=_round_status(metrics))

    result = FederationResult(
        state=state,
        history=history,
        ledger=ledger,
        info=replace(info, execution_mode=trainer.mode),  # what actually ran (known only after training)
        seconds=time.perf_counter() - started,
        personal_states=algorithm.personal_states(),
        algorithm=algorithm,
    )
    algorithm.end_federation(result)  # completes the record before any observer (the checkpoint writer) sees it
    for observer in observers:
        observer.on_end(result)
    close = getattr(trainer, "close", None)
    if close is not None:  # stop the worker pool (--workers): an audit trains many federations in one process
        close()
    return result


def _round_metrics(
    round_: int,
    trains: bool,
    sampled: list[int],
    epochs: list[int],
    config: FederationConfig,
    results: list[ClientResult],
    evaluator: Evaluator,
    algorithm: Algorithm,
    state: State,
    started: float,
) -> RoundMetrics:
    evaluated = round_ % config.eval_every == 0 or round_ == config.rounds
    evaluation = evaluator.evaluate(state, algorithm.personal_states()) if evaluated else None
    return RoundMetrics(
        round=round_,
        trained=trains,
        clients=sampled,
        epochs=epochs,
        stragglers=[c for c, e in zip(sampled, epochs, strict=True) if e < config.local.epochs],
        train_loss=_weighted_loss(results),
        test_accuracy=evaluation.test_accuracy if evaluation else None,
        test_loss=evaluation.test_loss if evaluation else None,
        per_client_accuracy=evaluation.per_client_accuracy if evaluation else None,
        personalised_accuracy=evaluation.personalised_accuracy if evaluation else None,
        global_train_loss=evaluation.train_loss if evaluation else None,
        global_train_accuracy=evaluation.train_accuracy if evaluation else None,
        seconds=time.perf_counter() - started,
    )

