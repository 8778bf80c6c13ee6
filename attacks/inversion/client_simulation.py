"""Functional simulations of a client's local training: the attacker's forward models.

A simulator maps (global parameters, inputs, soft targets) to the update the client would release.
Attacks call it with ``create_graph=True`` on candidate inputs and differentiate the distance to the
released update with respect to those inputs; :mod:`attacks.inversion.release` calls the same code with
``create_graph=False`` to produce ground-truth updates, so both sides agree by construction.

* :class:`FedSGDGradient` — the mean loss gradient of one batch (FedSGD; Zhu et al. 2019, Geiping et
  al. 2020 §3).
* :class:`UnrolledLocalSGD` — K local SGD steps on consecutive mini-batches, released as θ_K − θ_0,
  optionally with FedProx's proximal term (μ/2)‖θ − θ_0‖² (Li et al. 2020). Unrolling the steps
  functionally is the multi-step attack of Geiping et al. 2020 §5 ("FedAvg" updates) and breaching's
  ``local_update`` user.

Papers add their own client models (the same :class:`ClientSimulator` protocol) for the attacks they contribute.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import torch

from privaudit.errors import InvalidParameterError

from .functional_model import FunctionalModel, ParamDict, soft_cross_entropy
from .threat_model import ClientKnowledge


class ClientSimulator(Protocol):
    """What every forward model offers: the kind of update it releases and the simulation itself."""

    update_kind: str

    def simulate(
        self,
        model: FunctionalModel,
        inputs: torch.Tensor,
        targets: torch.Tensor,
        *,
        create_graph: bool,
    ) -> ParamDict: ...

    def describe(self) -> dict[str, Any]: ...


def batch_slices(num_examples: int, batch_size: int | None) -> list[slice]:
    """Consecutive mini-batches over the examples in their given order (the last one may be shorter).

    Both the released update and the attacker's simulation use this order; because candidate
    reconstructions are an unordered set, fixing it loses the attacker nothing.
    """
    size = num_examples if batch_size is None else batch_size
    return [slice(start, min(start + size, num_examples)) for start in range(0, num_examples, size)]


def loss_gradient(
    model: FunctionalModel,
    params: ParamDict,
    inputs: torch.Tensor,
    targets: torch.Tensor,
    *,
    create_graph: bool,
) -> ParamDict:
    """∇_θ of the mean soft cross-entropy at ``params`` (differentiable when ``create_graph``)."""
    loss = soft_cross_entropy(model(params, inputs), targets)
    grads = torch.autograd.grad(loss, list(params.values()), create_graph=create_graph)
    return dict(zip(params.keys(), grads, strict=True))


def fresh_leaves(params: ParamDict) -> ParamDict:
    """Detached copies that require grad: the starting point of a non-differentiable simulation."""
    return {k: v.detach().requires_grad_(True) for k, v in params.items()}


@dataclass(frozen=True)
class FedSGDGradient:
    """Release the mean loss gradient over all examples (one FedSGD step, before the learning rate)."""

    update_kind: str = "gradient"

    def simulate(
        self, model: FunctionalModel, inputs: torch.Tensor, targets: torch.Tensor, *, create_graph: bool
    ) -> ParamDict:
        params = model.params if create_graph else fresh_leaves(model.params)
        grads = loss_gradient(model, params, inputs, targets, create_graph=create_graph)
        return grads if create_graph else {k: g.detach() for k, g in grads.items()}

    def describe(self) -> dict[str, Any]:
        return {"client_training": "fedsgd-gradient"}


@dataclass(frozen=True)
class UnrolledLocalSGD:
    """``local_steps`` plain SGD steps (FedAvg), or FedProx with ``proximal_mu > 0``; releases θ_K − θ_0.

    Step k uses mini-batch ``k mod ⌈n/b⌉`` of :func:`batch_slices`; each step minimises the batch's mean
    cross-entropy plus (μ/2)‖θ − θ_0‖².
    """

    lr: float
    local_steps: int
    batch_size: int | None = None
    proximal_mu: float = 0.0
    update_kind: str = "delta"

    def __post_init__(self) -> None:
        if not self.lr > 0:
            raise InvalidParameterError(f"local learning rate must be positive, got {self.lr}")
        if self.local_steps < 1:
            raise InvalidParameterError(f"local_steps must be at least 1, got {self.local_steps}")
        if self.proximal_mu < 0:
            raise InvalidParameterError(f"proximal_mu must be non-negative, got {self.proximal_mu}")

    def simulate(
        self, model: FunctionalModel, inputs: torch.Tensor, targets: torch.Tensor, *, create_graph: bool
    ) -> ParamDict:
        start = model.params if create_graph else fresh_leaves(model.params)
        batches = batch_slices(inputs.shape[0], self.batch_size)
        theta = dict(start)
        for step in range(self.local_steps):
            batch = batches[step % len(batches)]
            loss = soft_cross_entropy(model(theta, inputs[batch]), targets[batch])
            if self.proximal_mu > 0 and step > 0:
                loss = loss + 0.5 * self.proximal_mu * sum(((theta[k] - start[k]) ** 2).sum() for k in theta)
            grads = torch.autograd.grad(loss, list(theta.values()), create_graph=create_graph)
            theta = {k: theta[k] - self.lr * g for k, g in zip(theta.keys(), grads, strict=True)}
            if not create_graph:
                theta = fresh_leaves(theta)
        return {k: theta[k] - start[k] if create_graph else (theta[k] - start[k]).detach() for k in theta}

    def describe(self) -> dict[str, Any]:
        return {
            "client_training": "fedprox-unrolled" if self.proximal_mu > 0 else "fedavg-unrolled",
            "lr": self.lr,
            "local_steps": self.local_steps,
            "batch_size": self.batch_size,
            "proximal_mu": self.proximal_mu,
        }


def plain_simulator(knowledge: ClientKnowledge) -> FedSGDGradient | UnrolledLocalSGD:
    """The simulator a FedAvg/FedProx-assuming ("naive") attacker builds from its knowledge."""
    if knowledge.update_kind == "gradient":
        return FedSGDGradient()
    assert knowledge.lr is not None  # validated by ClientKnowledge
    return UnrolledLocalSGD(
        lr=knowledge.lr,
        local_steps=knowledge.local_steps,
        batch_size=knowledge.batch_size,
        proximal_mu=knowledge.proximal_mu,
    )
