"""FedReg's pure local-step mathematics, shared by the training engine and the inversion attacks.

Source: Xu, Hong, Huang, Jiang, "Acceleration of Federated Learning with Alleviated Forgetting in Local
Training" (FedReg), ICLR 2022 — §3.2 (pseudo and perturbed data by FGSM), eq. (10)–(11) (the regulariser
and the local step) and §3.3 eq. (12) (modified gradient, MG); reference code Zoesgithub/FedReg@34b081f:
FedUtils/fed/fedreg.py (``step_func``) and FedUtils/models/utils.py (``FSGM``).

Every function here works on parameter dictionaries (name → tensor) and a ``forward(params, x) -> logits``
callable, so :mod:`privaudit.papers.fedreg.algorithm` (training) and :mod:`privaudit.papers.fedreg.forward`
(the attacker's differentiable simulation) run the same mathematics:

* :func:`modified_gradient` — eq. (12);
* :func:`fgsm_pseudo_inputs` — E signed-gradient ascent steps from the local inputs on the global model
  (§3.2), optionally clamped to the data range (the reference code's ``FSGM`` discards its clamp, audit
  point R6), optionally differentiable in the inputs (straight-through sign, or identity);
* :func:`regulariser_step` — eq. (10)–(11): subtract w_s·g_β(D^s) then w_p·g_β(D^p), weights clamped at 0.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch
import torch.nn.functional as F

from privaudit.errors import InvalidParameterError

ParamDict = dict[str, torch.Tensor]
Forward = Callable[[Mapping[str, torch.Tensor], torch.Tensor], torch.Tensor]

#: How FGSM pseudo inputs depend on the inputs for autograd (see :func:`fgsm_pseudo_inputs`).
FGSM_GRADIENTS: tuple[str, ...] = ("none", "straight-through", "identity")


def flat_dot(a: Mapping[str, torch.Tensor], b: Mapping[str, torch.Tensor]) -> torch.Tensor:
    """⟨a, b⟩ over every entry of two parameter dictionaries with the same keys."""
    return sum((a[k] * b[k]).sum() for k in a)  # type: ignore[return-value]


def soft_cross_entropy(logits: torch.Tensor, targets: torch.Tensor, reduction: str = "mean") -> torch.Tensor:
    """−Σ_c t_c log softmax(z)_c per example, averaged (``"mean"``) or summed (``"sum"``) over the batch.

    FedReg's loss with soft labels (the global model's predictions on pseudo data, §3.2) and uniform labels
    (D^{s'} of eq. 12); equal to ``F.cross_entropy`` for one-hot targets.
    """
    per_example = -(targets * F.log_softmax(logits, dim=-1)).sum(dim=-1)
    if reduction == "sum":
        return per_example.sum()
    if reduction != "mean":
        raise InvalidParameterError(f"unknown reduction {reduction!r}; use 'mean' or 'sum'")
    return per_example.mean()


def modified_gradient(
    data_gradient: Mapping[str, torch.Tensor],
    pseudo_gradient: Mapping[str, torch.Tensor],
    eps: float = 1e-30,
) -> dict[str, torch.Tensor]:
    """FedReg's modified gradient, eq. (12) of Xu et al. (ICLR 2022).

    g̃_γ(D) = g_γ(D) − v·g_γ(D^{s'}),  v = ⟨g_γ(D), g_γ(D^{s'})⟩ / ‖g_γ(D^{s'})‖²,

    with inner product and norm taken jointly over all parameters (one scalar v, as the reference code's
    ``sw``). ``data_gradient`` is g_γ(D), the gradient of the local data's loss at θ_γ; ``pseudo_gradient``
    is g_γ(D^{s'}), the gradient at the same θ_γ of the pseudo inputs with uniform labels. Both map
    parameter names to tensors with the same keys. ``eps`` guards the division when the pseudo gradient
    vanishes (then g̃ = g). Differentiable in both arguments.
    """
    if set(data_gradient) != set(pseudo_gradient):
        raise InvalidParameterError("data and pseudo-data gradients must cover the same parameters")
    v = flat_dot(data_gradient, pseudo_gradient) / (flat_dot(pseudo_gradient, pseudo_gradient) + eps)
    return {k: data_gradient[k] - v * pseudo_gradient[k] for k in data_gradient}


class _SignStraightThrough(torch.autograd.Function):
    """sign(v) forward; backward passes the gradient where |v| ≤ 1 (hard-tanh straight-through estimator,
    Bengio et al. 2013), so FGSM steps become differentiable with respect to their inputs."""

    @staticmethod
    def forward(ctx: Any, v: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(v)
        return torch.sign(v)

    @staticmethod
    def backward(ctx: Any, grad_output: torch.Tensor) -> torch.Tensor:
        (v,) = ctx.saved_tensors
        return grad_output * (v.abs() <= 1).to(grad_output.dtype)


def sign_straight_through(v: torch.Tensor) -> torch.Tensor:
    """torch.sign with a hard-tanh straight-through gradient."""
    return _SignStraightThrough.apply(v)


def fgsm_pseudo_inputs(
    forward: Forward,
    params: Mapping[str, torch.Tensor],
    inputs: torch.Tensor,
    targets: torch.Tensor,
    step_size: float,
    steps: int,
    box: tuple[torch.Tensor, torch.Tensor] | None = None,
    *,
    gradient: str = "none",
) -> torch.Tensor:
    """x^s_j = clip(x^s_{j−1} + η·sign(∇_x L_θ(x^s_{j−1}, y))), j = 1..E, from x^s_0 = x (FedReg §3.2).

    ``forward(params, x)`` returns logits; ``params`` is the global model θ^{(t−1)}; ``targets`` are (soft)
    labels; ``box`` = (low, high) bounds in model space (broadcastable to ``inputs``), or ``None`` to
    reproduce the reference code's missing clamp (audit point R6). The sign of ∇_x of the *summed* loss
    is each example's own sign, so the result does not depend on how examples are batched.
    ``gradient`` says how the result depends on ``inputs`` for autograd: ``"none"`` — a constant
    (detached), as on the client; ``"straight-through"`` — differentiated through every step, the sign by
    :func:`sign_straight_through`; ``"identity"`` — x^s = x + (FGSM displacement, held constant).
    """
    if steps < 0 or step_size < 0:
        raise InvalidParameterError("FGSM needs non-negative steps and step size")
    if gradient not in FGSM_GRADIENTS:
        raise InvalidParameterError(f"unknown FGSM gradient {gradient!r}; choose one of: {', '.join(FGSM_GRADIENTS)}")
    straight_through = gradient == "straight-through"
    x = inputs if straight_through else inputs.detach()
    for _ in range(steps):
        if not straight_through:
            x = x.detach().requires_grad_(True)
        loss = soft_cross_entropy(forward(params, x), targets)
        (grad_x,) = torch.autograd.grad(loss, x, create_graph=straight_through)
        direction = sign_straight_through(grad_x) if straight_through else torch.sign(grad_x)
        x = x + step_size * direction
        if box is not None:
            x = torch.maximum(torch.minimum(x, box[1]), box[0])
    if gradient == "identity":
        return inputs + (x - inputs).detach()
    return x if straight_through else x.detach()


def regulariser_weight(
    change: Mapping[str, torch.Tensor], gradient: Mapping[str, torch.Tensor], eps: float = 1e-30
) -> torch.Tensor:
    """w = max(0, ⟨θ − θ^{(t−1)}, g⟩ / ‖g‖²): one weight of FedReg eq. (11), clamped at 0."""
    return torch.clamp(flat_dot(change, gradient) / (flat_dot(gradient, gradient) + eps), min=0.0)


def regulariser_step(
    theta: Mapping[str, torch.Tensor],
    theta0: Mapping[str, torch.Tensor],
    gradients: Sequence[Mapping[str, torch.Tensor]],
    eps: float = 1e-30,
) -> tuple[ParamDict, list[torch.Tensor]]:
    """FedReg eq. (10)–(11): θ ← θ − w_s g_β(D^s), then θ ← θ − w_p g_β(D^p).

    ``gradients`` = (g_β(D^s), g_β(D^p)), both evaluated at θ_β = ½(θ + θ^{(t−1)}) before the update;
    w_s = max(0, ⟨θ − θ^{(t−1)}, g_s⟩/‖g_s‖²) and w_p = max(0, ⟨θ − w_s g_s − θ^{(t−1)}, g_p⟩/‖g_p‖²)
    (each weight uses the parameters after the previous subtraction). Returns the new θ and the weights.
    Differentiable in every argument.
    """
    out = dict(theta)
    weights = []
    for g in gradients:
        change = {k: out[k] - theta0[k] for k in out}
        weight = regulariser_weight(change, g, eps)
        weights.append(weight)
        out = {k: out[k] - weight * g[k] for k in out}
    return out, weights


def interpolate(theta: Mapping[str, torch.Tensor], theta0: Mapping[str, torch.Tensor], weight: float) -> ParamDict:
    """weight·θ + (1 − weight)·θ^{(t−1)}: θ_γ (weight γ) and θ_β (weight ½) of FedReg eq. (11)."""
    return {k: weight * theta[k] + (1.0 - weight) * theta0[k] for k in theta}
