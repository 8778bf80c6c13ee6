"""Gradient-inversion attacks; they return reconstructions and labels.

Threat model (what an attack receives): :class:`InversionPayload` = architecture factory + global weights +
released update + :class:`DataSpec` + :class:`ClientKnowledge`. Attacks by name: :func:`build_attack`
(``analytic``, ``label``, ``dlg``, ``ig``, ``imprint`` — a malicious server that modifies the model — and the attacks
the registered papers contribute: :func:`registered_attacks`). Client-side releases for experiments:
:func:`release_update` under a defence by name (:func:`parse_defence`, :func:`registered_defences`). End-to-end entry
point: :func:`run_inversion`.

On models with BatchNorm every attack simulates the client in train mode: each layer normalises with the batch's own
statistics, as a training client does, and the running buffers stay the global ones
(:class:`~attacks.inversion.functional_model.FunctionalModel`). This holds for checkpoint attacks on recorded
architectures too, which used the stored running statistics (eval mode) before the BatchNorm prior was added.
"""

from .analytic import AnalyticAttack, AnalyticConfig
from .base import InversionAttack
from .client_simulation import FedSGDGradient, UnrolledLocalSGD
from .dlg import DLGAttack, DLGConfig
from .experiment import (
    InversionExperiment,
    InversionRun,
    ScoredAttack,
    attack_and_score,
    defence_specs,
    parse_defence,
    run_inversion,
)
from .figures import save_image_grid
from .imprint import ImprintAttack, ImprintConfig
from .inverting_gradients import InvertingGradientsAttack, InvertingGradientsConfig
from .label_attack import LabelInferenceAttack, LabelInferenceConfig
from .labels import infer_labels
from .registry import attack_options, available_attacks, build_attack, registered_attacks
from .release import (
    DPSGDRelease,
    FedAvgRelease,
    FedSGDRelease,
    clipped_noisy_gradient,
    registered_defences,
    release_update,
)
from .threat_model import ClientKnowledge, DataSpec, InversionPayload, InversionResult

__all__ = [
    "AnalyticAttack",
    "AnalyticConfig",
    "ClientKnowledge",
    "DLGAttack",
    "DLGConfig",
    "DPSGDRelease",
    "DataSpec",
    "FedAvgRelease",
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
    "clipped_noisy_gradient",
    "defence_specs",
    "infer_labels",
    "parse_defence",
    "registered_attacks",
    "registered_defences",
    "release_update",
    "run_inversion",
    "save_image_grid",
]
