"""Smooth surrogates of (Leaky)ReLU for continuation ("homotopy") in gradient inversion.

A piecewise-linear network's gradient ∇_θ ℓ(x; θ) jumps in x where a unit's pre-activation changes sign, because the
backward pass multiplies by the activation's derivative (1 or the negative slope a). An update that is a *difference*
of gradients at nearby weights — FedReg's regularised step (Xu et al., ICLR 2022, eq. 10) leaves about a tenth of the
SGD step, largely through which units switch between θ_0 and θ_β — then depends on x mostly through those jumps, which
autograd does not see (``reports/inversion.md``, update anatomy).

The surrogate

    s_τ(z) = a·z + (1 − a)·τ·log(1 + exp(z/τ))          (softplus-smoothed LeakyReLU; a = 0 gives softplus-ReLU)

is smooth for τ > 0 and tends to LeakyReLU_a(z) = a·z + (1 − a)·max(z, 0) as τ → 0 (the error is at most
(1 − a)·τ·log 2); τ = 0 is the exact activation. Continuation methods for non-smooth objectives solve a sequence of
smoothed problems with τ decreasing to 0, each started at the previous solution (Allgower & Georg, "Numerical
Continuation Methods", 1990; Mobahi & Fisher, "On the link between Gaussian homotopy continuation and convex
envelopes", EMMCVPR 2015). :func:`smoothed_copy` gives the attacker a copy of its functional model whose activations
read the temperature from one shared :class:`Temperature`, so an attack can anneal it while it optimises.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from privaudit.errors import InvalidParameterError

from .functional_model import FunctionalModel


@dataclass
class Temperature:
    """The current τ of every surrogate activation built with it (0 = the exact activation)."""

    value: float = 0.0


class SmoothLeakyReLU(nn.Module):
    """s_τ(z) = a·z + (1 − a)·τ·softplus(z/τ), exactly LeakyReLU_a when ``temperature.value`` is 0."""

    def __init__(self, negative_slope: float, temperature: Temperature) -> None:
        super().__init__()
        self.negative_slope = float(negative_slope)
        self.temperature = temperature

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        tau = self.temperature.value
        if tau <= 0:
            return F.leaky_relu(z, self.negative_slope)
        a = self.negative_slope
        return a * z + (1.0 - a) * F.softplus(z, beta=1.0 / tau, threshold=20.0)


def smoothed_copy(model: FunctionalModel) -> tuple[FunctionalModel, Temperature]:
    """A copy of ``model`` (same parameter and buffer tensors) whose ``nn.ReLU`` / ``nn.LeakyReLU`` modules are
    :class:`SmoothLeakyReLU` sharing one :class:`Temperature`, initially 0 (exact). Raises if the model has no such
    activation module (a functional activation inside ``forward`` cannot be swapped)."""
    module = copy.deepcopy(model.module)
    temperature = Temperature()
    replaced = 0
    for parent in list(module.modules()):
        for name, child in list(parent.named_children()):
            if isinstance(child, nn.LeakyReLU):
                setattr(parent, name, SmoothLeakyReLU(child.negative_slope, temperature))
                replaced += 1
            elif isinstance(child, nn.ReLU):
                setattr(parent, name, SmoothLeakyReLU(0.0, temperature))
                replaced += 1
    if not replaced:
        raise InvalidParameterError(
            "activation smoothing needs nn.ReLU or nn.LeakyReLU modules in the model; this architecture has none"
        )
    return FunctionalModel(module=module, params=model.params, buffers=model.buffers, unknown=model.unknown), temperature


def annealed_temperature(start: float, iteration: int, anneal_iterations: int, ratio: float = 1e-3) -> float:
    """τ at ``iteration``: geometric from ``start`` to ``start·ratio`` over ``anneal_iterations``, then 0 (exact)."""
    if start <= 0 or iteration >= anneal_iterations:
        return 0.0
    return float(start * ratio ** (iteration / max(1, anneal_iterations)))
