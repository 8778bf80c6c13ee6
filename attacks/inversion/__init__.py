"""Gradient-inversion attacks; they return reconstructions and labels.

Threat model (what an attack receives): :class:`InversionPayload` = architecture factory + global weights +
released update + :class:`DataSpec` + :class:`ClientKnowledge`. Attacks by name: :func:`build_attack`
(``analytic``, ``label``, ``dlg``, ``ig``, ``adaptive-mg``, ``imprint`` — a malicious server that modifies the model). Client-side releases for experiments:
:func:`release_update`. End-to-end entry point: :func:`run_inversion`.

On models with BatchNorm every attack simulates the client in train mode: each layer normalises with the batch's own
statistics, as a training client does, and the running buffers stay the global ones
(:class:`~attacks.inversion.functional_model.FunctionalModel`). This holds for checkpoint attacks on recorded
architectures too, which used the stored running statistics (eval mode) before the BatchNorm prior was added.
"""

from .adaptive_mg import AdaptiveMGAttack, AdaptiveMGConfig, naive_and_adaptive
from .analytic import AnalyticAttack, AnalyticConfig
from .base import InversionAttack
from .client_simulation import FedSGDGradient, UnrolledLocalSGD
from .dlg import DLGAttack, DLGConfig
from .experiment import (
    DEFENCE_SPECS,
    InversionExperiment,
    InversionRun,
    ScoredAttack,
    attack_and_score,
    parse_defence,
    run_inversion,
)
from .fedreg_forward import FedRegLocalTraining, fgsm_pseudo_inputs, modified_gradient, sign_straight_through
from .figures import save_image_grid
from .imprint import ImprintAttack, ImprintConfig
from .inverting_gradients import InvertingGradientsAttack, InvertingGradientsConfig
from .label_attack import LabelInferenceAttack, LabelInferenceConfig
from .labels import infer_labels
from .registry import ATTACKS, attack_options, available_attacks, build_attack
from .release import (
    DPSGDRelease,
    FedAvgRelease,
    FedRegMGRelease,
    FedSGDRelease,
    build_defence,
    clipped_noisy_gradient,
    release_update,
)
from .threat_model import ClientKnowledge, DataSpec, InversionPayload, InversionResult

__all__ = [
    "ATTACKS",
    "DEFENCE_SPECS",
    "AdaptiveMGAttack",
    "AdaptiveMGConfig",
    "AnalyticAttack",
    "AnalyticConfig",
    "ClientKnowledge",
    "DLGAttack",
    "DLGConfig",
    "DPSGDRelease",
    "DataSpec",
    "FedAvgRelease",
    "FedRegLocalTraining",
    "FedRegMGRelease",
    "FedSGDGradient",
    "FedSGDRelease",
    "ImprintAttack",
    "ImprintConfig",
    "InversionAttack",
    "InversionExperiment",
    "InversionPayload",
    "InversionResult",
    "InversionRun",
    "InvertingGradientsAttack",
    "InvertingGradientsConfig",
    "LabelInferenceAttack",
    "LabelInferenceConfig",
    "ScoredAttack",
    "UnrolledLocalSGD",
    "attack_and_score",
    "attack_options",
    "available_attacks",
    "build_attack",
    "build_defence",
    "clipped_noisy_gradient",
    "fgsm_pseudo_inputs",
    "infer_labels",
    "modified_gradient",
    "naive_and_adaptive",
    "parse_defence",
    "release_update",
    "run_inversion",
    "save_image_grid",
    "sign_straight_through",
]
