"""Runs the local training of a round's sampled clients: batched on stacked parameters, or one by one.

The *sequential* trainer is the reference: one client at a time, ``functional_call`` on the model, any
model (buffers, dropout). The *batched* trainer puts every sampled client in a lane of stacked parameters
(:mod:`privaudit.fl.engine.stacked`) and runs the same optimiser loop (:func:`~privaudit.fl.engine.local_training.run_lanes`)
once for all of them. Both draw each client's mini-batch order from the same seeded stream
(``"shuffle"``, training round, client) and, for dropout, each client's masks from the same seeded stream
(``"dropout"``, training round, client), so for the same seed they compute the same local models up to
floating-point summation order.

**Device.** The trainer is the device boundary of a federation: it takes the global state and the objectives on
the CPU, trains on its device (a private copy of the model, the clients' data uploaded once per client, schedules
and dropout masks moved there) and hands back CPU tensors, so algorithms, privatizers, noise draws, ledgers and
checkpoints never depend on where training ran. On the CPU nothing is copied (``.to("cpu")`` of a CPU tensor is
the tensor itself), so ``device="cpu"`` is the default bit for bit.

**Workers.** With ``workers > 1`` (CPU only) a round's clients are split into ``workers`` groups of about equal
work (dealt out by decreasing step count): the main process trains the first group itself while a persistent pool
of ``workers − 1`` spawned processes (:class:`privaudit.executor.WorkerPool`) trains the others, every process with
``cores // workers`` torch threads. Clients trained one after another are trained one after another within their
group; stacked *convolutional* lanes are trained batched, one stacked run per group. Dense stacked models
(logistic regression, MLPs) stay batched in the main process: their steps are too cheap to share. Every client's
data go to the workers once, when the pool starts (:meth:`ClientTrainer.share_clients`, called by the round loop);
a round sends only the global state and the tasks' settings (a task whose data object is not the shared one is
sent whole). A client trained alone depends only on the
global state, its task and the seed tree, never on which process runs it, so sequential local models are bit for
bit those of ``workers=1`` when each process uses the same number of torch threads (the default: one thread per
process on a 2-core machine with 2 workers, and ``privaudit train`` runs its main process with ``--threads 1``).
A lane of a stacked run is computed by the same per-lane operations whatever group it is in
(``tests/fl/test_workers.py`` checks the models agree; where a BLAS kernel chose a different blocking for a smaller
batch of lanes they would differ in float32 rounding only).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import replace

import numpy as np
import torch
from torch import nn

from privaudit.data.base import ClientData
from privaudit.device import resolve_device
from privaudit.errors import DeviceUnavailableError, InvalidParameterError, PrivauditError
from privaudit.executor import WorkerPool, threads_per_worker
from privaudit.fl.engine.config import Execution, LocalTrainingConfig
from privaudit.fl.engine.local_solver import ClientSolver, LaneSolver, LocalOutcome, LocalTask
from privaudit.fl.engine.local_training import Schedule, make_schedule, run_lanes
from privaudit.fl.engine.oracles import SequentialOracle, StackedOracle, client_tensors, lane_batches
from privaudit.fl.engine.params import State
from privaudit.fl.engine.seeding import SeedTree, seeded_torch_global
from privaudit.fl.engine.stacked import StackedModel, build_stacked_model


def _to(state: State | None, device: torch.device) -> State | None:
    """``state`` on ``device`` (the same tensors when they are there already)."""
    return None if state is None else {k: v.to(device) for k, v in state.items()}


def _task_to(task: LocalTask, device: torch.device) -> LocalTask:
    objective = task.objective
    if device.type == "cpu" or (objective.anchor is None and objective.linear is None):
        return task
    return replace(task, objective=replace(objective, anchor=_to(objective.anchor, device), linear=_to(objective.linear, device)))


def _outcome_to_cpu(outcome: LocalOutcome) -> LocalOutcome:
    cpu = torch.device("cpu")
    outcome.state = _to(outcome.state, cpu)
    outcome.personal = _to(outcome.personal, cpu)
    return outcome


class ClientTrainer:
    """Trains the sampled clients of a round; chooses batched or sequential execution once per model."""

    def __init__(
        self,
        model: nn.Module,
        input_shape: tuple[int, ...],
        num_classes: int,
        local: LocalTrainingConfig,
        execution: Execution,
        seeds: SeedTree,
        *,
        device: torch.device | str | None = None,
        workers: int = 1,
        stacked_model: Callable[[nn.Module, tuple[int, ...]], StackedModel | None] | None = None,
    ) -> None:
        """``stacked_model(model, input_shape)`` replaces :func:`build_stacked_model` (default) — e.g. LiRA's lockstep
        builds the stacked form once for shadows that share one architecture."""
        self.device = resolve_device(device)
        self.workers = int(workers)
        if self.workers < 1:
            raise InvalidParameterError(f"workers must be at least 1, got {workers}")
        if self.workers > 1 and self.device.type != "cpu":
            raise InvalidParameterError(f"workers > 1 parallelise CPU training across processes; on {self.device} train with workers=1")
        # a private copy on an accelerator: the federation's module (evaluation, algorithms) stays on the CPU
        self.model = model if self.device.type == "cpu" else copy.deepcopy(model).to(self.device)
        self.model.train()
        self._used: set[str] = set()  # how rounds were trained so far: "batched", "sequential", "pool" (see mode)
        self._device_data: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}
        self._pool = None
        self._pool_payload = (model, tuple(input_shape), int(num_classes), local, seeds, execution)
        self._pool_data: dict[int, ClientData] = {}  # client data the workers hold since the pool started
        self.num_classes = int(num_classes)
        self.local = local
        self.seeds = seeds
        self.names = tuple(name for name, p in model.named_parameters() if p.requires_grad)
        build = build_stacked_model if stacked_model is None else stacked_model
        self.stacked = None if execution is Execution.SEQUENTIAL else build(model, tuple(input_shape))
        if execution is Execution.BATCHED and self.stacked is None:
            raise InvalidParameterError(
                "this model cannot be trained batched (it has buffers, random layers or operations without a stacked form); "
                "use execution 'sequential' or 'auto'"
            )

    def tensors(self, data: ClientData, client_id: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """A client's training inputs and labels on the trainer's device (uploaded once per client off the CPU)."""
        if self.device.type == "cpu":
            return client_tensors(data)
        key = id(data) if client_id is None else int(client_id)
        cached = self._device_data.get(key)
        if cached is None or cached[1].shape[0] != len(data.y_train):
            x, y = client_tensors(data)
            cached = self._device_data[key] = (x.to(self.device), y.to(self.device))
        return cached

    def share_clients(self, clients: Sequence[ClientData]) -> None:
        """The federation's clients (client id = index): a worker pool started later receives all their data once.

        Without this, the pool receives the data of the first round's clients and later rounds send any other client
        whole. A task whose data is not the object shared here (subsampled, replaced) is always sent whole.
        """
        if self._pool is None:
            self._pool_data = dict(enumerate(clients))

    def close(self) -> None:
        """Stop the worker pool (if one was started)."""
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()

    @property
    def mode(self) -> str:
        """How clients were actually trained: a solver without a stacked form (DP-SGD, FedReg, FedCurv, exact
        minimisation, mixed objectives) runs per client even when the model could be stacked."""
        workers = f" on {self.workers} worker processes" if self.workers > 1 and "pool" in self._used else ""
        if self.stacked is None:
            return "sequential" + workers
        batched = f"batched ({self.stacked.kind})"
        used = self._used
        if used - {"pool"} == {"sequential"}:
            return "sequential (the local solver has no stacked form)" + workers
        if used - {"pool"} == {"batched", "sequential"}:
            return f"{batched} and sequential" + workers
        return batched + workers

    def schedule(self, task: LocalTask, training_round: int) -> Schedule:
        """The task's own schedule, or its seeded one: ``epochs`` shuffled passes from ("shuffle", round, client)."""
        if task.schedule is not None:
            return task.schedule
        rng = self.seeds.numpy("shuffle", training_round, task.client_id)
        return make_schedule(task.data.num_train, task.epochs, self.local.batch_size, rng)

    def train(self, global_state: State, tasks: Sequence[LocalTask], training_round: int) -> list[LocalOutcome]:
        try:
            return self._train(global_state, tasks, training_round)
        except ValueError as exc:  # torch's BatchNorm on a batch with one value per channel: a setting problem
            if isinstance(exc, PrivauditError) or "more than 1 value per channel" not in str(exc):
                raise
            raise InvalidParameterError(
                "batch normalisation needs more than one value per channel in every training batch; a client's batch "
                "has a single example with a 1×1 feature map there: use a larger batch size or a model without BatchNorm"
            ) from None

    def _train(self, global_state: State, tasks: Sequence[LocalTask], training_round: int) -> list[LocalOutcome]:
        if not tasks:
            return []
        solver = tasks[0].objective.solver
        uniform = all(t.objective.solver == solver and t.objective.prox == tasks[0].objective.prox for t in tasks)
        uniform = uniform and len({t.objective.linear is None for t in tasks}) == 1
        used = self._used
        device = self.device
        if self.stacked is not None and uniform and isinstance(solver, LaneSolver):
            used.add("batched")
            if self.workers > 1 and len(tasks) > 1 and self.stacked.convolutional:
                used.add("pool")
                return self._train_in_pool(global_state, tasks, training_round, batched=True)
            tasks = [_task_to(t, device) for t in tasks]
            return [_outcome_to_cpu(o) for o in self._train_batched(_to(global_state, device), tasks, training_round)]
        used.add("sequential")
        if self.workers > 1 and len(tasks) > 1:
            used.add("pool")
            return self._train_in_pool(global_state, tasks, training_round)
        on_device = _to(global_state, device)
        return [_outcome_to_cpu(self.train_one(on_device, _task_to(task, device), training_round)) for task in tasks]

    def _train_in_pool(self, global_state: State, tasks: Sequence[LocalTask], training_round: int, *,
                       batched: bool = False) -> list[LocalOutcome]:
        """The tasks in ``workers`` groups of about equal step counts: group 0 in this process, the others in the pool,
        each group one by one (``batched=False``) or as one stacked run."""
        threads = threads_per_worker(self.workers)
        if self._pool is None:
            self._pool_data = self._pool_data or {t.client_id: t.data for t in tasks}
            self._pool = WorkerPool(self.workers - 1, _worker_setup, (*self._pool_payload, self._pool_data), threads=threads)
        steps = [self.schedule(t, training_round).steps for t in tasks]
        order = sorted(range(len(tasks)), key=lambda i: -steps[i])
        groups = [sorted(order[w::self.workers]) for w in range(self.workers)]
        groups = [g for g in groups if g]
        state = _numpy_state(global_state)

        def shipped(task: LocalTask) -> LocalTask:  # the workers hold this client's data already
            return replace(task, data=None) if self._pool_data.get(task.client_id) is task.data else task

        def local() -> list[LocalOutcome]:
            previous = torch.get_num_threads()
            torch.set_num_threads(threads)  # as many as each worker, so a client's result is the same in any process
            try:
                return _train_group(self, global_state, [tasks[i] for i in groups[0]], training_round, batched)
            finally:
                torch.set_num_threads(previous)

        items = [(state, [shipped(tasks[i]) for i in group], training_round, batched) for group in groups[1:]]
        answers, mine = self._pool.map_alongside(_worker_train, items, local)
        outcomes: dict[int, LocalOutcome] = dict(zip(groups[0], mine, strict=True))
        for group, answer in zip(groups[1:], answers, strict=True):
            for i, outcome in zip(group, answer, strict=True):
                outcomes[i] = _from_numpy_outcome(outcome)
        return [outcomes[i] for i in range(len(tasks))]

    # -- sequential (reference) ------------------------------------------------------------------
    def train_one(self, global_state: State, task: LocalTask, training_round: int) -> LocalOutcome:
        """One client's local training by the sequential (reference) trainer: a client solver runs the job itself
        (:class:`~privaudit.fl.engine.local_solver.ClientSolver`), a lane solver runs as one lane of the optimiser."""
        objective = task.objective
        solver = objective.solver
        fixed = {k: v.clone() for k, v in global_state.items() if k not in self.names}
        if isinstance(solver, ClientSolver):
            if self.local.double_softmax:
                raise InvalidParameterError(f"double softmax applies to the local SGD of the federation; the "
                                            f"{solver.kind} solver computes its own loss")
            if self.device.type != "cpu" and not solver.device_ready:
                raise DeviceUnavailableError(f"the local solver {type(solver).__name__} runs on the CPU only; "
                                             f"train with device 'cpu' instead of {self.device}")
            return solver.train_client(self, global_state, task, training_round)
        if not isinstance(solver, LaneSolver):
            raise InvalidParameterError(f"{type(solver).__name__} is not a local solver: subclass ClientSolver "
                                        "(privaudit.fl.engine.local_solver) and implement train_client")
        x, y = self.tensors(task.data, task.client_id)
        schedule = self.schedule(task, training_round)
        oracle = SequentialOracle(self.model, self.names, fixed, x, y, schedule, self.local.double_softmax)

        def lane(values: State | None) -> list[torch.Tensor] | None:
            return None if values is None else [values[n].unsqueeze(0) for n in self.names]

        def run():
            return run_lanes(
                lane(global_state),
                [schedule.steps],
                oracle,
                self.local,
                prox=objective.prox,
                anchor=lane(objective.anchor),
                linear=lane(objective.linear),
                solver=objective.solver,
            )

        result = seeded_torch_global(self.seeds.integer("dropout", training_round, task.client_id), run)
        state = {**fixed, **{n: p[0] for n, p in zip(self.names, result.params, strict=True)}}
        state = {k: state[k] for k in global_state}
        personal = None if result.personal is None else {n: p[0] for n, p in zip(self.names, result.personal, strict=True)}
        return LocalOutcome(
            task.client_id,
            state,
            steps=schedule.steps,
            epochs=task.epochs,
            mean_loss=float(result.loss_sum[0]) / schedule.steps,
            personal=personal,
        )

    # -- batched ---------------------------------------------------------------------------------
    def _train_batched(self, global_state: State, tasks: Sequence[LocalTask], training_round: int) -> list[LocalOutcome]:
        schedules = [self.schedule(t, training_round) for t in tasks]
        order = sorted(range(len(tasks)), key=lambda i: -schedules[i].steps)  # stable: ties keep client order
        lanes = [tasks[i] for i in order]
        plans = [schedules[i] for i in order]
        batches = lane_batches([self.tensors(t.data, t.client_id) for t in lanes], plans)
        steps = [p.steps for p in plans]
        count = len(lanes)
        fixed = {k: v.unsqueeze(0).expand(count, *v.shape) for k, v in global_state.items() if k not in self.names}
        # each lane's dropout stream is the one its client uses when trained alone ("dropout", round, client)
        generators = [self.seeds.torch("dropout", training_round, t.client_id) for t in lanes] if self.stacked.random else None
        oracle = StackedOracle(self.stacked, self.names, fixed, batches, self.num_classes, generators, self.local.double_softmax)

        def stack(values: list[State | None]) -> list[torch.Tensor] | None:
            if values[0] is None:
                return None
            return [torch.stack([v[n] for v in values]) for n in self.names]

        objective = lanes[0].objective
        result = run_lanes(
            [global_state[n].unsqueeze(0).repeat(count, *([1] * global_state[n].dim())) for n in self.names],
            steps,
            oracle,
            self.local,
            prox=objective.prox,
            anchor=stack([t.objective.anchor for t in lanes]) if objective.prox else None,
            linear=stack([t.objective.linear for t in lanes]),
            solver=objective.solver,
        )
        outcomes: dict[int, LocalOutcome] = {}
        for lane, task in enumerate(lanes):
            state = {k: v.clone() for k, v in global_state.items() if k not in self.names}
            state.update({n: p[lane].clone() for n, p in zip(self.names, result.params, strict=True)})
            state = {k: state[k] for k in global_state}
            personal = None
            if result.personal is not None:
                personal = {n: p[lane].clone() for n, p in zip(self.names, result.personal, strict=True)}
            outcomes[order[lane]] = LocalOutcome(
                task.client_id,
                state,
                steps=steps[lane],
                epochs=task.epochs,
                mean_loss=float(result.loss_sum[lane]) / steps[lane],
                personal=personal,
            )
        return [outcomes[i] for i in range(len(tasks))]


# -- worker processes (privaudit.executor.WorkerPool) ----------------------------------------------------------------
def _numpy_state(state: State | None) -> dict[str, np.ndarray] | None:
    """Tensors as numpy arrays for the pipe to a worker (plain pickling, no shared-memory handles), bit for bit."""
    return None if state is None else {k: v.detach().cpu().numpy() for k, v in state.items()}


def _from_numpy(state: dict[str, np.ndarray] | None) -> State | None:
    return None if state is None else {k: torch.from_numpy(v) for k, v in state.items()}


def _from_numpy_outcome(outcome: LocalOutcome) -> LocalOutcome:
    outcome.state = _from_numpy(outcome.state)
    outcome.personal = _from_numpy(outcome.personal)
    return outcome


def _worker_setup(payload) -> tuple[ClientTrainer, dict[int, ClientData]]:
    """In a worker: the federation's trainer (same model, settings and seed tree; built once per worker, one process)
    and the clients' data sent with the pool."""
    model, input_shape, num_classes, local, seeds, execution, client_data = payload
    return ClientTrainer(model, input_shape, num_classes, local, execution, seeds), client_data


def _train_group(trainer: ClientTrainer, global_state: State, tasks: Sequence[LocalTask], training_round: int,
                 batched: bool) -> list[LocalOutcome]:
    """One group of a round's clients in this process: one stacked run, or one client after another."""
    if batched:
        return trainer._train_batched(global_state, list(tasks), training_round)
    return [trainer.train_one(global_state, task, training_round) for task in tasks]


def _worker_train(context: tuple[ClientTrainer, dict[int, ClientData]], item) -> list[LocalOutcome]:
    """In a worker: a group of clients trained as the main process would (batched or one by one), tensors returned
    as numpy arrays. A task without data is a client whose data came with the pool."""
    trainer, client_data = context
    state, tasks, training_round, batched = item
    tasks = [replace(t, data=client_data[t.client_id]) if t.data is None else t for t in tasks]
    outcomes = _train_group(trainer, _from_numpy(state), tasks, training_round, batched)
    for outcome in outcomes:
        outcome.state = _numpy_state(outcome.state)
        outcome.personal = _numpy_state(outcome.personal)
    return outcomes
