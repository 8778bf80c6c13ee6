"""Adaptive inversion of FedReg-with-MG updates (privaudit audit point R4).

FedReg's privacy claim (Xu et al., ICLR 2022, §3.3 and App. B.4) was tested only against attackers
that assume plain FedAvg. An adaptive attacker knows the protocol — FedReg with modified gradients and
its hyper-parameters (γ, η_s, FGSM steps) — and simulates it for its candidate inputs: pseudo data by
FGSM from the candidates (sign differentiated with a straight-through estimator, or the FGSM
displacement held constant with ``fgsm_gradient="identity"``), the MG projection of
eq. (12) and, by default, the regulariser of eq. (10). It then runs Inverting Gradients on that forward
model (:class:`attacks.inversion.fedreg_forward.FedRegLocalTraining`).

:func:`naive_and_adaptive` runs both attackers on the same payload so reports can show the gap.

Against plain FedReg (``use_modified_gradient=False``) the same class simulates FedReg without MG, so the two
defences can be compared under one attack. The simulation is exact: run on the true example it reproduces the
released update to float precision (``tests/attacks/test_adaptive_fedreg.py``; measured per attacked example by
:mod:`privaudit.papers.fedreg.update_anatomy`). What limits the attack is the objective, not the model: for one
example and one step, eq. (10) subtracts from the SGD step its component along the pseudo-data gradient, which
is nearly parallel to it, leaving about a tenth of the step, and the rest depends on the input largely through
which LeakyReLU units change sign between θ_0 and θ_β. On the LeakyReLU ConvNet the matching loss at the true
image plus small noise is then of the same order as at random starts, so gradient descent does not lead to the
image (``reports/inversion.md``: the update anatomy and the adaptive rows).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import ClassVar

import torch

from privaudit.errors import InvalidParameterError

from .client_simulation import ClientSimulator
from .fedreg_forward import FedRegLocalTraining
from .inverting_gradients import InvertingGradientsAttack, InvertingGradientsConfig
from .threat_model import InversionPayload, InversionResult


@dataclass(frozen=True)
class AdaptiveMGConfig(InvertingGradientsConfig):
    """Inverting-Gradients settings plus the FedReg hyper-parameters the attacker assumes.

    The client's lr, local steps and batch size come from the payload's
    :class:`~attacks.inversion.threat_model.ClientKnowledge`.
    """

    gamma: float = 0.5
    pseudo_step: float = 0.1
    perturb_step: float | None = None
    fgsm_steps: int = 10
    use_modified_gradient: bool = True
    regularize: bool = True
    clamp_fgsm: bool = True
    fgsm_gradient: str = "straight-through"

    def __post_init__(self) -> None:
        super().__post_init__()
        if not 0.0 <= self.gamma <= 1.0:
            raise InvalidParameterError(f"FedReg γ must lie in [0, 1], got {self.gamma}")
        if self.fgsm_steps < 0 or self.pseudo_step < 0:
            raise InvalidParameterError("FedReg FGSM steps and step size must be non-negative")
        if self.fgsm_gradient not in ("straight-through", "identity"):
            raise InvalidParameterError(
                f"unknown FGSM gradient {self.fgsm_gradient!r}; choose straight-through or identity"
            )


def fedreg_simulator(
    payload: InversionPayload, cfg: AdaptiveMGConfig, device: torch.device | str = "cpu"
) -> FedRegLocalTraining:
    """FedReg-with-MG local training as the attacker models it for ``payload``'s client."""
    knowledge = payload.knowledge
    if knowledge.update_kind != "delta" or knowledge.lr is None:
        raise InvalidParameterError("the adaptive MG attack needs a parameter-delta update and the client's lr")
    return FedRegLocalTraining(
        lr=knowledge.lr,
        local_steps=knowledge.local_steps,
        batch_size=knowledge.batch_size,
        gamma=cfg.gamma,
        pseudo_step=cfg.pseudo_step,
        perturb_step=cfg.perturb_step,
        fgsm_steps=cfg.fgsm_steps,
        use_modified_gradient=cfg.use_modified_gradient,
        regularize=cfg.regularize,
        box=payload.data.box(device) if cfg.clamp_fgsm else None,
        fgsm_gradient=cfg.fgsm_gradient,
    )


class AdaptiveMGAttack(InvertingGradientsAttack):
    """Inverting Gradients through a simulation of FedReg with modified gradients."""

    name: ClassVar[str] = "adaptive-mg"
    description: ClassVar[str] = (
        "Inverting Gradients through FedReg's MG step (eq. 12) and regulariser, FGSM with a straight-through sign"
    )

    def __init__(self, config: AdaptiveMGConfig | None = None, device: torch.device | str = "cpu") -> None:
        super().__init__(config or AdaptiveMGConfig(), device)

    def simulator(self, payload: InversionPayload) -> ClientSimulator:
        return fedreg_simulator(payload, self.config, self.device)


def naive_and_adaptive(
    payload: InversionPayload,
    config: AdaptiveMGConfig,
    *,
    seed: int = 0,
    device: torch.device | str = "cpu",
) -> dict[str, InversionResult]:
    """Run the FedAvg-assuming ("naive") and the FedReg-simulating ("adaptive") attack with the same
    optimisation settings and seed; keys ``"naive"`` and ``"adaptive"``."""
    ig_fields = {f.name for f in fields(InvertingGradientsConfig)}
    naive_config = InvertingGradientsConfig(**{k: getattr(config, k) for k in ig_fields})
    return {
        "naive": InvertingGradientsAttack(naive_config, device).reconstruct(payload, seed=seed),
        "adaptive": AdaptiveMGAttack(config, device).reconstruct(payload, seed=seed),
    }
