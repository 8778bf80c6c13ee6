"""FedReg's local step with modified gradients (MG), as a differentiable forward model.

Source: Xu, Hong, Huang, Jiang, "Acceleration of Federated Learning with Alleviated Forgetting in Local
Training" (FedReg), ICLR 2022 — §3.2 eq. (10)–(11) (pseudo/perturbed-data regulariser) and §3.3 eq. (12)
(modified gradient); reference code Zoesgithub/FedReg@34b081f:FedUtils/fed/fedreg.py.

The pure pieces live in :mod:`privaudit.papers.fedreg.local_step` (the training engine,
:mod:`privaudit.papers.fedreg.algorithm`, uses the same ones):

* :func:`~privaudit.papers.fedreg.local_step.modified_gradient` — eq. (12): remove from the data gradient its
  component along the gradient of the pseudo data with uniform labels.
* :func:`~privaudit.papers.fedreg.local_step.fgsm_pseudo_inputs` — E signed-gradient *ascent* steps from the local
  inputs on the global model (§3.2; the reference code's ``FSGM``), clamped to the data range (the reference code
  discards its clamp, audit point R6). For an attacker the result can be made differentiable in the inputs: through
  every step with a straight-through estimator for the sign (``"straight-through"``), or by treating the FGSM
  displacement as a constant (``"identity"``: ∂x^s/∂x = I, cheaper, no second-order terms).

:class:`FedRegLocalTraining` here is the client's K local steps of eq. (11) with MG (eq. 12) and, optionally, the
regulariser of eq. (10), written functionally on the inversion attacks' model (:mod:`attacks.inversion.functional_model`);
it releases θ_K − θ_0. It is a :class:`~attacks.inversion.client_simulation.ClientSimulator`: the adaptive attacker's
forward model (:mod:`privaudit.papers.fedreg.attacks`) and, with ``create_graph=False``, what a FedReg client releases
in an inversion experiment (:mod:`privaudit.papers.fedreg.defences`).

D^{s'} follows the reference code (``generate_fake`` then uniform labels): the pseudo inputs are generated
from x with the true (or attacker-inferred) labels on the global model θ^{(t−1)}, then given the uniform
label (1/n)Σ_j e_j.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from attacks.inversion.client_simulation import batch_slices, fresh_leaves, loss_gradient
from attacks.inversion.functional_model import FunctionalModel, ParamDict
from privaudit.errors import InvalidParameterError
from privaudit.papers.fedreg.local_step import (
    FGSM_GRADIENTS,
    fgsm_pseudo_inputs,
    modified_gradient,
    regulariser_step,
)


@dataclass(frozen=True)
class FedRegLocalTraining:
    """K local steps of FedReg (eq. 11) with the data gradient replaced by MG (eq. 12); releases θ_K − θ_0.

    Per step on mini-batch B (consecutive slices, as :func:`batch_slices`):

    1. θ_γ = γθ + (1−γ)θ_0; g = ∇ L(B) at θ_γ; with ``use_modified_gradient`` g ← :func:`modified_gradient`
       (g, ∇ L(D^{s'}_B) at θ_γ); θ ← θ − η g.
    2. With ``regularize`` (eq. 10): θ_β = ½(θ + θ_0); g_s = ∇ L(D^s_B) (soft labels of the global model),
       g_p = ∇ L(D^p_B) (true labels), both at θ_β; w_s = max(0, ⟨θ − θ_0, g_s⟩/‖g_s‖²), θ ← θ − w_s g_s;
       w_p = max(0, ⟨θ − θ_0, g_p⟩/‖g_p‖²), θ ← θ − w_p g_p.

    Pseudo data D^s: ``fgsm_steps`` FGSM steps of size ``pseudo_step`` (η_s) from B on θ_0 with its labels;
    perturbed data D^p: the same with ``perturb_step`` (η_p, default 0.01·η_s). Both are generated once per
    round from θ_0, as in the reference code. ``fgsm_gradient`` (see :func:`fgsm_pseudo_inputs`) says how
    the attacker differentiates their generation (used only when ``create_graph=True``).
    """

    lr: float
    local_steps: int = 1
    batch_size: int | None = None
    gamma: float = 0.5
    pseudo_step: float = 0.1
    perturb_step: float | None = None
    fgsm_steps: int = 10
    use_modified_gradient: bool = True
    regularize: bool = True
    box: tuple[torch.Tensor, torch.Tensor] | None = None
    fgsm_gradient: str = "straight-through"
    eps: float = 1e-30
    update_kind: str = "delta"

    def __post_init__(self) -> None:
        if not self.lr > 0:
            raise InvalidParameterError(f"FedReg learning rate must be positive, got {self.lr}")
        if not 0.0 <= self.gamma <= 1.0:
            raise InvalidParameterError(f"FedReg γ must lie in [0, 1], got {self.gamma}")
        if self.local_steps < 1 or self.fgsm_steps < 0:
            raise InvalidParameterError("FedReg needs local_steps ≥ 1 and fgsm_steps ≥ 0")
        if self.pseudo_step < 0 or (self.perturb_step is not None and self.perturb_step < 0):
            raise InvalidParameterError("FedReg FGSM step sizes must be non-negative")
        if self.fgsm_gradient not in FGSM_GRADIENTS:
            raise InvalidParameterError(
                f"unknown FGSM gradient {self.fgsm_gradient!r}; choose one of: {', '.join(FGSM_GRADIENTS)}"
            )

    @property
    def perturb_step_size(self) -> float:
        return 0.01 * self.pseudo_step if self.perturb_step is None else self.perturb_step

    def simulate(
        self, model: FunctionalModel, inputs: torch.Tensor, targets: torch.Tensor, *, create_graph: bool
    ) -> ParamDict:
        """θ_K − θ_0 for the client's data (``inputs``, soft ``targets``)."""
        theta0 = model.params if create_graph else fresh_leaves(model.params)
        gradient = self.fgsm_gradient if create_graph else "none"
        box = None if self.box is None else (self.box[0].to(inputs.device), self.box[1].to(inputs.device))
        batches = batch_slices(inputs.shape[0], self.batch_size)
        num_classes: int | None = None
        pseudo: list[tuple[torch.Tensor, torch.Tensor]] = []
        perturbed: list[torch.Tensor] = []
        for batch in batches:
            x_b, y_b = inputs[batch], targets[batch]
            x_s = fgsm_pseudo_inputs(
                model, theta0, x_b, y_b, self.pseudo_step, self.fgsm_steps, box, gradient=gradient
            )
            y_s = torch.softmax(model(theta0, x_s), dim=-1)
            if not create_graph:
                y_s = y_s.detach()
            num_classes = y_s.shape[-1]
            pseudo.append((x_s, y_s))
            perturbed.append(
                fgsm_pseudo_inputs(
                    model, theta0, x_b, y_b, self.perturb_step_size, self.fgsm_steps, box, gradient=gradient
                )
            )
        assert num_classes is not None
        theta = dict(theta0)
        for step in range(self.local_steps):
            index = step % len(batches)
            batch = batches[index]
            x_s, y_s = pseudo[index]
            theta_gamma = {k: self.gamma * theta[k] + (1.0 - self.gamma) * theta0[k] for k in theta}
            if not create_graph:
                theta_gamma = fresh_leaves(theta_gamma)
            grad = loss_gradient(model, theta_gamma, inputs[batch], targets[batch], create_graph=create_graph)
            if self.use_modified_gradient:
                uniform = torch.full_like(y_s, 1.0 / num_classes)
                grad_uniform = loss_gradient(model, theta_gamma, x_s, uniform, create_graph=create_graph)
                grad = modified_gradient(grad, grad_uniform, self.eps)
            theta = {k: theta[k] - self.lr * grad[k] for k in theta}
            if self.regularize:
                theta = self._regularize(model, theta, theta0, (x_s, y_s), (perturbed[index], targets[batch]), create_graph)
            if not create_graph:
                theta = fresh_leaves(theta)
        return {k: (theta[k] - theta0[k]) if create_graph else (theta[k] - theta0[k]).detach() for k in theta}

    def _regularize(
        self,
        model: FunctionalModel,
        theta: ParamDict,
        theta0: ParamDict,
        pseudo: tuple[torch.Tensor, torch.Tensor],
        perturbed: tuple[torch.Tensor, torch.Tensor],
        create_graph: bool,
    ) -> ParamDict:
        """Eq. (10): project the accumulated change away from the pseudo- and perturbed-data gradients."""
        theta_beta = {k: 0.5 * (theta[k] + theta0[k]) for k in theta}
        if not create_graph:
            theta_beta = fresh_leaves(theta_beta)
        gradients = [loss_gradient(model, theta_beta, x, y, create_graph=create_graph) for x, y in (pseudo, perturbed)]
        theta, _ = regulariser_step(theta, theta0, gradients, self.eps)
        return theta

    def describe(self) -> dict[str, Any]:
        return {
            "client_training": "fedreg-mg" if self.use_modified_gradient else "fedreg",
            "lr": self.lr,
            "local_steps": self.local_steps,
            "batch_size": self.batch_size,
            "gamma": self.gamma,
            "pseudo_step": self.pseudo_step,
            "perturb_step": self.perturb_step_size,
            "fgsm_steps": self.fgsm_steps,
            "modified_gradient": self.use_modified_gradient,
            "regularize": self.regularize,
            "fgsm_clamped_to_data_range": self.box is not None,
            "fgsm_gradient": self.fgsm_gradient,
        }
