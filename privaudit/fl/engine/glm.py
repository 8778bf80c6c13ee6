"""Theorem 6.3's own setting: a generalised linear model trained to the exact minimiser.

Upcycled-FL's objective-perturbation guarantee (000 Thm 5.3 = 003 Thm 6.3) assumes a loss F̂(θᵀv, y) of one
feature vector v with ‖v‖ ≤ 1, ‖∇F̂‖ < u₁, |F̂''| ≤ u₂ ≤ 0.5|D_i|μ, and that each client releases the *exact*
minimiser of F_i(ω) + (μ/2)‖ω − ω̄‖² + ⟨n, ω⟩ (the proof inverts its first-order condition). This module
provides

* :class:`~privaudit.models.BinaryLogisticGLM` (defined in :mod:`privaudit.models`, re-exported here) — logits
  ``[0, wᵀx]`` (no bias), so cross-entropy is the log loss log(1 + e^{−z}) of z = ±wᵀx: u₁ = ‖x‖ ≤ 1 and
  u₂ = 1/4 (000 App. F.2);
* :func:`glm_feature_norms` — the norm of the GLM feature vector v per example for the models where the loss
  is a scalar GLM (also a 2-class linear softmax, where v = (e₁ − e₀) ⊗ (x, 1) and ‖v‖ = √2·‖(x, 1)‖);
* :class:`ExactMinimiser` — the local solver of that setting: :func:`minimise_exactly`, full-batch L-BFGS (float64,
  strong-Wolfe line search) until the gradient norm of the perturbed local objective is ≤ the stated tolerance; the
  norm reached is reported;
* :func:`normalise_rows` — scale every feature vector to norm ≤ 1 (the theorem's normalisation; it lives in
  :mod:`privaudit.data.base` so that ``--dataset-option normalise_rows=true`` applies it to any dataset).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call

from privaudit.data.base import normalise_rows  # noqa: F401 - re-exported: Theorem 6.3's normalisation
from privaudit.errors import InvalidParameterError
from privaudit.fl.engine.local_solver import ClientSolver, LocalOutcome, LocalTask, TrainerView
from privaudit.fl.engine.local_training import LocalObjective
from privaudit.fl.engine.params import State
from privaudit.models import BinaryLogisticGLM  # also re-exported (the class lives with the other models)


@dataclass(frozen=True)
class ExactMinimiser(ClientSolver):
    """Full-batch L-BFGS on h_i until ‖∇h_i‖ ≤ ``grad_tol`` (or ``max_iter`` iterations).

    Theorem 6.3 of Upcycled-FL (objective perturbation) is proven for the exact minimiser; this solver runs
    that setting and reports the gradient norm it reached (:func:`minimise_exactly`, on the trainer's device).
    """

    grad_tol: float = 1e-6
    max_iter: int = 1000
    kind: str = "exact"
    device_ready = True

    def __post_init__(self) -> None:
        if not self.grad_tol > 0 or int(self.max_iter) < 1:
            raise InvalidParameterError("the exact minimiser needs a positive gradient tolerance and max_iter ≥ 1")

    def train_client(self, trainer: TrainerView, global_state: State, task: LocalTask, training_round: int) -> LocalOutcome:
        x, y = trainer.tensors(task.data, task.client_id)
        state, info = minimise_exactly(trainer.model, trainer.names, global_state, x, y, task.objective)
        return LocalOutcome(task.client_id, state, steps=info["iterations"], epochs=task.epochs, mean_loss=info["loss"], info=info)


def glm_feature_norms(model: nn.Module, x: np.ndarray) -> np.ndarray | None:
    """‖v‖ per example when the model's cross-entropy is a scalar GLM F̂(θᵀv, y), else ``None``."""
    flat = np.asarray(x, dtype=np.float64).reshape(len(x), -1)
    norms = np.linalg.norm(flat, axis=1)
    if isinstance(model, BinaryLogisticGLM):
        return norms
    linear = [m for m in model.modules() if len(list(m.children())) == 0 and any(True for _ in m.parameters())]
    others = [m for m in model.modules() if len(list(m.children())) == 0 and not isinstance(m, nn.Linear | nn.Flatten | nn.Identity)]
    if len(linear) == 1 and isinstance(linear[0], nn.Linear) and not others and linear[0].out_features == 2:
        bias = 1.0 if linear[0].bias is not None else 0.0
        return math.sqrt(2.0) * np.sqrt(norms**2 + bias)
    return None


def minimise_exactly(
    model: nn.Module,
    names: Sequence[str],
    global_state: State,
    x: torch.Tensor,
    y: torch.Tensor,
    objective: LocalObjective,
) -> tuple[State, dict[str, Any]]:
    """argmin_ω F_i(ω) + (prox/2)‖ω − anchor‖² + ⟨linear, ω⟩ by L-BFGS, starting from the global model.

    Returns the minimiser (in the state's dtype) and ``{"grad_norm", "grad_tol", "iterations", "loss",
    "converged"}``; ``grad_norm`` is the L2 norm of the objective's gradient at the returned point (float64).
    """
    solver = objective.solver
    if not isinstance(solver, ExactMinimiser):
        raise ValueError("minimise_exactly needs an ExactMinimiser solver")
    fixed = {k: v.double() for k, v in global_state.items() if k not in names}
    shapes = [(n, global_state[n].shape, global_state[n].numel()) for n in names]
    theta = torch.cat([global_state[n].reshape(-1).double() for n in names]).requires_grad_()
    anchor = None if objective.anchor is None else torch.cat([objective.anchor[n].reshape(-1).double() for n in names])
    linear = None if objective.linear is None else torch.cat([objective.linear[n].reshape(-1).double() for n in names])
    xd = x.double()

    def unpack(vector: torch.Tensor) -> dict[str, torch.Tensor]:
        out, offset = {}, 0
        for n, shape, size in shapes:
            out[n] = vector[offset : offset + size].reshape(shape)
            offset += size
        return out

    def value(vector: torch.Tensor) -> torch.Tensor:
        loss = F.cross_entropy(functional_call(model, {**fixed, **unpack(vector)}, (xd,)), y)
        if objective.prox:
            loss = loss + 0.5 * objective.prox * (vector - anchor).pow(2).sum()
        if linear is not None:
            loss = loss + linear @ vector
        return loss

    optimiser = torch.optim.LBFGS(
        [theta], lr=1.0, max_iter=50, tolerance_grad=0.0, tolerance_change=0.0, history_size=50, line_search_fn="strong_wolfe"
    )

    def closure() -> torch.Tensor:
        optimiser.zero_grad()
        loss = value(theta)
        loss.backward()
        return loss

    iterations = 0
    grad_norm = math.inf
    while iterations < solver.max_iter:
        optimiser.step(closure)
        previous, iterations = iterations, int(optimiser.state[theta]["n_iter"])
        (grad,) = torch.autograd.grad(value(theta), theta)
        last_norm, grad_norm = grad_norm, float(grad.norm())
        # stop at the tolerance, or when 50 more iterations no longer reduce the gradient (float64 floor, ~1e-9)
        if grad_norm <= solver.grad_tol or not math.isfinite(grad_norm) or iterations == previous or grad_norm >= last_norm:
            break
    with torch.no_grad():
        final_loss = float(value(theta))
    state = dict(global_state)
    for n, tensor in unpack(theta.detach()).items():
        state[n] = tensor.to(global_state[n].dtype).clone()
    state = {k: state[k] for k in global_state}
    return state, {
        "grad_norm": grad_norm,
        "grad_tol": solver.grad_tol,
        "iterations": iterations,
        "loss": final_loss,
        "converged": grad_norm <= solver.grad_tol,
    }
