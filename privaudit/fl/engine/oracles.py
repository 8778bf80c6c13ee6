"""Mini-batch gradient oracles of the lane optimiser (:func:`~privaudit.fl.engine.local_training.run_lanes`).

An oracle answers "the gradients of the mean mini-batch cross-entropy at step s for the first k lanes"
(:class:`~privaudit.fl.engine.local_training.GradientOracle`):

* :class:`SequentialOracle` — one client (one lane), ``functional_call`` on any model: the reference;
* :class:`StackedOracle` — many lanes at once on a stacked forward (:mod:`privaudit.fl.engine.stacked`), their
  mini-batches gathered a chunk of steps at a time; each lane's loss is weighted per row, so padding rows count 0.

Both apply the reference codes' double softmax when asked (cross-entropy of softmax(logits),
:class:`~privaudit.fl.engine.config.LocalTrainingConfig`). :func:`client_tensors` gives a client's data as the
tensors every trainer process sees.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call

from privaudit.data.base import ClientData
from privaudit.fl.engine.local_training import Schedule, active_counts
from privaudit.fl.engine.params import State
from privaudit.fl.engine.stacked import StackedModel

#: Upper bound on the floats of one pre-gathered chunk of mini-batches in the stacked oracle.
_CHUNK_FLOATS = 4_000_000


def _loss_scores(logits: torch.Tensor, double_softmax: bool) -> torch.Tensor:
    """What the cross-entropy is applied to: the logits, or softmax(logits) for the reference codes' double softmax
    (:class:`~privaudit.fl.engine.config.LocalTrainingConfig`)."""
    return torch.softmax(logits, dim=-1) if double_softmax else logits


class SequentialOracle:
    """Mini-batch gradients of one client's mean cross-entropy (one lane)."""

    def __init__(self, model: nn.Module, names: Sequence[str], fixed: State, x: torch.Tensor, y: torch.Tensor, schedule: Schedule,
                 double_softmax: bool = False):
        self.model, self.names, self.fixed = model, list(names), fixed
        self.double_softmax = double_softmax
        self.x, self.y = x, y
        self.indices = torch.from_numpy(schedule.indices).to(x.device)
        self.sizes = schedule.sizes

    def __call__(self, params, step, active):
        rows = self.indices[step, : int(self.sizes[step])]
        leaves = [p[0].detach().requires_grad_() for p in params]
        out = functional_call(self.model, {**self.fixed, **dict(zip(self.names, leaves, strict=True))}, (self.x[rows],))
        loss = F.cross_entropy(_loss_scores(out, self.double_softmax), self.y[rows])
        grads = torch.autograd.grad(loss, leaves)
        return [g.unsqueeze(0) for g in grads], loss.detach().reshape(1)


@dataclass(frozen=True)
class LaneBatches:
    """Every lane's mini-batches over the lanes' concatenated data ``x``, ``y``: ``rows[s, lane, j]`` indexes the
    rows of step s (−1: padding, weight 0), ``weights`` = 1/(batch size) per real row, ``active[s]`` = lanes still
    training at step s (lanes sorted by decreasing step count)."""

    x: torch.Tensor
    y: torch.Tensor
    rows: np.ndarray
    weights: np.ndarray
    active: np.ndarray


def lane_batches(tensors: Sequence[tuple[torch.Tensor, torch.Tensor]], schedules: Sequence[Schedule]) -> LaneBatches:
    """The :class:`LaneBatches` of lanes with data ``tensors[i]`` and mini-batch schedules ``schedules[i]`` (lanes
    already in decreasing order of step count)."""
    total_steps = schedules[0].steps
    width = max(p.indices.shape[1] for p in schedules)
    rows = np.full((total_steps, len(schedules), width), -1, dtype=np.int64)
    weights = np.zeros((total_steps, len(schedules), width), dtype=np.float32)
    offset = 0
    for lane, ((_, y), plan) in enumerate(zip(tensors, schedules, strict=True)):
        block = plan.indices
        valid = block >= 0
        rows[: plan.steps, lane, : block.shape[1]] = np.where(valid, block + offset, -1)
        weights[: plan.steps, lane, : block.shape[1]] = valid / plan.sizes[:, None].astype(np.float32)
        offset += len(y)
    active = active_counts([p.steps for p in schedules])
    return LaneBatches(torch.cat([x for x, _ in tensors]), torch.cat([y for _, y in tensors]), rows, weights, active)


class StackedOracle:
    """Mini-batch gradients for many lanes at once; batches are gathered a chunk of steps at a time."""

    def __init__(self, stacked: StackedModel, names: Sequence[str], fixed: State, batches: LaneBatches, num_classes: int,
                 generators: Sequence[torch.Generator] | None = None, double_softmax: bool = False):
        self.forward, self.names, self.fixed = stacked.forward, list(names), fixed
        self.double_softmax = double_softmax
        self.generators = generators  # one per lane, in lane order: dropout masks (seeded as the sequential trainer's)
        self.x_all, self.y_all = batches.x, batches.y
        self.rows, self.weights, self.num_classes, self.active = batches.rows, batches.weights, num_classes, batches.active
        per_step = max(1, self.rows.shape[1] * self.rows.shape[2] * max(1, int(np.prod(self.x_all.shape[1:]))))
        self.chunk = max(1, _CHUNK_FLOATS // per_step)
        self.start = self.stop = 0
        self.xc = self.tc = None

    def _load(self, step: int) -> None:
        stop = min(step + self.chunk, self.rows.shape[0])
        lanes = int(self.active[step])
        device = self.x_all.device
        rows = torch.from_numpy(self.rows[step:stop, :lanes]).to(device)
        weights = torch.from_numpy(self.weights[step:stop, :lanes]).to(device)
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
        per_lane = -(torch.log_softmax(_loss_scores(logits, self.double_softmax), dim=-1) * target).sum(dim=(1, 2))
        grads = torch.autograd.grad(per_lane.sum(), leaves)
        return list(grads), per_lane.detach()


def _canonical(t: torch.Tensor) -> torch.Tensor:
    """``t`` with row-major strides, size-1 dimensions included.

    numpy and torch call an array with a size-1 channel dimension contiguous whatever that dimension's stride, but
    torch's convolutions read a stride-1 channel as *channels-last* and take another kernel (other rounding). A
    worker receives the data pickled, i.e. with canonical strides, so the trainer gives every process those.
    """
    expected, step = [], 1
    for size in reversed(t.shape):
        expected.append(step)
        step *= max(int(size), 1)
    return t if t.stride() == tuple(reversed(expected)) else t.clone(memory_format=torch.contiguous_format)


def client_tensors(data: ClientData) -> tuple[torch.Tensor, torch.Tensor]:
    """A client's training inputs (row-major strides, :func:`_canonical`) and labels as CPU tensors."""
    return _canonical(torch.from_numpy(data.x_train)), torch.from_numpy(data.y_train)
