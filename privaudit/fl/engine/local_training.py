"""Local training of clients as *lanes*: one optimiser loop that runs one client or many at once.

Every client minimises a local objective of one shape,

    h_i(ω) = F_i(ω) + (prox/2)·‖ω − anchor‖² + ⟨linear, ω⟩,

with F_i the mean cross-entropy over its data. The algorithms fill in the terms (FedProx: prox = μ,
anchor = ω̄ — FedProx eq. 2 / Upcycled-FL 003 eq. 3; SCAFFOLD: linear = c − c_i; FedDyn: prox = α,
linear = −∇L_i(θ_i^{t−1}); objective perturbation adds its noise n to ``linear``, Upcycled-FL Alg. 2).

The optimiser is written once, over parameter tensors that carry a leading *lane* dimension: the sequential
trainer runs it with one lane per client, the batched trainer with every sampled client in its own lane.
Lanes are ordered by decreasing number of steps, so at step s the active lanes are a prefix ``[:k]`` and a
finished client (or a straggler that stopped early) is never touched again — the masking of unequal step
counts is a slice, not arithmetic, and both trainers apply the same floating-point operations to a lane.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Protocol

import numpy as np
import torch

from privaudit.errors import InvalidParameterError
from privaudit.fl.engine.config import LocalTrainingConfig
from privaudit.fl.engine.local_solver import LaneSolver, LocalSolver
from privaudit.fl.engine.params import State


@dataclass(frozen=True)
class SGD(LaneSolver):
    """Mini-batch SGD with momentum on h_i (the default local solver)."""

    kind: str = "sgd"


@dataclass(frozen=True)
class MoreauEnvelope(LaneSolver):
    """pFedMe's bi-level local step (T Dinh et al. 2020, Alg. 1).

    For each mini-batch, the personalised model θ approximately solves min_θ f(θ; batch) + (λ/2)‖θ − w‖² by
    ``inner_steps`` (K) gradient steps of size ``personal_lr``; then the local model w takes an optimiser step
    on the Moreau-envelope gradient λ(w − θ). θ persists across the batches of a round.
    """

    lam: float
    inner_steps: int
    personal_lr: float
    kind: str = "moreau"

    def __post_init__(self) -> None:
        if not self.lam > 0 or not self.personal_lr > 0 or int(self.inner_steps) < 1:
            raise InvalidParameterError("pFedMe needs λ > 0, a positive personal learning rate and K ≥ 1 inner steps")


@dataclass(frozen=True)
class LocalObjective:
    """The terms an algorithm adds to a client's empirical loss, and the solver that minimises the sum
    (:mod:`privaudit.fl.engine.local_solver`)."""

    anchor: State | None = None
    prox: float = 0.0
    linear: State | None = None
    solver: LocalSolver = SGD()

    def __post_init__(self) -> None:
        if self.prox < 0 or math.isnan(self.prox):
            raise InvalidParameterError(f"the proximal coefficient must be ≥ 0, got {self.prox}")
        if self.prox > 0 and self.anchor is None:
            raise InvalidParameterError("a proximal term needs an anchor")

    def plus_linear(self, extra: State) -> LocalObjective:
        """The same objective with ``⟨extra, ω⟩`` added."""
        if self.linear is None:
            return replace(self, linear={k: v.clone() for k, v in extra.items()})
        return replace(self, linear={k: self.linear[k] + extra[k] for k in self.linear})


@dataclass(frozen=True)
class Schedule:
    """One client's mini-batches for one round: ``indices[s]`` holds step s's example indices, padded with −1."""

    indices: np.ndarray
    sizes: np.ndarray
    epochs: int

    @property
    def steps(self) -> int:
        return int(self.indices.shape[0])


def make_schedule(num_examples: int, epochs: int, batch_size: int, rng: np.random.Generator) -> Schedule:
    """``epochs`` shuffled passes over ``num_examples`` examples in batches of ``batch_size`` (the last one smaller).

    This is a ``DataLoader(shuffle=True, drop_last=False)`` pass per epoch, as in the Upcycled-FL client.
    """
    return schedule_from_orders(num_examples, epochs, batch_size, lambda: rng.permutation(num_examples))


def schedule_from_orders(num_examples: int, epochs: int, batch_size: int, next_order) -> Schedule:
    """``epochs`` passes, each over the order ``next_order()`` returns, cut into batches of ``batch_size`` (the last
    one smaller): how a schedule is laid out whatever draws its orders (numpy here, torch's DataLoader in
    :mod:`privaudit.fl.privacy.clock_seed`)."""
    if num_examples < 1:
        raise InvalidParameterError("a client with no training examples cannot train")
    per_epoch = -(-num_examples // batch_size)
    width = min(batch_size, num_examples)
    indices = np.full((epochs * per_epoch, width), -1, dtype=np.int64)
    sizes = np.empty(epochs * per_epoch, dtype=np.int64)
    step = 0
    for _ in range(epochs):
        order = next_order()
        for start in range(0, num_examples, batch_size):
            chunk = order[start : start + batch_size]
            indices[step, : len(chunk)] = chunk
            sizes[step] = len(chunk)
            step += 1
    return Schedule(indices, sizes, epochs)


class GradientOracle(Protocol):
    """Gradients of the mean mini-batch cross-entropy at step ``step`` for the first ``active`` lanes.

    Returns one gradient tensor per trainable parameter (shape ``[active, ...]``) and the per-lane losses.
    """

    def __call__(self, params: Sequence[torch.Tensor], step: int, active: int) -> tuple[list[torch.Tensor], torch.Tensor]: ...


@dataclass
class LaneResult:
    params: list[torch.Tensor]
    loss_sum: torch.Tensor  # per lane, summed over its steps
    personal: list[torch.Tensor] | None = None


def active_counts(steps: Sequence[int]) -> np.ndarray:
    """k(s) = number of lanes still training at step s, for lanes sorted by decreasing step count."""
    steps = np.asarray(steps, dtype=np.int64)
    if len(steps) > 1 and np.any(np.diff(steps) > 0):
        raise ValueError("lanes must be sorted by decreasing number of steps")
    total = int(steps[0]) if len(steps) else 0
    return np.array([int(np.sum(steps > s)) for s in range(total)], dtype=np.int64)


def run_lanes(
    params: Sequence[torch.Tensor],
    steps: Sequence[int],
    oracle: GradientOracle,
    config: LocalTrainingConfig,
    *,
    prox: float = 0.0,
    anchor: Sequence[torch.Tensor] | None = None,
    linear: Sequence[torch.Tensor] | None = None,
    solver: LaneSolver = SGD(),
) -> LaneResult:
    """Run local training for every lane; ``params``, ``anchor`` and ``linear`` are lane-stacked (``[C, ...]``).

    Per step, for the active lanes: g = ∇F(batch) + prox·(ω − anchor) + linear; buf ← m·buf + g; ω ← ω − lr·buf
    (SGD); or, for :class:`MoreauEnvelope`, K personal steps θ ← θ − η_p(∇f(θ; batch) + λ(θ − ω)) followed by
    the same optimiser step with g = λ(ω − θ) + prox·(ω − anchor) + linear.
    """
    if not isinstance(solver, LaneSolver):
        raise ValueError(f"the {solver.kind} solver trains each client itself (a ClientSolver), not as lanes")
    weights = [p.detach().clone() for p in params]
    counts = active_counts(steps)
    lanes = weights[0].shape[0] if weights else 0
    loss_sum = torch.zeros(lanes, dtype=torch.float64, device=weights[0].device if weights else None)
    buffers = [torch.zeros_like(w) for w in weights] if config.momentum > 0 else None
    personal = [w.clone() for w in weights] if isinstance(solver, MoreauEnvelope) else None
    with torch.no_grad():
        for step, k in enumerate(counts):
            k = int(k)
            live = [w[:k] for w in weights]
            if personal is None:
                with torch.enable_grad():
                    grads, losses = oracle(live, step, k)
            else:
                theta = [t[:k] for t in personal]
                losses = None
                for _ in range(solver.inner_steps):
                    with torch.enable_grad():
                        g_theta, inner_losses = oracle(theta, step, k)
                    if losses is None:
                        losses = inner_losses
                    # θ ← θ − η_p(∇f(θ) + λ(θ − ω))
                    pull = torch._foreach_sub(theta, live)
                    torch._foreach_add_(g_theta, pull, alpha=solver.lam)
                    torch._foreach_add_(theta, g_theta, alpha=-solver.personal_lr)
                grads = torch._foreach_sub(live, theta)
                torch._foreach_mul_(grads, solver.lam)
            if prox:
                torch._foreach_add_(grads, torch._foreach_sub(live, [a[:k] for a in anchor]), alpha=prox)
            if linear is not None:
                torch._foreach_add_(grads, [c[:k] for c in linear])
            if buffers is not None:
                velocity = [b[:k] for b in buffers]
                torch._foreach_mul_(velocity, config.momentum)
                torch._foreach_add_(velocity, grads)
                torch._foreach_add_(live, velocity, alpha=-config.lr)
            else:
                torch._foreach_add_(live, grads, alpha=-config.lr)
            loss_sum[:k] += losses.detach().double()
    return LaneResult(weights, loss_sum, personal)
