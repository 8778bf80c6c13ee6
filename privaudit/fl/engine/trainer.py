"""Runs the local training of a round's sampled clients: batched on stacked parameters, or one by one.

The *sequential* trainer is the reference: one client at a time, ``functional_call`` on the model, any
model (buffers, dropout). The *batched* trainer puts every sampled client in a lane of stacked parameters
(:mod:`privaudit.fl.engine.stacked`) and runs the same optimiser loop (:func:`~privaudit.fl.engine.local_training.run_lanes`)
once for all of them. Both draw each client's mini-batch order from the same seeded stream
(``"shuffle"``, training round, client) and, for dropout, each client's masks from the same seeded stream
(``"dropout"``, training round, client), so for the same seed they compute the same local models up to
floating-point summation order.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call

from privaudit.data.base import ClientData
from privaudit.errors import InvalidParameterError
from privaudit.fl.engine.config import Execution, LocalTrainingConfig
from privaudit.fl.engine.local_training import (
    ExactMinimiser,
    LocalObjective,
    Schedule,
    active_counts,
    make_schedule,
    run_lanes,
)
from privaudit.fl.engine.params import State
from privaudit.fl.engine.seeding import SeedTree, seeded_torch_global
from privaudit.fl.engine.stacked import StackedModel, build_stacked_model

#: Upper bound on the floats of one pre-gathered chunk of mini-batches in the batched trainer.
_CHUNK_FLOATS = 4_000_000


@dataclass(frozen=True)
class LocalTask:
    """One sampled client's job in a training round."""

    client_id: int
    data: ClientData
    epochs: int
    objective: LocalObjective


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


class _SequentialOracle:
    """Mini-batch gradients of one client's mean cross-entropy (one lane)."""

    def __init__(self, model: nn.Module, names: Sequence[str], fixed: State, x: torch.Tensor, y: torch.Tensor, schedule: Schedule):
        self.model, self.names, self.fixed = model, list(names), fixed
        self.x, self.y = x, y
        self.indices = torch.from_numpy(schedule.indices)
        self.sizes = schedule.sizes

    def __call__(self, params, step, active):
        rows = self.indices[step, : int(self.sizes[step])]
        leaves = [p[0].detach().requires_grad_() for p in params]
        out = functional_call(self.model, {**self.fixed, **dict(zip(self.names, leaves, strict=True))}, (self.x[rows],))
        loss = F.cross_entropy(out, self.y[rows])
        grads = torch.autograd.grad(loss, leaves)
        return [g.unsqueeze(0) for g in grads], loss.detach().reshape(1)


class _StackedOracle:
    """Mini-batch gradients for many lanes at once; batches are gathered a chunk of steps at a time."""

    def __init__(
        self,
        stacked: StackedModel,
        names: Sequence[str],
        fixed: State,
        x_all: torch.Tensor,
        y_all: torch.Tensor,
        rows: np.ndarray,
        weights: np.ndarray,
        num_classes: int,
        active: np.ndarray,
        generators: Sequence[torch.Generator] | None = None,
    ):
        self.forward, self.names, self.fixed = stacked.forward, list(names), fixed
        self.generators = generators  # one per lane, in lane order: dropout masks (seeded as the sequential trainer's)
        self.x_all, self.y_all = x_all, y_all
        self.rows, self.weights, self.num_classes, self.active = rows, weights, num_classes, active
        per_step = max(1, rows.shape[1] * rows.shape[2] * max(1, int(np.prod(x_all.shape[1:]))))
        self.chunk = max(1, _CHUNK_FLOATS // per_step)
        self.start = self.stop = 0
        self.xc = self.tc = None

    def _load(self, step: int) -> None:
        stop = min(step + self.chunk, self.rows.shape[0])
        lanes = int(self.active[step])
        rows = torch.from_numpy(self.rows[step:stop, :lanes])
        weights = torch.from_numpy(self.weights[step:stop, :lanes])
        safe = rows.clamp_min(0)
        self.xc = self.x_all[safe]
        self.tc = F.one_hot(self.y_all[safe], self.num_classes).to(self.x_all.dtype) * weights.unsqueeze(-1)
        self.start, self.stop = step, stop

    def __call__(self, params, step, active):
        if not self.start <= step < self.stop:
            self._load(step)
        x = self.xc[step - self.start, :active]
        target = self.tc[step - self.start, :active]
        leaves = [p.detach().requires_grad_() for p in params]
        bound = {name: t[:active] for name, t in self.fixed.items()}
        bound.update(zip(self.names, leaves, strict=True))
        if self.generators is None:
            logits = self.forward(bound, x)
        else:  # real rows per lane at this step (padding rows have weight 0), for per-lane dropout masks
            lengths = (self.weights[step, :active] > 0).sum(axis=1).tolist()
            logits = self.forward(bound, x, generators=self.generators[:active], lengths=lengths)
        per_lane = -(torch.log_softmax(logits, dim=-1) * target).sum(dim=(1, 2))
        grads = torch.autograd.grad(per_lane.sum(), leaves)
        return list(grads), per_lane.detach()


def _tensors(data: ClientData) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.from_numpy(data.x_train), torch.from_numpy(data.y_train)


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
    ) -> None:
        self.model = model
        self.model.train()
        self.num_classes = int(num_classes)
        self.local = local
        self.seeds = seeds
        self.names = tuple(name for name, p in model.named_parameters() if p.requires_grad)
        self.stacked = None if execution is Execution.SEQUENTIAL else build_stacked_model(model, tuple(input_shape))
        if execution is Execution.BATCHED and self.stacked is None:
            raise InvalidParameterError(
                "this model cannot be trained batched (it has buffers, random layers or operations without a stacked form); "
                "use execution 'sequential' or 'auto'"
            )

    @property
    def mode(self) -> str:
        """How clients were actually trained: a solver without a stacked form (DP-SGD, FedReg, FedCurv, exact
        minimisation, mixed objectives) runs per client even when the model could be stacked."""
        if self.stacked is None:
            return "sequential"
        batched = f"batched ({self.stacked.kind})"
        used = getattr(self, "_used", set())
        if used == {"sequential"}:
            return "sequential (the local solver has no stacked form)"
        if used == {"batched", "sequential"}:
            return f"{batched} and sequential"
        return batched

    def schedule(self, task: LocalTask, training_round: int) -> Schedule:
        rng = self.seeds.numpy("shuffle", training_round, task.client_id)
        return make_schedule(task.data.num_train, task.epochs, self.local.batch_size, rng)

    def train(self, global_state: State, tasks: Sequence[LocalTask], training_round: int) -> list[LocalOutcome]:
        if not tasks:
            return []
        solver = tasks[0].objective.solver
        uniform = all(t.objective.solver == solver and t.objective.prox == tasks[0].objective.prox for t in tasks)
        uniform = uniform and len({t.objective.linear is None for t in tasks}) == 1
        used = self.__dict__.setdefault("_used", set())
        if self.stacked is not None and uniform and not isinstance(solver, ExactMinimiser) and not hasattr(solver, "train_client"):
            used.add("batched")
            return self._train_batched(global_state, tasks, training_round)
        used.add("sequential")
        return [self.train_one(global_state, task, training_round) for task in tasks]

    # -- sequential (reference) ------------------------------------------------------------------
    def train_one(self, global_state: State, task: LocalTask, training_round: int) -> LocalOutcome:
        """One client's local training by the sequential (reference) trainer."""
        objective = task.objective
        fixed = {k: v.clone() for k, v in global_state.items() if k not in self.names}
        custom = getattr(objective.solver, "train_client", None)
        if custom is not None:  # solvers that run the whole client job themselves (DP-SGD, privaudit.fl.privacy.dpsgd)
            return custom(self, global_state, task, training_round)
        x, y = _tensors(task.data)
        if isinstance(objective.solver, ExactMinimiser):
            from privaudit.fl.engine.glm import minimise_exactly

            state, info = minimise_exactly(self.model, self.names, global_state, x, y, objective)
            return LocalOutcome(task.client_id, state, steps=info["iterations"], epochs=task.epochs, mean_loss=info["loss"], info=info)
        schedule = self.schedule(task, training_round)
        oracle = _SequentialOracle(self.model, self.names, fixed, x, y, schedule)

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
        total_steps = plans[0].steps
        width = max(p.indices.shape[1] for p in plans)
        rows = np.full((total_steps, len(lanes), width), -1, dtype=np.int64)
        weights = np.zeros((total_steps, len(lanes), width), dtype=np.float32)
        xs, ys, offset = [], [], 0
        for lane, (task, plan) in enumerate(zip(lanes, plans, strict=True)):
            x, y = _tensors(task.data)
            xs.append(x)
            ys.append(y)
            block = plan.indices
            valid = block >= 0
            rows[: plan.steps, lane, : block.shape[1]] = np.where(valid, block + offset, -1)
            weights[: plan.steps, lane, : block.shape[1]] = valid / plan.sizes[:, None].astype(np.float32)
            offset += len(y)
        steps = [p.steps for p in plans]
        active = active_counts(steps)
        count = len(lanes)
        fixed = {k: v.unsqueeze(0).expand(count, *v.shape) for k, v in global_state.items() if k not in self.names}
        # each lane's dropout stream is the one its client uses when trained alone ("dropout", round, client)
        generators = [self.seeds.torch("dropout", training_round, t.client_id) for t in lanes] if self.stacked.random else None
        oracle = _StackedOracle(self.stacked, self.names, fixed, torch.cat(xs), torch.cat(ys), rows, weights, self.num_classes,
                                active, generators)

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
